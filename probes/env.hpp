// The machine's fingerprint: CPU topology (hwloc), OS, compiler, library versions, GPUs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/status.hpp"
#include "contract/cpu_place.hpp"

namespace detaudit {

// Never fails: parts that cannot be read say why. Includes "gpus" and "cuda" ("available" or
// "no CUDA device: <reason>").
nlohmann::json machine_fingerprint();
// The compiler this binary was built with: "gcc 12.2.0", "clang 14.0.6".
std::string compiler_string();

// The logical CPUs this process may run on (its affinity mask: a cgroup's or taskset's limit holds), in their
// order, with their cores and packages (hwloc; without it, /sys/devices/system/cpu). Never empty.
std::vector<CpuPlace> allowed_cpus();
// Binds the calling thread to one logical CPU (sched_setaffinity of the thread, as hwloc's thread binding). A process
// the thread then starts inherits the binding, and so do that process's threads.
Status bind_thread_to_cpu(int cpu);

}  // namespace detaudit
