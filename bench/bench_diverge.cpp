// What `detaudit diverge` costs (a traced step at most 2x an untraced one on the CPU). Both
// benchmarks run two autoencoder trainings of kSteps batches of 64 Fashion-MNIST images on
// cpu?order=blocked&threads=2: untraced, two plain train_autoencoder runs one after the other; traced,
// run_diverge of the same two runs in lockstep (a fingerprint of every layer's output, gradients and
// updated parameters, both JSON Lines traces written, the baton passed at every record). Counter
// ms_per_step is per step of both runs; traced / untraced is the overhead. Before timing, the traced
// variant checks that blocked twice reports no divergence and the untraced one that the loss is finite
// (STYLE rule 10).
#include <benchmark/benchmark.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "kernels/cpu/native.hpp"
#include "models/autoencoder.hpp"
#include "suites/diverge.hpp"

namespace {

using namespace detaudit;

constexpr int kSteps = 10, kBatch = 64;

const Dataset* dataset(std::string* err) {
  static Dataset d;
  static Status st = load_dataset("", "train", &d);
  if (!st) *err = st.message();
  return st ? &d : nullptr;
}

std::unique_ptr<Backend> blocked2() {
  CpuNativeOptions o;
  o.threads = 2;
  o.order = ReduceOrder::kBlocked;
  return make_cpu_native(o);
}

TrainConfig config() {
  TrainConfig c;
  c.batches = kSteps;
  c.batch_size = kBatch;
  return c;
}

void per_step(benchmark::State& state) {
  state.counters["ms_per_step"] = benchmark::Counter(double(state.iterations()) * kSteps * 1e3,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_two_runs_untraced(benchmark::State& state) {
  std::string err;
  const Dataset* d = dataset(&err);
  if (!d) return state.SkipWithError(err.c_str());
  auto a = blocked2(), b = blocked2();
  TrainResult r;
  Status st = train_autoencoder(*a, *d, config(), {}, &r);
  if (!st) return state.SkipWithError(st.message().c_str());
  for (float v : r.curve)
    if (!std::isfinite(v)) return state.SkipWithError("check failed: non-finite loss");
  for (auto _ : state) {
    TrainResult ra, rb;
    st = train_autoencoder(*a, *d, config(), {}, &ra);
    if (st) st = train_autoencoder(*b, *d, config(), {}, &rb);
    if (!st) return state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(ra.curve.data());
  }
  per_step(state);
}

void BM_two_runs_traced(benchmark::State& state) {
  std::string err;
  const Dataset* d = dataset(&err);
  if (!d) return state.SkipWithError(err.c_str());
  const std::string dir = (std::filesystem::temp_directory_path() / "detaudit-bench-diverge").string();
  std::filesystem::create_directories(dir);
  DivergeOptions o;
  o.make_a = o.make_b = []() -> BackendOr { return blocked2(); };
  o.data = d;
  o.train = config();
  o.trace_a = dir + "/trace-a.jsonl";
  o.trace_b = dir + "/trace-b.jsonl";
  DivergeResult r;
  Status st = run_diverge(o, &r);
  if (!st) return state.SkipWithError(st.message().c_str());
  if (r.first) return state.SkipWithError(("check failed: blocked twice " + r.summary()).c_str());
  o.data_fingerprint = r.design.data_fingerprint;  // the data is hashed once, as the CLI does per run
  for (auto _ : state) {
    st = run_diverge(o, &r);
    if (!st) return state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(r.records);
  }
  per_step(state);
}

BENCHMARK(BM_two_runs_untraced)->Unit(benchmark::kMillisecond)->MinTime(5.0)->UseRealTime();
BENCHMARK(BM_two_runs_traced)->Unit(benchmark::kMillisecond)->MinTime(5.0)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
