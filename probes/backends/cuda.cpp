// cuda: detaudit's native CUDA kernels (kernels/cuda/native_*), and the CUDA device kind: what the machine
// fingerprint says of the CUDA stack and its GPUs.
#include "probes/backends/common.hpp"

#include <fmt/format.h>

#include "contract/json_fields.hpp"
#include "kernels/cuda/cuda.hpp"

namespace detaudit {

#if defined(DETAUDIT_HAVE_CUDA)
extern const GpuKernels kCudaNativeKernels;  // kernels/cuda/native_backend.cpp
#endif

const CudaEnvironment& cuda_stack() {
  static const CudaEnvironment env = query_cuda_environment();
  return env;
}

BackendOr make_gpu_target(const Spec& t, const GpuKernels* kernels) {
  std::map<std::string, std::string> params(t.params.begin(), t.params.end());
  return make_gpu_backend(t.name, kernels, t.device, params);
}

namespace {

Promise promise_cuda(const Spec& t, const Spec&, const std::map<std::string, std::string>&) {
  const std::string order = t.get("order", "tree");
  Promise p = order == "atomic"
                  ? nondeterministic("detaudit: order=atomic adds partial sums with atomicAdd in completion order")
              : order == "portable"
                  ? deterministic("detaudit: order=portable computes kernels/portable.hpp's operations and trees, the "
                                  "bits of cpu?order=portable",
                                  kPortableClass)
                  : deterministic("detaudit: order=tree combines partial sums in a fixed tree");
  if (order == "portable") p.batch_invariance_claimed = true;
  p.requirements = {kCudaDevice};
  return p;
}

Status variants_cuda(Spec* d, Spec* n) {
  if (d->get("order", "tree") != "portable") d->set("order", "tree");
  n->set("order", "atomic");
  return Status::ok();
}

std::vector<SuiteTarget> suite_targets_cuda(const std::string&) {
  return {{"cuda:0?order=tree"}, {"cuda:0?order=atomic"}};
}

void describe_cuda_machine(nlohmann::json* m) {
  const CudaEnvironment& cuda = cuda_stack();
  nlohmann::json& libs = (*m)["libraries"];
  libs["cuda_built"] = built_with_cuda();
  if (cuda.runtime_version) libs["cuda_runtime"] = cuda.runtime_version;
  if (cuda.driver_version) libs["cuda_driver"] = cuda.driver_version;
  if (!cuda.nccl_version.empty()) libs["nccl"] = cuda.nccl_version;
  if (!cuda.cupti_version.empty()) libs["cupti"] = cuda.cupti_version;
  (*m)[kCudaMachineKey] = cuda.available ? std::string("available") : "no CUDA device: " + cuda.reason;
  nlohmann::json gpus = nlohmann::json::array();
  for (auto& g : cuda.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"uuid", g.uuid},
                    {"pci_bus_id", g.pci_bus_id},
                    {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)},
                    {"sm_count", g.sm_count},
                    {"memory_bytes", g.memory_bytes},
                    {"l2_bytes", g.l2_bytes},
                    {"clock_khz", g.clock_khz},
                    {"memory_clock_khz", g.memory_clock_khz},
                    {"memory_bus_width", g.memory_bus_width},
                    {"ecc", g.ecc}});
  (*m)["gpus"] = gpus;
}

Status cuda_availability(const nlohmann::json& machine) {
  auto it = machine.find("gpus");
  if (it != machine.end() && it->is_array() && !it->empty()) return Status::ok();
  return Status::unavailable(machine.value(kCudaMachineKey, std::string("no CUDA device")));
}

// A baseline entry of a CUDA target is keyed by its GPU.
void baseline_key_cuda(const nlohmann::json& machine, int device, nlohmann::json* k) {
  (*k)["kind"] = "gpu";
  if (device < 0) device = 0;
  for (auto& g : json_fields::array(machine, "gpus"))
    if (json_fields::integer(g, "index", -1) == device) {
      (*k)["gpu_name"] = json_fields::str(g, "name", "(unknown)");
      (*k)["compute_capability"] = json_fields::str(g, "compute_capability", "(unknown)");
      (*k)["sm_count"] = json_fields::integer(g, "sm_count", 0);
      return;
    }
  (*k)["gpu_name"] = "(none)";  // no such device on this machine: the cell was skipped
}

}  // namespace

BackendEntry cuda_backend() {
  BackendEntry e;
  e.name = "cuda";
  e.keys = {key_one_of("order", "tree", {"tree", "atomic", "portable"})};
#if defined(DETAUDIT_HAVE_CUDA)
  e.make = [](const Spec& t) { return make_gpu_target(t, &kCudaNativeKernels); };
#else
  e.make = [](const Spec& t) { return make_gpu_target(t, nullptr); };
#endif
  e.device = DeviceKind::kCuda;
  e.summary = "native CUDA kernels; tree (deterministic), atomic, or portable (the bits of cpu?order=portable)";
  e.libraries = {"cuda_runtime", "cuda_driver"};
  e.applicable = always;
  e.promise = promise_cuda;
  e.variants = variants_cuda;
  e.trains = true;
  e.portable = order_portable;
  e.suite_targets = suite_targets_cuda;
  return e;
}

DeviceKindEntry cuda_device_kind() {
  DeviceKindEntry k;
  k.kind = DeviceKind::kCuda;
  k.name = "cuda";
  k.describe_machine = describe_cuda_machine;
  k.machine_keys = {kCudaMachineKey};
  k.availability = cuda_availability;
  k.baseline_key = baseline_key_cuda;
  return k;
}

}  // namespace detaudit
