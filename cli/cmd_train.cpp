// `detaudit train MODEL`: a training regression design (sony2021: five conditions per target) run in workers,
// each run's losses and final weights recorded as it finishes, the design's analysis and reports written at
// the end (an interrupted design resumes).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/history_flags.hpp"
#include "cli/output.hpp"
#include "contract/results.hpp"
#include "gates/verdict.hpp"
#include "probes/spec.hpp"
#include "report/train_report.hpp"
#include "suites/train_design.hpp"

namespace detaudit::cli {
namespace {

struct TrainArgs : TrainDesignArgs {
  std::string out;
  double run_timeout = 0;
  bool fresh = false;
  HistoryFlags hist;
  OutputFlags output;
};

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
  const std::vector<RunVerdict> verdicts = judge_training_runs(results.training);
  int broken = 0;
  for (size_t i = 0; i < results.training.size(); ++i) {
    const TrainingRun& r = results.training[i];
    const RunVerdict& v = verdicts[i];
    broken += broke_promise(r, v);
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
  o.text = fmt::format("{} training runs: {} finished, {} failed ({}crashed, timed out or an error), {} skipped\n",
                       results.training.size(), trained, o.counts.fail,
                       broken ? fmt::format("{} broke the deterministic variant's promise, {} ", broken,
                                            o.counts.fail - broken)
                              : "",
                       o.counts.skip);
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
  TrainDesign d;
  if (Status st = design_from_args(a, &d); !st) return fail(st);
  TrainRunOptions opt;
  opt.out_dir = a.out.empty() ? default_out("train") : a.out;
  if (Status st = out_outside_fleet_ranks(opt.out_dir); !st) return fail(st);
  opt.exe = self_exe(argv[0]);
  opt.fresh = a.fresh;
  opt.run_timeout_s = a.run_timeout;
  opt.command = command_line(argc, argv);
  opt.progress = progress_sink();
  // Run and report under one hold on the directory.
  ResultsDir dir(opt.out_dir);
  opt.results_dir = &dir;
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

Command add_train_command(CLI::App& app, int argc, char** argv) {
  auto* train = app.add_subcommand("train", "Run a training regression design and write results.json and the reports.");
  auto a = std::make_shared<TrainArgs>();
  train->add_option("MODEL", a->model,
                    "Model: autoencoder (Fashion-MNIST reconstruction) or prednet (next-frame prediction of moving "
                    "sprites; quick default: one target, 2 seeds, 60 batches of 4 sequences)")
      ->required()
      ->check(CLI::IsMember({"autoencoder", "prednet"}));
  train
      ->add_option("--design", a->design,
                   "Design: sony2021, five conditions per target: (a) random initial weights, nondeterminism on; "
                   "(b) random, off; (c) fixed initial weights, on; (d) fixed, off; (e) fixed with one weight "
                   "moved by one ULP, off")
      ->check(CLI::IsMember({"sony2021"}))
      ->capture_default_str();
  train->add_option("--targets", a->targets,
                    "Comma-separated base targets; each runs in its deterministic and nondeterministic variant "
                    "(default cpu?threads=2,cpu?threads=4 for the autoencoder, cpu?threads=2&conv=winograd for prednet: "
                    "order=atomic needs two threads to race)")
      ->check(kNonEmpty);
  train->add_option("--seeds", a->seeds, "Runs per condition and target (default 3; --paper: 12)")
      ->check(CLI::Range(1, 10000));
  train->add_option("--batches", a->batches, "Batches per run (default 200; --paper: 5000)")->check(CLI::Range(1, 10000000));
  train->add_option("--window", a->window, "Final metric = mean loss of the last N batches (default 20; --paper: 50)")
      ->check(CLI::Range(1, 10000000));
  train->add_option("--replicates", a->replicates,
                    "Repeats of each seed under condition (a), for the run-to-run term; (c) runs its one seed seeds x replicates times (default 2)")
      ->check(CLI::Range(1, 1000));
  train
      ->add_option("--run-timeout", a->run_timeout,
                   "Seconds a training run may go without finishing a batch (or a batch of PredNet's held-out "
                   "check) before its worker is killed and the run recorded as timeout (the first batch also covers "
                   "starting the worker and loading the data; default 300)")
      ->check(kFinite & CLI::Range(0.001, 604800.0));
  train->add_option("--prednet-config", a->prednet_config,
                    "prednet: quick (1x64x64 frames, stacks 1,16,32,64, 10 frames; the default), tiny (1x32x32, "
                    "stacks 1,4,8, 4 frames: a smoke test of the design in seconds) or paper (the paper's KITTI "
                    "network: 3x128x160 frames, stacks 3,48,96,192, 10 frames; sprites in three equal channels, or "
                    "--data FILE.npy of RGB [N,T,128,160,3]; about 40x quick's cost per batch: a GPU configuration)")
      ->check(CLI::IsMember({"quick", "tiny", "paper"}));
  train->add_flag("--noise-scale", a->noise_scale,
                  "Measure the gradient noise scale B_simple along training (microbatches of each measured batch) "
                  "and the hardware noise at fixed weights and batch (the gradient computed twice: sigma^2_hw, B_hw)");
  train->add_option("--noise-every", a->noise_every,
                    "With --noise-scale: measure every K-th batch (default 10); each measurement costs about one "
                    "extra batch")
      ->check(CLI::Range(1, 10000000));
  train->add_flag("--paper", a->paper, "The paper's protocol: 12 runs, 5000 batches, window 50");
  train->add_option("--data", a->data,
                    "Folder of MNIST-format IDX files (default: Fashion-MNIST from dataset-fashion-mnist; prednet cuts "
                    "its moving sprites from them), or for prednet an .npy video file, uint8 [N,T,H,W] or [N,T,H,W,C]")
      ->check(kNonEmpty);
  train->add_option("--out", a->out, "Results directory (default results/train-<time>); an unfinished design there resumes")
      ->check(kNonEmpty);
  add_history_flags(train, &a->hist);
  add_output_flags(train, &a->output, true);
  train->add_flag("--fresh", a->fresh, "Discard results already in --out instead of resuming");

  return {train, [a, argc, argv] { return run_train(*a, argc, argv); }, &a->output, true, true};
}

const CommandRegistration reg(3, add_train_command);

}  // namespace
}  // namespace detaudit::cli
