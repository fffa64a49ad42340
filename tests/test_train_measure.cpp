// What a training run measures besides its loss (suites/train_measure.hpp): condition (e)'s one-ULP
// nudge, the gradient noise of `train --noise-scale`, and their analysis (analysis/training.cpp: the
// B_hw rows, condition (e) beside (c) and (b)).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "analysis/noise_scale.hpp"
#include "analysis/training.hpp"
#include "probes/registry.hpp"  // target_facts
#include "kernels/cpu/native.hpp"
#include "kernels/cpu/ref.hpp"
#include "models/autoencoder.hpp"
#include "models/prednet_train.hpp"
#include "models/sprites.hpp"
#include "suites/train_data.hpp"
#include "suites/train_measure.hpp"
#include "tests/test_inputs.hpp"
#include "tests/training_helpers.hpp"

namespace detaudit {
namespace {

std::unique_ptr<Backend> blocked() {
  CpuNativeOptions o;
  o.threads = 2;
  o.order = ReduceOrder::kBlocked;
  return make_cpu_native(o);
}

std::vector<float> all_weights(Autoencoder& m) {
  std::vector<float> all, part;
  for (Tensor* t : m.params()) {
    EXPECT_TRUE(t->download(&part));
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

TEST(TrainMeasure, NoiseMeasurementChangesNoBitOfTheRunAndADeterministicTargetHasNoHardwareNoise) {
  auto be = blocked();
  TrainConfig cfg;
  cfg.init_seed = 1000;
  cfg.batches = 12;
  cfg.batch_size = 16;
  TrainResult plain, measured;
  ASSERT_TRUE(train_autoencoder(*be, test_support::training_data(), cfg, {}, &plain));
  NoiseMeter meter(3, cfg.batch_size, cfg.batches, 64);
  TrainCallbacks cb;
  cb.after_backward = [&](int step, Autoencoder& m, const Tensor& batch) { return meter.after_backward(step, m, batch); };
  ASSERT_TRUE(train_autoencoder(*be, test_support::training_data(), cfg, cb, &measured));
  EXPECT_EQ(measured.final_weights.hex(), plain.final_weights.hex()) << "measuring changed the run";
  ASSERT_EQ(measured.curve.size(), plain.curve.size());
  EXPECT_EQ(std::memcmp(measured.curve.data(), plain.curve.data(), plain.curve.size() * sizeof(float)), 0);

  const NoiseTrace& t = meter.trace();
  EXPECT_EQ(t.every, 3);
  EXPECT_EQ(t.b_big, 16);
  EXPECT_EQ(t.b_small, 4);
  ASSERT_EQ(t.points.size(), 4u);
  for (size_t i = 0; i < t.points.size(); ++i) {
    EXPECT_EQ(t.points[i].step, 1 + 3 * i);
    EXPECT_GT(t.points[i].big_sq, 0);
    EXPECT_GT(t.points[i].small_sq, 0);
    ASSERT_TRUE(t.points[i].hw_sq) << "4 points, up to 6 hardware points: every one";
    EXPECT_EQ(*t.points[i].hw_sq, 0.0) << "order=blocked computes the same bits twice";
  }
}

// PredNet's noise measurements (batch 4: two microbatches of 2, from a second PredNet given the model's
// weights): the run keeps every bit; order=blocked repeats its gradient exactly; and the microbatches are
// the batch's own samples at the model's weights. Where all sequences are the same one, each
// microbatch's gradient is the batch's, so the mean squared microbatch norm equals the batch's squared
// norm (to rounding); on distinct sequences it exceeds it (mean |g_m|^2 - |mean g_m|^2 is their spread).
TEST(TrainMeasure, PrednetNoiseComesFromTheBatchsOwnMicrobatchesAndChangesNoBit) {
  auto be = blocked();
  PredNetTrainConfig cfg;
  ASSERT_TRUE(prednet_config("tiny", 4, &cfg.net));
  cfg.batches = 5;
  SpriteConfig sc;
  sc.frames = cfg.net.nt, sc.rows = cfg.net.height, sc.cols = cfg.net.width;
  VideoSet train, held;
  ASSERT_TRUE(make_moving_sprites(test_support::training_data(), sc, 3, 0, 8, &train));
  ASSERT_TRUE(make_moving_sprites(test_support::training_data(), sc, 3, 100, 4, &held));
  VideoSet same = train;
  for (int n = 1; n < same.count; ++n)
    std::copy(same.pixels.begin(), same.pixels.begin() + ptrdiff_t(same.pixels_per_sequence()),
              same.pixels.begin() + ptrdiff_t(n * same.pixels_per_sequence()));

  PredNetTrainResult plain, measured, alike;
  ASSERT_TRUE(train_prednet(*be, train, held, cfg, {}, &plain));
  NoiseMeter meter(2, 4, cfg.batches, 64), meter_same(2, 4, cfg.batches, 64);
  PredNetCallbacks cb, cb_same;
  cb.after_backward = [&](int step, PredNet& m, const Tensor& f) { return meter.after_backward(step, m, f); };
  cb_same.after_backward = [&](int step, PredNet& m, const Tensor& f) { return meter_same.after_backward(step, m, f); };
  ASSERT_TRUE(train_prednet(*be, train, held, cfg, cb, &measured));
  ASSERT_TRUE(train_prednet(*be, same, held, cfg, cb_same, &alike));
  EXPECT_EQ(measured.final_weights.hex(), plain.final_weights.hex()) << "measuring changed the run";
  ASSERT_EQ(measured.curve.size(), plain.curve.size());
  EXPECT_EQ(std::memcmp(measured.curve.data(), plain.curve.data(), plain.curve.size() * sizeof(float)), 0);

  for (const NoiseMeter* m : {&meter, &meter_same}) {
    const NoiseTrace& t = m->trace();
    EXPECT_EQ(t.b_big, 4);
    EXPECT_EQ(t.b_small, 2);
    ASSERT_EQ(t.points.size(), 3u) << "batches 1, 3, 5";
    for (const NoisePoint& p : t.points) {
      EXPECT_GT(p.big_sq, 0);
      ASSERT_TRUE(p.hw_sq);
      EXPECT_EQ(*p.hw_sq, 0.0) << "order=blocked computes the same bits twice";
    }
  }
  for (const NoisePoint& p : meter_same.trace().points)
    EXPECT_NEAR(p.small_sq / p.big_sq, 1.0, 1e-4) << "step " << p.step << ": one sequence four times";
  for (const NoisePoint& p : meter.trace().points)
    EXPECT_GT(p.small_sq / p.big_sq, 1.001) << "step " << p.step << ": distinct sequences";
}

TEST(TrainMeasure, HardwarePointsAreAtMostSixEvenlySpread) {
  auto be = blocked();
  TrainConfig cfg;
  cfg.batches = 13;
  cfg.batch_size = 8;
  NoiseMeter meter(1, cfg.batch_size, cfg.batches, 64);
  TrainCallbacks cb;
  cb.after_backward = [&](int step, Autoencoder& m, const Tensor& batch) { return meter.after_backward(step, m, batch); };
  TrainResult r;
  ASSERT_TRUE(train_autoencoder(*be, test_support::training_data(), cfg, cb, &r));
  std::vector<uint64_t> hw;
  for (auto& p : meter.trace().points)
    if (p.hw_sq) hw.push_back(p.step);
  EXPECT_EQ(meter.trace().points.size(), 13u);
  EXPECT_EQ(hw, (std::vector<uint64_t>{1, 4, 7, 10, 13})) << "13 points, stride ceil(13/6) = 3";
}

// On the real autoencoder (Fashion-MNIST when installed), B_simple comes out finite and positive once the
// moving averages hold a few points.
TEST(TrainMeasure, BSimpleOfTheAutoencoderIsFiniteAndPositive) {
  auto be = blocked();
  TrainConfig cfg;
  cfg.batches = 40;
  cfg.batch_size = 32;
  NoiseMeter meter(4, cfg.batch_size, cfg.batches, 64);
  TrainCallbacks cb;
  cb.after_backward = [&](int step, Autoencoder& m, const Tensor& batch) { return meter.after_backward(step, m, batch); };
  TrainResult r;
  ASSERT_TRUE(train_autoencoder(*be, test_support::training_data(), cfg, cb, &r));
  const NoiseSeries s = noise_series(meter.trace(), kNoiseEmaDecay);
  ASSERT_EQ(s.b_simple.size(), 10u);
  EXPECT_TRUE(std::isfinite(s.b_simple.back()));
  EXPECT_GT(s.b_simple.back(), 0);
  EXPECT_GT(s.g2.back(), 0);
  EXPECT_GT(s.trace.back(), 0);
}

// The weight counts a results.json's nudges are held to are the models' own.
TEST(TrainMeasure, ModelWeightsAreTheModelsOwn) {
  auto be = blocked();
  Autoencoder a(be.get());
  ASSERT_TRUE(a.init(1000));
  uint64_t n = 0;
  for (Tensor* t : a.params()) n += t->size();
  EXPECT_EQ(model_weights("autoencoder", ""), n);
  for (const char* name : {"quick", "tiny", "paper"}) {
    PredNetConfig c;
    ASSERT_TRUE(prednet_config(name, 4, &c));
    PredNet p(be.get(), c);
    ASSERT_TRUE(p.init(1000));
    n = 0;
    for (Tensor* t : p.params()) n += t->size();
    EXPECT_EQ(model_weights("prednet", name), n) << name;
  }
  EXPECT_EQ(model_weights("prednet", "huge"), 0u);
  EXPECT_EQ(model_weights("resnet", ""), 0u);
}

TEST(TrainMeasure, NudgesMoveOneDifferentKernelWeightByOneUlpTheSameOnEveryBackend) {
  auto be = blocked();
  auto ref = make_cpu_ref();
  std::set<uint64_t> picked;
  for (uint64_t k = 0; k < 6; ++k) {
    Autoencoder base(be.get()), nudged(be.get()), on_ref(ref.get());
    ASSERT_TRUE(base.init(1000));
    ASSERT_TRUE(nudged.init(1000));
    ASSERT_TRUE(on_ref.init(1000));
    WeightNudge n, n_ref;
    ASSERT_TRUE(nudge_weight(nudged, k, &n));
    ASSERT_TRUE(nudge_weight(on_ref, k, &n_ref));
    EXPECT_EQ(to_json(n), to_json(n_ref)) << "nudge " << k << " depends on the backend";
    EXPECT_EQ(n.index, k);
    EXPECT_TRUE(picked.insert(n.parameter).second) << "nudge " << k << " moved a weight an earlier one moved";
    EXPECT_NE(n.tensor.find("weight"), std::string::npos) << n.tensor;
    const std::vector<float> a = all_weights(base), b = all_weights(nudged);
    ASSERT_EQ(a.size(), b.size());
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
        ++differ;
        EXPECT_EQ(i, n.parameter);
        EXPECT_EQ(b[i], std::nextafter(a[i], INFINITY));
        EXPECT_EQ(double(a[i]), n.from);
        EXPECT_EQ(double(b[i]), n.to);
      }
    EXPECT_EQ(differ, 1u);
  }
}

nlohmann::json run_json(const std::string& cond, const std::string& target, int rep, double loss) {
  return {{"key", cond + "|" + target + "|1000|" + std::to_string(rep)},
          {"model", "autoencoder"},
          {"design", "sony2021"},
          {"condition", cond},
          {"init", cond == "a" || cond == "b" ? "random" : "fixed"},
          {"nondeterminism", cond == "a" || cond == "c" ? "on" : "off"},
          {"target", target},
          {"base_target", "cpu?threads=2"},
          {"seed", 1000 + (cond == "a" || cond == "b" ? rep : 0)},
          {"replicate", rep},
          {"data_seed", 1},
          {"batches", 4},
          {"window", 2},
          {"status", "ok"},
          {"final_loss", loss},
          {"curve", {loss, loss, loss, loss}},
          {"curve_fingerprint", std::string(32, 'a')},
          {"initial_weights_fingerprint", std::string(32, 'b')},
          {"weights_fingerprint", std::string(31, 'c') + char('0' + rep)},
          {"seconds", 1.0},
          {"steps_per_second", 4.0}};
}

// |G|^2 = 1 and tr(Sigma) = 32 exactly: E|G_B|^2 = 1 + 32/B gives big_sq 1.5 at B = 64 and small_sq 3 at
// b = 16 at every point, so every moving average is that constant.
nlohmann::json noise_json(double hw_sq) {
  nlohmann::json pts = nlohmann::json::array();
  for (int i = 0; i < 5; ++i) {
    nlohmann::json p = {{"step", 1 + 10 * i}, {"big_sq", 1.5}, {"small_sq", 3.0}};
    if (i % 2 == 0) p["hw_sq"] = hw_sq;
    pts.push_back(p);
  }
  return {{"every", 10}, {"b_small", 16}, {"b_big", 64}, {"points", pts}};
}

TEST(TrainMeasure, HardwareNoiseRowsFollowTheirDefinitions) {
  const std::string nondet = "cpu?order=atomic&threads=2&isa=auto", det = "cpu?order=blocked&threads=2&isa=auto";
  std::vector<TrainingRun> runs;
  for (int rep = 0; rep < 2; ++rep) {
    nlohmann::json a = run_json("a", nondet, rep, 0.01), b = run_json("b", det, rep, 0.01);
    a["noise"] = noise_json(2e-6);
    b["noise"] = noise_json(0.0);
    runs.push_back(training_run(a));
    runs.push_back(training_run(b));
  }
  const nlohmann::json an = analyze_training(runs, {TrainingSource{}}, target_facts);
  ASSERT_TRUE(an.contains("noise")) << an.dump();
  const auto& units = an["noise"]["units"];
  ASSERT_EQ(units.size(), 2u);
  for (auto& u : units) {
    EXPECT_DOUBLE_EQ(u["b_simple_start"].get<double>(), 32.0);
    EXPECT_DOUBLE_EQ(u["b_simple_end"].get<double>(), 32.0);
    EXPECT_DOUBLE_EQ(u["g2_end"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(u["trace_end"].get<double>(), 32.0);
  }
  const auto& hw = an["noise"]["hardware"];
  ASSERT_EQ(hw.size(), 2u);
  const auto& h0 = hw[0]["target"] == nondet ? hw[0] : hw[1];
  const auto& h1 = hw[0]["target"] == nondet ? hw[1] : hw[0];
  EXPECT_EQ(h0["pairs"], 6);  // 3 measured points in each of 2 runs
  EXPECT_EQ(h0["nonzero_pairs"], 6);
  EXPECT_DOUBLE_EQ(h0["sigma2_hw"].get<double>(), 1e-6);
  EXPECT_DOUBLE_EQ(h0["r"].get<double>(), 1e-6 * 64 / 32);
  EXPECT_DOUBLE_EQ(h0["b_hw"].get<double>(), 32 / 1e-6);
  // Both runs' own estimates are 1e-6: the t interval over runs is [1e-6, 1e-6].
  ASSERT_TRUE(h0["sigma2_hw_ci"].is_array()) << h0.dump();
  EXPECT_DOUBLE_EQ(h0["sigma2_hw_ci"][0].get<double>(), 1e-6);
  EXPECT_DOUBLE_EQ(h0["sigma2_hw_ci"][1].get<double>(), 1e-6);
  EXPECT_FALSE(h0["identical"].get<bool>());
  EXPECT_TRUE(h1["identical"].get<bool>());
  EXPECT_EQ(h1["sigma2_hw"], 0.0);
  EXPECT_TRUE(h1["b_hw"].is_null()) << "infinite";
  EXPECT_NE(h1["note"].get<std::string>().find("B_hw infinite"), std::string::npos);
}

// Constant points with |G|^2 = 1 and tr(Sigma) = trace: B_simple = trace at every point.
nlohmann::json noise_with_trace(double trace, int points, uint64_t examples, double hw_sq) {
  nlohmann::json pts = nlohmann::json::array();
  for (int i = 0; i < points; ++i)
    pts.push_back({{"step", 1 + 10 * i}, {"big_sq", 1 + trace / 64}, {"small_sq", 1 + trace / 16}, {"hw_sq", hw_sq}});
  return {{"every", 10}, {"b_small", 16}, {"b_big", 64}, {"examples", examples}, {"points", pts}};
}

// One row per target and condition; runs that share initial weights count once (the median over
// distinct inits of each init's median); "start" is at least 3 points in, or the first point of a short
// series said as such; B_hw beyond the training set is flagged.
TEST(TrainMeasure, NoiseSummariesCountDistinctInitsPerConditionAndStartAfterThreePoints) {
  const std::string nondet = "cpu?order=atomic&threads=2&isa=auto";
  std::vector<TrainingRun> runs;
  auto add = [&](const char* cond, int rep, char init, double trace, int points, uint64_t examples) {
    nlohmann::json j = run_json(cond, nondet, rep, 0.01);
    j["initial_weights_fingerprint"] = std::string(32, init);
    j["noise"] = noise_with_trace(trace, points, examples, 2e-6);
    runs.push_back(training_run(j));
  };
  // (a): init x twice (B_simple 10 and 20: median 15), init y once (100). Over inits: median(15, 100) =
  // 57.5; the median over the three runs would be 20.
  add("a", 0, 'x', 10, 10, 64);
  add("a", 1, 'x', 20, 10, 64);
  add("a", 2, 'y', 100, 10, 64);
  // (c): one run of 4 points, its own row; B_hw = 32 / 1e-6 is within a training set of 10^9 examples.
  add("c", 0, 'z', 32, 4, 1000000000);
  const nlohmann::json an = analyze_training(runs, {TrainingSource{}}, target_facts);
  const auto& units = an["noise"]["units"];
  ASSERT_EQ(units.size(), 2u) << units.dump();
  const auto& ua = units[0]["condition"] == "a" ? units[0] : units[1];
  const auto& uc = units[0]["condition"] == "a" ? units[1] : units[0];
  EXPECT_EQ(ua["runs"], 3);
  EXPECT_EQ(ua["distinct_inits"], 2);
  EXPECT_NEAR(ua["b_simple_end"].get<double>(), 57.5, 1e-9);
  EXPECT_NEAR(ua["trace_start"].get<double>(), 57.5, 1e-9);
  EXPECT_EQ(ua["start_points"], 3) << "10 points: a fifth is 2, at least 3";
  EXPECT_EQ(uc["start_points"], 1) << "4 points: point 3 would stand beside the end; only the first is there";
  EXPECT_EQ(uc["runs_rising"].get<int>() + uc["runs_falling"].get<int>(), 0);
  const auto& hw = an["noise"]["hardware"];
  ASSERT_EQ(hw.size(), 2u);
  for (auto& h : hw) {
    EXPECT_DOUBLE_EQ(h["sigma2_hw"].get<double>(), 1e-6);
    // (a): three runs, an interval; (c): one run, none.
    EXPECT_EQ(h["sigma2_hw_ci"].is_null(), h["condition"] == "c") << h.dump();
    const bool beyond = h["condition"] == "a";
    EXPECT_EQ(h["b_hw_beyond_data"].get<bool>(), beyond) << h.dump();
    // Beyond the data, B_hw is no batch size: null, with the reason; within it, the number.
    EXPECT_EQ(h["b_hw"].is_null(), beyond) << h.dump();
    if (beyond)
      EXPECT_NE(h["b_hw_note"].get<std::string>().find("larger at every batch size below 64"), std::string::npos)
          << h.dump();
    else
      EXPECT_DOUBLE_EQ(h["b_hw"].get<double>(), 32 / 1e-6);
    EXPECT_NE(h["note"].get<std::string>().find("run-to-run implementation noise at B = 64"), std::string::npos);
  }
}

TEST(TrainMeasure, ConditionESpreadStandsBesideCAndTheSeedSpread) {
  const std::string nondet = "cpu?order=atomic&threads=2&isa=auto", det = "cpu?order=blocked&threads=2&isa=auto";
  std::vector<TrainingRun> runs;
  const double b[] = {0.010, 0.012, 0.014}, c[] = {0.0110, 0.0111, 0.0112}, e[] = {0.0100, 0.0120, 0.0140};
  for (int rep = 0; rep < 3; ++rep) {
    runs.push_back(training_run(run_json("b", det, rep, b[rep])));
    runs.push_back(training_run(run_json("c", nondet, rep, c[rep])));
    runs.push_back(training_run(run_json("d", det, rep, 0.011)));
    nlohmann::json j = run_json("e", det, rep, e[rep]);
    j["nudge"] = {{"index", rep}, {"parameter", 7 + rep}, {"tensor", "layer 0 (conv2d) weight [7]"}, {"from", 0.5},
                  {"to", 0.50000006}};
    runs.push_back(training_run(j));
  }
  const nlohmann::json an = analyze_training(runs, {TrainingSource{}}, target_facts);
  ASSERT_TRUE(an.contains("one_ulp")) << an.dump();
  ASSERT_EQ(an["one_ulp"].size(), 1u);
  const auto& u = an["one_ulp"][0];
  EXPECT_EQ(u["runs"], 3);
  EXPECT_NEAR(u["std_e"].get<double>(), 0.002, 1e-12);
  EXPECT_NEAR(u["std_b"].get<double>(), 0.002, 1e-12);
  EXPECT_NEAR(u["std_c"].get<double>(), 0.0001, 1e-12);
  EXPECT_EQ(u["distinct_weights"], 3);
  // Three runs against three: 20 splits, 10 distinct by symmetry: no p below 0.1, and it says so.
  for (auto& t : u["tests"]) {
    EXPECT_TRUE(t["no_power"].get<bool>()) << t.dump();
    EXPECT_NEAR(t["min_p"].get<double>(), 0.1, 1e-12);
  }
  // The table has (e)'s row.
  bool row = false;
  for (auto& r : an["table"]) row = row || r["condition"] == "e";
  EXPECT_TRUE(row);
}

}  // namespace
}  // namespace detaudit
