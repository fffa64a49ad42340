#include "models/png.hpp"

#include <zlib.h>

namespace detaudit {

namespace {

void put32(std::vector<uint8_t>* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(uint8_t(v >> s));
}

void chunk(std::vector<uint8_t>* out, const char type[5], const std::vector<uint8_t>& data) {
  put32(out, uint32_t(data.size()));
  const size_t at = out->size();
  out->insert(out->end(), type, type + 4);
  out->insert(out->end(), data.begin(), data.end());
  put32(out, uint32_t(crc32(0, out->data() + at, uInt(out->size() - at))));
}

}  // namespace

std::vector<uint8_t> encode_png(int cols, int rows, int channels, const std::vector<uint8_t>& pixels) {
  if (cols < 1 || rows < 1 || (channels != 1 && channels != 3) ||
      pixels.size() != size_t(cols) * size_t(rows) * size_t(channels))
    return {};
  const size_t line = size_t(cols) * size_t(channels);
  std::vector<uint8_t> raw;
  raw.reserve(size_t(rows) * (line + 1));
  for (int r = 0; r < rows; ++r) {
    raw.push_back(0);  // filter: none
    raw.insert(raw.end(), pixels.begin() + ptrdiff_t(size_t(r) * line), pixels.begin() + ptrdiff_t(size_t(r + 1) * line));
  }
  uLongf zn = compressBound(uLong(raw.size()));
  std::vector<uint8_t> z(zn);
  if (compress2(z.data(), &zn, raw.data(), uLong(raw.size()), 9) != Z_OK) return {};
  z.resize(zn);
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put32(&ihdr, uint32_t(cols));
  put32(&ihdr, uint32_t(rows));
  // 8-bit, grayscale (colour type 0) or RGB (2), deflate, filter method 0, no interlace
  ihdr.insert(ihdr.end(), {8, uint8_t(channels == 3 ? 2 : 0), 0, 0, 0});
  chunk(&out, "IHDR", ihdr);
  chunk(&out, "IDAT", z);
  chunk(&out, "IEND", {});
  return out;
}

std::string base64_encode(const std::vector<uint8_t>& b) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((b.size() + 2) / 3 * 4);
  for (size_t i = 0; i < b.size(); i += 3) {
    const uint32_t v = uint32_t(b[i]) << 16 | (i + 1 < b.size() ? uint32_t(b[i + 1]) << 8 : 0) |
                       (i + 2 < b.size() ? uint32_t(b[i + 2]) : 0);
    out += k[v >> 18 & 63];
    out += k[v >> 12 & 63];
    out += i + 1 < b.size() ? k[v >> 6 & 63] : '=';
    out += i + 2 < b.size() ? k[v & 63] : '=';
  }
  return out;
}

}  // namespace detaudit
