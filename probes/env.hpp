// The machine's fingerprint: CPU topology (hwloc), OS, compiler, library versions, GPUs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace detaudit {

// Never fails: parts that cannot be read say why. Includes "gpus" and "cuda" ("available" or
// "no CUDA device: <reason>").
nlohmann::json machine_fingerprint();
// The compiler this binary was built with: "gcc 12.2.0", "clang 14.0.6".
std::string compiler_string();

}  // namespace detaudit
