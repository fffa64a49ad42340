// detaudit compare DIR_A DIR_B: two results directories side by side.
#include <filesystem>
#include <memory>

#include "cli/common.hpp"
#include "cli/output.hpp"
#include "contract/plan.hpp"
#include "contract/results.hpp"
#include "gates/compare.hpp"
#include "probes/results_file.hpp"
#include "report/compare_report.hpp"
#include "suites/train_design.hpp"

namespace detaudit::cli {
namespace {

struct CompareArgs {
  std::string a, b;
  bool all = false;
  OutputFlags output;
};

// DIR/results.json, or the file itself when a results file is named (a missing DIR is named with
// the file it should hold).
std::string results_path(const std::string& arg) {
  return std::filesystem::is_regular_file(arg) ? arg : results_file(arg);
}

int run_compare(const CompareArgs& args) {
  Results a, b;
  // One file named twice (the same directory, its results.json, a link to it): a run against itself compares
  // nothing.
  if (std::error_code ec; std::filesystem::equivalent(results_path(args.a), results_path(args.b), ec) && !ec)
    return fail(fmt::format("{} and {} are one results file: a run compared with itself compares nothing", args.a,
                            args.b));
  if (Status st = load_stored_results(results_path(args.a), &a); !st) return fail(st);
  if (Status st = load_stored_results(results_path(args.b), &b); !st) return fail(st);
  for (const auto& [r, name] : {std::pair<const Results&, const std::string&>{a, args.a}, {b, args.b}})
    if (Status st = not_a_merged_analysis(r, name, "compare"); !st) return fail(st);
  // A copy of a run is the run: its "same bits" would be a file compared with itself.
  if (Status st = not_one_run(a, args.a, b, args.b, true); !st) return fail(st);
  // Two probe runs compare whatever their suites (the cells they share); training runs only within one
  // design, since the runs of another are other cells.
  if (std::string d = plan_difference(a.plan, b.plan, false); !d.empty())
    return fail(fmt::format("{} and {} cannot be compared: {}", args.a, args.b, d));
  if (a.observations.empty() && b.observations.empty() && a.training.empty() && b.training.empty())
    return fail(fmt::format("{} and {} hold no cell and no training run: nothing to compare", args.a, args.b));
  Comparison c = compare_results(a, b, args.a, args.b);
  Outcome o;
  o.exit_code = c.cells_differ() ? 1 : 0;
  // Nothing that ran on both sides: no output was compared, which is "could not judge" (as check says), not
  // a change, and not "same bits" either (two skips have no bits).
  int both = 0, common = 0;
  for (auto& x : c.cells) {
    if (x.kind == CellComparison::Kind::kOnlyA || x.kind == CellComparison::Kind::kOnlyB) continue;
    ++common;
    both += x.status_a == "ok" && x.status_b == "ok";
  }
  for (auto& t : c.training) {
    if (t.kind == CellComparison::Kind::kOnlyA || t.kind == CellComparison::Kind::kOnlyB) continue;
    ++common;
    both += t.finished_a > 0 && t.finished_b > 0;
  }
  if (both == 0) {
    o.exit_code = 2;
    o.error = common == 0 ? fmt::format("{} and {} have no cell and no training run in common ({} only in {}, {} only "
                                        "in {}): nothing was compared",
                                        args.a, args.b, c.only_a + c.training_only_a, args.a,
                                        c.only_b + c.training_only_b, args.b)
                          : fmt::format("{} and {} share {} cells, but none ran on both sides (skipped, crashed or "
                                        "not finished): no output was compared",
                                        args.a, args.b, common);
  }
  o.counts.pass = c.same + c.training_same;
  o.counts.fail = c.changed + c.only_a + c.only_b + c.training_changed + c.training_only_a + c.training_only_b;
  o.counts.expected = c.varies + c.training_varies;
  for (auto& x : c.cells)
    if (o.first_fail.empty() && (x.kind == CellComparison::Kind::kChanged || x.kind == CellComparison::Kind::kOnlyA ||
                                 x.kind == CellComparison::Kind::kOnlyB))
      o.first_fail = fmt::format("{} on {}: {}", x.workload, x.target, to_string(x.kind));
  for (auto& t : c.training)
    if (o.first_fail.empty() && t.kind != CellComparison::Kind::kSame && t.kind != CellComparison::Kind::kVaries)
      o.first_fail = fmt::format("({}) {}: {}{}", t.condition, t.target, to_string(t.kind),
                                 t.first_difference.empty() ? "" : ": " + t.first_difference);
  o.text = render_comparison(c, OutputFormat::kText, args.all);
  o.markdown = render_comparison(c, OutputFormat::kMarkdown);
  o.data = {{"comparison", to_json(c)}};
  return emit(o);
}

Command add_compare_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "compare",
      "Compare two results directories (two machines, drivers or library versions) cell by cell.");
  auto args = std::make_shared<CompareArgs>();
  sub->add_option("DIR_A", args->a, "First results directory (or its results.json)")->required()->check(kNonEmpty);
  sub->add_option("DIR_B", args->b, "Second results directory (or its results.json)")->required()->check(kNonEmpty);
  sub->add_flag("--all", args->all, "Text: list every cell and the bit-identical groups, not only what differs");
  add_output_flags(sub, &args->output, true);
  sub->footer(
      "\nPer workload x target cell: `same bits` (the same status and the same set of output fingerprints),\n"
      "`bits changed` (old and new fingerprints and distinct counts), `only in A`, `only in B`, `varies` (a\n"
      "nondeterministic cell: other outputs are what it does, not a difference). Training runs of one design, per\n"
      "condition and target: a condition with nondeterminism off (b, d, e) bit for bit run by run (final weights\n"
      "and final loss of the same seed and replicate); one with nondeterminism on (a, c) by the spread of its\n"
      "final losses (varies). Then the machine and software fields that differ (CPU, features, cores, OS,\n"
      "compiler, libraries, GPUs, CUDA, tool version and commit); with --all every cell and, per workload, the\n"
      "targets of both runs grouped by identical bits (target@A, target@B).\n"
      "Exit codes: 0 every cell has the same bits, 1 some cell changed or ran on one side only, 2 could not run\n"
      "(a missing, truncated or malformed results.json, named in one line; a probe run against a training run,\n"
      "or training runs of two designs, naming the first field that differs; no cell in common).");
  return {sub, [args] { return run_compare(*args); }, &args->output, true};
}

static const CommandRegistration reg(30, add_compare_command);

}  // namespace
}  // namespace detaudit::cli
