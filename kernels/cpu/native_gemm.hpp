// The cpu backend's gemm driver: packed panels, per-ISA micro-kernels, cache blocking, and the four
// ways of combining partial sums over K (ReduceOrder).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cpu/native_kernels.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace detaudit::native {

// A growable 64-byte-aligned float buffer; contents are not kept when it grows.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), cap_(o.cap_) { o.p_ = nullptr, o.cap_ = 0; }
  ~AlignedBuffer() { std::free(p_); }
  // nullptr when the allocation fails.
  float* get(size_t n);

 private:
  float* p_ = nullptr;
  size_t cap_ = 0;
};

// Per-thread working memory, kept between calls.
struct ThreadScratch {
  AlignedBuffer apack, bpack, tile, total, partial, col;
  std::vector<AlignedBuffer> levels;  // order=pairwise: one buffer per level of the combine stack
  std::vector<float> row;
};

struct GemmArgs {
  Trans ta, tb;
  int m, n, k;
  float alpha;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  float beta;
  float* c;
  int ldc;
  // Indexed B (tb == kN only): row k of op(B) starts at b + b_rows[k]; column j of that row is at
  // + b_cols[j] when b_cols is set (b_run[j]: columns j, j+1, ... stay contiguous for that many), else + j.
  const ptrdiff_t* b_rows = nullptr;
  const ptrdiff_t* b_cols = nullptr;
  const int* b_run = nullptr;
};

struct GemmContext {
  const IsaKernels* kern;
  ThreadPool* pool;
  ReduceOrder order;
  uint64_t forced_seed;
  std::vector<ThreadScratch>* scratch;  // pool->size() entries
  std::vector<AlignedBuffer>* shared;   // order=blocked (few tiles) / atomic (beta != 0): M x N partials
                                        // (of every gemm of a batch)
  std::vector<AlignedBuffer>* staging;  // conv2d: padded input, output, packed operand, windows (4 entries)
};

// C = alpha op(A) op(B) + beta C for each gemm of gs, all in one run of the context's order (one pool
// dispatch for the batch, work shared over the tiles of all its gemms). The gemms share m, n, k, alpha
// and beta; operands, transposes and leading dimensions are each gemm's own. For the 36 per-point
// gemms of a Winograd convolution, small ones among them: one multithreaded gemm each would pay a
// dispatch and, in order=blocked, a combine pass 36 times.
// determinism: each gemm gets what gemm() computes for it alone in the same context: the same bits in
// every order (order=atomic with forced_seed included); an unforced atomic order races as it would
// for that gemm alone (the same chunks, added in completion order).
Status gemm_batch(GemmContext& ctx, std::span<const GemmArgs> gs);
// gemm_batch of one.
Status gemm(GemmContext& ctx, const GemmArgs& g);

// op(A)[m x k] packed once for all of K in the layout of gemm_batch_packed_a (m*k floats, no padding),
// for contexts whose ISA has the same micro-tile rows (ctx.kern->mr). Copies only.
void pack_a_whole(const GemmContext& ctx, Trans ta, const float* a, int lda, int m, int k, float* dst);
// C_g[m x n] = A_g[m x k] * B_g[k x n] for g < batch (alpha 1, beta 0; C_g at c + g*c_stride, row
// stride ldc): A_g pre-packed by pack_a_whole at ap + g*m*k, B_g read in place (row kk at
// b + g*b_stride + kk*ldb). One run of the context's order, as gemm_batch: nothing is packed per call
// for A (a Winograd filter transformed once serves every time step) and nothing for B.
// determinism: each element has the bits gemm_batch gives the same gemm in the same context (the
// same FMA chain per element, the same order's combination).
Status gemm_batch_packed_a(GemmContext& ctx, int batch, int m, int n, int k, const float* ap, const float* b, int ldb,
                           size_t b_stride, float* c, int ldc, size_t c_stride);
// y[n][k][p][q] = sum over (c, r, s) of w[k][c][r][s] * x[n][c][...]: for every image the gemm
// W[K x CRS] * col_n[CRS x PQ] in the context's order (the reduction runs over C*R*S), with col_n the
// image's im2col: never built at stride 1 (the zero-padded image's rows are read in place, W packed
// once), built piece by piece in each thread's scratch otherwise.
// With a bias, y = that + bias[k], added once per element in the output pass (Backend::bias_add's bits).
Status conv_fwd(GemmContext& ctx, const ConvShape& s, const float* x, const float* w, float* y,
                const float* bias = nullptr);

// dw[K x CRS] = beta*dw + dy'[K x NPQ] * col'^T, col' = the im2col of all n images side by side: one
// gemm in the context's order whose reduction runs over N*P*Q (image-major). col' is read from a
// channel-last copy of the images, or (few channels) from explicit per-pixel window rows, with dy
// packed once; otherwise both are packed piecewise.
Status conv_bwd_filter(GemmContext& ctx, const ConvShape& s, const float* x, const float* dy, float beta, float* dw);

}  // namespace detaudit::native
