// Distance between an output and the oracle's: ULPs, relative error, count of mismatched elements.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>

namespace detaudit {

// ULP distance on the ordered integer line of the format: -0.0 and +0.0 are 0 ULP apart (bitwise they
// differ, so fingerprints still tell them apart); adjacent floats across zero (smallest subnormals) are
// 2 apart; two NaNs are 0 apart whatever their payloads; NaN against a number is kUlpInfinite.
constexpr uint64_t kUlpInfinite = std::numeric_limits<uint64_t>::max();
uint64_t ulp_distance(float a, float b);
uint64_t ulp_distance(double a, double b);

struct OracleDistance {
  uint64_t max_ulp = 0;
  double max_rel_err = 0;  // |a - b| / |b|, with |b| floored at the smallest normal; inf if NaN mismatch
  uint64_t mismatched = 0;  // elements whose bits differ from the oracle's
  void merge(const OracleDistance& o);
};

OracleDistance compare_to_oracle(const float* out, const float* oracle, size_t n);
OracleDistance compare_to_oracle(const double* out, const double* oracle, size_t n);

}  // namespace detaudit
