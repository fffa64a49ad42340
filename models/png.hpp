// A PNG writer for the PredNet report's frames (true frames over predicted ones), carried in base64
// (contract/base64.hpp) in results.json and the HTML report (data: URIs), and its check. 8-bit gray or RGB,
// no interlace, every row filter 0, one zlib stream (compression level 9): the same bytes for the same pixels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace detaudit {

// pixels: rows x cols x channels (1: gray, 3: RGB interleaved), row-major. Empty for other channel
// counts, a size that does not match, or a zlib failure (never expected).
std::vector<uint8_t> encode_png(int cols, int rows, int channels, const std::vector<uint8_t>& pixels);
// Why `png` is not the image encode_png writes of some cols x rows x channels pixels ("" when it is): the
// signature, IHDR, one IDAT and IEND with their CRCs and nothing after, a zlib stream of rows that each start with
// filter 0, and those pixels encoded again giving these very bytes.
std::string png_problem(const std::vector<uint8_t>& png, int cols, int rows, int channels);

}  // namespace detaudit
