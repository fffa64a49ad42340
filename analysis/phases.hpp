// Learning-curve phases: plateaus, drops and the step at which a run escapes
// its first plateau, from an exact optimal piecewise-linear segmentation of log loss vs log step.
#pragma once
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contract/training_run.hpp"

namespace detaudit {

enum class SegmentKind { kPlateau, kDrop, kOther };
const char* segment_kind_name(SegmentKind k);

struct Segment {
  std::size_t first_bin = 0, last_bin = 0;  // inclusive bin indices
  double first_step = 0.0, last_step = 0.0;  // bin-centre steps (1-based)
  double slope = 0.0, intercept = 0.0;       // y = intercept + slope·x, y = log loss, x = log step
  double x_span = 0.0;                       // x(last) − x(first)
  double delta_y = 0.0;                      // fitted change slope·x_span
  double step_share = 0.0;                   // the share of the run's steps it covers
  SegmentKind kind = SegmentKind::kOther;
};

struct PhaseOptions {
  std::size_t max_bins = 1000;
  double plateau_max_abs_slope = 0.05;
  double plateau_min_x_span = 0.2;
  double drop_max_slope = -1.0;
  double drop_max_delta_y = -0.1;
  double escape_margin = 0.1;          // escape below plateau median − margin (in log loss)
  std::size_t smooth_half_window = 2;  // centred moving average over 2h+1 bins, truncated at ends
  std::size_t escape_consecutive = 5;  // k: bins in a row that must stay below the threshold
  double sigma_floor_rel = 1e-3;       // σ̂ ≥ this × range(y) (and ≥ 1e-12)
  // Below this many steps a label is knife-edge (two near-identical curves get two labels): "too short
  // to tell".
  std::size_t min_steps = 200;
  // A plateau (a run of flat segments) covers at least this share of the run's steps; a shorter flat
  // stretch is not one.
  double plateau_min_step_share = 0.1;
};

struct PhaseResult {
  // The binned curve: bin i covers steps [bin_first_step[i], bin_last_step[i]].
  std::vector<double> x, y;  // log(bin-centre step), mean of log loss in the bin
  std::vector<std::size_t> bin_first_step, bin_last_step;
  std::vector<double> smoothed;  // centred moving average of y
  double sigma = 0.0;            // σ̂ actually used (after the floor)
  bool sigma_floored = false;
  double penalty = 0.0;          // β = 3σ̂² ln n
  std::size_t min_segment = 0;   // max(5, n/50), capped at n
  std::vector<Segment> segments;
  // From the first plateau and its escape: "biphasic" (the plateau escaped, the curve at its level
  // from the start), "triphasic" (escaped, and the curve came down onto it: a drop segment before it,
  // or a start at least escape_margin above its median), "censored" (a plateau never escaped),
  // "monophasic" (no plateau segment at all), "insufficient" (fewer than 3 usable bins), "too short to
  // tell" (fewer than min_steps steps).
  // The first segment's margin from the plateau rule: plateau_max_abs_slope − |slope| (positive: flat
  // enough for a plateau, by this much; negative: too steep by this much). How near the label was.
  std::optional<double> first_margin;
  std::string label;
  bool has_plateau = false;
  std::optional<std::size_t> plateau_segment;  // index of the first plateau segment
  double plateau_median = 0.0;                 // median of y over that plateau's bins
  std::optional<std::size_t> escape_bin;
  std::optional<double> escape_step;           // centre step of escape_bin
  bool censored = false;                       // a plateau that is never escaped
  std::size_t skipped_values = 0;              // non-finite or non-positive losses ignored
};

// losses[t] is the loss after step t + 1.
PhaseResult detect_phases(const std::vector<double>& losses, const PhaseOptions& opt = {});

// What the summary needs of one run's phases (the worker stores it with the run; the analysis does not
// detect phases again).
struct PhaseLabel {
  std::string label;
  bool has_plateau = false;
  std::optional<double> escape_step;
  bool censored = false;
};
PhaseLabel phase_label(const PhaseResult& r);

// The phases a run stores are what its curve gives (the worker detected them with the default options): ""
// when they are, else one clause naming the field ("phases.label is \"biphasic\", but its curve of 3 steps
// gives \"too short to tell\""). The margin to 1e-9 of its size (another libm may round a logarithm apart).
std::string phases_contradiction(const CurvePhases& stored, const std::vector<double>& curve);

struct RunPhases {
  std::string condition;
  PhaseLabel result;
};

struct ConditionPhaseSummary {
  std::size_t runs = 0;
  std::map<std::string, std::size_t> label_counts;
  std::size_t with_plateau = 0;
  std::size_t escaped = 0;
  std::size_t censored = 0;
  // Escape-step quantiles among escaped runs (linear interpolation); absent when none escaped.
  std::optional<double> escape_median, escape_q25, escape_q75;
};

// Keyed by condition label; std::map keeps the order deterministic.
std::map<std::string, ConditionPhaseSummary> summarize_phases(const std::vector<RunPhases>& runs);

}  // namespace detaudit
