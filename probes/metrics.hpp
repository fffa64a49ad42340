// Distance between an output and the oracle's: ULPs, relative error, count of mismatched elements.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace detaudit {

// ULP distance on the ordered integer line of the format: -0.0 and +0.0 are 0 ULP apart (bitwise they
// differ, so fingerprints still tell them apart); adjacent floats across zero (smallest subnormals) are
// 2 apart; two NaNs are 0 apart whatever their payloads; NaN against a number is kUlpInfinite.
constexpr uint64_t kUlpInfinite = std::numeric_limits<uint64_t>::max();
uint64_t ulp_distance(float a, float b);
uint64_t ulp_distance(double a, double b);

// Error against the summation error bound of the op (Higham, "Accuracy and Stability of Numerical
// Algorithms", 3.1): for an output that is a sum of k products, |y^ - y| <= gamma_k * sum|a_i b_i| with
// gamma_k = k u / (1 - k u), u the unit roundoff of the format. A correct kernel in any summation order
// stays below ratio 1; a raw ULP count does not (near-zero outputs by cancellation have huge ULPs).
// kRatioBuckets counts elements per ratio bucket: [0] exactly equal bits, then bucket b (1..13) holds
// ratios in (2^(2b-26), 2^(2b-24)] (b = 13: (1, 4]), and [14] ratio > 4 (or infinite).
inline constexpr int kRatioBuckets = 15;

struct OracleDistance {
  uint64_t max_ulp = 0;
  double max_rel_err = 0;  // |a - b| / |b|, with |b| floored at the smallest normal; inf if NaN mismatch
  uint64_t mismatched = 0;  // elements whose bits differ from the oracle's
  // Filled when the oracle entry carries the error bound (bound_k > 0); absent from older results.
  double err_ratio = -1;     // max over elements of |y^ - y| / bound; -1: no bound known
  double agree_bits = -1;    // bits of agreement: -log2(max|y^ - y| / max|y|), capped at the format's precision
  int64_t bound_k = 0;       // the accumulation length k of the bound (0: no bound)
  std::vector<uint64_t> ratio_hist;  // kRatioBuckets counts, or empty
  void merge(const OracleDistance& o);
};

OracleDistance compare_to_oracle(const float* out, const float* oracle, size_t n);
OracleDistance compare_to_oracle(const double* out, const double* oracle, size_t n);

}  // namespace detaudit
