#pragma once
// Building new batches from a given one, for the analyses that change what a norm sees
// (batch-mates, batch size, padding length, scale): the values change, the channel axis
// and the padding mask travel along.
#include <cstddef>
#include <cstdint>
#include <string>

#include "json/reader.hpp"
#include "data/batch.hpp"
#include "data/random.hpp"

namespace normlab {

/// A copy of `b` with other values of the same rank (name, source and channel axis kept),
/// rounded to `dtype`. The mask and lengths are kept when the shape is unchanged and
/// dropped otherwise (the caller sets them).
Batch with_values(const Batch& b, const xt::xarray<double>& x, DType dtype);

/// b's padding mask broadcast to b's full shape (1 = real); all ones when b has none.
xt::xarray<std::uint8_t> full_mask(const Batch& b);

/// Samples [first, first + count) along axis 0, with their mask rows and lengths.
/// Requires first + count <= b's batch size (std::logic_error otherwise).
Batch take_samples(const Batch& b, std::size_t first, std::size_t count);

/// The samples of `a` followed by those of `b` along axis 0 (same dims apart from axis 0,
/// same dtype; std::logic_error otherwise). The result has a full-shape mask when either
/// has a mask (a batch without one counts as all real); lengths are kept when both have them.
Batch concat_samples(const Batch& a, const Batch& b);

/// Per-channel mean and (biased) standard deviation of b's real positions, shape (C).
/// A channel without real positions gets mean 0 and std 1.
struct ChannelMoments {
    xt::xarray<double> mean, std;
};
ChannelMoments channel_moments(const Batch& b);

/// `n` seeded samples like b's: each value drawn N(mean_c, std_c) with b's per-channel
/// moments (channel_moments), so a BatchNorm sees plausible batch-mates. When b has a
/// mask, each new sample copies the mask row (and length) of a sample of b picked by `rng`.
/// Shape: b's with axis 0 = n; values rounded to `dtype`. Draw order per sample: the pick
/// (masked batches only), then the values in row-major order.
Batch gaussian_like(const Batch& b, std::size_t n, Rng& rng, DType dtype);

/// Throws InputError at `loc` unless data `data` of `shape` has a batch axis 0 apart from
/// its channel axis (analyses that add or remove samples need one); names the analysis
/// type and the data.
void require_sample_axis(const JsonLocation& loc, const std::string& analysis, const std::string& data,
                         const Shape& shape, std::size_t channel_axis);

}  // namespace normlab
