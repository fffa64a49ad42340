// The PredNet training loop and its next-frame check (models/prednet_train.hpp): the same bits twice on a
// deterministic target, and a copy-last-frame baseline that is what its definition says.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cmath>
#include <fstream>

#include "kernels/cpu/native.hpp"
#include "kernels/generator.hpp"
#include "kernels/npy.hpp"
#include "models/png.hpp"
#include "models/prednet.hpp"
#include "models/prednet_train.hpp"
#include "suites/train_data.hpp"
#include "tests/video_helpers.hpp"

namespace detaudit {
namespace {

using test_support::moving_squares;

TEST(PredNetTrain, DeterministicTwiceAndTheCopyLastBaselineIsItsDefinition) {
  PredNetTrainConfig cfg;
  ASSERT_TRUE(prednet_config("tiny", 2, &cfg.net));
  cfg.batches = 3;
  const VideoSet train = moving_squares(8, cfg.net.nt), held = moving_squares(4, cfg.net.nt);
  CpuNativeOptions o;
  o.threads = 2;
  auto be = make_cpu_native(o);
  PredNetTrainResult a, b;
  ASSERT_TRUE(train_prednet(*be, train, held, cfg, {}, &a));
  ASSERT_TRUE(train_prednet(*be, train, held, cfg, {}, &b));
  EXPECT_EQ(a.final_weights.hex(), b.final_weights.hex());
  EXPECT_EQ(a.curve, b.curve);
  ASSERT_EQ(a.curve.size(), 3u);
  EXPECT_NE(a.initial_weights.hex(), a.final_weights.hex());
  EXPECT_EQ(a.held_out.sequences, 4);

  // Copying frame t-1 for frame t, t = 1 .. nt-1, over every pixel of the 4 held-out sequences.
  double se = 0;
  size_t n = 0;
  for (int s = 0; s < 4; ++s)
    for (int t = 1; t < cfg.net.nt; ++t)
      for (size_t p = 0; p < held.pixels_per_frame(); ++p) {
        const uint8_t* seq = held.pixels.data() + size_t(s) * held.pixels_per_sequence();
        const double d = double(float(seq[size_t(t - 1) * 1024 + p]) / 255.0f) - double(float(seq[size_t(t) * 1024 + p]) / 255.0f);
        se += d * d, ++n;
      }
  EXPECT_NEAR(a.held_out.copy_last_mse, se / double(n), 1e-12);
  EXPECT_TRUE(std::isfinite(a.held_out.mse));
  EXPECT_GT(a.held_out.mse, 0.0);
  ASSERT_EQ(a.example_truth.size(), size_t(cfg.net.nt) * 1024);
  EXPECT_EQ(a.example_truth[0], float(held.pixels[0]) / 255.0f) << "sequence 0, frame 0, pixel 0";
  ASSERT_EQ(a.example_prediction.size(), a.example_truth.size());
}

TEST(PredNetTrain, SetsThatDoNotFitTheConfigurationAreRefused) {
  PredNetTrainConfig cfg;
  ASSERT_TRUE(prednet_config("tiny", 2, &cfg.net));
  CpuNativeOptions o;
  auto be = make_cpu_native(o);
  PredNetTrainResult r;
  EXPECT_FALSE(train_prednet(*be, moving_squares(8, 3), moving_squares(4, 4), cfg, {}, &r)) << "3 frames, nt is 4";
  EXPECT_FALSE(train_prednet(*be, moving_squares(1, 4), moving_squares(4, 4), cfg, {}, &r))
      << "fewer sequences than a batch";
  PredNetConfig unknown;
  EXPECT_FALSE(prednet_config("huge", 2, &unknown));
}

// The user's own video (.npy, uint8 [N, T, H, W] or [N, T, H, W, C]): the last tenth (at least a batch)
// is held out; a file of the wrong dtype, rank, frame size, too few frames or sequences, or truncated is
// refused with one line naming it.
TEST(PredNetTrain, NpyVideoLoadsAndBadFilesAreNamed) {
  PredNetConfig c;
  ASSERT_TRUE(prednet_config("tiny", 2, &c));
  const std::string dir = testing::TempDir();
  auto write = [&](const std::string& name, const std::string& descr, std::vector<uint64_t> shape, size_t cut = 0) {
    uint64_t n = 1;
    for (auto d : shape) n *= d;
    const size_t item = descr == "|u1" ? 1 : 4;
    std::vector<uint8_t> data(n * item);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7);
    std::vector<uint8_t> f = npy_encode(descr, shape, data.data(), data.size());
    f.resize(f.size() - cut);
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size()));
    return path;
  };
  VideoSet train, held;
  ASSERT_TRUE(load_video_npy(write("v.npy", "|u1", {20, 5, 32, 32}), c, &train, &held));
  EXPECT_EQ(train.count, 18);
  EXPECT_EQ(held.count, 2);
  EXPECT_EQ(held.frames, 5);
  EXPECT_EQ(held.pixels[0], uint8_t(size_t(18) * 5 * 1024 * 7)) << "held out: the last sequences";
  ASSERT_TRUE(load_video_npy(write("v5.npy", "|u1", {4, 4, 32, 32, 1}), c, &train, &held));
  struct Case {
    std::string path, says;
  };
  const std::vector<Case> bad = {
      {write("f.npy", "<f4", {20, 5, 32, 32}), "dtype '<f4'; video frames must be uint8"},
      {write("r.npy", "|u1", {20, 32, 32}), "is not [N, T, H, W] or [N, T, H, W, C]"},
      {write("s.npy", "|u1", {20, 5, 16, 16}), "needs frames of 32x32"},
      {write("t.npy", "|u1", {20, 3, 32, 32}), "at least 4 frames"},
      {write("c.npy", "|u1", {20, 5, 32, 32, 3}), "with 1 channel(s)"},
      {write("n.npy", "|u1", {3, 5, 32, 32}), "3 sequences; PredNet needs at least 4"},
      {write("x.npy", "|u1", {20, 5, 32, 32}, 100), "truncated"},
  };
  for (const Case& b : bad) {
    const Status st = load_video_npy(b.path, c, &train, &held);
    ASSERT_FALSE(st) << b.path;
    EXPECT_EQ(st.message().rfind(b.path, 0), 0u) << st.message();
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
}

// The paper's network by name (the KITTI configuration of models/prednet.hpp) with the design's batch, and
// the RGB .npy it trains on: [N, T, 128, 160, 3], which the one-channel configurations refuse.
TEST(PredNetTrain, PaperConfigurationIsThePapersNetworkOnRgbFrames) {
  PredNetConfig c, want = prednet_paper();
  ASSERT_TRUE(prednet_config("paper", 2, &c));
  EXPECT_EQ(c.channels(), 3);
  EXPECT_EQ(c.height, 128);
  EXPECT_EQ(c.width, 160);
  EXPECT_EQ(c.stacks, want.stacks);
  EXPECT_EQ(c.stacks, (std::vector<int>{3, 48, 96, 192}));
  EXPECT_EQ(c.nt, 10);
  EXPECT_EQ(c.layer_weights, want.layer_weights);
  EXPECT_EQ(c.batch, 2);
  EXPECT_EQ(c.validate(), "");
  const std::string path = testing::TempDir() + "/rgb.npy";
  const std::vector<uint64_t> shape = {4, 10, 128, 160, 3};
  std::vector<uint8_t> px(4 * 10 * 128 * 160 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 13);
  const std::vector<uint8_t> f = npy_encode("|u1", shape, px.data(), px.size());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size()));
  VideoSet train, held;
  ASSERT_TRUE(load_video_npy(path, c, &train, &held));
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(train.count, 2);
  EXPECT_EQ(held.count, 2);
  PredNetConfig quick;
  ASSERT_TRUE(prednet_config("quick", 2, &quick));
  const Status st = load_video_npy(path, quick, &train, &held);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("needs frames of 64x64 with 1 channel(s)"), std::string::npos) << st.message();
}

// The report's frames: a PNG whose header says its size and colour type (0 gray, 2 RGB) and whose one
// zlib stream inflates to each row's filter byte 0 followed by exactly the pixels given.
TEST(PredNetTrain, PngHoldsExactlyThePixelsGiven) {
  auto be32 = [](const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; };
  for (int channels : {1, 3}) {
    const int cols = 5, rows = 3;
    std::vector<uint8_t> px(size_t(cols) * rows * channels);
    for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(17 * i + 3);
    const std::vector<uint8_t> png = encode_png(cols, rows, channels, px);
    ASSERT_GT(png.size(), size_t(33)) << channels;
    EXPECT_EQ(std::vector<uint8_t>(png.begin(), png.begin() + 8),
              (std::vector<uint8_t>{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}));
    EXPECT_EQ(std::string(png.begin() + 12, png.begin() + 16), "IHDR");
    EXPECT_EQ(be32(&png[16]), uint32_t(cols));
    EXPECT_EQ(be32(&png[20]), uint32_t(rows));
    EXPECT_EQ(png[24], 8) << "bit depth";
    EXPECT_EQ(png[25], channels == 3 ? 2 : 0) << "colour type";
    const size_t idat = 8 + 12 + 13;  // signature, IHDR chunk
    EXPECT_EQ(std::string(png.begin() + ptrdiff_t(idat) + 4, png.begin() + ptrdiff_t(idat) + 8), "IDAT");
    const uint32_t zn = be32(&png[idat]);
    std::vector<uint8_t> raw(size_t(rows) * (size_t(cols) * channels + 1) + 16);
    uLongf rn = uLongf(raw.size());
    ASSERT_EQ(uncompress(raw.data(), &rn, &png[idat + 8], zn), Z_OK);
    raw.resize(rn);
    std::vector<uint8_t> want;
    for (int r = 0; r < rows; ++r) {
      want.push_back(0);
      want.insert(want.end(), px.begin() + r * cols * channels, px.begin() + (r + 1) * cols * channels);
    }
    EXPECT_EQ(raw, want) << channels << " channel(s)";
    EXPECT_EQ(std::string(png.end() - 8, png.end() - 4), "IEND");
  }
  EXPECT_TRUE(encode_png(5, 3, 2, std::vector<uint8_t>(30)).empty()) << "two channels";
  EXPECT_TRUE(encode_png(5, 3, 1, std::vector<uint8_t>(14)).empty()) << "a size that does not match";
}

}  // namespace
}  // namespace detaudit
