// cpu: detaudit's own kernels with a selectable reduction order (see native.hpp).
// gemm lives in native_gemm.cpp, the per-ISA kernels in native_isa.cpp; this file holds the backend,
// the reductions, softmax, conv2d (im2col/col2im + gemm) and the elementwise ops.
#include "kernels/cpu/native.hpp"
#include "kernels/cpu/portable.hpp"

#include "kernels/checks.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/native_gemm.hpp"
#include "kernels/cpu/native_kernels.hpp"
#include "kernels/cpu/pool.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/cpu/train_ops.hpp"
#include "kernels/cpu/winograd.hpp"

namespace detaudit {

const char* to_string(ReduceOrder o) {
  switch (o) {
    case ReduceOrder::kSequential: return "sequential";
    case ReduceOrder::kPairwise: return "pairwise";
    case ReduceOrder::kBlocked: return "blocked";
    case ReduceOrder::kAtomic: return "atomic";
    case ReduceOrder::kPortable: return "portable";
  }
  return "?";
}

bool parse_reduce_order(const std::string& s, ReduceOrder* out) {
  for (ReduceOrder o : {ReduceOrder::kSequential, ReduceOrder::kPairwise, ReduceOrder::kBlocked, ReduceOrder::kAtomic,
                        ReduceOrder::kPortable})
    if (s == to_string(o)) return *out = o, true;
  return false;
}

const char* to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto: return "auto";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kScalar: return "scalar";
  }
  return "?";
}

bool parse_cpu_isa(const std::string& s, CpuIsa* out) {
  for (CpuIsa i : {CpuIsa::kAuto, CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kScalar})
    if (s == to_string(i)) return *out = i, true;
  return false;
}

bool cpu_isa_supported(CpuIsa isa) { return native::isa_kernels(isa) != nullptr; }

CpuIsa resolved_cpu_isa(CpuIsa isa) {
  if (isa != CpuIsa::kAuto) return isa;
  for (CpuIsa i : {CpuIsa::kAvx512, CpuIsa::kAvx2})
    if (cpu_isa_supported(i)) return i;
  return CpuIsa::kScalar;
}

const char* to_string(ConvAlgo a) {
  switch (a) {
    case ConvAlgo::kDirect: return "direct";
    case ConvAlgo::kWinograd: return "winograd";
  }
  return "?";
}

bool parse_conv_algo(const std::string& s, ConvAlgo* out) {
  for (ConvAlgo a : {ConvAlgo::kDirect, ConvAlgo::kWinograd})
    if (s == to_string(a)) return *out = a, true;
  return false;
}

namespace {

using native::IsaKernels;
using native::kAtomicChunksPerThread;
using native::kLanes;
using native::kPairwiseLeaf;

// ---- ordered float reductions -----------------------------------------------------------------

struct ReduceInput {
  ReduceOp op;  // kNorm2 accumulates squares; the sqrt is the caller's
  const float* x;
  const float* y;
};

float leaf(const IsaKernels& kn, const ReduceInput& in, size_t b, size_t e) {
  if (e <= b) return 0.0f;
  switch (in.op) {
    case ReduceOp::kSum: return kn.leaf_sum(in.x + b, e - b);
    case ReduceOp::kDot: return kn.leaf_dot(in.x + b, in.y + b, e - b);
    case ReduceOp::kNorm2: return kn.leaf_sumsq(in.x + b, e - b);
  }
  return 0.0f;
}

// order=sequential: one float running sum in index order. Deliberately not vectorised (that would
// change the order); the FMA build of the loop only makes std::fma an instruction, same bits.
template <ReduceOp Op>
float sequential_loop(const float* x, const float* y, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if constexpr (Op == ReduceOp::kSum) s = s + x[i];
    if constexpr (Op == ReduceOp::kDot) s = std::fma(x[i], y[i], s);
    if constexpr (Op == ReduceOp::kNorm2) s = std::fma(x[i], x[i], s);
  }
  return s;
}
template <ReduceOp Op>
__attribute__((target("fma"))) float sequential_loop_fma(const float* x, const float* y, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if constexpr (Op == ReduceOp::kSum) s = s + x[i];
    if constexpr (Op == ReduceOp::kDot) s = std::fma(x[i], y[i], s);
    if constexpr (Op == ReduceOp::kNorm2) s = std::fma(x[i], x[i], s);
  }
  return s;
}

float sequential(const IsaKernels& kn, const ReduceInput& in, size_t n) {
  const bool fma = kn.isa != CpuIsa::kScalar;
  switch (in.op) {
    case ReduceOp::kSum: return sequential_loop<ReduceOp::kSum>(in.x, in.y, n);
    case ReduceOp::kDot:
      return fma ? sequential_loop_fma<ReduceOp::kDot>(in.x, in.y, n) : sequential_loop<ReduceOp::kDot>(in.x, in.y, n);
    case ReduceOp::kNorm2:
      return fma ? sequential_loop_fma<ReduceOp::kNorm2>(in.x, in.y, n)
                 : sequential_loop<ReduceOp::kNorm2>(in.x, in.y, n);
  }
  return 0.0f;
}

// Pairwise tree over partials: adjacent pairs level by level, an odd last one carried up.
float pairwise_tree(std::vector<float>& v) {
  if (v.empty()) return 0.0f;
  size_t len = v.size();
  while (len > 1) {
    size_t half = len / 2;
    for (size_t i = 0; i < half; ++i) v[i] = v[2 * i] + v[2 * i + 1];
    if (len % 2) v[half] = v[len - 1];
    len = half + len % 2;
  }
  return v[0];
}

size_t atomic_chunks(size_t n, int threads) {
  size_t want = size_t(kAtomicChunksPerThread) * threads;
  size_t most = (n + kLanes - 1) / kLanes;  // chunks of at least kLanes elements
  return std::max<size_t>(1, std::min(want, most));
}

// Runs fn(t) for t < count, on the pool when given, else inline. Which partial a t computes is fixed,
// so the two give the same bits.
template <class F>
void for_each_part(ThreadPool* pool, int count, F&& fn) {
  if (!pool || count <= 1) {
    for (int t = 0; t < count; ++t) fn(t);
    return;
  }
  const int threads = pool->size();
  pool->run([&](int tid) {
    for (int t = int(int64_t(count) * tid / threads); t < int(int64_t(count) * (tid + 1) / threads); ++t) fn(t);
  });
}

// The sum of n elements in `order` as `threads` threads would compute it. With pool == nullptr the
// partials are computed inline (same bits); order=atomic then adds them in the seeded permutation,
// or in chunk order without a seed (what a single thread's completion order is).
float ordered_reduce(const IsaKernels& kn, ReduceOrder order, int threads, uint64_t forced_seed, ThreadPool* pool,
                     const ReduceInput& in, size_t n) {
  switch (order) {
    case ReduceOrder::kSequential: return sequential(kn, in, n);
    case ReduceOrder::kPairwise: {
      // determinism: leaves of kPairwiseLeaf elements, fixed lanes inside, a pairwise tree over the
      // leaves: depends on n only, not on threads.
      size_t leaves = (n + kPairwiseLeaf - 1) / kPairwiseLeaf;
      std::vector<float> part(leaves);
      for_each_part(pool, int(leaves), [&](int l) {
        part[l] = leaf(kn, in, size_t(l) * kPairwiseLeaf, std::min(n, size_t(l + 1) * kPairwiseLeaf));
      });
      return pairwise_tree(part);
    }
    case ReduceOrder::kBlocked: {
      // determinism: one contiguous block per thread, partials added in thread order; the block
      // edges move with the thread count, so do the bits. With one thread this is one kLanes-lane
      // leaf over all n (not the sequential order's single running sum).
      std::vector<float> part(threads);
      for_each_part(pool, threads, [&](int t) {
        part[t] = leaf(kn, in, n * t / threads, n * (t + 1) / threads);
      });
      float s = part[0];
      for (int t = 1; t < threads; ++t) s = s + part[t];
      return s;
    }
    case ReduceOrder::kAtomic: {
      const size_t chunks = atomic_chunks(n, threads);
      auto chunk_at = [&](size_t c) { return n * c / chunks; };
      if (forced_seed != 0 || !pool || pool->size() == 1) {
        // determinism: the test hook (or one thread): partials added in a seeded permutation, or in
        // chunk order when no seed is given.
        std::vector<float> part(chunks);
        for (size_t c = 0; c < chunks; ++c) part[c] = leaf(kn, in, chunk_at(c), chunk_at(c + 1));
        float s = 0.0f;
        if (forced_seed != 0) {
          for (uint32_t c : native::forced_order(forced_seed, chunks)) s = s + part[c];
        } else {
          for (size_t c = 0; c < chunks; ++c) s = s + part[c];
        }
        return s;
      }
      // determinism: NOT deterministic — each chunk's partial is added when it completes, a real race.
      float result = 0.0f;
      std::atomic<size_t> next{0};
      pool->run([&](int) {
        for (size_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
          float p = leaf(kn, in, chunk_at(c), chunk_at(c + 1));
          std::atomic_ref<float>(result).fetch_add(p, std::memory_order_relaxed);
        }
      });
      return result;
    }
    case ReduceOrder::kPortable: break;  // its own backend (kernels/cpu/portable.cpp)
  }
  return 0.0f;
}

// ---- elementwise ----------------------------------------------------------------------------------

__attribute__((target("fma"))) void axpy_fma(size_t n, float alpha, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}
void axpy_plain(size_t n, float alpha, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

float unary_one(UnaryOp op, float v) {
  switch (op) {
    case UnaryOp::kCopy: return v;
    case UnaryOp::kRelu: return v > 0.0f ? v : 0.0f;
    case UnaryOp::kSigmoid: return 1.0f / (1.0f + std::exp(-v));
    case UnaryOp::kTanh: {  // train_ops::tanh_f32, the backend's own
      float t;
      train_ops::tanh_f32(&v, &t, 0, 1);
      return t;
    }
    case UnaryOp::kHardSigmoid:
      return train_ops::hard_sigmoid_one(v);
    case UnaryOp::kExp: return std::exp(v);
    case UnaryOp::kNeg: return -v;
    case UnaryOp::kSquare: return v * v;
  }
  return v;
}

template <UnaryOp Op>
void unary_loop(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = unary_one(Op, x[i]);
}

template <BinaryOp Op>
void binary_loop(const float* a, const float* b, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (Op == BinaryOp::kAdd) y[i] = a[i] + b[i];
    if constexpr (Op == BinaryOp::kSub) y[i] = a[i] - b[i];
    if constexpr (Op == BinaryOp::kMul) y[i] = a[i] * b[i];
    if constexpr (Op == BinaryOp::kDiv) y[i] = a[i] / b[i];
    if constexpr (Op == BinaryOp::kMax) y[i] = a[i] > b[i] ? a[i] : b[i];
    if constexpr (Op == BinaryOp::kMin) y[i] = a[i] < b[i] ? a[i] : b[i];
  }
}

// ---- per-channel sums (bias gradient) --------------------------------------------------------------

// Channel j of NCHW data seen as one sequence of n*hw terms: term i*hw + l is x[(i*c + j)*hw + l].
struct ChannelSeq {
  const float* x;
  size_t c, hw;
};

// Sum of terms [b, e): each contiguous piece (within one image) through the lane leaf (pieces
// shorter than kLanes as a running sum), the piece sums added in order.
float channel_leaf(const IsaKernels& kn, const ChannelSeq& q, size_t j, size_t b, size_t e) {
  float s = 0.0f;
  while (b < e) {
    const size_t i = b / q.hw, l = b % q.hw, len = std::min(e - b, q.hw - l);
    const float* p = q.x + (i * q.c + j) * q.hw + l;
    float piece;
    if (len >= size_t(kLanes)) {
      piece = kn.leaf_sum(p, len);
    } else {
      piece = p[0];
      for (size_t k = 1; k < len; ++k) piece = piece + p[k];
    }
    s = s + piece;
    b += len;
  }
  return s;
}

// ---- conv2d helpers -------------------------------------------------------------------------------

// dx[c][h][w] = sum over (r, s) in index order of dcol[(c, r, s)][p, q] where the window hits (h, w).
// determinism: a fixed order over the R*S overlaps, whatever the reduction order setting.
void col2im(const ConvShape& sh, const float* dcol, float* dx) {
  const int P = sh.p(), Q = sh.q();
  std::memset(dx, 0, sizeof(float) * size_t(sh.c) * sh.h * sh.w);
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r)
      for (int s = 0; s < sh.s; ++s) {
        const float* src = dcol + size_t((c * sh.r + r) * sh.s + s) * P * Q;
        float* dxc = dx + size_t(c) * sh.h * sh.w;
        for (int p = 0; p < P; ++p) {
          const int h = p * sh.stride - sh.pad + r;
          if (h < 0 || h >= sh.h) continue;
          for (int q = 0; q < Q; ++q) {
            const int w = q * sh.stride - sh.pad + s;
            if (w >= 0 && w < sh.w) dxc[size_t(h) * sh.w + w] = dxc[size_t(h) * sh.w + w] + src[size_t(p) * Q + q];
          }
        }
      }
}

// bias_grad, order=atomic: terms per chunk of a channel's sum.
constexpr size_t kBiasGradChunk = 4096;

// bwd_filter: the K dimension of its gemm is N*P*Q; above this many floats of im2col the images go in
// groups whose partials add in group order.
constexpr size_t kMaxColFloats = size_t(1) << 28;  // 1 GiB

class CpuNative final : public Backend {
 public:
  explicit CpuNative(const CpuNativeOptions& o)
      : opts_(o), kern_(native::isa_kernels(o.isa)), pool_(std::clamp(o.threads, 1, 256)) {
    opts_.threads = pool_.size();
    scratch_.resize(pool_.size());
  }

  std::string name() const override {
    std::string s = std::string("cpu?order=") + to_string(opts_.order) + "&threads=" + std::to_string(opts_.threads);
    if (opts_.isa != CpuIsa::kAuto) s += std::string("&isa=") + to_string(opts_.isa);
    if (opts_.conv != ConvAlgo::kDirect) s += std::string("&conv=") + to_string(opts_.conv);
    return s;
  }
  std::string describe() const override {
    return name() + " (isa " + (kern_ ? to_string(kern_->isa) : "unavailable") + ")";
  }
  std::vector<std::pair<std::string, std::string>> details() const override {
    std::vector<std::pair<std::string, std::string>> d = {
        {"order", to_string(opts_.order)},
        {"threads", std::to_string(opts_.threads)},
        {"isa", kern_ ? to_string(kern_->isa) : std::string("unavailable (") + to_string(opts_.isa) + ")"},
        {"conv", to_string(opts_.conv)}};
    if (opts_.forced_atomic_order_seed != 0)
      d.emplace_back("forced_atomic_order_seed", std::to_string(opts_.forced_atomic_order_seed));
    return d;
  }

  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    native::GemmContext ctx = gemm_context();
    return native::gemm(ctx, {ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc});
  }

  // y_n[K x PQ] = W[K x CRS] * col_n[CRS x PQ]: the order applies to the C*R*S reduction.
  // All images go through one problem (native::conv_fwd) whose output tiles lie inside one image;
  // determinism: every output element is the same reduction over C*R*S whichever tile or thread
  // computes it.
  // conv=winograd: 3x3 stride-1 shapes go through winograd.hpp instead (its own bits).
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    if (winograd(s)) {
      native::GemmContext ctx = gemm_context();
      return native::winograd_fwd(ctx, winograd_, s, x, w, y);
    }
    return conv_gemm_fwd(s, x, w, y);
  }

  // The bias is added in conv_fwd's output pass (the copy out of its padded buffer).
  Status conv2d_fwd_bias(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    native::GemmContext ctx = gemm_context();
    if (winograd(s)) return native::winograd_fwd(ctx, winograd_, s, x, w, y, bias);
    if (size_t(s.n) * s.p() * s.q() > size_t(INT32_MAX)) return Status::invalid("conv2d: too large");
    return native::conv_fwd(ctx, s, x, w, y, bias);
  }

  // Stride 1 with pad < the filter size: dx is the forward convolution of dy with the flipped,
  // transposed filter w'[c][k][R-1-r][S-1-s] and padding R-1-pad, so the order applies to the whole
  // K*R*S reduction of each dx element. Otherwise: dcol_n[CRS x PQ] = W^T * dy_n (the order applies
  // to the K reduction), then col2im adds the R*S overlapping windows in a fixed order.
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    const int crs = s.c * s.r * s.s, pq = s.p() * s.q();
    if (winograd(s)) {
      native::GemmContext ctx = gemm_context();
      return native::winograd_bwd_data(ctx, winograd_, s, dy, w, dx);
    }
    if (s.stride == 1 && s.pad <= s.r - 1 && s.pad <= s.s - 1 && s.r == s.s) {
      ConvShape t;
      t.n = s.n, t.c = s.k, t.h = s.p(), t.w = s.q(), t.k = s.c, t.r = s.r, t.s = s.s, t.stride = 1,
      t.pad = s.r - 1 - s.pad;
      float* wt = wt_.get(s.w_size());
      if (!wt) return Status::error("conv2d: out of memory for the flipped filter");
      for (int k = 0; k < s.k; ++k)
        for (int c = 0; c < s.c; ++c)
          for (int r = 0; r < s.r; ++r)
            for (int q = 0; q < s.s; ++q)
              wt[((size_t(c) * s.k + k) * s.r + r) * s.s + q] =
                  w[((size_t(k) * s.c + c) * s.r + (s.r - 1 - r)) * s.s + (s.s - 1 - q)];
      return conv_gemm_fwd(t, dy, wt, dx);
    }
    float* dcol = col_.get(size_t(crs) * pq);
    if (!dcol) return Status::error("conv2d: out of memory for col2im");
    for (int n = 0; n < s.n; ++n) {
      DETAUDIT_RETURN_IF_ERROR(
          gemm(Trans::kT, Trans::kN, crs, pq, s.k, 1.0f, w, crs, dy + size_t(n) * s.k * pq, pq, 0.0f, dcol, pq));
      col2im(s, dcol, dx + size_t(n) * s.c * s.h * s.w);
    }
    return Status::ok();
  }

  // dw[K x CRS] = dy'[K x NPQ] * col'^T with col'[CRS x NPQ] the im2col of all images side by side:
  // one gemm whose reduction runs over N*P*Q, so the order applies to all of it. (native::conv_bwd_filter
  // never builds col' whole: see native_gemm.hpp.)
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    if (winograd(s)) {
      native::GemmContext ctx = gemm_context();
      return native::winograd_bwd_filter(ctx, winograd_, s, x, dy, dw);
    }
    const int crs = s.c * s.r * s.s, pq = s.p() * s.q();
    // determinism: when all images' im2col would exceed kMaxColFloats, images go in groups; each group
    // is one gemm (the order applies inside it) and group results add into dw in group order.
    const int group = int(std::clamp<size_t>(kMaxColFloats / (size_t(crs) * pq), 1, size_t(s.n)));
    if (size_t(group) * pq > size_t(INT32_MAX)) return Status::invalid("conv2d: too large");
    for (int n0 = 0; n0 < s.n; n0 += group) {
      ConvShape sg = s;
      sg.n = std::min(group, s.n - n0);
      native::GemmContext ctx = gemm_context();
      DETAUDIT_RETURN_IF_ERROR(native::conv_bwd_filter(ctx, sg, x + size_t(n0) * s.c * s.h * s.w,
                                                       dy + size_t(n0) * s.k * pq, n0 == 0 ? 0.0f : 1.0f, dw));
    }
    return Status::ok();
  }

  // Max pooling has no reduction order to choose: the shared host code (kernels/cpu/pool.hpp), images
  // split over threads; overlapping windows' gradients add in float in a fixed window order.
  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_pool(s));
    parallel_chunks(size_t(s.n), size_t(s.c) * s.h * s.w, [&](size_t i0, size_t i1) {
      PoolShape part = s;
      part.n = int(i1 - i0);
      if (part.n == 0) return;
      if (s.window == 2 && s.stride == 2)
        maxpool2x2_fwd(x + i0 * s.c * s.h * s.w, y + i0 * s.c * s.p() * s.q(), (i1 - i0) * s.c, s.h, s.w);
      else
        maxpool_fwd_host(part, x + i0 * s.c * s.h * s.w, y + i0 * s.c * s.p() * s.q());
    });
    return Status::ok();
  }
  Status maxpool_bwd(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_pool(s));
    parallel_chunks(size_t(s.n), size_t(s.c) * s.h * s.w, [&](size_t i0, size_t i1) {
      PoolShape part = s;
      part.n = int(i1 - i0);
      if (part.n == 0) return;
      if (s.window == 2 && s.stride == 2)
        maxpool2x2_bwd(x + i0 * s.c * s.h * s.w, dy + i0 * s.c * s.p() * s.q(), dx + i0 * s.c * s.h * s.w,
                       (i1 - i0) * s.c, s.h, s.w);
      else
        maxpool_bwd_host(part, x + i0 * s.c * s.h * s.w, dy + i0 * s.c * s.p() * s.q(), dx + i0 * s.c * s.h * s.w,
                         /*double_accumulate=*/false);
    });
    return Status::ok();
  }
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (op == ReduceOp::kDot && !y && n > 0) return Status::invalid("reduce dot: y is null");
    float s = ordered_reduce(*kern_, opts_.order, opts_.threads, opts_.forced_atomic_order_seed, &pool_, {op, x, y}, n);
    *out = op == ReduceOp::kNorm2 ? std::sqrt(s) : s;
    return Status::ok();
  }

  // y = exp(x - max) / sum, per row; the row sum follows the order, as `threads` threads would add it.
  Status softmax(const float* x, float* y, size_t rows, size_t cols) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (rows == 0 || cols == 0) return Status::ok();
    const int threads = opts_.threads;
    std::vector<float> sums(rows);
    auto exp_rows = [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = xr[0];
        for (size_t j = 1; j < cols; ++j) m = xr[j] > m ? xr[j] : m;  // max: exact in any order
        for (size_t j = 0; j < cols; ++j) yr[j] = std::exp(xr[j] - m);
      }
    };
    parallel_rows(rows, exp_rows);
    if (opts_.order == ReduceOrder::kAtomic && opts_.forced_atomic_order_seed == 0 && threads > 1) {
      // determinism: NOT deterministic — chunks of every row are spread over the threads and their
      // partials added into the row sum in completion order.
      const size_t chunks = atomic_chunks(cols, threads), items = rows * chunks;
      std::fill(sums.begin(), sums.end(), 0.0f);
      std::atomic<size_t> next{0};
      pool_.run([&](int) {
        for (size_t it; (it = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
          const size_t r = it / chunks, c = it % chunks;
          float p = leaf(*kern_, {ReduceOp::kSum, y + r * cols, nullptr}, cols * c / chunks, cols * (c + 1) / chunks);
          std::atomic_ref<float>(sums[r]).fetch_add(p, std::memory_order_relaxed);
        }
      });
    } else if (rows >= size_t(threads)) {
      // determinism: rows spread over threads; each row sum is computed exactly as `threads` threads
      // would (ordered_reduce without a pool), so the bits match the one-row-many-threads case.
      parallel_rows(rows, [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r)
          sums[r] = ordered_reduce(*kern_, opts_.order, threads, opts_.forced_atomic_order_seed, nullptr,
                                   {ReduceOp::kSum, y + r * cols, nullptr}, cols);
      });
    } else {
      for (size_t r = 0; r < rows; ++r)
        sums[r] = ordered_reduce(*kern_, opts_.order, threads, opts_.forced_atomic_order_seed, &pool_,
                                 {ReduceOp::kSum, y + r * cols, nullptr}, cols);
    }
    parallel_rows(rows, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        float* yr = y + r * cols;
        for (size_t j = 0; j < cols; ++j) yr[j] = yr[j] / sums[r];
      }
    });
    return Status::ok();
  }

  Status unary(UnaryOp op, const float* x, float* y, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_elements(n, [&](size_t b, size_t e) {
      switch (op) {
        case UnaryOp::kCopy: return unary_loop<UnaryOp::kCopy>(x + b, y + b, e - b);
        case UnaryOp::kRelu: return unary_loop<UnaryOp::kRelu>(x + b, y + b, e - b);
        case UnaryOp::kSigmoid: return unary_loop<UnaryOp::kSigmoid>(x + b, y + b, e - b);
        case UnaryOp::kTanh:
          return train_ops::tanh_f32(x, y, b, e);
        case UnaryOp::kHardSigmoid: return unary_loop<UnaryOp::kHardSigmoid>(x + b, y + b, e - b);
        case UnaryOp::kExp: return unary_loop<UnaryOp::kExp>(x + b, y + b, e - b);
        case UnaryOp::kNeg: return unary_loop<UnaryOp::kNeg>(x + b, y + b, e - b);
        case UnaryOp::kSquare: return unary_loop<UnaryOp::kSquare>(x + b, y + b, e - b);
      }
    });
    return Status::ok();
  }

  Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_elements(n, [&](size_t s, size_t e) {
      switch (op) {
        case BinaryOp::kAdd: return binary_loop<BinaryOp::kAdd>(a + s, b + s, y + s, e - s);
        case BinaryOp::kSub: return binary_loop<BinaryOp::kSub>(a + s, b + s, y + s, e - s);
        case BinaryOp::kMul: return binary_loop<BinaryOp::kMul>(a + s, b + s, y + s, e - s);
        case BinaryOp::kDiv: return binary_loop<BinaryOp::kDiv>(a + s, b + s, y + s, e - s);
        case BinaryOp::kMax: return binary_loop<BinaryOp::kMax>(a + s, b + s, y + s, e - s);
        case BinaryOp::kMin: return binary_loop<BinaryOp::kMin>(a + s, b + s, y + s, e - s);
      }
    });
    return Status::ok();
  }

  // y = fma(alpha, x, y): one rounding per element.
  Status axpy(size_t n, float alpha, const float* x, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    const bool fma = kern_->isa != CpuIsa::kScalar;
    parallel_elements(n, [&](size_t b, size_t e) {
      if (fma)
        axpy_fma(e - b, alpha, x + b, y + b);
      else
        axpy_plain(e - b, alpha, x + b, y + b);
    });
    return Status::ok();
  }

  // ---- training ops --------------------------------------------------------------------------------

  // determinism: elementwise, one add per element.
  Status bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (hw == 1)  // rows of a linear layer: whole rows to each thread
      parallel_chunks(n, c, [&](size_t r0, size_t r1) { train_ops::bias_add_f32(y, bias, c, 1, r0 * c, r1 * c); });
    else
      parallel_chunks(n * c, hw, [&](size_t p0, size_t p1) { train_ops::bias_add_f32(y, bias, c, hw, p0, p1); });
    return Status::ok();
  }

  // The n*hw terms of each channel reduce in the backend's order, as ordered_reduce would combine them:
  // sequential: one running sum; pairwise: kPairwiseLeaf leaves and a pairwise tree; blocked: `threads`
  // contiguous blocks added in block order; atomic: chunks of about kBiasGradChunk terms (at least 3)
  // added in completion order (a race; fewer chunks for very short sums).
  // hw == 1 (a linear layer's bias) is db = ones[1 x n] * dy[n x c], a gemm: its order applies to n.
  Status bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (n == 0 || c == 0 || hw == 0) {
      for (size_t j = 0; j < c; ++j) db[j] = 0.0f;
      return Status::ok();
    }
    if (hw == 1 && n <= size_t(INT32_MAX) && c <= size_t(INT32_MAX)) {
      float* ones = ones_.get(n);
      if (!ones) return Status::error("bias gradient: out of memory");
      std::fill(ones, ones + n, 1.0f);
      return gemm(Trans::kN, Trans::kN, 1, int(c), int(n), 1.0f, ones, int(n), dy, int(c), 0.0f, db, int(c));
    }
    const ChannelSeq q{dy, c, hw};
    const size_t total = n * hw;
    const int threads = opts_.threads;
    if (opts_.order == ReduceOrder::kSequential) {
      // determinism: one running sum per channel in term order; channels spread over threads.
      parallel_rows(c, [&](size_t j0, size_t j1) {
        for (size_t j = j0; j < j1; ++j) {
          float s = 0.0f;
          for (size_t i = 0; i < n; ++i) {
            const float* p = dy + (i * c + j) * hw;
            for (size_t l = 0; l < hw; ++l) s = s + p[l];
          }
          db[j] = s;
        }
      });
      return Status::ok();
    }
    size_t parts = 1;
    switch (opts_.order) {
      case ReduceOrder::kPairwise: parts = (total + kPairwiseLeaf - 1) / kPairwiseLeaf; break;
      case ReduceOrder::kBlocked: parts = size_t(threads); break;
      default:
        // Chunks of about kBiasGradChunk terms, at least 3 so that the adds can race (fewer only for
        // sums of under 192 terms, where atomic_chunks allows one chunk per kLanes terms), as a GPU
        // gives each block a slice of the channel.
        parts = std::min(atomic_chunks(total, threads), std::max<size_t>(3, (total + kBiasGradChunk - 1) / kBiasGradChunk));
        break;
    }
    auto bound = [&](size_t p) { return opts_.order == ReduceOrder::kPairwise ? std::min(total, p * kPairwiseLeaf)
                                                                              : total * p / parts; };
    const size_t items = c * parts;
    if (opts_.order == ReduceOrder::kAtomic && opts_.forced_atomic_order_seed == 0 && threads > 1) {
      // determinism: NOT deterministic — every (channel, chunk) partial is added into its channel's
      // sum when it completes, a real race like GPU atomics.
      for (size_t j = 0; j < c; ++j) db[j] = 0.0f;
      std::atomic<size_t> next{0};
      pool_.run([&](int) {
        for (size_t it; (it = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
          const size_t j = it / parts, p = it % parts;
          float v = channel_leaf(*kern_, q, j, bound(p), bound(p + 1));
          std::atomic_ref<float>(db[j]).fetch_add(v, std::memory_order_relaxed);
        }
      });
      return Status::ok();
    }
    // determinism: partials are fixed by (channel, part) whichever thread computes them; they combine
    // below in a fixed order.
    std::vector<float>& part = partials_;
    part.resize(items);
    std::atomic<size_t> next{0};
    pool_.run([&](int) {
      for (size_t it; (it = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
        const size_t j = it / parts, p = it % parts;
        part[it] = channel_leaf(*kern_, q, j, bound(p), bound(p + 1));
      }
    });
    std::vector<uint32_t> perm;
    if (opts_.order == ReduceOrder::kAtomic && opts_.forced_atomic_order_seed != 0)
      perm = native::forced_order(opts_.forced_atomic_order_seed, parts);
    std::vector<float> tree;
    for (size_t j = 0; j < c; ++j) {
      const float* pj = part.data() + j * parts;
      if (opts_.order == ReduceOrder::kPairwise) {
        tree.assign(pj, pj + parts);
        db[j] = pairwise_tree(tree);
      } else if (!perm.empty()) {
        float s = 0.0f;  // the test hook: chunks in a seeded permutation
        for (uint32_t p : perm) s = s + pj[p];
        db[j] = s;
      } else {
        float s = pj[0];
        for (size_t p = 1; p < parts; ++p) s = s + pj[p];
        db[j] = s;
      }
    }
    return Status::ok();
  }

  // determinism: elementwise.
  Status unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (op != UnaryOp::kRelu && op != UnaryOp::kSigmoid && op != UnaryOp::kTanh && op != UnaryOp::kHardSigmoid)
      return Status::unsupported(std::string(to_string(op)) + " backward is not provided by this backend");
    parallel_elements(n, [&](size_t b, size_t e) { train_ops::unary_bwd_f32(op, x, y, dy, dx, b, e); });
    return Status::ok();
  }

  Status lstm_cell_fwd(const LstmFwdArgs& a) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_elements(a.n * a.kc, [&](size_t b, size_t e) { train_ops::lstm_fwd_f32(a, b, e); });
    return Status::ok();
  }
  Status lstm_cell_bwd(const LstmBwdArgs& a) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_elements(a.n * a.kc, [&](size_t b, size_t e) { train_ops::lstm_bwd_f32(a, b, e); });
    return Status::ok();
  }

  Status upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (h < 1 || w < 1) return Status::invalid("upsample2: h and w must be positive");
    parallel_chunks(planes, size_t(h) * w * 4, [&](size_t p0, size_t p1) { train_ops::upsample2_fwd(x, y, h, w, p0, p1); });
    return Status::ok();
  }
  // determinism: each 2x2 block sums in the fixed order of Backend::upsample2_bwd.
  Status upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (h < 1 || w < 1) return Status::invalid("upsample2: h and w must be positive");
    parallel_chunks(planes, size_t(h) * w * 4,
                    [&](size_t p0, size_t p1) { train_ops::upsample2_bwd_f32(dy, dx, h, w, p0, p1); });
    return Status::ok();
  }
  Status copy_2d(size_t rows, size_t cols, const float* src, size_t src_ld, float* dst, size_t dst_ld) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_chunks(rows, cols, [&](size_t r0, size_t r1) {
      for (size_t i = r0; i < r1; ++i) std::memcpy(dst + i * dst_ld, src + i * src_ld, sizeof(float) * cols);
    });
    return Status::ok();
  }
  Status fill(float* y, float value, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_elements(n, [&](size_t b, size_t e) { std::fill(y + b, y + e, value); });
    return Status::ok();
  }
  Status scale(float* y, float alpha, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_elements(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) y[i] = alpha * y[i];
    });
    return Status::ok();
  }

  // The terms (y - t, or |y - t|) are formed elementwise; their sum is ordered_reduce in the backend's
  // order (kMse: sum of squares through the lane leaves, as reduce norm2 before its sqrt).
  Status loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (n == 0) return Status::invalid(std::string(to_string(op)) + " loss: no elements");
    float* d = terms_.get(n);
    if (!d) return Status::error("loss: out of memory");
    parallel_elements(n, [&](size_t b, size_t e) { train_ops::loss_terms_f32(op, y, t, n, d, dy, b, e); });
    const ReduceOp rop = op == LossOp::kMse ? ReduceOp::kNorm2 : ReduceOp::kSum;
    float s = ordered_reduce(*kern_, opts_.order, opts_.threads, opts_.forced_atomic_order_seed, &pool_, {rop, d, nullptr}, n);
    *value = s / float(n);
    return Status::ok();
  }

  // determinism: elementwise, the operation order of AdamParams / SgdParams, no FMA.
  Status adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_elements(n, [&](size_t b, size_t e) { train_ops::adam_f32(p, w, g, m, v, b, e); });
    return Status::ok();
  }
  Status sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    parallel_elements(n, [&](size_t b, size_t e) { train_ops::sgd_f32(p, w, g, velocity, b, e); });
    return Status::ok();
  }

 private:
  native::GemmContext gemm_context() {
    return {kern_, &pool_, opts_.order, opts_.forced_atomic_order_seed, &scratch_, &shared_, &staging_};
  }

  // y = conv(x, w) through im2col + gemm (see conv2d_fwd).
  Status conv_gemm_fwd(const ConvShape& s, const float* x, const float* w, float* y) {
    if (size_t(s.n) * s.p() * s.q() > size_t(INT32_MAX)) return Status::invalid("conv2d: too large");
    native::GemmContext ctx = gemm_context();
    return native::conv_fwd(ctx, s, x, w, y);
  }

  bool winograd(const ConvShape& s) const {
    return opts_.conv == ConvAlgo::kWinograd && native::winograd_applies(s, opts_.winograd_min_channels);
  }

  Status ready() const {
    if (!kern_)
      return Status::unavailable(std::string("cpu: isa=") + to_string(opts_.isa) + " forced but this CPU lacks it");
    return Status::ok();
  }

  // determinism: elementwise work split over threads; every element's arithmetic is the same
  // whichever thread does it.
  template <class F>
  void parallel_elements(size_t n, F&& fn) {
    const int threads = pool_.size();
    if (threads == 1 || n < (size_t(1) << 15)) return fn(size_t(0), n);
    pool_.run([&](int t) {
      size_t b = n * t / threads / 16 * 16, e = t + 1 == threads ? n : n * (t + 1) / threads / 16 * 16;
      if (b < e) fn(b, e);
    });
  }
  // Rows of `cost` elements each, split over threads when there is enough work.
  template <class F>
  void parallel_chunks(size_t rows, size_t cost, F&& fn) {
    const int threads = pool_.size();
    if (threads == 1 || rows < 2 || rows * cost < (size_t(1) << 14)) return fn(size_t(0), rows);
    pool_.run([&](int t) { fn(rows * t / threads, rows * (t + 1) / threads); });
  }
  template <class F>
  void parallel_rows(size_t rows, F&& fn) {
    const int threads = pool_.size();
    if (threads == 1 || rows == 1) return fn(size_t(0), rows);
    pool_.run([&](int t) { fn(rows * t / threads, rows * (t + 1) / threads); });
  }

  CpuNativeOptions opts_;
  const IsaKernels* kern_;
  ThreadPool pool_;
  std::vector<native::ThreadScratch> scratch_;
  std::vector<native::AlignedBuffer> shared_;
  std::vector<native::AlignedBuffer> staging_ = std::vector<native::AlignedBuffer>(4);
  native::AlignedBuffer col_, wt_;
  native::WinogradWork winograd_;
  native::AlignedBuffer ones_, terms_;  // bias_grad, loss
  std::vector<float> partials_;        // bias_grad
};

}  // namespace

std::unique_ptr<Backend> make_cpu_native(const CpuNativeOptions& opts) {
  if (opts.order == ReduceOrder::kPortable) {
    // portable's bits are the same on every CPU and GPU; it has no Winograd path to choose.
    if (opts.conv != ConvAlgo::kDirect) return nullptr;
    return make_cpu_portable(opts.threads, opts.isa);
  }
  return std::make_unique<CpuNative>(opts);
}

}  // namespace detaudit
