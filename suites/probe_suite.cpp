#include "suites/probe_suite.hpp"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "probes/child.hpp"
#include "probes/env.hpp"
#include "probes/oracle_cache.hpp"
#include "probes/worker.hpp"
#include "probes/workload.hpp"
#include "suites/dir_lock.hpp"
#include "report/train_report.hpp"

namespace detaudit {

namespace fs = std::filesystem;

nlohmann::json ProbePlan::to_json() const {
  nlohmann::json t = nlohmann::json::array(), w = nlohmann::json::array();
  for (auto& s : targets) t.push_back(s.str());
  for (auto& s : workloads) w.push_back(s.str());
  return {{"suite", suite}, {"targets", t}, {"workloads", w}, {"repeats", repeats}, {"timeout_s", timeout_s}};
}

namespace {

struct SuiteDef {
  std::vector<std::string> targets, workloads;
  int repeats;
};

std::vector<std::string> gpu_targets() {
  return {"cuda:0?order=tree",
          "cuda:0?order=atomic",
          "cublas:0?math=pedantic",
          "cublas:0?math=default",
          "cublas:0?math=tf32",
          "cublas:0?math=bf16x9",
          "cublas:0?math=pedantic&atomics=allowed",
          "cublas:0?math=pedantic&streams=4&workspace=shared",
          "cublas:0?math=pedantic&streams=4&workspace=per_stream",
          "cublaslt:0?algo=all",
          "cudnn:0",
          "cudnn:0?fwd_algo=all",
          "cudnn:0?bwd_data_algo=all",
          "cudnn:0?bwd_filter_algo=all",
          "cudnn:0?math=tf32",
          "cudnn:0?pool=nondeterministic"};
}

SuiteDef suite_def(const std::string& name) {
  SuiteDef d;
  std::vector<std::string> cpu = {"cpu-ref"};
  for (const char* order : {"sequential", "pairwise", "blocked", "atomic"})
    for (int t : {1, 2}) cpu.push_back(fmt::format("cpu?order={}&threads={}", order, t));
  if (name == "quick") {
    // SkylakeX needs AVX-512 and Bulldozer FMA4/XOP: on most CPUs one of them dies with SIGILL, which
    // the suite records and goes past.
    for (const char* core : {"Haswell", "SkylakeX", "Sandybridge", "Nehalem", "Core2", "Bulldozer"})
      cpu.push_back(fmt::format("openblas?core={}&threads=1", core));
    cpu.push_back("openblas?core=Haswell&threads=2");
    for (const char* isa : {"SSE41", "AVX", "AVX2", "AVX512_CORE"}) cpu.push_back(fmt::format("onednn?isa={}&threads=1", isa));
    cpu.push_back("onednn?isa=AVX2&threads=1&layout=blocked");
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
    for (const char* core : {"Haswell", "Zen", "SkylakeX", "CooperLake", "Sandybridge", "Nehalem", "Core2", "Penryn",
                             "Dunnington", "Prescott", "Atom", "Nano", "Barcelona", "Bulldozer", "Excavator"})
      cpu.push_back(fmt::format("openblas?core={}&threads=1", core));
    for (int t : {2, 4}) cpu.push_back(fmt::format("openblas?core=Haswell&threads={}", t));
    for (const char* isa : {"SSE41", "AVX", "AVX2", "AVX512_CORE", "ALL"}) {
      cpu.push_back(fmt::format("onednn?isa={}&threads=1", isa));
      cpu.push_back(fmt::format("onednn?isa={}&threads=1&layout=blocked", isa));
    }
    cpu.push_back("onednn?isa=ALL&threads=2");
    for (const char* order : {"blocked", "atomic"}) cpu.push_back(fmt::format("cpu?order={}&threads=4", order));
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
  d.targets = cpu;
  for (auto& g : gpu_targets()) d.targets.push_back(g);
  return d;
}

// `key=all` expands to one target per algorithm index.
std::vector<Spec> expand_all(const Spec& t) {
  static const std::map<std::string, int> counts = {
      {"algo", 8}, {"fwd_algo", 8}, {"bwd_data_algo", 6}, {"bwd_filter_algo", 7}};
  for (auto& [k, v] : t.params) {
    if (v != "all") continue;
    std::vector<Spec> out;
    for (int i = 0; i < counts.at(k); ++i) {
      Spec s = t;
      s.set(k, std::to_string(i));
      for (auto& e : expand_all(s)) out.push_back(e);
    }
    return out;
  }
  return {t};
}

bool parse_all(const std::vector<std::string>& texts, bool target, std::vector<Spec>* out, std::string* err) {
  std::set<std::string> seen;
  for (auto& t : texts) {
    Spec s;
    if (!(target ? parse_target(t, &s, err) : parse_workload(t, &s, err))) return false;
    for (auto& e : target ? expand_all(s) : std::vector<Spec>{s})
      if (seen.insert(e.str()).second) out->push_back(e);
  }
  return true;
}

}  // namespace

std::vector<std::string> suite_names() { return {"quick", "full"}; }

bool make_plan(const std::string& suite, const std::string& targets_csv, const std::string& workloads_csv,
               int repeats, double timeout_s, ProbePlan* plan, std::string* err) {
  auto names = suite_names();
  if (std::find(names.begin(), names.end(), suite) == names.end()) {
    *err = fmt::format("unknown suite '{}' (known: {})", suite, fmt::join(names, ", "));
    return false;
  }
  SuiteDef d = suite_def(suite);
  ProbePlan p;
  p.suite = suite;
  std::vector<std::string> t = targets_csv.empty() ? d.targets : split_list(targets_csv);
  std::vector<std::string> w = workloads_csv.empty() ? d.workloads : split_list(workloads_csv);
  if (!targets_csv.empty() && t.empty()) {
    *err = "--targets is empty";
    return false;
  }
  if (!workloads_csv.empty() && w.empty()) {
    *err = "--workloads is empty";
    return false;
  }
  if (!parse_all(t, true, &p.targets, err) || !parse_all(w, false, &p.workloads, err)) return false;
  if (repeats < 0 || repeats > 100000) {
    *err = fmt::format("--repeats {} out of range (1..100000)", repeats);
    return false;
  }
  p.repeats = repeats > 0 ? repeats : d.repeats;
  if (!(timeout_s > 0)) {
    *err = "--timeout must be positive";
    return false;
  }
  p.timeout_s = timeout_s;
  *plan = p;
  return true;
}

bool applicable(const Spec& t, const Spec& w) {
  bool gemm_like = w.name == "matmul" || w.name == "batchinv";
  if (t.name == "cublas" || t.name == "cublaslt") return gemm_like || (t.name == "cublas" && w.name == "reduce" && w.get("op") != "softmax");
  if (t.name == "cudnn") {
    std::string pass = w.name == "conv2d" ? w.get("pass") : "";
    bool pins_fwd = t.get("fwd_algo", "auto") != "auto", pins_bd = t.get("bwd_data_algo", "auto") != "auto",
         pins_bf = t.get("bwd_filter_algo", "auto") != "auto";
    bool pins_pool = t.get("pool", "deterministic") != "deterministic";
    bool pins_math = t.get("math", "fma") != "fma";
    if (w.name == "maxpool") return !pins_fwd && !pins_bd && !pins_bf && !pins_math;
    if (w.name != "conv2d" || pins_pool) return false;
    if (pins_fwd || pins_bd || pins_bf)
      return (pass == "fwd" && pins_fwd) || (pass == "bwd_data" && pins_bd) || (pass == "bwd_filter" && pins_bf);
    return true;
  }
  return true;
}

namespace {
std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", b, units[u]);
}

// The oracle entries of every workload: reused when they pass every check, otherwise (missing, corrupt,
// a directory in their place) removed and computed again by a cpu-ref worker under the plan's timeout.
// A failed oracle is recorded in r->oracle_failures and its workload is compared with nothing.
void prepare_oracles(const ProbePlan& plan, const ProbeRunOptions& opt, Results* r,
                     const std::function<void(const std::string&)>& say) {
  std::vector<WorkItem> todo;
  for (auto& w : plan.workloads) {
    std::string path = oracle_path(opt.out_dir, w), why;
    OracleEntry e;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec))) {
      todo.push_back({w, "", path});
      continue;
    }
    if (read_oracle_entry(path, oracle_key(w), &e, &why)) continue;
    say(fmt::format("oracle entry rejected, computing it again: {}", why));
    fs::remove_all(path, ec);
    todo.push_back({w, "", path});
  }
  if (todo.empty()) return;
  WorkerOptions wo;
  wo.exe = opt.exe;
  wo.repeats = 1;
  wo.timeout_s = plan.timeout_s;
  wo.log_path = opt.out_dir + "/logs/oracle.log";
  Spec ref;
  std::string err;
  parse_target("cpu-ref", &ref, &err);
  size_t n = 0;
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
      },
      [&](const WorkItem& w) {
        say(fmt::format("oracle {}/{}: {}", ++n, todo.size(), w.workload.str()));
      });
}
}  // namespace

size_t count_cells(const ProbePlan& plan) {
  size_t n = 0;
  for (auto& t : plan.targets)
    for (auto& w : plan.workloads) n += applicable(t, w);
  return n;
}

bool check_memory(const ProbePlan& plan, uint64_t available, const std::string& source, std::string* err) {
  if (available == 0) return true;  // unknown: nothing to compare with
  for (auto& w : plan.workloads) {
    MemoryEstimate e = estimate_memory(w);
    if (e.total() > double(available)) {
      *err = fmt::format("workload {} needs about {} ({:.0f} bytes: inputs {}, outputs {}, oracle {}, workspace {}) "
                         "but {} are available ({})",
                         w.str(), human_bytes(e.total()), e.total(), human_bytes(e.inputs), human_bytes(e.outputs),
                         human_bytes(e.oracle), human_bytes(e.workspace), human_bytes(double(available)), source);
      return false;
    }
  }
  return true;
}

int run_probe_suite(const ProbePlan& plan, const ProbeRunOptions& opt, Results* results, std::string* err) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  std::string source;
  if (!check_memory(plan, available_memory_bytes(&source), source, err)) return 2;
  DirLock lock;
  if (!lock.acquire(opt.out_dir, err)) return 2;
  const std::string results_path = opt.out_dir + "/results.json";
  Results r;
  std::set<std::pair<std::string, std::string>> done;
  if (!opt.fresh && fs::exists(results_path)) {
    Results old;
    if (!load_results(results_path, &old, err)) {
      *err += " (use --fresh to start over)";
      return 2;
    }
    nlohmann::json a = old.plan, b = plan.to_json();
    if (a.value("targets", nlohmann::json()) != b["targets"] || a.value("workloads", nlohmann::json()) != b["workloads"] ||
        a.value("repeats", 0) != plan.repeats) {
      *err = fmt::format("{} holds results of a different plan; use --fresh to replace them or another --out",
                         results_path);
      return 2;
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
  fs::create_directories(opt.out_dir + "/.oracle", ec);
  if (!ec) fs::create_directories(opt.out_dir + "/logs", ec);
  if (ec) {
    *err = fmt::format("cannot create {}: {}", opt.out_dir, ec.message());
    return 2;
  }
  say(fmt::format("{}: {} targets x {} workloads ({} cells), {} repeats, results in {}",
                  opt.custom ? "plan" : "suite " + plan.suite, plan.targets.size(), plan.workloads.size(),
                  count_cells(plan), plan.repeats, opt.out_dir));
  r.finished_at.clear();
  r.command = opt.command;
  r.plan = plan.to_json();
  r.machine = machine_fingerprint();
  if (!save_results(results_path, r, err)) return 2;

  auto stop = [&]() {
    *results = r;
    return kProbeInterrupted;
  };
  prepare_oracles(plan, opt, &r, say);
  if (interrupted()) return stop();
  if (!save_results(results_path, r, err)) return 2;

  WorkerOptions wo;
  wo.exe = opt.exe;
  wo.repeats = plan.repeats;
  wo.timeout_s = plan.timeout_s;
  for (size_t ti = 0; ti < plan.targets.size(); ++ti) {
    const Spec& target = plan.targets[ti];
    std::vector<WorkItem> items;
    for (auto& w : plan.workloads) {
      if (!applicable(target, w) || done.count({w.str(), target.str()})) continue;
      // prepare_oracles left a checked entry for every workload whose oracle did not fail.
      items.push_back({w, r.oracle_failures.count(w.str()) ? "" : oracle_path(opt.out_dir, w), ""});
    }
    if (items.empty()) continue;
    wo.log_path = opt.out_dir + "/logs/" + safe_file_name(target.str()) + ".log";
    size_t n = 0;
    bool save_failed = false;
    run_target(
        target, items, wo,
        [&](const WorkItem&, Observation&& o) {
          std::string line = fmt::format("target {}/{} {}: {} -> {}", ti + 1, plan.targets.size(), target.str(),
                                         o.workload, to_string(o.status));
          if (o.status == ObsStatus::kOk) line += fmt::format(" ({} distinct in {})", o.distinct, o.fingerprints.size());
          if (!o.reason.empty()) line += ": " + o.reason;
          say(line);
          r.observations.push_back(std::move(o));
          if (!save_failed && !save_results(results_path, r, err)) save_failed = true;
        },
        [&](const WorkItem& w) {
          ++n;
          say(fmt::format("target {}/{} {}: workload {}/{} {}", ti + 1, plan.targets.size(), target.str(), n,
                          items.size(), w.workload.str()));
        });
    if (save_failed) return 2;
    if (interrupted()) return stop();
  }
  r.finished_at = utc_now_iso8601();
  if (!save_results(results_path, r, err)) return 2;
  if (!write_reports(opt.out_dir, r, err)) return 2;
  *results = std::move(r);
  return 0;
}

}  // namespace detaudit
