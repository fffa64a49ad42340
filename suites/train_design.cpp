#include "suites/train_design.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/phases.hpp"
#include "analysis/spread.hpp"
#include "analysis/stats.hpp"
#include "analysis/variance.hpp"
#include "kernels/fingerprint.hpp"
#include "models/idx.hpp"
#include "probes/child.hpp"
#include "probes/env.hpp"
#include "probes/registry.hpp"
#include "report/train_report.hpp"
#include "suites/dir_lock.hpp"

namespace detaudit {

namespace fs = std::filesystem;

bool derive_variants(const Spec& base, TargetVariants* out, std::string* err) {
  TargetVariants v{base, base, base};
  if (!training_variants(base, &v.deterministic, &v.nondeterministic, err)) return false;
  *out = v;
  return true;
}

nlohmann::json TrainDesign::to_json() const {
  nlohmann::json t = nlohmann::json::array();
  for (auto& s : targets) t.push_back(s.str());
  return {{"model", model},         {"design", design},       {"targets", t},       {"seeds", seeds},
          {"batches", batches},     {"window", window},       {"replicates", replicates},
          {"batch_size", batch_size}, {"data_seed", data_seed}, {"data_dir", data_dir},
          {"init_seed_base", kInitSeedBase}};
}

TrainDesign default_design(bool paper) {
  TrainDesign d;
  Spec a, b;
  std::string err;
  // Both can race under order=atomic (two threads or more): a one-thread target's "nondeterministic"
  // variant has one completion order and would vary in nothing.
  parse_target("cpu?threads=2", &a, &err);
  parse_target("cpu?threads=4", &b, &err);
  d.targets = {a, b};
  if (paper) {
    d.seeds = 12;
    d.batches = 5000;
    d.window = 50;
  }
  return d;
}

namespace {

struct PlannedRun {
  std::string condition;  // a, b, c, d
  bool random_init;
  bool nondeterministic;
  Spec base, target;
  uint64_t seed;
  int replicate;
  std::string key() const { return fmt::format("{}|{}|{}|{}", condition, target.str(), seed, replicate); }
};

std::vector<PlannedRun> plan_runs(const TrainDesign& d, const std::vector<TargetVariants>& vars) {
  std::vector<PlannedRun> runs;
  struct Cond {
    const char* name;
    bool random, nondet;
  };
  const Cond conds[] = {{"a", true, true}, {"b", true, false}, {"c", false, true}, {"d", false, false}};
  for (auto& c : conds)
    for (auto& v : vars)
      for (int r = 0; r < d.seeds; ++r) {
        int reps = (c.random && c.nondet) ? d.replicates : 1;
        for (int k = 0; k < reps; ++k) {
          PlannedRun p;
          p.condition = c.name;
          p.random_init = c.random;
          p.nondeterministic = c.nondet;
          p.base = v.base;
          p.target = c.nondet ? v.nondeterministic : v.deterministic;
          // Random initial weights: seed r on every target (crossed). Fixed: one seed for all runs.
          p.seed = c.random ? kInitSeedBase + uint64_t(r) : kInitSeedBase;
          p.replicate = c.random ? k : r;  // under fixed init, run r is replicate r of the one seed
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
bool accept_worker_run(const nlohmann::json& w, int batches, nlohmann::json* out, std::string* why) {
  if (!w.is_object() || !w.contains("status") || !w["status"].is_string()) return *why = "no status", false;
  const std::string status = w["status"];
  if (status == "skipped" || status == "error") {
    if (w.size() != 2 || !w.contains("reason") || !w["reason"].is_string())
      return *why = status + " without a reason", false;
    *out = w;
    return true;
  }
  if (status != "ok") return *why = "status '" + status + "'", false;
  auto num_or_null = [](const nlohmann::json& j) { return j.is_number() || j.is_null(); };
  const nlohmann::json no = nullptr;
  auto get = [&](const char* k) -> const nlohmann::json& { return w.contains(k) ? w[k] : no; };
  if (!num_or_null(get("final_loss")) || !w.contains("final_loss")) return *why = "final_loss", false;
  const auto& curve = get("curve");
  if (!curve.is_array() || curve.size() != size_t(batches) || !std::all_of(curve.begin(), curve.end(), num_or_null))
    return *why = fmt::format("curve (expected {} losses)", batches), false;
  for (const char* k : {"curve_fingerprint", "initial_weights_fingerprint", "weights_fingerprint"})
    if (!is_hex32(get(k))) return *why = k, false;
  for (const char* k : {"seconds", "steps_per_second"})
    if (!get(k).is_number()) return *why = k, false;
  if (!get("phases").is_object()) return *why = "phases", false;
  if (w.size() != 9) return *why = "unknown fields", false;
  *out = w;
  (*out)["final_loss"] = number_or_nan(w["final_loss"]);
  for (auto& x : (*out)["curve"]) x = number_or_nan(x);
  return true;
}

// What became of a worker that sent no result: crashed (a signal), timeout (no progress), or error.
nlohmann::json failure_fields(const ChildExit& ex, double timeout_s, uint64_t batches_done, int batches,
                              const std::string& log_path) {
  const std::string after = fmt::format("after batch {} of {}", batches_done, batches);
  if (!ex.started) return {{"status", "error"}, {"reason", ex.error}};
  if (ex.timed_out)
    return {{"status", "timeout"},
            {"reason", fmt::format("no progress for {:g} s {}; worker killed", timeout_s, after)},
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
      {"reason", fmt::format("the worker exited with code {} without a result {} (see {})", ex.code, after, log_path)},
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
  std::string why;
  if (got_run) {
    // A result that arrived is the run's, even if the worker then failed to exit cleanly.
    if (!accept_worker_run(result, q.batches, &o.fields, &why))
      o.fields = {{"status", "error"}, {"reason", "the worker sent a malformed result (" + why + ")"}};
  } else {
    o.fields = failure_fields(ex, timeout_s, batches_done, q.batches, log_path);
  }
  return o;
}

// The design's bounds, checked before anything runs. Empty when fine.
std::string design_error(const TrainDesign& d) {
  if (d.model != "autoencoder") return fmt::format("model '{}': only autoencoder is implemented", d.model);
  if (d.seeds < 1) return "--seeds must be positive";
  if (d.replicates < 1) return "--replicates must be positive";
  if (d.batches < 1 || d.batches > kMaxTrainBatches) return fmt::format("--batches must be in 1..{}", kMaxTrainBatches);
  if (d.window < 1 || d.window > d.batches)
    return fmt::format("--window {} must be in 1..--batches ({})", d.window, d.batches);
  if (d.batch_size < 1 || d.batch_size > kMaxTrainBatchSize)
    return fmt::format("batch size {} must be in 1..{}", d.batch_size, kMaxTrainBatchSize);
  return "";
}

// Loads the data set, checks that the model can use it, and returns the fingerprint of its pixels
// (what every worker must load too). The pixels are not kept: the workers load their own.
bool check_data(const TrainDesign& d, const std::function<void(const std::string&)>& say, std::string* fingerprint,
                std::string* err) {
  Dataset data;
  Status st = load_dataset(d.data_dir, "train", &data);
  if (st) st = check_dataset_for_model(data, d.model, kAutoencoderImageSide, kAutoencoderImageSide, d.batch_size);
  if (!st) return *err = st.message(), false;
  say(fmt::format("data: {} images {}x{} from {}", data.count, data.rows, data.cols, data.images_path));
  *fingerprint = dataset_fingerprint(data);
  return true;
}

// results.json of a fresh design, or the one being resumed (its finished runs' keys in *done).
bool open_results(const TrainDesign& d, const TrainRunOptions& opt, size_t planned, Results* r,
                  std::set<std::string>* done, const std::function<void(const std::string&)>& say, std::string* err) {
  std::error_code ec;
  fs::create_directories(opt.out_dir + "/logs", ec);
  if (ec) return *err = fmt::format("cannot create {}: {}", opt.out_dir, ec.message()), false;
  const std::string path = opt.out_dir + "/results.json";
  nlohmann::json plan = {{"kind", "train"}, {"design", d.to_json()}, {"runs", planned}};
  if (!opt.fresh && fs::exists(path)) {
    if (!load_results(path, r, err)) return *err += " (use --fresh to start over)", false;
    if (r->plan.value("design", nlohmann::json()) != plan["design"])
      return *err = fmt::format("{} holds results of a different plan; use --fresh to replace them or another --out",
                                path),
             false;
    for (auto& run : r->training) done->insert(run.value("key", ""));
    if (!done->empty()) say(fmt::format("resuming: {} finished runs kept from {}", done->size(), path));
  } else {
    r->started_at = utc_now_iso8601();
  }
  r->finished_at.clear();
  r->command = opt.command;
  r->plan = plan;
  r->machine = machine_fingerprint();
  return save_results(path, *r, err);
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
  return q;
}

// One progress line for a finished run.
std::string run_summary(const nlohmann::json& run) {
  const std::string status = run["status"];
  if (status == "crashed")
    return fmt::format("crashed: {} after batch {} of {}; going on with the next run", run.value("reason", ""),
                       run.value("batches_done", uint64_t(0)), run.value("batches", 0));
  if (status == "timeout") return "timeout: " + run.value("reason", "") + "; going on with the next run";
  if (status != "ok") return status + ": " + run.value("reason", "");
  return fmt::format("final loss {:.6f} ({:.1f} steps/s, weights {})", number_or_nan(run["final_loss"]),
                     run["steps_per_second"].get<double>(), run["weights_fingerprint"].get<std::string>().substr(0, 8));
}

}  // namespace

int run_train_design(const TrainDesign& d, const TrainRunOptions& opt, Results* results, std::string* err) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  if (std::string e = design_error(d); !e.empty()) return *err = e, 2;
  if (opt.exe.empty()) return *err = "internal error: no detaudit executable for the training workers", 2;
  std::vector<TargetVariants> vars;
  for (auto& t : d.targets) {
    TargetVariants v;
    if (!derive_variants(t, &v, err)) return 2;
    vars.push_back(v);
  }
  std::string data_fp;
  if (!check_data(d, say, &data_fp, err)) return 2;
  DirLock lock;
  if (!lock.acquire(opt.out_dir, err)) return 2;
  const std::vector<PlannedRun> runs = plan_runs(d, vars);
  Results r;
  std::set<std::string> done;
  if (!open_results(d, opt, runs.size(), &r, &done, say, err)) return 2;
  const std::string path = opt.out_dir + "/results.json";
  const std::string machine_dump = r.machine.dump();
  const std::string machine_id = fingerprint_bytes(machine_dump.data(), machine_dump.size()).hex().substr(0, 16);
  const double timeout_s = opt.run_timeout_s > 0 ? opt.run_timeout_s : kDefaultRunTimeoutS;
  auto stop_interrupted = [&] {
    *err = "interrupted by " + signal_description(interrupted());
    *results = std::move(r);
    return kTrainInterrupted;
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
      const std::string log = opt.out_dir + "/logs/train-" + safe_file_name(tkey) + ".log";
      WorkerOutcome w = run_in_worker(request_for(d, p, index, data_fp), opt.exe, timeout_s, log,
                                      [&](const std::string& s) { say(prefix + ": " + s); });
      if (w.interrupted) return stop_interrupted();
      fields = std::move(w.fields);
      if (fields["status"] == "skipped") skipped[tkey] = fields;
    }
    for (auto& [k, v] : fields.items()) run[k] = v;
    say(prefix + ": " + run_summary(run));
    r.training.push_back(std::move(run));
    if (!save_results(path, r, err)) return 2;
  }
  r.analysis = analyze_training(r.training, r.machine, d);
  r.finished_at = utc_now_iso8601();
  if (!save_results(path, r, err)) return 2;
  if (!write_reports(opt.out_dir, r, err)) return 2;
  *results = std::move(r);
  return 0;
}

// ------------------------------------------------------------------------------------------------
// Analysis
// ------------------------------------------------------------------------------------------------
namespace {

nlohmann::json opt_num(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); }

nlohmann::json components_json(const Components& c) {
  return {{"target", c.target}, {"seed", c.seed}, {"interaction", c.interaction}, {"residual", c.residual}};
}
nlohmann::json interval_json(const Interval& i) { return nlohmann::json::array({i.lo, i.hi}); }

// Hardware a target runs on: the GPU's name for GPU targets, the CPU model otherwise.
std::string hardware_of(const std::string& target, const nlohmann::json& machine) {
  Spec s;
  std::string err;
  if (parse_target(target, &s, &err) && find_backend(s.name) && find_backend(s.name)->gpu) {
    for (auto& g : machine.value("gpus", nlohmann::json::array()))
      if (g.value("index", -1) == s.device) return g.value("name", "GPU") + " #" + std::to_string(s.device);
    return "GPU " + std::to_string(s.device) + " (not present)";
  }
  return machine.value("cpu_model", std::string("unknown CPU"));
}

// The paper's comparisons: does library nondeterminism add spread to the final loss, under random
// initial weights ((a) against (b)) and under fixed ones ((c) against (d))? Per base target, a
// Brown–Forsythe test with its permutation p, effect sizes and (large enough groups) an interval.
nlohmann::json spread_tests(const nlohmann::json& runs) {
  std::vector<std::string> bases;
  for (auto& r : runs)
    if (std::string b = r.value("base_target", ""); !b.empty() && std::find(bases.begin(), bases.end(), b) == bases.end())
      bases.push_back(b);
  auto losses = [&](const std::string& base, const char* cond) {
    std::vector<double> v;
    for (auto& r : runs)
      if (r.value("base_target", "") == base && r.value("condition", "") == cond && r.value("status", "") == "ok")
        v.push_back(number_or_nan(r["final_loss"]));
    return v;
  };
  nlohmann::json out = nlohmann::json::array();
  uint64_t seed = 20213;
  for (auto& base : bases)
    for (auto [x, y] : {std::pair{"a", "b"}, std::pair{"c", "d"}}) {
      const SpreadComparison s = compare_spread(losses(base, x), losses(base, y), 9999, seed++);
      out.push_back({{"base_target", base},
                     {"conditions", {x, y}},
                     {"runs", {s.n1, s.n2}},
                     {"std", {s.sd1, s.sd2}},
                     {"f", opt_num(s.f)},
                     {"p_f", opt_num(s.p_f)},
                     {"p", opt_num(s.p)},
                     {"exact", s.exact},
                     {"permutations", s.permutations},
                     {"min_p", s.min_p},
                     {"no_power", s.no_power},
                     {"mean_abs_dev_diff", s.mean_abs_dev_diff},
                     {"sd_ratio", opt_num(s.sd_ratio)},
                     {"diff_ci", s.diff_ci ? nlohmann::json::array({s.diff_ci->first, s.diff_ci->second})
                                           : nlohmann::json(nullptr)},
                     {"notes", s.notes}});
    }
  return out;
}

// What a target's bits are made by, hardware apart: the target without its device index (cuda:0 and
// cuda:1 are one implementation on two devices), the versions of the libraries its backend's bits depend
// on (registry `libraries`), and the tool's version and commit.
std::string implementation_of(const std::string& target, const nlohmann::json& machine) {
  Spec s;
  std::string err;
  if (!parse_target(target, &s, &err)) return target;
  s.device = -1;
  std::string out = fmt::format("detaudit {} ({}) {}", DETAUDIT_VERSION, git_commit(), s.str());
  const nlohmann::json libs = machine.value("libraries", nlohmann::json::object());
  if (const BackendEntry* e = find_backend(s.name))
    for (const std::string& lib : e->libraries) {
      auto it = libs.find(lib);
      out += fmt::format(" {}={}", lib, it != libs.end() && it->is_string() ? it->get<std::string>() : "?");
    }
  return out;
}

nlohmann::json variance_for(const nlohmann::json& runs, const std::string& condition, const TrainDesign& d) {
  // Cube: targets (base order) x seeds x replicates, of final losses; only complete cubes are analysed.
  std::vector<std::string> targets;
  std::vector<uint64_t> seeds;
  std::map<std::tuple<std::string, uint64_t, int>, double> y;
  std::map<std::pair<std::string, uint64_t>, std::set<std::string>> weights;  // (target, seed) -> final weights
  int reps = 0;
  for (auto& r : runs) {
    if (r.value("condition", "") != condition || r.value("status", "") != "ok") continue;
    std::string t = r["target"];
    uint64_t s = r["seed"];
    int k = r["replicate"];
    if (std::find(targets.begin(), targets.end(), t) == targets.end()) targets.push_back(t);
    if (std::find(seeds.begin(), seeds.end(), s) == seeds.end()) seeds.push_back(s);
    reps = std::max(reps, k + 1);
    y[{t, s, k}] = number_or_nan(r["final_loss"]);
    weights[{t, s}].insert(r.value("weights_fingerprint", ""));
  }
  nlohmann::json out = {{"condition", condition}, {"seeds", seeds.size()}, {"replicates", reps}};
  // A "nondeterministic" target whose replicates came out bitwise identical in every seed did not vary:
  // its zero within-cell spread is no run-to-run noise, so it is flagged and left out of the pool.
  if (reps >= 2) {
    std::vector<std::string> identical, kept;
    for (auto& t : targets) {
      bool all_same = true;
      for (auto s : seeds) all_same = all_same && weights[{t, s}].size() == 1 && !weights[{t, s}].begin()->empty();
      (all_same ? identical : kept).push_back(t);
    }
    if (!identical.empty()) {
      out["identical_replicates"] = identical;
      out["identical_note"] = fmt::format(
          "{} gave bitwise-identical replicates in every seed: {} variant did not vary, so {} left out of the "
          "run-to-run pool and of this decomposition",
          fmt::join(identical, ", "), identical.size() == 1 ? "its nondeterministic" : "their nondeterministic",
          identical.size() == 1 ? "it is" : "they are");
      targets = kept;
    }
  }
  out["targets"] = targets;
  Cube c;
  c.a = targets.size();
  c.b = seeds.size();
  c.n = size_t(reps);
  for (auto& t : targets)
    for (auto s : seeds)
      for (int k = 0; k < reps; ++k) {
        auto it = y.find({t, s, k});
        if (it == y.end()) {
          out["note"] = "incomplete design (some runs missing or failed): no decomposition";
          return out;
        }
        c.y.push_back(it->second);
      }
  if (!c.valid()) {
    out["note"] = out.contains("identical_note") ? out["identical_note"].get<std::string>() : "no finished runs";
    return out;
  }
  TwoWayResult a = two_way_anova(c);
  PermutationResult perm = permutation_test_target(c, 999, 20211);
  BootstrapResult boot = bootstrap_components(c, 999, 20212);
  out["anova"] = {{"ss", {a.target.ss, a.seed.ss, a.interaction.ss, a.residual.ss}},
                  {"df", {a.target.df, a.seed.df, a.interaction.df, a.residual.df}},
                  {"ms", {a.target.ms, a.seed.ms, a.interaction.ms, a.residual.ms}},
                  {"f_target", opt_num(a.f_target)},
                  {"p_target_f", opt_num(a.p_target)},
                  {"f_seed", opt_num(a.f_seed)},
                  {"p_seed_f", opt_num(a.p_seed)},
                  {"f_interaction", opt_num(a.f_interaction)},
                  {"p_interaction_f", opt_num(a.p_interaction)}};
  out["components_raw"] = components_json(a.raw);
  out["components"] = components_json(a.clipped);
  out["shares"] = components_json(a.share);
  out["notes"] = a.notes;
  out["permutation"] = {{"p", opt_num(perm.p)},         {"exact", perm.exact},       {"permutations", perm.permutations},
                        {"min_p", perm.min_p},           {"no_power", perm.no_power}, {"seed", perm.seed},
                        {"notes", perm.notes}};
  if (boot.ok)
    out["bootstrap"] = {{"level", boot.level},
                        {"resamples", boot.resamples},
                        {"seed", boot.seed},
                        {"share_ci",
                         {{"target", interval_json(boot.share.target)},
                          {"seed", interval_json(boot.share.seed)},
                          {"interaction", interval_json(boot.share.interaction)},
                          {"residual", interval_json(boot.share.residual)}}}};
  else
    out["bootstrap"] = {{"note", boot.notes}};
  ReplicateVariance rv = replicate_variance(c);
  out["replicate_variance"] = {{"pooled", rv.pooled}, {"max_cell", rv.max_cell}, {"identical_cells", rv.identical_cells},
                               {"cells", rv.a * rv.b}};
  return out;
}

}  // namespace

nlohmann::json analyze_training(const nlohmann::json& runs, const nlohmann::json& machine, const TrainDesign& d) {
  nlohmann::json out;
  // ---- table: condition x target -------------------------------------------------------------
  nlohmann::json table = nlohmann::json::array();
  for (const char* cond : {"a", "b", "c", "d"}) {
    std::vector<std::string> targets;
    for (auto& r : runs)
      if (r.value("condition", "") == cond && std::find(targets.begin(), targets.end(), r.value("target", "")) == targets.end())
        targets.push_back(r.value("target", ""));
    for (auto& t : targets) {
      std::vector<double> v;
      std::set<std::string> wfp, cfp;
      int failed = 0;
      std::string init, det;
      for (auto& r : runs) {
        if (r.value("condition", "") != cond || r.value("target", "") != t) continue;
        init = r.value("init", "");
        det = r.value("nondeterminism", "");
        if (r.value("status", "") != "ok") {
          ++failed;
          continue;
        }
        v.push_back(number_or_nan(r["final_loss"]));
        wfp.insert(r.value("weights_fingerprint", ""));
        cfp.insert(r.value("curve_fingerprint", ""));
      }
      nlohmann::json row = {{"condition", cond}, {"init", init}, {"nondeterminism", det}, {"target", t},
                            {"runs", v.size()},  {"failed", failed}};
      if (!v.empty()) {
        row["mean"] = mean(v);
        row["std"] = v.size() > 1 ? sample_std(v) : 0.0;
        // The pooled std mixes two spreads: between initial weights (std of the per-seed means) and run
        // to run (within a seed, pooled): both, apart, where the design has them.
        std::map<uint64_t, std::vector<double>> by_seed;
        for (auto& r : runs)
          if (r.value("condition", "") == cond && r.value("target", "") == t && r.value("status", "") == "ok")
            by_seed[r.value("seed", uint64_t(0))].push_back(number_or_nan(r["final_loss"]));
        std::vector<double> seed_means;
        double within = 0, within_df = 0;
        for (auto& [s, ys] : by_seed) {
          seed_means.push_back(mean(ys));
          within += sample_variance(ys) * double(ys.size() - 1);
          within_df += double(ys.size() - 1);
        }
        row["seed_std"] = seed_means.size() > 1 ? nlohmann::json(sample_std(seed_means)) : nlohmann::json(nullptr);
        row["run_std"] = within_df > 0 ? nlohmann::json(std::sqrt(within / within_df)) : nlohmann::json(nullptr);
        row["min"] = *std::min_element(v.begin(), v.end());
        row["max"] = *std::max_element(v.begin(), v.end());
        row["distinct_weights"] = wfp.size();
        row["distinct_curves"] = cfp.size();
        row["bitwise_identical"] = wfp.size() == 1 && cfp.size() == 1;
      }
      table.push_back(row);
    }
  }
  out["table"] = table;
  out["spread"] = spread_tests(runs);
  // ---- variance components ---------------------------------------------------------------------
  out["variance"] = {variance_for(runs, "a", d), variance_for(runs, "b", d)};
  // ---- confounding guard -------------------------------------------------------------------------
  // Targets that ran in condition (a); a pair is attributable to hardware only when the implementation
  // is identical, and only a significant target effect is attributed at all.
  std::vector<std::string> targets;
  for (auto& r : runs)
    if (r.value("condition", "") == "a" && r.value("status", "") == "ok" &&
        std::find(targets.begin(), targets.end(), r.value("target", "")) == targets.end())
      targets.push_back(r.value("target", ""));
  const nlohmann::json& va = out["variance"][0];
  const nlohmann::json perm = va.value("permutation", nlohmann::json::object());
  const bool significant = perm.value("p", nlohmann::json()).is_number() && perm["p"].get<double>() < 0.05 &&
                           !perm.value("no_power", false);
  std::string no_effect = perm.value("p", nlohmann::json()).is_number()
                              ? fmt::format("nothing: no significant target effect in (a) (permutation p = {:.3g}{})",
                                            perm["p"].get<double>(), perm.value("no_power", false) ? ", no power" : "")
                              : "nothing: the target effect in (a) was not tested";
  nlohmann::json guard = nlohmann::json::array();
  std::set<std::string> hardware;
  for (auto& t : targets) hardware.insert(hardware_of(t, machine));
  for (size_t i = 0; i < targets.size(); ++i)
    for (size_t j = i + 1; j < targets.size(); ++j) {
      TargetDescription x{hardware_of(targets[i], machine), implementation_of(targets[i], machine)};
      TargetDescription y{hardware_of(targets[j], machine), implementation_of(targets[j], machine)};
      guard.push_back({{"targets", {targets[i], targets[j]}},
                       {"hardware", {x.hardware, y.hardware}},
                       {"implementation", {x.implementation, y.implementation}},
                       {"kind", comparison_kind_name(classify_comparison(x, y))},
                       {"could_be", attributable_label(x, y)},
                       {"attributable_to", significant ? attributable_label(x, y) : no_effect}});
    }
  out["confounding"] = guard;
  if (hardware.size() <= 1)
    out["hardware_attribution"] =
        fmt::format("this design cannot attribute anything to hardware: every target ran on {} (one machine, one "
                    "device); a difference between its targets is an implementation effect at most. Merge runs from "
                    "other machines to test hardware.",
                    hardware.empty() ? std::string("no hardware (no target ran)") : *hardware.begin());
  // ---- phases ------------------------------------------------------------------------------------
  std::vector<RunPhases> rp;
  for (auto& r : runs) {
    if (r.value("status", "") != "ok") continue;
    std::vector<double> c;
    for (auto& x : r.value("curve", nlohmann::json::array())) c.push_back(number_or_nan(x));
    rp.push_back({r["condition"].get<std::string>(), detect_phases(c)});
  }
  nlohmann::json phases = nlohmann::json::object();
  for (auto& [cond, s] : summarize_phases(rp))
    phases[cond] = {{"runs", s.runs},
                    {"labels", s.label_counts},
                    {"with_plateau", s.with_plateau},
                    {"escaped", s.escaped},
                    {"censored", s.censored},
                    {"escape_median", opt_num(s.escape_median)},
                    {"escape_q25", opt_num(s.escape_q25)},
                    {"escape_q75", opt_num(s.escape_q75)}};
  out["phases"] = phases;
  return out;
}

// Variants that cannot be derived plan no runs (run_train_design refuses such a design).
size_t planned_runs(const TrainDesign& d) {
  std::vector<TargetVariants> vars;
  std::string err;
  for (auto& t : d.targets) {
    TargetVariants v;
    if (derive_variants(t, &v, &err)) vars.push_back(v);
  }
  return plan_runs(d, vars).size();
}

}  // namespace detaudit
