#include "contract/results.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "contract/atomic_file.hpp"
#include "contract/plan.hpp"
#include "contract/spec.hpp"
#include "kernels/cpu/native.hpp"    // parse_cpu_isa
#include "kernels/cuda/cuda.hpp"  // kCudaMachineKey
#include "kernels/fingerprint.hpp"
#include "kernels/input_file.hpp"

namespace detaudit {

std::string safe_file_name(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return o;
}

std::string utc_now_iso8601() { return utc_iso8601(std::time(nullptr)); }

int first_control_byte(const std::string& s, bool line_breaks) {
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if ((u < 0x20 && !(line_breaks && (ch == '\n' || ch == '\t'))) || u == 0x7f) return u;
  }
  return -1;
}

std::string shown_safely(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u < 0x80) {
      if ((u < 0x20 && u != '\n' && u != '\t') || u == 0x7f)
        out += fmt::format("\\x{:02x}", u);
      else
        out += char(u);
      ++i;
      continue;
    }
    // UTF-8: a whole, shortest-form sequence is shown as it is, but a C1 control (U+0080..U+009F, which a
    // terminal obeys as ESC would be) as \u00NN; a byte of no valid sequence as \xNN.
    const size_t len = u >= 0xc2 && u <= 0xdf ? 2 : u >= 0xe0 && u <= 0xef ? 3 : u >= 0xf0 && u <= 0xf4 ? 4 : 0;
    bool whole = len > 0 && i + len <= text.size();
    uint32_t cp = len == 2 ? (u & 0x1f) : len == 3 ? (u & 0x0f) : (u & 0x07);
    for (size_t k = 1; whole && k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      whole = (c & 0xc0) == 0x80;
      cp = (cp << 6) | (c & 0x3f);
    }
    whole = whole && !(len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!whole) {
      out += fmt::format("\\x{:02x}", u);
      ++i;
    } else if (cp <= 0x9f) {
      out += fmt::format("\\u{:04x}", cp);
      i += len;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
  return out;
}

bool is_version_text(const std::string& v) {
  return !v.empty() && v.size() <= 40 && std::isdigit(static_cast<unsigned char>(v[0])) &&
         std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+';
  });
}

bool version_older(const std::string& a, const std::string& b) {
  auto numbers = [](const std::string& v) {
    std::array<long, 3> n{0, 0, 0};
    size_t at = 0;
    for (long& part : n) {
      size_t end = at;
      while (end < v.size() && end - at < 9 && std::isdigit(static_cast<unsigned char>(v[end]))) ++end;
      if (end == at) break;
      part = std::stol(v.substr(at, end - at));
      if (end >= v.size() || v[end] != '.') break;
      at = end + 1;
    }
    return n;
  };
  return numbers(a) < numbers(b);
}

bool is_utc_iso8601(const std::string& t) {
  static const char* const kShape = "dddd-dd-ddTdd:dd:ddZ";
  if (t.size() != std::strlen(kShape)) return false;
  for (size_t i = 0; i < t.size(); ++i)
    if (kShape[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(t[i])) : t[i] != kShape[i]) return false;
  // A time that exists: a month of the year, a day of that month (29 February in leap years only), an hour
  // of the day, a minute and a second of it (no leap second: no clock detaudit reads gives one).
  const int year = std::stoi(t.substr(0, 4)), month = std::stoi(t.substr(5, 2)), day = std::stoi(t.substr(8, 2));
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDays[month - 1] + (month == 2 && leap)) return false;
  return std::stoi(t.substr(11, 2)) < 24 && std::stoi(t.substr(14, 2)) < 60 && std::stoi(t.substr(17, 2)) < 60;
}

Status check_run_times(const std::string& started_at, const std::string& finished_at, const std::string& where) {
  const std::string tomorrow = utc_iso8601(std::time(nullptr) + 86400);
  for (auto [k, t] : {std::pair{"started_at", &started_at}, std::pair{"finished_at", &finished_at}}) {
    if (!t->empty() && !is_utc_iso8601(*t))
      return Status::invalid(fmt::format("{}: {} '{}' is not a time (YYYY-MM-DDTHH:MM:SSZ)", where, k, *t));
    if (!t->empty() && *t > tomorrow) return Status::invalid(fmt::format("{}: {} {} is in the future", where, k, *t));
  }
  if (!started_at.empty() && !finished_at.empty() && finished_at < started_at)
    return Status::invalid(fmt::format("{}: finished_at {} is before started_at {}", where, finished_at, started_at));
  return Status::ok();
}

std::vector<std::string> source_labels(const std::vector<std::string>& hosts) {
  std::map<std::string, int> seen;
  std::vector<std::string> labels;
  for (const std::string& host : hosts) {
    const int n = ++seen[host];
    labels.push_back(n == 1 ? host : fmt::format("{}#{}", host, n));
  }
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (labels[i] == labels[j]) labels[i] = fmt::format("{}#{}", labels[i], i + 1);
  return labels;
}

std::optional<int64_t> iso8601_seconds(const std::string& t) {
  if (!is_utc_iso8601(t)) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::stoi(t.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(t.substr(5, 2)) - 1;
  tm.tm_mday = std::stoi(t.substr(8, 2));
  tm.tm_hour = std::stoi(t.substr(11, 2));
  tm.tm_min = std::stoi(t.substr(14, 2));
  tm.tm_sec = std::stoi(t.substr(17, 2));
  return int64_t(timegm(&tm));
}

std::string utc_iso8601(std::time_t t) {
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
Status check_keys(const nlohmann::json& obj, std::initializer_list<KeyType> keys, const std::string& path) {
  for (auto& k : keys) DETAUDIT_RETURN_IF_ERROR(check_key(obj, k.key, k.type, false, path));
  return Status::ok();
}

Status check_machine(const nlohmann::json& m, const std::string& mp = "machine");

// "plan.sources" of a merged training analysis (detaudit analyze): where each source's runs came from, each labelled
// as analyze labels it and run before it finished.
Status check_sources(const nlohmann::json& p) {
  DETAUDIT_RETURN_IF_ERROR(check_array_key(p, "sources", T::kObject, false, "plan"));
  if (!p.contains("sources")) return Status::ok();
  for (size_t i = 0; i < p["sources"].size(); ++i) {
    const auto& s = p["sources"][i];
    const std::string sp = json_path("plan.sources", i);
    if (Status st; !(st = check_keys(s,
                                     {{"dir", T::kString},
                                      {"label", T::kString},
                                      {"tool_version", T::kString},
                                      {"tool_commit", T::kString},
                                      {"started_at", T::kString},
                                      {"finished_at", T::kString}},
                                     sp)) ||
                   !(st = check_key(s, "label", T::kString, true, sp)) ||
                   !(st = check_key(s, "machine", T::kObject, true, sp)) ||
                   !(st = check_machine(s["machine"], json_path(sp, "machine"))))
      return st;
    // One directory merged twice would count its design twice.
    for (size_t k = 0; k < i; ++k)
      if (s.contains("dir") && p["sources"][k].value("dir", "") == s["dir"].get<std::string>())
        return Status::invalid(fmt::format("{}.dir is {}'s: one directory merged twice", sp, json_path("plan.sources", k)));
    DETAUDIT_RETURN_IF_ERROR(check_run_times(s.value("started_at", ""), s.value("finished_at", ""), sp));
  }
  std::vector<std::string> hosts;
  for (const auto& s : p["sources"]) hosts.push_back(s["machine"].value("hostname", std::string("machine")));
  const std::vector<std::string> labels = source_labels(hosts);
  for (size_t i = 0; i < labels.size(); ++i)
    if (p["sources"][i]["label"].get<std::string>() != labels[i])
      return Status::invalid(fmt::format("{}.label is \"{}\", but analyze labels the source of host {} there \"{}\"",
                                         json_path("plan.sources", i),
                                         shown_safely(p["sources"][i]["label"].get<std::string>().substr(0, 40)),
                                         shown_safely(hosts[i]), labels[i]));
  return Status::ok();
}

}  // namespace

// "plan": a probe plan (suite, targets, workloads, repeats, timeout) or a training design.
Status check_results_plan(const nlohmann::json& p) {
  if (Status st; !(st = check_json(p, T::kObject, "plan")) ||
                 !(st = check_keys(p,
                                   {{"suite", T::kString},
                                    {"custom", T::kBoolean},
                                    {"kind", T::kString},
                                    {"repeats", T::kCount},
                                    {"timeout_s", T::kNumber},
                                    {"runs", T::kCount},
                                    {"data_fingerprint", T::kString},
                                    {"data_examples", T::kUnsigned}},
                                   "plan")) ||
                 !(st = check_sources(p)) || !(st = check_array_key(p, "targets", T::kString, false, "plan")) ||
                 !(st = check_array_key(p, "workloads", T::kString, false, "plan")) ||
                 !(st = check_key(p, "design", T::kObject, false, "plan")))
    return st;
  if (p.contains("timeout_s") && !(p["timeout_s"].get<double>() >= 0.001 && p["timeout_s"].get<double>() <= kLongestSeconds))
    return Status::invalid(
        fmt::format("plan.timeout_s is {}: a time limit is 0.001 s (the least --timeout) to a year", p["timeout_s"].dump()));
  if (p.contains("repeats") && p["repeats"].get<int64_t>() < 1)
    return Status::invalid("plan.repeats is 0: a plan repeats each cell at least once");
  if (const std::string k = unknown_field(p, {"suite", "custom", "kind", "targets", "workloads", "repeats", "timeout_s",
                                              "runs", "data_fingerprint", "data_examples", "design", "sources"});
      !k.empty())
    return Status::invalid(fmt::format("plan.{} is not a field of a plan", k));
  if (p.contains("suite") && !is_plan_suite(p["suite"].get<std::string>()))
    return Status::invalid(fmt::format("plan.suite \"{}\" is not a suite (quick, full, or import)",
                                       shown_safely(p["suite"].get<std::string>().substr(0, 80))));
  if (p.contains("custom") && (!p.contains("suite") || p["suite"] == "import"))
    return Status::invalid("plan.custom is set, but the plan is no suite's (custom is a suite with its targets or workloads replaced)");
  // (A kind other than train is refused with the results, naming the kind.)
  if (p.contains("data_examples") && !p.contains("kind"))
    return Status::invalid("plan.data_examples is set, but the plan is no training design's (kind train)");
  // A design trains on two batches at least, and loads at most 1 GiB of data, of at least a byte an example.
  if (p.contains("data_examples") &&
      (p["data_examples"].get<uint64_t>() < 2 || p["data_examples"].get<uint64_t>() > (uint64_t(1) << 30)))
    return Status::invalid(fmt::format("plan.data_examples is {}: a design trains on 2 examples at least, and on "
                                       "1 GiB of data at most (2^30 examples of a byte)",
                                       p["data_examples"].get<uint64_t>()));
  if (p.value("kind", "") == "train")
    for (const char* k : {"suite", "custom", "targets", "workloads", "repeats", "timeout_s"})
      if (p.contains(k))
        return Status::invalid(fmt::format("plan.{} is a probe plan's field, but the plan is a training design's (kind train)", k));
  // A probe plan names what it runs: no target or no workload is a plan of nothing.
  for (const char* k : {"targets", "workloads"})
    if (p.contains(k) && p[k].empty()) return Status::invalid(fmt::format("plan.{} is empty: a plan names what it runs", k));
  if (!p.contains("design")) return Status::ok();
  const auto& d = p["design"];
  if (const std::string k = unknown_field(d, {"model", "design", "targets", "seeds", "batches", "window", "replicates",
                                              "batch_size", "data_seed", "data_dir", "init_seed_base", "conditions",
                                              "noise_every", "prednet_config"});
      !k.empty())
    return Status::invalid(fmt::format("plan.design.{} is not a field of a training design", k));
  DETAUDIT_RETURN_IF_ERROR(check_keys(d,
                                      {{"model", T::kString},
                                       {"design", T::kString},
                                       {"seeds", T::kCount},
                                       {"batches", T::kCount},
                                       {"window", T::kCount},
                                       {"replicates", T::kCount},
                                       {"batch_size", T::kCount},
                                       {"data_seed", T::kUnsigned},
                                       {"data_dir", T::kString},
                                       {"init_seed_base", T::kUnsigned},
                                       {"conditions", T::kString},
                                       {"noise_every", T::kCount},
                                       {"prednet_config", T::kString}},
                                      "plan.design"));
  if (d.contains("conditions")) {
    const std::string c = d["conditions"].get<std::string>();
    for (size_t i = 0; i < c.size(); ++i)  // each known, and its first place its only one
      if (std::string("abcde").find(c[i]) == std::string::npos || c.find(c[i]) != i)
        return Status::invalid(fmt::format("plan.design.conditions is \"{}\": each of a, b, c, d, e at most once", c));
    if (c.empty()) return Status::invalid("plan.design.conditions is empty: a design runs at least one condition");
  }
  if (d.contains("prednet_config") && d.value("model", "") != "prednet")
    return Status::invalid("plan.design.prednet_config is set, but the model is not prednet");
  if (d.contains("prednet_config")) {
    const std::string c = d["prednet_config"].get<std::string>();
    if (c != "quick" && c != "tiny" && c != "paper")
      return Status::invalid(fmt::format("plan.design.prednet_config must be quick, tiny or paper (got \"{}\")", c));
  }
  for (const char* k : {"seeds", "batches", "window", "replicates", "batch_size"})
    if (d.contains(k) && d[k].get<int64_t>() < 1)
      return Status::invalid(fmt::format("plan.design.{} is {}: a design has at least 1", k, d[k].dump()));
  DETAUDIT_RETURN_IF_ERROR(check_array_key(d, "targets", T::kString, false, "plan.design"));
  if (d.contains("targets") && d["targets"].empty()) return Status::invalid("plan.design.targets is empty");
  if (Fingerprint fp; p.contains("data_fingerprint") && !Fingerprint::from_hex(p["data_fingerprint"].get<std::string>(), &fp))
    return Status::invalid("plan.data_fingerprint must be 32 hex digits");
  // plan.runs: how many runs the design plans, at most targets x seeds x (replicates under a nondeterministic
  // condition, else 1) summed over its conditions, once per source of a merged analysis.
  if (p.contains("runs") && d.contains("targets") && d.contains("seeds")) {
    const uint64_t targets = d["targets"].size(), seeds = d["seeds"].get<uint64_t>(),
                   reps = d.value("replicates", uint64_t(1));
    uint64_t most = 0;
    for (char c : d.value("conditions", std::string("abcde"))) most += targets * seeds * (condition_nondeterministic(std::string(1, c)) ? reps : 1);
    most *= std::max<uint64_t>(1, p.value("sources", nlohmann::json::array()).size());
    if (p["runs"].get<uint64_t>() > most)
      return Status::invalid(fmt::format("plan.runs is {}, more than the {} runs its design has", p["runs"].get<uint64_t>(), most));
    // One design (no merge) plans every run of its design: a target added to the design without its runs, or
    // a run count edited, contradicts it.
    if (!p.contains("sources") && p["runs"].get<uint64_t>() < most)
      return Status::invalid(fmt::format("plan.runs is {}, fewer than the {} runs its design has (a design plans every "
                                         "one of them)",
                                         p["runs"].get<uint64_t>(), most));
  }
  return Status::ok();
}

Status check_design_run(const std::string& condition, uint64_t seed, int64_t replicate, const nlohmann::json& d,
                        const std::string& path) {
  auto bad = [&](const char* field, const std::string& what) {
    return Status::invalid(fmt::format("{} {}", json_path(path, field), what));
  };
  static const std::string kConditions = "abcde";
  const std::string conds = d.value("conditions", kConditions);
  if (condition.size() != 1 || conds.find(condition) == std::string::npos ||
      kConditions.find(condition) == std::string::npos)
    return bad("condition", fmt::format("\"{}\" is not a condition of the design ({})", shown_safely(condition.substr(0, 20)), conds));
  const bool random = condition_random_init(condition), nondet = condition_nondeterministic(condition);
  const uint64_t base = d.value("init_seed_base", uint64_t(1000));
  const uint64_t seeds = d.value("seeds", uint64_t(0)), replicates = d.value("replicates", uint64_t(1));
  if (d.contains("seeds")) {
    if (random ? (seed < base || seed >= base + seeds) : seed != base)
      return bad("seed", fmt::format("{} is not a seed of the design ({} seeds from {}; fixed initial weights use {})",
                                     seed, seeds, base, base));
    // (a) repeats each seed; (c) runs its one seed seeds x replicates times (older designs: seeds times);
    // (b), (d), (e) once per seed.
    const uint64_t reps = random ? (nondet ? replicates : 1) : (nondet ? seeds * replicates : seeds);
    if (replicate < 0 || uint64_t(replicate) >= reps)
      return bad("replicate",
                 fmt::format("{} is not below the {} replicates condition ({}) runs", replicate, reps, condition));
  }
  return Status::ok();
}

namespace {

// A training run against the design it belongs to (plan.design): its model and design, a condition of the
// design with that condition's initial weights and nondeterminism, a seed and replicate the design runs
// (random init: seeds base .. base + seeds - 1, replicates 0 .. replicates - 1 under (a), else 0; fixed
// init: the base seed, replicates 0 .. seeds - 1), its batches and window, a curve no longer than its
// batches, its data seed. Every run names its seed and replicate (a run that did not train too: they say which
// run it was); a field the design fixes (model, design, batches, window, data_seed) and the run's JSON `j` does
// not hold is
// taken from the design, so the run saves and loads again as it is. A field that disagrees is one line
// naming it.
Status check_run_against_design(const nlohmann::json& j, TrainingRun& t, const nlohmann::json& d,
                                const std::string& path) {
  auto bad = [&](const char* field, const std::string& what) {
    return Status::invalid(fmt::format("{} {}", json_path(path, field), what));
  };
  for (const char* k : {"seed", "replicate"})
    if (!j.contains(k))
      return Status::invalid(json_path(path, k) + " is missing (it says which run of the design this is)");
  if (!j.contains("model") && d.contains("model") && d["model"].is_string()) t.model = d["model"].get<std::string>();
  if (!j.contains("design") && d.contains("design") && d["design"].is_string())
    t.design = d["design"].get<std::string>();
  if (!j.contains("batches") && d.contains("batches")) t.batches = d["batches"].get<int>();
  if (!j.contains("window") && d.contains("window")) t.window = d["window"].get<int>();
  for (const char* k : {"model", "design"})
    if (j.contains(k) && d.contains(k) && d[k] != (std::string(k) == "model" ? t.model : t.design))
      return bad(k, fmt::format("is not the design's ({})", d[k].dump()));
  DETAUDIT_RETURN_IF_ERROR(check_design_run(t.condition, t.seed, t.replicate, d, path));
  const bool random = condition_random_init(t.condition), nondet = condition_nondeterministic(t.condition);
  if (j.contains("init") && t.random_init != random)
    return bad("init", fmt::format("is not condition ({})'s", t.condition));
  if (j.contains("nondeterminism") && t.nondeterministic != nondet)
    return bad("nondeterminism", fmt::format("is not condition ({})'s", t.condition));
  if (j.contains("batches") && d.contains("batches") && t.batches != d["batches"].get<int>())
    return bad("batches", fmt::format("{} is not the design's {}", t.batches, d["batches"].get<int>()));
  if (j.contains("window") && d.contains("window") && t.window != d["window"].get<int>())
    return bad("window", fmt::format("{} is not the design's {}", t.window, d["window"].get<int>()));
  if (t.curve.size() > size_t(std::max(t.batches, 0)))
    return bad("curve", fmt::format("holds {} points, more than the {} batches", t.curve.size(), t.batches));
  if (!j.contains("data_seed") && d.contains("data_seed") && d["data_seed"].is_number_unsigned())
    t.data_seed = d["data_seed"].get<uint64_t>();  // taken from the design, as model and batches are
  if (j.contains("data_seed") && d.contains("data_seed") && d["data_seed"].is_number_unsigned() &&
      t.data_seed != d["data_seed"].get<uint64_t>())
    return bad("data_seed", fmt::format("{} is not the design's {}", t.data_seed, d["data_seed"].get<uint64_t>()));
  return Status::ok();
}

// "machine": the fingerprint of probes/env.cpp. "libraries" holds text, save CUDA's built flag and versions.
// What a machine description can check against itself: the compiler it names twice, and the instruction
// set detaudit's own kernels resolved to (libraries.cpu_isa_auto) against the CPU's features.
Status check_machine_consistent(const nlohmann::json& m, const std::string& mp) {
  const nlohmann::json libs = m.value("libraries", nlohmann::json::object());
  // The model is written without surrounding blanks: a padded name is the same CPU under another key.
  if (m.contains("cpu_model") && m["cpu_model"].is_string()) {
    const std::string model = m["cpu_model"].get<std::string>();
    if (!model.empty() && (std::isspace((unsigned char)model.front()) || std::isspace((unsigned char)model.back())))
      return Status::invalid(fmt::format("{} \"{}\" begins or ends with a blank (detaudit writes the name without them)",
                                         json_path(mp, "cpu_model"), shown_safely(model.substr(0, 60))));
  }
  // The CPU's vendor (CPUID's vendor string) and the model name its brand string gives are one maker's.
  if (m.contains("cpu_vendor") && m["cpu_vendor"].is_string() && m.contains("cpu_model") && m["cpu_model"].is_string()) {
    const std::string vendor = m["cpu_vendor"].get<std::string>(), model = m["cpu_model"].get<std::string>();
    if ((vendor == "GenuineIntel" && model.find("AMD") != std::string::npos) ||
        (vendor == "AuthenticAMD" && model.find("Intel") != std::string::npos))
      return Status::invalid(fmt::format("{} \"{}\" is not a CPU of {} {}", json_path(mp, "cpu_model"),
                                         shown_safely(model.substr(0, 60)), json_path(mp, "cpu_vendor"), vendor));
  }
  if (m.contains("compiler") && libs.contains("compiler") && libs["compiler"] != m["compiler"])
    return Status::invalid(fmt::format("{} {} contradicts {} {}", json_path(mp, "compiler"), m["compiler"].dump(),
                                       json_path(mp + ".libraries", "compiler"), libs["compiler"].dump()));
  if (m.contains("cpu_features") && libs.contains("cpu_isa_auto") && libs["cpu_isa_auto"].is_string()) {
    const std::string isa = libs["cpu_isa_auto"].get<std::string>();
    auto has = [&](const char* f) {
      return std::any_of(m["cpu_features"].begin(), m["cpu_features"].end(), [&](const nlohmann::json& x) { return x == f; });
    };
    const char* missing = isa == "avx512" && !has("avx512f") ? "avx512f"
                          : isa == "avx2" && !has("avx2")    ? "avx2"
                          : isa == "avx2" && !has("fma")     ? "fma"
                                                             : nullptr;
    if (missing)
      return Status::invalid(fmt::format("{} \"{}\" contradicts {}, which lacks {}",
                                         json_path(mp + ".libraries", "cpu_isa_auto"), isa,
                                         json_path(mp, "cpu_features"), missing));
    // And the reverse: detaudit's kernels resolve auto to the widest set the CPU has (AVX-512 with AVX-512F and
    // FMA, else AVX2 with AVX2 and FMA, else scalar), never a narrower one.
    const char* widest = has("avx512f") && has("fma") ? "avx512" : has("avx2") && has("fma") ? "avx2" : "scalar";
    if (isa != widest)
      return Status::invalid(fmt::format("{} \"{}\", but with {} detaudit's kernels resolve auto to {}",
                                         json_path(mp + ".libraries", "cpu_isa_auto"), shown_safely(isa.substr(0, 20)),
                                         json_path(mp, "cpu_features"), widest));
  }
  return Status::ok();
}

Status check_machine(const nlohmann::json& m, const std::string& mp) {
  if (Status st; !(st = check_json(m, T::kObject, mp)) ||
                 !(st = check_keys(m,
                                   {{"hostname", T::kString},
                                    {"os", T::kString},
                                    {"cpu_model", T::kString},
                                    {"cpu_vendor", T::kString},
                                    {"compiler", T::kString},
                                    {"hwloc", T::kString},
                                    {"topology_error", T::kString},
                                    {kCudaMachineKey, T::kString},
                                    {"packages", T::kCount},
                                    {"cores", T::kCount},
                                    {"pus", T::kCount},
                                    {"numa_nodes", T::kCount},
                                    {"libraries", T::kObject}},
                                   mp)) ||
                 !(st = check_array_key(m, "cpu_features", T::kString, false, mp)) ||
                 !(st = check_array_key(m, "caches", T::kObject, false, mp)) ||
                 !(st = check_array_key(m, "gpus", T::kObject, false, mp)))
    return st;
  if (const std::string k = unknown_field(m, {"hostname", "os", "cpu_model", "cpu_vendor", "compiler", "hwloc",
                                              "topology_error", kCudaMachineKey, "packages", "cores", "pus",
                                              "numa_nodes", "libraries", "cpu_features", "caches", "gpus"});
      !k.empty())
    return Status::invalid(fmt::format("{} is not a field of a machine description",
                                       json_path(mp, shown_safely(k.substr(0, 40)))));
  // A host name is letters, digits, dots and dashes, and the CPU's name and vendor (from /proc/cpuinfo) are
  // printable ASCII: a control character, a line separator or any byte beyond ASCII is no machine's (and would reach
  // a terminal where a report or a fleet names the node or the machine).
  for (const char* k : {"hostname", "cpu_model", "cpu_vendor"})
    if (m.contains(k)) {
      const std::string v = m[k].get<std::string>();
      for (const char ch : v)
        if (const auto u = static_cast<unsigned char>(ch); u < 0x20 || u >= 0x7f || (u == ' ' && k == std::string("hostname")))
          return Status::invalid(fmt::format("{} holds byte 0x{:02x}{}: no {} does", json_path(mp, k), u,
                                             u < 0x20 || u == 0x7f ? " (a control character)" : u == ' ' ? " (a blank)" : " (beyond ASCII)",
                                             k == std::string("hostname") ? "host name" : "CPU's name or vendor"));
    }
  for (const char* k : {"cores", "pus", "packages"})
    if (m.contains(k) && m[k].get<int64_t>() < 1)
      return Status::invalid(fmt::format("{} is 0: a machine that ran has at least one", json_path(mp, k)));
  if (m.contains("caches"))
    for (size_t i = 0; i < m["caches"].size(); ++i)
      for (const char* k : {"size_bytes", "line_bytes", "count"})
        if (const auto& c = m["caches"][i]; c.contains(k) && c[k].is_number() && !(c[k].get<double>() >= 1))
          return Status::invalid(fmt::format("{} is {}: a cache has a size, a line and a count", 
                                             json_path(json_path(mp + ".caches", i), k), c[k].dump()));
  if (m.contains("cores") && m.contains("pus") && m["cores"].get<int64_t>() > m["pus"].get<int64_t>())
    return Status::invalid(fmt::format("{} is {}, more than its {} processing units", json_path(mp, "cores"),
                                       m["cores"].get<int64_t>(), m["pus"].get<int64_t>()));
  if (m.contains("cpu_features")) {
    std::set<std::string> seen;
    for (auto& f : m["cpu_features"])
      if (!seen.insert(f.get<std::string>()).second)
        return Status::invalid(fmt::format("{} names {} twice", json_path(mp, "cpu_features"),
                                           shown_safely(f.get<std::string>().substr(0, 40))));
    // In the order the machine's description lists them (a machine key is made of the list as written: the
    // same set in another order would be another key).
    auto rank = [](const std::string& f) {
      const auto it = std::find(std::begin(kCpuFeatureOrder), std::end(kCpuFeatureOrder), f);
      return size_t(it - std::begin(kCpuFeatureOrder));
    };
    for (size_t i = 1; i < m["cpu_features"].size(); ++i)
      if (const std::string a = m["cpu_features"][i - 1], b = m["cpu_features"][i]; rank(a) > rank(b) ||
                                                                                     (rank(a) == rank(b) && a > b))
        return Status::invalid(fmt::format("{} lists {} after {}: not the order a machine's description lists them in",
                                           json_path(mp, "cpu_features"), shown_safely(b.substr(0, 40)),
                                           shown_safely(a.substr(0, 40))));
  }
  if (m.contains("caches"))
    for (size_t i = 0; i < m["caches"].size(); ++i)
      if (const auto& c = m["caches"][i]; c.contains("level") && c["level"].is_number_integer() &&
                                          (c["level"].get<int64_t>() < 1 || c["level"].get<int64_t>() > 4))
        return Status::invalid(fmt::format("{} is {}: a cache level is 1 to 4", json_path(json_path(mp + ".caches", i), "level"),
                                           c["level"].get<int64_t>()));
  if (m.contains("libraries")) {
    // What env and each backend record of the libraries loaded: versions and settings are text (a backend's
    // own keys are its name and settings, each text), whether CUDA was built a boolean, the CUDA runtime's and
    // driver's versions integers.
    static const std::map<std::string, T> kTyped = {{"cuda_built", T::kBoolean}, {"cuda_runtime", T::kCount},
                                                    {"cuda_driver", T::kCount}};
    const std::string lp = mp + ".libraries";
    for (auto& [k, v] : m["libraries"].items()) {
      const auto typed = kTyped.find(k);
      DETAUDIT_RETURN_IF_ERROR(check_key(m["libraries"], k.c_str(), typed == kTyped.end() ? T::kString : typed->second,
                                         true, lp));
      if (v.is_string() && (v.get<std::string>().empty() || v.get<std::string>().size() > 512))
        return Status::invalid(fmt::format("{} is {} characters: a library's version or setting is 1 to 512",
                                           json_path(lp, shown_safely(k.substr(0, 40))), v.get<std::string>().size()));
    }
    CpuIsa isa;
    if (m["libraries"].contains("cpu_isa_auto") &&
        (!parse_cpu_isa(m["libraries"]["cpu_isa_auto"].get<std::string>(), &isa) || isa == CpuIsa::kAuto))
      return Status::invalid(fmt::format("{} \"{}\" is not an instruction set detaudit's kernels resolve to",
                                         json_path(lp, "cpu_isa_auto"),
                                         shown_safely(m["libraries"]["cpu_isa_auto"].get<std::string>().substr(0, 40))));
  }
  DETAUDIT_RETURN_IF_ERROR(check_machine_consistent(m, mp));
  // A cache or GPU entry holds what env writes of it, nothing else (a field no version writes is refused).
  auto unknown_in = [&](const char* list, std::initializer_list<const char*> known) {
    if (m.contains(list))
      for (size_t i = 0; i < m[list].size(); ++i)
        if (const std::string k = unknown_field(m[list][i], known); !k.empty())
          return Status::invalid(fmt::format("{} is not a field of a machine's {} entry",
                                             json_path(json_path(mp + "." + list, i), k), list));
    return Status::ok();
  };
  DETAUDIT_RETURN_IF_ERROR(unknown_in("caches", {"level", "size_bytes", "line_bytes", "count"}));
  DETAUDIT_RETURN_IF_ERROR(unknown_in("gpus", {"index", "name", "uuid", "pci_bus_id", "compute_capability", "sm_count",
                                               "memory_bytes", "l2_bytes", "clock_khz", "memory_clock_khz",
                                               "memory_bus_width", "ecc", "local_cpuset"}));
  if (m.contains("gpus"))
    for (size_t i = 0; i < m["gpus"].size(); ++i)
      for (const char* k : {"index", "name"})
        if (!m["gpus"][i].contains(k))
          return Status::invalid(json_path(json_path(mp + ".gpus", i), k) + " is missing (every GPU entry names it)");
  if (m.contains("caches"))
    for (size_t i = 0; i < m["caches"].size(); ++i)
      DETAUDIT_RETURN_IF_ERROR(check_keys(
          m["caches"][i],
          {{"level", T::kCount}, {"size_bytes", T::kUnsigned}, {"line_bytes", T::kCount}, {"count", T::kCount}},
          json_path(mp + ".caches", i)));
  if (m.contains("gpus"))
    for (size_t i = 0; i < m["gpus"].size(); ++i)
      DETAUDIT_RETURN_IF_ERROR(check_keys(m["gpus"][i],
                                          {{"index", T::kCount},
                                           {"name", T::kString},
                                           {"uuid", T::kString},
                                           {"pci_bus_id", T::kString},
                                           {"compute_capability", T::kString},
                                           {"sm_count", T::kCount},
                                           {"memory_bytes", T::kUnsigned},
                                           {"l2_bytes", T::kCount},
                                           {"clock_khz", T::kCount},
                                           {"memory_clock_khz", T::kCount},
                                           {"memory_bus_width", T::kCount},
                                           {"ecc", T::kBoolean},
                                           {"local_cpuset", T::kString}},
                                          json_path(mp + ".gpus", i)));
  return Status::ok();
}

// The whole document, field by field against the results contract (README "Results contract").
Status results_from_json(nlohmann::json& j, Results* out) {
  Results r;
  if (Status st; !(st = check_keys(j,
                                   {{"tool_version", T::kString},
                                    {"tool_commit", T::kString},
                                    {"started_at", T::kString},
                                    {"finished_at", T::kString},
                                    {"command", T::kString},
                                    {"training", T::kArray},
                                    {"analysis", T::kObject},
                                    {"oracle_failures", T::kObject}},
                                   "")) ||
                 !(st = check_key(j, "observations", T::kArray, true, "")))
    return st;
  if (const std::string k = unknown_field(j, {"schema", "tool_version", "tool_commit", "started_at", "finished_at",
                                              "command", "plan", "machine", "observations", "oracle_failures",
                                              "training", "analysis"});
      !k.empty())
    return Status::invalid(fmt::format("{} is not a field of a results file", shown_safely(k.substr(0, 40))));
  // What every run writes: the plan it ran, the machine it ran on, its version and start.
  for (const char* k : {"plan", "machine", "tool_version", "started_at"})
    if (!j.contains(k)) return Status::invalid(fmt::format("{} is missing (every run writes it)", k));
  if (const std::string v = j.value("tool_version", ""); !is_version_text(v))
    return Status::invalid(fmt::format("tool_version '{}' is not a version (digits, letters, . - +)",
                                       shown_safely(v.substr(0, 40))));
  r.tool_version = j.value("tool_version", "");
  r.tool_commit = j.value("tool_commit", "");
  r.started_at = j.value("started_at", "");
  r.finished_at = j.value("finished_at", "");
  r.command = j.value("command", "");
  DETAUDIT_RETURN_IF_ERROR(check_run_times(r.started_at, r.finished_at, "results"));
  if (j.contains("plan")) DETAUDIT_RETURN_IF_ERROR(check_results_plan(j["plan"]));
  if (j.contains("machine")) DETAUDIT_RETURN_IF_ERROR(check_machine(j["machine"]));
  r.plan = j.value("plan", nlohmann::json::object());
  r.machine = j.value("machine", nlohmann::json::object());
  if (j.contains("training"))
    for (size_t i = 0; i < j["training"].size(); ++i) {
      TrainingRun t;
      DETAUDIT_RETURN_IF_ERROR(from_json(j["training"][i], &t, json_path("training", i)));
      if (r.plan.value("kind", "") == "train" && r.plan.contains("design"))
        DETAUDIT_RETURN_IF_ERROR(
            check_run_against_design(j["training"][i], t, r.plan["design"], json_path("training", i)));
      DETAUDIT_RETURN_IF_ERROR(check_run_consistent(t, json_path("training", i)));
      // A run's source is the merged analysis's directory it came from (none outside a merge).
      if (const size_t sources = r.plan.value("sources", nlohmann::json::array()).size();
          j["training"][i].contains("source") && size_t(t.source) >= std::max<size_t>(sources, 1))
        return Status::invalid(fmt::format("{} is {}, but the results merge {} directories (plan.sources)",
                                           json_path(json_path("training", i), "source"), t.source, sources));
      if (j["training"][i].contains("source") && !r.plan.contains("sources"))
        return Status::invalid(json_path(json_path("training", i), "source") +
                               " is set, but the results are not a merged analysis (plan.sources)");
      r.training.push_back(std::move(t));
    }
  if (r.plan.contains("runs") && r.training.size() > r.plan["runs"].get<uint64_t>())
    return Status::invalid(fmt::format("training holds {} runs, more than the plan's {}", r.training.size(),
                                       r.plan["runs"].get<uint64_t>()));
  // Initial weights are the seed's: every run of a model from one seed starts from the same weights, save (e)'s,
  // whose one nudged weight makes them its own.
  {
    std::map<std::pair<std::string, uint64_t>, std::pair<std::string, size_t>> init;
    for (size_t i = 0; i < r.training.size(); ++i) {
      const TrainingRun& t = r.training[i];
      if (t.initial_weights_fingerprint.empty() || condition_nudged(t.condition)) continue;
      const auto [it, first] = init.try_emplace({t.model, t.seed}, t.initial_weights_fingerprint, i);
      if (!first && it->second.first != t.initial_weights_fingerprint)
        return Status::invalid(fmt::format("{} differs from training[{}]'s, a run of the same model from the same "
                                           "seed {} (a seed's initial weights are one)",
                                           json_path(json_path("training", i), "initial_weights_fingerprint"),
                                           it->second.second, t.seed));
    }
  }
  // Nudge k moves the same weight on every target: one parameter, tensor and value, and so one set of initial
  // weights, per model, seed and k.
  {
    std::map<std::tuple<std::string, uint64_t, uint64_t>, size_t> first_of;
    const std::string config = r.plan.value("design", nlohmann::json::object()).value("prednet_config", "");
    for (size_t i = 0; i < r.training.size(); ++i) {
      const TrainingRun& t = r.training[i];
      if (!t.nudge) continue;
      // ... one of the model's own weights.
      if (const uint64_t n = model_weights(t.model, config); n && t.nudge->parameter >= n)
        return Status::invalid(fmt::format("{} is {}, but the {}{} has {} weights",
                                           json_path(json_path(json_path("training", i), "nudge"), "parameter"),
                                           t.nudge->parameter, t.model,
                                           t.model == "prednet" ? fmt::format(" ({})", config) : std::string(), n));
      const auto [it, first] = first_of.try_emplace({t.model, t.seed, t.nudge->index}, i);
      if (first) continue;
      const TrainingRun& o = r.training[it->second];
      if (o.nudge->parameter != t.nudge->parameter || o.nudge->tensor != t.nudge->tensor || o.nudge->from != t.nudge->from ||
          (!o.initial_weights_fingerprint.empty() && !t.initial_weights_fingerprint.empty() &&
           o.initial_weights_fingerprint != t.initial_weights_fingerprint))
        return Status::invalid(fmt::format("{} is not training[{}]'s nudge {} (nudge k moves the same weight on every "
                                           "target)",
                                           json_path(json_path("training", i), "nudge"), it->second, t.nudge->index));
    }
    // Nudges that move different weights start from different weights, and a nudged start is no run's un-nudged one.
    std::map<std::pair<std::string, std::string>, size_t> moved_by;  // (model, initial weights) -> the run
    std::map<std::pair<std::string, std::string>, size_t> unmoved;   // the same, of runs without a nudge
    for (size_t i = 0; i < r.training.size(); ++i)
      if (const TrainingRun& t = r.training[i]; !t.nudge && !t.initial_weights_fingerprint.empty())
        unmoved.try_emplace({t.model, t.initial_weights_fingerprint}, i);
    for (size_t i = 0; i < r.training.size(); ++i) {
      const TrainingRun& t = r.training[i];
      if (!t.nudge || t.initial_weights_fingerprint.empty()) continue;
      if (const auto u = unmoved.find({t.model, t.initial_weights_fingerprint}); u != unmoved.end())
        return Status::invalid(fmt::format("{} is training[{}]'s, which starts without a nudge (a nudged start is not "
                                           "the weights it moved)",
                                           json_path(json_path("training", i), "initial_weights_fingerprint"),
                                           u->second));
      const auto [it, first] = moved_by.try_emplace({t.model, t.initial_weights_fingerprint}, i);
      if (first) continue;
      const TrainingRun& o = r.training[it->second];
      if (o.nudge->parameter != t.nudge->parameter || o.nudge->tensor != t.nudge->tensor)
        return Status::invalid(fmt::format("{} is training[{}]'s, whose nudge moved another weight (initial weights "
                                           "nudged apart are not one)",
                                           json_path(json_path("training", i), "initial_weights_fingerprint"),
                                           it->second));
    }
  }
  // Runs from two seeds' initial weights never end in the same weights (111,521 or more floats alike bit for bit): a
  // run that claims another seed's final weights was edited. (A nudge is no other start: a nudged weight can be
  // trained back to the un-nudged run's bits, as PredNet's are. Diverged runs, whose weights are not finite, are
  // left out.)
  {
    auto start_of = [](const TrainingRun& t) { return fmt::format("{} seed {}", t.model, t.seed); };
    std::map<std::string, size_t> ended;  // final weights -> the first run that ended in them
    for (size_t i = 0; i < r.training.size(); ++i) {
      const TrainingRun& t = r.training[i];
      if (!t.ok() || t.weights_fingerprint.empty() || !std::isfinite(t.final_loss)) continue;
      const auto [it, first] = ended.try_emplace(t.weights_fingerprint, i);
      if (!first && start_of(r.training[it->second]) != start_of(t))
        return Status::invalid(fmt::format("{} is training[{}]'s, which started from another seed's weights (runs from "
                                           "two seeds never end in the same bits)",
                                           json_path(json_path("training", i), "weights_fingerprint"), it->second));
    }
  }
  // The training set's size, where the plan records it (results of older versions do not): a noise trace measured
  // on the design's data names that many examples, merged analyses included (their sources share their data).
  if (r.plan.contains("data_examples"))
    for (size_t i = 0; i < r.training.size(); ++i)
      if (const TrainingRun& t = r.training[i]; t.noise && t.noise->examples != r.plan["data_examples"].get<uint64_t>())
        return Status::invalid(fmt::format("{} is {}, but the design's data has {} examples (plan.data_examples)",
                                           json_path(json_path(json_path("training", i), "noise"), "examples"),
                                           t.noise->examples, r.plan["data_examples"].get<uint64_t>()));
  // A run measures noise exactly when its design asks, at the design's interval.
  // (A merged analysis keeps its first source's design.)
  if (const nlohmann::json d = r.plan.value("design", nlohmann::json::object()); !r.plan.contains("sources"))
    for (size_t i = 0, first = r.training.size(); i < r.training.size(); ++i) {
      const TrainingRun& t = r.training[i];
      if (!d.contains("noise_every")) {
        if (t.noise)
          return Status::invalid(fmt::format("{} is set, but the design measures no noise (plan.design.noise_every)",
                                             json_path(json_path("training", i), "noise")));
        continue;
      }
      // One design, one training set: every run measured against the same number of examples.
      if (t.noise && first == r.training.size()) first = i;
      if (t.noise && t.noise->examples != r.training[first].noise->examples)
        return Status::invalid(fmt::format("{} is {}, but training[{}]'s is {}: the runs of one design train on one set",
                                           json_path(json_path(json_path("training", i), "noise"), "examples"),
                                           t.noise->examples, first, r.training[first].noise->examples));
      const int every = d["noise_every"].get<int>();
      if (t.noise && d.contains("batch_size") && t.noise->b_big != d["batch_size"].get<int64_t>())
        return Status::invalid(fmt::format("{} is {}, but the design's batches are of {}",
                                           json_path(json_path(json_path("training", i), "noise"), "b_big"),
                                           t.noise->b_big, d["batch_size"].get<int64_t>()));
      if (t.ok() && t.noise && t.noise->points.empty())
        return Status::invalid(fmt::format("{} is empty, but the run finished (noise is measured at batch 1 at least)",
                                           json_path(json_path(json_path("training", i), "noise"), "points")));
      if (every > 0 && t.ok() && !t.noise)
        return Status::invalid(fmt::format("{} is missing, but the design measures noise every {} batches and the run "
                                           "finished", json_path(json_path("training", i), "noise"), every));
      if (t.noise && t.noise->every != every)
        return Status::invalid(fmt::format("{} is {}, but the design measures noise {}", json_path(json_path(json_path("training", i), "noise"), "every"),
                                           t.noise->every, every ? fmt::format("every {} batches", every) : "never"));
    }
  // A training set whose size the tool knows without reading it (PredNet's built-in sprites, Debian's
  // Fashion-MNIST by its fingerprint): the plan and every trace name that size.
  if (const nlohmann::json d = r.plan.value("design", nlohmann::json::object()); r.plan.value("kind", "") == "train") {
    const std::string model = d.value("model", ""), dir = d.value("data_dir", "");
    const bool sprites = model == "prednet" && !(dir.size() > 4 && dir.compare(dir.size() - 4, 4, ".npy") == 0);
    const bool fashion = model == "autoencoder" && r.plan.value("data_fingerprint", "") == kFashionMnistTrainFingerprint;
    const uint64_t known = sprites ? uint64_t(kPredNetTrainSequences) : fashion ? kFashionMnistTrainExamples : 0;
    const std::string what = sprites ? "PredNet's built-in moving sprites train on"
                                     : "the Fashion-MNIST training set (by its pixel fingerprint) holds";
    if (known && r.plan.contains("data_examples") && r.plan["data_examples"].get<uint64_t>() != known)
      return Status::invalid(fmt::format("plan.data_examples is {}, but {} {} examples", r.plan["data_examples"].get<uint64_t>(),
                                         what, known));
    for (size_t i = 0; known && i < r.training.size(); ++i)
      if (const TrainingRun& t = r.training[i]; t.noise && t.noise->examples != 0 && t.noise->examples != known)
        return Status::invalid(fmt::format("{} is {}, but {} {} examples",
                                           json_path(json_path(json_path("training", i), "noise"), "examples"),
                                           t.noise->examples, what, known));
    // PredNet's built-in sprites (no --data: cut from Debian's Fashion-MNIST) are one set per configuration: their
    // pixels' fingerprint and, over the 40 held-out sequences in batches of 4, the error of copying the last frame.
    if (const BuiltinSprites* b = builtin_sprites(d.value("prednet_config", "")); model == "prednet" && dir.empty() && b) {
      if (r.plan.value("data_fingerprint", "") != b->fingerprint)
        return Status::invalid(fmt::format("plan.data_fingerprint is {}, but PredNet's built-in sprites ({}) are {}",
                                           shown_safely(r.plan.value("data_fingerprint", "").substr(0, 40)), b->config,
                                           b->fingerprint));
      for (size_t i = 0; d.value("batch_size", int64_t(0)) == 4 && i < r.training.size(); ++i)
        if (const TrainingRun& t = r.training[i];
            t.prediction && std::memcmp(&t.prediction->copy_last_mse, &b->copy_last_mse, sizeof(double)) != 0)
          return Status::invalid(fmt::format("{} is {}, but copying the last frame of PredNet's built-in sprites ({}) "
                                             "errs by {} on their held-out sequences",
                                             json_path(json_path(json_path("training", i), "prediction"), "copy_last_mse"),
                                             t.prediction->copy_last_mse, b->config, b->copy_last_mse));
    }
    // PredNet's next-frame check: the held-out sequences, in whole batches, are the data's, and so is the error of
    // copying the last frame (computed from the frames alone, in double on the host): one count and one error,
    // bit for bit, for every run of the design; the built-in sprites hold kPredNetHeldOutSequences.
    const int64_t batch = d.value("batch_size", int64_t(0));
    for (size_t i = 0, first = r.training.size(); model == "prednet" && i < r.training.size(); ++i) {
      const TrainingRun& t = r.training[i];
      if (!t.prediction) continue;
      const std::string pp = json_path(json_path("training", i), "prediction");
      if (sprites && batch > 0 &&
          t.prediction->sequences != uint64_t(kPredNetHeldOutSequences - kPredNetHeldOutSequences % batch))
        return Status::invalid(fmt::format("{} is {}, but the built-in sprites' check holds {} held-out sequences in "
                                           "batches of {}",
                                           json_path(pp, "sequences"), t.prediction->sequences,
                                           kPredNetHeldOutSequences - kPredNetHeldOutSequences % batch, batch));
      if (first == r.training.size()) {
        first = i;
        continue;
      }
      const NextFrameCheck& f = *r.training[first].prediction;
      if (t.prediction->sequences != f.sequences ||
          std::memcmp(&t.prediction->copy_last_mse, &f.copy_last_mse, sizeof(double)) != 0)
        return Status::invalid(fmt::format("{} checks {} sequences with a copy-last error of {}, but training[{}]'s "
                                           "{} with {}: every run's next-frame check is on the same held-out frames",
                                           pp, t.prediction->sequences, t.prediction->copy_last_mse, first, f.sequences,
                                           f.copy_last_mse));
    }
  }
  // The runs of one design (no merge) were made on its machine, every one (a design resumes only on the machine,
  // and the software, its runs were made with): the machine block is theirs. Another machine written over the
  // block, or a run relabelled as another machine's, would be taken for hardware the runs never met.
  // In a merged analysis each run's machine is its source's.
  const nlohmann::json* sources = r.plan.contains("sources") ? &r.plan["sources"] : nullptr;
  const bool merged = sources != nullptr;
  for (size_t i = 0; i < r.training.size(); ++i) {
    const TrainingRun& t = r.training[i];
    if (merged &&
        (t.source < 0 || size_t(t.source) >= sources->size() || !(*sources)[size_t(t.source)].contains("machine")))
      continue;  // (its source is refused above)
    const nlohmann::json& m = merged ? (*sources)[size_t(t.source)]["machine"] : r.machine;
    if (!t.machine_id.empty() && t.machine_id != machine_id_of(m))
      return Status::invalid(fmt::format("{} is {}, but the machine block {} hashes to {} (the machine was edited, or "
                                         "the run is another machine's)",
                                         json_path(json_path("training", i), "machine_id"), t.machine_id,
                                         merged ? fmt::format("of plan.sources[{}]", t.source)
                                                : std::string("the runs were recorded with"),
                                         machine_id_of(m)));
  }
  r.analysis = j.value("analysis", nlohmann::json::object());
  // An analysis is of training runs, made when a design finishes (the report makes it again from the runs).
  if (!r.analysis.empty() && r.training.empty())
    return Status::invalid("analysis is set, but the results hold no training runs to analyse");
  if (!r.analysis.empty() && r.finished_at.empty())
    return Status::invalid("analysis is set, but the run has not finished (a design is analysed when it finishes)");
  if (r.plan.contains("kind") && r.plan["kind"] != "train")
    return Status::invalid(fmt::format("plan.kind is {}: the only kind a plan names is \"train\"",
                                       shown_safely(r.plan["kind"].dump().substr(0, 40))));
  // Probe cells go beside probe plans, never into a training design's results.
  if (r.plan.value("kind", "") == "train" && !j["observations"].empty())
    return Status::invalid("observations holds probe cells, but the plan is a training design's");
  if (j.contains("oracle_failures"))
    for (auto& [k, v] : j["oracle_failures"].items()) {
      DETAUDIT_RETURN_IF_ERROR(check_json(v, T::kString, json_path("oracle_failures", k)));
      r.oracle_failures[k] = v.get<std::string>();
    }
  // Training runs go beside a training design, never into a probe suite's results.
  if (r.plan.contains("suite") && !r.plan.contains("design") && !r.training.empty())
    return Status::invalid(fmt::format("training holds {} runs, but the plan is a probe suite's (a probe trains nothing)",
                                       r.training.size()));
  const auto& obs = j["observations"];
  r.observations.reserve(obs.size());
  // The instruction set a cpu target with isa=auto ran is the one the machine says its kernels resolve to
  // (a machine block edited to another would move every cell to another machine key, out of a check's reach).
  std::string isa_auto;
  if (const auto l = r.machine.find("libraries"); l != r.machine.end() && l->contains("cpu_isa_auto"))
    isa_auto = (*l)["cpu_isa_auto"].get<std::string>();  // a string: check_machine
  for (size_t i = 0; i < obs.size(); ++i) {
    Observation o;
    DETAUDIT_RETURN_IF_ERROR(from_json(obs[i], &o, json_path("observations", i)));
    DETAUDIT_RETURN_IF_ERROR(check_observation_counts(o, json_path("observations", i)));
    // (A target whose isa key names one of detaudit's own instruction sets, auto included: the cpu backend's.)
    if (Spec t; o.status == ObsStatus::kOk && parse_spec_syntax(o.target, &t).is_ok() && t.has("isa") &&
                o.details.count("isa")) {
      CpuIsa named;
      const std::string want = !parse_cpu_isa(t.get("isa"), &named) ? "" : named == CpuIsa::kAuto ? isa_auto : t.get("isa");
      if (!want.empty() && o.details.at("isa") != want)
        return Status::invalid(fmt::format("{} is {}, but {} ran {}", json_path(json_path(json_path("observations", i), "details"), "isa"),
                                           shown_safely(o.details.at("isa").substr(0, 20)), shown_safely(o.target.substr(0, 80)),
                                           named == CpuIsa::kAuto ? "the instruction set the machine's kernels resolve "
                                                                    "to (machine.libraries.cpu_isa_auto " + want + ")"
                                                                  : want));
      if (const size_t at = o.describe.find("(isa "); at != std::string::npos &&
                                                      o.describe.compare(at, std::string::npos, "(isa " + o.details.at("isa") + ")") != 0)
        return Status::invalid(fmt::format("{} \"{}\" names another instruction set than details.isa {}",
                                           json_path(json_path("observations", i), "describe"),
                                           shown_safely(o.describe.substr(0, 80)), shown_safely(o.details.at("isa").substr(0, 20))));
    }
    r.observations.push_back(std::move(o));
  }
  *out = std::move(r);
  return Status::ok();
}

}  // namespace

std::string machine_id_of(const nlohmann::json& machine) {
  const std::string dump = machine.dump();
  return fingerprint_bytes(dump.data(), dump.size()).hex().substr(0, 16);
}

Status parse_json_text(const std::string& text, const std::string& where, nlohmann::json* out) {
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    return Status::invalid(fmt::format("{}: not valid JSON at byte {} of {} (a NUL byte: JSON text holds none)", where,
                                       nul, text.size()));
  std::vector<std::set<std::string>> keys;  // per open object, the keys seen
  std::string twice;
  const nlohmann::json::parser_callback_t cb = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start) {
      keys.emplace_back();
    } else if (ev == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == E::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && twice.empty()) twice = parsed.get<std::string>();
    }
    return true;
  };
  try {
    *out = nlohmann::json::parse(text, cb);
  } catch (const nlohmann::json::parse_error& e) {
    // Where, not the parser's wording: a truncated file fails at its end, a corrupt one where it broke.
    const size_t at = std::min<size_t>(e.byte, text.size());
    return Status::invalid(fmt::format("{}: not valid JSON at byte {} of {}{}", where, at, text.size(),
                                       at >= text.size() ? " (the file ends early: truncated)" : " (corrupt)"));
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid(where + ": not valid JSON (truncated or corrupt)");
  }
  if (!twice.empty())
    return Status::invalid(fmt::format("{}: the key \"{}\" appears twice in one object (which one holds?)", where, twice));
  return Status::ok();
}

Status load_json_document(const std::string& path, const std::string& schema, const std::string& what,
                          nlohmann::json* out) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::invalid(path + ": is a directory, not a " + what);
  }
  std::string text;
  DETAUDIT_RETURN_IF_ERROR(read_regular_file(path, what, &text));
  DETAUDIT_RETURN_IF_ERROR(parse_json_text(text, path, out));
  if (!out->is_object() || !out->contains("schema") || (*out)["schema"] != schema) {
    return Status::invalid(path + ": not a detaudit " + what + " (expected \"schema\": \"" + schema + "\")");
  }
  return Status::ok();
}

Status load_results(const std::string& path, Results* out) {
  nlohmann::json j;
  DETAUDIT_RETURN_IF_ERROR(load_json_document(path, kResultsSchema, "results file", &j));
  return results_from_json(j, out).prefixed(path + ": ");
}

Status parse_results(const std::string& text, const std::string& where, Results* out) {
  nlohmann::json j;
  DETAUDIT_RETURN_IF_ERROR(parse_json_text(text, where, &j));
  if (!j.is_object() || !j.contains("schema") || j["schema"] != kResultsSchema)
    return Status::invalid(where + ": not a detaudit results file (expected \"schema\": \"" +
                           std::string(kResultsSchema) + "\")");
  return results_from_json(j, out).prefixed(where + ": ");
}

Status save_results(const std::string& path, const Results& r) {
  return write_file_atomic(path, to_json(r).dump(1) + "\n", Own::kResults);
}

}  // namespace detaudit
