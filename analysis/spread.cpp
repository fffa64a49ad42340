#include "analysis/spread.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "analysis/resampling.hpp"
#include "analysis/stats.hpp"
#include "analysis/variance.hpp"

namespace detaudit {
namespace {

void add_note(std::string& notes, const std::string& s) {
  if (!notes.empty()) notes += "; ";
  notes += s;
}

// |y - median| of each value of a group.
std::vector<double> abs_dev(const std::vector<double>& g) {
  const double m = median(g);
  std::vector<double> z(g.size());
  for (size_t i = 0; i < g.size(); ++i) z[i] = std::fabs(g[i] - m);
  return z;
}

// Brown–Forsythe F of the split `in1` (true: group 1) of `pooled`: one-way ANOVA of the absolute
// deviations about each group's median, between-groups MS over within-groups MS.
double bf_stat(const std::vector<double>& pooled, const std::vector<char>& in1) {
  std::vector<double> g1, g2;
  for (size_t i = 0; i < pooled.size(); ++i) (in1[i] ? g1 : g2).push_back(pooled[i]);
  const std::vector<double> z1 = abs_dev(g1), z2 = abs_dev(g2);
  const double m1 = mean(z1), m2 = mean(z2);
  const double n1 = double(z1.size()), n2 = double(z2.size()), grand = (n1 * m1 + n2 * m2) / (n1 + n2);
  const double ss_between = n1 * (m1 - grand) * (m1 - grand) + n2 * (m2 - grand) * (m2 - grand);
  double ss_within = 0;
  for (double z : z1) ss_within += (z - m1) * (z - m1);
  for (double z : z2) ss_within += (z - m2) * (z - m2);
  return resampling::permutation_stat(ss_between, ss_within / (n1 + n2 - 2));  // MS_between: df 1
}

// C(n, k), or limit + 1 when larger.
size_t choose_capped(size_t n, size_t k, size_t limit) {
  k = std::min(k, n - k);
  double c = 1;
  for (size_t i = 1; i <= k; ++i) {
    c = c * double(n - k + i) / double(i);
    if (c > double(limit)) return limit + 1;
  }
  return size_t(std::llround(c));
}

}  // namespace

SpreadComparison compare_spread(const std::vector<double>& g1, const std::vector<double>& g2, size_t permutations,
                                uint64_t seed, size_t resamples) {
  SpreadComparison r;
  r.n1 = g1.size();
  r.n2 = g2.size();
  if (r.n1 < 2 || r.n2 < 2) {
    add_note(r.notes, fmt::format("not testable: {} and {} runs (at least 2 in each group)", r.n1, r.n2));
    return r;
  }
  r.sd1 = sample_std(g1);
  r.sd2 = sample_std(g2);
  if (r.sd2 > 0) r.sd_ratio = r.sd1 / r.sd2;
  r.mean_abs_dev_diff = mean(abs_dev(g1)) - mean(abs_dev(g2));
  {
    const std::vector<double> z1 = abs_dev(g1), z2 = abs_dev(g2);
    r.z_sd = std::sqrt((sample_variance(z1) * double(r.n1 - 1) + sample_variance(z2) * double(r.n2 - 1)) /
                       double(r.n1 + r.n2 - 2));
  }

  std::vector<double> pooled(g1);
  pooled.insert(pooled.end(), g2.begin(), g2.end());
  std::vector<char> in1(pooled.size(), 0);
  std::fill(in1.begin(), in1.begin() + r.n1, 1);
  const double f_obs = bf_stat(pooled, in1);
  const double df2 = double(r.n1 + r.n2 - 2);
  if (std::isfinite(f_obs) && f_obs > 0) {
    r.f = f_obs;
    r.p_f = f_upper_p(f_obs, 1, df2);
  } else if (!(f_obs > 0)) {
    add_note(r.notes, "equal absolute deviations in both groups: nothing to test");
    return r;
  } else {
    add_note(r.notes, "F infinite (no spread of the deviations within either group)");
  }

  const size_t n = pooled.size(), splits = choose_capped(n, r.n1, resampling::kExactLimit);
  const double floor_p = (r.n1 == r.n2 ? 2.0 : 1.0) / double(splits);
  size_t count = 0;
  if (splits <= resampling::kExactLimit) {
    // Every split once: in1 runs through the permutations of its multiset in lexicographic order.
    std::vector<char> split(n, 0);
    std::fill(split.end() - long(r.n1), split.end(), 1);
    do count += resampling::at_least(bf_stat(pooled, split), f_obs);
    while (std::next_permutation(split.begin(), split.end()));
    r.exact = true;
    r.permutations = splits;
    r.p = double(count) / double(splits);
    r.min_p = floor_p;
  } else {
    std::mt19937_64 g(seed);
    std::vector<char> split(in1);
    for (size_t i = 0; i < permutations; ++i) {
      resampling::fisher_yates(split, g);
      count += resampling::at_least(bf_stat(pooled, split), f_obs);
    }
    r.permutations = permutations;
    r.p = (1.0 + double(count)) / (1.0 + double(permutations));
    r.min_p = std::max(floor_p, 1.0 / (1.0 + double(permutations)));
  }
  r.no_power = r.min_p > 0.05;
  if (r.no_power)
    add_note(r.notes, fmt::format("no power: {} and {} runs give {} splits, so p is at least {:.3g} > 0.05", r.n1, r.n2,
                                  splits, r.min_p));

  if (std::min(r.n1, r.n2) < kMinBootstrapGroup) {
    add_note(r.notes, fmt::format("no interval: {} and {} runs (at least {} in each group are needed)", r.n1, r.n2,
                                  kMinBootstrapGroup));
    return r;
  }
  std::mt19937_64 g(seed ^ 0x5DEECE66Dull);
  std::vector<double> diffs(resamples), b1(r.n1), b2(r.n2);
  for (size_t k = 0; k < resamples; ++k) {
    for (auto& x : b1) x = g1[resampling::uniform_index(g, r.n1)];
    for (auto& x : b2) x = g2[resampling::uniform_index(g, r.n2)];
    diffs[k] = mean(abs_dev(b1)) - mean(abs_dev(b2));
  }
  r.diff_ci = std::pair{quantile(diffs, 0.025), quantile(diffs, 0.975)};
  return r;
}

double error_excess_kurtosis(const std::vector<std::vector<double>>& runs_by_seed) {
  // For residuals e = ε − ε̄ in a group of n: Var(e) = (1 − 1/n)σ², and the fourth cumulant is
  // κ₄·((1 − 1/n)⁴ + (n − 1)/n⁴); the residuals' excess kurtosis is the errors' times c(n) =
  // ((1 − 1/n)⁴ + (n − 1)/n⁴)/(1 − 1/n)². Pooled: weighted by each group's residual count.
  double m2 = 0, m4 = 0, c = 0;
  size_t count = 0;
  for (const auto& g : runs_by_seed) {
    if (g.size() < 2) continue;
    const double n = double(g.size()), m = mean(g), q = 1 - 1 / n;
    for (double x : g) m2 += (x - m) * (x - m), m4 += std::pow(x - m, 4);
    c += n * (std::pow(q, 4) + (n - 1) / std::pow(n, 4)) / (q * q);
    count += g.size();
  }
  if (count == 0 || !(m2 > 0)) return std::numeric_limits<double>::quiet_NaN();
  m2 /= double(count), m4 /= double(count), c /= double(count);
  return (m4 / (m2 * m2) - 3) / c;
}

RunSeedRatio run_seed_ratio(const std::vector<std::vector<double>>& runs_by_seed, double kurtosis_floor) {
  RunSeedRatio r;
  std::vector<std::vector<double>> groups;
  for (const auto& g : runs_by_seed)
    if (!g.empty()) groups.push_back(g);
  r.seeds = groups.size();
  for (const auto& g : groups) r.runs += g.size();
  if (r.seeds < 2 || r.runs <= r.seeds) {
    add_note(r.notes, fmt::format("not estimable: {} seeds and {} runs (at least 2 seeds, and a seed with 2 runs)",
                                  r.seeds, r.runs));
    return r;
  }
  const OneWayResult a = one_way_anova(groups);
  const double N = double(r.runs), s = double(r.seeds);
  double sum_sq = 0;
  for (const auto& g : groups) sum_sq += double(g.size()) * double(g.size());
  r.n0 = (N - sum_sq / N) / (s - 1);
  r.ms_seed = a.between.ms;
  r.ms_run = a.within.ms;
  // Heavy tails: MS_run's degrees of freedom from the variance it has with kurtosis γ.
  r.kurtosis = kurtosis_floor;
  if (N - s >= 20)
    if (const double g = error_excess_kurtosis(groups); std::isfinite(g)) r.kurtosis = std::max(r.kurtosis, g);
  auto df_run = [&](double runs, double seeds) {
    const double nu = runs - seeds;
    return 2 / (2 / nu + std::max(r.kurtosis, 0.0) / runs);
  };
  const double d1 = s - 1, d2 = df_run(N, s);
  r.df_run = d2;
  const double q_hi = f_quantile(0.975, d1, d2), q_lo = f_quantile(0.025, d1, d2);
  r.interval_factor = q_hi / q_lo;
  // The factor falls with the seeds: the first k (at these runs per seed) where it is 4 or less, by
  // doubling and then bisection.
  const double n_per_seed = N / s;
  auto factor_at = [&](std::size_t k) {
    const double e1 = double(k) - 1, e2 = df_run(double(k) * n_per_seed, double(k));
    return f_quantile(0.975, e1, e2) / f_quantile(0.025, e1, e2);
  };
  std::size_t hi = 2;
  while (hi <= 100000 && factor_at(hi) > 4.0) hi *= 2;
  if (hi <= 100000 || factor_at(100000) <= 4.0) {
    std::size_t lo = hi / 2;  // factor_at(lo) > 4 (or lo = 1)
    hi = std::min<std::size_t>(hi, 100000);
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      (factor_at(mid) > 4.0 ? lo : hi) = mid;
    }
    r.seeds_for_factor_4 = hi;
  }
  r.estimated = true;
  add_note(r.notes, fmt::format("interval for run-to-run noise of excess kurtosis up to {:.3g} (MS_run on {:.3g} "
                                "degrees of freedom, not the normal theory's {:.0f})",
                                r.kurtosis, d2, N - s));
  if (!(r.ms_run > 0)) {
    // Every seed's runs came out equal: no run-to-run spread at all.
    r.ratio = r.lo = r.hi = 0.0;
    add_note(r.notes, "the runs of each seed gave equal losses: σ²_run = 0");
    return r;
  }
  const double f = r.ms_seed / r.ms_run;
  r.f = f;
  // λ = σ²_seed/σ²_run: point (MS_seed − MS_run)/(n0·MS_run) and interval ((F/q − 1)/n0) at q_hi and q_lo.
  const double lambda = (f - 1) / r.n0, lambda_lo = (f / q_hi - 1) / r.n0, lambda_hi = (f / q_lo - 1) / r.n0;
  auto inv = [](double l, std::optional<double>* out, bool* infinite) {
    if (l > 0)
      *out = 1 / l;
    else
      *infinite = true;
  };
  inv(lambda, &r.ratio, &r.ratio_infinite);
  inv(lambda_hi, &r.lo, &r.lo_infinite);  // the largest λ gives the smallest ratio
  inv(lambda_lo, &r.hi, &r.hi_infinite);
  if (r.ratio_infinite) add_note(r.notes, "the seeds' means spread no more than their runs do: no seed spread seen");
  return r;
}

}  // namespace detaudit
