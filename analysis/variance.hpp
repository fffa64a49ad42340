// Variance attribution for training and probe designs (README "Training regressions").
//
// The main model is the balanced two-way crossed random-effects model
//   y_ijk = μ + a_i + b_j + (ab)_ij + e_ijk,  i < a targets, j < b seeds, k < n replicates,
// with the F test of the target effect against the target × seed interaction, a permutation test
// of target labels within seed blocks (the primary test), and bootstrap CIs from resampling whole
// seed blocks. Every random draw comes from std::mt19937_64 with an explicit seed, and index
// draws use our own rejection sampler (std::uniform_int_distribution and std::shuffle differ
// between standard libraries), so results are identical on every platform.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace detaudit {

// a × b × n values, y[(i*b + j)*n + k]: target i, seed j, replicate k.
struct Cube {
  std::size_t a = 0, b = 0, n = 0;
  std::vector<double> y;
  double at(std::size_t i, std::size_t j, std::size_t k) const { return y[(i * b + j) * n + k]; }
  bool valid() const { return a > 0 && b > 0 && n > 0 && y.size() == a * b * n; }
};

struct AnovaTerm {
  double ss = 0.0;
  double df = 0.0;
  double ms = 0.0;  // ss/df; 0 when df == 0 (term not estimable)
};

// One value per variance component. For the crossed model: target = σ²_A, seed = σ²_B,
// interaction = σ²_AB, residual = σ²_E. For the nested model interaction is unused (0) and
// seed holds σ²_B(A).
struct Components {
  double target = 0.0, seed = 0.0, interaction = 0.0, residual = 0.0;
};

struct TwoWayResult {
  std::size_t a = 0, b = 0, n = 0;
  double grand_mean = 0.0;
  AnovaTerm target, seed, interaction, residual, total;  // A, B, AB, E
  // F_A = MS_A/MS_AB on (a−1, (a−1)(b−1)); F_B = MS_B/MS_AB on (b−1, (a−1)(b−1));
  // F_AB = MS_AB/MS_E on ((a−1)(b−1), ab(n−1)), only when n ≥ 2. Absent when the test is not
  // possible (a df is 0) or undefined (denominator MS is 0); never NaN or inf.
  std::optional<double> f_target, p_target, f_seed, p_seed, f_interaction, p_interaction;
  Components raw;      // method-of-moments estimates, may be negative
  Components clipped;  // max(raw, 0)
  Components share;    // clipped / Σ clipped; all 0 when Σ clipped == 0
  bool target_testable = false;  // a ≥ 2 and b ≥ 2
  bool confounded_ab_e = false;  // n == 1 with a, b ≥ 2: σ²_AB absorbs the residual, σ²_E reported as 0
  std::string notes;             // human-readable flags, "; "-separated
};

// Fails soft: an invalid cube (size mismatch or a zero dimension) gives a result with notes set
// and every value 0.
TwoWayResult two_way_anova(const Cube& c);

struct PermutationResult {
  std::optional<double> f_observed;  // absent when MS_A = MS_AB = 0
  // exact: #{F* ≥ F} / N over all N = (a!)^b arrangements; Monte Carlo: (1 + #{F* ≥ F}) / (1 + N).
  // Absent when not testable.
  std::optional<double> p;
  bool exact = false;                 // every arrangement enumerated (N ≤ kExactPermutationLimit)
  std::size_t permutations = 0;       // arrangements enumerated, or random draws
  std::size_t at_least_as_extreme = 0;
  // The smallest p this design can give: relabelling every seed block alike leaves F unchanged, so at
  // least a! of the (a!)^b arrangements tie with the observed one: 1/(a!)^(b−1) (and 1/(1 + N) for
  // Monte Carlo). Above 0.05 the test has no power at that level, whatever the data.
  double min_p = 0.0;
  bool no_power = false;
  std::uint64_t seed = 0;
  std::string notes;
};

// Designs with at most this many within-block arrangements are enumerated exactly.
inline constexpr std::size_t kExactPermutationLimit = 100000;  // = resampling::kExactLimit

// Permutes target labels within each seed block (each seed column's cells are reassigned to
// targets by a permutation of its own, replicates travel with their cell) and recomputes F_A: every
// arrangement when there are at most kExactPermutationLimit, else `permutations` uniform draws. Ties count with a relative tolerance of 1e-12 so that permutations that only
// reorder a sum are not lost to rounding. When MS_AB* = 0 with MS_A* > 0 the statistic is +inf
// internally (a perfect target effect), which compares correctly.
PermutationResult permutation_test_target(const Cube& c, std::size_t permutations, std::uint64_t seed);

struct Interval {
  double lo = 0.0, hi = 0.0;
};

struct ComponentIntervals {
  Interval target, seed, interaction, residual;
};

// Fewer seed blocks than this give no bootstrap interval: with b blocks there are only C(2b−1, b)
// distinct resamples (10 for b = 3), and a percentile interval of a share then spans [0, 1] or close to
// it by construction, which says nothing.
inline constexpr std::size_t kMinBootstrapBlocks = 8;

struct BootstrapResult {
  bool ok = false;  // false when b < kMinBootstrapBlocks (notes say why) or the cube is invalid
  std::size_t resamples = 0;
  std::uint64_t seed = 0;
  double level = 0.95;
  Components point_clipped, point_share;  // from the original data
  ComponentIntervals clipped, share;      // percentile intervals
  std::string notes;
};

// Resamples the b seed blocks with replacement (the whole a × n slab of a seed travels together),
// recomputes the clipped components and their shares, and takes percentile intervals
// [(1−level)/2, (1+level)/2] with linear-interpolated quantiles.
BootstrapResult bootstrap_components(const Cube& c, std::size_t resamples, std::uint64_t seed,
                                     double level = 0.95);

// Seeds nested within targets (seed j of target i is a different seed from seed j of target i'):
// the cube layout is the same, but B is B(A). F = MS_A/MS_B(A) on (a−1, a(b−1)).
// Components: target = (MS_A − MS_B(A))/(bn), seed = (MS_B(A) − MS_E)/n, residual = MS_E.
// n == 1 confounds B(A) with E (seed absorbs the residual, flagged). The interaction fields of
// the result are unused.
struct NestedResult {
  std::size_t a = 0, b = 0, n = 0;
  double grand_mean = 0.0;
  AnovaTerm target, seed_within_target, residual, total;
  std::optional<double> f_target, p_target;
  Components raw, clipped, share;
  bool target_testable = false;
  bool confounded_b_e = false;
  std::string notes;
};
NestedResult nested_anova(const Cube& c);

// One-way random-effects ANOVA over unbalanced groups (e.g. seeds per target differ in number):
// F = MS_between/MS_within on (g−1, N−g); σ²_between = (MS_between − MS_within)/n0 with
// n0 = (N − Σn_i²/N)/(g − 1). Components: target = σ²_between, residual = σ²_within.
struct OneWayResult {
  std::size_t groups = 0, total_n = 0;
  double grand_mean = 0.0;
  AnovaTerm between, within;
  std::optional<double> f, p;
  Components raw, clipped, share;
  std::string notes;
};
OneWayResult one_way_anova(const std::vector<std::vector<double>>& groups);

// Run-to-run variance within cells: the spread that remains with target and seed fixed.
struct ReplicateVariance {
  std::size_t a = 0, b = 0, n = 0;
  std::vector<double> cell_variance;    // a × b, sample variance over the n replicates (0 if n < 2)
  std::vector<double> target_variance;  // per target, pooled over its seeds
  double pooled = 0.0;                  // pooled over all cells (= MS_E)
  double max_cell = 0.0;
  std::size_t identical_cells = 0;      // cells whose replicates are all bitwise equal
};
ReplicateVariance replicate_variance(const Cube& c);

// ---- confounding guard -------------------------------------------------------------------------
struct TargetDescription {
  std::string hardware;        // e.g. CPU model or GPU name
  std::string implementation;  // library + algorithm/settings, e.g. "cudnn 9.19 bwd_filter_algo=1"
};

enum class ComparisonKind { kHardwareOnly, kImplementationOnly, kBoth, kNeither };

// Why this exists: the Sony CSL 2021 paper (arXiv 2109.01451) attributed a CPU/GPU loss gap to
// GPU hardware nondeterminism and was retracted — the gap came from a bug in the framework's
// (Chainer's) code path, which changed together with the hardware, and did not replicate in
// PyTorch. A difference may only be called a hardware effect when the implementation is held
// identical, and an implementation effect only when the hardware is; otherwise it is confounded.
// Strings are compared exactly: a description that differs in any byte counts as different.
ComparisonKind classify_comparison(const TargetDescription& x, const TargetDescription& y);
// "hardware" (implementation identical), "implementation" (hardware identical),
// "confounded (hardware and implementation change together)" (both differ), and
// "none (identical targets: run-to-run variation only)" when nothing differs.
std::string attributable_label(const TargetDescription& x, const TargetDescription& y);
const char* comparison_kind_name(ComparisonKind k);

}  // namespace detaudit
