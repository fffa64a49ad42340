// Every layer's backward against central finite differences of a scalar loss L = sum(wr * y) (wr
// fixed random weights), evaluated in double on the host from the layer's forward output. Inputs
// stay away from kinks (ReLU at 0, hard-sigmoid at +-2.5, max-pool ties) by more than the step, so
// the differences are meaningful; every checked gradient must also be clearly nonzero somewhere.
// Run on cpu-ref (the oracle) and on the native backend (order=blocked, 2 threads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/native.hpp"
#include "kernels/cpu/ref.hpp"
#include "models/layers.hpp"
#include "kernels/generator.hpp"

namespace detaudit {
namespace {

std::vector<float> rnd(size_t n, uint64_t stream, double lo, double hi) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(lo + (hi - lo) * (counter_value(77, stream, i, Dist::kUniform) + 1.0) / 2.0);
  return v;
}

// Pushes |v| >= gap away from 0 (keeping the sign).
std::vector<float> away_from_zero(std::vector<float> v, float gap) {
  for (float& x : v) x = x >= 0 ? x + gap : x - gap;
  return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// analytic vs numeric, elementwise |a - n| <= 1e-2*|n| + 1e-3*max|n|; max|n| must be > 1e-3.
void expect_grad_close(const std::vector<float>& analytic, const std::vector<double>& numeric, const std::string& what) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double mx = 0;
  for (double v : numeric) mx = std::max(mx, std::fabs(v));
  EXPECT_GT(mx, 1e-3) << what << ": gradient is zero everywhere, the check would be vacuous";
  int bad = 0;
  for (size_t i = 0; i < numeric.size() && bad < 5; ++i) {
    const double err = std::fabs(double(analytic[i]) - numeric[i]);
    if (!(err <= 1e-2 * std::fabs(numeric[i]) + 1e-3 * mx)) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " numeric " << numeric[i];
      ++bad;
    }
  }
}

// Central differences of f with respect to every element of `host` (uploaded into t each time).
std::vector<double> numeric_grad(const Tensor& t, std::vector<float> host, const std::function<double()>& f, float h) {
  std::vector<double> g(host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    const float x0 = host[i];
    host[i] = x0 + h;
    const float xp = host[i];
    EXPECT_TRUE(t.upload(host));
    const double lp = f();
    host[i] = x0 - h;
    const float xm = host[i];
    EXPECT_TRUE(t.upload(host));
    const double lm = f();
    host[i] = x0;
    g[i] = (lp - lm) / (double(xp) - double(xm));
  }
  EXPECT_TRUE(t.upload(host));
  return g;
}

class LayerGrad : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cpu-ref") {
      be_ = make_cpu_ref();
    } else {
      CpuNativeOptions o;
      o.threads = 2;
      o.order = ReduceOrder::kBlocked;
      be_ = make_cpu_native(o);
    }
  }

  // Checks dx and every parameter gradient of `layer` at input x.
  void check(Layer& layer, const Shape& xs, const std::vector<float>& xh, float h = 1.0f / 1024) {
    Backend* b = be_.get();
    Tensor x;
    ASSERT_TRUE(Tensor::from_host(b, xs, xh, &x));
    const Tensor* y = nullptr;
    ASSERT_TRUE(layer.forward(x, &y));
    const std::vector<float> wr = rnd(y->size(), 500, -1.0, 1.0);
    Tensor dy;
    ASSERT_TRUE(Tensor::from_host(b, y->shape(), wr, &dy));
    const Tensor* dx = nullptr;
    ASSERT_TRUE(layer.backward(dy, &dx));
    ASSERT_NE(dx, nullptr);
    std::vector<float> dx_h;
    ASSERT_TRUE(dx->download(&dx_h));
    std::vector<std::vector<float>> grads;
    for (Tensor* g : layer.grads()) {
      grads.emplace_back();
      ASSERT_TRUE(g->download(&grads.back()));
    }
    auto loss = [&]() {
      const Tensor* yy = nullptr;
      EXPECT_TRUE(layer.forward(x, &yy));
      std::vector<float> yh;
      EXPECT_TRUE(yy->download(&yh));
      return dot(wr, yh);
    };
    expect_grad_close(dx_h, numeric_grad(x, xh, loss, h), layer.name() + " dx on " + GetParam());
    auto params = layer.params();
    for (size_t p = 0; p < params.size(); ++p) {
      std::vector<float> ph;
      ASSERT_TRUE(params[p]->download(&ph));
      expect_grad_close(grads[p], numeric_grad(*params[p], ph, loss, h),
                        layer.name() + " param " + std::to_string(p) + " on " + GetParam());
    }
  }

  std::unique_ptr<Backend> be_;
};

TEST_P(LayerGrad, Linear) {
  Linear l(be_.get(), 5, 4);
  ASSERT_TRUE(l.init(3, 0));
  std::vector<float> b = rnd(4, 9, -0.5, 0.5);  // nonzero bias so the forward uses it
  ASSERT_TRUE(l.params()[1]->upload(b));
  check(l, {3, 5}, rnd(15, 1, -1, 1));
}

TEST_P(LayerGrad, Conv2dSamePadding) {
  Conv2d c(be_.get(), 3, 4, 3, 1, 1);
  ASSERT_TRUE(c.init(3, 16));
  ASSERT_TRUE(c.params()[1]->upload(rnd(4, 10, -0.5, 0.5)));
  check(c, {2, 3, 5, 6}, rnd(180, 2, -1, 1));
}

TEST_P(LayerGrad, Conv2dStride2) {
  Conv2d c(be_.get(), 2, 3, 3, 2, 1);
  ASSERT_TRUE(c.init(4, 16));
  check(c, {2, 2, 7, 6}, rnd(168, 3, -1, 1));
}

TEST_P(LayerGrad, Relu) {
  Activation a(be_.get(), UnaryOp::kRelu);
  check(a, {2, 3, 4, 5}, away_from_zero(rnd(120, 4, -1, 1), 0.02f));
}

TEST_P(LayerGrad, Sigmoid) {
  Activation a(be_.get(), UnaryOp::kSigmoid);
  check(a, {2, 60}, rnd(120, 5, -4, 4));
}

TEST_P(LayerGrad, Tanh) {
  Activation a(be_.get(), UnaryOp::kTanh);
  check(a, {2, 60}, rnd(120, 6, -2, 2));
}

TEST_P(LayerGrad, HardSigmoid) {
  Activation a(be_.get(), UnaryOp::kHardSigmoid);
  std::vector<float> x = rnd(120, 7, -4, 4);
  for (float& v : x)
    if (std::fabs(std::fabs(v) - 2.5f) < 0.02f) v += 0.05f;  // off the corners of the clip
  check(a, {2, 60}, x);
  // Keras' slope 0.2, not PyTorch's 1/6.
  Tensor t;
  ASSERT_TRUE(Tensor::from_host(be_.get(), {1, 3}, {-3.0f, 0.5f, 3.0f}, &t));
  const Tensor* y = nullptr;
  ASSERT_TRUE(a.forward(t, &y));
  std::vector<float> yh;
  ASSERT_TRUE(y->download(&yh));
  EXPECT_EQ(yh, (std::vector<float>{0.0f, 0.6f, 1.0f}));
}

TEST_P(LayerGrad, MaxPool2) {
  MaxPool2 m(be_.get());
  // A permutation of distinct values 0.05 apart: no ties within 2h.
  const size_t n = 2 * 3 * 6 * 4;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = float((i * 37) % n) * 0.05f - 3.0f;
  check(m, {2, 3, 6, 4}, x);
}

TEST_P(LayerGrad, Upsample2) {
  Upsample2 u(be_.get());
  check(u, {2, 3, 3, 4}, rnd(72, 8, -1, 1));
}

TEST_P(LayerGrad, Concat) {
  Backend* b = be_.get();
  Tensor a, c, out, da, db;
  const std::vector<float> ah = rnd(2 * 2 * 3 * 3, 11, -1, 1), ch = rnd(2 * 3 * 3 * 3, 12, -1, 1);
  ASSERT_TRUE(Tensor::from_host(b, {2, 2, 3, 3}, ah, &a));
  ASSERT_TRUE(Tensor::from_host(b, {2, 3, 3, 3}, ch, &c));
  ASSERT_TRUE(concat_channels(a, c, &out));
  ASSERT_EQ(out.shape(), (Shape{2, 5, 3, 3}));
  const std::vector<float> wr = rnd(out.size(), 13, -1, 1);
  Tensor dout;
  ASSERT_TRUE(Tensor::from_host(b, out.shape(), wr, &dout));
  ASSERT_TRUE(concat_channels_bwd(dout, a.shape(), c.shape(), &da, &db));
  std::vector<float> dah, dch;
  ASSERT_TRUE(da.download(&dah));
  ASSERT_TRUE(db.download(&dch));
  auto loss = [&]() {
    EXPECT_TRUE(concat_channels(a, c, &out));
    std::vector<float> oh;
    EXPECT_TRUE(out.download(&oh));
    return dot(wr, oh);
  };
  expect_grad_close(dah, numeric_grad(a, ah, loss, 1.0f / 1024), "concat da");
  expect_grad_close(dch, numeric_grad(c, ch, loss, 1.0f / 1024), "concat db");
}

void check_loss(Backend* b, LossOp op, const std::vector<float>& yh, const std::vector<float>& th) {
  Tensor y, t;
  ASSERT_TRUE(Tensor::from_host(b, {4, 16}, yh, &y));
  ASSERT_TRUE(Tensor::from_host(b, {4, 16}, th, &t));
  Loss l(b, op);
  float v = 0;
  ASSERT_TRUE(l.forward(y, t, &v));
  double want = 0;
  for (size_t i = 0; i < yh.size(); ++i) {
    const double d = double(yh[i]) - double(th[i]);
    want += op == LossOp::kMse ? d * d : std::fabs(d);
  }
  want /= double(yh.size());
  EXPECT_NEAR(v, want, 1e-6 * want) << to_string(op);
  std::vector<float> g;
  ASSERT_TRUE(l.grad().download(&g));
  auto f = [&]() {
    float val = 0;
    EXPECT_TRUE(l.forward(y, t, &val));
    return double(val);
  };
  expect_grad_close(g, numeric_grad(y, yh, f, 1.0f / 1024), std::string(to_string(op)) + " loss dy");
}

TEST_P(LayerGrad, MseLoss) { check_loss(be_.get(), LossOp::kMse, rnd(64, 14, 0, 1), rnd(64, 15, 0, 1)); }

TEST_P(LayerGrad, L1Loss) {
  std::vector<float> y = rnd(64, 16, 0, 1), t = y, d = away_from_zero(rnd(64, 17, -0.3, 0.3), 0.02f);
  for (size_t i = 0; i < t.size(); ++i) t[i] = y[i] + d[i];  // |y - t| >= 0.02: no kink within 2h
  check_loss(be_.get(), LossOp::kL1, y, t);
}

INSTANTIATE_TEST_SUITE_P(Backends, LayerGrad, ::testing::Values("cpu-ref", "native"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param == "cpu-ref" ? std::string("ref") : i.param;
                         });

// Native training ops against cpu-ref on random inputs (tol + |ref|*eps), and the optimisers' first
// steps against a hand computation.
TEST(TrainOps, NativeMatchesRef) {
  auto ref = make_cpu_ref();
  for (ReduceOrder order : {ReduceOrder::kSequential, ReduceOrder::kPairwise, ReduceOrder::kBlocked, ReduceOrder::kAtomic}) {
    CpuNativeOptions o;
    o.threads = 2;
    o.order = order;
    o.forced_atomic_order_seed = order == ReduceOrder::kAtomic ? 5 : 0;
    auto nat = make_cpu_native(o);
    for (size_t hw : {size_t(1), size_t(49), size_t(784)}) {
      const size_t n = 64, c = 16;  // float sums of n*hw terms in [-1, 1): error ~ 1e-7 * n*hw
      std::vector<float> dy = rnd(n * c * hw, 20 + hw, -1, 1), d1(c), d2(c);
      ASSERT_TRUE(ref->bias_grad(dy.data(), d1.data(), n, c, hw));
      ASSERT_TRUE(nat->bias_grad(dy.data(), d2.data(), n, c, hw));
      for (size_t j = 0; j < c; ++j) EXPECT_NEAR(d2[j], d1[j], 1e-6 * double(n * hw)) << to_string(order) << " hw " << hw;
    }
    std::vector<float> y = rnd(50000, 30, 0, 1), t = rnd(50000, 31, 0, 1), g1(y.size()), g2(y.size());
    for (LossOp op : {LossOp::kMse, LossOp::kL1}) {
      float v1 = 0, v2 = 0;
      ASSERT_TRUE(ref->loss(op, y.data(), t.data(), y.size(), &v1, g1.data()));
      ASSERT_TRUE(nat->loss(op, y.data(), t.data(), y.size(), &v2, g2.data()));
      EXPECT_NEAR(v2, v1, 1e-5 * v1) << to_string(op);
      for (size_t i = 0; i < y.size(); i += 997) EXPECT_NEAR(g2[i], g1[i], 1e-6 * std::fabs(g1[i]) + 1e-12);
    }
  }
}

// The elementwise training ops round the same single operations on both backends, however the
// native one splits and vectorises them: bitwise equality with the formula written out here. Shapes
// cover a linear layer's rows (hw = 1, wide enough to be split over threads), odd sizes, conv planes
// and no channels at all.
TEST(TrainOps, ElementwiseOpsMatchRefBitwise) {
  auto ref = make_cpu_ref();
  for (int threads : {1, 2, 3}) {
    CpuNativeOptions o;
    o.threads = threads;
    auto nat = make_cpu_native(o);
    for (auto [n, c, hw] :
         {std::tuple<size_t, size_t, size_t>{5, 7, 1}, {64, 1568, 1}, {3, 4, 9}, {64, 16, 784}, {3, 0, 1}, {2, 0, 5}}) {
      std::vector<float> y1 = rnd(n * c * hw, 40 + hw, -1, 1), y2 = y1, b = rnd(c, 41, -1, 1), want = y1;
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < c; ++j)
          for (size_t l = 0; l < hw; ++l) want[(i * c + j) * hw + l] = want[(i * c + j) * hw + l] + b[j];
      ASSERT_TRUE(ref->bias_add(y1.data(), b.data(), n, c, hw));
      ASSERT_TRUE(nat->bias_add(y2.data(), b.data(), n, c, hw));
      // c == 0 gives empty vectors, whose data() may be null: memcmp must not see them.
      if (want.empty()) continue;
      EXPECT_EQ(0, std::memcmp(want.data(), y1.data(), y1.size() * sizeof(float))) << "ref bias_add hw " << hw;
      EXPECT_EQ(0, std::memcmp(want.data(), y2.data(), y2.size() * sizeof(float)))
          << "bias_add threads " << threads << " n " << n << " c " << c << " hw " << hw;
    }
    const size_t m = 100003;  // odd, and above the threshold for splitting over threads
    std::vector<float> x = rnd(m, 42, -3, 3), yv = rnd(m, 43, 0, 1), dy = rnd(m, 44, -1, 1);
    for (UnaryOp op : {UnaryOp::kRelu, UnaryOp::kSigmoid, UnaryOp::kTanh, UnaryOp::kHardSigmoid}) {
      std::vector<float> d2(m);
      ASSERT_TRUE(nat->unary_bwd(op, x.data(), yv.data(), dy.data(), d2.data(), m));
      // cpu-ref rounds these in double; the float formula is the one the native backend promises.
      std::vector<float> want(m);
      for (size_t i = 0; i < m; ++i) {
        switch (op) {
          case UnaryOp::kRelu: want[i] = x[i] > 0.0f ? dy[i] : 0.0f; break;
          case UnaryOp::kSigmoid: want[i] = dy[i] * (yv[i] * (1.0f - yv[i])); break;
          case UnaryOp::kTanh: want[i] = dy[i] * (1.0f - yv[i] * yv[i]); break;
          default: want[i] = (x[i] > -2.5f && x[i] < 2.5f) ? dy[i] * 0.2f : 0.0f; break;
        }
      }
      EXPECT_EQ(0, std::memcmp(want.data(), d2.data(), m * sizeof(float))) << to_string(op) << " threads " << threads;
    }
  }
}

TEST(TrainOps, AdamAndSgdFirstStep) {
  CpuNativeOptions o;
  auto nat = make_cpu_native(o);
  auto ref = make_cpu_ref();
  for (Backend* b : {nat.get(), ref.get()}) {
    std::vector<float> w = {1.0f, -2.0f}, g = {0.5f, -0.25f}, m(2, 0.0f), v(2, 0.0f);
    AdamParams p;
    p.lr = 0.1f;
    p.bias_correction1 = 1.0f - 0.9f;
    p.bias_correction2 = float(1.0 - 0.999);
    ASSERT_TRUE(b->adam_step(p, w.data(), g.data(), m.data(), v.data(), 2));
    // First Adam step moves each weight by about lr * sign(g).
    EXPECT_NEAR(w[0], 0.9f, 1e-5) << b->name();
    EXPECT_NEAR(w[1], -1.9f, 1e-5) << b->name();
    std::vector<float> w2 = {1.0f}, g2 = {0.5f}, vel = {0.25f};
    ASSERT_TRUE(b->sgd_step(SgdParams{0.1f, 0.9f}, w2.data(), g2.data(), vel.data(), 1));
    EXPECT_FLOAT_EQ(vel[0], 0.725f) << b->name();
    EXPECT_FLOAT_EQ(w2[0], 1.0f - 0.0725f) << b->name();
  }
}

TEST(TrainOps, UnsupportedByDefault) {
  struct Bare : Backend {
    std::string name() const override { return "bare"; }
  } bare;
  float x = 0;
  Status st = bare.bias_grad(&x, &x, 1, 1, 1);
  EXPECT_EQ(st.code(), Status::Code::kUnsupported);
  EXPECT_NE(st.message().find("bias gradient"), std::string::npos);
}

}  // namespace
}  // namespace detaudit
