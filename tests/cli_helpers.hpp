// Running the detaudit executable from tests: exit code, stdout and stderr of one invocation.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
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

// A small, valid MNIST-format pair (raw IDX) in dir: n images of side x side with a pattern, and
// labels_n labels (a count other than n makes a mismatched pair).
inline void write_idx(const std::filesystem::path& dir, int n, int labels_n, int side = 28) {
  std::filesystem::create_directories(dir);
  auto be32 = [](std::ofstream& f, uint32_t v) {
    unsigned char b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
    f.write(reinterpret_cast<char*>(b), 4);
  };
  std::ofstream img(dir / "train-images-idx3-ubyte", std::ios::binary);
  be32(img, 0x803);
  be32(img, uint32_t(n));
  be32(img, uint32_t(side));
  be32(img, uint32_t(side));
  for (int i = 0; i < n * side * side; ++i) img.put(char((i * 37 + i / (side * side)) % 256));
  std::ofstream lab(dir / "train-labels-idx1-ubyte", std::ios::binary);
  be32(lab, 0x801);
  be32(lab, uint32_t(labels_n));
  for (int i = 0; i < labels_n; ++i) lab.put(char(i % 10));
}

// An empty directory for one test, unique to this process.
inline std::filesystem::path fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("detaudit-test-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  return d;
}

}  // namespace detaudit::cli_test
