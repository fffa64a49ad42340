#include "kernels/cpu/pool.hpp"

#include <cmath>
#include <vector>

namespace detaudit {

namespace {
// Index (within the image plane) of the first maximum of window (p, q).
size_t argmax_of(const PoolShape& s, const float* plane, int p, int q) {
  size_t best = size_t(p * s.stride) * s.w + size_t(q * s.stride);
  for (int i = 0; i < s.window; ++i)
    for (int j = 0; j < s.window; ++j) {
      size_t idx = size_t(p * s.stride + i) * s.w + size_t(q * s.stride + j);
      if (plane[idx] > plane[best]) best = idx;
    }
  return best;
}
}  // namespace

void maxpool_fwd_host(const PoolShape& s, const float* x, float* y) {
  const int P = s.p(), Q = s.q();
  for (size_t nc = 0; nc < size_t(s.n) * s.c; ++nc) {
    const float* plane = x + nc * s.h * s.w;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) y[(nc * P + p) * Q + q] = plane[argmax_of(s, plane, p, q)];
  }
}

void maxpool_bwd_host(const PoolShape& s, const float* x, const float* dy, float* dx, bool double_accumulate) {
  const int P = s.p(), Q = s.q();
  const size_t plane_size = size_t(s.h) * s.w;
  std::vector<double> acc(double_accumulate ? plane_size : 0);
  for (size_t nc = 0; nc < size_t(s.n) * s.c; ++nc) {
    const float* plane = x + nc * plane_size;
    float* out = dx + nc * plane_size;
    if (double_accumulate) std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t i = 0; i < plane_size; ++i) out[i] = 0.0f;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        size_t idx = argmax_of(s, plane, p, q);
        float g = dy[(nc * P + p) * Q + q];
        if (double_accumulate)
          acc[idx] += double(g);
        else
          out[idx] += g;
      }
    if (double_accumulate)
      for (size_t i = 0; i < plane_size; ++i) out[i] = float(acc[i]);
  }
}

}  // namespace detaudit
