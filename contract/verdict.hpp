// Verdicts: what a cell (one target on one workload) is judged to be against its target's promise. The
// gates judge (gates/verdict.hpp), results.json stores them, the reports render them.
//   PASS      observed meets the promise (or nothing was promised and nothing is wrong)
//   FAIL      a broken promise
//   EXPECTED  promised nondeterminism observed, or an expected crash or error (an unmet requirement)
//   WARN      claimed nondeterministic but no variation seen; variation where nothing was promised;
//             no oracle to compare with
//   SKIP      skipped, with the reason
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace detaudit {

enum class Verdict { kPass, kFail, kExpected, kWarn, kSkip };

const char* to_string(Verdict v);  // "PASS", "FAIL", "EXPECTED", "WARN", "SKIP"

// What a finding asks of whoever runs the machines (DCGM's failure codes do the same), in the order of urgency:
// ISOLATE other bits on a deterministic cell, a broken promise, a crash: take the node or device out of service;
// CONFIGURE key or configuration drift (another library, core type or ISA cap than its peers or its reference);
// RETEST it could not run, was lost or interrupted, or nothing of it was judged: run it again;
// MONITOR slow, timing outliers: watch it.
enum class Action { kIsolate, kConfigure, kRetest, kMonitor };
const char* to_string(Action a);

// What a judging command decided, as the judges (gates/) return it. The CLI alone turns it into the process's exit
// code; the documents that publish that code (check's object, qualify.json, fleet.json, a fleet rank's node.json)
// write the same number through exit_code_of: PASS 0, FAIL 1, nothing (or not all that was required) judged 2.
enum class Decision { kPass, kFail, kNotJudged };
int exit_code_of(Decision d);
const char* to_string(Decision d);  // "PASS", "FAIL", "ERROR" (the verdict word of a document)

// Exactly one of the five names; false for anything else (an empty string included).
bool parse_verdict(const std::string& s, Verdict* out);

// The one order of verdicts, worst highest: FAIL 4 > WARN 3 > EXPECTED 2 > PASS 1 > SKIP 0. A cell's
// verdict is its worst finding's, a target's its worst cell's (SKIP only when nothing ran).
int severity(Verdict v);

// A cell's verdict as results.json and the history spell it: the name, or "" when it is not judged yet.
inline std::string verdict_text(const std::optional<Verdict>& v) { return v ? to_string(*v) : ""; }

// How many of each verdict, as every document spells them (the CLI's objects, check's, qualify.json):
// {"pass", "fail", "expected", "warn", "skip"}, all five, lower case, zeros included.
struct VerdictTally {
  int pass = 0, fail = 0, expected = 0, warn = 0, skip = 0;
  void add(Verdict v, int n = 1);
  nlohmann::json to_json() const;
};

// All five, in the order the reports list them.
inline constexpr Verdict kAllVerdicts[] = {Verdict::kPass, Verdict::kFail, Verdict::kExpected, Verdict::kWarn,
                                           Verdict::kSkip};

}  // namespace detaudit
