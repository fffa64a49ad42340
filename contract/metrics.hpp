// Distance between an output and the oracle's: ULPs, relative error, count of mismatched elements, and
// the error against the op's error bound with bits of agreement.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace detaudit {

// ULP distance on the ordered integer line of the format: -0.0 and +0.0 are 0 ULP apart (bitwise they
// differ, so fingerprints still tell them apart); adjacent floats across zero (smallest subnormals) are
// 2 apart; two NaNs are 0 apart whatever their payloads; NaN against a number is kUlpInfinite.
constexpr uint64_t kUlpInfinite = std::numeric_limits<uint64_t>::max();
uint64_t ulp_distance(float a, float b);
uint64_t ulp_distance(double a, double b);

// Unit roundoff u of a format (half its machine epsilon: 2^-24 for f32, 2^-53 for f64) and its
// precision in bits (24, 53).
inline constexpr double kUnitRoundoffF32 = 0x1p-24, kUnitRoundoffF64 = 0x1p-53;
inline constexpr int kPrecisionF32 = 24, kPrecisionF64 = 53;

// γ_n = n·u / (1 - n·u) (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1): the relative
// error bound of n roundings. +inf when n·u >= 1 (the bound then says nothing).
double gamma_n(double n, double u);

// Error against the summation error bound of the op (Higham 3.1): for an output that is a sum of k
// products, |y^ - y| <= γ_k · Σ|a_i b_i| in any summation order and any blocking; probes/workload.cpp
// derives the bound of each op (and the +1 for the oracle's own rounding) next to the op. A correct
// kernel stays below ratio 1; a raw ULP count does not (near-zero outputs by cancellation have huge
// ULPs).
// ratio_hist counts elements per ratio bucket: [0] exactly equal bits; bucket b (1..13) holds ratios
// in (2^(2b-26), 2^(2b-24)] (b = 13: (1, 4]), bucket 1 also every ratio at or below 2^-24 of an element
// whose bits differ (0 included: signed zeros, NaN payloads); [14] ratio > 4 (or infinite).
inline constexpr int kRatioBuckets = 15;

// The error bound of an oracle output, computed with it (probes/workload.cpp, compute_oracle) and kept
// in the oracle cache: per output element, the most a correct kernel may differ from the oracle.
struct ErrorBound {
  int64_t k = 0;              // accumulation length (0 for a selection, which must be exact)
  std::vector<double> bound;  // one per output element; empty: no bound known
};

// An infinite err_ratio has two causes, told apart by max_rel_err (nonfinite_mismatch(); both fields
// are in results.json): (a) an element is NaN against a number, or an infinity against another value,
// either way round: max_rel_err is infinite too; (b) a nonzero finite difference where the bound is 0
// (the oracle's value is one every correct kernel gets exactly: a selection, a max-pool gradient
// position no window routes to): max_rel_err is finite. Finite values never give an infinite
// max_rel_err, nor, where the bound is positive, an infinite err_ratio: an overflowing quotient (or an
// f64 difference that overflows) is clamped to the largest double.
struct OracleDistance {
  uint64_t max_ulp = 0;
  double max_rel_err = 0;  // |a - b| / |b|, with |b| floored at the smallest normal; inf: case (a) above
  uint64_t mismatched = 0;  // elements whose bits differ from the oracle's
  // Filled when the oracle entry carries the error bound; absent from older results (err_ratio -1).
  double err_ratio = -1;     // max over elements of |y^ - y| / bound; -1: no bound known; inf: (a) or (b)
  double agree_bits = -1;    // bits of agreement: -log2(max|y^ - y| / max|y|) in [0, precision], max|y|
                             // over the oracle's finite outputs (precision for identical outputs, 0
                             // for NaN against a number); -1: not measured (older results)
  int64_t bound_k = 0;       // the accumulation length k of the bound (0: a selection, or no bound)
  std::vector<uint64_t> ratio_hist;  // kRatioBuckets counts (they sum to the element count), or empty
  // Across the distinct outputs of one observation: the largest ULP, relative error, mismatch count and
  // ratio, the fewest bits of agreement, and the histogram of the output with the largest ratio (so its
  // counts still sum to the element count; the first such output on ties).
  void merge(const OracleDistance& o);
  // Case (a) above: some element is NaN or infinite where the other side has another value (also after
  // merge, which keeps the largest max_rel_err). With an infinite err_ratio and this false: case (b).
  bool nonfinite_mismatch() const { return std::isinf(max_rel_err); }
};

// The same outputs measured against one oracle and one bound have one distance: "" when a and b agree, else the
// first field that differs, in words ("max_ulp 19 against 18"). `with_hist`: ratio_hist too (it is the worst
// output's, and the first of a tie: compared only where each side measured one output).
std::string distance_difference(const OracleDistance& a, const OracleDistance& b, bool with_hist);

// `bound` (may be null, or of another size than n: no bound) fills err_ratio, bound_k and ratio_hist.
OracleDistance compare_to_oracle(const float* out, const float* oracle, size_t n, const ErrorBound* bound = nullptr);
OracleDistance compare_to_oracle(const double* out, const double* oracle, size_t n, const ErrorBound* bound = nullptr);

// The ratio bucket (0..kRatioBuckets-1) of an element whose bits differ from the oracle's (never 0).
int ratio_bucket(double ratio);

}  // namespace detaudit
