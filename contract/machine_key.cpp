#include "contract/machine_key.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include "contract/json_fields.hpp"
#include "kernels/fingerprint.hpp"

namespace detaudit {

namespace jf = json_fields;

nlohmann::json machine_identity(const nlohmann::json& machine) {
  nlohmann::json features = nlohmann::json::array();
  if (machine.is_object() && machine.contains("cpu_features") && machine["cpu_features"].is_array()) {
    std::set<std::string> f;  // each once, in order
    for (auto& x : machine["cpu_features"])
      if (x.is_string()) f.insert(x.get<std::string>());
    for (auto& x : f) features.push_back(x);
  }
  std::vector<nlohmann::json> gpus;
  if (machine.is_object() && machine.contains("gpus") && machine["gpus"].is_array())
    for (auto& g : machine["gpus"])
      gpus.push_back({{"name", jf::str_or_json(g, "name")},
                      {"compute_capability", jf::str_or_json(g, "compute_capability")},
                      {"sm_count", jf::int_part(g, "sm_count")}});
  std::sort(gpus.begin(), gpus.end(), [](auto& a, auto& b) { return a.dump() < b.dump(); });
  return {{"cpu_model", jf::str_or_json(machine, "cpu_model")},
          {"cpu_features", features},
          {"cores", jf::int_part(machine, "cores")},
          {"gpus", gpus}};
}

std::string machine_key(const nlohmann::json& machine) {
  std::string canon = machine_identity(machine).dump();
  return fingerprint_bytes(canon.data(), canon.size()).hex().substr(0, 16);
}

nlohmann::json software_of(const Results& r) {
  nlohmann::json libs = r.machine.is_object() && r.machine.contains("libraries") && r.machine["libraries"].is_object()
                            ? r.machine["libraries"]
                            : nlohmann::json::object();
  return {{"tool_version", r.tool_version}, {"tool_commit", r.tool_commit}, {"os", jf::str_or_json(r.machine, "os")},
          {"compiler", jf::str_or_json(r.machine, "compiler")}, {"hwloc", jf::str_or_json(r.machine, "hwloc")},
          {"libraries", libs}};
}

}  // namespace detaudit
