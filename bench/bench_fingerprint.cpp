// detaudit::fingerprint_bytes (XXH3-128) against memcpy of the same 64 MiB buffer, in bytes/s.
// Checked once first (STYLE rule 10): the fingerprint equals xxHash's own XXH3_128bits of the
// buffer, and the memcpy copy equals its source.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kernels/fingerprint.hpp"

namespace {

constexpr size_t kBytes = size_t(64) << 20;

const std::vector<unsigned char>& buffer() {
  static const std::vector<unsigned char> b = [] {
    std::vector<unsigned char> v(kBytes);
    uint64_t s = 7;
    for (size_t i = 0; i < kBytes; i += 8) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      std::memcpy(&v[i], &s, 8);
    }
    return v;
  }();
  return b;
}

void BM_fingerprint_bytes(benchmark::State& state) {
  const auto& b = buffer();
  detaudit::Fingerprint fp = detaudit::fingerprint_bytes(b.data(), b.size());
  XXH128_hash_t want = XXH3_128bits(b.data(), b.size());
  if (fp.hi != want.high64 || fp.lo != want.low64) return state.SkipWithError("fingerprint differs from XXH3_128bits");
  for (auto _ : state) {
    fp = detaudit::fingerprint_bytes(b.data(), b.size());
    benchmark::DoNotOptimize(fp);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes));
  state.SetLabel(fp.hex());
}
BENCHMARK(BM_fingerprint_bytes)->Unit(benchmark::kMillisecond);

void BM_memcpy(benchmark::State& state) {
  const auto& b = buffer();
  std::vector<unsigned char> dst(kBytes, 0);
  std::memcpy(dst.data(), b.data(), kBytes);
  if (std::memcmp(dst.data(), b.data(), kBytes) != 0) return state.SkipWithError("memcpy copy differs");
  for (auto _ : state) {
    std::memcpy(dst.data(), b.data(), kBytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes));
}
BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
