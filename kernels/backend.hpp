// The one Backend interface (ggml style): every target, CPU or GPU, implements these ops.
// Conventions:
//  - float32 unless the name says otherwise; matrices row-major; tensors NCHW, filters KCRS.
//  - Pointers are in the backend's memory (host memory for CPU backends, device memory for GPU
//    backends); move bytes with upload()/download().
//  - Every op returns a Status. An op a backend does not provide returns Status::unsupported(...),
//    which the probes record as `skipped` with that reason.
//  - Ops overwrite their outputs (beta aside); no op depends on what was in an output before.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/fingerprint.hpp"
#include "kernels/status.hpp"

namespace detaudit {

enum class Trans : uint8_t { kN, kT };

struct ConvShape {
  int n = 1, c = 1, h = 1, w = 1;  // input x: N x C x H x W
  int k = 1, r = 1, s = 1;         // filter w: K x C x R x S
  int stride = 1, pad = 0;         // same on both spatial axes
  int p() const { return (h + 2 * pad - r) / stride + 1; }  // output height
  int q() const { return (w + 2 * pad - s) / stride + 1; }  // output width
  size_t x_size() const { return size_t(n) * c * h * w; }
  size_t w_size() const { return size_t(k) * c * r * s; }
  size_t y_size() const { return size_t(n) * k * p() * q(); }
};

// Max pooling: window x window, stride, no padding; output (h - window)/stride + 1 per axis.
struct PoolShape {
  int n = 1, c = 1, h = 1, w = 1;
  int window = 2, stride = 2;
  int p() const { return (h - window) / stride + 1; }
  int q() const { return (w - window) / stride + 1; }
  size_t x_size() const { return size_t(n) * c * h * w; }
  size_t y_size() const { return size_t(n) * c * p() * q(); }
};

enum class ReduceOp : uint8_t { kSum, kDot, kNorm2 };  // kNorm2 = sqrt(sum x^2)

enum class UnaryOp : uint8_t { kCopy, kRelu, kSigmoid, kTanh, kHardSigmoid, kExp, kNeg, kSquare };
enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kMax, kMin };
enum class LossOp : uint8_t { kMse, kL1 };

// Adam (Kingma & Ba; PyTorch's form, no weight decay). The caller computes the bias corrections
// 1 - beta1^t and 1 - beta2^t in double and rounds them to float, so every backend sees the same
// constants. Per element, each operation rounded to float, no FMA (see Backend::adam_step):
//   m = beta1*m + (1 - beta1)*g;  v = beta2*v + (1 - beta2)*(g*g)
//   w = w - (lr*(m/bias_correction1)) / (sqrt(v/bias_correction2) + eps)
struct AdamParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float bias_correction1 = 1.0f, bias_correction2 = 1.0f;
};
// SGD with momentum (PyTorch's form: no dampening, no Nesterov): v = momentum*v + g; w = w - lr*v.
struct SgdParams {
  float lr = 1e-2f, momentum = 0.9f;
};

// One kernel launch seen by a tracer (CUPTI on GPUs).
struct KernelRecord {
  std::string name;  // demangled where possible
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint32_t registers = 0, static_smem = 0, dynamic_smem = 0;
  uint64_t duration_ns = 0;
};

// The arrays of one ConvLSTM step (n samples of kc = K*H*W values per gate; gates i, f, o, g).
//   forward:  zg = z (gate-major copy), a_ifo = hard_sigmoid(z_ifo), a_g = tanh(z_g),
//             c = fma(1, a_i*a_g, a_f*c_prev), tc = tanh(c), h = a_o*tc
//   backward: dh = dh_ext + dh_rec (dh_rec alone without dh_ext), dc = (dh*a_o)*(1 - tc*tc) + dc_rec,
//             da_o = dh*tc, da_i = dc*a_g, da_f = dc*c_prev, da_g = dc*a_i, dc_rec <- dc*a_f,
//             dz_ifo = hard_sigmoid'(zg_ifo, da_ifo), dz_g = da_g*(1 - a_g*a_g)
// (each product, sum and activation one rounded operation as Backend's ops define them).
struct LstmFwdArgs {
  size_t n = 0, kc = 0;
  const float* z = nullptr;       // [n][4][kc], sample-major (the convolution's output)
  const float* c_prev = nullptr;  // [n*kc]
  float* zg = nullptr;            // [4][n*kc], gate-major
  float* a = nullptr;             // [4][n*kc]
  float* c = nullptr;             // [n*kc] each
  float* tc = nullptr;
  float* h = nullptr;
};
struct LstmBwdArgs {
  size_t n = 0, kc = 0;
  const float* zg = nullptr;  // the step's forward values, as LstmFwdArgs
  const float* a = nullptr;
  const float* c_prev = nullptr;
  const float* tc = nullptr;
  const float* dh_rec = nullptr;  // [n*kc]: dL/dh from step t+1
  const float* dh_ext = nullptr;  // [n*kc] or null: dL/dh from outside the cell
  float* dc_rec = nullptr;        // [n*kc]: in, dL/dc from step t+1; out, into step t-1
  float* dz = nullptr;            // [n][4][kc], sample-major (the convolution's output gradient)
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The canonical spec this backend was made from, and what actually runs (ISA, core name, ...).
  virtual std::string name() const = 0;
  virtual std::string describe() const { return name(); }
  // Settings recorded with every observation (e.g. {"isa","avx512"}, {"corename","Haswell"}).
  virtual std::vector<std::pair<std::string, std::string>> details() const { return {}; }

  // ---- memory --------------------------------------------------------------------------------
  virtual void* alloc(size_t bytes);
  virtual void free(void* p);
  virtual Status upload(void* dst, const void* src, size_t bytes);
  virtual Status download(void* dst, const void* src, size_t bytes);
  virtual Status zero(void* p, size_t bytes);
  virtual Status synchronize() { return Status::ok(); }
  // Fingerprint of `bytes` bytes at `p` (backend memory). Always the canonical host XXH3-128 of
  // the bytes, so fingerprints compare across backends; GPU backends may detect repeats on the
  // device and download only new outputs.
  virtual Status fingerprint(const void* p, size_t bytes, Fingerprint* out);

  // After an op failed: an error saying why when nothing more can run in this process, as after a
  // sticky CUDA error (an illegal address corrupts the context and every later call fails alike); ok
  // while the backend can go on. The worker then ends after recording the cell, and the parent runs the
  // remaining cells in a fresh worker.
  virtual Status context_state() { return Status::ok(); }

  // ---- kernel tracing (CUPTI on GPUs) ----------------------------------------------------------
  // Whether this backend traces kernels: the probes then keep one kernel list (or a failure) per repeat.
  virtual bool traces_kernels() const { return false; }
  // trace_begin/trace_end bracket one repeat. Backends without tracing return unavailable(reason).
  virtual Status trace_begin(uint64_t repeat_id) { return Status::unavailable("not a GPU target"); }
  virtual Status trace_end(std::vector<KernelRecord>* kernels) {
    return Status::unavailable("not a GPU target");
  }

  // ---- ops -------------------------------------------------------------------------------------
  // C[m x n] = alpha * op(A) * op(B) + beta * C. op(A) is m x k, op(B) is k x n. Row-major.
  virtual Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc);
  virtual Status gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a,
                          int lda, const double* b, int ldb, double beta, double* c, int ldc);

  // y = conv(x, w), cross-correlation, no bias.
  virtual Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y);
  // y = conv(x, w) + bias[k], the bias added once to each finished output (bias_add's bits): by default
  // conv2d_fwd then bias_add; a backend may fold the add into its output pass.
  virtual Status conv2d_fwd_bias(const ConvShape& s, const float* x, const float* w, const float* bias, float* y);
  // dx = d(loss)/dx given dy.
  virtual Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx);
  // dw = d(loss)/dw given x and dy.
  virtual Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw);

  // Max pooling forward, and backward: dx gets dy at the position of each window's maximum (the first
  // maximum in row-major window order on ties); overlapping windows (stride < window) add up.
  virtual Status maxpool_fwd(const PoolShape& s, const float* x, float* y);
  virtual Status maxpool_bwd(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx);

  // *out = reduce(x[, y]) over n elements; out points to one float in backend memory.
  virtual Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out);
  // Softmax along the last axis of a rows x cols matrix.
  virtual Status softmax(const float* x, float* y, size_t rows, size_t cols);
  // Elementwise.
  virtual Status unary(UnaryOp op, const float* x, float* y, size_t n);
  virtual Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n);
  // y = alpha * x + y
  virtual Status axpy(size_t n, float alpha, const float* x, float* y);

  // ---- training ops (models/) ------------------------------------------------------------------
  // Per-channel bias on NCHW data, in place: y[(i*c + j)*hw + l] += bias[j]. A linear layer's
  // rows x cols output is n = rows, c = cols, hw = 1.
  virtual Status bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw);
  // db[j] = sum over i < n, l < hw of dy[(i*c + j)*hw + l]: a reduction of n*hw terms per channel,
  // so the backend's reduction order applies.
  virtual Status bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw);
  // dx = dy * f'(x) for kRelu (x > 0 ? 1 : 0), kSigmoid (y*(1 - y)), kTanh (1 - y*y) and
  // kHardSigmoid (Keras: 0.2 inside -2.5 < x < 2.5, else 0); x is the forward input, y its output.
  virtual Status unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n);
  // Nearest-neighbour upsampling by 2 of `planes` h x w planes: y is planes x 2h x 2w.
  virtual Status upsample2_fwd(const float* x, float* y, size_t planes, int h, int w);
  // dx[i][j] = (dy[2i][2j] + dy[2i][2j+1]) + (dy[2i+1][2j] + dy[2i+1][2j+1]), in that order.
  virtual Status upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w);
  // dst[i*dst_ld + j] = src[i*src_ld + j] for i < rows, j < cols (concat/split along channels).
  virtual Status copy_2d(size_t rows, size_t cols, const float* src, size_t src_ld, float* dst, size_t dst_ld);
  virtual Status fill(float* y, float value, size_t n);
  // y = alpha * y
  virtual Status scale(float* y, float alpha, size_t n);
  // *value (one float in backend memory) = mean over n of (y - t)^2 (kMse) or |y - t| (kL1); the sum
  // is a reduction, so the backend's order applies. dy (may be null) = d loss / d y:
  // 2*(y - t)/n (kMse), sign(y - t)/n (kL1, 0 where y == t).
  virtual Status loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy);
  // One ConvLSTM step's gate arithmetic in one pass (models/convlstm.hpp), optional: a backend without it
  // returns kUnsupported and the cell runs the same arithmetic through the ops above; one that has it
  // gives exactly their bits (its own hard sigmoid, tanh, multiplies and fma(1, x, y) adds).
  virtual Status lstm_cell_fwd(const LstmFwdArgs& a);
  virtual Status lstm_cell_bwd(const LstmBwdArgs& a);
  // Optimiser updates, elementwise, in place (formulas at AdamParams and SgdParams).
  virtual Status adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n);
  virtual Status sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n);
};

// What a backend factory returns: the backend, or why it cannot be made here (invalid for a bad value,
// unavailable or unsupported for a target this machine or build cannot run).
using BackendOr = StatusOr<std::unique_ptr<Backend>>;

const char* to_string(ReduceOp op);
const char* to_string(UnaryOp op);
const char* to_string(BinaryOp op);
const char* to_string(LossOp op);

}  // namespace detaudit
