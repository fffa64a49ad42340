// The gradient noise scale estimators (analysis/noise_scale.hpp) on a problem with a
// closed form: least squares y = x.w* + e, x ~ N(0, I_d), e ~ N(0, sigma^2), per-sample loss
// (x.w - y)^2 / 2. At w = w* + delta the per-sample gradient is g = x (x.delta - e), so
//   G = E g = delta,                     |G|^2 = |delta|^2,
//   Sigma = (|delta|^2 + sigma^2) I + delta delta^T,   tr(Sigma) = d (|delta|^2 + sigma^2) + |delta|^2
// (Gaussian fourth moments: E[x x^T (x.delta)^2] = |delta|^2 I + 2 delta delta^T). The estimates from
// microbatches and their big batch, over many batches at fixed w, must land within their sampling error.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "analysis/noise_scale.hpp"
#include "tests/test_inputs.hpp"

namespace detaudit {
namespace {

struct Moments {
  double mean = 0, m2 = 0;
  size_t n = 0;
  void add(double x) {
    ++n;
    const double d = x - mean;
    mean += d / double(n);
    m2 += d * (x - mean);
  }
  double se() const { return std::sqrt(m2 / double(n - 1) / double(n)); }
};

TEST(NoiseScale, LinearRegressionEstimatesLandWithinTheirSamplingError) {
  const int d = 8, b_small = 4, micro = 8, b_big = b_small * micro, steps = 4000;
  const double sigma = 0.5;
  std::vector<double> delta(d);
  for (int j = 0; j < d; ++j) delta[j] = 0.3 * double(j % 3) - 0.2;
  double delta2 = 0;
  for (double v : delta) delta2 += v * v;
  const double g2_true = delta2, tr_true = d * (delta2 + sigma * sigma) + delta2;

  test_support::Normal rnd(11);
  Moments g2, s;
  NoiseScaleTracker tracker(0.999);
  std::vector<double> big(d), small(d), x(d);
  for (int t = 0; t < steps; ++t) {
    std::fill(big.begin(), big.end(), 0.0);
    double small_sq = 0;
    for (int m = 0; m < micro; ++m) {
      std::fill(small.begin(), small.end(), 0.0);
      for (int i = 0; i < b_small; ++i) {
        double xd = 0;
        for (int j = 0; j < d; ++j) xd += (x[j] = rnd()) * delta[j];
        const double r = xd - sigma * rnd();  // x.delta - e
        for (int j = 0; j < d; ++j) small[j] += x[j] * r / b_small;
      }
      double sq = 0;
      for (int j = 0; j < d; ++j) {
        sq += small[j] * small[j];
        big[j] += small[j] / micro;
      }
      small_sq += sq / micro;
    }
    double big_sq = 0;
    for (double v : big) big_sq += v * v;
    const NoiseScaleStep st = noise_scale_step(small_sq, big_sq, b_small, b_big);
    g2.add(st.g2);
    s.add(st.s);
    tracker.add(st);
  }
  RecordProperty("g2", std::to_string(g2.mean) + " +- " + std::to_string(g2.se()) + " (true " + std::to_string(g2_true) + ")");
  RecordProperty("tr", std::to_string(s.mean) + " +- " + std::to_string(s.se()) + " (true " + std::to_string(tr_true) + ")");
  // Unbiased: the true values lie within 4 standard errors of the means (a false failure ~ 6e-5 each).
  EXPECT_NEAR(g2.mean, g2_true, 4 * g2.se());
  EXPECT_NEAR(s.mean, tr_true, 4 * s.se());
  // The standard errors are small enough for this to mean something: under 5% of the true values.
  EXPECT_LT(g2.se(), 0.05 * g2_true);
  EXPECT_LT(s.se(), 0.05 * tr_true);
  ASSERT_TRUE(tracker.b_simple());
  const double b_true = tr_true / g2_true;
  EXPECT_NEAR(*tracker.b_simple(), b_true, 0.25 * b_true) << "the EMA ratio, over ~1000 steps of memory";
}

TEST(NoiseScale, SingleStepsMayBeNegativeAndTheRatioWaitsForSignal) {
  // |G_s|^2 below |G_b|^2 happens by chance: S_est < 0 for that step.
  const NoiseScaleStep st = noise_scale_step(1.0, 2.0, 4, 32);
  EXPECT_LT(st.s, 0);
  EXPECT_DOUBLE_EQ(st.g2, (32 * 2.0 - 4 * 1.0) / 28);
  NoiseScaleTracker t;
  EXPECT_FALSE(t.b_simple()) << "no step yet";
  t.add({-1.0, 5.0});
  EXPECT_FALSE(t.b_simple()) << "no positive |G|^2 to divide by";
  t.add({3.0, 5.0});
  ASSERT_TRUE(t.b_simple());
  // Bias-corrected EMAs: after two steps with decay 0.95, weights 0.05*0.95 and 0.05 over 1 - 0.95^2.
  const double w1 = 0.05 * 0.95, w2 = 0.05, sum = 1 - 0.95 * 0.95;
  EXPECT_NEAR(t.g2(), (w1 * -1.0 + w2 * 3.0) / sum, 1e-12);
  EXPECT_NEAR(*t.b_simple(), 5.0 / t.g2(), 1e-12);
}

}  // namespace
}  // namespace detaudit
