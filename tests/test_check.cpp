// gates/check and `detaudit check`: a results directory against a baseline.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <random>

#include "analysis/stats.hpp"
#include "gates/baseline.hpp"
#include "gates/check.hpp"
#include "probes/spec.hpp"
#include "report/check_report.hpp"
#include "report/probe_report.hpp"  // kMarkdownLimit
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"
#include "tests/training_helpers.hpp"

using namespace detaudit;
using namespace detaudit::cli_test;
namespace fs = std::filesystem;

namespace {

const std::string FA(32, 'a'), FB(32, 'b'), FC(32, 'c'), FD(32, 'd'), FE(32, 'e');

using test::canon_target;
using test::canon_workload;

const std::string& W() {
  static const std::string w = canon_workload("matmul?m=8&n=8&k=515");  // k >= 64: order=atomic can race
  return w;
}
const std::string& SEQ() {
  static const std::string t = canon_target("cpu?order=sequential&threads=1");
  return t;
}
const std::string& ATOMIC() {
  static const std::string t = canon_target("cpu?order=atomic&threads=2");
  return t;
}
const std::string& GPU() {
  static const std::string t = canon_target("cuda:0?order=tree");
  return t;
}

Observation ok_cell(const std::string& w, const std::string& t, std::vector<std::string> fps) {
  Observation o = test::ran(w, t, std::move(fps));
  o.seconds.assign(o.fingerprints.size(), 0.01);
  return o;
}

nlohmann::json machine() {
  return {{"cpu_model", "Test CPU 9000"},
          {"cpu_features", {"sse4.1", "avx", "avx2"}},
          {"libraries", {{"openblas", "0.3.21"}, {"openblas_core", "Haswell"}, {"cuda_runtime", 12040}, {"cuda_driver", 12060}}},
          {"gpus", {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}, {"sm_count", 132}}}},
          {"cuda", "available"}};
}

// A probe run: a deterministic CPU cell, a nondeterministic one, and a GPU cell with its kernels.
Results probe_results() {
  Results r;
  r.started_at = "2026-01-01T00:00:00Z";
  r.finished_at = "2026-01-01T00:01:00Z";
  r.machine = machine();
  r.plan = {{"suite", "quick"}, {"targets", {SEQ(), ATOMIC(), GPU()}}, {"workloads", {W()}}, {"repeats", 3}};
  r.observations.push_back(ok_cell(W(), SEQ(), {FA, FA, FA}));
  r.observations.push_back(ok_cell(W(), ATOMIC(), {FB, FC, FB}));
  Observation g = ok_cell(W(), GPU(), {FD, FD, FD});
  g.kernels.assign(3, std::vector<KernelRecord>{KernelRecord{"gemm_tree_kernel"}, KernelRecord{"reduce_tree_kernel"}});
  r.observations.push_back(g);
  return r;
}

Observation& cell_of(Results& r, const std::string& target) {
  for (auto& o : r.observations)
    if (o.target == target) return o;
  throw std::runtime_error("no cell " + target);
}

void set_fps(Observation& o, std::vector<std::string> fps) {
  o.fingerprints = std::move(fps);
  o.distinct = count_distinct(o.fingerprints);
  o.repeats = int(o.fingerprints.size());
  o.verdict.reset();  // judged again
}

struct Dirs {
  fs::path root;
  explicit Dirs(const std::string& name) : root(fresh_dir(name)) { fs::create_directories(root); }
  ~Dirs() { fs::remove_all(root); }
  // A results directory written as `probe` writes it.
  std::string results(const std::string& name, const Results& r) const {
    fs::path d = root / name;
    fs::create_directories(d);
    std::string err;
    EXPECT_TRUE(succeeded(save_results((d / "results.json").string(), r), &err)) << err;
    return d.string();
  }
};

const CheckFinding* first(const CheckReport& rep, FindingKind k, const std::string& target = "") {
  for (auto& f : rep.findings)
    if (f.kind == k && (target.empty() || f.target == target)) return &f;
  return nullptr;
}

TrainingRun train_run(const std::string& cond, const std::string& t, uint64_t seed, int rep, double loss,
                         const std::string& weights = std::string(32, 'e')) {
  bool fixed = cond == "c" || cond == "d", det = cond == "b" || cond == "d";
  return training_run({{"key", cond + "|" + t + "|" + std::to_string(seed) + "|" + std::to_string(rep)},
          {"model", "autoencoder"},
          {"design", "sony2021"},
          {"condition", cond},
          {"init", fixed ? "fixed" : "random"},
          {"determinism", det ? "on" : "off"},
          {"target", t},
          {"status", "ok"},
          {"seed", seed},
          {"replicate", rep},
          {"final_loss", loss},
          {"curve", {loss}},
          {"weights_fingerprint", weights}});
}

}  // namespace

TEST(Check, StudentTQuantileIsExact) {
  // Closed forms: df 1 is Cauchy, tan(π(p - 1/2)); df 2 is (2p - 1)/sqrt(2p(1 - p)), which for p = 0.975 is
  // 0.95/sqrt(0.04875) = 4.30265272974946385... (40-digit decimal arithmetic).
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706204736174703, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.3026527297494639, 1e-14);
  // df >= 3 through the incomplete beta, against the roots of the closed-form CDFs of integer df
  // (Abramowitz & Stegun 26.7.3 and 26.7.4: finite sums in atan and cos for odd df, in t/sqrt(df + t²)
  // for even df), solved independently by bisection in double precision.
  EXPECT_NEAR(student_t_quantile(0.975, 3), 3.1824463052837064, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.7764451051977934, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.975, 5), 2.5705818356363146, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.228138851986273, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.042272456301238, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.975, 1e7), 1.959963984540054, 1e-6);  // the normal's 1.959964
  EXPECT_NEAR(student_t_quantile(0.025, 5), -2.570581835636314, 1e-12);
  EXPECT_EQ(student_t_quantile(0.5, 4), 0);
  EXPECT_TRUE(std::isnan(student_t_quantile(1.0, 4)));
  EXPECT_TRUE(std::isnan(student_t_quantile(0.9, 0)));
}

// THE KEY TEST: a flipped fingerprint on the same machine key makes `detaudit check` exit 1 and name
// the cell (workload, target, old and new fingerprint) and, on a GPU, the kernels that ran.
TEST(Check, FlippedFingerprintFailsAndNamesTheCell) {
  Dirs d("check-flip");
  Results r = probe_results();
  std::string base_dir = d.results("base", r);
  auto saved = run_cli("baseline save " + base_dir);
  ASSERT_EQ(saved.code, 0) << saved.err;
  std::string baseline = base_dir + "/baseline.json";

  // The same command run again (a minute later) gave the same bits: it passes. (The run the baseline was saved from
  // judges nothing against it: its cells would be compared with themselves.)
  Results again = r;
  again.started_at = "2026-01-01T00:02:00Z", again.finished_at = "2026-01-01T00:03:00Z";
  for (auto& o : again.observations)  // its own times (every cell timed alike to the nanosecond: one run)
    for (double& s : o.seconds) s = s * 1.5 + 1e-9;
  auto same = run_cli("check " + d.results("again", again) + " --baseline " + baseline);
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("check passed"), std::string::npos) << same.out;
  auto itself = run_cli("check " + base_dir + " --baseline " + baseline);
  EXPECT_EQ(itself.code, 2) << itself.out;
  EXPECT_NE(itself.err.find("it is the run the baseline was saved from"), std::string::npos) << itself.err;

  Results flipped = r;
  set_fps(cell_of(flipped, SEQ()), {FE, FE, FE});
  set_fps(cell_of(flipped, GPU()), {FC, FC, FC});
  cell_of(flipped, GPU()).kernels.assign(3, std::vector<KernelRecord>{KernelRecord{"gemm_splitk_kernel"}});
  std::string dir = d.results("flipped", flipped);
  auto res = run_cli("check " + dir + " --baseline '" + baseline + "'");
  EXPECT_EQ(res.code, 1) << res.out << res.err;
  for (const std::string& s : {W(), SEQ(), FA, FE, GPU(), FD, FC, std::string("bits_changed"),
                               std::string("gemm_tree_kernel"), std::string("gemm_splitk_kernel"),
                               std::string("check FAILED: 2 failures")})
    EXPECT_NE(res.out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << res.out;
  // The nondeterministic cell with a new output is a warning, not a failure.
  Results nondet = r;
  set_fps(cell_of(nondet, ATOMIC()), {FB, FE, FB});
  auto warn = run_cli("check " + d.results("nondet", nondet) + " --baseline " + baseline);
  EXPECT_EQ(warn.code, 0) << warn.out;
  EXPECT_NE(warn.out.find("new outputs of a nondeterministic target"), std::string::npos) << warn.out;

  // JSON: every finding with kind, verdict, workload, target, old, new, message.
  auto js = run_cli("check " + dir + " --baseline " + baseline + " --format json");
  EXPECT_EQ(js.code, 1);
  auto top = nlohmann::json::parse(js.out);
  // The command's contract, with the check's own report under "check".
  EXPECT_EQ(top["schema"], "detaudit-cli/1");
  EXPECT_EQ(top["command"], "check");
  EXPECT_EQ(top["verdict"], "FAIL");
  auto j = top["check"];
  EXPECT_EQ(j["schema"], kCheckSchema);
  EXPECT_EQ(j["exit_code"], 1);
  int changed = 0;
  for (auto& f : j["findings"]) {
    for (const char* k : {"kind", "verdict", "workload", "target", "old", "new", "message"}) EXPECT_TRUE(f.contains(k)) << k;
    if (f["kind"] == "bits_changed") {
      ++changed;
      EXPECT_EQ(f["verdict"], "FAIL");
      if (f["target"] == SEQ()) {
        EXPECT_EQ(f["old"], FA);
        EXPECT_EQ(f["new"], FE);
      }
      if (f["target"] == GPU()) {
        EXPECT_EQ(f["old_kernels"][0], "gemm_tree_kernel");
        EXPECT_EQ(f["new_kernels"][0], "gemm_splitk_kernel");
      }
    }
  }
  EXPECT_EQ(changed, 2);
  auto md = run_cli("check " + dir + " --baseline " + baseline + " --format md");
  EXPECT_EQ(md.code, 1);
  EXPECT_NE(md.out.find("## detaudit check: FAIL (2 failures)"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find(FE), std::string::npos);
}

TEST(Check, KeyDiffersBitsAloneDoNotFailDeterminismDoes) {
  Dirs d("check-otherkey");
  Results r = probe_results();
  std::string base_dir = d.results("base", r);
  ASSERT_EQ(run_cli("baseline save " + base_dir).code, 0);
  std::string baseline = base_dir + "/baseline.json";

  Results other = r;
  other.machine["cpu_model"] = "Other CPU 1";
  set_fps(cell_of(other, SEQ()), {FE, FE, FE});  // other bits on another CPU: no failure
  auto res = run_cli("check " + d.results("other", other) + " --baseline " + baseline + " --format json");
  EXPECT_EQ(res.code, 0) << res.out << res.err;
  auto j = nlohmann::json::parse(res.out)["check"];
  EXPECT_EQ(j["cells_other_key"], 2);  // the two CPU cells; the GPU's key holds no CPU
  EXPECT_EQ(j["cells_other_key_bits_changed"], 1);
  bool said = false;
  for (auto& f : j["findings"])
    if (f["kind"] == "other_key" && f["target"] == SEQ()) {
      said = true;
      EXPECT_EQ(f["verdict"], "PASS");
      EXPECT_NE(f["message"].get<std::string>().find("cpu_model: Test CPU 9000 -> Other CPU 1"), std::string::npos) << f;
      EXPECT_NE(f["message"].get<std::string>().find("bits changed"), std::string::npos) << f;
    }
  EXPECT_TRUE(said) << res.out;

  // A cell deterministic in the baseline and promised deterministic that now gives 2 outputs fails.
  set_fps(cell_of(other, SEQ()), {FE, FA, FE});
  res = run_cli("check " + d.results("nondet", other) + " --baseline " + baseline);
  EXPECT_EQ(res.code, 1) << res.out;
  EXPECT_NE(res.out.find(SEQ()), std::string::npos) << res.out;
}

TEST(Check, ErrorRatioBudgetWhereTheKeyDiffers) {
  Results r = probe_results();
  auto with_err = [](Results& x, double e) {
    auto& o = cell_of(x, SEQ());
    o.oracle = OracleDistance{};
    o.oracle->bound_k = 8;
    o.oracle->err_ratio = e;
    o.verdict = Verdict::kPass;  // judged as the verdict would on its own budget; here only the check's budget counts
    for (auto& c : x.observations)
      if (!c.verdict) c.verdict = Verdict::kPass;
  };
  auto run = [&](double base_err, double new_err) {
    Results a = r, b = r;
    with_err(a, base_err);
    with_err(b, new_err);
    b.machine["cpu_model"] = "Other CPU 1";
    return check_against_baseline(make_baseline(a, "a", "t"), b, "b", "base.json");
  };
  // Budget: the promise's 1 for full-precision inputs (a baseline cell that passed was within it).
  EXPECT_EQ(run(0.5, 0.9).decision(), Decision::kPass);
  CheckReport beyond = run(0.5, 1.5);
  EXPECT_EQ(beyond.decision(), Decision::kFail);
  auto* f = first(beyond, FindingKind::kErrRatio, SEQ());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kFail);
  EXPECT_EQ(f->target, SEQ());
  EXPECT_NE(f->message.find("beyond the promise's budget 1"), std::string::npos) << f->message;
  // The baseline's own ratio is the budget when above 1 (such a cell fails its own promise's bound, a
  // finding of its own: here only the check's comparison with the baseline counts).
  const CheckReport within = run(2.0, 1.9), past = run(2.0, 2.5);
  EXPECT_EQ(first(within, FindingKind::kErrRatio, SEQ()), nullptr);
  auto* above = first(past, FindingKind::kErrRatio, SEQ());
  ASSERT_NE(above, nullptr);
  EXPECT_EQ(above->verdict, Verdict::kFail);
  // Unknown on one side: said, not judged.
  Results a = r, b = r;
  with_err(a, 0.5);
  for (auto& c : b.observations) c.verdict = Verdict::kPass;
  b.machine["cpu_model"] = "Other CPU 1";
  CheckReport unknown = check_against_baseline(make_baseline(a, "a", "t"), b, "b", "base.json");
  EXPECT_EQ(unknown.decision(), Decision::kPass);
  f = first(unknown, FindingKind::kErrRatio, SEQ());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kSkip);
  EXPECT_NE(f->message.find("not known in this run"), std::string::npos) << f->message;
}

// Nondeterminism off ((b), (d), (e)) on the same key promises the same bits: every run is compared with
// the baseline run of its seed, and any other bit fails, however close.
TEST(Check, TrainingWithNondeterminismOffIsBitwiseSeedBySeed) {
  const std::string blocked = canon_target("cpu?order=blocked&threads=2");
  Results base;
  base.machine = machine();
  base.plan = {{"kind", "train"}};
  for (int s = 0; s < 3; ++s) {
    base.training.push_back(train_run("b", blocked, 1000 + s, 0, 0.5 + 0.01 * s, std::string(32, char('a' + s))));
    base.training.push_back(train_run("d", blocked, 1000, s, 0.25));
  }
  Baseline b = make_baseline(base, "base", "t");
  CheckReport own = check_against_baseline(b, base, "base", "b");
  EXPECT_EQ(own.decision(), Decision::kPass) << render_check(own, OutputFormat::kText);
  EXPECT_EQ(own.count(Verdict::kPass), 6);
  // (b): seed 1001's final loss one ULP off fails, naming the seed; the others pass.
  Results ulp = base;
  ulp.training[2].final_loss = std::nextafter(ulp.training[2].final_loss, 1.0);
  CheckReport r = check_against_baseline(b, ulp, "now", "b");
  EXPECT_EQ(r.decision(), Decision::kFail);
  EXPECT_EQ(r.count(Verdict::kFail), 1);
  auto* f = first(r, FindingKind::kTrainingBits);
  for (auto& x : r.findings)
    if (x.verdict == Verdict::kFail) f = &x;
  EXPECT_EQ(f->workload, "train autoencoder/sony2021 (b)");
  EXPECT_NE(f->message.find("seed 1001 rep 0"), std::string::npos) << f->message;
  // (d): the same loss with other final weights fails too.
  Results w = base;
  w.training[3].weights_fingerprint = std::string(32, '9');
  EXPECT_EQ(check_against_baseline(b, w, "now", "b").decision(), Decision::kFail);
  // A crashed or diverged run fails on its own.
  Results crashed = base;
  crashed.training[1].status = ObsStatus::kCrashed;
  crashed.training[2].final_loss = NAN;
  CheckReport c = check_against_baseline(b, crashed, "d", "b");
  EXPECT_EQ(c.count(Verdict::kFail), 2);
  std::string said;
  for (auto& x : c.findings)
    if (x.kind == FindingKind::kTrainingRun) said += x.message + "\n";
  EXPECT_NE(said.find("run crashed"), std::string::npos) << said;
  EXPECT_NE(said.find("the run diverged"), std::string::npos) << said;
  // A cell the baseline lacks although the design it was saved from runs it (here (b), taken out of the baseline) is
  // unjudged, not new: the check exits 2 (a baseline left with (d) alone had passed the whole design).
  Results planned = base;
  planned.plan["design"] = {{"model", "autoencoder"}, {"design", "sony2021"}, {"conditions", {"b", "d"}},
                            {"targets", {"cpu?threads=2"}}};
  Baseline only_d = make_baseline(planned, "base", "t");
  std::erase_if(only_d.training, [](const BaselineTraining& t) { return t.condition == "b"; });
  CheckReport lacking = check_against_baseline(only_d, planned, "now", "b");
  EXPECT_EQ(lacking.decision(), Decision::kNotJudged) << render_check(lacking, OutputFormat::kText);
  ASSERT_EQ(lacking.training_not_judged.size(), 1u);
  EXPECT_NE(lacking.training_not_judged[0].find("(b) on " + blocked + ": no baseline: the design the baseline was "
                                                "saved from runs this cell"),
            std::string::npos)
      << lacking.training_not_judged[0];
  // Of another design, the cell is new: said, not judged, no exit 2.
  Results other = planned;
  other.plan["design"]["conditions"] = {"b"};
  EXPECT_EQ(check_against_baseline(only_d, other, "now", "b").decision(), Decision::kPass);
}

// Normal draws from mt19937 (whose sequence the standard fixes) by Box-Muller: the same numbers everywhere.
std::vector<double> normals(std::mt19937_64& rng, int count, double mean, double sd) {
  std::vector<double> out;
  while (int(out.size()) < count) {
    double u1 = (double(rng() >> 11) + 1) * 0x1p-53, u2 = double(rng() >> 11) * 0x1p-53;
    double r = std::sqrt(-2 * std::log(u1));
    out.push_back(mean + sd * r * std::cos(2 * std::numbers::pi * u2));
    if (int(out.size()) < count) out.push_back(mean + sd * r * std::sin(2 * std::numbers::pi * u2));
  }
  return out;
}

// (a) of a design: `seeds` seeds whose initial weights move the loss (sd 0.05 between seeds) and `reps`
// runs of each, run to run sd 0.001 around the seed's value; `scale` multiplies every loss.
Results design_a(std::mt19937_64& rng, const std::vector<double>& seed_means, int reps, double scale = 1.0,
                 const std::string& cpu = "Test CPU 9000") {
  Results r;
  r.machine = machine();
  r.machine["cpu_model"] = cpu;
  r.plan = {{"kind", "train"}};
  for (size_t s = 0; s < seed_means.size(); ++s) {
    auto noise = normals(rng, reps, 0.0, 0.001);
    for (int k = 0; k < reps; ++k)
      r.training.push_back(train_run("a", ATOMIC(), 1000 + s, k, scale * (seed_means[s] + noise[k])));
  }
  return r;
}

// Nondeterminism on, on the same key: one permutation test per cell, seed by seed. The seeds' spread is
// 50 times the run-to-run spread; a test on the cell's pooled sd (the old prediction interval) was about
// 4800 run-to-run sds wide and passed +21%. This one sees a shift of a fraction of the seed spread.
TEST(Check, TrainingWithNondeterminismOnIsJudgedSeedBySeed) {
  std::mt19937_64 rng(20261204);
  const std::vector<double> seed_means = normals(rng, 6, 0.8, 0.05);
  Results base = design_a(rng, seed_means, 2);  // 12 runs
  Baseline b = make_baseline(base, "base", "t");
  // Unchanged: new runs of the same seeds.
  CheckReport same = check_against_baseline(b, design_a(rng, seed_means, 2), "now", "b");
  EXPECT_EQ(same.decision(), Decision::kPass) << render_check(same, OutputFormat::kText);
  auto* f = first(same, FindingKind::kTrainingShift);
  ASSERT_NE(f, nullptr) << render_check(same, OutputFormat::kText);
  EXPECT_EQ(f->verdict, Verdict::kPass);
  for (const char* s : {"seed by seed: permutation p = ", "(exact over 46656 arrangements within seeds)",
                        "this check detects a shift of", "(power 0.8 at level 0.05, noncentral t; run-to-run sd", "df 12)"})
    EXPECT_NE(f->message.find(s), std::string::npos) << "missing '" << s << "' in " << f->message;
  // +20% on every run: FAIL, naming the shift.
  CheckReport up = check_against_baseline(b, design_a(rng, seed_means, 2, 1.2), "now", "b");
  EXPECT_EQ(up.decision(), Decision::kFail);
  f = first(up, FindingKind::kTrainingShift);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kFail);
  EXPECT_NE(f->message.find("mean final loss moved by"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("% of the mean)"), std::string::npos) << f->message;
  // 8 runs (4 seeds x 2): 6^4 = 1296 arrangements, a floor of 2/1296: judged, whatever the run count.
  Results small = design_a(rng, {0.8, 0.85, 0.9, 0.75}, 2);
  Baseline sb = make_baseline(small, "s", "t");
  CheckReport four = check_against_baseline(sb, design_a(rng, {0.8, 0.85, 0.9, 0.75}, 2), "s", "b");
  EXPECT_EQ(four.decision(), Decision::kPass) << render_check(four, OutputFormat::kText);
  ASSERT_NE(first(four, FindingKind::kTrainingShift), nullptr);
  EXPECT_EQ(first(four, FindingKind::kTrainingShift)->verdict, Verdict::kPass);
  EXPECT_EQ(check_against_baseline(sb, design_a(rng, {0.8, 0.85, 0.9, 0.75}, 2, 1.05), "s", "b").decision(), Decision::kFail);
  // One seed, 2 + 2 runs: C(4, 2) = 6 arrangements, a floor of 2/6 above 0.05: NOT JUDGED (a SKIP), and
  // the check exits 2, saying what would make it judgeable; --allow-unjudged lets it pass.
  Results tiny = design_a(rng, {0.8}, 2);
  CheckReport few = check_against_baseline(make_baseline(tiny, "s", "t"), design_a(rng, {0.8}, 2, 1.5), "s", "b");
  EXPECT_EQ(few.decision(), Decision::kNotJudged) << render_check(few, OutputFormat::kText);
  f = first(few, FindingKind::kTrainingNotJudged);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kSkip);
  for (const char* s : {"not judged: the smallest p-value these runs can give is 0.333 (6 arrangements",
                        "above the level 0.05", "3 seeds of 2 + 2 runs, or 4 runs per side in each of the 1 seed(s)"})
    EXPECT_NE(f->message.find(s), std::string::npos) << "missing '" << s << "' in " << f->message;
  ASSERT_EQ(few.training_not_judged.size(), 1u);
  EXPECT_NE(few.training_not_judged[0].find("train autoencoder/sony2021 (a) on"), std::string::npos)
      << few.training_not_judged[0];
  few.allow_unjudged = true;
  EXPECT_EQ(few.decision(), Decision::kPass);
  EXPECT_NE(render_check(few, OutputFormat::kText).find("1 not judged"), std::string::npos);
  // Ties (identical losses: a discrete, nondeterministic target that happened to repeat) are no failure:
  // every run of both sides the same loss is the same result, said as such.
  Results ties = design_a(rng, seed_means, 2, 0.0);
  CheckReport tie = check_against_baseline(make_baseline(ties, "t", "t"), ties, "t", "b");
  EXPECT_EQ(tie.decision(), Decision::kPass) << render_check(tie, OutputFormat::kText);
  f = first(tie, FindingKind::kTrainingShift);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("every run on both sides has the same final loss"), std::string::npos) << f->message;
}

// Another key: an equivalence test on the per-seed differences, against the margin.
TEST(Check, TrainingAcrossKeysIsAnEquivalenceTest) {
  std::mt19937_64 rng(7);
  const std::vector<double> seed_means = normals(rng, 6, 0.8, 0.05);
  Results base = design_a(rng, seed_means, 2);
  Baseline b = make_baseline(base, "base", "t");
  // The same seeds on another CPU, within 0.1% of the baseline: equivalent within the 2% margin.
  CheckReport eq = check_against_baseline(b, design_a(rng, seed_means, 2, 1.001, "Other CPU"), "now", "b");
  auto* f = first(eq, FindingKind::kTrainingEquivalence);
  ASSERT_NE(f, nullptr) << render_check(eq, OutputFormat::kText);
  EXPECT_EQ(f->verdict, Verdict::kPass) << f->message;
  EXPECT_NE(f->message.find("equivalent: the mean per-seed difference"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("against the margin ±"), std::string::npos) << f->message;
  // 20% higher: different beyond the margin, FAIL.
  CheckReport diff = check_against_baseline(b, design_a(rng, seed_means, 2, 1.2, "Other CPU"), "now", "b");
  f = first(diff, FindingKind::kTrainingEquivalence);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kFail) << f->message;
  EXPECT_EQ(diff.decision(), Decision::kFail);
  // A wide --margin makes the same 20% equivalent; a tiny one makes 0.1% inconclusive or different.
  EXPECT_EQ(check_against_baseline(b, design_a(rng, seed_means, 2, 1.2, "Other CPU"), "now", "b", 0.5).decision(), Decision::kPass);
  // Per-seed differences spread across the margin: inconclusive, a warning saying how many seeds would decide.
  Results spread = design_a(rng, seed_means, 2, 1.0, "Other CPU");
  for (size_t i = 0; i < spread.training.size(); ++i) spread.training[i].final_loss *= (i / 2) % 2 ? 1.05 : 0.97;
  CheckReport inc = check_against_baseline(b, spread, "now", "b");
  f = first(inc, FindingKind::kTrainingEquivalence);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kWarn) << f->message;
  EXPECT_NE(f->message.find("inconclusive"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("seeds would decide it"), std::string::npos) << f->message;
  // One seed: no interval, not judged.
  Results one = design_a(rng, {0.8}, 2, 1.0, "Other CPU");
  CheckReport no = check_against_baseline(make_baseline(design_a(rng, {0.8}, 2), "o", "t"), one, "now", "b");
  f = first(no, FindingKind::kTrainingNotJudged);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("not judged: 1 seed(s) on both sides; an equivalence test needs 2 or more"),
            std::string::npos)
      << f->message;
  EXPECT_EQ(no.decision(), Decision::kNotJudged);
}

// cuDNN's automatic algorithm choice, promises of nothing, and exemptions from the error bound.
Results gpu_cell(const std::string& w, const std::string& t, std::vector<std::string> fps, const std::string& algo) {
  Results r;
  r.machine = machine();
  r.machine["libraries"]["cudnn"] = "9.1.0";
  r.machine["libraries"]["cublas"] = "12.4.5";
  r.plan = {{"targets", {t}}, {"workloads", {w}}};
  Observation o = ok_cell(w, t, std::move(fps));
  o.details["claimed_deterministic"] = "yes";
  if (!algo.empty()) o.details["algo_name"] = algo;
  o.verdict = Verdict::kPass;
  r.observations.push_back(o);
  return r;
}

TEST(Check, AnotherCudnnAlgorithmIsAWarningNotAFailure) {
  const std::string conv = canon_workload("conv2d?n=2&c=8&h=8&w=8&k=8&r=3&s=3&pass=fwd");
  const std::string autot = canon_target("cudnn:0"), pinned = canon_target("cudnn:0?fwd_algo=1");
  const std::string GEMM = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM", PRECOMP = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM";
  auto check = [](const Results& base, const Results& now) {
    return check_against_baseline(make_baseline(base, "b", "t"), now, "d", "b.json");
  };
  Baseline b = make_baseline(gpu_cell(conv, autot, {FA, FA}, GEMM), "b", "t");
  ASSERT_EQ(b.cells.size(), 1u);
  EXPECT_EQ(b.cells[0].algo, GEMM);
  // Another algorithm, other bits: a warning naming both.
  CheckReport rep = check(gpu_cell(conv, autot, {FA, FA}, GEMM), gpu_cell(conv, autot, {FB, FB}, PRECOMP));
  EXPECT_EQ(rep.decision(), Decision::kPass);
  auto* f = first(rep, FindingKind::kAlgorithmChanged);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kWarn);
  EXPECT_NE(f->message.find("another algorithm chosen (" + GEMM + " -> " + PRECOMP + ")"), std::string::npos) << f->message;
  // The same algorithm, other bits: the promise is broken.
  rep = check(gpu_cell(conv, autot, {FA, FA}, GEMM), gpu_cell(conv, autot, {FB, FB}, GEMM));
  EXPECT_EQ(rep.decision(), Decision::kFail);
  EXPECT_EQ(first(rep, FindingKind::kBitsChanged)->verdict, Verdict::kFail);
  // auto, and a side without the name (an older baseline, or not reported): another algorithm may have run.
  rep = check(gpu_cell(conv, autot, {FA, FA}, ""), gpu_cell(conv, autot, {FB, FB}, PRECOMP));
  EXPECT_EQ(rep.decision(), Decision::kPass);
  EXPECT_NE(first(rep, FindingKind::kAlgorithmChanged)->message.find("(not recorded) -> " + PRECOMP), std::string::npos);
  // A pinned algorithm without names on either side: bits must hold.
  rep = check(gpu_cell(conv, pinned, {FA, FA}, ""), gpu_cell(conv, pinned, {FB, FB}, ""));
  EXPECT_EQ(rep.decision(), Decision::kFail);
  EXPECT_EQ(first(rep, FindingKind::kAlgorithmChanged), nullptr);
  // ... and a pinned one whose name still differs (another library build) is said, not failed.
  rep = check(gpu_cell(conv, pinned, {FA, FA}, GEMM), gpu_cell(conv, pinned, {FB, FB}, PRECOMP));
  EXPECT_EQ(rep.decision(), Decision::kPass);
  // Same bits with another algorithm: the same.
  rep = check(gpu_cell(conv, autot, {FA, FA}, GEMM), gpu_cell(conv, autot, {FA, FA}, PRECOMP));
  EXPECT_EQ(rep.decision(), Decision::kPass);
  EXPECT_NE(first(rep, FindingKind::kSame), nullptr);
}

TEST(Check, NothingPromisedNewBitsAreAWarning) {
  const std::string allowed = canon_target("cublas:0?atomics=allowed"), strict = canon_target("cublas:0");
  auto check = [](const Results& base, const Results& now) {
    return check_against_baseline(make_baseline(base, "b", "t"), now, "d", "b.json");
  };
  CheckReport rep = check(gpu_cell(W(), allowed, {FA, FA}, ""), gpu_cell(W(), allowed, {FB, FB}, ""));
  EXPECT_EQ(rep.decision(), Decision::kPass);
  auto* f = first(rep, FindingKind::kBitsChanged);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kWarn);
  EXPECT_NE(f->message.find("nothing promised; new bits"), std::string::npos) << f->message;
  // Two outputs now, outside the baseline's one: a warning too.
  rep = check(gpu_cell(W(), allowed, {FA, FA}, ""), gpu_cell(W(), allowed, {FA, FB}, ""));
  EXPECT_EQ(rep.decision(), Decision::kPass);
  EXPECT_EQ(rep.count(Verdict::kWarn), 1);
  // Promised deterministic: a failure.
  rep = check(gpu_cell(W(), strict, {FA, FA}, ""), gpu_cell(W(), strict, {FB, FB}, ""));
  EXPECT_EQ(rep.decision(), Decision::kFail);
}

TEST(Check, ErrorBoundExemptAlgorithmsAreNotJudgedOnErrRatio) {
  const std::string conv = canon_workload("conv2d?n=2&c=8&h=8&w=8&k=8&r=3&s=3&pass=fwd");
  const std::string t = canon_target("cudnn:0");
  auto with_err = [&](const std::string& algo, double e) {
    Results r = gpu_cell(conv, t, {FA, FA}, algo);
    r.observations[0].oracle = OracleDistance{};
    r.observations[0].oracle->bound_k = 8;
    r.observations[0].oracle->err_ratio = e;
    return r;
  };
  Results base = with_err("CUDNN_CONVOLUTION_FWD_ALGO_FFT", 3.0);
  Results now = with_err("CUDNN_CONVOLUTION_FWD_ALGO_FFT", 40.0);
  now.machine["libraries"]["cudnn"] = "9.2.0";  // another key
  CheckReport rep = check_against_baseline(make_baseline(base, "b", "t"), now, "d", "b.json");
  EXPECT_EQ(rep.decision(), Decision::kPass) << render_check(rep, OutputFormat::kText);
  auto* f = first(rep, FindingKind::kErrRatio);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kSkip);
  EXPECT_NE(f->message.find("not judged: CUDNN_CONVOLUTION_FWD_ALGO_FFT transforms the inputs"), std::string::npos)
      << f->message;
  // A summing algorithm is judged.
  now = with_err("CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM", 40.0);
  now.machine["libraries"]["cudnn"] = "9.2.0";
  rep = check_against_baseline(make_baseline(with_err("CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM", 0.5), "b", "t"), now,
                               "d", "b.json");
  EXPECT_EQ(rep.decision(), Decision::kFail);
  EXPECT_EQ(first(rep, FindingKind::kErrRatio)->verdict, Verdict::kFail);
}

TEST(Check, NotRunAndNewCells) {
  Results r = probe_results();
  for (auto& o : r.observations) o.verdict = Verdict::kPass;
  Baseline b = make_baseline(r, "a", "t");
  Results fewer = r;
  fewer.observations.erase(fewer.observations.begin());  // SEQ, planned
  fewer.observations.push_back(ok_cell(canon_workload("matmul?m=16&n=16&k=16"), SEQ(), {FA}));
  fewer.observations.back().verdict = Verdict::kPass;
  CheckReport rep = check_against_baseline(b, fewer, "b", "base.json");
  auto* lost = first(rep, FindingKind::kNotRun);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->verdict, Verdict::kFail);  // the plan includes it: a lost result
  auto* fresh = first(rep, FindingKind::kNoBaseline);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->verdict, Verdict::kSkip);
  EXPECT_NE(fresh->message.find("new, no baseline"), std::string::npos);
  fewer.plan["targets"] = {ATOMIC(), GPU()};  // not planned: only a warning
  rep = check_against_baseline(b, fewer, "b", "base.json");
  EXPECT_EQ(first(rep, FindingKind::kNotRun)->verdict, Verdict::kWarn);
  EXPECT_EQ(first(rep, FindingKind::kNotRun)->message, "not run (not in this run's plan)");
  EXPECT_EQ(rep.decision(), Decision::kPass);
}

TEST(Check, CouldNotRunExitsTwoNamingTheFile) {
  Dirs d("check-bad");
  std::string dir = d.results("run", probe_results());
  ASSERT_EQ(run_cli("baseline save " + dir).code, 0);
  std::string good = slurp(dir + "/baseline.json");
  auto bad = [&](const std::string& name, const std::string& text) {
    fs::path p = d.root / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  };
  for (auto& [path, expect] : std::vector<std::pair<std::string, std::string>>{
           {bad("trunc.json", good.substr(0, good.size() - 40)), "not valid JSON"},
           {bad("schema.json", "{\"schema\": \"detaudit/1\"}"), "not a detaudit baseline"},
           {bad("type.json", [&] {
              auto j = nlohmann::json::parse(good);
              j["entries"] = 3;
              return j.dump();
            }()),
            "entries must be an array"},
           {(d.root / "missing.json").string(), "cannot open"}}) {
    auto res = run_cli("check " + dir + " --baseline " + path);
    EXPECT_EQ(res.code, 2) << path << res.out;
    EXPECT_NE(res.err.find(path + ": "), std::string::npos) << res.err;
    EXPECT_NE(res.err.find(expect), std::string::npos) << res.err;
    EXPECT_EQ(std::count(res.err.begin(), res.err.end(), '\n'), 1) << res.err;
    EXPECT_EQ(res.out.rfind("verdict: ERROR  fail=0 warn=0 skip=0  report=-  error: ", 0), 0u) << res.out;
    EXPECT_EQ(std::count(res.out.begin(), res.out.end(), '\n'), 1) << res.out;
  }
  // A missing or broken results file is "could not run" too.
  auto res = run_cli("check " + (d.root / "none").string() + " --baseline " + dir + "/baseline.json");
  EXPECT_EQ(res.code, 2);
  std::ofstream(dir + "/results.json") << "{\"schema\": \"detaudit/1\", \"obs";
  res = run_cli("check " + dir + " --baseline " + dir + "/baseline.json");
  EXPECT_EQ(res.code, 2);
  EXPECT_NE(res.err.find(dir + "/results.json: not valid JSON"), std::string::npos) << res.err;
}

TEST(Check, MarkdownStaysUnderTheCommentLimitFor2000Cells) {
  // 2000 cells, every list long: same-key flips (FAIL), new outputs of a nondeterministic target (WARN),
  // other bits on another key (listed, not failures) with unknown error ratios (not judged), and cells
  // without a baseline.
  const std::string openblas = canon_target("openblas?core=Haswell&threads=1");
  Results base, now;
  base.machine = now.machine = machine();
  now.machine["libraries"]["openblas"] = "0.3.26";
  for (int i = 0; i < 2000; ++i) {
    std::string w = canon_workload(fmt::format("conv2d?n=8&c=32&h=28&w=28&k=64&r=3&s=3&stride=1&pad=1&pass=bwd_filter&seed={}", i));
    Observation b, n;
    switch (i % 4) {
      case 0: b = ok_cell(w, SEQ(), {FA}), n = ok_cell(w, SEQ(), {FB}); break;
      case 1: b = ok_cell(w, ATOMIC(), {FB, FC}), n = ok_cell(w, ATOMIC(), {FD, FB}); break;
      case 2: b = ok_cell(w, openblas, {FA}), n = ok_cell(w, openblas, {FE}); break;
      case 3: b = ok_cell(w, SEQ(), {FA}), n = ok_cell(w + "&dist=int", SEQ(), {FA}); break;
    }
    b.verdict = n.verdict = i % 4 == 1 ? Verdict::kExpected : Verdict::kPass;
    base.observations.push_back(b);
    now.observations.push_back(n);
  }
  Baseline b = make_baseline(base, "results/quick-20260101-000000", "t");
  CheckReport rep = check_against_baseline(b, now, "results/quick-20260102-000000", "baselines/fleet.json");
  EXPECT_EQ(rep.count(Verdict::kFail), 500);   // the flips
  EXPECT_EQ(rep.count(Verdict::kWarn), 1000);  // new outputs, and the baseline cells not run (no plan)
  std::string md = render_check(rep, OutputFormat::kMarkdown);
  EXPECT_LT(md.size(), kMarkdownLimit);
  RecordProperty("markdown_chars", int(md.size()));
  for (const char* s : {"### Failures (", "<summary>Warnings (1000)", "<summary>Not judged (500)", "<summary>New, no baseline (500)",
                        "<summary>Other bits where the key differs, not failures (500)"})
    EXPECT_NE(md.find(s), std::string::npos) << s;
  size_t more = 0;
  for (size_t p = md.find("more (`--format json` lists every finding)"); p != std::string::npos;
       p = md.find("more (`--format json` lists every finding)", p + 1))
    ++more;
  EXPECT_EQ(more, 5u);
  // The terminal lists every failure.
  std::string text = render_check(rep, OutputFormat::kText);
  size_t lines = 0;
  for (size_t p = text.find("  FAIL     "); p != std::string::npos; p = text.find("  FAIL     ", p + 1)) ++lines;
  EXPECT_EQ(lines, size_t(rep.count(Verdict::kFail)));
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Check, MarkdownClipsUntrustedHeaderFieldsAndCutsCleanly) {
  Results r = probe_results();
  for (auto& o : r.observations) o.verdict = Verdict::kPass;
  Baseline b = make_baseline(r, "", "t");
  std::string huge;
  for (int i = 0; i < 20000; ++i) huge += "ä<details>";  // multi-byte characters and would-be tags
  b.source_dir = b.created_at = b.tool_version = huge;
  CheckReport rep = check_against_baseline(b, r, huge, "b.json");
  std::string md = render_check(rep, OutputFormat::kMarkdown);
  EXPECT_LT(md.size(), 5000u);  // each field a few hundred characters
  EXPECT_TRUE(valid_utf8(md));
  EXPECT_NE(md.find("..."), std::string::npos);
  // The final cut: whole lines, every <details> block closed, no character split, under the limit.
  std::string doc = "## head\n\n";
  for (int i = 0; i < 4; ++i) {
    doc += "<details><summary>block</summary>\n\n| a | b |\n|---|---|\n";
    for (int k = 0; k < 300; ++k) doc += "| ä€😀 row " + std::to_string(k) + " | `x` |\n";
    doc += "\n</details>\n\n";
  }
  for (size_t limit : {size_t(100), size_t(5000), size_t(12345), size_t(20000), doc.size() - 1}) {
    std::string cut = cap_markdown(doc, limit);
    EXPECT_LT(cut.size(), limit) << limit;
    EXPECT_TRUE(valid_utf8(cut)) << limit;
    EXPECT_EQ(count(cut, "<details>"), count(cut, "</details>")) << limit;
    EXPECT_NE(cut.find("(truncated"), std::string::npos) << limit;
    size_t last_open = cut.rfind("<details>"), last_close = cut.rfind("</details>");
    if (last_open != std::string::npos) {
      EXPECT_GT(last_close, last_open) << limit;
    }
  }
  EXPECT_EQ(cap_markdown(doc, doc.size() + 1), doc);
}

// A baseline cell that broke its promise of determinism holds no known-good bits: the new run's outputs among
// its own are a warning, never a pass, and such an entry saved as a PASS is refused. On the key the baseline ran
// it on, a CPU cell skipped now fails (nothing on that key skips it); on another key it stays a warning.
TEST(Check, ABrokenBaselineCellIsNoReferenceAndASkipOnItsKeyFails) {
  Dirs d("check-broken");
  Results r = probe_results();
  set_fps(cell_of(r, SEQ()), {FA, FE, FA});  // a deterministic target, two outputs: FAIL
  std::string base_dir = d.results("base", r);
  auto saved = run_cli("baseline save " + base_dir);
  ASSERT_EQ(saved.code, 0) << saved.err;
  const std::string baseline = base_dir + "/baseline.json";
  Results now = probe_results();
  set_fps(cell_of(now, SEQ()), {FE, FE, FE});  // one of the baseline's two outputs
  auto res = run_cli("check " + d.results("now", now) + " --baseline " + baseline + " --format json");
  EXPECT_EQ(res.code, 0) << res.out << res.err;
  bool warned = false;
  const nlohmann::json top = nlohmann::json::parse(res.out);
  for (auto& f : top["check"]["findings"])
    if (f["target"] == SEQ()) {
      EXPECT_NE(f["verdict"], "PASS") << f;
      if (f["verdict"] == "WARN" && f["message"].get<std::string>().find("broke its promise of determinism (2 distinct "
                                                                          "outputs)") != std::string::npos)
        warned = true;
    }
  EXPECT_TRUE(warned) << res.out;
  // The same entry saved as a PASS contradicts its own outputs.
  nlohmann::json b = nlohmann::json::parse(slurp(fs::path(baseline)));
  for (auto& e : b["entries"])
    if (e["target"] == SEQ()) e["verdict"] = "PASS";
  const fs::path lie = d.root / "lie.json";
  std::ofstream(lie) << b.dump(1);
  res = run_cli("check " + d.results("now2", now) + " --baseline " + lie.string());
  EXPECT_EQ(res.code, 2) << res.out;
  EXPECT_NE(res.err.find("verdict is PASS, but the cell promised determinism and gave 2 distinct outputs"),
            std::string::npos)
      << res.err;

  // A skip on the baseline's own key: FAIL, whatever the reason says. (A target that needs nothing the machine may
  // lack skips no cell: such results are refused before any check, on any CPU.)
  Results good = probe_results();
  const std::string good_dir = d.results("good", good);
  ASSERT_EQ(run_cli("baseline save " + good_dir).code, 0);
  Results skipped = good;
  for (auto& o : skipped.observations)
    if (o.target == SEQ()) o = test::not_run(W(), SEQ(), ObsStatus::kSkipped, "no CUDA device", 3);
  res = run_cli("check " + d.results("skipped", skipped) + " --baseline " + good_dir + "/baseline.json");
  EXPECT_EQ(res.code, 2) << res.out << res.err;
  EXPECT_NE(res.err.find("status skipped ('no CUDA device'), but " + SEQ() + " runs "), std::string::npos) << res.err;
  skipped.machine["cpu_model"] = "Other CPU 1";
  res = run_cli("check " + d.results("skipped-other", skipped) + " --baseline " + good_dir + "/baseline.json");
  EXPECT_EQ(res.code, 2) << res.out << res.err;
}
