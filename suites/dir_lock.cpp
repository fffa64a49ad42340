#include "suites/dir_lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace detaudit {

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

Status DirLock::acquire(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status::error(fmt::format("cannot create {}: {}", dir, ec.message()));
  }
  std::string path = dir + "/.lock";
  // Never through a link (the pid would be written into its target), never anything but a regular file.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ELOOP)
    return Status::invalid(
        fmt::format("{}: is a symbolic link; detaudit does not write through links (remove it)", path));
  if (fd < 0) {
    return Status::error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  if (struct stat st{}; ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid(fmt::format("{}: is not a regular file; detaudit keeps its lock there (remove it)", path));
  } else if (st.st_nlink != 1) {
    // A hard link: the pid would be written into a file another name shares.
    ::close(fd);
    return Status::invalid(fmt::format("{}: has {} names (a hard link); detaudit does not write into a file another "
                                       "name shares (remove it)",
                                       path, st.st_nlink));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    long pid = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
    if (e == EWOULDBLOCK)
      return Status::unavailable(pid > 0 ? fmt::format("{} is in use by pid {}", dir, pid)
                                         : fmt::format("{} is in use by another detaudit", dir));
    else
      return Status::error(fmt::format("cannot lock {}: {}", path, std::strerror(e)));
  }
  std::string me = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != ssize_t(me.size())) {
    // The lock holds anyway; only the pid shown to a second process is missing.
  }
  fd_ = fd;
  return Status::ok();
}

}  // namespace detaudit
