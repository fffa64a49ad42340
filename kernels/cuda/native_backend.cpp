// The `cuda` target: detaudit's own CUDA kernels, order=tree (deterministic), order=atomic, or
// order=portable (kernels/portable.hpp's arithmetic: the bits of cpu?order=portable).
#include "kernels/checks.hpp"
#include "kernels/cuda/common.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/native_kernels.hpp"
#include "kernels/cuda/portable_kernels.hpp"

namespace detaudit::gpu {

namespace {

class CudaNative final : public GpuBackend {
 public:
  // determinism: order=atomic also makes the base's training reductions (bias gradient, loss) atomic.
  CudaNative(int device, bool atomic)
      : GpuBackend(device, "cuda:" + std::to_string(device) + "?order=" + (atomic ? "atomic" : "tree"), atomic),
        atomic_(atomic) {
    set_detail("order", atomic ? "atomic" : "tree");
  }
  ~CudaNative() override {
    if (scratch_) cudaFree(scratch_);
  }
  Status init_native() {
    DETAUDIT_RETURN_IF_ERROR(init());
    DETAUDIT_CUDA(cudaMalloc(&scratch_, (kReducePartials + 1) * sizeof(float)));
    return Status::ok();
  }

  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    return native_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  Status gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                  int ldb, double beta, double* c, int ldc) override {
    return native_gemm_f64(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    return native_conv_fwd(s, x, w, y);
  }
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    return native_conv_bwd_data(s, dy, w, dx);
  }
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    return native_conv_bwd_filter(s, atomic_, x, dy, dw);
  }
  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override { return native_maxpool_fwd(s, x, y); }
  Status maxpool_bwd(const PoolShape& s, const float* x, const float*, const float* dy, float* dx) override {
    return native_maxpool_bwd(s, atomic_, x, dy, dx);
  }
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    if (op == ReduceOp::kDot && !y) return Status::invalid("reduce dot: y is null");
    return native_reduce(op, atomic_, x, y, n, out, scratch_);
  }
  Status softmax(const float* x, float* y, size_t rows, size_t cols) override {
    return native_softmax(atomic_, x, y, rows, cols);
  }
  Status unary(UnaryOp op, const float* x, float* y, size_t n) override { return native_unary(op, x, y, n); }
  Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) override {
    return native_binary(op, a, b, y, n);
  }
  Status axpy(size_t n, float alpha, const float* x, float* y) override { return native_axpy(n, alpha, x, y); }

 private:
  bool atomic_;
  float* scratch_ = nullptr;
};

// order=portable: every op, the training ops included, from kernels/cuda/portable.cu.
class CudaPortable final : public GpuBackend {
 public:
  explicit CudaPortable(int device) : GpuBackend(device, "cuda:" + std::to_string(device) + "?order=portable") {
    set_detail("order", "portable");
  }
  ~CudaPortable() override {
    if (scratch_) cudaFree(scratch_);
  }

  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    if (m < 0 || n < 0 || k < 0) return Status::invalid("gemm: negative size");
    return portable_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  Status gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                  int ldb, double beta, double* c, int ldc) override {
    if (m < 0 || n < 0 || k < 0) return Status::invalid("gemm: negative size");
    return portable_gemm_f64(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    return portable_conv_fwd(s, x, w, y);
  }
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    return portable_conv_bwd_data(s, dy, w, dx);
  }
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    return portable_conv_bwd_filter(s, x, dy, dw);
  }
  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(validate_pool(s));
    return portable_maxpool_fwd(s, x, y);
  }
  Status maxpool_bwd(const PoolShape& s, const float* x, const float*, const float* dy, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(validate_pool(s));
    return portable_maxpool_bwd(s, x, dy, dx);
  }
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    if (op == ReduceOp::kDot && !y) return Status::invalid("reduce dot: y is null");
    DETAUDIT_RETURN_IF_ERROR(reserve(portable_scratch_floats(n)));
    return portable_reduce(op, x, y, n, out, scratch_);
  }
  Status softmax(const float* x, float* y, size_t rows, size_t cols) override {
    if (cols == 0) return Status::invalid("softmax: no columns");
    return portable_softmax(x, y, rows, cols);
  }
  Status unary(UnaryOp op, const float* x, float* y, size_t n) override { return portable_unary(op, x, y, n); }
  Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) override {
    return portable_binary(op, a, b, y, n);
  }
  Status axpy(size_t n, float alpha, const float* x, float* y) override { return portable_axpy(n, alpha, x, y); }
  Status bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw) override {
    return portable_bias_add(y, bias, n, c, hw);
  }
  Status bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) override {
    return portable_bias_grad(dy, db, n, c, hw);
  }
  Status unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) override {
    return portable_unary_bwd(op, x, y, dy, dx, n);
  }
  Status upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) override {
    return portable_upsample2_fwd(x, y, planes, h, w);
  }
  Status upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) override {
    return portable_upsample2_bwd(dy, dx, planes, h, w);
  }
  Status scale(float* y, float alpha, size_t n) override { return portable_scale(y, alpha, n); }
  Status loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy) override {
    if (n == 0) return Status::invalid("loss: no elements");
    DETAUDIT_RETURN_IF_ERROR(reserve(portable_scratch_floats(n)));
    return portable_loss(op, y, t, n, value, dy, scratch_);
  }
  Status adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) override {
    return portable_adam(p, w, g, m, v, n);
  }
  Status sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n) override {
    return portable_sgd(p, w, g, velocity, n);
  }

 private:
  Status reserve(size_t floats) {
    if (floats <= scratch_floats_) return Status::ok();
    if (scratch_) {
      DETAUDIT_CUDA(cudaDeviceSynchronize());  // earlier launches may still read it
      cudaFree(scratch_);
      scratch_ = nullptr;
      scratch_floats_ = 0;
    }
    DETAUDIT_CUDA(cudaMalloc(&scratch_, floats * sizeof(float)));
    scratch_floats_ = floats;
    return Status::ok();
  }
  float* scratch_ = nullptr;
  size_t scratch_floats_ = 0;
};


Status validate_cuda_native(const Params& p) {
  std::string order;
  return p.choice("order", {"tree", "atomic", "portable"}, "tree", &order);
}

BackendOr make_cuda_native(int device, const Params& p) {
  std::string order;
  DETAUDIT_RETURN_IF_ERROR(p.choice("order", {"tree", "atomic", "portable"}, "tree", &order));
  if (order == "portable") {
    auto b = std::make_unique<CudaPortable>(device);
    DETAUDIT_RETURN_IF_ERROR(b->init());
    return b;
  }
  auto b = std::make_unique<CudaNative>(device, order == "atomic");
  DETAUDIT_RETURN_IF_ERROR(b->init_native());
  return b;
}

}  // namespace

}  // namespace detaudit::gpu

namespace detaudit {
// What the cuda registry entry opens (probes/backends/cuda.cpp).
extern const GpuKernels kCudaNativeKernels = {
    [](const std::map<std::string, std::string>& m) { return gpu::validate_cuda_native(gpu::Params(m)); },
    [](int device, const std::map<std::string, std::string>& m) { return gpu::make_cuda_native(device, gpu::Params(m)); }};
}  // namespace detaudit
