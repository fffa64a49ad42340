// detaudit: audits numerical determinism at the hardware level. The entry point: the workers' subcommands,
// then every subcommand registered by cli/cmd_<name>.cpp (one dispatch), a parse error in the command's
// format, and the exit code checked against what stdout received: 0 ok, 1 a check failed, 2 could not run.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/output.hpp"
#include "contract/results.hpp"
#include "probes/child.hpp"
#include "probes/worker.hpp"
#include "suites/train_design.hpp"

using namespace detaudit;
using namespace detaudit::cli;

namespace {

// --help and --version print through std::cout: on a stdout closed before the start, that text is lost.
int printed(int rc) {
  if (stdout_was_closed()) mark_stdout_lost(EBADF);
  return rc;
}

int main_cli(int argc, char** argv) {
  CLI::App app{"detaudit: audits numerical determinism at the hardware level.\n"
               "Runs conv, matmul and reduction workloads again and again on each target, fingerprints every\n"
               "output bit for bit, and reports which targets are deterministic, which agree with each other,\n"
               "and how far each is from the double-accumulated oracle.\n"
               "Exit codes: 0 the audit completed and nothing FAILed, 1 a check failed (a FAIL verdict: a broken\n"
               "promise, a changed fingerprint, a disqualified machine), 2 could not run (one line on stderr),\n"
               "128+N interrupted by signal N (finished work is saved; the message says how to resume).",
               "detaudit"};
  app.set_version_flag("--version", std::string("detaudit ") + DETAUDIT_VERSION + " (" + git_commit() + ")");
  app.require_subcommand(1);

  std::vector<Command> commands;
  for (auto& [order, factory] : registered_commands()) commands.push_back(factory(app, argc, argv));
  require_plain_integers(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return printed(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return printed(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return printed(app.exit(e));
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    const std::string line = parse_error_line(app, argc, argv, msg);
    // `--format json` (or --json) asked for one object on stdout: the refusal is one too, though the
    // options did not parse.
    bool json = false;
    std::string command;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      json = json || arg == "--json" || arg == "--format=json" || (arg == "--format" && i + 1 < argc && std::string(argv[i + 1]) == "json");
      if (command.empty() && arg.rfind('-', 0) != 0)
        for (const CLI::App* sub : static_cast<const CLI::App&>(app).get_subcommands([](const CLI::App*) { return true; }))
          if (sub->get_name() == arg) command = arg;
    }
    const int rc = fail(line);
    if (json)
      put(stdout, nlohmann::json{{"schema", kCliSchema}, {"command", command}, {"exit_code", 2}, {"reports", nlohmann::json::object()}, {"error", line}}.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) +
                      "\n");
    return rc;
  }

  for (auto& c : commands)
    if (c.app->parsed()) {
      set_active_command(c.app->get_name(), c.output, c.judging, c.writes_files);
      return c.run();
    }
  return 0;
}

}  // namespace

// A command whose answer is what it prints (env, check, compare, history, qualify's verdict, --help,
// --version, every --format json) has not succeeded when stdout lost it: exit 2 instead of 0, saying why.
// A command whose product is the files it writes (probe, train, fleet, report, ...) keeps its exit code
// unless its answer was JSON or markdown on stdout.
int delivered(int rc) {
  std::cout.flush();
  if (!std::cout) mark_stdout_lost(errno ? errno : EIO);
  if (std::fflush(stdout) != 0) mark_stdout_lost(errno ? errno : EIO);
  const int err = stdout_lost();
  // A FAIL (1) nobody received is a lost answer too: the caller would look for its details in vain.
  if ((rc != 0 && rc != 1) || err == 0) return rc;
  const std::string& cmd = active_command();
  if (active_format() == Format::kText && active_writes_files()) return rc;  // (md and json are answers)
  say(stderr, "detaudit: error: the output could not be written to stdout ({}): nobody received the answer{}\n",
      std::strerror(err), cmd.empty() ? "" : " of " + cmd);
  return 2;
}

int main(int argc, char** argv) {
  // Descriptors 0-2 exist before anything is opened: with stderr closed (2>&-) the first file opened would
  // take descriptor 2 and receive the progress lines (a directory's lock did).
  bool stdout_closed = false;
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      stdout_closed = stdout_closed || fd == 1;
      const int n = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (n >= 0 && n != fd) {
        ::dup2(n, fd);
        ::close(n);
      }
    }
  // Workers as the CLI: past a file-size limit a write fails with EFBIG (an oracle cache entry is then not
  // kept), instead of the worker dying by SIGXFSZ with a temporary file left behind.
  ::signal(SIGXFSZ, SIG_IGN);
  // The workers speak their protocol on a private copy of stdout; anything a library prints goes to stderr.
  if (argc >= 2 && std::string(argv[1]) == kWorkerSubcommand) {
    int proto = ::dup(1);
    ::dup2(2, 1);
    return worker_main(0, proto);
  }
  if (argc >= 2 && std::string(argv[1]) == kTrainWorkerSubcommand) {
    int proto = ::dup(1);
    ::dup2(2, 1);
    return train_worker_main(0, proto);
  }
  install_interrupt_handlers();
  if (stdout_closed) mark_stdout_closed();  // what goes to stdout now goes nowhere
  try {
    const int rc = delivered(main_cli(argc, argv));
    // A signal that arrived while a short command finished its work: the work is complete, and the exit
    // code still says the command was interrupted, as every command's does.
    if (interrupted() && rc < 128) {
      if (rc <= 1)
        say(stderr, "detaudit: interrupted by {} as the command finished: its output is complete\n",
            signal_description(interrupted()));
      return 128 + interrupted();
    }
    return rc;
  } catch (const std::exception& e) {
    // Nothing below the CLI should throw; if something does, it is still one line and exit 2.
    return fail(std::string("internal error: ") + e.what());
  }
}
