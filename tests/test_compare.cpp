// detaudit compare: two results directories written with save_results, compared by the CLI binary
// (exit codes, the cells named, the machine differences) and by gates/compare.cpp directly (formats).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gates/compare.hpp"
#include "report/compare_report.hpp"
#include "probes/spec.hpp"
#include "report/probe_report.hpp"
#include "contract/results.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"

namespace fs = std::filesystem;
using namespace detaudit;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::run_cli;
using detaudit::cli_test::slurp;

namespace {

const std::string A(32, 'a'), B(32, 'b'), C(32, 'c');
// Specs as results.json holds them: canonical, every default written out.
std::string T(const std::string& text) {
  Spec s;
  std::string err;
  return succeeded(parse_target(text, &s), &err) ? s.str() : "bad target: " + err;
}
std::string W(const std::string& text) {
  Spec s;
  std::string err;
  return succeeded(parse_workload(text, &s), &err) ? s.str() : "bad workload: " + err;
}
const std::string kMatmul = W("matmul?m=64&n=64&k=256");
const std::string kReduce = W("reduce?op=sum&n=1000");
const std::string kCpu = T("cpu"), kOpenblas = T("openblas"), kOnednn = T("onednn");

Observation ok(const std::string& w, const std::string& t, std::vector<std::string> fps) {
  return test::ran(w, t, std::move(fps));
}

Results run_on(const std::string& openblas, std::vector<Observation> obs) {
  Results r;
  // Each run its own start (two runs are never one: compare refuses a copy of a run).
  static int runs = 0;
  r.started_at = fmt::format("2026-01-01T00:00:{:02}Z", runs++ % 60);
  r.finished_at = "2026-01-01T00:01:00Z";
  r.command = "detaudit probe";
  r.plan = {{"suite", "quick"}, {"repeats", 2}};
  r.machine = {{"hostname", "h"},
               {"cpu_model", "AMD EPYC"},
               {"cpu_features", {"avx", "avx2"}},
               {"cores", 2},
               {"gpus", nlohmann::json::array()},
               {"libraries", {{"openblas", openblas}, {"onednn", "2.6.0"}}},
               {"cuda", "no CUDA device"}};
  r.observations = std::move(obs);
  return r;
}

std::vector<Observation> cells() {
  return {ok(kMatmul, kCpu, {A, A}), ok(kMatmul, kOpenblas, {B, B}), ok(kReduce, kCpu, {C, C})};
}

// Writes DIR/results.json; returns DIR.
std::string save(const std::string& name, const Results& r) {
  fs::path d = fresh_dir(name);
  fs::create_directories(d);
  std::string err;
  EXPECT_TRUE(succeeded(save_results((d / "results.json").string(), r), &err)) << err;
  return d.string();
}

}  // namespace

// A byte copy of a run in another folder is that run, not a second one: "same bits" would be a file compared with
// itself. Refused, as the same folder named twice is; a run made again (its own start) compares.
TEST(Compare, ACopyOfARunIsNoSecondRun) {
  const Results one = run_on("0.3.21", cells());
  std::string a = save("cmp-copy-a", one), b = save("cmp-copy-b", one);
  auto r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(a + " and " + b + " hold one run, copied whole (the same command, started at " + one.started_at +
                       " on the same host, and the same cells and runs): a run compared with itself compares nothing"),
            std::string::npos)
      << r.err;
  // A copy edited where it costs nothing is still the copy: its finishing time, the order of its cells.
  Results edited = one;
  edited.finished_at = "2026-01-01T00:02:00Z";
  std::reverse(edited.observations.begin(), edited.observations.end());
  fs::remove_all(b);
  b = save("cmp-copy-b", edited);
  r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("copied whole"), std::string::npos) << r.err;
  // Timed cells: the same outputs, every cell timed alike to the nanosecond, is one run whatever the header says.
  Results timed = one;
  for (size_t i = 0; i < timed.observations.size(); ++i) timed.observations[i].seconds = {1e-3 * double(i + 1), 2e-3};
  Results retimed = timed;
  retimed.started_at = "2026-01-01T00:00:59Z";
  retimed.command += " --quiet";
  fs::remove_all(a);
  fs::remove_all(b);
  a = save("cmp-copy-a", timed);
  b = save("cmp-copy-b", retimed);
  r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("each of their 3 cells timed alike to the nanosecond"), std::string::npos) << r.err;
  // The machine block is header too: a host or CPU renamed over the same timed cells is the same run.
  retimed.machine["hostname"] = "vm2";
  retimed.machine["cpu_model"] = "AMD EPYC 9654 96-Core Processor";
  fs::remove_all(b);
  b = save("cmp-copy-b", retimed);
  r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("each of their 3 cells timed alike to the nanosecond"), std::string::npos) << r.err;
  retimed.observations[0].seconds[1] = 2.5e-3;  // another run: its own times
  fs::remove_all(b);
  b = save("cmp-copy-b", retimed);
  EXPECT_EQ(run_cli("compare " + a + " " + b).code, 0);
  const Results again = run_on("0.3.21", cells());
  ASSERT_NE(again.started_at, one.started_at);
  fs::remove_all(b);
  b = save("cmp-copy-b", again);
  EXPECT_EQ(run_cli("compare " + a + " " + b).code, 0);
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Compare, IdenticalRunsExitZero) {
  std::string a = save("cmp-same-a", run_on("0.3.21", cells())), b = save("cmp-same-b", run_on("0.3.21", cells()));
  auto r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("3 same bits, 0 bits changed, 0 only in A, 0 only in B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("machine and software differences:\n  none"), std::string::npos) << r.out;
  // By default only what differs: no cell line, no groups; the last line is the verdict.
  EXPECT_EQ(r.out.find(kCpu), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(3 cells with the same bits not listed; --all lists every cell)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nverdict: PASS  fail=0 warn=0 skip=0  report=-\n"), std::string::npos) << r.out;
  // --all: every target of both runs sits in its group with its twin.
  auto all = run_cli("compare --all " + a + " " + b);
  EXPECT_EQ(all.code, 0);
  EXPECT_NE(all.out.find("same bits  " + kCpu), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("[aaaaaaaa] " + kCpu + "@A, " + kCpu + "@B"), std::string::npos) << all.out;
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Compare, FlippedFingerprintExitsOneNamingTheCell) {
  auto changed = cells();
  changed[1].fingerprints = {C, C};
  changed[1].distinct = 1;
  std::string a = save("cmp-flip-a", run_on("0.3.21", cells())), b = save("cmp-flip-b", run_on("0.3.26", changed));
  auto r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("2 same bits, 1 bits changed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n" + kMatmul + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bits changed " + kOpenblas + ": bbbbbbbb (1 distinct) -> cccccccc (1 distinct)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("libraries.openblas: 0.3.21 -> 0.3.26"), std::string::npos) << r.out;

  auto md = run_cli("compare " + a + " " + b + " --format md");
  EXPECT_EQ(md.code, 1);
  EXPECT_NE(md.out.find("changed"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("cccccccc (1 distinct)"), std::string::npos) << md.out;

  auto js = run_cli("compare " + a + " " + b + " --format json");
  EXPECT_EQ(js.code, 1);
  nlohmann::json j = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << js.out;
  // The command's contract, then the comparison with check's names for the same things.
  EXPECT_EQ(j["schema"], "detaudit-cli/1");
  EXPECT_EQ(j["command"], "compare");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["counts"]["fail"], 1);
  EXPECT_EQ(j["comparison"]["summary"]["bits_changed"], 1);
  EXPECT_EQ(j["comparison"]["cells"][1]["kind"], "bits_changed");
  EXPECT_EQ(j["comparison"]["cells"][1]["b"]["fingerprints"], (std::vector<std::string>{C}));
  fs::remove_all(a);
  fs::remove_all(b);
}

// A nondeterministic cell gives other outputs in another run: listed as "varies", not a difference.
// Seen varying (2 distinct) on one side, or promised nondeterministic (cpu?order=atomic&threads=2) even
// when each run happened to see one output.
TEST(Compare, NondeterministicCellsVaryWithoutCountingAsDifferences) {
  const std::string atomic = T("cpu?order=atomic&threads=2");
  auto base = cells();
  base.push_back(ok(kReduce, atomic, {A, A}));
  base.push_back(ok(kMatmul, kOnednn, {B, B}));
  auto other = cells();
  other.push_back(ok(kReduce, atomic, {B, B}));  // atomic: one output each time, a different one
  other.push_back(ok(kMatmul, kOnednn, {B, C}));  // onednn (nothing promised): seen varying in B
  std::string a = save("cmp-var-a", run_on("0.3.21", base)), b = save("cmp-var-b", run_on("0.3.21", other));
  auto r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("3 same bits, 0 bits changed, 0 only in A, 0 only in B, 2 nondeterministic"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("varies     " + kOnednn + ": bbbbbbbb (1 distinct) -> bbbbbbbb,cccccccc (2 distinct)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("varies     " + atomic + ": aaaaaaaa (1 distinct) -> bbbbbbbb (1 distinct)"), std::string::npos)
      << r.out;
  // A target that promises determinism and gave two outputs did not "vary": it changed.
  auto broken = cells();
  broken[0].fingerprints = {A, C};  // cpu (order=blocked) promises determinism
  broken[0].distinct = 2;
  std::string c = save("cmp-var-c", run_on("0.3.21", broken));
  auto r2 = run_cli("compare " + a + " " + c);
  EXPECT_EQ(r2.code, 1) << r2.out;
  EXPECT_NE(r2.out.find("bits changed " + kCpu + ": aaaaaaaa (1 distinct) -> aaaaaaaa,cccccccc (2 distinct)"),
            std::string::npos)
      << r2.out;
  fs::remove_all(c);
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Compare, CellsOnOneSideOnly) {
  auto only_a = cells(), only_b = cells();
  only_a.push_back(ok(kReduce, kOpenblas, {A}));
  only_b.push_back(ok(kReduce, kOnednn, {A}));
  std::string a = save("cmp-only-a", run_on("0.3.21", only_a)), b = save("cmp-only-b", run_on("0.3.21", only_b));
  auto r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("3 same bits, 0 bits changed, 1 only in A, 1 only in B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("only in A  " + kOpenblas + ": aaaaaaaa (1 distinct)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("only in B  " + kOnednn + ": aaaaaaaa (1 distinct)"), std::string::npos) << r.out;
  // Bit-identical across runs and targets (--all): reduce's openblas@A and onednn@B agree.
  auto all = run_cli("compare --all " + a + " " + b);
  EXPECT_NE(all.out.find("[aaaaaaaa] " + kOpenblas + "@A, " + kOnednn + "@B"), std::string::npos) << all.out;
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Compare, MachineAndSoftwareDifferencesListed) {
  Results ra = run_on("0.3.21", cells()), rb = run_on("0.3.21", cells());
  rb.machine["cpu_features"] = {"avx", "avx2", "avx512f"};
  rb.machine["gpus"] = {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}, {"sm_count", 132}}};
  rb.machine["libraries"]["cudnn"] = "9.19.0";
  rb.machine["hostname"] = "other";  // not a bitwise key: not listed
  rb.tool_commit = "v0.2-3-gabcdef";
  Comparison c = compare_results(ra, rb, "a", "b");
  EXPECT_FALSE(c.cells_differ());
  std::string text = render_comparison(c, OutputFormat::kText);
  for (const char* line : {"cpu_features: avx avx2 -> avx avx2 avx512f", "gpus[0].name: (absent) -> NVIDIA H200",
                           "gpus[0].compute_capability: (absent) -> 9.0", "gpus[0].sm_count: (absent) -> 132",
                           "libraries.cudnn: (absent) -> 9.19.0"})
    EXPECT_NE(text.find(line), std::string::npos) << text << "\nlacks: " << line;
  EXPECT_NE(text.find("tool_commit: " + ra.tool_commit + " -> v0.2-3-gabcdef"), std::string::npos) << text;
  EXPECT_EQ(text.find("hostname"), std::string::npos) << text;
  EXPECT_EQ(c.differences.size(), 6u);
}

TEST(Compare, SpellingsOfOneSpecMeet) {
  // A default written out, keys in another order: the same cell.
  Results ra = run_on("0.3.21", {ok("reduce?n=1000&op=sum", "cpu?threads=1", {A})});
  Results rb = run_on("0.3.21", {ok(kReduce, kCpu, {A})});
  Comparison c = compare_results(ra, rb, "a", "b");
  EXPECT_EQ(c.same, 1);
  EXPECT_FALSE(c.cells_differ());
}

TEST(Compare, StatusChangeIsAChange) {
  auto crashed = cells();
  crashed[0].status = ObsStatus::kCrashed;
  crashed[0].reason = "SIGILL (Illegal instruction)";
  crashed[0].fingerprints.clear();
  crashed[0].distinct = 0;
  Comparison c = compare_results(run_on("x", cells()), run_on("x", crashed), "a", "b");
  EXPECT_EQ(c.changed, 1);
  EXPECT_NE(render_comparison(c, OutputFormat::kText).find("aaaaaaaa (1 distinct) -> crashed"), std::string::npos);
}

TEST(Compare, MarkdownStaysUnderACommentsSize) {
  std::vector<Observation> a, b;
  for (int w = 0; w < 100; ++w)
    for (int t = 1; t <= 40; ++t) {
      std::string wl = "reduce?op=sum&n=" + std::to_string(1000 + w), tg = "cpu?threads=" + std::to_string(t);
      a.push_back(ok(wl, tg, {A}));
      b.push_back(ok(wl, tg, {t % 2 ? B : A}));
    }
  Comparison c = compare_results(run_on("x", a), run_on("y", b), "a", "b");
  EXPECT_EQ(c.changed, 2000);
  std::string md = render_comparison(c, OutputFormat::kMarkdown);
  EXPECT_LT(md.size(), kMarkdownLimit);
  EXPECT_NE(md.find("... and "), std::string::npos);
  EXPECT_NE(md.find("2000 bits changed"), std::string::npos);
}

TEST(Compare, TruncatedResultsExitTwoNamingTheFile) {
  std::string a = save("cmp-trunc-a", run_on("0.3.21", cells())), b = save("cmp-trunc-b", run_on("0.3.21", cells()));
  std::string file = b + "/results.json";
  std::string text = slurp(file);
  std::ofstream(file, std::ios::trunc) << text.substr(0, text.size() / 2);
  auto r = run_cli("compare " + a + " " + b);
  EXPECT_EQ(r.code, 2);
  // stdout holds the verdict line alone; stderr the error, naming the file and the byte.
  EXPECT_EQ(
      r.out.rfind("verdict: ERROR  fail=0 warn=0 skip=0  report=-  error: " + file + ": not valid JSON at byte ", 0),
      0u)
      << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.err.find(file + ": not valid JSON at byte "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(the file ends early: truncated)"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  auto missing = run_cli("compare " + a + " " + b + "/nowhere");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find(b + "/nowhere/results.json: cannot open"), std::string::npos) << missing.err;
  // A results file may be named instead of its directory.
  const std::string c = save("cmp-trunc-c", run_on("0.3.21", cells()));
  auto by_file = run_cli("compare " + a + "/results.json " + c);
  EXPECT_EQ(by_file.code, 0) << by_file.out << by_file.err;
  fs::remove_all(a);
  fs::remove_all(b);
  fs::remove_all(c);
}
