#include "analysis/noise_scale.hpp"

#include <cmath>

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

NoiseSeries noise_series(const NoiseTrace& t, double decay) {
  NoiseSeries out;
  NoiseScaleTracker tr(decay);
  for (const NoisePoint& p : t.points) {
    tr.add(noise_scale_step(p.small_sq, p.big_sq, double(t.b_small), double(t.b_big)));
    out.step.push_back(double(p.step));
    out.g2.push_back(tr.g2());
    out.trace.push_back(tr.s());
    out.b_simple.push_back(tr.b_simple().value_or(NAN));
  }
  return out;
}

}  // namespace detaudit
