// The two tests `check` judges training cells with (analysis/shift.hpp), on known inputs and on the final
// losses of a real design (tests/data/sony2021-final-losses.json): an unchanged machine fails at most 5%
// of checks, a 20% regression in (a) and a changed bit in (b) always fail.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/resampling.hpp"
#include "analysis/shift.hpp"
#include "gates/baseline.hpp"
#include "gates/check.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;

namespace {

TEST(Shift, ExactPermutationOnKnownInputs) {
  // One seed, baseline {1, 2}, new {3, 4}: of the C(4, 2) = 6 labellings, |mean(new) - mean(rest)| is 2
  // for {3, 4} and {1, 2}, 1 for {1, 3} and {2, 4}, 0 for {1, 4} and {2, 3}: p = 2/6, and 2/6 is also the
  // smallest p this design can reach.
  ShiftTest t = shift_test({SeedRuns{{1, 2}, {3, 4}}});
  EXPECT_EQ(t.seeds, 1);
  EXPECT_DOUBLE_EQ(t.shift, 2.0);
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.p, 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(t.min_p, 2.0 / 6.0);
  // Pooled within-seed sd: deviations ±0.5 on both sides, df 2: sqrt(1/2).
  EXPECT_EQ(t.within_df, 2);
  EXPECT_NEAR(t.within_sd, std::sqrt(0.5), 1e-15);
  // Two seeds with opposite shifts cancel: no shift, p = 1.
  ShiftTest c = shift_test({SeedRuns{{1, 2}, {3, 4}}, SeedRuns{{3, 4}, {1, 2}}});
  EXPECT_DOUBLE_EQ(c.shift, 0.0);
  EXPECT_DOUBLE_EQ(c.p, 1.0);
  // A seed with runs on one side only takes no part.
  EXPECT_EQ(shift_test({SeedRuns{{1, 2}, {}}, SeedRuns{{1, 2}, {3, 4}}}).seeds, 1);
}

// Exact means exact: losses that repeat bit for bit (a nondeterministic target jumping between a few
// values) make many arrangements tie, and rounding must not split a tie. Each seed's losses are a base
// value moved by a few ULPs (the base's binade holds them all), so the statistic of an arrangement is, up
// to a positive factor, the integer sum over seeds of (n·Σ new ULPs − k·Σ all ULPs): the reference counts
// it in integers, independently of the test's own scaling.
TEST(Shift, ExactPValueEqualsAnEnumerationOnTiedData) {
  const double base = 0.0073;
  auto ulps = [&](int j) {
    double x = base;
    for (int i = 0; i < j; ++i) x = std::nextafter(x, 1.0);
    return x;
  };
  std::mt19937_64 g(37);
  for (int trial = 0; trial < 20; ++trial) {
    // 4 seeds of 3 + 3 runs (C(6,3)^4 = 160,000 arrangements), each loss one of 0, 1, 2 or 5 ULPs up.
    const int levels[] = {0, 1, 2, 5};
    std::vector<std::vector<int>> u(4);
    std::vector<SeedRuns> fwd(4), back(4);
    for (int j = 0; j < 4; ++j) {
      for (int i = 0; i < 6; ++i) u[j].push_back(levels[g() % 4]);
      for (int i = 0; i < 3; ++i) fwd[j].base.push_back(ulps(u[j][i])), back[j].now.push_back(ulps(u[j][i]));
      for (int i = 3; i < 6; ++i) fwd[j].now.push_back(ulps(u[j][i])), back[j].base.push_back(ulps(u[j][i]));
    }
    // The reference: every arrangement's integer statistic.
    auto stat = [&](const std::vector<std::vector<char>>& masks) {
      long long z = 0;
      for (int j = 0; j < 4; ++j) {
        long long s = 0, t = 0;
        for (int i = 0; i < 6; ++i) s += masks[j][i] ? u[j][i] : 0, t += u[j][i];
        z += 6 * s - 3 * t;
      }
      return z < 0 ? -z : z;
    };
    std::vector<std::vector<char>> obs(4, {0, 0, 0, 1, 1, 1});
    const long long observed = stat(obs);
    std::vector<std::vector<char>> all;  // the 20 masks of one seed
    std::vector<char> m = {1, 1, 1, 0, 0, 0};
    do all.push_back(m);
    while (std::prev_permutation(m.begin(), m.end()));
    ASSERT_EQ(all.size(), 20u);
    long long hits = 0, n = 0, top = 0, at_top = 0;
    for (auto& a : all)
      for (auto& b : all)
        for (auto& c : all)
          for (auto& d : all) {
            const long long z = stat({a, b, c, d});
            ++n, hits += z >= observed;
            if (z > top) top = z, at_top = 0;
            at_top += z == top;
          }
    ASSERT_EQ(n, 160000);
    const ShiftTest t = shift_test(fwd), r = shift_test(back);
    EXPECT_TRUE(t.exact && t.integer);
    EXPECT_EQ(t.p, double(hits) / 160000.0) << "trial " << trial;
    EXPECT_EQ(t.min_p, double(at_top) / 160000.0) << "trial " << trial;
    EXPECT_EQ(r.p, t.p) << "trial " << trial << ": swapping baseline and new runs changed p";
    EXPECT_EQ(r.min_p, t.min_p);
  }
}

// The floor counted in closed form equals the enumeration's, ties included; above kExactArrangements it
// is still exact (every seed at its extreme), where the draws' p cannot go below 1/(1 + kDraws).
TEST(Shift, FloorIsCountedExactly) {
  // One seed {1, 1, 2} + {2, 2, 3}: the largest |Z| is reached by new = {2, 2, 3} in C(3, 2) = 3 ways
  // (any two of the three 2s with the 3) and by new = {1, 1, 2} in 3 ways: 6 of C(6, 3) = 20.
  EXPECT_DOUBLE_EQ(shift_test({SeedRuns{{1, 1, 2}, {2, 2, 3}}}).min_p, 6.0 / 20.0);
  // All equal: every arrangement gives 0, floor 1, p 1.
  const ShiftTest flat = shift_test({SeedRuns{{4, 4}, {4, 4}}});
  EXPECT_EQ(flat.min_p, 1.0);
  EXPECT_EQ(flat.p, 1.0);
  // 8 seeds of 3 + 3 runs: 20^8 arrangements, drawn; the floor 2/20^8 is below the draws' own.
  std::vector<SeedRuns> big;
  for (int j = 0; j < 8; ++j) big.push_back({{1.0 + j, 2.0 + j, 3.0 + j}, {4.0 + j, 5.0 + j, 6.0 + j}});
  const ShiftTest b = shift_test(big);
  EXPECT_FALSE(b.exact);
  EXPECT_DOUBLE_EQ(b.min_p, 1.0 / double(1 + kDraws));
  EXPECT_DOUBLE_EQ(b.p, 1.0 / double(1 + kDraws));  // the observed is the extreme: no draw reaches it
  EXPECT_DOUBLE_EQ(design_floor(3, 2, 2), 2.0 / 216.0);
  EXPECT_DOUBLE_EQ(design_floor(1, 6, 6), 2.0 / 924.0);
  const JudgeableDesign need = judgeable_design(1, 3, 3, 0.025);
  EXPECT_EQ(need.runs_per_side, 5);  // C(10, 5) = 252: 2/252 = 0.0079; C(8, 4) = 70: 0.029
  EXPECT_EQ(need.seeds, 2);          // 20^2 = 400: 0.005
}

// The shift a finding states is the one its test detects with power 0.8: simulated afresh (other noise
// than detectable_shift's own) on the default design, 3 seeds of 2 + 2 runs at 0.025, and on 4 seeds of
// 3 + 3 (the noncentral t), a normal shift of that size is caught in 0.7 to 0.9 of checks; a design whose
// floor is above the level detects nothing.
TEST(Shift, StatedDetectableShiftIsCaughtAtItsPower) {
  std::mt19937_64 g(4242);
  auto normal = [&]() {
    const double u1 = (double(g() >> 11) + 1) * 0x1p-53, u2 = double(g() >> 11) * 0x1p-53;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  };
  for (const auto& shape : {std::tuple{3, 2, 0.025}, std::tuple{4, 3, 0.05}}) {
    // Plain copies: clang 14 (the sanitizer build's) cannot capture a structured binding in a lambda.
    const int seeds = std::get<0>(shape), runs = std::get<1>(shape);
    const double level = std::get<2>(shape);
    auto design = [&](double shift) {
      std::vector<SeedRuns> d(static_cast<size_t>(seeds));
      for (auto& s : d)
        for (int i = 0; i < runs; ++i) s.base.push_back(0.01 + 1e-6 * normal()), s.now.push_back(0.01 + shift + 1e-6 * normal());
      return d;
    };
    // The stated shift is in units of the design's own sd estimate: per run-to-run sd, applied to
    // designs whose true sd is 1e-6.
    const ShiftTest unit = shift_test(design(0));
    const double per_sd = detectable_shift(unit, level) / unit.within_sd;
    ASSERT_TRUE(std::isfinite(per_sd)) << seeds << "x" << runs;
    int caught = 0;
    const int trials = 300;
    for (int k = 0; k < trials; ++k) caught += shift_test(design(per_sd * 1e-6)).p <= level;
    const double power = double(caught) / trials;
    RecordProperty(fmt::format("power_{}x{}", seeds, runs), fmt::format("{:.3f}", power));
    EXPECT_GE(power, 0.7) << seeds << "x" << runs << ": " << per_sd << " sds";
    EXPECT_LE(power, 0.9) << seeds << "x" << runs << ": " << per_sd << " sds";
  }
  // One seed of 2 + 2 runs: a floor of 1/3 detects nothing at 0.05.
  EXPECT_TRUE(std::isnan(detectable_shift(shift_test({SeedRuns{{1, 2}, {3, 4}}}), 0.05)));
}

TEST(Shift, EquivalenceOnKnownInputs) {
  // Differences 0.1, 0.2, 0.3 over three seeds: mean 0.2, sd 0.1, t_{2,0.95} = 2.919985580: the 90%
  // interval 0.2 ± 0.168585 = [0.031415, 0.368585].
  std::vector<SeedRuns> s = {{{1.0}, {1.1}}, {{2.0}, {2.2}}, {{3.0}, {3.3}}};
  EquivalenceTest wide = equivalence_test(s, 0.5, 0.05);
  EXPECT_EQ(wide.outcome, Equivalence::kEquivalent);
  EXPECT_NEAR(wide.mean_diff, 0.2, 1e-12);
  EXPECT_NEAR(wide.sd_diff, 0.1, 1e-12);
  EXPECT_NEAR(wide.hi - wide.mean_diff, 2.919985580 * 0.1 / std::sqrt(3.0), 1e-8);
  EXPECT_EQ(equivalence_test(s, 0.02, 0.05).outcome, Equivalence::kDifferent);  // wholly above +0.02
  EquivalenceTest mid = equivalence_test(s, 0.3, 0.05);                         // 0.3 inside the interval
  EXPECT_EQ(mid.outcome, Equivalence::kInconclusive);
  EXPECT_GT(mid.seeds_needed, 3);
  EXPECT_EQ(equivalence_test({{{1.0}, {1.1}}}, 0.5, 0.05).outcome, Equivalence::kNotJudged);
}

// ---- real final losses -----------------------------------------------------------------------------

struct RealRun {
  std::string condition, weights;
  uint64_t seed;
  int replicate;
  double loss;
};

std::vector<RealRun> real_runs() {
  std::ifstream f(std::string(DETAUDIT_SOURCE_DIR) + "/tests/data/sony2021-final-losses.json");
  nlohmann::json j = nlohmann::json::parse(f);
  std::vector<RealRun> v;
  for (auto& r : j["runs"])
    v.push_back({r["condition"], r["weights_fingerprint"], r["seed"], r["replicate"], r["final_loss"]});
  return v;
}

TrainingRun as_run(const RealRun& x, double scale = 1.0) {
  TrainingRun t;
  t.model = "autoencoder";
  t.design = "sony2021";
  t.condition = x.condition;
  t.random_init = x.condition == "a" || x.condition == "b";
  t.nondeterministic = x.condition == "a" || x.condition == "c";
  t.target = test::canon_target(t.nondeterministic ? "cpu?order=atomic&threads=2" : "cpu?order=blocked&threads=2");
  t.seed = x.seed;
  t.replicate = x.replicate;
  t.key = fmt::format("{}|{}|{}|{}", t.condition, t.target, t.seed, t.replicate);
  t.status = ObsStatus::kOk;
  t.final_loss = x.loss * scale;
  t.curve = {t.final_loss};
  t.weights_fingerprint = x.weights;
  return t;
}

Results results_of(const std::vector<RealRun>& runs, double scale = 1.0) {
  Results r;
  r.machine = test::machine_json();
  r.plan = {{"kind", "train"}};
  for (auto& x : runs) r.training.push_back(as_run(x, scale));
  return r;
}

const CheckFinding* shift_finding(const CheckReport& rep) {
  for (auto& f : rep.findings)
    if (f.kind == FindingKind::kTrainingShift || f.kind == FindingKind::kTrainingNotJudged) return &f;
  return nullptr;
}

// Splits of one condition's real runs into a baseline (`base_of` of each seed's n runs) and new runs,
// seed by seed: `splits` labellings drawn with a fixed seed. Returns how many checks FAILed, for the new
// runs scaled by `scale`.
int failures(const std::vector<RealRun>& runs, int splits, double scale, size_t (*base_of)(size_t),
             std::vector<std::string>* messages) {
  std::map<uint64_t, std::vector<RealRun>> by_seed;
  for (auto& r : runs) by_seed[r.seed].push_back(r);
  std::mt19937_64 g(20261204);
  int fails = 0;
  for (int k = 0; k < splits; ++k) {
    std::vector<RealRun> base, now;
    for (auto& [seed, v] : by_seed) {
      std::vector<RealRun> w = v;
      resampling::fisher_yates(w, g);
      for (size_t i = 0; i < w.size(); ++i) (i < base_of(w.size()) ? base : now).push_back(w[i]);
    }
    // The new half's replicates renumbered, as a new run of the design would number them.
    for (size_t i = 0; i < now.size(); ++i) now[i].replicate = int(i);
    Baseline b = make_baseline(results_of(base), "base", "t");
    CheckReport rep = check_against_baseline(b, results_of(now, scale), "now", "b");
    fails += rep.decision() == Decision::kFail;
    if (messages && k < 3)
      if (auto* f = shift_finding(rep)) messages->push_back(f->message);
  }
  return fails;
}

TEST(Shift, RealFinalLossesUnchangedPassAndRegressionsFail) {
  const std::vector<RealRun> all = real_runs();
  std::vector<RealRun> a, c, b;
  for (auto& r : all) (r.condition == "a" ? a : r.condition == "c" ? c : r.condition == "b" ? b : a).push_back(r);
  a.erase(std::remove_if(a.begin(), a.end(), [](const RealRun& r) { return r.condition != "a"; }), a.end());
  ASSERT_EQ(a.size(), 48u);  // 12 seeds x 4 replicates
  ASSERT_EQ(c.size(), 12u);  // fixed init: 12 runs of one seed
  ASSERT_EQ(b.size(), 12u);

  // (a): 200 random halvings (2 of each seed's 4 runs as baseline, 24 in all). Unchanged: at most 5% fail.
  std::vector<std::string> said;
  const int splits = 200;
  auto half = [](size_t n) { return n / 2; };
  auto ten = [](size_t n) { return n - 2; };  // (c): 10 of its 12 runs as baseline, 2 new
  const int a_unchanged = failures(a, splits, 1.0, half, &said);
  const int c_unchanged = failures(c, splits, 1.0, ten, nullptr);
  // +20% on the new runs: every check fails.
  const int a_regressed = failures(a, 50, 1.2, half, nullptr), c_regressed = failures(c, 50, 1.2, ten, nullptr);
  RecordProperty("a_unchanged_failures", a_unchanged);
  RecordProperty("c_unchanged_failures", c_unchanged);
  std::printf("real (a): %d of %d unchanged checks failed, %d of 50 with +20%% failed; real (c): %d of %d, %d of 50\n",
              a_unchanged, splits, a_regressed, c_unchanged, splits, c_regressed);
  for (auto& m : said) std::printf("  %s\n", m.c_str());
  EXPECT_LE(a_unchanged, splits * 5 / 100);
  EXPECT_LE(c_unchanged, splits * 5 / 100);
  EXPECT_EQ(a_regressed, 50);
  EXPECT_EQ(c_regressed, 50);
  // The finding states what the check can detect at its run count.
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find("this check detects a shift of"), std::string::npos) << said[0];

  // (b) on the same key: the baseline is the runs themselves; one bit of one run changed fails.
  Baseline bb = make_baseline(results_of(b), "b", "t");
  EXPECT_EQ(check_against_baseline(bb, results_of(b), "now", "b").decision(), Decision::kPass);
  std::vector<RealRun> flipped = b;
  flipped[5].loss = std::nextafter(flipped[5].loss, 1.0);
  EXPECT_EQ(check_against_baseline(bb, results_of(flipped), "now", "b").decision(), Decision::kFail);
}

}  // namespace
