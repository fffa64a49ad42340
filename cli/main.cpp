// detaudit: audits numerical determinism at the hardware level. The only place that prints to stdout
// and turns statuses into exit codes: 0 ok, 1 a check failed, 2 could not run (one line on stderr).
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "cli/common.hpp"
#include "cli/history_flags.hpp"
#include "cli/output.hpp"
#include "contract/cells.hpp"
#include "contract/results.hpp"
#include "gates/verdict.hpp"
#include "probes/child.hpp"
#include "probes/env.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "probes/spec.hpp"
#include "probes/worker.hpp"
#include "contract/plan.hpp"
#include "report/document.hpp"
#include "report/train_report.hpp"
#include "suites/dir_lock.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_design.hpp"

namespace fs = std::filesystem;
using namespace detaudit;
using namespace detaudit::cli;

namespace {

// The latest unfinished run of a suite under results/ (default directories are results/<suite>-<time>,
// so the names sort by time).
std::string latest_unfinished(const std::string& prefix) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("results", ec))
    if (e.is_directory() && e.path().filename().string().rfind(prefix + "-", 0) == 0) dirs.push_back(e.path().string());
  std::sort(dirs.rbegin(), dirs.rend());
  for (auto& d : dirs) {
    Results r;
    if (load_checked_results(results_file(d), &r).is_ok() && r.finished_at.empty()) return d;
  }
  return "";
}

int interrupted_exit(const std::string& what, size_t done, size_t total, const std::string& resume) {
  int sig = interrupted();
  say(stderr, "interrupted: {} of {} {} done; resume with: {}\n", done, total, what, resume);
  return 128 + (sig ? sig : SIGINT);
}

std::string self_exe(const char* argv0) {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

std::string default_out(const std::string& suite) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("results/{}-{}", suite, buf);
}

std::string env_text(const nlohmann::json& m) {
  auto s = [&](const char* k) -> std::string {
    if (!m.contains(k)) return "unknown";
    return m[k].is_string() ? m[k].get<std::string>() : m[k].dump();
  };
  std::string t = fmt::format("host       {}\nos         {}\ncpu        {}\n", s("hostname"), s("os"), s("cpu_model"));
  t += fmt::format("topology   packages {}, cores {}, PUs {}, NUMA nodes {}\n", s("packages"), s("cores"), s("pus"),
                   s("numa_nodes"));
  if (m.contains("topology_error")) t += fmt::format("           ({})\n", s("topology_error"));
  if (m.contains("caches"))
    for (auto& c : m["caches"])
      t += fmt::format("cache      L{} {} KiB x {}\n", c.value("level", 0), c.value("size_bytes", uint64_t(0)) / 1024,
                       c.value("count", 0));
  t += fmt::format("features   {}\ncompiler   {}\n", s("cpu_features"), s("compiler"));
  for (auto& [k, v] : m["libraries"].items())
    t += fmt::format("{:<10} {}\n", k, v.is_string() ? v.get<std::string>() : v.dump());
  for (auto& kind : device_kinds())
    for (auto& key : kind.machine_keys) t += fmt::format("{:<10} {}\n", key, s(key.c_str()));
  for (auto& g : m["gpus"])
    t += fmt::format("gpu {}      {} ({}), CC {}, {} SMs, {:.1f} GiB, L2 {} MiB, ECC {}, PCI {}, local CPUs {}\n",
                     g.value("index", 0), g.value("name", ""), g.value("uuid", ""), g.value("compute_capability", ""),
                     g.value("sm_count", 0), g.value("memory_bytes", uint64_t(0)) / 1073741824.0,
                     g.value("l2_bytes", 0) / 1048576, g.value("ecc", false) ? "on" : "off", g.value("pci_bus_id", ""),
                     g.value("local_cpuset", "unknown"));
  return t;
}

// The fingerprint as markdown: one table of fields and values.
std::string env_markdown(const nlohmann::json& m, const std::string& text) {
  Document d;
  d.title = "detaudit env: " + m.value("hostname", std::string("?"));
  std::vector<std::vector<Cell>> rows;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    const size_t gap = line.find(' ');
    if (gap == std::string::npos || gap == 0) continue;
    const size_t value = line.find_first_not_of(' ', gap);
    rows.push_back(
        {{inline_text(line.substr(0, gap))}, {inline_text(value == std::string::npos ? "" : line.substr(value))}});
  }
  d.add("").table({"field", "value"}, std::move(rows));
  return render_markdown(d);
}

struct ProbeArgs {
  std::string suite = "quick", targets, workloads, out;
  int repeats = 0;
  double timeout = 120;
  bool fresh = false, resume = false, no_fail = false, gpu_only = false;
  HistoryFlags hist;
  OutputFlags output;
};

struct TrainArgs {
  std::string model, design = "sony2021", targets, out, data, prednet_config;
  int seeds = 0, batches = 0, window = 0, replicates = 0, noise_every = 0;
  double run_timeout = 0;
  bool paper = false, fresh = false, noise_scale = false;
  HistoryFlags hist;
  OutputFlags output;
};


// A markdown summary for a pull request: a title, the verdict counts, and a table of what FAILed.
std::string markdown_summary(const std::string& title, const VerdictTally& t, const std::string& lead,
                             const std::vector<std::vector<std::string>>& fails, const std::vector<std::string>& header,
                             const std::string& report) {
  Document d;
  d.title = title;
  Section& s = d.add("");
  if (!lead.empty()) s.para(inline_text(lead));
  s.table({"PASS", "FAIL", "EXPECTED", "WARN", "SKIP"}, {{{std::to_string(t.pass)},
                                                          {std::to_string(t.fail)},
                                                          {std::to_string(t.expected)},
                                                          {std::to_string(t.warn)},
                                                          {std::to_string(t.skip)}}});
  if (!fails.empty()) {
    std::vector<std::vector<Cell>> rows;
    for (auto& f : fails) {
      std::vector<Cell> r;
      for (auto& x : f) r.push_back({inline_text(x)});
      rows.push_back(std::move(r));
    }
    d.add("FAIL").table(header, std::move(rows)).md_budget(40000);
  }
  if (!report.empty()) d.add("").para("Full report: " + inline_code(report));
  return render_markdown(d);
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
  for (int i = 0; i < argc; ++i) opt.command += (i ? " " : "") + std::string(argv[i]);
  opt.progress = progress_sink();
  opt.custom = !a.targets.empty() || !a.workloads.empty();
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
  if (Status st = save_results(results_file(opt.out_dir), results); !st) return fail(st);
  if (Status st = write_reports(opt.out_dir, results); !st) return fail(st);
  Outcome o = probe_outcome(results, opt.out_dir, a.no_fail);
  record_history(a.hist, RunKind::kProbe, results, opt.out_dir, &o);
  return emit(o);
}

// "(a) cpu?order=atomic&threads=2 seed 1000 rep 1": a training run by its cell.
std::string run_label(const TrainingRun& r) {
  return fmt::format("({}) {} seed {} rep {}", r.condition, r.target, r.seed, r.replicate);
}

Outcome train_outcome(const Results& results, const std::string& dir) {
  Outcome o;
  o.report_md = dir + "/report.md";
  o.report_html = dir + "/report.html";
  int trained = 0;
  nlohmann::json fails = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows;
  std::string fail_lines;
  for (auto& r : results.training) {
    RunVerdict v = judge_training_run(r);
    switch (v.verdict) {
      case Verdict::kPass:
        ++o.counts.pass;
        break;
      case Verdict::kWarn:
        ++o.counts.warn;
        break;
      case Verdict::kSkip:
        ++o.counts.skip;
        break;
      default:
        ++o.counts.fail;
        break;
    }
    if (r.ok()) ++trained;
    if (v.verdict != Verdict::kFail) continue;
    if (o.first_fail.empty()) o.first_fail = run_label(r) + ": " + v.reason;
    fail_lines += fmt::format("FAIL {}: {}\n", run_label(r), v.reason);
    fails.push_back({{"key", r.key},
                     {"condition", r.condition},
                     {"target", r.target},
                     {"seed", r.seed},
                     {"replicate", r.replicate},
                     {"status", to_string(r.status)},
                     {"reason", v.reason}});
    rows.push_back({run_label(r), v.reason});
  }
  o.text = fmt::format("{} training runs: {} finished, {} failed (crashed, timed out or an error), {} skipped\n",
                       results.training.size(), trained, o.counts.fail, o.counts.skip);
  o.text += fail_lines;
  o.text += fmt::format("report: {} and {}\n", o.report_md, o.report_html);
  o.exit_code = o.counts.fail ? 1 : 0;
  if (trained == 0 && !o.counts.fail) {
    o.exit_code = 2;
    const TrainingRun* first = results.training.empty() ? nullptr : &results.training.front();
    o.error = first ? fmt::format("nothing was judged: none of the {} training runs trained (first: {}: {})",
                                  results.training.size(), run_label(*first),
                                  first->reason.empty() ? to_string(first->status) : first->reason)
                    : "nothing was judged: the design has no training runs";
  }
  o.data = {{"out", dir}, {"runs", results.training.size()}, {"finished", trained}, {"failures", fails}};
  o.markdown = markdown_summary(fmt::format("detaudit train: {} {} on {}",
                                            results.plan.value("design", nlohmann::json::object()).value("model", ""),
                                            results.plan.value("design", nlohmann::json::object()).value("design", ""),
                                            results.machine.value("hostname", "?")),
                                o.counts, o.text.substr(0, o.text.find('\n')), rows, {"run", "why"}, o.report_md);
  return o;
}

int run_train(const TrainArgs& a, int argc, char** argv) {
  if (int rc = precheck_history(a.hist)) return rc;
  TrainDesign d = default_design(a.paper, a.model);
  if (!a.targets.empty()) {
    d.targets.clear();
    StatusOr<std::vector<std::string>> items = split_list(a.targets);
    if (!items) return fail(items.status().prefixed("--targets "));
    for (auto& t : *items) {
      Spec s;
      if (Status st = parse_target(t, &s); !st) return fail(st);
      if (std::none_of(d.targets.begin(), d.targets.end(), [&](const Spec& x) { return x.str() == s.str(); }))
        d.targets.push_back(s);
    }
  }
  if (a.seeds > 0) d.seeds = a.seeds;
  if (a.batches > 0) d.batches = a.batches;
  if (a.window > 0) d.window = a.window;
  if (a.replicates > 0) d.replicates = a.replicates;
  if (a.noise_every > 0 && !a.noise_scale) return fail("--noise-every needs --noise-scale");
  if (!a.prednet_config.empty()) {
    if (a.model != "prednet") return fail("--prednet-config is for the prednet model");
    d.prednet_config = a.prednet_config;
  }
  if (a.noise_scale) d.noise_every = a.noise_every > 0 ? a.noise_every : kDefaultNoiseEvery;
  d.data_dir = a.data;
  d.model = a.model;
  d.design = a.design;
  TrainRunOptions opt;
  opt.out_dir = a.out.empty() ? default_out("train") : a.out;
  if (Status st = out_outside_fleet_ranks(opt.out_dir); !st) return fail(st);
  opt.exe = self_exe(argv[0]);
  opt.fresh = a.fresh;
  opt.run_timeout_s = a.run_timeout;
  for (int i = 0; i < argc; ++i) opt.command += (i ? " " : "") + std::string(argv[i]);
  opt.progress = progress_sink();
  Results results;
  if (Status st = run_train_design(d, opt, &results); !st) {
    if (st.code() == Status::Code::kInterrupted)
      return interrupted_exit("runs", results.training.size(), results.plan.value("runs", size_t(0)),
                              resume_command(argc, argv, opt.out_dir));
    return fail(st);
  }
  if (Status st = write_reports(opt.out_dir, results); !st) return fail(st);
  Outcome o = train_outcome(results, opt.out_dir);
  record_history(a.hist, RunKind::kTrain, results, opt.out_dir, &o);
  return emit(o);
}

int run_report(const std::string& dir, const std::string& which) {
  Results r;
  if (!fs::is_directory(dir)) return fail(fmt::format("{}: not a directory", dir));
  if (Status st = load_checked_results(results_file(dir), &r); !st) return fail(st);
  DirLock lock;
  if (Status st = lock.acquire(dir); !st) return fail(st);
  // Judged for the report by this detaudit (a verdict the file stores is not evidence; results written
  // before verdicts existed, or by a run in progress, have none); the results file is left as it is.
  judge(&r);
  reanalyze_training(&r);
  bool md = which == "md" || which == "both", html = which == "html" || which == "both";
  if (Status st = write_reports(dir, r, md, html); !st) return fail(st);
  Outcome o;
  if (md) o.report_md = dir + "/report.md", o.text += o.report_md + "\n";
  if (html) o.report_html = dir + "/report.html", o.text += o.report_html + "\n";
  o.data = {{"dir", dir}};
  return emit(o);
}

int main_cli(int argc, char** argv) {
  CLI::App app{"detaudit: audits numerical determinism at the hardware level.\n"
               "Runs conv, matmul and reduction workloads again and again on each target, fingerprints every\n"
               "output bit for bit, and reports which targets are deterministic, which agree with each other,\n"
               "and how far each is from the double-accumulated oracle.\n"
               "Exit codes: 0 the audit completed and nothing FAILed, 1 a check failed (a FAIL verdict: a broken\n"
               "promise, a changed fingerprint, a disqualified machine), 2 could not run (one line on stderr),\n"
               "128+N interrupted by signal N (finished work is saved; the message says how to resume).",
               "detaudit"};
  app.set_version_flag("--version", std::string("detaudit ") + DETAUDIT_VERSION + " (" + git_commit() + ")");
  app.require_subcommand(1);

  auto* env = app.add_subcommand("env", "Print this machine's fingerprint: CPU topology, libraries, GPUs.");
  OutputFlags env_out;
  add_output_flags(env, &env_out, false);

  auto* probe = app.add_subcommand("probe", "Run a probe suite and write results.json, report.md and report.html.");
  ProbeArgs pa;
  probe->add_option("--suite", pa.suite, "Suite: quick (under 2 minutes on 2 cores) or full")->capture_default_str();
  probe->add_option("--targets", pa.targets, "Comma-separated target specs, replacing the suite's")->check(kNonEmpty);
  auto* targets_opt = probe->get_option("--targets");
  probe->add_flag("--gpu-only", pa.gpu_only, "Run only the suite's GPU targets (its CPU targets are left out)")
      ->excludes(targets_opt);
  probe->add_option("--workloads", pa.workloads, "Comma-separated workload specs, replacing the suite's")->check(kNonEmpty);
  probe->add_option("--repeats", pa.repeats, "Repeats per workload x target (default: the suite's, 10 quick, 20 full)")
      ->check(CLI::Range(1, int(kMaxRepeats)));
  probe
      ->add_option("--timeout", pa.timeout,
                   "Seconds one workload may take on a target, all repeats together (also the oracle's limit)")
      ->check(kFinite & CLI::Range(0.001, 604800.0))
      ->capture_default_str();
  probe->add_option("--out", pa.out,
                    "Results directory (default results/<suite>-<time>); an unfinished run there resumes")
      ->check(kNonEmpty);
  probe->add_flag("--fresh", pa.fresh, "Discard results and cached oracle outputs already in --out instead of resuming");
  add_history_flags(probe, &pa.hist);
  add_output_flags(probe, &pa.output, true);
  probe->add_flag("--no-fail", pa.no_fail, "Exit 0 even when a cell FAILs (the verdicts are still reported)");
  probe->add_flag("--resume", pa.resume, "Without --out: continue the latest unfinished run of --suite under results/");
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

  auto* train = app.add_subcommand("train", "Run a training regression design and write results.json and the reports.");
  TrainArgs ta;
  train->add_option("MODEL", ta.model,
                    "Model: autoencoder (Fashion-MNIST reconstruction) or prednet (next-frame prediction of moving "
                    "sprites; quick default: one target, 2 seeds, 60 batches of 4 sequences)")
      ->required()
      ->check(CLI::IsMember({"autoencoder", "prednet"}));
  train
      ->add_option("--design", ta.design,
                   "Design: sony2021, five conditions per target: (a) random initial weights, nondeterminism on; "
                   "(b) random, off; (c) fixed initial weights, on; (d) fixed, off; (e) fixed with one weight "
                   "moved by one ULP, off")
      ->check(CLI::IsMember({"sony2021"}))
      ->capture_default_str();
  train->add_option("--targets", ta.targets,
                    "Comma-separated base targets; each runs in its deterministic and nondeterministic variant "
                    "(default cpu?threads=2,cpu?threads=4 for the autoencoder, cpu?threads=2&conv=winograd for prednet: "
                    "order=atomic needs two threads to race)")
      ->check(kNonEmpty);
  train->add_option("--seeds", ta.seeds, "Runs per condition and target (default 3; --paper: 12)")
      ->check(CLI::Range(1, 10000));
  train->add_option("--batches", ta.batches, "Batches per run (default 200; --paper: 5000)")->check(CLI::Range(1, 10000000));
  train->add_option("--window", ta.window, "Final metric = mean loss of the last N batches (default 20; --paper: 50)")
      ->check(CLI::Range(1, 10000000));
  train->add_option("--replicates", ta.replicates,
                    "Repeats of each seed under condition (a), for the run-to-run term; (c) runs its one seed seeds x replicates times (default 2)")
      ->check(CLI::Range(1, 1000));
  train
      ->add_option("--run-timeout", ta.run_timeout,
                   "Seconds a training run may go without finishing a batch (or a batch of PredNet's held-out "
                   "check) before its worker is killed and the run recorded as timeout (the first batch also covers "
                   "starting the worker and loading the data; default 300)")
      ->check(kFinite & CLI::Range(0.001, 604800.0));
  train->add_option("--prednet-config", ta.prednet_config,
                    "prednet: quick (1x64x64 frames, stacks 1,16,32,64, 10 frames; the default), tiny (1x32x32, "
                    "stacks 1,4,8, 4 frames: a smoke test of the design in seconds) or paper (the paper's KITTI "
                    "network: 3x128x160 frames, stacks 3,48,96,192, 10 frames; sprites in three equal channels, or "
                    "--data FILE.npy of RGB [N,T,128,160,3]; about 40x quick's cost per batch: a GPU configuration)")
      ->check(CLI::IsMember({"quick", "tiny", "paper"}));
  train->add_flag("--noise-scale", ta.noise_scale,
                  "Measure the gradient noise scale B_simple along training (microbatches of each measured batch) "
                  "and the hardware noise at fixed weights and batch (the gradient computed twice: sigma^2_hw, B_hw)");
  train->add_option("--noise-every", ta.noise_every,
                    "With --noise-scale: measure every K-th batch (default 10); each measurement costs about one "
                    "extra batch")
      ->check(CLI::Range(1, 10000000));
  train->add_flag("--paper", ta.paper, "The paper's protocol: 12 runs, 5000 batches, window 50");
  train->add_option("--data", ta.data,
                    "Folder of MNIST-format IDX files (default: Fashion-MNIST from dataset-fashion-mnist; prednet cuts "
                    "its moving sprites from them), or for prednet an .npy video file, uint8 [N,T,H,W] or [N,T,H,W,C]")
      ->check(kNonEmpty);
  train->add_option("--out", ta.out, "Results directory (default results/train-<time>); an unfinished design there resumes")
      ->check(kNonEmpty);
  add_history_flags(train, &ta.hist);
  add_output_flags(train, &ta.output, true);
  train->add_flag("--fresh", ta.fresh, "Discard results already in --out instead of resuming");

  auto* report = app.add_subcommand("report", "Render a results directory's report again.");
  std::string report_dir, write = "both";
  OutputFlags report_out;
  report->add_option("DIR", report_dir, "Results directory holding results.json")->required()->check(kNonEmpty);
  report->add_option("--write", write, "Which reports to write: md (report.md), html (report.html) or both")
      ->check(CLI::IsMember({"md", "html", "both"}))
      ->capture_default_str();
  add_output_flags(report, &report_out, false);

  std::vector<Command> commands;
  for (auto& [order, factory] : registered_commands()) commands.push_back(factory(app, argc, argv));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    const std::string line = parse_error_line(app, argc, argv, msg);
    // `--format json` (or --json) asked for one object on stdout: the refusal is one too, though the
    // options did not parse.
    bool json = false;
    std::string command;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      json = json || arg == "--json" || arg == "--format=json" || (arg == "--format" && i + 1 < argc && std::string(argv[i + 1]) == "json");
      if (command.empty() && arg.rfind('-', 0) != 0)
        for (const CLI::App* sub : static_cast<const CLI::App&>(app).get_subcommands([](const CLI::App*) { return true; }))
          if (sub->get_name() == arg) command = arg;
    }
    const int rc = fail(line);
    if (json)
      put(stdout, nlohmann::json{{"schema", kCliSchema}, {"command", command}, {"exit_code", 2}, {"reports", nlohmann::json::object()}, {"error", line}}.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) +
                      "\n");
    return rc;
  }

  if (env->parsed()) {
    set_active_command("env", &env_out, false);
    nlohmann::json m = machine_fingerprint();
    Outcome o;
    o.text = env_text(m);
    o.markdown = env_markdown(m, o.text);
    o.data = {{"machine", m}};
    return emit(o);
  }
  if (probe->parsed()) {
    set_active_command("probe", &pa.output, true);
    return run_probe(pa, argc, argv);
  }
  if (train->parsed()) {
    set_active_command("train", &ta.output, true);
    return run_train(ta, argc, argv);
  }
  if (report->parsed()) {
    set_active_command("report", &report_out, false);
    return run_report(report_dir, write);
  }
  for (auto& c : commands)
    if (c.app->parsed()) {
      set_active_command(c.app->get_name(), c.output, c.judging);
      return c.run();
    }
  return 0;
}

}  // namespace

// A command whose answer is what it prints (env, check, compare, history, qualify's verdict, --help,
// --version, every --format json) has not succeeded when stdout lost it: exit 2 instead of 0, saying why.
// A command whose product is the files it writes (probe, train, fleet, report, ...) keeps its exit code
// unless its answer was JSON or markdown on stdout.
int delivered(int rc) {
  std::cout.flush();
  if (!std::cout) mark_stdout_lost(errno ? errno : EIO);
  if (std::fflush(stdout) != 0) mark_stdout_lost(errno ? errno : EIO);
  const int err = stdout_lost();
  // A FAIL (1) nobody received is a lost answer too: the caller would look for its details in vain.
  if ((rc != 0 && rc != 1) || err == 0) return rc;
  static const std::set<std::string> kWritesFiles = {"probe", "train", "fleet",  "report", "diverge",
                                                     "export", "import", "analyze", "baseline"};
  const std::string& cmd = active_command();
  if (active_format() == Format::kText && kWritesFiles.count(cmd)) return rc;  // (md and json are answers)
  say(stderr, "detaudit: error: the output could not be written to stdout ({}): nobody received the answer{}\n",
      std::strerror(err), cmd.empty() ? "" : " of " + cmd);
  return 2;
}

int main(int argc, char** argv) {
  // Descriptors 0-2 exist before anything is opened: with stderr closed (2>&-) the first file opened would
  // take descriptor 2 and receive the progress lines (a directory's lock did).
  bool stdout_closed = false;
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      stdout_closed = stdout_closed || fd == 1;
      const int n = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (n >= 0 && n != fd) {
        ::dup2(n, fd);
        ::close(n);
      }
    }
  // Workers as the CLI: past a file-size limit a write fails with EFBIG (an oracle cache entry is then not
  // kept), instead of the worker dying by SIGXFSZ with a temporary file left behind.
  ::signal(SIGXFSZ, SIG_IGN);
  // The workers speak their protocol on a private copy of stdout; anything a library prints goes to stderr.
  if (argc >= 2 && std::string(argv[1]) == kWorkerSubcommand) {
    int proto = ::dup(1);
    ::dup2(2, 1);
    return worker_main(0, proto);
  }
  if (argc >= 2 && std::string(argv[1]) == kTrainWorkerSubcommand) {
    int proto = ::dup(1);
    ::dup2(2, 1);
    return train_worker_main(0, proto);
  }
  install_interrupt_handlers();
  if (stdout_closed) mark_stdout_lost(EBADF);  // what goes to stdout now goes nowhere
  try {
    const int rc = delivered(main_cli(argc, argv));
    // A signal that arrived while a short command finished its work: the work is complete, and the exit
    // code still says the command was interrupted, as every command's does.
    if (interrupted() && rc < 128) {
      if (rc <= 1)
        say(stderr, "detaudit: interrupted by {} as the command finished: its output is complete\n",
            signal_description(interrupted()));
      return 128 + interrupted();
    }
    return rc;
  } catch (const std::exception& e) {
    // Nothing below the CLI should throw; if something does, it is still one line and exit 2.
    return fail(std::string("internal error: ") + e.what());
  }
}
