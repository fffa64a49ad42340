#include "contract/results.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "contract/atomic_file.hpp"
#include "kernels/cuda/cuda.hpp"  // kCudaMachineKey

namespace detaudit {

std::string safe_file_name(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return o;
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json to_json(const Results& r) {
  nlohmann::json obs = nlohmann::json::array();
  for (auto& o : r.observations) obs.push_back(to_json(o));
  nlohmann::json training = nlohmann::json::array();
  for (auto& t : r.training) training.push_back(to_json(t));
  return {{"schema", kResultsSchema}, {"tool_version", r.tool_version}, {"tool_commit", r.tool_commit}, {"started_at", r.started_at},
          {"finished_at", r.finished_at}, {"command", r.command},        {"plan", r.plan},
          {"machine", r.machine},         {"observations", obs},         {"training", training},
          {"analysis", r.analysis}, {"oracle_failures", r.oracle_failures}};
}

namespace {

using T = JsonType;

struct KeyType {
  const char* key;
  JsonType type;
};

// Every key of the list that obj holds has its type (missing keys are allowed).
bool check_keys(const nlohmann::json& obj, std::initializer_list<KeyType> keys, const std::string& path, std::string* err) {
  for (auto& k : keys)
    if (!check_key(obj, k.key, k.type, false, path, err)) return false;
  return true;
}

bool check_machine(const nlohmann::json& m, std::string* err, const std::string& mp = "machine");

// "plan.sources" of a merged training analysis (detaudit analyze): where each source's runs came from.
bool check_sources(const nlohmann::json& p, std::string* err) {
  if (!check_array_key(p, "sources", T::kObject, false, "plan", err)) return false;
  if (!p.contains("sources")) return true;
  for (size_t i = 0; i < p["sources"].size(); ++i) {
    const auto& s = p["sources"][i];
    const std::string sp = json_path("plan.sources", i);
    if (!check_keys(s,
                    {{"dir", T::kString}, {"label", T::kString}, {"tool_version", T::kString}, {"tool_commit", T::kString},
                     {"started_at", T::kString}, {"finished_at", T::kString}},
                    sp, err) ||
        !check_key(s, "label", T::kString, true, sp, err) || !check_key(s, "machine", T::kObject, true, sp, err) ||
        !check_machine(s["machine"], err, json_path(sp, "machine")))
      return false;
  }
  return true;
}

// "plan": a probe plan (suite, targets, workloads, repeats, timeout) or a training design.
bool check_plan(const nlohmann::json& p, std::string* err) {
  if (!check_json(p, T::kObject, "plan", err) ||
      !check_keys(p, {{"suite", T::kString}, {"kind", T::kString}, {"repeats", T::kCount}, {"timeout_s", T::kNumber},
                      {"runs", T::kCount}, {"data_fingerprint", T::kString}},
                  "plan", err) ||
      !check_sources(p, err) ||
      !check_array_key(p, "targets", T::kString, false, "plan", err) ||
      !check_array_key(p, "workloads", T::kString, false, "plan", err) ||
      !check_key(p, "design", T::kObject, false, "plan", err))
    return false;
  if (!p.contains("design")) return true;
  const auto& d = p["design"];
  return check_keys(d,
                    {{"model", T::kString},
                     {"design", T::kString},
                     {"seeds", T::kCount},
                     {"batches", T::kCount},
                     {"window", T::kCount},
                     {"replicates", T::kCount},
                     {"batch_size", T::kCount},
                     {"data_seed", T::kUnsigned},
                     {"data_dir", T::kString},
                     {"init_seed_base", T::kUnsigned}},
                    "plan.design", err) &&
         check_array_key(d, "targets", T::kString, false, "plan.design", err);
}

// "machine": the fingerprint of probes/env.cpp. "libraries" holds strings, numbers and booleans.
bool check_machine(const nlohmann::json& m, std::string* err, const std::string& mp) {
  if (!check_json(m, T::kObject, mp, err) ||
      !check_keys(m,
                  {{"hostname", T::kString},  {"os", T::kString},        {"cpu_model", T::kString},
                   {"cpu_vendor", T::kString}, {"compiler", T::kString},  {"hwloc", T::kString},
                   {"topology_error", T::kString}, {kCudaMachineKey, T::kString},  {"packages", T::kCount},
                   {"cores", T::kCount},       {"pus", T::kCount},        {"numa_nodes", T::kCount},
                   {"libraries", T::kObject}},
                  mp, err) ||
      !check_array_key(m, "cpu_features", T::kString, false, mp, err) ||
      !check_array_key(m, "caches", T::kObject, false, mp, err) || !check_array_key(m, "gpus", T::kObject, false, mp, err))
    return false;
  if (m.contains("libraries"))
    for (auto& [k, v] : m["libraries"].items())
      if (!v.is_primitive() || v.is_null()) {
        *err = fmt::format("{} must be a string, number or boolean (got {})", json_path(mp + ".libraries", k), v.type_name());
        return false;
      }
  if (m.contains("caches"))
    for (size_t i = 0; i < m["caches"].size(); ++i)
      if (!check_keys(m["caches"][i],
                      {{"level", T::kCount}, {"size_bytes", T::kUnsigned}, {"line_bytes", T::kCount}, {"count", T::kCount}},
                      json_path(mp + ".caches", i), err))
        return false;
  if (m.contains("gpus"))
    for (size_t i = 0; i < m["gpus"].size(); ++i)
      if (!check_keys(m["gpus"][i],
                      {{"index", T::kCount},        {"name", T::kString},          {"uuid", T::kString},
                       {"pci_bus_id", T::kString},  {"compute_capability", T::kString}, {"sm_count", T::kCount},
                       {"memory_bytes", T::kUnsigned}, {"l2_bytes", T::kCount},    {"clock_khz", T::kCount},
                       {"memory_clock_khz", T::kCount}, {"memory_bus_width", T::kCount}, {"ecc", T::kBoolean},
                       {"local_cpuset", T::kString}},
                      json_path(mp + ".gpus", i), err))
        return false;
  return true;
}

// The whole document, field by field against the results contract (README "Results contract").
bool results_from_json(nlohmann::json& j, Results* out, std::string* err) {
  Results r;
  if (!check_keys(j,
                  {{"tool_version", T::kString},
                   {"tool_commit", T::kString},
                   {"started_at", T::kString},
                   {"finished_at", T::kString},
                   {"command", T::kString},
                   {"training", T::kArray},
                   {"analysis", T::kObject},
                   {"oracle_failures", T::kObject}},
                  "", err) ||
      !check_key(j, "observations", T::kArray, true, "", err))
    return false;
  r.tool_version = j.value("tool_version", "");
  r.tool_commit = j.value("tool_commit", "");
  r.started_at = j.value("started_at", "");
  r.finished_at = j.value("finished_at", "");
  r.command = j.value("command", "");
  if (j.contains("plan") && !check_plan(j["plan"], err)) return false;
  if (j.contains("machine") && !check_machine(j["machine"], err)) return false;
  r.plan = j.value("plan", nlohmann::json::object());
  r.machine = j.value("machine", nlohmann::json::object());
  if (j.contains("training"))
    for (size_t i = 0; i < j["training"].size(); ++i) {
      TrainingRun t;
      if (!from_json(j["training"][i], &t, err, json_path("training", i))) return false;
      r.training.push_back(std::move(t));
    }
  r.analysis = j.value("analysis", nlohmann::json::object());
  if (j.contains("oracle_failures"))
    for (auto& [k, v] : j["oracle_failures"].items()) {
      if (!check_json(v, T::kString, json_path("oracle_failures", k), err)) return false;
      r.oracle_failures[k] = v.get<std::string>();
    }
  const auto& obs = j["observations"];
  r.observations.reserve(obs.size());
  for (size_t i = 0; i < obs.size(); ++i) {
    Observation o;
    if (!from_json(obs[i], &o, err, json_path("observations", i))) return false;
    r.observations.push_back(std::move(o));
  }
  *out = std::move(r);
  return true;
}

}  // namespace

bool load_json_document(const std::string& path, const std::string& schema, const std::string& what,
                        nlohmann::json* out, std::string* err) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    *err = path + ": is a directory, not a " + what;
    return false;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *err = path + ": cannot open (" + std::strerror(errno) + ")";
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    *out = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    *err = path + ": not valid JSON (truncated or corrupt): " + e.what();
    return false;
  }
  if (!out->is_object() || !out->contains("schema") || (*out)["schema"] != schema) {
    *err = path + ": not a detaudit " + what + " (expected \"schema\": \"" + schema + "\")";
    return false;
  }
  return true;
}

bool load_results(const std::string& path, Results* out, std::string* err) {
  nlohmann::json j;
  if (!load_json_document(path, kResultsSchema, "results file", &j, err)) return false;
  std::string e;
  if (!results_from_json(j, out, &e)) {
    *err = path + ": " + e;
    return false;
  }
  return true;
}

bool save_results(const std::string& path, const Results& r, std::string* err) {
  return write_file_atomic(path, to_json(r).dump(1) + "\n", err);
}

}  // namespace detaudit
