// `detaudit qualify`: is this machine (CPU, GPU, libraries, driver) fit to run numerics that must be
// reproducible? Levels as DCGM's diagnostics:
//   1  the quick probe suite, every cell judged against its target's promise (under 2 min on 2 cores);
//   2  adds a short sony2021 training regression (condition (d) bitwise identical, the model learns) and
//      performance outliers against the baseline or the history (3x slower WARNs, 10x FAILs);
//   3  the full probe suite and a longer training design.
// With --baseline, the probe results are also checked against it (gates/check.hpp).
// The outcome is a table of checks, each PASS, FAIL, WARN or SKIP. Exit 0 only when nothing failed and
// nothing required was skipped; asking for a target the machine cannot run (a GPU target without a
// CUDA device) is "could not run" (2), never 0.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/verdict.hpp"

namespace detaudit {

struct QualifyOptions {
  int level = 1;
  std::string baseline;      // optional baseline file
  std::string targets;       // comma-separated target specs replacing the suite's ("" = the suite's)
  std::string out_dir;       // results: out_dir/probe, out_dir/train, out_dir/qualify.json
  std::string exe;           // the detaudit executable (workers)
  std::string command;       // recorded
  std::string history;       // history database for timing medians ("" = none)
  std::function<void(const std::string&)> progress;
};

struct QualifyCheck {
  std::string name;    // "probe cpu?order=sequential&threads=1", "training (d) bitwise identical", ...
  Verdict verdict = Verdict::kPass;
  std::string detail;  // one line
  bool required = false;  // a SKIP of a required check makes the qualification fail to run
};

struct QualifyOutcome {
  int level = 1;
  std::vector<QualifyCheck> checks;
  std::string probe_dir, train_dir;  // where the runs' results are ("" = not run)
  Results probe;                     // the judged probe results (recorded in the history)
  int exit_code = 0;                 // 0 qualified, 1 a check failed, 2 a required check could not run
  nlohmann::json to_json() const;
  std::string table() const;  // the text table printed on the terminal
};

// Timing outliers: the ratio of a cell's median seconds to the reference median. Below
// kMinTimedSeconds (in the reference) timings are timer noise and not judged.
inline constexpr double kOutlierWarn = 3, kOutlierFail = 10, kMinTimedSeconds = 1e-3;

// Runs the levels. Returns the exit code (also in outcome->exit_code); 2 with *err when it could not run
// at all (bad targets, a target this machine cannot run, a bad baseline, an interrupted run: *err says).
int run_qualify(const QualifyOptions& opt, QualifyOutcome* outcome, std::string* err);

}  // namespace detaudit
