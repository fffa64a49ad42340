#include "report/train_report.hpp"

#include <map>

#include <fmt/format.h>

#include "report/probe_report.hpp"
#include "report/svg.hpp"

namespace detaudit {

namespace {

std::string cond_name(const std::string& c) {
  if (c == "a") return "(a) random init, nondeterminism on";
  if (c == "b") return "(b) random init, nondeterminism off";
  if (c == "c") return "(c) fixed init, nondeterminism on";
  if (c == "d") return "(d) fixed init, nondeterminism off";
  return c;
}

std::string num(const nlohmann::json& j, const char* fmtstr = "{:.3g}") {
  if (!j.is_number()) return "—";
  return fmt::format(fmt::runtime(fmtstr), j.get<double>());
}

}  // namespace

void add_train_sections(Document& d, const Results& r) {
  const auto& runs = r.training;
  const auto& an = r.analysis;
  int ok = 0, failed = 0;
  for (auto& run : runs) (run.value("status", "") == "ok" ? ok : failed)++;

  // ---- verdict ---------------------------------------------------------------------------------
  auto& v = d.add("Training verdict");
  auto design = r.plan.value("design", nlohmann::json::object());
  v.para(fmt::format("Design `{}` on model `{}`: {} runs finished, {} skipped or failed; {} seeds, {} batches, final "
                     "metric = mean loss of the last {} batches.",
                     design.value("design", ""), design.value("model", ""), ok, failed, design.value("seeds", 0),
                     design.value("batches", 0), design.value("window", 0)));
  std::vector<std::string> items;
  for (auto& row : an.value("table", nlohmann::json::array())) {
    if (row.value("runs", 0) < 2) continue;
    bool ident = row.value("bitwise_identical", false);
    std::string c = row.value("condition", "");
    if (c == "d" || c == "b")
      items.push_back(fmt::format("{} on `{}`: {} runs, {} distinct final weights, {} distinct loss curves{}", cond_name(c),
                                  row.value("target", ""), row.value("runs", 0), row.value("distinct_weights", 0),
                                  row.value("distinct_curves", 0),
                                  c == "d" ? (ident ? ": bitwise identical, standard deviation exactly 0 (by hashes)"
                                                    : ": NOT identical although initial weights and determinism are fixed")
                                           : ""));
    if (c == "c")
      items.push_back(fmt::format("{} on `{}`: {} runs from one initial state, {} distinct outcomes: {}", cond_name(c),
                                  row.value("target", ""), row.value("runs", 0), row.value("distinct_weights", 0),
                                  ident ? "the nondeterministic variant showed no run-to-run variation here"
                                        : "library nondeterminism alone changes the trained model"));
  }
  for (auto& run : runs)
    if (run.value("status", "") != "ok")
      items.push_back(fmt::format("{}: `{}` ({}) seed {}: {}", run.value("status", ""), run.value("target", ""),
                                  run.value("condition", ""), run.value("seed", 0), run.value("reason", "")));
  if (items.size() > 40) {
    size_t more = items.size() - 40;
    items.resize(40);
    items.push_back(fmt::format("... and {} more (see results.json)", more));
  }
  if (!items.empty()) v.list(items);

  // ---- table -----------------------------------------------------------------------------------
  std::vector<std::vector<Cell>> rows;
  for (auto& row : an.value("table", nlohmann::json::array()))
    rows.push_back({{cond_name(row.value("condition", "")), ""},
                    {"`" + row.value("target", "") + "`", ""},
                    {std::to_string(row.value("runs", 0)), ""},
                    {row.contains("mean") ? fmt::format("{:.6f} ± {:.2e}", row["mean"].get<double>(), row["std"].get<double>())
                                          : "—",
                     ""},
                    {row.contains("min") ? fmt::format("{:.6f} – {:.6f}", row["min"].get<double>(), row["max"].get<double>()) : "—",
                     ""},
                    {fmt::format("{} / {}", row.value("distinct_weights", 0), row.value("distinct_curves", 0)),
                     row.value("bitwise_identical", false) ? "ok" : ""}});
  d.add("Final loss by condition and target")
      .para("Mean ± sample standard deviation of the final metric, as in the paper's table; the last column counts "
            "distinct final-weight and loss-curve hashes (1 / 1: every run bitwise identical).")
      .table({"condition", "target", "runs", "mean ± std", "range", "distinct weights / curves"}, rows);

  std::map<std::string, std::vector<double>> by_cond;
  for (auto& run : runs)
    if (run.value("status", "") == "ok") by_cond[run["condition"].get<std::string>()].push_back(run["final_loss"].get<double>());
  std::vector<GroupValues> groups;
  for (auto& [c, vals] : by_cond) groups.push_back({cond_name(c), vals});
  if (!groups.empty()) {
    StripPlotOptions so;
    so.title = "Final loss per condition";
    so.y_label = "final loss";
    d.sections.back().svg(svg_strip_plot(groups, so), "final loss per condition");
  }

  // ---- variance ---------------------------------------------------------------------------------
  auto& vs = d.add("Variance components");
  vs.para("Balanced crossed design, targets × seeds × replicates: y = μ + target + seed + target×seed + run-to-run. "
          "The target effect is tested by permuting target labels within seed blocks (primary) and by F = MS_target / "
          "MS_interaction; intervals come from resampling whole seed blocks.");
  for (auto& va : an.value("variance", nlohmann::json::array())) {
    std::string c = va.value("condition", "");
    if (va.contains("note")) {
      vs.para(fmt::format("{}: {}", cond_name(c), va["note"].get<std::string>()));
      continue;
    }
    auto sh = va["shares"], comp = va["components"];
    auto ci = va.value("bootstrap", nlohmann::json::object()).value("share_ci", nlohmann::json::object());
    std::vector<std::vector<Cell>> vr;
    std::vector<BarItem> bars;
    for (const char* k : {"target", "seed", "interaction", "residual"}) {
      std::string ci_text = ci.contains(k) ? fmt::format("[{:.3f}, {:.3f}]", ci[k][0].get<double>(), ci[k][1].get<double>()) : "—";
      vr.push_back({{k, ""}, {num(comp[k]), ""}, {fmt::format("{:.3f}", sh[k].get<double>()), ""}, {ci_text, ""}});
      BarItem b{k, sh[k].get<double>(), std::nullopt, std::nullopt};
      if (ci.contains(k)) {
        b.lo = ci[k][0].get<double>();
        b.hi = ci[k][1].get<double>();
      }
      bars.push_back(b);
    }
    auto perm = va.value("permutation", nlohmann::json::object());
    auto anova = va.value("anova", nlohmann::json::object());
    vs.para(fmt::format("**{}**: {} targets × {} seeds × {} replicates. Target effect: permutation p = {}, F = {} (F-test p = {}). {}",
                        cond_name(c), va["targets"].size(), va.value("seeds", 0), va.value("replicates", 0),
                        num(perm.value("p", nlohmann::json())), num(anova.value("f_target", nlohmann::json())),
                        num(anova.value("p_target_f", nlohmann::json())), va.value("notes", "")));
    vs.table({"component", "variance", "share", "95% CI of share"}, vr);
    BarChartOptions bo;
    bo.title = "Share of final-loss variance, " + cond_name(c);
    bo.x_label = "share";
    bo.x_max = 1.0;
    vs.svg(svg_bar_chart(bars, bo), "variance shares");
  }

  // ---- confounding -----------------------------------------------------------------------------
  std::vector<std::vector<Cell>> gr;
  for (auto& g : an.value("confounding", nlohmann::json::array()))
    gr.push_back({{"`" + g["targets"][0].get<std::string>() + "` vs `" + g["targets"][1].get<std::string>() + "`", ""},
                  {g["hardware"][0].get<std::string>() + " / " + g["hardware"][1].get<std::string>(), ""},
                  {g.value("attributable_to", ""), g.value("kind", "") == "both" ? "warn" : ""}});
  if (!gr.empty())
    d.add("What a target effect could be attributed to")
        .para("A difference between targets is called a hardware effect only when the implementation is identical, and "
              "an implementation effect only when the hardware is; when both change it is confounded. (The paper this "
              "design comes from was retracted because its CPU/GPU gap came from the framework, not the hardware.)")
        .table({"targets", "hardware", "attributable to"}, gr);

  // ---- curves and phases -----------------------------------------------------------------------
  std::vector<PlotSeries> series;
  for (auto& run : runs)
    if (run.value("status", "") == "ok")
      series.push_back({cond_name(run["condition"].get<std::string>()), {}, run["curve"].get<std::vector<double>>()});
  auto& cs = d.add("Learning curves and phases");
  if (!series.empty()) {
    LinePlotOptions lo;
    lo.title = "Loss per batch, every run";
    lo.x_label = "batch";
    lo.y_label = "loss";
    lo.log_x = true;
    lo.log_y = true;
    cs.svg(svg_line_plot(series, lo), "learning curves coloured by condition");
  }
  std::vector<std::vector<Cell>> pr;
  const nlohmann::json phases = an.value("phases", nlohmann::json::object());  // items() must not outlive it
  for (auto& [c, s] : phases.items()) {
    std::string labels;
    for (auto& [l, n] : s["labels"].items()) labels += fmt::format("{} {}; ", l, n.get<int>());
    pr.push_back({{cond_name(c), ""},
                  {std::to_string(s.value("runs", 0)), ""},
                  {labels, ""},
                  {fmt::format("{} escaped, {} censored", s.value("escaped", 0), s.value("censored", 0)), ""},
                  {s["escape_median"].is_number()
                       ? fmt::format("{:.0f} [{:.0f}, {:.0f}]", s["escape_median"].get<double>(), s["escape_q25"].get<double>(),
                                     s["escape_q75"].get<double>())
                       : "—",
                   ""}});
  }
  cs.para("Piecewise-linear segmentation of log loss against log step; a plateau followed by a drop is biphasic, "
          "drop-plateau-drop triphasic; the escape step is where the loss leaves its first plateau for good.")
      .table({"condition", "runs", "labels", "plateau escapes", "escape step median [IQR]"}, pr);
}

Document build_report(const Results& r) {
  if (!r.observations.empty() || r.training.empty()) {
    Document d = build_probe_document(r);  // ends with the machine
    if (!r.training.empty()) add_train_sections(d, r);
    return d;
  }
  Document d;
  d.title = "detaudit training report";
  add_train_sections(d, r);
  add_machine_section(d, r.machine);
  return d;
}

bool write_reports(const std::string& dir, const Results& r, std::string* err, bool md, bool html) {
  Document d = build_report(r);
  return (!md || write_file_atomic(dir + "/report.md", render_markdown(d), err)) &&
         (!html || write_file_atomic(dir + "/report.html", render_html(d), err));
}

}  // namespace detaudit
