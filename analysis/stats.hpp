// Descriptive statistics and the distribution functions the variance analysis needs.
// Pure functions on spans of doubles; nothing here allocates state or draws random numbers.
#pragma once
#include <cstddef>
#include <optional>
#include <span>

namespace detaudit {

// Mean computed as x0 + Σ(x_i − x0)/n, so a constant sample returns its value exactly and
// deviations from it are exactly zero (the variance code relies on this). Empty input → NaN.
double mean(std::span<const double> xs);
// Sample variance with n − 1 in the denominator, from deviations about mean(). n < 2 → 0.
double sample_variance(std::span<const double> xs);
double sample_std(std::span<const double> xs);
// Median (mean of the two middle values for even n). Empty input → NaN.
double median(std::span<const double> xs);
// Median of the finite values only (NaN and infinities left out); NaN when there are none.
double finite_median(std::span<const double> xs);
// Median absolute deviation about the median, unscaled (multiply by 1.4826 for a normal σ).
double mad(std::span<const double> xs);
// Quantile by linear interpolation between order statistics (Hyndman–Fan type 7, R's default):
// h = (n − 1)q, x_(⌊h⌋) + (h − ⌊h⌋)(x_(⌊h⌋+1) − x_(⌊h⌋)). q is clamped to [0, 1]. Empty → NaN.
double quantile(std::span<const double> xs, double q);

double log_gamma(double x);
// Regularised incomplete beta I_x(a, b), a, b > 0, by the continued fraction (modified Lentz).
// x ≤ 0 → 0, x ≥ 1 → 1, NaN arguments → NaN.
double incomplete_beta(double x, double a, double b);
// Upper tail P(F_{d1,d2} ≥ f) = I_{d2/(d2 + d1 f)}(d2/2, d1/2). f ≤ 0 → 1, f = +inf → 0.
double f_upper_p(double f, double d1, double d2);
// The p quantile of Student's t with df degrees of freedom: exact closed forms for df = 1 and 2,
// otherwise the root of the upper tail I_{df/(df+t²)}(df/2, 1/2)/2 found by bisection to the last bit.
// NaN for p outside (0, 1) or df <= 0.
double student_t_quantile(double p, double df);
// The p quantile of F with (d1, d2) degrees of freedom: the root of the upper tail f_upper_p found by
// bisection to the last bit. NaN for p outside (0, 1) or a df <= 0.
double f_quantile(double p, double d1, double d2);
// The standard normal distribution function Φ(x).
double normal_cdf(double x);

// Power of a two-sided t test at level alpha whose statistic is d·√n_eff on df degrees of freedom: the
// noncentral t's P(|T'| > t_{1−α/2,df}) with noncentrality δ = d·√n_eff (noncentral_t_power). At d = 0 it is
// alpha. A paired test of n pairs: n_eff = n, df = n − 1; two groups of n1 and n2: n_eff = n1·n2/(n1 + n2),
// df = n1 + n2 − 2. d is the standardized effect (mean over its sd). NaN when df <= 0 or d is not finite.
double t_test_power(double d, double n_eff, double df, double alpha = 0.05);
// P(|T'| > crit) for T' = (Z + delta)/√(V/df), Z standard normal, V χ² on df degrees of freedom: the
// power of a two-sided t test with critical value crit against noncentrality delta. Computed as
// E_S[Φ(delta − crit·S) + Φ(−delta − crit·S)] over S = √(V/df) by Simpson's rule on 4,001 points
// (absolute error below 1e-7 for df ≥ 1). NaN for df <= 0 or a non-finite argument.
double noncentral_t_power(double delta, double df, double crit);
// The noncentrality a two-sided t test at level alpha on df degrees of freedom detects with probability
// `power`: the δ with noncentral_t_power(δ, df, t_{1−α/2,df}) = power (bisection). NaN for df <= 0 or
// alpha, power outside (0, 1).
double t_detectable_noncentrality(double df, double alpha, double power = 0.8);
// The smallest n (pairs, or runs per group when two_groups) at which t_test_power reaches `power`,
// searched up to `limit`; nullopt when d = 0, d is not finite or the limit is not enough.
std::optional<std::size_t> n_for_power(double d, bool two_groups, double power = 0.8, double alpha = 0.05,
                                       std::size_t limit = 100000);

}  // namespace detaudit
