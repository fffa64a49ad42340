#include "kernels/npy.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "kernels/input_file.hpp"

namespace detaudit {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr size_t kAlign = 64;  // numpy >= 1.14 pads the header so the data starts at a multiple of 64

// Text from a header in a message: one line, at most 40 characters.
std::string printable(const std::string& s) {
  std::string o;
  for (char c : s.substr(0, 40)) o += (c >= 0x20 && c < 0x7f) ? c : '?';
  return o;
}

// A cursor over the header's dict literal. Every failure names the byte offset within the header.
class HeaderParser {
 public:
  HeaderParser(const std::string& text) : s_(text) {}

  Status parse(std::string* descr, bool* fortran, std::vector<uint64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    ws();
    if (!eat('{')) return fail("expected '{'");
    for (;;) {
      ws();
      if (eat('}')) break;
      std::string key;
      if (!string_literal(&key)) return fail("expected a quoted key or '}'");
      ws();
      if (!eat(':')) return fail("expected ':' after '" + printable(key) + "'");
      ws();
      bool* seen = key == "descr" ? &have_descr : key == "fortran_order" ? &have_fortran : key == "shape" ? &have_shape
                                                                                                         : nullptr;
      if (!seen) return fail("unknown key '" + printable(key) + "' (an .npy header holds descr, fortran_order, shape)");
      if (*seen) return fail("key '" + printable(key) + "' given twice");
      *seen = true;
      if (key == "descr" && !string_literal(descr)) return fail("descr must be a quoted string");
      if (key == "fortran_order" && !boolean(fortran)) return fail("fortran_order must be True or False");
      if (key == "shape") DETAUDIT_RETURN_IF_ERROR(tuple(shape));
      ws();
      if (eat(',')) continue;
      if (eat('}')) break;
      return fail("expected ',' or '}'");
    }
    // After the dict: numpy's padding (spaces) and the closing newline.
    ws();
    if (pos_ != s_.size()) return fail("unexpected text after the header's '}'");
    if (!have_descr || !have_fortran || !have_shape)
      return Status::invalid(std::string("header lacks '") +
                             (!have_descr     ? "descr"
                              : !have_fortran ? "fortran_order"
                                              : "shape") +
                             "'");
    return Status::ok();
  }

 private:
  Status fail(const std::string& what) const {
    return Status::invalid("malformed header at byte " + std::to_string(pos_) + ": " + what);
  }
  void ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool word(const char* w) {
    size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }
  // 'text' or "text", no escapes (numpy's descr and keys have none).
  bool string_literal(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    const char q = s_[pos_];
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string::npos) return false;
    std::string v = s_.substr(pos_ + 1, end - pos_ - 1);
    if (v.find('\\') != std::string::npos) return false;
    *out = v;
    pos_ = end + 1;
    return true;
  }
  bool boolean(bool* out) {
    if (word("True")) return *out = true, true;
    if (word("False")) return *out = false, true;
    return false;
  }
  bool integer(uint64_t* out) {
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return false;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const uint64_t d = uint64_t(s_[pos_] - '0');
      if (v > (UINT64_MAX - d) / 10) return false;  // overflow
      v = v * 10 + d;
      ++pos_;
    }
    *out = v;
    return true;
  }
  // A Python tuple of non-negative integers: (), (5,), (3, 4), (3, 4,). "(5)" is an int in Python, not
  // a tuple, and numpy refuses it: so is it here.
  Status tuple(std::vector<uint64_t>* out) {
    out->clear();
    if (!eat('(')) return fail("shape must be a tuple");
    ws();
    if (eat(')')) return Status::ok();
    for (;;) {
      uint64_t v;
      if (!integer(&v)) return fail("shape must hold non-negative integers (that fit 64 bits)");
      if (out->size() == kMaxNpyDims) return fail("more than " + std::to_string(kMaxNpyDims) + " dimensions");
      out->push_back(v);
      ws();
      const bool comma = eat(',');
      ws();
      if (eat(')')) {
        if (out->size() == 1 && !comma) return fail("a one-dimensional shape is written (n,), not (n)");
        return Status::ok();
      }
      if (!comma) return fail("expected ',' or ')' in shape");
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
};

uint16_t le16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t le32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

// The preamble and header of a file of `total` bytes whose first `avail` bytes are at p (avail covers the
// whole header whenever the file does). Fills *meta (descr, shape; no data) and *data_offset, and checks
// that the rest of the file is exactly the data the shape declares.
Status parse_head(const std::string& name, const uint8_t* p, size_t avail, uint64_t total, size_t* data_offset,
                  NpyArray* meta) {
  auto bad = [&](const std::string& why) { return Status::invalid(name + ": " + why); };
  if (total == 0) return bad("empty file (not an .npy file)");
  if (total < kMagicBytes + 2) {
    const bool magic = std::memcmp(p, kMagic, std::min<size_t>(size_t(total), kMagicBytes)) == 0;
    return bad(magic ? "truncated: " + std::to_string(total) + " bytes, not even the .npy preamble"
                     : "not an .npy file (it does not start with \\x93NUMPY)");
  }
  if (std::memcmp(p, kMagic, kMagicBytes) != 0) return bad("not an .npy file (it does not start with \\x93NUMPY)");
  const int major = p[6], minor = p[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return bad("npy format version " + std::to_string(major) + "." + std::to_string(minor) +
               " (detaudit reads 1.0, 2.0 and 3.0)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t pre = kMagicBytes + 2 + len_bytes;
  if (total < pre) return bad("truncated: " + std::to_string(total) + " bytes, the preamble needs " + std::to_string(pre));
  const uint64_t hlen = major == 1 ? le16(p + 8) : le32(p + 8);
  if (hlen > kMaxNpyHeaderBytes)
    return bad("header of " + std::to_string(hlen) + " bytes (more than " + std::to_string(kMaxNpyHeaderBytes) + ")");
  if (total < pre + hlen)
    return bad("truncated: " + std::to_string(total) + " bytes, the header declares " + std::to_string(pre + hlen));
  if (avail < pre + hlen) return bad("internal: header not read in full");
  const std::string header(reinterpret_cast<const char*>(p + pre), size_t(hlen));
  for (unsigned char c : header)
    if (c >= 0x80 || (c < 0x20 && c != '\n' && c != '\t' && c != '\r'))
      return bad("header holds a byte that is not printable ASCII");
  std::string descr;
  bool fortran = false;
  std::vector<uint64_t> shape;
  if (Status st = HeaderParser(header).parse(&descr, &fortran, &shape); !st) return bad(st.message());
  if (descr == ">f4" || descr == ">f8")
    return bad("dtype '" + descr + "' is big-endian; detaudit reads little-endian '<f4' (float32) and '<f8' "
               "(float64): write a.astype('<" + descr.substr(1) + "')");
  if (descr != "<f4" && descr != "<f8" && descr != "|u1")
    return bad("dtype '" + printable(descr) + "' (detaudit reads '<f4', little-endian float32, '<f8', float64, and "
               "'|u1', uint8)");
  if (fortran) return bad("Fortran-order array; write it in C order (numpy.ascontiguousarray)");
  const uint64_t item = descr == "<f8" ? 8 : descr == "|u1" ? 1 : 4;
  uint64_t elems = 1, bytes = 0;
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(elems, d, &elems))
      return bad("shape " + npy_shape_text(shape) + " has more elements than 2^64");
  if (__builtin_mul_overflow(elems, item, &bytes) || bytes > kMaxNpyDataBytes)
    return bad("shape " + npy_shape_text(shape) + " of " + descr + " needs more than " +
               std::to_string(kMaxNpyDataBytes) + " bytes");
  const uint64_t have = total - pre - hlen;
  if (have < bytes)
    return bad("truncated: shape " + npy_shape_text(shape) + " of '" + descr + "' needs " + std::to_string(bytes) +
               " bytes of data, the file has " + std::to_string(have));
  if (have > bytes)
    return bad(std::to_string(have - bytes) + " bytes after the data of shape " + npy_shape_text(shape) + " of '" +
               descr + "'");
  meta->descr = descr;
  meta->shape = shape;
  meta->data.clear();
  *data_offset = size_t(pre + hlen);
  return Status::ok();
}

}  // namespace

uint64_t NpyArray::elements() const {
  uint64_t e = 1;
  for (uint64_t d : shape) e *= d;
  return e;
}

std::string npy_shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::vector<uint8_t> npy_encode(const std::string& descr, const std::vector<uint64_t>& shape, const void* data,
                                size_t bytes) {
  // numpy.lib.format.write_array's header, byte for byte: np.save of the same array gives the same file.
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + npy_shape_text(shape) + ", }";
  const size_t pre = kMagicBytes + 4;
  const size_t padded = (pre + h.size() + 1 + kAlign - 1) / kAlign * kAlign;
  h.append(padded - pre - h.size() - 1, ' ');
  h += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + kMagicBytes);
  out.push_back(1);
  out.push_back(0);
  out.push_back(uint8_t(h.size() & 0xff));
  out.push_back(uint8_t(h.size() >> 8));
  out.insert(out.end(), h.begin(), h.end());
  const auto* b = static_cast<const uint8_t*>(data);
  out.insert(out.end(), b, b + bytes);
  return out;
}

Status parse_npy(const std::string& name, const uint8_t* data, size_t n, NpyArray* out) {
  size_t off = 0;
  NpyArray a;
  DETAUDIT_RETURN_IF_ERROR(parse_head(name, data, n, n, &off, &a));
  a.data.assign(data + off, data + n);
  *out = std::move(a);
  return Status::ok();
}

Status read_npy(const std::string& path, NpyArray* out,
                const std::function<Status(const NpyArray& header)>& header_ok) {
  int fd = -1;
  DETAUDIT_RETURN_IF_ERROR(open_regular_input(path, "NPY file", &fd));
  FILE* f = ::fdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    return Status::invalid(path + ": cannot open: " + std::strerror(errno));
  }
  struct FileCloser {
    FILE* f;
    ~FileCloser() { std::fclose(f); }
  } closer{f};
  struct stat st {};
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) return Status::invalid(path + ": not a regular file");
  const uint64_t total = uint64_t(st.st_size);
  // The preamble and at most the largest header first; the data only once the header has been checked.
  std::vector<uint8_t> head(size_t(std::min<uint64_t>(total, kMagicBytes + 6 + kMaxNpyHeaderBytes)));
  if (!head.empty() && std::fread(head.data(), 1, head.size(), f) != head.size())
    return Status::invalid(path + ": read error");
  size_t off = 0;
  NpyArray a;
  // A file shorter than the magic is compared against the bytes it has.
  if (head.size() < kMagicBytes + 2) head.resize(kMagicBytes + 2, 0);
  DETAUDIT_RETURN_IF_ERROR(parse_head(path, head.data(), head.size(), total, &off, &a));
  if (header_ok) DETAUDIT_RETURN_IF_ERROR(header_ok(a));
  a.data.resize(size_t(total - off));
  if (std::fseek(f, long(off), SEEK_SET) != 0 ||
      (!a.data.empty() && std::fread(a.data.data(), 1, a.data.size(), f) != a.data.size()))
    return Status::invalid(path + ": read error (the file changed while it was read?)");
  *out = std::move(a);
  return Status::ok();
}

}  // namespace detaudit
