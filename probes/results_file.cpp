#include "probes/results_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "contract/atomic_file.hpp"
#include "contract/cells.hpp"
#include "contract/metrics.hpp"
#include "contract/command_text.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "probes/workload.hpp"

namespace detaudit {

namespace {

// *text parsed and rewritten in canonical form; *spec (may be null) gets the parsed spec.
Status canonical(std::string* text, bool target, const std::string& field, Spec* spec = nullptr) {
  Spec s;
  Status st = target ? parse_target(*text, &s) : parse_workload(*text, &s);
  if (!st) return st.prefixed(field + ": ");
  *text = s.str();
  if (spec) *spec = std::move(s);
  return Status::ok();
}

// The specs a plan names, canonical, each once.
Status canonical_list(nlohmann::json* list, bool target, const std::string& field, std::set<std::string>* out) {
  for (size_t i = 0; i < list->size(); ++i) {
    std::string text = (*list)[i].get<std::string>();
    DETAUDIT_RETURN_IF_ERROR(canonical(&text, target, fmt::format("{}[{}]", field, i)));
    if (!out->insert(text).second) return Status::invalid(fmt::format("{}[{}]: {} is named twice", field, i, text));
    (*list)[i] = text;
  }
  return Status::ok();
}

// What a cell of a results file can be checked against, beyond its own counts (contract/observation.hpp):
// its plan, its workload's size, and the run's own time.
// `w` and `t` are the cell's parsed workload and target; `run_seconds` the run's wall time, when it has both times.
Status check_cell_against_run(const Observation& o, const Spec& w, const Spec& t, const Results& r,
                              const std::set<std::string>& plan_targets, const std::set<std::string>& plan_workloads,
                              std::optional<int64_t> run_seconds, const std::string& at) {
  const BackendEntry* be = find_backend(t.name);
  const bool imported = be && be->imported;
  const bool import_plan = r.plan.value("suite", "") == "import";
  // A probe plan's cell: a target and a workload the plan names, repeated as often as it says. Cells of
  // imported outputs join any probe run (detaudit import --out): in an import's own plan, they are its cells,
  // at most as many repeats as it says.
  if (r.plan.contains("targets") && (!imported || import_plan)) {
    if (!plan_targets.count(o.target))
      return Status::invalid(fmt::format("{}.target {} is not a target of the plan", at, o.target));
    if (r.plan.contains("workloads") && !plan_workloads.count(o.workload))
      return Status::invalid(fmt::format("{}.workload {} is not a workload of the plan", at, o.workload));
    if (r.plan.contains("repeats") && o.status != ObsStatus::kSkipped) {
      const int64_t planned = r.plan["repeats"].get<int64_t>();
      if (import_plan ? o.repeats > planned : o.repeats != planned)
        return Status::invalid(fmt::format("{}.repeats is {}, but the plan repeats each cell {}{} times", at, o.repeats,
                                           import_plan ? "at most " : "", planned));
    }
    // The worker is killed when a cell takes longer than the plan's timeout from its start to its result: the
    // repeats of a cell that ran took less in all.
    if (r.plan.contains("timeout_s") && !import_plan && o.status == ObsStatus::kOk) {
      double sum = 0;
      for (double s : o.seconds)
        if (std::isfinite(s)) sum += s;
      if (const double limit = r.plan["timeout_s"].get<double>(); sum > limit * (1 + 1e-9))
        return Status::invalid(fmt::format("{}.seconds add up to {:.6g} s, but the plan's timeout ({:g} s) kills a "
                                           "cell that takes longer",
                                           at, sum, limit));
    }
  }
  // The worker times every repeat of a cell that ran (an imported output was timed by no one).
  if (o.status == ObsStatus::kOk && o.seconds.empty() && !imported)
    return Status::invalid(fmt::format("{}.seconds is empty, but the cell ran: the worker times each of its {} repeats",
                                       at, o.repeats));
  // ... on a clock of nanoseconds, read before and after a repeat's kernel: at least one tick apart (the two reads
  // alone take tens of them).
  if (!imported)
    for (size_t i = 0; i < o.seconds.size(); ++i)
      if (o.seconds[i] < kClockTick)
        return Status::invalid(fmt::format("{}.seconds[{}] is {}: the worker's clock, read before and after a repeat, "
                                           "moves a nanosecond at least",
                                           at, i, o.seconds[i]));
  // Kernel lists are what CUPTI traced on a GPU: a target that runs on the host has none.
  if (!o.kernels.empty() && target_facts(o.target).device_kind == "host")
    return Status::invalid(fmt::format("{}.kernels holds {} lists, but {} runs on the host (kernels are a GPU's, traced "
                                       "by CUPTI)",
                                       at, o.kernels.size(), o.target));
  if (!o.tracing.empty() && target_facts(o.target).device_kind == "host")
    return Status::invalid(fmt::format("{}.tracing is \"{}\", but {} runs on the host (kernels are traced on a GPU, with "
                                       "CUPTI)",
                                       at, shown_safely(o.tracing.substr(0, 40)), o.target));
  if (o.batch && w.name != "batchinv")
    return Status::invalid(fmt::format("{}.batch_invariance is set, but {} is not a batchinv workload", at, o.workload));
  if (!o.batch && w.name == "batchinv" && o.status == ObsStatus::kOk && !imported)
    return Status::invalid(fmt::format("{}.batch_invariance is missing, but {} ran (a batchinv cell checks its rows)", at,
                                       o.workload));
  // ... and fingerprints the rows it computed alone, as outputs (compared by check, compare and fleet like the product).
  if (o.batch && o.batch->rows_fingerprint.empty() && o.status == ObsStatus::kOk && !imported)
    return Status::invalid(fmt::format("{}.batch_invariance lacks rows_fingerprint, which detaudit records for every "
                                       "batchinv cell a worker ran (the rows computed alone are outputs)",
                                       at));
  if (o.batch && o.batch->rows_checked != int(w.get_int("rows", 1)))
    return Status::invalid(fmt::format("{}.batch_invariance.rows_checked is {}, but {} checks {} rows", at,
                                       o.batch->rows_checked, o.workload, w.get_int("rows", 1)));
  // A cell that ran was compared with its workload's oracle, unless the run's oracle of that workload failed
  // (oracle_failures) or the worker could not use the entry (details.oracle_problem says why).
  if (o.status == ObsStatus::kOk) {
    const bool run_failed = r.oracle_failures.count(o.workload) > 0;
    if (!o.oracle && !run_failed && !o.details.count("oracle_problem"))
      return Status::invalid(fmt::format(
          "{}.oracle is absent, but the cell ran and neither oracle_failures nor details.oracle_problem says why", at));
    if (o.oracle && run_failed)
      return Status::invalid(fmt::format("{}.oracle is set, but the run's oracle of {} failed (oracle_failures)", at,
                                         o.workload));
  }
  // The oracle's counts are counts of the output's elements; two distinct outputs cannot both be the oracle's bits.
  if (o.oracle && o.distinct > 1 && o.oracle->mismatched == 0)
    return Status::invalid(fmt::format("{}.oracle.mismatched is 0, but the cell has {} distinct outputs: at most one "
                                       "of them is the oracle's bits", at, o.distinct));
  if (o.oracle) {
    const auto wl = Workload::create(w);
    const uint64_t elems = wl ? uint64_t(wl->output_elems()) : 0;
    uint64_t hist = 0;
    for (uint64_t c : o.oracle->ratio_hist) hist += c;
    if (wl && o.oracle->mismatched > elems)
      return Status::invalid(fmt::format("{}.oracle.mismatched is {}, more than the {} elements of {}'s output", at,
                                         o.oracle->mismatched, elems, o.workload));
    if (wl && !o.oracle->ratio_hist.empty() && hist != elems)
      return Status::invalid(fmt::format("{}.oracle.ratio_hist counts {} elements, but {}'s output has {}", at, hist,
                                         o.workload, elems));
    // Bits of agreement are at most the output's precision (24 for f32, 53 for f64), and all of them where no
    // element mismatched.
    const int bits = w.get("dtype", "f32") == "f64" ? 53 : 24;
    if (o.oracle->agree_bits > bits)
      return Status::invalid(fmt::format("{}.oracle.agree_bits is {}, more than the {} bits of {}'s output", at,
                                         o.oracle->agree_bits, bits, o.workload));
    if (o.oracle->mismatched == 0 && o.oracle->agree_bits >= 0 && o.oracle->agree_bits != bits)
      return Status::invalid(fmt::format("{}.oracle.agree_bits is {}, but no element mismatched (all {} bits agree)", at,
                                         o.oracle->agree_bits, bits));
    // One output element: its bits of agreement are -log2 of its relative error (the one difference over the one
    // oracle magnitude), where neither is clamped to 0 or to the precision.
    if (wl && elems == 1 && o.oracle->mismatched == 1 && o.oracle->agree_bits > 0 && o.oracle->agree_bits < bits &&
        std::isfinite(o.oracle->max_rel_err) && o.oracle->max_rel_err > 0 &&
        std::fabs(o.oracle->agree_bits + std::log2(o.oracle->max_rel_err)) > 1e-6)
      return Status::invalid(fmt::format("{}.oracle.agree_bits is {:g}, but its one element's relative error {:g} gives "
                                         "{:g} bits",
                                         at, o.oracle->agree_bits, o.oracle->max_rel_err,
                                         -std::log2(o.oracle->max_rel_err)));
    // The bound's accumulation length is the workload's (an output without a bound has none).
    const int64_t k = !wl || o.oracle->ratio_hist.empty() ? 0 : wl->bound_k();
    if (wl && o.oracle->bound_k != k)
      return Status::invalid(fmt::format("{}.oracle.bound_k is {}, but {}'s bound {}", at, o.oracle->bound_k,
                                         o.workload, k ? fmt::format("sums {} terms", k) : std::string("is not held")));
  }
  // A cell that ran used its target's libraries, whose versions the machine block records (a target's key holds them).
  if (o.status == ObsStatus::kOk && r.machine.is_object())
    for (const std::string& lib : target_facts(o.target).libraries)
      if (!r.machine.contains("libraries") || !r.machine["libraries"].is_object() || !r.machine["libraries"].contains(lib))
        return Status::invalid(fmt::format("{} ran on {}, but machine.libraries has no {} (the version of a library it "
                                           "used)",
                                           at, o.target, lib));
  // What ran is what its target runs: the backend's description and settings (a cell that did not run may
  // have no description).
  if (o.status == ObsStatus::kOk || !o.describe.empty())
    if (const std::string why = backend_claims_contradiction(t, o.describe, o.details, o.status == ObsStatus::kOk,
                                                             "describe", r.machine);
        !why.empty())
      return Status::invalid(fmt::format("{}.{}", at, why));
  // A cell this run ran took no longer than the run.
  if (!imported && run_seconds) {
    double total = 0;
    for (double x : o.seconds) total += x;
    if (!fits_in_run(total, *run_seconds))
      return Status::invalid(fmt::format("{}.seconds add up to {:.1f} s, longer than the run ({} to {})", at, total,
                                         r.started_at, r.finished_at));
  }
  return Status::ok();
}

// A training run's identity against itself and its design: its key is condition|target|seed|replicate, its
// base target one of the design's, its target that base's variant for its condition.
Status check_run_identity(const TrainingRun& t, const std::string& written_target, const Spec& base,
                          const std::set<std::string>& design, const std::string& at) {
  if (!t.key.empty() && t.key != fmt::format("{}|{}|{}|{}", t.condition, t.target, t.seed, t.replicate) &&
      t.key != fmt::format("{}|{}|{}|{}", t.condition, written_target, t.seed, t.replicate))
    return Status::invalid(fmt::format("{}.key \"{}\" is not its condition|target|seed|replicate ({}|{}|{}|{})", at,
                                       t.key.substr(0, 80), t.condition, t.target, t.seed, t.replicate));
  if (t.base_target.empty()) return Status::ok();
  if (!design.empty() && !design.count(t.base_target))
    return Status::invalid(fmt::format("{}.base_target {} is not a target of the design", at, t.base_target));
  Spec det, nondet;
  if (Status st = training_variants(base, &det, &nondet); !st) return st.prefixed(at + ".base_target: ");
  const Spec& want = t.nondeterministic ? nondet : det;
  if (t.target != want.str())
    return Status::invalid(fmt::format("{}.target {} is not {}'s {}deterministic variant ({})", at, t.target,
                                       t.base_target, t.nondeterministic ? "non" : "", want.str()));
  return Status::ok();
}

}  // namespace

std::string command_contradicts_plan(const std::string& command, const std::set<std::string>& plan_targets,
                                     const std::set<std::string>& plan_workloads, const nlohmann::json& plan) {
  // A probe plan is made by probe, by qualify and fleet (their probe step: the quick suite, the full one at level 3,
  // the default time limit), or by import (whose plan is the outputs it imported).
  const std::string sub = command_subcommand(command);
  if (sub.empty() || sub == "import") return "";
  if (sub != "probe" && sub != "qualify" && sub != "fleet")
    return fmt::format("a {} command makes no probe run (probe, qualify and fleet do)", shown_safely(sub.substr(0, 40)));
  std::map<std::string, std::string> asked;  // option -> its value, as the command gave it
  if (sub == "probe") {
    asked = *command_options(command, "probe", {"--targets", "--workloads", "--suite", "--repeats", "--timeout"});
  } else {
    asked = *command_options(command, sub, {"--level", "--targets", "--workloads", "--repeats"});
    asked["--suite"] = asked.count("--level") && asked["--level"] == "3" ? "full" : "quick";
    asked.erase("--level");
  }
  // --gpu-only runs the suite's GPU targets: never beside --targets (the two exclude each other), never a host
  // target.
  if (const std::vector<std::string> words = command_words(command);
      std::find(words.begin(), words.end(), "--gpu-only") != words.end()) {
    if (asked.count("--targets")) return "the command gives --gpu-only beside --targets, which exclude each other";
    for (const std::string& t : plan_targets)
      if (target_facts(t).device_kind == "host")
        return fmt::format("the command asks for --gpu-only, but the plan holds {}, which runs on the host", t);
  }
  auto specs = [](const std::string& csv, bool target, std::set<std::string>* out) {
    for (size_t from = 0; from <= csv.size();) {
      const size_t to = std::min(csv.find(',', from), csv.size());
      Spec s;
      if (!(target ? parse_target(csv.substr(from, to - from), &s) : parse_workload(csv.substr(from, to - from), &s)).is_ok())
        return false;
      for (auto& e : target ? expand_all(s) : std::vector<Spec>{s}) out->insert(e.str());
      from = to + 1;
    }
    return true;
  };
  for (const auto& [opt, list] : {std::pair{"--targets", &plan_targets}, std::pair{"--workloads", &plan_workloads}})
    if (auto it = asked.find(opt); it != asked.end()) {
      std::set<std::string> want;
      if (specs(it->second, std::string(opt) == "--targets", &want) && want != *list)
        return fmt::format("the command asks for {} {}, but the plan holds other {}", opt,
                           shown_safely(it->second.substr(0, 80)), std::string(opt).substr(2));
    }
  if ((asked.count("--targets") || asked.count("--workloads")) && plan.contains("suite") &&
      plan.value("custom", false) != true)
    return "the command replaces the suite's targets or workloads, but the plan says it ran the suite as defined (no "
           "custom)";
  const auto suite = asked.find("--suite");
  const std::string want_suite = suite != asked.end() ? suite->second : kDefaultProbeSuite;
  if (plan.contains("suite") && plan["suite"].is_string() && plan["suite"].get<std::string>() != want_suite)
    return fmt::format("the command asks for {}, but the plan's suite is {}",
                       sub != "probe"         ? fmt::format("the {} suite ({} at that level)", want_suite, sub)
                       : suite != asked.end() ? "--suite " + shown_safely(want_suite.substr(0, 40))
                                            : fmt::format("the default suite ({}: it names no --suite)", want_suite),
                       shown_safely(plan["suite"].get<std::string>().substr(0, 40)));
  if (auto it = asked.find("--repeats"); it != asked.end() && plan.contains("repeats") &&
                                         plan["repeats"].is_number_integer() && it->second != "0" &&
                                         it->second != std::to_string(plan["repeats"].get<int64_t>()))
    return fmt::format("the command asks for --repeats {}, but the plan repeats each cell {} times",
                       shown_safely(it->second.substr(0, 20)), plan["repeats"].get<int64_t>());
  if (plan.contains("timeout_s") && plan["timeout_s"].is_number()) {
    const auto it = asked.find("--timeout");
    double t = kDefaultProbeTimeoutS;
    char* end = nullptr;
    if (it != asked.end()) t = std::strtod(it->second.c_str(), &end);
    if ((it == asked.end() || (end && *end == '\0' && t > 0)) && t != plan["timeout_s"].get<double>())
      return fmt::format("the command asks for {}, but the plan's timeout is {:g} s",
                         it != asked.end() ? "--timeout " + shown_safely(it->second.substr(0, 20))
                                           : fmt::format("the default time limit ({:g} s: it names no --timeout)", t),
                         plan["timeout_s"].get<double>());
  }
  return "";
}

Status canonicalize_specs(Results* r, const std::string& path) {
  std::set<std::string> plan_targets, plan_workloads, design_targets;
  if (r->plan.contains("targets"))
    DETAUDIT_RETURN_IF_ERROR(canonical_list(&r->plan["targets"], true, path + ": plan.targets", &plan_targets));
  if (r->plan.contains("workloads"))
    DETAUDIT_RETURN_IF_ERROR(canonical_list(&r->plan["workloads"], false, path + ": plan.workloads", &plan_workloads));
  if (r->plan.contains("design") && r->plan["design"].contains("targets"))
    DETAUDIT_RETURN_IF_ERROR(
        canonical_list(&r->plan["design"]["targets"], true, path + ": plan.design.targets", &design_targets));
  // The command that made the run asked for what its plan holds.
  if (r->plan.contains("targets") && r->plan.contains("workloads"))
    if (const std::string why = command_contradicts_plan(r->command, plan_targets, plan_workloads, r->plan); !why.empty())
      return Status::invalid(fmt::format("{}: command: {}", path, why));
  // An oracle that failed is a workload's: one this version parses, of the plan when it names its workloads.
  std::map<std::string, std::string> failures;
  for (auto& [workload, why] : r->oracle_failures) {
    std::string w = workload;
    DETAUDIT_RETURN_IF_ERROR(canonical(&w, false, fmt::format("{}: oracle_failures.{}", path, shown_safely(workload.substr(0, 80)))));
    if (r->plan.contains("workloads") && !plan_workloads.count(w))
      return Status::invalid(fmt::format("{}: oracle_failures.{}: not a workload of the plan", path, w));
    failures[w] = why;
  }
  r->oracle_failures = std::move(failures);
  std::optional<int64_t> run_seconds;
  if (const auto started = iso8601_seconds(r->started_at), finished = iso8601_seconds(r->finished_at);
      started && finished)
    run_seconds = *finished - *started;
  // A workload of one output element: every cell's one mismatch is measured against the same oracle value and the
  // same bound, so max_rel_err / err_ratio (the bound over the oracle's magnitude) is one number for all of them
  // (an err_ratio edited below the bound stands out).
  std::map<std::string, std::pair<double, size_t>> bound_over_ref;  // workload -> (the quotient, its cell)
  // (workload, product) -> (the rows fingerprint of an invariant cell, the cell)
  std::map<std::pair<std::string, std::string>, std::pair<std::string, size_t>> invariant_rows;
  for (size_t i = 0; i < r->observations.size(); ++i) {
    Observation& o = r->observations[i];
    const std::string at = fmt::format("{}: observations[{}]", path, i);
    Spec t, w;
    DETAUDIT_RETURN_IF_ERROR(canonical(&o.target, true, at + ".target", &t));
    DETAUDIT_RETURN_IF_ERROR(canonical(&o.workload, false, at + ".workload", &w));
    o.target_spec = t, o.workload_spec = w;
    DETAUDIT_RETURN_IF_ERROR(check_cell_against_run(o, w, t, *r, plan_targets, plan_workloads, run_seconds, at));
    // A skip the run's own machine contradicts (the oracle's, or a cpu target's of a workload it runs on a CPU that
    // has what the target needs).
    if (o.status == ObsStatus::kSkipped)
      if (const std::string why = skip_contradiction(t, w, r->machine); !why.empty())
        return Status::invalid(fmt::format("{}: status skipped ('{}'), but {}", at, shown_safely(o.reason.substr(0, 60)),
                                           why));
    // Batch invariance's rows computed alone, where every row agreed with the product, are the product's own rows:
    // all m of them, in order, are the product itself, and invariant cells of one workload with one product have one
    // rows fingerprint.
    if (o.batch && !o.batch->rows_fingerprint.empty() && o.batch->rows_differing == 0 && o.status == ObsStatus::kOk &&
        o.distinct == 1 && !o.fingerprints.empty()) {
      if (w.name == "batchinv" && w.get_int("rows", 1) == w.get_int("m", 1) && o.batch->rows_fingerprint != o.fingerprints[0])
        return Status::invalid(fmt::format("{}.batch_invariance.rows_fingerprint is {}, but every one of the {} rows "
                                           "agreed with the product, whose fingerprint is {}: the rows are the product",
                                           at, o.batch->rows_fingerprint, o.batch->rows_checked, o.fingerprints[0]));
      const auto [it, fresh] = invariant_rows.try_emplace({o.workload, o.fingerprints[0]}, o.batch->rows_fingerprint, i);
      if (!fresh && it->second.first != o.batch->rows_fingerprint)
        return Status::invalid(fmt::format("{}.batch_invariance.rows_fingerprint is {}, but observations[{}] of the same "
                                           "product has {}: rows that agree with one product are its rows",
                                           at, o.batch->rows_fingerprint, it->second.second, it->second.first));
    }
    if (!o.oracle || o.oracle->mismatched != 1 || !(o.oracle->err_ratio > 0) || !std::isfinite(o.oracle->err_ratio) ||
        !(o.oracle->max_rel_err > 0) || !std::isfinite(o.oracle->max_rel_err))
      continue;
    if (const auto wl = Workload::create(w); !wl || wl->output_elems() != 1) continue;
    const double q = o.oracle->max_rel_err / o.oracle->err_ratio;
    const auto [it, fresh] = bound_over_ref.try_emplace(o.workload, q, i);
    if (!fresh && std::fabs(q - it->second.first) > 1e-9 * std::max(q, it->second.first))
      return Status::invalid(fmt::format(
          "{}.oracle: max_rel_err / err_ratio is {:.6g}, but observations[{}]'s is {:.6g}: one output element is "
          "measured against one oracle value and one bound, so the quotient is the same for every cell of {}",
          at, q, it->second.second, it->second.first, o.workload));
  }
  // One cell, one observation: a second would let the file say two things of it (spelled alike once
  // canonical).
  std::map<std::pair<std::string, std::string>, size_t> cells;
  for (size_t i = 0; i < r->observations.size(); ++i) {
    const Observation& o = r->observations[i];
    auto [it, fresh] = cells.try_emplace({o.workload, o.target}, i);
    if (!fresh)
      return Status::invalid(fmt::format("{}: observations[{}] is the cell {} on {} again (observations[{}])", path, i,
                                         o.workload, o.target, it->second));
  }
  // The oracle's output is the oracle backend's (cpu-ref's): where its cell gave the oracle's bits, a cell of one
  // output has those bits exactly when its oracle distance counts no mismatched element.
  std::map<std::string, std::string> oracle_bits;  // workload -> the oracle backend's one output
  for (const Observation& o : r->observations)
    if (Spec t; o.status == ObsStatus::kOk && o.distinct == 1 && !o.fingerprints.empty() && o.oracle &&
                o.oracle->mismatched == 0 && parse_target(o.target, &t).is_ok() && find_backend(t.name) &&
                find_backend(t.name)->oracle)
      oracle_bits[o.workload] = o.fingerprints[0];
  for (size_t i = 0; i < r->observations.size(); ++i) {
    const Observation& o = r->observations[i];
    const auto it = oracle_bits.find(o.workload);
    if (it == oracle_bits.end() || o.status != ObsStatus::kOk || o.distinct != 1 || o.fingerprints.empty() || !o.oracle)
      continue;
    if ((o.fingerprints[0] == it->second) != (o.oracle->mismatched == 0))
      return Status::invalid(fmt::format(
          "{}: observations[{}].oracle.mismatched is {}, but its output {} the oracle's bits (the oracle backend's output "
          "of {})",
          path, i, o.oracle->mismatched, o.fingerprints[0] == it->second ? "is" : "is not", o.workload));
  }
  // The same outputs of a product, whichever target and workload gave them, measured against its one oracle have one
  // distance (a batchinv cell computes the matmul of its m, n, k, dist and seed: the same inputs, the same oracle).
  std::map<std::pair<std::string, std::vector<std::string>>, size_t> first_gave;  // (product, outputs) -> its cell
  for (size_t i = 0; i < r->observations.size(); ++i) {
    const Observation& o = r->observations[i];
    if (o.status != ObsStatus::kOk || !o.oracle || o.fingerprints.empty()) continue;
    const auto [it, fresh] = first_gave.try_emplace({product_of(o.workload), fingerprint_set(o)}, i);
    if (fresh) continue;
    const Observation& first = r->observations[it->second];
    if (const std::string why = distance_difference(*o.oracle, *first.oracle, fingerprint_set(o).size() == 1); !why.empty())
      return Status::invalid(fmt::format("{}: observations[{}].oracle: {} in observations[{}], which gave the same outputs "
                                         "of {}{}: the same bits against one oracle have one distance",
                                         path, i, why, it->second, first.workload,
                                         first.workload == o.workload ? "" : " (the same product as " + o.workload + ")"));
  }
  // A probe run that finished holds a cell of every target and workload of its plan that applies to each other
  // (each ran, crashed, timed out or was skipped with a reason; cuBLAS runs no convolution): a cell left out
  // would let a report show a part of the run as the whole.
  if (!r->finished_at.empty() && r->plan.value("suite", "") != "import")
    for (const std::string& t : plan_targets)
      for (const std::string& w : plan_workloads)
        if (Spec ts, ws; !cells.count({w, t}) && parse_target(t, &ts).is_ok() && parse_workload(w, &ws).is_ok() &&
                         applicable(ts, ws))
          return Status::invalid(fmt::format("{}: the run finished, but it holds no cell of {} on {}, which its plan "
                                             "runs",
                                             path, w, t));
  // A training design that finished holds every run it plans (each ran, failed or was skipped with a reason): a run
  // left out would let a check or analysis judge part of the design as the whole.
  if (!r->finished_at.empty() && r->plan.contains("runs") && r->plan["runs"].is_number_unsigned() &&
      r->training.size() < r->plan["runs"].get<uint64_t>())
    return Status::invalid(fmt::format("{}: the run finished, but it holds {} of the {} training runs its plan runs",
                                       path, r->training.size(), r->plan["runs"].get<uint64_t>()));
  std::map<std::tuple<int, std::string, std::string, std::string, std::string, uint64_t, int>, size_t> runs;
  for (size_t i = 0; i < r->training.size(); ++i) {
    const TrainingRun& t = r->training[i];  // a merged analysis holds the same run of each source
    auto [it, fresh] = runs.try_emplace({t.source, t.model, t.design, t.condition, t.target, t.seed, t.replicate}, i);
    if (!fresh)
      return Status::invalid(fmt::format("{}: training[{}] is the run ({}) {} seed {} rep {} again (training[{}])", path,
                                         i, t.condition, t.target, t.seed, t.replicate, it->second));
  }
  for (size_t i = 0; i < r->training.size(); ++i) {
    TrainingRun& t = r->training[i];
    const std::string at = fmt::format("{}: training[{}]", path, i);
    const std::string written = t.target;
    DETAUDIT_RETURN_IF_ERROR(canonical(&t.target, true, at + ".target"));
    Spec base;
    if (!t.base_target.empty()) DETAUDIT_RETURN_IF_ERROR(canonical(&t.base_target, true, at + ".base_target", &base));
    DETAUDIT_RETURN_IF_ERROR(check_run_identity(t, written, base, design_targets, at));
  }
  // A design's runs ran one after another within the run; a merged analysis's ran elsewhere.
  if (run_seconds && !r->plan.contains("sources")) {
    double total = 0;
    for (size_t i = 0; i < r->training.size(); ++i) {
      total += std::isfinite(r->training[i].seconds) ? r->training[i].seconds : 0;
      if (!fits_in_run(total, *run_seconds))
        return Status::invalid(fmt::format("{}: training[{}].seconds: the runs up to it took {:.1f} s, longer than the "
                                           "run ({} to {}), in which they ran one after another",
                                           path, i, total, r->started_at, r->finished_at));
    }
  }
  return Status::ok();
}

Status save_checked_results(const std::string& path, const Results& r) {
  const std::string text = to_json(r).dump(1) + "\n";
  Results back;
  if (Status st = parse_results(text, path, &back); !st || !(st = canonicalize_specs(&back, path)))
    return Status::invalid(fmt::format("not written (no command would read these results): {}", st.message()));
  return write_file_atomic(path, text, Own::kResults);
}

Status load_checked_results(const std::string& path, Results* out) {
  Results r;
  DETAUDIT_RETURN_IF_ERROR(load_results(path, &r));
  DETAUDIT_RETURN_IF_ERROR(canonicalize_specs(&r, path));
  *out = std::move(r);
  return Status::ok();
}

}  // namespace detaudit
