#include "models/png.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

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

std::string png_problem(const std::vector<uint8_t>& png, int cols, int rows, int channels) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (png.size() < 8 || !std::equal(kSignature, kSignature + 8, png.begin())) return "it does not start with the PNG signature";
  auto get32 = [&](size_t at) {
    return uint32_t(png[at]) << 24 | uint32_t(png[at + 1]) << 16 | uint32_t(png[at + 2]) << 8 | uint32_t(png[at + 3]);
  };
  // The chunks: IHDR, IDAT, IEND, each whole, its CRC its own, and nothing after the last.
  std::vector<std::pair<std::string, std::vector<uint8_t>>> chunks;
  size_t at = 8;
  while (at < png.size() && chunks.size() < 3) {
    if (png.size() - at < 12) return "a chunk is cut short";
    const uint32_t n = get32(at);
    if (n > png.size() - at - 12) return "a chunk is cut short";
    const std::string type(png.begin() + ptrdiff_t(at + 4), png.begin() + ptrdiff_t(at + 8));
    if (uint32_t(crc32(0, png.data() + at + 4, uInt(n + 4))) != get32(at + 8 + n))
      return fmt::format("chunk {}'s CRC is not that of its bytes",
                         std::all_of(type.begin(), type.end(), [](char c) { return std::isalpha((unsigned char)c); })
                             ? type
                             : std::string("(not letters)"));
    chunks.emplace_back(type, std::vector<uint8_t>(png.begin() + ptrdiff_t(at + 8), png.begin() + ptrdiff_t(at + 8 + n)));
    at += 12 + n;
  }
  if (chunks.size() != 3 || chunks[0].first != "IHDR" || chunks[1].first != "IDAT" || chunks[2].first != "IEND" ||
      !chunks[2].second.empty())
    return "its chunks are not IHDR, IDAT and an empty IEND";
  if (at != png.size()) return fmt::format("{} bytes follow its IEND chunk", png.size() - at);
  const std::vector<uint8_t>& h = chunks[0].second;
  if (h.size() != 13) return "its IHDR chunk is not 13 bytes";
  const uint32_t w = uint32_t(h[0]) << 24 | uint32_t(h[1]) << 16 | uint32_t(h[2]) << 8 | h[3],
                 ht = uint32_t(h[4]) << 24 | uint32_t(h[5]) << 16 | uint32_t(h[6]) << 8 | h[7];
  const int kind = channels == 3 ? 2 : 0;
  if (w != uint32_t(cols) || ht != uint32_t(rows) || h[8] != 8 || h[9] != kind || h[10] || h[11] || h[12])
    return fmt::format("it is {} x {} (8-bit colour type {}), not the {} x {} {} image of these frames", w, ht, h[9], cols,
                       rows, channels == 3 ? "RGB" : "grey");
  const size_t line = size_t(cols) * size_t(channels);
  std::vector<uint8_t> raw(size_t(rows) * (line + 1) + 1);  // (one byte more: a longer stream does not fit)
  uLongf n = uLongf(raw.size());
  if (uncompress(raw.data(), &n, chunks[1].second.data(), uLong(chunks[1].second.size())) != Z_OK ||
      n != raw.size() - 1)
    return "its IDAT chunk is no zlib stream of its rows";
  std::vector<uint8_t> pixels;
  pixels.reserve(size_t(rows) * line);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = raw.data() + size_t(r) * (line + 1);
    if (row[0] != 0) return fmt::format("row {} has filter {} (every row is written with filter 0)", r, row[0]);
    pixels.insert(pixels.end(), row + 1, row + 1 + line);
  }
  if (encode_png(cols, rows, channels, pixels) != png) return "its bytes are not those its pixels encode to";
  return "";
}

}  // namespace detaudit
