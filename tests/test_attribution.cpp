// The training analysis (analysis/training.cpp, analyze_training) on synthetic runs of known structure
//. The confounding guard (defect 4): two devices of one implementation are a hardware
// comparison (not "confounded" by the device index), only a significant difference is attributed (each
// pair tested on its own), targets that never ran are left out, and a design on one machine and one
// device says plainly that it cannot attribute anything to hardware. A "nondeterministic" target that
// did not vary is not pooled as run-to-run noise (defect 1); the seed and run-to-run spreads are shown
// apart (defect 6); the paper's comparisons are tested (defect 7). Merged designs (section 3): the
// machine is a factor, a hardware effect needs an identical implementation, and what differs is named.
#include <gtest/gtest.h>

#include <string>

#include "analysis/spread.hpp"
#include "analysis/stats.hpp"
#include "analysis/training.hpp"
#include "probes/registry.hpp"  // target_facts

namespace detaudit {
namespace {

TrainingRun run(const std::string& cond, const std::string& target, const std::string& base, uint64_t seed, int rep,
                double loss, const std::string& weights) {
  TrainingRun r;
  r.key = cond + "|" + target + "|" + std::to_string(seed) + "|" + std::to_string(rep);
  r.condition = cond;
  r.random_init = cond == "a" || cond == "b";
  r.nondeterministic = cond == "a" || cond == "c";
  r.target = target;
  r.base_target = base;
  r.seed = seed;
  r.replicate = rep;
  r.status = ObsStatus::kOk;
  r.final_loss = loss;
  r.curve = {1.0, 0.5, loss};
  r.weights_fingerprint = r.curve_fingerprint = weights;
  return r;
}

// Condition (a) runs: `targets` x `seeds` x 2 replicates; target t adds t * effect to the final loss,
// seed s adds a little, the replicate a little less.
std::vector<TrainingRun> runs_of(const std::vector<std::string>& targets, int seeds, double effect, int source = 0) {
  std::vector<TrainingRun> runs;
  for (size_t t = 0; t < targets.size(); ++t)
    for (int s = 0; s < seeds; ++s)
      for (int k = 0; k < 2; ++k) {
        const double y = 0.02 + effect * double(t) + 1e-4 * ((s * 7) % 5) + 1e-5 * ((s + k * 3 + int(t)) % 4);
        runs.push_back(run("a", targets[t], targets[t], 1000 + s, k, y,
                           std::to_string(source * 1000 + t * 100 + s * 10 + k)));
        runs.back().source = source;
      }
  return runs;
}

std::vector<TrainingSource> one(const nlohmann::json& machine) {
  TrainingSource s;
  s.label = "host";
  s.machine = machine;
  s.tool_version = "0.1.0";
  s.tool_commit = "abc1234";
  return {s};
}

nlohmann::json two_gpus() {
  return {{"cpu_model", "AMD EPYC"},
          {"libraries", {{"cuda_runtime", "13.0"}, {"cuda_driver", "580.1"}}},
          {"gpus",
           {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}},
            {{"index", 1}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}}}}};
}

const nlohmann::json& pair0(const nlohmann::json& an) { return an["confounding"].at(0); }

TEST(Confounding, TwoDevicesOfOneImplementationAreAHardwareComparison) {
  // 2 targets x 8 seeds, a strong effect: significant, and the implementations are identical.
  nlohmann::json an = analyze_training(runs_of({"cuda:0?order=tree", "cuda:1?order=tree"}, 8, 0.01), one(two_gpus()), target_facts);
  ASSERT_EQ(an["confounding"].size(), 1u);
  EXPECT_EQ(pair0(an)["kind"], "hardware-only");
  EXPECT_EQ(pair0(an)["implementation"][0], pair0(an)["implementation"][1]) << "the device index is not implementation";
  EXPECT_EQ(pair0(an)["attributable_to"], "hardware");
  EXPECT_EQ(pair0(an)["test"]["min_p"], 1.0 / 128) << "2 labels x 8 seed blocks: 1/2^7";
  EXPECT_EQ(an["hardware_attribution"].get<std::string>().rfind("1 pair of targets ran the same implementation on "
                                                                "different hardware: 1 with a significant difference",
                                                                0),
            0u)
      << an["hardware_attribution"];
}

TEST(Confounding, NoSignificantEffectIsAttributedToNothing) {
  // 2 targets x 3 seeds: 8 arrangements, p can be no less than 0.25: the test has no power.
  nlohmann::json an = analyze_training(runs_of({"cuda:0?order=tree", "cuda:1?order=tree"}, 3, 0.01), one(two_gpus()), target_facts);
  EXPECT_EQ(pair0(an)["could_be"], "hardware");
  EXPECT_EQ(pair0(an)["attributable_to"],
            "nothing: no significant difference between the two in (a) (permutation p = 0.25, Holm over the "
            "design's 1 test(s): 0.25, no power: the smallest attainable p is 0.25)");
  EXPECT_EQ(pair0(an)["finding"], "no_power");
}

TEST(Confounding, OneMachineOneDeviceCannotAttributeToHardwareAndSaysSo) {
  std::vector<TrainingRun> runs = runs_of({"cpu?order=atomic&threads=2", "cpu?order=atomic&threads=4"}, 8, 0.01);
  // A third target whose every run failed is no part of any comparison.
  TrainingRun crashed = run("a", "cpu?order=atomic&threads=3", "cpu?order=atomic&threads=3", 1000, 0, NAN, "");
  crashed.status = ObsStatus::kCrashed;
  runs.push_back(crashed);
  nlohmann::json an = analyze_training(runs, one({{"cpu_model", "AMD EPYC"}}), target_facts);
  ASSERT_EQ(an["confounding"].size(), 1u);
  EXPECT_EQ(pair0(an)["kind"], "implementation-only");
  EXPECT_EQ(pair0(an)["attributable_to"], "implementation");
  ASSERT_TRUE(an.contains("hardware_attribution"));
  EXPECT_EQ(an["hardware_attribution"].get<std::string>().rfind(
                "this design cannot attribute anything to hardware: every target ran on AMD EPYC (one machine, one "
                "device)",
                0),
            0u)
      << an["hardware_attribution"];
}

TEST(Confounding, AVariantThatDidNotVaryIsFlaggedAndNotPooled) {
  std::vector<TrainingRun> runs = runs_of({"cpu?order=atomic&threads=2", "cpu?order=atomic&threads=4"}, 8, 0.01);
  for (auto& r : runs)  // the second target's replicates: bitwise identical in every seed
    if (r.target == "cpu?order=atomic&threads=4") {
      r.weights_fingerprint = "w" + std::to_string(r.seed);
      r.final_loss = 0.03 + 1e-4 * double(r.seed);
    }
  nlohmann::json an = analyze_training(runs, one({{"cpu_model", "AMD EPYC"}}), target_facts);
  const nlohmann::json& va = an["variance"][0];
  EXPECT_EQ(va["identical_replicates"], nlohmann::json::array({"cpu?order=atomic&threads=4"}));
  EXPECT_EQ(va["targets"], nlohmann::json::array({"cpu?order=atomic&threads=2"}));
  EXPECT_NE(va["identical_note"].get<std::string>().find("did not vary"), std::string::npos) << va["identical_note"];
  EXPECT_EQ(va["replicate_variance"]["identical_cells"], 0) << "the pool holds only the target that varied";
}

TEST(Confounding, SeedSpreadAndRunToRunSpreadAreShownApart) {
  nlohmann::json an = analyze_training(runs_of({"cpu?order=atomic&threads=2"}, 4, 0.0), one({{"cpu_model", "x"}}), target_facts);
  const nlohmann::json& row = an["table"][0];
  // Per seed s the two replicates are y_s + 1e-5 * ((s + 0) % 4) and y_s + 1e-5 * ((s + 3) % 4).
  std::vector<double> means, within;
  for (int s = 0; s < 4; ++s) {
    const double base = 0.02 + 1e-4 * ((s * 7) % 5), r0 = base + 1e-5 * (s % 4), r1 = base + 1e-5 * ((s + 3) % 4);
    means.push_back((r0 + r1) / 2);
    within.push_back((r0 - r1) * (r0 - r1) / 2);  // the sample variance of two values
  }
  double m = 0, v = 0, w = 0;
  for (double x : means) m += x / 4;
  for (double x : means) v += (x - m) * (x - m) / 3;
  for (double x : within) w += x / 4;
  EXPECT_NEAR(row["seed_std"].get<double>(), std::sqrt(v), 1e-12);
  EXPECT_NEAR(row["run_std"].get<double>(), std::sqrt(w), 1e-12);
}

TEST(Confounding, ThePapersComparisonsAreTested) {
  std::vector<TrainingRun> runs = runs_of({"cpu?threads=2"}, 4, 0.0);  // condition (a): 8 runs
  for (int s = 0; s < 4; ++s)  // (b): one run per seed, (c) and (d): four replicates of one seed
    for (const char* c : {"b", "c", "d"})
      runs.push_back(run(c, "cpu?order=blocked&threads=2", "cpu?threads=2", 1000 + s, 0,
                         std::string(c) == "d" ? 0.025 : 0.02 + 1e-3 * s, "w"));
  nlohmann::json an = analyze_training(runs, one({{"cpu_model", "x"}}), target_facts);
  ASSERT_EQ(an["spread"].size(), 2u);
  // (a) vs (b): not a permutation of runs across seeds they share, but (a)'s seeds x runs table.
  const auto& ab = an["spread"][0];
  EXPECT_EQ(ab["conditions"], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(ab["method"], "run_seed_ratio");
  EXPECT_EQ(ab["runs"], nlohmann::json::array({8, 4}));
  EXPECT_FALSE(ab.contains("p")) << "no test that treats runs of different seeds as exchangeable";
  EXPECT_FALSE(ab.contains("sd_ratio")) << "the raw sd ratio mostly shows the design";
  EXPECT_EQ(ab["seeds"], 4);
  EXPECT_DOUBLE_EQ(ab["runs_per_seed"].get<double>(), 2.0);
  // The same numbers by hand: per seed s the runs are y_s + 1e-5 (s % 4) and y_s + 1e-5 ((s + 3) % 4).
  std::vector<double> means, within;
  for (int s = 0; s < 4; ++s) {
    const double base = 0.02 + 1e-4 * ((s * 7) % 5), r0 = base + 1e-5 * (s % 4), r1 = base + 1e-5 * ((s + 3) % 4);
    means.push_back((r0 + r1) / 2);
    within.push_back((r0 - r1) * (r0 - r1) / 2);
  }
  const double ms_run = mean(within), ms_seed = 2 * sample_variance(means);
  const double ratio = ms_run / ((ms_seed - ms_run) / 2);
  EXPECT_NEAR(ab["ratio"].get<double>(), ratio, 1e-9 * ratio);
  // The interval allows for heavy-tailed run-to-run noise: MS_run on 2/(2/4 + γ/8) degrees of freedom.
  const double d2 = 2 / (2.0 / 4 + kRunExcessKurtosis / 8);
  EXPECT_NEAR(ab["df_run"].get<double>(), d2, 1e-12);
  EXPECT_EQ(ab["kurtosis"].get<double>(), kRunExcessKurtosis);
  const double f = ms_seed / ms_run, lambda_lo = (f / f_quantile(0.975, 3, d2) - 1) / 2;
  ASSERT_TRUE(ab["ratio_ci"][1].is_number()) << ab.dump();
  EXPECT_NEAR(ab["ratio_ci"][1].get<double>(), 1 / lambda_lo, 1e-9 / lambda_lo);
  EXPECT_LT(ab["ratio_ci"][0].get<double>(), ratio);
  EXPECT_NEAR(ab["interval_factor"].get<double>(), f_quantile(0.975, 3, d2) / f_quantile(0.025, 3, d2), 1e-9);
  // (c) vs (d): runs of one set of weights, exchangeable: Brown–Forsythe, with the design's power.
  const auto& cd = an["spread"][1];
  EXPECT_EQ(cd["conditions"], nlohmann::json::array({"c", "d"}));
  EXPECT_EQ(cd["method"], "brown_forsythe");
  EXPECT_FALSE(cd.contains("sd_ratio"));
  EXPECT_TRUE(cd["exact"].get<bool>()) << "C(8, 4) = 70 splits";
  ASSERT_TRUE(cd.contains("power")) << cd.dump();
  EXPECT_GT(cd["power"]["detectable_d"].get<double>(), 0.0);
  EXPECT_FALSE(cd["power"].contains("power")) << "no power against the observed effect: it only restates p";
  // Every p of the design, Holm-corrected together.
  ASSERT_TRUE(an["tests"].is_array());
  bool saw = false;
  for (auto& t : an["tests"])
    if (t["test"].get<std::string>().find("spread (c) vs (d)") == 0) {
      saw = true;
      EXPECT_EQ(t["p"], cd["p"]);
      EXPECT_GE(t["p_holm"].get<double>(), t["p"].get<double>());
    }
  EXPECT_TRUE(saw) << an["tests"].dump();
}

// ---- merged designs (detaudit analyze): the machine is a factor ------------------------------------

// Two sources, each with condition (a) of one target and its deterministic variant in (b) and (d);
// `d_same`: the deterministic runs end in the same weights on both sources.
std::vector<TrainingRun> two_machines(double effect, int seeds, bool d_same) {
  const std::string nd = "cpu?order=atomic&threads=2", det = "cpu?order=blocked&threads=2", base = "cpu?threads=2";
  std::vector<TrainingRun> runs;
  for (int src = 0; src < 2; ++src) {
    for (auto r : runs_of({nd}, seeds, 0.0, src)) {
      r.base_target = base;
      r.final_loss += effect * src;
      runs.push_back(r);
    }
    for (int s = 0; s < seeds; ++s)
      for (const char* c : {"b", "d"}) {
        const std::string w = std::string(c) + (std::string(c) == "d" ? "" : std::to_string(s)) + (d_same ? "" : std::to_string(src));
        runs.push_back(run(c, det, base, 1000 + s, 0, 0.02, w));
        runs.back().source = src;
      }
  }
  return runs;
}

std::vector<TrainingSource> machines(const std::string& cpu0, const std::string& cpu1, const std::string& commit1) {
  std::vector<TrainingSource> s(2);
  s[0].label = "node-a", s[0].machine = {{"hostname", "node-a"}, {"cpu_model", cpu0}};
  s[1].label = "node-b", s[1].machine = {{"hostname", "node-b"}, {"cpu_model", cpu1}};
  s[0].tool_version = s[1].tool_version = "0.1.0";
  s[0].tool_commit = "abc1234";
  s[1].tool_commit = commit1;
  return s;
}

TEST(MergedDesign, EachSourceIsALevelOfTheTargetFactor) {
  nlohmann::json an = analyze_training(two_machines(0.01, 8, true), machines("AMD EPYC 9654", "Intel Xeon 8480", "abc1234"), target_facts);
  const nlohmann::json& va = an["variance"][0];
  EXPECT_EQ(va["targets"], nlohmann::json::array({"cpu?order=atomic&threads=2 @ node-a", "cpu?order=atomic&threads=2 @ node-b"}));
  ASSERT_TRUE(va.contains("anova"));
  EXPECT_EQ(an["sources"].size(), 2u);
  EXPECT_EQ(an["table"][0]["target"], "cpu?order=atomic&threads=2 @ node-a");
}

TEST(MergedDesign, SameImplementationOnTwoMachinesIsHardwareAndASignificantGapIsAttributed) {
  nlohmann::json an = analyze_training(two_machines(0.01, 8, false), machines("AMD EPYC 9654", "Intel Xeon 8480", "abc1234"), target_facts);
  ASSERT_EQ(an["confounding"].size(), 1u);
  const auto& g = pair0(an);
  EXPECT_EQ(g["kind"], "hardware-only");
  EXPECT_EQ(g["hardware"], nlohmann::json::array({"AMD EPYC 9654 in node-a", "Intel Xeon 8480 in node-b"}));
  EXPECT_FALSE(g.contains("implementation_differs"));
  EXPECT_LT(g["test"]["p"].get<double>(), 0.05);
  EXPECT_EQ(g["attributable_to"], "hardware");
  EXPECT_EQ(g["bitwise"][1]["identical_seeds"], 0) << "the planted (d) weights differ between the machines";
  EXPECT_EQ(g["deterministic"]["attributable_to"], "hardware: the same implementation gave other bits on the other hardware");
}

TEST(MergedDesign, IdenticalBitsOnTwoMachinesSayHardwareContributedExactlyZero) {
  // No gap in (a), and the deterministic variant ends in the same weights on both machines.
  nlohmann::json an = analyze_training(two_machines(0.0, 8, true), machines("AMD EPYC 9654", "Intel Xeon 8480", "abc1234"), target_facts);
  const auto& g = pair0(an);
  EXPECT_EQ(g["kind"], "hardware-only");
  EXPECT_EQ(g["bitwise"][0]["identical_seeds"], 8);
  EXPECT_EQ(g["bitwise"][1]["identical_seeds"], 8);
  EXPECT_EQ(g["attributable_to"].get<std::string>().rfind("nothing: no difference to test in (a)", 0), 0u)
      << g["attributable_to"] << ": both machines gave the same (a) losses";
  EXPECT_EQ(g["deterministic"]["kind"], "hardware-only");
  EXPECT_EQ(g["deterministic"]["attributable_to"].get<std::string>().rfind(
                "nothing: with the implementation pinned, this hardware difference contributed exactly zero", 0),
            0u)
      << g["deterministic"];
  EXPECT_NE(an["hardware_attribution"].get<std::string>().find(
                "1 whose deterministic variants gave bitwise-identical final weights"),
            std::string::npos)
      << an["hardware_attribution"];
}

TEST(MergedDesign, ADifferentCommitIsConfoundedWithImplementationAndNamed) {
  nlohmann::json an = analyze_training(two_machines(0.01, 8, false), machines("AMD EPYC 9654", "Intel Xeon 8480", "def5678"), target_facts);
  const auto& g = pair0(an);
  EXPECT_EQ(g["kind"], "both");
  EXPECT_EQ(g["implementation_differs"], "commit abc1234 vs def5678");
  EXPECT_EQ(g["attributable_to"], "confounded with implementation: commit abc1234 vs def5678");
  EXPECT_EQ(an["hardware_attribution"].get<std::string>().rfind("the hardware differs here only together with the "
                                                                "implementation",
                                                                0),
            0u);
}

// The guard exists because a retracted paper called a framework bug a hardware effect: one commit built by
// two compilers is not "the same implementation". While the build differs (compiler, C library, resolved
// ISA), the finding says "hardware or build" and names what differs, never "hardware".
TEST(MergedDesign, ACompilerDifferenceIsHardwareOrBuildNeverHardware) {
  auto srcs = machines("AMD EPYC 9654", "Intel Xeon 8480", "abc1234");
  srcs[0].machine["libraries"] = {{"compiler", "gcc 12.2.0"}, {"glibc", "2.36"}, {"cpu_isa_auto", "avx2"}};
  srcs[1].machine["libraries"] = {{"compiler", "clang 14.0.6"}, {"glibc", "2.36"}, {"cpu_isa_auto", "avx2"}};
  nlohmann::json an = analyze_training(two_machines(0.01, 8, false), srcs, target_facts);
  const auto& g = pair0(an);
  EXPECT_EQ(g["kind"], "both");
  EXPECT_EQ(g["implementation_differs"], "compiler gcc 12.2.0 vs clang 14.0.6");
  EXPECT_EQ(g["attributable_to"], "hardware or build (these differ: compiler gcc 12.2.0 vs clang 14.0.6)");
  EXPECT_EQ(g["deterministic"]["attributable_to"],
            "hardware or build (these differ: compiler gcc 12.2.0 vs clang 14.0.6)");
  EXPECT_EQ(an["hardware_attribution"].get<std::string>().rfind(
                "the hardware differs here only together with the build that selects the code (compiler gcc 12.2.0 vs "
                "clang 14.0.6): a difference is hardware or build, never hardware alone",
                0),
            0u)
      << an["hardware_attribution"];
  // For tools: one word, what differs, the p-value (Holm over the pairs) and the effect.
  EXPECT_EQ(g["finding"], "implementation");
  EXPECT_EQ(g["differs"], "compiler gcc 12.2.0 vs clang 14.0.6");
  EXPECT_TRUE(g["p"].is_number());
  EXPECT_EQ(g["p_holm"], g["p"]) << "one pair: Holm changes nothing";
  ASSERT_TRUE(g["effect"].is_object());
  EXPECT_NEAR(g["effect"]["mean_difference"].get<double>(), -0.01, 1e-12) << "node-a minus node-b";
  EXPECT_TRUE(g["effect"]["ci95"].is_array());
  EXPECT_TRUE(g["effect"]["in_seed_sd"].is_number());
  EXPECT_TRUE(g["effect"]["in_run_sd"].is_number());
  // The same build on both: hardware, as before.
  srcs[1].machine["libraries"]["compiler"] = "gcc 12.2.0";
  nlohmann::json same = analyze_training(two_machines(0.01, 8, false), srcs, target_facts);
  EXPECT_EQ(pair0(same)["attributable_to"], "hardware");
  EXPECT_EQ(pair0(same)["finding"], "hardware");
}

// Holm over the pairs: three targets, three pairs; every adjusted p is at least its raw p and the order
// of the raw p-values is kept.
TEST(Confounding, PairsAreCorrectedTogether) {
  nlohmann::json an = analyze_training(
      runs_of({"cuda:0?order=tree", "cuda:1?order=tree", "cuda:2?order=tree"}, 8, 0.01), one(two_gpus()), target_facts);
  ASSERT_EQ(an["confounding"].size(), 3u);
  // One family: the three pairs and the target effect of (a) across the three targets.
  const double m = double(an["tests"].size());
  EXPECT_EQ(m, 4);
  for (auto& g : an["confounding"]) {
    ASSERT_TRUE(g["p"].is_number()) << g;
    EXPECT_GE(g["p_holm"].get<double>(), g["p"].get<double>()) << g;
    EXPECT_LE(g["p_holm"].get<double>(), std::min(1.0, m * g["p"].get<double>()) + 1e-15) << g;
  }
}

// One question is one test: with two targets the target effect in (a) is the guard's pair test, counted
// once; the guard's attribution uses the design family's adjusted p; every test states its Holm level
// and what it detects there (noncentral t), or that it detects nothing.
TEST(Confounding, EachQuestionIsCountedOnceAndTheGuardUsesTheFamily) {
  std::vector<TrainingRun> runs = runs_of({"cuda:0?order=tree", "cuda:1?order=tree"}, 8, 0.01);
  for (int s = 0; s < 4; ++s)
    for (const char* c : {"c", "d"})
      runs.push_back(run(c, std::string(c) == "c" ? "cuda:0?order=atomic" : "cuda:0?order=tree", "cuda:0?order=tree",
                         1000, s, std::string(c) == "d" ? 0.025 : 0.02 + 1e-3 * s, "w"));
  nlohmann::json an = analyze_training(runs, one(two_gpus()), target_facts);
  int effect_a = 0, pair_rows = 0;
  for (auto& t : an["tests"]) {
    const std::string name = t["test"];
    effect_a += name == "target effect in (a)";
    ASSERT_TRUE(t["level"].is_number()) << t;
    EXPECT_EQ(t["detects_nothing"].get<bool>(), t["min_p"].get<double>() > t["level"].get<double>()) << t;
    if (!t["detects_nothing"].get<bool>() && t["power"].is_object() && t["power"].contains("n_eff")) {
      EXPECT_GT(t["detectable_d"].get<double>(), 0.0) << t;
    }
    if (t.contains("guard_pair")) {
      ++pair_rows;
      EXPECT_EQ(pair0(an)["p_holm"], t["p_holm"]) << "the guard judges by the family's adjusted p";
    }
  }
  EXPECT_EQ(effect_a, 0) << an["tests"].dump(1);
  EXPECT_EQ(pair_rows, 1);
  EXPECT_GE(an["tests"].size(), 2u) << "the pair and the spread of (c) vs (d)";
  // Holm's levels: the smallest p at 0.05/m, the largest at 0.05.
  double lo = 1, hi = 0;
  for (auto& t : an["tests"]) lo = std::min(lo, t["level"].get<double>()), hi = std::max(hi, t["level"].get<double>());
  EXPECT_DOUBLE_EQ(lo, 0.05 / double(an["tests"].size()));
  EXPECT_DOUBLE_EQ(hi, 0.05);
}

TEST(MergedDesign, TwoRunsOnOneMachineAreNoHardwareComparison) {
  // Same hostname on both: the same machine twice (the labels are unique, the hardware is not).
  std::vector<TrainingSource> s = machines("AMD EPYC 9654", "AMD EPYC 9654", "abc1234");
  s[1].machine["hostname"] = "node-a";
  s[1].label = "node-a#2";
  nlohmann::json an = analyze_training(two_machines(0.0, 8, true), s, target_facts);
  EXPECT_EQ(pair0(an)["kind"], "neither");
  EXPECT_EQ(pair0(an)["attributable_to"], "nothing: same hardware and implementation (run-to-run variation only)");
  EXPECT_EQ(an["hardware_attribution"].get<std::string>().rfind("this design cannot attribute anything to hardware", 0), 0u);
}

TEST(MergedDesign, ImplementationDifferenceNamesLibraryVersions) {
  TrainingSource x, y;
  x.tool_version = y.tool_version = "0.1.0";
  x.tool_commit = y.tool_commit = "c";
  x.machine = {{"libraries", {{"openblas", "0.3.21"}, {"openblas_core", "Haswell"}}}};
  y.machine = {{"libraries", {{"openblas", "0.3.26"}, {"openblas_core", "Haswell"}}}};
  EXPECT_EQ(implementation_difference("openblas", x, "openblas", y, target_facts), "openblas 0.3.21 vs 0.3.26");
  EXPECT_EQ(implementation_difference("cuda:0?order=tree", x, "cuda:1?order=tree", x, target_facts), "") << "device index is hardware";
  EXPECT_EQ(implementation_of("cuda:0?order=tree", x, target_facts), implementation_of("cuda:3?order=tree", x, target_facts));
}

TEST(MergedDesign, PortableTargetsPinTheImplementationAcrossCpuAndGpu) {
  // One machine with a GPU: cpu and cuda portable bases; the nondeterministic variants (atomic) are two
  // implementations, the deterministic ones (portable) one, and their (b)/(d) bits agree.
  std::vector<TrainingRun> runs;
  for (const auto& [base, nd] : {std::pair<std::string, std::string>{"cpu?order=portable&threads=2", "cpu?order=atomic&threads=2"},
                                 {"cuda:0?order=portable", "cuda:0?order=atomic"}}) {
    for (auto r : runs_of({nd}, 8, 0.0)) {
      r.base_target = base;
      runs.push_back(r);
    }
    for (int s = 0; s < 8; ++s)
      for (const char* c : {"b", "d"}) runs.push_back(run(c, base, base, 1000 + s, 0, 0.02, std::string(c) + std::to_string(s)));
  }
  nlohmann::json an = analyze_training(runs, one(two_gpus()), target_facts);
  ASSERT_EQ(an["confounding"].size(), 1u);
  const auto& g = pair0(an);
  EXPECT_EQ(g["kind"], "both") << "atomic on cpu and on cuda are two implementations";
  EXPECT_EQ(g["deterministic"]["kind"], "hardware-only");
  EXPECT_EQ(g["deterministic"]["implementation"][0], g["deterministic"]["implementation"][1]);
  EXPECT_TRUE(g["deterministic"]["bitwise_identical"].get<bool>());
  EXPECT_EQ(g["deterministic"]["attributable_to"].get<std::string>().rfind(
                "nothing: with the implementation pinned, this hardware difference contributed exactly zero", 0),
            0u);
  TrainingSource x = one(two_gpus())[0];
  EXPECT_EQ(implementation_difference("cpu?order=portable&threads=4&isa=avx2", x, "cuda:1?order=portable", x, target_facts), "");
  EXPECT_NE(implementation_difference("cpu?order=blocked&threads=4", x, "cuda:1?order=tree", x, target_facts), "");
}

}  // namespace
}  // namespace detaudit
