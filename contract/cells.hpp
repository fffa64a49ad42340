// Verdicts: per workload x target cell, and across targets (groups of bit-identical targets).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "contract/observation.hpp"

namespace detaudit {

enum class CellVerdict { kDeterministic, kNondeterministic, kCrashed, kTimeout, kSkipped, kError };
const char* to_string(CellVerdict v);
CellVerdict cell_verdict(const Observation& o);

// Targets of one workload whose outputs are bit-identical. Targets are grouped by the set of
// fingerprints they produced: a deterministic target has one, a nondeterministic one several, and
// two nondeterministic targets belong together only if they produced the same set.
struct IdentityGroup {
  std::vector<std::string> fingerprints;  // sorted
  std::vector<std::string> targets;       // in observation order
};
struct WorkloadGroups {
  std::string workload;
  std::vector<IdentityGroup> groups;  // largest first, ties in first-appearance order
};
std::vector<WorkloadGroups> identity_groups(const std::vector<Observation>& obs);

// For one nondeterministic GPU observation: which kernel sequences went with which fingerprint.
struct KernelSequenceGroup {
  std::string fingerprint;
  int runs = 0;
  std::vector<std::string> kernel_names;  // the sequence of the first traced repeat with this fingerprint
  bool sequence_varies = false;           // traced repeats with this fingerprint ran different sequences
  int untraced = 0;                       // repeats with this fingerprint whose tracing failed
};
std::vector<KernelSequenceGroup> kernels_by_fingerprint(const Observation& o);

struct Summary {
  int cells = 0, deterministic = 0, nondeterministic = 0, crashed = 0, timeout = 0, skipped = 0, error = 0;
  int batch_checked = 0, batch_variant = 0;
};
Summary summarize(const std::vector<Observation>& obs);

// The distinct fingerprints of an observation, sorted: what "the same bits" compares.
std::vector<std::string> fingerprint_set(const Observation& o);
// Two finished cells of one workload that gave the same outputs (the same distinct fingerprints), each measured
// against that workload's one oracle (results of one tool version): "" when their oracle distances agree, or
// either has none; else what differs (distance_difference).
std::string same_outputs_other_distance(const Observation& a, const Observation& b);
// Fingerprints shortened to 8 hex digits, comma-separated, for one line of text.
std::string short_fingerprints(const std::vector<std::string>& fps);

}  // namespace detaudit
