// Verdicts: each observation judged against its target's promise (probes/registry.hpp).
//   PASS      observed meets the promise (or nothing was promised and nothing is wrong)
//   FAIL      a broken promise: a deterministic target gave k > 1 outputs, an equality class split,
//             an unexpected crash, timeout or worker error, a claimed batch invariance broken, oracle
//             error beyond the error bound (err_ratio > the target's budget)
//   EXPECTED  promised nondeterminism observed, or an expected crash or error (an unmet requirement)
//   WARN      claimed nondeterministic but no variation seen; variation where nothing was promised;
//             no oracle to compare with
//   SKIP      skipped, with the reason
#pragma once
#include <string>
#include <vector>

#include "probes/registry.hpp"
#include "report/results.hpp"

namespace detaudit {

enum class Verdict { kPass, kFail, kExpected, kWarn, kSkip };
const char* to_string(Verdict v);  // "PASS", "FAIL", "EXPECTED", "WARN", "SKIP"
bool parse_verdict(const std::string& s, Verdict* out);

// Sets verdict and verdict_reason of every observation of *r (r->machine is the machine that ran them).
void judge(Results* r);

// The oracle check's budget for err_ratio: 1 for full-precision inputs; with inputs rounded to a
// unit roundoff u_in before the op (TF32), (γ_{k+1}(u) + 2·u_in + u_in²) / γ_{k+1}(u), the bound of a
// k-term dot product whose products carry the inputs' extra relative error (1 + u_in)² - 1.
double oracle_budget(int64_t bound_k, double unit_roundoff, double input_unit_roundoff);
// The budget of one cell: u from its workload's dtype (f64: 2^-53, otherwise 2^-24), k its oracle's
// bound_k, u_in its promise's input_unit_roundoff.
double oracle_budget(const Observation& o, const Promise& p);

// The distinct fingerprints of an observation, sorted: what "the same bits" compares.
std::vector<std::string> fingerprint_set(const Observation& o);
// Fingerprints shortened to 8 hex digits, comma-separated, for one line of text.
std::string short_fingerprints(const std::vector<std::string>& fps);

// Whether every observation carries a verdict (results of older versions, or of a run in progress, do not).
bool is_judged(const Results& r);
// `in` when it is judged, else a judged copy of it kept in *storage.
const Results* judged_view(const Results& in, Results* storage);

struct VerdictCounts {
  int pass = 0, fail = 0, expected = 0, warn = 0, skip = 0, unjudged = 0;
};
VerdictCounts count_verdicts(const Results& r);

}  // namespace detaudit
