#include "contract/observation.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <set>

#include <fmt/format.h>

namespace detaudit {

const char* to_string(ObsStatus s) {
  switch (s) {
    case ObsStatus::kOk: return "ok";
    case ObsStatus::kCrashed: return "crashed";
    case ObsStatus::kTimeout: return "timeout";
    case ObsStatus::kSkipped: return "skipped";
    case ObsStatus::kError: return "error";
  }
  return "error";
}

bool parse_obs_status(const std::string& s, ObsStatus* out) {
  for (ObsStatus st : {ObsStatus::kOk, ObsStatus::kCrashed, ObsStatus::kTimeout, ObsStatus::kSkipped, ObsStatus::kError})
    if (s == to_string(st)) {
      *out = st;
      return true;
    }
  return false;
}

int count_distinct(const std::vector<std::string>& v) { return int(std::set<std::string>(v.begin(), v.end()).size()); }

nlohmann::json to_json(const KernelRecord& k) {
  return {{"name", k.name},
          {"grid", {k.grid[0], k.grid[1], k.grid[2]}},
          {"block", {k.block[0], k.block[1], k.block[2]}},
          {"registers", k.registers},
          {"static_smem", k.static_smem},
          {"dynamic_smem", k.dynamic_smem},
          {"duration_ns", k.duration_ns}};
}

namespace {
// JSON has no infinity: an infinite relative error is written as the string "inf".
nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json("inf"); }
double num_from(const nlohmann::json& j) {
  if (j.is_string()) return INFINITY;
  return j.get<double>();
}
}  // namespace

nlohmann::json to_json(const Observation& o) {
  nlohmann::json j = {{"workload", o.workload},
                      {"target", o.target},
                      {"status", to_string(o.status)},
                      {"reason", o.reason},
                      {"repeats", o.repeats},
                      {"fingerprints", o.fingerprints},
                      {"distinct", o.distinct},
                      {"seconds", o.seconds},
                      {"details", o.details},
                      {"describe", o.describe}};
  if (o.oracle) {
    j["oracle"] = {{"max_ulp", o.oracle->max_ulp == kUlpInfinite ? nlohmann::json("inf") : nlohmann::json(o.oracle->max_ulp)},
                   {"max_rel_err", num(o.oracle->max_rel_err)},
                   {"mismatched", o.oracle->mismatched},
                   {"err_ratio", num(o.oracle->err_ratio)},
                   {"agree_bits", o.oracle->agree_bits},
                   {"bound_k", uint64_t(std::max<int64_t>(o.oracle->bound_k, 0))},
                   {"ratio_hist", o.oracle->ratio_hist}};
  } else {
    j["oracle"] = nullptr;
  }
  if (!o.tracing.empty()) j["tracing"] = o.tracing;
  if (!o.warmup_fingerprint.empty()) j["warmup_fingerprint"] = o.warmup_fingerprint;
  if (o.verdict) j["verdict"] = to_string(*o.verdict);
  if (!o.verdict_reason.empty()) j["verdict_reason"] = o.verdict_reason;
  nlohmann::json ks = nlohmann::json::array();
  for (auto& rep : o.kernels) {
    if (!rep) {
      ks.push_back(nullptr);  // this repeat's tracing failed
      continue;
    }
    nlohmann::json r = nlohmann::json::array();
    for (auto& k : *rep) r.push_back(to_json(k));
    ks.push_back(r);
  }
  j["kernels"] = ks;
  if (o.batch) {
    j["batch_invariance"] = {{"rows_checked", o.batch->rows_checked},
                             {"rows_differing", o.batch->rows_differing},
                             {"invariant", o.batch->invariant()}};
    if (!o.batch->rows_fingerprint.empty()) j["batch_invariance"]["rows_fingerprint"] = o.batch->rows_fingerprint;
  }
  return j;
}

std::string json_path(const std::string& parent, const std::string& key) {
  // A key that is not a plain name is quoted, so a path stays one printable line.
  bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (!plain) return parent + "[" + nlohmann::json(key).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + "]";
  return parent.empty() ? key : parent + "." + key;
}
std::string json_path(const std::string& parent, size_t index) { return parent + "[" + std::to_string(index) + "]"; }

Status check_json(const nlohmann::json& j, JsonType t, const std::string& path) {
  bool ok = false;
  const char* what = "";
  switch (t) {
    case JsonType::kString: ok = j.is_string(), what = "a string"; break;
    case JsonType::kCount:
      ok = j.is_number_integer() && j.get<int64_t>() >= 0 && j.get<int64_t>() <= INT32_MAX;
      what = "an integer from 0 to 2147483647";
      break;
    case JsonType::kUnsigned: ok = j.is_number_unsigned(), what = "a non-negative integer"; break;
    case JsonType::kUint32:
      ok = j.is_number_unsigned() && j.get<uint64_t>() <= UINT32_MAX;
      what = "an integer from 0 to 4294967295";
      break;
    case JsonType::kNumber: ok = j.is_number(), what = "a number"; break;
    case JsonType::kBoolean: ok = j.is_boolean(), what = "a boolean"; break;
    case JsonType::kObject: ok = j.is_object(), what = "an object"; break;
    case JsonType::kArray: ok = j.is_array(), what = "an array"; break;
  }
  if (ok) return Status::ok();
  // A number where a number of another range or kind belongs shows itself; anything else its type.
  bool numeric = t == JsonType::kCount || t == JsonType::kUnsigned || t == JsonType::kUint32 || t == JsonType::kNumber;
  std::string got = numeric && j.is_number() ? j.dump() : j.type_name();
  return Status::invalid(fmt::format("{} must be {} (got {})", path, what, got));
}

Status check_key(const nlohmann::json& obj, const char* key, JsonType t, bool required, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return Status::invalid(json_path(path, key) + " is missing");
    return Status::ok();
  }
  return check_json(*it, t, json_path(path, key));
}

Status check_array_key(const nlohmann::json& obj, const char* key, JsonType elem, bool required,
                       const std::string& path) {
  DETAUDIT_RETURN_IF_ERROR(check_key(obj, key, JsonType::kArray, required, path));
  auto it = obj.find(key);
  if (it == obj.end()) return Status::ok();
  for (size_t i = 0; i < it->size(); ++i)
    DETAUDIT_RETURN_IF_ERROR(check_json((*it)[i], elem, json_path(json_path(path, key), i)));
  return Status::ok();
}

namespace {

Status kernel_from_json(const nlohmann::json& j, KernelRecord* k, const std::string& path) {
  using T = JsonType;
  if (Status st; !(st = check_json(j, T::kObject, path)) || !(st = check_key(j, "name", T::kString, false, path)) ||
                 !(st = check_key(j, "registers", T::kUint32, false, path)) ||
                 !(st = check_key(j, "static_smem", T::kUint32, false, path)) ||
                 !(st = check_key(j, "dynamic_smem", T::kUint32, false, path)) ||
                 !(st = check_key(j, "duration_ns", T::kUnsigned, false, path)))
    return st;
  for (const char* dim : {"grid", "block"}) {
    DETAUDIT_RETURN_IF_ERROR(check_array_key(j, dim, T::kUint32, true, path));
    if (j[dim].size() != 3) {
      return Status::invalid(json_path(path, dim) + " must have 3 elements");
    }
  }
  k->name = j.value("name", "");
  for (int i = 0; i < 3; ++i) {
    k->grid[i] = j["grid"][i].get<uint32_t>();
    k->block[i] = j["block"][i].get<uint32_t>();
  }
  k->registers = j.value("registers", 0u);
  k->static_smem = j.value("static_smem", 0u);
  k->dynamic_smem = j.value("dynamic_smem", 0u);
  k->duration_ns = j.value("duration_ns", uint64_t(0));
  return Status::ok();
}

// "oracle": null, or {"max_ulp": N | "inf", "max_rel_err": x | "inf", "mismatched": N, and, optional
// (older results lack them): "err_ratio": x >= 0 | -1 | "inf", "agree_bits": x in [0, 53] | -1,
// "bound_k": N, "ratio_hist": [] | [kRatioBuckets counts]}.
Status oracle_from_json(const nlohmann::json& j, std::optional<OracleDistance>* out, const std::string& path) {
  if (j.is_null()) return Status::ok();
  DETAUDIT_RETURN_IF_ERROR(check_json(j, JsonType::kObject, path));
  if (const std::string k = unknown_field(j, {"max_ulp", "max_rel_err", "mismatched", "err_ratio", "agree_bits",
                                              "bound_k", "ratio_hist"});
      !k.empty())
    return Status::invalid(fmt::format("{} is not a field of an oracle distance", json_path(path, k.substr(0, 40))));
  OracleDistance d;
  for (const char* k : {"max_ulp", "max_rel_err"}) {
    std::string p = json_path(path, k);
    if (!j.contains(k)) {
      return Status::invalid(p + " is missing");
    }
    const auto& v = j[k];
    bool ulp = std::string(k) == "max_ulp";
    if ((v.is_string() && v.get<std::string>() == "inf") || (ulp ? v.is_number_unsigned() : v.is_number())) continue;
    return Status::invalid(fmt::format("{} must be {} or \"inf\" (got {})", p,
                                       ulp ? "a non-negative integer" : "a number",
                                       v.is_number() ? v.dump() : v.type_name()));
  }
  if (Status st; !(st = check_key(j, "mismatched", JsonType::kUnsigned, true, path)) ||
                 !(st = check_key(j, "bound_k", JsonType::kUnsigned, false, path)) ||
                 !(st = check_array_key(j, "ratio_hist", JsonType::kUnsigned, false, path)))
    return st;
  if (j.contains("err_ratio")) {
    const auto& v = j["err_ratio"];
    bool ok = (v.is_string() && v.get<std::string>() == "inf") ||
              (v.is_number() && (v.get<double>() >= 0 || v.get<double>() == -1));
    if (!ok) {
      return Status::invalid(fmt::format("{} must be a non-negative number, -1 or \"inf\" (got {})",
                                         json_path(path, "err_ratio"), v.is_number() ? v.dump() : v.type_name()));
    }
    d.err_ratio = num_from(v);
  }
  if (j.contains("agree_bits")) {
    const auto& v = j["agree_bits"];
    if (!v.is_number() || !((v.get<double>() >= 0 && v.get<double>() <= kPrecisionF64) || v.get<double>() == -1)) {
      return Status::invalid(fmt::format("{} must be a number from 0 to {} or -1 (got {})",
                                         json_path(path, "agree_bits"), kPrecisionF64,
                                         v.is_number() ? v.dump() : v.type_name()));
    }
    d.agree_bits = v.get<double>();
  }
  if (j.contains("bound_k")) {
    if (j["bound_k"].get<uint64_t>() > uint64_t(INT64_MAX)) {
      return Status::invalid(json_path(path, "bound_k") + " is out of range");
    }
    d.bound_k = int64_t(j["bound_k"].get<uint64_t>());
  }
  if (j.contains("ratio_hist")) {
    d.ratio_hist = j["ratio_hist"].get<std::vector<uint64_t>>();
    if (!d.ratio_hist.empty() && d.ratio_hist.size() != size_t(kRatioBuckets)) {
      return Status::invalid(fmt::format("{} must have 0 or {} elements (got {})", json_path(path, "ratio_hist"),
                                         kRatioBuckets, d.ratio_hist.size()));
    }
  }
  d.max_ulp = j["max_ulp"].is_string() ? kUlpInfinite : j["max_ulp"].get<uint64_t>();
  d.max_rel_err = num_from(j["max_rel_err"]);
  d.mismatched = j["mismatched"].get<uint64_t>();
  *out = d;
  return Status::ok();
}

// The fields every observation carries; then the optional ones.
Status required_from_json(const nlohmann::json& j, Observation* r, const std::string& path) {
  using T = JsonType;
  if (Status st; !(st = check_key(j, "workload", T::kString, true, path)) ||
                 !(st = check_key(j, "target", T::kString, true, path)) ||
                 !(st = check_key(j, "status", T::kString, true, path)) ||
                 !(st = check_key(j, "repeats", T::kCount, true, path)) ||
                 !(st = check_array_key(j, "fingerprints", T::kString, true, path)) ||
                 !(st = check_key(j, "distinct", T::kCount, true, path)))
    return st;
  r->workload = j["workload"].get<std::string>();
  r->target = j["target"].get<std::string>();
  if (!parse_obs_status(j["status"].get<std::string>(), &r->status)) {
    return Status::invalid(json_path(path, "status") + " must be one of ok, crashed, timeout, skipped, error (got " +
                           j["status"].dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + ")");
  }
  r->repeats = j["repeats"].get<int>();
  r->fingerprints = j["fingerprints"].get<std::vector<std::string>>();
  for (size_t i = 0; i < r->fingerprints.size(); ++i)
    if (Fingerprint fp; !Fingerprint::from_hex(r->fingerprints[i], &fp)) {
      return Status::invalid(json_path(json_path(path, "fingerprints"), i) + " must be 32 hex digits");
    }
  r->distinct = j["distinct"].get<int>();
  // What the counts mean: at most one output per repeat, and `distinct` counts the outputs listed.
  if (r->distinct > r->repeats)
    return Status::invalid(
        fmt::format("{} is {}, more than the {} repeats", json_path(path, "distinct"), r->distinct, r->repeats));
  if (int(r->fingerprints.size()) > r->repeats)
    return Status::invalid(fmt::format("{} holds {} outputs, more than the {} repeats", json_path(path, "fingerprints"),
                                       r->fingerprints.size(), r->repeats));
  if (!r->fingerprints.empty() && r->distinct != count_distinct(r->fingerprints))
    return Status::invalid(fmt::format("{} is {}, but fingerprints holds {} distinct outputs",
                                       json_path(path, "distinct"), r->distinct, count_distinct(r->fingerprints)));
  return Status::ok();
}

Status optional_from_json(const nlohmann::json& j, Observation* r, const std::string& path) {
  using T = JsonType;
  if (Status st; !(st = check_key(j, "reason", T::kString, false, path)) ||
                 !(st = check_key(j, "describe", T::kString, false, path)) ||
                 !(st = check_key(j, "tracing", T::kString, false, path)) ||
                 !(st = check_key(j, "verdict", T::kString, false, path)) ||
                 !(st = check_key(j, "warmup_fingerprint", T::kString, false, path)) ||
                 !(st = check_key(j, "verdict_reason", T::kString, false, path)) ||
                 !(st = check_array_key(j, "seconds", T::kNumber, false, path)) ||
                 !(st = check_key(j, "details", T::kObject, false, path)) ||
                 !(st = check_key(j, "kernels", T::kArray, false, path)) ||
                 !(st = check_key(j, "batch_invariance", T::kObject, false, path)))
    return st;
  r->reason = j.value("reason", "");
  r->describe = j.value("describe", "");
  r->tracing = j.value("tracing", "");
  r->verdict.reset();
  if (j.contains("verdict")) {
    Verdict v;
    const std::string s = j["verdict"].get<std::string>();
    if (!parse_verdict(s, &v)) {
      return Status::invalid(json_path(path, "verdict") + " must be PASS, FAIL, EXPECTED, WARN or SKIP (got \"" +
                             s.substr(0, 40) + "\")");
    }
    r->verdict = v;
  }
  r->verdict_reason = j.value("verdict_reason", "");
  r->warmup_fingerprint = j.value("warmup_fingerprint", "");
  if (Fingerprint fp; !r->warmup_fingerprint.empty() && !Fingerprint::from_hex(r->warmup_fingerprint, &fp)) {
    return Status::invalid(json_path(path, "warmup_fingerprint") + " must be 32 hex digits");
  }
  if (j.contains("seconds")) r->seconds = j["seconds"].get<std::vector<double>>();
  if (j.contains("details"))
    for (auto& [k, v] : j["details"].items()) {
      DETAUDIT_RETURN_IF_ERROR(check_json(v, T::kString, json_path(json_path(path, "details"), k)));
      r->details[k] = v.get<std::string>();
    }
  if (j.contains("oracle"))
    DETAUDIT_RETURN_IF_ERROR(oracle_from_json(j["oracle"], &r->oracle, json_path(path, "oracle")));
  if (j.contains("kernels")) {
    for (size_t i = 0; i < j["kernels"].size(); ++i) {
      const auto& rep = j["kernels"][i];
      std::string rp = json_path(json_path(path, "kernels"), i);
      if (rep.is_null()) {  // tracing failed for this repeat
        r->kernels.push_back(std::nullopt);
        continue;
      }
      if (!rep.is_array()) {
        return Status::invalid(rp + " must be an array or null (got " + std::string(rep.type_name()) + ")");
      }
      std::vector<KernelRecord> ks(rep.size());
      for (size_t n = 0; n < rep.size(); ++n)
        DETAUDIT_RETURN_IF_ERROR(kernel_from_json(rep[n], &ks[n], json_path(rp, n)));
      r->kernels.push_back(std::move(ks));
    }
    if (r->kernels.size() > r->fingerprints.size())
      return Status::invalid(fmt::format("{}: {} kernel lists for {} repeats (one per repeat)",
                                         json_path(path, "kernels"), r->kernels.size(), r->fingerprints.size()));
    // Older versions kept only the repeats whose tracing worked, so their lists cannot be paired with
    // fingerprints: they are dropped rather than shown against the wrong outputs.
    if (!r->kernels.empty() && r->kernels.size() != r->fingerprints.size()) {
      r->tracing = fmt::format("kernel lists dropped: {} for {} repeats cannot be paired (results of an older detaudit)",
                               r->kernels.size(), r->fingerprints.size());
      r->kernels.clear();
    }
  }
  if (j.contains("batch_invariance")) {
    const auto& b = j["batch_invariance"];
    std::string bp = json_path(path, "batch_invariance");
    if (Status st; !(st = check_key(b, "rows_checked", T::kCount, true, bp)) ||
                   !(st = check_key(b, "rows_differing", T::kCount, true, bp)) ||
                   !(st = check_key(b, "invariant", T::kBoolean, false, bp)) ||
                   !(st = check_key(b, "rows_fingerprint", T::kString, false, bp)))
      return st;
    if (const std::string k = unknown_field(b, {"rows_checked", "rows_differing", "invariant", "rows_fingerprint"});
        !k.empty())
      return Status::invalid(fmt::format("{} is not a field of a batch invariance check", json_path(bp, k.substr(0, 40))));
    r->batch = BatchInvariance{b["rows_checked"].get<int>(), b["rows_differing"].get<int>(), b.value("rows_fingerprint", "")};
    if (Fingerprint fp; b.contains("rows_fingerprint") &&
                        (!Fingerprint::from_hex(r->batch->rows_fingerprint, &fp) || r->batch->rows_checked < 1))
      return Status::invalid(json_path(bp, "rows_fingerprint") +
                             " must be 32 hex digits, the fingerprint of at least one row computed alone");
    if (b.contains("invariant") && b["invariant"].get<bool>() != r->batch->invariant())
      return Status::invalid(fmt::format("{} is {}, but {} of its rows differ", json_path(bp, "invariant"),
                                         b["invariant"].get<bool>(), r->batch->rows_differing));
  }
  // What the worker says of tracing: "ok", "partial: ...", "tracing unavailable: ..." (or nothing); what loading
  // an older file says of its kernel lists: "kernel lists dropped: ...".
  if (!r->tracing.empty() && r->tracing != "ok" && r->tracing.rfind("partial: ", 0) != 0 &&
      r->tracing.rfind("tracing unavailable", 0) != 0 && r->tracing.rfind("kernel lists dropped: ", 0) != 0)
    return Status::invalid(fmt::format("{} must be ok, partial: ... or tracing unavailable: ... (got \"{}\")",
                                       json_path(path, "tracing"), r->tracing.substr(0, 40)));
  return Status::ok();
}

}  // namespace

Status from_json(const nlohmann::json& j, Observation* o, const std::string& where) {
  Observation r;
  if (Status st; !(st = check_json(j, JsonType::kObject, where)) || !(st = required_from_json(j, &r, where)) ||
                 !(st = optional_from_json(j, &r, where)))
    return st;
  if (const std::string k = unknown_field(j, {"workload",   "target",      "status",         "repeats",        "fingerprints",
                                       "distinct",   "reason",      "describe",       "tracing",        "verdict",
                                       "verdict_reason", "warmup_fingerprint", "seconds", "details", "oracle",
                                       "kernels",    "batch_invariance"}); !k.empty())
    return Status::invalid(fmt::format("{} is not a field of an observation", json_path(where, k)));
  for (size_t i = 0; i < r.seconds.size(); ++i)
    if (!plausible_seconds(r.seconds[i]))
      return Status::invalid(fmt::format("{} is {}: a time is 0 or a number of seconds from a nanosecond (a clock's "
                                         "tick) to a year",
                                         json_path(json_path(where, "seconds"), i), r.seconds[i]));
  *o = std::move(r);
  return Status::ok();
}

std::string unknown_field(const nlohmann::json& j, std::initializer_list<const char*> known) {
  for (auto& item : j.items()) {
    const std::string& k = item.key();  // not a structured binding: clang 14 cannot capture one in a lambda
    // A key named "" is as unknown as any other: shown as "" so that the caller's "not empty" sees it; a key
    // holding a control character or a byte beyond ASCII is shown as a JSON string of ASCII (a newline in it
    // would make the caller's one-line message two).
    if (std::none_of(known.begin(), known.end(), [&](const char* x) { return k == x; })) {
      if (k.empty()) return "\"\"";
      const bool plain = std::all_of(k.begin(), k.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u >= 0x20 && u < 0x7f;
      });
      return plain ? k : nlohmann::json(k).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    }
  }
  return "";
}

// What the counts of a cell mean, so that a file cannot say one thing in a count and another in what it
// lists: a cell that ran gave one output per repeat (and one time per repeat, when timed); a cell skipped,
// crashed or timed out gave none (the worker's outputs die with it); an error may come after some repeats;
// an oracle distance's relative error is never negative, and its histogram counts at least the mismatches.
Status check_observation_counts(const Observation& r, const std::string& where) {
  const size_t outputs = r.fingerprints.size(), repeats = size_t(r.repeats);
  if (r.status == ObsStatus::kOk && outputs != repeats)
    return Status::invalid(fmt::format("{}: status ok with {} outputs for {} repeats (a cell that ran gives one per "
                                       "repeat)",
                                       where, outputs, repeats));
  if ((r.status == ObsStatus::kSkipped || r.status == ObsStatus::kCrashed || r.status == ObsStatus::kTimeout) &&
      outputs != 0)
    return Status::invalid(fmt::format("{}: status {} yet {} outputs (such a cell gives none)", where,
                                       to_string(r.status), outputs));
  // A cell that did not finish says why, and was compared with no oracle (the worker compares when it finishes).
  if (r.status != ObsStatus::kOk && r.reason.empty())
    return Status::invalid(fmt::format("{}: status {} without a reason", where, to_string(r.status)));
  if (r.status == ObsStatus::kOk && !r.reason.empty())
    return Status::invalid(fmt::format("{}: status ok, yet a reason: only a cell that did not finish says why",
                                       json_path(where, "reason")));
  if (r.status != ObsStatus::kOk && r.oracle)
    return Status::invalid(fmt::format("{}: status {} yet an oracle distance (only a cell that finished is compared)",
                                       json_path(where, "oracle"), to_string(r.status)));
  if (r.seconds.size() > repeats || (r.status == ObsStatus::kOk && !r.seconds.empty() && r.seconds.size() != repeats))
    return Status::invalid(fmt::format("{}: {} times for {} repeats", json_path(where, "seconds"), r.seconds.size(),
                                       repeats));
  if (r.oracle) {
    const auto& d = *r.oracle;
    if (!(d.max_rel_err >= 0))
      return Status::invalid(fmt::format("{}: max_rel_err {} (a relative error is 0 or more)", json_path(where, "oracle"),
                                         d.max_rel_err));
    if (d.mismatched == 0 && (d.max_ulp != 0 || d.max_rel_err != 0 || d.err_ratio > 0))
      return Status::invalid(fmt::format("{}: no element mismatched, yet max_ulp {}, max_rel_err {}, err_ratio {}",
                                         json_path(where, "oracle"), d.max_ulp, d.max_rel_err, d.err_ratio));
    if (d.max_ulp == 0 && d.mismatched > 0 && d.max_rel_err > 0)
      return Status::invalid(fmt::format("{}: max_ulp 0 but {} elements mismatched with a relative error",
                                         json_path(where, "oracle"), d.mismatched));
    // An element some ULPs away differs by a nonzero amount (two NaNs and two zeros are 0 ULPs apart), NaN against
    // a number by an infinite one; and u ULPs from y reach at most max(|y|, smallest normal)·((1 + 2^-23)^u - 1)
    // away (each step is at most 2^-23 of the larger of its magnitude and the smallest normal, in float32 and
    // more so in float64), so a finite relative error stays below that of the largest ULP distance.
    if (d.max_ulp == kUlpInfinite && !std::isinf(d.max_rel_err))
      return Status::invalid(fmt::format("{}: max_ulp inf (NaN against a number), yet max_rel_err {}",
                                         json_path(where, "oracle"), d.max_rel_err));
    if (d.max_ulp != kUlpInfinite && d.max_ulp > 0 && d.max_rel_err == 0)
      return Status::invalid(fmt::format("{}: max_ulp {}, yet max_rel_err 0 (an element ULPs away differs)",
                                         json_path(where, "oracle"), d.max_ulp));
    if (const double most = std::expm1(double(d.max_ulp) * std::log1p(0x1p-23));
        d.max_ulp != kUlpInfinite && std::isfinite(d.max_rel_err) && d.max_rel_err > most * (1 + 1e-9))
      return Status::invalid(fmt::format("{}: max_rel_err {:g}, more than elements {} ULPs apart can differ ({:.3g})",
                                         json_path(where, "oracle"), d.max_rel_err, d.max_ulp, most));
    // A mismatch with a relative error is a nonzero difference, and a nonzero difference over a bound is above 0
    // (only a zero difference, two NaNs or signed zeros, has a ratio of 0; a difference the double range cannot
    // divide is left alone).
    if (d.err_ratio == 0 && d.mismatched > 0 && d.max_rel_err >= 1e-300)
      return Status::invalid(fmt::format("{}: err_ratio 0, but {} elements mismatched with a relative error of up to "
                                         "{:g} (a nonzero difference is above 0 times any bound)",
                                         json_path(where, "oracle"), d.mismatched, d.max_rel_err));
    // An error ratio is measured against a bound, and then every element has its ratio bucket.
    if ((d.err_ratio != -1) == d.ratio_hist.empty())
      return Status::invalid(fmt::format("{}.err_ratio is {} but ratio_hist is {}: both are measured against the error "
                                         "bound, or neither",
                                         json_path(where, "oracle"), d.err_ratio, d.ratio_hist.empty() ? "empty" : "filled"));
    uint64_t hist = 0;
    for (uint64_t c : d.ratio_hist) hist += c;
    // The histogram is of the output with the largest ratio: its highest bucket holds err_ratio (bucket 0 holds
    // the elements equal to the oracle's bits, so an output all in bucket 0 has a ratio of 0).
    if (!d.ratio_hist.empty() && hist > 0) {
      size_t top = d.ratio_hist.size() - 1;
      while (top > 0 && d.ratio_hist[top] == 0) --top;
      if (top == 0 ? d.err_ratio != 0 : ratio_bucket(d.err_ratio) != int(top))
        return Status::invalid(fmt::format("{}: err_ratio {} is not in ratio_hist's highest bucket ({})",
                                           json_path(where, "oracle"), d.err_ratio, top));
    }
    if (!d.ratio_hist.empty() && hist < d.mismatched)
      return Status::invalid(fmt::format("{}: ratio_hist counts {} elements, fewer than the {} mismatched",
                                         json_path(where, "oracle"), hist, d.mismatched));
    // ... and its elements out of bucket 0 are that output's mismatches, at most the most any output had.
    if (!d.ratio_hist.empty() && hist - d.ratio_hist[0] > d.mismatched)
      return Status::invalid(fmt::format("{}: ratio_hist counts {} elements whose bits differ, more than the {} "
                                         "mismatched",
                                         json_path(where, "oracle"), hist - d.ratio_hist[0], d.mismatched));
  }
  if (r.batch && r.batch->rows_differing > r.batch->rows_checked)
    return Status::invalid(fmt::format("{}: {} rows differing of {} checked", json_path(where, "batch_invariance"),
                                       r.batch->rows_differing, r.batch->rows_checked));
  return Status::ok();
}

}  // namespace detaudit
