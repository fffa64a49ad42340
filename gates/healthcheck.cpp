#include "gates/healthcheck.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gates/baseline.hpp"  // key_difference
#include "probes/registry.hpp"

namespace detaudit {


namespace {

bool is_gpu_target(const Spec& t) {
  const BackendEntry* e = find_backend(t.name);
  return e && e->device == DeviceKind::kCuda;
}

// The number of fields in which two machine keys differ.
size_t fields_apart(const nlohmann::json& a, const nlohmann::json& b) {
  size_t n = 0;
  for (auto& [k, v] : a.items())
    if (!b.contains(k) || b[k] != v) ++n;
  for (auto& [k, v] : b.items())
    if (!a.contains(k)) ++n;
  return n;
}

// `xs` rotated to begin at `first` (mod its size).
template <typename T>
std::vector<T> rotated(std::vector<T> xs, size_t first) {
  if (!xs.empty()) std::rotate(xs.begin(), xs.begin() + long(first % xs.size()), xs.end());
  return xs;
}

std::string short_hex(const std::string& fp) { return fp.substr(0, 8); }

// Floating-point operations of one run of a workload (a multiply-add counts two), for the FLOP/s a run sustains;
// 0 where the workload compares rather than computes (maxpool).
double flop_of(const std::string& text) {
  Spec w;
  if (!parse_workload(text, &w).is_ok()) return 0;
  auto g = [&](const char* k) { return double(w.get_int(k, 0)); };
  if (w.name == "matmul") return 2 * g("m") * g("n") * g("k");
  if (w.name == "batchinv") return 2 * g("m") * g("n") * g("k") + 2 * g("rows") * g("n") * g("k");
  if (w.name == "conv2d") {
    const double p = std::floor((g("h") + 2 * g("pad") - g("r")) / g("stride")) + 1;
    const double q = std::floor((g("w") + 2 * g("pad") - g("s")) / g("stride")) + 1;
    return 2 * g("n") * g("k") * p * q * g("c") * g("r") * g("s");
  }
  if (w.name == "reduce") {
    const std::string op = w.get("op");
    return op == "sum" ? g("n") : op == "softmax" ? 4 * g("n") : 2 * g("n");
  }
  return 0;
}

}  // namespace

Status plan_health_lanes(const Reference& ref, const std::string& key, const nlohmann::json& key_fields,
                         const std::vector<CpuPlace>& cpus, const HealthPlanOptions& opt, std::vector<HealthLane>* lanes) {
  // Per target (parsed once), the workloads the reference holds for this key.
  std::map<std::string, std::pair<Spec, std::vector<Spec>>> by_target;
  for (const ReferenceCell& c : ref.cells) {
    if (c.key != key) continue;
    auto& [t, ws] = by_target[c.target];
    if (t.name.empty() && !parse_target(c.target, &t).is_ok())
      return Status::invalid(fmt::format("the reference's target '{}' is no target of this build", c.target));
    Spec w;
    if (!parse_workload(c.workload, &w).is_ok())
      return Status::invalid(fmt::format("the reference's workload '{}' is no workload of this build", c.workload));
    ws.push_back(w);
  }
  if (by_target.empty()) {
    // The key the reference is nearest to, and how this machine differs from it.
    const nlohmann::json* nearest = nullptr;
    std::string nearest_hash;
    for (auto& [h, k] : ref.keys)
      if (!nearest || fields_apart(k, key_fields) < fields_apart(*nearest, key_fields)) nearest = &k, nearest_hash = h;
    if (!nearest) return Status::invalid("the reference holds no machine key at all (no cell to judge by)");
    return Status::invalid(fmt::format("the reference holds no cell of this machine's key {} (its nearest, {}, differs: {})",
                                       key, nearest_hash, key_difference(*nearest, key_fields)));
  }
  // Host targets by backend, in the reference's order (sorted); GPU targets by device.
  std::map<std::string, std::vector<HealthBatch>> host;
  std::map<int, std::vector<HealthBatch>> gpu;
  for (auto& [text, tw] : by_target) {
    HealthBatch b{tw.first, tw.second};
    if (is_gpu_target(b.target))
      gpu[std::max(b.target.device, 0)].push_back(std::move(b));
    else
      host[b.target.name].push_back(std::move(b));
  }
  // The CPUs: every allowed one, or max_cpus of them spread evenly and rotated by the offset.
  std::vector<CpuPlace> use = cpus;
  if (opt.max_cpus > 0 && opt.max_cpus < cpus.size()) {
    use.clear();
    for (size_t i = 0; i < opt.max_cpus; ++i)
      use.push_back(cpus[(i * cpus.size() / opt.max_cpus + opt.offset) % cpus.size()]);
    std::sort(use.begin(), use.end(), [](const CpuPlace& a, const CpuPlace& b) { return a.cpu < b.cpu; });
  }
  const size_t n_lanes = use.size();
  std::vector<HealthLane> out;
  for (size_t i = 0; i < n_lanes; ++i) {
    HealthLane lane;
    lane.place = use[i];
    // Each backend's targets dealt among the CPUs: with more CPUs than targets each CPU runs one (all of them
    // run), with fewer each runs every n-th; the offset moves the deal between runs. Each target's workloads begin
    // at another one on each CPU and in each run.
    std::vector<std::vector<HealthBatch>> per_backend;
    for (auto& [name, batches] : host) {
      std::vector<HealthBatch> mine;
      const size_t n = batches.size();
      if (n_lanes >= n) {
        mine.push_back(batches[(i + opt.offset) % n]);
      } else {
        for (size_t t = 0; t < n; ++t)
          if (t % n_lanes == (i + opt.offset) % n_lanes) mine.push_back(batches[t]);
      }
      for (auto& b : mine) b.workloads = rotated(b.workloads, i + opt.offset);
      per_backend.push_back(std::move(mine));
    }
    // Backends interleaved, so that a budget cut short still reaches each of them.
    for (size_t round = 0;; ++round) {
      bool any = false;
      for (auto& bs : per_backend)
        if (round < bs.size()) lane.batches.push_back(bs[round]), any = true;
      if (!any) break;
    }
    out.push_back(std::move(lane));
  }
  // The reference's GPU cells of this key name devices this machine must have (its key holds its GPUs): one it lacks
  // cannot be judged, and is said rather than left out.
  for (auto& [d, batches] : gpu)
    if (d >= opt.gpus)
      return Status::invalid(fmt::format("the reference holds cells of {} for this machine's key {}, but this machine has "
                                         "{} CUDA device{}: they cannot run here",
                                         batches.front().target.str(), key, opt.gpus, opt.gpus == 1 ? "" : "s"));
  for (int d = 0; d < opt.gpus; ++d) {
    auto it = gpu.find(d);
    if (it == gpu.end()) continue;
    HealthLane lane;
    lane.gpu = d;
    lane.batches = it->second;
    for (auto& b : lane.batches) b.workloads = rotated(b.workloads, opt.offset);
    out.push_back(std::move(lane));
  }
  *lanes = std::move(out);
  return Status::ok();
}

HealthOutcome judge_health(const Reference& ref, const std::string& key, const std::vector<HealthLane>& lanes,
                           const HealthRun& run, const nlohmann::json& gpus, double budget_s) {
  HealthOutcome h;
  auto uuid_of = [&](int gpu) {
    if (gpu >= 0 && gpus.is_array() && size_t(gpu) < gpus.size() && gpus[size_t(gpu)].is_object())
      return gpus[size_t(gpu)].value("uuid", std::string());
    return std::string();
  };
  auto where = [&](const HealthLane& l) {
    if (l.gpu >= 0) {
      const std::string uuid = uuid_of(l.gpu);
      return uuid.empty() ? fmt::format("gpu {}", l.gpu) : fmt::format("gpu {} ({})", l.gpu, uuid);
    }
    return fmt::format("cpu {} (core {}, package {})", l.place.cpu, l.place.core, l.place.package);
  };
  std::map<size_t, size_t> judged_per_lane;
  double flop = 0;  // of every run judged (warm-ups included)
  std::map<size_t, std::set<std::string>> backends_per_lane;
  for (const LaneObservation& lo : run.observations) {
    const HealthLane& lane = lanes[lo.lane];
    const Observation& o = lo.obs;
    const ReferenceCell* k = ref.find(key, o.workload, o.target);
    if (!k) continue;  // the lanes hold the reference's cells only (and a loaded reference is sorted for find)
    HealthFinding f;
    f.place = lane.place;
    f.gpu = lane.gpu;
    f.gpu_uuid = uuid_of(lane.gpu);
    f.workload = o.workload;
    f.target = o.target;
    f.reference = k->fingerprint;
    const std::string cell = fmt::format("{} on {}", o.workload, o.target);
    if (o.status == ObsStatus::kOk) {
      std::vector<std::string> runs = o.fingerprints;
      if (lane.gpu < 0 && !o.warmup_fingerprint.empty()) runs.insert(runs.begin(), o.warmup_fingerprint);
      std::set<std::string> other;
      for (auto& fp : runs)
        if (fp != k->fingerprint) other.insert(fp);
      if (!other.empty()) {
        f.kind = HealthFindingKind::kBits;
        f.here = *other.begin();
        f.line = fmt::format("other bits in {} (reference {}, here {}{})", cell, short_hex(k->fingerprint),
                             short_hex(f.here), other.size() > 1 ? fmt::format(" and {} more", other.size() - 1) : "");
      } else if (!k->rows_fingerprint.empty() && o.batch && o.batch->rows_fingerprint != k->rows_fingerprint) {
        f.kind = HealthFindingKind::kRows;
        f.reference = k->rows_fingerprint;
        f.here = o.batch->rows_fingerprint;
        f.line = fmt::format("other bits of the rows computed alone in {} (reference {}, here {})", cell,
                             short_hex(k->rows_fingerprint), short_hex(f.here));
      } else if (runs.empty()) {
        f.kind = HealthFindingKind::kError;
        f.action = Action::kRetest;
        f.line = fmt::format("{} gave no output", cell);
      } else {
        ++h.cells;
        ++judged_per_lane[lo.lane];
        flop += flop_of(o.workload) * double(runs.size());
        backends_per_lane[lo.lane].insert(spec_name(o.target));
        continue;
      }
    } else if (o.status == ObsStatus::kCrashed) {
      f.kind = HealthFindingKind::kCrashed;
      f.here = o.reason;
      f.line = fmt::format("{} crashed: {}", cell, o.reason);
    } else {
      // Skipped, an error, or a timeout of a worker that stopped answering: the nodes that made the reference ran it.
      f.kind = HealthFindingKind::kError;
      f.action = Action::kRetest;
      f.here = o.reason;
      f.line = fmt::format("{} could not run: {}", cell, o.reason);
    }
    f.line = where(lane) + ": " + f.line;
    // The same cell failing again on the same CPU in a later pass is the same finding, counted.
    const auto same = std::find_if(h.findings.begin(), h.findings.end(), [&](const HealthFinding& g) {
      return g.place.cpu == f.place.cpu && g.gpu == f.gpu && g.workload == f.workload && g.target == f.target &&
             g.kind == f.kind;
    });
    if (same != h.findings.end())
      ++same->times;
    else
      h.findings.push_back(std::move(f));
  }
  // ISOLATE first, then by CPU (GPUs after), in the order found.
  std::stable_sort(h.findings.begin(), h.findings.end(), [](const HealthFinding& a, const HealthFinding& b) {
    auto rank = [](const HealthFinding& f) {
      return std::tuple(f.action == Action::kIsolate ? 0 : 1, f.gpu >= 0 ? 1 : 0, f.gpu >= 0 ? f.gpu : f.place.cpu);
    };
    return rank(a) < rank(b);
  });
  size_t cpu_lanes = 0, gpu_lanes = 0;
  for (auto& l : lanes) (l.gpu >= 0 ? gpu_lanes : cpu_lanes)++;
  const std::string on =
      fmt::format("{} cpu{}{}", cpu_lanes, cpu_lanes == 1 ? "" : "s",
                  gpu_lanes ? fmt::format(" and {} gpu{}", gpu_lanes, gpu_lanes == 1 ? "" : "s") : std::string());
  std::vector<std::string> errors = run.errors;
  if (!h.findings.empty()) {
    h.decision = Decision::kFail;
    h.status = "FAIL";
    std::set<std::string> others;
    for (size_t i = 1; i < h.findings.size(); ++i) {
      const auto& f = h.findings[i];
      others.insert(f.gpu >= 0 ? fmt::format("gpu {}", f.gpu) : fmt::format("cpu {}", f.place.cpu));
    }
    h.line = "detaudit: FAIL " + h.findings[0].line;
    if (h.findings.size() > 1)
      h.line += fmt::format("; {} more finding{} ({})", h.findings.size() - 1, h.findings.size() == 2 ? "" : "s",
                            fmt::join(others, ", "));
  } else if (!errors.empty()) {
    h.decision = Decision::kNotJudged;
    h.status = "ERROR";
    h.line = "detaudit: ERROR " + errors.front();
  } else if (h.cells == 0) {
    h.decision = Decision::kNotJudged;
    h.status = "ERROR";
    h.line = fmt::format("detaudit: ERROR no cell finished within --budget {:g} s ({} cut by it); nothing was judged",
                         budget_s, run.cut);
  } else {
    h.decision = Decision::kPass;
    h.status = "OK";
    h.line = fmt::format("detaudit: OK {} cells on {} in {:.1f} s", h.cells, on, run.seconds);
  }
  // Any backend a CPU held in its plan and did not finish a cell of, within the budget: said, not judged.
  std::vector<std::string> short_of;
  for (size_t i = 0; i < lanes.size(); ++i) {
    std::set<std::string> planned;
    for (auto& b : lanes[i].batches) planned.insert(b.target.name);
    std::vector<std::string> missed;
    for (auto& b : planned)
      if (!backends_per_lane[i].count(b)) missed.push_back(b);
    if (!missed.empty())
      short_of.push_back(lanes[i].gpu >= 0 ? fmt::format("gpu {}: {}", lanes[i].gpu, fmt::join(missed, " "))
                                           : fmt::format("cpu {}: {}", lanes[i].place.cpu, fmt::join(missed, " ")));
    HealthLaneSummary ls;
    ls.place = lanes[i].place, ls.gpu = lanes[i].gpu, ls.cells = judged_per_lane[i];
    ls.backends = backends_per_lane[i], ls.not_finished = missed;
    h.lanes.push_back(std::move(ls));
  }
  // A CPU or GPU of which no cell finished was not judged at all: no OK for the node.
  std::vector<std::string> unjudged;
  for (size_t i = 0; i < lanes.size(); ++i)
    if (judged_per_lane[i] == 0)
      unjudged.push_back(lanes[i].gpu >= 0 ? fmt::format("gpu {}", lanes[i].gpu) : fmt::format("cpu {}", lanes[i].place.cpu));
  if (h.decision == Decision::kPass && !unjudged.empty()) {
    h.decision = Decision::kNotJudged;
    h.status = "ERROR";
    h.line = fmt::format("detaudit: ERROR no cell finished on {} within --budget {:g} s ({} of {} judged): raise it",
                         fmt::join(unjudged, ", "), budget_s, lanes.size() - unjudged.size(), lanes.size());
  }
  if (h.decision == Decision::kPass && !short_of.empty())
    h.line += fmt::format(" (not reached within the budget: {})", fmt::join(short_of, "; "));
  h.key = key, h.cut = run.cut, h.not_reached = run.not_reached, h.seconds = run.seconds, h.budget_s = budget_s;
  h.gflop = flop * 1e-9, h.gflop_per_s = run.seconds > 0 ? flop * 1e-9 / run.seconds : 0.0;
  return h;
}

Results health_results(const Reference& ref, const std::string& key, const std::vector<HealthLane>& lanes,
                       const HealthRun& run, const HealthOutcome& h) {
  struct Cell {
    Observation o;
    std::set<std::string> fps, rows;
    std::string not_ok_reason;  // the first lane where it did not finish, and why
    ObsStatus not_ok = ObsStatus::kOk;
  };
  std::map<std::pair<std::string, std::string>, Cell> cells;  // (workload, target), sorted
  for (const LaneObservation& lo : run.observations) {
    const Observation& o = lo.obs;
    if (!ref.find(key, o.workload, o.target)) continue;
    const HealthLane& lane = lanes[lo.lane];
    Cell& c = cells[{o.workload, o.target}];
    c.o.workload = o.workload, c.o.target = o.target;
    c.o.workload_spec = o.workload_spec, c.o.target_spec = o.target_spec;
    if (o.status == ObsStatus::kOk && (!o.fingerprints.empty() || !o.warmup_fingerprint.empty())) {
      c.o.repeats += int(o.fingerprints.size()) + (lane.gpu < 0 && !o.warmup_fingerprint.empty() ? 1 : 0);
      c.fps.insert(o.fingerprints.begin(), o.fingerprints.end());
      if (lane.gpu < 0 && !o.warmup_fingerprint.empty()) c.fps.insert(o.warmup_fingerprint);
      if (o.batch && !o.batch->rows_fingerprint.empty()) c.rows.insert(o.batch->rows_fingerprint);
    } else if (c.not_ok == ObsStatus::kOk) {
      // A crash or timeout is what it is; a skip or a run without output is an error here (the reference ran it).
      c.not_ok = o.status == ObsStatus::kCrashed || o.status == ObsStatus::kTimeout ? o.status : ObsStatus::kError;
      const std::string where = lane.gpu >= 0 ? fmt::format("gpu {}", lane.gpu)
                                              : fmt::format("cpu {} (core {}, package {})", lane.place.cpu,
                                                            lane.place.core, lane.place.package);
      c.not_ok_reason = fmt::format("on {}: {}", where, o.status == ObsStatus::kOk ? "gave no output" : o.reason);
    }
  }
  Results r;
  std::set<std::string> targets, workloads;
  for (auto& [id, c] : cells) {
    Observation& o = c.o;
    targets.insert(o.target), workloads.insert(o.workload);
    o.status = c.not_ok;
    o.reason = c.not_ok_reason;
    // A cell that crashed or timed out somewhere is recorded as that, without the bits of the CPUs where it ran.
    if (o.status == ObsStatus::kCrashed || o.status == ObsStatus::kTimeout) c.fps.clear(), c.rows.clear(), o.repeats = 0;
    o.fingerprints.assign(c.fps.begin(), c.fps.end());
    o.distinct = int(o.fingerprints.size());
    const ReferenceCell* k = ref.find(key, o.workload, o.target);
    // Its findings: the first one's line (of a crash where the cell is recorded as one), then every other CPU and GPU
    // that found one ("cpu 0 (core 0, package 0): other bits in ...; also found on cpu 3 (core 3, package 0)").
    std::vector<std::string> places;
    const HealthFinding* first = nullptr;
    const bool did_not_finish = o.status != ObsStatus::kOk;
    for (const HealthFinding& f : h.findings)
      if (f.workload == o.workload && f.target == o.target) {
        const std::string place = f.line.substr(0, f.line.find(": "));
        if (std::find(places.begin(), places.end(), place) == places.end()) places.push_back(place);
        const bool of_its_status = (f.kind == HealthFindingKind::kCrashed || f.kind == HealthFindingKind::kError) == did_not_finish;
        if (!first || (of_its_status && (first->kind == HealthFindingKind::kCrashed || first->kind == HealthFindingKind::kError) != did_not_finish))
          first = &f;
      }
    if (o.status == ObsStatus::kOk && !c.rows.empty()) {
      // The rows computed alone: those the finding names, else the other ones where some run's differ from the
      // reference's.
      std::string rows = *c.rows.begin();
      for (auto& x : c.rows)
        if (x != k->rows_fingerprint) rows = x;
      if (first && first->kind == HealthFindingKind::kRows) rows = first->here;
      o.batch = BatchInvariance{};
      o.batch->rows_fingerprint = rows;
    }
    if (first) {
      o.verdict = Verdict::kFail;
      const std::string own = first->line.substr(0, first->line.find(": "));
      places.erase(std::remove(places.begin(), places.end(), own), places.end());
      o.verdict_reason = first->line;
      if (!places.empty()) o.verdict_reason += fmt::format("; also found on {}", fmt::join(places, ", "));
    } else if (o.status != ObsStatus::kOk) {
      o.verdict = Verdict::kFail;  // (every cell that did not finish is a finding: not reached)
      o.verdict_reason = o.reason.substr(3) + " (did not finish)";
    } else {
      o.verdict = Verdict::kPass;
      o.verdict_reason = fmt::format("every run gave the reference's bits ({}{}), on every CPU and GPU it ran on",
                                     short_hex(k->fingerprint),
                                     k->rows_fingerprint.empty() ? "" : ", rows " + short_hex(k->rows_fingerprint));
    }
    r.observations.push_back(std::move(o));
  }
  r.plan = {{"targets", targets}, {"workloads", workloads}};
  return r;
}

}  // namespace detaudit
