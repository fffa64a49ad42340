// A workload bound to a backend: inputs generated from the seed, uploaded once; run() executes one
// repeat into the output buffer. The same code runs the oracle and every target.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "probes/observation.hpp"
#include "probes/spec.hpp"

namespace detaudit {

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
  void* output() const { return out_; }
  // Fingerprint of every input uploaded by setup(), in order: what the oracle cache is keyed by.
  Fingerprint input_fingerprint() const { return fingerprint_bytes(input_hashes_.data(), input_hashes_.size()); }
  void teardown(Backend& b);

 protected:
  explicit Workload(const Spec& s) : spec_(s) {}
  void* upload_floats(Backend& b, const std::vector<float>& v, Status* st);
  void* upload_doubles(Backend& b, const std::vector<double>& v, Status* st);
  void* alloc_zero(Backend& b, size_t bytes, Status* st);

  Spec spec_;
  bool f64_ = false;
  size_t out_elems_ = 0;
  void* out_ = nullptr;
  std::vector<void*> buffers_;  // everything allocated on the backend, freed by teardown
  std::string input_hashes_;    // hex fingerprints of the inputs, in upload order
};

// Runs the workload once on cpu-ref and returns the output bytes (and the inputs' fingerprint).
Status compute_oracle(const Spec& workload, std::vector<uint8_t>* out, Fingerprint* inputs = nullptr);

// Host memory one worker needs for a workload, in bytes, estimated from the spec before anything is
// allocated: the inputs (generated on the host, then copied into the backend), the output (on the
// backend, a host copy, and the oracle's output it is compared with), the oracle's own double
// accumulators, and the workspace of the largest kernel (im2col panels of a convolution, gemm packing).
struct MemoryEstimate {
  double inputs = 0, outputs = 0, oracle = 0, workspace = 0;
  double total() const { return inputs + outputs + oracle + workspace; }
};
MemoryEstimate estimate_memory(const Spec& workload);

// Memory this process may still use: MemAvailable of /proc/meminfo, or the cgroup's memory.max less
// its memory.current when that is lower. *source says which. 0 when neither can be read.
uint64_t available_memory_bytes(std::string* source);

}  // namespace detaudit
