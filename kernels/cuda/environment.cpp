// What the machine's CUDA stack is, and the factory for the GPU backends.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/cupti_tracer.hpp"
#include "kernels/cuda/nccl.hpp"

namespace detaudit {

namespace {

std::string uuid_string(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", b[i]);
  }
  return s;
}

int attribute(cudaDeviceAttr a, int device) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, a, device) != cudaSuccess) cudaGetLastError();
  return v;
}

}  // namespace

bool built_with_cuda() { return true; }

CudaEnvironment query_cuda_environment() {
  CudaEnvironment env;
  // Library versions answer without a device.
  if (cudaDriverGetVersion(&env.driver_version) != cudaSuccess) cudaGetLastError();
  if (cudaRuntimeGetVersion(&env.runtime_version) != cudaSuccess) cudaGetLastError();
  size_t cudnn = cudnnGetVersion();  // 91900 = 9.19.0
  if (cudnn) env.cudnn_version = fmt::format("{}.{}.{}", cudnn / 10000, cudnn / 100 % 100, cudnn % 100);
  env.cublas_version = gpu::cublas_version_string();
  if (env.cublas_version.empty()) env.cublas_version = fmt::format("cublasLt {}", cublasLtGetVersion());
  env.nccl_version = nccl_library_version();
  env.cupti_version = gpu::cupti_version_string();

  StatusOr<int> n = gpu::device_count();
  if (!n) {
    env.reason = n.message();  // e.g. "no /dev/nvidia* device files and no libcuda.so.1 (NVIDIA driver not installed)"
    return env;
  }
  for (int i = 0; i < *n; ++i) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      cudaError_t e = cudaGetLastError();
      env.reason += fmt::format("{}cudaGetDeviceProperties({}): {}", env.reason.empty() ? "" : "; ", i,
                                cudaGetErrorName(e));
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.uuid = uuid_string(p.uuid);
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), i) == cudaSuccess) g.pci_bus_id = bus;
    else cudaGetLastError();
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.sm_count = p.multiProcessorCount;
    g.memory_bytes = p.totalGlobalMem;
    g.l2_bytes = p.l2CacheSize;
    g.clock_khz = attribute(cudaDevAttrClockRate, i);  // CUDA 13 dropped cudaDeviceProp::clockRate
    g.memory_clock_khz = attribute(cudaDevAttrMemoryClockRate, i);
    g.memory_bus_width = p.memoryBusWidth;
    g.ecc = p.ECCEnabled != 0;
    env.gpus.push_back(g);
  }
  env.available = !env.gpus.empty();
  if (!env.available && env.reason.empty()) env.reason = "no CUDA device could be queried";
  return env;
}

BackendOr make_gpu_backend(const std::string& backend, const GpuKernels* kernels, int device,
                           const std::map<std::string, std::string>& params) {
  if (!kernels || !kernels->validate || !kernels->make)
    return Status::invalid("GPU backend '" + backend + "' has no kernels in this build");
  DETAUDIT_RETURN_IF_ERROR(kernels->validate(params));
  StatusOr<int> n = gpu::device_count();
  if (!n) return n.status().prefixed("no CUDA device: ");
  if (device < 0) device = 0;
  if (device >= *n) return Status::unavailable(fmt::format("no CUDA device {}: this machine has {}", device, *n));
  return kernels->make(device, params);
}

}  // namespace detaudit
