// The run history: every probe, train, check, qualify, fleet node and healthcheck appends one record to an SQLite
// database, and `detaudit history` reads it back as each cell's fingerprints over time.
//
// Where it is (resolve_history_path): `--history FILE` > $DETAUDIT_HISTORY > $XDG_DATA_HOME/detaudit/
// history.db (an absolute XDG_DATA_HOME only, as the XDG spec says) > $HOME/.local/share/detaudit/
// history.db (HOME unset: the user's home in the password database, as for a daemon's child such as Slurm's health
// check); `--no-history` records nothing. record_run creates the parent folder.
//
// The database:
// - WAL journal, a busy timeout of 10 s, every write in one BEGIN IMMEDIATE transaction: any number of
//   concurrent writers (processes or threads, each with its own connection) lose nothing.
// - PRAGMA application_id 0x64746175 ("dtau") marks the file as a detaudit history; PRAGMA
//   user_version is its schema version. Migrations are a list of steps: opening a database of version v
//   applies steps v+1..kHistorySchemaVersion in one transaction (an empty file is version 0).
// - A file that is not a detaudit history of a version this tool knows is an error of one line naming
//   the file: not an SQLite file ("file is not a database"), a truncated or otherwise damaged one
//   (PRAGMA quick_check), another program's database, a schema version newer than this tool's ("made by
//   a newer detaudit"), tables that do not match their version. Such a file is never written to,
//   recreated or replaced: the user moves it away or points --history elsewhere.
//
// Schema (version 7):
//   machines  key TEXT PRIMARY KEY        machine_key() of the hardware, 16 hex digits
//             cpu_model, cpu_features     (space-separated), cores, gpus (JSON array of {name,
//             compute_capability, sm_count}), identity (the canonical JSON the key hashes),
//             first_seen, last_seen (ISO 8601 UTC, from the runs recorded)
//   runs      id INTEGER PRIMARY KEY, kind (probe|train|check|qualify|fleet|healthcheck), started_at, finished_at ('' when
//             the run did not finish), recorded_at, command, results_dir (absolute), tool_version,
//             tool_commit, machine_key -> machines, hostname, machine (results.json's machine object,
//             JSON), software (JSON: tool_version, tool_commit, os, compiler, hwloc, libraries{...}),
//             exit_code, the outcome summary: cells, pass, fail, expected, warn, skip, unjudged
//             (verdict counts) and training_runs, and plan (JSON: {"targets": [...], "workloads": [...]},
//             sorted: what the run set out to run, its results' plan with every target and workload its
//             cells and training runs name; each row of the run is one of it)
//   cells     (run_id -> runs, workload, target) PRIMARY KEY, status, reason, verdict ('' unjudged),
//             verdict_reason, repeats, distinct_outputs, fingerprints (the distinct output fingerprints,
//             sorted, space-separated), err_ratio (NULL: no oracle bound), median_seconds (NULL: no
//             timed repeat)
//   training  (run_id -> runs, key) PRIMARY KEY, model, design, condition, target, seed, replicate,
//             status, final_loss (NULL: none or NaN), weights_fingerprint ('' when none), verdict (PASS,
//             WARN for a diverged run, FAIL, SKIP: judge_training_runs, contract/training_run.hpp)
//   Version 1 had machines, runs and cells; version 2 added training and the indexes cells(workload,
//   target) and runs(machine_key, started_at); version 3 lets a run's kind be fleet (each node of a fleet
//   records its probe results); version 4 adds runs.plan (a run recorded before it gets the targets and
//   workloads its own rows name); version 5 adds training.verdict (a finished run that broke its deterministic
//   variant's promise FAILs; a row recorded before gets the verdict its status gives); version 6 adds
//   cells.rows_fingerprint (a batch-invariance cell's rows computed alone); version 7 lets a run's kind be
//   healthcheck (one row per cell it ran on any CPU or GPU: every run's distinct bits, judged against its reference;
//   no results folder, no timings: its cells run with every CPU busy).
//
// The machine key (machine_key()) is a hash of what decides the bits a kernel computes, and nothing
// else: the CPU model, its ISA features (sorted) and core count; each GPU's name, compute capability
// and SM count (the GPUs sorted). The hostname is NOT in the key: two identical nodes of a cluster share
// a key, so their fingerprints are compared with each other, and a renamed host keeps its history. The
// hostname is stored with each run, and shown beside the key. Drivers and library versions are not in
// the key either: they are the software, stored per run, and what `history` names where bits changed.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/machine_key.hpp"  // machine_key, machine_identity, software_of
#include "contract/results.hpp"

namespace detaudit {

inline constexpr int kHistorySchemaVersion = 7;
inline constexpr int kHistoryApplicationId = 0x64746175;  // "dtau"

// --history FILE and --no-history (cli/history_flags.hpp adds them to a subcommand).
struct HistoryFlags {
  std::string file;       // --history FILE ("" when not given)
  bool disabled = false;  // --no-history
};

// The database to use. True with *path == "" when the history is disabled (--no-history): record
// nothing. A failure of one line when there is nowhere to put it (no --history, DETAUDIT_HISTORY,
// XDG_DATA_HOME or HOME), or the flags contradict each other. Creates nothing.
Status resolve_history_path(const HistoryFlags& flags, std::string* path);

// Appends one run (of its kind: the subcommand that made it) with its machine, software, cells and training
// runs, in one transaction; creates the database and its parent folder when missing, migrates an older
// schema. results_dir is stored as an absolute path; exit_code is the command's exit code. A failure
// of one line naming the file ("history /x/history.db: ..."): the file is left as it was.
Status record_run(const std::string& db_path, RunKind kind, const Results& r, const std::string& results_dir,
                  int exit_code);

// Whether db_path can be recorded into later: a missing file is fine (it will be created); an existing
// one must be a detaudit history this tool can read (the same checks as record_run, nothing written
// except a migration of an older schema). The commands call it before their work, so a corrupt history
// stops them at once instead of after an hour of probing. A failure of one line naming the file. every_row false:
// the rows are left to recording (a healthcheck of seconds that records once a period reads no more than it needs).
Status check_history(const std::string& db_path, bool every_row = true);


// Median, over this machine's earlier runs, of a cell's median seconds per repeat (cells with status
// ok only; the most recent 50 observations; one observation counted once even when probe and check
// both recorded it). *n: how many went in (0: no history; *median is then 0). A missing database is
// no history (ok, *n = 0). Call it before recording the current run, or that run counts too; a run resumed in its
// folder was recorded before, as far as it got: its rows (results_dir `own_dir` started at `own_started_at`) are
// left out, so its kept cells are never their own references.
Status median_seconds_history(const std::string& db_path, const std::string& workload, const std::string& target,
                              const std::string& machine_key, double* median, int* n, const std::string& own_dir = "",
                              const std::string& own_started_at = "");

// The last healthcheck a host recorded (a healthcheck run every few minutes records a check that gives the same
// answer as the last one at most once a period, so that the history stays small enough to check in a second).
struct LastHealthcheck {
  bool found = false;
  std::string recorded_at, command, tool_commit, machine_key;
  int exit_code = 0;
  std::set<std::string> failed;  // its FAIL cells, each as health_failure gives it
};
// A healthcheck's FAIL cell as one answer: "workload|target|the CPUs and GPUs its reason names" (its reason up to the
// first ": ", and what follows "; also found on "), so that another CPU failing is another answer, and other bits on
// the same CPU (a mercurial core gives other bits each time) the same one.
// The places a healthcheck FAIL's reason names: its first (up to the first ": ") and what follows "; also found on ".
inline std::string health_places(const std::string& reason) {
  const size_t also = reason.rfind("; also found on ");
  return reason.substr(0, reason.find(": ")) + (also == std::string::npos ? "" : reason.substr(also));
}
inline std::string health_failure(const std::string& workload, const std::string& target, const std::string& reason) {
  return workload + "|" + target + "|" + health_places(reason);
}
// Reads it (kind healthcheck, that host, the highest run id). A missing database: found false. The file is checked as
// every open checks it (a detaudit history of a version this tool knows, not damaged), not row by row (recording
// does that). A failure of one line naming the file.
Status last_healthcheck(const std::string& db_path, const std::string& hostname, LastHealthcheck* out);

// ---- reading the history (`detaudit history`) -------------------------------------------------------

// A filter of names: matches exactly when some recorded name equals it, else as a substring.
struct HistoryFilter {
  std::string target, workload;
  // A machine key (exact, else a prefix): every host of that hardware; a hostname (exact, else a part of
  // one): that host's runs only.
  std::string machine;
  std::string since;                       // ISO 8601 UTC "YYYY-MM-DDTHH:MM:SSZ" (parse_since), or ""
};

struct MachineRecord {
  std::string key, cpu_model, cpu_features;
  int cores = 0;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::string> hostnames;  // sorted
  std::string first_seen, last_seen;
  int runs = 0;
};

// One cell as one run recorded it.
struct CellRecord {
  int64_t run_id = 0;
  std::string kind, started_at, results_dir, hostname, machine_key, tool_version, tool_commit;
  nlohmann::json software;
  std::string workload, target, status, reason, verdict, verdict_reason;
  int repeats = 0, distinct = 0;
  std::vector<std::string> fingerprints;  // distinct, sorted
  // A training cell (query_history): workload "train <model>/<design> (<condition>)", repeats its runs,
  // fingerprints the one fingerprint of its runs' final weights (nondeterminism off), or none and
  // distinct = its runs (nondeterminism on: they vary by design, verdict EXPECTED).
  bool training = false;
  std::optional<double> err_ratio, median_seconds;
  std::string rows_fingerprint;  // a batch-invariance cell's rows computed alone ("" for any other cell)
};

struct HistoryQueryResult {
  bool exists = false;  // false: no database at the path yet (empty history)
  int runs = 0;         // runs in the database (all of them)
  std::vector<MachineRecord> machines;  // those the cells below ran on
  std::vector<CellRecord> cells;        // matching, by started_at then run id; duplicates removed (below)
  // How each non-empty filter matched: "exact", "substring", "canonical" (a spec whose text names no cell, matching
  // the cells of its canonical form: another spelling of them) or "none" (nothing matched).
  std::string target_match, workload_match, machine_match;
};

// Reads the cells matching f. An observation recorded twice (the probe that made it, then a check or
// a resumed run of the same results directory) counts once: same results_dir and started_at. A
// missing database is an empty history (ok, exists = false). A failure of one line for a file
// that is not a readable detaudit history.
Status query_history(const std::string& db_path, const HistoryFilter& f, HistoryQueryResult* out);

// A change between two software objects: path ("libraries.openblas", "tool_commit"), before, after
// ("(absent)" where a side lacks the key).
struct SoftwareChange {
  std::string path, before, after;
};
std::vector<SoftwareChange> software_diff(const nlohmann::json& before, const nlohmann::json& after);

// A stretch of consecutive observations of one cell on one machine with the same outcome.
struct HistorySegment {
  std::string state;  // "fp <32 hex>", "nondeterministic", or the status ("crashed", "skipped", ...)
  std::vector<std::string> fingerprints;  // the fingerprint(s) seen; for nondeterministic all seen
  int max_distinct = 0;
  std::string first_at, last_at;  // started_at of its first and last observation
  int observations = 0;
  std::vector<std::string> hostnames;  // sorted
  std::vector<std::string> verdicts;   // distinct non-empty verdicts seen, sorted
  CellRecord first, last;              // the first and last observation
  std::vector<SoftwareChange> changes;  // software of the previous segment's last vs this one's first
};

struct CellTimeline {
  std::string workload, target, machine_key;
  std::vector<HistorySegment> segments;
  bool changed() const { return segments.size() > 1; }
};

// The segments of each (workload, target, machine) of the cells (as query_history orders them), sorted
// by workload, target, then the machine's first observation.
std::vector<CellTimeline> cell_timelines(const std::vector<CellRecord>& cells);

// "2026-12-01", "2026-12-01T09:30", "2026-12-01 09:30:15", with "Z" or an offset ("+02:00", "-0500")
// or none (UTC), and optional fractional seconds -> "2026-12-01T07:30:15Z". Invalid otherwise.
Status parse_since(const std::string& text, std::string* utc_iso);

}  // namespace detaudit
