// `detaudit healthcheck`: the lanes planned from a reference (every backend on every CPU), the judgment of what they
// ran (the CPU, core and package named), then the tool itself on a reference two real ranks agreed on: OK, a core
// whose worker computes other bits (a test hook keyed by CPU), another machine key, a budget nothing fits in; and a
// local Slurm cluster with the healthcheck as its HealthCheckProgram, draining the faulty node and resuming it.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "report/prometheus.hpp"
#include "gates/healthcheck.hpp"
#include "store/history.hpp"
#include "gates/reference.hpp"
#include "probes/env.hpp"
#include "probes/spec.hpp"
#include "tests/cli_helpers.hpp"

namespace detaudit {
namespace {

namespace fs = std::filesystem;
using cli_test::fresh_dir;
using cli_test::run_cli;
using cli_test::slurp;

const std::string kKey = "0123456789abcdef";
const std::string kA(32, 'a'), kB(32, 'b');

std::string canon_target(const std::string& t) {
  Spec s;
  EXPECT_TRUE(parse_target(t, &s).is_ok()) << t;
  return s.str();
}
std::string canon_workload(const std::string& w) {
  Spec s;
  EXPECT_TRUE(parse_workload(w, &s).is_ok()) << w;
  return s.str();
}

// A reference of one key: three cpu targets, two openblas targets and cpu-ref, each with two workloads.
Reference reference_of_backends() {
  Reference r;
  r.keys[kKey] = {{"cpu_model", "EPYC"}, {"libraries.openblas_core", "Haswell"}, {"tool_version", "0.1.0"}};
  const std::vector<std::string> targets = {"cpu-ref",
                                            "cpu?order=sequential&threads=1",
                                            "cpu?order=pairwise&threads=1",
                                            "cpu?order=blocked&threads=2",
                                            "openblas?core=Haswell&threads=1",
                                            "openblas?core=Sandybridge&threads=1"};
  for (auto& t : targets)
    for (auto& w : {"matmul?m=8&n=8&k=8", "reduce?op=sum&n=100"}) {
      ReferenceCell c;
      c.key = kKey, c.target = canon_target(t), c.workload = canon_workload(w), c.fingerprint = kA;
      c.nodes = 2, c.of = 2, c.at = "2026-12-02T00:00:00Z", c.tool_version = "0.1.0";
      r.cells.push_back(c);
    }
  // In the order a loaded reference keeps (Reference::find searches it).
  std::sort(r.cells.begin(), r.cells.end(), [](const ReferenceCell& a, const ReferenceCell& b) {
    return std::tie(a.key, a.workload, a.target) < std::tie(b.key, b.workload, b.target);
  });
  return r;
}

std::vector<CpuPlace> cpus(int n) {
  std::vector<CpuPlace> c;
  for (int i = 0; i < n; ++i) c.push_back({i, i / 2, i / 4});
  return c;
}

std::set<std::string> backends_of(const HealthLane& l) {
  std::set<std::string> b;
  for (auto& x : l.batches) b.insert(x.target.name);
  return b;
}

// Each kind of finding has one name, the one healthcheck.schema.json publishes (and it publishes no other).
TEST(HealthJudge, EveryKindOfFindingHasThePublishedName) {
  std::ifstream f(std::string(DETAUDIT_SOURCE_DIR) + "/schemas/healthcheck.schema.json");
  const nlohmann::json schema = nlohmann::json::parse(f);
  std::set<std::string> published, named;
  for (auto& k : schema["properties"]["findings"]["items"]["properties"]["kind"]["enum"]) published.insert(k);
  for (int k = int(HealthFindingKind::kBits); k <= int(HealthFindingKind::kError); ++k)
    EXPECT_TRUE(named.insert(to_string(HealthFindingKind(k))).second) << to_string(HealthFindingKind(k));
  EXPECT_EQ(named, published);
}

TEST(HealthPlan, EveryCpuRunsEveryBackendAndTheCpusTogetherEveryTarget) {
  const Reference ref = reference_of_backends();
  for (int n : {1, 2, 3, 8}) {
    std::vector<HealthLane> lanes;
    ASSERT_TRUE(plan_health_lanes(ref, kKey, ref.keys.at(kKey), cpus(n), {}, &lanes).is_ok());
    ASSERT_EQ(lanes.size(), size_t(n));
    std::set<std::string> targets;
    for (auto& l : lanes) {
      EXPECT_EQ(backends_of(l), (std::set<std::string>{"cpu", "cpu-ref", "openblas"})) << "cpu " << l.place.cpu;
      for (auto& b : l.batches) {
        targets.insert(b.target.str());
        EXPECT_EQ(b.workloads.size(), 2u);
      }
      // Backends interleaved: a budget cut short still reaches each of them.
      ASSERT_GE(l.batches.size(), 3u);
      EXPECT_EQ((std::set<std::string>{l.batches[0].target.name, l.batches[1].target.name, l.batches[2].target.name}),
                backends_of(l));
    }
    EXPECT_EQ(targets.size(), 6u) << n << " cpus: every target of the reference runs on one of them";
  }
  // --cpus 2 of 8: two lanes, spread over the machine.
  HealthPlanOptions o;
  o.max_cpus = 2;
  std::vector<HealthLane> lanes;
  ASSERT_TRUE(plan_health_lanes(ref, kKey, ref.keys.at(kKey), cpus(8), o, &lanes).is_ok());
  ASSERT_EQ(lanes.size(), 2u);
  EXPECT_EQ(lanes[0].place.cpu, 0);
  EXPECT_EQ(lanes[1].place.cpu, 4);
}

TEST(HealthPlan, AMachineTheReferenceDoesNotKnowIsNamedWithWhatDiffers) {
  const Reference ref = reference_of_backends();
  nlohmann::json here = ref.keys.at(kKey);
  here["libraries.openblas_core"] = "Cooperlake";
  std::vector<HealthLane> lanes;
  const Status st = plan_health_lanes(ref, "fedcba9876543210", here, cpus(2), {}, &lanes);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("no cell of this machine's key fedcba9876543210"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("libraries.openblas_core: Haswell -> Cooperlake"), std::string::npos) << st.message();
  EXPECT_FALSE(plan_health_lanes(Reference{}, kKey, here, cpus(2), {}, &lanes).is_ok()) << "an empty reference";
}

TEST(HealthPlan, GpuCellsOfADeviceThisMachineLacksAreSaidNotLeftOut) {
  Reference ref = reference_of_backends();
  ReferenceCell g = ref.cells.front();
  g.target = canon_target("cuda:0?order=tree");
  ref.cells.push_back(g);
  std::sort(ref.cells.begin(), ref.cells.end(), [](const ReferenceCell& a, const ReferenceCell& b) {
    return std::tie(a.key, a.workload, a.target) < std::tie(b.key, b.workload, b.target);
  });
  std::vector<HealthLane> lanes;
  HealthPlanOptions none;
  const Status st = plan_health_lanes(ref, kKey, ref.keys.at(kKey), cpus(2), none, &lanes);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("but this machine has 0 CUDA devices"), std::string::npos) << st.message();
  HealthPlanOptions one;
  one.gpus = 1;
  ASSERT_TRUE(plan_health_lanes(ref, kKey, ref.keys.at(kKey), cpus(2), one, &lanes).is_ok());
  ASSERT_EQ(lanes.size(), 3u);
  EXPECT_EQ(lanes.back().gpu, 0) << "a lane of its own";
}

Observation ran(const std::string& t, const std::string& w, const std::vector<std::string>& fps) {
  Observation o;
  o.target = canon_target(t), o.workload = canon_workload(w), o.status = ObsStatus::kOk;
  o.warmup_fingerprint = fps.empty() ? "" : fps[0];
  o.fingerprints = fps;
  o.repeats = int(fps.size());
  return o;
}

TEST(HealthJudge, OtherBitsOnOneCpuAreNamedWithItsCoreAndPackage) {
  const Reference ref = reference_of_backends();
  std::vector<HealthLane> lanes;
  ASSERT_TRUE(plan_health_lanes(ref, kKey, ref.keys.at(kKey), {{0, 0, 0}, {13, 6, 1}}, {}, &lanes).is_ok());
  HealthRun run;
  run.seconds = 1.25;
  run.observations = {{0, ran("cpu-ref", "matmul?m=8&n=8&k=8", {kA, kA})},
                      {1, ran("cpu-ref", "matmul?m=8&n=8&k=8", {kA, kA})}};
  HealthOutcome ok = judge_health(ref, kKey, lanes, run, nlohmann::json::array(), 2);
  EXPECT_EQ(ok.decision, Decision::kPass);
  EXPECT_EQ(ok.cells, 2u);
  EXPECT_TRUE(std::regex_match(ok.line, std::regex(R"(detaudit: OK 2 cells on 2 cpus in 1\.2 s \(not reached .*\))")))
      << ok.line << "\n(every backend but cpu-ref unfinished on both CPUs: said)";

  run.observations.push_back({1, ran("openblas?core=Haswell&threads=1", "reduce?op=sum&n=100", {kA, kB})});
  HealthOutcome bad = judge_health(ref, kKey, lanes, run, nlohmann::json::array(), 2);
  EXPECT_EQ(bad.decision, Decision::kFail);
  EXPECT_EQ(bad.status, "FAIL");
  EXPECT_EQ(bad.line, "detaudit: FAIL cpu 13 (core 6, package 1): other bits in " +
                          canon_workload("reduce?op=sum&n=100") + " on " + canon_target("openblas?core=Haswell&threads=1") +
                          " (reference aaaaaaaa, here bbbbbbbb)");
  ASSERT_EQ(to_json(bad)["findings"].size(), 1u);
  EXPECT_EQ(to_json(bad)["findings"][0]["logical_cpu"], 13);
  EXPECT_EQ(to_json(bad)["findings"][0]["action"], "ISOLATE");

  // The warm-up run is judged too on a CPU; a crash is a finding; more findings are counted in the line.
  run.observations.push_back({0, ran("cpu-ref", "reduce?op=sum&n=100", {kA, kA})});
  run.observations.back().obs.warmup_fingerprint = kB;
  Observation crashed = ran("cpu?order=blocked&threads=2", "matmul?m=8&n=8&k=8", {});
  crashed.status = ObsStatus::kCrashed, crashed.reason = "SIGILL (Illegal instruction)";
  run.observations.push_back({0, crashed});
  HealthOutcome more = judge_health(ref, kKey, lanes, run, nlohmann::json::array(), 2);
  EXPECT_EQ(more.findings.size(), 3u);
  EXPECT_NE(more.line.find("; 2 more findings (cpu 0, cpu 13)"), std::string::npos) << more.line;
  EXPECT_EQ(more.line.rfind("detaudit: FAIL cpu 0 (core 0, package 0): ", 0), 0u) << more.line << "\n(by CPU)";

  // One CPU of which nothing finished was not judged: no OK (exit 2, naming it), though the other passed.
  HealthRun half;
  half.seconds = 1;
  half.observations = {{0, ran("cpu-ref", "matmul?m=8&n=8&k=8", {kA, kA})}};
  HealthOutcome part = judge_health(ref, kKey, lanes, half, nlohmann::json::array(), 1);
  EXPECT_EQ(part.decision, Decision::kNotJudged);
  EXPECT_EQ(part.line.rfind("detaudit: ERROR no cell finished on cpu 13 within --budget 1 s (1 of 2 judged)", 0), 0u)
      << part.line;

  // Nothing finished within the budget: nothing judged, exit 2.
  HealthRun none;
  none.cut = 2;
  HealthOutcome empty = judge_health(ref, kKey, lanes, none, nlohmann::json::array(), 0.5);
  EXPECT_EQ(empty.decision, Decision::kNotJudged);
  EXPECT_EQ(empty.line, "detaudit: ERROR no cell finished within --budget 0.5 s (2 cut by it); nothing was judged");
}

TEST(HealthJudge, TheRowsComputedAloneAreJudgedToo) {
  Reference ref;
  ref.keys[kKey] = {{"cpu_model", "EPYC"}};
  ReferenceCell c;
  c.key = kKey, c.target = canon_target("cpu-ref"), c.workload = canon_workload("batchinv?m=8&n=8&k=8&rows=2");
  c.fingerprint = kA, c.rows_fingerprint = kB, c.nodes = 2, c.of = 2, c.at = "2026-12-02T00:00:00Z";
  ref.cells.push_back(c);
  std::vector<HealthLane> lanes;
  ASSERT_TRUE(plan_health_lanes(ref, kKey, ref.keys.at(kKey), cpus(1), {}, &lanes).is_ok());
  HealthRun run;
  Observation o = ran("cpu-ref", "batchinv?m=8&n=8&k=8&rows=2", {kA, kA});
  o.batch = BatchInvariance{2, 0, kA};
  run.observations = {{0, o}};
  HealthOutcome h = judge_health(ref, kKey, lanes, run, nlohmann::json::array(), 1);
  EXPECT_EQ(h.decision, Decision::kFail);
  EXPECT_NE(h.line.find("other bits of the rows computed alone"), std::string::npos) << h.line;
  run.observations[0].obs.batch->rows_fingerprint = kB;
  EXPECT_EQ(judge_health(ref, kKey, lanes, run, nlohmann::json::array(), 1).decision, Decision::kPass);
}

// What the check records is what the history accepts: a cell that gave other bits on two CPUs names both; one that
// gave other bits on one CPU and crashed on another is recorded as the crash it was (no bits, its reason the crash,
// the other CPU named after it); the rows the finding names are the rows recorded.
TEST(HealthJudge, TheRowsItRecordsAreOnesTheHistoryAccepts) {
  Reference ref = reference_of_backends();
  ReferenceCell rows;
  rows.key = kKey, rows.target = canon_target("cpu-ref"), rows.workload = canon_workload("batchinv?m=8&n=8&k=8&rows=2");
  rows.fingerprint = kA, rows.rows_fingerprint = kB, rows.nodes = 2, rows.of = 2, rows.at = "2026-12-02T00:00:00Z";
  ref.cells.push_back(rows);
  std::sort(ref.cells.begin(), ref.cells.end(), [](const ReferenceCell& a, const ReferenceCell& b) {
    return std::tie(a.key, a.workload, a.target) < std::tie(b.key, b.workload, b.target);
  });
  std::vector<HealthLane> lanes;
  ASSERT_TRUE(plan_health_lanes(ref, kKey, ref.keys.at(kKey), {{0, 0, 0}, {13, 6, 1}}, {}, &lanes).is_ok());
  const std::string kC(32, 'c'), kD(32, 'd');
  HealthRun run;
  run.seconds = 1;
  Observation crashed = ran("cpu?order=blocked&threads=2", "reduce?op=sum&n=100", {});
  crashed.status = ObsStatus::kCrashed, crashed.reason = "SIGILL (Illegal instruction)";
  Observation bad_rows = ran("cpu-ref", "batchinv?m=8&n=8&k=8&rows=2", {kA, kA});
  bad_rows.batch = BatchInvariance{2, 0, kD};
  Observation other_rows = bad_rows;
  other_rows.batch->rows_fingerprint = kC;
  run.observations = {{0, ran("cpu-ref", "matmul?m=8&n=8&k=8", {kA, kA})},
                      {1, ran("cpu-ref", "matmul?m=8&n=8&k=8", {kA, kA})},
                      {0, ran("openblas?core=Haswell&threads=1", "reduce?op=sum&n=100", {kA, kB})},
                      {1, ran("openblas?core=Haswell&threads=1", "reduce?op=sum&n=100", {kC, kC})},
                      {0, ran("cpu?order=blocked&threads=2", "reduce?op=sum&n=100", {kB, kB})},
                      {1, crashed},
                      {0, bad_rows},
                      {1, other_rows}};
  const HealthOutcome h = judge_health(ref, kKey, lanes, run, nlohmann::json::array(), 2);
  ASSERT_EQ(h.decision, Decision::kFail);
  Results r = health_results(ref, kKey, lanes, run, h);
  r.machine = {{"hostname", "node7"}, {"cpu_model", "EPYC"}, {"cores", 16}, {"gpus", nlohmann::json::array()}};
  r.command = "detaudit healthcheck --reference site.json";
  r.started_at = r.finished_at = "2026-12-07T10:00:00Z";
  std::map<std::string, const Observation*> by_target;
  for (const Observation& o : r.observations) by_target[o.target + " " + o.workload] = &o;
  const Observation* both = by_target.at(canon_target("openblas?core=Haswell&threads=1") + " " +
                                         canon_workload("reduce?op=sum&n=100"));
  EXPECT_EQ(both->verdict_reason.rfind("cpu 0 (core 0, package 0): other bits in ", 0), 0u) << both->verdict_reason;
  EXPECT_TRUE(both->verdict_reason.ends_with(" (reference aaaaaaaa, here bbbbbbbb); also found on cpu 13 (core 6, "
                                              "package 1)"))
      << both->verdict_reason;
  EXPECT_EQ(both->fingerprints, std::vector<std::string>({kA, kB, kC}));
  const Observation* crash = by_target.at(canon_target("cpu?order=blocked&threads=2") + " " +
                                          canon_workload("reduce?op=sum&n=100"));
  EXPECT_EQ(crash->status, ObsStatus::kCrashed);
  EXPECT_TRUE(crash->fingerprints.empty());
  EXPECT_EQ(crash->verdict_reason.rfind("cpu 13 (core 6, package 1): ", 0), 0u) << crash->verdict_reason;
  EXPECT_TRUE(crash->verdict_reason.ends_with(" crashed: SIGILL (Illegal instruction); also found on cpu 0 (core 0, "
                                               "package 0)"))
      << crash->verdict_reason;
  const Observation* alone = by_target.at(canon_target("cpu-ref") + " " + canon_workload("batchinv?m=8&n=8&k=8&rows=2"));
  ASSERT_TRUE(alone->batch);
  EXPECT_NE(alone->verdict_reason.find(", here " + alone->batch->rows_fingerprint.substr(0, 8) + ")"), std::string::npos)
      << alone->verdict_reason << " vs rows " << alone->batch->rows_fingerprint;
  const fs::path d = fresh_dir("health-records");
  fs::create_directories(d);
  std::string err;
  const Status recorded = record_run((d / "h.db").string(), RunKind::kHealthcheck, r, "", exit_code_of(h.decision));
  ASSERT_TRUE(recorded.is_ok()) << recorded.message();
  HistoryQueryResult q;
  const Status read = query_history((d / "h.db").string(), {}, &q);
  EXPECT_TRUE(read.is_ok()) << read.message();
  // Rows that are not what the check writes are refused: bits "here" that are the reference's, a reason naming another
  // target, words after it, a core the machine lacks, a CPU twice, a CPU on two cores in one run.
  const std::string openblas = canon_target("openblas?core=Haswell&threads=1");
  const std::string of_both = " WHERE target = '" + openblas + "'";
  for (const std::string& change : std::vector<std::string>{
           "UPDATE cells SET verdict_reason = replace(verdict_reason, 'here bbbbbbbb', 'here aaaaaaaa')" + of_both,
        "UPDATE cells SET verdict_reason = replace(verdict_reason, ' on " + openblas + "', ' on " +
            canon_target("cpu-ref") + "')" + of_both,
        "UPDATE cells SET verdict_reason = verdict_reason || ' and more'" + of_both,
        std::string("UPDATE cells SET verdict_reason = replace(verdict_reason, 'core 6, package 1', 'core 60, "
                    "package 1') WHERE verdict = 'FAIL'"),
        "UPDATE cells SET verdict_reason = verdict_reason || ', cpu 13 (core 6, package 1)'" + of_both,
        "UPDATE cells SET verdict_reason = replace(verdict_reason, 'cpu 13 (core 6', 'cpu 13 (core 5')" + of_both}) {
    fs::copy_file(d / "h.db", d / "changed.db", fs::copy_options::overwrite_existing);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((d / "changed.db").c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, change.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << change;
    EXPECT_GE(sqlite3_changes(db), 1) << change;
    sqlite3_close_v2(db);
    const Status st = query_history((d / "changed.db").string(), {}, &q);
    EXPECT_FALSE(st.is_ok()) << change;
    EXPECT_NE(st.message().find("changed by another program"), std::string::npos) << st.message();
  }
  fs::remove_all(d);
}

// ---- the tool --------------------------------------------------------------------------------------------------

// One integer a query of the database at `db` gives (-1: none).
int64_t sql_count(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  int64_t v = -1;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close_v2(h);
  return v;
}

int shell(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const std::string kHealthPlan =
    " --targets 'cpu-ref,cpu?order=blocked&threads=2,openblas?core=Haswell&threads=1'"
    " --workloads 'matmul?m=32&n=32&k=33,reduce?op=sum&n=1000,batchinv?m=16&n=16&k=16&rows=2' --repeats 2";

// The reference two real ranks of this machine agree on (one process per rank, then `fleet report`); with `key_field`
// ("libraries.openblas_core=Bulldozer") both ranks record their machine with that field changed (fleet's test hook),
// as machines of another kind would.
fs::path agreed_reference(const std::string& name, const std::string& plan, const std::string& key_field = "") {
  const fs::path d = fresh_dir(name);
  fs::create_directories(d);
  for (int r = 0; r < 2; ++r) {
    const std::string env =
        key_field.empty() ? "" : "DETAUDIT_FLEET_TEST_KEY=" + std::to_string(r) + ":" + key_field + " ";
    EXPECT_EQ(shell(env + DETAUDIT_EXE + " fleet --rank " + std::to_string(r) + " --ranks 2 --out " + d.string() + plan +
                    " --no-history --quiet >>" + (d / "ranks.log").string() + " 2>&1"),
              0)
        << slurp(d / "ranks.log");
  }
  auto rep = run_cli("fleet report " + d.string() + " --quiet");
  EXPECT_EQ(rep.code, 0) << rep.out << rep.err;
  return d / "reference.json";
}

TEST(Healthcheck, JudgesEveryCpuAgainstTheReferenceAndNamesTheOneThatComputesOtherBits) {
  const fs::path ref = agreed_reference("health-ref", kHealthPlan);
  ASSERT_TRUE(fs::exists(ref));
  // (3 s: with 1 s, a CPU that a test beside it kept busy under the sanitizers finished no cell: exit 2, not judged.)
  const auto ok = run_cli("healthcheck --reference " + ref.string() + " --budget 3");
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  // (A backend that finished no cell on some CPU in so short a budget, as under the sanitizers, is said after the OK.)
  EXPECT_TRUE(std::regex_match(
      ok.out, std::regex(R"(detaudit: OK \d+ cells on \d+ cpus? in \d+\.\d s( \(not reached within the budget: [^\n]*\))?\n)")))
      << ok.out;
  // JSON: every CPU this process may use ran every backend the reference holds.
  const auto js = run_cli("healthcheck --reference " + ref.string() + " --budget 3 --format json");
  ASSERT_EQ(js.code, 0) << js.out << js.err;
  const auto j = nlohmann::json::parse(js.out)["healthcheck"];
  EXPECT_EQ(j["status"], "OK");
  const std::vector<CpuPlace> here = allowed_cpus();
  ASSERT_EQ(j["lanes"].size(), here.size());
  for (auto& l : j["lanes"]) {
    EXPECT_EQ(l["backends"], nlohmann::json({"cpu", "cpu-ref", "openblas"})) << l.dump();
    EXPECT_GE(l["cells"].get<int>(), 1);
  }
  // The workers of one logical CPU flip a bit of every output (a faulty core): FAIL naming that CPU, exit 1.
  const int cpu = here.back().cpu;
  const auto flipped = cli_test::CliRun{
      shell("DETAUDIT_HEALTHCHECK_TEST_FLIP='" + std::to_string(cpu) + ":*' " + DETAUDIT_EXE + " healthcheck --reference " +
            ref.string() + " --budget 3 >" + (ref.parent_path() / "fail.out").string() + " 2>&1"),
      slurp(ref.parent_path() / "fail.out"), ""};
  EXPECT_EQ(flipped.code, 1) << flipped.out;
  const std::string head = "detaudit: FAIL cpu " + std::to_string(cpu) + " (core " + std::to_string(here.back().core) +
                           ", package " + std::to_string(here.back().package) + "): other bits in ";
  EXPECT_EQ(flipped.out.rfind(head, 0), 0u) << flipped.out;
  EXPECT_EQ(std::count(flipped.out.begin(), flipped.out.end(), '\n'), 1) << "one line: " << flipped.out;
  for (auto& c : here)
    if (c.cpu != cpu)
      EXPECT_EQ(flipped.out.find("cpu " + std::to_string(c.cpu) + " ("), std::string::npos) << "only the faulty CPU";
  fs::remove_all(ref.parent_path());
}

TEST(Healthcheck, AMachineOfAnotherKeyOrABudgetNothingFitsInIsNotJudged) {
  // Both ranks with another OpenBLAS core type recorded: a reference of a key this machine does not have.
  const fs::path other = agreed_reference("health-other", " --targets cpu-ref --workloads 'reduce?op=sum&n=1000' --repeats 1",
                                          "libraries.openblas_core=Bulldozer");
  const auto r = run_cli("healthcheck --reference " + other.string() + " --budget 1");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("detaudit: ERROR the reference holds no cell of this machine's key"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libraries.openblas_core: Bulldozer -> "), std::string::npos) << r.out;
  fs::remove_all(other.parent_path());

  // A cell of some seconds (cpu-ref's 512^3 matmul, three runs) in a budget of 0.1 s: nothing judged, exit 2.
  const fs::path big = agreed_reference("health-big", " --targets cpu-ref --workloads 'matmul?m=512&n=512&k=512' --repeats 1");
  const fs::path cut_history = big.parent_path() / "history.db";
  const auto cut = run_cli("healthcheck --reference " + big.string() + " --budget 0.1 --history " + cut_history.string());
  EXPECT_EQ(cut.code, 2) << cut.out << cut.err;
  EXPECT_NE(cut.out.find("detaudit: ERROR no cell finished within --budget 0.1 s"), std::string::npos) << cut.out;
  // A check that judged nothing is no answer to keep.
  EXPECT_LE(sql_count(cut_history, "SELECT count(*) FROM runs"), 0);
  fs::remove_all(big.parent_path());

  // Not a reference: the ERROR line on stdout like every answer of the check, exit 2, and a metrics file that says
  // so (a dashboard must not keep the last good one).
  const fs::path m = fresh_dir("health-metrics");
  fs::create_directories(m);
  const auto none = run_cli("healthcheck --reference /nonexistent/reference.json --metrics " + (m / "h.prom").string());
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.out.rfind("detaudit: ERROR /nonexistent/reference.json: ", 0), 0u) << none.out;
  EXPECT_NE(slurp(m / "h.prom").find("detaudit_health_status{command=\"healthcheck\",host="), std::string::npos);
  EXPECT_NE(slurp(m / "h.prom").find("} 2\n"), std::string::npos) << slurp(m / "h.prom");
  // A metrics path it may not write (a file of someone else's) is refused before anything runs: no line, the file
  // as it was.
  std::ofstream(m / "notes.txt") << "mine\n";
  const auto refused = run_cli("healthcheck --reference /nonexistent/reference.json --metrics " + (m / "notes.txt").string());
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(refused.out.find("detaudit: OK"), std::string::npos) << refused.out;
  EXPECT_NE(refused.err.find("--metrics " + (m / "notes.txt").string() + ": exists and is not a detaudit metrics file"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(slurp(m / "notes.txt"), "mine\n");
  fs::remove_all(m);
}

// ---- the history ------------------------------------------------------------------------------------------------


// The check records into the history by default (the user's, here a home of the test's): a check whose answer is the
// last recorded one's is recorded once a period (--history-every), a change at once; its cells' bits and verdicts
// are what `history` shows; --no-history records nothing; an OK that cannot be recorded is no OK, a FAIL stays one.
TEST(Healthcheck, RecordsItsAnswersInTheHistoryOnceAPeriodAndEveryChange) {
  const fs::path ref = agreed_reference("health-hist", kHealthPlan);
  ASSERT_TRUE(fs::exists(ref));
  const fs::path d = ref.parent_path(), home = d / "home", db = home / ".local/share/detaudit/history.db";
  fs::create_directories(home);
  // As a user runs it: no --history, no DETAUDIT_HISTORY (ctest sets one), the history under HOME.
  const std::string as_user =
      "env -u DETAUDIT_HISTORY -u XDG_DATA_HOME HOME=" + home.string() + " " + DETAUDIT_EXE + " ";
  // (3 s: a CPU that another test keeps busy still finishes a cell, as in the Slurm test below.)
  auto check = [&](const std::string& env, const std::string& args) {
    const fs::path out = d / "hc.out", err = d / "hc.err";
    const int code = shell(env + as_user + "healthcheck --reference " + ref.string() + " --budget 3 --format json " +
                           args + " >" + out.string() + " 2>" + err.string());
    nlohmann::json j = nlohmann::json::parse(slurp(out), nullptr, false);
    if (j.is_discarded() || !j.contains("healthcheck")) {
      ADD_FAILURE() << "not the check's JSON: " << slurp(out) << slurp(err);
      j = {{"healthcheck", {{"history", nlohmann::json::object()}, {"line", ""}}}};
    }
    return std::tuple{code, j["healthcheck"], slurp(err)};
  };
  auto runs = [&](const std::string& where = "1") {
    return sql_count(db, "SELECT count(*) FROM runs WHERE kind = 'healthcheck' AND " + where);
  };
  {
    const auto [code, h, err] = check("", "");
    ASSERT_EQ(code, 0) << h.dump() << err;
    EXPECT_EQ(h["history"]["recorded"], true) << h.dump();
    ASSERT_EQ(runs(), 1);
    // Its cells: each one it ran, PASS with the reference's bits, untimed (every CPU was busy), no oracle distance.
    EXPECT_GE(sql_count(db, "SELECT count(*) FROM cells"), 3);
    EXPECT_EQ(sql_count(db, "SELECT count(*) FROM cells WHERE verdict <> 'PASS' OR distinct_outputs <> 1 OR "
                            "median_seconds IS NOT NULL OR err_ratio IS NOT NULL"),
              0);
    EXPECT_EQ(runs("exit_code = 0 AND results_dir = '' AND command LIKE '% healthcheck %'"), 1);
  }
  {
    // The same answer again, within the period: not recorded, and the JSON says whose answer it is.
    const auto [code, h, err] = check("", "");
    ASSERT_EQ(code, 0) << h.dump() << err;
    EXPECT_EQ(h["history"]["recorded"], false) << h.dump();
    EXPECT_EQ(h["history"]["why"].get<std::string>().rfind("the answer of the check recorded at ", 0), 0u) << h.dump();
    EXPECT_EQ(runs(), 1);
  }
  const int cpu = allowed_cpus().back().cpu;
  {
    // Another answer (one CPU's workers flip a bit) is recorded at once: FAIL cells naming that CPU.
    const auto [code, h, err] = check("DETAUDIT_HEALTHCHECK_TEST_FLIP='" + std::to_string(cpu) + ":*' ", "");
    ASSERT_EQ(code, 1) << h.dump() << err;
    EXPECT_EQ(h["history"]["recorded"], true) << h.dump();
    EXPECT_EQ(runs("exit_code = 1 AND fail > 0"), 1);
    EXPECT_GE(sql_count(db, "SELECT count(*) FROM cells WHERE verdict = 'FAIL' AND verdict_reason LIKE 'cpu " +
                                std::to_string(cpu) + " (core %): other bits in %'"),
              1);
  }
  int64_t recorded = 2;
  if (const std::vector<CpuPlace> here = allowed_cpus(); here.size() > 1) {
    // Another CPU failing is another answer, recorded at once.
    const int other = here.front().cpu;
    const auto [code, h, err] = check("DETAUDIT_HEALTHCHECK_TEST_FLIP='" + std::to_string(other) + ":*' ", "");
    ASSERT_EQ(code, 1) << h.dump() << err;
    EXPECT_EQ(h["history"]["recorded"], true) << h.dump();
    EXPECT_GE(sql_count(db, "SELECT count(*) FROM cells WHERE verdict = 'FAIL' AND verdict_reason LIKE 'cpu " +
                                std::to_string(other) + " (core %'"),
              1);
    EXPECT_EQ(runs(), ++recorded);
  }
  {
    // --history-every 0: every check recorded.
    const auto [code, h, err] = check("", "--history-every 0");
    ASSERT_EQ(code, 0) << h.dump() << err;
    EXPECT_EQ(runs(), ++recorded);
  }
  // `history` reads them back: the cells that changed to other bits and back, with their verdicts.
  const fs::path hist_out = d / "history.out";
  ASSERT_EQ(shell(as_user + "history >" + hist_out.string() + " 2>&1"), 0) << slurp(hist_out);
  EXPECT_NE(slurp(hist_out).find(std::to_string(recorded) + " runs recorded"), std::string::npos) << slurp(hist_out);
  EXPECT_NE(slurp(hist_out).find("  FAIL\n"), std::string::npos) << slurp(hist_out);
  EXPECT_NE(slurp(hist_out).find("[changed "), std::string::npos) << slurp(hist_out);
  {
    const auto [code, h, err] = check("", "--no-history --history-every 0");
    ASSERT_EQ(code, 0) << h.dump() << err;
    EXPECT_EQ(h["history"], nlohmann::json({{"recorded", false}, {"why", "--no-history"}}));
    EXPECT_EQ(runs(), recorded);
  }
  // A history that cannot be written (its folder is a file, a link to the history), or a file that is no history,
  // stops the check before its work: one line, exit 2, the file as it was.
  std::ofstream(d / "file") << "x\n";
  std::ofstream(d / "notes.db") << "not a database\n";
  fs::create_symlink(db, d / "link.db");
  for (const fs::path bad : {d / "file/h.db", d / "notes.db", d / "link.db"}) {
    const auto refused = run_cli("healthcheck --reference " + ref.string() + " --history " + bad.string());
    EXPECT_EQ(refused.code, 2);
    EXPECT_EQ(refused.out, "");
    EXPECT_EQ(refused.err.rfind("detaudit: error: history " + bad.string() + ": ", 0), 0u) << refused.err;
  }
  EXPECT_EQ(slurp(d / "notes.db"), "not a database\n");
  // A healthcheck's row another program changed (a PASS of two outputs) is refused as every changed row is: by
  // `history`, and by recording, where the OK becomes an ERROR of exit 2 that says so and a FAIL stays a FAIL (exit 1,
  // the faulty CPU named), the history's line on stderr.
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h,
                           "UPDATE cells SET fingerprints = fingerprints || ' ' || fingerprints, distinct_outputs = 2 "
                           "WHERE (run_id, workload, target) IN (SELECT run_id, workload, target FROM cells WHERE "
                           "verdict = 'PASS' LIMIT 1)",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close_v2(h);
  }
  ASSERT_NE(shell(as_user + "history >" + hist_out.string() + " 2>&1"), 0);
  EXPECT_NE(slurp(hist_out).find("changed by another program"), std::string::npos) << slurp(hist_out);
  {
    const auto [code, h, err] = check("", "--history-every 0");
    EXPECT_EQ(code, 2) << h.dump() << err;
    EXPECT_EQ(h["line"].get<std::string>().rfind("detaudit: ERROR history " + db.string() + ": ", 0), 0u) << h.dump();
    EXPECT_NE(h["line"].get<std::string>().find("changed by another program"), std::string::npos) << h.dump();
    EXPECT_NE(h["line"].get<std::string>().find("(the check itself: OK "), std::string::npos) << h.dump();
  }
  {
    const auto [code, h, err] = check("DETAUDIT_HEALTHCHECK_TEST_FLIP='" + std::to_string(cpu) + ":*' ", "");
    EXPECT_EQ(code, 1) << h.dump() << err;
    EXPECT_EQ(h["line"].get<std::string>().rfind("detaudit: FAIL cpu " + std::to_string(cpu) + " (", 0), 0u) << h.dump();
    EXPECT_NE(err.find("detaudit: error: history " + db.string() + ": "), std::string::npos) << err;
  }
  EXPECT_EQ(runs(), recorded) << "nothing written to a history another program changed";
  fs::remove_all(d);
}

// ---- --metrics: Prometheus's text format -------------------------------------------------------------------------

TEST(Prometheus, OneHelpAndTypePerFamilyLabelsEscapedAndOneSeriesPerLabelSet) {
  PromText p;
  add_node_metrics(&p, "healthcheck", {{"host", "a\"b\\c\nd"}}, 1, 7,
                        {{{{"cpu", "3"}}, "ISOLATE", "bits", "w @ t"}, {{{"cpu", "3"}}, "ISOLATE", "bits", "w @ t"},
                         {{{"cpu", "4"}}, "RETEST", "error", "w @ t"}});
  const std::string t = p.str();
  EXPECT_EQ(t.rfind("# HELP detaudit_health_status ", 0), 0u) << "the first line names the file as detaudit's";
  EXPECT_NE(t.find("detaudit_health_status{command=\"healthcheck\",host=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("detaudit_findings{command=\"healthcheck\",host=\"a\\\"b\\\\c\\nd\",action=\"ISOLATE\"} 2\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find(",cpu=\"3\",action=\"ISOLATE\",kind=\"bits\",cell=\"w @ t\"} 2\n"), std::string::npos)
      << "the same labels twice are one series, valued 2:\n" << t;
  size_t helps = 0;
  for (size_t at = 0; (at = t.find("# HELP detaudit_finding ", at)) != std::string::npos; ++at) ++helps;
  EXPECT_EQ(helps, 1u);
  // Written atomically over a metrics file of detaudit's, never over another file or through a link.
  const fs::path d = fresh_dir("prom-files");
  fs::create_directories(d);
  ASSERT_TRUE(write_metrics((d / "m.prom").string(), p).is_ok());
  ASSERT_TRUE(write_metrics((d / "m.prom").string(), p).is_ok()) << "its own file is replaced";
  std::ofstream(d / "notes.txt") << "mine\n";
  EXPECT_FALSE(write_metrics((d / "notes.txt").string(), p).is_ok());
  EXPECT_EQ(slurp(d / "notes.txt"), "mine\n");
  fs::create_symlink(d / "m.prom", d / "link.prom");
  EXPECT_FALSE(write_metrics((d / "link.prom").string(), p).is_ok());
  fs::remove_all(d);
}

bool have_promtool() { return shell("command -v promtool >/dev/null 2>&1") == 0; }

// The files healthcheck, fleet report and qualify write with --metrics, as Prometheus's own checker reads them: a
// faulty CPU's findings with its cpu, core and package; a fleet's faulty rank; a qualification.
TEST(Prometheus, TheMetricsFilesOfAFailingRunPassPromtool) {
  if (!have_promtool()) GTEST_SKIP() << "promtool is not installed (Debian's prometheus; scripts/setup-debian.sh)";
  // Three ranks, the third computing other bits for every workload: the reference is the other two's agreement.
  const fs::path d = fresh_dir("prom-fleet");
  fs::create_directories(d);
  for (int r = 0; r < 3; ++r)
    ASSERT_EQ(shell("DETAUDIT_FLEET_TEST_FLIP='2:*' " + std::string(DETAUDIT_EXE) + " fleet --rank " + std::to_string(r) +
                    " --ranks 3 --out " + d.string() + kHealthPlan + " --no-history --quiet >/dev/null 2>&1"),
              0);
  const auto rep = run_cli("fleet report " + d.string() + " --quiet --metrics " + (d / "fleet.prom").string());
  EXPECT_EQ(rep.code, 1) << rep.out << rep.err;
  const std::string fm = slurp(d / "fleet.prom");
  EXPECT_NE(fm.find("detaudit_health_status{command=\"fleet\",host="), std::string::npos) << fm;
  EXPECT_NE(fm.find(",rank=\"2\"} 1\n"), std::string::npos) << fm;
  EXPECT_NE(fm.find(",rank=\"0\"} 0\n"), std::string::npos) << fm;
  EXPECT_NE(fm.find(",rank=\"2\",action=\"ISOLATE\",kind=\"bits\",cell=\""), std::string::npos) << fm;
  // The faulty rank's cells were judged (and failed): judged, not "0 cells" as if it could not be judged.
  EXPECT_NE(fm.find("detaudit_cells_judged{command=\"fleet\",host=\"" + machine_fingerprint().value("hostname", std::string()) +
                    "\",rank=\"2\"} 9\n"),
            std::string::npos)
      << fm;
  EXPECT_EQ(shell("promtool check metrics <" + (d / "fleet.prom").string() + " >" + (d / "pt").string() + " 2>&1"), 0)
      << slurp(d / "pt");
  // The healthcheck, its CPU faulty.
  const int cpu = allowed_cpus().front().cpu;
  const int hc = shell("DETAUDIT_HEALTHCHECK_TEST_FLIP='" + std::to_string(cpu) + ":*' " + DETAUDIT_EXE +
                       " healthcheck --reference " + (d / "reference.json").string() + " --budget 3 --metrics " +
                       (d / "hc.prom").string() + " >/dev/null 2>&1");
  EXPECT_EQ(hc, 1);
  const std::string hm = slurp(d / "hc.prom");
  EXPECT_NE(hm.find("detaudit_health_status{command=\"healthcheck\",host="), std::string::npos) << hm;
  EXPECT_NE(hm.find(",logical_cpu=\"" + std::to_string(cpu) + "\",core=\""), std::string::npos) << hm;
  EXPECT_EQ(shell("promtool check metrics <" + (d / "hc.prom").string() + " >" + (d / "pt").string() + " 2>&1"), 0)
      << slurp(d / "pt");
  // A qualification.
  const auto q = run_cli("qualify --targets cpu-ref --out " + (d / "q").string() + " --no-history --quiet --metrics " +
                         (d / "q.prom").string());
  EXPECT_EQ(q.code, 0) << q.out << q.err;
  EXPECT_NE(slurp(d / "q.prom").find("detaudit_health_status{command=\"qualify\",host="), std::string::npos);
  EXPECT_EQ(shell("promtool check metrics <" + (d / "q.prom").string() + " >" + (d / "pt").string() + " 2>&1"), 0)
      << slurp(d / "pt");
  fs::remove_all(d);
}

// Polls `cond` every 0.2 s for up to `seconds`.
bool eventually(double seconds, const std::function<bool()>& cond) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return cond();
}

// A local Slurm cluster of two nodes (tests/fleet/slurm-cluster.sh, started and stopped by this test by pid) with the
// healthcheck as every node's HealthCheckProgram, run every 4 s with --drain --resume: when the workers of logical
// CPU 0 on n1 compute other bits, n1 is drained with the line naming that CPU and n2 stays idle; with the fault
// gone n1 returns to service; a node an administrator drained stays drained.
TEST(HealthcheckSlurm, DrainsTheNodeWhoseCpuComputesOtherBitsAndResumesIt) {
  const std::string script = std::string(DETAUDIT_SOURCE_DIR) + "/tests/fleet/slurm-cluster.sh";
  if (shell("bash " + script + " check >/dev/null 2>&1") == 77)
    GTEST_SKIP() << "Slurm or munge is not installed (scripts/setup-debian.sh installs them)";
  if (::geteuid() != 0) GTEST_SKIP() << "the local cluster's daemons run as root";
  const std::vector<CpuPlace> here = allowed_cpus();
  const fs::path ref = agreed_reference("health-slurm-ref", kHealthPlan);
  const fs::path c = "/tmp/da-hc-" + std::to_string(getpid());  // short: the cluster's sockets live under it
  fs::remove_all(c);
  fs::create_directories(c);
  {
    // slurmd runs the program with SLURMD_NODENAME set and little else; the switches are files of the test's.
    std::ofstream hc(c / "hc.sh");
    // Each node's history is its own, as on a cluster (slurmd gives its health check SLURMD_NODENAME and no HOME: the
    // default is then the home the password database gives, root's, which is not the test's to write).
    hc << "#!/bin/bash\n"
       << "export PATH=/usr/bin:/bin:/usr/sbin:/sbin SLURM_CONF=" << (c / "slurm.conf").string() << "\n"
       << "export DETAUDIT_HISTORY=" << c.string() << "/history-$SLURMD_NODENAME.db\n"
       << "[ -f " << (c / "armed").string() << " ] || exit 0\n"
       << "if [ \"$SLURMD_NODENAME\" = n1 ] && [ -f " << (c / "fault").string()
       << " ]; then export DETAUDIT_HEALTHCHECK_TEST_FLIP='" << here.front().cpu << ":*'; fi\n"
       << DETAUDIT_EXE << " healthcheck --reference " << ref.string() << " --budget 3 --drain --resume >>"
       << c.string() << "/hc-$SLURMD_NODENAME.log 2>&1\n"
       << "echo \"exit $?\" >>" << c.string() << "/hc-$SLURMD_NODENAME.log\n";
  }
  fs::permissions(c / "hc.sh", fs::perms::owner_all);
  // Every 4 s, each check 3 s: two nodes checking at once on this machine, each on every CPU (a budget of 1 s left a
  // CPU without a finished cell while other tests ran beside them: exit 2, not judged).
  ASSERT_EQ(shell("SLURM_CLUSTER_HEALTHCHECK=" + (c / "hc.sh").string() + " SLURM_CLUSTER_HEALTHCHECK_INTERVAL=4 bash " +
                  script + " start " + c.string() +
                  " >" + (c / "env").string() + " 2>" + (c / "start.err").string()),
            0)
      << slurp(c / "start.err");
  const std::string env = ". " + (c / "env").string() + " && ";
  auto node = [&](const std::string& n) {
    const fs::path o = c / ("sinfo-" + n);
    shell(env + "sinfo -h -N -n " + n + " -o '%t|%E' >" + o.string() + " 2>&1");
    return slurp(o);
  };
  // Lines the checks of node n wrote (each at least two: its line and its exit code).
  auto log_lines = [&](const std::string& n) {
    const std::string log = slurp(c / ("hc-" + n + ".log"));
    return size_t(std::count(log.begin(), log.end(), '\n'));
  };
  std::ofstream(c / "fault").close();
  std::ofstream(c / "armed").close();
  const std::string reason = "detaudit: FAIL cpu " + std::to_string(here.front().cpu) + " (core ";
  const bool drained = eventually(40, [&] { return node("n1").rfind("drain|" + reason, 0) == 0; });
  EXPECT_TRUE(drained) << node("n1") << slurp(c / "hc-n1.log");
  EXPECT_TRUE(eventually(40, [&] { return log_lines("n2") >= 4; })) << "n2's checks ran";
  EXPECT_EQ(node("n2"), "idle|none\n") << slurp(c / "hc-n2.log");
  EXPECT_NE(slurp(c / "hc-n2.log").find("detaudit: OK "), std::string::npos) << slurp(c / "hc-n2.log");
  // The fault gone: n1 passes and, drained by detaudit, is resumed.
  fs::remove(c / "fault");
  EXPECT_TRUE(eventually(40, [&] { return node("n1") == "idle|none\n"; })) << node("n1") << slurp(c / "hc-n1.log");
  EXPECT_NE(slurp(c / "hc-n1.log").find("detaudit: resumed n1"), std::string::npos) << slurp(c / "hc-n1.log");
  // An administrator's drain is not detaudit's to undo.
  ASSERT_EQ(shell(env + "scontrol update NodeName=n2 State=DRAIN Reason='disk replacement'"), 0);
  const size_t before = log_lines("n2");
  EXPECT_TRUE(eventually(40, [&] { return log_lines("n2") >= before + 4; }));
  EXPECT_EQ(node("n2"), "drain|disk replacement\n");
  // Each node's history holds its checks: n1's FAIL, then its OK once the fault was gone; n2's OKs.
  const fs::path h1 = c / "history-n1.db", h2 = c / "history-n2.db";
  EXPECT_GE(sql_count(h1, "SELECT count(*) FROM runs WHERE kind = 'healthcheck' AND exit_code = 1"), 1);
  EXPECT_GE(sql_count(h1, "SELECT count(*) FROM runs WHERE kind = 'healthcheck' AND exit_code = 0 AND id > (SELECT "
                          "min(id) FROM runs WHERE exit_code = 1)"),
            1);
  EXPECT_GE(sql_count(h2, "SELECT count(*) FROM runs WHERE kind = 'healthcheck' AND exit_code = 0"), 1);
  EXPECT_EQ(sql_count(h2, "SELECT count(*) FROM runs WHERE exit_code <> 0"), 0);
  const int stopped = shell("bash " + script + " stop " + c.string() + " >/dev/null 2>&1");
  EXPECT_EQ(stopped, 0);
  fs::remove_all(c);
  fs::remove_all(ref.parent_path());
}

}  // namespace
}  // namespace detaudit
