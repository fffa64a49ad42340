#include "probes/spec.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "probes/registry.hpp"

namespace detaudit {

KeyRule key_one_of(std::string key, std::string fallback, std::vector<std::string> allowed) {
  return {std::move(key), std::move(fallback),
          [allowed](const std::string& v) -> Status {
            if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return Status::ok();
            return Status::invalid(fmt::format("expected one of {}", fmt::join(allowed, "|")));
          },
          fmt::format("{}", fmt::join(allowed, "|")), [](const std::string& v) { return v; }, ""};
}

KeyRule key_int_in(std::string key, std::string fallback, int64_t lo, int64_t hi, std::vector<std::string> words) {
  std::string values = fmt::format("{}..{}", lo, hi);
  for (auto& w : words) values += "|" + w;
  return {std::move(key), std::move(fallback),
          [=](const std::string& v) -> Status {
            if (std::find(words.begin(), words.end(), v) != words.end()) return Status::ok();
            int64_t x = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
            if (ec != std::errc() || p != v.data() + v.size())
              return Status::invalid(words.empty() ? "expected an integer"
                                                   : fmt::format("expected an integer or {}", fmt::join(words, "|")));
            if (x < lo || x > hi) return Status::invalid(fmt::format("expected {} <= value <= {}", lo, hi));
            return Status::ok();
          },
          values,
          [=](const std::string& v) -> std::string {
            if (std::find(words.begin(), words.end(), v) != words.end()) return v;
            int64_t x = 0;
            std::from_chars(v.data(), v.data() + v.size(), x);
            return std::to_string(x);
          }, ""};
}

namespace {

struct NameRule {
  std::string name;
  bool device;  // takes :N
  std::vector<KeyRule> keys;
  std::string summary;
  bool hidden = false;
  Status (*check)(const Spec&) = nullptr;  // keys refused together (BackendEntry::check)
};

// Targets: one rule per backend of the registry, in its order.
const std::vector<NameRule>& target_rules() {
  static const std::vector<NameRule> rules = [] {
    std::vector<NameRule> r;
    for (auto& e : backend_registry()) r.push_back({e.name, e.device != DeviceKind::kHost, e.keys, e.summary, e.hidden, e.check});
    return r;
  }();
  return rules;
}

const std::vector<NameRule>& workload_rules() {
  static const auto dims = [](const char* key, const char* fallback, int64_t hi) {
    return key_int_in(key, fallback, 1, hi);
  };
  static const KeyRule seed = key_int_in("seed", "1", 0, INT64_MAX);
  static const KeyRule dist = key_one_of("dist", "uniform", {"uniform", "int"});
  static const std::vector<NameRule> rules = {
      {"matmul",
       false,
       {dims("m", "256", 1 << 15),
        dims("n", "256", 1 << 15),
        dims("k", "256", 1 << 15),
        key_one_of("ta", "n", {"n", "t"}),
        key_one_of("tb", "n", {"n", "t"}),
        key_one_of("dtype", "f32", {"f32", "f64"}),
        dist,
        seed},
       "C = op(A)·op(B), row-major, m x k times k x n"},
      {"conv2d",
       false,
       {dims("n", "4", 4096),
        dims("c", "16", 4096),
        dims("h", "16", 4096),
        dims("w", "16", 4096),
        dims("k", "16", 4096),
        dims("r", "3", 15),
        dims("s", "3", 15),
        dims("stride", "1", 8),
        key_int_in("pad", "1", 0, 8),
        key_one_of("pass", "fwd", {"fwd", "bwd_data", "bwd_filter"}),
        dist,
        seed},
       "2-D convolution (NCHW, KCRS), forward or backward"},
      {"reduce",
       false,
       {key_one_of("op", "sum", {"sum", "dot", "norm", "softmax"}),
        dims("n", "1000000", int64_t(1) << 31),
        dims("cols", "", 1 << 24),
        dist,
        seed},
       "sum, dot, L2 norm over n elements; softmax along rows of `cols` (default 1000)"},
      {"maxpool",
       false,
       {dims("n", "4", 4096),
        dims("c", "16", 4096),
        dims("h", "32", 4096),
        dims("w", "32", 4096),
        dims("window", "3", 8),
        dims("stride", "2", 8),
        key_one_of("pass", "bwd", {"fwd", "bwd"}),
        dist,
        seed},
       "max pooling; overlapping windows when stride < window"},
      {"batchinv",
       false,
       {dims("m", "128", 1 << 15),
        dims("n", "256", 1 << 15),
        dims("k", "256", 1 << 15),
        dims("rows", "8", 1 << 15),
        dist,
        seed},
       "batch invariance: row i of A·B alone vs inside the full product"},
  };
  return rules;
}

Status validate(const std::vector<NameRule>& rules, const char* what, const std::string& text, Spec* out) {
  DETAUDIT_RETURN_IF_ERROR(parse_spec_syntax(text, out));
  const NameRule* rule = nullptr;
  for (auto& r : rules)
    if (r.name == out->name) rule = &r;
  if (!rule) {
    std::vector<std::string> names;
    for (auto& r : rules)
      if (!r.hidden) names.push_back(r.name);
    return Status::invalid(
        fmt::format("unknown {} '{}' in '{}' (known: {})", what, out->name, text, fmt::join(names, ", ")));
  }
  if (out->device >= 0 && !rule->device) {
    return Status::invalid(fmt::format("'{}': {} '{}' takes no ':device'", text, what, out->name));
  }
  if (rule->device && out->device < 0) out->device = 0;
  for (auto& [k, v] : out->params) {
    auto it = std::find_if(rule->keys.begin(), rule->keys.end(), [&key = k](const KeyRule& kr) { return kr.key == key; });
    if (it == rule->keys.end()) {
      std::vector<std::string> keys;
      for (auto& kr : rule->keys) keys.push_back(kr.key);
      return Status::invalid(
          fmt::format("'{}': unknown key '{}' for {} '{}' (known: {})", text, k, what, out->name,
                      keys.empty() ? std::string("none") : fmt::format("{}", fmt::join(keys, ", "))));
    }
    if (Status st = it->check(v); !st)
      return Status::invalid(fmt::format("'{}': bad value '{}' for key '{}': {}", text, v, k, st.message()));
  }
  // Canonical order: the table's key order, defaults filled in.
  Spec canon;
  canon.name = out->name;
  canon.device = out->device;
  for (auto& kr : rule->keys) {
    if (out->has(kr.key))
      canon.params.emplace_back(kr.key, kr.canon(out->get(kr.key)));
    else if (!kr.fallback.empty())
      canon.params.emplace_back(kr.key, kr.fallback);
  }
  if (rule->check)
    if (Status st = rule->check(canon); !st) return st.prefixed(fmt::format("'{}': ", text));
  *out = canon;
  return Status::ok();
}

std::string help_of(const std::vector<NameRule>& rules) {
  std::string s;
  for (auto& r : rules) {
    if (r.hidden) continue;
    s += fmt::format("  {}{}  {}\n", r.name, r.device ? "[:N]" : "", r.summary);
    for (auto& k : r.keys)
      s += fmt::format("      {:<16} {}{}\n", k.key + "=" + (k.fallback.empty() ? "" : k.fallback), k.values,
                       k.fallback.empty() ? " (optional)" : "");
  }
  return s;
}

}  // namespace

Status parse_target(const std::string& text, Spec* out) { return validate(target_rules(), "target", text, out); }
std::string product_of(const std::string& workload) {
  Spec w;
  if (!parse_workload(workload, &w) || w.name != "batchinv") return workload;
  Spec m;
  const std::string text = "matmul?m=" + std::to_string(w.get_int("m", 1)) + "&n=" + std::to_string(w.get_int("n", 1)) +
                           "&k=" + std::to_string(w.get_int("k", 1)) + "&dist=" + w.get("dist", "uniform") +
                           "&seed=" + std::to_string(w.get_int("seed", 1));
  return parse_workload(text, &m) ? m.str() : workload;
}

Status parse_workload(const std::string& text, Spec* out) {
  DETAUDIT_RETURN_IF_ERROR(validate(workload_rules(), "workload", text, out));
  if (out->name == "conv2d") {
    int64_t h = out->get_int("h", 1), w = out->get_int("w", 1), r = out->get_int("r", 1), s = out->get_int("s", 1),
            pad = out->get_int("pad", 0);
    if (h + 2 * pad < r || w + 2 * pad < s) {
      return Status::invalid(
          fmt::format("'{}': filter {}x{} larger than padded input {}x{}", text, r, s, h + 2 * pad, w + 2 * pad));
    }
  }
  if (out->name == "maxpool") {
    if (out->get_int("h", 1) < out->get_int("window", 1) || out->get_int("w", 1) < out->get_int("window", 1)) {
      return Status::invalid(fmt::format("'{}': window larger than input", text));
    }
  }
  if (out->name == "batchinv" && out->get_int("rows", 1) > out->get_int("m", 1)) {
    return Status::invalid(fmt::format("'{}': rows must not exceed m", text));
  }
  if (out->name == "reduce" && out->get("op") != "softmax" && out->has("cols")) {
    return Status::invalid(fmt::format("'{}': cols applies to op=softmax only", text));
  }
  if (out->name == "reduce" && out->get("op") == "softmax" && !out->has("cols")) {
    // Canonical form: cols sits after n, as in the key table.
    Spec canon = *out;
    canon.params.clear();
    for (auto& kv : out->params) {
      canon.params.push_back(kv);
      if (kv.first == "n") canon.params.emplace_back("cols", "1000");
    }
    *out = canon;
  }
  if (out->name == "reduce" && out->get("op") == "softmax" && out->get_int("n", 1) % out->get_int("cols", 1) != 0) {
    return Status::invalid(fmt::format("'{}': for softmax, n must be a multiple of cols", text));
  }
  return Status::ok();
}

std::string target_help() { return help_of(target_rules()); }
std::string workload_help() { return help_of(workload_rules()); }

}  // namespace detaudit
