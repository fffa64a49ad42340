#include "probes/oracle_cache.hpp"

#include <cstring>
#include <fstream>

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "probes/child.hpp"

namespace detaudit {

namespace {
constexpr char kMagic[8] = {'D', 'A', 'O', 'R', 'A', 'C', 'L', '1'};
constexpr size_t kFixed = 8 + 16 + 16 + 8 + 4;
constexpr uint32_t kMaxKey = 4096;

void put_u64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(char((v >> (8 * i)) & 0xff));
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
void put_fp(std::string* s, const Fingerprint& f) {
  put_u64(s, f.hi);
  put_u64(s, f.lo);
}
Fingerprint get_fp(const uint8_t* p) { return Fingerprint{get_u64(p), get_u64(p + 8)}; }
}  // namespace

std::string oracle_key(const Spec& workload) {
  // The tool version covers the input generator and the reference kernels.
  return workload.str() + " | detaudit " + DETAUDIT_VERSION;
}

std::string oracle_path(const std::string& out_dir, const Spec& workload) {
  std::string k = oracle_key(workload);
  return fmt::format("{}/.oracle/{:016x}.bin", out_dir, XXH3_64bits(k.data(), k.size()));
}

bool write_oracle_entry(const std::string& path, const OracleEntry& e, std::string* err) {
  std::string s(kMagic, 8);
  put_fp(&s, fingerprint_bytes(e.payload.data(), e.payload.size()));
  put_fp(&s, e.inputs);
  put_u64(&s, e.payload.size());
  uint32_t kl = uint32_t(e.key.size());
  for (int i = 0; i < 4; ++i) s.push_back(char((kl >> (8 * i)) & 0xff));
  s += e.key;
  s.append(reinterpret_cast<const char*>(e.payload.data()), e.payload.size());
  return write_file_atomic(path, s, err);
}

bool read_oracle_entry(const std::string& path, const std::string& expected_key, OracleEntry* out, std::string* err) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *err = fmt::format("{}: cannot open", path);
    return false;
  }
  uint8_t head[kFixed];
  if (!f.read(reinterpret_cast<char*>(head), kFixed)) {
    *err = fmt::format("{}: truncated header (or not a file)", path);
    return false;
  }
  if (std::memcmp(head, kMagic, 8) != 0) {
    *err = fmt::format("{}: not an oracle entry (bad magic)", path);
    return false;
  }
  Fingerprint sum = get_fp(head + 8);
  OracleEntry e;
  e.inputs = get_fp(head + 24);
  uint64_t size = get_u64(head + 40);
  uint32_t kl = uint32_t(head[48]) | uint32_t(head[49]) << 8 | uint32_t(head[50]) << 16 | uint32_t(head[51]) << 24;
  if (kl > kMaxKey) {
    *err = fmt::format("{}: corrupt key length {}", path, kl);
    return false;
  }
  e.key.resize(kl);
  if (!f.read(e.key.data(), kl)) {
    *err = fmt::format("{}: truncated key", path);
    return false;
  }
  if (!expected_key.empty() && e.key != expected_key) {
    *err = fmt::format("{}: entry for '{}', expected '{}'", path, e.key, expected_key);
    return false;
  }
  // The payload size must match the rest of the file exactly before anything that large is allocated.
  auto here = f.tellg();
  f.seekg(0, std::ios::end);
  auto end = f.tellg();
  if (here < 0 || end < 0 || uint64_t(end - here) != size) {
    *err = fmt::format("{}: payload of {} bytes expected, file holds {}", path, size,
                       here < 0 || end < 0 ? int64_t(-1) : int64_t(end - here));
    return false;
  }
  f.seekg(here);
  e.payload.resize(size);
  if (size && !f.read(reinterpret_cast<char*>(e.payload.data()), std::streamsize(size))) {
    *err = fmt::format("{}: truncated payload", path);
    return false;
  }
  if (fingerprint_bytes(e.payload.data(), e.payload.size()) != sum) {
    *err = fmt::format("{}: checksum mismatch (corrupt entry)", path);
    return false;
  }
  *out = std::move(e);
  return true;
}

}  // namespace detaudit
