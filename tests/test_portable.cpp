// order=portable on the CPU: the same bits for 1, 2 and 4 threads and for every
// ISA this CPU has (AVX-512, AVX2+FMA, the x86-64 baseline with glibc's fmaf), on every quick-suite
// workload and on a 60-batch training run; the tree the GPU computes level by level is the binary
// counter's; portable::exp is accurate and handles the edges. The GPU half (cuda?order=portable equal to
// this, bit for bit) is tests/gpu/test_gpu_portable.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/fixtures.hpp"
#include "kernels/cpu/native.hpp"
#include "kernels/portable.hpp"
#include "models/autoencoder.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "probes/workload.hpp"
#include "suites/probe_suite.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/test_inputs.hpp"

namespace detaudit {
namespace {

namespace pt = portable;

std::vector<CpuIsa> isas_here() {
  std::vector<CpuIsa> v = {CpuIsa::kScalar};
  for (CpuIsa i : {CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (cpu_isa_supported(i)) v.push_back(i);
  return v;
}

std::unique_ptr<Backend> portable_backend(int threads, CpuIsa isa) {
  CpuNativeOptions o;
  o.order = ReduceOrder::kPortable;
  o.threads = threads;
  o.isa = isa;
  return make_cpu_native(o);
}

// The (threads, isa) pairs every test compares: every thread count at the widest ISA (kAuto), every
// other ISA at 2 threads.
std::vector<std::pair<int, CpuIsa>> configurations() {
  std::vector<std::pair<int, CpuIsa>> v;
  for (int t : {1, 2, 4}) v.push_back({t, CpuIsa::kAuto});
  // Every ISA at 2 threads but the one kAuto already is (the widest here).
  const std::vector<CpuIsa> isas = isas_here();
  for (CpuIsa i : isas)
    if (i != isas.back()) v.push_back({2, i});
  return v;
}

std::string label(const std::pair<int, CpuIsa>& c) {
  return "threads=" + std::to_string(c.first) + " isa=" + to_string(c.second);
}

Fingerprint run_workload(Backend& b, const Spec& w) {
  auto wl = Workload::create(w);
  Status st = wl->setup(b);
  EXPECT_TRUE(st) << w.str() << ": " << st.message();
  st = wl->run(b);
  EXPECT_TRUE(st) << w.str() << ": " << st.message();
  Fingerprint fp;
  EXPECT_TRUE(b.fingerprint(wl->output(), wl->output_bytes(), &fp)) << w.str();
  wl->teardown(b);
  return fp;
}

TEST(Portable, EveryQuickWorkloadHasOneOutputForEveryThreadCountAndIsa) {
  ProbePlan plan;
  std::string err;
  ASSERT_TRUE(succeeded(make_plan("quick", {}, {}, 1, 60, &plan), &err)) << err;
  ASSERT_GE(plan.workloads.size(), 10u);
  RecordProperty("isas", int(isas_here().size()));
  for (const Spec& w : plan.workloads) {
    Fingerprint first;
    for (const auto& c : configurations()) {
      auto b = portable_backend(c.first, c.second);
      const Fingerprint fp = run_workload(*b, w);
      if (c == configurations()[0]) {
        first = fp;
        continue;
      }
      EXPECT_EQ(fp.hex(), first.hex()) << w.str() << " with " << label(c);
    }
  }
}

// The bits must also not depend on how the work happens to be split: the autoencoder's shapes through a
// 60-batch training run, whose every op (gemm both ways, conv forward and both backward passes, bias,
// pooling, upsampling, ReLU, sigmoid, MSE, Adam) runs on the portable backend.
TEST(Portable, SixtyBatchTrainingEndsInTheSameWeightsForEveryThreadCountAndIsa) {
  const Dataset& data = test_support::training_data();
  TrainConfig cfg;
  cfg.init_seed = 7;
  cfg.data_seed = 3;
  cfg.batches = 60;
  cfg.batch_size = 16;
  std::string first;
  for (const auto& c : configurations()) {
    auto b = portable_backend(c.first, c.second);
    TrainResult r;
    Status st = train_autoencoder(*b, data, cfg, {}, &r);
    ASSERT_TRUE(st) << st.message();
    ASSERT_EQ(r.curve.size(), 60u);
    EXPECT_LT(r.curve.back(), r.curve.front()) << label(c) << ": the loss goes down";
    if (first.empty()) {
      first = r.final_weights.hex();
      continue;
    }
    EXPECT_EQ(r.final_weights.hex(), first) << label(c);
  }
}

// The device combines leaf partials level by level (pairs of neighbours, an odd last one carried up);
// the CPU pushes them through the binary counter. Same tree, same bits, for every count of leaves.
TEST(Portable, BinaryCounterIsThePairwiseLevelTree) {
  std::mt19937_64 g(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t n = 1; n < 3000; n += (n < 300 ? 1 : 37)) {
    std::vector<float> v(n);
    for (auto& x : v) x = u(g) * std::ldexp(1.0f, int(g() % 40) - 20);  // magnitudes apart: order shows
    pt::LeafCounter<float> c;
    for (float x : v) c.push(x);
    std::vector<float> level = v;
    for (size_t len = n; len > 1; len = len / 2 + len % 2) {
      std::vector<float> next(len / 2 + len % 2);
      for (size_t i = 0; i < len / 2; ++i) next[i] = level[2 * i] + level[2 * i + 1];
      if (len % 2) next.back() = level[len - 1];
      level = next;
    }
    const float a = c.merge(), b = level[0];
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << n << " leaves";
  }
}

// Against a double-precision exp, over the range softmax and sigmoid use, and at the edges.
TEST(Portable, ExpIsWithinTwoUlpsAndHandlesTheEdges) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(double(x));
    const float got = pt::exp(x);
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    worst = std::max(worst, std::abs(double(got) - want) / ulp);
  }
  RecordProperty("worst_ulps", std::to_string(worst));
  EXPECT_LE(worst, 2.0) << "the softmax error bound assumes at most kSoftmaxExpUlps = " << kSoftmaxExpUlps;
  EXPECT_EQ(pt::exp(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(pt::exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(pt::exp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(pt::exp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(pt::exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(pt::exp(-200.0f), 0.0f);
  // Subnormal results: rounded once, close to the true value.
  const float sub = pt::exp(-100.0f);
  EXPECT_GT(sub, 0.0f);
  EXPECT_LT(sub, std::numeric_limits<float>::min());
  EXPECT_NEAR(double(sub), std::exp(-100.0), std::ldexp(1.0, -149));
  EXPECT_EQ(pt::sigmoid(0.0f), 0.5f);
  EXPECT_EQ(pt::sigmoid(-120.0f), 0.0f);
  EXPECT_EQ(pt::sigmoid(120.0f), 1.0f);
}

// Spelled-out arithmetic: a padded tap is a term (0 * w), not a skipped one, so every output element of
// a convolution has the same term count; checked against a direct double evaluation of that definition.
TEST(Portable, ConvolutionSumsEveryTapOfThePaddedInput) {
  const ConvShape s = [] {
    ConvShape c;
    c.n = 2, c.c = 3, c.h = 7, c.w = 6, c.k = 4, c.r = 3, c.s = 3, c.stride = 2, c.pad = 1;
    return c;
  }();
  std::vector<float> x = test_support::uniform(s.x_size(), 11), w = test_support::uniform(s.w_size(), 12);
  std::vector<float> y(s.y_size());
  auto b = portable_backend(2, CpuIsa::kAuto);
  ASSERT_TRUE(b->conv2d_fwd(s, x.data(), w.data(), y.data()));
  // Fewer than kLeaf terms per element: one fma chain from +0 in (c, r, s) order.
  for (int n = 0; n < s.n; ++n)
    for (int k = 0; k < s.k; ++k)
      for (int p = 0; p < s.p(); ++p)
        for (int q = 0; q < s.q(); ++q) {
          float acc = 0.0f;
          for (int c = 0; c < s.c; ++c)
            for (int r = 0; r < s.r; ++r)
              for (int t = 0; t < s.s; ++t) {
                const int h = p * s.stride - s.pad + r, ww = q * s.stride - s.pad + t;
                const float xv = h >= 0 && h < s.h && ww >= 0 && ww < s.w ? x[((size_t(n) * s.c + c) * s.h + h) * s.w + ww] : 0.0f;
                acc = std::fma(xv, w[((size_t(k) * s.c + c) * s.r + r) * s.s + t], acc);
              }
          const float got = y[((size_t(n) * s.k + k) * s.p() + p) * s.q() + q];
          ASSERT_EQ(std::memcmp(&got, &acc, sizeof acc), 0) << n << k << p << q;
        }
}

// A sum of more than one leaf: leaves of kLeaf terms from +0, combined by the tree, not one long chain.
TEST(Portable, LongSumsAreLeavesCombinedByTheTree) {
  const size_t n = 5 * pt::kLeaf + 17;
  std::vector<float> x = test_support::uniform(n, 13);
  for (size_t i = 0; i < n; i += 3) x[i] *= 1e6f;  // a long chain and the tree then differ
  std::vector<float> leaves;
  for (size_t b = 0; b < n; b += pt::kLeaf) {
    float acc = 0.0f;
    for (size_t i = b; i < std::min(n, b + pt::kLeaf); ++i) acc = acc + x[i];
    leaves.push_back(acc);
  }
  // Six leaves: ((l0 + l1) + (l2 + l3)) + (l4 + l5).
  const float want = ((leaves[0] + leaves[1]) + (leaves[2] + leaves[3])) + (leaves[4] + leaves[5]);
  float chain = 0.0f;
  for (float v : x) chain = chain + v;
  ASSERT_NE(want, chain) << "the test needs inputs where the order shows";
  for (const auto& c : configurations()) {
    auto b = portable_backend(c.first, c.second);
    float got = 0;
    ASSERT_TRUE(b->reduce(ReduceOp::kSum, x.data(), nullptr, n, &got));
    EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << label(c);
  }
}

// The header's per-element convolutions over a whole shape: y, dx and dw, element by element.
void conv_references(const pt::Conv& g, const std::vector<float>& x, const std::vector<float>& w,
                     const std::vector<float>& dy, std::vector<float>* y, std::vector<float>* dx,
                     std::vector<float>* dw) {
  y->resize(size_t(g.n) * g.k * g.p * g.q);
  dx->resize(x.size());
  dw->resize(w.size());
  for (size_t e = 0; e < y->size(); ++e)
    (*y)[e] = pt::conv_fwd_at(g, x.data(), w.data(), int(e / (size_t(g.q) * g.p * g.k)),
                              int(e / (size_t(g.q) * g.p) % g.k), int(e / g.q % g.p), int(e % g.q));
  for (size_t e = 0; e < dx->size(); ++e)
    (*dx)[e] = pt::conv_bwd_data_at(g, dy.data(), w.data(), int(e / (size_t(g.w) * g.h * g.c)),
                                    int(e / (size_t(g.w) * g.h) % g.c), int(e / g.w % g.h), int(e % g.w));
  for (size_t e = 0; e < dw->size(); ++e)
    (*dw)[e] = pt::conv_bwd_filter_at(g, x.data(), dy.data(), int(e / (size_t(g.s) * g.r * g.c)),
                                      int(e / (size_t(g.s) * g.r) % g.c), int(e / g.s % g.r), int(e % g.s));
}

// The CPU computes several outputs in lockstep from padded and dilated copies; the GPU calls the header's
// per-element functions. Both must be the same definition: every pass against pt::*_at, element by
// element, on shapes with strides, padding, non-square filters, tails and sums of several leaves.
TEST(Portable, LockstepLoopsAreTheHeadersPerElementDefinition) {
  auto conv = [](int n, int c, int h, int w, int k, int r, int s, int stride, int pad) {
    ConvShape x;
    x.n = n, x.c = c, x.h = h, x.w = w, x.k = k, x.r = r, x.s = s, x.stride = stride, x.pad = pad;
    return x;
  };
  const ConvShape shapes[] = {conv(2, 3, 9, 11, 10, 3, 3, 2, 1), conv(1, 40, 6, 6, 3, 3, 3, 1, 1),
                              conv(3, 2, 12, 12, 9, 2, 3, 1, 0), conv(2, 5, 7, 10, 4, 3, 3, 3, 2)};
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (const ConvShape& sh : shapes) {
    const pt::Conv g{sh.n, sh.c, sh.h, sh.w, sh.k, sh.r, sh.s, sh.stride, sh.pad, sh.p(), sh.q()};
    std::vector<float> x = test_support::uniform(sh.x_size(), 21), w = test_support::uniform(sh.w_size(), 22),
                       dy = test_support::uniform(sh.y_size(), 23);
    std::vector<float> y_ref, dx_ref, dw_ref;
    conv_references(g, x, w, dy, &y_ref, &dx_ref, &dw_ref);
    for (const auto& c : configurations()) {
      auto b = portable_backend(c.first, c.second);
      std::vector<float> y(sh.y_size()), dx(sh.x_size()), dw(sh.w_size());
      ASSERT_TRUE(b->conv2d_fwd(sh, x.data(), w.data(), y.data()));
      ASSERT_TRUE(b->conv2d_bwd_data(sh, dy.data(), w.data(), dx.data()));
      ASSERT_TRUE(b->conv2d_bwd_filter(sh, x.data(), dy.data(), dw.data()));
      EXPECT_TRUE(same(y, y_ref)) << "fwd " << label(c) << " c=" << sh.c << " stride=" << sh.stride;
      EXPECT_TRUE(same(dx, dx_ref)) << "bwd_data " << label(c) << " c=" << sh.c << " stride=" << sh.stride;
      EXPECT_TRUE(same(dw, dw_ref)) << "bwd_filter " << label(c) << " c=" << sh.c << " stride=" << sh.stride;
    }
  }
  // Max pooling's gradient: non-overlapping windows (the CPU writes each window's maximum directly, an odd
  // last row and column in no window) and overlapping ones (summed over windows in order), with ties.
  for (auto [win, stride] : {std::pair{2, 2}, std::pair{3, 2}}) {
    PoolShape ps;
    ps.n = 2, ps.c = 3, ps.h = 7, ps.w = 9, ps.window = win, ps.stride = stride;
    std::vector<float> x = test_support::ints(ps.x_size(), 24), dy = test_support::uniform(ps.y_size(), 25);
    const pt::Pool g{ps.h, ps.w, ps.window, ps.stride, ps.p(), ps.q()};
    std::vector<float> ref(ps.x_size());
    const size_t hw = size_t(ps.h) * ps.w, pq = size_t(g.p) * g.q;
    for (size_t e = 0; e < ref.size(); ++e)
      ref[e] = pt::pool_bwd_at(g, x.data() + e / hw * hw, dy.data() + e / hw * pq, int(e % hw / ps.w), int(e % ps.w));
    for (const auto& c : configurations()) {
      auto b = portable_backend(c.first, c.second);
      std::vector<float> y(ps.y_size()), dx(ps.x_size(), 7.0f);
      ASSERT_TRUE(b->maxpool_fwd(ps, x.data(), y.data()));
      ASSERT_TRUE(b->maxpool_bwd(ps, x.data(), y.data(), dy.data(), dx.data()));
      EXPECT_TRUE(same(dx, ref)) << "maxpool bwd window " << win << " stride " << stride << " " << label(c);
    }
  }
  // gemm, every transpose, a tail of columns, three leaves of k, with and without beta; f64 too.
  const int m = 5, n = 13, k = 600;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 0.5f}) {
        std::vector<float> a = test_support::uniform(size_t(m) * k, 31), bm = test_support::uniform(size_t(k) * n, 32),
                           c0 = test_support::uniform(size_t(m) * n, 33);
        std::vector<double> a64(a.begin(), a.end()), b64(bm.begin(), bm.end()), c64(c0.begin(), c0.end());
        const int lda = ta ? m : k, ldb = tb ? k : n;
        std::vector<float> ref = c0;
        std::vector<double> ref64 = c64;
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            ref[size_t(i) * n + j] = pt::gemm_at<float>(ta, tb, k, 1.5f, a.data(), lda, bm.data(), ldb, beta,
                                                        &c0[size_t(i) * n + j], i, j);
            ref64[size_t(i) * n + j] = pt::gemm_at<double>(ta, tb, k, 1.5, a64.data(), lda, b64.data(), ldb, double(beta),
                                                           &c64[size_t(i) * n + j], i, j);
          }
        for (const auto& cf : configurations()) {
          auto be = portable_backend(cf.first, cf.second);
          std::vector<float> c = c0;
          std::vector<double> cc = c64;
          ASSERT_TRUE(be->gemm(ta ? Trans::kT : Trans::kN, tb ? Trans::kT : Trans::kN, m, n, k, 1.5f, a.data(), lda,
                               bm.data(), ldb, beta, c.data(), n));
          ASSERT_TRUE(be->gemm_f64(ta ? Trans::kT : Trans::kN, tb ? Trans::kT : Trans::kN, m, n, k, 1.5, a64.data(), lda,
                                   b64.data(), ldb, double(beta), cc.data(), n));
          EXPECT_TRUE(same(c, ref)) << "gemm ta=" << ta << " tb=" << tb << " beta=" << beta << " " << label(cf);
          EXPECT_EQ(std::memcmp(cc.data(), ref64.data(), cc.size() * sizeof(double)), 0)
              << "gemm f64 ta=" << ta << " tb=" << tb << " " << label(cf);
        }
      }
}

// The vector builds run gemm and the forward and filter-gradient convolutions through the packed,
// cache-blocked driver (several micro-tiles, A blocks and B panels, threads sharing tiles): on shapes
// large enough for all of that, with five leaves and ragged edges, every configuration still gives the
// header's per-element bits (the scalar build, which keeps the lockstep loops, included).
TEST(Portable, PackedDriverShapesAreTheHeadersPerElementDefinition) {
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  const int m = 67, n = 301, k = 1100;  // 5 leaves, the last of 76 terms
  for (bool ta : {false, true}) {
    const bool tb = !ta;
    std::vector<float> a = test_support::uniform(size_t(m) * k, 41), bm = test_support::uniform(size_t(k) * n, 42),
                       c0 = test_support::uniform(size_t(m) * n, 43);
    const int lda = ta ? m : k, ldb = tb ? k : n;
    for (float beta : {0.0f, -0.75f}) {
      std::vector<float> ref = c0;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
          ref[size_t(i) * n + j] =
              pt::gemm_at<float>(ta, tb, k, 0.5f, a.data(), lda, bm.data(), ldb, beta, &c0[size_t(i) * n + j], i, j);
      for (const auto& cf : configurations()) {
        auto be = portable_backend(cf.first, cf.second);
        std::vector<float> c = c0;
        ASSERT_TRUE(be->gemm(ta ? Trans::kT : Trans::kN, tb ? Trans::kT : Trans::kN, m, n, k, 0.5f, a.data(), lda,
                             bm.data(), ldb, beta, c.data(), n));
        EXPECT_TRUE(same(c, ref)) << "gemm ta=" << ta << " beta=" << beta << " " << label(cf);
      }
    }
  }
  // C*R*S = 64*9 = 576 terms (3 leaves) per output; K*R*S = 360 (2 leaves) per data gradient element;
  // N*P*Q = 3*13*13 = 507 terms (2 leaves) per filter element at stride 1, 3*7*7 at stride 2.
  for (int stride : {1, 2}) {
    ConvShape sh;
    sh.n = 3, sh.c = 64, sh.h = 13, sh.w = 13, sh.k = 40, sh.r = 3, sh.s = 3, sh.stride = stride, sh.pad = 1;
    const pt::Conv g{sh.n, sh.c, sh.h, sh.w, sh.k, sh.r, sh.s, sh.stride, sh.pad, sh.p(), sh.q()};
    std::vector<float> x = test_support::uniform(sh.x_size(), 44), w = test_support::uniform(sh.w_size(), 45),
                       dy = test_support::uniform(sh.y_size(), 46);
    std::vector<float> y_ref, dx_ref, dw_ref;
    conv_references(g, x, w, dy, &y_ref, &dx_ref, &dw_ref);
    for (const auto& cf : configurations()) {
      auto b = portable_backend(cf.first, cf.second);
      std::vector<float> y(sh.y_size()), dw(sh.w_size()), dx(sh.x_size()), yb(sh.y_size());
      ASSERT_TRUE(b->conv2d_fwd(sh, x.data(), w.data(), y.data()));
      ASSERT_TRUE(b->conv2d_bwd_filter(sh, x.data(), dy.data(), dw.data()));
      ASSERT_TRUE(b->conv2d_bwd_data(sh, dy.data(), w.data(), dx.data()));
      EXPECT_TRUE(same(y, y_ref)) << "fwd stride " << stride << " " << label(cf);
      EXPECT_TRUE(same(dx, dx_ref)) << "bwd_data stride " << stride << " " << label(cf);
      // With a bias: the forward's bits, then one rounded add per element.
      ASSERT_TRUE(b->conv2d_fwd_bias(sh, x.data(), w.data(), w.data(), yb.data()));
      const size_t pq = size_t(sh.p()) * sh.q();
      std::vector<float> yb_ref(yb.size());
      for (size_t e = 0; e < yb.size(); ++e) yb_ref[e] = pt::add(y_ref[e], w[e / pq % sh.k]);
      EXPECT_TRUE(same(yb, yb_ref)) << "fwd bias stride " << stride << " " << label(cf);
      EXPECT_TRUE(same(dw, dw_ref)) << "bwd_filter stride " << stride << " " << label(cf);
    }
  }
}

// The elementwise training ops the CPU runs through shared host loops (upsampling, bias, relu both
// ways): the header's per-element functions, bit for bit, signed zeros and NaN included.
TEST(Portable, ElementwiseOpsAreTheHeadersPerElementDefinition) {
  const int planes = 6, h = 5, w = 7;
  const size_t hw = size_t(h) * w;
  std::vector<float> x = test_support::uniform(planes * hw, 51), dy4 = test_support::uniform(planes * hw * 4, 52);
  x[0] = -0.0f, x[1] = std::nanf(""), x[2] = 0.0f, dy4[3] = -0.0f;
  std::vector<float> up_ref(planes * hw * 4), dx_ref(planes * hw), bias_ref(x.size()), relu_ref(x.size()),
      relub_ref(x.size());
  const std::vector<float> bias = {0.5f, -0.25f, 3.0f};  // 3 channels, 2 images
  for (size_t i = 0; i < up_ref.size(); ++i) {
    const size_t p = i / (4 * hw), r = i % (4 * hw) / (2 * w), q = i % (2 * w);
    up_ref[i] = x[(p * h + r / 2) * w + q / 2];
  }
  for (size_t i = 0; i < dx_ref.size(); ++i)
    dx_ref[i] = pt::upsample2_bwd_at(dy4.data() + i / hw * 4 * hw, w, int(i % hw / w), int(i % w));
  for (size_t i = 0; i < x.size(); ++i) {
    bias_ref[i] = pt::add(x[i], bias[i / hw % 3]);
    relu_ref[i] = pt::relu(x[i]);
    relub_ref[i] = pt::relu_bwd(x[i], dy4[i]);
  }
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (const auto& cf : configurations()) {
    auto b = portable_backend(cf.first, cf.second);
    std::vector<float> up(up_ref.size()), dx(dx_ref.size()), yb = x, r(x.size()), rb(x.size());
    ASSERT_TRUE(b->upsample2_fwd(x.data(), up.data(), planes, h, w));
    ASSERT_TRUE(b->upsample2_bwd(dy4.data(), dx.data(), planes, h, w));
    ASSERT_TRUE(b->bias_add(yb.data(), bias.data(), 2, 3, hw));
    ASSERT_TRUE(b->unary(UnaryOp::kRelu, x.data(), r.data(), x.size()));
    ASSERT_TRUE(b->unary_bwd(UnaryOp::kRelu, x.data(), r.data(), dy4.data(), rb.data(), x.size()));
    EXPECT_TRUE(same(up, up_ref)) << "upsample2 fwd " << label(cf);
    EXPECT_TRUE(same(dx, dx_ref)) << "upsample2 bwd " << label(cf);
    EXPECT_TRUE(same(yb, bias_ref)) << "bias_add " << label(cf);
    EXPECT_TRUE(same(r, relu_ref)) << "relu " << label(cf);
    EXPECT_TRUE(same(rb, relub_ref)) << "relu bwd " << label(cf);
  }
  // The bias gradient: per channel, one tree sum over its terms image after image (here 3 x 1100 terms:
  // twelve whole leaves and a partial one).
  const size_t bn = 3, bc = 2, bhw = 1100;
  std::vector<float> g = test_support::uniform(bn * bc * bhw, 53), db_ref(bc);
  for (size_t j = 0; j < bc; ++j) {
    pt::TreeSum<float> t;
    for (size_t i = 0; i < bn; ++i)
      for (size_t l = 0; l < bhw; ++l) t.term(g[(i * bc + j) * bhw + l]);
    db_ref[j] = t.result();
  }
  for (const auto& cf : configurations()) {
    std::vector<float> db(bc);
    ASSERT_TRUE(portable_backend(cf.first, cf.second)->bias_grad(g.data(), db.data(), bn, bc, bhw));
    EXPECT_TRUE(same(db, db_ref)) << "bias_grad " << label(cf);
  }
}

// Through the probe: two portable targets (2 threads at the widest ISA; 1 thread, scalar) on the quick
// suite are one equality class, deterministic, and within every oracle error bound: all PASS, exit 0.
TEST(Portable, QuickSuiteProbePassesAsOneEqualityClass) {
  namespace fs = std::filesystem;
  const fs::path dir = cli_test::fresh_dir("portable-probe");
  const cli_test::CliRun r = cli_test::run_cli(
      "probe --suite quick --targets 'cpu?order=portable&threads=2,cpu?order=portable&threads=1&isa=scalar' "
      "--repeats 2 --no-history --out " + dir.string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verdicts: 26 PASS, 0 FAIL, 0 EXPECTED, 0 WARN, 0 SKIP"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(Portable, SpecsPromisesAndRefusals) {
  Spec t;
  std::string err;
  ASSERT_TRUE(succeeded(parse_target("cpu?order=portable&threads=4", &t), &err)) << err;
  EXPECT_EQ(t.str(), "cpu?order=portable&threads=4&isa=auto");
  BackendOr made = make_target_backend(t);
  ASSERT_TRUE(made) << made.message();
  std::unique_ptr<Backend> b = std::move(made).value();
  EXPECT_EQ(b->name(), "cpu?order=portable&threads=4");
  std::vector<float> x(8, 1.0f), y(8);
  EXPECT_EQ(b->unary(UnaryOp::kTanh, x.data(), y.data(), 8).code(), Status::Code::kUnsupported);
  EXPECT_EQ(b->unary_bwd(UnaryOp::kExp, x.data(), x.data(), x.data(), y.data(), 8).code(), Status::Code::kUnsupported);
}

}  // namespace
}  // namespace detaudit
