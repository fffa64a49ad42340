// The `cuda` target's atomic variants race only where three or more partial sums meet in one output
// (with two, (0 + a) + b == (0 + b) + a exactly). kernels/cuda/geometry.hpp cuts every atomic reduction
// into enough partials; these tests check it on every shape the suites and the training design give the
// atomic target, without a GPU: the kernels take their chunking from these very functions.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/geometry.hpp"
#include "kernels/cuda/native_kernels.hpp"
#include "kernels/cuda/train_kernels.hpp"
#include "suites/probe_suite.hpp"

namespace detaudit {
namespace {

using namespace detaudit::gpu;

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
    EXPECT_GE(reduce_blocks(n, true, kReducePartials), std::min<size_t>(n, 3)) << n;
    EXPECT_LE(reduce_blocks(n, true, kReducePartials), size_t(kReducePartials));
    // The tree's grid is a function of n alone (the same on every GPU).
    EXPECT_EQ(reduce_blocks(n, false, kReducePartials), std::clamp<size_t>((n + 255) / 256, 1, kReducePartials));
  }
}

// The shapes the report draws its conclusions from: every suite workload that cuda:0?order=atomic runs
// through an atomic kernel gives it at least three partials per output.
TEST(AtomicGeometry, EverySuiteShapeRaces) {
  for (const std::string& suite : suite_names()) {
    ProbePlan plan;
    std::string err;
    ASSERT_TRUE(make_plan(suite, "cuda:0?order=atomic", "", 0, 60, &plan, &err)) << err;
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
        EXPECT_GE(reduce_blocks(size_t(w.get_int("n", 0)), true, kReducePartials), 3u) << what;
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
  EXPECT_GE(reduce_blocks(batch * 28 * 28, true, kTrainPartials), 3u);
}

}  // namespace
}  // namespace detaudit
