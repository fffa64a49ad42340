// What the backend entries of probes/backends/*.cpp share: the promise builders, the requirement of a CUDA
// device, and the device kinds' entries (each backend's own entry is declared where probes/registry.cpp lists it).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "probes/registry.hpp"

namespace detaudit {

using RunToRun = Promise::RunToRun;

inline constexpr double kTf32UnitRoundoff = 0.00048828125;  // 2^-11: TF32 keeps 10 of FP32's 23 mantissa bits
// The requirement of every target of a CUDA backend (promise_for checks it against the machine's "gpus").
inline constexpr const char* kCudaDevice = "a CUDA device";
// cpu?order=portable and cuda:N?order=portable promise each other's bits.
inline constexpr const char* kPortableClass = "order=portable";

inline Promise deterministic(std::string source, std::string equality_class = "") {
  Promise p;
  p.run_to_run = RunToRun::kDeterministic;
  p.run_to_run_source = std::move(source);
  p.equality_class = std::move(equality_class);
  return p;
}
inline Promise nondeterministic(std::string source) {
  Promise p;
  p.run_to_run = RunToRun::kNondeterministic;
  p.run_to_run_source = std::move(source);
  return p;
}
inline Promise nothing(std::string source) {
  Promise p;
  p.run_to_run_source = std::move(source);
  return p;
}

inline bool always(const Spec&, const Spec&) { return true; }
// cpu?order=portable and cuda:N?order=portable: one implementation on every CPU and GPU (kernels/portable.hpp).
inline bool order_portable(const Spec& t) { return t.get("order", "") == "portable"; }
inline int threads_of(const Spec& t) { return int(t.get_int("threads", 1)); }

// A CUDA backend opened through its own kernels (kernels/cuda/<name>_backend.cpp: a GpuKernels each entry names,
// null in a build without CUDA, which then says so).
struct GpuKernels;
BackendOr make_gpu_target(const Spec& t, const GpuKernels* kernels);
// The machine's CUDA stack, queried once per process (each CUDA backend reads its library's version).
struct CudaEnvironment;
const CudaEnvironment& cuda_stack();

// Each file of probes/backends/ defines its entry, BackendEntry <name>_backend(), which probes/registry.cpp declares
// and lists. The device kinds: the host's in cpu.cpp, CUDA's in cuda.cpp.
DeviceKindEntry host_device_kind();
DeviceKindEntry cuda_device_kind();

}  // namespace detaudit
