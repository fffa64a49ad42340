#include "gates/qualify.hpp"

#include "contract/command_text.hpp"
#include "contract/results.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "analysis/stats.hpp"
#include "contract/atomic_file.hpp"
#include "gates/baseline.hpp"
#include "gates/check.hpp"
#include "contract/machine_key.hpp"
#include "probes/env.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_design.hpp"

namespace detaudit {

namespace {

// One check per target: the worst verdict of its cells (SKIP only when every cell skipped), with the
// counts and the first failing cell's reason. `unmet`: per target, the requirements this machine does
// not meet (the suite's own targets only; a required target with any is refused before the run). Such
// a target's cells are expected crashes and skips: its row is a SKIP saying what is missing, unless a
// cell FAILed. A required target without any cell is a SKIP too (nothing of it ran).
void probe_checks(const Results& r, const std::vector<std::string>& planned, const std::set<std::string>& required,
                  const std::map<std::string, std::vector<std::string>>& unmet, QualifyOutcome* out) {
  struct PerTarget {
    std::map<std::string, int> counts;
    Verdict worst = Verdict::kSkip;
    std::string first_fail, first_warn, skip_reason;
    bool ran = false;
  };
  std::vector<std::string> order;
  std::map<std::string, PerTarget> by;
  for (auto& o : r.observations) {
    if (!by.count(o.target)) order.push_back(o.target);
    auto& t = by[o.target];
    const Verdict v = o.verdict.value_or(Verdict::kWarn);  // unjudged: judge() always sets one
    ++t.counts[to_string(v)];
    std::string where = fmt::format("{}: {}", o.workload, o.verdict_reason);
    if (v == Verdict::kFail && t.first_fail.empty()) t.first_fail = where;
    if (v == Verdict::kWarn && t.first_warn.empty()) t.first_warn = where;
    if (v == Verdict::kSkip) {
      if (t.skip_reason.empty()) t.skip_reason = o.verdict_reason;
      continue;
    }
    if (!t.ran || severity(v) > severity(t.worst)) t.worst = v;
    t.ran = true;
  }
  for (auto& name : planned)
    if (!by.count(name) && required.count(name)) {
      out->checks.push_back({"probe " + name, Verdict::kSkip, "no cell ran: no workload of the suite applies to it", true});
    }
  for (auto& name : order) {
    auto& t = by[name];
    std::vector<std::string> parts;
    for (const char* k : {"PASS", "EXPECTED", "WARN", "FAIL", "SKIP"})
      if (t.counts.count(k)) parts.push_back(fmt::format("{} {}", t.counts[k], k));
    std::string detail = fmt::format("{}", fmt::join(parts, ", "));
    if (!t.first_fail.empty())
      detail += "; first FAIL: " + t.first_fail;
    else if (!t.first_warn.empty())
      detail += "; first WARN: " + t.first_warn;
    else if (!t.ran)
      detail += "; " + t.skip_reason;
    // EXPECTED is a kept promise (promised nondeterminism, an expected crash): the target passes.
    Verdict v = t.worst == Verdict::kExpected ? Verdict::kPass : t.worst;
    auto u = unmet.find(name);
    if (u != unmet.end() && !u->second.empty() && v != Verdict::kFail) {
      v = Verdict::kSkip;
      detail = fmt::format("cannot run here: needs {}, which this machine lacks ({})", fmt::join(u->second, ", "), detail);
    }
    out->checks.push_back({"probe " + name, v, detail, required.count(name) > 0});
  }
}

}  // namespace

QualifyCheck race_control_check(const Results& r) {
  int cells = 0, varied = 0;
  std::set<std::string> targets;
  for (auto& o : r.observations) {
    if (o.status != ObsStatus::kOk) continue;
    if (const auto p = promise_of(o, r.machine); !p || p->run_to_run != Promise::RunToRun::kNondeterministic) continue;
    ++cells;
    varied += o.distinct > 1;
    targets.insert(o.target);
  }
  QualifyCheck c{"race control: cells permitted to vary", Verdict::kPass, "", false};
  if (cells == 0) {
    c.verdict = Verdict::kSkip;
    c.detail = "no cell of a target that may vary ran, so nothing shows that a race would be seen";
  } else if (varied == 0) {
    c.verdict = Verdict::kWarn;
    c.detail = fmt::format(
        "none of the {} cells permitted to vary ({}) varied in this run: that this machine would "
        "show a race is not confirmed",
        cells, fmt::join(targets, ", "));
  } else {
    c.detail = fmt::format("{} of {} cells permitted to vary did ({}): races are seen here", varied, cells,
                           fmt::join(targets, ", "));
  }
  return c;
}

// Level 2+: the training regression. (d) = fixed initial weights, nondeterminism off: every run of a
// target must end with the same weights, bit for bit. "Learns": the final loss (mean of the last
// window) of every finished run is below half its first batch's loss. The worker records the loss of
// every batch in `curve` (suites/train_worker.cpp: models/autoencoder.cpp pushes each batch's loss,
// computed before that batch's update), and the design checks it holds `batches` entries: curve[0] is
// the first batch's loss, on the initial weights.
std::vector<QualifyCheck> training_checks(const Results& r) {
  std::vector<QualifyCheck> out;
  std::map<std::string, std::set<std::string>> d_weights;
  std::map<std::string, int> d_runs;
  int ok = 0, failed = 0, skipped = 0, learned = 0;
  std::string first_failed, first_skipped, first_not_learned;
  for (auto& run : r.training) {
    const std::string status = to_string(run.status);
    const std::string& target = run.target;
    // Every target with a planned condition (d) run gets its row, even when fewer than 2 finished.
    if (run.condition == "d") d_runs.try_emplace(target, 0);
    if (!run.ok()) {
      std::string what = fmt::format("{} condition {} seed {}: {} {}", target, run.condition, run.seed, status, run.reason);
      if (run.status == ObsStatus::kSkipped) {
        ++skipped;
        if (first_skipped.empty()) first_skipped = what;
      } else {
        ++failed;
        if (first_failed.empty()) first_failed = what;
      }
      continue;
    }
    ++ok;
    if (run.condition == "d") {
      d_weights[target].insert(run.weights_fingerprint);
      ++d_runs[target];
    }
    double first = run.curve.empty() ? NAN : run.curve[0];
    double final_loss = run.final_loss;
    if (std::isfinite(first) && std::isfinite(final_loss) && final_loss < 0.5 * first)
      ++learned;
    else if (first_not_learned.empty())
      first_not_learned = fmt::format("{} condition {} seed {}: first batch loss {:.4g}, final loss {:.4g}", target,
                                      run.condition, run.seed, first, final_loss);
  }
  if (ok == 0) {
    // Nothing finished: runs that failed are a failure; runs that could not run here (skipped) are a
    // required check that could not run.
    if (failed)
      out.push_back({"training runs finish", Verdict::kFail,
                     fmt::format("no run finished: {} failed{}; first: {}", failed,
                                 skipped ? fmt::format(", {} skipped", skipped) : "", first_failed),
                     true});
    else
      out.push_back({"training runs finish", Verdict::kSkip,
                     skipped ? fmt::format("no training run could run here ({} skipped); first: {}", skipped, first_skipped)
                             : "no training run in the results",
                     true});
    return out;
  }
  std::string detail = failed ? fmt::format("{} of {} runs failed; first: {}", failed, ok + failed + skipped, first_failed)
                              : fmt::format("{} runs finished", ok);
  if (skipped) detail += fmt::format("; {} skipped, first: {}", skipped, first_skipped);
  out.push_back({"training runs finish", failed ? Verdict::kFail : Verdict::kPass, detail, true});
  for (auto& [target, n] : d_runs) {
    const auto& fps = d_weights[target];
    std::string d_detail = n < 2 ? fmt::format("only {} condition (d) run{} finished: nothing to compare", n, n == 1 ? "" : "s")
                                 : fmt::format("{} runs, {} distinct final weights", n, fps.size());
    out.push_back({"training (d) bitwise identical on " + target,
                   n < 2 ? Verdict::kSkip : (fps.size() == 1 ? Verdict::kPass : Verdict::kFail), d_detail, true});
  }
  out.push_back({"training: the model learns", learned == ok ? Verdict::kPass : Verdict::kFail,
                 learned == ok ? fmt::format("every run's final loss is below half its first batch's loss ({} runs)", ok)
                               : fmt::format("{} of {} runs did not halve their loss; first: {}", ok - learned, ok,
                                             first_not_learned),
                 true});
  return out;
}

// Level 2+: timing outliers against reference medians (run_qualify takes them from the baseline when
// one is given, else from this machine's history).
QualifyCheck timing_check(const Results& r, const TimingReferences& references, const std::string& source) {
  int judged = 0, too_fast = 0, no_reference = 0, warn = 0, failed = 0;
  std::vector<std::string> slow;
  double worst = 0;
  std::string worst_cell;
  for (auto& o : r.observations) {
    if (o.status != ObsStatus::kOk || o.seconds.empty()) continue;
    double now = finite_median(o.seconds);
    if (!std::isfinite(now)) continue;  // no timed repeat
    auto it = references.find({o.workload, o.target});
    double ref = it == references.end() ? 0 : it->second;
    if (!std::isfinite(ref) || ref <= 0) {
      ++no_reference;
      continue;
    }
    if (ref < kMinTimedSeconds) {
      ++too_fast;
      continue;
    }
    ++judged;
    double ratio = now / ref;
    if (worst_cell.empty() || ratio > worst) {
      worst = ratio;
      worst_cell = fmt::format("{} on {}", o.workload, o.target);
    }
    if (ratio > kOutlierWarn) {
      ratio > kOutlierFail ? ++failed : ++warn;
      slow.push_back(fmt::format("{} on {}: {:.3g} ms vs {:.3g} ms ({:.1f}x)", o.workload, o.target, now * 1e3, ref * 1e3,
                                 ratio));
    }
  }
  if (judged == 0)
    return {"timing outliers", Verdict::kSkip,
            fmt::format("nothing to compare with: {} cells without a reference in {}, {} under {:.0f} ms in it",
                        no_reference, source, too_fast, kMinTimedSeconds * 1e3),
            false};
  std::string detail = fmt::format("{} cells against {}: slowest {:.2f}x ({})", judged, source, worst, worst_cell);
  if (!slow.empty())
    detail += fmt::format("; {} over {:.0f}x ({} over {:.0f}x), first: {}", slow.size(), kOutlierWarn, failed,
                          kOutlierFail, slow.front());
  if (too_fast || no_reference)
    detail += fmt::format("; not judged: {} under {:.0f} ms, {} without a reference", too_fast, kMinTimedSeconds * 1e3,
                          no_reference);
  return {"timing outliers", failed ? Verdict::kFail : warn ? Verdict::kWarn : Verdict::kPass, detail, false};
}

Decision decision_of(QualifyDecision d) {
  switch (d) {
    case QualifyDecision::kQualified: return Decision::kPass;
    case QualifyDecision::kCheckFailed: return Decision::kFail;
    case QualifyDecision::kRequiredNotRun: return Decision::kNotJudged;
  }
  return Decision::kNotJudged;
}

QualifyDecision decide(const std::vector<QualifyCheck>& checks) {
  bool failed = false, required_skipped = false;
  for (auto& c : checks) {
    failed |= c.verdict == Verdict::kFail;
    required_skipped |= c.required && c.verdict == Verdict::kSkip;
  }
  return failed             ? QualifyDecision::kCheckFailed
         : required_skipped ? QualifyDecision::kRequiredNotRun
                            : QualifyDecision::kQualified;
}

namespace {

std::string pad(const std::string& s, size_t n) { return s.size() >= n ? s : s + std::string(n - s.size(), ' '); }

}  // namespace

nlohmann::json QualifyOutcome::to_json() const {
  nlohmann::json cs = nlohmann::json::array();
  VerdictTally counts;
  for (auto& c : checks) {
    cs.push_back({{"name", c.name},
                  {"verdict", to_string(c.verdict)},
                  {"detail", c.detail},
                  {"required", c.required},
                  {"seconds", c.seconds}});
    if (const auto a = qualify_action(c)) cs.back()["action"] = to_string(*a);
    counts.add(c.verdict);
  }
  return {{"schema", kQualifySchema},
          {"level", level},
          {"started_at", started_at},
          {"finished_at", finished_at},
          {"hostname", hostname},
          {"machine_key", machine_key},
          {"tool_version", tool_version},
          {"tool_commit", tool_commit},
          {"exit_code", exit_code_of(decision_of(decision))},
          {"qualified", decision == QualifyDecision::kQualified},
          {"counts", counts.to_json()},
          {"checks", cs},
          {"probe_dir", probe_dir},
          {"train_dir", train_dir}};
}

std::string QualifyOutcome::table() const {
  size_t w = 5;
  for (auto& c : checks) w = std::max(w, std::min<size_t>(c.name.size(), 60));
  std::string s = fmt::format("qualify level {} on {} (machine {}), detaudit {} ({}), {} to {}\n", level, hostname,
                              machine_key, tool_version, tool_commit, started_at, finished_at);
  s += fmt::format("{}  {}  {:>7}  {}\n", pad("check", w), pad("verdict", 8), "seconds", "detail");
  for (auto& c : checks)
    s += fmt::format("{}  {}  {:>7.1f}  {}{}\n", pad(c.name, w), pad(to_string(c.verdict), 8), c.seconds, c.detail,
                     c.required && c.verdict == Verdict::kSkip ? " (required)" : "");
  std::map<std::string, int> counts;
  for (auto& c : checks) ++counts[to_string(c.verdict)];
  std::vector<std::string> parts;
  for (const char* k : {"PASS", "FAIL", "WARN", "SKIP"})
    if (counts.count(k)) parts.push_back(fmt::format("{} {}", counts[k], k));
  s += fmt::format("qualify level {}: {} check{} ({}): {}\n", level, checks.size(), checks.size() == 1 ? "" : "s",
                   fmt::join(parts, ", "),
                   decision == QualifyDecision::kQualified     ? "QUALIFIED"
                   : decision == QualifyDecision::kCheckFailed ? "NOT QUALIFIED (a check failed)"
                                                               : "NOT QUALIFIED (a required check could not run)");
  return s;
}

Status qualify_plan(int level, const std::string& targets, QualifyPlan* out, const std::string& workloads,
                    int repeats) {
  if (level < 1 || level > 3) return Status::invalid(fmt::format("--level {} out of range (1, 2 or 3)", level));
  QualifyPlan q;
  q.level = level;
  DETAUDIT_RETURN_IF_ERROR(make_plan(level == 3 ? "full" : "quick", targets, workloads, repeats, 120, &q.probe));
  q.train = level >= 2;
  if (q.train) q.design = qualify_design(level);
  *out = std::move(q);
  return Status::ok();
}

std::vector<std::string> QualifyPlan::lines() const {
  std::vector<std::string> v;
  std::vector<std::string> t, w;
  for (auto& s : probe.targets) t.push_back(s.str());
  for (auto& s : probe.workloads) w.push_back(s.str());
  v.push_back(
      fmt::format("level {}: probe suite {}: {} targets x {} workloads, {} repeats each, every cell judged "
                  "against its target's promise",
                  level, probe.suite, t.size(), w.size(), probe.repeats));
  v.push_back(fmt::format("  targets: {}", fmt::join(t, ", ")));
  v.push_back(fmt::format("  workloads: {}", fmt::join(w, ", ")));
  v.push_back("  GPU targets on a machine without a CUDA device are left out (a SKIP row says so)");
  v.push_back("  race control: whether the cells permitted to vary did (not required)");
  v.push_back("  with --baseline: the probe results checked against it (required)");
  if (!train) return v;
  std::vector<std::string> dt;
  for (auto& s : design.targets) dt.push_back(s.str());
  v.push_back(
      fmt::format("  timing outliers against the baseline or this machine's history: {}x slower WARNs, {}x "
                  "FAILs (not required)",
                  kOutlierWarn, kOutlierFail));
  v.push_back(
      fmt::format("training: {} {} on {}: {} seeds, {} batches, window {}, conditions a-e; checks: the runs "
                  "finish, (d) is bitwise identical per target, the model learns (all required)",
                  design.model, design.design, fmt::join(dt, ", "), design.seeds, design.batches, design.window));
  return v;
}

namespace {

// Whether a target's device kind can run on this machine, or why not: its device kind says.
Status target_device_availability(const Spec& t, const nlohmann::json& machine) {
  const BackendEntry* b = find_backend(t.name);
  return b ? device_kind_entry(b->device).availability(machine) : Status::ok();
}

// What the target needs for the plan's workloads that this machine lacks (an instruction set, a device).
std::vector<std::string> target_unmet(const Spec& t, const std::vector<Spec>& workloads, const nlohmann::json& machine) {
  std::vector<std::string> u;
  for (auto& w : workloads) {
    if (!applicable(t, w)) continue;
    for (auto& r : promise_for(t, w, machine, {}).unmet)
      if (std::find(u.begin(), u.end(), r) == u.end()) u.push_back(r);
  }
  return u;
}

// Targets the user named are required: each must run here (its device, its instruction sets).
Status requested_targets_can_run(const ProbePlan& plan, const nlohmann::json& machine) {
  for (auto& t : plan.targets) {
    if (Status st = target_device_availability(t, machine); !st)
      return st.prefixed(fmt::format("cannot qualify {} on this machine: ", t.str()));
    auto u = target_unmet(t, plan.workloads, machine);
    if (!u.empty())
      return Status::unavailable(fmt::format(
          "cannot qualify {} on this machine: it needs {}, which this machine lacks", t.str(), fmt::join(u, ", ")));
  }
  return Status::ok();
}

}  // namespace

namespace {

// A required baseline that shares no cell it ran with the plan can only end the qualification in "could
// not judge" after the whole probe: said before anything runs (and by --list), naming why.
Status baseline_can_judge(const Baseline& b, const QualifyPlan& qp, const std::string& path) {
  std::set<std::pair<std::string, std::string>> planned;
  for (auto& w : qp.probe.workloads)
    for (auto& t : qp.probe.targets) planned.insert({w.str(), t.str()});
  size_t ran = 0;
  for (auto& c : b.cells) ran += c.status == ObsStatus::kOk && planned.count({c.workload, c.target});
  // (The baseline check compares the probe's cells: a baseline's training cells judge nothing here.)
  if (ran > 0) return Status::ok();
  return Status::invalid(fmt::format(
      "--baseline {}: it holds no probe cell this qualification runs that ran when it was saved ({} cells{}; the plan "
      "has {} cells): the required baseline check, which compares the probe's cells, could judge nothing",
      path, b.cells.size(),
      b.training.empty() ? "" : fmt::format(", and {} training cells, which it does not compare", b.training.size()),
      planned.size()));
}

}  // namespace

std::vector<QualifyCheck> rank_rows(const Results& probe, const Results& train, int level, bool named) {
  std::vector<std::string> planned;
  std::vector<Spec> workloads;
  if (probe.plan.contains("targets") && probe.plan["targets"].is_array())
    for (auto& t : probe.plan["targets"])
      if (t.is_string()) planned.push_back(t.get<std::string>());
  if (probe.plan.contains("workloads") && probe.plan["workloads"].is_array())
    for (auto& w : probe.plan["workloads"])
      if (Spec s; w.is_string() && parse_workload(w.get<std::string>(), &s).is_ok()) workloads.push_back(s);
  std::set<std::string> required;
  std::map<std::string, std::vector<std::string>> unmet;
  for (auto& name : planned) {
    if (named) {
      required.insert(name);
    } else if (Spec t; parse_target(name, &t).is_ok()) {
      auto u = target_unmet(t, workloads, probe.machine);
      if (!u.empty()) unmet[name] = u;
    }
  }
  QualifyOutcome o;
  probe_checks(probe, planned, required, unmet, &o);
  o.checks.push_back(race_control_check(probe));
  if (level >= 2) {
    o.checks.push_back({"timing outliers", Verdict::kSkip, kFleetRankTimingReference, false});
    for (auto& c : training_checks(train)) o.checks.push_back(c);
  }
  return o.checks;
}

Status check_rank_checks(const nlohmann::json& checks, const Results& probe, const Results& train, int level,
                         bool with_detail) {
  if (!checks.is_array()) return Status::invalid("checks is not a list");
  std::vector<QualifyCheck> written;
  for (auto& c : checks) {
    QualifyCheck q;
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("verdict") ||
        !c["verdict"].is_string() || !parse_verdict(c["verdict"].get<std::string>(), &q.verdict) ||
        !c.contains("required") || !c["required"].is_boolean() || !c.contains("detail") || !c["detail"].is_string())
      return Status::invalid("checks holds a row without its name, verdict, detail and required flag");
    q.name = c["name"], q.required = c["required"], q.detail = c["detail"];
    // Its action follows from the row (qualify_action); files of versions before it have none.
    if (c.contains("action")) {
      const auto want = qualify_action(q);
      if (!c["action"].is_string() || !want || c["action"].get<std::string>() != to_string(*want))
        return Status::invalid(fmt::format("checks row '{}' ({}) says action {}, but {}", q.name, to_string(q.verdict),
                                           c["action"].dump().substr(0, 30),
                                           want ? std::string("its action is ") + to_string(*want)
                                                : std::string("a row that passed asks nothing")));
    }
    written.push_back(std::move(q));
  }
  // The suite as defined names no targets; a custom plan named its targets or only its workloads.
  const bool custom = probe.plan.is_object() && probe.plan.value("custom", false);
  // Which of the two it was, the command its probe results record says (--targets given or not): a row's
  // required flag follows from it, and is not left to whichever reading fits an edited file.
  std::optional<bool> named_targets;
  for (const char* sub : {"fleet", "qualify"})
    if (const auto o = command_options(probe.command, sub, {"--targets"})) named_targets = o->count("--targets") > 0;
  std::string first_difference;
  size_t matched = 0;
  for (bool named : {true, false}) {
    if (named && !custom) continue;
    if (named_targets && *named_targets != named) continue;
    std::vector<QualifyCheck> want = rank_rows(probe, train, level, named);
    size_t i = 0;
    // The suite's GPU targets left out on a machine without a device: a SKIP of its own, first.
    if (!named && !written.empty() && written[0].name == "GPU targets" && written[0].verdict == Verdict::kSkip &&
        !written[0].required)
      want.insert(want.begin(), written[0]);
    // A training regression that could not run: one required SKIP in place of the training rows.
    if (level >= 2 && !written.empty() && written.back().name == "training regression" &&
        written.back().verdict == Verdict::kSkip && written.back().required) {
      while (!want.empty() && want.back().name.rfind("training", 0) == 0) want.pop_back();
      want.push_back(written.back());
    }
    for (; i < want.size() && i < written.size(); ++i) {
      const QualifyCheck &w = want[i], &g = written[i];
      if (w.name != g.name || w.verdict != g.verdict || w.required != g.required ||
          (with_detail && w.detail != g.detail))
        break;
    }
    if (i == want.size() && i == written.size()) return Status::ok();
    if (!first_difference.empty() && i < matched) continue;  // the message names the plan that matched longer
    matched = i;
    const auto row = [](const QualifyCheck& c) {
      return fmt::format("'{}' {}{}", shown_safely(c.name.substr(0, 80)), to_string(c.verdict),
                         c.required ? " (required)" : "");
    };
    if (i == written.size())
      first_difference = "it lacks the row " + row(want[i]);
    else if (i == want.size())
      first_difference = fmt::format("its row {} is none its results give", row(written[i]));
    else if (row(want[i]) != row(written[i]))
      first_difference = fmt::format("its row {} is {} from its results", row(written[i]), row(want[i]));
    else
      first_difference = fmt::format("its row {} says '{}', its results '{}'", row(written[i]),
                                     shown_safely(written[i].detail.substr(0, 80)), want[i].detail.substr(0, 80));
  }
  return Status::invalid(fmt::format("checks are not those its own results give: {}", first_difference));
}

Status check_qualify_can_run(const QualifyPlan& qp, const std::string& targets, const Baseline* baseline,
                             const std::string& baseline_path) {
  if (baseline) DETAUDIT_RETURN_IF_ERROR(baseline_can_judge(*baseline, qp, baseline_path));
  if (targets.empty()) return Status::ok();
  return requested_targets_can_run(qp.probe, machine_fingerprint());
}

namespace {

// The required baseline check of a qualification: the probe's cells against the baseline's.
QualifyCheck baseline_check(const Baseline& baseline, const Results& probe, const std::string& probe_dir,
                            const std::string& path) {
  CheckReport rep = check_against_baseline(baseline, probe, probe_dir, path);
  int fails = rep.count(Verdict::kFail), warns = rep.count(Verdict::kWarn);
  std::string first_fail;
  for (auto& f : rep.findings)
    if (f.verdict == Verdict::kFail) {
      first_fail = fmt::format("; first: {} on {}: {}", f.workload, f.target, f.message);
      break;
    }
  // A baseline that shares no cell that ran here judged nothing: a required check that could not run. Nor did one
  // saved from this very run (a resumed folder keeps the cells the baseline was made of).
  const std::string own = saved_from(baseline, probe, probe_dir);
  const bool judged = rep.cells_ran > 0 && own.empty();
  const Verdict v = fails ? Verdict::kFail : !judged ? Verdict::kSkip : warns ? Verdict::kWarn : Verdict::kPass;
  if (judged)
    return {"baseline " + path, v,
            fmt::format("{} cells compared ({} on the baseline's key), {} FAIL, {} WARN{}", rep.cells_compared,
                        rep.cells_same_key, fails, warns, first_fail),
            true};
  if (!own.empty())
    return {"baseline " + path, v, "nothing judged: this run's probe results are the baseline's source: " + own, true};
  return {"baseline " + path, v,
          fmt::format("nothing judged: of the baseline's {} probe cells, {} are in this run and none of them ran here",
                      baseline.cells.size(), rep.cells_compared),
          true};
}

// Level 2's timing outliers: each cell's time against the baseline's median, else this machine's history (read before
// this run is recorded into it).
QualifyCheck timing_outliers_check(const QualifyOptions& opt, const Baseline& baseline, const Results& probe,
                                   const std::string& probe_dir) {
  // The references: the baseline's medians when a baseline is given, else this machine's history
  // (read before this run is recorded into it).
  TimingReferences refs;
  std::string source;
  Status history_read;
  if (!opt.baseline.empty()) {
    source = "the baseline";
    for (auto& c : baseline.cells)
      if (c.median_seconds) refs[{c.workload, c.target}] = *c.median_seconds;
  } else if (opt.timing_history) {
    source = "this machine's history";
    const std::string key = machine_key(probe.machine);
    for (auto& o : probe.observations) {
      if (o.status != ObsStatus::kOk || o.seconds.empty()) continue;
      double m = 0;
      int n = 0;
      history_read = opt.timing_history(o.workload, o.target, key, probe_dir, probe.started_at, &m, &n);
      if (!history_read) break;
      if (n > 0) refs[{o.workload, o.target}] = m;
    }
  }
  if (opt.baseline.empty() && !opt.timing_history)
    return {"timing outliers", Verdict::kSkip, opt.fleet_rank ? kFleetRankTimingReference : kNoTimingReference,
            false};
  if (!history_read)
    return {"timing outliers", Verdict::kSkip, "cannot read the history: " + history_read.message(), false};
  if (const std::string own = opt.baseline.empty() ? "" : saved_from(baseline, probe, probe_dir); !own.empty())
    return {"timing outliers", Verdict::kSkip,
            "nothing to compare with: the baseline's times are this run's own (" + own + ")", false};
  return timing_check(probe, refs, source);
}

// The plan as this machine can run it: targets the user named must all run here (refused otherwise, before anything
// runs) and are each required; of the suite's own, GPU targets without a device are left out (one SKIP row says so)
// and CPU targets with unmet requirements run, each with what the machine lacks.
Status fit_plan_to_machine(const QualifyOptions& opt, const nlohmann::json& machine, ProbePlan* plan,
                           std::set<std::string>* required, std::map<std::string, std::vector<std::string>>* unmet,
                           QualifyOutcome* out) {
  std::string no_gpu;
  auto device_availability = [&](const Spec& t) { return target_device_availability(t, machine); };
  auto unmet_of = [&](const Spec& t) { return target_unmet(t, plan->workloads, machine); };
  if (!opt.targets.empty()) {
    DETAUDIT_RETURN_IF_ERROR(requested_targets_can_run(*plan, machine));
    for (auto& t : plan->targets) required->insert(t.str());
  } else {
    std::vector<Spec> run;
    size_t gpu = 0;
    for (auto& t : plan->targets) {
      if (Status st = device_availability(t); !st) {
        no_gpu = st.message();
        ++gpu;
        continue;
      }
      run.push_back(t);
      auto u = unmet_of(t);
      if (!u.empty()) (*unmet)[t.str()] = u;
    }
    plan->targets = run;
    if (gpu)
      out->checks.push_back({"GPU targets", Verdict::kSkip,
                             fmt::format("{} GPU targets not run: {}; this qualifies the CPU only", gpu, no_gpu), false});
  }
  return Status::ok();
}

// Levels 2 and 3: the training design into DIR/train, its checks added (a design that could not run is a required
// check that did not run; an interrupted one stops the qualification).
Status run_training_step(const QualifyOptions& opt, const TrainDesign& d, QualifyOutcome* out) {
  out->train_dir = opt.out_dir + "/train";
  DETAUDIT_RETURN_IF_ERROR(make_dir_below(opt.out_dir, "train"));
  TrainRunOptions to;
  to.out_dir = out->train_dir;
  to.exe = opt.exe;
  to.command = opt.command;
  to.progress = opt.progress;
  Results train;
  if (opt.progress)
    opt.progress(fmt::format("qualify level {}: training design sony2021 ({} targets, {} seeds, {} batches) into {}",
                             opt.level, d.targets.size(), d.seeds, d.batches, out->train_dir));
  if (Status st = run_train_design(d, to, &train); !st) {
    if (st.code() == Status::Code::kInterrupted)
      return Status::interrupted(fmt::format("interrupted; the training results so far are in {}", out->train_dir));
    out->checks.push_back({"training regression", Verdict::kSkip, "could not run: " + st.message(), true});
  } else {
    for (auto& c : training_checks(train)) out->checks.push_back(c);
    out->train = std::move(train);
  }
  return Status::ok();
}

}  // namespace

Status run_qualify(const QualifyOptions& opt, QualifyOutcome* out) {
  *out = QualifyOutcome{};
  out->level = opt.level;
  out->started_at = utc_now_iso8601();
  out->tool_version = DETAUDIT_VERSION;
  out->tool_commit = git_commit();
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  // Each step's wall time goes to the checks it decided.
  auto clock = std::chrono::steady_clock::now();
  auto timed_from = [&](size_t first) {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - clock).count();
    for (size_t i = first; i < out->checks.size(); ++i) out->checks[i].seconds = s;
    clock = now;
  };
  // A qualify.json already there is one of detaudit's, or the run stops before it starts.
  DETAUDIT_RETURN_IF_ERROR(check_destination(opt.out_dir + "/qualify.json", Own::kQualify));
  QualifyPlan qp;
  DETAUDIT_RETURN_IF_ERROR(qualify_plan(opt.level, opt.targets, &qp, opt.workloads, opt.repeats));
  const std::string suite = qp.probe.suite;
  Baseline baseline;
  if (!opt.baseline.empty()) {
    if (!opt.baseline_loaded) return Status::invalid("--baseline " + opt.baseline + ": not read");  // (a caller's slip)
    baseline = *opt.baseline_loaded;
    DETAUDIT_RETURN_IF_ERROR(baseline_can_judge(baseline, qp, opt.baseline));
  }
  ProbePlan plan = qp.probe;

  // What this machine can run. A target the user asked for that needs a device or an instruction set
  // the machine lacks cannot be qualified: that is "could not run", never a pass (its cells would only
  // be expected crashes and skips). The suite's own GPU targets are left out on a machine without a
  // CUDA device, and the table says so; its CPU targets with unmet requirements run (their crashes
  // are expected) and show as SKIP rows saying what is missing.
  nlohmann::json machine = machine_fingerprint();
  out->hostname = machine.value("hostname", std::string());
  out->machine_key = machine_key(machine);
  std::set<std::string> required;
  std::map<std::string, std::vector<std::string>> unmet;
  DETAUDIT_RETURN_IF_ERROR(fit_plan_to_machine(opt, machine, &plan, &required, &unmet, out));
  std::vector<std::string> planned;
  for (auto& t : plan.targets) planned.push_back(t.str());

  // 1. Probes.
  size_t first = out->checks.size();
  clock = std::chrono::steady_clock::now();
  out->probe_dir = opt.out_dir + "/probe";
  DETAUDIT_RETURN_IF_ERROR(make_dir_below(opt.out_dir, "probe"));  // never a link's target
  ProbeRunOptions po;
  po.out_dir = out->probe_dir;
  po.exe = opt.exe;
  po.command = opt.command;
  po.custom = !opt.targets.empty();
  po.progress = opt.progress;
  ResultsDir probe_dir(out->probe_dir);  // run, judge and save under one hold
  po.results_dir = &probe_dir;
  Results probe;
  say(fmt::format("qualify level {}: probe suite {} ({} targets) into {}", opt.level, suite, plan.targets.size(),
                  out->probe_dir));
  if (Status st = run_probe_suite(plan, po, &probe); !st) {
    if (st.code() == Status::Code::kInterrupted)
      return Status::interrupted(fmt::format("interrupted; the probe results so far are in {}", out->probe_dir));
    return st;
  }
  judge(&probe);
  DETAUDIT_RETURN_IF_ERROR(probe_dir.save(probe));
  probe_checks(probe, planned, required, unmet, out);
  out->checks.push_back(race_control_check(probe));
  timed_from(first);
  if (!opt.baseline.empty()) {
    first = out->checks.size();
    out->checks.push_back(baseline_check(baseline, probe, out->probe_dir, opt.baseline));
    timed_from(first);
  }
  if (opt.level >= 2) {
    first = out->checks.size();
    out->checks.push_back(timing_outliers_check(opt, baseline, probe, out->probe_dir));
    timed_from(first);
  }
  out->probe = probe;

  // 2. Training regression (levels 2 and 3).
  if (qp.train) {
    first = out->checks.size();
    DETAUDIT_RETURN_IF_ERROR(run_training_step(opt, qp.design, out));
    timed_from(first);
  }

  out->decision = decide(out->checks);
  out->finished_at = utc_now_iso8601();
  return write_file_atomic(opt.out_dir + "/qualify.json", out->to_json().dump(1) + "\n", Own::kQualify);
}

std::optional<Action> qualify_action(const QualifyCheck& c) {
  if (c.verdict == Verdict::kPass || c.verdict == Verdict::kExpected) return std::nullopt;
  if (c.name.rfind("timing", 0) == 0) return Action::kMonitor;
  if (c.verdict == Verdict::kSkip) return c.required ? std::optional(Action::kRetest) : std::nullopt;
  if (c.verdict == Verdict::kWarn) return Action::kMonitor;
  return Action::kIsolate;
}

}  // namespace detaudit
