// Counter-based input generator: element i of stream s under seed k is a pure function of (k, s, i),
// so every target, process and machine sees identical input bytes, and any slice can be generated
// without the elements before it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace detaudit {

enum class Dist : uint8_t {
  kUniform,  // floats uniform in [-1, 1) on a 2^-24 grid
  kInt,      // integers in [-4, 4]: every product and sum of a probe stays exact in float
};

inline uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t counter_bits(uint64_t seed, uint64_t stream, uint64_t i) {
  return mix64(mix64(seed ^ mix64(stream + 0x632BE59BD9B4E019ull)) + i);
}

inline double counter_value(uint64_t seed, uint64_t stream, uint64_t i, Dist d) {
  uint64_t b = counter_bits(seed, stream, i);
  if (d == Dist::kInt) return double(int64_t(b % 9) - 4);
  return double(b >> 40) * 0x1.0p-23 - 1.0;  // 24 random bits -> [-1, 1)
}

template <typename T>
void fill_counter(T* out, size_t n, uint64_t seed, uint64_t stream, Dist d) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(counter_value(seed, stream, i, d));
}

template <typename T>
std::vector<T> make_input(size_t n, uint64_t seed, uint64_t stream, Dist d) {
  std::vector<T> v(n);
  fill_counter(v.data(), n, seed, stream, d);
  return v;
}

}  // namespace detaudit
