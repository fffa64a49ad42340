#include "kernels/fingerprint.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>

namespace detaudit {

std::string Fingerprint::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

bool Fingerprint::from_hex(const std::string& s, Fingerprint* out) {
  if (s.size() != 32) return false;
  uint64_t parts[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    char c = s[i];
    int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    parts[i / 16] = (parts[i / 16] << 4) | static_cast<uint64_t>(v);
  }
  out->hi = parts[0];
  out->lo = parts[1];
  return true;
}

Fingerprint fingerprint_bytes(const void* data, size_t bytes) {
  XXH128_hash_t h = XXH3_128bits(data, bytes);
  return {h.high64, h.low64};
}

}  // namespace detaudit
