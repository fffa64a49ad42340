#include "probes/targets.hpp"

#include <csignal>
#include <thread>

#include "kernels/cpu/native.hpp"
#include "kernels/cpu/ref.hpp"
#include "kernels/cpu/vendor.hpp"
#include "kernels/cuda/cuda.hpp"

namespace detaudit {

std::map<std::string, std::string> target_environment(const Spec& t) {
  std::map<std::string, std::string> env;
  std::string threads = t.get("threads", "1");
  // determinism: every library's thread count is pinned, so no target inherits the caller's.
  env["OMP_NUM_THREADS"] = threads;
  env["OPENBLAS_NUM_THREADS"] = threads;
  if (t.name == "openblas") {
    std::string core = t.get("core", "auto");
    env["OPENBLAS_CORETYPE"] = core == "auto" ? "" : core;
  }
  if (t.name == "onednn") {
    env["ONEDNN_MAX_CPU_ISA"] = t.get("isa", "ALL");
    env["DNNL_MAX_CPU_ISA"] = t.get("isa", "ALL");
  }
  return env;
}

namespace {

// Test-only target: its ops fault on purpose, so the worker isolation can be tested on real signals.
class FaultBackend : public Backend {
 public:
  explicit FaultBackend(std::string fault) : fault_(std::move(fault)) {}
  std::string name() const override { return "testing?fault=" + fault_; }
  Status fault() {
    if (fault_ == "segv") {
      volatile int* p = nullptr;
      *p = 1;  // a real invalid access
    } else if (fault_ == "ill") {
      __builtin_trap();  // ud2: SIGILL on x86-64
    } else if (fault_ == "abort") {
      std::abort();
    } else if (fault_ == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return Status::ok();
  }
  Status gemm(Trans, Trans, int m, int n, int, float, const float*, int, const float*, int, float, float* c,
              int) override {
    DETAUDIT_RETURN_IF_ERROR(fault());
    for (int i = 0; i < m * n; ++i) c[i] = 0;
    return Status::ok();
  }
  Status reduce(ReduceOp, const float*, const float*, size_t, float* out) override {
    DETAUDIT_RETURN_IF_ERROR(fault());
    *out = 0;
    return Status::ok();
  }

 private:
  std::string fault_;
};

}  // namespace

std::unique_ptr<Backend> make_target_backend(const Spec& t, Status* st) {
  *st = Status::ok();
  int threads = int(t.get_int("threads", 1));
  if (t.name == "cpu-ref") return make_cpu_ref();
  if (t.name == "cpu") {
    CpuNativeOptions o;
    o.threads = threads;
    parse_reduce_order(t.get("order", "blocked"), &o.order);
    parse_cpu_isa(t.get("isa", "auto"), &o.isa);
    return make_cpu_native(o);
  }
  if (t.name == "openblas") return make_openblas(OpenblasOptions{threads}, st);
  if (t.name == "onednn")
    return make_onednn(OnednnOptions{threads},
                       t.get("layout", "plain") == "blocked" ? OnednnConvLayout::kBlocked : OnednnConvLayout::kPlain, st);
  if (t.name == "testing") return std::make_unique<FaultBackend>(t.get("fault", "none"));
  if (is_gpu_backend(t.name)) {
    std::map<std::string, std::string> params(t.params.begin(), t.params.end());
    return make_gpu_backend(t.name, t.device, params, st);
  }
  *st = Status::invalid("unknown target " + t.name);
  return nullptr;
}

}  // namespace detaudit
