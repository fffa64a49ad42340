#include "cli/history_flags.hpp"

#include "cli/common.hpp"

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
  std::string path, err;
  if (!resolve_history_path(f, &path, &err)) return fail(err);
  if (path.empty()) return 0;
  if (!check_history(path, &err)) return fail(err);
  return 0;
}

int record_history(const HistoryFlags& f, const std::string& kind, const Results& r, const std::string& results_dir,
                   int exit_code) {
  std::string path, err;
  bool ok = resolve_history_path(f, &path, &err);
  if (ok && path.empty()) return exit_code;  // --no-history
  if (ok) ok = record_run(path, kind, r, results_dir, exit_code, &err);
  if (ok) return exit_code;
  fail(err);
  return exit_code == 0 || exit_code == 1 ? 2 : exit_code;
}

}  // namespace detaudit::cli
