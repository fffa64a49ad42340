// Detection on the GPU: the probes' own path (observe(): warm-up, repeats, device fingerprints,
// CUPTI) over real backends and the suites' workloads. The atomic variants must be seen to vary, claimed-
// deterministic algorithms must give one output, every traced repeat must hold only its own kernels, and
// a sticky error must be recognised. Skips with the reason on machines without a device.
//
// The variation tests are probabilistic, on purpose: they test that the race is real on this GPU. Each
// output element of these workloads adds 8 to 1024 partial sums of random terms through atomicAdd, in
// whatever order the blocks finish. Assumption: a repeat reproduces one given completion order's bits
// with probability at most 1/2 (a single element reordered suffices to change the fingerprint, and the
// conv has thousands of elements). Then all kRepeats = 100 repeats agree with probability at most
// 2^-99: a failure means the race did not happen. Each test prints the distinct count it saw, so a count
// far below kRepeats says the assumption is weak on this GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tests/fixtures.hpp"
#include "kernels/cuda/cuda.hpp"
#include "tests/gpu_kernels.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "contract/cells.hpp"
#include "probes/worker.hpp"

namespace detaudit {
namespace {

constexpr int kRepeats = 100;

class GpuDetection : public ::testing::Test {
 protected:
  void SetUp() override {
    CudaEnvironment env = query_cuda_environment();
    if (!env.available) GTEST_SKIP() << "no GPU: " << env.reason;
  }
  // Runs `workload` on `target` the way a probe worker does.
  Observation probe(const std::string& target, const std::string& workload, int repeats) {
    Spec t, w;
    std::string err;
    EXPECT_TRUE(succeeded(parse_target(target, &t), &err)) << err;
    EXPECT_TRUE(succeeded(parse_workload(workload, &w), &err)) << err;
    BackendOr made = make_target_backend(t);
    EXPECT_TRUE(made) << target << ": " << made.message();
    if (!made) return {};
    std::unique_ptr<Backend> b = std::move(made).value();
    WorkItem item;
    item.workload = w;
    Observation o = observe(b.get(), t.str(), item, repeats);
    EXPECT_EQ(o.status, ObsStatus::kOk) << target << " " << workload << ": " << o.reason;
    return o;
  }
};

TEST_F(GpuDetection, AtomicReductionsVary) {
  for (const char* w : {"reduce?op=sum&n=1000000", "reduce?op=dot&n=1000000", "reduce?op=norm&n=1000000",
                        "reduce?op=softmax&n=256000&cols=1000"}) {
    Observation o = probe("cuda:0?order=atomic", w, kRepeats);
    std::cout << "[ detect   ] cuda:0?order=atomic " << w << ": " << o.distinct << " distinct in " << kRepeats << "\n";
    EXPECT_GE(o.distinct, 2) << w << ": the atomic order gave one output in " << kRepeats << " runs";
  }
}

TEST_F(GpuDetection, AtomicConvAndPoolingVary) {
  // The quick suite's shapes: 1024 and 128 terms per dw element, cut into 8 partials each (geometry.hpp).
  for (const char* w : {"conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter",
                        "conv2d?n=2&c=8&h=15&w=15&k=8&stride=2&pad=1&pass=bwd_filter",
                        "maxpool?n=4&c=16&h=32&w=32&window=3&stride=2&pass=bwd"}) {
    Observation o = probe("cuda:0?order=atomic", w, kRepeats);
    std::cout << "[ detect   ] cuda:0?order=atomic " << w << ": " << o.distinct << " distinct in " << kRepeats << "\n";
    EXPECT_GE(o.distinct, 2) << w << ": the atomic order gave one output in " << kRepeats << " runs";
  }
}

TEST_F(GpuDetection, DeterministicTargetsGiveOneOutputAndTheirWarmUpsBits) {
  struct Case {
    const char *target, *workload;
  };
  for (const Case& c : {Case{"cuda:0?order=tree", "conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter"},
                        Case{"cuda:0?order=tree", "reduce?op=sum&n=1000000"},
                        Case{"cudnn:0?bwd_filter_algo=1", "conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter"},
                        Case{"cublas:0?math=pedantic", "matmul?m=256&n=256&k=515"}}) {
    Observation o = probe(c.target, c.workload, 20);
    EXPECT_EQ(o.distinct, 1) << c.target << " " << c.workload;
    EXPECT_EQ(o.warmup_fingerprint, o.fingerprints.empty() ? "" : o.fingerprints[0]) << c.target << " " << c.workload;
    if (std::string(c.target).rfind("cudnn", 0) == 0) {
      EXPECT_EQ(o.details["claimed_deterministic"], "yes") << "cuDNN's Find claim for BWD_FILTER_ALGO_1";
      EXPECT_EQ(o.details["documented_deterministic"], "yes") << "cudnn_ops.h marks ALGO_1 deterministic";
    }
  }
}

TEST_F(GpuDetection, EveryTracedRepeatHoldsOnlyItsOwnKernels) {
  // cuDNN's Find runs every algorithm on first use, and cuBLAS fills its constants once: both in the
  // warm-up, so every repeat's list is the same, and shorter than the warm-up's.
  struct Case {
    const char *target, *workload;
  };
  for (const Case& c : {Case{"cudnn:0", "conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter"},
                        Case{"cublas:0?math=pedantic", "reduce?op=sum&n=1000000"},
                        Case{"cuda:0?order=atomic", "reduce?op=sum&n=1000000"}}) {
    Observation o = probe(c.target, c.workload, 10);
    if (o.tracing.rfind("tracing unavailable", 0) == 0) GTEST_SKIP() << o.tracing;
    EXPECT_EQ(o.tracing, "ok") << c.target;
    ASSERT_EQ(o.kernels.size(), o.fingerprints.size()) << c.target;
    ASSERT_TRUE(o.kernels[0].has_value());
    EXPECT_FALSE(o.kernels[0]->empty()) << c.target;
    for (size_t r = 1; r < o.kernels.size(); ++r) {
      ASSERT_TRUE(o.kernels[r].has_value());
      ASSERT_EQ(o.kernels[r]->size(), o.kernels[0]->size()) << c.target << " repeat " << r + 1;
      for (size_t i = 0; i < o.kernels[r]->size(); ++i)
        EXPECT_EQ((*o.kernels[r])[i].name, (*o.kernels[0])[i].name) << c.target << " repeat " << r + 1;
    }
    std::cout << "[ kernels  ] " << c.target << " " << c.workload << ": warm-up " << o.details["warmup_kernels"]
              << " kernels, each repeat " << o.kernels[0]->size() << ":";
    for (auto& k : *o.kernels[0]) std::cout << " " << k.name;
    std::cout << "\n";
    if (std::string(c.target) == "cudnn:0") {
      ASSERT_TRUE(o.details.count("warmup_kernels")) << "the warm-up was not traced";
      EXPECT_GT(std::stoi(o.details["warmup_kernels"]), int(o.kernels[0]->size())) << "Find's trials in the warm-up";
    }
  }
}

TEST_F(GpuDetection, CublasLtRecordsTheWholeConfigurationAndBf16x9SaysWhatRan) {
  Observation lt = probe("cublaslt:0?algo=0", "matmul?m=256&n=256&k=515", 2);
  for (const char* key : {"algo_id", "tile", "stages", "splitk", "reduction_scheme", "cta_swizzling", "custom_option",
                          "inner_shape", "cluster_shape"}) {
    EXPECT_TRUE(lt.details.count(key)) << key;
    EXPECT_NE(lt.details[key], "?") << key << ": cuBLASLt refused to tell";
  }
  // What math=bf16x9 ran, observed: cuBLAS accepts the math mode everywhere and reports nothing after
  // the call, so it is compared with math=default (plain FP32) on the same inputs. Where the emulation is
  // not implemented, plain FP32 runs: the same kernels and the same bits. Where it is, other kernels run
  // (BF16 products), and their sums round otherwise.
  const char* matmul = "matmul?m=256&n=256&k=515";
  Observation bf = probe("cublas:0?math=bf16x9", matmul, 2), fp = probe("cublas:0?math=default", matmul, 2);
  ASSERT_FALSE(bf.fingerprints.empty());
  ASSERT_FALSE(fp.fingerprints.empty());
  const bool same_bits = bf.fingerprints[0] == fp.fingerprints[0];
  auto names = [](const Observation& o, std::vector<std::string>* out) {
    out->clear();
    if (o.tracing != "ok" || o.kernels.empty() || !o.kernels[0].has_value()) return false;
    for (const KernelRecord& k : *o.kernels[0]) out->push_back(k.name);
    return true;
  };
  std::vector<std::string> bf_kernels, fp_kernels;
  const bool traced = names(bf, &bf_kernels) && names(fp, &fp_kernels);
  const bool same_kernels = traced && bf_kernels == fp_kernels;
  std::cout << "[ bf16x9   ] emulated=" << bf.details["emulated"] << " same_bits=" << (same_bits ? "yes" : "no")
            << " same_kernels=" << (traced ? (same_kernels ? "yes" : "no") : "untraced")
            << " kernels=" << (traced && !bf_kernels.empty() ? bf_kernels[0] : "?");
  if (!traced) std::cout << " (kernel comparison skipped: " << (bf.tracing != "ok" ? bf.tracing : fp.tracing) << ")";
  std::cout << "\n";
  CudaEnvironment env = query_cuda_environment();
  const GpuInfo& g = env.gpus[0];
  if (!cublas_emulates_bf16x9(g.cc_major, g.cc_minor)) {
    EXPECT_TRUE(same_bits) << "compute capability " << g.cc_major << "." << g.cc_minor
                           << ": no emulation here, yet math=bf16x9 gave other bits than math=default";
    if (traced) {
      EXPECT_EQ(bf_kernels, fp_kernels) << "no emulation here, yet math=bf16x9 ran other kernels";
    }
  } else if (traced) {
    EXPECT_NE(bf_kernels, fp_kernels) << "emulation documented here, yet math=bf16x9 ran math=default's kernels";
  } else {
    EXPECT_FALSE(same_bits) << "emulation documented here, yet math=bf16x9 gave math=default's bits";
  }
  // The detail says what the observation shows.
  const bool observed_emulation = traced ? !same_kernels : !same_bits;
  EXPECT_EQ(bf.details["emulated"].rfind(observed_emulation ? "yes" : "no", 0), 0u)
      << bf.details["emulated"] << "; observed: " << (observed_emulation ? "emulated" : "plain FP32");
}

// An illegal address is sticky: the context is lost for the rest of the process, and the backend says so.
// Exits 0 when it does. Run in a child process (gtest's threadsafe death test re-executes this binary),
// since it poisons the CUDA context of whichever process does it.
[[noreturn]] void lose_the_context() {
  BackendOr made = open_gpu_backend("cuda", 0, {});
  if (!made) std::_Exit(3);
  std::unique_ptr<Backend> b = std::move(made).value();
  // A gemm reading A and B at device address 0x100: an illegal address.
  auto* bad = reinterpret_cast<const float*>(uintptr_t(0x100));
  float* c = static_cast<float*>(b->alloc(64 * 64 * sizeof(float)));
  Status st = b->gemm(Trans::kN, Trans::kN, 64, 64, 64, 1.f, bad, 64, bad, 64, 0.f, c, 64);
  if (st) st = b->synchronize();
  const Status context = b->context_state();
  const bool lost = !st && !context;
  const std::string why = context.message();
  std::fprintf(stderr, "status: %s; context lost: %s\n", st.message().c_str(), why.c_str());
  std::_Exit(lost && why.find("cudaErrorIllegalAddress") != std::string::npos ? 0 : 1);
}

TEST_F(GpuDetection, AnIllegalAddressLosesTheContextAndTheBackendSaysSo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(lose_the_context(), ::testing::ExitedWithCode(0), "context lost: cudaErrorIllegalAddress");
}

}  // namespace
}  // namespace detaudit
