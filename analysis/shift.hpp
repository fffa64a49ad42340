// Has a training cell's final loss moved? The two tests `check` judges nondeterministic and cross-machine
// training cells with. Both work seed by seed: runs that share a seed (initial weights) are not
// independent draws, so a seed's new runs are compared with that seed's baseline runs, never with the
// spread of the other seeds.
//
// shift_test (same machine key, a condition with nondeterminism on): the statistic is the mean over
// seeds of (mean of the seed's new runs - mean of its baseline runs); its p-value is that of a
// permutation of the baseline/new labels within each seed (exact when the arrangements are at most
// kExactArrangements, else kDraws seeded draws), two-sided. It assumes only that, unchanged, a seed's
// runs are exchangeable: heavy tails and ties (final losses that jump between a few values) leave its
// false-failure rate at or below alpha. It reports the smallest p-value the design can reach (a design
// that cannot reach alpha has no power) and the shift it detects with power 0.8, from the pooled
// within-seed variance (df = sum over seeds and sides of n - 1) by the normal approximation.
//
// equivalence_test (another machine key): per seed, the difference of the means (new - baseline);
// two one-sided t-tests of the mean difference against +-margin at alpha each, i.e. the (1 - 2 alpha)
// interval of the mean difference: inside (-margin, margin) shows the cells equivalent, wholly outside
// shows them different, across a bound is inconclusive (the number of seeds that would settle it is
// given). Not a significance test, which a small design could never fail.
#pragma once
#include <cstdint>
#include <vector>

namespace detaudit {

// One seed's final losses: its baseline runs and its new runs.
struct SeedRuns {
  std::vector<double> base, now;
};

inline constexpr double kPowerTarget = 0.8;
inline constexpr uint64_t kExactArrangements = 200000, kDraws = 9999;

struct ShiftTest {
  int seeds = 0, base_runs = 0, new_runs = 0;  // seeds with runs on both sides, and their runs
  double shift = 0;                            // mean over seeds of (mean new - mean baseline)
  double within_sd = 0;                        // pooled within-seed sd of both sides (run to run)
  int within_df = 0;                           // its degrees of freedom
  double p = 1;                                // two-sided permutation p-value
  double min_p = 1;                            // the smallest p-value this design can reach
  bool exact = true;                           // p by enumeration (else by kDraws draws)
  double detectable = 0;  // the shift detected with power kPowerTarget at alpha (0: no run-to-run spread)
};
// alpha: the level the detectable shift is computed for. seed: the draws, when there are too many
// arrangements to enumerate (the same seed, the same p).
ShiftTest shift_test(const std::vector<SeedRuns>& seeds, double alpha, uint64_t seed = 20261204);

enum class Equivalence { kEquivalent, kDifferent, kInconclusive, kNotJudged };
struct EquivalenceTest {
  Equivalence outcome = Equivalence::kNotJudged;
  int pairs = 0;                      // seeds with runs on both sides
  double mean_diff = 0, sd_diff = 0;  // of the per-seed differences
  double lo = 0, hi = 0;              // the (1 - 2 alpha) interval of the mean difference
  int seeds_needed = 0;               // inconclusive: about this many seeds would decide it (power 0.8)
};
// margin > 0: the largest difference of mean final loss still called "the same". Fewer than 2 seeds:
// not judged (no interval).
EquivalenceTest equivalence_test(const std::vector<SeedRuns>& seeds, double margin, double alpha);

}  // namespace detaudit
