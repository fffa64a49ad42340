// PredNet training steps per second on the native cpu backend (--threads=N, default 2; order=blocked, the
// deterministic variant, and order=atomic, the racing one): the quick configuration (models/prednet.hpp
// prednet_quick: 1 x 64 x 64, stacks (1, 16, 32, 64), nt 10, batch 4), one step = forward through all
// nt steps, backward through time, Adam 1e-3. Compare with bench/prednet_torch.py (bench/prednet-vs-torch.sh).
// Frames: pseudo-random pixels in [0, 1) from counter_bits (seed kFrameSeed), the same batch every step
// as in prednet_torch.py (dense convolutions cost the same whatever the pixels). Each variant first
// trains kCheckSteps steps and checks that the loss is finite and goes down (STYLE rule 10).
// The _winograd_ variants run the same steps on cpu?conv=winograd (3x3 convolutions as Winograd F(4x4,3x3),
// kernels/cpu/winograd.hpp). BM_profile_blocked and BM_profile_winograd_blocked (not run by the script) adds per-op times of the real training step through a timing
// wrapper around the backend: counters "<op>[ <shape>]_ms" per step, summed over calls.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/native.hpp"
#include "kernels/generator.hpp"
#include "models/optim.hpp"
#include "models/prednet.hpp"

namespace {

using namespace detaudit;

int g_threads = 2;  // --threads=N (bench/prednet-vs-torch.sh passes its THREADS)
constexpr uint64_t kInitSeed = 1, kFrameSeed = 7;
constexpr int kCheckSteps = 6;

std::vector<float> make_frames(const PredNetConfig& c) {
  std::vector<float> f(size_t(c.nt) * c.batch * c.channels() * c.height * c.width);
  for (size_t i = 0; i < f.size(); ++i) f[i] = float(counter_bits(kFrameSeed, 0, i) >> 40) * 0x1.0p-24f;
  return f;
}

// Model, optimiser and frames of one benchmark; step() is one training step.
struct Trainer {
  Backend* be;
  PredNet net;
  Adam adam;
  Tensor frames;
  std::vector<Tensor*> params, grads;
  Trainer(Backend* b, const PredNetConfig& c) : be(b), net(b, c), adam(b) {}
  Status init() {
    DETAUDIT_RETURN_IF_ERROR(net.init(kInitSeed));
    const PredNetConfig& c = net.config();
    DETAUDIT_RETURN_IF_ERROR(Tensor::from_host(be, {c.nt * c.batch, c.channels(), c.height, c.width},
                                               make_frames(c), &frames));
    params = net.params(), grads = net.grads();
    return Status::ok();
  }
  Status step(double* loss) {
    DETAUDIT_RETURN_IF_ERROR(net.forward(frames, loss));
    DETAUDIT_RETURN_IF_ERROR(net.backward());
    return adam.step(params, grads);
  }
};

// kCheckSteps steps on a fresh model; empty string when every loss is finite and the last is below the first.
std::string check_training(Backend* be) {
  Trainer tr(be, prednet_quick());
  if (Status st = tr.init(); !st) return st.message();
  std::vector<double> curve(kCheckSteps);
  for (double& l : curve)
    if (Status st = tr.step(&l); !st) return st.message();
  for (double v : curve)
    if (!std::isfinite(v)) return "non-finite loss";
  if (!(curve.back() < curve.front()))
    return "loss did not decrease: " + std::to_string(curve.front()) + " -> " + std::to_string(curve.back());
  return "";
}

// Times every op of the backend it wraps, per op and shape (for profiling only: it adds a clock read
// per call). Memory and everything else pass straight through.
class TimingBackend final : public Backend {
 public:
  explicit TimingBackend(Backend* inner) : in_(inner) {}
  std::map<std::string, double> ms;  // accumulated milliseconds per "<op>[ <shape>]"
  std::map<std::string, long> calls;

  std::string name() const override { return in_->name(); }
  void* alloc(size_t bytes) override { return in_->alloc(bytes); }
  void free(void* p) override { in_->free(p); }
  Status upload(void* d, const void* s, size_t b) override { return in_->upload(d, s, b); }
  Status download(void* d, const void* s, size_t b) override { return in_->download(d, s, b); }
  Status zero(void* p, size_t b) override { return time("zero", [&] { return in_->zero(p, b); }); }
  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    return time("gemm", [&] { return in_->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  }
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    return time("conv_fwd " + str(s), [&] { return in_->conv2d_fwd(s, x, w, y); });
  }
  Status conv2d_fwd_bias(const ConvShape& s, const float* x, const float* w, const float* b, float* y) override {
    return time("conv_fwd " + str(s), [&] { return in_->conv2d_fwd_bias(s, x, w, b, y); });
  }
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    return time("conv_bwd_data " + str(s), [&] { return in_->conv2d_bwd_data(s, dy, w, dx); });
  }
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    return time("conv_bwd_filter " + str(s), [&] { return in_->conv2d_bwd_filter(s, x, dy, dw); });
  }
  Status lstm_cell_fwd(const LstmFwdArgs& a) override {
    return time("elementwise", [&] { return in_->lstm_cell_fwd(a); });
  }
  Status lstm_cell_bwd(const LstmBwdArgs& a) override {
    return time("elementwise", [&] { return in_->lstm_cell_bwd(a); });
  }
  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override {
    return time("maxpool", [&] { return in_->maxpool_fwd(s, x, y); });
  }
  Status maxpool_bwd(const PoolShape& s, const float* x, const float* y, const float* dy, float* dx) override {
    return time("maxpool", [&] { return in_->maxpool_bwd(s, x, y, dy, dx); });
  }
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    return time("reduce", [&] { return in_->reduce(op, x, y, n, out); });
  }
  Status unary(UnaryOp op, const float* x, float* y, size_t n) override {
    return time("elementwise", [&] { return in_->unary(op, x, y, n); });
  }
  Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) override {
    return time("elementwise", [&] { return in_->binary(op, a, b, y, n); });
  }
  Status axpy(size_t n, float alpha, const float* x, float* y) override {
    return time("elementwise", [&] { return in_->axpy(n, alpha, x, y); });
  }
  Status bias_add(float* y, const float* b, size_t n, size_t c, size_t hw) override {
    return time("bias", [&] { return in_->bias_add(y, b, n, c, hw); });
  }
  Status bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) override {
    return time("bias", [&] { return in_->bias_grad(dy, db, n, c, hw); });
  }
  Status unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) override {
    return time("elementwise", [&] { return in_->unary_bwd(op, x, y, dy, dx, n); });
  }
  Status upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) override {
    return time("upsample", [&] { return in_->upsample2_fwd(x, y, planes, h, w); });
  }
  Status upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) override {
    return time("upsample", [&] { return in_->upsample2_bwd(dy, dx, planes, h, w); });
  }
  Status copy_2d(size_t rows, size_t cols, const float* src, size_t sld, float* dst, size_t dld) override {
    return time("copy_2d", [&] { return in_->copy_2d(rows, cols, src, sld, dst, dld); });
  }
  Status fill(float* y, float v, size_t n) override { return time("fill", [&] { return in_->fill(y, v, n); }); }
  Status scale(float* y, float a, size_t n) override { return time("elementwise", [&] { return in_->scale(y, a, n); }); }
  Status adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) override {
    return time("adam", [&] { return in_->adam_step(p, w, g, m, v, n); });
  }

 private:
  static std::string str(const ConvShape& s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "n%d_c%d_k%d_%dx%d", s.n, s.c, s.k, s.h, s.w);
    return buf;
  }
  template <typename F>
  Status time(const std::string& key, F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    Status st = f();
    ms[key] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++calls[key];
    return st;
  }
  Backend* in_;
};

std::unique_ptr<Backend> make_backend(ReduceOrder order, ConvAlgo conv) {
  CpuNativeOptions o;
  o.threads = g_threads;
  o.order = order;
  o.conv = conv;
  return make_cpu_native(o);
}

void train_step(benchmark::State& state, ReduceOrder order, ConvAlgo conv = ConvAlgo::kDirect) {
  auto be = make_backend(order, conv);
  state.SetLabel(be->name());
  if (std::string e = check_training(be.get()); !e.empty()) return state.SkipWithError(("check failed: " + e).c_str());
  Trainer tr(be.get(), prednet_quick());
  if (Status st = tr.init(); !st) return state.SkipWithError(st.message().c_str());
  for (auto _ : state) {
    double loss = 0;
    if (Status st = tr.step(&loss); !st) return state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(loss);
  }
  state.counters["ms_per_step"] =
      benchmark::Counter(double(state.iterations()) * 1e3, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The same steps through TimingBackend: per-op milliseconds per step, and "untimed_ms" (the model's own
// host work and the clock reads) as the step time minus the ops.
void profile(benchmark::State& state, ReduceOrder order, ConvAlgo conv = ConvAlgo::kDirect) {
  auto inner = make_backend(order, conv);
  if (std::string e = check_training(inner.get()); !e.empty()) return state.SkipWithError(("check failed: " + e).c_str());
  TimingBackend be(inner.get());
  Trainer tr(&be, prednet_quick());
  if (Status st = tr.init(); !st) return state.SkipWithError(st.message().c_str());
  double loss = 0;
  if (Status st = tr.step(&loss); !st) return state.SkipWithError(st.message().c_str());  // warm-up
  be.ms.clear(), be.calls.clear();
  double total_ms = 0;
  long steps = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = tr.step(&loss); !st) return state.SkipWithError(st.message().c_str());
    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++steps;
  }
  double ops_ms = 0;
  for (const auto& [key, v] : be.ms) {
    state.counters[key + "_ms"] = v / double(steps);
    state.counters[key + "_calls"] = double(be.calls[key]) / double(steps);
    ops_ms += v;
  }
  state.counters["ms_per_step"] = total_ms / double(steps);
  state.counters["untimed_ms"] = (total_ms - ops_ms) / double(steps);
}

void BM_train_step_blocked(benchmark::State& s) { train_step(s, ReduceOrder::kBlocked); }
void BM_train_step_atomic(benchmark::State& s) { train_step(s, ReduceOrder::kAtomic); }
void BM_train_step_winograd_blocked(benchmark::State& s) {
  train_step(s, ReduceOrder::kBlocked, ConvAlgo::kWinograd);
}
void BM_train_step_winograd_atomic(benchmark::State& s) { train_step(s, ReduceOrder::kAtomic, ConvAlgo::kWinograd); }
void BM_profile_blocked(benchmark::State& s) { profile(s, ReduceOrder::kBlocked); }
void BM_profile_winograd_blocked(benchmark::State& s) { profile(s, ReduceOrder::kBlocked, ConvAlgo::kWinograd); }
BENCHMARK(BM_train_step_blocked)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_train_step_atomic)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_train_step_winograd_blocked)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_train_step_winograd_atomic)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_profile_blocked)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();
BENCHMARK(BM_profile_winograd_blocked)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);  // removes its own flags
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    char* end = nullptr;
    const long n = a.rfind("--threads=", 0) == 0 ? std::strtol(argv[i] + 10, &end, 10) : 0;
    if (n > 0 && n <= 1024 && end && *end == '\0') {
      g_threads = int(n);
    } else {
      std::fprintf(stderr, "bench_prednet: unknown argument %s (besides Google Benchmark's: --threads=N)\n", argv[i]);
      return 2;
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
