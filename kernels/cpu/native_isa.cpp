// Per-ISA kernels of the cpu backend: gemm micro-kernels, the gemm epilogue and reduction leaves.
// determinism: every FMA is written out (_mm512_fmadd_ps, _mm256_fmadd_ps, std::fma) and the project
// builds with -ffp-contract=off, so a C element gets one FMA per k, in k order, on every path; a
// reduction lane gets the same adds in the same order whatever the vector width (kLanes layout).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/native_kernels.hpp"

namespace detaudit::native {
namespace {

// ---- AVX-512: up to 12 x 32 micro-tile (24 zmm accumulators) ----------------------------------
// MR rows of an A panel packed kMr512 wide; row counts below kMr512 (edge tiles, small M) get their
// own instantiation instead of computing zero-padded rows.
constexpr int kMr512 = 12, kNr512 = 32;

template <int MR>
__attribute__((target("avx512f,fma"))) void ukernel_avx512(int kc, const float* a, const float* b,
                                                           const float* src, ptrdiff_t lds, const float* add,
                                                           ptrdiff_t lda, float* dst, ptrdiff_t ldd,
                                                           const Epilogue* epi) {
  __m512 c0[MR], c1[MR];
  if (src) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm512_loadu_ps(src + i * lds);
      c1[i] = _mm512_loadu_ps(src + i * lds + 16);
    }
  } else {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  }
#pragma GCC unroll 4
  for (int kk = 0; kk < kc; ++kk) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNr512), _MM_HINT_T0);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      __m512 ai = _mm512_set1_ps(a[i]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    a += kMr512;
    b += kNr512;
  }
  if (add) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm512_add_ps(_mm512_loadu_ps(add + i * lda), c0[i]);
      c1[i] = _mm512_add_ps(_mm512_loadu_ps(add + i * lda + 16), c1[i]);
    }
  }
  if (!epi) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      _mm512_storeu_ps(dst + i * ldd, c0[i]);
      _mm512_storeu_ps(dst + i * ldd + 16, c1[i]);
    }
    return;
  }
  const __m512 alpha = _mm512_set1_ps(epi->alpha), beta = _mm512_set1_ps(epi->beta);
  if (epi->beta == 0.0f) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      _mm512_storeu_ps(dst + i * ldd, _mm512_mul_ps(alpha, c0[i]));
      _mm512_storeu_ps(dst + i * ldd + 16, _mm512_mul_ps(alpha, c1[i]));
    }
  } else {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      float* d = dst + i * ldd;
      _mm512_storeu_ps(d, _mm512_fmadd_ps(alpha, c0[i], _mm512_mul_ps(beta, _mm512_loadu_ps(d))));
      _mm512_storeu_ps(d + 16, _mm512_fmadd_ps(alpha, c1[i], _mm512_mul_ps(beta, _mm512_loadu_ps(d + 16))));
    }
  }
}

__attribute__((target("avx512f,fma"))) void epilogue_row_avx512(const float* acc, float* c, size_t n,
                                                                Epilogue e) {
  const __m512 alpha = _mm512_set1_ps(e.alpha), beta = _mm512_set1_ps(e.beta);
  size_t j = 0;
  if (e.beta == 0.0f) {
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(c + j, _mm512_mul_ps(alpha, _mm512_loadu_ps(acc + j)));
    for (; j < n; ++j) c[j] = e.alpha * acc[j];
  } else {
    for (; j + 16 <= n; j += 16)
      _mm512_storeu_ps(c + j, _mm512_fmadd_ps(alpha, _mm512_loadu_ps(acc + j),
                                              _mm512_mul_ps(beta, _mm512_loadu_ps(c + j))));
    for (; j < n; ++j) c[j] = std::fma(e.alpha, acc[j], e.beta * c[j]);
  }
}

// B read in place (see GemmUkernelRows): the same FMA chain per element as ukernel_avx512.
// Wide: cols may exceed 16 (two vectors a row); otherwise only the first vector is computed.
template <int MR, bool Wide>
__attribute__((target("avx512f,fma"))) inline void rows_avx512(int kc, const float* a, int astep, const float* b,
                                                                const ptrdiff_t* rows, int cols, const float* src,
                                                                ptrdiff_t lds, const float* add, ptrdiff_t lda,
                                                                float* dst, ptrdiff_t ldd, const Epilogue* epi) {
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xffff) : cols <= 16 ? __mmask16(0) : __mmask16((1u << (cols - 16)) - 1);
  __m512 c0[MR], c1[MR];
  if (src) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm512_maskz_loadu_ps(m0, src + i * lds);
      c1[i] = _mm512_maskz_loadu_ps(m1, src + i * lds + 16);
    }
  } else {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  }
#pragma GCC unroll 4
  for (int kk = 0; kk < kc; ++kk) {
    const float* bk = b + rows[kk];
    __m512 b0 = _mm512_maskz_loadu_ps(m0, bk), b1 = Wide ? _mm512_maskz_loadu_ps(m1, bk + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      __m512 ai = _mm512_set1_ps(a[i]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      if constexpr (Wide) c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    a += astep;
  }
  if (add) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, add + i * lda), c0[i]);
      c1[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, add + i * lda + 16), c1[i]);
    }
  }
  if (epi) {
    const __m512 alpha = _mm512_set1_ps(epi->alpha), beta = _mm512_set1_ps(epi->beta);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      float* d = dst + i * ldd;
      if (epi->beta == 0.0f) {
        c0[i] = _mm512_mul_ps(alpha, c0[i]);
        c1[i] = _mm512_mul_ps(alpha, c1[i]);
      } else {
        c0[i] = _mm512_fmadd_ps(alpha, c0[i], _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(m0, d)));
        c1[i] = _mm512_fmadd_ps(alpha, c1[i], _mm512_mul_ps(beta, _mm512_maskz_loadu_ps(m1, d + 16)));
      }
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    _mm512_mask_storeu_ps(dst + i * ldd, m0, c0[i]);
    _mm512_mask_storeu_ps(dst + i * ldd + 16, m1, c1[i]);
  }
}

template <int MR>
__attribute__((target("avx512f,fma"))) void ukernel_rows_avx512(int kc, const float* a, int astep, const float* b,
                                                                const ptrdiff_t* rows, int cols, const float* src,
                                                                ptrdiff_t lds, const float* add, ptrdiff_t lda,
                                                                float* dst, ptrdiff_t ldd, const Epilogue* epi) {
  if (cols > 16)
    rows_avx512<MR, true>(kc, a, astep, b, rows, cols, src, lds, add, lda, dst, ldd, epi);
  else
    rows_avx512<MR, false>(kc, a, astep, b, rows, cols, src, lds, add, lda, dst, ldd, epi);
}

enum LeafOp { kLeafSum, kLeafDot, kLeafSumsq };

template <int Op>
__attribute__((target("avx512f,fma"))) float leaf_avx512(const float* x, const float* y, size_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      __m512 xv = _mm512_loadu_ps(x + i + 16 * v);
      if constexpr (Op == kLeafSum) acc[v] = _mm512_add_ps(acc[v], xv);
      if constexpr (Op == kLeafDot) acc[v] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(y + i + 16 * v), acc[v]);
      if constexpr (Op == kLeafSumsq) acc[v] = _mm512_fmadd_ps(xv, xv, acc[v]);
    }
  }
  alignas(64) float lanes[kLanes];
  for (int v = 0; v < 4; ++v) _mm512_store_ps(lanes + 16 * v, acc[v]);
  for (size_t l = 0; i + l < n; ++l) {
    if constexpr (Op == kLeafSum) lanes[l] = lanes[l] + x[i + l];
    if constexpr (Op == kLeafDot) lanes[l] = std::fma(x[i + l], y[i + l], lanes[l]);
    if constexpr (Op == kLeafSumsq) lanes[l] = std::fma(x[i + l], x[i + l], lanes[l]);
  }
  return lane_tree(lanes);
}

// ---- AVX2 + FMA: up to 6 x 16 micro-tile (12 ymm accumulators) -----------------------------------
constexpr int kMr256 = 6, kNr256 = 16;

template <int MR>
__attribute__((target("avx2,fma"))) void ukernel_avx2(int kc, const float* a, const float* b, const float* src,
                                                      ptrdiff_t lds, const float* add, ptrdiff_t lda, float* dst,
                                                      ptrdiff_t ldd, const Epilogue* epi) {
  __m256 c0[MR], c1[MR];
  if (src) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm256_loadu_ps(src + i * lds);
      c1[i] = _mm256_loadu_ps(src + i * lds + 8);
    }
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  }
#pragma GCC unroll 4
  for (int kk = 0; kk < kc; ++kk) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNr256), _MM_HINT_T0);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
    a += kMr256;
    b += kNr256;
  }
  if (add) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm256_add_ps(_mm256_loadu_ps(add + i * lda), c0[i]);
      c1[i] = _mm256_add_ps(_mm256_loadu_ps(add + i * lda + 8), c1[i]);
    }
  }
  if (!epi) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      _mm256_storeu_ps(dst + i * ldd, c0[i]);
      _mm256_storeu_ps(dst + i * ldd + 8, c1[i]);
    }
    return;
  }
  const __m256 alpha = _mm256_set1_ps(epi->alpha), beta = _mm256_set1_ps(epi->beta);
  if (epi->beta == 0.0f) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      _mm256_storeu_ps(dst + i * ldd, _mm256_mul_ps(alpha, c0[i]));
      _mm256_storeu_ps(dst + i * ldd + 8, _mm256_mul_ps(alpha, c1[i]));
    }
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      float* d = dst + i * ldd;
      _mm256_storeu_ps(d, _mm256_fmadd_ps(alpha, c0[i], _mm256_mul_ps(beta, _mm256_loadu_ps(d))));
      _mm256_storeu_ps(d + 8, _mm256_fmadd_ps(alpha, c1[i], _mm256_mul_ps(beta, _mm256_loadu_ps(d + 8))));
    }
  }
}

__attribute__((target("avx2,fma"))) void epilogue_row_avx2(const float* acc, float* c, size_t n, Epilogue e) {
  const __m256 alpha = _mm256_set1_ps(e.alpha), beta = _mm256_set1_ps(e.beta);
  size_t j = 0;
  if (e.beta == 0.0f) {
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(c + j, _mm256_mul_ps(alpha, _mm256_loadu_ps(acc + j)));
    for (; j < n; ++j) c[j] = e.alpha * acc[j];
  } else {
    for (; j + 8 <= n; j += 8)
      _mm256_storeu_ps(c + j, _mm256_fmadd_ps(alpha, _mm256_loadu_ps(acc + j),
                                              _mm256_mul_ps(beta, _mm256_loadu_ps(c + j))));
    for (; j < n; ++j) c[j] = std::fma(e.alpha, acc[j], e.beta * c[j]);
  }
}

// B read in place (see GemmUkernelRows): the same FMA chain per element as ukernel_avx2.
__attribute__((target("avx2"))) inline __m256i lane_mask_avx2(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Wide: cols may exceed 8 (two vectors a row); otherwise only the first vector is computed.
template <int MR, bool Wide>
__attribute__((target("avx2,fma"))) inline void rows_avx2(int kc, const float* a, int astep, const float* b,
                                                           const ptrdiff_t* rows, int cols, const float* src,
                                                           ptrdiff_t lds, const float* add, ptrdiff_t lda, float* dst,
                                                           ptrdiff_t ldd, const Epilogue* epi) {
  const __m256i m0 = lane_mask_avx2(cols), m1 = lane_mask_avx2(cols - 8);
  __m256 c0[MR], c1[MR];
  if (src) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm256_maskload_ps(src + i * lds, m0);
      c1[i] = _mm256_maskload_ps(src + i * lds + 8, m1);
    }
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  }
#pragma GCC unroll 4
  for (int kk = 0; kk < kc; ++kk) {
    const float* bk = b + rows[kk];
    __m256 b0 = _mm256_maskload_ps(bk, m0), b1 = Wide ? _mm256_maskload_ps(bk + 8, m1) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      if constexpr (Wide) c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
    a += astep;
  }
  if (add) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      c0[i] = _mm256_add_ps(_mm256_maskload_ps(add + i * lda, m0), c0[i]);
      c1[i] = _mm256_add_ps(_mm256_maskload_ps(add + i * lda + 8, m1), c1[i]);
    }
  }
  if (epi) {
    const __m256 alpha = _mm256_set1_ps(epi->alpha), beta = _mm256_set1_ps(epi->beta);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      float* d = dst + i * ldd;
      if (epi->beta == 0.0f) {
        c0[i] = _mm256_mul_ps(alpha, c0[i]);
        c1[i] = _mm256_mul_ps(alpha, c1[i]);
      } else {
        c0[i] = _mm256_fmadd_ps(alpha, c0[i], _mm256_mul_ps(beta, _mm256_maskload_ps(d, m0)));
        c1[i] = _mm256_fmadd_ps(alpha, c1[i], _mm256_mul_ps(beta, _mm256_maskload_ps(d + 8, m1)));
      }
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    _mm256_maskstore_ps(dst + i * ldd, m0, c0[i]);
    _mm256_maskstore_ps(dst + i * ldd + 8, m1, c1[i]);
  }
}

template <int MR>
__attribute__((target("avx2,fma"))) void ukernel_rows_avx2(int kc, const float* a, int astep, const float* b,
                                                           const ptrdiff_t* rows, int cols, const float* src,
                                                           ptrdiff_t lds, const float* add, ptrdiff_t lda, float* dst,
                                                           ptrdiff_t ldd, const Epilogue* epi) {
  if (cols > 8)
    rows_avx2<MR, true>(kc, a, astep, b, rows, cols, src, lds, add, lda, dst, ldd, epi);
  else
    rows_avx2<MR, false>(kc, a, astep, b, rows, cols, src, lds, add, lda, dst, ldd, epi);
}

template <int Op>
__attribute__((target("avx2,fma"))) float leaf_avx2(const float* x, const float* y, size_t n) {
  __m256 acc[8];
  for (int v = 0; v < 8; ++v) acc[v] = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      __m256 xv = _mm256_loadu_ps(x + i + 8 * v);
      if constexpr (Op == kLeafSum) acc[v] = _mm256_add_ps(acc[v], xv);
      if constexpr (Op == kLeafDot) acc[v] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y + i + 8 * v), acc[v]);
      if constexpr (Op == kLeafSumsq) acc[v] = _mm256_fmadd_ps(xv, xv, acc[v]);
    }
  }
  alignas(64) float lanes[kLanes];
  for (int v = 0; v < 8; ++v) _mm256_store_ps(lanes + 8 * v, acc[v]);
  for (size_t l = 0; i + l < n; ++l) {
    if constexpr (Op == kLeafSum) lanes[l] = lanes[l] + x[i + l];
    if constexpr (Op == kLeafDot) lanes[l] = std::fma(x[i + l], y[i + l], lanes[l]);
    if constexpr (Op == kLeafSumsq) lanes[l] = std::fma(x[i + l], x[i + l], lanes[l]);
  }
  return lane_tree(lanes);
}

// ---- scalar (any x86-64): up to 4 x 8 micro-tile, std::fma --------------------------------------
constexpr int kMrScalar = 4, kNrScalar = 8;

// One FMA chain per element in kk order over B rows brow(kk) (columns j < cols), then add, then the
// epilogue: shared by the packed-panel kernel (row kk at b + kk*kNrScalar) and the in-place one.
template <int MR, class BRow>
void scalar_tile(int kc, const float* a, int astep, BRow brow, int cols, const float* src, ptrdiff_t lds,
                 const float* add, ptrdiff_t lda, float* dst, ptrdiff_t ldd, const Epilogue* epi) {
  float c[MR][kNrScalar];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < cols; ++j) c[i][j] = src ? src[i * lds + j] : 0.0f;
  for (int kk = 0; kk < kc; ++kk) {
    const float* bk = brow(kk);
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < cols; ++j) c[i][j] = std::fma(a[i], bk[j], c[i][j]);
    a += astep;
  }
  if (add)
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < cols; ++j) c[i][j] = add[i * lda + j] + c[i][j];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < cols; ++j) {
      float* d = dst + i * ldd + j;
      if (!epi)
        *d = c[i][j];
      else if (epi->beta == 0.0f)
        *d = epi->alpha * c[i][j];
      else
        *d = std::fma(epi->alpha, c[i][j], epi->beta * *d);
    }
}

template <int MR>
void ukernel_scalar(int kc, const float* a, const float* b, const float* src, ptrdiff_t lds, const float* add,
                    ptrdiff_t lda, float* dst, ptrdiff_t ldd, const Epilogue* epi) {
  scalar_tile<MR>(kc, a, kMrScalar, [b](int kk) { return b + kk * kNrScalar; }, kNrScalar, src, lds, add, lda, dst,
                  ldd, epi);
}

// B read in place (see GemmUkernelRows).
template <int MR>
void ukernel_rows_scalar(int kc, const float* a, int astep, const float* b, const ptrdiff_t* rows, int cols,
                         const float* src, ptrdiff_t lds, const float* add, ptrdiff_t lda, float* dst, ptrdiff_t ldd,
                         const Epilogue* epi) {
  scalar_tile<MR>(kc, a, astep, [b, rows](int kk) { return b + rows[kk]; }, cols, src, lds, add, lda, dst, ldd, epi);
}

void epilogue_row_scalar(const float* acc, float* c, size_t n, Epilogue e) {
  if (e.beta == 0.0f)
    for (size_t j = 0; j < n; ++j) c[j] = e.alpha * acc[j];
  else
    for (size_t j = 0; j < n; ++j) c[j] = std::fma(e.alpha, acc[j], e.beta * c[j]);
}

template <int Op>
float leaf_scalar(const float* x, const float* y, size_t n) {
  float lanes[kLanes] = {};
  for (size_t i = 0; i < n; ++i) {
    size_t l = i % kLanes;
    if constexpr (Op == kLeafSum) lanes[l] = lanes[l] + x[i];
    if constexpr (Op == kLeafDot) lanes[l] = std::fma(x[i], y[i], lanes[l]);
    if constexpr (Op == kLeafSumsq) lanes[l] = std::fma(x[i], x[i], lanes[l]);
  }
  return lane_tree(lanes);
}

template <float (*F)(const float*, const float*, size_t)>
float as_unary(const float* x, size_t n) {
  return F(x, nullptr, n);
}

const GemmUkernel kUk512[kMr512 + 1] = {nullptr,
                                        ukernel_avx512<1>,
                                        ukernel_avx512<2>,
                                        ukernel_avx512<3>,
                                        ukernel_avx512<4>,
                                        ukernel_avx512<5>,
                                        ukernel_avx512<6>,
                                        ukernel_avx512<7>,
                                        ukernel_avx512<8>,
                                        ukernel_avx512<9>,
                                        ukernel_avx512<10>,
                                        ukernel_avx512<11>,
                                        ukernel_avx512<12>};
const GemmUkernel kUk256[kMr256 + 1] = {nullptr,         ukernel_avx2<1>, ukernel_avx2<2>, ukernel_avx2<3>,
                                        ukernel_avx2<4>, ukernel_avx2<5>, ukernel_avx2<6>};
const GemmUkernel kUkScalar[kMrScalar + 1] = {nullptr, ukernel_scalar<1>, ukernel_scalar<2>, ukernel_scalar<3>,
                                              ukernel_scalar<4>};

const GemmUkernelRows kUkRows512[kMr512 + 1] = {nullptr,
                                                ukernel_rows_avx512<1>,
                                                ukernel_rows_avx512<2>,
                                                ukernel_rows_avx512<3>,
                                                ukernel_rows_avx512<4>,
                                                ukernel_rows_avx512<5>,
                                                ukernel_rows_avx512<6>,
                                                ukernel_rows_avx512<7>,
                                                ukernel_rows_avx512<8>,
                                                ukernel_rows_avx512<9>,
                                                ukernel_rows_avx512<10>,
                                                ukernel_rows_avx512<11>,
                                                ukernel_rows_avx512<12>};
const GemmUkernelRows kUkRows256[kMr256 + 1] = {nullptr,
                                                ukernel_rows_avx2<1>,
                                                ukernel_rows_avx2<2>,
                                                ukernel_rows_avx2<3>,
                                                ukernel_rows_avx2<4>,
                                                ukernel_rows_avx2<5>,
                                                ukernel_rows_avx2<6>};
const GemmUkernelRows kUkRowsScalar[kMrScalar + 1] = {nullptr, ukernel_rows_scalar<1>, ukernel_rows_scalar<2>,
                                                      ukernel_rows_scalar<3>, ukernel_rows_scalar<4>};

const IsaKernels kAvx512Kernels = {CpuIsa::kAvx512,
                                   kMr512,
                                   kNr512,
                                   144,
                                   kUk512,
                                   kUkRows512,
                                   epilogue_row_avx512,
                                   as_unary<leaf_avx512<kLeafSum>>,
                                   leaf_avx512<kLeafDot>,
                                   as_unary<leaf_avx512<kLeafSumsq>>};
const IsaKernels kAvx2Kernels = {CpuIsa::kAvx2,
                                 kMr256,
                                 kNr256,
                                 144,
                                 kUk256,
                                 kUkRows256,
                                 epilogue_row_avx2,
                                 as_unary<leaf_avx2<kLeafSum>>,
                                 leaf_avx2<kLeafDot>,
                                 as_unary<leaf_avx2<kLeafSumsq>>};
const IsaKernels kScalarKernels = {CpuIsa::kScalar,
                                   kMrScalar,
                                   kNrScalar,
                                   144,
                                   kUkScalar,
                                   kUkRowsScalar,
                                   epilogue_row_scalar,
                                   as_unary<leaf_scalar<kLeafSum>>,
                                   leaf_scalar<kLeafDot>,
                                   as_unary<leaf_scalar<kLeafSumsq>>};

}  // namespace

bool cpu_isa_supported_impl(CpuIsa isa) {
  __builtin_cpu_init();  // safe to call again; needed if we run before libgcc's own constructor
  switch (isa) {
    case CpuIsa::kAuto:
    case CpuIsa::kScalar: return true;
    case CpuIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::kAvx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  }
  return false;
}

const IsaKernels* isa_kernels(CpuIsa isa) {
  if (isa == CpuIsa::kAuto) {
    if (cpu_isa_supported_impl(CpuIsa::kAvx512)) return &kAvx512Kernels;
    if (cpu_isa_supported_impl(CpuIsa::kAvx2)) return &kAvx2Kernels;
    return &kScalarKernels;
  }
  if (!cpu_isa_supported_impl(isa)) return nullptr;
  switch (isa) {
    case CpuIsa::kAvx512: return &kAvx512Kernels;
    case CpuIsa::kAvx2: return &kAvx2Kernels;
    default: return &kScalarKernels;
  }
}

std::vector<uint32_t> forced_order(uint64_t seed, size_t n) {
  std::vector<uint32_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = static_cast<uint32_t>(i);
  uint64_t state = seed;
  auto next = [&state] {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  for (size_t i = n; i > 1; --i) {
    size_t j = static_cast<size_t>(next() % i);
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

}  // namespace detaudit::native
