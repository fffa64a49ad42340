// detaudit compare DIR_A DIR_B: two results directories side by side.
#include <filesystem>
#include <memory>

#include "cli/common.hpp"
#include "gates/compare.hpp"
#include "report/compare_report.hpp"
#include "contract/results.hpp"

namespace detaudit::cli {
namespace {

struct CompareArgs {
  std::string a, b, format = "text";
};

// DIR/results.json, or the file itself when a results file is named (a missing DIR is named with
// the file it should hold).
std::string results_path(const std::string& arg) {
  return std::filesystem::is_regular_file(arg) ? arg : arg + "/results.json";
}

int run_compare(const CompareArgs& args) {
  Results a, b;
  if (Status st = load_results(results_path(args.a), &a); !st) return fail(st);
  if (Status st = load_results(results_path(args.b), &b); !st) return fail(st);
  Comparison c = compare_results(a, b, args.a, args.b);
  OutputFormat f = OutputFormat::kText;
  if (!parse_output_format(args.format, &f)) return fail("--format must be text, md or json");
  put(stdout, render_comparison(c, f));
  return c.cells_differ() ? 1 : 0;
}

Command add_compare_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "compare",
      "Compare two results directories (two machines, drivers or library versions) cell by cell.");
  auto args = std::make_shared<CompareArgs>();
  sub->add_option("DIR_A", args->a, "First results directory (or its results.json)")->required()->check(kNonEmpty);
  sub->add_option("DIR_B", args->b, "Second results directory (or its results.json)")->required()->check(kNonEmpty);
  sub->add_option("--format", args->format, "text (terminal), md (a PR comment, under 60,000 characters) or json")
      ->check(CLI::IsMember({"text", "md", "json"}))
      ->capture_default_str();
  sub->footer(
      "\nPer workload x target cell: `same bits` (the same status and the same set of output fingerprints),\n"
      "`changed` (old and new fingerprints and distinct counts), `only in A`, `only in B`. Then the machine and\n"
      "software fields that differ (CPU, features, cores, OS, compiler, libraries, GPUs, CUDA, tool version and\n"
      "commit) and, per workload, the targets of both runs grouped by identical bits (target@A, target@B).\n"
      "Exit codes: 0 every cell has the same bits, 1 some cell changed or ran on one side only, 2 could not run\n"
      "(a missing, truncated or malformed results.json, named in one line).");
  return {sub, [args] { return run_compare(*args); }};
}

static const CommandRegistration reg(30, add_compare_command);

}  // namespace
}  // namespace detaudit::cli
