#pragma once
// One-pass moments of float runs (internal to norm/): the chunk kernel for walks whose runs
// each lie in one statistic, the layouts of reductions over trailing axes (LayerNorm,
// RMSNorm, InstanceNorm, GroupNorm in (N, C, ...)) and BatchNorm's planes in (N, C, ...).
#include <cstdint>
#include <optional>
#include <vector>

#include "norm/moments.hpp"

namespace normlab {

/// chunk_moments for float storage (float32, float16 and bfloat16 data) when operand A's
/// stride along the runs of w is 0, so each run belongs to one statistic. One read of the
/// data, shifted by K ("shifted data", Chan, Golub and LeVeque 1983, "Algorithms for
/// computing the sample variance", Am. Stat. 37(3); Welford 1962 for the shift). In runs of
/// 128 values or more K is 0, unless the first four real values of the statistic's first run
/// in the chunk look far from 0, when it is the first of them: with K = 0, x - K is x and
/// the sums take four operations per register instead of six. Shorter runs take their first
/// real value.
///   s1 = sum(x - K), s2 = sum((x - K)^2)   in double, 16 fixed logical lanes
///   mean = K + s1/n (to about 100 bits: mean + mean_lo), m2 = s2 - s1^2/n
/// x - K is a difference of two floats, exact in double unless their exponents differ by
/// more than 28. Where K lies more than 4 standard deviations from the mean (data far from
/// 0 that did not look it, an outlier first), the statistic is summed once more about its
/// mean rounded to float, as in the corrected two-pass: then s2 <= 17 m2, and the
/// cancellation in m2 costs a few bits of double's 53, where an outlier kept as the shift
/// would cost up to a factor n. The division s1/n keeps its remainder (fma(-q, n, s1),
/// exact), so the mean has the digits of s1 to about 100 bits (mean + mean_lo).
/// Without centring (RMSNorm) K = 0 and m2 = s2, the plain sum of squares. A run's element
/// k + j of each block of 16 goes to logical lane j on every instruction set (lanes.hpp), a
/// short block is padded with K (adding exact zeros), and a masked run takes the same lanes
/// element by element, so a mask of ones gives the bits of no mask.
void chunk_moments_rows(const float* x, const std::uint8_t* mask, const Walk& w, std::size_t c, bool center,
                        std::size_t stats, std::vector<Partial>& out);

/// Where row_moments puts row i's moments: mean[i], mean_lo[i], m2[i].
struct RowSums {
    double *mean, *mean_lo, *m2;
};

/// The moments of `rows` contiguous rows of n floats at x, each row a whole statistic with
/// no mask (LayerNorm/RMSNorm over trailing axes); each row's count is n. The arithmetic of
/// chunk_moments_rows, so the same bits, without the walk's per-run bookkeeping, which
/// costs more than the sums on rows of tens of values.
void row_moments(const float* x, std::size_t rows, std::size_t n, bool center, const RowSums& out);

/// The moments of `rows` contiguous rows of n > 0 doubles at x, each row a whole statistic
/// with no mask (every reduction over trailing axes); each row's count is n. The corrected
/// two-pass of chunk_moments (moments.hpp) on each row, so the same bits, without the walk's
/// per-run bookkeeping and per-statistic scratch: float64 LayerNorm over rows of 64 spent
/// more on those than on the sums.
void row_moments(const double* x, std::size_t rows, std::size_t n, bool center, const RowSums& out);

/// x viewed as (outer, stats, plane) for a reduction over a leading block of axes (outer)
/// and a trailing block (plane, contiguous) around kept axes (stats, row-major): BatchNorm
/// in (N, C, ...), each channel N planes of H*W values. Axes of size 1 are ignored.
struct Planes {
    std::size_t outer = 1, stats = 1, plane = 1;
};

/// The Planes view of a reduction over `reduced`, for planes of kPlaneMin values or more;
/// nullopt for other layouts.
std::optional<Planes> planes_layout(const Shape& xs, const Axes& reduced);

/// Planes of fewer values take the walk: on (256, 64, 14, 14) (planes of 196) the per-plane
/// moments and merges cost 5% more than the walk's chunks; on planes of 784 and 3136 they
/// cost 5% and 14% less.
constexpr std::size_t kPlaneMin = 512;

/// Moments of a Planes reduction of float data into `mean`, `mean_lo`, `m2` and `count`
/// (statistics in row-major order; they must start at zero): each plane's by row_moments,
/// then each statistic's planes merged in outer order (merge_partial, Chan, Golub and
/// LeVeque 1979). Fixed by the shape: the same bits for any thread count and instruction
/// set.
void planes_moments(const float* x, const Planes& l, bool center, double* count, double* mean, double* mean_lo,
                    double* m2);

/// Statistic k of a Planes reduction without a mask, as compute_moments merges it: the
/// moments of each plane (o, k), merged in outer order. Float data: row_moments per plane,
/// the arithmetic of planes_moments. Double data: chunk_moments over `w`, the walk of x
/// against the statistics cut into chunks of one plane each, as compute_moments cuts float64
/// planes when planes_fit (`w` is not read for float data). The same bits as
/// compute_moments, a statistic at a time: the one-pass BatchNorm forward reads each
/// statistic's planes once.
Partial plane_stat_moments(const float* x, const Planes& l, const Walk& w, std::size_t k, bool center);
Partial plane_stat_moments(const double* x, const Planes& l, const Walk& w, std::size_t k, bool center);

/// Values per statistic up to which the forward reads BatchNorm's planes once: 128 Ki, 512
/// KiB of float32 or 1 MiB of float64, so that a statistic and the next one, read while
/// this one streams out, stay within a 2 MiB L2.
constexpr std::size_t kPlaneStatValues = 2 * kWholeChunk;

/// Whether a statistic of layout `l` holds at most kPlaneStatValues values: compute_moments
/// then cuts float64 data a plane per chunk, as the one-pass forward reads it (larger
/// planes keep chunks of kChunk values, whose two passes stay in L2). Fixed by the shape,
/// never by the thread count, so that the bits are too.
bool planes_fit(const Planes& l);

/// Whether the forward (no mask, no given statistics) takes statistics of layout `l` one at
/// a time, reading each once, on `threads` threads: planes_fit, and at least 4 statistics
/// per thread, as the statistics are what the threads share out (BatchNorm (32,3,64,64)
/// float32 on two threads, 3 statistics: 0.071 -> 0.092 ms); for float32 data (`float64`
/// false), batches under kStreamBytes alone. Else compute_moments, then the output: x read
/// twice. Either way the same bits. A float32 batch too large for the cache reads faster in
/// two passes, each one stream through memory, than a channel's planes at a time: BatchNorm
/// (32,64,56,56) on a 2-core AMD EPYC (Zen 5), five alternating runs, 2.61 -> 1.93 ms on one
/// thread and 0.91 -> 0.77 on two (a tie on the Xeon of the compare table, 2.81 against
/// 2.78); float64 keeps the one pass (4.43 ms against 5.87), as does (8,64,56,56) (0.33
/// both ways).
bool planes_one_pass(const Planes& l, std::size_t threads, bool float64);

}  // namespace normlab
