#include "kernels/cuda/common.hpp"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <cstdlib>
#include <limits>

#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/cupti_tracer.hpp"
#include "kernels/cuda/native_kernels.hpp"
#include "kernels/cuda/train_kernels.hpp"

namespace detaudit::gpu {

std::string api_name(const char* expr) {
  std::string s(expr);
  size_t paren = s.find('(');
  s = s.substr(0, paren);
  size_t colon = s.rfind(':');  // drop a leading "::"
  return colon == std::string::npos ? s : s.substr(colon + 1);
}

Status from_cuda(cudaError_t e, const char* expr) {
  if (e == cudaSuccess) return Status::ok();
  return Status::error(fmt::format("{}: {} ({}): {}", api_name(expr), cudaGetErrorName(e), int(e),
                                   cudaGetErrorString(e)));
}

Status from_cublas(cublasStatus_t e, const char* expr) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::ok();
  std::string m = fmt::format("{}: {} ({}): {}", api_name(expr), cublasGetStatusName(e), int(e),
                              cublasGetStatusString(e));
  return e == CUBLAS_STATUS_NOT_SUPPORTED ? Status::unsupported(m) : Status::error(m);
}

namespace {

bool nvidia_device_files() {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/dev", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    if (it->path().filename().string().rfind("nvidia", 0) == 0) return true;
  return false;
}

// Whether the driver's libcuda.so.1 loads here: already loaded (the runtime loads it), or loadable.
// Never linked (a binary linked to the stub fails to start without a driver).
Status libcuda_loads() {
  if (void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
    dlclose(h);
    return Status::ok();
  }
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    return Status::unavailable(e ? e : "");
  }
  dlclose(h);
  return Status::ok();
}

}  // namespace

StatusOr<int> device_count() {
  int n = 0;  // left untouched by cudaGetDeviceCount without a driver
  cudaError_t e = cudaGetDeviceCount(&n);
  std::string said;
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it, so a later cudaGetLastError() does not report it again
    said = fmt::format("cudaGetDeviceCount returned {} ({}): {}", cudaGetErrorName(e), int(e), cudaGetErrorString(e));
    n = 0;
  } else if (n <= 0) {
    said = "cudaGetDeviceCount found 0 devices";
  }
  if (n > 0) return n;
  const Status lib = libcuda_loads();
  return Status::unavailable(explain_no_cuda_device(nvidia_device_files(), lib.is_ok(), lib.message(), said));
}

std::string cublas_version_string() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
    return "";
  return fmt::format("{}.{}.{}", major, minor, patch);
}

// ---- Params ----------------------------------------------------------------------------------

Status Params::choice(const std::string& key, const std::vector<std::string>& allowed,
                      const std::string& def, std::string* out) const {
  auto it = m_.find(key);
  *out = it == m_.end() ? def : it->second;
  for (const auto& a : allowed)
    if (*out == a) return Status::ok();
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : "|") + a;
  return Status::invalid(fmt::format("{}={}: expected {}", key, *out, list));
}

Status Params::integer(const std::string& key, long lo, long hi, long def, long* out) const {
  auto it = m_.find(key);
  if (it == m_.end()) {
    *out = def;
    return Status::ok();
  }
  const std::string& v = it->second;
  char* end = nullptr;
  long x = v.empty() ? 0 : std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    return Status::invalid(fmt::format("{}={}: expected an integer in [{}, {}]", key, v, lo, hi));
  *out = x;
  return Status::ok();
}

Status Params::algo_or_auto(const std::string& key, int* out) const {
  auto it = m_.find(key);
  if (it == m_.end() || it->second == "auto") {
    *out = -1;
    return Status::ok();
  }
  long x = 0;
  Status st = integer(key, 0, 63, 0, &x);
  if (!st) return Status::invalid(fmt::format("{}={}: expected an algorithm index or auto", key, it->second));
  *out = int(x);
  return Status::ok();
}

// ---- GpuBackend --------------------------------------------------------------------------------

GpuBackend::GpuBackend(int device, std::string name, bool atomic_reductions)
    : device_(device), name_(std::move(name)), atomic_reductions_(atomic_reductions) {}

GpuBackend::~GpuBackend() {
  if (hash_out_) cudaFree(hash_out_);
  if (train_scratch_) cudaFree(train_scratch_);
}

Status GpuBackend::init() {
  DETAUDIT_CUDA(cudaSetDevice(device_));
  cudaDeviceProp prop;
  DETAUDIT_CUDA(cudaGetDeviceProperties(&prop, device_));
  gpu_name_ = prop.name;
  cc_major_ = prop.major;
  cc_minor_ = prop.minor;
  sm_count_ = prop.multiProcessorCount;
  hash_key_ = DeviceHashKey::random();
  DETAUDIT_CUDA(cudaMalloc(&hash_out_, kDeviceHashLanes * sizeof(unsigned long long)));
  DETAUDIT_CUDA(cudaMalloc(&train_scratch_, kTrainScratchFloats * sizeof(float)));
  return Status::ok();
}

std::string GpuBackend::describe() const {
  return fmt::format("{} on {} (sm_{}{}, {} SMs)", name_, gpu_name_, cc_major_, cc_minor_, sm_count_);
}

std::vector<std::pair<std::string, std::string>> GpuBackend::details() const {
  std::vector<std::pair<std::string, std::string>> d = {
      {"gpu", gpu_name_},
      {"compute_capability", fmt::format("{}.{}", cc_major_, cc_minor_)},
      {"sm_count", std::to_string(sm_count_)}};
  d.insert(d.end(), extra_details_.begin(), extra_details_.end());
  return d;
}

void GpuBackend::set_detail(const std::string& key, const std::string& value) {
  for (auto& kv : extra_details_)
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  extra_details_.emplace_back(key, value);
}

void* GpuBackend::alloc(size_t bytes) {
  void* p = nullptr;
  // cudaMalloc aligns to 256 bytes; a zero-byte request still gets a distinct pointer.
  if (cudaMalloc(&p, bytes == 0 ? 256 : bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}

void GpuBackend::free(void* p) {
  if (p) cudaFree(p);
}

Status GpuBackend::upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::ok();
  DETAUDIT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return Status::ok();
}

Status GpuBackend::download(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::ok();
  DETAUDIT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return Status::ok();
}

Status GpuBackend::zero(void* p, size_t bytes) {
  if (bytes == 0) return Status::ok();
  DETAUDIT_CUDA(cudaMemset(p, 0, bytes));
  return Status::ok();
}

Status GpuBackend::synchronize() {
  DETAUDIT_CUDA(cudaDeviceSynchronize());
  return Status::ok();
}

Status GpuBackend::fingerprint(const void* p, size_t bytes, Fingerprint* out) {
  if (bytes == 0) {
    *out = fingerprint_bytes(nullptr, 0);
    return Status::ok();
  }
  // A repeat whose bytes were seen before is recognised on the device: only 32 bytes come back.
  // Four lanes: a collision built on purpose against the public ones still differs in the keyed ones.
  DETAUDIT_RETURN_IF_ERROR(launch_device_hash(p, bytes, hash_key_, hash_out_, nullptr));
  unsigned long long h[kDeviceHashLanes];
  DETAUDIT_CUDA(cudaMemcpy(h, hash_out_, sizeof(h), cudaMemcpyDeviceToHost));
  auto key = std::make_tuple(uint64_t(h[0]), uint64_t(h[1]), uint64_t(h[2]), uint64_t(h[3]), bytes);
  if (auto it = fp_cache_.find(key); it != fp_cache_.end()) {
    *out = it->second;
    return Status::ok();
  }
  std::vector<unsigned char> host(bytes);
  DETAUDIT_RETURN_IF_ERROR(download(host.data(), p, bytes));
  *out = fingerprint_bytes(host.data(), bytes);
  if (fp_cache_.size() >= (1u << 16)) fp_cache_.clear();  // bounded; a miss only costs a download
  fp_cache_.emplace(key, *out);
  return Status::ok();
}

// cuda_error_loses_context (cuda.hpp) names the sticky errors by number, so that it compiles without CUDA.
static_assert(cuda_error::kContained == cudaErrorContained && cuda_error::kIllegalAddress == cudaErrorIllegalAddress &&
              cuda_error::kLaunchTimeout == cudaErrorLaunchTimeout && cuda_error::kAssert == cudaErrorAssert &&
              cuda_error::kHardwareStackError == cudaErrorHardwareStackError &&
              cuda_error::kIllegalInstruction == cudaErrorIllegalInstruction &&
              cuda_error::kMisalignedAddress == cudaErrorMisalignedAddress &&
              cuda_error::kInvalidAddressSpace == cudaErrorInvalidAddressSpace &&
              cuda_error::kInvalidPc == cudaErrorInvalidPc && cuda_error::kLaunchFailure == cudaErrorLaunchFailure &&
              cuda_error::kTensorMemoryLeak == cudaErrorTensorMemoryLeak &&
              cuda_error::kMpsClientTerminated == cudaErrorMpsClientTerminated &&
              cuda_error::kExternalDevice == cudaErrorExternalDevice && cuda_error::kUnknown == cudaErrorUnknown,
              "a cudaError_t value of driver_types.h moved: update cuda_error in kernels/cuda/cuda.hpp");

Status GpuBackend::context_state() {
  // A sticky error answers every call, a synchronisation too; a plain one (a bad argument) is gone by now.
  cudaError_t e = cudaDeviceSynchronize();
  if (!cuda_error_loses_context(int(e))) return Status::ok();
  return Status::error(fmt::format("{} ({}): {}", cudaGetErrorName(e), int(e), cudaGetErrorString(e)));
}

Status GpuBackend::trace_begin(uint64_t repeat_id) {
  DETAUDIT_RETURN_IF_ERROR(CuptiTracer::instance().begin(repeat_id));
  trace_id_ = repeat_id;
  tracing_ = true;
  return Status::ok();
}

Status GpuBackend::trace_end(std::vector<KernelRecord>* kernels) {
  kernels->clear();
  if (!tracing_) {
    Status st = CuptiTracer::instance().available();
    return st ? Status::invalid("trace_end without trace_begin") : st;
  }
  tracing_ = false;
  return CuptiTracer::instance().end(trace_id_, kernels);
}

// ---- training ops --------------------------------------------------------------------------------

// determinism: elementwise (the `cuda` kernel of native_dense.cu); transcendental functions are the CUDA
// math library's, deterministic but not the CPU's bits.
Status GpuBackend::unary(UnaryOp op, const float* x, float* y, size_t n) { return native_unary(op, x, y, n); }
// determinism: elementwise, one add per element.
Status GpuBackend::bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw) {
  return gpu_bias_add(y, bias, n, c, hw);
}
// determinism: a fixed tree per channel, or (atomic_reductions_) chunk partials meeting through atomicAdd.
Status GpuBackend::bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) {
  return gpu_bias_grad(atomic_reductions_, dy, db, n, c, hw);
}
Status GpuBackend::unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) {
  return gpu_unary_bwd(op, x, y, dy, dx, n);
}
Status GpuBackend::upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) {
  return gpu_upsample2_fwd(x, y, planes, h, w);
}
Status GpuBackend::upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) {
  return gpu_upsample2_bwd(dy, dx, planes, h, w);
}
Status GpuBackend::copy_2d(size_t rows, size_t cols, const float* src, size_t src_ld, float* dst, size_t dst_ld) {
  return gpu_copy_2d(rows, cols, src, src_ld, dst, dst_ld);
}
Status GpuBackend::fill(float* y, float value, size_t n) { return launch_fill(y, n, value, nullptr); }
Status GpuBackend::scale(float* y, float alpha, size_t n) { return gpu_scale(y, alpha, n); }
// determinism: the value is a fixed two-pass tree, or (atomic_reductions_) block partials added with atomics.
Status GpuBackend::loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy) {
  if (!train_scratch_) return Status::invalid("loss: the backend was not initialised");
  return gpu_loss(op, atomic_reductions_, y, t, n, value, dy, train_scratch_);
}
Status GpuBackend::adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) {
  return gpu_adam_step(p, w, g, m, v, n);
}
Status GpuBackend::sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n) {
  return gpu_sgd_step(p, w, g, velocity, n);
}

}  // namespace detaudit::gpu
