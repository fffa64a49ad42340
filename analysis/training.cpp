#include "analysis/training.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "analysis/noise_scale.hpp"
#include "analysis/phases.hpp"
#include "analysis/spread.hpp"
#include "analysis/stats.hpp"
#include "analysis/variance.hpp"

namespace detaudit {

namespace {

nlohmann::json opt_num(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); }
nlohmann::json components_json(const Components& c) {
  return {{"target", c.target}, {"seed", c.seed}, {"interaction", c.interaction}, {"residual", c.residual}};
}
nlohmann::json interval_json(const Interval& i) { return nlohmann::json::array({i.lo, i.hi}); }

template <class T>
size_t index_of(std::vector<T>& v, const T& x) {
  auto it = std::find(v.begin(), v.end(), x);
  if (it != v.end()) return size_t(it - v.begin());
  v.push_back(x);
  return v.size() - 1;
}

// A (source, target) pair: one level of the "target" factor.
struct Units {
  std::vector<std::pair<int, std::string>> keys;
  bool merged = false;
  const std::vector<TrainingSource>* sources = nullptr;
  const TargetFactsFn* facts = nullptr;
  size_t of(const TrainingRun& r) { return index_of(keys, {r.source, r.target}); }
  std::string label(size_t u) const { return label_of(keys[u].first, keys[u].second); }
  std::string label_of(int source, const std::string& target) const {
    if (!merged) return target;
    return target + " @ " + (*sources)[size_t(source)].label;
  }
};

const TrainingSource& source_of(const std::vector<TrainingSource>& sources, int i) {
  static const TrainingSource none;
  return i >= 0 && size_t(i) < sources.size() ? sources[size_t(i)] : none;
}

// The library versions of a target's backend on a source's machine (none for order=portable: one
// implementation on every CPU and GPU, kernels/portable.hpp, whose bits depend on no library).
// The library versions a target's bits depend on, then (build = true) the build's parts that select its
// code (compiler, C library, resolved ISA or core), as "key", "value" pairs.
std::vector<std::pair<std::string, std::string>> library_versions(const TargetFacts& t, const TrainingSource& src,
                                                                  bool build = false) {
  std::vector<std::pair<std::string, std::string>> out;
  const nlohmann::json libs = src.machine.is_object() ? src.machine.value("libraries", nlohmann::json::object())
                                                      : nlohmann::json::object();
  if (t.portable) return out;
  for (const std::string& lib : build ? t.build : t.libraries) {
    auto it = libs.find(lib);
    out.emplace_back(lib, it != libs.end() && it->is_string() ? it->get<std::string>() : "?");
  }
  return out;
}

// The target as far as it decides the bits: without its device index; order=portable as itself.
std::string implementation_target(const std::string& target, const TargetFactsFn& facts) {
  const TargetFacts t = facts(target);
  if (!t.known) return target;
  if (t.portable) return "order=portable (kernels/portable.hpp)";
  return t.implementation;
}

// Final losses of the cube units x seeds x replicates in one condition; nullopt when incomplete.
std::optional<Cube> cube_of(const std::map<std::tuple<size_t, uint64_t, int>, double>& y, const std::vector<size_t>& units,
                            const std::vector<uint64_t>& seeds, int reps) {
  Cube c;
  c.a = units.size(), c.b = seeds.size(), c.n = size_t(reps);
  for (size_t u : units)
    for (uint64_t s : seeds)
      for (int k = 0; k < reps; ++k) {
        auto it = y.find({u, s, k});
        if (it == y.end()) return std::nullopt;
        c.y.push_back(it->second);
      }
  if (!c.valid()) return std::nullopt;
  return c;
}

nlohmann::json permutation_json(const PermutationResult& p) {
  return {{"p", opt_num(p.p)},         {"exact", p.exact},       {"permutations", p.permutations},
          {"min_p", p.min_p},          {"no_power", p.no_power}, {"seed", p.seed},
          {"notes", p.notes}};
}

// What a test of the design can detect: the effect it observed in units of its sd (descriptive), the
// effect it detects with power 0.8 at 0.05 (noncentral t: paired within seeds, or two groups; the design's
// family of tests states it again at each test's Holm level), and the n (pairs, or runs per group) at which
// the observed effect would be detected with power 0.8. No power against the observed effect: that only
// restates p.
nlohmann::json power_json(double d, double n_eff, double df, bool two_groups) {
  if (!std::isfinite(d) || !(df > 0) || !(n_eff > 0))
    return {{"effect_d", nullptr}, {"detectable_d", nullptr}, {"n_for_power_80", nullptr}};
  const auto need = n_for_power(d, two_groups);
  return {{"effect_d", d},
          {"n_eff", n_eff},
          {"df", df},
          {"detectable_d", t_detectable_noncentrality(df, 0.05) / std::sqrt(n_eff)},
          {"n_for_power_80", need ? nlohmann::json(*need) : nlohmann::json(nullptr)},
          {"n_kind", two_groups ? "runs per group" : "seeds"}};
}

// One condition's final losses by unit, seed and replicate.
struct ConditionData {
  std::vector<size_t> units;  // in order of appearance
  std::vector<uint64_t> seeds;
  int reps = 0;
  std::map<std::tuple<size_t, uint64_t, int>, double> y;
  std::map<std::pair<size_t, uint64_t>, std::set<std::string>> weights;
};

ConditionData condition_data(const std::vector<TrainingRun>& runs, const std::string& condition, Units& units) {
  ConditionData d;
  for (auto& r : runs) {
    if (r.condition != condition || !r.ok()) continue;
    const size_t u = units.of(r);
    index_of(d.units, u);
    index_of(d.seeds, r.seed);
    d.reps = std::max(d.reps, r.replicate + 1);
    d.y[{u, r.seed, r.replicate}] = r.final_loss;
    d.weights[{u, r.seed}].insert(r.weights_fingerprint);
  }
  return d;
}

nlohmann::json pair_effect(const Cube& c);

nlohmann::json variance_for(const std::vector<TrainingRun>& runs, const std::string& condition, Units& units) {
  ConditionData cd = condition_data(runs, condition, units);
  nlohmann::json out = {{"condition", condition}, {"seeds", cd.seeds.size()}, {"replicates", cd.reps}};
  // A "nondeterministic" target whose replicates came out bitwise identical in every seed did not vary:
  // its zero within-cell spread is no run-to-run noise, so it is flagged and left out of the pool.
  std::vector<size_t> kept = cd.units;
  if (cd.reps >= 2) {
    std::vector<std::string> identical;
    kept.clear();
    for (size_t u : cd.units) {
      bool all_same = true;
      for (auto s : cd.seeds) {
        const auto& w = cd.weights[{u, s}];
        all_same = all_same && w.size() == 1 && !w.begin()->empty();
      }
      if (all_same)
        identical.push_back(units.label(u));
      else
        kept.push_back(u);
    }
    if (!identical.empty()) {
      out["identical_replicates"] = identical;
      out["identical_note"] = fmt::format(
          "{} gave bitwise-identical replicates in every seed: {} variant did not vary, so {} left out of the "
          "run-to-run pool and of this decomposition",
          fmt::join(identical, ", "), identical.size() == 1 ? "its nondeterministic" : "their nondeterministic",
          identical.size() == 1 ? "it is" : "they are");
    }
  }
  std::vector<std::string> labels;
  for (size_t u : kept) labels.push_back(units.label(u));
  out["targets"] = labels;
  std::optional<Cube> c = cube_of(cd.y, kept, cd.seeds, cd.reps);
  if (!c) {
    if (!kept.empty() && !cd.seeds.empty())
      out["note"] = "incomplete design (some runs missing or failed): no decomposition";
    else
      out["note"] = out.contains("identical_note") ? out["identical_note"].get<std::string>() : "no finished runs";
    return out;
  }
  TwoWayResult a = two_way_anova(*c);
  PermutationResult perm = permutation_test_target(*c, 999, 20211);
  BootstrapResult boot = bootstrap_components(*c, 999, 20212);
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
  out["permutation"] = permutation_json(perm);
  // Two targets: the permutation within seeds is a paired comparison, whose effect and power are the
  // pair's (more targets: an F across them, no single effect to state).
  if (c->a == 2) out["effect"] = pair_effect(*c);
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
  ReplicateVariance rv = replicate_variance(*c);
  out["replicate_variance"] = {{"pooled", rv.pooled}, {"max_cell", rv.max_cell}, {"identical_cells", rv.identical_cells},
                               {"cells", rv.a * rv.b}};
  return out;
}

// The paper's comparisons: does library nondeterminism add spread to the final loss, under random
// initial weights ((a) against (b)) and under fixed ones ((c) against (d))? Per base unit. (a) and (b)
// share their seeds, so their runs are not exchangeable across seeds: (a)'s seeds x replicates table
// gives σ²_run/σ²_seed with an F interval (analysis/spread.hpp). (c) and (d) start from one set of
// weights, so their runs are exchangeable: a Brown–Forsythe test with its permutation p, its effect and
// its power.
nlohmann::json spread_tests(const std::vector<TrainingRun>& runs, const Units& units) {
  std::vector<std::pair<int, std::string>> bases;
  for (auto& r : runs)
    if (!r.base_target.empty()) index_of(bases, {r.source, r.base_target});
  auto losses = [&](const std::pair<int, std::string>& base, const char* cond) {
    std::vector<double> v;
    for (auto& r : runs)
      if (r.source == base.first && r.base_target == base.second && r.condition == cond && r.ok())
        v.push_back(r.final_loss);
    return v;
  };
  auto opt_or_inf = [](const std::optional<double>& v, bool infinite) {
    return infinite ? nlohmann::json("inf") : opt_num(v);
  };
  nlohmann::json out = nlohmann::json::array();
  uint64_t seed = 20213;
  for (auto& base : bases) {
    {
      std::map<uint64_t, std::vector<double>> by_seed;
      for (auto& r : runs)
        if (r.source == base.first && r.base_target == base.second && r.condition == "a" && r.ok())
          by_seed[r.seed].push_back(r.final_loss);
      std::vector<std::vector<double>> groups;
      for (auto& [sd, v] : by_seed) groups.push_back(v);
      const std::vector<double> la = losses(base, "a"), lb = losses(base, "b");
      const RunSeedRatio q = run_seed_ratio(groups);
      auto sd = [](const std::vector<double>& v) {
        return v.size() > 1 ? nlohmann::json(sample_std(v)) : nlohmann::json(nullptr);
      };
      out.push_back({{"base_target", units.label_of(base.first, base.second)},
                     {"conditions", {"a", "b"}},
                     {"method", "run_seed_ratio"},
                     {"runs", {la.size(), lb.size()}},
                     {"std", {sd(la), sd(lb)}},
                     {"seeds", q.seeds},
                     {"runs_per_seed", q.n0},
                     {"estimated", q.estimated},
                     {"f", opt_num(q.f)},
                     {"ratio", q.estimated ? opt_or_inf(q.ratio, q.ratio_infinite) : nlohmann::json(nullptr)},
                     {"ratio_ci", q.estimated ? nlohmann::json::array(
                                                    {opt_or_inf(q.lo, q.lo_infinite), opt_or_inf(q.hi, q.hi_infinite)})
                                              : nlohmann::json(nullptr)},
                     {"interval_factor", q.estimated ? nlohmann::json(q.interval_factor) : nlohmann::json(nullptr)},
                     {"kurtosis", q.estimated ? nlohmann::json(q.kurtosis) : nlohmann::json(nullptr)},
                     {"df_run", q.estimated ? nlohmann::json(q.df_run) : nlohmann::json(nullptr)},
                     {"seeds_for_factor_4",
                      q.seeds_for_factor_4 ? nlohmann::json(*q.seeds_for_factor_4) : nlohmann::json(nullptr)},
                     {"notes", q.notes}});
    }
    const std::vector<double> lc = losses(base, "c"), ld = losses(base, "d");
    const SpreadComparison s = compare_spread(lc, ld, 9999, seed++);
    nlohmann::json row = {
        {"base_target", units.label_of(base.first, base.second)},
        {"conditions", {"c", "d"}},
        {"method", "brown_forsythe"},
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
        {"diff_ci", s.diff_ci ? nlohmann::json::array({s.diff_ci->first, s.diff_ci->second}) : nlohmann::json(nullptr)},
        {"notes", s.notes}};
    if (s.n1 >= 2 && s.n2 >= 2 && s.z_sd > 0)
      row["power"] = power_json(s.mean_abs_dev_diff / s.z_sd, double(s.n1 * s.n2) / double(s.n1 + s.n2),
                                double(s.n1 + s.n2 - 2), true);
    out.push_back(std::move(row));
  }
  return out;
}

nlohmann::json table_of(const std::vector<TrainingRun>& runs, Units& units) {
  nlohmann::json table = nlohmann::json::array();
  for (const char* cond : {"a", "b", "c", "d", "e"}) {
    std::vector<size_t> order;
    for (auto& r : runs)
      if (r.condition == cond) index_of(order, units.of(r));
    for (size_t u : order) {
      std::vector<double> v;
      std::set<std::string> wfp, cfp;
      std::map<uint64_t, std::vector<double>> by_seed;
      int failed = 0;
      std::string init, det;
      for (auto& r : runs) {
        if (r.condition != cond || units.of(r) != u) continue;
        init = r.init_name();
        det = r.nondeterminism_name();
        if (!r.ok()) {
          ++failed;
          continue;
        }
        v.push_back(r.final_loss);
        by_seed[r.seed].push_back(r.final_loss);
        wfp.insert(r.weights_fingerprint);
        cfp.insert(r.curve_fingerprint);
      }
      nlohmann::json row = {{"condition", cond}, {"init", init}, {"nondeterminism", det}, {"target", units.label(u)},
                            {"runs", v.size()},  {"failed", failed}};
      if (!v.empty()) {
        row["mean"] = mean(v);
        row["std"] = v.size() > 1 ? sample_std(v) : 0.0;
        // The pooled std mixes two spreads: between initial weights (std of the per-seed means) and run
        // to run (within a seed, pooled): both, apart, where the design has them.
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
  return table;
}

// A base unit: a base target on one source, with its (a) target and its deterministic target.
struct BaseUnit {
  int source = 0;
  std::string base, nondet_target, det_target;
};

// Per seed, do two base units' deterministic variants end in the same final weights in condition c?
nlohmann::json bitwise_across(const std::vector<TrainingRun>& runs, const BaseUnit& x, const BaseUnit& y,
                              const char* cond) {
  std::map<uint64_t, std::set<std::string>> wx, wy;
  for (auto& r : runs) {
    if (r.condition != cond || !r.ok() || r.base_target.empty()) continue;
    if (r.source == x.source && r.base_target == x.base) wx[r.seed].insert(r.weights_fingerprint);
    if (r.source == y.source && r.base_target == y.base) wy[r.seed].insert(r.weights_fingerprint);
  }
  size_t seeds = 0, identical = 0;
  for (auto& [s, w] : wx) {
    auto it = wy.find(s);
    if (it == wy.end()) continue;
    ++seeds;
    if (w.size() == 1 && w == it->second) ++identical;
  }
  return {{"condition", cond}, {"seeds", seeds}, {"identical_seeds", identical}};
}

// Holm's step-down adjustment of p-values tested together: the k-th smallest of m times (m - k + 1), made
// monotone, capped at 1; in the order given.
std::vector<double> holm(const std::vector<double>& p) {
  std::vector<size_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p[x] < p[y]; });
  std::vector<double> adjusted(p.size());
  double running = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    running = std::max(running, std::min(1.0, double(p.size() - k) * p[order[k]]));
    adjusted[order[k]] = running;
  }
  return adjusted;
}

// holm() over the pairs with a p-value; a pair without a p keeps 1.
template <class T>
void holm_adjust(std::vector<T>* tests) {
  std::vector<size_t> tested;
  std::vector<double> p;
  for (size_t i = 0; i < tests->size(); ++i)
    if ((*tests)[i].test && (*tests)[i].test->p) tested.push_back(i), p.push_back(*(*tests)[i].test->p);
  const std::vector<double> adjusted = holm(p);
  for (size_t k = 0; k < tested.size(); ++k) (*tests)[tested[k]].p_holm = adjusted[k];
}

// The effect of a pair in (a): per seed, the mean of x's runs minus y's; their mean over seeds with its
// 95% t interval (df seeds - 1), and the mean in units of the seed sd (the spread of the seed means, the
// two targets pooled) and of the run-to-run sd (within target and seed, pooled).
nlohmann::json pair_effect(const Cube& c) {
  std::vector<double> d, mx(c.b), my(c.b);
  double ss_run = 0;
  for (size_t j = 0; j < c.b; ++j) {
    for (size_t i = 0; i < 2; ++i) {
      double m = 0;
      for (size_t k = 0; k < c.n; ++k) m += c.at(i, j, k);
      m /= double(c.n);
      (i == 0 ? mx : my)[j] = m;
      for (size_t k = 0; k < c.n; ++k) ss_run += (c.at(i, j, k) - m) * (c.at(i, j, k) - m);
    }
    d.push_back(mx[j] - my[j]);
  }
  const double mean_d = mean(d);
  nlohmann::json e = {{"mean_difference", mean_d}, {"seeds", c.b}};
  if (c.b >= 2) {
    const double half = student_t_quantile(0.975, double(c.b - 1)) * sample_std(d) / std::sqrt(double(c.b));
    e["ci95"] = {mean_d - half, mean_d + half};
    const double seed_sd = std::sqrt((sample_variance(mx) + sample_variance(my)) / 2);
    e["seed_sd"] = seed_sd;
    if (seed_sd > 0) e["in_seed_sd"] = mean_d / seed_sd;
    // The paired-t approximation to the permutation test within seeds: its power against this effect.
    const double sd_d = sample_std(d);
    e["sd_difference"] = sd_d;
    if (sd_d > 0) e["power"] = power_json(mean_d / sd_d, double(c.b), double(c.b - 1), false);
  }
  const double df_run = double(2 * c.b * (c.n - 1));
  if (df_run > 0) {
    const double run_sd = std::sqrt(ss_run / df_run);
    e["run_sd"] = run_sd;
    if (run_sd > 0) e["in_run_sd"] = mean_d / run_sd;
  }
  return e;
}

// family_p (optional): each pair's p adjusted in the design's family (design_tests), of family_size tests;
// without it, Holm over the pairs alone.
nlohmann::json confounding(const std::vector<TrainingRun>& runs, const std::vector<TrainingSource>& sources,
                           Units& units, nlohmann::json* hardware_sentence,
                           const std::map<size_t, double>* family_p = nullptr, size_t family_size = 0) {
  // Base units that finished runs in condition (a), in order of appearance.
  std::vector<BaseUnit> bases;
  for (auto& r : runs) {
    if (r.condition != "a" || !r.ok()) continue;
    auto it = std::find_if(bases.begin(), bases.end(),
                           [&](const BaseUnit& b) { return b.source == r.source && b.base == r.base_target; });
    if (it == bases.end()) bases.push_back({r.source, r.base_target, r.target, ""});
  }
  for (auto& b : bases)
    for (auto& r : runs)
      if (r.source == b.source && r.base_target == b.base && !r.nondeterministic) b.det_target = r.target;
  ConditionData a = condition_data(runs, "a", units);
  auto unit_index = [&](int source, const std::string& target) {
    return size_t(std::find(units.keys.begin(), units.keys.end(), std::pair{source, target}) - units.keys.begin());
  };
  nlohmann::json guard = nlohmann::json::array();
  std::set<std::string> hardware;
  size_t hardware_pairs = 0, zero_pairs = 0, significant_hw = 0, build_pairs = 0;
  std::string first_build;  // what differs in the first pair whose code differs only by its build
  uint64_t seed = 20214;
  for (auto& b : bases) hardware.insert(hardware_of(b.base, source_of(sources, b.source), units.merged, *units.facts));
  // First every pair's own test of a target effect in (a) (a permutation of the two labels within
  // seeds), then Holm's correction over the pairs tested: with many pairs, one at 0.05 is a chance.
  struct PairTest {
    std::optional<Cube> cube;
    std::optional<PermutationResult> test;
    double p_holm = 1;
  };
  std::vector<PairTest> tests;
  for (size_t i = 0; i < bases.size(); ++i)
    for (size_t j = i + 1; j < bases.size(); ++j) {
      PairTest t;
      t.cube = cube_of(
          a.y,
          {unit_index(bases[i].source, bases[i].nondet_target), unit_index(bases[j].source, bases[j].nondet_target)},
          a.seeds, a.reps);
      if (t.cube) t.test = permutation_test_target(*t.cube, 999, seed++);
      tests.push_back(std::move(t));
    }
  holm_adjust(&tests);
  if (family_p)
    for (auto& [i, adj] : *family_p)
      if (i < tests.size()) tests[i].p_holm = adj;
  size_t pair = 0;
  for (size_t i = 0; i < bases.size(); ++i)
    for (size_t j = i + 1; j < bases.size(); ++j, ++pair) {
      const BaseUnit &x = bases[i], &y = bases[j];
      const TrainingSource &sx = source_of(sources, x.source), &sy = source_of(sources, y.source);
      TargetDescription dx{hardware_of(x.base, sx, units.merged, *units.facts), implementation_of(x.nondet_target, sx, *units.facts)};
      TargetDescription dy{hardware_of(y.base, sy, units.merged, *units.facts), implementation_of(y.nondet_target, sy, *units.facts)};
      const ComparisonKind kind = classify_comparison(dx, dy);
      nlohmann::json row = {{"targets", {units.label_of(x.source, x.nondet_target), units.label_of(y.source, y.nondet_target)}},
                            {"hardware", {dx.hardware, dy.hardware}},
                            {"implementation", {dx.implementation, dy.implementation}},
                            {"kind", comparison_kind_name(kind)},
                            {"could_be", attributable_label(dx, dy)}};
      const std::string differs = implementation_difference(x.nondet_target, sx, y.nondet_target, sy, *units.facts);
      if (!differs.empty()) row["implementation_differs"] = differs;
      // The code differs only in how it was built or dispatched (compiler, C library, resolved ISA or
      // core): with the hardware it is one difference, which no design of these runs can split.
      const bool build_only =
          !differs.empty() && differs == build_difference(x.nondet_target, sx, y.nondet_target, sy, *units.facts);
      if (build_only && kind == ComparisonKind::kBoth && !build_pairs++) first_build = differs;
      // This pair's test (above), Holm-adjusted over the pairs, and its effect.
      const PairTest& pt = tests[pair];
      std::optional<double> p;
      bool power = false;
      if (pt.test) {
        row["test"] = permutation_json(*pt.test);
        p = pt.test->p;
        power = !pt.test->no_power;
        if (p) row["test"]["p_holm"] = pt.p_holm;
        row["effect"] = pair_effect(*pt.cube);
      } else {
        row["test"] = {{"notes", "incomplete in (a): not tested"}};
      }
      const bool significant = p && pt.p_holm < 0.05 && power;
      nlohmann::json bits = nlohmann::json::array();
      bool zero = true;
      size_t compared = 0;
      for (const char* c : {"b", "d"}) {
        nlohmann::json bw = bitwise_across(runs, x, y, c);
        bits.push_back(bw);
        compared += bw["seeds"].get<size_t>();
        zero = zero && bw["seeds"].get<size_t>() > 0 && bw["identical_seeds"] == bw["seeds"];
      }
      row["bitwise"] = bits;
      zero = zero && compared > 0;
      std::string no_effect =
          p ? fmt::format(
                  "nothing: no significant difference between the two in (a) (permutation p = {:.3g}, Holm over "
                  "{}: {:.3g}{})",
                  *p, family_p ? fmt::format("the design's {} test(s)", family_size) : fmt::format("{} pair(s)", tests.size()),
                  pt.p_holm,
                  power ? ""
                        : fmt::format(", no power: the smallest attainable p is {:.3g}",
                                      row["test"]["min_p"].get<double>()))
          : row["test"].contains("p")
              ? "nothing: no difference to test in (a) (" + row["test"].value("notes", std::string("no variance")) + ")"
              : std::string("nothing: the pair was not tested in (a) (incomplete)");
      std::string attributable;
      if (kind == ComparisonKind::kHardwareOnly) {
        ++hardware_pairs;
        if (significant) ++significant_hw;
        attributable = significant ? "hardware" : no_effect;
      } else if (kind == ComparisonKind::kImplementationOnly) {
        attributable = significant ? "implementation" : no_effect;
      } else if (kind == ComparisonKind::kBoth) {
        attributable = !significant ? no_effect
                       : build_only ? "hardware or build (these differ: " + differs + ")"
                                    : "confounded with implementation: " + differs;
      } else {
        attributable = "nothing: same hardware and implementation (run-to-run variation only)";
      }
      // The deterministic variants, compared bit for bit in (b) and (d): no statistics needed. Their
      // implementation is judged on its own (order=portable pins it across CPU and GPU while the
      // nondeterministic variants differ).
      if (!x.det_target.empty() && !y.det_target.empty() && compared > 0) {
        TargetDescription ex{dx.hardware, implementation_of(x.det_target, sx, *units.facts)};
        TargetDescription ey{dy.hardware, implementation_of(y.det_target, sy, *units.facts)};
        const ComparisonKind dk = classify_comparison(ex, ey);
        const std::string ddiff = implementation_difference(x.det_target, sx, y.det_target, sy, *units.facts);
        const bool dbuild_only =
            !ddiff.empty() && ddiff == build_difference(x.det_target, sx, y.det_target, sy, *units.facts);
        std::string finding;
        if (dk == ComparisonKind::kHardwareOnly) {
          if (kind != ComparisonKind::kHardwareOnly) ++hardware_pairs;
          if (zero) ++zero_pairs;
          finding = zero ? "nothing: with the implementation pinned, this hardware difference contributed exactly zero "
                           "(bitwise-identical final weights in (b) and (d))"
                         : "hardware: the same implementation gave other bits on the other hardware";
        } else if (dk == ComparisonKind::kBoth) {
          finding = zero          ? "nothing: identical bits although hardware and implementation differ"
                    : dbuild_only ? "hardware or build (these differ: " + ddiff + ")"
                                  : "confounded with implementation: " + ddiff;
        } else if (dk == ComparisonKind::kImplementationOnly) {
          finding = zero ? "nothing: identical bits from two implementations" : "implementation";
        } else {
          finding = zero ? "nothing: same hardware and implementation, same bits"
                         : "run to run: same hardware and implementation, other bits";
        }
        row["deterministic"] = {{"targets", {units.label_of(x.source, x.det_target), units.label_of(y.source, y.det_target)}},
                                {"implementation", {ex.implementation, ey.implementation}},
                                {"kind", comparison_kind_name(dk)},
                                {"bitwise_identical", zero},
                                {"attributable_to", finding}};
        if (!ddiff.empty()) row["deterministic"]["implementation_differs"] = ddiff;
      }
      row["attributable_to"] = attributable;
      // One word for tools (analyze --format json): what the design can say of this pair.
      row["finding"] = significant   ? (kind == ComparisonKind::kHardwareOnly ? "hardware" : "implementation")
                       : !p || power ? "no_difference"
                                     : "no_power";
      if (!p && pt.test) row["finding"] = "no_difference";  // nothing varied: no difference to test
      if (!pt.test) row["finding"] = "no_power";            // incomplete in (a): not tested
      row["differs"] = differs;
      row["p"] = p ? nlohmann::json(*p) : nlohmann::json(nullptr);
      row["p_holm"] = p ? nlohmann::json(pt.p_holm) : nlohmann::json(nullptr);
      guard.push_back(row);
    }
  if (hardware.size() <= 1)
    *hardware_sentence =
        fmt::format("this design cannot attribute anything to hardware: every target ran on {} (one machine, one "
                    "device); a difference between its targets is an implementation effect at most. {}",
                    hardware.empty() ? std::string("no hardware (no target ran)") : *hardware.begin(),
                    units.merged ? "The merged sources all come from this one machine: merge runs from other machines "
                                   "to test hardware."
                                 : "Merge runs from other machines (detaudit analyze) to test hardware.");
  else if (hardware_pairs == 0 && build_pairs > 0)
    *hardware_sentence = fmt::format(
        "the hardware differs here only together with the build that selects the code ({}{}): a difference is "
        "hardware or build, never hardware alone. Build both machines alike (the same compiler and C library) to "
        "test the hardware.",
        first_build, build_pairs > 1 ? fmt::format(", and in {} more pair(s)", build_pairs - 1) : "");
  else if (hardware_pairs == 0)
    *hardware_sentence =
        "the hardware differs here only together with the implementation (confounded with implementation): no pair "
        "of targets ran the same implementation on different hardware, so nothing can be attributed to hardware. "
        "Targets with order=portable run one implementation on every CPU and GPU.";
  else
    *hardware_sentence = fmt::format(
        "{} pair{} of targets ran the same implementation on different hardware: {} with a significant difference in "
        "(a), {} whose deterministic variants gave bitwise-identical final weights in (b) and (d) (hardware "
        "contributed exactly zero there).",
        hardware_pairs, hardware_pairs == 1 ? "" : "s", significant_hw, zero_pairs);
  return guard;
}

nlohmann::json phases_of(const std::vector<TrainingRun>& runs) {
  // Phases were detected once, by the worker that trained the run; runs without them (none finished
  // before phases existed) are left out of the summary.
  std::vector<RunPhases> rp;
  for (auto& r : runs)
    if (r.ok() && r.phases)
      rp.push_back({r.condition, {r.phases->label, r.phases->has_plateau(), r.phases->escape_step, r.phases->censored}});
  // Per condition, the run whose first segment came nearest the plateau rule: how near a label was to
  // the other side (results of older versions carry no margin).
  std::map<std::string, double> nearest;
  for (auto& r : runs)
    if (r.ok() && r.phases && r.phases->margin) {
      auto [it, fresh] = nearest.try_emplace(r.condition, *r.phases->margin);
      if (!fresh && std::fabs(*r.phases->margin) < std::fabs(it->second)) it->second = *r.phases->margin;
    }
  nlohmann::json phases = nlohmann::json::object();
  for (auto& [cond, s] : summarize_phases(rp))
    phases[cond] = {{"runs", s.runs},
                    {"nearest_margin", nearest.count(cond) ? nlohmann::json(nearest[cond]) : nlohmann::json(nullptr)},
                    {"labels", s.label_counts},
                    {"with_plateau", s.with_plateau},
                    {"escaped", s.escaped},
                    {"censored", s.censored},
                    {"escape_median", opt_num(s.escape_median)},
                    {"escape_q25", opt_num(s.escape_q25)},
                    {"escape_q75", opt_num(s.escape_q75)}};
  return phases;
}

}  // namespace

std::vector<TrainingSource> training_sources(const nlohmann::json& plan, const nlohmann::json& machine,
                                             const std::string& tool_version, const std::string& tool_commit) {
  std::vector<TrainingSource> out;
  if (plan.is_object() && plan.contains("sources") && plan["sources"].is_array() && !plan["sources"].empty()) {
    for (auto& s : plan["sources"]) {
      TrainingSource t;
      t.dir = s.value("dir", "");
      t.label = s.value("label", "");
      t.machine = s.value("machine", nlohmann::json::object());
      t.tool_version = s.value("tool_version", "");
      t.tool_commit = s.value("tool_commit", "");
      t.started_at = s.value("started_at", "");
      t.finished_at = s.value("finished_at", "");
      out.push_back(std::move(t));
    }
    return out;
  }
  TrainingSource t;
  t.machine = machine;
  t.label = machine.is_object() ? machine.value("hostname", std::string("this machine")) : "this machine";
  t.tool_version = tool_version;
  t.tool_commit = tool_commit;
  out.push_back(std::move(t));
  return out;
}

nlohmann::json to_json(const TrainingSource& s) {
  return {{"dir", s.dir},
          {"label", s.label},
          {"machine", s.machine},
          {"tool_version", s.tool_version},
          {"tool_commit", s.tool_commit},
          {"started_at", s.started_at},
          {"finished_at", s.finished_at}};
}

std::string hardware_of(const std::string& target, const TrainingSource& src, bool merged, const TargetFactsFn& facts) {
  const TargetFacts t = facts(target);
  const nlohmann::json& m = src.machine;
  std::string hw;
  if (t.known && t.device_kind != "host") {
    hw = "GPU " + std::to_string(t.device) + " (not present)";
    if (m.is_object())
      for (auto& g : m.value("gpus", nlohmann::json::array()))
        if (g.is_object() && g.value("index", -1) == t.device) hw = g.value("name", "GPU") + " #" + std::to_string(t.device);
  } else {
    hw = m.is_object() ? m.value("cpu_model", std::string("unknown CPU")) : "unknown CPU";
  }
  // Two machines are two devices even when their models agree; two sources from one machine are not.
  if (!merged) return hw;
  return hw + " in " + (m.is_object() ? m.value("hostname", src.label) : src.label);
}

std::string implementation_of(const std::string& target, const TrainingSource& src, const TargetFactsFn& facts) {
  const TargetFacts t = facts(target);
  if (!t.known) return target;
  std::string out =
      fmt::format("detaudit {} ({}) {}", src.tool_version, src.tool_commit, implementation_target(target, facts));
  for (auto& [lib, v] : library_versions(t, src)) out += fmt::format(" {}={}", lib, v);
  for (auto& [key, v] : library_versions(t, src, true)) out += fmt::format(" {}={}", key, v);
  return out;
}

namespace {

// What differs between the implementations of two targets: the target, detaudit's version and commit
// and the libraries (build = false), or the build's parts that select code (build = true).
std::string differences(const std::string& target_x, const TrainingSource& x, const std::string& target_y,
                        const TrainingSource& y, const TargetFactsFn& facts, bool build) {
  std::vector<std::string> d;
  const std::string tx = implementation_target(target_x, facts), ty = implementation_target(target_y, facts);
  if (!build && tx != ty) d.push_back(fmt::format("target {} vs {}", tx, ty));
  if (!build && x.tool_version != y.tool_version)
    d.push_back(fmt::format("detaudit {} vs {}", x.tool_version, y.tool_version));
  if (!build && x.tool_commit != y.tool_commit)
    d.push_back(fmt::format("commit {} vs {}", x.tool_commit, y.tool_commit));
  const TargetFacts sx = facts(target_x), sy = facts(target_y);
  if (sx.known && sy.known) {
    std::map<std::string, std::string> lx, ly;
    for (auto& [k, v] : library_versions(sx, x, build)) lx[k] = v;
    for (auto& [k, v] : library_versions(sy, y, build)) ly[k] = v;
    std::set<std::string> keys;
    for (auto& [k, v] : lx) keys.insert(k);
    for (auto& [k, v] : ly) keys.insert(k);
    for (auto& k : keys) {
      const std::string a = lx.count(k) ? lx[k] : "(not used)", b = ly.count(k) ? ly[k] : "(not used)";
      if (a != b) d.push_back(fmt::format("{} {} vs {}", k, a, b));
    }
  }
  return fmt::format("{}", fmt::join(d, "; "));
}

}  // namespace

std::string implementation_difference(const std::string& target_x, const TrainingSource& x, const std::string& target_y,
                                      const TrainingSource& y, const TargetFactsFn& facts) {
  const std::string impl = differences(target_x, x, target_y, y, facts, false),
                    build = differences(target_x, x, target_y, y, facts, true);
  return impl.empty() ? build : build.empty() ? impl : impl + "; " + build;
}

std::string build_difference(const std::string& target_x, const TrainingSource& x, const std::string& target_y,
                             const TrainingSource& y, const TargetFactsFn& facts) {
  return differences(target_x, x, target_y, y, facts, true);
}

namespace {

// Where "start" of a run's noise series is: after the first fifth of its points and at least 3 (the moving
// averages then hold 3 points or more), and before the middle of the series, so that "start" and "end" are
// not neighbours; a series too short for both (fewer than 6 points: 4 points would put "start" at point 3
// beside "end") has only its first point there.
size_t noise_start_index(size_t points) {
  const size_t k = std::max<size_t>(points / 5, 3) - 1;
  return 2 * k < points - 1 && points >= 4 ? k : 0;
}

// σ²_hw's 95% interval from the runs' own estimates (the repeats of one run share its weights and are
// not independent, the runs are): a t interval over runs, its lower end clipped at 0. Null from fewer than
// 2 runs, and [0, 0] when no repeat differed.
nlohmann::json sigma2_hw_interval(const std::vector<double>& per_run) {
  if (per_run.size() < 2) return nullptr;
  const double m = mean(per_run), sd = sample_std(per_run);
  const double half = student_t_quantile(0.975, double(per_run.size() - 1)) * sd / std::sqrt(double(per_run.size()));
  return nlohmann::json::array({std::max(0.0, m - half), m + half});
}

// The gradient noise scale along training and the run-to-run noise, per unit (a target on a source) and
// condition, from the runs that measured them (train --noise-scale). Runs that share initial weights are
// not independent: each summary is a median over distinct initial weights of the median over that init's
// runs.
nlohmann::json noise_of(const std::vector<TrainingRun>& runs, Units& units) {
  std::vector<std::pair<size_t, std::string>> order;
  for (auto& r : runs)
    if (r.ok() && r.noise && !r.noise->points.empty()) index_of(order, {units.of(r), r.condition});
  nlohmann::json rows = nlohmann::json::array(), hw = nlohmann::json::array();
  auto med = [](const std::vector<double>& v) {
    return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(median(v));
  };
  for (const auto& [u, cond] : order) {
    // Per initial weights (fingerprint), the values of its runs.
    struct PerInit {
      std::vector<double> b0, b1, g0, g1, t0, t1;
    };
    std::map<std::string, PerInit> by_init;
    int rising = 0, falling = 0, undefined = 0, nruns = 0, batch = 0, every = 0, b_small = 0;
    size_t start_points = SIZE_MAX;
    uint64_t examples = 0;
    std::vector<double> hw_sq, hw_trace, hw_per_run;  // hw_per_run: each run's own estimate of σ²_hw
    std::set<std::string> hw_inits;
    for (auto& r : runs) {
      if (!r.ok() || !r.noise || r.noise->points.empty() || units.of(r) != u || r.condition != cond) continue;
      ++nruns;
      batch = r.noise->b_big, every = r.noise->every, b_small = r.noise->b_small;
      examples = std::max(examples, r.noise->examples);
      PerInit& pi = by_init[r.initial_weights_fingerprint];
      const NoiseSeries s = noise_series(*r.noise, kNoiseEmaDecay);
      const size_t k0 = noise_start_index(s.step.size()), k1 = s.step.size() - 1;
      start_points = std::min(start_points, k0 + 1);
      pi.g0.push_back(s.g2[k0]), pi.g1.push_back(s.g2[k1]), pi.t0.push_back(s.trace[k0]), pi.t1.push_back(s.trace[k1]);
      const double x0 = s.b_simple[k0], x1 = s.b_simple[k1];
      if (std::isfinite(x0)) pi.b0.push_back(x0);
      if (std::isfinite(x1)) pi.b1.push_back(x1);
      if (std::isfinite(x0) && std::isfinite(x1) && k1 > k0) (x1 > x0 ? rising : falling) += x1 != x0;
      for (double b : s.b_simple) undefined += !std::isfinite(b);
      double run_sum = 0;
      size_t run_pairs = 0;
      for (size_t i = 0; i < r.noise->points.size(); ++i)
        if (const auto& h = r.noise->points[i].hw_sq) {
          hw_sq.push_back(*h);
          hw_trace.push_back(s.trace[i]);
          hw_inits.insert(r.initial_weights_fingerprint);
          run_sum += *h, ++run_pairs;
        }
      if (run_pairs) hw_per_run.push_back(run_sum / double(run_pairs) / 2);
    }
    // The median over distinct initial weights of each init's median.
    auto over_inits = [&](std::vector<double> PerInit::*field) {
      std::vector<double> m;
      for (auto& [fp, pi] : by_init)
        if (!(pi.*field).empty()) m.push_back(median(pi.*field));
      return med(m);
    };
    rows.push_back({{"target", units.label(u)},
                    {"condition", cond},
                    {"runs", nruns},
                    {"distinct_inits", by_init.size()},
                    {"every", every},
                    {"b_small", b_small},
                    {"batch", batch},
                    {"start_points", start_points},
                    {"b_simple_start", over_inits(&PerInit::b0)},
                    {"b_simple_end", over_inits(&PerInit::b1)},
                    {"g2_start", over_inits(&PerInit::g0)},
                    {"g2_end", over_inits(&PerInit::g1)},
                    {"trace_start", over_inits(&PerInit::t0)},
                    {"trace_end", over_inits(&PerInit::t1)},
                    {"runs_rising", rising},
                    {"runs_falling", falling},
                    {"undefined_points", undefined}});
    if (hw_sq.empty()) continue;
    // sigma^2_run = E|g1 - g2|^2 / 2: each measured pair is one unbiased estimate of it (the same gradient
    // at the same weights twice: the implementation's run-to-run noise on this device).
    const size_t pairs = hw_sq.size();
    const size_t nonzero = size_t(std::count_if(hw_sq.begin(), hw_sq.end(), [](double x) { return x != 0; }));
    const double sigma2 = mean(hw_sq) / 2, trace = mean(hw_trace);
    nlohmann::json row = {{"target", units.label(u)},
                          {"condition", cond},
                          {"pairs", pairs},
                          {"nonzero_pairs", nonzero},
                          {"distinct_inits", hw_inits.size()},
                          {"sigma2_hw", sigma2},
                          {"sigma2_hw_ci", sigma2_hw_interval(hw_per_run)},
                          {"trace", trace},
                          {"batch", batch},
                          {"examples", examples},
                          {"identical", nonzero == 0}};
    if (nonzero == 0) {
      row["r"] = 0.0;
      row["b_hw"] = nullptr;  // infinite: the run adds no noise at all
      row["b_hw_beyond_data"] = true;
      row["note"] = fmt::format("the gradient came out bitwise identical in all {} repeats: σ²_hw = 0 exactly, "
                                "B_hw infinite",
                                pairs);
    } else if (!(trace > 0)) {
      row["r"] = nullptr;
      row["b_hw"] = nullptr;
      row["b_hw_beyond_data"] = false;
      row["note"] = "tr(Sigma) was not positive at the measured points: R and B_hw undefined";
    } else {
      row["r"] = sigma2 * batch / trace;
      // Beyond the training set no batch exists: SGD's own noise is larger at every batch size below N (at
      // B = N a full-batch gradient has no sampling noise at all). Such a B_hw is no batch size: null, with
      // the reason.
      const bool beyond = examples > 0 && trace / sigma2 > double(examples);
      row["b_hw"] = beyond ? nlohmann::json(nullptr) : nlohmann::json(trace / sigma2);
      row["b_hw_beyond_data"] = beyond;
      if (beyond)
        row["b_hw_note"] = fmt::format("tr(Σ)/σ²_hw = {:.3g} is beyond the {} examples of the training set: SGD's "
                                       "noise is larger at every batch size below {}",
                                       trace / sigma2, examples, examples);
      row["note"] =
          fmt::format("run-to-run implementation noise at B = {}: {} of {} repeats differed", batch, nonzero, pairs);
    }
    // Nondeterminism off ran the deterministic variant, which promises the same bits every time: a repeat that
    // differed broke that promise (the run FAILs: judge_training_runs, contract/training_run.hpp).
    if (nonzero > 0 && !condition_nondeterministic(cond)) {
      row["broken_promise"] = true;
      row["note"] = fmt::format("FAIL: nondeterminism off, yet {} of {} repeats differed: the deterministic variant "
                                "broke its promise of identical bits; {}",
                                nonzero, pairs, row["note"].get<std::string>());
    }
    hw.push_back(std::move(row));
  }
  if (rows.empty()) return nullptr;
  return {{"decay", kNoiseEmaDecay},
          {"units", rows},
          {"hardware", hw},
          {"b_crit",
           "not estimated: B_crit is read off training at several batch sizes to a common loss (McCandlish et al. "
           "2018), and this design trains one batch size; B_simple equals their noise scale B_noise when the "
           "Hessian is a multiple of the identity, and they found B_crit to track B_noise"}};
}

// Condition (e): the spread one ULP in one initial weight gives, beside (c) (fixed initial weights,
// nondeterminism on) and the seed spread (b) (random initial weights, nondeterminism off), per base unit.
nlohmann::json one_ulp_of(const std::vector<TrainingRun>& runs, const Units& units) {
  std::vector<std::pair<int, std::string>> bases;
  for (auto& r : runs)
    if (r.condition == "e" && !r.base_target.empty()) index_of(bases, {r.source, r.base_target});
  nlohmann::json out = nlohmann::json::array();
  uint64_t seed = 20214;
  for (auto& base : bases) {
    std::map<std::string, std::vector<double>> loss;
    std::set<std::string> e_weights, d_weights;
    int e_runs = 0;
    for (auto& r : runs) {
      if (r.source != base.first || r.base_target != base.second || !r.ok()) continue;
      loss[r.condition].push_back(r.final_loss);
      if (r.condition == "e") ++e_runs, e_weights.insert(r.weights_fingerprint);
      if (r.condition == "d") d_weights.insert(r.weights_fingerprint);
    }
    int e_like_d = 0;
    for (auto& r : runs)
      if (r.source == base.first && r.base_target == base.second && r.ok() && r.condition == "e")
        e_like_d += d_weights.count(r.weights_fingerprint) > 0;
    auto sd = [&](const char* c) {
      const auto& v = loss[c];
      return v.size() > 1 ? nlohmann::json(sample_std(v)) : nlohmann::json(nullptr);
    };
    auto test = [&](const char* other) {
      const SpreadComparison s = compare_spread(loss["e"], loss[other], 9999, seed++);
      nlohmann::json t{{"against", other}, {"p", opt_num(s.p)},      {"exact", s.exact},
                       {"min_p", s.min_p}, {"no_power", s.no_power}, {"sd_ratio", opt_num(s.sd_ratio)},
                       {"notes", s.notes}};
      if (s.n1 >= 2 && s.n2 >= 2 && s.z_sd > 0)
        t["power"] = power_json(s.mean_abs_dev_diff / s.z_sd, double(s.n1 * s.n2) / double(s.n1 + s.n2),
                                double(s.n1 + s.n2 - 2), true);
      return t;
    };
    out.push_back({{"base_target", units.label_of(base.first, base.second)},
                   {"runs", e_runs},
                   {"std_e", sd("e")},
                   {"std_c", sd("c")},
                   {"std_b", sd("b")},
                   {"distinct_weights", e_weights.size()},
                   {"same_weights_as_d", e_like_d},
                   {"tests", {test("b"), test("c")}}});
  }
  return out;
}

// Every test of the design with a p-value, one family, Holm-corrected together (one design asks about a
// dozen questions; one of them at 0.05 is a chance), each test counted once: with two targets in (a), the
// target effect of the variance decomposition and the guard's pair are one question of the same runs,
// and the pair's test stands for it. Per test: its Holm level (0.05/(m − r + 1) for the r-th smallest p),
// the smallest p its design can reach, and the effect it detects with power 0.8 at that level (noncentral
// t), or that it detects nothing (its floor above the level). The guard's attribution then uses this
// family's adjusted p (confounding's family_p).
nlohmann::json design_tests(const nlohmann::json& an) {
  struct Entry {
    std::string name;
    double p, min_p;
    nlohmann::json power;
    int pair = -1;  // the guard's pair (confounding row) it is, if any
  };
  std::vector<Entry> e;
  auto p_of = [](const nlohmann::json& j, const char* k) -> std::optional<double> {
    return j.contains(k) && j[k].is_number() ? std::optional<double>(j[k].get<double>()) : std::nullopt;
  };
  auto power_of = [](const nlohmann::json& j) { return j.contains("power") ? j["power"] : nlohmann::json(nullptr); };
  auto floor_of = [&](const nlohmann::json& j) { return p_of(j, "min_p").value_or(0.0); };
  size_t guard_pairs = 0;
  for (auto& row : an.value("confounding", nlohmann::json::array()))
    guard_pairs += row.contains("test") && row["test"].contains("p") && row["test"]["p"].is_number();
  for (auto& v : an.value("variance", nlohmann::json::array()))
    if (v.contains("permutation"))
      if (auto p = p_of(v["permutation"], "p")) {
        const std::string cond = v.value("condition", "?");
        if (cond == "a" && v.value("targets", nlohmann::json::array()).size() == 2 && guard_pairs == 1)
          continue;  // the guard's one pair is this test
        e.push_back({fmt::format("target effect in ({})", cond), *p, floor_of(v["permutation"]),
                     v.contains("effect") ? power_of(v["effect"]) : nlohmann::json(nullptr)});
      }
  for (auto& row : an.value("spread", nlohmann::json::array()))
    if (auto p = p_of(row, "p"))
      e.push_back({fmt::format("spread ({}) vs ({}) of {}", row["conditions"][0].get<std::string>(),
                               row["conditions"][1].get<std::string>(), row.value("base_target", "?")),
                   *p, floor_of(row), power_of(row)});
  int pair = 0;
  for (auto& row : an.value("confounding", nlohmann::json::array())) {
    if (auto p = p_of(row, "p")) {
      std::vector<std::string> t;
      for (auto& x : row.value("targets", nlohmann::json::array()))
        t.push_back(x.is_string() ? x.get<std::string>() : "?");
      e.push_back({fmt::format("final loss in (a): {}", fmt::join(t, " vs ")), *p,
                   row.contains("test") ? floor_of(row["test"]) : 0.0,
                   row.contains("effect") ? power_of(row["effect"]) : nlohmann::json(nullptr), pair});
    }
    ++pair;
  }
  for (auto& row : an.value("one_ulp", nlohmann::json::array()))
    for (auto& t : row.value("tests", nlohmann::json::array()))
      if (auto p = p_of(t, "p"))
        e.push_back({fmt::format("spread (e) vs ({}) of {}", t.value("against", "?"), row.value("base_target", "?")),
                     *p, floor_of(t), power_of(t)});
  std::vector<double> p;
  for (auto& x : e) p.push_back(x.p);
  const std::vector<double> adjusted = holm(p);
  // Holm's level for each test: by the rank of its p (ties in input order).
  std::vector<size_t> order(e.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return e[a].p < e[b].p; });
  std::vector<double> level(e.size());
  for (size_t r = 0; r < order.size(); ++r) level[order[r]] = 0.05 / double(e.size() - r);
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < e.size(); ++i) {
    nlohmann::json t = {{"test", e[i].name}, {"p", e[i].p},       {"p_holm", adjusted[i]},
                        {"level", level[i]}, {"min_p", e[i].min_p}, {"power", e[i].power}};
    const bool nothing = e[i].min_p > level[i];
    t["detects_nothing"] = nothing;
    const auto& pw = e[i].power;
    const auto n_eff = pw.is_object() ? p_of(pw, "n_eff") : std::nullopt, df = pw.is_object() ? p_of(pw, "df") : std::nullopt;
    t["detectable_d"] = nothing ? nlohmann::json(nullptr)
                        : n_eff && df ? nlohmann::json(t_detectable_noncentrality(*df, level[i]) / std::sqrt(*n_eff))
                                      : nlohmann::json(nullptr);
    if (e[i].pair >= 0) t["guard_pair"] = e[i].pair;
    out.push_back(std::move(t));
  }
  return out;
}

// Seeds that random-initial-weight runs ((a), (b)) share with the fixed initial weights of (c), (d), (e):
// those runs start from the same weights across conditions. Null when there is no overlap.
nlohmann::json seed_overlap(const std::vector<TrainingRun>& runs) {
  std::set<uint64_t> random_seeds, fixed_seeds;
  for (auto& r : runs) (r.random_init ? random_seeds : fixed_seeds).insert(r.seed);
  std::vector<uint64_t> both;
  for (uint64_t x : random_seeds)
    if (fixed_seeds.count(x)) both.push_back(x);
  if (both.empty()) return nullptr;
  return {{"seeds", both},
          {"note", fmt::format("seed {} of the random initial weights ((a), (b)) is also the fixed initial weights "
                               "of (c), (d) and (e): those runs start from the same weights. No estimate here pools "
                               "runs across conditions (each is per condition), and the noise summaries count "
                               "distinct initial weights",
                               fmt::join(both, ", "))}};
}

}  // namespace

nlohmann::json analyze_training(const std::vector<TrainingRun>& runs, const std::vector<TrainingSource>& sources,
                                const TargetFactsFn& facts) {
  Units units;
  units.sources = &sources;
  units.facts = &facts;
  units.merged = sources.size() > 1;
  nlohmann::json out;
  out["table"] = table_of(runs, units);
  out["spread"] = spread_tests(runs, units);
  out["variance"] = {variance_for(runs, "a", units), variance_for(runs, "b", units)};
  nlohmann::json sentence;
  out["confounding"] = confounding(runs, sources, units, &sentence);
  out["hardware_attribution"] = sentence;
  out["phases"] = phases_of(runs);
  if (nlohmann::json n = noise_of(runs, units); !n.is_null()) out["noise"] = std::move(n);
  if (nlohmann::json e = one_ulp_of(runs, units); !e.empty()) out["one_ulp"] = std::move(e);
  out["tests"] = design_tests(out);
  // The guard again, its attribution judged by the design family's adjusted p of each pair.
  std::map<size_t, double> family_p;
  for (auto& t : out["tests"])
    if (t.contains("guard_pair")) family_p[t["guard_pair"].get<size_t>()] = t["p_holm"].get<double>();
  if (!family_p.empty()) {
    sentence = nullptr;
    out["confounding"] = confounding(runs, sources, units, &sentence, &family_p, out["tests"].size());
    out["hardware_attribution"] = sentence;
  }
  if (nlohmann::json o = seed_overlap(runs); !o.is_null()) out["seed_overlap"] = std::move(o);
  if (units.merged) {
    nlohmann::json src = nlohmann::json::array();
    for (auto& s : sources) src.push_back({{"label", s.label}, {"dir", s.dir}});
    out["sources"] = src;
  }
  return out;
}

}  // namespace detaudit
