// Host loops behind the training ops of the CPU backends (Backend::bias_add ... sgd_step).
// Two flavours: *_f32 is the native backend's arithmetic (float, each operation rounded, no FMA:
// the project builds with -ffp-contract=off), *_f64 is cpu-ref's (double, rounded to float once per
// stored value). Every function works on a range, so a caller can split the range over threads.
// determinism: all of these are elementwise or sum a fixed, tiny set of terms in a fixed order; the
// order-dependent reductions (bias gradient, loss sums) live in the backends.
#pragma once
#include <cstddef>

#include "kernels/backend.hpp"

namespace detaudit::train_ops {

// Planes [p0, p1) of a bias add: plane p is channel p % c.
void bias_add_f32(float* y, const float* bias, size_t c, size_t hw, size_t p0, size_t p1);

// dx[i] = dy[i] * f'(...) for i in [b, e).
void unary_bwd_f32(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t b, size_t e);
void unary_bwd_f64(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t b, size_t e);

// y[i] = tanh(x[i]) for i in [b, e): the native backend's own tanh, a fixed sequence of IEEE
// multiplies, adds and one division (no library call, no FMA), so it vectorizes on every ISA with the
// same bits, whatever libm the machine has. |x| < 0.625: x + x*z*P(z), z = x*x, P Cephes' degree-4 odd
// polynomial; otherwise 1 - 2/(exp(2|x|) + 1) with the sign of x, exp by Cody-Waite reduction and
// Cephes' degree-6 polynomial (2|x| capped at 40, where the result is 1). Within 2 ulps of tanh
// (tests/test_native.cpp checks it against cpu-ref's double tanh).
void tanh_f32(const float* x, float* y, size_t b, size_t e);

// The native backend's hard sigmoid of one value (its unary kHardSigmoid and lstm_fwd_f32), Keras'
// clip(0.2x + 0.5, 0, 1): min(1, max(0, w)) written out as comparisons, so that loops vectorize; NaN gives 0.
inline float hard_sigmoid_one(float v) {
  const float w = 0.2f * v + 0.5f;
  const float lo = 0.0f < w ? w : 0.0f;
  return lo < 1.0f ? lo : 1.0f;
}

// Backend::lstm_cell_fwd and lstm_cell_bwd for elements [b, e) of one gate (index sample*kc + j), in the
// native backend's arithmetic: exactly its unary (hard sigmoid, tanh_f32), binary multiply and axpy
// (fma(1, x, y), which is the one rounded x + y), one pass instead of a dozen.
void lstm_fwd_f32(const LstmFwdArgs& a, size_t b, size_t e);
void lstm_bwd_f32(const LstmBwdArgs& a, size_t b, size_t e);

// Planes [p0, p1).
void upsample2_fwd(const float* x, float* y, int h, int w, size_t p0, size_t p1);
void upsample2_bwd_f32(const float* dy, float* dx, int h, int w, size_t p0, size_t p1);
void upsample2_bwd_f64(const float* dy, float* dx, int h, int w, size_t p0, size_t p1);

// Elements [b, e).
void adam_f32(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t b, size_t e);
void adam_f64(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t b, size_t e);
void sgd_f32(const SgdParams& p, float* w, const float* g, float* vel, size_t b, size_t e);
void sgd_f64(const SgdParams& p, float* w, const float* g, float* vel, size_t b, size_t e);

// Loss pieces for elements [b, e): d[i] = y[i] - t[i] (kMse) or |y[i] - t[i]| (kL1), the terms the
// caller sums in its order, and dy[i] (when dy is set) as Backend::loss defines it.
void loss_terms_f32(LossOp op, const float* y, const float* t, size_t n, float* d, float* dy, size_t b, size_t e);

}  // namespace detaudit::train_ops
