// Verdicts that do not flicker with the scheduler: a target permitted to vary that happened not to is a
// PASS (qualify's race control asks the other question in a row of its own); a check against a
// baseline does not warn about cells the baseline itself skipped; the history does not call a
// nondeterministic cell's one-output runs a change.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gates/baseline.hpp"
#include "gates/check.hpp"
#include "store/history.hpp"
#include "gates/qualify.hpp"
#include "gates/verdict.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;

namespace {

// k >= 64: cpu?order=atomic&threads=2 may race on this gemm (its promise is nondeterministic).
const std::string& gemm() {
  static const std::string w = test::canon_workload("matmul?m=8&n=8&k=515");
  return w;
}
const std::string& atomic() {
  static const std::string t = test::canon_target("cpu?order=atomic&threads=2");
  return t;
}

// Judged on the fixtures' machine; every ok cell within its summation error bound.
Results judged(std::vector<Observation> obs) {
  Results r;
  r.machine = test::machine_json();
  for (auto& o : obs)
    if (o.status == ObsStatus::kOk) {
      o.oracle = OracleDistance{};
      o.oracle->err_ratio = 0.3;
      o.oracle->bound_k = 515;
    }
  r.observations = std::move(obs);
  judge(&r);
  return r;
}

std::vector<std::string> outputs(int n, int distinct) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(test::fingerprint(char('a' + (i % distinct))));
  return v;
}

}  // namespace

TEST(SteadyVerdicts, PermittedToVaryButDidNotIsAPass) {
  Results r = judged({test::ran(gemm(), atomic(), outputs(10, 1)),
                      test::ran(test::canon_workload("matmul?m=8&n=8&k=516"), atomic(), outputs(10, 1))});
  const Observation& o = r.observations[0];
  ASSERT_TRUE(o.verdict);
  EXPECT_EQ(*o.verdict, Verdict::kPass) << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("permitted to vary"), std::string::npos) << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("no variation seen in 10 runs"), std::string::npos) << o.verdict_reason;
  // Seen varying, it is what was promised.
  Results v = judged({test::ran(gemm(), atomic(), outputs(10, 3))});
  EXPECT_EQ(*v.observations[0].verdict, Verdict::kExpected) << v.observations[0].verdict_reason;
}

TEST(SteadyVerdicts, QualifysRaceControlIsItsOwnRow) {
  const std::string seq = test::canon_target("cpu?order=sequential&threads=1");
  // None of the cells permitted to vary varied: the control did not show a race (WARN, not required).
  QualifyCheck none = race_control_check(judged({test::ran(gemm(), atomic(), outputs(5, 1))}));
  EXPECT_EQ(none.name, "race control: cells permitted to vary");
  EXPECT_EQ(none.verdict, Verdict::kWarn) << none.detail;
  EXPECT_FALSE(none.required);
  EXPECT_NE(none.detail.find("none of the 1 cells permitted to vary"), std::string::npos) << none.detail;
  // One did: PASS, with the count.
  QualifyCheck some =
      race_control_check(judged({test::ran(gemm(), atomic(), outputs(5, 2)), test::ran(gemm(), seq, outputs(5, 1))}));
  EXPECT_EQ(some.verdict, Verdict::kPass) << some.detail;
  EXPECT_NE(some.detail.find("1 of 1 cells permitted to vary did"), std::string::npos) << some.detail;
  // Nothing there may vary: nothing to say.
  EXPECT_EQ(race_control_check(judged({test::ran(gemm(), seq, outputs(5, 1))})).verdict, Verdict::kSkip);
}

TEST(SteadyVerdicts, CheckDoesNotWarnForCellsTheBaselineSkipped) {
  const std::string gpu = test::canon_target("cuda:0?order=tree");
  const std::string seq = test::canon_target("cpu?order=sequential&threads=1");
  // The baseline: a probe run with a GPU target skipped for want of a device.
  Results base = judged(
      {test::ran(gemm(), seq, outputs(3, 1)), test::not_run(gemm(), gpu, ObsStatus::kSkipped, "no CUDA device", 3)});
  base.plan = {{"suite", "quick"}};
  Baseline b = make_baseline(base, "base");
  // Checked: a run without the GPU target (qualify leaves it out on a machine without a GPU).
  Results now = judged({test::ran(gemm(), seq, outputs(3, 1))});
  now.plan = {{"suite", "quick"}};
  CheckReport rep = check_against_baseline(b, now, "now", "base.json");
  EXPECT_EQ(rep.count(Verdict::kWarn), 0);
  EXPECT_EQ(rep.count(Verdict::kFail), 0);
  bool said = false;
  for (auto& f : rep.findings)
    if (f.target == gpu) {
      EXPECT_EQ(f.verdict, Verdict::kSkip) << f.message;
      EXPECT_EQ(f.message, "skipped in the baseline, not run here");
      said = true;
    }
  EXPECT_TRUE(said);
  // A cell the baseline ran and this run left out is still a warning.
  Results base2 = judged({test::ran(gemm(), seq, outputs(3, 1)), test::ran(gemm(), atomic(), outputs(3, 2))});
  CheckReport rep2 = check_against_baseline(make_baseline(base2, "base2"), now, "now", "base2.json");
  EXPECT_EQ(rep2.count(Verdict::kWarn), 1);
}

TEST(SteadyVerdicts, HistoryDoesNotCallASampleOfAVaryingCellAChange) {
  auto record = [](int run, int distinct, const char* verdict) {
    CellRecord c;
    c.run_id = run;
    c.started_at = "2026-12-0" + std::to_string(run) + "T00:00:00Z";
    c.machine_key = "m";
    c.workload = gemm();
    c.target = atomic();
    c.status = "ok";
    c.verdict = verdict;
    c.repeats = 10;
    c.distinct = distinct;
    for (int i = 0; i < distinct; ++i) c.fingerprints.push_back(test::fingerprint(char('a' + i)));
    return c;
  };
  // Promised nondeterminism: one output (PASS), several (EXPECTED), one again: one stretch, "varies".
  auto t = cell_timelines({record(1, 1, "PASS"), record(2, 3, "EXPECTED"), record(3, 1, "PASS")});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].segments.size(), 1u);
  EXPECT_EQ(t[0].segments[0].state, "nondeterministic");
  EXPECT_EQ(t[0].segments[0].observations, 3);
  // A cell that varied against its promise (FAIL) keeps every change.
  auto f = cell_timelines({record(1, 1, "PASS"), record(2, 3, "FAIL"), record(3, 1, "PASS")});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].segments.size(), 3u);
}
