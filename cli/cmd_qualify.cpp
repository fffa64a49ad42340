// `detaudit qualify`: the machine qualification (gates/qualify.hpp).
#include <chrono>
#include <csignal>
#include <filesystem>

#include "cli/common.hpp"
#include "contract/atomic_file.hpp"
#include "cli/history_flags.hpp"
#include "cli/output.hpp"
#include "report/prometheus.hpp"
#include "gates/qualify.hpp"
#include "store/baseline_file.hpp"
#include "probes/child.hpp"
#include "probes/env.hpp"
#include "report/train_report.hpp"

namespace detaudit::cli {

namespace {

struct QualifyArgs {
  int level = 1;
  std::string baseline, targets, out, metrics;
  bool list = false;
  HistoryFlags hist;
  OutputFlags output;
};

// `qualify --list [--level N] [--targets ...]`: what the level runs, and nothing run.
int list_plan(const QualifyArgs& a) {
  set_active_command("qualify", &a.output, false, false);
  QualifyPlan p;
  if (Status st = qualify_plan(a.level, a.targets, &p); !st) return fail(st);
  // A plan the run would refuse is refused here too: the list says what would run, and it would not.
  Baseline baseline;
  if (!a.baseline.empty())
    if (Status st = load_baseline(a.baseline, &baseline); !st) return fail(st);
  if (Status st = check_qualify_can_run(p, a.targets, a.baseline.empty() ? nullptr : &baseline, a.baseline); !st)
    return fail(st);
  Outcome o;
  for (auto& line : p.lines()) o.text += line + "\n";
  o.data = {{"level", a.level}, {"lines", p.lines()}, {"probe", p.probe.to_json()}};
  if (p.train) o.data["training"] = p.design.to_json();
  return emit(o);
}

Command add_qualify_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "qualify",
      "Qualify this machine: probes judged against each target's promise (level 1), plus a short training "
      "regression and timing outliers (level 2), or the full suite and a longer design (level 3).");
  auto a = std::make_shared<QualifyArgs>();
  sub->add_option("--level", a->level,
                  "1: the quick probes (under 2 min on 2 cores); 2: adds a short sony2021 training regression "
                  "(condition (d) bitwise identical, the model learns) and timing outliers (3x slower than the "
                  "baseline or history median WARNs, 10x FAILs); 3: the full suite and the default design")
      ->check(CLI::Range(1, 3))
      ->capture_default_str();
  sub->add_option("--baseline", a->baseline, "Also check the probe results against this baseline (detaudit baseline save)")
      ->check(kNonEmpty);
  sub->add_option("--targets", a->targets,
                  "Comma-separated targets to qualify instead of the suite's; each is required (a GPU target on a "
                  "machine without a CUDA device exits 2)")
      ->check(kNonEmpty);
  sub->add_option("--out", a->out, "Results directory (default results/qualify-<time>): probe/, train/, qualify.json")
      ->check(kNonEmpty);
  sub->add_option("--metrics", a->metrics,
                  "Also write the qualification in Prometheus's text format to FILE (atomically; node_exporter's "
                  "textfile collector): detaudit_health_status, one detaudit_finding per check that did not pass")
      ->check(kNonEmpty);
  add_history_flags(sub, &a->hist);
  add_output_flags(sub, &a->output, true);
  sub->add_flag("--list", a->list,
                "Say what the level runs (suite, targets, workloads, training design, checks) and "
                "run nothing");
  sub->footer(
      "\nExit codes: 0 qualified (nothing failed, nothing required skipped), 1 a check failed, 2 could not run "
      "(bad input, a required target or check that cannot run here, and nothing failed), 128+N interrupted by "
      "signal N (run again with the same --out to resume).");
  std::string exe = argv[0], command = command_line(argc, argv);
  const std::vector<std::string> args(argv, argv + argc);
  return {sub,
          [a, exe, command, args]() {
            if (a->list) return list_plan(*a);
            QualifyOptions o;
            o.level = a->level;
            o.baseline = a->baseline;
            if (!a->baseline.empty())
              if (Status st = load_baseline(a->baseline, &o.baseline_loaded.emplace()); !st) return fail(st);
            o.targets = a->targets;
            o.out_dir = a->out.empty() ? default_out("qualify") : a->out;
            if (Status st = out_outside_fleet_ranks(o.out_dir); !st) return fail(st);
            o.exe = self_exe(exe.c_str());
            o.command = command;
            o.progress = progress_sink();
            QualifyOutcome out;
            // The history gives the timing references when no baseline does; it is read before this
            // run is recorded into it.
            std::string history;
            if (Status st = resolve_history_path(a->hist, &history); !st) return fail(st);
            if (!history.empty())
              o.timing_history = [history](const std::string& workload, const std::string& target,
                                           const std::string& key, const std::string& own_dir,
                                           const std::string& own_started_at, double* median, int* runs) {
                return median_seconds_history(history, workload, target, key, median, runs, own_dir, own_started_at);
              };
            if (int rc = precheck_history(a->hist)) return rc;
            // A metrics file it could never write is refused before the qualification runs.
            if (!a->metrics.empty())
              if (Status st = check_destination(a->metrics, Own::kMetrics); !st) return fail("--metrics " + st.message());
            const auto t0 = std::chrono::steady_clock::now();
            if (Status st = run_qualify(o, &out); !st) {
              // Interrupted (SIGINT/SIGTERM/SIGHUP): the finished work is saved; 128+N as every command.
              if (st.code() == Status::Code::kInterrupted) {
                // Run again with the same --out, qualify keeps every finished check and run.
                say(stderr, "{}; finished checks are kept; resume with: {}\n", st.message(),
                    resume_command(args, o.out_dir));
                return 128 + (interrupted() ? interrupted() : SIGINT);
              }
              return fail(st);
            }
            // The reports of the runs qualify made (gates judge, the report renders).
            if (!out.probe_dir.empty())
              if (Status st = write_reports(out.probe_dir, out.probe); !st) return fail(st);
            if (!out.train.training.empty())
              if (Status st = write_reports(out.train_dir, out.train); !st) return fail(st);
            Outcome res;
            res.exit_code = exit_code_of(decision_of(out.decision));
            for (auto& c : out.checks) {
              switch (c.verdict) {
                case Verdict::kPass:
                  ++res.counts.pass;
                  break;
                case Verdict::kFail:
                  ++res.counts.fail;
                  break;
                case Verdict::kExpected:
                  ++res.counts.expected;
                  break;
                case Verdict::kWarn:
                  ++res.counts.warn;
                  break;
                case Verdict::kSkip:
                  ++res.counts.skip;
                  break;
              }
              if (c.verdict == Verdict::kFail && res.first_fail.empty()) res.first_fail = c.name + ": " + c.detail;
              if (res.exit_code == 2 && c.required && c.verdict == Verdict::kSkip && res.error.empty())
                res.error = "a required check could not run: " + c.name + ": " + c.detail;
            }
            if (!out.probe_dir.empty()) {
              res.report_md = out.probe_dir + "/report.md";
              res.report_html = out.probe_dir + "/report.html";
            }
            res.text = fmt::format("{}results: {}\n", out.table(), o.out_dir);
            res.data = {{"out", o.out_dir}, {"qualify", out.to_json()}};
            if (!a->metrics.empty()) {
              // Every check that did not pass, with what it asks; the cells its probes judged.
              std::vector<MetricFinding> fs;
              for (auto& c : out.checks)
                if (const auto act = qualify_action(c)) fs.push_back({{}, to_string(*act), "check", c.name});
              const std::string host = machine_fingerprint().value("hostname", std::string("unknown"));
              PromText p;
              add_node_metrics(&p, "qualify", {{"host", host}}, res.exit_code, out.probe.observations.size(), fs);
              add_run_metrics(&p, "qualify", host,
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
              if (Status st = write_metrics(a->metrics, p); !st) return fail("--metrics " + st.message());
            }
            record_history(a->hist, RunKind::kQualify, out.probe, out.probe_dir, &res);
            // Its training regression too (levels 2 and 3), so `history` shows those cells beside the probes.
            if (!out.train.training.empty()) record_history(a->hist, RunKind::kQualify, out.train, out.train_dir, &res);
            return emit(res);
          },
          &a->output, true};
}

const CommandRegistration reg(40, add_qualify_command);

}  // namespace

}  // namespace detaudit::cli
