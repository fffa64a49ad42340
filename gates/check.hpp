// `detaudit check DIR --baseline FILE`: a results directory judged against a baseline (gates/baseline.hpp).
// Observations without a verdict are judged first (gates/verdict.hpp). Per baseline entry and the
// matching cell of DIR:
//   * Key matches (the key of DIR's machine for that entry equals the baseline's: same CPU model and ISA
//     or GPU name, compute capability and SM count, same library versions, same tool version): bitwise.
//     A deterministic cell (1 output in the baseline, and no promised nondeterminism) whose outputs
//     differ FAILs, naming workload, target, old and new fingerprint and the kernels that ran (GPU). A
//     nondeterministic cell's outputs outside the baseline's set FAIL when the target promises
//     determinism, and are a WARN ("new outputs of a nondeterministic target") otherwise. Two
//     exceptions make other bits a WARN, not a FAIL:
//       - another algorithm ran: the baseline's "algo" and the observation's details "algo_name"
//         differ, or the target lets cuDNN choose (conv2d, the pass's *_algo "auto": cuDNN's Find times
//         the algorithms, so another process may pick another one) and either side lacks the name
//         (WARN "another algorithm chosen (X -> Y)");
//       - the target promises nothing run to run (Promise::RunToRun::kNone: cuBLAS atomics=allowed,
//         shared workspaces, oneDNN): WARN "nothing promised; new bits".
//   * Key differs: different bits are no failure (said, as PASS). The determinism verdict must hold: the
//     cell's verdict is not FAIL, and a cell deterministic in the baseline that is promised deterministic
//     still gives 1 output. The error ratio must stay within the budget
//         budget = max(baseline err_ratio, promise budget)
//     where the promise budget is what the verdict allows (1 for full-precision inputs; more for inputs
//     rounded before the op, TF32: oracle_budget, gates/verdict.hpp). A correct kernel stays below the
//     promise budget whatever its summation order, so only an error beyond both what the baseline
//     showed and what correct summation allows fails. When either side has no err_ratio, or the
//     target's promise exempts its algorithm from the summation bound (Promise::error_bound_exempt:
//     cuDNN's FFT and Winograd convolutions), that is said (SKIP, with the reason) and not judged.
//   * Whatever the key, a cell whose verdict is FAIL fails the check, except where the key matches and
//     the baseline holds the same FAIL with the same outputs (a known failure: WARN).
//   * A status change (ok -> crashed, skipped -> ok, ...) not already a FAIL is a WARN.
//   * A baseline entry missing from DIR: WARN "not run", or FAIL when DIR's plan includes the cell (the
//     run is unfinished or lost it). A cell of DIR without a baseline entry: "new, no baseline" (SKIP;
//     FAIL when its own verdict is FAIL).
//   * Training, per cell (model, design, condition, target) of DIR and the baseline's cell:
//       - per run: a run that crashed, timed out, failed or diverged (NaN loss) FAILs; a skipped run is
//         a WARN;
//       - key matches and nondeterminism is off ((b), (d), (e): the condition promises the same bits):
//         per run, bitwise, the final loss and the final weights' fingerprint equal the baseline run's
//         of the same seed and replicate (under fixed initial weights, any run of the seed);
//       - key matches and nondeterminism is on ((a), (c)): ONE test per cell, seed by seed (runs that
//         share a seed are not independent): the mean over seeds of (new mean - baseline mean) against
//         a permutation of the labels within each seed (analysis/shift.hpp), two-sided, its
//         arrangements compared exactly. Distribution-free: final losses of a nondeterministic target
//         are discrete and heavy-tailed (rare jumps), which a normal interval misjudges. These cells
//         form one family: the m cells whose smallest attainable p-values (floors) are all at most
//         0.05/m are judged, by Holm's step-down procedure at family-wise 0.05; a cell whose floor is
//         above the level it would be tested at is NOT JUDGED (SKIP), with the seeds or runs that would
//         make it judgeable. Every finding states the shift the check detects with power 0.8 at
//         Holm's first level 0.05/m (the permutation test simulated for small designs, else the
//         noncentral t on the within-seed df), or that it detects nothing;
//       - key differs: an equivalence test, not a significance test (which a small design could never
//         fail): the per-seed differences of mean final loss (new - baseline) and the (1 - 2α) interval
//         of their mean against ±margin, margin = margin_rel x the baseline mean (default
//         kDefaultMargin): inside, PASS (equivalent); wholly outside, FAIL; across a bound, WARN
//         (inconclusive, with the seeds that would decide it); fewer than 2 seeds on both sides: not
//         judged. These tests are one family, Bonferroni at 0.05.
//       - a cell none of whose runs finished (all skipped) is not judged.
//     A training cell of the baseline that was not judged, or not run, is listed in
//     CheckReport::training_not_judged, and the check exits 2 unless it allows that (--allow-unjudged).
// Exit 0: nothing FAILed (WARNs allowed) and every training cell judged; 1: a failure (each listed); 2:
// could not run (a missing, truncated or wrong-schema baseline or results file: one line naming the
// file), or a training cell the baseline holds not judged (without --allow-unjudged).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/check_report.hpp"
#include "contract/results.hpp"
#include "gates/baseline.hpp"
#include "gates/verdict.hpp"

namespace detaudit {

// Across keys, the largest relative difference of mean final loss still called equivalent.
inline constexpr double kDefaultMargin = 0.02;

// The core, for `check` and `qualify`: every finding of `r` (judged on a copy first if it carries no
// verdicts) against `b`. `dir` and `baseline_path` only label the report.
CheckReport check_against_baseline(const Baseline& b, const Results& r, const std::string& dir,
                                   const std::string& baseline_path, double margin_rel = kDefaultMargin);

struct CheckOptions {
  std::string dir;       // results directory (DIR/results.json)
  std::string baseline;  // the baseline's file, as named (in messages)
  double margin = kDefaultMargin;  // training cells across keys: the equivalence margin, relative
  bool allow_unjudged = false;     // a training cell not judged does not make the check exit 2
};
// Loads DIR's results and checks them against the baseline (the CLI read it: store/baseline_file.hpp) into *report
// (its decision(): PASS all pass, FAIL any failure). A failure when the results could not be loaded or nothing could
// be compared (one line naming the file; *report untouched).
// *checked (optional): DIR's results as checked (judged when they carried no verdicts), for the history.
Status run_check(const CheckOptions& opt, const Baseline& b, CheckReport* report, Results* checked = nullptr);

}  // namespace detaudit
