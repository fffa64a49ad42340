#include "models/sprites.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/generator.hpp"

namespace detaudit {

namespace {

// Uniform in [0, n) by multiply-high of 64 counter bits.
uint64_t uniform(uint64_t bits, uint64_t n) { return uint64_t((unsigned __int128)bits * n >> 64); }

Status check(const Dataset& source, const SpriteConfig& cfg) {
  if (cfg.frames < 1 || cfg.sprites < 1)
    return Status::invalid(fmt::format("moving sprites: {} frames of {} sprites (both must be positive)", cfg.frames,
                                       cfg.sprites));
  if (cfg.rows < kSpriteSide || cfg.cols < kSpriteSide)
    return Status::invalid(fmt::format("moving sprites: frames of {}x{} cannot hold a {}x{} sprite", cfg.rows, cfg.cols,
                                       kSpriteSide, kSpriteSide));
  if (source.count < 1 || source.rows != kSpriteSide || source.cols != kSpriteSide ||
      source.pixels.size() != size_t(source.count) * kSpriteSide * kSpriteSide)
    return Status::invalid(fmt::format("moving sprites: the source must hold 28x28 images (got {} of {}x{})",
                                       source.count, source.rows, source.cols));
  return Status::ok();
}

// One coordinate moved by v inside [0, hi]: reflected off an edge it would cross, velocity negated.
void step(int* p, int* v, int hi) {
  int q = *p + *v;
  if (q < 0) q = -q, *v = -*v;
  if (q > hi) q = 2 * hi - q, *v = -*v;
  *p = std::clamp(q, 0, hi);  // only a frame narrower than a velocity step could need it
}

}  // namespace

Status sprite_tracks(const Dataset& source, const SpriteConfig& cfg, uint64_t seed, uint64_t i,
                     std::vector<SpriteTrack>* out) {
  DETAUDIT_RETURN_IF_ERROR(check(source, cfg));
  const int hi_r = cfg.rows - kSpriteSide, hi_c = cfg.cols - kSpriteSide;
  static const int kSpeeds[6] = {-3, -2, -1, 1, 2, 3};
  out->assign(size_t(cfg.sprites), {});
  for (int j = 0; j < cfg.sprites; ++j) {
    auto bits = [&](uint64_t k) { return counter_bits(seed, kSpriteStream + i, 8 * uint64_t(j) + k); };
    SpriteTrack& t = (*out)[size_t(j)];
    t.image = uint32_t(uniform(bits(0), uint64_t(source.count)));
    int r = int(uniform(bits(1), uint64_t(hi_r) + 1)), c = int(uniform(bits(2), uint64_t(hi_c) + 1));
    int vr = kSpeeds[uniform(bits(3), 6)], vc = kSpeeds[uniform(bits(4), 6)];
    for (int f = 0; f < cfg.frames; ++f) {
      t.row.push_back(r);
      t.col.push_back(c);
      step(&r, &vr, hi_r);
      step(&c, &vc, hi_c);
    }
  }
  return Status::ok();
}

Status make_moving_sprites(const Dataset& source, const SpriteConfig& cfg, uint64_t seed, uint64_t first, int count,
                           VideoSet* out) {
  DETAUDIT_RETURN_IF_ERROR(check(source, cfg));
  if (count < 0) return Status::invalid("moving sprites: a negative count");
  VideoSet v;
  v.count = count, v.frames = cfg.frames, v.rows = cfg.rows, v.cols = cfg.cols;
  v.pixels.assign(v.pixels_per_sequence() * size_t(count), 0);
  std::vector<SpriteTrack> tracks;
  for (int n = 0; n < count; ++n) {
    DETAUDIT_RETURN_IF_ERROR(sprite_tracks(source, cfg, seed, first + uint64_t(n), &tracks));
    uint8_t* seq = v.pixels.data() + size_t(n) * v.pixels_per_sequence();
    for (const SpriteTrack& t : tracks) {
      const uint8_t* img = source.pixels.data() + size_t(t.image) * kSpriteSide * kSpriteSide;
      for (int f = 0; f < cfg.frames; ++f) {
        uint8_t* frame = seq + size_t(f) * v.pixels_per_frame();
        for (int y = 0; y < kSpriteSide; ++y)
          for (int x = 0; x < kSpriteSide; ++x) {
            uint8_t& px = frame[size_t(t.row[size_t(f)] + y) * size_t(cfg.cols) + size_t(t.col[size_t(f)] + x)];
            px = std::max(px, img[y * kSpriteSide + x]);
          }
      }
    }
  }
  *out = std::move(v);
  return Status::ok();
}

}  // namespace detaudit
