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
  std::optional<double> sd_ratio;
  std::optional<std::pair<double, double>> diff_ci;
  std::string notes;
};

// Fails soft: a group of fewer than 2 values gives notes and no test.
SpreadComparison compare_spread(const std::vector<double>& g1, const std::vector<double>& g2, std::size_t permutations,
                                std::uint64_t seed, std::size_t resamples = 999);

}  // namespace detaudit
