// Spec strings: `name[:device][?key=value&...]`, for targets (backend + settings) and workloads (op +
// shapes + seed), as results.json names them. This is the syntax alone; probes/spec.hpp checks names,
// keys and values against the backends and workloads and puts a spec in canonical form.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/status.hpp"

namespace detaudit {

struct Spec {
  std::string name;
  int device = -1;  // -1: none given
  std::vector<std::pair<std::string, std::string>> params;  // in canonical key order after validation

  bool has(const std::string& key) const;
  std::string get(const std::string& key, const std::string& fallback = "") const;
  int64_t get_int(const std::string& key, int64_t fallback) const;  // caller validated the value
  void set(const std::string& key, const std::string& value);
  std::string str() const;  // canonical text
};

// Syntax only: name, device, key=value pairs (no duplicates, no empty keys or values).
Status parse_spec_syntax(const std::string& text, Spec* out);
// The name part of a spec's text, before its device and keys: "cpu" of "cpu?order=blocked", "cuda" of "cuda:0?...".
// (A target's name is its backend's.) Nothing is validated.
std::string spec_name(const std::string& text);
// Comma-separated lists; a comma inside a spec is not allowed, so splitting is plain. An empty item (a
// leading, trailing or doubled comma: "cpu,") is refused (invalid); the empty text is the empty list.
StatusOr<std::vector<std::string>> split_list(const std::string& text);

}  // namespace detaudit
