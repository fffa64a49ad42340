#include "gates/compare.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gates/verdict.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "report/document.hpp"
#include "report/probe_report.hpp"

namespace detaudit {

const char* to_string(CellComparison::Kind k) {
  switch (k) {
    case CellComparison::Kind::kSame: return "same bits";
    case CellComparison::Kind::kChanged: return "changed";
    case CellComparison::Kind::kOnlyA: return "only in A";
    case CellComparison::Kind::kOnlyB: return "only in B";
    case CellComparison::Kind::kVaries: return "varies";
  }
  return "changed";
}

namespace {

// Specs in canonical form, so that two detaudit versions spelling a target differently (a default
// written out or not, keys in another order) still meet; a spec this version does not know stays as written.
std::string canonical(const std::string& text, bool target) {
  Spec s;
  std::string err;
  bool ok = target ? parse_target(text, &s, &err) : parse_workload(text, &s, &err);
  return ok ? s.str() : text;
}

// --- machine and software ----------------------------------------------------------------------

std::string value_text(const nlohmann::json* j) {
  if (!j || j->is_null()) return "(absent)";
  if (j->is_string()) return j->get<std::string>();
  if (j->is_array() && std::all_of(j->begin(), j->end(), [](const nlohmann::json& x) { return x.is_string(); })) {
    std::vector<std::string> v;
    for (auto& x : *j) v.push_back(x.get<std::string>());
    return fmt::format("{}", fmt::join(v, " "));
  }
  return j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const nlohmann::json* field(const nlohmann::json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

void diff_field(const std::string& name, const nlohmann::json* a, const nlohmann::json* b,
                std::vector<FieldDifference>* out) {
  std::string ta = value_text(a), tb = value_text(b);
  if (ta != tb) out->push_back({name, ta, tb});
}

// The fields a bitwise expectation holds for (DESIGN.md "machine key"): CPU, OS, compiler, libraries,
// GPUs, CUDA, and the tool itself.
std::vector<FieldDifference> machine_differences(const Results& a, const Results& b) {
  std::vector<FieldDifference> out;
  const nlohmann::json &ma = a.machine, &mb = b.machine;
  for (const char* k : {"cpu_model", "cpu_features", "cores", "os", "compiler"}) diff_field(k, field(ma, k), field(mb, k), &out);
  std::set<std::string> libs;
  for (auto* m : {&ma, &mb})
    if (auto* l = field(*m, "libraries"); l && l->is_object())
      for (auto& [k, v] : l->items()) libs.insert(k);
  for (auto& k : libs) {
    auto* la = field(ma, "libraries");
    auto* lb = field(mb, "libraries");
    diff_field("libraries." + k, la ? field(*la, k) : nullptr, lb ? field(*lb, k) : nullptr, &out);
  }
  auto* ga = field(ma, "gpus");
  auto* gb = field(mb, "gpus");
  size_t na = ga && ga->is_array() ? ga->size() : 0, nb = gb && gb->is_array() ? gb->size() : 0;
  for (size_t i = 0; i < std::max(na, nb); ++i)
    for (const char* k : {"name", "compute_capability", "sm_count"})
      diff_field(fmt::format("gpus[{}].{}", i, k), i < na ? field((*ga)[i], k) : nullptr,
                 i < nb ? field((*gb)[i], k) : nullptr, &out);
  diff_field("cuda", field(ma, "cuda"), field(mb, "cuda"), &out);
  nlohmann::json va = a.tool_version, vb = b.tool_version, ca = a.tool_commit, cb = b.tool_commit;
  diff_field("tool_version", &va, &vb, &out);
  diff_field("tool_commit", &ca, &cb, &out);
  return out;
}

}  // namespace

Comparison compare_results(const Results& a, const Results& b, const std::string& name_a, const std::string& name_b) {
  Comparison c;
  c.a = name_a;
  c.b = name_b;
  // Cells by (workload, target); a cell seen twice in one file keeps its first observation.
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<Observation> tagged;  // both runs, targets tagged @A / @B, for the identity groups
  auto add = [&](const Results& r, bool side_a) {
    for (auto& o : r.observations) {
      std::string w = canonical(o.workload, false), t = canonical(o.target, true);
      auto [it, fresh] = index.emplace(std::pair{w, t}, c.cells.size());
      if (fresh) {
        CellComparison cell;
        cell.workload = w;
        cell.target = t;
        c.cells.push_back(cell);
      }
      CellComparison& cell = c.cells[it->second];
      std::string& status = side_a ? cell.status_a : cell.status_b;
      if (!status.empty()) continue;
      status = to_string(o.status);
      (side_a ? cell.fps_a : cell.fps_b) = fingerprint_set(o);
      (side_a ? cell.distinct_a : cell.distinct_b) = count_distinct(o.fingerprints);
      Spec ts, ws;
      std::string e;
      if (parse_target(o.target, &ts, &e) && parse_workload(o.workload, &ws, &e)) {
        auto promise = promise_for(ts, ws, r.machine, o.details).run_to_run;
        cell.promised_nondeterministic |= promise == Promise::RunToRun::kNondeterministic;
        cell.promised_deterministic |= promise == Promise::RunToRun::kDeterministic;
      }
      Observation g;
      g.workload = w;
      g.target = t + (side_a ? "@A" : "@B");
      g.status = o.status;
      g.fingerprints = o.fingerprints;
      tagged.push_back(std::move(g));
    }
  };
  add(a, true);
  add(b, false);
  // Cells of one workload together, workloads in order of first appearance.
  std::map<std::string, size_t> first;
  for (auto& cell : c.cells) first.emplace(cell.workload, first.size());
  std::stable_sort(c.cells.begin(), c.cells.end(), [&](const CellComparison& x, const CellComparison& y) {
    return first[x.workload] < first[y.workload];
  });
  for (auto& cell : c.cells) {
    if (cell.status_b.empty())
      cell.kind = CellComparison::Kind::kOnlyA, ++c.only_a;
    else if (cell.status_a.empty())
      cell.kind = CellComparison::Kind::kOnlyB, ++c.only_b;
    else if (cell.status_a == cell.status_b && cell.fps_a == cell.fps_b)
      cell.kind = CellComparison::Kind::kSame, ++c.same;
    else if (cell.status_a == "ok" && cell.status_b == "ok" && !cell.promised_deterministic &&
             (cell.distinct_a > 1 || cell.distinct_b > 1 || cell.promised_nondeterministic))
      cell.kind = CellComparison::Kind::kVaries, ++c.varies;
    else
      cell.kind = CellComparison::Kind::kChanged, ++c.changed;
  }
  c.differences = machine_differences(a, b);
  c.groups = identity_groups(tagged);
  return c;
}

// --- rendering ---------------------------------------------------------------------------------

nlohmann::json to_json(const Comparison& c) {
  auto side = [](const std::string& status, const std::vector<std::string>& fps, int distinct) -> nlohmann::json {
    if (status.empty()) return nullptr;
    return {{"status", status}, {"fingerprints", fps}, {"distinct", distinct}};
  };
  nlohmann::json cells = nlohmann::json::array();
  for (auto& x : c.cells)
    cells.push_back({{"workload", x.workload},
                     {"target", x.target},
                     {"kind", to_string(x.kind)},
                     {"a", side(x.status_a, x.fps_a, x.distinct_a)},
                     {"b", side(x.status_b, x.fps_b, x.distinct_b)}});
  nlohmann::json diffs = nlohmann::json::array();
  for (auto& d : c.differences) diffs.push_back({{"field", d.field}, {"a", d.a}, {"b", d.b}});
  nlohmann::json groups = nlohmann::json::array();
  for (auto& w : c.groups) {
    nlohmann::json gs = nlohmann::json::array();
    for (auto& g : w.groups) gs.push_back({{"fingerprints", g.fingerprints}, {"targets", g.targets}});
    groups.push_back({{"workload", w.workload}, {"groups", gs}});
  }
  return {{"a", c.a},
          {"b", c.b},
          {"summary", {{"same", c.same}, {"changed", c.changed}, {"only_a", c.only_a}, {"only_b", c.only_b}, {"varies", c.varies}}},
          {"cells", cells},
          {"differences", diffs},
          {"groups", groups}};
}

namespace {

// One side of a cell in words: "1a2b3c4d (1 distinct)", or the status when there are no bits.
std::string side_text(const std::string& status, const std::vector<std::string>& fps, int distinct) {
  if (status.empty()) return "absent";
  if (status != "ok" || fps.empty()) return status;
  return fmt::format("{} ({} distinct)", short_fingerprints(fps), distinct);
}

std::string summary_line(const Comparison& c) {
  return fmt::format("{} same bits, {} changed, {} only in A, {} only in B, {} nondeterministic (varies, not a "
                     "difference)",
                     c.same, c.changed, c.only_a, c.only_b, c.varies);
}

std::string render_text(const Comparison& c) {
  std::string s = fmt::format("A: {}\nB: {}\ncells: {}\n", c.a, c.b, summary_line(c));
  std::string workload;
  for (auto& x : c.cells) {
    if (x.workload != workload) s += fmt::format("\n{}\n", workload = x.workload);
    s += fmt::format("  {:<10} {}", to_string(x.kind), x.target);
    if (x.kind == CellComparison::Kind::kChanged || x.kind == CellComparison::Kind::kVaries)
      s += fmt::format(": {} -> {}", side_text(x.status_a, x.fps_a, x.distinct_a),
                       side_text(x.status_b, x.fps_b, x.distinct_b));
    else if (x.kind == CellComparison::Kind::kOnlyB)
      s += ": " + side_text(x.status_b, x.fps_b, x.distinct_b);
    else
      s += ": " + side_text(x.status_a, x.fps_a, x.distinct_a);
    s += "\n";
  }
  s += "\nmachine and software differences:\n";
  if (c.differences.empty()) s += "  none\n";
  for (auto& d : c.differences) s += fmt::format("  {}: {} -> {}\n", d.field, d.a, d.b);
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
  head.para("Cells: " + summary_line(c) + ".", c.cells_differ() ? "bad" : "ok");
  add_cells_section(d, c, k);
  add_differences_section(d, c, k);
  add_groups_section(d, c, k);
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

std::string render_comparison(const Comparison& c, OutputFormat f) {
  switch (f) {
    case OutputFormat::kText: return render_text(c);
    case OutputFormat::kMarkdown: return render_md(c);
    case OutputFormat::kJson: return to_json(c).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return render_text(c);
}

}  // namespace detaudit
