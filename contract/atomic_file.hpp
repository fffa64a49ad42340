// The one path by which the tool writes a file (written whole or not at all: results, baselines, caches,
// reports); kernels/input_file.hpp is the one by which it opens a file it reads.
#pragma once
#include <string>

#include "kernels/status.hpp"

namespace detaudit {

// What the tool may replace at a destination: any regular file (caches under its own hidden folders), or
// only its own output of one kind: a JSON document known by its "schema" (results, baseline, export
// manifest, diverge result, fleet and fleet node), a diverge trace by the schema of its first line, a
// report by its first line ("# detaudit ...") or its HTML title ("<title>detaudit ..."), an array by the
// NPY magic.
enum class Own { kAny, kResults, kBaseline, kExport, kDiverge, kDivergeTrace, kFleet, kFleetNode, kQualify, kReference, kReport, kNpy, kMetrics };

// Refuses (Status::invalid, one line) a destination that is a symbolic link (the tool never writes
// through one), a hard link (a file with another name), anything but a regular file (a directory, device,
// FIFO, socket), or, for own != kAny, a
// regular file that is not the tool's own output of that kind. A destination that does not exist is fine.
[[nodiscard]] Status check_destination(const std::string& path, Own own = Own::kAny);

// Writes path atomically: check_destination, then a temporary file of its own (path.tmp.<pid>.<n>, created
// exclusively), fsync, rename. On any failure the temporary file is removed and path is left as it was.
[[nodiscard]] Status write_file_atomic(const std::string& path, const std::string& content, Own own = Own::kAny);

// The same for a file written as a long run goes (a diverge trace): open() checks the destination and creates
// the temporary file, write() appends (buffered; flush() writes it out), commit() renames it into place (the
// destination checked once more). Discarded (destroyed or discard() before commit: a failed or interrupted
// run), the temporary file is removed and path is left as it was: an earlier run's complete file is never
// replaced by a partial one.
class StreamedFile {
 public:
  StreamedFile() = default;
  StreamedFile(const StreamedFile&) = delete;
  StreamedFile& operator=(const StreamedFile&) = delete;
  ~StreamedFile() { discard(); }
  [[nodiscard]] Status open(const std::string& path, Own own = Own::kAny);
  bool is_open() const { return fd_ >= 0; }
  void write(const std::string& s);
  [[nodiscard]] Status flush();
  [[nodiscard]] Status commit();
  void discard();

 private:
  int fd_ = -1, errno_ = 0;  // errno_: the first write that failed (reported by flush and commit)
  Own own_ = Own::kAny;
  std::string path_, tmp_, buf_;
};
// The one path by which the tool makes a folder below one the user named (`base`, created first if missing;
// it is the user's and may be a link): `rel` ("logs", ".oracle", "ranks/0-host/probe") is created one level
// at a time, and every level that exists must be a real directory: a symbolic link (or anything else) at any
// level is refused (Status::invalid, one line), so nothing the tool writes there lands in a link's target.
[[nodiscard]] Status make_dir_below(const std::string& base, const std::string& rel);
// A results directory is never a fleet's (one holding fleet.json or ranks/): its report.md and report.html
// are the fleet's, and a results.json there would make `fleet report` refuse the fleet. Invalid, one line.
[[nodiscard]] Status not_a_fleet_directory(const std::string& dir);

// Writes all of s to fd (EINTR and short writes handled); false on an error (errno says which).
bool write_all(int fd, const std::string& s);

}  // namespace detaudit
