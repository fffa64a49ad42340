// The device pre-hash's CPU reference (kernels/cuda/device_hash.hpp), which the GPU kernels must match
// bit for bit (tests/gpu): single-word changes and swaps always change the public lanes, a collision can
// be built on purpose against them, and the keyed lanes see through it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cuda/device_hash.hpp"
#include "tests/test_inputs.hpp"

namespace detaudit {
namespace {

using gpu::DeviceHashKey;

struct Lanes {
  uint64_t l[4];
  bool public_equal(const Lanes& o) const { return l[0] == o.l[0] && l[1] == o.l[1]; }
  bool keyed_equal(const Lanes& o) const { return l[2] == o.l[2] && l[3] == o.l[3]; }
};

Lanes hash(const std::vector<unsigned char>& b, const DeviceHashKey& key) {
  Lanes h;
  gpu::device_hash_host(b.data(), b.size(), key, h.l);
  return h;
}

// The inverse of word_hash's Feistel rounds: what an attacker who knows the key computes.
void word_unhash(uint64_t k, uint64_t h1, uint64_t h2, uint64_t& a, uint64_t& b) {
  uint64_t u = h1, v = h2;
  v ^= gpu::mx(u, 0xC4CEB9FE1A85EC53ull);
  u -= gpu::mx(v, 0xFF51AFD7ED558CCDull);
  v ^= gpu::mx(u, 0x94D049BB133111EBull);
  u -= gpu::mx(v, 0xBF58476D1CE4E5B9ull);
  a = u ^ k;
  b = v ^ gpu::rotl(k, 29) ^ 0xD6E8FEB86659FD93ull;
}

void put_word(std::vector<unsigned char>& b, size_t i, uint64_t lo, uint64_t hi) {
  std::memcpy(&b[16 * i], &lo, 8);
  std::memcpy(&b[16 * i + 8], &hi, 8);
}
void get_word(const std::vector<unsigned char>& b, size_t i, uint64_t& lo, uint64_t& hi) {
  std::memcpy(&lo, &b[16 * i], 8);
  std::memcpy(&hi, &b[16 * i + 8], 8);
}

TEST(DeviceHash, EveryOneWordChangeAndEverySwapChangesThePublicLanes) {
  const DeviceHashKey key{0x1234567890ABCDEFull | 1, 42};
  auto bytes = test_support::bytes_of(16 * 64 + 5, 7);  // 64 full words and a 5-byte tail
  const Lanes base = hash(bytes, key);
  for (size_t at = 0; at < bytes.size(); at += 13) {
    auto b = bytes;
    b[at] ^= 0x10;
    EXPECT_FALSE(hash(b, key).public_equal(base)) << "byte " << at;
  }
  auto b = bytes;
  std::swap_ranges(b.begin(), b.begin() + 16, b.begin() + 160);  // words 0 and 9 trade places
  EXPECT_FALSE(hash(b, key).public_equal(base));
  EXPECT_FALSE(hash(b, key).keyed_equal(base));
  // Zero padding of the tail counts: one more zero byte is another length, seen by the caller's key.
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_TRUE(hash(longer, key).public_equal(base));  // why GpuBackend's cache keys on the length too
}

TEST(DeviceHash, ACollisionBuiltOnPurposeAgainstThePublicLanesIsCaughtByTheKeyedOnes) {
  auto bytes = test_support::bytes_of(16 * 32, 11);
  // Change word 3 at will, then solve the public Feistel network for the word 20 that cancels the change
  // in both public lanes: possible because kKey is public and the lanes are a sum.
  auto forged = bytes;
  uint64_t a3, b3, a20, b20;
  get_word(bytes, 3, a3, b3);
  get_word(bytes, 20, a20, b20);
  const uint64_t na3 = a3 ^ 0xFFFF0000FFFF0000ull, nb3 = b3 + 12345;
  put_word(forged, 3, na3, nb3);
  uint64_t o1, o2, n1, n2, t1, t2;
  gpu::word_hash(gpu::public_key(3), a3, b3, o1, o2);
  gpu::word_hash(gpu::public_key(3), na3, nb3, n1, n2);
  gpu::word_hash(gpu::public_key(20), a20, b20, t1, t2);
  uint64_t fa, fb;
  word_unhash(gpu::public_key(20), t1 - (n1 - o1), t2 - (n2 - o2), fa, fb);
  put_word(forged, 20, fa, fb);
  ASSERT_NE(forged, bytes);

  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const DeviceHashKey key{(seed * 0x9E3779B97F4A7C15ull) | 1, seed * 0xD1B54A32D192ED03ull};
    const Lanes h0 = hash(bytes, key), h1 = hash(forged, key);
    EXPECT_TRUE(h1.public_equal(h0)) << "the forgery must collide in the public lanes";
    EXPECT_FALSE(h1.keyed_equal(h0)) << "key " << seed;
  }
}

TEST(DeviceHash, KeysFromTheOsDiffer) {
  const DeviceHashKey a = DeviceHashKey::random(), b = DeviceHashKey::random();
  EXPECT_EQ(a.mul & 1, 1u);
  EXPECT_TRUE(a.mul != b.mul || a.add != b.add);
}

}  // namespace
}  // namespace detaudit
