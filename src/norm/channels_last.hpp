#pragma once
// Channels-last kernels (internal to norm/): reductions whose statistics vary along the
// contiguous innermost axes (BatchNorm, InstanceNorm and GroupNorm in (N, H, W, C), BatchNorm
// over (B, T, D)). Their moments vectorise across channels, and their output is one flat
// stream with per-channel constants. engine.cpp and moments.cpp route such shapes here.
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "norm/normalize.hpp"
#include "tensor/tensor.hpp"

namespace normlab {

/// x viewed as (O, R, C): O outer groups (leading axes, none reduced), R rows (the reduced
/// axes before the channels), C channels (the trailing axes, contiguous). Statistic of
/// (o, c): o * stats + stat[c]; parameter element of c: param[c]. A channel block may end
/// in reduced axes of fewer than kShortRun elements (GroupNorm's C/G): channels that share a
/// statistic are then merged in channel order.
struct ChannelsLast {
    std::size_t outer = 1, rows = 1, channels = 1;
    std::size_t stats = 1;                  ///< statistics per outer group
    std::vector<std::size_t> stat, param;  ///< per channel
    bool per_channel = true;               ///< stat[c] == c: no merge over channels
};

/// The channels-last view of a reduction of x (shape xs) over `reduced` with parameters
/// over `params` (ascending axes), or nothing when the shape does not have that form: a
/// reduced axis among the leading ones, parameters along a reduced or leading axis, no
/// reduced axis before the channels, or channels ending in a reduced block of kShortRun
/// elements or more (the whole-statistic walk is the better fit there).
std::optional<ChannelsLast> channels_last_layout(const Shape& xs, const Axes& reduced, const Axes& params);

/// Per-statistic arrays (o * stats + s) the moments are merged into; they must start at
/// zero. m2 is the sum of squared deviations from the mean (of squares when not centring).
struct RawMoments {
    double *count, *mean, *mean_lo, *m2;
};

/// Batch moments of a channels-last reduction, in double. Rows are cut into blocks of
/// about 256 Ki elements (fixed by the shape); per block and channel, one pass of shifted
/// sums s1 = sum(x - K), s2 = sum((x - K)^2) in double with K the float-rounded mean of the
/// block's first 16 rows (Chan, Golub and LeVeque 1983, "Algorithms for computing the sample
/// variance", Am. Stat. 37(3), section 3): mean = K + s1/n kept as two doubles (TwoSum and
/// the division's remainder), m2 = s2 - s1^2/n. Blocks are merged per channel in block
/// order, then channels per statistic in channel order (merge_partial), so the bits depend
/// on neither the thread count nor the instruction set (each channel's sums are one
/// sequential chain, whatever the register width).
void channels_last_moments(const float* x, const ChannelsLast& l, bool center, const RawMoments& out);
void channels_last_moments(const double* x, const ChannelsLast& l, bool center, const RawMoments& out);

/// y over x with the statistics and parameters of `a` (indexed as ChannelsLast says), the
/// float path when f32 (float32 data only), else double arithmetic: the formulas and bits of
/// normalize_chunk_f32 and normalize_chunk, over the tensor as one stream with per-channel
/// constants. float32 and float64 data only (the half formats take the walk).
void channels_last_normalize(const float* x, float* y, const ChannelsLast& l, const NormalizeArgs& a, bool f32);
void channels_last_normalize(const double* x, double* y, const ChannelsLast& l, const NormalizeArgs& a, bool f32);

/// Whether channels_last_forward runs one outer group at a time (its moments, then its
/// output while it is still in cache): when there are enough groups to share out evenly.
bool channels_last_fuses(const ChannelsLast& l);

/// Finishes the statistics [first, first + n) once their raw moments are merged: turns
/// them into what the output needs (the NormalizeArgs' mean, mean_lo and rstd).
using FinishStats = std::function<void(std::size_t first, std::size_t n)>;

/// The forward of a channels-last reduction with batch statistics, one outer group at a
/// time: channels_last_moments of the group into `raw`, finish(group's statistics), then
/// channels_last_normalize of the group. The same bits as those two calls one after the
/// other, with the input read from memory once.
void channels_last_forward(const float* x, float* y, const ChannelsLast& l, bool center, const RawMoments& raw,
                           const NormalizeArgs& a, bool f32, const FinishStats& finish);
void channels_last_forward(const double* x, double* y, const ChannelsLast& l, bool center, const RawMoments& raw,
                           const NormalizeArgs& a, bool f32, const FinishStats& finish);

}  // namespace normlab
