// The commands the tests run (probe, train, qualify through the built binary) record into a history
// of the build tree, never the user's own ~/.local/share/detaudit/history.db: DETAUDIT_HISTORY is set
// for the whole test process (and so for its children) unless the caller set it. ctest sets the same
// value (tests/CMakeLists.txt); this covers running build/tests/detaudit_tests directly.
#include <cstdlib>

namespace {
const bool kHistoryEnvironment = [] {
  setenv("DETAUDIT_HISTORY", DETAUDIT_TEST_HISTORY, /*overwrite=*/0);
  return true;
}();
}  // namespace
