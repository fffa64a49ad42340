// detaudit: audits numerical determinism at the hardware level. The only place that prints to stdout
// and turns statuses into exit codes: 0 ok, 1 a check failed, 2 could not run (one line on stderr).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "probes/env.hpp"
#include "probes/spec.hpp"
#include "probes/verdict.hpp"
#include "probes/worker.hpp"
#include "report/results.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_design.hpp"
#include "report/train_report.hpp"

namespace fs = std::filesystem;
using namespace detaudit;

namespace {

int fail(const std::string& msg) {
  fmt::print(stderr, "detaudit: error: {}\n", msg);
  return 2;
}

std::string self_exe(const char* argv0) {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

std::string default_out(const std::string& suite) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("results/{}-{}", suite, buf);
}

void print_env_text(const nlohmann::json& m) {
  auto s = [&](const char* k) -> std::string {
    if (!m.contains(k)) return "unknown";
    return m[k].is_string() ? m[k].get<std::string>() : m[k].dump();
  };
  fmt::print("host       {}\nos         {}\ncpu        {}\n", s("hostname"), s("os"), s("cpu_model"));
  fmt::print("topology   packages {}, cores {}, PUs {}, NUMA nodes {}\n", s("packages"), s("cores"), s("pus"),
             s("numa_nodes"));
  if (m.contains("topology_error")) fmt::print("           ({})\n", s("topology_error"));
  if (m.contains("caches"))
    for (auto& c : m["caches"])
      fmt::print("cache      L{} {} KiB x {}\n", c.value("level", 0), c.value("size_bytes", uint64_t(0)) / 1024, c.value("count", 0));
  fmt::print("features   {}\ncompiler   {}\n", s("cpu_features"), s("compiler"));
  for (auto& [k, v] : m["libraries"].items())
    fmt::print("{:<10} {}\n", k, v.is_string() ? v.get<std::string>() : v.dump());
  fmt::print("cuda       {}\n", s("cuda"));
  for (auto& g : m["gpus"])
    fmt::print("gpu {}      {} ({}), CC {}, {} SMs, {:.1f} GiB, L2 {} MiB, ECC {}, PCI {}, local CPUs {}\n", g.value("index", 0),
               g.value("name", ""), g.value("uuid", ""), g.value("compute_capability", ""), g.value("sm_count", 0),
               g.value("memory_bytes", uint64_t(0)) / 1073741824.0, g.value("l2_bytes", 0) / 1048576,
               g.value("ecc", false) ? "on" : "off", g.value("pci_bus_id", ""), g.value("local_cpuset", "unknown"));
}

}  // namespace

int main(int argc, char** argv) {
  // The worker speaks its protocol on a private copy of stdout; anything a library prints goes to stderr.
  if (argc >= 2 && std::string(argv[1]) == kWorkerSubcommand) {
    int proto = ::dup(1);
    ::dup2(2, 1);
    return worker_main(0, proto);
  }
  ::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"detaudit: audits numerical determinism at the hardware level.\n"
               "Runs conv, matmul and reduction workloads again and again on each target, fingerprints every\n"
               "output bit for bit, and reports which targets are deterministic, which agree with each other,\n"
               "and how far each is from the double-accumulated oracle.\n"
               "Exit codes: 0 the audit completed, 1 a check failed, 2 could not run.",
               "detaudit"};
  app.set_version_flag("--version", std::string("detaudit ") + DETAUDIT_VERSION);
  app.require_subcommand(1);

  auto* env = app.add_subcommand("env", "Print this machine's fingerprint: CPU topology, libraries, GPUs.");
  bool env_json = false;
  env->add_flag("--json", env_json, "Print JSON instead of text");

  auto* probe = app.add_subcommand("probe", "Run a probe suite and write results.json, report.md and report.html.");
  std::string suite = "quick", targets, workloads, out;
  int repeats = 0;
  double timeout = 120;
  bool fresh = false;
  probe->add_option("--suite", suite, "Suite: quick (under 2 minutes on 2 cores) or full")->capture_default_str();
  probe->add_option("--targets", targets, "Comma-separated target specs, replacing the suite's");
  probe->add_option("--workloads", workloads, "Comma-separated workload specs, replacing the suite's");
  probe->add_option("--repeats", repeats, "Repeats per workload x target (default: the suite's, 10 quick, 20 full)");
  probe->add_option("--timeout", timeout, "Seconds one workload may take on a target, all repeats together")
      ->capture_default_str();
  probe->add_option("--out", out, "Results directory (default results/<suite>-<time>); an unfinished run there resumes");
  probe->add_flag("--fresh", fresh, "Discard results already in --out instead of resuming");
  probe->footer("\nTARGETS (backend[:device][?key=value&...]):\n" + target_help() +
                "\nWORKLOADS (op?key=value&...; every workload also takes dist=uniform|int and seed=N):\n" +
                workload_help() +
                "\nA target that crashes (e.g. SIGILL) or runs past --timeout is recorded as an observation and the\n"
                "audit goes on. GPU targets are skipped with the reason on machines without a CUDA device.");

  auto* train = app.add_subcommand("train", "Run a training regression design and write results.json and the reports.");
  std::string model, design_name = "sony2021", train_targets, train_out, data_dir;
  int seeds = 0, batches = 0, window = 0, replicates = -1;
  bool paper = false, train_fresh = false;
  train->add_option("MODEL", model, "Model: autoencoder")->required()->check(CLI::IsMember({"autoencoder"}));
  train->add_option("--design", design_name, "Design: sony2021 (conditions a-d: init random/fixed x nondeterminism on/off)")
      ->check(CLI::IsMember({"sony2021"}))
      ->capture_default_str();
  train->add_option("--targets", train_targets,
                    "Comma-separated base targets; each runs in its deterministic and nondeterministic variant "
                    "(default cpu?threads=2,cpu?threads=1)");
  train->add_option("--seeds", seeds, "Runs per condition and target (default 3; --paper: 12)");
  train->add_option("--batches", batches, "Batches per run (default 200; --paper: 5000)");
  train->add_option("--window", window, "Final metric = mean loss of the last N batches (default 20; --paper: 50)");
  train->add_option("--replicates", replicates, "Repeats of each seed under condition (a), for the run-to-run term (default 2)");
  train->add_flag("--paper", paper, "The paper's protocol: 12 runs, 5000 batches, window 50");
  train->add_option("--data", data_dir, "Folder of MNIST-format IDX files (default: Fashion-MNIST from dataset-fashion-mnist)");
  train->add_option("--out", train_out, "Results directory (default results/train-<time>); an unfinished design there resumes");
  train->add_flag("--fresh", train_fresh, "Discard results already in --out instead of resuming");

  auto* report = app.add_subcommand("report", "Render a results directory's report again.");
  std::string report_dir, format = "both";
  report->add_option("DIR", report_dir, "Results directory holding results.json")->required();
  report->add_option("--format", format, "md, html or both")->check(CLI::IsMember({"md", "html", "both"}))->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }

  if (env->parsed()) {
    nlohmann::json m = machine_fingerprint();
    if (env_json)
      fmt::print("{}\n", m.dump(2));
    else
      print_env_text(m);
    return 0;
  }

  if (probe->parsed()) {
    ProbePlan plan;
    std::string err;
    if (!make_plan(suite, targets, workloads, repeats, timeout, &plan, &err)) return fail(err);
    ProbeRunOptions opt;
    opt.out_dir = out.empty() ? default_out(suite) : out;
    opt.exe = self_exe(argv[0]);
    opt.fresh = fresh;
    for (int i = 0; i < argc; ++i) opt.command += (i ? " " : "") + std::string(argv[i]);
    opt.progress = [](const std::string& line) { fmt::print(stderr, "[detaudit] {}\n", line); };
    fmt::print(stderr, "[detaudit] suite {}: {} targets x {} workloads, {} repeats, results in {}\n", plan.suite,
               plan.targets.size(), plan.workloads.size(), plan.repeats, opt.out_dir);
    Results results;
    int rc = run_probe_suite(plan, opt, &results, &err);
    if (rc != 0) return fail(err);
    auto s = summarize(results.observations);
    fmt::print("{} of {} cells deterministic, {} nondeterministic, {} crashed, {} timed out, {} skipped, {} errors\n",
               s.deterministic, s.deterministic + s.nondeterministic, s.nondeterministic, s.crashed, s.timeout, s.skipped,
               s.error);
    fmt::print("report: {}/report.md and {}/report.html\n", opt.out_dir, opt.out_dir);
    return 0;
  }

  if (train->parsed()) {
    TrainDesign d = default_design(paper);
    if (!train_targets.empty()) {
      d.targets.clear();
      for (auto& t : split_list(train_targets)) {
        Spec s;
        std::string err;
        if (!parse_target(t, &s, &err)) return fail(err);
        d.targets.push_back(s);
      }
      if (d.targets.empty()) return fail("--targets is empty");
    }
    auto positive = [](int v, const char* what) -> std::string {
      return v < 0 ? fmt::format("{} must be positive", what) : "";
    };
    for (auto [v, what] : {std::pair{seeds, "--seeds"}, {batches, "--batches"}, {window, "--window"}})
      if (auto e = positive(v, what); !e.empty()) return fail(e);
    if (seeds > 0) d.seeds = seeds;
    if (batches > 0) d.batches = batches;
    if (window > 0) d.window = window;
    if (replicates == 0 || replicates < -1) return fail("--replicates must be positive");
    if (replicates > 0) d.replicates = replicates;
    if (d.window > d.batches) return fail(fmt::format("--window {} exceeds --batches {}", d.window, d.batches));
    d.data_dir = data_dir;
    d.model = model;
    d.design = design_name;
    TrainRunOptions opt;
    opt.out_dir = train_out.empty() ? default_out("train") : train_out;
    opt.fresh = train_fresh;
    for (int i = 0; i < argc; ++i) opt.command += (i ? " " : "") + std::string(argv[i]);
    opt.progress = [](const std::string& line) { fmt::print(stderr, "[detaudit] {}\n", line); };
    Results results;
    std::string err;
    if (run_train_design(d, opt, &results, &err) != 0) return fail(err);
    fmt::print("{} training runs; report: {}/report.md and {}/report.html\n", results.training.size(), opt.out_dir,
               opt.out_dir);
    return 0;
  }

  if (report->parsed()) {
    Results r;
    std::string err;
    std::string path = report_dir + "/results.json";
    if (!load_results(path, &r, &err)) return fail(err);
    bool md = format == "md" || format == "both", html = format == "html" || format == "both";
    if (!write_reports(report_dir, r, &err, md, html)) return fail(err);
    if (md) fmt::print("{}/report.md\n", report_dir);
    if (html) fmt::print("{}/report.html\n", report_dir);
    return 0;
  }
  return 0;
}
