// onednn: oneDNN 2.6 primitives behind the Backend interface (CPU engine, one stream).
// The ISA oneDNN generates code for is capped by ONEDNN_MAX_CPU_ISA, read once per process (at the
// first primitive), so the probes set it in a worker process's environment. Threads: Debian's
// libdnnl uses OpenMP (DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP); the parent sets
// OMP_NUM_THREADS and this backend also calls omp_set_num_threads before each op.
//
// Observed on an AVX-512 Xeon (conv2d n=8 c=32 28x28 k=64 3x3 pad 1): with plain NCHW/KCRS tensors
// every ISA runs "x64:gemm:jit" and SSE41, AVX, AVX2 and AVX512_CORE give four different outputs;
// with blocked layouts the direct "jit:<isa>" kernels run (SSE41 and AVX agree in forward there).
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>
#include <string>
#include <vector>

#include "kernels/cpu/onednn_backend.hpp"

#include "kernels/checks.hpp"

#ifdef DETAUDIT_HAVE_ONEDNN
#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace detaudit {

#ifdef DETAUDIT_HAVE_ONEDNN
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;
using Dims = memory::dims;

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
  }
  return "unknown";
}

Status from_dnnl(const dnnl::error& e, const char* op) {
  std::string m = std::string("oneDNN ") + op + ": " + e.what() + " (dnnl_status " +
                  std::to_string(int(e.status)) + ")";
  if (e.status == dnnl_unimplemented) return Status::unsupported(m);
  return Status::error(m);
}


int64_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return int64_t(u);
}

// One primitive and the memories it runs on. Each argument wraps the caller's pointer (`user`);
// where the primitive wants another layout, `inner` is its own buffer and exact reorders copy in
// (inputs) and out (outputs).
struct Arg {
  int id = 0;
  bool input = false, output = false;
  memory user, inner;
  dnnl::reorder to_inner, to_user;
  bool reordered = false;
};
struct Prim {
  dnnl::primitive prim;
  std::vector<Arg> args;
  std::string impl;
};

enum OpKey : int64_t {
  kKeyGemm = 1,
  kKeyConvFwd,
  kKeyConvBwdData,
  kKeyConvBwdFilter,
  kKeyReduce,
  kKeyDotMul,
  kKeySoftmax,
  kKeyUnary,
  kKeyUnaryClip,
  kKeyBinary
};

using OmpSetNumThreads = void (*)(int);

class OnednnBackend final : public Backend {
 public:
  OnednnBackend(int threads, OnednnConvLayout layout)
      : threads_(threads), layout_(layout), eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
    // libdnnl brings libgomp; look omp_set_num_threads up at run time so detaudit itself does not
    // have to link OpenMP.
    omp_set_ = reinterpret_cast<OmpSetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    pin_threads();
  }

  std::string name() const override {
    std::string n = "onednn?";
    if (layout_ == OnednnConvLayout::kBlocked) n += "layout=blocked&";
    return n + "threads=" + std::to_string(threads_);
  }
  std::string describe() const override {
    return name() + " (oneDNN " + onednn_version_string() + ", isa " +
           isa_name(dnnl::get_effective_cpu_isa()) + ")";
  }
  std::vector<std::pair<std::string, std::string>> details() const override {
    const char* env = std::getenv("ONEDNN_MAX_CPU_ISA");
    return {{"isa_env", env ? env : ""},
            {"effective_isa", isa_name(dnnl::get_effective_cpu_isa())},
            {"impl", last_impl_},
            {"threads", std::to_string(threads_)},
            {"conv_layout", layout_ == OnednnConvLayout::kBlocked ? "blocked" : "plain"},
            {"omp_set_num_threads", omp_set_ ? "called" : "not found (OMP_NUM_THREADS only)"}};
  }

  // ---- gemm: dnnl::matmul; transposes are strides, alpha an output scale, beta a sum post-op ---
  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
              const float* b, int ldb, float beta, float* c, int ldc) override {
    DETAUDIT_RETURN_IF_ERROR(validate_gemm(ta, tb, m, n, k, lda, ldb, ldc));
    if (m == 0 || n == 0) return Status::ok();
    if (k == 0) {  // C = beta * C; oneDNN has no empty reduction dimension
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          float& v = c[size_t(i) * ldc + j];
          v = beta == 0.0f ? 0.0f : beta * v;
        }
      return Status::ok();
    }
    std::vector<int64_t> key{kKeyGemm, int64_t(ta), int64_t(tb), m, n, k, lda, ldb, ldc,
                             float_bits(alpha), float_bits(beta)};
    try {
      Prim* p = find(key);
      if (!p) {
        memory::desc amd({m, k}, Dt::f32, ta == Trans::kN ? Dims{lda, 1} : Dims{1, lda});
        memory::desc bmd({k, n}, Dt::f32, tb == Trans::kN ? Dims{ldb, 1} : Dims{1, ldb});
        memory::desc cmd({m, n}, Dt::f32, Dims{ldc, 1});
        dnnl::primitive_attr attr;
        if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
        if (beta != 0.0f) {
          dnnl::post_ops po;
          po.append_sum(beta);
          attr.set_post_ops(po);
        }
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(amd, bmd, cmd), attr, eng_);
        Prim np;
        np.prim = dnnl::matmul(pd);
        np.impl = pd.impl_info_str();
        np.args.push_back(make_arg(DNNL_ARG_SRC, true, false, amd, pd.src_desc()));
        np.args.push_back(make_arg(DNNL_ARG_WEIGHTS, true, false, bmd, pd.weights_desc()));
        np.args.push_back(make_arg(DNNL_ARG_DST, beta != 0.0f, true, cmd, pd.dst_desc()));
        p = insert(key, std::move(np));
      }
      run(*p, {a, b, c});
    } catch (const dnnl::error& e) {
      return from_dnnl(e, "gemm (matmul)");
    }
    return Status::ok();
  }

  // ---- conv2d: convolution_direct, f32 --------------------------------------------------------
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    if (s.n == 0) return Status::ok();
    try {
      std::vector<int64_t> key = conv_key(kKeyConvFwd, s);
      Prim* p = find(key);
      if (!p) {
        auto fpd = conv_fwd_pd(s);
        Prim np;
        np.prim = dnnl::convolution_forward(fpd);
        np.impl = fpd.impl_info_str();
        np.args.push_back(make_arg(DNNL_ARG_SRC, true, false, x_md(s), fpd.src_desc()));
        np.args.push_back(make_arg(DNNL_ARG_WEIGHTS, true, false, w_md(s), fpd.weights_desc()));
        np.args.push_back(make_arg(DNNL_ARG_DST, false, true, y_md(s), fpd.dst_desc()));
        p = insert(key, std::move(np));
      }
      run(*p, {x, w, y});
    } catch (const dnnl::error& e) {
      return from_dnnl(e, "conv2d forward");
    }
    return Status::ok();
  }

  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    if (s.n == 0) return Status::ok();
    try {
      std::vector<int64_t> key = conv_key(kKeyConvBwdData, s);
      Prim* p = find(key);
      if (!p) {
        auto fpd = conv_fwd_pd(s);
        dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct,
                                                prim_md(x_md(s)), prim_md(w_md(s)),
                                                prim_md(y_md(s)), strides(s), pad_l(s), pad_r(s));
        dnnl::convolution_backward_data::primitive_desc pd(d, eng_, fpd);
        Prim np;
        np.prim = dnnl::convolution_backward_data(pd);
        np.impl = pd.impl_info_str();
        np.args.push_back(make_arg(DNNL_ARG_DIFF_DST, true, false, y_md(s), pd.diff_dst_desc()));
        np.args.push_back(make_arg(DNNL_ARG_WEIGHTS, true, false, w_md(s), pd.weights_desc()));
        np.args.push_back(make_arg(DNNL_ARG_DIFF_SRC, false, true, x_md(s), pd.diff_src_desc()));
        p = insert(key, std::move(np));
      }
      run(*p, {dy, w, dx});
    } catch (const dnnl::error& e) {
      return from_dnnl(e, "conv2d backward-data");
    }
    return Status::ok();
  }

  // determinism: with threads > 1 oneDNN's weight-gradient kernels give each thread a slice of the
  // images/pixels and add the per-thread partial dW in a fixed order: the bits are fixed for a given
  // thread count and change with it (seen with AVX-512 kernels: 1 vs 2 threads differ in backward-
  // filter, while forward and backward-data keep their bits).
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy,
                           float* dw) override {
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    if (s.n == 0) {
      std::memset(dw, 0, sizeof(float) * s.w_size());
      return Status::ok();
    }
    try {
      std::vector<int64_t> key = conv_key(kKeyConvBwdFilter, s);
      Prim* p = find(key);
      if (!p) {
        auto fpd = conv_fwd_pd(s);
        dnnl::convolution_backward_weights::desc d(
            dnnl::algorithm::convolution_direct, prim_md(x_md(s)), prim_md(w_md(s)),
            memory::desc(), prim_md(y_md(s)), strides(s), pad_l(s), pad_r(s));
        dnnl::convolution_backward_weights::primitive_desc pd(d, eng_, fpd);
        Prim np;
        np.prim = dnnl::convolution_backward_weights(pd);
        np.impl = pd.impl_info_str();
        np.args.push_back(make_arg(DNNL_ARG_SRC, true, false, x_md(s), pd.src_desc()));
        np.args.push_back(make_arg(DNNL_ARG_DIFF_DST, true, false, y_md(s), pd.diff_dst_desc()));
        np.args.push_back(
            make_arg(DNNL_ARG_DIFF_WEIGHTS, false, true, w_md(s), pd.diff_weights_desc()));
        p = insert(key, std::move(np));
      }
      run(*p, {x, dy, dw});
    } catch (const dnnl::error& e) {
      return from_dnnl(e, "conv2d backward-filter");
    }
    return Status::ok();
  }

  // ---- reduce: dnnl::reduction over a 1 x n tensor; dot = binary mul, then reduction_sum ------
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    if (op == ReduceOp::kDot && y == nullptr) return Status::invalid("reduce dot: y is null");
    if (n == 0) {
      *out = 0.0f;
      return Status::ok();
    }
    // oneDNN builds no reduction whose source has the destination's shape (1 x 1): not a reduction it provides.
    if (n == 1)
      return Status::unsupported(std::string("oneDNN reduce ") + to_string(op) +
                                 ": a reduction of one element is none oneDNN builds (its source would have the "
                                 "destination's shape)");
    const int64_t nn = int64_t(n);
    try {
      const float* src = x;
      if (op == ReduceOp::kDot) {
        if (tmp_.size() < n) tmp_.resize(n);
        Prim* mul = binary_prim(dnnl::algorithm::binary_mul, nn, kKeyDotMul);
        run(*mul, {x, y, tmp_.data()});
        src = tmp_.data();
      }
      const bool norm = op == ReduceOp::kNorm2;
      std::vector<int64_t> key{kKeyReduce, norm ? 1 : 0, nn};
      Prim* p = find(key);
      if (!p) {
        memory::desc smd({1, nn}, Dt::f32, Tag::ab), dmd({1, 1}, Dt::f32, Tag::ab);
        // reduction_norm_lp_sum with p = 2: sqrt(sum x^2).
        dnnl::reduction::desc d(norm ? dnnl::algorithm::reduction_norm_lp_sum
                                     : dnnl::algorithm::reduction_sum,
                                smd, dmd, norm ? 2.0f : 0.0f, 0.0f);
        dnnl::reduction::primitive_desc pd(d, eng_);
        Prim np;
        np.prim = dnnl::reduction(pd);
        np.impl = pd.impl_info_str();
        np.args.push_back(make_arg(DNNL_ARG_SRC, true, false, smd, pd.src_desc()));
        np.args.push_back(make_arg(DNNL_ARG_DST, false, true, dmd, pd.dst_desc()));
        p = insert(key, std::move(np));
      }
      run(*p, {src, out});
    } catch (const dnnl::error& e) {
      return from_dnnl(e, (std::string("reduce ") + to_string(op)).c_str());
    }
    return Status::ok();
  }

  Status softmax(const float* x, float* y, size_t rows, size_t cols) override {
    if (rows == 0 || cols == 0) return Status::ok();
    try {
      std::vector<int64_t> key{kKeySoftmax, int64_t(rows), int64_t(cols)};
      Prim* p = find(key);
      if (!p) {
        memory::desc md({int64_t(rows), int64_t(cols)}, Dt::f32, Tag::ab);
        dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, 1);
        dnnl::softmax_forward::primitive_desc pd(d, eng_);
        Prim np;
        np.prim = dnnl::softmax_forward(pd);
        np.impl = pd.impl_info_str();
        np.args.push_back(make_arg(DNNL_ARG_SRC, true, false, md, pd.src_desc()));
        np.args.push_back(make_arg(DNNL_ARG_DST, false, true, md, pd.dst_desc()));
        p = insert(key, std::move(np));
      }
      run(*p, {x, y});
    } catch (const dnnl::error& e) {
      return from_dnnl(e, "softmax");
    }
    return Status::ok();
  }

  // ---- elementwise: eltwise_forward / binary ---------------------------------------------------
  Status unary(UnaryOp op, const float* x, float* y, size_t n) override {
    if (n == 0) return Status::ok();
    dnnl::algorithm alg = dnnl::algorithm::eltwise_linear;
    float alpha = 0.0f, beta = 0.0f;
    switch (op) {
      case UnaryOp::kCopy: alpha = 1.0f; break;
      case UnaryOp::kNeg: alpha = -1.0f; break;
      case UnaryOp::kRelu: alg = dnnl::algorithm::eltwise_relu; break;
      case UnaryOp::kSigmoid: alg = dnnl::algorithm::eltwise_logistic; break;
      case UnaryOp::kTanh: alg = dnnl::algorithm::eltwise_tanh; break;
      case UnaryOp::kExp: alg = dnnl::algorithm::eltwise_exp; break;
      case UnaryOp::kSquare: alg = dnnl::algorithm::eltwise_square; break;
      // oneDNN 2.6 has no hardsigmoid (added in 3.0): Keras' clip(0.2x + 0.5, 0, 1) is composed
      // from eltwise_linear(0.2, 0.5) and an in-place eltwise_clip(0, 1).
      case UnaryOp::kHardSigmoid:
        alpha = 0.2f;
        beta = 0.5f;
        break;
    }
    try {
      Prim* p = eltwise_prim(kKeyUnary, alg, alpha, beta, int64_t(n));
      run(*p, {x, y});
      if (op == UnaryOp::kHardSigmoid) {
        Prim* clip = eltwise_prim(kKeyUnaryClip, dnnl::algorithm::eltwise_clip, 0.0f, 1.0f,
                                  int64_t(n));
        run(*clip, {y, y});
      }
    } catch (const dnnl::error& e) {
      return from_dnnl(e, to_string(op));
    }
    return Status::ok();
  }

  Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) override {
    if (n == 0) return Status::ok();
    dnnl::algorithm alg = dnnl::algorithm::binary_add;
    switch (op) {
      case BinaryOp::kAdd: alg = dnnl::algorithm::binary_add; break;
      case BinaryOp::kSub: alg = dnnl::algorithm::binary_sub; break;
      case BinaryOp::kMul: alg = dnnl::algorithm::binary_mul; break;
      case BinaryOp::kDiv: alg = dnnl::algorithm::binary_div; break;
      case BinaryOp::kMax: alg = dnnl::algorithm::binary_max; break;
      case BinaryOp::kMin: alg = dnnl::algorithm::binary_min; break;
    }
    try {
      Prim* p = binary_prim(alg, int64_t(n), kKeyBinary);
      run(*p, {a, b, y});
    } catch (const dnnl::error& e) {
      return from_dnnl(e, to_string(op));
    }
    return Status::ok();
  }

 private:
  void pin_threads() const {
    if (omp_set_) omp_set_(threads_);
  }

  Prim* find(const std::vector<int64_t>& key) {
    auto it = cache_.find(key);
    return it == cache_.end() ? nullptr : &it->second;
  }
  Prim* insert(const std::vector<int64_t>& key, Prim&& p) {
    return &cache_.emplace(key, std::move(p)).first->second;
  }

  Arg make_arg(int id, bool input, bool output, const memory::desc& user_md,
               const memory::desc& prim_md) {
    Arg a;
    a.id = id;
    a.input = input;
    a.output = output;
    a.user = memory(user_md, eng_, DNNL_MEMORY_NONE);
    if (prim_md == user_md) {
      a.inner = a.user;
    } else {
      a.reordered = true;
      a.inner = memory(prim_md, eng_);
      if (input) a.to_inner = dnnl::reorder(a.user, a.inner);
      if (output) a.to_user = dnnl::reorder(a.inner, a.user);
    }
    return a;
  }

  // Runs p on the caller's pointers, given in the order of p.args.
  // Runs a primitive; details() reports the implementation of the last one run.
  void run(Prim& p, std::initializer_list<const void*> ptrs) {
    pin_threads();
    last_impl_ = p.impl;
    size_t i = 0;
    for (const void* ptr : ptrs) p.args[i++].user.set_data_handle(const_cast<void*>(ptr));
    std::unordered_map<int, memory> exec_args;
    for (Arg& a : p.args) {
      if (a.reordered && a.input) a.to_inner.execute(strm_, a.user, a.inner);
      exec_args[a.id] = a.inner;
    }
    p.prim.execute(strm_, exec_args);
    for (Arg& a : p.args)
      if (a.reordered && a.output) a.to_user.execute(strm_, a.inner, a.user);
    strm_.wait();
  }

  Prim* eltwise_prim(int64_t kind, dnnl::algorithm alg, float alpha, float beta, int64_t n) {
    std::vector<int64_t> key{kind, int64_t(alg), float_bits(alpha), float_bits(beta), n};
    Prim* p = find(key);
    if (p) return p;
    memory::desc md({n}, Dt::f32, Tag::a);
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
    dnnl::eltwise_forward::primitive_desc pd(d, eng_);
    Prim np;
    np.prim = dnnl::eltwise_forward(pd);
    np.impl = pd.impl_info_str();
    np.args.push_back(make_arg(DNNL_ARG_SRC, true, false, md, pd.src_desc()));
    np.args.push_back(make_arg(DNNL_ARG_DST, false, true, md, pd.dst_desc()));
    return insert(key, std::move(np));
  }

  Prim* binary_prim(dnnl::algorithm alg, int64_t n, int64_t kind) {
    std::vector<int64_t> key{kind, int64_t(alg), n};
    Prim* p = find(key);
    if (p) return p;
    memory::desc md({n}, Dt::f32, Tag::a);
    dnnl::binary::desc d(alg, md, md, md);
    dnnl::binary::primitive_desc pd(d, eng_);
    Prim np;
    np.prim = dnnl::binary(pd);
    np.impl = pd.impl_info_str();
    np.args.push_back(make_arg(DNNL_ARG_SRC_0, true, false, md, pd.src_desc(0)));
    np.args.push_back(make_arg(DNNL_ARG_SRC_1, true, false, md, pd.src_desc(1)));
    np.args.push_back(make_arg(DNNL_ARG_DST, false, true, md, pd.dst_desc()));
    return insert(key, std::move(np));
  }

  static std::vector<int64_t> conv_key(int64_t kind, const ConvShape& s) {
    return {kind, s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride, s.pad};
  }
  static memory::desc x_md(const ConvShape& s) {
    return memory::desc({s.n, s.c, s.h, s.w}, Dt::f32, Tag::nchw);
  }
  static memory::desc w_md(const ConvShape& s) {
    return memory::desc({s.k, s.c, s.r, s.s}, Dt::f32, Tag::oihw);
  }
  static memory::desc y_md(const ConvShape& s) {
    return memory::desc({s.n, s.k, s.p(), s.q()}, Dt::f32, Tag::nchw);
  }
  // The layout the primitive is asked for: the plain user layout, or `any` (oneDNN chooses).
  memory::desc prim_md(const memory::desc& user) const {
    if (layout_ == OnednnConvLayout::kPlain) return user;
    return memory::desc(user.dims(), Dt::f32, Tag::any);
  }
  static Dims strides(const ConvShape& s) { return {s.stride, s.stride}; }
  static Dims pad_l(const ConvShape& s) { return {s.pad, s.pad}; }
  // Right/bottom padding that gives exactly p() x q() outputs (less than pad when the stride does
  // not divide the padded extent; the elements it drops are never read).
  static Dims pad_r(const ConvShape& s) {
    return {int64_t(s.p() - 1) * s.stride + s.r - s.h - s.pad,
            int64_t(s.q() - 1) * s.stride + s.s - s.w - s.pad};
  }
  dnnl::convolution_forward::primitive_desc conv_fwd_pd(const ConvShape& s) {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, prim_md(x_md(s)),
                                      prim_md(w_md(s)), prim_md(y_md(s)), strides(s), pad_l(s),
                                      pad_r(s));
    return dnnl::convolution_forward::primitive_desc(d, eng_);
  }

  int threads_;
  OnednnConvLayout layout_;
  dnnl::engine eng_;
  dnnl::stream strm_;
  OmpSetNumThreads omp_set_ = nullptr;
  std::map<std::vector<int64_t>, Prim> cache_;
  std::vector<float> tmp_;
  std::string last_impl_;
};

}  // namespace

BackendOr make_onednn(const OnednnOptions& opts, OnednnConvLayout layout) {
  if (opts.threads < 1) return Status::invalid("onednn: threads must be >= 1");
  try {
    return std::make_unique<OnednnBackend>(opts.threads, layout);
  } catch (const dnnl::error& e) {
    return Status::unavailable(std::string("oneDNN CPU engine: ") + e.what());
  }
}

BackendOr make_onednn(const OnednnOptions& opts) { return make_onednn(opts, OnednnConvLayout::kPlain); }

std::string onednn_effective_isa() { return isa_name(dnnl::get_effective_cpu_isa()); }

std::string onednn_version_string() {
  const dnnl_version_t* v = dnnl_version();
  if (!v) return "unknown";
  std::string s = std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                  std::to_string(v->patch) + " (git hash " + (v->hash ? v->hash : "?") + ")";
  if (v->cpu_runtime == DNNL_RUNTIME_OMP) s += " omp";
  return s;
}

#else  // !DETAUDIT_HAVE_ONEDNN

}  // namespace detaudit
#include "detaudit_build_config.hpp"
namespace detaudit {

BackendOr make_onednn(const OnednnOptions&, OnednnConvLayout) {
  return Status::unavailable(std::string("detaudit was built without oneDNN: ") + DETAUDIT_ONEDNN_OFF_REASON);
}
BackendOr make_onednn(const OnednnOptions& opts) { return make_onednn(opts, OnednnConvLayout::kPlain); }
std::string onednn_version_string() { return "not built"; }
std::string onednn_effective_isa() { return "not built"; }

#endif

}  // namespace detaudit
