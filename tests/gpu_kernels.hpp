// Tests that open a GPU backend below the probes (raw settings, values the registry's key table would refuse
// first): its kernels by its registry name. The tool itself opens each through its registry entry
// (probes/backends/<name>.cpp), which names its kernels.
#pragma once
#include <map>
#include <string>

#include "kernels/cuda/cuda.hpp"

namespace detaudit {

#if defined(DETAUDIT_HAVE_CUDA)
extern const GpuKernels kCudaNativeKernels;  // kernels/cuda/native_backend.cpp
extern const GpuKernels kCublasKernels;      // kernels/cuda/cublas_backend.cpp
extern const GpuKernels kCublasLtKernels;    // kernels/cuda/cublaslt_backend.cpp
extern const GpuKernels kCudnnKernels;       // kernels/cuda/cudnn_backend.cpp
#endif

inline const GpuKernels* gpu_kernels_named(const std::string& name) {
#if defined(DETAUDIT_HAVE_CUDA)
  if (name == "cuda") return &kCudaNativeKernels;
  if (name == "cublas") return &kCublasKernels;
  if (name == "cublaslt") return &kCublasLtKernels;
  if (name == "cudnn") return &kCudnnKernels;
#endif
  (void)name;
  return nullptr;
}

inline BackendOr open_gpu_backend(const std::string& name, int device,
                                  const std::map<std::string, std::string>& params = {}) {
  return make_gpu_backend(name, gpu_kernels_named(name), device, params);
}

}  // namespace detaudit
