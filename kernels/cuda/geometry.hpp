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
// kMinAtomicPartials blocks (each of which then sums a grid-stride subset) where n allows, so it races.
constexpr size_t reduce_blocks(size_t n, bool atomic, size_t max_blocks) {
  size_t b = (n + kReduceThreads - 1) / kReduceThreads;
  if (atomic) b = std::max(b, std::min(n, kMinAtomicPartials));
  return std::clamp<size_t>(b, 1, max_blocks);
}

}  // namespace detaudit::gpu
