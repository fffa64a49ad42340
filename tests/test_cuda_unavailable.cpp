// The GPU entry points on any machine: without a device (or without CUDA) they explain themselves and
// never abort; with one they work. Branches on what the machine has, so it passes on both.
#include <gtest/gtest.h>

#include "kernels/cuda/cuda.hpp"
#include "tests/gpu_kernels.hpp"

namespace detaudit {
namespace {

TEST(CudaAvailability, EnvironmentAnswersEitherWay) {
  CudaEnvironment env = query_cuda_environment();
  if (env.available) {
    EXPECT_TRUE(built_with_cuda());
    ASSERT_FALSE(env.gpus.empty());
    EXPECT_FALSE(env.gpus[0].name.empty());
    EXPECT_GT(env.gpus[0].sm_count, 0);
    return;
  }
  EXPECT_TRUE(env.gpus.empty());
  ASSERT_FALSE(env.reason.empty());
  // The cause, in words: built without CUDA, what is missing (device files, driver library), or what
  // cudaGetDeviceCount said when both are there. Never the runtime's "driver version is insufficient"
  // alone, which is what it says when there is no driver at all.
  if (!built_with_cuda()) {
    EXPECT_NE(env.reason.find("without CUDA"), std::string::npos) << env.reason;
  } else {
    EXPECT_TRUE(env.reason.find("/dev/nvidia") != std::string::npos ||
                env.reason.find("cudaGetDeviceCount") != std::string::npos)
        << env.reason;
    EXPECT_NE(env.reason.rfind("CUDA driver version is insufficient", 0), 0u) << env.reason;
  }
  if (built_with_cuda()) {
    EXPECT_FALSE(env.cudnn_version.empty()) << "cudnnGetVersion answers without a device";
  }
}

TEST(CudaAvailability, NoDeviceReasonSaysWhatIsMissing) {
  const std::string said =
      "cudaGetDeviceCount returned cudaErrorInsufficientDriver (35): CUDA driver version is insufficient for CUDA "
      "runtime version";
  EXPECT_EQ(explain_no_cuda_device(false, false, "libcuda.so.1: cannot open shared object file", said),
            "no /dev/nvidia* device files and no libcuda.so.1 (NVIDIA driver not installed)");
  std::string r = explain_no_cuda_device(false, true, "", said);
  EXPECT_EQ(r.rfind("no /dev/nvidia* device files (", 0), 0u) << r;
  EXPECT_NE(r.find(said), std::string::npos) << r;
  r = explain_no_cuda_device(true, false, "libcuda.so.1: cannot open shared object file", said);
  EXPECT_NE(r.find("libcuda.so.1 does not load (libcuda.so.1: cannot open shared object file)"), std::string::npos) << r;
  EXPECT_EQ(explain_no_cuda_device(true, true, "", said), said);
}

TEST(CudaAvailability, MakeGpuBackendNamesTheMissingPiece) {
  // The skip reason of every GPU target on a machine without a device.
  if (!built_with_cuda() || query_cuda_environment().available) GTEST_SKIP() << "needs a CUDA build without a device";
  const Status st = open_gpu_backend("cublas", 0, {}).status();
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(st.message().rfind("no CUDA device: ", 0), 0u) << st.message();
  EXPECT_TRUE(st.message().find("/dev/nvidia") != std::string::npos ||
              st.message().find("cudaGetDeviceCount") != std::string::npos)
      << st.message();
}

TEST(CudaAvailability, MakeGpuBackendEitherWorksOrSaysWhy) {
  CudaEnvironment env = query_cuda_environment();
  for (const char* name : {"cuda", "cublas", "cublaslt", "cudnn"}) {
    BackendOr b = open_gpu_backend(name, 0, {});
    if (env.available) {
      ASSERT_TRUE(b) << name << ": " << b.message();
      EXPECT_EQ(b.value()->name().rfind(std::string(name) + ":0", 0), 0u) << b.value()->name();
    } else {
      EXPECT_FALSE(b) << name;
      EXPECT_EQ(b.status().code(), Status::Code::kUnavailable) << name << ": " << b.message();
      EXPECT_FALSE(b.message().empty());
    }
  }
}

TEST(CudaAvailability, BadValuesAreInvalidEvenWithoutADevice) {
  if (!built_with_cuda()) GTEST_SKIP() << "built without CUDA: every GPU backend is unavailable";
  const std::pair<const char*, std::map<std::string, std::string>> bad[] = {
      {"cuda", {{"order", "random"}}},      {"cublas", {{"math", "fp8"}}},
      {"cublas", {{"streams", "0"}}},        {"cublaslt", {{"reduction", "sometimes"}}},
      {"cudnn", {{"bwd_filter_algo", "7"}}}, {"cudnn", {{"math", "tf16"}}}};
  for (const auto& [name, params] : bad) {
    const Status st = open_gpu_backend(name, 0, params).status();
    EXPECT_EQ(st.code(), Status::Code::kInvalid) << name << ": " << st.message();
    const auto& [key, value] = *params.begin();
    EXPECT_NE(st.message().find(key + "=" + value), std::string::npos) << st.message();
  }
}

TEST(CudaAvailability, CudnnAlgorithmListsCoverTheLegacyApi) {
  ConvShape s;
  EXPECT_EQ(cudnn_conv_algorithms(s, "fwd").size(), 8u);
  EXPECT_EQ(cudnn_conv_algorithms(s, "bwd_data").size(), 6u);
  auto bf = cudnn_conv_algorithms(s, "bwd_filter");
  ASSERT_EQ(bf.size(), 7u);
  for (size_t i = 0; i < bf.size(); ++i) EXPECT_EQ(bf[i].index, int(i));
  EXPECT_EQ(bf[0].header, CudnnHeaderMark::kNondeterministic);
  EXPECT_EQ(bf[3].header, CudnnHeaderMark::kNondeterministic);
  EXPECT_EQ(bf[1].header, CudnnHeaderMark::kUnmarked);
  // cudnn_ops.h marks BWD_FILTER_ALGO_WINOGRAD /* not implemented */: not documented deterministic.
  EXPECT_EQ(bf[4].header, CudnnHeaderMark::kNotImplemented);
  int not_implemented = 0;
  for (const char* pass : {"fwd", "bwd_data", "bwd_filter"})
    for (const CudnnAlgo& a : cudnn_conv_algorithms(s, pass)) not_implemented += a.header == CudnnHeaderMark::kNotImplemented;
  EXPECT_EQ(not_implemented, 1);
  EXPECT_TRUE(cudnn_conv_algorithms(s, "sideways").empty());
}

// GpuBackend::context_state (kernels/cuda/common.cpp) takes these errors as a lost context.
TEST(CudaAvailability, StickyErrorsLoseTheContext) {
  for (int sticky : {226, 700, 702, 710, 714, 715, 716, 717, 718, 719, 721, 810, 911})
    EXPECT_TRUE(cuda_error_loses_context(sticky)) << sticky;
  // cudaErrorUnknown: what a fault the runtime cannot name returns; the context is unusable after it.
  EXPECT_TRUE(cuda_error_loses_context(999));
  EXPECT_TRUE(cuda_error_loses_context(cuda_error::kUnknown));
  // cudaSuccess, cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorNoDevice, cudaErrorNotReady:
  // the call failed (or has not finished), the context lives on.
  for (int plain : {0, 1, 2, 100, 600}) EXPECT_FALSE(cuda_error_loses_context(plain)) << plain;
}

}  // namespace
}  // namespace detaudit
