// The training ops of the GPU backends (kernels/cuda/train_kernels.cu, GpuBackend in common.cpp) against
// the CPU oracle (cpu-ref) and against the host float formulas they copy (kernels/cpu/train_ops.cpp):
// bitwise where the op is exact or the formula is the same IEEE operations in the same order, within
// tol + |ref|*eps otherwise. Then short autoencoder trainings on cuda (tree), cudnn (algorithm 1
// everywhere) and cublas. Skips with the reason on machines without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/ref.hpp"
#include "kernels/cpu/train_ops.hpp"
#include "kernels/cuda/cuda.hpp"
#include "tests/gpu_kernels.hpp"
#include "models/autoencoder.hpp"
#include "kernels/generator.hpp"
#include "tests/test_inputs.hpp"

namespace detaudit {
namespace {

// ---- inputs ----------------------------------------------------------------------------------------

using namespace detaudit::test_support;

// ---- backend memory ----------------------------------------------------------------------------------

// Buffers in one backend's memory, freed at scope exit; works alike for cpu-ref and the GPU backends.
class Mem {
 public:
  explicit Mem(Backend& b) : b_(b) {}
  ~Mem() {
    for (void* p : ptrs_) b_.free(p);
  }
  float* alloc(size_t n) {
    auto* p = static_cast<float*>(b_.alloc(std::max<size_t>(n, 1) * sizeof(float)));
    EXPECT_NE(p, nullptr) << b_.name() << ": alloc of " << n << " floats";
    if (p) ptrs_.push_back(p);
    return p;
  }
  float* put(const std::vector<float>& v) {
    float* p = alloc(v.size());
    if (p) {
      Status st = b_.upload(p, v.data(), v.size() * sizeof(float));
      EXPECT_TRUE(st.is_ok()) << b_.name() << ": " << st.message();
    }
    return p;
  }
  std::vector<float> get(const float* p, size_t n) {
    std::vector<float> out(n, std::nanf(""));
    Status st = b_.synchronize();
    if (st) st = b_.download(out.data(), p, n * sizeof(float));
    EXPECT_TRUE(st.is_ok()) << b_.name() << ": " << st.message();
    return out;
  }

 private:
  Backend& b_;
  std::vector<void*> ptrs_;
};

// tol == eps == 0: bitwise. Otherwise |got - ref| <= tol + |ref| * eps; non-finite references skipped.
void expect_match(const std::vector<float>& got, const std::vector<float>& ref, double tol, double eps,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    bool ok;
    if (tol == 0 && eps == 0)
      ok = std::memcmp(&got[i], &ref[i], sizeof(float)) == 0;
    else
      ok = !std::isfinite(double(ref[i])) ||
           std::fabs(double(got[i]) - double(ref[i])) <= tol + std::fabs(double(ref[i])) * eps;
    if (!ok && ++bad <= 5) ADD_FAILURE() << what << ": [" << i << "] got " << got[i] << ", reference " << ref[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size() << " mismatch";
}
void expect_bitwise(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  expect_match(got, ref, 0, 0, what);
}

std::string detail(const Backend& b, const std::string& key) {
  for (auto& [k, v] : b.details())
    if (k == key) return v;
  return "";
}

// One op's outputs: the op gets the backend and its memory, uploads what it needs and returns the
// outputs it downloaded, concatenated.
using OpRun = std::function<std::vector<float>(Backend&, Mem&)>;
std::vector<float> on(Backend& b, const OpRun& f) {
  Mem mem(b);
  return f(b, mem);
}

#define EXPECT_OK(expr)                                   \
  do {                                                    \
    Status st_ = (expr);                                  \
    EXPECT_TRUE(st_.is_ok()) << #expr << ": " << st_.message(); \
  } while (0)

// ---- fixture --------------------------------------------------------------------------------------------

class GpuTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    CudaEnvironment env = query_cuda_environment();
    if (!env.available) GTEST_SKIP() << "no GPU: " << env.reason;
    ref_ = make_cpu_ref();
    ASSERT_NE(ref_, nullptr);
    tree_ = make("cuda", {{"order", "tree"}});
    ASSERT_NE(tree_, nullptr);
  }
  std::unique_ptr<Backend> make(const std::string& name, const std::map<std::string, std::string>& params = {}) {
    BackendOr b = open_gpu_backend(name, 0, params);
    EXPECT_TRUE(b) << name << ": " << b.message();
    return b ? std::move(b).value() : nullptr;
  }
  std::unique_ptr<Backend> ref_, tree_;
};

// ---- bias ----------------------------------------------------------------------------------------------

OpRun bias_add_op(const std::vector<float>& y, const std::vector<float>& bias, size_t n, size_t c, size_t hw) {
  return [=](Backend& b, Mem& m) {
    float* dy = m.put(y);
    EXPECT_OK(b.bias_add(dy, m.put(bias), n, c, hw));
    return m.get(dy, y.size());
  };
}
OpRun bias_grad_op(const std::vector<float>& dy, size_t n, size_t c, size_t hw) {
  return [=](Backend& b, Mem& m) {
    float* db = m.alloc(c);
    EXPECT_OK(b.bias_grad(m.put(dy), db, n, c, hw));
    return m.get(db, c);
  };
}

TEST_F(GpuTrain, BiasAddMatchesOracleBitwise) {
  struct Case { size_t n, c, hw; };
  for (Case k : {Case{3, 5, 7}, Case{4, 9, 1}, Case{2, 16, 784}}) {
    auto y = uniform(k.n * k.c * k.hw, 1), bias = uniform(k.c, 2);
    const std::string what = "bias_add n=" + std::to_string(k.n) + " c=" + std::to_string(k.c) + " hw=" + std::to_string(k.hw);
    // One float add per element: the oracle rounds the same way.
    expect_bitwise(on(*tree_, bias_add_op(y, bias, k.n, k.c, k.hw)), on(*ref_, bias_add_op(y, bias, k.n, k.c, k.hw)), what);
  }
}

TEST_F(GpuTrain, BiasGradMatchesOracle) {
  struct Case { size_t n, c, hw; };
  for (Case k : {Case{2, 4, 3}, Case{5, 3, 1000}, Case{64, 1568, 1}, Case{64, 16, 196}}) {
    const std::string what = "bias_grad n=" + std::to_string(k.n) + " c=" + std::to_string(k.c) + " hw=" + std::to_string(k.hw);
    auto di = ints(k.n * k.c * k.hw, 3);
    expect_bitwise(on(*tree_, bias_grad_op(di, k.n, k.c, k.hw)), on(*ref_, bias_grad_op(di, k.n, k.c, k.hw)),
                   what + " (integers)");
    auto du = uniform(k.n * k.c * k.hw, 4);
    expect_match(on(*tree_, bias_grad_op(du, k.n, k.c, k.hw)), on(*ref_, bias_grad_op(du, k.n, k.c, k.hw)), 1e-4,
                 1e-5, what);
  }
  // No terms: zeros, as on the CPU.
  auto zeros = on(*tree_, [](Backend& b, Mem& m) {
    float* db = m.put({7.f, 7.f, 7.f});
    EXPECT_OK(b.bias_grad(db, db, 0, 3, 5));
    return m.get(db, 3);
  });
  expect_bitwise(zeros, {0.f, 0.f, 0.f}, "bias_grad with n = 0");
}

TEST_F(GpuTrain, BiasGradTreeIsRunToRunIdenticalAndAtomicIsClose) {
  const size_t n = 64, c = 16, hw = 28 * 28;  // the autoencoder's first conv: 50176 terms per channel
  auto dy = uniform(n * c * hw, 5);
  auto first = on(*tree_, bias_grad_op(dy, n, c, hw));
  for (int r = 0; r < 5; ++r) expect_bitwise(on(*tree_, bias_grad_op(dy, n, c, hw)), first, "bias_grad tree rerun");
  auto ref = on(*ref_, bias_grad_op(dy, n, c, hw));
  auto atomic = make("cuda", {{"order", "atomic"}});
  ASSERT_NE(atomic, nullptr);
  for (int r = 0; r < 3; ++r) expect_match(on(*atomic, bias_grad_op(dy, n, c, hw)), ref, 1e-3, 1e-5, "bias_grad atomic");
  auto di = ints(n * c * hw, 6);  // exact sums: every order gives the same bits
  expect_bitwise(on(*atomic, bias_grad_op(di, n, c, hw)), on(*ref_, bias_grad_op(di, n, c, hw)),
                 "bias_grad atomic (integers)");
}

// ---- activations ---------------------------------------------------------------------------------------

OpRun unary_bwd_op(UnaryOp op, const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& dy) {
  return [=](Backend& b, Mem& m) {
    float* dx = m.alloc(x.size());
    EXPECT_OK(b.unary_bwd(op, m.put(x), m.put(y), m.put(dy), dx, x.size()));
    return m.get(dx, x.size());
  };
}

TEST_F(GpuTrain, UnaryBackwardMatchesHostFormulaBitwiseAndOracle) {
  const size_t n = 100003;
  auto x = uniform(n, 7, -4, 4), dy = uniform(n, 8);
  x[0] = 0.f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 2.4999998f;  // the kinks: relu at 0, hard sigmoid at +-2.5
  for (UnaryOp op : {UnaryOp::kRelu, UnaryOp::kSigmoid, UnaryOp::kTanh, UnaryOp::kHardSigmoid}) {
    std::vector<float> y(n);
    for (size_t i = 0; i < n; ++i) {
      const float v = x[i];
      y[i] = op == UnaryOp::kRelu      ? (v > 0 ? v : 0.f)
             : op == UnaryOp::kSigmoid ? 1.f / (1.f + std::exp(-v))
             : op == UnaryOp::kTanh    ? std::tanh(v)
                                       : std::min(std::max(0.2f * v + 0.5f, 0.f), 1.f);
    }
    auto got = on(*tree_, unary_bwd_op(op, x, y, dy));
    std::vector<float> host(n);
    train_ops::unary_bwd_f32(op, x.data(), y.data(), dy.data(), host.data(), 0, n);
    expect_bitwise(got, host, std::string(to_string(op)) + " backward vs train_ops::unary_bwd_f32");
    expect_match(got, on(*ref_, unary_bwd_op(op, x, y, dy)), 1e-7, 1e-6, std::string(to_string(op)) + " backward vs oracle");
  }
  Status st = tree_->unary_bwd(UnaryOp::kExp, nullptr, nullptr, nullptr, nullptr, 1);
  EXPECT_EQ(st.code(), Status::Code::kUnsupported) << st.message();
}

TEST_F(GpuTrain, UnaryForwardOnEveryGpuBackend) {
  auto x = uniform(4097, 9, -4, 4);
  auto op = [&](UnaryOp u) {
    return OpRun([=](Backend& b, Mem& m) {
      float* y = m.alloc(x.size());
      EXPECT_OK(b.unary(u, m.put(x), y, x.size()));
      return m.get(y, x.size());
    });
  };
  expect_bitwise(on(*tree_, op(UnaryOp::kRelu)), on(*ref_, op(UnaryOp::kRelu)), "relu forward");
  // hard sigmoid: float 0.2f*x + 0.5f (as the cpu target), which the oracle's double formula may round differently.
  auto hs = on(*tree_, op(UnaryOp::kHardSigmoid));
  std::vector<float> host(x.size());
  for (size_t i = 0; i < x.size(); ++i) host[i] = std::min(1.0f, std::max(0.0f, 0.2f * x[i] + 0.5f));
  expect_bitwise(hs, host, "hard_sigmoid forward vs the float formula");
  expect_match(hs, on(*ref_, op(UnaryOp::kHardSigmoid)), 1e-7, 1e-6, "hard_sigmoid forward vs oracle");
  expect_match(on(*tree_, op(UnaryOp::kSigmoid)), on(*ref_, op(UnaryOp::kSigmoid)), 1e-7, 1e-6, "sigmoid forward");
  for (const char* name : {"cudnn", "cublas", "cublaslt"}) {
    auto b = make(name);
    if (!b) continue;
    expect_bitwise(on(*b, op(UnaryOp::kSigmoid)), on(*tree_, op(UnaryOp::kSigmoid)),
                   std::string(name) + ": sigmoid forward (the shared cuda kernel)");
  }
}

// ---- upsampling, copies, fill, scale -----------------------------------------------------------------------

TEST_F(GpuTrain, Upsample2MatchesOracleAndHostOrder) {
  const size_t planes = 6;
  const int h = 7, w = 5;
  auto x = uniform(planes * h * w, 10);
  auto fwd = [&](Backend& b, Mem& m) {
    float* y = m.alloc(planes * 4 * h * w);
    EXPECT_OK(b.upsample2_fwd(m.put(x), y, planes, h, w));
    return m.get(y, planes * 4 * h * w);
  };
  expect_bitwise(on(*tree_, fwd), on(*ref_, fwd), "upsample2 forward");
  for (bool integers : {true, false}) {
    auto dy = integers ? ints(planes * 4 * h * w, 11) : uniform(planes * 4 * h * w, 12);
    auto bwd = [&](Backend& b, Mem& m) {
      float* dx = m.alloc(planes * h * w);
      EXPECT_OK(b.upsample2_bwd(m.put(dy), dx, planes, h, w));
      return m.get(dx, planes * h * w);
    };
    auto got = on(*tree_, bwd);
    std::vector<float> host(planes * h * w);
    train_ops::upsample2_bwd_f32(dy.data(), host.data(), h, w, 0, planes);
    expect_bitwise(got, host, "upsample2 backward vs the (a+b)+(c+d) host order");
    if (integers)
      expect_bitwise(got, on(*ref_, bwd), "upsample2 backward vs oracle (integers)");
    else
      expect_match(got, on(*ref_, bwd), 1e-6, 1e-6, "upsample2 backward vs oracle");
  }
  EXPECT_EQ(tree_->upsample2_fwd(nullptr, nullptr, 1, 0, 3).code(), Status::Code::kInvalid);
}

TEST_F(GpuTrain, Copy2dFillScaleMatchOracleBitwise) {
  const size_t rows = 37, cols = 19, src_ld = 23, dst_ld = 41;
  auto src = uniform(rows * src_ld, 13), dst0 = uniform(rows * dst_ld, 14);
  auto copy = [&](Backend& b, Mem& m) {
    float* d = m.put(dst0);  // the gaps between rows must stay untouched
    EXPECT_OK(b.copy_2d(rows, cols, m.put(src), src_ld, d, dst_ld));
    return m.get(d, dst0.size());
  };
  expect_bitwise(on(*tree_, copy), on(*ref_, copy), "copy_2d");
  auto fill = [&](Backend& b, Mem& m) {
    float* d = m.put(dst0);
    EXPECT_OK(b.fill(d, -0.375f, 1000));
    return m.get(d, dst0.size());
  };
  expect_bitwise(on(*tree_, fill), on(*ref_, fill), "fill");
  // alpha * y: one float product, which the oracle's double product rounds identically.
  auto scale = [&](Backend& b, Mem& m) {
    float* d = m.put(src);
    EXPECT_OK(b.scale(d, 0.3f, src.size()));
    return m.get(d, src.size());
  };
  expect_bitwise(on(*tree_, scale), on(*ref_, scale), "scale");
}

// ---- loss -----------------------------------------------------------------------------------------------

OpRun loss_op(LossOp op, const std::vector<float>& y, const std::vector<float>& t, bool with_dy = true) {
  return [=](Backend& b, Mem& m) {
    float* value = m.alloc(1);
    float* dy = with_dy ? m.alloc(y.size()) : nullptr;
    EXPECT_OK(b.loss(op, m.put(y), m.put(t), y.size(), value, dy));
    std::vector<float> out = m.get(value, 1);
    if (dy) {
      auto g = m.get(dy, y.size());
      out.insert(out.end(), g.begin(), g.end());
    }
    return out;
  };
}

TEST_F(GpuTrain, LossMatchesOracle) {
  for (LossOp op : {LossOp::kMse, LossOp::kL1}) {
    const std::string name = to_string(op);
    // Integers, n a power of two: the sum, the mean and every 2d/n or sign/n are exact.
    auto yi = ints(4096, 15), ti = ints(4096, 16);
    expect_bitwise(on(*tree_, loss_op(op, yi, ti)), on(*ref_, loss_op(op, yi, ti)), name + " loss (integers)");
    for (size_t n : {size_t(1), size_t(255), size_t(50176), size_t(300001)}) {
      auto y = uniform(n, 17, 0, 1), t = uniform(n, 18, 0, 1);
      auto got = on(*tree_, loss_op(op, y, t)), want = on(*ref_, loss_op(op, y, t));
      expect_match({got[0]}, {want[0]}, 0, 1e-5, name + " loss value n=" + std::to_string(n));
      expect_match(std::vector<float>(got.begin() + 1, got.end()), std::vector<float>(want.begin() + 1, want.end()), 0,
                   1e-6, name + " loss gradient n=" + std::to_string(n));
      auto value_only = on(*tree_, loss_op(op, y, t, false));
      expect_bitwise(value_only, {got[0]}, name + " loss without dy");
    }
  }
  EXPECT_EQ(tree_->loss(LossOp::kMse, nullptr, nullptr, 0, nullptr, nullptr).code(), Status::Code::kInvalid);
}

TEST_F(GpuTrain, LossTreeIsRunToRunIdentical) {
  auto y = uniform(300001, 19, 0, 1), t = uniform(300001, 20, 0, 1);
  for (LossOp op : {LossOp::kMse, LossOp::kL1}) {
    auto first = on(*tree_, loss_op(op, y, t));
    for (int r = 0; r < 5; ++r) expect_bitwise(on(*tree_, loss_op(op, y, t)), first, std::string(to_string(op)) + " rerun");
  }
  auto atomic = make("cuda", {{"order", "atomic"}});
  ASSERT_NE(atomic, nullptr);
  auto want = on(*ref_, loss_op(LossOp::kMse, y, t));
  expect_match({on(*atomic, loss_op(LossOp::kMse, y, t))[0]}, {want[0]}, 0, 1e-5, "mse loss (atomic)");
}

// ---- optimisers ---------------------------------------------------------------------------------------------

TEST_F(GpuTrain, AdamMatchesHostFormulaBitwiseAndOracle) {
  const size_t n = 70001;
  auto w0 = uniform(n, 21), m0 = uniform(n, 22, -0.1, 0.1), v0 = uniform(n, 23, 0, 0.01);
  std::vector<std::vector<float>> grads = {uniform(n, 24), uniform(n, 25), uniform(n, 26)};
  m0[0] = v0[0] = grads[0][0] = grads[1][0] = grads[2][0] = 0.f;  // a weight with no gradient: 0 / (0 + eps)
  auto adam = [&](Backend& b, Mem& m) {
    float *w = m.put(w0), *mm = m.put(m0), *vv = m.put(v0);
    for (size_t s = 0; s < grads.size(); ++s) {
      AdamParams p;
      p.bias_correction1 = float(1.0 - std::pow(0.9, double(s + 1)));
      p.bias_correction2 = float(1.0 - std::pow(0.999, double(s + 1)));
      EXPECT_OK(b.adam_step(p, w, m.put(grads[s]), mm, vv, n));
    }
    std::vector<float> out = m.get(w, n), a = m.get(mm, n), c = m.get(vv, n);
    out.insert(out.end(), a.begin(), a.end());
    out.insert(out.end(), c.begin(), c.end());
    return out;
  };
  auto got = on(*tree_, adam);
  std::vector<float> w = w0, mm = m0, vv = v0;
  for (size_t s = 0; s < grads.size(); ++s) {
    AdamParams p;
    p.bias_correction1 = float(1.0 - std::pow(0.9, double(s + 1)));
    p.bias_correction2 = float(1.0 - std::pow(0.999, double(s + 1)));
    train_ops::adam_f32(p, w.data(), grads[s].data(), mm.data(), vv.data(), 0, n);
  }
  std::vector<float> host = w;
  host.insert(host.end(), mm.begin(), mm.end());
  host.insert(host.end(), vv.begin(), vv.end());
  expect_bitwise(got, host, "adam vs train_ops::adam_f32");
  expect_match(got, on(*ref_, adam), 1e-6, 1e-5, "adam vs oracle");
}

TEST_F(GpuTrain, SgdMatchesHostFormulaBitwiseAndOracle) {
  const size_t n = 70001;
  auto w0 = uniform(n, 27), vel0 = uniform(n, 28, -0.1, 0.1);
  std::vector<std::vector<float>> grads = {uniform(n, 29), uniform(n, 30)};
  SgdParams p;
  auto sgd = [&](Backend& b, Mem& m) {
    float *w = m.put(w0), *vel = m.put(vel0);
    for (auto& g : grads) EXPECT_OK(b.sgd_step(p, w, m.put(g), vel, n));
    std::vector<float> out = m.get(w, n), v = m.get(vel, n);
    out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  auto got = on(*tree_, sgd);
  std::vector<float> w = w0, vel = vel0;
  for (auto& g : grads) train_ops::sgd_f32(p, w.data(), g.data(), vel.data(), 0, n);
  w.insert(w.end(), vel.begin(), vel.end());
  expect_bitwise(got, w, "sgd vs train_ops::sgd_f32");
  expect_match(got, on(*ref_, sgd), 1e-6, 1e-5, "sgd vs oracle");
}

// ---- every GPU backend has the training ops, with the same bits as the cuda target's tree ----------------

TEST_F(GpuTrain, EveryGpuBackendRunsTheTrainingOps) {
  const size_t n = 8, c = 16, hw = 49;
  auto dy = uniform(n * c * hw, 31), y = uniform(n * c * hw, 32, 0, 1), t = uniform(n * c * hw, 33, 0, 1);
  auto ops = [&](Backend& b, Mem& m) {
    std::vector<float> out = bias_grad_op(dy, n, c, hw)(b, m);
    auto l = loss_op(LossOp::kMse, y, t)(b, m);
    out.insert(out.end(), l.begin(), l.end());
    auto u = unary_bwd_op(UnaryOp::kSigmoid, dy, y, t)(b, m);
    out.insert(out.end(), u.begin(), u.end());
    return out;
  };
  auto want = on(*tree_, ops);
  for (const char* name : {"cudnn", "cublas", "cublaslt"}) {
    auto b = make(name);
    if (!b) continue;
    expect_bitwise(on(*b, ops), want, std::string(name) + ": training ops (deterministic trees)");
  }
}

TEST_F(GpuTrain, DelegatedOpsMatchTheCudaTarget) {
  // cudnn's gemm is the cuda target's tiled kernel; cublas's conv and pooling are the cuda target's tree kernels.
  auto cudnn = make("cudnn"), cublas = make("cublas");
  ASSERT_NE(cudnn, nullptr);
  ASSERT_NE(cublas, nullptr);
  const int m = 37, k = 29, nn = 41;
  auto a = uniform(size_t(m) * k, 34), bm = uniform(size_t(k) * nn, 35);
  auto gemm = [&](Backend& b, Mem& mem) {
    float* cc = mem.alloc(size_t(m) * nn);
    EXPECT_OK(b.gemm(Trans::kN, Trans::kN, m, nn, k, 1.f, mem.put(a), k, mem.put(bm), nn, 0.f, cc, nn));
    return mem.get(cc, size_t(m) * nn);
  };
  expect_bitwise(on(*cudnn, gemm), on(*tree_, gemm), "cudnn gemm");
  EXPECT_EQ(detail(*cudnn, "gemm_via").rfind("native cuda", 0), 0u) << detail(*cudnn, "gemm_via");
  ConvShape s;
  s.n = 2, s.c = 3, s.h = 9, s.w = 8, s.k = 4, s.r = 3, s.s = 3, s.pad = 1;
  auto x = uniform(s.x_size(), 36), wt = uniform(s.w_size(), 37), g = uniform(s.y_size(), 38);
  auto conv = [&](Backend& b, Mem& mem) {
    float *y = mem.alloc(s.y_size()), *dx = mem.alloc(s.x_size()), *dw = mem.alloc(s.w_size());
    float *px = mem.put(x), *pw = mem.put(wt), *pg = mem.put(g);
    EXPECT_OK(b.conv2d_fwd(s, px, pw, y));
    EXPECT_OK(b.conv2d_bwd_data(s, pg, pw, dx));
    EXPECT_OK(b.conv2d_bwd_filter(s, px, pg, dw));
    std::vector<float> out = mem.get(y, s.y_size()), d1 = mem.get(dx, s.x_size()), d2 = mem.get(dw, s.w_size());
    out.insert(out.end(), d1.begin(), d1.end());
    out.insert(out.end(), d2.begin(), d2.end());
    return out;
  };
  expect_bitwise(on(*cublas, conv), on(*tree_, conv), "cublas conv2d fwd/bwd_data/bwd_filter");
  PoolShape ps;
  ps.n = 2, ps.c = 3, ps.h = 8, ps.w = 8;
  auto px = uniform(ps.x_size(), 39), pdy = uniform(ps.y_size(), 40);
  auto pool = [&](Backend& b, Mem& mem) {
    float *y = mem.alloc(ps.y_size()), *dx = mem.alloc(ps.x_size());
    float* xx = mem.put(px);
    EXPECT_OK(b.maxpool_fwd(ps, xx, y));
    EXPECT_OK(b.maxpool_bwd(ps, xx, y, mem.put(pdy), dx));
    std::vector<float> out = mem.get(y, ps.y_size()), d = mem.get(dx, ps.x_size());
    out.insert(out.end(), d.begin(), d.end());
    return out;
  };
  expect_bitwise(on(*cublas, pool), on(*tree_, pool), "cublas maxpool fwd/bwd");
  EXPECT_EQ(detail(*cublas, "conv_via"), "native cuda (order=tree)");
  EXPECT_EQ(detail(*cublas, "pool_via"), "native cuda (order=tree)");
}

// ---- short trainings ---------------------------------------------------------------------------------------

const Dataset& data() { return training_data(); }

constexpr int kBatches = 20;

TrainResult train(Backend& be, int batches = kBatches) {
  TrainConfig cfg;
  cfg.batches = batches;
  TrainResult r;
  Status st = train_autoencoder(be, data(), cfg, {}, &r);
  EXPECT_TRUE(st.is_ok()) << be.name() << ": " << st.message();
  return r;
}

double mean(const std::vector<float>& v, size_t b, size_t e) {
  double s = 0;
  for (size_t i = b; i < e; ++i) s += v[i];
  return s / double(e - b);
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A curve of kBatches finite losses that goes down.
void expect_learns(const TrainResult& r, const std::string& who) {
  ASSERT_EQ(r.curve.size(), size_t(kBatches)) << who;
  for (float v : r.curve) ASSERT_TRUE(std::isfinite(v)) << who;
  EXPECT_LT(mean(r.curve, kBatches - 5, kBatches), mean(r.curve, 0, 5)) << who << ": the loss must go down";
  EXPECT_NE(r.initial_weights, r.final_weights) << who;
  EXPECT_EQ(r.parameters, 111521u) << who;
}

// Twice on fresh backends: identical curves and weights.
void expect_reproducible(const std::function<std::unique_ptr<Backend>()>& make_backend, const TrainResult& first,
                         const std::string& who) {
  auto be = make_backend();
  ASSERT_NE(be, nullptr) << who;
  TrainResult again = train(*be);
  EXPECT_TRUE(same_bytes(first.curve, again.curve)) << who << ": same target, same seeds: the curves must be bit-identical";
  EXPECT_EQ(first.final_weights, again.final_weights) << who;
}

TEST_F(GpuTrain, CudaTreeTrainingIsBitwiseReproducibleAndLearns) {
  TrainResult a = train(*tree_);
  expect_learns(a, "cuda tree");
  expect_reproducible([&] { return make("cuda", {{"order", "tree"}}); }, a, "cuda tree");
  // The first loss comes from the forward pass alone, with the host-made initial weights: it must agree
  // with the oracle's up to rounding.
  TrainResult r = train(*ref_, 1);
  ASSERT_EQ(r.curve.size(), 1u);
  EXPECT_EQ(a.initial_weights, r.initial_weights);
  EXPECT_NEAR(a.curve[0], r.curve[0], 1e-4 * std::fabs(r.curve[0])) << "first batch loss: cuda tree vs cpu-ref";
}

TEST_F(GpuTrain, CudnnDeterministicAlgorithmsTrainingIsBitwiseReproducibleAndLearns) {
  const std::map<std::string, std::string> pinned = {{"fwd_algo", "1"}, {"bwd_data_algo", "1"}, {"bwd_filter_algo", "1"}};
  auto be = make("cudnn", pinned);
  ASSERT_NE(be, nullptr);
  TrainResult a = train(*be);
  expect_learns(a, "cudnn algo 1");
  expect_reproducible([&] { return make("cudnn", pinned); }, a, "cudnn algo 1");
  TrainResult t = train(*tree_, 1);
  ASSERT_EQ(t.curve.size(), 1u);
  EXPECT_NEAR(a.curve[0], t.curve[0], 1e-4 * std::fabs(t.curve[0])) << "first batch loss: cudnn vs cuda tree";
}

TEST_F(GpuTrain, CublasTrainingRunsAndLearns) {
  auto be = make("cublas");
  ASSERT_NE(be, nullptr);
  expect_learns(train(*be), "cublas");
}

TEST_F(GpuTrain, CudaAtomicTrainingRunsAndLearns) {
  auto be = make("cuda", {{"order", "atomic"}});
  ASSERT_NE(be, nullptr);
  expect_learns(train(*be), "cuda atomic");
}

}  // namespace
}  // namespace detaudit
