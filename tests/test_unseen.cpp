// Nothing passes unseen: a command exits 0 only when it judged something and its answer reached the one
// who asked. Each case here exited 0 before: a check whose every shared cell was skipped here, a qualify
// against a baseline sharing no cell that ran, a probe whose only cells crashed as the CPU's missing
// instruction set predicts, answers written to a closed stdout, a full device or past a file-size limit,
// `qualify --list` of a plan the run refuses, and `--format json` forms that printed nothing on a parse
// error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/results.hpp"
#include "gates/fleet.hpp"
#include "probes/env.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;
using namespace detaudit::cli_test;
namespace fs = std::filesystem;

namespace {

const std::string kW = "reduce?op=sum&n=1000&dist=uniform&seed=1";

// A probe run of one cell: ran (status ok) or skipped with a reason.
Results one_cell(bool ran) {
  Results r;
  r.plan = {{"suite", "quick"}, {"repeats", 2}};
  r.machine = test::machine_json();
  r.started_at = r.finished_at = "2026-12-04T00:00:00Z";
  const std::string t = test::canon_target("cpu?order=sequential&threads=1");
  Observation o = test::ran(kW, t, {test::fingerprint('a'), test::fingerprint('a')});
  if (!ran) {
    o.status = ObsStatus::kSkipped;
    o.reason = "no CUDA device";
    o.fingerprints.clear();
    o.distinct = 0;
    o.verdict = Verdict::kSkip;
  } else {
    o.verdict = Verdict::kPass;
  }
  r.observations.push_back(o);
  return r;
}

fs::path save(const fs::path& root, const std::string& name, const Results& r) {
  fs::create_directories(root / name);
  EXPECT_TRUE(save_results((root / name / "results.json").string(), r).is_ok());
  return root / name;
}

// sh -c, for redirections and limits; the exit code.
int sh(const std::string& cmd) {
  const int st = std::system(("sh -c '" + cmd + "'").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const std::string kExe = DETAUDIT_EXE;

}  // namespace

TEST(Unseen, ACheckWhoseSharedCellsAllSkippedHereJudgedNothing) {
  fs::path d = fresh_dir("unseen-check-skipped");
  const fs::path skipped = save(d, "skipped", one_cell(false));
  ASSERT_EQ(run_cli("baseline save " + skipped.string()).code, 0);
  CliRun r = run_cli("check " + skipped.string() + " --baseline " + (skipped / "baseline.json").string() + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("none of the 1 cells it shares with"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("so nothing was judged"), std::string::npos) << r.err;
  // The same cell run here is judged.
  const fs::path ran = save(d, "ran", one_cell(true));
  r = run_cli("check " + ran.string() + " --baseline " + (skipped / "baseline.json").string() + " --no-history");
  EXPECT_NE(r.code, 2) << r.out << r.err;
  fs::remove_all(d);
}

TEST(Unseen, QualifyAgainstABaselineSharingNoCellThatRanCannotQualify) {
  fs::path d = fresh_dir("unseen-qualify-baseline");
  const fs::path other = save(d, "other", one_cell(true));  // cpu?order=sequential&threads=1 only
  ASSERT_EQ(run_cli("baseline save " + other.string()).code, 0);
  CliRun r = run_cli("qualify --targets cpu-ref --baseline " + (other / "baseline.json").string() + " --no-history --out " +
                     (d / "q").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("nothing judged: of the baseline's 1 probe cells, 0 are in this run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NOT QUALIFIED"), std::string::npos) << r.out;
  fs::remove_all(d);
}

TEST(Unseen, AProbeWhoseOnlyCellsCrashedAsExpectedJudgedNothing) {
  // openblas?core=Bulldozer needs FMA4: on a CPU without it every cell dies of SIGILL, as predicted.
  const nlohmann::json m = machine_fingerprint();
  for (auto& f : m.value("cpu_features", nlohmann::json::array()))
    if (f == "fma4") GTEST_SKIP() << "this CPU has FMA4: the Bulldozer kernels run here";
  fs::path d = fresh_dir("unseen-sigill");
  CliRun r = run_cli("probe --targets 'openblas?core=Bulldozer' --workloads 'matmul?m=64&n=64&k=64' --repeats 2 "
                     "--no-history --out " + (d / "p").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("nothing was judged: none of the 1 cells ran on this machine"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("crashed"), std::string::npos) << r.err;
  // Beside a cell that ran, the expected crash stays EXPECTED and the run exits 0.
  r = run_cli("probe --targets 'openblas?core=Bulldozer,cpu-ref' --workloads 'matmul?m=64&n=64&k=64' --repeats 2 "
              "--no-history --out " + (d / "q").string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("EXPECTED"), std::string::npos) << r.out;
  fs::remove_all(d);
}

TEST(Unseen, AnAnswerStdoutLostIsNotAPass) {
  fs::path d = fresh_dir("unseen-stdout");
  fs::create_directories(d);
  const fs::path ran = save(d, "ran", one_cell(true));
  ASSERT_EQ(run_cli("baseline save " + ran.string()).code, 0);
  const std::string check = kExe + " check " + ran.string() + " --baseline " + (ran / "baseline.json").string() +
                            " --no-history";
  const std::string err = (d / "err").string();
  // The answer reaches stdout: 0.
  EXPECT_EQ(sh(check + " >/dev/null"), 0);
  // stdout closed, a full device, a file-size limit (one 512-byte block) that cuts the JSON: 2, saying why
  // on stderr.
  for (const std::string& cmd :
       {check + " >&- 2>" + err, check + " >/dev/full 2>" + err, check + " --format json >/dev/full 2>" + err,
        "ulimit -f 1; " + check + " --format json >" + (d / "cut.json").string() + " 2>" + err,
        kExe + " env >/dev/full 2>" + err, kExe + " --version >/dev/full 2>" + err,
        kExe + " --help >&- 2>" + err, kExe + " history --history " + (d / "h.db").string() + " >/dev/full 2>" + err}) {
    EXPECT_EQ(sh(cmd), 2) << cmd;
    EXPECT_NE(slurp(err).find("the output could not be written to stdout"), std::string::npos)
        << cmd << ": " << slurp(err);
  }
  // A command whose product is the files it writes keeps its exit code (its results are on disk); with
  // --format json its answer is stdout and the same rule holds.
  const std::string probe = kExe + " probe --targets cpu-ref --workloads '\\''" + kW + "'\\'' --repeats 2 --no-history --out ";
  EXPECT_EQ(sh(probe + (d / "p1").string() + " >/dev/full 2>" + err), 0) << slurp(err);
  EXPECT_TRUE(fs::exists(d / "p1" / "results.json"));
  EXPECT_EQ(sh(probe + (d / "p2").string() + " --format json >/dev/full 2>" + err), 2) << slurp(err);
  fs::remove_all(d);
}

TEST(Unseen, QualifyListRefusesWhatTheRunRefuses) {
  fs::path d = fresh_dir("unseen-qualify-list");
  fs::create_directories(d);
  std::ofstream(d / "garbage.json") << "{\"schema\": \"nonsense\"";
  CliRun r = run_cli("qualify --list --baseline " + (d / "garbage.json").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  r = run_cli("qualify --list --baseline " + (d / "missing.json").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  r = run_cli("qualify --list --targets cuda:0");
  if (r.code != 2) {
    // A machine with a CUDA device runs it: then the list is the plan.
    EXPECT_EQ(r.code, 0) << r.err;
  } else {
    EXPECT_NE(r.err.find("cannot qualify cuda:0"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run_cli("qualify --list").code, 0);
  fs::remove_all(d);
}

TEST(Unseen, AParseErrorUnderFormatJsonIsStillOneObject) {
  for (const std::string& args : {"probe --repeats 0 --format json", "probe --json --repeats 0",
                                  "check --format=json --margin -1 somewhere --baseline b"}) {
    CliRun r = run_cli(args);
    EXPECT_EQ(r.code, 2) << args;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << args << ": stdout is not one JSON object: '" << r.out << "'";
    EXPECT_EQ(j["schema"], "detaudit-cli/1");
    EXPECT_EQ(j["exit_code"], 2);
    EXPECT_FALSE(j["error"].get<std::string>().empty());
    EXPECT_EQ(j["command"], args.substr(0, args.find(' ')));
  }
}

// Inputs that lie are refused, each in one line naming what: a key twice in one object (the last would
// win), bytes after the document (a NUL stopped the parser, and the rest was never read), a field no
// version writes, a negative time, the same cell twice.
TEST(Lies, AFileThatSaysTwoThingsIsRefused) {
  fs::path d = fresh_dir("lies");
  const fs::path good = save(d, "good", one_cell(true));
  ASSERT_EQ(run_cli("baseline save " + good.string()).code, 0);
  const std::string text = slurp(good / "results.json"), base = slurp(good / "baseline.json");
  auto write = [&](const std::string& name, const std::string& body) {
    fs::create_directories(d / name);
    std::ofstream(d / name / "results.json", std::ios::binary) << body;
    return (d / name).string();
  };
  auto edited = [&](const std::string& name, auto&& f) {
    nlohmann::json j = nlohmann::json::parse(text);
    f(j);
    return write(name, j.dump(1));
  };
  // "observations" twice: the second, empty, would have won.
  const std::string obs_twice =
      write("obs-twice", "{\"observations\": [], " + text.substr(text.find('{') + 1));
  const std::string schema_twice =
      write("schema-twice", "{\"schema\": \"detaudit/999\", " + text.substr(text.find('{') + 1));
  const std::string nul = write("nul", text + std::string("\x00\x01", 2));
  const std::string unknown = edited("unknown", [](nlohmann::json& j) { j["observations"][0]["verdcit"] = "PASS"; });
  const std::string negative = edited("negative", [](nlohmann::json& j) { j["observations"][0]["seconds"] = {0.1, -0.5}; });
  const std::string twice = edited("twice", [](nlohmann::json& j) { j["observations"].push_back(j["observations"][0]); });
  struct Case {
    std::string dir, says;
  };
  for (auto& [dir, says] : std::vector<Case>{
           {obs_twice, "the key \"observations\" appears twice in one object"},
           {schema_twice, "the key \"schema\" appears twice in one object"},
           {nul, "a NUL byte: JSON text holds none"},
           {unknown, "observations[0].verdcit is not a field of an observation"},
           {negative, "observations[0].seconds[1] is -0.5: a time is a finite number of seconds, 0 or more"},
           {twice, "observations[1] is the cell"}}) {
    for (const std::string& cmd : {"check " + dir + " --baseline " + (good / "baseline.json").string() + " --no-history",
                                   "report " + dir, "compare " + good.string() + " " + dir}) {
      CliRun r = run_cli(cmd);
      EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << cmd << ": " << r.err;
    }
  }
  // A baseline with bytes after it, or "entries" twice, is refused by check.
  fs::create_directories(d / "b");
  std::ofstream(d / "b" / "nul.json", std::ios::binary) << base << std::string("\x00\x01", 2);
  std::ofstream(d / "b" / "entries.json") << "{\"entries\": [], " << base.substr(base.find('{') + 1);
  for (const char* b : {"nul.json", "entries.json"}) {
    CliRun r = run_cli("check " + good.string() + " --baseline " + (d / "b" / b).string() + " --no-history");
    EXPECT_EQ(r.code, 2) << b << ": " << r.out << r.err;
  }
  fs::remove_all(d);
}

// A number beyond its type is refused, not capped: --init-seed 18446744073709551616 was recorded as
// 18446744073709551615.
TEST(Lies, ANumberBeyondItsTypeIsRefused) {
  CliRun r = run_cli("diverge --init-seed 18446744073709551616");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("must be at most 18446744073709551615 (got 18446744073709551616)"), std::string::npos) << r.err;
}

// Nothing is written through a link: the folders the tool makes below the one the user named (logs,
// .oracle, a fleet's ranks and rank folders) and the history database it appends to are refused when they
// are links, with one line, and the link's target is left as it was.
TEST(Links, NothingIsWrittenThroughALink) {
  fs::path d = fresh_dir("links");
  fs::create_directories(d / "elsewhere");
  const std::string probe = "probe --targets cpu-ref --workloads '" + kW + "' --repeats 2 --no-history --out ";
  for (const char* folder : {"logs", ".oracle"}) {
    const fs::path out = d / (std::string("out") + folder);
    fs::create_directories(out);
    fs::create_directory_symlink(d / "elsewhere", out / folder);
    CliRun r = run_cli(probe + out.string());
    EXPECT_EQ(r.code, 2) << folder << ": " << r.out << r.err;
    EXPECT_NE(r.err.find((out / folder).string() + ": is a symbolic link"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::is_empty(d / "elsewhere")) << "nothing landed in the links' target";
  // A fleet's ranks/ folder a link: the rank's node.json is not written there.
  fs::create_directories(d / "fleet");
  fs::create_directory_symlink(d / "elsewhere", d / "fleet" / "ranks");
  FleetNode n;
  n.rank = 0, n.ranks = 1, n.host = "h", n.folder = fleet_folder(0, "h"), n.state = "finished";
  const Status st = save_fleet_node((d / "fleet").string(), n);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("is a symbolic link"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::is_empty(d / "elsewhere"));
  // The history database a link: a command that records refuses it; one that only reads does not care.
  const fs::path real = d / "real.db";
  const std::string probe_hist = "probe --targets cpu-ref --workloads '" + kW + "' --repeats 2 --out ";
  ASSERT_EQ(run_cli(probe_hist + (d / "p1").string() + " --history " + real.string()).code, 0);
  fs::create_symlink(real, d / "link.db");
  const auto before = fs::file_size(real);
  CliRun r = run_cli(probe_hist + (d / "p2").string() + " --history " + (d / "link.db").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("is a symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(real), before);
  // fleet report of a directory that holds another run's results: its reports are not replaced.
  const fs::path run = save(d, "run", one_cell(true));
  fs::create_directories(run / "ranks");
  std::ofstream(run / "report.md") << "# detaudit probe report\n";
  r = run_cli("fleet report " + run.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("holds a results.json of another run"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(run / "report.md"), "# detaudit probe report\n");
  fs::remove_all(d);
}

// Sizes read from a file are checked before they are allocated: a sparse 6 GiB results.json or node.json
// ended in std::bad_alloc ("internal error").
TEST(Sizes, AFileLargerThanTheMemoryCanHoldIsOneLine) {
  fs::path d = fresh_dir("sizes");
  fs::create_directories(d / "run");
  fs::create_directories(d / "fleet" / "ranks" / "0-h");
  for (const fs::path& f : {d / "run" / "results.json", d / "fleet" / "ranks" / "0-h" / "node.json"}) {
    std::ofstream(f) << "{";
    fs::resize_file(f, uintmax_t(6) << 30);  // sparse: no disk used
  }
  for (const std::string& cmd : {"report " + (d / "run").string(), "fleet report " + (d / "fleet").string()}) {
    CliRun r = run_cli(cmd);
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("6442450944 bytes, more than"), std::string::npos) << cmd << ": " << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
  fs::remove_all(d);
}
