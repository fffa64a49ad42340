// Known-good bits: what a fleet agreed on, kept so that a later fleet can be judged where a majority cannot (two
// nodes, a node alone with its machine key).
//
// A reference holds, per machine key and deterministic cell, the fingerprint a majority of at least two nodes of that
// key computed (and, for a batch-invariance cell, the fingerprint of the rows computed alone), with how many nodes
// agreed, of how many that ran it, when and by which tool version. `detaudit fleet` writes one beside fleet.json
// (DIR/reference.json); `detaudit fleet merge` joins several into one file a site can keep under version control; `fleet
// --reference FILE` and `fleet report --reference FILE` judge every node's deterministic cells against it.
//
// The machine key holds the libraries' versions and the tool's version and commit, so a reference applies to the
// machines, libraries and build that made it, and to no other: another build is another key, not a mismatch.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/status.hpp"

namespace detaudit {

struct FleetNode;

inline constexpr const char* kReferenceSchema = "detaudit-reference/1";
// No fleet agreed on a reference before this format existed (detaudit 0.1.0, December 2026).
inline constexpr const char* kReferenceFormatSince = "2026-12-01T00:00:00Z";

struct ReferenceCell {
  std::string key;                // fleet_key_hash() of the machine key (Reference::keys)
  std::string workload, target;   // canonical specs
  std::string fingerprint;        // the bits the majority computed
  std::string rows_fingerprint;   // batchinv: the rows computed alone, where the majority agreed on them ("" otherwise)
  int nodes = 0, of = 0;          // nodes that agreed, of the nodes of the key that ran the cell
  std::string at;                 // when: the start of the fleet that agreed (UTC, ISO 8601)
  std::string tool_version;       // the version that computed it (also in the key)
};

struct Reference {
  std::map<std::string, nlohmann::json> keys;  // hash -> the machine key (fleet_key())
  std::vector<ReferenceCell> cells;           // sorted by key, workload, target; one per (key, workload, target)
  const ReferenceCell* find(const std::string& key, const std::string& workload, const std::string& target) const;
  ReferenceCell* find(const std::string& key, const std::string& workload, const std::string& target) {
    return const_cast<ReferenceCell*>(static_cast<const Reference*>(this)->find(key, workload, target));
  }
};

// The cells a fleet's nodes agreed on: per machine key with two nodes or more, per cell of a target that promises
// determinism, where every node of the key that has the cell ran it to one output, and more than half of them and at
// least two computed one fingerprint, none of which its own run FAILed (bits that agree but miss the oracle are no
// good bits). A node that did not finish counts among those that ran what it wrote. `at` is the earliest start among
// the nodes. A cell `known` holds with other bits is left out (those bits are a finding, not a reference).
Reference reference_of_fleet(const std::vector<FleetNode>& nodes, const Reference* known = nullptr);

// When a fleet started: the earliest start among its nodes (a reference cell's `at`).
std::string fleet_start(const std::vector<FleetNode>& nodes);
// A reference that holds this fleet's own agreement (a cell agreed when this fleet started, of a key its nodes have)
// would judge the fleet by itself: "" when it holds none, else why.
std::string holds_own_agreement(const Reference& known, const std::vector<FleetNode>& nodes);
// A reference whose every cell of this fleet's keys is what this fleet agreed on (the same bits, rows and counts),
// agreed within one run's length of this fleet's start: from its content, this fleet's own agreement with its time
// moved, or a fleet that ran beside it. "" when not, else a warning (the vote still judges; the reference added
// nothing that the fleet did not say of itself).
std::string mirrors_own_agreement(const Reference& known, const std::vector<FleetNode>& nodes);

// One finding of a merge: the same key and cell with other bits in two references. The cell keeps the bits it had
// (the first file's); nothing is overwritten.
struct ReferenceConflict {
  std::string key, workload, target, first, other, other_source;
};
// Adds `from`'s keys and cells to `into`. The same cell with the same bits keeps the larger agreement (nodes, of)
// and the earlier `at`; with other bits it is a conflict, returned, and `into` keeps its own.
std::vector<ReferenceConflict> merge_reference(Reference* into, const Reference& from, const std::string& source);

nlohmann::json to_json(const Reference& r);
// Strict: the schema, no unknown or duplicate field, keys whose names are their hashes and whose values are strings,
// canonical specs of a target that promises determinism, 32-hex fingerprints, 2 <= nodes <= of, more than half, an
// ISO 8601 time, the version the key names, and each cell once. One line naming the field otherwise.
Status reference_from_json(const nlohmann::json& j, Reference* out);
Status load_reference(const std::string& path, Reference* out);
// Atomically; refuses a destination that is not a reference detaudit wrote.
Status save_reference(const std::string& path, const Reference& r);

}  // namespace detaudit
