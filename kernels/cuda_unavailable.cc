// Compiled only when detaudit is built without CUDA.
#include "kernels/cuda/cuda.hpp"

namespace detaudit {

bool built_with_cuda() { return false; }

CudaEnvironment query_cuda_environment() {
  CudaEnvironment env;
  env.reason = "detaudit was built without CUDA (no CUDA toolkit found at configure time)";
  return env;
}

std::unique_ptr<Backend> make_gpu_backend(const std::string& backend, int,
                                          const std::map<std::string, std::string>&, Status* st) {
  *st = Status::unavailable(backend + ": detaudit was built without CUDA");
  return nullptr;
}

}  // namespace detaudit
