#include "gates/check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "analysis/stats.hpp"
#include "contract/json_fields.hpp"
#include "contract/plan.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "probes/spec.hpp"
#include "suites/probe_suite.hpp"

namespace detaudit {

namespace fs = std::filesystem;

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
  if (parse_target(o.target, &t).is_ok() && parse_workload(o.workload, &w).is_ok()) {
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
  if (!parse_target(target, &t).is_ok() || !parse_workload(workload, &w).is_ok()) return false;
  return picks_algorithm(t, w);
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
        fmt::format("key differs ({}): verdict {} holds; bits {}", c.key_diff, c.o.verdict ? to_string(*c.o.verdict) : "-",
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

  if (o.verdict == Verdict::kFail) {
    bool known = c.key_matches && bc.verdict == Verdict::kFail && bc.status == o.status &&
                 std::set<std::string>(bc.fingerprints.begin(), bc.fingerprints.end()) ==
                     std::set<std::string>(o.fingerprints.begin(), o.fingerprints.end());
    c.add(FindingKind::kVerdict, known ? Verdict::kWarn : Verdict::kFail, bc.verdict ? to_string(*bc.verdict) : "-", "FAIL",
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
  return parse_target(target, &t).is_ok() && parse_workload(workload, &w).is_ok() && applicable(t, w);
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
    // A cell the baseline itself skipped (a GPU target on a machine without one) has nothing to miss.
    const bool skipped_before = bc.status == ObsStatus::kSkipped;
    f.verdict = in_plan ? Verdict::kFail : skipped_before ? Verdict::kSkip : Verdict::kWarn;
    f.workload = bc.workload;
    f.target = bc.target;
    f.old_value = to_string(bc.status);
    f.new_value = "not run";
    f.message = in_plan          ? "planned in this run but no result (an unfinished run?)"
                : skipped_before ? "skipped in the baseline, not run here"
                                 : "not run (not in this run's plan)";
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
    bool failed = o->verdict == Verdict::kFail;
    f.verdict = failed ? Verdict::kFail : Verdict::kSkip;
    f.message = failed ? "new, no baseline; verdict FAIL: " + o->verdict_reason
                       : fmt::format("new, no baseline (verdict {})", o->verdict ? to_string(*o->verdict) : "-");
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

namespace {

// Refuses a baseline of another kind of run than the results: probe against training, another model,
// design or suite (the first field that differs).
Status same_kind(const Baseline& b, const Results& r, const std::string& dir, const std::string& baseline_path) {
  auto refuse = [&](const std::string& what) {
    return Status::invalid(fmt::format("{} cannot be checked against {}: {}", dir, baseline_path, what));
  };
  if (!b.source_plan.is_null()) {
    if (std::string d = plan_difference(b.source_plan, r.plan, true); !d.empty())
      return refuse(
          fmt::format("the baseline holds {}, the results {} ({})", plan_kind(b.source_plan), plan_kind(r.plan), d));
    return Status::ok();
  }
  // A baseline of an older version, without its plan: its kind from what it holds.
  if (!r.observations.empty() && b.cells.empty())
    return refuse(
        fmt::format("the results hold probe cells, the baseline none (it holds {} training cells)", b.training.size()));
  if (!r.training.empty() && b.training.empty())
    return refuse(
        fmt::format("the results hold training runs, the baseline none (it holds {} probe cells)", b.cells.size()));
  for (auto& run : r.training)
    if (std::none_of(b.training.begin(), b.training.end(),
                     [&](const BaselineTraining& t) { return t.model == run.model && t.design == run.design; }))
      return refuse(fmt::format("the results hold training runs of {}/{}, the baseline none", run.model, run.design));
  return Status::ok();
}

}  // namespace

Status run_check(const CheckOptions& opt, CheckReport* report, Results* checked) {
  Baseline b;
  DETAUDIT_RETURN_IF_ERROR(load_baseline(opt.baseline, &b));
  if (!fs::is_directory(opt.dir)) {
    return Status::invalid(opt.dir + ": not a directory");
  }
  Results r;
  DETAUDIT_RETURN_IF_ERROR(load_checked_results(opt.dir + "/results.json", &r));
  DETAUDIT_RETURN_IF_ERROR(same_kind(b, r, opt.dir, opt.baseline));
  CheckReport rep = check_against_baseline(b, r, opt.dir, opt.baseline);
  if (rep.cells_compared == 0 && rep.runs_compared == 0)
    return Status::invalid(fmt::format("{} and {} share no cell: nothing was compared ({}; {})", opt.dir, opt.baseline,
                                       r.observations.size() + r.training.size() == 0
                                           ? "the results hold no cell and no training run"
                                           : "every cell of one is missing from the other",
                                       plan_kind(r.plan)));
  *report = std::move(rep);
  if (checked) {
    if (!is_judged(r)) judge(&r);
    *checked = std::move(r);
  }
  return Status::ok();
}

}  // namespace detaudit
