// How the atomic variants of the `cuda` target cut a reduction into partial sums. Plain C++ (no CUDA
// headers), so the CPU tests check that every suite shape really races.
//
// determinism: an atomic reduction varies run to run only where three or more partial sums meet in one
// output. With two, the result is (0 + a) + b or (0 + b) + a, which are the same float: addition is
// commutative, it is associativity that fails. So every atomic kernel cuts its terms into at least
// kMinAtomicPartials chunks where there are that many terms, and into chunks of at most its own maximum
// (kConvFilterChunk, kBiasChunk) where there are more.
#pragma once
#include <algorithm>
#include <cstddef>

// Callable from the kernels too (nvcc), where this header is compiled as CUDA.
#if defined(__CUDACC__)
#define DETAUDIT_HOST_DEVICE __host__ __device__
#else
#define DETAUDIT_HOST_DEVICE
#endif

namespace detaudit::gpu {

constexpr size_t kMinAtomicPartials = 8;
constexpr size_t kConvFilterChunk = 2048;  // N*P*Q terms per block at most in the atomic backward-filter
constexpr size_t kBiasChunk = 1024;        // N*HW terms per block at most in the atomic bias gradient
constexpr int kReduceThreads = 256;        // threads per block of the reductions (native_dense.cu, train_kernels.cu)

// Terms per chunk for `terms` terms and chunks of at most `max_chunk`.
constexpr size_t atomic_chunk(size_t terms, size_t max_chunk) {
  const size_t even = (terms + kMinAtomicPartials - 1) / kMinAtomicPartials;
  return std::max<size_t>(1, std::min(even, max_chunk));
}
// How many partial sums meet in each output.
constexpr size_t atomic_partials(size_t terms, size_t max_chunk) {
  const size_t c = atomic_chunk(terms, max_chunk);
  return (terms + c - 1) / c;
}

// Blocks of a two-pass reduction over n elements (at most max_blocks partials). The tree variant's grid
// depends only on n, so its bits are the same on every GPU; the atomic variant also takes at least
// kMinAtomicPartials blocks where n allows, each summing one contiguous chunk (atomic_block_terms), so
// it races.
constexpr size_t reduce_blocks(size_t n, bool atomic, size_t max_blocks) {
  size_t b = (n + kReduceThreads - 1) / kReduceThreads;
  if (atomic) b = std::max(b, std::min(n, kMinAtomicPartials));
  return std::clamp<size_t>(b, 1, max_blocks);
}

// The terms [begin, end) of one block.
struct TermRange {
  size_t begin = 0, end = 0;
};

// The terms block `block` of an atomic two-pass reduction over n terms in `blocks` blocks sums (the
// kernels call this, so the CPU tests count what the GPU runs): chunks of ceil(n / blocks) in index
// order, the block's threads striding within its chunk. A grid-stride loop would not do: it hands block
// b the terms from b * kReduceThreads on, so with n <= 2 * kReduceThreads only one or two of the blocks
// would receive terms, and two partial sums meet in the same float in either order (no race).
// determinism: which block sums which terms is fixed; the order their sums meet in is not (atomicAdd).
DETAUDIT_HOST_DEVICE constexpr TermRange atomic_block_terms(size_t n, size_t blocks, size_t block) {
  const size_t chunk = blocks == 0 ? n : (n + blocks - 1) / blocks;
  const size_t begin = block < blocks && block * chunk < n ? block * chunk : n;
  return {begin, n - begin > chunk ? begin + chunk : n};
}

// The terms one thread of a two-pass reduction sums, first, first + step, ... below end: in the tree
// variant a grid-stride subset (its bits fixed by n alone), in the atomic variant its block's contiguous
// chunk (atomic_block_terms) strided by the block's threads. reduce_partials and loss_partials both take
// their loop from here.
struct ThreadTerms {
  size_t first = 0, end = 0, step = 1;
};
DETAUDIT_HOST_DEVICE constexpr ThreadTerms reduce_thread_terms(bool atomic, size_t n, size_t blocks, size_t block,
                                                               size_t threads, size_t thread) {
  if (!atomic) return {block * threads + thread, n, blocks * threads};
  const TermRange r = atomic_block_terms(n, blocks, block);
  return {r.begin + thread, r.end, threads};
}

}  // namespace detaudit::gpu
