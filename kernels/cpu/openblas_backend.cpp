// openblas: OpenBLAS sgemm/dgemm/sdot/snrm2/saxpy behind the Backend interface; conv2d is im2col
// (+ col2im) around sgemm. The kernels OpenBLAS runs are chosen once, when the library loads, from
// OPENBLAS_CORETYPE (DYNAMIC_ARCH builds); the probes set it in a worker process's environment.
//
// Observed with Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH, pthreads):
//  - An OPENBLAS_CORETYPE name it does not know is not an error: it silently runs the Cooperlake
//    (AVX-512) kernels, and so dies with SIGILL on a CPU without AVX-512. Record corename, not the
//    requested name.
//  - On CPUs newer than the library (e.g. Emerald Rapids, family 6 model 207) autodetection fails and
//    falls back to Prescott (SSE3) kernels.
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/openblas_backend.hpp"

#include "kernels/checks.hpp"

#ifdef DETAUDIT_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace detaudit {

#ifdef DETAUDIT_HAVE_OPENBLAS
namespace {

bool fits_int(size_t n) { return n <= size_t(INT_MAX); }


CBLAS_TRANSPOSE cblas_trans(Trans t) { return t == Trans::kN ? CblasNoTrans : CblasTrans; }

// col[(c*R + r)*S + s][p*Q + q] = x[c][p*stride - pad + r][q*stride - pad + s], 0 outside.
void im2col(const ConvShape& sh, const float* x, float* col) {
  const int P = sh.p(), Q = sh.q();
  float* out = col;
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r)
      for (int s = 0; s < sh.s; ++s)
        for (int p = 0; p < P; ++p) {
          const int ih = p * sh.stride - sh.pad + r;
          if (ih < 0 || ih >= sh.h) {
            std::memset(out, 0, sizeof(float) * Q);
            out += Q;
            continue;
          }
          const float* row = x + (size_t(c) * sh.h + ih) * sh.w;
          for (int q = 0; q < Q; ++q) {
            const int iw = q * sh.stride - sh.pad + s;
            *out++ = (iw < 0 || iw >= sh.w) ? 0.0f : row[iw];
          }
        }
}

// dx[c][ih][iw] += col[(c*R + r)*S + s][p*Q + q]; dx must be zeroed first.
// determinism: a fixed, single-threaded order: rows (c, r, s) in index order, then (p, q) in index
// order, each added into dx in float as it comes. The bits depend on this order (overlapping
// windows sum several col entries into one dx element), never on timing.
void col2im(const ConvShape& sh, const float* col, float* dx) {
  const int P = sh.p(), Q = sh.q();
  const float* in = col;
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r)
      for (int s = 0; s < sh.s; ++s)
        for (int p = 0; p < P; ++p) {
          const int ih = p * sh.stride - sh.pad + r;
          if (ih < 0 || ih >= sh.h) {
            in += Q;
            continue;
          }
          float* row = dx + (size_t(c) * sh.h + ih) * sh.w;
          for (int q = 0; q < Q; ++q, ++in) {
            const int iw = q * sh.stride - sh.pad + s;
            if (iw >= 0 && iw < sh.w) row[iw] += *in;
          }
        }
}

class OpenblasBackend final : public Backend {
 public:
  explicit OpenblasBackend(int threads) : threads_(threads) { pin_threads(); }

  std::string name() const override { return "openblas?threads=" + std::to_string(threads_); }
  std::string describe() const override {
    return name() + " (OpenBLAS core " + openblas_corename() + ")";
  }
  std::vector<std::pair<std::string, std::string>> details() const override {
    const char* env = std::getenv("OPENBLAS_CORETYPE");
    return {{"corename", openblas_corename()},
            {"config", openblas_version_string()},
            {"threads", std::to_string(threads_)},
            {"threads_effective", std::to_string(openblas_get_num_threads())},
            {"coretype_env", env ? env : ""}};
  }

  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
              const float* b, int ldb, float beta, float* c, int ldc) override {
    DETAUDIT_RETURN_IF_ERROR(validate_gemm(ta, tb, m, n, k, lda, ldb, ldc));
    pin_threads();
    // determinism: OpenBLAS splits a gemm over threads by blocks of C (M and N), not over K, but
    // its blocking and kernel choice follow the thread count and the core type; the bits are
    // fixed for a given (core, threads) and differ between them.
    cblas_sgemm(CblasRowMajor, cblas_trans(ta), cblas_trans(tb), m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
    return Status::ok();
  }

  Status gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
                  const double* b, int ldb, double beta, double* c, int ldc) override {
    DETAUDIT_RETURN_IF_ERROR(validate_gemm(ta, tb, m, n, k, lda, ldb, ldc));
    pin_threads();
    cblas_dgemm(CblasRowMajor, cblas_trans(ta), cblas_trans(tb), m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
    return Status::ok();
  }

  // Per image: y_n[K x PQ] = W[K x CRS] * col_n[CRS x PQ].
  Status conv2d_fwd(const ConvShape& sh, const float* x, const float* w, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(sh));
    pin_threads();
    const int crs = sh.c * sh.r * sh.s, pq = sh.p() * sh.q();
    float* col = scratch(size_t(crs) * pq);
    for (int i = 0; i < sh.n; ++i) {
      im2col(sh, x + size_t(i) * sh.c * sh.h * sh.w, col);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sh.k, pq, crs, 1.0f, w, crs, col, pq,
                  0.0f, y + size_t(i) * sh.k * pq, pq);
    }
    return Status::ok();
  }

  // Per image: col[CRS x PQ] = W^T[CRS x K] * dy_n[K x PQ], then col2im into dx_n.
  Status conv2d_bwd_data(const ConvShape& sh, const float* dy, const float* w, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(sh));
    pin_threads();
    const int crs = sh.c * sh.r * sh.s, pq = sh.p() * sh.q();
    const size_t img = size_t(sh.c) * sh.h * sh.w;
    float* col = scratch(size_t(crs) * pq);
    for (int i = 0; i < sh.n; ++i) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crs, pq, sh.k, 1.0f, w, crs,
                  dy + size_t(i) * sh.k * pq, pq, 0.0f, col, pq);
      float* dxi = dx + size_t(i) * img;
      std::memset(dxi, 0, sizeof(float) * img);
      col2im(sh, col, dxi);
    }
    return Status::ok();
  }

  // dW[K x CRS] = sum over images n of dy_n[K x PQ] * col_n[CRS x PQ]^T.
  // determinism: images are accumulated in image order through sgemm's beta = 1 (the first image
  // with beta = 0), so each image's contribution is added to the running dW in a fixed order; only
  // the inner sgemm's (core, threads)-dependent blocking varies between targets.
  Status conv2d_bwd_filter(const ConvShape& sh, const float* x, const float* dy,
                           float* dw) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(sh));
    pin_threads();
    const int crs = sh.c * sh.r * sh.s, pq = sh.p() * sh.q();
    if (sh.n == 0) {
      std::memset(dw, 0, sizeof(float) * sh.w_size());
      return Status::ok();
    }
    float* col = scratch(size_t(crs) * pq);
    for (int i = 0; i < sh.n; ++i) {
      im2col(sh, x + size_t(i) * sh.c * sh.h * sh.w, col);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sh.k, crs, pq, 1.0f,
                  dy + size_t(i) * sh.k * pq, pq, col, pq, i == 0 ? 0.0f : 1.0f, dw, crs);
    }
    return Status::ok();
  }

  // dot = cblas_sdot(x, y); norm = cblas_snrm2(x); sum = cblas_sdot(x, ones): OpenBLAS 0.3.21 has
  // no plain sum (sasum is sum |x|), and a dot with ones runs the same kernels as dot, so sum shows
  // the core type's dot accumulation order.
  // determinism: with threads > 1, OpenBLAS may split a long sdot over threads (one contiguous
  // block each) and add the partials in thread order: fixed for a given thread count, not across.
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    if (!fits_int(n)) return Status::unsupported("reduce: n exceeds the BLAS int range");
    pin_threads();
    const int ni = int(n);
    switch (op) {
      case ReduceOp::kDot:
        if (y == nullptr) return Status::invalid("reduce dot: y is null");
        *out = cblas_sdot(ni, x, 1, y, 1);
        return Status::ok();
      case ReduceOp::kNorm2:
        *out = cblas_snrm2(ni, x, 1);
        return Status::ok();
      case ReduceOp::kSum:
        if (ones_.size() < n) ones_.assign(n, 1.0f);
        *out = cblas_sdot(ni, x, 1, ones_.data(), 1);
        return Status::ok();
    }
    return Status::invalid("reduce: unknown op");
  }

  Status axpy(size_t n, float alpha, const float* x, float* y) override {
    pin_threads();
    // Elementwise: chunking a too-long vector does not change any element's bits.
    while (n > 0) {
      const int chunk = n > size_t(INT_MAX) ? INT_MAX : int(n);
      cblas_saxpy(chunk, alpha, x, 1, y, 1);
      x += chunk;
      y += chunk;
      n -= size_t(chunk);
    }
    return Status::ok();
  }

 private:
  // determinism: OpenBLAS's thread count is process-wide; set it before every op so that two
  // openblas backends in one process (tests) each run with their own count.
  void pin_threads() const {
    if (openblas_get_num_threads() != threads_) openblas_set_num_threads(threads_);
  }
  float* scratch(size_t n) {
    if (col_.size() < n) col_.resize(n);
    return col_.data();
  }

  int threads_;
  std::vector<float> col_;
  std::vector<float> ones_;
};

}  // namespace

BackendOr make_openblas(const OpenblasOptions& opts) {
  if (opts.threads < 1) return Status::invalid("openblas: threads must be >= 1");
  return std::make_unique<OpenblasBackend>(opts.threads);
}

std::string openblas_version_string() {
  const char* c = openblas_get_config();
  return c ? c : "";
}
std::string openblas_corename() {
  const char* c = openblas_get_corename();
  return c ? c : "";
}

#else  // !DETAUDIT_HAVE_OPENBLAS

}  // namespace detaudit
#include "detaudit_build_config.hpp"
namespace detaudit {

BackendOr make_openblas(const OpenblasOptions&) {
  return Status::unavailable(std::string("detaudit was built without OpenBLAS: ") + DETAUDIT_OPENBLAS_OFF_REASON);
}
std::string openblas_version_string() { return "not built"; }
std::string openblas_corename() { return "not built"; }

#endif

}  // namespace detaudit
