// Verdicts that fail closed: a command exits 0 only when something was judged and nothing FAILed. Each
// case here exited 0 (or loaded a file it should have refused) before: a probe where no cell ran, a
// check against a baseline of another kind of run or one sharing no cell, a compare of two training
// designs (which compared nothing), results whose counts or specs or training fields cannot be true.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contract/results.hpp"
#include "gates/baseline.hpp"
#include "store/baseline_file.hpp"
#include "gates/check.hpp"
#include "gates/compare.hpp"
#include "suites/train_measure.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;
using namespace detaudit::cli_test;
namespace fs = std::filesystem;

namespace {

// A directory of this test, removed at the end.
struct Dir {
  fs::path root;
  explicit Dir(const std::string& name) : root(fresh_dir(name)) { fs::create_directories(root); }
  ~Dir() { fs::remove_all(root); }
  std::string save(const std::string& name, const Results& r) const {
    fs::create_directories(root / name);
    EXPECT_TRUE(save_results((root / name / "results.json").string(), r).is_ok());
    return (root / name).string();
  }
  std::string path(const std::string& name) const { return (root / name).string(); }
};

const std::string kW = "reduce?op=sum&n=1000&dist=uniform&seed=1";

Results probe_results(const std::string& suite = "quick", const std::string& workload = kW) {
  Results r;
  r.plan = {{"suite", suite}, {"repeats", 2}};
  r.machine = test::machine_json();
  r.started_at = r.finished_at = "2026-12-04T00:00:00Z";
  Observation o = test::ran(workload, test::canon_target("cpu?order=sequential&threads=1"),
                            {test::fingerprint('a'), test::fingerprint('a')});
  o.verdict = Verdict::kPass;
  r.observations.push_back(o);
  return r;
}

// A sony2021 design of `model`: one target, two seeds, (a) twice per seed; every run finished. `d_weights`
// is the final weights' fingerprint digit of the (d) runs; `salt` moves the weights and losses of the
// runs with nondeterminism on ((a), (c)), as another run of the design would.
Results training_results(const std::string& model, char d_weights = 'd', int salt = 0) {
  Results r;
  const std::string atomic = test::canon_target("cpu?order=atomic&threads=2"),
                    blocked = test::canon_target("cpu?order=blocked&threads=2");
  nlohmann::json design = {{"model", model},       {"design", "sony2021"}, {"seeds", 2},       {"batches", 4},
                           {"window", 2},          {"replicates", 2},      {"batch_size", 64}, {"data_seed", 1},
                           {"init_seed_base", 1000}, {"targets", {"cpu?threads=2"}}};
  r.plan = {{"kind", "train"}, {"design", design}, {"runs", 14}, {"data_fingerprint", std::string(32, '0')}};
  r.machine = test::machine_json();
  r.started_at = r.finished_at = "2026-12-04T00:00:00Z";
  for (const char* c : {"a", "b", "c", "d", "e"})
    for (int s = 0; s < 2; ++s) {
      const bool random = c[0] == 'a' || c[0] == 'b', nondet = c[0] == 'a' || c[0] == 'c';
      for (int k = 0; k < (nondet ? 2 : 1); ++k) {  // (a) and (c) repeat, as the design's replicates say
        TrainingRun t;
        t.model = model;
        t.design = "sony2021";
        t.condition = c;
        t.data_seed = 1;  // the design's
        t.random_init = random;
        t.nondeterministic = nondet;
        t.target = nondet ? atomic : blocked;
        t.base_target = blocked;
        t.seed = random ? 1000 + s : 1000;
        t.replicate = random ? k : s * (nondet ? 2 : 1) + k;  // under fixed init: numbered on across seeds
        t.key = fmt::format("{}|{}|{}|{}", c, t.target, t.seed, t.replicate);
        t.batches = 4;
        t.window = 2;
        t.status = ObsStatus::kOk;
        t.final_loss = 0.25 + (nondet ? 0.001 * (s + k + salt) : 0.0);
        t.curve = {0.5, 0.4, t.final_loss, t.final_loss};  // its window of 2 averages to its final loss
        // (b)'s first seed starts from (d)'s fixed weights with nondeterminism off: it ends in (d)'s bits. Runs of
        // two seeds never end alike: (a)'s second seed and (b)'s end in weights of their own.
        const bool d_start = c[0] == 'd' || (c[0] == 'b' && s == 0);
        t.weights_fingerprint = test::fingerprint(d_start          ? d_weights
                                                  : c[0] == 'a'    ? char('0' + salt + (s == 0 ? k : 5 + k))
                                                  : nondet         ? char('0' + s + k + salt)
                                                  : c[0] == 'e'    ? 'e'
                                                                   : 'b');
        if (c[0] == 'e') {  // the nudge its worker makes (a made-up one is refused)
          WeightNudge n;
          EXPECT_TRUE(expected_nudge("autoencoder", "", 64, t.seed, uint64_t(s), &n));
          t.nudge = n;
        }
        r.training.push_back(t);
      }
    }
  return r;
}

bool says(const CliRun& r, const std::string& what) {
  return r.err.find(what) != std::string::npos || r.out.find(what) != std::string::npos;
}

}  // namespace

// A probe in which no cell ran (every target skipped) judged nothing: 2, not 0, with the reason; its
// results and reports are written all the same.
TEST(FailClosed, ProbeWhereNothingRanCouldNotRun) {
  Dir d("fail-closed-probe");
  CliRun r = run_cli("probe --targets cuda:7 --workloads 'reduce?op=sum&n=1000' --repeats 2 --no-history --out " +
                     d.path("p"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("nothing was judged: none of the 1 cells ran on this machine"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("verdict: ERROR  fail=0 warn=0 skip=1  report=" + d.path("p") + "/report.md  error: nothing "
                       "was judged"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(d.root / "p" / "results.json"));
  EXPECT_TRUE(fs::exists(d.root / "p" / "report.html"));
  // The same in JSON: the contract's fields, ERROR, the skip counted.
  CliRun j = run_cli("probe --targets cuda:7 --workloads 'reduce?op=sum&n=1000' --repeats 2 --no-history --fresh "
                     "--format json --out " +
                     d.path("p"));
  EXPECT_EQ(j.code, 2);
  auto js = nlohmann::json::parse(j.out);
  EXPECT_EQ(js["schema"], "detaudit-cli/1");
  EXPECT_EQ(js["command"], "probe");
  EXPECT_EQ(js["exit_code"], 2);
  EXPECT_EQ(js["verdict"], "ERROR");
  EXPECT_EQ(js["counts"]["skip"], 1);
  EXPECT_EQ(js["reports"]["md"], d.path("p") + "/report.md");
}

// check: a baseline of another kind of run (probe vs training, autoencoder vs PredNet, another suite), or
// one that shares no cell with the results, is "could not run", naming both.
TEST(FailClosed, CheckRefusesABaselineOfAnotherKind) {
  Dir d("fail-closed-check");
  const std::string probe = d.save("probe", probe_results()), ae = d.save("ae", training_results("autoencoder")),
                    pn = d.save("pn", training_results("prednet")), full = d.save("full", probe_results("full"));
  ASSERT_EQ(run_cli("baseline save " + ae).code, 0);
  ASSERT_EQ(run_cli("baseline save " + probe).code, 0);
  const std::string ae_base = ae + "/baseline.json", probe_base = probe + "/baseline.json";

  CliRun r = run_cli("check " + probe + " --baseline " + ae_base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "the baseline holds training autoencoder/sony2021, the results probe suite quick")) << r.err;
  EXPECT_TRUE(test::only_error_verdict(r.out)) << r.out;

  r = run_cli("check " + pn + " --baseline " + ae_base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "design.model is \"autoencoder\" vs \"prednet\"")) << r.err;

  r = run_cli("check " + ae + " --baseline " + probe_base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "kind is probe suite quick vs training autoencoder/sony2021")) << r.err;

  r = run_cli("check " + full + " --baseline " + probe_base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "suite is \"quick\" vs \"full\"")) << r.err;

  // A baseline of an older version has no plan: its kind comes from what it holds.
  auto old = nlohmann::json::parse(slurp(ae_base));
  old["source"].erase("plan");
  std::ofstream(d.root / "old.json") << old.dump();
  r = run_cli("check " + probe + " --baseline " + d.path("old.json") + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "the results hold probe cells, the baseline none")) << r.err;

  // The same kind, no cell in common: nothing was compared.
  const std::string other = d.save("other", probe_results("quick", "reduce?op=sum&n=2000&dist=uniform&seed=1"));
  r = run_cli("check " + other + " --baseline " + probe_base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "share no cell: nothing was compared")) << r.err;

  // And the check that can be made is made: this small design's (a) and (c) cannot be judged (exit 2,
  // saying so), and with --allow-unjudged the rest of it passes. (Another run of the design, an hour later: the run
  // the baseline was saved from would be compared with itself.)
  Results again = training_results("autoencoder");
  again.started_at = again.finished_at = "2026-12-04T01:00:00Z";
  const std::string ae2 = d.save("ae2", again);
  r = run_cli("check " + ae + " --baseline " + ae_base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "it is the run the baseline was saved from")) << r.err;
  r = run_cli("check " + ae2 + " --baseline " + ae_base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "training cell(s) of the baseline not judged")) << r.err;
  EXPECT_EQ(r.out.find("check passed"), std::string::npos) << "the text says what the exit code says: " << r.out;
  EXPECT_NE(r.out.find("(not passed)"), std::string::npos) << r.out;
  r = run_cli("check " + ae2 + " --baseline " + ae_base + " --no-history --allow-unjudged");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("check passed"), std::string::npos) << r.out;
}

// compare reads training runs: bit for bit where nondeterminism is off, by spread where it is on; two
// designs are refused naming the first field that differs.
// PredNet's held-out prediction is computed from the final weights, deterministically: within one file, runs that
// promise one outcome and end in the same weights predict alike (else they broke the promise); across two files, a
// run whose weights are the same but whose prediction is not is a changed run, never "same bits".
TEST(FailClosed, AHeldOutPredictionIsPartOfARunsBits) {
  Results a = training_results("prednet"), b = training_results("prednet", 'd', 3);
  for (Results* r : {&a, &b})
    for (TrainingRun& t : r->training) t.prediction = NextFrameCheck{40, 0.2, 0.3}, t.frames_png = "iVBORw0KGgo";
  for (const RunVerdict& v : judge_training_runs(a.training)) EXPECT_NE(v.verdict, Verdict::kFail) << v.reason;
  Comparison c = compare_results(a, b, "a", "b");
  EXPECT_EQ(c.training_changed, 0);
  // (d)'s second replicate predicted other frames from the same weights: (d)'s promise broke.
  Results edited = a;
  TrainingRun* second = nullptr;
  for (TrainingRun& t : edited.training)
    if (t.condition == "d" && t.replicate == 1) second = &t;
  ASSERT_NE(second, nullptr);
  second->prediction->mse = 0.1;
  const auto verdicts = judge_training_runs(edited.training);
  for (size_t i = 0; i < edited.training.size(); ++i)
    if (edited.training[i].condition == "d") {
      EXPECT_EQ(verdicts[i].verdict, Verdict::kFail);
      EXPECT_NE(verdicts[i].reason.find("noise measurements or held-out prediction"), std::string::npos) << verdicts[i].reason;
    }
  // Every run of b that starts from (d)'s weights predicting otherwise, alike: within b nothing contradicts itself,
  // but against a the same weights predict other frames.
  for (TrainingRun& t : b.training)
    if (t.weights_fingerprint == test::fingerprint('d')) t.prediction->mse = 0.001;
  for (const RunVerdict& v : judge_training_runs(b.training)) EXPECT_NE(v.verdict, Verdict::kFail) << v.reason;
  c = compare_results(a, b, "a", "b");
  EXPECT_EQ(c.training_changed, 2) << "(d), and (b), whose first seed starts from (d)'s weights";
  ASSERT_FALSE(c.training.empty());
  bool named = false;
  for (auto& t : c.training) named = named || t.first_difference.find("held-out prediction MSE") != std::string::npos;
  EXPECT_TRUE(named);
}

// Every run of r with the same one-point noise trace.
static void with_noise(Results* r) {
  for (TrainingRun& t : r->training) {
    NoiseTrace n;
    n.every = 1, n.b_big = 8, n.b_small = 2;
    n.points = {{1, 0.02, 0.05, 0.0}};
    t.noise = n;
  }
}

// A run's noise measurements are part of its outcome: two files whose deterministic runs end in the same weights and
// loss after other measured gradients (the same weights at the same step give the same gradient) are changed runs.
TEST(FailClosed, NoiseMeasurementsArePartOfARunsBitsInCompare) {
  Results a = training_results("autoencoder"), b = training_results("autoencoder", 'd', 3);
  for (Results* r : {&a, &b}) with_noise(r);
  EXPECT_EQ(compare_results(a, b, "a", "b").training_changed, 0);
  for (TrainingRun& t : b.training)
    if (t.weights_fingerprint == test::fingerprint('d')) t.noise->points[0].big_sq = 0.03;
  for (const RunVerdict& v : judge_training_runs(b.training)) EXPECT_NE(v.verdict, Verdict::kFail) << v.reason;
  const Comparison c = compare_results(a, b, "a", "b");
  EXPECT_EQ(c.training_changed, 2) << "(d), and (b), whose first seed starts from (d)'s weights";
  bool named = false;
  for (auto& t : c.training)
    named = named || t.first_difference.find("after another learning curve or other noise measurements") != std::string::npos;
  EXPECT_TRUE(named);
}

// Across files, check sees them too: a baseline keeps each run's whole outcome (its fingerprint: weights, final loss,
// learning curve, noise measurements, held-out prediction), so a run whose final loss and weights are its baseline
// run's after other measured gradients FAILs; a baseline of an older version, without it, judges the loss and weights.
TEST(FailClosed, ABaselineKeepsEachRunsWholeOutcomeForCheck) {
  Results a = training_results("autoencoder"), b = training_results("autoencoder", 'd', 3);
  for (Results* r : {&a, &b}) with_noise(r);
  const Baseline base = make_baseline(a, "a", "2026-12-05T00:00:00Z");
  for (auto& t : base.training)
    for (auto& run : t.runs) EXPECT_EQ(run.outcome.size(), 32u) << t.condition;
  auto bits_failures = [](const CheckReport& rep) {
    std::vector<std::string> out;
    for (auto& f : rep.findings)
      if (f.kind == FindingKind::kTrainingBits && f.verdict == Verdict::kFail) out.push_back(f.message);
    return out;
  };
  EXPECT_TRUE(bits_failures(check_against_baseline(base, b, "b", "base.json")).empty());
  for (TrainingRun& t : b.training)
    if (t.weights_fingerprint == test::fingerprint('d')) t.noise->points[0].big_sq = 0.03;
  const std::vector<std::string> moved = bits_failures(check_against_baseline(base, b, "b", "base.json"));
  ASSERT_FALSE(moved.empty());
  for (const std::string& m : moved)
    EXPECT_NE(m.find("the same final loss and weights, but another learning curve, noise measurement or held-out "
                     "prediction (outcome "),
              std::string::npos)
        << m;
  // A baseline written before it kept outcomes: the final loss and weights are all it holds, and they are the same.
  Baseline older = base;
  for (auto& t : older.training)
    for (auto& run : t.runs) run.outcome.clear();
  EXPECT_TRUE(bits_failures(check_against_baseline(older, b, "b", "base.json")).empty());
  // The file keeps it; one that is no fingerprint is refused, naming it.
  Dir d("fail-closed-outcome");
  const std::string path = d.path("base.json");
  ASSERT_TRUE(save_baseline(path, base).is_ok());
  Baseline loaded;
  const Status loaded_ok = load_baseline(path, &loaded);
  ASSERT_TRUE(loaded_ok.is_ok()) << loaded_ok.message();
  EXPECT_EQ(loaded.training.at(0).runs.at(0).outcome, base.training.at(0).runs.at(0).outcome);
  std::string text = baseline_text(base);
  const size_t at = text.find("\"outcome\": \"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at + 12, 32, "not a fingerprint");
  std::ofstream(path, std::ios::trunc) << text;
  const Status st = load_baseline(path, &loaded);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(".outcome"), std::string::npos) << st.message();
  // (d)'s replicates start alike and end in the same bits: two with the same loss and weights but other outcomes are
  // no reference.
  Baseline apart = base;
  bool edited = false;
  for (auto& t : apart.training)
    if (t.condition == "d" && t.runs.size() > 1) t.runs[1].outcome = std::string(32, 'e'), edited = true;
  ASSERT_TRUE(edited);
  ASSERT_TRUE(save_baseline(path, apart).is_ok());
  const Status refused = load_baseline(path, &loaded);
  EXPECT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("end apart (outcomes "), std::string::npos) << refused.message();
  // An outcome on some runs and not others (no version writes that), one without weights, one outcome of two runs
  // with other weights: refused.
  auto refused_with = [&](Baseline edit, const std::string& words) {
    ASSERT_TRUE(save_baseline(path, edit).is_ok());
    const Status st = load_baseline(path, &loaded);
    EXPECT_FALSE(st.is_ok()) << words;
    EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
  };
  Baseline some = base;
  some.training.at(0).runs.at(0).outcome.clear();
  refused_with(some, "has no outcome while");
  Baseline no_weights = base;
  no_weights.training.at(0).runs.at(0).weights_fingerprint.clear();
  refused_with(no_weights, "has an outcome but no weights");
  Baseline shared = base;
  BaselineRun* other = nullptr;
  for (auto& t : shared.training)
    for (auto& r : t.runs)
      if (r.weights_fingerprint != shared.training.at(0).runs.at(0).weights_fingerprint) other = &r;
  ASSERT_NE(other, nullptr);
  other->outcome = shared.training.at(0).runs.at(0).outcome;
  refused_with(shared, "have one outcome");
}

TEST(FailClosed, CompareComparesTrainingRuns) {
  Dir d("fail-closed-compare");
  const std::string a = d.save("a", training_results("autoencoder")),
                    same = d.save("same", training_results("autoencoder", 'd', 3));
  const std::string changed = d.save("changed", training_results("autoencoder", 'f'));
  const std::string pn = d.save("pn", training_results("prednet")), probe = d.save("probe", probe_results());

  CliRun r = run_cli("compare " + a + " " + same);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("training cells (training autoencoder/sony2021): 3 same bits, 0 bits changed, 0 only in A, 0 "
                       "only in B, 2 nondeterministic"),
            std::string::npos)
      << r.out;

  r = run_cli("compare " + a + " " + changed);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("bits changed (d) " + test::canon_target("cpu?order=blocked&threads=2")), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("first: seed 1000 rep 0: weights dddddddd -> ffffffff"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(run_cli("compare --json " + a + " " + changed).out);
  // (d)'s weights changed, and with them (b)'s first seed's, which starts from them.
  EXPECT_EQ(j["comparison"]["training_summary"]["bits_changed"], 2);
  EXPECT_EQ(j["counts"]["fail"], 2);

  r = run_cli("compare " + a + " " + pn);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "cannot be compared: design.model is \"autoencoder\" vs \"prednet\"")) << r.err;
  r = run_cli("compare " + probe + " " + a);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "kind is probe suite quick vs training autoencoder/sony2021")) << r.err;
  // One run named twice, as a directory and as its file, compares nothing: never "same bits".
  for (const std::string& second : {a, a + "/results.json"}) {
    r = run_cli("compare " + a + " " + second);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_TRUE(says(r, "are one results file: a run compared with itself compares nothing")) << r.err;
  }
  // A FAIL nobody received is a lost answer: exit 2 saying so, not 1 in silence.
  EXPECT_EQ(std::system(("cd / && " + std::string(DETAUDIT_EXE) + " compare " + a + " " + changed +
                         " --json >/dev/full 2>/dev/null").c_str()) >> 8,
            2);
}

// Loading checks what a file says against what it can mean: one line naming the field, exit 2, in every
// command that reads results (check, compare, report, baseline save).
TEST(FailClosed, LoadingRefusesWhatCannotBeTrue) {
  Dir d("fail-closed-load");
  const std::string good = d.save("good", probe_results());
  ASSERT_EQ(run_cli("baseline save " + good).code, 0);
  auto edited = [&](const std::string& name, auto&& f) {
    auto j = nlohmann::json::parse(slurp(d.root / "good" / "results.json"));
    f(j);
    fs::create_directories(d.root / name);
    std::ofstream(d.root / name / "results.json") << j.dump();
    return d.path(name);
  };
  struct Case {
    std::string dir, says;
  };
  const std::vector<Case> cases = {
      {edited("distinct", [](nlohmann::json& j) { j["observations"][0]["distinct"] = 3; }),
       "observations[0].distinct is 3, more than the 2 repeats"},
      {edited("fps", [](nlohmann::json& j) { j["observations"][0]["fingerprints"][1] = std::string(32, 'b'); }),
       "observations[0].distinct is 1, but fingerprints holds 2 distinct outputs"},
      {edited("maybe", [](nlohmann::json& j) { j["observations"][0]["verdict"] = "MAYBE"; }),
       "observations[0].verdict must be PASS, FAIL, EXPECTED, WARN or SKIP"},
      {edited("spec", [](nlohmann::json& j) { j["observations"][0]["target"] = "cpu?order=sideways"; }),
       "observations[0].target: 'cpu?order=sideways': bad value 'sideways'"},
      // A machine that contradicts itself: two compilers, an instruction set its CPU lacks.
      {edited("compiler",
              [](nlohmann::json& j) {
                j["machine"]["compiler"] = "clang 14.0.6";
                j["machine"]["libraries"]["compiler"] = "gcc 12.2.0";
              }),
       "machine.compiler \"clang 14.0.6\" contradicts machine.libraries.compiler \"gcc 12.2.0\""},
      {edited("isa",
              [](nlohmann::json& j) {
                j["machine"]["cpu_features"] = {"sse2", "avx", "avx2", "fma"};
                j["machine"]["libraries"]["cpu_isa_auto"] = "avx512";
              }),
       "machine.libraries.cpu_isa_auto \"avx512\" contradicts machine.cpu_features, which lacks avx512f"},
  };
  for (auto& c : cases) {
    for (const std::string& cmd : {"check " + c.dir + " --baseline " + good + "/baseline.json --no-history",
                                   "compare " + good + " " + c.dir, "report " + c.dir, "baseline save " + c.dir}) {
      CliRun r = run_cli(cmd);
      EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out << r.err;
      EXPECT_NE(r.err.find(c.dir + "/results.json: "), std::string::npos) << cmd << ": " << r.err;
      EXPECT_NE(r.err.find(c.says), std::string::npos) << cmd << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  // Training runs against their design: a seed the design never ran, batches it did not run.
  const std::string ae = d.save("ae", training_results("autoencoder"));
  auto train_edit = [&](const std::string& name, auto&& f) {
    auto j = nlohmann::json::parse(slurp(fs::path(ae) / "results.json"));
    f(j);
    fs::create_directories(d.root / name);
    std::ofstream(d.root / name / "results.json") << j.dump();
    return d.path(name);
  };
  for (auto& [dir, what] : std::vector<std::pair<std::string, std::string>>{
           {train_edit("seed", [](nlohmann::json& j) { j["training"][0]["seed"] = 5; }),
            "training[0].seed 5 is not a seed of the design (2 seeds from 1000"},
           {train_edit("batches", [](nlohmann::json& j) { j["training"][3]["batches"] = 400; }),
            "training[3].batches 400 is not the design's 4"},
           {train_edit("cond",
                       [](nlohmann::json& j) {
                         j["plan"]["design"]["conditions"] = "abcd";
                         j["plan"]["runs"] = 12;  // the runs of (a) to (d)
                       }),
            "training[12].condition \"e\" is not a condition of the design (abcd)"},
           {train_edit("init", [](nlohmann::json& j) { j["training"][0]["init"] = "fixed"; }),
            "training[0].init is not condition (a)'s"}}) {
    CliRun r = run_cli("compare " + ae + " " + dir);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  }
  // A run that contradicts itself: a (b) final loss x 1.5 beside its unchanged curve, a curve fingerprint
  // that is not its curve's. Refused by every command that reads it, naming the field.
  ASSERT_EQ(run_cli("baseline save " + ae).code, 0);
  for (auto& [dir, what] : std::vector<std::pair<std::string, std::string>>{
           {train_edit("loss", [](nlohmann::json& j) { j["training"][4]["final_loss"] = 1.5 * j["training"][4]["final_loss"].get<double>(); }),
            "training[4].final_loss 0.375 is not the mean of the curve's last 2 points (0.25)"},
           {train_edit("stale", [](nlohmann::json& j) { j["training"][4]["curve_fingerprint"] = std::string(32, 'c'); }),
            "training[4].curve_fingerprint cccccccccccccccccccccccccccccccc is not the fingerprint of the run's curve"}})
    for (const std::string& cmd : {"check " + dir + " --baseline " + ae + "/baseline.json --no-history",
                                   "compare " + ae + " " + dir, "analyze " + dir + " --out " + dir + "-merged",
                                   "report " + dir}) {
      CliRun r = run_cli(cmd);
      EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out << r.err;
      EXPECT_NE(r.err.find(what), std::string::npos) << cmd << ": " << r.err;
    }
}

// history only reads: its error about a history it will not use does not advise --no-history (which
// history refuses); a command that records does.
TEST(FailClosed, HistoryAdviceFitsTheCommand) {
  Dir d("fail-closed-history");
  const std::string db = d.path("h.db");
  std::ofstream(db) << std::string(600, 'x');
  CliRun h = run_cli("history --history " + db);
  EXPECT_EQ(h.code, 2);
  EXPECT_NE(h.err.find("pass --history FILE"), std::string::npos) << h.err;
  EXPECT_EQ(h.err.find("--no-history"), std::string::npos) << h.err;
  CliRun p = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --history " + db + " --out " +
                     d.path("p"));
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("--no-history"), std::string::npos) << p.err;
}

// One design given twice through a link is refused like the same directory given twice.
TEST(FailClosed, AnalyzeRefusesOneDesignGivenTwiceThroughALink) {
  Dir d("fail-closed-analyze-link");
  const std::string a = d.save("a", training_results("autoencoder"));
  fs::create_directories(d.root / "b2");
  fs::create_symlink(fs::path(a) / "results.json", d.root / "b2" / "results.json");
  CliRun r = run_cli("analyze " + a + " " + d.path("b2") + " --out " + d.path("m"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "b2/results.json is " + a + "/results.json (a link): one design given twice")) << r.err;
  // A byte copy in another folder is the same run too (its command and start are the original's).
  fs::create_directories(d.root / "b3");
  fs::copy_file(fs::path(a) / "results.json", d.root / "b3" / "results.json");
  r = run_cli("analyze " + a + " " + d.path("b3") + " --out " + d.path("m"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, a + " and " + d.path("b3") + " hold one run (the same command, started at ")) << r.err;
  // A copy whose header was edited (another start) still holds runs timed alike to the nanosecond.
  nlohmann::json timed = nlohmann::json::parse(slurp(fs::path(a) / "results.json"));
  for (size_t i = 0; i < timed["training"].size(); ++i)
    timed["training"][i]["seconds"] = 1.25 + 0.001 * double(i),
    timed["training"][i]["steps_per_second"] = 4 / (1.25 + 0.001 * double(i));  // its 4 batches
  fs::create_directories(d.root / "t1");
  fs::create_directories(d.root / "t2");
  timed["started_at"] = "2026-12-03T23:00:00Z";  // an hour before it finished, time enough for its runs
  std::ofstream(d.root / "t1" / "results.json") << timed.dump(1);
  timed["started_at"] = "2026-12-03T22:00:00Z";
  std::ofstream(d.root / "t2" / "results.json") << timed.dump(1);
  r = run_cli("analyze " + d.path("t1") + " " + d.path("t2") + " --out " + d.path("m"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(says(r, "took the same time to the nanosecond")) << r.err;
}
