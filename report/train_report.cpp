#include "report/train_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "analysis/noise_scale.hpp"
#include "contract/plan.hpp"
#include "analysis/phases.hpp"
#include "analysis/stats.hpp"
#include "analysis/training.hpp"
#include "contract/base64.hpp"
#include "contract/atomic_file.hpp"
#include "contract/json_fields.hpp"
#include "contract/results.hpp"
#include "report/probe_report.hpp"
#include "report/svg.hpp"

namespace detaudit {

namespace {

namespace jf = json_fields;

// Conditions come from results.json: a name the design does not know is shown as it is, escaped.
std::string cond_name(const std::string& c) {
  if (c == "a") return "(a) random init, nondeterminism on";
  if (c == "b") return "(b) random init, nondeterminism off";
  if (c == "c") return "(c) fixed init, nondeterminism on";
  if (c == "d") return "(d) fixed init, nondeterminism off";
  if (c == "e") return "(e) fixed init, one weight +1 ULP, nondeterminism off";
  return inline_text(c);
}
// The same as plain text, for SVG labels (the SVG writer escapes).
std::string cond_label(const std::string& c) {
  if (c == "a" || c == "b" || c == "c" || c == "d" || c == "e") return cond_name(c);
  return c;
}

std::string num(const std::optional<double>& x, const char* fmtstr = "{:.3g}") {
  if (!x) return "—";
  return fmt::format(fmt::runtime(fmtstr), *x);
}


// An interval [lo, hi] from a two-element array of numbers.
std::optional<std::pair<double, double>> interval(const nlohmann::json& j) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_number() || !j[1].is_number()) return std::nullopt;
  return std::pair{j[0].get<double>(), j[1].get<double>()};
}

// Runs that did not finish, first and whole: a crash or a hang of a target is what a reader must see
// before any statistic. Counts by status, then one line per run with its log.
void add_failed_runs(Section& v, const std::vector<TrainingRun>& runs, const std::vector<TrainingSource>& sources) {
  std::map<std::string, int> by_status;
  std::vector<std::string> items;
  for (auto& run : runs) {
    if (run.ok()) continue;
    std::string st = to_string(run.status);
    ++by_status[st];
    std::string where =
        run.batches_done ? fmt::format(" after batch {} of {}", *run.batches_done, run.batches) : std::string();
    std::string log = "logs/train-" + safe_file_name(run.target) + ".log";
    if (sources.size() > 1 && size_t(run.source) < sources.size()) log = sources[size_t(run.source)].dir + "/" + log;
    items.push_back(fmt::format("{}: {} ({}) seed {} replicate {}{}: {} (log: {})", inline_text(st), inline_code(run.target),
                                inline_text(run.condition), run.seed, run.replicate, where, inline_text(run.reason),
                                inline_code(log)));
  }
  if (items.empty()) return;
  std::vector<std::string> counts;
  for (const char* s : {"crashed", "timeout", "error", "skipped"})
    if (by_status.count(s)) counts.push_back(fmt::format("{} {}", by_status[s], s == std::string("timeout") ? "timed out" : s));
  for (auto& [s, n] : by_status)
    if (s != "crashed" && s != "timeout" && s != "error" && s != "skipped") counts.push_back(fmt::format("{} {}", n, inline_text(s)));
  v.para(fmt::format("**Runs that did not finish: {}.** They are left out of every statistic below.",
                     fmt::join(counts, ", ")));
  v.list(items);
}

void add_train_verdict(Document& d, const Results& r, const std::vector<TrainingSource>& sources) {
  const auto& runs = r.training;
  int ok = 0, failed = 0;
  for (auto& run : runs) (run.ok() ? ok : failed)++;
  auto& v = d.add("Training verdict");
  const auto& design = jf::object(r.plan, "design");
  // The finished runs that broke the deterministic variant's promise FAIL (as train and check judge them): first.
  const std::vector<RunVerdict> verdicts = judge_training_runs(runs);
  std::vector<std::string> broken;
  for (size_t i = 0; i < runs.size(); ++i)
    if (broke_promise(runs[i], verdicts[i]))
      broken.push_back(fmt::format("FAIL: {} ({}) seed {} replicate {}: {}", inline_code(runs[i].target),
                                   inline_text(runs[i].condition), runs[i].seed, runs[i].replicate,
                                   inline_text(verdicts[i].reason)));
  v.para(fmt::format("Design {} on model {}: {} runs finished{}, {} skipped or failed; {} seeds, {} batches, final "
                     "metric = mean loss of the last {} batches.",
                     inline_code(jf::str(design, "design")), inline_code(jf::str(design, "model")), ok,
                     broken.empty() ? "" : fmt::format(" ({} of them FAIL: they broke the promise of identical bits)",
                                                       broken.size()),
                     failed, jf::integer(design, "seeds"), jf::integer(design, "batches"), jf::integer(design, "window")));
  if (!broken.empty()) {
    v.para(fmt::format("**FAIL: {} run{} with nondeterminism off broke the deterministic variant's promise.** "
                       "Their statistics below are kept, and they are no reference.",
                       broken.size(), broken.size() == 1 ? "" : "s"));
    v.list(std::move(broken)).cap(40, "results.json");
  }
  add_failed_runs(v, runs, sources);
  std::vector<std::string> items;
  for (auto& row : jf::array(r.analysis, "table")) {
    long long n = jf::integer(row, "runs");
    if (n < 2) continue;
    bool ident = jf::boolean(row, "bitwise_identical");
    std::string c = jf::str(row, "condition"), target = inline_code(jf::str(row, "target"));
    if (c == "d" || c == "b")
      items.push_back(fmt::format("{} on {}: {} runs, {} distinct final weights, {} distinct loss curves{}", cond_name(c),
                                  target, n, jf::integer(row, "distinct_weights"), jf::integer(row, "distinct_curves"),
                                  c == "d" ? (ident ? ": bitwise identical, standard deviation exactly 0 (by hashes)"
                                                    : ": NOT identical although initial weights and determinism are fixed")
                                           : ""));
    if (c == "c")
      items.push_back(fmt::format("{} on {}: {} runs from one initial state, {} distinct outcomes: {}", cond_name(c), target,
                                  n, jf::integer(row, "distinct_weights"),
                                  ident ? "the nondeterministic variant showed no run-to-run variation here"
                                        : "library nondeterminism alone changes the trained model"));
  }
  if (!items.empty()) v.list(std::move(items)).cap(40, "results.json");
}

void add_final_loss_table(Document& d, const Results& r) {
  std::vector<std::vector<Cell>> rows;
  for (auto& row : jf::array(r.analysis, "table")) {
    auto mean = jf::number(row, "mean"), sd = jf::number(row, "std"), lo = jf::number(row, "min"), hi = jf::number(row, "max");
    auto sci = [](std::optional<double> x) { return x ? fmt::format("{:.2e}", *x) : std::string("—"); };
    rows.push_back({{cond_name(jf::str(row, "condition")), ""},
                    {inline_code(jf::str(row, "target")), ""},
                    {std::to_string(jf::integer(row, "runs")), ""},
                    {mean && sd ? fmt::format("{:.6f} ± {:.2e}", *mean, *sd) : "—", ""},
                    {sci(jf::number(row, "seed_std")), ""},
                    {sci(jf::number(row, "run_std")), ""},
                    {lo && hi ? fmt::format("{:.6f} – {:.6f}", *lo, *hi) : "—", ""},
                    {fmt::format("{} / {}", jf::integer(row, "distinct_weights"), jf::integer(row, "distinct_curves")),
                     jf::boolean(row, "bitwise_identical") ? "ok" : ""}});
  }
  d.add("Final loss by condition and target")
      .para("Mean ± sample standard deviation of the final metric, as in the paper's table, which pools two spreads: "
            "the seed spread (standard deviation of the per-seed means: initial weights) and the run-to-run spread "
            "(within a seed, pooled: what nondeterminism adds), shown apart where the design has them. The last "
            "column counts distinct final-weight and loss-curve hashes (1 / 1: every run bitwise identical).")
      .table({"condition", "target", "runs", "mean ± std", "seed std", "run-to-run std", "range",
              "distinct weights / curves"},
             rows);
  if (const auto& o = jf::object(r.analysis, "seed_overlap"); !o.empty())
    d.sections.back().para("Seeds shared across conditions: " + inline_text(jf::str(o, "note")) + ".");

  std::map<std::string, std::vector<double>> by_cond;
  for (auto& run : r.training)
    if (run.ok()) by_cond[run.condition].push_back(run.final_loss);
  std::vector<GroupValues> groups;
  for (auto& [c, vals] : by_cond) groups.push_back({cond_label(c), vals});
  if (!groups.empty()) {
    StripPlotOptions so;
    so.title = "Final loss per condition";
    so.y_label = "final loss";
    d.sections.back().svg(svg_strip_plot(groups, so), "final loss per condition");
  }
}

void add_variance_section(Document& d, const nlohmann::json& an) {
  auto& vs = d.add("Variance components");
  vs.para("Balanced crossed design, targets × seeds × replicates: y = μ + target + seed + target×seed + run-to-run. "
          "The target effect is tested by permuting target labels within seed blocks (primary) and by F = MS_target / "
          "MS_interaction; intervals come from resampling whole seed blocks.");
  for (auto& va : jf::array(an, "variance")) {
    std::string c = jf::str(va, "condition");
    if (jf::get(va, "note").is_string()) {
      vs.para(fmt::format("{}: {}", cond_name(c), inline_text(jf::str(va, "note"))));
      continue;
    }
    const auto& sh = jf::object(va, "shares");
    const auto& comp = jf::object(va, "components");
    const auto& ci = jf::object(jf::object(va, "bootstrap"), "share_ci");
    std::vector<std::vector<Cell>> vr;
    std::vector<BarItem> bars;
    for (const char* k : {"target", "seed", "interaction", "residual"}) {
      auto iv = interval(jf::get(ci, k));
      auto share = jf::number(sh, k);
      vr.push_back({{k, ""},
                    {num(jf::number(comp, k)), ""},
                    {num(share, "{:.3f}"), ""},
                    {iv ? fmt::format("[{:.3f}, {:.3f}]", iv->first, iv->second) : "—", ""}});
      BarItem b{k, share.value_or(NAN), std::nullopt, std::nullopt};
      if (iv) {
        b.lo = iv->first;
        b.hi = iv->second;
      }
      bars.push_back(b);
    }
    const auto& perm = jf::object(va, "permutation");
    const auto& anova = jf::object(va, "anova");
    // How the permutation p was obtained and the least it can be (results of older versions say neither).
    std::string how;
    if (auto n = jf::number(perm, "permutations"); n && jf::get(perm, "exact").is_boolean())
      how = fmt::format(" ({} over {:.0f} arrangements; smallest attainable p {}{})",
                        jf::get(perm, "exact").get<bool>() ? "exact" : "Monte Carlo", *n, num(jf::number(perm, "min_p")),
                        jf::get(perm, "no_power").is_boolean() && jf::get(perm, "no_power").get<bool>()
                            ? ": **no power** at 0.05, whatever the data"
                            : "");
    std::string boot_note = jf::str(jf::object(va, "bootstrap"), "note");
    vs.para(fmt::format("**{}**: {} targets × {} seeds × {} replicates. Target effect: permutation p = {}{}, F = {} (F-test "
                        "p = {}). {}{}",
                        cond_name(c), jf::array(va, "targets").size(), jf::integer(va, "seeds"),
                        jf::integer(va, "replicates"), num(jf::number(perm, "p")), how, num(jf::number(anova, "f_target")),
                        num(jf::number(anova, "p_target_f")),
                        jf::str(va, "notes").empty() ? "" : inline_text(jf::str(va, "notes")) + ".",
                        boot_note.empty() ? "" : " Intervals: " + inline_text(boot_note) + "."));
    if (std::string note = jf::str(va, "identical_note"); !note.empty()) vs.para("**Did not vary:** " + inline_text(note) + ".");
    vs.table({"component", "variance", "share", "95% CI of share"}, vr);
    BarChartOptions bo;
    bo.title = "Share of final-loss variance, " + cond_label(c);
    bo.x_label = "share";
    bo.x_max = 1.0;
    vs.svg(svg_bar_chart(bars, bo), "variance shares");
  }
}

// A power object (analysis power_json): "d = 0.31 observed; detects d ≥ 1.9 at 0.05; 0.8 at 84 seeds".
std::string power_text(const nlohmann::json& pw) {
  const auto d = jf::number(pw, "effect_d"), detect = jf::number(pw, "detectable_d");
  if (!d) return "—";
  const auto need = jf::number(pw, "n_for_power_80");
  return fmt::format("d = {:.2g} observed; detects d ≥ {} at 0.05; 0.8 at {}", *d, detect ? fmt::format("{:.2g}", *detect) : "—",
                     need ? fmt::format("{:.0f} {}", *need, jf::str(pw, "n_kind")) : std::string("no n up to 10^5"));
}

// σ²_hw's interval over runs, " [lo, hi]", or "" without one.
std::string hw_interval_text(const nlohmann::json& ci) {
  if (!ci.is_array() || ci.size() != 2 || !ci[0].is_number() || !ci[1].is_number()) return "";
  return fmt::format(" [{:.2e}, {:.2e}]", ci[0].get<double>(), ci[1].get<double>());
}

// A value or "∞" (the analysis writes an infinite end as the string "inf").
std::string ratio_text(const nlohmann::json& v) {
  if (v.is_string() && v.get<std::string>() == "inf") return "∞";
  return v.is_number() ? fmt::format("{:.3g}", v.get<double>()) : "—";
}

// (a) vs (b) and (c) vs (d): does nondeterminism add spread? (a) and (b) by σ²_run/σ²_seed with its
// F interval, (c) vs (d) by Brown–Forsythe with its permutation p, effect and power.
void add_spread_section(Document& d, const nlohmann::json& an) {
  std::vector<std::vector<Cell>> ratio_rows, bf_rows;
  auto at = [](const nlohmann::json& a, size_t i) {
    return i < a.size() && a[i].is_number() ? std::optional<double>(a[i].get<double>()) : std::nullopt;
  };
  for (auto& s : jf::array(an, "spread")) {
    const auto& runs = jf::array(s, "runs");
    const auto& sd = jf::array(s, "std");
    if (jf::str(s, "method") == "run_seed_ratio") {
      const auto& ci = jf::array(s, "ratio_ci");
      const bool est = jf::boolean(s, "estimated");
      const auto factor = jf::number(s, "interval_factor"), need = jf::number(s, "seeds_for_factor_4");
      ratio_rows.push_back(
          {{inline_code(jf::str(s, "base_target")), ""},
           {fmt::format("{:.0f} / {:.0f}", at(runs, 0).value_or(0), at(runs, 1).value_or(0)), ""},
           {fmt::format("{} × {:.3g}", jf::integer(s, "seeds"), jf::number(s, "runs_per_seed").value_or(0)), ""},
           {fmt::format("{} / {}", num(at(sd, 0), "{:.2e}"), num(at(sd, 1), "{:.2e}")), ""},
           {est ? ratio_text(jf::get(s, "ratio")) : std::string("—"), ""},
           {est && ci.size() == 2 ? fmt::format("[{}, {}]", ratio_text(ci[0]), ratio_text(ci[1])) : std::string("—"),
            ""},
           {factor
                ? fmt::format("{:.3g}×{}", *factor, need ? fmt::format("; 4× at {:.0f} seeds", *need) : std::string())
                : std::string("—"),
            factor && *factor > 4 ? "warn" : ""},
           {inline_text(jf::str(s, "notes")), ""}});
      continue;
    }
    const auto ci = interval(jf::get(s, "diff_ci"));
    const bool no_power = jf::boolean(s, "no_power");
    const auto p = jf::number(s, "p");
    bf_rows.push_back({{inline_code(jf::str(s, "base_target")), ""},
                       {fmt::format("{:.0f} / {:.0f}", at(runs, 0).value_or(0), at(runs, 1).value_or(0)), ""},
                       {fmt::format("{} / {}", num(at(sd, 0), "{:.2e}"), num(at(sd, 1), "{:.2e}")), ""},
                       {num(jf::number(s, "mean_abs_dev_diff"), "{:.2e}") +
                            (ci ? fmt::format(" [{:.2e}, {:.2e}]", ci->first, ci->second) : ""),
                        ""},
                       {num(jf::number(s, "f"), "{:.3g}"), ""},
                       {p ? fmt::format("{:.3g}{}", *p, jf::boolean(s, "exact") ? " (exact)" : "") : "—",
                        p && *p < 0.05 && !no_power ? "warn" : ""},
                       {power_text(jf::get(s, "power")), ""},
                       {no_power ? fmt::format("no power (p ≥ {:.3g})", jf::number(s, "min_p").value_or(NAN))
                                 : inline_text(jf::str(s, "notes")),
                        no_power ? "warn" : ""}});
  }
  if (ratio_rows.empty() && bf_rows.empty()) return;
  auto& sec = d.add("Does nondeterminism add spread?");
  sec.para(
      "The paper's comparisons, per base target: the final loss's spread with library nondeterminism on against "
      "off, under random initial weights ((a) vs (b)) and under fixed ones ((c) vs (d)).");
  if (!ratio_rows.empty())
    sec.para(
           "(a) and (b) share their seeds, so their runs are not exchangeable across seeds and a permutation of runs "
           "between them would ignore that. (a)'s seeds × runs table gives the run-to-run variance against the seed "
           "variance, σ²_run/σ²_seed, from a one-way random-effects ANOVA with seeds as groups, with a 95% interval "
           "from F(s − 1, ν_γ): run-to-run final losses are heavy-tailed, so MS_run gets the degrees of freedom "
           "ν_γ = 2/(2/(N − s) + γ/N) that match its variance under excess kurtosis γ (at least 5, that of a real "
           "design's errors; the notes give γ and ν_γ), where normal theory's N − s covered as little as 87%. ∞: "
           "no seed spread seen above the run spread at that end. The precision column is "
           "the design's, whatever the data: when F is large the interval's ends stand in about that ratio; it "
           "names the seeds that would bring it to 4×. (A ratio of the two conditions' sds would mostly show the "
           "design: with one run per seed in (b) and r in (a) it is about √(r(s − 1)/(rs − 1)) when runs do not "
           "vary.)")
        .table({"target", "runs (a) / (b)", "seeds × runs", "std (a) / (b)", "σ²_run/σ²_seed", "95% interval",
                "precision", "notes"},
               ratio_rows);
  if (!bf_rows.empty())
    sec.para(
           "(c) and (d) start from one set of weights, so their runs are exchangeable: Brown–Forsythe test (ANOVA of "
           "|loss − group median|) with a permutation p (exact over every split when there are at most 10^5); the "
           "effect is the difference of mean absolute deviations (with a bootstrap 95% interval when both groups "
           "have at least 8 runs); power: the effect observed in sds, the effect the test detects with power 0.8 "
           "(noncentral t, two groups), and the runs per condition at which the observed effect would be detected "
           "with power 0.8.")
        .table({"target", "runs (c) / (d)", "std", "Δ mean |dev| [95% CI]", "F", "p", "power", "notes"}, bf_rows);
}

// Every test of the design with its p, Holm-corrected together, and what each detects at its Holm level.
void add_tests_section(Document& d, const nlohmann::json& an) {
  std::vector<std::vector<Cell>> rows;
  for (auto& t : jf::array(an, "tests")) {
    const auto p = jf::number(t, "p"), holm = jf::number(t, "p_holm"), level = jf::number(t, "level");
    const auto detect = jf::number(t, "detectable_d");
    const auto& pw = jf::get(t, "power");
    const auto need = jf::number(pw, "n_for_power_80");
    std::string detects =
        jf::boolean(t, "detects_nothing")
            ? fmt::format("nothing: its smallest p, {:.3g}, is above its level", jf::number(t, "min_p").value_or(NAN))
        : detect ? fmt::format("d ≥ {:.2g}", *detect)
                 : std::string("—");
    std::string observed = jf::number(pw, "effect_d")
                               ? fmt::format("d = {:.2g}; 0.8 at {}", *jf::number(pw, "effect_d"),
                                             need ? fmt::format("{:.0f} {}", *need, jf::str(pw, "n_kind"))
                                                  : std::string("no n up to 10^5"))
                               : std::string("—");
    rows.push_back({{inline_text(jf::str(t, "test")), ""},
                    {num(p, "{:.3g}"), ""},
                    {num(holm, "{:.3g}"), holm && *holm < 0.05 ? "warn" : ""},
                    {num(level, "{:.3g}"), ""},
                    {detects, jf::boolean(t, "detects_nothing") ? "warn" : ""},
                    {observed, ""}});
  }
  auto& sec = d.add("Every test of this design");
  if (rows.empty()) {
    sec.para("No test of this design gave a p-value.");
    return;
  }
  sec
      .para(fmt::format(
          "The design asks {} question{} with a p-value; with several, one below 0.05 by chance is likely, so they are "
          "one family, Holm-corrected together here (the tables above show each p as its own test gives it, and the F "
          "p-values of the ANOVA tables are descriptive); each question is counted once (with two targets, the target "
          "effect in (a) is the guard's pair test), and the guard's attribution uses this family's p. Each test is "
          "compared with its Holm level (0.05 over the tests not yet rejected); \"detects\" is the standardized "
          "effect it detects with power 0.8 at that level (noncentral t, paired within seeds or two groups), or "
          "nothing where its smallest attainable p is above the level. The observed effect and the seeds or runs "
          "that would detect it with power 0.8 stand beside it.",
          rows.size(), rows.size() == 1 ? "" : "s"))
      .table({"test", "p", "p (Holm, whole design)", "Holm level", "detects (power 0.8)", "observed effect"}, rows);
}

// One panel per condition, one series per finished run coloured by its target (with its source in a
// merged analysis); `series` fills a run's x and y, or returns false to leave the run out.
std::vector<Facet> facets_by_condition(const Results& r, const std::vector<TrainingSource>& sources,
                                       const std::function<bool(const TrainingRun&, PlotSeries*)>& series) {
  std::map<std::string, Facet> by_cond;
  const bool merged = sources.size() > 1;
  for (auto& run : r.training) {
    PlotSeries s;
    if (!run.ok() || !series(run, &s)) continue;
    s.group = merged && size_t(run.source) < sources.size() ? run.target + " @ " + sources[size_t(run.source)].label
                                                             : run.target;
    auto& f = by_cond[run.condition];
    f.title = cond_label(run.condition);
    f.series.push_back(std::move(s));
  }
  std::vector<Facet> facets;
  for (auto& [c, f] : by_cond) facets.push_back(std::move(f));
  return facets;
}

// The width and height of a base64 PNG, from its IHDR chunk (bytes 16..23: base64 characters 0..31).
bool png_size(const std::string& b64, int* w, int* h) {
  std::vector<uint8_t> head;
  if (b64.size() < 32 || !base64_decode(b64.substr(0, 32), &head) || head[0] != 0x89 || head[1] != 'P') return false;
  auto be32 = [&](size_t at) { return uint32_t(head[at]) << 24 | uint32_t(head[at + 1]) << 16 | uint32_t(head[at + 2]) << 8 | head[at + 3]; };
  const uint32_t cw = be32(16), ch = be32(20);
  if (cw < 1 || ch < 1 || cw > 16384 || ch > 16384) return false;
  *w = int(cw), *h = int(ch);
  return true;
}

// PredNet: the next-frame check on held-out sequences against copying the last frame, and one
// sequence's true and predicted frames per condition (the first finished run with them).
void add_prediction_section(Document& d, const Results& r) {
  struct Row {
    std::vector<double> mse, copy;
    int beats = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  std::map<std::string, const TrainingRun*> example;
  for (auto& run : r.training) {
    if (!run.ok() || !run.prediction) continue;
    Row& row = rows[{run.condition, run.target}];
    row.mse.push_back(run.prediction->mse);
    row.copy.push_back(run.prediction->copy_last_mse);
    row.beats += run.prediction->mse < run.prediction->copy_last_mse;
    if (!run.frames_png.empty()) example.try_emplace(run.condition, &run);
  }
  if (rows.empty()) return;
  std::vector<std::vector<Cell>> cells;
  for (auto& [k, row] : rows) {
    const double m = mean(row.mse), c = mean(row.copy);
    cells.push_back({{cond_name(k.first), ""},
                     {inline_code(k.second), ""},
                     {std::to_string(row.mse.size()), ""},
                     {fmt::format("{:.5f}", m), ""},
                     {fmt::format("{:.5f}", c), ""},
                     {fmt::format("{} of {}", row.beats, row.mse.size()), row.beats == int(row.mse.size()) ? "ok" : "warn"}});
  }
  auto& sec = d.add("Next-frame prediction (PredNet)");
  sec.para("Held-out moving-sprites sequences (never trained on): the mean squared error of PredNet's predictions of "
           "frames 1 to nt−1, each from the frames before it, against the error of copying the last frame, the "
           "sanity baseline a video predictor must beat. Pixels in [0, 1].")
      .table({"condition", "target", "runs", "prediction MSE", "copy-last-frame MSE", "beat copy-last"}, cells);
  for (auto& [cond, run] : example) {
    int w = 0, h = 0;
    if (!png_size(run->frames_png, &w, &h)) continue;
    const int scale = std::max(1, 800 / w), label = 90, iw = w * scale, ih = h * scale;
    const std::string which =
        fmt::format("{}: {} seed {} rep {}", cond_label(cond), run->target, run->seed, run->replicate);
    // Which run it is, over the strip; "true" and "predicted" beside its two rows of frames.
    sec.para(inline_text(which + ": one held-out sequence, true frames over PredNet's predictions")).html_only();
    sec.svg(
        fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">"
                    "<title>{2}</title>"
                    "<text x=\"4\" y=\"{4}\" font-family=\"sans-serif\" font-size=\"13\">true</text>"
                    "<text x=\"4\" y=\"{5}\" font-family=\"sans-serif\" font-size=\"13\">predicted</text>"
                    "<image x=\"{6}\" width=\"{7}\" height=\"{1}\" style=\"image-rendering:pixelated\" "
                    "href=\"data:image/png;base64,{3}\"/></svg>",
                    iw + label, ih, svg_escape(which), run->frames_png, ih / 4 + 5, 3 * ih / 4 + 5, label, iw),
        fmt::format("{}: one held-out sequence, true frames (top) and PredNet's predictions (bottom)", which));
  }
}

// Condition (e) beside (c) and the seed spread (b).
void add_one_ulp_section(Document& d, const nlohmann::json& an) {
  std::vector<std::vector<Cell>> rows;
  for (auto& e : jf::array(an, "one_ulp")) {
    std::string tests;
    bool warn = false;
    for (auto& t : jf::array(e, "tests")) {
      const auto p = jf::number(t, "p");
      const bool no_power = jf::boolean(t, "no_power");
      tests += fmt::format("{}(e) vs ({}): p {}{}", tests.empty() ? "" : "; ", inline_text(jf::str(t, "against")),
                           num(p), no_power ? fmt::format(" (no power: p ≥ {:.3g})", jf::number(t, "min_p").value_or(NAN)) : "");
      warn = warn || no_power;
    }
    const long long runs = jf::integer(e, "runs");
    rows.push_back({{inline_code(jf::str(e, "base_target")), ""},
                    {std::to_string(runs), ""},
                    {num(jf::number(e, "std_e"), "{:.2e}"), ""},
                    {num(jf::number(e, "std_c"), "{:.2e}"), ""},
                    {num(jf::number(e, "std_b"), "{:.2e}"), ""},
                    {fmt::format("{} of {} ({} like (d))", jf::integer(e, "distinct_weights"), runs,
                                 jf::integer(e, "same_weights_as_d")),
                     ""},
                    {tests, warn ? "warn" : ""}});
  }
  if (rows.empty()) return;
  d.add("One-ULP sensitivity (e)")
      .para("Condition (e) trains the deterministic variant from the fixed initial weights of (d) with one kernel weight "
            "moved by one ULP, a different weight in every run (the same weight on every target). Summers & Dinneen "
            "(2021) found that this alone spreads trained models as much as all sources of nondeterminism together. "
            "Its standard deviation of the final loss stands beside (c) (fixed weights, nondeterminism on) and (b) "
            "(different initial weights: the seed spread); the tests are Brown–Forsythe with a permutation p, and "
            "with a handful of runs per condition a p above 0.05 says little (see each test's smallest possible p). "
            "\"like (d)\" counts (e) runs that ended in (d)'s final weights: one ULP that training washed out.")
      .table({"target", "runs (e)", "std (e)", "std (c)", "seed std (b)", "distinct final weights (e)", "tests"}, rows);
}

// The gradient noise scale along training and the hardware noise beside it (train --noise-scale).
void add_noise_section(Document& d, const Results& r, const std::vector<TrainingSource>& sources) {
  const nlohmann::json& n = jf::object(r.analysis, "noise");
  if (n.empty()) return;
  const double decay = jf::number(n, "decay").value_or(kNoiseEmaDecay);
  auto& sec = d.add("Gradient noise scale and hardware noise");
  sec.para(fmt::format(
      "B_simple = tr(Σ)/|G|² (McCandlish et al. 2018): the batch size at which SGD's own noise is as large as its "
      "signal. At every measured batch, before its update, the batch's gradient and those of its microbatches give "
      "unbiased estimates of |G|² and tr(Σ); each is smoothed by its own bias-corrected moving average (decay {}, one "
      "point per measured batch) and B_simple is their ratio. \"Start\" is after the first fifth of a run's points and "
      "at least 3 (a run of fewer than 4 points has only its first, raw, point there), \"end\" after the last. One row "
      "per target and condition: runs that share initial weights are not independent, so each value is the median "
      "over distinct initial weights of the median over that init's runs. Measuring restores the batch's own gradient "
      "before the update, so the runs' bits are those of an unmeasured run.",
      decay));
  std::vector<std::vector<Cell>> rows;
  for (auto& u : jf::array(n, "units")) {
    const int64_t sp = jf::integer(u, "start_points");
    rows.push_back(
        {{inline_code(jf::str(u, "target")), ""},
         {cond_name(jf::str(u, "condition")), ""},
         {fmt::format("{} ({} init{})", jf::integer(u, "runs"), jf::integer(u, "distinct_inits"),
                      jf::integer(u, "distinct_inits") == 1 ? "" : "s"),
          ""},
         {fmt::format("every {}, B {} / {}", jf::integer(u, "every"), jf::integer(u, "batch"),
                      jf::integer(u, "b_small")),
          ""},
         {sp <= 1 ? std::string("first point") : fmt::format("after {} points", sp), sp <= 1 ? "warn" : ""},
         {fmt::format("{} → {}", num(jf::number(u, "b_simple_start")), num(jf::number(u, "b_simple_end"))), ""},
         {fmt::format("{} → {}", num(jf::number(u, "g2_start")), num(jf::number(u, "g2_end"))), ""},
         {fmt::format("{} → {}", num(jf::number(u, "trace_start")), num(jf::number(u, "trace_end"))), ""},
         {fmt::format("{} rising, {} falling{}", jf::integer(u, "runs_rising"), jf::integer(u, "runs_falling"),
                      jf::integer(u, "undefined_points")
                          ? fmt::format("; {} points undefined (EMA of |G|² ≤ 0)", jf::integer(u, "undefined_points"))
                          : ""),
          ""}});
  }
  sec.table({"target", "condition", "runs (distinct inits)", "measured (batch / microbatch)", "start",
             "B_simple start → end", "|G|² start → end", "tr(Σ) start → end", "trend over training"},
            rows);
  // B_simple along training: one panel per condition, coloured by target.
  std::vector<Facet> facets = facets_by_condition(r, sources, [&](const TrainingRun& run, PlotSeries* s) {
    if (!run.noise || run.noise->points.empty()) return false;
    const NoiseSeries ns = noise_series(*run.noise, decay);
    s->x = ns.step;
    s->y = ns.b_simple;
    return true;
  });
  if (!facets.empty()) {
    FacetOptions fo;
    fo.title = "B_simple along training, every run, one panel per condition";
    fo.x_label = "batch";
    fo.y_label = "B_simple";
    fo.log_y = true;
    sec.svg(svg_faceted_line_plot(facets, fo), "B_simple along training, one panel per condition, coloured by target");
  }
  sec.para("B_crit: " + inline_text(jf::str(n, "b_crit")) + ".");

  std::vector<std::vector<Cell>> hw;
  for (auto& h : jf::array(n, "hardware")) {
    const bool identical = jf::boolean(h, "identical");
    const auto b_hw = jf::number(h, "b_hw");
    const int64_t examples = jf::integer(h, "examples");
    std::string b_cell = identical ? std::string("∞") : num(b_hw, "{:.3e}");
    if (!identical && jf::boolean(h, "b_hw_beyond_data"))
      b_cell = fmt::format("beyond the {} examples: below SGD noise at every batch size below {}", examples, examples);
    hw.push_back(
        {{inline_code(jf::str(h, "target")), ""},
         {cond_name(jf::str(h, "condition")), ""},
         {identical ? std::string("0") : num(jf::number(h, "r"), "{:.3e}"), ""},
         {fmt::format("{} ({} differed; {} init{})", jf::integer(h, "pairs"), jf::integer(h, "nonzero_pairs"),
                      jf::integer(h, "distinct_inits"), jf::integer(h, "distinct_inits") == 1 ? "" : "s"),
          ""},
         {identical ? std::string("0 (exactly)")
                    : num(jf::number(h, "sigma2_hw"), "{:.3e}") + hw_interval_text(jf::get(h, "sigma2_hw_ci")),
          identical ? "ok" : ""},
         {num(jf::number(h, "trace"), "{:.3e}"), ""},
         {std::to_string(jf::integer(h, "batch")), ""},
         {b_cell, ""},
         {inline_text(jf::str(h, "note")), ""}});
  }
  if (!hw.empty())
    sec.para(
           "Run-to-run noise against SGD noise, one row per target and condition. At up to six measured batches of "
           "every run (evenly spread) the same gradient was computed again, at the same weights on the same batch, "
           "on the same device: σ²_hw = E|g1 − g2|²/2 (the mean over those repeats; in brackets its 95% t interval over "
           "runs, each run's mean one estimate, from 2 runs on). It is the implementation's "
           "run-to-run noise (for a CPU target with order=atomic, its sums' order following thread timing), not a "
           "property of the hardware alone. The headline is R = σ²_hw·B/tr(Σ): that noise as a fraction of SGD's own "
           "at the trained batch size B. B_hw = tr(Σ)/σ²_hw is the batch size at which SGD's noise would be as small; "
           "it is shown only when the training set has that many examples, else \"beyond the N examples\": SGD's noise "
           "is larger at every batch size below N (a full batch, B = N, has no sampling noise). A deterministic target gives the same bits every time: σ²_hw is "
           "exactly 0 and B_hw infinite.")
        .table({"target", "condition", "R", "repeats", "σ²_hw", "tr(Σ)", "B", "B_hw", "note"}, hw);
}

void add_confounding_section(Document& d, const nlohmann::json& an) {
  std::vector<std::vector<Cell>> gr;
  auto pair_of = [](const nlohmann::json& g, const char* k, size_t i) {
    const auto& a = jf::array(g, k);
    return i < a.size() && a[i].is_string() ? a[i].get<std::string>() : std::string("?");
  };
  for (auto& g : jf::array(an, "confounding")) {
    const auto& test = jf::object(g, "test");
    const auto p = jf::number(test, "p");
    std::string ptext =
        p ? fmt::format("{:.3g}, Holm {:.3g}{}", *p, jf::number(g, "p_holm").value_or(NAN),
                        jf::boolean(test, "no_power")
                            ? fmt::format(" (no power: p ≥ {:.3g})", jf::number(test, "min_p").value_or(NAN))
                            : "")
          : inline_text(jf::str(test, "notes", "—"));
    // The effect: the mean per-seed difference with its 95% interval, in seed and run-to-run sds.
    const auto& e = jf::object(g, "effect");
    if (auto md = jf::number(e, "mean_difference")) {
      const auto& ci = jf::array(e, "ci95");
      ptext += fmt::format("; difference {:.3g}", *md);
      if (ci.size() == 2 && ci[0].is_number() && ci[1].is_number())
        ptext += fmt::format(" [{:.3g}, {:.3g}]", ci[0].get<double>(), ci[1].get<double>());
      if (auto s = jf::number(e, "in_seed_sd")) ptext += fmt::format(", {:.2g} seed sd", *s);
      if (auto r = jf::number(e, "in_run_sd")) ptext += fmt::format(", {:.2g} run-to-run sd", *r);
    }
    std::vector<std::string> bits;
    for (auto& bw : jf::array(g, "bitwise"))
      if (jf::integer(bw, "seeds") > 0)
        bits.push_back(fmt::format("({}) {} of {}", inline_text(jf::str(bw, "condition")), jf::integer(bw, "identical_seeds"),
                                   jf::integer(bw, "seeds")));
    std::string could = inline_text(jf::str(g, "could_be"));
    if (std::string diff = jf::str(g, "implementation_differs"); !diff.empty())
      could += " (implementation differs: " + inline_text(diff) + ")";
    gr.push_back({{inline_code(pair_of(g, "targets", 0)) + " vs " + inline_code(pair_of(g, "targets", 1)), ""},
                  {inline_text(pair_of(g, "hardware", 0)) + " / " + inline_text(pair_of(g, "hardware", 1)), ""},
                  {could, jf::str(g, "kind") == "both" ? "warn" : ""},
                  {ptext, ""},
                  {(bits.empty() ? std::string("—") : fmt::format("{}", fmt::join(bits, ", "))) +
                       (jf::object(g, "deterministic").empty()
                            ? std::string()
                            : ": " + inline_text(jf::str(jf::object(g, "deterministic"), "attributable_to"))),
                   ""},
                  {inline_text(jf::str(g, "attributable_to")), ""}});
  }
  const std::string hw = jf::str(an, "hardware_attribution");
  if (gr.empty() && hw.empty()) return;
  auto& s = d.add("What a target effect could be attributed to");
  s.para(
      "A difference between targets is called a hardware effect only when the implementation (the target without "
      "its device index, the versions of the libraries its bits depend on, detaudit's version and commit) is "
      "identical, and an implementation effect only when the hardware is; when both change it is confounded. The "
      "implementation includes the build that selects the code (compiler, C library, the ISA or core dispatched "
      "to): when only that differs besides the hardware, the finding is \"hardware or build\", never hardware. "
      "Only a significant difference is attributed: each pair is tested in (a) by permuting its two labels within "
      "seed blocks, and the p-values of all pairs are corrected together (Holm). The effect is the mean per-seed "
      "difference with its 95% interval, also in units of the seed sd and the run-to-run sd. \"Same bits\" counts the "
      "seeds whose deterministic runs in (b) and (d) ended in "
      "bitwise-identical final weights on both. (The paper this design comes from was retracted because its "
      "CPU/GPU gap came from the framework, not the hardware.)");
  if (!hw.empty()) s.para("**Hardware:** " + inline_text(hw));
  if (!gr.empty())
    s.table({"targets", "hardware", "a difference could be", "pair test p (a) and effect",
             "same bits (deterministic variants)", "attributed to (a)"},
            gr);
}

void add_curves_section(Document& d, const Results& r, const std::vector<TrainingSource>& sources) {
  // One panel per condition on shared axes, curves coloured by target: in one panel the four
  // conditions' curves lie on top of each other and read as one colour.
  std::vector<Facet> facets = facets_by_condition(r, sources, [](const TrainingRun& run, PlotSeries* s) {
    s->y = run.curve;
    return true;
  });
  auto& cs = d.add("Learning curves and phases");
  if (!facets.empty()) {
    FacetOptions fo;
    fo.title = "Loss per batch, every run, one panel per condition";
    fo.x_label = "batch";
    fo.y_label = "loss";
    fo.log_x = true;
    fo.log_y = true;
    cs.svg(svg_faceted_line_plot(facets, fo), "learning curves, one panel per condition, coloured by target");
  }
  std::vector<std::vector<Cell>> pr;
  for (auto& [c, s] : jf::object(r.analysis, "phases").items()) {
    std::string labels;
    for (auto& [l, n] : jf::object(s, "labels").items())
      labels += fmt::format("{} {}; ", inline_text(l), n.is_number_integer() ? n.get<long long>() : 0);
    auto median = jf::number(s, "escape_median"), q25 = jf::number(s, "escape_q25"), q75 = jf::number(s, "escape_q75");
    const auto nearest = jf::number(s, "nearest_margin");
    pr.push_back(
        {{cond_name(c), ""},
         {std::to_string(jf::integer(s, "runs")), ""},
         {labels, ""},
         {nearest ? fmt::format("{:+.3f}", *nearest) : std::string("—"), ""},
         {fmt::format("{} escaped, {} censored", jf::integer(s, "escaped"), jf::integer(s, "censored")), ""},
         {median ? fmt::format("{:.0f} [{}, {}]", *median, num(q25, "{:.0f}"), num(q75, "{:.0f}")) : "—", ""}});
  }
  const PhaseOptions po;
  cs
      .para(fmt::format(
          "Piecewise-linear segmentation of log loss against log step; a plateau followed by a drop is biphasic, "
          "drop-plateau-drop triphasic; the escape step is where the loss leaves its first plateau for good. A "
          "plateau is flat (|slope| below {}) over at least {:.0f}% of the steps; a curve of fewer than {} steps is "
          "too short to tell. The nearest margin is the first segment's distance from the slope rule over the "
          "condition's runs ({} − |slope|: positive flat by that much, negative too steep): near 0, a near-identical "
          "curve could get the other label.",
          po.plateau_max_abs_slope, 100.0 * po.plateau_min_step_share, po.min_steps, po.plateau_max_abs_slope))
      .table({"condition", "runs", "labels", "nearest margin", "plateau escapes", "escape step median [IQR]"}, pr);
}

// A merged analysis (detaudit analyze): where each source's runs came from.
void add_sources_section(Document& d, const Results& r, const std::vector<TrainingSource>& sources) {
  if (sources.size() < 2) return;
  std::vector<std::vector<Cell>> rows;
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto& s = sources[i];
    std::vector<std::string> gpus;
    for (auto& g : jf::array(s.machine, "gpus")) gpus.push_back(inline_text(jf::str(g, "name")));
    size_t runs = 0;
    for (auto& run : r.training) runs += size_t(run.source) == i;
    rows.push_back({{std::to_string(i), ""},
                    {inline_text(s.label), ""},
                    {inline_code(s.dir), ""},
                    {inline_text(jf::str(s.machine, "cpu_model")), ""},
                    {gpus.empty() ? std::string("—") : fmt::format("{}", fmt::join(gpus, ", ")), ""},
                    {inline_text(s.tool_version + " (" + s.tool_commit + ")"), ""},
                    {std::to_string(runs), ""}});
  }
  d.add("Merged results")
      .para("This analysis merges training runs of one design from several results directories (detaudit analyze). "
            "A target on one source is one level of the target factor, labelled \"target @ source\"; the machine "
            "is therefore a factor, and two sources are two devices even when their models agree.")
      .table({"source", "label", "directory", "CPU", "GPUs", "detaudit", "runs"}, rows);
}

}  // namespace

// Every field is read through json_fields: results.json is checked when it is loaded, and the
// analysis is free-form, so a field of an unexpected type shows as "—" instead of stopping the report.
void add_train_sections(Document& d, const Results& r) {
  const std::vector<TrainingSource> sources = training_sources(r.plan, r.machine, r.tool_version, r.tool_commit);
  add_sources_section(d, r, sources);
  add_train_verdict(d, r, sources);
  if (r.training.empty()) return;  // stopped before its first run: the verdict says so, and there is nothing to tabulate
  add_final_loss_table(d, r);
  add_variance_section(d, r.analysis);
  add_spread_section(d, r.analysis);
  add_one_ulp_section(d, r.analysis);
  add_confounding_section(d, r.analysis);
  add_tests_section(d, r.analysis);
  add_curves_section(d, r, sources);
  add_noise_section(d, r, sources);
  add_prediction_section(d, r);
}

Document build_report(const Results& r) {
  // The plan says the kind: a design stopped before its first run is a training design's report with no runs yet, not
  // a probe's of no cells.
  const bool training = is_training_plan(r.plan) || !r.training.empty();
  Document d;
  d.title = training ? "detaudit training report" : "detaudit probe report";
  add_run_lines(d, r);
  if (!training || !r.observations.empty()) add_probe_sections(d, r);
  if (training) add_train_sections(d, r);
  // A merged analysis has one machine per source: its "Merged results" section lists them.
  const auto* src = r.plan.is_object() && r.plan.contains("sources") ? &r.plan["sources"] : nullptr;
  if (r.training.empty() || !src || !src->is_array() || src->size() < 2) add_machine_section(d, r.machine);
  return d;
}

Status write_reports(const std::string& dir, const Results& r, bool md, bool html) {
  DETAUDIT_RETURN_IF_ERROR(not_a_fleet_directory(dir));
  Document d = build_report(r);
  // Both destinations are checked before either is written; a report not asked for is left alone, link or not.
  if (md) DETAUDIT_RETURN_IF_ERROR(check_destination(dir + "/report.md", Own::kReport));
  if (html) DETAUDIT_RETURN_IF_ERROR(check_destination(dir + "/report.html", Own::kReport));
  if (md) DETAUDIT_RETURN_IF_ERROR(write_file_atomic(dir + "/report.md", render_markdown(d), Own::kReport));
  if (html) DETAUDIT_RETURN_IF_ERROR(write_file_atomic(dir + "/report.html", render_html(d), Own::kReport));
  return Status::ok();
}

}  // namespace detaudit
