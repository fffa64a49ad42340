// The `cuda` backend's own kernels (native_dense.cu, native_conv.cu). All run on the legacy default
// stream and return after launching; errors of the launch come back as a Status, faults at the next sync.
// `atomic` selects the nondeterministic variant of an op (order=atomic); otherwise every op combines
// its terms in a fixed order that depends only on the shape, never on timing or on the GPU model.
#pragma once
#include "kernels/backend.hpp"

namespace detaudit::gpu {

// Reductions use at most this many per-block partials, plus one float for the atomic accumulator.
constexpr int kReducePartials = 1024;

Status native_gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                   int ldb, float beta, float* c, int ldc);
Status native_gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
                       const double* b, int ldb, double beta, double* c, int ldc);
// scratch: kReducePartials + 1 floats of device memory.
Status native_reduce(ReduceOp op, bool atomic, const float* x, const float* y, size_t n, float* out, float* scratch);
Status native_softmax(bool atomic, const float* x, float* y, size_t rows, size_t cols);
Status native_unary(UnaryOp op, const float* x, float* y, size_t n);
Status native_binary(BinaryOp op, const float* a, const float* b, float* y, size_t n);
Status native_axpy(size_t n, float alpha, const float* x, float* y);

Status native_conv_fwd(const ConvShape& s, const float* x, const float* w, float* y);
Status native_conv_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx);
Status native_conv_bwd_filter(const ConvShape& s, bool atomic, const float* x, const float* dy, float* dw);
Status native_maxpool_fwd(const PoolShape& s, const float* x, float* y);
Status native_maxpool_bwd(const PoolShape& s, bool atomic, const float* x, const float* dy, float* dx);

}  // namespace detaudit::gpu
