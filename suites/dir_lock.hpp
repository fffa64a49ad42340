// One detaudit process per results directory: an exclusive flock on DIR/.lock, held for the life of
// the run (the descriptor is close-on-exec, so workers never hold it). A second process on the same
// directory is refused with the first one's pid instead of racing it on results.json.
#pragma once
#include <string>

#include "kernels/status.hpp"

namespace detaudit {

class DirLock {
 public:
  DirLock() = default;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();
  // Creates dir when missing. A failure of one line otherwise ("DIR is in use by pid N", or why
  // the lock failed).
  Status acquire(const std::string& dir);

 private:
  int fd_ = -1;
};

}  // namespace detaudit
