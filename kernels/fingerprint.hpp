// A fingerprint is the 128-bit XXH3 hash of an output's bytes. It is the identity of an output: two
// outputs are bit-identical exactly when (up to 2^-128) their fingerprints are equal.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace detaudit {

struct Fingerprint {
  uint64_t hi = 0, lo = 0;
  bool operator==(const Fingerprint&) const = default;
  auto operator<=>(const Fingerprint&) const = default;
  std::string hex() const;                       // 32 lowercase hex digits, hi first
  static bool from_hex(const std::string& s, Fingerprint* out);
};

Fingerprint fingerprint_bytes(const void* data, size_t bytes);

}  // namespace detaudit
