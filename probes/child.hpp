// Child processes of detaudit (probe workers, oracle workers, training workers): started in their own
// process group with their own environment, fed one request on stdin, read line by line on stdout
// under a timeout, and never outliving the parent:
//   - the child writes no core file and asks the kernel to kill it when the parent dies (RLIMIT_CORE 0 and
//     PR_SET_PDEATHSIG, see child_start(), called first thing in every hidden worker subcommand);
//   - SIGINT/SIGTERM/SIGHUP in the parent (install_interrupt_handlers) kill every live child's group at
//     once, and interrupted() then tells the orchestration to save what finished and stop.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "contract/atomic_file.hpp"  // write_all


namespace detaudit {

struct ChildSpec {
  std::string exe;                                 // the detaudit executable
  std::vector<std::string> args;                   // after argv[0], e.g. {"__worker"}
  std::map<std::string, std::string> env;          // overrides; an empty value unsets the variable
  std::string request;                             // written to the child's stdin, which is then closed
  std::string log_path;                            // the child's stderr is appended here ("" = inherit)
  // Killed when this time comes, progress or not (a budget: `detaudit healthcheck`); the default never comes.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct ChildExit {
  bool started = false;       // false: it could not be started (error says why)
  bool timed_out = false;     // killed after timeout_s without progress
  bool interrupted = false;   // killed because detaudit itself was interrupted
  bool past_deadline = false; // killed at ChildSpec::deadline
  bool signaled = false;      // died by signal `sig`
  int sig = 0;
  int code = -1;              // exit code when it exited normally
  std::string error;
};

// Called for every line the child writes on stdout (without the newline). Return true when the line
// is progress, which restarts the timeout.
using LineSink = std::function<bool(const std::string& line)>;

// Runs the child to its end, or kills its whole process group after timeout_s seconds without progress,
// at spec.deadline, or at once when detaudit is interrupted.
ChildExit run_child(const ChildSpec& spec, double timeout_s, const LineSink& on_line);

// The parent side of interruption: SIGINT, SIGTERM and SIGHUP kill every running child group and set a
// flag instead of ending the process; SIGPIPE is ignored (a closed stdout must not stop an audit).
void install_interrupt_handlers();
// The signal that interrupted detaudit, or 0.
int interrupted();
// For tests: forget an interruption.
void clear_interrupted();

// The child side, first thing in every worker: no core file, ever (a target that crashes by design, a SIGILL on
// an instruction the CPU lacks, would leave hundreds of MB in the working directory wherever core dumps are on:
// RLIMIT_CORE 0, which the kernel and systemd-coredump honour); and die when the parent dies, even when the
// parent is killed with SIGKILL. Exits at once when the parent is already gone. Reads DETAUDIT_PARENT_PID, set by
// run_child.
void child_start();

// The child side's I/O: the whole request from fd (until EOF), and one protocol line (EINTR and short
// writes handled; false when the parent is gone).
std::string read_all(int fd);  // write_all: contract/atomic_file.hpp

// "SIGILL (Illegal instruction)".
std::string signal_description(int sig);

}  // namespace detaudit
