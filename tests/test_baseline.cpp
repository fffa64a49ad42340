// gates/baseline: the file `detaudit baseline save` writes, read back strictly; keys per entry.
#include <gtest/gtest.h>

#include "tests/training_helpers.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "gates/baseline.hpp"
#include "store/baseline_file.hpp"
#include "gates/verdict.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;
using namespace detaudit::cli_test;
namespace fs = std::filesystem;

namespace {

const std::string A(32, 'a'), B(32, 'b'), C(32, 'c');

std::string target(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_target(text, &s), &err)) << err;
  return s.str();
}
std::string workload(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_workload(text, &s), &err)) << err;
  return s.str();
}

nlohmann::json test_machine() { return test::machine_json(); }

Observation cell(const std::string& w, const std::string& t, std::vector<std::string> fps, const std::string& verdict = "PASS") {
  Observation o = test::ran(w, t, std::move(fps));
  o.verdict = test::verdict_named(verdict);
  o.verdict_reason = "set by the test";
  o.seconds.clear();
  for (size_t i = 0; i < o.fingerprints.size(); ++i) o.seconds.push_back(0.001 * double(i + 1));
  return o;
}

TrainingRun train_run(const std::string& cond, const std::string& t, uint64_t seed, int rep, double loss,
                         const std::string& status = "ok") {
  bool fixed = cond == "c" || cond == "d", det = cond == "b" || cond == "d";
  nlohmann::json j = {{"key", cond + "|" + t + "|" + std::to_string(seed) + "|" + std::to_string(rep)},
                      {"model", "autoencoder"},
                      {"design", "sony2021"},
                      {"condition", cond},
                      {"init", fixed ? "fixed" : "random"},
                      {"determinism", det ? "on" : "off"},
                      {"target", t},
                      {"status", status},
                      {"seed", seed},
                      {"replicate", rep}};
  if (status == "ok") {
    j["final_loss"] = loss;
    j["curve"] = {loss};
    // Each seed's own weights (runs of two seeds never end alike): seed 1000's all e.
    j["weights_fingerprint"] = std::string(32, std::isfinite(loss) ? "e0123456789abcd"[(seed - 1000) % 15] : 'f');
  } else {
    j["reason"] = "SIGSEGV (Segmentation fault)";
  }
  return training_run(j);
}

Results sample_results() {
  Results r;
  r.started_at = "2026-01-01T00:00:00Z";
  r.finished_at = "2026-01-01T00:01:00Z";
  r.command = "detaudit probe --suite quick";
  r.machine = test_machine();
  r.plan = nlohmann::json::object();  // probe cells and training runs in one file (a plan names one kind)
  const std::string w = workload("matmul?m=8&n=8&k=515");  // k >= 64: order=atomic can race
  r.observations.push_back(cell(w, target("cpu?order=sequential&threads=1"), {A, A, A}));
  r.observations.push_back(cell(w, target("openblas?core=Haswell&threads=1"), {B, B, B}));
  Observation atomic = cell(w, target("cpu?order=atomic&threads=2"), {A, C, A}, "EXPECTED");
  atomic.oracle = OracleDistance{};  // within its bound: the variation alone decides (EXPECTED, as promised)
  atomic.oracle->err_ratio = 0.1;
  atomic.oracle->mismatched = 3;  // a ratio above 0: some elements differ from the oracle
  atomic.oracle->max_ulp = 2;
  atomic.oracle->max_rel_err = 1e-7;
  atomic.oracle->bound_k = 515;
  atomic.oracle->ratio_hist.assign(kRatioBuckets, 0);
  atomic.oracle->ratio_hist[0] = 61, atomic.oracle->ratio_hist[11] = 3;  // the 8 x 8 output's elements (ratios to 2^-2)
  atomic.details.erase("oracle_problem");
  r.observations.push_back(atomic);
  Observation gpu = cell(w, target("cuda:0?order=tree"), {C, C});
  gpu.kernels = {std::vector<KernelRecord>{KernelRecord{"gemm_tree"}, KernelRecord{"reduce_tree"}, KernelRecord{"gemm_tree"}},
                 std::vector<KernelRecord>{KernelRecord{"gemm_tree"}, KernelRecord{"reduce_tree"}}};
  gpu.oracle = OracleDistance{};
  gpu.oracle->err_ratio = 0.25;
  gpu.oracle->mismatched = 3;  // a ratio above 0: some elements differ from the oracle
  gpu.oracle->max_ulp = 2;
  gpu.oracle->max_rel_err = 1e-7;
  gpu.oracle->bound_k = 515;
  gpu.oracle->ratio_hist = atomic.oracle->ratio_hist;
  gpu.details.erase("oracle_problem");
  r.observations.push_back(gpu);
  Observation crashed = cell(w, target("openblas?core=SkylakeX&threads=1"), {}, "EXPECTED");
  crashed.status = ObsStatus::kCrashed;
  crashed.reason = "SIGILL (Illegal instruction)";
  crashed.repeats = 3;
  r.observations.push_back(crashed);
  const std::string t = target("cpu?order=atomic&threads=2");
  for (auto [seed, rep, loss] : {std::tuple{1001, 0, 3.0}, {1000, 1, 2.0}, {1000, 0, 1.0}})
    r.training.push_back(train_run("a", t, seed, rep, loss));
  r.training.push_back(train_run("a", t, 1002, 0, 0, "crashed"));  // no final loss: not in the baseline
  return r;
}

void write(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

const BaselineCell* find_cell(const Baseline& b, const std::string& t) {
  for (auto& c : b.cells)
    if (c.target == t) return &c;
  return nullptr;
}

}  // namespace

TEST(Baseline, EntriesHoldFingerprintsVerdictsKernelsAndTimes) {
  Baseline b = make_baseline(sample_results(), "dirX", "2026-02-02T00:00:00Z");
  ASSERT_EQ(b.cells.size(), 5u);
  EXPECT_TRUE(std::is_sorted(b.cells.begin(), b.cells.end(), [](auto& x, auto& y) {
    return std::tie(x.workload, x.target) < std::tie(y.workload, y.target);
  }));
  auto* atomic = find_cell(b, target("cpu?order=atomic&threads=2"));
  ASSERT_NE(atomic, nullptr);
  EXPECT_EQ(atomic->fingerprints, (std::vector<std::string>{A, C}));  // the set, sorted
  EXPECT_EQ(atomic->distinct, 2);
  EXPECT_EQ(atomic->repeats, 3);
  EXPECT_EQ(verdict_text(atomic->verdict), "EXPECTED") << atomic->verdict_reason;
  EXPECT_EQ(atomic->promise, "nondeterministic");
  ASSERT_TRUE(atomic->median_seconds.has_value());
  EXPECT_DOUBLE_EQ(*atomic->median_seconds, 0.002);
  EXPECT_TRUE(atomic->kernels.empty());  // CPU targets have none
  ASSERT_TRUE(atomic->err_ratio.has_value());
  EXPECT_DOUBLE_EQ(*atomic->err_ratio, 0.1);
  auto* seq = find_cell(b, target("cpu?order=sequential&threads=1"));
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->promise, "deterministic");
  auto* gpu = find_cell(b, target("cuda:0?order=tree"));
  ASSERT_NE(gpu, nullptr);
  ASSERT_TRUE(gpu->err_ratio.has_value());
  EXPECT_DOUBLE_EQ(*gpu->err_ratio, 0.25);
  ASSERT_EQ(gpu->kernels.count(C), 1u);
  EXPECT_EQ(gpu->kernels.at(C), (std::vector<std::string>{"gemm_tree", "reduce_tree"}));  // launch order, once each
  auto* crashed = find_cell(b, target("openblas?core=SkylakeX&threads=1"));
  ASSERT_NE(crashed, nullptr);
  EXPECT_EQ(crashed->status, ObsStatus::kCrashed);
  EXPECT_EQ(crashed->reason, "SIGILL (Illegal instruction)");
  EXPECT_TRUE(crashed->fingerprints.empty());
}

TEST(Baseline, KeysPerBackendAndDevice) {
  Results r = sample_results();
  Baseline b = make_baseline(r, "dirX", "2026-02-02T00:00:00Z");
  auto* seq = find_cell(b, target("cpu?order=sequential&threads=1"));
  auto* ob = find_cell(b, target("openblas?core=Haswell&threads=1"));
  auto* sk = find_cell(b, target("openblas?core=SkylakeX&threads=1"));
  auto* gpu = find_cell(b, target("cuda:0?order=tree"));
  ASSERT_TRUE(seq && ob && sk && gpu);
  // Two openblas targets share one key; cpu (own kernels, no library) has another; the GPU its own.
  EXPECT_EQ(ob->key, sk->key);
  EXPECT_NE(seq->key, ob->key);
  EXPECT_EQ(b.keys.size(), 3u);
  const auto& cpu_key = b.keys.at(ob->key);
  EXPECT_EQ(ob->key.rfind("cpu-", 0), 0u);
  EXPECT_EQ(cpu_key["cpu_model"], "Test CPU 9000");
  EXPECT_EQ(cpu_key["cpu_features"], test_machine()["cpu_features"]);
  EXPECT_EQ(cpu_key["tool_version"], DETAUDIT_VERSION);
  // Exactly the libraries and build parts the registry says openblas's bits depend on.
  const BackendEntry* e = find_backend("openblas");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(cpu_key["libraries"].size(), e->libraries.size() + e->build.size());
  EXPECT_EQ(cpu_key["libraries"]["openblas"], "0.3.21");
  const BackendEntry* cpu = find_backend("cpu");
  EXPECT_EQ(b.keys.at(seq->key)["libraries"].size(), cpu->libraries.size() + cpu->build.size());
  const auto& gpu_key = b.keys.at(gpu->key);
  EXPECT_EQ(gpu->key.rfind("gpu-", 0), 0u);
  EXPECT_EQ(gpu_key["gpu_name"], "NVIDIA H200");
  EXPECT_EQ(gpu_key["compute_capability"], "9.0");
  EXPECT_EQ(gpu_key["sm_count"], 132);
  EXPECT_EQ(gpu_key["libraries"]["cuda_driver"], 12060);
  EXPECT_FALSE(gpu_key.contains("cpu_model"));
  // A library version moves the key of the backends that depend on it only.
  Results r2 = r;
  r2.machine["libraries"]["openblas"] = "0.3.26";
  EXPECT_NE(key_id(entry_key(r2, ob->target)), ob->key);
  EXPECT_EQ(key_id(entry_key(r2, seq->target)), seq->key);
  EXPECT_EQ(key_id(entry_key(r2, gpu->target)), gpu->key);
  EXPECT_EQ(key_difference(entry_key(r, ob->target), entry_key(r2, ob->target)), "libraries.openblas: 0.3.21 -> 0.3.26");
  // A GPU target on a machine without that device.
  r2.machine["gpus"] = nlohmann::json::array();
  EXPECT_EQ(entry_key(r2, gpu->target)["gpu_name"], "(none)");
}

TEST(Baseline, TrainingCellsSortedWithMeanAndSd) {
  Baseline b = make_baseline(sample_results(), "dirX", "2026-02-02T00:00:00Z");
  ASSERT_EQ(b.training.size(), 1u);
  const auto& t = b.training[0];
  EXPECT_EQ(t.condition, "a");
  EXPECT_EQ(t.init, "random");
  EXPECT_EQ(t.determinism, "off");
  ASSERT_EQ(t.runs.size(), 3u);  // the crashed run has no final loss
  EXPECT_EQ(t.runs[0].seed, 1000u);
  EXPECT_EQ(t.runs[0].replicate, 0);
  EXPECT_EQ(t.runs[0].final_loss, 1.0);
  EXPECT_EQ(t.runs[1].replicate, 1);
  EXPECT_EQ(t.runs[2].seed, 1001u);
  EXPECT_EQ(t.runs[2].final_loss, 3.0);
  EXPECT_EQ(t.runs[0].weights_fingerprint, std::string(32, 'e'));
  EXPECT_EQ(t.n, 3);
  EXPECT_DOUBLE_EQ(*t.mean, 2.0);
  EXPECT_DOUBLE_EQ(*t.sd, 1.0);
}

TEST(Baseline, RoundTripAndSameBytes) {
  auto dir = fresh_dir("baseline-roundtrip");
  fs::create_directories(dir);
  Results r = sample_results();
  r.training.push_back(train_run("d", target("cpu?order=blocked&threads=2"), 1000, 0, NAN));  // diverged: null
  Baseline b = make_baseline(r, "dirX", "2026-02-02T00:00:00Z");
  std::string err;
  ASSERT_TRUE(succeeded(save_baseline((dir / "one.json").string(), b), &err)) << err;
  ASSERT_TRUE(succeeded(save_baseline((dir / "two.json").string(), b), &err)) << err;
  std::string one = slurp(dir / "one.json");
  EXPECT_EQ(one, slurp(dir / "two.json"));
  EXPECT_NE(one.find("\"schema\": \"detaudit-baseline/1\""), std::string::npos);
  EXPECT_NE(one.find("\"final_loss\": null"), std::string::npos);
  // Loaded and saved again: the same bytes (every field read back, every number exactly).
  Baseline back;
  ASSERT_TRUE(succeeded(load_baseline((dir / "one.json").string(), &back), &err)) << err;
  EXPECT_EQ(baseline_text(back), one);
  EXPECT_EQ(back.cells.size(), b.cells.size());
  EXPECT_EQ(back.keys, b.keys);
  EXPECT_EQ(back.source_dir, "dirX");
  EXPECT_EQ(back.source_command, "detaudit probe --suite quick");
  EXPECT_TRUE(std::isnan(back.training.back().runs[0].final_loss));
  // The order of observations and runs in results.json does not change a byte.
  std::mt19937 rng(7);
  std::shuffle(r.observations.begin(), r.observations.end(), rng);
  std::shuffle(r.training.begin(), r.training.end(), rng);
  EXPECT_EQ(baseline_text(make_baseline(r, "dirX", "2026-02-02T00:00:00Z")), one);
  fs::remove_all(dir);
}

TEST(Baseline, UnjudgedResultsAreJudgedFirst) {
  Results r = sample_results();
  for (auto& o : r.observations) o.verdict.reset(), o.verdict_reason.clear();
  Baseline b = make_baseline(r, "dirX", "2026-02-02T00:00:00Z");
  for (auto& c : b.cells) {
    EXPECT_TRUE(c.verdict.has_value()) << c.target;
  }
}

TEST(Baseline, MalformedFilesNameTheFileAndTheField) {
  auto dir = fresh_dir("baseline-malformed");
  fs::create_directories(dir);
  std::string err;
  std::string good = baseline_text(make_baseline(sample_results(), "dirX", "2026-02-02T00:00:00Z"));
  nlohmann::json j = nlohmann::json::parse(good);
  struct Case {
    std::string name, text, expect;
  };
  auto edit = [&](auto f) {
    nlohmann::json c = j;
    f(c);
    return c.dump(2);
  };
  std::vector<Case> cases = {
      {"truncated", good.substr(0, good.size() / 2), "not valid JSON"},
      {"empty", "", "not valid JSON"},
      {"schema", edit([](nlohmann::json& c) { c["schema"] = "detaudit/1"; }), "detaudit-baseline/1"},
      {"noschema", edit([](nlohmann::json& c) { c.erase("schema"); }), "detaudit-baseline/1"},
      {"repeats", edit([](nlohmann::json& c) { c["entries"][1]["repeats"] = "3"; }), "entries[1].repeats must be"},
      {"fingerprint", edit([](nlohmann::json& c) { c["entries"][0]["fingerprints"][0] = "xyz"; }),
       "entries[0].fingerprints[0] must be 32 hex digits"},
      {"distinct", edit([](nlohmann::json& c) { c["entries"][0]["distinct"] = 7; }), "entries[0].distinct"},
      {"key", edit([](nlohmann::json& c) { c["entries"][2]["key"] = "cpu-000000000000"; }), "entries[2].key names no entry"},
      {"status", edit([](nlohmann::json& c) { c["entries"][0]["status"] = "fine"; }), "entries[0].status must be"},
      {"verdict", edit([](nlohmann::json& c) { c["entries"][0]["verdict"] = "GOOD"; }), "entries[0].verdict must be"},
      {"err_ratio", edit([](nlohmann::json& c) { c["entries"][0]["err_ratio"] = "0.5"; }), "entries[0].err_ratio must be a number"},
      {"kernels", edit([](nlohmann::json& c) { c["entries"][0]["kernels"] = {{A, {1}}}; }), "entries[0].kernels." + A + "[0] must be a string"},
      {"entries", edit([](nlohmann::json& c) { c["entries"] = nlohmann::json::object(); }), "entries must be an array"},
      {"keys", edit([](nlohmann::json& c) { c.erase("keys"); }), "keys is missing"},
      {"loss", edit([](nlohmann::json& c) { c["training"][0]["runs"][1]["final_loss"] = "1"; }),
       "training[0].runs[1].final_loss must be a number"},
      {"seed", edit([](nlohmann::json& c) { c["training"][0]["runs"][0]["seed"] = -1; }), "training[0].runs[0].seed must be"},
      {"n", edit([](nlohmann::json& c) { c["training"][0].erase("n"); }), "training[0].n is missing"},
  };
  for (auto& c : cases) {
    fs::path p = dir / (c.name + ".json");
    write(p, c.text);
    Baseline b;
    EXPECT_FALSE(succeeded(load_baseline(p.string(), &b), &err)) << c.name;
    EXPECT_EQ(err.rfind(p.string() + ": ", 0), 0u) << c.name << ": " << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.name << ": " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << c.name << ": " << err;
  }
  Baseline b;
  EXPECT_FALSE(succeeded(load_baseline((dir / "absent.json").string(), &b), &err));
  EXPECT_NE(err.find("absent.json: cannot open"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(Baseline, CliSaveWritesWhereItSays) {
  auto dir = fresh_dir("baseline-cli");
  fs::create_directories(dir);
  std::string err;
  ASSERT_TRUE(succeeded(save_results((dir / "results.json").string(), sample_results()), &err)) << err;
  auto r = run_cli("baseline save " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find((dir / "baseline.json").string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 cells, 1 training cells, 3 machine keys"), std::string::npos) << r.out;
  Baseline b;
  ASSERT_TRUE(succeeded(load_baseline((dir / "baseline.json").string(), &b), &err)) << err;
  EXPECT_EQ(b.cells.size(), 5u);
  EXPECT_EQ(b.source_dir, dir.string());
  auto other = dir / "elsewhere.json";
  r = run_cli("baseline save " + dir.string() + " --out " + other.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(other.string()), std::string::npos);
  EXPECT_TRUE(fs::exists(other));
  // Could not run: exit 2, one line naming what.
  r = run_cli("baseline save " + (dir / "nothing").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nothing: not a directory"), std::string::npos) << r.err;
  write(dir / "results.json", "{\"schema\": \"detaudit/1\", \"observ");
  r = run_cli("baseline save " + dir.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("results.json: not valid JSON"), std::string::npos) << r.err;
  r = run_cli("baseline");
  EXPECT_EQ(r.code, 2);
  fs::remove_all(dir);
}

TEST(Baseline, EntriesRecordTheAlgorithmThatRan) {
  auto dir = fresh_dir("baseline-algo");
  fs::create_directories(dir);
  Results r = sample_results();
  Observation cd = cell(workload("conv2d?n=2&c=8&h=8&w=8&k=8&r=3&s=3&pass=fwd"), target("cudnn:0"), {A, A});
  cd.details = {{"claimed_deterministic", "yes"}, {"algo_name", "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM"},
                {"algo_pinned", "auto"}};
  r.observations.push_back(cd);
  Baseline b = make_baseline(r, "dirX", "2026-02-02T00:00:00Z");
  auto* c = find_cell(b, cd.target);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->algo, "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM");
  EXPECT_TRUE(find_cell(b, target("cpu?order=sequential&threads=1"))->algo.empty());  // none reported: none stored
  std::string err;
  ASSERT_TRUE(succeeded(save_baseline((dir / "b.json").string(), b), &err)) << err;
  std::string text = slurp(dir / "b.json");
  auto j = nlohmann::json::parse(text);
  int with_algo = 0;
  for (auto& e : j["entries"]) with_algo += e.contains("algo");
  EXPECT_EQ(with_algo, 1);  // optional: only where the backend named its algorithm
  Baseline back;
  ASSERT_TRUE(succeeded(load_baseline((dir / "b.json").string(), &back), &err)) << err;
  EXPECT_EQ(find_cell(back, cd.target)->algo, "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM");
  EXPECT_EQ(baseline_text(back), text);
  // A file without the field (older baselines) loads; a wrong type is named.
  for (auto& e : j["entries"]) e.erase("algo");
  std::ofstream(dir / "old.json") << j.dump();
  ASSERT_TRUE(succeeded(load_baseline((dir / "old.json").string(), &back), &err)) << err;
  EXPECT_TRUE(find_cell(back, cd.target)->algo.empty());
  j["entries"][0]["algo"] = 3;
  std::ofstream(dir / "bad.json") << j.dump();
  EXPECT_FALSE(succeeded(load_baseline((dir / "bad.json").string(), &back), &err));
  EXPECT_NE(err.find("entries[0].algo"), std::string::npos) << err;
  fs::remove_all(dir);
}
