#include "suites/train_design.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "analysis/phases.hpp"
#include "analysis/stats.hpp"
#include "analysis/variance.hpp"
#include "models/autoencoder.hpp"
#include "models/idx.hpp"
#include "probes/env.hpp"
#include "probes/targets.hpp"
#include "report/train_report.hpp"

namespace detaudit {

namespace fs = std::filesystem;

bool derive_variants(const Spec& base, TargetVariants* out, std::string* err) {
  TargetVariants v{base, base, base};
  if (base.name == "cpu") {
    v.deterministic.set("order", "blocked");
    v.nondeterministic.set("order", "atomic");
  } else if (base.name == "cuda") {
    v.deterministic.set("order", "tree");
    v.nondeterministic.set("order", "atomic");
  } else if (base.name == "cublas") {
    v.deterministic.set("atomics", "not_allowed");
    v.nondeterministic.set("atomics", "allowed");
  } else if (base.name == "cudnn") {
    // Legacy algorithm 1 is deterministic for every pass; backward algorithm 0 accumulates with atomics.
    for (const char* k : {"fwd_algo", "bwd_data_algo", "bwd_filter_algo"}) v.deterministic.set(k, "1");
    v.nondeterministic.set("fwd_algo", "1");
    v.nondeterministic.set("bwd_data_algo", "0");
    v.nondeterministic.set("bwd_filter_algo", "0");
  } else {
    *err = fmt::format("target '{}' has no nondeterministic variant (training targets: cpu, cuda, cublas, cudnn)",
                       base.str());
    return false;
  }
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
  parse_target("cpu?threads=2", &a, &err);
  parse_target("cpu?threads=1", &b, &err);
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

std::string hash_hex(const void* p, size_t n) {
  XXH128_hash_t h = XXH3_128bits(p, n);
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

double window_mean(const std::vector<float>& curve, int window) {
  if (curve.empty()) return NAN;
  size_t w = std::min<size_t>(size_t(std::max(window, 1)), curve.size());
  double s = 0;
  for (size_t i = curve.size() - w; i < curve.size(); ++i) s += double(curve[i]);
  return s / double(w);
}

}  // namespace

int run_train_design(const TrainDesign& d, const TrainRunOptions& opt, Results* results, std::string* err) {
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  std::vector<TargetVariants> vars;
  for (auto& t : d.targets) {
    TargetVariants v;
    if (!derive_variants(t, &v, err)) return 2;
    vars.push_back(v);
  }
  Dataset data;
  Status st = load_dataset(d.data_dir, "train", &data);
  if (!st) {
    *err = st.message();
    return 2;
  }
  say(fmt::format("data: {} images {}x{} from {}", data.count, data.rows, data.cols, data.images_path));

  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) {
    *err = fmt::format("cannot create {}: {}", opt.out_dir, ec.message());
    return 2;
  }
  const std::string path = opt.out_dir + "/results.json";
  Results r;
  std::set<std::string> done;
  nlohmann::json plan = {{"kind", "train"}, {"design", d.to_json()}};
  if (!opt.fresh && fs::exists(path)) {
    if (!load_results(path, &r, err)) {
      *err += " (use --fresh to start over)";
      return 2;
    }
    if (r.plan.value("design", nlohmann::json()) != plan["design"]) {
      *err = fmt::format("{} holds results of a different plan; use --fresh to replace them or another --out", path);
      return 2;
    }
    for (auto& run : r.training) done.insert(run.value("key", ""));
    if (!done.empty()) say(fmt::format("resuming: {} finished runs kept from {}", done.size(), path));
  } else {
    r.started_at = utc_now_iso8601();
  }
  r.finished_at.clear();
  r.command = opt.command;
  r.plan = plan;
  r.machine = machine_fingerprint();
  const std::string machine_id = hash_hex(r.machine.dump().data(), r.machine.dump().size()).substr(0, 16);
  if (!save_results(path, r, err)) return 2;

  std::vector<PlannedRun> runs = plan_runs(d, vars);
  std::map<std::string, std::unique_ptr<Backend>> backends;
  std::map<std::string, Status> backend_status;
  size_t index = 0;
  for (auto& p : runs) {
    ++index;
    if (done.count(p.key())) continue;
    nlohmann::json run = {{"key", p.key()},
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
    std::string tkey = p.target.str();
    if (!backends.count(tkey) && !backend_status.count(tkey)) {
      Status bs;
      auto b = make_target_backend(p.target, &bs);
      if (b)
        backends[tkey] = std::move(b);
      else
        backend_status[tkey] = bs;
    }
    std::string prefix = fmt::format("run {}/{} ({}) {} seed {} rep {}", index, runs.size(), p.condition, tkey, p.seed,
                                     p.replicate);
    if (!backends.count(tkey)) {
      const Status& bs = backend_status[tkey];
      run["status"] = bs.code() == Status::Code::kUnavailable || bs.code() == Status::Code::kUnsupported ? "skipped"
                                                                                                        : "error";
      run["reason"] = bs.message();
      say(prefix + ": " + run["status"].get<std::string>() + ": " + bs.message());
    } else {
      TrainConfig cfg;
      cfg.init_seed = p.seed;
      cfg.data_seed = d.data_seed;
      cfg.batches = d.batches;
      cfg.batch_size = d.batch_size;
      TrainCallbacks cb;
      int every = std::max(1, d.batches / 4);
      cb.on_step = [&](int step, float loss) {
        if ((step + 1) % every == 0) say(fmt::format("{}: batch {}/{} loss {:.5f}", prefix, step + 1, d.batches, loss));
        return true;
      };
      TrainResult tr;
      Status ts = train_autoencoder(*backends[tkey], data, cfg, cb, &tr);
      if (!ts) {
        run["status"] = ts.code() == Status::Code::kUnsupported || ts.code() == Status::Code::kUnavailable ? "skipped"
                                                                                                         : "error";
        run["reason"] = ts.message();
        say(prefix + ": " + run["status"].get<std::string>() + ": " + ts.message());
      } else {
        run["status"] = "ok";
        run["final_loss"] = window_mean(tr.curve, d.window);
        run["curve"] = tr.curve;
        run["curve_fingerprint"] = hash_hex(tr.curve.data(), tr.curve.size() * sizeof(float));
        run["initial_weights_fingerprint"] = tr.initial_weights.hex();
        run["weights_fingerprint"] = tr.final_weights.hex();
        run["seconds"] = tr.seconds;
        run["steps_per_second"] = tr.seconds > 0 ? double(tr.curve.size()) / tr.seconds : 0.0;
        std::vector<double> c(tr.curve.begin(), tr.curve.end());
        PhaseResult ph = detect_phases(c);
        run["phases"] = {{"label", ph.label},
                         {"segments", ph.segments.size()},
                         {"escape_step", ph.escape_step ? nlohmann::json(*ph.escape_step) : nlohmann::json(nullptr)},
                         {"censored", ph.censored}};
        say(fmt::format("{}: final loss {:.6f} ({:.1f} steps/s, weights {})", prefix, run["final_loss"].get<double>(),
                        run["steps_per_second"].get<double>(), tr.final_weights.hex().substr(0, 8)));
      }
    }
    r.training.push_back(run);
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
  if (parse_target(target, &s, &err) && is_gpu_backend(s.name)) {
    for (auto& g : machine.value("gpus", nlohmann::json::array()))
      if (g.value("index", -1) == s.device) return g.value("name", "GPU") + " #" + std::to_string(s.device);
    return "GPU " + std::to_string(s.device) + " (not present)";
  }
  return machine.value("cpu_model", std::string("unknown CPU"));
}

nlohmann::json variance_for(const nlohmann::json& runs, const std::string& condition, const TrainDesign& d) {
  // Cube: targets (base order) x seeds x replicates, of final losses; only complete cubes are analysed.
  std::vector<std::string> targets;
  std::vector<uint64_t> seeds;
  std::map<std::tuple<std::string, uint64_t, int>, double> y;
  int reps = 0;
  for (auto& r : runs) {
    if (r.value("condition", "") != condition || r.value("status", "") != "ok") continue;
    std::string t = r["target"];
    uint64_t s = r["seed"];
    int k = r["replicate"];
    if (std::find(targets.begin(), targets.end(), t) == targets.end()) targets.push_back(t);
    if (std::find(seeds.begin(), seeds.end(), s) == seeds.end()) seeds.push_back(s);
    reps = std::max(reps, k + 1);
    y[{t, s, k}] = r["final_loss"].get<double>();
  }
  nlohmann::json out = {{"condition", condition}, {"targets", targets}, {"seeds", seeds.size()}, {"replicates", reps}};
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
    out["note"] = "no finished runs";
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
  out["permutation"] = {{"p", opt_num(perm.p)}, {"permutations", perm.permutations}, {"seed", perm.seed}, {"notes", perm.notes}};
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
        v.push_back(r["final_loss"].get<double>());
        wfp.insert(r.value("weights_fingerprint", ""));
        cfp.insert(r.value("curve_fingerprint", ""));
      }
      nlohmann::json row = {{"condition", cond}, {"init", init}, {"nondeterminism", det}, {"target", t},
                            {"runs", v.size()},  {"failed", failed}};
      if (!v.empty()) {
        row["mean"] = mean(v);
        row["std"] = v.size() > 1 ? sample_std(v) : 0.0;
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
  // ---- variance components ---------------------------------------------------------------------
  out["variance"] = {variance_for(runs, "a", d), variance_for(runs, "b", d)};
  // ---- confounding guard -------------------------------------------------------------------------
  nlohmann::json guard = nlohmann::json::array();
  std::vector<std::string> targets;
  for (auto& r : runs)
    if (r.value("condition", "") == "a" && std::find(targets.begin(), targets.end(), r.value("target", "")) == targets.end())
      targets.push_back(r.value("target", ""));
  std::string libs = machine.value("libraries", nlohmann::json::object()).dump();
  for (size_t i = 0; i < targets.size(); ++i)
    for (size_t j = i + 1; j < targets.size(); ++j) {
      TargetDescription x{hardware_of(targets[i], machine), "detaudit " DETAUDIT_VERSION " " + targets[i]};
      TargetDescription y{hardware_of(targets[j], machine), "detaudit " DETAUDIT_VERSION " " + targets[j]};
      guard.push_back({{"targets", {targets[i], targets[j]}},
                       {"hardware", {x.hardware, y.hardware}},
                       {"kind", comparison_kind_name(classify_comparison(x, y))},
                       {"attributable_to", attributable_label(x, y)}});
    }
  out["confounding"] = guard;
  // ---- phases ------------------------------------------------------------------------------------
  std::vector<RunPhases> rp;
  for (auto& r : runs) {
    if (r.value("status", "") != "ok") continue;
    std::vector<double> c = r["curve"].get<std::vector<double>>();
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

}  // namespace detaudit
