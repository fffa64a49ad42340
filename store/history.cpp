#include "store/history.hpp"

#include <fmt/format.h>
#include <sqlite3.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <tuple>

#include "probes/child.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "probes/spec.hpp"
#include "probes/workload.hpp"
#include "analysis/stats.hpp"
#include "contract/command_text.hpp"
#include "contract/json_fields.hpp"
#include "gates/healthcheck.hpp"  // kHealthBudgetDefault
#include "gates/verdict.hpp"
#include "kernels/fingerprint.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_design.hpp"

namespace fs = std::filesystem;

namespace detaudit {

namespace {

constexpr int kBusyTimeoutMs = 10000;
constexpr int kMedianWindow = 50;
// What to do about a history detaudit will not use. A command that records into it can also record
// nothing (--no-history); `history`, which only reads it, cannot.
std::string leave_it(bool recording) {
  return std::string(
             "detaudit never repairs, replaces or recreates a history: move the file away, or pass "
             "--history FILE") +
         (recording ? " or --no-history" : "");
}

// ---- schema and migrations ---------------------------------------------------------------------------
// Step i takes a database from version i to version i + 1. A step, once released, never changes: a
// new version is a new step at the end (and its columns in kTables).
const char* const kMigrations[] = {
    // 0 -> 1: machines, runs, cells
    R"sql(
CREATE TABLE machines (
  key TEXT PRIMARY KEY NOT NULL,
  cpu_model TEXT NOT NULL,
  cpu_features TEXT NOT NULL,
  cores INTEGER NOT NULL,
  gpus TEXT NOT NULL,
  identity TEXT NOT NULL,
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('probe', 'train', 'check', 'qualify')),
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  command TEXT NOT NULL,
  results_dir TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  tool_commit TEXT NOT NULL,
  machine_key TEXT NOT NULL REFERENCES machines(key),
  hostname TEXT NOT NULL,
  machine TEXT NOT NULL,
  software TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  cells INTEGER NOT NULL,
  pass INTEGER NOT NULL,
  fail INTEGER NOT NULL,
  expected INTEGER NOT NULL,
  warn INTEGER NOT NULL,
  skip INTEGER NOT NULL,
  unjudged INTEGER NOT NULL,
  training_runs INTEGER NOT NULL
);
CREATE TABLE cells (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  workload TEXT NOT NULL,
  target TEXT NOT NULL,
  status TEXT NOT NULL,
  reason TEXT NOT NULL,
  verdict TEXT NOT NULL,
  verdict_reason TEXT NOT NULL,
  repeats INTEGER NOT NULL,
  distinct_outputs INTEGER NOT NULL,
  fingerprints TEXT NOT NULL,
  err_ratio REAL,
  median_seconds REAL,
  PRIMARY KEY (run_id, workload, target)
) WITHOUT ROWID;
)sql",
    // 1 -> 2: training runs; indexes for `history` and the performance medians
    R"sql(
CREATE TABLE training (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  model TEXT NOT NULL,
  design TEXT NOT NULL,
  condition TEXT NOT NULL,
  target TEXT NOT NULL,
  seed INTEGER NOT NULL,
  replicate INTEGER NOT NULL,
  status TEXT NOT NULL,
  final_loss REAL,
  weights_fingerprint TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE INDEX cells_by_cell ON cells(workload, target);
CREATE INDEX runs_by_machine ON runs(machine_key, started_at);
)sql",
    // 2 -> 3: a fleet's nodes record their runs (kind 'fleet'). SQLite cannot change a CHECK constraint in
    // place: the table is rebuilt under the same name (foreign keys are off during migrations, so dropping
    // the old table deletes none of the cells and training rows that refer to its ids).
    R"sql(
CREATE TABLE runs_3 (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('probe', 'train', 'check', 'qualify', 'fleet')),
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  command TEXT NOT NULL,
  results_dir TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  tool_commit TEXT NOT NULL,
  machine_key TEXT NOT NULL REFERENCES machines(key),
  hostname TEXT NOT NULL,
  machine TEXT NOT NULL,
  software TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  cells INTEGER NOT NULL,
  pass INTEGER NOT NULL,
  fail INTEGER NOT NULL,
  expected INTEGER NOT NULL,
  warn INTEGER NOT NULL,
  skip INTEGER NOT NULL,
  unjudged INTEGER NOT NULL,
  training_runs INTEGER NOT NULL
);
INSERT INTO runs_3 SELECT id, kind, started_at, finished_at, recorded_at, command, results_dir, tool_version,
  tool_commit, machine_key, hostname, machine, software, exit_code, cells, pass, fail, expected, warn, skip,
  unjudged, training_runs FROM runs;
DROP TABLE runs;
ALTER TABLE runs_3 RENAME TO runs;
CREATE INDEX runs_by_machine ON runs(machine_key, started_at);
)sql",
    // 3 -> 4: a run's plan, what its rows are checked against; a run recorded before has the targets and
    // workloads its own rows name.
    R"sql(
ALTER TABLE runs ADD COLUMN plan TEXT NOT NULL DEFAULT '';
UPDATE runs SET plan = json_object(
  'targets', (SELECT json_group_array(t) FROM (SELECT target AS t FROM cells WHERE run_id = runs.id UNION
                                                SELECT target FROM training WHERE run_id = runs.id ORDER BY 1)),
  'workloads', (SELECT json_group_array(w) FROM (SELECT DISTINCT workload AS w FROM cells WHERE run_id = runs.id
                                                  ORDER BY 1)));
)sql",
    // 4 -> 5: a training run's verdict (a finished run that broke its deterministic variant's promise FAILs); a
    // run recorded before has the verdict its status gives.
    R"sql(
ALTER TABLE training ADD COLUMN verdict TEXT NOT NULL DEFAULT '';
UPDATE training SET verdict = CASE WHEN status IN ('crashed', 'timeout', 'error') THEN 'FAIL'
  WHEN status = 'skipped' THEN 'SKIP' WHEN final_loss IS NULL THEN 'WARN' ELSE 'PASS' END;
)sql",
    // 5 -> 6: a batch-invariance cell's rows computed alone (their fingerprint), kept beside the product's so that a
    // change in the rows alone is a change of the cell; a cell recorded before has none ('').
    R"sql(
ALTER TABLE cells ADD COLUMN rows_fingerprint TEXT NOT NULL DEFAULT '';
)sql",
    // 6 -> 7: `healthcheck` records its checks (kind 'healthcheck'); the runs table is rebuilt for its CHECK, as in
    // 2 -> 3.
    R"sql(
CREATE TABLE runs_7 (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('probe', 'train', 'check', 'qualify', 'fleet', 'healthcheck')),
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  command TEXT NOT NULL,
  results_dir TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  tool_commit TEXT NOT NULL,
  machine_key TEXT NOT NULL REFERENCES machines(key),
  hostname TEXT NOT NULL,
  machine TEXT NOT NULL,
  software TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  cells INTEGER NOT NULL,
  pass INTEGER NOT NULL,
  fail INTEGER NOT NULL,
  expected INTEGER NOT NULL,
  warn INTEGER NOT NULL,
  skip INTEGER NOT NULL,
  unjudged INTEGER NOT NULL,
  training_runs INTEGER NOT NULL,
  plan TEXT NOT NULL DEFAULT ''
);
INSERT INTO runs_7 SELECT id, kind, started_at, finished_at, recorded_at, command, results_dir, tool_version,
  tool_commit, machine_key, hostname, machine, software, exit_code, cells, pass, fail, expected, warn, skip,
  unjudged, training_runs, plan FROM runs;
DROP TABLE runs;
ALTER TABLE runs_7 RENAME TO runs;
CREATE INDEX runs_by_machine ON runs(machine_key, started_at);
)sql",
};
static_assert(sizeof kMigrations / sizeof kMigrations[0] == kHistorySchemaVersion);

// The columns each table has at the current version: a database claiming this version must have them.
struct TableColumns {
  const char* table;
  int since_version;
  const char* columns;
};
const TableColumns kTables[] = {
    {"machines", 1, "key, cpu_model, cpu_features, cores, gpus, identity, first_seen, last_seen"},
    {"runs", 1,
     "id, kind, started_at, finished_at, recorded_at, command, results_dir, tool_version, tool_commit, machine_key, "
     "hostname, machine, software, exit_code, cells, pass, fail, expected, warn, skip, unjudged, training_runs"},
    {"cells", 1,
     "run_id, workload, target, status, reason, verdict, verdict_reason, repeats, distinct_outputs, fingerprints, "
     "err_ratio, median_seconds"},
    {"training", 2,
     "run_id, key, model, design, condition, target, seed, replicate, status, final_loss, weights_fingerprint"},
    {"runs", 4, "plan"},
    {"training", 5, "verdict"},
    {"cells", 6, "rows_fingerprint"},
};

// ---- a thin layer over the C API ----------------------------------------------------------------------

struct Db {
  sqlite3* h = nullptr;
  std::string path;
  bool recording = true;  // opened to record a run (not only to read the history)
  ~Db() {
    if (h) sqlite3_close_v2(h);
  }
  std::string errmsg() const { return h ? sqlite3_errmsg(h) : "out of memory"; }
  // "history PATH: what" (one line).
  std::string error(const std::string& what) const { return fmt::format("history {}: {}", path, what); }
  std::string leave_it() const { return detaudit::leave_it(recording); }
};

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { prepared_ = (rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr)) == SQLITE_OK; }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return prepared_; }  // prepared
  void bind(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT); }
  void bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void bind(int i, int v) { sqlite3_bind_int64(s_, i, v); }
  void bind(int i, std::optional<double> v) {
    if (v && std::isfinite(*v))
      sqlite3_bind_double(s_, i, *v);
    else
      sqlite3_bind_null(s_, i);
  }
  int step() { return rc_ = sqlite3_step(s_); }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string text(int i) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
    return p ? std::string(p, size_t(sqlite3_column_bytes(s_, i))) : std::string();
  }
  int64_t integer(int i) const { return sqlite3_column_int64(s_, i); }
  std::optional<double> real(int i) const {
    if (sqlite3_column_type(s_, i) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(s_, i);
  }
  int rc() const { return rc_; }

 private:
  sqlite3_stmt* s_ = nullptr;
  bool prepared_ = false;
  int rc_ = SQLITE_OK;  // of the last prepare or step
};

// SQLite's wait for a lock another process holds: up to kBusyTimeoutMs, in steps of 5 ms, and not a step
// more once a signal came (Ctrl-C while the history was locked waited out the whole 10 s).
int busy_wait(void*, int count) {
  if (interrupted() || count * 5 >= kBusyTimeoutMs) return 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return 1;
}

// What went wrong, in words a user can act on.
std::string describe_sqlite_error(const Db& db, int rc) {
  int primary = rc & 0xff;
  if (primary == SQLITE_NOTADB) return db.error(fmt::format("file is not a database; {}", db.leave_it()));
  if (primary == SQLITE_CORRUPT) return db.error(fmt::format("damaged ({}); {}", db.errmsg(), db.leave_it()));
  if ((primary == SQLITE_BUSY || primary == SQLITE_LOCKED) && interrupted())
    return db.error("locked by another process, and the wait for it was interrupted by " +
                    signal_description(interrupted()));
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    return db.error(fmt::format("still locked by another process after {} s ({}, code {})", kBusyTimeoutMs / 1000, db.errmsg(), rc));
  return db.error(db.errmsg());
}

Status exec(Db& db, const char* sql) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db.h, sql, nullptr, nullptr, &msg);
  if (rc == SQLITE_OK) return Status::ok();
  sqlite3_free(msg);
  return Status::invalid(describe_sqlite_error(db, rc));
}

Status pragma_int(Db& db, const char* sql, int64_t* v) {
  Stmt s(db.h, sql);
  if (!s.ok() || s.step() != SQLITE_ROW) {
    return Status::invalid(describe_sqlite_error(db, s.rc()));
  }
  *v = s.integer(0);
  return Status::ok();
}

// Rolls back on destruction unless committed.
class Transaction {
 public:
  explicit Transaction(Db& db) : db_(db) {}
  ~Transaction() {
    if (open_) sqlite3_exec(db_.h, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Status begin_immediate() {
    Status st = exec(db_, "BEGIN IMMEDIATE");
    open_ = st.is_ok();
    return st;
  }
  Status commit() {
    DETAUDIT_RETURN_IF_ERROR(exec(db_, "COMMIT"));
    open_ = false;
    return Status::ok();
  }

 private:
  Db& db_;
  bool open_ = false;
};

// ---- opening -----------------------------------------------------------------------------------------

// kWrite records a run; kRead reads for a command that records (its pre-check, qualify's timings); kQuery
// reads for `history`, which records nothing.
enum class Mode { kWrite, kRead, kQuery };

// Paths whose integrity this process has checked (reads check once per process; writes every time).
std::mutex g_checked_mutex;
std::set<std::string> g_checked;

Status quick_check(Db& db) {
  Stmt s(db.h, "PRAGMA quick_check(1)");
  if (!s.ok()) {
    return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
  }
  int rc = s.step();
  if (rc != SQLITE_ROW) {
    return Status::invalid(describe_sqlite_error(db, rc));
  }
  std::string r = s.text(0);
  if (r == "ok") return Status::ok();
  std::replace(r.begin(), r.end(), '\n', ' ');
  return Status::invalid(db.error(fmt::format("damaged (quick_check: {}); {}", r, db.leave_it())));
}

// The version, application id and tables of an opened file: is it a detaudit history this tool can use?
Status check_identity(Db& db, int64_t* version) {
  // One snapshot for all the reads below: another process may migrate the file between two of them.
  struct ReadSnapshot {
    Db& db;
    bool own = false;
    ~ReadSnapshot() {
      if (own) sqlite3_exec(db.h, "COMMIT", nullptr, nullptr, nullptr);
    }
  } snapshot{db};
  if (sqlite3_get_autocommit(db.h)) {
    DETAUDIT_RETURN_IF_ERROR(exec(db, "BEGIN"));
    snapshot.own = true;
  }
  int64_t app = 0;
  if (Status st;
      !(st = pragma_int(db, "PRAGMA application_id", &app)) || !(st = pragma_int(db, "PRAGMA user_version", version)))
    return st;
  if (app != 0 && app != kHistoryApplicationId) {
    return Status::invalid(
        db.error(fmt::format("not a detaudit history (SQLite application_id {:#x}); {}", app, db.leave_it())));
  }
  if (*version > kHistorySchemaVersion) {
    return Status::invalid(
        db.error(fmt::format("made by a newer detaudit (history schema version {}, this detaudit knows up to {}); "
                             "use a newer detaudit, or pass --history FILE{}",
                             *version, kHistorySchemaVersion, db.recording ? " or --no-history" : "")));
  }
  if (*version < 0 || (app == 0 && *version != 0)) {
    return Status::invalid(db.error(fmt::format(
        "not a detaudit history (user_version {} without detaudit's application_id); {}", *version, db.leave_it())));
  }
  if (*version == 0) {
    int64_t objects = 0;
    DETAUDIT_RETURN_IF_ERROR(pragma_int(db, "SELECT count(*) FROM sqlite_master", &objects));
    if (objects != 0) {
      return Status::invalid(
          db.error(fmt::format("not a detaudit history (an SQLite database holding {} tables or indexes of "
                               "another program); {}",
                               objects, db.leave_it())));
    }
  }
  return Status::ok();
}

// The schema objects of a database: sqlite_master's type and name (SQLite's own left out: autoindexes,
// sqlite_sequence), a table's with its columns in order ("table cells(run_id,workload,...)").
std::set<std::pair<std::string, std::string>> schema_objects(sqlite3* h) {
  std::set<std::pair<std::string, std::string>> out;
  Stmt s(h, "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'");
  while (s.ok() && s.step() == SQLITE_ROW) {
    std::string name = s.text(1);
    if (s.text(0) == "table") {
      Stmt c(h, "SELECT name FROM pragma_table_info(?)");
      c.bind(1, name);
      std::string cols;
      while (c.ok() && c.step() == SQLITE_ROW) {
        if (!cols.empty()) cols += ',';
        cols += c.text(0);
      }
      name += "(" + cols + ")";
    }
    out.insert({s.text(0), name});
  }
  return out;
}

// Exactly the tables and indexes of the version, as its migrations make them: no table, column, index, view
// or trigger of another program (a trigger would run when detaudit records, and change what it wrote).
Status check_schema_objects(Db& db, int64_t version) {
  sqlite3* ref = nullptr;
  if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, nullptr) != SQLITE_OK) {
    sqlite3_close_v2(ref);
    return Status::error(db.error("cannot open an in-memory database to compare its schema with"));
  }
  for (int64_t v = 0; v < version; ++v) sqlite3_exec(ref, kMigrations[v], nullptr, nullptr, nullptr);
  const auto want = schema_objects(ref);
  sqlite3_close_v2(ref);
  const auto have = schema_objects(db.h);
  for (auto& o : have)
    if (!want.count(o))
      return Status::invalid(db.error(fmt::format(
          "not a detaudit history of schema version {}: it holds {} {}, which that version does not make; {}", version,
          o.first, shown_safely(o.second.substr(0, 120)), db.leave_it())));
  for (auto& o : want)
    if (!have.count(o))
      return Status::invalid(db.error(fmt::format("not a detaudit history of schema version {}: its {} {} is missing; {}",
                                                  version, o.first, o.second.substr(0, 120), db.leave_it())));
  return Status::ok();
}

// Every table the version has, with every column.
Status check_tables(Db& db, int64_t version) {
  for (auto& t : kTables) {
    if (t.since_version > version) continue;
    std::string sql = fmt::format("SELECT {} FROM {} LIMIT 0", t.columns, t.table);
    Stmt s(db.h, sql.c_str());
    if (!s.ok()) {
      return Status::invalid(db.error(fmt::format("its tables do not match history schema version {} ({}); {}", version,
                                                  db.errmsg(), db.leave_it())));
    }
  }
  return Status::ok();
}

Status migrate(Db& db) {
  // Off for the migration, on again after it (the pragma is a no-op inside a transaction, so it is set
  // outside one): a step that rebuilds a table must not cascade the old table's drop into its children.
  // PRAGMA foreign_key_check before the commit proves the rebuilt tables keep every reference.
  DETAUDIT_RETURN_IF_ERROR(exec(db, "PRAGMA foreign_keys = OFF"));
  struct KeysBackOn {
    Db& db;
    ~KeysBackOn() { sqlite3_exec(db.h, "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr); }
  } keys_back_on{db};
  Transaction tx(db);
  DETAUDIT_RETURN_IF_ERROR(tx.begin_immediate());
  int64_t version = 0;
  // Again inside the transaction: another process may have migrated it meanwhile.
  DETAUDIT_RETURN_IF_ERROR(check_identity(db, &version));
  if (version == kHistorySchemaVersion) return Status::ok();  // (rolled back: nothing written)
  for (int64_t v = version; v < kHistorySchemaVersion; ++v)
    if (Status st = exec(db, kMigrations[v]); !st)
      return Status::invalid(st.message() +
                             fmt::format(" (migrating the history from schema version {} to {})", v, v + 1));
  std::string set = fmt::format("PRAGMA application_id = {}; PRAGMA user_version = {};", kHistoryApplicationId,
                                kHistorySchemaVersion);
  if (Status st; !(st = exec(db, set.c_str())) || !(st = check_tables(db, kHistorySchemaVersion))) return st;
  {
    Stmt s(db.h, "PRAGMA foreign_key_check");
    if (!s.ok()) return Status::invalid(describe_sqlite_error(db, s.rc()));
    if (s.step() == SQLITE_ROW)
      return Status::invalid(db.error(fmt::format("migrating it would leave a row of {} without its {}", s.text(0),
                                                  s.text(2))));
  }
  return tx.commit();
}

// Switches the file to WAL unless it is already. SQLite does not call the busy handler while it waits
// for the exclusive lock this needs (two processes creating the history at once), so the wait is here.
Status ensure_wal(Db& db) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    std::string journal;
    {
      Stmt s(db.h, "PRAGMA journal_mode");  // (finalized before the switch: a live statement is a transaction)
      if (!s.ok() || s.step() != SQLITE_ROW) {
        return Status::invalid(describe_sqlite_error(db, s.rc()));
      }
      journal = s.text(0);
    }
    if (journal == "wal") return Status::ok();
    Stmt w(db.h, "PRAGMA journal_mode = WAL");
    int rc = w.ok() ? w.step() : w.rc();
    if (rc == SQLITE_ROW) {
      if (w.text(0) == "wal") return Status::ok();
      return Status::invalid(db.error("cannot switch it to WAL mode (journal_mode " + w.text(0) + ")"));
    }
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline || interrupted()) {
      return Status::invalid(describe_sqlite_error(db, rc));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status file_error(const std::string& path, const std::string& what) {
  return Status::invalid(fmt::format("history {}: {}", path, what));
}

// Whether this process can write db_path (when it exists) and the folder that holds it: SQLite in WAL mode
// creates its -wal and -shm files beside the database even to read it.
bool writable_where(const std::string& db_path) {
  fs::path dir = fs::path(db_path).parent_path();
  if (dir.empty()) dir = ".";
  return ::access(db_path.c_str(), W_OK) == 0 && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

// "file:PATH?query" for sqlite3_open_v2 with SQLITE_OPEN_URI: the characters a URI gives a meaning to are
// escaped in the path.
std::string sqlite_uri(const std::string& path, const std::string& query) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f)
      uri += fmt::format("%{:02X}", c);
    else
      uri += char(c);
  }
  return uri + "?" + query;
}

// A link is not written through: the rows would land in whatever database it points at.
Status not_through_a_link(const std::string& db_path) {
  struct stat st {};
  if (::lstat(db_path.c_str(), &st) != 0) return Status::ok();
  if (S_ISLNK(st.st_mode))
    return file_error(db_path, "is a symbolic link; detaudit does not write through links (name the database "
                               "itself with --history)");
  if (S_ISREG(st.st_mode) && st.st_nlink > 1)
    return file_error(db_path, fmt::format("has {} names (a hard link); detaudit does not write into a file another "
                                           "name shares",
                                           uint64_t(st.st_nlink)));
  return Status::ok();
}

// Opens db_path as a detaudit history of the current schema: checks what the file is before SQLite
// writes anything to it, migrates an older schema, turns WAL on. In kRead mode a missing file is
// *exists = false (and true); in kWrite mode it is created with its parent folder.
Status open_history(const std::string& db_path, Mode mode, Db* db, bool* exists) {
  db->path = db_path;
  db->recording = mode != Mode::kQuery;
  *exists = false;
  if (db_path.empty()) return file_error(db_path, "no file name");
  struct stat st {};
  if (mode == Mode::kWrite) DETAUDIT_RETURN_IF_ERROR(not_through_a_link(db_path));
  // SQLite's files beside it (the write-ahead log, its shared memory, a rollback journal) are written by any
  // open, a read included: one that is a link, or has another name, would send those writes elsewhere.
  for (const char* side : {"-wal", "-shm", "-journal"}) {
    const std::string p = db_path + side;
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode) || !S_ISREG(st.st_mode) || st.st_nlink > 1)
      return file_error(db_path, fmt::format("{} is {}; detaudit does not let SQLite write through it (remove it)", p,
                                             S_ISLNK(st.st_mode)   ? "a symbolic link"
                                             : S_ISREG(st.st_mode) ? "a hard link (a file with another name)"
                                                                   : "not a regular file"));
  }
  if (::stat(db_path.c_str(), &st) != 0) {
    if (errno != ENOENT) return file_error(db_path, std::strerror(errno));
    if (mode != Mode::kWrite) return Status::ok();
    fs::path parent = fs::path(db_path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !fs::is_directory(parent, ec)) {
      fs::create_directories(parent, ec);
      if (ec) return file_error(db_path, fmt::format("cannot create its folder {}: {}", parent.string(), ec.message()));
    }
  } else {
    if (S_ISDIR(st.st_mode)) return file_error(db_path, "is a directory");
    if (!S_ISREG(st.st_mode)) return file_error(db_path, "is not a regular file");
    // Before SQLite sees it: an SQLite file starts with its magic string (an empty file is a new database).
    if (st.st_size > 0) {
      std::ifstream f(db_path, std::ios::binary);
      if (!f) return file_error(db_path, "cannot read it");
      char head[16] = {0};
      f.read(head, sizeof head);
      if (f.gcount() < std::streamsize(sizeof head))
        return file_error(db_path, fmt::format("file is not a database ({} bytes, shorter than an SQLite header); {}",
                                               int64_t(st.st_size), leave_it(mode != Mode::kQuery)));
      if (std::memcmp(head, "SQLite format 3", 16) != 0)
        return file_error(db_path,
                          fmt::format("file is not a database (no SQLite header); {}", leave_it(mode != Mode::kQuery)));
      if (st.st_size < 512)
        return file_error(db_path, fmt::format("file is not a database (truncated to {} bytes); {}",
                                               int64_t(st.st_size), leave_it(mode != Mode::kQuery)));
    }
    *exists = true;
  }
  int rc = SQLITE_OK;
  // The name as a file's, never as a URI: SQLite reads a name starting with "file:" as one (where URIs are on,
  // as Debian builds it), and "file:DIR/link" would open the link's target, the checks above notwithstanding.
  const std::string plain = db_path.rfind("file:", 0) == 0 ? "./" + db_path : db_path;
  if (mode != Mode::kWrite && !writable_where(db_path)) {
    // Only to read, where the file or its folder cannot be written: SQLite cannot create the WAL's shared
    // memory file (-shm) beside it. Without a log to replay, the file alone is the whole history and is
    // opened immutable (no locks, no -shm); with one, a plain read-only open works where its -shm exists.
    struct stat wal {};
    if (::stat((db_path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) {
      rc = sqlite3_open_v2(plain.c_str(), &db->h, SQLITE_OPEN_READONLY, nullptr);
      if (rc == SQLITE_OK) rc = sqlite3_exec(db->h, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK)
        return file_error(db_path, fmt::format("cannot read it here: its write-ahead log {}-wal holds changes that "
                                               "only a process that can write its folder can read ({})",
                                               db_path, db->errmsg()));
    } else {
      rc = sqlite3_open_v2(sqlite_uri(db_path, "mode=ro&immutable=1").c_str(), &db->h,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
    }
  } else {
    int flags = SQLITE_OPEN_READWRITE | (mode == Mode::kWrite ? SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW : 0);
    rc = sqlite3_open_v2(plain.c_str(), &db->h, flags, nullptr);
  }
  if (rc != SQLITE_OK) {
    return Status::invalid(db->error(fmt::format("cannot open it: {}", db->errmsg())));
  }
  *exists = true;
  sqlite3_extended_result_codes(db->h, 1);
  sqlite3_busy_handler(db->h, busy_wait, nullptr);
  // detaudit's schema has no trigger and no view: none another program added ever runs (the schema check below
  // refuses such a file; this holds even before it).
  sqlite3_db_config(db->h, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  sqlite3_db_config(db->h, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  DETAUDIT_RETURN_IF_ERROR(exec(*db, "PRAGMA foreign_keys = ON"));

  int64_t version = 0;
  DETAUDIT_RETURN_IF_ERROR(check_identity(*db, &version));
  // Damage (a truncated file, a page overwritten) shows here rather than halfway through a write.
  bool check = mode == Mode::kWrite;
  if (!check) {
    std::lock_guard<std::mutex> lock(g_checked_mutex);
    check = !g_checked.count(db_path);
  }
  if (check) {
    DETAUDIT_RETURN_IF_ERROR(quick_check(*db));
    std::lock_guard<std::mutex> lock(g_checked_mutex);
    g_checked.insert(db_path);
  }
  if (version != 0) DETAUDIT_RETURN_IF_ERROR(check_tables(*db, version));
  if (version != 0) DETAUDIT_RETURN_IF_ERROR(check_schema_objects(*db, version));
  if (mode != Mode::kWrite && version == 0) {  // an empty file (or one being created): an empty history
    *exists = false;
    return Status::ok();
  }

  if (mode == Mode::kQuery && version < kHistorySchemaVersion) {
    // `history` only reads: an older schema is migrated in a copy in memory, and the file is left as it is.
    sqlite3* mem = nullptr;
    if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
      sqlite3_close_v2(mem);
      return Status::invalid(db->error("cannot read it: no memory for a copy to migrate"));
    }
    // (A backup into memory needs the source's page size.)
    int64_t page_size = 4096;
    DETAUDIT_RETURN_IF_ERROR(pragma_int(*db, "PRAGMA page_size", &page_size));
    sqlite3_exec(mem, fmt::format("PRAGMA page_size = {}", page_size).c_str(), nullptr, nullptr, nullptr);
    sqlite3_backup* copy = sqlite3_backup_init(mem, "main", db->h, "main");
    const int step = copy ? sqlite3_backup_step(copy, -1) : sqlite3_errcode(mem);
    const int done = copy ? sqlite3_backup_finish(copy) : step;
    if (step != SQLITE_DONE || done != SQLITE_OK) {
      const std::string why = sqlite3_errmsg(mem);
      sqlite3_close_v2(mem);
      return Status::invalid(db->error("cannot read it into memory to migrate its older schema: " + why));
    }
    sqlite3_close_v2(db->h);
    db->h = mem;
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_db_config(db->h, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
    sqlite3_db_config(db->h, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
    DETAUDIT_RETURN_IF_ERROR(exec(*db, "PRAGMA foreign_keys = ON"));
    return migrate(*db);
  }
  if (mode == Mode::kWrite || version < kHistorySchemaVersion) {
    if (sqlite3_db_readonly(db->h, "main") == 1) {
      if (mode == Mode::kWrite) return file_error(db_path, "is read-only: the run cannot be recorded");
      return file_error(db_path,
                        fmt::format("is read-only and its history schema version {} is older than this detaudit's "
                                    "{}: open it once where it is writable to migrate it",
                                    version, kHistorySchemaVersion));
    }
    // WAL first (it takes an exclusive lock, outside any transaction), then the migration.
    DETAUDIT_RETURN_IF_ERROR(ensure_wal(*db));
    if (version < kHistorySchemaVersion) DETAUDIT_RETURN_IF_ERROR(migrate(*db));
  }
  return Status::ok();
}

// ---- recording ---------------------------------------------------------------------------------------

// The median of the finite values, or none (SQL NULL).
std::optional<double> median_or_null(const std::vector<double>& v) {
  double m = finite_median(v);
  return std::isnan(m) ? std::nullopt : std::optional<double>(m);
}

std::vector<std::string> distinct_sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::vector<std::string> split_spaces(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

nlohmann::json parse_json_or_null(const std::string& s) {
  auto j = nlohmann::json::parse(s, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

Status step_done(Db& db, Stmt& s) {
  if (!s.ok()) {
    return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
  }
  int rc = s.step();
  if (rc != SQLITE_DONE) {
    return Status::invalid(describe_sqlite_error(db, rc));
  }
  s.reset();
  return Status::ok();
}

std::string absolute_dir(const std::string& dir) {
  if (dir.empty()) return dir;
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) return dir;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}

}  // namespace

Status query_open(Db& db, const HistoryFilter& f, HistoryQueryResult* out);

Status check_history(const std::string& db_path, bool every_row) {
  // (Recording refuses a link: so does the check before the work, rather than after it.)
  DETAUDIT_RETURN_IF_ERROR(not_through_a_link(db_path));
  Db db;
  bool exists = false;
  DETAUDIT_RETURN_IF_ERROR(open_history(db_path, Mode::kRead, &db, &exists));
  // Every row as recording will check it: a history another program changed stops the command before its work.
  if (exists && every_row) {
    HistoryQueryResult all;
    DETAUDIT_RETURN_IF_ERROR(query_open(db, HistoryFilter{}, &all));
  }
  // It will be written (and, when missing, created with its folders): the file and the folder that will
  // hold it must be writable now, not only at the end of the run.
  std::error_code ec;
  fs::path dir = fs::absolute(db_path, ec).parent_path();
  while (!fs::exists(dir, ec) && dir != dir.root_path()) dir = dir.parent_path();
  if (!fs::is_directory(dir, ec))
    return file_error(db_path, fmt::format("{} is not a folder: the run could not be recorded", dir.string()));
  if (exists && ::access(db_path.c_str(), R_OK | W_OK) != 0)
    return file_error(db_path,
                      fmt::format("cannot be written ({}): the run could not be recorded", std::strerror(errno)));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return file_error(db_path, fmt::format("its folder {} cannot be written ({}): the run could not be recorded",
                                           dir.string(), std::strerror(errno)));
  return Status::ok();
}

Status last_healthcheck(const std::string& db_path, const std::string& hostname, LastHealthcheck* out) {
  *out = LastHealthcheck{};
  Db db;
  bool exists = false;
  DETAUDIT_RETURN_IF_ERROR(open_history(db_path, Mode::kRead, &db, &exists));
  if (!exists) return Status::ok();
  // (A database of an older schema has no healthcheck: open_history migrated it, and it holds none.)
  Stmt s(db.h,
         "SELECT id, recorded_at, command, tool_commit, machine_key, exit_code FROM runs WHERE kind = 'healthcheck' AND "
         "hostname = ?1 ORDER BY id DESC LIMIT 1");
  if (!s.ok()) return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
  s.bind(1, hostname);
  int rc = s.step();
  if (rc == SQLITE_DONE) return Status::ok();
  if (rc != SQLITE_ROW) return Status::invalid(describe_sqlite_error(db, rc));
  out->found = true;
  const int64_t id = s.integer(0);
  out->recorded_at = s.text(1), out->command = s.text(2), out->tool_commit = s.text(3), out->machine_key = s.text(4);
  out->exit_code = int(s.integer(5));
  Stmt c(db.h, "SELECT workload, target, verdict_reason FROM cells WHERE run_id = ?1 AND verdict = 'FAIL'");
  if (!c.ok()) return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
  c.bind(1, id);
  while ((rc = c.step()) == SQLITE_ROW) out->failed.insert(health_failure(c.text(0), c.text(1), c.text(2)));
  if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  return Status::ok();
}

// The home directory of this process's user in the password database ("" when it has none).
static std::string passwd_home() {
  struct passwd pw {}, *found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) != 0 || !found || !pw.pw_dir) return "";
  return pw.pw_dir;
}

Status resolve_history_path(const HistoryFlags& flags, std::string* path) {
  path->clear();
  if (flags.disabled) {
    if (!flags.file.empty()) return Status::invalid("--history and --no-history contradict each other");
    return Status::ok();
  }
  if (!flags.file.empty()) return *path = flags.file, Status::ok();
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (std::string v = env("DETAUDIT_HISTORY"); !v.empty()) return *path = v, Status::ok();
  // The default's detaudit/ folder is one detaudit makes: it is never a link to somewhere else.
  auto in_own_folder = [&](const fs::path& folder) {
    struct stat st {};
    if (::lstat(folder.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      return Status::invalid(fmt::format("{}: is a symbolic link; detaudit does not write its history through links "
                                         "(name the database itself with --history)",
                                         shown_safely(folder.string())));
    *path = (folder / "history.db").string();
    return Status::ok();
  };
  if (std::string v = env("XDG_DATA_HOME"); !v.empty() && v[0] == '/') return in_own_folder(fs::path(v) / "detaudit");
  std::string home = env("HOME");
  if (home.empty()) home = passwd_home();  // (a daemon's child, such as Slurm's health check, may have no HOME)
  if (const std::string& v = home; !v.empty()) {
    // Folders below a home are made as needed; a home that does not exist is not made (it is not ours to make).
    std::error_code ec;
    if (!fs::is_directory(v, ec))
      return Status::invalid(fmt::format("HOME ({}) is not a directory, so there is no place for the history: name "
                                         "one with --history FILE, or record nothing with --no-history",
                                         shown_safely(v.substr(0, 200))));
    return in_own_folder(fs::path(v) / ".local" / "share" / "detaudit");
  }
  return Status::invalid(
      "no place for the history: none of --history FILE, DETAUDIT_HISTORY, XDG_DATA_HOME (absolute) or HOME is "
      "set, and this user has no home in the password database (--no-history records nothing)");
}

// What a run set out to run, as the history keeps it: the targets and workloads of its results' plan and of its
// rows, sorted (a `key=all` target's cells name each algorithm; a training design's runs name its variants).
nlohmann::json plan_of(const Results& r) {
  std::set<std::string> targets, workloads;
  auto add = [&](const char* list, std::set<std::string>* to) {
    if (r.plan.is_object() && r.plan.contains(list) && r.plan[list].is_array())
      for (auto& x : r.plan[list])
        if (x.is_string()) to->insert(x.get<std::string>());
  };
  add("targets", &targets);
  add("workloads", &workloads);
  for (auto& o : r.observations) targets.insert(o.target), workloads.insert(o.workload);
  for (auto& t : r.training) targets.insert(t.target);
  nlohmann::json plan = {{"targets", targets}, {"workloads", workloads}};
  // A training design's settings (seeds, batches, window, data...): its cells are the design's with them, so that
  // runs of two designs of one name are never one cell that "changed".
  if (r.plan.is_object() && r.plan.contains("design") && r.plan["design"].is_object()) {
    plan["design"] = r.plan["design"];
    if (r.plan.contains("data_fingerprint") && r.plan["data_fingerprint"].is_string())
      plan["data_fingerprint"] = r.plan["data_fingerprint"];
  }
  return plan;
}

// The settings a training cell's label carries (" [seeds 2, replicates 2, 60 batches of 64, window 10, data seed 1,
// data 88873690]"): "" for a run recorded without them.
std::string design_settings_label(const std::string& plan_text) {
  const nlohmann::json plan = parse_json_or_null(plan_text);
  if (!plan.is_object() || !plan.contains("design") || !plan["design"].is_object()) return "";
  const nlohmann::json& d = plan["design"];
  auto num = [&](const char* k) { return d.contains(k) && d[k].is_number() ? d[k].dump() : std::string("?"); };
  std::string s = fmt::format(" [seeds {}, replicates {}, {} batches of {}, window {}, data seed {}", num("seeds"),
                              num("replicates"), num("batches"), num("batch_size"), num("window"), num("data_seed"));
  if (d.contains("noise_every") && d["noise_every"].is_number() && d["noise_every"] != 0)
    s += ", noise every " + num("noise_every");
  if (d.contains("prednet_config") && d["prednet_config"].is_string())
    s += ", " + shown_safely(d["prednet_config"].get<std::string>().substr(0, 20));
  if (plan.contains("data_fingerprint") && plan["data_fingerprint"].is_string())
    s += ", data " + shown_safely(plan["data_fingerprint"].get<std::string>().substr(0, 8));
  return s + "]";
}

Status record_run(const std::string& db_path, RunKind run_kind, const Results& r, const std::string& results_dir,
                  int exit_code) {
  const std::string kind = run_kind_name(run_kind);
  Db db;
  bool exists = false;
  DETAUDIT_RETURN_IF_ERROR(open_history(db_path, Mode::kWrite, &db, &exists));
  // A history `detaudit history` would refuse (changed by another program) is not written to either: every row
  // is checked as reading checks it, before this run's rows join them.
  if (exists) {
    HistoryQueryResult all;
    DETAUDIT_RETURN_IF_ERROR(query_open(db, HistoryFilter{}, &all));
  }

  const std::string key = machine_key(r.machine);
  const nlohmann::json identity = machine_identity(r.machine);
  const std::string now = utc_now_iso8601();
  const std::string seen = r.started_at.empty() ? now : r.started_at;
  int pass = 0, fail = 0, expected = 0, warn = 0, skip = 0, unjudged = 0;
  for (auto& o : r.observations) {
    if (!o.verdict) {
      ++unjudged;
      continue;
    }
    switch (*o.verdict) {
      case Verdict::kPass: ++pass; break;
      case Verdict::kFail: ++fail; break;
      case Verdict::kExpected: ++expected; break;
      case Verdict::kWarn: ++warn; break;
      case Verdict::kSkip: ++skip; break;
    }
  }

  Transaction tx(db);
  DETAUDIT_RETURN_IF_ERROR(tx.begin_immediate());
  {
    std::vector<std::string> features;
    for (auto& f : identity["cpu_features"]) features.push_back(f.get<std::string>());
    Stmt m(db.h,
           "INSERT OR IGNORE INTO machines (key, cpu_model, cpu_features, cores, gpus, identity, first_seen, last_seen) "
           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)");
    m.bind(1, key);
    m.bind(2, identity["cpu_model"].get<std::string>());
    m.bind(3, join(features, " "));
    m.bind(4, identity["cores"].get<int64_t>());
    m.bind(5, identity["gpus"].dump());
    m.bind(6, identity.dump());
    m.bind(7, seen);
    DETAUDIT_RETURN_IF_ERROR(step_done(db, m));
    Stmt u(db.h,
           "UPDATE machines SET first_seen = min(first_seen, ?2), last_seen = max(last_seen, ?2) WHERE key = ?1");
    u.bind(1, key);
    u.bind(2, seen);
    DETAUDIT_RETURN_IF_ERROR(step_done(db, u));
  }
  {
    Stmt s(db.h,
           "INSERT INTO runs (kind, started_at, finished_at, recorded_at, command, results_dir, tool_version, "
           "tool_commit, machine_key, hostname, machine, software, exit_code, cells, pass, fail, expected, warn, skip, "
           "unjudged, training_runs, plan) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
           "?16, ?17, ?18, ?19, ?20, ?21, ?22)");
    s.bind(1, kind);
    s.bind(2, seen);
    s.bind(3, r.finished_at);
    s.bind(4, now);
    s.bind(5, r.command);
    s.bind(6, absolute_dir(results_dir));
    s.bind(7, r.tool_version);
    s.bind(8, r.tool_commit);
    s.bind(9, key);
    s.bind(10, json_fields::str_or_json(r.machine, "hostname"));
    s.bind(11, r.machine.is_null() ? std::string("{}") : r.machine.dump());
    s.bind(12, software_of(r).dump());
    s.bind(13, exit_code);
    s.bind(14, int64_t(r.observations.size()));
    s.bind(15, pass);
    s.bind(16, fail);
    s.bind(17, expected);
    s.bind(18, warn);
    s.bind(19, skip);
    s.bind(20, unjudged);
    s.bind(21, int64_t(r.training.size()));
    s.bind(22, plan_of(r).dump());
    DETAUDIT_RETURN_IF_ERROR(step_done(db, s));
  }
  const int64_t run_id = sqlite3_last_insert_rowid(db.h);
  {
    // A cell twice in one results file would be a bug elsewhere; the last one is kept rather than the
    // history refused.
    Stmt c(db.h,
           "INSERT OR REPLACE INTO cells (run_id, workload, target, status, reason, verdict, verdict_reason, repeats, "
           "distinct_outputs, fingerprints, err_ratio, median_seconds, rows_fingerprint) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
           "?7, ?8, ?9, ?10, ?11, ?12, ?13)");
    for (auto& o : r.observations) {
      c.bind(1, run_id);
      c.bind(2, o.workload);
      c.bind(3, o.target);
      c.bind(4, std::string(to_string(o.status)));
      c.bind(5, o.reason);
      c.bind(6, verdict_text(o.verdict));
      c.bind(7, o.verdict_reason);
      c.bind(8, o.repeats);
      c.bind(9, o.distinct);
      c.bind(10, join(distinct_sorted(o.fingerprints), " "));
      std::optional<double> ratio;
      if (o.oracle && o.oracle->err_ratio >= 0) ratio = o.oracle->err_ratio;
      c.bind(11, ratio);
      c.bind(12, median_or_null(o.seconds));
      c.bind(13, o.batch ? o.batch->rows_fingerprint : std::string());
      DETAUDIT_RETURN_IF_ERROR(step_done(db, c));
    }
  }
  {
    Stmt t(db.h,
           "INSERT OR REPLACE INTO training (run_id, key, model, design, condition, target, seed, replicate, status, "
           "final_loss, weights_fingerprint, verdict) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    const std::vector<RunVerdict> verdicts = judge_training_runs(r.training);
    for (size_t i = 0; i < r.training.size(); ++i) {
      const TrainingRun& run = r.training[i];
      t.bind(1, run_id);
      t.bind(2, run.key);
      t.bind(3, run.model);
      t.bind(4, run.design);
      t.bind(5, run.condition);
      t.bind(6, run.target);
      // Seeds are unsigned 64-bit; SQLite integers are signed: a seed past 2^63 is kept as text.
      if (run.seed > uint64_t(INT64_MAX))
        t.bind(7, std::to_string(run.seed));
      else
        t.bind(7, int64_t(run.seed));
      t.bind(8, int64_t(run.replicate));
      t.bind(9, std::string(to_string(run.status)));
      std::optional<double> loss;
      if (run.ok() && std::isfinite(run.final_loss)) loss = run.final_loss;
      t.bind(10, loss);
      t.bind(11, run.weights_fingerprint);
      t.bind(12, std::string(to_string(verdicts[i].verdict)));
      DETAUDIT_RETURN_IF_ERROR(step_done(db, t));
    }
  }
  return tx.commit();
}

Status median_seconds_history(const std::string& db_path, const std::string& workload, const std::string& target,
                              const std::string& mkey, double* median_out, int* n, const std::string& own_dir,
                              const std::string& own_started_at) {
  const std::string own = own_dir.empty() ? "" : absolute_dir(own_dir);
  *median_out = 0;
  *n = 0;
  Db db;
  bool exists = false;
  DETAUDIT_RETURN_IF_ERROR(open_history(db_path, Mode::kRead, &db, &exists));
  if (!exists) return Status::ok();
  Stmt s(db.h,
         "SELECT r.results_dir, r.started_at, c.median_seconds FROM cells c JOIN runs r ON r.id = c.run_id "
         "WHERE c.workload = ?1 AND c.target = ?2 AND r.machine_key = ?3 AND c.status = 'ok' "
         "AND c.median_seconds IS NOT NULL ORDER BY r.started_at DESC, r.id DESC");
  if (!s.ok()) {
    return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
  }
  s.bind(1, workload);
  s.bind(2, target);
  s.bind(3, mkey);
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<double> v;
  int rc = SQLITE_DONE;
  while (int(v.size()) < kMedianWindow && (rc = s.step()) == SQLITE_ROW)
    if (!(s.text(0) == own && s.text(1) == own_started_at) && seen.insert({s.text(0), s.text(1)}).second)
      v.push_back(*s.real(2));
  if (int(v.size()) < kMedianWindow && rc != SQLITE_DONE) {
    return Status::invalid(describe_sqlite_error(db, rc));
  }
  auto m = median_or_null(v);
  if (m) *median_out = *m;
  *n = int(v.size());
  return Status::ok();
}

// ---- reading -----------------------------------------------------------------------------------------

namespace {

// Which of names the filter selects: those equal to it when there are any ("exact"), else those
// containing it ("substring"), else none ("none").
std::string match_mode(const std::string& filter, const std::set<std::string>& names) {
  if (filter.empty()) return "";
  if (names.count(filter)) return "exact";
  for (auto& n : names)
    if (n.find(filter) != std::string::npos) return "substring";
  return "none";
}

Status distinct_column(Db& db, const char* sql, std::set<std::string>* out) {
  Stmt s(db.h, sql);
  if (!s.ok()) {
    return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
  }
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out->insert(s.text(0));
  if (rc != SQLITE_DONE) {
    return Status::invalid(describe_sqlite_error(db, rc));
  }
  return Status::ok();
}

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>* out) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  (*out)[prefix] = value_text(j);
}

// passed_batch_invariance (gates/verdict.hpp) of a history row.
bool rows_invariant_by_verdict(const CellRecord& c, const Spec& t, const Spec& w) {
  return !c.training &&
         passed_batch_invariance(t, w, c.status == "ok" && c.distinct == 1 && c.fingerprints.size() == 1,
                                 c.verdict == "PASS");
}

std::string state_of(const CellRecord& c) {
  if (c.status != "ok") return c.status;
  if (c.distinct > 1 || c.fingerprints.size() > 1) return "nondeterministic";
  // A batch-invariance cell is its product and its rows computed alone: a change in either is a change.
  if (c.fingerprints.size() == 1 && !c.rows_fingerprint.empty())
    return "fp " + c.fingerprints[0] + " rows " + c.rows_fingerprint;
  if (c.fingerprints.size() == 1) return "fp " + c.fingerprints[0];
  return "ok (no output)";
}

void add_sorted_unique(std::vector<std::string>* v, const std::string& x) {
  if (x.empty()) return;
  auto it = std::lower_bound(v->begin(), v->end(), x);
  if (it == v->end() || *it != x) v->insert(it, x);
}

}  // namespace

// The training runs of the history as cells beside the probe cells: one record per recorded run and
// training cell (model, design, condition, target), its workload "train <model>/<design> (<condition>)".
// A condition with nondeterminism off (b, d, e) is one state: the fingerprint of its runs' final
// weights (seed, replicate and weights of each run), so a changed weight anywhere is a change. One with
// nondeterminism on (a, c) varies by design: its state is "nondeterministic" (EXPECTED). A run that did
// not finish makes the cell's status its own (crashed, timeout, ...). The same filters as the cells:
// target and workload names (exact or substring, as the probe cells matched them; a training cell's
// workload matches on its own name), machine, since.
// A spec's canonical text, or the text itself when it does not parse.
std::string canonical_spec(const std::string& text, bool target) {
  Spec sp;
  return (target ? parse_target(text, &sp) : parse_workload(text, &sp)).is_ok() ? sp.str() : text;
}

// Whether a version (is_version_text) is major.minor or later.
bool version_at_least(const std::string& version, int major, int minor) {
  int have[2] = {0, 0};
  size_t at = 0;
  for (int& part : have) {
    size_t end = at;
    while (end < version.size() && end - at < 9 && std::isdigit((unsigned char)version[end])) ++end;
    if (end == at) break;
    part = std::stoi(version.substr(at, end - at));
    if (end >= version.size() || version[end] != '.') break;
    at = end + 1;
  }
  return have[0] != major ? have[0] > major : have[1] >= minor;
}

// A history written by detaudit holds what detaudit writes; a row another program changed (a verdict no
// detaudit gives, a fingerprint of other digits, a time that is no time, a negative count) is refused in one
// line naming the run and the column, never shown as if it were a judgment.
Status check_row(const CellRecord& c, const std::string& where) {
  auto bad = [&](const char* column, const std::string& value, const char* what) {
    return Status::invalid(fmt::format("{} (run {}, {} on {}): {} '{}' is not {} (the database was changed by "
                                       "another program)",
                                       where, c.run_id, shown_safely(c.workload.substr(0, 80)),
                                       shown_safely(c.target.substr(0, 80)), column, shown_safely(value.substr(0, 40)),
                                       what));
  };
  if (!std::any_of(std::begin(kRunKinds), std::end(kRunKinds), [&](RunKind k) { return c.kind == run_kind_name(k); }))
    return bad("kind", c.kind, "a kind of run detaudit records");
  if (!is_utc_iso8601(c.started_at)) return bad("started_at", c.started_at, "a time (YYYY-MM-DDTHH:MM:SSZ)");
  if (!is_version_text(c.tool_version)) return bad("tool_version", c.tool_version, "a version");
  Spec w, t;
  if (!c.training && !parse_workload(c.workload, &w)) return bad("workload", c.workload, "a workload spec");
  if (!parse_target(c.target, &t)) return bad("target", c.target, "a target spec");
  if (Verdict v; !c.verdict.empty() && !parse_verdict(c.verdict, &v))
    return bad("verdict", c.verdict, "PASS, FAIL, EXPECTED, WARN or SKIP");
  if (ObsStatus st; !parse_obs_status(c.status, &st)) return bad("status", c.status, "ok, crashed, timeout, skipped or error");
  if (!c.training && c.status != "ok" && c.reason.empty()) return bad("reason", "", "why a cell that did not finish did not");
  if (!c.training && c.status == "ok" && !c.reason.empty())
    return bad("reason", c.reason, "empty for a cell that finished (only a cell that did not finish says why)");
  if (c.repeats < 0) return bad("repeats", std::to_string(c.repeats), "a count");
  if (c.distinct < 0 || c.distinct > std::max(c.repeats, 0))
    return bad("distinct_outputs", std::to_string(c.distinct), "a count of at most its repeats");
  for (auto& fp : c.fingerprints)
    if (Fingerprint f; !Fingerprint::from_hex(fp, &f)) return bad("fingerprints", fp, "32 hex digits");
  // The rows a batch-invariance cell computed alone: recorded only by a cell of that workload that ran.
  if (!c.rows_fingerprint.empty()) {
    if (Fingerprint f; !Fingerprint::from_hex(c.rows_fingerprint, &f))
      return bad("rows_fingerprint", c.rows_fingerprint, "32 hex digits");
    if (c.training || w.name != "batchinv" || c.status != "ok")
      return bad("rows_fingerprint", c.rows_fingerprint, "empty for a cell that is not a batch-invariance cell that ran");
    // A cell that passed its target's promise of batch invariance computed every row alone as in the product: with
    // every row checked, the rows are the product.
    if (rows_invariant_by_verdict(c, t, w) && w.get_int("rows", 1) == w.get_int("m", 1) &&
        c.rows_fingerprint != c.fingerprints[0])
      return bad("rows_fingerprint", c.rows_fingerprint,
                 "the product's fingerprint for a cell that passed a promise of batch invariance with every row checked");
  }
  // A probe cell's row: its distinct outputs are the fingerprints it lists; a cell that ran gave one at least,
  // one skipped, crashed or timed out none.
  if (!c.training) {
    if (size_t(c.distinct) != c.fingerprints.size())
      return bad("distinct_outputs", std::to_string(c.distinct), "the number of fingerprints the row lists");
    if (c.status == "ok" && c.distinct < 1) return bad("distinct_outputs", "0", "at least 1 for a cell that ran");
    if (c.status != "ok" && c.status != "error" && !c.fingerprints.empty())
      return bad("fingerprints", c.fingerprints[0], "empty for a cell that gave no output");
    // A cell that did not finish is judged as one: a crash or timeout FAILs or is EXPECTED, a skip is a SKIP; a cell
    // that ran is never a SKIP.
    if (((c.status != "ok" && (c.verdict == "PASS" || c.verdict == "WARN")) ||
         (c.status == "skipped") != (c.verdict == "SKIP")) &&
        !c.verdict.empty())
      return bad("verdict", c.verdict, fmt::format("a verdict of a cell whose status is {}", c.status).c_str());
    // The oracle backend (cpu-ref) runs every workload on every machine: it is never skipped.
    if (const BackendEntry* be = find_backend(t.name); c.status == "skipped" && be && be->oracle)
      return bad("status", c.status, "a status of the oracle backend's cell (it runs every workload on every machine)");
    // A cell that ran has an oracle distance, or its verdict says why not (not compared with the oracle, no bound
    // known, a distance that is no number: a FAIL), as results.json refuses one with no distance and no reason.
    // (Versions before 0.1.0 recorded cells that ran without either; a healthcheck judges bits against a reference's,
    // never an oracle's distance.)
    if (c.status == "ok" && !c.err_ratio && !c.verdict.empty() && c.verdict != "FAIL" && c.kind != "healthcheck" &&
        c.verdict_reason.find("oracle") == std::string::npos && version_at_least(c.tool_version, 0, 1))
      return bad("err_ratio", "NULL",
                 "how a cell that ran is recorded (it has an oracle distance, or its verdict says why it has none)");
    // A crash or timeout is EXPECTED only where the target needs something a machine may lack (an instruction
    // set, a device): one that needs nothing (cpu-ref) has nothing to excuse it.
    if (c.status != "ok" && c.status != "skipped" && c.verdict == "EXPECTED" &&
        promise_for(t, w, nlohmann::json::object(), {}).requirements.empty())
      return bad("verdict", c.verdict,
                 fmt::format("a verdict of a cell whose status is {} on a target that needs nothing a machine may lack",
                             c.status)
                     .c_str());
    // A CPU target's promise follows from the two specs (a GPU target's may follow from the algorithm its library
    // chose, which the row does not keep): a cell that promised one output and gave two is no PASS; a cell that
    // ran is EXPECTED only where its target is permitted to vary; and where its error budget is the bound itself
    // (inputs not rounded, a summation bound that applies) a PASS stays within it.
    // (The promise is looked up only for a row with one of these verdicts to hold: most rows have none.)
    const bool beyond_bound = c.err_ratio && std::isfinite(*c.err_ratio) && *c.err_ratio > 1;
    if (c.status == "ok" && (c.verdict == "EXPECTED" || (c.verdict == "PASS" && (c.distinct > 1 || beyond_bound))) &&
        target_facts(c.target).device_kind == "host") {
      const Promise p = promise_for(t, w, nlohmann::json::object(), {});
      if (c.verdict == "PASS" && c.distinct > 1 && p.run_to_run == Promise::RunToRun::kDeterministic)
        return bad("verdict", c.verdict, "the verdict of a cell that promised one output and gave several");
      if (c.verdict == "EXPECTED" && p.run_to_run != Promise::RunToRun::kNondeterministic)
        return bad("verdict", c.verdict, "a verdict of a cell that ran on a target not permitted to vary");
      if (c.verdict == "PASS" && beyond_bound && p.input_unit_roundoff <= 0 && p.error_bound_exempt.empty())
        return bad("verdict", c.verdict,
                   fmt::format("the verdict of a cell whose error is {:.3g} x its summation bound (a budget of 1)",
                               *c.err_ratio)
                       .c_str());
    }
    // A healthcheck judges bits against its reference's: PASS where every run gave them (one output), else FAIL.
    if (c.kind == "healthcheck" && c.verdict != "PASS" && c.verdict != "FAIL")
      return bad("verdict", c.verdict, "a verdict of a healthcheck (PASS or FAIL)");
    if (c.kind == "healthcheck" && c.verdict == "PASS" && (c.status != "ok" || c.distinct != 1))
      return bad("verdict", c.verdict, "the verdict of a healthcheck's cell that gave other bits or did not finish");
    // Its reason is the one it writes: a PASS names the bits it gave, a FAIL the CPUs or GPUs that found it and, where
    // it gave other bits, bits it lists.
    if (c.kind == "healthcheck" && c.verdict == "PASS" && c.distinct == 1 &&
        c.verdict_reason.rfind("every run gave the reference's bits (" + c.fingerprints[0].substr(0, 8), 0) != 0)
      return bad("verdict_reason", c.verdict_reason, "a healthcheck's PASS naming the bits it gave");
    if (c.kind == "healthcheck" && c.verdict == "FAIL") {
      if (!c.verdict_reason.starts_with("cpu ") && !c.verdict_reason.starts_with("gpu "))
        return bad("verdict_reason", c.verdict_reason, "a healthcheck's FAIL naming the CPU or GPU that found it");
      const size_t here = c.verdict_reason.rfind(", here ");
      const std::string bits = here == std::string::npos ? "" : c.verdict_reason.substr(here + 7, 8);
      const bool rows = c.verdict_reason.find(": other bits of the rows computed alone in ") != std::string::npos;
      const bool product = !rows && c.verdict_reason.find(": other bits in ") != std::string::npos;
      // (A cell that crashed somewhere keeps no bits: the reason it records is its crash.)
      const bool holds = std::any_of(c.fingerprints.begin(), c.fingerprints.end(),
                                     [&](const std::string& f) { return !bits.empty() && f.starts_with(bits); });
      if (c.status == "ok" && (((rows || product) && bits.size() != 8) ||
                               (rows && !c.rows_fingerprint.starts_with(bits)) || (product && !holds)))
        return bad("verdict_reason", c.verdict_reason, "a healthcheck's FAIL naming bits the row holds");
      // The line the check writes of this cell: its place, "W on T" its own, other bits other than the reference's,
      // and after it nothing but the other CPUs and GPUs that found it.
      static const std::string kP = R"((cpu [0-9]+ \(core [0-9]+, package [0-9]+\)|gpu [0-9]+( \([^()]*\))?))";
      static const std::regex kPlaceFirst("^" + kP + ": "), kAlso("^; also found on " + kP + "(, " + kP + ")*$"),
          kBitsTail(R"(^([0-9a-f]{8}), here ([0-9a-f]{8})( and [0-9]+ more)?\)$)");
      const size_t also = c.verdict_reason.rfind("; also found on ");
      const std::string line = c.verdict_reason.substr(0, also),
                        tail = also == std::string::npos ? "" : c.verdict_reason.substr(also);
      std::smatch first, m;
      bool written = std::regex_search(line, first, kPlaceFirst) && (tail.empty() || std::regex_match(tail, kAlso)) &&
                     line.find(c.workload + " on " + c.target) != std::string::npos;
      if (written && (rows || product)) {
        const std::string head = first.str() + "other bits " + (rows ? "of the rows computed alone " : "") + "in " +
                                 c.workload + " on " + c.target + " (reference ";
        const std::string rest = line.starts_with(head) ? line.substr(head.size()) : "";
        written = std::regex_match(rest, m, kBitsTail) && m[1] != m[2];
      }
      if (!written)
        return bad("verdict_reason", c.verdict_reason, "the line a healthcheck writes of this cell's finding");
    }
    // Any other verdict of a CPU cell that ran is one of those judge() gives it (a WARN that said "claimed
    // nondeterministic" is an older detaudit's verdict of a cell permitted to vary that did not: kept as recorded).
    // (An error ratio that is no number is named below.)
    if (Verdict v; c.kind != "healthcheck" && c.status == "ok" && parse_verdict(c.verdict, &v))
      if (const std::string why = cpu_verdict_problem(t, w, v, c.verdict_reason, c.distinct, c.err_ratio); !why.empty())
        return bad("verdict", c.verdict, why.c_str());
  }
  for (auto [column, v] : {std::pair{"err_ratio", c.err_ratio}, std::pair{"median_seconds", c.median_seconds}})
    if (v && !(*v >= 0 && std::isfinite(*v))) return bad(column, fmt::format("{}", *v), "a finite number of 0 or more");
  // A median is a time a results file states: a year at most, as results.json and baselines hold it.
  if (c.median_seconds && !plausible_seconds(*c.median_seconds))
    return bad("median_seconds", fmt::format("{}", *c.median_seconds),
               "a time of 0, or from a nanosecond (a clock's tick) to a year");
  // A cell that ran has repeat times, so a median (results.json refuses a cell that ran with none); an imported
  // output was timed by no one, and a healthcheck keeps no times (its cells ran with every CPU busy).
  if (const BackendEntry* be = c.training ? nullptr : find_backend(t.name);
      be && !be->imported && c.kind != "healthcheck" && c.status == "ok" && !(c.median_seconds >= kClockTick) &&
      version_at_least(c.tool_version, 0, 1))
    return bad("median_seconds", c.median_seconds ? fmt::format("{}", *c.median_seconds) : "NULL",
               "how a cell that ran is recorded (its repeats were timed, a nanosecond at least)");
  return Status::ok();
}

// A run's software column is the object software_of writes: those fields and no other.
bool software_ok(const nlohmann::json& sw) {
  return sw.is_object() && unknown_field(sw, {"tool_version", "tool_commit", "os", "compiler", "hwloc", "libraries"}).empty() &&
         sw.contains("libraries") && sw["libraries"].is_object();
}

// A run's software column is the object detaudit recorded (read once per run, where it is parsed).
Status software_changed(const Db& db, int64_t run) {
  return Status::invalid(db.error(fmt::format("runs (run {}): software is not the software a run records (an "
                                              "object of tool_version, tool_commit, os, compiler, hwloc and "
                                              "libraries; the database was changed by another program)",
                                              run)));
}

Status query_training(Db& db, const HistoryFilter& f, const std::string& target_mode, const std::string& workload_mode,
                      const std::set<std::string>& machine_keys, const std::set<std::string>& hosts,
                      std::map<int64_t, nlohmann::json>* software, std::set<std::string>* used_machines,
                      std::vector<CellRecord>* cells) {
  Stmt s(db.h,
         "SELECT r.id, r.kind, r.started_at, r.results_dir, r.hostname, r.machine_key, r.tool_version, "
         "r.tool_commit, r.software, t.model, t.design, t.condition, t.target, t.seed, t.replicate, t.status, "
         "t.weights_fingerprint, t.verdict, r.plan FROM training t JOIN runs r ON r.id = t.run_id WHERE r.started_at >= ?1 "
         "ORDER BY r.started_at, r.id, t.model, t.design, t.condition, t.target, t.seed, t.replicate");
  if (!s.ok()) return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
  s.bind(1, f.since);
  // (A training cell's target is read in canonical form, so a filter that is a target spec matches in any spelling.)
  const std::string target_canon = f.target.empty() ? "" : canonical_spec(f.target, true);
  auto matches = [](const std::string& filter, const std::string& mode, const std::string& name) {
    if (filter.empty()) return true;
    return mode == "exact" ? name == filter : name.find(filter) != std::string::npos;
  };
  struct Acc {
    CellRecord c;
    std::vector<std::string> runs;  // "seed/replicate weights", sorted by the query
    std::string failed;             // the first status other than ok
    bool broken = false;            // a finished run FAILed: it broke its deterministic variant's promise
    bool nondeterministic = false;
    std::map<std::string, std::string> d_first;  // (d): each seed's first finished replicate's weights
  };
  std::vector<Acc> accs;
  std::map<std::tuple<int64_t, std::string, std::string>, size_t> index;
  std::set<std::tuple<std::string, std::string, std::string, std::string>> seen_dirs;
  std::map<int64_t, std::string> settings_of;  // run -> its design's settings, as a label carries them
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    const std::string host = s.text(4), key = s.text(5);
    if (!f.machine.empty() && !machine_keys.count(key) && !hosts.count(host)) continue;
    auto label = settings_of.find(s.integer(0));
    if (label == settings_of.end()) label = settings_of.emplace(s.integer(0), design_settings_label(s.text(18))).first;
    const std::string workload = fmt::format("train {}/{} ({}){}", s.text(9), s.text(10), s.text(11), label->second);
    const std::string target = canonical_spec(s.text(12), true);
    // An unknown name filter matched no probe cell ("none"): match training cells on their own names.
    if ((!matches(f.target, target_mode == "exact" ? "exact" : "substring", target) && target != target_canon) ||
        !matches(f.workload, workload_mode == "exact" ? "exact" : "substring", workload))
      continue;
    const int64_t run = s.integer(0);
    auto [it, fresh] = index.try_emplace({run, workload, target}, accs.size());
    if (fresh) {
      Acc a;
      a.c.run_id = run;
      a.c.kind = s.text(1);
      a.c.started_at = s.text(2);
      a.c.results_dir = s.text(3);
      a.c.hostname = host;
      a.c.machine_key = key;
      a.c.tool_version = s.text(6);
      a.c.tool_commit = s.text(7);
      auto sw = software->find(run);
      if (sw == software->end()) sw = software->emplace(run, parse_json_or_null(s.text(8))).first;
      if (!software_ok(sw->second)) return software_changed(db, run);
      a.c.software = sw->second;
      a.c.workload = workload;
      a.c.target = target;
      a.c.training = true;
      a.nondeterministic = condition_nondeterministic(s.text(11));
      accs.push_back(std::move(a));
    }
    Acc& a = accs[it->second];
    const std::string status = s.text(15);
    {
      CellRecord row;  // the row's own fields beside its run's (not its software: checked once per run above)
      row.run_id = a.c.run_id, row.kind = a.c.kind, row.started_at = a.c.started_at;
      row.tool_version = a.c.tool_version, row.workload = a.c.workload, row.target = a.c.target, row.training = true;
      row.status = status;
      row.repeats = int(std::min<int64_t>(s.integer(14), INT32_MAX));
      if (!s.text(16).empty()) row.fingerprints = {s.text(16)};
      if (s.integer(13) < 0 || s.integer(14) < 0) row.repeats = -1;  // seed and replicate are counts
      DETAUDIT_RETURN_IF_ERROR(check_row(row, db.error("training")));
    }
    if (status != "ok" && a.failed.empty()) a.failed = status;
    a.broken = a.broken || (status == "ok" && s.text(17) == "FAIL");
    // (d) runs every replicate of a seed to the same bits: a finished replicate whose weights differ from the
    // seed's first broke that promise, whatever verdict its row says (rows recorded before version 5, or edited).
    if (status == "ok" && condition_replicates_agree(s.text(11))) {
      auto [first, fresh] = a.d_first.try_emplace(s.text(13), s.text(16));
      a.broken = a.broken || (!fresh && first->second != s.text(16));
    }
    a.runs.push_back(fmt::format("{}/{} {}", s.integer(13), s.integer(14), s.text(16)));
  }
  if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  for (auto& a : accs) {
    CellRecord& c = a.c;
    // A results directory recorded twice (train, then a check of it) counts once.
    if (!seen_dirs.insert({c.results_dir, c.started_at, c.workload, c.target}).second) continue;
    c.repeats = int(a.runs.size());
    if (!a.failed.empty()) {
      c.status = a.failed;
      c.verdict = "FAIL";
    } else if (a.nondeterministic) {
      c.status = "ok";
      c.verdict = "EXPECTED";
      c.distinct = std::max(2, c.repeats);
    } else {
      // Nondeterminism off: the cell is its runs' weights, one fingerprint of them all; it FAILs where a run broke
      // the deterministic variant's promise.
      c.status = "ok";
      c.verdict = a.broken ? "FAIL" : "PASS";
      if (a.broken) c.verdict_reason = "a run broke the deterministic variant's promise of identical bits";
      std::string all;
      for (auto& r : a.runs) all += r + "\n";
      c.fingerprints = {fingerprint_bytes(all.data(), all.size()).hex()};
      c.distinct = 1;
    }
    used_machines->insert(c.machine_key);
    cells->push_back(std::move(c));
  }
  return Status::ok();
}

// The runs as detaudit records them, checked before any is shown: times that are times (recorded after the
// start, a day of clock skew allowed), a machine description, a key that names a machine of the history, an
// exit code a command gives, verdict counts that add up to its cells; no cell or training row of a run that is
// gone. Another program's change is refused naming the row and the column.
// Every row of a run is one its plan set out to run: a cell's target and workload, a training run's target, each
// in any spelling of the same spec (a row whose spec does not parse is named by the row's own check when it is read).
// A training row's key is its condition|target|seed|replicate. A row moved to another target or workload than its
// run ran, or relabelled without its key, is refused.
Status check_rows_in_plan(Db& db) {
  auto changed = [&](const std::string& what) {
    return Status::invalid(db.error(what + " (the database was changed by another program)"));
  };
  struct Plan {
    std::set<std::string> targets, workloads;  // canonical
  };
  auto parse_plan = [](const std::string& text) {
    Plan p;
    const nlohmann::json j = parse_json_or_null(text);  // (its shape is checked before)
    for (auto& t : j.value("targets", nlohmann::json::array())) p.targets.insert(canonical_spec(t.get<std::string>(), true));
    for (auto& w : j.value("workloads", nlohmann::json::array()))
      p.workloads.insert(canonical_spec(w.get<std::string>(), false));
    return p;
  };
  // A training design's settings, which its cells' labels carry, are the ones its recorded command asks for (a
  // check of a training run records the runs it checked under its own command, which asks for no design).
  {
    Stmt s(db.h, "SELECT id, command, plan FROM runs WHERE kind IN ('train', 'qualify', 'fleet') AND json_valid(plan) "
                 "AND json_type(plan, '$.design') = 'object'");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW)
      if (const std::string why = train_command_contradicts_design(s.text(1), parse_json_or_null(s.text(2))["design"]);
          !why.empty())
        return changed(fmt::format("run {}: a plan whose design is not the one its command asks for ({})", s.integer(0),
                                   why));
    if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  }
  // A count a recorded command gives ("--seeds 3", "--seeds +3"); -1 in another spelling the option parser may also
  // have read (0x10), where nothing is checked against it; none where the command gives none.
  auto count_option = [](const std::map<std::string, std::string>& given, const char* option) -> std::optional<int64_t> {
    const auto it = given.find(option);
    if (it == given.end()) return std::nullopt;
    const std::string v = it->second.starts_with("+") ? it->second.substr(1) : it->second;
    if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(v);
  };
  // The command a probe run recorded asked for what its plan holds: its targets and workloads, and each cell that
  // was not skipped repeated as often as its --repeats says (0: the suite's); --gpu-only with no CPU target, and
  // never beside --targets (command_contradicts_plan, as for a results file).
  std::map<int64_t, int64_t> repeats_asked;  // run -> its command's --repeats
  std::map<std::string, std::optional<ProbePlan>> suite_plans;  // suite -> its plan (none: a suite this version lacks)
  {
    Stmt s(db.h,
           "SELECT id, command, plan, kind, training_runs, tool_version FROM runs WHERE kind IN ('probe', 'qualify')");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      const Plan p = parse_plan(s.text(2));
      // (A qualify's plan holds its training runs' targets beside its probe's: held where it trained nothing.)
      if (const std::string why = s.integer(4) > 0 ? std::string()
                                                  : command_contradicts_plan(s.text(1), p.targets, p.workloads,
                                                                             nlohmann::json::object());
          !why.empty())
        return changed(fmt::format("run {}: {}", s.integer(0), why));
      // The command read once: a probe's --repeats and --suite, a qualify's --level (the quick suite at levels 1 and
      // 2, the full one at 3).
      const std::string sub = command_subcommand(s.text(1));
      const auto given = sub == "probe" || sub == "qualify"
                             ? command_options(s.text(1), sub, {"--repeats", "--suite", "--level"})
                             : std::nullopt;
      if (!given) continue;
      const bool qualify = sub == "qualify" && s.text(3) == "qualify";
      const std::string level = given->count("--level") ? given->at("--level") : "1";
      const std::string suite = sub == "qualify" ? (level == "3" ? "full" : "quick")
                                : given->count("--suite") ? given->at("--suite")
                                                          : kDefaultProbeSuite;
      auto [known, fresh] = suite_plans.try_emplace(suite);
      if (ProbePlan sp; fresh && make_plan(suite, "", "", 0, kDefaultProbeTimeoutS, &sp).is_ok()) known->second = sp;
      // A qualify records its probe and, at levels 2 and 3, its training regression as two runs: training rows come
      // from those levels only, and its probe ran its level's suite's workloads.
      if (qualify && level == "1" && s.integer(4) > 0)
        return changed(fmt::format("run {}: a qualify at level 1 with {} training runs (level 1 trains nothing; levels 2 "
                                   "and 3 train)",
                                   s.integer(0), s.integer(4)));
      if (qualify && s.integer(4) == 0 && known->second) {
        std::set<std::string> want;
        for (const Spec& w : known->second->workloads) want.insert(w.str());
        if (want != p.workloads)
          return changed(fmt::format("run {}: its command runs the {} suite's {} workloads, but its plan holds {} others",
                                     s.integer(0), suite, want.size(), p.workloads.size()));
      }
      // The repeats: the probe's --repeats, or its suite's (--suite, or the default) where it names none; a qualify's
      // probe, its level's suite's.
      if (sub == "qualify" && s.integer(4) > 0) continue;
      if (const auto n = count_option(*given, "--repeats"); n && *n > 0)
        repeats_asked[s.integer(0)] = *n;
      else if (!n && known->second && version_at_least(s.text(5), 0, 1))  // (the defaults of this version's suites)
        repeats_asked[s.integer(0)] = known->second->repeats;
    }
    if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  }
  // Each statement joins its rows to their run's plan: one snapshot, whatever another writer commits meanwhile.
  std::map<int64_t, Plan> plans;  // parsed once per run
  auto plan_of_run = [&](int64_t run, const std::string& text) -> const Plan& {
    auto [it, fresh] = plans.try_emplace(run);
    if (fresh) it->second = parse_plan(text);
    return it->second;
  };
  // Each run's cells, in one pass over the runs (a run without cells comes once, with NULLs):
  // - a cell of a target and workload of its run's plan, repeated as its command asks;
  // - a probe run that finished holds a cell of every target and workload of its plan that apply to each other, as
  //   its results file must (each ran, crashed, timed out or was skipped with a reason): a row taken out would let
  //   the history show part of a run as the whole. An import holds the outputs it was given, and a qualify's
  //   training record is checked by its design below.
  // (One statement, so one snapshot: a run another writer commits meanwhile comes with its cells or not at all.)
  {
    Stmt s(db.h,
           "SELECT r.id, c.target, c.workload, r.plan, c.repeats, c.status, r.kind IN ('probe', 'qualify', 'fleet') AND "
           "r.finished_at <> '' AND r.training_runs = 0, r.command, c.run_id IS NOT NULL FROM runs r LEFT JOIN cells c "
           "ON c.run_id = r.id ORDER BY r.id");
    std::optional<int64_t> run;
    bool whole_plan = false;  // the run holds a cell of every pair of its plan that apply to each other
    std::set<std::pair<std::string, std::string>> have;  // its cells (workload, target)
    auto whole = [&]() -> Status {
      if (!run || !whole_plan) return Status::ok();
      const Plan& p = plans.at(*run);
      for (const std::string& ts : p.targets)
        for (const std::string& ws : p.workloads)
          if (Spec t, w; !have.count({ws, ts}) && parse_target(ts, &t).is_ok() && parse_workload(ws, &w).is_ok() &&
                         applicable(t, w))
            return changed(fmt::format("run {}: the run finished, but it holds no cell of {} on {}, which its plan runs",
                                       *run, shown_safely(ws.substr(0, 80)), shown_safely(ts.substr(0, 80))));
      return Status::ok();
    };
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      const int64_t id = s.integer(0);
      if (run != id) {
        DETAUDIT_RETURN_IF_ERROR(whole());
        run = id, have.clear();
        whole_plan = s.integer(6) != 0 && command_subcommand(s.text(7)) != "import";
      }
      const Plan& p = plan_of_run(id, s.text(3));
      if (s.integer(8) == 0) continue;  // (a run without cells)
      if (const auto n = repeats_asked.find(id);
          n != repeats_asked.end() && s.text(5) != "skipped" && s.integer(4) != n->second)
        return changed(fmt::format("run {}: a cell of {} on {} of {} repeats, but its command asks for --repeats {}", id,
                                   shown_safely(s.text(2).substr(0, 80)), shown_safely(s.text(1).substr(0, 80)),
                                   s.integer(4), n->second));
      Spec t, w;
      const bool target_parses = parse_target(s.text(1), &t).is_ok(), workload_parses = parse_workload(s.text(2), &w).is_ok();
      if (target_parses && !p.targets.count(t.str()))
        return changed(fmt::format("run {}: a cell of target '{}', which is not one of its run's plan", id,
                                   shown_safely(s.text(1).substr(0, 80))));
      if (workload_parses && !p.workloads.count(w.str()))
        return changed(fmt::format("run {}: a cell of workload '{}', which is not one of its run's plan", id,
                                   shown_safely(s.text(2).substr(0, 80))));
      if (target_parses && workload_parses) have.insert({w.str(), t.str()});
    }
    if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
    DETAUDIT_RETURN_IF_ERROR(whole());
  }
  // A `train` run's rows are the runs of the design its command names: that design, each on its condition's variant
  // of a base target (nondeterminism on for (a) and (c), off for the others), the seeds and replicates its --seeds
  // and --replicates (or the defaults) give, and every one of them in a design that finished.
  struct Design {
    bool known = false;  // the command is a train command
    std::string design;
    nlohmann::json d;    // {"seeds", "replicates", "init_seed_base"}, as check_design_run reads a results plan's
    bool counts = false;  // the command's seeds and replicates are known
    bool finished = false;
    std::set<std::string> targets;  // the variants of the base targets it names (or the model's defaults); empty: unread
    std::vector<std::pair<std::string, std::string>> bases;  // each base target's two variants
    std::set<std::string> ran;      // the targets its rows ran on, where it finished
  };
  std::map<int64_t, Design> designs;  // parsed once per run
  std::map<std::string, std::pair<std::string, std::string>> variants;  // target -> its (deterministic, nondeterministic)
  std::map<std::tuple<int64_t, std::string, std::string>, int64_t> rows_of;  // (run, condition, target) -> rows
  {
    Stmt s(db.h,
           "SELECT t.run_id, t.target, t.key, t.condition, t.seed, t.replicate, r.plan, r.kind, r.command, "
           "r.finished_at, t.design, t.model FROM training t JOIN runs r ON r.id = t.run_id");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      Spec t;
      if (!parse_target(s.text(1), &t).is_ok()) continue;
      if (!plan_of_run(s.integer(0), s.text(6)).targets.count(t.str()))
        return changed(fmt::format("run {}: a training run of target '{}', which is not one of its run's plan",
                                   s.integer(0), shown_safely(s.text(1).substr(0, 80))));
      // (a seed or replicate that is no count is the row's own check's)
      const std::string key = s.text(2);
      if (key.empty() || s.text(4).starts_with("-") || s.text(5).starts_with("-")) continue;
      const size_t a = key.find('|'), b = a == std::string::npos ? a : key.find('|', a + 1);
      if (b == std::string::npos || key.substr(0, a) != s.text(3) ||
          canonical_spec(key.substr(a + 1, b - a - 1), true) != t.str() || key.substr(b + 1) != s.text(4) + "|" + s.text(5))
        return changed(fmt::format("run {}: a training row whose key is not its condition|target|seed|replicate ('{}')",
                                   s.integer(0), shown_safely(key.substr(0, 80))));
      auto [it, fresh] = designs.try_emplace(s.integer(0));
      Design& design = it->second;
      if (fresh && s.text(7) == "train")
        if (const auto given = command_options(s.text(8), "train", {"--design", "--seeds", "--replicates", "--targets"})) {
          // The defaults are the model's (the rows' model is held against the command where the runs are checked).
          const std::vector<std::string> words = command_words(s.text(8));
          const TrainDesign defaults =
              default_design(std::find(words.begin(), words.end(), "--paper") != words.end(), s.text(11));
          const int64_t seeds = count_option(*given, "--seeds").value_or(defaults.seeds),
                        replicates = count_option(*given, "--replicates").value_or(defaults.replicates);
          design.known = true;
          design.design = given->count("--design") ? given->at("--design") : defaults.design;
          design.d = {{"seeds", seeds}, {"replicates", replicates}, {"init_seed_base", kInitSeedBase}};
          design.counts = seeds >= 0 && replicates >= 0;
          design.finished = !s.text(9).empty() && design.counts;
          // Its base targets, each run in its two variants.
          std::vector<Spec> bases = defaults.targets;
          if (const auto named = given->find("--targets"); named != given->end()) {
            bases.clear();
            if (const auto items = split_list(named->second); items)
              for (const std::string& text : *items)
                if (Spec b; parse_target(text, &b).is_ok()) bases.push_back(b);
          }
          for (const Spec& b : bases)
            if (Spec det, nondet; training_variants(b, &det, &nondet).is_ok()) {
              design.targets.insert({det.str(), nondet.str()});
              design.bases.push_back({det.str(), nondet.str()});
            }
        }
      if (!design.known) continue;
      if (!design.targets.empty() && !design.targets.count(t.str()))
        return changed(fmt::format("run {}: a training run on {}, which is no variant of the targets its command names",
                                   s.integer(0), shown_safely(t.str().substr(0, 80))));
      auto [v, fresh_target] = variants.try_emplace(t.str());
      if (Spec det, nondet; fresh_target && training_variants(t, &det, &nondet).is_ok()) v->second = {det.str(), nondet.str()};
      const bool nondet = condition_nondeterministic(s.text(3));
      if (!v->second.first.empty() && t.str() != (nondet ? v->second.second : v->second.first))
        return changed(fmt::format("run {}: a training run of condition ({}) on {}, which is not a {}deterministic "
                                   "variant (condition ({}) runs with nondeterminism {})",
                                   s.integer(0), shown_safely(s.text(3).substr(0, 8)), shown_safely(t.str().substr(0, 80)),
                                   nondet ? "non" : "", shown_safely(s.text(3).substr(0, 8)), nondet ? "on" : "off"));
      if (s.text(10) != design.design)
        return changed(fmt::format("run {}: a training run of design '{}', but its command trains {}", s.integer(0),
                                   shown_safely(s.text(10).substr(0, 40)), shown_safely(design.design.substr(0, 40))));
      if (Status st = design.counts ? check_design_run(s.text(3), uint64_t(s.integer(4)), s.integer(5), design.d,
                                                       "training")
                                    : Status::ok();
          !st)
        return changed(fmt::format("run {}: {} (its command: --seeds {}, --replicates {})", s.integer(0), st.message(),
                                   design.d["seeds"].get<int64_t>(), design.d["replicates"].get<int64_t>()));
      if (design.finished) ++rows_of[{s.integer(0), s.text(3), t.str()}];
      if (design.finished) design.ran.insert(t.str());
    }
    if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  }
  // ... and on every target its command names (its defaults where it names none), in one variant at least.
  for (const auto& [run, design] : designs)
    for (const auto& [det, nondet] : design.bases)
      if (design.finished && !design.ran.count(det) && !design.ran.count(nondet))
        return changed(fmt::format("run {}: no training run on {} or {}, the variants of a target its command names (a "
                                   "design that finished runs on every one)",
                                   run, shown_safely(det.substr(0, 80)), shown_safely(nondet.substr(0, 80))));
  // A design that finished holds every run it plans: of each condition and target, seeds x replicates runs under
  // (a) and (c) (designs older than (c)'s replicates ran it seeds times), seeds under (b), (d) and (e).
  for (const auto& [group, rows] : rows_of) {
    const auto& [run, condition, target] = group;
    const nlohmann::json& d = designs.at(run).d;
    const int64_t seeds = d["seeds"].get<int64_t>(), replicates = d["replicates"].get<int64_t>();
    const int64_t want = condition_nondeterministic(condition) ? seeds * replicates : seeds;
    if (rows != want && !(condition == "c" && rows == seeds))
      return changed(fmt::format("run {}: {} training runs of condition ({}) on {}, but the design its command names "
                                 "runs {} (--seeds {}, --replicates {})",
                                 run, rows, shown_safely(condition.substr(0, 8)), shown_safely(target.substr(0, 80)),
                                 want, seeds, replicates));
  }
  return Status::ok();
}

Status check_runs(Db& db) {
  auto changed = [&](const std::string& what) {
    return Status::invalid(db.error(what + " (the database was changed by another program)"));
  };
  {
    Stmt s(db.h,
           "SELECT r.id, r.started_at, r.finished_at, r.recorded_at, r.machine, r.exit_code, r.cells, r.pass, r.fail, "
           "r.expected, r.warn, r.skip, r.unjudged, r.training_runs, r.machine_key, "
           "(SELECT count(*) FROM machines m WHERE m.key = r.machine_key), r.hostname, "
           // (a core count that is no count is named by the machines' own check)
           "(SELECT m.identity || char(10) || m.cpu_model || char(10) || m.cpu_features || char(10) || m.cores || "
           "char(10) || m.gpus FROM machines m WHERE m.key = r.machine_key AND typeof(m.cores) = 'integer' AND "
           "m.cores >= 0), r.tool_version, "
           "r.tool_commit, r.software, r.kind FROM runs r");
    if (!s.ok()) return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      const int64_t id = s.integer(0);
      const std::string started = s.text(1), finished = s.text(2), recorded = s.text(3);
      auto bad = [&](const char* column, const std::string& value, const char* what) {
        return changed(fmt::format("runs (run {}): {} '{}' is not {}", id, column, shown_safely(value.substr(0, 40)), what));
      };
      if (!is_utc_iso8601(started)) return bad("started_at", started, "a time (YYYY-MM-DDTHH:MM:SSZ)");
      if (!finished.empty() && !is_utc_iso8601(finished)) return bad("finished_at", finished, "a time");
      // (recorded on this machine's clock, started on the run's: a day of skew is allowed, as for results)
      const auto rec = iso8601_seconds(recorded), start = iso8601_seconds(started);
      if (!rec || !start || *rec + 86400 < *start) return bad("recorded_at", recorded, "a time after started_at");
      // Recorded when it was, on this clock (a day of skew allowed): not yet to come, not before the run ended.
      if (*rec > int64_t(std::time(nullptr)) + 86400) return bad("recorded_at", recorded, "a time that has come");
      // A probe, a training design or a qualify is recorded by the process that ran it, when it ends, on one clock.
      const std::string kind = s.text(21);
      const bool own_clock = kind == "probe" || kind == "train" || kind == "qualify" || kind == "healthcheck";
      if (const auto fin = iso8601_seconds(finished); fin && *fin > *rec + (own_clock ? 0 : 86400))
        return bad("finished_at", finished,
                   own_clock ? "a time before the run was recorded (by the process that ran it, on its clock)"
                             : "a time before the run was recorded");
      const int64_t code = s.integer(5);
      if (!(code >= 0 && code <= 2) && !(code > 128 && code < 160))
        return bad("exit_code", std::to_string(code), "an exit code detaudit gives (0, 1, 2, 128 + a signal)");
      int64_t sum = 0;
      for (int i = 7; i <= 12; ++i) {
        if (s.integer(i) < 0) return bad("pass, fail, expected, warn, skip, unjudged", std::to_string(s.integer(i)), "counts");
        sum += s.integer(i);
      }
      if (s.integer(6) != sum || s.integer(13) < 0)
        return bad("cells", std::to_string(s.integer(6)), "the sum of its verdict counts");
      const nlohmann::json machine = parse_json_or_null(s.text(4));
      if (!machine.is_object()) return bad("machine", "(not a JSON object)", "a machine description");
      if (s.integer(15) != 1) return bad("machine_key", s.text(14), "the key of a machine of the history");
      // The key and the host are the run's machine description's.
      if (machine_key(machine) != s.text(14)) return bad("machine_key", s.text(14), "the key of the run's machine");
      // The machine row of that key describes the run's machine, as recording wrote it.
      if (const nlohmann::json ident = machine_identity(machine);
          !s.text(17).empty() && s.text(17) != fmt::format("{}\n{}\n{}\n{}\n{}", ident.dump(), ident["cpu_model"].get<std::string>(),
                                    join(ident["cpu_features"].get<std::vector<std::string>>(), " "),
                                    ident["cores"].get<int64_t>(), ident["gpus"].dump()))
        return changed(fmt::format("machines (key {}): identity, cpu_model, cpu_features, cores or gpus is not the machine "
                                   "of run {}",
                                   shown_safely(s.text(14).substr(0, 16)), id));
      if (const std::string host = json_fields::str_or_json(machine, "hostname");
          machine.contains("hostname") && host != s.text(16))
        return bad("hostname", s.text(16), "the host name of the run's machine");
      // The software is the run's machine's (its libraries, OS, compiler and hwloc, as recording copied them).
      if (const nlohmann::json sw = parse_json_or_null(s.text(20)); sw.is_object()) {
        if (machine.contains("libraries") && (!sw.contains("libraries") || sw["libraries"] != machine["libraries"]))
          return bad("software", "libraries", "the libraries of the run's machine");
        for (const char* k : {"os", "compiler", "hwloc"})
          if (machine.contains(k) && (!sw.contains(k) || sw[k] != machine[k])) return bad("software", k, "the run machine's");
      }
      // The tool that ran it is the one its software says (the software's own shape is checked where it is read).
      if (const nlohmann::json sw = parse_json_or_null(s.text(20)); sw.is_object())
        for (auto [column, value] : {std::pair{"tool_version", s.text(18)}, std::pair{"tool_commit", s.text(19)}})
          if (sw.contains(column) && is_version_text(s.text(18)) &&  // (a version that is none: the row's check)
              (!sw[column].is_string() || sw[column].get<std::string>() != value))
            return bad(column, value, "the one its software column records");
    }
    if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  }
  // What each column holds, as detaudit writes it: integers as integers, numbers as numbers (SQLite stores
  // whatever it is given, 'zero' in an integer column included); rows of the kind their run is.
  static const std::pair<const char*, const char*> kShapes[] = {
      {"SELECT 'run ' || id FROM runs WHERE typeof(exit_code) <> 'integer' OR typeof(cells) <> 'integer' OR typeof(pass) <> "
       "'integer' OR typeof(fail) <> 'integer' OR typeof(training_runs) <> 'integer' LIMIT 1",
       "a count or exit code that is no integer"},
      {"SELECT 'run ' || id FROM runs WHERE finished_at <> '' AND finished_at < started_at LIMIT 1", "finished before it started"},
      {"SELECT 'run ' || id FROM runs WHERE kind = 'probe' AND (training_runs <> 0 OR id IN (SELECT run_id FROM training)) LIMIT 1",
       "a probe run with training rows (a probe trains nothing)"},
      {"SELECT 'run ' || id FROM runs WHERE kind = 'train' AND id IN (SELECT run_id FROM cells) LIMIT 1",
       "a training run with probe cells (a training design probes nothing)"},
      // A healthcheck runs a reference's probe cells, in no folder of results, and times nothing (every CPU is busy).
      {"SELECT 'run ' || id FROM runs WHERE kind = 'healthcheck' AND (training_runs <> 0 OR results_dir <> '' OR id IN "
       "(SELECT run_id FROM training) OR id IN (SELECT run_id FROM cells WHERE median_seconds IS NOT NULL OR err_ratio "
       "IS NOT NULL)) LIMIT 1",
       "a healthcheck with training rows, a results folder or timings (it has none)"},
      // A healthcheck exits 1 exactly when a cell FAILed; 0 only with cells judged; 2 (a CPU judged nothing) beside
      // no FAIL; a check of no cell, or one interrupted, is not recorded.
      {"SELECT 'run ' || id FROM runs WHERE kind = 'healthcheck' AND (exit_code NOT IN (0, 1, 2) OR (exit_code = 1) <> "
       "(fail > 0) OR cells = 0) LIMIT 1",
       "a healthcheck whose exit code is not what its cells give (1 exactly when one FAILed; none without a cell)"},
      // Each run's counts are those of its rows.
      {"SELECT 'run ' || r.id FROM runs r WHERE r.cells <> (SELECT count(*) FROM cells c WHERE c.run_id = r.id) OR "
       "r.training_runs <> (SELECT count(*) FROM training t WHERE t.run_id = r.id) LIMIT 1",
       "a run whose count of cells or training runs is not the number of its rows"},
      {"SELECT 'run ' || r.id FROM runs r WHERE ("
       "r.pass <> (SELECT count(*) FROM cells c WHERE c.run_id = r.id AND c.verdict = 'PASS') OR "
       "r.fail <> (SELECT count(*) FROM cells c WHERE c.run_id = r.id AND c.verdict = 'FAIL') OR "
       "r.expected <> (SELECT count(*) FROM cells c WHERE c.run_id = r.id AND c.verdict = 'EXPECTED') OR "
       "r.warn <> (SELECT count(*) FROM cells c WHERE c.run_id = r.id AND c.verdict = 'WARN') OR "
       "r.skip <> (SELECT count(*) FROM cells c WHERE c.run_id = r.id AND c.verdict = 'SKIP')) AND NOT EXISTS "
       "(SELECT 1 FROM cells c WHERE c.run_id = r.id AND c.verdict NOT IN ('', 'PASS', 'FAIL', 'EXPECTED', 'WARN', "
       "'SKIP')) LIMIT 1",  // (a verdict no detaudit gives is named by the row's own check)
       "a run whose verdict counts are not those of its cells"},
      // A probe exits 1 for a FAIL cell and for nothing else.
      {"SELECT 'run ' || id FROM runs WHERE kind = 'probe' AND exit_code = 1 AND fail = 0 LIMIT 1",
       "a probe run that exited 1 (a FAIL) without a failed cell"},
      // A training design exits 1 exactly when one of its runs crashed, timed out or failed (a diverged run is a
      // warning), and it trains the model its command names.
      {"SELECT 'run ' || r.id FROM runs r WHERE r.kind = 'train' AND r.exit_code IN (0, 1) AND (r.exit_code = 1) <> "
       "EXISTS (SELECT 1 FROM training t WHERE t.run_id = r.id AND t.verdict = 'FAIL') LIMIT 1",
       "a training run whose exit code is not what its runs give (1 exactly when one FAILed)"},
      // check and qualify FAIL a finished training run that broke its promise (check: its own failure; qualify: (d)
      // identical): such a run never exits 0. (A crash is left out: a check before version 5 could pass a crash in
      // a cell its baseline did not hold.)
      {"SELECT 'run ' || r.id FROM runs r WHERE r.kind IN ('check', 'qualify') AND r.exit_code = 0 AND EXISTS (SELECT "
       "1 FROM training t WHERE t.run_id = r.id AND t.status = 'ok' AND t.verdict = 'FAIL') LIMIT 1",
       "a check or qualify run that exited 0 beside a training run that broke its promise"},
      // A run's verdict is what its status gives (a crash, timeout or error FAILs, a skip is a SKIP, a finished run
      // PASSes, or WARNs where it diverged); a finished run FAILs only where it ran with nondeterminism off ((b),
      // (d), (e)) and broke that promise.
      {"SELECT 'run ' || run_id FROM training WHERE verdict <> CASE WHEN status IN ('crashed', 'timeout', 'error') "
       "THEN 'FAIL' WHEN status = 'skipped' THEN 'SKIP' WHEN verdict = 'FAIL' AND condition IN ('b', 'd', 'e') THEN "
       "'FAIL' WHEN final_loss IS NULL THEN 'WARN' ELSE 'PASS' END LIMIT 1",
       "a training row whose verdict is not what its status and condition give"},
      {"SELECT 'run ' || r.id FROM runs r JOIN training t ON t.run_id = r.id WHERE r.kind = 'train' AND "
       "instr(' ' || r.command || ' ', ' ' || t.model || ' ') = 0 LIMIT 1",
       "a training run with rows of a model its command does not train"},
      {"SELECT 'run ' || run_id FROM training WHERE status <> 'ok' AND (final_loss IS NOT NULL OR weights_fingerprint <> '') "
       "LIMIT 1",
       "a training run that did not finish, with a final loss or weights"},
      {"SELECT 'machines row ' || rowid FROM machines WHERE typeof(cores) <> 'integer' OR key = '' OR length(key) <> 16 LIMIT 1",
       "a machine whose key or core count is not what detaudit writes (16 hex digits, an integer)"},
      {"SELECT 'run ' || run_id FROM cells WHERE (err_ratio IS NOT NULL AND typeof(err_ratio) NOT IN ('real', 'integer')) OR "
       "(median_seconds IS NOT NULL AND typeof(median_seconds) NOT IN ('real', 'integer')) OR typeof(repeats) <> "
       "'integer' OR typeof(distinct_outputs) <> 'integer' LIMIT 1",
       "a cell whose number is no number"},
      // (A loss is finite: a run whose loss is not finite diverged, and its row has none.)
      {"SELECT 'run ' || run_id FROM training WHERE condition NOT IN ('a', 'b', 'c', 'd', 'e') OR (final_loss IS NOT NULL AND "
       "(typeof(final_loss) NOT IN ('real', 'integer') OR NOT final_loss BETWEEN 0 AND 1.7976931348623157e308)) OR "
       "typeof(seed) <> 'integer' OR typeof(replicate) <> 'integer' LIMIT 1",
       "a training row with a condition or loss no run has, or a seed that is no integer"},
      {"SELECT 'run ' || run_id FROM training WHERE status = 'ok' AND weights_fingerprint = '' LIMIT 1",
       "a training run that finished without the fingerprint of its final weights"},
      // The plan is what recording writes (each row of the run is checked against it below).
      {"SELECT 'run ' || id FROM runs WHERE CASE WHEN json_valid(plan) THEN json_type(plan) <> 'object' OR "
       "json_type(plan, '$.targets') IS NOT 'array' OR json_type(plan, '$.workloads') IS NOT 'array' OR "
       "json_type(plan, '$.design') NOT IN ('object') OR json_type(plan, '$.data_fingerprint') NOT IN ('text') OR "
       "(SELECT count(*) FROM json_each(plan)) <> 2 + (json_type(plan, '$.design') IS NOT NULL) + "
       "(json_type(plan, '$.data_fingerprint') IS NOT NULL) OR EXISTS (SELECT 1 FROM json_each(plan, '$.targets') "
       "WHERE type <> 'text') OR EXISTS (SELECT 1 FROM json_each(plan, '$.workloads') WHERE type <> 'text') ELSE 1 END "
       "LIMIT 1",
       "a plan that is not {\"targets\": [...], \"workloads\": [...]} (lists of names), with a training design's "
       "\"design\" object and \"data_fingerprint\""},
      // The command is the kind's: `detaudit probe ...` for a probe, and so on; a check's is `detaudit check ...`, or
      // (recorded before checks kept their own) the command of the results it checked.
      {"SELECT 'run ' || id FROM runs WHERE instr(command || ' ', ' ' || kind || ' ') = 0 AND NOT (kind = 'check' AND ("
       "instr(command || ' ', ' probe ') > 0 OR instr(command || ' ', ' import ') > 0)) LIMIT 1",
       "a run whose command is not one of its kind"},
      // The results folder is absolute and as recording normalizes it.
      {"SELECT 'run ' || id FROM runs WHERE results_dir <> '' AND (substr(results_dir, 1, 1) <> '/' OR "
       "instr(results_dir || '/', '//') > 0 OR instr(results_dir || '/', '/./') > 0 OR instr(results_dir || '/', "
       "'/../') > 0 OR (results_dir <> '/' AND substr(results_dir, -1) = '/') OR results_dir GLOB '*[' || char(1) || "
       "'-' || char(31) || char(127) || ']*') LIMIT 1",
       "a results folder that is not an absolute, normal path"},
  };
  // The CPUs and GPUs a healthcheck's FAILs name are the machine's: each named once per reason, a logical CPU on one
  // core and package throughout the run, a core the machine has (its hwloc index), a GPU it lists.
  {
    Stmt s(db.h,
           "SELECT c.run_id, c.verdict_reason, r.machine FROM cells c JOIN runs r ON r.id = c.run_id WHERE r.kind = "
           "'healthcheck' AND c.verdict = 'FAIL' ORDER BY c.run_id");
    static const std::regex kPlace(R"((cpu ([0-9]+) \(core ([0-9]+), package ([0-9]+)\))|(gpu ([0-9]+)))");
    int64_t run = -1;
    std::map<std::string, std::string> where_of;  // "cpu N" -> "core C, package P" in this run
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      if (s.integer(0) != run) run = s.integer(0), where_of.clear();
      const std::string reason = s.text(1);
      const nlohmann::json machine = parse_json_or_null(s.text(2));
      const int64_t cores = machine.is_object() && machine.contains("cores") && machine["cores"].is_number_integer()
                                ? machine["cores"].get<int64_t>()
                                : 0;
      const size_t gpus = machine.is_object() && machine.contains("gpus") && machine["gpus"].is_array()
                              ? machine["gpus"].size()
                              : 0;
      const std::string named = health_places(reason);
      std::set<std::string> once;
      auto bad_place = [&](const std::string& what) {
        return changed(fmt::format("run {}: a healthcheck's FAIL naming {} ('{}')", run, what,
                                   shown_safely(named.substr(0, 120))));
      };
      for (auto it = std::sregex_iterator(named.begin(), named.end(), kPlace); it != std::sregex_iterator(); ++it) {
        const std::smatch& p = *it;
        if (!once.insert(p[0].str()).second) return bad_place("one CPU or GPU twice");
        if (p[1].matched) {
          if (cores > 0 && std::stoll(p[3].str().substr(0, 9)) >= cores)
            return bad_place(fmt::format("a core the machine does not have (it has {})", cores));
          const auto [at, fresh] = where_of.try_emplace("cpu " + p[2].str(), p[3].str() + "/" + p[4].str());
          if (!fresh && at->second != p[3].str() + "/" + p[4].str())
            return bad_place("a logical CPU on two cores or packages in one run");
        } else if (std::stoull(p[6].str().substr(0, 9)) >= gpus) {
          return bad_place(fmt::format("a GPU the machine does not list (it lists {})", gpus));
        }
      }
      if (once.empty()) return bad_place("no CPU or GPU");
    }
    if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  }
  // A healthcheck ends within its budget of its start (--budget, 6 s by default), give or take two minutes for
  // starting, judging and a slow history.
  {
    Stmt s(db.h, "SELECT id, started_at, finished_at, command FROM runs WHERE kind = 'healthcheck'");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      const auto given = command_options(s.text(3), "healthcheck", {"--budget"});
      double budget = kHealthBudgetDefault;
      if (given && given->count("--budget")) {
        char* end = nullptr;
        budget = std::strtod(given->at("--budget").c_str(), &end);
        if (!end || *end || !(budget > 0 && budget <= 3600)) continue;  // (a spelling the parser may also read)
      }
      const auto start = iso8601_seconds(s.text(1)), end = iso8601_seconds(s.text(2));
      if (start && end && double(*end - *start) > budget + 120)
        return changed(fmt::format("run {}: a healthcheck of --budget {:g} s that took {} s (finished_at {})",
                                   s.integer(0), budget, *end - *start, shown_safely(s.text(2).substr(0, 40))));
    }
    if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  }
  for (auto& [sql, what] : kShapes) {
    Stmt s(db.h, sql);
    if (!s.ok()) return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
    if (s.step() == SQLITE_ROW) return changed(fmt::format("{}: {}", shown_safely(s.text(0)), what));
  }
  // A device's target ran only where the machine has that device: a cell or training run of a GPU target that
  // ran (a skip says why it did not) on a machine whose description lists no GPU is a row moved to another
  // target.
  for (const char* sql :
       {"SELECT DISTINCT c.run_id, c.target FROM cells c JOIN runs r ON r.id = c.run_id WHERE c.status <> 'skipped' "
        "AND json_valid(r.machine) AND json_type(r.machine, '$.gpus') = 'array' AND json_array_length(r.machine, '$.gpus') = 0",
        "SELECT DISTINCT t.run_id, t.target FROM training t JOIN runs r ON r.id = t.run_id WHERE t.status <> 'skipped' "
        "AND json_valid(r.machine) AND json_type(r.machine, '$.gpus') = 'array' AND json_array_length(r.machine, '$.gpus') = 0"}) {
    Stmt s(db.h, sql);
    if (!s.ok()) return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
    int rc;
    while ((rc = s.step()) == SQLITE_ROW)
      if (const TargetFacts f = target_facts(s.text(1)); f.known && f.device_kind != "host")
        return changed(fmt::format("run {}: target '{}' ran on a machine without a GPU (a cell another target gave)",
                                   s.integer(0), shown_safely(s.text(1).substr(0, 80))));
    if (rc != SQLITE_DONE) return Status::invalid(describe_sqlite_error(db, rc));
  }
  DETAUDIT_RETURN_IF_ERROR(check_rows_in_plan(db));
  {
    // One results directory recorded twice (a probe, then a check of it) holds the same cells: the same outputs.
    Stmt s(db.h,
           "SELECT ra.id, rb.id, a.workload, a.target FROM cells a JOIN runs ra ON ra.id = a.run_id JOIN runs rb ON "
           "rb.results_dir = ra.results_dir AND rb.started_at = ra.started_at AND rb.id > ra.id AND ra.results_dir <> '' "
           "JOIN cells b ON b.run_id = "
           "rb.id AND b.workload = a.workload AND b.target = a.target WHERE a.status = 'ok' AND b.status = 'ok' AND "
           "a.fingerprints <> b.fingerprints LIMIT 1");
    if (!s.ok()) return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
    if (s.step() == SQLITE_ROW)
      return changed(fmt::format("runs {} and {} record one run's cell {} on {} with other outputs", s.integer(0),
                                 s.integer(1), shown_safely(s.text(2).substr(0, 80)), shown_safely(s.text(3).substr(0, 80))));
  }
  int64_t orphans = 0;
  DETAUDIT_RETURN_IF_ERROR(pragma_int(db,
                                      "SELECT (SELECT count(*) FROM cells WHERE run_id NOT IN (SELECT id FROM runs)) + "
                                      "(SELECT count(*) FROM training WHERE run_id NOT IN (SELECT id FROM runs))",
                                      &orphans));
  if (orphans > 0) return changed(fmt::format("{} cell or training rows belong to no run", orphans));
  return Status::ok();
}


Status query_history(const std::string& db_path, const HistoryFilter& f, HistoryQueryResult* out) {
  *out = HistoryQueryResult{};
  Db db;
  bool exists = false;
  DETAUDIT_RETURN_IF_ERROR(open_history(db_path, Mode::kQuery, &db, &exists));
  out->exists = exists;
  if (!exists) return Status::ok();
  return query_open(db, f, out);
}

// The query on an open history (every row it reads checked as it is read).
Status query_open(Db& db, const HistoryFilter& f, HistoryQueryResult* out) {
  int64_t runs = 0;
  DETAUDIT_RETURN_IF_ERROR(pragma_int(db, "SELECT count(*) FROM runs", &runs));
  out->runs = int(runs);
  DETAUDIT_RETURN_IF_ERROR(check_runs(db));

  std::set<std::string> targets, workloads;
  if (Status st; !(st = distinct_column(db, "SELECT DISTINCT target FROM cells", &targets)) ||
                 !(st = distinct_column(db, "SELECT DISTINCT workload FROM cells", &workloads)))
    return st;
  out->target_match = match_mode(f.target, targets);
  out->workload_match = match_mode(f.workload, workloads);
  // A filter that is a spec matches that spec's cells in any spelling ("cpu?threads=2&order=atomic" is
  // cpu?order=atomic&threads=2&isa=auto): where its own text names no cell, the cells whose canonical form is its.
  nlohmann::json target_names = nlohmann::json::array(), workload_names = nlohmann::json::array();
  auto respell = [](const std::string& filter, const std::set<std::string>& names, bool target, std::string* mode,
                    nlohmann::json* list) {
    if (filter.empty() || *mode != "none") return;
    const std::string canon = canonical_spec(filter, target);
    for (auto& n : names)
      if (canonical_spec(n, target) == canon) list->push_back(n);
    if (!list->empty()) *mode = "canonical";
  };
  respell(f.target, targets, true, &out->target_match, &target_names);
  respell(f.workload, workloads, false, &out->workload_match, &workload_names);

  // The machines, with the hostnames that ran on them.
  std::map<std::string, MachineRecord> machines;
  {
    Stmt s(db.h,
           "SELECT m.key, m.cpu_model, m.cpu_features, m.cores, m.gpus, m.first_seen, m.last_seen, "
           "(SELECT count(*) FROM runs r WHERE r.machine_key = m.key) FROM machines m");
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      MachineRecord m;
      m.key = s.text(0);
      m.cpu_model = s.text(1);
      m.cpu_features = s.text(2);
      m.cores = int(s.integer(3));
      m.gpus = parse_json_or_null(s.text(4));
      m.first_seen = s.text(5);
      m.last_seen = s.text(6);
      m.runs = int(s.integer(7));
      if (s.integer(3) < 0 || !is_utc_iso8601(m.first_seen) || !is_utc_iso8601(m.last_seen) ||
          m.last_seen < m.first_seen || !m.gpus.is_array() ||
          !std::all_of(m.gpus.begin(), m.gpus.end(), [](const nlohmann::json& g) { return g.is_object(); }))
        return Status::invalid(db.error(fmt::format("machines ({}): cores {}, first_seen '{}', last_seen '{}', gpus "
                                                    "are not a count, two times in order and a list of GPUs (the database "
                                                    "was changed by another program)",
                                                    shown_safely(m.key.substr(0, 40)), s.integer(3),
                                                    shown_safely(m.first_seen.substr(0, 40)),
                                                    shown_safely(m.last_seen.substr(0, 40)))));
      // A machine joins the history with the run made on it: one that no run names was added by another program.
      if (m.runs == 0)
        return Status::invalid(db.error(fmt::format("machines ({}): no run was made on it (the database was changed by "
                                                    "another program)",
                                                    shown_safely(m.key.substr(0, 40)))));
      machines[m.key] = m;
    }
    if (rc != SQLITE_DONE) {
      return Status::invalid(describe_sqlite_error(db, rc));
    }
    Stmt h(db.h, "SELECT DISTINCT machine_key, hostname FROM runs");
    while ((rc = h.step()) == SQLITE_ROW)
      if (machines.count(h.text(0))) add_sorted_unique(&machines[h.text(0)].hostnames, h.text(1));
    if (rc != SQLITE_DONE) {
      return Status::invalid(describe_sqlite_error(db, rc));
    }
  }
  // --machine: a key or a hostname; a key selects every host of that hardware, a hostname that host.
  std::set<std::string> machine_keys, hosts;
  if (!f.machine.empty()) {
    for (auto& [k, m] : machines) {
      if (k == f.machine) machine_keys.insert(k);
      for (auto& h : m.hostnames)
        if (h == f.machine) hosts.insert(h);
    }
    out->machine_match = "exact";
    if (machine_keys.empty() && hosts.empty()) {
      for (auto& [k, m] : machines) {
        if (k.rfind(f.machine, 0) == 0) machine_keys.insert(k);
        for (auto& h : m.hostnames)
          if (h.find(f.machine) != std::string::npos) hosts.insert(h);
      }
      out->machine_match = machine_keys.empty() && hosts.empty() ? "none" : "substring";
    }
  }
  // The name filters in SQL (the index on cells(workload, target) serves the exact ones).
  std::string sql =
      "SELECT r.id, r.kind, r.started_at, r.results_dir, r.hostname, r.machine_key, r.tool_version, r.tool_commit, "
      "c.workload, c.target, c.status, c.reason, c.verdict, c.verdict_reason, c.repeats, c.distinct_outputs, "
      "c.fingerprints, c.err_ratio, c.median_seconds, c.rows_fingerprint FROM cells c JOIN runs r ON r.id = c.run_id "
      "WHERE r.started_at >= ?1";
  auto name_sql = [](const char* column, int param, const std::string& mode) -> std::string {
    if (mode == "exact") return fmt::format(" AND c.{} = ?{}", column, param);
    if (mode == "canonical") return fmt::format(" AND c.{} IN (SELECT value FROM json_each(?{}))", column, param);
    if (mode == "substring") return fmt::format(" AND instr(c.{}, ?{}) > 0", column, param);
    if (mode == "none") return " AND 0";
    return "";
  };
  sql += name_sql("target", 2, out->target_match) + name_sql("workload", 3, out->workload_match);
  sql += " ORDER BY r.started_at, r.id";
  Stmt s(db.h, sql.c_str());
  Stmt sw(db.h, "SELECT software FROM runs WHERE id = ?1");
  if (!s.ok() || !sw.ok()) {
    return Status::invalid(describe_sqlite_error(db, sqlite3_errcode(db.h)));
  }
  s.bind(1, f.since);
  if (!out->target_match.empty()) s.bind(2, out->target_match == "canonical" ? target_names.dump() : f.target);
  if (!out->workload_match.empty()) s.bind(3, out->workload_match == "canonical" ? workload_names.dump() : f.workload);
  std::map<int64_t, nlohmann::json> software;  // read and parsed once per run
  std::set<std::tuple<std::string, std::string, std::string, std::string>> seen;
  // (run, workload, product fingerprint) -> (rows fingerprint, target) of the cells that passed batch invariance
  std::map<std::tuple<int64_t, std::string, std::string>, std::pair<std::string, std::string>> invariant_rows;
  std::set<std::string> used_machines;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    CellRecord c;
    c.machine_key = s.text(5);
    c.hostname = s.text(4);
    if (!f.machine.empty() && !machine_keys.count(c.machine_key) && !hosts.count(c.hostname)) continue;
    // Each spec in its canonical form, as this version writes it: `threads=01`, or a spelling of an older
    // version, is the same cell as `threads=1` (check_row refuses what does not parse).
    c.workload = canonical_spec(s.text(8), false);
    c.target = canonical_spec(s.text(9), true);
    c.run_id = s.integer(0);
    c.kind = s.text(1);
    c.started_at = s.text(2);
    c.results_dir = s.text(3);
    if (!seen.insert({c.results_dir, c.started_at, c.workload, c.target}).second) continue;
    c.tool_version = s.text(6);
    c.tool_commit = s.text(7);
    auto it = software.find(c.run_id);
    if (it == software.end()) {
      sw.bind(1, c.run_id);
      int src = sw.step();
      if (src != SQLITE_ROW) {
        return Status::invalid(describe_sqlite_error(db, src));
      }
      it = software.emplace(c.run_id, parse_json_or_null(sw.text(0))).first;
      if (!software_ok(it->second)) return software_changed(db, c.run_id);
      sw.reset();
    }
    c.software = it->second;
    c.status = s.text(10);
    c.reason = s.text(11);
    c.verdict = s.text(12);
    c.verdict_reason = s.text(13);
    c.repeats = int(s.integer(14));
    c.distinct = int(s.integer(15));
    c.fingerprints = split_spaces(s.text(16));
    c.err_ratio = s.real(17);
    c.median_seconds = s.real(18);
    c.rows_fingerprint = s.text(19);
    DETAUDIT_RETURN_IF_ERROR(check_row(c, db.error("cells")));
    // Rows that agreed with one product are its rows: the invariant cells of one run, workload and product share them.
    if (Spec t, w; !c.rows_fingerprint.empty() && parse_target(c.target, &t) && parse_workload(c.workload, &w) &&
                   rows_invariant_by_verdict(c, t, w)) {
      const auto [it, fresh] = invariant_rows.try_emplace({c.run_id, c.workload, c.fingerprints[0]}, c.rows_fingerprint,
                                                          c.target);
      if (!fresh && it->second.first != c.rows_fingerprint)
        return Status::invalid(db.error(fmt::format(
            "cells (run {}, {} on {}): rows_fingerprint '{}' is not the rows of {} on {}, which passed a promise of batch "
            "invariance with the same product ('{}'): rows that agree with one product are its rows (the database was "
            "changed by another program)",
            c.run_id, c.workload, c.target, c.rows_fingerprint, c.workload, it->second.second, it->second.first)));
    }
    used_machines.insert(c.machine_key);
    out->cells.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) {
    return Status::invalid(describe_sqlite_error(db, rc));
  }
  DETAUDIT_RETURN_IF_ERROR(query_training(db, f, out->target_match, out->workload_match, machine_keys, hosts, &software,
                                          &used_machines, &out->cells));
  // A filter that matched no probe cell but training cells matched: say how (it is no "nothing recorded").
  for (auto [filter, mode, is_target] : {std::tuple{&f.target, &out->target_match, true},
                                         std::tuple{&f.workload, &out->workload_match, false}}) {
    if (filter->empty() || *mode != "none") continue;
    for (const CellRecord& c : out->cells) {
      if (!c.training) continue;
      const std::string& name = is_target ? c.target : c.workload;
      if (name == *filter) *mode = "exact";
      else if (name.find(*filter) != std::string::npos) *mode = "substring";
      else *mode = "canonical";
      break;
    }
  }
  // Probe and training cells in one time order.
  std::stable_sort(out->cells.begin(), out->cells.end(), [](const CellRecord& x, const CellRecord& y) {
    return std::tie(x.started_at, x.run_id) < std::tie(y.started_at, y.run_id);
  });
  for (auto& k : used_machines)
    if (machines.count(k)) out->machines.push_back(machines[k]);
  return Status::ok();
}

std::vector<SoftwareChange> software_diff(const nlohmann::json& before, const nlohmann::json& after) {
  std::map<std::string, std::string> a, b;
  flatten(before, "", &a);
  flatten(after, "", &b);
  std::set<std::string> keys;
  for (auto& [k, v] : a) keys.insert(k);
  for (auto& [k, v] : b) keys.insert(k);
  std::vector<SoftwareChange> out;
  for (auto& k : keys) {
    auto ia = a.find(k), ib = b.find(k);
    std::string va = ia == a.end() ? "(absent)" : ia->second, vb = ib == b.end() ? "(absent)" : ib->second;
    if (va != vb) out.push_back({k.empty() ? "software" : k, va, vb});
  }
  // The tool first: what a reader looks at before the libraries.
  std::stable_sort(out.begin(), out.end(), [](auto& x, auto& y) {
    auto rank = [](const std::string& p) { return p == "tool_version" ? 0 : p == "tool_commit" ? 1 : 2; };
    return rank(x.path) < rank(y.path);
  });
  return out;
}

std::vector<CellTimeline> cell_timelines(const std::vector<CellRecord>& cells) {
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index;
  // Cells whose target is permitted to vary and did (EXPECTED with several outputs): a run of such a cell
  // that happened to see one output is a sample of the same behaviour, not a change of it. A cell that
  // varied against its promise (FAIL) keeps every flip.
  std::set<std::tuple<std::string, std::string, std::string>> may_vary;
  for (auto& c : cells) {
    Verdict v;
    if (c.status == "ok" && c.distinct > 1 && parse_verdict(c.verdict, &v) && v == Verdict::kExpected)
      may_vary.insert(std::make_tuple(c.workload, c.target, c.machine_key));
  }
  std::vector<CellTimeline> out;
  for (auto& c : cells) {
    auto key = std::make_tuple(c.workload, c.target, c.machine_key);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, out.size()).first;
      out.push_back({c.workload, c.target, c.machine_key, {}});
    }
    CellTimeline& t = out[it->second];
    std::string state = state_of(c);
    if (may_vary.count(key) && state.rfind("fp ", 0) == 0) state = "nondeterministic";
    if (t.segments.empty() || t.segments.back().state != state) {
      HistorySegment s;
      s.state = state;
      s.first_at = c.started_at;
      s.first = c;
      if (!t.segments.empty()) s.changes = software_diff(t.segments.back().last.software, c.software);
      t.segments.push_back(std::move(s));
    }
    HistorySegment& s = t.segments.back();
    s.last_at = c.started_at;
    s.last = c;
    ++s.observations;
    s.max_distinct = std::max(s.max_distinct, c.distinct);
    for (auto& fp : c.fingerprints) add_sorted_unique(&s.fingerprints, fp);
    add_sorted_unique(&s.hostnames, c.hostname);
    add_sorted_unique(&s.verdicts, c.verdict);
  }
  // By cell, then by when each machine first saw it.
  std::stable_sort(out.begin(), out.end(), [](const CellTimeline& a, const CellTimeline& b) {
    return std::tie(a.workload, a.target, a.segments.front().first_at) <
           std::tie(b.workload, b.target, b.segments.front().first_at);
  });
  return out;
}

Status parse_since(const std::string& text, std::string* utc_iso) {
  auto bad = [&](const std::string& why) {
    return Status::invalid(fmt::format(
        "--since '{}': {} (expected YYYY-MM-DD or an ISO 8601 time such as 2026-12-01T09:30:00Z)", text, why));
  };
  size_t i = 0;
  auto digits = [&](size_t n, int* v) {
    if (i + n > text.size()) return false;
    int x = 0;
    for (size_t k = 0; k < n; ++k) {
      char ch = text[i + k];
      if (ch < '0' || ch > '9') return false;
      x = x * 10 + (ch - '0');
    }
    i += n;
    *v = x;
    return true;
  };
  auto lit = [&](char ch) {
    if (i < text.size() && text[i] == ch) return ++i, true;
    return false;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, off_h = 0, off_m = 0, sign = 0;
  if (!digits(4, &year) || !lit('-') || !digits(2, &month) || !lit('-') || !digits(2, &day)) return bad("not a date");
  if (i < text.size()) {
    if (!lit('T') && !lit('t') && !lit(' ')) return bad("unexpected text after the date");
    if (!digits(2, &hour) || !lit(':') || !digits(2, &minute)) return bad("not a time of day (HH:MM)");
    if (lit(':')) {
      if (!digits(2, &second)) return bad("not seconds");
      if (lit('.') || lit(',')) {
        size_t start = i;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
        if (i == start) return bad("no digits after the decimal point");
      }
    }
    if (lit('Z') || lit('z')) {
    } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
      sign = text[i] == '+' ? 1 : -1;
      ++i;
      if (!digits(2, &off_h)) return bad("not a UTC offset (+HH:MM)");
      lit(':');
      if (!digits(2, &off_m)) return bad("not a UTC offset (+HH:MM)");
      if (off_h > 23 || off_m > 59) return bad("UTC offset out of range");
    }
    if (i != text.size()) return bad("unexpected text after the time");
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return bad("out of range");
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = std::min(second, 59);
  std::time_t t = timegm(&tm);
  if (tm.tm_mday != day || tm.tm_mon != month - 1) return bad("no such day");
  t -= sign * (off_h * 3600 + off_m * 60);
  std::tm u{};
  gmtime_r(&t, &u);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &u);
  *utc_iso = buf;
  return Status::ok();
}

}  // namespace detaudit
