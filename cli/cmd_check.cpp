// `detaudit check DIR --baseline FILE [--format text|md|json]`: a results directory against a baseline
// (gates/check.hpp says what is compared how). Exit 0 all pass (warnings allowed), 1 any failure, 2 could
// not run.
#include <memory>

#include "cli/common.hpp"
#include "cli/history_flags.hpp"
#include "cli/output.hpp"
#include "gates/check.hpp"
#include "store/baseline_file.hpp"
#include "report/check_report.hpp"

namespace detaudit::cli {
namespace {

struct CheckArgs {
  std::string dir, baseline;
  double margin = kDefaultMargin;
  bool allow_unjudged = false;
  HistoryFlags hist;
  OutputFlags output;
};

Command add_check_command(CLI::App& app, int argc, char** argv) {
  auto* check = app.add_subcommand("check", "Check a results directory against a baseline (`detaudit baseline save`).");
  auto args = std::make_shared<CheckArgs>();
  check->add_option("DIR", args->dir, "Results directory holding results.json")->required()->check(kNonEmpty);
  check->add_option("--baseline", args->baseline, "Baseline file")->required()->check(kNonEmpty);
  check
      ->add_option("--margin", args->margin,
                   "Training cells on another machine key: the largest difference of mean final loss still called "
                   "equivalent, relative to the baseline's mean")
      ->check(kFinite & CLI::Range(1e-9, 10.0))
      ->capture_default_str();
  check->add_flag("--allow-unjudged", args->allow_unjudged,
                  "A training cell of the baseline that could not be judged (its design's smallest p-value is above "
                  "its level, no seed on both sides, no run finished, not run) does not make the check exit 2; "
                  "the verdict line still counts it");
  add_history_flags(check, &args->hist);
  add_output_flags(check, &args->output, true);
  check->footer(
      "\nWhere an entry's machine key matches (CPU model and ISA or GPU, library versions, tool version), bitwise:\n"
      "a deterministic cell whose fingerprint changed FAILs, unless another algorithm ran (cuDNN's automatic choice:\n"
      "a warning) or the target promises nothing run to run (a warning). Where it differs, the cell's verdict must "
      "hold\n"
      "and its error ratio stay within max(baseline's, the promise's budget) (FFT/Winograd: not judged).\n"
      "Training cells, on the same key: nondeterminism off ((b), (d), (e)) bit for bit per seed and replicate;\n"
      "nondeterminism on ((a), (c)) by an exact permutation test of the mean shift within seeds, Holm at 0.05 over\n"
      "the cells judged. A cell is judged when its design's smallest attainable p-value is at most its level;\n"
      "otherwise it is NOT JUDGED, with the seeds or runs that would make it judgeable, and the check exits 2\n"
      "(--allow-unjudged: 0). Each finding says the shift it detects with power 0.8. On another key: the\n"
      "per-seed differences of mean final loss against ±margin (an equivalence test: inside PASS, outside FAIL,\n"
      "across a bound WARN). A crashed or diverged run fails on its own.\n"
      "Exit codes: 0 nothing failed (warnings allowed) and every training cell judged, 1 a failure (each listed),\n"
      "2 could not judge: a training cell not judged (without --allow-unjudged), or could not run (a missing,\n"
      "truncated or wrong-schema baseline or results file; a baseline of another kind of run: probe against\n"
      "training, another model, design or suite; nothing compared: no cell in both).");
  const std::string command = command_line(argc, argv);
  return {check,
          [args, command]() {
            CheckOptions opt;
            opt.dir = args->dir;
            opt.baseline = args->baseline;
            opt.margin = args->margin;
            opt.allow_unjudged = args->allow_unjudged;
            if (int rc = precheck_history(args->hist)) return rc;
            CheckReport report;
            Results checked;
            Baseline baseline;
            if (Status st = load_baseline(opt.baseline, &baseline); !st) return fail(st);
            if (Status st = run_check(opt, baseline, &report, &checked); !st) return fail(st);
            Outcome o;
            o.exit_code = exit_code_of(report.decision());
            if (o.exit_code == 2)
              o.error = fmt::format("{} training cell(s) of the baseline not judged ({}{}); --allow-unjudged lets "
                                    "the check pass without them",
                                    report.training_not_judged.size(), report.training_not_judged.front(),
                                    report.training_not_judged.size() > 1 ? "; ..." : "");
            o.counts = {report.count(Verdict::kPass), report.count(Verdict::kFail), 0, report.count(Verdict::kWarn),
                        report.count(Verdict::kSkip)};
            for (auto& f : report.findings)
              if (f.verdict == Verdict::kFail && o.first_fail.empty())
                o.first_fail = fmt::format("{} on {}: {}", f.workload, f.target, f.message);
            o.text = render_check(report, OutputFormat::kText);
            o.markdown = render_check(report, OutputFormat::kMarkdown);
            o.data = {{"check", to_json(report)}};
            // The history row is the check's: its own command line, with the results it checked.
            checked.command = command;
            record_history(args->hist, RunKind::kCheck, checked, opt.dir, &o);
            return emit(o);
          },
          &args->output, true};
}

const CommandRegistration reg(20, add_check_command);

}  // namespace
}  // namespace detaudit::cli
