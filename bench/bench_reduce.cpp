// Sum of 1e7 floats with the native backend's four reduction orders, 2 threads. Each variant first
// checks its sum against a double-accumulated sum (STYLE rule 10).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/native.hpp"

namespace {

constexpr size_t kN = 10'000'000;
constexpr int kThreads = 2;

const std::vector<float>& input() {
  static const std::vector<float> x = [] {
    std::vector<float> v(kN);
    uint64_t s = 99;
    for (float& f : v) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      f = float(s >> 40) * 0x1p-24f - 0.5f;  // [-0.5, 0.5)
    }
    return v;
  }();
  return x;
}

void BM_native_sum(benchmark::State& state, detaudit::ReduceOrder order) {
  const std::vector<float>& x = input();
  detaudit::CpuNativeOptions o;
  o.order = order;
  o.threads = kThreads;
  auto be = detaudit::make_cpu_native(o);
  float out = 0;
  detaudit::Status st = be->reduce(detaudit::ReduceOp::kSum, x.data(), nullptr, x.size(), &out);
  if (!st) return state.SkipWithError(st.message().c_str());
  double want = 0;
  for (float v : x) want += v;
  // Float accumulation over 1e7 terms (|sum| ~ 1.5e3): blocked, atomic and pairwise (64 lanes per
  // block) stay within 1e-2; the one running sum of the sequential order drifts further (its bound
  // grows with n), so it gets 1.
  const double tol = order == detaudit::ReduceOrder::kSequential ? 1.0 : 1e-2;
  if (!(std::fabs(out - want) <= tol))
    return state.SkipWithError(("sum " + std::to_string(out) + ", want " + std::to_string(want)).c_str());
  for (auto _ : state) {
    if (!be->reduce(detaudit::ReduceOp::kSum, x.data(), nullptr, x.size(), &out))
      return state.SkipWithError("reduce failed while timed");
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kN * sizeof(float)));
  state.SetLabel(be->describe() + " err=" + std::to_string(double(out) - want));
}
BENCHMARK_CAPTURE(BM_native_sum, blocked, detaudit::ReduceOrder::kBlocked)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_native_sum, atomic, detaudit::ReduceOrder::kAtomic)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_native_sum, pairwise, detaudit::ReduceOrder::kPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_native_sum, portable, detaudit::ReduceOrder::kPortable)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_native_sum, sequential, detaudit::ReduceOrder::kSequential)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
