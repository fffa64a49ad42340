// One output contract for every subcommand: `--format text|md|json` (with `--json` as an alias of
// `--format json`) and `--quiet`. A command builds an Outcome (its exit code, verdict counts, report
// paths, its own fields, its text and markdown) and emit() prints it in the chosen format:
//   text, md  the command's text (or markdown); a judging command then ends with one line,
//               verdict: PASS|FAIL|ERROR  fail=N warn=N skip=N  report=PATH
//             (FAIL adds "  first: <the first failure>", ERROR "  error: <why>"); with --quiet that line
//             alone. The verdict word is coloured only on a terminal (and never with NO_COLOR set).
//   json      one object on stdout, the same names everywhere:
//               {"schema": "detaudit-cli/1", "command", "exit_code", "verdict" (judging commands),
//                "counts": {"pass", "fail", "expected", "warn", "skip"} (judging commands),
//                "reports": {"md", "html"} (where the command wrote them), "error" (exit 2), ...its fields}
// A command that could not run (fail(), cli/common.hpp) says so in the same format: the one line on
// stderr, and on stdout the JSON object or, for a judging command, the verdict line with ERROR.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "contract/verdict.hpp"

namespace detaudit::cli {

inline constexpr const char* kCliSchema = "detaudit-cli/1";

enum class Format { kText, kMarkdown, kJson };

struct OutputFlags {
  std::string format = "text";
  bool json = false;  // --json
  bool quiet = false;
  Format resolved() const;
};

// Adds --format, --json and --quiet to `sub`. `judging`: the command judges (probe, train, check,
// compare, qualify, diverge, import), so its output ends with the verdict line.
void add_output_flags(CLI::App* sub, OutputFlags* flags, bool judging);

// Called for the subcommand that was parsed, before it runs: fail() and emit() print in its format.
// `writes_files`: its product is the files it writes (Command::writes_files, cli/common.hpp).
void set_active_command(const std::string& name, const OutputFlags* flags, bool judging, bool writes_files);
// The parsed command's flags (text, not quiet, when none was set).
Format active_format();
bool active_quiet();
// The parsed command's name ("" before one is active: --help, --version, a parse error).
const std::string& active_command();
bool active_writes_files();

struct Outcome {
  int exit_code = 0;
  VerdictTally counts;
  std::string report_md, report_html;              // paths of the reports written ("" none)
  std::string first_fail;                          // one line naming the first failure (FAIL)
  std::string error;                               // why it could not judge (exit 2)
  nlohmann::json data = nlohmann::json::object();  // the command's own fields in JSON
  std::string text;                                // the text the command prints
  std::string markdown;                            // its markdown ("" : the text)
};

// A markdown summary for a pull request: a title, the verdict counts, a lead line, a table of what FAILed
// (`fails`, one row per FAIL under `header`), and the path of the full report.
std::string markdown_summary(const std::string& title, const VerdictTally& t, const std::string& lead,
                             const std::vector<std::vector<std::string>>& fails, const std::vector<std::string>& header,
                             const std::string& report);

// "ERROR" for an exit code other than 0 and 1, else "FAIL" when the exit code is 1 or something FAILed
// (probe --no-fail exits 0 with a FAIL: the line still says FAIL), else "PASS".
const char* verdict_word(const Outcome& o);
// The verdict line, without a newline and without colour.
std::string verdict_line(const Outcome& o);
// Prints `o` in the active format and returns its exit code; an exit code other than 0 and 1 also puts
// "detaudit: error: <error>" on stderr.
int emit(const Outcome& o);
// The JSON object emit() prints.
nlohmann::json outcome_json(const Outcome& o);
// Progress lines of a long command ("[detaudit] ..." on stderr), or nothing with --quiet.
std::function<void(const std::string&)> progress_sink();
// What fail() prints on stdout for the active command (nothing when no command is active yet).
void emit_failure(const std::string& msg);

}  // namespace detaudit::cli
