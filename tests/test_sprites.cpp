// The moving-sprites generator of the PredNet regression (models/sprites.hpp): a function of the seed
// and the sequence index only, sprites that stay in the frame, move by their velocity and bounce, and a
// frame that is exactly the sprites' images composed by max.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

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
  ASSERT_EQ(all.pixels.size(), size_t(6) * 10 * 64 * 64);
  EXPECT_TRUE(std::equal(tail.pixels.begin(), tail.pixels.end(), all.pixels.begin() + 4 * all.pixels_per_sequence()))
      << "sequence 4 does not depend on how many came before it";
}

TEST(Sprites, SpritesStayInsideMoveByTheirVelocityAndBounce) {
  SpriteConfig cfg;
  cfg.frames = 40;  // long enough that every sprite meets an edge
  int bounces = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    std::vector<SpriteTrack> tracks;
    ASSERT_TRUE(sprite_tracks(source(), cfg, 3, i, &tracks));
    ASSERT_EQ(tracks.size(), 2u);
    for (auto& t : tracks) {
      ASSERT_EQ(t.row.size(), 40u);
      for (int f = 0; f < 40; ++f) {
        EXPECT_GE(t.row[f], 0);
        EXPECT_LE(t.row[f], 64 - kSpriteSide);
        EXPECT_GE(t.col[f], 0);
        EXPECT_LE(t.col[f], 64 - kSpriteSide);
      }
      // Straight lines between bounces: a step is at most 3 pixels and changes only next to an edge (a
      // reflected step is shorter, even 0: 35 + 2 is reflected off the edge at 36 back to 35).
      for (const auto* p : {&t.row, &t.col})
        for (int f = 1; f + 1 < 40; ++f) {
          const int a = (*p)[f] - (*p)[f - 1], b = (*p)[f + 1] - (*p)[f];
          EXPECT_LE(std::abs(a), 3);
          if (a != b) {
            ++bounces;
            const int lo = std::min({(*p)[f - 1], (*p)[f], (*p)[f + 1]}), hi = std::max({(*p)[f - 1], (*p)[f], (*p)[f + 1]});
            EXPECT_TRUE(lo < 3 || hi > 64 - kSpriteSide - 3) << "a change of direction away from the edges at frame " << f;
          }
        }
    }
  }
  EXPECT_GT(bounces, 20);
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

TEST(Sprites, ImpossibleConfigurationsAreRefused) {
  VideoSet v;
  SpriteConfig small;
  small.rows = 27;
  EXPECT_FALSE(make_moving_sprites(source(), small, 1, 0, 1, &v));
  SpriteConfig none;
  none.sprites = 0;
  EXPECT_FALSE(make_moving_sprites(source(), none, 1, 0, 1, &v));
  Dataset empty;
  EXPECT_FALSE(make_moving_sprites(empty, SpriteConfig{}, 1, 0, 1, &v));
}

}  // namespace
}  // namespace detaudit
