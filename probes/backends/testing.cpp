// testing (hidden): a worker that faults on purpose, for the tests of the worker isolation.
#include "probes/backends/common.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

namespace detaudit {

namespace {

Promise promise_testing(const Spec&, const Spec&, const std::map<std::string, std::string>&) {
  return nothing("test-only backend: nothing is promised");
}

// op of this process fails (as every CUDA call does after an illegal address) and context_state says so.
class FaultBackend : public Backend {
 public:
  explicit FaultBackend(std::string fault) : fault_(std::move(fault)) {}
  std::string name() const override { return "testing?fault=" + fault_; }
  Status fault() {
    if (lost_) return Status::error("testing: an earlier sticky fault lost the context");
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
  Status context_state() override { return lost_ ? Status::error("testing: sticky fault") : Status::ok(); }
  Status gemm(Trans, Trans, int m, int n, int, float, const float*, int, const float*, int, float, float* c,
              int) override {
    DETAUDIT_RETURN_IF_ERROR(fault());
    if (fault_ == "sticky") {
      lost_ = true;
      return Status::error("testing: sticky fault in gemm");
    }
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
  bool lost_ = false;
};
BackendOr make_testing_backend(const Spec& t) { return std::make_unique<FaultBackend>(t.get("fault", "none")); }

}  // namespace

BackendEntry testing_backend() {
  BackendEntry e;
  e.name = "testing";
  e.keys = {key_one_of("fault", "none", {"none", "segv", "ill", "abort", "hang", "sticky"})};
  e.make = make_testing_backend;
  e.summary = "test-only: a worker that faults on purpose";
  e.hidden = true;
  e.applicable = always;
  e.promise = promise_testing;
  return e;
}

}  // namespace detaudit
