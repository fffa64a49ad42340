// The `cuda` target: detaudit's own CUDA kernels, order=tree (deterministic) or order=atomic.
#include "kernels/cuda/common.hpp"
#include "kernels/cuda/native_kernels.hpp"

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

}  // namespace

Status validate_cuda_native(const Params& p) {
  std::string order;
  return p.choice("order", {"tree", "atomic"}, "tree", &order);
}

std::unique_ptr<Backend> make_cuda_native(int device, const Params& p, Status* st) {
  std::string order;
  *st = p.choice("order", {"tree", "atomic"}, "tree", &order);
  if (!st->is_ok()) return nullptr;
  auto b = std::make_unique<CudaNative>(device, order == "atomic");
  *st = b->init_native();
  if (!st->is_ok()) return nullptr;
  return b;
}

}  // namespace detaudit::gpu
