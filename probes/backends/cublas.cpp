// cublas: cuBLAS gemm with every setting pinned (kernels/cuda/cublas_backend.cpp).
#include "probes/backends/common.hpp"

#include "kernels/cuda/cuda.hpp"

namespace detaudit {

#if defined(DETAUDIT_HAVE_CUDA)
extern const GpuKernels kCublasKernels;  // kernels/cuda/cublas_backend.cpp
#endif

namespace {

bool applicable_cublas(const Spec& t, const Spec& w) {
  bool gemm_like = w.name == "matmul" || w.name == "batchinv";
  return gemm_like || (w.name == "reduce" && w.get("op") != "softmax");
}
Promise promise_cublas(const Spec& t, const Spec&, const std::map<std::string, std::string>&) {
  Promise p;
  const bool shared_workspace = t.get_int("streams", 1) > 1 && t.get("workspace", "per_stream") == "shared";
  if (t.get("atomics", "not_allowed") == "allowed")
    p = nothing("cuBLAS: with atomics allowed its results may differ run to run");
  else if (shared_workspace)
    p = nothing("cuBLAS: several streams sharing one workspace are not guaranteed reproducible");
  else
    p = deterministic("cuBLAS: bitwise identical for one version, architecture and SM count, one stream or a "
                      "workspace per stream");
  // TF32 rounds the inputs to 10 mantissa bits. BF16x9 splits each FP32 input into three BF16 parts
  // (8 + 8 + 8 significant bits), which hold all of FP32's 24: no extra input rounding.
  if (t.get("math", "default") == "tf32") p.input_unit_roundoff = kTf32UnitRoundoff;
  p.requirements = {kCudaDevice};
  return p;
}

Status variants_cublas(Spec* d, Spec* n) {
  d->set("atomics", "not_allowed");
  n->set("atomics", "allowed");
  return Status::ok();
}

std::vector<SuiteTarget> suite_targets_cublas(const std::string&) {
  return {{"cublas:0?math=pedantic"},
          {"cublas:0?math=default"},
          {"cublas:0?math=tf32"},
          {"cublas:0?math=bf16x9"},
          {"cublas:0?math=pedantic&atomics=allowed"},
          {"cublas:0?math=pedantic&streams=4&workspace=shared"},
          {"cublas:0?math=pedantic&streams=4&workspace=per_stream"}};
}

}  // namespace

BackendEntry cublas_backend() {
  BackendEntry e;
  e.name = "cublas";
  e.keys = {key_one_of("math", "default", {"default", "pedantic", "tf32", "bf16x9"}),
            key_one_of("atomics", "not_allowed", {"allowed", "not_allowed"}), key_int_in("streams", "1", 1, 16),
            key_one_of("workspace", "per_stream", {"shared", "per_stream"})};
#if defined(DETAUDIT_HAVE_CUDA)
  e.make = [](const Spec& t) { return make_gpu_target(t, &kCublasKernels); };
#else
  e.make = [](const Spec& t) { return make_gpu_target(t, nullptr); };
#endif
  e.device = DeviceKind::kCuda;
  e.summary = "cuBLAS gemm with every setting pinned";
  e.libraries = {"cublas", "cuda_runtime", "cuda_driver"};
  e.applicable = applicable_cublas;
  e.promise = promise_cublas;
  e.variants = variants_cublas;
  e.trains = true;
  e.suite_targets = suite_targets_cublas;
  e.describe_machine = [](nlohmann::json* libs) {
    if (!cuda_stack().cublas_version.empty()) (*libs)["cublas"] = cuda_stack().cublas_version;
  };
  return e;
}

}  // namespace detaudit
