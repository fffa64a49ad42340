// RFC 4648 base64 with padding: how results.json and the HTML report carry a PNG (PredNet's frame strip).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace detaudit {

std::string base64_encode(const std::vector<uint8_t>& bytes);
// Its inverse: false for text that is not base64 with padding as base64_encode writes it.
bool base64_decode(const std::string& text, std::vector<uint8_t>* bytes);

}  // namespace detaudit
