// The `cuda` target's atomic variants race only where three or more partial sums meet in one output
// (with two, (0 + a) + b == (0 + b) + a exactly). kernels/cuda/geometry.hpp cuts every atomic reduction
// into enough partials; these tests check it on every shape the suites and the training design give the
// atomic target, without a GPU: the kernels take their chunking from these very functions.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/fixtures.hpp"
#include "kernels/cuda/geometry.hpp"
#include "kernels/cuda/native_kernels.hpp"
#include "kernels/cuda/train_kernels.hpp"
#include "suites/probe_suite.hpp"

namespace detaudit {
namespace {

using namespace detaudit::gpu;

// How many blocks of an atomic two-pass reduction over n terms (reduce_blocks, at most max_blocks) receive
// at least one term, through atomic_block_terms as the kernels (reduce_partials, loss_partials) call it.
// Only those blocks' sums race: a block without terms adds +0, which changes no sum. Checks on the way
// that the blocks' chunks cover [0, n) once, in order.
size_t blocks_with_terms(size_t n, size_t max_blocks) {
  const size_t blocks = reduce_blocks(n, true, max_blocks);
  size_t covered = 0, with_terms = 0;
  for (size_t b = 0; b < blocks; ++b) {
    const TermRange r = atomic_block_terms(n, blocks, b);
    EXPECT_EQ(r.begin, covered) << "n=" << n << " block " << b << ": a gap or an overlap";
    EXPECT_LE(r.begin, r.end) << "n=" << n << " block " << b;
    covered = std::max(covered, r.end);
    // The block's first thread, as the kernels' loop (reduce_thread_terms) gives it.
    const ThreadTerms t0 = reduce_thread_terms(true, n, blocks, b, kReduceThreads, 0);
    EXPECT_EQ(t0.end, r.end) << "n=" << n << " block " << b;
    EXPECT_EQ(t0.step, size_t(kReduceThreads)) << "n=" << n << " block " << b;
    with_terms += t0.first < t0.end;
  }
  EXPECT_EQ(covered, n) << "n=" << n << ": terms left out";
  return with_terms;
}

// The rule the atomic kernels had before: a grid-stride loop from blockIdx.x * kReduceThreads +
// threadIdx.x, which gives block b terms only where b * kReduceThreads < n.
size_t grid_stride_blocks_with_terms(size_t n, size_t max_blocks) {
  const size_t blocks = reduce_blocks(n, true, max_blocks);
  size_t with_terms = 0;
  for (size_t b = 0; b < blocks; ++b) with_terms += b * kReduceThreads < n;
  return with_terms;
}

TEST(AtomicGeometry, ThreeOrMorePartialsWheneverThereAreThreeTerms) {
  for (size_t max_chunk : {kConvFilterChunk, kBiasChunk})
    for (size_t terms = 1; terms < 200000; terms += terms < 100 ? 1 : 977) {
      const size_t chunk = atomic_chunk(terms, max_chunk), parts = atomic_partials(terms, max_chunk);
      EXPECT_LE(chunk, max_chunk);
      EXPECT_GE(chunk, 1u);
      EXPECT_GE(parts * chunk, terms) << "every term in a chunk";
      EXPECT_LT((parts - 1) * chunk, terms) << "no empty chunk";
      EXPECT_GE(parts, std::min<size_t>(terms, 3)) << terms << " terms";
    }
  for (size_t n = 1; n < 100000; n += n < 100 ? 1 : 611) {
    EXPECT_GE(blocks_with_terms(n, kReducePartials), std::min<size_t>(n, 3)) << n;
    EXPECT_GE(blocks_with_terms(n, kTrainPartials), std::min<size_t>(n, 3)) << n;
    EXPECT_LE(reduce_blocks(n, true, kReducePartials), size_t(kReducePartials));
    // The tree's grid is a function of n alone (the same on every GPU).
    EXPECT_EQ(reduce_blocks(n, false, kReducePartials), std::clamp<size_t>((n + 255) / 256, 1, kReducePartials));
  }
}

// Small reductions and losses (a few hundred terms), where a grid-stride loop fed one or two blocks.
TEST(AtomicGeometry, SmallReductionsGiveTermsToThreeOrMoreBlocks) {
  for (size_t n = 1; n <= 600; ++n) {
    EXPECT_GE(blocks_with_terms(n, kReducePartials), std::min<size_t>(n, 3)) << "reduce n=" << n;
    EXPECT_GE(blocks_with_terms(n, kTrainPartials), std::min<size_t>(n, 3)) << "loss n=" << n;
  }
  // Large ones (2^20, and the suites' 10^6 and 10^7): 1024 blocks of ceil(n / 1024) terms, every block fed.
  for (size_t n : {size_t(1) << 20, size_t(1000000), size_t(10000000)})
    EXPECT_EQ(blocks_with_terms(n, kReducePartials), size_t(kReducePartials)) << n;
}

// The tree variant's loop is the grid-stride subset it always was (its bits depend on n alone).
TEST(AtomicGeometry, TheTreeVariantKeepsItsGridStrideLoop) {
  for (size_t n : {size_t(1), size_t(300), size_t(1000000)}) {
    const size_t blocks = reduce_blocks(n, false, kReducePartials);
    for (size_t b : {size_t(0), blocks - 1})
      for (size_t t : {size_t(0), size_t(kReduceThreads - 1)}) {
        const ThreadTerms r = reduce_thread_terms(false, n, blocks, b, kReduceThreads, t);
        EXPECT_EQ(r.first, b * kReduceThreads + t);
        EXPECT_EQ(r.end, n);
        EXPECT_EQ(r.step, blocks * kReduceThreads);
      }
  }
}

// Why the kernels take contiguous chunks: under the grid-stride rule, n = 300 launched 8 blocks of
// which 2 received terms, and (0 + a) + b == (0 + b) + a, so cuda?order=atomic could not vary there.
// Every n up to 2 * 256 had at most two blocks with terms.
TEST(AtomicGeometry, TheGridStrideRuleLeftSmallReductionsWithoutARace) {
  EXPECT_EQ(reduce_blocks(300, true, kReducePartials), 8u);
  EXPECT_EQ(grid_stride_blocks_with_terms(300, kReducePartials), 2u);
  EXPECT_EQ(blocks_with_terms(300, kReducePartials), 8u);
  for (size_t n = 3; n <= 2 * size_t(kReduceThreads); ++n) {
    EXPECT_LE(grid_stride_blocks_with_terms(n, kReducePartials), 2u) << n;
    EXPECT_GE(blocks_with_terms(n, kReducePartials), 3u) << n;
  }
}

// The shapes the report draws its conclusions from: every suite workload that cuda:0?order=atomic runs
// through an atomic kernel gives it at least three partials per output.
TEST(AtomicGeometry, EverySuiteShapeRaces) {
  for (const std::string& suite : suite_names()) {
    ProbePlan plan;
    std::string err;
    ASSERT_TRUE(succeeded(make_plan(suite, "cuda:0?order=atomic", "", 0, 60, &plan), &err)) << err;
    int checked = 0;
    for (const Spec& w : plan.workloads) {
      const std::string what = suite + ": " + w.str();
      if (w.name == "conv2d" && w.get("pass", "") == "bwd_filter") {
        ConvShape s;
        s.n = int(w.get_int("n", 0)), s.h = int(w.get_int("h", 0)), s.w = int(w.get_int("w", 0));
        s.r = int(w.get_int("r", 0)), s.s = int(w.get_int("s", 0));
        s.stride = int(w.get_int("stride", 0)), s.pad = int(w.get_int("pad", 0));
        const size_t terms = size_t(s.n) * s.p() * s.q();
        EXPECT_GE(atomic_partials(terms, kConvFilterChunk), 3u) << what << ": " << terms << " terms";
        ++checked;
      } else if (w.name == "reduce" && w.get("op", "") != "softmax") {
        EXPECT_GE(blocks_with_terms(size_t(w.get_int("n", 0)), kReducePartials), 3u) << what;
        ++checked;
      } else if (w.name == "reduce") {
        // softmax: the row sum's eight warps meet in one shared float through atomicAdd; a row of
        // fewer than 8 * 32 columns leaves some warps without terms.
        EXPECT_GE(w.get_int("cols", 0), 3 * 32) << what;
        ++checked;
      } else if (w.name == "maxpool" && w.get("pass", "") == "bwd") {
        // Windows overlap (stride < window), so some inputs take the gradient of up to four windows.
        EXPECT_LT(w.get_int("stride", 0), w.get_int("window", 0)) << what;
        ++checked;
      }
    }
    EXPECT_GE(checked, 6) << suite << ": the suite lost its atomic workloads";
  }
}

// The autoencoder (README: batch 64, 28x28) on order=atomic: the bias gradient of each layer and the loss.
TEST(AtomicGeometry, EveryAutoencoderReductionRaces) {
  const size_t batch = 64;
  for (size_t hw : {size_t(28 * 28), size_t(14 * 14), size_t(7 * 7), size_t(1)})
    EXPECT_GE(atomic_partials(batch * hw, kBiasChunk), 3u) << hw;
  EXPECT_GE(blocks_with_terms(batch * 28 * 28, kTrainPartials), 3u) << "the loss";
}

}  // namespace
}  // namespace detaudit
