// Named probe suites and their orchestration: plan (targets x workloads), oracle outputs, one worker
// per target, results written after every observation, resume of an interrupted run.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "probes/registry.hpp"  // applicable(), expand_all()
#include "probes/spec.hpp"
#include "contract/results.hpp"
#include "suites/results_dir.hpp"

namespace detaudit {

struct ProbePlan {
  std::string suite = "quick";
  bool custom = false;  // --targets or --workloads replaced the suite's (results.json: "custom": true)
  std::vector<Spec> targets, workloads;
  int repeats = 10;
  double timeout_s = 120;
  nlohmann::json to_json() const;
};

std::vector<std::string> suite_names();
// Builds the plan from a suite and optional overrides (comma-separated spec lists). Expands `=all`
// algorithm keys. Invalid with one line naming the bad part.
Status make_plan(const std::string& suite, const std::string& targets_csv, const std::string& workloads_csv,
                 int repeats, double timeout_s, ProbePlan* plan);

struct ProbeRunOptions {
  std::string out_dir;
  std::string exe;       // the detaudit executable, for workers
  std::string command;   // recorded in results.json
  bool fresh = false;    // ignore existing results in out_dir
  bool custom = false;   // targets or workloads came from the command line (progress wording only)
  std::function<void(const std::string&)> progress;  // one line per event, no newline
  // The caller's hold on out_dir (null: the run holds it for itself): the run opens it and takes its lock, which the
  // caller keeps after the run returns, so that judging, saving and reporting happen under the same lock.
  ResultsDir* results_dir = nullptr;
};

// The number of cells (target x workload pairs that apply) of a plan.
size_t count_cells(const ProbePlan& plan);

// Invalid, naming the workload, the bytes it needs and those available, when one of the plan's
// workloads cannot fit in `available` bytes of memory (estimate_memory). available 0: unknown, ok.
Status check_memory(const ProbePlan& plan, uint64_t available, const std::string& source);

// Runs the plan. Ok when the audit completed (whatever it found), a failure (one line) when it could
// not run, interrupted when SIGINT/SIGTERM/SIGHUP stopped it (every finished observation is saved in
// out_dir/results.json and *results holds them; the run resumes with the same --out). Refuses before
// writing anything when a workload cannot fit in memory, and when another process holds out_dir
// (DirLock). Writes
// out_dir/results.json after every observation and the reports at the end.
Status run_probe_suite(const ProbePlan& plan, const ProbeRunOptions& opt, Results* results);

}  // namespace detaudit
