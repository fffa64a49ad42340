#include "gates/verdict.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "probes/workload.hpp"

namespace detaudit {

double oracle_budget(int64_t bound_k, double unit_roundoff, double input_unit_roundoff) {
  if (input_unit_roundoff <= 0) return 1;
  double ku = double(bound_k + 1) * unit_roundoff;
  // (k+1)u >= 1: γ is infinite (the bound says nothing), and the inputs' term vanishes beside it.
  if (ku >= 1) return 1;
  double gamma = ku / (1 - ku);
  return (gamma + 2 * input_unit_roundoff + input_unit_roundoff * input_unit_roundoff) / gamma;
}

double oracle_budget(const Observation& o, const Promise& p) {
  Spec t, w;
  bool f64 = specs_of(o, &t, &w).is_ok() && w.get("dtype") == "f64";
  return oracle_budget(o.oracle ? o.oracle->bound_k : 0, f64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24),
                       p.input_unit_roundoff);
}

namespace {

// One thing said about a cell. The worst finding is the verdict; every reason is kept.
struct Finding {
  Verdict verdict;
  std::string reason;
};

struct Findings {
  Verdict base = Verdict::kPass;  // PASS for an observation that ran, SKIP for a skipped one
  std::vector<Finding> findings;
  std::string fallback;  // said only when nothing else is
};

struct Judged {
  Promise promise;
  Findings cell;
};

// "a, b, c and 4 more"
std::string name_list(const std::vector<std::string>& names, size_t cap = 4) {
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(cap, names.size()));
  std::string s = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > cap) s += fmt::format(" and {} more", names.size() - cap);
  return s;
}

std::string needs(const Promise& p) {
  return fmt::format("needs {}, which this machine lacks", fmt::join(p.unmet, " and "));
}

// A crash, timeout or worker error. The worker turns a backend's "unsupported" and "unavailable"
// statuses into `skipped` (probes/worker.cpp, obs_status_for), so what arrives as `error` is a real one:
// invalid settings, a library call that failed, a worker that exited early or broke its protocol. Each
// is a FAIL unless the target needs something this machine lacks, which explains it.
void judge_failure(const Observation& o, const Promise& p, Findings* c) {
  std::string what = o.status == ObsStatus::kCrashed ? "crashed" : o.status == ObsStatus::kTimeout ? "timed out" : "error";
  if (!p.unmet.empty())
    c->findings.push_back({Verdict::kExpected, fmt::format("{}: {}", o.reason.empty() ? what : o.reason, needs(p))});
  else
    c->findings.push_back({Verdict::kFail, o.reason.empty() ? what : fmt::format("{}: {}", what, o.reason)});
}

void judge_run_to_run(const Observation& o, const Promise& p, Findings* c) {
  size_t n = o.fingerprints.size();
  int k = count_distinct(o.fingerprints);
  std::string source = p.run_to_run_source.empty() ? std::string("its registry entry") : p.run_to_run_source;
  if (k > 1) {
    switch (p.run_to_run) {
      case Promise::RunToRun::kDeterministic:
        c->findings.push_back(
            {Verdict::kFail, fmt::format("{} distinct outputs in {} runs; {} promises determinism", k, n, source)});
        break;
      case Promise::RunToRun::kNondeterministic:
        c->findings.push_back(
            {Verdict::kExpected, fmt::format("{} distinct outputs in {} runs, as promised: {}", k, n, source)});
        break;
      case Promise::RunToRun::kNone:
        c->findings.push_back({Verdict::kWarn, fmt::format("{} distinct outputs in {} runs; nothing promises either way{}", k,
                                                           n, p.run_to_run_source.empty() ? "" : " (" + p.run_to_run_source + ")")});
        break;
    }
  }
  // The warm-up (probes/worker.cpp) ran the same op on the same inputs just before the repeats.
  const bool warmup_differs = !o.warmup_fingerprint.empty() && !o.fingerprints.empty() &&
                              std::find(o.fingerprints.begin(), o.fingerprints.end(), o.warmup_fingerprint) ==
                                  o.fingerprints.end();
  if (warmup_differs && p.run_to_run == Promise::RunToRun::kDeterministic)
    c->findings.push_back({Verdict::kFail, fmt::format("the warm-up run gave bits that none of the {} repeats gave; "
                                                       "{} promises determinism", n, source)});
  else if (warmup_differs && p.run_to_run == Promise::RunToRun::kNone && k == 1)
    c->findings.push_back({Verdict::kWarn, fmt::format("the warm-up run gave other bits than the {} repeats; nothing "
                                                       "promises either way", n)});
  else if (k == 1 && p.run_to_run == Promise::RunToRun::kNondeterministic)
    c->findings.push_back(
        warmup_differs
            ? Finding{Verdict::kExpected, fmt::format("the warm-up run differed from the {} identical repeats, as "
                                                      "promised: {}",
                                                      n, source)}
            // Permitted to vary is not obliged to: a run that happened to see one output is no warning
            // (it would flicker with the scheduler from run to run). qualify's race control asks the
            // opposite question, in a row of its own.
            : Finding{Verdict::kPass, fmt::format("permitted to vary ({}); no variation seen in {} runs", source, n)});
}

// Two claims for what ran that disagree: whichever is wrong, a user cannot rely on either.
void judge_claims(const Observation& o, const Promise& p, Findings* c) {
  if (p.claims_disagree.empty()) return;
  c->findings.push_back({Verdict::kWarn, fmt::format("claims disagree: {}; observed {} distinct output{} in {} runs",
                                                     p.claims_disagree, o.distinct, o.distinct == 1 ? "" : "s",
                                                     o.fingerprints.size())});
}

void judge_oracle(const Observation& o, const Results& r, const Promise& p, Findings* c) {
  if (!o.oracle) {
    std::string why;
    if (auto it = r.oracle_failures.find(o.workload); it != r.oracle_failures.end())
      why = "the oracle failed: " + it->second;
    else if (auto d = o.details.find("oracle_problem"); d != o.details.end())
      why = d->second;
    else
      why = "no oracle output";
    c->findings.push_back({Verdict::kWarn, "not compared with the oracle: " + why});
    return;
  }
  double ratio = o.oracle->err_ratio;
  if (ratio == -1) {
    c->fallback = "no error bound known (results of an older detaudit): not judged against the oracle";
    return;
  }
  if (!std::isfinite(ratio)) {
    c->findings.push_back({Verdict::kFail, o.oracle->nonfinite_mismatch()
                                               ? "NaN or infinity where the oracle has a number (or the reverse)"
                                               : "differs from the oracle where its error bound is 0 (a value every "
                                                 "correct kernel gets exactly)"});
    return;
  }
  if (!p.error_bound_exempt.empty()) {
    c->fallback = fmt::format("error {:.3g} x the summation bound, not judged: {}", ratio, p.error_bound_exempt);
    return;
  }
  double budget = oracle_budget(o, p);
  if (ratio <= budget) return;
  std::string reason = fmt::format("error {:.3g} x the summation error bound", ratio);
  if (budget != 1) reason += fmt::format(" (budget {:.3g} for inputs rounded to u = 2^{:g})", budget,
                                         std::log2(p.input_unit_roundoff));
  c->findings.push_back({Verdict::kFail, reason});
}

void judge_batch(const Observation& o, const Promise& p, Findings* c) {
  if (!o.batch || o.batch->invariant()) return;
  std::string fact = fmt::format("{} of {} rows differ from the row computed alone", o.batch->rows_differing,
                                 o.batch->rows_checked);
  if (p.batch_invariance_claimed)
    c->findings.push_back({Verdict::kFail, "batch invariance promised, but " + fact});
  else
    c->findings.push_back({Verdict::kPass, "not batch invariant (not promised): " + fact});
}

void judge_one(const Observation& o, const Results& r, Judged* j) {
  Findings& c = j->cell;
  const Promise& p = j->promise;
  switch (o.status) {
    case ObsStatus::kSkipped:
      c.base = Verdict::kSkip;
      c.findings.push_back({Verdict::kSkip, p.unmet.empty() ? o.reason : fmt::format("{} ({})", o.reason, needs(p))});
      return;
    case ObsStatus::kCrashed:
    case ObsStatus::kTimeout:
    case ObsStatus::kError: judge_failure(o, p, &c); return;
    case ObsStatus::kOk: break;
  }
  if (o.fingerprints.empty()) {
    c.findings.push_back({Verdict::kFail, "status ok but no output fingerprint recorded"});
    return;
  }
  judge_run_to_run(o, p, &c);
  judge_claims(o, p, &c);
  judge_oracle(o, r, p, &c);
  judge_batch(o, p, &c);
}

// Targets promised to agree (the same non-empty equality class) that did not: per workload and class,
// the ok observations are grouped by fingerprint set; the largest group stands (ties: the one holding
// the target that sorts first) and every member of the others fails.
void judge_equality_classes(const std::vector<Observation>& obs, std::vector<Judged>* judged) {
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> members;  // (workload, class) -> indices
  for (size_t i = 0; i < obs.size(); ++i)
    if (obs[i].status == ObsStatus::kOk && !obs[i].fingerprints.empty() && !(*judged)[i].promise.equality_class.empty())
      members[{obs[i].workload, (*judged)[i].promise.equality_class}].push_back(i);
  for (auto& [key, idx] : members) {
    struct Group {
      std::vector<std::string> fps;
      std::vector<size_t> members;
      std::vector<std::string> targets;
    };
    std::vector<Group> groups;
    for (size_t i : idx) {
      auto fps = fingerprint_set(obs[i]);
      auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.fps == fps; });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{fps, {}, {}});
      g->members.push_back(i);
      g->targets.push_back(obs[i].target);
    }
    if (groups.size() < 2) continue;
    // The largest agreeing group stands; the others broke the promise. With no single largest group
    // (a 1:1 split) nothing says which side is right, so every side FAILs.
    auto keep = std::max_element(groups.begin(), groups.end(),
                                 [](const Group& a, const Group& b) { return a.members.size() < b.members.size(); });
    size_t largest = keep->members.size();
    bool tie = std::count_if(groups.begin(), groups.end(), [&](const Group& g) { return g.members.size() == largest; }) > 1;
    for (auto g = groups.begin(); g != groups.end(); ++g) {
      if (g == keep && !tie) continue;
      std::string reason;
      if (tie) {
        std::vector<std::string> sides;
        for (auto& h : groups) sides.push_back(fmt::format("{} gave {}", name_list(h.targets), short_fingerprints(h.fps)));
        reason = fmt::format("equality class {} split on {} with no majority: {}", key.second, key.first,
                             fmt::join(sides, "; "));
      } else {
        reason = fmt::format("equality class {} split on {}: {} gave {}, but {} gave {}", key.second, key.first,
                             name_list(g->targets), short_fingerprints(g->fps), name_list(keep->targets),
                             short_fingerprints(keep->fps));
      }
      for (size_t i : g->members) (*judged)[i].cell.findings.push_back({Verdict::kFail, reason});
    }
  }
}

void settle(const Findings& c, Observation* o) {
  std::vector<Finding> f = c.findings;
  std::stable_sort(f.begin(), f.end(),
                   [](const Finding& a, const Finding& b) { return severity(a.verdict) > severity(b.verdict); });
  Verdict v = f.empty() || severity(f[0].verdict) <= severity(Verdict::kPass) ? c.base : f[0].verdict;
  std::vector<std::string> reasons;
  for (auto& x : f)
    if (!x.reason.empty()) reasons.push_back(x.reason);
  if (reasons.empty() && !c.fallback.empty()) reasons.push_back(c.fallback);
  o->verdict = v;
  o->verdict_reason = fmt::format("{}", fmt::join(reasons, "; "));
}

// The verdicts judge() gives a CPU target's cell that ran, from what a record of it keeps (a history row, a baseline
// entry): its outputs and its error against the bound (none: not compared), judged as probe judges them. What the
// record does not keep can only add a finding: a warm-up run that gave other bits, its equality class split or a
// batch that varied (FAIL), and where it has no error ratio an oracle it was not compared with (WARN) or a distance
// that is no number (FAIL). Pure in its arguments: kept per (target, workload, one output or several, error class),
// so a long history judges each once. Each verdict maps to what its reason must name: nothing for one the record's
// own facts give, otherwise the words of one finding the record does not keep that gives it (a FAIL of a cell whose
// outputs and error pass says why).
using CellVerdicts = std::map<Verdict, std::vector<std::string>>;
CellVerdicts cpu_cell_verdicts(const Spec& t, const Spec& w, int distinct, std::optional<double> err_ratio) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, std::string, bool, int>, CellVerdicts> known;
  const int err_class = !err_ratio ? 0 : *err_ratio <= 1 ? 1 : 2;  // (a CPU target's budget is the bound: 1)
  const auto key = std::make_tuple(t.str(), w.str(), distinct > 1, err_class);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  Results r;
  r.machine = nlohmann::json::object();
  Observation o;
  o.workload = w.str();
  o.target = t.str();
  o.workload_spec = w, o.target_spec = t;
  o.status = ObsStatus::kOk;
  const int n = std::max(distinct, 1);
  for (int i = 0; i < n; ++i) o.fingerprints.push_back(fmt::format("{:032x}", i + 1));
  o.repeats = o.distinct = n;
  o.oracle = OracleDistance{};
  o.oracle->err_ratio = err_class == 0 ? -1 : err_class == 1 ? 0.5 : 2.0;  // (-1: no bound known, no finding)
  if (const auto wl = Workload::create(w); wl && err_class != 0) o.oracle->bound_k = wl->bound_k();
  auto verdict_of = [&](const Observation& x) {
    r.observations = {x};
    judge(&r);
    return *r.observations[0].verdict;
  };
  const Verdict base = verdict_of(o);
  // The findings the row does not keep, each with the words its reason says (gates/verdict.cpp).
  std::vector<std::pair<Verdict, std::string>> more;
  Observation warm = o;
  warm.warmup_fingerprint = fmt::format("{:032x}", 0);
  more.push_back({verdict_of(warm), "warm-up run"});
  const Promise p = promise_for(t, w, r.machine, {});
  if (!p.equality_class.empty()) more.push_back({Verdict::kFail, "equality class"});
  if (w.name == "batchinv" && p.batch_invariance_claimed) more.push_back({Verdict::kFail, "batch invariance promised"});
  if (err_class == 0)
    more.insert(more.end(), {{Verdict::kWarn, "not compared with the oracle"},
                             {Verdict::kFail, "NaN or infinity where the oracle"},
                             {Verdict::kFail, "differs from the oracle where its error bound is 0"}});
  CellVerdicts out;
  out[base].clear();
  for (const auto& [v, words] : more)
    if (severity(v) > severity(base) && !(out.count(v) && out[v].empty())) out[v].push_back(words);
  std::lock_guard<std::mutex> lock(mutex);
  return known[key] = out;
}

}  // namespace

bool passed_batch_invariance(const Spec& t, const Spec& w, bool one_output, bool passed) {
  const BackendEntry* be = find_backend(t.name);
  return one_output && passed && be && be->device == DeviceKind::kHost && !be->imported && w.name == "batchinv" &&
         promise_for(t, w, nlohmann::json::object(), {}).batch_invariance_claimed;
}

std::string cpu_verdict_problem(const Spec& t, const Spec& w, Verdict v, const std::string& verdict_reason, int distinct,
                                std::optional<double> err_ratio) {
  if (target_facts(t.str()).device_kind != "host" || (err_ratio && !std::isfinite(*err_ratio))) return "";
  const auto rules = cpu_cell_verdicts(t, w, distinct, err_ratio);
  const auto rule = rules.find(v);
  // (A WARN that said "claimed nondeterministic" is an older detaudit's verdict of a cell permitted to vary that did
  // not: kept as recorded.)
  const bool older_warn = v == Verdict::kWarn && verdict_reason.find("claimed nondeterministic (") != std::string::npos;
  if (rule == rules.end() && !older_warn) {
    std::string given;
    for (const auto& [x, words] : rules) given += (given.empty() ? "" : " or ") + std::string(to_string(x));
    return fmt::format("a verdict the verdict rules give a cell that ran with {} output{} here ({})", distinct,
                       distinct == 1 ? "" : "s", given);
  }
  // A verdict only a finding the record does not keep gives: its reason names that finding.
  if (rule != rules.end() && !rule->second.empty() &&
      std::none_of(rule->second.begin(), rule->second.end(),
                   [&](const std::string& words) { return verdict_reason.find(words) != std::string::npos; }))
    return fmt::format("a verdict of a cell that ran with {} output{} here unless its reason names {} (it says '{}')",
                       distinct, distinct == 1 ? "" : "s", fmt::join(rule->second, " or "),
                       shown_safely(verdict_reason.substr(0, 60)));
  return "";
}

namespace {
}  // namespace

void judge(Results* r) {
  std::vector<Judged> judged(r->observations.size());
  for (size_t i = 0; i < r->observations.size(); ++i) {
    const Observation& o = r->observations[i];
    Judged& j = judged[i];
    Spec target, workload;
    if (Status specs = specs_of(o, &target, &workload); specs) {
      j.promise = promise_for(target, workload, r->machine, o.details);
    } else if (o.status != ObsStatus::kSkipped) {
      // Results of another detaudit may name what this one does not know: judged without a promise.
      j.cell.findings.push_back({Verdict::kWarn, "no promise known: " + specs.message()});
    }
    judge_one(o, *r, &j);
  }
  judge_equality_classes(r->observations, &judged);
  for (size_t i = 0; i < r->observations.size(); ++i) settle(judged[i].cell, &r->observations[i]);
}

bool is_judged(const Results& r) {
  return std::none_of(r.observations.begin(), r.observations.end(), [](const Observation& o) { return !o.verdict; });
}

const Results* judged_view(const Results& in, Results* storage) {
  *storage = in;
  judge(storage);
  return storage;
}

VerdictCounts count_verdicts(const Results& r) {
  VerdictCounts c;
  for (auto& o : r.observations) {
    if (o.verdict)
      c.add(*o.verdict);
    else
      ++c.unjudged;
  }
  return c;
}

}  // namespace detaudit
