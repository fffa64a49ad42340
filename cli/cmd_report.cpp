// `detaudit report DIR`: a results directory's reports written again, judged by this detaudit.
#include <filesystem>
#include <memory>

#include "cli/common.hpp"
#include "cli/output.hpp"
#include "contract/results.hpp"
#include "gates/verdict.hpp"
#include "probes/results_file.hpp"
#include "report/train_report.hpp"
#include "suites/results_dir.hpp"
#include "suites/train_design.hpp"

namespace detaudit::cli {
namespace {

struct ReportArgs {
  std::string dir, write = "both";
  OutputFlags output;
};

int run_report(const ReportArgs& a) {
  const std::string& dir = a.dir;
  Results r;
  if (!std::filesystem::is_directory(dir)) return fail(fmt::format("{}: not a directory", dir));
  // A qualify's or a fleet's folder holds its runs' results below it: say where, instead of "no results.json".
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(results_file(dir), ec)))
    for (const auto& [file, below] : {std::pair{"qualify.json", "its probe results are in {0}/probe (and its training "
                                                                "results, at level 2 or 3, in {0}/train): report those"},
                                      std::pair{"fleet.json", "a fleet's report is made by `detaudit fleet report {0}`"}})
      if (std::filesystem::exists(std::filesystem::path(dir) / file, ec))
        return fail(fmt::format("{}: no results.json, but a {}: {}", dir, file, fmt::format(fmt::runtime(below), dir)));
  if (Status st = load_stored_results(results_file(dir), &r); !st) return fail(st);
  ResultsDir held(dir);  // read above; the lock keeps a run from writing while the reports are made
  if (Status st = held.lock(); !st) return fail(st);
  // Judged for the report by this detaudit (a verdict the file stores is not evidence; results written
  // before verdicts existed, or by a run in progress, have none); the results file is left as it is.
  judge(&r);
  reanalyze_training(&r);
  const bool md = a.write == "md" || a.write == "both", html = a.write == "html" || a.write == "both";
  if (Status st = write_reports(dir, r, md, html); !st) return fail(st);
  Outcome o;
  if (md) o.report_md = dir + "/report.md", o.text += o.report_md + "\n";
  if (html) o.report_html = dir + "/report.html", o.text += o.report_html + "\n";
  o.data = {{"dir", dir}};
  return emit(o);
}

Command add_report_command(CLI::App& app, int, char**) {
  auto* report = app.add_subcommand("report", "Render a results directory's report again.");
  auto a = std::make_shared<ReportArgs>();
  report->add_option("DIR", a->dir, "Results directory holding results.json")->required()->check(kNonEmpty);
  report->add_option("--write", a->write, "Which reports to write: md (report.md), html (report.html) or both")
      ->check(CLI::IsMember({"md", "html", "both"}))
      ->capture_default_str();
  add_output_flags(report, &a->output, false);
  report->footer(
      "\nreport renders; it does not gate: it exits 0 when the reports are written, whatever the verdicts they show\n"
      "(its JSON's counts say them), and 2 when DIR's results cannot be read or a report cannot be written. The\n"
      "gates are probe's own exit code, check against a baseline, and compare.");
  return {report, [a] { return run_report(*a); }, &a->output, false, true};
}

const CommandRegistration reg(4, add_report_command);

}  // namespace
}  // namespace detaudit::cli
