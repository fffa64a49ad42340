#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/fingerprint.hpp"
#include "kernels/generator.hpp"
#include "probes/metrics.hpp"

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
