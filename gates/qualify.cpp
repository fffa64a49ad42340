#include "gates/qualify.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gates/baseline.hpp"
#include "gates/check.hpp"
#include "gates/history.hpp"
#include "probes/env.hpp"
#include "probes/registry.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_design.hpp"

namespace detaudit {

namespace {

int severity(Verdict v) {
  switch (v) {
    case Verdict::kFail: return 4;
    case Verdict::kWarn: return 3;
    case Verdict::kExpected: return 2;
    case Verdict::kPass: return 1;
    case Verdict::kSkip: return 0;
  }
  return 0;
}

// One check per target: the worst verdict of its cells (SKIP only when every cell skipped), with the
// counts and the first failing cell's reason.
void probe_checks(const Results& r, const std::set<std::string>& required, QualifyOutcome* out) {
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
    Verdict v = Verdict::kWarn;
    if (!parse_verdict(o.verdict, &v)) v = Verdict::kWarn;  // unjudged: judge() always sets one
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
    out->checks.push_back({"probe " + name, v, detail, required.count(name) > 0});
  }
}

// Level 2+: the training regression. (d) = fixed initial weights, nondeterminism off: every run of a
// target must end with the same weights, bit for bit. "Learns": the final loss (mean of the last
// window) of every finished run is below half its first batch's loss.
void training_checks(const Results& r, QualifyOutcome* out) {
  std::map<std::string, std::set<std::string>> d_weights;
  std::map<std::string, int> d_runs;
  int ok = 0, failed = 0, learned = 0;
  std::string first_failed, first_not_learned;
  for (auto& run : r.training) {
    std::string status = run.value("status", "");
    std::string target = run.value("target", "");
    if (status != "ok") {
      if (status != "skipped") {
        ++failed;
        if (first_failed.empty())
          first_failed = fmt::format("{} condition {} seed {}: {} {}", target, run.value("condition", ""),
                                     run.value("seed", 0), status, run.value("reason", ""));
      }
      continue;
    }
    ++ok;
    if (run.value("condition", "") == "d") {
      d_weights[target].insert(run.value("weights_fingerprint", ""));
      ++d_runs[target];
    }
    const auto& curve = run.contains("curve") && run["curve"].is_array() ? run["curve"] : nlohmann::json::array();
    double first = curve.empty() || !curve[0].is_number() ? NAN : curve[0].get<double>();
    double final_loss = run.contains("final_loss") && run["final_loss"].is_number() ? run["final_loss"].get<double>() : NAN;
    if (std::isfinite(first) && std::isfinite(final_loss) && final_loss < 0.5 * first)
      ++learned;
    else if (first_not_learned.empty())
      first_not_learned = fmt::format("{} condition {} seed {}: first batch loss {:.4g}, final loss {:.4g}", target,
                                      run.value("condition", ""), run.value("seed", 0), first, final_loss);
  }
  if (ok == 0) {
    out->checks.push_back({"training runs", Verdict::kFail,
                           failed ? "no run finished; first: " + first_failed : "no training run could run here", true});
    return;
  }
  out->checks.push_back({"training runs finish", failed ? Verdict::kFail : Verdict::kPass,
                         failed ? fmt::format("{} of {} runs failed; first: {}", failed, ok + failed, first_failed)
                                : fmt::format("{} runs finished", ok),
                         true});
  for (auto& [target, fps] : d_weights) {
    bool same = fps.size() == 1 && d_runs[target] >= 2;
    std::string detail =
        d_runs[target] < 2 ? fmt::format("only {} condition (d) run: nothing to compare", d_runs[target])
                           : fmt::format("{} runs, {} distinct final weights", d_runs[target], fps.size());
    out->checks.push_back({"training (d) bitwise identical on " + target,
                           d_runs[target] < 2 ? Verdict::kSkip : (same ? Verdict::kPass : Verdict::kFail), detail, true});
  }
  out->checks.push_back({"training: the model learns", learned == ok ? Verdict::kPass : Verdict::kFail,
                         learned == ok ? fmt::format("every run's final loss is below half its first batch's loss ({} runs)", ok)
                                       : fmt::format("{} of {} runs did not halve their loss; first: {}", ok - learned, ok,
                                                     first_not_learned),
                         true});
}

// Level 2+: timing outliers. Each ok cell's median seconds per repeat against a reference median: the
// baseline's entry when a baseline is given, else this machine's history (median of its earlier
// medians). A cell whose reference is below kMinTimedSeconds is not judged (timer noise).
void timing_checks(const Results& r, const Baseline* baseline, const std::string& history, QualifyOutcome* out) {
  std::map<std::pair<std::string, std::string>, double> base;
  if (baseline)
    for (auto& c : baseline->cells)
      if (c.median_seconds) base[{c.workload, c.target}] = *c.median_seconds;
  std::string key = machine_key(r.machine);
  int judged = 0, too_fast = 0, no_reference = 0, warn = 0, failed = 0;
  std::vector<std::string> slow;
  double worst = 0;
  std::string worst_cell;
  for (auto& o : r.observations) {
    if (o.status != ObsStatus::kOk || o.seconds.empty()) continue;
    std::vector<double> s = o.seconds;
    std::sort(s.begin(), s.end());
    double now = s[s.size() / 2], ref = 0;
    auto it = base.find({o.workload, o.target});
    if (it != base.end()) {
      ref = it->second;
    } else if (!history.empty()) {
      int n = 0;
      std::string e;
      if (!median_seconds_history(history, o.workload, o.target, key, &ref, &n, &e) || n == 0) ref = 0;
    }
    if (ref <= 0) {
      ++no_reference;
      continue;
    }
    if (ref < kMinTimedSeconds) {
      ++too_fast;
      continue;
    }
    ++judged;
    double ratio = now / ref;
    if (ratio > worst) {
      worst = ratio;
      worst_cell = fmt::format("{} on {}", o.workload, o.target);
    }
    if (ratio > kOutlierWarn) {
      ratio > kOutlierFail ? ++failed : ++warn;
      slow.push_back(fmt::format("{} on {}: {:.3g} ms vs {:.3g} ms ({:.1f}x)", o.workload, o.target, now * 1e3, ref * 1e3,
                                 ratio));
    }
  }
  std::string source = baseline ? "the baseline" : "this machine's history";
  if (judged == 0) {
    out->checks.push_back({"timing outliers", Verdict::kSkip,
                           fmt::format("nothing to compare with: {} cells without a reference in {}, {} faster than "
                                       "{:.0f} ms in it",
                                       no_reference, source, too_fast, kMinTimedSeconds * 1e3),
                           false});
    return;
  }
  std::string detail = fmt::format("{} cells against {}: slowest {:.2f}x ({})", judged, source, worst, worst_cell);
  if (!slow.empty()) detail += fmt::format("; {} over {:.0f}x: {}", slow.size(), kOutlierWarn, slow.front());
  if (too_fast || no_reference)
    detail += fmt::format("; not judged: {} under {:.0f} ms, {} without a reference", too_fast, kMinTimedSeconds * 1e3,
                          no_reference);
  out->checks.push_back({"timing outliers", failed ? Verdict::kFail : warn ? Verdict::kWarn : Verdict::kPass, detail, false});
}

std::string pad(const std::string& s, size_t n) { return s.size() >= n ? s : s + std::string(n - s.size(), ' '); }

}  // namespace

nlohmann::json QualifyOutcome::to_json() const {
  nlohmann::json cs = nlohmann::json::array();
  std::map<std::string, int> counts;
  for (auto& c : checks) {
    cs.push_back({{"name", c.name}, {"verdict", to_string(c.verdict)}, {"detail", c.detail}, {"required", c.required}});
    ++counts[to_string(c.verdict)];
  }
  return {{"schema", "detaudit-qualify/1"},
          {"level", level},
          {"exit_code", exit_code},
          {"qualified", exit_code == 0},
          {"counts", counts},
          {"checks", cs},
          {"probe_dir", probe_dir},
          {"train_dir", train_dir}};
}

std::string QualifyOutcome::table() const {
  size_t w = 5;
  for (auto& c : checks) w = std::max(w, std::min<size_t>(c.name.size(), 60));
  std::string s = fmt::format("{}  {}  {}\n", pad("check", w), pad("verdict", 8), "detail");
  for (auto& c : checks)
    s += fmt::format("{}  {}  {}{}\n", pad(c.name, w), pad(to_string(c.verdict), 8), c.detail,
                     c.required && c.verdict == Verdict::kSkip ? " (required)" : "");
  std::map<std::string, int> counts;
  for (auto& c : checks) ++counts[to_string(c.verdict)];
  std::vector<std::string> parts;
  for (const char* k : {"PASS", "FAIL", "WARN", "SKIP"})
    if (counts.count(k)) parts.push_back(fmt::format("{} {}", counts[k], k));
  s += fmt::format("qualify level {}: {} checks ({}): {}\n", level, checks.size(), fmt::join(parts, ", "),
                   exit_code == 0 ? "QUALIFIED" : exit_code == 1 ? "NOT QUALIFIED (a check failed)"
                                                                 : "NOT QUALIFIED (a required check could not run)");
  return s;
}

int run_qualify(const QualifyOptions& opt, QualifyOutcome* out, std::string* err) {
  *out = QualifyOutcome{};
  out->level = opt.level;
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  if (opt.level < 1 || opt.level > 3) {
    *err = fmt::format("--level {} out of range (1, 2 or 3)", opt.level);
    return out->exit_code = 2;
  }
  const std::string suite = opt.level == 3 ? "full" : "quick";
  Baseline baseline;
  if (!opt.baseline.empty() && !load_baseline(opt.baseline, &baseline, err)) return out->exit_code = 2;
  ProbePlan plan;
  if (!make_plan(suite, opt.targets, "", 0, 120, &plan, err)) return out->exit_code = 2;

  // What this machine can run. A target the user asked for that needs a device the machine lacks
  // cannot be qualified: that is "could not run", never a pass. The suite's own GPU targets are left
  // out on a machine without a CUDA device, and the table says so.
  nlohmann::json machine = machine_fingerprint();
  bool has_gpu = machine.contains("gpus") && machine["gpus"].is_array() && !machine["gpus"].empty();
  std::string no_gpu = machine.value("cuda", std::string("no CUDA device"));
  std::set<std::string> required;
  if (!opt.targets.empty()) {
    for (auto& t : plan.targets) {
      const BackendEntry* b = find_backend(t.name);
      if (b && b->gpu && !has_gpu) {
        *err = fmt::format("cannot qualify {} on this machine: {}", t.str(), no_gpu);
        return out->exit_code = 2;
      }
      required.insert(t.str());
    }
  } else if (!has_gpu) {
    std::vector<Spec> cpu;
    size_t gpu = 0;
    for (auto& t : plan.targets) {
      const BackendEntry* b = find_backend(t.name);
      if (b && b->gpu)
        ++gpu;
      else
        cpu.push_back(t);
    }
    plan.targets = cpu;
    if (gpu)
      out->checks.push_back({"GPU targets", Verdict::kSkip,
                             fmt::format("{} GPU targets not run: {}; this qualifies the CPU only", gpu, no_gpu), false});
  }

  // 1. Probes.
  out->probe_dir = opt.out_dir + "/probe";
  ProbeRunOptions po;
  po.out_dir = out->probe_dir;
  po.exe = opt.exe;
  po.command = opt.command;
  po.custom = !opt.targets.empty();
  po.progress = opt.progress;
  Results probe;
  say(fmt::format("qualify level {}: probe suite {} ({} targets) into {}", opt.level, suite, plan.targets.size(),
                  out->probe_dir));
  int rc = run_probe_suite(plan, po, &probe, err);
  if (rc == kProbeInterrupted) {
    *err = fmt::format("interrupted; the probe results so far are in {} (run qualify again with the same --out to resume)",
                       out->probe_dir);
    return out->exit_code = 2;
  }
  if (rc != 0) return out->exit_code = 2;
  judge(&probe);
  if (!save_results(out->probe_dir + "/results.json", probe, err)) return out->exit_code = 2;
  probe_checks(probe, required, out);
  if (!opt.baseline.empty()) {
    CheckReport rep = check_against_baseline(baseline, probe, out->probe_dir, opt.baseline);
    int fails = rep.count(Verdict::kFail), warns = rep.count(Verdict::kWarn);
    std::string first;
    for (auto& f : rep.findings)
      if (f.verdict == Verdict::kFail) {
        first = "; first: " + f.message;
        break;
      }
    out->checks.push_back({"baseline " + opt.baseline, fails ? Verdict::kFail : warns ? Verdict::kWarn : Verdict::kPass,
                           fmt::format("{} cells compared ({} on the baseline's key), {} FAIL, {} WARN{}", rep.cells_compared,
                                       rep.cells_same_key, fails, warns, first),
                           true});
  }
  if (opt.level >= 2) timing_checks(probe, opt.baseline.empty() ? nullptr : &baseline, opt.history, out);
  out->probe = probe;

  // 2. Training regression (levels 2 and 3).
  if (opt.level >= 2) {
    TrainDesign d = default_design(false);
    d.model = "autoencoder";
    d.design = "sony2021";
    if (opt.level == 2) {
      // Short: one target with two threads, so the nondeterministic variant can vary; 2 seeds of 60
      // batches are enough for (d) to be compared and for the loss to halve.
      Spec t;
      parse_target("cpu?threads=2", &t, err);
      d.targets = {t};
      d.seeds = 2;
      d.batches = 60;
      d.window = 10;
    }
    out->train_dir = opt.out_dir + "/train";
    TrainRunOptions to;
    to.out_dir = out->train_dir;
    to.exe = opt.exe;
    to.command = opt.command;
    to.progress = opt.progress;
    Results train;
    say(fmt::format("qualify level {}: training design sony2021 ({} targets, {} seeds, {} batches) into {}", opt.level,
                    d.targets.size(), d.seeds, d.batches, out->train_dir));
    rc = run_train_design(d, to, &train, err);
    if (rc == kTrainInterrupted) {
      *err = fmt::format("interrupted; the training results so far are in {}", out->train_dir);
      return out->exit_code = 2;
    }
    if (rc != 0) {
      out->checks.push_back({"training regression", Verdict::kSkip, "could not run: " + *err, true});
      err->clear();
    } else {
      training_checks(train, out);
    }
  }

  // Outcome: 2 when a required check could not run, 1 when a check failed, else 0.
  bool failed = false, required_skipped = false;
  for (auto& c : out->checks) {
    failed |= c.verdict == Verdict::kFail;
    required_skipped |= c.required && c.verdict == Verdict::kSkip;
  }
  out->exit_code = required_skipped ? 2 : failed ? 1 : 0;
  nlohmann::json j = out->to_json();
  if (!write_file_atomic(opt.out_dir + "/qualify.json", j.dump(1) + "\n", err)) return out->exit_code = 2;
  return out->exit_code;
}

}  // namespace detaudit
