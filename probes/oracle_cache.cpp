#include "probes/oracle_cache.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <bit>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "contract/atomic_file.hpp"
#include "kernels/input_file.hpp"
#include "probes/child.hpp"

namespace detaudit {

namespace {
// The last character is the format: '1' (no bound) is refused with its own message.
constexpr char kMagic[8] = {'D', 'A', 'O', 'R', 'A', 'C', 'L', '2'};
constexpr size_t kFixed = 8 + 16 + 16 + 8 + 8 + 8 + 4;
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

Status write_oracle_entry(const std::string& path, const OracleEntry& e) {
  std::string body(reinterpret_cast<const char*>(e.payload.data()), e.payload.size());
  for (double b : e.bound.bound) put_u64(&body, std::bit_cast<uint64_t>(b));
  std::string s(kMagic, 8);
  put_fp(&s, fingerprint_bytes(body.data(), body.size()));
  put_fp(&s, e.inputs);
  put_u64(&s, e.payload.size());
  put_u64(&s, uint64_t(e.bound.k));
  put_u64(&s, e.bound.bound.size());
  uint32_t kl = uint32_t(e.key.size());
  for (int i = 0; i < 4; ++i) s.push_back(char((kl >> (8 * i)) & 0xff));
  s += e.key;
  s += body;
  return write_file_atomic(path, s);
}

Status read_oracle_entry(const std::string& path, const std::string& expected_key, OracleEntry* out) {
  {
    int fd = -1;  // a FIFO or device is refused before it is opened for reading
    DETAUDIT_RETURN_IF_ERROR(open_regular_input(path, "oracle entry", &fd));
    ::close(fd);
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    return Status::invalid(fmt::format("{}: cannot open", path));
  }
  uint8_t head[kFixed];
  f.read(reinterpret_cast<char*>(head), kFixed);
  // Format 1 (no bound) is named before its shorter header can read as a truncated one.
  if (f.gcount() >= 8 && std::memcmp(head, kMagic, 7) == 0 && head[7] == '1') {
    return Status::invalid(
        fmt::format("{}: oracle entry of format 1 (no error bound; this detaudit reads format 2)", path));
  }
  if (f.gcount() != std::streamsize(kFixed)) {
    return Status::invalid(fmt::format("{}: truncated header (or not a file)", path));
  }
  if (std::memcmp(head, kMagic, 8) != 0) {
    return Status::invalid(fmt::format("{}: not an oracle entry (bad magic)", path));
  }
  Fingerprint sum = get_fp(head + 8);
  OracleEntry e;
  e.inputs = get_fp(head + 24);
  uint64_t size = get_u64(head + 40), k = get_u64(head + 48), nb = get_u64(head + 56);
  uint32_t kl = uint32_t(head[64]) | uint32_t(head[65]) << 8 | uint32_t(head[66]) << 16 | uint32_t(head[67]) << 24;
  // The bound has one double per output element (4 or 8 payload bytes each), or none. Sizes past 2^62
  // are corrupt (no file is that large), which keeps the sums below from overflowing.
  const bool nb_ok = nb == 0 || (size % 4 == 0 && nb == size / 4) || (size % 8 == 0 && nb == size / 8);
  if (size > (uint64_t(1) << 62) || k > uint64_t(INT64_MAX) || !nb_ok) {
    return Status::invalid(
        fmt::format("{}: corrupt bound header (k {}, {} elements for a payload of {} bytes)", path, k, nb, size));
  }
  if (kl > kMaxKey) {
    return Status::invalid(fmt::format("{}: corrupt key length {}", path, kl));
  }
  e.key.resize(kl);
  if (!f.read(e.key.data(), kl)) {
    return Status::invalid(fmt::format("{}: truncated key", path));
  }
  if (!expected_key.empty() && e.key != expected_key) {
    return Status::invalid(fmt::format("{}: entry for '{}', expected '{}'", path, e.key, expected_key));
  }
  // The sizes must match the rest of the file exactly before anything that large is allocated.
  const uint64_t body_size = size + nb * 8;
  auto here = f.tellg();
  f.seekg(0, std::ios::end);
  auto end = f.tellg();
  if (here < 0 || end < 0 || uint64_t(end - here) != body_size) {
    return Status::invalid(fmt::format("{}: payload and bound of {} bytes expected, file holds {}", path, body_size,
                                       here < 0 || end < 0 ? int64_t(-1) : int64_t(end - here)));
  }
  f.seekg(here);
  std::vector<uint8_t> body(body_size);
  if (body_size && !f.read(reinterpret_cast<char*>(body.data()), std::streamsize(body_size))) {
    return Status::invalid(fmt::format("{}: truncated payload", path));
  }
  if (fingerprint_bytes(body.data(), body.size()) != sum) {
    return Status::invalid(fmt::format("{}: checksum mismatch (corrupt entry)", path));
  }
  e.bound.k = int64_t(k);
  e.bound.bound.resize(nb);
  for (uint64_t i = 0; i < nb; ++i) e.bound.bound[i] = std::bit_cast<double>(get_u64(body.data() + size + 8 * i));
  body.resize(size);
  e.payload = std::move(body);
  *out = std::move(e);
  return Status::ok();
}

}  // namespace detaudit
