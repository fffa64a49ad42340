// Winograd F(4x4, 3x3) for the cpu backend (see winograd.hpp).
// Layouts: transformed operands are 36 planes, one per transform point xi = 6a + b:
//   U[xi][K][C] (filter), V[xi][C][T] (input tiles), M[xi][K][T] (products, or dy's tiles),
// with tile t = (n*TH + th)*TW + tw over the output grid of P x Q in 4x4 tiles.
// The transforms work on kL tiles at a time (lanes: consecutive tiles of one image), so each formula
// below is one vector operation per lane group; every lane does the same IEEE operations in the same
// order whatever the vector width.
#include "kernels/cpu/winograd.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/native_kernels.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace detaudit::native {

namespace {

constexpr int kXi = 36;  // transform points of a 6x6 tile
constexpr int kL = 8;    // tiles per transform step (lanes)

// Copies and elementwise float ops only: vector width cannot change a bit (-ffp-contract=off keeps
// the compiler from fusing), so the best ISA the CPU has runs.
#define DETAUDIT_WINO_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

struct Lanes {
  float v[kL];
};
// determinism: each operator is one rounded IEEE operation per lane; the formulas below fix the order.
[[gnu::always_inline]] inline Lanes operator+(const Lanes& a, const Lanes& b) {
  Lanes r;
  for (int l = 0; l < kL; ++l) r.v[l] = a.v[l] + b.v[l];
  return r;
}
[[gnu::always_inline]] inline Lanes operator-(const Lanes& a, const Lanes& b) {
  Lanes r;
  for (int l = 0; l < kL; ++l) r.v[l] = a.v[l] - b.v[l];
  return r;
}
[[gnu::always_inline]] inline Lanes operator*(float c, const Lanes& a) {
  Lanes r;
  for (int l = 0; l < kL; ++l) r.v[l] = c * a.v[l];
  return r;
}

// v = B^T d (6 -> 6). Small integer coefficients: products by 4 are exact, by 5 one rounding each.
// (T: Lanes, or a vector of the compiler's with the same one rounded operation per element.)
template <class T>
[[gnu::always_inline]] inline void bt6(const T* d, int sd, T* v, int sv) {
  const T &d0 = d[0], &d1 = d[sd], &d2 = d[2 * sd], &d3 = d[3 * sd], &d4 = d[4 * sd], &d5 = d[5 * sd];
  const T s42 = d4 - d2, d31 = d3 - d1;
  v[0] = (4.0f * d0 - 5.0f * d2) + d4;
  v[sv] = (d3 + d4) - 4.0f * (d1 + d2);
  v[2 * sv] = (d4 - d3) + 4.0f * (d1 - d2);
  v[3 * sv] = s42 + 2.0f * d31;
  v[4 * sv] = s42 - 2.0f * d31;
  v[5 * sv] = (4.0f * d1 - 5.0f * d3) + d5;
}
// y = A^T m (6 -> 4).
template <class T>
[[gnu::always_inline]] inline void at6(const T* m, int sm, T* y, int sy) {
  const T s12 = m[sm] + m[2 * sm], d12 = m[sm] - m[2 * sm];
  const T s34 = m[3 * sm] + m[4 * sm], d34 = m[3 * sm] - m[4 * sm];
  y[0] = (m[0] + s12) + s34;
  y[sy] = d12 + 2.0f * d34;
  y[2 * sy] = s12 + 4.0f * s34;
  y[3 * sy] = (d12 + 8.0f * d34) + m[5 * sm];
}
// m = A y (4 -> 6): the transpose of at6, for dy in the filter gradient.
[[gnu::always_inline]] inline void a4(const Lanes* y, int sy, Lanes* m, int sm) {
  const Lanes &y0 = y[0], &y1 = y[sy], &y2 = y[2 * sy], &y3 = y[3 * sy];
  const Lanes e = y0 + y2, o = y1 + y3, e2 = y0 + 4.0f * y2, o2 = 2.0f * y1 + 8.0f * y3;
  m[0] = y0;
  m[sm] = e + o;
  m[2 * sm] = e - o;
  m[3 * sm] = e2 + o2;
  m[4 * sm] = e2 - o2;
  m[5 * sm] = y3;
}

// u = G g (3 -> 6). G's 1/4, 1/6, 1/12, 1/24 are divisions (correctly rounded, no rounded constant).
[[gnu::always_inline]] inline Lanes div(const Lanes& a, float c) {
  Lanes r;
  for (int l = 0; l < kL; ++l) r.v[l] = a.v[l] / c;
  return r;
}
[[gnu::always_inline]] inline Lanes neg(const Lanes& a) {
  Lanes r;
  for (int l = 0; l < kL; ++l) r.v[l] = -a.v[l];
  return r;
}
[[gnu::always_inline]] inline void g3(const Lanes* g, int sg, Lanes* u, int su) {
  const Lanes &g0 = g[0], &g1 = g[sg], &g2 = g[2 * sg];
  const Lanes s02 = g0 + g2, a = div(g0, 24.0f) + div(g2, 6.0f), b = div(g1, 12.0f);
  u[0] = div(g0, 4.0f);
  u[su] = div(neg(s02 + g1), 6.0f);
  u[2 * su] = div(neg(s02 - g1), 6.0f);
  u[3 * su] = a + b;
  u[4 * su] = a - b;
  u[5 * su] = g2;
}
// g = G^T u (6 -> 3), for the filter gradient.
[[gnu::always_inline]] inline void gt6(const Lanes* u, int su, Lanes* g, int sg) {
  const Lanes s12 = u[su] + u[2 * su], d21 = u[2 * su] - u[su];
  const Lanes s34 = u[3 * su] + u[4 * su], d34 = u[3 * su] - u[4 * su];
  g[0] = (div(u[0], 4.0f) - div(s12, 6.0f)) + div(s34, 24.0f);
  g[sg] = div(d21, 6.0f) + div(d34, 12.0f);
  g[2 * sg] = div(s34 - s12, 6.0f) + u[5 * su];
}

// The output grid in 4x4 tiles.
struct Grid {
  int P, Q, th, tw;
  int per_image() const { return th * tw; }
};
Grid grid_of(const ConvShape& s) {
  const int P = s.p(), Q = s.q();
  return {P, Q, (P + 3) / 4, (Q + 3) / 4};
}

// Lane copies: a fixed-length loop when all kL lanes are used (one vector move), else element by
// element. Copies only.
[[gnu::always_inline]] inline void store_lanes(float* dst, const Lanes& v, int nl) {
  if (nl == kL) {
    for (int l = 0; l < kL; ++l) dst[l] = v.v[l];
  } else {
    for (int l = 0; l < nl; ++l) dst[l] = v.v[l];
  }
}
[[gnu::always_inline]] inline void load_lanes(Lanes& v, const float* src, int nl) {
  if (nl == kL) {
    for (int l = 0; l < kL; ++l) v.v[l] = src[l];
  } else {
    for (int l = 0; l < kL; ++l) v.v[l] = l < nl ? src[l] : 0.0f;
  }
}

// Vectors of the compiler's for the row transforms: every operator is one rounded IEEE operation per
// element, as for Lanes, so the formulas give the same bits in either form.
using V8 = float __attribute__((vector_size(32)));
using V16 = float __attribute__((vector_size(64)));
static_assert(kL == 8, "the row transforms' shuffles are written for 8 tiles (a V8 of lanes)");
template <class T>
[[gnu::always_inline]] inline void load_v(T* v, const float* p) {
  std::memcpy(v, p, sizeof *v);
}

// dst[l] = x[l] for l < nl (1 <= nl <= 8): fixed-size moves (a copy loop here became a memmove call).
[[gnu::always_inline]] inline void store_first(float* dst, const V8& x, int nl) {
  switch (nl) {
    case 8:
      std::memcpy(dst, &x, 32);
      return;
    case 7:
      std::memcpy(dst, &x, 28);
      return;
    case 6:
      std::memcpy(dst, &x, 24);
      return;
    case 5:
      std::memcpy(dst, &x, 20);
      return;
    case 4:
      std::memcpy(dst, &x, 16);
      return;
    case 3:
      std::memcpy(dst, &x, 12);
      return;
    case 2:
      std::memcpy(dst, &x, 8);
      return;
    default:
      std::memcpy(dst, &x, 4);
      return;
  }
}

// out[j] = columns j .. j+15 of the 32 in (a, b), j < 6. (Vectors go by reference: by value they would
// change the calling convention between the clones.)
template <int J>
[[gnu::always_inline]] inline void shifted(const V16& a, const V16& b, V16* out) {
  *out = __builtin_shufflevector(a, b, J, J + 1, J + 2, J + 3, J + 4, J + 5, J + 6, J + 7, J + 8, J + 9, J + 10, J + 11,
                                 J + 12, J + 13, J + 14, J + 15);
}
[[gnu::always_inline]] inline void shifts(const V16& a, const V16& b, V16* out) {
  out[0] = a;
  shifted<1>(a, b, out + 1), shifted<2>(a, b, out + 2), shifted<3>(a, b, out + 3);
  shifted<4>(a, b, out + 4), shifted<5>(a, b, out + 5);
}

// V = B^T d B of the tiles [tw0, tw0 + nl) (nl <= kL) of one tile row: row r of the 6 input rows starts
// at org + r*wp (the row's column 4*tw0; 48 floats readable from each): point xi of tile l goes to
// v[xi * xi_stride + l]. The B^T along rows runs on whole rows of the plane (every column, 16 at a
// time); the B^T along columns runs at every column position and keeps every fourth (a tile's origin).
// determinism: each tile's point is the same formula of the same 36 inputs as for a lone tile.
DETAUDIT_WINO_CLONES void input_row(const float* org, int wp, int nl, float* v, size_t xi_stride) {
  V16 t[3][6];  // t[block][a]: B^T along rows at columns 16*block ..
  for (int cb = 0; cb < 3; ++cb) {
    V16 d[6];
    for (int r = 0; r < 6; ++r) load_v(&d[r], org + size_t(r) * wp + 16 * cb);
    bt6(d, 1, t[cb], 1);
  }
  for (int a = 0; a < 6; ++a) {
    V16 lo[6], hi[6], olo[6], ohi[6];
    shifts(t[0][a], t[1][a], lo);
    shifts(t[1][a], t[2][a], hi);
    bt6(lo, 1, olo, 1);  // along columns, at column positions 0..15 and 16..31
    bt6(hi, 1, ohi, 1);
    for (int b = 0; b < 6; ++b) {
      const V8 pick = __builtin_shufflevector(olo[b], ohi[b], 0, 4, 8, 12, 16, 20, 24, 28);
      store_first(v + size_t(6 * a + b) * xi_stride, pick, nl);
    }
  }
}

// Y = A^T M A of kL consecutive tiles t0 .. t0 + nl - 1 of one image's grid (tw tiles a row), lane l's
// points at m[xi * xi_stride + l]: the part inside the P x Q output goes to y (that image's channel
// plane), with a bias then v + bias. Output rows are assembled in vectors (lane l's 4 columns at 4l ..
// 4l + 3) and stored a tile row's run of lanes at a time.
DETAUDIT_WINO_CLONES void output_tiles(const float* m, size_t xi_stride, int nl, int t0, int tw, int P, int Q,
                                       float* y, const float* bias) {
  V8 mm[36], z[24], o[16];
  for (int xi = 0; xi < kXi; ++xi) {
    if (nl == kL) {
      load_v(&mm[xi], m + xi * xi_stride);
    } else {
      mm[xi] = V8{};
      for (int l = 0; l < nl; ++l) mm[xi][l] = m[xi * xi_stride + l];
    }
  }
  for (int b = 0; b < 6; ++b) at6(mm + b, 6, z + b, 6);          // z[i][b], i < 4
  for (int i = 0; i < 4; ++i) at6(z + i * 6, 1, o + i * 4, 1);  // o[i][j]
  if (bias) {
    const float bk = *bias;
    for (int e = 0; e < 16; ++e) o[e] = o[e] + bk;
  }
  alignas(64) float rows[4][32];  // rows[i][4l + j] = o[i][j] of lane l
  for (int i = 0; i < 4; ++i) {
    const V16 a = __builtin_shufflevector(o[4 * i], o[4 * i + 1], 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const V16 b =
        __builtin_shufflevector(o[4 * i + 2], o[4 * i + 3], 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const V16 lo = __builtin_shufflevector(a, b, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    const V16 hi = __builtin_shufflevector(a, b, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
    std::memcpy(rows[i], &lo, sizeof lo);
    std::memcpy(rows[i] + 16, &hi, sizeof hi);
  }
  for (int l0 = 0; l0 < nl;) {  // runs of lanes within one tile row
    const int th = (t0 + l0) / tw, c0 = (t0 + l0) % tw, l1 = std::min(nl, l0 + tw - c0);
    const int hn = std::min(4, P - 4 * th), cols = std::min(4 * (l1 - l0), Q - 4 * c0);
    for (int i = 0; i < hn; ++i) {
      float* dst = y + size_t(4 * th + i) * Q + 4 * c0;
      const float* src = rows[i] + 4 * l0;
      int c = 0;
      for (; c + 4 <= cols; c += 4) std::memcpy(dst + c, src + c, 16);
      for (; c < cols; ++c) dst[c] = src[c];
    }
    l0 = l1;
  }
}

// M = A dy A^T of kL 4x4 dy tiles, lane l's at org[l] (row stride ldy), of which the hn x wn part lies
// inside dy (zeros beyond): point xi of lane l goes to m[xi * xi_stride + l], l < nl.
DETAUDIT_WINO_CLONES void dy_lanes(const float* const* org, int ldy, int hn, int wn, int nl, float* m,
                                   size_t xi_stride) {
  Lanes g[16], z[24], mm[36];
  for (int l = 0; l < kL; ++l)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) g[i * 4 + j].v[l] = i < hn && j < wn ? org[l][size_t(i) * ldy + j] : 0.0f;
  for (int j = 0; j < 4; ++j) a4(g + j, 4, z + j, 4);          // z[a][j], a < 6
  for (int a = 0; a < 6; ++a) a4(z + a * 4, 1, mm + a * 6, 1);  // mm[a][b]
  for (int xi = 0; xi < kXi; ++xi) store_lanes(m + xi * xi_stride, mm[xi], nl);
}

// U = G g G^T of kL filters, lane l's 3x3 at g[l * gstride]: point xi to u[xi * xi_stride + l], l < nl.
DETAUDIT_WINO_CLONES void filter_lanes(const float* g, size_t gstride, int nl, float* u, size_t xi_stride) {
  Lanes gg[9], t[18], uu[36];
  for (int l = 0; l < kL; ++l)
    for (int e = 0; e < 9; ++e) gg[e].v[l] = l < nl ? g[l * gstride + e] : 0.0f;
  for (int j = 0; j < 3; ++j) g3(gg + j, 3, t + j, 3);          // along rows: t[a][j]
  for (int a = 0; a < 6; ++a) g3(t + a * 3, 1, uu + a * 6, 1);  // along columns: u[a][b]
  for (int xi = 0; xi < kXi; ++xi) store_lanes(u + xi * xi_stride, uu[xi], nl);
}

// dw = G^T dU G of kL filters, lane l's points at u[xi * xi_stride + l]: to dw[l * gstride + e], l < nl.
DETAUDIT_WINO_CLONES void filter_grad_lanes(const float* u, size_t xi_stride, int nl, float* dw, size_t gstride) {
  Lanes uu[36], t[18], g[9];
  for (int xi = 0; xi < kXi; ++xi) load_lanes(uu[xi], u + xi * xi_stride, nl);
  for (int b = 0; b < 6; ++b) gt6(uu + b, 6, t + b, 6);  // along rows: t[r][b], r < 3
  for (int r = 0; r < 3; ++r) gt6(t + r * 6, 1, g + r * 3, 1);
  for (int l = 0; l < nl; ++l)
    for (int e = 0; e < 9; ++e) dw[l * gstride + e] = g[e].v[l];
}

// Splits items [0, n) over the pool's threads in fixed contiguous ranges; fn(tid, i).
// determinism: which thread transforms an item never changes its bits.
template <class F>
void for_items(ThreadPool* pool, size_t n, F&& fn) {
  const int threads = pool->size();
  pool->run([&](int t) {
    for (size_t i = n * t / threads; i < n * (t + 1) / threads; ++i) fn(t, i);
  });
}

}  // namespace

// A transformed filter kept for the next call with the same filter: a training step runs each
// convolution's forward (and backward data) once per time step with unchanged weights.
// determinism: U is a fixed function of the filter's bits, and an entry is used only when the filter
// is bitwise equal to the copy it was made from, so reuse never changes a bit.
struct FilterEntry {
  const float* w = nullptr;  // where the filter was (a hint; the copy decides)
  int k = 0, c = 0;
  bool flipped = false;  // U of bwd data's flipped, transposed filter
  int mr = 0;            // the micro-tile rows u is packed for
  std::vector<float> copy;
  AlignedBuffer u;  // U_xi^T [K x C] of each point, packed by pack_a_whole (xi-major, K*C floats each)
};
constexpr size_t kFilterCacheEntries = 64;

struct WinogradWork::Impl {
  AlignedBuffer u, v, m, wt, ut;
  std::vector<AlignedBuffer> planes;  // per thread: the zero-padded input plane being transformed
  std::vector<FilterEntry> filters;
  size_t next_victim = 0;
};

WinogradWork::WinogradWork() : impl(std::make_unique<Impl>()) {}
WinogradWork::~WinogradWork() = default;

namespace {

Status oom() { return Status::error("winograd: out of memory for working buffers"); }

// dst[i] = src[i], i < n: vector moves inline (rows of a few dozen floats, where a memmove call per row
// cost more than the copy).
DETAUDIT_WINO_CLONES void copy_floats(float* dst, const float* src, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    V16 t;
    load_v(&t, src + i);
    std::memcpy(dst + i, &t, sizeof t);
  }
  if (i + 8 <= n) {
    V8 t;
    load_v(&t, src + i);
    std::memcpy(dst + i, &t, sizeof t);
    i += 8;
  }
  for (; i + 4 <= n; i += 4) std::memcpy(dst + i, src + i, 16);
  for (; i < n; ++i) dst[i] = src[i];
}

// V[xi][c][t] of every image and channel of x for the tile grid gr of shape s: per (image, channel)
// a zero-padded plane, each tile row's tiles kL at a time.
constexpr size_t kRowSlack = 48;
Status transform_input(GemmContext& ctx, WinogradWork::Impl& wk, const ConvShape& s, const Grid& gr, const float* x,
                       float* v) {
  const int hp = 4 * gr.th + 2, wp = 4 * gr.tw + 2, tiles = gr.per_image();
  const size_t T = size_t(s.n) * tiles;
  if (wk.planes.size() < size_t(ctx.pool->size())) wk.planes.resize(size_t(ctx.pool->size()));
  // input_row reads up to 48 floats from a row's last tiles: the slack after the plane stays zero.
  const size_t plane_floats = size_t(hp) * wp + kRowSlack;
  for (int t = 0; t < ctx.pool->size(); ++t)
    if (!wk.planes[size_t(t)].get(plane_floats)) return oom();
  for_items(ctx.pool, size_t(s.n) * s.c, [&](int tid, size_t item) {
    const int n = int(item / s.c), c = int(item % s.c);
    float* plane = wk.planes[size_t(tid)].get(plane_floats);
    std::fill_n(plane, plane_floats, 0.0f);
    const float* xc = x + item * s.h * s.w;
    for (int h = 0; h < s.h; ++h) copy_floats(plane + size_t(h + s.pad) * wp + s.pad, xc + size_t(h) * s.w, s.w);
    float* vc = v + size_t(c) * T + size_t(n) * tiles;
    for (int th = 0; th < gr.th; ++th)
      for (int tw0 = 0; tw0 < gr.tw; tw0 += kL)
        input_row(plane + size_t(th) * 4 * wp + size_t(tw0) * 4, wp, std::min(kL, gr.tw - tw0),
                  vc + size_t(th) * gr.tw + tw0, size_t(s.c) * T);
  });
  return Status::ok();
}

// U[xi][c][k] = G g G^T of w[K][C][3][3] (of w'[c][k] = w[k][c] flipped when `flipped`, K and C then
// those of w'), each point's U_xi^T packed for gemm_batch_packed_a; from the cache when w is bitwise the
// filter an entry was made from (and packed for the same micro-tile rows).
Status transformed_filter(GemmContext& ctx, WinogradWork::Impl& wk, const float* w, int K, int C, bool flipped,
                          const float** out) {
  const size_t count = size_t(K) * C * 9;
  FilterEntry* e = nullptr;
  const int mr = ctx.kern->mr;
  for (FilterEntry& f : wk.filters)
    if (f.w == w && f.k == K && f.c == C && f.flipped == flipped && f.mr == mr) e = &f;
  if (e && std::memcmp(e->copy.data(), w, sizeof(float) * count) == 0) return *out = e->u.get(0), Status::ok();
  if (!e) {
    if (wk.filters.size() < kFilterCacheEntries) {
      wk.filters.emplace_back();
      e = &wk.filters.back();
    } else {
      e = &wk.filters[wk.next_victim++ % kFilterCacheEntries];
    }
  }
  e->w = w, e->k = K, e->c = C, e->flipped = flipped, e->mr = mr;
  e->copy.assign(w, w + count);
  float* packed = e->u.get(size_t(kXi) * K * C);
  float* u = wk.ut.get(size_t(kXi) * K * C);
  if (!packed || !u) return e->w = nullptr, oom();
  const float* g = w;
  if (flipped) {  // g[c'][k'] (K = the original C, C = the original K) = w[k'][c'] flipped in both axes
    float* wt = wk.wt.get(count);
    if (!wt) return e->w = nullptr, oom();
    for (int k = 0; k < C; ++k)
      for (int c = 0; c < K; ++c)
        for (int r = 0; r < 9; ++r) wt[(size_t(c) * C + k) * 9 + r] = w[(size_t(k) * K + c) * 9 + (8 - r)];
    g = wt;
  }
  // kL filters (consecutive k) at a time.
  const int kchunks = (K + kL - 1) / kL;
  for_items(ctx.pool, size_t(C) * kchunks, [&](int, size_t item) {
    const int c = int(item / kchunks), k0 = int(item % kchunks) * kL;
    filter_lanes(g + (size_t(k0) * C + c) * 9, size_t(C) * 9, std::min(kL, K - k0), u + size_t(c) * K + k0,
                 size_t(C) * K);
  });
  // A_xi = U_xi^T [K x C], stored [C][K].
  for_items(ctx.pool, kXi,
            [&](int, size_t xi) { pack_a_whole(ctx, Trans::kT, u + xi * C * K, K, K, C, packed + xi * K * C); });
  *out = packed;
  return Status::ok();
}

Status fwd_with(GemmContext& ctx, WinogradWork::Impl& wk, const ConvShape& s, const float* x, const float* u,
                float* y, const float* bias);

}  // namespace

bool winograd_applies(const ConvShape& s, int min_channels) {
  if (std::min(s.c, s.k) < min_channels) return false;
  if (s.r != 3 || s.s != 3 || s.stride != 1 || s.pad < 0 || s.pad > 2 || s.p() < 1 || s.q() < 1) return false;
  // The gemms' sizes are ints: C*T, K*T and K*C per point.
  const Grid gr = grid_of(s);
  const size_t T = size_t(s.n) * gr.per_image(), lim = size_t(INT32_MAX) / kXi;
  return T * s.c <= lim && T * s.k <= lim && size_t(s.k) * s.c <= lim;
}

// Forward: M_xi[K x T] = U_xi^T[K x C] * V_xi[C x T], U_xi^T packed once per filter (cached), V read in
// place: no operand is packed per call.

Status winograd_fwd(GemmContext& ctx, WinogradWork& work, const ConvShape& s, const float* x, const float* w,
                    float* y, const float* bias) {
  WinogradWork::Impl& wk = *work.impl;
  const float* u = nullptr;
  DETAUDIT_RETURN_IF_ERROR(transformed_filter(ctx, wk, w, s.k, s.c, false, &u));
  return fwd_with(ctx, wk, s, x, u, y, bias);
}

Status winograd_bwd_data(GemmContext& ctx, WinogradWork& work, const ConvShape& s, const float* dy, const float* w,
                         float* dx) {
  WinogradWork::Impl& wk = *work.impl;
  ConvShape t;
  t.n = s.n, t.c = s.k, t.h = s.p(), t.w = s.q(), t.k = s.c, t.r = 3, t.s = 3, t.stride = 1, t.pad = 2 - s.pad;
  const float* u = nullptr;
  DETAUDIT_RETURN_IF_ERROR(transformed_filter(ctx, wk, w, t.k, t.c, true, &u));
  return fwd_with(ctx, wk, t, dy, u, dx, nullptr);
}

namespace {

Status fwd_with(GemmContext& ctx, WinogradWork::Impl& wk, const ConvShape& s, const float* x, const float* u,
                float* y, const float* bias) {
  const Grid gr = grid_of(s);
  const int tiles = gr.per_image(), T = s.n * tiles, C = s.c, K = s.k;
  float* v = wk.v.get(size_t(kXi) * C * T);
  float* m = wk.m.get(size_t(kXi) * K * T);
  if (!v || !m) return oom();
  DETAUDIT_RETURN_IF_ERROR(transform_input(ctx, wk, s, gr, x, v));
  // M_xi[K x T] = U_xi^T V_xi: U_xi^T packed once per filter, V_xi [C][T] read in place, the 36 gemms as
  // one batch in the context's order, each with the bits native::gemm gives it alone (the order's rules
  // and arithmetic live there only).
  DETAUDIT_RETURN_IF_ERROR(gemm_batch_packed_a(ctx, kXi, K, T, C, u, v, T, size_t(C) * T, m, T, size_t(K) * T));
  const int P = gr.P, Q = gr.Q;
  // y from M[xi][k][t]: per output channel of an image, kL tiles at a time.
  const int tchunks = (tiles + kL - 1) / kL;
  for_items(ctx.pool, size_t(s.n) * K * tchunks, [&](int, size_t item) {
    const int n = int(item / (size_t(K) * tchunks)), k = int(item / tchunks % K), t0 = int(item % tchunks) * kL;
    output_tiles(m + size_t(k) * T + size_t(n) * tiles + t0, size_t(T) * K, std::min(kL, tiles - t0), t0, gr.tw, P,
                 Q, y + (size_t(n) * K + k) * P * Q, bias ? bias + k : nullptr);
  });
  return Status::ok();
}

}  // namespace

// Filter gradient: dU_xi^T[C x K] = V_xi[C x T] * M_xi[T x K], with M = A dy A^T stored [T][K].
Status winograd_bwd_filter(GemmContext& ctx, WinogradWork& work, const ConvShape& s, const float* x, const float* dy,
                           float* dw) {
  WinogradWork::Impl& wk = *work.impl;
  const Grid gr = grid_of(s);
  const int tiles = gr.per_image(), T = s.n * tiles, C = s.c, K = s.k;
  float* u = wk.u.get(size_t(kXi) * K * C);
  float* v = wk.v.get(size_t(kXi) * C * T);
  float* m = wk.m.get(size_t(kXi) * K * T);
  if (!u || !v || !m) return oom();
  DETAUDIT_RETURN_IF_ERROR(transform_input(ctx, wk, s, gr, x, v));
  const int P = gr.P, Q = gr.Q, kchunks = (K + kL - 1) / kL;
  for_items(ctx.pool, size_t(T) * kchunks, [&](int, size_t item) {
    const int t = int(item / kchunks), k0 = int(item % kchunks) * kL, nl = std::min(kL, K - k0);
    const int n = t / tiles, h0 = (t % tiles) / gr.tw * 4, w0 = (t % tiles) % gr.tw * 4;
    const float* org[kL];
    for (int l = 0; l < kL; ++l)
      org[l] = dy + (size_t(n) * K + k0 + std::min(l, nl - 1)) * P * Q + size_t(h0) * Q + w0;
    dy_lanes(org, Q, std::min(4, P - h0), std::min(4, Q - w0), nl, m + size_t(t) * K + k0, size_t(T) * K);
  });
  // The reduction runs over all tiles of all images; the 36 gemms go as one batch, as in fwd_with.
  std::vector<GemmArgs> gs;
  for (int xi = 0; xi < kXi; ++xi)
    gs.push_back({Trans::kN, Trans::kN, C, K, T, 1.0f, v + size_t(xi) * C * T, T, m + size_t(xi) * T * K, K, 0.0f,
                  u + size_t(xi) * C * K, K});
  DETAUDIT_RETURN_IF_ERROR(gemm_batch(ctx, gs));
  // dw[k][c] = G^T dU G from U[xi][c][k], kL filters (consecutive k) at a time.
  for_items(ctx.pool, size_t(C) * kchunks, [&](int, size_t item) {
    const int c = int(item / kchunks), k0 = int(item % kchunks) * kL;
    filter_grad_lanes(u + size_t(c) * K + k0, size_t(C) * K, std::min(kL, K - k0), dw + (size_t(k0) * C + c) * 9,
                      size_t(C) * 9);
  });
  return Status::ok();
}

}  // namespace detaudit::native
