#include "suites/train_design.hpp"
#include "contract/base64.hpp"
#include "contract/results.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "analysis/phases.hpp"
#include "analysis/training.hpp"
#include "contract/atomic_file.hpp"
#include "contract/command_text.hpp"
#include "contract/json_fields.hpp"
#include "contract/plan.hpp"
#include "kernels/fingerprint.hpp"
#include "models/idx.hpp"
#include "models/png.hpp"
#include "probes/child.hpp"
#include "probes/env.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "suites/results_dir.hpp"
#include "suites/train_data.hpp"
#include "suites/train_measure.hpp"

namespace detaudit {

namespace fs = std::filesystem;

Status derive_variants(const Spec& base, TargetVariants* out) {
  TargetVariants v{base, base, base};
  DETAUDIT_RETURN_IF_ERROR(training_variants(base, &v.deterministic, &v.nondeterministic));
  *out = v;
  return Status::ok();
}

nlohmann::json TrainDesign::to_json() const {
  nlohmann::json t = nlohmann::json::array();
  for (auto& s : targets) t.push_back(s.str());
  nlohmann::json j = {{"model", model},         {"design", design},       {"targets", t},       {"seeds", seeds},
          {"batches", batches},     {"window", window},       {"replicates", replicates},
          {"batch_size", batch_size}, {"data_seed", data_seed}, {"data_dir", data_dir},
          {"init_seed_base", kInitSeedBase}, {"conditions", "abcde"}, {"noise_every", noise_every}};
  if (model == "prednet") j["prednet_config"] = prednet_config;
  return j;
}

TrainDesign default_design(bool paper, const std::string& model) {
  TrainDesign d;
  d.model = model;
  // The default targets come from the registry entries that declare them (BackendEntry::training_targets).
  // They are the registry's own spellings, so every one parses (Registry.DefaultTrainingTargetsParse).
  auto targets_for = [&](const std::string& use) {
    std::vector<Spec> v;
    for (auto& text : default_training_targets(use))
      if (Spec t; parse_target(text, &t).is_ok()) v.push_back(t);
    return v;
  };
  d.targets = targets_for("sony2021");
  if (model == "prednet") {
    // PredNet's quick configuration (models/prednet.hpp) costs far more per batch than the autoencoder:
    // one target, and the paper's batch of 4 sequences.
    d.targets = targets_for("prednet");
    d.seeds = 2;
    d.batch_size = 4;
    d.batches = 60;
    d.window = 10;
    d.prednet_config = "quick";
  }
  if (paper) {
    d.seeds = 12;
    d.batches = 5000;
    d.window = 50;
  }
  return d;
}

TrainDesign qualify_design(int level) {
  TrainDesign d = default_design(false);
  d.model = "autoencoder";
  d.design = "sony2021";
  if (level == 2) {
    // Short: one target with two threads, so the nondeterministic variant can vary; 2 seeds of 60
    // batches are enough for (d) to be compared and for the loss to halve.
    d.targets.clear();
    for (auto& text : default_training_targets("qualify"))  // the registry's own spellings: they parse
      if (Spec t; parse_target(text, &t).is_ok()) d.targets.push_back(t);
    d.seeds = 2;
    d.batches = 60;
    d.window = 10;
  }
  return d;
}

namespace {
// A data path as a design records it: lexically normal, no trailing slash ("./data", "data/" and "data" are one
// folder, one plan); "" (the default data) stays "".
std::string normal_data_path(const std::string& path) {
  if (path.empty()) return path;
  std::string p = fs::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p.empty() ? "." : p;
}
// A design with its data path in that form (a design recorded before it was kept so).
nlohmann::json with_normal_data_path(nlohmann::json design) {
  if (design.is_object() && design.contains("data_dir") && design["data_dir"].is_string())
    design["data_dir"] = normal_data_path(design["data_dir"].get<std::string>());
  return design;
}
}  // namespace

Status design_from_args(const TrainDesignArgs& a, TrainDesign* out) {
  TrainDesign d = default_design(a.paper, a.model);
  if (!a.targets.empty()) {
    d.targets.clear();
    StatusOr<std::vector<std::string>> items = split_list(a.targets);
    if (!items) return items.status().prefixed("--targets ");
    for (auto& t : *items) {
      Spec s;
      DETAUDIT_RETURN_IF_ERROR(parse_target(t, &s));
      if (std::none_of(d.targets.begin(), d.targets.end(), [&](const Spec& x) { return x.str() == s.str(); }))
        d.targets.push_back(s);
    }
  }
  if (a.seeds > 0) d.seeds = a.seeds;
  if (a.batches > 0) d.batches = a.batches;
  if (a.window > 0) d.window = a.window;
  if (a.replicates > 0) d.replicates = a.replicates;
  if (a.noise_every > 0 && !a.noise_scale) return Status::invalid("--noise-every needs --noise-scale");
  if (!a.prednet_config.empty()) {
    if (a.model != "prednet") return Status::invalid("--prednet-config is for the prednet model");
    d.prednet_config = a.prednet_config;
  }
  if (a.noise_scale) d.noise_every = a.noise_every > 0 ? a.noise_every : kDefaultNoiseEvery;
  d.data_dir = normal_data_path(a.data);
  d.model = a.model;
  d.design = a.design;
  *out = std::move(d);
  return Status::ok();
}

std::string train_command_contradicts_design(const std::string& command, const nlohmann::json& design) {
  static const std::set<std::string> valued = {"--design", "--targets",     "--seeds",         "--batches",
                                               "--window", "--replicates",  "--run-timeout",   "--prednet-config",
                                               "--noise-every", "--data",   "--out",           "--history",
                                               "--format"};
  const std::string sub = command_subcommand(command);
  if (sub.empty()) return "";
  const std::vector<std::string> words = command_words(command);
  const size_t at = size_t(std::find(words.begin() + 1, words.end(), sub) - words.begin());
  // The design the command runs, held against the plan's below.
  auto differs = [&](const TrainDesign& d) -> std::string {
    const nlohmann::json want = d.to_json();
    for (auto& [k, v] : want.items()) {
      if (k == "conditions") continue;  // no option sets them
      const bool off = k == "noise_every" && v == 0;  // no noise measured: the plan holds no interval, or 0
      nlohmann::json got = design.value(k, nlohmann::json());
      if (k == "data_dir" && got.is_string()) got = normal_data_path(got.get<std::string>());  // (as recorded before)
      if (off ? !(got.is_null() || got == 0) : (design.contains(k) && got != v))
        return fmt::format("it asks for {} {}, but the plan's design has {}", k, v.dump(),
                           shown_safely(got.dump().substr(0, 80)));
    }
    return "";
  };
  if (sub == "qualify" || sub == "fleet") {
    const auto o = command_options(command, sub, {"--level"});
    int level = 1;
    if (o && o->count("--level")) {
      const std::string& v = o->at("--level");
      if (std::from_chars(v.data(), v.data() + v.size(), level).ptr != v.data() + v.size()) return "";
    }
    if (level != 2 && level != 3)
      return fmt::format("a {} at level {} trains nothing (its training regression runs at level 2 or 3)", sub, level);
    return differs(qualify_design(level));
  }
  if (sub != "train") return fmt::format("a {} command makes no training runs", shown_safely(sub.substr(0, 40)));
  TrainDesignArgs a;
  auto number = [](const std::string& v, int* n) {
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *n);
    return ec == std::errc() && end == v.data() + v.size() && *n > 0;
  };
  for (size_t i = at + 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (!w.starts_with("-")) {
      if (!a.model.empty()) return "";  // a second positional word: not a command train takes
      a.model = w;
      continue;
    }
    const size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    if (!valued.count(name)) {
      if (w == "--paper") a.paper = true;
      if (w == "--noise-scale") a.noise_scale = true;
      continue;
    }
    if (eq == std::string::npos && i + 1 >= words.size()) return "";
    const std::string v = eq == std::string::npos ? words[++i] : w.substr(eq + 1);
    bool read = true;
    if (name == "--design") a.design = v;
    else if (name == "--targets") a.targets = v;
    else if (name == "--data") a.data = v;
    else if (name == "--prednet-config") a.prednet_config = v;
    else if (name == "--seeds") read = number(v, &a.seeds);
    else if (name == "--batches") read = number(v, &a.batches);
    else if (name == "--window") read = number(v, &a.window);
    else if (name == "--replicates") read = number(v, &a.replicates);
    else if (name == "--noise-every") read = number(v, &a.noise_every);
    if (!read) return "";
  }
  if (a.model != "autoencoder" && a.model != "prednet") return "";
  TrainDesign d;
  if (Status st = design_from_args(a, &d); !st) return "train refuses it: " + st.message();
  return differs(d);
}

namespace {

struct PlannedRun {
  std::string condition;  // a, b, c, d
  bool random_init;
  bool nondeterministic;
  Spec base, target;
  uint64_t seed;
  int replicate;
  int64_t nudge = -1;  // condition (e)
  std::string key() const { return fmt::format("{}|{}|{}|{}", condition, target.str(), seed, replicate); }
};

std::vector<PlannedRun> plan_runs(const TrainDesign& d, const std::vector<TargetVariants>& vars) {
  std::vector<PlannedRun> runs;
  struct Cond {
    const char* name;
    bool random, nondet;
  };
  const Cond conds[] = {{"a", true, true}, {"b", true, false}, {"c", false, true}, {"d", false, false}, {"e", false, false}};
  for (auto& c : conds)
    for (auto& v : vars)
      for (int r = 0; r < d.seeds; ++r) {
        // (a) repeats each seed; (c) as many runs of its one seed, so that `check` can judge it as it
        // judges (a) (a permutation of 3 + 3 runs can reach no p below 0.1).
        int reps = c.nondet ? d.replicates : 1;
        for (int k = 0; k < reps; ++k) {
          PlannedRun p;
          p.condition = c.name;
          p.random_init = c.random;
          p.nondeterministic = c.nondet;
          p.base = v.base;
          p.target = c.nondet ? v.nondeterministic : v.deterministic;
          // Random initial weights: seed r on every target (crossed). Fixed: one seed for all runs.
          p.seed = c.random ? kInitSeedBase + uint64_t(r) : kInitSeedBase;
          p.replicate = c.random ? k : r * reps + k;  // under fixed init, one seed: replicates numbered on
          if (condition_nudged(p.condition)) p.nudge = r;  // nudge r: the same weight on every target
          runs.push_back(p);
        }
      }
  return runs;
}

// JSON has no NaN or infinity: a non-finite loss comes back from the worker as null and is NaN again
// here, as it was when runs ran in this process (results.json writes it as null either way).
double number_or_nan(const nlohmann::json& j) { return j.is_number() ? j.get<double>() : NAN; }

bool is_hex32(const nlohmann::json& j) {
  Fingerprint fp;
  return j.is_string() && Fingerprint::from_hex(j.get<std::string>(), &fp);
}

// The worker's "run" object, checked field by field before it enters results.json. False with *why.
Status accept_worker_run(const nlohmann::json& w, int batches, nlohmann::json* out) {
  if (!w.is_object() || !w.contains("status") || !w["status"].is_string()) return Status::invalid("no status");
  const std::string status = w["status"];
  if (status == "skipped" || status == "error") {
    if (w.size() != 2 || !w.contains("reason") || !w["reason"].is_string())
      return Status::invalid(status + " without a reason");
    *out = w;
    return Status::ok();
  }
  if (status != "ok") return Status::invalid("status '" + status + "'");
  auto num_or_null = [](const nlohmann::json& j) { return j.is_number() || j.is_null(); };
  const nlohmann::json no = nullptr;
  auto get = [&](const char* k) -> const nlohmann::json& { return w.contains(k) ? w[k] : no; };
  if (!num_or_null(get("final_loss")) || !w.contains("final_loss")) return Status::invalid("final_loss");
  const auto& curve = get("curve");
  if (!curve.is_array() || curve.size() != size_t(batches) || !std::all_of(curve.begin(), curve.end(), num_or_null))
    return Status::invalid(fmt::format("curve (expected {} losses)", batches));
  for (const char* k : {"curve_fingerprint", "initial_weights_fingerprint", "weights_fingerprint"})
    if (!is_hex32(get(k))) return Status::invalid(k);
  for (const char* k : {"seconds", "steps_per_second"})
    if (!get(k).is_number()) return Status::invalid(k);
  if (!get("phases").is_object()) return Status::invalid("phases");
  size_t fields = 9;
  for (const char* k : {"nudge", "noise", "prediction", "frames_png"})
    if (w.contains(k)) {
      if (std::string(k) == "frames_png" ? !w[k].is_string() : !w[k].is_object()) return Status::invalid(k);
      ++fields;
    }
  if (w.size() != fields) return Status::invalid("unknown fields");
  *out = w;
  (*out)["final_loss"] = number_or_nan(w["final_loss"]);
  for (auto& x : (*out)["curve"]) x = number_or_nan(x);
  return Status::ok();
}

// What became of a worker that sent no result: crashed (a signal), timeout (no progress), or error.
nlohmann::json failure_fields(const ChildExit& ex, double timeout_s, uint64_t batches_done, int batches,
                              const std::string& log_path) {
  if (!ex.started) return {{"status", "error"}, {"reason", ex.error}};
  if (ex.timed_out)
    return {{"status", "timeout"},
            {"reason", timeout_reason(timeout_s, batches_done, batches)},
            {"timeout_s", timeout_s},
            {"batches_done", batches_done}};
  if (ex.signaled) {
    const std::string sig = signal_description(ex.sig);  // "SIGSEGV (Segmentation fault)"
    return {{"status", "crashed"},
            {"reason", sig},
            {"signal", sig.substr(0, sig.find(' '))},
            {"batches_done", batches_done}};
  }
  return {
      {"status", "error"},
      {"reason", fmt::format("the worker exited with code {} without a result after batch {} of {} (see {})", ex.code,
                             batches_done, batches, log_path)},
      {"batches_done", batches_done}};
}

struct WorkerOutcome {
  bool interrupted = false;
  nlohmann::json fields;  // what the run adds to its identity: status, reason, results
};

// Runs one training run in a worker and turns whatever happened into the run's fields: the worker's
// result, or crashed / timeout / error. `say` gets the batch progress.
WorkerOutcome run_in_worker(const TrainRunRequest& q, const std::string& exe, double timeout_s,
                            const std::string& log_path, const std::function<void(const std::string&)>& say) {
  ChildSpec cs;
  cs.exe = exe;
  cs.args = {kTrainWorkerSubcommand};
  cs.env = target_environment(q.target);
  cs.request = q.to_json().dump();
  cs.log_path = log_path;
  const int every = std::max(1, q.batches / 4);
  uint64_t batches_done = 0;
  nlohmann::json result;
  bool got_run = false;
  ChildExit ex = run_child(cs, timeout_s, [&](const std::string& line) {
    const nlohmann::json ev = nlohmann::json::parse(line, nullptr, false);
    if (!ev.is_object() || !ev.contains("event") || !ev["event"].is_string()) return false;
    const std::string kind = ev["event"];
    if (kind == "ready") return true;
    if (kind == "step" && ev.contains("step") && ev["step"].is_number_unsigned()) {
      batches_done = ev["step"].get<uint64_t>();
      if (batches_done % uint64_t(every) == 0 && ev.contains("loss") && ev["loss"].is_number())
        say(fmt::format("batch {}/{} loss {:.5f}", batches_done, q.batches, ev["loss"].get<double>()));
      return true;
    }
    if (kind == "check" && ev.contains("done") && ev["done"].is_number_unsigned() && ev.contains("of") &&
        ev["of"].is_number_unsigned()) {
      // PredNet's held-out check after the last batch: progress, so the watchdog waits for it.
      if (ev["done"] == ev["of"]) say(fmt::format("held-out check: {} sequences", ev["of"].get<uint64_t>()));
      return true;
    }
    if (kind == "run" && !got_run && ev.contains("run")) {
      result = ev["run"];
      got_run = true;
      return true;
    }
    return false;
  });
  WorkerOutcome o;
  o.interrupted = ex.interrupted;
  if (o.interrupted) return o;
  if (got_run) {
    // A result that arrived is the run's, even if the worker then failed to exit cleanly.
    if (Status st = accept_worker_run(result, q.batches, &o.fields); !st)
      o.fields = {{"status", "error"}, {"reason", "the worker sent a malformed result (" + st.message() + ")"}};
  } else {
    o.fields = failure_fields(ex, timeout_s, batches_done, q.batches, log_path);
  }
  return o;
}

// The design's bounds, checked before anything runs. Empty when fine.
Status check_design(const TrainDesign& d) {
  if (d.model != "autoencoder" && d.model != "prednet")
    return Status::invalid(fmt::format("model '{}': autoencoder or prednet", d.model));
  if (d.seeds < 1) return Status::invalid("--seeds must be positive");
  if (d.replicates < 1) return Status::invalid("--replicates must be positive");
  if (d.batches < 1 || d.batches > kMaxTrainBatches)
    return Status::invalid(fmt::format("--batches must be in 1..{}", kMaxTrainBatches));
  if (d.window < 1 || d.window > d.batches)
    return Status::invalid(fmt::format("--window {} must be in 1..--batches ({})", d.window, d.batches));
  if (d.batch_size < 1 || d.batch_size > kMaxTrainBatchSize)
    return Status::invalid(fmt::format("batch size {} must be in 1..{}", d.batch_size, kMaxTrainBatchSize));
  if (d.noise_every < 0) return Status::invalid("--noise-every must be positive");
  // Runs per target: (a) and (c) seeds x replicates, (b), (d) and (e) seeds each (at most).
  const uint64_t runs = uint64_t(d.seeds) * (2 * uint64_t(d.replicates) + 3) * std::max<uint64_t>(d.targets.size(), 1);
  if (runs > kMaxTrainRuns)
    return Status::invalid(
        fmt::format("the design would train {} runs ({} seeds, {} replicates, {} targets), more "
                    "than {}: fewer seeds or replicates",
                    runs, d.seeds, d.replicates, d.targets.size(), kMaxTrainRuns));
  if (d.noise_every > 0 && d.batch_size < 2)
    return Status::invalid(fmt::format(
        "--noise-scale needs batches of 2 or more (microbatches of a batch); the batch size is {}", d.batch_size));
  return Status::ok();
}

// Loads the design's data (suites/train_data.hpp), checks that the model can use it, and returns the
// fingerprint of its pixels (what every worker must load too). The pixels are not kept: the workers load
// their own.
Status check_data(const TrainDesign& d, const std::function<void(const std::string&)>& say, std::string* fingerprint,
                  uint64_t* examples) {
  TrainData data;
  DETAUDIT_RETURN_IF_ERROR(load_train_data(d.model, d.prednet_config, d.data_dir, d.batch_size, &data));
  say("data: " + data.description);
  *fingerprint = data.fingerprint;
  // What a run trains on: the images, or PredNet's training sequences (its held-out ones are checked apart).
  *examples = uint64_t(d.model == "prednet" ? data.train_video.count : data.images.count);
  return Status::ok();
}

// results.json of a fresh design, or the one being resumed (its finished runs' keys in *done).
Status open_results(const TrainDesign& d, const TrainRunOptions& opt, const ResultsDir& out, size_t planned,
                    const std::string& data_fp, uint64_t data_examples, const nlohmann::json& machine, Results* r,
                    std::set<std::string>* done, const std::function<void(const std::string&)>& say) {
  const std::string path = out.results_path();
  // A results.json that is a link is neither read (resumed from) nor written through, and refused before logs/ is
  // made beside it.
  DETAUDIT_RETURN_IF_ERROR(check_destination(path));
  DETAUDIT_RETURN_IF_ERROR(make_dir_below(opt.out_dir, "logs"));  // out_dir, and logs/ never a link's target
  nlohmann::json plan = {{"kind", "train"},
                         {"design", d.to_json()},
                         {"runs", planned},
                         {"data_fingerprint", data_fp},
                         {"data_examples", data_examples}};
  if (!opt.fresh && fs::exists(path)) {
    if (Status st = load_stored_results(path, r); !st)
      return Status::invalid(st.message() + " (use --fresh to start over)");
    if (with_normal_data_path(r->plan.value("design", nlohmann::json())) != plan["design"])
      return Status::invalid(
          fmt::format("{} holds results of a different plan; use --fresh to replace them or another --out", path));
    if (const std::string old = r->plan.value("data_fingerprint", ""); !old.empty() && old != data_fp)
      return Status::invalid(
          fmt::format("{} holds runs trained on other data (pixel fingerprint {}, now {}); use --fresh to "
                      "replace them or another --out",
                      path, old, data_fp));
    // One design, one machine: runs of another machine (or of this one with other software) would be mixed with
    // this one's, and the hardware's share of the variance would be nobody's.
    for (auto& run : r->training)
      if (!run.machine_id.empty() && run.machine_id != machine_id_of(machine))
        return Status::invalid(fmt::format("{} holds runs made on machine {}, and this is {} (another machine, or its "
                                           "software changed): a design's runs come from one machine; use --fresh to "
                                           "start over or another --out",
                                           path, run.machine_id, machine_id_of(machine)));
    for (auto& run : r->training) done->insert(run.key);
    // Runs of an older version kept: their noise traces do not say the data's size, so the plan does not either.
    if (std::any_of(r->training.begin(), r->training.end(),
                    [](const TrainingRun& t) { return t.noise && t.noise->examples == 0; }))
      plan.erase("data_examples");
    if (!done->empty()) say(fmt::format("resuming: {} finished runs kept from {}", done->size(), path));
  } else {
    r->started_at = utc_now_iso8601();
  }
  r->finished_at.clear();
  r->analysis = nlohmann::json::object();  // made again when the design finishes
  r->command = opt.command;
  r->plan = plan;
  // The machine block is the one the last run was made on: a resumed session keeps the block it found until
  // it records a run of its own (run_train_design), so that one stopped before its first run, or with none
  // left, leaves the block its runs' machine_id names.
  if (done->empty() || r->machine.empty()) r->machine = machine;
  return out.save_checked(*r);
}

nlohmann::json run_identity(const TrainDesign& d, const PlannedRun& p, const std::string& machine_id) {
  return {{"key", p.key()},
          {"model", d.model},
          {"design", d.design},
          {"condition", p.condition},
          {"init", p.random_init ? "random" : "fixed"},
          {"determinism", p.nondeterministic ? "off" : "on"},
          {"nondeterminism", p.nondeterministic ? "on" : "off"},
          {"target", p.target.str()},
          {"base_target", p.base.str()},
          {"seed", p.seed},
          {"replicate", p.replicate},
          {"data_seed", d.data_seed},
          {"batches", d.batches},
          {"window", d.window},
          {"machine_id", machine_id}};
}

TrainRunRequest request_for(const TrainDesign& d, const PlannedRun& p, size_t index, const std::string& data_fp) {
  TrainRunRequest q;
  q.index = index;
  q.key = p.key();
  q.model = d.model;
  q.target = p.target;
  q.init_seed = p.seed;
  q.data_seed = d.data_seed;
  q.batches = d.batches, q.batch_size = d.batch_size, q.window = d.window;
  q.data_dir = d.data_dir;
  q.data_fingerprint = data_fp;
  q.nudge = p.nudge;
  q.noise_every = d.noise_every;
  q.prednet_config = d.prednet_config;
  return q;
}

// One progress line for a finished run.
std::string run_summary(const TrainingRun& run) {
  if (run.status == ObsStatus::kCrashed)
    return fmt::format("crashed: {} after batch {} of {}; going on with the next run", run.reason,
                       run.batches_done.value_or(0), run.batches);
  if (run.status == ObsStatus::kTimeout) return "timeout: " + run.reason + "; going on with the next run";
  if (!run.ok()) return std::string(to_string(run.status)) + ": " + run.reason;
  return fmt::format("final loss {:.6f} ({:.3g} steps/s, weights {})", run.final_loss, run.steps_per_second,
                     run.weights_fingerprint.substr(0, 8));
}

}  // namespace

Status run_train_design(const TrainDesign& d, const TrainRunOptions& opt, Results* results) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  DETAUDIT_RETURN_IF_ERROR(check_design(d));
  if (opt.exe.empty()) return Status::invalid("internal error: no detaudit executable for the training workers");
  std::vector<TargetVariants> vars;
  for (auto& t : d.targets) {
    TargetVariants v;
    DETAUDIT_RETURN_IF_ERROR(derive_variants(t, &v));
    vars.push_back(v);
  }
  std::string data_fp;
  uint64_t data_examples = 0;
  DETAUDIT_RETURN_IF_ERROR(check_data(d, say, &data_fp, &data_examples));
  // A results.json that is a link is refused before the lock is made beside it.
  ResultsDir own(opt.out_dir);
  ResultsDir& out = opt.results_dir ? *opt.results_dir : own;
  if (out.dir() != opt.out_dir) return Status::error("the results directory held is not --out (a bug)");
  DETAUDIT_RETURN_IF_ERROR(out.open_for_writing());
  const std::vector<PlannedRun> runs = plan_runs(d, vars);
  Results r;
  std::set<std::string> done;
  const nlohmann::json here = machine_fingerprint();  // this session's machine: its runs' machine_id
  // One log per target, each checked before anything is written: a link in a log's place is refused (exit 2), not
  // left to fail every run that would write through it.
  auto log_of = [&](const PlannedRun& p) { return opt.out_dir + "/logs/train-" + safe_file_name(p.target.str()) + ".log"; };
  for (const PlannedRun& p : runs) DETAUDIT_RETURN_IF_ERROR(check_destination(log_of(p)));
  DETAUDIT_RETURN_IF_ERROR(open_results(d, opt, out, runs.size(), data_fp, data_examples, here, &r, &done, say));
  const std::string machine_id = machine_id_of(here);
  const double timeout_s = opt.run_timeout_s > 0 ? opt.run_timeout_s : kDefaultRunTimeoutS;
  auto stop_interrupted = [&] {
    *results = std::move(r);
    return Status::interrupted("interrupted by " + signal_description(interrupted()));
  };

  // A target that cannot run here (no device, library not built) is asked once; its other runs are
  // skipped with the same reason.
  std::map<std::string, nlohmann::json> skipped;
  for (size_t index = 1; index <= runs.size(); ++index) {
    const PlannedRun& p = runs[index - 1];
    if (done.count(p.key())) continue;
    if (interrupted()) return stop_interrupted();
    const std::string tkey = p.target.str();
    const std::string prefix =
        fmt::format("run {}/{} ({}) {} seed {} rep {}", index, runs.size(), p.condition, tkey, p.seed, p.replicate);
    nlohmann::json run = run_identity(d, p, machine_id);
    nlohmann::json fields;
    if (auto it = skipped.find(tkey); it != skipped.end()) {
      fields = it->second;
    } else {
      WorkerOutcome w = run_in_worker(request_for(d, p, index, data_fp), opt.exe, timeout_s, log_of(p),
                                      [&](const std::string& s) { say(prefix + ": " + s); });
      if (w.interrupted) return stop_interrupted();
      fields = std::move(w.fields);
      if (fields["status"] == "skipped") skipped[tkey] = fields;
    }
    for (auto& [k, v] : fields.items()) run[k] = v;
    TrainingRun t;
    if (Status st = from_json(run, &t, "run"); !st) {  // accept_worker_run checked the fields: a bug if it happens
      nlohmann::json bad = run_identity(d, p, machine_id);
      bad["status"] = "error";
      bad["reason"] = "internal error: the run's record is malformed: " + st.message();
      if (Status again = from_json(bad, &t, "run"); !again) {  // the identity itself is malformed
        t = TrainingRun{};
        t.key = p.key();
        t.status = ObsStatus::kError;
        t.reason = bad["reason"].get<std::string>() + "; its identity too: " + again.message();
      }
    }
    say(prefix + ": " + run_summary(t));
    r.machine = here;  // the machine of the last run recorded
    r.training.push_back(std::move(t));
    DETAUDIT_RETURN_IF_ERROR(out.save_checked(r));
  }
  r.analysis = analyze_training(r.training, training_sources(r.plan, r.machine, r.tool_version, r.tool_commit), target_facts);
  r.finished_at = utc_now_iso8601();
  DETAUDIT_RETURN_IF_ERROR(out.save_checked(r));
  *results = std::move(r);
  return Status::ok();
}

Status load_stored_results(const std::string& path, Results* out) {
  DETAUDIT_RETURN_IF_ERROR(load_checked_results(path, out));
  // Nudge k of a seed moves the weight its worker moves: its index, tensor and two values, made again here.
  {
    const nlohmann::json design = out->plan.value("design", nlohmann::json::object());
    std::map<std::tuple<std::string, uint64_t, uint64_t>, WeightNudge> made;
    for (size_t i = 0; i < out->training.size(); ++i) {
      const TrainingRun& t = out->training[i];
      if (!t.nudge) continue;
      auto it = made.find({t.model, t.seed, t.nudge->index});
      if (it == made.end()) {
        WeightNudge n;
        if (!expected_nudge(t.model, design.value("prednet_config", ""), design.value("batch_size", 4), t.seed,
                            t.nudge->index, &n))
          continue;  // a model this version does not train: refused elsewhere
        it = made.emplace(std::tuple{t.model, t.seed, t.nudge->index}, n).first;
      }
      if (to_json(*t.nudge) != to_json(it->second))
        return Status::invalid(fmt::format("{}: training[{}].nudge is {}, but nudge {} of seed {} moves {}", path, i,
                                           shown_safely(to_json(*t.nudge).dump().substr(0, 160)), t.nudge->index, t.seed,
                                           to_json(it->second).dump()));
    }
  }
  // A PredNet run's frame strip is the PNG its worker writes: its configuration's frames, true over predicted, in
  // the one encoding the writer gives (a cut, appended or flipped byte, another size, is refused).
  if (const nlohmann::json design = out->plan.value("design", nlohmann::json::object());
      design.value("model", "") == "prednet")
    for (size_t i = 0; i < out->training.size(); ++i) {
      const TrainingRun& t = out->training[i];
      PredNetConfig c;
      if (t.frames_png.empty() ||
          !prednet_config(design.value("prednet_config", ""), int(design.value("batch_size", int64_t(4))), &c))
        continue;  // (a configuration that is none is refused with the plan)
      const StripSize size = frames_strip_size(c);
      std::vector<uint8_t> png;
      std::string why = base64_decode(t.frames_png, &png) ? png_problem(png, size.cols, size.rows, size.channels)
                                                          : "it is not base64 as detaudit writes it";
      if (!why.empty())
        return Status::invalid(fmt::format("{}: training[{}].frames_png is not the frame strip a run writes: {}", path,
                                           i, why));
    }
  // The train command that made a design asked for the design its plan holds.
  if (const auto d = out->plan.find("design"); d != out->plan.end() && !out->plan.contains("sources"))
    if (const std::string why = train_command_contradicts_design(out->command, *d); !why.empty())
      return Status::invalid(fmt::format("{}: command: {}", path, why));
  for (size_t i = 0; i < out->training.size(); ++i)
    if (const TrainingRun& t = out->training[i]; t.ok() && t.phases && !t.curve.empty())
      if (const std::string why = phases_contradiction(*t.phases, t.curve); !why.empty())
        return Status::invalid(fmt::format("{}: training[{}].{}", path, i, why));
  return Status::ok();
}

namespace {

// Every training run of the same length to the nanosecond as its namesake, in any order (two runs of a design
// never time alike).
bool same_times(const Results& x, const Results& y) {
  if (x.training.size() != y.training.size()) return false;
  std::map<std::string, double> seconds;
  for (const TrainingRun& t : x.training) seconds[t.key] = t.seconds;
  bool timed = false;
  for (const TrainingRun& t : y.training) {
    const auto it = seconds.find(t.key);
    if (it == seconds.end() || it->second != t.seconds) return false;
    timed = timed || t.seconds > 0;
  }
  return timed;
}

// The same machine and plan (unless `header` is false), the same cells with the same outputs and the same training
// runs with the same outcomes, in any order (their times, the finishing time and the order in the file aside).
bool same_outcomes(const Results& x, const Results& y, bool header = true) {
  if (header && (x.machine != y.machine || x.plan != y.plan)) return false;  // (another machine or plan: another run)
  if (x.observations.size() != y.observations.size() || x.training.size() != y.training.size()) return false;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::vector<std::string>>> cells;
  for (const Observation& o : x.observations)
    cells[{o.workload, o.target}] = {std::string(to_string(o.status)), o.fingerprints};
  for (const Observation& o : y.observations) {
    const auto it = cells.find({o.workload, o.target});
    if (it == cells.end() || it->second != std::pair{std::string(to_string(o.status)), o.fingerprints}) return false;
  }
  std::map<std::string, const TrainingRun*> runs;
  for (const TrainingRun& t : x.training) runs[t.key] = &t;
  for (const TrainingRun& t : y.training) {
    const auto it = runs.find(t.key);
    if (it == runs.end() || it->second->status != t.status || it->second->weights_fingerprint != t.weights_fingerprint ||
        std::memcmp(&it->second->final_loss, &t.final_loss, sizeof(double)) != 0)
      return false;
  }
  return true;
}

}  // namespace

Status not_one_run(const Results& x, const std::string& dx, const Results& y, const std::string& dy, bool whole_copy) {
  if (x.started_at == y.started_at && x.command == y.command &&
      json_fields::str(x.machine, "hostname", "") == json_fields::str(y.machine, "hostname", "")) {
    if (!whole_copy)
      return Status::invalid(fmt::format("{} and {} hold one run (the same command, started at {} on the same host): "
                                         "a copy counts its runs twice",
                                         dx, dy, x.started_at));
    if (same_outcomes(x, y))
      return Status::invalid(fmt::format("{} and {} hold one run, copied whole (the same command, started at {} on the "
                                         "same host, and the same cells and runs): a run compared with itself compares "
                                         "nothing",
                                         dx, dy, x.started_at));
  }
  if (whole_copy) {
    // Whatever the header says (its command, start, host or any other field of its machine): the same outputs,
    // every cell timed alike to the nanosecond (two runs never are).
    bool timed = !x.observations.empty() && x.observations.size() == y.observations.size();
    std::map<std::pair<std::string, std::string>, const Observation*> in_y;
    for (const Observation& o : y.observations) in_y[{o.workload, o.target}] = &o;
    bool any_time = false;
    for (size_t i = 0; timed && i < x.observations.size(); ++i) {
      const Observation& o = x.observations[i];
      const auto it = in_y.find({o.workload, o.target});
      timed = it != in_y.end() && !o.seconds.empty() && o.seconds == it->second->seconds;
      for (double t : o.seconds) any_time = any_time || t > 0;
    }
    if (timed && any_time && same_outcomes(x, y, false))
      return Status::invalid(fmt::format("{} and {} hold one run: the same outputs, and each of their {} cells timed "
                                         "alike to the nanosecond (a copy, whatever its header says): a run compared "
                                         "with itself compares nothing",
                                         dx, dy, x.observations.size()));
    if (!same_times(x, y) || !same_outcomes(x, y, false)) return Status::ok();
    return Status::invalid(fmt::format("{} and {} hold one run: the same runs, each of their {} training runs taking "
                                       "the same time to the nanosecond (a copy, whatever its header says)",
                                       dx, dy, x.training.size()));
  }
  if (same_times(x, y))
    return Status::invalid(fmt::format("{} and {} hold one run: each of their {} training runs took the same time "
                                       "to the nanosecond (a copy counts its runs twice)",
                                       dx, dy, x.training.size()));
  return Status::ok();
}

Status not_a_merged_analysis(const Results& r, const std::string& dir, const std::string& command) {
  if (!r.plan.contains("sources")) return Status::ok();
  return Status::invalid(fmt::format("{} is a merged analysis (detaudit analyze): {} the directories it was merged from",
                                     dir, command));
}

void reanalyze_training(Results* r) {
  if (!is_training_plan(r->plan) || r->finished_at.empty()) return;
  r->analysis = analyze_training(r->training, training_sources(r->plan, r->machine, r->tool_version, r->tool_commit),
                                 target_facts);
}

// Variants that cannot be derived plan no runs (run_train_design refuses such a design).
size_t planned_runs(const TrainDesign& d) {
  std::vector<TargetVariants> vars;
  for (auto& t : d.targets) {
    TargetVariants v;
    if (derive_variants(t, &v).is_ok()) vars.push_back(v);
  }
  return plan_runs(d, vars).size();
}

// ---- detaudit analyze ---------------------------------------------------------------------------------
namespace {

std::string canonical_dir(const std::string& d) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(d, ec), ec);
  return ec ? d : p.string();
}

}  // namespace

Status analyze_training_dirs(const AnalyzeOptions& opt, Results* results) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  if (opt.dirs.empty()) return Status::invalid("no results directory given");
  if (opt.out_dir.empty()) return Status::invalid("--out is required");
  const std::string out_canon = canonical_dir(opt.out_dir);
  std::vector<Results> inputs;
  for (auto& dir : opt.dirs) {
    if (!fs::is_directory(dir)) return Status::invalid(fmt::format("{}: not a directory", dir));
    if (canonical_dir(dir) == out_canon)
      return Status::invalid(
          fmt::format("--out {} is one of the inputs: its results.json would be replaced", opt.out_dir));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (canonical_dir(opt.dirs[i]) == canonical_dir(dir))
        return Status::invalid(fmt::format("{} is given twice", dir));
      // Two folders, one file: a results.json that is a link to another input's counts one design twice.
      std::error_code ea, eb;
      if (fs::equivalent(results_file(opt.dirs[i]), results_file(dir), ea) && !ea && !eb)
        return Status::invalid(fmt::format("{}/results.json is {}/results.json (a link): one design given twice", dir,
                                           opt.dirs[i]));
    }
    Results r;
    DETAUDIT_RETURN_IF_ERROR(load_stored_results(results_file(dir), &r));
    if (r.plan.value("kind", "") != "train" || !r.plan.contains("design"))
      return Status::invalid(fmt::format("{}/results.json holds no training design (plan.kind is not \"train\")", dir));
    if (r.plan.contains("sources"))
      return Status::invalid(
          fmt::format("{}/results.json is itself a merged analysis: give the directories it was merged from "
                      "(plan.sources)",
                      dir));
    if (r.training.empty()) return Status::invalid(fmt::format("{}/results.json holds no training runs", dir));
    if (r.plan.value("data_fingerprint", "").empty())
      return Status::invalid(
          fmt::format("{}/results.json does not record its data's fingerprint (plan.data_fingerprint; results "
                      "written before detaudit analyze existed lack it): its data cannot be checked against the "
                      "others'; run the design again",
                      dir));
    inputs.push_back(std::move(r));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t k = i + 1; k < inputs.size(); ++k)
      DETAUDIT_RETURN_IF_ERROR(not_one_run(inputs[i], opt.dirs[i], inputs[k], opt.dirs[k]));
  for (size_t i = 1; i < inputs.size(); ++i)
    if (std::string d = plan_difference(inputs[0].plan, inputs[i].plan, false); !d.empty())
      return Status::invalid(fmt::format("{} and {} ran different designs: {}; only runs of one design can be merged",
                                         opt.dirs[0], opt.dirs[i], d));
  // Runs that never finished hold no loss: an analysis of none of them would decompose nothing.
  if (std::none_of(inputs.begin(), inputs.end(), [](const Results& r) {
        return std::any_of(r.training.begin(), r.training.end(), [](const TrainingRun& t) { return t.ok(); });
      }))
    return Status::invalid(fmt::format("no training run of the {} directories finished (crashed, timed out or "
                                       "skipped): there is nothing to analyze",
                                       inputs.size()));
  // --out holds nothing, or an earlier analysis (a merged results.json, plan.sources): never a probe or
  // training run of its own, which the analysis would replace.
  if (const std::string prior = results_file(opt.out_dir); fs::exists(fs::symlink_status(prior))) {
    nlohmann::json j;
    if (!load_json_document(prior, kResultsSchema, "results file", &j) || !j.is_object() ||
        !j.value("plan", nlohmann::json::object()).contains("sources"))
      return Status::invalid(
          fmt::format("--out {}: its results.json is not an earlier analysis (a probe or training "
                      "run, or not detaudit's); analyze writes only into an empty directory or "
                      "over its own analysis",
                      opt.out_dir));
  } else if (std::error_code ie; fs::is_directory(opt.out_dir, ie) && !fs::is_empty(opt.out_dir, ie)) {
    return Status::invalid(fmt::format("--out {} is not empty and holds no earlier analysis; analyze writes only into "
                                       "an empty directory or over its own analysis",
                                       opt.out_dir));
  }
  ResultsDir own(opt.out_dir);
  ResultsDir& out = opt.results_dir ? *opt.results_dir : own;
  if (out.dir() != opt.out_dir) return Status::error("the results directory held is not --out (a bug)");
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) return Status::error(fmt::format("cannot create {}: {}", opt.out_dir, ec.message()));
  DETAUDIT_RETURN_IF_ERROR(not_a_fleet_directory(opt.out_dir));
  DETAUDIT_RETURN_IF_ERROR(out.lock());

  Results m;
  m.started_at = utc_now_iso8601();
  m.command = opt.command;
  // One machine per source: results.json's own "machine" is the only source's, or empty when merged.
  m.machine = inputs.size() == 1 ? inputs[0].machine : nlohmann::json::object();
  nlohmann::json design = inputs[0].plan["design"], targets = nlohmann::json::array(),
                 sources = nlohmann::json::array();
  std::vector<std::string> hosts;
  for (const Results& r : inputs) hosts.push_back(r.machine.value("hostname", std::string("machine")));
  const std::vector<std::string> labels = source_labels(hosts);
  size_t planned = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Results& r = inputs[i];
    TrainingSource s;
    s.dir = opt.dirs[i];
    s.label = labels[i];
    s.machine = r.machine;
    s.tool_version = r.tool_version;
    s.tool_commit = r.tool_commit;
    s.started_at = r.started_at;
    s.finished_at = r.finished_at;
    sources.push_back(to_json(s));
    for (auto& t : r.plan["design"].value("targets", nlohmann::json::array()))
      if (std::find(targets.begin(), targets.end(), t) == targets.end()) targets.push_back(t);
    const size_t plan_runs = r.plan.value("runs", size_t(0));
    planned += plan_runs;
    size_t ok = 0;
    for (auto& run : r.training) {
      ok += run.ok();
      run.source = int(i);
      m.training.push_back(std::move(run));
    }
    say(fmt::format("source {} ({}): {}: {} runs ({} finished){}{}", i, s.label, s.dir, r.training.size(), ok,
                    plan_runs > r.training.size() ? fmt::format(", {} of the plan's {} not run", plan_runs - r.training.size(), plan_runs) : "",
                    r.finished_at.empty() ? "; the design did not finish" : ""));
  }
  design["targets"] = targets;
  m.plan = {{"kind", "train"}, {"design", design}, {"runs", planned},
            {"data_fingerprint", inputs[0].plan["data_fingerprint"]}, {"sources", sources}};
  // The sources share their data (one fingerprint): its size, where every source records it (a source of an older
  // version has noise traces that do not say it).
  if (std::all_of(inputs.begin(), inputs.end(), [](const Results& in) { return in.plan.contains("data_examples"); }))
    m.plan["data_examples"] = inputs[0].plan["data_examples"];
  m.analysis = analyze_training(m.training, training_sources(m.plan, m.machine, m.tool_version, m.tool_commit), target_facts);
  m.finished_at = utc_now_iso8601();
  DETAUDIT_RETURN_IF_ERROR(out.save_checked(m));
  *results = std::move(m);
  return Status::ok();
}

}  // namespace detaudit
