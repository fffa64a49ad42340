// The IDX reader: the real Fashion-MNIST files (skipped without Debian's dataset-fashion-mnist), raw
// and .gz files written here, and every rejection, each with a message that names the file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/idx.hpp"

namespace detaudit {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_raw(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

void write_gz(const std::string& path, const std::vector<uint8_t>& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, b.data(), unsigned(b.size())), int(b.size()));
  gzclose(f);
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class IdxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("detaudit_idx_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (int i = 0; i < 5 * 4 * 3; ++i) pixels_.push_back(uint8_t(i * 7));
    labels_ = {1, 2, 3, 4, 5};
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<uint8_t> images() const { return idx_bytes(0x803, {5, 4, 3}, pixels_); }
  std::vector<uint8_t> labels() const { return idx_bytes(0x801, {5}, labels_); }

  fs::path dir_;
  std::vector<uint8_t> pixels_, labels_;
};

void expect_invalid_naming(const Status& st, const std::string& file, const std::string& words) {
  EXPECT_EQ(st.code(), Status::Code::kInvalid) << st.message();
  EXPECT_NE(st.message().find(file), std::string::npos) << "message must name the file: " << st.message();
  EXPECT_NE(st.message().find(words), std::string::npos) << "message must say '" << words << "': " << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << "one line";
}

TEST_F(IdxFiles, RawAndGzipReadBack) {
  write_raw(path("train-images-idx3-ubyte"), images());
  write_gz(path("train-labels-idx1-ubyte.gz"), labels());
  write_gz(path("imgs.gz"), images());
  IdxImages a, b;
  ASSERT_TRUE(read_idx_images(path("train-images-idx3-ubyte"), &a));
  ASSERT_TRUE(read_idx_images(path("imgs.gz"), &b));
  for (const IdxImages* im : {&a, &b}) {
    EXPECT_EQ(im->count, 5);
    EXPECT_EQ(im->rows, 4);
    EXPECT_EQ(im->cols, 3);
    EXPECT_EQ(im->pixels, pixels_);
  }
  Dataset d;
  ASSERT_TRUE(load_dataset(dir_.string(), "train", &d));
  EXPECT_EQ(d.count, 5);
  EXPECT_EQ(d.labels, labels_);
  std::vector<float> img(12);
  d.image(1, img.data());
  EXPECT_FLOAT_EQ(img[0], float(uint8_t(12 * 7)) / 255.0f);
}

TEST_F(IdxFiles, BadMagic) {
  write_raw(path("x"), idx_bytes(0x801, {5, 4, 3}, pixels_));
  IdxImages im;
  expect_invalid_naming(read_idx_images(path("x"), &im), path("x"), "bad magic");
  IdxLabels lb;
  write_gz(path("l.gz"), images());
  expect_invalid_naming(read_idx_labels(path("l.gz"), &lb), path("l.gz"), "bad magic");
}

TEST_F(IdxFiles, TruncatedRaw) {
  std::vector<uint8_t> b = images();
  b.resize(b.size() - 7);
  write_raw(path("t"), b);
  IdxImages im;
  expect_invalid_naming(read_idx_images(path("t"), &im), path("t"), "truncated");
  write_raw(path("h"), std::vector<uint8_t>(b.begin(), b.begin() + 9));  // inside the header
  expect_invalid_naming(read_idx_images(path("h"), &im), path("h"), "truncated");
}

TEST_F(IdxFiles, TruncatedGzip) {
  std::vector<uint8_t> big = idx_bytes(0x803, {50, 28, 28}, std::vector<uint8_t>(50 * 28 * 28, 0));
  for (size_t i = 16; i < big.size(); ++i) big[i] = uint8_t((i * 2654435761u) >> 13);  // incompressible-ish
  write_gz(path("full.gz"), big);
  std::vector<uint8_t> gz = read_all(path("full.gz"));
  gz.resize(gz.size() / 2);
  write_raw(path("cut.gz"), gz);
  IdxImages im;
  Status st = read_idx_images(path("cut.gz"), &im);
  EXPECT_EQ(st.code(), Status::Code::kInvalid) << st.message();
  EXPECT_NE(st.message().find(path("cut.gz")), std::string::npos) << st.message();
  EXPECT_TRUE(st.message().find("truncated") != std::string::npos || st.message().find("corrupt") != std::string::npos)
      << st.message();
}

TEST_F(IdxFiles, DimsDoNotMatchSize) {
  write_raw(path("d"), idx_bytes(0x803, {3, 4, 3}, pixels_));  // header: 3 images, data: 5
  IdxImages im;
  expect_invalid_naming(read_idx_images(path("d"), &im), path("d"), "does not match");
  write_gz(path("d.gz"), idx_bytes(0x803, {9, 4, 3}, pixels_));  // header: 9 images, data: 5
  expect_invalid_naming(read_idx_images(path("d.gz"), &im), path("d.gz"), "truncated");
}

TEST_F(IdxFiles, CountMismatch) {
  write_raw(path("train-images-idx3-ubyte"), images());
  write_raw(path("train-labels-idx1-ubyte"), idx_bytes(0x801, {4}, {1, 2, 3, 4}));
  Dataset d;
  Status st = load_dataset(dir_.string(), "train", &d);
  expect_invalid_naming(st, path("train-labels-idx1-ubyte"), "4 labels");
  EXPECT_NE(st.message().find("5 images"), std::string::npos) << st.message();
}

TEST_F(IdxFiles, MissingFilesSayWhatToDo) {
  Dataset d;
  Status st = load_dataset(path("nope"), "train", &d);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_NE(st.message().find("dataset-fashion-mnist"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--data"), std::string::npos) << st.message();
  write_raw(path("train-images-idx3-ubyte"), images());
  st = load_dataset(dir_.string(), "train", &d);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_NE(st.message().find("train-labels-idx1-ubyte"), std::string::npos) << st.message();
}

TEST(IdxFashionMnist, RealFiles) {
  if (!fs::is_directory(kDefaultDatasetDir)) GTEST_SKIP() << kDefaultDatasetDir << " missing: install dataset-fashion-mnist";
  Dataset train, test;
  Status st = load_dataset("", "train", &train);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(train.rows, 28);
  EXPECT_EQ(train.cols, 28);
  ASSERT_EQ(train.labels.size(), 60000u);
  for (uint8_t l : train.labels) ASSERT_LT(l, 10);
  st = load_dataset(kDefaultDatasetDir, "t10k", &test);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(test.count, 10000);
  // Fashion-MNIST's first training label is 9 (ankle boot).
  EXPECT_EQ(train.labels[0], 9);
}

}  // namespace
}  // namespace detaudit
