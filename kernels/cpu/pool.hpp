// Max pooling on the host, shared by cpu-ref and the native cpu backend.
// determinism: every window is visited in a fixed (n, c, p, q) order, and the backward pass adds each
// window's gradient into dx in that order; the argmax is the first maximum in row-major window order.
#pragma once
#include "kernels/backend.hpp"

namespace detaudit {

void maxpool_fwd_host(const PoolShape& s, const float* x, float* y);
// `double_accumulate`: sums of overlapping windows in double, rounded once (the oracle); otherwise float.
void maxpool_bwd_host(const PoolShape& s, const float* x, const float* dy, float* dx, bool double_accumulate);

}  // namespace detaudit
