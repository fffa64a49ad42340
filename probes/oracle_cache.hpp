// The oracle cache, DIR/.oracle/: cpu-ref's output of each workload and its error bound (a double per
// output element and the accumulation length k, probes/workload.cpp), computed once (in a worker,
// under the audit's timeout) and read by every target's worker. Nothing in it is trusted blindly:
//   - an entry's name is a hash of its key (workload spec + tool version), and the key is stored
//     inside it and compared on load;
//   - it carries the XXH3-128 of its payload and bound, checked on every load, and their sizes;
//   - it carries the fingerprint of the workload's inputs, which the worker compares with the inputs it
//     generated itself (a changed generator gives a different fingerprint, never a silent verdict).
// The checksum has no secret, so these checks catch corruption, not an entry rewritten whole: every probe session
// computes its entries afresh at its start (an entry an earlier session left is removed first), and import never
// reads them. An entry that fails a check in a worker (random bytes, truncated, other inputs) leaves that cell without
// a distance and names why (details.oracle_problem); the magic names the format, and format 1 carried no bound.
//
// Layout (format 2): "DAORACL2" | XXH3-128 of payload and bound (16 B) | inputs fingerprint (16 B) |
//         payload bytes (u64 LE) | bound k (u64 LE) | bound elements (u64 LE: 0, or one per output
//         element) | key length (u32 LE) | key | payload | bound (IEEE doubles, LE).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/fingerprint.hpp"
#include "contract/metrics.hpp"
#include "probes/spec.hpp"

namespace detaudit {

struct OracleEntry {
  std::string key;
  Fingerprint inputs;
  std::vector<uint8_t> payload;
  ErrorBound bound;  // empty: none (an entry written without one)
};

std::string oracle_key(const Spec& workload);
std::string oracle_path(const std::string& out_dir, const Spec& workload);

// Writes atomically.
Status write_oracle_entry(const std::string& path, const OracleEntry& e);
// Reads and checks an entry: magic, sizes, key (when expected_key is not empty) and checksum.
// Invalid, saying what failed.
Status read_oracle_entry(const std::string& path, const std::string& expected_key, OracleEntry* out);

}  // namespace detaudit
