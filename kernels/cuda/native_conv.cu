// `cuda` backend: direct convolution (forward, backward-data, backward-filter) and max pooling.
// NCHW tensors, KCRS filters, cross-correlation, same stride and padding on both axes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/common.hpp"
#include "kernels/cuda/geometry.hpp"
#include "kernels/cuda/native_kernels.hpp"

namespace detaudit::gpu {

namespace {

constexpr int kThreads = 256;

struct Dims {  // ConvShape, trivially copyable for kernels
  int n, c, h, w, k, r, s, stride, pad, p, q;
};
Dims dims(const ConvShape& s) { return {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride, s.pad, s.p(), s.q()}; }

unsigned blocks_for(size_t n) { return unsigned(std::clamp<size_t>((n + kThreads - 1) / kThreads, 1, 1u << 20)); }

// determinism: one thread per output element, summing c, r, s in that fixed order.
__global__ void conv_fwd_kernel(Dims d, const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ y) {
  const size_t total = size_t(d.n) * d.k * d.p * d.q;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    int q = int(e % d.q), p = int(e / d.q % d.p), k = int(e / (size_t(d.q) * d.p) % d.k);
    size_t n = e / (size_t(d.q) * d.p * d.k);
    float acc = 0.f;
    for (int c = 0; c < d.c; ++c)
      for (int r = 0; r < d.r; ++r) {
        int ih = p * d.stride - d.pad + r;
        if (ih < 0 || ih >= d.h) continue;
        for (int s = 0; s < d.s; ++s) {
          int iw = q * d.stride - d.pad + s;
          if (iw < 0 || iw >= d.w) continue;
          acc = fmaf(x[((n * d.c + c) * d.h + ih) * d.w + iw], w[((size_t(k) * d.c + c) * d.r + r) * d.s + s], acc);
        }
      }
    y[e] = acc;
  }
}

// determinism: one thread per dx element, gathering k, r, s in that fixed order (no scatter, no atomics).
__global__ void conv_bwd_data_kernel(Dims d, const float* __restrict__ dy, const float* __restrict__ w,
                                     float* __restrict__ dx) {
  const size_t total = size_t(d.n) * d.c * d.h * d.w;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    int iw = int(e % d.w), ih = int(e / d.w % d.h), c = int(e / (size_t(d.w) * d.h) % d.c);
    size_t n = e / (size_t(d.w) * d.h * d.c);
    float acc = 0.f;
    for (int k = 0; k < d.k; ++k)
      for (int r = 0; r < d.r; ++r) {
        int ph = ih + d.pad - r;
        if (ph < 0 || ph % d.stride != 0 || ph / d.stride >= d.p) continue;
        int p = ph / d.stride;
        for (int s = 0; s < d.s; ++s) {
          int qw = iw + d.pad - s;
          if (qw < 0 || qw % d.stride != 0 || qw / d.stride >= d.q) continue;
          int q = qw / d.stride;
          acc = fmaf(dy[((n * d.k + k) * d.p + p) * d.q + q], w[((size_t(k) * d.c + c) * d.r + r) * d.s + s], acc);
        }
      }
    dx[e] = acc;
  }
}

// The dy * x terms of dw[k, c, r, s] for j in [j0, j1) of the flattened (n, p, q) index: each thread a
// fixed strided subset in order, then the block's shared-memory tree.
__device__ float bwd_filter_terms(const Dims& d, const float* __restrict__ x, const float* __restrict__ dy,
                                  size_t e, size_t j0, size_t j1, float* sh) {
  int s = int(e % d.s), r = int(e / d.s % d.r), c = int(e / (size_t(d.s) * d.r) % d.c);
  int k = int(e / (size_t(d.s) * d.r * d.c));
  float acc = 0.f;
  for (size_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    int q = int(j % d.q), p = int(j / d.q % d.p);
    size_t n = j / (size_t(d.q) * d.p);
    int ih = p * d.stride - d.pad + r, iw = q * d.stride - d.pad + s;
    if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
    acc = fmaf(dy[((n * d.k + k) * d.p + p) * d.q + q], x[((n * d.c + c) * d.h + ih) * d.w + iw], acc);
  }
  return block_tree_sum(acc, sh);
}

// determinism: one block per dw element over all N*P*Q terms; fixed per-thread order and fixed tree.
__global__ void conv_bwd_filter_tree(Dims d, const float* __restrict__ x, const float* __restrict__ dy,
                                     float* __restrict__ dw) {
  __shared__ float sh[kThreads];
  const size_t total = size_t(d.k) * d.c * d.r * d.s, terms = size_t(d.n) * d.p * d.q;
  for (size_t e = blockIdx.x; e < total; e += gridDim.x) {
    float v = bwd_filter_terms(d, x, dy, e, 0, terms, sh);
    if (threadIdx.x == 0) dw[e] = v;
  }
}

// determinism: blockIdx.x picks a chunk of `chunk` N*P*Q terms (geometry.hpp: at least kMinAtomicPartials
// chunks where there are that many terms); the chunks' partial sums meet in dw[e] through atomicAdd in a
// timing-dependent order, so dw varies run to run (three or more partials are needed, and given).
__global__ void conv_bwd_filter_atomic(Dims d, size_t chunk, const float* __restrict__ x, const float* __restrict__ dy,
                                       float* __restrict__ dw) {
  __shared__ float sh[kThreads];
  const size_t total = size_t(d.k) * d.c * d.r * d.s, terms = size_t(d.n) * d.p * d.q;
  const size_t j0 = size_t(blockIdx.x) * chunk, j1 = j0 + chunk < terms ? j0 + chunk : terms;
  for (size_t e = blockIdx.y; e < total; e += gridDim.y) {
    float v = bwd_filter_terms(d, x, dy, e, j0, j1, sh);
    if (threadIdx.x == 0) atomicAdd(dw + e, v);
  }
}

// ---- max pooling ---------------------------------------------------------------------------------------

struct Pool {
  int n, c, h, w, window, stride, p, q;
};
Pool pool(const PoolShape& s) { return {s.n, s.c, s.h, s.w, s.window, s.stride, s.p(), s.q()}; }

// Offset (in the n,c plane) of the first maximum of window (p, q), in row-major window order.
__device__ inline int window_argmax(const Pool& d, const float* plane, int p, int q) {
  int best = (p * d.stride) * d.w + q * d.stride;
  float bv = plane[best];
  for (int i = 0; i < d.window; ++i)
    for (int j = 0; j < d.window; ++j) {
      int at = (p * d.stride + i) * d.w + q * d.stride + j;
      if (plane[at] > bv) bv = plane[at], best = at;
    }
  return best;
}

__global__ void maxpool_fwd_kernel(Pool d, const float* __restrict__ x, float* __restrict__ y) {
  const size_t total = size_t(d.n) * d.c * d.p * d.q;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    int q = int(e % d.q), p = int(e / d.q % d.p);
    const float* plane = x + e / (size_t(d.q) * d.p) * (size_t(d.h) * d.w);
    y[e] = plane[window_argmax(d, plane, p, q)];
  }
}

// determinism: gather: each dx element sums, in (p, q) order, dy of the windows whose maximum it is.
__global__ void maxpool_bwd_gather(Pool d, const float* __restrict__ x, const float* __restrict__ dy,
                                   float* __restrict__ dx) {
  const size_t total = size_t(d.n) * d.c * d.h * d.w;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    int iw = int(e % d.w), ih = int(e / d.w % d.h);
    size_t nc = e / (size_t(d.w) * d.h);
    const float* plane = x + nc * (size_t(d.h) * d.w);
    const float* dyp = dy + nc * (size_t(d.p) * d.q);
    int p0 = ih < d.window ? 0 : (ih - d.window) / d.stride + 1, p1 = min(d.p - 1, ih / d.stride);
    int q0 = iw < d.window ? 0 : (iw - d.window) / d.stride + 1, q1 = min(d.q - 1, iw / d.stride);
    float acc = 0.f;
    for (int p = p0; p <= p1; ++p)
      for (int q = q0; q <= q1; ++q)
        if (window_argmax(d, plane, p, q) == ih * d.w + iw) acc += dyp[p * d.q + q];
    dx[e] = acc;
  }
}

// determinism: scatter: each window atomicAdds its dy into dx at its maximum; where windows overlap
// (stride < window) three or more adds to one element can land in any order.
__global__ void maxpool_bwd_scatter(Pool d, const float* __restrict__ x, const float* __restrict__ dy,
                                    float* __restrict__ dx) {
  const size_t total = size_t(d.n) * d.c * d.p * d.q;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    int q = int(e % d.q), p = int(e / d.q % d.p);
    size_t plane = e / (size_t(d.q) * d.p) * (size_t(d.h) * d.w);
    atomicAdd(dx + plane + window_argmax(d, x + plane, p, q), dy[e]);
  }
}

Status check(const ConvShape& s) {
  if (s.n <= 0 || s.c <= 0 || s.h <= 0 || s.w <= 0 || s.k <= 0 || s.r <= 0 || s.s <= 0 || s.stride <= 0 ||
      s.pad < 0 || s.p() <= 0 || s.q() <= 0)
    return Status::invalid("conv2d: shape has an empty or negative dimension");
  return Status::ok();
}

Status check(const PoolShape& s) {
  if (s.n <= 0 || s.c <= 0 || s.window <= 0 || s.stride <= 0 || s.h < s.window || s.w < s.window)
    return Status::invalid("maxpool: window larger than the input or empty shape");
  return Status::ok();
}

}  // namespace

Status native_conv_fwd(const ConvShape& s, const float* x, const float* w, float* y) {
  DETAUDIT_RETURN_IF_ERROR(check(s));
  conv_fwd_kernel<<<blocks_for(s.y_size()), kThreads>>>(dims(s), x, w, y);
  DETAUDIT_CUDA_LAUNCHED("cuda conv2d forward kernel");
  return Status::ok();
}

Status native_conv_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) {
  DETAUDIT_RETURN_IF_ERROR(check(s));
  conv_bwd_data_kernel<<<blocks_for(s.x_size()), kThreads>>>(dims(s), dy, w, dx);
  DETAUDIT_CUDA_LAUNCHED("cuda conv2d backward-data kernel");
  return Status::ok();
}

Status native_conv_bwd_filter(const ConvShape& s, bool atomic, const float* x, const float* dy, float* dw) {
  DETAUDIT_RETURN_IF_ERROR(check(s));
  const size_t elements = s.w_size(), terms = size_t(s.n) * s.p() * s.q();
  if (!atomic) {
    conv_bwd_filter_tree<<<unsigned(std::min<size_t>(elements, 1u << 20)), kThreads>>>(dims(s), x, dy, dw);
  } else {
    const size_t chunk = atomic_chunk(terms, kConvFilterChunk), chunks = (terms + chunk - 1) / chunk;
    if (chunks > 0x7fffffffu) return Status::unsupported("cuda conv2d backward-filter: too many terms");
    DETAUDIT_CUDA(cudaMemsetAsync(dw, 0, elements * sizeof(float)));
    dim3 grid(unsigned(chunks), unsigned(std::min<size_t>(elements, 65535)));
    conv_bwd_filter_atomic<<<grid, kThreads>>>(dims(s), chunk, x, dy, dw);
  }
  DETAUDIT_CUDA_LAUNCHED("cuda conv2d backward-filter kernel");
  return Status::ok();
}

Status native_maxpool_fwd(const PoolShape& s, const float* x, float* y) {
  DETAUDIT_RETURN_IF_ERROR(check(s));
  maxpool_fwd_kernel<<<blocks_for(s.y_size()), kThreads>>>(pool(s), x, y);
  DETAUDIT_CUDA_LAUNCHED("cuda maxpool forward kernel");
  return Status::ok();
}

Status native_maxpool_bwd(const PoolShape& s, bool atomic, const float* x, const float* dy, float* dx) {
  DETAUDIT_RETURN_IF_ERROR(check(s));
  if (!atomic) {
    maxpool_bwd_gather<<<blocks_for(s.x_size()), kThreads>>>(pool(s), x, dy, dx);
  } else {
    DETAUDIT_CUDA(cudaMemsetAsync(dx, 0, s.x_size() * sizeof(float)));
    maxpool_bwd_scatter<<<blocks_for(s.y_size()), kThreads>>>(pool(s), x, dy, dx);
  }
  DETAUDIT_CUDA_LAUNCHED("cuda maxpool backward kernel");
  return Status::ok();
}

}  // namespace detaudit::gpu
