#include "models/idx.hpp"

#include <zlib.h>

#include <cstdio>
#include <filesystem>

namespace detaudit {

namespace fs = std::filesystem;

namespace {

// A gzip or raw file read through zlib, closed on scope exit.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {}
  ~GzFile() {
    if (f_) gzclose(f_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  bool ok() const { return f_ != nullptr; }

  // Reads up to n bytes; *got = bytes read. A decompression error (a corrupt or truncated gzip
  // stream) is an invalid status.
  Status read(void* dst, size_t n, size_t* got) {
    *got = 0;
    auto* p = static_cast<uint8_t*>(dst);
    while (*got < n) {
      const unsigned want = unsigned(std::min<size_t>(n - *got, size_t(1) << 30));
      const int r = gzread(f_, p + *got, want);
      if (r < 0) return stream_error();
      if (r == 0) break;
      *got += size_t(r);
    }
    // gzread returns a short count at a truncated gzip stream; gzerror tells it from a clean end.
    int err = Z_OK;
    gzerror(f_, &err);
    if (err != Z_OK && err != Z_STREAM_END) return stream_error();
    return Status::ok();
  }

 private:
  Status stream_error() {
    int err = Z_OK;
    const char* msg = gzerror(f_, &err);
    std::string m = msg && *msg ? msg : "read error";
    return Status::invalid(path_ + ": corrupt or truncated (" + m + ")");
  }
  std::string path_;
  gzFile f_;
};

uint32_t be32(const uint8_t* b) { return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3]; }

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Reads the header (magic + dims) and exactly prod(dims) data bytes; fails on anything else.
Status read_idx(const std::string& path, uint32_t magic, int ndims, const char* kind, std::vector<uint32_t>* dims,
                std::vector<uint8_t>* data) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::unavailable(path + ": no such file");
  GzFile f(path);
  if (!f.ok()) return Status::invalid(path + ": cannot open");
  uint8_t head[4 + 4 * 3];
  const size_t head_bytes = 4 + 4 * size_t(ndims);
  size_t got = 0;
  DETAUDIT_RETURN_IF_ERROR(f.read(head, head_bytes, &got));
  if (got < 4) return Status::invalid(path + ": truncated: " + std::to_string(got) + " bytes, too short for an IDX header");
  const uint32_t m = be32(head);
  if (m != magic)
    return Status::invalid(path + ": bad magic " + hex32(m) + ", expected " + hex32(magic) + " (IDX " + kind + ")");
  if (got < head_bytes) return Status::invalid(path + ": truncated inside the IDX header");
  dims->clear();
  uint64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    const uint32_t d = be32(head + 4 + 4 * i);
    if (d == 0 || d > (1u << 24)) return Status::invalid(path + ": implausible dimension " + std::to_string(d));
    dims->push_back(d);
    total *= d;
  }
  if (total > (uint64_t(1) << 34)) return Status::invalid(path + ": header claims " + std::to_string(total) + " bytes");
  // Grow as data arrives: a corrupt header cannot make us allocate what the file does not hold.
  data->clear();
  constexpr size_t kChunk = size_t(1) << 22;
  while (data->size() < total) {
    const size_t want = std::min<size_t>(kChunk, size_t(total) - data->size()), at = data->size();
    data->resize(at + want);
    DETAUDIT_RETURN_IF_ERROR(f.read(data->data() + at, want, &got));
    data->resize(at + got);
    if (got < want)
      return Status::invalid(path + ": truncated: the header says " + std::to_string(total) + " data bytes, the file holds " +
                             std::to_string(data->size()));
  }
  uint8_t extra[256];
  DETAUDIT_RETURN_IF_ERROR(f.read(extra, sizeof extra, &got));
  if (got > 0)
    return Status::invalid(path + ": size does not match the header: more than " + std::to_string(total) +
                           " data bytes (dims in the header are wrong, or the file is not IDX)");
  return Status::ok();
}

}  // namespace

Status read_idx_images(const std::string& path, IdxImages* out) {
  std::vector<uint32_t> dims;
  DETAUDIT_RETURN_IF_ERROR(read_idx(path, 0x00000803u, 3, "ubyte images, 3 dims", &dims, &out->pixels));
  out->count = int(dims[0]), out->rows = int(dims[1]), out->cols = int(dims[2]);
  return Status::ok();
}

Status read_idx_labels(const std::string& path, IdxLabels* out) {
  std::vector<uint32_t> dims;
  DETAUDIT_RETURN_IF_ERROR(read_idx(path, 0x00000801u, 1, "ubyte labels, 1 dim", &dims, &out->labels));
  out->count = int(dims[0]);
  return Status::ok();
}

void Dataset::image(size_t i, float* out) const {
  const size_t n = pixels_per_image();
  const uint8_t* p = pixels.data() + i * n;
  for (size_t k = 0; k < n; ++k) out[k] = float(p[k]) / 255.0f;
}

Status load_dataset(const std::string& dir_in, const std::string& split, Dataset* out) {
  const std::string dir = dir_in.empty() ? kDefaultDatasetDir : dir_in;
  const std::string hint = " (install Debian's dataset-fashion-mnist, or pass --data DIR with " + split +
                           "-images-idx3-ubyte and " + split + "-labels-idx1-ubyte, raw or .gz)";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::unavailable("dataset: " + dir + " is not a directory" + hint);
  auto find = [&](const std::string& base, std::string* path) {
    for (const std::string& name : {base, base + ".gz"}) {
      const std::string p = (fs::path(dir) / name).string();
      if (fs::is_regular_file(p, ec)) return *path = p, true;
    }
    return false;
  };
  Dataset d;
  d.dir = dir;
  if (!find(split + "-images-idx3-ubyte", &d.images_path))
    return Status::unavailable("dataset: no " + split + "-images-idx3-ubyte[.gz] in " + dir + hint);
  if (!find(split + "-labels-idx1-ubyte", &d.labels_path))
    return Status::unavailable("dataset: no " + split + "-labels-idx1-ubyte[.gz] in " + dir + hint);
  IdxImages im;
  IdxLabels lb;
  DETAUDIT_RETURN_IF_ERROR(read_idx_images(d.images_path, &im));
  DETAUDIT_RETURN_IF_ERROR(read_idx_labels(d.labels_path, &lb));
  if (im.count != lb.count)
    return Status::invalid(d.labels_path + ": " + std::to_string(lb.count) + " labels, but " + d.images_path + " has " +
                           std::to_string(im.count) + " images");
  d.count = im.count, d.rows = im.rows, d.cols = im.cols;
  d.pixels = std::move(im.pixels);
  d.labels = std::move(lb.labels);
  *out = std::move(d);
  return Status::ok();
}

}  // namespace detaudit
