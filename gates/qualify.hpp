// `detaudit qualify`: is this machine (CPU, GPU, libraries, driver) fit to run numerics that must be
// reproducible? Levels as DCGM's diagnostics:
//   1  the quick probe suite, every cell judged against its target's promise (under 2 min on 2 cores);
//   2  adds a short sony2021 training regression (condition (d) bitwise identical, the model learns) and
//      performance outliers against the baseline or the history (3x slower WARNs, 10x FAILs);
//   3  the full probe suite and a longer training design.
// With --baseline, the probe results are also checked against it (gates/check.hpp).
// The outcome is a table of checks, each PASS, FAIL, WARN or SKIP. Exit 0 only when nothing failed and
// nothing required was skipped; 1 when a check failed (whatever else could not run: a failure seen
// disqualifies the machine); 2 when a required check could not run and nothing failed. Asking for a
// target the machine cannot run (a GPU target without a CUDA device, a CPU target needing an
// instruction set this CPU lacks) is "could not run" (2) before anything runs, never 0.
// Required: every target of --targets, the baseline check, the training checks. Not required: the
// suite's own targets (without --targets), the timing outliers.
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gates/baseline.hpp"
#include "gates/verdict.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_design.hpp"

namespace detaudit {

// qualify.json. Version 2: "counts" in the one shape of every document (VerdictTally: lower case, all five).
inline constexpr const char* kQualifySchema = "detaudit-qualify/2";

struct QualifyOptions {
  int level = 1;
  std::string baseline;      // the baseline's file, as named ("" = none); its contents (the CLI read them):
  std::optional<Baseline> baseline_loaded;
  std::string targets;       // comma-separated target specs replacing the suite's ("" = the suite's)
  std::string workloads;     // comma-separated workload specs replacing the suite's ("" = the suite's)
  int repeats = 0;           // repeats per cell (0 = the suite's)
  std::string out_dir;       // results: out_dir/probe, out_dir/train, out_dir/qualify.json
  std::string exe;           // the detaudit executable (workers)
  std::string command;       // recorded
  // This machine's earlier timings of a cell, the reference of the timing outliers where no baseline gives one: the
  // median over its earlier runs (of this machine key, leaving out this run's own folder and start) of the cell's
  // median seconds per repeat, and how many runs gave one. Unset: none (--no-history). The CLI reads the history.
  std::function<Status(const std::string& workload, const std::string& target, const std::string& machine_key,
                       const std::string& own_dir, const std::string& own_started_at, double* median, int* runs)>
      timing_history;
  bool fleet_rank = false;   // a fleet's rank: its times are held against its peers' (fleet report), not a history
  std::function<void(const std::string&)> progress;
};

// The timing-outlier row's detail where there is no reference: for `qualify` without a baseline or history, and for
// a fleet's rank (whose times `fleet report` holds against its peers').
inline constexpr const char* kNoTimingReference = "nothing to compare with: no baseline, no history (--no-history)";
inline constexpr const char* kFleetRankTimingReference =
    "nothing to compare with here: a fleet rank's times are held against its peers' by fleet report";

struct QualifyCheck {
  std::string name;    // "probe cpu?order=sequential&threads=1", "training (d) bitwise identical", ...
  Verdict verdict = Verdict::kPass;
  std::string detail;  // one line
  bool required = false;  // a SKIP of a required check makes the qualification fail to run
  double seconds = 0;     // wall time of the step that decided it (the probe run for every probe row)
};

// What a check that did not pass asks (gates/verdict.hpp): MONITOR timing outliers; RETEST a required check that
// could not run; ISOLATE any other failure (a broken promise, other bits than the baseline, a training run that did
// not finish or differs). A check that passed asks nothing (nullopt).
std::optional<Action> qualify_action(const QualifyCheck& c);

// What a level runs, before anything runs (`qualify --list`, and run_qualify itself): the probe suite
// with its targets and workloads, and the training design of levels 2 and 3.
struct QualifyPlan {
  int level = 1;
  ProbePlan probe;
  bool train = false;
  TrainDesign design;
  std::vector<std::string> lines() const;  // what it runs, in words, one line each
};
// `workloads` and `repeats` replace the suite's when given (fleet's --workloads and --repeats).
Status qualify_plan(int level, const std::string& targets, QualifyPlan* out, const std::string& workloads = "",
                    int repeats = 0);

// What run_qualify refuses before it runs anything, for `qualify --list`: a --baseline (read by the CLI: null when
// none) that could judge nothing of the plan, a named target this machine cannot run (no device, a missing
// instruction set).
Status check_qualify_can_run(const QualifyPlan& plan, const std::string& targets, const Baseline* baseline,
                             const std::string& baseline_path);

// What a qualification decides. The command's exit code follows it (0, 1, 2 in this order); qualify.json
// records both.
enum class QualifyDecision { kQualified, kCheckFailed, kRequiredNotRun };
// As every judging command decides: qualified PASS, a check failed FAIL, a required check not run: not judged.
Decision decision_of(QualifyDecision d);

struct QualifyOutcome {
  int level = 1;
  // When, where and with what: ISO 8601 UTC times, this host, its machine key (contract/machine_key.hpp's
  // machine_key), and the tool that judged.
  std::string started_at, finished_at, hostname, machine_key, tool_version, tool_commit;
  std::vector<QualifyCheck> checks;
  std::string probe_dir, train_dir;  // where the runs' results are ("" = not run)
  Results probe;                     // the judged probe results (recorded in the history)
  Results train;                     // the training design's results (level 2 and 3, when it ran)
  QualifyDecision decision = QualifyDecision::kQualified;
  nlohmann::json to_json() const;
  std::string table() const;  // the text table printed on the terminal
};

// Timing outliers: the ratio of a cell's median seconds to the reference median. Below
// kMinTimedSeconds (in the reference) timings are timer noise and not judged.
inline constexpr double kOutlierWarn = 3, kOutlierFail = 10, kMinTimedSeconds = 1e-3;

// (workload, target) -> the reference median seconds per repeat of that cell.
using TimingReferences = std::map<std::pair<std::string, std::string>, double>;

// The "timing outliers" check (not required): each ok cell's median seconds per repeat (the median of
// its finite repeats, the mean of the two middle ones for an even count, as the baseline and the
// history compute theirs) against its reference: a ratio above kOutlierWarn WARNs, above kOutlierFail
// FAILs. A cell without a (positive, finite) reference, or whose reference is under kMinTimedSeconds,
// is not judged; SKIP when no cell is judged. `source` names the references in the detail ("the
// baseline", "this machine's history").
QualifyCheck timing_check(const Results& r, const TimingReferences& references, const std::string& source);

// "race control" (not required): the cells whose target is permitted to vary (promised nondeterministic)
// are qualify's positive control. A cell that did not vary is no warning on its own (it PASSes), but when
// none of them varied the run did not show that this machine would reveal a race: WARN. PASS when some
// varied; SKIP when no such cell ran.
QualifyCheck race_control_check(const Results& r);

// The training checks of a sony2021 run (all required): "training runs finish" (FAIL when a run
// crashed, timed out or failed; SKIP when no run could run here), "training (d) bitwise identical on
// <target>" per target (every finished condition (d) run ends with the same weights; SKIP with fewer
// than 2), and "training: the model learns": every finished run's final loss (the mean of its last
// window) is below half its first batch's loss (curve[0]: the loss of batch 1, computed on the
// initial weights; the curve holds every batch's loss).
std::vector<QualifyCheck> training_checks(const Results& train);

// The decision of a set of checks: a check failed when one FAILed, else a required one did not run when
// one was SKIPped, else qualified.
QualifyDecision decide(const std::vector<QualifyCheck>& checks);

// The rows a rank's qualification (no baseline, no history) writes from these results. `named`: the targets were
// named (each required, none with unmet requirements: the run refused those); otherwise the suite's, each with
// what this machine lacks.
std::vector<QualifyCheck> rank_rows(const Results& probe, const Results& train, int level, bool named);

// A fleet rank's qualify.json checks held against what its own results give: a rank qualifies with no
// baseline and no history, so every row follows from its judged probe results, its training results and
// its level. Two rows do not: the "GPU targets" SKIP of a suite run (what the plan left out) and a training
// regression that could not run (a required SKIP); each is taken as written. The rows compared are
// name, verdict and required flag, and the detail when `with_detail` (the same build judged both).
// Invalid (one line naming the first row that differs) when no plan of its targets gives these rows.
Status check_rank_checks(const nlohmann::json& checks, const Results& probe, const Results& train, int level,
                         bool with_detail);

// Runs the levels; outcome->decision says what they decided. A failure (one line) when it could not run
// at all: bad targets, a target this machine cannot run, a bad baseline; interrupted when a signal
// stopped the probe or training run (the message says where the finished work is).
Status run_qualify(const QualifyOptions& opt, QualifyOutcome* outcome);

}  // namespace detaudit
