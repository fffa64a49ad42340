#include "detaudit_git.hpp"
#include "contract/results.hpp"

namespace detaudit {

const char* git_commit() { return DETAUDIT_GIT_COMMIT; }

}  // namespace detaudit
