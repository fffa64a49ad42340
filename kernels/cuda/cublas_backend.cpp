// The `cublas` target: cuBLAS with every setting pinned (math mode, emulation strategy, SM count target,
// atomics mode, workspace), on one stream or split over K streams.
#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/native_kernels.hpp"

namespace detaudit::gpu {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLAS's own default on Hopper
constexpr const char* kNativeTree = "native cuda (order=tree)";

struct CublasConfig {
  std::string math, atomics, workspace;
  long streams = 1;
};

Status parse(const Params& p, CublasConfig* c) {
  DETAUDIT_RETURN_IF_ERROR(p.choice("math", {"default", "pedantic", "tf32", "bf16x9"}, "default", &c->math));
  DETAUDIT_RETURN_IF_ERROR(p.choice("atomics", {"allowed", "not_allowed"}, "not_allowed", &c->atomics));
  DETAUDIT_RETURN_IF_ERROR(p.integer("streams", 1, 16, 1, &c->streams));
  return p.choice("workspace", {"shared", "per_stream"}, "per_stream", &c->workspace);
}

cublasMath_t math_mode(const std::string& m) {
  if (m == "pedantic") return CUBLAS_PEDANTIC_MATH;
  if (m == "tf32") return CUBLAS_TF32_TENSOR_OP_MATH;
  if (m == "bf16x9") return CUBLAS_FP32_EMULATED_BF16X9_MATH;
  return CUBLAS_DEFAULT_MATH;
}

cublasOperation_t op(Trans t) { return t == Trans::kT ? CUBLAS_OP_T : CUBLAS_OP_N; }

class Cublas final : public GpuBackend {
 public:
  Cublas(int device, CublasConfig c)
      : GpuBackend(device, fmt::format("cublas:{}?math={}&atomics={}&streams={}&workspace={}", device, c.math,
                                       c.atomics, c.streams, c.workspace)),
        c_(std::move(c)) {}

  ~Cublas() override {
    for (auto h : handles_) cublasDestroy(h);
    for (auto s : streams_) if (s) cudaStreamDestroy(s);
    for (auto e : events_) if (e) cudaEventDestroy(e);
    for (auto w : workspaces_) cudaFree(w);
    if (ones_) cudaFree(ones_);
  }

  Status init_cublas() {
    DETAUDIT_RETURN_IF_ERROR(init());
    const int k = int(c_.streams);
    // streams=1: the legacy default stream, ordered with every other op of this backend.
    // streams=K: K blocking streams (they also order with the legacy stream) and a handle on each.
    streams_.assign(k, nullptr);
    if (k > 1)
      for (auto& s : streams_) DETAUDIT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamDefault));
    events_.assign(k + 1, nullptr);
    for (auto& e : events_) DETAUDIT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    // determinism: workspace=shared hands ONE buffer to all K handles, whose kernels then run
    // concurrently and may scribble over each other's scratch (split-K partials): a real race, kept on
    // purpose so the audit can show it. per_stream gives each handle its own buffer (NVIDIA's rule).
    const int buffers = c_.workspace == "shared" ? 1 : k;
    for (int i = 0; i < buffers; ++i) {
      void* w = nullptr;
      DETAUDIT_CUDA(cudaMalloc(&w, kWorkspaceBytes));
      workspaces_.push_back(w);
    }
    const cublasMath_t math = math_mode(c_.math);
    // Emulation only acts under an emulated math mode; EAGER makes math=bf16x9 emulate wherever cuBLAS
    // can, PERFORMANT elsewhere. Both replace CUBLAS_EMULATION_STRATEGY from the environment.
    const cublasEmulationStrategy_t emulation =
        c_.math == "bf16x9" ? CUBLAS_EMULATION_STRATEGY_EAGER : CUBLAS_EMULATION_STRATEGY_PERFORMANT;
    for (int i = 0; i < k; ++i) {
      cublasHandle_t h = nullptr;
      DETAUDIT_CUBLAS(cublasCreate(&h));
      handles_.push_back(h);
      DETAUDIT_CUBLAS(cublasSetStream(h, streams_[i]));  // resets the workspace: set it afterwards
      DETAUDIT_CUBLAS(cublasSetWorkspace(h, workspaces_[c_.workspace == "shared" ? 0 : i], kWorkspaceBytes));
      DETAUDIT_CUBLAS(cublasSetMathMode(h, math));
      DETAUDIT_CUBLAS(cublasSetEmulationStrategy(h, emulation));
      DETAUDIT_CUBLAS(cublasSetSmCountTarget(h, 0));  // 0 = every SM of the device
      // determinism: atomics=allowed lets cuBLAS pick routines that combine partial results with atomics.
      DETAUDIT_CUBLAS(cublasSetAtomicsMode(
          h, c_.atomics == "allowed" ? CUBLAS_ATOMICS_ALLOWED : CUBLAS_ATOMICS_NOT_ALLOWED));
    }
    int version = 0;
    DETAUDIT_CUBLAS(cublasGetVersion(handles_[0], &version));
    set_detail("math", c_.math);
    set_detail("emulation_strategy", c_.math == "bf16x9" ? "eager" : "performant");
    // What math=bf16x9 really runs: cuBLAS says nothing after the call, so it is read off the GPU.
    if (c_.math == "bf16x9")
      set_detail("emulated", cublas_emulates_bf16x9(cc_major(), cc_minor())
                                 ? "yes: BF16x9 (cuBLAS emulates FP32 on compute capability 10.0 and 10.3)"
                                 : fmt::format("no: not emulated on this GPU (compute capability {}.{}; cuBLAS "
                                               "emulates BF16x9 only on 10.0 and 10.3), plain FP32 runs",
                                               cc_major(), cc_minor()));
    set_detail("atomics", c_.atomics);
    set_detail("streams", std::to_string(k));
    set_detail("workspace", fmt::format("{} ({} x {} MiB)", c_.workspace, buffers, kWorkspaceBytes >> 20));
    set_detail("sm_count_target", "0 (all)");
    set_detail("cublas_version", std::to_string(version));
    for (const char* env : {"CUBLAS_WORKSPACE_CONFIG", "CUBLAS_EMULATE_SINGLE_PRECISION", "NVIDIA_TF32_OVERRIDE"})
      if (const char* v = std::getenv(env)) set_detail(std::string("env.") + env, v);
    return Status::ok();
  }

  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    return split_gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  Status gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                  int ldb, double beta, double* c, int ldc) override {
    return split_gemm<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    cublasHandle_t h = handles_[0];
    DETAUDIT_RETURN_IF_ERROR(fork(1));
    DETAUDIT_CUBLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));  // result stays on the device
    Status st;
    if (op == ReduceOp::kNorm2) {
      st = from_cublas(cublasSnrm2_64(h, int64_t(n), x, 1, out), "cublasSnrm2_64");
    } else {
      if (op == ReduceOp::kSum) {  // sum = dot with a vector of ones
        st = ones(n);
        y = ones_;
      } else if (!y) {
        st = Status::invalid("reduce dot: y is null");
      }
      if (st) st = from_cublas(cublasSdot_64(h, int64_t(n), x, 1, y, 1, out), "cublasSdot_64");
    }
    DETAUDIT_CUBLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    DETAUDIT_RETURN_IF_ERROR(st);
    return join(1);
  }

  Status axpy(size_t n, float alpha, const float* x, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(fork(1));
    DETAUDIT_CUBLAS(cublasSaxpy_64(handles_[0], int64_t(n), &alpha, x, 1, y, 1));
    return join(1);
  }

  // cuBLAS has no convolution or pooling; a model's conv and pool layers run on the `cuda` target's
  // kernels, on the legacy stream, which the K streams wait for (fork) and which waits for them (join).
  // Recorded in the details from the first such op on, so observations of cuBLAS's own ops are unchanged.
  // determinism: order=tree variants only: gathers and fixed trees, no atomics (native_conv.cu).
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    set_detail("conv_via", kNativeTree);
    return native_conv_fwd(s, x, w, y);
  }
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    set_detail("conv_via", kNativeTree);
    return native_conv_bwd_data(s, dy, w, dx);
  }
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    set_detail("conv_via", kNativeTree);
    return native_conv_bwd_filter(s, /*atomic=*/false, x, dy, dw);
  }
  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override {
    set_detail("pool_via", kNativeTree);
    return native_maxpool_fwd(s, x, y);
  }
  Status maxpool_bwd(const PoolShape& s, const float* x, const float*, const float* dy, float* dx) override {
    set_detail("pool_via", kNativeTree);
    return native_maxpool_bwd(s, /*atomic=*/false, x, dy, dx);
  }

 private:
  // The K streams start after everything issued so far on the legacy stream, and the legacy stream
  // waits for them at the end, so ops stay ordered for the caller.
  Status fork(int used) {
    if (c_.streams == 1) return Status::ok();
    DETAUDIT_CUDA(cudaEventRecord(events_[0], nullptr));
    for (int i = 0; i < used; ++i) DETAUDIT_CUDA(cudaStreamWaitEvent(streams_[i], events_[0], 0));
    return Status::ok();
  }
  Status join(int used) {
    if (c_.streams == 1) return Status::ok();
    for (int i = 0; i < used; ++i) {
      DETAUDIT_CUDA(cudaEventRecord(events_[i + 1], streams_[i]));
      DETAUDIT_CUDA(cudaStreamWaitEvent(nullptr, events_[i + 1], 0));
    }
    return Status::ok();
  }

  Status ones(size_t n) {
    if (n <= ones_n_) return Status::ok();
    if (ones_) cudaFree(ones_);
    ones_ = nullptr;
    ones_n_ = 0;
    DETAUDIT_CUDA(cudaMalloc(&ones_, std::max<size_t>(n, 1) * sizeof(float)));
    DETAUDIT_RETURN_IF_ERROR(launch_fill(ones_, n, 1.f, streams_[0]));
    ones_n_ = n;
    return Status::ok();
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the flags.
  // determinism: streams=K cuts C's n columns into K slices, one gemm per stream and handle; each slice
  // is a narrower gemm, for which cuBLAS may choose another kernel, and the slices run concurrently.
  template <typename T>
  Status split_gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                    T beta, T* c, int ldc) {
    if (m <= 0 || n <= 0) return Status::ok();
    const int parts = int(std::min<long>(c_.streams, n));
    DETAUDIT_RETURN_IF_ERROR(fork(parts));
    for (int i = 0; i < parts; ++i) {
      const int n0 = int(int64_t(n) * i / parts), n1 = int(int64_t(n) * (i + 1) / parts);
      const T* bi = tb == Trans::kN ? b + n0 : b + size_t(n0) * ldb;  // columns n0.. of op(B)
      cublasHandle_t h = handles_[i];
      DETAUDIT_CUBLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
      if constexpr (std::is_same_v<T, float>)
        DETAUDIT_CUBLAS(cublasSgemm(h, op(tb), op(ta), n1 - n0, m, k, &alpha, bi, ldb, a, lda, &beta, c + n0, ldc));
      else
        DETAUDIT_CUBLAS(cublasDgemm(h, op(tb), op(ta), n1 - n0, m, k, &alpha, bi, ldb, a, lda, &beta, c + n0, ldc));
    }
    return join(parts);
  }

  CublasConfig c_;
  std::vector<cublasHandle_t> handles_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  std::vector<void*> workspaces_;
  float* ones_ = nullptr;
  size_t ones_n_ = 0;
};


Status validate_cublas(const Params& p) {
  CublasConfig c;
  return parse(p, &c);
}

BackendOr make_cublas(int device, const Params& p) {
  CublasConfig c;
  DETAUDIT_RETURN_IF_ERROR(parse(p, &c));
  auto b = std::make_unique<Cublas>(device, std::move(c));
  DETAUDIT_RETURN_IF_ERROR(b->init_cublas());
  return b;
}

}  // namespace

}  // namespace detaudit::gpu

namespace detaudit {
// What the cublas registry entry opens (probes/backends/cublas.cpp).
extern const GpuKernels kCublasKernels = {
    [](const std::map<std::string, std::string>& m) { return gpu::validate_cublas(gpu::Params(m)); },
    [](int device, const std::map<std::string, std::string>& m) { return gpu::make_cublas(device, gpu::Params(m)); }};
}  // namespace detaudit
