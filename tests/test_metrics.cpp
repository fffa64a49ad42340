#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/fingerprint.hpp"
#include "kernels/generator.hpp"
#include "contract/metrics.hpp"

using namespace detaudit;

namespace {
float f_bits(uint32_t b) { return std::bit_cast<float>(b); }
}  // namespace

TEST(Ulp, SignedZerosAreZeroUlpApartButFingerprintsDiffer) {
  float pz = 0.0f, nz = -0.0f;
  EXPECT_EQ(ulp_distance(pz, nz), 0u);
  EXPECT_NE(fingerprint_bytes(&pz, 4), fingerprint_bytes(&nz, 4));
  auto d = compare_to_oracle(&nz, &pz, 1);
  EXPECT_EQ(d.mismatched, 1u);  // bits differ
  EXPECT_EQ(d.max_ulp, 0u);
  EXPECT_EQ(d.max_rel_err, 0.0);
}

TEST(Ulp, NanPayloads) {
  float qnan = f_bits(0x7fc00000), payload = f_bits(0x7fc00123), one = 1.0f;
  ASSERT_TRUE(std::isnan(qnan) && std::isnan(payload));
  EXPECT_EQ(ulp_distance(qnan, payload), 0u);
  EXPECT_NE(fingerprint_bytes(&qnan, 4), fingerprint_bytes(&payload, 4));
  EXPECT_EQ(ulp_distance(qnan, one), kUlpInfinite);
  auto d = compare_to_oracle(&qnan, &one, 1);
  EXPECT_EQ(d.max_ulp, kUlpInfinite);
  EXPECT_TRUE(std::isinf(d.max_rel_err));
}

TEST(Ulp, Subnormals) {
  float dmin = std::numeric_limits<float>::denorm_min();
  float largest_sub = f_bits(0x007fffff), smallest_normal = std::numeric_limits<float>::min();
  EXPECT_EQ(ulp_distance(dmin, 0.0f), 1u);
  EXPECT_EQ(ulp_distance(dmin, -dmin), 2u);
  EXPECT_EQ(ulp_distance(largest_sub, smallest_normal), 1u);
  // Relative error is measured against max(|ref|, smallest normal), so subnormal noise stays finite.
  auto d = compare_to_oracle(&dmin, &largest_sub, 1);
  EXPECT_TRUE(std::isfinite(d.max_rel_err));
}

TEST(Ulp, OrdinaryValuesAndDoubles) {
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)), 1u);
  EXPECT_EQ(ulp_distance(-1.0f, std::nextafter(-1.0f, -2.0f)), 1u);
  EXPECT_EQ(ulp_distance(1.0f, 1.0f + 16 * std::numeric_limits<float>::epsilon()), 16u);
  EXPECT_EQ(ulp_distance(1.0, std::nextafter(1.0, 2.0)), 1u);
  EXPECT_EQ(ulp_distance(-0.0, 0.0), 0u);
  EXPECT_EQ(ulp_distance(std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()), 1u);
  // Across zero: -1 and +1 are far apart, in both formats, without overflow.
  EXPECT_EQ(ulp_distance(-1.0f, 1.0f), 2u * 0x3f800000u);
  EXPECT_GT(ulp_distance(-std::numeric_limits<double>::max(), std::numeric_limits<double>::max()), uint64_t(1) << 62);
}

TEST(Ulp, CompareToOracleCountsMismatches) {
  std::vector<float> ref = {1, 2, 3, 4}, out = ref;
  out[1] = std::nextafter(2.0f, 3.0f);
  out[3] = std::nextafter(std::nextafter(4.0f, 0.0f), 0.0f);
  auto d = compare_to_oracle(out.data(), ref.data(), 4);
  EXPECT_EQ(d.mismatched, 2u);
  EXPECT_EQ(d.max_ulp, 2u);
  EXPECT_DOUBLE_EQ(d.max_rel_err, std::ldexp(1.0, -23));  // 2^-22 / 2 and 2^-21 / 4
}

TEST(Fingerprint, KnownValueHexRoundTripAndSensitivity) {
  // XXH3-128 of the empty input, as published with xxHash.
  Fingerprint e = fingerprint_bytes("", 0);
  EXPECT_EQ(e.hex(), "99aa06d3014798d86001c324468d497f");
  std::vector<uint8_t> buf(4097);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t(i * 7);
  Fingerprint a = fingerprint_bytes(buf.data(), buf.size());
  EXPECT_EQ(a, fingerprint_bytes(buf.data(), buf.size()));
  Fingerprint back;
  ASSERT_TRUE(Fingerprint::from_hex(a.hex(), &back));
  EXPECT_EQ(a, back);
  EXPECT_FALSE(Fingerprint::from_hex("xyz", &back));
  EXPECT_FALSE(Fingerprint::from_hex(std::string(32, 'G'), &back));
  for (size_t bit : {size_t(0), size_t(1000 * 8 + 3), size_t(4096 * 8 + 7)}) {
    buf[bit / 8] ^= uint8_t(1u << (bit % 8));
    EXPECT_NE(a, fingerprint_bytes(buf.data(), buf.size())) << "bit " << bit;
    buf[bit / 8] ^= uint8_t(1u << (bit % 8));
  }
}

TEST(Generator, CounterBasedAndSliceable) {
  auto a = make_input<float>(1000, 42, 1, Dist::kUniform);
  auto b = make_input<float>(1000, 42, 1, Dist::kUniform);
  auto c = make_input<float>(1000, 43, 1, Dist::kUniform);
  auto s = make_input<float>(1000, 42, 2, Dist::kUniform);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), 4000), 0);
  EXPECT_NE(std::memcmp(a.data(), c.data(), 4000), 0);
  EXPECT_NE(std::memcmp(a.data(), s.data(), 4000), 0);
  EXPECT_EQ(float(counter_value(42, 1, 777, Dist::kUniform)), a[777]);  // any element alone
  for (float x : a) {
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 1.0f);
  }
  for (float x : make_input<float>(1000, 1, 1, Dist::kInt)) {
    EXPECT_EQ(x, std::round(x));
    EXPECT_LE(std::fabs(x), 4.0f);
  }
}

TEST(ErrorRatio, GammaAndBuckets) {
  EXPECT_DOUBLE_EQ(gamma_n(1, kUnitRoundoffF32), 0x1p-24 / (1 - 0x1p-24));
  EXPECT_DOUBLE_EQ(gamma_n(1000, 0.25e-3), 0.25 / 0.75);
  EXPECT_TRUE(std::isinf(gamma_n(4, 0.25)));  // n·u >= 1: the bound says nothing
  EXPECT_EQ(gamma_n(0, kUnitRoundoffF32), 0.0);
  // Bucket b holds (2^(2b-26), 2^(2b-24)]; bucket 1 everything down to 0; 14 above 4.
  EXPECT_EQ(ratio_bucket(0), 1);
  EXPECT_EQ(ratio_bucket(0x1p-30), 1);
  EXPECT_EQ(ratio_bucket(0x1p-22), 1);
  EXPECT_EQ(ratio_bucket(std::nextafter(0x1p-22, 1.0)), 2);
  EXPECT_EQ(ratio_bucket(0.25), 11);
  EXPECT_EQ(ratio_bucket(0.3), 12);
  EXPECT_EQ(ratio_bucket(1), 12);
  EXPECT_EQ(ratio_bucket(std::nextafter(1.0, 2.0)), 13);
  EXPECT_EQ(ratio_bucket(4), 13);
  EXPECT_EQ(ratio_bucket(std::nextafter(4.0, 5.0)), 14);
  EXPECT_EQ(ratio_bucket(INFINITY), 14);
  EXPECT_EQ(ratio_bucket(NAN), 14);
}

TEST(ErrorRatio, CompareWithABound) {
  std::vector<float> ref = {1, 2, -0.0f, 4, 0, 8}, out = ref;
  ErrorBound b{7, {0x1p-20, 0x1p-20, 0, 0x1p-20, 0, 0x1p-20}};
  out[1] = 2 + 0x1p-22f;  // ratio 1/4
  out[2] = 0.0f;          // signed zero against a bound of 0: no difference, ratio 0
  out[3] = 4 + 0x1p-19f;  // ratio 2
  auto d = compare_to_oracle(out.data(), ref.data(), out.size(), &b);
  EXPECT_EQ(d.mismatched, 3u);
  EXPECT_DOUBLE_EQ(d.err_ratio, 2);
  EXPECT_EQ(d.bound_k, 7);
  ASSERT_EQ(d.ratio_hist.size(), size_t(kRatioBuckets));
  std::vector<uint64_t> want(kRatioBuckets, 0);
  want[0] = 3, want[1] = 1, want[11] = 1, want[13] = 1;  // (2^-4, 2^-2] and (1, 4]
  EXPECT_EQ(d.ratio_hist, want);
  EXPECT_DOUBLE_EQ(d.agree_bits, 22);  // max diff 2^-19 against max |y| 8
  // A difference where the bound is 0 is infinitely far out.
  out[4] = std::numeric_limits<float>::denorm_min();
  d = compare_to_oracle(out.data(), ref.data(), out.size(), &b);
  EXPECT_TRUE(std::isinf(d.err_ratio));
  EXPECT_EQ(d.ratio_hist[14], 1u);
  // Without a bound (or one of another size): no ratio, but the bits of agreement.
  for (const ErrorBound* none : std::initializer_list<const ErrorBound*>{nullptr, &b}) {
    d = compare_to_oracle(out.data(), ref.data(), none ? 3 : out.size(), none);
    EXPECT_EQ(d.err_ratio, -1);
    EXPECT_TRUE(d.ratio_hist.empty());
    EXPECT_EQ(d.bound_k, 0);
    EXPECT_GT(d.agree_bits, 0);
  }
}

TEST(ErrorRatio, NanAndIdenticalOutputs) {
  float qnan = f_bits(0x7fc00000), payload = f_bits(0x7fc00123);
  std::vector<float> ref = {qnan, 1, 2}, out = {payload, 1, 2};
  ErrorBound b{3, {1e-6, 1e-6, 1e-6}};
  auto d = compare_to_oracle(out.data(), ref.data(), 3, &b);
  EXPECT_EQ(d.err_ratio, 0) << "two NaNs are no difference";
  EXPECT_EQ(d.ratio_hist[1], 1u);
  EXPECT_EQ(d.agree_bits, 24) << "no difference anywhere: full precision";
  out[1] = qnan;
  d = compare_to_oracle(out.data(), ref.data(), 3, &b);
  EXPECT_TRUE(std::isinf(d.err_ratio));
  EXPECT_EQ(d.agree_bits, 0);
  std::vector<double> r64 = {1, 2}, o64 = {1, 2};
  ErrorBound b64{2, {0, 0}};
  auto e = compare_to_oracle(o64.data(), r64.data(), 2, &b64);
  EXPECT_EQ(e.err_ratio, 0);
  EXPECT_EQ(e.agree_bits, 53);
  EXPECT_EQ(e.ratio_hist[0], 2u);
}

// An infinite ratio has two causes, kept apart by max_rel_err (OracleDistance::nonfinite_mismatch):
// a NaN or an infinity against another value, and a finite difference where the bound is 0. Finite
// values never give an infinite relative error, nor an infinite ratio against a positive bound.
TEST(ErrorRatio, InfiniteRatioCauses) {
  constexpr float kInfF = std::numeric_limits<float>::infinity();
  std::vector<float> ref = {1, 0, 2, 3}, out = ref;
  ErrorBound b{4, {1e-6, 0, 1e-6, 1e-6}};
  out[1] = 3;  // a difference where the bound is 0
  auto d = compare_to_oracle(out.data(), ref.data(), out.size(), &b);
  EXPECT_TRUE(std::isinf(d.err_ratio));
  EXPECT_TRUE(std::isfinite(d.max_rel_err));
  EXPECT_FALSE(d.nonfinite_mismatch());
  EXPECT_EQ(d.ratio_hist[kRatioBuckets - 1], 1u);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInfF, -kInfF}) {
    std::vector<float> o2 = ref;
    o2[2] = bad;  // NaN or infinity where the oracle has a number
    d = compare_to_oracle(o2.data(), ref.data(), o2.size(), &b);
    EXPECT_TRUE(std::isinf(d.err_ratio)) << bad;
    EXPECT_TRUE(d.nonfinite_mismatch()) << bad;
    d = compare_to_oracle(ref.data(), o2.data(), o2.size(), &b);  // the reverse
    EXPECT_TRUE(std::isinf(d.err_ratio)) << bad;
    EXPECT_TRUE(d.nonfinite_mismatch()) << bad;
  }
  // Both causes in one output, and across outputs after merge: the NaN is reported.
  out[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(compare_to_oracle(out.data(), ref.data(), out.size(), &b).nonfinite_mismatch());
  OracleDistance zero_bound = compare_to_oracle(out.data(), ref.data(), 2, &b), m;
  m.merge(zero_bound);
  EXPECT_FALSE(m.nonfinite_mismatch());
  m.merge(compare_to_oracle(out.data(), ref.data(), out.size(), &b));
  EXPECT_TRUE(m.nonfinite_mismatch());
  EXPECT_TRUE(std::isinf(m.err_ratio));
  // f64: finite values whose difference or quotients overflow stay finite (the largest double).
  constexpr double kMax = std::numeric_limits<double>::max();
  std::vector<double> r64 = {-kMax, std::numeric_limits<double>::min()}, o64 = {kMax, 1e300};
  ErrorBound b64{2, {1e-300, 1e-300}};
  auto e = compare_to_oracle(o64.data(), r64.data(), 2, &b64);
  EXPECT_EQ(e.max_rel_err, kMax);
  EXPECT_EQ(e.err_ratio, kMax);
  EXPECT_FALSE(e.nonfinite_mismatch());
  EXPECT_EQ(e.ratio_hist[kRatioBuckets - 1], 2u);
  EXPECT_EQ(e.agree_bits, 0);
}

TEST(ErrorRatio, MergeKeepsTheWorstOutputsHistogram) {
  OracleDistance a, b, c, none;
  a.err_ratio = 0.5, a.agree_bits = 20, a.bound_k = 9, a.ratio_hist.assign(kRatioBuckets, 0), a.ratio_hist[12] = 4;
  b.err_ratio = 0.75, b.agree_bits = 21, b.bound_k = 9, b.ratio_hist.assign(kRatioBuckets, 0), b.ratio_hist[13] = 4;
  c.err_ratio = 0.75, c.agree_bits = 19, c.bound_k = 9, c.ratio_hist.assign(kRatioBuckets, 0), c.ratio_hist[1] = 4;
  OracleDistance m;  // as the worker starts: nothing compared yet
  for (const OracleDistance* d : {&a, &b, &c, &none}) m.merge(*d);
  EXPECT_EQ(m.err_ratio, 0.75);
  EXPECT_EQ(m.ratio_hist, b.ratio_hist) << "the first output with the largest ratio";
  EXPECT_EQ(m.agree_bits, 19);
  EXPECT_EQ(m.bound_k, 9);
  OracleDistance only_none;
  only_none.merge(none);
  EXPECT_EQ(only_none.err_ratio, -1);
  EXPECT_EQ(only_none.agree_bits, -1);
}
