// analysis/spread.cpp: the Brown–Forsythe comparison of two groups' spread, against
// values worked by hand and an independent brute-force enumeration (Python, itertools.combinations over
// every split, the same statistic): F = 40/7 with 1 split of 35 at least as extreme; 5.7518 with 3 of 84.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/spread.hpp"
#include "analysis/stats.hpp"

namespace detaudit {
namespace {

TEST(Spread, HandWorkedBrownForsythe) {
  // g1 = {0, 2, 4}: median 2, |dev| = 2, 0, 2 (mean 4/3); g2 = {1, 1, 1, 1}: |dev| = 0. Between-groups
  // SS = 64/21, within-groups MS = (24/9)/5 = 8/15, so F = 40/7 on (1, 5).
  const SpreadComparison s = compare_spread({0, 2, 4}, {1, 1, 1, 1}, 999, 1);
  ASSERT_TRUE(s.f.has_value()) << s.notes;
  EXPECT_NEAR(*s.f, 40.0 / 7.0, 1e-12);
  EXPECT_NEAR(*s.p_f, f_upper_p(40.0 / 7.0, 1, 5), 1e-15);
  EXPECT_TRUE(s.exact);
  EXPECT_EQ(s.permutations, 35u);
  EXPECT_DOUBLE_EQ(*s.p, 1.0 / 35);
  EXPECT_DOUBLE_EQ(s.min_p, 1.0 / 35);
  EXPECT_FALSE(s.no_power);
  EXPECT_FALSE(s.sd_ratio.has_value()) << "sd2 = 0: no ratio";
  EXPECT_NEAR(s.mean_abs_dev_diff, 4.0 / 3.0, 1e-15);
  EXPECT_FALSE(s.diff_ci.has_value());
  EXPECT_NE(s.notes.find("no interval: 3 and 4 runs"), std::string::npos) << s.notes;
}

TEST(Spread, ExactPermutationMatchesAnIndependentEnumeration) {
  const SpreadComparison s = compare_spread({0.1, 0.5, 0.9, 0.2, 0.8, 0.4}, {0.5, 0.52, 0.49}, 999, 1);
  ASSERT_TRUE(s.p.has_value());
  EXPECT_NEAR(*s.f, 5.751783166904424, 1e-12);
  EXPECT_EQ(s.permutations, 84u);
  EXPECT_DOUBLE_EQ(*s.p, 3.0 / 84);
  ASSERT_TRUE(s.sd_ratio.has_value());
  EXPECT_NEAR(*s.sd_ratio, sample_std(std::vector<double>{0.1, 0.5, 0.9, 0.2, 0.8, 0.4}) /
                               sample_std(std::vector<double>{0.5, 0.52, 0.49}),
              1e-15);
}

TEST(Spread, TheSmallDesignsOfThePaperHaveNoPowerAndSaySo) {
  // 3 runs against 3: C(6, 3) = 20 splits, and swapping the groups leaves F unchanged: p >= 2/20.
  const SpreadComparison s = compare_spread({0.1, 0.5, 0.9}, {0.5, 0.51, 0.49}, 999, 1);
  EXPECT_DOUBLE_EQ(s.min_p, 0.1);
  EXPECT_TRUE(s.no_power);
  EXPECT_NE(s.notes.find("no power: 3 and 3 runs give 20 splits, so p is at least 0.1 > 0.05"), std::string::npos)
      << s.notes;
}

TEST(Spread, LargeGroupsGetMonteCarloAndAnInterval) {
  std::vector<double> wide, narrow;
  for (int i = 0; i < 12; ++i) {
    wide.push_back(0.02 + 0.001 * ((i * 7) % 12));
    narrow.push_back(0.02 + 0.0001 * ((i * 5) % 12));
  }
  const SpreadComparison s = compare_spread(wide, narrow, 1999, 7);
  EXPECT_FALSE(s.exact) << "C(24, 12) = 2704156 splits";
  EXPECT_EQ(s.permutations, 1999u);
  ASSERT_TRUE(s.p.has_value());
  EXPECT_LT(*s.p, 0.01);
  ASSERT_TRUE(s.diff_ci.has_value());
  EXPECT_LT(s.diff_ci->first, s.mean_abs_dev_diff);
  EXPECT_GT(s.diff_ci->second, s.mean_abs_dev_diff);
  EXPECT_GT(s.diff_ci->first, 0.0) << "the wide group's deviations are larger in every resample's interval";
  const SpreadComparison again = compare_spread(wide, narrow, 1999, 7);
  EXPECT_EQ(*again.p, *s.p);
  EXPECT_EQ(again.diff_ci->first, s.diff_ci->first);
}

TEST(Spread, TooFewRunsOrNoSpreadIsNotTested) {
  EXPECT_FALSE(compare_spread({1}, {1, 2}, 99, 1).p.has_value());
  const SpreadComparison same = compare_spread({1, 1, 1}, {2, 2, 2}, 99, 1);
  EXPECT_FALSE(same.p.has_value());
  EXPECT_NE(same.notes.find("nothing to test"), std::string::npos) << same.notes;
}

}  // namespace
}  // namespace detaudit
