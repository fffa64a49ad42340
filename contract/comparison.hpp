// What `compare` found between two results directories (gates/compare.hpp compares, report/compare_report.hpp
// renders).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/cells.hpp"

namespace detaudit {

// One workload x target cell. `same` means the same status and the same set of fingerprints. `varies`:
// both ran (ok) and their sets differ, but the cell is nondeterministic (more than one output on either
// side, or its target promises nondeterminism), so a different set is what the target does, not a
// change; it is listed, and does not count as a difference. A target that promises determinism never
// "varies": more outputs than one is a change.
struct CellComparison {
  enum class Kind { kSame, kChanged, kOnlyA, kOnlyB, kVaries };
  Kind kind = Kind::kSame;
  std::string workload, target;
  // Per side (empty when absent there): status, sorted distinct fingerprints, distinct count.
  std::string status_a, status_b;
  std::vector<std::string> fps_a, fps_b;
  int distinct_a = 0, distinct_b = 0;
  bool promised_nondeterministic = false;  // the target's promise on A's machine (or B's, for B-only cells)
  bool promised_deterministic = false;
};
const char* to_string(CellComparison::Kind k);  // "same bits", "changed", "only in A", "only in B", "varies"

// A machine or software field whose value differs ("libraries.openblas", "gpus[0].name", "tool_commit").
struct FieldDifference {
  std::string field, a, b;  // values as text; "(absent)" where one side lacks the field
};

struct Comparison {
  std::string a, b;  // the directories
  std::vector<CellComparison> cells;  // A's order, then B-only cells in B's order
  std::vector<FieldDifference> differences;
  // Per workload, the targets of both runs tagged "target@A" / "target@B", grouped by fingerprint set.
  std::vector<WorkloadGroups> groups;
  int same = 0, changed = 0, only_a = 0, only_b = 0, varies = 0;
  bool cells_differ() const { return changed + only_a + only_b > 0; }
};

nlohmann::json to_json(const Comparison& c);

}  // namespace detaudit
