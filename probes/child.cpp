#include "probes/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

extern char** environ;

namespace detaudit {

std::string read_all(int fd) {
  std::string input;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    input.append(buf, size_t(n));
  }
  return input;
}

std::string signal_description(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return fmt::format("SIG{} ({})", abbrev ? abbrev : std::to_string(sig).c_str(), desc ? desc : "unknown");
}

namespace {

using Clock = std::chrono::steady_clock;

// Process groups of running children, for the signal handler (lock-free, async-signal-safe).
constexpr int kMaxChildren = 1024;  // a healthcheck runs one per logical CPU at once
std::atomic<pid_t> g_children[kMaxChildren];
volatile sig_atomic_t g_interrupted = 0;

void on_interrupt(int sig) {
  if (!g_interrupted) g_interrupted = sig;
  for (auto& c : g_children) {
    pid_t p = c.load();
    if (p > 0) ::kill(-p, SIGKILL);
  }
}

int register_child(pid_t pid) {
  for (int i = 0; i < kMaxChildren; ++i) {
    pid_t expected = 0;
    if (g_children[i].compare_exchange_strong(expected, pid)) return i;
  }
  return -1;
}

std::vector<std::string> build_env(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (overrides.count(key) || key == "DETAUDIT_PARENT_PID") continue;
    env.push_back(kv);
  }
  for (auto& [k, v] : overrides)
    if (!v.empty()) env.push_back(k + "=" + v);
  env.push_back(fmt::format("DETAUDIT_PARENT_PID={}", ::getpid()));
  return env;
}

// Starts the child in its own process group with default signal dispositions and an empty mask; the
// request goes to its stdin, which is then closed. On success *pid and *out_fd (its stdout) are set.
Status spawn(const ChildSpec& spec, pid_t* pid, int* out_fd) {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return Status::error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return Status::error(std::string("pipe: ") + std::strerror(e));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  if (!spec.log_path.empty())
    posix_spawn_file_actions_addopen(&fa, 2, spec.log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);

  std::vector<std::string> env = build_env(spec.env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args{spec.exe};
  args.insert(args.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = posix_spawn(pid, spec.exe.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    return Status::error(fmt::format("cannot start {}: {}", spec.exe, std::strerror(rc)));
  }
  // A child that dies before reading its request gives EPIPE (SIGPIPE is ignored), which shows up as
  // its death below. A request larger than the pipe buffer is written while the child reads it.
  write_all(in_pipe[1], spec.request);
  ::close(in_pipe[1]);
  *out_fd = out_pipe[0];
  return Status::ok();
}

}  // namespace

ChildExit run_child(const ChildSpec& spec, double timeout_s, const LineSink& on_line) {
  ChildExit ex;
  if (g_interrupted) {
    ex.interrupted = true;
    ex.error = "interrupted";
    return ex;
  }
  pid_t pid = -1;
  int fd = -1;
  if (Status st = spawn(spec, &pid, &fd); !st) {
    ex.error = st.message();
    return ex;
  }
  ex.started = true;
  int slot = register_child(pid);
  if (g_interrupted) ::kill(-pid, SIGKILL);  // the signal came between spawn and register

  auto window = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  auto deadline = Clock::now() + window;
  std::string pending;
  for (;;) {
    if (g_interrupted) {
      ex.interrupted = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    if (Clock::now() >= spec.deadline) {
      ex.past_deadline = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    if (Clock::now() >= deadline) {
      ex.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(std::min(deadline, spec.deadline) - Clock::now()).count();
    pollfd pfd{fd, POLLIN, 0};
    int pr = ::poll(&pfd, 1, int(std::clamp<int64_t>(left, 1, 1000)));
    if (pr <= 0) continue;  // timeout tick or EINTR: the checks above decide
    char buf[65536];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed stdout (it ended or died)
    pending.append(buf, size_t(n));
    size_t start = 0, nl;
    while ((nl = pending.find('\n', start)) != std::string::npos) {
      if (on_line && on_line(pending.substr(start, nl - start))) deadline = Clock::now() + window;
      start = nl + 1;
    }
    pending.erase(0, start);
  }
  ::close(fd);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  // Anything the child left behind in its group (it should be nothing) goes with it.
  ::kill(-pid, SIGKILL);
  if (slot >= 0) g_children[slot].store(0);
  if (g_interrupted && !ex.timed_out) ex.interrupted = true;
  if (WIFSIGNALED(wstatus)) {
    ex.signaled = true;
    ex.sig = WTERMSIG(wstatus);
  } else if (WIFEXITED(wstatus)) {
    ex.code = WEXITSTATUS(wstatus);
  }
  return ex;
}

void install_interrupt_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking poll() returns EINTR and sees the flag
  for (int s : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(s, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, which every writer reports, instead of
  // the process dying silently by SIGXFSZ half-way through a file.
  ::signal(SIGXFSZ, SIG_IGN);
}

int interrupted() { return g_interrupted; }
void clear_interrupted() { g_interrupted = 0; }

void child_start() {
  const struct rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  const char* p = std::getenv("DETAUDIT_PARENT_PID");
  if (!p) return;  // started by hand (tests, debugging): nobody to follow
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died between fork and prctl: then we were reparented already.
  if (std::to_string(::getppid()) != p) std::_Exit(3);
}


}  // namespace detaudit
