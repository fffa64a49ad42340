// An observation: one target running one workload N times. This struct is what the worker sends to
// the parent, what results.json stores (README "Results contract") and what the reports render.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend.hpp"
#include "contract/metrics.hpp"
#include "contract/spec.hpp"
#include "contract/verdict.hpp"

namespace detaudit {

enum class ObsStatus { kOk, kCrashed, kTimeout, kSkipped, kError };
const char* to_string(ObsStatus s);
bool parse_obs_status(const std::string& s, ObsStatus* out);

struct BatchInvariance {
  int rows_checked = 0;
  int rows_differing = 0;
  // The fingerprint of the rows computed alone, in the order checked: outputs too, compared across a fleet's nodes
  // as the product is ("" in results of older versions and in imports).
  std::string rows_fingerprint;
  bool invariant() const { return rows_differing == 0; }
};

// One repeat's kernels as CUPTI saw them, in launch order; nullopt: tracing failed for that repeat (the
// reason is in Observation::tracing), so the entry still pairs with that repeat's fingerprint.
using RepeatKernels = std::optional<std::vector<KernelRecord>>;

struct Observation {
  std::string workload, target;
  // The same two as parsed, canonical specs: set where an observation is made (the probe runner) or read
  // (probes/results_file's canonicalize_specs), so the specs travel with the cell and no judge parses its text
  // again. Not part of results.json (the texts are); empty in an observation made by hand, which the registry's
  // specs_of parses.
  std::optional<Spec> target_spec, workload_spec;
  ObsStatus status = ObsStatus::kOk;
  std::string reason;  // crashed: "SIGILL (Illegal instruction)"; timeout: "no result after 60 s"; skipped: why
  int repeats = 0;     // requested repeats
  std::vector<std::string> fingerprints;  // one per completed repeat, 32 hex digits
  int distinct = 0;
  // The untimed warm-up run before the repeats, traced (on GPUs) under its own correlation id: one-time
  // setup such as cuDNN's algorithm search runs there, so it appears in no repeat's kernels or seconds.
  // Not counted in `distinct`; judged against the repeats by gates/verdict.cpp. Empty in older results.
  std::string warmup_fingerprint;
  std::optional<OracleDistance> oracle;  // absent when there is no oracle output to compare with
  std::vector<double> seconds;
  // "ok", "partial: <which repeats failed, why>", "tracing unavailable: <reason>", or "" (not a GPU target)
  std::string tracing;
  // Empty (no repeat traced, or not a GPU target), or exactly one entry per fingerprint.
  std::vector<RepeatKernels> kernels;
  std::map<std::string, std::string> details;           // backend settings: isa, corename, algo, ...
  std::optional<BatchInvariance> batch;                 // batchinv workloads only
  std::string describe;                                 // what ran, in the backend's words
  // Set by gates/verdict.cpp (judge): PASS, FAIL, EXPECTED, WARN or SKIP, and why in one line. Empty
  // until judged (results.json of older runs, a run in progress).
  std::optional<Verdict> verdict;
  std::string verdict_reason;

  bool deterministic() const { return status == ObsStatus::kOk && distinct == 1; }
};

nlohmann::json to_json(const Observation& o);
// Strict: every field is checked against the results contract; a malformed observation (wrong types,
// missing required fields, a fingerprint that is not 32 hex digits) is an invalid Status with one line naming
// the field by its path from `where` ("observation.repeats must be an integer (got string)"). Never throws.
Status from_json(const nlohmann::json& j, Observation* o, const std::string& where = "observation");

nlohmann::json to_json(const KernelRecord& k);

// Type checks at the JSON border (results.json, the worker protocol). A failed check is an invalid
// Status "<path> must be <what> (got <what it is>)"; nothing here throws.
enum class JsonType { kString, kCount, kUnsigned, kUint32, kNumber, kBoolean, kObject, kArray };
std::string json_path(const std::string& parent, const std::string& key);  // "a" + "b" -> "a.b"
std::string json_path(const std::string& parent, size_t index);            // "a" + 3 -> "a[3]"
Status check_json(const nlohmann::json& j, JsonType t, const std::string& path);
// obj[key] has type t when present; a required key must be present. obj must be an object.
Status check_key(const nlohmann::json& obj, const char* key, JsonType t, bool required, const std::string& path);
// obj[key], when present, is an array whose every element has type elem.
Status check_array_key(const nlohmann::json& obj, const char* key, JsonType elem, bool required,
                       const std::string& path);

// The longest time a results file may state (a repeat, a training run): a year. Beyond it a number is no
// measured time (1e300 s would pass as "finite").
inline constexpr double kLongestSeconds = 366.0 * 86400;
// The shortest time a clock measures: the workers time with std::chrono::steady_clock, whose tick is a nanosecond
// here, and so do the frameworks' clocks an import reads (time.perf_counter_ns, CUDA events at half a microsecond).
// A time between 0 and one tick was measured by no clock; 0 is what a clock reads when nothing it can see passed.
inline constexpr double kClockTick = 1e-9;
// A time a results file, baseline or history may state: 0, or from one tick to a year.
inline bool plausible_seconds(double s) { return s == 0 || (s >= kClockTick && s <= kLongestSeconds); }

// Count distinct strings (fingerprints).
int count_distinct(const std::vector<std::string>& v);

// The first key of the object j that is not among `known` ("" when every key is): a field no version writes
// is refused, never ignored (a misspelt "verdcit" would otherwise pass unseen). Each reader names the field
// in its own words.
std::string unknown_field(const nlohmann::json& j, std::initializer_list<const char*> known);

// What the counts of a cell in a results file mean, so that a file cannot say one thing in a count and
// another in what it lists: a cell that ran gave one output per repeat (and one time per repeat, when
// timed); a cell skipped, crashed or timed out gave none; an error may come after some repeats; no more rows
// differ than were checked; no negative relative error, no histogram of fewer elements than mismatched. (A
// worker's oracle answer is ok without outputs: it is not a results file's cell.)
Status check_observation_counts(const Observation& o, const std::string& where);

}  // namespace detaudit
