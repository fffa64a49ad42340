// The one-way flow of the layers, checked on the sources themselves: every `#include "<folder>/..."`
// of a layer folder must name the folder itself or one the layer may use, the matrix below, which
// CMakeLists.txt's detaudit_layer(... SEES ...) lines must state the same way (the build gives each
// folder an include path with those folders only, so the compiler refuses the rest too).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cctype>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "probes/registry.hpp"

namespace fs = std::filesystem;

namespace {

// Each layer and the folders it may include (besides its own): the folders below it, transitively.
// cli -> store -> gates -> suites -> probes/models -> kernels; analysis reads the contract; report renders it.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> m = {
      {"kernels", {}},
      {"contract", {"kernels"}},
      {"models", {"kernels"}},
      {"probes", {"contract", "kernels"}},
      {"analysis", {"contract", "kernels"}},
      {"report", {"analysis", "contract", "kernels"}},
      {"suites", {"probes", "models", "analysis", "contract", "kernels"}},
      {"gates", {"suites", "probes", "models", "analysis", "contract", "kernels"}},
      {"store", {"gates", "suites", "probes", "models", "analysis", "contract", "kernels"}},
      {"cli", {"store", "gates", "suites", "probes", "models", "analysis", "contract", "kernels", "report"}},
  };
  return m;
}

bool is_source(const fs::path& p) {
  static const std::set<std::string> ext = {".cpp", ".hpp", ".cu", ".cuh", ".cc", ".h"};
  return ext.count(p.extension().string()) > 0;
}

// Every include edge of the tree under `root` that the matrix does not allow, as "file:line: text".
std::vector<std::string> include_violations(const fs::path& root) {
  static const std::regex include(R"(^\s*#\s*include\s*"([A-Za-z0-9_]+)/)");
  std::vector<std::string> out;
  for (auto& [layer, sees] : allowed()) {
    if (!fs::is_directory(root / layer)) continue;
    for (auto& e : fs::recursive_directory_iterator(root / layer)) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      std::ifstream f(e.path());
      std::string line;
      for (int n = 1; std::getline(f, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string to = m[1];
        if (to == layer || sees.count(to) || !allowed().count(to)) continue;  // not a layer: a library's own
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

// ---- backend names in string literals ------------------------------------------------------------
// Which backends' names a source file may write in a string literal: a backend's own files (its registry
// entry, probes/backends/<name>.cpp, and its kernels). Everywhere else a backend is reached through the
// registry (probes/registry.hpp), so a new backend touches its own files and one registry line.
std::set<std::string> owned_names(const std::string& rel) {
  static const std::set<std::string> kCudaFamily = {"cuda", "cublas", "cublaslt", "cudnn"};
  const fs::path p(rel);
  if (p.parent_path() == "probes/backends") {
    std::string stem = p.stem().string();
    for (auto& c : stem)
      if (c == '_') c = '-';  // cpu_ref.cpp: cpu-ref
    return {stem};
  }
  if (rel == "kernels/cpu/openblas_backend.cpp") return {"openblas"};
  if (rel == "kernels/cpu/onednn_backend.cpp") return {"onednn"};
  // detaudit's own CPU kernels: cpu and its oracle cpu-ref (native*, ref, pool, winograd, portable, ...).
  if (rel.rfind("kernels/cpu/", 0) == 0) return {"cpu", "cpu-ref"};
  // The four CUDA backends share their kernels, the factory and the build without CUDA.
  if (rel.rfind("kernels/cuda/", 0) == 0 || rel == "kernels/cuda_unavailable.cc") return kCudaFamily;
  if (rel == "bench/gpu_speed.cu") return {"cuda"};  // the native CUDA kernels' own benchmark
  return {};
}

// The string literals of a C++ source (comments, character literals and raw strings understood), with
// their lines.
std::vector<std::pair<int, std::string>> string_literals(const std::string& src) {
  std::vector<std::pair<int, std::string>> out;
  int line = 1;
  auto count_lines = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < src.size(); ++k) line += src[k] == '\n';
  };
  for (size_t i = 0; i < src.size();) {
    if (src.compare(i, 2, "//") == 0) {
      i = src.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (src.compare(i, 2, "/*") == 0) {
      size_t e = src.find("*/", i + 2);
      e = e == std::string::npos ? src.size() : e + 2;
      count_lines(i, e);
      i = e;
      continue;
    }
    const bool word_before = i > 0 && (std::isalnum(static_cast<unsigned char>(src[i - 1])) || src[i - 1] == '_');
    if (src.compare(i, 2, "R\"") == 0 && !word_before) {
      const size_t open = src.find('(', i + 2);
      std::string close(1, ')');  // built piecewise: GCC 12 warns (-Wrestrict, wrongly) on ")" + std::string&&
      close += src.substr(i + 2, open - i - 2);
      close += '"';
      const size_t e = src.find(close, open);
      out.push_back({line, src.substr(open + 1, e - open - 1)});
      count_lines(i, e);
      i = e + close.size();
      continue;
    }
    if (src[i] == '"') {
      std::string lit;
      size_t j = i + 1;
      for (; j < src.size() && src[j] != '"'; ++j) {
        if (src[j] == '\\') lit += src[j++];
        lit += src[j];
      }
      out.push_back({line, lit});
      i = j + 1;
      continue;
    }
    if (src[i] == '\'' && !word_before) {  // a character literal (not a digit separator)
      size_t j = i + 1;
      while (j < src.size() && src[j] != '\'') j += src[j] == '\\' ? 2 : 1;
      i = j + 1;
      continue;
    }
    line += src[i] == '\n';
    ++i;
  }
  return out;
}

// Every string literal under `root` (the layer folders and bench/) that is a backend's name, or a backend's
// name followed by '?' or ':', outside that backend's own files, as "file:line: literal".
std::vector<std::string> backend_name_violations(const fs::path& root) {
  std::vector<std::string> names;
  for (auto& e : detaudit::backend_registry()) names.push_back(e.name);
  std::vector<std::string> folders = {"bench"};
  for (auto& [layer, sees] : allowed()) folders.push_back(layer);
  std::vector<std::string> out;
  for (auto& folder : folders) {
    if (!fs::is_directory(root / folder)) continue;
    for (auto& e : fs::recursive_directory_iterator(root / folder)) {
      if (!e.is_regular_file() || !is_source(e.path())) continue;
      const std::string rel = fs::relative(e.path(), root).generic_string();
      const std::set<std::string> own = owned_names(rel);
      std::ifstream f(e.path());
      std::stringstream ss;
      ss << f.rdbuf();
      for (auto& [line, lit] : string_literals(ss.str()))
        for (auto& name : names) {
          const bool names_it = lit == name || (lit.size() > name.size() && lit.compare(0, name.size(), name) == 0 &&
                                                (lit[name.size()] == '?' || lit[name.size()] == ':'));
          if (names_it && !own.count(name))
            out.push_back(rel + ":" + std::to_string(line) + ": \"" + lit + "\" names backend " + name);
        }
    }
  }
  return out;
}

}  // namespace

TEST(Layering, OnlyABackendsOwnFilesNameItInAStringLiteral) {
  const std::vector<std::string> v = backend_name_violations(DETAUDIT_SOURCE_DIR);
  EXPECT_TRUE(v.empty()) << "backend names outside their backend's files (reach them through the registry):\n"
                         << joined(v);
}

TEST(Layering, APlantedBackendNameIsFound) {
  // A copy of gates/ with `"cudnn"` planted in one file; a comment naming it is not a literal.
  const fs::path root = fs::temp_directory_path() / ("detaudit-names-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  fs::copy(fs::path(DETAUDIT_SOURCE_DIR) / "gates", root / "gates", fs::copy_options::recursive);
  ASSERT_TRUE(backend_name_violations(root).empty()) << "the copy itself is clean";
  const fs::path victim = root / "gates" / "check.cpp";
  ASSERT_TRUE(fs::exists(victim));
  {
    std::ofstream f(victim, std::ios::app);
    f << "// \"cudnn\" in a comment\nstatic const char* planted = \"cudnn\";\n"
         "static const char* fine = \"cudnnx\";\n";
  }
  const std::vector<std::string> v = backend_name_violations(root);
  ASSERT_EQ(v.size(), 1u) << joined(v);
  EXPECT_EQ(v[0].rfind("gates/check.cpp:", 0), 0u) << v[0];
  EXPECT_NE(v[0].find("\"cudnn\" names backend cudnn"), std::string::npos) << v[0];
  fs::remove_all(root);
}

TEST(Layering, NoIncludeGoesAgainstTheArrows) {
  const std::vector<std::string> v = include_violations(DETAUDIT_SOURCE_DIR);
  EXPECT_TRUE(v.empty()) << "includes against the layer matrix:\n" << joined(v);
}

TEST(Layering, APlantedIncludeAgainstTheArrowsIsFound) {
  // A copy of the models and probes layers with one planted edge: models may not see probes.
  const fs::path root = fs::temp_directory_path() / ("detaudit-layering-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  for (const char* layer : {"models", "probes"})
    fs::copy(fs::path(DETAUDIT_SOURCE_DIR) / layer, root / layer, fs::copy_options::recursive);
  ASSERT_TRUE(include_violations(root).empty()) << "the copy itself is clean";
  const fs::path victim = root / "models" / "autoencoder.cpp";
  ASSERT_TRUE(fs::exists(victim));
  {
    std::ofstream f(victim, std::ios::app);
    f << "#include \"probes/registry.hpp\"\n";
  }
  const std::vector<std::string> v = include_violations(root);
  ASSERT_EQ(v.size(), 1u) << joined(v);
  EXPECT_EQ(v[0].rfind("models/autoencoder.cpp:", 0), 0u) << v[0];
  EXPECT_NE(v[0].find("probes/registry.hpp"), std::string::npos) << v[0];
  fs::remove_all(root);
}

TEST(Layering, CMakeDeclaresTheSameMatrix) {
  // detaudit_layer(<target> <folder> SEES a b c LINKS ...): what each folder's include path holds.
  std::ifstream f(std::string(DETAUDIT_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  static const std::regex decl(R"(detaudit_layer\(\s*\w+\s+(\w+)([^)]*)\))");
  std::map<std::string, std::set<std::string>> declared;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it) {
    const std::string folder = (*it)[1], args = (*it)[2];
    std::set<std::string> sees;
    std::istringstream words(args);
    bool in_sees = false;
    for (std::string w; words >> w;) {
      if (w == "SEES") in_sees = true;
      else if (w == "LINKS" || w == "SOURCES") in_sees = false;
      else if (in_sees) sees.insert(w);
    }
    declared[folder] = sees;
  }
  for (auto& [layer, sees] : allowed()) {
    if (layer == "cli") continue;  // the executable sees every folder
    ASSERT_TRUE(declared.count(layer)) << layer << " is not declared with detaudit_layer";
    EXPECT_EQ(declared[layer], sees) << layer;
  }
}

TEST(Layering, TheBuildGivesEachFolderOnlyTheFoldersItMaySee) {
  // The include path of each folder library (CMakeLists.txt, detaudit_layer) is a directory of links.
  const fs::path layers = DETAUDIT_LAYERS_DIR;
  for (auto& [layer, sees] : allowed()) {
    if (layer == "cli") continue;
    ASSERT_TRUE(fs::is_directory(layers / layer)) << layers / layer;
    std::set<std::string> present;
    for (auto& e : fs::directory_iterator(layers / layer)) present.insert(e.path().filename().string());
    std::set<std::string> want = sees;
    want.insert(layer);
    EXPECT_EQ(present, want) << layer;
  }
  // models cannot reach the registry, so planting that include in models/ does not compile.
  EXPECT_FALSE(fs::exists(layers / "models" / "probes" / "registry.hpp"));
  EXPECT_TRUE(fs::exists(layers / "models" / "kernels" / "backend.hpp"));
}
