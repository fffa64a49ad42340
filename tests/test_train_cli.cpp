// The sony2021 design end to end through the CLI, on a tiny scale: the results contract of training
// runs, bitwise-identical condition (d), resume, exit code 2 for bad data and bad targets before any
// run, training runs isolated in workers (a crash or a hang is a failed run and the design goes on,
// through the DETAUDIT_FAULT test hook), and the worker's refusal of malformed requests.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <regex>
#include <string>
#include <vector>

#include "detaudit_build_config.hpp"
#include "contract/results.hpp"
#include "tests/cli_helpers.hpp"

namespace fs = std::filesystem;
using detaudit::cli_test::CliRun;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::run_cli;
using detaudit::cli_test::slurp;
using detaudit::cli_test::write_idx;
using detaudit::BuiltinSprites;
using detaudit::kPredNetBuiltinSprites;

namespace {

bool have_fashion_mnist() { return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); }

const char* kTiny = "--seeds 2 --batches 12 --window 4 --replicates 2";

// `report` of results `j` written to a folder `where` of their own: refused, exit 2, with `says` in its one line.
void expect_report_refuses(const nlohmann::json& j, const fs::path& where, const std::string& says) {
  fs::remove_all(where);
  fs::create_directories(where);
  std::ofstream(where / "results.json") << j.dump(1);
  const CliRun rep = run_cli("report " + where.string());
  EXPECT_EQ(rep.code, 2) << says;
  EXPECT_NE(rep.err.find(says), std::string::npos) << rep.err;
  fs::remove_all(where);
}

}  // namespace

TEST(TrainCli, Sony2021DesignWritesRunsAnalysisAndReports) {
  fs::path data = fresh_dir("train-data");
  write_idx(data, 256, 256);
  fs::path dir = fresh_dir("train-design");
  std::string args = std::string("train autoencoder --design sony2021 ") + kTiny + " --targets 'cpu?threads=2' --data " +
                     data.string() + " --noise-scale --noise-every 4 --out " + dir.string();
  CliRun r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("run 1/14 (a)"), std::string::npos) << "progress lines name run, condition and target";

  auto j = nlohmann::json::parse(slurp(dir / "results.json"));
  EXPECT_EQ(j["schema"], "detaudit/1");
  EXPECT_EQ(j["plan"]["data_examples"], 256) << "the training set's size, which every noise trace names";
  auto& runs = j["training"];
  // (a) and (c) 2 seeds x 2 replicates, (b), (d), (e) 2 runs each, for one base target.
  ASSERT_EQ(runs.size(), 14u);
  std::map<std::string, std::set<std::string>> weights, curves;
  for (auto& run : runs) {
    for (const char* k : {"model", "design", "condition", "init", "determinism", "target", "seed", "replicate",
                          "final_loss", "curve", "weights_fingerprint", "seconds", "machine_id", "phases"})
      EXPECT_TRUE(run.contains(k)) << k;
    ASSERT_EQ(run["status"], "ok") << run.dump();
    EXPECT_EQ(run["curve"].size(), 12u);
    std::string c = run["condition"];
    bool nondet = c == "a" || c == "c";
    EXPECT_EQ(run["determinism"], nondet ? "off" : "on");
    EXPECT_EQ(run["init"], (c == "a" || c == "b") ? "random" : "fixed");
    EXPECT_EQ(run.contains("nudge"), c == "e");
    // --noise-every 4 of 12 batches: points at batches 1, 5, 9, each with its hardware repeat.
    ASSERT_TRUE(run.contains("noise")) << run.dump();
    ASSERT_EQ(run["noise"]["points"].size(), 3u);
    EXPECT_EQ(run["noise"]["examples"], 256);
    for (auto& p : run["noise"]["points"]) {
      ASSERT_TRUE(p.contains("hw_sq"));
      if (!nondet) {
        EXPECT_EQ(p["hw_sq"], 0.0) << "a deterministic target's gradient twice is the same bits";
      }
    }
    EXPECT_EQ(run["target"], nondet ? "cpu?order=atomic&threads=2&isa=auto" : "cpu?order=blocked&threads=2&isa=auto");
    // The final metric is the mean of the last `window` losses.
    double s = 0;
    for (int i = 8; i < 12; ++i) s += run["curve"][i].get<double>();
    EXPECT_NEAR(run["final_loss"].get<double>(), s / 4, 1e-12);
    weights[c].insert(run["weights_fingerprint"].get<std::string>());
    curves[c].insert(run["curve_fingerprint"].get<std::string>());
  }
  // (d): fixed initial weights on the deterministic variant: bitwise identical, shown by hashes.
  EXPECT_EQ(weights["d"].size(), 1u);
  EXPECT_EQ(curves["d"].size(), 1u);
  // (b): random initial weights: the two seeds train to different weights.
  EXPECT_EQ(weights["b"].size(), 2u);
  // (e): two different weights nudged: neither run ends in (d)'s weights.
  EXPECT_EQ(weights["e"].size(), 2u);
  EXPECT_EQ(weights["e"].count(*weights["d"].begin()), 0u);
  EXPECT_NE(runs[12]["nudge"]["parameter"], runs[13]["nudge"]["parameter"]);

  auto& an = j["analysis"];
  ASSERT_TRUE(an.contains("table"));
  bool saw_d = false;
  for (auto& row : an["table"])
    if (row["condition"] == "d") {
      saw_d = true;
      EXPECT_EQ(row["std"].get<double>(), 0.0) << "exactly 0, not rounded";
      EXPECT_TRUE(row["bitwise_identical"].get<bool>());
    }
  EXPECT_TRUE(saw_d);
  ASSERT_TRUE(an.contains("variance"));
  ASSERT_TRUE(an.contains("phases"));
  // Seed 1000 starts (a)/(b)'s first seed and is (c)-(e)'s fixed initial weights: declared.
  ASSERT_TRUE(an.contains("seed_overlap"));
  EXPECT_EQ(an["seed_overlap"]["seeds"], nlohmann::json::array({1000}));
  // 12 batches: no phase label is claimed.
  for (auto& run : runs) EXPECT_EQ(run["phases"]["label"], "too short to tell");

  std::string md = slurp(dir / "report.md");
  EXPECT_LT(md.find("## Training verdict"), md.find("## Final loss by condition and target"));
  EXPECT_NE(md.find("standard deviation exactly 0 (by hashes)"), std::string::npos);
  EXPECT_NE(md.find("## Variance components"), std::string::npos);
  EXPECT_NE(md.find("Seeds shared across conditions: seed 1000"), std::string::npos);
  EXPECT_NE(md.find("## Every test of this design"), std::string::npos);
  EXPECT_NE(md.find("## One-ULP sensitivity (e)"), std::string::npos);
  EXPECT_NE(md.find("## Gradient noise scale and hardware noise"), std::string::npos);
  EXPECT_NE(
      md.find("| `cpu?order=blocked&threads=2&isa=auto` | (d) fixed init, nondeterminism off | 0 | 6 (0 differed; "
              "1 init) | 0 (exactly) |"),
      std::string::npos)
      << "the deterministic variant's row in (d): 2 runs x 3 repeats, one set of initial weights";
  ASSERT_TRUE(an.contains("noise"));
  EXPECT_EQ(an["noise"]["hardware"].size(), 5u) << "one row per target and condition: (a), (c) atomic; (b), (d), (e)";
  EXPECT_NE(slurp(dir / "report.html").find("<svg"), std::string::npos) << "inline SVG plots";

  // Interrupted after 4 runs: the same command resumes and redoes none of them.
  auto first = runs;
  j["training"] = nlohmann::json(std::vector<nlohmann::json>(first.begin(), first.begin() + 4));
  j["finished_at"] = "";
  j["analysis"] = nlohmann::json::object();  // as an interrupted design leaves it: analysed when it finishes
  std::ofstream(dir / "results.json") << j.dump();
  CliRun again = run_cli(args);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("resuming: 4 finished runs kept"), std::string::npos) << again.err;
  EXPECT_EQ(again.err.find("run 1/14 (a)"), std::string::npos) << "finished runs are not redone";
  auto k = nlohmann::json::parse(slurp(dir / "results.json"));
  ASSERT_EQ(k["training"].size(), 14u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(k["training"][i], first[i]);
  // The deterministic runs redone after the interruption are bit for bit the ones before it.
  for (size_t i = 4; i < 12; ++i) {
    if (first[i]["determinism"] == "on") {
      EXPECT_EQ(k["training"][i]["weights_fingerprint"], first[i]["weights_fingerprint"]);
    }
  }
  // Resumed from a file whose kept run was edited (its seed relabelled, its initial weights zeroed): each kept
  // run reads on its own, but with the runs made now the results contradict themselves. The design stops with
  // the reader's line and writes no file that no command would read.
  {
    nlohmann::json edited = j;
    edited["training"] = {first[0], first[1]};  // seed 1000's two (a) runs: no kept run of seed 1001
    ASSERT_EQ(first[1]["seed"], 1000);
    auto& run = edited["training"][0];
    run["seed"] = 1001;
    run["key"] = "a|" + run["target"].get<std::string>() + "|1001|" + std::to_string(run["replicate"].get<int>());
    run["initial_weights_fingerprint"] = std::string(32, '0');
    const std::string bytes = edited.dump();
    std::ofstream(dir / "results.json") << bytes;
    CliRun resumed = run_cli(args);
    EXPECT_EQ(resumed.code, 2) << resumed.err;
    EXPECT_NE(resumed.err.find("not written (no command would read these results): "), std::string::npos) << resumed.err;
    EXPECT_NE(resumed.err.find("initial_weights_fingerprint differs"), std::string::npos) << resumed.err;
    std::ofstream(dir / "results.json") << k.dump();
  }
  // Resumed on another machine (its runs and machine block consistently another host's): refused, since one
  // design's runs come from one machine.
  {
    nlohmann::json elsewhere = j;
    elsewhere["machine"]["hostname"] = "elsewhere";
    for (auto& run : elsewhere["training"]) run["machine_id"] = detaudit::machine_id_of(elsewhere["machine"]);
    std::ofstream(dir / "results.json") << elsewhere.dump();
    CliRun resumed = run_cli(args);
    EXPECT_EQ(resumed.code, 2) << resumed.err;
    EXPECT_NE(resumed.err.find("holds runs made on machine " + detaudit::machine_id_of(elsewhere["machine"])), std::string::npos)
        << resumed.err;
    std::ofstream(dir / "results.json") << k.dump();
  }

  // `report` renders training results again.
  fs::remove(dir / "report.md");
  EXPECT_EQ(run_cli("report " + dir.string()).code, 0);
  EXPECT_NE(slurp(dir / "report.md").find("## Training verdict"), std::string::npos);

  // What a run says of itself and of its design holds: each edit of this real file is refused by report,
  // in one line naming the field.
  const std::string text = slurp(dir / "results.json");
  const auto real = nlohmann::json::parse(text);
  size_t e = 0;
  while (e < real["training"].size() && real["training"][e]["condition"] != "e") ++e;
  ASSERT_LT(e, real["training"].size());
  ASSERT_EQ(real["training"][0]["condition"], "a");
  ASSERT_EQ(real["plan"]["runs"], 14);
  const std::string atomic = "cpu?order=atomic&threads=2&isa=auto", blocked = "cpu?order=blocked&threads=2&isa=auto";
  struct Lie {
    std::string name, says;
    std::function<void(nlohmann::json&)> edit;
  };
  const std::vector<Lie> lies = {
      {"key", "training[0].key \"a|" + atomic + "|1001|0\" is not its condition|target|seed|replicate",
       [&](nlohmann::json& j) { j["training"][0]["key"] = "a|" + atomic + "|1001|0"; }},
      {"base", "training[0].base_target cpu?order=blocked&threads=1&isa=auto is not a target of the design",
       [](nlohmann::json& j) { j["training"][0]["base_target"] = "cpu?threads=1"; }},
      {"variant", "training[0].target " + blocked + " is not " + blocked + "'s nondeterministic variant (" + atomic + ")",
       [&](nlohmann::json& j) {
         j["training"][0]["target"] = blocked;
         j["training"][0]["key"] = "a|" + blocked + "|1000|0";
       }},
      // Every run of one design was made on its machine; the runs ran one after another within the run.
      {"machine-id", "training[0].machine_id is 0000000000000000, but the machine block the runs were recorded with",
       [](nlohmann::json& j) { j["training"][0]["machine_id"] = std::string(16, '0'); }},
      {"run-seconds", "training[0].seconds: the runs up to it took 100000.0 s, longer than the run",
       [](nlohmann::json& j) {
         auto& t = j["training"][0];
         t["seconds"] = 1e5;
         t["steps_per_second"] = t["curve"].size() / 1e5;
       }},
      {"noise-every", "plan.design.noise_every must be", [](nlohmann::json& j) { j["plan"]["design"]["noise_every"] = -1; }},
      {"noise-twice", "training[0].noise.points[1].step is 1: noise is measured once",
       [](nlohmann::json& j) { j["training"][0]["noise"]["points"][1]["step"] = 1; }},
      {"noise-beyond", "training[0].noise.points[2].step is 13",
       [](nlohmann::json& j) { j["training"][0]["noise"]["points"][2]["step"] = 13; }},
      {"noise-interval", "training[0].noise.every is 2, but the design measures noise every 4 batches",
       [](nlohmann::json& j) {
         j["training"][0]["noise"]["every"] = 2;
         // As many points as every 2 batches gives (so that the interval, not the count, is the lie).
         auto& p = j["training"][0]["noise"]["points"];
         const nlohmann::json first = p[0];
         p = nlohmann::json::array();
         for (int step = 1; step <= 12; step += 2) {
           p.push_back(first);
           p.back()["step"] = step;
         }
       }},
      {"noise-point-dropped", "training[0].noise.points holds 2 points, but a run of 12 batches that finished is "
                              "measured at 3 (batch 1 and every 4 after it)",
       [](nlohmann::json& j) { j["training"][0]["noise"]["points"].erase(1); }},
      {"label", "training[0].phases.label must be one of",
       [](nlohmann::json& j) { j["training"][0]["phases"]["label"] = "quadriphasic"; }},
      {"escape", "training[0].phases.escape_step is set, but a too short to tell curve has no escape",
       [](nlohmann::json& j) { j["training"][0]["phases"]["escape_step"] = 5; }},
      {"nudge-elsewhere", "training[0].nudge is set, but only condition (e) nudges a weight",
       [&](nlohmann::json& j) { j["training"][0]["nudge"] = j["training"][e]["nudge"]; }},
      {"nudge-index", "nudge.index is 5, but run", [&](nlohmann::json& j) { j["training"][e]["nudge"]["index"] = 5; }},
      {"nudge-ulp", "is not one float moved by one ULP toward +infinity",
       [&](nlohmann::json& j) { j["training"][e]["nudge"]["to"] = j["training"][e]["nudge"]["from"].get<double>() + 1; }},
      // A weight beyond the model's, named alike by every run of the nudge.
      {"nudge-beyond", "nudge.parameter is 111521, but the autoencoder has 111521 weights",
       [](nlohmann::json& j) {
         for (auto& run : j["training"])
           if (run.contains("nudge")) run["nudge"]["parameter"] = 111521;
       }},
      {"runs-beyond", "plan.runs is 15, more than the 14 runs its design has",
       [](nlohmann::json& j) { j["plan"]["runs"] = 15; }},
      {"machine-edited", "but the machine block the runs were recorded with hashes to",
       [](nlohmann::json& j) {
         j["machine"]["cpu_model"] = "AMD EPYC 9654 96-Core Processor";
         j["machine"]["cpu_vendor"] = "AuthenticAMD";  // (a model of another maker than the vendor is refused first)
       }},
      {"runs-fewer", "plan.runs is 13, fewer than the 14 runs its design has", [](nlohmann::json& j) { j["plan"]["runs"] = 13; }},
      {"target-added", "plan.runs is 14, fewer than the 28 runs its design has",
       [](nlohmann::json& j) { j["plan"]["design"]["targets"].push_back("cpu?order=blocked&threads=4&isa=auto"); }},
      {"design-field", "plan.design.extra is not a field of a training design",
       [](nlohmann::json& j) { j["plan"]["design"]["extra"] = 1; }},
      {"conditions", "plan.design.conditions is \"abcdd\"", [](nlohmann::json& j) { j["plan"]["design"]["conditions"] = "abcdd"; }},
      {"prednet-config", "plan.design.prednet_config is set, but the model is not prednet",
       [](nlohmann::json& j) { j["plan"]["design"]["prednet_config"] = "quick"; }},
      {"probe-cells", "observations holds probe cells, but the plan is a training design's",
       [](nlohmann::json& j) {
         j["observations"].push_back({{"workload", "reduce?op=sum&n=1000"}, {"target", "cpu-ref"}, {"status", "skipped"},
                                      {"reason", "x"}, {"repeats", 2}, {"fingerprints", nlohmann::json::array()},
                                      {"distinct", 0}});
       }},
      {"plan-kind", "plan.kind is \"probe\"", [](nlohmann::json& j) { j["plan"]["kind"] = "probe"; }},
      // Runs of two seeds never end in the same weights: (b)'s second seed given its first's.
      {"two-seeds-alike", "which started from another seed's weights (runs from two seeds never end in the same bits)",
       [](nlohmann::json& j) {
         std::string first;
         for (auto& t : j["training"])
           if (t["condition"] == "b" && t["seed"] == 1000) first = t["weights_fingerprint"];
         for (auto& t : j["training"])
           if (t["condition"] == "b" && t["seed"] == 1001) t["weights_fingerprint"] = first;
       }},
      {"source", "training[0].source is set, but the results are not a merged analysis",
       [](nlohmann::json& j) { j["training"][0]["source"] = 0; }},
      {"machine-id", "training[0].machine_id 'nothex!' is not 16 hex digits",
       [](nlohmann::json& j) { j["training"][0]["machine_id"] = "nothex!"; }},
      {"steps", "training[0].steps_per_second is 1000000000, but 12 batches",
       [](nlohmann::json& j) { j["training"][0]["steps_per_second"] = 1e9; }},
      {"crashed-with-results", "training[0]: status crashed, yet it holds a finished run's results",
       [](nlohmann::json& j) {
         j["training"][0]["status"] = "crashed";
         j["training"][0]["reason"] = "SIGSEGV (Segmentation fault)";
         j["training"][0]["signal"] = "SIGSEGV";
       }},
      {"initial-weights", "training[1].initial_weights_fingerprint differs from training[0]'s",
       [](nlohmann::json& j) { j["training"][1]["initial_weights_fingerprint"] = std::string(32, 'a'); }},
      {"noise-missing", "training[0].noise is missing, but the design measures noise every 4 batches",
       [](nlohmann::json& j) { j["training"][0].erase("noise"); }},
      {"noise-batch", "training[0].noise.b_big is 63, but the design's batches are of",
       [](nlohmann::json& j) { j["training"][0]["noise"]["b_big"] = 63, j["training"][0]["noise"]["b_small"] = 31; }},
      {"noise-examples", "training[0].noise.examples is 3: the data has at least one batch",
       [](nlohmann::json& j) { j["training"][0]["noise"]["examples"] = 3; }},
      {"noise-points", "training[0].noise.points holds 0 points, but a run of 12 batches that finished is measured at 3",
       [](nlohmann::json& j) { j["training"][0]["noise"]["points"] = nlohmann::json::array(); }},
      {"batches-done", "training[0].batches_done is 1, but the run finished its 12 batches",
       [](nlohmann::json& j) { j["training"][0]["batches_done"] = 1; }},
      {"timeout-finished", "training[0].timeout_s is set, but the run's status is ok",
       [](nlohmann::json& j) { j["training"][0]["timeout_s"] = 5; }},
      // The command that made the design asked for the plan's design: another model, seed count or no noise is
      // refused, naming the field.
      {"command-seeds", "command: it asks for seeds 3, but the plan's design has 2",
       [](nlohmann::json& j) { j["command"] = std::regex_replace(j["command"].get<std::string>(), std::regex("--seeds 2"), "--seeds 3"); }},
      {"command-model", "command: it asks for batch_size 4, but the plan's design has 64",
       [](nlohmann::json& j) {
         j["command"] = std::regex_replace(j["command"].get<std::string>(), std::regex("train autoencoder"), "train prednet");
       }},
      {"command-noise", "command: it asks for noise_every 0, but the plan's design has 4",
       [](nlohmann::json& j) {
         j["command"] = std::regex_replace(j["command"].get<std::string>(), std::regex(" --noise-scale --noise-every 4"), "");
       }},
      // Only train, or qualify and fleet at level 2 or 3, make training runs, each its own design.
      {"command-probe", "command: a probe command makes no training runs",
       [](nlohmann::json& j) { j["command"] = "./detaudit probe --targets cpu-ref --out x"; }},
      {"command-qualify-1", "command: a qualify at level 1 trains nothing",
       [](nlohmann::json& j) { j["command"] = "detaudit qualify --targets cpu-ref"; }},
      {"command-qualify-2", "command: it asks for batches 60, but the plan's design has 12",
       [](nlohmann::json& j) { j["command"] = "detaudit qualify --level 2 --no-history"; }},
      {"weights-empty", "training[0].weights_fingerprint is missing or empty, but the run finished",
       [](nlohmann::json& j) { j["training"][0]["weights_fingerprint"] = ""; }},
      {"command-refused", "command: train refuses it: --noise-every needs --noise-scale",
       [](nlohmann::json& j) {
         j["command"] = std::regex_replace(j["command"].get<std::string>(), std::regex(" --noise-scale"), "");
       }},
      {"no-speed", "training[0].seconds is", [](nlohmann::json& j) { j["training"][0]["steps_per_second"] = 0; }},
      {"seconds", "training[0].seconds is 1e+300: a run's time is 0 (not timed), or from a nanosecond",
       [](nlohmann::json& j) { j["training"][0]["seconds"] = 1e300; }},
      // Every batch of the run in one nanosecond, its speed made to agree: no machine trains that fast.
      {"seconds-impossible", "batches in less than 1e-06 s each, faster than any machine trains a batch",
       [](nlohmann::json& j) {
         auto& r = j["training"][0];
         r["seconds"] = 1e-9;
         r["steps_per_second"] = double(r["curve"].size()) / 1e-9;
       }},
  };
  for (const Lie& l : lies) {
    nlohmann::json j = real;
    l.edit(j);
    const fs::path lied = dir.string() + "-" + l.name;
    fs::create_directories(lied);
    std::ofstream(lied / "results.json") << j.dump(1);
    CliRun rep = run_cli("report " + lied.string());
    EXPECT_EQ(rep.code, 2) << l.name << ": " << rep.err;
    EXPECT_NE(rep.err.find(l.says), std::string::npos) << l.name << ": " << rep.err;
    EXPECT_EQ(std::count(rep.err.begin(), rep.err.end(), '\n'), 1) << rep.err;
    fs::remove_all(lied);
  }
  {  // An analysis is made again from the runs: an edited one changes nothing in the report, and an analysis
     // in a design that has not finished (none is made before it finishes) is refused.
    const std::string md = slurp(dir / "report.md");
    nlohmann::json j = real;
    j["analysis"]["variance"] = {{"edited", true}};
    j["analysis"]["table"] = nlohmann::json::array();
    j["analysis"]["invented"] = 1;
    const fs::path lied = dir.string() + "-analysis";
    fs::create_directories(lied);
    std::ofstream(lied / "results.json") << j.dump(1);
    ASSERT_EQ(run_cli("report " + lied.string()).code, 0);
    std::string again_md = slurp(lied / "report.md");
    EXPECT_EQ(again_md.substr(again_md.find("## Training verdict")), md.substr(md.find("## Training verdict")))
        << "the report shows the analysis of the runs, not the one the file stored";
    j = real;
    j["finished_at"] = "";
    std::ofstream(lied / "results.json") << j.dump(1);
    CliRun rep = run_cli("report " + lied.string());
    EXPECT_EQ(rep.code, 2);
    EXPECT_NE(rep.err.find("analysis is set, but the run has not finished"), std::string::npos) << rep.err;
    fs::remove_all(lied);
  }
  {  // A baseline's source command is held to its source design, as the results file's is.
    const fs::path base = dir.string() + "-base.json";
    ASSERT_EQ(run_cli("baseline save " + dir.string() + " --out " + base.string()).code, 0);
    // (It loads: its own run, checked against it, is refused only as a run compared with itself.)
    const CliRun own = run_cli("check " + dir.string() + " --baseline " + base.string() + " --no-history --allow-unjudged");
    ASSERT_EQ(own.code, 2) << own.out;
    ASSERT_NE(own.err.find("it is the run the baseline was saved from"), std::string::npos) << own.err;
    nlohmann::json b = nlohmann::json::parse(slurp(base));
    b["source"]["command"] = std::regex_replace(b["source"]["command"].get<std::string>(), std::regex("--seeds 2"), "--seeds 3");
    std::ofstream(base) << b.dump(1);
    CliRun rep = run_cli("check " + dir.string() + " --baseline " + base.string() + " --no-history --allow-unjudged");
    EXPECT_EQ(rep.code, 2) << rep.out;
    EXPECT_NE(rep.err.find("source.command: it asks for seeds 3, but the plan's design has 2"), std::string::npos) << rep.err;
    fs::remove(base);
  }
}

// `train prednet`: the same design, resume and reports on PredNet (here its tiny configuration, a
// smoke test of the path in seconds): (d) bitwise identical, every run's next-frame check against
// copying the last frame, one held-out sequence's frames inline in the HTML, and the noise scale.
// PredNet's built-in sprites (no --data: cut from Debian's Fashion-MNIST) are the sets the tool knows: each
// configuration's pixel fingerprint and copy-last error are its table's, and a results file that names others,
// edited alike in every run, is refused.
TEST(TrainCli, BuiltinSpritesAreTheOnesTheToolKnows) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed: no built-in sprites to cut";
  for (const BuiltinSprites& b : kPredNetBuiltinSprites) {
    fs::path dir = fresh_dir(std::string("prednet-builtin-") + std::string(b.config));
    CliRun r = run_cli(fmt::format("train prednet --prednet-config {} --seeds 1 --replicates 1 --batches 1 --window 1 "
                                   "--no-history --quiet --out {}",
                                   b.config, dir.string()));
    ASSERT_EQ(r.code, 0) << b.config << ": " << r.err;
    const nlohmann::json j = nlohmann::json::parse(slurp(dir / "results.json"));
    EXPECT_EQ(j["plan"]["data_fingerprint"], std::string(b.fingerprint)) << b.config;
    for (const auto& run : j["training"]) EXPECT_EQ(run["prediction"]["copy_last_mse"].get<double>(), b.copy_last_mse);
    if (b.config != "tiny") continue;
    // The copy-last error of every run, or the fingerprint, edited alike: refused.
    const std::pair<std::function<void(nlohmann::json&)>, std::string> lies[] = {
        {[](nlohmann::json& e) {
           for (auto& run : e["training"]) run["prediction"]["copy_last_mse"] = 0.5;
         },
         "training[0].prediction.copy_last_mse is 0.5, but copying the last frame of PredNet's built-in sprites (tiny)"},
        {[](nlohmann::json& e) { e["plan"]["data_fingerprint"] = std::string(32, '0'); },
         "plan.data_fingerprint is 00000000000000000000000000000000, but PredNet's built-in sprites (tiny) are " +
             std::string(b.fingerprint)},
    };
    for (const auto& [lie, says] : lies) {
      nlohmann::json e = j;
      lie(e);
      expect_report_refuses(e, dir.string() + "-lie", says);
    }
    fs::remove_all(dir);
  }
}

TEST(TrainCli, PrednetDesignRunsEndToEnd) {
  fs::path data = fresh_dir("prednet-data");
  write_idx(data, 64, 64);
  fs::path dir = fresh_dir("prednet-design");
  CliRun r = run_cli("train prednet --prednet-config tiny --seeds 1 --replicates 2 --batches 4 --window 2 "
                     "--noise-scale --noise-every 2 --data " +
                     data.string() + " --out " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("moving sprites: 500 + 40 held-out sequences of 4 frames 32x32"), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(slurp(dir / "results.json"));
  EXPECT_EQ(j["plan"]["design"]["model"], "prednet");
  EXPECT_EQ(j["plan"]["design"]["prednet_config"], "tiny");
  auto& runs = j["training"];
  ASSERT_EQ(runs.size(), 7u);  // (a) and (c) 1 seed x 2 replicates, (b), (d), (e)
  std::set<std::string> d_weights;
  for (auto& run : runs) {
    ASSERT_EQ(run["status"], "ok") << run.dump();
    EXPECT_EQ(run["curve"].size(), 4u);
    ASSERT_TRUE(run.contains("prediction"));
    EXPECT_EQ(run["prediction"]["sequences"], 40);
    EXPECT_GT(run["prediction"]["copy_last_mse"].get<double>(), 0.0);
    EXPECT_EQ(run["frames_png"].get<std::string>().rfind("iVBORw0KGgo", 0), 0u) << "a PNG, base64";
    ASSERT_TRUE(run.contains("noise")) << run.dump();
    EXPECT_EQ(run["noise"]["points"].size(), 2u) << "batches 1 and 3";
    if (run["condition"] == "d") d_weights.insert(run["weights_fingerprint"].get<std::string>());
  }
  EXPECT_EQ(d_weights.size(), 1u);
  // The held-out sequences and their copy-last baseline are the same for every run.
  EXPECT_EQ(runs[0]["prediction"]["copy_last_mse"], runs[5]["prediction"]["copy_last_mse"]);
  {
    // ... so one run's edited apart is refused (sprites cut from other images: no error the tool knows).
    nlohmann::json e = j;
    e["training"][1]["prediction"]["copy_last_mse"] = 0.5;
    expect_report_refuses(e, dir.string() + "-copy-last",
                          "training[1].prediction checks 40 sequences with a copy-last error of 0.5, but training[0]'s "
                          "40 with");
  }
  const std::string md = slurp(dir / "report.md");
  EXPECT_NE(md.find("## Next-frame prediction (PredNet)"), std::string::npos);
  EXPECT_NE(md.find("## Gradient noise scale and hardware noise"), std::string::npos);
  EXPECT_NE(slurp(dir / "report.html").find("href=\"data:image/png;base64,iVBORw0KGgo"), std::string::npos);
  // Options of one model are refused for the other.
  EXPECT_EQ(run_cli("train autoencoder --prednet-config tiny --out " + (dir / "x").string()).code, 2);
}

// One data folder spelled three ways (a trailing slash, a "." in it) is one plan: the design resumes, recording the
// folder once as the first run wrote it.
TEST(TrainCli, TheSameDataFolderSpelledAnotherWayResumes) {
  fs::path data = fresh_dir("respell-data");
  write_idx(data, 128, 128);
  fs::path out = fresh_dir("respell");
  auto train = [&](const std::string& spelled) {
    return run_cli("train autoencoder --seeds 1 --batches 2 --window 1 --replicates 1 --targets 'cpu?threads=2' "
                   "--no-history --quiet --data " + spelled + " --out " + out.string());
  };
  ASSERT_EQ(train(data.string()).code, 0);
  for (const std::string& spelled :
       {data.string() + "/", (data / "." / "").string(), (data.parent_path() / "." / data.filename()).string()}) {
    const CliRun r = train(spelled);
    EXPECT_EQ(r.code, 0) << spelled << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(slurp(out / "results.json"))["plan"]["design"]["data_dir"], data.string()) << spelled;
  }
  // Another folder is another plan.
  fs::path other = fresh_dir("respell-other");
  write_idx(other, 128, 128);
  EXPECT_EQ(train(other.string()).code, 2);
  fs::remove_all(data), fs::remove_all(other), fs::remove_all(out);
}

// `detaudit analyze`: two results directories of one design merge into one analysis with a source per
// directory; designs or data that differ, inputs that are not training results and --out among the
// inputs exit 2 with one line naming the problem.
TEST(TrainCli, AnalyzeMergesDirectoriesAndRefusesDifferentDesigns) {
  fs::path data = fresh_dir("analyze-data");
  write_idx(data, 256, 256);
  fs::path root = fresh_dir("analyze");
  const std::string a = (root / "a").string(), b = (root / "b").string(), c = (root / "c").string(),
                    m = (root / "merged").string();
  auto train = [&](const std::string& out, const char* extra) {
    return run_cli(std::string("train autoencoder --design sony2021 --seeds 2 --window 4 --replicates 2 --targets "
                               "'cpu?threads=2' --data ") +
                   data.string() + " " + extra + " --out " + out);
  };
  ASSERT_EQ(train(a, "--batches 12").code, 0);
  ASSERT_EQ(train(b, "--batches 12").code, 0);
  CliRun r = run_cli("analyze " + a + " " + b + " --out " + m);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("source 0 ("), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("28 training runs from 2 results directories"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(slurp(fs::path(m) / "results.json"));
  ASSERT_EQ(j["plan"]["sources"].size(), 2u);
  ASSERT_EQ(j["training"].size(), 28u);
  EXPECT_EQ(j["training"][14]["source"], 1);
  EXPECT_FALSE(j["training"][0].contains("source")) << "source 0 is not written";
  const std::string host = j["plan"]["sources"][0]["label"];
  EXPECT_EQ(j["plan"]["sources"][1]["label"], host + "#2") << "one machine twice: unique labels";
  // The target factor has a level per source; one machine twice is no hardware comparison.
  EXPECT_EQ(j["analysis"]["variance"][0]["targets"].size(), 2u);
  ASSERT_EQ(j["analysis"]["confounding"].size(), 1u);
  const auto& g = j["analysis"]["confounding"][0];
  EXPECT_EQ(g["kind"], "neither") << g;
  EXPECT_EQ(g["bitwise"][1]["condition"], "d");
  EXPECT_EQ(g["bitwise"][1]["identical_seeds"], g["bitwise"][1]["seeds"]) << "(d) is bitwise identical across both";
  EXPECT_EQ(j["analysis"]["hardware_attribution"].get<std::string>().rfind(
                "this design cannot attribute anything to hardware", 0),
            0u);
  const std::string md = slurp(fs::path(m) / "report.md");
  EXPECT_NE(md.find("## Merged results"), std::string::npos);
  EXPECT_NE(md.find(" @ " + host + "#2"), std::string::npos);
  // The merged directory is a results directory like any other: `report` renders it again.
  EXPECT_EQ(run_cli("report " + m).code, 0);

  // Refusals, each one line naming what differs. Other designs and data are copies of b with the field
  // changed (training them for real would show nothing more: only plan.design is compared).
  auto edit_copy = [&](const std::string& name, auto&& f) {
    const fs::path d = root / name;
    fs::create_directories(d);
    auto k = nlohmann::json::parse(slurp(fs::path(b) / "results.json"));
    f(k);
    std::ofstream(d / "results.json") << k.dump();
    return d.string();
  };
  edit_copy("c", [](nlohmann::json& k) {
    k["plan"]["design"]["batches"] = 13;
    for (auto& run : k["training"]) run["batches"] = 13;  // the runs say what their design ran
    k["command"] = std::regex_replace(k["command"].get<std::string>(), std::regex("--batches 12"), "--batches 13");
  });
  r = run_cli("analyze " + a + " " + c + " --out " + (root / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("ran different designs: design.batches is 12 vs 13"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(root / "x" / "results.json"));
  const std::string other_data = edit_copy("other-data", [](nlohmann::json& k) { k["plan"]["data_fingerprint"] = std::string(32, '0'); });
  r = run_cli("analyze " + a + " " + other_data + " --out " + (root / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("data_fingerprint is "), std::string::npos) << r.err;
  const std::string probe = edit_copy("probe", [](nlohmann::json& k) { k["plan"] = nlohmann::json::object(); });
  r = run_cli("analyze " + a + " " + probe + " --out " + (root / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("holds no training design"), std::string::npos) << r.err;
  // Training runs under a probe suite's plan: refused when the file is read.
  const std::string suite = edit_copy("suite", [](nlohmann::json& k) { k["plan"] = {{"suite", "quick"}}; });
  r = run_cli("analyze " + a + " " + suite + " --out " + (root / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("but the plan is a probe suite's"), std::string::npos) << r.err;
  r = run_cli("analyze " + a + " " + m + " --out " + (root / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is itself a merged analysis"), std::string::npos) << r.err;
  // compare too: the merged runs would meet their own source under another (no) machine key as "bits changed".
  r = run_cli("compare " + a + " " + m);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("is a merged analysis (detaudit analyze): compare the directories it was merged from"),
            std::string::npos)
      << r.err;
  const std::string truncated = (root / "truncated").string();
  fs::create_directories(truncated);
  {
    const std::string text = slurp(fs::path(b) / "results.json");
    std::ofstream(fs::path(truncated) / "results.json") << text.substr(0, text.size() / 2);
  }
  r = run_cli("analyze " + a + " " + truncated + " --out " + (root / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(truncated), std::string::npos) << r.err;
  r = run_cli("analyze " + a + " " + b + " --out " + a);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is one of the inputs"), std::string::npos) << r.err;
  r = run_cli("analyze " + a + " " + (root / "missing").string() + " --out " + (root / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  r = run_cli("analyze " + a + " " + a + " --out " + (root / "x").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is given twice"), std::string::npos) << r.err;
  fs::remove_all(root);
  fs::remove_all(data);
}

TEST(TrainCli, BadDataAndTargetsExitTwoWithOneLine) {
  fs::path missing = fresh_dir("train-missing");
  fs::path trunc = fresh_dir("train-trunc");
  write_idx(trunc, 64, 64);
  fs::resize_file(trunc / "train-images-idx3-ubyte", 16 + 28 * 28 * 10);  // header says 64 images
  fs::path mismatch = fresh_dir("train-mismatch");
  write_idx(mismatch, 64, 63);
  fs::path badmagic = fresh_dir("train-magic");
  write_idx(badmagic, 64, 64);
  {
    std::fstream f(badmagic / "train-images-idx3-ubyte", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put(char(0x01));
  }
  // Images the model cannot use: 27 x 27, or fewer than one batch of 64.
  fs::path small = fresh_dir("train-27x27");
  write_idx(small, 100, 100, 27);
  fs::path few = fresh_dir("train-few");
  write_idx(few, 10, 10);
  // A header whose dims wrap a 64-bit byte count to 0 (2^24 x 2^24 x 2^16), over an empty data part.
  fs::path wrap = fresh_dir("train-wrap");
  write_idx(wrap, 64, 64);
  {
    std::ofstream f(wrap / "train-images-idx3-ubyte", std::ios::binary | std::ios::trunc);
    const unsigned char head[16] = {0, 0, 8, 3, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0};
    f.write(reinterpret_cast<const char*>(head), 16);
  }
  // A gzip'd images file with bytes after its gzip stream.
  fs::path tail = fresh_dir("train-gz-tail");
  write_idx(tail, 64, 64);
  {
    const std::string raw = slurp(tail / "train-images-idx3-ubyte");
    fs::remove(tail / "train-images-idx3-ubyte");
    gzFile g = gzopen((tail / "train-images-idx3-ubyte.gz").c_str(), "wb");
    ASSERT_NE(g, nullptr);
    ASSERT_EQ(gzwrite(g, raw.data(), unsigned(raw.size())), int(raw.size()));
    gzclose(g);
    std::ofstream(tail / "train-images-idx3-ubyte.gz", std::ios::binary | std::ios::app) << "garbage";
  }
  struct Case {
    std::string args, must_say;
  };
  std::vector<Case> cases = {
      {"--data " + missing.string(), "dataset-fashion-mnist"},
      {"--data " + trunc.string(), "train-images-idx3-ubyte"},
      {"--data " + mismatch.string(), "train-labels-idx1-ubyte"},
      {"--data " + badmagic.string(), "magic"},
      {"--data " + small.string(), "train-images-idx3-ubyte: images are 27x27, the autoencoder needs 28x28"},
      {"--data " + few.string(), "train-images-idx3-ubyte: 10 images, fewer than one batch of 64"},
      {"--data " + wrap.string(), "train-images-idx3-ubyte: header dimensions 16777216 x 16777216 x 65536 overflow"},
      {"--data " + tail.string(), "train-images-idx3-ubyte.gz: trailing data after the gzip stream"},
      {"--targets cpu-ref", "cpu-ref"},
      {"--targets 'cpu?order=sideways'", "sideways"},
      {"--window 50 --batches 10", "--window"},
  };
  for (auto& c : cases) {
    fs::path out = fresh_dir("train-never");
    CliRun r = run_cli("train autoencoder " + c.args + " --out " + out.string());
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.must_say), std::string::npos) << c.args << ": " << r.err;
    EXPECT_FALSE(fs::exists(out / "results.json")) << c.args << ": refused before any run";
  }
}

TEST(TrainCli, RealFashionMnistIsTheDefault) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::path dir = fresh_dir("train-fashion");
  CliRun r = run_cli("train autoencoder --seeds 1 --batches 3 --window 2 --replicates 1 --targets 'cpu?threads=2' --out " +
                     dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("60000 images 28x28"), std::string::npos) << r.err;
}

// Sets DETAUDIT_FAULT (the training worker's fault-injection hook) for the commands run in its scope.
class FaultHook {
 public:
  explicit FaultHook(const std::string& faults) { ::setenv("DETAUDIT_FAULT", faults.c_str(), 1); }
  ~FaultHook() { ::unsetenv("DETAUDIT_FAULT"); }
  FaultHook(const FaultHook&) = delete;
  FaultHook& operator=(const FaultHook&) = delete;
};

TEST(TrainCli, CrashedAndHungRunsAreRecordedAndTheDesignGoesOn) {
  // Seven runs: (a) twice, (b), (c) twice, (d), (e). Run 2 aborts (selected by its key), run 3 dies of
  // SIGSEGV (selected by its index), run 4 hangs after its first batch and is killed by the 5 s stall
  // timeout; runs 1, 5, 6 and 7 are untouched.
  fs::path data = fresh_dir("train-fault-data");
  write_idx(data, 128, 128);
  fs::path dir = fresh_dir("train-fault");
  CliRun r;
  {
    FaultHook hook("probe:1:segv,train:a|cpu?order=atomic&threads=2&isa=auto|1000|1:abort,train:3:segv,train:4:hang");
    r = run_cli(
        "train autoencoder --seeds 1 --batches 4 --window 2 --replicates 2 --targets 'cpu?threads=2' "
        "--run-timeout 5 --data " +
        data.string() + " --out " + dir.string());
  }
  // The design goes on past them; each is a FAIL of its cell, so train exits 1, and its last line says which.
  ASSERT_EQ(r.code, 1) << "crashes and hangs FAIL their cells: " << r.out << r.err;
  EXPECT_NE(r.out.find("7 training runs: 4 finished, 3 failed (crashed, timed out or an error), 0 skipped\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nverdict: FAIL  fail=3 warn=0 skip=0  report=" + (dir / "report.md").string() +
                       "  first: (a) cpu?order=atomic&threads=2&isa=auto seed 1000 rep 1: crashed: SIGABRT"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(r.out.find('\n', r.out.rfind("\nverdict: ") + 1), r.out.size() - 1) << "the verdict line is the last";
  EXPECT_NE(r.err.find("run 3/7 (b) cpu?order=blocked&threads=2&isa=auto seed 1000 rep 0: crashed: SIGSEGV "
                       "(Segmentation fault) after batch 1 of 4"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("run 4/7 (c) cpu?order=atomic&threads=2&isa=auto seed 1000 rep 0: timeout: no progress for 5 s"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("run 6/7 (d) cpu?order=blocked&threads=2&isa=auto seed 1000 rep 0: final loss"),
            std::string::npos)
      << "the design goes on after a hang: " << r.err;

  auto j = nlohmann::json::parse(slurp(dir / "results.json"));
  auto& runs = j["training"];
  ASSERT_EQ(runs.size(), 7u) << "every run is in results.json, failed ones included";
  EXPECT_EQ(j["plan"]["runs"], 7);
  EXPECT_EQ(runs[0]["status"], "ok");
  EXPECT_EQ(runs[1]["status"], "crashed");
  EXPECT_EQ(runs[1]["reason"], "SIGABRT (Aborted)");
  EXPECT_EQ(runs[1]["signal"], "SIGABRT");
  EXPECT_EQ(runs[2]["status"], "crashed");
  EXPECT_EQ(runs[2]["reason"], "SIGSEGV (Segmentation fault)");
  EXPECT_EQ(runs[2]["signal"], "SIGSEGV");
  EXPECT_EQ(runs[2]["batches_done"], 1) << "the fault fires after the first batch";
  EXPECT_EQ(runs[3]["status"], "timeout");
  EXPECT_EQ(runs[3]["timeout_s"], 5.0);
  EXPECT_EQ(runs[3]["batches_done"], 1);
  EXPECT_NE(runs[3]["reason"].get<std::string>().find("no progress for 5 s after batch 1 of 4"), std::string::npos)
      << runs[3]["reason"];
  EXPECT_EQ(runs[4]["status"], "ok");
  EXPECT_EQ(runs[5]["status"], "ok");
  EXPECT_EQ(runs[6]["status"], "ok");
  for (size_t i : {0u, 4u, 5u, 6u}) {
    EXPECT_EQ(runs[i]["curve"].size(), 4u);
    EXPECT_EQ(runs[i]["weights_fingerprint"].get<std::string>().size(), 32u);
  }
  // The timed-out run's limit, its progress and its reason say one thing: each edited apart is refused.
  const std::pair<std::function<void(nlohmann::json&)>, const char*> timeout_lies[] = {
      {[](nlohmann::json& r) { r["timeout_s"] = 7.0; },
       "reason is \"no progress for 5 s after batch 1 of 4; worker killed\", but a run of timeout_s 7"},
      {[](nlohmann::json& r) { r["batches_done"] = 2; }, "but a run of timeout_s 5 and batches_done 2 says"},
      {[](nlohmann::json& r) { r.erase("timeout_s"); }, "training[3]: a run that timed out without timeout_s"},
  };
  for (const auto& [lie, says] : timeout_lies) {
    nlohmann::json e = j;
    lie(e["training"][3]);
    expect_report_refuses(e, dir.string() + "-timeout-lie", says);
  }
  const char* condition[] = {"a", "a", "b", "c", "d"};
  for (size_t i : {1u, 2u, 3u}) {
    EXPECT_FALSE(runs[i].contains("final_loss")) << runs[i];
    EXPECT_EQ(runs[i]["condition"], condition[i]) << "failed runs keep their identity";
  }
  // The analysis counts them as failed and leaves them out of the statistics.
  int failed = 0, counted = 0;
  for (auto& row : j["analysis"]["table"]) failed += row["failed"].get<int>(), counted += row["runs"].get<int>();
  EXPECT_EQ(failed, 3);
  EXPECT_EQ(counted, 4);
  // The report names them and their reasons at the top, before any statistic.
  const std::string md = slurp(dir / "report.md");
  size_t top = md.find("**Runs that did not finish: 2 crashed, 1 timed out.**");
  ASSERT_NE(top, std::string::npos) << md.substr(0, 2000);
  EXPECT_LT(top, md.find("## Final loss by condition and target"));
  EXPECT_LT(top, md.find("SIGSEGV (Segmentation fault)"));
  EXPECT_NE(md.find("SIGSEGV (Segmentation fault)"), std::string::npos);
  EXPECT_NE(md.find("SIGABRT (Aborted)"), std::string::npos);
  EXPECT_NE(md.find("no progress for 5 s"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "logs" / "train-cpu_order_blocked_threads_2_isa_auto.log"));

  // Resuming keeps failed runs as they are: nothing is redone, and they still FAIL.
  CliRun again = run_cli(
      "train autoencoder --seeds 1 --batches 4 --window 2 --replicates 2 --targets 'cpu?threads=2' "
      "--run-timeout 5 --data " +
      data.string() + " --out " + dir.string());
  ASSERT_EQ(again.code, 1) << again.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "results.json"))["training"], runs);
}

// check of a design with a crashed run: the crash FAILs against the baseline, and also where the baseline holds no
// cell of it (a crashed run fails on its own); relabelled "skipped" it still FAILs on the baseline's own key (a CPU
// target has nothing to skip it), and a skip with the crash's signal left is no skip at all; a merged analysis is
// no run to check.
TEST(TrainCli, ACrashedRunFailsCheckWhateverItsBaselineOrItsLabel) {
  fs::path data = fresh_dir("train-check-crash-data");
  write_idx(data, 64, 64);
  fs::path d = fresh_dir("train-check-crash");
  const std::string design = "train autoencoder --seeds 1 --batches 3 --window 2 --replicates 2 --targets 'cpu?threads=2' "
                             "--no-history --quiet --data " + data.string() + " --out ";
  ASSERT_EQ(run_cli(design + (d / "base").string()).code, 0);
  const std::string base = (d / "base.json").string();
  ASSERT_EQ(run_cli("baseline save " + (d / "base").string() + " --out " + base).code, 0);
  {
    FaultHook hook("train:6:segv");  // run 6 of 7: (d)
    ASSERT_EQ(run_cli(design + (d / "crash").string()).code, 1);
  }
  const std::string check = " --allow-unjudged --no-history";
  CliRun r = run_cli("check " + (d / "crash").string() + " --baseline " + base + check);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("seed 1000 rep 0: run crashed: SIGSEGV"), std::string::npos) << r.out;
  // The baseline without its (d) cell: the crashed run is a new cell's, and still FAILs.
  nlohmann::json b = nlohmann::json::parse(slurp(base));
  nlohmann::json kept = nlohmann::json::array();
  for (auto& t : b["training"])
    if (t["condition"] != "d") kept.push_back(t);
  ASSERT_EQ(kept.size() + 1, b["training"].size());
  b["training"] = kept;
  std::ofstream(d / "no-d.json") << b.dump(1);
  r = run_cli("check " + (d / "crash").string() + " --baseline " + (d / "no-d.json").string() + check);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("new, no baseline"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seed 1000 rep 0: run crashed: SIGSEGV"), std::string::npos) << r.out;
  // Relabelled skipped: with the signal and the batch it trained left, refused; tidied, a FAIL on this key.
  nlohmann::json j = nlohmann::json::parse(slurp(d / "crash" / "results.json"));
  size_t crashed = 0;
  while (crashed < j["training"].size() && j["training"][crashed]["status"] != "crashed") ++crashed;
  ASSERT_LT(crashed, j["training"].size());
  j["training"][crashed]["status"] = "skipped";
  fs::copy(d / "crash", d / "relabelled", fs::copy_options::recursive);
  std::ofstream(d / "relabelled" / "results.json") << j.dump(1);
  r = run_cli("check " + (d / "relabelled").string() + " --baseline " + base + check);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("status skipped, yet a signal ended it (SIGSEGV)"), std::string::npos) << r.err;
  j["training"][crashed].erase("signal");
  j["training"][crashed].erase("batches_done");
  std::ofstream(d / "relabelled" / "results.json") << j.dump(1);
  r = run_cli("check " + (d / "relabelled").string() + " --baseline " + base + check);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("run skipped: SIGSEGV (Segmentation fault) (a CPU target on the baseline's own machine key)"),
            std::string::npos)
      << r.out;
  // A merged analysis holds no machine of its own: check refuses it, as compare does.
  ASSERT_EQ(run_cli("analyze " + (d / "base").string() + " " + (d / "crash").string() + " --out " +
                    (d / "merged").string()).code, 0);
  r = run_cli("check " + (d / "merged").string() + " --baseline " + base + check);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("is a merged analysis (detaudit analyze): check the directories"), std::string::npos) << r.err;
}

TEST(TrainCli, TargetsThatCannotRunHereAreSkippedWithTheReason) {
  // No machine has CUDA device 7 in these tests' world: every run is skipped, and the design completes.
  fs::path data = fresh_dir("train-skip-data");
  write_idx(data, 64, 64);
  fs::path dir = fresh_dir("train-skip");
  CliRun r = run_cli("train autoencoder --seeds 1 --batches 2 --window 1 --replicates 1 --targets cuda:7 --data " +
                     data.string() + " --out " + dir.string());
  // Nothing trained, so nothing was judged: "could not run" (2), never a pass; the results are kept.
  ASSERT_EQ(r.code, 2) << r.err;
  // The reason is the build's when it has no CUDA (the sanitizer build), else the machine's (no device 7).
  const std::string off = DETAUDIT_CUDA_OFF_REASON;
  const std::string why = off.empty() ? "no CUDA device" : "cuda: detaudit was built without CUDA: " + off;
  EXPECT_NE(r.err.find("nothing was judged: none of the 5 training runs trained (first: (a) cuda:7?order=atomic seed "
                       "1000 rep 0: " +
                       why),
            std::string::npos)
      << r.err;
  auto runs = nlohmann::json::parse(slurp(dir / "results.json"))["training"];
  ASSERT_EQ(runs.size(), 5u);
  for (auto& run : runs) {
    EXPECT_EQ(run["status"], "skipped") << run;
    EXPECT_FALSE(run["reason"].get<std::string>().empty());
  }
}

TEST(TrainCli, TrainWorkerRefusesMalformedRequests) {
  fs::path dir = fresh_dir("train-worker-requests");
  fs::create_directories(dir);
  const nlohmann::json good = {{"protocol", "detaudit-train-worker/1"},
                               {"index", 1},
                               {"key", "d|cpu?order=blocked&threads=1&isa=auto|1000|0"},
                               {"model", "autoencoder"},
                               {"target", "cpu?order=blocked&threads=1"},
                               {"init_seed", 1000},
                               {"data_seed", 1},
                               {"batches", 2},
                               {"batch_size", 64},
                               {"window", 1},
                               {"data_dir", dir.string()},
                               {"data_fingerprint", std::string(32, '0')},
                               {"nudge", -1},
                               {"noise_every", 0},
                               {"prednet_config", ""}};
  auto with = [&](const char* k, const nlohmann::json& v) {
    nlohmann::json j = good;
    j[k] = v;
    return j.dump();
  };
  nlohmann::json no_key = good;
  no_key.erase("key");
  struct Case {
    std::string request, must_say;
  };
  const std::vector<Case> cases = {
      {"not json", "not a JSON object"},
      {"[1, 2]", "not a JSON object"},
      {with("protocol", "detaudit-worker/1"), "\"protocol\""},
      {no_key.dump(), "\"key\" must be a string"},
      {with("extra", 1), "unknown field \"extra\""},
      {with("index", 0), "\"index\""},
      {with("batches", -3), "\"batches\""},
      {with("batches", 1.5), "\"batches\""},
      {with("window", 3), "\"window\" must be an integer in 1..2"},
      {with("batch_size", 100000), "\"batch_size\""},
      {with("nudge", -2), "\"nudge\" must be an integer >= -1"},
      {with("nudge", "0"), "\"nudge\" must be an integer >= -1"},
      {with("noise_every", -1), "\"noise_every\""},
      {with("model", "convnet"), "\"model\""},
      {with("prednet_config", 3), "\"prednet_config\" must be a string"},
      {with("target", "cpu?order=sideways"), "sideways"},
      {with("data_fingerprint", "xyz"), "\"data_fingerprint\""},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path req = dir / ("request-" + std::to_string(i));
    std::ofstream(req) << cases[i].request;
    CliRun r = run_cli("__train-worker < " + req.string());
    EXPECT_EQ(r.code, 2) << cases[i].request << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << cases[i].request << ": " << r.err;
    EXPECT_NE(r.err.find("malformed request: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(cases[i].must_say), std::string::npos) << cases[i].request << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << "nothing on the protocol stream: " << r.out;
  }
  // A malformed fault hook is refused too, before anything runs.
  const fs::path req = dir / "request-good";
  std::ofstream(req) << good.dump();
  FaultHook hook("train:1:explode");
  CliRun r = run_cli("__train-worker < " + req.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("DETAUDIT_FAULT entry 'train:1:explode'"), std::string::npos) << r.err;
}
