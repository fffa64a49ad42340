// The GPU entry points on any machine: without a device (or without CUDA) they explain themselves and
// never abort; with one they work. Branches on what the machine has, so it passes on both.
#include <gtest/gtest.h>

#include "kernels/cuda/cuda.hpp"

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
  // The cause, in words: built without CUDA, or what cudaGetDeviceCount said.
  EXPECT_NE(env.reason.find(built_with_cuda() ? "cudaGetDeviceCount" : "without CUDA"), std::string::npos)
      << env.reason;
  if (built_with_cuda()) {
    EXPECT_FALSE(env.cudnn_version.empty()) << "cudnnGetVersion answers without a device";
  }
}

TEST(CudaAvailability, MakeGpuBackendEitherWorksOrSaysWhy) {
  CudaEnvironment env = query_cuda_environment();
  for (const char* name : {"cuda", "cublas", "cublaslt", "cudnn"}) {
    Status st;
    auto b = make_gpu_backend(name, 0, {}, &st);
    if (env.available) {
      ASSERT_NE(b, nullptr) << name << ": " << st.message();
      EXPECT_TRUE(st.is_ok());
      EXPECT_EQ(b->name().rfind(std::string(name) + ":0", 0), 0u) << b->name();
    } else {
      EXPECT_EQ(b, nullptr) << name;
      EXPECT_EQ(st.code(), Status::Code::kUnavailable) << name << ": " << st.message();
      EXPECT_FALSE(st.message().empty());
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
    Status st;
    EXPECT_EQ(make_gpu_backend(name, 0, params, &st), nullptr) << name;
    EXPECT_EQ(st.code(), Status::Code::kInvalid) << name << ": " << st.message();
    const auto& [key, value] = *params.begin();
    EXPECT_NE(st.message().find(key + "=" + value), std::string::npos) << st.message();
  }
  Status st;
  EXPECT_EQ(make_gpu_backend("opencl", 0, {}, &st), nullptr);
  EXPECT_EQ(st.code(), Status::Code::kInvalid);
}

TEST(CudaAvailability, CudnnAlgorithmListsCoverTheLegacyApi) {
  ConvShape s;
  EXPECT_EQ(cudnn_conv_algorithms(s, "fwd").size(), 8u);
  EXPECT_EQ(cudnn_conv_algorithms(s, "bwd_data").size(), 6u);
  auto bf = cudnn_conv_algorithms(s, "bwd_filter");
  ASSERT_EQ(bf.size(), 7u);
  for (size_t i = 0; i < bf.size(); ++i) EXPECT_EQ(bf[i].index, int(i));
  EXPECT_TRUE(bf[0].header_nondeterministic);
  EXPECT_TRUE(bf[3].header_nondeterministic);
  EXPECT_FALSE(bf[1].header_nondeterministic);
  EXPECT_TRUE(cudnn_conv_algorithms(s, "sideways").empty());
}

}  // namespace
}  // namespace detaudit
