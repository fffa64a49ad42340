#include "models/sprites.hpp"

#include <algorithm>
#include <cmath>

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
  if (cfg.channels < 1) return Status::invalid(fmt::format("moving sprites: {} channels", cfg.channels));
  if (cfg.rows < kSpriteSide || cfg.cols < kSpriteSide)
    return Status::invalid(fmt::format("moving sprites: frames of {}x{} cannot hold a {}x{} sprite", cfg.rows, cfg.cols,
                                       kSpriteSide, kSpriteSide));
  if (source.count < 1 || source.rows != kSpriteSide || source.cols != kSpriteSide ||
      source.pixels.size() != size_t(source.count) * kSpriteSide * kSpriteSide)
    return Status::invalid(fmt::format("moving sprites: the source must hold 28x28 images (got {} of {}x{})",
                                       source.count, source.rows, source.cols));
  return Status::ok();
}

// A 53-bit uniform in [0, 1).
double unit(uint64_t bits) { return double(bits >> 11) * 0x1p-53; }

// One coordinate moved by 0.1 v; outside [0, 1] it is clamped and v negated.
void step(double* p, double* v) {
  *p += 0.1 * *v;
  if (*p < 0.0) *p = 0.0, *v = -*v;
  if (*p > 1.0) *p = 1.0, *v = -*v;
}

}  // namespace

Status sprite_tracks(const Dataset& source, const SpriteConfig& cfg, uint64_t seed, uint64_t i,
                     std::vector<SpriteTrack>* out) {
  DETAUDIT_RETURN_IF_ERROR(check(source, cfg));
  const int span_r = cfg.rows - kSpriteSide, span_c = cfg.cols - kSpriteSide;
  out->assign(size_t(cfg.sprites), {});
  for (int j = 0; j < cfg.sprites; ++j) {
    auto bits = [&](uint64_t k) { return counter_bits(seed, kSpriteStream + i, 64 * uint64_t(j) + k); };
    SpriteTrack& t = (*out)[size_t(j)];
    t.image = uint32_t(uniform(bits(0), uint64_t(source.count)));
    double y = unit(bits(1)), x = unit(bits(2)), vy = 1, vx = 0;  // (1, 0) only if 30 draws all miss: p < 1e-20
    for (uint64_t k = 3; k + 1 < 64; k += 2) {  // about 1.27 draws on average
      const double u = 2 * unit(bits(k)) - 1, v = 2 * unit(bits(k + 1)) - 1, r2 = u * u + v * v;
      if (r2 > 1.0 || r2 < 0x1p-40) continue;
      const double r = std::sqrt(r2);
      vy = u / r, vx = v / r;
      break;
    }
    for (int f = 0; f < cfg.frames; ++f) {
      if (f > 0) step(&y, &vy), step(&x, &vx);
      t.y.push_back(y);
      t.x.push_back(x);
      t.vy.push_back(vy);
      t.vx.push_back(vx);
      t.row.push_back(int(y * span_r));
      t.col.push_back(int(x * span_c));
    }
  }
  return Status::ok();
}

Status make_moving_sprites(const Dataset& source, const SpriteConfig& cfg, uint64_t seed, uint64_t first, int count,
                           VideoSet* out) {
  DETAUDIT_RETURN_IF_ERROR(check(source, cfg));
  if (count < 0) return Status::invalid("moving sprites: a negative count");
  VideoSet v;
  v.count = count, v.frames = cfg.frames, v.rows = cfg.rows, v.cols = cfg.cols, v.channels = cfg.channels;
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
            uint8_t* px = frame + (size_t(t.row[size_t(f)] + y) * size_t(cfg.cols) + size_t(t.col[size_t(f)] + x)) *
                                      size_t(cfg.channels);
            for (int ch = 0; ch < cfg.channels; ++ch) px[ch] = std::max(px[ch], img[y * kSpriteSide + x]);
          }
      }
    }
  }
  *out = std::move(v);
  return Status::ok();
}

}  // namespace detaudit
