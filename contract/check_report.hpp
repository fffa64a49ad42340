// What `check` found: one finding per cell and training cell of a results directory against a baseline
// (gates/check.hpp judges, report/check_report.hpp renders). Its JSON is kCheckSchema.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/verdict.hpp"

namespace detaudit {

// Version 2: "counts" in the one shape of every document (VerdictTally: lower case, all five).
inline constexpr const char* kCheckSchema = "detaudit-check/2";

enum class FindingKind {
  kSame,                 // key matches, outputs as in the baseline (or the same non-ok status)
  kBitsChanged,          // key matches, a deterministic cell's output changed
  kNewOutputs,           // key matches, outputs outside a nondeterministic cell's set
  kAlgorithmChanged,     // key matches, other bits from another algorithm (cuDNN's choice): WARN
  kOtherKey,             // key differs, the verdict and the error budget hold (bits may differ)
  kDeterminism,          // key differs, a deterministic, promised-deterministic cell gave k > 1 outputs
  kErrRatio,             // key differs, err_ratio beyond the budget, or not judged (unknown)
  kVerdict,              // the cell's own verdict is FAIL
  kStatusChanged,        // ok -> crashed, skipped -> ok, ...
  kNotRun,               // in the baseline, not in DIR
  kNoBaseline,           // in DIR, not in the baseline ("new, no baseline")
  kTrainingShift,        // same key, nondeterminism on: the seed-by-seed permutation test of the shift
  kTrainingEquivalence,  // another key: per-seed differences against the margin
  kTrainingBits,         // nondeterminism off on the same key: final loss and weights bitwise
  kTrainingNotJudged,    // a floor above the level, no seed on both sides: not judged (SKIP, says why)
  kTrainingRun,          // a run that crashed, timed out, failed, diverged or was skipped
  kTrainingNotRun,       // a baseline training cell without runs in DIR
  kTrainingNoBaseline,   // a training cell of DIR without a baseline cell
};
const char* to_string(FindingKind k);  // "same", "bits_changed", ... (the JSON "kind")
// What a finding that did not pass asks (Action): ISOLATE other bits or outputs on the same machine key, a promise
// broken, a cell's own FAIL, a crash; CONFIGURE a difference beyond the budget on another key (another library,
// driver or CPU), another algorithm; RETEST a cell not run or not judged, a training run that did not finish.
Action check_action(FindingKind k);

struct CheckFinding {
  FindingKind kind = FindingKind::kSame;
  Verdict verdict = Verdict::kPass;  // PASS, FAIL, WARN, or SKIP (not judged)
  std::string workload, target;      // training: workload "train <model>/<design> (<condition>)"
  std::string old_value, new_value;  // fingerprints, statuses, err_ratios, final losses
  std::string message;               // one line
  std::vector<std::string> old_kernels, new_kernels;  // GPU cells whose bits changed
  bool key_matches = false;
};

struct CheckReport {
  std::string dir, baseline_path;                // as given
  std::string baseline_created_at, baseline_tool, baseline_source;
  std::vector<CheckFinding> findings;            // in baseline order, then DIR's new cells, then training
  int cells_compared = 0, cells_same_key = 0, cells_other_key = 0, cells_other_key_bits_changed = 0;
  int runs_compared = 0;
  int cells_ran = 0;  // compared cells that ran here (status ok): the ones anything could be judged of
  // Training cells the baseline holds that this check did not judge: "<cell> on <target>: <why>". A
  // check that leaves one unjudged cannot pass (exit 2) unless allow_unjudged (--allow-unjudged).
  std::vector<std::string> training_not_judged;
  bool allow_unjudged = false;
  int count(Verdict v) const;
  // FAIL any failure; else not judged where a training cell was not judged (unless allowed); else PASS.
  Decision decision() const {
    if (count(Verdict::kFail)) return Decision::kFail;
    return !training_not_judged.empty() && !allow_unjudged ? Decision::kNotJudged : Decision::kPass;
  }
};

nlohmann::json to_json(const CheckReport& rep);

}  // namespace detaudit
