// `detaudit import DIR --name NAME [--out RESULTS]`: a framework's outputs of an exported DIR as
// observations of external?name=NAME (suites/external.hpp), judged and reported with the rest of RESULTS.
#include <memory>
#include <string>

#include "cli/common.hpp"
#include "contract/results.hpp"
#include "cli/output.hpp"
#include "gates/verdict.hpp"
#include "report/probe_report.hpp"
#include "report/train_report.hpp"
#include "suites/results_dir.hpp"
#include "suites/external.hpp"

namespace detaudit::cli {
namespace {

struct ImportArgs {
  std::string dir, name, out;
  OutputFlags output;
};

int run_import(const ImportArgs& a, int argc, char** argv) {
  const std::string out = a.out.empty() ? a.dir : a.out;
  if (Status st = out_outside_fleet_ranks(out); !st) return fail(st);
  std::vector<Observation> obs;
  if (Status st = not_a_fleet_directory(out); !st) return fail(st);
  // Everything is read and checked first: a bad file leaves RESULTS as it was.
  if (Status st = read_external_outputs(a.dir, a.name, &obs, progress_sink()); !st) return fail_or_interrupted(st);
  ResultsDir dir(out);
  if (Status st = dir.lock(); !st) return fail(st);
  Results r;
  if (Status st = merge_external(out, obs, command_line(argc, argv), &r); !st) return fail(st);
  judge(&r);
  if (Status st = dir.save(r); !st) return fail(st);
  if (Status st = write_reports(out, r); !st) return fail(st);
  int repeats = 0;
  for (auto& o : obs) repeats += o.repeats;
  Outcome o;
  o.text = fmt::format("imported {} workloads ({} outputs) as {} into {}/results.json\n", obs.size(), repeats,
                       obs[0].target, out);
  nlohmann::json matches = nlohmann::json::array();
  for (const std::string& line : external_match_lines(r.observations))
    if (line.rfind(obs[0].target + " ", 0) == 0) {
      o.text += line + "\n";
      matches.push_back(line);
    }
  o.report_md = out + "/report.md";
  o.report_html = out + "/report.html";
  o.text += fmt::format("report: {} and {}\n", o.report_md, o.report_html);
  o.data = {
      {"out", out}, {"target", obs[0].target}, {"workloads", obs.size()}, {"outputs", repeats}, {"matches", matches}};
  return emit(o);
}

Command add_import_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand("import", "Record a framework's outputs of an exported directory as a target's observations.");
  auto args = std::make_shared<ImportArgs>();
  sub->add_option("DIR", args->dir, "Directory written by `detaudit export`, holding the framework's outputs")
      ->required()
      ->check(kNonEmpty);
  sub->add_option("--name", args->name, "The framework's name: the target becomes external?name=NAME (letters, digits, "
                                        "'_', '-', '.'; e.g. torch-1.13-cpu)")
      ->required()
      ->check(kNonEmpty);
  sub->add_option("--out", args->out, "Results directory to add them to (default DIR); one holding a probe run of "
                                      "the same workloads puts the framework beside its targets")
      ->check(kNonEmpty);
  sub->footer(
      "\nReads DIR/manifest.json and, per workload, the outputs it names (<id>.out.0.npy, <id>.out.1.npy, ... up to\n"
      "the first missing file; batchinv also <id>.rows.npy when present) and the optional DIR/producer.json. Each\n"
      "output must have the manifest's dtype ('<f4' or '<f8', little-endian) and shape, in C order. It is\n"
      "fingerprinted as a target's output is, compared with the oracle (RESULTS/.oracle when a probe run left it\n"
      "there, else computed here), and recorded in RESULTS/results.json (earlier observations of the same target\n"
      "and workload are replaced), judged, with the reports written again. The report says which target the\n"
      "framework matches bit for bit. Exit codes: 0 imported, 2 could not (a missing, truncated or malformed file,\n"
      "a wrong dtype, byte order or shape, a manifest of another detaudit version; nothing is written).");
  add_output_flags(sub, &args->output, false);
  return {sub, [args, argc, argv] { return run_import(*args, argc, argv); }, &args->output, false, true};
}

static const CommandRegistration reg(61, add_import_command);

}  // namespace
}  // namespace detaudit::cli
