// Shared by the GPU backends: error conversion, parameter parsing, and GpuBackend, the base class that
// keeps memory on the device, fingerprints on the device (kernels/cuda/device_hash.cu) and traces
// kernels through CUPTI (kernels/cuda/cupti_tracer.cpp).
#pragma once
#include <cublas_api.h>
#include <cuda_runtime.h>  // (not _api.h: its cudaMalloc(T**) template serves plain C++ too)

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/device_hash.hpp"

namespace detaudit::gpu {

// "cudaMalloc(&p, n)" -> "cudaMalloc": the API name of a stringised call.
std::string api_name(const char* expr);

// Status::error("cudaMalloc: cudaErrorMemoryAllocation (2): out of memory"); ok on success.
Status from_cuda(cudaError_t e, const char* expr);
// cuBLAS and cuBLASLt share cublasStatus_t. CUBLAS_STATUS_NOT_SUPPORTED becomes unsupported.
Status from_cublas(cublasStatus_t e, const char* expr);

#define DETAUDIT_CUDA(call) DETAUDIT_RETURN_IF_ERROR(::detaudit::gpu::from_cuda((call), #call))
#define DETAUDIT_CUBLAS(call) DETAUDIT_RETURN_IF_ERROR(::detaudit::gpu::from_cublas((call), #call))
// After a kernel launch: launch-configuration errors surface here, faults at the next sync.
#define DETAUDIT_CUDA_LAUNCHED(what) DETAUDIT_RETURN_IF_ERROR(::detaudit::gpu::from_cuda(cudaGetLastError(), what))

// Number of usable devices (at least 1), or unavailable saying why there is none (driver missing, no
// device, ...).
StatusOr<int> device_count();

// Values of a spec's parameters. Keys were checked by the caller; values are checked here.
class Params {
 public:
  explicit Params(const std::map<std::string, std::string>& m) : m_(m) {}
  // *out = the value of `key` (or `def`); invalid unless it is one of `allowed`.
  Status choice(const std::string& key, const std::vector<std::string>& allowed, const std::string& def,
                std::string* out) const;
  // *out = integer value of `key` in [lo, hi], or `def`.
  Status integer(const std::string& key, long lo, long hi, long def, long* out) const;
  // An algorithm index or "auto" (-1).
  Status algo_or_auto(const std::string& key, int* out) const;

 private:
  const std::map<std::string, std::string>& m_;
};

// Device memory, device-side fingerprints, CUPTI tracing and the training ops (train_kernels.cu), common
// to every GPU backend.
class GpuBackend : public Backend {
 public:
  // atomic_reductions: the training ops' reductions (bias gradient, loss value) add their partial sums
  // with atomics (only the `cuda` target's order=atomic asks for it); otherwise fixed-shape trees.
  GpuBackend(int device, std::string name, bool atomic_reductions = false);
  ~GpuBackend() override;
  // Makes `device` current and allocates the backend's scratch memory; call once after construction.
  Status init();

  std::string name() const override { return name_; }
  std::string describe() const override;
  std::vector<std::pair<std::string, std::string>> details() const override;

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  Status upload(void* dst, const void* src, size_t bytes) override;
  Status download(void* dst, const void* src, size_t bytes) override;
  Status zero(void* p, size_t bytes) override;
  Status synchronize() override;
  Status fingerprint(const void* p, size_t bytes, Fingerprint* out) override;

  Status context_state() override;
  bool traces_kernels() const override { return true; }
  Status trace_begin(uint64_t repeat_id) override;
  Status trace_end(std::vector<KernelRecord>* kernels) override;

  // ---- training ops (models/): elementwise kernels and reductions of train_kernels.cu ------------
  Status unary(UnaryOp op, const float* x, float* y, size_t n) override;
  Status bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw) override;
  Status bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) override;
  Status unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) override;
  Status upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) override;
  Status upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) override;
  Status copy_2d(size_t rows, size_t cols, const float* src, size_t src_ld, float* dst, size_t dst_ld) override;
  Status fill(float* y, float value, size_t n) override;
  Status scale(float* y, float alpha, size_t n) override;
  Status loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy) override;
  Status adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) override;
  Status sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n) override;

 protected:
  // Settings the subclass records with every observation (appended after the device's).
  std::vector<std::pair<std::string, std::string>> extra_details_;
  void set_detail(const std::string& key, const std::string& value);
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }
  int device_;

 private:
  std::string name_, gpu_name_;
  int cc_major_ = 0, cc_minor_ = 0, sm_count_ = 0;
  unsigned long long* hash_out_ = nullptr;  // kDeviceHashLanes words of device memory for the device hash
  DeviceHashKey hash_key_;                  // the keyed lanes' secret, drawn in init()
  bool atomic_reductions_ = false;
  float* train_scratch_ = nullptr;  // kTrainScratchFloats floats: the loss's partials
  // device hash (four 64-bit lanes) and length -> canonical host fingerprint of those bytes
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, size_t>, Fingerprint> fp_cache_;
  uint64_t trace_id_ = 0;
  bool tracing_ = false;
};

// Device-side pieces implemented in .cu files, callable from plain C++.
Status launch_device_hash(const void* p, size_t bytes, const DeviceHashKey& key, unsigned long long* out_dev,
                          cudaStream_t stream);
Status launch_fill(float* p, size_t n, float value, cudaStream_t stream);

std::string cublas_version_string();

}  // namespace detaudit::gpu

