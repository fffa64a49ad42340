// The library's one error style, checked on the sources: no folder below cli/ declares the old
// out-parameters (`std::string* err` for a message, `Status* st` for a status) or returns a process
// exit code under a name of its own (kProbeInterrupted and the like); a function that can fail returns
// a [[nodiscard]] Status or StatusOr<T> (kernels/status.hpp), which the compiler will not let a caller
// drop without a warning. The CLI alone turns a Status into an exit code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const char* const kLibraryFolders[] = {"kernels",  "contract", "models", "probes",
                                       "analysis", "report",   "suites", "gates"};

// "file:line: text" for every line of a library source under `root` in the old styles. Comments are
// not code: a line whose text starts with // is skipped, and so is the part of a line after //.
std::vector<std::string> error_style_violations(const fs::path& root) {
  static const std::regex message_out(R"(std::string\s*\*\s*(err|error|why|reason|msg)\b)");
  static const std::regex status_out(R"(\bStatus\s*\*\s*[A-Za-z_]\w*\s*[,)=])");
  static const std::regex exit_code_name(R"(\bk[A-Za-z]*(Interrupted|ExitCode)\b\s*=\s*[0-9])");
  std::vector<std::string> out;
  for (const char* folder : kLibraryFolders) {
    if (!fs::is_directory(root / folder)) continue;
    for (auto& e : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh")) continue;
      std::ifstream f(e.path());
      std::string line;
      for (int n = 1; std::getline(f, line); ++n) {
        std::string code = line.substr(0, line.find("//"));
        if (std::regex_search(code, message_out) || std::regex_search(code, status_out) ||
            std::regex_search(code, exit_code_name))
          out.push_back(fs::relative(e.path(), root).string() + ":" + std::to_string(n) + ": " + line);
      }
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += x + "\n";
  return s;
}

}  // namespace

TEST(ErrorStyle, TheLibraryHasNoOutParameterErrorsAndNoExitCodes) {
  const std::vector<std::string> v = error_style_violations(DETAUDIT_SOURCE_DIR);
  EXPECT_TRUE(v.empty()) << "old error styles below cli/ (return a Status or StatusOr instead):\n" << joined(v);
}

TEST(ErrorStyle, PlantedOldStylesAreFound) {
  // A copy of gates/ with three planted lines; the same words in a comment are not code.
  const fs::path root = fs::temp_directory_path() / ("detaudit-error-style-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  fs::copy(fs::path(DETAUDIT_SOURCE_DIR) / "gates", root / "gates", fs::copy_options::recursive);
  ASSERT_TRUE(error_style_violations(root).empty()) << "the copy itself is clean";
  {
    std::ofstream f(root / "gates" / "check.cpp", std::ios::app);
    f << "// bool old(std::string* err) in a comment\n"
         "bool planted_message(int x, std::string* err);\n"
         "void planted_status(Status* st);\n"
         "inline constexpr int kPlantedInterrupted = 3;\n";
  }
  const std::vector<std::string> v = error_style_violations(root);
  ASSERT_EQ(v.size(), 3u) << joined(v);
  EXPECT_NE(v[0].find("planted_message"), std::string::npos) << v[0];
  EXPECT_NE(v[1].find("planted_status"), std::string::npos) << v[1];
  EXPECT_NE(v[2].find("kPlantedInterrupted"), std::string::npos) << v[2];
  fs::remove_all(root);
}
