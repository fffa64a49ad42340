// gemm of the cpu backend. One code path for every order: pack a kc x nc block of op(B) and an
// mc x kc block of op(A) into micro-panels, run the per-ISA micro-kernel on each mr x nr tile.
// The orders differ only in which K range a tile's micro-kernels cover and how partials combine.
// The same order drivers run plain gemm and the convolutions (a Problem says how to compute a tile
// over a K range). At stride 1 the convolutions read their image rows in place (padded, or channel-last
// for the filter gradient) through micro-kernels that take B rows by pointer, with A packed once;
// otherwise they build the im2col piece a tile needs in the thread's scratch.
#include "kernels/cpu/native_gemm.hpp"

#include "kernels/checks.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <thread>

#include <immintrin.h>

namespace detaudit::native {

float* AlignedBuffer::get(size_t n) {
  if (n <= cap_ && p_) return p_;
  std::free(p_);
  size_t bytes = (std::max<size_t>(n, 16) * sizeof(float) + 63) / 64 * 64;
  p_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  cap_ = p_ ? bytes / sizeof(float) : 0;
  return p_;
}


namespace {

constexpr int kTileCols = 1024;  // columns of a tile: the packed B block is kGemmKc x kTileCols
// conv2d backward-filter: the explicit window rows of few-channel images are built up to this many
// floats (256 MiB); larger problems pack per piece instead.
constexpr size_t kMaxWindowRowFloats = size_t(1) << 26;

struct Tile {
  int i0, i1, j0, j1;
};

int ceil_div(int a, int b) { return (a + b - 1) / b; }
int round_up(int a, int b) { return ceil_div(a, b) * b; }

// Output tiles: at most 4*mc rows x kTileCols columns, at least `min_tiles` when the shape allows.
// determinism: tiles only say which thread computes which C elements; no element's arithmetic
// depends on them.
std::vector<Tile> make_tiles(int m, int n, int min_tiles, const IsaKernels& kn) {
  int nrt = ceil_div(m, 4 * kn.mc), nct = ceil_div(n, kTileCols);
  while (nrt * nct < min_tiles) {
    int er = ceil_div(m, nrt), ec = ceil_div(n, nct);
    if (er >= ec && er > kn.mr)
      ++nrt;
    else if (ec > kn.nr)
      ++nct;
    else if (er > kn.mr)
      ++nrt;
    else
      break;
  }
  int h = round_up(ceil_div(m, nrt), kn.mr), w = round_up(ceil_div(n, nct), kn.nr);
  std::vector<Tile> tiles;
  for (int i = 0; i < m; i += h)
    for (int j = 0; j < n; j += w) tiles.push_back({i, std::min(m, i + h), j, std::min(n, j + w)});
  return tiles;
}

// Packing only copies (and add_row adds elementwise), so vector width cannot change a bit: these are
// built for several ISAs and the best one the CPU has runs (whatever isa= says).
#define DETAUDIT_PACK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

void pack_a_rows(const float* a, ptrdiff_t lda, int h, int kc, float* dst);

// Packs rows [i0, i0+mc) x K range [k0, k0+kc) of op(A) into mr-row micro-panels (zero padded).
DETAUDIT_PACK_CLONES void pack_a(const GemmArgs& g, int i0, int mc, int k0, int kc, int mr, float* dst) {
  for (int ip = 0; ip < mc; ip += mr) {
    int rows = std::min(mr, mc - ip);
    if (g.ta == Trans::kN && rows == mr && mr <= 16) {  // a full panel: pack_a_rows' layout (h = mr)
      pack_a_rows(g.a + size_t(i0 + ip) * g.lda + k0, g.lda, mr, kc, dst);
    } else if (g.ta == Trans::kN) {
      for (int r = 0; r < rows; ++r) {
        const float* src = g.a + size_t(i0 + ip + r) * g.lda + k0;
        for (int kk = 0; kk < kc; ++kk) dst[size_t(kk) * mr + r] = src[kk];
      }
    } else {
      for (int kk = 0; kk < kc; ++kk) {
        const float* src = g.a + size_t(k0 + kk) * g.lda + i0 + ip;
        for (int r = 0; r < rows; ++r) dst[size_t(kk) * mr + r] = src[r];
      }
    }
    if (rows < mr)
      for (int kk = 0; kk < kc; ++kk)
        for (int r = rows; r < mr; ++r) dst[size_t(kk) * mr + r] = 0.0f;
    dst += size_t(kc) * mr;
  }
}

// Packs K range [k0, k0+kc) x columns [j0, j0+nc) of op(B) into nr-column micro-panels (zero padded).
DETAUDIT_PACK_CLONES void pack_b(const GemmArgs& g, int j0, int nc, int k0, int kc, int nr, float* dst) {
  for (int jp = 0; jp < nc; jp += nr) {
    int cols = std::min(nr, nc - jp);
    if (g.b_rows) {
      for (int kk = 0; kk < kc; ++kk) {
        const float* row = g.b + g.b_rows[k0 + kk];
        float* d = dst + size_t(kk) * nr;
        if (!g.b_cols) {
          const float* src = row + j0 + jp;
          for (int c = 0; c < cols; ++c) d[c] = src[c];
        } else {
          for (int c = 0; c < cols;) {
            const int j = j0 + jp + c, len = std::min(g.b_run[j], cols - c);
            const float* src = row + g.b_cols[j];
            for (int i = 0; i < len; ++i) d[c + i] = src[i];
            c += len;
          }
        }
        for (int c = cols; c < nr; ++c) d[c] = 0.0f;
      }
    } else if (g.tb == Trans::kN) {
      for (int kk = 0; kk < kc; ++kk) {
        const float* src = g.b + size_t(k0 + kk) * g.ldb + j0 + jp;
        std::memcpy(dst + size_t(kk) * nr, src, sizeof(float) * cols);
        for (int c = cols; c < nr; ++c) dst[size_t(kk) * nr + c] = 0.0f;
      }
    } else {
      for (int c = 0; c < cols; ++c) {
        const float* src = g.b + size_t(j0 + jp + c) * g.ldb + k0;
        for (int kk = 0; kk < kc; ++kk) dst[size_t(kk) * nr + c] = src[kk];
      }
      if (cols < nr)
        for (int kk = 0; kk < kc; ++kk)
          for (int c = cols; c < nr; ++c) dst[size_t(kk) * nr + c] = 0.0f;
    }
    dst += size_t(kc) * nr;
  }
}

// Where a tile's chain lives and where its result goes (all pointers at the tile origin).
struct TileTarget {
  float* d = nullptr;  // the chain between kc blocks (needed when the range spans more than one)
  ptrdiff_t ldd = 0;
  bool cont = false;               // the chain starts from d instead of zero
  const float* add = nullptr;      // when set, the result is add + chain (one rounded add)
  ptrdiff_t ldadd = 0;
  float* out = nullptr;            // where the result goes: plain, or through *epi
  ptrdiff_t ldo = 0;
  const Epilogue* epi = nullptr;
};

// One micro-tile; column edges go through a padded copy so the micro-kernel always sees nr columns.
// (ts/ta rows beyond `rows` are never read: ukernel[rows] reads `rows` rows.)
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
void run_micro(const IsaKernels& kn, int kc, const float* ap, const float* bp, const float* src, ptrdiff_t lds,
               const float* add, ptrdiff_t ldadd, float* dst, ptrdiff_t ldd, int rows, int cols,
               const Epilogue* epi) {
  const GemmUkernel uk = kn.ukernel[rows];
  if (cols == kn.nr) {
    uk(kc, ap, bp, src, lds, add, ldadd, dst, ldd, epi);
    return;
  }
  alignas(64) float ts[12 * 32], ta[12 * 32], td[12 * 32];
  const int nr = kn.nr;
  auto pad = [&](const float* p, ptrdiff_t ld, float* t) {
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < nr; ++j) t[i * nr + j] = j < cols ? p[i * ld + j] : 0.0f;
  };
  const float* psrc = nullptr;
  const float* padd = nullptr;
  if (src) pad(src, lds, ts), psrc = ts;
  if (add) pad(add, ldadd, ta), padd = ta;
  uk(kc, ap, bp, psrc, nr, padd, nr, td, nr, nullptr);
  for (int i = 0; i < rows; ++i) {
    if (epi)
      kn.epilogue_row(td + i * nr, dst + i * ldd, cols, *epi);
    else
      std::memcpy(dst + i * ldd, td + i * nr, sizeof(float) * cols);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Computes the tile [i0,i1) x [j0,j1) of op(A) op(B) over K range [k0,k1): the first kc block starts
// from zero (or from t.d), each later one continues from t.d, so every element is ONE FMA chain over
// the range, in k order; the last block adds t.add (if any) and writes t.out.
// determinism: kc blocking, mc blocking and the micro-tile shape never change an element's chain.
bool compute_tile(const GemmArgs& g, const IsaKernels& kn, ThreadScratch& s, const Tile& tl, int k0, int k1,
                  const TileTarget& t) {
  const int mr = kn.mr, nr = kn.nr, mc_max = kn.mc;
  const int tn = tl.j1 - tl.j0;
  if (k0 >= k1) {  // empty range: the chain is zero (or t.d)
    s.row.resize(size_t(tn));
    float* z = s.row.data();
    for (int i = 0; i < tl.i1 - tl.i0; ++i) {
      for (int j = 0; j < tn; ++j) z[j] = t.cont ? t.d[i * t.ldd + j] : 0.0f;
      if (t.add)
        for (int j = 0; j < tn; ++j) z[j] = t.add[i * t.ldadd + j] + z[j];
      if (t.epi)
        kn.epilogue_row(z, t.out + i * t.ldo, size_t(tn), *t.epi);
      else
        std::memcpy(t.out + i * t.ldo, z, sizeof(float) * tn);
    }
    return true;
  }
  float* bpack = s.bpack.get(size_t(kGemmKc) * round_up(tn, nr));
  float* apack = s.apack.get(size_t(kGemmKc) * round_up(mc_max, mr));
  if (!bpack || !apack) return false;
  for (int kb = k0; kb < k1; kb += kGemmKc) {
    const int kc = std::min(kGemmKc, k1 - kb);
    const bool first = kb == k0, last = kb + kc >= k1;
    pack_b(g, tl.j0, tn, kb, kc, nr, bpack);
    for (int ic = tl.i0; ic < tl.i1; ic += mc_max) {
      const int mc = std::min(mc_max, tl.i1 - ic);
      pack_a(g, ic, mc, kb, kc, mr, apack);
      for (int jp = 0; jp < tn; jp += nr) {
        const int cols = std::min(nr, tn - jp);
        const float* bp = bpack + size_t(jp / nr) * kc * nr;
        for (int ip = 0; ip < mc; ip += mr) {
          const int rows = std::min(mr, mc - ip);
          const float* ap = apack + size_t(ip / mr) * kc * mr;
          const ptrdiff_t ti = ic - tl.i0 + ip;
          float* dt = t.d ? t.d + ti * t.ldd + jp : nullptr;
          const float* src = first && !t.cont ? nullptr : dt;
          if (last)
            run_micro(kn, kc, ap, bp, src, t.ldd, t.add ? t.add + ti * t.ldadd + jp : nullptr, t.ldadd,
                      t.out + ti * t.ldo + jp, t.ldo, rows, cols, t.epi);
          else
            run_micro(kn, kc, ap, bp, src, t.ldd, nullptr, 0, dt, t.ldd, rows, cols, nullptr);
        }
      }
    }
  }
  return true;
}

void add_into(float* dst, ptrdiff_t ldd, const float* src, ptrdiff_t lds, int rows, int cols) {
  for (int i = 0; i < rows; ++i) {
    float* d = dst + i * ldd;
    const float* s = src + i * lds;
    for (int j = 0; j < cols; ++j) d[j] = d[j] + s[j];
  }
}

// dst[j] = (first ? 0 : acc[j]) + p[j]: one rounded add per element (dst may be acc).
DETAUDIT_PACK_CLONES void add_row(float* dst, const float* acc, const float* p, int cols, bool first) {
  if (first) {
    for (int j = 0; j < cols; ++j) dst[j] = 0.0f + p[j];
  } else {
    for (int j = 0; j < cols; ++j) dst[j] = acc[j] + p[j];
  }
}

Status out_of_memory() { return Status::error("gemm: out of memory for working buffers"); }

// ---- staging copies for the convolutions (copies only) -----------------------------------------------
// Rows here are short (7 to 30 floats), so the AVX-512 versions copy each row with masked vectors
// instead of a vector loop and its scalar tail; without AVX-512 plain loops run. Copies: no bits change.

bool have_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();  // may run before libgcc's own constructor
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
}

__attribute__((target("avx512f"))) inline void copy_row_avx512(float* dst, const float* src, int n) {
  for (int j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(dst + j, m, _mm512_maskz_loadu_ps(m, src + j));
  }
}
__attribute__((target("avx512f"))) inline void zero_row_avx512(float* dst, size_t n) {
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(dst + j, m, _mm512_setzero_ps());
  }
}

// One image x[C][H][W] into d[C][Hp][Wp] with `pad` zeros around each plane (Wp = W + 2 pad).
__attribute__((target("avx512f"))) void pad_image_avx512(const float* x, float* d, int C, int H, int W, int pad) {
  const int wp = W + 2 * pad;
  const size_t plane = size_t(H + 2 * pad) * wp;
  for (int c = 0; c < C; ++c) {
    float* pc = d + c * plane;
    zero_row_avx512(pc, size_t(pad) * wp + pad);  // top rows and the first row's left pad
    for (int h = 0; h < H; ++h) {
      float* row = pc + size_t(h + pad) * wp;
      copy_row_avx512(row + pad, x + (size_t(c) * H + h) * W, W);
      zero_row_avx512(row + pad + W, size_t(2 * pad));  // right pad and the next row's left pad
    }
    zero_row_avx512(pc + size_t(H + pad) * wp + pad, size_t(pad) * wp - pad);  // bottom rows
  }
}
void pad_image_plain(const float* x, float* d, int C, int H, int W, int pad) {
  const int wp = W + 2 * pad;
  const size_t plane = size_t(H + 2 * pad) * wp;
  for (int c = 0; c < C; ++c) {
    float* pc = d + c * plane;
    std::fill(pc, pc + size_t(pad) * wp, 0.0f);
    for (int h = 0; h < H; ++h) {
      float* row = pc + size_t(h + pad) * wp;
      std::fill(row, row + pad, 0.0f);
      std::copy_n(x + (size_t(c) * H + h) * W, W, row + pad);
      std::fill(row + pad + W, row + wp, 0.0f);
    }
    std::fill(pc + size_t(H + pad) * wp, pc + plane, 0.0f);
  }
}
void pad_image(const float* x, float* d, int C, int H, int W, int pad) {
  if (have_avx512()) return pad_image_avx512(x, d, C, H, W, pad);
  pad_image_plain(x, d, C, H, W, pad);
}

// One image x[C][H][W] into d[Hp][Wp][C] (channel-last), `pad` zeros around: each pixel's channels
// gathered 16 at a time.
__attribute__((target("avx512f"))) void pad_image_hwc_avx512(const float* x, float* d, int C, int H, int W, int pad) {
  const int wp = W + 2 * pad;
  const size_t row_floats = size_t(wp) * C, plane = size_t(H) * W;
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(int(plane)));
  zero_row_avx512(d, size_t(pad) * row_floats);
  for (int h = 0; h < H; ++h) {
    float* row = d + size_t(h + pad) * row_floats;
    zero_row_avx512(row, size_t(pad) * C);
    zero_row_avx512(row + size_t(pad + W) * C, size_t(pad) * C);
    for (int w = 0; w < W; ++w) {
      const float* src = x + size_t(h) * W + w;
      float* px = row + size_t(w + pad) * C;
      for (int c = 0; c < C; c += 16) {
        const __mmask16 m = C - c >= 16 ? __mmask16(0xffff) : __mmask16((1u << (C - c)) - 1);
        _mm512_mask_storeu_ps(px + c, m,
                              _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, src + size_t(c) * plane, 4));
      }
    }
  }
  zero_row_avx512(d + size_t(H + pad) * row_floats, size_t(pad) * row_floats);
}
void pad_image_hwc_plain(const float* x, float* d, int C, int H, int W, int pad) {
  const int wp = W + 2 * pad;
  const size_t row_floats = size_t(wp) * C, plane = size_t(H) * W;
  std::fill(d, d + size_t(pad) * row_floats, 0.0f);
  for (int h = 0; h < H; ++h) {
    float* row = d + size_t(h + pad) * row_floats;
    std::fill(row, row + size_t(pad) * C, 0.0f);
    std::fill(row + size_t(pad + W) * C, row + row_floats, 0.0f);
    for (int w = 0; w < W; ++w) {
      float* px = row + size_t(w + pad) * C;
      for (int c = 0; c < C; ++c) px[c] = x[c * plane + size_t(h) * W + w];
    }
  }
  std::fill(d + size_t(H + pad) * row_floats, d + size_t(H + 2 * pad) * row_floats, 0.0f);
}
void pad_image_hwc(const float* x, float* d, int C, int H, int W, int pad) {
  // The gather's indices are 32-bit: planes up to 2^31 / 16 floats.
  if (have_avx512() && size_t(H) * W * 16 < (size_t(1) << 31)) return pad_image_hwc_avx512(x, d, C, H, W, pad);
  pad_image_hwc_plain(x, d, C, H, W, pad);
}

// rows x cols from src (row stride lds) to dst (row stride ldd); with a bias, dst = src + *bias (one
// rounded add each, as Backend::bias_add).
__attribute__((target("avx512f"))) void copy_rows_avx512(const float* src, ptrdiff_t lds, float* dst, ptrdiff_t ldd,
                                                         int rows, int cols, const float* bias) {
  if (!bias) {
    for (int i = 0; i < rows; ++i) copy_row_avx512(dst + i * ldd, src + i * lds, cols);
    return;
  }
  const __m512 b = _mm512_set1_ps(*bias);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; j += 16) {
      const __mmask16 m = cols - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (cols - j)) - 1);
      _mm512_mask_storeu_ps(dst + i * ldd + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, src + i * lds + j), b));
    }
}
void copy_rows(const float* src, ptrdiff_t lds, float* dst, ptrdiff_t ldd, int rows, int cols,
               const float* bias = nullptr) {
  if (have_avx512()) return copy_rows_avx512(src, lds, dst, ldd, rows, cols, bias);
  for (int i = 0; i < rows; ++i) {
    if (!bias) {
      std::copy_n(src + i * lds, cols, dst + i * ldd);
      continue;
    }
    for (int j = 0; j < cols; ++j) dst[i * ldd + j] = src[i * lds + j] + *bias;
  }
}

// ---- A packed once for the whole K, B read in place (the convolutions) ----------------------------

// op(A) packed once for all of K: panel p holds rows [p*mr, p*mr + h_p), h_p = min(mr, m - p*mr), with
// element (i, kk) at data + p*mr*k + kk*h_p + (i - p*mr), so any K range of a panel is contiguous and a
// short last panel carries no padding.
struct PackedA {
  float* data = nullptr;
  int m = 0, k = 0, mr = 1;
  int step(int i0) const { return std::min(mr, m - i0); }  // i0: a multiple of mr
  float* at(int i0, int kk) const { return data + size_t(i0) * k + size_t(kk) * step(i0); }
};

// dst[kk*h + r] = a[r*lda + kk] for r < h, kk < kc (copies only).
DETAUDIT_PACK_CLONES void pack_a_rows_plain(const float* a, ptrdiff_t lda, int h, int kc, float* dst) {
  for (int kk = 0; kk < kc; ++kk)
    for (int r = 0; r < h; ++r) dst[size_t(kk) * h + r] = a[r * lda + kk];
}

// (GCC 12 warns about the unused pass-through operand inside its own unpack/shuffle intrinsics.)
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Transposes 16 rows of 16 floats in registers: afterwards r[j] holds column j.
__attribute__((target("avx512f"))) inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + c]: in 128-bit lane L, column 4L + c of rows 4i .. 4i+3
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(u[i], u[4 + i], 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(u[i], u[4 + i], 0xDD);
    t[8 + i] = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
    r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
    r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xDD);
  }
}

// pack_a_rows for h <= 16: blocks of 16 terms transposed in registers.
__attribute__((target("avx512f"))) void pack_a_rows_avx512(const float* a, ptrdiff_t lda, int h, int kc, float* dst) {
  const __mmask16 m = h >= 16 ? __mmask16(0xffff) : __mmask16((1u << h) - 1);
  int kk = 0;
  for (; kk + 16 <= kc; kk += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = i < h ? _mm512_loadu_ps(a + i * lda + kk) : _mm512_setzero_ps();
    transpose16(r);
    for (int t = 0; t < 16; ++t) _mm512_mask_storeu_ps(dst + size_t(kk + t) * h, m, r[t]);
  }
  for (; kk < kc; ++kk)
    for (int i = 0; i < h; ++i) dst[size_t(kk) * h + i] = a[i * lda + kk];
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void pack_a_rows(const float* a, ptrdiff_t lda, int h, int kc, float* dst) {
  if (h <= 16 && have_avx512()) return pack_a_rows_avx512(a, lda, h, kc, dst);
  pack_a_rows_plain(a, lda, h, kc, dst);
}

// The tile rows [i0, i0 + rows) x columns [0, cols) of a problem over kc terms starting at k0, with
// A from pa and B read in place: column panel jp covers `w` contiguous columns at b + brows[kk]
// (panel(jp, &b, &w) says which, w <= nr). One pass over the range: the chain starts from zero (or
// t.d), t.add is added, the result goes to t.out (through t.epi).
// determinism: the same FMA chain per element as compute_tile over the same range.
template <class Panel>
void compute_rows_tile(const IsaKernels& kn, const PackedA& pa, int i0, int rows, int cols, int k0, int kc,
                       const ptrdiff_t* brows, Panel&& panel, const TileTarget& t) {
  for (int jp = 0; jp < cols;) {
    const float* b = nullptr;
    int w = 0;
    panel(jp, &b, &w);
    for (int ip = 0; ip < rows; ip += kn.mr) {
      const int h = std::min(kn.mr, rows - ip);
      kn.ukernel_rows[h](kc, pa.at(i0 + ip, k0), pa.step(i0 + ip), b, brows, w,
                         t.cont ? t.d + ip * t.ldd + jp : nullptr, t.ldd, t.add ? t.add + ip * t.ldadd + jp : nullptr,
                         t.ldadd, t.out + ip * t.ldo + jp, t.ldo, t.epi);
    }
    jp += w;
  }
}

// ---- problems: what the order drivers compute ------------------------------------------------------

// An M x N output reduced over K. compute() runs the chain of one output tile over a K range exactly
// as compute_tile does for a plain gemm (one FMA chain per element in k order).
class Problem {
 public:
  virtual ~Problem() = default;
  int m = 0, n = 0, k = 0;
  int batch = 1;  // independent gemms side by side in N (GemmBatchProblem)
  Epilogue epi;
  // Output tiles, at least `min_tiles` when the shape allows.
  // determinism: tiles only say which thread computes which C elements.
  virtual std::vector<Tile> tiles(int min_tiles, const IsaKernels& kn) const { return make_tiles(m, n, min_tiles, kn); }
  // The C element at the origin of tile tl and the row stride of C there.
  virtual float* c_tile(const Tile& tl, ptrdiff_t* ldc) const = 0;
  virtual bool compute(const IsaKernels& kn, ThreadScratch& s, const Tile& tl, int k0, int k1,
                       const TileTarget& t) const = 0;
};

// col[crs - crs0][pq - pq0] (row stride ldcol) for crs in [crs0, crs1), pq in [pq0, pq1) of one image's
// im2col: x[c][p*stride - pad + r][q*stride - pad + s], 0 outside. Copies only.
void im2col_range(const ConvShape& sh, const float* x, float* col, size_t ldcol, int crs0, int crs1, int pq0,
                  int pq1) {
  const int Q = sh.q();
  for (int row = crs0; row < crs1; ++row) {
    const int c = row / (sh.r * sh.s), r = row / sh.s % sh.r, s = row % sh.s;
    float* dst = col + size_t(row - crs0) * ldcol - pq0;  // dst[pq]
    const float* xc = x + size_t(c) * sh.h * sh.w;
    // q_lo = first q with q*stride - pad + s >= 0; q_hi = one past the last with ... < w.
    const int off = s - sh.pad;
    int q_lo = off >= 0 ? 0 : (-off + sh.stride - 1) / sh.stride;
    int q_hi = sh.w - 1 - off < 0 ? 0 : (sh.w - 1 - off) / sh.stride + 1;
    q_lo = std::min(q_lo, Q);
    q_hi = std::clamp(q_hi, q_lo, Q);
    for (int p = pq0 / Q; p * Q < pq1; ++p) {
      const int qa = std::max(0, pq0 - p * Q), qb = std::min(Q, pq1 - p * Q);
      float* d = dst + size_t(p) * Q;
      const int h = p * sh.stride - sh.pad + r;
      if (h < 0 || h >= sh.h) {
        for (int q = qa; q < qb; ++q) d[q] = 0.0f;
        continue;
      }
      const int ca = std::max(qa, q_lo), cb = std::min(qb, q_hi);
      for (int q = qa; q < std::min(qb, q_lo); ++q) d[q] = 0.0f;
      const float* xr = xc + size_t(h) * sh.w;
      if (sh.stride == 1) {
        if (cb > ca) std::memcpy(d + ca, xr + (ca + off), sizeof(float) * (cb - ca));
      } else {
        for (int q = ca; q < cb; ++q) d[q] = xr[q * sh.stride + off];
      }
      for (int q = std::max(qa, q_hi); q < qb; ++q) d[q] = 0.0f;
    }
  }
}

// The convolutions' outputs are [image][m][width], seen as one M x (images*width) problem: tiles are
// one image's tiles repeated (at least min_tiles in all when the shape allows), so none straddles two
// images, and tile tl's C starts in image tl.j0 / width.
std::vector<Tile> repeat_tiles(const std::vector<Tile>& one, int width, int images) {
  std::vector<Tile> all;
  all.reserve(one.size() * images);
  for (int i = 0; i < images; ++i)
    for (Tile t : one) all.push_back({t.i0, t.i1, t.j0 + i * width, t.j1 + i * width});
  return all;
}
std::vector<Tile> per_image_tiles(int m, int width, int images, int min_tiles, const IsaKernels& kn) {
  return repeat_tiles(make_tiles(m, width, std::max(1, min_tiles / images), kn), width, images);
}
float* per_image_c(float* out, int m, int width, const Tile& tl, ptrdiff_t* ldc) {
  *ldc = width;
  const int img = tl.j0 / width;
  return out + (size_t(img) * m + tl.i0) * width + (tl.j0 - img * width);
}

// A batch of gemms sharing m, n, k, alpha and beta, seen as one M x (batch*N) problem in the same way:
// tiles are one gemm's tiles repeated (at least min_tiles in all when the shape allows), so none
// straddles two gemms, and tile tl is gemm tl.j0 / N's. A single gemm is a batch of one (the tiles of
// make_tiles(m, n, min_tiles)).
// determinism: each gemm's elements are computed exactly as they would be for that gemm alone; the
// batch only says which thread computes which tile of which gemm.
class GemmBatchProblem final : public Problem {
 public:
  explicit GemmBatchProblem(std::span<const GemmArgs> gs) : gs_(gs), width_(gs[0].n) {
    m = gs[0].m, n = int(gs.size()) * width_, k = gs[0].k, batch = int(gs.size());
    epi = {gs[0].alpha, gs[0].beta};
  }
  std::vector<Tile> tiles(int min_tiles, const IsaKernels& kn) const override {
    if (batch == 1) return make_tiles(m, width_, min_tiles, kn);
    return repeat_tiles(make_tiles(m, width_, ceil_div(min_tiles, batch), kn), width_, batch);
  }
  float* c_tile(const Tile& tl, ptrdiff_t* ldc) const override {
    const int gi = tl.j0 / width_;
    *ldc = gs_[gi].ldc;
    return gs_[gi].c + size_t(tl.i0) * gs_[gi].ldc + (tl.j0 - gi * width_);
  }
  bool compute(const IsaKernels& kn, ThreadScratch& s, const Tile& tl, int k0, int k1,
               const TileTarget& t) const override {
    const int gi = tl.j0 / width_, j0 = gi * width_;
    return compute_tile(gs_[gi], kn, s, {tl.i0, tl.i1, tl.j0 - j0, tl.j1 - j0}, k0, k1, t);
  }

 private:
  std::span<const GemmArgs> gs_;
  int width_;
};

// A batch of gemms with each A packed once for all of K (PackedA layout) and each B read in place (row kk
// of gemm g at b + g*b_stride + brows[kk], columns contiguous): tiled as GemmBatchProblem.
// determinism: each element is the same FMA chain as compute_tile gives it (compute_rows_tile).
class PackedABatchProblem final : public Problem {
 public:
  PackedABatchProblem(int batch_, int m_, int n_, int k_, const float* ap, const float* b, size_t b_stride,
                      const ptrdiff_t* brows, float* c, int ldc, size_t c_stride, int mr)
      : ap_(ap), b_(b), b_stride_(b_stride), brows_(brows), c_(c), ldc_(ldc), c_stride_(c_stride), width_(n_), mr_(mr) {
    m = m_, n = batch_ * n_, k = k_, batch = batch_;
    epi = {1.0f, 0.0f};
  }
  std::vector<Tile> tiles(int min_tiles, const IsaKernels& kn) const override {
    if (batch == 1) return make_tiles(m, width_, min_tiles, kn);
    return repeat_tiles(make_tiles(m, width_, ceil_div(min_tiles, batch), kn), width_, batch);
  }
  float* c_tile(const Tile& tl, ptrdiff_t* ldc) const override {
    const int gi = tl.j0 / width_;
    *ldc = ldc_;
    return c_ + gi * c_stride_ + size_t(tl.i0) * ldc_ + (tl.j0 - gi * width_);
  }
  bool compute(const IsaKernels& kn, ThreadScratch& s, const Tile& tl, int k0, int k1,
               const TileTarget& t) const override {
    const int gi = tl.j0 / width_, rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
    if (k0 >= k1) return compute_tile(GemmArgs{}, kn, s, {0, rows, 0, cols}, 0, 0, t);
    const PackedA pa{const_cast<float*>(ap_) + gi * size_t(m) * k, m, k, mr_};
    const float* bb = b_ + gi * b_stride_ + (tl.j0 - gi * width_);
    compute_rows_tile(
        kn, pa, tl.i0, rows, cols, k0, k1 - k0, brows_ + k0,
        [&](int jp, const float** b, int* w) { *b = bb + jp, *w = std::min(kn.nr, cols - jp); }, t);
    return true;
  }

 private:
  const float* ap_;
  const float* b_;
  size_t b_stride_;
  const ptrdiff_t* brows_;
  float* c_;
  int ldc_;
  size_t c_stride_;
  int width_, mr_;
};

// conv2d forward as one problem: M = K filters, N = images x PQ (column n*PQ + pq), reduction over CRS.
// Tiles never straddle images, so a tile's C is one image's output rows.
class ConvFwdProblem final : public Problem {
 public:
  ConvFwdProblem(const ConvShape& s, const float* x, const float* w, float* y) : s_(s), x_(x), w_(w), y_(y) {
    pq_ = s.p() * s.q(), crs_ = s.c * s.r * s.s;
    m = s.k, n = s.n * pq_, k = crs_;
    epi = {1.0f, 0.0f};
  }
  std::vector<Tile> tiles(int min_tiles, const IsaKernels& kn) const override {
    return per_image_tiles(m, pq_, s_.n, min_tiles, kn);
  }
  float* c_tile(const Tile& tl, ptrdiff_t* ldc) const override { return per_image_c(y_, m, pq_, tl, ldc); }
  bool compute(const IsaKernels& kn, ThreadScratch& s, const Tile& tl, int k0, int k1,
               const TileTarget& t) const override {
    const int img = tl.j0 / pq_, pq0 = tl.j0 - img * pq_, cols = tl.j1 - tl.j0;
    float* col = s.col.get(size_t(std::max(1, k1 - k0)) * cols);
    if (!col) return false;
    im2col_range(s_, x_ + size_t(img) * s_.c * s_.h * s_.w, col, size_t(cols), k0, k1, pq0, pq0 + cols);
    const GemmArgs g{Trans::kN, Trans::kN, tl.i1 - tl.i0, cols, k1 - k0, 1.0f, w_ + size_t(tl.i0) * crs_ + k0,
                     crs_, col, cols, 0.0f, nullptr, 1};
    return compute_tile(g, kn, s, {0, tl.i1 - tl.i0, 0, cols}, 0, k1 - k0, t);
  }

 private:
  ConvShape s_;
  const float* x_;
  const float* w_;
  float* y_;
  int pq_, crs_;
};

// conv2d forward at stride 1 without im2col: each image is copied once, zero padded, to
// xp[c][Hp][Wp]; output pixels are computed on the padded grid j = p*Wp + q (q < Wp, the columns
// q >= Q are computed and dropped), where im2col row (c, r, s) is the contiguous run of xp starting
// at c*Hp*Wp + r*Wp + s. Output goes to a padded buffer, copied to y afterwards.
// determinism: an output element's terms and their order (c, r, s) are those of the im2col gemm.
class ConvFwdPaddedProblem final : public Problem {
 public:
  ConvFwdPaddedProblem(const ConvShape& s, const float* xp, size_t img_stride, const PackedA& w, float* ybuf,
                       const ptrdiff_t* rows)
      : s_(s), xp_(xp), img_stride_(img_stride), pa_(w), ybuf_(ybuf), rows_(rows) {
    wp_ = s.w + 2 * s.pad, npad_ = s.p() * wp_, crs_ = s.c * s.r * s.s;
    m = s.k, n = s.n * npad_, k = crs_;
    epi = {1.0f, 0.0f};
  }
  std::vector<Tile> tiles(int min_tiles, const IsaKernels& kn) const override {
    return per_image_tiles(m, npad_, s_.n, min_tiles, kn);
  }
  float* c_tile(const Tile& tl, ptrdiff_t* ldc) const override { return per_image_c(ybuf_, m, npad_, tl, ldc); }
  // W comes pre-packed (pa); the padded image rows are read in place.
  bool compute(const IsaKernels& kn, ThreadScratch&, const Tile& tl, int k0, int k1,
               const TileTarget& t) const override {
    const int img = tl.j0 / npad_, rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
    const float* xb = xp_ + size_t(img) * img_stride_ + (tl.j0 - img * npad_);
    compute_rows_tile(kn, pa_, tl.i0, rows, cols, k0, k1 - k0, rows_ + k0,
                      [&](int jp, const float** b, int* w) { *b = xb + jp, *w = std::min(kn.nr, cols - jp); }, t);
    return true;
  }

 private:
  ConvShape s_;
  const float* xp_;
  size_t img_stride_;
  PackedA pa_;
  float* ybuf_;
  const ptrdiff_t* rows_;
  int wp_, npad_, crs_;
};

// conv2d backward-filter without im2col: each image is copied once, zero padded and channel-last, to
// xh[Hp][Wp][C]; output columns are taken in (r, s, c) order, so that B[n*PQ + pq][(r, s, c)] =
// xh_n[(p*stride + r)*Wp + q*stride + s][c] is contiguous over c (and over s, c within one r).
// The result (dw in (r, s, c) column order) goes to a buffer and is permuted into dw afterwards.
// The same class reads explicit window rows (one row of C*R*S floats per pixel: pix[pq] = pq*CRS,
// coff[j] = j, one run) when the channel runs are too short to read in place.
// determinism: each dw element's terms and their order (image-major over n*PQ) are those of the
// im2col gemm; only the column order of the computation changes.
class ConvBwdFilterNhwcProblem final : public Problem {
 public:
  // pa: dy pre-packed for the in-place path (long column runs), or empty for the packing path.
  ConvBwdFilterNhwcProblem(const ConvShape& s, const float* xh, size_t img_stride, const float* dy, const PackedA& pa,
                           float* dwp, const ptrdiff_t* pix, const ptrdiff_t* coff, const int* run)
      : s_(s), xh_(xh), img_stride_(img_stride), dy_(dy), pa_(pa), dwp_(dwp), pix_(pix), coff_(coff), run_(run) {
    pq_ = s.p() * s.q();
    m = s.k, n = s.c * s.r * s.s, k = s.n * pq_;
    epi = {1.0f, 0.0f};
  }
  // A small output over a long K: one tile across all columns, so each A piece is packed once
  // (order=blocked then splits K over the threads).
  std::vector<Tile> tiles(int, const IsaKernels& kn) const override { return make_tiles(m, n, 1, kn); }
  float* c_tile(const Tile& tl, ptrdiff_t* ldc) const override {
    *ldc = n;
    return dwp_ + size_t(tl.i0) * n + tl.j0;
  }
  // The range goes in pieces within one image (of at most kGemmKc terms when packing); each continues
  // the chain.
  bool compute(const IsaKernels& kn, ThreadScratch& s, const Tile& tl, int k0, int k1,
               const TileTarget& t) const override {
    const int rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
    if (k0 >= k1) return compute_tile(GemmArgs{}, kn, s, {0, rows, 0, cols}, 0, 0, t);
    const int piece = pa_.data ? pq_ : kGemmKc;
    for (int kb = k0; kb < k1;) {
      const int img = kb / pq_, a = kb - img * pq_, b = std::min({pq_, a + piece, k1 - img * pq_});
      const int ke = img * pq_ + b;
      const bool first = kb == k0, last = ke >= k1;
      if (pa_.data) {
        TileTarget piece_t = t;
        piece_t.cont = first ? t.cont : true;
        if (!last) piece_t.add = nullptr, piece_t.out = t.d, piece_t.ldo = t.ldd, piece_t.epi = nullptr;
        const float* xb = xh_ + size_t(img) * img_stride_;
        compute_rows_tile(kn, pa_, tl.i0, rows, cols, kb, b - a, pix_ + a,
                          [&](int jp, const float** bp, int* w) {
                            const int j = tl.j0 + jp;
                            *bp = xb + coff_[j], *w = std::min({kn.nr, cols - jp, run_[j]});
                          },
                          piece_t);
        kb = ke;
        continue;
      }
      GemmArgs g{Trans::kN, Trans::kN, rows, cols, b - a, 1.0f, dy_ + (size_t(img) * m + tl.i0) * pq_ + a, pq_,
                 xh_ + size_t(img) * img_stride_, 1, 0.0f, nullptr, 1};
      g.b_rows = pix_ + a;
      g.b_cols = coff_ + tl.j0;
      g.b_run = run_ + tl.j0;
      TileTarget piece = t;
      piece.cont = first ? t.cont : true;
      if (!last) piece.add = nullptr, piece.out = t.d, piece.ldo = t.ldd, piece.epi = nullptr;
      if (!compute_tile(g, kn, s, {0, rows, 0, cols}, 0, b - a, piece)) return false;
      kb = ke;
    }
    return true;
  }

 private:
  ConvShape s_;
  const float* xh_;
  size_t img_stride_;
  const float* dy_;
  PackedA pa_;
  float* dwp_;
  const ptrdiff_t* pix_;
  const ptrdiff_t* coff_;
  const int* run_;
  int pq_;
};

// How many output tiles sequential and pairwise ask for: one per thread, or for a batch (many gemms
// of one shape, whose equal tiles are handed out whole) four per thread, so that the last round is short.
// determinism: tiles only say which thread computes which C elements.
int shared_tiles(const Problem& pb, int threads) { return pb.batch > 1 ? 4 * threads : threads; }

// ---- sequential: one FMA chain over the whole K per element; threads split the output tiles.
// determinism: bits independent of the thread count and of scheduling.
Status run_sequential(GemmContext& ctx, const Problem& pb) {
  const IsaKernels& kn = *ctx.kern;
  std::vector<Tile> tiles = pb.tiles(shared_tiles(pb, ctx.pool->size()), kn);
  std::atomic<size_t> next{0};
  std::atomic<bool> oom{false};
  ctx.pool->run([&](int tid) {
    ThreadScratch& s = (*ctx.scratch)[tid];
    for (size_t idx; (idx = next.fetch_add(1, std::memory_order_relaxed)) < tiles.size();) {
      const Tile& tl = tiles[idx];
      TileTarget t;
      t.out = pb.c_tile(tl, &t.ldo);
      t.epi = &pb.epi;
      // With beta == 0 the chain lives in C itself; otherwise C's old value must survive until the
      // epilogue, so the chain lives in a scratch tile.
      if (pb.epi.beta == 0.0f) {
        t.d = t.out, t.ldd = t.ldo;
      } else {
        t.ldd = tl.j1 - tl.j0;
        t.d = s.tile.get(size_t(tl.i1 - tl.i0) * t.ldd);
        if (!t.d) return oom.store(true);
      }
      if (!pb.compute(kn, s, tl, 0, pb.k, t)) return oom.store(true);
    }
  });
  return oom ? out_of_memory() : Status::ok();
}

// ---- pairwise: K cut into kGemmKc chunks aligned at k = 0; each chunk's partial starts from zero;
// partials combine by a pairwise tree (a binary counter: two partials of equal size merge, the rest
// merge from the right at the end, the same tree as pairing adjacent partials level by level).
// determinism: the tree depends on K only; threads split output tiles. Bits independent of threads.
Status run_pairwise(GemmContext& ctx, const Problem& pb) {
  const IsaKernels& kn = *ctx.kern;
  const int chunks = ceil_div(pb.k, kGemmKc);
  if (chunks <= 1) return run_sequential(ctx, pb);  // one chunk: nothing to combine
  std::vector<Tile> tiles = pb.tiles(shared_tiles(pb, ctx.pool->size()), kn);
  std::atomic<size_t> next{0};
  std::atomic<bool> oom{false};
  ctx.pool->run([&](int tid) {
    ThreadScratch& s = (*ctx.scratch)[tid];
    for (size_t idx; (idx = next.fetch_add(1, std::memory_order_relaxed)) < tiles.size();) {
      const Tile& tl = tiles[idx];
      const int rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
      struct Entry {
        float* buf;
        int leaves;
      };
      std::vector<Entry> stack;
      for (int c = 0; c < chunks; ++c) {
        size_t level = stack.size();
        if (s.levels.size() <= level) s.levels.resize(level + 1);
        float* buf = s.levels[level].get(size_t(rows) * cols);
        if (!buf) return oom.store(true);
        TileTarget t;
        t.d = t.out = buf;
        t.ldd = t.ldo = cols;
        if (!pb.compute(kn, s, tl, c * kGemmKc, std::min(pb.k, (c + 1) * kGemmKc), t)) return oom.store(true);
        stack.push_back({buf, 1});
        while (stack.size() >= 2 && stack[stack.size() - 2].leaves == stack.back().leaves) {
          Entry right = stack.back();
          stack.pop_back();
          add_into(stack.back().buf, cols, right.buf, cols, rows, cols);
          stack.back().leaves *= 2;
        }
      }
      while (stack.size() >= 2) {
        Entry right = stack.back();
        stack.pop_back();
        add_into(stack.back().buf, cols, right.buf, cols, rows, cols);
      }
      ptrdiff_t ldc;
      float* c = pb.c_tile(tl, &ldc);
      for (int i = 0; i < rows; ++i) kn.epilogue_row(stack[0].buf + size_t(i) * cols, c + i * ldc, cols, pb.epi);
    }
  });
  return oom ? out_of_memory() : Status::ok();
}

// ---- blocked: K split into `threads` contiguous blocks [K*t/T, K*(t+1)/T); the partial of block t is
// one FMA chain from zero over that block; partials combine in block order: ((P0 + P1) + P2) + ...;
// then the epilogue.
// determinism: the bits depend on the thread count (the block edges move), not on scheduling.
// With threads = 1 this is the sequential order, bit for bit.
// How the work is shared does not change those bits: with a short K and enough output tiles, a
// thread takes whole tiles and computes every block's partial of them in turn (the running sum of
// finished partials lives in C or a scratch tile; the micro-kernel adds it to the next partial);
// otherwise (a long K, or a small output as in a filter gradient) thread t computes partial t of
// every tile into its own M x N buffer and the buffers are added afterwards.
Status run_blocked(GemmContext& ctx, const Problem& pb) {
  const int threads = ctx.pool->size();
  if (threads == 1) return run_sequential(ctx, pb);
  const IsaKernels& kn = *ctx.kern;
  auto edge = [&](int t) { return int(int64_t(pb.k) * t / threads); };
  std::atomic<bool> oom{false};
  // Whole tiles per thread when there are enough tiles to share and either K is short (the partial
  // buffers and their combine pass would cost as much as the products) or the problem is a batch of
  // gemms (the M x N buffers would be needed for every gemm of it); K split over threads otherwise.
  std::vector<Tile> tiles = pb.tiles(4 * threads, kn);
  if ((pb.k < kGemmKc * threads || pb.batch > 1) && tiles.size() >= size_t(4 * threads)) {
    std::atomic<size_t> next{0};
    ctx.pool->run([&](int tid) {
      ThreadScratch& s = (*ctx.scratch)[tid];
      for (size_t idx; (idx = next.fetch_add(1, std::memory_order_relaxed)) < tiles.size();) {
        const Tile& tl = tiles[idx];
        const int rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
        ptrdiff_t ldc;
        float* c = pb.c_tile(tl, &ldc);
        float* d = s.tile.get(size_t(rows) * cols);
        float* sum = c;  // the sum of finished partials; C is not read when beta == 0
        ptrdiff_t lds = ldc;
        if (pb.epi.beta != 0.0f) sum = s.total.get(size_t(rows) * cols), lds = cols;
        if (!d || !sum) return oom.store(true);
        for (int b = 0; b < threads; ++b) {
          TileTarget t;
          t.d = d, t.ldd = cols;
          if (b > 0) t.add = sum, t.ldadd = lds;
          if (b + 1 < threads) {
            t.out = sum, t.ldo = lds;
          } else {
            t.out = c, t.ldo = ldc, t.epi = &pb.epi;
          }
          if (!pb.compute(kn, s, tl, edge(b), edge(b + 1), t)) return oom.store(true);
        }
      }
    });
    return oom ? out_of_memory() : Status::ok();
  }
  tiles = pb.tiles(1, kn);
  if (ctx.shared->size() < size_t(threads)) ctx.shared->resize(threads);
  const size_t mn = size_t(pb.m) * pb.n;
  std::vector<float*> part(threads);
  const bool p0_in_c = pb.epi.beta == 0.0f;  // C is not read: partial 0 can live in C
  for (int t = p0_in_c ? 1 : 0; t < threads; ++t)
    if (!(part[t] = (*ctx.shared)[t].get(mn))) return out_of_memory();
  ctx.pool->run([&](int tid) {
    ThreadScratch& s = (*ctx.scratch)[tid];
    for (const Tile& tl : tiles) {
      TileTarget t;
      if (tid == 0 && p0_in_c) {
        t.d = t.out = pb.c_tile(tl, &t.ldo);
        t.ldd = t.ldo;
      } else {
        t.d = t.out = part[tid] + size_t(tl.i0) * pb.n + tl.j0;
        t.ldd = t.ldo = pb.n;
      }
      if (!pb.compute(kn, s, tl, edge(tid), edge(tid + 1), t)) return oom.store(true);
    }
  });
  if (oom) return out_of_memory();
  ctx.pool->run([&](int tid) {
    ThreadScratch& s = (*ctx.scratch)[tid];
    for (const Tile& tl : tiles) {
      const int cols = tl.j1 - tl.j0;
      s.row.resize(size_t(cols));
      float* acc = s.row.data();
      ptrdiff_t ldc;
      float* c = pb.c_tile(tl, &ldc);
      const int r0 = tl.i0 + (tl.i1 - tl.i0) * tid / threads, r1 = tl.i0 + (tl.i1 - tl.i0) * (tid + 1) / threads;
      for (int i = r0; i < r1; ++i) {
        std::memcpy(acc, p0_in_c ? c + (i - tl.i0) * ldc : part[0] + size_t(i) * pb.n + tl.j0, sizeof(float) * cols);
        for (int t = 1; t < threads; ++t) {
          const float* p = part[t] + size_t(i) * pb.n + tl.j0;
          for (int j = 0; j < cols; ++j) acc[j] = acc[j] + p[j];
        }
        kn.epilogue_row(acc, c + (i - tl.i0) * ldc, size_t(cols), pb.epi);
      }
    }
  });
  return Status::ok();
}

// ---- atomic: K (when at least kAtomicMinSplitK) split into blocks of kGemmKc terms (at least 3); work
// items are (tile, chunk); each item's
// partial (from zero) is added into the tile's accumulator (starting at zero), under one lock per
// tile, in whatever order the items complete; the item that adds a tile's last partial also applies
// the epilogue. The accumulator is C itself when beta == 0, else an M x N buffer.
// determinism: NOT deterministic with threads > 1 — the order of the adds into each element is a
// real race, like split-K with atomics on a GPU. With forced_seed != 0 one thread adds the chunks
// in a seeded permutation instead (a test hook).
Status run_atomic(GemmContext& ctx, const Problem& pb) {
  const IsaKernels& kn = *ctx.kern;
  // determinism: a K below kAtomicMinSplitK is one chain per element (order=sequential's bits).
  if (pb.k < kAtomicMinSplitK) return run_sequential(ctx, pb);
  // K blocks of kGemmKc terms, at least 3 (with two partials the adds commute and nothing can vary).
  // Work items are (tile, block): at least 3 even for a single tile, so two threads always race on
  // one. Splitting a short K finer would only multiply the add passes (a convolution's K is often 9
  // to 300 terms).
  const int chunks = std::max(3, ceil_div(pb.k, kGemmKc));
  auto chunk_k = [&](int c) { return int(int64_t(pb.k) * c / chunks); };
  std::vector<Tile> tiles = pb.tiles(1, kn);
  float* accbuf = nullptr;
  if (pb.epi.beta != 0.0f) {
    if (ctx.shared->empty()) ctx.shared->resize(1);
    if (!(accbuf = (*ctx.shared)[0].get(size_t(pb.m) * pb.n))) return out_of_memory();
  }
  std::vector<int> arrived(tiles.size(), 0);
  // Adds one finished partial into its tile (the caller holds the tile's lock).
  auto add_partial = [&](ThreadScratch& s, size_t ti, const float* buf) {
    const Tile& tl = tiles[ti];
    const int rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
    ptrdiff_t ldc, lda;
    float* c = pb.c_tile(tl, &ldc);
    float* acc = accbuf ? accbuf + size_t(tl.i0) * pb.n + tl.j0 : c;
    lda = accbuf ? pb.n : ldc;
    const int a = arrived[ti]++;
    const bool last = a + 1 == chunks;
    s.row.resize(size_t(cols));
    float* r = s.row.data();
    for (int i = 0; i < rows; ++i) {
      const float* p = buf + size_t(i) * cols;
      float* ar = acc + i * lda;
      if (last) {
        add_row(r, ar, p, cols, a == 0);
        kn.epilogue_row(r, c + i * ldc, size_t(cols), pb.epi);
      } else {
        add_row(ar, ar, p, cols, a == 0);
      }
    }
  };
  auto partial_of = [&](ThreadScratch& s, const Tile& tl, int c, float** out) {
    const int rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
    float* buf = s.partial.get(size_t(rows) * cols);
    if (!buf) return false;
    TileTarget t;
    t.d = t.out = buf;
    t.ldd = t.ldo = cols;
    *out = buf;
    return pb.compute(kn, s, tl, chunk_k(c), chunk_k(c + 1), t);
  };
  if (ctx.forced_seed != 0) {
    std::vector<uint32_t> perm = forced_order(ctx.forced_seed, size_t(chunks));
    ThreadScratch& s = (*ctx.scratch)[0];
    for (size_t ti = 0; ti < tiles.size(); ++ti)
      for (uint32_t c : perm) {
        float* buf;
        if (!partial_of(s, tiles[ti], int(c), &buf)) return out_of_memory();
        add_partial(s, ti, buf);
      }
    return Status::ok();
  }
  const size_t items = tiles.size() * size_t(chunks);  // tile-major: chunks of one tile run together
  std::atomic<size_t> next{0};
  std::atomic<bool> oom{false};
  // One lock per tile: a finished partial is added into its tile as soon as the lock is free.
  std::vector<std::atomic_flag> busy(tiles.size());
  for (auto& f : busy) f.clear();
  ctx.pool->run([&](int tid) {
    ThreadScratch& s = (*ctx.scratch)[tid];
    for (size_t idx; (idx = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
      const size_t ti = idx / chunks;
      float* buf;
      if (!partial_of(s, tiles[ti], int(idx % chunks), &buf)) return oom.store(true);
      // determinism: the race — whichever item of a tile finishes first adds first, so each
      // element's partials add in completion order, as with GPU atomics. (A lock per tile instead of
      // an atomic per element: the same race, at the cost of plain vector adds.)
      spin_acquire(busy[ti]);
      add_partial(s, ti, buf);
      busy[ti].clear(std::memory_order_release);
    }
  });
  return oom ? out_of_memory() : Status::ok();
}

Status run(GemmContext& ctx, const Problem& pb) {
  if ((*ctx.scratch).size() < size_t(ctx.pool->size())) (*ctx.scratch).resize(ctx.pool->size());
  switch (ctx.order) {
    case ReduceOrder::kSequential: return run_sequential(ctx, pb);
    case ReduceOrder::kPairwise: return run_pairwise(ctx, pb);
    case ReduceOrder::kBlocked: return run_blocked(ctx, pb);
    case ReduceOrder::kAtomic: return run_atomic(ctx, pb);
    case ReduceOrder::kPortable: break;  // its own backend (kernels/cpu/portable.cpp)
  }
  return Status::invalid("gemm: unknown order");
}

}  // namespace

Status gemm_batch(GemmContext& ctx, std::span<const GemmArgs> gs) {
  if (gs.empty()) return Status::ok();
  const GemmArgs& g0 = gs[0];
  for (const GemmArgs& g : gs) {
    DETAUDIT_RETURN_IF_ERROR(validate_gemm(g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc));
    auto bits = [](float x) { return std::bit_cast<uint32_t>(x); };
    if (g.m != g0.m || g.n != g0.n || g.k != g0.k || bits(g.alpha) != bits(g0.alpha) || bits(g.beta) != bits(g0.beta))
      return Status::invalid("gemm batch: the gemms must share m, n, k, alpha and beta");
  }
  if (g0.m == 0 || g0.n == 0) return Status::ok();
  if (gs.size() * size_t(g0.n) > size_t(INT32_MAX)) return Status::invalid("gemm batch: too large");
  return run(ctx, GemmBatchProblem(gs));
}

Status gemm(GemmContext& ctx, const GemmArgs& g) { return gemm_batch(ctx, std::span<const GemmArgs>(&g, 1)); }

void pack_a_whole(const GemmContext& ctx, Trans ta, const float* a, int lda, int m, int k, float* dst) {
  const PackedA pa{dst, m, k, ctx.kern->mr};
  for (int i0 = 0; i0 < m; i0 += pa.mr) {
    const int h = pa.step(i0);
    float* d = pa.at(i0, 0);
    if (ta == Trans::kN) {
      pack_a_rows(a + size_t(i0) * lda, lda, h, k, d);
    } else {
      for (int kk = 0; kk < k; ++kk)
        for (int r = 0; r < h; ++r) d[size_t(kk) * h + r] = a[size_t(kk) * lda + i0 + r];
    }
  }
}

Status gemm_batch_packed_a(GemmContext& ctx, int batch, int m, int n, int k, const float* ap, const float* b, int ldb,
                           size_t b_stride, float* c, int ldc, size_t c_stride) {
  DETAUDIT_RETURN_IF_ERROR(validate_gemm(Trans::kN, Trans::kN, m, n, k, std::max(1, k), ldb, ldc));
  if (batch <= 0 || m == 0 || n == 0) return Status::ok();
  if (size_t(batch) * n > size_t(INT32_MAX)) return Status::invalid("gemm batch: too large");
  std::vector<ptrdiff_t> brows(size_t(k) + 1);
  for (int kk = 0; kk < k; ++kk) brows[size_t(kk)] = ptrdiff_t(kk) * ldb;
  return run(ctx, PackedABatchProblem(batch, m, n, k, ap, b, b_stride, brows.data(), c, ldc, c_stride, ctx.kern->mr));
}

// Splits images over the pool's threads (copies only).
template <class F>
void for_images(GemmContext& ctx, int n, F&& fn) {
  const int threads = ctx.pool->size();
  ctx.pool->run([&](int t) {
    for (int i = int(int64_t(n) * t / threads); i < int(int64_t(n) * (t + 1) / threads); ++i) fn(i);
  });
}

Status conv_fwd(GemmContext& ctx, const ConvShape& s, const float* x, const float* w, float* y, const float* bias) {
  if (s.stride != 1) {
    DETAUDIT_RETURN_IF_ERROR(run(ctx, ConvFwdProblem(s, x, w, y)));
    if (bias) {
      const int pq = s.p() * s.q();
      for_images(ctx, s.n, [&](int i) {
        for (int k = 0; k < s.k; ++k) {
          float* plane = y + (size_t(i) * s.k + k) * pq;
          copy_rows(plane, pq, plane, pq, 1, pq, bias + k);
        }
      });
    }
    return Status::ok();
  }
  const int hp = s.h + 2 * s.pad, wp = s.w + 2 * s.pad, P = s.p(), Q = s.q(), npad = P * wp;
  const size_t plane = size_t(hp) * wp, img_stride = (size_t(s.c) * plane + s.s + 15) / 16 * 16;
  if (size_t(s.n) * npad > size_t(INT32_MAX)) return Status::invalid("conv2d: too large");
  const int crs = s.c * s.r * s.s;
  float* xp = (*ctx.staging)[0].get(img_stride * s.n);
  float* ybuf = (*ctx.staging)[1].get(size_t(s.n) * s.k * npad);
  float* wpk = (*ctx.staging)[2].get(size_t(s.k) * crs);
  if (!xp || !ybuf || !wpk) return out_of_memory();
  const PackedA pa{wpk, s.k, crs, ctx.kern->mr};
  for (int i0 = 0; i0 < s.k; i0 += pa.mr) pack_a_rows(w + size_t(i0) * crs, crs, pa.step(i0), crs, pa.at(i0, 0));
  std::vector<ptrdiff_t> rows(static_cast<size_t>(crs));
  for (int c = 0; c < s.c; ++c)
    for (int r = 0; r < s.r; ++r)
      for (int q = 0; q < s.s; ++q) rows[(size_t(c) * s.r + r) * s.s + q] = ptrdiff_t(c * plane + r * wp + q);
  for_images(ctx, s.n, [&](int i) {
    float* d = xp + size_t(i) * img_stride;
    pad_image(x + size_t(i) * s.c * s.h * s.w, d, s.c, s.h, s.w, s.pad);
    // The tail after the last plane is read only for dropped columns (q >= Q); zeroed all the same, so
    // that nothing uninitialised is ever read.
    std::memset(d + size_t(s.c) * plane, 0, sizeof(float) * (img_stride - size_t(s.c) * plane));
  });
  DETAUDIT_RETURN_IF_ERROR(run(ctx, ConvFwdPaddedProblem(s, xp, img_stride, pa, ybuf, rows.data())));
  for_images(ctx, s.n, [&](int i) {
    for (int k = 0; k < s.k; ++k)
      copy_rows(ybuf + (size_t(i) * s.k + k) * npad, wp, y + (size_t(i) * s.k + k) * P * Q, Q, P, Q,
                bias ? bias + k : nullptr);
  });
  return Status::ok();
}

Status conv_bwd_filter(GemmContext& ctx, const ConvShape& s, const float* x, const float* dy, float beta, float* dw) {
  const int hp = s.h + 2 * s.pad, wp = s.w + 2 * s.pad, P = s.p(), Q = s.q(), C = s.c;
  const int crs = s.c * s.r * s.s;
  const size_t img_stride = (size_t(hp) * wp * C + 15) / 16 * 16;
  float* xh = (*ctx.staging)[0].get(img_stride * s.n);
  float* dwp = (*ctx.staging)[1].get(size_t(s.k) * crs);
  if (!xh || !dwp) return out_of_memory();
  std::vector<ptrdiff_t> pix(size_t(P) * Q), coff(crs);
  std::vector<int> runs(crs);
  for (int p = 0; p < P; ++p)
    for (int q = 0; q < Q; ++q) pix[size_t(p) * Q + q] = (ptrdiff_t(p) * s.stride * wp + ptrdiff_t(q) * s.stride) * C;
  for (int r = 0; r < s.r; ++r)
    for (int q = 0; q < s.s; ++q)
      for (int c = 0; c < C; ++c) {
        const int j = (r * s.s + q) * C + c;
        coff[j] = (ptrdiff_t(r) * wp + q) * C + c;
        runs[j] = s.s * C - (q * C + c);  // (s, c) stay contiguous within one r
      }
  for_images(ctx, s.n, [&](int i) {
    float* d = xh + size_t(i) * img_stride;
    pad_image_hwc(x + size_t(i) * C * s.h * s.w, d, C, s.h, s.w, s.pad);
    std::memset(d + size_t(hp) * wp * C, 0, sizeof(float) * (img_stride - size_t(hp) * wp * C));
  });
  // Three ways to read B, all with the same terms in the same order:
  // - column runs (S*C contiguous floats per filter row) that fill most of a micro-panel: dy is packed
  //   once and the channel-last image is read in place;
  // - short runs (few channels, e.g. C = 1) but C*R*S within two micro-panels: each pixel's C*R*S
  //   window is first copied out as one contiguous row (an explicit im2col, transposed; at most
  //   kMaxWindowRowFloats of them), then as above;
  // - otherwise both operands are packed per piece.
  const int pq = P * Q;
  PackedA pa;
  const bool in_place = s.s * C >= ctx.kern->nr / 2;
  const bool window_rows =
      !in_place && crs <= 2 * ctx.kern->nr && size_t(s.n) * pq * crs <= kMaxWindowRowFloats;
  if (in_place || window_rows) {
    float* dyp = (*ctx.staging)[2].get(size_t(s.k) * s.n * pq);
    if (!dyp) return out_of_memory();
    pa = {dyp, s.k, s.n * pq, ctx.kern->mr};
    for_images(ctx, s.n, [&](int i) {
      for (int i0 = 0; i0 < s.k; i0 += pa.mr)
        pack_a_rows(dy + (size_t(i) * s.k + i0) * pq, pq, pa.step(i0), pq, pa.at(i0, i * pq));
    });
  }
  if (window_rows) {
    float* cols = (*ctx.staging)[3].get(size_t(s.n) * pq * crs);
    if (!cols) return out_of_memory();
    const int span = s.s * C;  // one filter row of the window
    for_images(ctx, s.n, [&](int i) {
      const float* img = xh + size_t(i) * img_stride;
      float* out = cols + size_t(i) * pq * crs;
      for (int j = 0; j < pq; ++j)
        for (int r = 0; r < s.r; ++r) {
          const float* src = img + pix[size_t(j)] + ptrdiff_t(r) * wp * C;
          float* dst = out + size_t(j) * crs + size_t(r) * span;
          for (int t = 0; t < span; ++t) dst[t] = src[t];
        }
    });
    std::vector<ptrdiff_t> rowpix(static_cast<size_t>(pq)), col(static_cast<size_t>(crs));
    std::vector<int> rest(static_cast<size_t>(crs));
    for (int j = 0; j < pq; ++j) rowpix[size_t(j)] = ptrdiff_t(j) * crs;
    for (int j = 0; j < crs; ++j) col[size_t(j)] = j, rest[size_t(j)] = crs - j;
    DETAUDIT_RETURN_IF_ERROR(run(ctx, ConvBwdFilterNhwcProblem(s, cols, size_t(pq) * crs, dy, pa, dwp, rowpix.data(),
                                                               col.data(), rest.data())));
  } else {
    DETAUDIT_RETURN_IF_ERROR(
        run(ctx, ConvBwdFilterNhwcProblem(s, xh, img_stride, dy, pa, dwp, pix.data(), coff.data(), runs.data())));
  }
  // dw[k][c][r][s] = the epilogue of the (r, s, c)-ordered result.
  const IsaKernels& kn = *ctx.kern;
  std::vector<float> acc(static_cast<size_t>(crs));
  for (int k = 0; k < s.k; ++k) {
    const float* src = dwp + size_t(k) * crs;
    for (int c = 0; c < C; ++c)
      for (int rs = 0; rs < s.r * s.s; ++rs) acc[size_t(c) * s.r * s.s + rs] = src[size_t(rs) * C + c];
    kn.epilogue_row(acc.data(), dw + size_t(k) * crs, size_t(crs), {1.0f, beta});
  }
  return Status::ok();
}

}  // namespace detaudit::native
