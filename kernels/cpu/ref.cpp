// cpu-ref: the oracle. Plain loops in index order, one double accumulator, one thread; every float
// result is rounded once at the end.
// determinism: nothing here depends on threads, ISA or scheduling. The compiler may not reorder or
// fuse (-ffp-contract=off, no -ffast-math), so the bits are the same on every x86-64 machine.
#include "kernels/cpu/ref.hpp"

#include "kernels/checks.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/pool.hpp"
#include "kernels/cpu/train_ops.hpp"

namespace detaudit {
namespace {

// op(A)[i][kk] and op(B)[kk][j] for row-major storage.
template <class T>
T at_a(Trans t, const T* a, int lda, int i, int kk) {
  return t == Trans::kN ? a[size_t(i) * lda + kk] : a[size_t(kk) * lda + i];
}
template <class T>
T at_b(Trans t, const T* b, int ldb, int kk, int j) {
  return t == Trans::kN ? b[size_t(kk) * ldb + j] : b[size_t(j) * ldb + kk];
}

class CpuRef final : public Backend {
 public:
  std::string name() const override { return "cpu-ref"; }
  std::vector<std::pair<std::string, std::string>> details() const override {
    return {{"accumulator", "double (gemm_f64: long double)"}, {"threads", "1"}};
  }

  // c = alpha*sum + beta*c in double, rounded once; with beta == 0, c is not read (BLAS rule).
  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    DETAUDIT_RETURN_IF_ERROR(validate_gemm(ta, tb, m, n, k, lda, ldb, ldc));
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int kk = 0; kk < k; ++kk) acc += double(at_a(ta, a, lda, i, kk)) * double(at_b(tb, b, ldb, kk, j));
        float& out = c[size_t(i) * ldc + j];
        double r = double(alpha) * acc;
        if (beta != 0.0f) r += double(beta) * double(out);
        out = float(r);
      }
    return Status::ok();
  }

  // f64: accumulated in long double (x87 80-bit, 64-bit mantissa on x86-64), rounded to double once.
  Status gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                  int ldb, double beta, double* c, int ldc) override {
    DETAUDIT_RETURN_IF_ERROR(validate_gemm(ta, tb, m, n, k, lda, ldb, ldc));
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        long double acc = 0.0L;
        for (int kk = 0; kk < k; ++kk)
          acc += static_cast<long double>(at_a(ta, a, lda, i, kk)) * static_cast<long double>(at_b(tb, b, ldb, kk, j));
        double& out = c[size_t(i) * ldc + j];
        long double r = static_cast<long double>(alpha) * acc;
        if (beta != 0.0) r += static_cast<long double>(beta) * static_cast<long double>(out);
        out = double(r);
      }
    return Status::ok();
  }

  // y[n][k][p][q] = sum over c, r, s of x[n][c][p*stride - pad + r][q*stride - pad + s] * w[k][c][r][s].
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    const int P = s.p(), Q = s.q();
    for (int n = 0; n < s.n; ++n)
      for (int k = 0; k < s.k; ++k)
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q) {
            double acc = 0.0;
            for (int c = 0; c < s.c; ++c)
              for (int r = 0; r < s.r; ++r)
                for (int t = 0; t < s.s; ++t) {
                  const int h = p * s.stride - s.pad + r, ww = q * s.stride - s.pad + t;
                  if (h < 0 || h >= s.h || ww < 0 || ww >= s.w) continue;
                  acc += double(x[((size_t(n) * s.c + c) * s.h + h) * s.w + ww]) *
                         double(w[((size_t(k) * s.c + c) * s.r + r) * s.s + t]);
                }
            y[((size_t(n) * s.k + k) * P + p) * Q + q] = float(acc);
          }
    return Status::ok();
  }

  // dx[n][c][h][w] = sum over k, r, s of w[k][c][r][s] * dy[n][k][p][q] where h = p*stride - pad + r
  // and w = q*stride - pad + s.
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    const int P = s.p(), Q = s.q();
    for (int n = 0; n < s.n; ++n)
      for (int c = 0; c < s.c; ++c)
        for (int h = 0; h < s.h; ++h)
          for (int ww = 0; ww < s.w; ++ww) {
            double acc = 0.0;
            for (int k = 0; k < s.k; ++k)
              for (int r = 0; r < s.r; ++r)
                for (int t = 0; t < s.s; ++t) {
                  const int ph = h + s.pad - r, qw = ww + s.pad - t;
                  if (ph < 0 || qw < 0 || ph % s.stride || qw % s.stride) continue;
                  const int p = ph / s.stride, q = qw / s.stride;
                  if (p >= P || q >= Q) continue;
                  acc += double(w[((size_t(k) * s.c + c) * s.r + r) * s.s + t]) *
                         double(dy[((size_t(n) * s.k + k) * P + p) * Q + q]);
                }
            dx[((size_t(n) * s.c + c) * s.h + h) * s.w + ww] = float(acc);
          }
    return Status::ok();
  }

  // dw[k][c][r][s] = sum over n, p, q of x[n][c][p*stride - pad + r][q*stride - pad + s] * dy[n][k][p][q].
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    const int P = s.p(), Q = s.q();
    for (int k = 0; k < s.k; ++k)
      for (int c = 0; c < s.c; ++c)
        for (int r = 0; r < s.r; ++r)
          for (int t = 0; t < s.s; ++t) {
            double acc = 0.0;
            for (int n = 0; n < s.n; ++n)
              for (int p = 0; p < P; ++p)
                for (int q = 0; q < Q; ++q) {
                  const int h = p * s.stride - s.pad + r, ww = q * s.stride - s.pad + t;
                  if (h < 0 || h >= s.h || ww < 0 || ww >= s.w) continue;
                  acc += double(x[((size_t(n) * s.c + c) * s.h + h) * s.w + ww]) *
                         double(dy[((size_t(n) * s.k + k) * P + p) * Q + q]);
                }
            dw[((size_t(k) * s.c + c) * s.r + r) * s.s + t] = float(acc);
          }
    return Status::ok();
  }

  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(validate_pool(s));
    maxpool_fwd_host(s, x, y);
    return Status::ok();
  }
  // Overlapping windows' gradients add up in double, rounded once.
  Status maxpool_bwd(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(validate_pool(s));
    maxpool_bwd_host(s, x, dy, dx, /*double_accumulate=*/true);
    return Status::ok();
  }

  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    if (op == ReduceOp::kDot && !y && n > 0) return Status::invalid("reduce dot: y is null");
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i) {
      switch (op) {
        case ReduceOp::kSum: acc += double(x[i]); break;
        case ReduceOp::kDot: acc += double(x[i]) * double(y[i]); break;
        case ReduceOp::kNorm2: acc += double(x[i]) * double(x[i]); break;
      }
    }
    *out = float(op == ReduceOp::kNorm2 ? std::sqrt(acc) : acc);
    return Status::ok();
  }

  // Per row: m = max, e = exp(x - m), y = e / sum(e), all in double, rounded once.
  Status softmax(const float* x, float* y, size_t rows, size_t cols) override {
    std::vector<double> e(cols);
    for (size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * cols;
      if (cols == 0) continue;
      double m = xr[0];
      for (size_t j = 1; j < cols; ++j) m = std::max(m, double(xr[j]));
      double sum = 0.0;
      for (size_t j = 0; j < cols; ++j) sum += (e[j] = std::exp(double(xr[j]) - m));
      for (size_t j = 0; j < cols; ++j) y[r * cols + j] = float(e[j] / sum);
    }
    return Status::ok();
  }

  // Elementwise in double, rounded once. hard_sigmoid is Keras': clip(0.2x + 0.5, 0, 1).
  Status unary(UnaryOp op, const float* x, float* y, size_t n) override {
    for (size_t i = 0; i < n; ++i) {
      const double v = x[i];
      double r = v;
      switch (op) {
        case UnaryOp::kCopy: r = v; break;
        case UnaryOp::kRelu: r = v > 0.0 ? v : 0.0; break;
        case UnaryOp::kSigmoid: r = 1.0 / (1.0 + std::exp(-v)); break;
        case UnaryOp::kTanh: r = std::tanh(v); break;
        case UnaryOp::kHardSigmoid: r = std::min(1.0, std::max(0.0, 0.2 * v + 0.5)); break;
        case UnaryOp::kExp: r = std::exp(v); break;
        case UnaryOp::kNeg: r = -v; break;
        case UnaryOp::kSquare: r = v * v; break;
      }
      y[i] = float(r);
    }
    return Status::ok();
  }

  Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) override {
    for (size_t i = 0; i < n; ++i) {
      const double u = a[i], v = b[i];
      double r = 0.0;
      switch (op) {
        case BinaryOp::kAdd: r = u + v; break;
        case BinaryOp::kSub: r = u - v; break;
        case BinaryOp::kMul: r = u * v; break;
        case BinaryOp::kDiv: r = u / v; break;
        case BinaryOp::kMax: r = u > v ? u : v; break;
        case BinaryOp::kMin: r = u < v ? u : v; break;
      }
      y[i] = float(r);
    }
    return Status::ok();
  }

  // y = alpha*x + y in double (alpha*x is exact there), rounded once.
  Status axpy(size_t n, float alpha, const float* x, float* y) override {
    for (size_t i = 0; i < n; ++i) y[i] = float(double(alpha) * double(x[i]) + double(y[i]));
    return Status::ok();
  }

  // ---- training ops: sums in index order in one double, rounded once ----------------------------
  Status bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw) override {
    train_ops::bias_add_f32(y, bias, c, hw, 0, n * c);  // one add: float rounding is the oracle's too
    return Status::ok();
  }
  Status bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) override {
    for (size_t j = 0; j < c; ++j) {
      double acc = 0.0;
      for (size_t i = 0; i < n; ++i)
        for (size_t l = 0; l < hw; ++l) acc += double(dy[(i * c + j) * hw + l]);
      db[j] = float(acc);
    }
    return Status::ok();
  }
  Status unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(check_unary_bwd(op));
    train_ops::unary_bwd_f64(op, x, y, dy, dx, 0, n);
    return Status::ok();
  }
  Status upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) override {
    if (h < 1 || w < 1) return Status::invalid("upsample2: h and w must be positive");
    train_ops::upsample2_fwd(x, y, h, w, 0, planes);
    return Status::ok();
  }
  Status upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) override {
    if (h < 1 || w < 1) return Status::invalid("upsample2: h and w must be positive");
    train_ops::upsample2_bwd_f64(dy, dx, h, w, 0, planes);
    return Status::ok();
  }
  Status copy_2d(size_t rows, size_t cols, const float* src, size_t src_ld, float* dst, size_t dst_ld) override {
    for (size_t i = 0; i < rows; ++i)
      for (size_t j = 0; j < cols; ++j) dst[i * dst_ld + j] = src[i * src_ld + j];
    return Status::ok();
  }
  Status fill(float* y, float value, size_t n) override {
    for (size_t i = 0; i < n; ++i) y[i] = value;
    return Status::ok();
  }
  Status scale(float* y, float alpha, size_t n) override {
    for (size_t i = 0; i < n; ++i) y[i] = float(double(alpha) * double(y[i]));
    return Status::ok();
  }
  Status loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy) override {
    if (n == 0) return Status::invalid(std::string(to_string(op)) + " loss: no elements");
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double d = double(y[i]) - double(t[i]);
      acc += op == LossOp::kMse ? d * d : std::fabs(d);
      if (dy) dy[i] = float(op == LossOp::kMse ? 2.0 * d / double(n) : (d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0) / double(n));
    }
    *value = float(acc / double(n));
    return Status::ok();
  }
  Status adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) override {
    train_ops::adam_f64(p, w, g, m, v, 0, n);
    return Status::ok();
  }
  Status sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n) override {
    train_ops::sgd_f64(p, w, g, velocity, 0, n);
    return Status::ok();
  }

 private:
  static Status check_unary_bwd(UnaryOp op) {
    if (op == UnaryOp::kRelu || op == UnaryOp::kSigmoid || op == UnaryOp::kTanh || op == UnaryOp::kHardSigmoid)
      return Status::ok();
    return Status::unsupported(std::string(to_string(op)) + " backward is not provided by this backend");
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_ref() { return std::make_unique<CpuRef>(); }

}  // namespace detaudit
