#include <gtest/gtest.h>

#include "contract/cells.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;

namespace {
const std::string A(32, 'a'), B(32, 'b'), C(32, 'c');

Observation ok(const std::string& w, const std::string& t, std::vector<std::string> fps) {
  return test::ran(w, t, std::move(fps));
}
Observation with_status(ObsStatus s) {
  Observation o;
  o.workload = "w";
  o.target = "t";
  o.status = s;
  return o;
}
}  // namespace

TEST(Verdict, CellFromFingerprints) {
  EXPECT_EQ(cell_verdict(ok("w", "t", {A, A, A, A})), CellVerdict::kDeterministic);
  EXPECT_EQ(cell_verdict(ok("w", "t", {A})), CellVerdict::kDeterministic);
  EXPECT_EQ(cell_verdict(ok("w", "t", {A, A, B, A})), CellVerdict::kNondeterministic);
  EXPECT_EQ(cell_verdict(ok("w", "t", {B, A})), CellVerdict::kNondeterministic);
  // The verdict is recomputed from the fingerprints, not taken from a stored `distinct`.
  Observation lying = ok("w", "t", {A, B});
  lying.distinct = 1;
  EXPECT_EQ(cell_verdict(lying), CellVerdict::kNondeterministic);
  // An "ok" observation without a single fingerprint proves nothing.
  EXPECT_EQ(cell_verdict(ok("w", "t", {})), CellVerdict::kError);
  EXPECT_EQ(cell_verdict(with_status(ObsStatus::kCrashed)), CellVerdict::kCrashed);
  EXPECT_EQ(cell_verdict(with_status(ObsStatus::kTimeout)), CellVerdict::kTimeout);
  EXPECT_EQ(cell_verdict(with_status(ObsStatus::kSkipped)), CellVerdict::kSkipped);
  EXPECT_EQ(cell_verdict(with_status(ObsStatus::kError)), CellVerdict::kError);
}

TEST(Verdict, IdentityGroupsAcrossTargets) {
  std::vector<Observation> obs = {ok("w1", "t1", {A, A}), ok("w1", "t2", {B, B}), ok("w1", "t3", {A, A}),
                                  ok("w1", "t4", {A, B}), ok("w1", "t5", {B, A, B}), ok("w2", "t1", {C})};
  obs.push_back(with_status(ObsStatus::kCrashed));  // not grouped
  auto g = identity_groups(obs);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].workload, "w1");
  ASSERT_EQ(g[0].groups.size(), 3u);
  EXPECT_EQ(g[0].groups[0].targets, (std::vector<std::string>{"t1", "t3"}));
  EXPECT_EQ(g[0].groups[1].targets, (std::vector<std::string>{"t4", "t5"}));  // same set {A, B}
  EXPECT_EQ(g[0].groups[1].fingerprints, (std::vector<std::string>{A, B}));
  EXPECT_EQ(g[0].groups[2].targets, (std::vector<std::string>{"t2"}));
  EXPECT_EQ(g[1].groups.size(), 1u);
}

TEST(Verdict, KernelSequencesByFingerprint) {
  Observation o = ok("w", "cuda:0?order=atomic", {A, B, A, A});
  auto k = [](const char* n) {
    KernelRecord r;
    r.name = n;
    return r;
  };
  using KL = std::vector<KernelRecord>;
  o.kernels = {KL{k("reduce"), k("finish")}, KL{k("reduce"), k("finish_b")}, KL{k("reduce"), k("finish")}, KL{k("other")}};
  auto g = kernels_by_fingerprint(o);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].fingerprint, A);
  EXPECT_EQ(g[0].runs, 3);
  EXPECT_EQ(g[0].kernel_names, (std::vector<std::string>{"reduce", "finish"}));
  EXPECT_TRUE(g[0].sequence_varies);
  EXPECT_EQ(g[1].runs, 1);
  EXPECT_FALSE(g[1].sequence_varies);
}

TEST(Verdict, Summary) {
  std::vector<Observation> obs = {ok("w", "a", {A, A}), ok("w", "b", {A, B}), with_status(ObsStatus::kCrashed),
                                  with_status(ObsStatus::kSkipped), with_status(ObsStatus::kTimeout)};
  obs[0].batch = BatchInvariance{8, 0};
  obs[1].batch = BatchInvariance{8, 3};
  auto s = summarize(obs);
  EXPECT_EQ(s.cells, 5);
  EXPECT_EQ(s.deterministic, 1);
  EXPECT_EQ(s.nondeterministic, 1);
  EXPECT_EQ(s.crashed, 1);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.timeout, 1);
  EXPECT_EQ(s.batch_checked, 2);
  EXPECT_EQ(s.batch_variant, 1);
}

TEST(Verdict, ObservationJsonRoundTrip) {
  Observation o = ok("w", "t", {A, B});
  OracleDistance d;
  d.max_ulp = kUlpInfinite;
  d.max_rel_err = INFINITY;
  d.mismatched = 3;
  o.oracle = d;
  o.seconds = {0.5, 0.25};
  o.details["isa"] = "avx2";
  KernelRecord kr;
  kr.name = "k";
  kr.grid[0] = 4;
  o.kernels = {std::vector<KernelRecord>{kr}, std::nullopt};  // repeat 2's tracing failed
  o.batch = BatchInvariance{4, 1};
  Observation back;
  std::string err;
  ASSERT_TRUE(succeeded(from_json(to_json(o), &back), &err)) << err;
  EXPECT_EQ(back.fingerprints, o.fingerprints);
  EXPECT_EQ(back.oracle->max_ulp, kUlpInfinite);
  EXPECT_TRUE(std::isinf(back.oracle->max_rel_err));
  ASSERT_EQ(back.kernels.size(), 2u);
  EXPECT_EQ((*back.kernels[0])[0].grid[0], 4u);
  EXPECT_FALSE(back.kernels[1].has_value()) << "a failed trace stays paired with its repeat";
  EXPECT_EQ(back.batch->rows_differing, 1);
  EXPECT_EQ(back.details["isa"], "avx2");
  auto j = to_json(o);
  j["status"] = "exploded";
  EXPECT_FALSE(succeeded(from_json(j, &back), &err));
  j = to_json(o);
  j.erase("fingerprints");
  EXPECT_FALSE(succeeded(from_json(j, &back), &err));
}
