#include "gates/check.hpp"
#include "contract/results.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "analysis/shift.hpp"
#include "analysis/stats.hpp"
#include "contract/json_fields.hpp"
#include "contract/plan.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "probes/spec.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_design.hpp"

namespace detaudit {

namespace fs = std::filesystem;

// ---- the check -------------------------------------------------------------------------------------
namespace {

std::string fps_text(const std::vector<std::string>& fps) {
  if (fps.empty()) return "(none)";
  return fmt::format("{}", fmt::join(fps, ","));
}

std::string loss_text(double x) { return std::isfinite(x) ? fmt::format("{:.17g}", x) : "NaN"; }
// A statistic of losses (a detectable shift, an sd): three digits say it.
std::string stat_text(double x) { return std::isfinite(x) ? fmt::format("{:.3g}", x) : "NaN"; }

// The run-to-run promise of a cell as this tool knows it (DIR's machine and details); the baseline's
// word when the specs no longer parse.
Promise::RunToRun current_promise(const Observation& o, const nlohmann::json& machine, const BaselineCell* bc,
                                  Promise* full) {
  if (std::optional<Promise> p = promise_of(o, machine)) {
    *full = *p;
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
  // A baseline cell that broke its promise of determinism (several outputs, a FAIL) holds no known-good bits:
  // outputs among its own are not a pass (outputs outside them still fail, below).
  if (promise == Promise::RunToRun::kDeterministic && old_fps.size() > 1 && outside.empty()) {
    c.add(FindingKind::kVerdict, Verdict::kWarn, fps_text(c.bc.fingerprints), fps_text({new_fps.begin(), new_fps.end()}),
          fmt::format("not judged bitwise: the baseline's cell broke its promise of determinism ({} distinct outputs), "
                      "so its bits are no known-good reference",
                      old_fps.size()));
    return;
  }
  // A batchinv cell's rows computed alone are outputs of the same kernels: the same product with other rows is
  // changed bits (a fault that lands only there).
  const std::string rows_now = c.o.batch ? c.o.batch->rows_fingerprint : "";
  if (deterministic_cell && new_fps == old_fps && !c.bc.rows_fingerprint.empty() && !rows_now.empty() &&
      rows_now != c.bc.rows_fingerprint) {
    c.add(FindingKind::kBitsChanged, Verdict::kFail, c.bc.rows_fingerprint, rows_now,
          fmt::format("the rows computed alone (batch invariance) changed on the same machine key: {} -> {} (the "
                      "product's bits are the same)",
                      c.bc.rows_fingerprint, rows_now));
    return;
  }
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
    // A cell the baseline judged PASS (or EXPECTED) was within the promise's budget: only a baseline cell that
    // already failed it raises the budget to its own ratio (no worse than it was).
    double pb = oracle_budget(c.o, full);
    const bool baseline_failed = c.bc.verdict == Verdict::kFail || c.bc.verdict == Verdict::kWarn;
    double budget = baseline_failed ? std::max(*c.bc.err_ratio, pb) : pb;
    if (!(*err_now <= budget))
      c.add(FindingKind::kErrRatio, Verdict::kFail, fmt::format("{:.4g}", *c.bc.err_ratio), fmt::format("{:.4g}", *err_now),
            baseline_failed
                ? fmt::format("error ratio {:.4g} beyond the budget {:.4g} (max of the baseline's {:.4g}, which already "
                              "failed, and the promise's {:.4g})",
                              *err_now, budget, *c.bc.err_ratio, pb)
                : fmt::format("error ratio {:.4g} beyond the promise's budget {:.4g} (the baseline's was {:.4g})",
                              *err_now, budget, *c.bc.err_ratio));
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
  rep->cells_ran += o.status == ObsStatus::kOk;
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
    // On the key the baseline ran it on, a CPU cell has no cause to be skipped now: what skips one (an ISA the
    // CPU lacks, a library left out of the build) is in that key. (A GPU may be taken by another process.)
    if (c.key_matches && bc.status == ObsStatus::kOk && o.status == ObsStatus::kSkipped &&
        json_fields::str(bkey, "kind", "") != "gpu" && !c.any(Verdict::kFail))
      c.add(FindingKind::kStatusChanged, Verdict::kFail, to_string(bc.status), to_string(o.status),
            fmt::format("skipped now ({}), but it ran in the baseline on the same machine key, where nothing skips "
                        "it: its bits were not judged",
                        o.reason.empty() ? "no reason" : o.reason));
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
  std::string status, reason, weights, outcome;  // outcome: outcome_fingerprint
  std::string broken;  // why a finished run broke its deterministic variant's promise (judge_training_runs)
  uint64_t seed = 0;
  int replicate = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();
};

RunView view(const TrainingRun& run, const RunVerdict& verdict) {
  RunView v;
  if (broke_promise(run, verdict)) v.broken = verdict.reason;
  v.status = to_string(run.status);
  v.reason = run.reason;
  v.weights = run.weights_fingerprint;
  if (run.ok()) v.outcome = outcome_fingerprint(run);
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
  bool bitwise = false;       // nondeterminism off on the same key: each run bit for bit
  std::vector<SeedRuns> seeds;  // finished, finite final losses by seed: baseline and new
  int base_finite = 0;
  bool tested = false;  // judged by a test (counted in its family)
  ShiftTest shift;      // same key, nondeterminism on: the permutation test (computed for every candidate)
  double level = 0;     // the level it is tested at (Holm's for its rank), or would be (not judged)
  int holm_rank = 0;    // 1-based rank of its p among the shift family; 0: not in it
  bool rejected = false;
  bool identical = false;  // every finished run of both sides has one final loss, bit for bit
  double identical_loss = 0;
};

// Whether every loss of both sides is the same double, bit for bit (*value: it).
bool all_identical(const std::vector<SeedRuns>& seeds, double* value) {
  const double* first = nullptr;
  for (auto& s : seeds)
    for (const auto* side : {&s.base, &s.now})
      for (const double& x : *side) {
        if (!first) first = &x;
        if (std::memcmp(first, &x, sizeof(double)) != 0) return false;
      }
  if (first) *value = *first;
  return first != nullptr;
}

CheckFinding train_finding(const TrainPlan& p) {
  CheckFinding f;
  f.workload = train_label(p.id);
  f.target = std::get<3>(p.id);
  f.key_matches = p.key_matches;
  return f;
}

// Per run: a run that did not finish or diverged fails (skipped: a warning); with nondeterminism off on
// the same key, its final loss and weights bit for bit against the baseline run of its seed and
// replicate (a fixed-init condition's replicates all start alike: any run of the seed).
// A run's own failure, judged with or without a baseline: a crash, timeout or error FAILs, a skip WARNs (FAILs where
// `skip_fails`), a diverged run FAILs. Empty for a run that finished with a finite final loss.
struct OwnFailure {
  Verdict verdict;
  std::string message, value;  // value: the finding's new value (the status, or the final loss)
};
std::optional<OwnFailure> own_failure(const RunView& run, bool skip_fails) {
  if (run.status != "ok")
    return OwnFailure{run.status == "skipped" && !skip_fails ? Verdict::kWarn : Verdict::kFail,
                      fmt::format("run {}{}{}", run.status, run.reason.empty() ? "" : ": " + run.reason,
                                  run.status == "skipped" && skip_fails
                                      ? " (a CPU target on the baseline's own machine key)"
                                      : ""),
                      run.status};
  if (!run.broken.empty()) return OwnFailure{Verdict::kFail, run.broken, loss_text(run.loss)};
  if (!std::isfinite(run.loss))
    return OwnFailure{Verdict::kFail, "final loss is not finite (the run diverged)", loss_text(run.loss)};
  return std::nullopt;
}

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
  if (run.status == "ok") ++rep->runs_compared;
  // What skips a CPU target's run (an instruction set, a library) is in the key: on the baseline's own key, where
  // this cell's runs finished, a skip excuses nothing (a GPU may be busy: there it stays a warning).
  if (auto own = own_failure(run, p.key_matches && target_facts(bt.target).device_kind == "host")) {
    f.new_value = own->value;
    push(FindingKind::kTrainingRun, own->verdict, own->message);
    return;
  }
  if (!p.bitwise) return;  // judged with the cell's other runs, seed by seed
  const BaselineRun* ref = nullptr;
  for (auto& br : bt.runs)
    if (br.seed == run.seed && (br.replicate == run.replicate || bt.init == "fixed")) {
      ref = &br;
      if (br.replicate == run.replicate) break;
    }
  if (!ref) {
    push(FindingKind::kTrainingNotJudged, Verdict::kSkip, "no baseline run of this seed to compare bit for bit");
    return;
  }
  f.old_value = loss_text(ref->final_loss);
  bool same_loss = std::memcmp(&ref->final_loss, &run.loss, sizeof(double)) == 0;
  bool same_weights = ref->weights_fingerprint.empty() || run.weights.empty() || ref->weights_fingerprint == run.weights;
  // (A baseline of an older version keeps no outcome: the final loss and weights are all it can hold.)
  const bool same_outcome = ref->outcome.empty() || run.outcome.empty() || ref->outcome == run.outcome;
  if (same_loss && same_weights && same_outcome)
    push(FindingKind::kTrainingBits, Verdict::kPass,
         ref->outcome.empty() ? "nondeterminism off on the same key: same final loss and weights"
                              : "nondeterminism off on the same key: same final loss, weights, learning curve, noise "
                                "measurements and held-out prediction");
  else if (same_loss && same_weights)
    push(FindingKind::kTrainingBits, Verdict::kFail,
         fmt::format("nondeterminism off on the same key: the same final loss and weights, but another learning "
                     "curve, noise measurement or held-out prediction (outcome {} -> {})",
                     ref->outcome, run.outcome));
  else
    push(FindingKind::kTrainingBits, Verdict::kFail,
         fmt::format("nondeterminism off on the same key: final loss {} -> {}, weights {} -> {}",
                     loss_text(ref->final_loss), loss_text(run.loss), ref->weights_fingerprint, run.weights));
}

std::string pct(double shift, double mean) {
  return std::isfinite(mean) && mean != 0 ? fmt::format(" ({:+.3g}% of the mean)", 100 * shift / mean) : "";
}

// What a shift test's design detects at a level, in words. A judged cell states it at Holm's first level,
// 0.05/m: the level a cell that moved meets first, whatever the others do.
std::string power_text(const ShiftTest& t, double level) {
  const std::string design = fmt::format("at {} seed(s) and {} + {} runs", t.seeds, t.base_runs, t.new_runs);
  if (t.min_p > level) return design + " this check detects nothing (its smallest p-value is above its level)";
  if (t.within_df == 0)
    return design + " (one run per seed and side) the run-to-run spread is unknown, and with it what this check "
                    "could detect";
  if (t.within_sd == 0)
    return design + fmt::format(" the runs repeat exactly within each seed (run-to-run sd 0, df {}): any shift shows",
                                t.within_df);
  return design + fmt::format(" this check detects a shift of {} (power {} at level {:.3g}, {}; run-to-run sd {}, "
                              "df {})",
                              stat_text(detectable_shift(t, level)), kPowerTarget, level,
                              t.arrangements > kSimulatedArrangements ? "noncentral t" : "the permutation test simulated",
                              stat_text(t.within_sd), t.within_df);
}

// Same key, nondeterminism on: the stratified permutation test of the shift (analysis/shift.hpp), judged
// in the shift family (Holm, check_training) or not judged where its floor is above its level.
void check_shift(const TrainPlan& p, int family, CheckReport* rep) {
  CheckFinding f = train_finding(p);
  const BaselineTraining& bt = *p.bt;
  const ShiftTest& t = p.shift;
  const double base_mean = bt.mean.value_or(std::numeric_limits<double>::quiet_NaN());
  f.old_value = fmt::format("{} runs, mean {}", p.base_finite, loss_text(base_mean));
  f.new_value = fmt::format("{} runs, shift {}", t.new_runs, loss_text(t.shift));
  auto push = [&](FindingKind k, Verdict v, std::string msg) {
    f.kind = k;
    f.verdict = v;
    f.message = std::move(msg);
    rep->findings.push_back(f);
  };
  if (p.identical) {
    push(FindingKind::kTrainingShift, Verdict::kPass,
         fmt::format("every run on both sides has the same final loss, {}, bit for bit ({} + {} runs): no shift",
                     loss_text(p.identical_loss), t.base_runs, t.new_runs));
    return;
  }
  if (!p.tested) {
    const int per_seed_base = t.seeds ? t.base_runs / t.seeds : 0, per_seed_new = t.seeds ? t.new_runs / t.seeds : 0;
    const JudgeableDesign need = judgeable_design(t.seeds, per_seed_base, per_seed_new, p.level);
    std::string fix;
    if (t.seeds == 0)
      fix = "no seed has finished runs on both sides";
    else if (need.seeds && need.runs_per_side)
      fix = fmt::format("{} seeds of {} + {} runs, or {} runs per side in each of the {} seed(s), would make it "
                        "judgeable",
                        need.seeds, per_seed_base, per_seed_new, need.runs_per_side, t.seeds);
    push(FindingKind::kTrainingNotJudged, Verdict::kSkip,
         fmt::format("not judged: the smallest p-value these runs can give is {:.3g} ({} arrangements within seeds), "
                     "above the level {:.3g} it would be tested at (0.05 over {} cell(s)); {}",
                     t.min_p, t.arrangements, p.level, family + 1, fix));
    return;
  }
  push(FindingKind::kTrainingShift, p.rejected ? Verdict::kFail : Verdict::kPass,
       fmt::format("mean final loss {} by {}{} seed by seed: permutation p = {:.4g} ({} within seeds{}), {} its Holm "
                   "level {:.3g} (rank {} of the {} training cell(s) judged, family-wise 0.05); {}",
                   p.rejected ? "moved" : "within run-to-run noise, shifted", loss_text(t.shift),
                   pct(t.shift, base_mean), t.p,
                   t.exact ? fmt::format("exact over {:.0f} arrangements", t.arrangements)
                           : fmt::format("{} draws of {:.3g} arrangements", kDraws, t.arrangements),
                   t.integer ? "" : "; losses compared in long double", p.rejected ? "<=" : "above",
                   p.level, p.holm_rank, family, power_text(t, 0.05 / double(family))));
}

// The shift family: every same-key cell with nondeterminism on and new runs. Judged: the largest set of
// m cells whose floors are all at most 0.05/m (so each can fail at Holm's first step); those are then
// tested by Holm's step-down procedure. The others are not judged, at the level 0.05/(m + 1) they would
// need. Returns m.
int judge_shift_family(std::vector<TrainPlan*> cand) {
  std::sort(cand.begin(), cand.end(), [](const TrainPlan* a, const TrainPlan* b) { return a->shift.min_p < b->shift.min_p; });
  const size_t n = cand.size();
  size_t m = n;
  for (; m > 0; --m)  // a tie at the edge is all in or all out
    if (cand[m - 1]->shift.min_p <= 0.05 / double(m) && (m == n || cand[m]->shift.min_p > cand[m - 1]->shift.min_p))
      break;
  for (size_t i = m; i < n; ++i) cand[i]->level = 0.05 / double(m + 1);
  std::vector<TrainPlan*> judged(cand.begin(), cand.begin() + long(m));
  std::stable_sort(judged.begin(), judged.end(), [](const TrainPlan* a, const TrainPlan* b) { return a->shift.p < b->shift.p; });
  bool rejecting = true;
  for (size_t r = 0; r < m; ++r) {
    TrainPlan& p = *judged[r];
    p.tested = true;
    p.holm_rank = int(r + 1);
    p.level = 0.05 / double(m - r);
    rejecting = rejecting && p.shift.p <= p.level;
    p.rejected = rejecting;
  }
  return int(m);
}

// Another key: per-seed differences against the margin (two one-sided tests).
void check_equivalence(const TrainPlan& p, double margin_rel, double alpha, int tested, CheckReport* rep) {
  CheckFinding f = train_finding(p);
  const BaselineTraining& bt = *p.bt;
  const double base_mean = bt.mean.value_or(std::numeric_limits<double>::quiet_NaN());
  const double margin = margin_rel * std::fabs(base_mean);
  const EquivalenceTest e = equivalence_test(p.seeds, margin, alpha);
  f.old_value = fmt::format("mean {}, margin ±{}", loss_text(base_mean), loss_text(margin));
  f.new_value = fmt::format("[{}, {}]", loss_text(e.lo), loss_text(e.hi));
  auto push = [&](FindingKind k, Verdict v, std::string msg) {
    f.kind = k;
    f.verdict = v;
    f.message = std::move(msg);
    rep->findings.push_back(f);
  };
  const std::string head = fmt::format("key differs ({}): ", p.key_diff);
  if (e.outcome == Equivalence::kNotJudged) {
    push(FindingKind::kTrainingNotJudged, Verdict::kSkip,
         head + fmt::format("not judged: {} seed(s) on both sides; an equivalence test needs 2 or more", e.pairs));
    return;
  }
  const std::string interval = fmt::format(
      "the mean per-seed difference {} over {} seeds has the {:.3g}% interval [{}, {}] against the margin "
      "±{} ({:g}% of the baseline mean; α = {:.3g} per side, 0.05 over the {} equivalence test(s))",
      loss_text(e.mean_diff), e.pairs, 100 * (1 - 2 * alpha), loss_text(e.lo), loss_text(e.hi), loss_text(margin),
      100 * margin_rel, alpha, tested);
  switch (e.outcome) {
    case Equivalence::kEquivalent:
      push(FindingKind::kTrainingEquivalence, Verdict::kPass, head + "equivalent: " + interval);
      break;
    case Equivalence::kDifferent:
      push(FindingKind::kTrainingEquivalence, Verdict::kFail, head + "different beyond the margin: " + interval);
      break;
    default:
      push(FindingKind::kTrainingEquivalence, Verdict::kWarn,
           head + "inconclusive: " + interval +
               (e.seeds_needed ? fmt::format("; about {} seeds would decide it", e.seeds_needed)
                               : std::string("; the difference itself is at the margin")));
  }
}

void check_training(const Baseline& b, const Results& r, double margin_rel, CheckReport* rep) {
  const size_t first_finding = rep->findings.size();
  std::map<TrainCell, std::vector<RunView>> dir_cells;
  const std::vector<RunVerdict> verdicts = judge_training_runs(r.training);
  for (size_t i = 0; i < r.training.size(); ++i) {
    const TrainingRun& run = r.training[i];
    dir_cells[{run.model, run.design, run.condition, run.target}].push_back(view(run, verdicts[i]));
  }
  // First the plans, to know each family (the shift tests: Holm; the equivalence tests: Bonferroni); then
  // the findings, in baseline order.
  std::set<TrainCell> seen;
  std::vector<TrainPlan> plans;
  int not_run = 0, tested = 0;
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
    // Nondeterminism off ("determinism on": (b), (d), (e)) promises the same bits on the same key.
    p.bitwise = p.key_matches && bt.determinism == "on" && !bt.runs.empty();
    if (!p.bitwise) {
      std::map<uint64_t, SeedRuns> by_seed;
      for (auto& br : bt.runs)
        if (std::isfinite(br.final_loss)) by_seed[br.seed].base.push_back(br.final_loss), ++p.base_finite;
      for (auto& run : p.runs)
        if (run.status == "ok" && std::isfinite(run.loss)) by_seed[run.seed].now.push_back(run.loss);
      for (auto& [seed, s] : by_seed) p.seeds.push_back(std::move(s));
      const bool any_new =
          std::any_of(p.seeds.begin(), p.seeds.end(), [](const SeedRuns& s) { return !s.now.empty(); });
      if (any_new && p.key_matches) {
        p.shift = shift_test(p.seeds);  // judged in the shift family below
        p.identical = p.shift.seeds > 0 && all_identical(p.seeds, &p.identical_loss);
      }
      else if (any_new)
        p.tested = true, ++tested;  // the equivalence family
    }
    plans.push_back(std::move(p));
  }
  std::vector<TrainPlan*> shift_family;
  for (auto& p : plans)
    if (!p.runs.empty() && !p.bitwise && p.key_matches && !p.identical &&
        std::any_of(p.seeds.begin(), p.seeds.end(), [](const SeedRuns& s) { return !s.now.empty(); }))
      shift_family.push_back(&p);
  const int judged_shifts = judge_shift_family(shift_family);
  const double alpha = 0.05 / std::max(1, tested);
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
    const size_t cell_first = rep->findings.size();
    for (auto& run : p.runs) check_run(p, run, rep);
    const bool any_new = std::any_of(p.seeds.begin(), p.seeds.end(), [](const SeedRuns& s) { return !s.now.empty(); });
    if (!p.bitwise && any_new) {
      if (p.key_matches)
        check_shift(p, judged_shifts, rep);
      else
        check_equivalence(p, margin_rel, alpha, tested, rep);
    }
    // A cell that neither failed nor was judged (every run skipped, say) is said to be not judged.
    const bool decided = std::any_of(rep->findings.begin() + long(cell_first), rep->findings.end(), [](const CheckFinding& f) {
      return f.verdict == Verdict::kFail || f.kind == FindingKind::kTrainingNotJudged ||
             f.kind == FindingKind::kTrainingBits || f.kind == FindingKind::kTrainingShift ||
             f.kind == FindingKind::kTrainingEquivalence;
    });
    if (!decided) {
      CheckFinding f = train_finding(p);
      f.kind = FindingKind::kTrainingNotJudged;
      f.verdict = Verdict::kSkip;
      f.new_value = fmt::format("{} runs", p.runs.size());
      f.message = fmt::format("not judged: none of its {} run(s) finished", p.runs.size());
      rep->findings.push_back(f);
    }
  }
  if (not_run) {
    CheckFinding f;
    f.kind = FindingKind::kTrainingNotRun;
    f.verdict = Verdict::kWarn;
    f.workload = "(training)";
    f.message = fmt::format("not run: this run has no training runs; the baseline has {} training cells", not_run);
    rep->findings.push_back(f);
  }
  // The baseline's cells left unjudged (one line each: the first reason).
  std::set<std::string> said;
  for (size_t i = first_finding; i < rep->findings.size(); ++i) {
    const CheckFinding& f = rep->findings[i];
    if (f.kind != FindingKind::kTrainingNotJudged && f.kind != FindingKind::kTrainingNotRun) continue;
    const std::string cell = f.target.empty() ? f.workload : f.workload + " on " + f.target;
    if (said.insert(cell).second) rep->training_not_judged.push_back(cell + ": " + f.message);
  }
  // A cell the baseline lacks although the design it was saved from runs it (the same model, design, conditions and
  // targets as this run's) is one the baseline holds no finished run of: unjudged, not new.
  auto cells_of = [](const nlohmann::json& plan) {
    nlohmann::json d = plan.is_object() ? plan.value("design", nlohmann::json()) : nlohmann::json();
    if (!d.is_object()) return nlohmann::json();
    nlohmann::json out = nlohmann::json::object();
    for (const char* k : {"model", "design", "conditions", "targets"}) out[k] = d.value(k, nlohmann::json());
    return out;
  };
  const nlohmann::json baseline_cells = cells_of(b.source_plan);
  const bool same_design = !baseline_cells.is_null() && baseline_cells == cells_of(r.plan);
  for (auto& [id, runs] : dir_cells) {
    if (seen.count(id)) continue;
    CheckFinding f;
    f.kind = FindingKind::kTrainingNoBaseline;
    f.verdict = Verdict::kSkip;
    f.workload = train_label(id);
    f.target = std::get<3>(id);
    f.new_value = fmt::format("{} runs", runs.size());
    f.message = same_design ? "no baseline: the design the baseline was saved from runs this cell, but the baseline "
                              "holds no finished run of it"
                            : "new, no baseline";
    rep->findings.push_back(f);
    if (same_design) rep->training_not_judged.push_back(f.workload + " on " + f.target + ": " + f.message);
    // A run that crashed, timed out or diverged fails on its own, with or without a baseline to compare it with.
    for (const RunView& run : runs)
      if (auto own = own_failure(run, false)) {
        CheckFinding g = f;
        g.kind = FindingKind::kTrainingRun;
        g.verdict = own->verdict;
        g.new_value = own->value;
        g.message = fmt::format("seed {} rep {}: {}", run.seed, run.replicate, own->message);
        rep->findings.push_back(g);
      }
  }
}

}  // namespace

CheckReport check_against_baseline(const Baseline& b, const Results& in, const std::string& dir,
                                   const std::string& baseline_path, double margin_rel) {
  Results judged;
  const Results* r = judged_view(in, &judged);
  CheckReport rep;
  rep.dir = dir;
  rep.baseline_path = baseline_path;
  rep.baseline_created_at = b.created_at;
  rep.baseline_tool = b.tool_version + (b.tool_commit.empty() ? "" : " (" + b.tool_commit + ")");
  rep.baseline_source = b.source_dir;
  check_cells(b, *r, &rep);
  check_training(b, *r, margin_rel, &rep);
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

// The same outputs on the same machine key, measured against the workload's one oracle, have one error ratio: a cell
// whose bits are its baseline cell's beside another err_ratio holds bits it did not compute (or the baseline does).
Status same_bits_same_ratio(const Baseline& b, const Results& r, const std::string& dir, const std::string& baseline_path) {
  std::map<std::pair<std::string, std::string>, const Observation*> cells;
  for (auto& o : r.observations) cells[{o.workload, o.target}] = &o;
  for (auto& bc : b.cells) {
    const auto it = cells.find({bc.workload, bc.target});
    if (it == cells.end() || bc.status != ObsStatus::kOk || !bc.err_ratio) continue;
    const Observation& o = *it->second;
    if (o.status != ObsStatus::kOk || !o.oracle || !(o.oracle->err_ratio >= 0) ||
        std::set<std::string>(o.fingerprints.begin(), o.fingerprints.end()) !=
            std::set<std::string>(bc.fingerprints.begin(), bc.fingerprints.end()) ||
        entry_key(r, o.target) != b.keys.at(bc.key) || *bc.err_ratio == o.oracle->err_ratio)
      continue;
    return Status::invalid(fmt::format(
        "{}: {} on {} gave the baseline's outputs ({}) with err_ratio {:.17g}, where {} measured {:.17g} on the same "
        "machine key: the same bits against one oracle have one error ratio (one of the two files was edited)",
        dir, bc.workload, bc.target, short_fingerprints(bc.fingerprints), o.oracle->err_ratio, baseline_path,
        *bc.err_ratio));
  }
  return Status::ok();
}

}  // namespace

Status run_check(const CheckOptions& opt, const Baseline& b, CheckReport* report, Results* checked) {
  if (!fs::is_directory(opt.dir)) {
    return Status::invalid(opt.dir + ": not a directory");
  }
  Results r;
  DETAUDIT_RETURN_IF_ERROR(load_stored_results(results_file(opt.dir), &r));
  DETAUDIT_RETURN_IF_ERROR(not_a_merged_analysis(r, opt.dir, "check"));
  DETAUDIT_RETURN_IF_ERROR(same_kind(b, r, opt.dir, opt.baseline));
  DETAUDIT_RETURN_IF_ERROR(same_bits_same_ratio(b, r, opt.dir, opt.baseline));
  CheckReport rep = check_against_baseline(b, r, opt.dir, opt.baseline, opt.margin);
  rep.allow_unjudged = opt.allow_unjudged;
  // A FAIL in a cell the baseline holds is a judgment: a crash there fails the check, even where nothing else ran
  // (every run of a design crashed). A new cell's own failure alone compared nothing with the baseline, and a cell
  // skipped here was not judged (that none ran here is said as such, below).
  std::set<std::pair<std::string, std::string>> held;
  for (const BaselineCell& c : b.cells) held.insert({c.workload, c.target});
  for (const BaselineTraining& t : b.training)
    held.insert({train_label(TrainCell{t.model, t.design, t.condition, t.target}), t.target});
  const bool failed = std::any_of(rep.findings.begin(), rep.findings.end(), [&](const CheckFinding& f) {
    return f.verdict == Verdict::kFail && f.new_value != "skipped" && held.count({f.workload, f.target});
  });
  // The run the baseline was saved from compares its cells with themselves: nothing judged, unless the run fails on
  // its own (a broken promise is judged whatever it is compared with).
  if (const std::string why = failed ? "" : saved_from(b, r, opt.dir); !why.empty())
    return Status::invalid(fmt::format("{} against {}: {}", opt.dir, opt.baseline, why));
  if (!failed && rep.cells_compared == 0 && rep.runs_compared == 0)
    return Status::invalid(fmt::format("{} and {} share no cell: nothing was compared ({}; {})", opt.dir, opt.baseline,
                                       r.observations.size() + r.training.size() == 0
                                           ? "the results hold no cell and no training run"
                                           : "every cell of one is missing from the other",
                                       plan_kind(r.plan)));
  // Cells in common that none ran here (every one skipped or crashed): nothing was judged.
  if (!failed && rep.cells_ran == 0 && rep.runs_compared == 0) {
    std::string why;
    for (auto& o : r.observations)
      if (o.status != ObsStatus::kOk) {
        why = fmt::format("{} on {}: {}{}", o.workload, o.target, to_string(o.status), o.reason.empty() ? "" : " (" + o.reason + ")");
        break;
      }
    return Status::invalid(fmt::format("{}: none of the {} cells it shares with {} ran here, so nothing was judged "
                                       "(first: {})",
                                       opt.dir, rep.cells_compared, opt.baseline, why));
  }
  *report = std::move(rep);
  if (checked) {
    judge(&r);  // by this detaudit: the file's own verdicts are not evidence
    *checked = std::move(r);
  }
  return Status::ok();
}

}  // namespace detaudit
