#include "report/fleet_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "report/svg.hpp"

namespace detaudit {

namespace {

std::string verdict_class(const std::string& v) {
  return v == "PASS" ? "ok" : v == "FAIL" || v == "ERROR" ? "bad" : v == "WARN" ? "warn" : "muted";
}

// The heat map's colours, by what the consensus said of a node's cell.
struct State {
  const char *name, *colour, *text, *meaning;
};
const State kStates[] = {
    {"agree", "#4caf50", "", "the group's bits"},
    {"differs", "#e53935", "≠", "other bits than the group's majority (or no majority)"},
    {"varies", "#fb8c00", "~", "varied on this node, deterministic on the group"},
    {"failed", "#8e24aa", "x", "crashed, timed out or skipped here, not on the others"},
    {"nondeterministic", "#90caf9", "", "varies on most nodes: compared as distributions"},
    {"alone", "#bdbdbd", "", "no peer with this machine key"},
    {"missing", "#ffffff", "", "not reached by this node"},
};

const State& state_of(const std::string& s) {
  for (auto& st : kStates)
    if (s == st.name) return st;
  return kStates[std::size(kStates) - 1];
}

}  // namespace

Document build_fleet_report(const FleetOutcome& f) {
  Document d;
  d.title = "detaudit fleet";
  const std::string verdict = to_string(f.decision);
  Section& top = d.add("");
  top.para(fmt::format("**{}**: {}", verdict, inline_text(f.summary)), verdict_class(verdict));
  top.para(fmt::format("Level {}, {} ranks; {} by detaudit {} ({}) at {}.", f.level, f.ranks, inline_code(f.dir),
                       inline_text(f.tool_version), inline_code(f.tool_commit), inline_text(f.created_at)));
  top.para(
      "A deterministic cell must give the same bits on every node of the same machine key (hardware, driver, "
      "libraries, tool and build). Within each group of nodes of one key, the majority's fingerprint is the "
      "cell's; a node with other bits is named, without any tolerance. Cells that vary on most nodes are "
      "compared as distributions (each node's own verdict against its target's promise), never by bits.");

  Section& nodes = d.add("Nodes");
  std::vector<std::vector<Cell>> rows;
  for (auto& n : f.nodes) {
    const std::string v = to_string(n.verdict);
    const std::string ratio = n.time_ratio ? fmt::format("{:.2f}x", *n.time_ratio) : "-";
    rows.push_back({{inline_text(std::to_string(n.rank)), ""},
                    {inline_text(n.host), ""},
                    {inline_code(n.key), ""},
                    {inline_text(to_string(n.state)), ""},
                    {fmt::format("{} of {}", n.cells_agreeing, n.cells), ""},
                    {ratio, ""},
                    {inline_text(v), verdict_class(v)},
                    {inline_text(n.action ? to_string(*n.action) : ""), ""},
                    {inline_text(n.summary), ""}});
  }
  nodes.table({"rank", "host", "machine key", "state", "cells agreeing", "time vs group", "verdict", "action",
               "findings"},
              rows);
  nodes.para("Action: ISOLATE other bits, a broken promise or a crash (take it out of service); CONFIGURE another "
             "machine key or plan than its peers'; RETEST it could not run, was lost or interrupted; MONITOR slow.");

  Section& fs = d.add("Findings");
  if (f.findings.empty()) {
    fs.para("None: every node agrees with its group on every cell it ran, and none is slow.", "ok");
  } else {
    std::vector<std::vector<Cell>> fr;
    for (auto& x : f.findings) {
      const std::string v = to_string(x.verdict);
      fr.push_back({{inline_text(v), verdict_class(v)},
                    {inline_text(std::to_string(x.rank) + " " + x.host), ""},
                    {inline_text(to_string(x.kind)), ""},
                    {inline_text(to_string(x.action)), ""},
                    {x.cell.empty() ? "" : inline_code(x.cell), ""},
                    {inline_text(x.detail), ""}});
    }
    fs.table({"verdict", "node", "kind", "action", "cell", "detail"}, fr).md_budget(20000);
  }

  Section& gs = d.add("Machine key groups");
  std::vector<std::string> items;
  for (auto& g : f.groups)
    items.push_back(fmt::format("{}{}: ranks {}", inline_code(g.key), g.reference ? " (the largest)" : "",
                                fmt::join(g.ranks, ", ")));
  gs.list(items);
  gs.para(
      "A key hashes the CPU model and features, cores, each GPU's name, compute capability and SM count, "
      "every library and driver version the machine reports, and detaudit's version and commit.");

  const auto& coll = f.collectives;
  if (!coll.empty()) {
    Section& cs = d.add("Collectives");
    std::vector<std::vector<Cell>> cr;
    for (auto& c : coll) {
      const std::string v = to_string(c.verdict);
      cr.push_back({{inline_code(c.workload), ""},
                    {inline_text(c.library), ""},
                    {inline_text(c.algorithm), ""},
                    {inline_text(std::to_string(c.ranks)), ""},
                    {inline_text(std::to_string(c.distinct)), ""},
                    {inline_code(c.fingerprint.substr(0, 16)), ""},
                    {inline_text(v), verdict_class(v)}});
    }
    cs.table({"workload", "library", "algorithm", "ranks", "distinct results", "fingerprint", "verdict"}, cr);
    size_t across = 0;
    for (auto& c : coll) across = std::max(across, c.distinct_across_algorithms);
    cs.para(fmt::format(
        "All-reduce of float sums, through MPI_Allreduce on the CPUs (each of Open MPI's tuned algorithms) and, "
        "where every rank has a GPU, through NCCL (NCCL_ALGO Ring and Tree): each algorithm must give one "
        "result on every rank and in every repeat (a fixed algorithm on fixed ranks sums in a fixed order). "
        "Across algorithms the order differs and so may the bits: {} distinct result(s) across the algorithms "
        "that were deterministic.",
        across));
  }

  const auto& cells = f.cells;
  const auto& matrix = f.matrix;
  if (!cells.empty() && !matrix.empty()) {
    Section& hm = d.add("Nodes x cells");
    HeatmapOptions ho;
    ho.title = "What each node computed, against its group (disagreeing cells first)";
    for (auto& st : kStates) ho.legend.push_back({st.colour, st.name});
    ho.cell_width = 10;
    ho.cell_height = 16;
    const size_t shown = std::min<size_t>(cells.size(), 400);
    if (shown < cells.size()) ho.note = fmt::format("The first {} of {} cells.", shown, cells.size());
    for (size_t c = 0; c < shown; ++c) ho.col_labels.push_back("");
    std::vector<HeatmapCell> hc;
    for (size_t i = 0; i < matrix.size() && i < f.nodes.size(); ++i) {
      ho.row_labels.push_back(fmt::format("rank {} {}", f.nodes[i].rank, f.nodes[i].host));
      for (size_t c = 0; c < shown && c < matrix[i].size(); ++c) {
        const State& st = state_of(matrix[i][c]);
        hc.push_back({i, c, st.colour, "", fmt::format("{}: {} ({})", cells[c], st.name, st.meaning)});
      }
    }
    hm.svg(svg_heatmap(hc, ho), "heat map of nodes by cells").html_only();
    std::vector<std::string> legend;
    for (auto& st : kStates) legend.push_back(fmt::format("**{}**: {}", st.name, st.meaning));
    hm.list(legend);
  }
  return d;
}

Status write_fleet_reports(const std::string& dir, const FleetOutcome& fleet) {
  Document d = build_fleet_report(fleet);
  for (const char* name : {"/report.md", "/report.html"})
    DETAUDIT_RETURN_IF_ERROR(check_destination(dir + name, Own::kReport));
  DETAUDIT_RETURN_IF_ERROR(write_file_atomic(dir + "/report.md", render_markdown(d), Own::kReport));
  return write_file_atomic(dir + "/report.html", render_html(d), Own::kReport);
}

}  // namespace detaudit
