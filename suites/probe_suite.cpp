#include "suites/probe_suite.hpp"
#include "contract/results.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "contract/atomic_file.hpp"
#include "contract/plan.hpp"
#include "contract/cells.hpp"
#include "probes/child.hpp"
#include "probes/env.hpp"
#include "probes/oracle_cache.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "probes/worker.hpp"
#include "probes/workload.hpp"
#include "suites/results_dir.hpp"

namespace detaudit {

namespace fs = std::filesystem;

nlohmann::json ProbePlan::to_json() const {
  nlohmann::json t = nlohmann::json::array(), w = nlohmann::json::array();
  for (auto& s : targets) t.push_back(s.str());
  for (auto& s : workloads) w.push_back(s.str());
  nlohmann::json j = {{"suite", suite}, {"targets", t}, {"workloads", w}, {"repeats", repeats}, {"timeout_s", timeout_s}};
  if (custom) j["custom"] = true;  // absent for the suite as defined, so its plans stay as they were
  return j;
}

namespace {

struct SuiteDef {
  std::vector<std::string> targets, workloads;
  int repeats;
};

SuiteDef suite_def(const std::string& name) {
  SuiteDef d;
  // Every backend's default targets come from its registry entry (BackendEntry::suite_targets).
  d.targets = suite_default_targets(name);
  if (name == "quick") {
    d.workloads = {"matmul?m=256&n=256&k=515",
                   "matmul?m=96&n=80&k=72&ta=t&tb=t",
                   "matmul?m=128&n=128&k=257&dtype=f64",
                   "conv2d?n=4&c=16&h=16&w=16&k=32&pass=fwd",
                   "conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_data",
                   "conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter",
                   "conv2d?n=2&c=8&h=15&w=15&k=8&stride=2&pad=1&pass=bwd_filter",
                   "reduce?op=sum&n=1000000",
                   "reduce?op=dot&n=1000000",
                   "reduce?op=norm&n=1000000",
                   "reduce?op=softmax&n=256000&cols=1000",
                   "maxpool?n=4&c=16&h=32&w=32&window=3&stride=2&pass=bwd",
                   "batchinv?m=128&n=256&k=256&rows=8"};
    d.repeats = 10;
  } else {  // full
    d.workloads = {"matmul?m=1024&n=1024&k=1024",
                   "matmul?m=515&n=515&k=515",
                   "matmul?m=96&n=80&k=72&ta=t&tb=t",
                   "matmul?m=512&n=512&k=512&dtype=f64",
                   "matmul?m=64&n=64&k=64&dist=int",
                   "conv2d?n=8&c=32&h=28&w=28&k=64&pass=fwd",
                   "conv2d?n=8&c=32&h=28&w=28&k=64&pass=bwd_data",
                   "conv2d?n=8&c=32&h=28&w=28&k=64&pass=bwd_filter",
                   "conv2d?n=4&c=16&h=31&w=31&k=16&r=5&s=5&stride=2&pad=2&pass=bwd_filter",
                   "reduce?op=sum&n=10000000",
                   "reduce?op=dot&n=10000000",
                   "reduce?op=norm&n=10000000",
                   "reduce?op=softmax&n=1024000&cols=1000",
                   "maxpool?n=8&c=32&h=56&w=56&window=3&stride=2&pass=bwd",
                   "batchinv?m=512&n=512&k=512&rows=16"};
    d.repeats = 20;
  }
  return d;
}

Status parse_all(const std::vector<std::string>& texts, bool target, std::vector<Spec>* out) {
  std::set<std::string> seen;
  for (auto& t : texts) {
    Spec s;
    DETAUDIT_RETURN_IF_ERROR(target ? parse_target(t, &s) : parse_workload(t, &s));
    for (auto& e : target ? expand_all(s) : std::vector<Spec>{s})
      if (seen.insert(e.str()).second) out->push_back(e);
  }
  return Status::ok();
}

}  // namespace

std::vector<std::string> suite_names() { return probe_suite_names(); }

Status make_plan(const std::string& suite, const std::string& targets_csv, const std::string& workloads_csv,
                 int repeats, double timeout_s, ProbePlan* plan) {
  auto names = suite_names();
  if (std::find(names.begin(), names.end(), suite) == names.end()) {
    return Status::invalid(fmt::format("unknown suite '{}' (known: {})", suite, fmt::join(names, ", ")));
  }
  SuiteDef d = suite_def(suite);
  ProbePlan p;
  p.suite = suite;
  p.custom = !targets_csv.empty() || !workloads_csv.empty();
  StatusOr<std::vector<std::string>> t = targets_csv.empty() ? d.targets : split_list(targets_csv);
  if (!t) return t.status().prefixed("--targets ");
  StatusOr<std::vector<std::string>> w = workloads_csv.empty() ? d.workloads : split_list(workloads_csv);
  if (!w) return w.status().prefixed("--workloads ");
  if (!targets_csv.empty() && t->empty()) return Status::invalid("--targets is empty");
  if (!workloads_csv.empty() && w->empty()) return Status::invalid("--workloads is empty");
  DETAUDIT_RETURN_IF_ERROR(parse_all(*t, true, &p.targets));
  DETAUDIT_RETURN_IF_ERROR(parse_all(*w, false, &p.workloads));
  for (auto& target : p.targets)
    if (const BackendEntry* e = find_backend(target.name); e && e->imported) {
      return Status::invalid(
          fmt::format("target '{}' cannot be run: it holds a framework's outputs, imported with `detaudit import` "
                      "(see `detaudit export --help`)",
                      target.str()));
    }
  if (repeats < 0 || repeats > 100000) {
    return Status::invalid(fmt::format("--repeats {} out of range (1..100000)", repeats));
  }
  p.repeats = repeats > 0 ? repeats : d.repeats;
  if (!(timeout_s > 0)) {
    return Status::invalid("--timeout must be positive");
  }
  p.timeout_s = timeout_s;
  *plan = p;
  return Status::ok();
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "0:35", "12:04", "1:02:03".
std::string clock_text(double seconds) {
  long s = long(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

// One line per finished target: its outcomes by status, how long it took, the time so far and an
// estimate of the time left (from the cells per second so far). A skip reason is said once; a later
// target skipped for a reason already said says "skipped (same reason)".
class TargetProgress {
 public:
  TargetProgress(size_t targets, size_t cells, std::chrono::steady_clock::time_point start)
      : targets_(targets), cells_(cells), start_(start), loop_start_(std::chrono::steady_clock::now()) {}

  std::string line(size_t ti, const Spec& target, const std::vector<Observation>& obs, double seconds) {
    cells_done_ += obs.size();
    std::string head = fmt::format("target {}/{} {}: ", ti + 1, targets_, target.str());
    std::string body;
    std::set<std::string> skip_reasons;
    // "cuda: no CUDA device: ..." and "cublas: no CUDA device: ..." are one reason.
    const std::string prefix = target.name + ": ";
    for (auto& o : obs)
      if (o.status == ObsStatus::kSkipped)
        skip_reasons.insert(o.reason.rfind(prefix, 0) == 0 ? o.reason.substr(prefix.size()) : o.reason);
    const bool all_skipped = !obs.empty() && skip_reasons.size() == 1 &&
                             std::all_of(obs.begin(), obs.end(), [](const Observation& o) { return o.status == ObsStatus::kSkipped; });
    if (all_skipped) {
      const std::string& why = *skip_reasons.begin();
      body = said_skips_.insert(why).second
                 ? fmt::format("{} {} skipped: {}", obs.size(), obs.size() == 1 ? "workload" : "workloads", why)
                 : "skipped (same reason)";
    } else {
      body = fmt::format("{} {}, {}", obs.size(), obs.size() == 1 ? "workload" : "workloads", counts(obs));
      // The first reason of each kind of failure, so a crash says which signal; a skip reason only the
      // first time it comes.
      std::set<CellVerdict> said;
      for (auto& o : obs) {
        CellVerdict v = cell_verdict(o);
        if (o.reason.empty() || v == CellVerdict::kDeterministic || v == CellVerdict::kNondeterministic) continue;
        if (v == CellVerdict::kSkipped ? !said_skips_.insert(o.reason).second : !said.insert(v).second) continue;
        body += fmt::format("; {}: {}", to_string(v), o.reason);
      }
    }
    return head + body + fmt::format(" in {:.1f} s; {}", seconds, timing());
  }

 private:
  static std::string counts(const std::vector<Observation>& obs) {
    std::map<CellVerdict, size_t> n;
    for (auto& o : obs) ++n[cell_verdict(o)];
    std::vector<std::string> parts;
    for (auto& [v, k] : n) parts.push_back(fmt::format("{} {}", k, to_string(v)));
    return fmt::format("{}", fmt::join(parts, ", "));
  }
  std::string timing() const {
    std::string t = "elapsed " + clock_text(seconds_since(start_));
    const double loop = seconds_since(loop_start_);
    if (cells_done_ > 0 && cells_done_ < cells_)
      t += ", ETA " + clock_text(loop / double(cells_done_) * double(cells_ - cells_done_));
    return t;
  }
  size_t targets_, cells_, cells_done_ = 0;
  std::chrono::steady_clock::time_point start_, loop_start_;
  std::set<std::string> said_skips_;
};

// While a workload runs longer than 10 s, says so (then every 60 s), so a slow or hanging target is
// visible before its line: "target 2/9 openblas?core=Haswell&threads=1: workload 3/13 conv2d?... running
// for 10 s".
class Heartbeat {
 public:
  explicit Heartbeat(std::function<void(const std::string&)> say) : say_(std::move(say)), thread_([this] { loop(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void started(std::string what) {
    std::lock_guard<std::mutex> g(mu_);
    what_ = std::move(what);
    since_ = std::chrono::steady_clock::now();
    next_ = 10;
  }
  void idle() {
    std::lock_guard<std::mutex> g(mu_);
    what_.clear();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> g(mu_);
    while (!stop_) {
      cv_.wait_for(g, std::chrono::milliseconds(500));
      if (stop_ || what_.empty()) continue;
      const double s = seconds_since(since_);
      if (s < next_) continue;
      next_ += next_ < 60 ? 50 : 60;
      say_(fmt::format("{} running for {}", what_, clock_text(s)));
    }
  }
  std::function<void(const std::string&)> say_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point since_;
  double next_ = 10;
  std::thread thread_;  // last: starts after the members it uses
};

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", b, units[u]);
}

// The oracle entries of every workload, computed by a cpu-ref worker under the plan's timeout at the start of every
// session, resumed ones included: the cache is this run's channel from the oracle's worker to the targets', never a
// record trusted from an earlier session (its checksum has no secret, so an entry rewritten whole, with the results
// edited to match, would pass every check and FAIL genuine kernels). The quick suite's take 0.3 s, the full suite's
// 10 s.
// A failed oracle is recorded in r->oracle_failures and its workload is compared with nothing.
void prepare_oracles(const ProbePlan& plan, const ProbeRunOptions& opt, Results* r,
                     const std::function<void(const std::string&)>& say) {
  std::vector<WorkItem> todo;
  size_t earlier = 0;  // entries an earlier session left, computed again
  for (auto& w : plan.workloads) {
    std::string path = oracle_path(opt.out_dir, w);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(path, ec))) ++earlier, fs::remove_all(path, ec);
    todo.push_back({w, "", path});
  }
  if (todo.empty()) return;
  WorkerOptions wo;
  wo.exe = opt.exe;
  wo.repeats = 1;
  wo.timeout_s = plan.timeout_s;
  wo.log_path = opt.out_dir + "/logs/oracle.log";
  Spec ref;
  if (Status st = parse_target(oracle_backend().name, &ref); !st) {  // the registry's own name: a bug
    for (auto& w : todo) r->oracle_failures[w.workload.str()] = "internal error: the oracle target: " + st.message();
    return;
  }
  say(fmt::format("oracles: computing {} with {}{}", todo.size(), oracle_backend().name,
                  earlier ? fmt::format(" ({} an earlier session left in .oracle/ among them: this run's own are used)",
                                        earlier)
                          : ""));
  const auto t0 = std::chrono::steady_clock::now();
  size_t failed = 0;
  run_target(
      ref, todo, wo,
      [&](const WorkItem& w, Observation&& o) {
        if (o.status == ObsStatus::kOk) {
          r->oracle_failures.erase(w.workload.str());
          return;
        }
        std::string why = fmt::format("{}{}", to_string(o.status), o.reason.empty() ? "" : ": " + o.reason);
        say(fmt::format("oracle of {} failed ({}); its observations carry no distance", w.workload.str(), why));
        r->oracle_failures[w.workload.str()] = why;
        ++failed;
      },
      [](const WorkItem&) {});
  say(fmt::format("oracles: {} of {} computed in {:.1f} s", todo.size() - failed, todo.size(),
                  seconds_since(t0)));
}
}  // namespace

size_t count_cells(const ProbePlan& plan) {
  size_t n = 0;
  for (auto& t : plan.targets)
    for (auto& w : plan.workloads) n += applicable(t, w);
  return n;
}

Status check_memory(const ProbePlan& plan, uint64_t available, const std::string& source) {
  if (available == 0) return Status::ok();  // unknown: nothing to compare with
  for (auto& w : plan.workloads) {
    MemoryEstimate e = estimate_memory(w);
    if (e.total() > double(available)) {
      return Status::invalid(
          fmt::format("workload {} needs about {} ({:.0f} bytes: inputs {}, outputs {}, oracle {}, workspace {}) "
                      "but {} are available ({})",
                      w.str(), human_bytes(e.total()), e.total(), human_bytes(e.inputs), human_bytes(e.outputs),
                      human_bytes(e.oracle), human_bytes(e.workspace), human_bytes(double(available)), source));
    }
  }
  return Status::ok();
}

Status run_probe_suite(const ProbePlan& plan, const ProbeRunOptions& opt, Results* results) {
  const auto start = std::chrono::steady_clock::now();
  std::mutex say_mu;  // the heartbeat thread says things too
  auto say = [&](const std::string& s) {
    std::lock_guard<std::mutex> g(say_mu);
    if (opt.progress) opt.progress(s);
  };
  std::string source;
  DETAUDIT_RETURN_IF_ERROR(check_memory(plan, available_memory_bytes(&source), source));
  // A results.json that is a link (or no regular file) is refused before the lock, the oracle cache or the logs
  // are made beside it: a refused run leaves the folder as it found it.
  ResultsDir own(opt.out_dir);
  ResultsDir& out = opt.results_dir ? *opt.results_dir : own;
  if (out.dir() != opt.out_dir) return Status::error("the results directory held is not --out (a bug)");
  DETAUDIT_RETURN_IF_ERROR(out.open_for_writing());
  const std::string results_path = out.results_path();
  Results r;
  std::set<std::pair<std::string, std::string>> done;
  if (!opt.fresh && fs::exists(results_path)) {
    Results old;
    if (Status st = out.load(&old); !st)
      return Status::invalid(st.message() + " (use --fresh to start over)");
    nlohmann::json a = old.plan, b = plan.to_json();
    // (A time limit too: cells that finished under another limit would be said to have run under this one.)
    if (a.value("targets", nlohmann::json()) != b["targets"] || a.value("workloads", nlohmann::json()) != b["workloads"] ||
        a.value("repeats", 0) != plan.repeats || a.value("timeout_s", plan.timeout_s) != plan.timeout_s) {
      return Status::invalid(fmt::format(
          "{} holds results of a different plan; use --fresh to replace them or another --out", results_path));
    }
    r = std::move(old);
    for (auto& o : r.observations) done.insert({o.workload, o.target});
    if (!done.empty()) say(fmt::format("resuming: {} finished observations kept from {}", done.size(), results_path));
  } else {
    r.started_at = utc_now_iso8601();
  }
  // Only now, with the old results read and accepted, is anything in out_dir created or removed.
  std::error_code ec;
  if (opt.fresh) fs::remove_all(opt.out_dir + "/.oracle", ec);
  ec.clear();
  // Its own folders in it are its own: a link there would send the oracle cache or the logs elsewhere.
  DETAUDIT_RETURN_IF_ERROR(make_dir_below(opt.out_dir, ".oracle"));
  DETAUDIT_RETURN_IF_ERROR(make_dir_below(opt.out_dir, "logs"));
  // The workers' logs are appended to (their stderr): a link or anything but a regular file there (a FIFO
  // would block the worker's start) stops the run before it starts.
  DETAUDIT_RETURN_IF_ERROR(check_destination(opt.out_dir + "/logs/oracle.log"));
  for (auto& t : plan.targets)
    DETAUDIT_RETURN_IF_ERROR(check_destination(opt.out_dir + "/logs/" + safe_file_name(t.str()) + ".log"));
  say(fmt::format("{}: {} targets x {} workloads ({} cells), {} repeats, results in {}",
                  opt.custom ? "plan" : "suite " + plan.suite, plan.targets.size(), plan.workloads.size(),
                  count_cells(plan), plan.repeats, opt.out_dir));
  r.finished_at.clear();
  r.command = opt.command;
  r.plan = plan.to_json();
  r.machine = machine_fingerprint();
  DETAUDIT_RETURN_IF_ERROR(out.save(r));

  auto stop = [&]() {
    *results = r;
    return Status::interrupted("interrupted by " + signal_description(interrupted()));
  };
  prepare_oracles(plan, opt, &r, say);
  if (interrupted()) return stop();
  // The oracle is cpu-ref's own output, computed again just now: a cpu-ref cell kept from the session being resumed
  // that recorded other bits was edited (cpu-ref is deterministic, on every machine), and every cell judged with it
  // is suspect.
  for (size_t i = 0; i < r.observations.size(); ++i) {
    const Observation& o = r.observations[i];
    if (o.target != oracle_backend().name || o.status != ObsStatus::kOk || r.oracle_failures.count(o.workload)) continue;
    Spec t, w;
    OracleEntry e;
    if (!specs_of(o, &t, &w).is_ok() || !read_oracle_entry(oracle_path(opt.out_dir, w), oracle_key(w), &e))
      continue;
    const std::string computed = fingerprint_bytes(e.payload.data(), e.payload.size()).hex();
    for (const std::string& fp : o.fingerprints)
      if (fp != computed)
        return Status::invalid(fmt::format("{}: observations[{}]: {} recorded {} for {}, but computes {} here (it is "
                                           "the oracle, deterministic): the results were edited; use --fresh",
                                           results_path, i, o.target, fp, o.workload, computed));
  }
  DETAUDIT_RETURN_IF_ERROR(out.save(r));

  WorkerOptions wo;
  wo.exe = opt.exe;
  wo.repeats = plan.repeats;
  wo.timeout_s = plan.timeout_s;
  // The cells this session runs (a resumed run skips the finished ones), for the ETA.
  std::vector<std::vector<WorkItem>> work(plan.targets.size());
  size_t cells = 0;
  for (size_t ti = 0; ti < plan.targets.size(); ++ti) {
    for (auto& w : plan.workloads) {
      if (!applicable(plan.targets[ti], w) || done.count({w.str(), plan.targets[ti].str()})) continue;
      // prepare_oracles left a checked entry for every workload whose oracle did not fail.
      work[ti].push_back({w, r.oracle_failures.count(w.str()) ? "" : oracle_path(opt.out_dir, w), ""});
    }
    cells += work[ti].size();
  }
  TargetProgress progress(plan.targets.size(), cells, start);
  Heartbeat heartbeat(say);
  for (size_t ti = 0; ti < plan.targets.size(); ++ti) {
    const Spec& target = plan.targets[ti];
    const std::vector<WorkItem>& items = work[ti];
    if (items.empty()) continue;
    wo.log_path = opt.out_dir + "/logs/" + safe_file_name(target.str()) + ".log";
    size_t n = 0;
    Status saved;  // the first failed save stops the audit after this target
    std::vector<Observation> finished;
    const auto t0 = std::chrono::steady_clock::now();
    run_target(
        target, items, wo,
        [&](const WorkItem&, Observation&& o) {
          finished.push_back(o);
          r.observations.push_back(std::move(o));
          if (saved.is_ok()) saved = out.save(r);
        },
        [&](const WorkItem& w) {
          heartbeat.started(fmt::format("target {}/{} {}: workload {}/{} {}", ti + 1, plan.targets.size(),
                                        target.str(), ++n, items.size(), w.workload.str()));
        });
    heartbeat.idle();
    DETAUDIT_RETURN_IF_ERROR(saved);
    if (interrupted()) return stop();
    say(progress.line(ti, target, finished, seconds_since(t0)));
  }
  r.finished_at = utc_now_iso8601();
  DETAUDIT_RETURN_IF_ERROR(out.save_checked(r));
  *results = std::move(r);
  return Status::ok();
}

}  // namespace detaudit
