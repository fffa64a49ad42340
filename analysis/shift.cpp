#include "analysis/shift.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

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

double choose(size_t n, size_t k) {
  double r = 1;
  for (size_t i = 1; i <= k; ++i) r = r * double(n - k + i) / double(i);
  return r;
}

using i128 = __int128;

// One seed's losses for the permutation: values (baseline first, then the k new), their total, and the
// weight of the seed's term. Num is i128 (exact) or long double (the fallback, see integer_scale).
template <class Num>
struct Stratum {
  std::vector<Num> v;
  size_t k = 0;  // new runs
  Num total = 0, weight = 1;
  // The seed's term of Z for new runs summing to s: weight·(n·s − k·T).
  Num term(Num s) const { return weight * (Num(v.size()) * s - Num(k) * total); }
};

// |z| at least |obs|: exactly for integers; for the long double fallback with a relative tolerance of
// 1e-15, so that an arrangement that only reorders a sum is not lost to rounding.
bool at_least(i128 z, i128 obs) { return (z < 0 ? -z : z) >= (obs < 0 ? -obs : obs); }
bool at_least(long double z, long double obs) { return std::fabs(z) >= std::fabs(obs) * (1 - 1e-15L); }

// Of a seed's k-subsets, the largest (or smallest) sum and in how many ways ties let it be reached.
template <class Num>
std::pair<Num, double> extreme_subset(const Stratum<Num>& st, bool largest) {
  std::vector<Num> v = st.v;
  if (largest)
    std::sort(v.begin(), v.end(), [](Num a, Num b) { return a > b; });
  else
    std::sort(v.begin(), v.end());
  Num s = 0;
  for (size_t i = 0; i < st.k; ++i) s += v[i];
  const Num edge = v[st.k - 1];
  size_t in_top = 0, all = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == edge) ++all, in_top += i < st.k;
  return {s, choose(all, in_top)};
}

template <class Num>
void permute(const std::vector<Stratum<Num>>& strata, uint64_t seed, ShiftTest* t) {
  Num observed = 0;
  for (auto& st : strata) {
    Num s = 0;
    for (size_t i = st.v.size() - st.k; i < st.v.size(); ++i) s += st.v[i];
    observed += st.term(s);
  }
  // The floor: |Z| at its largest, reached where every seed's sum is at its largest (or smallest).
  Num zmax = 0, zmin = 0;
  double cmax = 1, cmin = 1;
  for (auto& st : strata) {
    auto [hi, ways_hi] = extreme_subset(st, true);
    auto [lo, ways_lo] = extreme_subset(st, false);
    zmax += st.term(hi), cmax *= ways_hi;
    zmin += st.term(lo), cmin *= ways_lo;
  }
  const Num top = std::max(zmax, -zmin);
  double ways = 0;
  if (top == 0) {
    ways = t->arrangements;  // every arrangement gives 0
  } else {
    if (zmax == top) ways += cmax;
    if (-zmin == top) ways += cmin;
  }
  t->min_p = std::min(1.0, ways / t->arrangements);

  if (t->arrangements <= double(kExactArrangements)) {
    // Enumerate: each seed's terms over its k-subsets, then an odometer over the seeds.
    std::vector<std::vector<Num>> terms(strata.size());
    for (size_t j = 0; j < strata.size(); ++j) {
      const auto& st = strata[j];
      std::vector<char> mask(st.v.size(), 0);
      std::fill(mask.begin(), mask.begin() + long(st.k), 1);
      do {
        Num s = 0;
        for (size_t i = 0; i < mask.size(); ++i)
          if (mask[i]) s += st.v[i];
        terms[j].push_back(st.term(s));
      } while (std::prev_permutation(mask.begin(), mask.end()));
    }
    std::vector<size_t> at(strata.size(), 0);
    uint64_t n = 0, hits = 0;
    for (;;) {
      Num z = 0;
      for (size_t j = 0; j < at.size(); ++j) z += terms[j][at[j]];
      ++n;
      hits += at_least(z, observed);
      size_t j = 0;
      for (; j < at.size(); ++j) {
        if (++at[j] < terms[j].size()) break;
        at[j] = 0;
      }
      if (j == at.size()) break;
    }
    t->p = double(hits) / double(n);
    t->exact = true;
  } else {
    std::mt19937_64 g(seed);
    uint64_t hits = 0;
    std::vector<std::vector<Num>> values;
    for (auto& st : strata) values.push_back(st.v);
    for (uint64_t d = 0; d < kDraws; ++d) {
      Num z = 0;
      for (size_t j = 0; j < strata.size(); ++j) {
        resampling::fisher_yates(values[j], g);
        Num s = 0;
        for (size_t i = 0; i < strata[j].k; ++i) s += values[j][i];
        z += strata[j].term(s);
      }
      hits += at_least(z, observed);
    }
    t->p = double(1 + hits) / double(1 + kDraws);
    t->min_p = std::max(t->min_p, 1.0 / double(1 + kDraws));  // the draws' own floor
    t->exact = false;
  }
}

// The power of two by which every loss becomes an integer, and whether 128 bits hold Z with it: a loss
// x = m·2^(e−53) (m an integer below 2^53) is an integer times 2^(53 − e_min); the largest is below
// 2^(e_max − e_min + 53), |n·s − k·T| below 2nk times that, and the weights and seeds multiply in.
// false: Z could overflow (losses 2^40 apart, or a very unbalanced design), and the long double
// fallback is used.
bool integer_scale(const std::vector<SeedRuns>& seeds, uint64_t lcm, int* shift) {
  int e_min = INT_MAX, e_max = INT_MIN;
  double bits = 0;
  size_t used = 0;
  for (auto& s : seeds) {
    if (s.base.empty() || s.now.empty()) continue;
    ++used;
    const size_t n = s.base.size() + s.now.size();
    bits = std::max(bits, std::log2(2.0 * double(n) * double(s.now.size())));
    for (const auto* side : {&s.base, &s.now})
      for (double x : *side) {
        if (x == 0) continue;
        int e = 0;
        std::frexp(x, &e);
        e_min = std::min(e_min, e), e_max = std::max(e_max, e);
      }
  }
  if (e_min == INT_MAX) e_min = e_max = 0;
  *shift = 53 - e_min;
  bits += double(e_max - e_min + 53) + std::log2(double(lcm)) + std::log2(double(std::max<size_t>(used, 1)));
  return bits < 125;
}

}  // namespace

ShiftTest shift_test(const std::vector<SeedRuns>& seeds, uint64_t seed) {
  ShiftTest t;
  double ss = 0, inv_sum = 0;
  uint64_t lcm = 1;
  bool lcm_fits = true;
  for (auto& s : seeds) {
    if (s.base.empty() || s.now.empty()) continue;
    ++t.seeds;
    t.shape.emplace_back(int(s.base.size()), int(s.now.size()));
    t.base_runs += int(s.base.size());
    t.new_runs += int(s.now.size());
    const double mb = mean_of(s.base), mn = mean_of(s.now);
    t.shift += mn - mb;
    for (double x : s.base) ss += (x - mb) * (x - mb);
    for (double x : s.now) ss += (x - mn) * (x - mn);
    t.within_df += int(s.base.size() + s.now.size()) - 2;
    inv_sum += 1.0 / double(s.base.size()) + 1.0 / double(s.now.size());
    t.arrangements *= choose(s.base.size() + s.now.size(), s.now.size());
    const uint64_t kk = uint64_t(s.base.size()) * uint64_t(s.now.size());
    if (lcm_fits) {
      const uint64_t g = std::lcm(lcm, kk);
      lcm_fits = g < (uint64_t(1) << 40);
      lcm = g;
    }
  }
  if (t.seeds == 0) return t;
  t.shift /= t.seeds;
  t.within_sd = t.within_df > 0 ? std::sqrt(ss / t.within_df) : 0;
  t.se = t.within_sd * std::sqrt(inv_sum) / t.seeds;

  int shift = 0;
  t.integer = lcm_fits && integer_scale(seeds, lcm, &shift);
  auto strata_of = [&](auto convert, auto weight_one) {
    using Num = decltype(convert(0.0));
    std::vector<Stratum<Num>> strata;
    for (auto& s : seeds) {
      if (s.base.empty() || s.now.empty()) continue;
      Stratum<Num> st;
      for (double x : s.base) st.v.push_back(convert(x));
      for (double x : s.now) st.v.push_back(convert(x));
      st.k = s.now.size();
      for (Num x : st.v) st.total += x;
      st.weight = weight_one(s.base.size() * s.now.size());
      strata.push_back(std::move(st));
    }
    return strata;
  };
  if (t.integer) {
    // Exact: ldexp by a power of two keeps every bit, and the result is an integer below 2^113.
    permute(strata_of([&](double x) { return i128(std::ldexp(x, shift)); },
                      [&](size_t kk) { return i128(lcm / uint64_t(kk)); }),
            seed, &t);
  } else {
    permute(strata_of([](double x) { return static_cast<long double>(x); },
                      [](size_t kk) { return 1.0L / static_cast<long double>(kk); }),
            seed, &t);
  }
  return t;
}

namespace {

// The power of the permutation test of design `shape` at `level` against a shift of `delta` run-to-run
// sds, over the simulated noise `noise` (one vector per simulated design: each seed's base then new runs).
double simulated_power(const std::vector<std::pair<int, int>>& shape, const std::vector<std::vector<double>>& noise,
                       double delta, double level) {
  int hits = 0;
  std::vector<SeedRuns> seeds(shape.size());
  for (auto& z : noise) {
    size_t at = 0;
    for (size_t j = 0; j < shape.size(); ++j) {
      seeds[j].base.assign(z.begin() + long(at), z.begin() + long(at) + shape[j].first);
      at += size_t(shape[j].first);
      seeds[j].now.clear();
      for (int i = 0; i < shape[j].second; ++i) seeds[j].now.push_back(z[at++] + delta);
    }
    hits += shift_test(seeds).p <= level;
  }
  return double(hits) / double(noise.size());
}

}  // namespace

double detectable_shift(const ShiftTest& t, double level) {
  if (t.seeds == 0 || t.min_p > level) return std::numeric_limits<double>::quiet_NaN();
  if (t.within_sd == 0) return 0;
  if (t.arrangements > kSimulatedArrangements)
    return t.se * t_detectable_noncentrality(t.within_df, level, kPowerTarget);
  // Simulate the test: the same noise for every candidate shift, so power grows with the shift.
  std::mt19937_64 g(20261205);
  auto normal = [&]() {  // Box-Muller on raw draws: the same numbers on every standard library
    const double u1 = (double(g() >> 11) + 1) * 0x1p-53, u2 = double(g() >> 11) * 0x1p-53;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  };
  std::vector<std::vector<double>> noise(kPowerSims);
  for (auto& z : noise)
    for (auto& [b, n] : t.shape)
      for (int i = 0; i < b + n; ++i) z.push_back(normal());
  double lo = 0, hi = 4;
  while (simulated_power(t.shape, noise, hi, level) < kPowerTarget) {
    lo = hi, hi *= 2;
    if (hi > 1e4) return std::numeric_limits<double>::quiet_NaN();  // out of reach: ties the floor
  }
  for (int i = 0; i < 14; ++i) {
    const double mid = (lo + hi) / 2;
    (simulated_power(t.shape, noise, mid, level) < kPowerTarget ? lo : hi) = mid;
  }
  return hi * t.within_sd;
}

double design_floor(int seeds, int base, int now) {
  if (seeds <= 0 || base <= 0 || now <= 0) return 1;
  return std::min(1.0, 2.0 / std::pow(choose(size_t(base + now), size_t(now)), seeds));
}

JudgeableDesign judgeable_design(int seeds, int base, int now, double level) {
  JudgeableDesign d;
  for (int s = std::max(seeds, 1); s <= 1000 && !d.seeds; ++s)
    if (design_floor(s, base, now) <= level) d.seeds = s;
  for (int r = 1; r <= 1000 && !d.runs_per_side; ++r)
    if (design_floor(std::max(seeds, 1), r, r) <= level) d.runs_per_side = r;
  return d;
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
