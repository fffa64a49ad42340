#include "store/baseline_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <tuple>

#include "analysis/stats.hpp"
#include "contract/atomic_file.hpp"
#include "contract/cells.hpp"
#include "contract/json_fields.hpp"
#include "contract/plan.hpp"
#include "gates/verdict.hpp"
#include "kernels/fingerprint.hpp"
#include "probes/results_file.hpp"
#include "probes/spec.hpp"
#include "suites/train_design.hpp"

namespace detaudit {

namespace fs = std::filesystem;
using T = JsonType;

namespace {

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

nlohmann::json cell_json(const BaselineCell& c) {
  nlohmann::json j = {{"workload", c.workload},
                      {"target", c.target},
                      {"key", c.key},
                      {"status", to_string(c.status)},
                      {"repeats", c.repeats},
                      {"fingerprints", c.fingerprints},
                      {"distinct", c.distinct},
                      {"verdict", verdict_text(c.verdict)},
                      {"verdict_reason", c.verdict_reason},
                      {"promise", c.promise}};
  if (!c.reason.empty()) j["reason"] = c.reason;
  if (c.err_ratio) j["err_ratio"] = number_or_null(*c.err_ratio);
  if (!c.kernels.empty()) j["kernels"] = c.kernels;
  if (!c.algo.empty()) j["algo"] = c.algo;
  if (c.median_seconds) j["median_seconds"] = number_or_null(*c.median_seconds);
  if (!c.rows_fingerprint.empty()) j["rows_fingerprint"] = c.rows_fingerprint;
  return j;
}

nlohmann::json training_json(const BaselineTraining& t) {
  nlohmann::json runs = nlohmann::json::array();
  for (auto& r : t.runs) {
    runs.push_back({{"seed", r.seed},
                    {"replicate", r.replicate},
                    {"final_loss", number_or_null(r.final_loss)},
                    {"weights_fingerprint", r.weights_fingerprint}});
    if (!r.outcome.empty()) runs.back()["outcome"] = r.outcome;
  }
  return {{"model", t.model},
          {"design", t.design},
          {"condition", t.condition},
          {"init", t.init},
          {"determinism", t.determinism},
          {"target", t.target},
          {"key", t.key},
          {"runs", runs},
          {"n", t.n},
          {"mean", t.mean ? number_or_null(*t.mean) : nlohmann::json(nullptr)},
          {"sd", t.sd ? number_or_null(*t.sd) : nlohmann::json(nullptr)}};
}

}  // namespace

nlohmann::json to_json(const Baseline& b) {
  nlohmann::json cells = nlohmann::json::array(), training = nlohmann::json::array();
  std::vector<const BaselineCell*> cs;
  for (auto& c : b.cells) cs.push_back(&c);
  std::sort(cs.begin(), cs.end(), [](auto* x, auto* y) { return std::tie(x->workload, x->target) < std::tie(y->workload, y->target); });
  for (auto* c : cs) cells.push_back(cell_json(*c));
  std::vector<const BaselineTraining*> ts;
  for (auto& t : b.training) ts.push_back(&t);
  std::sort(ts.begin(), ts.end(), [](auto* x, auto* y) {
    return std::tie(x->model, x->design, x->condition, x->target) < std::tie(y->model, y->design, y->condition, y->target);
  });
  for (auto* t : ts) training.push_back(training_json(*t));
  nlohmann::json keys = nlohmann::json::object();
  for (auto& [id, k] : b.keys) keys[id] = k;
  return {{"schema", kBaselineSchema},
          {"created_at", b.created_at},
          {"tool_version", b.tool_version},
          {"tool_commit", b.tool_commit},
          {"source",
           {{"dir", b.source_dir},
            {"command", b.source_command},
            {"started_at", b.source_started_at},
            {"finished_at", b.source_finished_at},
            {"plan", b.source_plan.is_null() ? nlohmann::json::object() : b.source_plan}}},
          {"keys", keys},
          {"entries", cells},
          {"training", training}};
}

std::string baseline_text(const Baseline& b) {
  // nlohmann::json keeps object keys sorted; entries are sorted above: the same baseline, the same bytes.
  return to_json(b).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Status save_baseline(const std::string& path, const Baseline& b) {
  return write_file_atomic(path, baseline_text(b), Own::kBaseline);
}

// ---- loading ---------------------------------------------------------------------------------------
namespace {

Status number_or_null_key(const nlohmann::json& obj, const char* key, const std::string& path,
                          std::optional<double>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::ok();
  DETAUDIT_RETURN_IF_ERROR(check_json(*it, T::kNumber, json_path(path, key)));
  *out = it->get<double>();
  return Status::ok();
}

Status string_key(const nlohmann::json& obj, const char* key, bool required, const std::string& path,
                  std::string* out) {
  DETAUDIT_RETURN_IF_ERROR(check_key(obj, key, T::kString, required, path));
  if (obj.contains(key)) *out = obj[key].get<std::string>();
  return Status::ok();
}

Status fingerprint_ok(const nlohmann::json& v, const std::string& path) {
  Fingerprint f;
  DETAUDIT_RETURN_IF_ERROR(check_json(v, T::kString, path));
  if (Fingerprint::from_hex(v.get<std::string>(), &f)) return Status::ok();
  return Status::invalid(path + " must be 32 hex digits (got \"" + json_fields::text(v).substr(0, 40) + "\")");
}

// passed_batch_invariance (gates/verdict.hpp) of a baseline entry.
bool batch_invariant_by_verdict(const BaselineCell& c, const Spec& t, const Spec& w) {
  return passed_batch_invariance(t, w, c.status == ObsStatus::kOk && c.distinct == 1 && c.fingerprints.size() == 1,
                                 c.verdict == Verdict::kPass);
}

// A field no version writes is refused, not ignored: a baseline is reviewed by people, and a misspelt or
// invented field would read as if it meant something.
Status only_known(const nlohmann::json& j, std::initializer_list<const char*> known, const std::string& path) {
  if (const std::string k = unknown_field(j, known); !k.empty())
    return Status::invalid(
        fmt::format("{} is not a field of a baseline{}", json_path(path, k), path.empty() ? "" : " entry"));
  return Status::ok();
}

// A number the baseline states of a cell: finite and 0 or more (a ratio or a time is never negative).
Status non_negative(const std::optional<double>& v, const char* key, const std::string& path) {
  if (v && !(*v >= 0 && std::isfinite(*v)))
    return Status::invalid(fmt::format("{} is {}: 0 or more", json_path(path, key), *v));
  if (v && std::string(key) == "median_seconds" && !plausible_seconds(*v))
    return Status::invalid(fmt::format("{} is {}: a time of 0, or from a nanosecond (a clock's tick) to a year",
                                       json_path(path, key), *v));
  return Status::ok();
}

// A cell's key describes the machine part its target runs on: a CPU target's key is of kind cpu, a GPU
// target's of kind gpu (a GPU key on a CPU cell would compare GPUs for a cell the CPU computed).
Status key_fits_target(const Baseline& b, const std::string& key, const std::string& target, const std::string& path) {
  const nlohmann::json target_key = entry_key(Results{}, target);
  const std::string want = json_fields::str(target_key, "kind", "");
  const std::string have = json_fields::str(b.keys.at(key), "kind", "");
  if (!want.empty() && have != want)
    return Status::invalid(fmt::format("{} \"{}\" is a key of kind {}, but a cell of {} has a key of kind {}", json_path(path, "key"),
                                       key, have.substr(0, 20), target.substr(0, 80), want));
  // And it names the libraries of the target's backend (as this version lists them: a key of results of
  // another version may name others).
  const nlohmann::json& k = b.keys.at(key);
  if (Spec t; json_fields::str(k, "tool_version", "") != DETAUDIT_VERSION || !parse_target(target, &t).is_ok())
    return Status::ok();  // (a target that does not parse is named by the entry's own check)
  std::vector<std::string> want_libs, have_libs;
  for (auto& [name, v] : json_fields::object(target_key, "libraries").items()) want_libs.push_back(name);
  for (auto& [name, v] : json_fields::object(k, "libraries").items()) have_libs.push_back(name);
  if (want_libs != have_libs)
    return Status::invalid(fmt::format("{} \"{}\" names the libraries [{}], but a cell of {} is keyed by [{}]: the key "
                                       "of another target",
                                       json_path(path, "key"), key, fmt::format("{}", fmt::join(have_libs, ", ")).substr(0, 120),
                                       target.substr(0, 80), fmt::join(want_libs, ", ")));
  return Status::ok();
}

// A baseline is one run on one machine: each target's cells have one key, and its keys agree on what they share
// (a library's version, the tool's, the CPU of the host's keys).
Status keys_of_one_machine(const Baseline& b) {
  std::map<std::string, std::pair<std::string, std::string>> key_of;  // target -> (key, where)
  auto one_key = [&](const std::string& target, const std::string& key, const std::string& where) -> Status {
    const auto [it, first] = key_of.try_emplace(target, key, where);
    if (first || it->second.first == key) return Status::ok();
    return Status::invalid(fmt::format("{}.key \"{}\": {} has the key \"{}\" at {}; one baseline is one run on one "
                                       "machine, where a target has one key",
                                       where, key, target.substr(0, 80), it->second.first, it->second.second));
  };
  for (size_t i = 0; i < b.cells.size(); ++i)
    DETAUDIT_RETURN_IF_ERROR(one_key(b.cells[i].target, b.cells[i].key, json_path("entries", i)));
  for (size_t i = 0; i < b.training.size(); ++i)
    DETAUDIT_RETURN_IF_ERROR(one_key(b.training[i].target, b.training[i].key, json_path("training", i)));
  // The host's key kind (the one CPU every host target runs on; a machine's GPUs may differ from each other).
  nlohmann::json host_key;
  device_kind_entry(DeviceKind::kHost).baseline_key(nlohmann::json::object(), -1, &host_key);
  const std::string host_kind = json_fields::str(host_key, "kind", "");
  std::map<std::string, std::pair<nlohmann::json, std::string>> seen;  // "libraries.x", "cpu_model", ... -> (value, key)
  for (auto& [id, k] : b.keys) {
    std::vector<std::pair<std::string, nlohmann::json>> shared = {{"tool_version", k.value("tool_version", nlohmann::json())}};
    for (auto& [name, v] : json_fields::object(k, "libraries").items()) shared.push_back({"libraries." + name, v});
    if (json_fields::str(k, "kind", "") == host_kind)
      for (auto& [f, v] : host_key.items())
        if (f != "kind") shared.push_back({f, k.value(f, nlohmann::json())});
    for (auto& [field, v] : shared) {
      const auto [it, first] = seen.try_emplace(field, v, id);
      if (!first && it->second.first != v)
        return Status::invalid(fmt::format("keys.{}.{} is {}, but keys.{}.{} is {}: the keys of one baseline describe one "
                                           "machine",
                                           id, field, v.dump().substr(0, 60), it->second.second, field,
                                           it->second.first.dump().substr(0, 60)));
    }
  }
  return Status::ok();
}

Status cell_from_json(const nlohmann::json& j, const std::string& path, const Baseline& b, BaselineCell* c) {
  DETAUDIT_RETURN_IF_ERROR(check_json(j, T::kObject, path));
  DETAUDIT_RETURN_IF_ERROR(only_known(j,
                                      {"workload", "target", "key", "status", "reason", "verdict", "verdict_reason",
                                       "promise", "algo", "repeats", "distinct", "fingerprints", "kernels",
                                       "err_ratio", "median_seconds", "rows_fingerprint"},
                                      path));
  std::string status, verdict;
  if (Status st;
      !(st = string_key(j, "workload", true, path, &c->workload)) ||
      !(st = string_key(j, "target", true, path, &c->target)) || !(st = string_key(j, "key", true, path, &c->key)) ||
      !(st = string_key(j, "status", true, path, &status)) ||
      !(st = string_key(j, "reason", false, path, &c->reason)) ||
      !(st = string_key(j, "verdict", false, path, &verdict)) ||
      !(st = string_key(j, "verdict_reason", false, path, &c->verdict_reason)) ||
      !(st = string_key(j, "promise", false, path, &c->promise)) ||
      !(st = string_key(j, "algo", false, path, &c->algo)) || !(st = check_key(j, "repeats", T::kCount, true, path)) ||
      !(st = check_key(j, "distinct", T::kCount, true, path)) ||
      !(st = check_key(j, "fingerprints", T::kArray, true, path)) ||
      !(st = check_key(j, "kernels", T::kObject, false, path)) ||
      !(st = number_or_null_key(j, "err_ratio", path, &c->err_ratio)) ||
      !(st = number_or_null_key(j, "median_seconds", path, &c->median_seconds)) ||
      !(st = string_key(j, "rows_fingerprint", false, path, &c->rows_fingerprint)))
    return st;
  if (!b.keys.count(c->key)) {
    return Status::invalid(json_path(path, "key") + " names no entry of \"keys\" (got \"" + c->key + "\")");
  }
  DETAUDIT_RETURN_IF_ERROR(key_fits_target(b, c->key, c->target, path));
  if (!parse_obs_status(status, &c->status)) {
    return Status::invalid(json_path(path, "status") + " must be ok, crashed, timeout, skipped or error (got \"" +
                           status + "\")");
  }
  if (Fingerprint fp; !c->rows_fingerprint.empty() && (!Fingerprint::from_hex(c->rows_fingerprint, &fp) ||
                                                       c->status != ObsStatus::kOk))
    return Status::invalid(json_path(path, "rows_fingerprint") +
                           " must be 32 hex digits, of a cell that ran (the rows its batch invariance computed alone)");
  c->verdict.reset();
  if (Verdict v; !verdict.empty()) {
    if (!parse_verdict(verdict, &v)) {
      return Status::invalid(json_path(path, "verdict") + " must be PASS, FAIL, EXPECTED, WARN or SKIP (got \"" +
                             verdict + "\")");
    }
    c->verdict = v;
  }
  if (c->promise != "deterministic" && c->promise != "nondeterministic" && c->promise != "none") {
    return Status::invalid(json_path(path, "promise") + " must be deterministic, nondeterministic or none (got \"" +
                           c->promise + "\")");
  }
  if (Status st; !(st = non_negative(c->err_ratio, "err_ratio", path)) ||
                 !(st = non_negative(c->median_seconds, "median_seconds", path)))
    return st;
  // Cells of specs this version parses, in the canonical form a baseline is written in.
  Spec t, w;  // (parsed once, for the checks below)
  if (!parse_target(c->target, &t) || t.str() != c->target)
    return Status::invalid(fmt::format("{} \"{}\" is not a target spec as detaudit writes one", json_path(path, "target"),
                                       json_fields::text(j["target"]).substr(0, 80)));
  if (!parse_workload(c->workload, &w) || w.str() != c->workload)
    return Status::invalid(fmt::format("{} \"{}\" is not a workload spec as detaudit writes one",
                                       json_path(path, "workload"), json_fields::text(j["workload"]).substr(0, 80)));
  // The promise is the target's for the workload: on the CPU it follows from the two specs alone (a GPU
  // target's may follow from the algorithm its library chose, which the baseline does not keep).
  const bool gpu = json_fields::str(b.keys.at(c->key), "kind", "") == "gpu";
  if (Observation o; !gpu) {
    o.target = c->target, o.workload = c->workload;
    if (const std::string p = cell_promise(o, nlohmann::json::object()); p != c->promise)
      return Status::invalid(fmt::format("{} \"{}\", but {} promises {} on {}", json_path(path, "promise"),
                                         c->promise, c->target.substr(0, 80), p, c->workload.substr(0, 80)));
  }
  c->repeats = j["repeats"].get<int>();
  c->distinct = j["distinct"].get<int>();
  const auto& fps = j["fingerprints"];
  for (size_t i = 0; i < fps.size(); ++i) {
    DETAUDIT_RETURN_IF_ERROR(fingerprint_ok(fps[i], json_path(json_path(path, "fingerprints"), i)));
    c->fingerprints.push_back(fps[i].get<std::string>());
  }
  if (size_t(c->distinct) != std::set<std::string>(c->fingerprints.begin(), c->fingerprints.end()).size()) {
    return Status::invalid(
        fmt::format("{} must be the number of distinct fingerprints ({}; got {})", json_path(path, "distinct"),
                    std::set<std::string>(c->fingerprints.begin(), c->fingerprints.end()).size(), c->distinct));
  }
  if (c->status != ObsStatus::kOk && c->reason.empty())
    return Status::invalid(fmt::format("{}: status {} without a reason (a cell that did not finish says why)", path,
                                       to_string(c->status)));
  if (c->status != ObsStatus::kOk && c->status != ObsStatus::kError && !c->fingerprints.empty())
    return Status::invalid(fmt::format("{}: status {} yet {} fingerprints (such a cell gives no output)", path,
                                       to_string(c->status), c->fingerprints.size()));
  if (c->distinct > c->repeats || (c->status == ObsStatus::kOk && (c->repeats < 1 || c->distinct < 1)))
    return Status::invalid(fmt::format("{}: {} distinct outputs in {} repeats with status {}", path, c->distinct,
                                       c->repeats, to_string(c->status)));
  // A deterministic cell that ran and gave several outputs broke its promise: its verdict is FAIL, never a pass.
  if (c->verdict && c->verdict != Verdict::kFail && c->status == ObsStatus::kOk && c->promise == "deterministic" &&
      c->distinct > 1)
    return Status::invalid(fmt::format("{} is {}, but the cell promised determinism and gave {} distinct outputs "
                                       "(a FAIL)",
                                       json_path(path, "verdict"), to_string(*c->verdict), c->distinct));
  // EXPECTED is a promised variation or an expected crash: never a deterministic cell that ran and gave one output.
  if (c->verdict == Verdict::kExpected && c->status == ObsStatus::kOk && c->promise == "deterministic" &&
      c->distinct == 1)
    return Status::invalid(fmt::format("{} is EXPECTED, but the cell promised determinism, ran and gave one output "
                                       "(EXPECTED is a promised variation or an expected crash)",
                                       json_path(path, "verdict")));
  // A cell that ran was timed at every repeat (results.json refuses a cell that ran without its times), so it has a
  // median; an imported output was timed by no one unless its framework said so.
  if (const BackendEntry* be = find_backend(t.name);
      be && !be->imported && c->status == ObsStatus::kOk && !(c->median_seconds >= kClockTick))
    return Status::invalid(fmt::format("{} is {}, but the cell ran, and every repeat of a cell that ran was timed (a "
                                       "nanosecond at least)",
                                       json_path(path, "median_seconds"),
                                       c->median_seconds ? fmt::format("{}", *c->median_seconds) : "missing or null"));
  // The rows a batch-invariance cell computed alone: kept for every batchinv cell a worker ran, and for no other cell.
  // Where its target promises batch invariance and it passed, every row agreed with the product: with every row
  // checked (rows = m) they are the product itself.
  if (!c->rows_fingerprint.empty() && w.name != "batchinv")
    return Status::invalid(fmt::format("{} is set, but {} is not a batchinv workload", json_path(path, "rows_fingerprint"),
                                       c->workload.substr(0, 80)));
  if (const BackendEntry* be = find_backend(t.name); be && !be->imported && w.name == "batchinv" &&
                                                     c->status == ObsStatus::kOk && c->rows_fingerprint.empty())
    return Status::invalid(fmt::format("{} is missing, but the cell ran, and detaudit keeps the rows a batchinv cell "
                                       "computed alone",
                                       json_path(path, "rows_fingerprint")));
  if (!c->rows_fingerprint.empty() && batch_invariant_by_verdict(*c, t, w) && w.get_int("rows", 1) == w.get_int("m", 1) &&
      c->rows_fingerprint != c->fingerprints[0])
    return Status::invalid(fmt::format("{} is {}, but the cell passed a promise of batch invariance with every one of "
                                       "its {} rows checked, so its rows are the product, whose fingerprint is {}",
                                       json_path(path, "rows_fingerprint"), c->rows_fingerprint, w.get_int("rows", 1),
                                       c->fingerprints[0]));
  // A baseline lists each distinct output once.
  if (c->fingerprints.size() != size_t(c->distinct))
    return Status::invalid(fmt::format("{} lists {} fingerprints for {} distinct outputs (a baseline lists each once)",
                                       json_path(path, "fingerprints"), c->fingerprints.size(), c->distinct));
  // The verdict is one the verdict rules give a cell of this status: a skip is a SKIP and nothing else is, a crash or
  // timeout is no pass; on a CPU target, a cell that ran carries a verdict its outputs and error give.
  if (c->verdict && (((c->status == ObsStatus::kSkipped) != (c->verdict == Verdict::kSkip)) ||
                     ((c->status == ObsStatus::kCrashed || c->status == ObsStatus::kTimeout) &&
                      (c->verdict == Verdict::kPass || c->verdict == Verdict::kWarn))))
    return Status::invalid(fmt::format("{} is {}, which is not a verdict of a cell whose status is {}",
                                       json_path(path, "verdict"), to_string(*c->verdict), to_string(c->status)));
  if (!gpu) {
    if (c->verdict && c->status == ObsStatus::kOk)
      if (const std::string why = cpu_verdict_problem(t, w, *c->verdict, c->verdict_reason, c->distinct, c->err_ratio);
          !why.empty())
        return Status::invalid(fmt::format("{} is {}, which is not {}", json_path(path, "verdict"),
                                           to_string(*c->verdict), why));
    // A skip its own key contradicts (the oracle's, or a cpu target's of a workload it runs on a CPU that has what
    // the target needs).
    if (c->status == ObsStatus::kSkipped)
      if (const std::string why = skip_contradiction(t, w, b.keys.at(c->key)); !why.empty())
        return Status::invalid(fmt::format("{}: status skipped ('{}'), but {}", path,
                                           shown_safely(c->reason.substr(0, 60)), why));
  }
  if (j.contains("kernels"))
    for (auto& [fp, names] : j["kernels"].items()) {
      std::string kp = json_path(json_path(path, "kernels"), fp);
      DETAUDIT_RETURN_IF_ERROR(check_json(names, T::kArray, kp));
      for (size_t i = 0; i < names.size(); ++i) {
        DETAUDIT_RETURN_IF_ERROR(check_json(names[i], T::kString, json_path(kp, i)));
        c->kernels[fp].push_back(names[i].get<std::string>());
      }
    }
  // Kernels are what CUPTI saw a GPU run; a CPU cell has none.
  if (!gpu && !c->kernels.empty())
    return Status::invalid(fmt::format("{} on a cell of a {} key (kernels are a GPU's, traced by CUPTI)",
                                       json_path(path, "kernels"),
                                       json_fields::str(b.keys.at(c->key), "kind", "?").substr(0, 20)));
  return Status::ok();
}

Status run_from_json(const nlohmann::json& j, const std::string& path, BaselineRun* r) {
  if (Status st; !(st = check_json(j, T::kObject, path)) ||
                 !(st = only_known(j, {"seed", "replicate", "final_loss", "weights_fingerprint", "outcome"}, path)) ||
                 !(st = check_key(j, "seed", T::kUnsigned, true, path)) ||
                 !(st = check_key(j, "replicate", T::kCount, true, path)) ||
                 !(st = string_key(j, "weights_fingerprint", false, path, &r->weights_fingerprint)) ||
                 !(st = string_key(j, "outcome", false, path, &r->outcome)))
    return st;
  r->seed = j["seed"].get<uint64_t>();
  r->replicate = j["replicate"].get<int>();
  std::optional<double> loss;
  if (!j.contains("final_loss")) {
    return Status::invalid(json_path(path, "final_loss") + " is missing");
  }
  DETAUDIT_RETURN_IF_ERROR(number_or_null_key(j, "final_loss", path, &loss));
  r->final_loss = loss.value_or(std::numeric_limits<double>::quiet_NaN());
  if (!r->weights_fingerprint.empty())
    DETAUDIT_RETURN_IF_ERROR(fingerprint_ok(j["weights_fingerprint"], json_path(path, "weights_fingerprint")));
  if (j.contains("outcome")) DETAUDIT_RETURN_IF_ERROR(fingerprint_ok(j["outcome"], json_path(path, "outcome")));
  return Status::ok();
}

// How two runs that promised one outcome ended apart: "final loss", "weights A and B", or "" where they did not (a run
// without weights, from an older version, is held by its loss alone).
std::string ended_apart(const BaselineRun& a, const BaselineRun& b) {
  const bool same_loss = std::memcmp(&a.final_loss, &b.final_loss, sizeof(double)) == 0;
  const bool same_weights =
      a.weights_fingerprint.empty() || b.weights_fingerprint.empty() || a.weights_fingerprint == b.weights_fingerprint;
  if (!same_weights) return fmt::format("weights {} and {}", a.weights_fingerprint, b.weights_fingerprint);
  if (!same_loss) return "final loss";
  // The same loss and weights after another learning curve, noise measurement or held-out prediction.
  if (!a.outcome.empty() && !b.outcome.empty() && a.outcome != b.outcome)
    return fmt::format("outcomes {} and {} (learning curve, noise measurements or held-out prediction)", a.outcome,
                       b.outcome);
  return "";
}

Status training_from_json(const nlohmann::json& j, const std::string& path, const Baseline& b, BaselineTraining* t) {
  DETAUDIT_RETURN_IF_ERROR(check_json(j, T::kObject, path));
  DETAUDIT_RETURN_IF_ERROR(only_known(
      j, {"model", "design", "condition", "init", "determinism", "target", "key", "runs", "n", "mean", "sd"}, path));
  const std::pair<const char*, std::string*> required[] = {
      {"model", &t->model}, {"design", &t->design}, {"condition", &t->condition}, {"target", &t->target}, {"key", &t->key}};
  for (auto& [key, field] : required) DETAUDIT_RETURN_IF_ERROR(string_key(j, key, true, path, field));
  if (Status st;
      !(st = string_key(j, "init", false, path, &t->init)) ||
      !(st = string_key(j, "determinism", false, path, &t->determinism)) ||
      !(st = check_key(j, "runs", T::kArray, true, path)) || !(st = check_key(j, "n", T::kCount, true, path)) ||
      !(st = number_or_null_key(j, "mean", path, &t->mean)) || !(st = number_or_null_key(j, "sd", path, &t->sd)))
    return st;
  if (Spec spec; !parse_target(t->target, &spec) || spec.str() != t->target)
    return Status::invalid(fmt::format("{} is not a target spec as detaudit writes one", json_path(path, "target")));
  if (t->sd && !(*t->sd >= 0))  // NaN included: a standard deviation is never negative
    return Status::invalid(fmt::format("{} must be 0 or more (got {})", json_path(path, "sd"), *t->sd));
  if (!b.keys.count(t->key)) {
    return Status::invalid(json_path(path, "key") + " names no entry of \"keys\" (got \"" + t->key + "\")");
  }
  DETAUDIT_RETURN_IF_ERROR(key_fits_target(b, t->key, t->target, path));
  // Initial weights and nondeterminism are the condition's: (a), (b) random; (c), (d), (e) fixed; (a), (c)
  // nondeterministic.
  static const std::string kConditions = "abcde";
  if (t->condition.size() != 1 || kConditions.find(t->condition) == std::string::npos)
    return Status::invalid(fmt::format("{} must be one of a, b, c, d, e (got \"{}\")", json_path(path, "condition"),
                                       t->condition.substr(0, 20)));
  const bool random = condition_random_init(t->condition), nondet = condition_nondeterministic(t->condition);
  if (!t->init.empty() && t->init != (random ? "random" : "fixed"))
    return Status::invalid(fmt::format("{} is \"{}\", but condition ({}) starts from {} initial weights",
                                       json_path(path, "init"), t->init.substr(0, 20), t->condition,
                                       random ? "random" : "fixed"));
  if (!t->determinism.empty() && t->determinism != (nondet ? "off" : "on"))
    return Status::invalid(fmt::format("{} is \"{}\", but condition ({}) runs with determinism {}",
                                       json_path(path, "determinism"), t->determinism.substr(0, 20), t->condition,
                                       nondet ? "off" : "on"));
  t->n = j["n"].get<int>();
  const auto& runs = j["runs"];
  std::set<std::pair<uint64_t, int>> seen;
  std::vector<double> finite;
  for (size_t i = 0; i < runs.size(); ++i) {
    BaselineRun r;
    DETAUDIT_RETURN_IF_ERROR(run_from_json(runs[i], json_path(json_path(path, "runs"), i), &r));
    if (!seen.insert({r.seed, r.replicate}).second)
      return Status::invalid(fmt::format("{}: seed {} replicate {} appears twice", json_path(path, "runs"), r.seed,
                                         r.replicate));
    if (std::isfinite(r.final_loss)) finite.push_back(r.final_loss);
    t->runs.push_back(r);
  }
  // n, mean and sd are what the runs listed make them (as make_baseline computed them): a summary that
  // says otherwise would judge later runs against numbers no run gave.
  auto differs = [](const std::optional<double>& stated, std::optional<double> from_runs) {
    if (!stated || !from_runs) return stated.has_value() != from_runs.has_value();
    return std::fabs(*stated - *from_runs) > 1e-12 * std::max(1.0, std::fabs(*from_runs));
  };
  const std::optional<double> m = finite.empty() ? std::nullopt : std::optional<double>(mean(finite));
  const std::optional<double> sd = finite.size() < 2 ? std::nullopt : std::optional<double>(sample_std(finite));
  // (d) runs every replicate of a seed to the same bits (fixed initial weights, nondeterminism off, no nudge;
  // check takes any of them as the seed's reference): runs of one seed that end apart are no reference.
  if (condition_replicates_agree(t->condition)) {
    std::map<uint64_t, const BaselineRun*> first;
    for (const BaselineRun& r : t->runs) {
      auto [it, fresh] = first.emplace(r.seed, &r);
      if (fresh) continue;
      const BaselineRun& o = *it->second;
      if (const std::string apart = ended_apart(o, r); !apart.empty())
        return Status::invalid(fmt::format(
            "{}: seed {}'s replicates {} and {} end apart ({}), but condition ({}) starts each from the same weights "
            "with nondeterminism off and no nudge, so they end in the same bits: such runs are no reference",
            json_path(path, "runs"), r.seed, o.replicate, r.replicate, apart,
            t->condition));
    }
  }
  if (size_t(t->n) != finite.size() || differs(t->mean, m) || differs(t->sd, sd))
    return Status::invalid(fmt::format("{}: n, mean and sd are not those of its runs (n {} for {} runs with a loss)",
                                       path, t->n, finite.size()));
  return Status::ok();
}

// A training cell of the design it was saved from (source.plan.design): its model and design, a target that is
// the variant of one of the design's targets its condition runs, and runs the design has.
Status training_in_design(const BaselineTraining& t, const nlohmann::json& plan, const std::string& path) {
  if (!plan.contains("design")) return Status::ok();
  const nlohmann::json& d = plan["design"];
  for (auto [k, v] : {std::pair{"model", &t.model}, std::pair{"design", &t.design}})
    if (d.contains(k) && d[k] != *v)
      return Status::invalid(fmt::format("{} \"{}\" is not the design's ({})", json_path(path, k),
                                         shown_safely(v->substr(0, 40)), d[k].dump()));
  if (d.contains("targets")) {
    bool found = false;
    for (auto& base_text : d["targets"]) {
      Spec base, det, nondet;
      if (!parse_target(base_text.get<std::string>(), &base) || !training_variants(base, &det, &nondet)) continue;
      found = found || (condition_nondeterministic(t.condition) ? nondet : det).str() == t.target;
    }
    if (!found)
      return Status::invalid(fmt::format("{} {} is not what condition ({}) runs of any target of the design",
                                         json_path(path, "target"), t.target, t.condition));
  }
  for (size_t i = 0; i < t.runs.size(); ++i)
    DETAUDIT_RETURN_IF_ERROR(
        check_design_run(t.condition, t.runs[i].seed, t.runs[i].replicate, d, json_path(json_path(path, "runs"), i)));
  return Status::ok();
}

// A baseline in which nothing ran (cells skipped, crashed or timed out; training cells without a finished
// run) holds no bits: a check against it would judge nothing. baseline save refuses to write one, loading
// refuses one.
Status holds_bits(const Baseline& b) {
  const bool ran =
      std::any_of(b.cells.begin(), b.cells.end(), [](const BaselineCell& c) { return c.status == ObsStatus::kOk; }) ||
      std::any_of(b.training.begin(), b.training.end(), [](const BaselineTraining& t) { return t.n > 0; });
  if (ran) return Status::ok();
  return Status::invalid(fmt::format("none of its {} cells ran and none of its {} training cells has a finished run: "
                                     "it holds no bits to check against",
                                     b.cells.size(), b.training.size()));
}

Status baseline_from_json(const nlohmann::json& j, Baseline* out) {
  Baseline b;
  const std::pair<const char*, std::string*> header[] = {
      {"created_at", &b.created_at}, {"tool_version", &b.tool_version}, {"tool_commit", &b.tool_commit}};
  for (auto& [key, field] : header) DETAUDIT_RETURN_IF_ERROR(string_key(j, key, true, "", field));
  DETAUDIT_RETURN_IF_ERROR(
      only_known(j, {"schema", "created_at", "tool_version", "tool_commit", "source", "keys", "entries", "training"}, ""));
  if (Status st;
      !(st = check_key(j, "source", T::kObject, true, "")) || !(st = check_key(j, "keys", T::kObject, true, "")) ||
      !(st = check_key(j, "entries", T::kArray, true, "")) || !(st = check_key(j, "training", T::kArray, false, "")))
    return st;
  if (!is_version_text(b.tool_version))
    return Status::invalid(fmt::format("tool_version '{}' is not a version (digits, letters, . - +)",
                                       shown_safely(b.tool_version.substr(0, 40))));
  if (!is_utc_iso8601(b.created_at) || b.created_at > utc_iso8601(std::time(nullptr) + 86400))
    return Status::invalid(fmt::format("created_at '{}' is not a time (YYYY-MM-DDTHH:MM:SSZ, not in the future)",
                                       b.created_at.substr(0, 40)));
  const auto& src = j["source"];
  // Where its bits came from: the results directory and when that run started (what check names).
  DETAUDIT_RETURN_IF_ERROR(only_known(src, {"dir", "command", "started_at", "finished_at", "plan"}, "source"));
  for (const char* k : {"dir", "started_at"})
    if (!src.contains(k)) return Status::invalid(fmt::format("source.{} is missing (a baseline says where its bits came from)", k));
  if (Status st; !(st = string_key(src, "dir", false, "source", &b.source_dir)) ||
                 !(st = string_key(src, "command", false, "source", &b.source_command)) ||
                 !(st = string_key(src, "started_at", false, "source", &b.source_started_at)) ||
                 !(st = string_key(src, "finished_at", false, "source", &b.source_finished_at)) ||
                 !(st = check_key(src, "plan", T::kObject, false, "source")))
    return st;
  DETAUDIT_RETURN_IF_ERROR(check_run_times(b.source_started_at, b.source_finished_at, "source"));
  if (b.source_dir.empty()) return Status::invalid("source.dir is empty (a baseline says where its bits came from)");
  // The plan its cells were run by: every cell below is checked against it.
  // (A baseline of an older version has none: its kind comes from what it holds.)
  std::vector<Spec> plan_targets, plan_workloads;  // the source plan's specs that parse, each parsed once
  if (src.contains("plan") && !src["plan"].empty()) {
    if (Status st = check_results_plan(src["plan"]); !st) return st.prefixed("source.");
    b.source_plan = src["plan"];
    if (b.source_plan.contains("targets") && b.source_plan.contains("workloads")) {
      for (auto& t : b.source_plan["targets"])
        if (Spec sp; t.is_string() && parse_target(t.get<std::string>(), &sp).is_ok()) plan_targets.push_back(sp);
      for (auto& w : b.source_plan["workloads"])
        if (Spec sp; w.is_string() && parse_workload(w.get<std::string>(), &sp).is_ok()) plan_workloads.push_back(sp);
      std::set<std::string> targets, workloads;
      for (auto& t : plan_targets) targets.insert(t.str());
      for (auto& w : plan_workloads) workloads.insert(w.str());
      if (const std::string why = command_contradicts_plan(b.source_command, targets, workloads, b.source_plan); !why.empty())
        return Status::invalid("source.command: " + why);
    }
    // A training design's source: the command that made it asked for its design, as in the results file.
    if (const auto d = b.source_plan.find("design"); d != b.source_plan.end() && !b.source_plan.contains("sources"))
      if (const std::string why = train_command_contradicts_design(b.source_command, *d); !why.empty())
        return Status::invalid("source.command: " + why);
  }
  // (The run may have been on another machine's clock: a day of skew is allowed, as for the history.)
  if (const auto finished = iso8601_seconds(b.source_finished_at), created = iso8601_seconds(b.created_at);
      finished && created && *finished > *created + 86400)
    return Status::invalid(fmt::format("source.finished_at {} is after the baseline's created_at {}: a baseline is "
                                       "saved from a run that has finished",
                                       b.source_finished_at, b.created_at));
  for (auto& [id, k] : j["keys"].items()) {
    if (Status st; !(st = check_json(k, T::kObject, json_path("keys", id))) ||
                   !(st = check_key(k, "kind", T::kString, true, json_path("keys", id))))
      return st;
    // A key's name is its kind and the hash of what it holds: an edited key no longer has its name.
    if (key_id(k) != id)
      return Status::invalid(fmt::format("{} holds what {} is the name of, not what its own name says: the key was "
                                         "edited",
                                         json_path("keys", id), key_id(k)));
    // A baseline is saved by a version that reads its results: never an older one than the results' own.
    if (const auto v = k.find("tool_version"); v != k.end() && v->is_string() && version_older(b.tool_version, *v))
      return Status::invalid(fmt::format("tool_version {} is older than {}.tool_version {}: a baseline is saved by a "
                                         "version that reads the results it keeps",
                                         shown_safely(b.tool_version), json_path("keys", id),
                                         shown_safely(v->get<std::string>().substr(0, 40))));
    b.keys[id] = k;
  }
  const auto& entries = j["entries"];
  std::set<std::pair<std::string, std::string>> cells;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, size_t>> invariant_rows;  // (workload, product)
  for (size_t i = 0; i < entries.size(); ++i) {
    BaselineCell c;
    DETAUDIT_RETURN_IF_ERROR(cell_from_json(entries[i], json_path("entries", i), b, &c));
    if (!cells.insert({c.workload, c.target}).second)
      return Status::invalid(fmt::format("{}: the cell {} on {} appears twice", json_path("entries", i), c.workload,
                                         c.target));
    // Rows that agreed with one product are its rows: the invariant cells of one workload and one product share them.
    if (Spec t, w; !c.rows_fingerprint.empty() && parse_target(c.target, &t) && parse_workload(c.workload, &w) &&
                   batch_invariant_by_verdict(c, t, w)) {
      const auto [it, fresh] = invariant_rows.try_emplace({c.workload, c.fingerprints[0]}, c.rows_fingerprint, i);
      if (!fresh && it->second.first != c.rows_fingerprint)
        return Status::invalid(fmt::format("{} is {}, but entries[{}] of the same product, which passed a promise of "
                                           "batch invariance as this one did, has {}: rows that agree with one product "
                                           "are its rows",
                                           json_path(json_path("entries", i), "rows_fingerprint"), c.rows_fingerprint,
                                           it->second.second, it->second.first));
    }
    // A cell of the run it was saved from: a target and workload of its plan, repeated as the plan says
    // (imported outputs join any run, as in results).
    if (Spec t; b.source_plan.contains("targets") && parse_target(c.target, &t)) {
      const BackendEntry* be = find_backend(t.name);
      const bool import_plan = b.source_plan.value("suite", "") == "import";
      if (!(be && be->imported) || import_plan) {
        auto names = [](const nlohmann::json& list, const std::string& x) {
          return list.is_array() && std::find(list.begin(), list.end(), x) != list.end();
        };
        if (!names(b.source_plan["targets"], c.target) ||
            (b.source_plan.contains("workloads") && !names(b.source_plan["workloads"], c.workload)))
          return Status::invalid(fmt::format("{}: the cell {} on {} is not a cell of source.plan", json_path("entries", i),
                                             c.workload, c.target));
        const nlohmann::json planned = b.source_plan.value("repeats", nlohmann::json());
        if (planned.is_number_integer() && c.status != ObsStatus::kSkipped &&
            (import_plan ? c.repeats > planned.get<int>() : c.repeats != planned.get<int>()))
          return Status::invalid(fmt::format("{} is {}, but source.plan repeats each cell {}{} times",
                                             json_path(json_path("entries", i), "repeats"), c.repeats,
                                             import_plan ? "at most " : "", planned.get<int>()));
      }
    }
    b.cells.push_back(std::move(c));
  }
  // A baseline saved from a finished probe run holds an entry of every target and workload of its plan that apply to
  // each other, as the run's results did: an entry left out would let that cell's changed bits pass as a new cell.
  if (!b.source_finished_at.empty() && b.source_plan.is_object() && b.source_plan.value("suite", "") != "import")
    for (const Spec& t : plan_targets)
      for (const Spec& w : plan_workloads)
        if (applicable(t, w) && !cells.count({w.str(), t.str()}))
          return Status::invalid(fmt::format("entries: the source run finished, but the baseline holds no entry of {} on "
                                             "{}, which source.plan runs",
                                             w.str(), t.str()));
  std::set<std::tuple<std::string, std::string, std::string, std::string>> trained;
  if (j.contains("training"))
    for (size_t i = 0; i < j["training"].size(); ++i) {
      BaselineTraining t;
      DETAUDIT_RETURN_IF_ERROR(training_from_json(j["training"][i], json_path("training", i), b, &t));
      if (is_training_plan(b.source_plan))
        DETAUDIT_RETURN_IF_ERROR(training_in_design(t, b.source_plan, json_path("training", i)));
      if (!trained.insert({t.model, t.design, t.condition, t.target}).second)
        return Status::invalid(fmt::format("{}: the training cell ({}) on {} appears twice", json_path("training", i),
                                           t.condition, t.target));
      b.training.push_back(std::move(t));
    }
  // Across conditions, the promise each (d) cell is held to above: runs of one seed on one target that start from
  // the same weights with nondeterminism off and no nudge ((b)'s first seed and (d)'s replicates) end in the same
  // bits. Runs that end apart are no reference (baseline save refuses such results): check would blame a later run
  // for the baseline's own contradiction.
  std::map<std::tuple<std::string, std::string, std::string, std::string, uint64_t>,
           std::pair<const BaselineTraining*, const BaselineRun*>>
      first_of_start;
  for (const BaselineTraining& t : b.training) {
    if (condition_nondeterministic(t.condition) || condition_nudged(t.condition)) continue;
    for (const BaselineRun& r : t.runs) {
      auto [it, fresh] = first_of_start.emplace(std::tuple{t.model, t.design, t.target, t.key, r.seed}, std::pair{&t, &r});
      if (fresh || it->second.first == &t) continue;  // within one cell: its own check
      const BaselineTraining& ot = *it->second.first;
      if (const std::string apart = ended_apart(*it->second.second, r); !apart.empty())
        return Status::invalid(fmt::format(
            "training: ({}) and ({}) of {}/{} on {}: seed {} starts both from the same weights with nondeterminism off "
            "and no nudge, yet they end apart ({}): such runs are no reference",
            ot.condition, t.condition, t.model, t.design, t.target, r.seed, apart));
    }
  }
  // Runs from two seeds' initial weights never end in the same weights: a run's start is its seed (random initial
  // weights, (a) and (b)) or the fixed weights' ((c), (d), (e): seed 1000). A nudge is no other start: a nudged
  // weight can be trained back to the un-nudged run's bits. (Diverged runs are left out.)
  {
    std::map<std::string, std::pair<std::string, std::string>> ended;  // weights -> (start, where)
    for (size_t ti = 0; ti < b.training.size(); ++ti) {
      const BaselineTraining& t = b.training[ti];
      for (const BaselineRun& r : t.runs) {
        if (r.weights_fingerprint.empty() || !std::isfinite(r.final_loss)) continue;
        const std::string start = fmt::format("{} seed {}", t.model, r.seed);
        const std::string where = fmt::format("({}) seed {} rep {} on {}", t.condition, r.seed, r.replicate, t.target);
        const auto [it, first] = ended.try_emplace(r.weights_fingerprint, start, where);
        if (!first && it->second.first != start)
          return Status::invalid(fmt::format("training: {} ends in the weights of {}, which started from another seed's "
                                             "weights (runs from two seeds never end in the same bits)",
                                             where, it->second.second));
      }
    }
  }
  // A run's outcome: `baseline save` writes one on every finished run (each of which has weights), a version before
  // it on none; one outcome is one run's bits (its weights and final loss among them).
  {
    size_t with = 0, runs = 0;
    std::string without;
    std::map<std::string, std::pair<const BaselineRun*, std::string>> of_outcome;  // outcome -> (run, where)
    for (const BaselineTraining& t : b.training)
      for (const BaselineRun& r : t.runs) {
        ++runs;
        const std::string where = fmt::format("({}) seed {} rep {} on {}", t.condition, r.seed, r.replicate, t.target);
        if (r.outcome.empty()) {
          if (without.empty()) without = where;
          continue;
        }
        ++with;
        if (r.weights_fingerprint.empty())
          return Status::invalid(fmt::format("training: {} has an outcome but no weights (every run with an outcome "
                                             "has the fingerprint of its final weights)",
                                             where));
        const auto [it, first] = of_outcome.try_emplace(r.outcome, &r, where);
        if (!first && (it->second.first->weights_fingerprint != r.weights_fingerprint ||
                       std::memcmp(&it->second.first->final_loss, &r.final_loss, sizeof(double)) != 0))
          return Status::invalid(fmt::format("training: {} and {} have one outcome {} but other final weights or loss "
                                             "(an outcome is a fingerprint of both)",
                                             it->second.second, where, r.outcome));
      }
    if (with > 0 && with < runs)
      return Status::invalid(fmt::format("training: {} has no outcome while {} of {} runs have one (baseline save "
                                         "writes one on every run; a baseline of an older version, on none)",
                                         without, with, runs));
  }
  DETAUDIT_RETURN_IF_ERROR(keys_of_one_machine(b));
  DETAUDIT_RETURN_IF_ERROR(holds_bits(b));  // (a file edited to hold none)
  // Its strings reach a terminal (check's findings, its header): no control character but a tab or newline.
  std::string bad;
  std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& v,
                                                                             const std::string& at) {
    if (!bad.empty()) return;
    if (v.is_string()) {
      if (const int c = first_control_byte(v.get_ref<const std::string&>(), true); c >= 0)
        bad = fmt::format("{} holds a control character (byte 0x{:02x})", at.empty() ? "a string" : at, c);
    } else if (v.is_object()) {
      for (auto& item : v.items()) walk(item.value(), json_path(at, item.key()));
    } else if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) walk(v[i], json_path(at, i));
    }
  };
  walk(j, "");
  if (!bad.empty()) return Status::invalid(bad);
  *out = std::move(b);
  return Status::ok();
}

}  // namespace

Status load_baseline(const std::string& path, Baseline* out) {
  nlohmann::json j;
  DETAUDIT_RETURN_IF_ERROR(load_json_document(path, kBaselineSchema, "baseline", &j));
  return baseline_from_json(j, out).prefixed(path + ": ");
}

Status run_baseline_save(const std::string& dir, const std::string& out, BaselineSaved* saved) {
  if (!fs::is_directory(dir)) {
    return Status::invalid(dir + ": not a directory");
  }
  Results r;
  DETAUDIT_RETURN_IF_ERROR(load_stored_results(results_file(dir), &r));
  if (r.observations.empty() && r.training.empty()) {
    return Status::invalid(dir + "/results.json: no observations and no training runs to make a baseline of");
  }
  // A baseline's keys are the machine its bits came from: results that describe none give no key.
  if (!r.machine.contains("cpu_model") && !r.machine.contains("hostname"))
    return Status::invalid(dir + "/results.json: machine describes no machine (no cpu_model, no hostname): a "
                                 "baseline's keys are the machine its bits came from");
  // A run that broke its deterministic variant's promise is no reference for later runs' bits.
  const std::vector<RunVerdict> verdicts = judge_training_runs(r.training);
  for (size_t i = 0; i < r.training.size(); ++i)
    if (broke_promise(r.training[i], verdicts[i]))
      return Status::invalid(fmt::format("{}: training[{}] ({} seed {} rep {}) {}: such a run is no reference",
                                         results_file(dir), i, r.training[i].target, r.training[i].seed,
                                         r.training[i].replicate, verdicts[i].reason));
  Baseline b = make_baseline(r, dir);
  DETAUDIT_RETURN_IF_ERROR(holds_bits(b).prefixed(results_file(dir) + ": a baseline of it: "));
  std::string path = out.empty() ? dir + "/baseline.json" : out;
  DETAUDIT_RETURN_IF_ERROR(save_baseline(path, b));
  saved->path = path;
  saved->cells = b.cells.size();
  saved->training = b.training.size();
  saved->keys = b.keys.size();
  saved->unfinished = r.finished_at.empty();
  return Status::ok();
}

}  // namespace detaudit
