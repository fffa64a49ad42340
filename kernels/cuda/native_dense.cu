// `cuda` backend: gemm, reductions, softmax and elementwise kernels.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/common.hpp"
#include "kernels/cuda/geometry.hpp"
#include "kernels/cuda/native_kernels.hpp"

namespace detaudit::gpu {

namespace {

constexpr int kTile = 16;
constexpr int kThreads = 256;
static_assert(kThreads == kReduceThreads, "reduce_blocks (geometry.hpp) counts blocks of kThreads");

__device__ inline float fma_t(float a, float b, float c) { return fmaf(a, b, c); }
__device__ inline double fma_t(double a, double b, double c) { return fma(a, b, c); }

// Shared-memory tiled gemm, row-major. Tiles are loaded so that threadIdx.x walks contiguous memory
// whatever the transposes.
// determinism: each C element is one thread's FMA chain over k = 0, 1, ..., K-1, the same on every run
// and every GPU; no reduction is split across threads.
template <typename T>
__global__ void gemm_kernel(bool ta, bool tb, int m, int n, int k, T alpha, const T* __restrict__ a, int lda,
                            const T* __restrict__ b, int ldb, T beta, T* __restrict__ c, int ldc) {
  __shared__ T as[kTile][kTile + 1];  // as[row][kk]
  __shared__ T bs[kTile][kTile + 1];  // bs[kk][col]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
  T acc = 0;
  for (int t = 0; t < k; t += kTile) {
    if (!ta) {  // A is m x k
      int r = r0 + ty, kk = t + tx;
      as[ty][tx] = (r < m && kk < k) ? a[size_t(r) * lda + kk] : T(0);
    } else {    // A is k x m
      int r = r0 + tx, kk = t + ty;
      as[tx][ty] = (r < m && kk < k) ? a[size_t(kk) * lda + r] : T(0);
    }
    if (!tb) {  // B is k x n
      int kk = t + ty, col = c0 + tx;
      bs[ty][tx] = (kk < k && col < n) ? b[size_t(kk) * ldb + col] : T(0);
    } else {    // B is n x k
      int kk = t + tx, col = c0 + ty;
      bs[tx][ty] = (kk < k && col < n) ? b[size_t(col) * ldb + kk] : T(0);
    }
    __syncthreads();
    const int kmax = min(kTile, k - t);
    for (int kk = 0; kk < kmax; ++kk) acc = fma_t(as[ty][kk], bs[kk][tx], acc);
    __syncthreads();
  }
  const int r = r0 + ty, col = c0 + tx;
  if (r < m && col < n) {
    T out = alpha * acc;
    if (beta != T(0)) out = out + beta * c[size_t(r) * ldc + col];  // beta == 0: C is not read (BLAS rule)
    c[size_t(r) * ldc + col] = out;
  }
}

template <typename T>
Status launch_gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                   T beta, T* c, int ldc) {
  if (m <= 0 || n <= 0) return Status::ok();
  if ((m + kTile - 1) / kTile > 65535) return Status::unsupported("cuda gemm: m > 1048560");
  dim3 block(kTile, kTile), grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  gemm_kernel<T><<<grid, block>>>(ta == Trans::kT, tb == Trans::kT, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  DETAUDIT_CUDA_LAUNCHED("cuda gemm kernel");
  return Status::ok();
}

// ---- reductions ---------------------------------------------------------------------------------


// Pass 1: every thread sums a fixed subset in index order, then the block's tree.
// acc == nullptr (tree): a grid-stride subset; the block writes its partial.
// acc != nullptr (atomic): the block's contiguous chunk (atomic_block_terms), strided by its threads, so
// that every block of reduce_blocks() receives terms where n allows; the block atomicAdds its sum into *acc.
__global__ void reduce_partials(int op, const float* __restrict__ x, const float* __restrict__ y, size_t n,
                                float* partials, float* acc) {
  __shared__ float sh[kThreads];
  const ThreadTerms terms = reduce_thread_terms(acc != nullptr, n, gridDim.x, blockIdx.x, blockDim.x, threadIdx.x);
  float s = 0.f;
  for (size_t i = terms.first; i < terms.end; i += terms.step) {
    float v = x[i];
    s = op == 0 ? s + v : fmaf(v, op == 1 ? y[i] : v, s);
  }
  s = block_tree_sum(s, sh);
  block_sum_out(s, acc, partials);
}

// Pass 2 (tree): one block of kReducePartials threads combines the partials by a fixed tree.
__global__ void reduce_final(const float* partials, int count, float* out, bool root) {
  __shared__ float sh[kReducePartials];
  float s = block_tree_sum(threadIdx.x < count ? partials[threadIdx.x] : 0.f, sh);
  if (threadIdx.x == 0) *out = root ? sqrtf(s) : s;
}

__global__ void reduce_finish_atomic(const float* acc, float* out, bool root) {
  *out = root ? sqrtf(*acc) : *acc;
}

// ---- softmax --------------------------------------------------------------------------------------

// One block per row: max (exact in any order), sum of exp(x - max), then y = exp(x - max) / sum.
__global__ void softmax_rows(bool atomic, const float* __restrict__ x, float* __restrict__ y, size_t cols) {
  __shared__ float sh[kThreads];
  __shared__ float atomic_total;
  const float* xr = x + size_t(blockIdx.x) * cols;
  float* yr = y + size_t(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
  sh[threadIdx.x] = mx;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + w]);
    __syncthreads();
  }
  mx = sh[0];
  __syncthreads();
  float s = 0.f;
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - mx);
  float total;
  if (atomic) {
    if (threadIdx.x == 0) atomic_total = 0.f;
    __syncthreads();
    atomicAdd(&atomic_total, s);  // determinism: warps add in the order they reach this line
    __syncthreads();
    total = atomic_total;
  } else {
    total = block_tree_sum(s, sh);
  }
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - mx) / total;
}

// ---- elementwise -----------------------------------------------------------------------------------

__global__ void unary_kernel(UnaryOp op, const float* __restrict__ x, float* __restrict__ y, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float v = x[i], r = v;
    switch (op) {
      case UnaryOp::kCopy: r = v; break;
      case UnaryOp::kRelu: r = v > 0.f ? v : 0.f; break;
      case UnaryOp::kSigmoid: r = 1.f / (1.f + expf(-v)); break;
      case UnaryOp::kTanh: r = tanhf(v); break;
      case UnaryOp::kHardSigmoid: r = fminf(fmaxf(0.2f * v + 0.5f, 0.f), 1.f); break;
      case UnaryOp::kExp: r = expf(v); break;
      case UnaryOp::kNeg: r = -v; break;
      case UnaryOp::kSquare: r = v * v; break;
    }
    y[i] = r;
  }
}

__global__ void binary_kernel(BinaryOp op, const float* __restrict__ a, const float* __restrict__ b,
                              float* __restrict__ y, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float u = a[i], v = b[i], r = 0.f;
    switch (op) {
      case BinaryOp::kAdd: r = u + v; break;
      case BinaryOp::kSub: r = u - v; break;
      case BinaryOp::kMul: r = u * v; break;
      case BinaryOp::kDiv: r = u / v; break;  // IEEE division (nvcc default -prec-div=true)
      case BinaryOp::kMax: r = fmaxf(u, v); break;
      case BinaryOp::kMin: r = fminf(u, v); break;
    }
    y[i] = r;
  }
}

__global__ void axpy_kernel(size_t n, float alpha, const float* __restrict__ x, float* __restrict__ y) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = fmaf(alpha, x[i], y[i]);
}

__global__ void fill_kernel(float* p, size_t n, float v) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}

unsigned elementwise_blocks(size_t n) {
  return unsigned(std::clamp<size_t>((n + kThreads - 1) / kThreads, 1, 65536));
}

}  // namespace

Status native_gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                   int ldb, float beta, float* c, int ldc) {
  return launch_gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

Status native_gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
                       const double* b, int ldb, double beta, double* c, int ldc) {
  return launch_gemm<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

Status native_reduce(ReduceOp op, bool atomic, const float* x, const float* y, size_t n, float* out, float* scratch) {
  const int code = op == ReduceOp::kSum ? 0 : op == ReduceOp::kDot ? 1 : 2;
  const bool root = op == ReduceOp::kNorm2;
  // determinism: the grid depends only on n (at most kReducePartials blocks), not on the GPU's SM count,
  // so the tree variant gives the same bits on every GPU; the atomic one has 3+ blocks that receive terms
  // where n allows (contiguous chunks, atomic_block_terms), whose sums meet in completion order.
  const int blocks = int(reduce_blocks(n, atomic, kReducePartials));
  float* acc = scratch + kReducePartials;
  if (atomic) {
    DETAUDIT_CUDA(cudaMemsetAsync(acc, 0, sizeof(float)));
    reduce_partials<<<blocks, kThreads>>>(code, x, y, n, scratch, acc);
    DETAUDIT_CUDA_LAUNCHED("cuda reduce (atomic) kernel");
    reduce_finish_atomic<<<1, 1>>>(acc, out, root);
  } else {
    reduce_partials<<<blocks, kThreads>>>(code, x, y, n, scratch, nullptr);
    DETAUDIT_CUDA_LAUNCHED("cuda reduce (tree) kernel");
    reduce_final<<<1, kReducePartials>>>(scratch, blocks, out, root);
  }
  DETAUDIT_CUDA_LAUNCHED("cuda reduce final kernel");
  return Status::ok();
}

Status native_softmax(bool atomic, const float* x, float* y, size_t rows, size_t cols) {
  if (rows == 0 || cols == 0) return Status::ok();
  if (rows > 0x7fffffffu) return Status::unsupported("cuda softmax: more than 2^31-1 rows");
  softmax_rows<<<unsigned(rows), kThreads>>>(atomic, x, y, cols);
  DETAUDIT_CUDA_LAUNCHED("cuda softmax kernel");
  return Status::ok();
}

Status native_unary(UnaryOp op, const float* x, float* y, size_t n) {
  if (n == 0) return Status::ok();
  unary_kernel<<<elementwise_blocks(n), kThreads>>>(op, x, y, n);
  DETAUDIT_CUDA_LAUNCHED("cuda unary kernel");
  return Status::ok();
}

Status native_binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) {
  if (n == 0) return Status::ok();
  binary_kernel<<<elementwise_blocks(n), kThreads>>>(op, a, b, y, n);
  DETAUDIT_CUDA_LAUNCHED("cuda binary kernel");
  return Status::ok();
}

Status native_axpy(size_t n, float alpha, const float* x, float* y) {
  if (n == 0) return Status::ok();
  axpy_kernel<<<elementwise_blocks(n), kThreads>>>(n, alpha, x, y);
  DETAUDIT_CUDA_LAUNCHED("cuda axpy kernel");
  return Status::ok();
}

Status launch_fill(float* p, size_t n, float value, cudaStream_t stream) {
  if (n == 0) return Status::ok();
  fill_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(p, n, value);
  DETAUDIT_CUDA_LAUNCHED("fill kernel");
  return Status::ok();
}

}  // namespace detaudit::gpu
