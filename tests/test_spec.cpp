#include <gtest/gtest.h>

#include "tests/fixtures.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"

using namespace detaudit;

TEST(Spec, TargetCanonicalFormFillsDefaultsInTableOrder) {
  Spec s;
  std::string err;
  ASSERT_TRUE(succeeded(parse_target("cpu?threads=2&order=atomic", &s), &err)) << err;
  EXPECT_EQ(s.str(), "cpu?order=atomic&threads=2&isa=auto");
  ASSERT_TRUE(succeeded(parse_target("cpu-ref", &s), &err)) << err;
  EXPECT_EQ(s.str(), "cpu-ref");
  ASSERT_TRUE(succeeded(parse_target("openblas?core=SkylakeX", &s), &err)) << err;
  EXPECT_EQ(s.str(), "openblas?core=SkylakeX&threads=1");
  ASSERT_TRUE(succeeded(parse_target("cuda?order=atomic", &s), &err)) << err;
  EXPECT_EQ(s.str(), "cuda:0?order=atomic");
  ASSERT_TRUE(succeeded(parse_target("cublas:1?math=tf32&streams=4&workspace=shared", &s), &err)) << err;
  EXPECT_EQ(s.device, 1);
  EXPECT_EQ(s.get("atomics"), "not_allowed");
  ASSERT_TRUE(succeeded(parse_target("cudnn:0?bwd_filter_algo=all", &s), &err)) << err;
  EXPECT_EQ(s.get("bwd_filter_algo"), "all");
}

TEST(Spec, WorkloadCanonicalForm) {
  Spec s;
  std::string err;
  ASSERT_TRUE(succeeded(parse_workload("matmul?m=512&n=512&k=515", &s), &err)) << err;
  EXPECT_EQ(s.str(), "matmul?m=512&n=512&k=515&ta=n&tb=n&dtype=f32&dist=uniform&seed=1");
  ASSERT_TRUE(succeeded(parse_workload("conv2d?n=8&c=32&h=28&w=28&k=64&r=3&pass=bwd_filter", &s), &err)) << err;
  EXPECT_EQ(s.get("pass"), "bwd_filter");
  EXPECT_EQ(s.get_int("stride", 0), 1);
  ASSERT_TRUE(succeeded(parse_workload("reduce?op=sum&n=10000000", &s), &err)) << err;
  EXPECT_EQ(s.get_int("n", 0), 10000000);
}

struct BadCase {
  const char* text;
  bool target;
  const char* must_name;  // the error message must name the bad part
};

class SpecRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(SpecRejects, WithAMessageNamingTheBadPart) {
  const BadCase& c = GetParam();
  Spec s;
  std::string err;
  bool ok = c.target ? succeeded(parse_target(c.text, &s), &err) : succeeded(parse_workload(c.text, &s), &err);
  EXPECT_FALSE(ok) << c.text;
  EXPECT_NE(err.find(c.must_name), std::string::npos) << "error '" << err << "' does not name '" << c.must_name << "'";
  EXPECT_EQ(err.find('\n'), std::string::npos) << "one line only";
}

INSTANTIATE_TEST_SUITE_P(
    Bad, SpecRejects,
    ::testing::Values(BadCase{"gpu-magic", true, "gpu-magic"}, BadCase{"cpu?order=random", true, "random"},
                      BadCase{"cpu?threads=two", true, "two"}, BadCase{"cpu?threads=0", true, "threads"},
                      BadCase{"cpu?colour=blue", true, "colour"}, BadCase{"cpu?order=atomic&order=blocked", true, "order"},
                      BadCase{"cpu?order", true, "order"}, BadCase{"cpu?", true, "?"}, BadCase{"cpu:0", true, "device"},
                      BadCase{"cuda:x", true, "x"}, BadCase{"openblas?core=Pentium4", true, "Pentium4"},
                      BadCase{"onednn?isa=AVX9", true, "AVX9"}, BadCase{"cublas:0?math=fast", true, "fast"},
                      BadCase{"cublas:0?streams=99", true, "streams"}, BadCase{"?x=1", true, "name"},
                      BadCase{"matmul?m=-3", false, "-3"}, BadCase{"matmul?m=1e3", false, "1e3"},
                      BadCase{"matmul?m=99999999999999999999", false, "m"}, BadCase{"matmul?q=1", false, "q"},
                      BadCase{"conv2d?pass=sideways", false, "sideways"}, BadCase{"conv2d?h=2&w=2&r=7&pad=0", false, "filter"},
                      BadCase{"reduce?op=product", false, "product"}, BadCase{"fft?n=8", false, "fft"},
                      BadCase{"reduce?op=softmax&n=1001&cols=10", false, "multiple"},
                      BadCase{"matmul?m=4&&n=4", false, "malformed"}, BadCase{"matmul?m=4&n=", false, "n="}));

TEST(Spec, SplitList) {
  auto v = split_list("cpu-ref,cpu?order=atomic&threads=2,openblas");
  ASSERT_TRUE(v) << v.message();
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[1], "cpu?order=atomic&threads=2");
  EXPECT_TRUE(split_list("")->empty());
  // An empty item is a mistake, not something to skip: `--targets 'cpu,'` ran one target before.
  for (const char* bad : {"cpu,", ",cpu", "cpu,,openblas", ","}) {
    auto b = split_list(bad);
    EXPECT_FALSE(b) << bad;
    EXPECT_EQ(b.status().code(), Status::Code::kInvalid) << bad;
    EXPECT_NE(b.message().find("empty item"), std::string::npos) << b.message();
  }
}

TEST(Spec, TestingTargetIsHiddenFromHelp) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_target("testing?fault=segv", &s), &err)) << err;
  EXPECT_EQ(target_help().find("testing"), std::string::npos);
  EXPECT_NE(target_help().find("openblas"), std::string::npos);
}

// Equal targets compare equal: a number has one spelling, so `threads=01` and `threads=1` are one
// target in a plan, and `seed=-0` is `seed=0`.
TEST(Spec, NumbersHaveOneCanonicalSpelling) {
  auto canon = [](const std::string& text, bool target) {
    Spec s;
    std::string err;
    EXPECT_TRUE(target ? succeeded(parse_target(text, &s), &err) : succeeded(parse_workload(text, &s), &err)) << err;
    return s.str();
  };
  EXPECT_EQ(canon("cpu?threads=01", true), canon("cpu?threads=1", true));
  EXPECT_EQ(canon("cpu?threads=0002&order=atomic", true), "cpu?order=atomic&threads=2&isa=auto");
  EXPECT_EQ(canon("cuda:00?order=tree", true), canon("cuda:0", true));
  EXPECT_EQ(canon("cudnn:0?fwd_algo=03", true), canon("cudnn:0?fwd_algo=3", true));
  EXPECT_EQ(canon("cudnn:0?fwd_algo=auto", true), canon("cudnn:0", true));
  EXPECT_EQ(canon("reduce?op=sum&n=100&seed=-0", false), canon("reduce?op=sum&n=0100&seed=0", false));
  EXPECT_EQ(canon("matmul?m=8&n=8&k=8&seed=007", false), "matmul?m=8&n=8&k=8&ta=n&tb=n&dtype=f32&dist=uniform&seed=7");
}

// The target table is the backend registry's: --help lists every visible backend, in registry order,
// with each of its keys.
TEST(Spec, TargetHelpComesFromTheRegistry) {
  const std::string help = target_help();
  size_t at = 0;
  for (auto& e : backend_registry()) {
    if (e.hidden) continue;
    size_t pos = help.find("  " + e.name + (e.device != DeviceKind::kHost ? "[:N]" : "") + "  " + e.summary + "\n");
    ASSERT_NE(pos, std::string::npos) << e.name;
    EXPECT_GE(pos, at) << e.name << " out of registry order";
    at = pos;
    for (auto& k : e.keys) EXPECT_NE(help.find("      " + k.key + "=", pos), std::string::npos) << e.name << " " << k.key;
  }
}
