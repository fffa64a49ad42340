// IDX files (the MNIST format: big-endian header, unsigned bytes), raw or gzip-compressed, and the
// datasets made of them. Strict: a bad magic number, a truncated file or gzip stream, a size that
// does not match the header, or image and label counts that differ give Status::invalid with one
// line naming the file and the problem.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/status.hpp"

namespace detaudit {

// Debian's dataset-fashion-mnist.
inline constexpr const char* kDefaultDatasetDir = "/usr/share/datasets/fashion-mnist";

struct IdxImages {
  int count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols
};
struct IdxLabels {
  int count = 0;
  std::vector<uint8_t> labels;
};

// Magic 0x00000803 (ubyte, 3 dims). A path ending in .gz is read through zlib; zlib also reads a
// raw file transparently, so either works with either name.
Status read_idx_images(const std::string& path, IdxImages* out);
// Magic 0x00000801 (ubyte, 1 dim).
Status read_idx_labels(const std::string& path, IdxLabels* out);

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

}  // namespace detaudit
