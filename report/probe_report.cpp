#include "report/probe_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis/stats.hpp"
#include "contract/spec.hpp"
#include "contract/cells.hpp"
#include "contract/json_fields.hpp"
#include "kernels/cuda/cuda.hpp"  // kCudaMachineKey
#include "report/svg.hpp"

namespace detaudit {

namespace {

namespace jf = json_fields;

// The size of the report stays linear in the number of observations: the matrix is drawn only when
// it is dense enough (or small), and the lists stop after kListCap items with a count.
constexpr size_t kMatrixAlwaysCells = 1000;
constexpr size_t kMatrixCellsPerObservation = 4;
constexpr size_t kListCap = 100;

// Markdown budgets (characters) of each list and table. With the fixed text they keep report.md under
// kMarkdownLimit for any suite (tests/test_report_size.cpp checks the worst case); what a budget
// leaves out is counted in one line pointing to report.html.
// The budgets add up to about 50,000; the fixed text (headings, legends, one-line summaries, the
// lines that count what was left out) is a few thousand more.
constexpr size_t kMdFailures = 5500, kMdWarnings = 2500, kMdExpected = 2000, kMdNotRun = 2500, kMdOther = 2000;
constexpr size_t kMdMatrix = 17500, kMdAllSkipped = 1200, kMdWorkloadLegend = 2000;
constexpr size_t kMdGroups = 2500, kMdClaims = 1500, kMdKernels = 1500, kMdBatch = 1200;
constexpr size_t kMdTiming = 3000, kMdSlowest = 1200, kMdMachine = 2000, kMdGpus = 1500;
// One line of text from results.json in a heading or summary line (a command line of 2,000 targets,
// a hostname) is cut here; results.json has it whole.
constexpr size_t kLineCap = 400;
constexpr size_t kHistogramPanels = 12, kSlowestCells = 8;

// ---- verdicts as stored -------------------------------------------------------------------------

// What the report shows of a cell's verdict (contract/verdict.hpp): the verdict, or kNone: not judged
// (results of an older detaudit, or a run in progress), shown grey. Every command judges results before
// it renders them (gates/verdict.hpp); the report never makes a verdict up from a cell's status.
enum class V { kPass, kFail, kExpected, kWarn, kSkip, kNone };
constexpr V kVerdicts[] = {V::kPass, V::kFail, V::kExpected, V::kWarn, V::kSkip};

V verdict_of(const Observation& o) {
  if (!o.verdict) return V::kNone;
  switch (*o.verdict) {
    case Verdict::kPass: return V::kPass;
    case Verdict::kFail: return V::kFail;
    case Verdict::kExpected: return V::kExpected;
    case Verdict::kWarn: return V::kWarn;
    case Verdict::kSkip: return V::kSkip;
  }
  return V::kNone;
}
const char* name_of(V v) {
  switch (v) {
    case V::kPass: return "PASS";
    case V::kFail: return "FAIL";
    case V::kExpected: return "EXPECTED";
    case V::kWarn: return "WARN";
    case V::kSkip: return "SKIP";
    case V::kNone: break;
  }
  return "not judged";
}
const char* cls_of(V v) {
  switch (v) {
    case V::kPass: return "ok";
    case V::kFail: return "bad";
    case V::kExpected: return "expected";
    case V::kWarn: return "warn";
    case V::kSkip: return "skip";
    case V::kNone: break;
  }
  return "muted";
}
const char* colour_of(V v) {
  switch (v) {
    case V::kPass: return "#1a9850";
    case V::kFail: return "#d73027";
    case V::kExpected: return "#3b6fb6";
    case V::kWarn: return "#f4a11d";
    case V::kSkip: return "#b0b0b0";
    case V::kNone: break;
  }
  return "#777777";
}
bool judged(const std::vector<Observation>& obs) {
  for (auto& o : obs)
    if (verdict_of(o) != V::kNone) return true;
  return false;
}

// ---- text of one cell ---------------------------------------------------------------------------

std::string ulp_text(const Observation& o) {
  if (o.oracle->max_ulp == kUlpInfinite) return "NaN vs number";
  return fmt::format("{} ulp", o.oracle->max_ulp);
}
std::string ratio_text(double r) { return r == 0.0 ? "0" : fmt::format("{:.2g}", r); }

// The distance to the oracle as a reader can judge it: the error as a multiple of the summation
// error bound (below 1 for a correct kernel) and bits of agreement; ULPs only where no bound is known.
std::string oracle_text(const Observation& o) {
  if (!o.oracle) return "";
  const OracleDistance& d = *o.oracle;
  if (d.err_ratio < 0) return ulp_text(o);
  std::string t = ratio_text(d.err_ratio) + "×";
  if (d.agree_bits >= 0) t += fmt::format(" {:.0f}b", d.agree_bits);
  return t;
}
std::string oracle_words(const Observation& o) {
  if (!o.oracle) return "no oracle distance";
  const OracleDistance& d = *o.oracle;
  if (d.err_ratio < 0) return ulp_text(o) + " from the oracle";
  std::string t = fmt::format("error {}× the bound", ratio_text(d.err_ratio));
  if (d.agree_bits >= 0) t += fmt::format(", {:.0f} bits of agreement", d.agree_bits);
  return t + fmt::format(", {} ulp", d.max_ulp == kUlpInfinite ? std::string("NaN vs number") : std::to_string(d.max_ulp));
}

Cell matrix_cell(const Observation& o) {
  const V v = verdict_of(o);
  const std::string tag = (v == V::kFail ? "**FAIL** " : v == V::kExpected ? "EXPECTED " : v == V::kWarn ? "WARN " : "");
  const std::string cls = cls_of(verdict_of(o));
  switch (o.status) {
    case ObsStatus::kOk: {
      std::string t = o.distinct == 1 ? (o.oracle ? "" : fmt::format("1/{}", o.fingerprints.size()))
                                      : fmt::format("**{}/{}**", o.distinct, o.fingerprints.size());
      const std::string d = oracle_text(o);
      if (!d.empty()) t += (t.empty() ? "" : " ") + d;
      return {tag + t, cls};
    }
    case ObsStatus::kCrashed: return {tag + "crashed " + inline_text(o.reason.substr(0, o.reason.find(' '))), cls};
    case ObsStatus::kTimeout: return {tag + "timeout", cls};
    case ObsStatus::kSkipped: return {"skipped", cls};
    case ObsStatus::kError: return {tag + "error", cls};
  }
  return {"?", ""};
}

std::string capped(const std::string& s) {
  if (s.size() <= kLineCap) return s;
  size_t n = kLineCap;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
  return s.substr(0, n) + "…";
}

std::string fp_short(const std::string& fp) { return inline_text(fp.substr(0, 8)); }

// Names in first-appearance order, each once, with their index.
struct Names {
  std::vector<std::string> list;
  std::unordered_map<std::string, size_t> index;
  size_t add(const std::string& s) {
    auto [it, fresh] = index.emplace(s, list.size());
    if (fresh) list.push_back(s);
    return it->second;
  }
};

// "cublas: no CUDA device: ..." and "cuda: no CUDA device: ..." are one reason.
std::string skip_reason(const Observation& o) {
  std::string reason = o.reason.empty() ? "no reason given" : o.reason;
  const std::string backend = spec_name(o.target);
  if (reason.rfind(backend + ": ", 0) == 0) reason = reason.substr(backend.size() + 2);
  return reason;
}

// Findings of one verdict grouped by target and reason: a target that fails ten workloads for one
// reason is one line, not ten.
std::vector<std::string> grouped_findings(const std::vector<const Observation*>& obs) {
  std::map<std::pair<std::string, std::string>, size_t> at;
  struct Group {
    std::string target, reason;
    std::vector<std::string> workloads;
  };
  std::vector<Group> groups;
  for (auto* o : obs) {
    std::string reason = !o->verdict_reason.empty() ? o->verdict_reason : !o->reason.empty() ? o->reason : "no reason given";
    auto [it, fresh] = at.emplace(std::pair{o->target, reason}, groups.size());
    if (fresh) groups.push_back({o->target, reason, {}});
    groups[it->second].workloads.push_back(o->workload);
  }
  std::vector<std::string> items;
  for (auto& g : groups) {
    if (g.workloads.size() == 1) {
      items.push_back(fmt::format("{} on {}: {}", inline_code(g.workloads[0]), inline_code(g.target), inline_text(g.reason)));
      continue;
    }
    std::vector<std::string> shown;
    for (size_t i = 0; i < g.workloads.size() && i < 2; ++i) shown.push_back(inline_code(g.workloads[i]));
    items.push_back(fmt::format("{} on {} workloads ({}{}): {}", inline_code(g.target), g.workloads.size(),
                                fmt::join(shown, ", "),
                                g.workloads.size() > 2 ? fmt::format(" and {} more", g.workloads.size() - 2) : "",
                                inline_text(g.reason)));
  }
  return items;
}

std::vector<const Observation*> with_verdict(const std::vector<Observation>& obs, V v) {
  std::vector<const Observation*> out;
  for (auto& o : obs)
    if (verdict_of(o) == v) out.push_back(&o);
  return out;
}

// ---- verdict ------------------------------------------------------------------------------------

// Crashes, timeouts and errors per target and reason; skips grouped by reason across targets (a
// machine without a GPU skips dozens of cells for one reason).
std::vector<std::string> not_run_items(const std::vector<Observation>& obs) {
  std::map<std::pair<std::string, std::string>, size_t> by_reason;  // (status: target, reason) -> workloads
  std::map<std::string, Names> skips;                                // reason -> targets
  std::map<std::string, int> skip_cells;
  for (auto& o : obs) {
    auto cv = cell_verdict(o);
    if (cv == CellVerdict::kCrashed || cv == CellVerdict::kTimeout || cv == CellVerdict::kError)
      ++by_reason[{std::string(to_string(cv)) + ": " + inline_code(o.target), o.reason}];
    if (cv == CellVerdict::kSkipped) {
      std::string reason = skip_reason(o);
      skips[reason].add(o.target);
      ++skip_cells[reason];
    }
  }
  std::vector<std::string> items;
  for (auto& [key, n] : by_reason)
    items.push_back(fmt::format("{} ({} workload{}): {}", key.first, n, n == 1 ? "" : "s",
                                key.second.empty() ? "no reason given" : inline_text(key.second)));
  for (auto& [reason, ts] : skips) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < ts.list.size() && i < 6; ++i) shown.push_back(inline_code(ts.list[i]));
    items.push_back(fmt::format("skipped ({} cell{} on {} target{}): {}: {}{}", skip_cells[reason],
                                skip_cells[reason] == 1 ? "" : "s", ts.list.size(), ts.list.size() == 1 ? "" : "s",
                                inline_text(reason), fmt::join(shown, ", "),
                                ts.list.size() > 6 ? fmt::format(" and {} more", ts.list.size() - 6) : ""));
  }
  return items;
}

// Findings that are facts whatever the verdict: a library that silently runs something other than
// what was asked (OpenBLAS maps unknown core names to another core), batch variance, failed oracles.
std::vector<std::string> other_findings(const Results& r) {
  const auto& obs = r.observations;
  std::vector<std::string> other;
  std::set<std::string> substituted;
  for (auto& o : obs) {
    auto it = o.details.find("corename");
    auto q = o.target.find("core=");
    if (it == o.details.end() || q == std::string::npos) continue;
    std::string want = o.target.substr(q + 5, o.target.find('&', q) - q - 5);
    auto lower = [](std::string x) {
      for (auto& c : x) c = char(std::tolower(static_cast<unsigned char>(c)));
      return x;
    };
    if (want != "auto" && lower(want) != lower(it->second) && substituted.insert(o.target).second)
      other.push_back(fmt::format("substituted: {} asked for core {} but OpenBLAS ran {}", inline_code(o.target),
                                  inline_text(want), inline_text(it->second)));
  }
  for (auto& o : obs)
    if (o.batch && !o.batch->invariant())
      other.push_back(fmt::format("not batch-invariant: {} on {}: {} of {} rows differ when computed alone",
                                  inline_code(o.workload), inline_code(o.target), o.batch->rows_differing,
                                  o.batch->rows_checked));
  // An oracle that could not be computed is the oracle's failure, not a target's: its workload's cells
  // show no distance.
  std::vector<std::string> oracle;
  for (auto& [w, why] : r.oracle_failures)
    oracle.push_back(fmt::format("oracle failed: {}: {}; its cells carry no distance to the oracle", inline_code(w),
                                 inline_text(why)));
  other.insert(other.begin(), oracle.begin(), oracle.end());
  return other;
}

std::string plan_line(const Results& r, const Summary& sum) {
  return fmt::format("{} cells: {} ran, {} crashed, {} timed out, {} skipped, {} errors. Suite {}, {} repeats per cell.",
                     sum.cells, sum.deterministic + sum.nondeterministic, sum.crashed, sum.timeout, sum.skipped,
                     sum.error, inline_code(capped(jf::str(r.plan, "suite", "custom"))) + (r.plan.value("custom", false) ? " (its targets or workloads replaced)" : ""), jf::integer(r.plan, "repeats"));
}

void add_judged_verdict(Section& v, const Results& r) {
  const auto& obs = r.observations;
  std::map<V, int> n;
  for (auto& o : obs) ++n[verdict_of(o)];
  const int cells = static_cast<int>(obs.size()), ran = cells - n[V::kSkip];
  if (n[V::kFail] == 0 && ran == 0)
    v.para(fmt::format("**No FAIL, but nothing ran**: all {} cells were skipped.", cells), "warn");
  else if (n[V::kFail] == 0)
    v.para(fmt::format("**No FAIL**: every promise held in the {} cells judged ({} PASS, {} EXPECTED, {} WARN, {} SKIP).",
                       cells - n[V::kNone], n[V::kPass], n[V::kExpected], n[V::kWarn], n[V::kSkip]),
           "ok");
  else
    v.para(fmt::format("**{} FAIL**: {} of {} cells broke their target's promise.", n[V::kFail], n[V::kFail], cells),
           "bad");
  auto fails = grouped_findings(with_verdict(obs, V::kFail));
  if (!fails.empty()) v.list(fails).cap(kListCap, "results.json").md_budget(kMdFailures);
  std::vector<std::string> header;
  std::vector<Cell> counts;
  for (V x : kVerdicts) {
    header.push_back(name_of(x));
    counts.push_back({std::to_string(n[x]), n[x] ? cls_of(x) : ""});
  }
  if (n[V::kNone]) {
    header.push_back("not judged");
    counts.push_back({std::to_string(n[V::kNone]), "muted"});
  }
  v.table(header, {counts});
  v.para(plan_line(r, summarize(obs)));
  auto warns = grouped_findings(with_verdict(obs, V::kWarn));
  if (!warns.empty())
    v.para("**WARN** (cell, reason):", "warn").list(warns).cap(kListCap, "results.json").md_budget(kMdWarnings);
  auto expected = grouped_findings(with_verdict(obs, V::kExpected));
  if (!expected.empty())
    v.details(fmt::format("EXPECTED: {} cell{} behaved as {} target promises (nondeterminism it promises, or a "
                          "requirement this machine does not meet)",
                          n[V::kExpected], n[V::kExpected] == 1 ? "" : "s", n[V::kExpected] == 1 ? "its" : "their"),
              Section{}.list(expected).cap(kListCap, "results.json").md_budget(kMdExpected), false, "expected");
  auto not_run = not_run_items(obs);
  if (!not_run.empty())
    v.details(fmt::format("Did not run or did not finish: {} lines, one per target and reason", not_run.size()),
              Section{}.list(not_run).cap(kListCap, "the matrix and results.json").md_budget(kMdNotRun));
  auto other = other_findings(r);
  if (!other.empty()) v.para("Other findings:").list(other).cap(kListCap, "results.json").md_budget(kMdOther);
}

// Results without verdicts (an older detaudit): the verdict is read from the statuses alone.
void add_status_verdict(Section& v, const Results& r) {
  const auto& obs = r.observations;
  Summary sum = summarize(obs);
  int ran = sum.deterministic + sum.nondeterministic;
  v.para(fmt::format("{} of {} workload × target cells that ran are run-to-run deterministic; {} are not. (These "
                     "results carry no verdicts; `detaudit report` of this version judges them.)",
                     sum.deterministic, ran, sum.nondeterministic),
         sum.nondeterministic ? "bad" : (ran ? "ok" : "warn"));
  v.para(plan_line(r, sum));
  std::vector<std::string> nondet;
  for (auto& o : obs)
    if (cell_verdict(o) == CellVerdict::kNondeterministic)
      nondet.push_back(fmt::format("nondeterministic: {} on {}: {} distinct outputs in {} runs", inline_code(o.workload),
                                   inline_code(o.target), o.distinct, o.fingerprints.size()));
  if (!nondet.empty()) v.list(nondet).cap(kListCap, "the matrix").md_budget(kMdFailures);
  auto not_run = not_run_items(obs);
  if (!not_run.empty()) v.list(not_run).cap(kListCap, "the matrix and results.json").md_budget(kMdNotRun);
  auto other = other_findings(r);
  if (!other.empty()) v.list(other).cap(kListCap, "results.json").md_budget(kMdOther);
}

void add_verdict_section(Document& d, const Results& r) {
  auto& v = d.add("Verdict");
  if (judged(r.observations))
    add_judged_verdict(v, r);
  else
    add_status_verdict(v, r);
}

// ---- matrix and its pictures --------------------------------------------------------------------

// How dark a cell is drawn: the error ratio on a log scale, 1e-6 of the bound or less light, the
// bound itself full colour.
double shade_of(const Observation& o) {
  if (!o.oracle || o.oracle->err_ratio < 0) return 0.6;
  if (o.oracle->err_ratio <= 0) return 0.0;
  return std::clamp((std::log10(o.oracle->err_ratio) + 6.0) / 6.0, 0.0, 1.0);
}

std::string heat_fill(const Observation& o) {
  const V v = verdict_of(o);
  switch (v) {
    case V::kPass: return svg_tint(colour_of(v), 0.25 + 0.75 * shade_of(o));
    case V::kFail: return svg_tint(colour_of(v), 0.6 + 0.4 * shade_of(o));
    case V::kExpected: return svg_tint(colour_of(v), 0.35 + 0.65 * shade_of(o));
    default: return colour_of(v);
  }
}

std::string heat_text(const Observation& o) {
  switch (o.status) {
    case ObsStatus::kOk: return o.distinct > 1 ? fmt::format("{}/{}", o.distinct, o.fingerprints.size()) : "";
    case ObsStatus::kCrashed: return "crash";
    case ObsStatus::kTimeout: return "t/o";
    case ObsStatus::kError: return "err";
    case ObsStatus::kSkipped: return "";
  }
  return "";
}

std::vector<LegendEntry> verdict_legend(bool judged_run) {
  std::vector<LegendEntry> l;
  for (V v : kVerdicts) l.push_back({colour_of(v), name_of(v)});
  if (!judged_run) l.push_back({colour_of(V::kNone), name_of(V::kNone)});
  return l;
}

struct Grid {
  Names workloads, targets;
  std::map<std::pair<size_t, size_t>, const Observation*> cell;  // (target, workload)
  std::vector<std::vector<const Observation*>> by_target, by_workload;
};

Grid make_grid(const std::vector<Observation>& obs) {
  Grid g;
  for (auto& o : obs) {
    size_t w = g.workloads.add(o.workload), t = g.targets.add(o.target);
    g.cell[{t, w}] = &o;
    if (w == g.by_workload.size()) g.by_workload.emplace_back();
    if (t == g.by_target.size()) g.by_target.emplace_back();
    g.by_workload[w].push_back(&o);
    g.by_target[t].push_back(&o);
  }
  return g;
}

// Targets that skipped every workload (a GPU target on a machine without a GPU), by their reasons.
std::map<std::string, std::vector<size_t>> all_skipped(const Grid& g) {
  std::map<std::string, std::vector<size_t>> out;
  for (size_t t = 0; t < g.by_target.size(); ++t) {
    std::set<std::string> reasons;
    bool all = true;
    for (auto* o : g.by_target[t]) {
      all = all && o->status == ObsStatus::kSkipped;
      reasons.insert(skip_reason(*o));
    }
    if (!all) continue;
    std::string key;
    for (auto& s : reasons) key += (key.empty() ? "" : "; ") + s;
    out[key].push_back(t);
  }
  return out;
}

void add_figures(Section& mx, const Grid& g, const std::vector<size_t>& shown_targets, size_t hidden, bool judged_run) {
  HeatmapOptions ho;
  ho.title = "Verdict per target and workload";
  ho.legend = verdict_legend(judged_run);
  ho.note = "Shade: error against the oracle relative to its bound (light: far below, full colour: at the bound). "
            "k/N: distinct outputs.";
  if (hidden) ho.note += fmt::format(" {} targets that skipped every workload are left out.", hidden);
  for (size_t w = 0; w < g.workloads.list.size(); ++w) {
    ho.col_labels.push_back(fmt::format("w{}", w + 1));
    ho.col_legend.push_back(fmt::format("w{}  {}", w + 1, g.workloads.list[w]));
  }
  std::vector<HeatmapCell> cells;
  std::vector<StackedBar> bars;
  for (size_t row = 0; row < shown_targets.size(); ++row) {
    const size_t t = shown_targets[row];
    ho.row_labels.push_back(g.targets.list[t]);
    StackedBar bar{g.targets.list[t], std::vector<double>(std::size(kVerdicts), 0.0)};
    for (auto* o : g.by_target[t]) {
      const V v = verdict_of(*o);
      if (v != V::kNone) bar.values[static_cast<size_t>(v)] += 1;
      std::string tip = fmt::format("{} on {}: {}", o->workload, o->target, name_of(v));
      if (!o->verdict_reason.empty()) tip += " (" + o->verdict_reason + ")";
      if (o->status == ObsStatus::kOk)
        tip += fmt::format("; {} distinct of {}; {}", o->distinct, o->fingerprints.size(), oracle_words(*o));
      else if (!o->reason.empty())
        tip += "; " + o->reason;
      cells.push_back({row, g.workloads.index.at(o->workload), heat_fill(*o), heat_text(*o), tip});
    }
    bars.push_back(std::move(bar));
  }
  mx.svg(svg_heatmap(cells, ho), "heatmap of verdicts, targets × workloads");
  StackedBarOptions so;
  so.title = "Verdicts per target";
  so.x_label = "cells";
  so.segments = verdict_legend(judged_run);
  mx.svg(svg_stacked_bars(bars, so), "verdict counts per target");
}

const char* kMatrixLegend =
    "Each cell: a bold **k/N** when the N repeats gave k > 1 distinct outputs (none: every repeat gave the same "
    "bits); the largest error against the oracle `cpu-ref` as a multiple of the error bound of a correct "
    "summation of that length (`0.03×`: 3% of the bound; a correct kernel stays below `1×`) and `b` bits of "
    "agreement with it (raw ULPs in results.json; shown where no bound is known); the verdict when it is not "
    "PASS.";

// Most of the grid empty (it would grow with the square of the names): one row per observation.
void add_sparse_matrix(Section& mx, const Grid& g, size_t observations) {
  const size_t cells = g.workloads.list.size() * g.targets.list.size();
  mx.para(fmt::format("{} targets × {} workloads would make a grid of {} cells for {} observations; each workload's "
                      "targets are listed instead. {}",
                      g.targets.list.size(), g.workloads.list.size(), cells, observations, kMatrixLegend));
  std::vector<std::vector<Cell>> rows;
  for (size_t w = 0; w < g.by_workload.size(); ++w)
    for (size_t i = 0; i < g.by_workload[w].size(); ++i) {
      const Observation& o = *g.by_workload[w][i];
      rows.push_back({{i == 0 ? inline_code(o.workload) : "", ""}, {inline_code(o.target), ""}, matrix_cell(o)});
    }
  mx.table({"workload", "target", "result"}, rows).md_budget(kMdMatrix);
}

// The targets left out of the grid because they skipped every workload: one line per reason, and
// every name in a collapsed table.
void add_all_skipped(Section& mx, const Grid& g, const std::map<std::string, std::vector<size_t>>& skipped,
                     size_t hidden) {
  std::vector<std::string> lines;
  std::vector<std::vector<Cell>> names_rows;
  for (auto& [reason, ts] : skipped) {
    size_t n_cells = 0;
    std::vector<std::string> first;
    for (size_t t : ts) {
      n_cells += g.by_target[t].size();
      if (first.size() < 2) first.push_back(inline_code(g.targets.list[t]));
      names_rows.push_back({{inline_code(g.targets.list[t]), ""}, {inline_text(reason), "muted"}});
    }
    lines.push_back(fmt::format("{} target{} ({} cells) skipped every workload: {}: {}{}", ts.size(),
                                ts.size() == 1 ? "" : "s", n_cells, inline_text(reason), fmt::join(first, ", "),
                                ts.size() > first.size() ? fmt::format(" and {} more", ts.size() - first.size()) : ""));
  }
  mx.para("Not in the matrix, one line per reason:").list(lines).md_budget(kMdAllSkipped);
  mx.details(fmt::format("The {} targets that skipped every workload", hidden),
             Section{}.table({"target", "reason"}, names_rows).md_budget(kMdAllSkipped));
}

void add_matrix_section(Document& d, const std::vector<Observation>& obs) {
  const Grid g = make_grid(obs);
  auto& mx = d.add("Determinism matrix");
  const size_t cells = g.workloads.list.size() * g.targets.list.size();
  if (cells > kMatrixAlwaysCells && cells > kMatrixCellsPerObservation * obs.size()) {
    add_sparse_matrix(mx, g, obs.size());
    return;
  }
  const auto skipped = all_skipped(g);
  std::set<size_t> hidden;
  for (auto& [reason, ts] : skipped) hidden.insert(ts.begin(), ts.end());
  std::vector<size_t> shown;
  for (size_t t = 0; t < g.targets.list.size(); ++t)
    if (!hidden.count(t)) shown.push_back(t);
  mx.para(std::string(kMatrixLegend) + " Rows are targets, columns workloads (legend below).");
  if (!shown.empty()) add_figures(mx, g, shown, hidden.size(), judged(obs));

  std::vector<std::string> header = {"target"};
  for (size_t i = 0; i < g.workloads.list.size(); ++i) header.push_back(fmt::format("w{}", i + 1));
  std::vector<std::vector<Cell>> rows;
  for (size_t t : shown) {
    std::vector<Cell> row = {{inline_code(g.targets.list[t]), ""}};
    for (size_t w = 0; w < g.workloads.list.size(); ++w) {
      auto it = g.cell.find({t, w});
      row.push_back(it == g.cell.end() ? Cell{"—", "muted"} : matrix_cell(*it->second));
    }
    rows.push_back(row);
  }
  if (!rows.empty()) mx.table(header, rows).md_budget(kMdMatrix);
  if (!skipped.empty()) add_all_skipped(mx, g, skipped, hidden.size());
  std::vector<std::string> wl;
  for (size_t i = 0; i < g.workloads.list.size(); ++i)
    wl.push_back(fmt::format("w{}: {}", i + 1, inline_code(g.workloads.list[i])));
  mx.list(wl).md_budget(kMdWorkloadLegend);
}

// Where the errors of each failing cell lie relative to the bound (OracleDistance::ratio_hist).
void add_error_histograms(Document& d, const std::vector<Observation>& obs) {
  std::vector<HistogramPanel> panels;
  size_t failing = 0;
  for (auto& o : obs) {
    if (verdict_of(o) != V::kFail || !o.oracle || o.oracle->ratio_hist.size() != static_cast<size_t>(kRatioBuckets))
      continue;
    ++failing;
    if (panels.size() == kHistogramPanels) continue;
    std::vector<double> counts(o.oracle->ratio_hist.begin(), o.oracle->ratio_hist.end());
    panels.push_back({o.target, o.workload, counts});
  }
  if (panels.empty()) return;
  HistogramOptions ho;
  ho.title = "Error of each output element relative to its bound, failing cells";
  ho.x_label = "|error| / bound, bins of 4× (the first bin: bits equal to the oracle's)";
  // Bucket b (1..13) holds ratios in (2^(2b-26), 2^(2b-24)], [0] exact, [14] above 4 (metrics.hpp).
  ho.x_ticks = {{1, "2⁻²⁴"}, {7, "2⁻¹²"}, {13, "1"}, {14, "4"}};
  ho.marker = 13.0;
  ho.marker_label = "bound";
  auto& s = d.add("Error distribution of failing cells");
  s.para(fmt::format("{} failing cell{} with an error histogram{}; the dashed line is the error bound.", failing,
                     failing == 1 ? "" : "s",
                     failing > panels.size() ? fmt::format(" (the first {} drawn)", panels.size()) : ""));
  s.svg(svg_histograms(panels, ho), "error histograms of failing cells");
}

// ---- the other sections -------------------------------------------------------------------------

// The colour of an observed variation: the verdict's (neutral when it PASSed: nothing promised it
// away); unjudged results keep the red of reports before verdicts.
std::string finding_cls(const Observation& o) {
  const V v = verdict_of(o);
  return v == V::kNone ? "bad" : v == V::kPass ? "" : cls_of(v);
}

// A group of several outputs (nondeterministic targets) is coloured by its targets' verdicts: red only
// when one of them FAILs (or, unjudged, always), blue when the variation was promised.
std::string group_cls(const IdentityGroup& g, const std::string& workload, const Grid& grid) {
  if (g.fingerprints.size() <= 1) return "";
  V worst = V::kExpected;
  for (auto& t : g.targets) {
    auto it = grid.cell.find({grid.targets.index.at(t), grid.workloads.index.at(workload)});
    V v = it == grid.cell.end() ? V::kNone : verdict_of(*it->second);
    if (v == V::kFail || v == V::kNone) return "bad";
    if (v == V::kWarn) worst = V::kWarn;
  }
  return cls_of(worst);
}

// A workload in a few words for the external match line: "matmul", "conv2d bwd_data", "reduce sum".
std::string short_workload(const std::string& w) {
  Spec s;
  if (!parse_spec_syntax(w, &s).is_ok()) return w;
  const std::string k = s.has("pass") ? s.get("pass") : s.has("op") ? s.get("op") : "";
  return k.empty() ? s.name : s.name + " " + k;
}

}  // namespace

std::vector<std::string> external_match_lines(const std::vector<Observation>& obs) {
  // `detaudit import` marks every observation it records with where the outputs came from.
  std::set<std::string> imported_targets;
  for (auto& o : obs)
    if (o.details.count("imported_from")) imported_targets.insert(o.target);
  auto imported = [&](const std::string& target) { return imported_targets.count(target) > 0; };
  std::vector<std::string> externals;
  for (auto& o : obs)
    if (imported(o.target) && std::find(externals.begin(), externals.end(), o.target) == externals.end())
      externals.push_back(o.target);
  // "matmul ×3, reduce dot": each kind once, in order, with its count.
  auto kinds = [](const std::vector<std::string>& ws) {
    std::vector<std::pair<std::string, int>> k;
    for (auto& w : ws) {
      auto it = std::find_if(k.begin(), k.end(), [&](auto& p) { return p.first == w; });
      if (it == k.end()) k.push_back({w, 1}); else ++it->second;
    }
    std::vector<std::string> parts;
    for (auto& [w, n] : k) parts.push_back(n == 1 ? w : fmt::format("{} ×{}", w, n));
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  std::vector<std::string> lines;
  const auto groups = identity_groups(obs);
  for (const std::string& x : externals) {
    size_t workloads = 0, shared = 0;  // workloads x ran; of them, those some target ran too
    // Per matched target the workloads it matches on; targets matching on the same workloads are one entry.
    std::vector<std::pair<std::string, std::vector<std::string>>> matches;
    for (auto& wg : groups) {
      const auto mine = std::find_if(wg.groups.begin(), wg.groups.end(), [&](const IdentityGroup& g) {
        return std::find(g.targets.begin(), g.targets.end(), x) != g.targets.end();
      });
      if (mine == wg.groups.end()) continue;
      ++workloads;
      shared += std::any_of(wg.groups.begin(), wg.groups.end(), [&](const IdentityGroup& g) {
        return std::any_of(g.targets.begin(), g.targets.end(), [&](auto& t) { return !imported(t); });
      });
      for (auto& t : mine->targets) {
        if (imported(t)) continue;
        auto m = std::find_if(matches.begin(), matches.end(), [&](auto& p) { return p.first == t; });
        if (m == matches.end()) m = matches.insert(matches.end(), {t, {}});
        m->second.push_back(short_workload(wg.workload));
      }
    }
    if (matches.empty()) {
      lines.push_back(fmt::format("{} matches no target bit for bit ({} workloads, {} of them run by targets here)", x,
                                  workloads, shared));
      continue;
    }
    std::stable_sort(matches.begin(), matches.end(), [](auto& a, auto& b) { return a.second.size() > b.second.size(); });
    std::vector<std::pair<std::pair<std::string, std::vector<std::string>>, size_t>> alike;  // entry, targets alike
    for (auto& m : matches) {
      auto a = std::find_if(alike.begin(), alike.end(), [&](auto& p) { return p.first.second == m.second; });
      if (a == alike.end()) alike.push_back({m, 0}); else ++a->second;
    }
    auto more = [](size_t n) { return n == 0 ? std::string() : fmt::format("; {} more target{} alike", n, n == 1 ? "" : "s"); };
    std::string line = fmt::format("{} matches {} bit for bit on {} of {} workloads ({}{})", x, alike[0].first.first,
                                   alike[0].first.second.size(), workloads, kinds(alike[0].first.second), more(alike[0].second));
    constexpr size_t kOthers = 3;
    for (size_t i = 1; i < alike.size() && i <= kOthers; ++i)
      line += fmt::format("{}{} on {} ({}{})", i == 1 ? "; also " : "; ", alike[i].first.first, alike[i].first.second.size(),
                          kinds(alike[i].first.second), more(alike[i].second));
    if (alike.size() > kOthers + 1) line += fmt::format("; and {} more", alike.size() - kOthers - 1);
    lines.push_back(line);
  }
  return lines;
}

namespace {

void add_groups_section(Document& d, const std::vector<Observation>& obs) {
  const Grid grid = make_grid(obs);
  // report.html lists every target of a group; report.md the first few and a count, so that a group
  // of 80 targets is one short row.
  constexpr size_t kMdTargetsPerGroup = 3;
  std::vector<std::vector<Cell>> grows, md_rows;
  size_t split = 0, workloads = 0;
  for (auto& wg : identity_groups(obs)) {
    ++workloads;
    if (wg.groups.size() > 1) ++split;
    for (size_t g = 0; g < wg.groups.size(); ++g) {
      std::vector<std::string> fps;
      for (auto& f : wg.groups[g].fingerprints) fps.push_back(fp_short(f));
      std::vector<std::string> ts;
      for (auto& t : wg.groups[g].targets) ts.push_back(inline_code(t));
      const Cell first = {g == 0 ? inline_code(wg.workload) : "", ""};
      const Cell prints = {fmt::format("{}", fmt::join(fps, " ")), group_cls(wg.groups[g], wg.workload, grid)};
      grows.push_back({first, prints, {fmt::format("{}", fmt::join(ts, ", ")), ""}});
      std::vector<std::string> few(ts.begin(), ts.begin() + static_cast<std::ptrdiff_t>(std::min(ts.size(), kMdTargetsPerGroup)));
      md_rows.push_back({first, prints,
                         {fmt::format("{}: {}{}", ts.size(), fmt::join(few, ", "),
                                      ts.size() > few.size() ? fmt::format(" and {} more", ts.size() - few.size()) : ""),
                          ""}});
    }
  }
  auto& gs = d.add("Bit-identical groups");
  gs.para(fmt::format("For each workload, the targets whose outputs are identical bit for bit (targets that ran; a "
                      "nondeterministic target is grouped by the whole set of outputs it produced). {} of {} "
                      "workloads give more than one group.",
                      split, workloads));
  // Frameworks' outputs (detaudit import): which target's kernels they match.
  for (const std::string& line : external_match_lines(obs)) gs.para(inline_text(line));
  gs.details(fmt::format("Groups of the {} workloads", workloads),
             Section{}
                 .table({"workload", "fingerprint(s)", "targets"}, grows)
                 .html_only()
                 .table({"workload", "fingerprint(s)", "targets"}, md_rows)
                 .markdown_only()
                 .md_budget(kMdGroups));
}

void add_claims_section(Document& d, const std::vector<Observation>& obs) {
  std::vector<std::vector<Cell>> claims;
  for (auto& o : obs) {
    auto it = o.details.find("claimed_deterministic");
    if (it == o.details.end() || o.status != ObsStatus::kOk) continue;
    bool claimed = it->second == "yes";
    bool observed = o.distinct == 1;
    // The stored verdict; results without one show what the statuses say.
    Cell verdict = verdict_of(o) != V::kNone
                       ? Cell{inline_text(verdict_text(o.verdict)), cls_of(verdict_of(o))}
                       : Cell{claimed == observed ? "agrees" : (claimed ? "CLAIM VIOLATED" : "no variation seen"),
                              claimed && !observed ? "bad" : ""};
    auto algo = o.details.find("algo_name");
    // The second claim (cudnn_ops.h's marks; absent in results of older versions). "not implemented"
    // claims nothing about determinism, and an algorithm that ran against that mark is flagged.
    auto doc = o.details.find("documented_deterministic");
    Cell header{"", ""};
    if (doc != o.details.end() && (doc->second == "yes" || doc->second == "no"))
      header = {doc->second == "yes" ? "deterministic" : "nondeterministic", (doc->second == "yes") != claimed ? "bad" : ""};
    else if (doc != o.details.end() && doc->second == "not implemented")
      header = {"not implemented (no claim)", "bad"};
    claims.push_back({{inline_code(o.workload), ""},
                      {inline_code(o.target), ""},
                      {algo == o.details.end() ? "" : inline_text(algo->second), ""},
                      {claimed ? "deterministic" : "nondeterministic", ""},
                      header,
                      {fmt::format("{} distinct in {}", o.distinct, o.fingerprints.size()),
                       observed ? "ok" : finding_cls(o)},
                      verdict});
  }
  if (!claims.empty())
    d.add("Claimed vs observed determinism")
        .para("Each algorithm's two claims, cuDNN's own at run time (the `determinism` field of "
              "cudnnFind*AlgorithmEx) and the `/* non-deterministic */` marks of cudnn_ops.h, against what N "
              "bitwise-compared runs showed; two claims that disagree are a WARN. A nondeterministic claim with "
              "one output only means no variation was seen in these runs.")
        .details(fmt::format("{} algorithms", claims.size()),
                 Section{}.table({"workload", "target", "algorithm", "Find claims", "cudnn_ops.h", "observed", "verdict"},
                                 claims)
                     .md_budget(kMdClaims));
}

void add_kernel_section(Document& d, const std::vector<Observation>& obs) {
  std::vector<std::string> attributions;
  for (auto& o : obs) {
    if (cell_verdict(o) != CellVerdict::kNondeterministic || o.kernels.empty()) continue;
    // Fingerprints that ran the same kernel sequence are one entry: "the same kernels gave 7 outputs"
    // reads at a glance, seven copies of one kernel list do not.
    struct BySequence {
      std::vector<std::string> names, fingerprints;
      int runs = 0, untraced = 0;
      bool varies = false;
    };
    std::vector<BySequence> seqs;
    for (auto& g : kernels_by_fingerprint(o)) {
      auto it = std::find_if(seqs.begin(), seqs.end(), [&](const BySequence& s) { return s.names == g.kernel_names; });
      if (it == seqs.end()) it = seqs.insert(seqs.end(), BySequence{g.kernel_names, {}, 0, 0, false});
      it->fingerprints.push_back(fp_short(g.fingerprint));
      it->runs += g.runs;
      it->untraced += g.untraced;
      it->varies = it->varies || g.sequence_varies;
    }
    std::string t = fmt::format("{} on {}:", inline_code(o.workload), inline_code(o.target));
    for (auto& s : seqs) {
      std::vector<std::string> names;
      for (auto& k : s.names) names.push_back(inline_code(k));
      t += fmt::format(" fingerprint{} {} ({} run{}{}): kernels [{}]{};", s.fingerprints.size() == 1 ? "" : "s",
                       fmt::join(s.fingerprints, ", "), s.runs, s.runs == 1 ? "" : "s",
                       s.untraced ? fmt::format(", {} not traced", s.untraced) : "", fmt::join(names, ", "),
                       s.varies ? " (sequence varies)" : "");
    }
    attributions.push_back(t);
  }
  std::vector<std::string> traces;
  for (auto& o : obs)
    if (!o.tracing.empty() && o.tracing != "ok")
      traces.push_back(fmt::format("{} on {}: {}", inline_code(o.workload), inline_code(o.target), inline_text(o.tracing)));
  if (attributions.empty() && traces.empty()) return;
  Section inner;
  if (!attributions.empty())
    inner.para("Which kernel sequences went with which output (CUPTI):")
        .list(attributions)
        .cap(kListCap, "results.json")
        .md_budget(kMdKernels);
  if (!traces.empty()) inner.para("Tracing unavailable:").list(traces).cap(kListCap, "results.json").md_budget(kMdKernels / 2);
  d.add("Kernel attribution")
      .details(fmt::format("{} nondeterministic cells with kernel traces, {} without tracing", attributions.size(),
                           traces.size()),
               std::move(inner));
}

void add_batch_section(Document& d, const std::vector<Observation>& obs) {
  std::vector<std::vector<Cell>> brows;
  size_t variant = 0;
  for (auto& o : obs) {
    if (!o.batch) continue;
    if (!o.batch->invariant()) ++variant;
    brows.push_back({{inline_code(o.workload), ""},
                     {inline_code(o.target), ""},
                     {o.batch->invariant() ? "invariant" : "NOT invariant",
                      o.batch->invariant() ? "ok" : finding_cls(o)},
                     {fmt::format("{} of {}", o.batch->rows_differing, o.batch->rows_checked), ""},
                     {inline_text(verdict_text(o.verdict)), cls_of(verdict_of(o))}});
  }
  if (brows.empty()) return;
  d.add("Batch invariance")
      .para(fmt::format("Row i of A·B computed alone (a 1-row product) against the same row inside the full product, "
                        "bitwise: {} of {} targets are not batch-invariant.",
                        variant, brows.size()))
      .details("Every target", Section{}.table({"workload", "target", "rows", "rows differing", "verdict"}, brows)
                                   .md_budget(kMdBatch));
}

// The timing table summarised: per target the median over its cells of each cell's median, and its
// slowest cell; the slowest cells overall; every cell in report.html only.
void add_timing_section(Document& d, const std::vector<Observation>& obs) {
  struct Timed {
    const Observation* o;
    double median_ms;
  };
  std::vector<Timed> timed;
  Names targets;
  std::vector<std::vector<Timed>> per_target;
  for (auto& o : obs) {
    if (o.seconds.empty()) continue;
    Timed t{&o, median(o.seconds) * 1e3};
    timed.push_back(t);
    size_t i = targets.add(o.target);
    if (i == per_target.size()) per_target.emplace_back();
    per_target[i].push_back(t);
  }
  if (timed.empty()) return;
  std::vector<std::vector<Cell>> rows;
  for (size_t i = 0; i < per_target.size(); ++i) {
    std::vector<double> m;
    const Timed* slowest = &per_target[i][0];
    for (auto& t : per_target[i]) {
      m.push_back(t.median_ms);
      if (t.median_ms > slowest->median_ms) slowest = &t;
    }
    rows.push_back({{inline_code(targets.list[i]), ""},
                    {std::to_string(per_target[i].size()), ""},
                    {fmt::format("{:.3g}", median(m)), ""},
                    {fmt::format("{:.3g}", slowest->median_ms), ""},
                    {inline_code(slowest->o->workload), "muted"}});
  }
  std::vector<Timed> by_time = timed;
  std::stable_sort(by_time.begin(), by_time.end(), [](const Timed& a, const Timed& b) { return a.median_ms > b.median_ms; });
  std::vector<std::string> slow;
  for (size_t i = 0; i < by_time.size() && i < kSlowestCells; ++i)
    slow.push_back(fmt::format("{:.3g} ms: {} on {}", by_time[i].median_ms, inline_code(by_time[i].o->workload),
                               inline_code(by_time[i].o->target)));
  std::vector<std::vector<Cell>> all;
  for (auto& t : timed)
    all.push_back({{inline_code(t.o->workload), ""},
                   {inline_code(t.o->target), ""},
                   {fmt::format("{:.3g}", t.median_ms), ""},
                   {fmt::format("{:.3g}", *std::min_element(t.o->seconds.begin(), t.o->seconds.end()) * 1e3), ""},
                   {inline_text(t.o->describe), "muted"}});
  d.add("Timing")
      .para("Wall time per repeat in milliseconds. Per target: the median over its cells of each cell's median, and "
            "its slowest cell.")
      .table({"target", "cells", "median ms", "slowest ms", "slowest cell"}, rows)
      .md_budget(kMdTiming)
      .para("Slowest cells (median):")
      .list(slow)
      .md_budget(kMdSlowest)
      .details(fmt::format("Every cell ({})", all.size()),
               Section{}.table({"workload", "target", "median ms", "min ms", "ran as"}, all))
      .html_only();
}

// The first word of a version string that has a digit in it: "OpenBLAS 0.3.21 NO_LAPACKE ..." -> "0.3.21".
std::string short_version(const nlohmann::json& v) {
  std::string s = jf::text(v);
  for (size_t i = 0; i < s.size();) {
    size_t j = std::min(s.find(' ', i), s.size());
    std::string word = s.substr(i, j - i);
    if (word.find_first_of("0123456789") != std::string::npos) return word;
    i = j + 1;
  }
  return s.substr(0, 24);
}

std::string machine_line(const nlohmann::json& m) {
  std::vector<std::string> parts;
  parts.push_back(inline_code(capped(jf::str(m, "hostname", "unknown host"))));
  std::string cpu = inline_text(capped(jf::str(m, "cpu_model", "unknown CPU")));
  if (jf::integer(m, "cores")) cpu += fmt::format(", {} cores", jf::integer(m, "cores"));
  parts.push_back(cpu);
  const auto& gpus = jf::array(m, "gpus");
  if (gpus.empty()) {
    std::string why = jf::str(m, kCudaMachineKey);  // the CUDA device kind's line
    parts.push_back("no GPU" + (why.empty() ? std::string() : " (" + inline_text(capped(why.substr(0, why.find(": ")))) + ")"));
  } else {
    std::map<std::string, int> names;
    for (auto& g : gpus)
      ++names[fmt::format("{} (CC {}, {} SMs)", jf::str(g, "name", "GPU"), jf::str(g, "compute_capability", "?"),
                          jf::integer(g, "sm_count"))];
    std::vector<std::string> gs;
    for (auto& [n, k] : names) gs.push_back(fmt::format("{} × {}", k, inline_text(capped(n))));
    if (gs.size() > 4) gs.resize(4), gs.push_back("…");
    parts.push_back(fmt::format("{}", fmt::join(gs, ", ")));
  }
  std::vector<std::string> libs;
  const auto& l = jf::object(m, "libraries");
  // The libraries the machine names a version of, by name (the first eight; all are in the Machine section).
  for (auto& [k, v] : l.items())
    if (v.is_string() || v.is_number()) libs.push_back(fmt::format("{} {}", inline_text(capped(k)), inline_text(capped(short_version(v)))));
  if (libs.size() > 8) libs.resize(8), libs.push_back("…");
  if (!libs.empty()) parts.push_back(fmt::format("{}", fmt::join(libs, ", ")));
  return fmt::format("Machine: {}; the full description is at the end.", fmt::join(parts, " · "));
}

}  // namespace

void add_run_lines(Document& d, const Results& r) {
  auto& s = d.add("");
  s.para(fmt::format("{} · detaudit {} (commit {}) · started {}{}",
                     r.command.empty() ? std::string("command line not recorded") : inline_code(capped(r.command)),
                     inline_text(capped(r.tool_version)), inline_code(r.tool_commit.empty() ? "unknown" : capped(r.tool_commit)),
                     inline_text(r.started_at.empty() ? "unknown" : capped(r.started_at)),
                     r.finished_at.empty() ? ", not finished: partial results"
                                           : ", finished " + inline_text(capped(r.finished_at))));
  s.para(machine_line(r.machine));
}

void add_machine_section(Document& d, const nlohmann::json& m) {
  auto& s = d.add("Machine");
  std::vector<std::vector<Cell>> rows;
  auto row = [&](const std::string& k, const nlohmann::json& v) {
    if (v.is_null()) return;
    rows.push_back({{inline_text(k), ""}, {inline_text(jf::text(v)), ""}});
  };
  for (const char* k : {"hostname", "os", "cpu_model", "cpu_vendor", "packages", "cores", "pus", "numa_nodes",
                        "cpu_features", "compiler", "hwloc", "topology_error", kCudaMachineKey})
    row(k, jf::get(m, k));
  for (auto& c : jf::array(m, "caches"))
    row(fmt::format("L{} cache", jf::integer(c, "level")),
        nlohmann::json(fmt::format("{} KiB × {} (line {} B)", jf::integer(c, "size_bytes") / 1024, jf::integer(c, "count"),
                                   jf::integer(c, "line_bytes"))));
  for (auto& [k, v] : jf::object(m, "libraries").items()) row("library: " + k, v);
  s.table({"property", "value"}, rows).md_budget(kMdMachine);
  const auto& gpus = jf::array(m, "gpus");
  if (gpus.empty()) return;
  std::vector<std::vector<Cell>> g;
  for (auto& x : gpus)
    g.push_back({{std::to_string(jf::integer(x, "index")), ""},
                 {inline_text(jf::str(x, "name")), ""},
                 {inline_text(jf::str(x, "uuid")), ""},
                 {inline_text(jf::str(x, "compute_capability")), ""},
                 {std::to_string(jf::integer(x, "sm_count")), ""},
                 {fmt::format("{:.1f} GiB", jf::number(x, "memory_bytes").value_or(0) / 1073741824.0), ""},
                 {fmt::format("{} MiB", jf::integer(x, "l2_bytes") / 1048576), ""},
                 {fmt::format("{} / {} MHz", jf::integer(x, "clock_khz") / 1000, jf::integer(x, "memory_clock_khz") / 1000), ""},
                 {jf::boolean(x, "ecc") ? "on" : "off", ""},
                 {inline_text(jf::str(x, "pci_bus_id")), ""},
                 {inline_text(jf::str(x, "local_cpuset")), ""}});
  s.table({"GPU", "name", "UUID", "CC", "SMs", "memory", "L2", "clocks (SM / mem)", "ECC", "PCI", "local CPUs"}, g)
      .md_budget(kMdGpus);
}

void add_probe_sections(Document& d, const Results& r) {
  add_verdict_section(d, r);
  add_matrix_section(d, r.observations);
  add_error_histograms(d, r.observations);
  add_groups_section(d, r.observations);
  add_claims_section(d, r.observations);
  add_kernel_section(d, r.observations);
  add_batch_section(d, r.observations);
  add_timing_section(d, r.observations);
}

}  // namespace detaudit
