// The sony2021 training design: the paper's four conditions on every target, and a fifth.
//   (a) random initial weights, nondeterminism on     (b) random initial weights, nondeterminism off
//   (c) fixed initial weights, nondeterminism on      (d) fixed initial weights, nondeterminism off
//   (e) fixed initial weights with one weight moved by one ULP, a different weight per run (nudge r of
//       `seeds`, the same weight on every target), nondeterminism off: one-ULP sensitivity (Summers &
//       Dinneen 2021), whose spread the report puts beside (c) and the seed spread (b).
// Each base target is run in its deterministic and its nondeterministic variant (derive_variants).
// Random initial weights: run r uses init seed kInitSeedBase + r, the same seeds on every target, so
// target and seed are crossed. Fixed: every run uses kInitSeedBase. The data order is the same
// everywhere (data_seed). Condition (a) repeats each seed `replicates` times, which gives the
// run-to-run term of the variance decomposition; (c) runs its one seed seeds x replicates times, so that
// `check` can judge both (the default 3 x 2: 6 + 6 runs of (c), a smallest p of 2/924).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/idx.hpp"
#include "probes/spec.hpp"
#include "contract/results.hpp"
#include "suites/results_dir.hpp"

namespace detaudit {

inline constexpr uint64_t kInitSeedBase = 1000;
// The autoencoder's input (models/autoencoder.hpp): 28 x 28 x 1 images; a data set needs at least one
// batch of them.
inline constexpr int kAutoencoderImageSide = 28;
// Bounds of a design (and of a worker request).
inline constexpr int kMaxTrainBatches = 10'000'000, kMaxTrainBatchSize = 65536;
// A design of more runs is refused before anything runs (10,000 seeds x 1,000 replicates was accepted).
inline constexpr uint64_t kMaxTrainRuns = 100'000;
// `train --noise-scale`: the gradient noise is measured at every kDefaultNoiseEvery-th batch.
inline constexpr int kDefaultNoiseEvery = 10;

struct TargetVariants {
  Spec base, deterministic, nondeterministic;
};
// cpu: order=blocked vs order=atomic; cuda: tree vs atomic; cublas: atomics not_allowed vs allowed;
// cudnn: deterministic algorithms (1) vs the atomic ones (0). Others have no nondeterministic variant.
Status derive_variants(const Spec& base, TargetVariants* out);

struct TrainDesign {
  std::string model = "autoencoder";
  std::string design = "sony2021";
  std::vector<Spec> targets;  // base targets
  int seeds = 3, batches = 200, window = 20, replicates = 2, batch_size = 64;
  uint64_t data_seed = 1;
  std::string data_dir;  // empty: Fashion-MNIST from dataset-fashion-mnist
  // Gradient noise scale and hardware noise (contract/training_run.hpp NoiseTrace) at every noise_every-th
  // batch of every run; 0: not measured. Measuring restores the batch's own gradient before the update,
  // so it changes no run's bits.
  int noise_every = 0;
  std::string prednet_config;  // prednet: "quick", "tiny" or "paper" (suites/train_data.hpp); autoencoder: ""
  nlohmann::json to_json() const;
};

// Defaults for a quick run; `paper` gives the paper's protocol (12 runs, 5000 batches, window 50).
// prednet: one target (cpu?threads=2), 2 seeds, 60 batches of 4 sequences, window 10.
TrainDesign default_design(bool paper, const std::string& model = "autoencoder");

// The training regression of `qualify` (and of a fleet rank) at level 2 or 3: the autoencoder's sony2021 design,
// at level 2 short (one target of two threads, 2 seeds of 60 batches, window 10), at level 3 train's defaults.
TrainDesign qualify_design(int level);

// What `train` is given: its model and the options that shape its design, as typed (0 or "" where not given).
struct TrainDesignArgs {
  std::string model, design = "sony2021", targets, data, prednet_config;
  int seeds = 0, batches = 0, window = 0, replicates = 0, noise_every = 0;
  bool paper = false, noise_scale = false;
};
// The design they ask for, as `train` runs it: default_design, then each option given. Status::invalid for what
// train refuses (a target that does not parse, --noise-every without --noise-scale, --prednet-config for the
// autoencoder).
Status design_from_args(const TrainDesignArgs& a, TrainDesign* out);
// The command line a training results file records, read back into the design it asked for and held against the
// plan's: `train` (its model and options), or `qualify`/`fleet` at level 2 or 3 (qualify_design); another command
// makes no training runs. "" where they agree, or the command is one this version cannot read; else what
// differs, naming the field.
std::string train_command_contradicts_design(const std::string& command, const nlohmann::json& design);

// Every training run runs in its own worker process (the detaudit executable, hidden subcommand
// `__train-worker`) with its target's environment (target_environment), so a run that dies by a
// signal or hangs becomes a failed run and the design goes on:
//   status "crashed"  reason = the signal, e.g. "SIGSEGV (Segmentation fault)"; fields "signal",
//                     "batches_done"
//   status "timeout"  the worker finished no batch for run_timeout_s seconds and was killed; reason
//                     "no progress for S s after batch K of N; worker killed"; fields "timeout_s",
//                     "batches_done"
//   status "error"    the worker could not start, exited without a result, or sent a malformed one
// (besides "ok", and "skipped"/"error" for a target that cannot run here or a run that fails with a
// status). The worker's stderr is appended to <out>/logs/train-<target>.log.
//
// Timeout: run_timeout_s is a stall timeout, not a budget for the whole run: the clock restarts at
// every finished batch. The first batch's clock starts with the worker and so also covers building
// the backend, loading the data and initialising the weights.
inline constexpr double kDefaultRunTimeoutS = 300;

struct TrainRunOptions {
  std::string out_dir, command;
  std::string exe;            // the detaudit executable, for training workers (hidden `__train-worker`)
  double run_timeout_s = 0;   // seconds a run may go without finishing a batch; 0: kDefaultRunTimeoutS
  bool fresh = false;
  std::function<void(const std::string&)> progress;
  // The caller's hold on out_dir (null: the run holds it for itself), as ProbeRunOptions::results_dir.
  ResultsDir* results_dir = nullptr;
};

// Runs the design, writing results.json after every finished run (an interrupted design resumes
// without redoing finished runs; failed runs, crashed and timed-out ones included, count as finished),
// then the analysis and the reports. Before any run, the data set is loaded and checked: a bad IDX
// file, or images the model cannot use (not 28x28, fewer than one batch), fail before any run.
// Returns
//   ok           the design ran to its end (whatever it found, crashes and timeouts included);
//   a failure    it could not run (one line), e.g. bad data, or out_dir in use by another process (DirLock);
//   interrupted  detaudit was interrupted (SIGINT/SIGTERM/SIGHUP, see probes/child.hpp): the run in
//                progress is dropped, results.json keeps the finished runs, no analysis or report is
//                written; the message says which signal ("interrupted by SIGINT (Interrupt)").
// When ok or interrupted, results->training holds the finished runs (those of earlier sessions included)
// and results->plan["runs"] the planned count (== planned_runs(d)), so the CLI can say "interrupted: N
// of M runs done".
Status run_train_design(const TrainDesign& d, const TrainRunOptions& opt, Results* results);
// Results as every reader takes them (report, analyze, check, compare, baseline save, a resumed train):
// load_checked_results, then each finished run's stored phases held against what its curve gives
// (analysis/phases.hpp phases_contradiction: a label edited in the file would reach the report's phase table);
// invalid, one line naming `path` and the run.
Status load_stored_results(const std::string& path, Results* out);
// Invalid when `r` (read from `dir`) is a merged analysis (`detaudit analyze`, plan.sources): it holds the runs of
// several machines under no machine of its own, so its cells would meet others under a key that is no machine's;
// `command` (check, compare) takes the directories it merged instead.
Status not_a_merged_analysis(const Results& r, const std::string& dir, const std::string& command);
// Invalid when `x` (read from `dx`) and `y` (from `dy`) hold one run: the same command (its --out included), started
// at the same instant on the same host, or, whatever their headers say, training runs that each took the same time
// to the nanosecond (two runs of a design never time alike). A copy of a run is no second run: merged with it, it
// would count its runs twice. With `whole_copy` (compare), only a copy of the outputs is refused: the same header
// with the same machine, plan, cells' outputs and training outcomes in any order, or, whatever the header says,
// those with every cell or training run timed alike to the nanosecond; a copy that a later import changed is the
// other run it now is.
Status not_one_run(const Results& x, const std::string& dx, const Results& y, const std::string& dy,
                   bool whole_copy = false);
// A finished training design's analysis made again from its runs (results read by load_stored_results), as
// `detaudit report` shows it: an analysis a file stores is not evidence, as a stored verdict is not. Other results
// are left as they are.
void reanalyze_training(Results* r);
// How many runs the design plans: per base target, seeds x replicates under (a) and (c), seeds under (b), (d), (e).
size_t planned_runs(const TrainDesign& d);

// ---- training workers ------------------------------------------------------------------------------
// Exchange format "detaudit-train-worker/1", one run per worker:
//   parent -> worker, on stdin, one JSON document (TrainRunRequest::to_json):
//     {"protocol": "detaudit-train-worker/1", "index": i, "key": "<run key>", "model": "autoencoder",
//      "target": "<spec>", "init_seed": s, "data_seed": s, "batches": N, "batch_size": B, "window": W,
//      "data_dir": "<dir or empty>", "data_fingerprint": "<32 hex>", "nudge": k or -1 (condition e's
//      nudge k, -1 none), "noise_every": K (0: no noise measurements), "prednet_config": "quick"|"tiny"|"paper"|""}
//   worker -> parent, on stdout, one JSON object per line:
//     {"event": "ready"}                                backend built, data loaded and checked
//     {"event": "step", "step": k, "loss": x}           after batch k (1-based) of N
//     {"event": "check", "done": k, "of": n}            prednet: after each batch of the held-out check
//     {"event": "run", "run": {"status": "ok", "final_loss", "curve", "curve_fingerprint",
//        "initial_weights_fingerprint", "weights_fingerprint", "seconds", "steps_per_second",
//        "phases"[, "nudge"][, "noise"][, "prediction", "frames_png"]}}  or {"status": "skipped"|"error", "reason"}
//   "ready", "step" and "check" restart the parent's stall timeout. A worker that dies or stops without "run"
//   is charged with its run. A malformed request: a message on stderr and exit code 2.
//
// Test hook (fault injection), read by the worker only: DETAUDIT_FAULT="train:<sel>:<fault>[,...]",
// where <sel> is a run's 1-based index in the plan ("run 3/10") or a substring of its key
// (condition|target|seed|replicate), and <fault> one of segv (an invalid write: SIGSEGV), ill
// (SIGILL), abort (SIGABRT) or hang (sleeps until killed). The fault fires after the run's first
// batch. Entries that do not start with "train:" are left to other hooks.
inline constexpr const char* kTrainWorkerSubcommand = "__train-worker";
inline constexpr const char* kTrainWorkerProtocol = "detaudit-train-worker/1";

struct TrainRunRequest {
  uint64_t index = 0;  // 1-based position in the plan
  std::string key;
  std::string model = "autoencoder";
  Spec target;
  uint64_t init_seed = 0, data_seed = 0;
  int batches = 0, batch_size = 0, window = 0;
  std::string data_dir;          // as the design has it ("" = Fashion-MNIST's default folder)
  std::string data_fingerprint;  // of the pixels the parent loaded: the worker must load the same ones
  int64_t nudge = -1;            // condition (e): which nudge; -1 none
  int noise_every = 0;           // 0: no noise measurements
  std::string prednet_config;    // model prednet: "quick", "tiny" or "paper"; else ""
  nlohmann::json to_json() const;
};
// Strict: every field present with its type and range (index >= 1, batches 1..10^7, batch_size
// 1..65536, window 1..batches, model "autoencoder", target a valid spec, fingerprint 32 hex digits),
// no unknown field. Invalid with one line otherwise.
Status parse_train_request(const std::string& text, TrainRunRequest* out);

// The fingerprint of a data set's pixels (what parent and worker compare).
std::string dataset_fingerprint(const Dataset& data);

// Worker side: reads one run's request from in_fd, runs it, writes its events to out_fd. Returns the
// exit code (0, or 2 for a malformed request or fault hook).
int train_worker_main(int in_fd, int out_fd);

// ---- detaudit analyze: one analysis over several results directories --------------------------------
// Merges the training runs of one design recorded in several results directories (machines, or runs
// on one machine) into one analysis (analysis/training.hpp) in which each directory is a source:
// <out>/results.json (plan.sources lists them), report.md and report.html.
// The designs must agree in model, design, seeds, batches, window, replicates, batch size, data seed
// (the batch order), initial-seed base and the data's pixel fingerprint; targets may differ. Fails
// with one line on: a directory that cannot be read or holds no training runs, designs that
// differ (naming the directories, the field and both values), a merged analysis given as input, or an
// output directory that is one of the inputs.
struct AnalyzeOptions {
  std::vector<std::string> dirs;
  std::string out_dir, command;
  std::function<void(const std::string&)> progress;
  // The caller's hold on out_dir (null: the analysis holds it for itself), as ProbeRunOptions::results_dir.
  ResultsDir* results_dir = nullptr;
};
Status analyze_training_dirs(const AnalyzeOptions& opt, Results* results);

}  // namespace detaudit
