// Nothing written where it must not be: the one file-writing path (contract/atomic_file.hpp) refuses a
// link, anything but a regular file, and a file that is not the tool's own output of the kind it writes;
// the one input path (kernels/input_file.hpp) refuses a FIFO instead of hanging on it; a file-size limit
// ends in one line, not a silent death; a closed stderr does not send progress into a file. Each case
// below wrote through a link, replaced a file, hung or died before.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "contract/atomic_file.hpp"
#include "kernels/input_file.hpp"
#include "probes/workload.hpp"  // available_memory_bytes
#include "tests/cli_helpers.hpp"

namespace detaudit {
namespace {

namespace fs = std::filesystem;
using cli_test::CliRun;
using cli_test::fresh_dir;
using cli_test::run_cli;
using cli_test::slurp;

// A finished probe directory (cpu-ref, one small workload), made once per process.
const fs::path& probe_dir() {
  static const fs::path dir = [] {
    fs::path d = fresh_dir("safe-probe");
    CliRun r = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --repeats 2 --no-history --out " +
                       d.string());
    EXPECT_EQ(r.code, 0) << r.err;
    return d;
  }();
  return dir;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

TEST(SafeFiles, TheDestinationCheckRefusesLinksSpecialFilesAndOtherKinds) {
  fs::path d = fresh_dir("safe-dest");
  fs::create_directories(d);
  EXPECT_TRUE(check_destination((d / "new.json").string(), Own::kBaseline).is_ok()) << "nothing there: fine";
  write_text(d / "victim", "keep");
  fs::create_symlink(d / "victim", d / "link");
  Status st = write_file_atomic((d / "link").string(), "x");
  EXPECT_EQ(st.code(), Status::Code::kInvalid);
  EXPECT_NE(st.message().find("is a symbolic link"), std::string::npos) << st.message();
  EXPECT_EQ(slurp(d / "victim"), "keep");
  EXPECT_TRUE(fs::is_symlink(d / "link"));
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0644), 0);
  st = write_file_atomic((d / "fifo").string(), "x");
  EXPECT_NE(st.message().find("is a FIFO"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::is_fifo(d / "fifo")) << "not renamed over";
  fs::create_directories(d / "dir");
  EXPECT_NE(check_destination((d / "dir").string()).message().find("is a directory"), std::string::npos);
  // Only the tool's own output of the kind: a baseline never lands on results, results never on a stranger.
  write_text(d / "results.json", "{\n \"schema\": \"detaudit/1\",\n \"observations\": []\n}\n");
  write_text(d / "notes.json", "{\"mine\": true}\n");
  write_text(d / "old-baseline.json", "{\n \"schema\": \"detaudit-baseline/1\"\n}\n");
  EXPECT_FALSE(check_destination((d / "results.json").string(), Own::kBaseline).is_ok());
  EXPECT_TRUE(check_destination((d / "results.json").string(), Own::kResults).is_ok());
  EXPECT_FALSE(check_destination((d / "notes.json").string(), Own::kResults).is_ok());
  EXPECT_TRUE(check_destination((d / "notes.json").string(), Own::kAny).is_ok());
  EXPECT_TRUE(check_destination((d / "old-baseline.json").string(), Own::kBaseline).is_ok());
  fs::remove_all(d);
}

TEST(SafeFiles, InputsThatAreNotRegularFilesAreRefusedNotWaitedOn) {
  fs::path d = fresh_dir("safe-input");
  fs::create_directories(d);
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0644), 0);
  std::string text;
  Status st = read_regular_file((d / "fifo").string(), "baseline", &text);  // returns at once: no writer needed
  EXPECT_EQ(st.code(), Status::Code::kInvalid);
  EXPECT_NE(st.message().find("is a FIFO, not a baseline"), std::string::npos) << st.message();
  write_text(d / "plain", "abc");
  fs::create_symlink(d / "plain", d / "link");
  ASSERT_TRUE(read_regular_file((d / "link").string(), "data", &text).is_ok()) << "an input may be a link";
  EXPECT_EQ(text, "abc");
  EXPECT_FALSE(read_regular_file((d / "missing").string(), "data", &text).is_ok());
  // Through the CLI, each reader: a FIFO as --baseline, as an NPY output, as a results.json. `timeout`
  // turns the old hang into exit 124.
  const std::string fifo = (d / "fifo").string();
  CliRun r = run_cli("check " + probe_dir().string() + " --baseline " + fifo);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is a FIFO"), std::string::npos) << r.err;
  fs::create_directories(d / "res");
  ASSERT_EQ(::mkfifo((d / "res" / "results.json").c_str(), 0644), 0);
  r = run_cli("report " + (d / "res").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is a FIFO"), std::string::npos) << r.err;
  // A FIFO as the history, to read it and to record into it.
  r = run_cli("history --history " + fifo);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is not a regular file"), std::string::npos) << r.err;
  r = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --repeats 2 --out " + (d / "p").string() +
              " --history " + fifo);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is not a regular file"), std::string::npos) << r.err;
  fs::remove_all(d);
}

// A probe whose results.json is a link is refused before it makes anything beside it: no lock, no oracle cache,
// no logs folder left in the folder it refused.
TEST(SafeFiles, AProbeRefusedForALinkedResultsFileLeavesNothingBehind) {
  fs::path d = fresh_dir("safe-linked-results");
  fs::create_directories(d / "p");
  fs::create_symlink(d / "elsewhere.json", d / "p" / "results.json");
  CliRun r = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --repeats 1 --no-history --out " +
                     (d / "p").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("results.json: is a symbolic link"), std::string::npos) << r.err;
  std::vector<std::string> left;
  for (auto& e : fs::directory_iterator(d / "p")) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"results.json"});
  EXPECT_FALSE(fs::exists(d / "elsewhere.json"));
  // A training design the same.
  const fs::path data = d / "data";
  cli_test::write_idx(data, 64, 64);
  r = run_cli("train autoencoder --seeds 1 --batches 2 --window 1 --replicates 1 --targets 'cpu?threads=2' --data " +
              data.string() + " --no-history --out " + (d / "p").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("results.json: is a symbolic link"), std::string::npos) << r.err;
  left.clear();
  for (auto& e : fs::directory_iterator(d / "p")) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"results.json"});
  // A worker's log that is a link: refused before the first run (exit 2 naming it), not runs that fail to start.
  fs::remove(d / "p" / "results.json");
  fs::create_directories(d / "p" / "logs");
  write_text(d / "victim.log", "keep");
  fs::create_symlink(d / "victim.log", d / "p" / "logs" / "train-cpu_order_atomic_threads_2_isa_auto.log");
  r = run_cli("train autoencoder --seeds 1 --batches 2 --window 1 --replicates 1 --targets 'cpu?threads=2' --data " +
              data.string() + " --no-history --out " + (d / "p").string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("train-cpu_order_atomic_threads_2_isa_auto.log: is a symbolic link"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "p" / "results.json")) << "no run recorded";
  EXPECT_EQ(slurp(d / "victim.log"), "keep");
  fs::remove_all(d);
}

TEST(SafeFiles, ALinkedLockOrOutputIsNeverWrittenThrough) {
  fs::path d = fresh_dir("safe-lock");
  fs::create_directories(d);
  fs::copy(probe_dir(), d / "p", fs::copy_options::recursive);
  fs::remove(d / "p" / ".lock");
  write_text(d / "victim", "keep");
  fs::create_symlink(d / "victim", d / "p" / ".lock");
  CliRun r = run_cli("report " + (d / "p").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(".lock: is a symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d / "victim"), "keep") << "no pid written into the link's target";
  // A report that is a link: refused, its target kept.
  fs::remove(d / "p" / ".lock");
  fs::remove(d / "p" / "report.md");
  fs::create_symlink(d / "victim", d / "p" / "report.md");
  r = run_cli("report " + (d / "p").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(slurp(d / "victim"), "keep");
  // diverge's trace, written as the run goes: a link there is refused before anything is written.
  fs::create_directories(d / "dv");
  fs::create_symlink(d / "victim", d / "dv" / "trace-a.jsonl");
  cli_test::write_idx(d / "data", 64, 64);
  r = run_cli("diverge --targets cpu-ref --steps 2 --data " + (d / "data").string() + " --out " + (d / "dv").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("trace-a.jsonl: is a symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d / "victim"), "keep");
  fs::remove_all(d);
}

TEST(SafeFiles, BaselineSaveReplacesOnlyABaseline) {
  fs::path d = fresh_dir("safe-baseline");
  fs::create_directories(d);
  const std::string results = (probe_dir() / "results.json").string(), before = slurp(results);
  CliRun r = run_cli("baseline save " + probe_dir().string() + " --out " + results);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is not a detaudit baseline"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(results), before) << "the run is still there";
  write_text(d / "mine.txt", "my notes");
  r = run_cli("baseline save " + probe_dir().string() + " --out " + (d / "mine.txt").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(slurp(d / "mine.txt"), "my notes");
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0644), 0);
  r = run_cli("baseline save " + probe_dir().string() + " --out " + (d / "fifo").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(fs::is_fifo(d / "fifo"));
  // Its own output of the same kind is replaced, as before.
  r = run_cli("baseline save " + probe_dir().string() + " --out " + (d / "b.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_cli("baseline save " + probe_dir().string() + " --out " + (d / "b.json").string());
  EXPECT_EQ(r.code, 0) << r.err;
  fs::remove_all(d);
}

TEST(SafeFiles, AnalyzeDoesNotReplaceARunOfItsOwn) {
  fs::path d = fresh_dir("safe-analyze");
  cli_test::write_idx(d / "data", 64, 64);
  const std::string train = "train autoencoder --seeds 1 --batches 2 --window 1 --replicates 2 --targets 'cpu?threads=2' "
                            "--no-history --data " +
                            (d / "data").string() + " --out ";
  CliRun r = run_cli(train + (d / "t1").string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_cli(train + (d / "t2").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string before = slurp(d / "t2" / "results.json");
  r = run_cli("analyze " + (d / "t1").string() + " --out " + (d / "t2").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is not an earlier analysis"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(d / "t2" / "results.json"), before);
  // Over a probe run: the same; into an empty directory and over its own analysis: fine.
  r = run_cli("analyze " + (d / "t1").string() + " --out " + probe_dir().string());
  EXPECT_EQ(r.code, 2) << r.err;
  r = run_cli("analyze " + (d / "t1").string() + " --out " + (d / "an").string());
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_cli("analyze " + (d / "t1").string() + " --out " + (d / "an").string());
  EXPECT_EQ(r.code, 0) << r.err;
  // A directory of the user's files, without a results.json: not empty, not an analysis, left as it is.
  fs::create_directories(d / "mine");
  std::ofstream(d / "mine" / "keep") << "mine\n";
  r = run_cli("analyze " + (d / "t1").string() + " --out " + (d / "mine").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("is not empty and holds no earlier analysis"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "mine" / "results.json"));
  // A baseline training cell whose sd is negative cannot be true: refused on loading (exit 2, was 1).
  r = run_cli("baseline save " + (d / "t1").string() + " --out " + (d / "b.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json b = nlohmann::json::parse(slurp(d / "b.json"));
  ASSERT_FALSE(b["training"].empty());
  b["training"][0]["sd"] = -1.0;
  write_text(d / "b.json", b.dump());
  r = run_cli("check " + (d / "t2").string() + " --no-history --baseline " + (d / "b.json").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("sd must be 0 or more (got -1)"), std::string::npos) << r.err;
  fs::remove_all(d);
}

// Run through sh: a file-size limit, a closed stderr.
int shell(const std::string& cmd) {
  const int st = std::system(("sh -c '" + cmd + "'").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(SafeFiles, AFileSizeLimitEndsInOneLineAndLeavesNoTemporaryFile) {
  fs::path d = fresh_dir("safe-fsize");
  fs::create_directories(d);
  // One 512-byte block: the baseline cannot be written. Was: killed by SIGXFSZ (exit 153), no message.
  const int rc = shell("ulimit -f 1; " + std::string(DETAUDIT_EXE) + " baseline save " + probe_dir().string() +
                       " --out " + (d / "b.json").string() + " 2>" + (d / "err").string());
  EXPECT_EQ(rc, 2);
  EXPECT_NE(slurp(d / "err").find("File too large"), std::string::npos) << slurp(d / "err");
  for (auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_FALSE(fs::exists(d / "b.json"));
  fs::remove_all(d);
}

TEST(SafeFiles, AClosedStderrSendsNoProgressIntoAFile) {
  fs::path d = fresh_dir("safe-stderr");
  fs::create_directories(d);
  fs::copy(probe_dir(), d / "p", fs::copy_options::recursive);
  // report prints its progress on stderr; with 2 closed, the lock took descriptor 2 and got it.
  EXPECT_EQ(shell(std::string(DETAUDIT_EXE) + " report " + (d / "p").string() + " >/dev/null 2>&-"), 0);
  const std::string lock = slurp(d / "p" / ".lock");
  EXPECT_EQ(lock.find_first_not_of("0123456789\n"), std::string::npos) << "the lock holds only a pid: " << lock;
  fs::remove_all(d);
}

// SIGTERM to diverge (it ran on to the end and exited 0 or 1): it stops at the next step, says so in one
// line and exits 143. `timeout 120` bounds the old behaviour (a long run) so the test fails, not hangs.
TEST(SafeFiles, DivergeStopsOnSigterm) {
  fs::path d = fresh_dir("safe-sigterm");
  cli_test::write_idx(d / "data", 64, 64);
  const std::string cmd = "timeout 120 " + std::string(DETAUDIT_EXE) +
                          " diverge --targets \"cpu?threads=2\" --steps 10000000 --batch-size 8 --data " +
                          (d / "data").string() + " --out " + (d / "out").string() + " 2>" + (d / "err").string() +
                          " & p=$!; while kill -0 $p 2>/dev/null && ! grep -q \"step 10/\" " + (d / "err").string() +
                          " 2>/dev/null; do sleep 0.1; done; kill -TERM $p; wait $p";
  const int rc = shell(cmd);
  EXPECT_EQ(rc, 143) << slurp(d / "err");
  EXPECT_NE(slurp(d / "err").find("interrupted by SIGTERM"), std::string::npos) << slurp(d / "err");
  fs::remove_all(d);
}

// Options and fields a value cannot mean: refused with one line and exit 2 (each was accepted before:
// NaN as a timeout meant 300 s, -1 as a seed became 18446744073709551615, 10,000 x 1,000 runs started).
TEST(SafeFiles, OptionsAndFieldsThatCannotMeanAnythingAreRefused) {
  fs::path d = fresh_dir("safe-options");
  cli_test::write_idx(d / "data", 64, 64);
  const std::string data = " --data " + (d / "data").string();
  CliRun r =
      run_cli("train autoencoder --run-timeout nan --targets 'cpu?threads=2' --out " + (d / "t").string() + data);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--run-timeout: must be a finite number (got nan)"), std::string::npos) << r.err;
  r = run_cli("check " + probe_dir().string() + " --baseline x.json --margin nan");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--margin: must be a finite number"), std::string::npos) << r.err;
  r = run_cli("diverge --init-seed -1 --targets cpu-ref --steps 1 --out " + (d / "dv").string() + data);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--init-seed: must be a whole number of 0 or more (got -1)"), std::string::npos) << r.err;
  r = run_cli("train autoencoder --seeds 10000 --replicates 1000 --targets 'cpu?threads=2' --out " +
              (d / "t").string() + data);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the design would train 20030000 runs"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "t" / "results.json")) << "refused before anything ran";
  // A newline in a spec is shown escaped: the error stays one line.
  r = run_cli("probe --targets \"$(printf 'cpu\\nref')\" --no-history --out " + (d / "p").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("cpu\\nref"), std::string::npos) << r.err;
  // A trace field the record cannot hold, and a design of 2^31 - 1 steps: refused, not truncated or allocated.
  r = run_cli("diverge --targets cpu-ref --steps 1 --out " + (d / "dv").string() + data);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* what : {"layer", "steps"}) {
    for (const char* side : {"a", "b"}) {
      std::ifstream in(d / "dv" / (std::string("trace-") + side + ".jsonl"));
      std::string line, out;
      for (int n = 0; std::getline(in, line); ++n) {
        nlohmann::json j = nlohmann::json::parse(line);
        if (std::string(what) == "layer" && n == 1) j["layer"] = uint64_t(1) << 62;
        if (std::string(what) == "steps" && n == 0) j["design"]["steps"] = 2147483647;
        out += j.dump() + "\n";
      }
      write_text(d / (std::string(what) + "-" + side + ".jsonl"), out);
    }
    r = run_cli("diverge --trace " + (d / (std::string(what) + "-a.jsonl")).string() + " --trace " +
                (d / (std::string(what) + "-b.jsonl")).string() + " --out " + (d / "o").string());
    EXPECT_EQ(r.code, 2) << what;
    EXPECT_NE(r.err.find(std::string(what) + " is missing or malformed"), std::string::npos) << r.err;
  }
  fs::remove_all(d);
}

// Sizes from input are checked before anything is allocated: export of a spec whose inputs and oracle need
// more memory than the machine has, the same spec put into a manifest (import generated its 8 GiB of
// inputs, 21 GB resident, before comparing the entry), and an output whose header declares another shape
// (read whole before the shapes were compared).
TEST(SafeFiles, SizesFromInputAreCheckedBeforeTheyAreAllocated) {
  fs::path d = fresh_dir("safe-sizes");
  const std::string huge = "'matmul?m=32768&n=32768&k=32768'";  // 52 GiB with the oracle: more than a test machine
  std::string source;
  if (available_memory_bytes(&source) >= uint64_t(64) << 30) GTEST_SKIP() << "this machine has 64 GiB or more free";
  CliRun r = run_cli("export " + huge + " --out " + (d / "ex").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("GiB of memory"), std::string::npos) << r.err;
  r = run_cli("export 'reduce?op=sum&n=10' --out " + (d / "small").string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::string manifest = slurp(d / "small" / "manifest.json");
  const std::string spec = "reduce?op=sum&n=10&dist=uniform&seed=1";
  const size_t at = manifest.find("\"spec\": \"" + spec + "\"");
  ASSERT_NE(at, std::string::npos) << manifest;
  // An output of the right name whose header says (4, 536870912): refused from its header.
  std::string id;
  for (auto& e : fs::directory_iterator(d / "small")) {
    const std::string n = e.path().filename().string();
    if (n.size() > 11 && n.substr(n.size() - 11) == ".oracle.npy") id = n.substr(0, n.size() - 11);
  }
  ASSERT_FALSE(id.empty());
  {
    // A header only: magic, version 1.0, header length, the dict padded to 128 bytes in all; no data.
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 536870912), }";
    dict.resize(128 - 10 - 1, ' ');
    dict += '\n';
    std::string npy = std::string("\x93NUMPY\x01\x00", 8) + char(dict.size() & 0xff) + char(dict.size() >> 8) + dict;
    write_text(d / "small" / (id + ".out.0.npy"), npy);
    // Its 8 GiB of data as a sparse file: the size a reader checks is there, no disk is used.
    fs::resize_file(d / "small" / (id + ".out.0.npy"), npy.size() + (uint64_t(8) << 30));
  }
  r = run_cli("import " + (d / "small").string() + " --name torch --out " + (d / "imp").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("shape (4, 536870912), the manifest expects"), std::string::npos) << r.err;
  // Judged from its header: no child of this test held the 8 GiB (the largest child's peak, in KiB).
  struct rusage ru {};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &ru), 0);
  EXPECT_LT(ru.ru_maxrss, 2L << 20) << "a child process peaked at " << ru.ru_maxrss << " KiB";
  fs::remove(d / "small" / (id + ".out.0.npy"));
  manifest.replace(at, spec.size() + 10, "\"spec\": \"matmul?m=32768&n=32768&k=32768\"");
  write_text(d / "small" / "manifest.json", manifest);
  r = run_cli("import " + (d / "small").string() + " --name torch --out " + (d / "imp").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("GiB of memory"), std::string::npos) << r.err;
  // A video whose header declares 262144 sequences of 10 frames 64x64 (10 GiB, a sparse file) under an
  // address-space limit of 8 GiB: refused from its header with what it would need, the data and the
  // held-out tenth (was: read whole, then copied three times; the only cap was 16 GiB).
  {
    std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (262144, 10, 64, 64), }";
    dict.resize(128 - 10 - 1, ' ');
    dict += '\n';
    write_text(d / "video.npy",
               std::string("\x93NUMPY\x01\x00", 8) + char(dict.size() & 0xff) + char(dict.size() >> 8) + dict);
    fs::resize_file(d / "video.npy", 128 + (uint64_t(10) << 30));
  }
  const std::string limited = "ulimit -v 8388608; " + std::string(DETAUDIT_EXE);
  if (shell(limited + " --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "this build cannot start under an address-space limit (sanitizers reserve their shadow memory)";
  }
  const int rc = shell(limited + " train prednet --data " + (d / "video.npy").string() +
                       " --seeds 2 --batches 2 --window 1 --no-history --out " + (d / "tr").string() + " 2>" +
                       (d / "err").string());
  EXPECT_EQ(rc, 2) << slurp(d / "err");
  EXPECT_NE(slurp(d / "err").find("frames would need 11.0 GiB of memory"), std::string::npos) << slurp(d / "err");
  EXPECT_NE(slurp(d / "err").find("ulimit -v"), std::string::npos) << slurp(d / "err");
  fs::remove_all(d);
}

// An interrupted qualify names the exact command that resumes it (level 1 said only "run qualify again",
// level 2 nothing), and that command resumes: the finished cells are kept.
TEST(SafeFiles, InterruptedQualifySaysTheCommandThatResumesIt) {
  fs::path d = fresh_dir("safe-qualify");
  fs::create_directories(d);
  const std::string out = (d / "q").string(), err = (d / "err").string();
  const std::string run = std::string(DETAUDIT_EXE) + " qualify --level 1 --no-history --out " + out;
  const int rc =
      shell("timeout 300 " + run + " 2>" + err + " & p=$!; while kill -0 $p 2>/dev/null && ! grep -q \"target 2/\" " +
            err + " 2>/dev/null; do sleep 0.1; done; kill -TERM $p; wait $p");
  ASSERT_EQ(rc, 143) << slurp(err);
  EXPECT_NE(slurp(err).find("resume with: " + run), std::string::npos) << slurp(err);
  CliRun again = run_cli("qualify --level 1 --no-history --out " + out);
  EXPECT_NE(again.code, 143) << again.err;
  EXPECT_NE(again.err.find("resuming:"), std::string::npos) << again.err;
  fs::remove_all(d);
}

// SIGTERM to export and import (they ran 27 and 45 s on and exited 0 or 1): each stops between workloads,
// says so in one line and exits 143; export leaves no temporary file, import writes no results.
TEST(SafeFiles, ExportAndImportStopOnSigterm) {
  fs::path d = fresh_dir("safe-sigterm-io");
  fs::create_directories(d);
  std::string specs;
  for (int m = 300; m < 330; ++m) specs += fmt::format("{}matmul?m={}&n=300&k=300", specs.empty() ? "" : ",", m);
  const std::string err = (d / "err").string();
  auto term_after = [&](const std::string& args, const std::string& line) {
    return shell("timeout 300 " + std::string(DETAUDIT_EXE) + " " + args + " 2>" + err +
                 " & p=$!; while kill -0 $p 2>/dev/null && ! grep -q \"" + line + "\" " + err +
                 " 2>/dev/null; do sleep 0.05; done; kill -TERM $p; wait $p");
  };
  int rc = term_after("export \"" + specs + "\" --out " + (d / "ex").string(), "exported");
  EXPECT_EQ(rc, 143) << slurp(err);
  EXPECT_NE(slurp(err).find("interrupted by SIGTERM"), std::string::npos) << slurp(err);
  for (auto& e : fs::directory_iterator(d / "ex"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_FALSE(fs::exists(d / "ex" / "manifest.json"));
  // One workload whose oracle takes seconds (1024^3): the signal during it stops the export there (it
  // finished the workload, wrote its manifest and exited 0).
  rc = shell("timeout 300 " + std::string(DETAUDIT_EXE) + " export \"matmul?m=1024&n=1024&k=1024\" --out " +
             (d / "big").string() + " 2>" + err + " & p=$!; sleep 0.5; kill -TERM $p; wait $p");
  EXPECT_EQ(rc, 143) << slurp(err);
  EXPECT_FALSE(fs::exists(d / "big" / "manifest.json"));
  // A whole export with the framework's outputs (the oracle's own), then an import stopped half-way.
  ASSERT_EQ(run_cli("export '" + specs + "' --out " + (d / "ex").string()).code, 0);
  for (auto& e : fs::directory_iterator(d / "ex")) {
    const std::string n = e.path().string();
    if (n.size() > 11 && n.substr(n.size() - 11) == ".oracle.npy")
      fs::copy_file(n, n.substr(0, n.size() - 11) + ".out.0.npy");
  }
  rc = term_after("import " + (d / "ex").string() + " --name t --out " + (d / "imp").string(), "compared");
  EXPECT_EQ(rc, 143) << slurp(err);
  EXPECT_NE(slurp(err).find("interrupted by SIGTERM"), std::string::npos) << slurp(err);
  EXPECT_FALSE(fs::exists(d / "imp" / "results.json"));
  fs::remove_all(d);
}

// A history in a folder this user cannot write: it can be read (SQLite could not create the WAL's -shm
// file, so `history` failed), and a command that would record into it (or create a file there) stops
// before its work with one line (the probe ran to the end, then exited 2). Root writes any folder, so
// as root the commands run as nobody.
TEST(SafeFiles, AHistoryInAFolderThatCannotBeWrittenIsReadAndRefusedBeforeTheWork) {
  fs::path d = fresh_dir("safe-history-ro");
  fs::create_directories(d / "h");
  CliRun r = run_cli("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --repeats 2 --out " +
                     (d / "p").string() + " --history " + (d / "h" / "history.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::string as_user;
  if (::geteuid() == 0) {
    if (shell("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "running as root and setpriv is missing";
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    fs::permissions(d, fs::perms::all);  // nobody writes its own outputs here
    fs::permissions(d / "p", fs::perms::all);
  }
  fs::permissions(d / "h", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                               fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  auto run_as = [&](const std::string& args) {
    const std::string out = (d / "o").string(), err = (d / "e").string();
    const int rc = shell(as_user + DETAUDIT_EXE + " " + args + " >" + out + " 2>" + err);
    return CliRun{rc, slurp(out), slurp(err)};
  };
  r = run_as("history --history " + (d / "h" / "history.db").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 runs recorded"), std::string::npos) << r.out;
  for (const char* file : {"history.db", "new.db", "x/y/new.db"}) {
    r = run_as("probe --targets cpu-ref --workloads \"reduce?op=sum&n=10\" --repeats 2 --out " + (d / "q").string() +
               " --history " + (d / "h" / file).string());
    EXPECT_EQ(r.code, 2) << file;
    EXPECT_NE(r.err.find("the run could not be recorded"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    EXPECT_FALSE(fs::exists(d / "q" / "results.json")) << file << ": the probe ran before the history was checked";
  }
  fs::permissions(d / "h", fs::perms::all);
  fs::remove_all(d);
}

// Each output is replaced only when it is the tool's own of that kind: a user's report.md beside a run,
// a user's manifest.json or .npy in an export folder, a foreign diverge.json, a user's file where a trace
// goes, a user's fleet.json (each was replaced, exit 0). Import refuses a training results directory
// (its results.json got probe observations), fleet a results directory as its folder.
TEST(SafeFiles, OnlyTheToolsOwnOutputOfTheSameKindIsReplaced) {
  fs::path d = fresh_dir("safe-kinds");
  fs::create_directories(d);
  auto refused = [&](const std::string& args, const fs::path& victim, const std::string& content) {
    CliRun r = run_cli(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("refusing to replace it"), std::string::npos) << r.err;
    EXPECT_EQ(slurp(victim), content) << victim;
  };
  fs::copy(probe_dir(), d / "p", fs::copy_options::recursive);
  write_text(d / "p" / "report.md", "my notes\n");
  refused("report " + (d / "p").string(), d / "p" / "report.md", "my notes\n");
  EXPECT_EQ(run_cli("report " + probe_dir().string()).code, 0) << "its own report is replaced";
  fs::create_directories(d / "x");
  write_text(d / "x" / "manifest.json", "my notes\n");
  refused("export 'reduce?op=sum&n=10' --out " + (d / "x").string(), d / "x" / "manifest.json", "my notes\n");
  fs::remove(d / "x" / "manifest.json");
  write_text(d / "x" / "reduce_op_sum_n_10_dist_uniform_seed_1.x.npy", "not numpy\n");
  refused("export 'reduce?op=sum&n=10' --out " + (d / "x").string(),
          d / "x" / "reduce_op_sum_n_10_dist_uniform_seed_1.x.npy", "not numpy\n");
  fs::remove(d / "x" / "reduce_op_sum_n_10_dist_uniform_seed_1.x.npy");
  ASSERT_EQ(run_cli("export 'reduce?op=sum&n=10' --out " + (d / "x").string()).code, 0);
  EXPECT_EQ(run_cli("export 'reduce?op=sum&n=10' --out " + (d / "x").string()).code, 0) << "its own export again";
  cli_test::write_idx(d / "data", 64, 64);
  const std::string diverge = "diverge --targets 'cpu?threads=1' --steps 2 --batch-size 4 --data " +
                              (d / "data").string() + " --out " + (d / "dv").string();
  fs::create_directories(d / "dv");
  write_text(d / "dv" / "diverge.json", "{\"mine\": 1}\n");
  refused(diverge, d / "dv" / "diverge.json", "{\"mine\": 1}\n");
  fs::remove(d / "dv" / "diverge.json");
  write_text(d / "P-a.jsonl", "my data\n");
  refused(diverge + " --trace-out " + (d / "P").string(), d / "P-a.jsonl", "my data\n");
  fs::remove(d / "P-a.jsonl");
  EXPECT_EQ(run_cli(diverge + " --trace-out " + (d / "P").string()).code, 0);
  EXPECT_EQ(run_cli(diverge + " --trace-out " + (d / "P").string()).code, 0) << "its own traces are replaced";
  // Fleet: a user's fleet.json; a results directory as the fleet directory.
  const std::string rank0 =
      "fleet --rank 0 --ranks 1 --targets cpu-ref --workloads 'reduce?op=sum&n=10' --repeats 2 "
      "--no-history --out ";
  ASSERT_EQ(run_cli(rank0 + (d / "f").string()).code, 0);
  write_text(d / "f" / "fleet.json", "{\"mine\": true}\n");
  refused("fleet report " + (d / "f").string(), d / "f" / "fleet.json", "{\"mine\": true}\n");
  CliRun r = run_cli(rank0 + (d / "p").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("holds a results.json of another run"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "p" / "ranks"));
  fs::remove_all(d);
}

// A worker's log that is a FIFO (the worker's start blocked on it: the probe hung) or a link (the worker
// could not start, a cell error, exit 1): the run stops before it starts, one line, exit 2.
TEST(SafeFiles, AWorkersLogThatIsNotARegularFileStopsTheRunBeforeItStarts) {
  fs::path d = fresh_dir("safe-log");
  fs::create_directories(d);
  fs::copy(probe_dir(), d / "p", fs::copy_options::recursive);
  const std::string probe = "timeout 60 " + std::string(DETAUDIT_EXE) +
                            " probe --targets cpu-ref --workloads \"reduce?op=sum&n=10\" --repeats 2 --no-history "
                            "--fresh --out " +
                            (d / "p").string() + " 2>" + (d / "err").string() + " >/dev/null";
  fs::remove(d / "p" / "logs" / "cpu-ref.log");
  ASSERT_EQ(::mkfifo((d / "p" / "logs" / "cpu-ref.log").c_str(), 0644), 0);
  EXPECT_EQ(shell(probe), 2) << slurp(d / "err");
  EXPECT_NE(slurp(d / "err").find("cpu-ref.log: is a FIFO"), std::string::npos) << slurp(d / "err");
  fs::remove(d / "p" / "logs" / "cpu-ref.log");
  write_text(d / "victim", "kept\n");
  fs::create_symlink(d / "victim", d / "p" / "logs" / "cpu-ref.log");
  EXPECT_EQ(shell(probe), 2) << slurp(d / "err");
  EXPECT_NE(slurp(d / "err").find("is a symbolic link"), std::string::npos) << slurp(d / "err");
  EXPECT_EQ(slurp(d / "victim"), "kept\n");
  fs::remove_all(d);
}

// A control byte in a spec (an escape sequence for the terminal) reaches stderr escaped, not raw.
TEST(SafeFiles, ControlBytesInAnErrorAreEscaped) {
  CliRun r = run_cli(std::string("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10\r\033[2J' --no-history "
                                 "--out ") +
                     (fresh_dir("safe-esc") / "p").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.find('\033'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\x1b[2J"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace detaudit
