#include "probes/metrics.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

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
OracleDistance compare_impl(const F* out, const F* oracle, size_t n) {
  OracleDistance d;
  const double tiny = double(std::numeric_limits<F>::min());
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&out[i], &oracle[i], sizeof(F)) == 0) continue;
    ++d.mismatched;
    uint64_t u = ulp_impl<F, I>(out[i], oracle[i]);
    d.max_ulp = std::max(d.max_ulp, u);
    double rel;
    if (u == kUlpInfinite)
      rel = std::numeric_limits<double>::infinity();
    else if (std::isnan(double(out[i])))
      rel = 0;  // both NaN, payloads differ
    else
      rel = std::fabs(double(out[i]) - double(oracle[i])) / std::max(std::fabs(double(oracle[i])), tiny);
    if (std::isnan(rel)) rel = std::numeric_limits<double>::infinity();  // inf - inf
    d.max_rel_err = std::max(d.max_rel_err, rel);
  }
  return d;
}
}  // namespace

uint64_t ulp_distance(float a, float b) { return ulp_impl<float, int32_t>(a, b); }
uint64_t ulp_distance(double a, double b) { return ulp_impl<double, int64_t>(a, b); }

void OracleDistance::merge(const OracleDistance& o) {
  max_ulp = std::max(max_ulp, o.max_ulp);
  max_rel_err = std::max(max_rel_err, o.max_rel_err);
  mismatched = std::max(mismatched, o.mismatched);
}

OracleDistance compare_to_oracle(const float* out, const float* oracle, size_t n) {
  return compare_impl<float, int32_t>(out, oracle, n);
}
OracleDistance compare_to_oracle(const double* out, const double* oracle, size_t n) {
  return compare_impl<double, int64_t>(out, oracle, n);
}

}  // namespace detaudit
