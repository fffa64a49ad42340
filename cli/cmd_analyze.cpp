// `detaudit analyze DIR... --out DIR`: one training analysis over several results directories, with the
// machine as a factor (suites/train_design.hpp, analyze_training_dirs; analysis/training.hpp).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/output.hpp"
#include "report/train_report.hpp"
#include "suites/train_design.hpp"

namespace detaudit::cli {
namespace {

struct AnalyzeArgs {
  std::vector<std::string> dirs;
  std::string out;
  OutputFlags output;
};

int run_analyze(const AnalyzeArgs& a, int argc, char** argv) {
  if (Status st = out_outside_fleet_ranks(a.out); !st) return fail(st);
  AnalyzeOptions opt;
  opt.dirs = a.dirs;
  opt.out_dir = a.out;
  opt.command = command_line(argc, argv);
  opt.progress = progress_sink();
  ResultsDir dir(opt.out_dir);  // analyse and report under one hold
  opt.results_dir = &dir;
  Results r;
  if (Status st = analyze_training_dirs(opt, &r); !st) return fail(st);
  if (Status st = write_reports(a.out, r); !st) return fail(st);
  Outcome o;
  o.text = fmt::format("{} training runs from {} results directories\n", r.training.size(), a.dirs.size());
  const auto& hw = r.analysis.value("hardware_attribution", nlohmann::json());
  if (hw.is_string()) o.text += fmt::format("hardware: {}\n", hw.get<std::string>());
  o.report_md = a.out + "/report.md";
  o.report_html = a.out + "/report.html";
  o.text += fmt::format("report: {} and {}\n", o.report_md, o.report_html);
  // Per pair of targets: what the design can say of it (finding: hardware, implementation, no_difference,
  // no_power), what differs between their implementations, the p-values and the effect.
  nlohmann::json pairs = nlohmann::json::array();
  for (auto& g : r.analysis.value("confounding", nlohmann::json::array()))
    pairs.push_back({{"targets", g.value("targets", nlohmann::json::array())},
                     {"finding", g.value("finding", "")},
                     {"differs", g.value("differs", "")},
                     {"p", g.value("p", nlohmann::json(nullptr))},
                     {"p_holm", g.value("p_holm", nlohmann::json(nullptr))},
                     {"effect", g.value("effect", nlohmann::json(nullptr))},
                     {"attributable_to", g.value("attributable_to", "")}});
  o.data = {
      {"out", a.out}, {"dirs", a.dirs}, {"runs", r.training.size()}, {"hardware_attribution", hw}, {"pairs", pairs}};
  return emit(o);
}

Command add_analyze_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "analyze", "Merge the training runs of one design from several results directories (machines) into one analysis.");
  auto args = std::make_shared<AnalyzeArgs>();
  sub->add_option("DIR", args->dirs, "Results directories of `detaudit train` (one per machine or run)")
      ->required()
      ->check(kNonEmpty);
  sub->add_option("--out", args->out, "Directory for the merged results.json, report.md and report.html")
      ->required()
      ->check(kNonEmpty);
  sub->footer(
      "\nEvery DIR must hold the same design: model, design, seeds, batches, window, replicates, batch size,\n"
      "data seed (batch order) and data (pixel fingerprint); the targets may differ. A design that differs is\n"
      "refused, naming the directories, the field and both values.\n"
      "In the merged analysis each DIR is a source and a target on a source is one level of the target factor\n"
      "(\"cpu?threads=2 @ host-a\"), so the machine is a factor. A difference between two levels is called a\n"
      "hardware effect only when their implementation is identical (target without device index, library\n"
      "versions, detaudit version and commit) and their own permutation test in (a) is significant with\n"
      "power; otherwise the report says what the implementations differ in. Deterministic variants whose\n"
      "final weights agree bit for bit in (b) and (d) are reported as \"hardware contributed exactly zero\".\n"
      "Exit codes: 0 analysed, 2 could not (an unreadable or malformed results.json, no training runs,\n"
      "designs that differ, --out among the inputs).");
  add_output_flags(sub, &args->output, false);
  return {sub, [args, argc, argv] { return run_analyze(*args, argc, argv); }, &args->output, false, true};
}

static const CommandRegistration reg(5, add_analyze_command);

}  // namespace
}  // namespace detaudit::cli
