#include "contract/fleet_outcome.hpp"

namespace detaudit {

const char* to_string(FleetFindingKind k) {
  switch (k) {
    case FleetFindingKind::kBits: return "bits";
    case FleetFindingKind::kNoMajority: return "no_majority";
    case FleetFindingKind::kVaries: return "varies";
    case FleetFindingKind::kStatus: return "status";
    case FleetFindingKind::kReference: return "reference";
    case FleetFindingKind::kOwnCheck: return "own_check";
    case FleetFindingKind::kCollective: return "collective";
    case FleetFindingKind::kKey: return "key";
    case FleetFindingKind::kAnotherPlan: return "another_plan";
    case FleetFindingKind::kMissing: return "missing";
    case FleetFindingKind::kFailed: return "failed";
    case FleetFindingKind::kLost: return "lost";
    case FleetFindingKind::kInterrupted: return "interrupted";
    case FleetFindingKind::kNothing: return "nothing";
    case FleetFindingKind::kMissingCell: return "missing_cell";
    case FleetFindingKind::kSlow: return "slow";
  }
  return "?";
}

const char* to_string(NodeState s) {
  switch (s) {
    case NodeState::kFinished: return "finished";
    case NodeState::kRunning: return "running";
    case NodeState::kInterrupted: return "interrupted";
    case NodeState::kFailed: return "failed";
    case NodeState::kMissing: return "missing";
  }
  return "?";
}

bool parse_node_state(const std::string& text, NodeState* out) {
  for (NodeState s : {NodeState::kFinished, NodeState::kRunning, NodeState::kInterrupted, NodeState::kFailed,
                      NodeState::kMissing})
    if (text == to_string(s)) return *out = s, true;
  return false;
}

nlohmann::json to_json(const FleetOutcome& f) {
  nlohmann::json j;
  j["schema"] = kFleetSchema;
  j["tool_version"] = f.tool_version;
  j["tool_commit"] = f.tool_commit;
  j["created_at"] = f.created_at;
  j["dir"] = f.dir;
  j["ranks"] = f.ranks;
  j["level"] = f.level;
  j["verdict"] = to_string(f.decision);
  j["exit_code"] = exit_code_of(f.decision);
  j["summary"] = f.summary;
  nlohmann::json groups = nlohmann::json::array();
  for (auto& g : f.groups)
    groups.push_back({{"key", g.key}, {"fields", g.fields}, {"ranks", g.ranks}, {"reference", g.reference}});
  j["groups"] = groups;
  nlohmann::json nodes = nlohmann::json::array();
  for (auto& n : f.nodes)
    nodes.push_back({{"rank", n.rank},
                     {"host", n.host},
                     {"folder", n.folder},
                     {"state", to_string(n.state)},
                     {"key", n.key},
                     {"cells", n.cells},
                     {"cells_agreeing", n.cells_agreeing},
                     {"exit_code", n.exit_code},
                     {"time_ratio", n.time_ratio ? nlohmann::json(*n.time_ratio) : nlohmann::json()},
                     {"verdict", to_string(n.verdict)},
                     {"action", n.action ? nlohmann::json(to_string(*n.action)) : nlohmann::json()},
                     {"summary", n.summary},
                     {"findings", n.findings}});
  j["nodes"] = nodes;
  nlohmann::json findings = nlohmann::json::array();
  for (auto& x : f.findings)
    findings.push_back({{"verdict", to_string(x.verdict)},
                        {"kind", to_string(x.kind)},
                        {"action", to_string(x.action)},
                        {"rank", x.rank},
                        {"host", x.host},
                        {"cell", x.cell},
                        {"detail", x.detail},
                        {"data", x.data}});
  j["findings"] = findings;
  j["cells"] = f.cells;
  j["matrix"] = f.matrix;
  j["cells_differing"] = f.cells_differing;
  nlohmann::json collectives = nlohmann::json::array();
  for (auto& c : f.collectives)
    collectives.push_back({{"workload", c.workload},
                           {"library", c.library},
                           {"algorithm", c.algorithm},
                           {"ranks", c.ranks},
                           {"nodes", c.nodes},
                           {"errors", c.errors},
                           {"distinct", c.distinct},
                           {"verdict", to_string(c.verdict)},
                           {"fingerprint", c.fingerprint},
                           {"distinct_across_algorithms", c.distinct_across_algorithms}});
  j["collectives"] = collectives;
  if (f.ignored_folders) j["ignored_folders"] = *f.ignored_folders;
  if (f.reference)
    j["reference"] = {{"judged_by", f.reference->judged_by ? nlohmann::json(*f.reference->judged_by) : nlohmann::json()},
                      {"warning", f.reference->warning ? nlohmann::json(*f.reference->warning) : nlohmann::json()},
                      {"written", f.reference->written},
                      {"cells", f.reference->cells},
                      {"keys", f.reference->keys}};
  return j;
}

}  // namespace detaudit
