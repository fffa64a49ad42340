// gates/qualify and `detaudit qualify`: levels, the table and its exit code, the
// JSON summary, targets this machine cannot run, crashes, the baseline, timing outliers, training.
// Every run of the binary records into a temporary history (--history) or none (--no-history).
#include <gtest/gtest.h>

#include "tests/training_helpers.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "store/history.hpp"
#include "gates/qualify.hpp"
#include "probes/env.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "contract/results.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;
using namespace detaudit::cli_test;
namespace fs = std::filesystem;

namespace {

// A few CPU targets: a level-1 run of them takes a few seconds on 2 cores.
const char* kCpuTargets = "cpu-ref,cpu?order=sequential&threads=2,cpu?order=atomic&threads=2";

using test::canon_target;

std::vector<std::string> split(const std::string& csv) {
  std::vector<std::string> v;
  std::stringstream ss(csv);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(x);
  return v;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> v;
  std::stringstream ss(text);
  for (std::string x; std::getline(ss, x);) v.push_back(x);
  return v;
}

size_t count_lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// The table row of a check: its name, then two or more spaces, then the verdict. "" when absent.
std::string row(const std::string& table, const std::string& name) {
  for (auto& l : lines_of(table))
    if (l.rfind(name + "  ", 0) == 0) return l;
  return "";
}
// The verdict column of a row ("PASS", ...).
std::string verdict_of(const std::string& row_text, const std::string& name) {
  if (row_text.size() <= name.size()) return "";
  std::stringstream ss(row_text.substr(name.size()));
  std::string v;
  ss >> v;
  return v;
}

bool has_gpu() {
  nlohmann::json m = machine_fingerprint();
  return m.contains("gpus") && m["gpus"].is_array() && !m["gpus"].empty();
}

struct Tmp {
  fs::path root;
  explicit Tmp(const std::string& name) : root(fresh_dir("qualify-" + name)) { fs::create_directories(root); }
  ~Tmp() { fs::remove_all(root); }
  std::string operator/(const std::string& p) const { return (root / p).string(); }
};

// The arguments of a qualify run into `out` with a history of its own.
std::string qualify_args(const std::string& targets, const std::string& out, const std::string& history) {
  std::string a = "qualify --out " + out + " --history " + history;
  if (!targets.empty()) a += " --targets '" + targets + "'";
  return a;
}

// ---- pure parts -------------------------------------------------------------------------------------

Observation timed(const std::string& w, const std::string& t, std::vector<double> seconds) {
  Observation o = test::ran(w, t, std::vector<std::string>(seconds.size(), test::fingerprint('a')));
  o.seconds = std::move(seconds);
  return o;
}

QualifyCheck timing_of(double now, double ref) {
  Results r;
  r.observations.push_back(timed("matmul", "cpu", {now, now, now}));
  return timing_check(r, {{{"matmul", "cpu"}, ref}}, "the baseline");
}

TrainingRun train_run(const std::string& cond, const std::string& target, int seed, std::vector<double> curve,
                         double final_loss, const std::string& weights = std::string(32, 'e')) {
  return training_run({{"condition", cond}, {"target", target},        {"seed", seed}, {"replicate", 0},
          {"status", "ok"},    {"final_loss", final_loss}, {"curve", curve},
          {"weights_fingerprint", weights}});
}

const QualifyCheck* find_check(const std::vector<QualifyCheck>& cs, const std::string& name) {
  for (auto& c : cs)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace

// 1. Level 1 on this machine with a few CPU targets: a row per target, QUALIFIED, exit 0, the files.
TEST(Qualify, LevelOneQualifiesCpuTargets) {
  Tmp d("level1");
  std::string out = d / "q", history = d / "history.db";
  auto res = run_cli(qualify_args(kCpuTargets, out, history));
  ASSERT_EQ(res.code, 0) << res.out << res.err;
  for (auto& t : split(kCpuTargets)) {
    std::string name = "probe " + canon_target(t);
    std::string r = row(res.out, name);
    ASSERT_FALSE(r.empty()) << "no row '" << name << "' in:\n" << res.out;
    std::string v = verdict_of(r, name);
    EXPECT_TRUE(v == "PASS" || v == "WARN") << r;
  }
  EXPECT_NE(res.out.find(": QUALIFIED"), std::string::npos) << res.out;
  EXPECT_EQ(res.out.find("NOT QUALIFIED"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("results: " + out), std::string::npos) << res.out;

  // qualify.json: the summary, one check per target, all required, then the race control (not required).
  ASSERT_TRUE(fs::exists(out + "/qualify.json"));
  auto j = nlohmann::json::parse(slurp(out + "/qualify.json"));
  EXPECT_EQ(j["schema"], kQualifySchema);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["qualified"], true);
  EXPECT_EQ(j["level"], 1);
  ASSERT_EQ(j["checks"].size(), 4u) << j.dump(1);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(j["checks"][i]["required"].get<bool>()) << j["checks"][i];
  EXPECT_EQ(j["checks"][3]["name"], "race control: cells permitted to vary");
  EXPECT_FALSE(j["checks"][3]["required"].get<bool>());
  EXPECT_EQ(j["probe_dir"], out + "/probe");

  // probe/results.json: judged cells of exactly these targets.
  Results r;
  std::string err;
  ASSERT_TRUE(succeeded(load_results(out + "/probe/results.json", &r), &err)) << err;
  ASSERT_FALSE(r.observations.empty());
  std::set<std::string> targets, expected;
  for (auto& t : split(kCpuTargets)) expected.insert(canon_target(t));
  for (auto& o : r.observations) {
    targets.insert(o.target);
    EXPECT_TRUE(o.verdict.has_value()) << o.workload << " on " << o.target;
  }
  EXPECT_EQ(targets, expected);

  // Recorded in the history given, as a qualify run.
  HistoryQueryResult q;
  ASSERT_TRUE(succeeded(query_history(history, {}, &q), &err)) << err;
  EXPECT_TRUE(q.exists);
  EXPECT_EQ(q.runs, 1);
  ASSERT_FALSE(q.cells.empty());
  EXPECT_EQ(q.cells.front().kind, "qualify");
}

// 2. --json: the machine-readable summary on stdout, and nothing else there.
TEST(Qualify, JsonSummaryOnStdout) {
  Tmp d("json");
  std::string out = d / "q";
  auto res = run_cli("qualify --json --no-history --out " + out + " --targets 'cpu?order=sequential&threads=1'");
  ASSERT_EQ(res.code, 0) << res.out << res.err;
  nlohmann::json top, j;
  ASSERT_NO_THROW(top = nlohmann::json::parse(res.out)) << res.out;
  // The command's contract, with qualify.json under "qualify".
  EXPECT_EQ(top["schema"], "detaudit-cli/1");
  EXPECT_EQ(top["command"], "qualify");
  EXPECT_EQ(top["verdict"], "PASS");
  EXPECT_EQ(top["counts"]["pass"], 1);
  j = top["qualify"];
  EXPECT_EQ(j["schema"], kQualifySchema);
  EXPECT_EQ(j["level"], 1);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["qualified"], true);
  ASSERT_TRUE(j["checks"].is_array());
  ASSERT_EQ(j["checks"].size(), 2u);  // the target, and the race control (SKIP: nothing there may vary)
  for (auto& c : j["checks"]) {
    for (const char* k : {"name", "verdict", "detail"}) EXPECT_TRUE(c[k].is_string()) << k << ": " << c;
    EXPECT_TRUE(c["required"].is_boolean()) << c;
  }
  EXPECT_EQ(j["checks"][0]["name"], "probe " + canon_target("cpu?order=sequential&threads=1"));
  EXPECT_EQ(j["checks"][0]["verdict"], "PASS") << j.dump(1);
  EXPECT_EQ(j["checks"][1]["verdict"], "SKIP") << j.dump(1);
  EXPECT_FALSE(j["checks"][1]["required"].get<bool>());
  // The same summary as the file.
  EXPECT_EQ(j, nlohmann::json::parse(slurp(out + "/qualify.json")));
}

// 3. A GPU target on a machine without a CUDA device: 2 before anything runs, one line naming the
// target and what is missing; never QUALIFIED.
TEST(Qualify, GpuTargetWithoutDeviceCouldNotRun) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a CUDA device: a GPU target can be qualified here";
  const std::string missing = machine_fingerprint().value("cuda", std::string());
  ASSERT_FALSE(missing.empty());
  Tmp d("gpu");
  for (const std::string targets : {"cuda:0", "cpu-ref,cudnn:0"}) {
    std::string out = d / "q";
    auto res = run_cli("qualify --no-history --out " + out + " --targets '" + targets + "'");
    EXPECT_EQ(res.code, 2) << targets << "\n" << res.out << res.err;
    EXPECT_EQ(count_lines(res.err), 1u) << res.err;
    std::string gpu = canon_target(split(targets).back());
    EXPECT_NE(res.err.find("cannot qualify " + gpu + " on this machine"), std::string::npos) << res.err;
    EXPECT_NE(res.err.find(missing), std::string::npos) << res.err;
    EXPECT_TRUE(test::only_error_verdict(res.out)) << res.out;
    EXPECT_EQ((res.out + res.err).find("QUALIFIED"), std::string::npos);
    EXPECT_FALSE(fs::exists(out)) << "ran something into " << out;
  }
}

// ... and a CPU target needing an instruction set this CPU lacks (OpenBLAS's Bulldozer kernels: FMA4
// and XOP, which no CPU since AMD's Excavator has) is refused the same way, never "QUALIFIED" on its
// expected SIGILLs.
TEST(Qualify, CpuTargetWithUnmetIsaCouldNotRun) {
  Spec t, w;
  std::string err;
  ASSERT_TRUE(succeeded(parse_target("openblas?core=Bulldozer&threads=1", &t), &err)) << err;
  ASSERT_TRUE(succeeded(parse_workload("matmul?m=8&n=8&k=8", &w), &err)) << err;
  auto unmet = promise_for(t, w, machine_fingerprint(), {}).unmet;
  if (unmet.empty()) GTEST_SKIP() << "this CPU has FMA4 and XOP: it runs OpenBLAS's Bulldozer kernels";
  Tmp d("isa");
  std::string out = d / "q";
  auto res = run_cli("qualify --no-history --out " + out + " --targets '" + t.str() + "'");
  EXPECT_EQ(res.code, 2) << res.out << res.err;
  EXPECT_EQ(count_lines(res.err), 1u) << res.err;
  EXPECT_NE(res.err.find("cannot qualify " + t.str() + " on this machine: it needs"), std::string::npos) << res.err;
  for (auto& u : unmet) EXPECT_NE(res.err.find(u), std::string::npos) << u << ": " << res.err;
  EXPECT_TRUE(test::only_error_verdict(res.out)) << res.out;
  EXPECT_FALSE(fs::exists(out));
}

// 4. A target that crashes (SIGSEGV in its worker) FAILs its row: exit 1, NOT QUALIFIED.
TEST(Qualify, CrashingTargetFails) {
  Tmp d("crash");
  std::string out = d / "q";
  auto res = run_cli(qualify_args("testing?fault=segv", out, d / "history.db"));
  EXPECT_EQ(res.code, 1) << res.out << res.err;
  std::string name = "probe " + canon_target("testing?fault=segv");
  std::string r = row(res.out, name);
  ASSERT_FALSE(r.empty()) << res.out;
  EXPECT_EQ(verdict_of(r, name), "FAIL") << r;
  EXPECT_NE(r.find("first FAIL: "), std::string::npos) << r;
  EXPECT_NE(r.find("SIGSEGV"), std::string::npos) << r;
  EXPECT_NE(res.out.find("NOT QUALIFIED (a check failed)"), std::string::npos) << res.out;
  auto j = nlohmann::json::parse(slurp(out + "/qualify.json"));
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["qualified"], false);
}

// 5. --baseline: the same bits pass; one flipped fingerprint in the baseline FAILs the baseline row,
// naming the cell; a missing or truncated baseline is "could not run" before anything runs.
TEST(Qualify, BaselineFlippedFingerprintFailsNamingTheCell) {
  Tmp d("baseline");
  const std::string targets = "cpu-ref,cpu?order=sequential&threads=2";
  auto first = run_cli(qualify_args(targets, d / "first", d / "history.db"));
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  std::string baseline = d / "baseline.json";
  auto saved = run_cli("baseline save " + d / "first/probe" + " --out " + baseline);
  ASSERT_EQ(saved.code, 0) << saved.err;

  auto same = run_cli(qualify_args(targets, d / "same", d / "history.db") + " --baseline " + baseline);
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  std::string same_row = row(same.out, "baseline " + baseline);
  EXPECT_EQ(verdict_of(same_row, "baseline " + baseline), "PASS") << same.out;

  // Flip the fingerprint of one deterministic cell of cpu-ref.
  auto j = nlohmann::json::parse(slurp(baseline));
  std::string workload, target, old_fp;
  const std::string flipped_fp(32, 'f');
  for (auto& e : j["entries"])
    if (e["target"] == canon_target("cpu-ref") && e["status"] == "ok" && e["distinct"] == 1 &&
        e["fingerprints"][0] != flipped_fp) {
      workload = e["workload"];
      target = e["target"];
      old_fp = e["fingerprints"][0];
      e["fingerprints"][0] = flipped_fp;
      break;
    }
  ASSERT_FALSE(workload.empty()) << j.dump(1);
  std::string flipped = d / "flipped.json";
  std::ofstream(flipped) << j.dump(2) << "\n";

  std::string out = d / "second";
  auto res = run_cli(qualify_args(targets, out, d / "history.db") + " --baseline " + flipped);
  EXPECT_EQ(res.code, 1) << res.out << res.err;
  std::string name = "baseline " + flipped;
  std::string r = row(res.out, name);
  ASSERT_FALSE(r.empty()) << res.out;
  EXPECT_EQ(verdict_of(r, name), "FAIL") << r;
  for (const std::string& s : {workload, target, flipped_fp, old_fp, std::string("1 FAIL")})
    EXPECT_NE(r.find(s), std::string::npos) << "missing '" << s << "' in " << r;
  EXPECT_NE(res.out.find("NOT QUALIFIED (a check failed)"), std::string::npos) << res.out;
  // The probe rows themselves still pass: only the baseline disagrees.
  for (auto& t : split(targets)) {
    std::string pn = "probe " + canon_target(t);
    EXPECT_EQ(verdict_of(row(res.out, pn), pn), "PASS") << res.out;
  }

  // A missing or truncated baseline: 2, one line naming the file, nothing run.
  std::string text = slurp(baseline), trunc = d / "trunc.json";
  std::ofstream(trunc) << text.substr(0, text.size() / 2);
  for (auto& [path, why] : std::vector<std::pair<std::string, std::string>>{{d / "missing.json", "cannot open"},
                                                                           {trunc, "not valid JSON"}}) {
    std::string o = d / "bad";
    auto bad = run_cli(qualify_args(targets, o, d / "history.db") + " --baseline " + path);
    EXPECT_EQ(bad.code, 2) << path << "\n" << bad.out << bad.err;
    EXPECT_EQ(count_lines(bad.err), 1u) << bad.err;
    EXPECT_NE(bad.err.find(path + ": "), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find(why), std::string::npos) << bad.err;
    EXPECT_TRUE(test::only_error_verdict(bad.out)) << bad.out;
    EXPECT_FALSE(fs::exists(o)) << "ran something into " << o;
  }
}

// 6. Timing outliers, without timing: the ratio of a cell's median to its reference.
TEST(Qualify, TimingOutliersAgainstReferences) {
  QualifyCheck c = timing_of(0.02, 0.01);  // 2x
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.detail;
  EXPECT_FALSE(c.required);
  EXPECT_EQ(c.name, "timing outliers");
  EXPECT_NE(c.detail.find("1 cells against the baseline: slowest 2.00x"), std::string::npos) << c.detail;
  c = timing_of(0.04, 0.01);  // 4x
  EXPECT_EQ(c.verdict, Verdict::kWarn) << c.detail;
  EXPECT_NE(c.detail.find("matmul on cpu"), std::string::npos) << c.detail;
  c = timing_of(0.11, 0.01);  // 11x
  EXPECT_EQ(c.verdict, Verdict::kFail) << c.detail;
  EXPECT_FALSE(c.required);
  EXPECT_EQ(timing_of(0.029, 0.01).verdict, Verdict::kPass);  // at most 3x: no outlier
  EXPECT_EQ(timing_of(0.099, 0.01).verdict, Verdict::kWarn);  // under 10x: a warning only

  // A reference under kMinTimedSeconds is timer noise: not judged, however large the ratio.
  c = timing_of(0.1, kMinTimedSeconds / 2);
  EXPECT_EQ(c.verdict, Verdict::kSkip) << c.detail;
  EXPECT_NE(c.detail.find("1 under 1 ms"), std::string::npos) << c.detail;
  // No reference: SKIP, and not required (the qualification does not depend on it).
  Results r;
  r.observations.push_back(timed("matmul", "cpu", {0.5}));
  c = timing_check(r, {}, "this machine's history");
  EXPECT_EQ(c.verdict, Verdict::kSkip);
  EXPECT_FALSE(c.required);
  EXPECT_NE(c.detail.find("1 cells without a reference in this machine's history"), std::string::npos) << c.detail;
  EXPECT_EQ(decide({c}), QualifyDecision::kQualified);

  // Judged cells beside unjudged ones; failed, skipped and untimed cells are left out.
  r.observations.clear();
  r.observations.push_back(timed("a", "cpu", {0.02}));    // 2x
  r.observations.push_back(timed("b", "cpu", {0.5}));     // reference too small
  r.observations.push_back(timed("c", "cpu", {0.5}));     // no reference
  Observation crashed = timed("d", "cpu", {5.0});
  crashed.status = ObsStatus::kCrashed;
  r.observations.push_back(crashed);
  r.observations.push_back(timed("e", "cpu", {}));
  c = timing_check(r, {{{"a", "cpu"}, 0.01}, {{"b", "cpu"}, 1e-4}, {{"d", "cpu"}, 0.01}, {{"e", "cpu"}, 0.01}},
                   "the baseline");
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.detail;
  EXPECT_NE(c.detail.find("not judged: 1 under 1 ms, 1 without a reference"), std::string::npos) << c.detail;

  // The cell's median is the median of its repeats (mean of the two middle ones for an even count, as
  // the baseline and the history compute theirs): 0.03 / 0.0125 = 2.4x, not the upper middle's 3.2x.
  r.observations = {timed("a", "cpu", {0.1, 0.01, 0.04, 0.02})};
  c = timing_check(r, {{{"a", "cpu"}, 0.0125}}, "the baseline");
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.detail;
  EXPECT_NE(c.detail.find("slowest 2.40x"), std::string::npos) << c.detail;
}

// The training checks and the exit code rules, on hand-made runs.
TEST(Qualify, TrainingChecksAndExitCode) {
  const std::string t = "cpu?order=blocked&threads=2";
  Results r;
  r.training.push_back(train_run("d", t, 1000, {1.0, 0.8, 0.4}, 0.4));
  r.training.push_back(train_run("d", t, 1001, {1.0, 0.7, 0.3}, 0.3));
  r.training.push_back(train_run("a", "cpu?order=atomic&threads=2", 1000, {2.0, 1.0, 0.5}, 0.5));
  auto cs = training_checks(r);
  for (auto& c : cs) {
    EXPECT_TRUE(c.required) << c.name;
    EXPECT_EQ(c.verdict, Verdict::kPass) << c.name << ": " << c.detail;
  }
  ASSERT_NE(find_check(cs, "training (d) bitwise identical on " + t), nullptr);
  ASSERT_NE(find_check(cs, "training: the model learns"), nullptr);
  ASSERT_NE(find_check(cs, "training runs finish"), nullptr);
  EXPECT_EQ(decide(cs), QualifyDecision::kQualified);

  // "Learns" compares the final loss with the first batch's loss (curve[0]), not with a later or
  // smaller point of the curve: 0.6 is more than half of 1.0.
  Results slow = r;
  slow.training[0] = train_run("d", t, 1000, {1.0, 0.5, 0.55}, 0.6);
  cs = training_checks(slow);
  auto* learns = find_check(cs, "training: the model learns");
  ASSERT_NE(learns, nullptr);
  EXPECT_EQ(learns->verdict, Verdict::kFail);
  EXPECT_NE(learns->detail.find("1 of 3 runs did not halve their loss"), std::string::npos) << learns->detail;
  EXPECT_NE(learns->detail.find("first batch loss 1, final loss 0.6"), std::string::npos) << learns->detail;
  EXPECT_EQ(decide(cs), QualifyDecision::kCheckFailed);
  // A diverged run (NaN final loss) did not learn.
  slow.training[0] = train_run("d", t, 1000, {1.0, 0.5, 0.4}, NAN);
  EXPECT_EQ(find_check(training_checks(slow), "training: the model learns")->verdict, Verdict::kFail);

  // (d) with two different final weights: FAIL.
  Results split_d = r;
  split_d.training[1].weights_fingerprint = std::string(32, '9');
  cs = training_checks(split_d);
  auto* d = find_check(cs, "training (d) bitwise identical on " + t);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->verdict, Verdict::kFail);
  EXPECT_NE(d->detail.find("2 runs, 2 distinct final weights"), std::string::npos) << d->detail;

  // A target whose condition (d) runs did not finish (skipped here) still has its row: a required SKIP.
  Results lone_d = r;
  lone_d.training[1] = training_run({{"condition", "d"}, {"target", t}, {"seed", 1001}, {"status", "skipped"}, {"reason", "no device"}});
  lone_d.training.push_back(training_run({{"condition", "d"}, {"target", "cuda:0?order=tree"}, {"seed", 1000}, {"status", "skipped"},
                             {"reason", "no device"}}));
  cs = training_checks(lone_d);
  for (const std::string& target : {t, std::string("cuda:0?order=tree")}) {
    auto* row_d = find_check(cs, "training (d) bitwise identical on " + target);
    ASSERT_NE(row_d, nullptr) << target;
    EXPECT_EQ(row_d->verdict, Verdict::kSkip) << target;
    EXPECT_TRUE(row_d->required);
  }
  EXPECT_NE(find_check(cs, "training (d) bitwise identical on " + t)->detail.find("only 1 condition (d) run finished"),
            std::string::npos);
  EXPECT_EQ(decide(cs), QualifyDecision::kRequiredNotRun);

  // A crashed run fails "training runs finish".
  Results crashed = r;
  crashed.training.push_back(training_run({{"condition", "b"}, {"target", t}, {"seed", 1000}, {"status", "crashed"}, {"reason", "SIGSEGV"}}));
  cs = training_checks(crashed);
  auto* fin = find_check(cs, "training runs finish");
  ASSERT_NE(fin, nullptr);
  EXPECT_EQ(fin->verdict, Verdict::kFail);
  EXPECT_NE(fin->detail.find("1 of 4 runs failed"), std::string::npos) << fin->detail;

  // No run could run here (every one skipped): a required check that could not run (2), not a failure.
  Results skipped;
  skipped.training.push_back(training_run({{"condition", "a"}, {"target", t}, {"seed", 1000}, {"status", "skipped"}, {"reason", "no device"}}));
  cs = training_checks(skipped);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].verdict, Verdict::kSkip);
  EXPECT_TRUE(cs[0].required);
  EXPECT_NE(cs[0].detail.find("no device"), std::string::npos) << cs[0].detail;
  EXPECT_EQ(decide(cs), QualifyDecision::kRequiredNotRun);
  // Every run failing is a failure.
  Results none_ok;
  none_ok.training.push_back(training_run({{"condition", "a"}, {"target", t}, {"seed", 1000}, {"status", "timeout"}, {"reason", "stalled"}}));
  cs = training_checks(none_ok);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].verdict, Verdict::kFail);

  // Exit code: a failure is 1 even beside a required SKIP; a required SKIP alone 2; WARN and a SKIP
  // that is not required leave 0.
  QualifyCheck pass{"a", Verdict::kPass, "", true}, warn{"b", Verdict::kWarn, "", true},
      fail{"c", Verdict::kFail, "", false}, req_skip{"d", Verdict::kSkip, "", true}, opt_skip{"e", Verdict::kSkip, "", false};
  EXPECT_EQ(decide({pass, warn, opt_skip}), QualifyDecision::kQualified);
  EXPECT_EQ(decide({pass, req_skip}), QualifyDecision::kRequiredNotRun);
  EXPECT_EQ(decide({pass, req_skip, fail}), QualifyDecision::kCheckFailed);
  EXPECT_EQ(decide({}), QualifyDecision::kQualified);
}

// 7. Level 2, once (the quick suite's targets, then the short training design): the training rows pass
// and the training results are written. On a machine without a GPU the suite's GPU targets are one
// SKIP row that is not required; targets with unmet requirements are SKIP rows saying what is missing.
TEST(Qualify, LevelTwoTrainsAndLearns) {
  Tmp d("level2");
  std::string out = d / "q";
  auto res = run_cli(qualify_args("", out, d / "history.db") + " --level 2");
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    // Without Fashion-MNIST the training regression could not run: required, so 2.
    EXPECT_EQ(res.code, 2) << res.out << res.err;
    EXPECT_EQ(verdict_of(row(res.out, "training regression"), "training regression"), "SKIP") << res.out;
    return;
  }
  ASSERT_EQ(res.code, 0) << res.out << res.err;
  EXPECT_NE(res.out.find("qualify level 2: "), std::string::npos) << res.out;
  EXPECT_NE(res.out.find(": QUALIFIED"), std::string::npos) << res.out;
  int d_rows = 0;
  for (auto& l : lines_of(res.out))
    if (l.rfind("training (d) bitwise identical on ", 0) == 0) {
      ++d_rows;
      EXPECT_NE(l.find("  PASS  "), std::string::npos) << l;
    }
  EXPECT_GE(d_rows, 1) << res.out;
  for (const std::string name : {"training: the model learns", "training runs finish"})
    EXPECT_EQ(verdict_of(row(res.out, name), name), "PASS") << res.out;
  // The history given is empty: nothing to compare timings with, which does not stop the qualification.
  EXPECT_EQ(verdict_of(row(res.out, "timing outliers"), "timing outliers"), "SKIP") << res.out;
  EXPECT_EQ(row(res.out, "timing outliers").find("(required)"), std::string::npos);
  // ... but it was read: the reference looked for was this machine's history, not none.
  EXPECT_NE(row(res.out, "timing outliers").find("without a reference in this machine's history"), std::string::npos)
      << res.out;
  Results train;
  std::string err;
  ASSERT_TRUE(succeeded(load_results(out + "/train/results.json", &train), &err)) << err;
  EXPECT_FALSE(train.training.empty());
  auto j = nlohmann::json::parse(slurp(out + "/qualify.json"));
  EXPECT_EQ(j["level"], 2);
  EXPECT_EQ(j["train_dir"], out + "/train");

  // The quick suite's targets: GPU ones left out without a device (one SKIP row, not required); CPU
  // ones whose requirements this machine does not meet are SKIP rows naming what is missing.
  const nlohmann::json machine = machine_fingerprint();
  std::string gpu_row = row(res.out, "GPU targets");
  if (has_gpu())
    EXPECT_TRUE(gpu_row.empty()) << gpu_row;
  else
    EXPECT_EQ(verdict_of(gpu_row, "GPU targets"), "SKIP") << res.out;
  Results probe;
  ASSERT_TRUE(succeeded(load_results(out + "/probe/results.json", &probe), &err)) << err;
  std::set<std::string> seen;
  for (auto& o : probe.observations) {
    if (!seen.insert(o.target).second) continue;
    Spec t, w;
    ASSERT_TRUE(succeeded(parse_target(o.target, &t), &err)) << err;
    ASSERT_TRUE(succeeded(parse_workload(o.workload, &w), &err)) << err;
    std::string name = "probe " + o.target, r = row(res.out, name);
    ASSERT_FALSE(r.empty()) << name;
    EXPECT_NE(verdict_of(r, name), "FAIL") << r;
    if (!promise_for(t, w, machine, {}).unmet.empty()) {
      EXPECT_EQ(verdict_of(r, name), "SKIP") << r;
      EXPECT_NE(r.find("cannot run here: needs "), std::string::npos) << r;
    }
  }
}

// 8. --level out of range: CLI11's range check, one line, exit 2.
TEST(Qualify, LevelOutOfRange) {
  Tmp d("level");
  for (const char* level : {"4", "0"}) {
    auto res = run_cli("qualify --no-history --out " + d / "q" + " --level " + level);
    EXPECT_EQ(res.code, 2) << res.out << res.err;
    EXPECT_EQ(count_lines(res.err), 1u) << res.err;
    EXPECT_NE(res.err.find("--level: Value " + std::string(level) + " not in range 1 to 3"), std::string::npos) << res.err;
    EXPECT_TRUE(res.out.empty()) << res.out;
    EXPECT_FALSE(fs::exists(d / "q"));
  }
}

// `report` of a qualify's folder (its runs' results are below it) says where they are, instead of "no results.json".
TEST(Qualify, ReportOfItsFolderNamesTheResultsBelowIt) {
  Tmp d("report-of-qualify");
  const std::string out = d / "q";
  ASSERT_EQ(run_cli(qualify_args("cpu-ref", out, d / "history.db")).code, 0);
  const auto r = run_cli("report " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(out + ": no results.json, but a qualify.json: its probe results are in " + out + "/probe"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(run_cli("report " + out + "/probe").code, 0);
}
