// cuda:N?order=portable: every op is kernels/portable.hpp's, compiled for the device. The CPU runs the
// same functions (kernels/cpu/portable.cpp), so the two give the same bits.
// determinism: a thread computes whole output elements (or whole leaves of one long sum) with the
// header's functions; the grid-stride loops only decide which thread does which element. Leaf partials
// combine level by level (adjacent pairs, an odd last one carried up), which is the binary counter's tree
// (portable.hpp), checked on the CPU for every count below 3000 (tests/test_portable.cpp).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/portable_kernels.hpp"
#include "kernels/portable.hpp"

namespace detaudit::gpu {

namespace {

namespace pt = portable;

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) { return unsigned(std::min<size_t>((n + kThreads - 1) / kThreads, size_t(1) << 20)); }

#define DETAUDIT_FOR_EACH(i, n) \
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)

template <class T>
__global__ void gemm_kernel(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                            T beta, T* c, int ldc) {
  DETAUDIT_FOR_EACH(e, size_t(m) * n) {
    const int i = int(e / size_t(n)), j = int(e % size_t(n));
    T* cij = c + size_t(i) * ldc + j;
    *cij = pt::gemm_at<T>(ta, tb, k, alpha, a, lda, b, ldb, beta, cij, i, j);
  }
}

__global__ void conv_fwd_kernel(pt::Conv g, const float* x, const float* w, float* y, size_t total) {
  DETAUDIT_FOR_EACH(e, total) {
    const int q = int(e % g.q), p = int(e / g.q % g.p), k = int(e / (size_t(g.q) * g.p) % g.k),
              n = int(e / (size_t(g.q) * g.p * g.k));
    y[e] = pt::conv_fwd_at(g, x, w, n, k, p, q);
  }
}
__global__ void conv_bwd_data_kernel(pt::Conv g, const float* dy, const float* w, float* dx, size_t total) {
  DETAUDIT_FOR_EACH(e, total) {
    const int ww = int(e % g.w), h = int(e / g.w % g.h), c = int(e / (size_t(g.w) * g.h) % g.c),
              n = int(e / (size_t(g.w) * g.h * g.c));
    dx[e] = pt::conv_bwd_data_at(g, dy, w, n, c, h, ww);
  }
}
__global__ void conv_bwd_filter_kernel(pt::Conv g, const float* x, const float* dy, float* dw, size_t total) {
  DETAUDIT_FOR_EACH(e, total) {
    const int s = int(e % g.s), r = int(e / g.s % g.r), c = int(e / (size_t(g.s) * g.r) % g.c),
              k = int(e / (size_t(g.s) * g.r * g.c));
    dw[e] = pt::conv_bwd_filter_at(g, x, dy, k, c, r, s);
  }
}

__global__ void maxpool_fwd_kernel(pt::Pool g, const float* x, float* y, size_t total) {
  const size_t pq = size_t(g.p) * g.q;
  DETAUDIT_FOR_EACH(e, total) {
    const float* plane = x + e / pq * size_t(g.h) * g.w;
    y[e] = plane[pt::pool_argmax(g, plane, int(e % pq / g.q), int(e % g.q))];
  }
}
__global__ void maxpool_bwd_kernel(pt::Pool g, const float* x, const float* dy, float* dx, size_t total) {
  const size_t hw = size_t(g.h) * g.w, pq = size_t(g.p) * g.q;
  DETAUDIT_FOR_EACH(e, total) {
    dx[e] = pt::pool_bwd_at(g, x + e / hw * hw, dy + e / hw * pq, int(e % hw / g.w), int(e % g.w));
  }
}

// Leaf l of a sum (portable::leaf).
__global__ void leaves_kernel(pt::LeafKind kind, const float* x, const float* y, size_t n, float* part, size_t leaves) {
  DETAUDIT_FOR_EACH(l, leaves) {
    const size_t b = l * pt::kLeaf, e = n < b + pt::kLeaf ? n : b + pt::kLeaf;
    part[l] = pt::leaf(kind, x, y, b, e);
  }
}
// One level of the tree: out[i] = in[2i] + in[2i+1]; an odd last one is carried.
__global__ void pair_level_kernel(const float* in, float* out, size_t len) {
  const size_t half = len / 2;
  DETAUDIT_FOR_EACH(i, half + len % 2) out[i] = i < half ? pt::add(in[2 * i], in[2 * i + 1]) : in[len - 1];
}
// The last value: *out = v (0: the sum itself, 1: its square root, 2: divided by n).
__global__ void finish_kernel(const float* v, bool empty, int how, float nf, float* out) {
  const float s = empty ? 0.0f : v[0];
  *out = how == 1 ? pt::sqrt(s) : how == 2 ? pt::div(s, nf) : s;
}
__global__ void loss_grad_kernel(LossOp op, const float* y, const float* t, size_t n, float scale, float* dy) {
  DETAUDIT_FOR_EACH(i, n) dy[i] = pt::loss_grad(op, y[i], t[i], scale);
}

// Leaves of n terms, reduced level by level in scratch; the result through finish_kernel.
Status tree_reduce(pt::LeafKind kind, const float* x, const float* y, size_t n, float* out, float* scratch, int how) {
  const size_t leaves = (n + pt::kLeaf - 1) / pt::kLeaf;
  float* a = scratch;
  float* b = scratch + std::max<size_t>(leaves, 1);
  if (leaves) {
    leaves_kernel<<<blocks_for(leaves), kThreads>>>(kind, x, y, n, a, leaves);
    DETAUDIT_CUDA_LAUNCHED("portable leaves");
  }
  for (size_t len = leaves; len > 1; len = len / 2 + len % 2) {
    pair_level_kernel<<<blocks_for(len / 2 + len % 2), kThreads>>>(a, b, len);
    DETAUDIT_CUDA_LAUNCHED("portable tree level");
    std::swap(a, b);
  }
  finish_kernel<<<1, 1>>>(a, leaves == 0, how, float(n), out);
  DETAUDIT_CUDA_LAUNCHED("portable tree result");
  return Status::ok();
}

__global__ void softmax_kernel(const float* x, float* y, size_t rows, size_t cols) {
  DETAUDIT_FOR_EACH(r, rows) pt::softmax_row(x + r * cols, y + r * cols, cols);
}
__global__ void unary_kernel(UnaryOp op, const float* x, float* y, size_t n) {
  DETAUDIT_FOR_EACH(i, n) y[i] = pt::unary(op, x[i]);
}
__global__ void binary_kernel(BinaryOp op, const float* a, const float* b, float* y, size_t n) {
  DETAUDIT_FOR_EACH(i, n) y[i] = pt::binary(op, a[i], b[i]);
}
__global__ void axpy_kernel(size_t n, float alpha, const float* x, float* y) {
  DETAUDIT_FOR_EACH(i, n) y[i] = pt::fma(alpha, x[i], y[i]);
}
__global__ void scale_kernel(float* y, float alpha, size_t n) {
  DETAUDIT_FOR_EACH(i, n) y[i] = pt::mul(alpha, y[i]);
}
__global__ void bias_add_kernel(float* y, const float* bias, size_t total, size_t c, size_t hw) {
  DETAUDIT_FOR_EACH(i, total) y[i] = pt::add(y[i], bias[i / hw % c]);
}
__global__ void bias_grad_kernel(const float* dy, float* db, size_t n, size_t c, size_t hw) {
  DETAUDIT_FOR_EACH(j, c) {
    pt::TreeSum<float> t;
    for (size_t i = 0; i < n; ++i)
      for (size_t l = 0; l < hw; ++l) t.term(dy[(i * c + j) * hw + l]);
    db[j] = t.result();
  }
}
__global__ void unary_bwd_kernel(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) {
  DETAUDIT_FOR_EACH(i, n) dx[i] = pt::unary_bwd(op, x[i], y[i], dy[i]);
}
__global__ void upsample2_fwd_kernel(const float* x, float* y, size_t total, int h, int w) {
  const size_t w2 = size_t(2) * w, hw4 = size_t(4) * h * w;
  DETAUDIT_FOR_EACH(i, total) {
    const size_t p = i / hw4, r = i % hw4 / w2, q = i % w2;
    y[i] = x[(p * h + r / 2) * w + q / 2];
  }
}
__global__ void upsample2_bwd_kernel(const float* dy, float* dx, size_t total, int h, int w) {
  const size_t hw = size_t(h) * w;
  DETAUDIT_FOR_EACH(i, total) dx[i] = pt::upsample2_bwd_at(dy + i / hw * 4 * hw, w, int(i % hw / w), int(i % w));
}
__global__ void adam_kernel(AdamParams p, float* w, const float* g, float* m, float* v, size_t n) {
  DETAUDIT_FOR_EACH(i, n)
  pt::adam(p.lr, p.beta1, p.beta2, p.eps, p.bias_correction1, p.bias_correction2, &w[i], g[i], &m[i], &v[i]);
}
__global__ void sgd_kernel(SgdParams p, float* w, const float* g, float* vel, size_t n) {
  DETAUDIT_FOR_EACH(i, n) pt::sgd(p.lr, p.momentum, &w[i], g[i], &vel[i]);
}

pt::Conv conv_of(const ConvShape& s) { return {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride, s.pad, s.p(), s.q()}; }

}  // namespace

size_t portable_scratch_floats(size_t n) { return 2 * std::max<size_t>((n + pt::kLeaf - 1) / pt::kLeaf, 1); }

Status portable_gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                     int ldb, float beta, float* c, int ldc) {
  if (size_t(m) * n == 0) return Status::ok();
  gemm_kernel<float><<<blocks_for(size_t(m) * n), kThreads>>>(ta == Trans::kT, tb == Trans::kT, m, n, k, alpha, a, lda,
                                                              b, ldb, beta, c, ldc);
  DETAUDIT_CUDA_LAUNCHED("portable gemm");
  return Status::ok();
}
Status portable_gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
                         const double* b, int ldb, double beta, double* c, int ldc) {
  if (size_t(m) * n == 0) return Status::ok();
  gemm_kernel<double><<<blocks_for(size_t(m) * n), kThreads>>>(ta == Trans::kT, tb == Trans::kT, m, n, k, alpha, a,
                                                               lda, b, ldb, beta, c, ldc);
  DETAUDIT_CUDA_LAUNCHED("portable gemm f64");
  return Status::ok();
}
Status portable_conv_fwd(const ConvShape& s, const float* x, const float* w, float* y) {
  conv_fwd_kernel<<<blocks_for(s.y_size()), kThreads>>>(conv_of(s), x, w, y, s.y_size());
  DETAUDIT_CUDA_LAUNCHED("portable conv fwd");
  return Status::ok();
}
Status portable_conv_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) {
  conv_bwd_data_kernel<<<blocks_for(s.x_size()), kThreads>>>(conv_of(s), dy, w, dx, s.x_size());
  DETAUDIT_CUDA_LAUNCHED("portable conv bwd data");
  return Status::ok();
}
Status portable_conv_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) {
  conv_bwd_filter_kernel<<<blocks_for(s.w_size()), kThreads>>>(conv_of(s), x, dy, dw, s.w_size());
  DETAUDIT_CUDA_LAUNCHED("portable conv bwd filter");
  return Status::ok();
}
Status portable_maxpool_fwd(const PoolShape& s, const float* x, float* y) {
  maxpool_fwd_kernel<<<blocks_for(s.y_size()), kThreads>>>({s.h, s.w, s.window, s.stride, s.p(), s.q()}, x, y,
                                                           s.y_size());
  DETAUDIT_CUDA_LAUNCHED("portable maxpool fwd");
  return Status::ok();
}
Status portable_maxpool_bwd(const PoolShape& s, const float* x, const float* dy, float* dx) {
  maxpool_bwd_kernel<<<blocks_for(s.x_size()), kThreads>>>({s.h, s.w, s.window, s.stride, s.p(), s.q()}, x, dy, dx,
                                                           s.x_size());
  DETAUDIT_CUDA_LAUNCHED("portable maxpool bwd");
  return Status::ok();
}
Status portable_reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out, float* scratch) {
  return tree_reduce(pt::leaf_kind(op), x, y, n, out, scratch, op == ReduceOp::kNorm2 ? 1 : 0);
}
Status portable_softmax(const float* x, float* y, size_t rows, size_t cols) {
  if (rows == 0) return Status::ok();
  softmax_kernel<<<blocks_for(rows), kThreads>>>(x, y, rows, cols);
  DETAUDIT_CUDA_LAUNCHED("portable softmax");
  return Status::ok();
}
Status portable_unary(UnaryOp op, const float* x, float* y, size_t n) {
  if (!pt::has_unary(op)) return Status::unsupported("cuda?order=portable: tanh has no portable definition yet");
  if (n == 0) return Status::ok();
  unary_kernel<<<blocks_for(n), kThreads>>>(op, x, y, n);
  DETAUDIT_CUDA_LAUNCHED("portable unary");
  return Status::ok();
}
Status portable_binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) {
  if (n == 0) return Status::ok();
  binary_kernel<<<blocks_for(n), kThreads>>>(op, a, b, y, n);
  DETAUDIT_CUDA_LAUNCHED("portable binary");
  return Status::ok();
}
Status portable_axpy(size_t n, float alpha, const float* x, float* y) {
  if (n == 0) return Status::ok();
  axpy_kernel<<<blocks_for(n), kThreads>>>(n, alpha, x, y);
  DETAUDIT_CUDA_LAUNCHED("portable axpy");
  return Status::ok();
}
Status portable_bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw) {
  if (n * c * hw == 0) return Status::ok();
  bias_add_kernel<<<blocks_for(n * c * hw), kThreads>>>(y, bias, n * c * hw, c, hw);
  DETAUDIT_CUDA_LAUNCHED("portable bias add");
  return Status::ok();
}
Status portable_bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) {
  if (c == 0) return Status::ok();
  bias_grad_kernel<<<blocks_for(c), kThreads>>>(dy, db, n, c, hw);
  DETAUDIT_CUDA_LAUNCHED("portable bias grad");
  return Status::ok();
}
Status portable_unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) {
  if (!pt::has_unary_bwd(op)) return Status::unsupported(std::string("unary_bwd ") + to_string(op));
  if (n == 0) return Status::ok();
  unary_bwd_kernel<<<blocks_for(n), kThreads>>>(op, x, y, dy, dx, n);
  DETAUDIT_CUDA_LAUNCHED("portable unary bwd");
  return Status::ok();
}
Status portable_upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) {
  const size_t total = planes * 4 * size_t(h) * w;
  if (total == 0) return Status::ok();
  upsample2_fwd_kernel<<<blocks_for(total), kThreads>>>(x, y, total, h, w);
  DETAUDIT_CUDA_LAUNCHED("portable upsample fwd");
  return Status::ok();
}
Status portable_upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) {
  const size_t total = planes * size_t(h) * w;
  if (total == 0) return Status::ok();
  upsample2_bwd_kernel<<<blocks_for(total), kThreads>>>(dy, dx, total, h, w);
  DETAUDIT_CUDA_LAUNCHED("portable upsample bwd");
  return Status::ok();
}
Status portable_scale(float* y, float alpha, size_t n) {
  if (n == 0) return Status::ok();
  scale_kernel<<<blocks_for(n), kThreads>>>(y, alpha, n);
  DETAUDIT_CUDA_LAUNCHED("portable scale");
  return Status::ok();
}
Status portable_loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy, float* scratch) {
  if (dy && n) {
    loss_grad_kernel<<<blocks_for(n), kThreads>>>(op, y, t, n, pt::loss_scale(op, n), dy);
    DETAUDIT_CUDA_LAUNCHED("portable loss gradient");
  }
  return tree_reduce(pt::leaf_kind(op), y, t, n, value, scratch, 2);
}
Status portable_adam(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) {
  if (n == 0) return Status::ok();
  adam_kernel<<<blocks_for(n), kThreads>>>(p, w, g, m, v, n);
  DETAUDIT_CUDA_LAUNCHED("portable adam");
  return Status::ok();
}
Status portable_sgd(const SgdParams& p, float* w, const float* g, float* velocity, size_t n) {
  if (n == 0) return Status::ok();
  sgd_kernel<<<blocks_for(n), kThreads>>>(p, w, g, velocity, n);
  DETAUDIT_CUDA_LAUNCHED("portable sgd");
  return Status::ok();
}

}  // namespace detaudit::gpu
