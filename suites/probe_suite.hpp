// Named probe suites and their orchestration: plan (targets x workloads), oracle outputs, one worker
// per target, results written after every observation, resume of an interrupted run.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "probes/spec.hpp"
#include "report/results.hpp"

namespace detaudit {

struct ProbePlan {
  std::string suite = "quick";
  std::vector<Spec> targets, workloads;
  int repeats = 10;
  double timeout_s = 120;
  nlohmann::json to_json() const;
};

std::vector<std::string> suite_names();
// Builds the plan from a suite and optional overrides (comma-separated spec lists). Expands `=all`
// algorithm keys. False with a one-line *err naming the bad part.
bool make_plan(const std::string& suite, const std::string& targets_csv, const std::string& workloads_csv,
               int repeats, double timeout_s, ProbePlan* plan, std::string* err);

// Whether a target's pinned settings concern this workload at all (a cuDNN target that pins only the
// forward algorithm says nothing about backward-filter). Inapplicable cells are not run.
bool applicable(const Spec& target, const Spec& workload);

struct ProbeRunOptions {
  std::string out_dir;
  std::string exe;       // the detaudit executable, for workers
  std::string command;   // recorded in results.json
  bool fresh = false;    // ignore existing results in out_dir
  std::function<void(const std::string&)> progress;  // one line per event, no newline
};

// Runs the plan. Returns 0 when the audit completed (whatever it found), 2 when it could not run
// (*err says why). Writes out_dir/results.json after every observation and the reports at the end.
int run_probe_suite(const ProbePlan& plan, const ProbeRunOptions& opt, Results* results, std::string* err);

}  // namespace detaudit
