// Worker isolation: targets that fault or hang on purpose (the hidden `testing` backend raises real
// signals) are recorded as observations, and the parent goes on.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/fixtures.hpp"
#include "kernels/cpu/native.hpp"
#include "probes/oracle_cache.hpp"
#include "probes/registry.hpp"
#include "contract/cells.hpp"
#include "probes/worker.hpp"
#include "probes/workload.hpp"

using namespace detaudit;

namespace {

Spec target(const std::string& t) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_target(t, &s), &err)) << err;
  return s;
}
WorkItem item(const std::string& w) {
  WorkItem i;
  std::string err;
  EXPECT_TRUE(succeeded(parse_workload(w, &i.workload), &err)) << err;
  return i;
}

std::vector<Observation> run(const std::string& t, const std::vector<std::string>& workloads, double timeout = 60) {
  WorkerOptions opt;
  opt.exe = DETAUDIT_EXE;
  opt.repeats = 3;
  opt.timeout_s = timeout;
  opt.log_path = (std::filesystem::temp_directory_path() / "detaudit-test-worker.log").string();
  std::vector<WorkItem> items;
  for (auto& w : workloads) items.push_back(item(w));
  std::vector<Observation> out;
  int begun = 0;
  run_target(target(t), items, opt, [&](const WorkItem&, Observation&& o) { out.push_back(std::move(o)); },
             [&](const WorkItem&) { ++begun; });
  EXPECT_GE(begun, 1);
  return out;
}

}  // namespace

TEST(WorkerIsolation, SegfaultIsRecordedAndTheNextItemStillRuns) {
  auto obs = run("testing?fault=segv", {"reduce?op=sum&n=1000", "reduce?op=dot&n=1000"});
  ASSERT_EQ(obs.size(), 2u);
  for (auto& o : obs) {
    EXPECT_EQ(o.status, ObsStatus::kCrashed);
    EXPECT_EQ(o.reason.rfind("SIGSEGV", 0), 0u) << o.reason;
    EXPECT_EQ(o.target, "testing?fault=segv");
    // The cell comes back with the specs it was asked for, parsed once by the parent.
    ASSERT_TRUE(o.target_spec && o.workload_spec);
    EXPECT_EQ(o.target_spec->str(), o.target);
    EXPECT_EQ(o.workload_spec->str(), o.workload);
  }
  EXPECT_EQ(obs[1].workload.rfind("reduce?op=dot", 0), 0u);
}

// A worker that crashes writes no core file, wherever core dumps are on: a target that crashes by design (an
// instruction the CPU lacks) would leave hundreds of MB in the working directory of every run, as it did under
// slurmd. Core dumps are turned on here as a shell's `ulimit -c unlimited` would, in an empty working directory.
TEST(WorkerIsolation, ACrashingWorkerWritesNoCoreFile) {
  std::string pattern;
  std::getline(std::ifstream("/proc/sys/kernel/core_pattern"), pattern);
  if (pattern.empty() || pattern[0] == '|' || pattern.find('/') != std::string::npos)
    GTEST_SKIP() << "core_pattern '" << pattern << "' sends core files elsewhere than the working directory";
  struct rlimit before {};
  ASSERT_EQ(getrlimit(RLIMIT_CORE, &before), 0);
  if (before.rlim_max == 0) GTEST_SKIP() << "the hard limit on core files is 0: no process here can dump core";
  const std::filesystem::path here = std::filesystem::current_path();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("detaudit-no-core-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::current_path(dir);
  struct rlimit on = before;
  on.rlim_cur = before.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_CORE, &on), 0);
  auto segv = run("testing?fault=segv", {"reduce?op=sum&n=10"});
  auto ill = run("testing?fault=ill", {"matmul?m=4&n=4&k=4"});
  setrlimit(RLIMIT_CORE, &before);
  std::filesystem::current_path(here);
  ASSERT_EQ(segv.size(), 1u);
  ASSERT_EQ(ill.size(), 1u);
  EXPECT_EQ(segv[0].reason.rfind("SIGSEGV", 0), 0u) << segv[0].reason;
  EXPECT_EQ(ill[0].reason.rfind("SIGILL", 0), 0u) << ill[0].reason;
  std::vector<std::string> left;
  for (auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_TRUE(left.empty()) << "left in the working directory: " << left.front();
  std::filesystem::remove_all(dir);
}

// Batch invariance fingerprints the rows it computes alone: the same bits every run of a deterministic target, other
// bits where a fault lands only in them (the test hook flips one bit of the first), while the product stays the same.
TEST(WorkerIsolation, TheRowsComputedAloneAreFingerprinted) {
  const std::string w = "batchinv?m=16&n=8&k=32&rows=4";
  const std::string spec = item(w).workload.str();
  auto once = run("cpu?order=sequential", {w});
  auto again = run("cpu?order=sequential", {w});
  setenv("DETAUDIT_TEST_FLIP_ROWS", spec.c_str(), 1);
  auto flipped = run("cpu?order=sequential", {w});
  unsetenv("DETAUDIT_TEST_FLIP_ROWS");
  for (auto* o : {&once, &again, &flipped}) {
    ASSERT_EQ(o->size(), 1u);
    ASSERT_TRUE((*o)[0].batch.has_value()) << (*o)[0].reason;
    Fingerprint fp;
    EXPECT_TRUE(Fingerprint::from_hex((*o)[0].batch->rows_fingerprint, &fp)) << (*o)[0].batch->rows_fingerprint;
    EXPECT_EQ((*o)[0].batch->rows_checked, 4);
  }
  EXPECT_EQ(once[0].batch->rows_fingerprint, again[0].batch->rows_fingerprint);
  EXPECT_EQ(once[0].batch->rows_differing, 0);
  EXPECT_NE(flipped[0].batch->rows_fingerprint, once[0].batch->rows_fingerprint);
  EXPECT_EQ(flipped[0].batch->rows_differing, 1);
  EXPECT_EQ(flipped[0].fingerprints, once[0].fingerprints) << "the product itself is untouched";
  // Written and read back; a value that is no fingerprint is refused.
  Observation back;
  ASSERT_TRUE(from_json(to_json(once[0]), &back).is_ok());
  EXPECT_EQ(back.batch->rows_fingerprint, once[0].batch->rows_fingerprint);
  nlohmann::json bad = to_json(once[0]);
  bad["batch_invariance"]["rows_fingerprint"] = "zz";
  EXPECT_NE(from_json(bad, &back).message().find("batch_invariance.rows_fingerprint must be 32 hex digits"),
            std::string::npos);
}

TEST(WorkerIsolation, IllegalInstructionIsRecordedAsSigill) {
  auto obs = run("testing?fault=ill", {"matmul?m=4&n=4&k=4"});
  ASSERT_EQ(obs.size(), 1u);
  EXPECT_EQ(obs[0].status, ObsStatus::kCrashed);
  EXPECT_EQ(obs[0].reason.rfind("SIGILL", 0), 0u) << obs[0].reason;
}

TEST(WorkerIsolation, AbortIsRecordedAsSigabrt) {
  auto obs = run("testing?fault=abort", {"reduce?op=sum&n=10"});
  ASSERT_EQ(obs.size(), 1u);
  EXPECT_EQ(obs[0].status, ObsStatus::kCrashed);
  EXPECT_EQ(obs[0].reason.rfind("SIGABRT", 0), 0u) << obs[0].reason;
}

TEST(WorkerIsolation, HangIsKilledAndRecordedAsTimeout) {
  auto obs = run("testing?fault=hang", {"reduce?op=sum&n=10", "reduce?op=norm&n=10"}, 1.5);
  ASSERT_EQ(obs.size(), 2u);
  for (auto& o : obs) {
    EXPECT_EQ(o.status, ObsStatus::kTimeout);
    EXPECT_NE(o.reason.find("1.5 s"), std::string::npos) << o.reason;
  }
}

TEST(WorkerIsolation, HealthyWorkerAndUnsupportedOps) {
  // The fault-free testing backend provides gemm and reductions only: conv2d comes back skipped with
  // a reason, the others ok and deterministic.
  auto obs = run("testing?fault=none", {"reduce?op=sum&n=100", "conv2d?n=1&c=1&h=4&w=4&k=1", "matmul?m=2&n=2&k=2"});
  ASSERT_EQ(obs.size(), 3u);
  EXPECT_EQ(obs[0].status, ObsStatus::kOk);
  EXPECT_EQ(obs[0].fingerprints.size(), 3u);
  EXPECT_EQ(obs[0].distinct, 1);
  EXPECT_EQ(obs[1].status, ObsStatus::kSkipped);
  EXPECT_NE(obs[1].reason.find("conv2d"), std::string::npos) << obs[1].reason;
  EXPECT_EQ(obs[2].status, ObsStatus::kOk);
}

TEST(WorkerIsolation, ExistingWorkerRunsRealTargetWithOracle) {
  auto obs = run("cpu-ref", {"reduce?op=sum&n=1000"});
  ASSERT_EQ(obs.size(), 1u);
  EXPECT_EQ(obs[0].status, ObsStatus::kOk) << obs[0].reason;
  EXPECT_EQ(obs[0].distinct, 1);
  EXPECT_FALSE(obs[0].oracle.has_value());  // no oracle file given
}

namespace {
// A target whose combination order is forced to change every repeat: repeat r runs the atomic order
// with forced seed kSeeds[r % 3], so three orders occur, without any thread timing. (Two different
// orders can round to the same float: seeds 1 and 3 do on this input, so 1, 2 and 5 are used.)
constexpr uint64_t kSeeds[3] = {1, 2, 5};
class RotatingOrderBackend : public Backend {
 public:
  std::string name() const override { return "rotating"; }
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    CpuNativeOptions o;
    o.threads = 1;
    o.order = ReduceOrder::kAtomic;
    o.forced_atomic_order_seed = kSeeds[calls_++ % 3];
    return make_cpu_native(o)->reduce(op, x, y, n, out);
  }

 private:
  int calls_ = 0;
};
}  // namespace

TEST(Detection, ForcedOrdersAreCountedAsDistinctOutputs) {
  RotatingOrderBackend b;
  WorkItem wi = item("reduce?op=sum&n=200000");
  Observation o = observe(&b, "rotating", wi, 9);
  ASSERT_EQ(o.status, ObsStatus::kOk) << o.reason;
  ASSERT_EQ(o.fingerprints.size(), 9u);
  EXPECT_EQ(o.fingerprints[0], o.fingerprints[3]);
  EXPECT_EQ(o.fingerprints[1], o.fingerprints[4]);
  EXPECT_NE(o.fingerprints[0], o.fingerprints[1]);
  EXPECT_NE(o.fingerprints[1], o.fingerprints[2]);
  EXPECT_NE(o.fingerprints[0], o.fingerprints[2]);
  EXPECT_EQ(o.distinct, 3) << "three forced orders give three different sums on this input";
}

// --- The oracle's error bound, as the worker reads it from the cache --------------------------------
namespace {
std::string write_entry(const std::string& name, const WorkItem& wi, bool with_bound) {
  OracleEntry e;
  e.key = oracle_key(wi.workload);
  Status st = compute_oracle(wi.workload, &e.payload, &e.inputs, with_bound ? &e.bound : nullptr);
  EXPECT_TRUE(st.is_ok()) << st.message();
  std::string path = (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".bin")).string();
  std::string err;
  EXPECT_TRUE(succeeded(write_oracle_entry(path, e), &err)) << err;
  return path;
}
uint64_t hist_total(const OracleDistance& d) {
  uint64_t n = 0;
  for (uint64_t c : d.ratio_hist) n += c;
  return n;
}
}  // namespace

TEST(Detection, DistinctOutputsAreJudgedAgainstTheBound) {
  // Three forced orders, three sums: each within the bound; the worst one's histogram is kept.
  RotatingOrderBackend b;
  WorkItem wi = item("reduce?op=sum&n=200000");
  wi.oracle_path = write_entry("bound-sum", wi, true);
  Observation o = observe(&b, "rotating", wi, 3);
  ASSERT_EQ(o.status, ObsStatus::kOk) << o.reason;
  EXPECT_EQ(o.distinct, 3);
  ASSERT_TRUE(o.oracle.has_value()) << o.details["oracle_problem"];
  EXPECT_GT(o.oracle->max_ulp, 0u);
  EXPECT_GT(o.oracle->err_ratio, 0);
  EXPECT_LT(o.oracle->err_ratio, 1);
  EXPECT_EQ(o.oracle->bound_k, 200000);
  EXPECT_EQ(hist_total(*o.oracle), 1u) << "one output element, counted once whatever the repeats";
  EXPECT_GT(o.oracle->agree_bits, 10);
  std::filesystem::remove(wi.oracle_path);

  // A real op on a real target: every element counted.
  CpuNativeOptions opt;
  opt.threads = 2;
  auto cpu = make_cpu_native(opt);
  WorkItem conv = item("conv2d?n=2&c=8&h=12&w=12&k=8&pass=bwd_data");
  conv.oracle_path = write_entry("bound-conv", conv, true);
  o = observe(cpu.get(), "cpu?order=blocked&threads=2", conv, 2);
  ASSERT_EQ(o.status, ObsStatus::kOk) << o.reason;
  ASSERT_TRUE(o.oracle.has_value()) << o.details["oracle_problem"];
  EXPECT_LT(o.oracle->err_ratio, 1);
  EXPECT_EQ(o.oracle->bound_k, 8 * 3 * 3);
  EXPECT_EQ(hist_total(*o.oracle), 2u * 8 * 12 * 12);
  std::filesystem::remove(conv.oracle_path);
}

TEST(Detection, OracleWithoutABoundOrOfTheOldFormat) {
  CpuNativeOptions opt;
  auto cpu = make_cpu_native(opt);
  WorkItem wi = item("matmul?m=8&n=8&k=33");
  // Written without a bound: compared, with no ratio (err_ratio -1), as results of older runs.
  wi.oracle_path = write_entry("bound-none", wi, false);
  Observation o = observe(cpu.get(), "cpu", wi, 1);
  ASSERT_TRUE(o.oracle.has_value()) << o.details["oracle_problem"];
  EXPECT_EQ(o.oracle->err_ratio, -1);
  EXPECT_TRUE(o.oracle->ratio_hist.empty());
  EXPECT_GE(o.oracle->agree_bits, 0);
  // An entry in the format before the bound: refused, naming the format; nothing compared.
  std::string bytes;
  {
    std::ifstream f(wi.oracle_path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  ASSERT_EQ(bytes.substr(0, 8), "DAORACL2");
  bytes[7] = '1';
  std::ofstream(wi.oracle_path, std::ios::binary | std::ios::trunc) << bytes;
  o = observe(cpu.get(), "cpu", wi, 1);
  EXPECT_FALSE(o.oracle.has_value());
  EXPECT_NE(o.details["oracle_problem"].find("format 1"), std::string::npos) << o.details["oracle_problem"];
  // Another workload's bound (of other size) under this key: refused.
  WorkItem other = item("matmul?m=8&n=4&k=33");
  OracleEntry e;
  e.key = oracle_key(wi.workload);
  ASSERT_TRUE(compute_oracle(wi.workload, &e.payload, &e.inputs).is_ok());
  std::vector<uint8_t> other_out;
  ASSERT_TRUE(compute_oracle(other.workload, &other_out, nullptr, &e.bound).is_ok());
  std::string err;
  ASSERT_TRUE(succeeded(write_oracle_entry(wi.oracle_path, e), &err)) << err;
  o = observe(cpu.get(), "cpu", wi, 1);
  EXPECT_FALSE(o.oracle.has_value());
  EXPECT_NE(o.details["oracle_problem"].find("error bound has 32 elements, output has 64"), std::string::npos)
      << o.details["oracle_problem"];
  std::filesystem::remove(wi.oracle_path);
}

// --- Warm-up and kernel attribution -----------------------------------------
namespace {
// A backend that traces like a GPU one, with its kernel "launches" forced: the first reduce of the
// process runs a one-time search first (two trial kernels, as cuDNN's Find or cuBLAS's workspace fill
// would), every reduce then launches "reduce_kernel"; tracing fails for the ids in `fail_ids`.
class TracedBackend : public Backend {
 public:
  explicit TracedBackend(std::vector<uint64_t> fail_ids = {}) : fail_ids_(std::move(fail_ids)) {}
  std::string name() const override { return "traced"; }
  bool traces_kernels() const override { return true; }
  Status trace_begin(uint64_t id) override {
    id_ = id;
    launched_.clear();
    return Status::ok();
  }
  Status trace_end(std::vector<KernelRecord>* kernels) override {
    kernels->clear();
    if (std::find(fail_ids_.begin(), fail_ids_.end(), id_) != fail_ids_.end())
      return Status::unavailable("tracing incomplete: CUPTI dropped 3 records");
    for (auto& n : launched_) kernels->push_back(KernelRecord{n});
    return Status::ok();
  }
  Status reduce(ReduceOp op, const float* x, const float* y, size_t n, float* out) override {
    if (!searched_) {
      launched_ = {"find_trial_a", "find_trial_b"};
      searched_ = true;
    }
    launched_.push_back("reduce_kernel");
    return cpu_->reduce(op, x, y, n, out);  // the arithmetic of a real backend (one thread, fixed order)
  }

 private:
  std::unique_ptr<Backend> cpu_ = make_cpu_native(CpuNativeOptions{});
  std::vector<uint64_t> fail_ids_;
  std::vector<std::string> launched_;
  uint64_t id_ = 0;
  bool searched_ = false;
};
}  // namespace

TEST(Attribution, OneTimeSetupRunsInTheWarmUpAndNoRepeatSeesIt) {
  TracedBackend b;
  Observation o = observe(&b, "traced", item("reduce?op=sum&n=1000"), 5);
  ASSERT_EQ(o.status, ObsStatus::kOk) << o.reason;
  EXPECT_EQ(o.details["warmup_kernels"], "3") << "the search and the first reduce ran in the warm-up";
  EXPECT_EQ(o.warmup_fingerprint, o.fingerprints[0]);
  ASSERT_EQ(o.kernels.size(), 5u);
  ASSERT_EQ(o.seconds.size(), 5u);
  for (auto& k : o.kernels) {
    ASSERT_TRUE(k.has_value());
    ASSERT_EQ(k->size(), 1u);
    EXPECT_EQ((*k)[0].name, "reduce_kernel");
  }
  EXPECT_EQ(o.tracing, "ok");
  auto g = kernels_by_fingerprint(o);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_FALSE(g[0].sequence_varies) << "repeat 1 holds only its own kernels";
}

TEST(Attribution, AFailedTraceStaysPairedWithItsRepeat) {
  // Repeat r is traced under id r + 2 (the warm-up has 1): ids 4 and 6 are repeats 3 and 5.
  TracedBackend b({4, 6});
  Observation o = observe(&b, "traced", item("reduce?op=sum&n=1000"), 6);
  ASSERT_EQ(o.status, ObsStatus::kOk) << o.reason;
  ASSERT_EQ(o.kernels.size(), o.fingerprints.size());
  for (size_t r = 0; r < o.kernels.size(); ++r)
    EXPECT_EQ(o.kernels[r].has_value(), r != 2 && r != 4) << "repeat " << r + 1;
  EXPECT_EQ(o.tracing.rfind("partial: 2 of 6 repeats not traced (repeat 3, 5): tracing incomplete", 0), 0u) << o.tracing;
  auto g = kernels_by_fingerprint(o);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].runs, 6);
  EXPECT_EQ(g[0].untraced, 2);
  EXPECT_EQ(g[0].kernel_names, std::vector<std::string>{"reduce_kernel"});
  EXPECT_FALSE(g[0].sequence_varies) << "an untraced repeat is no other sequence";
  // In results.json a failed trace is null, and comes back as one.
  Observation back;
  std::string err;
  ASSERT_TRUE(succeeded(from_json(to_json(o), &back), &err)) << err;
  ASSERT_EQ(back.kernels.size(), 6u);
  EXPECT_FALSE(back.kernels[2].has_value());
  EXPECT_TRUE(back.kernels[3].has_value());
}

TEST(Attribution, NoRepeatTracedMeansNoKernelListsAndTheReason) {
  TracedBackend b({1, 2, 3, 4});
  Observation o = observe(&b, "traced", item("reduce?op=sum&n=1000"), 3);
  ASSERT_EQ(o.status, ObsStatus::kOk) << o.reason;
  EXPECT_TRUE(o.kernels.empty());
  EXPECT_EQ(o.tracing, "tracing unavailable: tracing incomplete: CUPTI dropped 3 records");
  EXPECT_EQ(o.details.count("warmup_kernels"), 0u);
}

TEST(Attribution, KernelListsThatCannotBePairedAreDroppedOnLoad) {
  // Results of versions before the pairing: 3 fingerprints, 2 lists (one repeat's trace had failed).
  TracedBackend b;
  Observation o = observe(&b, "traced", item("reduce?op=sum&n=1000"), 3);
  nlohmann::json j = to_json(o);
  j["kernels"].erase(1);
  Observation back;
  std::string err;
  ASSERT_TRUE(succeeded(from_json(j, &back), &err)) << err;
  EXPECT_TRUE(back.kernels.empty());
  EXPECT_NE(back.tracing.find("cannot be paired"), std::string::npos) << back.tracing;
}

TEST(WorkerIsolation, LostContextEndsTheWorkerAndTheRestRunInAFreshOne) {
  // fault=sticky: its gemm loses the "context", after which every op of that process fails, as every
  // CUDA call does after an illegal address. The reductions after it succeed only in a fresh worker.
  auto obs = run("testing?fault=sticky", {"reduce?op=sum&n=100", "matmul?m=4&n=4&k=4", "reduce?op=dot&n=100",
                                          "reduce?op=norm&n=100"});
  ASSERT_EQ(obs.size(), 4u);
  EXPECT_EQ(obs[0].status, ObsStatus::kOk) << obs[0].reason;
  EXPECT_EQ(obs[1].status, ObsStatus::kError);
  EXPECT_NE(obs[1].reason.find("testing: sticky fault in gemm; the GPU context is lost (testing: sticky fault): the "
                               "worker ended, later cells ran in a fresh one"),
            std::string::npos)
      << obs[1].reason;
  EXPECT_EQ(obs[2].status, ObsStatus::kOk) << obs[2].reason;
  EXPECT_EQ(obs[3].status, ObsStatus::kOk) << obs[3].reason;
}

TEST(WorkerIsolation, WithoutARestartALostContextFailsEveryLaterCell) {
  // The contrast that makes the test above mean something: in one process, the cells after the fault fail.
  BackendOr made = make_target_backend(target("testing?fault=sticky"));
  ASSERT_TRUE(made) << made.message();
  std::unique_ptr<Backend> b = std::move(made).value();
  bool lost = false;
  Observation m = observe(b.get(), "testing?fault=sticky", item("matmul?m=4&n=4&k=4"), 2, &lost);
  EXPECT_TRUE(lost);
  Observation r = observe(b.get(), "testing?fault=sticky", item("reduce?op=sum&n=100"), 2);
  EXPECT_EQ(r.status, ObsStatus::kError);
  EXPECT_NE(r.reason.find("an earlier sticky fault lost the context"), std::string::npos) << r.reason;
}
