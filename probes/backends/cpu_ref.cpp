// cpu-ref: the oracle (kernels/cpu/ref.cpp).
#include "probes/backends/common.hpp"

#include "kernels/cpu/ref.hpp"

namespace detaudit {

namespace {

Promise promise_cpu_ref(const Spec&, const Spec&, const std::map<std::string, std::string>&) {
  // One thread, a fixed order, double accumulation (kernels/cpu/ref.cpp); each output row of a gemm is
  // its own loop over k, so a row's value cannot depend on the rows around it.
  Promise p = deterministic("detaudit: cpu-ref runs one thread in a fixed order", "cpu-ref");
  p.batch_invariance_claimed = true;
  return p;
}

BackendOr make_cpu_ref_backend(const Spec&) { return make_cpu_ref(); }

}  // namespace

BackendEntry cpu_ref_backend() {
  BackendEntry e;
  e.name = "cpu-ref";
  e.oracle = true;
  e.trains = true;
  e.make = make_cpu_ref_backend;
  e.made_here = true;
  e.summary = "the oracle: fixed order, double accumulation, one thread";
  e.applicable = always;
  e.promise = promise_cpu_ref;
  e.build = {"compiler", "glibc"};  // its double arithmetic and libm, as built
  e.suite_targets = [](const std::string&) { return std::vector<SuiteTarget>{{"cpu-ref"}}; };
  return e;
}

}  // namespace detaudit
