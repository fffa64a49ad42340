// The backend registry: one entry per backend, the promises, requirements against a machine, `=all`
// expansion, applicability and training variants.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "tests/fixtures.hpp"
#include "cli_helpers.hpp"
#include "kernels/cuda/cuda.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "probes/workload.hpp"
#include "suites/probe_suite.hpp"
#include "suites/train_design.hpp"

using namespace detaudit;
using RunToRun = Promise::RunToRun;

namespace {

Spec target(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_target(text, &s), &err)) << err;
  return s;
}
Spec workload(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_workload(text, &s), &err)) << err;
  return s;
}

// A machine with these CPU features and `gpus` GPUs, as machine_fingerprint() writes it.
nlohmann::json machine(std::vector<std::string> features, int gpus) {
  nlohmann::json m;
  m["cpu_features"] = features;
  m["gpus"] = nlohmann::json::array();
  for (int i = 0; i < gpus; ++i) m["gpus"].push_back({{"index", i}, {"name", "H200"}});
  return m;
}
const nlohmann::json kEverything = machine({"sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "sse4a", "avx", "avx2", "fma",
                                            "fma4", "xop", "avx512f", "avx512bw", "avx512bf16"},
                                           1);

}  // namespace

TEST(Registry, EveryBackendHasOneEntry) {
  std::set<std::string> names;
  for (auto& e : backend_registry()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name << " registered twice";
    EXPECT_FALSE(e.summary.empty()) << e.name;
    EXPECT_NE(e.promise, nullptr) << e.name;
    EXPECT_NE(e.applicable, nullptr) << e.name;
    EXPECT_EQ(find_backend(e.name), &e);
    EXPECT_TRUE(target(e.name).name == e.name) << "the parser accepts " << e.name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"cpu-ref", "cpu", "openblas", "onednn", "cuda", "cublas", "cublaslt",
                                          "cudnn", "external", "testing"}));
  EXPECT_EQ(find_backend("opencl"), nullptr);
  EXPECT_TRUE(find_backend("testing")->hidden);
  for (const char* g : {"cuda", "cublas", "cublaslt", "cudnn"}) EXPECT_EQ(find_backend(g)->device, DeviceKind::kCuda) << g;
  for (const char* c : {"cpu-ref", "cpu", "openblas", "onednn", "testing"}) EXPECT_EQ(find_backend(c)->device, DeviceKind::kHost) << c;
}

TEST(Registry, LibrariesTheBitsDependOn) {
  using L = std::vector<std::string>;
  EXPECT_EQ(find_backend("openblas")->libraries, (L{"openblas"}));
  EXPECT_EQ(find_backend("onednn")->libraries, (L{"onednn"}));
  EXPECT_EQ(find_backend("cuda")->libraries, (L{"cuda_runtime", "cuda_driver"}));
  EXPECT_EQ(find_backend("cublas")->libraries, (L{"cublas", "cuda_runtime", "cuda_driver"}));
  EXPECT_EQ(find_backend("cublaslt")->libraries, (L{"cublas", "cuda_runtime", "cuda_driver"}));
  EXPECT_EQ(find_backend("cudnn")->libraries, (L{"cudnn", "cuda_runtime", "cuda_driver"}));
  EXPECT_TRUE(find_backend("cpu")->libraries.empty());
  EXPECT_TRUE(find_backend("cpu-ref")->libraries.empty());
  // What selects the code of this build on this CPU: keyed as libraries are, and "hardware or build" in
  // the training analysis.
  EXPECT_EQ(find_backend("cpu")->build, (L{"compiler", "glibc", "cpu_isa_auto"}));
  EXPECT_EQ(find_backend("cpu-ref")->build, (L{"compiler", "glibc"}));
  EXPECT_EQ(find_backend("openblas")->build, (L{"openblas_core"}));
  EXPECT_EQ(find_backend("onednn")->build, (L{"onednn_isa"}));
}

struct PromiseCase {
  const char* target;
  const char* workload;
  RunToRun run_to_run;
  const char* equality_class;
  bool batch_invariance;
  double input_unit_roundoff;
};

class RegistryPromise : public ::testing::TestWithParam<PromiseCase> {};

TEST_P(RegistryPromise, MatchesTheTable) {
  const PromiseCase& c = GetParam();
  Promise p = promise_for(target(c.target), workload(c.workload), kEverything, {});
  EXPECT_EQ(int(p.run_to_run), int(c.run_to_run)) << p.run_to_run_source;
  EXPECT_EQ(p.equality_class, c.equality_class);
  EXPECT_EQ(p.batch_invariance_claimed, c.batch_invariance);
  EXPECT_DOUBLE_EQ(p.input_unit_roundoff, c.input_unit_roundoff);
  EXPECT_FALSE(p.run_to_run_source.empty()) << "every promise says who makes it";
  EXPECT_TRUE(p.unmet.empty()) << "this machine has everything";
}

constexpr auto kDet = RunToRun::kDeterministic, kNondet = RunToRun::kNondeterministic, kNone = RunToRun::kNone;
constexpr double kTf32 = 1.0 / 2048;
const char* kMatmul = "matmul?m=256&n=256&k=515";
const char* kConvBf = "conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter";

INSTANTIATE_TEST_SUITE_P(
    Table, RegistryPromise,
    ::testing::Values(
        PromiseCase{"cpu-ref", kMatmul, kDet, "cpu-ref", true, 0},
        PromiseCase{"cpu?order=sequential&threads=1", kMatmul, kDet, "cpu?order=sequential", true, 0},
        PromiseCase{"cpu?order=sequential&threads=4&isa=scalar", kMatmul, kDet, "cpu?order=sequential", true, 0},
        PromiseCase{"cpu?order=pairwise&threads=2&isa=avx2", "reduce?op=sum", kDet, "cpu?order=pairwise", true, 0},
        PromiseCase{"cpu?order=blocked&threads=2", kMatmul, kDet, "cpu?order=blocked&threads=2", true, 0},
        PromiseCase{"cpu?order=blocked&threads=2&isa=avx512", kMatmul, kDet, "cpu?order=blocked&threads=2", true, 0},
        PromiseCase{"cpu?order=atomic&threads=2", kMatmul, kNondet, "", false, 0},
        PromiseCase{"cpu?order=atomic&threads=2", "reduce?op=dot", kNondet, "", false, 0},
        PromiseCase{"cpu?order=atomic&threads=1", kMatmul, kNone, "", false, 0},
        PromiseCase{"openblas?core=Haswell&threads=1", kMatmul, kDet, "", false, 0},
        PromiseCase{"openblas?core=Haswell&threads=2", "reduce?op=dot", kDet, "", false, 0},
        PromiseCase{"onednn?isa=AVX2&threads=1", kConvBf, kNone, "", false, 0},
        PromiseCase{"onednn?isa=ALL&threads=2&layout=blocked", kMatmul, kNone, "", false, 0},
        PromiseCase{"cuda?order=tree", kMatmul, kDet, "", false, 0},
        PromiseCase{"cuda?order=atomic", kMatmul, kNondet, "", false, 0},
        PromiseCase{"cublas?math=pedantic", kMatmul, kDet, "", false, 0},
        PromiseCase{"cublas?math=tf32", kMatmul, kDet, "", false, kTf32},
        PromiseCase{"cublas?math=bf16x9", kMatmul, kDet, "", false, 0},
        PromiseCase{"cublas?math=pedantic&atomics=allowed", kMatmul, kNone, "", false, 0},
        PromiseCase{"cublas?math=pedantic&streams=4&workspace=shared", kMatmul, kNone, "", false, 0},
        PromiseCase{"cublas?math=pedantic&streams=4&workspace=per_stream", kMatmul, kDet, "", false, 0},
        PromiseCase{"cublaslt?algo=3", kMatmul, kDet, "", false, 0},
        // cuDNN without details: the static list of cudnn_ops.h.
        PromiseCase{"cudnn?bwd_filter_algo=0", kConvBf, kNondet, "", false, 0},
        PromiseCase{"cudnn?bwd_filter_algo=3", kConvBf, kNondet, "", false, 0},
        PromiseCase{"cudnn?bwd_filter_algo=1", kConvBf, kDet, "", false, 0},
        PromiseCase{"cudnn?bwd_filter_algo=4", kConvBf, kNone, "", false, 0},  // /* not implemented */
        PromiseCase{"cudnn?bwd_data_algo=0", "conv2d?pass=bwd_data", kNondet, "", false, 0},
        PromiseCase{"cudnn?fwd_algo=0&math=tf32", "conv2d?pass=fwd", kDet, "", false, kTf32},
        PromiseCase{"cudnn?pool=nondeterministic", "maxpool?pass=bwd", kNondet, "", false, 0},
        PromiseCase{"cudnn", "maxpool?pass=bwd", kDet, "", false, 0},
        PromiseCase{"cudnn", kConvBf, kNone, "", false, 0},  // auto: unknown until cuDNN says
        PromiseCase{"testing?fault=segv", kMatmul, kNone, "", false, 0}));

TEST(Registry, CpuAtomicPromisesNoVariationWhereTheRaceCannotHappen) {
  // maxpool has no reduction order; a gemm with k < 64 is one chain per element.
  Promise p = promise_for(target("cpu?order=atomic&threads=2"), workload("maxpool"), kEverything, {});
  EXPECT_EQ(p.run_to_run, kDet);
  p = promise_for(target("cpu?order=atomic&threads=2"), workload("matmul?k=63"), kEverything, {});
  EXPECT_EQ(p.run_to_run, kDet);
  EXPECT_EQ(p.equality_class, "cpu?order=sequential");
  EXPECT_EQ(promise_for(target("cpu?order=atomic&threads=4"), workload("reduce?op=sum&n=128"), kEverything, {}).run_to_run,
            kDet);
  EXPECT_EQ(promise_for(target("cpu?order=atomic&threads=4"), workload("reduce?op=sum&n=129"), kEverything, {}).run_to_run,
            kNondet);
}

// An observation's specs travel with it: a judge reads the specs it carries and parses its texts only where it
// carries none (an observation made by hand); attach_specs makes the texts canonical; a text no version of the
// registry parses has no specs and no promise, and says why.
TEST(Registry, AnObservationsSpecsTravelWithIt) {
  Observation o;
  o.target = "cpu?threads=4&order=atomic";  // keys out of the canonical order
  o.workload = "reduce?n=129&op=sum";
  Spec t, w;
  std::string err;
  ASSERT_TRUE(succeeded(specs_of(o, &t, &w), &err)) << err;
  EXPECT_EQ(t.str(), target(o.target).str());
  ASSERT_TRUE(succeeded(attach_specs(&o), &err)) << err;
  EXPECT_EQ(o.target, target("cpu?order=atomic&threads=4").str()) << "the text is canonical";
  EXPECT_EQ(o.workload, workload("reduce?op=sum&n=129").str());
  ASSERT_TRUE(o.target_spec && o.workload_spec);
  EXPECT_EQ(o.target_spec->str(), o.target);
  // The carried specs are what is read: with texts that no longer parse, the cell still has its promise.
  Observation carried = o;
  carried.target = "no-such-backend", carried.workload = "no-such-op";
  ASSERT_TRUE(succeeded(specs_of(carried, &t, &w), &err)) << err;
  EXPECT_EQ(t.str(), o.target);
  ASSERT_TRUE(promise_of(carried, kEverything));
  EXPECT_EQ(promise_of(carried, kEverything)->run_to_run, kNondet);
  // Made by hand, of texts this registry does not know: no specs, no promise, and the reason names the text.
  Observation unknown;
  unknown.target = "no-such-backend", unknown.workload = "reduce?op=sum&n=129";
  const Status st = specs_of(unknown, &t, &w);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("no-such-backend"), std::string::npos) << st.message();
  EXPECT_FALSE(promise_of(unknown, kEverything));
  EXPECT_FALSE(attach_specs(&unknown).is_ok());
  EXPECT_FALSE(unknown.target_spec) << "a failed attach leaves the observation as it was";
}

// Read from a results file, every cell carries its specs, canonical, as its texts now are.
TEST(Registry, ResultsReadBackCarryTheirCellsSpecs) {
  Results r;
  r.started_at = "2024-01-01T00:00:00Z";
  r.command = "detaudit probe --targets cpu?threads=1 --workloads reduce?op=sum&n=100 --repeats 1";
  r.plan = {{"suite", "quick"}, {"custom", true}, {"targets", {"cpu?threads=1"}}, {"workloads", {"reduce?op=sum&n=100"}},
            {"repeats", 1}, {"timeout_s", 120.0}};
  r.machine = test::machine_json();
  r.observations = {test::ran("reduce?n=100&op=sum", "cpu?threads=1", {test::fingerprint('a')})};
  r.observations[0].target_spec.reset(), r.observations[0].workload_spec.reset();
  std::string err;
  ASSERT_TRUE(succeeded(canonicalize_specs(&r, "R/results.json"), &err)) << err;
  const Observation& o = r.observations[0];
  ASSERT_TRUE(o.target_spec && o.workload_spec);
  EXPECT_EQ(o.workload, workload("reduce?op=sum&n=100").str());
  EXPECT_EQ(o.workload_spec->str(), o.workload);
  EXPECT_EQ(o.target_spec->str(), o.target);
}

TEST(Registry, UnmetRequirementsFollowTheMachine) {
  const nlohmann::json no_avx512 = machine({"sse4.1", "avx", "avx2", "fma"}, 0);
  const nlohmann::json with_avx512 = machine({"sse4.1", "avx", "avx2", "fma", "avx512f", "avx512bw"}, 1);
  using V = std::vector<std::string>;

  Promise p = promise_for(target("cpu?isa=avx512"), workload(kMatmul), no_avx512, {});
  EXPECT_EQ(p.requirements, V{"AVX-512F"});
  EXPECT_EQ(p.unmet, V{"AVX-512F"});
  EXPECT_TRUE(promise_for(target("cpu?isa=avx512"), workload(kMatmul), with_avx512, {}).unmet.empty());
  EXPECT_EQ(promise_for(target("cpu?isa=avx2"), workload(kMatmul), machine({"avx2"}, 0), {}).unmet, V{"FMA"});
  EXPECT_TRUE(promise_for(target("cpu?isa=auto"), workload(kMatmul), machine({}, 0), {}).requirements.empty());

  p = promise_for(target("openblas?core=SkylakeX"), workload(kMatmul), no_avx512, {});
  EXPECT_EQ(p.unmet, V{"AVX-512F"});
  EXPECT_TRUE(promise_for(target("openblas?core=SkylakeX"), workload(kMatmul), with_avx512, {}).unmet.empty());
  p = promise_for(target("openblas?core=Bulldozer"), workload(kMatmul), with_avx512, {});
  EXPECT_EQ(p.unmet, (V{"FMA4", "XOP"}));
  p = promise_for(target("openblas?core=CooperLake"), workload(kMatmul), with_avx512, {});
  EXPECT_EQ(p.unmet, V{"AVX-512 BF16"});
  EXPECT_TRUE(promise_for(target("openblas?core=Haswell"), workload(kMatmul), no_avx512, {}).unmet.empty());
  EXPECT_TRUE(promise_for(target("openblas"), workload(kMatmul), machine({}, 0), {}).requirements.empty());

  // oneDNN's isa is a cap: nothing to meet.
  EXPECT_TRUE(promise_for(target("onednn?isa=AVX512_CORE"), workload(kMatmul), no_avx512, {}).requirements.empty());

  for (const char* g : {"cuda", "cublas", "cublaslt", "cudnn"}) {
    p = promise_for(target(g), workload(kMatmul), no_avx512, {});
    EXPECT_EQ(p.requirements, V{"a CUDA device"}) << g;
    EXPECT_EQ(p.unmet, V{"a CUDA device"}) << g;
    EXPECT_TRUE(promise_for(target(g), workload(kMatmul), with_avx512, {}).unmet.empty()) << g;
    nlohmann::json no_gpus_key = with_avx512;
    no_gpus_key.erase("gpus");
    EXPECT_EQ(promise_for(target(g), workload(kMatmul), no_gpus_key, {}).unmet, V{"a CUDA device"}) << g;
  }
}

TEST(Registry, CudnnPromiseComesFromItsClaim) {
  const Spec t = target("cudnn"), w = workload(kConvBf);
  Promise p = promise_for(t, w, kEverything,
                          {{"claimed_deterministic", "no"}, {"algo_name", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0"}});
  EXPECT_EQ(p.run_to_run, kNondet);
  EXPECT_NE(p.run_to_run_source.find("cuDNN"), std::string::npos) << p.run_to_run_source;
  EXPECT_NE(p.run_to_run_source.find("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0"), std::string::npos) << p.run_to_run_source;

  p = promise_for(t, w, kEverything, {{"claimed_deterministic", "yes"}, {"algo_name", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1"}});
  EXPECT_EQ(p.run_to_run, kDet);
  EXPECT_NE(p.run_to_run_source.find("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1"), std::string::npos);

  // The claim wins over the static list: cuDNN may report a pinned algorithm as deterministic.
  p = promise_for(target("cudnn?bwd_filter_algo=0"), w, kEverything, {{"claimed_deterministic", "yes"}});
  EXPECT_EQ(p.run_to_run, kDet);
}

TEST(Registry, ExpandAllCounts) {
  EXPECT_EQ(expand_all(target("cublaslt?algo=all")).size(), 8u);
  EXPECT_EQ(expand_all(target("cudnn?fwd_algo=all")).size(), 8u);
  EXPECT_EQ(expand_all(target("cudnn?bwd_data_algo=all")).size(), 6u);
  EXPECT_EQ(expand_all(target("cudnn?bwd_filter_algo=all")).size(), 7u);
  EXPECT_EQ(expand_all(target("cudnn?fwd_algo=all&bwd_data_algo=all")).size(), 48u);
  EXPECT_EQ(expand_all(target("cpu?threads=2")).size(), 1u);
  auto v = expand_all(target("cudnn:1?bwd_filter_algo=all"));
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(v[i].get("bwd_filter_algo"), std::to_string(i));
    EXPECT_EQ(v[i].device, 1);
    std::string err;
    Spec again;
    EXPECT_TRUE(succeeded(parse_target(v[i].str(), &again), &err)) << err;
    EXPECT_EQ(again.str(), v[i].str());
  }
}

TEST(Registry, Applicable) {
  struct Case {
    const char* target;
    const char* workload;
    bool applies;
  };
  const Case cases[] = {
      {"cpu", "maxpool", true},
      {"cpu-ref", "conv2d?pass=bwd_data", true},
      {"openblas", "maxpool", true},
      {"onednn", "reduce?op=softmax", true},
      {"cuda", "conv2d", true},
      {"testing?fault=segv", "matmul", true},
      {"cublas", "matmul", true},
      {"cublas", "batchinv", true},
      {"cublas", "reduce?op=sum", true},
      {"cublas", "reduce?op=softmax", false},
      {"cublas", "conv2d", false},
      {"cublas", "maxpool", false},
      {"cublaslt", "matmul", true},
      {"cublaslt", "batchinv", true},
      {"cublaslt", "reduce?op=sum", false},
      {"cudnn", "conv2d?pass=fwd", true},
      {"cudnn", "conv2d?pass=bwd_filter", true},
      {"cudnn", "maxpool", true},
      {"cudnn", "matmul", false},
      {"cudnn", "reduce", false},
      {"cudnn?fwd_algo=3", "conv2d?pass=fwd", true},
      {"cudnn?fwd_algo=3", "conv2d?pass=bwd_data", false},
      {"cudnn?fwd_algo=3", "maxpool", false},
      {"cudnn?bwd_data_algo=1", "conv2d?pass=bwd_data", true},
      {"cudnn?bwd_filter_algo=1", "conv2d?pass=bwd_filter", true},
      {"cudnn?bwd_filter_algo=1", "conv2d?pass=fwd", false},
      {"cudnn?math=tf32", "conv2d?pass=fwd", true},
      {"cudnn?math=tf32", "maxpool", false},
      {"cudnn?pool=nondeterministic", "maxpool", true},
      {"cudnn?pool=nondeterministic", "conv2d", false},
  };
  for (auto& c : cases) EXPECT_EQ(applicable(target(c.target), workload(c.workload)), c.applies) << c.target << " x " << c.workload;
}

TEST(Registry, TrainingVariants) {
  struct Case {
    const char* base;
    const char* det;
    const char* nondet;
  };
  const Case cases[] = {
      {"cpu?threads=2", "cpu?order=blocked&threads=2&isa=auto", "cpu?order=atomic&threads=2&isa=auto"},
      {"cpu?order=sequential&threads=4&isa=avx2", "cpu?order=blocked&threads=4&isa=avx2",
       "cpu?order=atomic&threads=4&isa=avx2"},
      {"cuda:1", "cuda:1?order=tree", "cuda:1?order=atomic"},
      {"cublas?math=tf32", "cublas:0?math=tf32&atomics=not_allowed&streams=1&workspace=per_stream",
       "cublas:0?math=tf32&atomics=allowed&streams=1&workspace=per_stream"},
      {"cudnn", "cudnn:0?fwd_algo=1&bwd_data_algo=1&bwd_filter_algo=1&math=fma&pool=deterministic",
       "cudnn:0?fwd_algo=1&bwd_data_algo=0&bwd_filter_algo=0&math=fma&pool=deterministic"},
  };
  for (auto& c : cases) {
    Spec d, n;
    std::string err;
    ASSERT_TRUE(succeeded(training_variants(target(c.base), &d, &n), &err)) << c.base << ": " << err;
    EXPECT_EQ(d.str(), c.det);
    EXPECT_EQ(n.str(), c.nondet);
    TargetVariants v;
    ASSERT_TRUE(succeeded(derive_variants(target(c.base), &v), &err)) << err;
    EXPECT_EQ(v.deterministic.str(), c.det);
    EXPECT_EQ(v.nondeterministic.str(), c.nondet);
    EXPECT_EQ(v.base.str(), target(c.base).str());
  }
  // order=atomic with one thread has one completion order, nothing to vary.
  {
    Spec d, n;
    std::string err;
    EXPECT_FALSE(succeeded(training_variants(target("cpu?threads=1"), &d, &n), &err));
    EXPECT_EQ(err, "cpu?order=blocked&threads=1&isa=auto has no nondeterministic variant: order=atomic with one "
                   "thread has one completion order (use threads=2 or more)");
  }
  for (const char* none : {"cpu-ref", "openblas", "onednn", "cublaslt", "testing?fault=none"}) {
    Spec d, n;
    std::string err;
    EXPECT_FALSE(succeeded(training_variants(target(none), &d, &n), &err)) << none;
    EXPECT_EQ(err, "target '" + target(none).str() +
                       "' has no nondeterministic variant (training targets: cpu, cuda, cublas, cudnn)");
  }
}

TEST(Registry, EverySuiteSpecParsesAndHasAnEntry) {
  for (const std::string& suite : suite_names()) {
    ProbePlan plan;
    std::string err;
    ASSERT_TRUE(succeeded(make_plan(suite, "", "", 0, 60, &plan), &err)) << suite << ": " << err;
    EXPECT_FALSE(plan.targets.empty());
    for (auto& t : plan.targets) {
      const BackendEntry* e = find_backend(t.name);
      ASSERT_NE(e, nullptr) << t.str();
      for (auto& w : plan.workloads) {
        Promise p = promise_for(t, w, kEverything, {});
        EXPECT_FALSE(p.run_to_run_source.empty()) << t.str() << " x " << w.str();
      }
    }
  }
}

TEST(Registry, WorkerEnvironment) {
  using Env = std::map<std::string, std::string>;
  EXPECT_EQ(target_environment(target("cpu?threads=4")), (Env{{"OMP_NUM_THREADS", "4"}, {"OPENBLAS_NUM_THREADS", "4"}}));
  EXPECT_EQ(target_environment(target("cpu-ref")), (Env{{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}}));
  EXPECT_EQ(target_environment(target("openblas?core=Haswell&threads=2")),
            (Env{{"OMP_NUM_THREADS", "2"}, {"OPENBLAS_NUM_THREADS", "2"}, {"OPENBLAS_CORETYPE", "Haswell"}}));
  EXPECT_EQ(target_environment(target("openblas")).at("OPENBLAS_CORETYPE"), "") << "auto unsets it";
  EXPECT_EQ(target_environment(target("onednn?isa=AVX2")),
            (Env{{"OMP_NUM_THREADS", "1"},
                 {"OPENBLAS_NUM_THREADS", "1"},
                 {"ONEDNN_MAX_CPU_ISA", "AVX2"},
                 {"DNNL_MAX_CPU_ISA", "AVX2"}}));
}

// What the cpu backend says it provides is what its kernels run: matmul in f64 only under order=portable (a record
// of any other skip of a provided workload, where the machine has what the target needs, is refused as a lie).
TEST(Registry, WhatCpuProvidesIsWhatItsKernelsRun) {
  const BackendEntry* cpu = find_backend("cpu");
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(cpu->provides, nullptr);
  Spec f64, f32;
  ASSERT_TRUE(parse_workload("matmul?m=1&n=1&k=1&dtype=f64", &f64).is_ok());
  ASSERT_TRUE(parse_workload("matmul?m=1&n=1&k=1", &f32).is_ok());
  for (const char* order : {"sequential", "pairwise", "blocked", "atomic", "portable"}) {
    const Spec t = target(std::string("cpu?threads=1&isa=scalar&order=") + order);
    BackendOr made = make_target_backend(t);
    ASSERT_TRUE(made) << made.message();
    double a = 1, b = 2, c = 0;
    const Status st = made.value()->gemm_f64(Trans::kN, Trans::kN, 1, 1, 1, 1.0, &a, 1, &b, 1, 0.0, &c, 1);
    EXPECT_EQ(st.code() == Status::Code::kUnsupported, !cpu->provides(t, f64)) << order << ": " << st.message();
    EXPECT_TRUE(cpu->provides(t, f32)) << order;
  }
}

TEST(Registry, Factory) {
  BackendOr ref = make_target_backend(target("cpu-ref"));
  ASSERT_TRUE(ref) << ref.message();
  ASSERT_NE(ref.value(), nullptr);
  BackendOr cpu = make_target_backend(target("cpu?order=pairwise&threads=2&isa=scalar"));
  ASSERT_TRUE(cpu) << cpu.message();
  EXPECT_EQ(cpu.value()->name(), "cpu?order=pairwise&threads=2&isa=scalar");
  BackendOr t = make_target_backend(target("testing?fault=none"));
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(t.value()->name(), "testing?fault=none");
  float c[4] = {1, 1, 1, 1};
  EXPECT_TRUE(t.value()->gemm(Trans::kN, Trans::kN, 2, 2, 1, 1.0f, c, 1, c, 2, 0.0f, c, 2).is_ok());
  EXPECT_EQ(c[0], 0.0f);
  Spec bogus;
  bogus.name = "opencl";
  EXPECT_EQ(make_target_backend(bogus).status().code(), Status::Code::kInvalid);
  // A GPU target here: either a backend or unavailable with a reason, never a crash.
  BackendOr g = make_target_backend(target("cublas"));
  if (!g) {
    EXPECT_EQ(g.status().code(), Status::Code::kUnavailable) << g.message();
    EXPECT_FALSE(g.message().empty());
  }
}

// `trains` is what the backend does: every host backend made here runs all three of bias add, the
// convolution's filter gradient and a sigmoid's backward pass exactly when its entry says it trains. (A trace
// header naming a backend that does not train is refused on that flag, so a wrong flag hides a lie or
// refuses a real trace.)
TEST(Registry, ABackendTrainsExactlyWhenItsEntrySaysSo) {
  int made = 0;
  for (const BackendEntry& e : backend_registry()) {
    if (e.device != DeviceKind::kHost || e.imported) continue;
    Spec t = target(e.name == "testing" ? "testing?fault=none" : e.name);
    EXPECT_EQ(target_trains(t), e.trains) << e.name;
    BackendOr b = make_target_backend(t);
    if (!b) {
      // Only a library this build left out may be missing here, and it says so.
      EXPECT_EQ(b.status().code(), Status::Code::kUnavailable) << e.name << ": " << b.message();
      continue;
    }
    ++made;
    std::vector<float> y(2 * 3 * 4, 0.5f), bias(3, 0.25f), db(3), x(2 * 3 * 4, 0.5f), dx(x.size());
    ConvShape cs;
    cs.n = 2, cs.c = 3, cs.h = 2, cs.w = 2, cs.k = 3;
    std::vector<float> dw(cs.w_size());
    const Status add = b.value()->bias_add(y.data(), bias.data(), 2, 3, 4);
    const Status filter = b.value()->conv2d_bwd_filter(cs, x.data(), y.data(), dw.data());
    const Status bwd = b.value()->unary_bwd(UnaryOp::kSigmoid, x.data(), y.data(), y.data(), dx.data(), x.size());
    // (A backend that does not train may still run some of them through the base class's defaults: one it
    // lacks, answered unsupported, is enough.)
    for (const Status* st : {&add, &filter, &bwd}) {
      if (!st->is_ok()) {
        EXPECT_EQ(st->code(), Status::Code::kUnsupported) << e.name << ": " << st->message();
      }
    }
    EXPECT_EQ(add.is_ok() && filter.is_ok() && bwd.is_ok(), e.trains)
        << e.name << ": " << add.message() << filter.message() << bwd.message();
  }
  EXPECT_GE(made, 3) << "cpu, cpu-ref and testing are always built";
  EXPECT_FALSE(target_trains(target("openblas")));
  EXPECT_TRUE(target_trains(target("cudnn")));
}

// `detaudit probe` says one line per finished target, with its outcomes, elapsed time and ETA; a skip
// reason is said once.
TEST(ProbeProgress, OneLinePerTargetAndSkipReasonsOnce) {
  auto dir = cli_test::fresh_dir("registry-progress");
  cli_test::CliRun r = cli_test::run_cli(
      "probe --targets 'cpu-ref,cpu?order=sequential&threads=2,cuda:0?order=tree,cublas:0?math=tf32' "
      "--workloads 'reduce?op=sum&n=1000,matmul?m=8&n=8&k=8' --repeats 2 --no-fail --out " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> target_lines;
  std::istringstream in(r.err);
  for (std::string line; std::getline(in, line);)
    if (line.find("] target ") != std::string::npos) target_lines.push_back(line);
  ASSERT_EQ(target_lines.size(), 4u) << r.err;
  EXPECT_NE(target_lines[0].find("target 1/4 cpu-ref: 2 workloads, 2 deterministic in "), std::string::npos)
      << target_lines[0];
  EXPECT_TRUE(std::regex_search(target_lines[1], std::regex(R"(target 2/4 cpu\?order=sequential&threads=2&isa=auto: )"
                                                            R"(2 workloads, 2 deterministic in [0-9.]+ s; elapsed [0-9]+:[0-9]{2}, ETA [0-9]+:[0-9]{2}$)")))
      << target_lines[1];
  if (query_cuda_environment().available) return;  // the GPU targets ran
  // No device, or (the sanitizer build) CUDA not built at all: either way one reason for both GPU targets.
  EXPECT_TRUE(target_lines[2].find("target 3/4 cuda:0?order=tree: 2 workloads skipped: no CUDA device: ") != std::string::npos ||
              target_lines[2].find("target 3/4 cuda:0?order=tree: 2 workloads skipped: detaudit was built without CUDA") !=
                  std::string::npos)
      << target_lines[2];
  EXPECT_NE(target_lines[3].find(": skipped (same reason) in "), std::string::npos) << target_lines[3];
  EXPECT_EQ(target_lines[3].find("ETA"), std::string::npos) << "nothing is left after the last target";
}

TEST(Registry, CublasLtTakesEveryAlgorithmIndexItAsksTheHeuristicFor) {
  // The backend asks cublasLtMatmulAlgoGetHeuristic for kCublasLtMaxAlgos results, so every index the
  // spec accepts can be answered; one past it is refused with the range.
  Spec t;
  std::string err;
  EXPECT_TRUE(succeeded(parse_target("cublaslt:0?algo=" + std::to_string(kCublasLtMaxAlgos - 1), &t), &err)) << err;
  EXPECT_FALSE(succeeded(parse_target("cublaslt:0?algo=" + std::to_string(kCublasLtMaxAlgos), &t), &err));
  EXPECT_NE(err.find(std::to_string(kCublasLtMaxAlgos - 1)), std::string::npos) << err;
}

TEST(Registry, Bf16x9IsEmulatedOnlyWhereCublasImplementsIt) {
  EXPECT_TRUE(cublas_emulates_bf16x9(10, 0));   // B200, GB200
  EXPECT_TRUE(cublas_emulates_bf16x9(10, 3));   // B300, GB300
  EXPECT_FALSE(cublas_emulates_bf16x9(9, 0));   // H100, H200: plain FP32 runs
  EXPECT_FALSE(cublas_emulates_bf16x9(8, 0));   // A100
  EXPECT_FALSE(cublas_emulates_bf16x9(12, 0));  // RTX Blackwell
}

// The suites' default targets come from the entries (BackendEntry::suite_targets) in the order the suites
// have always listed them: the host targets (the four-thread cpu ones of the full suite after the vendor
// libraries'), then the GPU targets.
TEST(Registry, SuiteTargetsKeepTheirOrder) {
  for (const std::string suite : {"quick", "full"}) {
    std::vector<std::string> want = {"cpu-ref"};
    for (const char* order : {"sequential", "pairwise", "blocked", "atomic"})
      for (int t : {1, 2}) want.push_back(std::string("cpu?order=") + order + "&threads=" + std::to_string(t));
    if (suite == "quick") {
      for (const char* core : {"Haswell", "SkylakeX", "Sandybridge", "Nehalem", "Core2", "Bulldozer"})
        want.push_back(std::string("openblas?core=") + core + "&threads=1");
      want.push_back("openblas?core=Haswell&threads=2");
      for (const char* isa : {"SSE41", "AVX", "AVX2", "AVX512_CORE"}) want.push_back(std::string("onednn?isa=") + isa + "&threads=1");
      want.push_back("onednn?isa=AVX2&threads=1&layout=blocked");
    } else {
      for (const char* core : {"Haswell", "Zen", "SkylakeX", "CooperLake", "Sandybridge", "Nehalem", "Core2", "Penryn",
                               "Dunnington", "Prescott", "Atom", "Nano", "Barcelona", "Bulldozer", "Excavator"})
        want.push_back(std::string("openblas?core=") + core + "&threads=1");
      for (int t : {2, 4}) want.push_back("openblas?core=Haswell&threads=" + std::to_string(t));
      for (const char* isa : {"SSE41", "AVX", "AVX2", "AVX512_CORE", "ALL"}) {
        want.push_back(std::string("onednn?isa=") + isa + "&threads=1");
        want.push_back(std::string("onednn?isa=") + isa + "&threads=1&layout=blocked");
      }
      want.push_back("onednn?isa=ALL&threads=2");
      for (const char* order : {"blocked", "atomic"}) want.push_back(std::string("cpu?order=") + order + "&threads=4");
    }
    for (const char* g : {"cuda:0?order=tree", "cuda:0?order=atomic", "cublas:0?math=pedantic", "cublas:0?math=default",
                          "cublas:0?math=tf32", "cublas:0?math=bf16x9", "cublas:0?math=pedantic&atomics=allowed",
                          "cublas:0?math=pedantic&streams=4&workspace=shared",
                          "cublas:0?math=pedantic&streams=4&workspace=per_stream", "cublaslt:0?algo=all", "cudnn:0",
                          "cudnn:0?fwd_algo=all", "cudnn:0?bwd_data_algo=all", "cudnn:0?bwd_filter_algo=all",
                          "cudnn:0?math=tf32", "cudnn:0?pool=nondeterministic"})
      want.push_back(g);
    EXPECT_EQ(suite_default_targets(suite), want) << suite;
  }
}

TEST(Registry, DeviceKindsAndAlgorithmPickers) {
  EXPECT_EQ(to_string(DeviceKind::kHost), "host");
  EXPECT_EQ(to_string(DeviceKind::kCuda), "cuda");
  EXPECT_EQ(target_facts("cudnn:0").device_kind, "cuda");
  EXPECT_EQ(target_facts("cpu?threads=2").device_kind, "host");
  for (auto& e : backend_registry())
    EXPECT_EQ(e.picks_algorithms, e.name == "cudnn" || e.name == "cublaslt") << e.name;
  EXPECT_EQ(oracle_backend().name, "cpu-ref");
  EXPECT_EQ(imported_backend().name, "external");
  // cuDNN picks when the pass's algorithm is auto; a pinned one, another pass's pin, or a gemm does not.
  EXPECT_TRUE(picks_algorithm(target("cudnn:0"), workload("conv2d?pass=bwd_data")));
  EXPECT_TRUE(picks_algorithm(target("cudnn:0?fwd_algo=1"), workload("conv2d?pass=bwd_data")));
  EXPECT_FALSE(picks_algorithm(target("cudnn:0?bwd_data_algo=1"), workload("conv2d?pass=bwd_data")));
  EXPECT_FALSE(picks_algorithm(target("cublaslt:0"), workload("conv2d")));
  EXPECT_FALSE(picks_algorithm(target("cpu"), workload("conv2d")));
  // A machine without GPUs says why through the CUDA device kind; the host is always there.
  const nlohmann::json none = {{"gpus", nlohmann::json::array()}, {"cuda", "no CUDA device: no driver"}};
  const Status cuda_none = device_kind_entry(DeviceKind::kCuda).availability(none);
  EXPECT_EQ(cuda_none.code(), Status::Code::kUnavailable);
  EXPECT_EQ(cuda_none.message(), "no CUDA device: no driver");
  EXPECT_TRUE(device_kind_entry(DeviceKind::kHost).availability(none).is_ok());
  const nlohmann::json one = {{"gpus", {{{"index", 0}, {"name", "H200"}}}}};
  EXPECT_TRUE(device_kind_entry(DeviceKind::kCuda).availability(one).is_ok());
  EXPECT_EQ(default_training_targets("qualify"), std::vector<std::string>{"cpu?threads=2"});
  EXPECT_EQ(default_training_targets("sony2021"), (std::vector<std::string>{"cpu?threads=2", "cpu?threads=4"}));
  EXPECT_EQ(default_training_targets("prednet"), std::vector<std::string>{"cpu?threads=2&conv=winograd"});
}

// What a record says of the backend its target ran (a cell's describe and details, a trace header's backend)
// is what that target runs: each backend's own description, remark and settings, and nothing else.
TEST(Registry, ABackendRecordIsWhatItsTargetRuns) {
  auto why = [](const std::string& target, const std::string& describe, std::map<std::string, std::string> details,
                const nlohmann::json& machine = nlohmann::json()) {
    Spec t;
    EXPECT_TRUE(parse_target(target, &t).is_ok()) << target;
    return backend_claims_contradiction(t, describe, details, true, "describe", machine);
  };
  // cpu and cpu-ref: as the backend made here records itself (the instruction set "auto" resolves to aside).
  auto recorded = [](const std::string& target) {  // as a worker records the backend it ran
    Observation o;
    Spec t;
    EXPECT_TRUE(parse_target(target, &t).is_ok()) << target;
    o.target = t.str();
    test::describe_as_recorded(&o);
    EXPECT_FALSE(o.describe.empty()) << target;
    return o;
  };
  const Observation made = recorded("cpu?order=atomic&threads=2");
  Spec cpu;
  ASSERT_TRUE(parse_target(made.target, &cpu).is_ok());
  const std::string name = made.describe.substr(0, made.describe.find(" ("));
  std::map<std::string, std::string> d = made.details;
  EXPECT_EQ(why(cpu.str(), made.describe, d), "");
  auto other_isa = d;
  other_isa["isa"] = d["isa"] == "avx2" ? "scalar" : "avx2";  // another CPU's resolution of auto
  EXPECT_EQ(why(cpu.str(), name + " (isa " + other_isa["isa"] + ")", other_isa), "");
  EXPECT_NE(why(cpu.str(), name + " (hello)", d).find("remark is \"(hello)\""), std::string::npos);
  EXPECT_NE(why(cpu.str(), name, d).find("remark is \"()\""), std::string::npos);
  EXPECT_NE(why(cpu.str(), name + " (isa " + d["isa"] + ", conv winograd)", d).find("remark"), std::string::npos);
  auto winograd = d;
  winograd["conv"] = "winograd";
  EXPECT_NE(why(cpu.str(), made.describe, winograd).find("details.conv is \"winograd\""), std::string::npos);
  auto no_conv = d;
  no_conv.erase("conv");
  EXPECT_NE(why(cpu.str(), made.describe, no_conv).find("details.conv is missing"), std::string::npos);
  Spec wino;
  ASSERT_TRUE(parse_target("cpu?threads=2&conv=winograd", &wino).is_ok());
  auto wd = d;
  wd["order"] = "blocked", wd["conv"] = "winograd";
  EXPECT_NE(why(wino.str(), "cpu?order=blocked&threads=2 (isa " + d["isa"] + ")", wd).find("runs as"), std::string::npos);
  const Observation portable = recorded("cpu?order=portable&threads=1");
  std::map<std::string, std::string> pd = portable.details;
  EXPECT_EQ(why(portable.target, portable.describe, pd), "");
  pd["leaf"] = "abc";
  EXPECT_NE(why(portable.target, portable.describe, pd).find("details.leaf is \"abc\""), std::string::npos);
  EXPECT_EQ(why("cpu-ref", "cpu-ref", {{"accumulator", "double (gemm_f64: long double)"}, {"threads", "1"}}), "");
  EXPECT_NE(why("cpu-ref", "cpu-ref", {{"accumulator", "float"}, {"threads", "1"}}).find("details.accumulator"),
            std::string::npos);
  EXPECT_NE(why("cpu-ref", "cpu-ref", {{"accumulator", "double (gemm_f64: long double)"}, {"threads", "2"}})
                .find("details.threads is \"2\""),
            std::string::npos);
  // openblas: named by its threads; the remark names the core the details do, the core the target pins (in
  // OpenBLAS's own spelling: it matches OPENBLAS_CORETYPE without regard to case), the threads it pins in effect,
  // and its config is the machine's build but for that core.
  const std::string ob = "openblas?core=Haswell&threads=1";
  const nlohmann::json obm = {{"libraries",
                               {{"openblas", "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64"},
                                {"openblas_core", "Prescott"}}}};
  const std::map<std::string, std::string> obd = {
      {"corename", "Haswell"}, {"coretype_env", "Haswell"}, {"threads", "1"}, {"threads_effective", "1"},
      {"config", "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"}};
  const std::string obs = "openblas?threads=1 (OpenBLAS core Haswell)";
  EXPECT_EQ(why(ob, obs, obd, obm), "");
  EXPECT_EQ(why(ob, obs, obd), "");  // a record without a machine: the config names the core
  EXPECT_NE(why(ob, "openblas?threads=1 (hello)", obd, obm).find("is not the core its details name"), std::string::npos);
  EXPECT_NE(why(ob, "openblas?core=Haswell&threads=1 (OpenBLAS core Haswell)", obd, obm).find("names itself openblas?threads=1"),
            std::string::npos);
  EXPECT_NE(why(ob, "openblas?threads=2 (OpenBLAS core Haswell)", obd, obm).find("threads"), std::string::npos);
  auto ob2 = obd;
  ob2["corename"] = "Prescott";
  EXPECT_NE(why(ob, "openblas?threads=1 (OpenBLAS core Prescott)", ob2, obm).find("pins core Haswell"), std::string::npos);
  ob2 = obd, ob2["threads_effective"] = "4";
  EXPECT_NE(why(ob, obs, ob2, obm).find("threads_effective"), std::string::npos);
  ob2 = obd, ob2["coretype_env"] = "";
  EXPECT_NE(why(ob, obs, ob2, obm).find("coretype_env"), std::string::npos);
  ob2 = obd, ob2["config"] = "anything at all";
  EXPECT_NE(why(ob, obs, ob2, obm).find("details.config"), std::string::npos);
  EXPECT_NE(why(ob, obs, ob2).find("details.config"), std::string::npos);
  ob2 = obd, ob2["config"] = "OpenBLAS 0.3.26 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64";  // another build
  EXPECT_NE(why(ob, obs, ob2, obm).find("the machine's OpenBLAS build"), std::string::npos);
  ob2 = obd, ob2["note"] = "x";
  EXPECT_NE(why(ob, obs, ob2, obm).find("details.note is no setting"), std::string::npos);
  ob2 = obd, ob2.erase("threads_effective");
  EXPECT_NE(why(ob, obs, ob2, obm).find("details.threads_effective is missing"), std::string::npos);
  const std::map<std::string, std::string> cooper = {
      {"corename", "Cooperlake"}, {"coretype_env", "CooperLake"}, {"threads", "1"}, {"threads_effective", "1"},
      {"config", "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64"}};
  EXPECT_EQ(why("openblas?core=CooperLake&threads=1", "openblas?threads=1 (OpenBLAS core Cooperlake)", cooper, obm), "");
  auto auto_core = obd;
  auto_core["coretype_env"] = "";
  EXPECT_EQ(why("openblas?threads=1", obs, auto_core, obm), "");  // auto: the core this CPU's OpenBLAS chose
  auto_core["corename"] = "Has well;", auto_core["config"] = "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Has well; MAX_THREADS=64";
  EXPECT_NE(why("openblas?threads=1", "openblas?threads=1 (OpenBLAS core Has well;)", auto_core, obm).find("is no OpenBLAS core name"),
            std::string::npos);
  // onednn: named by layout and threads; the machine's oneDNN and the instruction set the details name, at most the
  // cap and one the CPU has; an implementation name naming no higher set; the cap and layout the target's.
  const std::string dn = "onednn?isa=AVX2&threads=1";
  const nlohmann::json dm = {{"libraries", {{"onednn", "2.6.3 (git hash N/A) omp"}}},
                             {"cpu_features", {"sse4.1", "avx", "avx2", "fma", "avx512f", "avx512bw"}}};
  const std::map<std::string, std::string> dnd = {{"isa_env", "AVX2"}, {"effective_isa", "avx2"}, {"impl", "gemm:jit"},
                                                  {"threads", "1"}, {"conv_layout", "plain"},
                                                  {"omp_set_num_threads", "called"}};
  const std::string dns = "onednn?threads=1 (oneDNN 2.6.3 (git hash N/A) omp, isa avx2)";
  EXPECT_EQ(why(dn, dns, dnd, dm), "");
  EXPECT_NE(why(dn, "onednn?threads=1 (oneDNN 3.0 omp, isa avx2)", dnd, dm).find("the machine's oneDNN"), std::string::npos);
  EXPECT_NE(why(dn, "onednn?threads=1 (oneDNN 2.6.3 (git hash N/A) omp, isa avx512_core)", dnd, dm).find("instruction set"),
            std::string::npos);
  auto dn2 = dnd;
  dn2["isa_env"] = "ALL";
  EXPECT_NE(why(dn, dns, dn2, dm).find("isa_env"), std::string::npos);
  dn2 = dnd, dn2["conv_layout"] = "blocked";
  EXPECT_NE(why(dn, dns, dn2, dm).find("conv_layout"), std::string::npos);
  // The name drops or adds no setting.
  const std::string blocked = "onednn?isa=AVX2&threads=1&layout=blocked";
  dn2 = dnd, dn2["conv_layout"] = "blocked";
  EXPECT_EQ(why(blocked, "onednn?layout=blocked&threads=1 (oneDNN 2.6.3 (git hash N/A) omp, isa avx2)", dn2, dm), "");
  EXPECT_NE(why(blocked, dns, dn2, dm).find("names itself onednn?layout=blocked&threads=1"), std::string::npos);
  EXPECT_NE(why(dn, "onednn?isa=AVX2&threads=1 (oneDNN 2.6.3 (git hash N/A) omp, isa avx2)", dnd, dm).find("names itself"),
            std::string::npos);
  // The dispatched set and the remark changed together: above the cap, no word of oneDNN's, beyond the CPU.
  auto lie = [&](const std::string& target, const std::string& isa, const std::string& env) {
    auto d = dnd;
    d["effective_isa"] = isa, d["isa_env"] = env;
    return why(target, "onednn?threads=1 (oneDNN 2.6.3 (git hash N/A) omp, isa " + isa + ")", d, dm);
  };
  EXPECT_NE(lie(dn, "avx512_core", "AVX2").find("avx512_core is above the cap AVX2"), std::string::npos);
  EXPECT_NE(lie(dn, "avx3", "AVX2").find("none oneDNN dispatches to"), std::string::npos);
  EXPECT_NE(lie("onednn?threads=1", "avx512_core_vnni", "ALL").find("needs avx512vnni, which the machine's CPU lacks"), std::string::npos);
  EXPECT_NE(lie("onednn?isa=AVX512_CORE&threads=1", "avx512_mic", "AVX512_CORE").find("above the cap"), std::string::npos);
  EXPECT_EQ(lie("onednn?isa=AVX512_CORE&threads=1", "avx512_core", "AVX512_CORE"), "");
  EXPECT_EQ(lie("onednn?isa=AVX2_VNNI&threads=1", "avx2", "AVX2_VNNI"), "");  // a CPU without AVX-VNNI
  // The implementation: a name oneDNN gives, no instruction set above the one dispatched to.
  for (const char* ok : {"gemm:jit", "x64:gemm:jit", "jit:avx2", "ref:any", "jit_uni_reduction:sse41"}) {
    dn2 = dnd, dn2["impl"] = ok;
    EXPECT_EQ(why(dn, dns, dn2, dm), "") << ok;
  }
  for (const char* bad : {"", "hello world", "brg:avx512_core", "jit:avx512_core_amx_int8", "JIT:AVX2"}) {
    dn2 = dnd, dn2["impl"] = bad;
    EXPECT_NE(why(dn, dns, dn2, dm).find("details.impl"), std::string::npos) << bad;
  }
  dn2 = dnd, dn2["extra"] = "1";
  EXPECT_NE(why(dn, dns, dn2, dm).find("details.extra is no setting"), std::string::npos);
  dn2 = dnd, dn2.erase("impl");
  EXPECT_NE(why(dn, dns, dn2, dm).find("details.impl is missing"), std::string::npos);
  // A cell that did not run (no details) is described as the backend made: its remark says the same.
  auto not_run = [&](const std::string& target, const std::string& describe, const nlohmann::json& m) {
    Spec t;
    EXPECT_TRUE(parse_target(target, &t).is_ok()) << target;
    return backend_claims_contradiction(t, describe, {}, false, "describe", m);
  };
  EXPECT_EQ(not_run("openblas?core=CooperLake&threads=1", "openblas?threads=1 (OpenBLAS core Cooperlake)", obm), "");
  EXPECT_NE(not_run(ob, "openblas?threads=1 (OpenBLAS core Zen)", obm).find("pins core Haswell"), std::string::npos);
  EXPECT_EQ(not_run(dn, dns, dm), "");
  EXPECT_NE(not_run(dn, "onednn?threads=1 (oneDNN 2.6.3 (git hash N/A) omp, isa avx512_core)", dm).find("above the cap"),
            std::string::npos);
  // cpu: a setting its backend does not report.
  auto extra = d;
  extra["cores"] = "all";
  EXPECT_NE(why(cpu.str(), made.describe, extra).find("details.cores is no setting"), std::string::npos);
}

// The default training targets are the registry entries' own spellings, and each one parses as a target.
TEST(Registry, DefaultTrainingTargetsParse) {
  for (const char* use : {"qualify", "sony2021", "prednet"}) {
    ASSERT_FALSE(default_training_targets(use).empty()) << use;
    for (const std::string& text : default_training_targets(use)) {
      Spec s;
      EXPECT_TRUE(parse_target(text, &s).is_ok()) << use << ": " << text;
    }
  }
}

// One conversion of a conv2d spec to its shape, with the workload table's defaults.
TEST(Registry, ConvShapeOfAParsedWorkload) {
  const ConvShape s = conv_shape_of(workload("conv2d?n=2&c=8&h=15&w=15&k=8&stride=2&pass=bwd_filter"));
  EXPECT_EQ(s.n, 2); EXPECT_EQ(s.c, 8); EXPECT_EQ(s.h, 15); EXPECT_EQ(s.w, 15); EXPECT_EQ(s.k, 8);
  EXPECT_EQ(s.r, 3); EXPECT_EQ(s.s, 3); EXPECT_EQ(s.stride, 2); EXPECT_EQ(s.pad, 1);
  const ConvShape d = conv_shape_of(Spec{"conv2d", -1, {}});  // unparsed: the same defaults
  EXPECT_EQ(d.n, 4); EXPECT_EQ(d.c, 16); EXPECT_EQ(d.r, 3); EXPECT_EQ(d.pad, 1);
}
