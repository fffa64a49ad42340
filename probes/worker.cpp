#include "probes/worker.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "kernels/fingerprint.hpp"
#include "probes/child.hpp"
#include "probes/oracle_cache.hpp"
#include "probes/targets.hpp"
#include "probes/workload.hpp"

namespace detaudit {

// ------------------------------------------------------------------------------------------------
// Worker side
// ------------------------------------------------------------------------------------------------
namespace {

using Clock = std::chrono::steady_clock;

void emit(int fd, const nlohmann::json& j) { write_all(fd, j.dump() + "\n"); }


// Observation::tracing for a traced backend; no kernel lists at all when no repeat was traced.
std::string tracing_summary(std::vector<RepeatKernels>* kernels, const std::vector<int>& untraced,
                            const std::string& reason) {
  if (untraced.empty()) return "ok";
  if (untraced.size() == kernels->size()) {
    kernels->clear();
    return reason.rfind("tracing unavailable", 0) == 0 ? reason : "tracing unavailable: " + reason;
  }
  std::vector<int> shown(untraced.begin(), untraced.begin() + std::min<size_t>(untraced.size(), 10));
  return fmt::format("partial: {} of {} repeats not traced (repeat {}{}): {}", untraced.size(), kernels->size(),
                     fmt::join(shown, ", "), untraced.size() > shown.size() ? ", ..." : "", reason);
}

}  // namespace

Observation observe(Backend* backend, const std::string& target_text, const WorkItem& item, int repeats,
                    bool* context_lost) {
  Observation o;
  o.workload = item.workload.str();
  o.target = target_text;
  o.repeats = repeats;
  o.describe = backend->describe();
  auto w = Workload::create(item.workload);
  if (!w) {
    o.status = ObsStatus::kError;
    o.reason = "unknown workload " + item.workload.name;
    return o;
  }
  auto fail = [&](const Status& st) {
    o.status = obs_status_for(st);
    o.reason = st.message();
    if (Status lost = backend->context_state(); !lost) {
      // Every later call of this process would fail alike: the worker ends. The teardown still frees what
      // it can (a cudaFree on a lost context only returns its error).
      o.reason += fmt::format("; the GPU context is lost ({}): the worker ended, later cells ran in a fresh one",
                              lost.message());
      if (context_lost) *context_lost = true;
    }
    w->teardown(*backend);
    return o;
  };
  Status st = w->setup(*backend);
  if (!st) return fail(st);

  // The oracle entry was checked by the parent; the worker checks it again (it may have changed since)
  // and compares the inputs it generated with those the oracle was computed from.
  std::vector<uint8_t> oracle;
  ErrorBound bound;  // empty when the entry carries none: the distance then has no err_ratio
  bool have_oracle = false;
  if (!item.oracle_path.empty()) {
    OracleEntry e;
    if (Status read = read_oracle_entry(item.oracle_path, oracle_key(item.workload), &e); !read)
      o.details["oracle_problem"] = read.message();
    else if (e.inputs != w->input_fingerprint())
      o.details["oracle_problem"] = "oracle computed from other inputs (" + e.inputs.hex() + ", here " +
                                    w->input_fingerprint().hex() + ")";
    else if (e.payload.size() != w->output_bytes())
      o.details["oracle_problem"] = fmt::format("oracle holds {} bytes, output has {}", e.payload.size(), w->output_bytes());
    else if (!e.bound.bound.empty() && e.bound.bound.size() != w->output_elems())
      o.details["oracle_problem"] =
          fmt::format("oracle's error bound has {} elements, output has {}", e.bound.bound.size(), w->output_elems());
    else {
      oracle = std::move(e.payload);
      bound = std::move(e.bound);
      have_oracle = true;
    }
  }
  std::vector<uint8_t> host(w->output_bytes());
  // Test hook of the fleet tests: DETAUDIT_TEST_FLIP_OUTPUT=<workload spec> makes this worker's outputs
  // of that workload differ from what it computed in the lowest bit of their first byte, as a faulty
  // node's would: the fingerprint and the oracle distance both see the flipped output.
  const char* flip_env = std::getenv("DETAUDIT_TEST_FLIP_OUTPUT");
  // "*": every workload's (the healthcheck's test hook: a faulty core).
  const bool flip = flip_env && !host.empty() && (item.workload.str() == flip_env || std::string(flip_env) == "*");
  auto output_fingerprint = [&](Fingerprint* f) -> Status {
    if (!flip) return backend->fingerprint(w->output(), w->output_bytes(), f);
    DETAUDIT_RETURN_IF_ERROR(backend->download(host.data(), w->output(), host.size()));
    host[0] ^= 1;
    *f = fingerprint_bytes(host.data(), host.size());
    return Status::ok();
  };
  std::map<std::string, bool> seen;  // fingerprints whose output has been compared with the oracle
  OracleDistance dist;
  const bool tracing = backend->traces_kernels();
  std::string trace_reason;                   // the first repeat's tracing failure
  std::vector<int> untraced;                  // repeats (1-based) whose tracing failed
  Fingerprint fp;

  // The warm-up: one run before the repeats, under its own correlation id (1; repeat r has r + 2). What
  // runs once per process or shape (cuDNN's Find, cuBLAS's workspace fill, a library's thread pool, the
  // CUPTI start) happens here and in no repeat.
  {
    Status tb = tracing ? backend->trace_begin(1) : Status::ok();
    st = w->run(*backend);
    std::vector<KernelRecord> setup;
    Status te = tracing && tb ? backend->trace_end(&setup) : tb;
    if (!st) return fail(st);
    if (tracing && te) o.details["warmup_kernels"] = std::to_string(setup.size());
    st = output_fingerprint(&fp);
    if (!st) return fail(st);
    o.warmup_fingerprint = fp.hex();
  }

  for (int r = 0; r < repeats; ++r) {
    Status tb = tracing ? backend->trace_begin(uint64_t(r) + 2) : Status::ok();
    auto t0 = Clock::now();
    st = w->run(*backend);
    auto t1 = Clock::now();
    std::vector<KernelRecord> kernels;
    Status te = tracing && tb ? backend->trace_end(&kernels) : tb;
    if (!st) return fail(st);
    o.seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    // One entry per repeat, a failed trace too, so that kernels[r] always belongs to fingerprints[r].
    if (tracing && te) {
      o.kernels.push_back(std::move(kernels));
    } else if (tracing) {
      o.kernels.push_back(std::nullopt);
      untraced.push_back(r + 1);
      if (trace_reason.empty()) trace_reason = te.message();
    }
    st = output_fingerprint(&fp);
    if (!st) return fail(st);
    std::string hex = fp.hex();
    o.fingerprints.push_back(hex);
    // Only a new output is brought back and compared: repeats of a known fingerprint are identical.
    if (have_oracle && !seen.count(hex)) {
      seen[hex] = true;
      st = backend->download(host.data(), w->output(), host.size());
      if (!st) return fail(st);
      if (flip) host[0] ^= 1;
      const ErrorBound* b = bound.bound.empty() ? nullptr : &bound;
      OracleDistance d = w->is_f64() ? compare_to_oracle(reinterpret_cast<const double*>(host.data()),
                                                         reinterpret_cast<const double*>(oracle.data()), host.size() / 8, b)
                                     : compare_to_oracle(reinterpret_cast<const float*>(host.data()),
                                                         reinterpret_cast<const float*>(oracle.data()), host.size() / 4, b);
      // Across distinct outputs: OracleDistance::merge (the worst ratio, with its output's histogram).
      dist.merge(d);
    }
  }
  if (have_oracle) o.oracle = dist;
  o.distinct = count_distinct(o.fingerprints);
  if (item.workload.name == "batchinv") {
    BatchInvariance b;
    st = w->batch_check(*backend, &b);
    if (!st) return fail(st);
    o.batch = b;
  }
  if (tracing) o.tracing = tracing_summary(&o.kernels, untraced, trace_reason);
  for (auto& [k, v] : backend->details()) o.details[k] = v;
  o.describe = backend->describe();
  w->teardown(*backend);
  return o;
}

Status parse_worker_request(const std::string& text, WorkerRequest* out) {
  nlohmann::json req = nlohmann::json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) { return Status::invalid("malformed request: " + why); };
  if (req.is_discarded() || !req.is_object()) return bad("not a JSON object");
  if (!req.contains("protocol") || !req["protocol"].is_string() || req["protocol"] != kWorkerProtocol)
    return bad(fmt::format("\"protocol\" must be \"{}\"", kWorkerProtocol));
  if (!req.contains("target") || !req["target"].is_string()) return bad("\"target\" must be a string");
  WorkerRequest r;
  if (Status st = parse_target(req["target"].get<std::string>(), &r.target); !st) return bad(st.message());
  const auto& rep = req.contains("repeats") ? req["repeats"] : nlohmann::json();
  if (!rep.is_number_integer() || rep.get<int64_t>() < 1 || rep.get<int64_t>() > kMaxRepeats)
    return bad(fmt::format("\"repeats\" must be an integer in 1..{}", kMaxRepeats));
  r.repeats = int(rep.get<int64_t>());
  if (!req.contains("items") || !req["items"].is_array()) return bad("\"items\" must be an array");
  for (const auto& it : req["items"]) {
    if (!it.is_object()) return bad("every item must be an object");
    if (!it.contains("index") || !it["index"].is_number_unsigned()) return bad("item \"index\" must be an unsigned integer");
    if (!it.contains("workload") || !it["workload"].is_string()) return bad("item \"workload\" must be a string");
    WorkItem wi;
    if (Status st = parse_workload(it["workload"].get<std::string>(), &wi.workload); !st) return bad(st.message());
    for (auto [key, dst] : {std::pair{"oracle", &wi.oracle_path}, {"write_oracle", &wi.write_oracle}}) {
      if (!it.contains(key)) continue;
      if (!it[key].is_string()) return bad(fmt::format("item \"{}\" must be a string", key));
      *dst = it[key].get<std::string>();
    }
    r.items.push_back(std::move(wi));
    r.indices.push_back(it["index"].get<size_t>());
  }
  *out = std::move(r);
  return Status::ok();
}

namespace {
// An oracle item: compute cpu-ref's output and write it where the parent asked. Its "observation" says
// only whether that worked; a crash or timeout is charged to the oracle by the parent.
Observation observe_oracle(const WorkItem& item) {
  Observation o;
  o.workload = item.workload.str();
  o.target = oracle_backend().name;
  o.repeats = 1;
  OracleEntry e;
  e.key = oracle_key(item.workload);
  Status st = compute_oracle(item.workload, &e.payload, &e.inputs, &e.bound);
  if (st) st = write_oracle_entry(item.write_oracle, e);
  if (!st) {
    o.status = obs_status_for(st);
    o.reason = st.message();
  }
  return o;
}
}  // namespace

int worker_main(int in_fd, int out_fd) {
  child_start();
  std::string input = read_all(in_fd);
  WorkerRequest req;
  if (Status st = parse_worker_request(input, &req); !st) {
    fmt::print(stderr, "detaudit worker: {}\n", st.message());
    return 2;
  }
  Status st;
  std::unique_ptr<Backend> backend;
  bool any_target_item = false;
  for (auto& it : req.items) any_target_item |= it.write_oracle.empty();
  if (any_target_item) {
    BackendOr made = make_target_backend(req.target);
    if (made)
      backend = std::move(made).value();
    else
      st = made.status();
  }
  for (size_t i = 0; i < req.items.size(); ++i) {
    emit(out_fd, {{"event", "begin"}, {"index", req.indices[i]}});
    Observation o;
    if (!req.items[i].write_oracle.empty()) {
      o = observe_oracle(req.items[i]);
    } else if (!backend) {
      o.workload = req.items[i].workload.str();
      o.target = req.target.str();
      o.repeats = req.repeats;
      o.status = obs_status_for(st);
      o.reason = st.message();
    } else {
      bool lost = false;
      o = observe(backend.get(), req.target.str(), req.items[i], req.repeats, &lost);
      if (lost) {
        emit(out_fd, {{"event", "observation"}, {"index", req.indices[i]}, {"observation", to_json(o)}});
        return kWorkerContextLost;  // the parent runs the rest in a fresh worker
      }
    }
    emit(out_fd, {{"event", "observation"}, {"index", req.indices[i]}, {"observation", to_json(o)}});
  }
  emit(out_fd, {{"event", "done"}});
  return 0;
}

// ------------------------------------------------------------------------------------------------
// Parent side
// ------------------------------------------------------------------------------------------------

void run_target(const Spec& target, const std::vector<WorkItem>& items, const WorkerOptions& opt,
                const ObservationSink& sink, const ProgressSink& progress) {
  size_t next = 0;
  // The cell goes on with the specs it was asked for, parsed once here: those of the observation's own texts (a
  // worker that answered for another cell keeps its texts alone, and whoever reads them parses them).
  auto deliver = [&](size_t i, Observation&& o) {
    if (o.workload == items[i].workload.str() && o.target == target.str())
      o.workload_spec = items[i].workload, o.target_spec = target;
    sink(items[i], std::move(o));
  };
  auto record = [&](size_t i, ObsStatus status, const std::string& reason) {
    Observation o;
    o.workload = items[i].workload.str();
    o.target = target.str();
    o.repeats = opt.repeats;
    o.status = status;
    o.reason = reason;
    deliver(i, std::move(o));
  };
  while (next < items.size()) {
    const size_t first = next;
    nlohmann::json req = {{"protocol", kWorkerProtocol}, {"target", target.str()}, {"repeats", opt.repeats}};
    nlohmann::json arr = nlohmann::json::array();
    for (size_t i = next; i < items.size(); ++i) {
      nlohmann::json it = {{"index", i}, {"workload", items[i].workload.str()}, {"oracle", items[i].oracle_path}};
      if (!items[i].write_oracle.empty()) it["write_oracle"] = items[i].write_oracle;
      arr.push_back(std::move(it));
    }
    req["items"] = arr;
    ChildSpec cs;
    cs.exe = opt.exe;
    cs.args = {kWorkerSubcommand};
    cs.env = target_environment(target);
    for (auto& [k, v] : opt.env) cs.env[k] = v;
    cs.deadline = opt.deadline;
    cs.request = req.dump();
    cs.log_path = opt.log_path;
    bool done = false;
    ChildExit ex = run_child(cs, opt.timeout_s, [&](const std::string& line) {
      nlohmann::json ev = nlohmann::json::parse(line, nullptr, false);
      if (!ev.is_object()) return false;  // not a protocol line
      std::string kind = ev.value("event", "");
      const auto* ix = ev.contains("index") && ev["index"].is_number_unsigned() ? &ev["index"] : nullptr;
      size_t idx = ix ? ix->get<size_t>() : size_t(-1);
      if (kind == "begin" && idx == next) {
        if (progress) progress(items[next]);
        return true;
      }
      if (kind == "observation" && idx == next && next < items.size()) {
        Observation o;
        Status read = ev.contains("observation") ? from_json(ev["observation"], &o) : Status::invalid("no observation");
        if (!read) {
          o = Observation{};
          o.workload = items[idx].workload.str();
          o.target = target.str();
          o.repeats = opt.repeats;
          o.status = ObsStatus::kError;
          o.reason = "worker sent " + read.message();
        }
        deliver(idx, std::move(o));
        ++next;
        return true;
      }
      if (kind == "done") done = true;
      return false;
    });
    if (!ex.started) {
      for (; next < items.size(); ++next) record(next, ObsStatus::kError, ex.error);
      return;
    }
    // Interrupted: the item in progress is not finished and is not recorded; the caller stops.
    if (ex.interrupted || ex.past_deadline) return;
    if (next >= items.size()) break;
    if (ex.timed_out) {
      record(next++, ObsStatus::kTimeout, fmt::format("no result after {:g} s; worker killed", opt.timeout_s));
      continue;
    }
    // Its GPU context lost, the worker sent the cell that lost it and ended: the rest in a fresh worker.
    if (!ex.signaled && ex.code == kWorkerContextLost && next > first) continue;
    // The worker died with items left: the one in progress is the casualty.
    if (ex.signaled)
      record(next++, ObsStatus::kCrashed, signal_description(ex.sig));
    else if (done)
      record(next++, ObsStatus::kError, "worker said done before finishing every item");
    else
      record(next++, ObsStatus::kError, fmt::format("worker exited with code {} before finishing", ex.code));
  }
}

ObsStatus obs_status_for(const Status& st) {
  return (st.code() == Status::Code::kUnsupported || st.code() == Status::Code::kUnavailable) ? ObsStatus::kSkipped
                                                                                             : ObsStatus::kError;
}

}  // namespace detaudit
