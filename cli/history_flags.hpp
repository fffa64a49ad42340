// The history flags every recording subcommand shares (probe, train, check, qualify) and `history`
// itself, and the one call that records a finished command (store/history.hpp has the database).
//
// Wiring a subcommand:
//   HistoryFlags hist;                        // next to the subcommand's other arguments
//   add_history_flags(sub, &hist);            // --history FILE, --no-history
//   ...
//   Outcome o = <the command's outcome>;
//   record_history(hist, RunKind::kProbe, results, out_dir, &o);
//   return emit(o);
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "cli/output.hpp"
#include "store/history.hpp"

namespace detaudit::cli {

// Adds --history FILE and --no-history to sub (they exclude each other).
void add_history_flags(CLI::App* sub, HistoryFlags* f);

// Records a finished command in the history (kind: probe, train, check or qualify) with its outcome's
// exit code:
// - the history is disabled (--no-history): nothing recorded;
// - recorded: the outcome is left as it is;
// - it could not be recorded (no place for it, a corrupt or newer database, a full disk): the outcome
//   becomes 2 ("could not run") in place of 0 or 1, with the history's one line as its error (the
//   results and reports are written already; the history is what is missing). Other codes (an
//   interruption's 128+N) stay, and the line goes to stderr.
// Before a command's work: 0 when the history is disabled, missing (it will be created) or a readable
// detaudit history; otherwise one line "detaudit: error: history PATH: ..." on stderr and 2.
int precheck_history(const HistoryFlags& f);

void record_history(const HistoryFlags& f, RunKind kind, const Results& r, const std::string& results_dir,
                    Outcome* o);

}  // namespace detaudit::cli
