// cpu?order=portable: every op from kernels/portable.hpp, the arithmetic the CUDA target's order=portable
// runs too (kernels/cuda/portable.cu), so the bits are the same on any ISA, thread count and GPU.
// determinism: threads split output elements (or the leaves of one big sum) in static ranges; what an
// element is computed from, and in which order, is portable.hpp's alone. The ops with fmas are compiled
// three times, for AVX-512, AVX2+FMA and the x86-64 baseline (where std::fma is glibc's correctly rounded
// fmaf), and `isa` chooses which one runs: the instructions differ, the bits must not.
#include "kernels/cpu/portable.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/cpu/native_gemm.hpp"
#include "kernels/cpu/pool.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/cpu/train_ops.hpp"
#include "kernels/portable.hpp"

namespace detaudit {

namespace {

namespace pt = portable;

#define DETAUDIT_BODY static inline __attribute__((always_inline))

// ---- the bodies that hold fmas, compiled once per ISA ---------------------------------------------------
// The big ops compute W outputs in lockstep (W independent chains, the same term sequence and leaf edges
// for each), which is portable.hpp's per-element definition done W times at once: the same operations on
// the same values in the same order per output (tests/test_portable.cpp checks every op against the
// header's per-element functions). Convolutions read an explicitly zero-padded (or dilated) copy of their
// input, whose zeros are the header's 0.0f terms.
template <class T>
struct GemmArgsT {
  bool ta, tb;
  int m, n, k;
  T alpha;
  const T* a;
  int lda;
  const T* b;
  int ldb;
  T beta;
  T* c;
  int ldc;
};
using GemmArgs = GemmArgsT<float>;
using GemmArgs64 = GemmArgsT<double>;

constexpr int kW = 8;   // outputs in lockstep along the contiguous axis
constexpr int kRows = 4;  // independent rows of kW outputs (register tile kRows x kW)

// The R x W accumulators of a tile and their leaf counters.
template <class T, int R, int W>
struct Tile {
  pt::LeafCounter<T> cnt[R][W];
  T acc[R][W] = {};
  inline __attribute__((always_inline)) void push() {
    for (int r = 0; r < R; ++r)
      for (int l = 0; l < W; ++l) {
        cnt[r][l].push(acc[r][l]);
        acc[r][l] = T(0);
      }
  }
};

// C[i0 .. i0 + R)[j0 .. j0 + W).
template <class T, int R, int W>
DETAUDIT_BODY void gemm_tile(const GemmArgsT<T>& g, int i0, int j0) {
  Tile<T, R, W> t;
  for (int kb = 0; kb < g.k; kb += pt::kLeaf) {
    const int ke = std::min(g.k, kb + pt::kLeaf);
    for (int kk = kb; kk < ke; ++kk) {
      T bv[W];
      for (int l = 0; l < W; ++l) bv[l] = g.tb ? g.b[size_t(j0 + l) * g.ldb + kk] : g.b[size_t(kk) * g.ldb + j0 + l];
      for (int r = 0; r < R; ++r) {
        const int i = i0 + r;
        const T av = g.ta ? g.a[size_t(kk) * g.lda + i] : g.a[size_t(i) * g.lda + kk];
        for (int l = 0; l < W; ++l) t.acc[r][l] = pt::fma(av, bv[l], t.acc[r][l]);
      }
    }
    t.push();
  }
  for (int r = 0; r < R; ++r)
    for (int l = 0; l < W; ++l) {
      T* c = g.c + size_t(i0 + r) * g.ldc + j0 + l;
      const T s = t.cnt[r][l].merge();
      *c = g.beta == T(0) ? pt::mul(g.alpha, s) : pt::fma(g.alpha, s, pt::mul(g.beta, *c));
    }
}
// A convolution's operands as the lockstep loops read them. Rows of `in` are wp floats, of which the
// last ones are slack (zeros) that the lanes beyond the last output read; those lanes are never stored.
struct ConvArgs {
  pt::Conv g;
  const float* in;  // fwd, bwd_filter: x zero-padded, hp x wp; bwd_data: dy dilated and padded, hp x wp
  int hp, wp;
  const float* other;  // fwd, bwd_data: the filter; bwd_filter: dy
  float* out;
};

// ---- AVX2 tiles: the same loops with one __m256 per row of eight outputs ------------------------------
// _mm256_fmadd_ps is eight fmas, each rounded once: lane for lane what pt::fma gives, so these tiles
// produce the generic tiles' bits (tests/test_portable.cpp compares every ISA). Regular functions
// (called once per tile) so that the generic bodies stay free of target-specific code.
#define DETAUDIT_V8 __attribute__((target("avx2,fma"))) __attribute__((noinline))

template <int R>
DETAUDIT_V8 void push_v8(pt::LeafCounter<float> (&cnt)[R][kW], __m256 (&acc)[R]) {
  for (int r = 0; r < R; ++r) {
    alignas(32) float lane[kW];
    _mm256_store_ps(lane, acc[r]);
    for (int l = 0; l < kW; ++l) cnt[r][l].push(lane[l]);
    acc[r] = _mm256_setzero_ps();
  }
}

// conv_fwd_tile for stride 1.
template <int R>
DETAUDIT_V8 void conv_fwd_tile_v8(const ConvArgs& a, int n, int k, int p0, int q0) {
  const pt::Conv& g = a.g;
  pt::LeafCounter<float> cnt[R][kW];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int in_leaf = 0;
  const float* wk = a.other + size_t(k) * g.c * g.r * g.s;
  for (int c = 0; c < g.c; ++c)
    for (int r = 0; r < g.r; ++r) {
      const float* row0 = a.in + ((size_t(n) * g.c + c) * a.hp + size_t(p0) + r) * a.wp + size_t(q0);
      for (int s = 0; s < g.s; ++s) {
        const __m256 wv = _mm256_set1_ps(*wk++);
        for (int rr = 0; rr < R; ++rr) acc[rr] = _mm256_fmadd_ps(_mm256_loadu_ps(row0 + size_t(rr) * a.wp + s), wv, acc[rr]);
        if (++in_leaf == pt::kLeaf) push_v8<R>(cnt, acc), in_leaf = 0;
      }
    }
  if (in_leaf) push_v8<R>(cnt, acc);
  for (int rr = 0; rr < R; ++rr) {
    float* y = a.out + ((size_t(n) * g.k + k) * g.p + p0 + rr) * g.q + q0;
    for (int l = 0; l < kW && q0 + l < g.q; ++l) y[l] = cnt[rr][l].merge();
  }
}

// conv_bwd_data_tile (its lanes are contiguous at any stride: the input is dilated).
template <int R>
DETAUDIT_V8 void conv_bwd_data_tile_v8(const ConvArgs& a, int n, int c, int h0, int w0) {
  const pt::Conv& g = a.g;
  pt::LeafCounter<float> cnt[R][kW];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int in_leaf = 0;
  for (int k = 0; k < g.k; ++k) {
    const float* wkc = a.other + (size_t(k) * g.c + c) * g.r * g.s;
    for (int r = 0; r < g.r; ++r) {
      const float* row0 = a.in + ((size_t(n) * g.k + k) * a.hp + h0 + (g.r - 1 - r)) * a.wp + w0 + (g.s - 1);
      for (int s = 0; s < g.s; ++s) {
        const __m256 wv = _mm256_set1_ps(wkc[r * g.s + s]);
        for (int rr = 0; rr < R; ++rr) acc[rr] = _mm256_fmadd_ps(_mm256_loadu_ps(row0 + size_t(rr) * a.wp - s), wv, acc[rr]);
        if (++in_leaf == pt::kLeaf) push_v8<R>(cnt, acc), in_leaf = 0;
      }
    }
  }
  if (in_leaf) push_v8<R>(cnt, acc);
  for (int rr = 0; rr < R; ++rr) {
    float* dx = a.out + ((size_t(n) * g.c + c) * g.h + h0 + rr) * g.w + w0;
    for (int l = 0; l < kW && w0 + l < g.w; ++l) dx[l] = cnt[rr][l].merge();
  }
}

// conv_bwd_filter_tile: the eight taps gathered once per term, shared by the R filters.
template <int R>
DETAUDIT_V8 void conv_bwd_filter_tile_v8(const ConvArgs& a, int k0, int crs0) {
  const pt::Conv& g = a.g;
  const int crs_n = g.c * g.r * g.s;
  int off[kW];
  for (int l = 0; l < kW; ++l) {
    const int crs = crs0 + l < crs_n ? crs0 + l : crs0, s = crs % g.s, r = crs / g.s % g.r, c = crs / (g.s * g.r);
    off[l] = (c * a.hp + r) * a.wp + s;
  }
  const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off));
  pt::LeafCounter<float> cnt[R][kW];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int in_leaf = 0;
  const size_t pq = size_t(g.p) * g.q;
  for (int n = 0; n < g.n; ++n)
    for (int p = 0; p < g.p; ++p) {
      const float* dyrow = a.other + (size_t(n) * g.k + k0) * pq + size_t(p) * g.q;
      const float* xrow = a.in + size_t(n) * g.c * a.hp * a.wp + size_t(p) * g.stride * a.wp;
      for (int q = 0; q < g.q; ++q) {
        const __m256 xv = _mm256_i32gather_ps(xrow + size_t(q) * g.stride, idx, 4);
        for (int rr = 0; rr < R; ++rr) acc[rr] = _mm256_fmadd_ps(_mm256_set1_ps(dyrow[rr * pq + q]), xv, acc[rr]);
        if (++in_leaf == pt::kLeaf) push_v8<R>(cnt, acc), in_leaf = 0;
      }
    }
  if (in_leaf) push_v8<R>(cnt, acc);
  for (int rr = 0; rr < R; ++rr) {
    float* dw = a.out + size_t(k0 + rr) * crs_n + crs0;
    for (int l = 0; l < kW && crs0 + l < crs_n; ++l) dw[l] = cnt[rr][l].merge();
  }
}

// conv_bwd_filter for K >= 8: eight filters k0 .. k0 + 8 in the lanes, R taps crs0 .. crs0 + R in the
// rows; dy transposed to [n][p][q][k] (kp >= K floats per position, zeros past K) so that one load gives
// the eight filters' dy. Terms (n, p, q), fma(dy, x, acc): the generic tile's operations per output.
struct FilterArgs {
  const ConvArgs* a;
  const float* dyt;  // [n][p][q][kp]
  int kp;
};
template <int R>
DETAUDIT_V8 void conv_bwd_filter_k8_v8(const FilterArgs& f, int k0, int crs0) {
  const ConvArgs& a = *f.a;
  const pt::Conv& g = a.g;
  const int crs_n = g.c * g.r * g.s;
  size_t off[R];
  for (int rr = 0; rr < R; ++rr) {
    const int crs = crs0 + rr, s = crs % g.s, r = crs / g.s % g.r, c = crs / (g.s * g.r);
    off[rr] = (size_t(c) * a.hp + r) * a.wp + s;
  }
  pt::LeafCounter<float> cnt[R][kW];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int in_leaf = 0;
  for (int n = 0; n < g.n; ++n)
    for (int p = 0; p < g.p; ++p) {
      const float* dyrow = f.dyt + (size_t(n) * g.p + p) * g.q * f.kp + k0;
      const float* xrow = a.in + size_t(n) * g.c * a.hp * a.wp + size_t(p) * g.stride * a.wp;
      for (int q = 0; q < g.q; ++q) {
        const __m256 d = _mm256_loadu_ps(dyrow + size_t(q) * f.kp);
        const float* xq = xrow + size_t(q) * g.stride;
        for (int rr = 0; rr < R; ++rr) acc[rr] = _mm256_fmadd_ps(d, _mm256_set1_ps(xq[off[rr]]), acc[rr]);
        if (++in_leaf == pt::kLeaf) push_v8<R>(cnt, acc), in_leaf = 0;
      }
    }
  if (in_leaf) push_v8<R>(cnt, acc);
  for (int rr = 0; rr < R; ++rr)
    for (int l = 0; l < kW && k0 + l < g.k; ++l) a.out[size_t(k0 + l) * crs_n + crs0 + rr] = cnt[rr][l].merge();
}
// Units: (block of kW k's, block of kRows crs).
DETAUDIT_V8 void conv_bwd_filter_k8_units(const FilterArgs& f, size_t u0, size_t u1) {
  const pt::Conv& g = f.a->g;
  const int crs_n = g.c * g.r * g.s;
  const size_t cb = (size_t(crs_n) + kRows - 1) / kRows;
  for (size_t u = u0; u < u1; ++u) {
    const int k0 = int(u / cb) * kW, c0 = int(u % cb) * kRows;
    if (c0 + kRows <= crs_n)
      conv_bwd_filter_k8_v8<kRows>(f, k0, c0);
    else
      for (int c = c0; c < crs_n; ++c) conv_bwd_filter_k8_v8<1>(f, k0, c);
  }
}

// gemm_tile (float) with B's eight columns contiguous (tb = N).
template <int R>
DETAUDIT_V8 void gemm_tile_v8(const GemmArgs& g, int i0, int j0) {
  pt::LeafCounter<float> cnt[R][kW];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int kb = 0; kb < g.k; kb += pt::kLeaf) {
    const int ke = std::min(g.k, kb + pt::kLeaf);
    for (int kk = kb; kk < ke; ++kk) {
      const __m256 bv = _mm256_loadu_ps(g.b + size_t(kk) * g.ldb + j0);
      for (int r = 0; r < R; ++r) {
        const int i = i0 + r;
        const float av = g.ta ? g.a[size_t(kk) * g.lda + i] : g.a[size_t(i) * g.lda + kk];
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(av), bv, acc[r]);
      }
    }
    push_v8<R>(cnt, acc);
  }
  for (int r = 0; r < R; ++r)
    for (int l = 0; l < kW; ++l) {
      float* c = g.c + size_t(i0 + r) * g.ldc + j0 + l;
      const float s = cnt[r][l].merge();
      *c = g.beta == 0.0f ? pt::mul(g.alpha, s) : pt::fma(g.alpha, s, pt::mul(g.beta, *c));
    }
}

// The generic tile, or (V: the avx2/avx512 builds) the AVX2 one where it applies (float, tb = N).
template <class T, bool V, int R>
DETAUDIT_BODY void tile_of(const GemmArgsT<T>& g, int i0, int j0) {
  if constexpr (V && std::is_same_v<T, float>) {
    if (!g.tb) return gemm_tile_v8<R>(g, i0, j0);
  }
  gemm_tile<T, R, kW>(g, i0, j0);
}
// Units [u0, u1): unit u is rows (u / nb) * kRows onwards, columns (u % nb) * kW onwards.
template <class T, bool V>
DETAUDIT_BODY void gemm_units(const GemmArgsT<T>& g, size_t u0, size_t u1) {
  const size_t nb = (size_t(g.n) + kW - 1) / kW;
  for (size_t u = u0; u < u1; ++u) {
    const int i0 = int(u / nb) * kRows, j0 = int(u % nb) * kW;
    const bool full_cols = j0 + kW <= g.n;
    for (int i = i0; i < std::min(g.m, i0 + kRows);) {
      if (i + kRows <= g.m && full_cols) {
        tile_of<T, V, kRows>(g, i, j0);
        i += kRows;
        continue;
      }
      if (full_cols)
        tile_of<T, V, 1>(g, i, j0);
      else
        for (int j = j0; j < g.n; ++j) gemm_tile<T, 1, 1>(g, i, j);
      ++i;
    }
  }
}

DETAUDIT_BODY void gemm_body(const GemmArgs& g, size_t u0, size_t u1) { gemm_units<float, false>(g, u0, u1); }
DETAUDIT_BODY void gemm_body_v(const GemmArgs& g, size_t u0, size_t u1) { gemm_units<float, true>(g, u0, u1); }
DETAUDIT_BODY void gemm64_body(const GemmArgs64& g, size_t u0, size_t u1) { gemm_units<double, false>(g, u0, u1); }

// y[n][k][p0 .. p0 + R)[q0 .. q0 + kW): terms (c, r, s), fma(x, w, acc).
template <int R>
DETAUDIT_BODY void conv_fwd_tile(const ConvArgs& a, int n, int k, int p0, int q0) {
  const pt::Conv& g = a.g;
  Tile<float, R, kW> t;
  int in_leaf = 0;
  const float* wk = a.other + size_t(k) * g.c * g.r * g.s;
  for (int c = 0; c < g.c; ++c)
    for (int r = 0; r < g.r; ++r) {
      const float* row0 = a.in + ((size_t(n) * g.c + c) * a.hp + size_t(p0) * g.stride + r) * a.wp + size_t(q0) * g.stride;
      for (int s = 0; s < g.s; ++s) {
        const float wv = *wk++;
        for (int rr = 0; rr < R; ++rr) {
          const float* row = row0 + size_t(rr) * g.stride * a.wp + s;
          for (int l = 0; l < kW; ++l) t.acc[rr][l] = pt::fma(row[l * g.stride], wv, t.acc[rr][l]);
        }
        if (++in_leaf == pt::kLeaf) t.push(), in_leaf = 0;
      }
    }
  if (in_leaf) t.push();
  for (int rr = 0; rr < R; ++rr) {
    float* y = a.out + ((size_t(n) * g.k + k) * g.p + p0 + rr) * g.q + q0;
    for (int l = 0; l < kW && q0 + l < g.q; ++l) y[l] = t.cnt[rr][l].merge();
  }
}
// Units: (n, k, block of kRows p's, block of kW q's).
template <bool V>
DETAUDIT_BODY void conv_fwd_body(const ConvArgs& a, size_t u0, size_t u1) {
  const pt::Conv& g = a.g;
  const size_t qb = (size_t(g.q) + kW - 1) / kW, pb = (size_t(g.p) + kRows - 1) / kRows;
  for (size_t u = u0; u < u1; ++u) {
    const int q0 = int(u % qb) * kW, p0 = int(u / qb % pb) * kRows, k = int(u / (qb * pb) % g.k),
              n = int(u / (qb * pb * g.k));
    const bool v = V && g.stride == 1;
    if (p0 + kRows <= g.p)
      v ? conv_fwd_tile_v8<kRows>(a, n, k, p0, q0) : conv_fwd_tile<kRows>(a, n, k, p0, q0);
    else
      for (int p = p0; p < g.p; ++p) v ? conv_fwd_tile_v8<1>(a, n, k, p, q0) : conv_fwd_tile<1>(a, n, k, p, q0);
  }
}

// dx[n][c][h0 .. h0 + R)[w0 .. w0 + kW): terms (k, r, s), fma(dyd, w, acc); in[n][k][i][j] is dyd at
// (i + pad - (R-1), j + pad - (S-1)), so row h + (R-1-r), column w + (S-1-s).
template <int R>
DETAUDIT_BODY void conv_bwd_data_tile(const ConvArgs& a, int n, int c, int h0, int w0) {
  const pt::Conv& g = a.g;
  Tile<float, R, kW> t;
  int in_leaf = 0;
  for (int k = 0; k < g.k; ++k) {
    const float* wkc = a.other + (size_t(k) * g.c + c) * g.r * g.s;
    for (int r = 0; r < g.r; ++r) {
      const float* row0 = a.in + ((size_t(n) * g.k + k) * a.hp + h0 + (g.r - 1 - r)) * a.wp + w0 + (g.s - 1);
      for (int s = 0; s < g.s; ++s) {
        const float wv = wkc[r * g.s + s];
        for (int rr = 0; rr < R; ++rr) {
          const float* row = row0 + size_t(rr) * a.wp - s;
          for (int l = 0; l < kW; ++l) t.acc[rr][l] = pt::fma(row[l], wv, t.acc[rr][l]);
        }
        if (++in_leaf == pt::kLeaf) t.push(), in_leaf = 0;
      }
    }
  }
  if (in_leaf) t.push();
  for (int rr = 0; rr < R; ++rr) {
    float* dx = a.out + ((size_t(n) * g.c + c) * g.h + h0 + rr) * g.w + w0;
    for (int l = 0; l < kW && w0 + l < g.w; ++l) dx[l] = t.cnt[rr][l].merge();
  }
}
// Units: (n, c, block of kRows h's, block of kW w's).
template <bool V>
DETAUDIT_BODY void conv_bwd_data_body(const ConvArgs& a, size_t u0, size_t u1) {
  const pt::Conv& g = a.g;
  const size_t wb = (size_t(g.w) + kW - 1) / kW, hb = (size_t(g.h) + kRows - 1) / kRows;
  for (size_t u = u0; u < u1; ++u) {
    const int w0 = int(u % wb) * kW, h0 = int(u / wb % hb) * kRows, c = int(u / (wb * hb) % g.c),
              n = int(u / (wb * hb * g.c));
    if (h0 + kRows <= g.h)
      V ? conv_bwd_data_tile_v8<kRows>(a, n, c, h0, w0) : conv_bwd_data_tile<kRows>(a, n, c, h0, w0);
    else
      for (int h = h0; h < g.h; ++h) V ? conv_bwd_data_tile_v8<1>(a, n, c, h, w0) : conv_bwd_data_tile<1>(a, n, c, h, w0);
  }
}

// dw[k0 .. k0 + R)[crs0 .. crs0 + kW) (flattened c, r, s): terms (n, p, q), fma(dy, x, acc). Lanes past
// the last crs read crs0's taps and are not stored.
template <int R>
DETAUDIT_BODY void conv_bwd_filter_tile(const ConvArgs& a, int k0, int crs0) {
  const pt::Conv& g = a.g;
  const int crs_n = g.c * g.r * g.s;
  size_t off[kW];
  for (int l = 0; l < kW; ++l) {
    const int crs = crs0 + l < crs_n ? crs0 + l : crs0, s = crs % g.s, r = crs / g.s % g.r, c = crs / (g.s * g.r);
    off[l] = (size_t(c) * a.hp + r) * a.wp + s;
  }
  Tile<float, R, kW> t;
  int in_leaf = 0;
  const size_t pq = size_t(g.p) * g.q;
  for (int n = 0; n < g.n; ++n)
    for (int p = 0; p < g.p; ++p) {
      const float* dyrow = a.other + (size_t(n) * g.k + k0) * pq + size_t(p) * g.q;
      const float* xrow = a.in + size_t(n) * g.c * a.hp * a.wp + size_t(p) * g.stride * a.wp;
      for (int q = 0; q < g.q; ++q) {
        const float* xq = xrow + size_t(q) * g.stride;
        float xv[kW];
        for (int l = 0; l < kW; ++l) xv[l] = xq[off[l]];
        for (int rr = 0; rr < R; ++rr) {
          const float d = dyrow[rr * pq + q];
          for (int l = 0; l < kW; ++l) t.acc[rr][l] = pt::fma(d, xv[l], t.acc[rr][l]);
        }
        if (++in_leaf == pt::kLeaf) t.push(), in_leaf = 0;
      }
    }
  if (in_leaf) t.push();
  for (int rr = 0; rr < R; ++rr) {
    float* dw = a.out + size_t(k0 + rr) * crs_n + crs0;
    for (int l = 0; l < kW && crs0 + l < crs_n; ++l) dw[l] = t.cnt[rr][l].merge();
  }
}
// Units: (block of kRows k's, block of kW crs).
template <bool V>
DETAUDIT_BODY void conv_bwd_filter_body(const ConvArgs& a, size_t u0, size_t u1) {
  const pt::Conv& g = a.g;
  const size_t cb = (size_t(g.c) * g.r * g.s + kW - 1) / kW;
  for (size_t u = u0; u < u1; ++u) {
    const int k0 = int(u / cb) * kRows, c0 = int(u % cb) * kW;
    if (k0 + kRows <= g.k)
      V ? conv_bwd_filter_tile_v8<kRows>(a, k0, c0) : conv_bwd_filter_tile<kRows>(a, k0, c0);
    else
      for (int k = k0; k < g.k; ++k) V ? conv_bwd_filter_tile_v8<1>(a, k, c0) : conv_bwd_filter_tile<1>(a, k, c0);
  }
}

// Leaf partials [l0, l1) of a sum of n terms (portable::leaf), and dy where the sum is a loss.
DETAUDIT_BODY void leaves_body(pt::LeafKind kind, const float* x, const float* y, size_t n, float* part, size_t l0,
                               size_t l1) {
  for (size_t l = l0; l < l1; ++l) part[l] = pt::leaf(kind, x, y, l * pt::kLeaf, std::min(n, (l + 1) * pt::kLeaf));
}
// Rows [r0, r1) of a softmax.
DETAUDIT_BODY void softmax_body(const float* x, float* y, size_t cols, size_t r0, size_t r1) {
  for (size_t r = r0; r < r1; ++r) pt::softmax_row(x + r * cols, y + r * cols, cols);
}
DETAUDIT_BODY void unary_body(UnaryOp op, const float* x, float* y, size_t b, size_t e) {
  // The op chosen once, outside the loop, so that the simple ones vectorise (a compare and a select, or
  // one rounded mul, per element: the same bits at any width).
  switch (op) {
    case UnaryOp::kRelu:
      for (size_t i = b; i < e; ++i) y[i] = pt::relu(x[i]);
      return;
    case UnaryOp::kSquare:
      for (size_t i = b; i < e; ++i) y[i] = pt::mul(x[i], x[i]);
      return;
    default:
      for (size_t i = b; i < e; ++i) y[i] = pt::unary(op, x[i]);
  }
}
DETAUDIT_BODY void axpy_body(float alpha, const float* x, float* y, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) y[i] = pt::fma(alpha, x[i], y[i]);
}

struct IsaOps {
  CpuIsa isa;
  void (*gemm)(const GemmArgs&, size_t, size_t);
  void (*gemm64)(const GemmArgs64&, size_t, size_t);
  void (*conv_fwd)(const ConvArgs&, size_t, size_t);
  void (*conv_bwd_data)(const ConvArgs&, size_t, size_t);
  void (*conv_bwd_filter)(const ConvArgs&, size_t, size_t);
  // The filter gradient with eight filters in the lanes (K >= 8); nullptr on the scalar build.
  void (*conv_bwd_filter_k8)(const FilterArgs&, size_t, size_t);
  void (*leaves)(pt::LeafKind, const float*, const float*, size_t, float*, size_t, size_t);
  void (*softmax)(const float*, float*, size_t, size_t, size_t);
  void (*unary)(UnaryOp, const float*, float*, size_t, size_t);
  void (*axpy)(float, const float*, float*, size_t, size_t);
};

#define DETAUDIT_PORTABLE_ISA(suffix, attr, V)                                                                    \
  attr void gemm_##suffix(const GemmArgs& g, size_t a, size_t b) { V ? gemm_body_v(g, a, b) : gemm_body(g, a, b); } \
  attr void gemm64_##suffix(const GemmArgs64& g, size_t a, size_t b) { gemm64_body(g, a, b); }                   \
  attr void conv_fwd_##suffix(const ConvArgs& c, size_t a, size_t b) { conv_fwd_body<V>(c, a, b); }             \
  attr void conv_bwd_data_##suffix(const ConvArgs& c, size_t a, size_t b) { conv_bwd_data_body<V>(c, a, b); }   \
  attr void conv_bwd_filter_##suffix(const ConvArgs& c, size_t a, size_t b) { conv_bwd_filter_body<V>(c, a, b); } \
  attr void leaves_##suffix(pt::LeafKind k, const float* x, const float* y, size_t n, float* p, size_t a, size_t b) { \
    leaves_body(k, x, y, n, p, a, b);                                                                            \
  }                                                                                                              \
  attr void softmax_##suffix(const float* x, float* y, size_t cols, size_t a, size_t b) {                       \
    softmax_body(x, y, cols, a, b);                                                                              \
  }                                                                                                              \
  attr void unary_##suffix(UnaryOp op, const float* x, float* y, size_t a, size_t b) { unary_body(op, x, y, a, b); } \
  attr void axpy_##suffix(float alpha, const float* x, float* y, size_t a, size_t b) { axpy_body(alpha, x, y, a, b); }

DETAUDIT_PORTABLE_ISA(avx512, __attribute__((target("avx512f,avx512vl,avx2,fma"))), true)
DETAUDIT_PORTABLE_ISA(avx2, __attribute__((target("avx2,fma"))), true)
DETAUDIT_PORTABLE_ISA(scalar, , false)

#define DETAUDIT_PORTABLE_OPS(suffix, isa, k8)                                                                  \
  IsaOps {                                                                                                  \
    isa, gemm_##suffix, gemm64_##suffix, conv_fwd_##suffix, conv_bwd_data_##suffix, conv_bwd_filter_##suffix, k8, \
        leaves_##suffix, softmax_##suffix, unary_##suffix, axpy_##suffix                                    \
  }
const IsaOps kAvx512Ops = DETAUDIT_PORTABLE_OPS(avx512, CpuIsa::kAvx512, conv_bwd_filter_k8_units);
const IsaOps kAvx2Ops = DETAUDIT_PORTABLE_OPS(avx2, CpuIsa::kAvx2, conv_bwd_filter_k8_units);
const IsaOps kScalarOps = DETAUDIT_PORTABLE_OPS(scalar, CpuIsa::kScalar, nullptr);

// The ops for `isa` (kAuto: the widest this CPU has), or nullptr when the CPU lacks it.
const IsaOps* ops_for(CpuIsa isa) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("fma");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (isa) {
    case CpuIsa::kAuto: return avx512 ? &kAvx512Ops : avx2 ? &kAvx2Ops : &kScalarOps;
    case CpuIsa::kAvx512: return avx512 ? &kAvx512Ops : nullptr;
    case CpuIsa::kAvx2: return avx2 ? &kAvx2Ops : nullptr;
    case CpuIsa::kScalar: return &kScalarOps;
  }
  return nullptr;
}

pt::Conv conv_of(const ConvShape& s) { return {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride, s.pad, s.p(), s.q()}; }

class CpuPortable final : public Backend {
 public:
  CpuPortable(int threads, CpuIsa isa) : isa_(isa), ops_(ops_for(isa)), pool_(std::clamp(threads, 1, 256)) {
    // The vector builds run gemm and the forward and filter-gradient convolutions through the cpu
    // backend's packed, cache-blocked driver in its pairwise order, which is this order's definition for
    // them: chunks of kGemmKc = kLeaf terms aligned at term 0, each one fma chain from +0 in term order,
    // combined by the same binary counter, then alpha/beta as gemm_at does (tests/test_portable.cpp
    // checks every shape against the header's per-element functions). The scalar build keeps the loops
    // below: the driver's scalar micro-kernel does not round a*b+c once.
    static_assert(native::kGemmKc == pt::kLeaf, "the driver's chunk must be the portable leaf");
    if (ops_ && ops_->isa != CpuIsa::kScalar) {
      driver_ = native::isa_kernels(ops_->isa);
      scratch_.resize(size_t(pool_.size()));
    }
  }

  std::string name() const override {
    std::string s = "cpu?order=portable&threads=" + std::to_string(pool_.size());
    if (isa_ != CpuIsa::kAuto) s += std::string("&isa=") + to_string(isa_);
    return s;
  }
  std::string describe() const override {
    return name() + " (isa " + (ops_ ? to_string(ops_->isa) : "unavailable") + ")";
  }
  std::vector<std::pair<std::string, std::string>> details() const override {
    return {{"order", "portable"},
            {"threads", std::to_string(pool_.size())},
            {"isa", ops_ ? to_string(ops_->isa) : std::string("unavailable (") + to_string(isa_) + ")"},
            {"leaf", std::to_string(pt::kLeaf)}};
  }

  Status gemm(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (m < 0 || n < 0 || k < 0) return Status::invalid("gemm: negative size");
    if (driver_) {
      native::GemmContext ctx = driver_context();
      return native::gemm(ctx, {ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc});
    }
    const GemmArgs g{ta == Trans::kT, tb == Trans::kT, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
    split(gemm_units_of(m, n), [&](size_t u0, size_t u1) { ops_->gemm(g, u0, u1); });
    return Status::ok();
  }
  Status gemm_f64(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                  int ldb, double beta, double* c, int ldc) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (m < 0 || n < 0 || k < 0) return Status::invalid("gemm: negative size");
    const GemmArgs64 g{ta == Trans::kT, tb == Trans::kT, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
    split(gemm_units_of(m, n), [&](size_t u0, size_t u1) { ops_->gemm64(g, u0, u1); });
    return Status::ok();
  }
  Status conv2d_fwd(const ConvShape& s, const float* x, const float* w, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    if (driver_ && size_t(s.n) * s.p() * s.q() <= size_t(INT32_MAX)) {
      native::GemmContext ctx = driver_context();
      return native::conv_fwd(ctx, s, x, w, y);
    }
    // Slack: the lanes of the last q block read up to column (q0 + kW - 1) * stride + S - 1.
    const int wp = std::max(s.w + 2 * s.pad, (ceil_to(s.q(), kW) - 1) * s.stride + s.s);
    ConvArgs a{conv_of(s), padded(x, size_t(s.n) * s.c, s.h, s.w, s.pad, wp), s.h + 2 * s.pad, wp, w, y};
    if (!a.in) return Status::error("conv2d: out of memory for the padded input");
    split(size_t(s.n) * s.k * blocks(s.p(), kRows) * blocks(s.q(), kW),
          [&](size_t u0, size_t u1) { ops_->conv_fwd(a, u0, u1); });
    return Status::ok();
  }
  // With a bias: the driver adds it in its output pass, one rounded add per element (bias_add's bits).
  Status conv2d_fwd_bias(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    if (driver_ && size_t(s.n) * s.p() * s.q() <= size_t(INT32_MAX)) {
      native::GemmContext ctx = driver_context();
      return native::conv_fwd(ctx, s, x, w, y, bias);
    }
    return Backend::conv2d_fwd_bias(s, x, w, bias, y);  // the forward, then bias_add
  }
  Status conv2d_bwd_data(const ConvShape& s, const float* dy, const float* w, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    // Stride 1, a square filter and pad < its size, on the vector builds: the header's sum over (k, r, s)
    // of dy at (h + pad - r, w + pad - s) reads dy backwards as r and s grow. Flipped in space (dyF[i] =
    // dy[P-1-i]) it reads forwards: dxF[h'] = sum over (k, r, s) of dyF[h' + r - (R-1-pad)] *
    // w[k][c][r][s], a forward convolution of dyF with the transposed (not flipped) filter and padding
    // R-1-pad, whose terms the driver takes in the same (k, r, s) order. dx is its output flipped back.
    if (driver_ && s.stride == 1 && s.r == s.s && s.pad <= s.r - 1 && size_t(s.n) * s.h * s.w <= size_t(INT32_MAX)) {
      const int P = s.p(), Q = s.q();
      const size_t pq = size_t(P) * Q, hw = size_t(s.h) * s.w;
      float* dyf = buf_.get(size_t(s.n) * s.k * pq);
      float* wt = buf2_.get(s.w_size());
      float* dxf = buf3_.get(s.x_size());
      if (!dyf || !wt || !dxf) return Status::error("conv2d: out of memory for the flipped gradient");
      split(size_t(s.n) * s.k, [&](size_t b, size_t e) {
        for (size_t pl = b; pl < e; ++pl)
          for (size_t i = 0; i < pq; ++i) dyf[pl * pq + i] = dy[pl * pq + (pq - 1 - i)];
      });
      const size_t rs = size_t(s.r) * s.s;
      for (int k = 0; k < s.k; ++k)
        for (int c = 0; c < s.c; ++c)
          std::copy(w + (size_t(k) * s.c + c) * rs, w + (size_t(k) * s.c + c + 1) * rs,
                    wt + (size_t(c) * s.k + k) * rs);
      ConvShape t;
      t.n = s.n, t.c = s.k, t.h = P, t.w = Q, t.k = s.c, t.r = s.r, t.s = s.s, t.stride = 1, t.pad = s.r - 1 - s.pad;
      native::GemmContext ctx = driver_context();
      DETAUDIT_RETURN_IF_ERROR(native::conv_fwd(ctx, t, dyf, wt, dxf));
      split(size_t(s.n) * s.c, [&](size_t b, size_t e) {
        for (size_t pl = b; pl < e; ++pl)
          for (size_t i = 0; i < hw; ++i) dx[pl * hw + i] = dxf[pl * hw + (hw - 1 - i)];
      });
      return Status::ok();
    }
    // dyd at (i + pad - (R-1), j + pad - (S-1)) for i < H + R - 1, j < W + S - 1: dy where that point is
    // on the stride's grid inside dy, else 0; then slack columns for the last w block's lanes.
    const int hp = s.h + s.r - 1, wv = s.w + s.s - 1, wp = ceil_to(s.w, kW) + s.s - 1, P = s.p(), Q = s.q();
    const size_t planes = size_t(s.n) * s.k;
    float* d = buf_.get(planes * hp * wp);
    if (!d) return Status::error("conv2d: out of memory for the dilated gradient");
    split(planes, [&](size_t b, size_t e) {
      for (size_t pl = b; pl < e; ++pl)
        for (int i = 0; i < hp; ++i)
          for (int j = 0; j < wp; ++j) {
            const int ph = i + s.pad - (s.r - 1), qw = j + s.pad - (s.s - 1);
            const bool on = j < wv && ph >= 0 && qw >= 0 && ph % s.stride == 0 && qw % s.stride == 0 &&
                            ph / s.stride < P && qw / s.stride < Q;
            d[(pl * hp + i) * wp + j] = on ? dy[(pl * P + ph / s.stride) * Q + qw / s.stride] : 0.0f;
          }
    });
    ConvArgs a{conv_of(s), d, hp, wp, w, dx};
    split(size_t(s.n) * s.c * blocks(s.h, kRows) * blocks(s.w, kW),
          [&](size_t u0, size_t u1) { ops_->conv_bwd_data(a, u0, u1); });
    return Status::ok();
  }
  Status conv2d_bwd_filter(const ConvShape& s, const float* x, const float* dy, float* dw) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_conv(s));
    if (driver_ && size_t(s.n) * s.p() * s.q() <= size_t(INT32_MAX)) {
      native::GemmContext ctx = driver_context();
      return native::conv_bwd_filter(ctx, s, x, dy, 0.0f, dw);
    }
    ConvArgs a{conv_of(s), padded(x, size_t(s.n) * s.c, s.h, s.w, s.pad, s.w + 2 * s.pad), s.h + 2 * s.pad,
               s.w + 2 * s.pad, dy, dw};
    if (!a.in) return Status::error("conv2d: out of memory for the padded input");
    if (ops_->conv_bwd_filter_k8 && s.k >= kW) {
      const int kp = ceil_to(s.k, kW), P = s.p(), Q = s.q();
      float* t = buf2_.get(size_t(s.n) * P * Q * kp);
      if (!t) return Status::error("conv2d: out of memory for the transposed gradient");
      split(size_t(s.n) * P, [&](size_t b, size_t e) {
        for (size_t np = b; np < e; ++np)
          for (int q = 0; q < Q; ++q)
            for (int k = 0; k < kp; ++k)
              t[(np * Q + q) * kp + k] =
                  k < s.k ? dy[((np / P * s.k + k) * P + np % P) * Q + q] : 0.0f;
      });
      const FilterArgs f{&a, t, kp};
      split(blocks(s.k, kW) * blocks(s.c * s.r * s.s, kRows),
            [&](size_t u0, size_t u1) { ops_->conv_bwd_filter_k8(f, u0, u1); });
      return Status::ok();
    }
    split(blocks(s.k, kRows) * blocks(s.c * s.r * s.s, kW), [&](size_t u0, size_t u1) { ops_->conv_bwd_filter(a, u0, u1); });
    return Status::ok();
  }
  // 2x2 windows at stride 2: the host's branch-free loops (kernels/cpu/pool.hpp), whose first-maximum rule
  // and 0 + g gradient are pool_argmax's and pool_bwd_at's value for value.
  Status maxpool_fwd(const PoolShape& s, const float* x, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_pool(s));
    if (s.window == 2 && s.stride == 2) {
      const size_t hw = size_t(s.h) * s.w, pq = size_t(s.p()) * s.q();
      split(size_t(s.n) * s.c, [&](size_t b, size_t e) { maxpool2x2_fwd(x + b * hw, y + b * pq, e - b, s.h, s.w); });
      return Status::ok();
    }
    const pt::Pool g{s.h, s.w, s.window, s.stride, s.p(), s.q()};
    const size_t pq = size_t(g.p) * g.q;
    split(s.y_size(), [&](size_t e0, size_t e1) {
      for (size_t e = e0; e < e1; ++e) {
        const float* plane = x + e / pq * size_t(g.h) * g.w;
        y[e] = plane[pt::pool_argmax(g, plane, int(e % pq / g.q), int(e % g.q))];
      }
    });
    return Status::ok();
  }
  Status maxpool_bwd(const PoolShape& s, const float* x, const float*, const float* dy, float* dx) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    DETAUDIT_RETURN_IF_ERROR(validate_pool(s));
    if (s.window == 2 && s.stride == 2) {
      const size_t hw = size_t(s.h) * s.w, pq = size_t(s.p()) * s.q();
      split(size_t(s.n) * s.c,
            [&](size_t b, size_t e) { maxpool2x2_bwd(x + b * hw, dy + b * pq, dx + b * hw, e - b, s.h, s.w); });
      return Status::ok();
    }
    const pt::Pool g{s.h, s.w, s.window, s.stride, s.p(), s.q()};
    const size_t hw = size_t(g.h) * g.w, pq = size_t(g.p) * g.q;
    if (s.stride == s.window) {
      // Windows that do not overlap: each input element is in one window at most, so
      // pt::pool_bwd_at is 0 + dy at the window's first maximum and 0 elsewhere: written directly.
      split(size_t(s.n) * s.c, [&](size_t b, size_t e) {
        for (size_t pl = b; pl < e; ++pl) {
          float* d = dx + pl * hw;
          std::fill(d, d + hw, 0.0f);
          for (int p = 0; p < g.p; ++p)
            for (int q = 0; q < g.q; ++q)
              d[pt::pool_argmax(g, x + pl * hw, p, q)] = pt::add(0.0f, dy[pl * pq + size_t(p) * g.q + q]);
        }
      });
      return Status::ok();
    }
    split(s.x_size(), [&](size_t e0, size_t e1) {
      for (size_t e = e0; e < e1; ++e)
        dx[e] = pt::pool_bwd_at(g, x + e / hw * hw, dy + e / hw * pq, int(e % hw / g.w), int(e % g.w));
    });
    return Status::ok();
  }
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (op == ReduceOp::kDot && !y) return Status::invalid("reduce dot: y is null");
    std::vector<float> part((n + pt::kLeaf - 1) / pt::kLeaf);
    split(part.size(), [&](size_t l0, size_t l1) { ops_->leaves(pt::leaf_kind(op), x, y, n, part.data(), l0, l1); });
    const float s = tree(part);
    *out = op == ReduceOp::kNorm2 ? pt::sqrt(s) : s;
    return Status::ok();
  }
  Status softmax(const float* x, float* y, size_t rows, size_t cols) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (cols == 0) return Status::invalid("softmax: no columns");
    split(rows, [&](size_t r0, size_t r1) { ops_->softmax(x, y, cols, r0, r1); });
    return Status::ok();
  }
  Status unary(UnaryOp op, const float* x, float* y, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (!pt::has_unary(op)) return Status::unsupported("cpu?order=portable: tanh has no portable definition yet");
    split(n, [&](size_t b, size_t e) { ops_->unary(op, x, y, b, e); });
    return Status::ok();
  }
  Status binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    split(n, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) y[i] = pt::binary(op, a[i], b[i]);
    });
    return Status::ok();
  }
  Status axpy(size_t n, float alpha, const float* x, float* y) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    split(n, [&](size_t b, size_t e) { ops_->axpy(alpha, x, y, b, e); });
    return Status::ok();
  }

  // ---- training ops -----------------------------------------------------------------------------------
  Status bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    // One rounded add per element, plane by plane (train_ops: y + bias[channel], no fma).
    if (hw == 1) {
      split(n, [&](size_t b, size_t e) { train_ops::bias_add_f32(y, bias, c, 1, b * c, e * c); });
      return Status::ok();
    }
    split(n * c, [&](size_t b, size_t e) { train_ops::bias_add_f32(y, bias, c, hw, b, e); });
    return Status::ok();
  }
  Status bias_grad(const float* dy, float* db, size_t n, size_t c, size_t hw) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    // A channel's terms, image after image, copied into one run; its leaves are then independent
    // chains, computed eight at a time (each lane pt::leaf's chain term for term), and the tree combines
    // them: TreeSum's result over the same terms.
    std::atomic<bool> oom{false};
    split(c, [&](size_t j0, size_t j1) {
      std::vector<float> run, part;
      try {
        run.resize(n * hw);
        part.resize((n * hw + pt::kLeaf - 1) / pt::kLeaf);
      } catch (const std::bad_alloc&) {
        oom = true;
        return;
      }
      for (size_t j = j0; j < j1; ++j) {
        for (size_t i = 0; i < n; ++i) std::copy(dy + (i * c + j) * hw, dy + (i * c + j + 1) * hw, run.data() + i * hw);
        sum_leaves(run.data(), run.size(), part.data());
        db[j] = tree(part);
      }
    });
    return oom ? Status::error("bias_grad: out of memory") : Status::ok();
  }
  Status unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (!pt::has_unary_bwd(op)) return Status::unsupported(std::string("unary_bwd ") + to_string(op));
    split(n, [&](size_t b, size_t e) {
      if (op == UnaryOp::kRelu) {  // a compare and a select: vectorised
        for (size_t i = b; i < e; ++i) dx[i] = pt::relu_bwd(x[i], dy[i]);
        return;
      }
      for (size_t i = b; i < e; ++i) dx[i] = pt::unary_bwd(op, x[i], y[i], dy[i]);
    });
    return Status::ok();
  }
  Status upsample2_fwd(const float* x, float* y, size_t planes, int h, int w) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (h < 1 || w < 1) return Status::invalid("upsample2: h and w must be positive");
    split(planes, [&](size_t b, size_t e) { train_ops::upsample2_fwd(x, y, h, w, b, e); });  // copies only
    return Status::ok();
  }
  Status upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (h < 1 || w < 1) return Status::invalid("upsample2: h and w must be positive");
    // (r0[0] + r0[1]) + (r1[0] + r1[1]) per element: upsample2_bwd_at's adds in its order.
    split(planes, [&](size_t b, size_t e) { train_ops::upsample2_bwd_f32(dy, dx, h, w, b, e); });
    return Status::ok();
  }
  Status copy_2d(size_t rows, size_t cols, const float* src, size_t src_ld, float* dst, size_t dst_ld) override {
    for (size_t i = 0; i < rows; ++i) std::copy(src + i * src_ld, src + i * src_ld + cols, dst + i * dst_ld);
    return Status::ok();
  }
  Status fill(float* y, float value, size_t n) override {
    std::fill(y, y + n, value);
    return Status::ok();
  }
  Status scale(float* y, float alpha, size_t n) override {
    for (size_t i = 0; i < n; ++i) y[i] = pt::mul(alpha, y[i]);
    return Status::ok();
  }
  Status loss(LossOp op, const float* y, const float* t, size_t n, float* value, float* dy) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    if (n == 0) return Status::invalid("loss: no elements");
    const float scale = pt::loss_scale(op, n);
    std::vector<float> part((n + pt::kLeaf - 1) / pt::kLeaf);
    split(part.size(), [&](size_t l0, size_t l1) { ops_->leaves(pt::leaf_kind(op), y, t, n, part.data(), l0, l1); });
    if (dy)
      split(n, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) dy[i] = pt::loss_grad(op, y[i], t[i], scale);
      });
    *value = pt::div(tree(part), float(n));
    return Status::ok();
  }
  Status adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    split(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i)
        pt::adam(p.lr, p.beta1, p.beta2, p.eps, p.bias_correction1, p.bias_correction2, &w[i], g[i], &m[i], &v[i]);
    });
    return Status::ok();
  }
  Status sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n) override {
    DETAUDIT_RETURN_IF_ERROR(ready());
    split(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) pt::sgd(p.lr, p.momentum, &w[i], g[i], &velocity[i]);
    });
    return Status::ok();
  }

 private:
  Status ready() const {
    if (!ops_)
      return Status::unavailable(std::string("cpu: isa=") + to_string(isa_) + " forced but this CPU lacks it");
    return Status::ok();
  }
  // fn(b, e) over static ranges of [0, n): part t of T gets [n*t/T, n*(t+1)/T). Small work stays on
  // the calling thread.
  template <class F>
  void split(size_t n, F&& fn) {
    const int threads = pool_.size();
    if (threads == 1 || n < 64) return fn(size_t(0), n);
    const int parts = int(std::min<size_t>(size_t(threads), n));
    pool_.run_n(parts, [&](int t) { fn(n * size_t(t) / size_t(parts), n * size_t(t + 1) / size_t(parts)); });
  }
  // Planes of h x w, zero-padded by pad on every side, rows of wp >= w + 2*pad floats (zeros past the
  // padding), in buf_ (nullptr: out of memory). Without padding or slack: x itself.
  const float* padded(const float* x, size_t planes, int h, int w, int pad, int wp) {
    if (pad == 0 && wp == w) return x;
    const int hp = h + 2 * pad;
    float* d = buf_.get(planes * hp * wp);
    if (!d) return nullptr;
    split(planes, [&](size_t b, size_t e) {
      for (size_t pl = b; pl < e; ++pl) {
        float* o = d + pl * hp * wp;
        std::fill(o, o + size_t(hp) * wp, 0.0f);
        for (int i = 0; i < h; ++i) std::copy(x + (pl * h + i) * w, x + (pl * h + i + 1) * w, o + size_t(i + pad) * wp + pad);
      }
    });
    return d;
  }
  static int ceil_to(int n, int m) { return (n + m - 1) / m * m; }
  static size_t blocks(int n, int m) { return size_t((n + m - 1) / m); }
  static size_t gemm_units_of(int m, int n) { return blocks(m, kRows) * blocks(n, kW); }
  // A grow-only buffer.
  struct Buffer {
    std::vector<float> v;
    float* get(size_t n) {
      try {
        if (v.size() < n) v.resize(n);
      } catch (const std::bad_alloc&) {
        return nullptr;
      }
      return v.data();
    }
  };

  // The leaf partials of a sum of the n terms x[0 .. n) (pt::leaf, kSum): eight whole leaves in lockstep
  // (eight independent chains, so the adds overlap), the rest one at a time.
  static void sum_leaves(const float* x, size_t n, float* part) {
    constexpr size_t L = pt::kLeaf, kLanes = 8;
    const size_t leaves = (n + L - 1) / L, full = n / L;
    size_t l = 0;
    for (; l + kLanes <= full; l += kLanes) {
      float acc[kLanes] = {};
      const float* b = x + l * L;
      for (size_t u = 0; u < L; ++u)
        for (size_t k = 0; k < kLanes; ++k) acc[k] = pt::add(acc[k], b[k * L + u]);
      for (size_t k = 0; k < kLanes; ++k) part[l + k] = acc[k];
    }
    for (; l < leaves; ++l) part[l] = pt::leaf(pt::LeafKind::kSum, x, nullptr, l * L, std::min(n, (l + 1) * L));
  }
  // The binary counter over leaf partials, in leaf order.
  static float tree(const std::vector<float>& part) {
    pt::LeafCounter<float> c;
    for (float v : part) c.push(v);
    return c.merge();
  }

  native::GemmContext driver_context() {
    return {driver_, &pool_, ReduceOrder::kPairwise, 0, &scratch_, &shared_, &staging_};
  }

  CpuIsa isa_;
  const IsaOps* ops_;
  ThreadPool pool_;
  Buffer buf_, buf2_, buf3_;
  // The packed driver (vector builds): its kernels and working memory.
  const native::IsaKernels* driver_ = nullptr;
  std::vector<native::ThreadScratch> scratch_;
  std::vector<native::AlignedBuffer> shared_, staging_ = std::vector<native::AlignedBuffer>(4);
};

}  // namespace

std::unique_ptr<Backend> make_cpu_portable(int threads, CpuIsa isa) { return std::make_unique<CpuPortable>(threads, isa); }

}  // namespace detaudit
