#include "probes/workload.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/ref.hpp"
#include "kernels/generator.hpp"

namespace detaudit {

namespace {
// Input streams: each tensor of a workload draws from its own counter stream.
constexpr uint64_t kStreamA = 1, kStreamB = 2, kStreamC = 3;

Dist dist_of(const Spec& s) { return s.get("dist") == "int" ? Dist::kInt : Dist::kUniform; }
uint64_t seed_of(const Spec& s) { return uint64_t(s.get_int("seed", 1)); }

// ---- Error bounds ------------------------------------------------------------------------
// Notation: y the exact result, y_o the oracle's (cpu-ref) output, y^ a target's; u the unit roundoff of
// the workload's format (2^-24 f32, 2^-53 f64), u_a that of cpu-ref's accumulator (2^-53, double; 2^-64,
// long double, for gemm_f64); γ_n(u) = n·u / (1 − n·u) (contract/metrics.hpp). Every bound holds for any
// summation order and any blocking: Higham's bounds (Accuracy and Stability of Numerical Algorithms,
// 3.1 and Lemma 3.3) hold for every binary tree of additions, and an FMA only removes roundings.
// Assumed: no overflow and no underflow. The generator's inputs are on a 2^-23 grid in [-1, 1) or
// small integers, so every product is a multiple of 2^-46 and every value any order forms a multiple
// of 2^-69 (f32; 2^-98 in f64): zero or far above the subnormal range, where rounding is relative.

// A sum of k products (matmul, batchinv, conv2d, reduce sum and dot): y = Σ_{t<=k} p_t and M = Σ|p_t|,
// which the magnitude run gives: the same op on cpu-ref with every operand replaced by its absolute
// values. (Max-pool backward, a sum of up to k gradients, computes its M on the host: see
// PoolWorkload::error_bound.)
//  - a correct kernel: |y^ − y| <= γ_k(u)·M;
//  - the oracle: |y_acc − y| <= γ_k(u_a)·M, and y_o = fl(y_acc) adds u·|y_acc| <= u·(1 + γ_k(u_a))·M;
//  - so |y^ − y_o| <= (γ_k(u) + u + (1 + u)·γ_k(u_a))·M <= (γ_{k+1}(u) + (1 + u)·γ_k(u_a))·M, since
//    γ_k + u <= γ_{k+1}: the +1 is the oracle's own rounding of its result to the output format;
//  - M is known as M_o = fl(M_acc), with M_acc >= (1 − γ_k(u_a))·M (the terms are nonnegative), so
//    M <= M_o / ((1 − u)·(1 − γ_k(u_a))).
// The u_a terms move the bound by under 2^-20 of itself in f32, under 2^-10 in f64.
double sum_bound_of(double m_o, int64_t k, double u, double ua) {
  const double ga = gamma_n(double(k), ua);
  return (gamma_n(double(k + 1), u) + (1 + u) * ga) * m_o / ((1 - u) * (1 - ga));
}

// L2 norm, y = sqrt(s), s = Σ x_i² over n elements (f32).
//  - a correct kernel: s^ = Σ x_i²·(1 + θ_i), |θ_i| <= γ_n(u) (a dot product of x with itself), so
//    s^ = s·(1 + θ), |θ| <= γ_n(u); y^ = fl(√s^) = √s·√(1 + θ)·(1 + δ) with |√(1 + θ) − 1| <= |θ|
//    and |δ| <= u: |y^ − y| <= ((1 + γ_n)(1 + u) − 1)·y <= γ_{n+1}(u)·y;
//  - the oracle: x_i² is exact in double, the sum has |θ_a| <= γ_{n−1}(u_a), the double sqrt one
//    rounding, so |y_d − y| <= γ_n(u_a)·y, and y_o = fl(y_d): |y_o − y| <= ρ·y with
//    ρ = u·(1 + γ_n(u_a)) + γ_n(u_a);
//  - so |y^ − y_o| <= (γ_{n+1}(u) + ρ)·y <= (γ_{n+1}(u) + ρ) / (1 − ρ)·y_o.
// A kernel that rescales by the largest |x_i| on the way (the old reference snrm2) rounds more often
// and is outside this bound; scaling by powers of two (Blue's algorithm) is exact and inside it.
double norm_bound_of(double y_o, int64_t n, double u, double ua) {
  const double ga = gamma_n(double(n), ua), rho = u * (1 + ga) + ga;
  return (gamma_n(double(n + 1), u) + rho) / (1 - rho) * std::fabs(y_o);
}

// Softmax over a row of `cols` elements: y_j = e_j / S, e_j = exp(x_j − m), S = Σ e_j, m the row max
// (a selection: exact). The three-pass form every backend here computes, in any summation order:
//  - d^_j = fl(x_j − m) = (x_j − m)(1 + δ_j), so exp(d^_j) = e_j·exp((x_j − m)·δ_j): a relative error of
//    at most expm1(D·u), D = max_j |x_j − m| (none in fact for these inputs, whose differences are
//    exact in float, but the bound does not rely on it);
//  - exp itself is within `exp_ulps` ulps, a relative error of at most 2·exp_ulps·u (1 ulp <= 2u·|v|):
//    each e^_j is within a factor [1 − α, 1 + α] of e_j, α = expm1(D·u) + 2·exp_ulps·u·exp(D·u);
//  - the positive sum: S^ within [(1 − α)(1 − γ_{cols−1}), (1 + α)(1 + γ_{cols−1})]·S;
//  - the division, as e^_j / S^ or e^_j · fl(1 / S^): `div_roundings` roundings, γ_{div}(u);
//  so y^_j / y_j lies in [lo, hi] below, and |y^_j − y_j| <= max(hi − 1, 1 − lo)·y_j.
// An online softmax (rescaling the running sum by exp(m_old − m_new) as the max grows) runs more
// exps per term and is outside this bound.
double softmax_rel_err(double u, double exp_ulps, int div_roundings, size_t cols, double span) {
  const double alpha = std::expm1(span * u) + 2 * exp_ulps * u * std::exp(span * u);
  const double gs = gamma_n(double(cols - 1), u), gd = gamma_n(div_roundings, u);
  const double hi = (1 + alpha) * (1 + gd) / ((1 - alpha) * (1 - gs));
  const double lo = (1 - alpha) * (1 - gd) / ((1 + alpha) * (1 + gs));
  return std::max(hi - 1, 1 - lo);
}
}  // namespace

Status Workload::upload_floats(Backend& b, const std::vector<float>& v, void** out) {
  void* p = b.alloc(v.size() * sizeof(float));
  if (!p) return Status::error("allocation of " + std::to_string(v.size() * 4) + " bytes failed on " + b.name());
  buffers_.push_back(p);
  *out = p;
  input_hashes_ += fingerprint_bytes(v.data(), v.size() * sizeof(float)).hex();
  return b.upload(p, v.data(), v.size() * sizeof(float));
}
Status Workload::upload_doubles(Backend& b, const std::vector<double>& v, void** out) {
  void* p = b.alloc(v.size() * sizeof(double));
  if (!p) return Status::error("allocation of " + std::to_string(v.size() * 8) + " bytes failed on " + b.name());
  buffers_.push_back(p);
  *out = p;
  input_hashes_ += fingerprint_bytes(v.data(), v.size() * sizeof(double)).hex();
  return b.upload(p, v.data(), v.size() * sizeof(double));
}
Status Workload::alloc_zero(Backend& b, size_t bytes, void** out) {
  void* p = b.alloc(bytes);
  if (!p) return Status::error("allocation of " + std::to_string(bytes) + " bytes failed on " + b.name());
  buffers_.push_back(p);
  *out = p;
  return b.zero(p, bytes);
}
template <typename T>
std::vector<T> Workload::operand(std::vector<T> v) const {
  if (magnitude_)
    for (T& x : v) x = std::fabs(x);
  return v;
}

Status Workload::error_bound(Backend& ref, const void*, ErrorBound* out) const { return sum_bound(ref, out); }

// The magnitude run: this workload again, on cpu-ref, with |operands|; M_o per element, then the bound.
Status Workload::sum_bound(Backend& ref, ErrorBound* out) const {
  auto m = Workload::create(spec_);
  m->magnitude_ = true;
  Status st = m->setup(ref);
  if (st) st = m->run(ref);
  std::vector<uint8_t> mag(output_bytes());
  if (st) st = ref.download(mag.data(), m->output(), mag.size());
  m->teardown(ref);
  DETAUDIT_RETURN_IF_ERROR(st);
  const double u = f64_ ? kUnitRoundoffF64 : kUnitRoundoffF32;
  const double ua = f64_ ? kRefAccumUnitRoundoffF64 : kRefAccumUnitRoundoff;
  out->k = bound_k();
  out->bound.resize(out_elems_);
  for (size_t i = 0; i < out_elems_; ++i) {
    double m_o;
    if (f64_)
      std::memcpy(&m_o, mag.data() + 8 * i, 8);
    else {
      float f;
      std::memcpy(&f, mag.data() + 4 * i, 4);
      m_o = f;
    }
    out->bound[i] = sum_bound_of(m_o, out->k, u, ua);
  }
  return Status::ok();
}

void Workload::teardown(Backend& b) {
  for (void* p : buffers_) b.free(p);
  buffers_.clear();
  input_hashes_.clear();
  out_ = nullptr;
}

namespace {

class MatmulWorkload : public Workload {
 public:
  explicit MatmulWorkload(const Spec& s) : Workload(s) {
    m_ = int(s.get_int("m", 1));
    n_ = int(s.get_int("n", 1));
    k_ = int(s.get_int("k", 1));
    ta_ = s.get("ta", "n") == "t" ? Trans::kT : Trans::kN;
    tb_ = s.get("tb", "n") == "t" ? Trans::kT : Trans::kN;
    f64_ = s.get("dtype", "f32") == "f64";
    out_elems_ = size_t(m_) * n_;
  }
  Status setup(Backend& b) override {
    Status st;
    size_t na = size_t(m_) * k_, nb = size_t(k_) * n_;
    if (f64_) {
      st = upload_doubles(b, operand(make_input<double>(na, seed_of(spec_), kStreamA, dist_of(spec_))), &a_);
      DETAUDIT_RETURN_IF_ERROR(st);
      st = upload_doubles(b, operand(make_input<double>(nb, seed_of(spec_), kStreamB, dist_of(spec_))), &b_);
    } else {
      st = upload_floats(b, operand(make_input<float>(na, seed_of(spec_), kStreamA, dist_of(spec_))), &a_);
      DETAUDIT_RETURN_IF_ERROR(st);
      st = upload_floats(b, operand(make_input<float>(nb, seed_of(spec_), kStreamB, dist_of(spec_))), &b_);
    }
    DETAUDIT_RETURN_IF_ERROR(st);
    st = alloc_zero(b, output_bytes(), &out_);
    return st;
  }
  Status run(Backend& b) override {
    DETAUDIT_RETURN_IF_ERROR(b.zero(out_, output_bytes()));
    int lda = ta_ == Trans::kN ? k_ : m_, ldb = tb_ == Trans::kN ? n_ : k_;
    if (f64_)
      DETAUDIT_RETURN_IF_ERROR(b.gemm_f64(ta_, tb_, m_, n_, k_, 1.0, static_cast<const double*>(a_), lda,
                                          static_cast<const double*>(b_), ldb, 0.0, static_cast<double*>(out_), n_));
    else
      DETAUDIT_RETURN_IF_ERROR(b.gemm(ta_, tb_, m_, n_, k_, 1.0f, static_cast<const float*>(a_), lda,
                                      static_cast<const float*>(b_), ldb, 0.0f, static_cast<float*>(out_), n_));
    return b.synchronize();
  }

 protected:
  int64_t bound_k() const override { return k_; }  // each output sums K products

  int m_, n_, k_;
  Trans ta_, tb_;
  void *a_ = nullptr, *b_ = nullptr;
};

// Row i of A·B computed alone (a 1 x n product) against row i inside the full product.
class BatchInvWorkload : public MatmulWorkload {
 public:
  explicit BatchInvWorkload(const Spec& s) : MatmulWorkload(s) { rows_ = int(s.get_int("rows", 1)); }
  Status batch_check(Backend& b, BatchInvariance* out) override {
    std::vector<float> full(out_elems_), row(n_);
    DETAUDIT_RETURN_IF_ERROR(b.download(full.data(), out_, output_bytes()));
    void* row_out = nullptr;
    DETAUDIT_RETURN_IF_ERROR(alloc_zero(b, size_t(n_) * 4, &row_out));
    *out = BatchInvariance{};
    std::vector<float> alone;  // the rows computed alone, in order: fingerprinted as an output
    alone.reserve(size_t(rows_) * size_t(n_));
    // Test hook (tests/test_worker.cpp, tests/test_fleet.cpp): a fault that lands only in the rows computed alone,
    // as a faulty core's would, for this workload.
    const char* flip_rows = std::getenv("DETAUDIT_TEST_FLIP_ROWS");
    const bool flip = flip_rows && spec_.str() == flip_rows;
    for (int r = 0; r < rows_; ++r) {
      // Evenly spaced rows, first and last included when rows > 1.
      int i = rows_ == 1 ? 0 : int((int64_t(r) * (m_ - 1)) / (rows_ - 1));
      const float* arow = static_cast<const float*>(a_) + size_t(i) * k_;
      DETAUDIT_RETURN_IF_ERROR(b.zero(row_out, size_t(n_) * 4));
      DETAUDIT_RETURN_IF_ERROR(b.gemm(Trans::kN, Trans::kN, 1, n_, k_, 1.0f, arow, k_,
                                      static_cast<const float*>(b_), n_, 0.0f, static_cast<float*>(row_out), n_));
      DETAUDIT_RETURN_IF_ERROR(b.synchronize());
      DETAUDIT_RETURN_IF_ERROR(b.download(row.data(), row_out, size_t(n_) * 4));
      if (flip && r == 0 && n_ > 0) {
        uint32_t bits;
        std::memcpy(&bits, row.data(), 4);
        bits ^= 1;
        std::memcpy(row.data(), &bits, 4);
      }
      ++out->rows_checked;
      if (std::memcmp(row.data(), full.data() + size_t(i) * n_, size_t(n_) * 4) != 0) ++out->rows_differing;
      alone.insert(alone.end(), row.begin(), row.end());
    }
    out->rows_fingerprint = fingerprint_bytes(alone.data(), alone.size() * sizeof(float)).hex();
    return Status::ok();
  }

 private:
  int rows_;
};

}  // namespace

ConvShape conv_shape_of(const Spec& s) {
  ConvShape c;
  c.n = int(s.get_int("n", 4)), c.c = int(s.get_int("c", 16)), c.h = int(s.get_int("h", 16)),
  c.w = int(s.get_int("w", 16)), c.k = int(s.get_int("k", 16)), c.r = int(s.get_int("r", 3)),
  c.s = int(s.get_int("s", 3)), c.stride = int(s.get_int("stride", 1)), c.pad = int(s.get_int("pad", 1));
  return c;
}

namespace {

class ConvWorkload : public Workload {
 public:
  explicit ConvWorkload(const Spec& s) : Workload(s) {
    cs_ = conv_shape_of(s);
    pass_ = s.get("pass", "fwd");
    out_elems_ = pass_ == "fwd" ? cs_.y_size() : pass_ == "bwd_data" ? cs_.x_size() : cs_.w_size();
  }
  Status setup(Backend& b) override {
    Status st;
    // Inputs by pass: fwd (x, w), bwd_data (dy, w), bwd_filter (x, dy).
    size_t n0 = pass_ == "bwd_data" ? cs_.y_size() : cs_.x_size();
    size_t n1 = pass_ == "bwd_filter" ? cs_.y_size() : cs_.w_size();
    st = upload_floats(b, operand(make_input<float>(n0, seed_of(spec_), kStreamA, dist_of(spec_))), &in0_);
    DETAUDIT_RETURN_IF_ERROR(st);
    st = upload_floats(b, operand(make_input<float>(n1, seed_of(spec_), kStreamB, dist_of(spec_))), &in1_);
    DETAUDIT_RETURN_IF_ERROR(st);
    st = alloc_zero(b, output_bytes(), &out_);
    return st;
  }
  Status run(Backend& b) override {
    DETAUDIT_RETURN_IF_ERROR(b.zero(out_, output_bytes()));
    auto* a = static_cast<const float*>(in0_);
    auto* c = static_cast<const float*>(in1_);
    auto* y = static_cast<float*>(out_);
    if (pass_ == "fwd")
      DETAUDIT_RETURN_IF_ERROR(b.conv2d_fwd(cs_, a, c, y));
    else if (pass_ == "bwd_data")
      DETAUDIT_RETURN_IF_ERROR(b.conv2d_bwd_data(cs_, a, c, y));
    else
      DETAUDIT_RETURN_IF_ERROR(b.conv2d_bwd_filter(cs_, a, c, y));
    return b.synchronize();
  }

 private:
  // fwd: y[n][k][p][q] sums C·R·S products. bwd_data: dx[n][c][h][w] sums w·dy over k < K and the (r, s)
  // with h = p·stride − pad + r (w likewise): r ≡ h + pad (mod stride) leaves at most ceil(R/stride)
  // values of r and ceil(S/stride) of s, whether a kernel gathers them or scatters a gemm's columns
  // with col2im (a tree of the same products). bwd_filter: dw[k][c][r][s] sums N·P·Q products (the
  // padded positions among them are zero).
  int64_t bound_k() const override {
    auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
    if (pass_ == "fwd") return int64_t(cs_.c) * cs_.r * cs_.s;
    if (pass_ == "bwd_data") return int64_t(cs_.k) * ceil_div(cs_.r, cs_.stride) * ceil_div(cs_.s, cs_.stride);
    return int64_t(cs_.n) * cs_.p() * cs_.q();
  }

  ConvShape cs_;
  std::string pass_;
  void *in0_ = nullptr, *in1_ = nullptr;
};

class ReduceWorkload : public Workload {
 public:
  explicit ReduceWorkload(const Spec& s) : Workload(s) {
    op_ = s.get("op", "sum");
    n_ = size_t(s.get_int("n", 1));
    cols_ = size_t(s.get_int("cols", 1));
    out_elems_ = op_ == "softmax" ? n_ : 1;
  }
  Status setup(Backend& b) override {
    Status st;
    st = upload_floats(b, operand(x_input()), &x_);
    DETAUDIT_RETURN_IF_ERROR(st);
    if (op_ == "dot") {
      st = upload_floats(b, operand(make_input<float>(n_, seed_of(spec_), kStreamB, dist_of(spec_))), &y_);
      DETAUDIT_RETURN_IF_ERROR(st);
    }
    st = alloc_zero(b, output_bytes(), &out_);
    return st;
  }
  Status run(Backend& b) override {
    DETAUDIT_RETURN_IF_ERROR(b.zero(out_, output_bytes()));
    auto* x = static_cast<const float*>(x_);
    auto* out = static_cast<float*>(out_);
    if (op_ == "softmax")
      DETAUDIT_RETURN_IF_ERROR(b.softmax(x, out, n_ / cols_, cols_));
    else {
      ReduceOp op = op_ == "sum" ? ReduceOp::kSum : op_ == "dot" ? ReduceOp::kDot : ReduceOp::kNorm2;
      DETAUDIT_RETURN_IF_ERROR(b.reduce(op, x, static_cast<const float*>(y_), n_, out));
    }
    return b.synchronize();
  }

  // sum and dot: sums of n terms (sum_bound: Σ|x_i|, Σ|x_i·y_i|); norm and softmax: below.
  Status error_bound(Backend& ref, const void* oracle, ErrorBound* out) const override {
    if (op_ == "sum" || op_ == "dot") return sum_bound(ref, out);
    const double u = kUnitRoundoffF32, ua = kRefAccumUnitRoundoff;
    const float* y = static_cast<const float*>(oracle);
    out->k = bound_k();
    out->bound.resize(out_elems_);
    if (op_ == "norm") {
      out->bound[0] = norm_bound_of(y[0], out->k, u, ua);
      return Status::ok();
    }
    // softmax: per row, D = max_j |x_j − m| (in double: exact for floats this close), then
    // |y^_j − y_o,j| <= (r + ρ) / (1 − ρ)·y_o,j, r the target's relative error (softmax_rel_err), ρ
    // the oracle's: its own relative error (double exp within kRefExpUlps, one division) plus the
    // rounding to float, u·(1 + ρ_d) + ρ_d.
    const std::vector<float> x = x_input();
    for (size_t r0 = 0; r0 < n_; r0 += cols_) {
      const float* xr = x.data() + r0;
      double mx = xr[0], mn = xr[0];
      for (size_t j = 1; j < cols_; ++j) mx = std::max(mx, double(xr[j])), mn = std::min(mn, double(xr[j]));
      const double span = mx - mn;
      const double r = softmax_rel_err(u, kSoftmaxExpUlps, 2, cols_, span);
      const double rho_d = softmax_rel_err(ua, kRefExpUlps, 1, cols_, span), rho = u * (1 + rho_d) + rho_d;
      for (size_t j = 0; j < cols_; ++j) out->bound[r0 + j] = (r + rho) / (1 - rho) * std::fabs(double(y[r0 + j]));
    }
    return Status::ok();
  }

 private:
  // sum, dot and norm: n terms; softmax: a row's sum of `cols` exps.
  int64_t bound_k() const override { return int64_t(op_ == "softmax" ? cols_ : n_); }
  std::vector<float> x_input() const { return make_input<float>(n_, seed_of(spec_), kStreamA, dist_of(spec_)); }

  std::string op_;
  size_t n_, cols_;
  void *x_ = nullptr, *y_ = nullptr;
};

class PoolWorkload : public Workload {
 public:
  explicit PoolWorkload(const Spec& s) : Workload(s) {
    ps_.n = int(s.get_int("n", 1));
    ps_.c = int(s.get_int("c", 1));
    ps_.h = int(s.get_int("h", 1));
    ps_.w = int(s.get_int("w", 1));
    ps_.window = int(s.get_int("window", 2));
    ps_.stride = int(s.get_int("stride", 2));
    bwd_ = s.get("pass", "bwd") == "bwd";
    out_elems_ = bwd_ ? ps_.x_size() : ps_.y_size();
  }
  Status setup(Backend& b) override {
    Status st;
    std::vector<float> x = make_input<float>(ps_.x_size(), seed_of(spec_), kStreamA, dist_of(spec_));
    st = upload_floats(b, x, &x_);
    DETAUDIT_RETURN_IF_ERROR(st);
    if (bwd_) {
      // The forward output is a max of inputs, exact on every target: computed here once, on the host.
      std::vector<float> y(ps_.y_size());
      int P = ps_.p(), Q = ps_.q();
      for (size_t nc = 0; nc < size_t(ps_.n) * ps_.c; ++nc)
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q) {
            float m = -INFINITY;
            for (int i = 0; i < ps_.window; ++i)
              for (int j = 0; j < ps_.window; ++j)
                m = std::max(m, x[(nc * ps_.h + p * ps_.stride + i) * ps_.w + q * ps_.stride + j]);
            y[(nc * P + p) * Q + q] = m;
          }
      st = upload_floats(b, y, &y_);
      DETAUDIT_RETURN_IF_ERROR(st);
      st = upload_floats(b, make_input<float>(ps_.y_size(), seed_of(spec_), kStreamC, dist_of(spec_)), &dy_);
      DETAUDIT_RETURN_IF_ERROR(st);
    }
    st = alloc_zero(b, output_bytes(), &out_);
    return st;
  }
  Status run(Backend& b) override {
    DETAUDIT_RETURN_IF_ERROR(b.zero(out_, output_bytes()));
    auto* x = static_cast<const float*>(x_);
    if (bwd_)
      DETAUDIT_RETURN_IF_ERROR(b.maxpool_bwd(ps_, x, static_cast<const float*>(y_), static_cast<const float*>(dy_),
                                             static_cast<float*>(out_)));
    else
      DETAUDIT_RETURN_IF_ERROR(b.maxpool_fwd(ps_, x, static_cast<float*>(out_)));
    return b.synchronize();
  }

  // fwd: a selection, exact on every correct target (bound 0; tied maxima are equal values).
  // bwd: dx_i = Σ dy_w over the windows w that route their gradient to position i. A window whose
  // maximum is unique routes it to that position; one whose maximum is tied may route it to any of the
  // tied positions, and correct kernels differ (cpu-ref, and this build's cpu kernels, take the first
  // in row-major order; other libraries the last, or whichever their reduction finds). At position i,
  // with U_i the windows whose unique maximum is at i and T_i those in which i ties with another:
  //  - the exact result of any correct kernel is Σ_{U_i} dy_w + Σ_{w in S} dy_w for some S ⊆ T_i,
  //    the oracle's for some S_o ⊆ T_i: they differ by at most D_i = Σ_{T_i} |dy_w|;
  //  - each kernel's result (the oracle's too) is a sum of at most k of these gradients (k: the windows
  //    covering i, bound_k), so with M_i = Σ_{U_i ∪ T_i} |dy_w|, the sum of |dy| of every window i may
  //    win, the sum bound above holds between each one's result and its own exact sum, whichever S it
  //    chose: |Σ_{U_i ∪ S} dy_w| <= M_i;
  //  - so |y^_i − y_o,i| <= D_i + (γ_{k+1}(u) + (1 + u)·γ_k(u_a))·M_i (sum_bound_of).
  // A position where no window's maximum lies has M_i = D_i = 0: every correct kernel writes 0 there.
  // At a tied position the bound allows the whole of the tied gradients (that much is a choice the op
  // leaves open), and rounding errors on top of them; elsewhere it is the sum bound alone.
  // M_i and D_i are summed here in double, in window order: sums of at most k nonnegative terms, so at
  // least (1 − γ_k(u_a)) times the exact ones (exact, in fact, for the generator's inputs: 24-bit
  // values, k small). sum_bound_of divides M by that (and by 1 − u, for a rounding to float that M_i is
  // spared here); D_i is divided by it below. Assumes finite inputs (the generator's): a NaN ties with
  // nothing.
  Status error_bound(Backend&, const void*, ErrorBound* out) const override {
    out->k = bound_k();
    if (!bwd_) {
      out->bound.assign(out_elems_, 0.0);
      return Status::ok();
    }
    out->bound.resize(out_elems_);
    const double u = kUnitRoundoffF32, ua = kRefAccumUnitRoundoff, ga = gamma_n(double(out->k), ua);
    const int P = ps_.p(), Q = ps_.q();
    const size_t plane = size_t(ps_.h) * ps_.w, grads = size_t(P) * Q;
    // One plane at a time (the generator is counter-based): no more memory than the oracle's run.
    std::vector<float> x(plane), dy(grads);
    std::vector<double> m(plane), d(plane);
    for (size_t nc = 0; nc < size_t(ps_.n) * ps_.c; ++nc) {
      for (size_t i = 0; i < plane; ++i)
        x[i] = float(counter_value(seed_of(spec_), kStreamA, nc * plane + i, dist_of(spec_)));
      for (size_t i = 0; i < grads; ++i)
        dy[i] = float(counter_value(seed_of(spec_), kStreamC, nc * grads + i, dist_of(spec_)));
      std::fill(m.begin(), m.end(), 0.0);
      std::fill(d.begin(), d.end(), 0.0);
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          auto at = [&](int i, int j) { return size_t(p * ps_.stride + i) * ps_.w + size_t(q * ps_.stride + j); };
          float mx = -INFINITY;
          int ties = 0;
          for (int i = 0; i < ps_.window; ++i)
            for (int j = 0; j < ps_.window; ++j) {
              const float v = x[at(i, j)];
              if (v > mx)
                mx = v, ties = 1;
              else if (v == mx)
                ++ties;
            }
          const double g = std::fabs(double(dy[size_t(p) * Q + q]));
          for (int i = 0; i < ps_.window; ++i)
            for (int j = 0; j < ps_.window; ++j)
              if (x[at(i, j)] == mx) {
                m[at(i, j)] += g;
                if (ties > 1) d[at(i, j)] += g;
              }
        }
      for (size_t i = 0; i < plane; ++i) out->bound[nc * plane + i] = sum_bound_of(m[i], out->k, u, ua) + d[i] / (1 - ga);
    }
    return Status::ok();
  }

 private:
  // bwd: dx gets the gradient of every window whose argmax it is; along one axis the windows p with
  // p·stride <= h < p·stride + window number at most ceil(window/stride), so ceil(window/stride)^2.
  int64_t bound_k() const override {
    if (!bwd_) return 0;
    int64_t per_axis = (ps_.window + ps_.stride - 1) / ps_.stride;
    return per_axis * per_axis;
  }

  PoolShape ps_;
  bool bwd_;
  void *x_ = nullptr, *y_ = nullptr, *dy_ = nullptr;
};

}  // namespace

std::unique_ptr<Workload> Workload::create(const Spec& spec) {
  if (spec.name == "matmul") return std::make_unique<MatmulWorkload>(spec);
  if (spec.name == "batchinv") return std::make_unique<BatchInvWorkload>(spec);
  if (spec.name == "conv2d") return std::make_unique<ConvWorkload>(spec);
  if (spec.name == "reduce") return std::make_unique<ReduceWorkload>(spec);
  if (spec.name == "maxpool") return std::make_unique<PoolWorkload>(spec);
  return nullptr;
}

Status compute_oracle(const Spec& workload, std::vector<uint8_t>* out, Fingerprint* inputs, ErrorBound* bound) {
  auto ref = make_cpu_ref();
  auto w = Workload::create(workload);
  if (!w) return Status::invalid("unknown workload " + workload.name);
  Status st = w->setup(*ref);
  if (st && inputs) *inputs = w->input_fingerprint();
  if (st) st = w->run(*ref);
  if (st) {
    out->resize(w->output_bytes());
    st = ref->download(out->data(), w->output(), w->output_bytes());
  }
  w->teardown(*ref);  // before the bound's magnitude run, which sets up inputs of its own
  if (st && bound) st = w->error_bound(*ref, out->data(), bound);
  return st;
}

MemoryEstimate estimate_memory(const Spec& w) {
  // In doubles: the parser's limits allow products far beyond 2^64 bytes.
  auto d = [&](const char* k, double fallback) { return double(w.get_int(k, int64_t(fallback))); };
  MemoryEstimate e;
  double es = w.get("dtype", "f32") == "f64" ? 8 : 4;
  double in = 0, out = 0, work = 0;
  if (w.name == "matmul" || w.name == "batchinv") {
    double m = d("m", 1), n = d("n", 1), k = d("k", 1);
    in = (m * k + k * n) * es;
    out = m * n * es;
    work = in;  // packed copies of A and B panels
  } else if (w.name == "conv2d") {
    double n = d("n", 1), c = d("c", 1), h = d("h", 1), wd = d("w", 1), k = d("k", 1), r = d("r", 1), s = d("s", 1),
           st = d("stride", 1), pad = d("pad", 0);
    double p = std::floor((h + 2 * pad - r) / st) + 1, q = std::floor((wd + 2 * pad - s) / st) + 1;
    double x = n * c * h * wd * 4, y = n * k * p * q * 4, f = k * c * r * s * 4;
    std::string pass = w.get("pass", "fwd");
    out = pass == "fwd" ? y : pass == "bwd_data" ? x : f;
    in = x + y + f - out;
    work = n * p * q * c * r * s * 4;  // one im2col matrix
  } else if (w.name == "reduce") {
    double n = d("n", 1);
    in = n * 4 * (w.get("op") == "dot" ? 2 : 1);
    out = w.get("op") == "softmax" ? n * 4 : 4;
    work = w.get("op") == "softmax" ? n * 8 : 0;
  } else if (w.name == "maxpool") {
    double n = d("n", 1), c = d("c", 1), h = d("h", 1), wd = d("w", 1), win = d("window", 2), st = d("stride", 2);
    double y = n * c * (std::floor((h - win) / st) + 1) * (std::floor((wd - win) / st) + 1) * 4, x = n * c * h * wd * 4;
    bool bwd = w.get("pass", "bwd") == "bwd";
    out = bwd ? x : y;
    in = bwd ? x + 2 * y : x;
    work = bwd ? x : 0;
  }
  e.inputs = 2 * in;    // the host vectors and the backend's copies
  e.outputs = 3 * out;  // the backend's output, its host copy and the oracle's output
  // cpu-ref accumulates in double; the error bound is a double per output element, next to the oracle's
  // output in every worker. (The bound's magnitude run comes after the oracle's run is torn down: its
  // inputs and output take the place of the run's.)
  e.oracle = 2 * (out / es * 8);
  e.workspace = work;
  return e;
}

uint64_t available_memory_bytes(std::string* source) {
  uint64_t avail = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kb = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        avail = uint64_t(kb) * 1024;
        if (source) *source = "MemAvailable in /proc/meminfo";
      }
    }
    std::fclose(f);
  }
  auto read_u64 = [](const char* path, uint64_t* v) {
    FILE* f = std::fopen(path, "r");
    if (!f) return false;
    unsigned long long x = 0;
    bool ok = std::fscanf(f, "%llu", &x) == 1;  // "max" (no limit) does not parse
    std::fclose(f);
    *v = x;
    return ok;
  };
  uint64_t max = 0, cur = 0;
  if (read_u64("/sys/fs/cgroup/memory.max", &max) && read_u64("/sys/fs/cgroup/memory.current", &cur)) {
    uint64_t left = max > cur ? max - cur : 0;
    if (avail == 0 || left < avail) {
      avail = left;
      if (source) *source = "the cgroup's memory.max less memory.current";
    }
  }
  // An address-space limit (ulimit -v) caps what this process can allocate, whatever the machine has.
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    uint64_t size_kb = 0;
    if (FILE* f = std::fopen("/proc/self/status", "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, f)) {
        unsigned long long kb = 0;
        if (std::sscanf(line, "VmSize: %llu kB", &kb) == 1) size_kb = kb;
      }
      std::fclose(f);
    }
    const uint64_t limit = uint64_t(as.rlim_cur), used = size_kb * 1024;
    const uint64_t left = limit > used ? limit - used : 0;
    if (avail == 0 || left < avail) {
      avail = left;
      if (source) *source = "the address-space limit (ulimit -v) less this process's size";
    }
  }
  return avail;
}

}  // namespace detaudit
