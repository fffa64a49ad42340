// cpu-ref against hand-computed cases, for every op.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/ref.hpp"

namespace detaudit {
namespace {

class RefTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> ref = make_cpu_ref();
};

TEST_F(RefTest, NameAndDetails) {
  EXPECT_EQ(ref->name(), "cpu-ref");
  EXPECT_FALSE(ref->details().empty());
}

// C = A * B with A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]]: [[58,64],[139,154]].
TEST_F(RefTest, GemmAllTransposes) {
  const float a[] = {1, 2, 3, 4, 5, 6}, at[] = {1, 4, 2, 5, 3, 6};
  const float b[] = {7, 8, 9, 10, 11, 12}, bt[] = {7, 9, 11, 8, 10, 12};
  const float want[] = {58, 64, 139, 154};
  for (Trans ta : {Trans::kN, Trans::kT})
    for (Trans tb : {Trans::kN, Trans::kT}) {
      float c[4] = {-1, -1, -1, -1};
      const bool an = ta == Trans::kN, bn = tb == Trans::kN;
      ASSERT_TRUE(ref->gemm(ta, tb, 2, 2, 3, 1.0f, an ? a : at, an ? 3 : 2, bn ? b : bt, bn ? 2 : 3, 0.0f, c, 2));
      for (int i = 0; i < 4; ++i) EXPECT_EQ(c[i], want[i]) << "ta=" << int(ta) << " tb=" << int(tb) << " i=" << i;
    }
}

TEST_F(RefTest, GemmAlphaBetaAndLeadingDimensions) {
  // A 2x3 inside rows of 5, B 3x2 inside rows of 4, C 2x2 inside rows of 3.
  const float a[] = {1, 2, 3, 99, 99, 4, 5, 6, 99, 99};
  const float b[] = {7, 8, 99, 99, 9, 10, 99, 99, 11, 12, 99, 99};
  float c[] = {1, 1, 77, 1, 1, 77};
  ASSERT_TRUE(ref->gemm(Trans::kN, Trans::kN, 2, 2, 3, 2.0f, a, 5, b, 4, -1.0f, c, 3));
  const float want[] = {115, 127, 77, 277, 307, 77};  // 2*AB - 1, padding untouched
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c[i], want[i]) << i;
}

TEST_F(RefTest, GemmBetaZeroDoesNotReadC) {
  const float a[] = {1, 2}, b[] = {3, 4};
  float c[] = {std::numeric_limits<float>::quiet_NaN()};
  ASSERT_TRUE(ref->gemm(Trans::kN, Trans::kN, 1, 1, 2, 1.0f, a, 2, b, 1, 0.0f, c, 1));
  EXPECT_EQ(c[0], 11.0f);
}

TEST_F(RefTest, GemmRejectsBadLeadingDimension) {
  float a[4] = {}, b[4] = {}, c[4] = {};
  Status st = ref->gemm(Trans::kN, Trans::kN, 2, 2, 2, 1.0f, a, 1, b, 2, 0.0f, c, 2);
  EXPECT_EQ(st.code(), Status::Code::kInvalid);
}

TEST_F(RefTest, GemmAccumulatesInDouble) {
  // In float, 1e8 + 1 rounds back to 1e8 and the sum is 0; in double it is 1.
  const float a[] = {1e8f, 1.0f, -1e8f}, b[] = {1, 1, 1};
  float c[1];
  ASSERT_TRUE(ref->gemm(Trans::kN, Trans::kN, 1, 1, 3, 1.0f, a, 3, b, 1, 0.0f, c, 1));
  EXPECT_EQ(c[0], 1.0f);
}

TEST_F(RefTest, GemmF64AccumulatesInLongDouble) {
  const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12};
  double c[4];
  ASSERT_TRUE(ref->gemm_f64(Trans::kN, Trans::kN, 2, 2, 3, 1.0, a, 3, b, 2, 0.0, c, 2));
  EXPECT_EQ(c[0], 58.0);
  EXPECT_EQ(c[3], 154.0);
  // 1e16 + 1 is not a double (the spacing there is 2); the long double accumulator keeps the 1.
  const double x[] = {1e16, 1.0, -1e16}, ones[] = {1, 1, 1};
  double d[1];
  ASSERT_TRUE(ref->gemm_f64(Trans::kT, Trans::kN, 1, 1, 3, 1.0, x, 1, ones, 1, 0.0, d, 1));
  EXPECT_EQ(d[0], 1.0);
}

TEST_F(RefTest, Conv2dForwardStride1) {
  // x = 1..9 (3x3), w = [[1,0],[0,1]]: y[p][q] = x[p][q] + x[p+1][q+1].
  ConvShape s;
  s.h = s.w = 3;
  s.r = s.s = 2;
  const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[] = {1, 0, 0, 1};
  float y[4];
  ASSERT_TRUE(ref->conv2d_fwd(s, x, w, y));
  const float want[] = {6, 8, 12, 14};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], want[i]) << i;
}

TEST_F(RefTest, Conv2dForwardStride2Pad1) {
  // 3x3 window of ones, stride 2, zero padding 1: each output sums the in-bounds part of its window.
  ConvShape s;
  s.h = s.w = 3;
  s.r = s.s = 3;
  s.stride = 2;
  s.pad = 1;
  ASSERT_EQ(s.p(), 2);
  const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  float y[4];
  ASSERT_TRUE(ref->conv2d_fwd(s, x, w, y));
  const float want[] = {12, 16, 24, 28};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], want[i]) << i;
}

TEST_F(RefTest, Conv2dForwardChannels) {
  // n=2, c=2, 2x2 input, k=2 filters of 1x1: y[n][k] = sum_c w[k][c] * x[n][c].
  ConvShape s;
  s.n = 2, s.c = 2, s.h = 2, s.w = 2, s.k = 2;
  const float x[] = {1, 2, 3, 4, 10, 20, 30, 40, /* n=1 */ 5, 6, 7, 8, 0, 0, 0, 1};
  const float w[] = {1, 1, /* k=1 */ 2, -1};
  float y[16];
  ASSERT_TRUE(ref->conv2d_fwd(s, x, w, y));
  const float want[] = {11, 22, 33, 44, -8, -16, -24, -32, 5, 6, 7, 9, 10, 12, 14, 15};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(y[i], want[i]) << i;
}

TEST_F(RefTest, Conv2dBackwardDataStride2Pad1) {
  // Window of ones, stride 2, pad 1: dx[h][w] sums dy over the windows that cover (h, w).
  ConvShape s;
  s.h = s.w = 3;
  s.r = s.s = 3;
  s.stride = 2;
  s.pad = 1;
  const float dy[] = {1, 2, 3, 4}, w[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  float dx[9];
  ASSERT_TRUE(ref->conv2d_bwd_data(s, dy, w, dx));
  const float want[] = {1, 3, 2, 4, 10, 6, 3, 7, 4};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(dx[i], want[i]) << i;
}

TEST_F(RefTest, Conv2dBackwardFilter) {
  // dw[r][s] = sum_{p,q} x[p+r][q+s] * dy[p][q]; dy = [[1,0],[0,1]] gives x[r][s] + x[r+1][s+1].
  ConvShape s;
  s.h = s.w = 3;
  s.r = s.s = 2;
  const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, dy[] = {1, 0, 0, 1};
  float dw[4];
  ASSERT_TRUE(ref->conv2d_bwd_filter(s, x, dy, dw));
  const float want[] = {6, 8, 12, 14};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(dw[i], want[i]) << i;
}

// <conv(x, w), dy> = <x, bwd_data(dy, w)> = <w, bwd_filter(x, dy)>: exact with small integers.
TEST_F(RefTest, Conv2dAdjointIdentities) {
  ConvShape s;
  s.n = 2, s.c = 3, s.h = 7, s.w = 6, s.k = 2, s.r = 3, s.s = 2, s.stride = 2, s.pad = 1;
  auto fill = [](std::vector<float>& v, int salt) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(int((i * 7 + salt * 13) % 9) - 4);
  };
  std::vector<float> x(s.x_size()), w(s.w_size()), dy(s.y_size()), y(s.y_size()), dx(s.x_size()), dw(s.w_size());
  fill(x, 1), fill(w, 2), fill(dy, 3);
  ASSERT_TRUE(ref->conv2d_fwd(s, x.data(), w.data(), y.data()));
  ASSERT_TRUE(ref->conv2d_bwd_data(s, dy.data(), w.data(), dx.data()));
  ASSERT_TRUE(ref->conv2d_bwd_filter(s, x.data(), dy.data(), dw.data()));
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double t = 0;
    for (size_t i = 0; i < a.size(); ++i) t += double(a[i]) * b[i];
    return t;
  };
  EXPECT_EQ(dot(y, dy), dot(x, dx));
  EXPECT_EQ(dot(y, dy), dot(w, dw));
}

TEST_F(RefTest, MaxPool) {
  // 3x3 input, 2x2 windows, stride 1: windows overlap, so the centre's gradient adds up.
  PoolShape s;
  s.h = s.w = 3;
  s.window = 2;
  s.stride = 1;
  const float x[] = {1, 2, 3, 4, 9, 6, 7, 8, 5};
  float y[4];
  ASSERT_TRUE(ref->maxpool_fwd(s, x, y));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], 9.0f) << i;
  const float dy[] = {1, 2, 3, 4};
  float dx[9];
  ASSERT_TRUE(ref->maxpool_bwd(s, x, y, dy, dx));
  const float want[] = {0, 0, 0, 0, 10, 0, 0, 0, 0};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(dx[i], want[i]) << i;
}

TEST_F(RefTest, Reduce) {
  const float x[] = {1, 2, 3.5f}, y[] = {2, -1, 2};
  float out;
  ASSERT_TRUE(ref->reduce(ReduceOp::kSum, x, nullptr, 3, &out));
  EXPECT_EQ(out, 6.5f);
  ASSERT_TRUE(ref->reduce(ReduceOp::kDot, x, y, 3, &out));
  EXPECT_EQ(out, 7.0f);
  const float v[] = {3, 4};
  ASSERT_TRUE(ref->reduce(ReduceOp::kNorm2, v, nullptr, 2, &out));
  EXPECT_EQ(out, 5.0f);
  const float big[] = {1e8f, 1.0f, -1e8f};  // double accumulation keeps the 1
  ASSERT_TRUE(ref->reduce(ReduceOp::kSum, big, nullptr, 3, &out));
  EXPECT_EQ(out, 1.0f);
  ASSERT_TRUE(ref->reduce(ReduceOp::kSum, x, nullptr, 0, &out));
  EXPECT_EQ(out, 0.0f);
}

TEST_F(RefTest, Softmax) {
  const float x[] = {1, 2, 3, 1000, 1000, 1000};  // the second row would overflow without max-subtract
  float y[6];
  ASSERT_TRUE(ref->softmax(x, y, 2, 3));
  const double e = std::exp(1.0), z = 1 + e + e * e;
  EXPECT_EQ(y[0], float(1 / z));
  EXPECT_EQ(y[1], float(e / z));
  EXPECT_EQ(y[2], float(e * e / z));
  for (int j = 3; j < 6; ++j) EXPECT_EQ(y[j], float(1.0 / 3.0));
}

TEST_F(RefTest, Unary) {
  const float x[] = {-1, 0, 1, 10};
  float y[4];
  auto run = [&](UnaryOp op) {
    EXPECT_TRUE(ref->unary(op, x, y, 4));
    return std::vector<float>(y, y + 4);
  };
  EXPECT_EQ(run(UnaryOp::kCopy), (std::vector<float>{-1, 0, 1, 10}));
  EXPECT_EQ(run(UnaryOp::kRelu), (std::vector<float>{0, 0, 1, 10}));
  EXPECT_EQ(run(UnaryOp::kNeg), (std::vector<float>{1, 0, -1, -10}));
  EXPECT_EQ(run(UnaryOp::kSquare), (std::vector<float>{1, 0, 1, 100}));
  EXPECT_EQ(run(UnaryOp::kHardSigmoid), (std::vector<float>{0.3f, 0.5f, 0.7f, 1.0f}));
  std::vector<float> s = run(UnaryOp::kSigmoid);
  EXPECT_EQ(s[1], 0.5f);
  EXPECT_EQ(s[2], float(1 / (1 + std::exp(-1.0))));
  std::vector<float> t = run(UnaryOp::kTanh);
  EXPECT_EQ(t[1], 0.0f);
  EXPECT_EQ(t[2], float(std::tanh(1.0)));
  std::vector<float> ex = run(UnaryOp::kExp);
  EXPECT_EQ(ex[1], 1.0f);
  EXPECT_EQ(ex[2], float(std::exp(1.0)));
}

TEST_F(RefTest, BinaryAndAxpy) {
  const float a[] = {1, -2, 3}, b[] = {4, 5, -6};
  float y[3];
  auto run = [&](BinaryOp op) {
    EXPECT_TRUE(ref->binary(op, a, b, y, 3));
    return std::vector<float>(y, y + 3);
  };
  EXPECT_EQ(run(BinaryOp::kAdd), (std::vector<float>{5, 3, -3}));
  EXPECT_EQ(run(BinaryOp::kSub), (std::vector<float>{-3, -7, 9}));
  EXPECT_EQ(run(BinaryOp::kMul), (std::vector<float>{4, -10, -18}));
  EXPECT_EQ(run(BinaryOp::kDiv), (std::vector<float>{0.25f, -0.4f, -0.5f}));
  EXPECT_EQ(run(BinaryOp::kMax), (std::vector<float>{4, 5, 3}));
  EXPECT_EQ(run(BinaryOp::kMin), (std::vector<float>{1, -2, -6}));
  float yy[] = {1, 1, 1};
  ASSERT_TRUE(ref->axpy(3, 2.0f, a, yy));
  EXPECT_EQ(std::vector<float>(yy, yy + 3), (std::vector<float>{3, -3, 7}));
  // (1 + 2^-23) + 2^-24 is a tie between two floats; the one rounding picks the even one, 1 + 2^-22.
  float one[] = {1.0f + 0x1p-23f};
  const float tiny[] = {0x1p-24f};
  ASSERT_TRUE(ref->axpy(1, 1.0f, tiny, one));
  EXPECT_EQ(one[0], 1.0f + 0x1p-22f);
}

}  // namespace
}  // namespace detaudit
