// A training run: one model trained once on one target, in one cell of a design. This struct is what
// results.json stores under "training" (README "Results contract"), what the analysis
// (analysis/training.hpp) and the reports read, and what baselines, check, qualify and the history
// keep. Its status is the observations' status (ObsStatus): ok, crashed, timeout, skipped, error.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/observation.hpp"
#include "contract/verdict.hpp"

namespace detaudit {

// A design's conditions: (a) and (b) start from random initial weights, (c), (d) and (e) from fixed ones; (a) and
// (c) run with nondeterminism on. One place for what every reader of a condition derives from it.
inline bool condition_random_init(std::string_view c) { return c == "a" || c == "b"; }
inline bool condition_nondeterministic(std::string_view c) { return c == "a" || c == "c"; }
// (d) alone runs every replicate of a seed to the same bits: fixed initial weights, nondeterminism off and no
// nudge ((e) nudges one weight per replicate).
inline bool condition_replicates_agree(std::string_view c) { return c == "d"; }
// (e) nudges one weight of the fixed start per replicate.
inline bool condition_nudged(std::string_view c) { return c == "e"; }

// The phase label of one run's learning curve (analysis/phases.hpp detects it, once, in the worker).
struct CurvePhases {
  std::string label;  // biphasic, triphasic, censored, monophasic, insufficient, too short to tell
  uint64_t segments = 0;
  std::optional<double> escape_step;  // the step the run escaped its first plateau at
  bool censored = false;              // a plateau never escaped
  // The first segment's margin from the plateau rule (0.05 − |slope of log loss on log step|): how near
  // the label was to the other side. Absent in results of older versions.
  std::optional<double> margin;
  // Every label but monophasic and insufficient has a plateau.
  bool has_plateau() const { return label == "biphasic" || label == "triphasic" || label == "censored"; }
};

// Condition (e), one-ULP sensitivity: the run starts from the fixed initial weights with one weight moved
// by one ULP (std::nextafter toward +infinity). Nudge k of a design moves the same weight on every target.
struct WeightNudge {
  uint64_t index = 0;      // k: which nudge of the design (0-based)
  uint64_t parameter = 0;  // the weight's flat index over every parameter, in the model's params() order
  std::string tensor;      // where it is: "layer 3 (conv2d) weight [1234]"
  double from = 0, to = 0; // its value before and after (floats, exactly)
};

// The gradient noise measurements of one run (`train --noise-scale`, analysis/noise_scale.hpp): at every
// `every`-th batch, with the parameters of that step, the squared norm of the batch's gradient (b_big
// samples), the mean squared norm of its b_big / b_small microbatches' gradients (b_small samples each)
// and, at a few of those points, |g1 - g2|^2 between that batch's gradient and the same gradient computed
// again (the hardware's noise; 0 exactly on a deterministic target). Norms accumulated in double.
struct NoisePoint {
  uint64_t step = 0;  // the batch (1-based) the point was measured at, before its update
  double big_sq = 0, small_sq = 0;
  std::optional<double> hw_sq;  // |g1 - g2|^2, where measured
};
// The microbatch of a noise measurement on batches of b_big: a quarter where the batch allows it (64 -> 16), else a
// half.
inline int noise_microbatch(int b_big) { return b_big >= 8 && b_big % 4 == 0 ? b_big / 4 : b_big / 2; }
// The hardware repeats of a run of `batches` measured every `every`: at up to kNoiseHardwarePoints of its
// ceil(batches / every) points, evenly spread: point k (0-based) where k is a multiple of the stride
// ceil(points / kNoiseHardwarePoints).
inline constexpr int kNoiseHardwarePoints = 6;
inline int noise_hardware_stride(int batches, int every) {
  const int points = (batches + every - 1) / every;
  return std::max(1, (points + kNoiseHardwarePoints - 1) / kNoiseHardwarePoints);
}
inline bool noise_hardware_point(int batches, int every, uint64_t k) {
  return k % uint64_t(noise_hardware_stride(batches, every)) == 0;
}
// "1, 4, 7" (1-based batches), for messages.
std::string noise_hardware_points_text(int batches, int every);

// Training sets whose size the tool knows without reading them, so a results.json claiming another size is refused:
// PredNet's built-in moving sprites (every design whose data is not an .npy video) always train on
// kPredNetTrainSequences sequences, whatever images they are cut from; and the pixels of Debian's Fashion-MNIST
// training set (dataset-fashion-mnist, the autoencoder's default) fingerprint to kFashionMnistTrainFingerprint and
// hold kFashionMnistTrainExamples images.
inline constexpr int kPredNetTrainSequences = 500;  // the paper's samples per epoch
inline constexpr int kPredNetHeldOutSequences = 40;  // the built-in sprites' next-frame check (whole batches of them)
inline constexpr std::string_view kFashionMnistTrainFingerprint = "88873690894f7298c11b6543ae1530f3";
inline constexpr uint64_t kFashionMnistTrainExamples = 60000;
// PredNet's built-in sprites of each configuration, cut from that Fashion-MNIST (no --data): the fingerprint of their
// pixels (training then held-out sequences) and the error of copying the last frame over the 40 held-out sequences in
// batches of 4. TrainCli.BuiltinSpritesAreTheOnesTheToolKnows trains on them and checks both (the paper's
// configuration is not kept: its sprites take 330 MB).
struct BuiltinSprites {
  std::string_view config, fingerprint;
  double copy_last_mse;
};
inline constexpr BuiltinSprites kPredNetBuiltinSprites[] = {
    {"tiny", "fec9b78983a30e44dcc1f674ae3b0de5", 0.015891888309406233},
    {"quick", "b5909e53b2c0d45e55a8efe71d6c57d4", 0.03643957805497781},
};
inline const BuiltinSprites* builtin_sprites(std::string_view config) {
  for (const BuiltinSprites& b : kPredNetBuiltinSprites)
    if (b.config == config) return &b;
  return nullptr;
}
// The reason of a training run killed for making no progress: its limit and how far it got.
std::string timeout_reason(double timeout_s, uint64_t batches_done, int batches);
// How many weights (flat, over the model's parameters in order) each model the tool trains has: a nudge moves one of
// them. prednet_config is PredNet's configuration (quick, tiny or paper); 0 for a model or configuration it does not
// know.
uint64_t model_weights(std::string_view model, std::string_view prednet_config);

struct NoiseTrace {
  int every = 0, b_small = 0, b_big = 0;
  // The training set's size (images, or PredNet's sequences): the largest batch there can be. 0 in
  // results of older versions.
  uint64_t examples = 0;
  std::vector<NoisePoint> points;
};

// PredNet runs: the next-frame check on held-out sequences (models/prednet_train.hpp): the mean squared
// error of the predictions of frames 1 .. nt-1 and of copying the last frame instead.
struct NextFrameCheck {
  uint64_t sequences = 0;
  double mse = 0, copy_last_mse = 0;
};

// The least time a batch of training takes on any machine (contract/training_run.cpp says why).
inline constexpr double kShortestBatchSeconds = 1e-6;

struct TrainingRun {
  // Identity: its cell of the design.
  std::string key;        // condition|target|seed|replicate, unique within a design
  std::string model, design;
  std::string condition;  // "a", "b", "c", "d", "e"
  bool random_init = false;       // "init": "random" | "fixed"
  bool nondeterministic = false;  // "nondeterminism": "on" | "off" ("determinism" is its opposite)
  std::string target, base_target;
  uint64_t seed = 0, data_seed = 0;
  int replicate = 0, batches = 0, window = 0;
  std::string machine_id;  // first 16 hex digits of the machine fingerprint's hash
  // In a merged analysis (detaudit analyze): the index of the results directory the run came from
  // (Results::sources); 0 otherwise, and then not written.
  int source = 0;

  ObsStatus status = ObsStatus::kError;
  std::string reason;  // why it did not finish (status other than ok)

  // Finished runs (status ok). Non-finite losses are NaN here and null in JSON.
  double final_loss = NAN;  // mean loss of the last `window` batches
  std::vector<double> curve;
  std::string curve_fingerprint, initial_weights_fingerprint, weights_fingerprint;
  double seconds = 0, steps_per_second = 0;
  std::optional<CurvePhases> phases;
  std::optional<WeightNudge> nudge;  // condition (e)
  std::optional<NoiseTrace> noise;   // measured when the design asks for it
  std::optional<NextFrameCheck> prediction;  // prednet
  std::string frames_png;  // prednet: base64 PNG of a held-out sequence, true frames over predicted ones

  // Runs that died (crashed, timeout, some errors).
  std::string signal;                   // "SIGSEGV"
  std::optional<double> timeout_s;      // the stall timeout that killed it
  std::optional<uint64_t> batches_done;

  bool ok() const { return status == ObsStatus::kOk; }
  const char* init_name() const { return random_init ? "random" : "fixed"; }
  const char* nondeterminism_name() const { return nondeterministic ? "on" : "off"; }
};

nlohmann::json to_json(const TrainingRun& r);
nlohmann::json to_json(const CurvePhases& p);
nlohmann::json to_json(const WeightNudge& n);
nlohmann::json to_json(const NoiseTrace& n);
nlohmann::json to_json(const NextFrameCheck& n);
// Strict: types of every field, known values of status, condition, init and nondeterminism, no unknown
// field; a finished run must have its condition, target, seed, replicate, final loss and curve. An
// invalid Status with one line naming the field's path ("training[3].seed must be ...").
Status from_json(const nlohmann::json& j, TrainingRun* out, const std::string& path = "run");

// The final loss of a curve: the mean of its last `window` points (at least 1, at most all), each point the
// float the worker recorded, summed in double in order. NaN for an empty curve.
double curve_window_mean(const std::vector<double>& curve, int window);
// What a finished run can check against itself, so that an edited run is refused instead of judged: its
// final loss is its curve's window mean (curve_window_mean, or the same sum over the curve's doubles as
// written: fixtures that never passed through a float), and its curve fingerprint, where it has one, is
// the fingerprint of the curve's floats. One line naming the field.
Status check_run_consistent(const TrainingRun& r, const std::string& path);

// A training run judged on its own, without a baseline: a finished run PASSes (a diverged one, whose final
// loss is not finite, WARNs), a run that crashed, timed out or ended in an error FAILs its cell, a skipped
// run (its target cannot run here) is a SKIP. A finished run of a condition with nondeterminism off ran the
// target's deterministic variant, which promises the same bits every time: where its noise trace computed one
// batch's gradient twice at the same weights (hw_sq) and the two differed, it broke that promise and FAILs.
// `reason` says why for all but PASS.
struct RunVerdict {
  Verdict verdict = Verdict::kPass;
  std::string reason;
};
RunVerdict judge_training_run(const TrainingRun& r);
// The bits of what a run's final weights predict on the held-out data (PredNet: the sequences checked, the next-frame
// and copy-last errors, the frames), "" for a run without a prediction: part of a run's outcome, compared as bytes.
std::string prediction_bits(const TrainingRun& r);
// A finished run's outcome as bytes: its weights, the bits of its final loss, of every point of its learning curve, of
// every noise measurement and of its held-out prediction. Two runs that promise one outcome give the same bytes.
std::string outcome_bits(const TrainingRun& r);
// Its fingerprint (32 hex digits): what a baseline keeps of a run's whole outcome, so that a check sees a learning
// curve, a noise measurement or a held-out prediction that moved while the final loss and weights did not.
std::string outcome_fingerprint(const TrainingRun& r);
// Every run of a design, in its order: judge_training_run, and beside it what only runs together show. (d)
// starts every replicate of a seed from the same weights with nondeterminism off and no nudge, so they end in
// the same bits: where a seed's finished replicates (per source and target) do not all give one final loss,
// weights, learning curve and noise trace, they broke the deterministic variant's promise, and every one of them
// FAILs (no run says which is right); so do runs of several conditions that start alike ((b)'s first seed and (d)).
std::vector<RunVerdict> judge_training_runs(const std::vector<TrainingRun>& runs);
// Whether a FAIL of a finished run is a broken promise (what judge_training_runs adds to a run's own status).
inline bool broke_promise(const TrainingRun& r, const RunVerdict& v) { return r.ok() && v.verdict == Verdict::kFail; }

}  // namespace detaudit
