// cublaslt: cuBLASLt gemm through the heuristic's K-th algorithm (kernels/cuda/cublaslt_backend.cpp).
#include "probes/backends/common.hpp"

#include "kernels/cuda/cuda.hpp"

namespace detaudit {

#if defined(DETAUDIT_HAVE_CUDA)
extern const GpuKernels kCublasLtKernels;  // kernels/cuda/cublaslt_backend.cpp
#endif

namespace {

bool applicable_cublaslt(const Spec&, const Spec& w) { return w.name == "matmul" || w.name == "batchinv"; }
Promise promise_cublaslt(const Spec&, const Spec&, const std::map<std::string, std::string>& details) {
  // cuBLAS's reproducibility rule covers cuBLASLt, and every split-K reduction scheme is ordered:
  // INPLACE uses "counters (in workspace) to guarantee the sequentiality", COMPUTE_TYPE/OUTPUT_TYPE
  // reduce in a separate step (cublasLt.h, cublasLtReductionScheme_t).
  std::string what = "cuBLAS: cublasLtMatmul with one algorithm is bitwise identical for one version, "
                     "architecture and SM count";
  auto it = details.find("splitk");
  if (it != details.end() && it->second != "1" && it->second != "0") what += " (split-K reduces in a fixed order)";
  Promise p = deterministic(what);
  p.requirements = {kCudaDevice};
  return p;
}


}  // namespace

BackendEntry cublas_backend();  // probes/backends/cublas.cpp: cuBLASLt depends on what cuBLAS does

BackendEntry cublaslt_backend() {
  BackendEntry e;
  e.name = "cublaslt";
  e.keys = {key_int_in("algo", "0", 0, kCublasLtMaxAlgos - 1, {"all"}),
            key_one_of("reduction", "", {"none", "inplace", "compute", "output"})};
#if defined(DETAUDIT_HAVE_CUDA)
  e.make = [](const Spec& t) { return make_gpu_target(t, &kCublasLtKernels); };
#else
  e.make = [](const Spec& t) { return make_gpu_target(t, nullptr); };
#endif
  e.device = DeviceKind::kCuda;
  // cuBLASLt's heuristic enumerates the algorithms; algo=K pins its K-th answer.
  e.picks_algorithms = true;
  e.summary = "cuBLASLt gemm through the heuristic's K-th algorithm";
  // cuBLASLt ships inside the cuBLAS library: its bits depend on the same versions.
  e.libraries = cublas_backend().libraries;
  e.applicable = applicable_cublaslt;
  e.promise = promise_cublaslt;
  e.all_counts = {{"algo", 8}};
  e.suite_targets = [](const std::string&) { return std::vector<SuiteTarget>{{"cublaslt:0?algo=all"}}; };
  return e;
}

}  // namespace detaudit
