// Small generated videos for PredNet tests: count sequences of nt frames of 32 x 32, a bright 8 x 8 square
// moving one pixel right per frame on noise, from counter bits (a function of the index only).
#pragma once
#include <cstdint>

#include "kernels/generator.hpp"
#include "models/sprites.hpp"

namespace detaudit::test_support {

inline VideoSet moving_squares(int count, int nt) {
  VideoSet v;
  v.count = count, v.frames = nt, v.rows = 32, v.cols = 32;
  v.pixels.resize(v.pixels_per_sequence() * size_t(count));
  for (int n = 0; n < count; ++n)
    for (int t = 0; t < nt; ++t)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) {
          const size_t at = size_t(n) * v.pixels_per_sequence() + size_t(t) * v.pixels_per_frame() + size_t(y) * 32 + x;
          const int x0 = 4 + n % 8 + t, y0 = 4 + n % 16;
          const bool in = x >= x0 && x < x0 + 8 && y >= y0 && y < y0 + 8;
          v.pixels[at] = in ? 230 : uint8_t(counter_bits(5, uint64_t(n), at) % 40);
        }
  return v;
}

}  // namespace detaudit::test_support
