// Moving sprites: the video data of the PredNet regression, the bouncing-MNIST generator of
// Srivastava et al. (2015) with Fashion-MNIST items as sprites. Each sequence is
// `frames` frames of rows x cols pixels on black in which `sprites` 28 x 28 images move and bounce off
// the frame's edges; where sprites overlap the brighter pixel wins.
//
// Sprite j of sequence i draws from counter_bits(seed, kSpriteStream + i, 64j + k):
//   k = 0: its image, uniform over the source;
//   k = 1, 2: its position (y, x) in [0, 1)^2 (53-bit uniforms);
//   k = 3, 4, ...: its direction, uniform on the circle: points (u, v) uniform in [-1, 1]^2 drawn until
//   one lies in the unit disc (and not within 2^-20 of its centre), normalised to length 1.
// Each frame after the first: position += 0.1 * velocity, then a coordinate outside [0, 1] is clamped to
// it and that velocity component negated. The sprite's top-left pixel is int(pos * (side - 28)).
// Only IEEE-754 double +, -, *, / and sqrt (each correctly rounded; the project compiles without FP
// contraction): the same bytes on every machine, and sequence i does not depend on how many are made.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/status.hpp"
#include "models/idx.hpp"

namespace detaudit {

inline constexpr int kSpriteSide = 28;
inline constexpr uint64_t kSpriteStream = 0x5917E000;

struct SpriteConfig {
  int frames = 20, rows = 64, cols = 64, sprites = 2;
  // Channels per pixel, all equal (grey): 3 gives the RGB frames of PredNet's paper configuration the
  // same motion, so the paper's architecture trains without KITTI.
  int channels = 1;
};

// Video sequences: pixels is count x frames x rows x cols x channels, uint8 (the layout of an .npy
// [N, T, H, W] or [N, T, H, W, C] video file); moving sprites have SpriteConfig::channels equal channels.
struct VideoSet {
  int count = 0, frames = 0, rows = 0, cols = 0, channels = 1;
  std::vector<uint8_t> pixels;
  size_t pixels_per_frame() const { return size_t(rows) * cols * channels; }
  size_t pixels_per_sequence() const { return pixels_per_frame() * size_t(frames); }
};

// Where sprite j of a sequence is in each frame, and which image it shows (for tests and the report).
struct SpriteTrack {
  uint32_t image = 0;
  std::vector<double> y, x;    // position in [0, 1]^2 per frame
  std::vector<double> vy, vx;  // velocity (a unit vector) with which it left each frame
  std::vector<int> row, col;   // top-left pixel per frame: int(y * (rows - 28)), int(x * (cols - 28))
};

// Sequences first .. first + count - 1 of the moving-sprites set of `seed`. Status::invalid for a frame
// smaller than a sprite, no sprite, no frame, source images that are not 28 x 28 or an empty source.
Status make_moving_sprites(const Dataset& source, const SpriteConfig& cfg, uint64_t seed, uint64_t first, int count,
                           VideoSet* out);
// The tracks of sequence i (what make_moving_sprites draws).
Status sprite_tracks(const Dataset& source, const SpriteConfig& cfg, uint64_t seed, uint64_t i,
                     std::vector<SpriteTrack>* out);

}  // namespace detaudit
