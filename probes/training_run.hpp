// A training run: one model trained once on one target, in one cell of a design. This struct is what
// results.json stores under "training" (DESIGN.md "Results contract"), what the analysis
// (analysis/training.hpp) and the reports read, and what baselines, check, qualify and the history
// keep. Its status is the observations' status (ObsStatus): ok, crashed, timeout, skipped, error.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/observation.hpp"

namespace detaudit {

// The phase label of one run's learning curve (analysis/phases.hpp detects it, once, in the worker).
struct CurvePhases {
  std::string label;  // biphasic, triphasic, censored, monophasic, insufficient
  uint64_t segments = 0;
  std::optional<double> escape_step;  // the step the run escaped its first plateau at
  bool censored = false;              // a plateau never escaped
  // Every label but monophasic and insufficient has a plateau.
  bool has_plateau() const { return label == "biphasic" || label == "triphasic" || label == "censored"; }
};

struct TrainingRun {
  // Identity: its cell of the design.
  std::string key;        // condition|target|seed|replicate, unique within a design
  std::string model, design;
  std::string condition;  // "a", "b", "c", "d"
  bool random_init = false;       // "init": "random" | "fixed"
  bool nondeterministic = false;  // "nondeterminism": "on" | "off" ("determinism" is its opposite)
  std::string target, base_target;
  uint64_t seed = 0, data_seed = 0;
  int replicate = 0, batches = 0, window = 0;
  std::string machine_id;  // first 16 hex digits of the machine fingerprint's hash
  // In a merged analysis (detaudit analyze): the index of the results directory the run came from
  // (Results::sources); 0 otherwise, and then not written.
  int source = 0;

  ObsStatus status = ObsStatus::kError;
  std::string reason;  // why it did not finish (status other than ok)

  // Finished runs (status ok). Non-finite losses are NaN here and null in JSON.
  double final_loss = NAN;  // mean loss of the last `window` batches
  std::vector<double> curve;
  std::string curve_fingerprint, initial_weights_fingerprint, weights_fingerprint;
  double seconds = 0, steps_per_second = 0;
  std::optional<CurvePhases> phases;

  // Runs that died (crashed, timeout, some errors).
  std::string signal;                   // "SIGSEGV"
  std::optional<double> timeout_s;      // the stall timeout that killed it
  std::optional<uint64_t> batches_done;

  bool ok() const { return status == ObsStatus::kOk; }
  const char* init_name() const { return random_init ? "random" : "fixed"; }
  const char* nondeterminism_name() const { return nondeterministic ? "on" : "off"; }
};

nlohmann::json to_json(const TrainingRun& r);
nlohmann::json to_json(const CurvePhases& p);
// Strict: types of every field, known values of status, condition, init and nondeterminism, no unknown
// field; a finished run must have its condition, target, seed, replicate, final loss and curve. False
// with a one-line *err naming the field's path ("training[3].seed must be ...").
bool from_json(const nlohmann::json& j, TrainingRun* out, std::string* err, const std::string& path = "run");

}  // namespace detaudit
