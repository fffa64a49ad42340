// cpu-ref: the oracle. Fixed order, double accumulation, simple enough to trust at a glance.
// determinism: every sum runs in index order in one double accumulator, single-threaded; the result
// is rounded to float once, at the end. Same bits on every x86-64 machine and every run.
#pragma once
#include <limits>
#include <memory>

#include "kernels/backend.hpp"

namespace detaudit {
std::unique_ptr<Backend> make_cpu_ref();

// Unit roundoff of cpu-ref's accumulators, for the error bounds of its outputs (probes/workload.cpp):
// double for every f32 op, long double (x87 extended, 64-bit significand on x86-64) for gemm_f64.
inline constexpr double kRefAccumUnitRoundoff = std::numeric_limits<double>::epsilon() / 2;
inline constexpr double kRefAccumUnitRoundoffF64 = double(std::numeric_limits<long double>::epsilon() / 2);
// Accuracy of the double exp cpu-ref's softmax calls (glibc's exp: under 1 ulp), in ulps.
inline constexpr double kRefExpUlps = 1;
}  // namespace detaudit
