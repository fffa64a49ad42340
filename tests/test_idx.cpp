// The IDX reader: the real Fashion-MNIST files (skipped without Debian's dataset-fashion-mnist), raw
// and .gz files written here, and every rejection, each with a message that names the file: bad
// magic, truncation, dims that overflow or exceed the size limit, data beyond the header, trailing
// bytes after a gzip stream, gzip bombs (refused without inflating them), and data sets the model
// cannot use.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "contract/training_run.hpp"
#include "models/idx.hpp"
#include "suites/train_design.hpp"

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

// ---- sizes the header declares -------------------------------------------------------------------

TEST_F(IdxFiles, DimsThatOverflowTheByteCountAreRefused) {
  // 2^24 x 2^24 x 2^16 = 2^64: a 64-bit product without overflow checks wraps to 0 and "matches" an
  // empty data part.
  write_raw(path("wrap"), idx_bytes(0x803, {1u << 24, 1u << 24, 1u << 16}, {}));
  IdxImages im;
  expect_invalid_naming(read_idx_images(path("wrap"), &im), path("wrap"), "overflow the byte count");
  write_gz(path("max.gz"), idx_bytes(0x803, {0xffffffffu, 0xffffffffu, 0xffffffffu}, {}));
  expect_invalid_naming(read_idx_images(path("max.gz"), &im), path("max.gz"), "overflow the byte count");
  write_raw(path("zero"), idx_bytes(0x803, {5, 0, 3}, {}));
  expect_invalid_naming(read_idx_images(path("zero"), &im), path("zero"), "a dimension is 0");
}

TEST_F(IdxFiles, SizesAboveTheLimitAreRefusedFromTheHeader) {
  // 2^21 images of 32 x 32: 2 GiB, twice kMaxIdxDataBytes; the file holds the header only.
  write_raw(path("huge"), idx_bytes(0x803, {1u << 21, 32, 32}, {}));
  IdxImages im;
  expect_invalid_naming(read_idx_images(path("huge"), &im), path("huge"), "more than the limit");
  write_raw(path("huge-labels"), idx_bytes(0x801, {uint32_t(kMaxIdxDataBytes) + 1}, {}));
  IdxLabels lb;
  expect_invalid_naming(read_idx_labels(path("huge-labels"), &lb), path("huge-labels"), "more than the limit");
}

// ---- gzip: trailing bytes, members, trailer -------------------------------------------------------

TEST_F(IdxFiles, TrailingBytesAfterTheGzipStreamAreRefused) {
  write_gz(path("ok.gz"), images());
  const std::vector<uint8_t> gz = read_all(path("ok.gz"));
  for (const std::string& tail : {std::string("garbage"), std::string(4, '\0'), std::string("\x1f")}) {
    std::vector<uint8_t> b = gz;
    b.insert(b.end(), tail.begin(), tail.end());
    write_raw(path("tail.gz"), b);
    IdxImages im;
    expect_invalid_naming(read_idx_images(path("tail.gz"), &im), path("tail.gz"),
                          "trailing data after the gzip stream");
  }
}

TEST_F(IdxFiles, ConcatenatedGzipMembersReadAsOneStream) {
  // `cat a.gz b.gz` is one valid gzip file (gzip -d reads both members).
  const std::vector<uint8_t> b = images();
  write_gz(path("m1.gz"), std::vector<uint8_t>(b.begin(), b.begin() + 30));
  write_gz(path("m2.gz"), std::vector<uint8_t>(b.begin() + 30, b.end()));
  std::vector<uint8_t> cat = read_all(path("m1.gz")), m2 = read_all(path("m2.gz"));
  cat.insert(cat.end(), m2.begin(), m2.end());
  write_raw(path("cat.gz"), cat);
  IdxImages im;
  ASSERT_TRUE(read_idx_images(path("cat.gz"), &im));
  EXPECT_EQ(im.pixels, pixels_);
  // A second member holding more data than the header declares is refused like any extra data.
  write_gz(path("full.gz"), b);
  std::vector<uint8_t> two = read_all(path("full.gz"));
  two.insert(two.end(), m2.begin(), m2.end());
  write_raw(path("two.gz"), two);
  expect_invalid_naming(read_idx_images(path("two.gz"), &im), path("two.gz"), "does not match the header");
}

TEST_F(IdxFiles, DamagedGzipTrailerIsRefused) {
  write_gz(path("ok.gz"), images());
  const std::vector<uint8_t> gz = read_all(path("ok.gz"));
  // The data inflates completely, but the trailer (CRC-32 and length) is cut short: truncated.
  write_raw(path("cut.gz"), std::vector<uint8_t>(gz.begin(), gz.end() - 3));
  IdxImages im;
  expect_invalid_naming(read_idx_images(path("cut.gz"), &im), path("cut.gz"), "truncated gzip stream");
  // A wrong CRC-32: corrupt.
  std::vector<uint8_t> bad = gz;
  bad[bad.size() - 8] ^= 0x55;
  write_raw(path("crc.gz"), bad);
  expect_invalid_naming(read_idx_images(path("crc.gz"), &im), path("crc.gz"), "corrupt gzip stream");
}

// ---- gzip bombs -----------------------------------------------------------------------------------

// A gzip stream of `head` followed by `mib` MiB of zeros, built without deflating all of them: one MiB
// of zeros deflated right after a full flush is a self-contained, byte-aligned run of blocks, so it can
// be repeated; the trailer's CRC-32 and length are then set for the whole expansion.
std::vector<uint8_t> gzip_bomb(const std::vector<uint8_t>& head, size_t mib) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  auto deflate_all = [&](const uint8_t* p, size_t n, int flush) {
    std::vector<uint8_t> out;
    uint8_t buf[1 << 16];
    zs.next_in = const_cast<uint8_t*>(p);
    zs.avail_in = uInt(n);
    do {
      zs.next_out = buf;
      zs.avail_out = sizeof buf;
      deflate(&zs, flush);
      out.insert(out.end(), buf, buf + (sizeof buf - zs.avail_out));
    } while (zs.avail_out == 0);
    return out;
  };
  const std::vector<uint8_t> zeros(size_t(1) << 20, 0);
  std::vector<uint8_t> out = deflate_all(head.data(), head.size(), Z_FULL_FLUSH);
  const std::vector<uint8_t> block = deflate_all(zeros.data(), zeros.size(), Z_FULL_FLUSH);
  for (size_t i = 0; i < mib; ++i) out.insert(out.end(), block.begin(), block.end());
  std::vector<uint8_t> tail = deflate_all(nullptr, 0, Z_FINISH);
  deflateEnd(&zs);
  out.insert(out.end(), tail.begin(), tail.end());
  uLong crc = crc32(0L, head.data(), uInt(head.size()));
  const uLong crc_mib = crc32(0L, zeros.data(), uInt(zeros.size()));
  for (size_t i = 0; i < mib; ++i) crc = crc32_combine(crc, crc_mib, z_off_t(zeros.size()));
  const uint64_t len = head.size() + (uint64_t(mib) << 20);
  uint8_t* t = out.data() + out.size() - 8;
  for (int i = 0; i < 4; ++i) t[i] = uint8_t(crc >> (8 * i)), t[4 + i] = uint8_t(len >> (8 * i));
  return out;
}

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(IdxGzipBomb, TheBombBuilderMakesValidGzip) {
  // The construction the bomb tests rely on, checked small with zlib itself: 3 MiB of zeros after a
  // header, correct CRC and length (gzread fails on a bad trailer).
  const std::vector<uint8_t> head = idx_bytes(0x803, {3 * 1024, 32, 32}, {});
  const std::vector<uint8_t> bomb = gzip_bomb(head, 3);
  const std::string p = (fs::temp_directory_path() / ("detaudit_bomb_" + std::to_string(::getpid()) + ".gz")).string();
  write_raw(p, bomb);
  gzFile f = gzopen(p.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<uint8_t> all((3u << 20) + 64);
  const int n = gzread(f, all.data(), unsigned(all.size()));
  int err = Z_OK;
  gzerror(f, &err);
  gzclose(f);
  EXPECT_EQ(err, Z_OK);
  ASSERT_EQ(n, int(head.size() + (3u << 20)));
  EXPECT_TRUE(std::equal(head.begin(), head.end(), all.begin()));
  EXPECT_EQ(std::count(all.begin() + long(head.size()), all.begin() + n, 0), long(3u << 20));
  // ...and the reader accepts it: 3072 images of 32 x 32 zeros.
  IdxImages im;
  Status st = read_idx_images(p, &im);
  fs::remove(p);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(im.count, 3 * 1024);
}

TEST(IdxGzipBomb, FewImagesDeclaredManyGigabytesInflatedIsRefusedAfterTheDeclaredBytes) {
  // A 4 MB file whose header declares 10 images of 28 x 28 (7840 bytes) and whose stream expands to
  // 4 GiB: refused after one byte beyond the 7840, without inflating (or allocating) the rest.
  const std::vector<uint8_t> bomb = gzip_bomb(idx_bytes(0x803, {10, 28, 28}, {}), 4096);
  ASSERT_LT(bomb.size(), size_t(8) << 20);
  const long before = max_rss_kib();
  IdxImages im;
  Status st = parse_idx_images("bomb.gz", bomb.data(), bomb.size(), &im);
  expect_invalid_naming(st, "bomb.gz", "does not match the header: more than the 7840 data bytes");
  EXPECT_LT(max_rss_kib() - before, 256 * 1024) << "KiB of peak memory added while refusing the bomb";
}

TEST(IdxGzipBomb, HonestHeaderAboveTheLimitIsRefusedBeforeInflating) {
  // Header and stream agree: 2^21 images of 32 x 32, 2 GiB of zeros in a 2 MB file. The header alone
  // decides: nothing is inflated past it.
  const std::vector<uint8_t> bomb = gzip_bomb(idx_bytes(0x803, {1u << 21, 32, 32}, {}), 2048);
  const long before = max_rss_kib();
  IdxImages im;
  Status st = parse_idx_images("honest.gz", bomb.data(), bomb.size(), &im);
  expect_invalid_naming(st, "honest.gz", "more than the limit of 1073741824");
  EXPECT_LT(max_rss_kib() - before, 256 * 1024) << "KiB of peak memory added while refusing the bomb";
}

// ---- parsing from memory (the fuzzing entry points) -----------------------------------------------

TEST_F(IdxFiles, MemoryParsingMatchesFilesAndRefusesEveryDamagedPrefix) {
  write_gz(path("i.gz"), images());
  write_gz(path("l.gz"), labels());
  const std::vector<uint8_t> raw = images(), gz = read_all(path("i.gz")), lraw = labels(), lgz = read_all(path("l.gz"));
  for (const std::vector<uint8_t>* b : {&raw, &gz}) {
    IdxImages im;
    ASSERT_TRUE(parse_idx_images("mem", b->data(), b->size(), &im));
    EXPECT_EQ(im.count, 5);
    EXPECT_EQ(im.pixels, pixels_);
    // Every proper prefix is refused, with a status, never a crash.
    for (size_t n = 0; n < b->size(); ++n) {
      Status st = parse_idx_images("mem", b->data(), n, &im);
      EXPECT_EQ(st.code(), Status::Code::kInvalid) << n << ": " << st.message();
    }
    // Every single-byte change is refused or, where it only changes a pixel of raw data, read.
    for (size_t i = 0; i < b->size(); ++i) {
      std::vector<uint8_t> m = *b;
      m[i] ^= 0xa5;
      Status st = parse_idx_images("mem", m.data(), m.size(), &im);
      if (b == &raw && i >= 16) {
        EXPECT_TRUE(st) << i << ": " << st.message();
      } else if (!st) {
        EXPECT_EQ(st.code(), Status::Code::kInvalid) << i << ": " << st.message();
      }
    }
  }
  for (const std::vector<uint8_t>* b : {&lraw, &lgz}) {
    IdxLabels lb;
    ASSERT_TRUE(parse_idx_labels("mem", b->data(), b->size(), &lb));
    EXPECT_EQ(lb.labels, labels_);
  }
  IdxImages im;
  expect_invalid_naming(parse_idx_images("empty", nullptr, 0, &im), "empty", "truncated");
}

// ---- what the model can use -----------------------------------------------------------------------

TEST(IdxDataset, ModelNeedsItsImageSizeAndOneBatch) {
  Dataset d;
  d.images_path = "/data/train-images-idx3-ubyte";
  d.count = 100, d.rows = 27, d.cols = 27;
  Status st = check_dataset_for_model(d, "autoencoder", 28, 28, 64);
  expect_invalid_naming(st, d.images_path, "images are 27x27, the autoencoder needs 28x28");
  d.rows = d.cols = 28;
  d.count = 10;
  st = check_dataset_for_model(d, "autoencoder", 28, 28, 64);
  expect_invalid_naming(st, d.images_path, "10 images, fewer than one batch of 64");
  d.count = 64;
  EXPECT_TRUE(check_dataset_for_model(d, "autoencoder", 28, 28, 64));
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
  // The fingerprint by which a results.json's training set is known to hold 60,000 images.
  EXPECT_EQ(dataset_fingerprint(train), kFashionMnistTrainFingerprint);
  EXPECT_EQ(uint64_t(train.count), kFashionMnistTrainExamples);
}

}  // namespace
}  // namespace detaudit
