// An observation: one target running one workload N times. This struct is what the worker sends to
// the parent, what results.json stores (DESIGN.md "Results contract") and what the reports render.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend.hpp"
#include "probes/metrics.hpp"

namespace detaudit {

enum class ObsStatus { kOk, kCrashed, kTimeout, kSkipped, kError };
const char* to_string(ObsStatus s);
bool parse_obs_status(const std::string& s, ObsStatus* out);

struct BatchInvariance {
  int rows_checked = 0;
  int rows_differing = 0;
  bool invariant() const { return rows_differing == 0; }
};

struct Observation {
  std::string workload, target;
  ObsStatus status = ObsStatus::kOk;
  std::string reason;  // crashed: "SIGILL (Illegal instruction)"; timeout: "no result after 60 s"; skipped: why
  int repeats = 0;     // requested repeats
  std::vector<std::string> fingerprints;  // one per completed repeat, 32 hex digits
  int distinct = 0;
  std::optional<OracleDistance> oracle;  // absent when there is no oracle output to compare with
  std::vector<double> seconds;
  std::string tracing;                                  // "ok", "unavailable: <reason>", or "" (CPU)
  std::vector<std::vector<KernelRecord>> kernels;       // per repeat, GPU targets only
  std::map<std::string, std::string> details;           // backend settings: isa, corename, algo, ...
  std::optional<BatchInvariance> batch;                 // batchinv workloads only
  std::string describe;                                 // what ran, in the backend's words

  bool deterministic() const { return status == ObsStatus::kOk && distinct == 1; }
};

nlohmann::json to_json(const Observation& o);
// Strict: a malformed observation (wrong types, missing required fields) returns false with a reason.
bool from_json(const nlohmann::json& j, Observation* o, std::string* err);

nlohmann::json to_json(const KernelRecord& k);
KernelRecord kernel_from_json(const nlohmann::json& j);

// Count distinct strings (fingerprints).
int count_distinct(const std::vector<std::string>& v);

}  // namespace detaudit
