#include "kernels/cpu/pool.hpp"

#include <immintrin.h>

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

// 2x2 windows at stride 2 (they do not overlap): the same first-maximum rule written branch-free, so
// that it vectorises. m = a; m = b > m ? b : m; ... is argmax_of's comparison sequence, value for
// value (NaN and signed zeros included). Built for several ISAs: comparisons and selects give the
// same bits at any width.
#define DETAUDIT_POOL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

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

namespace {
// Windows [q0, q1) of one output row: the gradient goes to the first maximum of each window as 0 + g
// (what adding it into a zeroed dx gives, -0 becoming +0); the rest of the window gets 0.
void maxpool2x2_bwd_row(const float* r0, const float* r1, const float* g, float* o0, float* o1, int q0, int q1) {
  for (int q = q0; q < q1; ++q) {
    const float a = r0[2 * q], b = r0[2 * q + 1], c = r1[2 * q], d = r1[2 * q + 1];
    int at = 0;
    float m = a;
    at = b > m ? 1 : at;
    m = b > m ? b : m;
    at = c > m ? 2 : at;
    m = c > m ? c : m;
    at = d > m ? 3 : at;
    const float v = 0.0f + g[q];
    o0[2 * q] = at == 0 ? v : 0.0f;
    o0[2 * q + 1] = at == 1 ? v : 0.0f;
    o1[2 * q] = at == 2 ? v : 0.0f;
    o1[2 * q + 1] = at == 3 ? v : 0.0f;
  }
}

// The same for 16 windows at a time (the last group masked): _CMP_GT_OQ is C's '>' (false on NaN),
// the masks pick the same position as the scalar sequence.
__attribute__((target("avx512f"))) void maxpool2x2_bwd_row_avx512(const float* r0, const float* r1, const float* g,
                                                                  float* o0, float* o1, int Q) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  auto bits = [](int n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); };
  for (int q = 0; q < Q; q += 16) {
    const int n = Q - q < 16 ? Q - q : 16;
    const __mmask16 mg = bits(n), m0 = bits(2 * n), m1 = bits(2 * n - 16);
    const __m512 x0 = _mm512_maskz_loadu_ps(m0, r0 + 2 * q), x1 = _mm512_maskz_loadu_ps(m1, r0 + 2 * q + 16);
    const __m512 y0 = _mm512_maskz_loadu_ps(m0, r1 + 2 * q), y1 = _mm512_maskz_loadu_ps(m1, r1 + 2 * q + 16);
    const __m512 a = _mm512_permutex2var_ps(x0, even, x1), b = _mm512_permutex2var_ps(x0, odd, x1);
    const __m512 c = _mm512_permutex2var_ps(y0, even, y1), d = _mm512_permutex2var_ps(y0, odd, y1);
    const __mmask16 gb = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ);
    __m512 m = _mm512_mask_blend_ps(gb, a, b);
    const __mmask16 gc = _mm512_cmp_ps_mask(c, m, _CMP_GT_OQ);
    m = _mm512_mask_blend_ps(gc, m, c);
    const __mmask16 gd = _mm512_cmp_ps_mask(d, m, _CMP_GT_OQ);
    const __mmask16 at3 = gd, at2 = __mmask16(gc & ~gd), at1 = __mmask16(gb & ~gc & ~gd),
                    at0 = __mmask16(~(gb | gc | gd));
    const __m512 v = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(mg, g + q));
    const __m512 va = _mm512_maskz_mov_ps(at0, v), vb = _mm512_maskz_mov_ps(at1, v);
    const __m512 vc = _mm512_maskz_mov_ps(at2, v), vd = _mm512_maskz_mov_ps(at3, v);
    _mm512_mask_storeu_ps(o0 + 2 * q, m0, _mm512_permutex2var_ps(va, lo, vb));
    _mm512_mask_storeu_ps(o0 + 2 * q + 16, m1, _mm512_permutex2var_ps(va, hi, vb));
    _mm512_mask_storeu_ps(o1 + 2 * q, m0, _mm512_permutex2var_ps(vc, lo, vd));
    _mm512_mask_storeu_ps(o1 + 2 * q + 16, m1, _mm512_permutex2var_ps(vc, hi, vd));
  }
}
}  // namespace

void maxpool2x2_bwd(const float* x, const float* dy, float* dx, size_t planes, int h, int w) {
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  const int P = h / 2, Q = w / 2;
  for (size_t nc = 0; nc < planes; ++nc) {
    const float* plane = x + nc * size_t(h) * w;
    const float* g = dy + nc * size_t(P) * Q;
    float* out = dx + nc * size_t(h) * w;
    for (int p = 0; p < P; ++p) {
      const float* r0 = plane + size_t(2 * p) * w;
      float* o0 = out + size_t(2 * p) * w;
      if (avx512)
        maxpool2x2_bwd_row_avx512(r0, r0 + w, g + size_t(p) * Q, o0, o0 + w, Q);
      else
        maxpool2x2_bwd_row(r0, r0 + w, g + size_t(p) * Q, o0, o0 + w, 0, Q);
      if (w % 2) o0[w - 1] = o0[2 * w - 1] = 0.0f;
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
