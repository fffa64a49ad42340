// gates/verdict.cpp: synthetic observations on synthetic machines, judged against the registry's real
// promises. Each row gives the verdict and a phrase its reason must hold.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "gates/verdict.hpp"
#include "probes/spec.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;

namespace {

const std::string A(32, 'a'), B(32, 'b'), C(32, 'c');

// Machines as machine_fingerprint() describes them: one without AVX-512 and GPUs, one with both.
nlohmann::json machine_avx2() { return {{"cpu_features", {"sse4.1", "avx", "avx2", "fma"}}, {"gpus", nlohmann::json::array()}}; }
nlohmann::json machine_avx512() {
  return {{"cpu_features", {"sse4.1", "avx", "avx2", "fma", "avx512f", "avx512bf16"}},
          {"gpus", {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}, {"sm_count", 132}}}}};
}

using test::canon_target;
using test::canon_workload;

OracleDistance within_bound(double err_ratio, int64_t k = 256) {
  OracleDistance d;
  d.err_ratio = err_ratio;
  d.bound_k = k;
  return d;
}

// An ok observation with 10 repeats: `variants` distinct fingerprints, compared with the oracle.
Observation ok(const std::string& workload, const std::string& target, int variants = 1, double err_ratio = 0.3) {
  const std::string kinds[] = {A, B, C};
  std::vector<std::string> fps;
  for (int i = 0; i < 10; ++i) fps.push_back(kinds[i % variants]);
  Observation o = test::ran(canon_workload(workload), canon_target(target), std::move(fps));
  o.oracle = within_bound(err_ratio);
  return o;
}

// A NaN against a number: the relative error is infinite too (OracleDistance::nonfinite_mismatch).
Observation nan_mismatch(Observation o) {
  o.oracle->max_rel_err = INFINITY;
  return o;
}

Observation status(const std::string& workload, const std::string& target, ObsStatus st, const std::string& reason) {
  return test::not_run(canon_workload(workload), canon_target(target), st, reason, 10);
}

Results judged(std::vector<Observation> obs, nlohmann::json machine = machine_avx2()) {
  Results r;
  r.machine = std::move(machine);
  r.observations = std::move(obs);
  judge(&r);
  return r;
}

struct Row {
  std::string what;
  Observation obs;
  nlohmann::json machine;
  std::string verdict, phrase;
};

const char* kMatmul = "matmul?m=64&n=64&k=256";

Observation with_details(Observation o, std::map<std::string, std::string> d) {
  o.details = std::move(d);
  return o;
}
Observation with_warmup(Observation o, const std::string& fp) {
  o.warmup_fingerprint = fp;
  return o;
}
Observation with_batch(Observation o, int checked, int differing) {
  o.batch = BatchInvariance{checked, differing, ""};
  return o;
}
Observation without_oracle(Observation o) {
  o.oracle.reset();
  return o;
}

std::vector<Row> rows() {
  const char* sigill = "SIGILL (Illegal instruction)";
  const char* batchinv = "batchinv?m=32&n=64&k=128&rows=4";
  return {
      {"deterministic as promised", ok(kMatmul, "cpu?order=sequential&threads=2"), machine_avx2(), "PASS", ""},
      {"atomic with threads: promised nondeterminism seen", ok(kMatmul, "cpu?order=atomic&threads=2", 3),
       machine_avx2(), "EXPECTED", "3 distinct outputs in 10 runs, as promised"},
      {"sequential order is promised deterministic", ok(kMatmul, "cpu?order=sequential", 2), machine_avx2(), "FAIL",
       "2 distinct outputs in 10 runs; detaudit: order=sequential"},
      {"variation where nothing is promised", ok(kMatmul, "cpu?order=atomic&threads=1", 2), machine_avx2(), "WARN",
       "2 distinct outputs in 10 runs; nothing promises either way"},
      {"SkylakeX on a CPU without AVX-512: SIGILL expected",
       status(kMatmul, "openblas?core=SkylakeX", ObsStatus::kCrashed, sigill), machine_avx2(), "EXPECTED",
       "SIGILL (Illegal instruction): needs AVX-512F, which this machine lacks"},
      {"SkylakeX on a CPU with AVX-512: SIGILL is a failure",
       status(kMatmul, "openblas?core=SkylakeX", ObsStatus::kCrashed, sigill), machine_avx512(), "FAIL",
       "crashed: SIGILL"},
      {"a timeout is a failure", status(kMatmul, "cpu", ObsStatus::kTimeout, "no result after 60 s; worker killed"),
       machine_avx2(), "FAIL", "timed out: no result after 60 s"},
      {"a worker error is a failure", status(kMatmul, "cpu", ObsStatus::kError, "worker exited with code 3"),
       machine_avx2(), "FAIL", "error: worker exited with code 3"},
      {"a worker error explained by a missing ISA",
       status(kMatmul, "cpu?isa=avx512", ObsStatus::kError, "worker exited with code 3"), machine_avx2(), "EXPECTED",
       "needs AVX-512F"},
      {"skipped", status(kMatmul, "onednn", ObsStatus::kSkipped, "onednn not built"), machine_avx2(), "SKIP",
       "onednn not built"},
      {"skipped for want of a GPU", status(kMatmul, "cuda:0", ObsStatus::kSkipped, "no CUDA device"), machine_avx2(),
       "SKIP", "no CUDA device (needs a CUDA device, which this machine lacks)"},
      {"cuDNN claims nondeterminism, none seen",
       with_details(ok("conv2d?pass=bwd_filter", "cudnn:0?bwd_filter_algo=0"),
                    {{"claimed_deterministic", "no"}, {"algo_name", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0"}}),
       machine_avx512(), "PASS", "permitted to vary (cuDNN claims CUDNN_NON_DETERMINISTIC"},
      {"cuDNN claims nondeterminism, seen",
       with_details(ok("conv2d?pass=bwd_filter", "cudnn:0?bwd_filter_algo=0", 2),
                    {{"claimed_deterministic", "no"}, {"algo_name", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0"}}),
       machine_avx512(), "EXPECTED", "as promised: cuDNN claims CUDNN_NON_DETERMINISTIC"},
      // The warm-up run (probes/worker.cpp) is the same op on the same inputs, before the repeats.
      {"warm-up with the repeats' bits", with_warmup(ok(kMatmul, "cpu?order=sequential&threads=2"), A), machine_avx2(),
       "PASS", ""},
      {"warm-up with other bits on a deterministic target",
       with_warmup(ok(kMatmul, "cpu?order=sequential&threads=2"), C), machine_avx2(), "FAIL",
       "the warm-up run gave bits that none of the 10 repeats gave; detaudit: order=sequential"},
      {"warm-up with other bits where nothing is promised", with_warmup(ok(kMatmul, "cpu?order=atomic&threads=1"), C),
       machine_avx2(), "WARN", "the warm-up run gave other bits than the 10 repeats; nothing promises either way"},
      {"only the warm-up varied on a nondeterministic target",
       with_warmup(ok(kMatmul, "cpu?order=atomic&threads=2"), C), machine_avx2(), "EXPECTED",
       "the warm-up run differed from the 10 identical repeats, as promised"},
      {"error within the bound", ok(kMatmul, "openblas", 1, 0.3), machine_avx2(), "PASS", ""},
      {"error beyond the bound", ok(kMatmul, "openblas", 1, 1.5), machine_avx2(), "FAIL",
       "error 1.5 x the summation error bound"},
      {"NaN against a number", nan_mismatch(ok(kMatmul, "openblas", 1, INFINITY)), machine_avx2(), "FAIL", "NaN"},
      {"a difference where the bound is 0", ok(kMatmul, "openblas", 1, INFINITY), machine_avx2(), "FAIL",
       "where its error bound is 0"},
      // TF32: budget (γ_257(2^-24) + 2·2^-11 + 2^-22) / γ_257(2^-24) ≈ 64.8.
      {"TF32 within its wider budget", ok(kMatmul, "cublas:0?math=tf32", 1, 30), machine_avx512(), "PASS", ""},
      {"TF32 beyond its budget", ok(kMatmul, "cublas:0?math=tf32", 1, 100), machine_avx512(), "FAIL",
       "error 100 x the summation error bound (budget 64.8"},
      {"full precision has no wider budget", ok(kMatmul, "cublas:0", 1, 30), machine_avx512(), "FAIL",
       "error 30 x the summation error bound"},
      {"no error bound known", ok(kMatmul, "openblas", 1, -1), machine_avx2(), "PASS", "no error bound known"},
      {"no oracle output", without_oracle(ok(kMatmul, "openblas")), machine_avx2(), "WARN",
       "not compared with the oracle"},
      {"batch invariance promised and broken", with_batch(ok(batchinv, "cpu?order=sequential"), 4, 1), machine_avx2(),
       "FAIL", "batch invariance promised, but 1 of 4 rows differ"},
      {"batch invariance not promised, not seen", with_batch(ok(batchinv, "openblas"), 4, 2), machine_avx2(), "PASS",
       "not batch invariant (not promised): 2 of 4 rows differ"},
      {"batch invariance promised and kept", with_batch(ok(batchinv, "cpu?order=sequential"), 4, 0), machine_avx2(),
       "PASS", ""},
      {"several findings: the worst wins, every reason kept", ok(kMatmul, "cpu?order=sequential", 2, 1.5),
       machine_avx2(), "FAIL", "promises determinism; error 1.5 x the summation error bound"},
      {"nondeterminism expected, error beyond the bound", ok(kMatmul, "cpu?order=atomic&threads=2", 2, 2.5),
       machine_avx2(), "FAIL", "error 2.5 x the summation error bound; 2 distinct outputs in 10 runs, as promised"},
  };
}

}  // namespace

TEST(GatesVerdict, EveryRule) {
  for (auto& row : rows()) {
    Results r = judged({row.obs}, row.machine);
    const Observation& o = r.observations[0];
    EXPECT_EQ(verdict_text(o.verdict), row.verdict) << row.what << ": " << o.verdict_reason;
    EXPECT_NE(o.verdict_reason.find(row.phrase), std::string::npos)
        << row.what << ": reason \"" << o.verdict_reason << "\" lacks \"" << row.phrase << "\"";
  }
}

TEST(GatesVerdict, TargetThisVersionDoesNotKnow) {
  Observation o = ok(kMatmul, "cpu");
  o.target = "quantum?qubits=3";
  Results r = judged({o});
  EXPECT_EQ(verdict_text(r.observations[0].verdict), "WARN");
  EXPECT_NE(r.observations[0].verdict_reason.find("no promise known"), std::string::npos);
}

TEST(GatesVerdict, TF32Budget) {
  const double u = std::ldexp(1.0, -24), u_in = std::ldexp(1.0, -11);
  const double gamma = 257 * u / (1 - 257 * u);
  EXPECT_DOUBLE_EQ(oracle_budget(256, u, u_in), (gamma + 2 * u_in + u_in * u_in) / gamma);
  EXPECT_NEAR(oracle_budget(256, u, u_in), 64.8, 0.05);
  EXPECT_EQ(oracle_budget(256, u, 0), 1);
  // (k+1)u >= 1: the bound says nothing, the inputs' term adds nothing.
  EXPECT_EQ(oracle_budget(int64_t(1) << 30, u, u_in), 1);
}

TEST(GatesVerdict, EqualityClassSplitFailsTheMinority) {
  // order=sequential promises the same bits for every thread count: threads=4 disagrees with 1 and 2.
  Observation t1 = ok(kMatmul, "cpu?order=sequential&threads=1");
  Observation t2 = ok(kMatmul, "cpu?order=sequential&threads=2");
  Observation t4 = ok(kMatmul, "cpu?order=sequential&threads=4");
  for (auto& f : t4.fingerprints) f = B;
  Observation other = ok("matmul?m=64&n=64&k=128", "cpu?order=sequential&threads=4");  // another workload
  for (auto& f : other.fingerprints) f = C;
  Results r = judged({t1, t2, t4, other});
  EXPECT_EQ(verdict_text(r.observations[0].verdict), "PASS") << r.observations[0].verdict_reason;
  EXPECT_EQ(verdict_text(r.observations[1].verdict), "PASS") << r.observations[1].verdict_reason;
  EXPECT_EQ(verdict_text(r.observations[2].verdict), "FAIL");
  const std::string& why = r.observations[2].verdict_reason;
  for (const std::string& part : {std::string("equality class cpu?order=sequential split on ") + t4.workload,
                                  t4.target + " gave bbbbbbbb", t1.target + ", " + t2.target + " gave aaaaaaaa"})
    EXPECT_NE(why.find(part), std::string::npos) << why << " lacks " << part;
  EXPECT_EQ(verdict_text(r.observations[3].verdict), "PASS") << r.observations[3].verdict_reason;
}

TEST(GatesVerdict, EqualityClassSplitWithoutMajorityFailsEverySide) {
  // 1:1: nothing says which side is right, so neither passes.
  Observation t2 = ok(kMatmul, "cpu?order=pairwise&threads=2");
  Observation t1 = ok(kMatmul, "cpu?order=pairwise&threads=1");
  for (auto& f : t2.fingerprints) f = B;
  Results r = judged({t2, t1});
  EXPECT_EQ(verdict_text(r.observations[0].verdict), "FAIL");
  EXPECT_EQ(verdict_text(r.observations[1].verdict), "FAIL");
  EXPECT_NE(r.observations[1].verdict_reason.find("with no majority"), std::string::npos) << r.observations[1].verdict_reason;
}

TEST(GatesVerdict, ClassesAreNotMixed) {
  // order=blocked's class holds one thread count: blocked with 1 and 2 threads may differ.
  Observation b1 = ok(kMatmul, "cpu?order=blocked&threads=1");
  Observation b2 = ok(kMatmul, "cpu?order=blocked&threads=2");
  for (auto& f : b2.fingerprints) f = B;
  Results r = judged({b1, b2});
  EXPECT_EQ(verdict_text(r.observations[0].verdict), "PASS");
  EXPECT_EQ(verdict_text(r.observations[1].verdict), "PASS");
}

TEST(GatesVerdict, CountsByStoredVerdict) {
  Results r = judged({ok(kMatmul, "cpu?order=sequential"), ok(kMatmul, "cpu?order=blocked&threads=2", 2),
                      ok(kMatmul, "cpu?order=atomic&threads=2", 2), ok(kMatmul, "cpu?order=atomic&threads=1", 2),
                      status(kMatmul, "onednn", ObsStatus::kSkipped, "not built")});
  Observation unjudged = ok(kMatmul, "cpu");
  r.observations.push_back(unjudged);
  VerdictCounts c = count_verdicts(r);
  EXPECT_EQ(c.pass, 1);
  EXPECT_EQ(c.fail, 1);
  EXPECT_EQ(c.expected, 1);
  EXPECT_EQ(c.warn, 1);
  EXPECT_EQ(c.skip, 1);
  EXPECT_EQ(c.unjudged, 1);
  for (Verdict v : {Verdict::kPass, Verdict::kFail, Verdict::kExpected, Verdict::kWarn, Verdict::kSkip}) {
    Verdict back;
    ASSERT_TRUE(parse_verdict(to_string(v), &back));
    EXPECT_EQ(back, v);
  }
  Verdict x;
  EXPECT_FALSE(parse_verdict("pass", &x));
}
