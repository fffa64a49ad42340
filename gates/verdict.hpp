// Judging: each observation against its target's promise (probes/registry.hpp); the verdicts themselves
// (PASS, FAIL, EXPECTED, WARN, SKIP and their one order) are contract/verdict.hpp.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "probes/registry.hpp"
#include "contract/cells.hpp"
#include "contract/results.hpp"
#include "contract/verdict.hpp"

namespace detaudit {

// Sets verdict and verdict_reason of every observation of *r (r->machine is the machine that ran them).
void judge(Results* r);

// The oracle check's budget for err_ratio: 1 for full-precision inputs; with inputs rounded to a
// unit roundoff u_in before the op (TF32), (γ_{k+1}(u) + 2·u_in + u_in²) / γ_{k+1}(u), the bound of a
// k-term dot product whose products carry the inputs' extra relative error (1 + u_in)² - 1.
double oracle_budget(int64_t bound_k, double unit_roundoff, double input_unit_roundoff);
// The budget of one cell: u from its workload's dtype (f64: 2^-53, otherwise 2^-24), k its oracle's
// bound_k, u_in its promise's input_unit_roundoff.
double oracle_budget(const Observation& o, const Promise& p);

// Why a CPU target's cell that ran cannot carry verdict `v` (with `verdict_reason`) from what a record of it keeps
// (its distinct outputs, its error ratio against the bound, none: not compared), or "" where judge() gives that
// verdict such a cell, or the record cannot tell (a GPU target, an error ratio that is no number). A verdict that
// only a finding the record does not keep gives (a warm-up run that gave other bits, an equality class split) must
// name that finding in its reason. History rows and baseline entries are held to it.
std::string cpu_verdict_problem(const Spec& t, const Spec& w, Verdict v, const std::string& verdict_reason, int distinct,
                                std::optional<double> err_ratio);

// Whether a batchinv cell's record, by its verdict, shows every row computed alone as it was in the product: it ran to
// one output (`one_output`) on a host target that promises batch invariance (a target that promises it and differs
// FAILs), and passed. Baseline entries and history rows are held to it; results keep rows_differing itself.
bool passed_batch_invariance(const Spec& t, const Spec& w, bool one_output, bool passed);

// Whether every observation carries a verdict (results of older versions, or of a run in progress, do not).
bool is_judged(const Results& r);
// A copy of `in` judged by this detaudit, kept in *storage. A verdict stored in a file is a record, never
// evidence: a cell whose outputs differ cannot be a PASS because its file says so, so whatever decides from
// verdicts (check, baseline save, report, a fleet's nodes) judges the observations itself.
const Results* judged_view(const Results& in, Results* storage);

// judge_training_run(s), RunVerdict and broke_promise: contract/training_run.hpp (the reports read them too).

struct VerdictCounts : VerdictTally {
  int unjudged = 0;
};
VerdictCounts count_verdicts(const Results& r);

}  // namespace detaudit
