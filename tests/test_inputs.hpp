// Inputs shared by the test programs: seeded vectors and a training set (Fashion-MNIST when the
// Debian package is installed, else a synthetic one of the same shape).
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "models/idx.hpp"
#include "kernels/generator.hpp"

namespace detaudit::test_support {

inline uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Integers in [-4, 4]: every product and sum in the tests stays exact in float.
inline std::vector<float> ints(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(int(splitmix(seed) % 9) - 4);
  return v;
}

// Uniform in [lo, hi).
inline std::vector<float> uniform(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(lo + (hi - lo) * double(splitmix(seed) >> 11) * 0x1p-53);
  return v;
}

// Random bytes.
inline std::vector<unsigned char> bytes_of(size_t n, uint64_t seed) {
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = (unsigned char)(splitmix(seed) >> 56);
  return v;
}

// Normal deviates by Box–Muller on raw mt19937_64 output: std::normal_distribution differs between
// standard libraries, this does not.
struct Normal {
  std::mt19937_64 g;
  explicit Normal(std::uint64_t seed) : g(seed) {}
  double uniform() { return (static_cast<double>(g() >> 11) + 0.5) * 0x1.0p-53; }
  double operator()() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

inline const Dataset& training_data() {
  static Dataset d = [] {
    Dataset out;
    if (load_dataset("", "train", &out)) return out;
    out.count = 2048, out.rows = 28, out.cols = 28;  // synthetic: bright random rectangles on black
    out.pixels.assign(size_t(out.count) * 28 * 28, 0);
    out.labels.assign(size_t(out.count), 0);
    for (int i = 0; i < out.count; ++i) {
      const uint64_t b = counter_bits(9, 0, uint64_t(i));
      const int r0 = int(b % 14), c0 = int((b >> 8) % 14), h = 6 + int((b >> 16) % 8), w = 6 + int((b >> 24) % 8);
      for (int r = r0; r < r0 + h; ++r)
        for (int c = c0; c < c0 + w; ++c) out.pixels[(size_t(i) * 28 + r) * 28 + c] = uint8_t(128 + (b >> 32) % 128);
    }
    return out;
  }();
  return d;
}

}  // namespace detaudit::test_support
