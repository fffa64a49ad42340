// `detaudit probe`: a suite (or its targets and workloads replaced) run cell by cell in workers, every cell
// judged against its target's promise, the results and reports written as it goes (an interrupted run resumes).
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/history_flags.hpp"
#include "cli/output.hpp"
#include "contract/cells.hpp"
#include "contract/plan.hpp"
#include "contract/results.hpp"
#include "gates/verdict.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "probes/spec.hpp"
#include "probes/worker.hpp"
#include "report/train_report.hpp"
#include "suites/probe_suite.hpp"

namespace fs = std::filesystem;

namespace detaudit::cli {
namespace {

struct ProbeArgs {
  std::string suite = kDefaultProbeSuite, targets, workloads, out;
  int repeats = 0;
  double timeout = kDefaultProbeTimeoutS;
  bool fresh = false, resume = false, no_fail = false, gpu_only = false;
  HistoryFlags hist;
  OutputFlags output;
};


// The latest unfinished run of a suite under results/ (default directories are results/<suite>-<time>,
// so the names sort by time). A link there is no run of its own: nothing is written through it.
std::string latest_unfinished(const std::string& prefix) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("results", ec))
    if (!e.is_symlink() && e.is_directory() && e.path().filename().string().rfind(prefix + "-", 0) == 0)
      dirs.push_back(e.path().string());
  std::sort(dirs.rbegin(), dirs.rend());
  for (auto& d : dirs) {
    Results r;
    if (load_checked_results(results_file(d), &r).is_ok() && r.finished_at.empty()) return d;
  }
  return "";
}

// Why nothing was judged: no cell ran on this machine (every one skipped, or crashed as expected where the
// CPU lacks an instruction set or the machine a device; the first reason), or no cell at all.
std::string nothing_judged(const std::vector<Observation>& obs) {
  if (obs.empty()) return "nothing was judged: no cell ran (no target of the plan runs any of its workloads)";
  const Observation& o = obs.front();
  const std::string why = o.verdict_reason.empty() || o.verdict_reason.find(o.reason) != std::string::npos
                              ? (o.verdict_reason.empty() ? o.reason : o.verdict_reason)
                          : o.reason.empty() ? o.verdict_reason
                                             : o.reason + "; " + o.verdict_reason;
  return fmt::format("nothing was judged: none of the {} cells ran on this machine, so nothing about determinism "
                     "was seen (first: {} on {}: {}{})",
                     obs.size(), o.workload, o.target, to_string(o.status), why.empty() ? "" : ", " + why);
}

Outcome probe_outcome(const Results& results, const std::string& dir, bool no_fail) {
  auto s = summarize(results.observations);
  VerdictCounts v = count_verdicts(results);
  Outcome o;
  o.counts = v;  // the five verdicts (unjudged cells are not a verdict)
  o.report_md = dir + "/report.md";
  o.report_html = dir + "/report.html";
  o.text = fmt::format(
      "{} of {} cells deterministic, {} nondeterministic, {} crashed, {} timed out, {} skipped, {} errors\n",
      s.deterministic, s.deterministic + s.nondeterministic, s.nondeterministic, s.crashed, s.timeout, s.skipped,
      s.error);
  o.text += fmt::format("verdicts: {} PASS, {} FAIL, {} EXPECTED, {} WARN, {} SKIP\n", v.pass, v.fail, v.expected,
                        v.warn, v.skip);
  // Every FAIL on the terminal, up to a screenful; all of them are in the reports and results.json.
  constexpr int kFailLines = 50;
  int shown = 0;
  nlohmann::json fails = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows;
  for (auto& c : results.observations) {
    if (c.verdict != Verdict::kFail) continue;
    if (o.first_fail.empty()) o.first_fail = fmt::format("{} on {}: {}", c.workload, c.target, c.verdict_reason);
    fails.push_back({{"workload", c.workload}, {"target", c.target}, {"reason", c.verdict_reason}});
    rows.push_back({c.workload, c.target, c.verdict_reason});
    if (shown++ < kFailLines) o.text += fmt::format("FAIL {} on {}: {}\n", c.workload, c.target, c.verdict_reason);
  }
  if (shown > kFailLines) o.text += fmt::format("... and {} more FAIL (see {})\n", shown - kFailLines, o.report_md);
  o.text += fmt::format("report: {} and {}\n", o.report_md, o.report_html);
  o.exit_code = v.fail && !no_fail ? 1 : 0;
  if (v.fail && no_fail) o.text += fmt::format("--no-fail: exit 0 despite {} FAIL\n", v.fail);
  // A run in which no cell ran (all skipped, or all crashed as expected: a GPU target without a GPU, an ISA
  // the CPU lacks) judged nothing about determinism: 2, not 0. Beside a cell that ran, such cells are SKIP
  // and EXPECTED and the exit code is the cells' that ran.
  const bool any_ran = std::any_of(results.observations.begin(), results.observations.end(),
                                   [](const Observation& c) { return c.status == ObsStatus::kOk; });
  if (v.fail == 0 && !any_ran) {
    o.exit_code = 2;
    o.error = nothing_judged(results.observations);
  }
  o.data = {{"out", dir},
            {"suite", results.plan.value("suite", "")},
            {"custom", results.plan.value("custom", false)},
            {"cells",
             {{"deterministic", s.deterministic},
              {"nondeterministic", s.nondeterministic},
              {"crashed", s.crashed},
              {"timeout", s.timeout},
              {"skipped", s.skipped},
              {"error", s.error}}},
            {"failures", fails}};
  o.markdown =
      markdown_summary(fmt::format("detaudit probe: {} on {}", plan_kind(results.plan),
                                   results.machine.value("hostname", "?")),
                       o.counts, o.text.substr(0, o.text.find('\n')), rows, {"workload", "target", "why"}, o.report_md);
  return o;
}

int run_probe(const ProbeArgs& a, int argc, char** argv) {
  ProbePlan plan;
  if (Status st = make_plan(a.suite, a.targets, a.workloads, a.repeats, a.timeout, &plan); !st) return fail(st);
  if (a.gpu_only) {
    // The suite's GPU targets alone: what a GPU machine checks that a CPU machine cannot.
    std::erase_if(plan.targets, [](const Spec& t) {
      const BackendEntry* e = find_backend(t.name);
      return !e || e->device == DeviceKind::kHost;
    });
    if (plan.targets.empty()) return fail(fmt::format("--gpu-only: suite {} has no GPU targets", a.suite));
  }
  if (int rc = precheck_history(a.hist)) return rc;
  ProbeRunOptions opt;
  opt.out_dir = a.out;
  if (a.resume && a.fresh) return fail("--resume and --fresh contradict each other");
  if (opt.out_dir.empty() && a.resume) {
    opt.out_dir = latest_unfinished(a.suite);
    if (opt.out_dir.empty()) return fail(fmt::format("--resume: no unfinished {} run under results/", a.suite));
  }
  if (opt.out_dir.empty()) opt.out_dir = default_out(a.suite);
  if (Status st = out_outside_fleet_ranks(opt.out_dir); !st) return fail(st);
  opt.exe = self_exe(argv[0]);
  opt.fresh = a.fresh;
  opt.command = command_line(argc, argv);
  opt.progress = progress_sink();
  opt.custom = !a.targets.empty() || !a.workloads.empty();
  // Run, judge, save and report under one hold on the directory.
  ResultsDir dir(opt.out_dir);
  opt.results_dir = &dir;
  Results results;
  if (Status st = run_probe_suite(plan, opt, &results); !st) {
    if (st.code() == Status::Code::kInterrupted)
      return interrupted_exit("cells", results.observations.size(), count_cells(plan),
                              resume_command(argc, argv, opt.out_dir));
    return fail(st);
  }
  // Judge every cell against its target's promise, then write the results and reports again with the
  // verdicts (the suite wrote them while running).
  judge(&results);
  if (Status st = dir.save(results); !st) return fail(st);
  if (Status st = write_reports(opt.out_dir, results); !st) return fail(st);
  Outcome o = probe_outcome(results, opt.out_dir, a.no_fail);
  record_history(a.hist, RunKind::kProbe, results, opt.out_dir, &o);
  return emit(o);
}

Command add_probe_command(CLI::App& app, int argc, char** argv) {
  auto* probe = app.add_subcommand("probe", "Run a probe suite and write results.json, report.md and report.html.");
  auto a = std::make_shared<ProbeArgs>();
  probe->add_option("--suite", a->suite, "Suite: quick (under 2 minutes on 2 cores) or full")->capture_default_str();
  probe->add_option("--targets", a->targets, "Comma-separated target specs, replacing the suite's")->check(kNonEmpty);
  auto* targets_opt = probe->get_option("--targets");
  probe->add_flag("--gpu-only", a->gpu_only, "Run only the suite's GPU targets (its CPU targets are left out)")
      ->excludes(targets_opt);
  probe->add_option("--workloads", a->workloads, "Comma-separated workload specs, replacing the suite's")->check(kNonEmpty);
  probe->add_option("--repeats", a->repeats, "Repeats per workload x target (default: the suite's, 10 quick, 20 full)")
      ->check(CLI::Range(1, int(kMaxRepeats)));
  probe
      ->add_option("--timeout", a->timeout,
                   "Seconds one workload may take on a target, all repeats together (also the oracle's limit)")
      ->check(kFinite & CLI::Range(0.001, 604800.0))
      ->capture_default_str();
  probe->add_option("--out", a->out,
                    "Results directory (default results/<suite>-<time>); an unfinished run there resumes")
      ->check(kNonEmpty);
  probe->add_flag("--fresh", a->fresh, "Discard results and cached oracle outputs already in --out instead of resuming");
  add_history_flags(probe, &a->hist);
  add_output_flags(probe, &a->output, true);
  probe->add_flag("--no-fail", a->no_fail, "Exit 0 even when a cell FAILs (the verdicts are still reported)");
  probe->add_flag("--resume", a->resume, "Without --out: continue the latest unfinished run of --suite under results/");
  probe->footer("\nTARGETS (backend[:device][?key=value&...]):\n" + target_help() +
                "\nWORKLOADS (op?key=value&...; every workload also takes dist=uniform|int and seed=N):\n" +
                workload_help() +
                "\nVERDICTS: each cell is judged against its target's promise: PASS, FAIL (a deterministic target gave\n"
                "several outputs, an equality class split, an unexpected crash, oracle error beyond the summation\n"
                "error bound), EXPECTED (promised nondeterminism, or a crash the machine's missing ISA/device explains),\n"
                "WARN (claimed nondeterministic but no variation seen), SKIP. probe exits 1 when any cell FAILs\n"
                "(--no-fail: 0).\n"
                "\nA target that crashes (e.g. SIGILL) or runs past --timeout is recorded as an observation and the\n"
                "audit goes on. GPU targets are skipped with the reason on machines without a CUDA device.\n"
                "A workload whose estimated memory exceeds what the machine has available is refused (exit 2).\n"
                "Ctrl-C (or SIGTERM) stops the workers, keeps every finished cell and prints the command that resumes.");

  return {probe, [a, argc, argv] { return run_probe(*a, argc, argv); }, &a->output, true, true};
}

const CommandRegistration reg(2, add_probe_command);

}  // namespace
}  // namespace detaudit::cli
