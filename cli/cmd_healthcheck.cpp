// `detaudit healthcheck`: this node judged in seconds against a reference's known-good bits, on every logical CPU
// at once (gates/healthcheck.hpp); one line, exit 0/1/2, and with --drain/--resume the node taken out of (or
// returned to) Slurm's service through scontrol.
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <ctime>
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
#include "gates/healthcheck.hpp"
#include "store/history.hpp"
#include "gates/reference.hpp"
#include "probes/child.hpp"
#include "probes/env.hpp"

namespace fs = std::filesystem;

namespace detaudit::cli {
namespace {

struct HealthArgs {
  std::string reference, metrics;
  double budget = kHealthBudgetDefault;
  int repeats = 2, nice = 0, max_cpus = 0;
  bool drain = false, resume = false;
  OutputFlags output;
  HistoryFlags hist;
  double history_every = 86400;  // --history-every
  std::string command;  // as typed, for the history
};

// The executable `name` on PATH (scontrol), or "".
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path && *path ? path : "/usr/bin:/bin:/usr/sbin:/sbin";
  for (size_t start = 0; start <= p.size();) {
    const size_t colon = std::min(p.find(':', start), p.size());
    const std::string dir = p.substr(start, colon - start);
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
    start = colon + 1;
  }
  return "";
}

// Runs scontrol with `args` (no shell: the reason is one argument whatever it holds); its stdout lines in *out.
Status scontrol(const std::vector<std::string>& args, std::string* out = nullptr) {
  const std::string exe = on_path("scontrol");
  if (exe.empty()) return Status::unavailable("scontrol is not on PATH (is this a Slurm node?)");
  ChildSpec cs;
  cs.exe = exe;
  cs.args = args;
  std::string text;
  const ChildExit ex = run_child(cs, 20, [&](const std::string& line) {
    text += line + "\n";
    return false;
  });
  if (out) *out = text;
  if (!ex.started) return Status::error(ex.error);
  if (ex.timed_out) return Status::error("scontrol did not answer within 20 s");
  if (ex.signaled || ex.code != 0)
    return Status::error(fmt::format("scontrol {} failed ({})", args.empty() ? "" : args[0],
                                     ex.signaled ? signal_description(ex.sig) : fmt::format("exit {}", ex.code)));
  return Status::ok();
}

// This node's name to Slurm: SLURMD_NODENAME (set for a HealthCheckProgram, a Prolog and an Epilog), else the short
// host name.
std::string slurm_node_name() {
  if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n) return n;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string h = host;
  return h.substr(0, h.find('.'));
}

// "State=" and "Reason=" of `scontrol -o show node NAME` (the reason up to its " [user@time]").
void node_state(const std::string& text, std::string* state, std::string* reason) {
  const size_t s = text.find("State=");
  if (s != std::string::npos) *state = text.substr(s + 6, text.find(' ', s) - s - 6);
  const size_t r = text.find("Reason=");
  if (r != std::string::npos) {
    std::string rest = text.substr(r + 7);
    if (const size_t nl = rest.find('\n'); nl != std::string::npos) rest.resize(nl);
    if (const size_t by = rest.rfind(" ["); by != std::string::npos) rest.resize(by);
    *reason = rest;
  }
}

// --drain on a FAIL, --resume on an OK: what was done to the node, one line (or why nothing was).
nlohmann::json act_on_node(const HealthArgs& a, const HealthOutcome& h) {
  nlohmann::json j = nlohmann::json::object();
  const bool drain = a.drain && h.decision == Decision::kFail, resume = a.resume && h.decision == Decision::kPass;
  if (!drain && !resume) return j;
  const std::string node = slurm_node_name();
  j["node"] = node;
  if (drain) {
    const Status st = scontrol({"update", "NodeName=" + node, "State=DRAIN", "Reason=" + h.line});
    j["action"] = st ? "drained" : "drain failed";
    if (!st) j["detail"] = st.message();
    say(stderr, "detaudit: {} {}{}\n", st ? "drained" : "could not drain", node, st ? "" : ": " + st.message());
    return j;
  }
  std::string text, state, reason;
  if (Status st = scontrol({"-o", "show", "node", node}, &text); !st) {
    j["action"] = "resume failed";
    j["detail"] = st.message();
    say(stderr, "detaudit: could not read {}'s state: {}\n", node, st.message());
    return j;
  }
  node_state(text, &state, &reason);
  // Only a drain of detaudit's own is undone: a node an administrator drained stays drained.
  if (state.find("DRAIN") == std::string::npos || reason.rfind("detaudit:", 0) != 0) {
    j["action"] = "left";
    j["detail"] = state.find("DRAIN") == std::string::npos ? "not drained" : "drained by someone else: " + reason;
    return j;
  }
  const Status st = scontrol({"update", "NodeName=" + node, "State=RESUME"});
  j["action"] = st ? "resumed" : "resume failed";
  if (!st) j["detail"] = st.message();
  say(stderr, "detaudit: {} {}{}\n", st ? "resumed" : "could not resume", node, st ? "" : ": " + st.message());
  return j;
}

// Test hook (tests/test_healthcheck.cpp): DETAUDIT_HEALTHCHECK_TEST_FLIP=CPU:WORKLOAD makes the workers bound to that
// logical CPU flip the lowest bit of that workload's outputs (`*`: of every workload), as a faulty core would.
std::map<int, std::map<std::string, std::string>> test_hook_env() {
  std::map<int, std::map<std::string, std::string>> env;
  const char* v = std::getenv("DETAUDIT_HEALTHCHECK_TEST_FLIP");
  if (!v || !*v) return env;
  const std::string s = v;
  const size_t colon = s.find(':');
  if (colon == std::string::npos || colon == 0) return env;
  try {
    env[std::stoi(s.substr(0, colon))]["DETAUDIT_TEST_FLIP_OUTPUT"] = s.substr(colon + 1);
  } catch (const std::exception&) {
  }
  return env;
}

// --metrics FILE: this check as Prometheus sees it (the path was checked before anything ran). A file that cannot be
// written now (a full disk) is an error of its own: a dashboard that silently keeps the last good file hides a
// failing node, so the line says so and the exit code is 2 where the check passed.
void with_metrics(const HealthArgs& a, const HealthOutcome& h, const std::string& host, double seconds, Outcome* o) {
  if (a.metrics.empty()) return;
  PromText p;
  std::vector<MetricFinding> fs;
  for (auto& f : h.findings) {
    MetricFinding m;
    if (f.gpu >= 0)
      m.where = {{"gpu", std::to_string(f.gpu)}, {"uuid", f.gpu_uuid}};
    else
      m.where = {{"logical_cpu", std::to_string(f.place.cpu)}, {"core", std::to_string(f.place.core)},
                 {"package", std::to_string(f.place.package)}};
    m.action = to_string(f.action), m.kind = to_string(f.kind), m.cell = f.workload + " @ " + f.target;
    fs.push_back(std::move(m));
  }
  add_node_metrics(&p, "healthcheck", {{"host", host}}, exit_code_of(h.decision), h.cells, fs);
  add_run_metrics(&p, "healthcheck", host, seconds);
  if (Status st = write_metrics(a.metrics, p); !st) {
    const std::string why = "--metrics " + st.message();
    if (o->exit_code == 0) {
      o->exit_code = 2;
      o->error = why;
      o->text = "detaudit: ERROR " + why + " (the check itself: " + h.line.substr(std::string("detaudit: ").size()) + ")\n";
    } else {
      say(stderr, "detaudit: error: {}\n", why);
    }
  }
}

// An outcome that judged nothing: its ERROR line (stdout, as every answer), exit 2, and the metrics say so too.
int could_not_judge(const HealthArgs& a, const std::string& why, const std::string& key, const std::string& host,
                    double seconds) {
  Outcome o;
  HealthOutcome none;
  none.decision = Decision::kNotJudged;
  none.status = "ERROR";
  none.line = "detaudit: ERROR " + why;
  o.exit_code = 2;
  o.error = why;
  o.text = none.line + "\n";
  o.data = {{"healthcheck",
             {{"schema", kHealthSchema}, {"status", "ERROR"}, {"line", none.line}, {"reference", a.reference}, {"key", key}}}};
  with_metrics(a, none, host, seconds, &o);
  return emit(o);
}

// Records the check in the history (`history`; "": --no-history), unless it judged no cell, or it gives the answer of
// the last check this host recorded there (the same status, the same failing cells on the same CPUs and GPUs,
// command, build and machine) and that one is younger than --history-every: a check every few minutes would
// otherwise grow the history by megabytes a day. When it cannot be recorded: an OK becomes an ERROR of exit 2 (an
// answer nobody can find later is no pass), and a FAIL stays a FAIL (the node is faulty whatever the history says),
// with the history's line on stderr. Returns what was done, for the JSON.
nlohmann::json record_health(const HealthArgs& a, const std::string& history, const LastHealthcheck& last,
                             const Reference& ref, const std::string& key, const std::vector<HealthLane>& lanes,
                             const HealthRun& run, const nlohmann::json& machine, const std::string& started_at,
                             HealthOutcome* h) {
  if (history.empty()) return {{"recorded", false}, {"why", "--no-history"}};
  Results r = health_results(ref, key, lanes, run, *h);
  if (r.observations.empty()) return {{"recorded", false}, {"file", history}, {"why", "nothing was judged"}};
  r.machine = machine;
  r.command = a.command;
  r.started_at = started_at;
  r.finished_at = utc_now_iso8601();
  std::set<std::string> failed;
  for (const Observation& o : r.observations)
    if (o.verdict == Verdict::kFail) failed.insert(health_failure(o.workload, o.target, o.verdict_reason));
  const auto then = iso8601_seconds(last.recorded_at);
  const int64_t now = int64_t(std::time(nullptr));
  if (last.found && then && *then <= now && double(now - *then) < a.history_every &&
      last.exit_code == exit_code_of(h->decision) &&
      last.command == r.command && last.tool_commit == r.tool_commit && last.machine_key == machine_key(machine) &&
      last.failed == failed)
    return {{"recorded", false}, {"file", history}, {"why", "the answer of the check recorded at " + last.recorded_at}};
  const Status st = record_run(history, RunKind::kHealthcheck, r, "", exit_code_of(h->decision));
  if (st) return {{"recorded", true}, {"file", history}};
  const nlohmann::json not_recorded = {{"recorded", false}, {"file", history}, {"why", st.message()}};
  if (interrupted()) return not_recorded;  // (while the history was locked: the caller says so)
  if (h->decision != Decision::kPass) {
    say(stderr, "detaudit: error: {}\n", st.message());
    return not_recorded;
  }
  h->decision = Decision::kNotJudged;
  h->status = "ERROR";
  h->line =
      "detaudit: ERROR " + st.message() + " (the check itself: " + h->line.substr(std::string("detaudit: ").size()) + ")";
  return not_recorded;
}

int run_healthcheck(const HealthArgs& a, const std::string& exe) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  // Bad options and a metrics file that could never be written are refused before anything runs.
  if (a.nice > 0 && ::setpriority(PRIO_PROCESS, 0, a.nice) != 0)
    return fail(fmt::format("--nice {}: {}", a.nice, std::strerror(errno)));
  if (!a.metrics.empty())
    if (Status st = check_destination(a.metrics, Own::kMetrics); !st) return fail("--metrics " + st.message());
  const std::string started_at = utc_now_iso8601();
  const nlohmann::json machine = machine_fingerprint();
  const std::string host = machine.value("hostname", std::string("unknown"));
  // The history is read before the work (a damaged one stops the check at once) but not checked row by row: that is
  // recording's, and a check recorded only on a change or once a period seldom records.
  std::string history;
  LastHealthcheck last;
  if (Status st = resolve_history_path(a.hist, &history); !st) return fail(st);
  if (!history.empty()) {
    Status st = file_outside_fleet_ranks(history, "--history");
    if (st) st = check_history(history, false);
    if (st) st = last_healthcheck(history, host, &last);
    if (!st) return fail(st);
  }
  const nlohmann::json key_fields = fleet_key(machine, DETAUDIT_VERSION, git_commit());
  const std::string key = fleet_key_hash(key_fields);
  Reference ref;
  if (Status st = load_reference(a.reference, &ref); !st) return could_not_judge(a, st.message(), key, host, elapsed());
  HealthPlanOptions po;
  po.offset = size_t(std::time(nullptr) / 60);  // successive runs begin at other cells
  po.max_cpus = size_t(a.max_cpus);
  po.gpus = machine.contains("gpus") && machine["gpus"].is_array() ? int(machine["gpus"].size()) : 0;
  std::vector<HealthLane> lanes;
  if (Status st = plan_health_lanes(ref, key, key_fields, allowed_cpus(), po, &lanes); !st)
    return could_not_judge(a, st.message(), key, host, elapsed());
  HealthRunOptions ro;
  ro.exe = exe;
  ro.repeats = a.repeats;
  ro.deadline = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(a.budget));
  ro.env_by_cpu = test_hook_env();
  HealthRun run;
  run_health_lanes(lanes, ro, &run);
  if (const int sig = interrupted()) {
    say(stderr, "detaudit: interrupted by {}: nothing judged\n", signal_description(sig));
    return 128 + sig;
  }
  HealthOutcome h = judge_health(ref, key, lanes, run, machine.value("gpus", nlohmann::json::array()), a.budget);
  h.reference = a.reference, h.host = host;
  // Recorded before Slurm is told: a check the history lost is no OK to resume a node on.
  h.history = record_health(a, history, last, ref, key, lanes, run, machine, started_at, &h);
  if (const int sig = interrupted()) {
    say(stderr, "detaudit: interrupted by {} while the check was recorded; Slurm was not told (the check: {})\n",
        signal_description(sig), h.line);
    return 128 + sig;
  }
  h.total_seconds = elapsed();
  h.slurm = act_on_node(a, h);
  if (const int sig = interrupted()) {
    // Judged, but stopped while Slurm was being told: the node's state is not what --drain/--resume asked.
    say(stderr, "detaudit: interrupted by {} before scontrol finished (the check: {})\n", signal_description(sig),
        h.line);
    return 128 + sig;
  }
  Outcome o;
  o.exit_code = exit_code_of(h.decision);
  o.text = h.line + "\n";
  o.data = {{"healthcheck", to_json(h)}};
  if (h.decision == Decision::kNotJudged) o.error = h.line.substr(std::string("detaudit: ERROR ").size());
  if (h.decision == Decision::kFail) o.first_fail = h.findings.front().line, o.counts.fail = h.findings.size();
  with_metrics(a, h, host, elapsed(), &o);
  return emit(o);
}

Command add_healthcheck_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "healthcheck",
      "Judge this node in seconds against known-good bits (a reference that `detaudit fleet` wrote): every logical "
      "CPU at once runs cells the reference holds for this machine, each in workers bound to it, and each GPU its "
      "own; one line and exit 0 OK, 1 a problem, 2 could not judge. Made to be Slurm's HealthCheckProgram, a "
      "Prolog or Epilog, an NHC check or a node-problem-detector plugin.");
  auto a = std::make_shared<HealthArgs>();
  a->command = command_line(argc, argv);
  sub->add_option("--reference", a->reference,
                  "The known-good bits (detaudit-reference/1: DIR/reference.json of a fleet of this kind of node, or "
                  "`detaudit fleet merge`'s site file); required")
      ->required()
      ->check(kNonEmpty);
  sub->add_option("--budget", a->budget,
                  "Seconds of cells; the CPUs' cells share them, each library on every CPU (start-up adds about a "
                  "tenth of a second)")
      ->check(kFinite)
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  sub->add_option("--repeats", a->repeats, "Runs per cell after its warm-up, each judged")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sub->add_option("--cpus", a->max_cpus,
                  "Use at most N logical CPUs (spread over the machine, moving between runs); 0: every one this "
                  "process may use (its affinity: taskset or a cgroup limits it too)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  sub->add_option("--nice", a->nice, "Run at this niceness (0..19), beside jobs the node is running")
      ->check(CLI::Range(0, 19))
      ->capture_default_str();
  sub->add_option("--metrics", a->metrics,
                  "Also write the outcome in Prometheus's text format to FILE (atomically), for node_exporter's "
                  "textfile collector: detaudit_health_status, detaudit_findings per action, one detaudit_finding "
                  "per finding with its cpu, core and package")
      ->check(kNonEmpty);
  sub->add_flag("--drain", a->drain,
                "On FAIL, drain this Slurm node (SLURMD_NODENAME, else the host name) with the line as its reason, "
                "through scontrol");
  sub->add_flag("--resume", a->resume,
                "On OK, return this Slurm node to service, only when it is drained with a reason of detaudit's own");
  add_history_flags(sub, &a->hist);
  sub->add_option("--history-every", a->history_every,
                  "Record a check that gives the answer of the last one this host recorded (the same status, the "
                  "same failing cells on the same CPUs and GPUs, command, build and machine) at most once per S "
                  "seconds; a change is recorded at once; 0: every check")
      ->type_name("S")
      ->check(kFinite)
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  add_output_flags(sub, &a->output, false);
  sub->footer(
      "\nOutput: one line,\n"
      "  detaudit: OK 412 cells on 2 cpus in 6.1 s\n"
      "  detaudit: FAIL cpu 13 (core 6, package 0): other bits in W on T (reference 44d9a0b1, here e9d2c3f4)\n"
      "  detaudit: ERROR <why nothing could be judged>\n"
      "Exit codes: 0 OK, 1 a problem (other bits, a crash, a cell that could not run), 2 could not judge (no\n"
      "reference cell of this machine's key: another build, library or CPU; nothing finished within --budget),\n"
      "128+N interrupted by signal N. Workers never write core files.\n"
      "History: a check that judged is recorded in the history database as probe's and qualify's runs are (each\n"
      "cell's distinct bits, PASS or FAIL, kind healthcheck), when its answer differs from the last one this host\n"
      "recorded or that one is older than --history-every: `detaudit history --machine HOST` shows when a CPU began\n"
      "to give other bits. An OK that cannot be recorded is an ERROR (exit 2); --no-history records nothing.\n"
      "Slurm (slurm.conf): HealthCheckProgram=/usr/local/sbin/detaudit-health, a script that runs\n"
      "  exec detaudit healthcheck --reference /etc/detaudit/reference.json --drain --resume --nice 10\n"
      "(Slurm kills a health check after 60 s and runs it on every node at once).");
  const std::string exe = self_exe(argv[0]);
  return {sub, [a, exe]() { return run_healthcheck(*a, exe); }, &a->output, false, false};
}

const CommandRegistration reg(42, add_healthcheck_command);

}  // namespace
}  // namespace detaudit::cli
