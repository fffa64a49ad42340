// Running the detaudit executable from tests: exit code, stdout and stderr of one invocation.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace detaudit::cli_test {

struct CliRun {
  int code;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// `args` is passed through the shell: quote specs containing '&' or '?'.
inline CliRun run_cli(const std::string& args) {
  // ctest runs tests in parallel processes: each call gets its own capture files.
  static int calls = 0;
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("detaudit-cli-io-" + std::to_string(getpid()) + "-" + std::to_string(calls++));
  fs::create_directories(dir);
  std::string out = (dir / "out").string(), err = (dir / "err").string();
  std::string cmd = std::string(DETAUDIT_EXE) + " " + args + " >" + out + " 2>" + err;
  int st = std::system(cmd.c_str());
  CliRun r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(out), slurp(err)};
  fs::remove_all(dir);
  return r;
}

// An empty directory for one test, unique to this process.
inline std::filesystem::path fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("detaudit-test-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  return d;
}

}  // namespace detaudit::cli_test
