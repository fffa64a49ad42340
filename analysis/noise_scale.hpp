// The gradient noise scale (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training",
// App. A): the noise SGD already lives with, on the scale the hardware noise
// of a nondeterministic target is put on.
//
// With G_B the mean gradient of a batch of B samples at fixed parameters, E|G_B|^2 = |G|^2 + tr(Sigma)/B.
// Two batch sizes B_s < B_b at the same parameters give unbiased estimates of both terms:
//   |G|^2_est = (B_b |G_b|^2 - B_s |G_s|^2) / (B_b - B_s),   S_est = (|G_s|^2 - |G_b|^2) / (1/B_s - 1/B_b).
// Their ratio is biased, so each gets its own exponential moving average and
//   B_simple = EMA(S_est) / EMA(|G|^2_est);
// a single step's estimates may be negative. The small batches are microbatches of the big one: |G_s|^2
// is the mean of the microbatches' squared norms (each an unbiased estimate of |G|^2 + tr(Sigma)/B_s).
// Norms are accumulated in double by the caller.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

#include "contract/training_run.hpp"

namespace detaudit {

struct NoiseScaleStep {
  double g2 = 0;  // |G|^2_est
  double s = 0;   // S_est = tr(Sigma)_est
};
// One step's unbiased estimates from the mean squared norm of the small batches, the squared norm of the
// big one and their sizes (0 < b_small < b_big).
NoiseScaleStep noise_scale_step(double small_sq, double big_sq, double b_small, double b_big);

// Exponential moving averages of both estimates: ema = decay * ema + (1 - decay) * x, started at the
// first step with bias correction (divided by 1 - decay^t), so the first values are not pulled to zero.
class NoiseScaleTracker {
 public:
  explicit NoiseScaleTracker(double decay = 0.95) : decay_(decay) {}
  void add(const NoiseScaleStep& s);
  double g2() const;  // bias-corrected EMA of |G|^2_est
  double s() const;   // bias-corrected EMA of S_est
  // EMA(S) / EMA(|G|^2); nullopt before any step or while EMA(|G|^2) <= 0 (no signal to divide by).
  std::optional<double> b_simple() const;
  size_t steps() const { return steps_; }

 private:
  double decay_, g2_ = 0, s_ = 0, weight_ = 0;
  size_t steps_ = 0;
};

// A run's measured points (contract/training_run.hpp NoiseTrace) through a NoiseScaleTracker: after each
// point, its step and the bias-corrected EMAs of |G|^2 and tr(Sigma), and B_simple (NaN while undefined).
struct NoiseSeries {
  std::vector<double> step, g2, trace, b_simple;
};
NoiseSeries noise_series(const NoiseTrace& t, double decay);

}  // namespace detaudit
