// cpu?conv=winograd (kernels/cpu/winograd.hpp): Winograd F(4x4,3x3) forward, forward + bias, backward
// data and backward filter against the cpu-ref oracle; the orders' promises (sequential and pairwise:
// the same bits for every thread count and isa; blocked: the same bits run to run; atomic: the forced
// orders differ) and the chunks that make their bits; the direct path unchanged; the spec refusals; a
// few PredNet steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/fixtures.hpp"
#include "cli_helpers.hpp"
#include "kernels/cpu/native.hpp"
#include "kernels/cpu/native_kernels.hpp"
#include "kernels/cpu/ref.hpp"
#include "kernels/cpu/winograd.hpp"
#include "kernels/generator.hpp"
#include "models/prednet.hpp"
#include "models/prednet_train.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "suites/train_data.hpp"
#include "test_inputs.hpp"
#include "video_helpers.hpp"

namespace detaudit {
namespace {

using test_support::moving_squares;
using test_support::uniform;

// Winograd for every 3x3 stride-1 shape, however few its channels (the product's threshold,
// CpuNativeOptions::winograd_min_channels, would send these small test shapes to the direct code).
std::unique_ptr<Backend> cpu(ReduceOrder order, int threads, ConvAlgo conv = ConvAlgo::kWinograd,
                             CpuIsa isa = CpuIsa::kAuto, uint64_t seed = 0, int min_channels = 1) {
  CpuNativeOptions o;
  o.order = order, o.threads = threads, o.conv = conv, o.isa = isa, o.forced_atomic_order_seed = seed;
  o.winograd_min_channels = min_channels;
  return make_cpu_native(o);
}

ConvShape shape(int n, int c, int h, int w, int k, int pad) {
  ConvShape s;
  s.n = n, s.c = c, s.h = h, s.w = w, s.k = k, s.r = 3, s.s = 3, s.stride = 1, s.pad = pad;
  return s;
}

enum class Pass { kFwd, kFwdBias, kBwdData, kBwdFilter };
const char* name_of(Pass p) {
  switch (p) {
    case Pass::kFwd: return "fwd";
    case Pass::kFwdBias: return "fwd+bias";
    case Pass::kBwdData: return "bwd_data";
    case Pass::kBwdFilter: return "bwd_filter";
  }
  return "?";
}

// The pass's two inputs (x and w, dy and w, or x and dy) and the bias, seeded by the shape.
struct Inputs {
  std::vector<float> a, b, bias;
};
Inputs inputs_for(const ConvShape& s, Pass p, uint64_t seed) {
  Inputs in;
  const size_t na = p == Pass::kBwdData ? s.y_size() : s.x_size();
  const size_t nb = p == Pass::kBwdFilter ? s.y_size() : s.w_size();
  in.a = uniform(na, seed);
  in.b = uniform(nb, seed + 1);
  in.bias = uniform(size_t(s.k), seed + 2);
  return in;
}
size_t out_size(const ConvShape& s, Pass p) {
  return p == Pass::kBwdData ? s.x_size() : p == Pass::kBwdFilter ? s.w_size() : s.y_size();
}
std::vector<float> run(Backend& be, const ConvShape& s, Pass p, const Inputs& in) {
  std::vector<float> out(out_size(s, p), -7.0f);
  Status st;
  switch (p) {
    case Pass::kFwd: st = be.conv2d_fwd(s, in.a.data(), in.b.data(), out.data()); break;
    case Pass::kFwdBias: st = be.conv2d_fwd_bias(s, in.a.data(), in.b.data(), in.bias.data(), out.data()); break;
    case Pass::kBwdData: st = be.conv2d_bwd_data(s, in.a.data(), in.b.data(), out.data()); break;
    case Pass::kBwdFilter: st = be.conv2d_bwd_filter(s, in.a.data(), in.b.data(), out.data()); break;
  }
  EXPECT_TRUE(st.is_ok()) << be.name() << " " << name_of(p) << ": " << st.message();
  return out;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// Accuracy against cpu-ref. Winograd's error is not a summation error of the products w*x: each output
// is A^T [sum_c (G g G^T) . (B^T d B)] A, and the transforms' coefficients (B^T up to 5, A^T up to 8,
// G's 1/6 and 1/24 rounded) amplify the rounding of the transformed terms. Bounding every step by its
// coefficients' absolute row sums (B^T: 10, A^T: 19, G: 0.5) gives |err| <~ u * 36 * 10^2 * 19^2 *
// 0.5^2 * max|w||x| * C — a pessimistic 4e-3 relative to a term's size for u = 2^-24 — while the
// published measurements of F(4x4,3x3) in fp32 (Lavin & Gray 2015, Table; Barabasz et al. 2018) put
// the typical error near 100x that of the direct sum. The test bounds the error relative to
// ref_abs = the same pass computed by cpu-ref on |inputs| (the sum of |products|, the scale of the
// terms): |y - ref| <= kRelTol * ref_abs + kAbsTol. kRelTol = 1e-4 is ~8x the worst observed below
// (see the printed maximum: 1.2e-5 on these shapes, n1 c3 6x9 k17 pad2 forward) and ~800 u, far above the direct path's
// (< C*R*S u) and far below a wrong transform (errors of order 1).
constexpr double kRelTol = 1e-4;
constexpr double kAbsTol = 1e-30;

std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

struct Case {
  int n, c, h, w, k, pad;
};
std::string str(const Case& c) {
  return "n" + std::to_string(c.n) + " c" + std::to_string(c.c) + " " + std::to_string(c.h) + "x" +
         std::to_string(c.w) + " k" + std::to_string(c.k) + " pad" + std::to_string(c.pad);
}

// H, W not multiples of 4 (partial edge tiles), pad 0, 1 and 2, C and K of 1, 3 and 17, N of 1 and 3.
const std::vector<Case> kCases = {
    {1, 1, 5, 7, 1, 1},   {3, 3, 8, 8, 17, 1},  {1, 17, 13, 11, 3, 0}, {3, 17, 13, 11, 17, 1},
    {1, 3, 5, 7, 3, 0},   {3, 1, 8, 8, 3, 0},   {1, 3, 6, 9, 17, 2},   {3, 17, 4, 4, 1, 1},
    {1, 3, 3, 3, 3, 0},   {1, 17, 1, 1, 3, 1},  {3, 3, 13, 11, 1, 2},
};

TEST(Winograd, MatchesTheOracleOnEveryPassAndShape) {
  auto ref = make_cpu_ref();
  auto win = cpu(ReduceOrder::kBlocked, 2);
  double worst = 0;
  std::string worst_at;
  for (const Case& c : kCases) {
    const ConvShape s = shape(c.n, c.c, c.h, c.w, c.k, c.pad);
    ASSERT_TRUE(native::winograd_applies(s, 1)) << str(c);
    for (Pass p : {Pass::kFwd, Pass::kFwdBias, Pass::kBwdData, Pass::kBwdFilter}) {
      const Inputs in = inputs_for(s, p, 11);
      Inputs abs_in{abs_of(in.a), abs_of(in.b), abs_of(in.bias)};
      const std::vector<float> y = run(*win, s, p, in), r = run(*ref, s, p, in), ra = run(*ref, s, p, abs_in);
      int bad = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        const double err = std::fabs(double(y[i]) - double(r[i]));
        ASSERT_TRUE(std::isfinite(y[i])) << str(c) << " " << name_of(p) << " element " << i;
        if (ra[i] > 0 && err / ra[i] > worst) worst = err / ra[i], worst_at = str(c) + " " + name_of(p);
        if (err > kRelTol * ra[i] + kAbsTol && bad++ < 5)
          ADD_FAILURE() << str(c) << " " << name_of(p) << " element " << i << ": " << y[i] << " vs cpu-ref " << r[i]
                        << " (|ref| scale " << ra[i] << ")";
      }
    }
  }
  std::printf("worst |winograd - cpu-ref| / cpu-ref(|inputs|): %.3g (%s)\n", worst, worst_at.c_str());
}

// The shapes Winograd takes and those it leaves to the direct code.
TEST(Winograd, AppliesTo3x3Stride1PadUpTo2Only) {
  EXPECT_TRUE(native::winograd_applies(shape(1, 1, 3, 3, 1, 0), 1));
  EXPECT_TRUE(native::winograd_applies(shape(1, 1, 1, 1, 1, 2), 1));
  ConvShape s = shape(1, 2, 8, 8, 2, 3);
  EXPECT_FALSE(native::winograd_applies(s, 1)) << "pad 3";
  s = shape(1, 2, 8, 8, 2, 1), s.stride = 2;
  EXPECT_FALSE(native::winograd_applies(s, 1)) << "stride 2";
  s = shape(1, 2, 8, 8, 2, 1), s.r = s.s = 5;
  EXPECT_FALSE(native::winograd_applies(s, 1)) << "5x5";
  // The product's threshold: min(C, K) of at least 64.
  const int dflt = CpuNativeOptions{}.winograd_min_channels;
  EXPECT_EQ(dflt, 64);
  EXPECT_TRUE(native::winograd_applies(shape(4, 64, 16, 16, 64, 1), dflt));
  EXPECT_FALSE(native::winograd_applies(shape(4, 63, 16, 16, 256, 1), dflt));
  EXPECT_FALSE(native::winograd_applies(shape(4, 256, 16, 16, 32, 1), dflt));
  EXPECT_FALSE(native::winograd_applies(shape(4, 19, 64, 64, 4, 1), dflt));
}

// Other shapes run the direct code: the same bits as conv=direct. And conv=direct is the default's bits.
// The transformed-filter cache: training updates a filter in place (same pointer, new values), so an
// entry must be reused only for bitwise the same filter. A one-ULP change of one weight at the same
// address gives what a backend with an empty cache gives for the changed filter, forward and backward
// data alike.
TEST(Winograd, CachedFiltersFollowInPlaceUpdates) {
  const ConvShape s = shape(2, 5, 9, 7, 6, 1);
  for (Pass p : {Pass::kFwd, Pass::kBwdData}) {
    auto warm = cpu(ReduceOrder::kBlocked, 2);
    Inputs in = inputs_for(s, p, 21);
    const std::vector<float> before = run(*warm, s, p, in);
    EXPECT_TRUE(same_bits(run(*warm, s, p, in), before)) << name_of(p) << ": a cache hit";
    in.b[13] = std::nextafter(in.b[13], INFINITY);  // in place: the same address
    const std::vector<float> after = run(*warm, s, p, in);
    auto cold = cpu(ReduceOrder::kBlocked, 2);
    EXPECT_TRUE(same_bits(after, run(*cold, s, p, in))) << name_of(p) << ": the changed filter, not the cached one";
    in.b[13] = std::nextafter(in.b[13], -INFINITY) * 2.0f;  // a change large enough to show in the output
    const std::vector<float> doubled = run(*warm, s, p, in);
    EXPECT_FALSE(same_bits(doubled, after)) << name_of(p);
    auto cold2 = cpu(ReduceOrder::kBlocked, 2);
    EXPECT_TRUE(same_bits(doubled, run(*cold2, s, p, in))) << name_of(p);
  }
}

TEST(Winograd, DirectPathBitsUnchanged) {
  ConvShape s5 = shape(2, 3, 9, 9, 4, 2);
  s5.r = s5.s = 5;
  ConvShape st2 = shape(2, 3, 9, 9, 4, 1);
  st2.stride = 2;
  const ConvShape s3 = shape(2, 5, 9, 7, 4, 1);
  CpuNativeOptions dflt;
  dflt.threads = 2;
  auto base = make_cpu_native(dflt);
  auto direct = cpu(ReduceOrder::kBlocked, 2, ConvAlgo::kDirect);
  auto win = cpu(ReduceOrder::kBlocked, 2);
  // With the product's threshold, a 3x3 convolution with few channels stays direct too.
  auto win_default = cpu(ReduceOrder::kBlocked, 2, ConvAlgo::kWinograd, CpuIsa::kAuto, 0,
                         CpuNativeOptions{}.winograd_min_channels);
  for (Pass p : {Pass::kFwd, Pass::kFwdBias, Pass::kBwdData, Pass::kBwdFilter}) {
    for (const ConvShape& s : {s5, st2}) {
      const Inputs in = inputs_for(s, p, 3);
      EXPECT_TRUE(same_bits(run(*win, s, p, in), run(*direct, s, p, in))) << name_of(p) << " falls back to direct";
    }
    const Inputs in3 = inputs_for(s3, p, 4);
    EXPECT_TRUE(same_bits(run(*win_default, s3, p, in3), run(*direct, s3, p, in3))) << name_of(p) << " c5 k4";
    EXPECT_FALSE(same_bits(run(*win, s3, p, in3), run(*direct, s3, p, in3))) << name_of(p) << " winograd's own bits";
    const Inputs in = inputs_for(s3, p, 3);
    EXPECT_TRUE(same_bits(run(*base, s3, p, in), run(*direct, s3, p, in))) << name_of(p);
  }
  EXPECT_EQ(base->name(), direct->name());
  EXPECT_EQ(win->name(), "cpu?order=blocked&threads=2&conv=winograd");
  bool has_conv = false;
  for (auto& [k, v] : win->details()) has_conv |= k == "conv" && v == "winograd";
  EXPECT_TRUE(has_conv);
}

// Shapes for the order checks: a forward with C >= kAtomicMinSplitK (so atomic splits its C reduction)
// and a filter gradient over more than kGemmKc tiles (so pairwise has a tree and atomic chunks).
const ConvShape kFwdLong = shape(1, 70, 9, 10, 5, 1);   // C = 70
const ConvShape kBwdLong = shape(3, 4, 37, 38, 5, 1);   // T = 3 * 10 * 10 = 300 tiles
static_assert(native::kAtomicMinSplitK <= 70 && native::kGemmKc < 300, "the shapes above no longer split");

struct PassShape {
  Pass pass;
  ConvShape s;
};
const std::vector<PassShape> kOrderCases = {{Pass::kFwdBias, kFwdLong}, {Pass::kBwdData, shape(2, 9, 10, 7, 70, 1)},
                                            {Pass::kBwdFilter, kBwdLong}, {Pass::kFwd, shape(3, 3, 13, 11, 17, 0)}};

// sequential and pairwise: the same bits for threads 1, 2, 3 and for every ISA.
TEST(Winograd, SequentialAndPairwiseSameBitsForEveryThreadCountAndIsa) {
  for (ReduceOrder order : {ReduceOrder::kSequential, ReduceOrder::kPairwise}) {
    auto one = cpu(order, 1, ConvAlgo::kWinograd, CpuIsa::kScalar);
    std::vector<std::unique_ptr<Backend>> others;
    others.push_back(cpu(order, 2));
    others.push_back(cpu(order, 3, ConvAlgo::kWinograd, CpuIsa::kScalar));
    if (cpu_isa_supported(CpuIsa::kAvx2)) others.push_back(cpu(order, 2, ConvAlgo::kWinograd, CpuIsa::kAvx2));
    if (cpu_isa_supported(CpuIsa::kAvx512)) others.push_back(cpu(order, 2, ConvAlgo::kWinograd, CpuIsa::kAvx512));
    for (const PassShape& c : kOrderCases) {
      const Inputs in = inputs_for(c.s, c.pass, 5);
      const std::vector<float> want = run(*one, c.s, c.pass, in);
      for (auto& be : others)
        EXPECT_TRUE(same_bits(run(*be, c.s, c.pass, in), want)) << be->name() << " " << name_of(c.pass);
    }
  }
}

// blocked: the same bits run to run (for its thread count).
TEST(Winograd, BlockedSameBitsRunToRun) {
  for (int threads : {2, 3}) {
    auto be = cpu(ReduceOrder::kBlocked, threads);
    for (const PassShape& c : kOrderCases) {
      const Inputs in = inputs_for(c.s, c.pass, 6);
      const std::vector<float> first = run(*be, c.s, c.pass, in);
      for (int rep = 0; rep < 3; ++rep)
        EXPECT_TRUE(same_bits(run(*be, c.s, c.pass, in), first)) << be->name() << " " << name_of(c.pass);
    }
  }
  // With one thread blocked is the sequential order, as in the direct path.
  const Inputs in = inputs_for(kBwdLong, Pass::kBwdFilter, 6);
  EXPECT_TRUE(same_bits(run(*cpu(ReduceOrder::kBlocked, 1), kBwdLong, Pass::kBwdFilter, in),
                        run(*cpu(ReduceOrder::kSequential, 2), kBwdLong, Pass::kBwdFilter, in)));
}

// atomic: two forced completion orders give different bits on long reductions (and one gives the same
// bits twice); a forward whose C is below kAtomicMinSplitK is one chain, sequential's bits.
TEST(Winograd, AtomicForcedOrdersDiffer) {
  ASSERT_NE(native::forced_order(1, 3), native::forced_order(2, 3));
  auto s1 = cpu(ReduceOrder::kAtomic, 2, ConvAlgo::kWinograd, CpuIsa::kAuto, 1);
  auto s1b = cpu(ReduceOrder::kAtomic, 2, ConvAlgo::kWinograd, CpuIsa::kAuto, 1);
  auto s2 = cpu(ReduceOrder::kAtomic, 2, ConvAlgo::kWinograd, CpuIsa::kAuto, 2);
  for (const PassShape& c : {PassShape{Pass::kFwdBias, kFwdLong}, PassShape{Pass::kBwdFilter, kBwdLong}}) {
    const Inputs in = inputs_for(c.s, c.pass, 8);
    const std::vector<float> a = run(*s1, c.s, c.pass, in);
    EXPECT_TRUE(same_bits(run(*s1b, c.s, c.pass, in), a)) << name_of(c.pass);
    EXPECT_FALSE(same_bits(run(*s2, c.s, c.pass, in), a)) << name_of(c.pass);
  }
  const ConvShape short_c = shape(2, 9, 10, 7, 6, 1);
  const Inputs in = inputs_for(short_c, Pass::kFwd, 9);
  EXPECT_TRUE(same_bits(run(*s2, short_c, Pass::kFwd, in), run(*cpu(ReduceOrder::kSequential, 1), short_c, Pass::kFwd, in)));
}

// Hard facts that pin the orders' chunks in Winograd's 36 gemms (the gemm driver's, native_gemm.cpp):
// - atomic with a forced seed adds the partials of max(3, ceil(L / kGemmKc)) chunks [L*c/chunks,
//   L*(c+1)/chunks) of each gemm's reduction (length L: C forward, K backward data, the tiles T for the
//   filter gradient) in the seeded permutation p, from zero: ((0 + P[p0]) + P[p1]) + ... Blocked with
//   `chunks` threads has the same partials and adds them as ((P0 + P1) + P2) + ...; float addition
//   commutes, so the two give the same bits exactly when p[2..] = 2, 3, ..., and seeds whose permutations
//   differ from position 2 on give other bits. One thread without a seed adds in chunk order: blocked's
//   bits too.
// - pairwise cuts at multiples of kGemmKc: with L = 512 it is blocked with two threads; with L <= 256
//   it is sequential.
TEST(Winograd, AtomicAndBlockedBitsFollowTheirChunks) {
  struct Long {
    Pass pass;
    ConvShape s;
    int reduction;
  };
  const std::vector<Long> cases = {{Pass::kFwdBias, kFwdLong, 70},
                                   {Pass::kBwdData, shape(2, 9, 10, 7, 70, 1), 70},
                                   {Pass::kBwdFilter, kBwdLong, 300},
                                   {Pass::kFwd, shape(1, 800, 4, 4, 3, 1), 800},
                                   {Pass::kBwdFilter, shape(4, 3, 64, 64, 5, 1), 1024}};
  for (const Long& c : cases) {
    const size_t chunks = size_t(std::max(3, (c.reduction + native::kGemmKc - 1) / native::kGemmKc));
    const std::string what = std::string(name_of(c.pass)) + " over " + std::to_string(c.reduction);
    const Inputs in = inputs_for(c.s, c.pass, 12);
    const std::vector<float> blocked = run(*cpu(ReduceOrder::kBlocked, int(chunks)), c.s, c.pass, in);
    EXPECT_TRUE(same_bits(run(*cpu(ReduceOrder::kAtomic, 1), c.s, c.pass, in), blocked)) << what;
    std::vector<uint32_t> identity(chunks - 2);
    for (size_t i = 0; i < identity.size(); ++i) identity[i] = uint32_t(i + 2);
    std::vector<uint64_t> same, other;
    std::vector<std::vector<uint32_t>> other_tails;
    for (uint64_t seed = 1; seed < 5000 && (same.size() < 2 || other.size() < 3); ++seed) {
      const std::vector<uint32_t> p = native::forced_order(seed, chunks), tail(p.begin() + 2, p.end());
      if (tail == identity) {
        if (same.size() < 2 && (same.empty() || p != native::forced_order(same[0], chunks))) same.push_back(seed);
      } else if (other.size() < 3 && std::find(other_tails.begin(), other_tails.end(), tail) == other_tails.end()) {
        other.push_back(seed), other_tails.push_back(tail);
      }
    }
    ASSERT_EQ(same.size(), 2u) << what;
    ASSERT_GE(other.size(), 2u) << what;
    auto forced = [&](uint64_t seed) {
      return run(*cpu(ReduceOrder::kAtomic, 2, ConvAlgo::kWinograd, CpuIsa::kAuto, seed), c.s, c.pass, in);
    };
    for (uint64_t seed : same) EXPECT_TRUE(same_bits(forced(seed), blocked)) << what << " seed " << seed;
    std::vector<std::vector<float>> seen = {blocked};
    for (uint64_t seed : other) {
      const std::vector<float> y = forced(seed);
      for (const std::vector<float>& prev : seen) EXPECT_FALSE(same_bits(y, prev)) << what << " seed " << seed;
      seen.push_back(y);
    }
  }
  const ConvShape t512 = shape(2, 3, 64, 64, 5, 1);  // 2 * 16 * 16 tiles
  const Inputs in = inputs_for(t512, Pass::kBwdFilter, 13);
  const std::vector<float> pairwise = run(*cpu(ReduceOrder::kPairwise, 3), t512, Pass::kBwdFilter, in);
  EXPECT_TRUE(same_bits(pairwise, run(*cpu(ReduceOrder::kBlocked, 2), t512, Pass::kBwdFilter, in)));
  EXPECT_FALSE(same_bits(pairwise, run(*cpu(ReduceOrder::kSequential, 1), t512, Pass::kBwdFilter, in)));
  const Inputs in70 = inputs_for(kFwdLong, Pass::kFwd, 14);
  EXPECT_TRUE(same_bits(run(*cpu(ReduceOrder::kPairwise, 2), kFwdLong, Pass::kFwd, in70),
                        run(*cpu(ReduceOrder::kSequential, 1), kFwdLong, Pass::kFwd, in70)));
}

TEST(Winograd, SpecsAndPromises) {
  Spec t;
  std::string err;
  ASSERT_TRUE(succeeded(parse_target("cpu?conv=winograd&order=sequential&threads=2", &t), &err)) << err;
  EXPECT_EQ(t.str(), "cpu?order=sequential&threads=2&isa=auto&conv=winograd");
  ASSERT_TRUE(succeeded(parse_target("cpu?threads=2", &t), &err)) << err;
  EXPECT_EQ(t.str(), "cpu?order=blocked&threads=2&isa=auto") << "the canonical names of existing targets stay";
  EXPECT_FALSE(succeeded(parse_target("cpu?order=portable&conv=winograd", &t), &err));
  EXPECT_NE(err.find("order=portable"), std::string::npos) << err;
  EXPECT_FALSE(succeeded(parse_target("cpu?conv=fft", &t), &err));
  EXPECT_TRUE(succeeded(parse_target("cpu?order=portable&conv=direct", &t), &err)) << err;
  CpuNativeOptions o;
  o.order = ReduceOrder::kPortable, o.conv = ConvAlgo::kWinograd;
  EXPECT_EQ(make_cpu_native(o), nullptr);

  auto promise = [](const std::string& target, const std::string& workload) {
    Spec ts, ws;
    std::string e;
    EXPECT_TRUE(succeeded(parse_target(target, &ts), &e)) << e;
    EXPECT_TRUE(succeeded(parse_workload(workload, &ws), &e)) << e;
    return promise_for(ts, ws, nlohmann::json::object(), {});
  };
  const std::string conv3 = "conv2d?n=2&c=64&h=12&w=12&k=64&pass=bwd_filter";
  Promise p = promise("cpu?order=sequential&threads=2&conv=winograd", conv3);
  EXPECT_EQ(p.equality_class, "cpu?order=sequential&conv=winograd");
  EXPECT_NE(p.run_to_run_source.find("Winograd F(4x4,3x3)"), std::string::npos) << p.run_to_run_source;
  EXPECT_FALSE(p.error_bound_exempt.empty());
  EXPECT_EQ(promise("cpu?order=blocked&threads=2&conv=winograd", conv3).equality_class,
            "cpu?order=blocked&threads=2&conv=winograd");
  EXPECT_EQ(promise("cpu?order=sequential&conv=winograd", "matmul").equality_class, "cpu?order=sequential");
  EXPECT_EQ(promise("cpu?order=sequential&conv=winograd", "conv2d?r=5&s=5").equality_class, "cpu?order=sequential");
  EXPECT_EQ(promise("cpu?order=sequential", conv3).equality_class, "cpu?order=sequential");
  EXPECT_EQ(promise("cpu?order=sequential&conv=winograd", "conv2d?c=8&k=64").equality_class, "cpu?order=sequential")
      << "below the channel threshold: the direct code";
  // Training variants keep conv.
  Spec d, n;
  ASSERT_TRUE(succeeded(parse_target("cpu?threads=2&conv=winograd", &t), &err));
  ASSERT_TRUE(succeeded(training_variants(t, &d, &n), &err)) << err;
  EXPECT_EQ(d.get("conv"), "winograd");
  EXPECT_EQ(n.get("conv"), "winograd");
  EXPECT_EQ(n.get("order"), "atomic");
}

// The CLI refuses the bad specs with exit code 2 before running anything.
TEST(Winograd, CliRefusesBadConvSpecs) {
  for (const char* bad : {"cpu?order=portable&conv=winograd", "cpu?conv=fft"}) {
    cli_test::CliRun r = cli_test::run_cli(std::string("probe --suite quick --targets '") + bad + "'");
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
  }
}

// A few PredNet steps on conv=winograd (every 3x3 convolution of the tiny configuration through Winograd,
// threshold 1): finite losses, falling, within 1e-3 (relative) of conv=direct's.

TEST(Winograd, PredNetTinyTrainsLikeDirect) {
  PredNetTrainConfig cfg;
  ASSERT_TRUE(prednet_config("tiny", 2, &cfg.net));
  cfg.batches = 6;
  const VideoSet train = moving_squares(8, cfg.net.nt), held = moving_squares(2, cfg.net.nt);
  PredNetTrainResult direct, win;
  auto bd = cpu(ReduceOrder::kBlocked, 2, ConvAlgo::kDirect), bw = cpu(ReduceOrder::kBlocked, 2);
  ASSERT_TRUE(train_prednet(*bd, train, held, cfg, {}, &direct));
  ASSERT_TRUE(train_prednet(*bw, train, held, cfg, {}, &win));
  ASSERT_EQ(win.curve.size(), direct.curve.size());
  for (size_t i = 0; i < win.curve.size(); ++i) {
    EXPECT_TRUE(std::isfinite(win.curve[i]));
    EXPECT_NEAR(win.curve[i], direct.curve[i], 1e-3 * std::fabs(direct.curve[i])) << "step " << i;
  }
  EXPECT_LT(win.curve.back(), win.curve.front());
  EXPECT_NE(win.final_weights.hex(), direct.final_weights.hex()) << "winograd has bits of its own";
}

}  // namespace
}  // namespace detaudit
