// Verdicts: each observation judged against its target's promise (probes/registry.hpp).
//   PASS      observed meets the promise (or nothing was promised and nothing is wrong)
//   FAIL      a broken promise: a deterministic target gave k > 1 outputs, an equality class split,
//             an unexpected crash or timeout, a claimed batch invariance broken, oracle error beyond
//             the error bound (err_ratio > the target's budget)
//   EXPECTED  promised nondeterminism observed, or an expected crash/skip (an unmet requirement)
//   WARN      claimed nondeterministic but no variation seen; a worker error; no oracle to compare
//   SKIP      skipped, with the reason
#pragma once
#include <string>

#include "report/results.hpp"

namespace detaudit {

enum class Verdict { kPass, kFail, kExpected, kWarn, kSkip };
const char* to_string(Verdict v);  // "PASS", "FAIL", "EXPECTED", "WARN", "SKIP"
bool parse_verdict(const std::string& s, Verdict* out);

// Sets verdict and verdict_reason of every observation of *r (r->machine is the machine that ran them).
void judge(Results* r);

struct VerdictCounts {
  int pass = 0, fail = 0, expected = 0, warn = 0, skip = 0, unjudged = 0;
};
VerdictCounts count_verdicts(const Results& r);

}  // namespace detaudit
