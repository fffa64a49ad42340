#include "probes/observation.hpp"

#include <cmath>
#include <set>

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

KernelRecord kernel_from_json(const nlohmann::json& j) {
  KernelRecord k;
  k.name = j.value("name", "");
  for (int i = 0; i < 3; ++i) {
    k.grid[i] = j.at("grid").at(i).get<uint32_t>();
    k.block[i] = j.at("block").at(i).get<uint32_t>();
  }
  k.registers = j.value("registers", 0u);
  k.static_smem = j.value("static_smem", 0u);
  k.dynamic_smem = j.value("dynamic_smem", 0u);
  k.duration_ns = j.value("duration_ns", uint64_t(0));
  return k;
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
                   {"mismatched", o.oracle->mismatched}};
  } else {
    j["oracle"] = nullptr;
  }
  if (!o.tracing.empty()) j["tracing"] = o.tracing;
  nlohmann::json ks = nlohmann::json::array();
  for (auto& rep : o.kernels) {
    nlohmann::json r = nlohmann::json::array();
    for (auto& k : rep) r.push_back(to_json(k));
    ks.push_back(r);
  }
  j["kernels"] = ks;
  if (o.batch)
    j["batch_invariance"] = {{"rows_checked", o.batch->rows_checked},
                             {"rows_differing", o.batch->rows_differing},
                             {"invariant", o.batch->invariant()}};
  return j;
}

bool from_json(const nlohmann::json& j, Observation* o, std::string* err) {
  try {
    Observation r;
    r.workload = j.at("workload").get<std::string>();
    r.target = j.at("target").get<std::string>();
    if (!parse_obs_status(j.at("status").get<std::string>(), &r.status)) {
      *err = "unknown status '" + j.at("status").get<std::string>() + "'";
      return false;
    }
    r.reason = j.value("reason", "");
    r.repeats = j.at("repeats").get<int>();
    r.fingerprints = j.at("fingerprints").get<std::vector<std::string>>();
    r.distinct = j.at("distinct").get<int>();
    r.seconds = j.value("seconds", std::vector<double>{});
    r.details = j.value("details", std::map<std::string, std::string>{});
    r.describe = j.value("describe", "");
    r.tracing = j.value("tracing", "");
    if (j.contains("oracle") && !j["oracle"].is_null()) {
      OracleDistance d;
      const auto& oj = j["oracle"];
      d.max_ulp = oj.at("max_ulp").is_string() ? kUlpInfinite : oj.at("max_ulp").get<uint64_t>();
      d.max_rel_err = num_from(oj.at("max_rel_err"));
      d.mismatched = oj.at("mismatched").get<uint64_t>();
      r.oracle = d;
    }
    if (j.contains("kernels"))
      for (auto& rep : j["kernels"]) {
        std::vector<KernelRecord> ks;
        for (auto& k : rep) ks.push_back(kernel_from_json(k));
        r.kernels.push_back(std::move(ks));
      }
    if (j.contains("batch_invariance")) {
      BatchInvariance b;
      b.rows_checked = j["batch_invariance"].at("rows_checked").get<int>();
      b.rows_differing = j["batch_invariance"].at("rows_differing").get<int>();
      r.batch = b;
    }
    *o = std::move(r);
    return true;
  } catch (const std::exception& e) {
    *err = std::string("malformed observation: ") + e.what();
    return false;
  }
}

}  // namespace detaudit
