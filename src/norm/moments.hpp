#pragma once
// Batch moments (internal to norm/): the chunk kernel the one-pass forward shares with
// compute_moments, and the walk decisions both depend on.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "norm/engine.hpp"
#include "norm/parallel.hpp"
#include "norm/strided.hpp"

namespace normlab {

/// Moments of one statistic over one chunk: count, the mean as an unevaluated sum
/// mean + mean_lo of two doubles (about 100 bits: the low part is what rounding the mean
/// to one double would lose), and m2, the sum of squared deviations from that mean
/// (the plain sum of squares when not centring, mean 0).
struct Partial {
    std::size_t stat;
    double count, mean, mean_lo, m2;
};

/// The moments of every statistic that chunk c of walk w touches (operand A: statistics,
/// operand B: the mask, or null), appended to `out` in the order first touched. float data
/// on walks whose runs each lie in one statistic: one-pass shifted sums (moments_rows.hpp).
/// Otherwise a corrected two-pass in double while the chunk is in cache (Chan, Golub and
/// LeVeque 1983, "Algorithms for computing the sample variance", Am. Stat. 37(3)): mu =
/// sum/n, then s1 = sum(x - mu) and s2 = sum((x - mu)^2), mean = mu + s1/n and m2 = s2 -
/// s1^2/n. Sums in 16 fixed logical lanes (lanes.hpp), in a fixed order.
void chunk_moments(const float* x, const std::uint8_t* mask, const Walk& w, std::size_t c, bool center,
                   std::size_t stats, std::vector<Partial>& out);
void chunk_moments(const double* x, const std::uint8_t* mask, const Walk& w, std::size_t c, bool center,
                   std::size_t stats, std::vector<Partial>& out);

/// Elements per chunk when every statistic over `reduced` of shape xs is one contiguous
/// block of 1 < R <= kChunk elements (reduction over trailing axes: LayerNorm, RMSNorm,
/// InstanceNorm, GroupNorm in (N, C, ...)): chunks then hold whole statistics, so a chunk's
/// moments are final and its output can be written while it is in cache: the largest
/// multiple of R up to max_values (at least R). 0 otherwise.
std::size_t whole_stat_chunk(const Shape& xs, const Axes& reduced, std::size_t max_values = kWholeChunk);

/// Runs shorter than this many elements make the walk's per-run work dominate.
constexpr std::size_t kShortRun = 32;

/// The trailing reduced axes whose statistics are taken first and merged after (GroupNorm
/// with channels last: (N, H, W, G, C/G) over H, W and C/G gives per-channel moments merged
/// over C/G), so the walks run along whole channels; empty when the walk is fine as it is.
Axes short_suffix(const Shape& xs, const Axes& reduced);
/// `axes` without the ones in `drop`.
Axes without(const Axes& axes, const Axes& drop);

/// s + e == a + b exactly, |e| <= ulp(s)/2 (Knuth's TwoSum, TAOCP vol. 2, 4.2.2; needs
/// round-to-nearest and no contraction, as the module is built).
NORMLAB_INLINE inline void two_sum(double a, double b, double& s, double& e) {
    s = a + b;
    const double bb = s - a;
    e = (a - (s - bb)) + (b - bb);
}

/// The moments of one-pass shifted sums over n > 0 values about K (s1 = sum(x - K), s2 =
/// sum((x - K)^2)): mean = K + s1/n to about 100 bits (mean + mean_lo: the division's
/// remainder s1 - q n, exact as an fma, is kept, and TwoSum keeps what the additions drop),
/// m2 = s2 - s1^2/n. s2 >= s1^2/n exactly, but rounding may undercut it by an ulp: m2 is at
/// least 0 (NaN passes through). A mean that is not finite comes out NaN (the error terms
/// take inf - inf): infinite_moments gives numpy's. Chan, Golub and LeVeque 1983,
/// "Algorithms for computing the sample variance", Am. Stat. 37(3).
NORMLAB_INLINE inline void shifted_moments(double k, double s1, double s2, double n, double& mean, double& mean_lo,
                                           double& m2) {
    const double q = s1 / n;
    const double q_lo = std::fma(-q, n, s1) / n;
    double m1, e1;
    two_sum(k, q, m1, e1);
    two_sum(m1, e1 + q_lo, mean, mean_lo);
    const double v = s2 - s1 * q;
    m2 = v < 0 ? 0.0 : v;
}

/// Where the mean K + s1/n of shifted sums (K finite) is not finite, as for values of one
/// infinite sign among finite ones: sets mean to it, mean_lo to 0 and m2 to NaN, numpy's and
/// PyTorch's mean and variance, and returns true; else changes nothing. The NaN is made by
/// arithmetic (inf - inf), as NaN elsewhere in the moments is, so that the output's NaN bits
/// do not depend on which of two NaNs an instruction set's FMA passes on.
NORMLAB_INLINE inline bool infinite_moments(double k, double s1, double n, double& mean, double& mean_lo, double& m2) {
    const double m = k + s1 / n;
    if (std::isfinite(m)) return false;
    mean = m, mean_lo = 0.0, m2 = m - m;
    return true;
}

/// Whether shifted sums over n values (s1 = sum(x - K), s2 = sum((x - K)^2)) were taken about
/// a shift K more than 4 standard deviations from their mean: s1 q = n (K - mean)^2 against
/// m2 = n var. Then s2 is mostly n (K - mean)^2, its rounding and that of s1 grow with it, and
/// m2 = s2 - s1 q loses more than log2(17) bits to cancellation. Also true for sums that are
/// not finite (an infinity or NaN among the values, or an infinite shift, which makes every
/// x - K infinite or NaN), so that the callers look at those again too, at no extra cost per
/// statistic: the comparison is negated, and NaN fails it.
NORMLAB_INLINE inline bool far_shift(double s1, double s2, double n) {
    const double q = s1 / n;
    return !(s1 * q <= 16 * (s2 - s1 * q));
}

/// Merges partial moments (count pc, mean pmean + plo, sum of squared deviations pm2; the
/// plain sum of squares when not centring) into statistic j of the running arrays (Chan,
/// Golub and LeVeque 1979, "Updating formulae and a pairwise algorithm for computing sample
/// variances"):
///   n = na + nb, delta = mean_b - mean_a, mean = mean_a + delta * nb / n,
///   M2 = M2a + M2b + delta^2 * na * nb / n,
/// with the means kept as two doubles and delta * nb / n carried to about 100 bits too. The
/// first part of a statistic (count 0 so far) is taken as it is: the arrays start at zero.
/// Where either mean is not finite, the mean is the weighted sum (inf with finite means
/// stays inf, +inf with -inf gives NaN, as numpy's mean), its low part 0 and M2 NaN.
inline void merge_partial(double* count, double* mean, double* lo, double* m2, std::size_t j, double pc, double pmean,
                   double plo, double pm2, bool center) {
    const double na = count[j], n = na + pc;
    if (pc == 0) return;
    if (na == 0) {
        mean[j] = pmean;
        lo[j] = plo;
        m2[j] = pm2;
    } else if (center && !(std::isfinite(pmean) && std::isfinite(mean[j]))) {
        mean[j] = mean[j] * (na / n) + pmean * (pc / n);
        lo[j] = 0.0;
        m2[j] = mean[j] - mean[j];  // NaN by arithmetic, as infinite_moments
    } else if (center) {
        // delta = dh + dl: the high parts' difference by TwoSum, the low parts' in dl. Then
        // delta pc / n = t + t_lo, with what the product and the division drop (exact as
        // fmas), so the mean keeps its low part through every merge. Folding the low parts
        // into one rounded delta cost the mean its bits past double's: 4e-15 on a mean of
        // -99 over 18 blocks (precision test, first rows 1000 std away), 3e-16 over 2.
        double dh, dl;
        two_sum(pmean, -mean[j], dh, dl);
        dl += plo - lo[j];
        const double p = dh * pc, p_lo = std::fma(dh, pc, -p), t = p / n;
        const double t_lo = (std::fma(-t, n, p) + p_lo + dl * pc) / n;
        double s, e;
        two_sum(mean[j], t, s, e);
        two_sum(s, (lo[j] + e) + t_lo, mean[j], lo[j]);
        const double delta = dh + dl;
        m2[j] += pm2 + delta * delta * na * pc / n;
    } else {
        m2[j] += pm2;
    }
    count[j] = n;
}

/// Biased variance m2/count; count 0 (fully masked) gives NaN.
double biased_var(double m2, double count);

}  // namespace normlab
