// Has a training cell's final loss moved? The two tests `check` judges nondeterministic and cross-machine
// training cells with. Both work seed by seed: runs that share a seed (initial weights) are not
// independent draws, so a seed's new runs are compared with that seed's baseline runs, never with the
// spread of the other seeds.
//
// shift_test (same machine key, a condition with nondeterminism on): the statistic is the mean over
// seeds of (mean of the seed's new runs - mean of its baseline runs); its p-value is that of a
// permutation of the baseline/new labels within each seed (every arrangement when there are at most
// kExactArrangements, else kDraws seeded draws), two-sided. It assumes only that, unchanged, a seed's
// runs are exchangeable: heavy tails and ties (final losses that jump between a few values) leave its
// false-failure rate at or below alpha.
// Exact means exact: the arrangements' statistics are compared in integer arithmetic, not in doubles.
// Every loss is an integer multiple of one power of two (the smallest binade's last bit), so with
// n_j runs in seed j, k_j of them new, s_j the sum of the new ones and T_j of all, the statistic times
// S·L (L the least common multiple of the k_j·(n_j − k_j)) is the integer
//     Z = Σ_j L/(k_j·(n_j − k_j)) · (n_j·s_j − k_j·T_j),
// computed in 128 bits. Ties count as ties, and swapping the sides gives −Z: the same p both ways.
// The smallest p-value the design can reach (its floor) is counted exactly for any size: the largest
// |Z| is reached only where every seed's new runs are its k_j largest (or smallest) losses, which
// ties make C(b, a) ways in a seed (b losses equal to the k-th largest, a of them among the top k).
// A design whose floor exceeds the level it is tested at can detect nothing (not judged).
// detectable_shift: the shift this very test detects with power 0.8 at a level, for run-to-run noise of
// the pooled within-seed sd (df = sum over seeds and sides of n - 1). A small design's permutation test
// is discrete (3 seeds of 2 + 2 runs: 216 arrangements, p-values in steps of 2/216) and less powerful
// than a t test, so up to kSimulatedArrangements it is found by simulating the test itself (kPowerSims
// seeded designs of normal noise, the shift by bisection); above, the noncentral t at the level, which
// the permutation test then follows closely.
//
// equivalence_test (another machine key): per seed, the difference of the means (new - baseline);
// two one-sided t-tests of the mean difference against +-margin at alpha each, i.e. the (1 - 2 alpha)
// interval of the mean difference: inside (-margin, margin) shows the cells equivalent, wholly outside
// shows them different, across a bound is inconclusive (the number of seeds that would settle it is
// given). Not a significance test, which a small design could never fail.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace detaudit {

// One seed's final losses: its baseline runs and its new runs.
struct SeedRuns {
  std::vector<double> base, now;
};

inline constexpr double kPowerTarget = 0.8;
inline constexpr uint64_t kExactArrangements = 200000, kDraws = 9999;
inline constexpr double kSimulatedArrangements = 20000;
inline constexpr int kPowerSims = 400;

struct ShiftTest {
  int seeds = 0, base_runs = 0, new_runs = 0;  // seeds with runs on both sides, and their runs
  double shift = 0;                            // mean over seeds of (mean new - mean baseline)
  double within_sd = 0;                        // pooled within-seed sd of both sides (run to run)
  int within_df = 0;                           // its degrees of freedom
  double se = 0;                               // the shift's standard error from within_sd
  double p = 1;                                // two-sided permutation p-value
  double min_p = 1;                            // the smallest p-value this design can reach (exact)
  double arrangements = 1;                     // labellings within seeds, in all
  bool exact = true;                           // p by enumeration (else by kDraws draws)
  std::vector<std::pair<int, int>> shape;      // per seed: baseline and new runs
  bool integer = true;  // arrangements compared exactly (false: the losses span too many binades for 128
                        // bits, and they were compared in long double with a relative tolerance of 1e-15)
};
// seed: the draws, when there are too many arrangements to enumerate (the same seed, the same p).
ShiftTest shift_test(const std::vector<SeedRuns>& seeds, uint64_t seed = 20261204);

// The shift `t`'s design detects with power kPowerTarget in a two-sided test at `level`: NaN when its
// floor min_p is above the level (it detects nothing), 0 when the runs repeat exactly within seeds (any
// shift shows), else se × the noncentrality the t test on within_df degrees of freedom detects.
double detectable_shift(const ShiftTest& t, double level);

// The smallest p-value of a design of `seeds` seeds with `base` and `now` runs each (losses all distinct).
double design_floor(int seeds, int base, int now);
// What would make such a design reach `level`: the seeds at these run counts, and the runs per side in
// each seed at this many seeds (0: none up to 1,000).
struct JudgeableDesign {
  int seeds = 0, runs_per_side = 0;
};
JudgeableDesign judgeable_design(int seeds, int base, int now, double level);

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
