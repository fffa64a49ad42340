// gemm of the cpu backend. One code path for every order: pack a kc x nc block of op(B) and an
// mc x kc block of op(A) into micro-panels, run the per-ISA micro-kernel on each mr x nr tile.
// The orders differ only in which K range a tile's micro-kernels cover and how partials combine.
#include "kernels/cpu/native_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>

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

Status check_gemm_args(Trans ta, Trans tb, int m, int n, int k, int lda, int ldb, int ldc) {
  if (m < 0 || n < 0 || k < 0)
    return Status::invalid("gemm: negative size m=" + std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k));
  int min_lda = std::max(1, ta == Trans::kN ? k : m);
  int min_ldb = std::max(1, tb == Trans::kN ? n : k);
  if (lda < min_lda) return Status::invalid("gemm: lda=" + std::to_string(lda) + " < " + std::to_string(min_lda));
  if (ldb < min_ldb) return Status::invalid("gemm: ldb=" + std::to_string(ldb) + " < " + std::to_string(min_ldb));
  if (ldc < std::max(1, n)) return Status::invalid("gemm: ldc=" + std::to_string(ldc) + " < n");
  return Status::ok();
}

namespace {

constexpr int kTileCols = 1024;  // columns of a tile: the packed B block is kGemmKc x kTileCols

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

// Packs rows [i0, i0+mc) x K range [k0, k0+kc) of op(A) into mr-row micro-panels (zero padded).
void pack_a(const GemmArgs& g, int i0, int mc, int k0, int kc, int mr, float* dst) {
  for (int ip = 0; ip < mc; ip += mr) {
    int rows = std::min(mr, mc - ip);
    if (g.ta == Trans::kN) {
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
void pack_b(const GemmArgs& g, int j0, int nc, int k0, int kc, int nr, float* dst) {
  for (int jp = 0; jp < nc; jp += nr) {
    int cols = std::min(nr, nc - jp);
    if (g.tb == Trans::kN) {
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

// Where a tile's accumulator lives and where its result goes.
struct TileTarget {
  float* d = nullptr;  // accumulator between kc blocks, at the tile origin (may be null when the
  ptrdiff_t ldd = 0;   // K range is one kc block and `c` is set)
  float* c = nullptr;  // when set, the last kc block writes the epilogue here (tile origin)
  ptrdiff_t ldc = 0;
  Epilogue epi;
};

// One micro-tile; edge tiles go through a padded copy so the micro-kernel always sees mr x nr.
void run_micro(const IsaKernels& kn, int kc, const float* ap, const float* bp, const float* src, ptrdiff_t lds,
               float* dst, ptrdiff_t ldd, int rows, int cols, const Epilogue* epi) {
  if (rows == kn.mr && cols == kn.nr) {
    kn.ukernel(kc, ap, bp, src, lds, dst, ldd, epi);
    return;
  }
  alignas(64) float tmp[12 * 32];
  const int nr = kn.nr;
  if (src) {
    for (int i = 0; i < kn.mr; ++i)
      for (int j = 0; j < nr; ++j) tmp[i * nr + j] = (i < rows && j < cols) ? src[i * lds + j] : 0.0f;
  }
  kn.ukernel(kc, ap, bp, src ? tmp : nullptr, nr, tmp, nr, nullptr);
  for (int i = 0; i < rows; ++i) {
    if (epi)
      kn.epilogue_row(tmp + i * nr, dst + i * ldd, cols, *epi);
    else
      std::memcpy(dst + i * ldd, tmp + i * nr, sizeof(float) * cols);
  }
}

// Computes the tile [i0,i1) x [j0,j1) over K range [k0,k1): the first kc block starts from zero,
// each later one continues from t.d, so every element is ONE FMA chain over the range, in k order.
// determinism: kc blocking, mc blocking and the micro-tile shape never change an element's chain.
bool compute_tile(const GemmArgs& g, const IsaKernels& kn, ThreadScratch& s, const Tile& tl, int k0, int k1,
                  const TileTarget& t) {
  const int mr = kn.mr, nr = kn.nr, mc_max = kn.mc;
  const int tn = tl.j1 - tl.j0;
  if (k0 >= k1) {  // empty range: the accumulator is zero
    for (int i = 0; i < tl.i1 - tl.i0; ++i) {
      if (t.c) {
        std::vector<float>& z = s.row;
        z.assign(size_t(tn), 0.0f);
        kn.epilogue_row(z.data(), t.c + i * t.ldc, size_t(tn), t.epi);
      } else {
        std::memset(t.d + i * t.ldd, 0, sizeof(float) * tn);
      }
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
          const float* src = first ? nullptr : dt;
          if (last && t.c)
            run_micro(kn, kc, ap, bp, src, t.ldd, t.c + ti * t.ldc + jp, t.ldc, rows, cols, &t.epi);
          else
            run_micro(kn, kc, ap, bp, src, t.ldd, dt, t.ldd, rows, cols, nullptr);
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

Status out_of_memory() { return Status::error("gemm: out of memory for working buffers"); }

// ---- sequential: one FMA chain over the whole K per element; threads split the output tiles.
// determinism: bits independent of the thread count and of scheduling.
Status gemm_sequential(GemmContext& ctx, const GemmArgs& g) {
  const IsaKernels& kn = *ctx.kern;
  const int threads = ctx.pool->size();
  std::vector<Tile> tiles = make_tiles(g.m, g.n, threads, kn);
  // With beta == 0 the chain lives in C itself; otherwise C's old value must survive until the
  // epilogue, so a multi-block chain lives in a scratch tile.
  const bool need_d = g.beta != 0.0f && g.k > kGemmKc;
  std::atomic<size_t> next{0};
  std::atomic<bool> oom{false};
  ctx.pool->run([&](int tid) {
    ThreadScratch& s = (*ctx.scratch)[tid];
    for (size_t idx; (idx = next.fetch_add(1, std::memory_order_relaxed)) < tiles.size();) {
      const Tile& tl = tiles[idx];
      TileTarget t;
      t.c = g.c + size_t(tl.i0) * g.ldc + tl.j0;
      t.ldc = g.ldc;
      t.epi = {g.alpha, g.beta};
      if (need_d) {
        t.ldd = tl.j1 - tl.j0;
        t.d = s.tile.get(size_t(tl.i1 - tl.i0) * t.ldd);
        if (!t.d) return oom.store(true);
      } else {
        t.d = t.c;
        t.ldd = g.ldc;
      }
      if (!compute_tile(g, kn, s, tl, 0, g.k, t)) return oom.store(true);
    }
  });
  return oom ? out_of_memory() : Status::ok();
}

// ---- pairwise: K cut into kGemmKc chunks aligned at k = 0; each chunk's partial starts from zero;
// partials combine by a pairwise tree (a binary counter: two partials of equal size merge, the rest
// merge from the right at the end, the same tree as pairing adjacent partials level by level).
// determinism: the tree depends on K only; threads split output tiles. Bits independent of threads.
Status gemm_pairwise(GemmContext& ctx, const GemmArgs& g) {
  const IsaKernels& kn = *ctx.kern;
  const int chunks = ceil_div(g.k, kGemmKc);
  if (chunks <= 1) return gemm_sequential(ctx, g);  // one chunk: nothing to combine
  std::vector<Tile> tiles = make_tiles(g.m, g.n, ctx.pool->size(), kn);
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
        t.d = buf;
        t.ldd = cols;
        if (!compute_tile(g, kn, s, tl, c * kGemmKc, std::min(g.k, (c + 1) * kGemmKc), t)) return oom.store(true);
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
      for (int i = 0; i < rows; ++i)
        kn.epilogue_row(stack[0].buf + size_t(i) * cols, g.c + size_t(tl.i0 + i) * g.ldc + tl.j0, cols,
                        {g.alpha, g.beta});
    }
  });
  return oom ? out_of_memory() : Status::ok();
}

// ---- blocked: K split into `threads` contiguous blocks; thread t computes the partial of block t
// over the whole M x N (one FMA chain over its block); partials combine in thread order:
// ((P0 + P1) + P2) + ...; then the epilogue.
// determinism: the bits depend on the thread count (the block edges move), not on scheduling.
// With threads = 1 this is the sequential order, bit for bit.
Status gemm_blocked(GemmContext& ctx, const GemmArgs& g) {
  const int threads = ctx.pool->size();
  if (threads == 1) return gemm_sequential(ctx, g);
  const IsaKernels& kn = *ctx.kern;
  std::vector<Tile> tiles = make_tiles(g.m, g.n, 1, kn);
  if (ctx.shared->size() < size_t(threads)) ctx.shared->resize(threads);
  const size_t mn = size_t(g.m) * g.n;
  std::vector<float*> part(threads);
  std::vector<ptrdiff_t> ldp(threads, g.n);
  for (int t = 0; t < threads; ++t) {
    if (t == 0 && g.beta == 0.0f) {  // C is not read: thread 0's partial can live in C
      part[0] = g.c;
      ldp[0] = g.ldc;
      continue;
    }
    part[t] = (*ctx.shared)[t].get(mn);
    if (!part[t]) return out_of_memory();
  }
  std::atomic<bool> oom{false};
  ctx.pool->run([&](int tid) {
    ThreadScratch& s = (*ctx.scratch)[tid];
    const int k0 = int(int64_t(g.k) * tid / threads), k1 = int(int64_t(g.k) * (tid + 1) / threads);
    for (const Tile& tl : tiles) {
      TileTarget t;
      t.d = part[tid] + size_t(tl.i0) * ldp[tid] + tl.j0;
      t.ldd = ldp[tid];
      if (!compute_tile(g, kn, s, tl, k0, k1, t)) return oom.store(true);
    }
  });
  if (oom) return out_of_memory();
  ctx.pool->run([&](int tid) {
    ThreadScratch& s = (*ctx.scratch)[tid];
    s.row.resize(size_t(g.n));
    float* acc = s.row.data();
    const int r0 = int(int64_t(g.m) * tid / threads), r1 = int(int64_t(g.m) * (tid + 1) / threads);
    for (int i = r0; i < r1; ++i) {
      std::memcpy(acc, part[0] + size_t(i) * ldp[0], sizeof(float) * g.n);
      for (int t = 1; t < threads; ++t) {
        const float* p = part[t] + size_t(i) * ldp[t];
        for (int j = 0; j < g.n; ++j) acc[j] = acc[j] + p[j];
      }
      kn.epilogue_row(acc, g.c + size_t(i) * g.ldc, size_t(g.n), {g.alpha, g.beta});
    }
  });
  return Status::ok();
}

// ---- atomic: K split into many more chunks than threads; work items are (tile, chunk); each item's
// partial (from zero) is added into a shared M x N accumulator (one lock per tile), in whatever
// order the items complete; then the epilogue.
// determinism: NOT deterministic with threads > 1 — the order of the adds into each element is a
// real race, like split-K with atomics on a GPU. With forced_seed != 0 one thread adds the chunks
// in a seeded permutation instead (a test hook).
Status gemm_atomic(GemmContext& ctx, const GemmArgs& g) {
  const IsaKernels& kn = *ctx.kern;
  const int threads = ctx.pool->size();
  const int chunks = std::min(g.k, std::max({3, 4 * threads, ceil_div(g.k, kGemmKc)}));
  std::vector<Tile> tiles = make_tiles(g.m, g.n, 1, kn);
  if (ctx.shared->empty()) ctx.shared->resize(1);
  const size_t mn = size_t(g.m) * g.n;
  float* acc = (*ctx.shared)[0].get(mn);
  if (!acc) return out_of_memory();
  std::memset(acc, 0, sizeof(float) * mn);
  auto chunk_k = [&](int c) { return int(int64_t(g.k) * c / chunks); };
  std::atomic<bool> oom{false};
  if (ctx.forced_seed != 0) {
    std::vector<uint32_t> perm = forced_order(ctx.forced_seed, size_t(chunks));
    ThreadScratch& s = (*ctx.scratch)[0];
    for (const Tile& tl : tiles) {
      const int rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
      float* buf = s.partial.get(size_t(rows) * cols);
      if (!buf) return out_of_memory();
      for (uint32_t c : perm) {
        TileTarget t;
        t.d = buf;
        t.ldd = cols;
        if (!compute_tile(g, kn, s, tl, chunk_k(c), chunk_k(c + 1), t)) return out_of_memory();
        add_into(acc + size_t(tl.i0) * g.n + tl.j0, g.n, buf, cols, rows, cols);
      }
    }
  } else {
    const size_t items = tiles.size() * size_t(chunks);  // tile-major: chunks of one tile run together
    std::atomic<size_t> next{0};
    // One lock per tile: a finished partial is added into its tile of acc as soon as the lock is free.
    std::vector<std::atomic_flag> busy(tiles.size());
    for (auto& f : busy) f.clear();
    ctx.pool->run([&](int tid) {
      ThreadScratch& s = (*ctx.scratch)[tid];
      for (size_t idx; (idx = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
        const Tile& tl = tiles[idx / chunks];
        const int c = int(idx % chunks);
        const int rows = tl.i1 - tl.i0, cols = tl.j1 - tl.j0;
        float* buf = s.partial.get(size_t(rows) * cols);
        if (!buf) return oom.store(true);
        TileTarget t;
        t.d = buf;
        t.ldd = cols;
        if (!compute_tile(g, kn, s, tl, chunk_k(c), chunk_k(c + 1), t)) return oom.store(true);
        // determinism: the race — whichever item of a tile finishes first adds first, so each
        // element's partials add in completion order, as with GPU atomics. (A lock per tile instead of
        // an atomic per element: the same race, at the cost of plain vector adds.)
        std::atomic_flag& lock = busy[idx / chunks];
        while (lock.test_and_set(std::memory_order_acquire)) _mm_pause();
        add_into(acc + size_t(tl.i0) * g.n + tl.j0, g.n, buf, cols, rows, cols);
        lock.clear(std::memory_order_release);
      }
    });
    if (oom) return out_of_memory();
  }
  ctx.pool->run([&](int tid) {
    const int r0 = int(int64_t(g.m) * tid / threads), r1 = int(int64_t(g.m) * (tid + 1) / threads);
    for (int i = r0; i < r1; ++i)
      kn.epilogue_row(acc + size_t(i) * g.n, g.c + size_t(i) * g.ldc, size_t(g.n), {g.alpha, g.beta});
  });
  return Status::ok();
}

}  // namespace

Status gemm(GemmContext& ctx, const GemmArgs& g) {
  DETAUDIT_RETURN_IF_ERROR(check_gemm_args(g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc));
  if (g.m == 0 || g.n == 0) return Status::ok();
  if ((*ctx.scratch).size() < size_t(ctx.pool->size())) (*ctx.scratch).resize(ctx.pool->size());
  switch (ctx.order) {
    case ReduceOrder::kSequential: return gemm_sequential(ctx, g);
    case ReduceOrder::kPairwise: return gemm_pairwise(ctx, g);
    case ReduceOrder::kBlocked: return gemm_blocked(ctx, g);
    case ReduceOrder::kAtomic: return gemm_atomic(ctx, g);
  }
  return Status::invalid("gemm: unknown order");
}

}  // namespace detaudit::native
