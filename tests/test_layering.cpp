// The one-way flow of the layers, checked on the sources themselves: every `#include "<folder>/..."`
// of a layer folder must name the folder itself or one the layer may use, the matrix below, which
// CMakeLists.txt's detaudit_layer(... SEES ...) lines must state the same way (the build gives each
// folder an include path with those folders only, so the compiler refuses the rest too).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Each layer and the folders it may include (besides its own): the folders below it, transitively.
// cli -> gates -> suites -> probes/models -> kernels; analysis reads the contract; report renders it.
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
      {"cli", {"gates", "suites", "probes", "models", "analysis", "contract", "kernels", "report"}},
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

}  // namespace

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
