#include "report/probe_report.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "probes/verdict.hpp"

namespace detaudit {

namespace {

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
    case CellVerdict::kCrashed: {
      auto sp = o.reason.find(' ');
      return {"crashed " + o.reason.substr(0, sp), "bad"};
    }
    case CellVerdict::kTimeout: return {"timeout", "bad"};
    case CellVerdict::kSkipped: return {"skipped", "skip"};
    case CellVerdict::kError: return {"error", "warn"};
  }
  return {"?", ""};
}

std::string fp_short(const std::string& fp) { return fp.substr(0, 8); }

}  // namespace

void add_machine_section(Document& d, const nlohmann::json& m) {
  auto& s = d.add("Machine");
  std::vector<std::vector<Cell>> rows;
  auto row = [&](const std::string& k, const nlohmann::json& v) {
    if (v.is_null()) return;
    rows.push_back({{k, ""}, {v.is_string() ? v.get<std::string>() : v.dump(), ""}});
  };
  for (const char* k : {"hostname", "os", "cpu_model", "cpu_vendor", "packages", "cores", "pus", "numa_nodes",
                        "cpu_features", "compiler", "hwloc", "topology_error", "cuda"})
    if (m.contains(k)) row(k, m[k]);
  if (m.contains("caches"))
    for (auto& c : m["caches"])
      row(fmt::format("L{} cache", c.value("level", 0)),
          nlohmann::json(fmt::format("{} KiB × {} (line {} B)", c.value("size_bytes", uint64_t(0)) / 1024,
                                     c.value("count", 0), c.value("line_bytes", 0))));
  if (m.contains("libraries"))
    for (auto& [k, v] : m["libraries"].items()) row("library: " + k, v);
  s.table({"property", "value"}, rows);
  if (m.contains("gpus") && !m["gpus"].empty()) {
    std::vector<std::vector<Cell>> g;
    for (auto& x : m["gpus"])
      g.push_back({{std::to_string(x.value("index", 0)), ""},
                   {x.value("name", ""), ""},
                   {x.value("uuid", ""), ""},
                   {x.value("compute_capability", ""), ""},
                   {std::to_string(x.value("sm_count", 0)), ""},
                   {fmt::format("{:.1f} GiB", x.value("memory_bytes", uint64_t(0)) / 1073741824.0), ""},
                   {fmt::format("{} MiB", x.value("l2_bytes", 0) / 1048576), ""},
                   {fmt::format("{} / {} MHz", x.value("clock_khz", 0) / 1000, x.value("memory_clock_khz", 0) / 1000), ""},
                   {x.value("ecc", false) ? "on" : "off", ""},
                   {x.value("pci_bus_id", ""), ""},
                   {x.value("local_cpuset", ""), ""}});
    s.table({"GPU", "name", "UUID", "CC", "SMs", "memory", "L2", "clocks (SM / mem)", "ECC", "PCI", "local CPUs"}, g);
  }
}

Document build_probe_document(const Results& r) {
  Document d;
  d.title = "detaudit probe report";
  const auto& obs = r.observations;
  Summary sum = summarize(obs);

  // ---- verdict ---------------------------------------------------------------------------------
  auto& v = d.add("Verdict");
  int ran = sum.deterministic + sum.nondeterministic;
  std::string head = fmt::format("{} of {} workload × target cells that ran are run-to-run deterministic; {} are not.",
                                 sum.deterministic, ran, sum.nondeterministic);
  v.para(head, sum.nondeterministic ? "bad" : (ran ? "ok" : "warn"));
  v.para(fmt::format("{} cells in all: {} crashed, {} timed out, {} skipped, {} errors. Suite `{}`, {} repeats per cell, "
                     "started {}{}.",
                     sum.cells, sum.crashed, sum.timeout, sum.skipped, sum.error, r.plan.value("suite", "custom"),
                     r.plan.value("repeats", 0), r.started_at,
                     r.finished_at.empty() ? " (not finished: partial results)" : ", finished " + r.finished_at));
  std::vector<std::string> items;
  for (auto& o : obs)
    if (cell_verdict(o) == CellVerdict::kNondeterministic)
      items.push_back(fmt::format("nondeterministic: `{}` on `{}`: {} distinct outputs in {} runs", o.workload, o.target,
                                  o.distinct, o.fingerprints.size()));
  // Crashes, timeouts and errors are listed per target and reason; skips are grouped by reason across
  // targets (a machine without a GPU skips dozens of cells for one reason), so the top stays short.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> by_reason;
  std::map<std::string, std::vector<std::string>> skips;  // reason -> targets (unique, in order)
  std::map<std::string, int> skip_cells;
  for (auto& o : obs) {
    auto cv = cell_verdict(o);
    if (cv == CellVerdict::kCrashed || cv == CellVerdict::kTimeout || cv == CellVerdict::kError)
      by_reason[{std::string(to_string(cv)) + ": `" + o.target + "`", o.reason}].push_back(o.workload);
    if (cv == CellVerdict::kSkipped) {
      // "cublas: no CUDA device: ..." and "cuda: no CUDA device: ..." are one reason.
      std::string reason = o.reason.empty() ? "no reason given" : o.reason;
      std::string backend = o.target.substr(0, o.target.find_first_of(":?"));
      if (reason.rfind(backend + ": ", 0) == 0) reason = reason.substr(backend.size() + 2);
      auto& ts = skips[reason];
      if (std::find(ts.begin(), ts.end(), o.target) == ts.end()) ts.push_back(o.target);
      ++skip_cells[reason];
    }
  }
  for (auto& [key, wl] : by_reason)
    items.push_back(fmt::format("{} ({} workload{}): {}", key.first, wl.size(), wl.size() == 1 ? "" : "s",
                                key.second.empty() ? "no reason given" : key.second));
  for (auto& [reason, ts] : skips) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < ts.size() && i < 6; ++i) shown.push_back("`" + ts[i] + "`");
    items.push_back(fmt::format("skipped ({} cell{} on {} target{}): {}: {}{}", skip_cells[reason],
                                skip_cells[reason] == 1 ? "" : "s", ts.size(), ts.size() == 1 ? "" : "s", reason,
                                fmt::join(shown, ", "), ts.size() > 6 ? fmt::format(" and {} more", ts.size() - 6) : ""));
  }
  // A library that silently runs something other than what was asked (OpenBLAS maps unknown core
  // names to another core) is a finding: the target's name would otherwise lie.
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
      items.push_back(fmt::format("substituted: `{}` asked for core {} but OpenBLAS ran {}", o.target, want, it->second));
  }
  for (auto& o : obs)
    if (o.batch && !o.batch->invariant())
      items.push_back(fmt::format("not batch-invariant: `{}` on `{}`: {} of {} rows differ when computed alone",
                                  o.workload, o.target, o.batch->rows_differing, o.batch->rows_checked));
  if (!items.empty()) v.list(items);

  // ---- matrix ----------------------------------------------------------------------------------
  std::vector<std::string> workloads, targets;
  std::map<std::pair<std::string, std::string>, const Observation*> cell;
  for (auto& o : obs) {
    if (std::find(workloads.begin(), workloads.end(), o.workload) == workloads.end()) workloads.push_back(o.workload);
    if (std::find(targets.begin(), targets.end(), o.target) == targets.end()) targets.push_back(o.target);
    cell[{o.workload, o.target}] = &o;
  }
  auto& mx = d.add("Determinism matrix");
  mx.para("Each cell: distinct outputs over the repeats (1/N is run-to-run deterministic) · largest distance to the "
          "oracle `cpu-ref` in ULPs. Rows are targets, columns workloads (legend below).");
  std::vector<std::string> header = {"target"};
  for (size_t i = 0; i < workloads.size(); ++i) header.push_back(fmt::format("w{}", i + 1));
  std::vector<std::vector<Cell>> rows;
  for (auto& t : targets) {
    std::vector<Cell> row = {{"`" + t + "`", ""}};
    for (auto& w : workloads) {
      auto it = cell.find({w, t});
      row.push_back(it == cell.end() ? Cell{"—", "muted"} : matrix_cell(*it->second));
    }
    rows.push_back(row);
  }
  mx.table(header, rows);
  std::vector<std::string> legend;
  for (size_t i = 0; i < workloads.size(); ++i) legend.push_back(fmt::format("w{}: `{}`", i + 1, workloads[i]));
  mx.list(legend);

  // ---- groups ----------------------------------------------------------------------------------
  auto& gs = d.add("Bit-identical groups");
  gs.para("For each workload, the targets whose outputs are identical bit for bit (targets that ran; a "
          "nondeterministic target is grouped by the whole set of outputs it produced).");
  std::vector<std::vector<Cell>> grows;
  for (auto& wg : identity_groups(obs)) {
    for (size_t g = 0; g < wg.groups.size(); ++g) {
      std::vector<std::string> fps;
      for (auto& f : wg.groups[g].fingerprints) fps.push_back(fp_short(f));
      std::vector<std::string> ts;
      for (auto& t : wg.groups[g].targets) ts.push_back("`" + t + "`");
      grows.push_back({{g == 0 ? "`" + wg.workload + "`" : "", ""},
                       {fmt::format("{}", fmt::join(fps, " ")), wg.groups[g].fingerprints.size() > 1 ? "bad" : ""},
                       {fmt::format("{}", fmt::join(ts, ", ")), ""}});
    }
  }
  gs.table({"workload", "fingerprint(s)", "targets"}, grows);

  // ---- claimed vs observed ---------------------------------------------------------------------
  std::vector<std::vector<Cell>> claims;
  for (auto& o : obs) {
    auto it = o.details.find("claimed_deterministic");
    if (it == o.details.end() || o.status != ObsStatus::kOk) continue;
    bool claimed = it->second == "yes";
    bool observed = o.distinct == 1;
    std::string verdict = claimed == observed ? "agrees" : (claimed ? "CLAIM VIOLATED" : "no variation seen");
    claims.push_back({{"`" + o.workload + "`", ""},
                      {"`" + o.target + "`", ""},
                      {o.details.count("algo_name") ? o.details.at("algo_name") : "", ""},
                      {claimed ? "deterministic" : "nondeterministic", ""},
                      {fmt::format("{} distinct in {}", o.distinct, o.fingerprints.size()), observed ? "ok" : "bad"},
                      {verdict, claimed && !observed ? "bad" : ""}});
  }
  if (!claims.empty())
    d.add("Claimed vs observed determinism")
        .para("Each algorithm's own claim (cuDNN `determinism`) against what N bitwise-compared runs showed. A "
              "nondeterministic claim with one output only means no variation was seen in these runs.")
        .table({"workload", "target", "algorithm", "claimed", "observed", "verdict"}, claims);

  // ---- kernel attribution ----------------------------------------------------------------------
  std::vector<std::string> attributions;
  for (auto& o : obs) {
    if (cell_verdict(o) != CellVerdict::kNondeterministic || o.kernels.empty()) continue;
    std::string t = fmt::format("`{}` on `{}`:", o.workload, o.target);
    for (auto& g : kernels_by_fingerprint(o))
      t += fmt::format(" fingerprint {}: {} run{}, kernels [{}]{};", fp_short(g.fingerprint), g.runs, g.runs == 1 ? "" : "s",
                       fmt::join(g.kernel_names, ", "), g.sequence_varies ? " (sequence varies)" : "");
    attributions.push_back(t);
  }
  std::vector<std::string> traces;
  for (auto& o : obs)
    if (!o.tracing.empty() && o.tracing != "ok") traces.push_back(fmt::format("`{}` on `{}`: {}", o.workload, o.target, o.tracing));
  if (!attributions.empty() || !traces.empty()) {
    auto& ka = d.add("Kernel attribution");
    if (!attributions.empty()) ka.para("Which kernel sequences went with which output (CUPTI):").list(attributions);
    if (!traces.empty()) ka.para("Tracing unavailable:").list(traces);
  }

  // ---- batch invariance ------------------------------------------------------------------------
  std::vector<std::vector<Cell>> brows;
  for (auto& o : obs)
    if (o.batch)
      brows.push_back({{"`" + o.workload + "`", ""},
                       {"`" + o.target + "`", ""},
                       {o.batch->invariant() ? "invariant" : "NOT invariant", o.batch->invariant() ? "ok" : "bad"},
                       {fmt::format("{} of {}", o.batch->rows_differing, o.batch->rows_checked), ""}});
  if (!brows.empty())
    d.add("Batch invariance")
        .para("Row i of A·B computed alone (a 1-row product) against the same row inside the full product, bitwise.")
        .table({"workload", "target", "verdict", "rows differing"}, brows);

  // ---- timing ----------------------------------------------------------------------------------
  std::vector<std::vector<Cell>> trows;
  for (auto& o : obs) {
    if (o.seconds.empty()) continue;
    std::vector<double> s = o.seconds;
    std::sort(s.begin(), s.end());
    trows.push_back({{"`" + o.workload + "`", ""}, {"`" + o.target + "`", ""}, {fmt::format("{:.3g}", s[s.size() / 2] * 1e3), ""},
                     {fmt::format("{:.3g}", s.front() * 1e3), ""}, {o.describe, "muted"}});
  }
  if (!trows.empty())
    d.add("Timing").para("Wall time per repeat in milliseconds (median, min), and what ran.")
        .table({"workload", "target", "median ms", "min ms", "ran as"}, trows);

  add_machine_section(d, r.machine);
  return d;
}

}  // namespace detaudit
