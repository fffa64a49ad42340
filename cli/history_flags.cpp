#include "cli/history_flags.hpp"

#include "cli/common.hpp"
#include "probes/child.hpp"

namespace detaudit::cli {

void add_history_flags(CLI::App* sub, HistoryFlags* f) {
  auto* file = sub->add_option("--history", f->file,
                               "History database (default: $DETAUDIT_HISTORY, else "
                               "$XDG_DATA_HOME/detaudit/history.db, else ~/.local/share/detaudit/history.db)")
                   ->type_name("FILE")
                   ->check(kNonEmpty);
  auto* off = sub->add_flag("--no-history", f->disabled, "Record nothing in the history database");
  file->excludes(off);
}

int precheck_history(const HistoryFlags& f) {
  std::string path;
  if (Status st = resolve_history_path(f, &path); !st) return fail(st);
  if (path.empty()) return 0;
  // A rank's folder is the rank's (its results are what its node.json speaks of): no database goes there.
  if (Status st = file_outside_fleet_ranks(path, "--history"); !st) return fail(st);
  if (Status st = check_history(path); !st) return fail(st);
  return 0;
}

void record_history(const HistoryFlags& f, RunKind kind, const Results& r, const std::string& results_dir,
                    Outcome* o) {
  std::string path;
  Status st = resolve_history_path(f, &path);
  if (st && path.empty()) return;  // --no-history
  if (st) st = record_run(path, kind, r, results_dir, o->exit_code);
  if (st) return;
  if (const int sig = interrupted()) {  // Ctrl-C while the history was locked: interrupted, as any command
    o->exit_code = 128 + sig;
    o->error = st.message();
    return;
  }
  if (o->exit_code == 0 || o->exit_code == 1) {
    o->exit_code = 2;
    o->error = st.message();
  } else {
    say(stderr, "detaudit: error: {}\n", st.message());
  }
}

}  // namespace detaudit::cli
