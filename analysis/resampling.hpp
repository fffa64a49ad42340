// What the permutation and bootstrap procedures of analysis/ share: index draws that are the same on
// every standard library (std::uniform_int_distribution and std::shuffle are implementation-defined),
// and the statistic comparisons.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace detaudit::resampling {

// Uniform integer in [0, n) by rejection on raw mt19937_64 output.
inline std::size_t uniform_index(std::mt19937_64& g, std::size_t n) {
  const std::uint64_t un = n;
  const std::uint64_t threshold = (0 - un) % un;  // 2^64 mod n
  for (;;) {
    const std::uint64_t r = g();
    if (r >= threshold) return static_cast<std::size_t>(r % un);
  }
}

template <class T>
void fisher_yates(std::vector<T>& v, std::mt19937_64& g) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[uniform_index(g, i)]);
}

// An F statistic for a permutation test: +inf for a perfect effect (denominator 0, numerator > 0), 0
// when both are 0.
inline double permutation_stat(double ms_num, double ms_den) {
  if (ms_den > 0.0) return ms_num / ms_den;
  return ms_num > 0.0 ? std::numeric_limits<double>::infinity() : 0.0;
}

// F* at least as extreme as F, with a relative tolerance of 1e-12, so that an arrangement that only
// reorders a sum is not lost to rounding.
inline bool at_least(double f_star, double f_obs) {
  if (std::isinf(f_obs)) return std::isinf(f_star);
  return f_star >= f_obs * (1.0 - 1e-12);
}

// Permutation tests enumerate every arrangement when there are at most this many.
inline constexpr std::size_t kExactLimit = 100000;

}  // namespace detaudit::resampling
