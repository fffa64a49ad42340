// Vendor CPU backends (OpenBLAS, oneDNN) against the cpu-ref oracle: bitwise on small-integer inputs
// (every product and partial sum is an exact float, so any summation order gives the same bits),
// within tol + |ref|*eps on random inputs. All backends here run single-threaded, so every test is
// deterministic. Backends that were not built skip with the factory's reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/ref.hpp"
#include "kernels/cpu/onednn_backend.hpp"
#include "kernels/cpu/openblas_backend.hpp"
#include "kernels/generator.hpp"

namespace detaudit {
namespace {

enum class Vendor { kOpenblas, kOnednn, kOnednnBlocked };

std::string vendor_name(Vendor v) {
  switch (v) {
    case Vendor::kOpenblas: return "openblas";
    case Vendor::kOnednn: return "onednn";
    case Vendor::kOnednnBlocked: return "onednn_blocked";
  }
  return "?";
}

BackendOr make_vendor(Vendor v, int threads) {
  switch (v) {
    case Vendor::kOpenblas:
      return make_openblas(OpenblasOptions{threads});
    case Vendor::kOnednn:
      return make_onednn(OnednnOptions{threads});
    case Vendor::kOnednnBlocked:
      return make_onednn(OnednnOptions{threads}, OnednnConvLayout::kBlocked);
  }
  return Status::invalid("unknown vendor");
}

std::vector<float> ints(size_t n, uint64_t stream) {
  return make_input<float>(n, 20240601, stream, Dist::kInt);
}
std::vector<float> uniform(size_t n, uint64_t stream) {
  return make_input<float>(n, 20240601, stream, Dist::kUniform);
}

// Bitwise equality; on failure names the first mismatches.
template <typename T>
::testing::AssertionResult same_bits(const std::vector<T>& got, const std::vector<T>& ref) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size differs";
  if (std::memcmp(got.data(), ref.data(), got.size() * sizeof(T)) == 0)
    return ::testing::AssertionSuccess();
  auto f = ::testing::AssertionFailure();
  int shown = 0;
  for (size_t i = 0; i < got.size() && shown < 5; ++i)
    if (std::memcmp(&got[i], &ref[i], sizeof(T)) != 0) {
      f << "[" << i << "] got " << got[i] << " ref " << ref[i] << "; ";
      ++shown;
    }
  return f;
}

// |got - ref| <= tol + |ref| * eps, skipping non-finite references (llm.c style).
template <typename T>
::testing::AssertionResult close(const std::vector<T>& got, const std::vector<T>& ref, double tol,
                                 double eps) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size differs";
  auto f = ::testing::AssertionFailure();
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double r = double(ref[i]), g = double(got[i]);
    if (!std::isfinite(r)) continue;
    if (!(std::fabs(g - r) <= tol + std::fabs(r) * eps)) {
      if (bad < 5) f << "[" << i << "] got " << g << " ref " << r << " diff " << g - r << "; ";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return f << bad << " of " << got.size() << " outside tolerance";
}

#define EXPECT_OK(expr)                                             \
  do {                                                              \
    ::detaudit::Status _s = (expr);                                 \
    ASSERT_TRUE(_s.is_ok()) << #expr << ": " << _s.message();       \
  } while (0)

class VendorTest : public ::testing::TestWithParam<Vendor> {
 protected:
  void SetUp() override {
    BackendOr made = make_vendor(GetParam(), 1);
    if (!made) GTEST_SKIP() << vendor_name(GetParam()) << ": " << made.message();
    be_ = std::move(made).value();
    ref_ = make_cpu_ref();
    ASSERT_NE(ref_, nullptr);
  }
  bool is_openblas() const { return GetParam() == Vendor::kOpenblas; }

  struct Gemm {
    Trans ta, tb;
    int m, n, k, lda, ldb, ldc;
    size_t a_size() const { return size_t(ta == Trans::kN ? m : k) * lda; }
    size_t b_size() const { return size_t(tb == Trans::kN ? k : n) * ldb; }
    size_t c_size() const { return size_t(m) * ldc; }
  };
  static Gemm gemm_shape(Trans ta, Trans tb, int m, int n, int k, int pad) {
    return {ta, tb, m, n, k, (ta == Trans::kN ? k : m) + pad, (tb == Trans::kN ? n : k) + pad,
            n + pad};
  }
  // Runs gemm on the backend and on cpu-ref with C starting from c0 in both.
  void run_gemm(const Gemm& g, float alpha, float beta, const std::vector<float>& a,
                const std::vector<float>& b, const std::vector<float>& c0, std::vector<float>* got,
                std::vector<float>* ref) {
    *got = c0;
    *ref = c0;
    EXPECT_OK(be_->gemm(g.ta, g.tb, g.m, g.n, g.k, alpha, a.data(), g.lda, b.data(), g.ldb, beta,
                        got->data(), g.ldc));
    EXPECT_OK(ref_->gemm(g.ta, g.tb, g.m, g.n, g.k, alpha, a.data(), g.lda, b.data(), g.ldb, beta,
                         ref->data(), g.ldc));
  }

  std::unique_ptr<Backend> be_, ref_;
};

const Trans kTrans[] = {Trans::kN, Trans::kT};

TEST_P(VendorTest, GemmExactIntegersAllTransposes) {
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) {
      SCOPED_TRACE(std::string("ta=") + (ta == Trans::kN ? "N" : "T") +
                   " tb=" + (tb == Trans::kN ? "N" : "T"));
      Gemm g = gemm_shape(ta, tb, 37, 29, 53, 3);
      auto a = ints(g.a_size(), 1), b = ints(g.b_size(), 2);
      // beta = 0 must overwrite C: start from NaN.
      std::vector<float> c0(g.c_size(), std::numeric_limits<float>::quiet_NaN()), got, ref;
      run_gemm(g, 1.0f, 0.0f, a, b, c0, &got, &ref);
      EXPECT_TRUE(same_bits(got, ref));
    }
}

TEST_P(VendorTest, GemmExactIntegersAlphaBeta) {
  for (Trans ta : kTrans) {
    Gemm g = gemm_shape(ta, Trans::kT, 20, 33, 41, 1);
    auto a = ints(g.a_size(), 3), b = ints(g.b_size(), 4), c0 = ints(g.c_size(), 5);
    std::vector<float> got, ref;
    run_gemm(g, 2.0f, -3.0f, a, b, c0, &got, &ref);
    EXPECT_TRUE(same_bits(got, ref));
    run_gemm(g, -1.0f, 1.0f, a, b, c0, &got, &ref);
    EXPECT_TRUE(same_bits(got, ref));
  }
}

TEST_P(VendorTest, GemmRandomWithinTolerance) {
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) {
      Gemm g = gemm_shape(ta, tb, 64, 48, 515, 5);
      auto a = uniform(g.a_size(), 6), b = uniform(g.b_size(), 7), c0 = uniform(g.c_size(), 8);
      std::vector<float> got, ref;
      run_gemm(g, 0.5f, 0.25f, a, b, c0, &got, &ref);
      // k = 515 float products of |x| < 1: rounding error well below 1e-4 absolute.
      EXPECT_TRUE(close(got, ref, 1e-4, 1e-5));
    }
}

TEST_P(VendorTest, GemmF64) {
  Gemm g = gemm_shape(Trans::kT, Trans::kN, 31, 17, 129, 2);
  std::vector<double> a(g.a_size()), b(g.b_size()), c0(g.c_size());
  fill_counter(a.data(), a.size(), 7, 1, Dist::kUniform);
  fill_counter(b.data(), b.size(), 7, 2, Dist::kUniform);
  fill_counter(c0.data(), c0.size(), 7, 3, Dist::kUniform);
  std::vector<double> got = c0, ref = c0;
  Status s = be_->gemm_f64(g.ta, g.tb, g.m, g.n, g.k, 1.5, a.data(), g.lda, b.data(), g.ldb, -0.5,
                           got.data(), g.ldc);
  if (!is_openblas()) {
    EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.message();
    return;
  }
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_OK(ref_->gemm_f64(g.ta, g.tb, g.m, g.n, g.k, 1.5, a.data(), g.lda, b.data(), g.ldb, -0.5,
                           ref.data(), g.ldc));
  EXPECT_TRUE(close(got, ref, 1e-12, 1e-13));
  // Small integers: exact in double too.
  fill_counter(a.data(), a.size(), 7, 4, Dist::kInt);
  fill_counter(b.data(), b.size(), 7, 5, Dist::kInt);
  got = c0;
  ref = c0;
  EXPECT_OK(be_->gemm_f64(g.ta, g.tb, g.m, g.n, g.k, 1.0, a.data(), g.lda, b.data(), g.ldb, 0.0,
                          got.data(), g.ldc));
  EXPECT_OK(ref_->gemm_f64(g.ta, g.tb, g.m, g.n, g.k, 1.0, a.data(), g.lda, b.data(), g.ldb, 0.0,
                           ref.data(), g.ldc));
  EXPECT_TRUE(same_bits(got, ref));
}

std::vector<ConvShape> conv_shapes() {
  auto mk = [](int n, int c, int h, int w, int k, int r, int s, int stride, int pad) {
    ConvShape sh;
    sh.n = n, sh.c = c, sh.h = h, sh.w = w, sh.k = k, sh.r = r, sh.s = s, sh.stride = stride,
    sh.pad = pad;
    return sh;
  };
  return {mk(2, 3, 9, 8, 4, 3, 3, 1, 1),    // same padding
          mk(2, 5, 11, 10, 6, 3, 2, 2, 1),  // stride 2, non-square filter, uneven extent
          mk(1, 4, 6, 6, 8, 1, 1, 1, 0),    // 1x1
          mk(3, 2, 7, 7, 3, 5, 5, 3, 2),    // stride 3, pad 2
          mk(2, 16, 12, 12, 32, 3, 3, 1, 0)};
}

std::string shape_str(const ConvShape& s) {
  return "n" + std::to_string(s.n) + " c" + std::to_string(s.c) + " " + std::to_string(s.h) + "x" +
         std::to_string(s.w) + " k" + std::to_string(s.k) + " " + std::to_string(s.r) + "x" +
         std::to_string(s.s) + " stride" + std::to_string(s.stride) + " pad" +
         std::to_string(s.pad);
}

enum class Pass { kFwd, kBwdData, kBwdFilter };

// Runs one conv pass on backend `be` into `out` (sized by the pass).
Status run_conv(Backend& be, Pass pass, const ConvShape& s, const std::vector<float>& x,
                const std::vector<float>& w, const std::vector<float>& dy, std::vector<float>* out) {
  switch (pass) {
    case Pass::kFwd:
      out->assign(s.y_size(), std::numeric_limits<float>::quiet_NaN());
      return be.conv2d_fwd(s, x.data(), w.data(), out->data());
    case Pass::kBwdData:
      out->assign(s.x_size(), std::numeric_limits<float>::quiet_NaN());
      return be.conv2d_bwd_data(s, dy.data(), w.data(), out->data());
    case Pass::kBwdFilter:
      out->assign(s.w_size(), std::numeric_limits<float>::quiet_NaN());
      return be.conv2d_bwd_filter(s, x.data(), dy.data(), out->data());
  }
  return Status::invalid("pass");
}

const Pass kPasses[] = {Pass::kFwd, Pass::kBwdData, Pass::kBwdFilter};
const char* pass_name(Pass p) {
  return p == Pass::kFwd ? "fwd" : p == Pass::kBwdData ? "bwd_data" : "bwd_filter";
}

TEST_P(VendorTest, ConvExactIntegers) {
  for (const ConvShape& s : conv_shapes())
    for (Pass pass : kPasses) {
      SCOPED_TRACE(shape_str(s) + " " + pass_name(pass));
      auto x = ints(s.x_size(), 10), w = ints(s.w_size(), 11), dy = ints(s.y_size(), 12);
      std::vector<float> got, ref;
      EXPECT_OK(run_conv(*be_, pass, s, x, w, dy, &got));
      EXPECT_OK(run_conv(*ref_, pass, s, x, w, dy, &ref));
      EXPECT_TRUE(same_bits(got, ref));
    }
}

TEST_P(VendorTest, ConvRandomWithinTolerance) {
  for (const ConvShape& s : conv_shapes())
    for (Pass pass : kPasses) {
      SCOPED_TRACE(shape_str(s) + " " + pass_name(pass));
      auto x = uniform(s.x_size(), 13), w = uniform(s.w_size(), 14), dy = uniform(s.y_size(), 15);
      std::vector<float> got, ref;
      EXPECT_OK(run_conv(*be_, pass, s, x, w, dy, &got));
      EXPECT_OK(run_conv(*ref_, pass, s, x, w, dy, &ref));
      // At most a few hundred products of |x| < 1 per output.
      EXPECT_TRUE(close(got, ref, 1e-5, 1e-5));
    }
}

TEST_P(VendorTest, ReduceExactIntegers) {
  const size_t n = 100003;  // sum |x| <= 4n and sum x*y <= 16n stay below 2^24
  auto x = ints(n, 20), y = ints(n, 21);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2}) {
    SCOPED_TRACE(to_string(op));
    std::vector<float> got(1, std::numeric_limits<float>::quiet_NaN()), ref(1);
    EXPECT_OK(be_->reduce(op, x.data(), y.data(), n, got.data()));
    EXPECT_OK(ref_->reduce(op, x.data(), y.data(), n, ref.data()));
    if (op == ReduceOp::kNorm2)
      // The sum of squares is exact, but libraries may scale (LAPACK-style nrm2): allow 1 ulp.
      EXPECT_TRUE(close(got, ref, 0.0, 2e-7));
    else
      EXPECT_TRUE(same_bits(got, ref));
  }
}

// One element: the element itself, or "not provided" where the library builds no such reduction (oneDNN: its
// source would have the destination's shape), never an error recorded as the target's failure.
TEST_P(VendorTest, ReduceOfOneElementIsTheElementOrNotProvided) {
  const std::vector<float> x = {3.0f}, y = {2.0f};
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2}) {
    SCOPED_TRACE(to_string(op));
    std::vector<float> got(1), ref(1);
    EXPECT_OK(ref_->reduce(op, x.data(), y.data(), 1, ref.data()));
    const Status st = be_->reduce(op, x.data(), y.data(), 1, got.data());
    if (GetParam() == Vendor::kOpenblas) {
      EXPECT_OK(st);
      EXPECT_TRUE(same_bits(got, ref));
    } else {
      EXPECT_EQ(st.code(), Status::Code::kUnsupported) << st.message();
    }
  }
}

TEST_P(VendorTest, ReduceRandomWithinTolerance) {
  const size_t n = 1 << 20;
  auto x = uniform(n, 22), y = uniform(n, 23);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2}) {
    SCOPED_TRACE(to_string(op));
    std::vector<float> got(1), ref(1);
    EXPECT_OK(be_->reduce(op, x.data(), y.data(), n, got.data()));
    EXPECT_OK(ref_->reduce(op, x.data(), y.data(), n, ref.data()));
    if (op == ReduceOp::kNorm2)
      // sum x^2 grows to ~3.5e5 (ulp 0.03); oneDNN 2.6's reduction adds it up in one float
      // running sum, which drifts ~2e-4 relative here.
      EXPECT_TRUE(close(got, ref, 0.0, 1e-3));
    else
      // Partial sums stay within ~1e3 (ulp 6e-5): error well below 0.05.
      EXPECT_TRUE(close(got, ref, 5e-2, 1e-5));
  }
}

TEST_P(VendorTest, Softmax) {
  const size_t rows = 7, cols = 33;
  auto x = uniform(rows * cols, 30);
  for (float& v : x) v *= 8.0f;
  std::vector<float> got(rows * cols), ref(rows * cols);
  Status s = be_->softmax(x.data(), got.data(), rows, cols);
  if (is_openblas()) {
    EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.message();
    return;
  }
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_OK(ref_->softmax(x.data(), ref.data(), rows, cols));
  EXPECT_TRUE(close(got, ref, 1e-7, 1e-5));
}

TEST_P(VendorTest, Unary) {
  const size_t n = 1000;
  auto x = uniform(n, 31);
  for (float& v : x) v *= 4.0f;
  for (UnaryOp op : {UnaryOp::kCopy, UnaryOp::kRelu, UnaryOp::kSigmoid, UnaryOp::kTanh,
                     UnaryOp::kHardSigmoid, UnaryOp::kExp, UnaryOp::kNeg, UnaryOp::kSquare}) {
    SCOPED_TRACE(to_string(op));
    std::vector<float> got(n), ref(n);
    Status s = be_->unary(op, x.data(), got.data(), n);
    if (is_openblas()) {
      EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.message();
      continue;
    }
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_OK(ref_->unary(op, x.data(), ref.data(), n));
    if (op == UnaryOp::kCopy || op == UnaryOp::kNeg || op == UnaryOp::kRelu ||
        op == UnaryOp::kSquare)
      EXPECT_TRUE(same_bits(got, ref));  // exact or one correctly rounded operation
    else
      EXPECT_TRUE(close(got, ref, 1e-7, 1e-5));
  }
}

TEST_P(VendorTest, Binary) {
  const size_t n = 1000;
  auto a = uniform(n, 32), b = uniform(n, 33);
  for (float& v : b) v = v == 0.0f ? 0.5f : v;
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv,
                      BinaryOp::kMax, BinaryOp::kMin}) {
    SCOPED_TRACE(to_string(op));
    std::vector<float> got(n), ref(n);
    Status s = be_->binary(op, a.data(), b.data(), got.data(), n);
    if (is_openblas()) {
      EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.message();
      continue;
    }
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_OK(ref_->binary(op, a.data(), b.data(), ref.data(), n));
    // One correctly rounded IEEE operation per element: bitwise.
    EXPECT_TRUE(same_bits(got, ref));
  }
}

TEST_P(VendorTest, Axpy) {
  const size_t n = 4099;
  auto x = ints(n, 40), y0 = ints(n, 41);
  std::vector<float> got = y0, ref = y0;
  Status s = be_->axpy(n, 3.0f, x.data(), got.data());
  if (!is_openblas()) {
    EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.message();
    return;
  }
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_OK(ref_->axpy(n, 3.0f, x.data(), ref.data()));
  EXPECT_TRUE(same_bits(got, ref));
  x = uniform(n, 42);
  y0 = uniform(n, 43);
  got = y0;
  ref = y0;
  EXPECT_OK(be_->axpy(n, 0.7f, x.data(), got.data()));
  EXPECT_OK(ref_->axpy(n, 0.7f, x.data(), ref.data()));
  // Fused or unfused multiply-add: within an ulp or so.
  EXPECT_TRUE(close(got, ref, 1e-7, 3e-7));
}

// Same inputs, same single-threaded backend: the same bytes every time.
TEST_P(VendorTest, RepeatIsBitIdentical) {
  Gemm g = gemm_shape(Trans::kN, Trans::kT, 65, 47, 300, 0);
  auto a = uniform(g.a_size(), 50), b = uniform(g.b_size(), 51);
  std::vector<float> c1(g.c_size()), c2(g.c_size());
  EXPECT_OK(be_->gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a.data(), g.lda, b.data(), g.ldb, 0.0f,
                      c1.data(), g.ldc));
  EXPECT_OK(be_->gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a.data(), g.lda, b.data(), g.ldb, 0.0f,
                      c2.data(), g.ldc));
  EXPECT_TRUE(same_bits(c1, c2));

  ConvShape s = conv_shapes()[4];
  auto x = uniform(s.x_size(), 52), w = uniform(s.w_size(), 53), dy = uniform(s.y_size(), 54);
  for (Pass pass : kPasses) {
    SCOPED_TRACE(pass_name(pass));
    std::vector<float> o1, o2;
    EXPECT_OK(run_conv(*be_, pass, s, x, w, dy, &o1));
    EXPECT_OK(run_conv(*be_, pass, s, x, w, dy, &o2));
    EXPECT_TRUE(same_bits(o1, o2));
  }

  const size_t n = 1 << 18;
  auto v = uniform(n, 55), u = uniform(n, 56);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2}) {
    SCOPED_TRACE(to_string(op));
    std::vector<float> r1(1), r2(1);
    EXPECT_OK(be_->reduce(op, v.data(), u.data(), n, r1.data()));
    EXPECT_OK(be_->reduce(op, v.data(), u.data(), n, r2.data()));
    EXPECT_TRUE(same_bits(r1, r2));
  }
}

TEST_P(VendorTest, NameAndDetails) {
  const std::string want = GetParam() == Vendor::kOpenblas ? "openblas?threads=1"
                           : GetParam() == Vendor::kOnednn ? "onednn?threads=1"
                                                           : "onednn?layout=blocked&threads=1";
  EXPECT_EQ(be_->name(), want);
  // Run one conv so that oneDNN has an implementation to report.
  ConvShape s = conv_shapes()[0];
  auto x = uniform(s.x_size(), 60), w = uniform(s.w_size(), 61);
  std::vector<float> y(s.y_size());
  EXPECT_OK(be_->conv2d_fwd(s, x.data(), w.data(), y.data()));
  auto d = be_->details();
  auto get = [&](const std::string& k) -> std::string {
    for (auto& [key, val] : d)
      if (key == k) return val;
    return "<missing>";
  };
  EXPECT_EQ(get("threads"), "1");
  if (is_openblas()) {
    EXPECT_FALSE(get("corename").empty());
    EXPECT_NE(get("corename"), "<missing>");
    EXPECT_EQ(get("corename"), openblas_corename());
    EXPECT_NE(get("config"), "<missing>");
    EXPECT_NE(get("coretype_env"), "<missing>");
    EXPECT_NE(openblas_version_string(), "not built");
  } else {
    EXPECT_NE(get("isa_env"), "<missing>");
    EXPECT_FALSE(get("impl").empty());
    EXPECT_NE(get("impl"), "<missing>");
    EXPECT_NE(onednn_version_string(), "not built");
  }
}

TEST_P(VendorTest, BadArgumentsAreInvalid) {
  std::vector<float> a(16), b(16), c(16);
  // lda smaller than k for a non-transposed A.
  Status s = be_->gemm(Trans::kN, Trans::kN, 4, 4, 4, 1.0f, a.data(), 3, b.data(), 4, 0.0f,
                       c.data(), 4);
  EXPECT_EQ(s.code(), Status::Code::kInvalid) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Vendors, VendorTest,
                         ::testing::Values(Vendor::kOpenblas, Vendor::kOnednn,
                                           Vendor::kOnednnBlocked),
                         [](const ::testing::TestParamInfo<Vendor>& info) {
                           return vendor_name(info.param);
                         });

TEST(VendorFactories, ThreadsMustBePositive) {
  EXPECT_FALSE(make_openblas(OpenblasOptions{0}).is_ok());
  EXPECT_FALSE(make_onednn(OnednnOptions{0}).is_ok());
}

TEST(VendorFactories, NotBuiltIsUnavailable) {
  BackendOr ob = make_openblas(OpenblasOptions{1});
  if (ob) {
    EXPECT_NE(ob.value(), nullptr);
  } else {
    EXPECT_EQ(ob.status().code(), Status::Code::kUnavailable);
    EXPECT_EQ(openblas_version_string(), "not built");
  }
  BackendOr dn = make_onednn(OnednnOptions{1});
  if (dn) {
    EXPECT_NE(dn.value(), nullptr);
  } else {
    EXPECT_EQ(dn.status().code(), Status::Code::kUnavailable);
    EXPECT_EQ(onednn_version_string(), "not built");
  }
}

}  // namespace
}  // namespace detaudit
