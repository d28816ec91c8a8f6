#include "data/masks.hpp"

#include <cmath>

#include <xtensor/xbroadcast.hpp>

#include "tensor/errors.hpp"
#include "tensor/numbers.hpp"

namespace normlab {

xt::xarray<std::uint8_t> fit_mask(const xt::xarray<double>& mask, const Shape& data_shape,
                                  std::size_t channel_axis) {
    const Shape ms(mask.shape().begin(), mask.shape().end());
    const std::size_t rank = data_shape.size();
    Shape without = data_shape;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(channel_axis));
    // The mask at the data's rank: as given when it has that rank; otherwise aligned with the
    // leading axes of the shape without the channel axis, padded with 1s, and given a 1 at
    // the channel axis.
    Shape full = ms;
    if (ms.size() < rank) {
        full.resize(rank - 1, 1);
        full.insert(full.begin() + static_cast<std::ptrdiff_t>(channel_axis), 1);
    }
    bool ok = full.size() == rank;
    for (std::size_t d = 0; ok && d < rank; ++d) ok = full[d] == data_shape[d] || full[d] == 1;
    if (!ok)
        throw InputError("mask of shape " + format_shape(ms) + " does not fit data of shape " +
                         format_shape(data_shape) + " with channel axis " + std::to_string(channel_axis) +
                         ": a mask must broadcast to the data's shape without its channel axis " +
                         format_shape(without) +
                         " (the same rank, with 1 where it does not vary, or fewer axes that match the "
                         "leading ones, as a (B, T) sequence mask does), or to the data's shape " +
                         format_shape(data_shape));
    xt::xarray<std::uint8_t> m = xt::xarray<std::uint8_t>::from_shape(full);
    const double* src = mask.data();
    for (std::size_t i = 0; i < mask.size(); ++i) {
        if (src[i] != 0.0 && src[i] != 1.0)
            throw InputError("mask values must be 0 or 1 (or bool), but element " +
                             std::to_string(i) + " (row-major) is " + format_number(src[i]));
        m.data()[i] = src[i] != 0.0 ? 1 : 0;
    }
    // Expanded along every axis but the channel axis, so that each stored entry is one
    // position of the data and every user of the mask (statistics counts, row slicing,
    // resampling) sees the real positions after broadcasting, never the mask's entries.
    Shape out_shape = data_shape;
    out_shape[channel_axis] = full[channel_axis];
    return xt::broadcast(m, out_shape);
}

std::size_t sequence_axis(const Shape& data_shape, std::size_t channel_axis) {
    if (data_shape.size() != 3 || channel_axis == 0)
        throw InputError("lengths need data with a sample axis 0, one sequence axis and a "
                         "channel axis, like (B, T, D) with channel_axis -1; got shape " +
                         format_shape(data_shape) + " with channel axis " +
                         std::to_string(channel_axis));
    return channel_axis == 1 ? 2 : 1;
}

xt::xarray<std::uint8_t> mask_from_lengths(const Shape& data_shape, std::size_t channel_axis,
                                           const std::vector<std::size_t>& lengths, bool pad_left) {
    const std::size_t seq = sequence_axis(data_shape, channel_axis);
    const std::size_t batch = data_shape[0], steps = data_shape[seq];
    if (lengths.size() != batch)
        throw InputError("got " + count_noun(lengths.size(), "length") + " for a batch of " +
                         count_noun(batch, "sequence") + " (data shape " +
                         format_shape(data_shape) + ")");
    Shape ms = data_shape;
    ms[channel_axis] = 1;
    xt::xarray<std::uint8_t> mask = xt::zeros<std::uint8_t>(ms);
    for (std::size_t b = 0; b < batch; ++b) {
        if (lengths[b] > steps)
            throw InputError("length " + std::to_string(lengths[b]) + " of sequence " +
                             std::to_string(b) + " exceeds the sequence axis of size " +
                             std::to_string(steps));
        const std::size_t first = pad_left ? steps - lengths[b] : 0;
        for (std::size_t t = first; t < first + lengths[b]; ++t) {
            if (seq == 1) mask(b, t, 0) = 1;
            else mask(b, 0, t) = 1;
        }
    }
    return mask;
}

}  // namespace normlab
