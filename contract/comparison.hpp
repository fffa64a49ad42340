// What `compare` found between two results directories (gates/compare.hpp compares, report/compare_report.hpp
// renders).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

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
  // batchinv cells: the fingerprint of the rows computed alone per side ("" where none was recorded). Outputs too:
  // a cell whose product is the same but whose rows changed has changed bits.
  std::string rows_a, rows_b;
};
const char* to_string(CellComparison::Kind k);  // "same bits", "bits changed", "only in A", "only in B", "varies"
const char* json_name(CellComparison::Kind k);  // "same", "bits_changed", "only_a", "only_b", "varies"

// One training cell (condition, target) of two runs of one design. A condition with nondeterminism off
// (sony2021's b, d, e) is compared bit for bit, run by run (same seed and replicate): the final
// weights' fingerprint and the final loss; it is `same bits` when every run matches and both sides ran
// the same runs, else `bits changed` (first_difference says where). A condition with nondeterminism on
// (a, c) gives other bits from run to run by design: the spread of its final losses is shown for both
// sides and it `varies` (not a difference) unless a run finished on one side only (changed).
struct TrainingCellComparison {
  CellComparison::Kind kind = CellComparison::Kind::kSame;
  std::string condition, target;
  bool deterministic = false;          // nondeterminism off
  int runs_a = 0, runs_b = 0;          // runs of the cell on each side
  int finished_a = 0, finished_b = 0;  // of those, finished (status ok)
  int runs_matched = 0;                // runs (seed, replicate) on both sides, finished on both
  int runs_same_bits = 0;              // of those, the same weights and final loss bit for bit
  // Mean and sd of the finished runs' finite final losses (sd needs two).
  std::optional<double> mean_a, sd_a, mean_b, sd_b;
  std::string first_difference;  // "seed 1000 rep 0: weights 5f41d982 -> 0a1b2c3d", or a status change
};

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
  // Training runs, per (condition, target) cell, in A's order then B-only cells.
  std::string kind;  // what both runs are: "probe suite quick", "training autoencoder/sony2021"
  std::vector<TrainingCellComparison> training;
  int training_same = 0, training_changed = 0, training_only_a = 0, training_only_b = 0, training_varies = 0;
  bool cells_differ() const {
    return changed + only_a + only_b + training_changed + training_only_a + training_only_b > 0;
  }
};

nlohmann::json to_json(const Comparison& c);

}  // namespace detaudit
