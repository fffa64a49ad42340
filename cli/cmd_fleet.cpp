// `detaudit fleet`: every rank (node) runs the same qualification into DIR/ranks/<rank>-<host>/; rank 0
// gathers the others' results over MPI and judges them by consensus (gates/fleet.hpp), or
// `detaudit fleet report DIR` does it offline from the ranks' folders.
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/history_flags.hpp"
#include "cli/output.hpp"
#include "report/prometheus.hpp"
#include "contract/atomic_file.hpp"
#include "contract/results.hpp"
#include "gates/fleet.hpp"
#include "store/history.hpp"
#include "gates/qualify.hpp"
#include "gates/reference.hpp"
#include "kernels/input_file.hpp"
#include "probes/child.hpp"
#include "probes/env.hpp"
#include "report/fleet_report.hpp"
#include "suites/fleet_comm.hpp"

namespace fs = std::filesystem;

namespace detaudit::cli {
namespace {

struct FleetArgs {
  int level = 1, rank = -1, ranks = 0, repeats = 0;
  std::string targets, workloads, out, report_dir, reference, metrics;
  std::vector<std::string> merge_inputs;
  std::string merge_out;
  double wait = 900;
  int allreduce_n = 1 << 16;
  HistoryFlags hist;
  OutputFlags output;
  CLI::App* report = nullptr;
  CLI::App* merge = nullptr;
};

// "K:rest" of a test hook's variable when K is this rank; "" otherwise.
std::string hook_for(const char* var, int rank) {
  const char* v = std::getenv(var);
  if (!v) return "";
  const std::string s = v;
  const size_t colon = s.find(':');
  if (colon == std::string::npos || s.substr(0, colon) != std::to_string(rank)) return "";
  return s.substr(colon + 1);
}

// The outcome of a consensus: fleet.json and the reports in `dir`, the text, the exit code.
// A reference named by --reference, read before anything runs: one line and exit 2 when it is not one.
struct KnownBits {
  std::string path;
  Reference ref;
  const Reference* get() const { return path.empty() ? nullptr : &ref; }
};
Status load_known(const std::string& path, const std::string& dir, KnownBits* out) {
  out->path = path;
  if (path.empty()) return Status::ok();
  // The file the consensus writes is this fleet's own agreement: judged by it, the fleet would replace it.
  std::error_code ec;
  if (fs::weakly_canonical(path, ec) == fs::weakly_canonical(dir + "/reference.json", ec))
    return Status::invalid(fmt::format("--reference {}: is the reference this fleet writes (its consensus replaces it); "
                                       "keep known-good bits in a file of their own (detaudit fleet merge --out FILE)",
                                       path));
  return load_reference(path, &out->ref);
}

// --metrics FILE: one subject per node (host and rank) with its verdict, the cells of it judged (agreeing or not) and
// its findings.
Status fleet_metrics(const std::string& path, const FleetOutcome& f, double seconds) {
  PromText p;
  for (auto& n : f.nodes) {
    std::vector<MetricFinding> fs;
    for (auto& x : f.findings)
      if (x.rank == n.rank) fs.push_back({{}, to_string(x.action), to_string(x.kind), x.cell});
    add_node_metrics(&p, "fleet", {{"host", n.host}, {"rank", std::to_string(n.rank)}},
                     n.verdict == Verdict::kFail ? 1 : 0, n.cells, fs);
  }
  add_run_metrics(&p, "fleet", machine_fingerprint().value("hostname", std::string("unknown")), seconds);
  return write_metrics(path, p);
}

int judge_fleet(const std::vector<FleetNode>& nodes, const std::string& dir, const HistoryFlags* hist,
                const KnownBits& known, const std::vector<std::string>& ignored = {}, const std::string& metrics = "",
                double seconds = 0) {
  if (const std::string why = known.path.empty() ? "" : holds_own_agreement(known.ref, nodes); !why.empty())
    return fail(fmt::format("--reference {}: {}", known.path, why));
  FleetOutcome f = fleet_consensus(nodes, dir, known.get());
  f.ignored_folders = ignored;
  // What this fleet agreed on, kept beside its verdict as known-good bits for later fleets (cells a given reference
  // contradicts are left out: their bits are the finding, not a reference).
  const Reference agreed = reference_of_fleet(nodes, known.get());
  std::set<std::string> agreed_keys;
  for (auto& c : agreed.cells) agreed_keys.insert(c.key);
  const std::string mirror = known.path.empty() ? "" : mirrors_own_agreement(known.ref, nodes);
  FleetReferenceUse& used = f.reference.emplace();
  if (!known.path.empty()) used.judged_by = known.path;
  if (!mirror.empty()) used.warning = mirror;
  used.written = dir + "/reference.json", used.cells = agreed.cells.size(), used.keys = agreed_keys.size();
  const nlohmann::json fleet_json = to_json(f);
  if (Status st = save_reference(dir + "/reference.json", agreed); !st) return fail(st);
  if (Status st = write_file_atomic(dir + "/fleet.json", fleet_json.dump(1) + "\n", Own::kFleet); !st) return fail(st);
  if (Status st = write_fleet_reports(dir, f); !st) return fail(st);
  if (!metrics.empty())
    if (Status st = fleet_metrics(metrics, f, seconds); !st) return fail("--metrics " + st.message());
  Outcome o;
  o.exit_code = exit_code_of(f.decision);
  o.report_md = dir + "/report.md";
  o.report_html = dir + "/report.html";
  std::string t = fmt::format("fleet {}: {}\n", dir, f.summary);
  t += fmt::format("{:>5}  {:<20} {:<16} {:<9} {:>12} {:>9}  {:<7} {:<9}  {}\n", "rank", "host", "machine key", "state",
                   "cells agree", "time", "verdict", "action", "findings");
  for (auto& n : f.nodes) {
    const std::string ratio = n.time_ratio ? fmt::format("{:.2f}x", *n.time_ratio) : "-";
    t += fmt::format("{:>5}  {:<20} {:<16} {:<9} {:>12} {:>9}  {:<7} {:<9}  {}\n", n.rank, n.host, n.key,
                     to_string(n.state), fmt::format("{}/{}", n.cells_agreeing, n.cells), ratio, to_string(n.verdict),
                     n.action ? to_string(*n.action) : "-", n.summary);
  }
  // The verdict line counts every finding; the text lists the first 20.
  size_t shown = 0;
  for (auto& x : f.findings) {
    if (x.verdict == Verdict::kFail && o.first_fail.empty())
      o.first_fail = fmt::format("rank {} ({}) {}{}", x.rank, x.host, to_string(x.kind), x.cell.empty() ? "" : " " + x.cell);
    if (x.verdict == Verdict::kFail) ++o.counts.fail;
    if (x.verdict == Verdict::kWarn) ++o.counts.warn;
    if (shown++ == 20) t += fmt::format("... and {} more findings in {}/fleet.json\n", f.findings.size() - 20, dir);
    if (shown <= 20)
      t += fmt::format("{} rank {} ({}) {}{}: {}; action {}\n", to_string(x.verdict), x.rank, x.host, to_string(x.kind),
                       x.cell.empty() ? "" : " " + x.cell, x.detail, to_string(x.action));
  }
  for (auto& i : ignored) t += fmt::format("ignored: {}\n", i);
  if (!known.path.empty()) t += fmt::format("judged against the reference {} ({} cells)\n", known.path, known.ref.cells.size());
  if (!mirror.empty()) t += fmt::format("WARN reference {}: {}\n", known.path, mirror);
  t += fmt::format("reference.json: {} cells {} agreed on ({} machine key{}), known-good bits for later fleets\n",
                   agreed.cells.size(), agreed.cells.empty() ? "(no key of two nodes or more)" : "its nodes",
                   agreed_keys.size(), agreed_keys.size() == 1 ? "" : "s");
  t += fmt::format("fleet.json, report.md and report.html in {}\n", dir);
  o.text = t;
  o.data = {{"dir", dir}, {"fleet", fleet_json}};
  // Exit 2: no node ran, or none holds a cell (one interrupted before its first, say).
  if (f.decision == Decision::kNotJudged) o.error = "nothing was judged: no node holds a cell: " + f.summary;
  if (!mirror.empty()) ++o.counts.warn;
  // Per-node rows in the history: each node's probe results under its own machine.
  if (hist) {
    for (auto& n : nodes)
      if (!n.probe.observations.empty()) record_history(*hist, RunKind::kFleet, n.probe, dir + "/" + n.folder + "/probe", &o);
  }
  return emit(o);
}

// This rank's part: its qualification into its folder, then (MPI) the collectives and the gathering.
// A fleet directory holds ranks/ and the fleet's own files, never another run's results (whose reports
// the fleet's report.md and report.html would replace).
Status fleet_dir_is_its_own(const std::string& dir, const char* choose) {
  std::error_code ec;
  if (fs::exists(results_file(dir), ec))
    return Status::invalid(
        fmt::format("{}: holds a results.json of another run; a fleet directory is its own ({})", dir, choose));
  return Status::ok();
}

int run_fleet(const FleetArgs& a, int argc, char** argv) {
  const std::string dir = a.out;
  std::error_code ec;
  if (Status st = out_outside_fleet_ranks(dir); !st) return fail(st);
  if (Status st = fleet_dir_is_its_own(dir, "choose another --out"); !st) return fail(st);
  FleetRank who;
  if (Status st = fleet_resolve_rank(a.rank, a.ranks, &who); !st) return fail(st);
  if (!who.mpi && !a.metrics.empty())
    return fail(fmt::format("--metrics: a rank run without MPI judges no fleet (rank {} from {}); give --metrics to "
                            "`detaudit fleet report {}`, which does",
                            who.rank, who.source, dir));
  auto progress = progress_sink();
  auto say_rank = [&](const std::string& s) {
    if (progress) progress(fmt::format("rank {}/{}: {}", who.rank, who.ranks, s));
  };
  if (who.mpi && who.rank == 0 && !a.hist.disabled)
    if (int rc = precheck_history(a.hist)) return fleet_mpi_end(true, rc), rc;  // (it printed why)
  // The reference judges at the consensus (rank 0 under MPI, else `fleet report`), but is read before anything runs.
  KnownBits known;
  // Under MPI a rank that cannot go on says why first, then ends the job (MPI_Abort ends every rank at once).
  auto fail_and_end = [&](const Status& st) {
    const int rc = fail(st);
    if (who.mpi) fleet_mpi_end(true, rc);
    return rc;
  };
  if (Status st = load_known(who.mpi && who.rank != 0 ? "" : a.reference, dir, &known); !st) return fail_and_end(st);
  // The consensus's metrics file (rank 0): one it could never write is refused before anything runs.
  if (!a.metrics.empty() && who.rank == 0)
    if (Status st = check_destination(a.metrics, Own::kMetrics); !st)
      return fail_and_end(Status::invalid("--metrics " + st.message()));
  FleetNode n;
  n.rank = who.rank, n.ranks = who.ranks, n.level = a.level, n.placement = who.source;
  // Test hooks (tests/test_fleet.cpp): this rank's machine with one field changed (its key and its results
  // alike), or its outputs of one workload with a bit flipped, as a misconfigured or a faulty node's would be.
  if (std::string kv = hook_for("DETAUDIT_FLEET_TEST_KEY", n.rank); !kv.empty())
    setenv("DETAUDIT_TEST_MACHINE_FIELD", kv.c_str(), 1);
  const nlohmann::json machine = machine_fingerprint();
  n.host = machine.value("hostname", std::string("unknown"));
  n.folder = fleet_folder(n.rank, n.host);
  n.started_at = utc_now_iso8601();
  // Run again into its folder, the rank resumes the results there (its qualification keeps every finished
  // cell): its part started when they did.
  for (const char* part : {"probe", "train"}) {
    std::string text;
    nlohmann::json j;
    const std::string p = results_file(dir + "/" + n.folder + "/" + part);
    if (fs::is_regular_file(p, ec) && read_regular_file(p, "results file", &text).is_ok() &&
        parse_json_text(text, p, &j).is_ok() && j.is_object() && j.contains("started_at") &&
        j["started_at"].is_string() && is_utc_iso8601(j["started_at"]) && j["started_at"] < n.started_at)
      n.started_at = j["started_at"];
  }
  n.key = fleet_key(machine, DETAUDIT_VERSION, git_commit());
  if (std::string w = hook_for("DETAUDIT_FLEET_TEST_FLIP", n.rank); !w.empty())
    setenv("DETAUDIT_TEST_FLIP_OUTPUT", w.c_str(), 1);
  say_rank(fmt::format("{} on {} (rank from {}), results in {}/{}", who.mpi ? "MPI" : "no MPI", n.host, who.source, dir,
                       n.folder));
  // Under MPI every rank says who it is before anything runs, so a rank that later hangs or is lost is named with its
  // host (and Slurm node and job), not by its number alone.
  std::vector<std::string> identities;
  if (who.mpi) {
    std::string me = "host " + n.host;
    for (const char* v : {"SLURMD_NODENAME", "SLURM_JOB_ID"})
      if (const char* x = std::getenv(v); x && *x) me += fmt::format(", {} {}", v, x);
    if (Status st = fleet_exchange_identities(me, &identities); !st) return fail_and_end(st);
  }
  // What the folder's node.json said before this run: a run refused for its input (another plan than the results
  // in the folder, say) leaves it as it was, so a refused command never turns a finished rank into a failed one
  // (without MPI; under MPI the peers wait for the rank's part of the consensus).
  std::string before;
  if (const std::string p = dir + "/" + n.folder + "/node.json"; fs::is_regular_file(fs::symlink_status(p, ec)))
    if (!read_regular_file(p, "fleet node file", &before).is_ok()) before.clear();
  // A rank that cannot write its folder: alone, an error; under MPI its peers wait for its part, so it says why now,
  // runs nothing and takes part as failed (rank 0 names it, and only it), instead of ending the job.
  bool can_write = true;
  if (Status st = save_fleet_node(dir, n); !st) {
    if (!who.mpi) return fail(st);
    say(stderr, "detaudit: error: rank {} ({}): {}; it runs nothing and rank 0 names it\n", n.rank, n.host, st.message());
    can_write = false;
    n.state = NodeState::kFailed;
    n.detail = "cannot write its folder: " + st.message();
  }

  QualifyOptions q;
  q.level = a.level;
  q.targets = a.targets;
  q.workloads = a.workloads;
  q.repeats = a.repeats;
  q.out_dir = dir + "/" + n.folder;
  q.exe = self_exe(argv[0]);
  q.command = command_line(argc, argv);
  q.progress = say_rank;
  q.fleet_rank = true;
  QualifyOutcome qo;
  const auto t0 = std::chrono::steady_clock::now();
  Status st = can_write ? run_qualify(q, &qo) : Status::ok();
  if (st.code() == Status::Code::kInterrupted) {
    // The node says it was interrupted, and when: its folder holds what finished, `fleet report` names it,
    // and the same command run again resumes its qualification where it stopped.
    const int sig = interrupted() ? interrupted() : SIGINT;
    n.state = NodeState::kInterrupted;
    n.exit_code = 128 + sig;
    n.detail = "interrupted by " + signal_description(sig);
    n.finished_at = utc_now_iso8601();
    const Status saved = save_fleet_node(dir, n);
    say(stderr,
        "{}; rank {}'s finished cells are kept in {}/{}{}; resume with: {}; `detaudit fleet report {}` merges what "
        "the ranks wrote\n",
        st.message(), n.rank, dir, n.folder, saved ? "" : " (its node.json not updated: " + saved.message() + ")",
        who.mpi ? "the same mpirun (or srun) line; each rank resumes its part"
                : resume_command(std::vector<std::string>(argv, argv + argc), dir),
        dir);
    if (who.mpi) fleet_mpi_end(true, 128 + sig);
    return 128 + sig;
  }
  if (!st && st.code() == Status::Code::kInvalid && !before.empty() && !who.mpi) {
    // Refused before it ran anything: the rank's record is the earlier run's again. (Under MPI the rank stays in
    // the consensus as failed: its peers wait for it.)
    const Status restored = write_file_atomic(dir + "/" + n.folder + "/node.json", before, Own::kFleetNode);
    return fail(restored ? Status::invalid(st.message() + " (" + n.folder + "/node.json left as the earlier run wrote it)")
                         : st);
  }
  if (!can_write) {
    // failed, as said above
  } else if (!st) {
    n.state = NodeState::kFailed;
    n.detail = st.message();
  } else {
    n.state = NodeState::kFinished;
    n.exit_code = exit_code_of(decision_of(qo.decision));
    for (auto& c : qo.checks)
      if (c.verdict == Verdict::kFail && n.own_fail.empty()) n.own_fail = c.name + ": " + c.detail;
  }
  // Test hook (tests/test_fleet.cpp): this rank hangs here, as a node stuck after its own part would.
  if (hook_for("DETAUDIT_FLEET_TEST_HANG", n.rank) == "hang") {
    while (!interrupted()) ::pause();
    return 128 + interrupted();
  }
  // The collectives need every rank: when one could not run (or hangs past --timeout), all go on without them.
  if (who.mpi && fleet_all_ready(n.state == NodeState::kFinished, a.wait)) {
    say_rank("allreduce across the ranks under each of Open MPI's tuned algorithms");
    if (Status cs = run_allreduce_cells(a.allreduce_n, 1, std::max(a.repeats, 5), &n.collectives); !cs) {
      n.state = NodeState::kFailed;
      n.detail = cs.message();
    }
    // The same sums on the ranks' GPUs through NCCL, when every rank has one.
    std::vector<CollectiveCell> nccl;
    std::string not_run;
    if (Status ns = run_nccl_allreduce_cells(a.allreduce_n, 1, std::max(a.repeats, 5), &nccl, &not_run); !ns) {
      n.state = NodeState::kFailed;
      n.detail = ns.message();
    } else if (!not_run.empty()) {
      say_rank("NCCL all-reduce not run: " + not_run);
    } else {
      say_rank("allreduce across the ranks' GPUs through NCCL (Ring, Tree): done");
      n.collectives.insert(n.collectives.end(), nccl.begin(), nccl.end());
    }
  } else if (who.mpi) {
    say_rank("collectives not run: a rank could not run its part or did not answer");
  }
  n.finished_at = utc_now_iso8601();
  say_rank(fmt::format("{} in {:.1f} s", to_string(n.state),
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
  if (Status ws = can_write ? save_fleet_node(dir, n) : Status::ok(); !ws) {
    if (!who.mpi) return fail(ws);
    say(stderr, "detaudit: error: rank {} ({}): {}; rank 0 names it\n", n.rank, n.host, ws.message());
    n.state = NodeState::kFailed;
    n.detail = "cannot write its node.json: " + ws.message();
  }
  if (!who.mpi) {
    // Without MPI this rank's part is all it does: the consensus comes from `fleet report DIR`.
    Outcome o;
    o.exit_code = n.state == NodeState::kFailed ? 2 : n.exit_code == 1 ? 1 : 0;
    if (n.state == NodeState::kFailed) o.error = n.detail;
    if (!n.own_fail.empty()) o.first_fail = n.own_fail, o.counts.fail = 1;
    o.text = fmt::format("rank {} of {} ({}): {}; merge the ranks with: detaudit fleet report {}{}\n", n.rank, n.ranks,
                         n.host, to_string(n.state), dir, a.reference.empty() ? "" : " --reference " + a.reference);
    o.data = {{"dir", dir}, {"node", n.node_json()}};
    return emit(o);
  }
  // MPI: rank 0 gathers every rank's node and results (the folders may be on other machines).
  auto slurp_or_empty = [&](const std::string& p) {
    std::string text;
    if (fs::exists(p, ec)) (void)read_regular_file(p, "results file", &text);
    return text;
  };
  const std::vector<std::string> mine = {n.node_json().dump(), slurp_or_empty(results_file(q.out_dir + "/probe")),
                                         slurp_or_empty(results_file(q.out_dir + "/train")),
                                         slurp_or_empty(q.out_dir + "/qualify.json")};
  std::vector<std::vector<std::string>> all;
  std::vector<bool> answered;
  if (who.rank == 0) say_rank(fmt::format("gathering the other ranks' results (waiting up to {:.0f} s)", a.wait));
  if (Status gs = fleet_gather(mine, a.wait, &all, &answered); !gs) return fail_and_end(gs);
  if (who.rank != 0) {
    const int code = fleet_share_exit_code(0, {});
    fleet_mpi_end(false, code);
    return code;
  }
  // A rank's texts: its node, probe and training results, and the qualify.json held against them.
  auto read_rank = [](const std::vector<std::string>& t, int r, FleetNode* x) -> Status {
    if (t.size() != 4) return Status::invalid(fmt::format("rank {} sent {} texts, not 4", r, t.size()));
    DETAUDIT_RETURN_IF_ERROR(fleet_node_from_texts(t[0], t[1], t[2], fmt::format("rank {}", r), x));
    return check_fleet_qualify(t[3], fmt::format("rank {}'s qualify.json", r), *x);
  };
  std::vector<FleetNode> nodes;
  bool lost = false;
  for (int r = 0; r < who.ranks; ++r) {
    FleetNode x;
    if (!answered[size_t(r)]) {
      lost = true;
      x.rank = r, x.ranks = who.ranks, x.state = NodeState::kMissing;
      x.detail = fmt::format("no results within --timeout {:.0f} s of rank 0's (hung, or lost){}", a.wait,
                             size_t(r) < identities.size() ? "; it started as " + identities[size_t(r)] : "");
      if (size_t(r) < identities.size() && identities[size_t(r)].rfind("host ", 0) == 0) {
        const std::string id = identities[size_t(r)];
        x.host = id.substr(5, id.find(',') == std::string::npos ? std::string::npos : id.find(',') - 5);
      }
    } else if (Status ps = read_rank(all[size_t(r)], r, &x); !ps) {
      x = FleetNode{};
      x.rank = r, x.ranks = who.ranks, x.state = NodeState::kFailed, x.detail = ps.message();
    } else if (r != 0 && !fs::exists(dir + "/" + x.folder + "/node.json", ec)) {
      // Not a shared folder: rank 0 keeps a copy (node.json, its results and its qualify.json), so
      // `fleet report DIR` judges the same evidence here afterwards.
      (void)save_fleet_node(dir, x);
      const auto& t = all[size_t(r)];
      for (const auto& [sub, text] : {std::pair<std::string, const std::string&>{"probe", t[1]}, {"train", t[2]}})
        if (!text.empty() && make_dir_below(dir, x.folder + "/" + sub).is_ok())
          (void)write_file_atomic(results_file(dir + "/" + x.folder + "/" + sub), text, Own::kResults);
      if (!t[3].empty()) (void)write_file_atomic(dir + "/" + x.folder + "/qualify.json", t[3], Own::kQualify);
    }
    nodes.push_back(std::move(x));
  }
  // Evidence that contradicts itself across ranks is refused here as fleet report refuses it.
  const Status peers = check_fleet_distances(nodes);
  const int code = peers ? judge_fleet(nodes, dir, &a.hist, known, {}, a.metrics,
                                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())
                         : fail(peers);
  fleet_share_exit_code(code, answered);
  fleet_mpi_end(lost, code);
  return code;
}

int run_fleet_report(const FleetArgs& a) {
  if (Status st = fleet_dir_is_its_own(a.report_dir, "its reports are not replaced"); !st) return fail(st);
  std::vector<FleetNode> nodes;
  std::vector<std::string> ignored;
  KnownBits known;
  if (Status st = load_known(a.reference, a.report_dir, &known); !st) return fail(st);
  if (!a.metrics.empty())
    if (Status st = check_destination(a.metrics, Own::kMetrics); !st) return fail("--metrics " + st.message());
  if (Status st = load_fleet_dir(a.report_dir, &nodes, &ignored); !st) return fail_or_interrupted(st);
  return judge_fleet(nodes, a.report_dir, nullptr, known, ignored, a.metrics);
}

// `fleet merge --out FILE REF...`: references joined into one; the same cell with other bits is a conflict, named,
// and the file keeps the bits the first reference that holds the cell gave (nothing is overwritten).
int run_fleet_merge(const FleetArgs& a) {
  Reference merged;
  std::vector<ReferenceConflict> conflicts;
  std::set<std::string> seen;
  for (const std::string& p : a.merge_inputs) {
    std::error_code ec;
    if (!seen.insert(fs::weakly_canonical(p, ec).string()).second)
      return fail(fmt::format("{}: named twice (a reference merged with itself adds nothing)", p));
    Reference r;
    if (Status st = load_reference(p, &r); !st) return fail(st);
    for (auto& c : merge_reference(&merged, r, p)) conflicts.push_back(std::move(c));
  }
  // A conflict is a finding for a person to settle: nothing is written (--out, one of the inputs perhaps, keeps its
  // own bits).
  if (conflicts.empty())
    if (Status st = save_reference(a.merge_out, merged); !st) return fail(st);
  Outcome o;
  o.exit_code = conflicts.empty() ? 0 : 1;
  std::string t = conflicts.empty()
                      ? fmt::format("merged {} references into {}: {} machine keys, {} cells, 0 conflicts\n",
                                    a.merge_inputs.size(), a.merge_out, merged.keys.size(), merged.cells.size())
                      : fmt::format("{} conflicts among {} references: nothing written to {} (settle each: the same "
                                    "cell with other bits is a fault on one side)\n",
                                    conflicts.size(), a.merge_inputs.size(), a.merge_out);
  nlohmann::json cj = nlohmann::json::array();
  for (auto& c : conflicts) {
    t += fmt::format("FAIL conflict {} @ {} (key {}): {} first, {} in {}\n", c.workload, c.target, c.key, c.first, c.other,
                     c.other_source);
    cj.push_back({{"key", c.key}, {"workload", c.workload}, {"target", c.target}, {"first", c.first},
                  {"other", c.other}, {"source", c.other_source}});
    if (o.first_fail.empty()) o.first_fail = fmt::format("conflict {} @ {}", c.workload, c.target);
    ++o.counts.fail;
  }
  o.text = t;
  o.data = {{"out", a.merge_out}, {"written", conflicts.empty()}, {"keys", merged.keys.size()},
            {"cells", merged.cells.size()}, {"conflicts", cj}};
  return emit(o);
}

Command add_fleet_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "fleet",
      "Qualify a fleet: every rank (node) runs the same cells, and a node that computes other bits than its "
      "peers of the same machine key is named, by consensus. Run under mpirun or srun, or one rank per "
      "process with --rank, then `fleet report DIR`.");
  auto a = std::make_shared<FleetArgs>();
  sub->add_option("--level", a->level, "1: the quick probes; 2: adds qualify's short training regression")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  sub->add_option("--targets", a->targets, "Comma-separated targets instead of the suite's")->check(kNonEmpty);
  sub->add_option("--workloads", a->workloads, "Comma-separated workloads instead of the suite's")->check(kNonEmpty);
  sub->add_option("--repeats", a->repeats, "Repeats per cell (default: the suite's, 10)")->check(CLI::Range(1, 100000));
  sub->add_option("--out", a->out, "The fleet directory (shared by the ranks, or the same path on each node)")
      ->check(kNonEmpty);
  sub->add_option("--rank", a->rank, "This process's rank, without MPI (with --ranks)")->check(CLI::Range(0, 999999));
  sub->add_option("--ranks", a->ranks, "The number of ranks, without MPI (also for Kubernetes' JOB_COMPLETION_INDEX)")
      ->check(CLI::Range(1, 1000000));
  sub->add_option("--timeout,--wait", a->wait,
                  "MPI: seconds the ranks wait for each other after their own part; a rank that has not answered "
                  "by then (hung, or lost) is named, and the others' results stand")
      ->check(kFinite)
      ->check(CLI::Range(1.0, 604800.0))
      ->capture_default_str();
  const char* reference_help =
      "A reference (detaudit-reference/1, as fleet writes beside fleet.json or `fleet merge` joins): each node's "
      "deterministic cells of a machine key it holds are judged against its known-good bits instead of the vote, so "
      "two nodes, or a node alone with its key, are judged too";
  sub->add_option("--reference", a->reference, reference_help)->check(kNonEmpty);
  const char* metrics_help =
      "Also write the consensus in Prometheus's text format to FILE (atomically; node_exporter's textfile "
      "collector): per node (host, rank) detaudit_health_status, detaudit_findings per action, one "
      "detaudit_finding per finding";
  sub->add_option("--metrics", a->metrics, metrics_help)->check(kNonEmpty);
  add_history_flags(sub, &a->hist);
  add_output_flags(sub, &a->output, true);
  a->report = sub->add_subcommand("report", "Merge the ranks' folders of a fleet directory and judge them (offline)");
  a->report->add_option("DIR", a->report_dir, "The fleet directory (its ranks/ folder)")->required()->check(kNonEmpty);
  a->report->add_option("--reference", a->reference, reference_help)->check(kNonEmpty);
  a->report->add_option("--metrics", a->metrics, metrics_help)->check(kNonEmpty);
  a->merge = sub->add_subcommand("merge",
                                 "Join references (several fleets, several kinds of machine) into one file; the same "
                                 "cell with other bits is a conflict: named, exit 1, and nothing written");
  a->merge->add_option("REFERENCE", a->merge_inputs, "References to join")
      ->required()
      ->check(kNonEmpty);
  a->merge->add_option("--out", a->merge_out, "The merged reference (may be one of the inputs: it is replaced atomically)")
      ->required()
      ->check(kNonEmpty);
  add_output_flags(a->merge, &a->output, true);
  add_output_flags(a->report, &a->output, true);  // `fleet report DIR --format json`, as every command
  sub->footer(
      "\nForms:\n"
      "  mpirun -np N detaudit fleet --out DIR                 every rank; rank 0 gathers and judges\n"
      "  srun -N N detaudit fleet --out DIR; detaudit fleet report DIR   (rank from SLURM_PROCID)\n"
      "  detaudit fleet --rank K --ranks N --out DIR           one rank; then detaudit fleet report DIR\n"
      "  Kubernetes Indexed Job: detaudit fleet --ranks N --out DIR (rank from JOB_COMPLETION_INDEX)\n"
      "Each rank writes DIR/ranks/<rank>-<host>/ as it goes (node.json, probe/, train/); a killed job's\n"
      "folders are complete as far as they got, and `fleet report DIR` names the ranks that did not finish.\n"
      "The consensus writes DIR/reference.json: the bits two or more nodes of a key agreed on. Keep it (or\n"
      "`detaudit fleet merge --out site.json site.json DIR/reference.json`) and judge later fleets with\n"
      "--reference FILE: two nodes, or a node alone with its key, are then judged against known-good bits.\n"
      "Exit codes (every rank under MPI): 0 consensus, 1 a node disagrees, failed, is slow (10x) or was lost,\n"
      "2 could not run, 128+N interrupted by signal N.");
  return {sub,
          [a, argc, argv]() {
            if (a->report->parsed()) return run_fleet_report(*a);
            if (a->merge->parsed()) return run_fleet_merge(*a);
            if (a->out.empty()) return fail("fleet: --out DIR is required (the fleet directory)");
            return run_fleet(*a, argc, argv);
          },
          &a->output, true, true};
}

const CommandRegistration reg(45, add_fleet_command);

}  // namespace
}  // namespace detaudit::cli
