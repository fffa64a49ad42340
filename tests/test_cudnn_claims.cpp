// cuDNN's determinism, claimed twice: cudnnFind*AlgorithmEx's `determinism` field at run time (GPU), and
// the /* non-deterministic */ marks of cudnn_ops.h, which cudnn_conv_algorithms() (kernels/cuda/cuda.hpp)
// copies. The copy is checked here against the header this build compiled with; the verdict rules for
// two claims that disagree are checked on synthetic observations.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "gates/verdict.hpp"
#include "kernels/cuda/cuda.hpp"
#include "probes/spec.hpp"

namespace detaudit {
namespace {

TEST(CudnnClaims, TheHeaderListMatchesTheMarksOfCudnnOpsH) {
#if !defined(DETAUDIT_CUDNN_INCLUDE_DIR)
  GTEST_SKIP() << "built without cuDNN (no cudnn_ops.h to read)";
#else
  const std::string path = std::string(DETAUDIT_CUDNN_INCLUDE_DIR) + "/cudnn_ops.h";
  std::ifstream f(path);
  ASSERT_TRUE(f) << path;
  // Each legacy algorithm line: "    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0, /* non-deterministic */".
  const std::regex line(R"(^\s*(CUDNN_CONVOLUTION_(FWD|BWD_DATA|BWD_FILTER)_ALGO_\w+)\s*=\s*(\d+)\s*,?\s*(.*)$)");
  std::map<std::string, bool> marked;  // name -> marked non-deterministic
  std::string text;
  int lines = 0;
  while (std::getline(f, text)) {
    std::smatch m;
    if (!std::regex_match(text, m, line) || m[1].str().find("_COUNT") != std::string::npos) continue;
    marked[m[1].str()] = m[4].str().find("non-deterministic") != std::string::npos;
    ++lines;
  }
  ASSERT_GE(lines, 21) << "the legacy algorithm enums were not found in " << path;
  int nondet = 0;
  for (const char* pass : {"fwd", "bwd_data", "bwd_filter"})
    for (const CudnnAlgo& a : cudnn_conv_algorithms(ConvShape{}, pass)) {
      ASSERT_TRUE(marked.count(a.name)) << a.name << " is not in " << path;
      EXPECT_EQ(a.header_nondeterministic, marked[a.name]) << a.name;
      nondet += a.header_nondeterministic;
    }
  EXPECT_EQ(nondet, 3) << "cuDNN 9 marks BWD_FILTER_ALGO_0, BWD_FILTER_ALGO_3 and BWD_DATA_ALGO_0";
#endif
}

Observation cudnn_cell(int distinct, const std::string& find, const std::string& doc) {
  Spec w, t;
  std::string err;
  EXPECT_TRUE(parse_workload("conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter", &w, &err)) << err;
  EXPECT_TRUE(parse_target("cudnn:0?bwd_filter_algo=1", &t, &err)) << err;
  Observation o;
  o.workload = w.str();
  o.target = t.str();
  o.repeats = 10;
  for (int i = 0; i < 10; ++i) o.fingerprints.push_back(std::string(32, "abc"[i % distinct]));
  o.distinct = distinct;
  o.oracle = OracleDistance{};
  o.oracle->err_ratio = 0.1;
  o.oracle->bound_k = 1024;
  o.details = {{"claimed_deterministic", find}, {"algo_name", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1"}};
  if (!doc.empty()) o.details["documented_deterministic"] = doc;
  return o;
}

Observation judged(Observation o) {
  Results r;
  r.machine = {{"gpus", {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}}}}};
  r.observations = {std::move(o)};
  judge(&r);
  return r.observations[0];
}

TEST(CudnnClaims, TwoClaimsThatAgreeAndHoldPass) {
  Observation o = judged(cudnn_cell(1, "yes", "yes"));
  EXPECT_EQ(o.verdict, "PASS") << o.verdict_reason;
}

TEST(CudnnClaims, FindAgainstTheHeaderIsAWarningWhateverWasObserved) {
  Observation o = judged(cudnn_cell(1, "no", "yes"));
  EXPECT_EQ(o.verdict, "WARN") << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("claims disagree: cuDNN's Find reports CUDNN_NON_DETERMINISTIC for "
                                  "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, but cudnn_ops.h does not mark it "
                                  "non-deterministic; observed 1 distinct output in 10 runs"),
            std::string::npos)
      << o.verdict_reason;
  // Variation seen: Find's claim holds (EXPECTED), the header's does not (still the WARN).
  o = judged(cudnn_cell(2, "no", "yes"));
  EXPECT_EQ(o.verdict, "WARN") << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("as promised"), std::string::npos) << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("observed 2 distinct outputs in 10 runs"), std::string::npos) << o.verdict_reason;
}

TEST(CudnnClaims, FindClaimingDeterminismThatTheRunsBreakFails) {
  Observation o = judged(cudnn_cell(2, "yes", "no"));
  EXPECT_EQ(o.verdict, "FAIL") << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("cuDNN claims CUDNN_DETERMINISTIC"), std::string::npos) << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("cudnn_ops.h marks it /* non-deterministic */"), std::string::npos) << o.verdict_reason;
}

TEST(CudnnClaims, ResultsWithoutTheSecondClaimAreJudgedOnFindAlone) {
  Observation o = judged(cudnn_cell(1, "yes", ""));
  EXPECT_EQ(o.verdict, "PASS") << o.verdict_reason;
}

}  // namespace
}  // namespace detaudit
