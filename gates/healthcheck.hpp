// `detaudit healthcheck`: a node judged in seconds against known-good bits (a reference, gates/reference.hpp), made
// to run by itself on every node (Slurm's HealthCheckProgram, a Prolog or Epilog, an NHC check, a
// node-problem-detector plugin). Every logical CPU runs cells the reference holds for this machine's key, at once,
// each in workers bound to it (suites/health_run.hpp), so a faulty core is named: its logical CPU, core and package.
//
// The answer is one line of fixed shape and an exit code:
//   detaudit: OK 412 cells on 2 cpus in 6.1 s                                                     exit 0
//   detaudit: FAIL cpu 13 (core 6, package 0): other bits in W on T (reference 44d9..., here e9d2...)  exit 1
//   detaudit: ERROR <why nothing could be judged>                                                 exit 2
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/health_outcome.hpp"
#include "contract/results.hpp"
#include "gates/reference.hpp"
#include "gates/verdict.hpp"  // Action
#include "suites/health_run.hpp"

namespace detaudit {

// The default --budget: on a two-core machine the whole check, start-up included, ends with a margin inside 10 s.
inline constexpr double kHealthBudgetDefault = 6;

struct HealthPlanOptions {
  size_t offset = 0;       // where each lane begins among its cells: successive runs begin at others
  size_t max_cpus = 0;     // 0: every allowed CPU
  int gpus = 0;            // CUDA devices here
};

// The lanes of a run: the reference's cells of machine key `key`, per allowed CPU (at most max_cpus of them, spread
// evenly and rotated by offset) the host targets, each backend's targets dealt among the CPUs so that every CPU runs
// every backend the reference holds, and per GPU its device's targets. Invalid when the reference holds no cell of
// `key` (the line names the fields in which its nearest key differs).
Status plan_health_lanes(const Reference& ref, const std::string& key, const nlohmann::json& key_fields,
                         const std::vector<CpuPlace>& cpus, const HealthPlanOptions& opt, std::vector<HealthLane>* lanes);


// Judges every finished cell of `run` against the reference: each run's bits (the warm-up's too, on a CPU) are the
// known-good ones, and a batch-invariance cell's rows computed alone too. A cell that crashed or could not run is a
// finding as well: the nodes that made the reference ran it.
HealthOutcome judge_health(const Reference& ref, const std::string& key, const std::vector<HealthLane>& lanes,
                           const HealthRun& run, const nlohmann::json& gpus, double budget_s);

// The check as the history records it (kind healthcheck): one observation per cell that ran on any CPU or GPU, with
// the distinct bits of every run (the warm-ups' too), PASS where each run gave the reference's bits (and rows), FAIL
// with its finding's line where one did not or where it crashed or could not run on some CPU; no timings (every CPU
// was busy) and no oracle distance (the reference's bits are the judge). The caller fills in the machine, the
// command and the times.
Results health_results(const Reference& ref, const std::string& key, const std::vector<HealthLane>& lanes,
                       const HealthRun& run, const HealthOutcome& h);

}  // namespace detaudit
