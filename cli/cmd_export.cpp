// `detaudit export WORKLOAD... --out DIR` (or --suite quick|full): each workload's inputs and its oracle's
// output as .npy files and DIR/manifest.json, the contract a framework runs the same ops from
// (suites/external.hpp; scripts/torch-probe.py for PyTorch; README "Bring your own framework").
#include <memory>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/output.hpp"
#include "probes/spec.hpp"
#include "suites/external.hpp"
#include "suites/probe_suite.hpp"

namespace detaudit::cli {
namespace {

struct ExportArgs {
  std::vector<std::string> workloads;
  std::string suite, out;
  OutputFlags output;
};

int run_export(const ExportArgs& a) {
  if (a.workloads.empty() == a.suite.empty()) return fail("name the workloads or --suite (one of the two)");
  std::vector<Spec> specs;
  if (!a.suite.empty()) {
    ProbePlan plan;
    if (Status st = make_plan(a.suite, "", "", 0, 120, &plan); !st) return fail(st);
    specs = plan.workloads;
  }
  for (auto& list : a.workloads) {
    StatusOr<std::vector<std::string>> items = split_list(list);
    if (!items) return fail(items.status());
    for (auto& text : *items) {
      Spec s;
      if (Status st = parse_workload(text, &s); !st) return fail(st);
      specs.push_back(s);
    }
  }
  if (specs.empty()) return fail("no workloads to export");
  if (Status st = out_outside_fleet_ranks(a.out); !st) return fail(st);
  if (Status st = export_workloads(specs, a.out, progress_sink()); !st) return fail_or_interrupted(st);
  Outcome o;
  o.text = fmt::format("{} workloads exported: {}/{}\n", specs.size(), a.out, kManifestFile);
  nlohmann::json names = nlohmann::json::array();
  for (auto& w : specs) names.push_back(w.str());
  o.data = {{"out", a.out}, {"manifest", a.out + "/" + kManifestFile}, {"workloads", names}};
  return emit(o);
}

Command add_export_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "export", "Write workloads' inputs, oracle outputs and a manifest, for running them in another framework.");
  auto args = std::make_shared<ExportArgs>();
  sub->add_option("WORKLOAD", args->workloads, "Workload specs (as probe --workloads takes them; quote '&')")
      ->check(kNonEmpty);
  sub->add_option("--suite", args->suite, "Export the workloads of a suite instead: quick or full")
      ->check(CLI::IsMember(suite_names()));
  sub->add_option("--out", args->out, "Directory for the .npy files and manifest.json")->required()->check(kNonEmpty);
  sub->footer(
      "\nPer workload <id> (its spec as a file name): <id>.<input>.npy for each input (the exact bytes every target\n"
      "sees), <id>.oracle.npy (cpu-ref's output), and DIR/manifest.json: per workload its spec, what it computes in\n"
      "words and as a NumPy or PyTorch call, each array's file, role, shape and dtype, the layout conventions\n"
      "(row-major matrices, NCHW activations, KCRS filters, the pass of a conv2d), and the file names a framework\n"
      "writes its outputs to (<id>.out.<r>.npy, r = 0, 1, ...). Files are NumPy format 1.0, '<f4' or '<f8', C order.\n"
      "Then run the workloads (scripts/torch-probe.py DIR for PyTorch) and `detaudit import DIR --name NAME`.\n"
      "Exit codes: 0 exported, 2 could not (a bad spec, DIR not writable).");
  add_output_flags(sub, &args->output, false);
  return {sub, [args] { return run_export(*args); }, &args->output, false, true};
}

static const CommandRegistration reg(60, add_export_command);

}  // namespace
}  // namespace detaudit::cli
