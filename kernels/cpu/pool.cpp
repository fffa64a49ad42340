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
// 2x2 windows at stride 2 (they do not overlap): the same first-maximum rule written branch-free, so
// that it vectorises. m = a; m = b > m ? b : m; ... is argmax_of's comparison sequence, value for
// value (NaN and signed zeros included). Built for several ISAs: comparisons and selects give the
// same bits at any width.
#define DETAUDIT_POOL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

}  // namespace

DETAUDIT_POOL_CLONES void maxpool2x2_fwd(const float* x, float* y, size_t planes, int h, int w) {
  const int P = h / 2, Q = w / 2;
  for (size_t nc = 0; nc < planes; ++nc) {
    const float* plane = x + nc * size_t(h) * w;
    float* out = y + nc * size_t(P) * Q;
    for (int p = 0; p < P; ++p) {
      const float* r0 = plane + size_t(2 * p) * w;
      const float* r1 = r0 + w;
      float* o = out + size_t(p) * Q;
      for (int q = 0; q < Q; ++q) {
        const float a = r0[2 * q], b = r0[2 * q + 1], c = r1[2 * q], d = r1[2 * q + 1];
        float m = a;
        m = b > m ? b : m;
        m = c > m ? c : m;
        m = d > m ? d : m;
        o[q] = m;
      }
    }
  }
}

// The gradient goes to the first maximum of each window as 0 + g (what adding it into a zeroed dx
// gives, -0 becoming +0); every other element of dx, the odd last row and column included, is 0.
DETAUDIT_POOL_CLONES void maxpool2x2_bwd(const float* x, const float* dy, float* dx, size_t planes, int h, int w) {
  const int P = h / 2, Q = w / 2;
  for (size_t nc = 0; nc < planes; ++nc) {
    const float* plane = x + nc * size_t(h) * w;
    const float* g = dy + nc * size_t(P) * Q;
    float* out = dx + nc * size_t(h) * w;
    for (int p = 0; p < P; ++p) {
      const float* r0 = plane + size_t(2 * p) * w;
      const float* r1 = r0 + w;
      float* o0 = out + size_t(2 * p) * w;
      float* o1 = o0 + w;
      for (int q = 0; q < Q; ++q) {
        const float a = r0[2 * q], b = r0[2 * q + 1], c = r1[2 * q], d = r1[2 * q + 1];
        int at = 0;
        float m = a;
        at = b > m ? 1 : at;
        m = b > m ? b : m;
        at = c > m ? 2 : at;
        m = c > m ? c : m;
        at = d > m ? 3 : at;
        const float v = 0.0f + g[size_t(p) * Q + q];
        o0[2 * q] = at == 0 ? v : 0.0f;
        o0[2 * q + 1] = at == 1 ? v : 0.0f;
        o1[2 * q] = at == 2 ? v : 0.0f;
        o1[2 * q + 1] = at == 3 ? v : 0.0f;
      }
      if (w % 2) o0[w - 1] = o1[w - 1] = 0.0f;
    }
    if (h % 2)
      for (int j = 0; j < w; ++j) out[size_t(h - 1) * w + j] = 0.0f;
  }
}

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
