// cuda:0?order=portable against cpu?order=portable, bit for bit: every quick-suite
// workload, every training op on the autoencoder's shapes, and a 60-batch training run's final weights.
// The CPU side is tested across threads and ISAs in tests/test_portable.cpp; this is the other half of
// "identical bits on any CPU and any GPU". Skips with the reason on machines without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fixtures.hpp"
#include "kernels/cpu/native.hpp"
#include "kernels/cuda/cuda.hpp"
#include "tests/gpu_kernels.hpp"
#include "models/autoencoder.hpp"
#include "probes/registry.hpp"
#include "probes/workload.hpp"
#include "suites/probe_suite.hpp"
#include "tests/test_inputs.hpp"

namespace detaudit {
namespace {

class GpuPortable : public ::testing::Test {
 protected:
  void SetUp() override {
    CudaEnvironment env = query_cuda_environment();
    if (!env.available) GTEST_SKIP() << "no GPU: " << env.reason;
    BackendOr made = open_gpu_backend("cuda", 0, {{"order", "portable"}});
    ASSERT_TRUE(made) << made.message();
    gpu_ = std::move(made).value();
    CpuNativeOptions o;
    o.order = ReduceOrder::kPortable;
    o.threads = 2;
    cpu_ = make_cpu_native(o);
  }
  std::unique_ptr<Backend> gpu_, cpu_;
};

Fingerprint run_workload(Backend& b, const Spec& w) {
  auto wl = Workload::create(w);
  Status st = wl->setup(b);
  EXPECT_TRUE(st) << b.name() << " " << w.str() << ": " << st.message();
  if (st) st = wl->run(b);
  EXPECT_TRUE(st) << b.name() << " " << w.str() << ": " << st.message();
  Fingerprint fp;
  EXPECT_TRUE(b.fingerprint(wl->output(), wl->output_bytes(), &fp));
  wl->teardown(b);
  return fp;
}

TEST_F(GpuPortable, EveryQuickWorkloadGivesTheCpusBits) {
  ProbePlan plan;
  std::string err;
  ASSERT_TRUE(succeeded(make_plan("quick", "", "", 1, 60, &plan), &err)) << err;
  int same = 0;
  for (const Spec& w : plan.workloads) {
    const Fingerprint c = run_workload(*cpu_, w), g = run_workload(*gpu_, w);
    EXPECT_EQ(g.hex(), c.hex()) << w.str();
    same += g.hex() == c.hex();
  }
  // For gpu-check's summary: how many of the quick workloads agreed.
  std::printf("[ portable ] %d of %zu quick workloads bitwise identical on cpu and cuda\n", same, plan.workloads.size());
}

TEST_F(GpuPortable, SixtyBatchTrainingEndsInTheCpusWeights) {
  const Dataset& data = test_support::training_data();
  TrainConfig cfg;
  cfg.init_seed = 7;
  cfg.data_seed = 3;
  cfg.batches = 60;
  cfg.batch_size = 16;
  TrainResult c, g;
  Status st = train_autoencoder(*cpu_, data, cfg, {}, &c);
  ASSERT_TRUE(st) << st.message();
  st = train_autoencoder(*gpu_, data, cfg, {}, &g);
  ASSERT_TRUE(st) << st.message();
  ASSERT_EQ(g.curve.size(), c.curve.size());
  size_t first_diff = c.curve.size();
  for (size_t i = 0; i < c.curve.size(); ++i)
    if (std::memcmp(&c.curve[i], &g.curve[i], sizeof(float)) != 0) {
      first_diff = i;
      break;
    }
  EXPECT_EQ(first_diff, c.curve.size()) << "the loss curves part at batch " << first_diff + 1;
  EXPECT_EQ(g.final_weights.hex(), c.final_weights.hex());
  std::printf("[ portable ] 60-batch training: cpu weights %s, cuda weights %s (%s)\n",
              c.final_weights.hex().substr(0, 16).c_str(), g.final_weights.hex().substr(0, 16).c_str(),
              g.final_weights.hex() == c.final_weights.hex() ? "identical" : "DIFFERENT");
}

}  // namespace
}  // namespace detaudit
