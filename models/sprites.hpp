// Moving sprites: the video data of the PredNet regression (issue 13). Each sequence is `frames` frames
// of rows x cols pixels on black, in which `sprites` Fashion-MNIST images (28 x 28, cut from a Dataset)
// move in straight lines and bounce off the frame's edges; where sprites overlap the brighter pixel wins.
// Everything is integer arithmetic on a function of (seed, sequence index) only: the same bytes on every
// machine, and sequence i does not depend on how many others are made.
//
// Sequence i, from counter_bits(seed, kSpriteStream + i, 8j + k):
//   sprite j: source image (k = 0) uniform over the dataset, start row and column (k = 1, 2) uniform over
//   the positions where the whole 28 x 28 image fits, velocity (k = 3, 4) with each component uniform in
//   {-3, -2, -1, 1, 2, 3} pixels per frame;
//   frame t + 1: each sprite moves by its velocity; a component that would leave [0, side - 28] is
//   reflected off the edge (p' = 2 * edge - p) and its velocity negated.
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
  int frames = 10, rows = 64, cols = 64, sprites = 2;
};

// Sequences of one channel: pixels is count x frames x rows x cols, uint8 (the layout of an .npy
// [N, T, H, W] video file).
struct VideoSet {
  int count = 0, frames = 0, rows = 0, cols = 0, channels = 1;
  std::vector<uint8_t> pixels;
  size_t pixels_per_frame() const { return size_t(rows) * cols * channels; }
  size_t pixels_per_sequence() const { return pixels_per_frame() * size_t(frames); }
};

// Where sprite j of a sequence is in each frame, and which image it shows (for tests and the report).
struct SpriteTrack {
  uint32_t image = 0;
  std::vector<int> row, col;  // top-left corner per frame
};

// Sequences first .. first + count - 1 of the moving-sprites set of `seed`. Status::invalid for a frame
// smaller than a sprite, no sprite, no frame, source images that are not 28 x 28 or an empty source.
Status make_moving_sprites(const Dataset& source, const SpriteConfig& cfg, uint64_t seed, uint64_t first, int count,
                           VideoSet* out);
// The tracks of sequence i (what make_moving_sprites draws).
Status sprite_tracks(const Dataset& source, const SpriteConfig& cfg, uint64_t seed, uint64_t i,
                     std::vector<SpriteTrack>* out);

}  // namespace detaudit
