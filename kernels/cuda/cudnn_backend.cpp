// The `cudnn` target: convolutions through cuDNN's legacy API with the algorithm pinned per pass (or the
// fastest, `auto`), every algorithm's claim recorded from cudnnFind*AlgorithmEx; max pooling.
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/native_kernels.hpp"

// The header-only list in cuda.hpp must know every legacy algorithm this cuDNN knows.
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT == 8, "update cudnn_conv_algorithms() in cuda.hpp");
static_assert(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT == 6, "update cudnn_conv_algorithms() in cuda.hpp");
static_assert(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT == 7, "update cudnn_conv_algorithms() in cuda.hpp");

namespace detaudit::gpu {

namespace {

Status from_cudnn(cudnnStatus_t e, const char* expr) {
  if (e == CUDNN_STATUS_SUCCESS) return Status::ok();
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  std::string m = fmt::format("{}: {} ({}){}{}", api_name(expr), cudnnGetErrorString(e), int(e), last[0] ? ": " : "",
                              last);
  // cuDNN 9 codes are grouped by thousands: 3000-3999 are the NOT_SUPPORTED family.
  return int(e) / 1000 == 3 ? Status::unsupported(m) : Status::error(m);
}
#define DETAUDIT_CUDNN(call) DETAUDIT_RETURN_IF_ERROR(from_cudnn((call), #call))

enum Pass { kFwd = 0, kBwdData = 1, kBwdFilter = 2 };
const char* const kPassName[] = {"fwd", "bwd_data", "bwd_filter"};
const char* const kPassKey[] = {"fwd_algo", "bwd_data_algo", "bwd_filter_algo"};
const char* const kFindApi[] = {"cudnnFindConvolutionForwardAlgorithmEx", "cudnnFindConvolutionBackwardDataAlgorithmEx",
                                "cudnnFindConvolutionBackwardFilterAlgorithmEx"};
constexpr int kAlgoCount[] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};

struct Perf {  // one row of cudnnFind*AlgorithmEx's answer, whatever the pass
  int algo = 0;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  float ms = 0;
  size_t memory = 0;
  bool deterministic = false;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};
template <typename P>
Perf perf(const P& p) {
  return {int(p.algo), p.status, p.time, p.memory, p.determinism == CUDNN_DETERMINISTIC, p.mathType};
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "CUDNN_DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "CUDNN_TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "CUDNN_FMA_MATH";
  }
  return "?";
}

struct CudnnConfig {
  int algo[3] = {-1, -1, -1};  // -1 = auto
  std::string math, pool;
};

Status parse(const Params& p, CudnnConfig* c) {
  for (int i = 0; i < 3; ++i) {
    DETAUDIT_RETURN_IF_ERROR(p.algo_or_auto(kPassKey[i], &c->algo[i]));
    if (c->algo[i] >= kAlgoCount[i])
      return Status::invalid(fmt::format("{}={}: cuDNN knows algorithms 0..{} for {}", kPassKey[i], c->algo[i],
                                         kAlgoCount[i] - 1, kPassName[i]));
  }
  DETAUDIT_RETURN_IF_ERROR(p.choice("math", {"fma", "tf32"}, "fma", &c->math));
  return p.choice("pool", {"deterministic", "nondeterministic"}, "deterministic", &c->pool);
}

std::string algo_text(int a) { return a < 0 ? "auto" : std::to_string(a); }

// Descriptors of one convolution, destroyed at scope exit.
struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~ConvDescs() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
  Status init(const ConvShape& s, cudnnMathType_t math) {
    DETAUDIT_CUDNN(cudnnCreateTensorDescriptor(&x));
    DETAUDIT_CUDNN(cudnnCreateTensorDescriptor(&y));
    DETAUDIT_CUDNN(cudnnCreateFilterDescriptor(&w));
    DETAUDIT_CUDNN(cudnnCreateConvolutionDescriptor(&conv));
    DETAUDIT_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
    DETAUDIT_CUDNN(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.k, s.c, s.r, s.s));
    DETAUDIT_CUDNN(cudnnSetConvolution2dDescriptor(conv, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DETAUDIT_CUDNN(cudnnSetConvolutionMathType(conv, math));
    int n = 0, k = 0, p = 0, q = 0;
    DETAUDIT_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &k, &p, &q));
    if (n != s.n || k != s.k || p != s.p() || q != s.q())
      return Status::error(fmt::format("cudnn: output {}x{}x{}x{} differs from the shape's {}x{}x{}x{}", n, k, p, q,
                                       s.n, s.k, s.p(), s.q()));
    DETAUDIT_CUDNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, p, q));
    return Status::ok();
  }
};

struct PoolDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  ~PoolDescs() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }
  Status init(const PoolShape& s, cudnnPoolingMode_t mode) {
    if (s.window <= 0 || s.stride <= 0 || s.h < s.window || s.w < s.window)
      return Status::invalid("maxpool: window larger than the input");
    DETAUDIT_CUDNN(cudnnCreateTensorDescriptor(&x));
    DETAUDIT_CUDNN(cudnnCreateTensorDescriptor(&y));
    DETAUDIT_CUDNN(cudnnCreatePoolingDescriptor(&pool));
    DETAUDIT_CUDNN(cudnnSetPooling2dDescriptor(pool, mode, CUDNN_NOT_PROPAGATE_NAN, s.window, s.window, 0, 0,
                                               s.stride, s.stride));
    DETAUDIT_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
    int n = 0, c = 0, p = 0, q = 0;
    DETAUDIT_CUDNN(cudnnGetPooling2dForwardOutputDim(pool, x, &n, &c, &p, &q));
    if (p != s.p() || q != s.q())
      return Status::error(fmt::format("cudnn: pooling output {}x{} differs from the shape's {}x{}", p, q, s.p(), s.q()));
    DETAUDIT_CUDNN(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, p, q));
    return Status::ok();
  }
};

class Cudnn final : public GpuBackend {
 public:
  Cudnn(int device, CudnnConfig c)
      : GpuBackend(device, fmt::format("cudnn:{}?fwd_algo={}&bwd_data_algo={}&bwd_filter_algo={}&math={}&pool={}",
                                       device, algo_text(c.algo[0]), algo_text(c.algo[1]), algo_text(c.algo[2]),
                                       c.math, c.pool)),
        c_(c) {}
  ~Cudnn() override {
    if (h_) cudnnDestroy(h_);
    if (ws_) cudaFree(ws_);
  }

  Status init_cudnn() {
    DETAUDIT_RETURN_IF_ERROR(init());
    DETAUDIT_CUDNN(cudnnCreate(&h_));
    DETAUDIT_CUDNN(cudnnSetStream(h_, nullptr));  // the legacy default stream, like every other op
    set_detail("math", c_.math);
    set_detail("pool", c_.pool);
    set_detail("cudnn_version", std::to_string(cudnnGetVersion()));
    return Status::ok();
  }

  // cuDNN has no plain gemm; the linear layers of a model run on the `cuda` target's tiled kernel (recorded
  // in the details from the first gemm on, so observations of cuDNN's own ops are unchanged).
  // determinism: one FMA chain per output element in k order (native_dense.cu), no atomics.
  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    set_detail("gemm_via", "native cuda (tiled gemm, deterministic)");
    return native_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    return conv(kFwd, s, x, w, y);
  }
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    return conv(kBwdData, s, dy, w, dx);
  }
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    return conv(kBwdFilter, s, x, dy, dw);
  }

  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override {
    describe_pooling(false);
    PoolDescs d;
    DETAUDIT_RETURN_IF_ERROR(d.init(s, pool_mode()));
    const float one = 1.f, zero = 0.f;
    DETAUDIT_CUDNN(cudnnPoolingForward(h_, d.pool, &one, d.x, x, &zero, d.y, y));
    return Status::ok();
  }
  Status maxpool_bwd(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) override {
    describe_pooling(true);
    PoolDescs d;
    DETAUDIT_RETURN_IF_ERROR(d.init(s, pool_mode()));
    const float one = 1.f, zero = 0.f;
    DETAUDIT_CUDNN(cudnnPoolingBackward(h_, d.pool, &one, d.y, y, d.y, dy, d.x, x, &zero, d.x, dx));
    return Status::ok();
  }

 private:
  // The details describe the last op: a pooling op replaces what a convolution recorded before it.
  void describe_pooling(bool backward) {
    bool det_mode = pool_mode() == CUDNN_POOLING_MAX_DETERMINISTIC;
    set_detail("algo", "pool");
    set_detail("algo_name", det_mode ? "CUDNN_POOLING_MAX_DETERMINISTIC" : "CUDNN_POOLING_MAX");
    set_detail("algo_pinned", "yes");
    set_detail("algos_found", "1");
    set_detail("algos_supported", "1");
    set_detail("claimed_deterministic", (!backward || det_mode) ? "yes" : "no");
    // Pooling has no Find: both claims are the documentation's (CUDNN_POOLING_MAX adds with atomics).
    set_detail("documented_deterministic", (!backward || det_mode) ? "yes" : "no");
  }
  // determinism: CUDNN_POOLING_MAX's backward pass adds overlapping windows' gradients with atomics;
  // CUDNN_POOLING_MAX_DETERMINISTIC does not.
  cudnnPoolingMode_t pool_mode() const {
    return c_.pool == "deterministic" ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX;
  }
  // "fma" forbids tensor cores (so no TF32); "tf32" permits them, which for float data means TF32.
  cudnnMathType_t math() const { return c_.math == "fma" ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH; }

  Status ensure_workspace(size_t bytes) {
    if (bytes <= ws_bytes_) return Status::ok();
    if (ws_) cudaFree(ws_);
    ws_ = nullptr;
    ws_bytes_ = 0;
    DETAUDIT_CUDA(cudaMalloc(&ws_, bytes));
    ws_bytes_ = bytes;
    return Status::ok();
  }

  Status workspace_size(Pass pass, const ConvDescs& d, int algo, size_t* bytes) {
    if (pass == kFwd)
      return from_cudnn(cudnnGetConvolutionForwardWorkspaceSize(h_, d.x, d.w, d.conv, d.y,
                                                                cudnnConvolutionFwdAlgo_t(algo), bytes),
                        "cudnnGetConvolutionForwardWorkspaceSize");
    if (pass == kBwdData)
      return from_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(h_, d.w, d.y, d.conv, d.x,
                                                                     cudnnConvolutionBwdDataAlgo_t(algo), bytes),
                        "cudnnGetConvolutionBackwardDataWorkspaceSize");
    return from_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(h_, d.x, d.y, d.conv, d.w,
                                                                     cudnnConvolutionBwdFilterAlgo_t(algo), bytes),
                      "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  }

  // Every algorithm cuDNN will try for this shape and pass, with its status, time, memory and claim.
  // Run once per shape (cudnnFind*Ex executes each algorithm), then remembered.
  // determinism: Find times the algorithms; the order of its list (and so `auto`) can change run to run.
  Status find(Pass pass, const ConvShape& s, const ConvDescs& d, const void* in1, const void* in2, void* out,
              const std::vector<Perf>** found) {
    auto key = std::make_tuple(int(pass), s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride, s.pad);
    if (auto it = found_.find(key); it != found_.end()) {
      *found = &it->second;
      return Status::ok();
    }
    // A workspace for the hungriest algorithm, within half of the free memory (and 4 GiB).
    size_t want = 0, free_bytes = 0, total = 0;
    for (int a = 0; a < kAlgoCount[pass]; ++a) {
      size_t b = 0;
      if (workspace_size(pass, d, a, &b)) want = std::max(want, b);
    }
    DETAUDIT_CUDA(cudaMemGetInfo(&free_bytes, &total));
    want = std::min({want, free_bytes / 2, size_t(4) << 30});
    DETAUDIT_RETURN_IF_ERROR(ensure_workspace(std::max<size_t>(want, 1)));
    int max_count = 0, returned = 0;
    std::vector<Perf> rows;
    if (pass == kFwd) {
      DETAUDIT_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(h_, &max_count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> r(std::max(max_count, 1));
      DETAUDIT_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(h_, d.x, in1, d.w, in2, d.conv, d.y, out, int(r.size()),
                                                            &returned, r.data(), ws_, want));
      for (int i = 0; i < returned; ++i) rows.push_back(perf(r[i]));
    } else if (pass == kBwdData) {
      DETAUDIT_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h_, &max_count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(std::max(max_count, 1));
      DETAUDIT_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(h_, d.w, in2, d.y, in1, d.conv, d.x, out,
                                                                 int(r.size()), &returned, r.data(), ws_, want));
      for (int i = 0; i < returned; ++i) rows.push_back(perf(r[i]));
    } else {
      DETAUDIT_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h_, &max_count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(std::max(max_count, 1));
      DETAUDIT_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(h_, d.x, in1, d.y, in2, d.conv, d.w, out,
                                                                   int(r.size()), &returned, r.data(), ws_, want));
      for (int i = 0; i < returned; ++i) rows.push_back(perf(r[i]));
    }
    *found = &(found_[key] = std::move(rows));
    return Status::ok();
  }

  // fwd: (x, w) -> y; bwd_data: (dy, w) -> dx; bwd_filter: (x, dy) -> dw.
  Status conv(Pass pass, const ConvShape& s, const float* in1, const float* in2, float* out) {
    ConvDescs d;
    DETAUDIT_RETURN_IF_ERROR(d.init(s, math()));
    const std::vector<Perf>* found = nullptr;
    DETAUDIT_RETURN_IF_ERROR(find(pass, s, d, in1, in2, out, &found));
    const int pinned = c_.algo[pass];
    const Perf* chosen = nullptr;
    // Under "fma" a row measured with tensor-core math does not count (Find should not return one).
    auto usable = [&](const Perf& p) {
      return p.status == CUDNN_STATUS_SUCCESS &&
             (c_.math != "fma" || (p.math != CUDNN_TENSOR_OP_MATH && p.math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION));
    };
    for (const Perf& p : *found)
      if (usable(p) && (pinned < 0 || p.algo == pinned)) {
        chosen = &p;  // auto: the first success is the fastest, as Find sorts by time
        break;
      }
    int ok_count = 0;
    for (const Perf& p : *found) ok_count += p.status == CUDNN_STATUS_SUCCESS;
    set_detail("algos_found", std::to_string(found->size()));
    set_detail("algos_supported", std::to_string(ok_count));
    if (!chosen) {
      if (pinned < 0)
        return Status::unsupported(fmt::format("cudnn: {}: no algorithm supports this shape ({} tried)", kFindApi[pass],
                                               found->size()));
      std::string why = fmt::format("not among the {} algorithms {} returned", found->size(), kFindApi[pass]);
      for (const Perf& p : *found)
        if (p.algo == pinned)
          why = p.status != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(p.status) : math_name(p.math);
      return Status::unsupported(
          fmt::format("cudnn: {}={} not supported for this shape: {}", kPassKey[pass], pinned, why));
    }
    // tf32: run with the math type Find measured the algorithm with (cuDNN's advice); fma stays FMA.
    if (c_.math == "tf32") DETAUDIT_CUDNN(cudnnSetConvolutionMathType(d.conv, chosen->math));
    size_t ws = 0;
    DETAUDIT_RETURN_IF_ERROR(workspace_size(pass, d, chosen->algo, &ws));
    DETAUDIT_RETURN_IF_ERROR(ensure_workspace(std::max<size_t>(ws, 1)));

    const auto algos = cudnn_conv_algorithms(s, kPassName[pass]);
    set_detail("pass", kPassName[pass]);
    set_detail("algo", std::to_string(chosen->algo));
    set_detail("algo_name", chosen->algo < int(algos.size()) ? algos[chosen->algo].name : "?");
    set_detail("algo_pinned", pinned < 0 ? "auto" : "yes");
    // Two claims, checked against each other and against the runs (probes/registry.cpp, promise_cudnn):
    // Find's determinism field for this algorithm, and the marks of cudnn_ops.h (cudnn_conv_algorithms):
    // "yes", "no", or "not implemented" (a mark that claims nothing about determinism).
    set_detail("claimed_deterministic", chosen->deterministic ? "yes" : "no");
    set_detail("documented_deterministic", chosen->algo >= 0 && chosen->algo < int(algos.size())
                                               ? cudnn_documented_deterministic(algos[chosen->algo].header)
                                               : "?");
    set_detail("math_used", math_name(chosen->math));
    set_detail("find_ms", fmt::format("{:.4f}", chosen->ms));
    set_detail("workspace_bytes", std::to_string(ws));

    const float one = 1.f, zero = 0.f;
    if (pass == kFwd)
      DETAUDIT_CUDNN(cudnnConvolutionForward(h_, &one, d.x, in1, d.w, in2, d.conv,
                                             cudnnConvolutionFwdAlgo_t(chosen->algo), ws_, ws, &zero, d.y, out));
    else if (pass == kBwdData)
      DETAUDIT_CUDNN(cudnnConvolutionBackwardData(h_, &one, d.w, in2, d.y, in1, d.conv,
                                                  cudnnConvolutionBwdDataAlgo_t(chosen->algo), ws_, ws, &zero, d.x,
                                                  out));
    else
      DETAUDIT_CUDNN(cudnnConvolutionBackwardFilter(h_, &one, d.x, in1, d.y, in2, d.conv,
                                                    cudnnConvolutionBwdFilterAlgo_t(chosen->algo), ws_, ws, &zero, d.w,
                                                    out));
    return Status::ok();
  }

  CudnnConfig c_;
  cudnnHandle_t h_ = nullptr;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  std::map<std::tuple<int, int, int, int, int, int, int, int, int, int>, std::vector<Perf>> found_;
};


Status validate_cudnn(const Params& p) {
  CudnnConfig c;
  return parse(p, &c);
}

BackendOr make_cudnn(int device, const Params& p) {
  CudnnConfig c;
  DETAUDIT_RETURN_IF_ERROR(parse(p, &c));
  auto b = std::make_unique<Cudnn>(device, c);
  DETAUDIT_RETURN_IF_ERROR(b->init_cudnn());
  return b;
}

}  // namespace

}  // namespace detaudit::gpu

namespace detaudit {
// What the cudnn registry entry opens (probes/backends/cudnn.cpp).
extern const GpuKernels kCudnnKernels = {
    [](const std::map<std::string, std::string>& m) { return gpu::validate_cudnn(gpu::Params(m)); },
    [](int device, const std::map<std::string, std::string>& m) { return gpu::make_cudnn(device, gpu::Params(m)); }};
}  // namespace detaudit
