// Training ops of every GPU backend: bias add/gradient, activation backward, nearest upsampling by 2,
// strided copy, scale, MSE/L1 loss, Adam and SGD. The host reference of each is kernels/cpu/train_ops.cpp;
// the formulas here are the same, operation for operation (--fmad=false: no fusing behind our back).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/common.hpp"
#include "kernels/cuda/geometry.hpp"
#include "kernels/cuda/train_kernels.hpp"

namespace detaudit::gpu {

namespace {

constexpr int kThreads = 256;  // every kernel here; the trees below assume this power of two
static_assert(kThreads == kReduceThreads, "reduce_blocks (geometry.hpp) counts blocks of kThreads");

unsigned blocks_for(size_t n) { return unsigned(std::clamp<size_t>((n + kThreads - 1) / kThreads, 1, 65536)); }

#define GRID_STRIDE(i, n) \
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)


// ---- bias ---------------------------------------------------------------------------------------

__global__ void bias_add_kernel(float* __restrict__ y, const float* __restrict__ bias, size_t c, size_t hw,
                                size_t total) {
  GRID_STRIDE(e, total) y[e] = y[e] + bias[e / hw % c];
}

// Terms [t0, t1) of channel j (term t is image t / hw, position t % hw): each thread a fixed strided
// subset in index order, then the block's tree.
__device__ float channel_terms(const float* __restrict__ dy, size_t c, size_t hw, size_t j, size_t t0, size_t t1,
                               float* sh) {
  float s = 0.f;
  for (size_t t = t0 + threadIdx.x; t < t1; t += blockDim.x) s = s + dy[(t / hw * c + j) * hw + t % hw];
  return block_tree_sum(s, sh);
}

// determinism: one block per channel over all N*HW terms: a fixed per-thread order and a fixed tree,
// both functions of (n, hw) only.
__global__ void bias_grad_tree(const float* __restrict__ dy, float* __restrict__ db, size_t n, size_t c, size_t hw) {
  __shared__ float sh[kThreads];
  for (size_t j = blockIdx.x; j < c; j += gridDim.x) {  // uniform across the block: the tree's syncs are safe
    float v = channel_terms(dy, c, hw, j, 0, n * hw, sh);
    if (threadIdx.x == 0) db[j] = v;
  }
}

// determinism: NOT deterministic: blockIdx.x picks `chunk` terms (geometry.hpp: at least kMinAtomicPartials
// chunks where a channel has that many terms; three are needed for a race, two always add to the same
// float), and the chunks' partial sums meet in db[j] through atomicAdd in a timing-dependent order.
__global__ void bias_grad_atomic(const float* __restrict__ dy, float* __restrict__ db, size_t n, size_t c, size_t hw,
                                 size_t chunk) {
  __shared__ float sh[kThreads];
  const size_t terms = n * hw, t0 = size_t(blockIdx.x) * chunk, t1 = t0 + chunk < terms ? t0 + chunk : terms;
  for (size_t j = blockIdx.y; j < c; j += gridDim.y) {
    float v = channel_terms(dy, c, hw, j, t0, t1, sh);
    if (threadIdx.x == 0) atomicAdd(db + j, v);
  }
}

// ---- elementwise ----------------------------------------------------------------------------------

// The derivative conventions of train_ops::unary_bwd_f32.
__global__ void unary_bwd_kernel(UnaryOp op, const float* __restrict__ x, const float* __restrict__ y,
                                 const float* __restrict__ dy, float* __restrict__ dx, size_t n) {
  GRID_STRIDE(i, n) {
    float r = 0.f;
    switch (op) {
      case UnaryOp::kRelu: r = x[i] > 0.0f ? dy[i] : 0.0f; break;
      case UnaryOp::kSigmoid: r = dy[i] * (y[i] * (1.0f - y[i])); break;
      case UnaryOp::kTanh: r = dy[i] * (1.0f - y[i] * y[i]); break;
      case UnaryOp::kHardSigmoid: r = (x[i] > -2.5f && x[i] < 2.5f) ? dy[i] * 0.2f : 0.0f; break;
      default: break;  // rejected before the launch
    }
    dx[i] = r;
  }
}

// One thread per output element: y[p][r][q] = x[p][r / 2][q / 2].
__global__ void upsample2_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, size_t planes, size_t h,
                                     size_t w) {
  const size_t w2 = 2 * w, plane_out = 4 * h * w;
  GRID_STRIDE(e, planes * plane_out) {
    const size_t p = e / plane_out, r = e / w2 % (2 * h), q = e % w2;
    y[e] = x[p * h * w + r / 2 * w + q / 2];
  }
}

// determinism: each dx element sums its 2x2 block as (a + b) + (c + d), the order Backend::upsample2_bwd fixes.
__global__ void upsample2_bwd_kernel(const float* __restrict__ dy, float* __restrict__ dx, size_t planes, size_t h,
                                     size_t w) {
  const size_t w2 = 2 * w;
  GRID_STRIDE(e, planes * h * w) {
    const size_t p = e / (h * w), i = e / w % h, j = e % w;
    const float* r0 = dy + p * 4 * h * w + 2 * i * w2;
    const float* r1 = r0 + w2;
    dx[e] = (r0[2 * j] + r0[2 * j + 1]) + (r1[2 * j] + r1[2 * j + 1]);
  }
}

__global__ void copy_2d_kernel(size_t rows, size_t cols, const float* __restrict__ src, size_t src_ld,
                               float* __restrict__ dst, size_t dst_ld) {
  GRID_STRIDE(e, rows * cols) {
    const size_t i = e / cols, j = e % cols;
    dst[i * dst_ld + j] = src[i * src_ld + j];
  }
}

__global__ void scale_kernel(float* y, float alpha, size_t n) {
  GRID_STRIDE(i, n) y[i] = alpha * y[i];
}

// ---- loss ------------------------------------------------------------------------------------------

// Pass 1: the gradient elementwise (train_ops::loss_terms_f32's formulas), and each thread's running sum of
// d*d (fmaf, as the cuda reduce norm does) or |d| over a fixed subset in index order, then the block's tree.
// acc == nullptr (tree): a grid-stride subset; the block writes its partial.
// acc != nullptr (atomic): the block's contiguous chunk (atomic_block_terms), strided by its threads, so
// that every block of reduce_blocks() receives terms where n allows; the block atomicAdds its sum into *acc.
// dy may alias nothing but itself; y and t are only read.
__global__ void loss_partials(LossOp op, const float* y, const float* t, size_t n, float fn, float* dy,
                              float* partials, float* acc) {
  __shared__ float sh[kThreads];
  const ThreadTerms terms = reduce_thread_terms(acc != nullptr, n, gridDim.x, blockIdx.x, blockDim.x, threadIdx.x);
  float s = 0.f;
  for (size_t i = terms.first; i < terms.end; i += terms.step) {
    const float d = y[i] - t[i];
    if (op == LossOp::kMse) {
      s = fmaf(d, d, s);
      if (dy) dy[i] = (d + d) / fn;
    } else {
      s = s + fabsf(d);
      if (dy) dy[i] = (d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f) / fn;
    }
  }
  s = block_tree_sum(s, sh);
  block_sum_out(s, acc, partials);
}

// Pass 2 (tree): one block of kTrainPartials threads combines the partials by a fixed tree.
// determinism: the number of partials depends only on n.
__global__ void loss_final_tree(const float* partials, int count, float fn, float* value) {
  __shared__ float sh[kTrainPartials];
  float s = block_tree_sum(threadIdx.x < count ? partials[threadIdx.x] : 0.f, sh);
  if (threadIdx.x == 0) *value = s / fn;
}

__global__ void loss_final_atomic(const float* acc, float fn, float* value) { *value = *acc / fn; }

// ---- optimisers --------------------------------------------------------------------------------------

// train_ops::adam_f32: every operation rounded to float; sqrtf and '/' are IEEE (nvcc's default
// -prec-sqrt=true -prec-div=true), so the bits equal the CPU's.
__global__ void adam_kernel(AdamParams p, float omb1, float omb2, float* __restrict__ w, const float* __restrict__ g,
                            float* __restrict__ m, float* __restrict__ v, size_t n) {
  GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = p.beta1 * m[i] + omb1 * gi;
    const float vi = p.beta2 * v[i] + omb2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    const float step = (p.lr * (mi / p.bias_correction1)) / (sqrtf(vi / p.bias_correction2) + p.eps);
    w[i] = w[i] - step;
  }
}

__global__ void sgd_kernel(SgdParams p, float* __restrict__ w, const float* __restrict__ g, float* __restrict__ vel,
                           size_t n) {
  GRID_STRIDE(i, n) {
    const float vi = p.momentum * vel[i] + g[i];
    vel[i] = vi;
    w[i] = w[i] - p.lr * vi;
  }
}

#undef GRID_STRIDE

}  // namespace

Status gpu_bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw) {
  const size_t total = n * c * hw;
  if (total == 0) return Status::ok();
  bias_add_kernel<<<blocks_for(total), kThreads>>>(y, bias, c, hw, total);
  DETAUDIT_CUDA_LAUNCHED("bias add kernel");
  return Status::ok();
}

Status gpu_bias_grad(bool atomic, const float* dy, float* db, size_t n, size_t c, size_t hw) {
  if (c == 0) return Status::ok();
  const size_t terms = n * hw;
  if (terms == 0 || atomic) {  // atomic: the chunks add into zeros
    DETAUDIT_CUDA(cudaMemsetAsync(db, 0, c * sizeof(float)));
    if (terms == 0) return Status::ok();
  }
  if (!atomic) {
    bias_grad_tree<<<unsigned(std::min<size_t>(c, 1u << 20)), kThreads>>>(dy, db, n, c, hw);
  } else {
    const size_t chunk = atomic_chunk(terms, kBiasChunk), chunks = (terms + chunk - 1) / chunk;
    if (chunks > 0x7fffffffu) return Status::unsupported("bias gradient (atomic): too many terms per channel");
    dim3 grid(unsigned(chunks), unsigned(std::min<size_t>(c, 65535)));
    bias_grad_atomic<<<grid, kThreads>>>(dy, db, n, c, hw, chunk);
  }
  DETAUDIT_CUDA_LAUNCHED(atomic ? "bias gradient (atomic) kernel" : "bias gradient (tree) kernel");
  return Status::ok();
}

Status gpu_unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) {
  if (op != UnaryOp::kRelu && op != UnaryOp::kSigmoid && op != UnaryOp::kTanh && op != UnaryOp::kHardSigmoid)
    return Status::unsupported(std::string(to_string(op)) + " backward is not provided by this backend");
  if (n == 0) return Status::ok();
  unary_bwd_kernel<<<blocks_for(n), kThreads>>>(op, x, y, dy, dx, n);
  DETAUDIT_CUDA_LAUNCHED("unary backward kernel");
  return Status::ok();
}

Status gpu_upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) {
  if (h < 1 || w < 1) return Status::invalid("upsample2: h and w must be positive");
  if (planes == 0) return Status::ok();
  upsample2_fwd_kernel<<<blocks_for(planes * 4 * size_t(h) * w), kThreads>>>(x, y, planes, size_t(h), size_t(w));
  DETAUDIT_CUDA_LAUNCHED("upsample2 forward kernel");
  return Status::ok();
}

Status gpu_upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) {
  if (h < 1 || w < 1) return Status::invalid("upsample2: h and w must be positive");
  if (planes == 0) return Status::ok();
  upsample2_bwd_kernel<<<blocks_for(planes * size_t(h) * w), kThreads>>>(dy, dx, planes, size_t(h), size_t(w));
  DETAUDIT_CUDA_LAUNCHED("upsample2 backward kernel");
  return Status::ok();
}

Status gpu_copy_2d(size_t rows, size_t cols, const float* src, size_t src_ld, float* dst, size_t dst_ld) {
  if (rows == 0 || cols == 0) return Status::ok();
  if (src_ld < cols || dst_ld < cols) return Status::invalid("copy_2d: a leading dimension is below cols");
  copy_2d_kernel<<<blocks_for(rows * cols), kThreads>>>(rows, cols, src, src_ld, dst, dst_ld);
  DETAUDIT_CUDA_LAUNCHED("copy_2d kernel");
  return Status::ok();
}

Status gpu_scale(float* y, float alpha, size_t n) {
  if (n == 0) return Status::ok();
  scale_kernel<<<blocks_for(n), kThreads>>>(y, alpha, n);
  DETAUDIT_CUDA_LAUNCHED("scale kernel");
  return Status::ok();
}

Status gpu_loss(LossOp op, bool atomic, const float* y, const float* t, size_t n, float* value, float* dy,
                float* scratch) {
  if (n == 0) return Status::invalid(std::string(to_string(op)) + " loss: no elements");
  const float fn = float(n);  // as train_ops::loss_terms_f32 and the CPU backends' mean
  // determinism: the grid depends only on n (at most kTrainPartials blocks), not on the GPU's SM count,
  // so the tree variant gives the same bits on every GPU; the atomic one has 3+ blocks that receive terms
  // where n allows (contiguous chunks, atomic_block_terms), whose sums meet in completion order.
  const int blocks = int(reduce_blocks(n, atomic, kTrainPartials));
  float* acc = scratch + kTrainPartials;
  if (atomic) {
    DETAUDIT_CUDA(cudaMemsetAsync(acc, 0, sizeof(float)));
    loss_partials<<<blocks, kThreads>>>(op, y, t, n, fn, dy, scratch, acc);
    DETAUDIT_CUDA_LAUNCHED("loss (atomic) kernel");
    loss_final_atomic<<<1, 1>>>(acc, fn, value);
  } else {
    loss_partials<<<blocks, kThreads>>>(op, y, t, n, fn, dy, scratch, nullptr);
    DETAUDIT_CUDA_LAUNCHED("loss (tree) kernel");
    loss_final_tree<<<1, kTrainPartials>>>(scratch, blocks, fn, value);
  }
  DETAUDIT_CUDA_LAUNCHED("loss final kernel");
  return Status::ok();
}

Status gpu_adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) {
  if (n == 0) return Status::ok();
  const float omb1 = 1.0f - p.beta1, omb2 = 1.0f - p.beta2;  // float, as train_ops::adam_f32
  adam_kernel<<<blocks_for(n), kThreads>>>(p, omb1, omb2, w, g, m, v, n);
  DETAUDIT_CUDA_LAUNCHED("adam step kernel");
  return Status::ok();
}

Status gpu_sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n) {
  if (n == 0) return Status::ok();
  sgd_kernel<<<blocks_for(n), kThreads>>>(p, w, g, velocity, n);
  DETAUDIT_CUDA_LAUNCHED("sgd step kernel");
  return Status::ok();
}

}  // namespace detaudit::gpu
