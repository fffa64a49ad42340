#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "analysis/phases.hpp"
#include "tests/test_inputs.hpp"

using namespace detaudit;

namespace {

using test_support::Normal;

constexpr std::size_t kSteps = 5000;

// loss(t) = exp(f(log t) + noise), t = 1..kSteps.
template <class F>
std::vector<double> curve(F log_loss_of_log_step, double noise, std::uint64_t seed) {
  Normal z(seed);
  std::vector<double> v(kSteps);
  for (std::size_t t = 1; t <= kSteps; ++t)
    v[t - 1] = std::exp(log_loss_of_log_step(std::log(static_cast<double>(t))) + noise * z());
  return v;
}

std::string kinds(const PhaseResult& r) {
  std::string s;
  for (const auto& seg : r.segments) s += std::string(segment_kind_name(seg.kind)) + " ";
  return s;
}

}  // namespace

TEST(Phases, PowerLawIsMonophasic) {
  const auto v = curve([](double x) { return std::log(2.0) - 0.5 * x; }, 0.02, 1);
  const PhaseResult r = detect_phases(v);
  EXPECT_EQ(r.y.size(), 1000u);
  EXPECT_EQ(r.bin_first_step.front(), 1u);
  EXPECT_EQ(r.bin_last_step.back(), kSteps);
  EXPECT_EQ(r.min_segment, 20u);
  EXPECT_EQ(r.label, "monophasic") << kinds(r);
  EXPECT_FALSE(r.has_plateau);
  EXPECT_FALSE(r.censored);
  EXPECT_FALSE(r.escape_step.has_value());
  for (const auto& s : r.segments) EXPECT_NEAR(s.slope, -0.5, 0.1);
}

TEST(Phases, NoiseFreePowerLawIsOneLine) {
  const auto v = curve([](double x) { return -0.7 * x; }, 0.0, 1);
  const PhaseResult r = detect_phases(v);
  EXPECT_EQ(r.label, "monophasic") << kinds(r);
  EXPECT_NEAR(r.segments.back().slope, -0.7, 1e-3);
}

// Flat at log loss 0 until step 800, then slope −2 in log-log. The log loss crosses
// −0.1 (plateau median − 0.1) at step 800·e^0.05 ≈ 841.
TEST(Phases, PlateauThenDropIsBiphasicWithEscapeStep) {
  const double x0 = std::log(800.0);
  const auto v = curve([&](double x) { return x < x0 ? 0.0 : -2.0 * (x - x0); }, 0.02, 2);
  const PhaseResult r = detect_phases(v);
  EXPECT_EQ(r.label, "biphasic") << kinds(r);
  ASSERT_TRUE(r.has_plateau);
  ASSERT_TRUE(r.escape_step.has_value());
  EXPECT_FALSE(r.censored);
  EXPECT_NEAR(r.plateau_median, 0.0, 0.01);
  const double true_escape = 800.0 * std::exp(0.05);
  EXPECT_NEAR(*r.escape_step, true_escape, 5.0 + 5.0);  // one 5-step bin plus noise
  const Segment& pl = r.segments[*r.plateau_segment];
  EXPECT_NEAR(pl.last_step, 800.0, 25.0);
}

// Slope −1.5 until step 300, flat until 1500, slope −2 after. Escape at 1500·e^0.05 ≈ 1577.
TEST(Phases, DropPlateauDropIsTriphasic) {
  const double x1 = std::log(300.0), x2 = std::log(1500.0);
  const auto f = [&](double x) {
    if (x < x1) return -1.5 * x;
    if (x < x2) return -1.5 * x1;
    return -1.5 * x1 - 2.0 * (x - x2);
  };
  const PhaseResult r = detect_phases(curve(f, 0.02, 3));
  EXPECT_EQ(r.label, "triphasic") << kinds(r);
  ASSERT_TRUE(r.escape_step.has_value());
  EXPECT_NEAR(*r.escape_step, 1500.0 * std::exp(0.05), 10.0);
  EXPECT_NEAR(r.plateau_median, -1.5 * x1, 0.01);
}

TEST(Phases, PlateauToTheEndIsCensored) {
  const double x1 = std::log(300.0);
  const auto v = curve([&](double x) { return x < x1 ? -1.5 * x : -1.5 * x1; }, 0.02, 4);
  const PhaseResult r = detect_phases(v);
  EXPECT_EQ(r.label, "censored") << kinds(r);
  EXPECT_TRUE(r.has_plateau);
  EXPECT_TRUE(r.censored);
  EXPECT_FALSE(r.escape_step.has_value());
  EXPECT_FALSE(r.escape_bin.has_value());
}

TEST(Phases, DropInTheLastBinsIsNotAnEscape) {
  // The drop starts 3 bins before the end: fewer than k = 5 bins below the threshold.
  const double x0 = std::log(4985.0);
  const auto v = curve([&](double x) { return x < x0 ? 0.0 : -50.0 * (x - x0); }, 0.0, 5);
  const PhaseResult r = detect_phases(v);
  EXPECT_TRUE(r.has_plateau);
  EXPECT_TRUE(r.censored);
}

TEST(Phases, ConstantCurveUsesSigmaFloor) {
  const PhaseResult r = detect_phases(std::vector<double>(3000, 0.25));
  EXPECT_TRUE(r.sigma_floored);
  EXPECT_GT(r.sigma, 0.0);
  ASSERT_EQ(r.segments.size(), 1u);
  EXPECT_EQ(r.segments[0].kind, SegmentKind::kPlateau);
  EXPECT_EQ(r.label, "censored");
  EXPECT_TRUE(r.censored);
}

TEST(Phases, ShortAndInvalidInput) {
  EXPECT_EQ(detect_phases({}).label, "insufficient");
  EXPECT_EQ(detect_phases({1.0, 0.5}).label, "insufficient");
  std::vector<double> v(200, 1.0);
  v[10] = 0.0;
  v[11] = -1.0;
  v[12] = NAN;
  const PhaseResult r = detect_phases(v);
  EXPECT_EQ(r.skipped_values, 3u);
  EXPECT_EQ(r.y.size(), 197u);  // 200 one-step bins, three of them empty
  for (double y : r.y) EXPECT_TRUE(std::isfinite(y));
}

TEST(Phases, BinningUsesEqualStepWidths) {
  std::vector<double> v(2500);
  for (std::size_t t = 0; t < v.size(); ++t) v[t] = 1.0 / static_cast<double>(t + 1);
  const PhaseResult r = detect_phases(v);
  ASSERT_EQ(r.y.size(), 1000u);
  // 2500 steps in 1000 bins: widths alternate 2 and 3 (floor(kT/nb)).
  EXPECT_EQ(r.bin_first_step[0], 1u);
  EXPECT_EQ(r.bin_last_step[0], 2u);
  EXPECT_EQ(r.bin_first_step[1], 3u);
  EXPECT_EQ(r.bin_last_step[1], 5u);
  EXPECT_DOUBLE_EQ(r.x[0], std::log(1.5));
  EXPECT_DOUBLE_EQ(r.y[0], 0.5 * (std::log(1.0) + std::log(0.5)));
}

TEST(Phases, Deterministic) {
  const double x0 = std::log(800.0);
  const auto v = curve([&](double x) { return x < x0 ? 0.0 : -2.0 * (x - x0); }, 0.05, 9);
  const PhaseResult a = detect_phases(v), b = detect_phases(v);
  ASSERT_EQ(a.segments.size(), b.segments.size());
  for (std::size_t i = 0; i < a.segments.size(); ++i) {
    EXPECT_EQ(a.segments[i].first_bin, b.segments[i].first_bin);
    EXPECT_EQ(a.segments[i].slope, b.segments[i].slope);
  }
  EXPECT_EQ(a.escape_step, b.escape_step);
  EXPECT_EQ(a.label, b.label);
}

TEST(Phases, SummaryOverRuns) {
  const double x0 = std::log(800.0), x1 = std::log(300.0);
  std::vector<RunPhases> runs;
  for (std::uint64_t s = 0; s < 3; ++s) {
    const double shift = 0.1 * static_cast<double>(s);  // drops at 800, 884, 977
    runs.push_back({"a", phase_label(detect_phases(curve([&](double x) { return x < x0 + shift ? 0.0 : -2.0 * (x - x0 - shift); }, 0.02, 10 + s)))});
  }
  runs.push_back({"a", phase_label(detect_phases(curve([&](double x) { return x < x1 ? -1.5 * x : -1.5 * x1; }, 0.02, 20)))});
  runs.push_back({"b", phase_label(detect_phases(curve([](double x) { return -0.5 * x; }, 0.02, 21)))});
  const auto sum = summarize_phases(runs);
  ASSERT_EQ(sum.size(), 2u);
  const auto& a = sum.at("a");
  EXPECT_EQ(a.runs, 4u);
  EXPECT_EQ(a.label_counts.at("biphasic"), 3u);
  EXPECT_EQ(a.label_counts.at("censored"), 1u);
  EXPECT_EQ(a.with_plateau, 4u);
  EXPECT_EQ(a.escaped, 3u);
  EXPECT_EQ(a.censored, 1u);
  ASSERT_TRUE(a.escape_median && a.escape_q25 && a.escape_q75);
  EXPECT_NEAR(*a.escape_median, 800.0 * std::exp(0.15), 10.0);
  EXPECT_LE(*a.escape_q25, *a.escape_median);
  EXPECT_GE(*a.escape_q75, *a.escape_median);
  const auto& b = sum.at("b");
  EXPECT_EQ(b.label_counts.at("monophasic"), 1u);
  EXPECT_EQ(b.escaped, 0u);
  EXPECT_FALSE(b.escape_median.has_value());
}

// Curves of known structure whose transitions are smooth, at 60 (too short to tell) to 5000 steps. A
// plateau then a smooth drop was segmented plateau -> other -> drop and labelled "other" although its
// escape was found; the label now follows the plateau and its escape.
namespace {
// loss(t) = exp(f(log t) + noise), t = 1..steps.
template <class F>
std::vector<double> curve_of(std::size_t steps, F f, double noise, std::uint64_t seed) {
  Normal z(seed);
  std::vector<double> v(steps);
  for (std::size_t t = 1; t <= steps; ++t) v[t - 1] = std::exp(f(std::log(static_cast<double>(t))) + noise * z());
  return v;
}
// A bend of width w at x0 from slope 0 to slope s: s * w * softplus((x - x0) / w).
double bend(double x, double x0, double s, double w) {
  const double u = (x - x0) / w;
  return s * w * (u > 30 ? u : std::log1p(std::exp(u)));
}
}  // namespace

TEST(Phases, SmoothEscapesAreLabelledByTheirStructureAtEveryLength) {
  int checked = 0;
  for (std::size_t steps : {60u, 150u, 300u, 1000u, 5000u})
    for (std::uint64_t seed = 1; seed <= 9; ++seed) {
      const double L = std::log(double(steps));
      // Plateau over the first 30% of the steps, then a smooth bend into a slope of -2 (the segmentation
      // bins steps linearly, so a phase is as long as its steps, whatever its span in log-step).
      const double x0 = std::log(0.3 * double(steps));
      const PhaseResult bi = detect_phases(curve_of(steps, [&](double x) { return bend(x, x0, -2.0, 0.15); }, 0.01, seed));
      if (steps < PhaseOptions{}.min_steps) {
        // Too short for any label: neither this one nor the two below gets one.
        EXPECT_EQ(bi.label, "too short to tell") << steps << " steps, seed " << seed;
        EXPECT_FALSE(bi.has_plateau || bi.escape_step || bi.censored) << steps << " steps, seed " << seed;
        ++checked;
        continue;
      }
      EXPECT_EQ(bi.label, "biphasic") << steps << " steps, seed " << seed << ": " << kinds(bi);
      EXPECT_TRUE(bi.escape_step.has_value()) << steps << " steps, seed " << seed;
      // A drop (slope -1.5 over the first 10% of the steps), a plateau, then a smooth drop from 50%.
      {
        const double x1 = std::log(0.1 * double(steps)), x2 = std::log(0.5 * double(steps));
        auto tri_f = [&](double x) { return (x < x1 ? -1.5 * x : -1.5 * x1) + bend(x, x2, -2.0, 0.15); };
        const PhaseResult tri = detect_phases(curve_of(steps, tri_f, 0.01, seed + 100));
        EXPECT_EQ(tri.label, "triphasic") << steps << " steps, seed " << seed << ": " << kinds(tri);
        EXPECT_TRUE(tri.escape_step.has_value()) << steps << " steps, seed " << seed;
      }
      // A plateau that never ends.
      const PhaseResult flat = detect_phases(curve_of(steps, [&](double x) { return bend(x, 2 * L, -2.0, 0.15); }, 0.01, seed + 200));
      EXPECT_EQ(flat.label, "censored") << steps << " steps, seed " << seed << ": " << kinds(flat);
      ++checked;
    }
  EXPECT_EQ(checked, 45);
}

// Two near-identical short curves were labelled "biphasic" and "monophasic", their first segments' slopes
// either side of the plateau rule's 0.05. Below min_steps (200) no curve gets a label; each result says how
// near its first segment was to the rule.
TEST(Phases, ShortCurvesAreTooShortToTellAndSayTheirMargin) {
  for (std::size_t steps : {100u, 150u, 199u})
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      // Slopes -0.04 and -0.06 over the first third: one side of the rule and the other.
      for (double first : {-0.04, -0.06}) {
        const double x1 = std::log(double(steps) / 3.0);
        const PhaseResult r = detect_phases(curve_of(
            steps, [&](double x) { return x < x1 ? first * x : first * x1 - 1.0 * (x - x1); }, 0.002, seed));
        EXPECT_EQ(r.label, "too short to tell") << steps << " steps, slope " << first;
        EXPECT_FALSE(r.has_plateau || r.escape_step || r.censored || r.plateau_segment);
        ASSERT_TRUE(r.first_margin.has_value());
        ASSERT_FALSE(r.segments.empty());
        EXPECT_DOUBLE_EQ(*r.first_margin, PhaseOptions{}.plateau_max_abs_slope - std::fabs(r.segments[0].slope));
      }
    }
  // At 200 steps and more a label is given, and the margin still says how near it was.
  const PhaseResult r = detect_phases(curve_of(
      2000, [](double x) { return -0.5 * x; }, 0.002, 3));
  EXPECT_EQ(r.label, "monophasic") << kinds(r);
  ASSERT_TRUE(r.first_margin.has_value());
  EXPECT_LT(*r.first_margin, 0.0) << "a slope of -0.5 is too steep for a plateau by about 0.45";
  EXPECT_NEAR(*r.first_margin, 0.05 - 0.5, 0.1);
}

// A flat stretch over 4% of the steps (steps 100 to 300 of 5000, a long span in log step) is not a plateau:
// a plateau covers at least 10% of the run's steps. Without that rule the stretch made the curve biphasic.
TEST(Phases, AFlatStretchOfFewStepsIsNotAPlateau) {
  const double a = std::log(100.0), b = std::log(300.0);
  auto f = [&](double x) { return x < a ? -0.5 * x : x < b ? -0.5 * a : -0.5 * a - 0.5 * (x - b); };
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto v = curve_of(5000, f, 0.002, seed);
    const PhaseResult r = detect_phases(v);
    for (const auto& seg : r.segments) {
      if (seg.kind == SegmentKind::kPlateau) {
        EXPECT_GE(seg.step_share, 0.1) << kinds(r);
      }
    }
    EXPECT_EQ(r.label, "monophasic") << "seed " << seed << ": " << kinds(r);
    PhaseOptions old;
    old.plateau_min_step_share = 0.0;
    const PhaseResult before = detect_phases(v, old);
    EXPECT_NE(before.label, "monophasic")
        << "the stretch is flat enough for the slope rule alone (seed " << seed << ")";
  }
}
