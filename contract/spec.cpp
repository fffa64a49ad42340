#include "contract/spec.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace detaudit {

bool Spec::has(const std::string& key) const {
  for (auto& [k, v] : params)
    if (k == key) return true;
  return false;
}
std::string Spec::get(const std::string& key, const std::string& fallback) const {
  for (auto& [k, v] : params)
    if (k == key) return v;
  return fallback;
}
int64_t Spec::get_int(const std::string& key, int64_t fallback) const {
  if (!has(key)) return fallback;
  std::string v = get(key);
  int64_t x = fallback;
  std::from_chars(v.data(), v.data() + v.size(), x);
  return x;
}
void Spec::set(const std::string& key, const std::string& value) {
  for (auto& [k, v] : params)
    if (k == key) {
      v = value;
      return;
    }
  params.emplace_back(key, value);
}
std::string Spec::str() const {
  std::string s = name;
  if (device >= 0) s.append(":").append(std::to_string(device));
  for (size_t i = 0; i < params.size(); ++i) {
    s += i ? '&' : '?';
    s += params[i].first;
    s += '=';
    s += params[i].second;
  }
  return s;
}

StatusOr<std::vector<std::string>> split_list(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    if (item.empty())
      return Status::invalid(
          fmt::format("'{}': an empty item at character {} (a leading, trailing or doubled comma)", text, start + 1));
    out.push_back(item);
    start = comma + 1;
  }
  return out;
}

static bool valid_ident(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

std::string spec_name(const std::string& text) { return text.substr(0, text.find_first_of(":?")); }

Status parse_spec_syntax(const std::string& text, Spec* out) {
  *out = Spec{};
  size_t q = text.find('?');
  std::string head = text.substr(0, q);
  size_t colon = head.find(':');
  out->name = head.substr(0, colon);
  if (!valid_ident(out->name)) {
    return Status::invalid(fmt::format("'{}': missing or malformed name before '?'", text));
  }
  if (colon != std::string::npos) {
    std::string dev = head.substr(colon + 1);
    int d = -1;
    auto [p, ec] = std::from_chars(dev.data(), dev.data() + dev.size(), d);
    if (dev.empty() || ec != std::errc() || p != dev.data() + dev.size() || d < 0 || d > 1023) {
      return Status::invalid(fmt::format("'{}': bad device '{}' (expected a number after ':')", text, dev));
    }
    out->device = d;
  }
  if (q == std::string::npos) return Status::ok();
  std::string rest = text.substr(q + 1);
  if (rest.empty()) {
    return Status::invalid(fmt::format("'{}': nothing after '?'", text));
  }
  size_t start = 0;
  while (start <= rest.size()) {
    size_t amp = rest.find('&', start);
    if (amp == std::string::npos) amp = rest.size();
    std::string kv = rest.substr(start, amp - start);
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) {
      return Status::invalid(fmt::format("'{}': malformed parameter '{}' (expected key=value)", text, kv));
    }
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (!valid_ident(k) || !valid_ident(v)) {
      return Status::invalid(fmt::format("'{}': malformed parameter '{}'", text, kv));
    }
    if (out->has(k)) {
      return Status::invalid(fmt::format("'{}': parameter '{}' given twice", text, k));
    }
    out->params.emplace_back(k, v);
    start = amp + 1;
  }
  return Status::ok();
}

}  // namespace detaudit
