// Nothing passes unseen: a command exits 0 only when it judged something and its answer reached the one
// who asked. Each case here exited 0 before: a check whose every shared cell was skipped here, a qualify
// against a baseline sharing no cell that ran, a probe whose only cells crashed as the CPU's missing
// instruction set predicts, answers written to a closed stdout, a full device or past a file-size limit,
// `qualify --list` of a plan the run refuses, and `--format json` forms that printed nothing on a parse
// error.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/phases.hpp"
#include "contract/base64.hpp"
#include "contract/command_text.hpp"
#include "contract/results.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_measure.hpp"
#include "gates/baseline.hpp"
#include "models/png.hpp"
#include "gates/fleet.hpp"
#include "store/history.hpp"
#include "gates/verdict.hpp"
#include "probes/env.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"
#include "tests/training_helpers.hpp"

using namespace detaudit;
using namespace detaudit::cli_test;
namespace fs = std::filesystem;

namespace {

const std::string kW = "reduce?op=sum&n=1000&dist=uniform&seed=1";

// A probe run of one cell: ran (status ok) or skipped with a reason.
// `forced_isa`: the cell's target forces AVX-512, which the machine lacks, so that a skip of it is one the target
// makes here (a cpu target that needs nothing skips no cell).
Results one_cell(bool ran, bool forced_isa = false) {
  Results r;
  r.plan = {{"suite", "quick"}, {"repeats", 2}};
  r.command = "detaudit probe --suite quick --repeats 2";
  r.machine = test::machine_json();
  r.started_at = r.finished_at = "2026-12-04T00:00:00Z";
  const std::string t = test::canon_target(forced_isa ? "cpu?order=sequential&threads=1&isa=avx512" : "cpu?order=sequential&threads=1");
  Observation o = test::ran(kW, t, {test::fingerprint('a'), test::fingerprint('a')});
  if (!ran) {
    o.status = ObsStatus::kSkipped;
    o.reason = "cpu: isa=avx512 forced but this CPU lacks it";
    o.fingerprints.clear();
    o.distinct = 0;
    o.verdict = Verdict::kSkip;
  } else {
    o.verdict = Verdict::kPass;
  }
  r.observations.push_back(o);
  return r;
}

// A baseline's first entry recorded as skipped for `reason` (what such an entry holds: no output, no error, no time).
void skip_first_entry(nlohmann::json& j, const char* reason) {
  auto& e = j["entries"][0];
  e["status"] = "skipped", e["verdict"] = "SKIP";
  e["reason"] = e["verdict_reason"] = reason;
  e["fingerprints"] = nlohmann::json::array(), e["distinct"] = 0;
  e["err_ratio"] = e["median_seconds"] = nullptr;
}

fs::path save(const fs::path& root, const std::string& name, const Results& r) {
  fs::create_directories(root / name);
  EXPECT_TRUE(save_results((root / name / "results.json").string(), r).is_ok());
  return root / name;
}

// Each edit of a results file's text, written beside `good`, is refused by report, baseline save and compare:
// exit 2, one line, naming what the case says.
struct ResultsLie {
  std::string name, says;
  std::function<void(nlohmann::json&)> lie;
};
void expect_every_reader_refuses(const fs::path& d, const fs::path& good, const std::string& text,
                                 const std::vector<ResultsLie>& cases) {
  for (const ResultsLie& c : cases) {
    nlohmann::json j = nlohmann::json::parse(text);
    c.lie(j);
    fs::create_directories(d / c.name);
    std::ofstream(d / c.name / "results.json") << j.dump(1);
    for (const std::string& cmd : {"report " + (d / c.name).string(), "baseline save " + (d / c.name).string(),
                                   "compare " + good.string() + " " + (d / c.name).string()}) {
      CliRun r = run_cli(cmd);
      EXPECT_EQ(r.code, 2) << c.name << ": " << cmd << "\n" << r.out << r.err;
      EXPECT_NE(r.err.find(c.says), std::string::npos) << c.name << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
}

// sh -c, for redirections and limits; the exit code.
int sh(const std::string& cmd) {
  const int st = std::system(("sh -c '" + cmd + "'").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const std::string kExe = DETAUDIT_EXE;

// Another program (SQLite) running `sql` on the history `db`.
void edit_history(const std::string& db, const char* sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(h, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(h);
  sqlite3_close(h);
}

}  // namespace

// The same command run again an hour later, to the same results: a run of its own (the run a baseline was saved from,
// checked against it, would compare its cells with themselves and judge nothing).
Results an_hour_later(Results r) {
  r.started_at = r.finished_at = "2026-12-04T01:00:00Z";
  return r;
}

TEST(Unseen, ACheckWhoseSharedCellsAllSkippedHereJudgedNothing) {
  fs::path d = fresh_dir("unseen-check-skipped");
  const fs::path skipped = save(d, "skipped", one_cell(false, true));
  const fs::path ran = save(d, "ran", one_cell(true, true));
  // A baseline of a run in which nothing ran holds no bits: refused when saved.
  CliRun none = run_cli("baseline save " + skipped.string());
  EXPECT_EQ(none.code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("none of its 1 cells ran"), std::string::npos) << none.err;
  EXPECT_FALSE(fs::exists(skipped / "baseline.json"));
  // The cell ran where the baseline was saved, and was skipped here.
  ASSERT_EQ(run_cli("baseline save " + ran.string()).code, 0);
  CliRun r = run_cli("check " + skipped.string() + " --baseline " + (ran / "baseline.json").string() + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("none of the 1 cells it shares with"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("so nothing was judged"), std::string::npos) << r.err;
  // The same cell run here is judged.
  const fs::path again = save(d, "again", an_hour_later(one_cell(true, true)));
  r = run_cli("check " + again.string() + " --baseline " + (ran / "baseline.json").string() + " --no-history");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  fs::remove_all(d);
}

// One finished training design of one (d) run on cpu?threads=2, three batches, with the phases its curve gives.
Results one_training_design() {
  Results train;
  train.machine = test::machine_json();
  train.started_at = train.finished_at = "2026-12-04T00:00:00Z";
  const std::string cpu = test::canon_target("cpu?threads=2");
  train.plan = {{"kind", "train"},
                {"runs", 1},
                {"data_fingerprint", test::fingerprint('d')},
                {"design",
                 {{"model", "autoencoder"}, {"design", "sony2021"}, {"targets", {cpu}}, {"seeds", 1}, {"replicates", 1},
                  {"batches", 3}, {"window", 1}, {"conditions", "d"}, {"init_seed_base", 1000}}}};
  const std::vector<double> curve = {0.5, 0.4, 0.3};
  const PhaseResult ph = detect_phases(curve);
  train.training.push_back(training_run({{"key", "d|" + cpu + "|1000|0"}, {"condition", "d"}, {"target", cpu},
                                         {"seed", 1000}, {"replicate", 0}, {"status", "ok"}, {"model", "autoencoder"},
                                         {"design", "sony2021"}, {"batches", 3}, {"window", 1}, {"final_loss", 0.3},
                                         {"curve", curve}, {"weights_fingerprint", test::fingerprint('e')},
                                         {"phases",
                                          {{"label", ph.label},
                                           {"segments", ph.segments.size()},
                                           {"escape_step", nullptr},
                                           {"censored", ph.censored},
                                           {"margin", nullptr}}}}));
  return train;
}

TEST(Unseen, QualifyAgainstABaselineSharingNoCellThatRanCannotQualify) {
  fs::path d = fresh_dir("unseen-qualify-baseline");
  const fs::path other = save(d, "other", one_cell(true));  // cpu?order=sequential&threads=1 only
  ASSERT_EQ(run_cli("baseline save " + other.string()).code, 0);
  CliRun r = run_cli("qualify --targets cpu-ref --baseline " + (other / "baseline.json").string() + " --no-history --out " +
                     (d / "q").string());
  // Refused before the probe runs (it could only end in "nothing judged"), and --list says the same.
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("the required baseline check, which compares the probe's cells, could judge nothing"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(d / "q" / "probe" / "results.json")) << "nothing ran";
  CliRun list = run_cli("qualify --list --targets cpu-ref --baseline " + (other / "baseline.json").string());
  EXPECT_EQ(list.code, 2) << list.out << list.err;
  // A training design's baseline at level 2: the baseline check compares the probe's cells, so its training cells
  // judge nothing there either; refused before the probe and the training design run.
  const fs::path trained = save(d, "trained", one_training_design());
  ASSERT_EQ(run_cli("baseline save " + trained.string()).code, 0);
  r = run_cli("qualify --level 2 --targets cpu-ref --baseline " + (trained / "baseline.json").string() +
              " --no-history --out " + (d / "q2").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("and 1 training cells, which it does not compare"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "q2" / "probe" / "results.json")) << "nothing ran";
  fs::remove_all(d);
}

// A baseline checked against the run it was saved from (that folder, a copy of it, or the folder resumed by qualify)
// compares each cell with itself: nothing is judged, as `compare` of a run with itself judges nothing.
TEST(Unseen, ARunCheckedAgainstItsOwnBaselineJudgedNothing) {
  fs::path d = fresh_dir("unseen-own-baseline");
  const std::string q = (d / "q").string();
  ASSERT_EQ(run_cli("qualify --targets cpu-ref --no-history --out " + q).code, 0);
  const std::string base = (d / "base.json").string();
  ASSERT_EQ(run_cli("baseline save " + q + "/probe --out " + base).code, 0);
  CliRun r = run_cli("check " + q + "/probe --baseline " + base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("it is the run the baseline was saved from (the same command, started at"), std::string::npos)
      << r.err;
  fs::copy(q + "/probe", d / "copy", fs::copy_options::recursive);
  r = run_cli("check " + (d / "copy").string() + " --baseline " + base + " --no-history --allow-unjudged");
  EXPECT_EQ(r.code, 2) << r.out;
  // ... whatever its header says: its start moved back, its cells are still timed alike to the nanosecond.
  {
    nlohmann::json j = nlohmann::json::parse(slurp(d / "copy" / "results.json"));
    j["started_at"] = "2020-01-01T00:00:00Z";
    std::ofstream(d / "copy" / "results.json") << j.dump(1) << "\n";
  }
  r = run_cli("check " + (d / "copy").string() + " --baseline " + base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("(its cells timed alike to the nanosecond;"), std::string::npos) << r.err;
  // qualify resumes its probe folder: the baseline row judged nothing, and a required check that judged nothing does
  // not qualify.
  r = run_cli("qualify --targets cpu-ref --no-history --baseline " + base + " --out " + q);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("nothing judged: this run's probe results are the baseline's source"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("QUALIFIED\n"), std::string::npos) << r.out;
  // Another run of the same command is judged against it.
  r = run_cli("qualify --targets cpu-ref --no-history --baseline " + base + " --out " + (d / "q2").string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
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
  const fs::path ran = save(d, "ran", one_cell(true)), again = save(d, "again", an_hour_later(one_cell(true)));
  ASSERT_EQ(run_cli("baseline save " + ran.string()).code, 0);
  const std::string check = kExe + " check " + again.string() + " --baseline " + (ran / "baseline.json").string() +
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
        kExe + " --help >&- 2>" + err, kExe + " --version >&- 2>" + err, kExe + " env >&- 2>" + err,
        kExe + " history --history " + (d / "h.db").string() + " >/dev/full 2>" + err}) {
    EXPECT_EQ(sh(cmd), 2) << cmd;
    EXPECT_NE(slurp(err).find("the output could not be written to stdout"), std::string::npos)
        << cmd << ": " << slurp(err);
  }
  // A command told to print nothing (--quiet) lost nothing when stdout is closed or full: its exit code stands.
  for (const std::string& cmd : {kExe + " env --quiet >&- 2>" + err, kExe + " env --quiet >/dev/full 2>" + err,
                                 kExe + " history --quiet --history " + (d / "h.db").string() + " >&- 2>" + err})
    EXPECT_EQ(sh(cmd), 0) << cmd << ": " << slurp(err);
  // A command whose product is the files it writes keeps its exit code (its results are on disk); with
  // --format json its answer is stdout and the same rule holds.
  const std::string probe = kExe + " probe --targets cpu-ref --workloads '\\''" + kW + "'\\'' --repeats 2 --no-history --out ";
  EXPECT_EQ(sh(probe + (d / "p1").string() + " >/dev/full 2>" + err), 0) << slurp(err);
  EXPECT_TRUE(fs::exists(d / "p1" / "results.json"));
  EXPECT_EQ(sh(probe + (d / "p2").string() + " --format json >/dev/full 2>" + err), 2) << slurp(err);
  // --format md: the command's markdown is its answer too. report prints the markdown report it wrote, a
  // command without one its text as a fenced block; lost, either is exit 2.
  CliRun md = run_cli("report " + (d / "p1").string() + " --format md");
  EXPECT_EQ(md.code, 0) << md.err;
  EXPECT_EQ(md.out, slurp(d / "p1" / "report.md"));
  md = run_cli("baseline save " + (d / "p1").string() + " --format md");
  EXPECT_EQ(md.code, 0) << md.err;
  EXPECT_EQ(md.out.rfind("```text\nbaseline: 1 cells", 0), 0u) << md.out;
  EXPECT_EQ(sh(kExe + " report " + (d / "p1").string() + " --format md >/dev/full 2>" + err), 2) << slurp(err);
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
  for (const std::string args : {"probe --repeats 0 --format json", "probe --json --repeats 0",
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
           {negative, "observations[0].seconds[1] is -0.5: a time is 0 or a number of seconds from a nanosecond"},
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

// An integer option takes plain decimal digits, as the recorded command is read back: "+2", " 2", "0x10" (16) and
// "010" (octal 8 to CLI11) were taken, the probe ran, and its own results were then refused by every reader.
TEST(Lies, AnIntegerOptionTakesPlainDecimalDigits) {
  fs::path d = fresh_dir("plain-integers");
  for (const char* v : {"+2", "' 2'", "0x10", "010"}) {
    const fs::path out = d / "p";
    CliRun r = run_cli(std::string("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --no-history --repeats ") + v +
                       " --out " + out.string());
    EXPECT_EQ(r.code, 2) << v << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("must be a whole number in decimal digits"), std::string::npos) << v << ": " << r.err;
    EXPECT_FALSE(fs::exists(out)) << v << ": nothing written";
  }
  // The same rule on every subcommand's integers, a negative number where one is allowed kept.
  CliRun r = run_cli("train autoencoder --seeds +1 --no-history --out " + (d / "t").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--seeds: must be a whole number in decimal digits (got '+1')"), std::string::npos) << r.err;
  r = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --no-history --repeats 2 --out " +
              (d / "ok").string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  fs::remove_all(d);
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
  n.rank = 0, n.ranks = 1, n.host = "h", n.folder = fleet_folder(0, "h"), n.state = NodeState::kFinished;
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
  // A history named file:... is a file of that name, never an SQLite URI that reaches the link's target.
  fs::create_directories(d / "uri");
  fs::create_symlink(real, d / "uri" / "h.db");
  // (run inside d: the relative name "file:/..." makes its folders there)
  const std::string uri_cmd = "cd " + d.string() + " && " + std::string(DETAUDIT_EXE) + " probe --targets cpu-ref " +
                              "--workloads '" + kW + "' --repeats 2 --out " + (d / "p3").string() + " --history file:" +
                              (d / "uri" / "h.db").string() + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(uri_cmd.c_str()), 0);
  EXPECT_EQ(fs::file_size(real), before);
  EXPECT_TRUE(fs::exists(d / ("file:" + (d / "uri" / "h.db").string()))) << "the history is the file of that name";
  // Hard links: a worker's log or the lock sharing its file with another name is refused, and nothing is
  // written into the other name.
  std::ofstream(d / "victim.txt") << "VICTIM";
  for (const char* file : {".lock", "logs/cpu-ref.log"}) {
    const fs::path out = d / (std::string("hard") + (file[0] == '.' ? "lock" : "log"));
    fs::create_directories(out / "logs");
    fs::create_hard_link(d / "victim.txt", out / file);
    r = run_cli(probe + out.string());
    EXPECT_EQ(r.code, 2) << file << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("has 2 names (a hard link)"), std::string::npos) << file << ": " << r.err;
    fs::remove(out / file);
  }
  EXPECT_EQ(slurp(d / "victim.txt"), "VICTIM");
  // SQLite's shared-memory file beside the history, a hard link: refused before SQLite writes into it, and so
  // is the history itself with another name.
  fs::create_directories(d / "shm");
  fs::copy_file(real, d / "shm" / "h.db");
  fs::create_hard_link(d / "victim.txt", d / "shm" / "h.db-shm");
  r = run_cli(probe_hist + (d / "p4").string() + " --history " + (d / "shm" / "h.db").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("h.db-shm is a hard link"), std::string::npos) << r.err;
  fs::remove(d / "shm" / "h.db-shm");
  fs::create_hard_link(real, d / "shm" / "second.db");
  r = run_cli(probe_hist + (d / "p5").string() + " --history " + (d / "shm" / "second.db").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("has 2 names (a hard link)"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d / "victim.txt"), "VICTIM");
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

// ---- the second sweep: other files, fields and commands ----------------------------------------------------

// A verdict stored in a file is a record, not evidence: a cell promised deterministic with two outputs, its
// file saying PASS, FAILs the check and the report (it passed both before).
TEST(Lies, AStoredVerdictIsNotEvidence) {
  fs::path d = fresh_dir("lies-verdict");
  const fs::path good = save(d, "good", one_cell(true));
  ASSERT_EQ(run_cli("baseline save " + good.string()).code, 0);
  Results r = one_cell(true);
  r.observations[0].fingerprints = {test::fingerprint('a'), test::fingerprint('b')};
  r.observations[0].distinct = 2;
  r.observations[0].verdict = Verdict::kPass;
  r.observations[0].verdict_reason = "written by hand";
  const fs::path lying = save(d, "lying", r);
  CliRun check = run_cli("check " + lying.string() + " --baseline " + (good / "baseline.json").string() + " --no-history");
  EXPECT_EQ(check.code, 1) << check.out << check.err;
  CliRun report = run_cli("report " + lying.string());
  EXPECT_EQ(report.code, 0) << report.err;
  const std::string md = slurp(lying / "report.md");
  EXPECT_NE(md.find("FAIL"), std::string::npos);
  EXPECT_EQ(md.find("written by hand"), std::string::npos) << "the report shows this detaudit's verdict";
  // A baseline saved from it records the verdict its data gives.
  ASSERT_EQ(run_cli("baseline save " + lying.string()).code, 0);
  EXPECT_NE(slurp(lying / "baseline.json").find("\"verdict\": \"FAIL\""), std::string::npos);
  fs::remove_all(d);
}

// Counts, times and fingerprints that contradict what the file lists are refused when it is read, by every
// command, in one line naming the field.
TEST(Lies, ContradictionsInsideAResultsFileAreRefused) {
  fs::path d = fresh_dir("lies-counts");
  Results base = one_cell(true);
  base.plan = nlohmann::json::object();  // probe cells and a training run in one file: a plan holds one kind
  base.training = {training_run({{"key", "d|cpu|1000|0"}, {"condition", "d"}, {"target", "cpu"}, {"seed", 1000},
                                 {"replicate", 0}, {"status", "ok"}, {"final_loss", 0.5}, {"curve", {0.5}},
                                 {"weights_fingerprint", test::fingerprint('e')}, {"seconds", 1.0}, {"steps_per_second", 1.0}})};
  const fs::path good = save(d, "good", base);
  ASSERT_EQ(run_cli("report " + good.string()).code, 0);
  const std::string text = slurp(good / "results.json");
  const std::vector<ResultsLie> cases = {
      {"repeats", "status ok with 2 outputs for 5 repeats", [](nlohmann::json& j) { j["observations"][0]["repeats"] = 5; }},
      {"no-outputs", "status ok with 0 outputs for 2 repeats",
       [](nlohmann::json& j) {
         j["observations"][0]["fingerprints"] = nlohmann::json::array();
         j["observations"][0]["distinct"] = 0;
       }},
      {"seconds", "observations[0].seconds: 1 times for 2 repeats",
       [](nlohmann::json& j) { j["observations"][0]["seconds"] = {0.1}; }},
      {"skipped-outputs", "status skipped yet 2 outputs",
       [](nlohmann::json& j) { j["observations"][0]["status"] = "skipped"; }},
      {"rows", "3 rows differing of 2 checked",
       [](nlohmann::json& j) { j["observations"][0]["batch_invariance"] = {{"rows_checked", 2}, {"rows_differing", 3}}; }},
      {"weights", "training[0].weights_fingerprint must be 32 hex digits",
       [](nlohmann::json& j) { j["training"][0]["weights_fingerprint"] = "abc"; }},
      {"train-seconds", "training[0].seconds is -1", [](nlohmann::json& j) { j["training"][0]["seconds"] = -1.0; }},
      {"curve", "training[0].curve is empty, but the run finished",
       [](nlohmann::json& j) {
         j["training"][0]["curve"] = nlohmann::json::array();
         j["training"][0].erase("seconds"), j["training"][0].erase("steps_per_second");
         j["training"][0].erase("final_loss");
         j["training"][0]["final_loss"] = 0.5;
       }},
      {"rel-err", "max_rel_err -1",
       [](nlohmann::json& j) {
         j["observations"][0]["oracle"] = {{"max_ulp", 0}, {"max_rel_err", -1.0}, {"mismatched", 0}};
       }},
      {"train-timeout", "training[0].timeout_s is -1", [](nlohmann::json& j) { j["training"][0]["timeout_s"] = -1.0; }},
      {"train-signal", "training[0].signal is SIGSEGV, but the run finished",
       [](nlohmann::json& j) { j["training"][0]["signal"] = "SIGSEGV"; }},
      {"timeout", "plan.timeout_s is -5", [](nlohmann::json& j) { j["plan"]["timeout_s"] = -5; }},
      {"timeout-huge", "plan.timeout_s is 1e+300", [](nlohmann::json& j) { j["plan"]["timeout_s"] = 1e300; }},
      {"time", "started_at 'yesterday' is not a time", [](nlohmann::json& j) { j["started_at"] = "yesterday"; }},
      {"backwards", "is before started_at", [](nlohmann::json& j) { j["finished_at"] = "2020-01-01T00:00:00Z"; }},
      {"future", "2099-01-01T00:00:00Z is in the future", [](nlohmann::json& j) { j["finished_at"] = "2099-01-01T00:00:00Z"; }},
      // The machine block against itself: a model of another maker than the vendor (a lie that moves every key).
      // A padded name is the same CPU under another key.
      {"model-blank", "machine.cpu_model \"Intel(R) Xeon(R) Processor \" begins or ends with a blank",
       [](nlohmann::json& j) { j["machine"]["cpu_model"] = "Intel(R) Xeon(R) Processor "; }},
      {"vendor", "machine.cpu_model \"AMD EPYC 9654\" is not a CPU of machine.cpu_vendor GenuineIntel",
       [](nlohmann::json& j) {
         j["machine"]["cpu_vendor"] = "GenuineIntel";
         j["machine"]["cpu_model"] = "AMD EPYC 9654";
       }},
  };
  expect_every_reader_refuses(d, good, text, cases);
  fs::remove_all(d);
}

// A library's cell that ran was run with the library the machine block records: a file without the library's version
// (which its target's key holds) is refused, as is a machine whose OpenBLAS core is not the one its build names.
TEST(Lies, ALibraryCellWithoutItsLibraryIsRefused) {
  fs::path d = fresh_dir("lies-library");
  Results base = one_cell(true);
  const std::string t = test::canon_target("openblas?core=Haswell&threads=1");
  base.observations = {test::ran(kW, t, {test::fingerprint('a'), test::fingerprint('a')})};
  base.observations[0].verdict = Verdict::kPass;
  base.plan["targets"] = {t};
  base.plan["workloads"] = {kW};
  base.machine["libraries"]["openblas"] = "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64";
  const fs::path good = save(d, "good", base);
  ASSERT_EQ(run_cli("report " + good.string()).code, 0) << run_cli("report " + good.string()).err;
  const std::string text = slurp(good / "results.json");
  const std::vector<ResultsLie> cases = {
      {"no-openblas", "observations[0] ran on " + t + ", but machine.libraries has no openblas",
       [](nlohmann::json& j) { j["machine"]["libraries"].erase("openblas"); }},
      {"core", "the machine's openblas_core \"Zen\" is not the core its OpenBLAS build names",
       [](nlohmann::json& j) { j["machine"]["libraries"]["openblas_core"] = "Zen"; }},
  };
  expect_every_reader_refuses(d, good, text, cases);
  fs::remove_all(d);
}

// The oracle's bits are the oracle backend's output: a cell whose oracle distance says it matched the oracle, while its
// output is not cpu-ref's, or one with cpu-ref's output that says it mismatched, is refused (a FAIL on the error bound
// could otherwise be edited away).
TEST(Lies, AnOracleDistanceThatIsNotTheOraclesBitsIsRefused) {
  fs::path d = fresh_dir("lies-oracle");
  const fs::path good = d / "good";
  const CliRun p = run_cli("probe --targets 'cpu-ref,cpu?order=sequential&threads=1' --workloads "
                           "'reduce?op=sum&n=100000' --repeats 2 --no-history --quiet --out " + good.string());
  ASSERT_EQ(p.code, 0) << p.err;
  const std::string text = slurp(good / "results.json");
  const nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_EQ(j["observations"].size(), 2u);
  const size_t ref = j["observations"][0]["target"].get<std::string>().starts_with("cpu-ref") ? 0 : 1, cpu = 1 - ref;
  // (a float sum of 100000 uniform values in order is not the double-accumulated sum rounded once)
  ASSERT_NE(j["observations"][cpu]["fingerprints"][0], j["observations"][ref]["fingerprints"][0]);
  ASSERT_GT(j["observations"][cpu]["oracle"]["mismatched"].get<int>(), 0);
  const std::vector<ResultsLie> cases = {
      {"perfect", "oracle.mismatched is 0, but its output is not the oracle's bits",
       [cpu](nlohmann::json& j) {
         auto& o = j["observations"][cpu]["oracle"];
         o["mismatched"] = 0, o["max_ulp"] = 0, o["max_rel_err"] = 0.0, o["err_ratio"] = 0.0, o["agree_bits"] = 24;
         nlohmann::json hist = nlohmann::json::array();
         for (size_t b = 0; b < o["ratio_hist"].size(); ++b) hist.push_back(b == 0 ? 1 : 0);
         o["ratio_hist"] = hist;
       }},
      {"oracle-bits", "but its output is the oracle's bits",
       [cpu, ref](nlohmann::json& j) {
         j["observations"][cpu]["fingerprints"] = j["observations"][ref]["fingerprints"];
         j["observations"][cpu]["warmup_fingerprint"] = j["observations"][ref]["warmup_fingerprint"];
       }},
  };
  expect_every_reader_refuses(d, good, text, cases);
  fs::remove_all(d);
}

// A one-element output's distances hang together: its bits of agreement are -log2 of its relative error, and every
// cell of the workload has the same max_rel_err / err_ratio (the bound over the oracle's magnitude), so an error
// ratio edited below the bound (a FAIL made a PASS) is refused. Two targets that sum in one order give the same
// mismatch; a third, the oracle, none.
TEST(Lies, AnErrorRatioEditedBelowItsBoundIsRefused) {
  fs::path d = fresh_dir("lies-ratio");
  const fs::path good = d / "good";
  const CliRun p = run_cli("probe --targets 'cpu-ref,cpu?order=sequential&threads=1,cpu?order=sequential&threads=1&"
                           "isa=scalar' --workloads 'reduce?op=sum&n=100000' --repeats 2 --no-history --quiet --out " +
                           good.string());
  ASSERT_EQ(p.code, 0) << p.err;
  const std::string text = slurp(good / "results.json");
  const nlohmann::json j = nlohmann::json::parse(text);
  std::vector<size_t> cpu;
  for (size_t i = 0; i < j["observations"].size(); ++i)
    if (!j["observations"][i]["target"].get<std::string>().starts_with("cpu-ref")) cpu.push_back(i);
  ASSERT_EQ(cpu.size(), 2u);
  ASSERT_EQ(j["observations"][cpu[0]]["fingerprints"], j["observations"][cpu[1]]["fingerprints"]) << "one order, one sum";
  for (size_t i : cpu) {
    ASSERT_EQ(j["observations"][i]["oracle"]["mismatched"], 1) << "a float sum in order is not the sum rounded once";
    ASSERT_GT(j["observations"][i]["oracle"]["err_ratio"].get<double>(), 0);
  }
  const double bits = j["observations"][cpu[0]]["oracle"]["agree_bits"].get<double>();
  ASSERT_GT(bits, 2);
  ASSERT_LT(bits, 22);
  const size_t a = cpu[0];
  const std::vector<ResultsLie> cases = {
      {"ratio", "max_rel_err / err_ratio is",
       [a](nlohmann::json& j) { j["observations"][a]["oracle"]["err_ratio"] = j["observations"][a]["oracle"]["err_ratio"].get<double>() * 0.999; }},
      {"bits", "agree_bits is", [a, bits](nlohmann::json& j) { j["observations"][a]["oracle"]["agree_bits"] = bits + 1.5; }},
      // The two targets that sum in one order gave the same bits: the same distance, to the ULP.
      {"ulp", "the same bits against one oracle have one distance",
       [a](nlohmann::json& j) { j["observations"][a]["oracle"]["max_ulp"] = j["observations"][a]["oracle"]["max_ulp"].get<int>() + 1; }},
  };
  expect_every_reader_refuses(d, good, text, cases);
  fs::remove_all(d);
}

// A noise trace is what its design measures: microbatches of the size its batch gives, one training set for every
// run, and no trace where the design measures none; a merged analysis's runs were made on their sources' machines,
// and no directory is merged twice (two real tiny PredNet designs with --noise-scale, and their merge).
// training[0]'s frame strip, its PNG bytes edited.
void edit_png(nlohmann::json& j, const std::function<void(std::vector<uint8_t>&)>& edit) {
  std::vector<uint8_t> png;
  ASSERT_TRUE(base64_decode(j["training"][0]["frames_png"].get<std::string>(), &png));
  ASSERT_EQ(png_problem(png, 4 * (32 + 2) - 2, 2 * 32 + 2, 1), "") << "the tiny configuration's strip, as written";
  edit(png);
  j["training"][0]["frames_png"] = base64_encode(png);
}

TEST(Lies, NoiseTracesAndMergedSourcesThatContradictTheirRunsAreRefused) {
  fs::path d = fresh_dir("lies-noise");
  const std::string design = "train prednet --prednet-config tiny --seeds 1 --batches 4 --window 2 --replicates 1 "
                             "--targets 'cpu?threads=2' --noise-scale --noise-every 1 --no-history --quiet --out ";
  ASSERT_EQ(run_cli(design + (d / "p1").string()).code, 0);
  ASSERT_EQ(run_cli(design + (d / "p2").string()).code, 0);
  const fs::path good = d / "p1";
  const std::string text = slurp(good / "results.json");
  const nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_EQ(j["training"][0]["noise"]["b_big"], 4);
  ASSERT_EQ(j["training"][0]["noise"]["b_small"], 2);
  ASSERT_EQ(j["plan"]["data_examples"], 500) << "the tiny configuration's 500 sprite sequences";
  const std::vector<ResultsLie> cases = {
      {"b-small", "noise.b_small is 1, but a batch of 4 is measured in microbatches of 2",
       [](nlohmann::json& j) { j["training"][0]["noise"]["b_small"] = 1; }},
      {"examples", "training[1].noise.examples is 100000, but the design's data has 500 examples",
       [](nlohmann::json& j) { j["training"][1]["noise"]["examples"] = 100000; }},
      {"examples-all", "training[0].noise.examples is 100000, but the design's data has 500 examples",
       [](nlohmann::json& j) {
         for (auto& run : j["training"]) run["noise"]["examples"] = 100000;
       }},
      // Results of older versions do not record the data's size: there the runs are held against each other.
      {"examples-older", "but training[0]'s is",
       [](nlohmann::json& j) {
         j["plan"].erase("data_examples");
         j["training"][1]["noise"]["examples"] = 100000;
       }},
      // The built-in sprites always train on 500 sequences: the plan and every trace edited alike are refused, and
      // so are the traces alone where the plan does not say (results of older versions).
      {"examples-sprites", "plan.data_examples is 100000, but PredNet's built-in moving sprites train on 500 examples",
       [](nlohmann::json& j) {
         j["plan"]["data_examples"] = 100000;
         for (auto& run : j["training"]) run["noise"]["examples"] = 100000;
       }},
      {"examples-sprites-older", "training[0].noise.examples is 100000, but PredNet's built-in moving sprites train on 500",
       [](nlohmann::json& j) {
         j["plan"].erase("data_examples");
         for (auto& run : j["training"]) run["noise"]["examples"] = 100000;
       }},
      // The next-frame check is on the data's held-out frames: one count and one copy-last error for every run,
      // and on the built-in sprites their 40 sequences; the frame strip is a PNG.
      {"copy-last", "training[1].prediction.copy_last_mse is 0.5, but copying the last frame of PredNet's built-in "
                    "sprites (tiny) errs by 0.015891888309406233",
       [](nlohmann::json& j) { j["training"][1]["prediction"]["copy_last_mse"] = 0.5; }},
      {"held-out", "training[0].prediction.sequences is 41, but the built-in sprites' check holds 40 held-out sequences",
       [](nlohmann::json& j) {
         for (auto& run : j["training"]) run["prediction"]["sequences"] = 41;
       }},
      {"frames-png", "training[0].frames_png is no PNG image", [](nlohmann::json& j) { j["training"][0]["frames_png"] = "AAAA"; }},
      {"frames-png-empty", "training[0].frames_png is no PNG image", [](nlohmann::json& j) { j["training"][0]["frames_png"] = ""; }},
      // The strip the worker writes, in its one encoding: cut, appended to, flipped, or of another size.
      {"frames-png-cut", "training[0].frames_png is not the frame strip a run writes: its chunks are not IHDR, IDAT and",
       [](nlohmann::json& j) { edit_png(j, [](std::vector<uint8_t>& png) { png.resize(png.size() - 12); }); }},
      {"frames-png-appended", "frames_png is not the frame strip a run writes: 2 bytes follow its IEND chunk",
       [](nlohmann::json& j) { edit_png(j, [](std::vector<uint8_t>& png) { png.insert(png.end(), {0, 0}); }); }},
      {"frames-png-flipped", "frames_png is not the frame strip a run writes: chunk IDAT's CRC is not that of its bytes",
       [](nlohmann::json& j) { edit_png(j, [](std::vector<uint8_t>& png) { png[8 + 25 + 10] ^= 1; }); }},
      {"frames-png-size", "frames_png is not the frame strip a run writes: it is 4 x 4 (8-bit colour type 0), not the",
       [](nlohmann::json& j) {
         edit_png(j, [](std::vector<uint8_t>& png) { png = encode_png(4, 4, 1, std::vector<uint8_t>(16, 7)); });
       }},
      {"examples-huge", "training[1].noise.examples is 10000000000000000: a design loads at most 1 GiB of data",
       [](nlohmann::json& j) { j["training"][1]["noise"]["examples"] = 10000000000000000; }},
      // A hardware repeat beyond what two computations of one gradient can differ by.
      {"hw-sq-huge", "hw_sq is 1e+300, beyond 4 x big_sq",
       [](nlohmann::json& j) { j["training"][0]["noise"]["points"][0]["hw_sq"] = 1e300; }},
      // A repeat added where the design measured none, or one left out.
      {"hw-sq-removed", "hw_sq is missing, but a run of 4 batches measured every 1 repeats the gradient",
       [](nlohmann::json& j) { j["training"][0]["noise"]["points"][0].erase("hw_sq"); }},
      {"no-noise-every", "training[0].noise is set, but the design measures no noise",
       [](nlohmann::json& j) { j["plan"]["design"].erase("noise_every"); }},
  };
  expect_every_reader_refuses(d, good, text, cases);
  // The merge: a source's machine edited (the report would take its runs for another machine's), one directory
  // named twice.
  ASSERT_EQ(run_cli("analyze " + (d / "p1").string() + " " + (d / "p2").string() + " --out " + (d / "m").string()).code,
            0);
  const std::string merged = slurp(d / "m" / "results.json");
  const std::pair<std::function<void(nlohmann::json&)>, std::string> merge_lies[] = {
      {[](nlohmann::json& j) { j["plan"]["sources"][1]["machine"]["hostname"] = "node-b"; },
       "plan.sources[1].label is \"vm#2\", but analyze labels the source of host node-b there \"node-b\""},
      {[](nlohmann::json& j) { j["plan"]["sources"][1]["dir"] = j["plan"]["sources"][0]["dir"]; },
       "plan.sources[1].dir is plan.sources[0]'s: one directory merged twice"},
      // A label analyze does not give (it labels by host name, "#2" for a host's second folder), two alike, and a
      // source that finished before it started.
      {[](nlohmann::json& j) { j["plan"]["sources"][1]["label"] = "node-z"; }, "plan.sources[1].label is \"node-z\", but analyze"},
      {[](nlohmann::json& j) { j["plan"]["sources"][1]["label"] = j["plan"]["sources"][0]["label"]; },
       "plan.sources[1].label is"},
      {[](nlohmann::json& j) {
         j["plan"]["sources"][0]["finished_at"] = "2000-01-01T00:00:00Z";
       },
       "plan.sources[0]: finished_at 2000-01-01T00:00:00Z is before started_at"},
  };
  for (auto& [lie, says] : merge_lies) {
    nlohmann::json m = nlohmann::json::parse(merged);
    lie(m);
    fs::remove_all(d / "m-lie");
    fs::create_directories(d / "m-lie");
    std::ofstream(d / "m-lie" / "results.json") << m.dump(1);
    const CliRun r = run_cli("report " + (d / "m-lie").string());
    EXPECT_EQ(r.code, 2) << says << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  EXPECT_EQ(run_cli("report " + (d / "m").string()).code, 0);
  fs::remove_all(d);
}

// check: a cell whose bits were edited to its baseline cell's (another build's bits, FAIL) keeps the error ratio of
// the bits it computed; the same bits on the same machine key have the baseline's ratio, so it is refused.
TEST(Lies, BitsEditedToTheBaselinesBesideTheirOwnErrorRatioAreRefused) {
  fs::path d = fresh_dir("lies-check-ratio");
  const fs::path run = d / "run";
  const std::string cpu = "cpu?order=sequential&threads=1";
  ASSERT_EQ(run_cli("probe --targets 'cpu-ref," + cpu + "' --workloads 'reduce?op=sum&n=100000' --repeats 2 "
                    "--no-history --quiet --out " + run.string()).code, 0);
  const std::string base = (d / "b.json").string();
  ASSERT_EQ(run_cli("baseline save " + run.string() + " --out " + base).code, 0);
  // The baseline of a build that computed other bits on this machine, with their own ratio.
  const std::string other(32, 'c');
  nlohmann::json b = nlohmann::json::parse(slurp(base));
  int cells = 0;
  for (auto& e : b["entries"])
    if (!e["target"].get<std::string>().starts_with("cpu-ref"))
      e["fingerprints"] = {other}, e["err_ratio"] = 0.02, ++cells;
  ASSERT_EQ(cells, 1);
  std::ofstream(base) << b.dump(1);
  CliRun r = run_cli("check " + run.string() + " --baseline " + base + " --no-history");
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  // The run's bits edited to the baseline's, its own ratio left.
  nlohmann::json j = nlohmann::json::parse(slurp(run / "results.json"));
  for (auto& o : j["observations"])
    if (!o["target"].get<std::string>().starts_with("cpu-ref")) {
      ASSERT_NE(o["oracle"]["err_ratio"].get<double>(), 0.02);
      o["fingerprints"] = {other, other}, o["warmup_fingerprint"] = other;
    }
  std::ofstream(run / "results.json") << j.dump(1);
  r = run_cli("check " + run.string() + " --baseline " + base + " --no-history");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("gave the baseline's outputs (cccccccc) with err_ratio"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the same bits against one oracle have one error ratio"), std::string::npos) << r.err;
  fs::remove_all(d);
}

// A cell is a cell of its plan, of its workload's size and of the run's time: a plan of nothing, a spec no
// version parses, a cell or repeat count the plan does not hold, oracle counts beyond the output's elements,
// times beyond a year or beyond the run, and fields no machine description has are refused by every command.
TEST(Lies, ACellOutsideItsPlanOrBeyondItsOutputIsRefused) {
  fs::path d = fresh_dir("lies-plan");
  Results base = one_cell(true);
  const std::string t = base.observations[0].target;
  base.plan = {{"suite", "quick"}, {"targets", {t}}, {"workloads", {kW}}, {"repeats", 2}, {"timeout_s", 60}};
  base.command = "detaudit probe --suite quick --timeout 60";
  base.started_at = "2026-12-04T00:00:00Z";
  base.finished_at = "2026-12-04T00:00:10Z";
  base.observations[0].seconds = {0.5, 0.5};
  const fs::path good = save(d, "good", base);
  ASSERT_EQ(run_cli("report " + good.string()).code, 0);
  const std::string text = slurp(good / "results.json");
  const std::vector<ResultsLie> cases = {
      {"no-targets", "plan.targets is empty", [](nlohmann::json& j) { j["plan"]["targets"] = nlohmann::json::array(); }},
      // The command that made the run asked for what the plan holds.
      {"command-targets", "command: the command asks for --targets cpu-ref, but the plan holds other targets",
       [](nlohmann::json& j) { j["command"] = "detaudit probe --targets cpu-ref --workloads " + kW; }},
      {"command-custom", "command: the command replaces the suite's targets or workloads, but the plan says it ran the suite",
       [&](nlohmann::json& j) { j["command"] = "detaudit probe --targets " + t; }},
      {"command-repeats", "command: the command asks for --repeats 7, but the plan repeats each cell 2 times",
       [](nlohmann::json& j) { j["command"] = "/usr/bin/detaudit probe --repeats 7"; }},
      // A command that names no --suite or --timeout asked for the defaults.
      {"command-default-suite", "command: the command asks for the default suite (quick: it names no --suite), but "
                                "the plan's suite is full",
       [](nlohmann::json& j) { j["command"] = "detaudit probe --timeout 60", j["plan"]["suite"] = "full"; }},
      {"command-suite", "command: the command asks for --suite quick, but the plan's suite is full",
       [](nlohmann::json& j) { j["command"] = "detaudit probe --timeout 60 --suite=quick", j["plan"]["suite"] = "full"; }},
      {"command-default-timeout", "command: the command asks for the default time limit (120 s: it names no "
                                  "--timeout), but the plan's timeout is 60 s",
       [](nlohmann::json& j) { j["command"] = "detaudit probe"; }},
      // A probe plan is made by probe, qualify or fleet; those two run the quick suite (full at level 3) with the
      // default time limit.
      {"command-train", "command: a train command makes no probe run (probe, qualify and fleet do)",
       [](nlohmann::json& j) { j["command"] = "detaudit train autoencoder --seeds 1"; }},
      {"command-qualify-timeout", "command: the command asks for the default time limit (120 s: it names no "
                                  "--timeout), but the plan's timeout is 60 s",
       [](nlohmann::json& j) { j["command"] = "detaudit qualify --level 1"; }},
      {"command-qualify-level", "command: the command asks for the full suite (qualify at that level), but the plan's "
                                "suite is quick",
       [](nlohmann::json& j) { j["command"] = "detaudit qualify --level 3", j["plan"]["timeout_s"] = 120; }},
      {"command-fleet-targets", "command: the command asks for --targets cpu-ref, but the plan holds other targets",
       [](nlohmann::json& j) { j["command"] = "detaudit fleet --targets cpu-ref", j["plan"]["timeout_s"] = 120; }},
      {"bad-target", "plan.targets[0]: ", [](nlohmann::json& j) { j["plan"]["targets"] = {"cpu?bogus=1"}; }},
      {"target-twice", "plan.targets[1]: ",
       [&](nlohmann::json& j) { j["plan"]["targets"] = {t, t}; }},
      {"bad-workload", "plan.workloads[0]: ", [](nlohmann::json& j) { j["plan"]["workloads"] = {"matmul?m=0"}; }},
      {"other-target", "observations[0].target " + t + " is not a target of the plan",
       [](nlohmann::json& j) { j["plan"]["targets"] = {"cpu-ref"}; }},
      {"other-workload", "is not a workload of the plan",
       [](nlohmann::json& j) { j["plan"]["workloads"] = {"reduce?op=sum&n=2000&dist=uniform&seed=1"}; }},
      {"plan-repeats", "observations[0].repeats is 2, but the plan repeats each cell 3 times",
       [](nlohmann::json& j) { j["plan"]["repeats"] = 3; }},
      {"plan-field", "plan.timeout is not a field of a plan", [](nlohmann::json& j) { j["plan"]["timeout"] = 60; }},
      // --gpu-only runs GPU targets alone, and never beside --targets.
      {"gpu-only-host", "command: the command asks for --gpu-only, but the plan holds " + t + ", which runs on the host",
       [](nlohmann::json& j) { j["command"] = "detaudit probe --suite quick --timeout 60 --gpu-only"; }},
      {"gpu-only-targets", "command: the command gives --gpu-only beside --targets, which exclude each other",
       [&](nlohmann::json& j) { j["command"] = "detaudit probe --timeout 60 --gpu-only --targets '" + t + "'"; }},
      // CUPTI traces kernels on a GPU: a CPU cell with a tracing status contradicts its target.
      {"tracing-on-host", "observations[0].tracing is \"partial: repeat 0: CUPTI failed\", but " + t + " runs on the host",
       [](nlohmann::json& j) { j["observations"][0]["tracing"] = "partial: repeat 0: CUPTI failed"; }},
      {"beyond-timeout", "observations[0].seconds add up to 1 s, but the plan's timeout (0.5 s) kills a cell",
       [](nlohmann::json& j) {
         j["plan"]["timeout_s"] = 0.5;
         j["command"] = "detaudit probe --suite quick --timeout 0.5";
       }},
      {"mismatched", "observations[0].oracle.mismatched is 2, more than the 1 elements",
       [](nlohmann::json& j) { j["observations"][0]["oracle"] = {{"max_ulp", 1}, {"max_rel_err", 1e-7}, {"mismatched", 2}}; }},
      {"hist", "observations[0].oracle.ratio_hist counts 3 elements, but",
       [](nlohmann::json& j) {
         std::vector<uint64_t> h(kRatioBuckets, 0);
         h[0] = 3;
         j["observations"][0]["oracle"] = {{"max_ulp", 0},   {"max_rel_err", 0.0}, {"mismatched", 0},
                                           {"err_ratio", 0.0}, {"agree_bits", 24.0}, {"bound_k", 1000},
                                           {"ratio_hist", h}};
       }},
      {"huge-seconds", "observations[0].seconds[0] is 1e+300: a time is 0 or a number of seconds from a nanosecond",
       [](nlohmann::json& j) { j["observations"][0]["seconds"] = {1e300, 0.5}; }},
      // Less than a clock's tick: no clock measured it.
      {"tiny-seconds", "observations[0].seconds[0] is 1e-300: a time is 0 or a number of seconds from a nanosecond",
       [](nlohmann::json& j) { j["observations"][0]["seconds"] = {1e-300, 0.5}; }},
      // A worker's repeat in no time: its clock, read before and after, moves at least a tick.
      {"zero-seconds", "observations[0].seconds[0] is 0: the worker's clock, read before and after a repeat, moves",
       [](nlohmann::json& j) { j["observations"][0]["seconds"] = {0.0, 0.0}; }},
      {"longer-than-run", "observations[0].seconds add up to 30.0 s, longer than the run",
       [](nlohmann::json& j) { j["observations"][0]["seconds"] = {15.0, 15.0}; }},
      {"gpu-field", "machine.gpus[0].bogus is not a field of a machine's gpus entry",
       [](nlohmann::json& j) { j["machine"]["gpus"] = {{{"index", 0}, {"name", "GPU"}, {"bogus", 1}}}; }},
      {"gpu-shape", "machine.gpus[0].name is missing", [](nlohmann::json& j) { j["machine"]["gpus"] = {{{"index", 0}}}; }},
      {"cache-field", "machine.caches[0].kind is not a field",
       [](nlohmann::json& j) { j["machine"]["caches"] = {{{"level", 1}, {"kind", "data"}}}; }},
      {"top-field", "zzz is not a field of a results file", [](nlohmann::json& j) { j["zzz"] = 1; }},
      {"machine-field", "machine.zzz is not a field of a machine description", [](nlohmann::json& j) { j["machine"]["zzz"] = 1; }},
      {"version", "tool_version 'banana' is not a version", [](nlohmann::json& j) { j["tool_version"] = "banana"; }},
      {"tracing", "observations[0].tracing must be ok, partial",
       [](nlohmann::json& j) { j["observations"][0]["tracing"] = "banana"; }},
      {"failure-spec", "oracle_failures.nonsense: ", [](nlohmann::json& j) { j["oracle_failures"] = {{"nonsense", "x"}}; }},
      {"failure-other", "not a workload of the plan",
       [](nlohmann::json& j) { j["oracle_failures"] = {{"matmul?m=2&n=2&k=2", "timeout"}}; }},
      {"ratio-zero", "err_ratio 0, but 1 elements mismatched with a relative error of up to 1e-07",
       [](nlohmann::json& j) {
         std::vector<uint64_t> h(kRatioBuckets, 0);
         h[0] = 1;
         j["observations"][0]["oracle"] = {{"max_ulp", 3},   {"max_rel_err", 1e-7}, {"mismatched", 1},
                                           {"err_ratio", 0.0}, {"agree_bits", 6.6},   {"bound_k", 1000},
                                           {"ratio_hist", h}};
       }},
      {"ulp-nothing", "no element mismatched, yet max_ulp 7",
       [](nlohmann::json& j) { j["observations"][0]["oracle"] = {{"max_ulp", 7}, {"max_rel_err", 0.0}, {"mismatched", 0}}; }},
      // Elements 110 ULPs apart differ relatively by 1.3e-5 at most, and by more than 0.
      {"rel-beyond-ulp", "max_rel_err 0.5, more than elements 110 ULPs apart can differ (1.31e-05)",
       [](nlohmann::json& j) { j["observations"][0]["oracle"] = {{"max_ulp", 110}, {"max_rel_err", 0.5}, {"mismatched", 44}}; }},
      {"rel-zero-ulp", "max_ulp 110, yet max_rel_err 0",
       [](nlohmann::json& j) { j["observations"][0]["oracle"] = {{"max_ulp", 110}, {"max_rel_err", 0.0}, {"mismatched", 44}}; }},
      {"nan-finite-rel", "max_ulp inf (NaN against a number), yet max_rel_err 0.001",
       [](nlohmann::json& j) { j["observations"][0]["oracle"] = {{"max_ulp", "inf"}, {"max_rel_err", 1e-3}, {"mismatched", 1}}; }},
      {"hist-more-mismatched", "ratio_hist counts 3 elements whose bits differ, more than the 1 mismatched",
       [](nlohmann::json& j) {
         std::vector<uint64_t> h(kRatioBuckets, 0);
         h[1] = 3;
         j["observations"][0]["oracle"] = {{"max_ulp", 1},   {"max_rel_err", 1e-7}, {"mismatched", 1},
                                           {"err_ratio", 1e-8}, {"agree_bits", 23.0}, {"bound_k", 1000},
                                           {"ratio_hist", h}};
       }},
      {"batch-elsewhere", "is not a batchinv workload",
       [](nlohmann::json& j) { j["observations"][0]["batch_invariance"] = {{"rows_checked", 2}, {"rows_differing", 0}}; }},
      {"invariant", "invariant is true, but 1 of its rows differ",
       [](nlohmann::json& j) {
         j["observations"][0]["batch_invariance"] = {{"rows_checked", 2}, {"rows_differing", 1}, {"invariant", true}};
       }},
      {"cores", "machine.cores is 64, more than its 2 processing units",
       [](nlohmann::json& j) {
         j["machine"]["cores"] = 64;
         j["machine"]["pus"] = 2;
       }},
      {"cache-level", "a cache level is 1 to 4", [](nlohmann::json& j) { j["machine"]["caches"] = {{{"level", 99}}}; }},
      {"features-twice", "machine.cpu_features names sse2 twice",
       [](nlohmann::json& j) { j["machine"]["cpu_features"] = {"sse2", "sse2"}; }},
      {"suite", "plan.suite \"banana\" is not a suite", [](nlohmann::json& j) { j["plan"]["suite"] = "banana"; }},
      {"custom-import", "plan.custom is set, but the plan is no suite's",
       [](nlohmann::json& j) { j["plan"]["suite"] = "import", j["plan"]["custom"] = true; }},
      {"probe-in-design", "plan.suite is a probe plan's field, but the plan is a training design's",
       [](nlohmann::json& j) { j["plan"]["kind"] = "train", j["observations"] = nlohmann::json::array(); }},
      {"bound-k", "observations[0].oracle.bound_k is 7, but reduce?op=sum&n=1000&dist=uniform&seed=1's bound sums 1000 terms",
       [](nlohmann::json& j) {
         std::vector<uint64_t> h(kRatioBuckets, 0);
         h[0] = 1;
         j["observations"][0]["oracle"] = {{"max_ulp", 0},   {"max_rel_err", 0.0}, {"mismatched", 0},
                                           {"err_ratio", 0.0}, {"agree_bits", 24.0}, {"bound_k", 7},
                                           {"ratio_hist", h}};
       }},
      {"ratio-without-hist", "observations[0].oracle.err_ratio is 0.5 but ratio_hist is empty",
       [](nlohmann::json& j) {
         j["observations"][0]["oracle"] = {{"max_ulp", 1}, {"max_rel_err", 1e-7}, {"mismatched", 1}, {"err_ratio", 0.5}};
       }},
      {"no-oracle", "observations[0].oracle is absent, but the cell ran and neither oracle_failures nor details.oracle_problem says why",
       [](nlohmann::json& j) { j["observations"][0]["details"].erase("oracle_problem"); }},
      {"oracle-and-failure", "observations[0].oracle is set, but the run's oracle of " + kW + " failed",
       [](nlohmann::json& j) {
         j["observations"][0]["oracle"] = {{"max_ulp", 0}, {"max_rel_err", 0.0}, {"mismatched", 0}};
         j["oracle_failures"] = {{kW, "timeout"}};
       }},
      {"two-outputs-one-oracle", "observations[0].oracle.mismatched is 0, but the cell has 2 distinct outputs",
       [](nlohmann::json& j) {
         j["observations"][0]["fingerprints"][1] = std::string(32, 'b');
         j["observations"][0]["distinct"] = 2;
         j["observations"][0]["oracle"] = {{"max_ulp", 0}, {"max_rel_err", 0.0}, {"mismatched", 0}};
       }},
      {"library-type", "machine.libraries.openblas must be a string",
       [](nlohmann::json& j) { j["machine"]["libraries"]["openblas"] = 5; }},
      {"library-isa", "machine.libraries.cpu_isa_auto \"avx9\" is not an instruction set",
       [](nlohmann::json& j) { j["machine"]["libraries"]["cpu_isa_auto"] = "avx9"; }},
      {"library-driver", "machine.libraries.cuda_driver must be", [](nlohmann::json& j) { j["machine"]["libraries"]["cuda_driver"] = "580"; }},
      {"analysis", "analysis is set, but the results hold no training runs",
       [](nlohmann::json& j) { j["analysis"] = {{"table", nlohmann::json::array()}}; }},
      {"february-30", "started_at '2026-02-30T10:00:00Z' is not a time",
       [](nlohmann::json& j) { j["started_at"] = "2026-02-30T10:00:00Z"; }},
      {"minute-99", "finished_at '2026-12-04T00:99:00Z' is not a time",
       [](nlohmann::json& j) { j["finished_at"] = "2026-12-04T00:99:00Z"; }},
      {"empty-key", "\"\" is not a field of a results file", [](nlohmann::json& j) { j[""] = 1; }},
      {"empty-key-cell", "is not a field of an observation", [](nlohmann::json& j) { j["observations"][0][""] = 1; }},
      {"empty-key-plan", "plan.\"\" is not a field of a plan", [](nlohmann::json& j) { j["plan"][""] = 1; }},
      {"no-machine", "machine is missing", [](nlohmann::json& j) { j.erase("machine"); }},
      {"no-plan", "plan is missing", [](nlohmann::json& j) { j.erase("plan"); }},
      {"no-version", "tool_version '' is not a version", [](nlohmann::json& j) { j["tool_version"] = ""; }},
      {"oracle-field", "observations[0].oracle.zzz is not a field of an oracle distance",
       [](nlohmann::json& j) { j["observations"][0]["oracle"] = {{"max_ulp", 0}, {"max_rel_err", 0.0}, {"mismatched", 0}, {"zzz", 1}}; }},
      {"ratio-bucket", "observations[0].oracle: err_ratio 1e+300 is not in ratio_hist's highest bucket (0)",
       [](nlohmann::json& j) {
         std::vector<uint64_t> h(kRatioBuckets, 0);
         h[0] = 1;
         j["observations"][0]["oracle"] = {{"max_ulp", 1}, {"max_rel_err", 1e-7}, {"mismatched", 1}, {"err_ratio", 1e300},
                                           {"bound_k", 1000}, {"ratio_hist", h}};
       }},
      // A skip the run's own machine contradicts: a CPU it says lacks what the target does not need.
      {"skip-needs-nothing", "status skipped ('cpu: isa=avx512 forced but this CPU lacks it'), but ",
       [](nlohmann::json& j) {
         auto& o = j["observations"][0];
         o["status"] = "skipped", o["reason"] = "cpu: isa=avx512 forced but this CPU lacks it";
         o["fingerprints"] = o["seconds"] = nlohmann::json::array();
         o.erase("oracle"), o.erase("verdict"), o.erase("verdict_reason"), o.erase("warmup_fingerprint");
         o["details"] = nlohmann::json::object();
         o["distinct"] = 0;
       }},
      {"error-without-reason", "observations[0]: status error without a reason",
       [](nlohmann::json& j) { j["observations"][0]["status"] = "error", j["observations"][0]["reason"] = ""; }},
      {"error-with-oracle", "status error yet an oracle distance",
       [](nlohmann::json& j) {
         j["observations"][0]["status"] = "error", j["observations"][0]["reason"] = "failed";
         j["observations"][0]["oracle"] = {{"max_ulp", 0}, {"max_rel_err", 0.0}, {"mismatched", 0}};
       }},
      {"missing-cell", "the run finished, but it holds no cell of reduce?op=sum&n=2000&dist=uniform&seed=1 on",
       [](nlohmann::json& j) { j["plan"]["workloads"].push_back("reduce?op=sum&n=2000&dist=uniform&seed=1"); }},
      {"kernels", "3 kernel lists for 2 repeats",
       [](nlohmann::json& j) { j["observations"][0]["kernels"] = {nlohmann::json::array(), nlohmann::json::array(), nlohmann::json::array()}; }},
      {"agree-bits", "observations[0].oracle.agree_bits is 30, more than the 24 bits",
       [](nlohmann::json& j) {
         j["observations"][0]["oracle"] = {{"max_ulp", 0}, {"max_rel_err", 0.0}, {"mismatched", 0}, {"agree_bits", 30}};
       }},
      {"ok-reason", "observations[0].reason: status ok, yet a reason: only a cell that did not finish says why",
       [](nlohmann::json& j) { j["observations"][0]["reason"] = "timeout"; }},
      {"host-kernels", "observations[0].kernels holds 2 lists, but " + t + " runs on the host",
       [](nlohmann::json& j) { j["observations"][0]["kernels"] = {nlohmann::json::array(), nlohmann::json::array()}; }},
      {"agree-bits-exact", "observations[0].oracle.agree_bits is 20, but no element mismatched (all 24 bits agree)",
       [](nlohmann::json& j) {
         j["observations"][0]["oracle"] = {{"max_ulp", 0}, {"max_rel_err", 0.0}, {"mismatched", 0}, {"agree_bits", 20}};
       }},
      {"cores-0", "machine.cores is 0", [](nlohmann::json& j) { j["machine"]["cores"] = 0; }},
      {"line-0", "machine.caches[0].line_bytes is 0",
       [](nlohmann::json& j) { j["machine"]["caches"] = {{{"level", 1}, {"size_bytes", 32768}, {"line_bytes", 0}}}; }},
      // The machine block edited to another instruction set or feature order would move every cell to another
      // machine key, where a check does not compare bits: refused against what the cells say they ran.
      {"isa-auto", "observations[0].details.isa is scalar, but " + t +
                       " ran the instruction set the machine's kernels resolve to (machine.libraries.cpu_isa_auto avx2)",
       [](nlohmann::json& j) {
         j["machine"]["libraries"]["cpu_isa_auto"] = "avx2";
         j["observations"][0]["details"]["isa"] = "scalar";
       }},
      {"isa-describe", "observations[0].describe \"cpu (isa scalar)\" names another instruction set than details.isa avx2",
       [](nlohmann::json& j) {
         j["machine"]["libraries"]["cpu_isa_auto"] = "avx2";
         j["observations"][0]["details"]["isa"] = "avx2";
         j["observations"][0]["describe"] = "cpu (isa scalar)";
       }},
      // The whole file made to say scalar (machine, details, describe) on a CPU whose features resolve to AVX2.
      {"isa-narrower", "machine.libraries.cpu_isa_auto \"scalar\", but with machine.cpu_features detaudit's kernels "
                       "resolve auto to avx2",
       [](nlohmann::json& j) {
         j["machine"]["libraries"]["cpu_isa_auto"] = "scalar";
         j["observations"][0]["details"]["isa"] = "scalar";
         j["observations"][0]["describe"] = "cpu (isa scalar)";
       }},
      // What ran is what its target runs: the backend's description and settings (a cell edited to say another
      // order, thread count or convolution, or to say nothing of what ran).
      {"describe-order", "observations[0].describe \"cpu?order=blocked&threads=1\" runs order=blocked, but its target " + t +
                             " runs order=sequential",
       [](nlohmann::json& j) { j["observations"][0]["describe"] = "cpu?order=blocked&threads=1"; }},
      {"describe-conv", "runs conv=winograd, but its target " + t + " runs conv=direct",
       [](nlohmann::json& j) { j["observations"][0]["describe"] = "cpu?order=sequential&threads=1&conv=winograd"; }},
      {"describe-other", "observations[0].describe \"anything at all\" is not a description of a cpu backend",
       [](nlohmann::json& j) { j["observations"][0]["describe"] = "anything at all"; }},
      {"describe-empty", "observations[0].describe \"\" is not a description of a cpu backend",
       [](nlohmann::json& j) { j["observations"][0]["describe"] = ""; }},
      {"describe-after-remark", "is not a description of a cpu backend",
       [](nlohmann::json& j) { j["observations"][0]["describe"] = "cpu?order=sequential&threads=1 (a remark)&conv=winograd"; }},
      {"describe-unknown-key", "names winograd, which is no setting of cpu",
       [](nlohmann::json& j) { j["observations"][0]["describe"] = "cpu?order=sequential&threads=1&winograd=1"; }},
      {"details-threads", "observations[0].details.threads is \"2\", but its target " + t + " runs threads=1",
       [](nlohmann::json& j) { j["observations"][0]["details"]["threads"] = "2"; }},
      {"details-conv", "observations[0].details.conv is \"winograd\", but its target " + t + " runs conv=direct",
       [](nlohmann::json& j) { j["observations"][0]["details"]["conv"] = "winograd"; }},
      {"details-order-bad", "observations[0].details.order is \"sideways\", which is no order of cpu",
       [](nlohmann::json& j) { j["observations"][0]["details"]["order"] = "sideways"; }},
      {"details-empty", "observations[0].details is empty, but a cpu backend that ran reports its settings",
       [](nlohmann::json& j) {
         j["observations"][0]["details"] = nlohmann::json::object();
         j["oracle_failures"][j["observations"][0]["workload"].get<std::string>()] = "no oracle in this test";
       }},
      {"features-order", "machine.cpu_features lists avx after avx2: not the order",
       [](nlohmann::json& j) { j["machine"]["cpu_features"] = {"sse4.1", "avx2", "avx", "fma"}; }},
      {"training-in-probe", "training holds 1 runs, but the plan is a probe suite's",
       [](nlohmann::json& j) {
         j["training"] = {{{"key", "d|cpu|1000|0"}, {"condition", "d"}, {"target", "cpu"}, {"seed", 1000},
                           {"replicate", 0}, {"status", "ok"}, {"final_loss", 0.5}, {"curve", {0.5}},
                           {"weights_fingerprint", test::fingerprint('e')}}};
       }},
  };
  expect_every_reader_refuses(d, good, text, cases);
  // A baseline of it holds the cells of its plan, repeated as the plan says.
  ASSERT_EQ(run_cli("baseline save " + good.string()).code, 0);
  const nlohmann::json saved = nlohmann::json::parse(slurp(good / "baseline.json"));
  const std::pair<std::function<void(nlohmann::json&)>, const char*> baseline_lies[] = {
      {[](nlohmann::json& j) {
         auto e = j["entries"][0];
         e["workload"] = "reduce?op=sum&n=2000&dist=uniform&seed=1";
         j["entries"].push_back(e);
       },
       "entries[1]: the cell reduce?op=sum&n=2000&dist=uniform&seed=1 on"},
      {[](nlohmann::json& j) { j["entries"][0]["repeats"] = 3; },
       "entries[0].repeats is 3, but source.plan repeats each cell 2 times"},
  };
  for (auto& [lie, says] : baseline_lies) {
    nlohmann::json j = saved;
    lie(j);
    std::ofstream(d / "lied-baseline.json") << j.dump(1);
    CliRun r = run_cli("check " + good.string() + " --baseline " + (d / "lied-baseline.json").string() + " --no-history");
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  fs::remove_all(d);
}

// A training run's phases are what its curve gives: a label, a segment count or a margin edited in the file
// (which the report's phase table would count) is refused by every reader: report, analyze, check, compare,
// baseline save and a resumed train.
TEST(Lies, StoredPhasesTheCurveDoesNotGiveAreRefused) {
  fs::path d = fresh_dir("lies-phases");
  ASSERT_EQ(detect_phases({0.5, 0.4, 0.3}).label, "too short to tell");
  const fs::path good = save(d, "good", one_training_design());
  ASSERT_EQ(run_cli("report " + good.string()).code, 0) << run_cli("report " + good.string()).err;
  const std::string base = (d / "base.json").string();
  ASSERT_EQ(run_cli("baseline save " + good.string() + " --out " + base).code, 0);
  const std::string text = slurp(good / "results.json");
  const std::pair<std::function<void(nlohmann::json&)>, std::string> lies[] = {
      {[](nlohmann::json& j) { j["training"][0]["phases"]["label"] = "biphasic"; },
       "training[0].phases.label is \"biphasic\", but its curve of 3 steps gives \"too short to tell\""},
      {[](nlohmann::json& j) { j["training"][0]["phases"]["label"] = "monophasic"; },
       "training[0].phases.label is \"monophasic\""},
      {[](nlohmann::json& j) { j["training"][0]["phases"]["segments"] = 999; }, "training[0].phases.segments is 999"},
      {[](nlohmann::json& j) { j["training"][0]["phases"]["margin"] = 5.0; }, "training[0].phases.margin is 5.0"},
  };
  int i = 0;
  for (auto& [lie, says] : lies) {
    nlohmann::json j = nlohmann::json::parse(text);
    lie(j);
    const fs::path bad = d / ("lie" + std::to_string(i++));
    fs::create_directories(bad);
    std::ofstream(bad / "results.json") << j.dump(1);
    for (const std::string& cmd :
         {"report " + bad.string(), "analyze " + good.string() + " " + bad.string() + " --out " + (d / "merged").string(),
          "check " + bad.string() + " --baseline " + base, "compare " + good.string() + " " + bad.string(),
          "baseline save " + bad.string() + " --out " + (d / "lie.json").string()}) {
      const CliRun r = run_cli(cmd);
      EXPECT_EQ(r.code, 2) << cmd << ": " << r.out;
      EXPECT_NE(r.err.find(says), std::string::npos) << cmd << ": " << r.err;
    }
  }
  fs::remove_all(d);
}

// A condition with nondeterminism off ran the target's deterministic variant, which promises the same bits every
// time. A noise trace whose gradient, computed twice at the same weights, came out different, or a (d) replicate
// whose seed's replicates ended apart, broke that promise: check FAILs it, the report says so, baseline save
// refuses it as a reference, and the history records the FAIL. The same runs with the promise kept pass.
TEST(Lies, ADeterministicRunThatBrokeItsPromiseFails) {
  fs::path d = fresh_dir("lies-broken-promise");
  Results with_noise = one_training_design();
  with_noise.plan["design"]["noise_every"] = 1;
  with_noise.command = "detaudit train autoencoder --design sony2021 --targets 'cpu?threads=2' --seeds 1 --replicates 1 "
                       "--batches 3 --window 1 --noise-scale --noise-every 1";
  with_noise.training[0].noise = NoiseTrace{1, 16, 64, 256, {}};
  for (uint64_t step : {1, 2, 3}) with_noise.training[0].noise->points.push_back({step, 2.0, 3.0, 0.0});
  const fs::path good = save(d, "good", with_noise);
  const std::string base = (d / "base.json").string();
  ASSERT_EQ(run_cli("baseline save " + good.string() + " --out " + base).code, 0);
  CliRun r = run_cli("check " + save(d, "again", an_hour_later(with_noise)).string() + " --baseline " + base +
                     " --no-history");
  ASSERT_EQ(r.code, 0) << r.out << r.err;

  // The training set's size is the plan's: a noise trace that names another, in every run alike, is refused.
  {
    Results more = with_noise;
    more.plan["data_examples"] = 256;
    const fs::path sized = save(d, "sized", more);
    EXPECT_EQ(run_cli("report " + sized.string()).code, 0);
    nlohmann::json j = nlohmann::json::parse(slurp(sized / "results.json"));
    for (auto& run : j["training"]) run["noise"]["examples"] = 100000;
    std::ofstream(sized / "results.json") << j.dump(1);
    r = run_cli("report " + sized.string());
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("training[0].noise.examples is 100000, but the design's data has 256 examples"),
              std::string::npos)
        << r.err;
    // Both edited alike, beyond what a design can load: refused on their own.
    j["plan"]["data_examples"] = uint64_t(1) << 62;
    for (auto& run : j["training"]) run["noise"]["examples"] = uint64_t(1) << 62;
    std::ofstream(sized / "results.json") << j.dump(1);
    r = run_cli("report " + sized.string());
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("plan.data_examples is 4611686018427387904: a design trains on 2 examples at least, and on "
                         "1 GiB of data at most"),
              std::string::npos)
        << r.err;
    // Data whose pixels fingerprint as Debian's Fashion-MNIST training set holds its 60,000 images: the plan and
    // every trace naming 256, alike, are refused.
    j = nlohmann::json::parse(slurp(sized / "results.json"));
    j["plan"]["data_fingerprint"] = std::string(kFashionMnistTrainFingerprint);
    j["plan"]["data_examples"] = 256;
    for (auto& run : j["training"]) run["noise"]["examples"] = 256;
    std::ofstream(sized / "results.json") << j.dump(1);
    r = run_cli("report " + sized.string());
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("plan.data_examples is 256, but the Fashion-MNIST training set (by its pixel fingerprint) "
                         "holds 60000 examples"),
              std::string::npos)
        << r.err;
    // The same size, without the plan's (results of older versions), is refused by the traces.
    j["plan"].erase("data_examples");
    std::ofstream(sized / "results.json") << j.dump(1);
    r = run_cli("report " + sized.string());
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("training[0].noise.examples is 256, but the Fashion-MNIST training set"), std::string::npos)
        << r.err;
    for (auto& run : j["training"]) run["noise"]["examples"] = kFashionMnistTrainExamples;
    std::ofstream(sized / "results.json") << j.dump(1);
    EXPECT_EQ(run_cli("report " + sized.string()).code, 0) << "the true size is accepted";
  }
  // The noise: one repeat of batch 2 differed.
  Results noisy = with_noise;
  noisy.training[0].noise->points[1].hw_sq = 1e-12;
  const fs::path bad = save(d, "noisy", noisy);
  r = run_cli("check " + bad.string() + " --baseline " + base + " --no-history");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("broke its promise: nondeterminism off, yet batch 2's gradient"), std::string::npos) << r.out;
  r = run_cli("report " + bad.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(bad / "report.md").find("FAIL: nondeterminism off, yet 1 of 3 repeats differed"), std::string::npos)
      << slurp(bad / "report.md");
  // The report opens with it, as train and check say it.
  EXPECT_NE(slurp(bad / "report.md").find("**FAIL: 1 run with nondeterminism off broke the deterministic variant's "
                                          "promise.**"),
            std::string::npos)
      << slurp(bad / "report.md");
  // Its repeats are judged where they were measured: deleting them does not hide the one that differed.
  {
    Results hidden = noisy;
    for (auto& p : hidden.training[0].noise->points) p.hw_sq.reset();
    fs::create_directories(d / "hidden");
    std::ofstream(d / "hidden" / "results.json") << to_json(hidden).dump(1);
    r = run_cli("check " + (d / "hidden").string() + " --baseline " + base + " --no-history");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("training[0].noise.points[0].hw_sq is missing, but a run of 3 batches measured every 1 "
                         "repeats the gradient at batches 1, 2, 3"),
              std::string::npos)
        << r.err;
  }
  r = run_cli("baseline save " + bad.string() + " --out " + (d / "noisy.json").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("broke its promise"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "noisy.json"));
  // Recorded in a history: the row FAILs, and the design's exit code 1 is what its rows give.
  const std::string db = (d / "history.db").string();
  ASSERT_TRUE(record_run(db, RunKind::kTrain, noisy, bad.string(), 1).is_ok());
  HistoryQueryResult q;
  const Status qs = query_history(db, {}, &q);
  ASSERT_TRUE(qs.is_ok()) << qs.message();
  ASSERT_EQ(q.cells.size(), 1u);
  EXPECT_EQ(q.cells[0].verdict, "FAIL");
  EXPECT_EQ(q.cells[0].status, "ok");
  EXPECT_EQ(run_cli("history --history " + db).code, 0);
  for (auto [sql, says] : {std::pair{"UPDATE training SET verdict = 'PASS'", "1 exactly when one FAILed"},
                           std::pair{"UPDATE training SET verdict = 'WARN'; UPDATE runs SET exit_code = 0", "verdict is not what its status and condition give"}}) {
    const std::string copy = (d / "edited.db").string();
    fs::remove(copy);
    fs::copy_file(db, copy);
    edit_history(copy, sql);
    r = run_cli("history --history " + copy);
    EXPECT_EQ(r.code, 2) << sql << ": " << r.out;
    EXPECT_NE(r.err.find(says), std::string::npos) << sql << ": " << r.err;
  }
  // A check of them that exited 0 would not have FAILed the run: refused.
  const std::string dbc = (d / "history-check.db").string();
  noisy.command = "detaudit check " + bad.string() + " --baseline " + base;
  ASSERT_TRUE(record_run(dbc, RunKind::kCheck, noisy, bad.string(), 0).is_ok());
  r = run_cli("history --history " + dbc);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("a check or qualify run that exited 0 beside a training run that broke its promise"),
            std::string::npos)
      << r.err;
  noisy.command = with_noise.command;
  // The same runs with exit code 0 would say nothing failed: refused.
  const std::string db0 = (d / "history0.db").string();
  ASSERT_TRUE(record_run(db0, RunKind::kTrain, noisy, bad.string(), 0).is_ok());
  r = run_cli("history --history " + db0);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("1 exactly when one FAILed"), std::string::npos) << r.err;
  // A condition with nondeterminism on may differ: no FAIL there.
  Results atomic = noisy;
  TrainingRun& a = atomic.training[0];
  EXPECT_EQ(judge_training_runs(atomic.training)[0].verdict, Verdict::kFail);
  a.nondeterministic = true;
  a.condition = "c";
  EXPECT_EQ(judge_training_runs(atomic.training)[0].verdict, Verdict::kPass);

  // (d): two replicates of one seed, the second ending in other weights.
  Results two = with_noise;
  two.plan["runs"] = 2;
  two.plan["design"]["seeds"] = 2;  // (d) runs its fixed initial weights once per seed: replicates 0 and 1
  two.command = std::regex_replace(two.command, std::regex("--seeds 1"), "--seeds 2");
  two.training.push_back(two.training[0]);
  TrainingRun& rep1 = two.training[1];
  rep1.replicate = 1;
  rep1.key = rep1.condition + "|" + rep1.target + "|1000|1";
  const fs::path agree = save(d, "agree", two);
  const std::string base2 = (d / "base2.json").string();
  ASSERT_EQ(run_cli("baseline save " + agree.string() + " --out " + base2).code, 0);
  r = run_cli("check " + save(d, "agree-again", an_hour_later(two)).string() + " --baseline " + base2 + " --no-history");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  {
    // The same weights after another measured gradient (one noise point of replicate 1 edited, as a lie or a
    // measurement that varied would give): the promise broke all the same, and both FAIL.
    Results twins = two;
    ASSERT_TRUE(twins.training[1].noise && !twins.training[1].noise->points.empty());
    twins.training[1].noise->points[0].big_sq *= 1.5;
    EXPECT_EQ(judge_training_runs(twins.training)[0].verdict, Verdict::kFail);
    EXPECT_EQ(judge_training_runs(twins.training)[1].verdict, Verdict::kFail);
    r = run_cli("check " + save(d, "noise-apart", twins).string() + " --baseline " + base2 + " --no-history");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("outcomes (final loss, weights, learning curve, noise measurements or held-out prediction)"), std::string::npos)
        << r.out;
  }
  rep1.weights_fingerprint = test::fingerprint('f');
  // Which replicate is "right" no run can say: both FAIL.
  EXPECT_EQ(judge_training_runs(two.training)[0].verdict, Verdict::kFail);
  EXPECT_EQ(judge_training_runs(two.training)[1].verdict, Verdict::kFail);
  const fs::path apart = save(d, "apart", two);
  r = run_cli("check " + apart.string() + " --baseline " + base2 + " --no-history");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("seed 1000 from the same weights with nondeterminism off, yet 2 finished runs ended in 2 different outcomes"), std::string::npos) << r.out;
  // The history reads (d)'s replicates against each other: a row whose FAIL was edited away (or recorded before
  // rows had verdicts) still shows the cell as the broken promise it is.
  const std::string dbd = (d / "history-d.db").string();
  ASSERT_TRUE(record_run(dbd, RunKind::kTrain, two, apart.string(), 1).is_ok());
  edit_history(dbd, "UPDATE training SET verdict = 'PASS'; UPDATE runs SET exit_code = 0");
  r = run_cli("history --history " + dbd);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("broke its promise (nondeterminism off): weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  FAIL\n"), std::string::npos) << r.out;
  {
    // Across conditions: (b)'s first seed starts from (d)'s fixed weights on the same data with nondeterminism off,
    // so the two end in the same bits; ending apart, both FAIL.
    std::vector<TrainingRun> bd = {two.training[0], two.training[0]};
    ASSERT_EQ(bd[0].condition, "d");
    bd[0].initial_weights_fingerprint = bd[1].initial_weights_fingerprint = test::fingerprint('1');
    bd[1].condition = "b", bd[1].random_init = true;
    bd[1].key = "b|" + bd[1].target + "|1000|0";
    EXPECT_EQ(judge_training_runs(bd)[1].verdict, Verdict::kPass);
    bd[1].weights_fingerprint = test::fingerprint('f');
    const std::vector<RunVerdict> v = judge_training_runs(bd);
    EXPECT_EQ(v[0].verdict, Verdict::kFail);
    EXPECT_EQ(v[1].verdict, Verdict::kFail);
    EXPECT_NE(v[1].reason.find("broke its promise: runs of conditions (b, d) start from the same weights on the same data with nondeterminism off, yet 2 finished runs ended in 2"), std::string::npos)
        << v[1].reason;
    // Other initial weights (another seed's) promise nothing of the kind.
    bd[1].initial_weights_fingerprint = test::fingerprint('9');
    EXPECT_EQ(judge_training_runs(bd)[1].verdict, Verdict::kPass);
  }
  fs::remove_all(d);
}

// A design every run of which crashed shares its cells with its baseline: check FAILs the crashes (exit 1), it
// does not say the two share nothing.
TEST(Unseen, ACheckOfADesignWhoseEveryRunCrashedFailsIt) {
  fs::path d = fresh_dir("unseen-all-crashed");
  const Results good = one_training_design();
  const fs::path g = save(d, "good", good);
  const std::string base = (d / "base.json").string();
  ASSERT_EQ(run_cli("baseline save " + g.string() + " --out " + base).code, 0);
  Results crashed = good;
  const std::string cpu = good.training[0].target;
  crashed.training[0] = training_run({{"key", "d|" + cpu + "|1000|0"}, {"condition", "d"}, {"target", cpu},
                                      {"seed", 1000}, {"replicate", 0}, {"status", "crashed"}, {"model", "autoencoder"},
                                      {"design", "sony2021"}, {"batches", 3}, {"window", 1},
                                      {"reason", "SIGSEGV (Segmentation fault)"}, {"signal", "SIGSEGV"}});
  const fs::path c = save(d, "crashed", crashed);
  CliRun r = run_cli("check " + c.string() + " --baseline " + base + " --no-history");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("run crashed: SIGSEGV"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("share no cell"), std::string::npos) << r.err;
  fs::remove_all(d);
}

// A baseline is reviewed by people and trusted by check: the same cell twice, impossible numbers, specs no
// detaudit writes, invented fields and a summary its runs do not give are refused.
TEST(Lies, ABaselineThatContradictsItselfIsRefused) {
  fs::path d = fresh_dir("lies-baseline");
  // Two baselines, as runs hold one kind each: a probe run's cell, and a training design's cell (d) of two seeds.
  Results probe = one_cell(true);
  const std::string t = probe.observations[0].target;
  probe.plan = {{"suite", "quick"}, {"targets", {t}}, {"workloads", {kW}}, {"repeats", 2}, {"timeout_s", 60}};
  probe.command = "detaudit probe --suite quick --timeout 60";
  Results train;
  train.machine = probe.machine;
  train.started_at = train.finished_at = probe.started_at;
  const std::string cpu = test::canon_target("cpu?threads=2");  // blocked: (d)'s deterministic variant
  train.plan = {{"kind", "train"},
                {"runs", 2},
                {"design",
                 {{"model", "autoencoder"}, {"design", "sony2021"}, {"targets", {cpu}}, {"seeds", 2}, {"replicates", 1},
                  {"batches", 1}, {"window", 1}, {"conditions", "d"}, {"init_seed_base", 1000}}}};
  for (int rep : {0, 1})
    train.training.push_back(training_run({{"key", "d|" + cpu + "|1000|" + std::to_string(rep)}, {"condition", "d"},
                                           {"target", cpu}, {"seed", 1000}, {"replicate", rep}, {"status", "ok"},
                                           {"model", "autoencoder"}, {"design", "sony2021"},
                                           {"batches", 1}, {"window", 1},
                                           {"final_loss", 0.25}, {"curve", {0.25}},
                                           {"weights_fingerprint", test::fingerprint('e')}}));
  const fs::path good = save(d, "good", probe), good_train = save(d, "good-train", train);
  ASSERT_EQ(run_cli("baseline save " + good.string()).code, 0);
  ASSERT_EQ(run_cli("baseline save " + good_train.string()).code, 0) << run_cli("baseline save " + good_train.string()).err;
  const std::string text = slurp(good / "baseline.json"), train_text = slurp(good_train / "baseline.json");
  {
    // A finished design that lost one of its runs would let check judge part of it as the whole.
    auto j = nlohmann::json::parse(slurp(good_train / "results.json"));
    j["training"].erase(1);
    const fs::path cut = d / "cut-train";
    fs::create_directories(cut);
    std::ofstream(cut / "results.json") << j.dump(1);
    const CliRun c = run_cli("report " + cut.string());
    EXPECT_EQ(c.code, 2) << c.out;
    EXPECT_NE(c.err.find("the run finished, but it holds 1 of the 2 training runs its plan runs"), std::string::npos)
        << c.err;
  }
  struct Case {
    std::string name, says;
    std::function<void(nlohmann::json&)> lie;
  };
  const std::vector<Case> cases = {
      {"twice", "appears twice", [](nlohmann::json& j) { j["entries"].push_back(j["entries"][0]); }},
      {"err", "entries[0].err_ratio is -3", [](nlohmann::json& j) { j["entries"][0]["err_ratio"] = -3; }},
      {"median", "entries[0].median_seconds is -1", [](nlohmann::json& j) { j["entries"][0]["median_seconds"] = -1; }},
      {"repeats", "1 distinct outputs in 0 repeats", [](nlohmann::json& j) { j["entries"][0]["repeats"] = 0; }},
      {"target", "is not a target spec as detaudit writes one", [](nlohmann::json& j) { j["entries"][0]["target"] = "foo"; }},
      {"workload", "is not a workload spec as detaudit writes one",
       [](nlohmann::json& j) { j["entries"][0]["workload"] = "matmul?m=0"; }},
      {"unknown", "entries[0].note is not a field of a baseline entry", [](nlohmann::json& j) { j["entries"][0]["note"] = 1; }},
      {"n", "n, mean and sd are not those of its runs", [](nlohmann::json& j) { j["training"][0]["n"] = 7; }},
      {"mean", "n, mean and sd are not those of its runs", [](nlohmann::json& j) { j["training"][0]["mean"] = 5.0; }},
      {"run-twice", "appears twice", [](nlohmann::json& j) { j["training"][0]["runs"].push_back(j["training"][0]["runs"][0]); }},
      {"run-fp", "weights_fingerprint must be 32 hex digits",
       [](nlohmann::json& j) { j["training"][0]["runs"][0]["weights_fingerprint"] = "abc"; }},
      {"skipped-fps", "status skipped yet 1 fingerprints",
       [](nlohmann::json& j) { j["entries"][0]["status"] = "skipped", j["entries"][0]["reason"] = "no device"; }},
      {"error-no-reason", "entries[0]: status error without a reason", [](nlohmann::json& j) { j["entries"][0]["status"] = "error"; }},
      {"nothing-ran", "it holds no bits to check against",
       [](nlohmann::json& j) {
         j["entries"][0]["status"] = "crashed";  // (a crash of a target that needs nothing: a FAIL)
         j["entries"][0]["reason"] = "SIGSEGV (Segmentation fault)";
         j["entries"][0]["verdict"] = "FAIL";
         j["entries"][0]["fingerprints"] = nlohmann::json::array();
         j["entries"][0]["distinct"] = 0;
         j["training"] = nlohmann::json::array();
       }},
      {"escape", "source.dir holds a control character (byte 0x1b)", [](nlohmann::json& j) { j["source"]["dir"] = "\x1b[2J"; }},
      {"train-target", "training[0].target is not a target spec", [](nlohmann::json& j) { j["training"][0]["target"] = "T"; }},
      {"created", "created_at 'yesterday' is not a time", [](nlohmann::json& j) { j["created_at"] = "yesterday"; }},
      {"source-empty", "source.dir is missing", [](nlohmann::json& j) { j["source"] = nlohmann::json::object(); }},
      {"source-field", "source.note is not a field", [](nlohmann::json& j) { j["source"]["note"] = "x"; }},
      {"source-time", "source: started_at 'soon' is not a time", [](nlohmann::json& j) { j["source"]["started_at"] = "soon"; }},
      {"key-edited", "the key was edited",
       [](nlohmann::json& j) {
         for (auto& [id, k] : j["keys"].items()) k["tool_version"] = "9.9.9";
       }},
      {"gpu-key", "is a key of kind gpu, but a cell of",
       [](nlohmann::json& j) {
         const nlohmann::json k = {{"kind", "gpu"}, {"gpu", "NVIDIA H200"}, {"tool_version", "0"}};
         j["keys"][key_id(k)] = k;
         j["entries"][0]["key"] = key_id(k);
       }},
      // A key is its target's: one naming another backend's libraries (cpu-ref's, without cpu_isa_auto) would put
      // the cell among another target's and out of judgment.
      {"other-target-key", "names the libraries [compiler, glibc], but a cell of",
       [](nlohmann::json& j) {
         nlohmann::json k = j["keys"][j["entries"][0]["key"].get<std::string>()];
         k["libraries"] = {{"compiler", "gcc 12.2.0"}, {"glibc", "2.36"}};
         j["keys"][key_id(k)] = k;
         j["entries"][0]["key"] = key_id(k);
       }},
      // One baseline is one run on one machine: its keys agree on the CPU, and a target has one key.
      {"two-machines", "the keys of one baseline describe one machine",
       [](nlohmann::json& j) {
         nlohmann::json k = j["keys"][j["entries"][0]["key"].get<std::string>()];
         k["cpu_model"] = "AMD EPYC 9654";
         j["keys"][key_id(k)] = k;
       }},
      {"two-keys", "one baseline is one run on one machine, where a target has one key",
       [](nlohmann::json& j) {
         nlohmann::json k = j["keys"][j["entries"][0]["key"].get<std::string>()];
         k["tool_version"] = "0.0.9";
         j["keys"][key_id(k)] = k;
         nlohmann::json e = j["entries"][0];
         e["workload"] = "reduce?op=sum&n=2000&dist=uniform&seed=1";
         e["key"] = key_id(k);
         j["entries"].push_back(e);
         j["source"]["plan"]["workloads"].push_back(e["workload"]);
       }},
      {"init", "training[0].init is \"random\", but condition (d) starts from fixed initial weights",
       [](nlohmann::json& j) { j["training"][0]["init"] = "random"; }},
      {"median-year", "entries[0].median_seconds is 1000000000000: a time of 0, or from a nanosecond",
       [](nlohmann::json& j) { j["entries"][0]["median_seconds"] = 1e12; }},
      {"median-tiny", "entries[0].median_seconds is 1e-300: a time of 0, or from a nanosecond (a clock's tick)",
       [](nlohmann::json& j) { j["entries"][0]["median_seconds"] = 1e-300; }},
      {"median-zero", "entries[0].median_seconds is 0, but the cell ran, and every repeat of a cell that ran was timed",
       [](nlohmann::json& j) { j["entries"][0]["median_seconds"] = 0.0; }},
      // Saved by a version older than the results it keeps (its keys name their results' version).
      {"older-saver", "tool_version 0.0.9 is older than keys.",
       [](nlohmann::json& j) { j["tool_version"] = "0.0.9"; }},
      // Every repeat of a cell that ran was timed: no median is no time measured.
      {"median-null", "entries[0].median_seconds is missing or null, but the cell ran",
       [](nlohmann::json& j) { j["entries"][0]["median_seconds"] = nullptr; }},
      {"median-missing", "entries[0].median_seconds is missing or null, but the cell ran",
       [](nlohmann::json& j) { j["entries"][0].erase("median_seconds"); }},
      {"determinism", "training[0].determinism is \"off\", but condition (d) runs with determinism on",
       [](nlohmann::json& j) { j["training"][0]["determinism"] = "off"; }},
            {"plan-suite", "source.plan.suite \"mine\" is not a suite", [](nlohmann::json& j) { j["source"]["plan"]["suite"] = "mine"; }},
      {"expected", "entries[0].verdict is EXPECTED, but the cell promised determinism",
       [](nlohmann::json& j) { j["entries"][0]["verdict"] = "EXPECTED"; }},
      {"finished-later", "source.finished_at 2026-12-04T10:00:00Z is after the baseline's created_at 2026-12-03T09:00:00Z",
       [](nlohmann::json& j) {
         j["created_at"] = "2026-12-03T09:00:00Z";
         j["source"]["finished_at"] = "2026-12-04T10:00:00Z";
       }},
      {"train-seed", "training[0].runs[0].seed 77 is not a seed of the design",
       [](nlohmann::json& j) { j["training"][0]["runs"][0]["seed"] = 77; }},
      {"train-replicate", "training[0].runs[1].replicate 9 is not below the 2 replicates",
       [](nlohmann::json& j) { j["training"][0]["runs"][1]["replicate"] = 9; }},
      // (d) runs every replicate of a seed to the same bits: two weights for one seed are no reference.
      {"train-d-apart", "training[0].runs: seed 1000's replicates 0 and 1 end apart (weights",
       [](nlohmann::json& j) { j["training"][0]["runs"][1]["weights_fingerprint"] = std::string(32, '1'); }},
      {"train-d-loss-apart", "training[0].runs: seed 1000's replicates 0 and 1 end apart (final loss)",
       [](nlohmann::json& j) {
         j["training"][0]["runs"][1]["final_loss"] = 0.5;
         j["training"][0]["mean"] = 0.375;
         j["training"][0]["sd"] = 0.17677669529663687;
       }},
      // Across conditions: (b)'s first seed starts from (d)'s weights, with nondeterminism off and no nudge, so it
      // ends in (d)'s bits; a (b) run that ends elsewhere makes check blame the genuine run for the baseline's lie.
      {"train-b-apart-from-d", "training: (b) and (d) of autoencoder/",
       [](nlohmann::json& j) {
         nlohmann::json b = j["training"][0];
         b["condition"] = "b", b["init"] = "random";
         b["runs"] = nlohmann::json::array({b["runs"][0]});
         b["runs"][0]["weights_fingerprint"] = std::string(32, '1');
         b["n"] = 1, b["mean"] = b["runs"][0]["final_loss"];
         b.erase("sd");
         j["training"].insert(j["training"].begin(), b);
         j["source"]["plan"]["design"]["conditions"] = "bd", j["source"]["plan"]["runs"] = 4;
       }},
      // Runs of two seeds never end in the same weights: (b)'s second seed claiming (d)'s (seed 1000's).
      {"train-two-seeds-alike", "training: (b) seed 1001 rep 0 on cpu?order=blocked&threads=2&isa=auto ends in the weights of (b) seed 1000 rep 0",
       [](nlohmann::json& j) {
         nlohmann::json b = j["training"][0];
         b["condition"] = "b", b["init"] = "random";
         b["runs"] = nlohmann::json::array({b["runs"][0], b["runs"][0]});
         b["runs"][1]["seed"] = 1001;
         b["runs"][1]["final_loss"] = 0.5;
         b["n"] = 2;
         b["mean"] = (b["runs"][0]["final_loss"].get<double>() + 0.5) / 2;
         b["sd"] = std::fabs(b["runs"][0]["final_loss"].get<double>() - 0.5) / std::sqrt(2.0);
         j["training"].insert(j["training"].begin(), b);
         j["source"]["plan"]["design"]["conditions"] = "bd", j["source"]["plan"]["runs"] = 4;
       }},
      {"train-model", "training[0].model \"prednet\" is not the design's", [](nlohmann::json& j) { j["training"][0]["model"] = "prednet"; }},
      {"train-variant", "training[0].target cpu?order=atomic", [](nlohmann::json& j) {
         j["training"][0]["target"] = "cpu?order=atomic&threads=2&isa=auto";
       }},
      {"train-runs", "source.plan.runs is 99, more than the 2 runs its design has",
       [](nlohmann::json& j) { j["source"]["plan"]["runs"] = 99; }},
      {"promise", "entries[0].promise \"nondeterministic\", but cpu?order=sequential&threads=1&isa=auto promises "
                  "deterministic",
       [](nlohmann::json& j) { j["entries"][0]["promise"] = "nondeterministic"; }},
      {"promise-none", "promises deterministic", [](nlohmann::json& j) { j["entries"][0]["promise"] = "none"; }},
      // A deterministic cell with two outputs broke its promise: a FAIL, never saved as a PASS.
      {"verdict-pass-two", "entries[0].verdict is PASS, but the cell promised determinism and gave 2 distinct outputs",
       [](nlohmann::json& j) {
         auto& e = j["entries"][0];
         e["fingerprints"].push_back(std::string(32, '1'));
         e["distinct"] = 2;
         e["verdict"] = "PASS";
       }},
      {"source-command", "source.command: the command asks for --workloads",
       [](nlohmann::json& j) { j["source"]["command"] = "detaudit probe --workloads matmul?m=8&n=8&k=8"; }},
      {"source-default-suite", "source.command: the command asks for the default suite (quick: it names no --suite), "
                               "but the plan's suite is full",
       [](nlohmann::json& j) { j["source"]["command"] = "detaudit probe --timeout 60", j["source"]["plan"]["suite"] = "full"; }},
      // An entry left out of a finished run's baseline: its cell's changed bits would pass as a new cell.
      {"entry-left-out", "entries: the source run finished, but the baseline holds no entry of",
       [](nlohmann::json& j) { j["entries"] = nlohmann::json::array(); }},
      // A verdict is one the verdict rules give the entry's own evidence, and each output is listed once.
      {"verdict-fail-one", "entries[0].verdict is FAIL, which is not a verdict of a cell that ran with 1 output here "
                           "unless its reason names",
       [](nlohmann::json& j) { j["entries"][0]["verdict"] = "FAIL", j["entries"][0]["verdict_reason"] = "x"; }},
      {"verdict-warn-one", "entries[0].verdict is WARN, which is not a verdict",
       [](nlohmann::json& j) { j["entries"][0]["verdict"] = "WARN", j["entries"][0]["err_ratio"] = 0.0; }},
      {"verdict-skip-ran", "entries[0].verdict is SKIP, which is not a verdict of a cell whose status is ok",
       [](nlohmann::json& j) { j["entries"][0]["verdict"] = "SKIP"; }},
      {"fingerprint-twice", "entries[0].fingerprints lists 2 fingerprints for 1 distinct outputs",
       [](nlohmann::json& j) { j["entries"][0]["fingerprints"].push_back(j["entries"][0]["fingerprints"][0]); }},
      // A skip its own key contradicts hid a changed fingerprint: the cell's target needs nothing a CPU may lack.
      {"skip-needs-nothing", "entries[0]: status skipped ('isa=avx512 needs AVX-512F, which this CPU lacks'), but "
                             "cpu?order=sequential&threads=1&isa=auto runs reduce on every machine",
       [](nlohmann::json& j) { skip_first_entry(j, "isa=avx512 needs AVX-512F, which this CPU lacks"); }},
      {"skip-any-reason", "entries[0]: status skipped ('no GPU found (nvidia-smi missing)'), but",
       [](nlohmann::json& j) { skip_first_entry(j, "no GPU found (nvidia-smi missing)"); }},
      {"cpu-kernels", "entries[0].kernels on a cell of a cpu key (kernels are a GPU's",
       [](nlohmann::json& j) {
         j["entries"][0]["kernels"] = {{j["entries"][0]["fingerprints"][0].get<std::string>(), {"sgemm_128x64"}}};
       }},
  };
  {
    // Results that describe no machine make no baseline (its keys would be made up of nothing).
    Results nowhere = probe;
    nowhere.machine = nlohmann::json::object();
    const fs::path dir = save(d, "nowhere", nowhere);
    CliRun res = run_cli("baseline save " + dir.string());
    EXPECT_EQ(res.code, 2) << res.out << res.err;
    EXPECT_NE(res.err.find("machine describes no machine"), std::string::npos) << res.err;
  }
  for (const Case& c : cases) {
    const bool training = c.name.rfind("train", 0) == 0 || c.name.rfind("run", 0) == 0 || c.name == "n" ||
                          c.name == "mean" || c.name == "init" || c.name == "determinism";
    nlohmann::json j = nlohmann::json::parse(training ? train_text : text);
    c.lie(j);
    const fs::path b = d / (c.name + ".json");
    std::ofstream(b) << j.dump(1);
    CliRun res = run_cli("check " + (training ? good_train : good).string() + " --baseline " + b.string() +
                         " --no-history --allow-unjudged");
    EXPECT_EQ(res.code, 2) << c.name << ": " << res.out << res.err;
    EXPECT_NE(res.err.find(c.says), std::string::npos) << c.name << ": " << res.err;
  }
  fs::remove_all(d);
}

// Nudge k of condition (e) moves the same weight on every target: a run whose nudge k moved another weight (a
// parameter beyond the model, say) than the other target's is refused.
TEST(Lies, ANudgeThatMovedAnotherWeightThanItsPeersIsRefused) {
  fs::path d = fresh_dir("lies-nudge");
  const std::string t2 = test::canon_target("cpu?threads=2"), t3 = test::canon_target("cpu?threads=3");
  Results train = one_cell(true);
  train.observations.clear();
  train.command = "";  // (no command this version reads back: its design here has only condition e)
  train.plan = {{"kind", "train"},
                {"runs", 2},
                {"design",
                 {{"model", "autoencoder"}, {"design", "sony2021"}, {"targets", {t2, t3}}, {"seeds", 1}, {"replicates", 1},
                  {"batches", 1}, {"window", 1}, {"conditions", "e"}, {"init_seed_base", 1000}}}};
  WeightNudge made;  // the nudge its worker makes (a made-up one is refused)
  ASSERT_TRUE(expected_nudge("autoencoder", "", 64, 1000, 0, &made));
  for (const std::string& t : {t2, t3})
    train.training.push_back(training_run(
        {{"key", "e|" + t + "|1000|0"}, {"condition", "e"}, {"target", t}, {"seed", 1000}, {"replicate", 0},
         {"status", "ok"}, {"model", "autoencoder"}, {"design", "sony2021"}, {"batches", 1}, {"window", 1},
         {"final_loss", 0.5}, {"curve", {0.5}}, {"weights_fingerprint", test::fingerprint('e')},
         {"nudge", to_json(made)}}));
  const fs::path good = save(d, "good", train);
  ASSERT_EQ(run_cli("report " + good.string()).code, 0) << run_cli("report " + good.string()).err;
  const std::vector<ResultsLie> cases = {
      {"parameter", "training[1].nudge is not training[0]'s nudge 0",
       [](nlohmann::json& j) { j["training"][1]["nudge"]["parameter"] = 100000; }},
      // Every run's nudge edited alike (a bias named, or another weight): nudge 0 of seed 1000 is made again.
      {"tensor", "training[0].nudge is {",
       [](nlohmann::json& j) {
         for (auto& run : j["training"]) run["nudge"]["tensor"] = "layer 0 (conv2d) bias [3]";
       }},
      {"parameter-alike", "but nudge 0 of seed 1000 moves {",
       [](nlohmann::json& j) {
         for (auto& run : j["training"]) run["nudge"]["parameter"] = run["nudge"]["parameter"].get<uint64_t>() + 1;
       }},
  };
  expect_every_reader_refuses(d, good, slurp(good / "results.json"), cases);
  {
    // Two nudges that move different weights start from different weights: a replicate claiming the other's initial
    // weights is refused.
    Results two = train;
    two.plan["runs"] = 2;
    two.plan["design"]["targets"] = {t2};
    two.plan["design"]["seeds"] = 2;  // (e): the fixed weights of seed 1000, one nudge per seed of the design
    two.training.clear();
    // Replicate k of a condition of seed 1000 on t2, one batch: its loss, final and initial weights.
    auto run_of = [&](const std::string& condition, int k, double loss, char weights, char initial) {
      return nlohmann::json{{"key", condition + "|" + t2 + "|1000|" + std::to_string(k)}, {"condition", condition},
                            {"target", t2}, {"seed", 1000}, {"replicate", k}, {"status", "ok"},
                            {"model", "autoencoder"}, {"design", "sony2021"}, {"batches", 1}, {"window", 1},
                            {"final_loss", loss}, {"curve", {loss}}, {"weights_fingerprint", test::fingerprint(weights)},
                            {"initial_weights_fingerprint", test::fingerprint(initial)}};
    };
    for (int k = 0; k < 2; ++k) {
      WeightNudge nk;
      ASSERT_TRUE(expected_nudge("autoencoder", "", 64, 1000, uint64_t(k), &nk));
      nlohmann::json run = run_of("e", k, 0.5, 'e', char('a' + k));
      run["nudge"] = to_json(nk);
      two.training.push_back(training_run(run));
    }
    ASSERT_NE(two.training[0].nudge->parameter, two.training[1].nudge->parameter);
    const fs::path good2 = save(d, "good2", two);
    ASSERT_EQ(run_cli("report " + good2.string()).code, 0) << run_cli("report " + good2.string()).err;
    expect_every_reader_refuses(
        d, good2, slurp(good2 / "results.json"),
        {{"same-start", "training[1].initial_weights_fingerprint is training[0]'s, whose nudge moved another weight",
          [](nlohmann::json& j) {
            j["training"][1]["initial_weights_fingerprint"] = j["training"][0]["initial_weights_fingerprint"];
          }}});
    // Beside (d)'s runs from the fixed weights a nudge moved: an (e) run claiming those very weights moved nothing.
    Results mixed = two;
    mixed.plan["runs"] = 4;
    mixed.plan["design"]["conditions"] = "de";
    for (int k = 0; k < 2; ++k) mixed.training.push_back(training_run(run_of("d", k, 0.25, 'd', '7')));
    const fs::path good3 = save(d, "good3", mixed);
    ASSERT_EQ(run_cli("report " + good3.string()).code, 0) << run_cli("report " + good3.string()).err;
    expect_every_reader_refuses(
        d, good3, slurp(good3 / "results.json"),
        {{"unmoved-start", "training[0].initial_weights_fingerprint is training[2]'s, which starts without a nudge",
          [](nlohmann::json& j) {
            j["training"][0]["initial_weights_fingerprint"] = j["training"][2]["initial_weights_fingerprint"];
          }}});
  }
  fs::remove_all(d);
}

// Nothing judged is never a pass: two runs whose shared cells never ran on both sides, a baseline of a run in
// which nothing ran (above), an analysis of designs none of whose runs finished.
TEST(Unseen, RunsThatShareOnlySkippedCellsCompareNothing) {
  fs::path d = fresh_dir("unseen-compare-skipped");
  Results other = one_cell(false, true);
  other.started_at = "2026-12-03T00:00:00Z";  // another run (a copy of one whole is refused)
  const fs::path a = save(d, "a", one_cell(false, true)), b = save(d, "b", other);
  CliRun r = run_cli("compare " + a.string() + " " + b.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("none ran on both sides"), std::string::npos) << r.err;
  r = run_cli("compare " + a.string() + " " + save(d, "c", one_cell(true, true)).string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;  // skipped on one side: still nothing compared
  fs::remove_all(d);
}

// The history's strings reach a terminal through `history`: a control character another program wrote into
// the database is shown as \xNN, never sent raw.
TEST(Unseen, HistoryNeverPrintsAControlCharacterRaw) {
  fs::path d = fresh_dir("unseen-history-escape");
  fs::create_directories(d);
  Results r = one_cell(true);
  r.observations[0].oracle = OracleDistance{};  // (compared with its oracle: a cell that ran has a distance)
  r.observations[0].oracle->err_ratio = 0;
  r.observations[0].seconds = {0.001, 0.001};  // (and was timed)
  r.machine["hostname"] = "evil\x1b[2Jhost";
  const std::string db = (d / "h.db").string();
  ASSERT_TRUE(record_run(db, RunKind::kProbe, r, (d / "r").string(), 0).is_ok());
  CliRun h = run_cli("history --history " + db);
  EXPECT_EQ(h.code, 0) << h.err;
  EXPECT_EQ(h.out.find('\x1b'), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("evil\\x1b[2Jhost"), std::string::npos) << h.out;
  fs::remove_all(d);
}

// What the terminal obeys is escaped, what it shows is kept: C0 controls and DEL as \xNN, the C1 controls of
// UTF-8 (U+0080..U+009F, CSI among them) as \u00NN, a byte of no valid UTF-8 sequence (an overlong form, a
// surrogate, a lone continuation byte, a cut sequence) as \xNN; a whole character beyond them as it is.
TEST(Unseen, OneFunctionEscapesWhatATerminalWouldObey) {
  EXPECT_EQ(shown_safely("a\x1b[2Jb\tc\n"), "a\\x1b[2Jb\tc\n");
  EXPECT_EQ(shown_safely("x\xc2\x9b" "2J"), "x\\u009b2J");
  EXPECT_EQ(shown_safely("\xff\x80"), "\\xff\\x80");
  EXPECT_EQ(shown_safely("\xc0\xaf"), "\\xc0\\xaf") << "an overlong '/'";
  EXPECT_EQ(shown_safely("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a surrogate";
  EXPECT_EQ(shown_safely("\xe2\x80"), "\\xe2\\x80") << "a cut sequence";
  EXPECT_EQ(shown_safely("\xe2\x80\x94 \xc3\xa9 \xf0\x9f\x99\x82"), "\xe2\x80\x94 \xc3\xa9 \xf0\x9f\x99\x82");
}

// Strings a results file holds (a CPU model, a library version) reach the terminal as text: compare, report
// and check print them escaped, whatever the format.
TEST(Unseen, NoCommandPrintsAControlCharacterRaw) {
  fs::path d = fresh_dir("unseen-compare-escape");
  Results a = one_cell(true), b = one_cell(true);
  b.machine["libraries"]["openblas"] = "OpenBLAS\x1b]0;PWNED\x07\x1b[31mRED";
  b.machine["libraries"]["glibc"] = "2.36\x1b[2J";
  const fs::path pa = save(d, "a", a), pb = save(d, "b", b);
  for (const std::string& cmd : {"compare " + pa.string() + " " + pb.string(),
                                 "compare --all " + pa.string() + " " + pb.string(),
                                 "compare --format md " + pa.string() + " " + pb.string()}) {
    CliRun r = run_cli(cmd);
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << cmd << ": " << r.out;
    EXPECT_EQ(r.out.find('\x07'), std::string::npos) << cmd << ": " << r.out;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << cmd << ": " << r.err;
  }
  CliRun r = run_cli("compare " + pa.string() + " " + pb.string());
  EXPECT_NE(r.out.find("\\x1b[2J"), std::string::npos) << "shown, escaped: " << r.out;
  // The CPU's name holds none (a machine's never does): refused, and the refusal prints none either.
  b.machine["cpu_model"] = "Intel\x1b]0;PWNED\x07\x1b[31mRED";
  fs::remove_all(pb);
  save(d, "b", b);
  r = run_cli("compare " + pa.string() + " " + pb.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("machine.cpu_model holds byte 0x1b (a control character)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  fs::remove_all(d);
}

// A copy `db` of the history `good` changed by another program (SQLite running `sql`), and what `detaudit
// history` says of it: exit 2, saying `says`.
CliRun history_of_edit(const std::string& good, const std::string& db, const char* sql, const char* says) {
  fs::copy_file(good, db);
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(h, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(h);
  sqlite3_close(h);
  CliRun res = run_cli("history --history " + db);
  EXPECT_EQ(res.code, 2) << sql << ": " << res.out << res.err;
  EXPECT_NE(res.err.find(says), std::string::npos) << sql << ": " << res.err;
  return res;
}

// The history `good` with one edit, read as before.
void history_of_edit_accepted(const std::string& good, const std::string& db, const char* sql) {
  fs::copy_file(good, db);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(h);
  EXPECT_EQ(run_cli("history --history " + db).code, 0) << sql;
}

// A qualify's probe in the history ran its level's suite: the quick suite's workloads at level 1, the full one's at 3,
// and each of them if it finished.
TEST(Unseen, AQualifyInTheHistoryRanItsLevelsSuite) {
  fs::path d = fresh_dir("unseen-history-qualify-level");
  fs::create_directories(d);
  ProbePlan quick;
  ASSERT_TRUE(make_plan("quick", "cpu-ref", "", 0, 120, &quick).is_ok());  // (the suite's repeats, as qualify runs it)
  Results r;
  r.machine = test::machine_json();
  r.started_at = r.finished_at = "2026-12-04T00:00:00Z";
  r.command = "detaudit qualify --level 1 --targets cpu-ref";
  r.plan = quick.to_json();
  for (const Spec& w : quick.workloads)  // (a finished run holds a cell of each workload of its plan)
    if (applicable(quick.targets[0], w)) {
      r.observations.push_back(test::ran(w.str(), quick.targets[0].str(), std::vector(size_t(quick.repeats), test::fingerprint('a'))));
      r.observations.back().verdict = Verdict::kPass;
      r.observations.back().verdict_reason = "test (not compared with the oracle)";
    }
  ASSERT_FALSE(r.observations.empty());
  const std::string good = (d / "good.db").string();
  ASSERT_TRUE(record_run(good, RunKind::kQualify, r, (d / "q").string(), 0).is_ok());
  { const auto h = run_cli("history --history " + good); ASSERT_EQ(h.code, 0) << h.err; }
  history_of_edit(good, (d / "level3.db").string(), "UPDATE runs SET command = replace(command, '--level 1', '--level 3')",
                  "run 1: its command runs the full suite's");
  // A finished run holds a cell of every target and workload of its plan: one taken out, with the run's counts
  // mended to match, is refused; a run that did not finish may lack it.
  history_of_edit(good, (d / "cut.db").string(),
                  "DELETE FROM cells WHERE workload = (SELECT max(workload) FROM cells); UPDATE runs SET cells = cells - 1, "
                  "pass = pass - 1",
                  "run 1: the run finished, but it holds no cell of ");
  history_of_edit_accepted(good, (d / "unfinished.db").string(),
                           "DELETE FROM cells WHERE workload = (SELECT max(workload) FROM cells); UPDATE runs SET cells = "
                           "cells - 1, pass = pass - 1, finished_at = ''");
  fs::remove_all(d);
}

// A history another program changed is refused in one line naming the run and the column, never shown as
// if its values were judgments: a verdict no detaudit gives, a fingerprint of other digits, a time that is
// no time, negative counts, a run kind detaudit has not, a training row's bad fingerprint or seed.
TEST(Unseen, AHistoryChangedByAnotherProgramIsRefused) {
  fs::path d = fresh_dir("unseen-history-edited");
  fs::create_directories(d);
  Results r = one_cell(true);
  r.observations[0].oracle = OracleDistance{};  // (compared with its oracle: a cell that ran has a distance)
  r.observations[0].oracle->err_ratio = 0;
  r.observations[0].seconds = {0.001, 0.001};  // (and was timed)
  r.training = {training_run({{"key", "d|cpu|1000|0"}, {"condition", "d"}, {"target", "cpu"}, {"seed", 1000},
                              {"replicate", 0}, {"status", "ok"}, {"final_loss", 0.5}, {"curve", {0.5}},
                              {"model", "autoencoder"}, {"design", "sony2021"},
                              {"weights_fingerprint", test::fingerprint('e')}})};
  const std::string good = (d / "good.db").string();
  r.command = "detaudit qualify --level 2";
  ASSERT_TRUE(record_run(good, RunKind::kQualify, r, (d / "r").string(), 0).is_ok());
  { const auto h = run_cli("history --history " + good); ASSERT_EQ(h.code, 0) << h.err; }
  const std::pair<const char*, const char*> edits[] = {
      {"UPDATE cells SET verdict = 'MAYBE'", "verdict 'MAYBE' is not PASS, FAIL, EXPECTED, WARN or SKIP"},
      // A qualify trains at levels 2 and 3 only, and a probe, a training design or a qualify is recorded when it ends.
      {"UPDATE runs SET command = replace(command, '--level 2', '--level 1')",
       "run 1: a qualify at level 1 with 1 training runs (level 1 trains nothing; levels 2 and 3 train)"},
      {"UPDATE runs SET recorded_at = '2026-12-03T00:00:00Z', started_at = '2026-12-03T00:00:00Z'",
       "is not a time before the run was recorded (by the process that ran it, on its clock)"},
      {"UPDATE cells SET fingerprints = 'zz'", "fingerprints 'zz' is not 32 hex digits"},
      {"UPDATE runs SET started_at = 'garbage'", "started_at 'garbage' is not a time"},
      {"UPDATE cells SET repeats = -3", "repeats '-3' is not a count"},
      {"UPDATE cells SET distinct_outputs = 9", "distinct_outputs '9' is not a count of at most its repeats"},
      {"UPDATE cells SET status = 'skipped', reason = 'no device'", "fingerprints '", },
      {"UPDATE cells SET distinct_outputs = 0, fingerprints = ''", "distinct_outputs '0' is not at least 1"},
      {"UPDATE cells SET distinct_outputs = 2", "distinct_outputs '2' is not the number of fingerprints"},
      {"UPDATE cells SET status = 'fine'", "status 'fine' is not ok, crashed"},
      {"UPDATE cells SET median_seconds = -1", "median_seconds '-1' is not a finite number of 0 or more"},
      {"UPDATE training SET weights_fingerprint = 'zz'", "fingerprints 'zz' is not 32 hex digits"},
      {"UPDATE training SET seed = -1", "is not a count"},
      {"UPDATE machines SET cores = -4", "cores -4"},
      {"UPDATE machines SET gpus = 'nope'", "cpu_features, cores or gpus is not the machine of run 1"},
      {"UPDATE machines SET gpus = '[\"H100\"]'", "cpu_features, cores or gpus is not the machine of run 1"},
      {"UPDATE machines SET gpus = '[{\"name\": \"H100\"}]'", "cpu_features, cores or gpus is not the machine of run 1"},
      {"INSERT INTO machines SELECT 'ffffffffffffffff', cpu_model, cpu_features, cores, '[1]', identity, first_seen, "
       "last_seen FROM machines",  // (a machine no run names)
       "are not a count, two times in order and a list of GPUs"},
      {"UPDATE machines SET first_seen = '2030-01-01T00:00:00Z'", "are not a count, two times in order and a list"},
      {"UPDATE runs SET tool_version = 'banana'", "tool_version 'banana' is not a version"},
      {"UPDATE runs SET tool_version = '9.9'", "tool_version '9.9' is not the one its software column records"},
      {"UPDATE runs SET tool_commit = 'aaaaaaaaaaaa'", "tool_commit 'aaaaaaaaaaaa' is not the one its software column records"},
      {"UPDATE runs SET recorded_at = '2000-01-01T00:00:00Z'", "recorded_at '2000-01-01T00:00:00Z' is not a time after"},
      {"UPDATE runs SET exit_code = 99", "exit_code '99' is not an exit code detaudit gives"},
      {"UPDATE runs SET machine = '{not json'", "machine '(not a JSON object)'"},
      {"UPDATE runs SET cells = 5", "cells '5' is not the sum of its verdict counts"},
      {"PRAGMA foreign_keys = OFF; UPDATE runs SET machine_key = 'ffffffffffffffff'",
       "machine_key 'ffffffffffffffff' is not the key of a machine of the history"},
      {"PRAGMA foreign_keys = OFF; INSERT INTO cells SELECT 99, workload, target, status, reason, verdict, "
       "verdict_reason, repeats, distinct_outputs, fingerprints, err_ratio, median_seconds, rows_fingerprint FROM cells",
       "1 cell or training rows belong to no run"},
      {"UPDATE runs SET software = '{not json'", "software is not the software a run records"},
      {"UPDATE runs SET software = json_set(software, '$.extra', 1)", "software is not the software a run records"},
      {"UPDATE cells SET workload = 'reduce?op=bogus'", "workload 'reduce?op=bogus' is not a workload spec"},
      {"UPDATE training SET target = 'nope?x=1'", "target 'nope?x=1' is not a target spec"},
      {"UPDATE cells SET verdict = 'P' || char(27) || '[2J'", "verdict 'P\\x1b[2J'"},
      {"UPDATE runs SET kind = 'probe'", "a probe run with training rows"},
      {"UPDATE machines SET cores = 'two'", "a machine whose key or core count is not what detaudit writes"},
      {"UPDATE cells SET status = 'error', reason = ''", "reason '' is not why a cell that did not finish did not"},
      {"UPDATE training SET condition = 'f'", "a training row with a condition or loss no run has"},
      {"UPDATE training SET final_loss = -1", "a training row with a condition or loss no run has"},
      {"UPDATE cells SET distinct_outputs = 2, fingerprints = fingerprints || ' ' || replace(fingerprints, 'a', 'b')",
       "verdict 'PASS' is not the verdict of a cell that promised one output and gave several"},
      {"UPDATE runs SET kind = 'train'", "a training run with probe cells (a training design probes nothing)"},
      {"DELETE FROM cells", "a run whose count of cells or training runs is not the number of its rows"},
      {"UPDATE runs SET training_runs = 3", "a run whose count of cells or training runs is not the number of its rows"},
      {"UPDATE runs SET pass = 0, fail = 1", "a run whose verdict counts are not those of its cells"},
      {"UPDATE runs SET machine = json_set(machine, '$.cpu_model', 'AMD EPYC 9999')",
       "is not the key of the run's machine"},
      {"UPDATE runs SET machine = json_set(machine, '$.hostname', 'h1'), hostname = 'other'", "hostname 'other' is not the host name of the run's machine"},
      {"UPDATE runs SET recorded_at = '2099-01-01T00:00:00Z'", "recorded_at '2099-01-01T00:00:00Z' is not a time that has come"},
      {"UPDATE runs SET finished_at = '2098-01-01T00:00:00Z'", "finished_at '2098-01-01T00:00:00Z' is not a time before the "
                                                               "run was recorded"},
      {"UPDATE training SET status = 'crashed', verdict = 'FAIL'", "a training run that did not finish, with a final loss or weights"},
      {"UPDATE training SET status = 'crashed'", "a training row whose verdict is not what its status and condition give"},
      {"UPDATE machines SET cores = 0", "cpu_model, cpu_features, cores or gpus is not the machine of run 1"},
      {"UPDATE machines SET cpu_model = 'Other CPU'", "cpu_model, cpu_features, cores or gpus is not the machine of run 1"},
      {"UPDATE cells SET reason = 'timeout after 60 s'", "reason 'timeout after 60 s' is not empty for a cell that finished"},
      {"UPDATE training SET key = 'zzz'", "a training row whose key is not its condition|target|seed|replicate"},
      {"UPDATE runs SET software = json_set(software, '$.libraries.openblas', '0.3.26')",
       "software 'libraries' is not the libraries of the run's machine"},
      {"UPDATE cells SET status = 'crashed', reason = 'SIGILL', fingerprints = '', distinct_outputs = 0, err_ratio = NULL",
       "verdict 'PASS' is not a verdict of a cell whose status is crashed"},
      // A crash of a target that needs nothing a machine may lack is not EXPECTED; a CPU cell that ran is EXPECTED
      // only where its target may vary; a PASS whose error is beyond a budget of the bound itself.
      {"UPDATE cells SET status = 'timeout', reason = 'no result after 1 s', fingerprints = '', distinct_outputs = 0, "
       "err_ratio = NULL, verdict = 'EXPECTED'; UPDATE runs SET pass = 0, expected = 1",
       "verdict 'EXPECTED' is not a verdict of a cell whose status is timeout on a target that needs nothing"},
      {"UPDATE cells SET verdict = 'EXPECTED'; UPDATE runs SET pass = 0, expected = 1",
       "verdict 'EXPECTED' is not a verdict of a cell that ran on a target not permitted to vary"},
      {"UPDATE cells SET err_ratio = 5.0", "verdict 'PASS' is not the verdict of a cell whose error is 5 x its summation"},
      // Rows moved to other valid targets or workloads than the run set out to run, and the run's own columns.
      {"UPDATE cells SET target = 'cpu?order=pairwise&threads=1'",
       "a cell of target 'cpu?order=pairwise&threads=1', which is not one of its run's plan"},
      {"UPDATE cells SET workload = 'matmul?m=8&n=8&k=8'", "a cell of workload 'matmul?m=8&n=8&k=8', which is not one"},
      {"UPDATE training SET target = 'cpu-ref', key = 'd|cpu-ref|1000|0'",
       "a training run of target 'cpu-ref', which is not one of its run's plan"},
      {"UPDATE training SET target = 'cpu?threads=01'", ""},  // (below: another spelling of its target is its target)
      {"UPDATE runs SET plan = 'garbage'", "a plan that is not {\"targets\": [...], \"workloads\": [...]}"},
      {"UPDATE runs SET plan = json_set(plan, '$.extra', 1)", "a plan that is not"},
      {"UPDATE runs SET plan = json_set(plan, '$.targets', json_array(1))", "a plan that is not"},
      {"UPDATE runs SET kind = 'fleet'", "a run whose command is not one of its kind"},
      {"UPDATE runs SET kind = 'probe', training_runs = 0; DELETE FROM training", "a run whose command is not one of its kind"},
      {"UPDATE runs SET command = 'detaudit probe --suite quick'", "a run whose command is not one of its kind"},
      {"UPDATE runs SET results_dir = 'relative/dir'", "results folder that is not an absolute, normal path"},
      {"UPDATE runs SET results_dir = results_dir || '/../x'", "results folder that is not an absolute, normal path"},
      {"UPDATE runs SET results_dir = results_dir || '/'", "results folder that is not an absolute, normal path"},
      {"UPDATE training SET replicate = 3", "a training row whose key is not its condition|target|seed|replicate"},
      {"DELETE FROM training; UPDATE runs SET kind = 'probe', training_runs = 0, exit_code = 1",
       "a probe run that exited 1 (a FAIL) without a failed cell"},
      // A training design's exit code is what its runs give, and its rows are of the model its command trains.
      {"DELETE FROM cells; UPDATE runs SET kind = 'train', command = 'detaudit train autoencoder --seeds 1 --targets cpu', "
       "cells = 0, pass = 0, exit_code = 0",
       ""},
      {"DELETE FROM cells; UPDATE runs SET kind = 'train', command = 'detaudit train autoencoder --targets cpu', cells = 0, "
       "pass = 0, exit_code = 1",
       "a training run whose exit code is not what its runs give (1 exactly when one FAILed)"},
      {"DELETE FROM cells; UPDATE runs SET kind = 'train', command = 'detaudit train autoencoder', cells = 0, pass = 0, "
       "exit_code = 0; UPDATE training SET status = 'timeout', final_loss = NULL, weights_fingerprint = '', verdict = 'FAIL'",
       "a training run whose exit code is not what its runs give"},
      {"DELETE FROM cells; UPDATE runs SET kind = 'train', command = 'detaudit train prednet', cells = 0, pass = 0, "
       "exit_code = 0",
       "a training run with rows of a model its command does not train"},
  };
  int i = 0;
  for (auto [sql, says] : edits) {
    const std::string db = (d / ("edited" + std::to_string(i++) + ".db")).string();
    if (!*says) {  // an edit that changes nothing a reader could tell apart: read as before
      history_of_edit_accepted(good, db, sql);
      continue;
    }
    const CliRun res = history_of_edit(good, db, sql, says);
    EXPECT_NE(res.err.find("changed by another program"), std::string::npos) << res.err;
    EXPECT_EQ(res.err.find('\x1b'), std::string::npos) << res.err;
    EXPECT_EQ(res.out.find('\x1b'), std::string::npos) << res.out;
  }
  {
    // Bytes of no UTF-8 in a row: refused in one line, in JSON too, every byte escaped (JSON output once threw
    // on them, printed "internal error" and a raw 0xFF).
    const std::string db = (d / "not-utf8.db").string();
    history_of_edit(good, db, "UPDATE cells SET workload = CAST(X'72656475636583FF' AS TEXT)", "is not a workload spec");
    const CliRun res = run_cli("history --format json --history " + db);
    EXPECT_EQ(res.code, 2);
    EXPECT_EQ(res.err.find("internal error"), std::string::npos) << res.err;
    EXPECT_EQ(std::count(res.err.begin(), res.err.end(), '\n'), 1) << res.err;
    EXPECT_NE(res.err.find("\\xff"), std::string::npos) << res.err;
    for (const std::string* text : {&res.err, &res.out})
      EXPECT_EQ(text->find('\xff'), std::string::npos) << *text;
    EXPECT_TRUE(nlohmann::json::accept(res.out)) << res.out;
  }
  {
    // Another spelling of a spec is the same cell, shown as detaudit writes it (never a cell of its own).
    const std::string db = (d / "spelled.db").string();
    fs::copy_file(good, db);
    edit_history(db, "UPDATE cells SET target = replace(target, 'threads=1', 'threads=01')");
    const CliRun res = run_cli("history --format json --history " + db);
    EXPECT_EQ(res.code, 0) << res.err;
    EXPECT_EQ(res.out.find("threads=01"), std::string::npos) << res.out;
    EXPECT_NE(res.out.find(r.observations[0].target), std::string::npos) << res.out;
  }
  {
    // A probe and a check of its results record one run twice: the same outputs of each cell.
    Results probe_only = one_cell(true);
    probe_only.observations[0].oracle = r.observations[0].oracle;
    probe_only.observations[0].seconds = r.observations[0].seconds;
    const std::string db = (d / "twice.db").string();
    ASSERT_TRUE(record_run(db, RunKind::kProbe, probe_only, (d / "p").string(), 0).is_ok());
    probe_only.command = "detaudit check p --baseline b.json";
    ASSERT_TRUE(record_run(db, RunKind::kCheck, probe_only, (d / "p").string(), 0).is_ok());
    ASSERT_EQ(run_cli("history --history " + db).code, 0);
    history_of_edit(db, (d / "twice-edited.db").string(),
                    ("UPDATE cells SET fingerprints = '" + test::fingerprint('b') + "' WHERE run_id = 2").c_str(),
                    "runs 1 and 2 record one run's cell");
    history_of_edit(db, (d / "twice-command.db").string(), "UPDATE runs SET command = 'detaudit probe --targets cpu-ref' WHERE id = 1",
                    "run 1: the command asks for --targets cpu-ref");
  }
  {
    // On a machine without a GPU, a GPU target's cell that ran (or a training run) is another target's row moved;
    // its skipped cells are what every CPU machine records.
    Results cpu_only = r;
    cpu_only.machine["gpus"] = nlohmann::json::array();
    const std::string db = (d / "cpu-only.db").string();
    ASSERT_TRUE(record_run(db, RunKind::kQualify, cpu_only, (d / "c").string(), 0).is_ok());
    ASSERT_EQ(run_cli("history --history " + db).code, 0);
    history_of_edit(db, (d / "cpu-only-cuda.db").string(), "UPDATE cells SET target = 'cuda:0'",
                    "run 1: target 'cuda:0' ran on a machine without a GPU");
    history_of_edit(db, (d / "cpu-only-cuda-training.db").string(), "UPDATE training SET target = 'cuda:0'",
                    "run 1: target 'cuda:0' ran on a machine without a GPU");
    const std::string skipped = (d / "cpu-only-skipped.db").string();
    fs::copy_file(db, skipped);
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(skipped.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "UPDATE cells SET target = 'cuda:0', status = 'skipped', reason = 'no CUDA device', "
                              "fingerprints = '', distinct_outputs = 0, verdict = 'SKIP'; UPDATE runs SET pass = 0, skip = 1, "
                              "plan = json_set(plan, '$.targets[#]', 'cuda:0')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(h);
    const CliRun res = run_cli("history --history " + skipped);
    EXPECT_EQ(res.code, 0) << res.err;
  }
  fs::remove_all(d);
}

// Every rule a results file obeys holds for the rows of a history another program changed, each held against its
// run: a training row against the design its `train` command names (its condition's variant, that design, a seed of
// it, a finite loss and weights where it finished, every run of a design that finished), a probe cell against its
// command (--repeats, --gpu-only) and the verdict rules (a cell that ran is no SKIP, nor a WARN where they give
// PASS; cpu-ref is never skipped; a distance or a reason; a median of a year at most), and a machine against the
// runs made on it. Refused by `history` and by a command that records into it, an older schema's included.
TEST(Unseen, AHistoryRowThatContradictsItsRunIsRefused) {
  fs::path d = fresh_dir("unseen-history-contradicts-run");
  fs::create_directories(d);
  // A design of one base target, 2 seeds and 1 replicate, as `train` runs it: (a) and (c) on its nondeterministic
  // variant, (b), (d) and (e) on its deterministic one.
  Results train;
  train.machine = test::machine_json();
  train.started_at = train.finished_at = "2026-12-04T00:00:00Z";
  train.command = "detaudit train autoencoder --design sony2021 --targets 'cpu?threads=2' --seeds 2 --replicates 1";
  const std::string det = test::canon_target("cpu?order=blocked&threads=2"),
                    nondet = test::canon_target("cpu?order=atomic&threads=2");
  char weights = '0';
  for (const char* condition : {"a", "b", "c", "d", "e"})
    for (int k = 0; k < 2; ++k) {
      const bool random = std::string("ab").find(condition) != std::string::npos;
      const std::string target = std::string("ac").find(condition) != std::string::npos ? nondet : det;
      const int seed = random ? 1000 + k : 1000, replicate = random ? 0 : k;
      nlohmann::json run = {{"key", fmt::format("{}|{}|{}|{}", condition, target, seed, replicate)},
                            {"condition", condition}, {"target", target}, {"seed", seed}, {"replicate", replicate},
                            {"status", "ok"}, {"model", "autoencoder"}, {"design", "sony2021"}, {"final_loss", 0.5},
                            {"curve", {0.5}},
                            {"weights_fingerprint", test::fingerprint(std::string(condition) == "d" ? 'd' : weights++)}};
      if (std::string(condition) == "e")
        run["nudge"] = {{"index", k}, {"parameter", 100 + k}, {"tensor", "layer 0 (conv2d) weight [100]"}, {"from", 0.5},
                        {"to", double(std::nextafter(0.5f, INFINITY))}};
      train.training.push_back(training_run(run));
    }
  const std::string good_train = (d / "train.db").string();
  ASSERT_TRUE(record_run(good_train, RunKind::kTrain, train, (d / "t").string(), 0).is_ok());
  CliRun res = run_cli("history --history " + good_train);
  ASSERT_EQ(res.code, 0) << res.err;
  // A probe of cpu-ref and a target permitted to vary, each compared with its oracle, neither of which varied.
  Results probe;
  probe.machine = test::machine_json();
  probe.started_at = probe.finished_at = "2026-12-04T00:00:00Z";
  const std::string w = test::canon_workload(kW), ref = test::canon_target("cpu-ref");
  probe.command = "detaudit probe --targets 'cpu-ref,cpu?order=atomic&threads=2' --workloads '" + kW + "' --repeats 2";
  probe.plan = {{"targets", {ref, nondet}}, {"workloads", {w}}, {"repeats", 2}};
  for (auto [target, fp, ratio] : {std::tuple{ref, 'a', 0.0}, std::tuple{nondet, 'b', 0.5}}) {
    Observation o = test::ran(w, target, {test::fingerprint(fp), test::fingerprint(fp)});
    o.oracle = OracleDistance{};
    o.oracle->err_ratio = ratio;
    o.seconds = {0.001, 0.001};
    o.verdict = Verdict::kPass;
    if (target == nondet) o.verdict_reason = "permitted to vary (order=atomic); no variation seen in 2 runs";
    probe.observations.push_back(o);
  }
  const std::string good_probe = (d / "probe.db").string();
  ASSERT_TRUE(record_run(good_probe, RunKind::kProbe, probe, (d / "p").string(), 0).is_ok());
  res = run_cli("history --history " + good_probe);
  ASSERT_EQ(res.code, 0) << res.err;

  struct Edit {
    const std::string* db;
    const char *sql, *says;
  };
  const Edit edits[] = {
      // The training rows against their design.
      {&good_train,
       "UPDATE training SET target = replace(target, 'atomic', 'blocked'), key = replace(key, 'atomic', 'blocked') "
       "WHERE condition = 'a' AND seed = 1000",
       "a training run of condition (a) on cpu?order=blocked&threads=2&isa=auto, which is not a nondeterministic variant"},
      {&good_train, "UPDATE runs SET command = replace(command, 'cpu?threads=2', 'cpu?threads=4')",
       "run 1: a training run on cpu?order=atomic&threads=2&isa=auto, which is no variant of the targets its command "
       "names"},
      // Without --targets the command names the default targets, threads=2 and threads=4: no row ran on threads=4.
      {&good_train, "UPDATE runs SET command = replace(command, ' --targets ''cpu?threads=2''', '')",
       "run 1: no training run on cpu?order=blocked&threads=4&isa=auto or cpu?order=atomic&threads=4&isa=auto, the "
       "variants of a target its command names"},
      {&good_train, "UPDATE training SET design = 'paper'",
       "run 1: a training run of design 'paper', but its command trains sony2021"},
      {&good_train,
       "UPDATE training SET seed = 9223372036854775807, key = replace(key, '|1001|', '|9223372036854775807|') WHERE seed "
       "= 1001 AND condition = 'a'",
       "training.seed 9223372036854775807 is not a seed of the design (2 seeds from 1000"},
      {&good_train, "UPDATE runs SET command = replace(command, '--seeds 2', '--seeds 5')",
       "run 1: 2 training runs of condition (a) on cpu?order=atomic&threads=2&isa=auto, but the design its command names "
       "runs 5"},
      {&good_train, "UPDATE training SET final_loss = 1e999 WHERE condition = 'b'",
       "a training row with a condition or loss no run has"},
      {&good_train, "UPDATE training SET weights_fingerprint = '' WHERE condition = 'b' AND seed = 1000",
       "a training run that finished without the fingerprint of its final weights"},
      // The probe cells against their command and the verdict rules.
      {&good_probe, "UPDATE cells SET verdict = 'SKIP' WHERE target LIKE 'cpu?%'; UPDATE runs SET pass = 1, skip = 1",
       "verdict 'SKIP' is not a verdict of a cell whose status is ok"},
      {&good_probe, "UPDATE cells SET verdict = 'WARN' WHERE target LIKE 'cpu?%'; UPDATE runs SET pass = 1, warn = 1",
       "verdict 'WARN' is not a verdict the verdict rules give a cell that ran with 1 output here (PASS"},
      {&good_probe,
       "UPDATE cells SET status = 'skipped', reason = 'no', fingerprints = '', distinct_outputs = 0, err_ratio = NULL, "
       "median_seconds = NULL, verdict = 'SKIP' WHERE target = 'cpu-ref'; UPDATE runs SET pass = 1, skip = 1",
       "status 'skipped' is not a status of the oracle backend's cell"},
      {&good_probe, "UPDATE cells SET repeats = 5 WHERE target = 'cpu-ref'",
       "of 5 repeats, but its command asks for --repeats 2"},
      {&good_probe, "UPDATE runs SET command = replace(command, '--repeats 2', '--repeats 3')",
       "of 2 repeats, but its command asks for --repeats 3"},
      // A command that names no --repeats asked for its suite's (the quick suite's 10).
      {&good_probe, "UPDATE runs SET command = replace(command, ' --repeats 2', '')",
       "of 2 repeats, but its command asks for --repeats 10"},
      {&good_probe, "UPDATE runs SET command = command || ' --gpu-only'",
       "run 1: the command gives --gpu-only beside --targets"},
      {&good_probe, "UPDATE cells SET median_seconds = 1e300 WHERE target = 'cpu-ref'",
       "median_seconds '1e+300' is not a time of 0, or from a nanosecond (a clock's tick) to a year"},
      {&good_probe, "UPDATE cells SET median_seconds = 0 WHERE target = 'cpu-ref'",
       "median_seconds '0' is not how a cell that ran is recorded"},
      {&good_probe, "UPDATE cells SET median_seconds = 1e-300 WHERE target = 'cpu-ref'",
       "median_seconds '1e-300' is not a time of 0, or from a nanosecond (a clock's tick) to a year"},
      {&good_probe, "UPDATE cells SET err_ratio = NULL WHERE target LIKE 'cpu?%'",
       "err_ratio 'NULL' is not how a cell that ran is recorded"},
      {&good_probe, "UPDATE cells SET median_seconds = NULL WHERE target = 'cpu-ref'",
       "median_seconds 'NULL' is not how a cell that ran is recorded"},
      // A FAIL of a cell whose outputs and error pass, unless its reason names a finding the row does not keep.
      {&good_probe,
       "UPDATE cells SET verdict = 'FAIL' WHERE target = 'cpu-ref'; UPDATE runs SET pass = 1, fail = 1, exit_code = 1",
       "verdict 'FAIL' is not a verdict of a cell that ran with 1 output here unless its reason names warm-up run"},
      {&good_probe,
       "INSERT INTO machines VALUES ('deadbeefdeadbeef', 'X', ' ', 1, '[]', '{}', '2026-12-04T00:00:00Z', "
       "'2026-12-04T00:00:00Z')",
       "machines (deadbeefdeadbeef): no run was made on it"},
  };
  int i = 0;
  for (const Edit& e : edits) {
    const std::string db = (d / ("edited" + std::to_string(i++) + ".db")).string();
    res = history_of_edit(*e.db, db, e.sql, e.says);
    EXPECT_NE(res.err.find("changed by another program"), std::string::npos) << res.err;
    // A command that records into it refuses it alike, before its work as when it records, and leaves it as it was.
    const int64_t size = int64_t(fs::file_size(db));
    for (const Status& st : {check_history(db), record_run(db, RunKind::kProbe, one_cell(true), (d / "x").string(), 0)}) {
      EXPECT_FALSE(st.is_ok()) << e.sql;
      EXPECT_NE(st.message().find(e.says), std::string::npos) << e.sql << ": " << st.message();
    }
    EXPECT_EQ(int64_t(fs::file_size(db)), size) << e.sql;
  }
  // What an older detaudit recorded stands: a cell permitted to vary that did not was a WARN before it was a PASS.
  history_of_edit_accepted(good_probe, (d / "older-warn.db").string(),
                           "UPDATE cells SET verdict = 'WARN', verdict_reason = 'claimed nondeterministic (order=atomic), "
                           "no variation seen in 2 runs' WHERE target LIKE 'cpu?%'; UPDATE runs SET pass = 1, warn = 1");
  // ... and where it names one (the warm-up run's bits are not kept), the FAIL stands.
  history_of_edit_accepted(good_probe, (d / "warm-up-fail.db").string(),
                           "UPDATE cells SET verdict = 'FAIL', verdict_reason = 'the warm-up run gave bits that none of "
                           "the 2 repeats gave; promised: one output' WHERE target = 'cpu-ref'; UPDATE runs SET pass = 1, "
                           "fail = 1, exit_code = 1");
  // A count in another spelling the option parser reads: +2 is 2; one not read here (0x2) is checked against nothing.
  history_of_edit_accepted(good_train, (d / "seeds-plus.db").string(),
                           "UPDATE runs SET command = replace(command, '--seeds 2', '--seeds +2')");
  history_of_edit_accepted(good_train, (d / "seeds-hex.db").string(),
                           "UPDATE runs SET command = replace(command, '--seeds 2', '--seeds 0x2')");
  history_of_edit(good_train, (d / "seeds-plus-5.db").string(),
                  "UPDATE runs SET command = replace(command, '--seeds 2', '--seeds +5')", "but the design its command names runs 5");
  // The design's defaults are its model's (PredNet's 2 seeds), wherever the command names the model.
  history_of_edit_accepted(good_train, (d / "prednet.db").string(),
                           "UPDATE training SET model = 'prednet'; UPDATE runs SET command = replace(replace(command, "
                           "'train autoencoder', 'train --replicates 1 prednet'), ' --seeds 2 --replicates 1', '')");
  // A schema-4 history is read in a migrated copy, against the same rules.
  {
    const std::string v4 = (d / "v4.db").string();
    fs::copy_file(good_train, v4);
    edit_history(v4, "ALTER TABLE training DROP COLUMN verdict; ALTER TABLE cells DROP COLUMN rows_fingerprint; "
                     "PRAGMA user_version = 4");
    ASSERT_EQ(run_cli("history --history " + v4).code, 0);
    history_of_edit(v4, (d / "v4-edited.db").string(),
                    "UPDATE training SET target = replace(target, 'atomic', 'blocked'), key = replace(key, 'atomic', "
                    "'blocked') WHERE condition = 'c'",
                    "a training run of condition (c) on cpu?order=blocked&threads=2&isa=auto, which is not a "
                    "nondeterministic variant");
  }
  fs::remove_all(d);
}

// A history holds detaudit's tables and nothing else: a trigger, a view, a table or a column another program
// added, or a schema version its tables are not, is refused by every command, and a trigger never runs (one
// planted to delete the cells when a run is recorded deleted them while check exited 0).
TEST(Unseen, AHistoryWithAnotherProgramsSchemaIsRefusedAndNothingOfItRuns) {
  fs::path d = fresh_dir("unseen-history-schema");
  fs::create_directories(d);
  Results r = one_cell(true);
  r.observations[0].seconds = {0.001, 0.001};  // (a cell that ran was timed)
  const std::string good = (d / "good.db").string();
  ASSERT_TRUE(record_run(good, RunKind::kProbe, r, (d / "r").string(), 0).is_ok());
  const std::pair<const char*, const char*> edits[] = {
      {"CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM cells; END", "it holds trigger t"},
      {"CREATE TABLE zzz(a)", "it holds table zzz(a)"},
      {"ALTER TABLE cells ADD COLUMN zzz", "it holds table cells("},
      {"CREATE VIEW v AS SELECT * FROM runs", "it holds view v"},
      {"UPDATE runs SET exit_code = 'zero'", "a count or exit code that is no integer"},
      {"UPDATE runs SET finished_at = '2000-01-01T00:00:00Z'", "finished before it started"},
      {"UPDATE runs SET started_at = '2026-02-30T00:00:00Z'", "started_at '2026-02-30T00:00:00Z' is not a time"},
      {"UPDATE cells SET err_ratio = 'x'", "a cell whose number is no number"},
      {"UPDATE cells SET err_ratio = 1e999", "err_ratio 'inf' is not a finite number"},
  };
  int i = 0;
  for (auto [sql, says] : edits) {
    const std::string db = (d / ("edited" + std::to_string(i++) + ".db")).string();
    history_of_edit(good, db, sql, says);
    // Recording refuses it too, and writes nothing into it.
    const auto before = slurp(db);
    std::string err;
    EXPECT_FALSE(detaudit::succeeded(record_run(db, RunKind::kCheck, r, (d / "r").string(), 0), &err)) << sql;
    EXPECT_NE(err.find(says), std::string::npos) << sql << ": " << err;
    EXPECT_EQ(slurp(db), before) << sql << ": the refused history is left as it was";
  }
  fs::remove_all(d);
}

// What qualify writes is its own: a qualify.json that is not one (the user's notes, a copy of a results file)
// is refused before the run starts, not replaced; and the default history's folder, one detaudit makes, is
// never a link to somewhere else.
TEST(Links, AForeignQualifyFileAndALinkedHistoryFolderAreRefused) {
  fs::path d = fresh_dir("links-qualify-history");
  fs::create_directories(d / "q");
  std::ofstream(d / "q" / "qualify.json") << "my notes\n";
  CliRun q = run_cli("qualify --targets cpu-ref --no-history --out " +
                     (d / "q").string());
  EXPECT_EQ(q.code, 2) << q.out << q.err;
  EXPECT_NE(q.err.find("qualify.json: exists and is not a detaudit qualify result"), std::string::npos) << q.err;
  EXPECT_EQ(slurp(d / "q" / "qualify.json"), "my notes\n");
  EXPECT_FALSE(fs::exists(d / "q" / "probe")) << "refused before it ran";

  // $HOME/.local/share/detaudit a link to another folder: refused, nothing created there.
  fs::create_directories(d / "home" / ".local" / "share");
  fs::create_directories(d / "elsewhere");
  fs::create_symlink(d / "elsewhere", d / "home" / ".local" / "share" / "detaudit");
  struct Env {
    std::string name;
    std::optional<std::string> old;
  };
  std::vector<Env> saved;
  for (const char* k : {"HOME", "DETAUDIT_HISTORY", "XDG_DATA_HOME"}) {
    const char* v = std::getenv(k);
    saved.push_back({k, v ? std::optional<std::string>(v) : std::nullopt});
  }
  ::setenv("HOME", (d / "home").c_str(), 1);
  ::unsetenv("DETAUDIT_HISTORY");
  ::unsetenv("XDG_DATA_HOME");
  const fs::path run = save(d, "run", one_cell(true));
  CliRun h = run_cli("report " + run.string());  // reads no history: the folder is not touched
  CliRun p = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=100' --repeats 2 --out " +
                     (d / "p").string());
  for (auto& e : saved)
    if (e.old) ::setenv(e.name.c_str(), e.old->c_str(), 1);
    else ::unsetenv(e.name.c_str());
  EXPECT_EQ(h.code, 0) << h.err;
  EXPECT_EQ(p.code, 2) << p.out << p.err;
  EXPECT_NE(p.err.find(".local/share/detaudit: is a symbolic link"), std::string::npos) << p.err;
  EXPECT_TRUE(fs::is_empty(d / "elsewhere")) << "no history written through the link";
  fs::remove_all(d);
}

// A fleet's directory is the fleet's: probe, train, import and report refuse to put a run's results and reports
// there (its report.md and report.html were replaced, and `fleet report` then refused the fleet).
TEST(Links, AFleetsDirectoryIsNotAResultsDirectory) {
  fs::path d = fresh_dir("fleet-dir-out");
  fs::create_directories(d / "ranks");
  std::ofstream(d / "fleet.json") << "{}";
  std::ofstream(d / "report.md") << "the fleet's report\n";
  CliRun p = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=100' --repeats 2 --no-history --out " +
                     d.string());
  EXPECT_EQ(p.code, 2) << p.out << p.err;
  EXPECT_NE(p.err.find("a fleet's directory"), std::string::npos) << p.err;
  EXPECT_FALSE(fs::exists(d / "results.json"));
  EXPECT_EQ(slurp(d / "report.md"), "the fleet's report\n");
  fs::remove_all(d);
}

// A command is recorded word for word: an --out path with a blank and an option's name in it stays one word
// (read back as two, it made the run's own results contradict its plan); and a fleet rank run again with another
// plan is refused without touching the record of the rank that finished there.
TEST(Unseen, AWordWithABlankStaysOneWordAndARefusedRankKeepsItsRecord) {
  const std::vector<std::vector<std::string>> lines = {
      {"detaudit", "probe", "--out", "e6 --suite full", "--targets", "cpu?order=blocked&threads=2"},
      {"detaudit", "fleet", "--out", "it's \"here\"", "--rank", "0", ""},
      {"/usr/bin/detaudit", "check", "a\\b", "--baseline", "tab\there"}};
  for (const auto& words : lines) EXPECT_EQ(command_words(command_text(words)), words) << command_text(words);
  EXPECT_EQ(command_words("detaudit probe --targets cpu-ref"),
            (std::vector<std::string>{"detaudit", "probe", "--targets", "cpu-ref"}))
      << "a line recorded before quoting reads as its plain words";
  EXPECT_EQ(shell_word("cpu?order=blocked&threads=2"), "'cpu?order=blocked&threads=2'");
  EXPECT_EQ(shell_word("--repeats=2"), "--repeats=2");

  const fs::path d = fresh_dir("unseen-words");
  fs::create_directories(d);
  const fs::path out = d / "e6 --suite full";
  const std::string plan = " --targets cpu-ref --workloads 'reduce?op=sum&n=10' --repeats 2 --no-history";
  CliRun r = run_cli("probe" + plan + " --out '" + out.string() + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(run_cli("report '" + out.string() + "'").code, 0);
  EXPECT_NE(slurp(out / "results.json").find("'" + out.string() + "'"), std::string::npos) << "recorded quoted";
  const fs::path fleet = d / "fq --rank 0";
  r = run_cli("fleet --rank 0 --ranks 1" + plan + " --out '" + fleet.string() + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  r = run_cli("fleet report '" + fleet.string() + "'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // Run again with another plan: refused, and rank 0's node.json is the finished run's still.
  fs::path node;
  for (auto& e : fs::directory_iterator(fleet / "ranks")) node = e.path() / "node.json";
  const std::string before = slurp(node);
  r = run_cli("fleet --rank 0 --ranks 1 --targets cpu-ref --workloads 'reduce?op=dot&n=10' --repeats 2 --no-history "
              "--out '" + fleet.string() + "'");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("node.json left as the earlier run wrote it"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(node), before);
  EXPECT_EQ(run_cli("fleet report '" + fleet.string() + "'").code, 0);
  fs::remove_all(d);
}

// Batch invariance's rows computed alone, where every row agreed with the product, are the product's rows: all m of
// them are the product itself, and two invariant cells of one product have one rows fingerprint. An edit that
// contradicts either is refused by every reader.
TEST(Lies, RowsComputedAloneThatContradictTheProductAreRefused) {
  const fs::path d = fresh_dir("lies-rows");
  const std::string targets = "'cpu?order=sequential,cpu?order=sequential&threads=2'";
  for (const char* rows : {"4", "2"}) {
    const fs::path p = d / (std::string("p") + rows);
    const auto r = run_cli("probe --targets " + targets + " --workloads 'batchinv?m=4&n=4&k=8&rows=" + rows +
                           "' --repeats 2 --no-history --out " + p.string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    ASSERT_EQ(run_cli("report " + p.string()).code, 0) << "the genuine run reads";
    nlohmann::json j = nlohmann::json::parse(slurp(p / "results.json"));
    ASSERT_EQ(j["observations"].size(), 2u);
    ASSERT_EQ(j["observations"][0]["batch_invariance"]["rows_differing"], 0);
    ASSERT_EQ(j["observations"][0]["fingerprints"][0], j["observations"][1]["fingerprints"][0]);
    j["observations"][1]["batch_invariance"]["rows_fingerprint"] = std::string(32, 'a');
    std::ofstream(p / "results.json") << j.dump(1) << "\n";
    const auto lie = run_cli("report " + p.string());
    EXPECT_EQ(lie.code, 2) << rows << ": " << lie.out;
    EXPECT_NE(lie.err.find(std::string(rows) == "4" ? "agreed with the product, whose fingerprint is"
                                                    : "but observations[0] of the same product has"),
              std::string::npos)
        << lie.err;
    // The rows' fingerprint taken out: no reader may then call the rows the same (check and compare would have).
    j["observations"][1]["batch_invariance"].erase("rows_fingerprint");
    std::ofstream(p / "results.json") << j.dump(1) << "\n";
    for (const std::string& cmd : {"report " + p.string(), "baseline save " + p.string() + " --out " + (d / "b.json").string(),
                                  "compare " + (d / "p4").string() + " " + p.string()}) {
      if (p == d / "p4" && cmd.starts_with("compare")) continue;  // (compared once both exist: p2 against p4)
      const auto gone = run_cli(cmd);
      EXPECT_EQ(gone.code, 2) << cmd << ": " << gone.out;
      EXPECT_NE(gone.err.find("observations[1].batch_invariance lacks rows_fingerprint, which detaudit records"),
                std::string::npos)
          << gone.err;
    }
  }
  fs::remove_all(d);
}

// A fault that lands only in the rows batch invariance computes alone (the test hook flips one bit of the first) is
// changed bits to `check` against a baseline and to `compare`, though the product's bits are the same.
TEST(Unseen, ARowsOnlyFaultIsChangedBitsToCheckAndCompare) {
  const fs::path d = fresh_dir("unseen-rows");
  const std::string w = "batchinv?m=4&n=4&k=8&rows=2";
  const std::string probe = "probe --targets 'cpu?order=sequential' --workloads '" + w + "' --repeats 2 --no-history --out ";
  ASSERT_EQ(run_cli(probe + (d / "good").string()).code, 0);
  setenv("DETAUDIT_TEST_FLIP_ROWS", test::canon_workload(w).c_str(), 1);
  const auto faulty = run_cli(probe + (d / "fault").string());
  unsetenv("DETAUDIT_TEST_FLIP_ROWS");
  ASSERT_EQ(faulty.code, 1) << "the faulted rows break the promise of batch invariance: " << faulty.out;
  const std::string base = (d / "base.json").string();
  ASSERT_EQ(run_cli("baseline save " + (d / "good").string() + " --out " + base).code, 0);
  ASSERT_EQ(run_cli(probe + (d / "again").string()).code, 0);  // the same command again: a run of its own
  EXPECT_EQ(run_cli("check " + (d / "again").string() + " --baseline " + base + " --no-history").code, 0);
  auto r = run_cli("check " + (d / "fault").string() + " --baseline " + base + " --no-history");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("the rows computed alone (batch invariance) changed on the same machine key"), std::string::npos)
      << r.out;
  r = run_cli("compare " + (d / "good").string() + " " + (d / "fault").string());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("but the rows computed alone (batch invariance)"), std::string::npos) << r.out;
  fs::remove_all(d);
}

// A baseline keeps the rows a batchinv cell computed alone under the rules results.json obeys: on every batchinv cell
// that ran and no other, the product itself where every row was checked and the cell passed a promise of batch
// invariance, and one rows fingerprint for the invariant cells of one product. A baseline that breaks them would FAIL
// a genuine run, or pass one on rows it does not hold.
TEST(Lies, ABaselineWhoseRowsContradictItsCellsIsRefused) {
  const fs::path d = fresh_dir("lies-baseline-rows");
  const std::string probe = "probe --targets 'cpu?order=sequential,cpu?order=sequential&threads=2' --workloads "
                            "'batchinv?m=4&n=4&k=8&rows=2,batchinv?m=4&n=4&k=8&rows=4,matmul?m=4&n=4&k=8' --repeats 2 "
                            "--no-history --out ";
  for (const char* run : {"p", "again"}) {
    const auto r = run_cli(probe + (d / run).string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
  }
  const std::string base = (d / "base.json").string();
  ASSERT_EQ(run_cli("baseline save " + (d / "p").string() + " --out " + base).code, 0);
  ASSERT_EQ(run_cli("check " + (d / "again").string() + " --baseline " + base + " --no-history").code, 0);
  const nlohmann::json good = nlohmann::json::parse(slurp(base));
  auto entry = [&](nlohmann::json& j, const std::string& workload, bool threads2) -> nlohmann::json& {
    for (auto& e : j["entries"])
      if (e["workload"].get<std::string>().starts_with(workload) &&
          (e["target"].get<std::string>().find("threads=2") != std::string::npos) == threads2)
        return e;
    ADD_FAILURE() << "no entry " << workload;
    return j["entries"][0];
  };
  struct Case {
    const char* name;
    const char* says;
    std::function<void(nlohmann::json&)> edit;
  };
  const std::vector<Case> cases = {
      {"rows-gone", "rows_fingerprint is missing, but the cell ran",
       [&](nlohmann::json& j) { entry(j, "batchinv?m=4&n=4&k=8&rows=2", false).erase("rows_fingerprint"); }},
      {"rows-on-matmul", "rows_fingerprint is set, but matmul",
       [&](nlohmann::json& j) { entry(j, "matmul", false)["rows_fingerprint"] = std::string(32, '5'); }},
      {"rows-not-the-product", "so its rows are the product, whose fingerprint is",
       [&](nlohmann::json& j) { entry(j, "batchinv?m=4&n=4&k=8&rows=4", false)["rows_fingerprint"] = std::string(32, '7'); }},
      {"rows-split", "rows that agree with one product are its rows",
       [&](nlohmann::json& j) { entry(j, "batchinv?m=4&n=4&k=8&rows=2", true)["rows_fingerprint"] = std::string(32, '3'); }},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    const std::string path = (d / (std::string(c.name) + ".json")).string();
    std::ofstream(path) << j.dump(1) << "\n";
    const auto res = run_cli("check " + (d / "again").string() + " --baseline " + path + " --no-history");
    EXPECT_EQ(res.code, 2) << c.name << ": " << res.out;
    EXPECT_NE(res.err.find(c.says), std::string::npos) << c.name << ": " << res.err;
  }
  fs::remove_all(d);
}

// A batchinv cell computes the matmul of its sizes, dist and seed: the same inputs, the same oracle. Where the two give
// the same bits, their oracle distances are one, as for two targets of one workload: a PASS and a FAIL of one tensor
// cannot both be true.
TEST(Lies, OneProductsBitsUnderTwoWorkloadsHaveOneDistance) {
  const fs::path d = fresh_dir("lies-product-distance");
  ASSERT_EQ(run_cli("probe --targets 'cpu-ref,cpu?order=sequential' --workloads 'batchinv?m=8&n=8&k=8&rows=4,"
                    "matmul?m=8&n=8&k=8' --repeats 2 --no-history --quiet --out " + (d / "p").string())
                .code,
            0);
  ASSERT_EQ(run_cli("report " + (d / "p").string()).code, 0);
  nlohmann::json j = nlohmann::json::parse(slurp(d / "p" / "results.json"));
  std::string batchinv_fp;
  for (auto& o : j["observations"])
    if (o["workload"].get<std::string>().starts_with("batchinv") && o["target"].get<std::string>().starts_with("cpu?"))
      batchinv_fp = o["fingerprints"][0];
  int edited = 0;
  for (auto& o : j["observations"])
    if (o["workload"].get<std::string>().starts_with("matmul") && o["target"].get<std::string>().starts_with("cpu?")) {
      ASSERT_EQ(o["fingerprints"][0], batchinv_fp) << "one product, one tensor";
      o["oracle"]["max_ulp"] = 5000, o["oracle"]["max_rel_err"] = 4e-4, ++edited;
    }
  ASSERT_EQ(edited, 1);
  std::ofstream(d / "p" / "results.json") << j.dump(1) << "\n";
  const auto r = run_cli("report " + (d / "p").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("(the same product as matmul?m=8&n=8&k=8"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the same bits against one oracle have one distance"), std::string::npos) << r.err;
  fs::remove_all(d);
}

// The history keeps a batch-invariance cell's rows beside its product: the same fault (the product's bits unchanged)
// is a change of the cell in `history`, in text and JSON; a row edited to give such rows to another cell is refused.
TEST(Unseen, ARowsOnlyFaultIsAChangeInTheHistory) {
  const fs::path d = fresh_dir("unseen-rows-history");
  const std::string db = (d / "h.db").string();
  const std::string w = "batchinv?m=4&n=4&k=8&rows=2";
  const std::string probe = "probe --targets 'cpu?order=sequential' --workloads '" + w + "' --repeats 2 --history " +
                            db + " --out ";
  ASSERT_EQ(run_cli(probe + (d / "good").string()).code, 0);
  setenv("DETAUDIT_TEST_FLIP_ROWS", test::canon_workload(w).c_str(), 1);
  const auto faulty = run_cli(probe + (d / "fault").string());
  unsetenv("DETAUDIT_TEST_FLIP_ROWS");
  ASSERT_EQ(faulty.code, 1) << faulty.out;
  const auto good = nlohmann::json::parse(slurp(d / "good" / "results.json"));
  const auto bad = nlohmann::json::parse(slurp(d / "fault" / "results.json"));
  const nlohmann::json &og = good["observations"][0], &ob = bad["observations"][0];
  ASSERT_EQ(og["fingerprints"][0], ob["fingerprints"][0]) << "the product's bits are the same";
  const std::string rows_good = og["batch_invariance"]["rows_fingerprint"], rows_bad = ob["batch_invariance"]["rows_fingerprint"];
  ASSERT_NE(rows_good, rows_bad);
  auto r = run_cli("history --history " + db + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto h = nlohmann::json::parse(r.out);
  ASSERT_EQ(h["cells"].size(), 1u) << r.out;
  const auto& segments = h["cells"][0]["machines"][0]["segments"];
  ASSERT_EQ(segments.size(), 2u) << "a change of the rows alone is a change of the cell: " << r.out;
  EXPECT_EQ(segments[0]["rows_fingerprint"], rows_good);
  EXPECT_EQ(segments[1]["rows_fingerprint"], rows_bad);
  r = run_cli("history --history " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" rows " + rows_bad.substr(0, 16)), std::string::npos) << r.out;
  // Rows that are no fingerprint, or rows on a cell that computed none, are another program's edit.
  ASSERT_EQ(run_cli("probe --targets 'cpu?order=sequential' --workloads 'matmul?m=4&n=4&k=8' --repeats 2 --history " + db +
                    " --out " + (d / "plain").string())
                .code,
            0);
  // A run of two targets that promise batch invariance, the rows a fourth and all of the product.
  ASSERT_EQ(run_cli("probe --targets 'cpu?order=sequential,cpu?order=sequential&threads=2' --workloads "
                    "'batchinv?m=4&n=4&k=8&rows=2,batchinv?m=4&n=4&k=8&rows=4' --repeats 2 --history " + db + " --out " +
                    (d / "two").string())
                .code,
            0);
  ASSERT_EQ(run_cli("history --history " + db).code, 0);
  using Edit = std::pair<std::string, const char*>;  // (SQL, what the refusal says)
  const std::string other_rows = std::string(32, '3'), not_the_product = std::string(32, '7');
  const std::vector<Edit> edits = {
      {"UPDATE cells SET rows_fingerprint = 'zz' WHERE run_id = 1", "rows_fingerprint 'zz' is not 32 hex digits"},
      {"UPDATE cells SET rows_fingerprint = (SELECT rows_fingerprint FROM cells WHERE run_id = 1) WHERE run_id = 3",
       "is not empty for a cell that is not a batch-invariance cell that ran"},
      // The invariant cells of one product disagree on its rows; the rows of a cell that checked every row are not
      // its product.
      {"UPDATE cells SET rows_fingerprint = '" + other_rows +
           "' WHERE run_id = 4 AND workload LIKE '%rows=2%' AND target LIKE '%threads=2%'",
       "rows that agree with one product are its rows"},
      {"UPDATE cells SET rows_fingerprint = '" + not_the_product +
           "' WHERE run_id = 4 AND workload LIKE '%rows=4%' AND target LIKE '%threads=1%'",
       "is not the product's fingerprint for a cell that passed a promise of batch invariance"},
  };
  for (const auto& [edit, says] : edits) {
    const std::string copy = (d / "edited.db").string();
    fs::copy_file(db, copy, fs::copy_options::overwrite_existing);
    edit_history(copy, edit.c_str());
    r = run_cli("history --history " + copy);
    EXPECT_EQ(r.code, 2) << edit;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  fs::remove_all(d);
}
