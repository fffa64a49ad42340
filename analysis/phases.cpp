#include "analysis/phases.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "analysis/stats.hpp"

namespace detaudit {
namespace {

struct Prefix {
  std::vector<double> x, y, xx, xy, yy;  // prefix sums of centred values, size n + 1
};

Prefix prefix_sums(const std::vector<double>& x, const std::vector<double>& y, double cx, double cy) {
  const std::size_t n = x.size();
  Prefix p;
  for (auto* v : {&p.x, &p.y, &p.xx, &p.xy, &p.yy}) v->assign(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double u = x[i] - cx, v = y[i] - cy;
    p.x[i + 1] = p.x[i] + u;
    p.y[i + 1] = p.y[i] + v;
    p.xx[i + 1] = p.xx[i] + u * u;
    p.xy[i + 1] = p.xy[i] + u * v;
    p.yy[i + 1] = p.yy[i] + v * v;
  }
  return p;
}

// Residual sum of squares of the least-squares line through points [i, j), in O(1).
double segment_cost(const Prefix& p, std::size_t i, std::size_t j) {
  const double k = static_cast<double>(j - i);
  const double sx = p.x[j] - p.x[i], sy = p.y[j] - p.y[i];
  const double sxx = (p.xx[j] - p.xx[i]) - sx * sx / k;
  const double sxy = (p.xy[j] - p.xy[i]) - sx * sy / k;
  const double syy = (p.yy[j] - p.yy[i]) - sy * sy / k;
  double rss = sxx > 1e-300 ? syy - sxy * sxy / sxx : syy;
  return rss > 0.0 ? rss : 0.0;
}

// Direct (not prefix-sum) fit for the reported slope and intercept.
void fit_line(const std::vector<double>& x, const std::vector<double>& y, std::size_t first,
              std::size_t last, double& slope, double& intercept) {
  std::span<const double> xs(x.data() + first, last - first + 1), ys(y.data() + first, last - first + 1);
  const double mx = mean(xs), my = mean(ys);
  double sxx = 0.0, sxy = 0.0;
  for (std::size_t t = 0; t < xs.size(); ++t) {
    sxx += (xs[t] - mx) * (xs[t] - mx);
    sxy += (xs[t] - mx) * (ys[t] - my);
  }
  slope = sxx > 0.0 ? sxy / sxx : 0.0;
  intercept = my - slope * mx;
}

// Optimal partition minimising Σ RSS + β·#segments with every segment ≥ m points. Returns
// segment end positions (exclusive), ascending.
std::vector<std::size_t> optimal_partition(const Prefix& p, std::size_t n, std::size_t m, double beta) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> best(n + 1, kInf);
  std::vector<std::size_t> from(n + 1, 0);
  best[0] = 0.0;
  for (std::size_t j = m; j <= n; ++j) {
    for (std::size_t i = 0; i + m <= j; ++i) {
      if (best[i] == kInf) continue;
      const double c = best[i] + segment_cost(p, i, j) + beta;
      if (c < best[j]) {  // strict: the earliest start wins ties, deterministically
        best[j] = c;
        from[j] = i;
      }
    }
  }
  std::vector<std::size_t> ends;
  for (std::size_t j = n; j > 0; j = from[j]) ends.push_back(j);
  std::reverse(ends.begin(), ends.end());
  return ends;
}

SegmentKind classify(const Segment& s, const PhaseOptions& o, bool may_be_plateau = true) {
  if (may_be_plateau && std::fabs(s.slope) < o.plateau_max_abs_slope && s.x_span >= o.plateau_min_x_span)
    return SegmentKind::kPlateau;
  if (s.slope < o.drop_max_slope && s.delta_y <= o.drop_max_delta_y) return SegmentKind::kDrop;
  return SegmentKind::kOther;
}

// A plateau is a run of flat segments that together cover at least plateau_min_step_share of the steps
// (the segmentation may cut one plateau into several pieces); a shorter flat run is a drop or other.
void drop_short_plateaus(std::vector<Segment>& segs, const PhaseOptions& o) {
  for (std::size_t i = 0; i < segs.size();) {
    if (segs[i].kind != SegmentKind::kPlateau) {
      ++i;
      continue;
    }
    std::size_t j = i;
    double share = 0.0;
    for (; j < segs.size() && segs[j].kind == SegmentKind::kPlateau; ++j) share += segs[j].step_share;
    if (share < o.plateau_min_step_share)
      for (std::size_t k = i; k < j; ++k) segs[k].kind = classify(segs[k], o, false);
    i = j;
  }
}

// The label follows the first plateau and its escape, not the adjacency of segments: a plateau that
// ends in a smooth drop is often segmented plateau -> other -> drop, and was labelled "other" although
// the escape was found.
std::string label_of(const PhaseResult& r, double margin) {
  if (!r.plateau_segment) return "monophasic";
  if (!r.escape_bin) return "censored";
  // Before the plateau the curve came down onto it: a drop segment, or a start at least `margin`
  // (the escape margin, in log loss) above the plateau's median.
  const std::size_t first = r.segments[*r.plateau_segment].first_bin;
  bool fell = first > 0 && r.smoothed[0] >= r.plateau_median + margin;
  for (std::size_t i = 0; i < *r.plateau_segment; ++i) fell = fell || r.segments[i].kind == SegmentKind::kDrop;
  return fell ? "triphasic" : "biphasic";
}

}  // namespace

const char* segment_kind_name(SegmentKind k) {
  switch (k) {
    case SegmentKind::kPlateau: return "plateau";
    case SegmentKind::kDrop: return "drop";
    case SegmentKind::kOther: return "other";
  }
  return "other";
}

PhaseResult detect_phases(const std::vector<double>& losses, const PhaseOptions& opt) {
  PhaseResult r;
  const std::size_t T = losses.size();
  const std::size_t nb = std::min(T, std::max<std::size_t>(opt.max_bins, 1));
  // Bins of equal width in step count: bin k holds steps floor(kT/nb)+1 .. floor((k+1)T/nb).
  for (std::size_t k = 0; k < nb; ++k) {
    const std::size_t lo = k * T / nb, hi = (k + 1) * T / nb;  // [lo, hi) 0-based
    double s = 0.0;
    std::size_t cnt = 0;
    for (std::size_t t = lo; t < hi; ++t) {
      const double v = losses[t];
      if (std::isfinite(v) && v > 0.0) {
        s += std::log(v);
        ++cnt;
      } else {
        ++r.skipped_values;
      }
    }
    if (cnt == 0) continue;
    const std::size_t first = lo + 1, last = hi;
    r.x.push_back(std::log(0.5 * static_cast<double>(first + last)));
    r.y.push_back(s / static_cast<double>(cnt));
    r.bin_first_step.push_back(first);
    r.bin_last_step.push_back(last);
  }
  const std::size_t n = r.y.size();
  if (n < 3) {
    r.label = "insufficient";
    return r;
  }
  const bool too_short = losses.size() < opt.min_steps;

  // Centred moving average, truncated at the ends.
  r.smoothed.resize(n);
  const std::size_t h = opt.smooth_half_window;
  for (std::size_t t = 0; t < n; ++t) {
    const std::size_t a = t >= h ? t - h : 0, b = std::min(n - 1, t + h);
    double s = 0.0;
    for (std::size_t u = a; u <= b; ++u) s += r.y[u];
    r.smoothed[t] = s / static_cast<double>(b - a + 1);
  }

  // Noise scale from first differences (robust to the trend), with a floor for noise-free curves.
  std::vector<double> dy(n - 1);
  for (std::size_t t = 0; t + 1 < n; ++t) dy[t] = r.y[t + 1] - r.y[t];
  const double sigma_mad = 1.4826 * mad(dy) / std::sqrt(2.0);
  const auto [ymin, ymax] = std::minmax_element(r.y.begin(), r.y.end());
  const double floor = std::max(opt.sigma_floor_rel * (*ymax - *ymin), 1e-12);
  r.sigma = sigma_mad;
  if (!(r.sigma >= floor)) {
    r.sigma = floor;
    r.sigma_floored = true;
  }
  r.penalty = 3.0 * r.sigma * r.sigma * std::log(static_cast<double>(n));
  r.min_segment = std::min(n, std::max<std::size_t>(5, n / 50));

  const double cx = mean(r.x), cy = mean(r.y);
  const Prefix p = prefix_sums(r.x, r.y, cx, cy);
  const std::vector<std::size_t> ends = optimal_partition(p, n, r.min_segment, r.penalty);
  std::size_t start = 0;
  for (std::size_t e : ends) {
    Segment s;
    s.first_bin = start;
    s.last_bin = e - 1;
    s.first_step = 0.5 * static_cast<double>(r.bin_first_step[start] + r.bin_last_step[start]);
    s.last_step = 0.5 * static_cast<double>(r.bin_first_step[e - 1] + r.bin_last_step[e - 1]);
    fit_line(r.x, r.y, s.first_bin, s.last_bin, s.slope, s.intercept);
    s.x_span = r.x[s.last_bin] - r.x[s.first_bin];
    s.delta_y = s.slope * s.x_span;
    s.step_share = double(r.bin_last_step[e - 1] - r.bin_first_step[start] + 1) / double(losses.size());
    s.kind = classify(s, opt);
    r.segments.push_back(s);
    start = e;
  }
  drop_short_plateaus(r.segments, opt);
  if (!r.segments.empty()) r.first_margin = opt.plateau_max_abs_slope - std::fabs(r.segments[0].slope);
  for (std::size_t i = 0; i < r.segments.size(); ++i)
    if (r.segments[i].kind == SegmentKind::kPlateau) {
      r.plateau_segment = i;
      break;
    }
  if (too_short) {
    // The segments stay (for plots); no label, plateau or escape is claimed.
    r.label = "too short to tell";
    r.plateau_segment.reset();
    return r;
  }
  if (!r.plateau_segment) {
    r.label = label_of(r, opt.escape_margin);
    return r;
  }
  r.has_plateau = true;
  const Segment& pl = r.segments[*r.plateau_segment];
  r.plateau_median = median(std::span<const double>(r.y.data() + pl.first_bin, pl.last_bin - pl.first_bin + 1));
  const double threshold = r.plateau_median - opt.escape_margin;
  // Escape: the first bin at or after the plateau's last bin from which the smoothed curve stays
  // below the threshold for k consecutive bins (all k must exist: a crossing in the last k − 1
  // bins is not yet an escape and the run is censored).
  const std::size_t k = std::max<std::size_t>(opt.escape_consecutive, 1);
  std::size_t run = 0;
  for (std::size_t t = pl.last_bin; t < n; ++t) {
    run = r.smoothed[t] < threshold ? run + 1 : 0;
    if (run == k) {
      const std::size_t e = t + 1 - k;
      r.escape_bin = e;
      r.escape_step = 0.5 * static_cast<double>(r.bin_first_step[e] + r.bin_last_step[e]);
      break;
    }
  }
  r.censored = !r.escape_bin.has_value();
  r.label = label_of(r, opt.escape_margin);
  return r;
}

PhaseLabel phase_label(const PhaseResult& r) { return {r.label, r.has_plateau, r.escape_step, r.censored}; }

std::string phases_contradiction(const CurvePhases& stored, const std::vector<double>& curve) {
  const PhaseResult r = detect_phases(curve);
  const std::string gives = "but its curve of " + std::to_string(curve.size()) + " steps gives ";
  auto num = [](const std::optional<double>& v) { return v ? std::to_string(*v) : std::string("none"); };
  if (stored.label != r.label) return "phases.label is \"" + stored.label.substr(0, 40) + "\", " + gives + "\"" + r.label + "\"";
  if (stored.segments != r.segments.size())
    return "phases.segments is " + std::to_string(stored.segments) + ", " + gives + std::to_string(r.segments.size());
  if (stored.censored != r.censored) return std::string("phases.censored is ") + (stored.censored ? "true, " : "false, ") + gives + (r.censored ? "true" : "false");
  if (stored.escape_step != r.escape_step)
    return "phases.escape_step is " + num(stored.escape_step) + ", " + gives + num(r.escape_step);
  // (absent in results of older versions)
  if (stored.margin && (!r.first_margin || !(std::fabs(*stored.margin - *r.first_margin) <=
                                             1e-9 * std::max(1.0, std::fabs(*r.first_margin)))))
    return "phases.margin is " + num(stored.margin) + ", " + gives + num(r.first_margin);
  return "";
}

std::map<std::string, ConditionPhaseSummary> summarize_phases(const std::vector<RunPhases>& runs) {
  std::map<std::string, ConditionPhaseSummary> out;
  std::map<std::string, std::vector<double>> escapes;
  for (const auto& run : runs) {
    auto& s = out[run.condition];
    ++s.runs;
    ++s.label_counts[run.result.label];
    if (run.result.has_plateau) ++s.with_plateau;
    if (run.result.censored) ++s.censored;
    if (run.result.escape_step) {
      ++s.escaped;
      escapes[run.condition].push_back(*run.result.escape_step);
    }
  }
  for (auto& [cond, v] : escapes) {
    auto& s = out[cond];
    s.escape_median = quantile(v, 0.5);
    s.escape_q25 = quantile(v, 0.25);
    s.escape_q75 = quantile(v, 0.75);
  }
  return out;
}

}  // namespace detaudit
