#include "contract/training_run.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "contract/results.hpp"
#include "kernels/fingerprint.hpp"

namespace detaudit {

namespace {

nlohmann::json num_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

std::string got(const nlohmann::json& j) { return j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace); }

// JSON has no NaN: null reads back as NaN, so what the analysis reads after a resume is what it read before.
Status number_or_nan(const nlohmann::json& v, const std::string& path, double* out) {
  if (v.is_null()) return *out = std::numeric_limits<double>::quiet_NaN(), Status::ok();
  if (v.is_number()) return *out = v.get<double>(), Status::ok();
  return Status::invalid(fmt::format("{} must be a number or null (got {})", path, v.type_name()));
}

Status one_of(const nlohmann::json& j, const char* key, std::initializer_list<const char*> values,
              const std::string& path, std::string* out) {
  if (!j.contains(key)) return Status::ok();
  const std::string v = j[key].get<std::string>();
  for (const char* x : values)
    if (v == x) return *out = v, Status::ok();
  std::string list;
  for (const char* x : values) list += (list.empty() ? "" : ", ") + std::string(x);
  return Status::invalid(fmt::format("{} must be one of {} (got {})", json_path(path, key), list, got(j[key])));
}

Status from_json(const nlohmann::json& j, CurvePhases* p, const std::string& path) {
  using T = JsonType;
  if (Status st; !(st = check_json(j, T::kObject, path)) || !(st = check_key(j, "label", T::kString, true, path)) ||
                 !(st = check_key(j, "segments", T::kCount, false, path)) ||
                 !(st = check_key(j, "censored", T::kBoolean, false, path)))
    return st;
  for (auto& [k, v] : j.items())
    if (k != "label" && k != "segments" && k != "censored" && k != "escape_step" && k != "margin")
      return Status::invalid(fmt::format("{} is not a field of a run's phases", json_path(path, k)));
  p->label = j["label"];
  p->segments = j.value("segments", uint64_t(0));
  p->censored = j.value("censored", false);
  if (j.contains("escape_step") && !j["escape_step"].is_null()) {
    if (!j["escape_step"].is_number())
      return Status::invalid(fmt::format("{} must be a number or null (got {})", json_path(path, "escape_step"),
                                         j["escape_step"].type_name()));
    p->escape_step = j["escape_step"].get<double>();
  }
  if (j.contains("margin") && !j["margin"].is_null()) {
    if (!j["margin"].is_number())
      return Status::invalid(
          fmt::format("{} must be a number or null (got {})", json_path(path, "margin"), j["margin"].type_name()));
    p->margin = j["margin"].get<double>();
  }
  return Status::ok();
}

// Only the listed fields, each of its type; every one required unless optional names it.
Status only_fields(const nlohmann::json& j, std::initializer_list<std::pair<const char*, JsonType>> fields,
                   std::initializer_list<const char*> optional, const char* what, const std::string& path) {
  DETAUDIT_RETURN_IF_ERROR(check_json(j, JsonType::kObject, path));
  for (auto& [k, t] : fields) {
    bool opt = false;
    for (const char* o : optional) opt = opt || std::string(o) == k;
    DETAUDIT_RETURN_IF_ERROR(check_key(j, k, t, !opt, path));
  }
  for (auto& [k, v] : j.items()) {
    bool known = false;
    for (auto& f : fields) known = known || k == f.first;
    if (!known) return Status::invalid(fmt::format("{} is not a field of {}", json_path(path, k), what));
  }
  return Status::ok();
}

Status from_json(const nlohmann::json& j, WeightNudge* n, const std::string& path) {
  using T = JsonType;
  DETAUDIT_RETURN_IF_ERROR(only_fields(j,
                                       {{"index", T::kUnsigned},
                                        {"parameter", T::kUnsigned},
                                        {"tensor", T::kString},
                                        {"from", T::kNumber},
                                        {"to", T::kNumber}},
                                       {}, "a weight nudge", path));
  n->index = j["index"];
  n->parameter = j["parameter"];
  n->tensor = j["tensor"];
  n->from = j["from"];
  n->to = j["to"];
  if (n->from == n->to) return Status::invalid(json_path(path, "to") + " equals from: the weight was not moved");
  return Status::ok();
}

Status from_json(const nlohmann::json& j, NoiseTrace* n, const std::string& path) {
  using T = JsonType;
  DETAUDIT_RETURN_IF_ERROR(only_fields(j,
                                       {{"every", T::kCount},
                                        {"b_small", T::kCount},
                                        {"b_big", T::kCount},
                                        {"examples", T::kUnsigned},
                                        {"points", T::kArray}},
                                       {"examples"}, "a noise trace", path));
  n->every = j["every"];
  n->examples = j.value("examples", uint64_t(0));
  n->b_small = j["b_small"];
  n->b_big = j["b_big"];
  if (n->every < 1 || n->b_small < 1 || n->b_big <= n->b_small)
    return Status::invalid(fmt::format("{} needs every >= 1 and 1 <= b_small < b_big (got {}, {}, {})", path, n->every,
                                       n->b_small, n->b_big));
  if (n->b_small != noise_microbatch(n->b_big))
    return Status::invalid(fmt::format("{} is {}, but a batch of {} is measured in microbatches of {}",
                                       json_path(path, "b_small"), n->b_small, n->b_big, noise_microbatch(n->b_big)));
  if (n->examples > (uint64_t(1) << 30))
    return Status::invalid(fmt::format("{} is {}: a design loads at most 1 GiB of data (2^30 examples of a byte)",
                                       json_path(path, "examples"), n->examples));
  if (j.contains("examples") && n->examples < uint64_t(n->b_big))
    return Status::invalid(fmt::format("{} is {}: the data has at least one batch of {} examples",
                                       json_path(path, "examples"), n->examples, n->b_big));
  const auto& pts = j["points"];
  for (size_t i = 0; i < pts.size(); ++i) {
    const std::string pp = json_path(json_path(path, "points"), i);
    DETAUDIT_RETURN_IF_ERROR(only_fields(
        pts[i], {{"step", T::kUnsigned}, {"big_sq", T::kNumber}, {"small_sq", T::kNumber}, {"hw_sq", T::kNumber}},
        {"hw_sq"}, "a noise point", pp));
    NoisePoint p;
    p.step = pts[i]["step"];
    p.big_sq = pts[i]["big_sq"];
    p.small_sq = pts[i]["small_sq"];
    if (pts[i].contains("hw_sq")) p.hw_sq = pts[i]["hw_sq"].get<double>();
    if (p.big_sq < 0 || p.small_sq < 0 || (p.hw_sq && *p.hw_sq < 0))
      return Status::invalid(pp + ": a squared norm is negative");
    n->points.push_back(p);
  }
  return Status::ok();
}

Status from_json(const nlohmann::json& j, NextFrameCheck* n, const std::string& path) {
  using T = JsonType;
  DETAUDIT_RETURN_IF_ERROR(
      only_fields(j, {{"sequences", T::kUnsigned}, {"mse", T::kNumber}, {"copy_last_mse", T::kNumber}}, {},
                  "a next-frame check", path));
  n->sequences = j["sequences"];
  n->mse = j["mse"];
  n->copy_last_mse = j["copy_last_mse"];
  if (n->mse < 0 || n->copy_last_mse < 0) return Status::invalid(path + ": a mean squared error is negative");
  return Status::ok();
}

}  // namespace

nlohmann::json to_json(const NextFrameCheck& n) {
  return {{"sequences", n.sequences}, {"mse", n.mse}, {"copy_last_mse", n.copy_last_mse}};
}

nlohmann::json to_json(const WeightNudge& n) {
  return {{"index", n.index}, {"parameter", n.parameter}, {"tensor", n.tensor}, {"from", n.from}, {"to", n.to}};
}

nlohmann::json to_json(const NoiseTrace& n) {
  nlohmann::json pts = nlohmann::json::array();
  for (auto& p : n.points) {
    nlohmann::json q = {{"step", p.step}, {"big_sq", p.big_sq}, {"small_sq", p.small_sq}};
    if (p.hw_sq) q["hw_sq"] = *p.hw_sq;
    pts.push_back(std::move(q));
  }
  return {{"every", n.every},
          {"b_small", n.b_small},
          {"b_big", n.b_big},
          {"examples", n.examples},
          {"points", std::move(pts)}};
}

nlohmann::json to_json(const CurvePhases& p) {
  return {{"label", p.label},
          {"segments", p.segments},
          {"escape_step", p.escape_step ? nlohmann::json(*p.escape_step) : nlohmann::json(nullptr)},
          {"censored", p.censored},
          {"margin", p.margin ? nlohmann::json(*p.margin) : nlohmann::json(nullptr)}};
}

nlohmann::json to_json(const TrainingRun& r) {
  nlohmann::json j = {{"key", r.key},
                      {"model", r.model},
                      {"design", r.design},
                      {"condition", r.condition},
                      {"init", r.init_name()},
                      {"determinism", r.nondeterministic ? "off" : "on"},
                      {"nondeterminism", r.nondeterminism_name()},
                      {"target", r.target},
                      {"base_target", r.base_target},
                      {"seed", r.seed},
                      {"replicate", r.replicate},
                      {"data_seed", r.data_seed},
                      {"batches", r.batches},
                      {"window", r.window},
                      {"machine_id", r.machine_id},
                      {"status", to_string(r.status)}};
  if (r.source) j["source"] = r.source;
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (r.ok()) {
    j["final_loss"] = num_or_null(r.final_loss);
    nlohmann::json c = nlohmann::json::array();
    for (double x : r.curve) c.push_back(num_or_null(x));
    j["curve"] = std::move(c);
    j["curve_fingerprint"] = r.curve_fingerprint;
    j["initial_weights_fingerprint"] = r.initial_weights_fingerprint;
    j["weights_fingerprint"] = r.weights_fingerprint;
    j["seconds"] = r.seconds;
    j["steps_per_second"] = r.steps_per_second;
    if (r.phases) j["phases"] = to_json(*r.phases);
    if (r.noise) j["noise"] = to_json(*r.noise);
    if (r.prediction) j["prediction"] = to_json(*r.prediction);
    if (!r.frames_png.empty()) j["frames_png"] = r.frames_png;
  }
  if (r.nudge) j["nudge"] = to_json(*r.nudge);
  if (!r.signal.empty()) j["signal"] = r.signal;
  if (r.timeout_s) j["timeout_s"] = *r.timeout_s;
  if (r.batches_done) j["batches_done"] = *r.batches_done;
  return j;
}

Status from_json(const nlohmann::json& j, TrainingRun* out, const std::string& path) {
  using T = JsonType;
  struct Field {
    const char* key;
    JsonType type;
  };
  static const Field kFields[] = {
      {"key", T::kString},         {"model", T::kString},          {"design", T::kString},
      {"condition", T::kString},   {"init", T::kString},           {"determinism", T::kString},
      {"nondeterminism", T::kString}, {"target", T::kString},      {"base_target", T::kString},
      {"status", T::kString},      {"reason", T::kString},         {"seed", T::kUnsigned},
      {"replicate", T::kCount},    {"data_seed", T::kUnsigned},    {"batches", T::kCount},
      {"window", T::kCount},       {"machine_id", T::kString},     {"source", T::kCount},
      {"curve_fingerprint", T::kString}, {"weights_fingerprint", T::kString},
      {"initial_weights_fingerprint", T::kString}, {"seconds", T::kNumber}, {"steps_per_second", T::kNumber},
      {"curve", T::kArray},        {"signal", T::kString},         {"timeout_s", T::kNumber},
      {"batches_done", T::kCount}, {"frames_png", T::kString}};
  if (Status st; !(st = check_json(j, T::kObject, path)) || !(st = check_key(j, "status", T::kString, true, path)))
    return st;
  for (auto& f : kFields) DETAUDIT_RETURN_IF_ERROR(check_key(j, f.key, f.type, false, path));
  for (auto& [k, v] : j.items()) {
    bool known = k == "final_loss" || k == "phases" || k == "nudge" || k == "noise" || k == "prediction";
    for (auto& f : kFields) known = known || k == f.key;
    if (!known) return Status::invalid(fmt::format("{} is not a field of a training run", json_path(path, k)));
  }
  TrainingRun r;
  if (!parse_obs_status(j["status"].get<std::string>(), &r.status))
    return Status::invalid(fmt::format("{} must be one of ok, crashed, timeout, skipped, error (got {})",
                                       json_path(path, "status"), got(j["status"])));
  if (r.ok())
    for (const char* k : {"condition", "target", "seed", "replicate", "final_loss", "curve"})
      if (!j.contains(k)) return Status::invalid(json_path(path, k) + " is missing (the run's status is \"ok\")");
  std::string init = "fixed", nondet = "off", det;
  if (Status st; !(st = one_of(j, "condition", {"a", "b", "c", "d", "e"}, path, &r.condition)) ||
                 !(st = one_of(j, "init", {"random", "fixed"}, path, &init)) ||
                 !(st = one_of(j, "nondeterminism", {"on", "off"}, path, &nondet)) ||
                 !(st = one_of(j, "determinism", {"on", "off"}, path, &det)))
    return st;
  if (!det.empty() && j.contains("nondeterminism") && (det == "on") == (nondet == "on"))
    return Status::invalid(fmt::format("{} and nondeterminism are both \"{}\"", json_path(path, "determinism"), det));
  if (!j.contains("nondeterminism") && !det.empty()) nondet = det == "on" ? "off" : "on";
  // A field the run does not hold is its condition's: (a) and (b) start from random initial weights, (a) and
  // (c) run with nondeterminism on.
  if (!r.condition.empty()) {
    if (!j.contains("init")) init = condition_random_init(r.condition) ? "random" : "fixed";
    if (!j.contains("nondeterminism") && det.empty()) nondet = condition_nondeterministic(r.condition) ? "on" : "off";
  }
  r.random_init = init == "random";
  r.nondeterministic = nondet == "on";
  r.key = j.value("key", "");
  r.model = j.value("model", "");
  r.design = j.value("design", "");
  r.target = j.value("target", "");
  r.base_target = j.value("base_target", "");
  r.reason = j.value("reason", "");
  r.machine_id = j.value("machine_id", "");
  r.seed = j.value("seed", uint64_t(0));
  r.data_seed = j.value("data_seed", uint64_t(0));
  r.replicate = j.value("replicate", 0);
  r.batches = j.value("batches", 0);
  r.window = j.value("window", 0);
  r.source = j.value("source", 0);
  if (j.contains("final_loss"))
    DETAUDIT_RETURN_IF_ERROR(number_or_nan(j["final_loss"], json_path(path, "final_loss"), &r.final_loss));
  if (j.contains("curve")) {
    const auto& c = j["curve"];
    r.curve.resize(c.size());
    for (size_t i = 0; i < c.size(); ++i)
      DETAUDIT_RETURN_IF_ERROR(number_or_nan(c[i], json_path(json_path(path, "curve"), i), &r.curve[i]));
  }
  r.curve_fingerprint = j.value("curve_fingerprint", "");
  r.initial_weights_fingerprint = j.value("initial_weights_fingerprint", "");
  r.weights_fingerprint = j.value("weights_fingerprint", "");
  r.seconds = j.value("seconds", 0.0);
  r.steps_per_second = j.value("steps_per_second", 0.0);
  if (j.contains("phases")) {
    CurvePhases p;
    DETAUDIT_RETURN_IF_ERROR(from_json(j["phases"], &p, json_path(path, "phases")));
    r.phases = p;
  }
  if (j.contains("nudge")) {
    WeightNudge n;
    DETAUDIT_RETURN_IF_ERROR(from_json(j["nudge"], &n, json_path(path, "nudge")));
    r.nudge = n;
  }
  if (condition_nudged(r.condition) && !r.nudge && r.ok())
    return Status::invalid(json_path(path, "nudge") + " is missing (condition e nudges one weight)");
  if (j.contains("noise")) {
    NoiseTrace n;
    DETAUDIT_RETURN_IF_ERROR(from_json(j["noise"], &n, json_path(path, "noise")));
    r.noise = std::move(n);
  }
  if (j.contains("prediction")) {
    NextFrameCheck n;
    DETAUDIT_RETURN_IF_ERROR(from_json(j["prediction"], &n, json_path(path, "prediction")));
    r.prediction = n;
  }
  r.frames_png = j.value("frames_png", "");
  if (r.frames_png.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") !=
          std::string::npos ||
      r.frames_png.size() % 4)
    return Status::invalid(json_path(path, "frames_png") + " is not base64");
  // PredNet's strip of held-out frames and their predictions, as a PNG (its 8-byte signature, base64).
  if (j.contains("frames_png") && r.frames_png.rfind("iVBORw0KGgo", 0) != 0)
    return Status::invalid(json_path(path, "frames_png") + " is no PNG image (base64 of one starts iVBORw0KGgo)");
  r.signal = j.value("signal", "");
  if (j.contains("timeout_s")) r.timeout_s = j["timeout_s"].get<double>();
  if (j.contains("batches_done")) r.batches_done = j["batches_done"].get<uint64_t>();
  *out = std::move(r);
  return Status::ok();
}

std::string noise_hardware_points_text(int batches, int every) {
  std::string out;
  const int stride = noise_hardware_stride(batches, every);
  for (int k = 0; k * every < batches; k += stride) out += (out.empty() ? "" : ", ") + std::to_string(1 + k * every);
  return "at batches " + out;
}

double curve_window_mean(const std::vector<double>& curve, int window) {
  if (curve.empty()) return std::numeric_limits<double>::quiet_NaN();
  const size_t w = std::min<size_t>(size_t(std::max(window, 1)), curve.size());
  double s = 0;
  for (size_t i = curve.size() - w; i < curve.size(); ++i) s += double(static_cast<float>(curve[i]));
  return s / double(w);
}

std::string timeout_reason(double timeout_s, uint64_t batches_done, int batches) {
  return fmt::format("no progress for {:g} s after batch {} of {}; worker killed", timeout_s, batches_done, batches);
}

Status check_run_consistent(const TrainingRun& r, const std::string& path) {
  for (auto [k, v] : {std::pair{"weights_fingerprint", &r.weights_fingerprint},
                      std::pair{"initial_weights_fingerprint", &r.initial_weights_fingerprint},
                      std::pair{"curve_fingerprint", &r.curve_fingerprint}})
    if (Fingerprint fp; !v->empty() && !Fingerprint::from_hex(*v, &fp))
      return Status::invalid(json_path(path, k) + " must be 32 hex digits");
  for (auto [k, v] : {std::pair{"seconds", r.seconds}, std::pair{"steps_per_second", r.steps_per_second}})
    if (!(v >= 0) || !std::isfinite(v))
      return Status::invalid(fmt::format("{} is {}: a finite number, 0 or more", json_path(path, k), v));
  if (!plausible_seconds(r.seconds))
    return Status::invalid(fmt::format("{} is {}: a run's time is 0 (not timed), or from a nanosecond (a clock's tick) "
                                       "to a year",
                                       json_path(path, "seconds"), r.seconds));
  // A batch is a forward pass, a backward pass and an optimizer step over every layer of the model: several kernels
  // per layer, each a function call on a CPU and a launch of some microseconds on a GPU. No machine trains one in
  // less than a microsecond (the test designs' batches take over ten milliseconds on cpu-ref), so a faster run's time
  // was not measured.
  if (r.ok() && r.seconds > 0 && r.seconds < double(r.curve.size()) * kShortestBatchSeconds)
    return Status::invalid(fmt::format("{} is {}: {} batches in less than {:g} s each, faster than any machine trains "
                                       "a batch",
                                       json_path(path, "seconds"), r.seconds, r.curve.size(), kShortestBatchSeconds));
  // steps_per_second is the curve's batches over the run's seconds (as the worker computes it).
  if (r.ok() && r.seconds > 0 && r.steps_per_second > 0 &&
      std::fabs(r.steps_per_second - double(r.curve.size()) / r.seconds) > 1e-6 * r.steps_per_second + 1e-9)
    return Status::invalid(fmt::format("{} is {}, but {} batches in {} s make {}", json_path(path, "steps_per_second"),
                                       r.steps_per_second, r.curve.size(), r.seconds, double(r.curve.size()) / r.seconds));
  if (Fingerprint fp; !r.machine_id.empty() &&
                      (r.machine_id.size() != 16 || !Fingerprint::from_hex(r.machine_id + std::string(16, '0'), &fp)))
    return Status::invalid(fmt::format("{} '{}' is not 16 hex digits", json_path(path, "machine_id"),
                                       r.machine_id.substr(0, 40)));
  // A run that did not finish has no result: no final loss, weights, curve fingerprint, phases or noise.
  if (!r.ok() && (std::isfinite(r.final_loss) || !r.weights_fingerprint.empty() || !r.curve_fingerprint.empty() ||
                  r.phases || r.noise || r.prediction))
    return Status::invalid(fmt::format("{}: status {}, yet it holds a finished run's results (final loss, weights, "
                                       "phases or noise)",
                                       path, to_string(r.status)));
  if (r.timeout_s && !(*r.timeout_s > 0))
    return Status::invalid(fmt::format("{} is {}: a time limit is more than 0 s", json_path(path, "timeout_s"), *r.timeout_s));
  // A run killed for making no progress records its limit, how far it got and, in its reason, both.
  if (r.status == ObsStatus::kTimeout) {
    if (!r.timeout_s || !r.batches_done)
      return Status::invalid(fmt::format("{}: a run that timed out without {} (its time limit and how far it got are "
                                         "recorded with it)",
                                         path, !r.timeout_s ? "timeout_s" : "batches_done"));
    if (const std::string want = timeout_reason(*r.timeout_s, *r.batches_done, r.batches); r.reason != want)
      return Status::invalid(fmt::format("{} is \"{}\", but a run of timeout_s {:g} and batches_done {} says \"{}\"",
                                         json_path(path, "reason"), shown_safely(r.reason.substr(0, 80)), *r.timeout_s,
                                         *r.batches_done, want));
  }
  if (r.timeout_s && r.status != ObsStatus::kTimeout)
    return Status::invalid(fmt::format("{} is set, but the run's status is {} (the time limit is recorded on a run that "
                                       "timed out)",
                                       json_path(path, "timeout_s"), to_string(r.status)));
  if (r.ok() && r.batches_done && r.batches > 0 && *r.batches_done != uint64_t(r.batches))
    return Status::invalid(fmt::format("{} is {}, but the run finished its {} batches (status ok)",
                                       json_path(path, "batches_done"), *r.batches_done, r.batches));
  if (r.ok() && (r.seconds > 0) != (r.steps_per_second > 0))
    return Status::invalid(fmt::format("{} is {} and {} is {}: a finished run's time and speed are both measured",
                                       json_path(path, "seconds"), r.seconds, json_path(path, "steps_per_second"),
                                       r.steps_per_second));
  if (r.batches_done && r.batches > 0 && *r.batches_done > uint64_t(r.batches))
    return Status::invalid(fmt::format("{} is {}, more than its {} batches", json_path(path, "batches_done"),
                                       *r.batches_done, r.batches));
  // A skipped run never started: it trained no batch and no signal ended it.
  if (r.status == ObsStatus::kSkipped && ((r.batches_done && *r.batches_done > 0) || !r.signal.empty()))
    return Status::invalid(fmt::format("{}: status skipped, yet {} (a skipped run never started)", path,
                                       r.signal.empty() ? fmt::format("it trained {} batches", *r.batches_done)
                                                        : "a signal ended it (" + r.signal.substr(0, 20) + ")"));
  if (r.ok() && !r.signal.empty())
    return Status::invalid(fmt::format("{} is {}, but the run finished (status ok)", json_path(path, "signal"), r.signal));
  if (r.ok() && r.weights_fingerprint.empty())
    return Status::invalid(json_path(path, "weights_fingerprint") + " is missing or empty, but the run finished (status "
                           "ok): a finished run's final weights are fingerprinted");
  if (r.ok() && r.curve.empty())
    return Status::invalid(json_path(path, "curve") + " is empty, but the run finished (status ok): a run that "
                           "trained has a loss per batch");
  if (r.phases) {
    const CurvePhases& p = *r.phases;
    const std::string pp = json_path(path, "phases");
    static const char* const kLabels[] = {"biphasic",     "triphasic", "censored",
                                          "monophasic",   "insufficient", "too short to tell"};
    if (std::none_of(std::begin(kLabels), std::end(kLabels), [&](const char* l) { return p.label == l; }))
      return Status::invalid(fmt::format("{} must be one of biphasic, triphasic, censored, monophasic, insufficient, "
                                         "too short to tell (got \"{}\")",
                                         json_path(pp, "label"), p.label.substr(0, 40)));
    if (p.escape_step && (p.label != "biphasic" && p.label != "triphasic"))
      return Status::invalid(fmt::format("{} is set, but a {} curve has no escape", json_path(pp, "escape_step"), p.label));
    if (p.escape_step && !(*p.escape_step >= 0 && *p.escape_step <= std::max(r.batches, 0)))
      return Status::invalid(fmt::format("{} is {}: a step of the run's {} batches", json_path(pp, "escape_step"),
                                         *p.escape_step, r.batches));
    if (p.censored != (p.label == "censored"))
      return Status::invalid(fmt::format("{} is {}, but the label is {}", json_path(pp, "censored"), p.censored, p.label));
  }
  if (r.nudge) {
    const std::string np = json_path(path, "nudge");
    if (r.condition != "e")
      return Status::invalid(fmt::format("{} is set, but only condition (e) nudges a weight (this run is ({}))", np,
                                         r.condition));
    // Nudge k moves one float by one ULP toward +infinity, and run k of condition (e) is nudge k.
    const float from = float(r.nudge->from);
    if (double(from) != r.nudge->from || double(std::nextafter(from, INFINITY)) != r.nudge->to)
      return Status::invalid(fmt::format("{}: {} -> {} is not one float moved by one ULP toward +infinity", np,
                                         r.nudge->from, r.nudge->to));
    if (r.nudge->index != uint64_t(std::max(r.replicate, 0)))
      return Status::invalid(fmt::format("{} is {}, but run {} of condition (e) is nudge {}", json_path(np, "index"),
                                         r.nudge->index, r.replicate, r.replicate));
  }
  if (r.noise) {
    const std::string np = json_path(path, "noise");
    uint64_t last = 0;
    for (size_t i = 0; i < r.noise->points.size(); ++i) {
      const uint64_t step = r.noise->points[i].step;
      // Measured at batches 1, 1 + every, 1 + 2 every, ... (1-based), in order, each once, within the run's batches.
      if (step == 0 || (step - 1) % uint64_t(r.noise->every) != 0 || step <= last ||
          (r.batches > 0 && step > uint64_t(r.batches)))
        return Status::invalid(fmt::format("{} is {}: noise is measured once at batch 1 and every {} batches after it, "
                                           "up to the run's {} batches, in order",
                                           json_path(json_path(json_path(np, "points"), i), "step"), step,
                                           r.noise->every, r.batches));
      last = step;
    }
    // A run that finished was measured at every one of them: ceil(batches / every) points, none left out.
    if (const uint64_t want = r.batches > 0 && r.noise->every > 0 ? (uint64_t(r.batches) + r.noise->every - 1) / r.noise->every : 0;
        r.ok() && want > 0 && r.noise->points.size() != want)
      return Status::invalid(fmt::format("{} holds {} points, but a run of {} batches that finished is measured at {} "
                                         "(batch 1 and every {} after it)",
                                         json_path(np, "points"), r.noise->points.size(), r.batches, want, r.noise->every));
    // The same gradient is computed again at the points the run's length gives (noise_hardware_point), and only
    // there: a repeat left out would hide one that differed, one added was never measured.
    for (size_t i = 0; r.batches > 0 && i < r.noise->points.size(); ++i) {
      const NoisePoint& p = r.noise->points[i];
      const uint64_t k = (p.step - 1) / uint64_t(r.noise->every);
      if (p.hw_sq.has_value() != noise_hardware_point(r.batches, r.noise->every, k))
        return Status::invalid(fmt::format(
            "{} is {}, but a run of {} batches measured every {} repeats the gradient {}",
            json_path(json_path(json_path(np, "points"), i), "hw_sq"), p.hw_sq ? "set" : "missing", r.batches,
            r.noise->every, noise_hardware_points_text(r.batches, r.noise->every)));
      // |g1 - g2|^2 <= (|g1| + |g2|)^2, and g2 is g1 computed again (the same norm up to rounding): 4 |g1|^2.
      if (p.hw_sq && !(*p.hw_sq <= 4.01 * p.big_sq))
        return Status::invalid(fmt::format("{} is {:.6g}, beyond 4 x big_sq ({:.6g}): two computations of one gradient "
                                           "differ by at most the sum of their norms",
                                           json_path(json_path(json_path(np, "points"), i), "hw_sq"), *p.hw_sq,
                                           p.big_sq));
    }
  }
  if (!r.ok() || r.curve.empty()) return Status::ok();
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  if (r.window > 0) {
    const size_t w = std::min<size_t>(size_t(r.window), r.curve.size());
    double as_written = 0;
    for (size_t i = r.curve.size() - w; i < r.curve.size(); ++i) as_written += r.curve[i];
    as_written /= double(w);
    const double mean = curve_window_mean(r.curve, r.window);
    if (!same(r.final_loss, mean) && !same(r.final_loss, as_written))
      return Status::invalid(fmt::format("{} {:.17g} is not the mean of the curve's last {} points ({:.17g}): the run "
                                         "contradicts itself",
                                         json_path(path, "final_loss"), r.final_loss, w, mean));
  }
  if (!r.curve_fingerprint.empty()) {
    std::vector<float> f(r.curve.begin(), r.curve.end());
    const std::string fp = fingerprint_bytes(f.data(), f.size() * sizeof(float)).hex();
    if (fp != r.curve_fingerprint)
      return Status::invalid(fmt::format("{} {} is not the fingerprint of the run's curve ({}): the curve or the "
                                         "fingerprint was changed",
                                         json_path(path, "curve_fingerprint"), r.curve_fingerprint, fp));
  }
  return Status::ok();
}

RunVerdict judge_training_run(const TrainingRun& r) {
  switch (r.status) {
    case ObsStatus::kOk:
      if (!r.nondeterministic && r.noise)
        for (const NoisePoint& p : r.noise->points)
          if (p.hw_sq && *p.hw_sq != 0)
            return {Verdict::kFail,
                    fmt::format("broke its promise: nondeterminism off, yet batch {}'s gradient, computed twice at the "
                                "same weights, came out different (|g1 - g2|^2 = {:.3g})",
                                p.step, *p.hw_sq)};
      if (!std::isfinite(r.final_loss)) return {Verdict::kWarn, "diverged: the final loss is not finite"};
      return {Verdict::kPass, ""};
    case ObsStatus::kSkipped:
      return {Verdict::kSkip, r.reason};
    case ObsStatus::kCrashed:
    case ObsStatus::kTimeout:
    case ObsStatus::kError:
      break;
  }
  return {Verdict::kFail, std::string(to_string(r.status)) + (r.reason.empty() ? "" : ": " + r.reason)};
}

std::string prediction_bits(const TrainingRun& r) {
  std::string o;
  auto add = [&](double v) { o.append(reinterpret_cast<const char*>(&v), sizeof v); };
  if (r.prediction) add(double(r.prediction->sequences)), add(r.prediction->mse), add(r.prediction->copy_last_mse);
  return o + r.frames_png;
}

std::string outcome_bits(const TrainingRun& r) {
  std::string o = r.weights_fingerprint;
  auto add = [&](double v) { o.append(reinterpret_cast<const char*>(&v), sizeof v); };
  add(r.final_loss);
  for (double v : r.curve) add(v);
  if (r.noise)
    for (const NoisePoint& p : r.noise->points) {
      add(double(p.step)), add(p.big_sq), add(p.small_sq);
      if (p.hw_sq) add(*p.hw_sq);
    }
  return o + prediction_bits(r);
}

std::string outcome_fingerprint(const TrainingRun& r) {
  const std::string bits = outcome_bits(r);
  return fingerprint_bytes(bits.data(), bits.size()).hex();
}

namespace {

// The distinct outcomes of a group of finished runs: the weights, and the bits of the final loss, of every point of
// the learning curve, of every noise measurement and of the held-out prediction (PredNet's next-frame error and its
// frames, computed from the final weights). Runs that promise one outcome give the same bits in each: two that end in
// the same weights after other curves or other measured gradients, or whose one network predicted other frames, broke
// the promise as surely.
size_t outcomes_of(const std::vector<TrainingRun>& runs, const std::vector<size_t>& members) {
  std::set<std::string> outcomes;
  for (size_t i : members) outcomes.insert(outcome_bits(runs[i]));
  return outcomes.size();
}

}  // namespace

std::vector<RunVerdict> judge_training_runs(const std::vector<TrainingRun>& runs) {
  std::vector<RunVerdict> out;
  out.reserve(runs.size());
  for (const TrainingRun& r : runs) out.push_back(judge_training_run(r));
  // A group of runs that promised one outcome and ended in several broke the promise: which run is "right" no run
  // can say, so every one of them FAILs (a FAIL of its own stays).
  auto broke = [&](const std::vector<size_t>& members, size_t outcomes, const std::string& promise) {
    for (size_t i : members)
      if (out[i].verdict != Verdict::kFail)
        out[i] = {Verdict::kFail, fmt::format("broke its promise: {}, yet {} finished runs ended in {} different "
                                              "outcomes (final loss, weights, learning curve, noise measurements or held-out prediction); "
                                              "this is ({}) seed {} replicate {}, final loss {}, weights {}",
                                              promise, members.size(), outcomes, runs[i].condition, runs[i].seed,
                                              runs[i].replicate, runs[i].final_loss, runs[i].weights_fingerprint)};
  };
  // (d): per source, target and seed, the finished replicates.
  std::map<std::tuple<int, std::string, uint64_t>, std::vector<size_t>> groups;
  for (size_t i = 0; i < runs.size(); ++i)
    if (condition_replicates_agree(runs[i].condition) && runs[i].ok())
      groups[{runs[i].source, runs[i].target, runs[i].seed}].push_back(i);
  for (const auto& [g, members] : groups)
    if (const size_t n = outcomes_of(runs, members); n > 1)
      broke(members, n,
            fmt::format("condition (d) starts every replicate of seed {} from the same weights with nondeterminism off",
                        std::get<2>(g)));
  // Across conditions, the same promise: finished runs of one source and model on one target that start from the
  // same weights (their initial weights' fingerprint, no nudge) with nondeterminism off, on the same data order for
  // as many batches, end in the same bits ((b)'s first seed starts from (d)'s fixed weights).
  using Start = std::tuple<int, std::string, std::string, std::string, uint64_t, int, int>;
  std::map<Start, std::vector<size_t>> starts;
  for (size_t i = 0; i < runs.size(); ++i)
    if (const TrainingRun& r = runs[i]; r.ok() && !r.nondeterministic && !r.nudge && !r.initial_weights_fingerprint.empty())
      starts[{r.source, r.model, r.target, r.initial_weights_fingerprint, r.data_seed, r.batches, r.window}].push_back(i);
  for (const auto& [s, members] : starts) {
    std::set<std::string> conditions;
    for (size_t i : members) conditions.insert(runs[i].condition);
    if (const size_t n = outcomes_of(runs, members); n > 1 && conditions.size() > 1)
      broke(members, n,
            fmt::format("runs of conditions ({}) start from the same weights on the same data with nondeterminism off",
                        fmt::join(conditions, ", ")));
  }
  return out;
}

uint64_t model_weights(std::string_view model, std::string_view prednet_config) {
  // Counted from the models themselves by a test (TrainMeasure.ModelWeightsAreTheModelsOwn).
  if (model == "autoencoder") return 111521;
  if (model != "prednet") return 0;
  if (prednet_config == "quick") return 768890;
  if (prednet_config == "tiny") return 11498;
  if (prednet_config == "paper") return 6915948;
  return 0;
}

}  // namespace detaudit
