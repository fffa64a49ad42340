// cpu (native) against cpu-ref: every op x every order x 1 and 2 threads. Bitwise on small-integer
// inputs (every partial sum is then exact in float, so any order gives the exact result), within
// tol + |ref|*eps on random inputs. Plus the determinism properties each order promises, the forced
// atomic orders, and identical bits on every ISA path. Nothing here depends on thread timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/native.hpp"
#include "kernels/cpu/native_gemm.hpp"
#include "kernels/cpu/native_kernels.hpp"
#include "kernels/cpu/ref.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace detaudit {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: inputs are a pure function of (seed, index)
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// Integers in [lo, hi].
std::vector<float> ints(size_t n, uint64_t seed, int lo = -4, int hi = 4) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(lo + int(mix(seed * 1000003 + i) % uint64_t(hi - lo + 1)));
  return v;
}
// Uniform in [lo, hi).
std::vector<float> uniform(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * float(mix(seed * 1000003 + i) >> 40) * 0x1p-24f;
  return v;
}

::testing::AssertionResult bitwise_equal(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0) return ::testing::AssertionSuccess();
  auto f = ::testing::AssertionFailure();
  int shown = 0;
  for (size_t i = 0; i < got.size() && shown < 5; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      f << "[" << i << "] got " << got[i] << " want " << want[i] << "; ";
      ++shown;
    }
  return f;
}

// |got - ref| <= tol + |ref|*eps; non-finite references are skipped (llm.c style).
::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& ref, double tol, double eps) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "sizes differ";
  auto f = ::testing::AssertionFailure();
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(ref[i])) continue;
    if (std::fabs(double(got[i]) - ref[i]) > tol + std::fabs(double(ref[i])) * eps) {
      if (bad < 5) f << "[" << i << "] got " << got[i] << " ref " << ref[i] << "; ";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return f << bad << " of " << got.size() << " outside tolerance";
}

// ---- op runners: the same call on any backend, returning the output ------------------------------

struct GemmCase {
  Trans ta, tb;
  int m, n, k;
  float alpha, beta;
};

struct GemmData {
  std::vector<float> a, b, c0;
  int lda, ldb, ldc;
};

// Storage with padded leading dimensions; padding holds NaN so that reading it would show.
GemmData make_gemm_data(const GemmCase& g, bool integers, uint64_t seed) {
  GemmData d;
  const int ar = g.ta == Trans::kN ? g.m : g.k, ac = g.ta == Trans::kN ? g.k : g.m;
  const int br = g.tb == Trans::kN ? g.k : g.n, bc = g.tb == Trans::kN ? g.n : g.k;
  d.lda = ac + 3, d.ldb = bc + 1, d.ldc = g.n + 2;
  auto gen = [&](size_t n, uint64_t s) { return integers ? ints(n, s) : uniform(n, s); };
  auto pad = [](std::vector<float> v, int rows, int cols, int ld) {
    std::vector<float> out(size_t(std::max(rows, 1)) * ld, kNaN);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) out[size_t(i) * ld + j] = v[size_t(i) * cols + j];
    return out;
  };
  d.a = pad(gen(size_t(ar) * ac, seed), ar, ac, d.lda);
  d.b = pad(gen(size_t(br) * bc, seed + 1), br, bc, d.ldb);
  d.c0 = pad(gen(size_t(g.m) * g.n, seed + 2), g.m, g.n, d.ldc);
  if (g.beta == 0.0f)  // beta == 0: C must not be read
    for (int i = 0; i < g.m; ++i)
      for (int j = 0; j < g.n; ++j) d.c0[size_t(i) * d.ldc + j] = kNaN;
  return d;
}

std::vector<float> run_gemm(Backend& be, const GemmCase& g, const GemmData& d) {
  std::vector<float> c = d.c0;
  Status st = be.gemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, d.a.data(), d.lda, d.b.data(), d.ldb, g.beta, c.data(), d.ldc);
  EXPECT_TRUE(st) << be.name() << ": " << st.message();
  return c;
}

enum class ConvPass { kFwd, kBwdData, kBwdFilter };
const char* pass_name(ConvPass p) {
  return p == ConvPass::kFwd ? "fwd" : p == ConvPass::kBwdData ? "bwd_data" : "bwd_filter";
}

std::vector<float> run_conv(Backend& be, ConvPass pass, const ConvShape& s, bool integers, uint64_t seed) {
  auto gen = [&](size_t n, uint64_t sd) { return integers ? ints(n, sd) : uniform(n, sd); };
  std::vector<float> x = gen(s.x_size(), seed), w = gen(s.w_size(), seed + 1), dy = gen(s.y_size(), seed + 2);
  std::vector<float> out;
  Status st;
  switch (pass) {
    case ConvPass::kFwd:
      out.assign(s.y_size(), kNaN);
      st = be.conv2d_fwd(s, x.data(), w.data(), out.data());
      break;
    case ConvPass::kBwdData:
      out.assign(s.x_size(), kNaN);
      st = be.conv2d_bwd_data(s, dy.data(), w.data(), out.data());
      break;
    case ConvPass::kBwdFilter:
      out.assign(s.w_size(), kNaN);
      st = be.conv2d_bwd_filter(s, x.data(), dy.data(), out.data());
      break;
  }
  EXPECT_TRUE(st) << be.name() << " " << pass_name(pass) << ": " << st.message();
  return out;
}

float run_reduce(Backend& be, ReduceOp op, const std::vector<float>& x, const std::vector<float>& y) {
  float out = kNaN;
  Status st = be.reduce(op, x.data(), y.data(), x.size(), &out);
  EXPECT_TRUE(st) << be.name() << ": " << st.message();
  return out;
}

std::vector<float> run_softmax(Backend& be, const std::vector<float>& x, size_t rows, size_t cols) {
  std::vector<float> y(x.size(), kNaN);
  Status st = be.softmax(x.data(), y.data(), rows, cols);
  EXPECT_TRUE(st) << be.name() << ": " << st.message();
  return y;
}

ConvShape conv_shape(int n, int c, int h, int w, int k, int r, int s, int stride, int pad) {
  ConvShape sh;
  sh.n = n, sh.c = c, sh.h = h, sh.w = w, sh.k = k, sh.r = r, sh.s = s, sh.stride = stride, sh.pad = pad;
  return sh;
}

// Shapes that cross every blocking edge: partial micro-tiles, K above one kc block (256), odd sizes.
const std::vector<GemmCase>& gemm_shapes() {
  static const std::vector<GemmCase> shapes = {
      {Trans::kN, Trans::kN, 1, 1, 1, 1, 0},   {Trans::kN, Trans::kN, 13, 35, 7, 1, 0},
      {Trans::kN, Trans::kN, 37, 70, 600, 1, 0}, {Trans::kN, Trans::kN, 100, 33, 1030, 1, 0},
      {Trans::kN, Trans::kN, 5, 300, 257, 1, 0}, {Trans::kN, Trans::kN, 4, 5, 0, 1, 0},
  };
  return shapes;
}

const std::vector<ConvShape>& conv_shapes() {
  static const std::vector<ConvShape> shapes = {
      conv_shape(2, 3, 7, 6, 4, 3, 3, 1, 1),    // same padding
      conv_shape(2, 2, 9, 8, 3, 3, 2, 2, 0),    // stride 2, rectangular filter
      conv_shape(3, 4, 5, 5, 5, 1, 1, 1, 0),    // 1x1: im2col skipped
      conv_shape(1, 3, 6, 6, 2, 5, 5, 2, 2),    // large window, stride and pad
      conv_shape(4, 32, 12, 12, 8, 3, 3, 1, 1), // C*R*S = 288 and N*P*Q = 576: several kc blocks
  };
  return shapes;
}

struct Config {
  ReduceOrder order;
  int threads;
};

class NativeVsRef : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    CpuNativeOptions o;
    o.order = GetParam().order;
    o.threads = GetParam().threads;
    native = make_cpu_native(o);
  }
  // Run-to-run determinism is promised by every order except atomic with more than one thread.
  bool promises_determinism() const { return !(GetParam().order == ReduceOrder::kAtomic && GetParam().threads > 1); }

  std::unique_ptr<Backend> native;
  std::unique_ptr<Backend> ref = make_cpu_ref();
};

TEST_P(NativeVsRef, NameAndDetails) {
  std::string want = std::string("cpu?order=") + to_string(GetParam().order) + "&threads=" +
                     std::to_string(GetParam().threads);
  EXPECT_EQ(native->name(), want);
  auto d = native->details();
  ASSERT_GE(d.size(), 3u);
  EXPECT_EQ(d[0], (std::pair<std::string, std::string>{"order", to_string(GetParam().order)}));
  EXPECT_EQ(d[1], (std::pair<std::string, std::string>{"threads", std::to_string(GetParam().threads)}));
  EXPECT_EQ(d[2].first, "isa");
  EXPECT_NE(d[2].second.find_first_of("as"), std::string::npos);  // avx512, avx2 or scalar
}

TEST_P(NativeVsRef, GemmExactOnIntegers) {
  uint64_t seed = 1;
  for (GemmCase g : gemm_shapes())
    for (Trans ta : {Trans::kN, Trans::kT})
      for (Trans tb : {Trans::kN, Trans::kT})
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{2.0f, -1.0f}}) {
          g.ta = ta, g.tb = tb, g.alpha = alpha, g.beta = beta;
          GemmData d = make_gemm_data(g, true, seed++);
          EXPECT_TRUE(bitwise_equal(run_gemm(*native, g, d), run_gemm(*ref, g, d)))
              << "m=" << g.m << " n=" << g.n << " k=" << g.k << " ta=" << int(ta) << " tb=" << int(tb)
              << " alpha=" << alpha << " beta=" << beta;
        }
}

TEST_P(NativeVsRef, GemmCloseOnRandom) {
  uint64_t seed = 100;
  for (GemmCase g : {GemmCase{Trans::kN, Trans::kN, 64, 80, 700, 1.5f, 0.5f},
                     GemmCase{Trans::kT, Trans::kT, 129, 67, 300, 1.0f, 0.0f},
                     GemmCase{Trans::kT, Trans::kN, 31, 200, 1500, -0.5f, 2.0f}}) {
    GemmData d = make_gemm_data(g, false, seed++);
    EXPECT_TRUE(close(run_gemm(*native, g, d), run_gemm(*ref, g, d), 1e-4, 1e-4)) << "k=" << g.k;
  }
}

TEST_P(NativeVsRef, ConvExactOnIntegers) {
  uint64_t seed = 7;
  for (const ConvShape& s : conv_shapes())
    for (ConvPass pass : {ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdFilter}) {
      EXPECT_TRUE(bitwise_equal(run_conv(*native, pass, s, true, seed), run_conv(*ref, pass, s, true, seed)))
          << pass_name(pass) << " n=" << s.n << " c=" << s.c << " h=" << s.h << " k=" << s.k << " r=" << s.r
          << " stride=" << s.stride << " pad=" << s.pad;
      ++seed;
    }
}

TEST_P(NativeVsRef, ConvCloseOnRandom) {
  const ConvShape s = conv_shape(3, 16, 10, 9, 6, 3, 3, 2, 1);
  for (ConvPass pass : {ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdFilter})
    EXPECT_TRUE(close(run_conv(*native, pass, s, false, 9), run_conv(*ref, pass, s, false, 9), 1e-5, 1e-4))
        << pass_name(pass);
}

TEST_P(NativeVsRef, ReduceExactOnIntegers) {
  // |sum| stays below 2^24 (values in [-4, 4], squares up to 16), so every order is exact.
  for (size_t n : {0, 1, 63, 64, 65, 1000, 1024, 1025, 5000, 100003}) {
    std::vector<float> x = ints(n, n + 1), y = ints(n, n + 2);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2}) {
      float got = run_reduce(*native, op, x, y), want = run_reduce(*ref, op, x, y);
      EXPECT_TRUE(bitwise_equal({got}, {want})) << to_string(op) << " n=" << n;
    }
  }
}

TEST_P(NativeVsRef, ReduceCloseOnRandom) {
  const size_t n = 100003;
  std::vector<float> x = uniform(n, 5), y = uniform(n, 6);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2}) {
    float got = run_reduce(*native, op, x, y), want = run_reduce(*ref, op, x, y);
    EXPECT_TRUE(close({got}, {want}, 1e-2, 1e-4)) << to_string(op);
  }
}

TEST_P(NativeVsRef, SoftmaxCloseOnRandom) {
  for (auto [rows, cols] : {std::pair<size_t, size_t>{3, 1000}, {64, 37}, {1, 5000}, {5, 1}}) {
    std::vector<float> x = uniform(rows * cols, rows + cols, -8.0f, 8.0f);
    EXPECT_TRUE(close(run_softmax(*native, x, rows, cols), run_softmax(*ref, x, rows, cols), 1e-7, 1e-5))
        << rows << "x" << cols;
  }
}

TEST_P(NativeVsRef, SoftmaxExactOnConstantRows) {
  // Every exp is 1 and the row sum is exact, so y = 1/cols with one rounding on both sides.
  for (auto [rows, cols] : {std::pair<size_t, size_t>{4, 3000}, {1, 7}}) {
    std::vector<float> x(rows * cols);
    for (size_t r = 0; r < rows; ++r)
      for (size_t j = 0; j < cols; ++j) x[r * cols + j] = float(r) - 2.0f;
    EXPECT_TRUE(bitwise_equal(run_softmax(*native, x, rows, cols), run_softmax(*ref, x, rows, cols)));
  }
}

TEST_P(NativeVsRef, ElementwiseExactOnIntegers) {
  const size_t n = 100000;  // above the threshold where elementwise ops use the threads
  std::vector<float> a = ints(n, 11), b = ints(n, 12, 1, 4), y0 = ints(n, 13);
  for (size_t i = 0; i < n; i += 2) b[i] = -b[i];  // nonzero divisors of both signs
  for (UnaryOp op : {UnaryOp::kCopy, UnaryOp::kRelu, UnaryOp::kNeg, UnaryOp::kSquare}) {
    std::vector<float> got(n), want(n);
    ASSERT_TRUE(native->unary(op, a.data(), got.data(), n));
    ASSERT_TRUE(ref->unary(op, a.data(), want.data(), n));
    EXPECT_TRUE(bitwise_equal(got, want)) << to_string(op);
  }
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv, BinaryOp::kMax, BinaryOp::kMin}) {
    std::vector<float> got(n), want(n);
    ASSERT_TRUE(native->binary(op, a.data(), b.data(), got.data(), n));
    ASSERT_TRUE(ref->binary(op, a.data(), b.data(), want.data(), n));
    EXPECT_TRUE(bitwise_equal(got, want)) << to_string(op);
  }
  std::vector<float> got = y0, want = y0;
  ASSERT_TRUE(native->axpy(n, -3.0f, a.data(), got.data()));
  ASSERT_TRUE(ref->axpy(n, -3.0f, a.data(), want.data()));
  EXPECT_TRUE(bitwise_equal(got, want)) << "axpy";
}

TEST_P(NativeVsRef, ElementwiseCloseOnRandom) {
  const size_t n = 70001;
  std::vector<float> a = uniform(n, 21, -6.0f, 6.0f);
  for (UnaryOp op : {UnaryOp::kSigmoid, UnaryOp::kTanh, UnaryOp::kHardSigmoid, UnaryOp::kExp}) {
    std::vector<float> got(n), want(n);
    ASSERT_TRUE(native->unary(op, a.data(), got.data(), n));
    ASSERT_TRUE(ref->unary(op, a.data(), want.data(), n));
    EXPECT_TRUE(close(got, want, 2e-7, 4e-7)) << to_string(op);
  }
  std::vector<float> x = uniform(n, 22), got = uniform(n, 23), want = got;
  ASSERT_TRUE(native->axpy(n, 0.37f, x.data(), got.data()));
  ASSERT_TRUE(ref->axpy(n, 0.37f, x.data(), want.data()));
  EXPECT_TRUE(close(got, want, 0, 1e-7)) << "axpy";
}

TEST_P(NativeVsRef, MaxPoolExactOnIntegers) {
  for (auto [window, stride] : {std::pair{2, 2}, std::pair{3, 1}}) {
    PoolShape s;
    s.n = 2, s.c = 3, s.h = 9, s.w = 8, s.window = window, s.stride = stride;
    std::vector<float> x = ints(s.x_size(), 91), dy = ints(s.y_size(), 92);
    std::vector<float> y1(s.y_size()), y2(s.y_size()), dx1(s.x_size()), dx2(s.x_size());
    ASSERT_TRUE(native->maxpool_fwd(s, x.data(), y1.data()));
    ASSERT_TRUE(ref->maxpool_fwd(s, x.data(), y2.data()));
    EXPECT_TRUE(bitwise_equal(y1, y2));
    ASSERT_TRUE(native->maxpool_bwd(s, x.data(), y1.data(), dy.data(), dx1.data()));
    ASSERT_TRUE(ref->maxpool_bwd(s, x.data(), y2.data(), dy.data(), dx2.data()));
    EXPECT_TRUE(bitwise_equal(dx1, dx2)) << "window " << window << " stride " << stride;
  }
}

// The 2x2 stride-2 pooling runs branch-free code of its own; cpu-ref runs the general loops. They must
// agree bit for bit on ties, NaN (first position or later), signed zeros, infinities, odd sizes, rows
// longer than one vector and a -0 gradient.
TEST_P(NativeVsRef, MaxPool2x2AgreesWithTheGeneralLoopsOnSpecialValues) {
  PoolShape s;
  s.n = 3, s.c = 2, s.h = 7, s.w = 39, s.window = 2, s.stride = 2;  // 19 windows a row: 16, then 3 masked
  const float specials[] = {kNaN, -0.0f, 0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 1.0f};
  std::vector<float> x = ints(s.x_size(), 93), dy = ints(s.y_size(), 94);
  for (size_t i = 0; i < x.size(); ++i)
    if (mix(i + 7) % 3 == 0) x[i] = specials[mix(i) % 6];
  for (size_t i = 0; i < dy.size(); i += 5) dy[i] = -0.0f;
  std::vector<float> y1(s.y_size()), y2(s.y_size()), dx1(s.x_size(), kNaN), dx2(s.x_size(), kNaN);
  ASSERT_TRUE(native->maxpool_fwd(s, x.data(), y1.data()));
  ASSERT_TRUE(ref->maxpool_fwd(s, x.data(), y2.data()));
  EXPECT_TRUE(bitwise_equal(y1, y2)) << "forward";
  ASSERT_TRUE(native->maxpool_bwd(s, x.data(), y1.data(), dy.data(), dx1.data()));
  ASSERT_TRUE(ref->maxpool_bwd(s, x.data(), y2.data(), dy.data(), dx2.data()));
  EXPECT_TRUE(bitwise_equal(dx1, dx2)) << "backward";
}

TEST_P(NativeVsRef, RunTwiceSameBits) {
  if (!promises_determinism()) GTEST_SKIP() << "order=atomic with threads > 1 promises no run-to-run determinism";
  GemmCase g{Trans::kN, Trans::kT, 70, 90, 1100, 1.0f, 0.0f};
  GemmData d = make_gemm_data(g, false, 31);
  EXPECT_TRUE(bitwise_equal(run_gemm(*native, g, d), run_gemm(*native, g, d)));
  const ConvShape s = conv_shape(4, 8, 12, 12, 8, 3, 3, 1, 1);
  EXPECT_TRUE(bitwise_equal(run_conv(*native, ConvPass::kBwdFilter, s, false, 3),
                            run_conv(*native, ConvPass::kBwdFilter, s, false, 3)));
  std::vector<float> x = uniform(300007, 8);
  EXPECT_TRUE(bitwise_equal({run_reduce(*native, ReduceOp::kSum, x, x)}, {run_reduce(*native, ReduceOp::kSum, x, x)}));
  EXPECT_TRUE(bitwise_equal(run_softmax(*native, x, 7, 300007 / 7), run_softmax(*native, x, 7, 300007 / 7)));
}

INSTANTIATE_TEST_SUITE_P(AllOrders, NativeVsRef,
                         ::testing::Values(Config{ReduceOrder::kSequential, 1}, Config{ReduceOrder::kSequential, 2},
                                           Config{ReduceOrder::kPairwise, 1}, Config{ReduceOrder::kPairwise, 2},
                                           Config{ReduceOrder::kBlocked, 1}, Config{ReduceOrder::kBlocked, 2},
                                           Config{ReduceOrder::kAtomic, 1}, Config{ReduceOrder::kAtomic, 2}),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return std::string(to_string(info.param.order)) + "_t" + std::to_string(info.param.threads);
                         });

std::unique_ptr<Backend> native_backend(ReduceOrder order, int threads, uint64_t seed = 0,
                                        CpuIsa isa = CpuIsa::kAuto) {
  CpuNativeOptions o;
  o.order = order;
  o.threads = threads;
  o.forced_atomic_order_seed = seed;
  o.isa = isa;
  return make_cpu_native(o);
}

// ---- what each order promises about threads --------------------------------------------------------

TEST(NativeOrders, SequentialAndPairwiseBitsIndependentOfThreads) {
  GemmCase g{Trans::kT, Trans::kN, 50, 77, 1300, 1.0f, 0.0f};
  GemmData d = make_gemm_data(g, false, 41);
  const ConvShape s = conv_shape(3, 6, 11, 11, 5, 3, 3, 1, 1);
  std::vector<float> x = uniform(250001, 42);
  for (ReduceOrder order : {ReduceOrder::kSequential, ReduceOrder::kPairwise}) {
    auto one = native_backend(order, 1);
    for (int threads : {2, 3}) {
      auto many = native_backend(order, threads);
      EXPECT_TRUE(bitwise_equal(run_gemm(*one, g, d), run_gemm(*many, g, d))) << to_string(order) << threads;
      EXPECT_TRUE(bitwise_equal(run_conv(*one, ConvPass::kBwdFilter, s, false, 1),
                                run_conv(*many, ConvPass::kBwdFilter, s, false, 1)))
          << to_string(order) << threads;
      EXPECT_TRUE(bitwise_equal({run_reduce(*one, ReduceOp::kDot, x, x)}, {run_reduce(*many, ReduceOp::kDot, x, x)}))
          << to_string(order) << threads;
      EXPECT_TRUE(bitwise_equal(run_softmax(*one, x, 1, x.size()), run_softmax(*many, x, 1, x.size())))
          << to_string(order) << threads;
    }
  }
}

TEST(NativeOrders, BlockedGemmWithOneThreadIsSequential) {
  GemmCase g{Trans::kN, Trans::kN, 40, 50, 2000, 1.0f, 0.0f};
  GemmData d = make_gemm_data(g, false, 43);
  EXPECT_TRUE(bitwise_equal(run_gemm(*native_backend(ReduceOrder::kBlocked, 1), g, d),
                            run_gemm(*native_backend(ReduceOrder::kSequential, 1), g, d)));
}

TEST(NativeOrders, SoftmaxRowsSpreadOverThreadsMatchOneRowManyThreads) {
  // With rows >= threads, rows go to threads and each row's sum is computed as the order's threads
  // would; with one row the threads share it. Both must give the same bits.
  std::vector<float> x = uniform(3 * 20000, 44, -4.0f, 4.0f);
  for (ReduceOrder order : {ReduceOrder::kPairwise, ReduceOrder::kBlocked}) {
    auto be = native_backend(order, 2);
    std::vector<float> all = run_softmax(*be, x, 3, 20000);
    for (size_t r = 0; r < 3; ++r) {
      std::vector<float> row(x.begin() + r * 20000, x.begin() + (r + 1) * 20000);
      std::vector<float> want(all.begin() + r * 20000, all.begin() + (r + 1) * 20000);
      EXPECT_TRUE(bitwise_equal(run_softmax(*be, row, 1, 20000), want)) << to_string(order) << " row " << r;
    }
  }
}

// ---- a convolution is its im2col gemm, bit for bit --------------------------------------------------

// col[(c*R + r)*S + s][p*Q + q] = x[c][p*stride - pad + r][q*stride - pad + s] (0 outside) of image i.
std::vector<float> im2col(const ConvShape& sh, const std::vector<float>& x, int i) {
  const int P = sh.p(), Q = sh.q();
  std::vector<float> col(size_t(sh.c) * sh.r * sh.s * P * Q, 0.0f);
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r)
      for (int s = 0; s < sh.s; ++s)
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q) {
            const int h = p * sh.stride - sh.pad + r, w = q * sh.stride - sh.pad + s;
            if (h >= 0 && h < sh.h && w >= 0 && w < sh.w)
              col[((size_t(c) * sh.r + r) * sh.s + s) * P * Q + size_t(p) * Q + q] =
                  x[((size_t(i) * sh.c + c) * sh.h + h) * sh.w + w];
          }
  return col;
}

// The cpu backend's convolutions skip im2col (padded images, weights packed once, image rows read in
// place); each output element must still be exactly the im2col gemm's reduction in the same order:
// forward y_n = W[K x CRS] col_n (plus the bias, folded into the output pass), backward-filter dw = dy'[K x NPQ] col'^T over all images, and
// backward-data (stride 1) the forward convolution with the flipped, transposed filter. Checked on
// the autoencoder's shapes and the edge shapes, in every deterministic order and a forced atomic one.
TEST(NativeConv, EachPassIsItsGemmBitForBit) {
  std::vector<ConvShape> shapes = conv_shapes();
  for (ConvShape s : {conv_shape(3, 1, 28, 28, 16, 3, 3, 1, 1), conv_shape(3, 16, 14, 14, 32, 3, 3, 1, 1),
                      conv_shape(3, 32, 14, 14, 16, 3, 3, 1, 1), conv_shape(3, 16, 28, 28, 1, 3, 3, 1, 1),
                      conv_shape(2, 13, 9, 17, 14, 3, 3, 1, 1)})
    shapes.push_back(s);
  struct Variant {
    ReduceOrder order;
    int threads;
    uint64_t seed;
  };
  for (Variant v : {Variant{ReduceOrder::kSequential, 2, 0}, Variant{ReduceOrder::kPairwise, 2, 0},
                    Variant{ReduceOrder::kBlocked, 1, 0}, Variant{ReduceOrder::kBlocked, 2, 0},
                    Variant{ReduceOrder::kBlocked, 3, 0}, Variant{ReduceOrder::kAtomic, 2, 5}}) {
    auto be = native_backend(v.order, v.threads, v.seed);
    uint64_t seed = 300;
    for (const ConvShape& s : shapes) {
      const std::string what = be->name() + " n=" + std::to_string(s.n) + " c=" + std::to_string(s.c) +
                               " h=" + std::to_string(s.h) + " k=" + std::to_string(s.k) +
                               " stride=" + std::to_string(s.stride) + " pad=" + std::to_string(s.pad);
      const int crs = s.c * s.r * s.s, pq = s.p() * s.q(), npq = s.n * pq;
      std::vector<float> x = uniform(s.x_size(), seed), w = uniform(s.w_size(), seed + 1),
                         dy = uniform(s.y_size(), seed + 2);
      seed += 3;
      std::vector<std::vector<float>> cols;
      for (int i = 0; i < s.n; ++i) cols.push_back(im2col(s, x, i));

      std::vector<float> y(s.y_size(), kNaN), want(s.y_size(), kNaN);
      ASSERT_TRUE(be->conv2d_fwd(s, x.data(), w.data(), y.data()));
      for (int i = 0; i < s.n; ++i)
        ASSERT_TRUE(be->gemm(Trans::kN, Trans::kN, s.k, pq, crs, 1.0f, w.data(), crs, cols[i].data(), pq, 0.0f,
                             want.data() + size_t(i) * s.k * pq, pq));
      EXPECT_TRUE(bitwise_equal(y, want)) << "fwd " << what;
      // The bias folded into the output pass: the bits of conv2d_fwd then bias_add.
      std::vector<float> bias = uniform(size_t(s.k), seed), yb(s.y_size(), kNaN);
      ASSERT_TRUE(be->conv2d_fwd_bias(s, x.data(), w.data(), bias.data(), yb.data()));
      ASSERT_TRUE(be->bias_add(want.data(), bias.data(), size_t(s.n), size_t(s.k), size_t(pq)));
      EXPECT_TRUE(bitwise_equal(yb, want)) << "fwd with bias " << what;

      // dy'[k][i*PQ + pq] = dy[i][k][pq]; col'[crs][i*PQ + pq] = col_i[crs][pq].
      std::vector<float> dyp(size_t(s.k) * npq), colp(size_t(crs) * npq);
      for (int i = 0; i < s.n; ++i) {
        for (int k = 0; k < s.k; ++k)
          std::copy_n(dy.begin() + (size_t(i) * s.k + k) * pq, pq, dyp.begin() + size_t(k) * npq + size_t(i) * pq);
        for (int j = 0; j < crs; ++j)
          std::copy_n(cols[i].begin() + size_t(j) * pq, pq, colp.begin() + size_t(j) * npq + size_t(i) * pq);
      }
      std::vector<float> dw(s.w_size(), kNaN), dw_want(s.w_size(), kNaN);
      ASSERT_TRUE(be->conv2d_bwd_filter(s, x.data(), dy.data(), dw.data()));
      ASSERT_TRUE(be->gemm(Trans::kN, Trans::kT, s.k, crs, npq, 1.0f, dyp.data(), npq, colp.data(), npq, 0.0f,
                           dw_want.data(), crs));
      EXPECT_TRUE(bitwise_equal(dw, dw_want)) << "bwd_filter " << what;

      if (s.stride == 1 && s.r == s.s && s.pad <= s.r - 1) {
        ConvShape t = conv_shape(s.n, s.k, s.p(), s.q(), s.c, s.r, s.s, 1, s.r - 1 - s.pad);
        std::vector<float> wt(s.w_size());
        for (int k = 0; k < s.k; ++k)
          for (int c = 0; c < s.c; ++c)
            for (int r = 0; r < s.r; ++r)
              for (int q = 0; q < s.s; ++q)
                wt[((size_t(c) * s.k + k) * s.r + r) * s.s + q] =
                    w[((size_t(k) * s.c + c) * s.r + (s.r - 1 - r)) * s.s + (s.s - 1 - q)];
        std::vector<float> dx(s.x_size(), kNaN), dx_want(s.x_size(), kNaN);
        ASSERT_TRUE(be->conv2d_bwd_data(s, dy.data(), w.data(), dx.data()));
        ASSERT_TRUE(be->conv2d_fwd(t, dy.data(), wt.data(), dx_want.data()));
        EXPECT_TRUE(bitwise_equal(dx, dx_want)) << "bwd_data " << what;
      }
    }
  }
}

// ---- the in-place micro-kernels against the packed ones ----------------------------------------------

// ukernel_rows reads B rows by pointer with masked column tails; ukernel reads a packed, zero-padded
// panel. Same A, same B values: the first `cols` columns must agree bit for bit for every row count,
// column count and combination of src, add and epilogue (alpha, beta), and the rows kernel must not
// touch columns at or beyond `cols`. Covers branches the convolutions never take (beta != 0).
TEST(NativeKernels, RowsKernelMatchesPackedKernel) {
  constexpr int kc = 37;
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kScalar}) {
    const native::IsaKernels* kn = native::isa_kernels(isa);
    if (!kn) continue;  // this CPU lacks the ISA (NativeIsa reports the skip)
    const int mr = kn->mr, nr = kn->nr, ld = nr + 3;
    struct alignas(64) Panel {
      float v[kc * 32];
    };
    Panel bp;
    std::vector<float> a = uniform(size_t(kc) * mr, 501), bsrc = uniform(size_t(kc) * ld + 8, 502);
    std::vector<ptrdiff_t> rows(kc);
    for (int kk = 0; kk < kc; ++kk) rows[size_t(kk)] = ptrdiff_t((kk * 7) % kc) * ld + 5;  // scattered rows
    const std::vector<float> src = uniform(size_t(mr) * ld, 503), add = uniform(size_t(mr) * ld, 504),
                             dst0 = uniform(size_t(mr) * ld, 505);
    const native::Epilogue plain{1.0f, 0.0f}, scaled{1.5f, 0.0f}, blend{0.75f, -0.5f};
    for (int r = 1; r <= mr; ++r)
      for (int cols : {1, nr / 2, nr / 2 + 1, nr - 1, nr}) {
        for (int kk = 0; kk < kc; ++kk)
          for (int j = 0; j < nr; ++j) bp.v[kk * nr + j] = j < cols ? bsrc[size_t(rows[size_t(kk)] + j)] : 0.0f;
        for (int variant = 0; variant < 6; ++variant) {
          const float* s = variant == 1 || variant == 5 ? src.data() : nullptr;
          const float* ad = variant == 2 || variant == 5 ? add.data() : nullptr;
          const native::Epilogue* epi =
              variant == 3 ? &scaled : variant == 4 || variant == 5 ? &blend : variant == 0 ? nullptr : &plain;
          std::vector<float> packed = dst0, in_place = dst0;
          kn->ukernel[r](kc, a.data(), bp.v, s, ld, ad, ld, packed.data(), ld, epi);
          kn->ukernel_rows[r](kc, a.data(), mr, bsrc.data(), rows.data(), cols, s, ld, ad, ld, in_place.data(), ld, epi);
          for (int i = 0; i < mr; ++i)
            for (int j = 0; j < ld; ++j) {
              const size_t at = size_t(i) * ld + j;
              const float want = i < r && j < cols ? packed[at] : dst0[at];
              ASSERT_EQ(0, std::memcmp(&want, &in_place[at], sizeof(float)))
                  << to_string(isa) << " rows " << r << " cols " << cols << " variant " << variant << " at (" << i
                  << ", " << j << ")";
            }
        }
      }
  }
}

// ---- forced atomic orders ---------------------------------------------------------------------------

TEST(NativeAtomic, ForcedOrderIsAPermutation) {
  std::vector<uint32_t> p1 = native::forced_order(1, 64), p2 = native::forced_order(2, 64);
  EXPECT_NE(p1, p2);
  EXPECT_EQ(p1, native::forced_order(1, 64));
  std::vector<uint32_t> sorted = p1;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(NativeAtomic, ForcedOrdersGiveDifferentBitsAndMatchTheirPermutation) {
  // 4096 floats whose magnitudes span 2^-10 .. 2^10: adding the 64 chunk partials in another order
  // rounds differently. The result must be exactly the chunk partials (each a one-block leaf, i.e.
  // what order=blocked with one thread computes) added in the seeded permutation.
  const size_t n = 4096;
  std::vector<float> x = uniform(n, 77);
  for (size_t i = 0; i < n; ++i) x[i] = std::ldexp(x[i], int(mix(i) % 21) - 10);
  const size_t chunks = std::min<size_t>(native::kAtomicChunksPerThread, (n + native::kLanes - 1) / native::kLanes);
  auto leaf_backend = native_backend(ReduceOrder::kBlocked, 1);
  std::vector<float> part(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    std::vector<float> sub(x.begin() + n * c / chunks, x.begin() + n * (c + 1) / chunks);
    part[c] = run_reduce(*leaf_backend, ReduceOp::kSum, sub, sub);
  }
  std::vector<float> results;
  for (uint64_t seed : {1, 2}) {
    float want = 0.0f;
    for (uint32_t c : native::forced_order(seed, chunks)) want = want + part[c];
    auto be = native_backend(ReduceOrder::kAtomic, 1, seed);
    float got = run_reduce(*be, ReduceOp::kSum, x, x);
    EXPECT_TRUE(bitwise_equal({got}, {want})) << "seed " << seed;
    EXPECT_TRUE(bitwise_equal({got}, {run_reduce(*be, ReduceOp::kSum, x, x)})) << "same seed, same bits";
    results.push_back(got);
  }
  EXPECT_FALSE(bitwise_equal({results[0]}, {results[1]})) << "seeds 1 and 2 must give different sums";
}

TEST(NativeAtomic, ForcedOrdersChangeGemmAndConvBits) {
  GemmCase g{Trans::kN, Trans::kN, 16, 16, 3000, 1.0f, 0.0f};
  GemmData d = make_gemm_data(g, false, 51);
  const ConvShape s = conv_shape(8, 4, 16, 16, 4, 3, 3, 1, 1);  // bwd_filter reduces over 2048
  auto a1 = native_backend(ReduceOrder::kAtomic, 2, 1), a2 = native_backend(ReduceOrder::kAtomic, 2, 2);
  std::vector<float> c1 = run_gemm(*a1, g, d), c2 = run_gemm(*a2, g, d);
  EXPECT_FALSE(bitwise_equal(c1, c2)) << "two forced orders, same gemm bits";
  EXPECT_TRUE(bitwise_equal(c1, run_gemm(*a1, g, d)));
  std::vector<float> w1 = run_conv(*a1, ConvPass::kBwdFilter, s, false, 5);
  EXPECT_FALSE(bitwise_equal(w1, run_conv(*a2, ConvPass::kBwdFilter, s, false, 5)));
  EXPECT_TRUE(bitwise_equal(w1, run_conv(*a1, ConvPass::kBwdFilter, s, false, 5)));
  // Still the right answer.
  auto ref = make_cpu_ref();
  EXPECT_TRUE(close(c1, run_gemm(*ref, g, d), 1e-4, 1e-4));
}

// ---- batched gemms (native::gemm_batch: Winograd's 36 per-point gemms) ------------------------------

// A gemm driver context of its own, as the backend builds one.
struct Driver {
  explicit Driver(int threads) : pool(threads), scratch(size_t(pool.size())) {}
  native::GemmContext ctx(ReduceOrder order, uint64_t seed) {
    return {native::isa_kernels(CpuIsa::kAuto), &pool, order, seed, &scratch, &shared, &staging};
  }
  ThreadPool pool;
  std::vector<native::ThreadScratch> scratch;
  std::vector<native::AlignedBuffer> shared, staging = std::vector<native::AlignedBuffer>(4);
};

native::GemmArgs args_of(const GemmCase& g, const GemmData& d, float* c) {
  return {g.ta, g.tb, g.m, g.n, g.k, g.alpha, d.a.data(), d.lda, d.b.data(), d.ldb, g.beta, c, d.ldc};
}

// Every gemm of a batch gets the bits gemm() gives it alone, in every order and thread count:
// sequential, pairwise, blocked, atomic under forced orders and with one thread (completion order =
// chunk order); shapes below kAtomicMinSplitK, with 3 and 5 atomic chunks, a few tiles and many, beta
// zero and not, and different transposes and leading dimensions within one batch.
TEST(NativeGemmBatch, EachGemmGetsTheBitsOfItsGemmAlone) {
  struct Run {
    ReduceOrder order;
    uint64_t seed;
    bool one_thread_only;
  };
  const std::vector<Run> runs = {{ReduceOrder::kSequential, 0, false}, {ReduceOrder::kPairwise, 0, false},
                                 {ReduceOrder::kBlocked, 0, false},    {ReduceOrder::kAtomic, 1, false},
                                 {ReduceOrder::kAtomic, 5, false},     {ReduceOrder::kAtomic, 0, true}};
  const std::vector<GemmCase> shapes = {{Trans::kN, Trans::kN, 13, 35, 10, 1.0f, 0.0f},
                                        {Trans::kN, Trans::kN, 37, 70, 70, 1.0f, 0.0f},
                                        {Trans::kN, Trans::kN, 20, 9, 600, 1.0f, 0.5f},
                                        {Trans::kN, Trans::kN, 100, 33, 1030, 0.5f, 0.0f},
                                        {Trans::kN, Trans::kN, 64, 300, 257, 1.0f, 1.0f},
                                        {Trans::kN, Trans::kN, 4, 5, 0, 1.0f, 0.0f}};
  const Trans tr[5][2] = {{Trans::kN, Trans::kN}, {Trans::kT, Trans::kN}, {Trans::kN, Trans::kT},
                          {Trans::kT, Trans::kT}, {Trans::kN, Trans::kN}};
  uint64_t seed = 90;
  for (const GemmCase& shape : shapes) {
    std::vector<GemmCase> cases;
    std::vector<GemmData> data;
    for (const auto& t : tr) {
      GemmCase g = shape;
      g.ta = t[0], g.tb = t[1];
      cases.push_back(g);
      data.push_back(make_gemm_data(g, false, seed += 3));
    }
    for (const Run& r : runs)
      for (int threads : {1, 2, 4}) {
        if (r.one_thread_only && threads > 1) continue;
        const std::string what = std::string(to_string(r.order)) + " seed " + std::to_string(r.seed) + " threads " +
                                 std::to_string(threads) + " k " + std::to_string(shape.k);
        Driver batch_driver(threads);
        std::vector<std::vector<float>> out;
        std::vector<native::GemmArgs> gs;
        for (const GemmData& d : data) out.push_back(d.c0);
        for (size_t i = 0; i < cases.size(); ++i) gs.push_back(args_of(cases[i], data[i], out[i].data()));
        native::GemmContext bc = batch_driver.ctx(r.order, r.seed);
        ASSERT_TRUE(native::gemm_batch(bc, gs)) << what;
        for (size_t i = 0; i < cases.size(); ++i) {
          Driver alone_driver(threads);
          native::GemmContext ac = alone_driver.ctx(r.order, r.seed);
          std::vector<float> alone = data[i].c0;
          ASSERT_TRUE(native::gemm(ac, args_of(cases[i], data[i], alone.data()))) << what;
          EXPECT_TRUE(bitwise_equal(out[i], alone)) << what << " gemm " << i;
        }
      }
  }
}

// gemm_batch_packed_a (A packed once, B read in place; the Winograd forward's gemms): every gemm gets
// the bits gemm() gives it alone with the same operands, in every order, thread count and ISA, for A
// stored plain and transposed, K below and above one leaf, short last row panels and narrow B.
TEST(NativeGemmBatch, PackedABatchGivesEachGemmTheBitsOfItsGemmAlone) {
  struct Run {
    ReduceOrder order;
    uint64_t seed;
    bool one_thread_only;
  };
  const std::vector<Run> runs = {{ReduceOrder::kSequential, 0, false},
                                 {ReduceOrder::kPairwise, 0, false},
                                 {ReduceOrder::kBlocked, 0, false},
                                 {ReduceOrder::kAtomic, 3, false},
                                 {ReduceOrder::kAtomic, 0, true}};
  struct Shape {
    int m, n, k;
  };
  const std::vector<Shape> shapes = {{13, 35, 10}, {37, 70, 70}, {20, 9, 600}, {64, 300, 257}, {5, 16, 1}};
  const int batch = 3;
  uint64_t seed = 400;
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kScalar}) {
    const native::IsaKernels* kn = native::isa_kernels(isa);
    if (!kn) continue;  // this CPU lacks it (the ISA tests say so)
    for (const Shape& sh : shapes)
      for (Trans ta : {Trans::kN, Trans::kT}) {
        const int lda = (ta == Trans::kN ? sh.k : sh.m) + 3, ldb = sh.n + 3, ldc = sh.n + 2;
        const size_t a_floats = size_t(ta == Trans::kN ? sh.m : sh.k) * lda, b_stride = size_t(sh.k) * ldb + 5,
                     c_stride = size_t(sh.m) * ldc + 7;
        const std::vector<float> a = uniform(a_floats * batch, seed += 3), b = uniform(b_stride * batch, seed += 3);
        for (const Run& r : runs)
          for (int threads : {1, 2, 4}) {
            if (r.one_thread_only && threads > 1) continue;
            const std::string what = std::string(to_string(isa)) + " " + to_string(r.order) + " seed " +
                                     std::to_string(r.seed) + " threads " + std::to_string(threads) + " m n k " +
                                     std::to_string(sh.m) + " " + std::to_string(sh.n) + " " + std::to_string(sh.k) +
                                     (ta == Trans::kT ? " A^T" : "");
            Driver batch_driver(threads);
            native::GemmContext bc = batch_driver.ctx(r.order, r.seed);
            bc.kern = kn;
            std::vector<float> ap(size_t(sh.m) * sh.k * batch), out(c_stride * batch, kNaN);
            for (int g = 0; g < batch; ++g)
              native::pack_a_whole(bc, ta, a.data() + g * a_floats, lda, sh.m, sh.k,
                                   ap.data() + size_t(g) * sh.m * sh.k);
            ASSERT_TRUE(native::gemm_batch_packed_a(bc, batch, sh.m, sh.n, sh.k, ap.data(), b.data(), ldb, b_stride,
                                                    out.data(), ldc, c_stride))
                << what;
            for (int g = 0; g < batch; ++g) {
              Driver alone_driver(threads);
              native::GemmContext ac = alone_driver.ctx(r.order, r.seed);
              ac.kern = kn;
              std::vector<float> alone(c_stride, kNaN);
              ASSERT_TRUE(native::gemm(ac, {ta, Trans::kN, sh.m, sh.n, sh.k, 1.0f, a.data() + g * a_floats, lda,
                                            b.data() + g * b_stride, ldb, 0.0f, alone.data(), ldc}))
                  << what;
              const std::vector<float> got(out.begin() + g * c_stride, out.begin() + (g + 1) * c_stride);
              EXPECT_TRUE(bitwise_equal(got, alone)) << what << " gemm " << g;
            }
          }
      }
  }
}

TEST(NativeGemmBatch, RefusesGemmsThatDoNotShareTheirShape) {
  const GemmCase g{Trans::kN, Trans::kN, 8, 9, 10, 1.0f, 0.0f};
  const GemmData d = make_gemm_data(g, false, 7);
  std::vector<float> c1 = d.c0, c2 = d.c0;
  Driver drv(2);
  native::GemmContext ctx = drv.ctx(ReduceOrder::kBlocked, 0);
  EXPECT_TRUE(native::gemm_batch(ctx, {})) << "an empty batch";
  for (int field = 0; field < 5; ++field) {
    native::GemmArgs a = args_of(g, d, c1.data()), b = args_of(g, d, c2.data());
    if (field == 0) b.m = 7;
    if (field == 1) b.n = 8;
    if (field == 2) b.k = 9;
    if (field == 3) b.alpha = 2.0f;
    if (field == 4) b.beta = 1.0f;
    const std::vector<native::GemmArgs> gs = {a, b};
    Status st = native::gemm_batch(ctx, gs);
    EXPECT_FALSE(st) << "field " << field;
    EXPECT_NE(st.message().find("share"), std::string::npos) << st.message();
  }
}

// Hard facts about the atomic chunks of a gemm: order=atomic with a forced seed adds the partials of
// its max(3, ceil(K / kGemmKc)) chunks [K*c/chunks, K*(c+1)/chunks) in the seeded permutation p, from
// zero: ((0 + P[p0]) + P[p1]) + ... Those are order=blocked's partials with `chunks` threads, which adds
// them as ((P0 + P1) + P2) + ...; float addition commutes, so the two have the same bits exactly when
// p[2..] is 2, 3, ..., and two seeds give the same bits exactly when their permutations agree from
// position 2 on. One thread without a seed adds the chunks in their own order: blocked's bits too.
TEST(NativeAtomic, ForcedGemmOrdersAreBlockedPartialsInTheirPermutation) {
  for (const GemmCase& g : {GemmCase{Trans::kN, Trans::kN, 21, 40, 600, 1.0f, 0.0f},
                            GemmCase{Trans::kT, Trans::kN, 9, 70, 1030, 1.0f, 0.0f}}) {
    const size_t chunks = size_t(std::max(3, (g.k + native::kGemmKc - 1) / native::kGemmKc));
    const GemmData d = make_gemm_data(g, false, 71);
    const std::vector<float> blocked = run_gemm(*native_backend(ReduceOrder::kBlocked, int(chunks)), g, d);
    EXPECT_TRUE(bitwise_equal(run_gemm(*native_backend(ReduceOrder::kAtomic, 1), g, d), blocked)) << "k " << g.k;
    // Seeds: the first whose tail is 2, 3, ..., the first whose head is swapped relative to that one, and
    // up to three whose tails differ from each other and from it (with 3 chunks only two such tails exist).
    auto tail = [&](uint64_t s) {
      std::vector<uint32_t> p = native::forced_order(s, chunks);
      return std::vector<uint32_t>(p.begin() + 2, p.end());
    };
    std::vector<uint32_t> identity_tail(chunks - 2);
    for (size_t i = 0; i < identity_tail.size(); ++i) identity_tail[i] = uint32_t(i + 2);
    std::vector<uint64_t> same, other;
    std::vector<std::vector<uint32_t>> other_tails;
    for (uint64_t s = 1; s < 5000 && (same.size() < 2 || other.size() < 3); ++s) {
      const std::vector<uint32_t> t = tail(s);
      if (t == identity_tail) {
        const bool new_head = same.empty() || native::forced_order(s, chunks) != native::forced_order(same[0], chunks);
        if (same.size() < 2 && new_head) same.push_back(s);
      } else if (other.size() < 3 && std::find(other_tails.begin(), other_tails.end(), t) == other_tails.end()) {
        other.push_back(s), other_tails.push_back(t);
      }
    }
    ASSERT_EQ(same.size(), 2u) << "k " << g.k;
    ASSERT_GE(other.size(), 2u) << "k " << g.k;
    for (uint64_t s : same)
      EXPECT_TRUE(bitwise_equal(run_gemm(*native_backend(ReduceOrder::kAtomic, 2, s), g, d), blocked))
          << "k " << g.k << " seed " << s;
    std::vector<std::vector<float>> seen = {blocked};
    for (uint64_t s : other) {
      const std::vector<float> c = run_gemm(*native_backend(ReduceOrder::kAtomic, 2, s), g, d);
      for (const std::vector<float>& prev : seen)
        EXPECT_FALSE(bitwise_equal(c, prev)) << "k " << g.k << " seed " << s << ": another tail, other bits";
      seen.push_back(c);
    }
  }
}

// ---- every ISA path gives the same bits ------------------------------------------------------------

class NativeIsa : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(NativeIsa, SameBitsAsAuto) {
  const CpuIsa isa = GetParam();
  if (!cpu_isa_supported(isa)) GTEST_SKIP() << "this CPU cannot run isa=" << to_string(isa);
  for (ReduceOrder order : {ReduceOrder::kSequential, ReduceOrder::kPairwise, ReduceOrder::kBlocked, ReduceOrder::kAtomic}) {
    const uint64_t seed = order == ReduceOrder::kAtomic ? 3 : 0;  // atomic: a forced, repeatable order
    auto forced = native_backend(order, 2, seed, isa), best = native_backend(order, 2, seed);
    ASSERT_EQ(forced->details()[2].second, to_string(isa));
    const std::string what = std::string(to_string(order)) + " isa=" + to_string(isa);
    uint64_t s = 60;
    for (GemmCase g : {GemmCase{Trans::kN, Trans::kN, 29, 45, 700, 1.5f, -0.5f},
                       GemmCase{Trans::kT, Trans::kT, 37, 19, 300, 1.0f, 0.0f},
                       GemmCase{Trans::kN, Trans::kT, 64, 64, 64, 2.0f, 1.0f}}) {
      GemmData d = make_gemm_data(g, false, s++);
      EXPECT_TRUE(bitwise_equal(run_gemm(*forced, g, d), run_gemm(*best, g, d))) << what << " gemm k=" << g.k;
    }
    // Stride 2 (packed im2col panels), and stride 1 (rows read in place: channel-last filter gradient,
    // C = 1 window rows, K = 1 and K = 20 with a short last row panel).
    for (const ConvShape& cs : {conv_shape(2, 5, 9, 9, 3, 3, 3, 2, 1), conv_shape(2, 16, 10, 12, 20, 3, 3, 1, 1),
                                conv_shape(2, 1, 12, 11, 5, 3, 3, 1, 1), conv_shape(2, 16, 9, 9, 1, 3, 3, 1, 1)})
      for (ConvPass pass : {ConvPass::kFwd, ConvPass::kBwdData, ConvPass::kBwdFilter})
        EXPECT_TRUE(bitwise_equal(run_conv(*forced, pass, cs, false, 4), run_conv(*best, pass, cs, false, 4)))
            << what << " " << pass_name(pass) << " c=" << cs.c << " k=" << cs.k << " stride=" << cs.stride;
    std::vector<float> x = uniform(10007, 61), y = uniform(10007, 62);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2})
      EXPECT_TRUE(bitwise_equal({run_reduce(*forced, op, x, y)}, {run_reduce(*best, op, x, y)})) << what << to_string(op);
    EXPECT_TRUE(bitwise_equal(run_softmax(*forced, x, 7, 1429), run_softmax(*best, x, 7, 1429))) << what;
    std::vector<float> y1 = y, y2 = y;
    ASSERT_TRUE(forced->axpy(x.size(), 0.3f, x.data(), y1.data()));
    ASSERT_TRUE(best->axpy(x.size(), 0.3f, x.data(), y2.data()));
    EXPECT_TRUE(bitwise_equal(y1, y2)) << what << " axpy";
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, NativeIsa, ::testing::Values(CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kScalar),
                         [](const ::testing::TestParamInfo<CpuIsa>& info) { return to_string(info.param); });

// The native backend's tanh is its own function (train_ops::tanh_f32): within 2 ulps of tanh on a dense
// sweep around its branch point (0.625) and over the range, odd, exact at the edges, and the same bits
// on every machine: a few values pinned by their bits (a libm's tanhf may differ from them; this may not).
TEST(NativeTanh, OwnFunctionWithinTwoUlpsAndTheSameBitsEverywhere) {
  std::unique_ptr<Backend> be = native_backend(ReduceOrder::kSequential, 2);
  std::vector<float> x;
  for (float v = 0.6f; v < 0.65f; v = std::nextafter(v, 1.0f)) x.push_back(v);  // both branches near the switch
  for (int i = 0; i < 200000; ++i) x.push_back(-12.0f + 24.0f * float(i) / 200000.0f);
  const size_t half = x.size();
  for (size_t i = 0; i < half; ++i) x.push_back(-x[i]);
  std::vector<float> y(x.size());
  ASSERT_TRUE(be->unary(UnaryOp::kTanh, x.data(), y.data(), x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = std::tanh(double(x[i]));
    const float tf = float(t);
    const double ulp = double(std::nextafter(std::fabs(tf), 2.0f)) - std::fabs(tf);
    worst = std::max(worst, std::fabs(double(y[i]) - t) / ulp);
    if (i >= half) {
      ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(-y[i - half])) << x[i];
    }
  }
  EXPECT_LE(worst, 2.0);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> edge = {0.0f, -0.0f, inf, -inf, kNaN, 1e-30f, 100.0f};
  std::vector<float> ey(edge.size());
  ASSERT_TRUE(be->unary(UnaryOp::kTanh, edge.data(), ey.data(), edge.size()));
  EXPECT_EQ(std::bit_cast<uint32_t>(ey[0]), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(ey[1]), 0x80000000u);
  EXPECT_EQ(ey[2], 1.0f);
  EXPECT_EQ(ey[3], -1.0f);
  EXPECT_TRUE(std::isnan(ey[4]));
  EXPECT_EQ(ey[5], 1e-30f);
  EXPECT_EQ(ey[6], 1.0f);
  const std::vector<float> pin_x = {0.5f, 0.625f, 1.0f, -3.0f, 8.0f, 9.0f};
  const std::vector<uint32_t> pin_bits = {0x3eec9a9f, 0x3f0dfa40, 0x3f42f7d6, 0xbf7ebbe9, 0x3f7ffffc, 0x3f7fffff};
  std::vector<float> py(pin_x.size());
  ASSERT_TRUE(be->unary(UnaryOp::kTanh, pin_x.data(), py.data(), pin_x.size()));
  for (size_t i = 0; i < pin_x.size(); ++i) EXPECT_EQ(std::bit_cast<uint32_t>(py[i]), pin_bits[i]) << pin_x[i];
}

TEST(NativeIsaNames, ParseAndSpec) {
  CpuIsa isa;
  ASSERT_TRUE(parse_cpu_isa("avx2", &isa));
  EXPECT_EQ(isa, CpuIsa::kAvx2);
  EXPECT_FALSE(parse_cpu_isa("sse", &isa));
  ReduceOrder o;
  ASSERT_TRUE(parse_reduce_order("pairwise", &o));
  EXPECT_EQ(o, ReduceOrder::kPairwise);
  EXPECT_FALSE(parse_reduce_order("random", &o));
  EXPECT_EQ(native_backend(ReduceOrder::kAtomic, 2, 0, CpuIsa::kScalar)->name(), "cpu?order=atomic&threads=2&isa=scalar");
}

}  // namespace
}  // namespace detaudit
