// A machine's key: the hash of its hardware identity, as the history, baselines and qualify name a machine.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "contract/results.hpp"

namespace detaudit {

// Hash of the hardware identity of results.json's machine object, 16 hex digits. Missing fields count as empty, so
// any object has a key.
std::string machine_key(const nlohmann::json& machine);
// What the key hashes, as canonical JSON: {"cpu_model", "cpu_features", "cores", "gpus": [{"name",
// "compute_capability", "sm_count"}]}.
nlohmann::json machine_identity(const nlohmann::json& machine);
// The software a run ran with: {"tool_version", "tool_commit", "os", "compiler", "hwloc", "libraries"}.
nlohmann::json software_of(const Results& r);

}  // namespace detaudit
