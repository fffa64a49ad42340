// cuDNN's determinism, claimed twice: cudnnFind*AlgorithmEx's `determinism` field at run time (GPU), and
// the /* non-deterministic */ and /* not implemented */ marks of cudnn_ops.h, which cudnn_conv_algorithms()
// (kernels/cuda/cuda.hpp) copies. The copy is checked here against the header this build compiled with; the verdict rules for
// two claims that disagree are checked on synthetic observations.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "tests/fixtures.hpp"
#include "gates/verdict.hpp"
#include "kernels/cuda/cuda.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "report/document.hpp"
#include "report/train_report.hpp"

namespace detaudit {
namespace {

TEST(CudnnClaims, TheHeaderListMatchesTheMarksOfCudnnOpsH) {
#if !defined(DETAUDIT_CUDNN_INCLUDE_DIR)
  GTEST_SKIP() << "built without cuDNN (no cudnn_ops.h to read)";
#else
  const std::string path = std::string(DETAUDIT_CUDNN_INCLUDE_DIR) + "/cudnn_ops.h";
  std::ifstream f(path);
  ASSERT_TRUE(f) << path;
  // Each legacy algorithm line: "    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0, /* non-deterministic */", or
  // "... = 4, /* not implemented */", or no comment.
  const std::regex line(R"(^\s*(CUDNN_CONVOLUTION_(FWD|BWD_DATA|BWD_FILTER)_ALGO_\w+)\s*=\s*(\d+)\s*,?\s*(.*)$)");
  std::map<std::string, CudnnHeaderMark> marked;  // name -> the header's mark
  std::map<std::string, int> value;               // name -> its enum value
  std::string text;
  int lines = 0;
  while (std::getline(f, text)) {
    std::smatch m;
    if (!std::regex_match(text, m, line) || m[1].str().find("_COUNT") != std::string::npos) continue;
    const std::string comment = m[4].str();
    const bool nondet = comment.find("non-deterministic") != std::string::npos,
               not_impl = comment.find("not implemented") != std::string::npos;
    EXPECT_FALSE(nondet && not_impl) << m[1].str() << ": both marks";
    EXPECT_TRUE(comment.empty() || nondet || not_impl) << m[1].str() << ": a mark this list does not model: " << comment;
    marked[m[1].str()] = nondet     ? CudnnHeaderMark::kNondeterministic
                         : not_impl ? CudnnHeaderMark::kNotImplemented
                                    : CudnnHeaderMark::kUnmarked;
    value[m[1].str()] = std::stoi(m[3].str());
    ++lines;
  }
  ASSERT_GE(lines, 21) << "the legacy algorithm enums were not found in " << path;
  int nondet = 0, not_impl = 0;
  for (const char* pass : {"fwd", "bwd_data", "bwd_filter"})
    for (const CudnnAlgo& a : cudnn_conv_algorithms(ConvShape{}, pass)) {
      ASSERT_TRUE(marked.count(a.name)) << a.name << " is not in " << path;
      EXPECT_EQ(int(a.header), int(marked[a.name])) << a.name << " (0 unmarked, 1 non-deterministic, 2 not implemented)";
      EXPECT_EQ(a.index, value[a.name]) << a.name;
      nondet += a.header == CudnnHeaderMark::kNondeterministic;
      not_impl += a.header == CudnnHeaderMark::kNotImplemented;
    }
  EXPECT_EQ(nondet, 3) << "cuDNN 9 marks BWD_FILTER_ALGO_0, BWD_FILTER_ALGO_3 and BWD_DATA_ALGO_0";
  EXPECT_EQ(not_impl, 1) << "cuDNN 9 marks BWD_FILTER_ALGO_WINOGRAD /* not implemented */";
  EXPECT_EQ(marked["CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD"], CudnnHeaderMark::kNotImplemented);
#endif
}

// What the backend records as the header's claim (the `documented_deterministic` detail): an algorithm
// marked /* not implemented */ is not called deterministic.
TEST(CudnnClaims, NotImplementedIsNoDeterminismClaim) {
  EXPECT_STREQ(cudnn_documented_deterministic(CudnnHeaderMark::kUnmarked), "yes");
  EXPECT_STREQ(cudnn_documented_deterministic(CudnnHeaderMark::kNondeterministic), "no");
  EXPECT_STREQ(cudnn_documented_deterministic(CudnnHeaderMark::kNotImplemented), "not implemented");
  const auto bf = cudnn_conv_algorithms(ConvShape{}, "bwd_filter");
  ASSERT_EQ(bf.size(), 7u);
  EXPECT_EQ(bf[4].name, "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD");
  EXPECT_STREQ(cudnn_documented_deterministic(bf[4].header), "not implemented");
  // The promise of a pinned algorithm that did not run (no details) comes from the header alone.
  Spec t, w;
  std::string err;
  ASSERT_TRUE(succeeded(parse_target("cudnn:0?bwd_filter_algo=4", &t), &err)) << err;
  ASSERT_TRUE(succeeded(parse_workload("conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter", &w), &err)) << err;
  const nlohmann::json machine = {{"gpus", {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}}}}};
  Promise p = promise_for(t, w, machine, {});
  EXPECT_EQ(p.run_to_run, Promise::RunToRun::kNone) << p.run_to_run_source;
  EXPECT_NE(p.run_to_run_source.find("not implemented"), std::string::npos) << p.run_to_run_source;
  ASSERT_TRUE(succeeded(parse_target("cudnn:0?bwd_filter_algo=5", &t), &err)) << err;
  EXPECT_EQ(promise_for(t, w, machine, {}).run_to_run, Promise::RunToRun::kDeterministic) << "unmarked";
}

Observation cudnn_cell(int distinct, const std::string& find, const std::string& doc) {
  Spec w, t;
  std::string err;
  EXPECT_TRUE(succeeded(parse_workload("conv2d?n=4&c=16&h=16&w=16&k=32&pass=bwd_filter", &w), &err)) << err;
  EXPECT_TRUE(succeeded(parse_target("cudnn:0?bwd_filter_algo=1", &t), &err)) << err;
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
  EXPECT_EQ(verdict_text(o.verdict), "PASS") << o.verdict_reason;
}

TEST(CudnnClaims, FindAgainstTheHeaderIsAWarningWhateverWasObserved) {
  Observation o = judged(cudnn_cell(1, "no", "yes"));
  EXPECT_EQ(verdict_text(o.verdict), "WARN") << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("claims disagree: cuDNN's Find reports CUDNN_NON_DETERMINISTIC for "
                                  "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, but cudnn_ops.h does not mark it "
                                  "non-deterministic; observed 1 distinct output in 10 runs"),
            std::string::npos)
      << o.verdict_reason;
  // Variation seen: Find's claim holds (EXPECTED), the header's does not (still the WARN).
  o = judged(cudnn_cell(2, "no", "yes"));
  EXPECT_EQ(verdict_text(o.verdict), "WARN") << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("as promised"), std::string::npos) << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("observed 2 distinct outputs in 10 runs"), std::string::npos) << o.verdict_reason;
}

TEST(CudnnClaims, FindClaimingDeterminismThatTheRunsBreakFails) {
  Observation o = judged(cudnn_cell(2, "yes", "no"));
  EXPECT_EQ(verdict_text(o.verdict), "FAIL") << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("cuDNN claims CUDNN_DETERMINISTIC"), std::string::npos) << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("cudnn_ops.h marks it /* non-deterministic */"), std::string::npos) << o.verdict_reason;
}

// Find ran an algorithm the header marks /* not implemented */: the header claims nothing about its
// determinism, and the two sources disagree about what exists (a WARN); the report does not call it
// deterministic.
TEST(CudnnClaims, AnAlgorithmTheHeaderCallsNotImplementedIsNeitherClaimedDeterministicNorAgreed) {
  Observation cell = cudnn_cell(1, "yes", "not implemented");
  Spec t;
  std::string err;
  ASSERT_TRUE(succeeded(parse_target("cudnn:0?bwd_filter_algo=4", &t), &err)) << err;
  cell.target = t.str();
  cell.details["algo_name"] = "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD";
  Observation o = judged(cell);
  EXPECT_EQ(verdict_text(o.verdict), "WARN") << o.verdict_reason;
  EXPECT_NE(o.verdict_reason.find("cuDNN's Find ran CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD and reports "
                                  "CUDNN_DETERMINISTIC for it, but cudnn_ops.h marks it /* not implemented */"),
            std::string::npos)
      << o.verdict_reason;

  Results r;
  r.machine = {{"gpus", {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}}}}};
  r.observations = {o};
  const std::string md = render_markdown(build_report(r));
  const size_t at = md.find("## Claimed vs observed determinism");
  ASSERT_NE(at, std::string::npos) << md;
  const size_t row = md.find("bwd_filter_algo=4", at);  // the target's cell (the algorithm's is escaped)
  ASSERT_NE(row, std::string::npos) << md.substr(at);
  const std::string line = md.substr(row, md.find('\n', row) - row);
  // Columns after the algorithm: Find's claim, the header's, observed, verdict.
  EXPECT_NE(line.find("| deterministic | not implemented (no claim) |"), std::string::npos) << line;
}

TEST(CudnnClaims, ResultsWithoutTheSecondClaimAreJudgedOnFindAlone) {
  Observation o = judged(cudnn_cell(1, "yes", ""));
  EXPECT_EQ(verdict_text(o.verdict), "PASS") << o.verdict_reason;
}

}  // namespace
}  // namespace detaudit
