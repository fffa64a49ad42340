// The training analysis (suites/train_design.cpp, analyze_training) on synthetic runs of known structure
// (issue 11). The confounding guard (defect 4): two devices of one implementation are a hardware
// comparison (not "confounded" by the device index), only a significant target effect is attributed,
// targets that never ran are left out, and a design on one machine and one device says plainly that it
// cannot attribute anything to hardware. A "nondeterministic" target that did not vary is not pooled as
// run-to-run noise (defect 1); the seed and run-to-run spreads are shown apart (defect 6); the paper's
// comparisons are tested (defect 7).
#include <gtest/gtest.h>

#include <string>

#include "suites/train_design.hpp"

namespace detaudit {
namespace {

// Condition (a) runs: `targets` x `seeds` x 2 replicates; target t adds t * effect to the final loss,
// seed s adds a little, the replicate a little less.
nlohmann::json runs_of(const std::vector<std::string>& targets, int seeds, double effect) {
  nlohmann::json runs = nlohmann::json::array();
  for (size_t t = 0; t < targets.size(); ++t)
    for (int s = 0; s < seeds; ++s)
      for (int k = 0; k < 2; ++k) {
        const double y = 0.02 + effect * double(t) + 1e-4 * ((s * 7) % 5) + 1e-5 * ((s + k * 3 + int(t)) % 4);
        runs.push_back({{"condition", "a"}, {"init", "random"}, {"nondeterminism", "on"}, {"status", "ok"},
                        {"target", targets[t]}, {"base_target", targets[t]}, {"seed", 1000 + s}, {"replicate", k}, {"final_loss", y},
                        {"curve", {1.0, 0.5, y}}, {"weights_fingerprint", std::to_string(t * 100 + s * 10 + k)},
                        {"curve_fingerprint", std::to_string(t * 100 + s * 10 + k)}});
      }
  return runs;
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
  nlohmann::json an = analyze_training(runs_of({"cuda:0?order=tree", "cuda:1?order=tree"}, 8, 0.01), two_gpus(), {});
  ASSERT_EQ(an["confounding"].size(), 1u);
  EXPECT_EQ(pair0(an)["kind"], "hardware-only");
  EXPECT_EQ(pair0(an)["implementation"][0], pair0(an)["implementation"][1]) << "the device index is not implementation";
  EXPECT_EQ(pair0(an)["attributable_to"], "hardware");
  EXPECT_FALSE(an.contains("hardware_attribution")) << "two devices: hardware can be told apart";
}

TEST(Confounding, NoSignificantEffectIsAttributedToNothing) {
  // 2 targets x 3 seeds: 8 arrangements, p can be no less than 0.25: the test has no power.
  nlohmann::json an = analyze_training(runs_of({"cuda:0?order=tree", "cuda:1?order=tree"}, 3, 0.01), two_gpus(), {});
  EXPECT_EQ(pair0(an)["could_be"], "hardware");
  EXPECT_EQ(pair0(an)["attributable_to"],
            "nothing: no significant target effect in (a) (permutation p = 0.25, no power)");
}

TEST(Confounding, OneMachineOneDeviceCannotAttributeToHardwareAndSaysSo) {
  nlohmann::json runs = runs_of({"cpu?order=atomic&threads=2", "cpu?order=atomic&threads=4"}, 8, 0.01);
  // A third target whose every run failed is no part of any comparison.
  runs.push_back({{"condition", "a"}, {"status", "crashed"}, {"target", "cpu?order=atomic&threads=3"}, {"seed", 1000},
                  {"replicate", 0}});
  nlohmann::json an = analyze_training(runs, {{"cpu_model", "AMD EPYC"}}, {});
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
  nlohmann::json runs = runs_of({"cpu?order=atomic&threads=2", "cpu?order=atomic&threads=4"}, 8, 0.01);
  for (auto& r : runs)  // the second target's replicates: bitwise identical in every seed
    if (r["target"] == "cpu?order=atomic&threads=4") {
      r["weights_fingerprint"] = "w" + std::to_string(r["seed"].get<int>());
      r["final_loss"] = 0.03 + 1e-4 * r["seed"].get<int>();
    }
  nlohmann::json an = analyze_training(runs, {{"cpu_model", "AMD EPYC"}}, {});
  const nlohmann::json& va = an["variance"][0];
  EXPECT_EQ(va["identical_replicates"], nlohmann::json::array({"cpu?order=atomic&threads=4"}));
  EXPECT_EQ(va["targets"], nlohmann::json::array({"cpu?order=atomic&threads=2"}));
  EXPECT_NE(va["identical_note"].get<std::string>().find("did not vary"), std::string::npos) << va["identical_note"];
  EXPECT_EQ(va["replicate_variance"]["identical_cells"], 0) << "the pool holds only the target that varied";
}

TEST(Confounding, SeedSpreadAndRunToRunSpreadAreShownApart) {
  nlohmann::json an = analyze_training(runs_of({"cpu?order=atomic&threads=2"}, 4, 0.0), {{"cpu_model", "x"}}, {});
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
  nlohmann::json runs = runs_of({"cpu?threads=2"}, 4, 0.0);  // condition (a): 8 runs
  for (auto& r : runs) r["base_target"] = "cpu?threads=2";
  for (int s = 0; s < 4; ++s)  // (b): one run per seed, (c) and (d): four replicates of one seed
    for (const char* c : {"b", "c", "d"})
      runs.push_back({{"condition", c}, {"status", "ok"}, {"target", "cpu?order=blocked&threads=2"},
                      {"base_target", "cpu?threads=2"}, {"seed", 1000 + s}, {"replicate", 0},
                      {"final_loss", std::string(c) == "d" ? 0.025 : 0.02 + 1e-3 * s}});
  nlohmann::json an = analyze_training(runs, {{"cpu_model", "x"}}, {});
  ASSERT_EQ(an["spread"].size(), 2u);
  EXPECT_EQ(an["spread"][0]["conditions"], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(an["spread"][0]["runs"], nlohmann::json::array({8, 4}));
  EXPECT_TRUE(an["spread"][0]["exact"].get<bool>()) << "C(12, 8) = 495 splits";
  EXPECT_EQ(an["spread"][0]["permutations"], 495);
  EXPECT_EQ(an["spread"][1]["conditions"], nlohmann::json::array({"c", "d"}));
  EXPECT_TRUE(an["spread"][1]["sd_ratio"].is_null()) << "(d) did not vary: no ratio";
}

}  // namespace
}  // namespace detaudit
