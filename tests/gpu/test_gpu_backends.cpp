// Every GPU backend against the CPU oracle (cpu-ref): bitwise on small-integer inputs, whose sums are
// exact; within tol + |ref|*eps on random ones. Skips with the reason on machines without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/ref.hpp"
#include "kernels/cuda/cuda.hpp"
#include "tests/gpu_kernels.hpp"
#include "kernels/cuda/nccl.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "tests/fixtures.hpp"
#include "tests/test_inputs.hpp"

namespace detaudit {
namespace {

// ---- inputs --------------------------------------------------------------------------------------

using namespace detaudit::test_support;

template <typename T>
std::vector<T> as(const std::vector<float>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// ---- running an op on a backend --------------------------------------------------------------------

// Copies `ins` into backend memory, runs `op(in pointers, out pointer)` and returns the output, which
// starts as `out_init` (or zeros). Works alike for host (cpu-ref) and device backends.
template <typename T>
std::vector<T> run(Backend& b, const std::vector<std::vector<T>>& ins, size_t out_n,
                   const std::function<Status(const std::vector<T*>&, T*)>& op, const std::vector<T>* out_init = nullptr,
                   Status* status = nullptr) {
  std::vector<T*> dev;
  for (const auto& v : ins) {
    dev.push_back(static_cast<T*>(b.alloc(v.size() * sizeof(T))));
    EXPECT_NE(dev.back(), nullptr);
    EXPECT_TRUE(b.upload(dev.back(), v.data(), v.size() * sizeof(T)).is_ok());
  }
  std::vector<T> out = out_init ? *out_init : std::vector<T>(out_n, T(0));
  T* o = static_cast<T*>(b.alloc(out_n * sizeof(T)));
  EXPECT_NE(o, nullptr);
  EXPECT_TRUE(b.upload(o, out.data(), out_n * sizeof(T)).is_ok());
  Status st = op(dev, o);
  if (st) st = b.synchronize();
  if (status) {
    *status = st;
  } else {
    EXPECT_TRUE(st.is_ok()) << b.name() << ": " << st.message();
  }
  if (st) {
    EXPECT_TRUE(b.download(out.data(), o, out_n * sizeof(T)).is_ok());
  }
  b.free(o);
  for (T* p : dev) b.free(p);
  return out;
}

// tol == eps == 0: bitwise. Otherwise |got - ref| <= tol + |ref| * eps; non-finite references skipped.
template <typename T>
void expect_match(const std::vector<T>& got, const std::vector<T>& ref, double tol, double eps, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    bool ok;
    if (tol == 0 && eps == 0) ok = std::memcmp(&got[i], &ref[i], sizeof(T)) == 0;
    else ok = !std::isfinite(double(ref[i])) || std::fabs(double(got[i]) - double(ref[i])) <= tol + std::fabs(double(ref[i])) * eps;
    if (!ok && ++bad <= 5) ADD_FAILURE() << what << ": [" << i << "] got " << got[i] << ", oracle " << ref[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size() << " mismatch";
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

std::string detail(const Backend& b, const std::string& key) {
  for (auto& [k, v] : b.details())
    if (k == key) return v;
  return "";
}

// Max pooling reference (first maximum in row-major window order), for when cpu-ref lacks pooling.
std::vector<float> pool_fwd_ref(const PoolShape& s, const std::vector<float>& x) {
  std::vector<float> y(s.y_size());
  for (size_t nc = 0; nc < size_t(s.n) * s.c; ++nc)
    for (int p = 0; p < s.p(); ++p)
      for (int q = 0; q < s.q(); ++q) {
        const float* pl = &x[nc * s.h * s.w];
        float m = pl[p * s.stride * s.w + q * s.stride];
        for (int i = 0; i < s.window; ++i)
          for (int j = 0; j < s.window; ++j) m = std::max(m, pl[(p * s.stride + i) * s.w + q * s.stride + j]);
        y[(nc * s.p() + p) * s.q() + q] = m;
      }
  return y;
}
std::vector<float> pool_bwd_ref(const PoolShape& s, const std::vector<float>& x, const std::vector<float>& dy) {
  std::vector<double> dx(s.x_size(), 0.0);
  for (size_t nc = 0; nc < size_t(s.n) * s.c; ++nc)
    for (int p = 0; p < s.p(); ++p)
      for (int q = 0; q < s.q(); ++q) {
        const float* pl = &x[nc * s.h * s.w];
        int best = p * s.stride * s.w + q * s.stride;
        for (int i = 0; i < s.window; ++i)
          for (int j = 0; j < s.window; ++j) {
            int at = (p * s.stride + i) * s.w + q * s.stride + j;
            if (pl[at] > pl[best]) best = at;
          }
        dx[nc * s.h * s.w + best] += dy[(nc * s.p() + p) * s.q() + q];
      }
  return std::vector<float>(dx.begin(), dx.end());
}

// ---- fixture --------------------------------------------------------------------------------------

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    CudaEnvironment env = query_cuda_environment();
    if (!env.available) GTEST_SKIP() << "no GPU: " << env.reason;
    ref_ = make_cpu_ref();
    ASSERT_NE(ref_, nullptr);
  }
  std::unique_ptr<Backend> make(const std::string& name, const std::map<std::string, std::string>& params = {}) {
    BackendOr b = open_gpu_backend(name, 0, params);
    EXPECT_TRUE(b) << name << ": " << b.message();
    return b ? std::move(b).value() : nullptr;
  }
  std::unique_ptr<Backend> ref_;
};

// ---- cuda: native kernels -----------------------------------------------------------------------------

TEST_F(Gpu, EnvironmentDescribesTheDevice) {
  CudaEnvironment env = query_cuda_environment();
  ASSERT_FALSE(env.gpus.empty());
  const GpuInfo& g = env.gpus[0];
  EXPECT_FALSE(g.name.empty());
  EXPECT_EQ(g.uuid.rfind("GPU-", 0), 0u) << g.uuid;
  EXPECT_EQ(g.uuid.size(), 40u) << g.uuid;
  EXPECT_GT(g.sm_count, 0);
  EXPECT_GT(g.memory_bytes, 0u);
  EXPECT_GT(g.clock_khz, 0);
  EXPECT_FALSE(g.pci_bus_id.empty());
  EXPECT_GT(env.driver_version, 0);
  EXPECT_FALSE(env.cudnn_version.empty());
  EXPECT_FALSE(env.cublas_version.empty());
}

TEST_F(Gpu, NamesAreCanonicalSpecs) {
  EXPECT_EQ(make("cuda")->name(), "cuda:0?order=tree");
  EXPECT_EQ(make("cuda", {{"order", "atomic"}})->name(), "cuda:0?order=atomic");
  EXPECT_EQ(make("cublas", {{"math", "pedantic"}})->name(),
            "cublas:0?math=pedantic&atomics=not_allowed&streams=1&workspace=per_stream");
  EXPECT_EQ(make("cublaslt")->name(), "cublaslt:0?algo=0&reduction=");
  EXPECT_EQ(make("cudnn", {{"bwd_filter_algo", "1"}})->name(),
            "cudnn:0?fwd_algo=auto&bwd_data_algo=auto&bwd_filter_algo=1&math=fma&pool=deterministic");
  const Status st = open_gpu_backend("cublas", 0, {{"streams", "17"}}).status();
  EXPECT_EQ(st.code(), Status::Code::kInvalid);
  EXPECT_NE(st.message().find("streams=17"), std::string::npos) << st.message();
}

TEST_F(Gpu, CudaGemmAllTransposesMatchesOracle) {
  const int m = 37, n = 53, k = 71;
  for (const char* order : {"tree", "atomic"}) {
    auto g = make("cuda", {{"order", order}});
    for (Trans ta : {Trans::kN, Trans::kT})
      for (Trans tb : {Trans::kN, Trans::kT}) {
        const int lda = ta == Trans::kN ? k : m, ldb = tb == Trans::kN ? n : k;
        const std::string what = std::string(order) + (ta == Trans::kT ? " T" : " N") + (tb == Trans::kT ? "T" : "N");
        for (bool exact : {true, false}) {
          auto a = exact ? ints(size_t(m) * k, 1) : uniform(size_t(m) * k, 1);
          auto b = exact ? ints(size_t(k) * n, 2) : uniform(size_t(k) * n, 2);
          auto c0 = exact ? ints(size_t(m) * n, 3) : uniform(size_t(m) * n, 3);
          auto gemm = [&](Backend& be) {
            return run<float>(be, {a, b}, c0.size(), [&](const std::vector<float*>& in, float* c) {
              return be.gemm(ta, tb, m, n, k, 2.f, in[0], lda, in[1], ldb, -1.f, c, n);
            }, &c0);
          };
          if (exact) expect_match(gemm(*g), gemm(*ref_), 0, 0, "gemm " + what);
          else expect_match(gemm(*g), gemm(*ref_), 2e-4, 1e-5, "gemm random " + what);
        }
        auto a = as<double>(ints(size_t(m) * k, 4)), b = as<double>(ints(size_t(k) * n, 5));
        auto gemm64 = [&](Backend& be) {
          return run<double>(be, {a, b}, size_t(m) * n, [&](const std::vector<double*>& in, double* c) {
            return be.gemm_f64(ta, tb, m, n, k, 1.0, in[0], lda, in[1], ldb, 0.0, c, n);
          });
        };
        expect_match(gemm64(*g), gemm64(*ref_), 0, 0, "gemm_f64 " + what);
      }
  }
}

TEST_F(Gpu, CudaReductionsMatchOracle) {
  for (const char* order : {"tree", "atomic"})
    for (size_t n : {size_t(1), size_t(1000), size_t(100003), size_t(1) << 20})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2})
        for (bool exact : {true, false}) {
          if (exact && n > 200000) continue;  // keep integer sums below 2^24
          auto g = make("cuda", {{"order", order}});
          auto x = exact ? ints(n, 7) : uniform(n, 7), y = exact ? ints(n, 8) : uniform(n, 8);
          auto red = [&](Backend& be) {
            return run<float>(be, {x, y}, 1, [&](const std::vector<float*>& in, float* out) {
              return be.reduce(op, in[0], in[1], n, out);
            });
          };
          std::string what = std::string(order) + " " + to_string(op) + " n=" + std::to_string(n);
          if (exact) expect_match(red(*g), red(*ref_), 0, 0, what);
          else expect_match(red(*g), red(*ref_), 1e-4, 1e-4, what + " random");
        }
}

TEST_F(Gpu, CudaTreeReductionIsRunToRunIdentical) {
  auto g = make("cuda", {{"order", "tree"}});
  auto x = uniform(size_t(1) << 22, 9);
  std::vector<float> first;
  for (int rep = 0; rep < 5; ++rep) {
    auto r = run<float>(*g, {x}, 1, [&](const std::vector<float*>& in, float* out) {
      return g->reduce(ReduceOp::kSum, in[0], nullptr, x.size(), out);
    });
    if (rep == 0) first = r;
    else expect_match(r, first, 0, 0, "tree sum repeat " + std::to_string(rep));
  }
}

TEST_F(Gpu, CudaSoftmaxMatchesOracle) {
  for (const char* order : {"tree", "atomic"})
    for (size_t cols : {size_t(3), size_t(1000), size_t(4099)}) {
      auto g = make("cuda", {{"order", order}});
      const size_t rows = 7;
      auto x = uniform(rows * cols, 11);
      for (auto& v : x) v *= 8.f;
      auto sm = [&](Backend& be) {
        return run<float>(be, {x}, x.size(), [&](const std::vector<float*>& in, float* y) {
          return be.softmax(in[0], y, rows, cols);
        });
      };
      expect_match(sm(*g), sm(*ref_), 1e-7, 2e-5, std::string("softmax ") + order + " cols=" + std::to_string(cols));
    }
}

struct ConvCase {
  ConvShape s;
  const char* name;
};
std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> v;
  ConvShape a;
  a.n = 2, a.c = 3, a.h = 9, a.w = 11, a.k = 4, a.r = 3, a.s = 3, a.stride = 1, a.pad = 1;
  v.push_back({a, "3x3 pad1"});
  ConvShape b;
  b.n = 3, b.c = 2, b.h = 10, b.w = 7, b.k = 5, b.r = 3, b.s = 2, b.stride = 2, b.pad = 0;
  v.push_back({b, "3x2 stride2"});
  ConvShape c;  // N*P*Q = 4096 terms: two chunks in the atomic backward-filter
  c.n = 4, c.c = 3, c.h = 32, c.w = 32, c.k = 4, c.r = 3, c.s = 3, c.stride = 1, c.pad = 1;
  v.push_back({c, "32x32"});
  return v;
}

// Runs pass `pass` of conv on `be`: fwd (x, w) -> y, bwd_data (dy, w) -> dx, bwd_filter (x, dy) -> dw.
std::vector<float> conv(Backend& be, const ConvShape& s, const std::string& pass, bool exact, Status* st = nullptr,
                        uint64_t seed = 21) {
  auto gen = [&](size_t n, uint64_t sd) { return exact ? ints(n, sd) : uniform(n, sd); };
  if (pass == "fwd")
    return run<float>(be, {gen(s.x_size(), seed), gen(s.w_size(), seed + 1)}, s.y_size(),
                      [&](const std::vector<float*>& in, float* y) { return be.conv2d_fwd(s, in[0], in[1], y); },
                      nullptr, st);
  if (pass == "bwd_data")
    return run<float>(be, {gen(s.y_size(), seed + 2), gen(s.w_size(), seed + 1)}, s.x_size(),
                      [&](const std::vector<float*>& in, float* dx) { return be.conv2d_bwd_data(s, in[0], in[1], dx); },
                      nullptr, st);
  return run<float>(be, {gen(s.x_size(), seed), gen(s.y_size(), seed + 2)}, s.w_size(),
                    [&](const std::vector<float*>& in, float* dw) { return be.conv2d_bwd_filter(s, in[0], in[1], dw); },
                    nullptr, st);
}

TEST_F(Gpu, CudaConvMatchesOracle) {
  for (const char* order : {"tree", "atomic"}) {
    auto g = make("cuda", {{"order", order}});
    for (const auto& c : conv_cases())
      for (const char* pass : {"fwd", "bwd_data", "bwd_filter"}) {
        std::string what = std::string(order) + " " + pass + " " + c.name;
        expect_match(conv(*g, c.s, pass, true), conv(*ref_, c.s, pass, true), 0, 0, what);
        expect_match(conv(*g, c.s, pass, false), conv(*ref_, c.s, pass, false), 1e-4, 1e-5, what + " random");
      }
  }
}

std::vector<PoolShape> pool_cases() {
  std::vector<PoolShape> v;
  for (auto [win, stride] : {std::pair{2, 2}, std::pair{3, 1}, std::pair{3, 2}}) {
    PoolShape s;
    s.n = 2, s.c = 3, s.h = 13, s.w = 10, s.window = win, s.stride = stride;
    v.push_back(s);
  }
  return v;
}

// Max pooling of random x (no ties) with integer dy: every output is exact, so bitwise everywhere.
void check_pool(Backend& be, Backend& ref, const std::string& what) {
  for (const PoolShape& s : pool_cases()) {
    auto x = uniform(s.x_size(), 31), dy = ints(s.y_size(), 32);
    Status st;
    auto want_y = run<float>(ref, {x}, s.y_size(), [&](auto& in, float* y) { return ref.maxpool_fwd(s, in[0], y); },
                             nullptr, &st);
    if (st.code() == Status::Code::kUnsupported) want_y = pool_fwd_ref(s, x);
    auto y = run<float>(be, {x}, s.y_size(), [&](auto& in, float* o) { return be.maxpool_fwd(s, in[0], o); });
    std::string tag = what + " window=" + std::to_string(s.window) + " stride=" + std::to_string(s.stride);
    expect_match(y, want_y, 0, 0, "maxpool fwd " + tag);
    auto want_dx = run<float>(ref, {x, want_y, dy}, s.x_size(),
                              [&](auto& in, float* dx) { return ref.maxpool_bwd(s, in[0], in[1], in[2], dx); }, nullptr,
                              &st);
    if (st.code() == Status::Code::kUnsupported) want_dx = pool_bwd_ref(s, x, dy);
    auto dx = run<float>(be, {x, y, dy}, s.x_size(),
                         [&](auto& in, float* o) { return be.maxpool_bwd(s, in[0], in[1], in[2], o); });
    expect_match(dx, want_dx, 0, 0, "maxpool bwd " + tag);
  }
}

TEST_F(Gpu, CudaMaxpoolMatchesOracle) {
  for (const char* order : {"tree", "atomic"}) {
    auto g = make("cuda", {{"order", order}});
    check_pool(*g, *ref_, std::string("cuda ") + order);
  }
}

TEST_F(Gpu, CudaElementwiseMatchesOracle) {
  auto g = make("cuda");
  const size_t n = 100001;
  auto xi = ints(n, 41), yi = ints(n, 42), xr = uniform(n, 43), yr = uniform(n, 44);
  for (auto& v : yi)
    if (v == 0) v = 1;  // no division by zero
  for (UnaryOp op : {UnaryOp::kCopy, UnaryOp::kRelu, UnaryOp::kSigmoid, UnaryOp::kTanh, UnaryOp::kHardSigmoid,
                     UnaryOp::kExp, UnaryOp::kNeg, UnaryOp::kSquare}) {
    const bool exact = op == UnaryOp::kCopy || op == UnaryOp::kRelu || op == UnaryOp::kNeg || op == UnaryOp::kSquare;
    for (const auto* x : {&xi, &xr}) {
      auto un = [&](Backend& be) {
        return run<float>(be, {*x}, n, [&](auto& in, float* y) { return be.unary(op, in[0], y, n); });
      };
      if (exact) expect_match(un(*g), un(*ref_), 0, 0, std::string("unary ") + to_string(op));
      else expect_match(un(*g), un(*ref_), 1e-7, 1e-6, std::string("unary ") + to_string(op));
    }
  }
  // +, -, *, / of floats are correctly rounded on both sides (double rounding from double is innocuous).
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv, BinaryOp::kMax, BinaryOp::kMin})
    for (auto inputs : {std::pair{&xi, &yi}, std::pair{&xr, &yr}}) {
      const auto* a = inputs.first;  // not a structured binding: clang 14 refuses to capture one
      const auto* b = inputs.second;
      auto bin = [&](Backend& be) {
        return run<float>(be, {*a, *b}, n, [&](auto& in, float* y) { return be.binary(op, in[0], in[1], y, n); });
      };
      expect_match(bin(*g), bin(*ref_), 0, 0, std::string("binary ") + to_string(op));
    }
  auto ax = [&](Backend& be, const std::vector<float>& x, const std::vector<float>& y) {
    return run<float>(be, {x}, n, [&](auto& in, float* o) { return be.axpy(n, 3.f, in[0], o); }, &y);
  };
  expect_match(ax(*g, xi, yi), ax(*ref_, xi, yi), 0, 0, "axpy");
  expect_match(ax(*g, xr, yr), ax(*ref_, xr, yr), 1e-7, 1e-7, "axpy random");
}

// ---- cuBLAS, cuBLASLt -------------------------------------------------------------------------------

std::vector<float> gemm_on(Backend& be, Trans ta, Trans tb, int m, int n, int k, bool exact, Status* st = nullptr) {
  auto a = exact ? ints(size_t(m) * k, 51) : uniform(size_t(m) * k, 51);
  auto b = exact ? ints(size_t(k) * n, 52) : uniform(size_t(k) * n, 52);
  const int lda = ta == Trans::kN ? k : m, ldb = tb == Trans::kN ? n : k;
  return run<float>(be, {a, b}, size_t(m) * n, [&](auto& in, float* c) {
    return be.gemm(ta, tb, m, n, k, 1.f, in[0], lda, in[1], ldb, 0.f, c, n);
  }, nullptr, st);
}

TEST_F(Gpu, CublasGemmMatchesOracle) {
  const int m = 129, n = 67, k = 300;
  for (auto params : std::vector<std::map<std::string, std::string>>{
           {{"math", "pedantic"}},
           {{"math", "default"}, {"atomics", "allowed"}},
           {{"math", "pedantic"}, {"streams", "3"}, {"workspace", "per_stream"}},
           {{"math", "pedantic"}, {"streams", "4"}, {"workspace", "per_stream"}}}) {
    // (streams=4&workspace=shared races on purpose: CublasSharedWorkspaceRunsButPromisesNothing.)
    auto cb = make("cublas", params);
    for (Trans ta : {Trans::kN, Trans::kT})
      for (Trans tb : {Trans::kN, Trans::kT}) {
        std::string what = cb->name() + (ta == Trans::kT ? " T" : " N") + (tb == Trans::kT ? "T" : "N");
        expect_match(gemm_on(*cb, ta, tb, m, n, k, false), gemm_on(*ref_, ta, tb, m, n, k, false), 5e-4, 1e-5, what);
        expect_match(gemm_on(*cb, ta, tb, m, n, k, true), gemm_on(*ref_, ta, tb, m, n, k, true), 0, 0, what + " ints");
      }
  }
  auto tf32 = make("cublas", {{"math", "tf32"}});  // TF32: 10-bit mantissas, a looser bound
  expect_match(gemm_on(*tf32, Trans::kN, Trans::kN, m, n, k, false), gemm_on(*ref_, Trans::kN, Trans::kN, m, n, k, false),
               5e-2, 1e-2, "cublas tf32");
  Status st;
  auto bf = make("cublas", {{"math", "bf16x9"}});
  auto got = gemm_on(*bf, Trans::kN, Trans::kN, m, n, k, false, &st);
  if (st) {
    expect_match(got, gemm_on(*ref_, Trans::kN, Trans::kN, m, n, k, false), 5e-4, 1e-5, "cublas bf16x9");
  } else {
    EXPECT_EQ(st.code(), Status::Code::kUnsupported) << st.message();
  }
}

// streams=4&workspace=shared hands ONE workspace to four handles whose gemms run at once: a race on the
// split-K scratch, kept on purpose (kernels/cuda/cublas_backend.cpp) so that the audit can show it. The
// registry promises nothing run to run for it (promise_cublas: "several streams sharing one workspace are
// not guaranteed reproducible"): its bits may vary from run to run, and where two slices' partial sums
// collide in the scratch its values may be wrong. The audit records both (distinct outputs in N runs; the
// oracle check every cell gets). So this test asserts only what holds whatever the race does: every call
// succeeds, the backend says it shares one buffer, the registry promises nothing, and the same gemm with
// a workspace per stream (the control, promised deterministic) gives the exact answer every run. What the
// shared workspace did is printed, not judged.
TEST_F(Gpu, CublasSharedWorkspaceRunsButPromisesNothing) {
  const int m = 64, n = 256, k = 8192;  // a long k, for split-K (partial sums in the workspace); |C| <= 16 k, exact
  constexpr int kRuns = 10;
  const auto want = gemm_on(*ref_, Trans::kN, Trans::kN, m, n, k, true);

  auto per_stream = make("cublas", {{"math", "pedantic"}, {"streams", "4"}, {"workspace", "per_stream"}});
  ASSERT_NE(per_stream, nullptr);
  for (int r = 0; r < 3; ++r)
    expect_match(gemm_on(*per_stream, Trans::kN, Trans::kN, m, n, k, true), want, 0, 0,
                 per_stream->name() + " ints, run " + std::to_string(r + 1));

  auto shared = make("cublas", {{"math", "pedantic"}, {"streams", "4"}, {"workspace", "shared"}});
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(detail(*shared, "workspace").rfind("shared (1 x ", 0), 0u) << detail(*shared, "workspace");
  Spec t, w;
  std::string err;
  ASSERT_TRUE(succeeded(parse_target(shared->name(), &t), &err)) << err;
  ASSERT_TRUE(succeeded(parse_workload("matmul?m=64&n=256&k=8192", &w), &err)) << err;
  std::map<std::string, std::string> details;
  for (auto& [key, value] : shared->details()) details[key] = value;
  const Promise p = promise_for(t, w, nlohmann::json::object(), details);
  EXPECT_EQ(p.run_to_run, Promise::RunToRun::kNone) << p.run_to_run_source;

  std::vector<std::vector<float>> outputs;
  int wrong_runs = 0;
  size_t nonfinite = 0;
  double worst = 0;
  for (int r = 0; r < kRuns; ++r) {
    Status st;
    auto got = gemm_on(*shared, Trans::kN, Trans::kN, m, n, k, true, &st);
    ASSERT_TRUE(st.is_ok()) << shared->name() << ", run " << r + 1 << ": " << st.message();
    ASSERT_EQ(got.size(), want.size());
    bool wrong = false;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!std::isfinite(got[i])) ++nonfinite;
      const double e = std::fabs(double(got[i]) - double(want[i]));
      if (!(e == 0)) wrong = true;  // NaN counts as wrong
      if (std::isfinite(e)) worst = std::max(worst, e);
    }
    wrong_runs += wrong;
    bool seen = false;
    for (const auto& o : outputs) seen = seen || std::memcmp(o.data(), got.data(), got.size() * sizeof(float)) == 0;
    if (!seen) outputs.push_back(std::move(got));
  }
  std::cout << "[ race     ] " << shared->name() << " matmul m=" << m << " n=" << n << " k=" << k << " (integers): "
            << outputs.size() << " distinct in " << kRuns << ", " << wrong_runs << " runs off the exact answer (worst |error| "
            << worst << ", " << nonfinite << " non-finite elements); nothing promised\n";
}

TEST_F(Gpu, CublasReductionsAndAxpyMatchOracle) {
  auto cb = make("cublas", {{"math", "pedantic"}});
  const size_t n = 100003;
  auto x = uniform(n, 61), y = uniform(n, 62);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kDot, ReduceOp::kNorm2}) {
    auto red = [&](Backend& be) {
      return run<float>(be, {x, y}, 1, [&](auto& in, float* out) { return be.reduce(op, in[0], in[1], n, out); });
    };
    expect_match(red(*cb), red(*ref_), 1e-4, 1e-4, std::string("cublas ") + to_string(op));
  }
  auto ax = [&](Backend& be) {
    return run<float>(be, {x}, n, [&](auto& in, float* o) { return be.axpy(n, 0.5f, in[0], o); }, &y);
  };
  expect_match(ax(*cb), ax(*ref_), 1e-7, 1e-7, "cublas axpy");
}

TEST_F(Gpu, CublasLtEveryHeuristicAlgorithmMatchesOracle) {
  const int m = 256, n = 192, k = 1024;  // long k: the heuristic offers split-K configurations
  auto want = gemm_on(*ref_, Trans::kN, Trans::kT, m, n, k, false);
  int returned = -1;
  for (int algo = 0; algo < 16; ++algo) {
    auto lt = make("cublaslt", {{"algo", std::to_string(algo)}});
    Status st;
    auto got = gemm_on(*lt, Trans::kN, Trans::kT, m, n, k, false, &st);
    returned = std::stoi(detail(*lt, "algos_returned"));
    if (algo >= returned) {
      EXPECT_EQ(st.code(), Status::Code::kUnsupported) << st.message();
      EXPECT_NE(st.message().find("not available"), std::string::npos) << st.message();
      break;
    }
    ASSERT_TRUE(st.is_ok()) << lt->name() << ": " << st.message();
    expect_match(got, want, 1e-3, 1e-5,
                 lt->name() + " id=" + detail(*lt, "algo_id") + " splitk=" + detail(*lt, "splitk") +
                     " scheme=" + detail(*lt, "reduction_scheme"));
  }
  EXPECT_GT(returned, 0);
  auto none = make("cublaslt", {{"reduction", "none"}});
  expect_match(gemm_on(*none, Trans::kT, Trans::kN, m, n, k, true), gemm_on(*ref_, Trans::kT, Trans::kN, m, n, k, true),
               0, 0, "cublaslt reduction=none ints");
}

// ---- cuDNN ------------------------------------------------------------------------------------------

ConvShape cudnn_shape() {
  ConvShape s;
  s.n = 4, s.c = 8, s.h = 20, s.w = 20, s.k = 16, s.r = 3, s.s = 3, s.stride = 1, s.pad = 1;
  return s;
}

TEST_F(Gpu, CudnnEveryAlgorithmMatchesOracleAndKeepsItsDeterminismClaim) {
  const ConvShape s = cudnn_shape();
  const char* keys[] = {"fwd_algo", "bwd_data_algo", "bwd_filter_algo"};
  const char* passes[] = {"fwd", "bwd_data", "bwd_filter"};
  for (const char* math : {"fma", "tf32"})
    for (int p = 0; p < 3; ++p) {
      auto want = conv(*ref_, s, passes[p], false);
      // FFT and Winograd algorithms round differently from a direct sum: bound the error by the output's scale.
      const double scale = max_abs(want), tol = std::string(math) == "fma" ? 1e-3 * scale : 2e-2 * scale;
      int ran = 0;
      for (const CudnnAlgo& a : cudnn_conv_algorithms(s, passes[p])) {
        auto dn = make("cudnn", {{keys[p], std::to_string(a.index)}, {"math", math}});
        Status st;
        auto got = conv(*dn, s, passes[p], false, &st);
        std::string what = dn->name() + " " + passes[p] + " " + a.name;
        if (st.code() == Status::Code::kUnsupported) {
          EXPECT_NE(st.message().find("not supported for this shape"), std::string::npos) << st.message();
          continue;
        }
        ASSERT_TRUE(st.is_ok()) << what << ": " << st.message();
        ++ran;
        EXPECT_EQ(detail(*dn, "algo"), std::to_string(a.index));
        EXPECT_EQ(detail(*dn, "algo_name"), a.name);
        expect_match(got, want, tol, 1e-3, what);
        if (detail(*dn, "claimed_deterministic") != "yes") continue;
        for (int rep = 0; rep < 5; ++rep)  // the claim, checked: same bytes every run
          expect_match(conv(*dn, s, passes[p], false), got, 0, 0, what + " claims determinism, repeat " + std::to_string(rep));
      }
      EXPECT_GT(ran, 0) << "no cuDNN algorithm ran for " << passes[p] << " math=" << math;
    }
}

TEST_F(Gpu, CudnnAutoPicksAnAlgorithmAndRecordsIt) {
  auto dn = make("cudnn");
  const ConvShape s = cudnn_shape();
  auto got = conv(*dn, s, "bwd_filter", true), want = conv(*ref_, s, "bwd_filter", true);
  expect_match(got, want, 1e-3 * max_abs(want), 0, "cudnn auto bwd_filter ints");
  EXPECT_FALSE(detail(*dn, "algo_name").empty());
  EXPECT_NE(detail(*dn, "claimed_deterministic"), "");
  EXPECT_GT(std::stoi(detail(*dn, "algos_found")), 0);
}

TEST_F(Gpu, CudnnMaxpoolMatchesOracle) {
  for (const char* pool : {"deterministic", "nondeterministic"}) {
    auto dn = make("cudnn", {{"pool", pool}});
    check_pool(*dn, *ref_, std::string("cudnn ") + pool);
  }
}

// ---- device fingerprints -------------------------------------------------------------------------------

TEST_F(Gpu, DeviceFingerprintIsTheHostFingerprint) {
  auto g = make("cuda");
  for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(1000), size_t(4099), (size_t(1) << 20) + 5}) {
    auto host = bytes_of(n, n);
    void* d = g->alloc(n);
    ASSERT_TRUE(g->upload(d, host.data(), n).is_ok());
    Fingerprint fp, again;
    ASSERT_TRUE(g->fingerprint(d, n, &fp).is_ok());
    EXPECT_EQ(fp, fingerprint_bytes(host.data(), n)) << n;
    ASSERT_TRUE(g->fingerprint(d, n, &again).is_ok());  // second time: recognised on the device
    EXPECT_EQ(again, fp);
    host[n / 2] ^= 0x08;  // one bit
    ASSERT_TRUE(g->upload(d, host.data(), n).is_ok());
    Fingerprint flipped;
    ASSERT_TRUE(g->fingerprint(d, n, &flipped).is_ok());
    EXPECT_NE(flipped, fp) << n;
    EXPECT_EQ(flipped, fingerprint_bytes(host.data(), n)) << n;
    g->free(d);
  }
}

#if defined(DETAUDIT_HAVE_CUDA)
TEST_F(Gpu, DeviceHashMatchesItsCpuReference) {
  auto g = make("cuda");
  const size_t n = (size_t(1) << 16) + 37;
  auto host = bytes_of(n + 1, 99);
  unsigned char* d = static_cast<unsigned char*>(g->alloc(n + 1));
  ASSERT_TRUE(g->upload(d, host.data(), n + 1).is_ok());
  const gpu::DeviceHashKey key = gpu::DeviceHashKey::random();
  uint64_t dev[4], cpu[4];
  ASSERT_TRUE(device_hash(d, n, key, dev).is_ok());
  gpu::device_hash_host(host.data(), n, key, cpu);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(dev[l], cpu[l]) << "lane " << l;
  ASSERT_TRUE(device_hash(d + 1, n, key, dev).is_ok());  // unaligned: the byte-loading kernel
  gpu::device_hash_host(host.data() + 1, n, key, cpu);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(dev[l], cpu[l]) << "unaligned, lane " << l;
  g->free(d);
}
#endif

// ---- CUPTI -----------------------------------------------------------------------------------------------

TEST_F(Gpu, CuptiAttributesKernelsToTheirRepeat) {
  auto g = make("cuda");
  const int m = 64, n = 64, k = 64;
  auto a = uniform(size_t(m) * k, 71), b = uniform(size_t(k) * n, 72);
  float* da = static_cast<float*>(g->alloc(a.size() * 4));
  float* db = static_cast<float*>(g->alloc(b.size() * 4));
  float* dc = static_cast<float*>(g->alloc(size_t(m) * n * 4));
  ASSERT_TRUE(g->upload(da, a.data(), a.size() * 4).is_ok());
  ASSERT_TRUE(g->upload(db, b.data(), b.size() * 4).is_ok());
  Status st = g->trace_begin(7);
  if (st.code() == Status::Code::kUnavailable) GTEST_SKIP() << st.message();
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_TRUE(g->gemm(Trans::kN, Trans::kN, m, n, k, 1.f, da, k, db, n, 0.f, dc, n).is_ok());
  std::vector<KernelRecord> kernels;
  st = g->trace_end(&kernels);
  if (st.code() == Status::Code::kUnavailable && st.message().rfind("tracing unavailable", 0) == 0)
    GTEST_SKIP() << st.message();
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_GE(kernels.size(), 1u);
  EXPECT_NE(kernels[0].name.find("gemm"), std::string::npos) << kernels[0].name;
  EXPECT_EQ(kernels[0].grid[0], 4u);
  EXPECT_EQ(kernels[0].block[0], 16u);
  EXPECT_EQ(kernels[0].block[1], 16u);
  EXPECT_GT(kernels[0].registers, 0u);
  EXPECT_GT(kernels[0].static_smem, 0u);
  EXPECT_GT(kernels[0].duration_ns, 0u);
  // The next repeat sees only its own kernels.
  ASSERT_TRUE(g->trace_begin(8).is_ok());
  ASSERT_TRUE(g->unary(UnaryOp::kRelu, da, dc, a.size()).is_ok());
  ASSERT_TRUE(g->trace_end(&kernels).is_ok());
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_NE(kernels[0].name.find("unary"), std::string::npos) << kernels[0].name;
  // cuBLAS kernels are attributed too.
  auto cb = make("cublas", {{"math", "pedantic"}});
  ASSERT_TRUE(cb->trace_begin(9).is_ok());
  ASSERT_TRUE(cb->gemm(Trans::kN, Trans::kN, m, n, k, 1.f, da, k, db, n, 0.f, dc, n).is_ok());
  ASSERT_TRUE(cb->trace_end(&kernels).is_ok());
  EXPECT_GE(kernels.size(), 1u);
  for (auto* p : {da, db, dc}) g->free(p);
}

// NCCL's all-reduce on one rank (the fleet's collective, as on a one-GPU node): the sum over one rank is
// the rank's own values, bit for bit, under Ring and under Tree, and every repeat gives the same bits.
TEST_F(Gpu, NcclAllReduceOnOneRankGivesItsOwnValuesUnderEachAlgorithm) {
  if (std::string why = nccl_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  EXPECT_FALSE(nccl_library_version().empty());
  std::vector<float> x(4099);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7 == 0 ? 16777216.0 : 1.0) * (float(i) - 2049.5f) / 3.f;
  for (const std::string algo : {"Ring", "Tree"}) {
    std::string id;
    ASSERT_TRUE(nccl_make_id(&id).is_ok());
    std::vector<std::vector<float>> out;
    std::vector<double> seconds;
    Status st = nccl_allreduce(id, 0, 1, 0, algo, x, 3, &out, &seconds);
    ASSERT_TRUE(st.is_ok()) << algo << ": " << st.message();
    ASSERT_EQ(out.size(), 3u);
    ASSERT_EQ(seconds.size(), 3u);
    for (auto& y : out) EXPECT_EQ(0, std::memcmp(y.data(), x.data(), x.size() * sizeof(float))) << algo;
  }
  EXPECT_EQ(nccl_allreduce("short", 0, 1, 0, "Ring", x, 1, nullptr, nullptr).code(), Status::Code::kInvalid);
}

}  // namespace
}  // namespace detaudit
