// The run of `detaudit healthcheck`: every logical CPU busy at once for a budget of seconds, each with worker
// processes of its own bound to it (a worker started from a bound thread inherits the binding, and so do its
// library's threads), and each GPU with its own workers. What a lane ran is judged elsewhere (gates/healthcheck.hpp).
#pragma once
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "contract/observation.hpp"
#include "probes/env.hpp"
#include "probes/spec.hpp"

namespace detaudit {

// One target's workloads, run in one worker.
struct HealthBatch {
  Spec target;
  std::vector<Spec> workloads;
};

// One CPU (place.cpu >= 0, gpu -1) or one GPU (gpu >= 0: its workers are not bound) and what it runs, in order.
struct HealthLane {
  CpuPlace place;
  int gpu = -1;
  std::vector<HealthBatch> batches;
};

struct HealthRunOptions {
  std::string exe;  // the detaudit executable, for the workers
  int repeats = 2;  // per cell, after the warm-up run
  std::chrono::steady_clock::time_point deadline;
  std::string log_path;  // the workers' stderr ("" = inherited)
  // Added to the environment of the workers of the lane of this CPU (a test hook's variables).
  std::map<int, std::map<std::string, std::string>> env_by_cpu;
};

struct LaneObservation {
  size_t lane = 0;
  Observation obs;
};

struct HealthRun {
  std::vector<LaneObservation> observations;  // every cell that finished, per lane in the order run
  size_t cut = 0;          // cells begun and stopped by the budget (not judged: the budget's doing, not theirs)
  size_t not_reached = 0;  // cells of batches the budget left no time for
  std::vector<std::string> errors;  // a lane that could not start (binding refused), one line each
  double seconds = 0;               // from the start of the lanes to the end of the last
};

// Runs every lane at once until its batches are done or the deadline comes. Each batch of a lane gets an equal share
// of the time the lane has left when it starts, so every target of a lane (each library: their kernels use other
// instructions) runs on it however short the budget; a cell still running when its share ends is cut. Stops at once
// when detaudit is interrupted (what finished is in *out; interrupted() says so).
void run_health_lanes(const std::vector<HealthLane>& lanes, const HealthRunOptions& opt, HealthRun* out);

}  // namespace detaudit
