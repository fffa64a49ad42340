// Compiled only when detaudit is built without CUDA.
#include "kernels/cuda/cuda.hpp"
#include "detaudit_build_config.hpp"

namespace detaudit {

bool built_with_cuda() { return false; }

CudaEnvironment query_cuda_environment() {
  CudaEnvironment env;
  env.reason = std::string("detaudit was built without CUDA: ") + DETAUDIT_CUDA_OFF_REASON;
  return env;
}

BackendOr make_gpu_backend(const std::string& backend, int, const std::map<std::string, std::string>&) {
  return Status::unavailable(backend + ": detaudit was built without CUDA: " + DETAUDIT_CUDA_OFF_REASON);
}

}  // namespace detaudit
