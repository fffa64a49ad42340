// Max pooling on the host, shared by cpu-ref and the native cpu backend.
// determinism: every window is visited in a fixed (n, c, p, q) order, and the backward pass adds each
// window's gradient into dx in that order; the argmax is the first maximum in row-major window order.
#pragma once
#include "kernels/backend.hpp"

namespace detaudit {

void maxpool_fwd_host(const PoolShape& s, const float* x, float* y);
// `double_accumulate`: sums of overlapping windows in double, rounded once (the oracle); otherwise float.
void maxpool_bwd_host(const PoolShape& s, const float* x, const float* dy, float* dx, bool double_accumulate);

// 2x2 windows at stride 2 over `planes` h x w planes: the same bits as the two functions above (the
// first maximum, NaN and signed zeros included; a window's gradient lands as 0 + g), written
// branch-free for speed. cpu-ref keeps the general loops, so tests compare the two.
void maxpool2x2_fwd(const float* x, float* y, size_t planes, int h, int w);
void maxpool2x2_bwd(const float* x, const float* dy, float* dx, size_t planes, int h, int w);

}  // namespace detaudit
