// Internals of the cpu backend: the per-ISA kernels and the constants that fix the bits.
// determinism: only the constants below (pairwise chunk sizes, lane layout, atomic chunk counts) and
// the thread count of order=blocked decide the combining order. The ISA decides nothing: a C element
// sees the same FMA sequence, and a reduction lane the same adds, on AVX-512, AVX2 and scalar code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/native.hpp"

namespace detaudit::native {

// gemm: the reduction (K) dimension is cut into kc blocks of this size. order=pairwise computes each
// block's partial from zero and combines them by a pairwise tree, so this constant is part of its bits.
constexpr int kGemmKc = 256;
// reduce/softmax: leaf size of order=pairwise.
constexpr size_t kPairwiseLeaf = 1024;
// Inside a leaf or block, element i (counted from the block start) goes to lane i % kLanes; lanes are
// combined by a fixed tree (lane l += lane l + w for w = 32, 16, ..., 1).
constexpr int kLanes = 64;
// order=atomic reductions: about this many chunks per thread.
constexpr int kAtomicChunksPerThread = 64;
// order=atomic gemm and convolutions: a K shorter than this is not split (one FMA chain, as a GPU
// kernel does not split a short reduction across blocks); longer ones go in kGemmKc blocks, at least 3.
constexpr int kAtomicMinSplitK = 64;

// The last kc block of a gemm tile writes c = alpha*acc (beta == 0, c is not read) or
// c = fma(alpha, acc, beta*c) (beta != 0), the same on every ISA.
struct Epilogue {
  float alpha = 1.0f, beta = 0.0f;
};

// For rows i < R (the kernel's row count, 1..mr) and j < nr:
// acc[i][j] = (src ? src tile : 0) + sum over kk < kc of a[kk*mr + i] * b[kk*nr + j], as one FMA chain
// in kk order per element; then acc = add[i][j] + acc when add != nullptr (one rounded add); then
// dst = acc, or the epilogue applied to dst when epi != nullptr. src, add and dst may alias.
using GemmUkernel = void (*)(int kc, const float* a, const float* b, const float* src, ptrdiff_t lds,
                             const float* add, ptrdiff_t lda, float* dst, ptrdiff_t ldd, const Epilogue* epi);
// The same computation with op(B) read in place instead of from a packed panel, and A's rows for
// term kk at a + kk*astep (astep = the panel's row count, so a short panel carries no padding): row kk of the
// micro-panel is b + rows[kk], of which columns j < cols (1..nr) are used; columns >= cols are
// neither read nor written (in src, add and dst alike). For convolutions, whose B rows are runs of an
// image already in cache: packing them would cost as much as the FMAs that use them.
using GemmUkernelRows = void (*)(int kc, const float* a, int astep, const float* b, const ptrdiff_t* rows, int cols,
                                 const float* src, ptrdiff_t lds, const float* add, ptrdiff_t lda, float* dst,
                                 ptrdiff_t ldd, const Epilogue* epi);
// c[j] = epilogue(acc[j]) for j < n.
using EpilogueRow = void (*)(const float* acc, float* c, size_t n, Epilogue e);
// Sum, dot and sum of squares of a block with the kLanes layout and the fixed lane tree.
using LeafSum = float (*)(const float* x, size_t n);
using LeafDot = float (*)(const float* x, const float* y, size_t n);

struct IsaKernels {
  CpuIsa isa;
  int mr, nr, mc;  // micro-tile and A-block rows; do not change the bits
  const GemmUkernel* ukernel;  // ukernel[R] computes R rows (1 <= R <= mr) of an mr-packed A panel
  const GemmUkernelRows* ukernel_rows;  // the same with B read in place
  EpilogueRow epilogue_row;
  LeafSum leaf_sum;
  LeafDot leaf_dot;
  LeafSum leaf_sumsq;
};

// The kernels for `isa` (kAuto: the best this CPU supports); nullptr when the CPU lacks the ISA.
const IsaKernels* isa_kernels(CpuIsa isa);

// The permutation of 0..n-1 that forced_atomic_order_seed imposes on atomic chunks (Fisher-Yates
// driven by splitmix64 of the seed). Exposed for tests.
std::vector<uint32_t> forced_order(uint64_t seed, size_t n);

// The fixed lane tree, shared by every ISA.
inline float lane_tree(float* lanes) {
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lanes[l] = lanes[l] + lanes[l + w];
  return lanes[0];
}

}  // namespace detaudit::native
