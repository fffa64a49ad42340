// order=portable: one definition of every op's arithmetic, compiled for the CPU (kernels/cpu/portable.cpp)
// and for CUDA (kernels/cuda/portable.cu) from this one header, so that the bits are the same on any CPU
// ISA, any thread count and any GPU.
//
// determinism: what fixes the bits.
//  - Every operation is one IEEE-754 operation rounded to nearest even: add, mul, div, sqrt and fma are
//    written out (portable::add, ...). On the device they are the _rn intrinsics (__fadd_rn, __fmaf_rn,
//    ...), which nvcc never contracts or reassociates; on the host plain operators and std::fma, with the
//    project's -ffp-contract=off and -fno-fast-math (CMakeLists.txt), and --fmad=false for nvcc. No
//    operation is left for a compiler to choose.
//  - No library function: exp (sigmoid, softmax) is portable::exp below, a polynomial of fmas; sqrt and
//    div are correctly rounded on both sides (IEEE requires it; CUDA's __fsqrt_rn and __fdiv_rn).
//  - Every sum has one fixed tree, a function of the number of terms only: terms are cut into leaves of
//    kLeaf consecutive terms, each leaf is one chain from +0 in term order (fma for products, add for
//    sums), and the leaves combine by a binary counter (two partials of equal size merge, left + right;
//    at the end the rest merge from the right), which is the tree of pairing adjacent partials level by
//    level. Threads, blocks or the grid only choose who computes which output or which leaf.
//  - Convolutions sum over every tap of an explicitly zero-padded (and, for the data gradient,
//    zero-dilated) input: a tap outside the image is the term fma(0, w, acc), never skipped, so every
//    output element has the same term count and the same tree.
//  - Max pooling keeps the first maximum in window order (a later value replaces it only when greater).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/backend.hpp"  // the op enums

#if defined(__CUDACC__)
#define DETAUDIT_PT __host__ __device__ __forceinline__
#else
#define DETAUDIT_PT inline __attribute__((always_inline))
#endif

namespace detaudit::portable {

// Terms per leaf of every sum. Part of the bits.
constexpr int kLeaf = 256;
// Depth of the binary counter: 2^(kMaxDepth - 1) leaves are more than any op here has (sizes are
// size_t: at most 2^31 terms per output element or sum, 2^23 leaves).
constexpr int kMaxDepth = 40;

// ---- one rounded operation each ---------------------------------------------------------------------
DETAUDIT_PT float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
DETAUDIT_PT float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
DETAUDIT_PT float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DETAUDIT_PT float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
DETAUDIT_PT float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
DETAUDIT_PT float sqrt(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
DETAUDIT_PT double add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
DETAUDIT_PT double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
DETAUDIT_PT double fma(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
// Round to the nearest integer, ties to even (exact).
DETAUDIT_PT float round_even(float x) {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return std::nearbyint(x);
#endif
}
DETAUDIT_PT float from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
// 2^e for -126 <= e <= 127, exactly.
DETAUDIT_PT float pow2(int e) { return from_bits(uint32_t(e + 127) << 23); }

// exp(x): Cody–Waite reduction x = k ln2 + r, |r| <= ln2/2, a degree-7 polynomial of fmas (Cephes'
// expf coefficients), then 2^k applied as two exact power-of-two scalings (the second rounds once when
// the result is subnormal). About 1 ulp from the true value; the same bits wherever it is compiled.
DETAUDIT_PT float exp(float x) {
  if (!(x == x)) return x;                          // NaN
  if (x > 88.72283935546875f) return from_bits(0x7f800000u);  // +inf
  if (x < -103.97208404541015625f) return 0.0f;
  const float k = round_even(mul(x, 1.44269502162933349609375f));
  float r = fma(k, -0.693359375f, x);  // ln2 = 0.693359375 - 2.12194440e-4, the high part exact in k*hi
  r = fma(k, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fma(p, r, 1.3981999507e-3f);
  p = fma(p, r, 8.3334519073e-3f);
  p = fma(p, r, 4.1665795894e-2f);
  p = fma(p, r, 1.6666665459e-1f);
  p = fma(p, r, 5.0000001201e-1f);
  float y = fma(p, mul(r, r), r);
  y = add(y, 1.0f);
  const int ki = int(k), k1 = ki / 2, k2 = ki - k1;
  return mul(mul(y, pow2(k1)), pow2(k2));
}

DETAUDIT_PT float sigmoid(float x) { return div(1.0f, add(1.0f, exp(-x))); }
DETAUDIT_PT float relu(float x) { return x > 0.0f ? x : 0.0f; }
// Keras' hard sigmoid clip(0.2 x + 0.5, 0, 1); NaN stays NaN.
DETAUDIT_PT float hard_sigmoid(float x) {
  const float v = add(mul(0.2f, x), 0.5f);
  return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

// ---- the fixed summation tree -----------------------------------------------------------------------
// Partials of leaves pushed in order; merge() gives the tree's sum.
template <class T>
struct LeafCounter {
  T value[kMaxDepth];
  uint32_t size[kMaxDepth];
  int depth = 0;
  DETAUDIT_PT void push(T v) {
    value[depth] = v;
    size[depth] = 1;
    ++depth;
    while (depth >= 2 && size[depth - 2] == size[depth - 1]) {
      value[depth - 2] = add(value[depth - 2], value[depth - 1]);
      size[depth - 2] *= 2;
      --depth;
    }
  }
  DETAUDIT_PT T merge() const {
    if (depth == 0) return T(0);
    T r = value[depth - 1];
    for (int i = depth - 2; i >= 0; --i) r = add(value[i], r);
    return r;
  }
};

// One sum, term by term: chain of the current leaf plus the counter of finished leaves.
template <class T>
struct TreeSum {
  LeafCounter<T> leaves;
  T chain = T(0);
  int in_leaf = 0;
  DETAUDIT_PT void next() {
    if (++in_leaf == kLeaf) {
      leaves.push(chain);
      chain = T(0);
      in_leaf = 0;
    }
  }
  DETAUDIT_PT void product(T a, T b) {
    chain = fma(a, b, chain);
    next();
  }
  DETAUDIT_PT void term(T x) {
    chain = add(chain, x);
    next();
  }
  DETAUDIT_PT T result() {
    if (in_leaf) {
      leaves.push(chain);
      chain = T(0);
      in_leaf = 0;
    }
    return leaves.merge();
  }
};

// ---- convolution terms (NCHW, KCRS) -------------------------------------------------------------
struct Conv {
  int n, c, h, w, k, r, s, stride, pad, p, q;
};

// y[n][k][p][q] = sum over (c, r, s) of xpad[n][c][p*stride - pad + r][q*stride - pad + s] * w[k][c][r][s].
DETAUDIT_PT float conv_fwd_at(const Conv& g, const float* x, const float* wt, int n, int k, int p, int q) {
  TreeSum<float> t;
  for (int c = 0; c < g.c; ++c)
    for (int r = 0; r < g.r; ++r) {
      const int h = p * g.stride - g.pad + r;
      for (int s = 0; s < g.s; ++s) {
        const int w = q * g.stride - g.pad + s;
        const float xv = (h >= 0 && h < g.h && w >= 0 && w < g.w) ? x[((size_t(n) * g.c + c) * g.h + h) * g.w + w] : 0.0f;
        t.product(xv, wt[((size_t(k) * g.c + c) * g.r + r) * g.s + s]);
      }
    }
  return t.result();
}

// dx[n][c][h][w] = sum over (k, r, s) of dyd[n][k][h + pad - r][w + pad - s] * w[k][c][r][s], where dyd
// is dy dilated by the stride (zeros between its elements) and zero outside it.
DETAUDIT_PT float conv_bwd_data_at(const Conv& g, const float* dy, const float* wt, int n, int c, int h, int w) {
  TreeSum<float> t;
  for (int k = 0; k < g.k; ++k)
    for (int r = 0; r < g.r; ++r) {
      const int ph = h + g.pad - r;
      const bool hr = ph >= 0 && ph % g.stride == 0 && ph / g.stride < g.p;
      for (int s = 0; s < g.s; ++s) {
        const int qw = w + g.pad - s;
        const bool in = hr && qw >= 0 && qw % g.stride == 0 && qw / g.stride < g.q;
        const float d = in ? dy[((size_t(n) * g.k + k) * g.p + ph / g.stride) * g.q + qw / g.stride] : 0.0f;
        t.product(d, wt[((size_t(k) * g.c + c) * g.r + r) * g.s + s]);
      }
    }
  return t.result();
}

// dw[k][c][r][s] = sum over (n, p, q) of dy[n][k][p][q] * xpad[n][c][p*stride - pad + r][q*stride - pad + s].
DETAUDIT_PT float conv_bwd_filter_at(const Conv& g, const float* x, const float* dy, int k, int c, int r, int s) {
  TreeSum<float> t;
  for (int n = 0; n < g.n; ++n)
    for (int p = 0; p < g.p; ++p) {
      const int h = p * g.stride - g.pad + r;
      const bool hin = h >= 0 && h < g.h;
      for (int q = 0; q < g.q; ++q) {
        const int w = q * g.stride - g.pad + s;
        const float xv = (hin && w >= 0 && w < g.w) ? x[((size_t(n) * g.c + c) * g.h + h) * g.w + w] : 0.0f;
        t.product(dy[((size_t(n) * g.k + k) * g.p + p) * g.q + q], xv);
      }
    }
  return t.result();
}

// ---- gemm: C = alpha * op(A) op(B) + beta * C ----------------------------------------------------------
// Element (i, j): a sum over kk < K of op(A)[i][kk] * op(B)[kk][j]; then c = alpha * acc (beta == 0: C is
// not read) or fma(alpha, acc, beta * c).
template <class T>
DETAUDIT_PT T gemm_at(bool ta, bool tb, int K, T alpha, const T* a, int lda, const T* b, int ldb, T beta, const T* c,
                      int i, int j) {
  TreeSum<T> t;
  for (int kk = 0; kk < K; ++kk) {
    const T av = ta ? a[size_t(kk) * lda + i] : a[size_t(i) * lda + kk];
    const T bv = tb ? b[size_t(j) * ldb + kk] : b[size_t(kk) * ldb + j];
    t.product(av, bv);
  }
  const T acc = t.result();
  return beta == T(0) ? mul(alpha, acc) : fma(alpha, acc, mul(beta, *c));
}

// ---- pooling and upsampling -----------------------------------------------------------------------
struct Pool {
  int h, w, window, stride, p, q;
};
// Index in its plane of the first maximum of window (p, q).
DETAUDIT_PT int pool_argmax(const Pool& g, const float* plane, int p, int q) {
  int best = (p * g.stride) * g.w + q * g.stride;
  for (int i = 0; i < g.window; ++i)
    for (int j = 0; j < g.window; ++j) {
      const int idx = (p * g.stride + i) * g.w + q * g.stride + j;
      if (plane[idx] > plane[best]) best = idx;
    }
  return best;
}
// dx at (h, w) of one plane: the sum, in window order (p, q), of dy over the windows whose first maximum
// it is (0 + g for the first, as adding into a zeroed dx gives).
DETAUDIT_PT float pool_bwd_at(const Pool& g, const float* plane, const float* dyplane, int h, int w) {
  float acc = 0.0f;
  const int idx = h * g.w + w;
  const int p0 = h >= g.window ? (h - g.window) / g.stride + 1 : 0, q0 = w >= g.window ? (w - g.window) / g.stride + 1 : 0;
  for (int p = p0; p < g.p && p * g.stride <= h; ++p)
    for (int q = q0; q < g.q && q * g.stride <= w; ++q)
      if (pool_argmax(g, plane, p, q) == idx) acc = add(acc, dyplane[p * g.q + q]);
  return acc;
}
DETAUDIT_PT float upsample2_bwd_at(const float* dyplane, int w, int i, int j) {
  const int w2 = 2 * w;
  const float* r0 = dyplane + size_t(2 * i) * w2 + 2 * j;
  const float* r1 = r0 + w2;
  return add(add(r0[0], r0[1]), add(r1[0], r1[1]));
}

// ---- elementwise training ops ---------------------------------------------------------------------
// Backend::unary_bwd: relu x > 0 ? dy : 0; sigmoid dy * (y * (1 - y)).
DETAUDIT_PT float relu_bwd(float x, float dy) { return x > 0.0f ? dy : 0.0f; }
DETAUDIT_PT float sigmoid_bwd(float y, float dy) { return mul(dy, mul(y, sub(1.0f, y))); }
DETAUDIT_PT float tanh_bwd(float y, float dy) { return mul(dy, sub(1.0f, mul(y, y))); }
DETAUDIT_PT float hard_sigmoid_bwd(float x, float dy) { return x > -2.5f && x < 2.5f ? mul(dy, 0.2f) : 0.0f; }

// AdamParams' formula, one rounded operation at a time, no fma.
DETAUDIT_PT void adam(float lr, float b1, float b2, float eps, float bc1, float bc2, float* w, float g, float* m,
                      float* v) {
  const float mm = add(mul(b1, *m), mul(sub(1.0f, b1), g));
  const float vv = add(mul(b2, *v), mul(sub(1.0f, b2), mul(g, g)));
  *m = mm;
  *v = vv;
  *w = sub(*w, div(mul(lr, div(mm, bc1)), add(sqrt(div(vv, bc2)), eps)));
}
DETAUDIT_PT void sgd(float lr, float momentum, float* w, float g, float* vel) {
  const float vv = add(mul(momentum, *vel), g);
  *vel = vv;
  *w = sub(*w, mul(lr, vv));
}

// ---- ops shared by both sides whole -------------------------------------------------------------------
// The leaf kinds of one long sum: x (sum), x*y (dot), x*x (sum of squares), (x-y)^2 (MSE), |x-y| (L1).
enum class LeafKind { kSum, kDot, kSumSq, kSqDiff, kAbsDiff };
DETAUDIT_PT LeafKind leaf_kind(ReduceOp op) {
  return op == ReduceOp::kSum ? LeafKind::kSum : op == ReduceOp::kDot ? LeafKind::kDot : LeafKind::kSumSq;
}
DETAUDIT_PT LeafKind leaf_kind(LossOp op) { return op == LossOp::kMse ? LeafKind::kSqDiff : LeafKind::kAbsDiff; }
// The chain of terms [b, e) from +0.
DETAUDIT_PT float leaf(LeafKind kind, const float* x, const float* y, size_t b, size_t e) {
  float acc = 0.0f;
  for (size_t i = b; i < e; ++i) {
    switch (kind) {
      case LeafKind::kSum: acc = add(acc, x[i]); break;
      case LeafKind::kDot: acc = fma(x[i], y[i], acc); break;
      case LeafKind::kSumSq: acc = fma(x[i], x[i], acc); break;
      case LeafKind::kSqDiff: {
        const float d = sub(x[i], y[i]);
        acc = fma(d, d, acc);
        break;
      }
      case LeafKind::kAbsDiff: {
        const float d = sub(x[i], y[i]);
        acc = add(acc, d < 0.0f ? -d : d);
        break;
      }
    }
  }
  return acc;
}
// The loss's scale: 2/n (MSE) or 1/n (L1), rounded once; and d loss / d y at one element with it.
DETAUDIT_PT float loss_scale(LossOp op, size_t n) { return div(op == LossOp::kMse ? 2.0f : 1.0f, float(n)); }
DETAUDIT_PT float loss_grad(LossOp op, float y, float t, float scale) {
  const float d = sub(y, t);
  return op == LossOp::kMse ? mul(d, scale) : d > 0.0f ? scale : d < 0.0f ? -scale : 0.0f;
}
// One softmax row: the first maximum, exp of the differences (stored in y), their tree sum, the divisions.
DETAUDIT_PT void softmax_row(const float* x, float* y, size_t cols) {
  float m = x[0];
  for (size_t j = 1; j < cols; ++j)
    if (x[j] > m) m = x[j];
  TreeSum<float> s;
  for (size_t j = 0; j < cols; ++j) {
    y[j] = exp(sub(x[j], m));
    s.term(y[j]);
  }
  const float sum = s.result();
  for (size_t j = 0; j < cols; ++j) y[j] = div(y[j], sum);
}
// Whether the portable order defines these (tanh forward has no portable definition yet).
DETAUDIT_PT bool has_unary(UnaryOp op) { return op != UnaryOp::kTanh; }
DETAUDIT_PT bool has_unary_bwd(UnaryOp op) {
  return op == UnaryOp::kRelu || op == UnaryOp::kSigmoid || op == UnaryOp::kTanh || op == UnaryOp::kHardSigmoid;
}
DETAUDIT_PT float unary(UnaryOp op, float v) {
  switch (op) {
    case UnaryOp::kCopy: return v;
    case UnaryOp::kRelu: return relu(v);
    case UnaryOp::kSigmoid: return sigmoid(v);
    case UnaryOp::kExp: return exp(v);
    case UnaryOp::kNeg: return -v;
    case UnaryOp::kSquare: return mul(v, v);
    case UnaryOp::kHardSigmoid: return hard_sigmoid(v);
    case UnaryOp::kTanh: break;  // has_unary
  }
  return v;
}
// dx from the forward input x, its output y and dy (has_unary_bwd ops).
DETAUDIT_PT float unary_bwd(UnaryOp op, float x, float y, float dy) {
  switch (op) {
    case UnaryOp::kRelu: return relu_bwd(x, dy);
    case UnaryOp::kSigmoid: return sigmoid_bwd(y, dy);
    case UnaryOp::kTanh: return tanh_bwd(y, dy);
    case UnaryOp::kHardSigmoid: return hard_sigmoid_bwd(x, dy);
    default: return dy;  // has_unary_bwd
  }
}
DETAUDIT_PT float binary(BinaryOp op, float u, float v) {
  switch (op) {
    case BinaryOp::kAdd: return add(u, v);
    case BinaryOp::kSub: return sub(u, v);
    case BinaryOp::kMul: return mul(u, v);
    case BinaryOp::kDiv: return div(u, v);
    case BinaryOp::kMax: return v > u ? v : u;
    case BinaryOp::kMin: return v < u ? v : u;
  }
  return u;
}

}  // namespace detaudit::portable
