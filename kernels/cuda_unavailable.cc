// Compiled only when detaudit is built without CUDA.
#include "detaudit_build_config.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/nccl.hpp"

namespace detaudit {

bool built_with_cuda() { return false; }

CudaEnvironment query_cuda_environment() {
  CudaEnvironment env;
  env.reason = std::string("detaudit was built without CUDA: ") + DETAUDIT_CUDA_OFF_REASON;
  return env;
}

BackendOr make_gpu_backend(const std::string& backend, const GpuKernels*, int, const std::map<std::string, std::string>&) {
  return Status::unavailable(backend + ": detaudit was built without CUDA: " + DETAUDIT_CUDA_OFF_REASON);
}

std::string nccl_unavailable_reason() {
  return std::string("detaudit was built without CUDA: ") + DETAUDIT_CUDA_OFF_REASON;
}
std::string nccl_library_version() { return ""; }
Status nccl_make_id(std::string*) { return Status::unavailable(nccl_unavailable_reason()); }
Status nccl_allreduce(const std::string&, int, int, int, const std::string&, const std::vector<float>&, int,
                      std::vector<std::vector<float>>*, std::vector<double>*) {
  return Status::unavailable(nccl_unavailable_reason());
}

}  // namespace detaudit
