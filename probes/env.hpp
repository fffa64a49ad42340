// The machine's fingerprint: CPU topology (hwloc), OS, compiler, library versions, GPUs.
#pragma once
#include <nlohmann/json.hpp>

namespace detaudit {

// Never fails: parts that cannot be read say why. Includes "gpus" and "cuda" ("available" or
// "no CUDA device: <reason>").
nlohmann::json machine_fingerprint();

}  // namespace detaudit
