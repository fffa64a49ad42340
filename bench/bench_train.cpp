// Autoencoder training steps per second on the native cpu backend (2 threads; order=blocked, the
// deterministic variant, and order=atomic, the racing one), batch 64 of Fashion-MNIST. Compare with
// PyTorch 1.13 CPU on the same architecture (models/autoencoder.hpp). Each variant first trains 30
// batches and checks that the loss is finite and goes down (STYLE rule 10); a failure aborts it.
// Also reports per-layer times averaged over 30 steps (counters "<i>_<layer>_fwd_ms" / "_bwd_ms").
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/native.hpp"
#include "models/autoencoder.hpp"

namespace {

using namespace detaudit;

constexpr int kThreads = 2;
constexpr int kBatch = 64;

const Dataset* dataset(std::string* err) {
  static Dataset d;
  static Status st = load_dataset("", "train", &d);
  if (!st) *err = st.message();
  return st ? &d : nullptr;
}

// Trains 30 batches; empty string when the loss is finite and its last 5 average below its first 5.
std::string check_training(Backend& be, const Dataset& d) {
  TrainConfig cfg;
  cfg.batches = 30;
  cfg.batch_size = kBatch;
  TrainResult r;
  Status st = train_autoencoder(be, d, cfg, {}, &r);
  if (!st) return st.message();
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.curve[i], last += r.curve[r.curve.size() - 1 - i];
  for (float v : r.curve)
    if (!std::isfinite(v)) return "non-finite loss";
  if (!(last < first)) return "loss did not decrease: " + std::to_string(first / 5) + " -> " + std::to_string(last / 5);
  return "";
}

void train_step(benchmark::State& state, ReduceOrder order) {
  std::string err;
  const Dataset* d = dataset(&err);
  if (!d) return state.SkipWithError(err.c_str());
  CpuNativeOptions o;
  o.threads = kThreads;
  o.order = order;
  auto be = make_cpu_native(o);
  if (std::string e = check_training(*be, *d); !e.empty()) return state.SkipWithError(("check failed: " + e).c_str());

  Autoencoder model(be.get(), d->rows, d->cols);
  if (!model.init(1)) return state.SkipWithError("init failed");
  Adam adam(be.get());
  BatchOrder bo(size_t(d->count), kBatch, 1);
  std::vector<uint32_t> idx;
  std::vector<float> host(size_t(kBatch) * d->pixels_per_image());
  Tensor batch;
  if (!Tensor::create(be.get(), {kBatch, 1, d->rows, d->cols}, &batch)) return state.SkipWithError("alloc");
  const auto params = model.params(), grads = model.grads();
  uint64_t step = 0;
  for (auto _ : state) {
    bo.batch(step++, &idx);
    for (size_t i = 0; i < idx.size(); ++i) d->image(idx[i], host.data() + i * d->pixels_per_image());
    float loss = 0;
    Status st = batch.upload(host);
    if (st) st = model.forward_backward(batch, &loss);
    if (st) st = adam.step(params, grads);
    if (!st) return state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(loss);
  }
  state.counters["ms_per_step"] =
      benchmark::Counter(double(state.iterations()) * 1e3, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);

  // Per-layer times, averaged over kProfileSteps more steps (forward, loss, backward, Adam), for
  // profiling; a single step's timings are too noisy on a shared 2-core machine.
  constexpr int kProfileSteps = 30;
  auto& layers = model.net().layers();
  std::vector<double> fwd_ms(layers.size()), bwd_ms(layers.size());
  double loss_ms = 0, adam_ms = 0;
  Loss loss(be.get(), LossOp::kMse);
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  for (int rep = 0; rep < kProfileSteps; ++rep) {
    const Tensor* cur = &batch;
    for (size_t i = 0; i < layers.size(); ++i) {
      auto t0 = Clock::now();
      (void)layers[i]->forward(*cur, &cur);
      fwd_ms[i] += ms_since(t0);
    }
    auto t0 = Clock::now();
    (void)loss.forward(*cur, batch, nullptr);
    loss_ms += ms_since(t0);
    const Tensor* g = &loss.grad();
    for (size_t i = layers.size(); i-- > 0;) {
      t0 = Clock::now();
      const Tensor* next = nullptr;
      (void)layers[i]->backward(*g, &next);
      bwd_ms[i] += ms_since(t0);
      if (!next) break;
      g = next;
    }
    t0 = Clock::now();
    (void)adam.step(params, grads);
    adam_ms += ms_since(t0);
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string key = std::to_string(i) + "_" + layers[i]->name();
    state.counters[key + "_fwd_ms"] = fwd_ms[i] / kProfileSteps;
    state.counters[key + "_bwd_ms"] = bwd_ms[i] / kProfileSteps;
  }
  state.counters["loss_ms"] = loss_ms / kProfileSteps;
  state.counters["adam_ms"] = adam_ms / kProfileSteps;
}

void BM_train_step_blocked(benchmark::State& s) { train_step(s, ReduceOrder::kBlocked); }
void BM_train_step_atomic(benchmark::State& s) { train_step(s, ReduceOrder::kAtomic); }
void BM_train_step_portable(benchmark::State& s) { train_step(s, ReduceOrder::kPortable); }
BENCHMARK(BM_train_step_blocked)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_train_step_atomic)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_train_step_portable)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
