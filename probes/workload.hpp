// A workload bound to a backend: inputs generated from the seed, uploaded once; run() executes one
// repeat into the output buffer. The same code runs the oracle and every target.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "contract/observation.hpp"
#include "probes/spec.hpp"

namespace detaudit {

// The shape of a conv2d workload spec, with the workload table's defaults (probes/spec.cpp) for any key the
// spec lacks (parse_workload fills them in, so a parsed spec has them all).
ConvShape conv_shape_of(const Spec& conv2d);

class Workload {
 public:
  virtual ~Workload() = default;
  // Build from a validated workload spec (parse_workload). Never fails for a validated spec.
  static std::unique_ptr<Workload> create(const Spec& spec);

  const Spec& spec() const { return spec_; }
  bool is_f64() const { return f64_; }
  size_t output_elems() const { return out_elems_; }
  size_t output_bytes() const { return out_elems_ * (f64_ ? 8 : 4); }

  // Allocate on the backend and upload the inputs.
  virtual Status setup(Backend& b) = 0;
  // One repeat: the output is zeroed, then the op runs; synchronised on return.
  virtual Status run(Backend& b) = 0;
  // Batch invariance (batchinv only): after run(), recompute sampled rows alone and compare bitwise.
  virtual Status batch_check(Backend& b, BatchInvariance* out) { return Status::unsupported("not a batchinv workload"); }
  // The error bound of the oracle's output: the most a correct kernel, in any summation order
  // and any blocking, may differ from the oracle, per output element; each op's derivation is in
  // workload.cpp. `oracle` is cpu-ref's output (output_bytes()); `ref` is cpu-ref, on which the bound
  // runs what it needs (the op on |inputs|) in workloads of its own: this one need not be set up.
  virtual Status error_bound(Backend& ref, const void* oracle, ErrorBound* out) const;
  void* output() const { return out_; }
  // Fingerprint of every input uploaded by setup(), in order: what the oracle cache is keyed by.
  Fingerprint input_fingerprint() const { return fingerprint_bytes(input_hashes_.data(), input_hashes_.size()); }
  void teardown(Backend& b);

  // The accumulation length k of the bound: the most terms summed into one output element.
  virtual int64_t bound_k() const = 0;
 protected:
  explicit Workload(const Spec& s) : spec_(s) {}
  Status upload_floats(Backend& b, const std::vector<float>& v, void** out);
  Status upload_doubles(Backend& b, const std::vector<double>& v, void** out);
  Status alloc_zero(Backend& b, size_t bytes, void** out);
  // An operand of the op as setup() uploads it: its absolute values in a magnitude run (error_bound).
  template <typename T>
  std::vector<T> operand(std::vector<T> v) const;
  // The bound of a sum of k products from the magnitude run (see workload.cpp).
  Status sum_bound(Backend& ref, ErrorBound* out) const;

  Spec spec_;
  bool f64_ = false;
  size_t out_elems_ = 0;
  void* out_ = nullptr;
  std::vector<void*> buffers_;  // everything allocated on the backend, freed by teardown
  std::string input_hashes_;    // hex fingerprints of the inputs, in upload order
  bool magnitude_ = false;      // setup() uploads |operands|: the magnitude run of the error bound
};

// The accuracy the softmax bound assumes of the exp (expf) a target calls, in ulps of the result: glibc's
// expf is within 1 ulp (0.502 since glibc 2.28), CUDA's expf within 2 (CUDA C++ Programming Guide,
// single-precision mathematical functions; no fast math here). oneDNN's vectorised exp (2^n·p(r), a
// polynomial) is JIT-generated per ISA (AVX-512, AVX2, SSE4.1), and its error may differ between them:
// on the arguments softmax gives it, oneDNN 2.6 measured within 2 ulps of the correctly rounded value
// on the AVX-512 path, and on the AVX2 and SSE4.1 ones (forced with ONEDNN_MAX_CPU_ISA), but that is a
// measurement, not a promise: tests/test_error_bound.cpp checks it against this constant (not against
// 2) on whichever path the machine takes. 4 leaves room for other versions and other vendors' vector
// exps; a kernel less accurate than that is outside the bound.
inline constexpr double kSoftmaxExpUlps = 4;

// Runs the workload once on cpu-ref and returns the output bytes (and the inputs' fingerprint, and the
// output's error bound).
Status compute_oracle(const Spec& workload, std::vector<uint8_t>* out, Fingerprint* inputs = nullptr,
                      ErrorBound* bound = nullptr);

// Host memory one worker needs for a workload, in bytes, estimated from the spec before anything is
// allocated: the inputs (generated on the host, then copied into the backend), the output (on the
// backend, a host copy, and the oracle's output it is compared with), the oracle's own double
// accumulators and its error bound (a double per output element, computed with the oracle by a
// second run of the op on |inputs| and read by every worker), and the workspace of the largest kernel
// (im2col panels of a convolution, gemm packing).
struct MemoryEstimate {
  double inputs = 0, outputs = 0, oracle = 0, workspace = 0;
  double total() const { return inputs + outputs + oracle + workspace; }
};
MemoryEstimate estimate_memory(const Spec& workload);

// Memory this process may still use: MemAvailable of /proc/meminfo, or the cgroup's memory.max less
// its memory.current when that is lower. *source says which. 0 when neither can be read.
uint64_t available_memory_bytes(std::string* source);

}  // namespace detaudit
