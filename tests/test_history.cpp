// The SQLite run history (store/history.hpp) and `detaudit history`. Every test
// uses its own temporary database: the user's ~/.local/share is never touched.
#include <pwd.h>
#include <sqlite3.h>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/training_helpers.hpp"

#include "cli_helpers.hpp"
#include "store/history.hpp"
#include "probes/child.hpp"
#include "tests/fixtures.hpp"
#include "tests/interrupt_scope.hpp"

namespace fs = std::filesystem;
using namespace detaudit;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::run_cli;
using detaudit::cli_test::slurp;

namespace {

// Sets (or unsets) an environment variable for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = std::string(v);
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

std::string fp(char c) { return test::fingerprint(c); }

nlohmann::json machine(const std::string& host, const std::string& openblas = "0.3.21") {
  return {{"hostname", host},
          {"os", "Linux 6.1.0 x86_64"},
          {"cpu_model", "Test CPU 9000"},
          {"cores", 8},
          {"cpu_features", {"fma", "avx2", "avx"}},
          {"compiler", "gcc 12.2.0"},
          {"libraries", {{"openblas", openblas}, {"onednn", "3.0.0"}}},
          {"gpus", nlohmann::json::array()}};
}

Observation cell(const std::string& workload, const std::string& target, std::vector<std::string> fps,
                 ObsStatus status = ObsStatus::kOk) {
  // The specs as a run writes them (canonical): the history refuses any other spelling.
  Observation o = test::ran(test::canon_workload(workload), test::canon_target(target), fps);
  o.status = status;
  o.seconds = std::vector<double>(fps.size(), 0.25);
  o.verdict = status == ObsStatus::kOk && o.distinct == 1 ? Verdict::kPass : Verdict::kFail;
  // (A cell that ran without a distance says why; a FAIL of one says which finding gave it.)
  o.verdict_reason = *o.verdict == Verdict::kFail ? "NaN or infinity where the oracle has a number (or the reverse)"
                                                  : "test (not compared with the oracle)";
  return o;
}

// A finished probe run of one workload on three targets (a PASS, a FAIL that varied, a crash): a cell of every
// target and workload of its plan, as the history requires of a finished run.
Results results(const std::string& started, const std::string& host, const std::string& fp_matmul,
                const std::string& openblas = "0.3.21") {
  Results r;
  r.started_at = started;
  r.finished_at = started;
  r.command = "detaudit probe --suite quick --repeats 3";
  r.machine = machine(host, openblas);
  r.observations.push_back(cell("matmul?m=8", "cpu?order=sequential", {fp_matmul, fp_matmul, fp_matmul}));
  r.observations.push_back(cell("matmul?m=8", "cpu?order=atomic", {fp('1'), fp('2'), fp('1')}));
  Observation crashed = cell("matmul?m=8", "cpu?isa=avx512", {}, ObsStatus::kCrashed);
  crashed.reason = "SIGILL (Illegal instruction)";
  crashed.repeats = 3;
  r.observations.push_back(crashed);
  return r;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

int64_t sql_int(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  int64_t v = -1;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
    v = sqlite3_column_int64(s, 0);
  else
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(h);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return v;
}

std::string sql_text(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  std::string v;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
    v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  else
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(h);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return v;
}

void sql_exec(const fs::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char* msg = nullptr;
  int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &msg);
  EXPECT_EQ(rc, SQLITE_OK) << (msg ? msg : "");
  sqlite3_free(msg);
  sqlite3_close(h);
}

// A database made by an older detaudit: schema version 1, frozen as it was released.
const char* kSchemaV1 = R"sql(
CREATE TABLE machines (key TEXT PRIMARY KEY NOT NULL, cpu_model TEXT NOT NULL, cpu_features TEXT NOT NULL,
  cores INTEGER NOT NULL, gpus TEXT NOT NULL, identity TEXT NOT NULL, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('probe', 'train', 'check', 'qualify')),
  started_at TEXT NOT NULL, finished_at TEXT NOT NULL, recorded_at TEXT NOT NULL, command TEXT NOT NULL,
  results_dir TEXT NOT NULL, tool_version TEXT NOT NULL, tool_commit TEXT NOT NULL,
  machine_key TEXT NOT NULL REFERENCES machines(key), hostname TEXT NOT NULL, machine TEXT NOT NULL,
  software TEXT NOT NULL, exit_code INTEGER NOT NULL, cells INTEGER NOT NULL, pass INTEGER NOT NULL,
  fail INTEGER NOT NULL, expected INTEGER NOT NULL, warn INTEGER NOT NULL, skip INTEGER NOT NULL,
  unjudged INTEGER NOT NULL, training_runs INTEGER NOT NULL);
CREATE TABLE cells (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, workload TEXT NOT NULL,
  target TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL, verdict TEXT NOT NULL,
  verdict_reason TEXT NOT NULL, repeats INTEGER NOT NULL, distinct_outputs INTEGER NOT NULL,
  fingerprints TEXT NOT NULL, err_ratio REAL, median_seconds REAL, PRIMARY KEY (run_id, workload, target)) WITHOUT ROWID;
PRAGMA application_id = 1685348725;
PRAGMA user_version = 1;
INSERT INTO machines VALUES ('00112233aabbccdd', 'Old CPU', 'avx', 4, '[]', 'IDENTITY', '2025-01-01T00:00:00Z',
  '2025-01-01T00:00:00Z');
INSERT INTO runs VALUES (1, 'probe', '2025-01-01T00:00:00Z', '2025-01-01T00:01:00Z', '2025-01-01T00:01:00Z',
  'detaudit probe', '/r/old', '0.0.9', 'v0.0.9', '00112233aabbccdd', 'old-host', 'MACHINE',
  '{"tool_version": "0.0.9", "tool_commit": "v0.0.9", "libraries": {"openblas": "0.3.13"}}', 0, 1, 1, 0, 0, 0, 0, 0, 0);
INSERT INTO cells VALUES (1, 'matmul?m=8', 'cpu?order=sequential', 'ok', '', 'PASS', '', 3, 1,
  'cccccccccccccccccccccccccccccccc', NULL, 0.5);
)sql";

// A history with a fingerprint change: 3 runs at fingerprint a on openblas 0.3.21, then 2 runs at
// fingerprint b on openblas 0.3.26, all on host-a; one run on host-b (same hardware) in between.
fs::path history_with_change(const fs::path& dir) {
  fs::path db = dir / "h.db";
  std::string err;
  const char* days[] = {"2026-11-28T10:00:00Z", "2026-11-29T10:00:00Z", "2026-11-30T12:00:00Z"};
  for (auto* d : days)
    EXPECT_TRUE(succeeded(record_run(db, RunKind::kProbe, results(d, "host-a", fp('a')), dir / "r1", 0), &err)) << err;
  EXPECT_TRUE(
      succeeded(record_run(db, RunKind::kProbe, results("2026-11-30T13:00:00Z", "host-b", fp('a')), dir / "r2", 0), &err))
      << err;
  Results later = results("2026-12-01T09:00:00Z", "host-a", fp('b'), "0.3.26");
  later.tool_commit = "v0.1.0-5-gdef";
  EXPECT_TRUE(succeeded(record_run(db, RunKind::kProbe, later, dir / "r3", 1), &err)) << err;
  later.started_at = later.finished_at = "2026-12-02T09:00:00Z";
  EXPECT_TRUE(succeeded(record_run(db, RunKind::kProbe, later, dir / "r4", 1), &err)) << err;
  return db;
}

}  // namespace

TEST(HistoryPath, ResolutionOrder) {
  const fs::path u = fs::temp_directory_path() / ("detaudit-test-home-" + std::to_string(::getpid()));
  fs::create_directories(u);
  const std::string home_u = u.string();
  ScopedEnv h("DETAUDIT_HISTORY", "/env/history.db"), x("XDG_DATA_HOME", "/xdg"), home("HOME", home_u.c_str());
  std::string path, err;
  HistoryFlags f;
  f.file = "/flag/h.db";
  ASSERT_TRUE(succeeded(resolve_history_path(f, &path), &err)) << err;
  EXPECT_EQ(path, "/flag/h.db");
  f.file.clear();
  ASSERT_TRUE(succeeded(resolve_history_path(f, &path), &err)) << err;
  EXPECT_EQ(path, "/env/history.db");
  {
    ScopedEnv none("DETAUDIT_HISTORY", nullptr);
    ASSERT_TRUE(succeeded(resolve_history_path(f, &path), &err)) << err;
    EXPECT_EQ(path, "/xdg/detaudit/history.db");
    {
      ScopedEnv relative("XDG_DATA_HOME", "relative/dir");  // not absolute: ignored, as the XDG spec says
      ASSERT_TRUE(succeeded(resolve_history_path(f, &path), &err)) << err;
      EXPECT_EQ(path, home_u + "/.local/share/detaudit/history.db");
    }
    {
      ScopedEnv unset("XDG_DATA_HOME", nullptr);
      ASSERT_TRUE(succeeded(resolve_history_path(f, &path), &err)) << err;
      EXPECT_EQ(path, home_u + "/.local/share/detaudit/history.db");
      {
        // A home that does not exist is not made: no place for the history.
        ScopedEnv gone("HOME", "/nonexistent/detaudit-home");
        EXPECT_FALSE(succeeded(resolve_history_path(f, &path), &err));
        EXPECT_NE(err.find("HOME (/nonexistent/detaudit-home) is not a directory"), std::string::npos) << err;
        EXPECT_FALSE(fs::exists("/nonexistent"));
      }
      // No HOME (a daemon's child: Slurm runs its health check so): the user's home in the password database.
      ScopedEnv no_home("HOME", nullptr);
      const struct passwd* pw = ::getpwuid(::geteuid());
      std::error_code ec;
      if (pw && pw->pw_dir && fs::is_directory(pw->pw_dir, ec)) {
        ASSERT_TRUE(succeeded(resolve_history_path(f, &path), &err)) << err;
        EXPECT_EQ(path, std::string(pw->pw_dir) + "/.local/share/detaudit/history.db");
      } else {
        EXPECT_FALSE(succeeded(resolve_history_path(f, &path), &err));
        EXPECT_NE(err.find("--no-history"), std::string::npos) << err;
      }
    }
  }
  f.disabled = true;
  ASSERT_TRUE(succeeded(resolve_history_path(f, &path), &err)) << err;
  EXPECT_EQ(path, "");
  f.file = "/flag/h.db";
  EXPECT_FALSE(succeeded(resolve_history_path(f, &path), &err));
  EXPECT_FALSE(fs::exists("/env")) << "resolving creates nothing";
  fs::remove_all(u);
}

TEST(HistoryMachineKey, HardwareOnlyAndStable) {
  nlohmann::json a = machine("host-a"), b = machine("host-b", "0.3.26");
  EXPECT_EQ(machine_key(a), machine_key(b)) << "hostname and library versions are not in the key";
  EXPECT_EQ(machine_key(a).size(), 16u);
  nlohmann::json reordered = a;
  reordered["cpu_features"] = {"avx", "avx2", "fma"};
  EXPECT_EQ(machine_key(a), machine_key(reordered));
  nlohmann::json more_cores = a;
  more_cores["cores"] = 16;
  EXPECT_NE(machine_key(a), machine_key(more_cores));
  nlohmann::json gpu = a, other_gpu = a;
  gpu["gpus"] = {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}, {"sm_count", 132},
                  {"uuid", "GPU-1"}}};
  other_gpu["gpus"] = {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}, {"sm_count", 132},
                        {"uuid", "GPU-2"}}};
  EXPECT_NE(machine_key(a), machine_key(gpu));
  EXPECT_EQ(machine_key(gpu), machine_key(other_gpu)) << "a GPU's serial (uuid) is not its kind";
  EXPECT_EQ(machine_key(nlohmann::json()), machine_key(nlohmann::json::object()));
}

TEST(History, RecordAndQueryRoundTrip) {
  fs::path dir = fresh_dir("history-roundtrip");
  fs::path db = dir / "nested" / "folder" / "history.db";  // the parent folders are created
  Results r = results("2026-11-30T12:00:00Z", "host-a", fp('a'));
  r.observations[0].oracle = OracleDistance{};
  r.observations[0].oracle->err_ratio = 0.25;
  r.training = {training_run({{"key", "b|cpu?threads=2|1000|0"}, {"model", "autoencoder"}, {"design", "sony2021"}, {"condition", "b"},
                               {"target", "cpu?threads=2"}, {"seed", 1000}, {"replicate", 0}, {"status", "ok"},
                               {"final_loss", 0.125}, {"curve", {0.125}}, {"weights_fingerprint", fp('e')}})};
  r.command = "detaudit qualify --level 2";
  std::string err;
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kQualify, r, (dir / "results").string(), 1), &err)) << err;

  EXPECT_EQ(sql_int(db, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(sql_int(db, "PRAGMA application_id"), kHistoryApplicationId);
  EXPECT_EQ(sql_text(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(sql_int(db, "SELECT exit_code FROM runs"), 1);
  EXPECT_EQ(sql_int(db, "SELECT pass FROM runs"), 1);
  EXPECT_EQ(sql_int(db, "SELECT fail FROM runs"), 2);
  EXPECT_EQ(sql_int(db, "SELECT training_runs FROM runs"), 1);
  EXPECT_EQ(sql_text(db, "SELECT hostname FROM runs"), "host-a");
  EXPECT_EQ(sql_text(db, "SELECT machine_key FROM runs"), machine_key(r.machine));
  EXPECT_EQ(sql_text(db, "SELECT cpu_model FROM machines"), "Test CPU 9000");
  EXPECT_EQ(sql_text(db, "SELECT results_dir FROM runs"), (dir / "results").string());
  EXPECT_EQ(nlohmann::json::parse(sql_text(db, "SELECT software FROM runs"))["libraries"]["openblas"], "0.3.21");
  EXPECT_EQ(sql_text(db, "SELECT weights_fingerprint FROM training"), fp('e'));
  EXPECT_EQ(sql_text(db, "SELECT fingerprints FROM cells WHERE target = '" + test::canon_target("cpu?order=atomic") + "'"), fp('1') + " " + fp('2'));

  HistoryQueryResult q;
  ASSERT_TRUE(succeeded(query_history(db.string(), {}, &q), &err)) << err;
  ASSERT_TRUE(q.exists);
  EXPECT_EQ(q.runs, 1);
  ASSERT_EQ(q.cells.size(), 4u);  // three probe cells and the training cell beside them
  ASSERT_EQ(q.machines.size(), 1u);
  const CellRecord* tc = nullptr;
  for (auto& c : q.cells)
    if (c.training) tc = &c;
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->workload.rfind("train ", 0), 0u) << tc->workload;
  EXPECT_EQ(tc->repeats, 1);
  EXPECT_EQ(q.machines[0].hostnames, std::vector<std::string>{"host-a"});
  EXPECT_EQ(q.machines[0].cores, 8);
  const CellRecord* mm = nullptr;
  for (auto& c : q.cells)
    if (c.workload == test::canon_workload("matmul?m=8") && c.target == test::canon_target("cpu?order=sequential")) mm = &c;
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->target, test::canon_target("cpu?order=sequential"));
  EXPECT_EQ(mm->status, "ok");
  EXPECT_EQ(mm->verdict, "PASS");
  EXPECT_EQ(mm->distinct, 1);
  EXPECT_EQ(mm->repeats, 3);
  EXPECT_EQ(mm->fingerprints, std::vector<std::string>{fp('a')});
  ASSERT_TRUE(mm->err_ratio.has_value());
  EXPECT_DOUBLE_EQ(*mm->err_ratio, 0.25);
  EXPECT_DOUBLE_EQ(mm->median_seconds.value_or(-1), 0.25);
  EXPECT_EQ(mm->software["tool_version"], r.tool_version);

  // Filters: exact when a recorded name equals it, else substring.
  HistoryFilter f;
  f.target = "order=atomic";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.target_match, "substring");
  EXPECT_EQ(q.cells.size(), 1u);
  f.target = "threads=";  // every canonical cpu target names its threads: the three cells and the training cell
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.cells.size(), 4u);
  f.target = test::canon_target("cpu?order=atomic");
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.target_match, "exact");
  EXPECT_EQ(q.cells.size(), 1u);
  f.target = "cuda";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.target_match, "none");
  EXPECT_TRUE(q.cells.empty());
  f = {};
  f.machine = "host";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.machine_match, "substring");
  EXPECT_EQ(q.cells.size(), 4u);
  f.machine = machine_key(r.machine).substr(0, 6);
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.cells.size(), 4u);
  f = {};
  f.since = "2026-12-01T00:00:00Z";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_TRUE(q.cells.empty());

  // The same observation recorded again (a check of the same results directory) counts once.
  r.command = "detaudit check results --baseline b.json";
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kCheck, r, (dir / "results").string(), 0), &err)) << err;
  ASSERT_TRUE(succeeded(query_history(db.string(), {}, &q), &err)) << err;
  EXPECT_EQ(q.runs, 2);
  EXPECT_EQ(q.cells.size(), 4u);

  double median = -1;
  int n = -1;
  ASSERT_TRUE(succeeded(
      median_seconds_history(db.string(), test::canon_workload("matmul?m=8"),
                             test::canon_target("cpu?order=sequential"), machine_key(r.machine), &median, &n),
      &err))
      << err;
  EXPECT_EQ(n, 1);
  EXPECT_DOUBLE_EQ(median, 0.25);
  // The run itself, resumed in its folder (as qualify resumes its probe), is no reference for its own cells: its
  // rows are left out (the folder in another spelling is the same folder), another run's are not.
  for (const std::string& own : {(dir / "results").string(), (dir / "." / "results").string()}) {
    ASSERT_TRUE(succeeded(median_seconds_history(db.string(), test::canon_workload("matmul?m=8"),
                                                 test::canon_target("cpu?order=sequential"), machine_key(r.machine),
                                                 &median, &n, own, r.started_at),
                          &err))
        << err;
    EXPECT_EQ(n, 0) << own;
  }
  ASSERT_TRUE(succeeded(median_seconds_history(db.string(), test::canon_workload("matmul?m=8"),
                                               test::canon_target("cpu?order=sequential"), machine_key(r.machine),
                                               &median, &n, (dir / "other").string(), r.started_at),
                        &err))
      << err;
  EXPECT_EQ(n, 1);
  ASSERT_TRUE(succeeded(
      median_seconds_history(db.string(), "matmul?m=8", "cpu?order=sequential", "0000000000000000", &median, &n),
      &err));
  EXPECT_EQ(n, 0);
  ASSERT_TRUE(succeeded(median_seconds_history((dir / "missing.db").string(), "w", "t", "k", &median, &n), &err))
      << err;
  EXPECT_EQ(n, 0);
  EXPECT_FALSE(fs::exists(dir / "missing.db")) << "reading never creates";

  // Every kind of run the tool records is one the database accepts (a fleet's nodes were refused once).
  for (RunKind k : kRunKinds) {
    Results rk = r;
    if (k == RunKind::kProbe) rk.training.clear();     // a probe trains nothing
    if (k == RunKind::kTrain) rk.observations.clear();  // a training design probes nothing
    rk.command = std::string("detaudit ") + run_kind_name(k);
    if (k == RunKind::kQualify) rk.command += " --level 2";  // (a qualify that trains: level 2 or 3)
    if (k == RunKind::kProbe) rk.command += " --repeats 3";   // (its cells' repeats)
    // (train names the model it trains, and the design its one run is all of)
    if (k == RunKind::kTrain)
      rk.command += " " + rk.training.at(0).model + " --seeds 1 --replicates 1 --targets 'cpu?threads=2'";
    // (a healthcheck trains nothing, writes no folder, times nothing and judges against a reference, not an oracle)
    // and its reasons name the bits and the CPU it writes; it exits 1 for its FAIL cells)
    if (k == RunKind::kHealthcheck) {
      rk.training.clear();
      for (Observation& o : rk.observations) {
        o.seconds.clear(), o.oracle.reset();
        o.verdict_reason = o.verdict == Verdict::kPass
                               ? "every run gave the reference's bits (" + o.fingerprints[0].substr(0, 8) + ")"
                           : o.status == ObsStatus::kOk
                               ? "cpu 1 (core 1, package 0): other bits in " + o.workload + " on " + o.target +
                                     " (reference 00000000, here " + o.fingerprints[1].substr(0, 8) + ")"
                               : "cpu 1 (core 1, package 0): " + o.workload + " on " + o.target + " crashed: " + o.reason;
      }
    }
    EXPECT_TRUE(succeeded(record_run(db.string(), k, rk, k == RunKind::kHealthcheck ? "" : "x",
                                     k == RunKind::kHealthcheck ? 1 : 0),
                          &err))
        << run_kind_name(k) << ": " << err;
  }
  EXPECT_EQ(sql_text(db, "SELECT group_concat(kind, ' ') FROM (SELECT kind FROM runs WHERE results_dir LIKE '%/x' "
                         "OR kind = 'healthcheck' ORDER BY id)"),
            "probe train check qualify fleet healthcheck");
  HistoryQueryResult all;
  EXPECT_TRUE(succeeded(query_history(db.string(), {}, &all), &err)) << err;
  fs::remove_all(dir);
}

TEST(History, MissingDatabaseIsAnEmptyHistory) {
  fs::path dir = fresh_dir("history-missing");
  HistoryQueryResult q;
  std::string err;
  ASSERT_TRUE(succeeded(query_history((dir / "none.db").string(), {}, &q), &err)) << err;
  EXPECT_FALSE(q.exists);
  EXPECT_TRUE(q.cells.empty());
  EXPECT_FALSE(fs::exists(dir));
}

TEST(History, MigratesFromAnEmptyFile) {
  fs::path dir = fresh_dir("history-v0");
  fs::create_directories(dir);
  fs::path db = dir / "h.db";
  std::ofstream(db).close();  // 0 bytes: an SQLite database of version 0
  std::string err;
  HistoryQueryResult q;
  ASSERT_TRUE(succeeded(query_history(db.string(), {}, &q), &err)) << err;
  EXPECT_FALSE(q.exists) << "an empty file is an empty history";
  EXPECT_EQ(fs::file_size(db), 0u) << "reading does not write";
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kProbe, results("2026-11-30T12:00:00Z", "h", fp('a')), "r", 0), &err))
      << err;
  EXPECT_EQ(sql_int(db, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM cells"), 3);
  fs::remove_all(dir);
}

TEST(History, MigratesFromVersion1KeepingItsRunsAndCells) {
  fs::path dir = fresh_dir("history-v1");
  fs::create_directories(dir);
  fs::path db = dir / "h.db";
  // The old run's machine, its key and its machines row, as detaudit has always made them from it.
  const nlohmann::json old_machine = {{"cpu_model", "Old CPU"}, {"cpu_features", {"avx"}}, {"cores", 4}};
  std::string v1 = kSchemaV1;
  for (auto [from, to] : {std::pair{std::string("00112233aabbccdd"), machine_key(old_machine)},
                          std::pair{std::string("IDENTITY"), machine_identity(old_machine).dump()},
                          std::pair{std::string("MACHINE"), old_machine.dump()}})
    for (size_t at; (at = v1.find(from)) != std::string::npos;) v1.replace(at, from.size(), to);
  sql_exec(db, v1);
  ASSERT_EQ(sql_int(db, "PRAGMA user_version"), 1);
  std::string err;
  Results r = results("2026-11-30T12:00:00Z", "h", fp('a'));
  r.training = {training_run({{"key", "d|cpu|1000|0"}, {"condition", "d"}, {"target", "cpu"}, {"seed", 1000}, {"replicate", 0},
                               {"status", "ok"}, {"final_loss", 0.5}, {"curve", {0.5}}, {"weights_fingerprint", fp('e')}})};
  const int64_t old_cells = sql_int(db, "SELECT count(*) FROM cells");
  ASSERT_GT(old_cells, 0);
  r.command = "detaudit qualify --level 2";
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kQualify, r, "r", 0), &err)) << err;
  EXPECT_EQ(sql_int(db, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM runs"), 2);
  // Version 3 rebuilt the runs table: the old run's cells are still there, and foreign keys are on again.
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM cells WHERE run_id = (SELECT min(id) FROM runs)"), old_cells);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_by_machine'"), 1);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM training"), 1);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'cells_by_cell'"), 1);
  // Version 4 gave the old run the plan its own rows name, which they are then read against.
  EXPECT_EQ(sql_text(db, "SELECT plan FROM runs WHERE id = (SELECT min(id) FROM runs)"),
            R"({"targets":["cpu?order=sequential"],"workloads":["matmul?m=8"]})");
  HistoryQueryResult q;
  HistoryFilter f;
  f.workload = "matmul";  // the old row's short spelling and the new row's canonical spec: one cell
  f.target = "order=sequential";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  ASSERT_EQ(q.cells.size(), 2u);
  EXPECT_EQ(q.cells[0].hostname, "old-host");
  EXPECT_EQ(q.cells[0].fingerprints, std::vector<std::string>{std::string(32, 'c')});
  r.command = "detaudit fleet --level 2";
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kFleet, r, "f", 0), &err)) << err;
  EXPECT_EQ(sql_text(db, "SELECT kind FROM runs WHERE results_dir LIKE '%/f'"), "fleet");
  fs::remove_all(dir);
}

// Version 5 gave each training row recorded before it the verdict its status gives: a crash, timeout or error FAILs,
// a skip is a SKIP, a finished run PASSes, or WARNs where it diverged (no final loss).
TEST(History, MigratesVersion4TrainingRowsToTheVerdictTheirStatusGives) {
  fs::path dir = fresh_dir("history-v4");
  fs::path db = dir / "h.db";
  Results r = results("2026-11-30T12:00:00Z", "h", fp('a'));
  r.observations.clear();
  // (Four seeds of (b), as `--seeds 4` runs them: (d)'s replicates of one seed would also be judged against each other.)
  auto run = [](int rep, const char* status, nlohmann::json extra) {
    const int seed = 1000 + rep;
    nlohmann::json j = {{"key", fmt::format("b|cpu|{}|0", seed)},
                        {"model", "autoencoder"},
                        {"design", "sony2021"},
                        {"condition", "b"},
                        {"target", "cpu"},
                        {"seed", seed},
                        {"replicate", 0},
                        {"status", status}};
    j.update(extra);
    return training_run(j);
  };
  r.training = {run(0, "ok", {{"final_loss", 0.5}, {"curve", {0.5}}, {"weights_fingerprint", fp('e')}}),
                run(1, "ok", {{"final_loss", nullptr}, {"curve", {nullptr}}, {"weights_fingerprint", fp('e')}}),
                run(2, "crashed", {{"reason", "SIGSEGV"}}), run(3, "skipped", {{"reason", "no GPU"}})};
  r.command = "detaudit train autoencoder --seeds 4 --targets cpu";
  std::string err;
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kTrain, r, (dir / "r").string(), 1), &err)) << err;
  EXPECT_EQ(sql_text(db, "SELECT group_concat(verdict, ' ') FROM (SELECT verdict FROM training ORDER BY seed)"),
            "PASS WARN FAIL SKIP");
  // The same database as version 4 wrote it: no verdict column (and none of version 6's rows_fingerprint).
  sql_exec(db, "ALTER TABLE training DROP COLUMN verdict; ALTER TABLE cells DROP COLUMN rows_fingerprint; "
               "PRAGMA user_version = 4;");
  // A reader migrates it in memory and leaves the file as it is.
  {
    const std::string before = read_bytes(db);
    HistoryQueryResult q;
    ASSERT_TRUE(succeeded(query_history(db.string(), {}, &q), &err)) << err;
    EXPECT_EQ(q.cells.size(), 1u);
    EXPECT_EQ(read_bytes(db), before) << "history only reads";
    EXPECT_EQ(sql_int(db, "PRAGMA user_version"), 4);
  }
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kTrain, r, (dir / "r2").string(), 1), &err)) << err;
  EXPECT_EQ(sql_int(db, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(sql_text(db, "SELECT group_concat(verdict, ' ') FROM (SELECT verdict FROM training ORDER BY run_id, seed)"),
            "PASS WARN FAIL SKIP PASS WARN FAIL SKIP");
  HistoryQueryResult q;
  ASSERT_TRUE(succeeded(query_history(db.string(), {}, &q), &err)) << err;
  // As version 5 wrote it: no rows_fingerprint column. Read in memory, left as it is; migrated when recorded into.
  sql_exec(db, "ALTER TABLE cells DROP COLUMN rows_fingerprint; PRAGMA user_version = 5;");
  {
    const std::string before = read_bytes(db);
    ASSERT_TRUE(succeeded(query_history(db.string(), {}, &q), &err)) << err;
    EXPECT_EQ(read_bytes(db), before) << "history only reads";
  }
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kTrain, r, (dir / "r3").string(), 1), &err)) << err;
  EXPECT_EQ(sql_int(db, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM pragma_table_info('cells') WHERE name = 'rows_fingerprint'"), 1);
  // As version 6 wrote it: a run's kind could not be healthcheck (the CHECK of its runs table). Migrated when recorded
  // into: the runs are kept, and a healthcheck's run (its cells untimed, judged against a reference) joins them.
  const int64_t runs_before = sql_int(db, "SELECT count(*) FROM runs");
  sql_exec(db,
           "CREATE TABLE runs_6 AS SELECT * FROM runs; DROP TABLE runs; "
           "CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('probe', 'train', 'check', "
           "'qualify', 'fleet')), started_at TEXT NOT NULL, finished_at TEXT NOT NULL, recorded_at TEXT NOT NULL, "
           "command TEXT NOT NULL, results_dir TEXT NOT NULL, tool_version TEXT NOT NULL, tool_commit TEXT NOT NULL, "
           "machine_key TEXT NOT NULL REFERENCES machines(key), hostname TEXT NOT NULL, machine TEXT NOT NULL, software "
           "TEXT NOT NULL, exit_code INTEGER NOT NULL, cells INTEGER NOT NULL, pass INTEGER NOT NULL, fail INTEGER NOT "
           "NULL, expected INTEGER NOT NULL, warn INTEGER NOT NULL, skip INTEGER NOT NULL, unjudged INTEGER NOT NULL, "
           "training_runs INTEGER NOT NULL, plan TEXT NOT NULL DEFAULT ''); INSERT INTO runs SELECT * FROM runs_6; DROP "
           "TABLE runs_6; CREATE INDEX runs_by_machine ON runs(machine_key, started_at); PRAGMA user_version = 6;");
  ASSERT_TRUE(succeeded(query_history(db.string(), {}, &q), &err)) << err;
  Results hc;
  hc.started_at = hc.finished_at = "2026-12-01T10:00:00Z";
  hc.command = "detaudit healthcheck --reference site.json";
  hc.machine = machine("node7");
  Observation o = cell("matmul?m=8", "cpu?order=sequential", {fp('a'), fp('a')});
  o.seconds.clear();
  o.oracle.reset();
  o.verdict_reason = "every run gave the reference's bits (aaaaaaaa), on every CPU and GPU it ran on";
  hc.observations = {o};
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kHealthcheck, hc, "", 0), &err)) << err;
  EXPECT_EQ(sql_int(db, "PRAGMA user_version"), kHistorySchemaVersion);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM runs"), runs_before + 1);
  EXPECT_EQ(sql_text(db, "SELECT kind FROM runs ORDER BY id DESC LIMIT 1"), "healthcheck");
  ASSERT_TRUE(succeeded(query_history(db.string(), {}, &q), &err)) << err;
  // What a healthcheck does not record: a cell with a time, a verdict other than PASS and FAIL, a PASS whose reason does
  // not name its bits, an exit code its cells do not give (1 without a FAIL, 0 of no cell), a run longer than its
  // budget.
  for (const char* change :
       {"UPDATE cells SET median_seconds = 0.5 WHERE run_id = (SELECT max(id) FROM runs)",
        "UPDATE cells SET verdict = 'WARN' WHERE run_id = (SELECT max(id) FROM runs)",
        "UPDATE cells SET verdict_reason = 'fine' WHERE run_id = (SELECT max(id) FROM runs)",
        "UPDATE runs SET exit_code = 1 WHERE id = (SELECT max(id) FROM runs)",
        "DELETE FROM cells WHERE run_id = (SELECT max(id) FROM runs); UPDATE runs SET cells = 0, pass = 0 WHERE id = "
        "(SELECT max(id) FROM runs)",
        "UPDATE runs SET started_at = '2026-11-28T10:00:00Z' WHERE id = (SELECT max(id) FROM runs)"}) {
    const fs::path copy = dir / "changed.db";
    fs::copy_file(db, copy, fs::copy_options::overwrite_existing);
    sql_exec(copy, change);
    EXPECT_FALSE(succeeded(query_history(copy.string(), {}, &q), &err)) << change;
    EXPECT_NE(err.find("changed by another program"), std::string::npos) << err;
  }
  fs::remove_all(dir);
}

// A filter that spells a recorded target another way (keys in another order, defaults written out) matches it.
TEST(History, AFilterMatchesTheSpecItSpells) {
  fs::path dir = fresh_dir("history-spelling");
  fs::path db = dir / "h.db";
  std::string err;
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kProbe, results("2026-11-30T12:00:00Z", "h", fp('a')),
                                   (dir / "r").string(), 0),
                        &err))
      << err;
  HistoryQueryResult q;
  HistoryFilter f;
  f.target = "cpu?isa=auto&order=sequential";  // no cell's text, nor part of one: the spec of "cpu?order=sequential"
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.target_match, "canonical");
  ASSERT_EQ(q.cells.size(), 1u);
  EXPECT_EQ(q.cells[0].workload.rfind("matmul?m=8&", 0), 0u) << q.cells[0].workload;
  f.target = "cpu?order=sequential&threads=7";  // another target: still nothing
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.target_match, "none");
  EXPECT_TRUE(q.cells.empty());
  fs::remove_all(dir);
}

TEST(History, RefusesANewerSchemaAndForeignDatabases) {
  fs::path dir = fresh_dir("history-newer");
  fs::create_directories(dir);
  std::string err;
  Results r = results("2026-11-30T12:00:00Z", "h", fp('a'));

  fs::path newer = dir / "newer.db";
  ASSERT_TRUE(succeeded(record_run(newer.string(), RunKind::kProbe, r, "r", 0), &err)) << err;
  sql_exec(newer, "PRAGMA user_version = 99");
  std::string before = read_bytes(newer);
  EXPECT_FALSE(succeeded(record_run(newer.string(), RunKind::kProbe, r, "r", 0), &err));
  EXPECT_NE(err.find("made by a newer detaudit"), std::string::npos) << err;
  EXPECT_NE(err.find(newer.string()), std::string::npos) << err;
  HistoryQueryResult q;
  EXPECT_FALSE(succeeded(query_history(newer.string(), {}, &q), &err));
  EXPECT_NE(err.find("made by a newer detaudit"), std::string::npos) << err;
  EXPECT_EQ(read_bytes(newer), before);

  fs::path foreign = dir / "foreign.db";
  sql_exec(foreign, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine');");
  before = read_bytes(foreign);
  EXPECT_FALSE(succeeded(record_run(foreign.string(), RunKind::kProbe, r, "r", 0), &err));
  EXPECT_NE(err.find("not a detaudit history"), std::string::npos) << err;
  EXPECT_EQ(read_bytes(foreign), before);

  fs::path mismatched = dir / "mismatched.db";  // says version 2, lacks the tables
  sql_exec(mismatched, "PRAGMA application_id = 1685348725; PRAGMA user_version = 2; CREATE TABLE runs (id);");
  EXPECT_FALSE(succeeded(record_run(mismatched.string(), RunKind::kProbe, r, "r", 0), &err));
  EXPECT_NE(err.find("do not match"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
  fs::remove_all(dir);
}

TEST(History, CorruptFileIsAnErrorAndLeftAsItIs) {
  fs::path dir = fresh_dir("history-corrupt");
  fs::create_directories(dir);
  std::string err;
  Results r = results("2026-11-30T12:00:00Z", "h", fp('a'));

  // Garbage bytes.
  fs::path garbage = dir / "garbage.db";
  {
    std::ofstream f(garbage, std::ios::binary);
    for (int i = 0; i < 8192; ++i) f.put(char((i * 131 + 7) & 0xff));
  }
  std::string before = read_bytes(garbage);
  EXPECT_FALSE(succeeded(record_run(garbage.string(), RunKind::kProbe, r, "r", 0), &err));
  EXPECT_NE(err.find(garbage.string()), std::string::npos) << err;
  EXPECT_NE(err.find("not a database"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
  HistoryQueryResult q;
  EXPECT_FALSE(succeeded(query_history(garbage.string(), {}, &q), &err));
  EXPECT_NE(err.find(garbage.string()), std::string::npos) << err;
  double median;
  int n;
  EXPECT_FALSE(succeeded(median_seconds_history(garbage.string(), "w", "t", "k", &median, &n), &err));
  EXPECT_EQ(read_bytes(garbage), before);

  // A real history, truncated to half its size.
  fs::path truncated = dir / "truncated.db";
  // (Few runs of many cells: each record checks every row before it, so many small runs cost their square.)
  for (int i = 0; i < 5; ++i) {
    Results big = r;  // one target, 80 workloads
    big.observations.clear();
    for (int k = 0; k < 80; ++k)
      big.observations.push_back(cell(fmt::format("reduce?op=sum&n={}", 1000 + k), "cpu-ref",
                                      std::vector<std::string>(3, fp(char('a' + k % 6)))));
    ASSERT_TRUE(succeeded(record_run(truncated.string(), RunKind::kProbe, big, fmt::format("r{}", i), 0), &err)) << err;
  }
  ASSERT_FALSE(fs::exists(truncated.string() + "-wal")) << "the last connection checkpointed";
  auto size = fs::file_size(truncated);
  ASSERT_GT(size, 16384u);
  fs::resize_file(truncated, size / 2);
  before = read_bytes(truncated);
  EXPECT_FALSE(succeeded(record_run(truncated.string(), RunKind::kProbe, r, "r", 0), &err));
  EXPECT_NE(err.find(truncated.string()), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos);
  EXPECT_EQ(read_bytes(truncated), before);
  EXPECT_FALSE(succeeded(query_history(truncated.string(), {}, &q), &err));
  EXPECT_EQ(read_bytes(truncated), before);

  // Shorter than an SQLite header.
  fs::path stub = dir / "stub.db";
  std::ofstream(stub) << "SQLite";
  EXPECT_FALSE(succeeded(record_run(stub.string(), RunKind::kProbe, r, "r", 0), &err));
  EXPECT_NE(err.find("not a database"), std::string::npos) << err;
  EXPECT_EQ(read_bytes(stub), "SQLite");

  // A folder where the file should be.
  EXPECT_FALSE(succeeded(record_run(dir.string(), RunKind::kProbe, r, "r", 0), &err));
  EXPECT_NE(err.find("directory"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(History, TwoConcurrentWritersLoseNothing) {
  fs::path dir = fresh_dir("history-concurrent");
  fs::create_directories(dir);
  fs::path db = dir / "h.db";  // created by whichever writer comes first
  constexpr int kRuns = 50;
  pid_t pids[2];
  for (int w = 0; w < 2; ++w) {
    pids[w] = fork();
    ASSERT_GE(pids[w], 0);
    if (pids[w] == 0) {
      int failed = 0;
      for (int i = 0; i < kRuns; ++i) {
        std::string err;
        Results r = results("2026-11-30T12:00:00Z", fmt::format("host-{}", w), fp('a'));
        r.command = fmt::format("detaudit probe --repeats 3 writer {} run {}", w, i);
        if (!succeeded(record_run(db.string(), RunKind::kProbe, r, fmt::format("r{}-{}", w, i), 0), &err)) {
          fprintf(stderr, "writer %d: %s\n", w, err.c_str());
          ++failed;
        }
      }
      _exit(failed ? 1 : 0);
    }
  }
  for (pid_t p : pids) {
    int st = 0;
    ASSERT_EQ(waitpid(p, &st, 0), p);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a writer failed (its error is on stderr)";
  }
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM runs"), 2 * kRuns);
  EXPECT_EQ(sql_int(db, "SELECT count(DISTINCT command) FROM runs"), 2 * kRuns);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM cells"), 2 * kRuns * 3);
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM machines"), 1);
  EXPECT_EQ(sql_text(db, "PRAGMA integrity_check"), "ok");
  fs::remove_all(dir);
}

TEST(History, TimelinesOneSegmentPerChangeWithTheSoftwareDifference) {
  fs::path dir = fresh_dir("history-timeline");
  fs::create_directories(dir);
  fs::path db = history_with_change(dir);
  HistoryQueryResult q;
  std::string err;
  HistoryFilter f;
  f.target = "cpu?order=sequential";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  auto t = cell_timelines(q.cells);
  ASSERT_EQ(t.size(), 1u) << "host-a and host-b are one machine (same hardware)";
  ASSERT_EQ(t[0].segments.size(), 2u);
  auto& s0 = t[0].segments[0];
  auto& s1 = t[0].segments[1];
  EXPECT_EQ(s0.state, "fp " + fp('a'));
  EXPECT_EQ(s0.observations, 4);
  EXPECT_EQ(s0.hostnames, (std::vector<std::string>{"host-a", "host-b"}));
  EXPECT_EQ(s0.first_at, "2026-11-28T10:00:00Z");
  EXPECT_EQ(s0.last_at, "2026-11-30T13:00:00Z");
  EXPECT_EQ(s1.state, "fp " + fp('b'));
  EXPECT_EQ(s1.observations, 2);
  EXPECT_EQ(s1.first_at, "2026-12-01T09:00:00Z");
  ASSERT_EQ(s1.changes.size(), 2u);
  EXPECT_EQ(s1.changes[0].path, "tool_commit");
  EXPECT_EQ(s1.changes[0].after, "v0.1.0-5-gdef");
  EXPECT_EQ(s1.changes[1].path, "libraries.openblas");
  EXPECT_EQ(s1.changes[1].before, "0.3.21");
  EXPECT_EQ(s1.changes[1].after, "0.3.26");

  // --machine: a hostname selects that host's runs, a key (or its prefix) every host of the hardware.
  f.machine = "host-b";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.machine_match, "exact");
  ASSERT_EQ(q.cells.size(), 1u);
  EXPECT_EQ(q.cells[0].hostname, "host-b");
  f.machine = machine_key(machine("x")).substr(0, 4);
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  EXPECT_EQ(q.machine_match, "substring");
  EXPECT_EQ(q.cells.size(), 6u);
  f.machine.clear();

  // A nondeterministic cell is one stretch however its outputs vary; a crash is its status.
  f.target = "cpu?order=atomic";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  t = cell_timelines(q.cells);
  ASSERT_EQ(t.size(), 1u);
  ASSERT_EQ(t[0].segments.size(), 1u);
  EXPECT_EQ(t[0].segments[0].state, "nondeterministic");
  EXPECT_EQ(t[0].segments[0].max_distinct, 2);
  f.target = "isa=avx512";
  ASSERT_TRUE(succeeded(query_history(db.string(), f, &q), &err)) << err;
  t = cell_timelines(q.cells);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].segments[0].state, "crashed");

  auto d = software_diff({{"a", 1}, {"libs", {{"x", "1"}}}}, {{"libs", {{"x", "2"}, {"y", "3"}}}});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].path, "a");
  EXPECT_EQ(d[0].after, "(absent)");
  EXPECT_EQ(d[1].path, "libs.x");
  EXPECT_EQ(d[2].before, "(absent)");
  fs::remove_all(dir);
}

TEST(History, ParseSince) {
  std::string out, err;
  ASSERT_TRUE(succeeded(parse_since("2026-12-01", &out), &err)) << err;
  EXPECT_EQ(out, "2026-12-01T00:00:00Z");
  ASSERT_TRUE(succeeded(parse_since("2026-12-01T09:30", &out), &err)) << err;
  EXPECT_EQ(out, "2026-12-01T09:30:00Z");
  ASSERT_TRUE(succeeded(parse_since("2026-12-01 09:30:15.250Z", &out), &err)) << err;
  EXPECT_EQ(out, "2026-12-01T09:30:15Z");
  ASSERT_TRUE(succeeded(parse_since("2026-12-01T01:30:00+02:00", &out), &err)) << err;
  EXPECT_EQ(out, "2026-11-30T23:30:00Z");
  ASSERT_TRUE(succeeded(parse_since("2026-12-01T20:00:00-0500", &out), &err)) << err;
  EXPECT_EQ(out, "2026-12-02T01:00:00Z");
  for (const char* bad : {"", "yesterday", "2026-13-01", "2026-02-30", "2026-12-01T25:00", "2026-12-01T09",
                          "2026-12-01T09:30:00+2", "2026-12-01x", "26-12-01", "2026-12-01T09:30:00Zjunk"}) {
    EXPECT_FALSE(succeeded(parse_since(bad, &out), &err)) << bad;
    EXPECT_NE(err.find("--since"), std::string::npos);
  }
}

TEST(HistoryCli, ShowsTheChangeAndTheSoftwareDifference) {
  fs::path dir = fresh_dir("history-cli");
  fs::create_directories(dir);
  fs::path db = history_with_change(dir);
  const std::string seq = test::canon_target("cpu?order=sequential");
  auto r = run_cli("history --history " + db.string() + " --target '" + seq + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("target '" + seq + "': exact match"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(test::canon_workload("matmul?m=8") + " @ " + seq + "  [changed 1 time]"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2026-11-28 10:00 to 2026-11-30 13:00  fp aaaaaaaaaaaaaaaa  4 runs  host-a, host-b"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("-> 2026-12-01 09:00 to 2026-12-02 09:00  fp bbbbbbbbbbbbbbbb  2 runs  host-a"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("software: tool_commit "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libraries.openblas 0.3.21 -> 0.3.26"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(machine_key(machine("x"))), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");

  // Substring filters, --changed, --since.
  r = run_cli("history --history " + db.string() + " --target cpu --changed");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("target 'cpu': substring match"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu?order=sequential"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("@ cpu?order=atomic"), std::string::npos) << "--changed hides unchanged cells\n" << r.out;
  EXPECT_NE(r.out.find("3 cells, 1 with a change"), std::string::npos) << r.out;
  r = run_cli("history --history " + db.string() + " --since 2026-12-01 --target cpu?order=sequential");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("[no change]"), std::string::npos) << r.out;

  // JSON.
  r = run_cli("history --history " + db.string() + " --format json --workload matmul --target order=sequential");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["filters"]["workload"]["match"], "substring");
  ASSERT_EQ(j["cells"].size(), 1u);
  auto& segs = j["cells"][0]["machines"][0]["segments"];
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[1]["fingerprints"][0], fp('b'));
  EXPECT_EQ(segs[1]["changes"][1]["path"], "libraries.openblas");
  EXPECT_EQ(j["summary"]["changed"], 1);

  // Errors: a bad date and a damaged file exit 2 naming what; a missing database is an empty history.
  r = run_cli("history --history " + db.string() + " --since 2026-02-30");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--since '2026-02-30'"), std::string::npos) << r.err;
  fs::path garbage = dir / "garbage.db";
  std::ofstream(garbage) << std::string(4096, 'x');
  r = run_cli("history --history " + garbage.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(garbage.string()), std::string::npos) << r.err;
  EXPECT_EQ(slurp(garbage), std::string(4096, 'x'));
  r = run_cli("history --history " + (dir / "none.db").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("no history yet at " + (dir / "none.db").string()), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "none.db"));
  r = run_cli("history --history " + (dir / "none.db").string() + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out, nullptr, false)["exists"], false) << r.out;
  fs::remove_all(dir);
}

// Ctrl-C while another process holds the history's lock ends the wait at once (it waited out 10 s): with a
// signal already raised, the write fails saying so, and the database is left as it was.
TEST(History, ASignalEndsTheWaitForALockedHistory) {
  fs::path dir = fresh_dir("history-locked");
  fs::create_directories(dir);
  const fs::path db = dir / "h.db";
  std::string err;
  Results r = results("2026-11-30T12:00:00Z", "h", fp('a'));
  ASSERT_TRUE(succeeded(record_run(db.string(), RunKind::kProbe, r, "r", 0), &err)) << err;
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  bool wrote = true;
  {
    test::InterruptScope interrupts;
    ::raise(SIGINT);
    wrote = succeeded(record_run(db.string(), RunKind::kProbe, r, "r2", 0), &err);
  }
  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  EXPECT_FALSE(wrote);
  EXPECT_NE(err.find("the wait for it was interrupted by SIGINT"), std::string::npos) << err;
  EXPECT_EQ(sql_int(db, "SELECT count(*) FROM runs"), 1);
  fs::remove_all(dir);
}

// A training cell is its design's with its settings: two designs of one name on one machine (2 batches, then 3) are
// two cells, never one deterministic cell whose bits "changed" with no software difference (a false alarm).
TEST(History, TwoDesignsOfOneNameAreTwoTrainingCells) {
  const fs::path d = fresh_dir("history-designs");
  cli_test::write_idx(d / "data", 64, 64);
  const std::string db = (d / "h.db").string();
  for (int batches : {2, 3}) {
    const auto r = run_cli(fmt::format("train autoencoder --seeds 2 --replicates 2 --window 1 --batches {} --targets "
                                       "'cpu?threads=2' --data {} --out {} --history {}",
                                       batches, (d / "data").string(), (d / fmt::format("b{}", batches)).string(), db));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
  }
  const auto all = run_cli("history --history " + db);
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("train autoencoder/sony2021 (d) [seeds 2, replicates 2, 2 batches of 64, window 1, data seed 1"),
            std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("train autoencoder/sony2021 (d) [seeds 2, replicates 2, 3 batches of 64, window 1, data seed 1"),
            std::string::npos)
      << all.out;
  const auto changed = run_cli("history --history " + db + " --changed");
  ASSERT_EQ(changed.code, 0) << changed.err;
  EXPECT_EQ(changed.out.find("train autoencoder/"), std::string::npos) << changed.out;
  // A check of a training run records the runs it checked under its own command (which asks for no design): the
  // history reads it back, and records into it go on.
  // (Another run of the same design: a run checked against the baseline saved from it judges nothing.)
  const std::string base = (d / "b2.json").string();
  ASSERT_EQ(run_cli("baseline save " + (d / "b2").string() + " --out " + base).code, 0);
  ASSERT_EQ(run_cli(fmt::format("train autoencoder --seeds 2 --replicates 2 --window 1 --batches 2 --targets "
                                "'cpu?threads=2' --data {} --out {} --no-history",
                                (d / "data").string(), (d / "again").string()))
                .code,
            0);
  const auto check = run_cli("check " + (d / "again").string() + " --baseline " + base + " --allow-unjudged --history " + db);
  ASSERT_EQ(check.code, 0) << check.out << check.err;
  const auto after = run_cli("history --history " + db);
  EXPECT_EQ(after.code, 0) << after.err;
  // The settings a label carries are the ones the run's command asked for: a plan edited to another design is refused.
  sql_exec(db, "UPDATE runs SET plan = json_set(plan, '$.design.batches', 3) WHERE kind = 'train' AND "
               "json_extract(plan, '$.design.batches') = 2");
  const auto edited = run_cli("history --history " + db);
  EXPECT_EQ(edited.code, 2) << edited.out;
  EXPECT_NE(edited.err.find("a plan whose design is not the one its command asks for (it asks for batches 2, but the plan's design has 3)"), std::string::npos)
      << edited.err;
  fs::remove_all(d);
}
