#include "probes/worker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "probes/targets.hpp"
#include "probes/workload.hpp"

extern char** environ;

namespace detaudit {

std::string signal_description(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return fmt::format("SIG{} ({})", abbrev ? abbrev : std::to_string(sig).c_str(), desc ? desc : "unknown");
}

// ------------------------------------------------------------------------------------------------
// Worker side
// ------------------------------------------------------------------------------------------------
namespace {

using Clock = std::chrono::steady_clock;

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

void emit(int fd, const nlohmann::json& j) { write_all(fd, j.dump() + "\n"); }

bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), {});
  return true;
}

ObsStatus status_for(const Status& st) {
  return (st.code() == Status::Code::kUnsupported || st.code() == Status::Code::kUnavailable) ? ObsStatus::kSkipped
                                                                                             : ObsStatus::kError;
}

}  // namespace

Observation observe(Backend* backend, const std::string& target_text, const WorkItem& item, int repeats) {
  Observation o;
  o.workload = item.workload.str();
  o.target = target_text;
  o.repeats = repeats;
  o.describe = backend->describe();
  auto w = Workload::create(item.workload);
  if (!w) {
    o.status = ObsStatus::kError;
    o.reason = "unknown workload " + item.workload.name;
    return o;
  }
  auto fail = [&](const Status& st) {
    o.status = status_for(st);
    o.reason = st.message();
    w->teardown(*backend);
    return o;
  };
  Status st = w->setup(*backend);
  if (!st) return fail(st);

  std::vector<uint8_t> oracle;
  bool have_oracle = !item.oracle_path.empty() && read_file(item.oracle_path, &oracle) && oracle.size() == w->output_bytes();
  std::vector<uint8_t> host(w->output_bytes());
  std::map<std::string, bool> seen;  // fingerprints whose output has been compared with the oracle
  OracleDistance dist;
  bool traced_any = false;
  std::string trace_reason;

  for (int r = 0; r < repeats; ++r) {
    Status tb = backend->trace_begin(uint64_t(r) + 1);
    auto t0 = Clock::now();
    st = w->run(*backend);
    auto t1 = Clock::now();
    std::vector<KernelRecord> kernels;
    Status te = tb ? backend->trace_end(&kernels) : tb;
    if (!st) return fail(st);
    o.seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    if (te) {
      traced_any = true;
      o.kernels.push_back(std::move(kernels));
    } else if (trace_reason.empty()) {
      trace_reason = te.message();
    }
    Fingerprint fp;
    st = backend->fingerprint(w->output(), w->output_bytes(), &fp);
    if (!st) return fail(st);
    std::string hex = fp.hex();
    o.fingerprints.push_back(hex);
    // Only a new output is brought back and compared: repeats of a known fingerprint are identical.
    if (have_oracle && !seen.count(hex)) {
      seen[hex] = true;
      st = backend->download(host.data(), w->output(), host.size());
      if (!st) return fail(st);
      OracleDistance d = w->is_f64() ? compare_to_oracle(reinterpret_cast<const double*>(host.data()),
                                                         reinterpret_cast<const double*>(oracle.data()), host.size() / 8)
                                     : compare_to_oracle(reinterpret_cast<const float*>(host.data()),
                                                         reinterpret_cast<const float*>(oracle.data()), host.size() / 4);
      dist.merge(d);
    }
  }
  if (have_oracle) o.oracle = dist;
  o.distinct = count_distinct(o.fingerprints);
  if (item.workload.name == "batchinv") {
    BatchInvariance b;
    st = w->batch_check(*backend, &b);
    if (!st) return fail(st);
    o.batch = b;
  }
  if (traced_any)
    o.tracing = "ok";
  else if (trace_reason != "not a GPU target")
    o.tracing = trace_reason.rfind("tracing unavailable", 0) == 0 ? trace_reason : "tracing unavailable: " + trace_reason;
  for (auto& [k, v] : backend->details()) o.details[k] = v;
  o.describe = backend->describe();
  w->teardown(*backend);
  return o;
}

int worker_main(int in_fd, int out_fd) {
  std::string input;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(in_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    input.append(buf, size_t(n));
  }
  nlohmann::json req = nlohmann::json::parse(input, nullptr, false);
  if (req.is_discarded() || req.value("protocol", "") != kWorkerProtocol) {
    fmt::print(stderr, "detaudit worker: malformed request (expected protocol {})\n", kWorkerProtocol);
    return 2;
  }
  Spec target;
  std::string err;
  if (!parse_target(req.value("target", ""), &target, &err)) {
    fmt::print(stderr, "detaudit worker: {}\n", err);
    return 2;
  }
  int repeats = req.value("repeats", 1);
  std::vector<WorkItem> items;
  std::vector<int> indices;
  for (auto& it : req.at("items")) {
    WorkItem wi;
    if (!parse_workload(it.value("workload", ""), &wi.workload, &err)) {
      fmt::print(stderr, "detaudit worker: {}\n", err);
      return 2;
    }
    wi.oracle_path = it.value("oracle", "");
    items.push_back(wi);
    indices.push_back(it.value("index", 0));
  }

  Status st;
  std::unique_ptr<Backend> backend = make_target_backend(target, &st);
  for (size_t i = 0; i < items.size(); ++i) {
    emit(out_fd, {{"event", "begin"}, {"index", indices[i]}});
    Observation o;
    if (!backend) {
      o.workload = items[i].workload.str();
      o.target = target.str();
      o.repeats = repeats;
      o.status = status_for(st);
      o.reason = st.message();
    } else {
      o = observe(backend.get(), target.str(), items[i], repeats);
    }
    emit(out_fd, {{"event", "observation"}, {"index", indices[i]}, {"observation", to_json(o)}});
  }
  emit(out_fd, {{"event", "done"}});
  return 0;
}

// ------------------------------------------------------------------------------------------------
// Parent side
// ------------------------------------------------------------------------------------------------
namespace {

struct Child {
  pid_t pid = -1;
  int out_fd = -1;
};

std::vector<std::string> build_env(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (overrides.count(key)) continue;
    env.push_back(kv);
  }
  for (auto& [k, v] : overrides)
    if (!v.empty()) env.push_back(k + "=" + v);
  return env;
}

// Starts a worker in its own process group; writes the request to its stdin and closes it.
bool spawn_worker(const WorkerOptions& opt, const Spec& target, const std::string& request, Child* child,
                  std::string* err) {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
    *err = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  if (!opt.log_path.empty())
    posix_spawn_file_actions_addopen(&fa, 2, opt.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);

  std::vector<std::string> env = build_env(target_environment(target));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = opt.exe, sub = kWorkerSubcommand;
  char* argv[] = {exe.data(), sub.data(), nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    *err = fmt::format("cannot start worker {}: {}", exe, std::strerror(rc));
    return false;
  }
  // The request is small; a worker that dies before reading it gives EPIPE, which is ignored here
  // (SIGPIPE is ignored by the CLI) and shows up as the worker's death.
  write_all(in_pipe[1], request);
  ::close(in_pipe[1]);
  child->pid = pid;
  child->out_fd = out_pipe[0];
  return true;
}

}  // namespace

void run_target(const Spec& target, const std::vector<WorkItem>& items, const WorkerOptions& opt,
                const ObservationSink& sink, const ProgressSink& progress) {
  size_t next = 0;
  auto record = [&](size_t i, ObsStatus status, const std::string& reason) {
    Observation o;
    o.workload = items[i].workload.str();
    o.target = target.str();
    o.repeats = opt.repeats;
    o.status = status;
    o.reason = reason;
    sink(items[i], std::move(o));
  };
  while (next < items.size()) {
    nlohmann::json req = {{"protocol", kWorkerProtocol}, {"target", target.str()}, {"repeats", opt.repeats}};
    nlohmann::json arr = nlohmann::json::array();
    for (size_t i = next; i < items.size(); ++i)
      arr.push_back({{"index", i}, {"workload", items[i].workload.str()}, {"oracle", items[i].oracle_path}});
    req["items"] = arr;
    Child child;
    std::string err;
    if (!spawn_worker(opt, target, req.dump(), &child, &err)) {
      for (; next < items.size(); ++next) record(next, ObsStatus::kError, err);
      return;
    }
    std::string pending;
    bool done = false, timed_out = false;
    auto deadline = Clock::now() + std::chrono::duration<double>(opt.timeout_s);
    bool eof = false;
    while (!eof && !done) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      pollfd pfd{child.out_fd, POLLIN, 0};
      int pr = ::poll(&pfd, 1, int(std::min<int64_t>(left, 1000)));
      if (pr < 0 && errno == EINTR) continue;
      if (pr <= 0) continue;
      char buf[65536];
      ssize_t n = ::read(child.out_fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof = true;
        break;
      }
      pending.append(buf, size_t(n));
      size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        nlohmann::json ev = nlohmann::json::parse(line, nullptr, false);
        if (ev.is_discarded()) continue;  // not a protocol line
        std::string kind = ev.value("event", "");
        if (kind == "begin") {
          size_t idx = ev.value("index", size_t(0));
          if (idx == next) {
            deadline = Clock::now() + std::chrono::duration<double>(opt.timeout_s);
            if (progress) progress(items[next]);
          }
        } else if (kind == "observation") {
          size_t idx = ev.value("index", size_t(0));
          Observation o;
          std::string perr;
          if (idx != next) continue;
          if (!from_json(ev.at("observation"), &o, &perr)) {
            o = Observation{};
            o.workload = items[idx].workload.str();
            o.target = target.str();
            o.repeats = opt.repeats;
            o.status = ObsStatus::kError;
            o.reason = "worker sent " + perr;
          }
          sink(items[idx], std::move(o));
          ++next;
          deadline = Clock::now() + std::chrono::duration<double>(opt.timeout_s);
        } else if (kind == "done") {
          done = true;
        }
      }
    }
    if (timed_out) ::kill(-child.pid, SIGKILL);
    ::close(child.out_fd);
    int wstatus = 0;
    while (::waitpid(child.pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
      if (next < items.size())
        record(next++, ObsStatus::kTimeout, fmt::format("no result after {:g} s; worker killed", opt.timeout_s));
      continue;
    }
    if (done && next >= items.size()) break;
    if (next >= items.size()) break;
    // The worker died with items left: the one in progress is the casualty.
    if (WIFSIGNALED(wstatus))
      record(next++, ObsStatus::kCrashed, signal_description(WTERMSIG(wstatus)));
    else
      record(next++, ObsStatus::kError,
             fmt::format("worker exited with code {} before finishing", WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1));
  }
}

}  // namespace detaudit
