// results.json at its border: every field is checked when it is loaded (one line naming the field,
// never an exception, the file left as it was), and writes are atomic with private temporary files
// that never outlive a failure.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fixtures.hpp"
#include "contract/results.hpp"
#include "kernels/fingerprint.hpp"
#include "tests/cli_helpers.hpp"
#include "contract/atomic_file.hpp"

namespace fs = std::filesystem;
using namespace detaudit;
using detaudit::cli_test::CliRun;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::run_cli;
using detaudit::cli_test::slurp;

namespace {

// A results document using every field of the contract.
nlohmann::json good_document() {
  Results r;
  r.started_at = "2024-01-01T00:00:00Z";
  r.finished_at = "2024-01-01T00:01:00Z";
  r.command = "detaudit probe";
  r.plan = {{"suite", "quick"},
            {"targets", {"cpu-ref"}},
            {"workloads", {"reduce?op=sum&n=100"}},
            {"repeats", 2},
            {"timeout_s", 60.0},
            {"design", {{"model", "autoencoder"}, {"seeds", 3}, {"targets", {"cpu"}}, {"data_seed", 1}}}};
  r.machine = {{"hostname", "h"},
               {"cores", 2},
               {"cpu_features", {"avx2"}},
               {"caches", {{{"level", 1}, {"size_bytes", 32768}, {"line_bytes", 64}, {"count", 2}}}},
               {"gpus", {{{"index", 0}, {"name", "H200"}, {"memory_bytes", 1ull << 37}, {"ecc", true}}}},
               {"libraries", {{"openblas", "0.3"}, {"cuda_built", false}, {"cuda_runtime", 13000}}},
               {"cuda", "available"}};
  Observation o;
  o.workload = "reduce?op=sum&n=100";
  o.target = "cpu-ref";
  o.repeats = 2;
  o.fingerprints = {std::string(32, 'a'), std::string(32, 'b')};
  o.distinct = 2;
  o.oracle = OracleDistance{};
  o.oracle->max_ulp = kUlpInfinite;
  o.oracle->max_rel_err = INFINITY;
  o.oracle->mismatched = 3;
  o.oracle->err_ratio = INFINITY;
  o.oracle->agree_bits = 0;
  o.oracle->bound_k = 100;
  o.oracle->ratio_hist.assign(kRatioBuckets, 0);
  o.oracle->ratio_hist[0] = 97, o.oracle->ratio_hist[14] = 3;
  o.verdict = Verdict::kFail;
  o.verdict_reason = "NaN or infinity where the oracle has a number (or the reverse)";
  o.seconds = {0.5, 0.25};
  o.details["isa"] = "avx2";
  KernelRecord k;
  k.name = "k";
  o.kernels = {std::vector<KernelRecord>{k}, std::vector<KernelRecord>{}};
  o.batch = BatchInvariance{4, 1};
  r.observations = {o};
  TrainingRun t;
  t.key = "a|cpu?threads=2|1001|0";
  t.model = "autoencoder", t.design = "sony2021", t.condition = "a";
  t.random_init = t.nondeterministic = true;
  t.target = "cpu?order=atomic&threads=2", t.base_target = "cpu?threads=2";
  t.seed = 1001, t.data_seed = 1, t.replicate = 0, t.batches = 4, t.window = 2;
  t.machine_id = machine_id_of(r.machine);  // the session that wrote the machine block ran it
  t.status = ObsStatus::kOk;
  t.final_loss = 0.25;
  t.curve = {1.0, 0.5, 0.25, 0.25};
  t.weights_fingerprint = t.initial_weights_fingerprint = std::string(32, 'e');
  const float curve[] = {1.0f, 0.5f, 0.25f, 0.25f};
  t.curve_fingerprint = fingerprint_bytes(curve, sizeof curve).hex();
  t.seconds = 0.5, t.steps_per_second = 8;
  t.phases = CurvePhases{"biphasic", 2, 3.0, false, std::nullopt};
  TrainingRun crashed = t;
  crashed.key = "a|cpu?threads=2|1001|1";
  crashed.replicate = 1;
  crashed.status = ObsStatus::kCrashed;
  crashed.reason = "SIGSEGV (Segmentation fault)";
  crashed.signal = "SIGSEGV";
  crashed.batches_done = 1;
  r.training = {t, crashed};
  r.analysis = {{"table", nlohmann::json::array()}};
  return to_json(r);
}

struct Corruption {
  std::string pointer;  // JSON pointer of the field; "" removes nothing
  nlohmann::json value;
  bool erase;
  std::string message;  // the start of what load_results says after "<path>: "
};

std::vector<Corruption> corruptions() {
  using J = nlohmann::json;
  return {
      {"/plan", 5, false, "plan must be an object (got number)"},
      {"/plan/repeats", "2", false, "plan.repeats must be an integer"},
      {"/plan/suite", J::array(), false, "plan.suite must be a string"},
      {"/plan/targets/0", 1, false, "plan.targets[0] must be a string"},
      {"/plan/design/seeds", "3", false, "plan.design.seeds must be an integer"},
      {"/schema", 1, false, "not a detaudit results file"},
      {"/machine", "host", false, "machine must be an object (got string)"},
      {"/machine/cores", "2", false, "machine.cores must be an integer"},
      {"/machine/hostname", "v\x1b[31m", false, "machine.hostname holds byte 0x1b (a control character)"},
      {"/machine/hostname", std::string("v\0m", 3), false, "machine.hostname holds byte 0x00 (a control character)"},
      {"/machine/hostname", "vm\u0085", false, "machine.hostname holds byte 0xc2 (beyond ASCII)"},
      {"/machine/hostname", "vm\u2028x", false, "machine.hostname holds byte 0xe2 (beyond ASCII)"},
      {"/machine/cpu_model", "Intel\x1b[31m", false, "machine.cpu_model holds byte 0x1b (a control character)"},
      {"/machine/caches/0/level", "1", false, "machine.caches[0].level must be an integer"},
      {"/machine/gpus/0/name", 5, false, "machine.gpus[0].name must be a string"},
      {"/machine/gpus", J::object(), false, "machine.gpus must be an array"},
      {"/machine/libraries/openblas", J::array(), false, "machine.libraries.openblas must be a string"},
      {"/started_at", 5, false, "started_at must be a string"},
      {"/training", J::object(), false, "training must be an array (got object)"},
      {"/training/0", 5, false, "training[0] must be an object"},
      {"/training/0/final_loss", "x", false, "training[0].final_loss must be a number or null"},
      {"/training/0/curve/2", "x", false, "training[0].curve[2] must be a number or null"},
      {"/training/0/curve", "x", false, "training[0].curve must be an array"},
      {"/training/0/seed", -1, false, "training[0].seed must be a non-negative integer (got -1)"},
      {"/training/0/condition", 3, false, "training[0].condition must be a string"},
      {"/training/0/batches_done", "3", false, "training[0].batches_done must be"},
      {"/training/0/signal", 11, false, "training[0].signal must be a string"},
      {"/training/0/timeout_s", "5", false, "training[0].timeout_s must be a number"},
      {"/training/0/curve", nullptr, true, "training[0].curve is missing (the run's status is \"ok\")"},
      {"/training/0/condition", "f", false, "training[0].condition must be one of a, b, c, d, e (got \"f\")"},
      {"/training/0/condition", "e", false, "training[0].nudge is missing (condition e nudges one weight)"},
      {"/training/0/frames_png", "not base64!", false, "training[0].frames_png is not base64"},
      {"/training/0/prediction", J{{"sequences", 4}, {"mse", -1.0}, {"copy_last_mse", 0.1}}, false,
       "training[0].prediction: a mean squared error is negative"},
      {"/training/0/nudge", J{{"index", 0}, {"parameter", 5}, {"tensor", "w"}, {"from", 1.0}}, false,
       "training[0].nudge.to is missing"},
      {"/training/0/nudge", J{{"index", 0}, {"parameter", 5}, {"tensor", "w"}, {"from", 1.0}, {"to", 1.0}}, false,
       "training[0].nudge.to equals from: the weight was not moved"},
      {"/training/0/noise", J{{"every", 1}, {"b_small", 2}, {"b_big", 2}, {"points", J::array()}}, false,
       "training[0].noise needs every >= 1 and 1 <= b_small < b_big (got 1, 2, 2)"},
      {"/training/0/noise",
       J{{"every", 1}, {"b_small", 2}, {"b_big", 4}, {"points", J::array({J{{"step", 1}, {"big_sq", 1.0}, {"small_sq", -1.0}}})}},
       false, "training[0].noise.points[0]: a squared norm is negative"},
      {"/training/0/noise",
       J{{"every", 1}, {"b_small", 2}, {"b_big", 4}, {"points", J::array({J{{"step", 1}, {"big_sq", 1.0}, {"small_sq", 1.0}, {"hw", 0}}})}},
       false, "training[0].noise.points[0].hw is not a field of a noise point"},
      {"/training/0/status", "fine", false, "training[0].status must be one of ok, crashed"},
      {"/training/0/init", "zero", false, "training[0].init must be one of random, fixed"},
      {"/training/0/determinism", "on", false, "training[0].determinism and nondeterminism are both \"on\""},
      {"/training/0/colour", "red", false, "training[0].colour is not a field of a training run"},
      {"/training/0/phases/label", 3, false, "training[0].phases.label must be a string"},
      {"/training/0/phases/escape_step", "x", false, "training[0].phases.escape_step must be a number or null"},
      {"/plan/sources", 3, false, "plan.sources must be an array"},
      {"/plan/sources", J::array({J::object()}), false, "plan.sources[0].label is missing"},
      {"/plan/sources", J::array({{{"label", "a"}, {"machine", {{"cores", "x"}}}}}), false,
       "plan.sources[0].machine.cores must be"},
      {"/analysis", J::array(), false, "analysis must be an object"},
      {"/oracle_failures", J::object({{"w", 5}}), false, "oracle_failures.w must be a string"},
      {"/observations", J::object(), false, "observations must be an array"},
      {"/observations", nullptr, true, "observations is missing"},
      {"/observations/0", 3, false, "observations[0] must be an object (got number)"},
      {"/observations/0/verdict", "MAYBE", false,
       "observations[0].verdict must be PASS, FAIL, EXPECTED, WARN or SKIP (got \"MAYBE\")"},
      {"/observations/0/verdict", "pass", false, "observations[0].verdict must be PASS, FAIL"},
      {"/observations/0/repeats", "2", false, "observations[0].repeats must be an integer"},
      {"/observations/0/repeats", -2, false, "observations[0].repeats must be an integer"},
      {"/observations/0/distinct", 1.5, false, "observations[0].distinct must be an integer"},
      {"/observations/0/workload", nullptr, true, "observations[0].workload is missing"},
      {"/observations/0/status", "exploded", false, "observations[0].status must be one of"},
      {"/observations/0/fingerprints/1", 7, false, "observations[0].fingerprints[1] must be a string (got number)"},
      {"/observations/0/fingerprints/1", "abc", false, "observations[0].fingerprints[1] must be 32 hex digits"},
      {"/observations/0/fingerprints", "x", false, "observations[0].fingerprints must be an array"},
      {"/observations/0/seconds", "0.5", false, "observations[0].seconds must be an array (got string)"},
      {"/observations/0/seconds/1", "x", false, "observations[0].seconds[1] must be a number"},
      {"/observations/0/details/isa", 5, false, "observations[0].details.isa must be a string"},
      {"/observations/0/oracle", 5, false, "observations[0].oracle must be an object"},
      {"/observations/0/oracle/max_ulp", -1, false, "observations[0].oracle.max_ulp must be a non-negative integer or \"inf\""},
      {"/observations/0/oracle/max_rel_err", "big", false, "observations[0].oracle.max_rel_err must be a number or \"inf\""},
      {"/observations/0/oracle/mismatched", nullptr, true, "observations[0].oracle.mismatched is missing"},
      {"/observations/0/oracle/err_ratio", "big", false,
       "observations[0].oracle.err_ratio must be a non-negative number, -1 or \"inf\" (got string)"},
      {"/observations/0/oracle/err_ratio", -0.5, false,
       "observations[0].oracle.err_ratio must be a non-negative number, -1 or \"inf\" (got -0.5)"},
      {"/observations/0/oracle/err_ratio", J::array(), false, "observations[0].oracle.err_ratio must be"},
      {"/observations/0/oracle/agree_bits", "24", false, "observations[0].oracle.agree_bits must be a number from 0 to 53"},
      {"/observations/0/oracle/agree_bits", 60, false, "observations[0].oracle.agree_bits must be a number from 0 to 53"},
      {"/observations/0/oracle/bound_k", -3, false, "observations[0].oracle.bound_k must be a non-negative integer"},
      {"/observations/0/oracle/ratio_hist", 5, false, "observations[0].oracle.ratio_hist must be an array"},
      {"/observations/0/oracle/ratio_hist/3", 1.5, false, "observations[0].oracle.ratio_hist[3] must be a non-negative integer"},
      {"/observations/0/oracle/ratio_hist", J::array({1, 2}), false,
       "observations[0].oracle.ratio_hist must have 0 or 15 elements (got 2)"},
      {"/observations/0/verdict", 1, false, "observations[0].verdict must be a string"},
      {"/observations/0/verdict_reason", J::array(), false, "observations[0].verdict_reason must be a string"},
      {"/observations/0/kernels", J::object(), false, "observations[0].kernels must be an array"},
      {"/observations/0/kernels/0", 1, false, "observations[0].kernels[0] must be an array or null (got number)"},
      {"/observations/0/kernels/0/0/grid", J::array({1, 2}), false, "observations[0].kernels[0][0].grid must have 3 elements"},
      {"/observations/0/kernels/0/0/name", 1, false, "observations[0].kernels[0][0].name must be a string"},
      {"/observations/0/batch_invariance/rows_checked", "4", false,
       "observations[0].batch_invariance.rows_checked must be an integer"},
      {"/observations/0/details", J::object({{"a\nb", 1}}), false, "observations[0].details[\"a\\nb\"] must be a string"},
  };
}

std::string write_corrupt(const fs::path& dir, const Corruption& c) {
  nlohmann::json j = good_document();
  nlohmann::json::json_pointer p(c.pointer);
  if (c.erase)
    j[p.parent_pointer()].erase(p.back());
  else
    j[p] = c.value;
  std::string text = j.dump(1);
  std::ofstream(dir / "results.json", std::ios::binary) << text;
  return text;
}

bool any_temp_file(const fs::path& dir) {
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return true;
  return false;
}

int count_lines_with(const std::string& text, const std::string& what) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
  return n;
}

}  // namespace

TEST(ResultsFile, GoodDocumentLoadsAndRoundTrips) {
  fs::path dir = fresh_dir("results-good");
  fs::create_directories(dir);
  nlohmann::json j = good_document();
  j["training"][0]["curve"][1] = nullptr;  // how a NaN loss is written
  j["training"][0]["curve"][3] = nullptr;  // in the window: the final loss is NaN too
  j["training"][0]["curve_fingerprint"] = "";
  j["training"][0]["final_loss"] = nullptr;
  std::ofstream(dir / "results.json") << j.dump();
  Results r;
  std::string err;
  ASSERT_TRUE(succeeded(load_results((dir / "results.json").string(), &r), &err)) << err;
  EXPECT_TRUE(std::isnan(r.training[0].final_loss)) << "null reads back as NaN";
  EXPECT_TRUE(std::isnan(r.training[0].curve[1]));
  ASSERT_TRUE(r.training[0].phases);
  EXPECT_EQ(r.training[0].phases->escape_step, 3.0);
  EXPECT_EQ(r.training[1].status, ObsStatus::kCrashed);
  EXPECT_EQ(r.training[1].batches_done, 1u);
  EXPECT_EQ(to_json(r).dump(), j.dump()) << "NaN is written as null again";
  fs::remove_all(dir);
}

// Results of runs before the error bound: the oracle object has only max_ulp, max_rel_err and
// mismatched, and no verdict. They load with err_ratio -1 (no bound known) and no verdict.
TEST(ResultsFile, ResultsWithoutTheErrorBoundLoad) {
  fs::path dir = fresh_dir("results-old-oracle");
  fs::create_directories(dir);
  nlohmann::json j = good_document();
  auto& o = j["observations"][0];
  for (const char* k : {"err_ratio", "agree_bits", "bound_k", "ratio_hist"}) o["oracle"].erase(k);
  o.erase("verdict");
  o.erase("verdict_reason");
  o["oracle"]["max_ulp"] = 12;
  o["oracle"]["max_rel_err"] = 1e-6;
  std::ofstream(dir / "results.json") << j.dump();
  Results r;
  std::string err;
  ASSERT_TRUE(succeeded(load_results((dir / "results.json").string(), &r), &err)) << err;
  ASSERT_TRUE(r.observations[0].oracle.has_value());
  const OracleDistance& d = *r.observations[0].oracle;
  EXPECT_EQ(d.max_ulp, 12u);
  EXPECT_EQ(d.err_ratio, -1);
  EXPECT_EQ(d.agree_bits, -1);
  EXPECT_EQ(d.bound_k, 0);
  EXPECT_TRUE(d.ratio_hist.empty());
  EXPECT_FALSE(r.observations[0].verdict.has_value());
  // And the fields the bound brings round-trip: a finite ratio, the histogram, the verdict.
  Observation back;
  Observation with = r.observations[0];
  with.oracle->err_ratio = 0.125;
  with.oracle->agree_bits = 21.5;
  with.oracle->bound_k = 515;
  with.oracle->ratio_hist.assign(kRatioBuckets, 2);
  with.verdict = Verdict::kPass;
  ASSERT_TRUE(succeeded(from_json(to_json(with), &back), &err)) << err;
  EXPECT_EQ(back.oracle->err_ratio, 0.125);
  EXPECT_EQ(back.oracle->agree_bits, 21.5);
  EXPECT_EQ(back.oracle->bound_k, 515);
  EXPECT_EQ(back.oracle->ratio_hist, with.oracle->ratio_hist);
  EXPECT_EQ(verdict_text(back.verdict), "PASS");
  EXPECT_EQ(to_json(back).dump(), to_json(with).dump());
  fs::remove_all(dir);
}

TEST(ResultsFile, EachCorruptFieldIsNamedOnOneLine) {
  fs::path dir = fresh_dir("results-corrupt");
  fs::create_directories(dir);
  for (auto& c : corruptions()) {
    std::string text = write_corrupt(dir, c);
    Results r;
    std::string err;
    bool ok = true;
    EXPECT_NO_THROW(ok = succeeded(load_results((dir / "results.json").string(), &r), &err)) << c.pointer;
    EXPECT_FALSE(ok) << c.pointer;
    std::string want = (dir / "results.json").string() + ": " + c.message;
    EXPECT_EQ(err.substr(0, want.size()), want) << c.pointer;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_EQ(slurp(dir / "results.json"), text) << "the file is left as it was";
  }
  fs::remove_all(dir);
}

// Through the CLI: `report` and a resuming `probe` stop with exit code 2 and one line, and write nothing.
TEST(ResultsFile, CorruptFieldStopsReportAndProbeAndLosesNothing) {
  fs::path dir = fresh_dir("results-cli");
  const std::set<std::string> cases = {"plan must be an object (got number)",
                                       "plan.repeats must be an integer",
                                       "machine must be an object (got string)",
                                       "training must be an array (got object)",
                                       "training[0].curve[2] must be a number or null",
                                       "observations[0].repeats must be an integer",
                                       "observations[0].fingerprints[1] must be a string (got number)",
                                       "observations[0].seconds must be an array (got string)"};
  size_t ran = 0;
  for (auto& c : corruptions()) {
    if (!cases.count(c.message)) continue;
    ++ran;
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::string text = write_corrupt(dir, c);
    CliRun rep = run_cli("report " + dir.string());
    EXPECT_EQ(rep.code, 2) << c.pointer << ": " << rep.err;
    EXPECT_EQ(std::count(rep.err.begin(), rep.err.end(), '\n'), 1) << rep.err;
    EXPECT_NE(rep.err.find(c.message), std::string::npos) << rep.err;
    EXPECT_FALSE(fs::exists(dir / "report.md"));
    CliRun probe = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=100' --repeats 1 --out " + dir.string());
    EXPECT_EQ(probe.code, 2) << c.pointer << ": " << probe.err;
    EXPECT_EQ(count_lines_with(probe.err, "error"), 1) << probe.err;
    EXPECT_NE(probe.err.find(c.message), std::string::npos) << probe.err;
    EXPECT_EQ(slurp(dir / "results.json"), text) << c.pointer << ": the file is left as it was";
    EXPECT_FALSE(any_temp_file(dir));
  }
  EXPECT_EQ(ran, 9u) << "every case above (one message appears twice)";
  fs::remove_all(dir);
}

// Another writer's temporary file (a second process on the same --out) is neither truncated nor
// renamed away: every writer has its own.
TEST(ResultsFile, WritersDoNotShareTemporaryFiles) {
  fs::path dir = fresh_dir("results-tmp");
  fs::create_directories(dir);
  std::string path = (dir / "results.json").string();
  std::ofstream(path + ".tmp") << "another writer's half-written file";
  std::string err;
  ASSERT_TRUE(succeeded(write_file_atomic(path, "mine"), &err)) << err;
  EXPECT_EQ(slurp(path), "mine");
  EXPECT_EQ(slurp(path + ".tmp"), "another writer's half-written file");
  fs::remove(path + ".tmp");
  EXPECT_FALSE(any_temp_file(dir));
  fs::remove_all(dir);
}

// A destination that is a directory is refused before anything is written (the rename over it failed
// only after the temporary file was written), and no temporary file is left.
TEST(ResultsFile, FailedRenameLeavesNoTemporaryFile) {
  fs::path dir = fresh_dir("results-rename");
  fs::create_directories(dir / "results.json" / "inside");
  std::string err;
  EXPECT_FALSE(succeeded(write_file_atomic((dir / "results.json").string(), "x"), &err));
  EXPECT_NE(err.find("is a directory; detaudit replaces only regular files it wrote"), std::string::npos) << err;
  EXPECT_FALSE(any_temp_file(dir));
  EXPECT_TRUE(fs::is_directory(dir / "results.json" / "inside"));
  fs::remove_all(dir);
}

// A full disk, made without root: a child process whose file size limit is 64 KiB writes a large
// document over a good results.json. The write fails with a message, the old file is intact, and no
// temporary file is left.
TEST(ResultsFile, FullDiskKeepsTheOldFileAndLeavesNoTemporaryFile) {
  fs::path dir = fresh_dir("results-full");
  fs::create_directories(dir);
  std::string path = (dir / "results.json").string();
  Results small;
  small.observations.resize(3);
  std::string err;
  ASSERT_TRUE(succeeded(save_results(path, small), &err)) << err;
  std::string before = slurp(path);
  Results big;
  big.observations.assign(5000, small.observations[0]);
  for (auto& o : big.observations) o.reason = std::string(100, 'r');

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of killing the process
    rlimit lim{64 * 1024, 64 * 1024};
    setrlimit(RLIMIT_FSIZE, &lim);
    std::string e;
    bool ok = succeeded(save_results(path, big), &e);
    std::string msg = (ok ? "ok " : "failed ") + e;
    ssize_t w = write(fds[1], msg.data(), msg.size());
    _exit(w < 0 ? 3 : 0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(msg.rfind("failed " + path + ": write failed: ", 0), 0u) << msg;
  EXPECT_EQ(slurp(path), before) << "the old results are intact";
  EXPECT_FALSE(any_temp_file(dir));
  fs::remove_all(dir);
}
