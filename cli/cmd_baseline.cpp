// `detaudit baseline save DIR [--out FILE]`: a results directory's observations and training runs as a
// reviewable baseline file (gates/baseline.hpp), which `detaudit check` and `qualify` compare later runs with.
#include <memory>

#include "cli/common.hpp"
#include "cli/output.hpp"
#include "store/baseline_file.hpp"

namespace detaudit::cli {
namespace {

struct BaselineArgs {
  std::string dir, out;
  OutputFlags output;
};

Command add_baseline_command(CLI::App& app, int argc, char** argv) {
  auto* baseline = app.add_subcommand("baseline", "Baselines: what a run observed, for `check` to compare later runs with.");
  baseline->require_subcommand(1);
  auto* save = baseline->add_subcommand(
      "save", "Write DIR's results as a baseline: per workload x target the fingerprints, distinct count, verdict, "
              "error ratio, kernels (GPU) and median time; per training cell the final losses; and the machine key "
              "each entry holds for.");
  auto args = std::make_shared<BaselineArgs>();
  save->add_option("DIR", args->dir, "Results directory holding results.json")->required()->check(kNonEmpty);
  save->add_option("--out", args->out, "Baseline file to write (default DIR/baseline.json)")->check(kNonEmpty);
  save->footer(
      "\nThe key of an entry: for CPU targets the CPU model, its ISA (cpu_features) and the versions of the\n"
      "libraries the backend's bits depend on; for GPU targets the GPU name, compute capability and SM count and\n"
      "the libraries (driver, CUDA runtime, cuDNN, cuBLAS, ...); the tool version for all. `check` compares bit\n"
      "for bit where the key matches, and by verdict and error budget where it differs.");
  add_output_flags(save, &args->output, false);
  return {baseline,
          [save, args]() {
            if (!save->parsed()) return fail("baseline: a subcommand is required (save)");
            // (the default, DIR/baseline.json, is checked as --out is: a fleet rank's probe folder is fleet's alone)
            if (!args->out.empty()) {
              if (Status st = file_outside_fleet_ranks(args->out, "--out"); !st) return fail(st);
            } else if (Status st = out_outside_fleet_ranks(args->dir, "DIR"); !st) {
              return fail(Status::invalid(st.message() + " (without --out the baseline goes into DIR: give --out)"));
            }
            BaselineSaved saved;
            if (Status st = run_baseline_save(args->dir, args->out, &saved); !st) return fail(st);
            if (saved.unfinished)
              say(stderr, "detaudit: note: {} holds an unfinished run (no finished_at); the baseline has what it finished\n",
                  args->dir);
            Outcome o;
            o.text = fmt::format("baseline: {} cells, {} training cells, {} machine keys written to {}\n", saved.cells,
                                 saved.training, saved.keys, saved.path);
            o.data = {{"baseline", saved.path},
                      {"cells", saved.cells},
                      {"training_cells", saved.training},
                      {"keys", saved.keys},
                      {"unfinished", saved.unfinished}};
            return emit(o);
          },
          &args->output, false, true};
}

const CommandRegistration reg(10, add_baseline_command);

}  // namespace
}  // namespace detaudit::cli
