#include "contract/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/input_file.hpp"

namespace detaudit {
namespace {

// The top-level "schema" of a JSON file, or "" (not JSON, no schema, unreadable). The whole file is
// parsed: keys are written sorted, so "schema" is not first.
std::string schema_of(const std::string& path) {
  std::string text;
  if (!read_regular_file(path, "file", &text).is_ok()) return "";
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("schema") || !j["schema"].is_string()) return "";
  return j["schema"].get<std::string>();
}

}  // namespace

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

Status make_dir_below(const std::string& base, const std::string& rel) {
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  if (ec) return Status::invalid(fmt::format("{}: cannot create: {}", base, ec.message()));
  std::string at = base;
  size_t from = 0;
  while (from <= rel.size()) {
    const size_t slash = rel.find('/', from);
    const std::string part = rel.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
    from = slash == std::string::npos ? rel.size() + 1 : slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return Status::invalid(fmt::format("{}/{}: a folder below {} may not climb out of it", base, rel, base));
    at += "/" + part;
    if (::mkdir(at.c_str(), 0777) == 0) continue;
    if (errno != EEXIST)
      return Status::invalid(fmt::format("{}: cannot create: {}", at, std::strerror(errno)));
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0)
      return Status::invalid(fmt::format("{}: cannot look at it: {}", at, std::strerror(errno)));
    if (S_ISLNK(st.st_mode))
      return Status::invalid(fmt::format("{}: is a symbolic link; detaudit does not write through links (remove it)", at));
    if (!S_ISDIR(st.st_mode))
      return Status::invalid(fmt::format("{}: is {}, not a folder", at, file_type_name(st.st_mode)));
  }
  return Status::ok();
}

Status check_destination(const std::string& path, Own own) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return Status::invalid(fmt::format("{}: cannot look at the destination: {}", path, std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode))
    return Status::invalid(
        fmt::format("{}: is a symbolic link; detaudit does not write through links (remove it "
                    "or choose another path)",
                    path));
  if (!S_ISREG(st.st_mode))
    return Status::invalid(
        fmt::format("{}: is {}; detaudit replaces only regular files it wrote", path, file_type_name(st.st_mode)));
  // A hard link: the file has another name elsewhere, and what is appended to it (a worker's log) lands there.
  if (st.st_nlink > 1)
    return Status::invalid(fmt::format("{}: has {} names (a hard link); detaudit does not write into a file another "
                                       "name shares (remove it or choose another path)",
                                       path, uint64_t(st.st_nlink)));
  if (own == Own::kAny) return Status::ok();
  // The first bytes, for the kinds known by their start.
  auto head = [&](size_t n) {
    std::string h(n, '\0');
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::string();
    const ssize_t got = ::read(fd, h.data(), n);
    ::close(fd);
    h.resize(got > 0 ? size_t(got) : 0);
    return h;
  };
  struct Kind {
    Own own;
    const char* schema;  // a JSON document's "schema" (nullptr: known otherwise)
    const char* name;
  };
  static const Kind kinds[] = {
      {Own::kResults, "detaudit/1", "results file"},
      {Own::kBaseline, "detaudit-baseline/1", "baseline"},
      {Own::kExport, "detaudit-export/1", "export manifest"},
      {Own::kDiverge, "detaudit-diverge/1", "diverge result"},
      {Own::kFleet, "detaudit-fleet/1", "fleet result"},
      {Own::kFleetNode, "detaudit-fleet-node/1", "fleet node file"},
      {Own::kQualify, "detaudit-qualify/2", "qualify result"},
      {Own::kReference, "detaudit-reference/1", "reference"},
      {Own::kDivergeTrace, nullptr, "diverge trace"},
      {Own::kReport, nullptr, "report"},
      {Own::kNpy, nullptr, "NPY array"},
      {Own::kMetrics, nullptr, "metrics file"},
  };
  const Kind* k = nullptr;
  for (auto& x : kinds)
    if (x.own == own) k = &x;
  bool mine = false;
  if (k->schema) {
    mine = schema_of(path) == k->schema;
  } else if (own == Own::kDivergeTrace) {
    const std::string h = head(4096);
    const nlohmann::json j = nlohmann::json::parse(h.substr(0, h.find('\n')), nullptr, false);
    mine = j.is_object() && j.value("schema", nlohmann::json()) == "detaudit-diverge-trace/1";
  } else if (own == Own::kReport) {
    const std::string h = head(4096);
    mine = h.rfind("# detaudit", 0) == 0 || h.find("<title>detaudit") != std::string::npos;
  } else if (own == Own::kNpy) {
    mine = head(6) == "\x93NUMPY";
  } else if (own == Own::kMetrics) {
    mine = head(22) == "# HELP detaudit_health";
  }
  if (!mine)
    return Status::invalid(
        fmt::format("{}: exists and is not a detaudit {}; refusing to replace it (choose another "
                    "path, or remove it first)",
                    path, k->name));
  return Status::ok();
}

Status StreamedFile::open(const std::string& path, Own own) {
  discard();
  DETAUDIT_RETURN_IF_ERROR(check_destination(path, own));
  // A name no other writer uses (two processes on one --out, two threads): pid and a counter, and
  // O_EXCL so a leftover of a crashed writer is never written through.
  static std::atomic<unsigned> counter{0};
  path_ = path, own_ = own, tmp_ = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int e = errno;
    tmp_.clear();
    return Status::error(fmt::format("{}.tmp.*: cannot create: {}", path, std::strerror(e)));
  }
  return Status::ok();
}

void StreamedFile::write(const std::string& s) {
  buf_ += s;
  if (buf_.size() >= (1u << 16)) (void)flush();
}

Status StreamedFile::flush() {
  if (fd_ < 0) return errno_ ? Status::error(fmt::format("{}: write failed: {}", path_, std::strerror(errno_)))
                             : Status::ok();
  if (!buf_.empty() && !errno_ && !write_all(fd_, buf_)) errno_ = errno ? errno : EIO;
  buf_.clear();
  return errno_ ? Status::error(fmt::format("{}: write failed: {}", path_, std::strerror(errno_))) : Status::ok();
}

Status StreamedFile::commit() {
  if (fd_ < 0 && tmp_.empty()) return Status::ok();  // never opened
  // On any failure the temporary file goes and the destination stays as it was.
  auto fail = [&](const char* what, int e) {
    discard();
    return Status::error(fmt::format("{}: {}: {}", path_, what, std::strerror(e)));
  };
  if (Status st = flush(); !st) return fail("write failed", errno_);
  if (::fsync(fd_) != 0) return fail("fsync failed", errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) return fail("close failed", errno);
  // Once more just before the rename: something put at the path while we wrote is not replaced either.
  if (Status st = check_destination(path_, own_); !st) {
    discard();
    return st;
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) return fail("rename failed", errno);
  tmp_.clear();
  return Status::ok();
}

void StreamedFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  buf_.clear();
  errno_ = 0;
}

Status write_file_atomic(const std::string& path, const std::string& content, Own own) {
  StreamedFile f;
  DETAUDIT_RETURN_IF_ERROR(f.open(path, own));
  f.write(content);
  return f.commit();
}

Status not_a_fleet_directory(const std::string& dir) {
  std::error_code ec;
  for (const char* own : {"fleet.json", "ranks"})
    if (std::filesystem::exists(std::filesystem::symlink_status(dir + "/" + own, ec)))
      return Status::invalid(fmt::format("{}: a fleet's directory (it holds {}): its reports are the fleet's; choose "
                                         "another --out",
                                         dir, own));
  return Status::ok();
}

}  // namespace detaudit
