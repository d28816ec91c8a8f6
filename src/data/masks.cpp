#include "data/masks.hpp"

#include <cmath>

#include "tensor/errors.hpp"

namespace normlab {

xt::xarray<std::uint8_t> fit_mask(const xt::xarray<double>& mask, const Shape& data_shape,
                                  std::size_t channel_axis) {
    const Shape ms(mask.shape().begin(), mask.shape().end());
    Shape without = data_shape;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(channel_axis));
    Shape stored = data_shape;
    stored[channel_axis] = 1;
    if (ms != without && ms != data_shape && ms != stored)
        throw InputError("mask of shape " + format_shape(ms) +
                         " does not fit data of shape " + format_shape(data_shape) +
                         " with channel axis " + std::to_string(channel_axis) +
                         ": expected the data's shape without its channel axis " +
                         format_shape(without) + " or the data's shape");
    Shape out_shape = ms == data_shape ? data_shape : stored;
    xt::xarray<std::uint8_t> out = xt::xarray<std::uint8_t>::from_shape(out_shape);
    const double* src = mask.data();
    for (std::size_t i = 0; i < mask.size(); ++i) {
        if (src[i] != 0.0 && src[i] != 1.0)
            throw InputError("mask values must be 0 or 1 (or bool), but element " +
                             std::to_string(i) + " (row-major) is " + std::to_string(src[i]));
        out.data()[i] = src[i] != 0.0 ? 1 : 0;
    }
    return out;
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
        throw InputError("got " + std::to_string(lengths.size()) + " lengths for a batch of " +
                         std::to_string(batch) + " sequences (data shape " +
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
