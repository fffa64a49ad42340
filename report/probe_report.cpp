#include "report/probe_report.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "probes/verdict.hpp"
#include "report/json_fields.hpp"

namespace detaudit {

namespace {

namespace jf = json_fields;

// The size of the report stays linear in the number of observations: the matrix is drawn only when
// it is dense enough (or small), and the verdict's lists stop after kListCap items with a count.
constexpr size_t kMatrixAlwaysCells = 1000;
constexpr size_t kMatrixCellsPerObservation = 4;
constexpr size_t kListCap = 100;

std::string ulp_text(const Observation& o) {
  if (!o.oracle) return "";
  if (o.oracle->max_ulp == kUlpInfinite) return "NaN vs number";
  return fmt::format("{} ulp", o.oracle->max_ulp);
}

Cell matrix_cell(const Observation& o) {
  switch (cell_verdict(o)) {
    case CellVerdict::kDeterministic: {
      std::string t = fmt::format("1/{}", o.fingerprints.size());
      if (o.oracle) t += " · " + ulp_text(o);
      return {t, "ok"};
    }
    case CellVerdict::kNondeterministic: {
      std::string t = fmt::format("**{}/{}**", o.distinct, o.fingerprints.size());
      if (o.oracle) t += " · " + ulp_text(o);
      return {t, "bad"};
    }
    case CellVerdict::kCrashed: return {"crashed " + inline_text(o.reason.substr(0, o.reason.find(' '))), "bad"};
    case CellVerdict::kTimeout: return {"timeout", "bad"};
    case CellVerdict::kSkipped: return {"skipped", "skip"};
    case CellVerdict::kError: return {"error", "warn"};
  }
  return {"?", ""};
}

std::string fp_short(const std::string& fp) { return inline_text(fp.substr(0, 8)); }

// Keeps the first kListCap items and says how many more there were.
void cap_list(std::vector<std::string>* items, const std::string& where) {
  if (items->size() <= kListCap) return;
  size_t more = items->size() - kListCap;
  items->resize(kListCap);
  items->push_back(fmt::format("… and {} more (see {})", more, where));
}

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

void add_verdict_section(Document& d, const Results& r) {
  const auto& obs = r.observations;
  Summary sum = summarize(obs);
  auto& v = d.add("Verdict");
  int ran = sum.deterministic + sum.nondeterministic;
  std::string head = fmt::format("{} of {} workload × target cells that ran are run-to-run deterministic; {} are not.",
                                 sum.deterministic, ran, sum.nondeterministic);
  v.para(head, sum.nondeterministic ? "bad" : (ran ? "ok" : "warn"));
  v.para(fmt::format("{} cells in all: {} crashed, {} timed out, {} skipped, {} errors. Suite {}, {} repeats per cell, "
                     "started {}{}.",
                     sum.cells, sum.crashed, sum.timeout, sum.skipped, sum.error,
                     inline_code(jf::str(r.plan, "suite", "custom")), jf::integer(r.plan, "repeats"),
                     inline_text(r.started_at),
                     r.finished_at.empty() ? " (not finished: partial results)" : ", finished " + inline_text(r.finished_at)));
  std::vector<std::string> nondet;
  for (auto& o : obs)
    if (cell_verdict(o) == CellVerdict::kNondeterministic)
      nondet.push_back(fmt::format("nondeterministic: {} on {}: {} distinct outputs in {} runs", inline_code(o.workload),
                                   inline_code(o.target), o.distinct, o.fingerprints.size()));
  cap_list(&nondet, "the matrix");
  // Crashes, timeouts and errors are listed per target and reason; skips are grouped by reason across
  // targets (a machine without a GPU skips dozens of cells for one reason), so the top stays short.
  std::map<std::pair<std::string, std::string>, size_t> by_reason;  // (verdict: target, reason) -> workloads
  std::map<std::string, Names> skips;                                // reason -> targets
  std::map<std::string, int> skip_cells;
  for (auto& o : obs) {
    auto cv = cell_verdict(o);
    if (cv == CellVerdict::kCrashed || cv == CellVerdict::kTimeout || cv == CellVerdict::kError)
      ++by_reason[{std::string(to_string(cv)) + ": " + inline_code(o.target), o.reason}];
    if (cv == CellVerdict::kSkipped) {
      // "cublas: no CUDA device: ..." and "cuda: no CUDA device: ..." are one reason.
      std::string reason = o.reason.empty() ? "no reason given" : o.reason;
      std::string backend = o.target.substr(0, o.target.find_first_of(":?"));
      if (reason.rfind(backend + ": ", 0) == 0) reason = reason.substr(backend.size() + 2);
      skips[reason].add(o.target);
      ++skip_cells[reason];
    }
  }
  std::vector<std::string> failures;
  for (auto& [key, n] : by_reason)
    failures.push_back(fmt::format("{} ({} workload{}): {}", key.first, n, n == 1 ? "" : "s",
                                   key.second.empty() ? "no reason given" : inline_text(key.second)));
  for (auto& [reason, ts] : skips) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < ts.list.size() && i < 6; ++i) shown.push_back(inline_code(ts.list[i]));
    failures.push_back(fmt::format("skipped ({} cell{} on {} target{}): {}: {}{}", skip_cells[reason],
                                   skip_cells[reason] == 1 ? "" : "s", ts.list.size(), ts.list.size() == 1 ? "" : "s",
                                   inline_text(reason), fmt::join(shown, ", "),
                                   ts.list.size() > 6 ? fmt::format(" and {} more", ts.list.size() - 6) : ""));
  }
  cap_list(&failures, "the matrix and results.json");
  // A library that silently runs something other than what was asked (OpenBLAS maps unknown core
  // names to another core) is a finding: the target's name would otherwise lie.
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
  cap_list(&other, "the batch invariance section and results.json");
  // An oracle that could not be computed is the oracle's failure, not a target's: its workload's cells
  // show no distance.
  std::vector<std::string> oracle;
  for (auto& [w, why] : r.oracle_failures)
    oracle.push_back(fmt::format("oracle failed: {}: {}; its cells carry no distance to the oracle", inline_code(w),
                                 inline_text(why)));
  cap_list(&oracle, "results.json's oracle_failures");
  other.insert(other.begin(), oracle.begin(), oracle.end());
  std::vector<std::string> items = std::move(nondet);
  items.insert(items.end(), failures.begin(), failures.end());
  items.insert(items.end(), other.begin(), other.end());
  if (!items.empty()) v.list(items);
}

// Targets x workloads when the grid is dense enough to be worth drawing; otherwise (most cells
// empty: the grid would grow with the square of the names) one row per observation, by workload.
void add_matrix_section(Document& d, const std::vector<Observation>& obs) {
  Names workloads, targets;
  std::map<std::pair<size_t, size_t>, const Observation*> cell;  // (target, workload)
  std::vector<std::vector<const Observation*>> by_workload;
  for (auto& o : obs) {
    size_t w = workloads.add(o.workload), t = targets.add(o.target);
    cell[{t, w}] = &o;
    if (w == by_workload.size()) by_workload.emplace_back();
    by_workload[w].push_back(&o);
  }
  auto& mx = d.add("Determinism matrix");
  size_t cells = workloads.list.size() * targets.list.size();
  if (cells > kMatrixAlwaysCells && cells > kMatrixCellsPerObservation * obs.size()) {
    mx.para(fmt::format("{} targets × {} workloads would make a grid of {} cells for {} observations; each workload's "
                        "targets are listed instead. Each result: distinct outputs over the repeats (1/N is run-to-run "
                        "deterministic) · largest distance to the oracle `cpu-ref` in ULPs.",
                        targets.list.size(), workloads.list.size(), cells, obs.size()));
    std::vector<std::vector<Cell>> rows;
    for (size_t w = 0; w < by_workload.size(); ++w)
      for (size_t i = 0; i < by_workload[w].size(); ++i) {
        const Observation& o = *by_workload[w][i];
        rows.push_back({{i == 0 ? inline_code(o.workload) : "", ""}, {inline_code(o.target), ""}, matrix_cell(o)});
      }
    mx.table({"workload", "target", "result"}, rows);
    return;
  }
  mx.para("Each cell: distinct outputs over the repeats (1/N is run-to-run deterministic) · largest distance to the "
          "oracle `cpu-ref` in ULPs. Rows are targets, columns workloads (legend below).");
  std::vector<std::string> header = {"target"};
  for (size_t i = 0; i < workloads.list.size(); ++i) header.push_back(fmt::format("w{}", i + 1));
  std::vector<std::vector<Cell>> rows;
  for (size_t t = 0; t < targets.list.size(); ++t) {
    std::vector<Cell> row = {{inline_code(targets.list[t]), ""}};
    for (size_t w = 0; w < workloads.list.size(); ++w) {
      auto it = cell.find({t, w});
      row.push_back(it == cell.end() ? Cell{"—", "muted"} : matrix_cell(*it->second));
    }
    rows.push_back(row);
  }
  mx.table(header, rows);
  std::vector<std::string> legend;
  for (size_t i = 0; i < workloads.list.size(); ++i)
    legend.push_back(fmt::format("w{}: {}", i + 1, inline_code(workloads.list[i])));
  mx.list(legend);
}

void add_groups_section(Document& d, const std::vector<Observation>& obs) {
  auto& gs = d.add("Bit-identical groups");
  gs.para("For each workload, the targets whose outputs are identical bit for bit (targets that ran; a "
          "nondeterministic target is grouped by the whole set of outputs it produced).");
  std::vector<std::vector<Cell>> grows;
  for (auto& wg : identity_groups(obs)) {
    for (size_t g = 0; g < wg.groups.size(); ++g) {
      std::vector<std::string> fps;
      for (auto& f : wg.groups[g].fingerprints) fps.push_back(fp_short(f));
      std::vector<std::string> ts;
      for (auto& t : wg.groups[g].targets) ts.push_back(inline_code(t));
      grows.push_back({{g == 0 ? inline_code(wg.workload) : "", ""},
                       {fmt::format("{}", fmt::join(fps, " ")), wg.groups[g].fingerprints.size() > 1 ? "bad" : ""},
                       {fmt::format("{}", fmt::join(ts, ", ")), ""}});
    }
  }
  gs.table({"workload", "fingerprint(s)", "targets"}, grows);
}

void add_claims_section(Document& d, const std::vector<Observation>& obs) {
  std::vector<std::vector<Cell>> claims;
  for (auto& o : obs) {
    auto it = o.details.find("claimed_deterministic");
    if (it == o.details.end() || o.status != ObsStatus::kOk) continue;
    bool claimed = it->second == "yes";
    bool observed = o.distinct == 1;
    std::string verdict = claimed == observed ? "agrees" : (claimed ? "CLAIM VIOLATED" : "no variation seen");
    auto algo = o.details.find("algo_name");
    claims.push_back({{inline_code(o.workload), ""},
                      {inline_code(o.target), ""},
                      {algo == o.details.end() ? "" : inline_text(algo->second), ""},
                      {claimed ? "deterministic" : "nondeterministic", ""},
                      {fmt::format("{} distinct in {}", o.distinct, o.fingerprints.size()), observed ? "ok" : "bad"},
                      {verdict, claimed && !observed ? "bad" : ""}});
  }
  if (!claims.empty())
    d.add("Claimed vs observed determinism")
        .para("Each algorithm's own claim (cuDNN `determinism`) against what N bitwise-compared runs showed. A "
              "nondeterministic claim with one output only means no variation was seen in these runs.")
        .table({"workload", "target", "algorithm", "claimed", "observed", "verdict"}, claims);
}

void add_kernel_section(Document& d, const std::vector<Observation>& obs) {
  std::vector<std::string> attributions;
  for (auto& o : obs) {
    if (cell_verdict(o) != CellVerdict::kNondeterministic || o.kernels.empty()) continue;
    std::string t = fmt::format("{} on {}:", inline_code(o.workload), inline_code(o.target));
    for (auto& g : kernels_by_fingerprint(o)) {
      std::vector<std::string> names;
      for (auto& k : g.kernel_names) names.push_back(inline_code(k));
      t += fmt::format(" fingerprint {}: {} run{}, kernels [{}]{};", fp_short(g.fingerprint), g.runs, g.runs == 1 ? "" : "s",
                       fmt::join(names, ", "), g.sequence_varies ? " (sequence varies)" : "");
    }
    attributions.push_back(t);
  }
  std::vector<std::string> traces;
  for (auto& o : obs)
    if (!o.tracing.empty() && o.tracing != "ok")
      traces.push_back(fmt::format("{} on {}: {}", inline_code(o.workload), inline_code(o.target), inline_text(o.tracing)));
  cap_list(&attributions, "results.json");
  cap_list(&traces, "results.json");
  if (!attributions.empty() || !traces.empty()) {
    auto& ka = d.add("Kernel attribution");
    if (!attributions.empty()) ka.para("Which kernel sequences went with which output (CUPTI):").list(attributions);
    if (!traces.empty()) ka.para("Tracing unavailable:").list(traces);
  }
}

void add_batch_and_timing_sections(Document& d, const std::vector<Observation>& obs) {
  std::vector<std::vector<Cell>> brows;
  for (auto& o : obs)
    if (o.batch)
      brows.push_back({{inline_code(o.workload), ""},
                       {inline_code(o.target), ""},
                       {o.batch->invariant() ? "invariant" : "NOT invariant", o.batch->invariant() ? "ok" : "bad"},
                       {fmt::format("{} of {}", o.batch->rows_differing, o.batch->rows_checked), ""}});
  if (!brows.empty())
    d.add("Batch invariance")
        .para("Row i of A·B computed alone (a 1-row product) against the same row inside the full product, bitwise.")
        .table({"workload", "target", "verdict", "rows differing"}, brows);

  std::vector<std::vector<Cell>> trows;
  for (auto& o : obs) {
    if (o.seconds.empty()) continue;
    std::vector<double> s = o.seconds;
    std::sort(s.begin(), s.end());
    trows.push_back({{inline_code(o.workload), ""},
                     {inline_code(o.target), ""},
                     {fmt::format("{:.3g}", s[s.size() / 2] * 1e3), ""},
                     {fmt::format("{:.3g}", s.front() * 1e3), ""},
                     {inline_text(o.describe), "muted"}});
  }
  if (!trows.empty())
    d.add("Timing").para("Wall time per repeat in milliseconds (median, min), and what ran.")
        .table({"workload", "target", "median ms", "min ms", "ran as"}, trows);
}

}  // namespace

void add_machine_section(Document& d, const nlohmann::json& m) {
  auto& s = d.add("Machine");
  std::vector<std::vector<Cell>> rows;
  auto row = [&](const std::string& k, const nlohmann::json& v) {
    if (v.is_null()) return;
    rows.push_back({{inline_text(k), ""}, {inline_text(jf::text(v)), ""}});
  };
  for (const char* k : {"hostname", "os", "cpu_model", "cpu_vendor", "packages", "cores", "pus", "numa_nodes",
                        "cpu_features", "compiler", "hwloc", "topology_error", "cuda"})
    row(k, jf::get(m, k));
  for (auto& c : jf::array(m, "caches"))
    row(fmt::format("L{} cache", jf::integer(c, "level")),
        nlohmann::json(fmt::format("{} KiB × {} (line {} B)", jf::integer(c, "size_bytes") / 1024, jf::integer(c, "count"),
                                   jf::integer(c, "line_bytes"))));
  for (auto& [k, v] : jf::object(m, "libraries").items()) row("library: " + k, v);
  s.table({"property", "value"}, rows);
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
  s.table({"GPU", "name", "UUID", "CC", "SMs", "memory", "L2", "clocks (SM / mem)", "ECC", "PCI", "local CPUs"}, g);
}

Document build_probe_document(const Results& r) {
  Document d;
  d.title = "detaudit probe report";
  add_verdict_section(d, r);
  add_matrix_section(d, r.observations);
  add_groups_section(d, r.observations);
  add_claims_section(d, r.observations);
  add_kernel_section(d, r.observations);
  add_batch_and_timing_sections(d, r.observations);
  add_machine_section(d, r.machine);
  return d;
}

}  // namespace detaudit
