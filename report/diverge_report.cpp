#include "report/diverge_report.hpp"

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/document.hpp"
#include "report/svg.hpp"
#include "contract/atomic_file.hpp"
#include "contract/metrics.hpp"

namespace detaudit {

// ---- outputs ---------------------------------------------------------------------------------------------

namespace {

std::vector<Cell> row(std::vector<std::string> texts) {
  std::vector<Cell> r;
  for (auto& t : texts) r.push_back({std::move(t), ""});
  return r;
}

// "order=atomic, threads=2, isa=avx2": what decides the reduction order or algorithm of a target.
std::string settings(const DivergeSide& s) {
  std::vector<std::string> v;
  for (auto& [k, x] : s.details) v.push_back(k + "=" + x);
  return v.empty() ? std::string("(none reported)") : fmt::format("{}", fmt::join(v, ", "));
}

std::string ulp_text(uint64_t u) { return u == kUlpInfinite ? std::string("inf (NaN against a number)") : std::to_string(u); }

void first_section(Document& doc, const DivergeResult& r) {
  Section& s = doc.add("First divergence");
  if (!r.first) {
    s.para(fmt::format("Every record of every step was bit-identical on both runs ({} records per run).", r.records),
           "ok");
    return;
  }
  const FirstDivergence& f = *r.first;
  std::vector<std::vector<Cell>> rows = {row({"step", std::to_string(f.a.step)}),
                                         row({"layer", fmt::format("{} ({})", f.a.layer, inline_text(f.a.name))}),
                                         row({"pass", inline_text(f.a.pass)}),
                                         row({"tensor", inline_code(f.a.tensor)}),
                                         row({"op", inline_text(f.op.op)}),
                                         row({"elements", std::to_string(f.a.count)}),
                                         row({"identical records before it", std::to_string(f.equal_before)}),
                                         row({"fingerprint A", inline_code(f.a.fp.hex())}),
                                         row({"fingerprint B", inline_code(f.b.fp.hex())})};
  if (f.distance) {
    rows.push_back(row({"elements that differ", std::to_string(f.distance->mismatched)}));
    rows.push_back(row({"max ULP distance", ulp_text(f.distance->max_ulp)}));
    rows.push_back(row({"relative L2 distance", fmt::format("{:.3g}", f.distance->rel_l2)}));
  }
  rows.push_back(row({"reduction order / algorithm A", inline_text(settings(r.a))}));
  rows.push_back(row({"reduction order / algorithm B", inline_text(settings(r.b))}));
  s.table({"", ""}, rows);
  s.para("Records run in execution order and every earlier record matched bit for bit, so this op's inputs were "
         "identical on both runs and its output is where they part.");
  if (!f.distance)
    s.para("Offline comparison of two traces: fingerprints only (traces hold no tensors), so no ULP or relative "
           "distance. Run both targets in one `detaudit diverge --targets A,B` for distances.");
  if (!f.kernels_a.empty() || !f.kernels_b.empty())
    s.list({"kernels A (CUPTI, since the previous record): " + inline_text(fmt::format("{}", fmt::join(f.kernels_a, ", "))),
            "kernels B (CUPTI, since the previous record): " + inline_text(fmt::format("{}", fmt::join(f.kernels_b, ", ")))});
  else if (!f.kernels_note.empty())
    s.para("Kernels: not attributed (" + inline_text(f.kernels_note) + ").");
}

std::string growth_svg(const DivergeResult& r) {
  PlotSeries w{"weight L2 distance", {}, {}}, g{"|loss A - loss B|", {}, {}};
  for (size_t i = 0; i < r.loss_gap.size(); ++i) {
    if (i < r.weight_l2.size()) w.x.push_back(double(i)), w.y.push_back(r.weight_l2[i]);
    g.x.push_back(double(i)), g.y.push_back(r.loss_gap[i]);
  }
  Facet f{"", {}};
  if (!r.weight_l2.empty()) f.series.push_back(std::move(w));
  f.series.push_back(std::move(g));
  FacetOptions fo;
  fo.title = "How the difference grows (zeros are off the log axis)";
  fo.x_label = "step";
  fo.whole_x = true;
  fo.y_label = "distance";
  fo.log_y = true;
  fo.columns = 1;
  fo.panel_width = 640;
  fo.panel_height = 280;
  return svg_faceted_line_plot({f}, fo);
}

void growth_section(Document& doc, const DivergeResult& r) {
  Section& s = doc.add("How the difference grows");
  if (!r.first) {
    s.para("Nothing to plot: the runs stayed identical.");
    return;
  }
  s.svg(growth_svg(r), "weight L2 distance and loss gap per step (diverge.svg)");
  std::vector<std::vector<Cell>> rows;
  const size_t n = r.loss_gap.size(), every = std::max<size_t>(1, (n + 24) / 25);
  for (size_t i = 0; i < n; ++i) {
    if (i % every != 0 && i + 1 != n) continue;
    rows.push_back(row({std::to_string(i), fmt::format("{:.9g}", r.loss_a[i]), fmt::format("{:.9g}", r.loss_b[i]),
                        fmt::format("{:.3g}", r.loss_gap[i]),
                        i < r.weight_l2.size() ? fmt::format("{:.3g}", r.weight_l2[i]) : std::string("—")}));
  }
  s.table({"step", "loss A", "loss B", "|gap|", "weight L2"}, rows);
  if (r.offline) s.para("Offline: the weight distance needs the weights, which traces do not hold.");
}

Document diverge_document(const DivergeResult& r) {
  Document doc;
  doc.title = "detaudit diverge";
  Section& top = doc.add("");
  top.para("**" + inline_text(r.summary()) + "**", r.first ? "bad" : "ok");
  const DivergeDesign& d = r.design;
  top.para(inline_text(fmt::format("{} model, {} steps of batch {}, init seed {}, data seed {}, {} lr {:g}, data {}{}.",
                                   d.model, r.steps, d.batch_size, d.init_seed, d.data_seed, d.optimizer, d.lr,
                                   d.data_fingerprint, r.offline ? ", compared offline from two traces" : "")));
  top.table({"run", "target", "backend", "settings", "trace"},
            {row({"A", inline_code(r.a.target), inline_text(r.a.backend), inline_text(settings(r.a)),
                  r.a.trace.empty() ? "—" : inline_code(r.a.trace)}),
             row({"B", inline_code(r.b.target), inline_text(r.b.backend), inline_text(settings(r.b)),
                  r.b.trace.empty() ? "—" : inline_code(r.b.trace)})});
  first_section(doc, r);
  growth_section(doc, r);
  return doc;
}

}  // namespace

Status check_diverge_destinations(const std::string& out_dir) {
  const std::string base = out_dir + "/diverge";
  for (auto [ext, own] :
       {std::pair{".svg", Own::kAny}, {".json", Own::kDiverge}, {".md", Own::kReport}, {".html", Own::kReport}})
    DETAUDIT_RETURN_IF_ERROR(check_destination(base + ext, own));
  return Status::ok();
}

Status write_diverge_outputs(const DivergeResult& r, const std::string& out_dir) {
  const Document doc = diverge_document(r);
  std::string md = render_markdown(doc);
  if (r.first) md += "\n![weight L2 distance and loss gap per step](diverge.svg)\n";
  const std::string base = out_dir + "/diverge";
  // All four destinations are checked before any is written: a refused one leaves no half of the outputs.
  DETAUDIT_RETURN_IF_ERROR(check_diverge_destinations(out_dir));
  if (r.first) {
    DETAUDIT_RETURN_IF_ERROR(write_file_atomic(base + ".svg", growth_svg(r)));
  } else if (std::error_code ec; std::filesystem::is_regular_file(std::filesystem::symlink_status(base + ".svg", ec))) {
    // An earlier run's plot would stand beside a report that says nothing diverged.
    if (std::filesystem::remove(base + ".svg", ec); ec)
      return Status::invalid(fmt::format("{}.svg: an earlier run's plot could not be removed: {}", base, ec.message()));
  }
  DETAUDIT_RETURN_IF_ERROR(write_file_atomic(base + ".json", r.to_json(), Own::kDiverge));
  DETAUDIT_RETURN_IF_ERROR(write_file_atomic(base + ".md", md, Own::kReport));
  return write_file_atomic(base + ".html", render_html(doc), Own::kReport);
}

}  // namespace detaudit
