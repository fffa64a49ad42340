// gates/: verdicts against promises, baselines, check, compare, qualify, and the SQLite history.
// (This translation unit keeps the library non-empty until the first gate lands.)
namespace detaudit {
const char* gates_library_name() { return "detaudit_gates"; }
}  // namespace detaudit
