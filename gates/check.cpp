#include "gates/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/stats.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "report/document.hpp"
#include "report/json_fields.hpp"
#include "suites/probe_suite.hpp"

namespace detaudit {

namespace fs = std::filesystem;

const char* to_string(FindingKind k) {
  switch (k) {
    case FindingKind::kSame: return "same";
    case FindingKind::kBitsChanged: return "bits_changed";
    case FindingKind::kNewOutputs: return "new_outputs";
    case FindingKind::kAlgorithmChanged: return "algorithm_changed";
    case FindingKind::kOtherKey: return "other_key";
    case FindingKind::kDeterminism: return "determinism";
    case FindingKind::kErrRatio: return "err_ratio";
    case FindingKind::kVerdict: return "verdict";
    case FindingKind::kStatusChanged: return "status_changed";
    case FindingKind::kNotRun: return "not_run";
    case FindingKind::kNoBaseline: return "no_baseline";
    case FindingKind::kTrainingInterval: return "training_interval";
    case FindingKind::kTrainingBits: return "training_bits";
    case FindingKind::kTrainingNoInterval: return "training_no_interval";
    case FindingKind::kTrainingRun: return "training_run";
    case FindingKind::kTrainingNotRun: return "training_not_run";
    case FindingKind::kTrainingNoBaseline: return "training_no_baseline";
  }
  return "same";
}

int CheckReport::count(Verdict v) const {
  return int(std::count_if(findings.begin(), findings.end(), [&](const CheckFinding& f) { return f.verdict == v; }));
}

// ---- statistics ------------------------------------------------------------------------------------

bool prediction_interval(int n, double mean, double sd, double* lo, double* hi, int m, double alpha) {
  if (n < 2 || m < 1 || !(alpha > 0 && alpha < 1)) return false;
  double half = student_t_quantile(1 - alpha / 2, n - 1) * sd * std::sqrt(1.0 / m + 1.0 / n);
  *lo = mean - half;
  *hi = mean + half;
  return true;
}

// ---- the check -------------------------------------------------------------------------------------
namespace {

std::string fps_text(const std::vector<std::string>& fps) {
  if (fps.empty()) return "(none)";
  return fmt::format("{}", fmt::join(fps, ","));
}

std::string loss_text(double x) { return std::isfinite(x) ? fmt::format("{:.17g}", x) : "NaN"; }

// The run-to-run promise of a cell as this tool knows it (DIR's machine and details); the baseline's
// word when the specs no longer parse.
Promise::RunToRun current_promise(const Observation& o, const nlohmann::json& machine, const BaselineCell* bc,
                                  Promise* full) {
  Spec t, w;
  std::string err;
  if (parse_target(o.target, &t, &err) && parse_workload(o.workload, &w, &err)) {
    *full = promise_for(t, w, machine, o.details);
    return full->run_to_run;
  }
  if (bc && bc->promise == "deterministic") return Promise::RunToRun::kDeterministic;
  if (bc && bc->promise == "nondeterministic") return Promise::RunToRun::kNondeterministic;
  return Promise::RunToRun::kNone;
}

struct CellContext {
  const BaselineCell& bc;
  const Observation& o;
  bool key_matches;
  std::string key_diff;
  CheckReport* rep;
  size_t first;  // index of this cell's first finding

  CheckFinding& add(FindingKind kind, Verdict v, std::string old_value, std::string new_value, std::string message) {
    CheckFinding f;
    f.kind = kind;
    f.verdict = v;
    f.workload = o.workload;
    f.target = o.target;
    f.old_value = std::move(old_value);
    f.new_value = std::move(new_value);
    f.message = std::move(message);
    f.key_matches = key_matches;
    rep->findings.push_back(std::move(f));
    return rep->findings.back();
  }
  bool any(Verdict v) const {
    return std::any_of(rep->findings.begin() + first, rep->findings.end(), [&](const CheckFinding& f) { return f.verdict == v; });
  }
};

// Whether cuDNN chooses the algorithm of this cell itself (conv2d, the pass's *_algo key "auto"): Find
// times the algorithms, so another process can pick another one (kernels/cuda/cudnn_backend.cpp).
bool automatic_algorithm(const std::string& target, const std::string& workload) {
  Spec t, w;
  std::string err;
  if (!parse_target(target, &t, &err) || !parse_workload(workload, &w, &err)) return false;
  if (t.name != "cudnn" || w.name != "conv2d") return false;
  return t.get(w.get("pass", "fwd") + "_algo", "auto") == "auto";
}

// Same key, other bits: whether another algorithm ran (the algorithm names differ, or the target lets
// cuDNN choose and a side did not name its algorithm). *text: "X -> Y".
bool algorithm_changed(const CellContext& c, std::string* text) {
  auto it = c.o.details.find("algo_name");
  std::string now = it != c.o.details.end() ? it->second : "";
  const std::string& before = c.bc.algo;
  bool changed = (!before.empty() && !now.empty()) ? before != now
                                                   : ((before.empty() || now.empty()) &&
                                                      automatic_algorithm(c.o.target, c.o.workload));
  if (changed)
    *text = fmt::format("{} -> {}", before.empty() ? "(not recorded)" : before, now.empty() ? "(not reported)" : now);
  return changed;
}

// Key matches, both ran: bitwise.
void bitwise(CellContext& c, Promise::RunToRun promise) {
  std::set<std::string> old_fps(c.bc.fingerprints.begin(), c.bc.fingerprints.end());
  std::set<std::string> new_fps(c.o.fingerprints.begin(), c.o.fingerprints.end());
  std::vector<std::string> outside;
  for (auto& f : new_fps)
    if (!old_fps.count(f)) outside.push_back(f);
  bool deterministic_cell = old_fps.size() == 1 && promise != Promise::RunToRun::kNondeterministic;
  if (deterministic_cell ? new_fps == old_fps : outside.empty()) {
    c.add(FindingKind::kSame, Verdict::kPass, fps_text(c.bc.fingerprints), fps_text({new_fps.begin(), new_fps.end()}),
          fmt::format("same bits ({} distinct in {} repeats)", new_fps.size(), c.o.fingerprints.size()));
    return;
  }
  auto new_kernels = kernel_names_by_fingerprint(c.o);
  std::string shown_new = !outside.empty() ? outside.front() : (new_fps.empty() ? "" : *new_fps.begin());
  auto with_kernels = [&](CheckFinding& f) {
    auto it = deterministic_cell ? c.bc.kernels.find(c.bc.fingerprints.front()) : c.bc.kernels.begin();
    if (it != c.bc.kernels.end()) f.old_kernels = it->second;
    if (new_kernels.count(shown_new)) f.new_kernels = new_kernels[shown_new];
  };
  std::string new_text = fps_text({new_fps.begin(), new_fps.end()});
  // Another algorithm (cuDNN's automatic choice): other bits are no broken promise.
  std::string algo_change;
  if (algorithm_changed(c, &algo_change)) {
    with_kernels(c.add(FindingKind::kAlgorithmChanged, Verdict::kWarn, fps_text(c.bc.fingerprints), new_text,
                       fmt::format("another algorithm chosen ({}): fingerprint {} -> {} on the same machine key, "
                                   "not judged bitwise",
                                   algo_change, fps_text(c.bc.fingerprints), new_text)));
    return;
  }
  // Nothing promised either way (cuBLAS atomics=allowed, shared workspaces, oneDNN): new bits are said, not failed.
  if (promise == Promise::RunToRun::kNone) {
    with_kernels(c.add(deterministic_cell ? FindingKind::kBitsChanged : FindingKind::kNewOutputs, Verdict::kWarn,
                       fps_text(c.bc.fingerprints), deterministic_cell ? new_text : fps_text(outside),
                       fmt::format("nothing promised; new bits: fingerprint {} -> {} on the same machine key",
                                   fps_text(c.bc.fingerprints), new_text)));
    return;
  }
  if (deterministic_cell) {
    with_kernels(c.add(FindingKind::kBitsChanged, Verdict::kFail, c.bc.fingerprints.front(), new_text,
                       fmt::format("fingerprint changed on the same machine key: {} -> {}{}", c.bc.fingerprints.front(),
                                   new_text,
                                   new_fps.size() > 1 ? fmt::format(" ({} distinct outputs now)", new_fps.size()) : "")));
    return;
  }
  bool promised = promise == Promise::RunToRun::kDeterministic;
  with_kernels(c.add(FindingKind::kNewOutputs, promised ? Verdict::kFail : Verdict::kWarn, fps_text(c.bc.fingerprints),
                     fps_text(outside),
                     promised ? fmt::format("{} output(s) outside the baseline's {} and the target promises determinism",
                                            outside.size(), old_fps.size())
                              : fmt::format("new outputs of a nondeterministic target: {} of {} distinct not among the "
                                            "baseline's {}",
                                            outside.size(), new_fps.size(), old_fps.size())));
}

// Key differs, both ran: the determinism verdict and the error budget.
void other_key(CellContext& c, Promise::RunToRun promise, const Promise& full) {
  int now = count_distinct(c.o.fingerprints);
  if (c.bc.distinct == 1 && promise == Promise::RunToRun::kDeterministic && now > 1 && !c.any(Verdict::kFail))
    c.add(FindingKind::kDeterminism, Verdict::kFail, "1 distinct", fmt::format("{} distinct", now),
          fmt::format("deterministic in the baseline and promised deterministic, now {} distinct outputs in {} repeats "
                      "(key differs: {})",
                      now, c.o.fingerprints.size(), c.key_diff));
  std::optional<double> err_now;
  if (c.o.oracle && c.o.oracle->err_ratio >= 0) err_now = c.o.oracle->err_ratio;
  if (!full.error_bound_exempt.empty()) {
    // FFT, Winograd: no summation error bound applies, so no budget either (the verdict still fails a NaN).
    c.add(FindingKind::kErrRatio, Verdict::kSkip, c.bc.err_ratio ? fmt::format("{:.4g}", *c.bc.err_ratio) : "unknown",
          err_now ? fmt::format("{:.4g}", *err_now) : "unknown",
          "error ratio not judged: " + full.error_bound_exempt);
  } else if (err_now && c.bc.err_ratio) {
    double pb = oracle_budget(c.o, full);
    double budget = std::max(*c.bc.err_ratio, pb);
    if (!(*err_now <= budget))
      c.add(FindingKind::kErrRatio, Verdict::kFail, fmt::format("{:.4g}", *c.bc.err_ratio), fmt::format("{:.4g}", *err_now),
            fmt::format("error ratio {:.4g} beyond the budget {:.4g} (max of the baseline's {:.4g} and the promise's {:.4g})",
                        *err_now, budget, *c.bc.err_ratio, pb));
  } else {
    const char* which = !err_now && !c.bc.err_ratio ? "the baseline and this run" : (!err_now ? "this run" : "the baseline");
    c.add(FindingKind::kErrRatio, Verdict::kSkip, c.bc.err_ratio ? fmt::format("{:.4g}", *c.bc.err_ratio) : "unknown",
          err_now ? fmt::format("{:.4g}", *err_now) : "unknown",
          fmt::format("error ratio not known in {}: not judged", which));
  }
  if (c.any(Verdict::kFail) || c.any(Verdict::kWarn)) return;
  std::set<std::string> old_fps(c.bc.fingerprints.begin(), c.bc.fingerprints.end());
  std::set<std::string> new_fps(c.o.fingerprints.begin(), c.o.fingerprints.end());
  bool same = old_fps == new_fps;
  if (!same) ++c.rep->cells_other_key_bits_changed;
  c.add(FindingKind::kOtherKey, Verdict::kPass, fps_text(c.bc.fingerprints), fps_text({new_fps.begin(), new_fps.end()}),
        fmt::format("key differs ({}): verdict {} holds; bits {}", c.key_diff, c.o.verdict.empty() ? "-" : c.o.verdict,
                    same ? "the same" : "changed (not judged across keys)"));
}

void check_cell(const BaselineCell& bc, const nlohmann::json& bkey, const Observation& o, const Results& r,
                CheckReport* rep) {
  nlohmann::json nkey = entry_key(r, o.target);
  CellContext c{bc, o, nkey == bkey, "", rep, rep->findings.size()};
  if (!c.key_matches) c.key_diff = key_difference(bkey, nkey);
  ++rep->cells_compared;
  ++(c.key_matches ? rep->cells_same_key : rep->cells_other_key);
  Promise full;
  Promise::RunToRun promise = current_promise(o, r.machine, &bc, &full);

  if (o.verdict == "FAIL") {
    bool known = c.key_matches && bc.verdict == "FAIL" && bc.status == o.status &&
                 std::set<std::string>(bc.fingerprints.begin(), bc.fingerprints.end()) ==
                     std::set<std::string>(o.fingerprints.begin(), o.fingerprints.end());
    c.add(FindingKind::kVerdict, known ? Verdict::kWarn : Verdict::kFail, bc.verdict.empty() ? "-" : bc.verdict, o.verdict,
          known ? "known failure, FAIL in the baseline with the same outputs: " + o.verdict_reason
                : "verdict FAIL: " + o.verdict_reason);
  }
  if (bc.status != o.status) {
    if (!c.any(Verdict::kFail))
      c.add(FindingKind::kStatusChanged, Verdict::kWarn, to_string(bc.status), to_string(o.status),
            fmt::format("status changed: {}{} -> {}{}", to_string(bc.status), bc.reason.empty() ? "" : " (" + bc.reason + ")",
                        to_string(o.status), o.reason.empty() ? "" : " (" + o.reason + ")"));
  } else if (o.status == ObsStatus::kOk) {
    if (c.key_matches)
      bitwise(c, promise);
    else
      other_key(c, promise, full);
  } else if (!c.any(Verdict::kFail) && !c.any(Verdict::kWarn)) {
    c.add(FindingKind::kSame, Verdict::kPass, to_string(bc.status), to_string(o.status),
          fmt::format("{} as in the baseline", to_string(o.status)));
  }
}

// Whether DIR's probe plan includes the cell (a baseline cell missing from a run that planned it is lost).
bool planned(const Results& r, const std::string& workload, const std::string& target) {
  const auto& ts = json_fields::array(r.plan, "targets");
  const auto& ws = json_fields::array(r.plan, "workloads");
  auto has = [](const nlohmann::json& a, const std::string& s) {
    return std::any_of(a.begin(), a.end(), [&](const nlohmann::json& v) { return v.is_string() && v.get<std::string>() == s; });
  };
  if (!has(ts, target) || !has(ws, workload)) return false;
  Spec t, w;
  std::string err;
  return parse_target(target, &t, &err) && parse_workload(workload, &w, &err) && applicable(t, w);
}

void check_cells(const Baseline& b, const Results& r, CheckReport* rep) {
  std::map<std::pair<std::string, std::string>, const Observation*> dir_cells;
  for (auto& o : r.observations) dir_cells[{o.workload, o.target}] = &o;
  std::set<std::pair<std::string, std::string>> seen;
  int not_run_unplanned = 0;
  for (auto& bc : b.cells) {
    seen.insert({bc.workload, bc.target});
    auto it = dir_cells.find({bc.workload, bc.target});
    if (it != dir_cells.end()) {
      check_cell(bc, b.keys.at(bc.key), *it->second, r, rep);
      continue;
    }
    if (r.observations.empty()) {  // a training-only DIR: one line below, not one per cell
      ++not_run_unplanned;
      continue;
    }
    bool in_plan = planned(r, bc.workload, bc.target);
    CheckFinding f;
    f.kind = FindingKind::kNotRun;
    f.verdict = in_plan ? Verdict::kFail : Verdict::kWarn;
    f.workload = bc.workload;
    f.target = bc.target;
    f.old_value = to_string(bc.status);
    f.new_value = "not run";
    f.message = in_plan ? "planned in this run but no result (an unfinished run?)" : "not run (not in this run's plan)";
    rep->findings.push_back(f);
  }
  if (not_run_unplanned) {
    CheckFinding f;
    f.kind = FindingKind::kNotRun;
    f.verdict = Verdict::kWarn;
    f.workload = "(probe cells)";
    f.message = fmt::format("not run: this run has no probe cells; the baseline has {}", not_run_unplanned);
    rep->findings.push_back(f);
  }
  for (auto& [id, o] : dir_cells) {
    if (seen.count(id)) continue;
    CheckFinding f;
    f.kind = FindingKind::kNoBaseline;
    f.workload = o->workload;
    f.target = o->target;
    f.new_value = fps_text(o->fingerprints.empty() ? std::vector<std::string>{}
                                                   : std::vector<std::string>{o->fingerprints.front()});
    bool failed = o->verdict == "FAIL";
    f.verdict = failed ? Verdict::kFail : Verdict::kSkip;
    f.message = failed ? "new, no baseline; verdict FAIL: " + o->verdict_reason
                       : fmt::format("new, no baseline (verdict {})", o->verdict.empty() ? "-" : o->verdict);
    rep->findings.push_back(f);
  }
}

// ---- training --------------------------------------------------------------------------------------

using TrainCell = std::tuple<std::string, std::string, std::string, std::string>;  // model, design, condition, target

std::string train_label(const TrainCell& c) {
  return fmt::format("train {}/{} ({})", std::get<0>(c), std::get<1>(c), std::get<2>(c));
}

struct RunView {
  std::string status, reason, weights;
  uint64_t seed = 0;
  int replicate = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();
};

RunView view(const TrainingRun& run) {
  RunView v;
  v.status = to_string(run.status);
  v.reason = run.reason;
  v.weights = run.weights_fingerprint;
  v.seed = run.seed;
  v.replicate = run.replicate;
  v.loss = run.ok() ? run.final_loss : std::numeric_limits<double>::quiet_NaN();
  return v;
}

// One training cell of DIR against its baseline cell.
struct TrainPlan {
  const BaselineTraining* bt = nullptr;
  TrainCell id;
  bool key_matches = false;
  std::string key_diff;
  std::vector<RunView> runs;  // sorted by (seed, replicate)
  bool bitwise = false;       // deterministic condition on the same key: each run bitwise
  std::vector<double> finite;  // the final losses of its finished, finite runs (the m of the mean's test)
  bool judged = false;        // one test of the mean of `finite` (an interval, or sd 0 on the same key: a point)
};

CheckFinding train_finding(const TrainPlan& p) {
  CheckFinding f;
  f.workload = train_label(p.id);
  f.target = std::get<3>(p.id);
  f.key_matches = p.key_matches;
  return f;
}

// Per run: a run that did not finish or diverged fails (skipped: a warning); on the deterministic
// condition with the same key, its final loss and weights bitwise.
void check_run(const TrainPlan& p, const RunView& run, CheckReport* rep) {
  const BaselineTraining& bt = *p.bt;
  CheckFinding f = train_finding(p);
  f.new_value = loss_text(run.loss);
  std::string which = fmt::format("seed {} rep {}", run.seed, run.replicate);
  auto push = [&](FindingKind k, Verdict v, std::string msg) {
    f.kind = k;
    f.verdict = v;
    f.message = which + ": " + msg;
    rep->findings.push_back(f);
  };
  if (run.status != "ok") {
    f.new_value = run.status;
    push(FindingKind::kTrainingRun, run.status == "skipped" ? Verdict::kWarn : Verdict::kFail,
         fmt::format("run {}{}", run.status, run.reason.empty() ? "" : ": " + run.reason));
    return;
  }
  ++rep->runs_compared;
  if (!std::isfinite(run.loss)) {
    push(FindingKind::kTrainingRun, Verdict::kFail, "final loss is not finite (the run diverged)");
    return;
  }
  if (!p.bitwise) return;  // judged with the cell's other runs, on their mean
  const BaselineRun* ref = &bt.runs.front();
  for (auto& br : bt.runs)
    if (br.seed == run.seed && br.replicate == run.replicate) ref = &br;
  f.old_value = loss_text(ref->final_loss);
  bool same_loss = std::memcmp(&ref->final_loss, &run.loss, sizeof(double)) == 0;
  bool same_weights = ref->weights_fingerprint.empty() || run.weights.empty() || ref->weights_fingerprint == run.weights;
  if (same_loss && same_weights)
    push(FindingKind::kTrainingBits, Verdict::kPass, "deterministic condition on the same key: same final loss and weights");
  else
    push(FindingKind::kTrainingBits, Verdict::kFail,
         fmt::format("deterministic condition on the same key: final loss {} -> {}, weights {} -> {}",
                     loss_text(ref->final_loss), loss_text(run.loss), ref->weights_fingerprint, run.weights));
}

// The cell's one test: the mean of its m finite runs against the prediction interval for the mean of m
// new draws at alpha = 0.05 / `judged` (Bonferroni over the cells judged).
void check_mean(const TrainPlan& p, int judged, CheckReport* rep) {
  const BaselineTraining& bt = *p.bt;
  CheckFinding f = train_finding(p);
  auto push = [&](FindingKind k, Verdict v, std::string msg) {
    f.kind = k;
    f.verdict = v;
    f.message = std::move(msg);
    rep->findings.push_back(f);
  };
  const int m = int(p.finite.size());
  if (m == 0) return;  // every run failed or diverged: said per run
  const double now = mean(p.finite);
  f.new_value = fmt::format("mean {} of {} runs", loss_text(now), m);
  if (!p.judged) {
    f.old_value = bt.mean ? loss_text(*bt.mean) : "-";
    if (bt.n < 2 || !bt.mean || !bt.sd)
      push(FindingKind::kTrainingNoInterval, Verdict::kWarn,
           fmt::format("no prediction interval: the baseline has {} finished run(s) of this cell; mean final loss {} of "
                       "{} runs not judged",
                       bt.n, loss_text(now), m));
    else
      push(FindingKind::kTrainingNoInterval, Verdict::kWarn,
           fmt::format("the baseline's {} runs are identical (sd 0): the interval is the point {}, a bitwise comparison "
                       "that a different key excuses ({}); mean final loss {} of {} runs not judged",
                       bt.n, loss_text(*bt.mean), p.key_diff, loss_text(now), m));
    return;
  }
  if (*bt.sd == 0) {
    // Same key, identical baseline runs: every run must give that loss.
    double point = *bt.mean;
    for (auto& br : bt.runs)
      if (std::isfinite(br.final_loss)) {
        point = br.final_loss;
        break;
      }
    int differ = int(std::count_if(p.finite.begin(), p.finite.end(), [&](double x) { return x != point; }));
    f.old_value = fmt::format("[{}, {}]", loss_text(point), loss_text(point));
    push(FindingKind::kTrainingInterval, differ ? Verdict::kFail : Verdict::kPass,
         fmt::format("the baseline's {} runs are identical (sd 0) on the same key: the interval is the point {}; {} of "
                     "the {} runs {} (mean final loss {})",
                     bt.n, loss_text(point), differ ? differ : m, m, differ ? "differ" : "equal it", loss_text(now)));
    return;
  }
  const double alpha = 0.05 / judged;
  double lo = 0, hi = 0;
  prediction_interval(bt.n, *bt.mean, *bt.sd, &lo, &hi, m, alpha);
  f.old_value = fmt::format("[{}, {}]", loss_text(lo), loss_text(hi));
  bool inside = now >= lo && now <= hi;
  push(FindingKind::kTrainingInterval, inside ? Verdict::kPass : Verdict::kFail,
       fmt::format("mean final loss {} of {} runs {} [{}, {}], the prediction interval for the mean of {} new runs: "
                   "baseline mean {} ± t_{{{},1-α/2}} {:.6g} · sd {} · sqrt(1/{} + 1/{}), α = 0.05/{} = {:.4g} "
                   "(Bonferroni: 95% over the {} training cell(s) judged)",
                   loss_text(now), m, inside ? "inside" : "outside", loss_text(lo), loss_text(hi), m, loss_text(*bt.mean),
                   bt.n - 1, student_t_quantile(1 - alpha / 2, bt.n - 1), loss_text(*bt.sd), m, bt.n, judged, alpha,
                   judged));
}

void check_training(const Baseline& b, const Results& r, CheckReport* rep) {
  std::map<TrainCell, std::vector<RunView>> dir_cells;
  for (auto& run : r.training)
    dir_cells[{run.model, run.design, run.condition, run.target}].push_back(view(run));
  // First the plans, to know how many cells are judged (the Bonferroni divisor); then the findings, in
  // baseline order.
  std::set<TrainCell> seen;
  std::vector<TrainPlan> plans;
  int not_run = 0, judged = 0;
  for (auto& bt : b.training) {
    TrainCell id{bt.model, bt.design, bt.condition, bt.target};
    seen.insert(id);
    TrainPlan p;
    p.bt = &bt;
    p.id = id;
    auto it = dir_cells.find(id);
    if (it == dir_cells.end()) {
      if (r.training.empty()) {
        ++not_run;
        continue;
      }
      plans.push_back(std::move(p));  // runs empty: not run
      continue;
    }
    nlohmann::json nkey = entry_key(r, bt.target);
    p.key_matches = nkey == b.keys.at(bt.key);
    if (!p.key_matches) p.key_diff = key_difference(b.keys.at(bt.key), nkey);
    p.runs = it->second;
    std::sort(p.runs.begin(), p.runs.end(),
              [](const RunView& x, const RunView& y) { return std::tie(x.seed, x.replicate) < std::tie(y.seed, y.replicate); });
    p.bitwise = p.key_matches && bt.deterministic_condition() && !bt.runs.empty();
    if (!p.bitwise) {
      for (auto& run : p.runs)
        if (run.status == "ok" && std::isfinite(run.loss)) p.finite.push_back(run.loss);
      p.judged = !p.finite.empty() && bt.n >= 2 && bt.mean && bt.sd && (*bt.sd != 0 || p.key_matches);
      judged += p.judged;
    }
    plans.push_back(std::move(p));
  }
  for (auto& p : plans) {
    if (p.runs.empty()) {
      CheckFinding f = train_finding(p);
      f.kind = FindingKind::kTrainingNotRun;
      f.verdict = Verdict::kWarn;
      f.old_value = fmt::format("{} runs", p.bt->runs.size());
      f.new_value = "not run";
      f.message = "not run";
      rep->findings.push_back(f);
      continue;
    }
    for (auto& run : p.runs) check_run(p, run, rep);
    if (!p.bitwise) check_mean(p, judged, rep);
  }
  if (not_run) {
    CheckFinding f;
    f.kind = FindingKind::kTrainingNotRun;
    f.verdict = Verdict::kWarn;
    f.workload = "(training)";
    f.message = fmt::format("not run: this run has no training runs; the baseline has {} training cells", not_run);
    rep->findings.push_back(f);
  }
  for (auto& [id, runs] : dir_cells) {
    if (seen.count(id)) continue;
    CheckFinding f;
    f.kind = FindingKind::kTrainingNoBaseline;
    f.verdict = Verdict::kSkip;
    f.workload = train_label(id);
    f.target = std::get<3>(id);
    f.new_value = fmt::format("{} runs", runs.size());
    f.message = "new, no baseline";
    rep->findings.push_back(f);
  }
}

}  // namespace

CheckReport check_against_baseline(const Baseline& b, const Results& in, const std::string& dir,
                                   const std::string& baseline_path) {
  Results judged;
  const Results* r = judged_view(in, &judged);
  CheckReport rep;
  rep.dir = dir;
  rep.baseline_path = baseline_path;
  rep.baseline_created_at = b.created_at;
  rep.baseline_tool = b.tool_version + (b.tool_commit.empty() ? "" : " (" + b.tool_commit + ")");
  rep.baseline_source = b.source_dir;
  check_cells(b, *r, &rep);
  check_training(b, *r, &rep);
  return rep;
}

// ---- rendering -------------------------------------------------------------------------------------
namespace {

constexpr size_t kMdField = 300;  // a header field in the markdown (from the baseline file, or a path)

std::string plural(int n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); }

std::string where(const CheckFinding& f) { return f.target.empty() ? f.workload : f.workload + " on " + f.target; }

bool listed_as_new(const CheckFinding& f) {
  return (f.kind == FindingKind::kNoBaseline || f.kind == FindingKind::kTrainingNoBaseline) && f.verdict != Verdict::kFail;
}

std::vector<const CheckFinding*> pick(const CheckReport& rep, Verdict v, bool new_cells = false) {
  std::vector<const CheckFinding*> out;
  for (auto& f : rep.findings)
    if (f.verdict == v && listed_as_new(f) == new_cells) out.push_back(&f);
  return out;
}

// Cells on another key whose bits changed: no failure, but what a release review wants to see.
std::vector<const CheckFinding*> other_key_changes(const CheckReport& rep) {
  std::vector<const CheckFinding*> out;
  for (auto& f : rep.findings)
    if (f.kind == FindingKind::kOtherKey && f.old_value != f.new_value) out.push_back(&f);
  return out;
}

// At most `max` bytes of `s` and "..." when clipped, never cutting a UTF-8 character.
std::string clip(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // s[cut] starts a character
  return s.substr(0, cut) + "...";
}

std::string kernels_text(const std::vector<std::string>& ks, size_t max_names, size_t max_len) {
  std::string s;
  for (size_t i = 0; i < ks.size() && i < max_names; ++i) {
    std::string k = clip(ks[i], max_len);
    s += (i ? ", " : "") + k;
  }
  if (ks.size() > max_names) s += fmt::format(", ... and {} more", ks.size() - max_names);
  return s;
}

std::string summary_line(const CheckReport& rep) {
  return fmt::format(
      "{} cells compared ({} on the same key, {} on another key, {} of them with other bits), {} training runs; "
      "{} FAIL, {} WARN, {} not judged, {} new without a baseline",
      rep.cells_compared, rep.cells_same_key, rep.cells_other_key, rep.cells_other_key_bits_changed, rep.runs_compared,
      rep.count(Verdict::kFail), rep.count(Verdict::kWarn), int(pick(rep, Verdict::kSkip).size()),
      int(pick(rep, Verdict::kSkip, true).size()));
}

std::string render_text(const CheckReport& rep) {
  std::string s = fmt::format("detaudit check {} against {} (baseline of {}, created {}, detaudit {})\n", rep.dir,
                              rep.baseline_path, rep.baseline_source, rep.baseline_created_at, rep.baseline_tool);
  auto section = [&](const char* title, const std::vector<const CheckFinding*>& fs, size_t cap) {
    if (fs.empty()) return;
    s += fmt::format("{} ({}):\n", title, fs.size());
    for (size_t i = 0; i < fs.size() && i < cap; ++i) {
      const auto& f = *fs[i];
      s += fmt::format("  {:<8} {:<20} {}: {}\n", to_string(f.verdict), to_string(f.kind), where(f), f.message);
      if (!f.old_kernels.empty()) s += "           kernels before: " + kernels_text(f.old_kernels, 8, 160) + "\n";
      if (!f.new_kernels.empty()) s += "           kernels now:    " + kernels_text(f.new_kernels, 8, 160) + "\n";
    }
    if (fs.size() > cap) s += fmt::format("  ... and {} more (--format json lists every finding)\n", fs.size() - cap);
  };
  section("FAIL", pick(rep, Verdict::kFail), std::numeric_limits<size_t>::max());
  section("WARN", pick(rep, Verdict::kWarn), 50);
  section("not judged", pick(rep, Verdict::kSkip), 20);
  section("new, no baseline", pick(rep, Verdict::kSkip, true), 20);
  section("other bits where the key differs (not failures)", other_key_changes(rep), 20);
  s += summary_line(rep) + "\n";
  int fails = rep.count(Verdict::kFail);
  int warns = rep.count(Verdict::kWarn);
  s += fails ? "check FAILED: " + plural(fails, "failure") + "\n"
             : "check passed" + (warns ? " (" + plural(warns, "warning") + ")" : std::string()) + "\n";
  return s;
}

// A code span for GitHub markdown (safe in a table cell); text with a backtick or a line break is escaped instead.
std::string md_code(const std::string& s) {
  if (s.empty() || s.find_first_of("`\n\r") != std::string::npos) return markdown_escape(s);
  std::string out = "`";
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out + "`";
}

std::string md_row(const CheckFinding& f) {
  std::string what = std::string("`") + to_string(f.kind) + "`";
  std::string change;
  if (!f.old_value.empty() || !f.new_value.empty())
    change = markdown_escape(f.old_value.empty() ? "-" : f.old_value) + " → " + markdown_escape(f.new_value.empty() ? "-" : f.new_value);
  std::string msg = markdown_escape(clip(f.message, 400));
  if (!f.old_kernels.empty()) msg += "<br>kernels before: " + markdown_escape(kernels_text(f.old_kernels, 3, 80));
  if (!f.new_kernels.empty()) msg += "<br>kernels now: " + markdown_escape(kernels_text(f.new_kernels, 3, 80));
  return fmt::format("| {} | {} | {} | {} | {} | {} |\n", to_string(f.verdict), what, md_code(f.workload),
                     md_code(f.target), change, msg);
}

// Rows until `budget` characters are used, then "... and N more".
std::string md_table(const std::vector<const CheckFinding*>& fs, size_t budget) {
  std::string s = "| verdict | kind | workload | target | baseline → now | message |\n|---|---|---|---|---|---|\n";
  size_t shown = 0;
  for (auto* f : fs) {
    std::string row = md_row(*f);
    if (s.size() + row.size() > budget) break;
    s += row;
    ++shown;
  }
  if (shown < fs.size()) s += fmt::format("\n... and {} more (`--format json` lists every finding)\n", fs.size() - shown);
  return s;
}

std::string render_md(const CheckReport& rep) {
  int fails = rep.count(Verdict::kFail), warns = rep.count(Verdict::kWarn);
  std::string s = fmt::format("## detaudit check: {}\n\n", fails ? "FAIL (" + plural(fails, "failure") + ")"
                                                              : (warns ? "PASS (" + plural(warns, "warning") + ")" : "PASS"));
  // The baseline file's header fields and the paths are whatever they are: each clipped.
  s += fmt::format("{} against {} (baseline of {}, created {}, detaudit {}).\n\n", md_code(clip(rep.dir, kMdField)),
                   md_code(clip(rep.baseline_path, kMdField)), md_code(clip(rep.baseline_source, kMdField)),
                   markdown_escape(clip(rep.baseline_created_at, kMdField)),
                   markdown_escape(clip(rep.baseline_tool, kMdField)));
  s += markdown_escape(summary_line(rep)) + "\n\n";
  // Budgets: failures first and most; the whole stays under kMarkdownLimit.
  auto fl = pick(rep, Verdict::kFail), wl = pick(rep, Verdict::kWarn), sl = pick(rep, Verdict::kSkip),
       nl = pick(rep, Verdict::kSkip, true);
  if (!fl.empty()) s += fmt::format("### Failures ({})\n\n", fl.size()) + md_table(fl, 28000) + "\n";
  if (!wl.empty())
    s += fmt::format("<details><summary>Warnings ({})</summary>\n\n", wl.size()) + md_table(wl, 10000) + "\n</details>\n\n";
  if (!sl.empty())
    s += fmt::format("<details><summary>Not judged ({})</summary>\n\n", sl.size()) + md_table(sl, 5000) + "\n</details>\n\n";
  if (!nl.empty())
    s += fmt::format("<details><summary>New, no baseline ({})</summary>\n\n", nl.size()) + md_table(nl, 5000) +
         "\n</details>\n\n";
  auto ol = other_key_changes(rep);
  if (!ol.empty())
    s += fmt::format("<details><summary>Other bits where the key differs, not failures ({})</summary>\n\n", ol.size()) +
         md_table(ol, 5000) + "\n</details>\n";
  return cap_markdown(s, kMarkdownLimit);
}

}  // namespace

std::string cap_markdown(const std::string& md, size_t limit) {
  if (md.size() < limit) return md;
  // Cut after a whole line, so neither a UTF-8 character nor a table row nor a tag is split, then close
  // the <details> blocks still open there (ours start a line with "<details>" and end one as
  // "</details>"; escaped user text cannot).
  size_t reserve = 64;
  while (true) {
    size_t end = 0;  // bytes kept: md[0, end)
    if (limit > reserve) {
      size_t nl = md.rfind('\n', limit - reserve - 1);
      end = nl == std::string::npos ? 0 : nl + 1;
    }
    int open = 0;
    for (size_t p = 0; p < end;) {
      size_t q = md.find('\n', p);
      std::string_view line(md.data() + p, (q == std::string::npos || q >= end ? end : q) - p);
      if (line.starts_with("<details>")) ++open;
      else if (line.starts_with("</details>") && open > 0) --open;
      p = q == std::string::npos ? end : q + 1;
    }
    std::string tail = "\n... (truncated: `--format json` lists every finding)\n";
    for (int i = 0; i < open; ++i) tail += "\n</details>\n";
    if (end + tail.size() < limit || end == 0) return md.substr(0, end) + tail;
    reserve = limit - end + tail.size();  // cut earlier, leaving room for this tail
  }
}

nlohmann::json to_json(const CheckReport& rep) {
  nlohmann::json fs = nlohmann::json::array();
  for (auto& f : rep.findings) {
    nlohmann::json j = {{"kind", to_string(f.kind)},   {"verdict", to_string(f.verdict)}, {"workload", f.workload},
                        {"target", f.target},          {"old", f.old_value},              {"new", f.new_value},
                        {"message", f.message},        {"key_matches", f.key_matches}};
    if (!f.old_kernels.empty()) j["old_kernels"] = f.old_kernels;
    if (!f.new_kernels.empty()) j["new_kernels"] = f.new_kernels;
    fs.push_back(j);
  }
  return {{"schema", "detaudit-check/1"},
          {"dir", rep.dir},
          {"baseline", rep.baseline_path},
          {"baseline_created_at", rep.baseline_created_at},
          {"baseline_tool", rep.baseline_tool},
          {"exit_code", rep.exit_code()},
          {"counts",
           {{"PASS", rep.count(Verdict::kPass)},
            {"FAIL", rep.count(Verdict::kFail)},
            {"WARN", rep.count(Verdict::kWarn)},
            {"SKIP", rep.count(Verdict::kSkip)}}},
          {"cells_compared", rep.cells_compared},
          {"cells_same_key", rep.cells_same_key},
          {"cells_other_key", rep.cells_other_key},
          {"cells_other_key_bits_changed", rep.cells_other_key_bits_changed},
          {"training_runs_compared", rep.runs_compared},
          {"findings", fs}};
}

std::string render_check(const CheckReport& rep, OutputFormat format) {
  switch (format) {
    case OutputFormat::kText: return render_text(rep);
    case OutputFormat::kMarkdown: return render_md(rep);
    case OutputFormat::kJson: return to_json(rep).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return render_text(rep);
}

int run_check(const CheckOptions& opt, std::string* report, std::string* err, Results* checked) {
  Baseline b;
  if (!load_baseline(opt.baseline, &b, err)) return 2;
  if (!fs::is_directory(opt.dir)) {
    *err = opt.dir + ": not a directory";
    return 2;
  }
  Results r;
  if (!load_results(opt.dir + "/results.json", &r, err)) return 2;
  CheckReport rep = check_against_baseline(b, r, opt.dir, opt.baseline);
  *report = render_check(rep, opt.format);
  if (checked) {
    if (!is_judged(r)) judge(&r);
    *checked = std::move(r);
  }
  return rep.exit_code();
}

}  // namespace detaudit
