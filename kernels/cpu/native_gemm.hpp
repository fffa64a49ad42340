// The cpu backend's gemm driver: packed panels, per-ISA micro-kernels, cache blocking, and the four
// ways of combining partial sums over K (ReduceOrder).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
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
  AlignedBuffer apack, bpack, tile, partial;
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
};

struct GemmContext {
  const IsaKernels* kern;
  ThreadPool* pool;
  ReduceOrder order;
  uint64_t forced_seed;
  std::vector<ThreadScratch>* scratch;  // pool->size() entries
  std::vector<AlignedBuffer>* shared;   // order=blocked / atomic: M x N partials
};

// Checks shapes and leading dimensions (BLAS rules, row-major).
Status check_gemm_args(Trans ta, Trans tb, int m, int n, int k, int lda, int ldb, int ldc);

Status gemm(GemmContext& ctx, const GemmArgs& g);

}  // namespace detaudit::native
