// `detaudit diverge`: the first op at which two training runs part (suites/diverge.hpp). Online: two
// runs in lockstep in this process, `--targets A[,B]`; offline: `--trace a.jsonl --trace b.jsonl`.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/output.hpp"
#include "models/idx.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "report/diverge_report.hpp"
#include "suites/diverge.hpp"
#include "suites/train_design.hpp"

namespace detaudit::cli {
namespace {

struct DivergeArgs {
  std::string model = "autoencoder";
  std::string targets;
  std::vector<std::string> traces;
  int steps = 20, batch_size = 64;
  uint64_t init_seed = 1, data_seed = 1;
  std::string data, out = "diverge-out", trace_out;
  OutputFlags output;
};

// Both runs share this process, so a target whose library reads its settings from the environment when it
// loads (OPENBLAS_CORETYPE, ONEDNN_MAX_CPU_ISA) runs only when this process already has them.
std::string environment_mismatch(const Spec& t) {
  const BackendEntry* e = find_backend(t.name);
  if (!e || !e->environment) return "";
  std::map<std::string, std::string> env;
  e->environment(t, &env);
  std::vector<std::string> need;  // every variable at once (oneDNN reads two names for one setting)
  for (auto& [k, v] : env) {
    const char* have = std::getenv(k.c_str());
    if (v.empty() ? have != nullptr : (!have || v != have)) need.push_back(k + (v.empty() ? std::string(" unset") : "=" + v));
  }
  if (need.empty()) return "";
  return fmt::format("{} needs {} when its library loads, and diverge runs both targets in this process: run it "
                     "with that environment",
                     t.str(), fmt::join(need, " and "));
}

BackendFactory factory(const Spec& t) {
  return [t]() -> BackendOr {
    BackendOr b = make_target_backend(t);
    if (!b) return Status::unavailable(t.str() + ": " + (b.message().empty() ? "cannot run here" : b.message()));
    return b;
  };
}

int write_report(const DivergeResult& r, const std::string& out, const std::string& traces) {
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return fail(out + ": " + ec.message());
  if (Status st = write_diverge_outputs(r, out); !st) return fail(st);
  Outcome o;
  o.exit_code = exit_code_of(r.decision());
  (r.first ? o.counts.fail : o.counts.pass) = 1;
  if (r.first) o.first_fail = r.summary();
  o.text = traces + r.summary() + "\n";
  if (r.first) {
    if (r.first->distance) o.text += fmt::format("op: {}\n", r.first->op.op);
    if (!r.first->kernels_note.empty()) o.text += fmt::format("kernels: not attributed ({})\n", r.first->kernels_note);
    if (r.offline) o.text += "offline comparison: fingerprints only, no ULP or relative distance\n";
  }
  o.text += fmt::format("report: {0}/diverge.md, {0}/diverge.html, {0}/diverge.json\n", out);
  o.report_md = out + "/diverge.md";
  o.report_html = out + "/diverge.html";
  o.data = {{"out", out}, {"diverge", nlohmann::json::parse(r.to_json(), nullptr, false)}};
  return emit(o);
}

int run_offline(const DivergeArgs& a) {
  if (a.traces.size() != 2) return fail("diverge: --trace takes exactly two trace files (--trace a.jsonl --trace b.jsonl)");
  if (!a.targets.empty()) return fail("diverge: --trace compares recorded traces; it does not take --targets");
  if (std::error_code ec; std::filesystem::equivalent(a.traces[0], a.traces[1], ec) && !ec)
    return fail(fmt::format("diverge: {} and {} are one trace file: a trace compared with itself compares nothing",
                            a.traces[0], a.traces[1]));
  if (Status st = out_outside_fleet_ranks(a.out); !st) return fail(st);
  if (Status st = check_diverge_destinations(a.out); !st) return fail(st);
  DivergeResult r;
  if (Status st = compare_traces(a.traces[0], a.traces[1], &r); !st) return fail(st);
  return write_report(r, a.out, "");
}

int run_online(const DivergeArgs& a) {
  if (a.model != "autoencoder") return fail("diverge: --model " + a.model + ": only autoencoder is known");
  StatusOr<std::vector<std::string>> items = split_list(a.targets);
  if (!items) return fail(items.status().prefixed("--targets "));
  std::vector<std::string> names = *items;
  if (names.empty() || names.size() > 2) return fail("diverge: --targets takes one target (run twice) or two, comma-separated");
  if (names.size() == 1) names.push_back(names[0]);
  Spec spec[2];
  for (int i = 0; i < 2; ++i) {
    std::string err;
    if (Status st = parse_target(names[size_t(i)], &spec[i]); !st) return fail(st);
    if (!target_trains(spec[i]))
      return fail(fmt::format("diverge: target {} does not train: its backend lacks the autoencoder's training ops "
                              "(bias add and their backward passes)", spec[i].str()));
    if (std::string e = environment_mismatch(spec[i]); !e.empty()) return fail(e);
  }
  Dataset data;
  Status st = load_dataset(a.data, "train", &data);
  if (st) st = check_dataset_for_model(data, a.model, kAutoencoderImageSide, kAutoencoderImageSide, a.batch_size);
  if (!st) return fail(st.message());
  const std::string prefix = a.trace_out.empty() ? a.out + "/trace" : a.trace_out;
  if (Status st = out_outside_fleet_ranks(a.out); !st) return fail(st);
  if (Status st = file_outside_fleet_ranks(prefix, "--trace-out"); !st) return fail(st);
  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) return fail(a.out + ": " + ec.message());
  // The report's destinations before the runs: a report refused at the end would leave new traces beside an
  // earlier run's report.
  if (Status st = check_diverge_destinations(a.out); !st) return fail(st);
  DivergeOptions o;
  o.make_a = factory(spec[0]);
  o.make_b = factory(spec[1]);
  o.target_a = spec[0].str(), o.target_b = spec[1].str();
  o.data = &data;
  o.train.init_seed = a.init_seed;
  o.train.data_seed = a.data_seed;
  o.train.batches = a.steps;
  o.train.batch_size = a.batch_size;
  o.trace_a = prefix + "-a.jsonl", o.trace_b = prefix + "-b.jsonl";
  o.progress = progress_sink();
  DivergeResult r;
  st = run_diverge(o, &r);
  if (!st) return fail_or_interrupted(st);
  return write_report(r, a.out, fmt::format("traces: {} and {}\n", o.trace_a, o.trace_b));
}

Command add_diverge_command(CLI::App& app, int argc, char** argv) {
  auto* sub = app.add_subcommand(
      "diverge", "Find the first op at which two training runs part: two targets (or one twice) in lockstep, or two traces.");
  auto a = std::make_shared<DivergeArgs>();
  sub->add_option("--model", a->model, "Model (autoencoder)")->capture_default_str();
  sub->add_option("--targets", a->targets, "A[,B]: one target run twice, or two targets")->check(kNonEmpty);
  sub->add_option("--trace", a->traces, "Compare two recorded traces offline: --trace a.jsonl --trace b.jsonl")
      ->check(kNonEmpty);
  sub->add_option("--steps", a->steps, "Training steps (default 20)")->check(CLI::Range(1, 10000000));
  sub->add_option("--batch-size", a->batch_size, "Images per batch (default 64)")->check(CLI::Range(1, 65536));
  sub->add_option("--init-seed", a->init_seed, "Initial weights seed (default 1)")->check(kUnsignedText);
  sub->add_option("--data-seed", a->data_seed, "Batch order seed (default 1)")->check(kUnsignedText);
  sub->add_option("--data", a->data, "Folder of MNIST-format IDX files (default: Fashion-MNIST from dataset-fashion-mnist)")
      ->check(kNonEmpty);
  sub->add_option("--out", a->out, "Directory for diverge.json, diverge.md, diverge.html (default diverge-out)")
      ->check(kNonEmpty);
  sub->add_option("--trace-out", a->trace_out, "Trace files PREFIX-a.jsonl and PREFIX-b.jsonl (default <out>/trace)")
      ->check(kNonEmpty);
  sub->footer(
      "\nAt every step, for every layer in execution order, both runs fingerprint the forward output, the\n"
      "loss gradient and value, the backward gradients (dw, db, dx) and the parameters after the update; the\n"
      "first record that differs is the first op whose inputs matched and whose output differs. It is\n"
      "reported with the ULP and relative L2 distance of the two tensors and the targets' settings (reduction\n"
      "order or algorithm); the runs go on to the end, and the weight distance and loss gap per step are\n"
      "plotted. Traces (JSON Lines) are written as the runs go (under a temporary name until both finish) and\n"
      "compare offline with --trace (fingerprints only). Exit codes: 0 no divergence, 1 diverged, 2 could not run.");
  add_output_flags(sub, &a->output, true);
  return {sub, [a] { return a->traces.empty() ? run_online(*a) : run_offline(*a); }, &a->output, true, true};
}

static const CommandRegistration reg(35, add_diverge_command);

}  // namespace
}  // namespace detaudit::cli
