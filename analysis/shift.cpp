#include "analysis/shift.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "analysis/resampling.hpp"
#include "analysis/stats.hpp"

namespace detaudit {

namespace {

// The standard normal's p quantile (Acklam's rational approximation refined by one Halley step on erfc;
// relative error below 1e-15 in double).
double normal_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  if (!(p > 0 && p < 1)) return std::numeric_limits<double>::quiet_NaN();
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double mean_of(const std::vector<double>& v) { return mean(std::span<const double>(v)); }

// The statistic for one arrangement: the mean over seeds of (mean of the "new" part - mean of the rest).
struct Pool {
  std::vector<double> values;  // the seed's runs, baseline first
  size_t n_new = 0;
};

double statistic(const std::vector<Pool>& pools, const std::vector<std::vector<char>>& is_new) {
  double s = 0;
  for (size_t j = 0; j < pools.size(); ++j) {
    double a = 0, b = 0;
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < pools[j].values.size(); ++i)
      if (is_new[j][i])
        a += pools[j].values[i], ++na;
      else
        b += pools[j].values[i], ++nb;
    s += a / double(na) - b / double(nb);
  }
  return s / double(pools.size());
}

double choose(size_t n, size_t k) {
  double r = 1;
  for (size_t i = 1; i <= k; ++i) r = r * double(n - k + i) / double(i);
  return r;
}

bool next_combination(std::vector<char>& mask) {  // masks with the same count of 1s, in order
  return std::prev_permutation(mask.begin(), mask.end());
}

}  // namespace

ShiftTest shift_test(const std::vector<SeedRuns>& seeds, double alpha, uint64_t seed) {
  ShiftTest t;
  std::vector<Pool> pools;
  double ss = 0, inv_sum = 0;
  for (auto& s : seeds) {
    if (s.base.empty() || s.now.empty()) continue;
    Pool p;
    p.values = s.base;
    p.values.insert(p.values.end(), s.now.begin(), s.now.end());
    p.n_new = s.now.size();
    pools.push_back(std::move(p));
    t.base_runs += int(s.base.size());
    t.new_runs += int(s.now.size());
    const double mb = mean_of(s.base), mn = mean_of(s.now);
    t.shift += mn - mb;
    for (double x : s.base) ss += (x - mb) * (x - mb);
    for (double x : s.now) ss += (x - mn) * (x - mn);
    t.within_df += int(s.base.size() + s.now.size()) - 2;
    inv_sum += 1.0 / double(s.base.size()) + 1.0 / double(s.now.size());
  }
  t.seeds = int(pools.size());
  if (t.seeds == 0) return t;
  t.shift /= t.seeds;
  t.within_sd = t.within_df > 0 ? std::sqrt(ss / t.within_df) : 0;
  // The shift's standard error from the within-seed variance, and what it can detect.
  const double se = t.within_sd * std::sqrt(inv_sum) / t.seeds;
  t.detectable = se * (normal_quantile(1 - alpha / 2) + normal_quantile(kPowerTarget));

  // Every seed starts with its new runs last; arrangements move the "new" labels within the seed.
  std::vector<std::vector<char>> is_new(pools.size());
  double arrangements = 1;
  for (size_t j = 0; j < pools.size(); ++j) {
    is_new[j].assign(pools[j].values.size(), 0);
    std::fill(is_new[j].end() - long(pools[j].n_new), is_new[j].end(), 1);
    arrangements *= choose(pools[j].values.size(), pools[j].n_new);
  }
  const double observed = std::fabs(statistic(pools, is_new));
  auto extreme = [&](double v) { return resampling::at_least(std::fabs(v), observed); };
  if (arrangements <= double(kExactArrangements)) {
    // Enumerate: an odometer over the seeds' label masks, each from its first (sorted, 1s first) mask.
    std::vector<std::vector<char>> m(pools.size());
    for (size_t j = 0; j < pools.size(); ++j) {
      m[j].assign(pools[j].values.size(), 0);
      std::fill(m[j].begin(), m[j].begin() + long(pools[j].n_new), 1);
    }
    uint64_t n = 0, hits = 0;
    double best = 0;
    std::vector<double> all;
    for (;;) {
      const double v = std::fabs(statistic(pools, m));
      ++n;
      hits += extreme(v);
      all.push_back(v);
      best = std::max(best, v);
      size_t j = 0;
      for (; j < m.size(); ++j) {
        if (next_combination(m[j])) break;
        std::fill(m[j].begin(), m[j].end(), 0);
        std::fill(m[j].begin(), m[j].begin() + long(pools[j].n_new), 1);
      }
      if (j == m.size()) break;
    }
    t.p = double(hits) / double(n);
    uint64_t at_best = 0;
    for (double v : all) at_best += resampling::at_least(v, best);
    t.min_p = double(at_best) / double(n);
    t.exact = true;
  } else {
    std::mt19937_64 g(seed);
    uint64_t hits = 0;
    std::vector<std::vector<char>> m = is_new;
    for (uint64_t k = 0; k < kDraws; ++k) {
      for (auto& mask : m) resampling::fisher_yates(mask, g);
      hits += extreme(statistic(pools, m));
    }
    t.p = double(1 + hits) / double(1 + kDraws);
    t.min_p = 1.0 / double(1 + kDraws);
    t.exact = false;
  }
  return t;
}

EquivalenceTest equivalence_test(const std::vector<SeedRuns>& seeds, double margin, double alpha) {
  EquivalenceTest e;
  std::vector<double> d;
  for (auto& s : seeds)
    if (!s.base.empty() && !s.now.empty()) d.push_back(mean_of(s.now) - mean_of(s.base));
  e.pairs = int(d.size());
  if (e.pairs < 2 || !(margin > 0)) return e;
  e.mean_diff = mean(std::span<const double>(d));
  e.sd_diff = sample_std(std::span<const double>(d));
  const double tq = student_t_quantile(1 - alpha, e.pairs - 1);
  const double half = tq * e.sd_diff / std::sqrt(double(e.pairs));
  e.lo = e.mean_diff - half;
  e.hi = e.mean_diff + half;
  if (e.lo > -margin && e.hi < margin)
    e.outcome = Equivalence::kEquivalent;
  else if (e.lo >= margin || e.hi <= -margin)
    e.outcome = Equivalence::kDifferent;
  else {
    e.outcome = Equivalence::kInconclusive;
    // Seeds for the interval to fit inside the margin with power 0.8 (normal approximation, the
    // observed sd; at least one more than now).
    const double room = margin - std::fabs(e.mean_diff);
    const double z = normal_quantile(1 - alpha) + normal_quantile(kPowerTarget);
    e.seeds_needed = room > 0 ? std::max(e.pairs + 1, int(std::ceil(std::pow(z * e.sd_diff / room, 2))))
                              : 0;  // 0: the difference itself is at the margin: no number of seeds shows it
  }
  return e;
}

}  // namespace detaudit
