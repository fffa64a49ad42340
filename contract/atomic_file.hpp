// Files that are written whole or not at all: results, baselines, caches and reports.
#pragma once
#include <string>

#include "kernels/status.hpp"

namespace detaudit {

// Writes path atomically: a temporary file of its own (path.tmp.<pid>.<n>, created exclusively),
// fsync, rename. On any failure the temporary file is removed and path is left as it was.
Status write_file_atomic(const std::string& path, const std::string& content);
// Writes all of s to fd (EINTR and short writes handled); false on an error (errno says which).
bool write_all(int fd, const std::string& s);

}  // namespace detaudit
