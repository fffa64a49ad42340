// The device-side pre-hash behind GpuBackend::fingerprint, as plain host/device functions: the kernels
// of device_hash.cu and the CPU reference share them, and the CPU tests check the reference without CUDA.
//
// The canonical fingerprint is the host XXH3-128 of the bytes; this hash only recognises, on the device,
// bytes seen before, so repeats need not be copied back. A false "seen before" would report a new
// output as an old one, so the hash has two independent pairs of lanes:
//  - public lanes: the buffer is cut into 16-byte words (the last one zero-padded); word i with halves
//    (a, b) maps to F(k_i; a, b), a 4-round Feistel network keyed by its position k_i = (i + 1) * kKey, a
//    bijection of (a, b): changing any one word always changes these lanes, and swapped words count.
//    They are a sum, so with kKey known a collision can be built on purpose (change word i, then solve
//    F for the word j that cancels the change: test_device_hash does exactly that);
//  - keyed lanes: the same sum with the position key k_i = (i + 1) * key.mul ^ key.add, where the key is
//    drawn at random when the backend starts (DeviceHashKey::random). Without the key nobody can solve F
//    for the cancelling word, so the on-purpose collision of the public lanes leaves these different.
// determinism: integer addition mod 2^64 is associative and commutative, so the atomics that combine
// the per-block sums give the same bits in any order, on any grid.
#pragma once
#include <sys/random.h>

#include <cstddef>
#include <cstdint>
#include <random>

#if defined(__CUDACC__)
#define DETAUDIT_HD __host__ __device__
#else
#define DETAUDIT_HD
#endif

namespace detaudit::gpu {

constexpr uint64_t kKey = 0x9E3779B97F4A7C15ull;
constexpr int kDeviceHashLanes = 4;  // public (2), keyed (2)

struct DeviceHashKey {
  uint64_t mul = 1, add = 0;  // mul odd, so (i + 1) * mul never repeats below 2^64 words
  // From the OS's random source (getrandom); header-only, so CPU-only builds and their tests have it too.
  static DeviceHashKey random() {
    uint64_t k[2] = {0, 0};
    if (getrandom(k, sizeof(k), 0) != ssize_t(sizeof(k))) {  // never expected on Linux; still a secret key
      std::random_device rd;
      k[0] = (uint64_t(rd()) << 32) | rd();
      k[1] = (uint64_t(rd()) << 32) | rd();
    }
    return {k[0] | 1, k[1]};
  }
};

DETAUDIT_HD inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
DETAUDIT_HD inline uint64_t mx(uint64_t x, uint64_t m) { return (x ^ (x >> 29)) * m; }

// F(k; a, b) -> (h1, h2), a bijection of (a, b) for every k.
DETAUDIT_HD inline void word_hash(uint64_t k, uint64_t a, uint64_t b, uint64_t& h1, uint64_t& h2) {
  uint64_t u = a ^ k;
  uint64_t v = b ^ rotl(k, 29) ^ 0xD6E8FEB86659FD93ull;
  u += mx(v, 0xBF58476D1CE4E5B9ull);
  v ^= mx(u, 0x94D049BB133111EBull);
  u += mx(v, 0xFF51AFD7ED558CCDull);
  v ^= mx(u, 0xC4CEB9FE1A85EC53ull);
  h1 = u;
  h2 = v;
}

DETAUDIT_HD inline uint64_t public_key(size_t i) { return (uint64_t(i) + 1) * kKey; }
DETAUDIT_HD inline uint64_t keyed_key(const DeviceHashKey& key, size_t i) { return ((uint64_t(i) + 1) * key.mul) ^ key.add; }

// Adds word i = (a, b) to the four lanes.
DETAUDIT_HD inline void add_word(const DeviceHashKey& key, size_t i, uint64_t a, uint64_t b, uint64_t s[4]) {
  uint64_t h1, h2;
  word_hash(public_key(i), a, b, h1, h2);
  s[0] += h1, s[1] += h2;
  word_hash(keyed_key(key, i), a, b, h1, h2);
  s[2] += h1, s[3] += h2;
}

// Bytes [16 i, 16 i + 16) of p, zero past `bytes`, as two little-endian 64-bit words.
DETAUDIT_HD inline void load_tail(const unsigned char* p, size_t bytes, size_t i, uint64_t& a, uint64_t& b) {
  a = b = 0;
  for (int j = 0; j < 16; ++j) {
    size_t at = i * 16 + j;
    uint64_t byte = at < bytes ? p[at] : 0;
    if (j < 8) a |= byte << (8 * j);
    else b |= byte << (8 * (j - 8));
  }
}

// The CPU reference of the device kernels: the same four lanes of `bytes` host bytes.
inline void device_hash_host(const void* host_ptr, size_t bytes, const DeviceHashKey& key, uint64_t out[4]) {
  const auto* p = static_cast<const unsigned char*>(host_ptr);
  uint64_t s[4] = {0, 0, 0, 0}, a, b;
  for (size_t i = 0; i < (bytes + 15) / 16; ++i) {
    load_tail(p, bytes, i, a, b);
    add_word(key, i, a, b, s);
  }
  for (int l = 0; l < 4; ++l) out[l] = s[l];
}

}  // namespace detaudit::gpu
