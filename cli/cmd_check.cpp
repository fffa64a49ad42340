// `detaudit check DIR --baseline FILE [--format text|md|json]`: a results directory against a baseline
// (gates/check.hpp says what is compared how). Exit 0 all pass (warnings allowed), 1 any failure, 2 could
// not run.
#include <memory>

#include "cli/common.hpp"
#include "cli/history_flags.hpp"
#include "gates/check.hpp"
#include "report/check_report.hpp"

namespace detaudit::cli {
namespace {

struct CheckArgs {
  std::string dir, baseline, format = "text";
  HistoryFlags hist;
};

Command add_check_command(CLI::App& app, int argc, char** argv) {
  auto* check = app.add_subcommand("check", "Check a results directory against a baseline (`detaudit baseline save`).");
  auto args = std::make_shared<CheckArgs>();
  check->add_option("DIR", args->dir, "Results directory holding results.json")->required()->check(kNonEmpty);
  check->add_option("--baseline", args->baseline, "Baseline file")->required()->check(kNonEmpty);
  check->add_option("--format", args->format, "text (terminal), md (a PR comment, under 60,000 characters) or json")
      ->check(CLI::IsMember({"text", "md", "json"}))
      ->capture_default_str();
  add_history_flags(check, &args->hist);
  check->footer(
      "\nWhere an entry's machine key matches (CPU model and ISA or GPU, library versions, tool version), bitwise:\n"
      "a deterministic cell whose fingerprint changed FAILs, unless another algorithm ran (cuDNN's automatic choice:\n"
      "a warning) or the target promises nothing run to run (a warning). Where it differs, the cell's verdict must hold\n"
      "and its error ratio stay within max(baseline's, the promise's budget) (FFT/Winograd: not judged). Per training\n"
      "cell, the mean final loss of its m runs must fall in the prediction interval for the mean of m new runs,\n"
      "mean ± t(n-1, 1-α/2)·sd·sqrt(1/m + 1/n) of the baseline's n runs, α = 0.05 / cells judged (bitwise for\n"
      "condition d on the same key); a crashed or diverged run fails on its own.\n"
      "Exit codes: 0 nothing failed (warnings allowed), 1 a failure (each listed), 2 could not run (a missing,\n"
      "truncated or wrong-schema baseline or results file).");
  return {check, [args]() {
            CheckOptions opt;
            opt.dir = args->dir;
            opt.baseline = args->baseline;
            OutputFormat format = OutputFormat::kText;
            if (!parse_output_format(args->format, &format)) return fail("--format must be text, md or json");
            if (int rc = precheck_history(args->hist)) return rc;
            CheckReport report;
            Results checked;
            if (Status st = run_check(opt, &report, &checked); !st) return fail(st);
            put(stdout, render_check(report, format));
            return record_history(args->hist, "check", checked, opt.dir, report.exit_code());
          }};
}

const CommandRegistration reg(20, add_check_command);

}  // namespace
}  // namespace detaudit::cli
