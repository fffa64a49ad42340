// Bring your own framework: `detaudit export` writes workloads as .npy inputs, the oracle's
// output and a manifest.json that says, in words, what to compute from them; a framework (PyTorch: the
// script scripts/torch-probe.py) runs them and writes its outputs beside them; `detaudit import` reads
// those back, fingerprints them exactly as a worker fingerprints a target's output (XXH3-128 of the
// output's bytes: float32 or float64, little-endian, C order), measures the distance to the oracle and
// records them as observations of the target external?name=NAME. In a results directory that holds a
// probe run of the same workloads, the framework then stands in the matrix, the bit-identical groups,
// the verdicts, compare and check like any target.
//
// The manifest ("schema": "detaudit-export/1") is the contract; README "Bring your own framework" walks
// through it. The inputs are the bytes every target's worker generates (captured from the workload's own
// setup, so they cannot drift from it), and the manifest carries their fingerprint: an import by a
// detaudit whose generator gives other inputs for a spec is refused.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "contract/observation.hpp"
#include "probes/spec.hpp"
#include "contract/results.hpp"

namespace detaudit {

inline constexpr const char* kExportSchema = "detaudit-export/1";
inline constexpr const char* kManifestFile = "manifest.json";
// Optional, written by the framework's runner: {"describe": "...", "details": {"key": "value", ...},
// "seconds": {"<workload id>": [seconds of repeat 0, 1, ...]}}, recorded with the observations.
inline constexpr const char* kProducerFile = "producer.json";

// The file name stem of a workload's arrays: its canonical spec as a file name (safe_file_name).
std::string export_id(const Spec& workload);

// Writes, per workload, <id>.<input>.npy for each input, <id>.oracle.npy, and then dir/manifest.json
// (every file atomically). `progress` (may be empty) gets one line per workload. A failure of one
// line naming the file when something cannot be written.
Status export_workloads(const std::vector<Spec>& workloads, const std::string& dir,
                        const std::function<void(const std::string&)>& progress);

// Reads and checks dir/manifest.json as import does, without the outputs: each entry must be what this
// detaudit exports for its spec (its inputs are generated again and their fingerprint compared), a spec
// whose inputs would not fit in the available memory is refused before they are generated. The specs in
// the manifest's order. Fuzzed (tests/fuzz/fuzz_manifest.cpp).
Status read_manifest_specs(const std::string& dir, std::vector<Spec>* specs);

// Reads dir/manifest.json and the framework's outputs it names, and makes one observation of
// external?name=NAME per workload. Every check comes first, and nothing is written: a manifest of another
// schema or detaudit version, a malformed or edited manifest, a missing output, a wrong dtype, byte order,
// shape or order, a truncated .npy, a malformed producer.json: a failure of one line naming the file and
// the problem. Each oracle is computed here with cpu-ref (a results directory's .oracle cache is never
// read). `progress`, when given, hears one line per workload compared. Status::interrupted between workloads
// after SIGINT/SIGTERM/SIGHUP.
Status read_external_outputs(const std::string& dir, const std::string& name, std::vector<Observation>* out,
                             const std::function<void(const std::string&)>& progress = nullptr);

// The results of results_dir (results.json, or new ones of this machine when there is none) with `obs`
// in place of any earlier observations of the same workload and target. Writes nothing.
Status merge_external(const std::string& results_dir, const std::vector<Observation>& obs, const std::string& command,
                      Results* out);

}  // namespace detaudit
