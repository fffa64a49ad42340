// cuda:N?order=portable: kernels/portable.hpp's arithmetic on the device (kernels/cuda/portable.cu),
// the bits of cpu?order=portable. One thread per output element (or per leaf of a long sum); the grid
// only says who computes what. All run on the legacy default stream and return after launching.
#pragma once
#include "kernels/backend.hpp"

namespace detaudit::gpu {

// Device scratch a reduction of n terms needs: two buffers of its leaves' partials.
size_t portable_scratch_floats(size_t n);

Status portable_gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                     int ldb, float beta, float* c, int ldc);
Status portable_gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
                         const double* b, int ldb, double beta, double* c, int ldc);
Status portable_conv_fwd(const ConvShape& s, const float* x, const float* w, float* y);
Status portable_conv_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx);
Status portable_conv_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw);
Status portable_maxpool_fwd(const PoolShape& s, const float* x, float* y);
Status portable_maxpool_bwd(const PoolShape& s, const float* x, const float* dy, float* dx);
// out: one float of device memory; scratch: portable_scratch_floats(n) floats.
Status portable_reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out, float* scratch);
Status portable_softmax(const float* x, float* y, size_t rows, size_t cols);
Status portable_unary(UnaryOp op, const float* x, float* y, size_t n);
Status portable_binary(BinaryOp op, const float* a, const float* b, float* y, size_t n);
Status portable_axpy(size_t n, float alpha, const float* x, float* y);
Status portable_bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw);
Status portable_bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw);
Status portable_unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n);
Status portable_upsample2_fwd(const float* x, float* y, size_t planes, int h, int w);
Status portable_upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w);
Status portable_scale(float* y, float alpha, size_t n);
// value: one float of device memory; scratch: portable_scratch_floats(n) floats.
Status portable_loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy, float* scratch);
Status portable_adam(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n);
Status portable_sgd(const SgdParams& p, float* w, const float* g, float* velocity, size_t n);

}  // namespace detaudit::gpu
