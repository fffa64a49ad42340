// IDX files (the MNIST format: big-endian header, unsigned bytes), raw or gzip-compressed, and the
// datasets made of them. Strict: a bad magic number, dimensions that are zero, overflow or exceed
// kMaxIdxDataBytes, a truncated or corrupt file or gzip stream, data beyond what the header declares
// (trailing bytes, or anything after the gzip stream other than another gzip member), and image and
// label counts that differ give Status::invalid with one line naming the file and the problem.
//
// Reading is bounded by the header: the 8- or 16-byte header is read first, the data size is computed
// with overflow checks and refused above kMaxIdxDataBytes, then exactly that many bytes are read and
// the end of the file or stream is required, so at most declared + 1 bytes are ever decompressed (a
// small .gz that expands to gigabytes is refused after the first byte too many). Memory grows with the
// bytes that actually arrive, never with what a header claims.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/status.hpp"

namespace detaudit {

// Debian's dataset-fashion-mnist.
inline constexpr const char* kDefaultDatasetDir = "/usr/share/datasets/fashion-mnist";
// The largest data part of one IDX file (1 GiB: 1.3 M images of 28 x 28; Fashion-MNIST holds 47 MB).
inline constexpr uint64_t kMaxIdxDataBytes = uint64_t(1) << 30;

struct IdxImages {
  int count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols
};
struct IdxLabels {
  int count = 0;
  std::vector<uint8_t> labels;
};

// Magic 0x00000803 (ubyte, 3 dims). Gzip is recognised by its magic bytes (1f 8b), not by the name,
// so a raw file named .gz and a gzip file without .gz both read.
Status read_idx_images(const std::string& path, IdxImages* out);
// Magic 0x00000801 (ubyte, 1 dim).
Status read_idx_labels(const std::string& path, IdxLabels* out);

// The same from memory (raw or gzip, by magic); `name` stands for the file in messages.
// Fuzz these two: they take any bytes, never allocate more than the bytes that arrive, and return a
// status (no exceptions, no exit).
Status parse_idx_images(const std::string& name, const uint8_t* data, size_t n, IdxImages* out);
Status parse_idx_labels(const std::string& name, const uint8_t* data, size_t n, IdxLabels* out);

struct Dataset {
  std::string dir, images_path, labels_path;
  int count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols
  std::vector<uint8_t> labels;
  size_t pixels_per_image() const { return size_t(rows) * cols; }
  // Image i as floats in [0, 1] (pixel / 255).
  void image(size_t i, float* out) const;
};

// Loads `split` ("train" or "t10k") from dir: <split>-images-idx3-ubyte and <split>-labels-idx1-ubyte,
// each raw or .gz (the raw file wins when both exist). dir empty: kDefaultDatasetDir. A missing dir
// or file: Status::unavailable saying to install dataset-fashion-mnist or pass --data DIR.
Status load_dataset(const std::string& dir, const std::string& split, Dataset* out);

// Whether `model` can train on d: images of exactly rows x cols and at least min_count of them (one
// batch). Status::invalid naming d.images_path and the problem otherwise, e.g.
// ".../train-images-idx3-ubyte: images are 27x27, the autoencoder needs 28x28".
Status check_dataset_for_model(const Dataset& d, const std::string& model, int rows, int cols, int min_count);

}  // namespace detaudit
