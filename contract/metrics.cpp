#include "contract/metrics.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace detaudit {

namespace {
template <typename F, typename I>
I ordered(F x) {
  I bits = std::bit_cast<I>(x);
  // Map sign-magnitude onto a monotone two's complement line; -0.0 lands on 0 like +0.0.
  return bits < 0 ? I(std::numeric_limits<I>::min()) - bits : bits;
}

template <typename F, typename I>
uint64_t ulp_impl(F a, F b) {
  bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return (na && nb) ? 0 : kUlpInfinite;
  I oa = ordered<F, I>(a), ob = ordered<F, I>(b);
  // Difference in a wider unsigned type to avoid overflow.
  if constexpr (sizeof(I) == 4) {
    int64_t d = int64_t(oa) - int64_t(ob);
    return uint64_t(d < 0 ? -d : d);
  } else {
    return oa > ob ? uint64_t(oa) - uint64_t(ob) : uint64_t(ob) - uint64_t(oa);
  }
}

template <typename F, typename I>
OracleDistance compare_impl(const F* out, const F* oracle, size_t n, const ErrorBound* eb) {
  constexpr bool kF64 = sizeof(F) == 8;
  constexpr double kInf = std::numeric_limits<double>::infinity(), kMax = std::numeric_limits<double>::max();
  OracleDistance d;
  const double tiny = double(std::numeric_limits<F>::min());
  const bool bounded = eb && eb->bound.size() == n;
  if (bounded) {
    d.err_ratio = 0;
    d.bound_k = eb->k;
    d.ratio_hist.assign(kRatioBuckets, 0);
  }
  double max_diff = 0, max_ref = 0;  // for the bits of agreement
  for (size_t i = 0; i < n; ++i) {
    const double ref = double(oracle[i]);
    if (std::isfinite(ref)) max_ref = std::max(max_ref, std::fabs(ref));
    if (std::memcmp(&out[i], &oracle[i], sizeof(F)) == 0) {
      if (bounded) ++d.ratio_hist[0];
      continue;
    }
    ++d.mismatched;
    uint64_t u = ulp_impl<F, I>(out[i], oracle[i]);
    d.max_ulp = std::max(d.max_ulp, u);
    // |out - oracle|: 0 for two NaNs (payloads differ) and signed zeros; inf for NaN against a number
    // and for an infinity against another value, and only then (two finite values whose difference
    // overflows a double get the largest double), so that max_rel_err can tell those apart (metrics.hpp).
    const double got = double(out[i]);
    double diff;
    if (u == kUlpInfinite)
      diff = kInf;
    else if (std::isnan(got))
      diff = 0;
    else if (std::isinf(got) || std::isinf(ref))
      diff = kInf;
    else
      diff = std::min(std::fabs(got - ref), kMax);
    max_diff = std::max(max_diff, diff);
    const bool finite = std::isfinite(diff);
    const double rel = diff == 0 ? 0 : !finite ? kInf : std::min(diff / std::max(std::fabs(ref), tiny), kMax);
    d.max_rel_err = std::max(d.max_rel_err, rel);
    if (bounded) {
      // A nonzero finite difference where the bound is 0 (an output a correct kernel gets exactly: a
      // selection, a gradient no window routes there) is infinitely far out, like a non-finite one.
      const double b = eb->bound[i];
      double ratio = diff == 0 ? 0 : !finite || b == 0 ? kInf : std::min(diff / b, kMax);
      if (std::isnan(ratio)) ratio = kInf;  // a NaN bound (never computed from finite inputs)
      d.err_ratio = std::max(d.err_ratio, ratio);
      ++d.ratio_hist[ratio_bucket(ratio)];
    }
  }
  const int precision = kF64 ? kPrecisionF64 : kPrecisionF32;
  if (max_diff == 0)
    d.agree_bits = precision;
  else if (!std::isfinite(max_diff) || max_ref == 0)
    d.agree_bits = 0;
  else
    d.agree_bits = std::clamp(-std::log2(max_diff / max_ref), 0.0, double(precision));
  return d;
}
}  // namespace

uint64_t ulp_distance(float a, float b) { return ulp_impl<float, int32_t>(a, b); }
uint64_t ulp_distance(double a, double b) { return ulp_impl<double, int64_t>(a, b); }

double gamma_n(double n, double u) {
  double nu = n * u;
  return nu >= 1 ? std::numeric_limits<double>::infinity() : nu / (1 - nu);
}

int ratio_bucket(double ratio) {
  // Bucket b (1..13) ends at 2^(2b-24); compared with exact powers of two, no log2 rounding.
  for (int b = 1; b <= kRatioBuckets - 2; ++b)
    if (ratio <= std::ldexp(1.0, 2 * b - 24)) return b;
  return kRatioBuckets - 1;  // > 4, inf and NaN
}

void OracleDistance::merge(const OracleDistance& o) {
  max_ulp = std::max(max_ulp, o.max_ulp);
  max_rel_err = std::max(max_rel_err, o.max_rel_err);
  mismatched = std::max(mismatched, o.mismatched);
  if (o.agree_bits >= 0) agree_bits = agree_bits < 0 ? o.agree_bits : std::min(agree_bits, o.agree_bits);
  // -1 (no bound) is below every ratio; the worst output brings its histogram.
  if (o.err_ratio >= 0 && (err_ratio < 0 || o.err_ratio > err_ratio)) {
    err_ratio = o.err_ratio;
    ratio_hist = o.ratio_hist;
  }
  bound_k = std::max(bound_k, o.bound_k);
}

std::string distance_difference(const OracleDistance& a, const OracleDistance& b, bool with_hist) {
  const auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  if (a.max_ulp != b.max_ulp) return fmt::format("max_ulp {} against {}", a.max_ulp, b.max_ulp);
  if (!same(a.max_rel_err, b.max_rel_err)) return fmt::format("max_rel_err {:.17g} against {:.17g}", a.max_rel_err, b.max_rel_err);
  if (a.mismatched != b.mismatched) return fmt::format("mismatched {} against {}", a.mismatched, b.mismatched);
  if (!same(a.err_ratio, b.err_ratio)) return fmt::format("err_ratio {:.17g} against {:.17g}", a.err_ratio, b.err_ratio);
  if (!same(a.agree_bits, b.agree_bits)) return fmt::format("agree_bits {:.17g} against {:.17g}", a.agree_bits, b.agree_bits);
  if (a.bound_k != b.bound_k) return fmt::format("bound_k {} against {}", a.bound_k, b.bound_k);
  if (with_hist && a.ratio_hist != b.ratio_hist) return "ratio_hist differs";
  return "";
}

OracleDistance compare_to_oracle(const float* out, const float* oracle, size_t n, const ErrorBound* bound) {
  return compare_impl<float, int32_t>(out, oracle, n, bound);
}
OracleDistance compare_to_oracle(const double* out, const double* oracle, size_t n, const ErrorBound* bound) {
  return compare_impl<double, int64_t>(out, oracle, n, bound);
}

}  // namespace detaudit
