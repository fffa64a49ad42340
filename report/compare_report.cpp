#include "report/compare_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/probe_report.hpp"  // kMarkdownLimit

namespace detaudit {

namespace {

// One side of a cell in words: "1a2b3c4d (1 distinct)", or the status when there are no bits.
std::string side_text(const std::string& status, const std::vector<std::string>& fps, int distinct) {
  if (status.empty()) return "absent";
  if (status != "ok" || fps.empty()) return status;
  return fmt::format("{} ({} distinct)", short_fingerprints(fps), distinct);
}

std::string summary_line(const Comparison& c) {
  return fmt::format(
      "{} same bits, {} bits changed, {} only in A, {} only in B, {} nondeterministic (varies, not a "
      "difference)",
      c.same, c.changed, c.only_a, c.only_b, c.varies);
}

std::string training_summary_line(const Comparison& c) {
  return fmt::format(
      "{} same bits, {} bits changed, {} only in A, {} only in B, {} nondeterministic (varies, not a "
      "difference)",
      c.training_same, c.training_changed, c.training_only_a, c.training_only_b, c.training_varies);
}

std::string loss_spread(const std::optional<double>& mean, const std::optional<double>& sd, int finished) {
  if (!mean) return fmt::format("no finished run ({})", finished);
  return fmt::format("{:.6g}{} ({} finished)", *mean, sd ? fmt::format(" ± {:.2g}", *sd) : "", finished);
}

// One training cell in words: what differs, or the spread of both sides.
std::string training_cell_text(const TrainingCellComparison& t) {
  std::string s = fmt::format("A {} -> B {}", loss_spread(t.mean_a, t.sd_a, t.finished_a),
                              loss_spread(t.mean_b, t.sd_b, t.finished_b));
  if (t.deterministic && t.runs_matched)
    s += fmt::format("; {} of {} runs the same bits", t.runs_same_bits, t.runs_matched);
  if (!t.first_difference.empty()) s += "; first: " + t.first_difference;
  return s;
}

std::string render_text(const Comparison& c, bool all) {
  std::string s = fmt::format("A: {}\nB: {}\n", c.a, c.b);
  if (!c.cells.empty() || c.training.empty()) s += fmt::format("cells: {}\n", summary_line(c));
  if (!c.training.empty()) s += fmt::format("training cells ({}): {}\n", c.kind, training_summary_line(c));
  std::string workload;
  for (auto& x : c.cells) {
    if (!all && x.kind == CellComparison::Kind::kSame) continue;
    if (x.workload != workload) s += fmt::format("\n{}\n", workload = x.workload);
    s += fmt::format("  {:<10} {}", to_string(x.kind), x.target);
    if (x.kind == CellComparison::Kind::kChanged && x.fps_a == x.fps_b && x.rows_a != x.rows_b)
      s += fmt::format(": the same product ({}), but the rows computed alone (batch invariance) {} -> {}",
                       side_text(x.status_a, x.fps_a, x.distinct_a), x.rows_a.substr(0, 8), x.rows_b.substr(0, 8));
    else if (x.kind == CellComparison::Kind::kChanged || x.kind == CellComparison::Kind::kVaries)
      s += fmt::format(": {} -> {}", side_text(x.status_a, x.fps_a, x.distinct_a),
                       side_text(x.status_b, x.fps_b, x.distinct_b));
    else if (x.kind == CellComparison::Kind::kOnlyB)
      s += ": " + side_text(x.status_b, x.fps_b, x.distinct_b);
    else
      s += ": " + side_text(x.status_a, x.fps_a, x.distinct_a);
    s += "\n";
  }
  if (!c.training.empty()) s += "\ntraining\n";
  for (auto& t : c.training) {
    if (!all && t.kind == CellComparison::Kind::kSame) continue;
    s += fmt::format("  {:<12} ({}) {}: {}\n", to_string(t.kind), t.condition, t.target, training_cell_text(t));
  }
  if (!all && c.same + c.training_same > 0)
    s += fmt::format("\n({} cells with the same bits not listed; --all lists every cell)\n", c.same + c.training_same);
  s += "\nmachine and software differences:\n";
  if (c.differences.empty()) s += "  none\n";
  for (auto& d : c.differences) s += fmt::format("  {}: {} -> {}\n", d.field, d.a, d.b);
  if (!all) return s;
  s += "\nbit-identical groups across both runs:\n";
  for (auto& w : c.groups) {
    s += fmt::format("  {}\n", w.workload);
    for (auto& g : w.groups) s += fmt::format("    [{}] {}\n", short_fingerprints(g.fingerprints), fmt::join(g.targets, ", "));
  }
  return s;
}

// Caps of the markdown lists, halved until the comment fits.
struct Caps {
  size_t cells = 200, fields = 100, workloads = 60, groups = 20, targets = 24, chars = 200;
  void halve() {
    for (size_t* v : {&cells, &fields, &workloads, &groups, &targets, &chars}) *v = std::max<size_t>(*v / 2, 8);
  }
};

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }
std::string md_code(const std::string& s, const Caps& k) { return inline_code(clip(s, k.chars)); }
std::string md_text(const std::string& s, const Caps& k) { return inline_text(clip(s, k.chars)); }
std::string more(size_t n) { return fmt::format("... and {} more", n); }

void add_cells_section(Document& d, const Comparison& c, const Caps& k) {
  auto& sec = d.add("Cells that differ");
  std::vector<std::vector<Cell>> rows;
  size_t differing = c.changed + c.only_a + c.only_b + c.varies;
  for (auto& x : c.cells) {
    if (x.kind == CellComparison::Kind::kSame) continue;
    if (rows.size() == k.cells) {
      rows.push_back({{more(differing - k.cells), ""}, {"", ""}, {"", ""}, {"", ""}, {"", ""}});
      break;
    }
    rows.push_back({{md_code(x.workload, k), ""},
                    {md_code(x.target, k), ""},
                    {to_string(x.kind), x.kind == CellComparison::Kind::kVaries ? "expected" : "bad"},
                    {md_text(side_text(x.status_a, x.fps_a, x.distinct_a), k), ""},
                    {md_text(side_text(x.status_b, x.fps_b, x.distinct_b), k), ""}});
  }
  if (rows.empty())
    sec.para("None: every cell has the same bits in both runs.", "ok");
  else
    sec.table({"workload", "target", "change", "A", "B"}, rows);
}

void add_training_section(Document& d, const Comparison& c, const Caps& k) {
  if (c.training.empty()) return;
  auto& sec = d.add("Training cells");
  sec.para("Training cells (" + md_text(c.kind, k) + "): " + training_summary_line(c) + ".",
           c.training_changed + c.training_only_a + c.training_only_b ? "bad" : "ok");
  std::vector<std::vector<Cell>> rows;
  for (auto& t : c.training) {
    if (rows.size() == k.cells) {
      rows.push_back({{more(c.training.size() - k.cells), ""}, {"", ""}, {"", ""}, {"", ""}});
      break;
    }
    const char* cls = t.kind == CellComparison::Kind::kSame     ? "ok"
                      : t.kind == CellComparison::Kind::kVaries ? "expected"
                                                                : "bad";
    rows.push_back({{md_text(t.condition, k), ""},
                    {md_code(t.target, k), ""},
                    {to_string(t.kind), cls},
                    {md_text(training_cell_text(t), k), ""}});
  }
  sec.table({"condition", "target", "result", "final loss A -> B"}, rows);
}

void add_differences_section(Document& d, const Comparison& c, const Caps& k) {
  auto& sec = d.add("Machine and software");
  std::vector<std::vector<Cell>> rows;
  for (auto& f : c.differences) {
    if (rows.size() == k.fields) {
      rows.push_back({{more(c.differences.size() - k.fields), ""}, {"", ""}, {"", ""}});
      break;
    }
    rows.push_back({{md_code(f.field, k), ""}, {md_text(f.a, k), ""}, {md_text(f.b, k), ""}});
  }
  if (rows.empty())
    sec.para("No difference in the fields compared (CPU, OS, compiler, libraries, GPUs, CUDA, tool).");
  else
    sec.table({"field", "A", "B"}, rows);
}

void add_groups_section(Document& d, const Comparison& c, const Caps& k) {
  auto& sec = d.add("Bit-identical groups across both runs");
  std::vector<std::string> items;
  for (size_t wi = 0; wi < c.groups.size(); ++wi) {
    if (wi == k.workloads) {
      items.push_back(more(c.groups.size() - k.workloads) + " workloads");
      break;
    }
    auto& w = c.groups[wi];
    std::vector<std::string> gs;
    for (size_t gi = 0; gi < w.groups.size() && gi < k.groups; ++gi) {
      auto& g = w.groups[gi];
      std::vector<std::string> ts;
      for (size_t ti = 0; ti < g.targets.size() && ti < k.targets; ++ti) ts.push_back(md_code(g.targets[ti], k));
      if (g.targets.size() > k.targets) ts.push_back(more(g.targets.size() - k.targets));
      gs.push_back(fmt::format("[{}] {}", md_code(short_fingerprints(g.fingerprints), k), fmt::join(ts, ", ")));
    }
    if (w.groups.size() > k.groups) gs.push_back(more(w.groups.size() - k.groups) + " groups");
    items.push_back(fmt::format("{}: {}", md_code(w.workload, k), fmt::join(gs, "; ")));
  }
  if (items.empty())
    sec.para("No cell of either run produced output.");
  else
    sec.list(items);
}

std::string render_markdown_capped(const Comparison& c, const Caps& k) {
  Document d;
  d.title = "detaudit compare";
  auto& head = d.add("Summary");
  head.para("A: " + md_code(c.a, k) + ", B: " + md_code(c.b, k));
  if (!c.cells.empty() || c.training.empty())
    head.para("Cells: " + summary_line(c) + ".", c.changed + c.only_a + c.only_b ? "bad" : "ok");
  if (!c.cells.empty()) add_cells_section(d, c, k);
  add_training_section(d, c, k);
  add_differences_section(d, c, k);
  if (!c.cells.empty()) add_groups_section(d, c, k);
  return render_markdown(d);
}

std::string render_md(const Comparison& c) {
  Caps k;
  std::string md = render_markdown_capped(c, k);
  for (int i = 0; i < 8 && md.size() >= kMarkdownLimit; ++i) md = render_markdown_capped(c, (k.halve(), k));
  // The smallest caps still too long (thousands of workloads): cut, and say so.
  const std::string cut = "\n\n... (cut to stay under the size of a PR comment)\n";
  if (md.size() >= kMarkdownLimit) md = md.substr(0, md.rfind('\n', kMarkdownLimit - cut.size() - 1)) + cut;
  return md;
}

}  // namespace

std::string render_comparison(const Comparison& c, OutputFormat f, bool all) {
  switch (f) {
    case OutputFormat::kText:
      return render_text(c, all);
    case OutputFormat::kMarkdown: return render_md(c);
    case OutputFormat::kJson: return to_json(c).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return render_text(c, all);
}

}  // namespace detaudit
