// One output contract for every subcommand: --format json prints one object with the same names
// everywhere (schema, command, exit_code; verdict and counts where the command judges; the report
// paths), --json is its alias, --quiet leaves the verdict line alone, and colour is for terminals only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/check_report.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;
using namespace detaudit::cli_test;
namespace fs = std::filesystem;

namespace {

struct Work {
  fs::path root = fresh_dir("output-contract");
  Work() { fs::create_directories(root); }
  ~Work() { fs::remove_all(root); }
  std::string operator/(const std::string& s) const { return (root / s).string(); }
};

const char* kSmall = "--targets cpu-ref,'cpu?order=sequential&threads=1' --workloads 'reduce?op=sum&n=100' --repeats 2";

// Runs `args`, parses its stdout as the contract's object, checks the fields every command shares.
nlohmann::json contract(const std::string& args, const std::string& command, bool judging, int* code = nullptr) {
  CliRun r = run_cli(args);
  if (code) *code = r.code;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << args << "\nstdout: " << r.out << "\nstderr: " << r.err;
  if (!j.is_object()) return j;
  EXPECT_EQ(j["schema"], "detaudit-cli/1") << args;
  EXPECT_EQ(j["command"], command) << args;
  EXPECT_EQ(j["exit_code"], r.code) << args;
  EXPECT_TRUE(j["reports"].is_object()) << args;
  EXPECT_EQ(j.contains("verdict"), judging) << args;
  EXPECT_EQ(j.contains("counts"), judging) << args;
  if (judging) {
    for (const char* k : {"pass", "fail", "expected", "warn", "skip"}) EXPECT_TRUE(j["counts"][k].is_number()) << k;
  }
  return j;
}

}  // namespace

TEST(OutputContract, EverySubcommandSpeaksJson) {
  Work w;
  const std::string data = w / "data";
  write_idx(data, 128, 128);
  auto probe =
      contract(std::string("probe ") + kSmall + " --no-history --format json --out " + (w / "p"), "probe", true);
  EXPECT_EQ(probe["verdict"], "PASS");
  EXPECT_EQ(probe["counts"]["pass"], 2);
  EXPECT_EQ(probe["reports"]["md"], (w / "p") + "/report.md");
  // The same names as results.json: the suite the plan came from, and whether --targets/--workloads replaced
  // its cells; the failing cells under "failures" (compare and check name the first one "first_fail").
  EXPECT_EQ(probe["suite"], "quick");
  EXPECT_EQ(probe["custom"], true);
  EXPECT_TRUE(probe["failures"].is_array() && probe["failures"].empty()) << probe;
  auto train = contract(
      "train autoencoder --seeds 1 --batches 3 --window 1 --replicates 1 --targets 'cpu?threads=2' "
      "--no-history --json --data " +
          data + " --out " + (w / "t"),
      "train", true);
  EXPECT_EQ(train["counts"]["pass"], 5);
  contract("env --format json", "env", false);
  // Another run of the same cells: a copy with its own start (one run twice, or a copy of it whole, is refused by
  // compare, and checked against its own baseline by check).
  std::filesystem::copy(w / "p", w / "p-copy", std::filesystem::copy_options::recursive);
  {
    nlohmann::json j = nlohmann::json::parse(slurp(w / "p-copy" + "/results.json"));
    j["started_at"] = "2020-01-01T00:00:00Z";
    for (auto& o : j["observations"])  // its own times (the same outputs timed alike are one run)
      for (auto& t : o["seconds"]) t = t.get<double>() * 1.5 + 1e-9;
    std::ofstream(w / "p-copy" + "/results.json") << j.dump(1);
  }
  ASSERT_EQ(run_cli("baseline save " + (w / "p")).code, 0);
  auto check = contract("check " + (w / "p-copy") + " --baseline " + (w / "p") +
                            "/baseline.json --no-history --format json",
                        "check", true);
  EXPECT_EQ(check["check"]["schema"], kCheckSchema);
  auto compare = contract("compare " + (w / "p") + " " + (w / "p-copy") + " --format json", "compare", true);
  EXPECT_EQ(compare["comparison"]["summary"]["same"], 2);
  EXPECT_EQ(compare["comparison"]["summary"]["bits_changed"], 0);
  // Two runs with no cell in common compared nothing: exit 2, as check says, not 1 as if a cell changed.
  ASSERT_EQ(run_cli("probe --targets cpu-ref --workloads 'matmul?m=4&n=4&k=4' --repeats 2 --no-history --out " +
                    (w / "q")).code,
            0);
  int none = 0;
  auto apart = contract("compare " + (w / "p") + " " + (w / "q") + " --format json", "compare", true, &none);
  EXPECT_EQ(none, 2);
  EXPECT_NE(apart["error"].get<std::string>().find("no cell and no training run in common"), std::string::npos)
      << apart;
  // report speaks the contract too; --write says which files it renders.
  auto rep = contract("report " + (w / "p") + " --write md --format json", "report", false);
  EXPECT_EQ(rep["reports"]["md"], (w / "p") + "/report.md");
  EXPECT_FALSE(rep["reports"].contains("html"));
  contract("history --history " + (w / "none.db") + " --format json", "history", false);
  contract("qualify --list --format json", "qualify", false);
  contract("analyze " + (w / "t") + " --out " + (w / "a") + " --format json", "analyze", false);
  contract("diverge --targets 'cpu?order=blocked&threads=2' --steps 2 --batch-size 8 --data " + data + " --out " +
               (w / "d") + " --format json",
           "diverge", true);
  contract("export 'reduce?op=sum&n=100' --out " + (w / "x") + " --format json", "export", false);
  contract("baseline save " + (w / "p") + " --out " + (w / "b.json") + " --format json", "baseline", false);
  // import: a framework's outputs (here the oracle's own, copied) of that export.
  auto manifest = nlohmann::json::parse(slurp(fs::path(w / "x") / "manifest.json"));
  const std::string id = manifest["workloads"][0]["id"];
  fs::copy_file(fs::path(w / "x") / (id + ".oracle.npy"), fs::path(w / "x") / (id + ".out.0.npy"));
  contract("import " + (w / "x") + " --name mine --format json", "import", false);
  // A command that could not run says so in the same object: exit 2 and the error.
  int code = 0;
  auto bad = contract("compare " + (w / "nowhere") + " " + (w / "p") + " --format json", "compare", true, &code);
  EXPECT_EQ(code, 2);
  EXPECT_EQ(bad["verdict"], "ERROR");
  EXPECT_NE(bad["error"].get<std::string>().find("cannot open"), std::string::npos) << bad;
}

TEST(OutputContract, QuietLeavesTheVerdictLineAndColourIsForTerminals) {
  Work w;
  CliRun q = run_cli(std::string("probe ") + kSmall + " --no-history --quiet --out " + (w / "p"));
  EXPECT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(q.out, "verdict: PASS  fail=0 warn=0 skip=0  report=" + (w / "p") + "/report.md\n");
  EXPECT_TRUE(q.err.empty()) << "no progress with --quiet: " << q.err;
  // Into a file (no terminal): no escape sequence anywhere.
  CliRun plain = run_cli(std::string("probe ") + kSmall + " --no-history --fresh --out " + (w / "p"));
  EXPECT_EQ(plain.out.find('\033'), std::string::npos);
  // On a terminal (script(1) gives the command a pseudo-terminal): the verdict word is coloured, unless
  // NO_COLOR is set.
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "script(1) is not installed";
  const std::string cmd =
      std::string(DETAUDIT_EXE) + " probe " + kSmall + " --no-history --quiet --fresh --out " + (w / "p");
  const std::string tty = w / "tty.txt";
  ASSERT_EQ(std::system(("script -qec \"" + cmd + "\" /dev/null > " + tty + " 2>&1").c_str()), 0);
  EXPECT_NE(slurp(tty).find("verdict: \033[1;32mPASS\033[0m"), std::string::npos) << slurp(tty);
  ASSERT_EQ(std::system(("NO_COLOR=1 script -qec \"" + cmd + "\" /dev/null > " + tty + " 2>&1").c_str()), 0);
  EXPECT_EQ(slurp(tty).find('\033'), std::string::npos) << slurp(tty);
}

TEST(OutputContract, ACommandLineSlipNamesTheNearestWord) {
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"prob", "unknown subcommand 'prob' (did you mean 'probe'?)"},
           {"histroy", "unknown subcommand 'histroy' (did you mean 'history'?)"},
           {"probe --target cpu-ref", "unknown option '--target' for probe (did you mean '--targets'?)"},
           {"compare a b --formt json", "unknown option '--formt' for compare (did you mean '--format'?)"},
           {"baseline save d --ot x", "unknown option '--ot' for baseline save (did you mean '--out'?)"},
           {"probe --targets 'cpu,' --no-history", "--targets 'cpu,': an empty item at character 5"},
       }) {
    CliRun r = run_cli(c.args);
    EXPECT_EQ(r.code, 2) << c.args;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // Far from every word: no guess.
  CliRun r = run_cli("zzzzzz");
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
}
