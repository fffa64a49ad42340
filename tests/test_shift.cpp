// The two tests `check` judges training cells with (analysis/shift.hpp), on known inputs and on the final
// losses of a real design (tests/data/sony2021-final-losses.json): an unchanged machine fails at most 5%
// of checks, a 20% regression in (a) and a changed bit in (b) always fail.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
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
  ShiftTest t = shift_test({SeedRuns{{1, 2}, {3, 4}}}, 0.05);
  EXPECT_EQ(t.seeds, 1);
  EXPECT_DOUBLE_EQ(t.shift, 2.0);
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.p, 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(t.min_p, 2.0 / 6.0);
  // Pooled within-seed sd: deviations ±0.5 on both sides, df 2: sqrt(1/2).
  EXPECT_EQ(t.within_df, 2);
  EXPECT_NEAR(t.within_sd, std::sqrt(0.5), 1e-15);
  // Two seeds with opposite shifts cancel: no shift, p = 1.
  ShiftTest c = shift_test({SeedRuns{{1, 2}, {3, 4}}, SeedRuns{{3, 4}, {1, 2}}}, 0.05);
  EXPECT_DOUBLE_EQ(c.shift, 0.0);
  EXPECT_DOUBLE_EQ(c.p, 1.0);
  // A seed with runs on one side only takes no part.
  EXPECT_EQ(shift_test({SeedRuns{{1, 2}, {}}, SeedRuns{{1, 2}, {3, 4}}}, 0.05).seeds, 1);
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
    fails += rep.exit_code();
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
  EXPECT_EQ(check_against_baseline(bb, results_of(b), "now", "b").exit_code(), 0);
  std::vector<RealRun> flipped = b;
  flipped[5].loss = std::nextafter(flipped[5].loss, 1.0);
  EXPECT_EQ(check_against_baseline(bb, results_of(flipped), "now", "b").exit_code(), 1);
}

}  // namespace
