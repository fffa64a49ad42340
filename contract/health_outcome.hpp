// A healthcheck's answer (detaudit-healthcheck/1, schemas/healthcheck.schema.json), typed: gates/healthcheck.cpp
// judges it, the CLI adds what it did with it (the history, Slurm) and renders it; to_json writes the document.
#pragma once
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/cpu_place.hpp"
#include "contract/verdict.hpp"

namespace detaudit {

inline constexpr const char* kHealthSchema = "detaudit-healthcheck/1";

// What a healthcheck finding is; to_string gives its name in the check's JSON and metrics.
enum class HealthFindingKind {
  kBits,     // other bits than the reference's (a repeat or the warm-up)
  kRows,     // the product's bits, but other bits in the rows computed alone
  kCrashed,  // the cell's worker crashed (a signal)
  kError,    // no output: skipped, an error, or a worker that stopped answering (RETEST)
};
const char* to_string(HealthFindingKind k);

struct HealthFinding {
  HealthFindingKind kind = HealthFindingKind::kBits;
  Action action = Action::kIsolate;
  CpuPlace place;    // the CPU (place.cpu >= 0) ...
  int gpu = -1;      // ... or the GPU (index)
  std::string gpu_uuid;
  std::string workload, target, reference, here;  // here: the other bits (bits, rows) or the reason
  std::string line;                               // "cpu 13 (core 6, package 0): other bits in ..."
  size_t times = 1;  // runs of the cell on this CPU or GPU that found it (one finding per CPU, cell and kind)
};

// What one CPU or GPU (a lane) judged: its cells that passed, the backends of them, the backends its plan held that
// it finished no cell of within the budget.
struct HealthLaneSummary {
  CpuPlace place;  // the CPU (place.cpu >= 0) ...
  int gpu = -1;    // ... or the GPU
  size_t cells = 0;
  std::set<std::string> backends;
  std::vector<std::string> not_finished;
};

struct HealthOutcome {
  Decision decision = Decision::kNotJudged;  // PASS: OK; FAIL: a finding; not judged: a CPU or GPU judged nothing
  std::string status;  // OK, FAIL, ERROR
  std::string line;    // "detaudit: OK ..." (no newline)
  size_t cells = 0;    // cell runs that passed (a cell run twice, or on two CPUs, counts twice)
  std::vector<HealthFinding> findings;
  std::string key;  // the machine key judged
  size_t cut = 0, not_reached = 0;
  double seconds = 0, budget_s = 0, gflop = 0, gflop_per_s = 0;
  std::vector<HealthLaneSummary> lanes;
  // What the CLI adds: the reference file, the host, the history's answer, the whole run's time and what Slurm was
  // told (the last two objects as the CLI writes them).
  std::optional<std::string> reference, host;
  std::optional<double> total_seconds;
  std::optional<nlohmann::json> history, slurm;
};

nlohmann::json to_json(const HealthOutcome& h);

}  // namespace detaudit
