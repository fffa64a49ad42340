// `detaudit history`: each cell's fingerprints over time, per machine, and what changed in the
// software where they changed (store/history.hpp has the database).
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/history_flags.hpp"
#include "cli/output.hpp"
#include "store/history.hpp"

namespace detaudit::cli {

namespace {

struct HistoryArgs {
  std::string target, workload, machine, since, file;
  bool changed_only = false;
  OutputFlags output;
};

// "2026-11-30T12:00:00Z" -> "2026-11-30 12:00".
std::string when(const std::string& iso) {
  std::string s = iso.substr(0, 16);
  if (s.size() > 10 && s[10] == 'T') s[10] = ' ';
  return s;
}

std::string one_line(std::string s, size_t max) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

std::string list(const std::vector<std::string>& v, size_t max = 3) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max) s += fmt::format(" +{}", v.size() - max);
  return s;
}

// How a segment reads: "fp 1a2b3c4d5e6f7081", "varies (up to 3 outputs)", "crashed (SIGILL ...)".
std::string state_text(const HistorySegment& s) {
  if (s.state == "nondeterministic" && s.last.training)
    return fmt::format("varies (nondeterminism on, {} training run{})", s.last.repeats, s.last.repeats == 1 ? "" : "s");
  if (s.state.rfind("fp ", 0) == 0 && s.last.training)
    return fmt::format("{}weights {} ({} training run{})",
                       std::find(s.verdicts.begin(), s.verdicts.end(), "FAIL") != s.verdicts.end()
                           ? "broke its promise (nondeterminism off): "
                           : "",
                       s.state.substr(3, 16),
                       s.last.repeats, s.last.repeats == 1 ? "" : "s");
  if (s.state.rfind("fp ", 0) == 0 && !s.last.rows_fingerprint.empty())
    return "fp " + s.state.substr(3, 16) + " rows " + s.last.rows_fingerprint.substr(0, 16);
  if (s.state.rfind("fp ", 0) == 0) return "fp " + s.state.substr(3, 16);
  if (s.state == "nondeterministic") return fmt::format("varies (up to {} outputs)", s.max_distinct);
  if (!s.last.reason.empty()) return fmt::format("{} ({})", s.state, one_line(s.last.reason, 60));
  return s.state;
}

std::string changes_text(const std::vector<SoftwareChange>& changes) {
  if (changes.empty()) return "no software difference recorded (same tool, commit and libraries)";
  std::string s;
  for (auto& c : changes) s += fmt::format("{}{} {} -> {}", s.empty() ? "" : "; ", c.path, c.before, c.after);
  return s;
}

std::string machine_text(const MachineRecord& m) {
  std::string gpus;
  for (auto& g : m.gpus)
    gpus += fmt::format("{}{} (CC {}, {} SMs)", gpus.empty() ? "" : ", ", g.value("name", ""),
                        g.value("compute_capability", ""), g.value("sm_count", 0));
  return fmt::format("{}  host {}; {}, {} cores; {}; {} runs, {} to {}", m.key, list(m.hostnames), m.cpu_model,
                     m.cores, gpus.empty() ? "no GPU" : "GPUs " + gpus, m.runs, when(m.first_seen), when(m.last_seen));
}

std::string filter_text(const char* what, const std::string& value, const std::string& match) {
  if (value.empty()) return "";
  if (match == "none") return fmt::format("{} '{}': nothing recorded matches\n", what, value);
  if (match == "canonical") return fmt::format("{} '{}': matched as the spec it spells\n", what, value);
  return fmt::format("{} '{}': {} match\n", what, value, match);
}

nlohmann::json segment_json(const HistorySegment& s) {
  nlohmann::json changes = nlohmann::json::array();
  for (auto& c : s.changes) changes.push_back({{"path", c.path}, {"before", c.before}, {"after", c.after}});
  nlohmann::json j = {{"state", s.state},
                      {"fingerprints", s.fingerprints},
                      {"max_distinct", s.max_distinct},
                      {"first_at", s.first_at},
                      {"last_at", s.last_at},
                      {"observations", s.observations},
                      {"hostnames", s.hostnames},
                      {"verdicts", s.verdicts},
                      {"first_run", s.first.run_id},
                      {"last_run", s.last.run_id},
                      {"tool_version", s.last.tool_version},
                      {"tool_commit", s.last.tool_commit},
                      {"software", s.last.software},
                      {"changes", changes}};
  if (!s.last.reason.empty()) j["reason"] = s.last.reason;
  if (!s.last.rows_fingerprint.empty()) j["rows_fingerprint"] = s.last.rows_fingerprint;
  return j;
}

// The cells' timelines grouped by cell (cell_timelines sorts them so).
std::vector<std::vector<const CellTimeline*>> by_cell(const std::vector<CellTimeline>& t) {
  std::vector<std::vector<const CellTimeline*>> out;
  for (auto& x : t) {
    if (out.empty() || out.back().front()->workload != x.workload || out.back().front()->target != x.target)
      out.emplace_back();
    out.back().push_back(&x);
  }
  return out;
}

int changes_of(const std::vector<const CellTimeline*>& cell) {
  int n = 0;
  for (auto* t : cell) n += int(t->segments.size()) - 1;
  return n;
}


std::string history_text(const HistoryArgs& a, const std::string& path, const HistoryQueryResult& q,
                         const HistoryFilter& f, const std::vector<std::vector<const CellTimeline*>>& cells,
                         int changed);

int run_history(const HistoryArgs& a) {
  HistoryFilter f;
  f.target = a.target;
  f.workload = a.workload;
  f.machine = a.machine;
  std::string path;
  if (!a.since.empty())
    if (Status st = parse_since(a.since, &f.since); !st) return fail(st);
  HistoryFlags flags;
  flags.file = a.file;
  if (Status st = resolve_history_path(flags, &path); !st) return fail(st);
  HistoryQueryResult q;
  if (Status st = query_history(path, f, &q); !st) return fail(st);
  auto timelines = cell_timelines(q.cells);
  auto cells = by_cell(timelines);
  int changed = 0;
  for (auto& c : cells) changed += changes_of(c) > 0;

  Outcome o;
  {
    nlohmann::json filters = nlohmann::json::object();
    auto add = [&](const char* k, const std::string& v, const std::string& m) {
      if (!v.empty()) filters[k] = {{"value", v}, {"match", m}};
    };
    add("target", a.target, q.target_match);
    add("workload", a.workload, q.workload_match);
    add("machine", a.machine, q.machine_match);
    if (!f.since.empty()) filters["since"] = f.since;
    nlohmann::json machines = nlohmann::json::array(), jcells = nlohmann::json::array();
    for (auto& m : q.machines)
      machines.push_back({{"key", m.key},
                          {"hostnames", m.hostnames},
                          {"cpu_model", m.cpu_model},
                          {"cpu_features", m.cpu_features},
                          {"cores", m.cores},
                          {"gpus", m.gpus},
                          {"first_seen", m.first_seen},
                          {"last_seen", m.last_seen},
                          {"runs", m.runs}});
    for (auto& c : cells) {
      if (a.changed_only && changes_of(c) == 0) continue;
      nlohmann::json per = nlohmann::json::array();
      for (auto* t : c) {
        nlohmann::json segs = nlohmann::json::array();
        for (auto& s : t->segments) segs.push_back(segment_json(s));
        per.push_back({{"machine_key", t->machine_key}, {"segments", segs}});
      }
      jcells.push_back({{"workload", c.front()->workload},
                        {"target", c.front()->target},
                        {"changes", changes_of(c)},
                        {"machines", per}});
    }
    o.data = {{"database", path},
              {"exists", q.exists},
              {"runs", q.runs},
              {"filters", filters},
              {"machines", machines},
              {"cells", jcells},
              {"summary", {{"cells", cells.size()}, {"changed", changed}}}};
  }
  // The database's strings reach a terminal: a byte that would move the cursor or change its colours (a
  // host name or spec written into the file by another program) is shown as \xNN, never sent raw.
  o.text = history_text(a, path, q, f, cells, changed);  // escaped by emit(), as every text
  return emit(o);
}

std::string history_text(const HistoryArgs& a, const std::string& path, const HistoryQueryResult& q,
                         const HistoryFilter& f, const std::vector<std::vector<const CellTimeline*>>& cells,
                         int changed) {
  std::string text;

  if (!q.exists)
    return fmt::format("no history yet at {} (probe, train, check, qualify, fleet and healthcheck record their runs there)\n", path);
  std::string head = fmt::format("history {}: {} runs recorded; times UTC\n", path, q.runs);
  head += filter_text("target", a.target, q.target_match);
  head += filter_text("workload", a.workload, q.workload_match);
  head += filter_text("machine", a.machine, q.machine_match);
  if (!f.since.empty()) head += fmt::format("since {}\n", f.since);
  text += head;
  if (cells.empty()) return text + "no cell recorded matches\n";
  text += fmt::format("machines:\n");
  for (auto& m : q.machines) text += fmt::format("  {}\n", machine_text(m));

  for (auto& c : cells) {
    int n = changes_of(c);
    if (a.changed_only && n == 0) continue;
    std::string note = n == 0 ? "no change" : fmt::format("changed {} time{}", n, n == 1 ? "" : "s");
    if (c.size() > 1) {
      // Across machines: do their latest observations agree bit for bit?
      bool same = true;
      for (auto* t : c) same = same && t->segments.back().state == c.front()->segments.back().state;
      bool fp = c.front()->segments.back().state.rfind("fp ", 0) == 0;
      note += fmt::format("; {} machines, latest {}", c.size(),
                          same ? (fp ? "bits identical" : "outcome the same") : "outcomes differ");
    }
    text += fmt::format("\n{} @ {}  [{}]\n", c.front()->workload, c.front()->target, note);
    for (auto* t : c) {
      text += fmt::format("  machine {}\n", t->machine_key);
      for (size_t i = 0; i < t->segments.size(); ++i) {
        auto& s = t->segments[i];
        std::string span = when(s.first_at);
        span += s.last_at != s.first_at ? " to " + when(s.last_at) : std::string(20, ' ');
        text += fmt::format("    {} {}  {}  {} run{}  {}{}\n", i ? "->" : "  ", span, state_text(s), s.observations,
                            s.observations == 1 ? "" : "s", list(s.hostnames),
                            s.verdicts.empty() ? "" : "  " + list(s.verdicts, 5));
        if (i) text += fmt::format("       software: {}\n", changes_text(s.changes));
      }
    }
  }
  text += fmt::format("\n{} cell{}, {} with a change; {} machine{}\n", cells.size(), cells.size() == 1 ? "" : "s",
                      changed, q.machines.size(), q.machines.size() == 1 ? "" : "s");
  return text;
}

Command add_history_command(CLI::App& app, int, char**) {
  auto args = std::make_shared<HistoryArgs>();
  auto* sub = app.add_subcommand(
      "history", "Show each cell's fingerprints over time, per machine, and the software changes where they changed.");
  sub->add_option("--target", args->target,
                  "Only this target: an exact target name if one was recorded, else every target containing it, else "
                  "the target it spells in another order or with defaults left out")
      ->type_name("TARGET")
      ->check(kNonEmpty);
  sub->add_option("--workload", args->workload,
                  "Only this workload: an exact workload name if one was recorded, else every workload containing it, "
                  "else the workload it spells in another order or with defaults left out")
      ->type_name("WORKLOAD")
      ->check(kNonEmpty);
  sub->add_option("--machine", args->machine,
                  "Only this machine: a machine key (every host of that hardware) or a hostname (that host), "
                  "exact, else a key prefix or a part of a hostname")
      ->type_name("MACHINE")
      ->check(kNonEmpty);
  sub->add_option("--since", args->since,
                  "Only runs started at or after DATE: YYYY-MM-DD or an ISO 8601 time (2026-12-01T09:30Z, UTC unless "
                  "it has an offset)")
      ->type_name("DATE")
      ->check(kNonEmpty);
  add_output_flags(sub, &args->output, false);
  sub->add_flag("--changed", args->changed_only, "Only cells whose outcome changed");
  sub->add_option("--history", args->file,
                  "History database (default: $DETAUDIT_HISTORY, else $XDG_DATA_HOME/detaudit/history.db, else "
                  "~/.local/share/detaudit/history.db)")
      ->type_name("FILE")
      ->check(kNonEmpty);
  sub->footer(
      "\nOne line per stretch of runs with the same outcome of a cell (workload @ target) on one machine: a\n"
      "fingerprint (its first 16 hex digits), 'varies' (more than one output in a run), or a status (crashed,\n"
      "timeout, skipped, error). Where the outcome changed ('->'), the software difference between the last\n"
      "run before and the first run after: tool version, git commit, OS, compiler and library versions.\n"
      "Machines are keys of the hardware (CPU model, ISA features, cores; GPU names, compute capability,\n"
      "SM counts): identical nodes share a key; the hostnames are listed with it. An observation recorded\n"
      "twice (its probe, then a check of the same results directory) counts once.\n"
      "A missing database is an empty history (exit 0); an unreadable or damaged one exits 2.");
  return {sub, [args] { return run_history(*args); }, &args->output, false};
}

static const CommandRegistration reg(50, add_history_command);

}  // namespace

}  // namespace detaudit::cli
