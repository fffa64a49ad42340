#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "analysis/stats.hpp"
#include "analysis/variance.hpp"
#include "tests/test_inputs.hpp"

using namespace detaudit;

namespace {

using test_support::Normal;

// y = target_effect·i + seed effect + interaction + noise.
Cube make_design(std::size_t a, std::size_t b, std::size_t n, double target_effect, double sd_seed,
                 double sd_inter, double sd_noise, std::uint64_t seed) {
  Normal z(seed);
  Cube c{a, b, n, std::vector<double>(a * b * n)};
  std::vector<double> seed_eff(b);
  for (auto& s : seed_eff) s = sd_seed * z();
  for (std::size_t i = 0; i < a; ++i)
    for (std::size_t j = 0; j < b; ++j) {
      const double cell = target_effect * static_cast<double>(i) + seed_eff[j] + sd_inter * z();
      for (std::size_t k = 0; k < n; ++k) c.y[(i * b + j) * n + k] = cell + sd_noise * z();
    }
  return c;
}

void expect_finite(const TwoWayResult& r) {
  for (const AnovaTerm* t : {&r.target, &r.seed, &r.interaction, &r.residual, &r.total}) {
    EXPECT_TRUE(std::isfinite(t->ss));
    EXPECT_TRUE(std::isfinite(t->ms));
  }
  for (const Components* c : {&r.raw, &r.clipped, &r.share}) {
    EXPECT_TRUE(std::isfinite(c->target));
    EXPECT_TRUE(std::isfinite(c->seed));
    EXPECT_TRUE(std::isfinite(c->interaction));
    EXPECT_TRUE(std::isfinite(c->residual));
  }
  for (const auto* o : {&r.f_target, &r.p_target, &r.f_seed, &r.p_seed, &r.f_interaction, &r.p_interaction})
    if (o->has_value()) {
      EXPECT_TRUE(std::isfinite(**o));
    }
}

}  // namespace

// ---- stats -------------------------------------------------------------------------------------

TEST(Stats, DescriptiveBasics) {
  const std::vector<double> v{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(mean(v), 2.5);
  EXPECT_DOUBLE_EQ(sample_variance(v), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(sample_std(v), std::sqrt(5.0 / 3.0));
  EXPECT_DOUBLE_EQ(median(v), 2.5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{5, 1, 3}), 3.0);
  EXPECT_DOUBLE_EQ(mad(std::vector<double>{1, 2, 3, 4, 100}), 1.0);
  EXPECT_TRUE(std::isnan(mean(std::vector<double>{})));
  EXPECT_EQ(sample_variance(std::vector<double>{7.0}), 0.0);
}

TEST(Stats, MeanOfConstantIsExact) {
  const std::vector<double> v(7, 0.1);
  EXPECT_EQ(mean(v), 0.1);
  EXPECT_EQ(sample_variance(v), 0.0);
}

TEST(Stats, IncompleteBetaKnownValues) {
  EXPECT_NEAR(incomplete_beta(0.5, 2, 3), 0.6875, 1e-14);
  EXPECT_NEAR(incomplete_beta(0.3, 3, 1), 0.027, 1e-14);              // x^a
  EXPECT_NEAR(incomplete_beta(0.2, 1, 4), 1 - std::pow(0.8, 4), 1e-14);  // 1 − (1−x)^b
  EXPECT_NEAR(incomplete_beta(0.5, 7.5, 7.5), 0.5, 1e-14);
  EXPECT_NEAR(incomplete_beta(0.9, 2, 3) + incomplete_beta(0.1, 3, 2), 1.0, 1e-14);
  EXPECT_EQ(incomplete_beta(0.0, 2, 3), 0.0);
  EXPECT_EQ(incomplete_beta(1.0, 2, 3), 1.0);
  EXPECT_TRUE(std::isnan(incomplete_beta(0.5, 0.0, 3)));
}

TEST(Stats, FUpperTailAgainstTables) {
  EXPECT_NEAR(f_upper_p(4.965, 1, 10), 0.05, 2e-4);
  EXPECT_NEAR(f_upper_p(3.098, 3, 20), 0.05, 2e-4);
  EXPECT_NEAR(f_upper_p(10.04, 1, 10), 0.01, 1e-4);
  EXPECT_NEAR(f_upper_p(4.938, 3, 20), 0.01, 1e-4);
  EXPECT_NEAR(f_upper_p(1.0, 2, 2), 0.5, 1e-14);  // F(2,2): p = 1/(1+F)
  EXPECT_EQ(f_upper_p(0.0, 3, 20), 1.0);
  EXPECT_EQ(f_upper_p(INFINITY, 3, 20), 0.0);
}

// ---- two-way crossed ANOVA ---------------------------------------------------------------------

// 2 targets × 3 seeds × 2 replicates, worked by hand:
//   target 0: seed0 (1,3) m=2   seed1 (4,6) m=5   seed2 (2,2) m=2   row mean 3
//   target 1: seed0 (5,7) m=6   seed1 (6,8) m=7   seed2 (7,9) m=8   row mean 7
//   column means 4, 6, 5; grand mean 5.
//   SS_A  = bn Σ(row − 5)²      = 6·(4 + 4)            = 48, df 1, MS 48
//   SS_B  = an Σ(col − 5)²      = 4·(1 + 1 + 0)        = 8,  df 2, MS 4
//   interaction residuals m − row − col + 5: t0: 0, 1, −1; t1: 0, −1, 1
//   SS_AB = n Σ r²              = 2·4                  = 8,  df 2, MS 4
//   SS_E  = 2 + 2 + 0 + 2 + 2 + 2                      = 10, df 6, MS 5/3
//   SS_T  = 74 = 48 + 8 + 8 + 10
//   F_A  = 48/4 = 12 on (1,2):   p = I_{1/7}(1, 1/2) = 1 − √(6/7)
//   F_B  = 4/4 = 1 on (2,2):     p = 1/(1 + 1) = 1/2
//   F_AB = 4/(5/3) = 2.4 (2,6):  p = I_{5/9}(3, 1) = (5/9)³ = 125/729
//   σ²_E = 5/3, σ²_AB = (4 − 5/3)/2 = 7/6, σ²_A = (48 − 4)/6 = 22/3, σ²_B = (4 − 4)/4 = 0
//   clipped total 61/6: shares A 44/61, B 0, AB 7/61, E 10/61
TEST(TwoWay, HandComputedDesign) {
  const Cube c{2, 3, 2, {1, 3, 4, 6, 2, 2, 5, 7, 6, 8, 7, 9}};
  const TwoWayResult r = two_way_anova(c);
  const double tol = 1e-12;
  EXPECT_NEAR(r.grand_mean, 5.0, tol);
  EXPECT_NEAR(r.target.ss, 48, tol);
  EXPECT_EQ(r.target.df, 1);
  EXPECT_NEAR(r.target.ms, 48, tol);
  EXPECT_NEAR(r.seed.ss, 8, tol);
  EXPECT_EQ(r.seed.df, 2);
  EXPECT_NEAR(r.seed.ms, 4, tol);
  EXPECT_NEAR(r.interaction.ss, 8, tol);
  EXPECT_EQ(r.interaction.df, 2);
  EXPECT_NEAR(r.interaction.ms, 4, tol);
  EXPECT_NEAR(r.residual.ss, 10, tol);
  EXPECT_EQ(r.residual.df, 6);
  EXPECT_NEAR(r.residual.ms, 5.0 / 3.0, tol);
  EXPECT_NEAR(r.total.ss, 74, tol);
  EXPECT_EQ(r.total.df, 11);
  ASSERT_TRUE(r.f_target && r.p_target && r.f_seed && r.p_seed && r.f_interaction && r.p_interaction);
  EXPECT_NEAR(*r.f_target, 12, tol);
  EXPECT_NEAR(*r.p_target, 1 - std::sqrt(6.0 / 7.0), tol);
  EXPECT_NEAR(*r.f_seed, 1, tol);
  EXPECT_NEAR(*r.p_seed, 0.5, tol);
  EXPECT_NEAR(*r.f_interaction, 2.4, tol);
  EXPECT_NEAR(*r.p_interaction, 125.0 / 729.0, tol);
  EXPECT_NEAR(r.raw.residual, 5.0 / 3.0, tol);
  EXPECT_NEAR(r.raw.interaction, 7.0 / 6.0, tol);
  EXPECT_NEAR(r.raw.target, 22.0 / 3.0, tol);
  EXPECT_NEAR(r.raw.seed, 0.0, tol);
  EXPECT_NEAR(r.share.target, 44.0 / 61.0, tol);
  EXPECT_NEAR(r.share.seed, 0.0, tol);
  EXPECT_NEAR(r.share.interaction, 7.0 / 61.0, tol);
  EXPECT_NEAR(r.share.residual, 10.0 / 61.0, tol);
  EXPECT_TRUE(r.target_testable);
  EXPECT_FALSE(r.confounded_ab_e);
  EXPECT_TRUE(r.notes.empty()) << r.notes;
}

TEST(TwoWay, NegativeComponentIsReportedRawAndClipped) {
  // Swap seeds so that MS_B < MS_AB: target 0 (1,1)(5,5)(3,3), target 1 (5,5)(1,1)(3,3).
  const Cube c{2, 3, 2, {1, 1, 5, 5, 3, 3, 5, 5, 1, 1, 3, 3}};
  const TwoWayResult r = two_way_anova(c);
  // Row means 3, 3; column means 3, 3, 3: SS_A = SS_B = 0; SS_AB = 2·(4+4+0+4+4+0) = 32.
  EXPECT_NEAR(r.interaction.ms, 16, 1e-12);
  EXPECT_NEAR(r.raw.target, -16.0 / 6.0, 1e-12);
  EXPECT_NEAR(r.raw.seed, -16.0 / 4.0, 1e-12);
  EXPECT_EQ(r.clipped.target, 0.0);
  EXPECT_EQ(r.clipped.seed, 0.0);
  EXPECT_EQ(r.residual.ss, 0.0);  // constant within cells: exactly 0
  EXPECT_EQ(r.raw.residual, 0.0);
  EXPECT_NEAR(r.share.interaction, 1.0, 1e-12);
  expect_finite(r);
}

TEST(TwoWay, ConstantWithinCellsGivesExactZeroResidual) {
  Cube c{3, 4, 3, {}};
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t k = 0; k < 3; ++k) c.y.push_back(0.1 * static_cast<double>(i + 1) + 0.7 / (j + 3.0));
  const TwoWayResult r = two_way_anova(c);
  EXPECT_EQ(r.residual.ss, 0.0);
  EXPECT_EQ(r.raw.residual, 0.0);
  EXPECT_EQ(r.clipped.residual, 0.0);
  const ReplicateVariance rv = replicate_variance(c);
  EXPECT_EQ(rv.pooled, 0.0);
  EXPECT_EQ(rv.identical_cells, 12u);
  expect_finite(r);
}

TEST(TwoWay, ConstantDataHasNoNaNAndNoTests) {
  const Cube c{3, 8, 2, std::vector<double>(48, 0.0073)};
  const TwoWayResult r = two_way_anova(c);
  expect_finite(r);
  EXPECT_FALSE(r.f_target.has_value());
  EXPECT_FALSE(r.p_target.has_value());
  EXPECT_FALSE(r.f_seed.has_value());
  EXPECT_FALSE(r.f_interaction.has_value());
  EXPECT_EQ(r.total.ss, 0.0);
  EXPECT_EQ(r.clipped.target + r.clipped.seed + r.clipped.interaction + r.clipped.residual, 0.0);
  EXPECT_EQ(r.share.target, 0.0);
  EXPECT_FALSE(r.notes.empty());
  const PermutationResult p = permutation_test_target(c, 99, 1);
  EXPECT_FALSE(p.p.has_value());
  const BootstrapResult b = bootstrap_components(c, 50, 1);
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.share.target.lo, 0.0);
  EXPECT_EQ(b.share.target.hi, 0.0);
}

TEST(TwoWay, SingleTargetOrSeedIsFlaggedNotTested) {
  for (auto [a, b] : {std::pair<std::size_t, std::size_t>{1, 5}, {4, 1}}) {
    const Cube c = make_design(a, b, 3, 1.0, 1.0, 0.2, 0.1, 7);
    const TwoWayResult r = two_way_anova(c);
    expect_finite(r);
    EXPECT_FALSE(r.target_testable);
    EXPECT_FALSE(r.f_target.has_value());
    EXPECT_FALSE(r.p_target.has_value());
    EXPECT_FALSE(r.f_interaction.has_value());
    EXPECT_FALSE(r.notes.empty());
    EXPECT_FALSE(permutation_test_target(c, 99, 1).p.has_value());
    EXPECT_GT(r.clipped.residual, 0.0);
  }
  // b = 1: nothing to bootstrap.
  EXPECT_FALSE(bootstrap_components(make_design(3, 1, 2, 1.0, 1.0, 0.1, 0.1, 3), 20, 1).ok);
}

// 2 targets x 3 seeds have 2^3 = 8 arrangements within seed blocks, and the 2 that
// relabel every block alike tie with the data, so no p below 2/8 = 0.25 exists. Enumerated exactly, the
// strongest effect gets exactly that floor, and the test says it has no power (the Monte Carlo p of
// earlier versions printed 0.222, below the floor).
TEST(TwoWay, FewArrangementsAreEnumeratedExactlyAndTheFloorIsSaid) {
  const Cube c = make_design(2, 3, 2, 5.0, 0.5, 0.05, 0.05, 4);
  const PermutationResult p = permutation_test_target(c, 999, 1);
  ASSERT_TRUE(p.p.has_value());
  EXPECT_TRUE(p.exact);
  EXPECT_EQ(p.permutations, 8u);
  EXPECT_EQ(p.at_least_as_extreme, 2u);
  EXPECT_EQ(*p.p, 0.25);
  EXPECT_EQ(p.min_p, 0.25);
  EXPECT_TRUE(p.no_power);
  EXPECT_NE(p.notes.find("no power: the smallest p this design can give is 0.25 > 0.05"), std::string::npos) << p.notes;
}

TEST(TwoWay, ExactPermutationPIsAMultipleOfOneArrangementAndReachesItsFloor) {
  // 3 targets x 4 seeds: 6^4 = 1296 arrangements, floor 6/1296 = 1/216 (below 0.05: the test has power).
  const Cube c = make_design(3, 4, 2, 5.0, 0.5, 0.05, 0.05, 12);
  const PermutationResult p = permutation_test_target(c, 999, 1);
  ASSERT_TRUE(p.p.has_value());
  EXPECT_TRUE(p.exact);
  EXPECT_EQ(p.permutations, 1296u);
  EXPECT_DOUBLE_EQ(p.min_p, 1.0 / 216);
  EXPECT_FALSE(p.no_power);
  EXPECT_DOUBLE_EQ(*p.p, double(p.at_least_as_extreme) / 1296);
  EXPECT_EQ(p.at_least_as_extreme, 6u) << "only the 6 global relabellings reach the observed F";
  // No effect: a large exact p, the same whatever the Monte Carlo seed.
  const Cube n = make_design(3, 4, 2, 0.0, 0.5, 0.3, 0.1, 13);
  EXPECT_EQ(*permutation_test_target(n, 999, 1).p, *permutation_test_target(n, 999, 2).p);
  EXPECT_GT(*permutation_test_target(n, 999, 1).p, 0.1);
}

TEST(TwoWay, MonteCarloBeyondTheExactLimitKeepsItsFloor) {
  // 3 targets x 8 seeds: 6^8 = 1679616 arrangements, drawn at random; the floor is then 1/(1 + N).
  const Cube c = make_design(3, 8, 2, 5.0, 0.5, 0.05, 0.05, 21);
  const PermutationResult p = permutation_test_target(c, 999, 1);
  ASSERT_TRUE(p.p.has_value());
  EXPECT_FALSE(p.exact);
  EXPECT_EQ(p.permutations, 999u);
  EXPECT_DOUBLE_EQ(p.min_p, 1.0 / 1000);
  EXPECT_GE(*p.p, p.min_p);
}

// With 3 seed blocks the percentile interval of a share is [0, 1] by construction.
TEST(TwoWay, FewSeedBlocksGiveNoBootstrapIntervalAndSayWhy) {
  const BootstrapResult b = bootstrap_components(make_design(2, 3, 2, 1.0, 1.0, 0.1, 0.1, 3), 999, 1);
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.notes.find("no interval: 3 seed blocks (at least 8 are needed"), std::string::npos) << b.notes;
  EXPECT_FALSE(bootstrap_components(make_design(2, 7, 2, 1.0, 1.0, 0.1, 0.1, 3), 999, 1).ok);
  EXPECT_TRUE(bootstrap_components(make_design(2, 8, 2, 1.0, 1.0, 0.1, 0.1, 3), 999, 1).ok);
}

TEST(TwoWay, SingleReplicateConfoundsInteractionAndResidual) {
  const Cube c = make_design(3, 6, 1, 0.5, 1.0, 0.3, 0.2, 11);
  const TwoWayResult r = two_way_anova(c);
  EXPECT_TRUE(r.confounded_ab_e);
  EXPECT_NE(r.notes.find("confounded"), std::string::npos);
  EXPECT_EQ(r.raw.residual, 0.0);
  EXPECT_EQ(r.residual.df, 0.0);
  EXPECT_NEAR(r.raw.interaction, r.interaction.ms, 1e-15);
  EXPECT_FALSE(r.f_interaction.has_value());
  ASSERT_TRUE(r.f_target.has_value());  // F_A = MS_A/MS_AB is still defined
  expect_finite(r);
}

TEST(TwoWay, StrongTargetEffectIsDetected) {
  const Cube c = make_design(3, 8, 3, 1.0, 0.5, 0.1, 0.1, 2024);
  const TwoWayResult r = two_way_anova(c);
  ASSERT_TRUE(r.p_target.has_value());
  EXPECT_LT(*r.p_target, 1e-4);
  EXPECT_GT(r.share.target, 0.5);
  const PermutationResult p = permutation_test_target(c, 999, 42);
  ASSERT_TRUE(p.p.has_value());
  EXPECT_LT(*p.p, 0.05);
  EXPECT_NEAR(*p.f_observed, *r.f_target, 1e-9 * *r.f_target);
  EXPECT_EQ(p.permutations, 999u);
  EXPECT_DOUBLE_EQ(*p.p, (1.0 + p.at_least_as_extreme) / 1000.0);
}

TEST(TwoWay, NoTargetEffectGivesLargePermutationP) {
  const Cube c = make_design(3, 8, 3, 0.0, 0.5, 0.3, 0.1, 99);
  const TwoWayResult r = two_way_anova(c);
  ASSERT_TRUE(r.f_target.has_value());
  EXPECT_LT(*r.f_target, 2.0);
  const PermutationResult p = permutation_test_target(c, 999, 5);
  ASSERT_TRUE(p.p.has_value());
  EXPECT_GT(*p.p, 0.1);
}

TEST(TwoWay, IdenticalTargetsHaveNoTargetVariance) {
  // Every target sees exactly the same numbers: nothing separates them.
  Cube c = make_design(1, 6, 2, 0.0, 1.0, 0.0, 0.3, 8);
  Cube d{3, 6, 2, {}};
  for (int i = 0; i < 3; ++i) d.y.insert(d.y.end(), c.y.begin(), c.y.end());
  const TwoWayResult r = two_way_anova(d);
  expect_finite(r);
  EXPECT_EQ(r.target.ss, 0.0);  // identical rows give bitwise-identical row means
  EXPECT_EQ(r.clipped.target, 0.0);
  EXPECT_GT(r.share.seed, 0.5);
  const PermutationResult p = permutation_test_target(d, 99, 3);
  EXPECT_FALSE(p.p.has_value());  // no variation between targets within any seed: nothing to test
  EXPECT_FALSE(p.notes.empty());
}

TEST(TwoWay, PermutationIsReproducibleAndSeedDependent) {
  const Cube c = make_design(4, 5, 2, 0.2, 0.5, 0.3, 0.1, 17);
  const PermutationResult p1 = permutation_test_target(c, 499, 123);
  const PermutationResult p2 = permutation_test_target(c, 499, 123);
  ASSERT_TRUE(p1.p && p2.p);
  EXPECT_EQ(*p1.p, *p2.p);
  EXPECT_EQ(p1.at_least_as_extreme, p2.at_least_as_extreme);
  EXPECT_GT(*p1.p, 0.0);
  EXPECT_LE(*p1.p, 1.0);
}

TEST(TwoWay, PerfectAdditiveTargetEffect) {
  // No interaction and no noise: MS_AB = 0, F_A undefined (reported absent), permutation p minimal.
  // Small integers and halves, so every mean and residual is exact and MS_AB is exactly 0 (with
  // inexact means MS_AB would be ~1e-30 and F huge but finite, which is also reported).
  Cube c{2, 8, 1, {}};
  for (double t : {0.0, 1.0})
    for (double s : {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}) c.y.push_back(t + s);
  const TwoWayResult r = two_way_anova(c);
  expect_finite(r);
  EXPECT_FALSE(r.f_target.has_value());
  const PermutationResult p = permutation_test_target(c, 199, 9);
  ASSERT_TRUE(p.p.has_value());
  EXPECT_FALSE(p.f_observed.has_value());
  EXPECT_EQ(r.interaction.ss, 0.0);
  // Only the identity and the full swap keep MS_AB at 0 (F* = inf): 2 of the 2^8 within-block
  // arrangements, every one enumerated, so p = 1/128 exactly, the floor of this design.
  EXPECT_TRUE(p.exact);
  EXPECT_EQ(p.at_least_as_extreme, 2u);
  EXPECT_EQ(*p.p, 1.0 / 128);
  EXPECT_EQ(p.min_p, 1.0 / 128);
}

TEST(TwoWay, BootstrapContainsPointAndIsReproducible) {
  const Cube c = make_design(3, 10, 3, 0.8, 0.6, 0.2, 0.1, 31);
  const BootstrapResult b1 = bootstrap_components(c, 400, 77);
  const BootstrapResult b2 = bootstrap_components(c, 400, 77);
  const BootstrapResult b3 = bootstrap_components(c, 400, 78);
  ASSERT_TRUE(b1.ok);
  EXPECT_EQ(b1.resamples, 400u);
  auto contains = [](const Interval& iv, double v) { return iv.lo <= v && v <= iv.hi; };
  EXPECT_TRUE(contains(b1.share.target, b1.point_share.target));
  EXPECT_TRUE(contains(b1.share.seed, b1.point_share.seed));
  EXPECT_TRUE(contains(b1.clipped.target, b1.point_clipped.target));
  EXPECT_TRUE(contains(b1.clipped.residual, b1.point_clipped.residual));
  EXPECT_LT(b1.share.target.lo, b1.share.target.hi);
  EXPECT_EQ(b1.share.target.lo, b2.share.target.lo);
  EXPECT_EQ(b1.share.target.hi, b2.share.target.hi);
  EXPECT_EQ(b1.clipped.seed.hi, b2.clipped.seed.hi);
  EXPECT_NE(b1.share.target.lo, b3.share.target.lo);
}

// ---- nested / one-way / replicate --------------------------------------------------------------

// Nested, 2 targets × 2 seeds (different seeds per target) × 2 replicates:
//   t0: s0 (1,3) m2, s1 (5,7) m6 → 4;  t1: s0 (8,8) m8, s1 (11,13) m12 → 10;  grand 7
//   SS_A = bn Σ(row−7)² = 4·18 = 72 (df 1); SS_B(A) = n Σ(m − row)² = 2·16 = 32 (df 2, MS 16);
//   SS_E = 2 + 2 + 0 + 2 = 6 (df 4, MS 1.5); F = 72/16 = 4.5 on (1,2): p = 1 − √(9/13)
//   σ²_E = 1.5, σ²_B(A) = (16 − 1.5)/2 = 7.25, σ²_A = (72 − 16)/4 = 14
TEST(Nested, HandComputedDesign) {
  const Cube c{2, 2, 2, {1, 3, 5, 7, 8, 8, 11, 13}};
  const NestedResult r = nested_anova(c);
  EXPECT_NEAR(r.target.ss, 72, 1e-12);
  EXPECT_NEAR(r.seed_within_target.ss, 32, 1e-12);
  EXPECT_EQ(r.seed_within_target.df, 2);
  EXPECT_NEAR(r.residual.ms, 1.5, 1e-12);
  ASSERT_TRUE(r.f_target && r.p_target);
  EXPECT_NEAR(*r.f_target, 4.5, 1e-12);
  EXPECT_NEAR(*r.p_target, 1 - std::sqrt(9.0 / 13.0), 1e-12);
  EXPECT_NEAR(r.raw.residual, 1.5, 1e-12);
  EXPECT_NEAR(r.raw.seed, 7.25, 1e-12);
  EXPECT_NEAR(r.raw.target, 14, 1e-12);
  EXPECT_NEAR(r.total.ss, 72 + 32 + 6, 1e-12);
}

TEST(Nested, ConstantDataIsFinite) {
  const NestedResult r = nested_anova(Cube{2, 3, 1, std::vector<double>(6, 1.5)});
  EXPECT_FALSE(r.f_target.has_value());
  EXPECT_TRUE(r.confounded_b_e);
  EXPECT_EQ(r.share.target + r.share.seed + r.share.residual, 0.0);
}

// Groups {1,2,3}, {4,6}: means 2, 5; grand 16/5 = 3.2; SS_between = 3·1.44 + 2·3.24 = 10.8 (df 1);
// SS_within = 2 + 2 = 4 (df 3); F = 10.8/(4/3) = 8.1; n0 = (5 − 13/5)/1 = 2.4;
// σ²_between = (10.8 − 4/3)/2.4.
TEST(OneWay, UnbalancedHandComputed) {
  const OneWayResult r = one_way_anova({{1, 2, 3}, {4, 6}});
  EXPECT_NEAR(r.between.ss, 10.8, 1e-12);
  EXPECT_NEAR(r.within.ss, 4, 1e-12);
  ASSERT_TRUE(r.f.has_value());
  EXPECT_NEAR(*r.f, 8.1, 1e-12);
  EXPECT_NEAR(*r.p, f_upper_p(8.1, 1, 3), 1e-15);
  EXPECT_NEAR(r.raw.target, (10.8 - 4.0 / 3.0) / 2.4, 1e-12);
  EXPECT_NEAR(r.raw.residual, 4.0 / 3.0, 1e-12);
  EXPECT_FALSE(one_way_anova({{1.0}}).f.has_value());
}

TEST(Replicate, CellVariances) {
  const Cube c{2, 3, 2, {1, 3, 4, 6, 2, 2, 5, 7, 6, 8, 7, 9}};
  const ReplicateVariance rv = replicate_variance(c);
  EXPECT_EQ(rv.cell_variance, (std::vector<double>{2, 2, 0, 2, 2, 2}));
  EXPECT_NEAR(rv.pooled, 10.0 / 6.0, 1e-15);
  EXPECT_NEAR(rv.target_variance[0], 4.0 / 3.0, 1e-15);
  EXPECT_NEAR(rv.target_variance[1], 2.0, 1e-15);
  EXPECT_EQ(rv.max_cell, 2.0);
  EXPECT_EQ(rv.identical_cells, 1u);
}

// ---- confounding guard -------------------------------------------------------------------------

TEST(ConfoundingGuard, FourCases) {
  const TargetDescription cpu_chainer{"AMD EPYC 7B13", "chainer 7.8 numpy"};
  const TargetDescription gpu_chainer{"NVIDIA H200", "chainer 7.8 numpy"};
  const TargetDescription cpu_torch{"AMD EPYC 7B13", "pytorch 1.13 mkldnn"};
  const TargetDescription gpu_cudnn{"NVIDIA H200", "chainer 7.8 cudnn algo=1"};
  EXPECT_EQ(classify_comparison(cpu_chainer, gpu_chainer), ComparisonKind::kHardwareOnly);
  EXPECT_EQ(attributable_label(cpu_chainer, gpu_chainer), "hardware");
  EXPECT_EQ(classify_comparison(cpu_chainer, cpu_torch), ComparisonKind::kImplementationOnly);
  EXPECT_EQ(attributable_label(cpu_chainer, cpu_torch), "implementation");
  // The retracted paper's comparison: CPU numpy path vs GPU cuDNN path.
  EXPECT_EQ(classify_comparison(cpu_chainer, gpu_cudnn), ComparisonKind::kBoth);
  EXPECT_EQ(attributable_label(cpu_chainer, gpu_cudnn), "confounded (hardware and implementation change together)");
  EXPECT_EQ(classify_comparison(gpu_cudnn, gpu_cudnn), ComparisonKind::kNeither);
  EXPECT_EQ(attributable_label(gpu_cudnn, gpu_cudnn).rfind("none", 0), 0u);
  EXPECT_STREQ(comparison_kind_name(ComparisonKind::kBoth), "both");
}

// With one target and one replicate the seed term, not the interaction, takes the
// residual (the interaction has no degrees of freedom).
TEST(TwoWay, OneTargetOneReplicateConfoundsSeedAndResidual) {
  const Cube c = make_design(1, 6, 1, 0.0, 1.0, 0.0, 0.2, 5);
  const TwoWayResult r = two_way_anova(c);
  EXPECT_FALSE(r.confounded_ab_e);
  EXPECT_EQ(r.interaction.df, 0.0);
  EXPECT_EQ(r.raw.interaction, 0.0);
  EXPECT_DOUBLE_EQ(r.raw.seed, r.seed.ms) << "the seed term holds everything";
  EXPECT_NE(r.notes.find("n = 1 and a = 1: seed and residual are confounded; sigma2_B absorbs the residual"),
            std::string::npos)
      << r.notes;
  EXPECT_EQ(r.notes.find("sigma2_AB absorbs"), std::string::npos) << r.notes;
}
