// GPU side of the Backend interface. Everything here compiles without CUDA (kernels/cuda_unavailable.cc
// answers "built without CUDA") and never aborts without a device: calls return a Status with a reason.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/device_hash.hpp"

namespace detaudit {

struct GpuInfo {
  int index = 0;
  std::string name, uuid, pci_bus_id;
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  uint64_t memory_bytes = 0;
  int l2_bytes = 0, clock_khz = 0, memory_clock_khz = 0, memory_bus_width = 0;
  bool ecc = false;
};

struct CudaEnvironment {
  bool available = false;     // true when at least one device can run work
  std::string reason;         // why not, e.g. "no /dev/nvidia* device files and no libcuda.so.1 (...)"
  int driver_version = 0, runtime_version = 0;  // as cudaDriverGetVersion / cudaRuntimeGetVersion
  std::string cudnn_version, cublas_version, nccl_version, cupti_version;
  std::vector<GpuInfo> gpus;
};

bool built_with_cuda();

// The key of machine_fingerprint() whose value says whether the machine can run CUDA targets: "available",
// or "no CUDA device: <why>" (written by the CUDA device kind, probes/backends/cuda.cpp; results files carry it).
inline constexpr const char* kCudaMachineKey = "cuda";

// Why there is no CUDA device, in words a user can act on. Without an NVIDIA driver, cudaGetDeviceCount
// says "CUDA driver version is insufficient for CUDA runtime version", which points at the wrong fix;
// so the cause is read from the machine: the /dev/nvidia* device files and whether libcuda.so.1 (the
// driver's user-space library, never linked: dlopen only) loads. `runtime_said` is what the runtime
// reported; it is kept where the two pieces exist and the runtime still found no device.
inline std::string explain_no_cuda_device(bool device_files, bool libcuda, const std::string& libcuda_error,
                                          const std::string& runtime_said) {
  if (!device_files && !libcuda)
    return "no /dev/nvidia* device files and no libcuda.so.1 (NVIDIA driver not installed)";
  if (!device_files)
    return "no /dev/nvidia* device files (no NVIDIA GPU visible here, or its kernel module is not loaded); " +
           runtime_said;
  if (!libcuda)
    return "/dev/nvidia* device files exist but libcuda.so.1 does not load" +
           (libcuda_error.empty() ? std::string() : " (" + libcuda_error + ")") +
           " (the NVIDIA driver's user-space library is missing); " + runtime_said;
  return runtime_said;
}
// Never aborts. Versions of libraries are filled even without a device where the library answers.
CudaEnvironment query_cuda_environment();

// One GPU backend's kernels, defined beside them (kernels/cuda/<name>_backend.cpp) and named by the backend's
// registry entry (probes/backends/<name>.cpp): the check of its settings' values and its constructor on one
// device. `params` holds the spec's keys, already checked against the key table by the probes.
struct GpuKernels {
  Status (*validate)(const std::map<std::string, std::string>& params) = nullptr;
  BackendOr (*make)(int device, const std::map<std::string, std::string>& params) = nullptr;
};
// Each is defined `extern const` (a const of namespace scope is otherwise the file's alone) and declared where its
// registry entry names it; no list of them is kept here.

// Opens `backend` through its kernels on `device` (-1: the first): the values first, so a bad spec is refused as
// such on machines without a GPU too, then the device. Unavailable, with the reason, where there is no device or
// detaudit was built without CUDA (`kernels` null); invalid for a bad value.
BackendOr make_gpu_backend(const std::string& backend, const GpuKernels* kernels, int device,
                           const std::map<std::string, std::string>& params);

// ---- additions ---------------------------------------------------------------

// What cudnn_ops.h (cuDNN 9) says of one legacy algorithm, in the comment on its enum line. Only
// non-determinism is marked, so an unmarked algorithm is read as documented deterministic; one marked
// /* not implemented */ is documented neither way (test_cudnn_claims reads the header).
enum class CudnnHeaderMark {
  kUnmarked,          // no comment: documented deterministic
  kNondeterministic,  // /* non-deterministic */
  kNotImplemented,    // /* not implemented */: no claim about its determinism
};
struct CudnnAlgo {
  int index = 0;
  std::string name;  // e.g. "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0"
  CudnnHeaderMark header = CudnnHeaderMark::kUnmarked;
};
// The `documented_deterministic` detail of an algorithm with this mark: "yes", "no", or "not implemented"
// (which the promises and the report take as no claim).
inline const char* cudnn_documented_deterministic(CudnnHeaderMark m) {
  switch (m) {
    case CudnnHeaderMark::kUnmarked: return "yes";
    case CudnnHeaderMark::kNondeterministic: return "no";
    case CudnnHeaderMark::kNotImplemented: return "not implemented";
  }
  return "?";
}
// The cuDNN legacy convolution algorithms of one pass ("fwd", "bwd_data", "bwd_filter"): every index
// the legacy API knows (CUDNN_CONVOLUTION_*_ALGO_COUNT), so probes can expand `fwd_algo=all` into one
// target per index. The list does not depend on the shape: an index that cuDNN cannot run for a shape
// becomes a skipped observation with cuDNN's reason. Header-only, so it answers without CUDA too;
// kernels/cuda/cudnn_backend.cpp checks it against cudnn.h at compile time. Empty for an unknown pass.
inline std::vector<CudnnAlgo> cudnn_conv_algorithms(const ConvShape& /*shape*/, const std::string& pass) {
  constexpr auto kDet = CudnnHeaderMark::kUnmarked, kNondet = CudnnHeaderMark::kNondeterministic,
                 kNotImpl = CudnnHeaderMark::kNotImplemented;
  if (pass == "fwd")
    return {{0, "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM", kDet},
            {1, "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM", kDet},
            {2, "CUDNN_CONVOLUTION_FWD_ALGO_GEMM", kDet},
            {3, "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT", kDet},
            {4, "CUDNN_CONVOLUTION_FWD_ALGO_FFT", kDet},
            {5, "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING", kDet},
            {6, "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD", kDet},
            {7, "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED", kDet}};
  if (pass == "bwd_data")
    return {{0, "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0", kNondet},
            {1, "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1", kDet},
            {2, "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT", kDet},
            {3, "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING", kDet},
            {4, "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD", kDet},
            {5, "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED", kDet}};
  if (pass == "bwd_filter")
    return {{0, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0", kNondet},
            {1, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1", kDet},
            {2, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT", kDet},
            {3, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3", kNondet},
            {4, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD", kNotImpl},
            {5, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED", kDet},
            {6, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING", kDet}};
  return {};
}

// cuBLASLt: how many algorithms the `cublaslt` target asks the heuristic for; `algo` takes 0..this - 1.
inline constexpr int kCublasLtMaxAlgos = 64;

// Whether cuBLAS emulates FP32 through BF16x9 (CUBLAS_FP32_EMULATED_BF16X9_MATH) on a GPU of this compute
// capability. cuBLAS accepts the math mode on every GPU but implements the emulation only on a subset of
// Blackwell: compute capability 10.0 and 10.3 (B200/GB200, B300/GB300; the cuBLAS documentation's
// floating-point emulation support overview, and NVIDIA's bf16x9_sgemm sample: "emulated algorithms are
// implemented on a subset of architectures"). Elsewhere plain FP32 runs, and no API reports which ran.
inline bool cublas_emulates_bf16x9(int cc_major, int cc_minor) {
  return cc_major == 10 && (cc_minor == 0 || cc_minor == 3);
}

// The CUDA runtime errors (cudaError_t values of driver_types.h, as ints so that this compiles without
// CUDA; kernels/cuda/common.cpp checks each against the header at compile time) after which the context
// is lost until the process exits: "the process is left in an inconsistent state" and "any further CUDA
// work will return the same error". GpuBackend::context_state asks this of what a synchronisation returns.
namespace cuda_error {
inline constexpr int kContained = 226, kIllegalAddress = 700, kLaunchTimeout = 702, kAssert = 710,
                     kHardwareStackError = 714, kIllegalInstruction = 715, kMisalignedAddress = 716,
                     kInvalidAddressSpace = 717, kInvalidPc = 718, kLaunchFailure = 719, kTensorMemoryLeak = 721,
                     kMpsClientTerminated = 810, kExternalDevice = 911, kUnknown = 999;
}  // namespace cuda_error
inline bool cuda_error_loses_context(int code) {
  using namespace cuda_error;
  switch (code) {
    case kContained:
    case kIllegalAddress:
    case kLaunchTimeout:
    case kAssert:
    case kHardwareStackError:
    case kIllegalInstruction:
    case kMisalignedAddress:
    case kInvalidAddressSpace:
    case kInvalidPc:
    case kLaunchFailure:
    case kTensorMemoryLeak:
    case kExternalDevice:
    case kMpsClientTerminated:
    // Not documented as sticky, but it is what the runtime returns after a fault it cannot name (an Xid
    // the driver does not map, a device that fell off the bus): the context is unusable from then on, and
    // taking it as live would run the next repeats into the same error.
    case kUnknown: return true;
    default: return false;
  }
}

#if defined(DETAUDIT_HAVE_CUDA)
// Test and benchmark hook, defined only in CUDA builds (kernels/cuda/device_hash.cu): the device-side
// pre-hash behind GpuBackend::fingerprint (its four lanes), on the current device. Its CPU reference is
// gpu::device_hash_host (kernels/cuda/device_hash.hpp).
Status device_hash(const void* device_ptr, size_t bytes, const gpu::DeviceHashKey& key, uint64_t out[4]);
#endif

}  // namespace detaudit
