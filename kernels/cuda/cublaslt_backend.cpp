// The `cublaslt` target: cublasLtMatmul through the K-th algorithm of the heuristic's list, with the
// split-K reduction schemes the spec allows.
#include <cublasLt.h>
#include <fmt/format.h>

#include <type_traits>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/cuda.hpp"

namespace detaudit::gpu {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr int kMaxAlgos = kCublasLtMaxAlgos;  // every index the spec accepts can be asked for

struct LtConfig {
  long algo = 0;
  std::string reduction;  // "" = every scheme allowed
};

Status parse(const Params& p, LtConfig* c) {
  // 0..kMaxAlgos-1 as the spec table allows; an index past what the heuristic returns is answered unsupported.
  DETAUDIT_RETURN_IF_ERROR(p.integer("algo", 0, kMaxAlgos - 1, 0, &c->algo));
  return p.choice("reduction", {"", "none", "inplace", "compute", "output"}, "", &c->reduction);
}

// CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK. The mask filters split-K configurations only: with 0
// ("none") the heuristic keeps algorithms that do not split K.
uint32_t reduction_mask(const std::string& r) {
  if (r == "none") return CUBLASLT_REDUCTION_SCHEME_NONE;
  if (r == "inplace") return CUBLASLT_REDUCTION_SCHEME_INPLACE;
  if (r == "compute") return CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  if (r == "output") return CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  return CUBLASLT_REDUCTION_SCHEME_MASK;
}

cublasOperation_t op(Trans t) { return t == Trans::kT ? CUBLAS_OP_T : CUBLAS_OP_N; }

template <typename T, typename Destroy>
struct Owned {  // a cuBLASLt descriptor destroyed at scope exit
  T h = nullptr;
  Destroy destroy;
  explicit Owned(Destroy d) : destroy(d) {}
  ~Owned() {
    if (h) destroy(h);
  }
};
template <typename T, typename D>
Owned<T, D> owned(D d) {
  return Owned<T, D>(d);
}

template <typename A>
std::string config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  A v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS)
    return "?";
  return std::to_string(v);
}

class Cublaslt final : public GpuBackend {
 public:
  Cublaslt(int device, LtConfig c)
      : GpuBackend(device, fmt::format("cublaslt:{}?algo={}&reduction={}", device, c.algo, c.reduction)), c_(c) {}
  ~Cublaslt() override {
    if (h_) cublasLtDestroy(h_);
    if (ws_) cudaFree(ws_);
  }

  Status init_lt() {
    DETAUDIT_RETURN_IF_ERROR(init());
    DETAUDIT_CUBLAS(cublasLtCreate(&h_));
    DETAUDIT_CUDA(cudaMalloc(&ws_, kWorkspaceBytes));
    set_detail("algo", std::to_string(c_.algo));
    set_detail("reduction_mask", std::to_string(reduction_mask(c_.reduction)));
    set_detail("cublaslt_version", std::to_string(cublasLtGetVersion()));
    return Status::ok();
  }

  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    return matmul<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  Status gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                  int ldb, double beta, double* c, int ldc) override {
    return matmul<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

 private:
  // Row-major C = op(A) op(B) as column-major C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B.
  template <typename T>
  Status matmul(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
                T* c, int ldc) {
    if (m <= 0 || n <= 0) return Status::ok();
    constexpr bool f32 = std::is_same_v<T, float>;
    // CUBLAS_COMPUTE_32F: plain FP32 arithmetic (no TF32, which is CUBLAS_COMPUTE_32F_FAST_TF32).
    const cublasComputeType_t compute = f32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;
    const cudaDataType_t type = f32 ? CUDA_R_32F : CUDA_R_64F;
    auto desc = owned<cublasLtMatmulDesc_t>(cublasLtMatmulDescDestroy);
    DETAUDIT_CUBLAS(cublasLtMatmulDescCreate(&desc.h, compute, type));
    const int32_t op_a = op(tb), op_b = op(ta);
    DETAUDIT_CUBLAS(cublasLtMatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    DETAUDIT_CUBLAS(cublasLtMatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    auto la = owned<cublasLtMatrixLayout_t>(cublasLtMatrixLayoutDestroy);
    auto lb = owned<cublasLtMatrixLayout_t>(cublasLtMatrixLayoutDestroy);
    auto lc = owned<cublasLtMatrixLayout_t>(cublasLtMatrixLayoutDestroy);
    DETAUDIT_CUBLAS(cublasLtMatrixLayoutCreate(&la.h, type, tb == Trans::kN ? n : k, tb == Trans::kN ? k : n, ldb));
    DETAUDIT_CUBLAS(cublasLtMatrixLayoutCreate(&lb.h, type, ta == Trans::kN ? k : m, ta == Trans::kN ? m : k, lda));
    DETAUDIT_CUBLAS(cublasLtMatrixLayoutCreate(&lc.h, type, n, m, ldc));
    auto pref = owned<cublasLtMatmulPreference_t>(cublasLtMatmulPreferenceDestroy);
    DETAUDIT_CUBLAS(cublasLtMatmulPreferenceCreate(&pref.h));
    const uint64_t ws = kWorkspaceBytes;
    const uint32_t mask = reduction_mask(c_.reduction);
    DETAUDIT_CUBLAS(
        cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    DETAUDIT_CUBLAS(
        cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof(mask)));

    // determinism: the heuristic's list is a function of the shape, the device and the cuBLASLt version;
    // pinning an index into it pins the kernel, but split-K algorithms combine partial sums as they choose.
    cublasLtMatmulHeuristicResult_t results[kMaxAlgos] = {};
    int returned = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h_, desc.h, la.h, lb.h, lc.h, lc.h, pref.h, kMaxAlgos,
                                                       results, &returned);
    if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED)
      return from_cublas(hs, "cublasLtMatmulAlgoGetHeuristic");
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED) returned = 0;
    set_detail("algos_returned", std::to_string(returned));
    if (c_.algo >= returned)
      return Status::unsupported(fmt::format("cublaslt: heuristic returned {} algorithms for this shape; algo={} not "
                                             "available", returned, c_.algo));
    const cublasLtMatmulHeuristicResult_t& r = results[c_.algo];
    if (r.state != CUBLAS_STATUS_SUCCESS) return from_cublas(r.state, "cublasLtMatmulAlgoGetHeuristic (result)");
    set_detail("algo_id", config<int32_t>(r.algo, CUBLASLT_ALGO_CONFIG_ID));
    set_detail("tile", config<uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_TILE_ID));
    set_detail("stages", config<uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID));
    set_detail("splitk", config<int32_t>(r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM));
    set_detail("reduction_scheme", config<uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
    // The rest of the configuration, so that two entries of the list that differ only here are told apart
    // (each attribute read with its own size: cuBLASLt refuses a size other than the stored one).
    set_detail("cta_swizzling", config<uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING));
    set_detail("custom_option", config<uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
    set_detail("inner_shape", config<uint16_t>(r.algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID));
    set_detail("cluster_shape", config<uint16_t>(r.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
    set_detail("waves_count", fmt::format("{:.3f}", r.wavesCount));
    set_detail("workspace_bytes", std::to_string(r.workspaceSize));
    if (r.workspaceSize > kWorkspaceBytes)
      return Status::error(fmt::format("cublaslt: algorithm wants {} bytes of workspace, more than the {} offered",
                                       r.workspaceSize, kWorkspaceBytes));
    DETAUDIT_CUBLAS(cublasLtMatmul(h_, desc.h, &alpha, b, la.h, a, lb.h, &beta, c, lc.h, c, lc.h, &r.algo, ws_,
                                   kWorkspaceBytes, nullptr));
    return Status::ok();
  }

  LtConfig c_;
  cublasLtHandle_t h_ = nullptr;
  void* ws_ = nullptr;
};


Status validate_cublaslt(const Params& p) {
  LtConfig c;
  return parse(p, &c);
}

BackendOr make_cublaslt(int device, const Params& p) {
  LtConfig c;
  DETAUDIT_RETURN_IF_ERROR(parse(p, &c));
  auto b = std::make_unique<Cublaslt>(device, c);
  DETAUDIT_RETURN_IF_ERROR(b->init_lt());
  return b;
}

}  // namespace

}  // namespace detaudit::gpu

namespace detaudit {
// What the cublaslt registry entry opens (probes/backends/cublaslt.cpp).
extern const GpuKernels kCublasLtKernels = {
    [](const std::map<std::string, std::string>& m) { return gpu::validate_cublaslt(gpu::Params(m)); },
    [](int device, const std::map<std::string, std::string>& m) { return gpu::make_cublaslt(device, gpu::Params(m)); }};
}  // namespace detaudit
