// results.json: the contract other tools rely on (README "Results contract"). Written atomically (temp file, then
// rename) after every observation, so an interrupted run loses no finished work and can resume.
#pragma once
#include <map>
#include <optional>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/atomic_file.hpp"
#include "contract/observation.hpp"
#include "contract/training_run.hpp"

namespace detaudit {

inline constexpr const char* kResultsSchema = "detaudit/1";

// A results directory's results file: DIR/results.json (one place that names it).
inline std::string results_file(const std::string& dir) { return dir + "/results.json"; }

// The CPU features a machine's description lists (probes/env.cpp), in the order it lists them; a feature
// of another name sorts after these, by name.
inline constexpr const char* kCpuFeatureOrder[] = {"sse2",   "sse3",     "ssse3",      "sse4.1",    "sse4.2",
                                                   "sse4a",  "fma4",     "xop",        "avx",       "avx2",
                                                   "fma",    "avx512f",  "avx512bw",   "avx512vnni", "avx512bf16"};

// A training run's machine_id: the first 16 hex digits of the hash of the machine description (as results.json
// holds it) of the session that ran it.
std::string machine_id_of(const nlohmann::json& machine);

// What produced a run, as the history records it: one name per subcommand that records.
enum class RunKind { kProbe, kTrain, kCheck, kQualify, kFleet, kHealthcheck };
inline constexpr RunKind kRunKinds[] = {RunKind::kProbe, RunKind::kTrain, RunKind::kCheck, RunKind::kQualify,
                                        RunKind::kFleet, RunKind::kHealthcheck};
constexpr const char* run_kind_name(RunKind k) {
  switch (k) {
    case RunKind::kProbe: return "probe";
    case RunKind::kTrain: return "train";
    case RunKind::kCheck: return "check";
    case RunKind::kQualify: return "qualify";
    case RunKind::kFleet: return "fleet";
    case RunKind::kHealthcheck: return "healthcheck";
  }
  return "?";
}

// `git describe --always --dirty` of the tree this binary was built from (contract/version.cpp, the one
// file that includes the generated header, so a new commit recompiles one file).
const char* git_commit();

struct Results {
  std::string tool_version = DETAUDIT_VERSION;
  std::string tool_commit = git_commit();  // git describe of the source tree built ("unknown" outside git)
  std::string started_at;  // ISO 8601, UTC
  std::string finished_at;  // empty while running
  std::string command;      // the command line that produced it
  nlohmann::json plan = nlohmann::json::object();  // suite name, targets, workloads, repeats, timeout
  nlohmann::json machine;
  std::vector<Observation> observations;
  std::map<std::string, std::string> oracle_failures;  // workload -> why its oracle could not be computed
  std::vector<TrainingRun> training;
  nlohmann::json analysis = nlohmann::json::object();
};

nlohmann::json to_json(const Results& r);
// Strict: every field is checked against the contract (README "Results contract") and the fields the
// analysis and the reports read; a truncated or malformed file, a wrong schema or a field of the wrong
// type is an error of one line naming the file and the field's path ("observations[3].repeats must be
// an integer ..."). Never throws; never touches the file.
Status load_results(const std::string& path, Results* out);
// The same checks on a results document's text (one gathered from another machine); `where` names it.
Status parse_results(const std::string& text, const std::string& where, Results* out);
// A JSON document as every file the tool reads is parsed: strictly, refusing what a lenient parser lets
// through and what would let a file lie: a NUL byte (the parser would stop there and ignore what follows),
// bytes after the document, and a key twice in one object (the last would win, so a first "schema" or
// "observations" could say one thing and the second another). Invalid, one line naming `where`, the byte
// or the key.
Status parse_json_text(const std::string& text, const std::string& where, nlohmann::json* out);
// The common first step of every detaudit JSON file (results, baselines): read the file, parse it
// (parse_json_text), check its "schema". A failed Status with one line naming the file: cannot open, not valid JSON (truncated or
// corrupt), or "not a detaudit <what> (expected "schema": "<schema>")". Never throws.
Status load_json_document(const std::string& path, const std::string& schema, const std::string& what,
                          nlohmann::json* out);
// Writes path atomically (write_file_atomic, contract/atomic_file.hpp).
Status save_results(const std::string& path, const Results& r);

std::string utc_now_iso8601();
// The same form of any time ("2026-12-04T10:00:00Z"); in this form, times order as strings.
std::string utc_iso8601(std::time_t t);
// Seconds since the epoch of a time as results write it (is_utc_iso8601); nullopt for anything else.
std::optional<int64_t> iso8601_seconds(const std::string& t);
// Whether `seconds` of work fit in a run that went from one time to another `run_seconds` later: the times are
// to the second, so each end may be up to a second off (2 s of slack).
inline bool fits_in_run(double seconds, int64_t run_seconds) { return seconds <= double(run_seconds) + 2; }

// The labels of a merged analysis's sources (detaudit analyze), from each source's host name in the order given
// ("machine" where it has none): the host, "host#2" for its second folder, and "label#i" (i from 1) where a label
// would repeat another's.
std::vector<std::string> source_labels(const std::vector<std::string>& hosts);
// The text with every byte first_control_byte finds (line breaks kept) written as \xNN: what a file or a
// database holds reaches a terminal as text, never as an escape sequence.
std::string shown_safely(const std::string& text);
// The first byte of s that a terminal would act on (a C0 control character or DEL; with line_breaks, tab and
// newline pass), or -1 when there is none: strings read from files are refused with it before they are shown.
int first_control_byte(const std::string& s, bool line_breaks = false);
// Whether t has exactly that form (digits where digits go; the calendar is not checked further).
bool is_utc_iso8601(const std::string& t);
// A version as detaudit writes one (1.4.0, 1.4.0-rc1+abc): a digit first, then letters, digits, '.', '-', '+';
// at most 40.
bool is_version_text(const std::string& v);
// Whether version a is older than b by their leading numbers (major, minor, patch; a missing number is 0): "0.0.9"
// is older than "0.1.0"; suffixes are not ordered.
bool version_older(const std::string& a, const std::string& b);

// A results file's "plan": a probe plan (a suite of the tool, its targets and workloads, repeats, a time limit)
// or a training design (kind train), each field of its type and every field known. One line naming plan.<field>.
Status check_results_plan(const nlohmann::json& plan);

// A training run of a design (plan.design `d`): `condition` one of the design's, `seed` and `replicate` ones
// it runs (random initial weights: seeds base .. base + seeds - 1, replicates under (a) only; fixed: the base
// seed, replicates 0 .. seeds x replicates - 1 under (c), seeds - 1 under (d), (e)). One line naming
// path.condition, path.seed or path.replicate otherwise.
Status check_design_run(const std::string& condition, uint64_t seed, int64_t replicate, const nlohmann::json& d,
                        const std::string& path);
// A run's times as a file states them: each empty (not yet) or of that form, not after tomorrow (a day's
// grace for clocks), and the finish not before the start. Invalid, one line naming `where`.
Status check_run_times(const std::string& started_at, const std::string& finished_at, const std::string& where);

// A target spec as a file name (every character but letters, digits, '-' and '.' becomes '_'): the
// workers' logs are DIR/logs/<name>.log (probes) and DIR/logs/train-<name>.log (training).
std::string safe_file_name(const std::string& s);

}  // namespace detaudit
