// A results directory, as every command that writes one holds it: DIR/results.json (results_file names it), the lock
// that keeps a second process out (DirLock), and the results read and written as every reader takes them
// (probes/results_file.hpp). One object owns the path and the lock for the life of a command.
#pragma once
#include <string>

#include "contract/results.hpp"
#include "suites/dir_lock.hpp"

namespace detaudit {

class ResultsDir {
 public:
  explicit ResultsDir(std::string dir) : dir_(std::move(dir)) {}
  ResultsDir(const ResultsDir&) = delete;
  ResultsDir& operator=(const ResultsDir&) = delete;

  const std::string& dir() const { return dir_; }
  std::string results_path() const { return results_file(dir_); }

  // Before a run writes into DIR: DIR is not a fleet's (its ranks' folders are below it), no link or other file stands
  // where results.json goes, then the lock (DIR made when missing). Each refusal is one line, and the first two
  // leave the folder as they found it.
  [[nodiscard]] Status open_for_writing();
  // The lock alone (DIR made when missing): "DIR is in use by pid N" while another detaudit holds it.
  [[nodiscard]] Status lock() { return lock_.acquire(dir_); }

  // results.json as every command reads it (load_checked_results).
  [[nodiscard]] Status load(Results* out) const;
  // Written atomically after each finished cell or run, so an interruption loses no finished work.
  [[nodiscard]] Status save(const Results& r) const;
  // Written only if every reader takes it (save_checked_results): the last save of a run, or one that may hold
  // what a resumed session found.
  [[nodiscard]] Status save_checked(const Results& r) const;

 private:
  std::string dir_;
  DirLock lock_;
};

}  // namespace detaudit
