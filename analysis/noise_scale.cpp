#include "analysis/noise_scale.hpp"

namespace detaudit {

NoiseScaleStep noise_scale_step(double small_sq, double big_sq, double b_small, double b_big) {
  NoiseScaleStep r;
  r.g2 = (b_big * big_sq - b_small * small_sq) / (b_big - b_small);
  r.s = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big);
  return r;
}

void NoiseScaleTracker::add(const NoiseScaleStep& x) {
  g2_ = decay_ * g2_ + (1 - decay_) * x.g2;
  s_ = decay_ * s_ + (1 - decay_) * x.s;
  weight_ = decay_ * weight_ + (1 - decay_);  // 1 - decay^t
  ++steps_;
}

double NoiseScaleTracker::g2() const { return weight_ > 0 ? g2_ / weight_ : 0.0; }
double NoiseScaleTracker::s() const { return weight_ > 0 ? s_ / weight_ : 0.0; }

std::optional<double> NoiseScaleTracker::b_simple() const {
  if (steps_ == 0 || !(g2() > 0)) return std::nullopt;
  return s() / g2();
}

}  // namespace detaudit
