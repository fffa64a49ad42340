#include "analysis/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

namespace detaudit {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> sorted_copy(std::span<const double> xs) {
  std::vector<double> v(xs.begin(), xs.end());
  std::sort(v.begin(), v.end());
  return v;
}

double quantile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return kNaN;
  q = std::clamp(q, 0.0, 1.0);
  const double h = static_cast<double>(v.size() - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = h - static_cast<double>(lo);
  if (frac == 0.0 || v[lo] == v[hi]) return v[lo];
  return v[lo] + frac * (v[hi] - v[lo]);
}

// Continued fraction for I_x(a, b) (Numerical Recipes §6.4 form), evaluated by modified Lentz.
double beta_continued_fraction(double x, double a, double b) {
  constexpr int kMaxIter = 10000;
  constexpr double kEps = 1e-16;
  constexpr double kTiny = 1e-300;
  const double qab = a + b, qap = a + 1.0, qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= kMaxIter; ++m) {
    const double m2 = 2.0 * m;
    // even step
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    // odd step
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < kEps) break;
  }
  return h;
}
}  // namespace

double mean(std::span<const double> xs) {
  if (xs.empty()) return kNaN;
  const double x0 = xs[0];
  double s = 0.0;
  for (double x : xs) s += x - x0;
  return x0 + s / static_cast<double>(xs.size());
}

double sample_variance(std::span<const double> xs) {
  if (xs.size() < 2) return 0.0;
  const double m = mean(xs);
  double ss = 0.0;
  for (double x : xs) ss += (x - m) * (x - m);
  return ss / static_cast<double>(xs.size() - 1);
}

double sample_std(std::span<const double> xs) { return std::sqrt(sample_variance(xs)); }

double median(std::span<const double> xs) { return quantile(xs, 0.5); }

double finite_median(std::span<const double> xs) {
  std::vector<double> v;
  for (double x : xs)
    if (std::isfinite(x)) v.push_back(x);
  return median(v);
}

double mad(std::span<const double> xs) {
  if (xs.empty()) return kNaN;
  const double med = median(xs);
  std::vector<double> dev(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) dev[i] = std::fabs(xs[i] - med);
  return median(dev);
}

double quantile(std::span<const double> xs, double q) { return quantile_sorted(sorted_copy(xs), q); }

double log_gamma(double x) { return std::lgamma(x); }

double incomplete_beta(double x, double a, double b) {
  if (std::isnan(x) || std::isnan(a) || std::isnan(b) || a <= 0.0 || b <= 0.0) return kNaN;
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double log_front =
      log_gamma(a + b) - log_gamma(a) - log_gamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  // The fraction converges fast for x < (a + 1)/(a + b + 2); otherwise use I_x(a,b) = 1 − I_{1−x}(b,a).
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(x, a, b) / a;
  return 1.0 - front * beta_continued_fraction(1.0 - x, b, a) / b;
}

double f_upper_p(double f, double d1, double d2) {
  if (std::isnan(f) || std::isnan(d1) || std::isnan(d2) || d1 <= 0.0 || d2 <= 0.0) return kNaN;
  if (f <= 0.0) return 1.0;
  if (std::isinf(f)) return 0.0;
  const double p = incomplete_beta(d2 / (d2 + d1 * f), d2 / 2.0, d1 / 2.0);
  return std::clamp(p, 0.0, 1.0);
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  if (df == 1) return std::tan(std::numbers::pi * (p - 0.5));
  if (df == 2) return (2 * p - 1) / std::sqrt(2 * p * (1 - p));
  // Upper tail P(T > t) = I_{df/(df+t²)}(df/2, 1/2) / 2, decreasing in t: bisect until the interval
  // cannot shrink any more (adjacent doubles).
  double q = 1 - p;
  auto upper = [&](double t) { return 0.5 * incomplete_beta(df / (df + t * t), df / 2, 0.5); };
  double lo = 0, hi = 1;
  while (upper(hi) > q && hi < 1e300) hi *= 2;
  for (int i = 0; i < 2000; ++i) {
    double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (upper(mid) > q ? lo : hi) = mid;
  }
  return lo + (hi - lo) / 2;
}

double f_quantile(double p, double d1, double d2) {
  if (!(p > 0 && p < 1) || !(d1 > 0) || !(d2 > 0)) return std::numeric_limits<double>::quiet_NaN();
  // f_upper_p decreases in f: find f with P(F >= f) = 1 - p.
  const double q = 1 - p;
  double lo = 0, hi = 1;
  while (f_upper_p(hi, d1, d2) > q && hi < 1e300) hi *= 2;
  for (int i = 0; i < 4000; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (f_upper_p(mid, d1, d2) > q ? lo : hi) = mid;
  }
  return lo + (hi - lo) / 2;
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double noncentral_t_power(double delta, double df, double crit) {
  if (!(df > 0) || !std::isfinite(delta) || !std::isfinite(crit)) return std::numeric_limits<double>::quiet_NaN();
  // S = √(V/df) has density f(s) = 2·df·s·χ²_df(df·s²); it lies within 1 ± 12/√(2 df) but for small df, whose
  // upper tail reaches s ≈ 8 at df = 1 (P(χ²_1 > 64) ≈ 1e-15).
  const double sd = 1.0 / std::sqrt(2.0 * df);
  const double lo = std::max(0.0, 1.0 - 12.0 * sd), hi = 1.0 + 12.0 * sd + (df < 30 ? 8.0 / std::sqrt(df) : 0.0);
  const double log_norm = (df / 2) * std::log(df / 2) - std::lgamma(df / 2) + std::log(2.0);
  auto density = [&](double s) {  // f(s), computed in logs: log(2) + (df/2)·log(df/2) − lgamma(df/2) + (df−1)·log s − df·s²/2
    if (s <= 0) return df == 1 ? std::exp(log_norm) : 0.0;  // df < 1: an integrable pole, left out
    return std::exp(log_norm + (df - 1) * std::log(s) - df * s * s / 2);
  };
  auto f = [&](double s) {
    return density(s) * (normal_cdf(delta - crit * s) + normal_cdf(-delta - crit * s));
  };
  constexpr int kIntervals = 4000;  // even: Simpson's rule
  const double h = (hi - lo) / kIntervals;
  double sum = f(lo) + f(hi);
  for (int i = 1; i < kIntervals; ++i) sum += (i % 2 ? 4.0 : 2.0) * f(lo + i * h);
  return std::clamp(sum * h / 3, 0.0, 1.0);
}

double t_test_power(double d, double n_eff, double df, double alpha) {
  if (!(df > 0) || !std::isfinite(d) || !(n_eff > 0)) return std::numeric_limits<double>::quiet_NaN();
  return noncentral_t_power(std::fabs(d) * std::sqrt(n_eff), df, student_t_quantile(1 - alpha / 2, df));
}

double t_detectable_noncentrality(double df, double alpha, double power) {
  if (!(df > 0) || !(alpha > 0 && alpha < 1) || !(power > 0 && power < 1))
    return std::numeric_limits<double>::quiet_NaN();
  const double crit = student_t_quantile(1 - alpha / 2, df);
  if (noncentral_t_power(0, df, crit) >= power) return 0;
  double lo = 0, hi = 1;
  while (noncentral_t_power(hi, df, crit) < power && hi < 1e6) hi *= 2;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (noncentral_t_power(mid, df, crit) < power ? lo : hi) = mid;
  }
  return hi;
}

std::optional<std::size_t> n_for_power(double d, bool two_groups, double power, double alpha, std::size_t limit) {
  if (!std::isfinite(d) || d == 0) return std::nullopt;
  for (std::size_t n = 2; n <= limit; n = n < 64 ? n + 1 : n + n / 16) {
    const double pw = two_groups ? t_test_power(d, double(n) / 2, double(2 * n - 2), alpha)
                                 : t_test_power(d, double(n), double(n - 1), alpha);
    if (pw >= power) {
      // Past 64 the search steps by about 6%: walk back to the first n that reaches it.
      while (n > 2 && (two_groups ? t_test_power(d, double(n - 1) / 2, double(2 * n - 4), alpha)
                                  : t_test_power(d, double(n - 1), double(n - 2), alpha)) >= power)
        --n;
      return n;
    }
  }
  return std::nullopt;
}

}  // namespace detaudit
