#pragma once
// Batch moments (internal to norm/): the chunk kernel the one-pass forward shares with
// compute_moments, and the walk decisions both depend on.
#include <algorithm>
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
/// multiple of R up to kWholeChunk. 0 otherwise.
std::size_t whole_stat_chunk(const Shape& xs, const Axes& reduced);

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

/// Merges partial moments (count pc, mean pmean + plo, sum of squared deviations pm2; the
/// plain sum of squares when not centring) into statistic j of the running arrays (Chan,
/// Golub and LeVeque 1979, "Updating formulae and a pairwise algorithm for computing sample
/// variances"):
///   n = na + nb, delta = mean_b - mean_a, mean = mean_a + delta * nb / n,
///   M2 = M2a + M2b + delta^2 * na * nb / n,
/// with the means kept as two doubles (mean_a's high parts are close, so their difference
/// is exact). The first part of a statistic (count 0 so far) is taken as it is: the arrays
/// start at zero.
inline void merge_partial(double* count, double* mean, double* lo, double* m2, std::size_t j, double pc, double pmean,
                   double plo, double pm2, bool center) {
    const double na = count[j], n = na + pc;
    if (pc == 0) return;
    if (na == 0) {
        mean[j] = pmean;
        lo[j] = plo;
        m2[j] = pm2;
    } else if (center) {
        const double delta = (pmean - mean[j]) + (plo - lo[j]);
        double s, e;
        two_sum(mean[j], delta * pc / n, s, e);
        two_sum(s, lo[j] + e, mean[j], lo[j]);
        m2[j] += pm2 + delta * delta * na * pc / n;
    } else {
        m2[j] += pm2;
    }
    count[j] = n;
}

/// Biased variance m2/count; count 0 (fully masked) gives NaN.
double biased_var(double m2, double count);

}  // namespace normlab
