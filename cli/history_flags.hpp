// The history flags every recording subcommand shares (probe, train, check, qualify) and `history`
// itself, and the one call that records a finished command (gates/history.hpp has the database).
//
// Wiring a subcommand:
//   HistoryFlags hist;                        // next to the subcommand's other arguments
//   add_history_flags(sub, &hist);            // --history FILE, --no-history
//   ...
//   int rc = <the command's exit code>;
//   return record_history(hist, "probe", results, out_dir, rc);
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "gates/history.hpp"

namespace detaudit::cli {

// Adds --history FILE and --no-history to sub (they exclude each other).
void add_history_flags(CLI::App* sub, HistoryFlags* f);

// Records a finished command in the history (kind: probe, train, check or qualify) and returns the
// exit code the command should end with:
// - the history is disabled (--no-history): nothing recorded, exit_code returned;
// - recorded: exit_code returned;
// - it could not be recorded (no place for it, a corrupt or newer database, a full disk): one line
//   "detaudit: error: history PATH: ..." on stderr, and 2 ("could not run") in place of 0 or 1 (the
//   results and reports are written already; the history is what is missing). Other codes (an
//   interruption's 128+N) are returned as they are.
// Before a command's work: 0 when the history is disabled, missing (it will be created) or a readable
// detaudit history; otherwise one line "detaudit: error: history PATH: ..." on stderr and 2.
int precheck_history(const HistoryFlags& f);

int record_history(const HistoryFlags& f, const std::string& kind, const Results& r, const std::string& results_dir,
                   int exit_code);

}  // namespace detaudit::cli
