#include "contract/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace detaudit {

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += size_t(w);
  }
  return true;
}

Status write_file_atomic(const std::string& path, const std::string& content) {
  // A name no other writer uses (two processes on one --out, two threads): pid and a counter, and
  // O_EXCL so a leftover of a crashed writer is never written through.
  static std::atomic<unsigned> counter{0};
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::error(tmp + ": cannot create: " + std::strerror(errno));
  }
  // On any failure the temporary file goes and the destination stays as it was.
  auto fail = [&](const char* what, int e) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return Status::error(fmt::format("{}: {}: {}", path, what, std::strerror(e)));
  };
  if (!write_all(fd, content)) return fail("write failed", errno);
  if (::fsync(fd) != 0) return fail("fsync failed", errno);
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail("close failed", errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename failed", errno);
  return Status::ok();
}

}  // namespace detaudit
