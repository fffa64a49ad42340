// Equal spread of two groups: the Brown–Forsythe test (Levene's test about the median), with a
// permutation p, an effect size and, where the groups are large enough, an interval. The sony2021
// design asks it of (a) against (b) (does library nondeterminism add spread under random initial
// weights?) and of (c) against (d) (under fixed weights).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace detaudit {

// Groups this small or smaller get no bootstrap interval (the same rule as the variance shares).
inline constexpr std::size_t kMinBootstrapGroup = 8;

struct SpreadComparison {
  std::size_t n1 = 0, n2 = 0;
  double sd1 = 0, sd2 = 0;  // sample standard deviations
  // Brown–Forsythe: z = |y − median of its group|; F = the one-way ANOVA F of z on (1, n1 + n2 − 2).
  std::optional<double> f, p_f;  // absent when every z is equal (F undefined)
  // Permutation p: the pooled values re-split into groups of n1 and n2, F recomputed; exact over all
  // C(n1 + n2, n1) splits when there are at most 10^5 of them, else Monte Carlo.
  std::optional<double> p;
  bool exact = false;
  std::size_t permutations = 0;
  // The smallest p the split count allows: 1/C (2/C when n1 = n2, since swapping the groups leaves F
  // unchanged); also 1/(1 + N) for Monte Carlo. Above 0.05: no power at that level.
  double min_p = 0;
  bool no_power = false;
  // Effect: mean z of group 1 minus that of group 2 (the difference the test tests, in loss units), and
  // sd1/sd2 (absent when sd2 = 0). Percentile bootstrap interval of the difference, resampling within
  // each group, only when both groups have at least kMinBootstrapGroup values.
  double mean_abs_dev_diff = 0;
  // The pooled within-group sd of the absolute deviations: mean_abs_dev_diff / z_sd is the standardized
  // effect the test tests (a two-sample t on the deviations), for its power.
  double z_sd = 0;
  std::optional<double> sd_ratio;
  std::optional<std::pair<double, double>> diff_ci;
  std::string notes;
};

// Fails soft: a group of fewer than 2 values gives notes and no test.
SpreadComparison compare_spread(const std::vector<double>& g1, const std::vector<double>& g2, std::size_t permutations,
                                std::uint64_t seed, std::size_t resamples = 999);

// The run-to-run variance against the seed variance, σ²_run/σ²_seed, from runs of several seeds with
// several runs each (condition (a): random initial weights, nondeterminism on): one-way random-effects
// ANOVA with seeds as groups, MS_seed = n0·σ²_seed + σ²_run and MS_run = σ²_run, F = MS_seed/MS_run on
// (s − 1, N − s). With λ = σ²_seed/σ²_run, F/(1 + n0·λ) follows F(s − 1, N − s) for normal run-to-run
// noise, which gives the 95% interval of λ and so of its reciprocal. Run-to-run final losses are not
// normal: they jump between a few values (heavy tails), and the variance of MS_run is then σ⁴(2/ν + γ/N)
// (ν = N − s, γ the noise's excess kurtosis), not σ⁴·2/ν: a normal-theory interval covers 87% at 3 seeds x 2
// runs under the residuals of a real design. So MS_run is given the degrees of freedom that match that
// variance, ν_γ = 2/(2/ν + γ/N) (Box's correction), with γ the larger of kRunExcessKurtosis and the
// design's own estimate (from its pooled within-seed residuals, corrected for their group size, when they
// have 20 degrees of freedom or more). This uses the seeds both conditions share; a permutation of runs
// across (a) and (b) would treat runs of one seed as exchangeable with runs of another, which they are not.
// The excess kurtosis assumed of run-to-run noise at the least: that of the errors of a real design of
// this tool (cpu?order=atomic, 12 seeds x 4 runs: 2.9 in its within-seed residuals, 5.0 in the errors
// they come from; tests/data/sony2021-final-losses.json, checked by the tests).
inline constexpr double kRunExcessKurtosis = 5.0;
struct RunSeedRatio {
  std::size_t seeds = 0, runs = 0;  // seeds with at least one run, runs in all
  double n0 = 0;                    // runs per seed (the average group size of the unbalanced case)
  double ms_seed = 0, ms_run = 0;
  std::optional<double> f;  // absent when MS_run = 0 or the design cannot estimate it
  // σ²_run/σ²_seed: the estimate and the 95% interval. Absent with `*_infinite` set: no seed spread is seen
  // above the run spread at that end (σ²_seed ≤ 0 there). `estimated` false: no estimate at all (notes).
  bool estimated = false;
  std::optional<double> ratio, lo, hi;
  bool ratio_infinite = false, hi_infinite = false, lo_infinite = false;
  // The excess kurtosis the interval allows for, and MS_run's degrees of freedom with it (ν_γ above).
  double kurtosis = 0, df_run = 0;
  // The design's precision, whatever the data: when F is large the interval's ends stand in the ratio
  // F_{0.975}/F_{0.025} of its degrees of freedom, and the seeds (at the same runs per seed) that bring that
  // factor to 4 or less.
  double interval_factor = 0;
  std::optional<std::size_t> seeds_for_factor_4;
  std::string notes;
};
RunSeedRatio run_seed_ratio(const std::vector<std::vector<double>>& runs_by_seed,
                            double kurtosis_floor = kRunExcessKurtosis);
// The excess kurtosis of the errors behind within-seed residuals (pooled; groups of n runs, so the
// residuals' own kurtosis is scaled back by their group size); NaN when they have no spread.
double error_excess_kurtosis(const std::vector<std::vector<double>>& runs_by_seed);

}  // namespace detaudit
