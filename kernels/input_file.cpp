#include "kernels/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace detaudit {

const char* file_type_name(unsigned mode) {
  const mode_t m = mode_t(mode);
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISREG(m)) return "a regular file";
  return "not a regular file";
}

Status open_regular_input(const std::string& path, const std::string& what, int* fd) {
  const int f = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f < 0) return Status::invalid(fmt::format("{}: cannot open the {}: {}", path, what, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    ::close(f);
    if (!S_ISREG(st.st_mode) && st.st_mode)
      return Status::invalid(fmt::format("{}: is {}, not a {} (a regular file)", path, file_type_name(st.st_mode), what));
    return Status::invalid(fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(e)));
  }
  const int flags = ::fcntl(f, F_GETFL);
  if (flags >= 0) ::fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
  *fd = f;
  return Status::ok();
}

namespace {

// Bytes of memory the kernel says are available now (/proc/meminfo MemAvailable); 0 when unknown.
uint64_t memory_available() {
  const int fd = ::open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* at = std::strstr(buf, "MemAvailable:");
  if (!at) return 0;
  return uint64_t(std::strtoull(at + 13, nullptr, 10)) * 1024;
}

}  // namespace

Status read_regular_file(const std::string& path, const std::string& what, std::string* out) {
  int fd = -1;
  DETAUDIT_RETURN_IF_ERROR(open_regular_input(path, what, &fd));
  // Its size is checked before anything is allocated: a document is held several times over once parsed,
  // so one of more than an eighth of the memory available cannot be read (a sparse 6 GiB file ended in
  // std::bad_alloc).
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    const uint64_t size = uint64_t(st.st_size), avail = memory_available();
    if (avail > 0 && size > avail / 8) {
      ::close(fd);
      return Status::invalid(fmt::format("{}: {} bytes, more than a {} can be here (an eighth of the {} bytes of "
                                         "memory available)",
                                         path, size, what, avail));
    }
  }
  out->clear();
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return Status::invalid(fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(e)));
    }
    if (n == 0) break;
    out->append(buf, size_t(n));
  }
  ::close(fd);
  return Status::ok();
}

}  // namespace detaudit
