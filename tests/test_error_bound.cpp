// The error bound of each op's oracle output (probes/workload.cpp): correct kernels in every
// order this build has (cpu's sequential, pairwise, blocked and forced atomic orders, OpenBLAS, oneDNN)
// stay below ratio 1, also where cancellation makes the ULP count huge; an error planted above the
// bound goes over 1; the accumulation length k per op; the exact selection; f64; NaN; the histogram.
// Everything runs in this process, single- or two-threaded with fixed orders: deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "tests/fixtures.hpp"
#include "kernels/cpu/native.hpp"
#include "kernels/cpu/onednn_backend.hpp"
#include "kernels/cpu/openblas_backend.hpp"
#include "kernels/generator.hpp"
#include "probes/workload.hpp"

namespace detaudit {
namespace {

Spec workload(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_workload(text, &s), &err)) << err;
  return s;
}

struct Oracle {
  std::vector<uint8_t> out;
  ErrorBound bound;
};

Oracle oracle_of(const Spec& w) {
  Oracle o;
  Status st = compute_oracle(w, &o.out, nullptr, &o.bound);
  EXPECT_TRUE(st.is_ok()) << w.str() << ": " << st.message();
  return o;
}

// One run of `w` on `b`; false with *why when the backend does not provide the op.
bool run_on(Backend& b, const Spec& w, std::vector<uint8_t>* out, std::string* why) {
  auto wl = Workload::create(w);
  Status st = wl->setup(b);
  if (st) st = wl->run(b);
  if (st) {
    out->resize(wl->output_bytes());
    st = b.download(out->data(), wl->output(), out->size());
  }
  wl->teardown(b);
  if (!st) *why = st.message();
  return st.is_ok();
}

bool is_f64(const Spec& w) { return w.get("dtype", "f32") == "f64"; }

OracleDistance distance(const Spec& w, const std::vector<uint8_t>& out, const Oracle& o) {
  if (is_f64(w))
    return compare_to_oracle(reinterpret_cast<const double*>(out.data()), reinterpret_cast<const double*>(o.out.data()),
                             out.size() / 8, &o.bound);
  return compare_to_oracle(reinterpret_cast<const float*>(out.data()), reinterpret_cast<const float*>(o.out.data()),
                           out.size() / 4, &o.bound);
}

uint64_t hist_total(const OracleDistance& d) { return std::accumulate(d.ratio_hist.begin(), d.ratio_hist.end(), uint64_t(0)); }

struct Target {
  std::string name;
  std::unique_ptr<Backend> backend;
};

std::unique_ptr<Backend> native(ReduceOrder order, int threads, uint64_t forced_seed = 0) {
  CpuNativeOptions o;
  o.order = order;
  o.threads = threads;
  o.forced_atomic_order_seed = forced_seed;
  return make_cpu_native(o);
}

// Every correct kernel of this build, in fixed orders (the atomic order forced, so no thread timing).
std::vector<Target> correct_targets() {
  std::vector<Target> t;
  for (ReduceOrder order : {ReduceOrder::kSequential, ReduceOrder::kPairwise, ReduceOrder::kBlocked})
    for (int threads : {1, 2})
      t.push_back({std::string("cpu?order=") + to_string(order) + "&threads=" + std::to_string(threads),
                   native(order, threads)});
  for (uint64_t seed : {1, 2})
    t.push_back(
        {"cpu?order=atomic (forced order " + std::to_string(seed) + ")", native(ReduceOrder::kAtomic, 2, seed)});
  for (int threads : {1, 2})
    if (auto b = make_openblas(OpenblasOptions{threads}))
      t.push_back({"openblas?threads=" + std::to_string(threads), std::move(b).value()});
  if (auto b = make_onednn(OnednnOptions{1})) t.push_back({"onednn", std::move(b).value()});
  if (auto b = make_onednn(OnednnOptions{1}, OnednnConvLayout::kBlocked))
    t.push_back({"onednn?layout=blocked", std::move(b).value()});
  return t;
}

// Small versions of the quick suite's workloads, every op and pass, uniform inputs (cancellation).
const char* const kWorkloads[] = {
    "matmul?m=64&n=48&k=515",
    "matmul?m=24&n=20&k=72&ta=t&tb=t",
    "matmul?m=32&n=32&k=257&dtype=f64",
    "batchinv?m=16&n=64&k=256&rows=4",
    "conv2d?n=2&c=16&h=16&w=16&k=32&pass=fwd",
    "conv2d?n=2&c=16&h=16&w=16&k=32&pass=bwd_data",
    "conv2d?n=2&c=16&h=16&w=16&k=32&pass=bwd_filter",
    "conv2d?n=2&c=8&h=15&w=15&k=8&stride=2&pad=1&pass=bwd_data",
    "conv2d?n=2&c=8&h=15&w=15&k=8&stride=2&pad=1&pass=bwd_filter",
    "reduce?op=sum&n=200000",
    "reduce?op=dot&n=200000",
    "reduce?op=norm&n=200000",
    "reduce?op=softmax&n=64000&cols=1000",
    "maxpool?n=2&c=8&h=32&w=32&window=3&stride=2&pass=bwd",
    "maxpool?n=2&c=8&h=32&w=32&window=2&stride=2&pass=fwd",
};

TEST(ErrorBound, CorrectKernelsInEveryOrderStayBelowOne) {
  auto targets = correct_targets();
  size_t compared = 0, differing = 0;
  for (const char* text : kWorkloads) {
    Spec w = workload(text);
    Oracle o = oracle_of(w);
    const size_t elems = o.out.size() / (is_f64(w) ? 8 : 4);
    ASSERT_EQ(o.bound.bound.size(), elems) << text;
    double worst = 0;
    for (auto& t : targets) {
      SCOPED_TRACE(std::string(text) + " on " + t.name);
      std::vector<uint8_t> out;
      std::string why;
      if (!run_on(*t.backend, w, &out, &why)) continue;  // the backend does not provide the op
      OracleDistance d = distance(w, out, o);
      ++compared;
      differing += d.mismatched > 0;
      EXPECT_GE(d.err_ratio, 0);
      EXPECT_LT(d.err_ratio, 1) << "max ulp " << d.max_ulp;
      EXPECT_EQ(d.bound_k, o.bound.k);
      ASSERT_EQ(d.ratio_hist.size(), size_t(kRatioBuckets));
      EXPECT_EQ(hist_total(d), elems);
      EXPECT_EQ(d.ratio_hist[0], elems - d.mismatched);
      EXPECT_EQ(d.ratio_hist[kRatioBuckets - 2] + d.ratio_hist[kRatioBuckets - 1], 0u) << "nothing above ratio 1";
      EXPECT_GE(d.agree_bits, 0);
      EXPECT_LE(d.agree_bits, is_f64(w) ? 53 : 24);
      worst = std::max(worst, d.err_ratio);
    }
    std::printf("%-62s k %-7lld worst ratio %.3g\n", text, static_cast<long long>(o.bound.k), worst);
  }
  // The native orders provide every op: the comparisons really ran, and most differ from the oracle.
  EXPECT_GE(compared, std::size(kWorkloads) * 8);
  EXPECT_GE(differing, compared / 2);
}

// The case that prompted it: the quick suite's conv2d forward on the sequential order, off by hundreds of
// thousands of ulps at outputs near zero (cancellation), is well inside the bound.
TEST(ErrorBound, CancellationGivesHugeUlpsButARatioBelowOne) {
  Spec w = workload("conv2d?n=4&c=16&h=16&w=16&k=32&pass=fwd");
  Oracle o = oracle_of(w);
  auto b = native(ReduceOrder::kSequential, 1);
  std::vector<uint8_t> out;
  std::string why;
  ASSERT_TRUE(run_on(*b, w, &out, &why)) << why;
  OracleDistance d = distance(w, out, o);
  EXPECT_GT(d.max_ulp, 100000u);
  EXPECT_GT(d.max_rel_err, 1e-3);
  EXPECT_LT(d.err_ratio, 1);
  EXPECT_GT(d.err_ratio, 0);
  EXPECT_GT(d.agree_bits, 16) << "the largest difference is small beside the largest output";
  std::printf("conv2d fwd, cpu?order=sequential: max ulp %llu, ratio %.3g, %.1f bits of agreement\n",
              static_cast<unsigned long long>(d.max_ulp), d.err_ratio, d.agree_bits);
}

// Moves element i of `out` away from the oracle's value until it is more than `factor` bounds off.
template <typename T>
void plant(std::vector<uint8_t>* out, const Oracle& o, size_t i, double factor) {
  T* y = reinterpret_cast<T*>(out->data());
  const T ref = reinterpret_cast<const T*>(o.out.data())[i];
  const double b = o.bound.bound[i];
  T v = T(double(ref) + factor * b);
  while (std::fabs(double(v) - double(ref)) <= factor * b) v = std::nextafter(v, std::numeric_limits<T>::infinity());
  y[i] = v;
}

TEST(ErrorBound, PlantedErrorAboveTheBoundGoesOverOne) {
  for (const char* text : {"matmul?m=64&n=48&k=515", "matmul?m=32&n=32&k=257&dtype=f64",
                           "conv2d?n=2&c=16&h=16&w=16&k=32&pass=bwd_data", "reduce?op=norm&n=200000",
                           "reduce?op=softmax&n=64000&cols=1000", "maxpool?n=2&c=8&h=32&w=32&window=3&stride=2&pass=bwd"}) {
    SCOPED_TRACE(text);
    Spec w = workload(text);
    Oracle o = oracle_of(w);
    const size_t elems = o.bound.bound.size();
    // The first element whose bound is not zero (maxpool bwd: one that receives a gradient).
    size_t i = 0;
    while (i < elems && o.bound.bound[i] == 0) ++i;
    ASSERT_LT(i, elems);
    std::vector<uint8_t> out = o.out;
    if (is_f64(w))
      plant<double>(&out, o, i, 1.5);
    else
      plant<float>(&out, o, i, 1.5);
    OracleDistance d = distance(w, out, o);
    EXPECT_GT(d.err_ratio, 1.5);
    EXPECT_LT(d.err_ratio, 4);
    EXPECT_EQ(d.mismatched, 1u);
    EXPECT_EQ(d.ratio_hist[13], 1u) << "one element in (1, 4]";
    EXPECT_EQ(hist_total(d), elems);
    // Within the bound elsewhere: the ratio stays below 1.
    out = o.out;
    size_t j = elems - 1;
    while (j > 0 && o.bound.bound[j] == 0) --j;
    if (is_f64(w))
      plant<double>(&out, o, j, 0.25);
    else
      plant<float>(&out, o, j, 0.25);
    d = distance(w, out, o);
    EXPECT_GT(d.err_ratio, 0.25);
    EXPECT_LT(d.err_ratio, 1);
  }
}

// Largest number of terms summed into one element, by brute force over the index maps of the ops.
int64_t count_bwd_data_terms(const ConvShape& s) {
  int64_t most = 0;
  for (int h = 0; h < s.h; ++h)
    for (int x = 0; x < s.w; ++x) {
      int64_t n = 0;
      for (int r = 0; r < s.r; ++r)
        for (int t = 0; t < s.s; ++t) {
          int ph = h + s.pad - r, qw = x + s.pad - t;
          n += ph >= 0 && qw >= 0 && ph % s.stride == 0 && qw % s.stride == 0 && ph / s.stride < s.p() &&
               qw / s.stride < s.q();
        }
      most = std::max(most, n * s.k);
    }
  return most;
}
int64_t count_pool_windows(int h, int window, int stride) {
  int p = (h - window) / stride + 1;
  int64_t most = 0;
  for (int i = 0; i < h; ++i) {
    int64_t n = 0;
    for (int j = 0; j < p; ++j) n += j * stride <= i && i < j * stride + window;
    most = std::max(most, n * n);
  }
  return most;
}

TEST(ErrorBound, AccumulationLengthPerOp) {
  struct Case {
    const char* spec;
    int64_t k;
  };
  for (auto [text, k] : std::vector<Case>{
           {"matmul?m=4&n=3&k=37", 37},
           {"matmul?m=4&n=3&k=37&dtype=f64", 37},
           {"batchinv?m=4&n=8&k=19&rows=2", 19},
           {"conv2d?n=2&c=3&h=9&w=9&k=4&r=5&s=5&pass=fwd", 3 * 5 * 5},
           {"conv2d?n=2&c=3&h=9&w=9&k=4&r=3&s=3&pass=bwd_data", 4 * 3 * 3},
           {"conv2d?n=2&c=3&h=15&w=15&k=8&r=3&s=3&stride=2&pad=1&pass=bwd_data", 8 * 2 * 2},
           {"conv2d?n=1&c=2&h=31&w=31&k=4&r=5&s=5&stride=2&pad=2&pass=bwd_data", 4 * 3 * 3},
           {"conv2d?n=2&c=3&h=15&w=15&k=8&stride=2&pad=1&pass=bwd_filter", 2 * 8 * 8},
           {"conv2d?n=3&c=2&h=9&w=7&k=2&pass=bwd_filter", 3 * 9 * 7},  // r = s = 3, pad 1: P = 9, Q = 7
           {"conv2d?n=3&c=2&h=9&w=7&k=2&pad=0&pass=bwd_filter", 3 * 7 * 5},
           {"reduce?op=sum&n=1000", 1000},
           {"reduce?op=dot&n=999", 999},
           {"reduce?op=norm&n=77", 77},
           {"reduce?op=softmax&n=2000&cols=100", 100},
           {"maxpool?n=1&c=2&h=9&w=9&window=3&stride=2&pass=bwd", 4},
           {"maxpool?n=1&c=2&h=8&w=8&window=2&stride=2&pass=bwd", 1},
           {"maxpool?n=1&c=2&h=9&w=9&window=3&stride=1&pass=bwd", 9},
           {"maxpool?n=1&c=2&h=9&w=9&window=3&stride=2&pass=fwd", 0}}) {
    SCOPED_TRACE(text);
    Spec w = workload(text);
    Oracle o = oracle_of(w);
    EXPECT_EQ(o.bound.k, k);
  }
  // The formulas are the brute-force maxima of the index maps (attained, not just upper bounds).
  for (ConvShape s : {ConvShape{2, 3, 9, 9, 4, 3, 3, 1, 0}, ConvShape{2, 3, 15, 15, 8, 3, 3, 2, 1},
                      ConvShape{1, 2, 31, 31, 4, 5, 5, 2, 2}, ConvShape{1, 2, 12, 12, 3, 4, 2, 3, 1}}) {
    Spec w = workload("conv2d?n=" + std::to_string(s.n) + "&c=" + std::to_string(s.c) + "&h=" + std::to_string(s.h) +
                      "&w=" + std::to_string(s.w) + "&k=" + std::to_string(s.k) + "&r=" + std::to_string(s.r) +
                      "&s=" + std::to_string(s.s) + "&stride=" + std::to_string(s.stride) +
                      "&pad=" + std::to_string(s.pad) + "&pass=bwd_data");
    EXPECT_EQ(oracle_of(w).bound.k, count_bwd_data_terms(s)) << w.str();
  }
  for (auto [window, stride] : {std::pair{3, 2}, {2, 2}, {3, 1}, {5, 2}, {4, 3}}) {
    Spec w = workload("maxpool?n=1&c=1&h=13&w=13&window=" + std::to_string(window) + "&stride=" + std::to_string(stride) +
                      "&pass=bwd");
    EXPECT_EQ(oracle_of(w).bound.k, count_pool_windows(13, window, stride)) << w.str();
  }
}

// Max pooling forward selects an input: the bound is 0, and any difference is infinitely far out.
TEST(ErrorBound, SelectionMustBeExact) {
  Spec w = workload("maxpool?n=2&c=8&h=32&w=32&window=2&stride=2&pass=fwd");
  Oracle o = oracle_of(w);
  EXPECT_EQ(o.bound.k, 0);
  for (double b : o.bound.bound) ASSERT_EQ(b, 0.0);
  std::vector<uint8_t> out;
  std::string why;
  ASSERT_TRUE(run_on(*native(ReduceOrder::kBlocked, 2), w, &out, &why)) << why;
  OracleDistance d = distance(w, out, o);
  EXPECT_EQ(d.err_ratio, 0);
  EXPECT_EQ(d.ratio_hist[0], o.bound.bound.size());
  float* y = reinterpret_cast<float*>(out.data());
  y[5] = std::nextafter(y[5], 2.0f);
  d = distance(w, out, o);
  EXPECT_EQ(d.max_ulp, 1u);
  EXPECT_TRUE(std::isinf(d.err_ratio));
  EXPECT_EQ(d.ratio_hist[kRatioBuckets - 1], 1u);
}

TEST(ErrorBound, NanAgainstTheOracleIsInfinitelyFarOut) {
  Spec w = workload("reduce?op=softmax&n=2000&cols=100");
  Oracle o = oracle_of(w);
  std::vector<uint8_t> out = o.out;
  float* y = reinterpret_cast<float*>(out.data());
  y[7] = std::numeric_limits<float>::quiet_NaN();
  OracleDistance d = distance(w, out, o);
  EXPECT_TRUE(std::isinf(d.err_ratio));
  EXPECT_EQ(d.max_ulp, kUlpInfinite);
  EXPECT_EQ(d.agree_bits, 0);
  EXPECT_EQ(d.ratio_hist[kRatioBuckets - 1], 1u);
  EXPECT_EQ(hist_total(d), 2000u);
}

// Max-pool backward on the host, each window's gradient routed to its first maximum in row-major order
// (cpu-ref's choice) or its last, summed in float in window order.
std::vector<float> maxpool_bwd_routed(const PoolShape& s, const std::vector<float>& x, const std::vector<float>& dy,
                                      bool last) {
  std::vector<float> dx(s.x_size(), 0.0f);
  const int P = s.p(), Q = s.q();
  const size_t plane = size_t(s.h) * s.w;
  for (size_t nc = 0; nc < size_t(s.n) * s.c; ++nc)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        size_t best = 0;
        for (int i = 0; i < s.window; ++i)
          for (int j = 0; j < s.window; ++j) {
            const size_t idx = nc * plane + size_t(p * s.stride + i) * s.w + size_t(q * s.stride + j);
            if ((i == 0 && j == 0) || x[idx] > x[best] || (last && x[idx] == x[best])) best = idx;
          }
        dx[best] += dy[(nc * P + p) * Q + q];
      }
  return dx;
}

std::string pool_spec(const PoolShape& s, const char* pass) {
  return "maxpool?n=" + std::to_string(s.n) + "&c=" + std::to_string(s.c) + "&h=" + std::to_string(s.h) +
         "&w=" + std::to_string(s.w) + "&window=" + std::to_string(s.window) + "&stride=" + std::to_string(s.stride) +
         "&dist=int&pass=" + pass;
}

// Max-pool backward where maxima tie (integer inputs in [-4, 4] tie in most windows): a correct kernel
// may route a window's gradient to any of its tied maxima, and libraries differ. Routing every one to
// the last instead of the first (cpu-ref's) moves whole gradients, and stays within the bound (the tie
// allowance of PoolWorkload::error_bound); so do the cpu targets. Where no window's maximum lies the
// bound is 0, and a gradient landing there is infinitely far out, told apart from a NaN.
TEST(ErrorBound, MaxpoolBackwardTiesMayRouteToAnyTiedMaximum) {
  auto targets = correct_targets();
  for (PoolShape s : {PoolShape{2, 8, 32, 32, 3, 2}, PoolShape{2, 8, 32, 32, 2, 2}, PoolShape{1, 4, 17, 17, 3, 1},
                      PoolShape{1, 3, 15, 15, 4, 3}}) {
    const std::string text = pool_spec(s, "bwd");
    SCOPED_TRACE(text);
    Spec w = workload(text);
    Oracle o = oracle_of(w);
    const size_t elems = s.x_size();
    ASSERT_EQ(o.bound.bound.size(), elems);
    const auto* y_o = reinterpret_cast<const float*>(o.out.data());
    // The workload's inputs (seed 1; x on stream 1, dy on stream 3): the oracle routes as `first` does.
    const std::vector<float> x = make_input<float>(s.x_size(), 1, 1, Dist::kInt);
    const std::vector<float> dy = make_input<float>(s.y_size(), 1, 3, Dist::kInt);
    const std::vector<float> first = maxpool_bwd_routed(s, x, dy, false);
    ASSERT_EQ(std::memcmp(first.data(), y_o, o.out.size()), 0) << "not the workload's inputs";

    const std::vector<float> last = maxpool_bwd_routed(s, x, dy, true);
    OracleDistance d = compare_to_oracle(last.data(), y_o, elems, &o.bound);
    EXPECT_GT(d.mismatched, elems / 20) << "the ties move gradients";
    EXPECT_TRUE(std::isfinite(d.err_ratio));
    EXPECT_LE(d.err_ratio, 1);
    EXPECT_GT(d.err_ratio, 0.5) << "whole gradients moved: the tie allowance covers them, not rounding";
    EXPECT_EQ(hist_total(d), elems);
    EXPECT_EQ(d.ratio_hist[kRatioBuckets - 2] + d.ratio_hist[kRatioBuckets - 1], 0u);
    std::printf("%-62s k %-3lld routed to the last tie: %llu elements differ, ratio %.9g\n", text.c_str(),
                static_cast<long long>(o.bound.k), static_cast<unsigned long long>(d.mismatched), d.err_ratio);

    size_t compared = 0;
    for (auto& t : targets) {
      SCOPED_TRACE(t.name);
      std::vector<uint8_t> out;
      std::string why;
      if (!run_on(*t.backend, w, &out, &why)) continue;
      ++compared;
      OracleDistance e = distance(w, out, o);
      EXPECT_GE(e.err_ratio, 0);
      EXPECT_LT(e.err_ratio, 1) << "max ulp " << e.max_ulp;
      EXPECT_EQ(hist_total(e), elems);
    }
    EXPECT_GE(compared, 8u) << "the native orders provide max pooling";

    // A position where no window's maximum lies: bound 0, every correct kernel writes 0.
    size_t i = 0;
    while (i < elems && o.bound.bound[i] != 0) ++i;
    ASSERT_LT(i, elems);
    ASSERT_EQ(y_o[i], 0.0f);
    std::vector<float> planted(y_o, y_o + elems);
    planted[i] = 1.0f;
    d = compare_to_oracle(planted.data(), y_o, elems, &o.bound);
    EXPECT_TRUE(std::isinf(d.err_ratio));
    EXPECT_FALSE(d.nonfinite_mismatch()) << "a finite difference where the bound is 0, not a NaN";
    planted[i] = std::numeric_limits<float>::quiet_NaN();
    d = compare_to_oracle(planted.data(), y_o, elems, &o.bound);
    EXPECT_TRUE(std::isinf(d.err_ratio));
    EXPECT_TRUE(d.nonfinite_mismatch());
  }
  // Forward, a selection: tied maxima are equal values, every target exact.
  for (PoolShape s : {PoolShape{2, 8, 32, 32, 3, 2}, PoolShape{2, 8, 32, 32, 2, 2}}) {
    const std::string text = pool_spec(s, "fwd");
    SCOPED_TRACE(text);
    Spec w = workload(text);
    Oracle o = oracle_of(w);
    for (auto& t : targets) {
      SCOPED_TRACE(t.name);
      std::vector<uint8_t> out;
      std::string why;
      if (!run_on(*t.backend, w, &out, &why)) continue;
      EXPECT_EQ(distance(w, out, o).err_ratio, 0);
    }
  }
}

// The exp accuracy the softmax bound assumes (kSoftmaxExpUlps) against glibc's expf and oneDNN's exp,
// on the arguments softmax gives them (x - max: [-2, 0] for uniform inputs, [-8, 0] for integers), in
// ulps of the correctly rounded result (its own rounding adds at most half an ulp). oneDNN JITs its exp
// per ISA (AVX-512, AVX2, SSE4.1), so each is asserted only against the documented constant, which
// holds on any x86-64 (glibc's expf is within 0.502 ulp since 2.28); the measured values are printed.
TEST(ErrorBound, ExpAccuracyAssumedBySoftmax) {
  const size_t n = 1 << 16;
  std::vector<float> d(n), want(n), got(n);
  for (size_t i = 0; i < n; ++i) d[i] = -8.0f * float(i) / float(n - 1);
  for (size_t i = 0; i < n; ++i) want[i] = float(std::exp(double(d[i])));
  auto worst_ulps = [&](const std::vector<float>& v) {
    uint64_t w = 0;
    for (size_t i = 0; i < n; ++i) w = std::max(w, ulp_distance(v[i], want[i]));
    return w;
  };
  for (size_t i = 0; i < n; ++i) got[i] = std::exp(d[i]);
  uint64_t glibc = worst_ulps(got);
  EXPECT_LE(double(glibc) + 0.5, kSoftmaxExpUlps);
  BackendOr dnnl = make_onednn(OnednnOptions{1});
  if (!dnnl) GTEST_SKIP() << "oneDNN: " << dnnl.message();
  ASSERT_TRUE(dnnl.value()->unary(UnaryOp::kExp, d.data(), got.data(), n).is_ok());
  uint64_t onednn = worst_ulps(got);
  EXPECT_LE(double(onednn) + 0.5, kSoftmaxExpUlps);
  std::printf("exp on [-8, 0]: glibc expf within %llu ulp, oneDNN within %llu ulp\n",
              static_cast<unsigned long long>(glibc), static_cast<unsigned long long>(onednn));
}

}  // namespace
}  // namespace detaudit
