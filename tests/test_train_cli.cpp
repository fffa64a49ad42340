// The sony2021 design end to end through the CLI, on a tiny scale: the results contract of training
// runs, bitwise-identical condition (d), resume, and exit code 2 for bad data and bad targets.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/cli_helpers.hpp"

namespace fs = std::filesystem;
using detaudit::cli_test::CliRun;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::run_cli;
using detaudit::cli_test::slurp;

namespace {

bool have_fashion_mnist() { return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); }

// Writes a small, valid MNIST-format pair (raw IDX) into dir: n images of 28x28 with a pattern.
void write_idx(const fs::path& dir, int n, int labels_n) {
  fs::create_directories(dir);
  auto be32 = [](std::ofstream& f, uint32_t v) {
    unsigned char b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
    f.write(reinterpret_cast<char*>(b), 4);
  };
  std::ofstream img(dir / "train-images-idx3-ubyte", std::ios::binary);
  be32(img, 0x803);
  be32(img, uint32_t(n));
  be32(img, 28);
  be32(img, 28);
  for (int i = 0; i < n * 28 * 28; ++i) img.put(char((i * 37 + i / 784) % 256));
  std::ofstream lab(dir / "train-labels-idx1-ubyte", std::ios::binary);
  be32(lab, 0x801);
  be32(lab, uint32_t(labels_n));
  for (int i = 0; i < labels_n; ++i) lab.put(char(i % 10));
}

const char* kTiny = "--seeds 2 --batches 12 --window 4 --replicates 2";

}  // namespace

TEST(TrainCli, Sony2021DesignWritesRunsAnalysisAndReports) {
  fs::path data = fresh_dir("train-data");
  write_idx(data, 256, 256);
  fs::path dir = fresh_dir("train-design");
  std::string args = std::string("train autoencoder --design sony2021 ") + kTiny + " --targets 'cpu?threads=2' --data " +
                     data.string() + " --out " + dir.string();
  CliRun r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("run 1/10 (a)"), std::string::npos) << "progress lines name run, condition and target";

  auto j = nlohmann::json::parse(slurp(dir / "results.json"));
  EXPECT_EQ(j["schema"], "detaudit/1");
  auto& runs = j["training"];
  // (a) 2 seeds x 2 replicates, (b), (c), (d) 2 runs each, for one base target.
  ASSERT_EQ(runs.size(), 10u);
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

  std::string md = slurp(dir / "report.md");
  EXPECT_LT(md.find("## Training verdict"), md.find("## Final loss by condition and target"));
  EXPECT_NE(md.find("standard deviation exactly 0 (by hashes)"), std::string::npos);
  EXPECT_NE(md.find("## Variance components"), std::string::npos);
  EXPECT_NE(slurp(dir / "report.html").find("<svg"), std::string::npos) << "inline SVG plots";

  // Interrupted after 4 runs: the same command resumes and redoes none of them.
  auto first = runs;
  j["training"] = nlohmann::json(std::vector<nlohmann::json>(first.begin(), first.begin() + 4));
  j["finished_at"] = "";
  std::ofstream(dir / "results.json") << j.dump();
  CliRun again = run_cli(args);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("resuming: 4 finished runs kept"), std::string::npos) << again.err;
  EXPECT_EQ(again.err.find("run 1/10 (a)"), std::string::npos) << "finished runs are not redone";
  auto k = nlohmann::json::parse(slurp(dir / "results.json"));
  ASSERT_EQ(k["training"].size(), 10u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(k["training"][i], first[i]);
  // The deterministic runs redone after the interruption are bit for bit the ones before it.
  for (size_t i = 4; i < 10; ++i)
    if (first[i]["determinism"] == "on") EXPECT_EQ(k["training"][i]["weights_fingerprint"], first[i]["weights_fingerprint"]);

  // `report` renders training results again.
  fs::remove(dir / "report.md");
  EXPECT_EQ(run_cli("report " + dir.string()).code, 0);
  EXPECT_NE(slurp(dir / "report.md").find("## Training verdict"), std::string::npos);
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
  struct Case {
    std::string args, must_say;
  };
  std::vector<Case> cases = {
      {"--data " + missing.string(), "dataset-fashion-mnist"},
      {"--data " + trunc.string(), "train-images-idx3-ubyte"},
      {"--data " + mismatch.string(), "train-labels-idx1-ubyte"},
      {"--data " + badmagic.string(), "magic"},
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
  }
}

TEST(TrainCli, RealFashionMnistIsTheDefault) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::path dir = fresh_dir("train-fashion");
  CliRun r = run_cli("train autoencoder --seeds 1 --batches 3 --window 2 --replicates 1 --targets 'cpu?threads=1' --out " +
                     dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("60000 images 28x28"), std::string::npos) << r.err;
}
