// The oracle cache, DIR/.oracle/: cpu-ref's output of each workload, computed once (in a worker, under
// the audit's timeout) and read by every target's worker. Nothing in it is trusted blindly:
//   - an entry's name is a hash of its key (workload spec + tool version), and the key is stored
//     inside it and compared on load;
//   - it carries the XXH3-128 of its payload, checked on every load, and its payload size;
//   - it carries the fingerprint of the workload's inputs, which the worker compares with the inputs it
//     generated itself (a changed generator gives a different fingerprint, never a silent verdict).
// An entry that fails any check (random bytes, truncated, a directory in its place) is removed and
// computed again; `--fresh` clears the folder.
//
// Layout: "DAORACL1" | payload XXH3-128 (16 B) | inputs fingerprint (16 B) | payload bytes (u64 LE) |
//         key length (u32 LE) | key | payload.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/fingerprint.hpp"
#include "probes/spec.hpp"

namespace detaudit {

struct OracleEntry {
  std::string key;
  Fingerprint inputs;
  std::vector<uint8_t> payload;
};

std::string oracle_key(const Spec& workload);
std::string oracle_path(const std::string& out_dir, const Spec& workload);

// Writes atomically. False with *err on failure.
bool write_oracle_entry(const std::string& path, const OracleEntry& e, std::string* err);
// Reads and checks an entry: magic, sizes, key (when expected_key is not empty) and payload checksum.
// False with *err saying what failed.
bool read_oracle_entry(const std::string& path, const std::string& expected_key, OracleEntry* out, std::string* err);

}  // namespace detaudit
