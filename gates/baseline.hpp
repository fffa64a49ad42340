// Baselines: what a results directory observed, kept as a reviewable JSON file that later runs are
// checked against (gates/check.hpp). One entry per workload x target (sorted), one per training cell
// (model, design, condition, target), and the KEY each entry holds for: the bits a cell gives are only
// promised to repeat on the same hardware with the same software, so an entry records what that is.
//   CPU targets: the CPU model and its ISA (cpu_features), the versions of the libraries the backend's
//                bits depend on (BackendEntry::libraries, probes/registry.hpp), the tool version.
//   GPU targets: the GPU's name, compute capability and SM count, the backend's libraries (driver,
//                CUDA runtime, cuDNN, cuBLAS, ...), the tool version.
// Keys are stored once in "keys" (id -> key object; the id is "cpu-" or "gpu-" and 12 hex digits of the
// key's hash) and entries name theirs by id, so a file of thousands of cells stays short.
//
// The file ("schema": "detaudit-baseline/1"), every object's keys sorted:
//   { "schema", "created_at", "tool_version", "tool_commit",
//     "source": {"dir", "command", "started_at", "finished_at", "plan"},   the results it was made from
//                (plan: results.json's plan, the suite or design; absent in baselines of older versions)
//     "keys": {"<id>": {...}},
//     "entries": [ {"workload", "target", "key", "status", "reason" (non-ok cells), "repeats",
//                   "fingerprints" (the distinct ones, sorted), "distinct", "verdict", "verdict_reason",
//                   "promise" ("deterministic" | "nondeterministic" | "none"),
//                   "err_ratio" (when known), "kernels" ({fingerprint: [kernel names]}, GPU targets),
//                   "algo" (the algorithm the cell ran, when the backend names it: cuDNN's "algo_name"
//                   detail; optional), "median_seconds" (per repeat, when timed)} ],
//     "training": [ {"model", "design", "condition", "init", "determinism", "target", "key",
//                    "runs": [{"seed", "replicate", "final_loss" (null: diverged), "weights_fingerprint",
//                              "outcome" (the whole outcome's fingerprint; absent in older baselines)}]
//                    (sorted by seed, replicate), "n" (finite losses), "mean", "sd" (null when n < 2)} ] }
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/registry.hpp"
#include "contract/results.hpp"
#include "contract/atomic_file.hpp"

namespace detaudit {

inline constexpr const char* kBaselineSchema = "detaudit-baseline/1";

struct BaselineCell {
  std::string workload, target;
  std::string key;  // id into Baseline::keys
  ObsStatus status = ObsStatus::kOk;
  std::string reason;  // non-ok cells: why
  int repeats = 0;
  std::vector<std::string> fingerprints;  // the distinct fingerprints, sorted
  int distinct = 0;
  std::optional<Verdict> verdict;       // as judged (gates/verdict.hpp)
  std::string verdict_reason;
  std::string promise = "none";         // run-to-run promise: "deterministic", "nondeterministic", "none"
  std::optional<double> err_ratio;      // oracle error / summation error bound, when known
  std::map<std::string, std::vector<std::string>> kernels;  // fingerprint -> kernels that ran (GPU)
  std::string algo;  // the algorithm the cell ran (details "algo_name"), empty when not reported
  std::optional<double> median_seconds;                     // per repeat
  // batchinv cells: the fingerprint of the rows computed alone (results' batch_invariance.rows_fingerprint; "" where
  // none was recorded), checked bit for bit as the product is.
  std::string rows_fingerprint;
};

struct BaselineRun {
  uint64_t seed = 0;
  int replicate = 0;
  double final_loss = 0;  // NaN: diverged (null in the file)
  std::string weights_fingerprint;
  // The fingerprint of the run's whole outcome (outcome_fingerprint: weights, final loss, learning curve, noise
  // measurements, held-out prediction); "" in baselines of older versions.
  std::string outcome;
};

struct BaselineTraining {
  std::string model, design, condition, init, determinism, target;
  std::string key;
  std::vector<BaselineRun> runs;  // sorted by (seed, replicate)
  int n = 0;                      // runs with a finite final loss
  std::optional<double> mean, sd;  // over those; sd needs n >= 2
};

struct Baseline {
  std::string created_at, tool_version, tool_commit;
  std::string source_dir, source_command, source_started_at, source_finished_at;
  nlohmann::json source_plan;                  // the results' plan (null in baselines written before it was kept)
  std::map<std::string, nlohmann::json> keys;  // id -> key object
  std::vector<BaselineCell> cells;             // sorted by (workload, target)
  std::vector<BaselineTraining> training;      // sorted by (model, design, condition, target)
};

// The run-to-run promise as the baseline writes it.
std::string promise_name(const Promise::RunToRun& r);

// The key an entry of this target holds for on the machine of `r` (r.machine, r.tool_version).
nlohmann::json entry_key(const Results& r, const std::string& target);
std::string key_id(const nlohmann::json& key);
// "libraries.cudnn: 8.9.7 -> 9.1.0; gpu_name: A100 -> H100": what differs between two keys (empty if equal).
std::string key_difference(const nlohmann::json& old_key, const nlohmann::json& new_key);

// What a cell's target promises run to run for its workload on that machine, as a baseline names it (promise_name;
// "none" for a cell whose specs do not parse).
std::string cell_promise(const Observation& o, const nlohmann::json& machine);
// The kernel names of the first repeat that gave each fingerprint, in launch order, each name once
// (GPU targets with tracing; empty otherwise).
std::map<std::string, std::vector<std::string>> kernel_names_by_fingerprint(const Observation& o);

// The baseline of a results directory's results. Observations without a verdict are judged on a copy
// first (gates/verdict.hpp). `created_at` empty: now.
Baseline make_baseline(const Results& r, const std::string& source_dir, const std::string& created_at = "");

// Whether r (read from the folder dir) is the run b was saved from, whose cells checked against b would be compared
// with themselves: started at the same second with the baseline's bits in every cell both hold, and the same command
// (that run, or a copy of it), the same folder (resumed by another command, as qualify resumes its probe), or three
// cells or more timed alike to the nanosecond (which two runs never are). "" when it is not, else why, in words.
std::string saved_from(const Baseline& b, const Results& r, const std::string& dir);


}  // namespace detaudit
