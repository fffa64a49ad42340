// Spec strings: `name[:device][?key=value&...]`, for targets (backend + settings) and workloads
// (op + shapes + seed). Parsing is strict: an unknown name or key, a bad number or a bad value is an
// error whose message names the bad part.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "contract/spec.hpp"

namespace detaudit {


// One key of a spec: its default (empty: optional, no default), a validator returning an error message
// ("" when the value is good), the values for --help ("a|b|c", "1..256") and the canonical spelling of
// a valid value (numbers: "01" and "1" are one value, "-0" is "0"). The target keys live in the backend
// registry (probes/registry.cpp), the workload keys in spec.cpp.
struct KeyRule {
  std::string key;
  std::string fallback;
  std::function<Status(const std::string&)> check;  // invalid, saying what is expected, for a bad value
  std::string values;
  std::function<std::string(const std::string&)> canon;
  // For an optional key (no fallback): the value its backend runs when a spec leaves the key out ("" when
  // the library chooses), what a run that reports the setting must report (cpu: conv, direct).
  std::string unset;
};
// A key whose value is one of `allowed`.
KeyRule key_one_of(std::string key, std::string fallback, std::vector<std::string> allowed);
// A key whose value is an integer in [lo, hi] or one of `words` ("auto", "all").
KeyRule key_int_in(std::string key, std::string fallback, int64_t lo, int64_t hi, std::vector<std::string> words = {});


// Syntax, then the name and every key/value against the target table. Fills defaults, orders keys
// canonically. Hidden test-only backend `testing?fault=segv|ill|abort|hang|none` is accepted.
Status parse_target(const std::string& text, Spec* out);
// Same for workloads: matmul, conv2d, reduce, maxpool, batchinv.
Status parse_workload(const std::string& text, Spec* out);
// The product a workload computes, as a workload spec: a batchinv cell's is the matmul of its m, n, k, dist and seed
// (the same inputs, drawn from the seed and the sizes alone, so the same oracle); any other workload's is itself.
std::string product_of(const std::string& workload);

// Names known to the parser, for --help and error messages.
std::string target_help();
std::string workload_help();

}  // namespace detaudit
