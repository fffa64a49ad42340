// The moving-sprites generator of the PredNet regression (models/sprites.hpp): a function of the seed
// and the sequence index only, sprites that stay in the frame, move by their velocity and bounce, and a
// frame that is exactly the sprites' images composed by max.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "kernels/fingerprint.hpp"
#include "models/sprites.hpp"
#include "tests/test_inputs.hpp"

namespace detaudit {
namespace {

const Dataset& source() { return test_support::training_data(); }

TEST(Sprites, SequencesAreAFunctionOfSeedAndIndexOnly) {
  SpriteConfig cfg;
  VideoSet all, tail, again, other;
  ASSERT_TRUE(make_moving_sprites(source(), cfg, 7, 0, 6, &all));
  ASSERT_TRUE(make_moving_sprites(source(), cfg, 7, 4, 2, &tail));
  ASSERT_TRUE(make_moving_sprites(source(), cfg, 7, 0, 6, &again));
  ASSERT_TRUE(make_moving_sprites(source(), cfg, 8, 0, 6, &other));
  EXPECT_EQ(all.pixels, again.pixels);
  EXPECT_NE(all.pixels, other.pixels) << "another seed, other sequences";
  ASSERT_EQ(all.pixels.size(), size_t(6) * 20 * 64 * 64);
  EXPECT_TRUE(std::equal(tail.pixels.begin(), tail.pixels.end(), all.pixels.begin() + 4 * all.pixels_per_sequence()))
      << "sequence 4 does not depend on how many came before it";
}

TEST(Sprites, SpritesMoveByATenthOfTheirUnitVelocityAndBounceOffTheEdges) {
  SpriteConfig cfg;
  cfg.frames = 40;  // long enough that most sprites meet an edge
  int bounces = 0;
  double mean_vx = 0;
  for (uint64_t i = 0; i < 50; ++i) {
    std::vector<SpriteTrack> tracks;
    ASSERT_TRUE(sprite_tracks(source(), cfg, 3, i, &tracks));
    ASSERT_EQ(tracks.size(), 2u);
    for (auto& t : tracks) {
      ASSERT_EQ(t.y.size(), 40u);
      EXPECT_NEAR(t.vy[0] * t.vy[0] + t.vx[0] * t.vx[0], 1.0, 1e-15);
      mean_vx += t.vx[0] / 100;
      for (int f = 0; f < 40; ++f) {
        for (double p : {t.y[f], t.x[f]}) {
          EXPECT_GE(p, 0.0);
          EXPECT_LE(p, 1.0);
        }
        EXPECT_EQ(t.row[f], int(t.y[f] * 36));
        EXPECT_EQ(t.col[f], int(t.x[f] * 36));
        if (f == 0) continue;
        const double py[2] = {t.y[f - 1], t.y[f]}, px[2] = {t.x[f - 1], t.x[f]};
        const double vy[2] = {t.vy[f - 1], t.vy[f]}, vx[2] = {t.vx[f - 1], t.vx[f]};
        for (auto [p, v] : {std::pair{py, vy}, std::pair{px, vx}}) {
          const double moved = p[0] + 0.1 * v[0];
          if (moved >= 0.0 && moved <= 1.0) {
            EXPECT_EQ(p[1], moved) << "a straight step of 0.1 v";
            EXPECT_EQ(v[1], v[0]);
          } else {
            ++bounces;
            EXPECT_EQ(p[1], moved < 0 ? 0.0 : 1.0) << "clamped to the edge it crossed";
            EXPECT_EQ(v[1], -v[0]) << "and that component negated";
          }
        }
      }
    }
  }
  EXPECT_GT(bounces, 50);
  EXPECT_LT(std::abs(mean_vx), 0.3) << "directions spread around the circle";
}

TEST(Sprites, FramesAreTheSpritesComposedByMax) {
  SpriteConfig cfg;
  cfg.frames = 3;
  VideoSet v;
  ASSERT_TRUE(make_moving_sprites(source(), cfg, 11, 5, 1, &v));
  std::vector<SpriteTrack> tracks;
  ASSERT_TRUE(sprite_tracks(source(), cfg, 11, 5, &tracks));
  for (int f = 0; f < 3; ++f) {
    std::vector<uint8_t> want(64 * 64, 0);
    for (auto& t : tracks)
      for (int y = 0; y < kSpriteSide; ++y)
        for (int x = 0; x < kSpriteSide; ++x) {
          uint8_t& px = want[size_t(t.row[f] + y) * 64 + size_t(t.col[f] + x)];
          px = std::max(px, source().pixels[size_t(t.image) * 784 + size_t(y) * 28 + size_t(x)]);
        }
    EXPECT_TRUE(std::equal(want.begin(), want.end(), v.pixels.begin() + f * v.pixels_per_frame())) << "frame " << f;
  }
}

// PredNet's paper configuration takes RGB frames: sprites in three channels are the one-channel frames
// with every pixel repeated, interleaved as in an [N, T, H, W, C] file, at any frame size that holds a
// sprite (128 x 160 here, the paper's).
TEST(Sprites, ChannelsRepeatTheGrayFrame) {
  SpriteConfig gray;
  gray.frames = 3, gray.rows = 128, gray.cols = 160;
  SpriteConfig rgb = gray;
  rgb.channels = 3;
  VideoSet g, c;
  ASSERT_TRUE(make_moving_sprites(source(), gray, 3, 2, 2, &g));
  ASSERT_TRUE(make_moving_sprites(source(), rgb, 3, 2, 2, &c));
  EXPECT_EQ(c.channels, 3);
  ASSERT_EQ(c.pixels.size(), 3 * g.pixels.size());
  size_t lit = 0;
  for (size_t i = 0; i < g.pixels.size(); ++i) {
    lit += g.pixels[i] != 0;
    for (size_t ch = 0; ch < 3; ++ch) ASSERT_EQ(c.pixels[3 * i + ch], g.pixels[i]) << "pixel " << i << " channel " << ch;
  }
  EXPECT_GT(lit, size_t(100)) << "the frames hold sprites";
}

TEST(Sprites, ImpossibleConfigurationsAreRefused) {
  VideoSet v;
  SpriteConfig small;
  small.rows = 27;
  EXPECT_FALSE(make_moving_sprites(source(), small, 1, 0, 1, &v));
  SpriteConfig none;
  none.sprites = 0;
  EXPECT_FALSE(make_moving_sprites(source(), none, 1, 0, 1, &v));
  SpriteConfig no_channels;
  no_channels.channels = 0;
  EXPECT_FALSE(make_moving_sprites(source(), no_channels, 1, 0, 1, &v));
  Dataset empty;
  EXPECT_FALSE(make_moving_sprites(empty, SpriteConfig{}, 1, 0, 1, &v));
}

}  // namespace
}  // namespace detaudit
