// The ConvLSTM cell and PredNet against a double-precision reference written out here (naive loops,
// the formulas of models/convlstm.hpp and models/prednet.hpp): the float forward must match the
// double one, and the float backward (cpu-ref) must match central differences of the double forward.
// Differences in double with step 1e-6 have truncation error ~1e-12 and rounding error ~1e-10, far
// below what is checked, so the error left is the float gradient's own.
//
// Non-differentiable points (ReLU at 0, hard-sigmoid at +-2.5, the pixel clamp, max-pool ties): the
// reference records which side of each kink every element is on. The base point must be at least
// kMargin away from every kink, so float and double agree on the sides; an element whose +-h
// evaluations change a side is skipped (and counted: at most a few percent). Exact zeros of ReLU
// arguments are not kinks here: they only arise as 0 - 0 where A and Ahat are both clipped, and
// every path through them has zero derivative on both sides.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/fixtures.hpp"
#include "kernels/cpu/ref.hpp"
#include "kernels/generator.hpp"
#include "models/convlstm.hpp"
#include "models/optim.hpp"
#include "models/prednet.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"

namespace detaudit {
namespace {

using Vec = std::vector<double>;

constexpr double kStep = 1e-6;    // finite-difference step, in double
constexpr double kMargin = 1e-5;  // minimum distance of the base point from every kink
constexpr double kRtol = 1e-4, kAtol = 1e-5;  // gradient tolerance: ConvLstmGradient says why

std::vector<float> rnd(size_t n, uint64_t stream, double lo, double hi) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(lo + (hi - lo) * (counter_value(91, stream, i, Dist::kUniform) + 1.0) / 2.0);
  return v;
}
Vec to_double(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

std::unique_ptr<Backend> target(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_target(text, &s), &err)) << err;
  BackendOr b = make_target_backend(s);
  EXPECT_TRUE(b) << text << ": " << b.message();
  return b ? std::move(b).value() : nullptr;
}

// ---- the double reference ---------------------------------------------------------------------------

struct Kinks {
  std::vector<uint8_t> side;
  double margin = std::numeric_limits<double>::infinity();
  int saturated = 0;  // hard-sigmoid arguments outside (-2.5, 2.5)
  int clamped = 0, clamp_total = 0;  // pixel-clamp arguments above pixel_max, of all
  double relu(double x) {
    side.push_back(x > 0);
    if (x != 0) margin = std::min(margin, std::fabs(x));
    return x > 0 ? x : 0;
  }
  double hard_sigmoid(double x) {
    const int s = x <= -2.5 ? 0 : x >= 2.5 ? 2 : 1;
    side.push_back(uint8_t(s));
    saturated += s != 1;
    margin = std::min(margin, std::fabs(std::fabs(x) - 2.5));
    return std::min(1.0, std::max(0.0, 0.2 * x + 0.5));
  }
  double clamp(double x, double hi) {
    side.push_back(x < hi);
    clamped += x >= hi, ++clamp_total;
    margin = std::min(margin, std::fabs(x - hi));
    return std::min(x, hi);
  }
  double max4(const double v[4]) {
    int k = 0;
    for (int i = 1; i < 4; ++i)
      if (v[i] > v[k]) k = i;
    side.push_back(uint8_t(k));
    if (v[k] > 0)
      for (int i = 0; i < 4; ++i)
        if (i != k) margin = std::min(margin, v[k] - v[i]);
    return v[k];
  }
};

// y[n][k] = b[k] + sum_c,r,s w[k][c][r][s] x[n][c][.+r-f/2][.+s-f/2], zero padding.
Vec conv(const Vec& x, int n, int c, int h, int w, const Vec& wt, const Vec& b, int k, int f) {
  Vec y(size_t(n) * k * h * w);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < k; ++o)
      for (int p = 0; p < h; ++p)
        for (int q = 0; q < w; ++q) {
          double s = b[o];
          for (int ci = 0; ci < c; ++ci)
            for (int r = 0; r < f; ++r)
              for (int t = 0; t < f; ++t) {
                const int yy = p + r - f / 2, xx = q + t - f / 2;
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                s += wt[((size_t(o) * c + ci) * f + r) * f + t] * x[((size_t(i) * c + ci) * h + yy) * w + xx];
              }
          y[((size_t(i) * k + o) * h + p) * w + q] = s;
        }
  return y;
}

// Per sample, the channels of a then of b.
Vec concat(const Vec& a, int ca, const Vec& b, int cb, int n, size_t hw) {
  Vec y;
  for (int i = 0; i < n; ++i) {
    y.insert(y.end(), a.begin() + i * ca * hw, a.begin() + (i + 1) * ca * hw);
    y.insert(y.end(), b.begin() + i * cb * hw, b.begin() + (i + 1) * cb * hw);
  }
  return y;
}

struct CellRef {
  int cin, k, f;
  const Vec* w;
  const Vec* b;
  Vec h, c;  // state, N x K x H x W
  void step(const Vec& x, int n, int hh, int ww, Kinks* kk) {
    const size_t hw = size_t(hh) * ww;
    if (h.empty()) h.assign(size_t(n) * k * hw, 0.0), c = h;
    const Vec z = conv(concat(x, cin, h, k, n, hw), n, cin + k, hh, ww, *w, *b, 4 * k, f);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < k; ++j)
        for (size_t l = 0; l < hw; ++l) {
          auto at = [&](int g) { return z[((size_t(i) * 4 * k) + g * k + j) * hw + l]; };
          const double ig = kk->hard_sigmoid(at(0)), fg = kk->hard_sigmoid(at(1)), og = kk->hard_sigmoid(at(2));
          const double g = std::tanh(at(3));
          const size_t e = (size_t(i) * k + j) * hw + l;
          c[e] = fg * c[e] + ig * g;
          h[e] = og * std::tanh(c[e]);
        }
  }
};

// L of models/prednet.hpp; params in PredNet::params() order.
double prednet_ref(const PredNetConfig& cfg, const std::vector<Vec>& params, const std::vector<float>& frames, Kinks* kk) {
  const int L = cfg.layers(), N = cfg.batch, F = cfg.filter;
  std::vector<CellRef> cells(L);
  std::vector<Vec> eprev(L);
  std::vector<const Vec*> ahat_w(L), ahat_b(L), a_w(L), a_b(L);
  size_t pi = 0;
  for (int l = 0; l < L; ++l) {
    const int s = cfg.stacks[l], up = l + 1 < L ? cfg.stacks[l + 1] : 0;
    cells[l] = CellRef{2 * s + up, s, F, &params[pi], &params[pi + 1], {}, {}};
    ahat_w[l] = &params[pi + 2], ahat_b[l] = &params[pi + 3];
    pi += 4;
    if (up) a_w[l] = &params[pi], a_b[l] = &params[pi + 1], pi += 2;
    eprev[l].assign(size_t(N) * 2 * s * (cfg.height >> l) * (cfg.width >> l), 0.0);
  }
  const size_t frame = size_t(N) * cfg.channels() * cfg.height * cfg.width;
  double loss = 0;
  for (int t = 0; t < cfg.nt; ++t) {
    for (int l = L - 1; l >= 0; --l) {
      const int s = cfg.stacks[l], h = cfg.height >> l, w = cfg.width >> l;
      Vec x = eprev[l];
      if (l + 1 < L) {
        const int su = cfg.stacks[l + 1];
        const Vec& r = cells[l + 1].h;
        Vec up(size_t(N) * su * h * w);
        for (size_t pl = 0; pl < size_t(N) * su; ++pl)
          for (int p = 0; p < h; ++p)
            for (int q = 0; q < w; ++q) up[(pl * h + p) * w + q] = r[(pl * (h / 2) + p / 2) * (w / 2) + q / 2];
        x = concat(x, 2 * s, up, su, N, size_t(h) * w);
      }
      cells[l].step(x, N, h, w, kk);
    }
    Vec a(frames.begin() + t * frame, frames.begin() + (t + 1) * frame);
    for (int l = 0; l < L; ++l) {
      const int s = cfg.stacks[l], h = cfg.height >> l, w = cfg.width >> l;
      const size_t hw = size_t(h) * w;
      Vec ahat = conv(cells[l].h, N, s, h, w, *ahat_w[l], *ahat_b[l], s, F);
      for (double& v : ahat) {
        v = kk->relu(v);
        if (l == 0) v = kk->clamp(v, cfg.pixel_max);
      }
      Vec e(size_t(N) * 2 * s * hw);
      double sum = 0;
      for (int i = 0; i < N; ++i)
        for (size_t j = 0; j < size_t(s) * hw; ++j) {
          const double d = ahat[i * s * hw + j] - a[i * s * hw + j];
          const double up = kk->relu(d), down = -d > 0 ? -d : 0;  // one kink, at d = 0
          e[i * 2 * s * hw + j] = up, e[i * 2 * s * hw + s * hw + j] = down;
          sum += up + down;
        }
      const double tw = t == 0 ? 0.0 : 1.0 / (cfg.nt - 1);
      loss += tw * cfg.layer_weights[l] * sum / double(e.size());
      eprev[l] = e;
      if (l + 1 == L) break;
      const int su = cfg.stacks[l + 1];
      Vec ap = conv(e, N, 2 * s, h, w, *a_w[l], *a_b[l], su, F);
      for (double& v : ap) v = kk->relu(v);
      a.assign(size_t(N) * su * hw / 4, 0.0);
      for (size_t pl = 0; pl < size_t(N) * su; ++pl)
        for (int p = 0; p < h / 2; ++p)
          for (int q = 0; q < w / 2; ++q) {
            const double* r0 = &ap[(pl * h + 2 * p) * w + 2 * q];
            const double v[4] = {r0[0], r0[1], r0[w], r0[w + 1]};
            a[(pl * (h / 2) + p) * (w / 2) + q] = kk->max4(v);
          }
    }
  }
  return loss;
}

// ---- the check --------------------------------------------------------------------------------------

struct GradStats {
  double worst = 0;      // max over checked elements of |analytic - numeric| / max|numeric| (the group's)
  double worst_rel = 0;  // max of |analytic - numeric| / |numeric| over elements with |numeric| >= max/100
  int checked = 0, skipped = 0;
};

// Central differences of f over up to `max_checks` evenly spaced elements of `x`, against `analytic`:
// |a - n| <= rtol*|n| + atol*max|n|. f returns the loss and fills the kink sides.
void check_group(const std::string& what, Vec* x, const std::vector<float>& analytic, size_t max_checks,
                 const std::function<double(Kinks*)>& f, const std::vector<uint8_t>& base_sides, double rtol,
                 double atol, GradStats* total) {
  ASSERT_EQ(x->size(), analytic.size()) << what;
  const size_t n = x->size(), k = std::min(n, max_checks);
  std::vector<size_t> idx;
  std::vector<double> num;
  int skipped = 0;
  for (size_t j = 0; j < k; ++j) {
    const size_t i = j * n / k;
    const double x0 = (*x)[i];
    Kinks kp, km;
    (*x)[i] = x0 + kStep;
    const double lp = f(&kp);
    (*x)[i] = x0 - kStep;
    const double lm = f(&km);
    (*x)[i] = x0;
    if (kp.side != base_sides || km.side != base_sides) {
      ++skipped;
      continue;
    }
    idx.push_back(i);
    num.push_back((lp - lm) / (2 * kStep));
  }
  double mx = 0;
  for (double v : num) mx = std::max(mx, std::fabs(v));
  EXPECT_GT(mx, 1e-6) << what << ": the gradient is zero at every checked element: the check would be vacuous";
  EXPECT_LE(skipped, std::max<int>(1, int(k) / 20)) << what << ": too many elements next to a kink";
  int bad = 0;
  double worst = 0;
  for (size_t j = 0; j < idx.size(); ++j) {
    const double a = analytic[idx[j]], err = std::fabs(a - num[j]);
    worst = std::max(worst, err / mx);
    if (std::fabs(num[j]) >= mx / 100) total->worst_rel = std::max(total->worst_rel, err / std::fabs(num[j]));
    if (!(err <= rtol * std::fabs(num[j]) + atol * mx) && bad++ < 5)
      ADD_FAILURE() << what << "[" << idx[j] << "]: analytic " << a << " numeric " << num[j];
  }
  total->worst = std::max(total->worst, worst);
  total->checked += int(idx.size());
  total->skipped += skipped;
}

std::vector<float> download(const Tensor& t) {
  std::vector<float> h;
  EXPECT_TRUE(t.download(&h));
  return h;
}

// The cell over 3 steps with two input parts, L = sum_t sum(wr_t * h_t): every weight, bias and input.
// Tolerance |a - n| <= kRtol*|n| + kAtol*max|n| (max over the group): cpu-ref rounds each op's output
// to float once (relative 6e-8), and the gradient is some tens of ops deep over the steps, so a few
// 1e-6 relative; an element that is a sum of cancelling terms keeps the absolute error of the larger
// terms, hence the kAtol part. Seen (the log line): 1.9e-7 of max|n|, 4.7e-6 relative.
TEST(PredNet, ConvLstmGradient) {
  auto be = make_cpu_ref();
  const int cin = 3, k = 2, n = 2, h = 4, w = 5, T = 3;
  const size_t hw = size_t(h) * w, hs = size_t(n) * k * hw;
  ConvLstm cell(be.get(), cin, k);
  ASSERT_TRUE(cell.init(7, 0));
  ASSERT_TRUE(cell.params()[1]->upload(rnd(4 * k, 1, -0.5, 0.5)));  // biases off zero, so they matter
  ASSERT_TRUE(cell.begin(n, h, w, T));
  // Inputs per step as two parts (1 + 2 channels), wide enough that some gates saturate.
  std::vector<std::vector<float>> x1(T), x2(T), wr(T);
  std::vector<Tensor> tx1(T), tx2(T), twr(T), dx1(T), dx2(T);
  for (int t = 0; t < T; ++t) {
    x1[t] = rnd(size_t(n) * hw, 10 + t, -3, 3);
    x2[t] = rnd(size_t(n) * 2 * hw, 20 + t, -3, 3);
    wr[t] = rnd(hs, 30 + t, -1, 1);
    ASSERT_TRUE(Tensor::from_host(be.get(), {n, 1, h, w}, x1[t], &tx1[t]));
    ASSERT_TRUE(Tensor::from_host(be.get(), {n, 2, h, w}, x2[t], &tx2[t]));
    ASSERT_TRUE(Tensor::from_host(be.get(), {n, k, h, w}, wr[t], &twr[t]));
    ASSERT_TRUE(Tensor::create(be.get(), {n, 1, h, w}, &dx1[t]));
    ASSERT_TRUE(Tensor::create(be.get(), {n, 2, h, w}, &dx2[t]));
  }
  double lf = 0;
  for (int t = 0; t < T; ++t) {
    ASSERT_TRUE(cell.forward_step(t, {{tx1[t].data(), 1}, {tx2[t].data(), 2}}));
    std::vector<float> ht(hs);
    ASSERT_TRUE(be->download(ht.data(), cell.h(t), hs * sizeof(float)));
    for (size_t i = 0; i < hs; ++i) lf += double(ht[i]) * wr[t][i];
  }
  for (int t = T - 1; t >= 0; --t) ASSERT_TRUE(cell.backward_step(t, twr[t].data(), {{dx1[t].data(), 1}, {dx2[t].data(), 2}}));

  Vec wt = to_double(download(*cell.params()[0])), bias = to_double(download(*cell.params()[1]));
  std::vector<Vec> xin(T);
  for (int t = 0; t < T; ++t) xin[t] = concat(to_double(x1[t]), 1, to_double(x2[t]), 2, n, hw);
  auto loss = [&](Kinks* kk) {
    CellRef ref{cin, k, 3, &wt, &bias, {}, {}};
    double l = 0;
    for (int t = 0; t < T; ++t) {
      ref.step(xin[t], n, h, w, kk);
      for (size_t i = 0; i < hs; ++i) l += ref.h[i] * wr[t][i];
    }
    return l;
  };
  Kinks base;
  const double ld = loss(&base);
  EXPECT_NEAR(lf, ld, 1e-5 * std::fabs(ld)) << "float forward against the double reference";
  ASSERT_GT(base.margin, kMargin) << "the base point sits on a kink: choose other inputs";
  EXPECT_GT(base.saturated, 0) << "no gate saturates: the clip branch is untested";

  GradStats st;
  const double rtol = kRtol, atol = kAtol;
  check_group("convlstm weight", &wt, download(*cell.grads()[0]), 10000, loss, base.side, rtol, atol, &st);
  check_group("convlstm bias", &bias, download(*cell.grads()[1]), 10000, loss, base.side, rtol, atol, &st);
  for (int t = 0; t < T; ++t) {
    const std::vector<float> d = [&] {
      std::vector<float> a = download(dx1[t]), b = download(dx2[t]), out;
      for (int i = 0; i < n; ++i) {
        out.insert(out.end(), a.begin() + i * hw, a.begin() + (i + 1) * hw);
        out.insert(out.end(), b.begin() + i * 2 * hw, b.begin() + (i + 1) * 2 * hw);
      }
      return out;
    }();
    check_group("convlstm dx step " + std::to_string(t), &xin[t], d, 10000, loss, base.side, rtol, atol, &st);
  }
  std::fprintf(stderr, "convlstm: %d elements checked, %d skipped at kinks, worst |a - n| / max|n| %.2e, "
               "|a - n| / |n| %.2e, margin %.2e, %d gates saturated\n",
               st.checked, st.skipped, st.worst, st.worst_rel, base.margin, base.saturated);
}

// A backend that forwards everything to another except the fused ConvLSTM cell ops, which it lacks: the
// cell then runs its separate ops.
class WithoutFusedCell final : public Backend {
 public:
  explicit WithoutFusedCell(Backend* inner) : in_(inner) {}
  std::string name() const override { return in_->name(); }
  void* alloc(size_t bytes) override { return in_->alloc(bytes); }
  void free(void* p) override { in_->free(p); }
  Status upload(void* d, const void* s, size_t b) override { return in_->upload(d, s, b); }
  Status download(void* d, const void* s, size_t b) override { return in_->download(d, s, b); }
  Status zero(void* p, size_t b) override { return in_->zero(p, b); }
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    return in_->conv2d_fwd(s, x, w, y);
  }
  Status conv2d_fwd_bias(const ConvShape& s, const float* x, const float* w, const float* b, float* y) override {
    return in_->conv2d_fwd_bias(s, x, w, b, y);
  }
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    return in_->conv2d_bwd_data(s, dy, w, dx);
  }
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    return in_->conv2d_bwd_filter(s, x, dy, dw);
  }
  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override { return in_->maxpool_fwd(s, x, y); }
  Status maxpool_bwd(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) override {
    return in_->maxpool_bwd(s, x, y, dy, dx);
  }
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    return in_->reduce(op, x, y, n, out);
  }
  Status unary(UnaryOp op, const float* x, float* y, size_t n) override { return in_->unary(op, x, y, n); }
  Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) override {
    return in_->binary(op, a, b, y, n);
  }
  Status axpy(size_t n, float alpha, const float* x, float* y) override { return in_->axpy(n, alpha, x, y); }
  Status bias_add(float* y, const float* b, size_t n, size_t c, size_t hw) override {
    return in_->bias_add(y, b, n, c, hw);
  }
  Status bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) override {
    return in_->bias_grad(dy, db, n, c, hw);
  }
  Status unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) override {
    return in_->unary_bwd(op, x, y, dy, dx, n);
  }
  Status upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) override {
    return in_->upsample2_fwd(x, y, planes, h, w);
  }
  Status upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) override {
    return in_->upsample2_bwd(dy, dx, planes, h, w);
  }
  Status copy_2d(size_t r, size_t c, const float* s, size_t sl, float* d, size_t dl) override {
    return in_->copy_2d(r, c, s, sl, d, dl);
  }
  Status fill(float* y, float v, size_t n) override { return in_->fill(y, v, n); }
  Status adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) override {
    return in_->adam_step(p, w, g, m, v, n);
  }

 private:
  Backend* in_;
};

PredNetConfig tiny_config();
std::vector<float> frames_for(const PredNetConfig& c, uint64_t stream);

// The cpu backend's one-pass ConvLSTM gate arithmetic (lstm_cell_fwd/bwd) gives the bits of the separate
// ops it replaces: three Adam steps of a three-layer PredNet with saturating gates, every loss and every
// parameter afterwards bit for bit, on the cpu backend directly and through a wrapper without the
// fused ops (1 and 2 threads, direct and Winograd convolutions).
TEST(PredNet, FusedCellGivesTheSeparateOpsBits) {
  PredNetConfig c = tiny_config();
  c.stacks = {1, 4, 8};
  c.layer_weights = {1, 0.5f, 0.25f};
  c.nt = 4;
  for (const char* spec : {"cpu?order=blocked&threads=2", "cpu?order=sequential&threads=1&conv=winograd"}) {
    auto be = target(spec);
    ASSERT_TRUE(be) << spec;
    WithoutFusedCell unfused(be.get());
    std::vector<std::vector<float>> params[2];
    std::vector<double> losses[2];
    for (int v = 0; v < 2; ++v) {
      Backend* b = v == 0 ? be.get() : static_cast<Backend*>(&unfused);
      PredNet net(b, c);
      ASSERT_TRUE(net.init(5));
      const std::vector<Tensor*> p = net.params();
      for (size_t i = 1; i < p.size(); i += 2) ASSERT_TRUE(p[i]->upload(rnd(p[i]->size(), 300 + i, -2, 2)));
      Tensor frames;
      ASSERT_TRUE(Tensor::from_host(b, {c.nt * c.batch, c.channels(), c.height, c.width}, frames_for(c, 7), &frames));
      Adam adam(b);
      for (int step = 0; step < 3; ++step) {
        double loss = 0;
        ASSERT_TRUE(net.forward(frames, &loss));
        ASSERT_TRUE(net.backward());
        ASSERT_TRUE(adam.step(net.params(), net.grads()));
        losses[v].push_back(loss);
      }
      for (Tensor* t : net.params()) params[v].push_back(download(*t));
    }
    ASSERT_EQ(losses[0].size(), losses[1].size());
    for (size_t i = 0; i < losses[0].size(); ++i)
      EXPECT_EQ(std::memcmp(&losses[0][i], &losses[1][i], sizeof(double)), 0) << spec << " loss " << i;
    ASSERT_EQ(params[0].size(), params[1].size());
    for (size_t i = 0; i < params[0].size(); ++i)
      EXPECT_EQ(std::memcmp(params[0][i].data(), params[1][i].data(), params[0][i].size() * sizeof(float)), 0)
          << spec << " parameter " << i;
  }
}

PredNetConfig tiny_config() {
  PredNetConfig c;
  c.height = c.width = 8;
  c.stacks = {1, 4};
  c.layer_weights = {1, 0};
  c.nt = 3, c.batch = 2;
  return c;
}

// Frames in [0.1, 0.9] (no pixel at the clamp or at 0), step-major.
std::vector<float> frames_for(const PredNetConfig& c, uint64_t stream) {
  return rnd(size_t(c.nt) * c.batch * c.channels() * c.height * c.width, stream, 0.1, 0.9);
}

// Random biases in [-0.3, 0.3]: at zero biases every unit of step 0 sits exactly at a ReLU kink (the
// states start at zero), so the check would be one-sided there. Layer 0's Ahat bias in [0.8, 1] puts
// some predicted pixels above pixel_max, so the clamp's zero gradient is exercised too.
void randomise_biases(PredNet* net) {
  const std::vector<Tensor*> p = net->params();
  for (size_t i = 1; i < p.size(); i += 2) ASSERT_TRUE(p[i]->upload(rnd(p[i]->size(), 100 + i, -0.3, 0.3)));
  ASSERT_TRUE(p[3]->upload(rnd(p[3]->size(), 99, 0.8, 1.0)));
}

// A two-layer PredNet over three steps, every parameter group (up to 40 evenly spaced elements each),
// with the paper's layer weights (1, 0) and with (1, 0.5), which puts layer 1's errors into the loss
// too. Tolerance as for the cell. Seen: 2.6e-7 of max|n|, 2.3e-6 relative.
TEST(PredNet, TinyGradient) {
  auto be = make_cpu_ref();
  for (const std::vector<float>& lw : {std::vector<float>{1, 0}, std::vector<float>{1, 0.5f}}) {
    PredNetConfig cfg = tiny_config();
    cfg.layer_weights = lw;
    PredNet net(be.get(), cfg);
    ASSERT_TRUE(net.init(3));
    randomise_biases(&net);
    const std::vector<float> fh = frames_for(cfg, 1);
    Tensor frames;
    ASSERT_TRUE(Tensor::from_host(be.get(), {cfg.nt * cfg.batch, 1, 8, 8}, fh, &frames));
    double lf = 0;
    ASSERT_TRUE(net.forward(frames, &lf));
    ASSERT_TRUE(net.backward());

    std::vector<Vec> params;
    for (Tensor* t : net.params()) params.push_back(to_double(download(*t)));
    auto loss = [&](Kinks* kk) { return prednet_ref(cfg, params, fh, kk); };
    Kinks base;
    const double ld = loss(&base);
    EXPECT_NEAR(lf, ld, 1e-5 * ld) << "float forward against the double reference";
    ASSERT_GT(base.margin, kMargin) << "the base point sits on a kink: choose other inputs";
    EXPECT_GT(base.clamped, 0) << "no pixel reaches the clamp: its branch is untested";
    EXPECT_LT(base.clamped, base.clamp_total / 2);

    GradStats st;
    const std::vector<Tensor*> g = net.grads();
    const char* names[] = {"cell w", "cell b", "ahat w", "ahat b", "a w", "a b"};
    for (size_t i = 0, l = 0, j = 0; i < g.size(); ++i) {
      const std::string what = "layer " + std::to_string(l) + " " + names[j] + " (weights " + std::to_string(lw[1]) + ")";
      check_group(what, &params[i], download(*g[i]), 40, loss, base.side, kRtol, kAtol, &st);
      if (++j == (l + 1 < size_t(cfg.layers()) ? 6u : 4u)) j = 0, ++l;
    }
    std::fprintf(stderr, "prednet (1, %g): %d elements checked, %d skipped at kinks, worst |a - n| / max|n| %.2e, "
                 "|a - n| / |n| %.2e, margin %.2e, %d of %d pixels clamped\n",
                 lw[1], st.checked, st.skipped, st.worst, st.worst_rel, base.margin, base.clamped, base.clamp_total);
  }
}

struct TrainRun {
  double loss = 0;
  std::vector<float> pred;
  std::vector<std::vector<float>> grads;
};

TrainRun run_on(Backend* be, const PredNetConfig& cfg, int steps = 1) {
  TrainRun r;
  PredNet net(be, cfg);
  EXPECT_TRUE(net.init(11));
  Tensor frames;
  EXPECT_TRUE(Tensor::from_host(be, {cfg.nt * cfg.batch, cfg.channels(), cfg.height, cfg.width}, frames_for(cfg, 2), &frames));
  Adam opt(be, AdamParams{cfg.lr});
  for (int s = 0; s < steps; ++s) {
    EXPECT_TRUE(net.forward(frames, &r.loss));
    EXPECT_TRUE(net.backward());
    if (s + 1 < steps) {
      EXPECT_TRUE(opt.step(net.params(), net.grads()));
    }
  }
  r.pred = download(net.predictions());
  for (Tensor* g : net.grads()) r.grads.push_back(download(*g));
  return r;
}

void expect_same_bits(const TrainRun& a, const TrainRun& b, const std::string& what) {
  EXPECT_EQ(0, std::memcmp(&a.loss, &b.loss, sizeof(double))) << what << ": loss " << a.loss << " vs " << b.loss;
  ASSERT_EQ(a.pred.size(), b.pred.size());
  EXPECT_EQ(0, std::memcmp(a.pred.data(), b.pred.data(), a.pred.size() * sizeof(float))) << what << ": predictions";
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_EQ(0, std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)))
        << what << ": gradient " << i;
}

// Three layers, 16 x 16, two Adam steps then a forward and backward.
PredNetConfig small_config() {
  PredNetConfig c;
  c.height = c.width = 16;
  c.stacks = {1, 4, 8};
  c.layer_weights = {1, 0, 0};
  c.nt = 4, c.batch = 2;
  return c;
}

TEST(PredNet, BlockedOrderRepeatsBitwise) {
  auto a = target("cpu?order=blocked&threads=2");
  auto b = target("cpu?order=blocked&threads=2");
  ASSERT_TRUE(a && b);
  expect_same_bits(run_on(a.get(), small_config(), 3), run_on(b.get(), small_config(), 3), "blocked, threads 2, twice");
}

// order=portable promises the same bits on any thread count; it has no tanh forward, so the cell
// runs its 2*sigmoid(2x) - 1 there.
TEST(PredNet, PortableOrderSameBitsOnOneAndTwoThreads) {
  auto a = target("cpu?order=portable&threads=1");
  auto b = target("cpu?order=portable&threads=2");
  ASSERT_TRUE(a && b);
  expect_same_bits(run_on(a.get(), small_config(), 3), run_on(b.get(), small_config(), 3), "portable, threads 1 and 2");
}

// The same model on the CPU targets: loss and gradients close to cpu-ref's (different summation
// orders, and on portable a tanh within a few ulps).
TEST(PredNet, CpuTargetsAgreeWithRef) {
  auto ref = make_cpu_ref();
  const TrainRun want = run_on(ref.get(), small_config());
  for (const char* spec : {"cpu?threads=2", "cpu?order=portable&threads=2"}) {
    auto be = target(spec);
    ASSERT_TRUE(be);
    const TrainRun got = run_on(be.get(), small_config());
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss) << spec;
    for (size_t i = 0; i < want.grads.size(); ++i) {
      double mx = 0, err = 0;
      for (size_t j = 0; j < want.grads[i].size(); ++j) {
        mx = std::max(mx, std::fabs(double(want.grads[i][j])));
        err = std::max(err, std::fabs(double(got.grads[i][j]) - want.grads[i][j]));
      }
      EXPECT_LE(err, 1e-4 * mx) << spec << " gradient " << i;
    }
  }
}

// A few Adam steps on one fixed sequence lower the loss: the gradients point downhill.
TEST(PredNet, AdamStepsLowerTheLoss) {
  auto be = target("cpu?threads=2");
  ASSERT_TRUE(be);
  PredNetConfig cfg = small_config();
  cfg.lr = 1e-2f;
  const TrainRun first = run_on(be.get(), cfg, 1), later = run_on(be.get(), cfg, 15);
  EXPECT_LT(later.loss, 0.8 * first.loss) << first.loss << " -> " << later.loss;
}

TEST(PredNet, ConfigurationsAndRefusals) {
  const PredNetConfig p = prednet_paper(), q = prednet_quick();
  EXPECT_EQ(p.validate(), "");
  EXPECT_EQ(q.validate(), "");
  EXPECT_EQ(p.stacks, (std::vector<int>{3, 48, 96, 192}));
  EXPECT_EQ(p.height * 10 + p.width, 128 * 10 + 160);
  EXPECT_EQ(q.stacks, (std::vector<int>{1, 16, 32, 64}));
  EXPECT_EQ(q.nt, 10);
  EXPECT_EQ(q.batch, 4);
  PredNetConfig bad = q;
  bad.height = 60;  // not divisible by 8
  EXPECT_NE(bad.validate(), "");
  auto be = make_cpu_ref();
  PredNet net(be.get(), bad);
  EXPECT_EQ(net.init(1).code(), Status::Code::kInvalid);
  PredNet ok(be.get(), tiny_config());
  ASSERT_TRUE(ok.init(1));
  Tensor wrong;
  ASSERT_TRUE(Tensor::create(be.get(), {6, 1, 8, 4}, &wrong));
  EXPECT_EQ(ok.forward(wrong, nullptr).code(), Status::Code::kInvalid);
  EXPECT_EQ(ok.backward().code(), Status::Code::kInvalid);
}

}  // namespace
}  // namespace detaudit
