// Shared by the libFuzzer harnesses: a violated invariant prints what broke and traps, so libFuzzer
// saves the input as a crash; a scratch file for readers that take a path.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace detaudit::fuzz {

[[noreturn]] inline void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n%s\n", what, detail.c_str());
  __builtin_trap();
}

// A file under $TMPDIR (default /dev/shm, memory-backed) named after this process, rewritten per input
// and removed at exit.
inline std::string scratch_path(const std::string& suffix) {
  const char* dir = std::getenv("TMPDIR");
  std::string d = dir && *dir ? dir : "/dev/shm";
  if (access(d.c_str(), W_OK) != 0) d = "/tmp";
  static std::vector<std::string> paths;
  if (paths.empty()) std::atexit(+[] { for (const auto& p : paths) unlink(p.c_str()); });
  paths.push_back(d + "/detaudit-fuzz-" + std::to_string(getpid()) + suffix);
  return paths.back();
}

inline void write_scratch(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("cannot write the scratch file", path);
  if (size && std::fwrite(data, 1, size, f) != size) fail("short write to the scratch file", path);
  std::fclose(f);
}

}  // namespace detaudit::fuzz
