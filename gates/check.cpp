#include "gates/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <numbers>
#include <set>
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

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  if (df == 1) return std::tan(std::numbers::pi * (p - 0.5));
  if (df == 2) return (2 * p - 1) / std::sqrt(2 * p * (1 - p));
  // Upper tail P(T > t) = I_{df/(df+t²)}(df/2, 1/2) / 2, decreasing in t: bisect until the interval
  // cannot shrink any more (adjacent doubles).
  double q = 1 - p;
  auto upper = [&](double t) { return 0.5 * incomplete_beta(df / (df + t * t), df / 2, 0.5); };
  double lo = 0, hi = 1;
  while (upper(hi) > q && hi < 1e300) hi *= 2;
  for (int i = 0; i < 2000; ++i) {
    double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (upper(mid) > q ? lo : hi) = mid;
  }
  return lo + (hi - lo) / 2;
}

bool prediction_interval(int n, double mean, double sd, double* lo, double* hi) {
  if (n < 2) return false;
  double half = student_t_quantile(0.975, n - 1) * sd * std::sqrt(1 + 1.0 / n);
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

// What the verdict allows err_ratio to reach for this cell (gates/verdict.hpp's budget).
double promise_budget(const Observation& o, const Promise& p) {
  Spec w;
  std::string err;
  bool f64 = parse_workload(o.workload, &w, &err) && w.get("dtype") == "f64";
  double u = f64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  return oracle_budget(o.oracle ? o.oracle->bound_k : 0, u, p.input_unit_roundoff);
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
  auto new_kernels = kernels_by_fingerprint(c.o);
  std::string shown_new = !outside.empty() ? outside.front() : (new_fps.empty() ? "" : *new_fps.begin());
  if (deterministic_cell) {
    auto& f = c.add(FindingKind::kBitsChanged, Verdict::kFail, c.bc.fingerprints.front(),
                    fps_text({new_fps.begin(), new_fps.end()}),
                    fmt::format("fingerprint changed on the same machine key: {} -> {}{}", c.bc.fingerprints.front(),
                                fps_text({new_fps.begin(), new_fps.end()}),
                                new_fps.size() > 1 ? fmt::format(" ({} distinct outputs now)", new_fps.size()) : ""));
    auto it = c.bc.kernels.find(c.bc.fingerprints.front());
    if (it != c.bc.kernels.end()) f.old_kernels = it->second;
    if (new_kernels.count(shown_new)) f.new_kernels = new_kernels[shown_new];
    return;
  }
  bool promised = promise == Promise::RunToRun::kDeterministic;
  auto& f = c.add(FindingKind::kNewOutputs, promised ? Verdict::kFail : Verdict::kWarn, fps_text(c.bc.fingerprints),
                  fps_text(outside),
                  promised ? fmt::format("{} output(s) outside the baseline's {} and the target promises determinism",
                                         outside.size(), old_fps.size())
                           : fmt::format("new outputs of a nondeterministic target: {} of {} distinct not among the "
                                         "baseline's {}",
                                         outside.size(), new_fps.size(), old_fps.size()));
  if (!c.bc.kernels.empty()) f.old_kernels = c.bc.kernels.begin()->second;
  if (new_kernels.count(shown_new)) f.new_kernels = new_kernels[shown_new];
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
  if (err_now && c.bc.err_ratio) {
    double pb = promise_budget(c.o, full);
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

RunView view(const nlohmann::json& run) {
  RunView v;
  v.status = json_fields::str(run, "status");
  v.reason = json_fields::str(run, "reason");
  v.weights = json_fields::str(run, "weights_fingerprint");
  const auto& seed = json_fields::get(run, "seed");
  v.seed = seed.is_number_unsigned() ? seed.get<uint64_t>() : 0;
  v.replicate = int(json_fields::integer(run, "replicate", 0));
  v.loss = json_fields::number(run, "final_loss").value_or(std::numeric_limits<double>::quiet_NaN());
  return v;
}

void check_run(const BaselineTraining& bt, bool key_matches, const std::string& key_diff, const TrainCell& id,
               const RunView& run, CheckReport* rep) {
  CheckFinding f;
  f.workload = train_label(id);
  f.target = std::get<3>(id);
  f.key_matches = key_matches;
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
  if (key_matches && bt.deterministic_condition() && !bt.runs.empty()) {
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
    return;
  }
  if (bt.n < 2 || !bt.mean || !bt.sd) {
    f.old_value = bt.mean ? loss_text(*bt.mean) : "-";
    push(FindingKind::kTrainingNoInterval, Verdict::kWarn,
         fmt::format("no prediction interval: the baseline has {} finished run(s) of this cell", bt.n));
    return;
  }
  double lo = 0, hi = 0;
  prediction_interval(bt.n, *bt.mean, *bt.sd, &lo, &hi);
  f.old_value = fmt::format("[{}, {}]", loss_text(lo), loss_text(hi));
  if (*bt.sd == 0 && !key_matches) {
    push(FindingKind::kTrainingNoInterval, Verdict::kWarn,
         fmt::format("the baseline's {} runs are identical (sd 0): the interval is the point {}, a bitwise comparison "
                     "that a different key excuses ({}); final loss {} not judged",
                     bt.n, loss_text(*bt.mean), key_diff, loss_text(run.loss)));
    return;
  }
  bool inside = run.loss >= lo && run.loss <= hi;
  push(FindingKind::kTrainingInterval, inside ? Verdict::kPass : Verdict::kFail,
       fmt::format("final loss {} {} the 95% prediction interval [{}, {}] of the baseline's {} runs (mean {}, sd {})",
                   loss_text(run.loss), inside ? "inside" : "outside", loss_text(lo), loss_text(hi), bt.n,
                   loss_text(*bt.mean), loss_text(*bt.sd)));
}

void check_training(const Baseline& b, const Results& r, CheckReport* rep) {
  std::map<TrainCell, std::vector<RunView>> dir_cells;
  for (auto& run : r.training)
    dir_cells[{json_fields::str(run, "model"), json_fields::str(run, "design"), json_fields::str(run, "condition"),
               json_fields::str(run, "target")}]
        .push_back(view(run));
  std::set<TrainCell> seen;
  int not_run = 0;
  for (auto& bt : b.training) {
    TrainCell id{bt.model, bt.design, bt.condition, bt.target};
    seen.insert(id);
    auto it = dir_cells.find(id);
    if (it == dir_cells.end()) {
      if (r.training.empty()) {
        ++not_run;
        continue;
      }
      CheckFinding f;
      f.kind = FindingKind::kTrainingNotRun;
      f.verdict = Verdict::kWarn;
      f.workload = train_label(id);
      f.target = bt.target;
      f.old_value = fmt::format("{} runs", bt.runs.size());
      f.new_value = "not run";
      f.message = "not run";
      rep->findings.push_back(f);
      continue;
    }
    nlohmann::json nkey = entry_key(r, bt.target);
    const nlohmann::json& bkey = b.keys.at(bt.key);
    bool match = nkey == bkey;
    std::string diff = match ? "" : key_difference(bkey, nkey);
    auto runs = it->second;
    std::sort(runs.begin(), runs.end(),
              [](const RunView& x, const RunView& y) { return std::tie(x.seed, x.replicate) < std::tie(y.seed, y.replicate); });
    for (auto& run : runs) check_run(bt, match, diff, id, run, rep);
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
  const Results* r = &in;
  Results judged;
  if (std::any_of(in.observations.begin(), in.observations.end(), [](const Observation& o) { return o.verdict.empty(); })) {
    judged = in;
    judge(&judged);
    r = &judged;
  }
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

std::string kernels_text(const std::vector<std::string>& ks, size_t max_names, size_t max_len) {
  std::string s;
  for (size_t i = 0; i < ks.size() && i < max_names; ++i) {
    std::string k = ks[i].size() > max_len ? ks[i].substr(0, max_len) + "..." : ks[i];
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
  std::string msg = markdown_escape(f.message.size() > 400 ? f.message.substr(0, 400) + "..." : f.message);
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
  s += fmt::format("{} against {} (baseline of {}, created {}, detaudit {}).\n\n", md_code(rep.dir),
                   md_code(rep.baseline_path), md_code(rep.baseline_source), markdown_escape(rep.baseline_created_at),
                   markdown_escape(rep.baseline_tool));
  s += markdown_escape(summary_line(rep)) + "\n\n";
  // Budgets: failures first and most; the whole stays under kCheckMarkdownLimit.
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
  return s.size() <= kCheckMarkdownLimit ? s : s.substr(0, kCheckMarkdownLimit - 32) + "\n\n... (truncated)\n";
}

}  // namespace

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

bool parse_check_format(const std::string& s, CheckFormat* out) {
  if (s == "text") *out = CheckFormat::kText;
  else if (s == "md") *out = CheckFormat::kMarkdown;
  else if (s == "json") *out = CheckFormat::kJson;
  else return false;
  return true;
}

std::string render_check(const CheckReport& rep, CheckFormat format) {
  switch (format) {
    case CheckFormat::kText: return render_text(rep);
    case CheckFormat::kMarkdown: return render_md(rep);
    case CheckFormat::kJson: return to_json(rep).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
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
    if (std::any_of(r.observations.begin(), r.observations.end(), [](const Observation& o) { return o.verdict.empty(); }))
      judge(&r);
    *checked = std::move(r);
  }
  return rep.exit_code();
}

}  // namespace detaudit
