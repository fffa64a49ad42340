// Faults and hostile input: a closed stdout, workloads that cannot fit, an oracle that times
// out, two processes on one --out, Ctrl-C/SIGTERM and a killed parent, a corrupt oracle cache, bad
// option values and bad worker requests. Each must end in a clear line and a trustworthy exit code,
// and lose no finished work.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/fixtures.hpp"
#include "probes/oracle_cache.hpp"
#include "probes/worker.hpp"
#include "probes/workload.hpp"
#include "suites/dir_lock.hpp"
#include "suites/results_dir.hpp"
#include "suites/probe_suite.hpp"
#include "tests/cli_helpers.hpp"

namespace fs = std::filesystem;
using namespace detaudit;
using detaudit::cli_test::CliRun;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::slurp;

namespace {

CliRun run(const std::string& args) { return detaudit::cli_test::run_cli(args); }

nlohmann::json results_of(const fs::path& dir) { return nlohmann::json::parse(slurp(dir / "results.json")); }

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

const char* kSmallTargets = "'cpu-ref,cpu?order=blocked&threads=2'";
const char* kSmallWorkloads = "'reduce?op=sum&n=1000,matmul?m=16&n=16&k=40'";

// Starts the CLI as a child process with stdout and stderr in files; returns its pid.
pid_t spawn_cli(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  pid_t pid = fork();
  if (pid == 0) {
    freopen(out.c_str(), "w", stdout);
    freopen(err.c_str(), "w", stderr);
    std::vector<char*> argv{const_cast<char*>(DETAUDIT_EXE)};
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(DETAUDIT_EXE, argv.data());
    _exit(127);
  }
  return pid;
}

// The children of a process (Linux /proc), e.g. the worker a detaudit parent is waiting for.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t c;
  while (f >> c) out.push_back(c);
  return out;
}

bool alive(pid_t pid) {
  // A zombie is dead for our purpose: it computes nothing.
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return false;
  size_t rp = s.rfind(')');
  return rp != std::string::npos && rp + 2 < s.size() && s[rp + 2] != 'Z';
}

// Waits (up to 60 s) until `pred` holds; the assertions after it do not depend on how long that took.
template <typename F>
bool wait_for(F pred) {
  for (int i = 0; i < 600; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace

// --- 1. Closed output ----------------------------------------------------------------------------
TEST(Faults, ClosedStdoutAndStderrDoNotStopTheAudit) {
  fs::path dir = fresh_dir("closed-output");
  // `true` exits at once: every write to the pipe fails with EPIPE.
  std::string cmd = std::string("bash -c \"") + DETAUDIT_EXE + " probe --targets " + kSmallTargets + " --workloads " +
                    kSmallWorkloads + " --repeats 2 --out " + dir.string() + " 2>&1 | true; exit \\${PIPESTATUS[0]}\"";
  int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  auto j = results_of(dir);
  EXPECT_EQ(j["observations"].size(), 4u);
  EXPECT_FALSE(j["finished_at"].get<std::string>().empty());
  EXPECT_TRUE(fs::exists(dir / "report.md"));
  EXPECT_TRUE(fs::exists(dir / "report.html"));
}

// --- 2. Sizes the machine cannot hold, and the oracle under the timeout ---------------------------
TEST(Faults, WorkloadThatCannotFitIsRefusedBeforeAnythingIsWritten) {
  fs::path dir = fresh_dir("too-big");
  for (const char* w : {"conv2d?n=4096&c=4096&h=64&w=64&k=1", "matmul?m=32768&n=32768&k=32768&dtype=f64"}) {
    // The f64 matmul needs ~88 GiB by the estimate; the conv ~2.8 TiB. Compare with a fixed budget so
    // the test does not depend on this machine's memory...
    Spec s;
    std::string err;
    ASSERT_TRUE(succeeded(parse_workload(w, &s), &err)) << err;
    ProbePlan plan;
    plan.workloads = {s};
    EXPECT_FALSE(succeeded(check_memory(plan, uint64_t(24) << 30, "test budget"), &err)) << w;
    EXPECT_NE(err.find(s.str()), std::string::npos) << err;
    EXPECT_NE(err.find("bytes"), std::string::npos) << err;
    EXPECT_NE(err.find("available"), std::string::npos) << err;
  }
  // ...and the CLI refuses the conv (terabytes: beyond any machine) with one line, writing nothing.
  CliRun r = run("probe --targets cpu-ref --workloads 'conv2d?n=4096&c=4096&h=64&w=64&k=1' --out " + dir.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("conv2d?n=4096&c=4096"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir));
  // A normal workload fits.
  Spec ok;
  std::string err;
  ASSERT_TRUE(succeeded(parse_workload("matmul?m=256&n=256&k=515", &ok), &err));
  ProbePlan plan;
  plan.workloads = {ok};
  EXPECT_TRUE(succeeded(check_memory(plan, uint64_t(1) << 30, "test budget"), &err)) << err;
  EXPECT_GT(estimate_memory(ok).total(), 3.0 * 256 * 515 * 4);
}

TEST(Faults, OracleThatTimesOutIsReportedAsTheOraclesFault) {
  fs::path dir = fresh_dir("oracle-timeout");
  // cpu-ref's 4096^3 gemm (69 GFLOP, one thread, double accumulation) cannot finish in 1 s; the small
  // reduction's oracle and cells can.
  CliRun r = run("probe --targets 'cpu?order=blocked&threads=1' --workloads 'matmul?m=4096&n=4096&k=4096,reduce?op=sum&n=100' "
                 "--repeats 1 --timeout 1 --out " + dir.string());
  // The target's own cell of the big gemm times out too: an unexcused timeout FAILs (exit 1); the
  // oracle's failure is the oracle's, listed apart.
  ASSERT_EQ(r.code, 1) << r.err;
  auto j = results_of(dir);
  std::string big = "matmul?m=4096&n=4096&k=4096&ta=n&tb=n&dtype=f32&dist=uniform&seed=1";
  EXPECT_NE(r.out.find("FAIL " + big + " on cpu?order=blocked&threads=1"), std::string::npos) << r.out;
  ASSERT_TRUE(j["oracle_failures"].contains(big)) << j["oracle_failures"].dump();
  EXPECT_EQ(j["oracle_failures"][big].get<std::string>().rfind("timeout", 0), 0u);
  EXPECT_EQ(j["oracle_failures"].size(), 1u);
  for (auto& o : j["observations"]) {
    if (o["workload"] == big) {
      EXPECT_TRUE(o["oracle"].is_null());
    } else {
      EXPECT_EQ(o["status"], "ok") << o.dump();
      EXPECT_FALSE(o["oracle"].is_null()) << "the small workload's oracle was computed";
    }
  }
  EXPECT_NE(slurp(dir / "report.md").find("oracle failed: `" + big + "`: timeout"), std::string::npos);
}

// --- 3. Two processes on one --out ----------------------------------------------------------------
TEST(Faults, SecondProcessOnTheSameOutIsRefusedWithThePid) {
  fs::path dir = fresh_dir("locked");
  DirLock held;
  std::string err;
  ASSERT_TRUE(succeeded(held.acquire(dir.string()), &err)) << err;
  CliRun r = run(std::string("probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out ") + dir.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(dir.string() + " is in use by pid " + std::to_string(getpid())), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "results.json"));
  CliRun rep = run("report " + dir.string());
  EXPECT_EQ(rep.code, 2);
  // Any other holder is refused while it is held, even another descriptor in this process.
  DirLock other;
  EXPECT_FALSE(succeeded(other.acquire(dir.string()), &err));
}

// A command holds its directory from the run to its last write: the run takes the lock of the caller's ResultsDir,
// which still refuses another holder after the run returns (the command judges, saves and reports under it), and
// lets go when the command's hold ends.
TEST(Faults, TheCallersHoldOnTheDirectoryOutlastsTheRun) {
  fs::path dir = fresh_dir("held-through");
  ProbePlan plan;
  std::string err;
  ASSERT_TRUE(succeeded(make_plan("quick", "cpu-ref", "reduce?op=sum&n=10", 1, 60, &plan), &err)) << err;
  ProbeRunOptions opt;
  opt.out_dir = dir.string();
  opt.exe = DETAUDIT_EXE;
  opt.command = "detaudit probe --targets cpu-ref --workloads reduce?op=sum&n=10 --repeats 1 --timeout 60";
  opt.custom = true;
  Results results;
  {
    ResultsDir held(dir.string());
    opt.results_dir = &held;
    ASSERT_TRUE(succeeded(run_probe_suite(plan, opt, &results), &err)) << err;
    DirLock other;
    const Status st = other.acquire(dir.string());
    EXPECT_FALSE(st.is_ok()) << "the run let go of the directory its caller holds";
    EXPECT_NE(st.message().find("in use by pid " + std::to_string(getpid())), std::string::npos) << st.message();
    Results back;
    ASSERT_TRUE(succeeded(held.load(&back), &err)) << err;
    EXPECT_EQ(back.observations.size(), 1u);
    // A hold on another directory than --out is a bug, refused before anything is written.
    ResultsDir elsewhere((dir / "elsewhere").string());
    opt.results_dir = &elsewhere;
    EXPECT_FALSE(run_probe_suite(plan, opt, &results).is_ok());
    EXPECT_FALSE(fs::exists(dir / "elsewhere"));
  }
  DirLock after;
  EXPECT_TRUE(succeeded(after.acquire(dir.string()), &err)) << "the hold ended with its command: " << err;
}

// A results.json that is a link is refused before the lock is made beside it: the folder is left as it was.
TEST(Faults, AResultsDirectoryWithALinkForItsResultsIsRefusedBeforeItsLock) {
  fs::path dir = fresh_dir("results-link");
  fs::create_directories(dir);
  fs::create_symlink("/dev/null", dir / "results.json");
  ResultsDir out(dir.string());
  const Status st = out.open_for_writing();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("results.json"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(dir / ".lock"));
}

// --- 4. Ctrl-C / SIGTERM and a killed parent ------------------------------------------------------
TEST(Faults, SigtermKillsTheWorkersSavesFinishedCellsAndSaysHowToResume) {
  fs::path dir = fresh_dir("sigterm");
  fs::path out = dir.string() + ".out", err = dir.string() + ".err";
  // cpu-ref finishes; the hanging target's worker is alive when SIGTERM comes.
  pid_t pid = spawn_cli({"probe", "--targets", "cpu-ref,testing?fault=hang", "--workloads", "reduce?op=sum&n=100",
                         "--repeats", "1", "--timeout", "600", "--out", dir.string()},
                        out, err);
  ASSERT_GT(pid, 0);
  pid_t worker = 0;
  ASSERT_TRUE(wait_for([&] {
    if (slurp(err).find("testing?fault=hang: workload 1/1") == std::string::npos) return false;
    auto c = children_of(pid);
    if (c.empty()) return false;
    worker = c[0];
    return true;
  })) << slurp(err);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 128 + SIGTERM);
  EXPECT_FALSE(alive(worker)) << "the worker died with the audit";
  std::string e = slurp(err);
  EXPECT_NE(e.find("interrupted: 1 of 2 cells done; resume with: "), std::string::npos) << e;
  EXPECT_NE(e.find("--out " + dir.string()), std::string::npos) << e;
  auto j = results_of(dir);
  ASSERT_EQ(j["observations"].size(), 1u);
  EXPECT_EQ(j["observations"][0]["target"], "cpu-ref");
  EXPECT_EQ(j["finished_at"], "");
}

TEST(Faults, WorkerDiesWhenItsParentIsKilled) {
  fs::path dir = fresh_dir("sigkill");
  fs::path out = dir.string() + ".out", err = dir.string() + ".err";
  pid_t pid = spawn_cli({"probe", "--targets", "testing?fault=hang", "--workloads", "reduce?op=sum&n=100", "--repeats",
                         "1", "--timeout", "600", "--out", dir.string()},
                        out, err);
  pid_t worker = 0;
  ASSERT_TRUE(wait_for([&] {
    auto c = children_of(pid);
    if (c.empty() || slurp(err).find("workload 1/1") == std::string::npos) return false;
    worker = c[0];
    return true;
  })) << slurp(err);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(wait_for([&] { return !alive(worker); })) << "worker " << worker << " outlived its parent";
}

TEST(Faults, ResumeFlagContinuesTheLatestUnfinishedRun) {
  fs::path cwd = fresh_dir("resume-flag");
  fs::create_directories(cwd / "results");
  std::string args = std::string("probe --targets ") + kSmallTargets + " --workloads " + kSmallWorkloads + " --repeats 2";
  // No unfinished run yet.
  CliRun none = run("--version >/dev/null; cd " + cwd.string() + " && " + DETAUDIT_EXE + " " + args + " --resume");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("no unfinished quick run"), std::string::npos) << none.err;
  // An interrupted run (simulated by dropping finished_at and two observations) is found and finished.
  fs::path run_dir = cwd / "results" / "quick-20260101-000000";
  ASSERT_EQ(run(args + " --out " + run_dir.string()).code, 0);
  auto j = results_of(run_dir);
  j["observations"].erase(j["observations"].begin() + 2, j["observations"].end());
  j["finished_at"] = "";
  std::ofstream(run_dir / "results.json") << j.dump();
  {
    // The same run reached through a link under results/ is no run of its own: nothing is written through it.
    fs::rename(run_dir, cwd / "elsewhere");
    fs::create_directory_symlink("../elsewhere", run_dir);
    const std::string before = slurp(cwd / "elsewhere" / "results.json");
    CliRun linked = run("--version >/dev/null; cd " + cwd.string() + " && " + DETAUDIT_EXE + " " + args + " --resume");
    EXPECT_EQ(linked.code, 2) << linked.err;
    EXPECT_NE(linked.err.find("no unfinished quick run"), std::string::npos) << linked.err;
    EXPECT_EQ(slurp(cwd / "elsewhere" / "results.json"), before);
    fs::remove(run_dir);
    fs::rename(cwd / "elsewhere", run_dir);
  }
  CliRun r = run("--version >/dev/null; cd " + cwd.string() + " && " + DETAUDIT_EXE + " " + args + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming: 2 finished observations kept"), std::string::npos) << r.err;
  EXPECT_EQ(results_of(run_dir)["observations"].size(), 4u);
}

// --- 8. The oracle cache --------------------------------------------------------------------------
TEST(Faults, OracleEntryIsCheckedOnLoad) {
  fs::path dir = fresh_dir("oracle-entry");
  fs::create_directories(dir);
  Spec w;
  std::string err;
  ASSERT_TRUE(succeeded(parse_workload("reduce?op=softmax&n=2000&cols=100", &w), &err));
  OracleEntry e;
  e.key = oracle_key(w);
  ASSERT_TRUE(compute_oracle(w, &e.payload, &e.inputs).is_ok());
  std::string path = (dir / "x.bin").string();
  ASSERT_TRUE(succeeded(write_oracle_entry(path, e), &err)) << err;
  OracleEntry back;
  ASSERT_TRUE(succeeded(read_oracle_entry(path, e.key, &back), &err)) << err;
  EXPECT_EQ(back.payload, e.payload);
  EXPECT_EQ(back.inputs, e.inputs);
  // Another workload's key is refused.
  EXPECT_FALSE(succeeded(read_oracle_entry(path, e.key + "x", &back), &err));
  std::string bytes = slurp(path);
  auto write = [&](const std::string& b) { std::ofstream(path, std::ios::binary | std::ios::trunc) << b; };
  // One flipped payload bit: checksum.
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x10;
  write(flipped);
  EXPECT_FALSE(succeeded(read_oracle_entry(path, e.key, &back), &err));
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
  // Truncated.
  write(bytes.substr(0, bytes.size() - 100));
  EXPECT_FALSE(succeeded(read_oracle_entry(path, e.key, &back), &err));
  // Random bytes.
  std::string junk(4096, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = char((i * 2654435761u) >> 13);
  write(junk);
  EXPECT_FALSE(succeeded(read_oracle_entry(path, e.key, &back), &err));
  // A directory.
  fs::remove(path);
  fs::create_directories(path);
  EXPECT_FALSE(succeeded(read_oracle_entry(path, e.key, &back), &err));
}

TEST(Faults, CorruptOracleCacheIsRecomputedAndFreshClearsIt) {
  fs::path dir = fresh_dir("oracle-cache");
  std::string args = std::string("probe --targets 'cpu?order=blocked&threads=2' --workloads ") + kSmallWorkloads +
                     " --repeats 1 --out " + dir.string();
  ASSERT_EQ(run(args).code, 0);
  auto first = results_of(dir);
  std::vector<fs::path> entries;
  for (auto& e : fs::directory_iterator(dir / ".oracle")) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 2u);
  // Corrupt both entries three ways over (random bytes; a directory in place of the other) and drop
  // the observations, as after an interruption: the resumed run must compute the oracle again.
  for (int round = 0; round < 2; ++round) {
    std::string junk(1000, 'x');
    if (round == 0) {
      std::ofstream(entries[0], std::ios::binary | std::ios::trunc) << junk;
      fs::remove(entries[1]);
      fs::create_directories(entries[1]);
    } else {
      std::string b = slurp(entries[0]);
      std::ofstream(entries[0], std::ios::binary | std::ios::trunc) << b.substr(0, b.size() / 2);
      std::ofstream(entries[1], std::ios::binary | std::ios::trunc) << "";
    }
    auto j = first;
    j["observations"] = nlohmann::json::array();
    j["finished_at"] = "";
    std::ofstream(dir / "results.json") << j.dump();
    CliRun r = run(args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("oracles: computing 2 with cpu-ref (2 an earlier session left in .oracle/ among them: this "
                         "run's own are used)"),
              std::string::npos)
        << r.err;
    auto k = results_of(dir);
    ASSERT_EQ(k["observations"].size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(k["observations"][i]["status"], "ok");
      EXPECT_EQ(k["observations"][i]["oracle"], first["observations"][i]["oracle"]) << "same verdict as the first run";
    }
  }
  // --fresh empties the cache.
  std::ofstream(dir / ".oracle" / "stale.bin") << "stale";
  ASSERT_EQ(run(args + " --fresh").code, 0);
  EXPECT_FALSE(fs::exists(dir / ".oracle" / "stale.bin"));
}

// A resumed run computes its oracles again, and the oracle is cpu-ref's own output: a cpu-ref cell kept from the
// interrupted session that recorded other bits (another workload's, an edit) is refused, not kept beside cells that
// would be judged against it.
TEST(Faults, AResumedRunRefusesAKeptCpuRefCellTheOracleContradicts) {
  fs::path dir = fresh_dir("oracle-kept-cell");
  const std::string args = std::string("probe --targets 'cpu-ref,cpu?order=blocked&threads=2' --workloads ") +
                           kSmallWorkloads + " --repeats 2 --no-history --out " + dir.string();
  ASSERT_EQ(run(args).code, 0);
  nlohmann::json j = results_of(dir);
  // As after an interruption: the cpu-ref cells kept, the other target's dropped.
  nlohmann::json kept = nlohmann::json::array();
  for (auto& o : j["observations"])
    if (o["target"] == "cpu-ref") kept.push_back(o);
  ASSERT_EQ(kept.size(), 2u);
  j["observations"] = kept;
  j["finished_at"] = "";
  std::ofstream(dir / "results.json") << j.dump();
  ASSERT_EQ(run(args).code, 0) << "the genuine interrupted run resumes";
  j["observations"] = kept;
  j["observations"][1]["fingerprints"] = kept[0]["fingerprints"];  // the other workload's output
  j["observations"][1]["warmup_fingerprint"] = kept[0]["warmup_fingerprint"];
  std::ofstream(dir / "results.json") << j.dump();
  const CliRun r = run(args);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("observations[1]: cpu-ref recorded " + kept[0]["fingerprints"][0].get<std::string>()),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(it is the oracle, deterministic): the results were edited; use --fresh"), std::string::npos)
      << r.err;
}

// --- 7. Option values -----------------------------------------------------------------------------
TEST(Faults, OptionValuesOutOfRangeExitTwo) {
  for (const char* args :
       {"probe --timeout inf", "probe --timeout 1e308", "probe --timeout 0", "probe --timeout -1", "probe --timeout nan",
        "probe --repeats 0", "probe --repeats 100001", "probe --targets ''", "probe --workloads ''",
        "probe --targets ,", "probe --out ''", "train autoencoder --seeds 0", "train autoencoder --batches 0",
        "train autoencoder --window 0", "train autoencoder --replicates 0", "train autoencoder --targets ''",
        "train autoencoder --run-timeout inf", "train autoencoder --data ''"}) {
    CliRun r = run(std::string(args) + " --out /tmp/detaudit-never-written");
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists("/tmp/detaudit-never-written"));
}

TEST(Faults, EqualSpecsAreOneTargetInAPlan) {
  ProbePlan plan;
  std::string err;
  ASSERT_TRUE(succeeded(make_plan("quick", "cpu?threads=01,cpu?threads=1,cpu?order=blocked&threads=1&isa=auto",
                                  "reduce?op=sum&n=10&seed=-0,reduce?op=sum&n=10&seed=0", 1, 10, &plan),
                        &err))
      << err;
  EXPECT_EQ(plan.targets.size(), 1u);
  EXPECT_EQ(plan.workloads.size(), 1u);
}

// --- 10. The worker protocol ----------------------------------------------------------------------
TEST(Faults, WorkerRequestIsValidatedFieldByField) {
  auto req = [](const std::string& repeats, const std::string& items) {
    return std::string(R"({"protocol": "detaudit-worker/1", "target": "cpu-ref", "repeats": )") + repeats +
           R"(, "items": )" + items + "}";
  };
  const std::string good_items = R"([{"index": 0, "workload": "reduce?op=sum&n=10", "oracle": ""}])";
  WorkerRequest r;
  const Status good = parse_worker_request(req("3", good_items), &r);
  ASSERT_TRUE(good.is_ok()) << good.message();
  EXPECT_EQ(r.repeats, 3);
  ASSERT_EQ(r.items.size(), 1u);
  for (const std::string& bad :
       {req("-5", good_items), req("0", good_items), req("99999999999", good_items), req("\"3\"", good_items),
        req("2.5", good_items), req("3", "{}"), req("3", "[1]"), req("3", R"([{"index": -1, "workload": "reduce"}])"),
        req("3", R"([{"index": 0}])"), req("3", R"([{"index": 0, "workload": 7}])"),
        req("3", R"([{"index": 0, "workload": "reduce?op=sum&n=10", "oracle": 5}])"),
        req("3", R"([{"index": 0, "workload": "fft"}])"), std::string("[]"), std::string("42"), std::string("{"),
        std::string(R"({"protocol": 1, "target": "cpu-ref", "repeats": 1, "items": []})"),
        std::string(R"({"protocol": "detaudit-worker/1", "target": ["cpu"], "repeats": 1, "items": []})"),
        std::string(R"({"protocol": "detaudit-worker/1", "target": "cpu-ref", "items": []})")}) {
    const Status st = parse_worker_request(bad, &r);
    EXPECT_FALSE(st.is_ok()) << bad;
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
  // Through the executable: a malformed request is exit 2 with one line, never an abort.
  std::string cmd = std::string("echo '") + req("-5", good_items) + "' | " + DETAUDIT_EXE + " __worker 2>/dev/null";
  int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}
