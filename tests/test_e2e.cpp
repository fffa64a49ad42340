// End to end through the CLI: a tiny suite, results.json against the contract, the reports, resume,
// and exit code 2 with one line for bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "contract/spec.hpp"
#include "tests/cli_helpers.hpp"

namespace fs = std::filesystem;

namespace {

using detaudit::cli_test::CliRun;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::slurp;
CliRun run(const std::string& args) { return detaudit::cli_test::run_cli(args); }

const char* kTargets = "'cpu-ref,cpu?order=blocked&threads=2,testing?fault=ill,cuda:0?order=tree'";
const char* kWorkloads = "'reduce?op=sum&n=100000,matmul?m=33&n=17&k=65,batchinv?m=16&n=16&k=40&rows=4'";

}  // namespace

TEST(EndToEnd, TinySuiteWritesTheResultsContract) {
  fs::path dir = fresh_dir("contract");
  CliRun r = run(std::string("probe --targets ") + kTargets + " --workloads " + kWorkloads + " --repeats 3 --out " +
              dir.string());
  // testing?fault=ill crashes with SIGILL on purpose, and nothing excuses it (no unmet requirement):
  // its cells FAIL, so probe exits 1 and names them.
  ASSERT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("target 1/4 cpu-ref: 3 workloads"), std::string::npos) << "one progress line per target: " << r.err;
  EXPECT_NE(r.out.find("report.md"), std::string::npos);
  EXPECT_NE(r.out.find("FAIL reduce?op=sum&n=100000&dist=uniform&seed=1 on testing?fault=ill: crashed: SIGILL"), std::string::npos)
      << r.out;

  auto j = nlohmann::json::parse(slurp(dir / "results.json"));
  EXPECT_EQ(j["schema"], "detaudit/1");
  for (const char* k : {"tool_version", "started_at", "machine", "observations", "training", "analysis"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"hostname", "cpu_model", "cores", "gpus", "libraries"}) EXPECT_TRUE(j["machine"].contains(k)) << k;
  auto& obs = j["observations"];
  ASSERT_EQ(obs.size(), 12u);  // 4 targets x 3 workloads, every cell accounted for
  std::regex hex("^[0-9a-f]{32}$");
  int crashed = 0, skipped = 0, ok = 0;
  for (auto& o : obs) {
    for (const char* k : {"workload", "target", "status", "reason", "repeats", "fingerprints", "distinct", "oracle",
                          "seconds", "kernels"})
      EXPECT_TRUE(o.contains(k)) << k << " in " << o.dump();
    std::string st = o["status"];
    // Every cell is judged: the crash of the test target FAILs, skips are SKIP, the rest PASS here.
    EXPECT_EQ(o.value("verdict", ""), st == "crashed" ? "FAIL" : st == "skipped" ? "SKIP" : "PASS") << o.dump();
    if (st != "ok") {
      EXPECT_FALSE(o.value("verdict_reason", "").empty()) << "a FAIL or SKIP says why: " << o.dump();
    }
    if (st == "ok") {
      ++ok;
      ASSERT_EQ(o["fingerprints"].size(), 3u);
      for (auto& f : o["fingerprints"]) EXPECT_TRUE(std::regex_match(f.get<std::string>(), hex));
      EXPECT_EQ(o["seconds"].size(), 3u);
      ASSERT_TRUE(o["oracle"].is_object()) << o.dump();
      for (const char* k : {"max_ulp", "max_rel_err", "mismatched"}) EXPECT_TRUE(o["oracle"].contains(k));
      if (o["target"] == "cpu-ref") {
        EXPECT_EQ(o["oracle"]["mismatched"], 0) << "the oracle agrees with itself";
        EXPECT_EQ(o["distinct"], 1);
      }
      if (std::string(o["workload"]).rfind("batchinv", 0) == 0) {
        ASSERT_TRUE(o.contains("batch_invariance"));
        EXPECT_EQ(o["batch_invariance"]["rows_checked"], 4);
      }
    } else if (st == "crashed") {
      ++crashed;
      EXPECT_EQ(o["target"], "testing?fault=ill");
      EXPECT_EQ(std::string(o["reason"]).rfind("SIGILL", 0), 0u);
    } else if (st == "skipped") {
      ++skipped;
      EXPECT_FALSE(std::string(o["reason"]).empty());
    }
  }
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(crashed, 3);
  EXPECT_EQ(skipped + ok + crashed, 12) << "GPU target: ok on a GPU machine, skipped with a reason elsewhere";

  std::string md = slurp(dir / "report.md");
  ASSERT_FALSE(md.empty());
  auto verdict = md.find("## Verdict"), matrix = md.find("## Determinism matrix"), groups = md.find("## Bit-identical groups"),
       machine = md.find("## Machine");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, matrix);
  EXPECT_LT(matrix, groups);
  EXPECT_LT(groups, machine);
  EXPECT_NE(md.find("crashed: `testing?fault=ill`"), std::string::npos) << "crashes listed at the top";
  if (skipped) {
    auto at = md.find("skipped (3 cells on 1 target): ");
    EXPECT_LT(at, matrix) << "skips listed at the top, with the reason";
    EXPECT_NE(md.find("`cuda:0?order=tree`", at), std::string::npos);
  }
  std::string html = slurp(dir / "report.html");
  EXPECT_NE(html.find("<h2>Verdict</h2>"), std::string::npos);

  // `report` renders the same results again.
  fs::remove(dir / "report.md");
  CliRun rep = run("report " + dir.string() + " --write md");
  EXPECT_EQ(rep.code, 0) << rep.err;
  EXPECT_EQ(slurp(dir / "report.md"), md);
  // A report not asked for is not a destination: a link in its place is neither refused nor followed.
  const fs::path victim = dir.parent_path() / (dir.filename().string() + "-victim.html");
  std::ofstream(victim) << "victim";
  fs::remove(dir / "report.html");
  fs::create_symlink(victim, dir / "report.html");
  rep = run("report " + dir.string() + " --write md");
  EXPECT_EQ(rep.code, 0) << rep.err;
  EXPECT_EQ(slurp(victim), "victim");
  rep = run("report " + dir.string() + " --write html");
  EXPECT_EQ(rep.code, 2) << "the one asked for is a link: refused";
  EXPECT_NE(rep.err.find("report.html: is a symbolic link"), std::string::npos) << rep.err;
  EXPECT_EQ(slurp(victim), "victim");
  fs::remove(dir / "report.html");
  fs::remove(victim);
}

TEST(EndToEnd, InterruptedRunResumesWithoutRedoingFinishedWork) {
  fs::path dir = fresh_dir("resume");
  // --no-fail: the crashing test target's FAILs do not change the exit code, the verdicts stay.
  std::string args = std::string("probe --no-fail --targets ") + kTargets + " --workloads " + kWorkloads +
                     " --repeats 2 --out " + dir.string();
  ASSERT_EQ(run(args).code, 0);
  // Simulate an interruption after 5 observations.
  auto j = nlohmann::json::parse(slurp(dir / "results.json"));
  auto first = j["observations"];
  j["observations"] = nlohmann::json(std::vector<nlohmann::json>(first.begin(), first.begin() + 5));
  j["finished_at"] = "";
  std::ofstream(dir / "results.json") << j.dump();
  CliRun r = run(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming: 5 finished observations kept"), std::string::npos) << r.err;
  auto k = nlohmann::json::parse(slurp(dir / "results.json"));
  ASSERT_EQ(k["observations"].size(), 12u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(k["observations"][i], first[i]) << "finished work kept as it was";
  EXPECT_FALSE(k["finished_at"].get<std::string>().empty());
  // A different plan in the same directory is refused, not mixed in.
  CliRun other = run("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out " + dir.string());
  EXPECT_EQ(other.code, 2);
  // So is the same plan under another time limit: the finished cells did not run under it.
  CliRun limit = run(args + " --timeout 7");
  EXPECT_EQ(limit.code, 2) << limit.err;
  EXPECT_NE(limit.err.find("holds results of a different plan"), std::string::npos) << limit.err;
}

TEST(EndToEnd, BadInputExitsTwoWithOneLine) {
  for (const char* args : {"probe --targets 'cpu?order=random' --out /tmp/detaudit-never",
                           "probe --workloads 'matmul?m=x' --out /tmp/detaudit-never",
                           "probe --targets 'quantum:0' --out /tmp/detaudit-never", "probe --suite huge",
                           "probe --repeats -1", "frobnicate", "report /nonexistent-dir"}) {
    CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists("/tmp/detaudit-never")) << "bad input writes nothing";
}

TEST(EndToEnd, CorruptResultsAreRejectedAndLoseNothing) {
  fs::path dir = fresh_dir("corrupt");
  fs::create_directories(dir);
  std::string truncated = R"({"schema": "detaudit/1", "observations": [{"workload": "w", )";
  std::ofstream(dir / "results.json") << truncated;
  CliRun r = run("report " + dir.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("results.json: not valid JSON at byte 60 of 60 (the file ends early: truncated)"),
            std::string::npos)
      << r.err;
  // probe into that directory refuses to overwrite it.
  CliRun p = run("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out " + dir.string());
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(slurp(dir / "results.json"), truncated) << "the file is left as it was";
  std::ofstream(dir / "results.json") << R"({"schema": "other/9"})";
  EXPECT_EQ(run("report " + dir.string()).code, 2);
}

TEST(EndToEnd, EnvSaysWhyThereIsNoGpu) {
  CliRun r = run("env");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cpu "), std::string::npos);
  EXPECT_NE(r.out.find("cuda "), std::string::npos);
  CliRun j = run("env --json");
  ASSERT_EQ(j.code, 0);
  auto top = nlohmann::json::parse(j.out);
  EXPECT_EQ(top["schema"], "detaudit-cli/1");
  EXPECT_EQ(top["command"], "env");
  EXPECT_EQ(top["exit_code"], 0);
  EXPECT_FALSE(top.contains("verdict")) << "env judges nothing";
  auto m = top["machine"];
  EXPECT_TRUE(m["pus"].get<int>() >= 1);
  std::string cuda = m["cuda"];
  if (cuda != "available") {
    EXPECT_EQ(cuda.rfind("no CUDA device: ", 0), 0u) << cuda;
  }
  EXPECT_TRUE(m["libraries"].contains("openblas"));
}

// --gpu-only: the suite's GPU targets and nothing else (on a machine without a GPU, each is skipped with
// the reason); with --targets it is refused, since the two choose targets differently.
TEST(EndToEnd, GpuOnlyRunsTheSuitesGpuTargetsAlone) {
  fs::path dir = fresh_dir("gpu-only");
  CliRun r = run("probe --suite quick --gpu-only --workloads 'reduce?op=sum&n=1000,matmul?m=8&n=8&k=8,conv2d?n=1&c=2&h=4&w=4&k=2&pass=fwd' --repeats 1 --no-history --out " +
                 dir.string());
  // Without a GPU every cell is skipped: nothing was judged, which is "could not run" (2), never a pass;
  // the results and reports are written all the same.
  if (r.out.find("verdict: ERROR") != std::string::npos) {
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("nothing was judged: none of the 38 cells ran on this machine"), std::string::npos) << r.err;
  } else {
    ASSERT_LE(r.code, 1) << r.err;
  }
  auto j = nlohmann::json::parse(slurp(dir / "results.json"));
  std::set<std::string> backends;
  for (auto& o : j["observations"]) {
    const std::string t = o["target"];
    backends.insert(detaudit::spec_name(t));
  }
  EXPECT_EQ(backends, (std::set<std::string>{"cuda", "cublas", "cublaslt", "cudnn"}));
  // The finished run holds no cell of a pair that does not apply (cuBLAS runs no convolution), and every reader
  // takes it.
  EXPECT_EQ(j["plan"]["targets"].size() * j["plan"]["workloads"].size() - j["observations"].size(), 123u - 38u);
  CliRun rendered = run("report " + dir.string());
  EXPECT_EQ(rendered.code, 0) << rendered.err;
  CliRun both = run("probe --gpu-only --targets cpu-ref --out " + (dir / "never").string());
  EXPECT_EQ(both.code, 2);
  EXPECT_EQ(std::count(both.err.begin(), both.err.end(), '\n'), 1) << both.err;
  EXPECT_FALSE(fs::exists(dir / "never"));
  fs::remove_all(dir);
}
