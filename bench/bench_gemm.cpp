// Native gemm (order=blocked and sequential, 2 threads) against OpenBLAS cblas_sgemm (2 threads) at
// 512^3 and 1024^3, in GFLOP/s. Each variant first checks a sample of its output against a double
// dot product (STYLE rule 10) and aborts the benchmark on a mismatch.
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/native.hpp"

#ifdef DETAUDIT_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace {

constexpr int kThreads = 2;

struct Problem {
  int n;
  std::vector<float> a, b, c;
  explicit Problem(int size) : n(size), a(size_t(size) * size), b(size_t(size) * size), c(size_t(size) * size) {
    uint64_t s = 12345;
    auto next = [&s] {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      return float(int64_t(s >> 40) % 2001 - 1000) * 1e-3f;  // [-1, 1]
    };
    for (float& v : a) v = next();
    for (float& v : b) v = next();
  }
  // Checks 256 sampled elements of C = A*B against double dot products; empty string when fine.
  std::string check() const {
    for (int t = 0; t < 256; ++t) {
      const int i = (t * 7919) % n, j = (t * 104729 + 13) % n;
      double want = 0;
      for (int k = 0; k < n; ++k) want += double(a[size_t(i) * n + k]) * double(b[size_t(k) * n + j]);
      const double got = c[size_t(i) * n + j];
      if (!(std::fabs(got - want) <= 1e-3 + 1e-4 * std::fabs(want)))
        return "C[" + std::to_string(i) + "][" + std::to_string(j) + "] = " + std::to_string(got) + ", want " +
               std::to_string(want);
    }
    return {};
  }
};

void set_counters(benchmark::State& state, int n) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_native_gemm(benchmark::State& state, detaudit::ReduceOrder order, detaudit::CpuIsa isa) {
  const int n = int(state.range(0));
  Problem p(n);
  detaudit::CpuNativeOptions o;
  o.order = order;
  o.threads = kThreads;
  o.isa = isa;
  if (!detaudit::cpu_isa_supported(isa)) return state.SkipWithError("this CPU lacks the ISA");
  auto be = detaudit::make_cpu_native(o);
  auto run = [&] {
    return be->gemm(detaudit::Trans::kN, detaudit::Trans::kN, n, n, n, 1.0f, p.a.data(), n, p.b.data(), n, 0.0f,
                    p.c.data(), n);
  };
  detaudit::Status st = run();
  if (!st) return state.SkipWithError(st.message().c_str());
  if (std::string why = p.check(); !why.empty()) return state.SkipWithError(why.c_str());
  for (auto _ : state) {
    if (!run()) return state.SkipWithError("gemm failed while timed");
    benchmark::DoNotOptimize(p.c.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(be->describe());
  set_counters(state, n);
}
using detaudit::CpuIsa;
using detaudit::ReduceOrder;
BENCHMARK_CAPTURE(BM_native_gemm, blocked, ReduceOrder::kBlocked, CpuIsa::kAuto)
    ->Arg(512)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_native_gemm, sequential, ReduceOrder::kSequential, CpuIsa::kAuto)
    ->Arg(512)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_native_gemm, pairwise, ReduceOrder::kPairwise, CpuIsa::kAuto)
    ->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_native_gemm, atomic, ReduceOrder::kAtomic, CpuIsa::kAuto)
    ->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
// order=portable: kernels/portable.hpp's leaves and tree, the bits of every CPU and GPU.
BENCHMARK_CAPTURE(BM_native_gemm, portable, ReduceOrder::kPortable, CpuIsa::kAuto)
    ->Arg(512)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
// The AVX2 path is what AMD EPYC (Zen 2/3) machines run.
BENCHMARK_CAPTURE(BM_native_gemm, blocked_avx2, ReduceOrder::kBlocked, CpuIsa::kAvx2)
    ->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

// The machine's peak: kThreads threads, each running 12 independent chains of packed single-precision
// FMAs on registers (no memory traffic), at the widest ISA this CPU has; the ceiling a gemm is measured
// against (bench/speed-table.sh).
// Twelve chains of 16 (AVX-512) or 8 (AVX2) lanes; x = x * a + b keeps the values finite.
#define DETAUDIT_FMA_CHAINS(name, attr, V, fma, set1, lanes)                  \
  attr __attribute__((noinline)) float name(long iters) {                    \
    V acc[12];                                                               \
    for (int i = 0; i < 12; ++i) acc[i] = set1(float(i) * 1e-3f);           \
    const V a = set1(0.999f), b = set1(1e-4f);                               \
    for (long t = 0; t < iters; ++t)                                         \
      for (int i = 0; i < 12; ++i) acc[i] = fma(acc[i], a, b);               \
    V s = acc[0];                                                            \
    for (int i = 1; i < 12; ++i) s = fma(s, a, acc[i]);                      \
    float out[lanes];                                                        \
    std::memcpy(out, &s, sizeof out);                                        \
    return out[0];                                                           \
  }
DETAUDIT_FMA_CHAINS(fma_chains_512, __attribute__((target("avx512f"))), __m512, _mm512_fmadd_ps, _mm512_set1_ps, 16)
DETAUDIT_FMA_CHAINS(fma_chains_256, __attribute__((target("avx2,fma"))), __m256, _mm256_fmadd_ps, _mm256_set1_ps, 8)

void BM_peak_fma(benchmark::State& state) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2") &&
                                                               __builtin_cpu_supports("fma");
  if (!avx2) return state.SkipWithError("this CPU has neither AVX-512 nor AVX2 with FMA");
  const int lanes = avx512 ? 16 : 8;
  const long iters = 2'000'000;
  float sink = 0;
  for (auto _ : state) {
    std::vector<std::thread> ts;
    std::vector<float> got(kThreads);
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([&, t] {
        got[t] = avx512 ? fma_chains_512(iters) : fma_chains_256(iters);
      });
    for (auto& t : ts) t.join();
    for (float g : got) sink += g;
  }
  benchmark::DoNotOptimize(sink);
  state.SetLabel(std::string(avx512 ? "avx512" : "avx2") + " fma, threads=" + std::to_string(kThreads));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * lanes * 12 * double(iters) * kThreads * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_peak_fma)->UseRealTime()->Unit(benchmark::kMillisecond);

#ifdef DETAUDIT_HAVE_OPENBLAS
void BM_openblas_sgemm(benchmark::State& state) {
  const int n = int(state.range(0));
  Problem p(n);
  openblas_set_num_threads(kThreads);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, p.a.data(), n, p.b.data(), n, 0.0f,
                p.c.data(), n);
  };
  run();
  if (std::string why = p.check(); !why.empty()) return state.SkipWithError(why.c_str());
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(p.c.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string("openblas ") + openblas_get_corename() + " threads=" + std::to_string(kThreads));
  set_counters(state, n);
}
BENCHMARK(BM_openblas_sgemm)->Arg(512)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

}  // namespace

BENCHMARK_MAIN();
