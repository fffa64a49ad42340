#include "contract/health_outcome.hpp"

namespace detaudit {

const char* to_string(HealthFindingKind k) {
  switch (k) {
    case HealthFindingKind::kBits: return "bits";
    case HealthFindingKind::kRows: return "rows";
    case HealthFindingKind::kCrashed: return "crashed";
    case HealthFindingKind::kError: return "error";
  }
  return "?";
}

nlohmann::json to_json(const HealthOutcome& h) {
  nlohmann::json findings = nlohmann::json::array();
  for (auto& f : h.findings) {
    nlohmann::json x = {{"kind", to_string(f.kind)}, {"action", to_string(f.action)}, {"workload", f.workload},
                        {"target", f.target},       {"reference", f.reference},        {"here", f.here},
                        {"line", f.line},           {"times", f.times}};
    if (f.gpu >= 0)
      x.update({{"gpu", f.gpu}, {"uuid", f.gpu_uuid}});
    else
      x.update({{"logical_cpu", f.place.cpu}, {"core", f.place.core}, {"package", f.place.package}});
    findings.push_back(std::move(x));
  }
  nlohmann::json lanes = nlohmann::json::array();
  for (auto& l : h.lanes) {
    nlohmann::json x = {{"cells", l.cells}, {"backends", l.backends}, {"not_finished", l.not_finished}};
    if (l.gpu >= 0)
      x["gpu"] = l.gpu;
    else
      x.update({{"logical_cpu", l.place.cpu}, {"core", l.place.core}, {"package", l.place.package}});
    lanes.push_back(std::move(x));
  }
  nlohmann::json j = {{"schema", kHealthSchema}, {"status", h.status},     {"line", h.line},
                      {"key", h.key},            {"cells", h.cells},       {"cut", h.cut},
                      {"not_reached", h.not_reached}, {"seconds", h.seconds}, {"budget_s", h.budget_s},
                      {"lanes", lanes},          {"gflop", h.gflop},       {"gflop_per_s", h.gflop_per_s},
                      {"findings", findings}};
  if (h.reference) j["reference"] = *h.reference;
  if (h.host) j["host"] = *h.host;
  if (h.history) j["history"] = *h.history;
  if (h.total_seconds) j["total_seconds"] = *h.total_seconds;
  if (h.slurm) j["slurm"] = *h.slurm;
  return j;
}

}  // namespace detaudit
