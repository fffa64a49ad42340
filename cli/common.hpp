// What every subcommand of the detaudit executable shares: output that never stops an audit, the
// one-line error with exit 2, and the registration of a subcommand (one file per command: cli/cmd_*.cpp).
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kernels/status.hpp"

namespace detaudit::cli {

// Output never stops an audit: a closed stdout or stderr (`| head -1`) loses the text, not the run. A write
// to stdout that fails (closed, a full device, a file-size limit) is remembered: main() then does not exit
// 0 where the answer was stdout itself (stdout_lost).
void put(FILE* f, const std::string& s);
// The errno of the first write to stdout that failed (or EBADF for the first text written to a stdout that was
// closed before the start: mark_stdout_closed); 0 when everything written reached it.
int stdout_lost();
void mark_stdout_lost(int err);
// stdout was closed before the start (descriptor 1 now /dev/null): a command that writes nothing to it (--quiet)
// lost nothing; the first text written to it is lost.
void mark_stdout_closed();
bool stdout_was_closed();
template <typename... Args>
void say(FILE* f, fmt::format_string<Args...> format, Args&&... args) {
  put(f, fmt::format(format, std::forward<Args>(args)...));
}
// "detaudit: error: <msg>" on stderr; returns 2 ("could not run").
int fail(const std::string& msg);
// The same for a failed Status (its message); a Status is turned into an exit code here, in the CLI, and
// nowhere in the library.
int fail(const Status& st);

// Invalid when `out` (its links followed) is a fleet rank's folder or a folder in one (beside the rank's
// node.json): the rank's results are what its node.json and qualify.json speak of, and only `detaudit fleet`
// writes them. For every command that writes into an --out of the user's (probe, train, qualify, import, export,
// analyze, diverge, baseline save, fleet), and for the folder of a history database.
// `option` names the path in the message (--out, --trace-out, --history).
Status out_outside_fleet_ranks(const std::string& out, const char* option = "--out");
// The same for a file the command writes (a baseline, a history database, a trace prefix): its folder.
Status file_outside_fleet_ranks(const std::string& file, const char* option);
// fail(st), except for an interrupted command (Ctrl-C, SIGTERM, SIGHUP): one line saying so and that
// running the same command again redoes the rest, and 128 + the signal's number.
int fail_or_interrupted(const Status& st);
// The command line again, shell-quoted, with `--out DIR` in place of any --out/--fresh/--resume: what
// resumes an interrupted run.
std::string resume_command(int argc, char** argv, const std::string& out_dir);
std::string resume_command(const std::vector<std::string>& args, const std::string& out_dir);

// The command line as one string, for the reports and the history.
std::string command_line(int argc, char** argv);
// An interrupted probe or train: "interrupted: D of T <what> done; resume with: <resume>" on stderr, and
// 128 + the signal's number.
int interrupted_exit(const std::string& what, size_t done, size_t total, const std::string& resume);
// This executable's path (what the workers are started from): /proc/self/exe, else argv0.
std::string self_exe(const char* argv0);
// The default results directory of a run: results/<prefix>-<local time, YYYYmmdd-HHMMSS>, so that the
// names under results/ sort by time.
std::string default_out(const std::string& prefix);

struct OutputFlags;  // cli/output.hpp

// A subcommand: registered on the app before parsing; `run` is called when it was the one parsed and
// returns the exit code (0 ok, 1 a check failed, 2 could not run).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
  const OutputFlags* output = nullptr;  // its --format/--json/--quiet (cli/output.hpp)
  bool judging = false;                 // it ends with the verdict line
  // Its product is the files it writes (probe, train, report, ...): a stdout that lost its text does not
  // change its exit code unless its answer was markdown or JSON on stdout. Else (env, check, compare,
  // history, qualify) its answer is what it prints.
  bool writes_files = false;
};

// Each cli/cmd_<name>.cpp registers its subcommand with a file-scope
//   static const CommandRegistration reg(ORDER, add_<name>_command);
// main.cpp adds them in ORDER (their place in --help): env 1, probe 2, train 3, report 4, analyze 5, ...
// The factory receives argc/argv for recording the command line.
using CommandFactory = Command (*)(CLI::App& app, int argc, char** argv);
struct CommandRegistration {
  CommandRegistration(int order, CommandFactory factory);
};
std::vector<std::pair<int, CommandFactory>> registered_commands();  // sorted by order

// The candidate nearest to `word` when it is near enough to be a slip of the keyboard (an edit distance of
// at most a third of its length, at least 1, or a prefix of the candidate): "prob" -> "probe", "--target"
// -> "--targets"; "" when none is.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// A command line CLI11 refused, said helpfully in one line: an unknown subcommand or option with the
// nearest known one ("unknown subcommand 'prob' (did you mean 'probe'?)"), else CLI11's own message.
std::string parse_error_line(CLI::App& app, int argc, char** argv, const std::string& cli11_message);

// Every integer option of `app` and its subcommands takes plain decimal digits ("12", "-1"), as a recorded command
// is read back: CLI11 alone would take "+2", " 2", "0x10" or "010" (octal), which the results' reader reads
// otherwise, or not at all.
void require_plain_integers(CLI::App& app);

// Rejects empty and all-comma values.
extern const CLI::Validator kNonEmpty;
// A number, not NaN or an infinity (CLI::Range lets NaN through: every comparison with it is false).
extern const CLI::Validator kFinite;
// Digits only: CLI11 reads "-1" into an unsigned option as 18446744073709551615.
extern const CLI::Validator kUnsignedText;

}  // namespace detaudit::cli
