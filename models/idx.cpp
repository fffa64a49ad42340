#include "models/idx.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "kernels/input_file.hpp"

namespace detaudit {

namespace fs = std::filesystem;

namespace {

// Where the bytes of one IDX file come from (compressed or not).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n bytes into dst; *got == 0 only at the end of the source.
  virtual Status read_some(uint8_t* dst, size_t n, size_t* got) = 0;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(const uint8_t* p, size_t n) : p_(p), left_(n) {}
  Status read_some(uint8_t* dst, size_t n, size_t* got) override {
    *got = std::min(n, left_);
    if (*got) std::memcpy(dst, p_, *got);
    p_ += *got, left_ -= *got;
    return Status::ok();
  }

 private:
  const uint8_t* p_;
  size_t left_;
};

class FileSource : public ByteSource {
 public:
  // Opened by the one input path (a FIFO or device is refused, not waited on); status() says why not.
  explicit FileSource(const std::string& path) : path_(path), f_(nullptr) {
    int fd = -1;
    status_ = open_regular_input(path, "IDX file", &fd);
    if (status_.is_ok() && !(f_ = ::fdopen(fd, "rb"))) {
      ::close(fd);
      status_ = Status::invalid(path + ": cannot open: " + std::strerror(errno));
    }
  }
  ~FileSource() override {
    if (f_) std::fclose(f_);
  }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  bool ok() const { return f_ != nullptr; }
  const Status& status() const { return status_; }
  Status read_some(uint8_t* dst, size_t n, size_t* got) override {
    *got = std::fread(dst, 1, n, f_);
    if (*got == 0 && std::ferror(f_)) return Status::invalid(path_ + ": read error: " + std::strerror(errno));
    return Status::ok();
  }

 private:
  std::string path_;
  FILE* f_;
  Status status_;
};

// The IDX bytes of a source: passed through when raw, inflated when the source starts with gzip's
// magic (1f 8b). Concatenated gzip members read as one stream, as `gzip -d` reads them; anything else
// after the last member is an error. Nothing is inflated beyond what read() asks for.
class IdxBytes {
 public:
  IdxBytes(std::string name, ByteSource* src) : name_(std::move(name)), src_(src), in_(kInBytes) {}
  ~IdxBytes() {
    if (gzip_) inflateEnd(&zs_);
  }
  IdxBytes(const IdxBytes&) = delete;
  IdxBytes& operator=(const IdxBytes&) = delete;

  bool is_gzip() const { return gzip_; }

  // Reads until n bytes or the end; *got < n only at the end.
  Status read(uint8_t* dst, size_t n, size_t* got) {
    *got = 0;
    if (!started_) DETAUDIT_RETURN_IF_ERROR(start());
    return gzip_ ? inflate_some(dst, n, got) : copy_some(dst, n, got);
  }

 private:
  static constexpr size_t kInBytes = size_t(1) << 16;

  size_t avail() const { return len_ - pos_; }

  // Moves what is left to the front of the buffer and reads more behind it.
  Status fill() {
    if (pos_ > 0) {
      std::memmove(in_.data(), in_.data() + pos_, avail());
      len_ -= pos_, pos_ = 0;
    }
    size_t g = 0;
    DETAUDIT_RETURN_IF_ERROR(src_->read_some(in_.data() + len_, in_.size() - len_, &g));
    if (g == 0) src_end_ = true;
    len_ += g;
    return Status::ok();
  }

  Status start() {
    started_ = true;
    while (avail() < 2 && !src_end_) DETAUDIT_RETURN_IF_ERROR(fill());
    if (avail() >= 2 && in_[pos_] == 0x1f && in_[pos_ + 1] == 0x8b) {
      zs_ = z_stream{};
      if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) return Status::error(name_ + ": zlib: cannot start inflate");
      gzip_ = true;
    }
    return Status::ok();
  }

  Status copy_some(uint8_t* dst, size_t n, size_t* got) {
    while (*got < n) {
      if (avail() > 0) {
        const size_t k = std::min(n - *got, avail());
        std::memcpy(dst + *got, in_.data() + pos_, k);
        pos_ += k, *got += k;
        continue;
      }
      if (src_end_) break;
      size_t g = 0;
      DETAUDIT_RETURN_IF_ERROR(src_->read_some(dst + *got, n - *got, &g));
      if (g == 0) src_end_ = true;
      *got += g;
    }
    return Status::ok();
  }

  Status inflate_some(uint8_t* dst, size_t n, size_t* got) {
    while (*got < n && !end_) {
      if (member_end_) {
        // The end of a gzip member: the input ends here, or another member follows.
        while (avail() < 2 && !src_end_) DETAUDIT_RETURN_IF_ERROR(fill());
        if (avail() == 0) {
          end_ = true;
          break;
        }
        if (avail() < 2 || in_[pos_] != 0x1f || in_[pos_ + 1] != 0x8b)
          return Status::invalid(name_ + ": trailing data after the gzip stream (not another gzip member)");
        inflateReset(&zs_);
        member_end_ = false;
      }
      if (avail() == 0 && !src_end_) {
        DETAUDIT_RETURN_IF_ERROR(fill());
        continue;
      }
      const size_t want = std::min(n - *got, size_t(1) << 30);
      zs_.next_in = in_.data() + pos_;
      zs_.avail_in = uInt(avail());
      zs_.next_out = dst + *got;
      zs_.avail_out = uInt(want);
      const int r = inflate(&zs_, Z_NO_FLUSH);
      const size_t produced = want - zs_.avail_out, consumed = avail() - zs_.avail_in;
      *got += produced;
      pos_ += consumed;
      if (r == Z_STREAM_END) {
        member_end_ = true;
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        return Status::invalid(name_ + ": corrupt gzip stream (" +
                               (zs_.msg ? std::string(zs_.msg) : "inflate error " + std::to_string(r)) + ")");
      } else if (produced == 0 && consumed == 0) {
        if (avail() == 0 && src_end_)
          return Status::invalid(name_ + ": truncated gzip stream (it ends before its trailer)");
        if (avail() > 0) return Status::invalid(name_ + ": corrupt gzip stream (inflate makes no progress)");
      }
    }
    return Status::ok();
  }

  std::string name_;
  ByteSource* src_;
  std::vector<uint8_t> in_;
  size_t pos_ = 0, len_ = 0;
  bool started_ = false, gzip_ = false, src_end_ = false, member_end_ = false, end_ = false;
  z_stream zs_{};
};

uint32_t be32(const uint8_t* b) { return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3]; }

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string dims_text(const std::vector<uint32_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

// The header: magic, then ndims big-endian dimensions, each at least 1, whose product (the data
// bytes) neither overflows nor exceeds kMaxIdxDataBytes.
Status read_header(IdxBytes& in, const std::string& name, uint32_t magic, int ndims, const char* kind,
                   std::vector<uint32_t>* dims, uint64_t* total) {
  uint8_t head[4 + 4 * 3];
  const size_t head_bytes = 4 + 4 * size_t(ndims);
  size_t got = 0;
  DETAUDIT_RETURN_IF_ERROR(in.read(head, head_bytes, &got));
  if (got < 4)
    return Status::invalid(name + ": truncated: " + std::to_string(got) + " bytes, too short for an IDX header");
  const uint32_t m = be32(head);
  if (m != magic)
    return Status::invalid(name + ": bad magic " + hex32(m) + ", expected " + hex32(magic) + " (IDX " + kind + ")");
  if (got < head_bytes) return Status::invalid(name + ": truncated inside the IDX header");
  dims->clear();
  for (int i = 0; i < ndims; ++i) dims->push_back(be32(head + 4 + 4 * i));
  uint64_t t = 1;
  bool overflow = false;
  for (uint32_t d : *dims) {
    if (d == 0) return Status::invalid(name + ": header dimensions " + dims_text(*dims) + ": a dimension is 0");
    overflow |= __builtin_mul_overflow(t, uint64_t(d), &t);
  }
  if (overflow) return Status::invalid(name + ": header dimensions " + dims_text(*dims) + " overflow the byte count");
  if (t > kMaxIdxDataBytes)
    return Status::invalid(name + ": header dimensions " + dims_text(*dims) + " declare " + std::to_string(t) +
                           " data bytes, more than the limit of " + std::to_string(kMaxIdxDataBytes) + " (1 GiB)");
  *total = t;
  return Status::ok();
}

// Reads the header and exactly prod(dims) data bytes, then requires the end of the file or stream.
Status parse_idx(const std::string& name, ByteSource* src, uint32_t magic, int ndims, const char* kind,
                 std::vector<uint32_t>* dims, std::vector<uint8_t>* data) {
  IdxBytes in(name, src);
  uint64_t total = 0;
  DETAUDIT_RETURN_IF_ERROR(read_header(in, name, magic, ndims, kind, dims, &total));
  // Grow as data arrives: a header that lies cannot make us allocate what the file does not hold.
  data->clear();
  constexpr size_t kChunk = size_t(1) << 22;
  size_t got = 0;
  while (data->size() < total) {
    const size_t want = std::min<size_t>(kChunk, size_t(total) - data->size()), at = data->size();
    data->resize(at + want);
    DETAUDIT_RETURN_IF_ERROR(in.read(data->data() + at, want, &got));
    data->resize(at + got);
    if (got < want)
      return Status::invalid(name + ": truncated: the header (" + dims_text(*dims) + ") says " + std::to_string(total) +
                             " data bytes, the " + (in.is_gzip() ? "gzip stream" : "file") + " holds " +
                             std::to_string(data->size()));
  }
  // One byte more, never more than that: the data must end where the header says.
  uint8_t extra = 0;
  DETAUDIT_RETURN_IF_ERROR(in.read(&extra, 1, &got));
  if (got > 0)
    return Status::invalid(name + ": size does not match the header: more than the " + std::to_string(total) +
                           " data bytes of " + dims_text(*dims) +
                           " (dims in the header are wrong, or the file is not IDX)");
  return Status::ok();
}

Status parse_file(const std::string& path, uint32_t magic, int ndims, const char* kind, std::vector<uint32_t>* dims,
                  std::vector<uint8_t>* data) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::unavailable(path + ": no such file");
  FileSource f(path);
  if (!f.ok()) return f.status();
  return parse_idx(path, &f, magic, ndims, kind, dims, data);
}

constexpr uint32_t kImagesMagic = 0x00000803u, kLabelsMagic = 0x00000801u;
constexpr const char* kImagesKind = "ubyte images, 3 dims";
constexpr const char* kLabelsKind = "ubyte labels, 1 dim";

// Every dimension is at most kMaxIdxDataBytes (2^30) by read_header, so each fits an int.
void set_images(const std::vector<uint32_t>& dims, IdxImages* out) {
  out->count = int(dims[0]), out->rows = int(dims[1]), out->cols = int(dims[2]);
}

}  // namespace

Status read_idx_images(const std::string& path, IdxImages* out) {
  std::vector<uint32_t> dims;
  DETAUDIT_RETURN_IF_ERROR(parse_file(path, kImagesMagic, 3, kImagesKind, &dims, &out->pixels));
  set_images(dims, out);
  return Status::ok();
}

Status read_idx_labels(const std::string& path, IdxLabels* out) {
  std::vector<uint32_t> dims;
  DETAUDIT_RETURN_IF_ERROR(parse_file(path, kLabelsMagic, 1, kLabelsKind, &dims, &out->labels));
  out->count = int(dims[0]);
  return Status::ok();
}

Status parse_idx_images(const std::string& name, const uint8_t* data, size_t n, IdxImages* out) {
  MemorySource src(data, n);
  std::vector<uint32_t> dims;
  DETAUDIT_RETURN_IF_ERROR(parse_idx(name, &src, kImagesMagic, 3, kImagesKind, &dims, &out->pixels));
  set_images(dims, out);
  return Status::ok();
}

Status parse_idx_labels(const std::string& name, const uint8_t* data, size_t n, IdxLabels* out) {
  MemorySource src(data, n);
  std::vector<uint32_t> dims;
  DETAUDIT_RETURN_IF_ERROR(parse_idx(name, &src, kLabelsMagic, 1, kLabelsKind, &dims, &out->labels));
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

Status check_dataset_for_model(const Dataset& d, const std::string& model, int rows, int cols, int min_count) {
  if (d.rows != rows || d.cols != cols)
    return Status::invalid(d.images_path + ": images are " + std::to_string(d.rows) + "x" + std::to_string(d.cols) +
                           ", the " + model + " needs " + std::to_string(rows) + "x" + std::to_string(cols));
  if (d.count < min_count)
    return Status::invalid(d.images_path + ": " + std::to_string(d.count) + " images, fewer than one batch of " +
                           std::to_string(min_count) + " for the " + model);
  return Status::ok();
}

}  // namespace detaudit
