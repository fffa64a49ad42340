// The reports grow linearly with the number of observations, whatever the names: 2,000 observations
// of 2,000 targets and 2,000 workloads must not draw a 4,000,000-cell grid.
#include <gtest/gtest.h>

#include <string>

#include "report/train_report.hpp"

using namespace detaudit;

namespace {

Observation observation(const std::string& w, const std::string& t, bool deterministic) {
  Observation o;
  o.workload = w;
  o.target = t;
  o.repeats = 3;
  o.fingerprints = {std::string(32, 'a'), std::string(32, 'a'), std::string(32, deterministic ? 'a' : 'b')};
  o.distinct = deterministic ? 1 : 2;
  o.oracle = OracleDistance{2, 1e-7, 5};
  o.seconds = {0.001, 0.002, 0.0015};
  o.describe = "cpu blocked";
  return o;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(ReportSize, LinearInObservationsMatrixOnlyWhenDense) {
  constexpr size_t kN = 2000, kBytesPerObservation = 4096;
  Results sparse;
  sparse.plan = nlohmann::json::object();
  for (size_t i = 0; i < kN; ++i)
    sparse.observations.push_back(observation("reduce?op=sum&n=" + std::to_string(1000 + i),
                                              "cpu?order=atomic&threads=" + std::to_string(i + 1), false));
  Document d = build_report(sparse);
  std::string md = render_markdown(d), html = render_html(d);
  EXPECT_LT(md.size(), kBytesPerObservation * kN);
  EXPECT_LT(html.size(), kBytesPerObservation * kN);
  EXPECT_EQ(md.find("| target | w1 |"), std::string::npos) << "no grid for a sparse matrix";
  EXPECT_NE(md.find("| workload | target | result |"), std::string::npos) << "one row per observation instead";
  EXPECT_NE(md.find("| `reduce?op=sum&n=2999` | `cpu?order=atomic&threads=2000` | **2/3** · 2 ulp |"), std::string::npos);
  EXPECT_NE(md.find("- … and 1900 more (see the matrix)\n"), std::string::npos) << "the verdict lists the first 100";
  EXPECT_EQ(count(md, "- nondeterministic: "), 100u);

  // A full grid (every target ran every workload) and a small sparse one are drawn as a matrix.
  Results dense;
  dense.plan = nlohmann::json::object();
  for (size_t t = 0; t < 40; ++t)
    for (size_t w = 0; w < 50; ++w)
      dense.observations.push_back(observation("w" + std::to_string(w), "t" + std::to_string(t), (t + w) % 7 != 0));
  std::string dmd = render_markdown(build_report(dense));
  EXPECT_LT(dmd.size(), kBytesPerObservation * dense.observations.size());
  EXPECT_NE(dmd.find("| target | w1 | w2 |"), std::string::npos);
  EXPECT_NE(dmd.find("- w50: `w49`\n"), std::string::npos);
  Results small;
  small.plan = nlohmann::json::object();
  small.observations = {observation("a", "x", true), observation("b", "y", false), observation("c", "z", true)};
  std::string smd = render_markdown(build_report(small));
  EXPECT_NE(smd.find("| target | w1 | w2 | w3 |"), std::string::npos);
  EXPECT_NE(smd.find("| `x` | 1/3 · 2 ulp | — | — |"), std::string::npos) << smd;
}
