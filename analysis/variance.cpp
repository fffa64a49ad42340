#include "analysis/variance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <cstring>

#include <fmt/format.h>

#include "analysis/resampling.hpp"
#include "analysis/stats.hpp"

namespace detaudit {
namespace {

void add_note(std::string& notes, const std::string& s) {
  if (!notes.empty()) notes += "; ";
  notes += s;
}

AnovaTerm term(double ss, double df) {
  AnovaTerm t;
  t.ss = ss;
  t.df = df;
  t.ms = df > 0.0 ? ss / df : 0.0;
  return t;
}

static_assert(kExactPermutationLimit == resampling::kExactLimit, "one exact-enumeration limit");
using resampling::at_least;
using resampling::fisher_yates;
using resampling::permutation_stat;
using resampling::uniform_index;

// Cell means (a × b) and within-cell sums of squares; everything else in the balanced designs
// follows from these.
struct Cells {
  std::size_t a = 0, b = 0, n = 0;
  std::vector<double> mean;  // [i*b + j]
  std::vector<double> ss_within;
};

Cells cells_of(const Cube& c) {
  Cells out;
  out.a = c.a;
  out.b = c.b;
  out.n = c.n;
  out.mean.resize(c.a * c.b);
  out.ss_within.resize(c.a * c.b);
  for (std::size_t cell = 0; cell < c.a * c.b; ++cell) {
    std::span<const double> ys(c.y.data() + cell * c.n, c.n);
    const double m = mean(ys);
    double ss = 0.0;
    for (double v : ys) ss += (v - m) * (v - m);
    out.mean[cell] = m;
    out.ss_within[cell] = ss;
  }
  return out;
}

struct Marginals {
  std::vector<double> row, col;  // ȳ_i.., ȳ_.j.
  double grand = 0.0;
};

Marginals marginals(const std::vector<double>& m, std::size_t a, std::size_t b) {
  Marginals out;
  out.row.resize(a);
  out.col.resize(b);
  std::vector<double> tmp(std::max(a, b));
  for (std::size_t i = 0; i < a; ++i) out.row[i] = mean(std::span<const double>(m.data() + i * b, b));
  for (std::size_t j = 0; j < b; ++j) {
    for (std::size_t i = 0; i < a; ++i) tmp[i] = m[i * b + j];
    out.col[j] = mean(std::span<const double>(tmp.data(), a));
  }
  out.grand = mean(m);
  return out;
}

struct CrossedSS {
  double a = 0.0, b = 0.0, ab = 0.0;
  double grand = 0.0;
};

CrossedSS crossed_ss(const std::vector<double>& m, std::size_t a, std::size_t b, std::size_t n) {
  const Marginals mg = marginals(m, a, b);
  CrossedSS s;
  s.grand = mg.grand;
  const double dn = static_cast<double>(n);
  for (double r : mg.row) s.a += (r - mg.grand) * (r - mg.grand);
  s.a *= static_cast<double>(b) * dn;
  for (double c : mg.col) s.b += (c - mg.grand) * (c - mg.grand);
  s.b *= static_cast<double>(a) * dn;
  for (std::size_t i = 0; i < a; ++i)
    for (std::size_t j = 0; j < b; ++j) {
      const double r = m[i * b + j] - mg.row[i] - mg.col[j] + mg.grand;
      s.ab += r * r;
    }
  s.ab *= dn;
  return s;
}

Components clip(const Components& r) {
  return {std::max(r.target, 0.0), std::max(r.seed, 0.0), std::max(r.interaction, 0.0),
          std::max(r.residual, 0.0)};
}

Components shares(const Components& c) {
  const double tot = c.target + c.seed + c.interaction + c.residual;
  if (!(tot > 0.0) || !std::isfinite(tot)) return {};
  return {c.target / tot, c.seed / tot, c.interaction / tot, c.residual / tot};
}

// Method-of-moments components of the crossed model. A term with df = 0 is not estimable: its
// component is 0 and the next term down serves as the reference for the terms above it.
Components crossed_components(std::size_t a, std::size_t b, std::size_t n, const AnovaTerm& ta,
                              const AnovaTerm& tb, const AnovaTerm& tab, const AnovaTerm& te) {
  const double dn = static_cast<double>(n);
  const double ms_e = te.df > 0.0 ? te.ms : 0.0;
  const double ref_main = tab.df > 0.0 ? tab.ms : ms_e;
  Components r;
  r.residual = ms_e;
  r.interaction = tab.df > 0.0 ? (tab.ms - ms_e) / dn : 0.0;
  r.target = ta.df > 0.0 ? (ta.ms - ref_main) / (static_cast<double>(b) * dn) : 0.0;
  r.seed = tb.df > 0.0 ? (tb.ms - ref_main) / (static_cast<double>(a) * dn) : 0.0;
  return r;
}

struct TwoWayCore {
  AnovaTerm ta, tb, tab, te;
  double grand = 0.0;
};

TwoWayCore two_way_core(const std::vector<double>& m, double ss_e, std::size_t a, std::size_t b,
                        std::size_t n) {
  const CrossedSS s = crossed_ss(m, a, b, n);
  TwoWayCore c;
  c.grand = s.grand;
  c.ta = term(s.a, static_cast<double>(a - 1));
  c.tb = term(s.b, static_cast<double>(b - 1));
  c.tab = term(s.ab, static_cast<double>((a - 1) * (b - 1)));
  c.te = term(ss_e, static_cast<double>(a * b * (n - 1)));
  return c;
}

double sum(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s;
}

// Sets f/p for MS_num/MS_den, or leaves them absent with a note.
void f_test(double ms_num, double df_num, double ms_den, double df_den, const char* name,
            std::optional<double>& f, std::optional<double>& p, std::string& notes) {
  if (df_num <= 0.0 || df_den <= 0.0) return;  // caller notes the design limitation
  if (!(ms_den > 0.0)) {
    add_note(notes, std::string(name) +
                        (ms_num > 0.0 ? " undefined: denominator mean square is 0 (exact effect, no noise)"
                                      : " undefined: no variation in numerator or denominator"));
    return;
  }
  const double fv = ms_num / ms_den;
  if (!std::isfinite(fv)) {
    add_note(notes, std::string(name) + " not finite");
    return;
  }
  f = fv;
  p = f_upper_p(fv, df_num, df_den);
}

}  // namespace

TwoWayResult two_way_anova(const Cube& c) {
  TwoWayResult r;
  r.a = c.a;
  r.b = c.b;
  r.n = c.n;
  if (!c.valid()) {
    add_note(r.notes, "invalid cube: a, b, n must be positive and y must hold a*b*n values");
    return r;
  }
  const Cells cells = cells_of(c);
  const TwoWayCore core = two_way_core(cells.mean, sum(cells.ss_within), c.a, c.b, c.n);
  r.grand_mean = core.grand;
  r.target = core.ta;
  r.seed = core.tb;
  r.interaction = core.tab;
  r.residual = core.te;
  double ss_t = 0.0;
  for (double v : c.y) ss_t += (v - core.grand) * (v - core.grand);
  r.total = term(ss_t, static_cast<double>(c.y.size() - 1));

  r.target_testable = c.a >= 2 && c.b >= 2;
  if (c.a < 2) add_note(r.notes, "a = 1: one target, no target effect to test");
  if (c.b < 2) add_note(r.notes, "b = 1: one seed, target × seed interaction not estimable, no test of targets");
  r.confounded_ab_e = c.n == 1 && r.target_testable;
  // n = 1: no residual term. What absorbs the run-to-run spread is the lowest term still estimable: the
  // interaction with 2+ targets and 2+ seeds, else the seed term (one target) or the target term (one seed).
  if (c.n == 1 && r.target_testable)
    add_note(r.notes, "n = 1: interaction and residual are confounded; sigma2_AB absorbs the residual, sigma2_E reported as 0");
  else if (c.n == 1 && c.a == 1 && c.b >= 2)
    add_note(r.notes, "n = 1 and a = 1: seed and residual are confounded; sigma2_B absorbs the residual, sigma2_E "
                      "reported as 0");
  else if (c.n == 1 && c.b == 1 && c.a >= 2)
    add_note(r.notes, "n = 1 and b = 1: target and residual are confounded; sigma2_A absorbs the residual, sigma2_E "
                      "reported as 0");
  else if (c.n == 1)
    add_note(r.notes, "n = 1, a = 1, b = 1: one value, nothing to decompose");
  else if (!r.target_testable)
    add_note(r.notes, "interaction not estimable: it is contained in the other components");

  f_test(r.target.ms, r.target.df, r.interaction.ms, r.interaction.df, "F_A", r.f_target, r.p_target, r.notes);
  f_test(r.seed.ms, r.seed.df, r.interaction.ms, r.interaction.df, "F_B", r.f_seed, r.p_seed, r.notes);
  if (c.n >= 2)
    f_test(r.interaction.ms, r.interaction.df, r.residual.ms, r.residual.df, "F_AB", r.f_interaction,
           r.p_interaction, r.notes);

  r.raw = crossed_components(c.a, c.b, c.n, r.target, r.seed, r.interaction, r.residual);
  r.clipped = clip(r.raw);
  r.share = shares(r.clipped);
  return r;
}

PermutationResult permutation_test_target(const Cube& c, std::size_t permutations, std::uint64_t seed) {
  PermutationResult out;
  out.seed = seed;
  if (!c.valid()) {
    add_note(out.notes, "invalid cube");
    return out;
  }
  if (c.a < 2 || c.b < 2) {
    add_note(out.notes, "not testable: needs at least 2 targets and 2 seeds");
    return out;
  }
  const Cells cells = cells_of(c);
  const double df_a = static_cast<double>(c.a - 1);
  const double df_ab = static_cast<double>((c.a - 1) * (c.b - 1));
  auto stat = [&](const std::vector<double>& m) {
    const CrossedSS s = crossed_ss(m, c.a, c.b, c.n);
    return permutation_stat(s.a / df_a, s.ab / df_ab);
  };
  const CrossedSS s0 = crossed_ss(cells.mean, c.a, c.b, c.n);
  if (!(s0.a > 0.0) && !(s0.ab > 0.0)) {
    add_note(out.notes, "no variation between targets within seeds: nothing to test");
    return out;
  }
  const double f_obs = stat(cells.mean);
  if (std::isfinite(f_obs)) out.f_observed = f_obs;
  else add_note(out.notes, "observed F_A infinite (MS_AB = 0)");

  // (a!)^b arrangements, counted up to the exact limit; and the floor 1/(a!)^(b−1) of the p-value.
  std::size_t fact = 1;
  for (std::size_t i = 2; i <= c.a && fact <= kExactPermutationLimit; ++i) fact *= i;
  std::size_t total = 1;
  for (std::size_t j = 0; j < c.b && total <= kExactPermutationLimit; ++j)
    total = fact > kExactPermutationLimit ? kExactPermutationLimit + 1 : total * fact;
  double floor_p = 1.0;
  for (std::size_t j = 1; j < c.b && floor_p > 1e-300; ++j) floor_p /= double(fact);

  std::vector<double> perm(cells.mean.size());
  auto place = [&](std::size_t j, const std::vector<std::size_t>& order) {
    for (std::size_t i = 0; i < c.a; ++i) perm[i * c.b + j] = cells.mean[order[i] * c.b + j];
  };
  std::size_t count = 0;
  if (total <= kExactPermutationLimit) {
    // Every arrangement once: a mixed-radix counter over the blocks, digit j choosing block j's
    // permutation from the a! listed in lexicographic order (the identity, the observed data, first).
    std::vector<std::vector<std::size_t>> perms;
    std::vector<std::size_t> order(c.a);
    for (std::size_t i = 0; i < c.a; ++i) order[i] = i;
    do perms.push_back(order);
    while (std::next_permutation(order.begin(), order.end()));
    std::vector<std::size_t> digit(c.b, 0);
    for (std::size_t n = 0; n < total; ++n) {
      for (std::size_t j = 0; j < c.b; ++j) place(j, perms[digit[j]]);
      if (at_least(stat(perm), f_obs)) ++count;
      for (std::size_t j = 0; j < c.b && ++digit[j] == perms.size(); ++j) digit[j] = 0;
    }
    out.exact = true;
    out.permutations = total;
    out.p = static_cast<double>(count) / static_cast<double>(total);
    out.min_p = floor_p;
  } else {
    std::mt19937_64 g(seed);
    std::vector<std::size_t> order(c.a);
    for (std::size_t p = 0; p < permutations; ++p) {
      for (std::size_t j = 0; j < c.b; ++j) {
        for (std::size_t i = 0; i < c.a; ++i) order[i] = i;
        fisher_yates(order, g);
        place(j, order);
      }
      if (at_least(stat(perm), f_obs)) ++count;
    }
    out.permutations = permutations;
    out.p = (1.0 + static_cast<double>(count)) / (1.0 + static_cast<double>(permutations));
    out.min_p = std::max(floor_p, 1.0 / (1.0 + static_cast<double>(permutations)));
  }
  out.at_least_as_extreme = count;
  out.no_power = out.min_p > 0.05;
  if (out.no_power)
    add_note(out.notes, fmt::format("no power: the smallest p this design can give is {:.3g} > 0.05 ({} targets x {} "
                                    "seeds: at least {} of the arrangements tie with the data)",
                                    out.min_p, c.a, c.b, fact));
  return out;
}

BootstrapResult bootstrap_components(const Cube& c, std::size_t resamples, std::uint64_t seed, double level) {
  BootstrapResult out;
  out.seed = seed;
  out.level = level;
  if (!c.valid()) {
    add_note(out.notes, "invalid cube");
    return out;
  }
  const TwoWayResult point = two_way_anova(c);
  out.point_clipped = point.clipped;
  out.point_share = point.share;
  if (c.b < kMinBootstrapBlocks) {
    add_note(out.notes, fmt::format("no interval: {} seed block{} (at least {} are needed; with so few, "
                                    "resampled shares span [0, 1] by construction)",
                                    c.b, c.b == 1 ? "" : "s", kMinBootstrapBlocks));
    return out;
  }
  if (resamples == 0) {
    add_note(out.notes, "0 resamples");
    return out;
  }
  const Cells cells = cells_of(c);
  std::mt19937_64 g(seed);
  std::vector<double> m(c.a * c.b);
  std::vector<std::vector<double>> comp(8, std::vector<double>(resamples));
  for (std::size_t r = 0; r < resamples; ++r) {
    double ss_e = 0.0;
    for (std::size_t j = 0; j < c.b; ++j) {
      const std::size_t src = uniform_index(g, c.b);
      for (std::size_t i = 0; i < c.a; ++i) {
        m[i * c.b + j] = cells.mean[i * c.b + src];
        ss_e += cells.ss_within[i * c.b + src];
      }
    }
    const TwoWayCore core = two_way_core(m, ss_e, c.a, c.b, c.n);
    const Components cl = clip(crossed_components(c.a, c.b, c.n, core.ta, core.tb, core.tab, core.te));
    const Components sh = shares(cl);
    comp[0][r] = cl.target;
    comp[1][r] = cl.seed;
    comp[2][r] = cl.interaction;
    comp[3][r] = cl.residual;
    comp[4][r] = sh.target;
    comp[5][r] = sh.seed;
    comp[6][r] = sh.interaction;
    comp[7][r] = sh.residual;
  }
  const double lo_q = (1.0 - level) / 2.0, hi_q = (1.0 + level) / 2.0;
  auto ci = [&](int k) { return Interval{quantile(comp[k], lo_q), quantile(comp[k], hi_q)}; };
  out.clipped = {ci(0), ci(1), ci(2), ci(3)};
  out.share = {ci(4), ci(5), ci(6), ci(7)};
  out.resamples = resamples;
  out.ok = true;
  return out;
}

NestedResult nested_anova(const Cube& c) {
  NestedResult r;
  r.a = c.a;
  r.b = c.b;
  r.n = c.n;
  if (!c.valid()) {
    add_note(r.notes, "invalid cube: a, b, n must be positive and y must hold a*b*n values");
    return r;
  }
  const Cells cells = cells_of(c);
  const Marginals mg = marginals(cells.mean, c.a, c.b);
  const double dn = static_cast<double>(c.n), db = static_cast<double>(c.b);
  double ss_a = 0.0, ss_b = 0.0;
  for (double v : mg.row) ss_a += (v - mg.grand) * (v - mg.grand);
  ss_a *= db * dn;
  for (std::size_t i = 0; i < c.a; ++i)
    for (std::size_t j = 0; j < c.b; ++j) {
      const double d = cells.mean[i * c.b + j] - mg.row[i];
      ss_b += d * d;
    }
  ss_b *= dn;
  double ss_t = 0.0;
  for (double v : c.y) ss_t += (v - mg.grand) * (v - mg.grand);
  r.grand_mean = mg.grand;
  r.target = term(ss_a, static_cast<double>(c.a - 1));
  r.seed_within_target = term(ss_b, static_cast<double>(c.a * (c.b - 1)));
  r.residual = term(sum(cells.ss_within), static_cast<double>(c.a * c.b * (c.n - 1)));
  r.total = term(ss_t, static_cast<double>(c.y.size() - 1));
  r.target_testable = c.a >= 2 && c.b >= 2;
  if (c.a < 2) add_note(r.notes, "a = 1: one target, no target effect to test");
  if (c.b < 2) add_note(r.notes, "b = 1: one seed per target, no seed-level error term to test against");
  r.confounded_b_e = c.n == 1;
  if (c.n == 1)
    add_note(r.notes, "n = 1: seed and residual are confounded; sigma2_B(A) absorbs the residual, sigma2_E reported as 0");
  f_test(r.target.ms, r.target.df, r.seed_within_target.ms, r.seed_within_target.df, "F_A", r.f_target,
         r.p_target, r.notes);

  const double ms_e = r.residual.df > 0.0 ? r.residual.ms : 0.0;
  const double ref = r.seed_within_target.df > 0.0 ? r.seed_within_target.ms : ms_e;
  r.raw.residual = ms_e;
  r.raw.seed = r.seed_within_target.df > 0.0 ? (r.seed_within_target.ms - ms_e) / dn : 0.0;
  r.raw.target = r.target.df > 0.0 ? (r.target.ms - ref) / (db * dn) : 0.0;
  r.clipped = clip(r.raw);
  r.share = shares(r.clipped);
  return r;
}

OneWayResult one_way_anova(const std::vector<std::vector<double>>& groups) {
  OneWayResult r;
  std::vector<double> all, means;
  std::vector<double> sizes;
  double ss_w = 0.0;
  for (const auto& g : groups) {
    if (g.empty()) continue;
    const double m = mean(g);
    for (double v : g) ss_w += (v - m) * (v - m);
    means.push_back(m);
    sizes.push_back(static_cast<double>(g.size()));
    all.insert(all.end(), g.begin(), g.end());
  }
  if (means.size() != groups.size()) add_note(r.notes, "empty groups ignored");
  r.groups = means.size();
  r.total_n = all.size();
  if (all.empty()) {
    add_note(r.notes, "no data");
    return r;
  }
  const double grand = mean(all);
  r.grand_mean = grand;
  double ss_b = 0.0;
  for (std::size_t g = 0; g < means.size(); ++g) ss_b += sizes[g] * (means[g] - grand) * (means[g] - grand);
  const double N = static_cast<double>(all.size()), G = static_cast<double>(means.size());
  r.between = term(ss_b, G - 1.0);
  r.within = term(ss_w, N - G);
  if (means.size() < 2) add_note(r.notes, "one group: no between-group effect to test");
  if (N - G <= 0.0) add_note(r.notes, "one value per group: no within-group error term");
  f_test(r.between.ms, r.between.df, r.within.ms, r.within.df, "F", r.f, r.p, r.notes);
  double sum_sq = 0.0;
  for (double s : sizes) sum_sq += s * s;
  const double ms_w = r.within.df > 0.0 ? r.within.ms : 0.0;
  if (r.between.df > 0.0) {
    const double n0 = (N - sum_sq / N) / (G - 1.0);
    r.raw.target = (r.between.ms - ms_w) / n0;
  }
  r.raw.residual = ms_w;
  r.clipped = clip(r.raw);
  r.share = shares(r.clipped);
  return r;
}

ReplicateVariance replicate_variance(const Cube& c) {
  ReplicateVariance out;
  out.a = c.a;
  out.b = c.b;
  out.n = c.n;
  if (!c.valid()) return out;
  const Cells cells = cells_of(c);
  const double dn1 = static_cast<double>(c.n - 1);
  out.cell_variance.resize(c.a * c.b);
  out.target_variance.assign(c.a, 0.0);
  double pooled = 0.0;
  for (std::size_t i = 0; i < c.a; ++i) {
    double ss_i = 0.0;
    for (std::size_t j = 0; j < c.b; ++j) {
      const std::size_t cell = i * c.b + j;
      const double v = c.n >= 2 ? cells.ss_within[cell] / dn1 : 0.0;
      out.cell_variance[cell] = v;
      out.max_cell = std::max(out.max_cell, v);
      ss_i += cells.ss_within[cell];
      bool identical = true;
      for (std::size_t k = 1; k < c.n; ++k) {
        const double x0 = c.at(i, j, 0), xk = c.at(i, j, k);
        if (std::memcmp(&x0, &xk, sizeof(double)) != 0) identical = false;
      }
      if (identical) ++out.identical_cells;
    }
    out.target_variance[i] = c.n >= 2 ? ss_i / (static_cast<double>(c.b) * dn1) : 0.0;
    pooled += ss_i;
  }
  out.pooled = c.n >= 2 ? pooled / (static_cast<double>(c.a * c.b) * dn1) : 0.0;
  return out;
}

ComparisonKind classify_comparison(const TargetDescription& x, const TargetDescription& y) {
  const bool hw = x.hardware != y.hardware;
  const bool impl = x.implementation != y.implementation;
  if (hw && impl) return ComparisonKind::kBoth;
  if (hw) return ComparisonKind::kHardwareOnly;
  if (impl) return ComparisonKind::kImplementationOnly;
  return ComparisonKind::kNeither;
}

std::string attributable_label(const TargetDescription& x, const TargetDescription& y) {
  switch (classify_comparison(x, y)) {
    case ComparisonKind::kHardwareOnly: return "hardware";
    case ComparisonKind::kImplementationOnly: return "implementation";
    case ComparisonKind::kBoth: return "confounded (hardware and implementation change together)";
    case ComparisonKind::kNeither: return "none (identical targets: run-to-run variation only)";
  }
  return "confounded (hardware and implementation change together)";
}

const char* comparison_kind_name(ComparisonKind k) {
  switch (k) {
    case ComparisonKind::kHardwareOnly: return "hardware-only";
    case ComparisonKind::kImplementationOnly: return "implementation-only";
    case ComparisonKind::kBoth: return "both";
    case ComparisonKind::kNeither: return "neither";
  }
  return "both";
}

}  // namespace detaudit
