// fleet.json (detaudit-fleet/1), typed: what a fleet's consensus decided of its nodes. gates/fleet.cpp builds it;
// the CLI's table, the metrics and the fleet report (report/fleet_report.cpp) render it; to_json writes the document
// (schemas/fleet.schema.json).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/verdict.hpp"

namespace detaudit {

inline constexpr const char* kFleetSchema = "detaudit-fleet/1";

// What a finding of the consensus is about; to_string gives its name in fleet.json ("bits", "no_majority", ...).
enum class FleetFindingKind {
  kBits,         // other bits than the group's majority (or its rows computed alone)
  kNoMajority,   // no majority of the group's bits
  kVaries,       // varied where its peers or the reference did not
  kStatus,       // crashed, timed out or skipped where its peers ran
  kReference,    // other bits than the reference's known-good bits of its key
  kOwnCheck,     // its own qualification failed, or failed its promise where the cell is compared as distributions
  kCollective,   // a collective's ranks or repeats gave several results
  kKey,          // alone with its machine key, beside a larger group
  kAnotherPlan,  // ran another level, repeats or workloads than most nodes
  kMissing,      // no folder at all
  kFailed,       // could not run
  kLost,         // did not finish (killed, crashed or lost)
  kInterrupted,  // stopped by a signal it caught
  kNothing,      // finished, but nothing of it could be judged
  kMissingCell,  // a cell its peers of the same key ran is not in its results
  kSlow,         // slower than its group
};
const char* to_string(FleetFindingKind k);

// Where a rank got to; to_string gives its name in node.json and fleet.json.
enum class NodeState {
  kFinished,     // its part ran to the end
  kRunning,      // it did not finish (killed, crashed or lost): its results so far count
  kInterrupted,  // stopped by a signal it caught (exit_code 128 + the signal): its results so far count, and its
                 // command run again resumes it
  kFailed,       // it could not run (detail says why)
  kMissing,      // no folder at all (never written to node.json)
};
const char* to_string(NodeState s);
bool parse_node_state(const std::string& text, NodeState* out);  // false: no state of a node

// One thing the consensus found, about one node (and one cell, when it is about a cell).
struct FleetFinding {
  Verdict verdict = Verdict::kFail;
  FleetFindingKind kind = FleetFindingKind::kBits;
  Action action = Action::kIsolate;  // fleet_action(kind)
  int rank = -1;
  std::string host, cell, detail;                  // detail: one line
  nlohmann::json data = nlohmann::json::object();  // the values the detail names (fingerprints, ratios, fields)
};

// One node's row: its state, machine key, cells, verdict and the most urgent action among its findings.
struct FleetNodeRow {
  int rank = -1;
  std::string host, folder;
  NodeState state = NodeState::kRunning;
  std::string key;  // its machine key's hash ("" when it recorded none)
  size_t cells = 0, cells_agreeing = 0;
  int exit_code = -1;                // what its own process exited with (node.json's)
  std::optional<double> time_ratio;  // its time against its group's; none where it was not timed
  Verdict verdict = Verdict::kPass;  // FAIL, WARN or PASS by its findings
  std::optional<Action> action;
  std::string summary;  // its findings in a few words
  size_t findings = 0;
};

// The nodes of one machine key.
struct FleetGroup {
  std::string key;                                   // the key's hash
  nlohmann::json fields = nlohmann::json::object();  // the key's fields, "name": "value"
  std::vector<int> ranks;
  bool reference = false;  // the largest group: the one a node alone with its key is compared with
};

// One collective (workload, library and algorithm) across the ranks.
struct FleetCollective {
  std::string workload, library, algorithm;
  int ranks = 0;
  size_t nodes = 0, errors = 0, distinct = 0;
  Verdict verdict = Verdict::kPass;  // FAIL: several results, or an error
  std::string fingerprint;           // the one result, when there is one
  size_t distinct_across_algorithms = 0;
};

// The known-good bits the fleet was judged by and the ones it wrote (the CLI fills it).
struct FleetReferenceUse {
  std::optional<std::string> judged_by, warning;
  std::string written;
  size_t cells = 0, keys = 0;
};

struct FleetOutcome {
  std::string tool_version, tool_commit, created_at, dir;
  int ranks = 0, level = 1;
  Decision decision = Decision::kNotJudged;  // PASS consensus; FAIL a node disagrees or failed; nothing could run
  std::string summary;
  std::vector<FleetGroup> groups;
  std::vector<FleetNodeRow> nodes;
  std::vector<FleetFinding> findings;  // FAIL first, then WARN
  // The cells, disagreeing ones first, and matrix[node][cell]: agree, differs, varies, failed, missing,
  // nondeterministic or alone.
  std::vector<std::string> cells;
  std::vector<std::vector<std::string>> matrix;
  size_t cells_differing = 0;
  std::vector<FleetCollective> collectives;
  std::optional<std::vector<std::string>> ignored_folders;  // folders of earlier runs left out (fleet report)
  std::optional<FleetReferenceUse> reference;
};

nlohmann::json to_json(const FleetOutcome& f);

}  // namespace detaudit
