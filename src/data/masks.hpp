#pragma once
// Padding masks (1 = real position, 0 = padding) in the layout Batch::mask documents:
// the data's rank, each dim equal to the data's or 1 (1 at the channel axis when the mask
// was given without it). DESIGN.md "Data sources".
#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "tensor/tensor.hpp"

namespace normlab {

/// Checks a loaded mask against data of shape `data_shape` with channel axis
/// `channel_axis` and returns it as uint8 in the Batch::mask layout, expanded (numpy
/// broadcasting) to the data's shape with 1 at the channel axis, or to the full shape when
/// the mask varies along the channel axis. Accepted shapes: those that broadcast to the
/// data's shape without the channel axis W ((B,T) for (B,T,D)) - the same rank as W with
/// size-1 axes where the mask does not vary, or fewer axes aligned with W's leading ones
/// (a (B,T) mask for (B,T,H,D)) - and those of the data's rank that broadcast to its shape.
/// Values must be 0 or 1 (bool masks are 0/1). Throws InputError (no location prefix;
/// callers add it) naming both shapes and the accepted ones, or the first value that is
/// not 0/1 with its index.
xt::xarray<std::uint8_t> fit_mask(const xt::xarray<double>& mask, const Shape& data_shape,
                                  std::size_t channel_axis);

/// The axis along which sequence lengths count for data of `data_shape`: the one axis
/// that is neither the sample axis 0 nor the channel axis ((B,T,D) with channel -1 -> 1;
/// (N,C,L) with channel 1 -> 2). Throws InputError unless the data has exactly one such
/// axis and the channel axis is not 0.
std::size_t sequence_axis(const Shape& data_shape, std::size_t channel_axis);

/// The padding mask of sequences with the given lengths, in the Batch::mask layout
/// (shape (B,T,1) for (B,T,D) data). Real positions come first ("right" padding) or last
/// (`pad_left`, "left" padding, as decoder-only models batch prompts). Throws InputError
/// when lengths.size() != B or a length exceeds T (naming the index and both numbers).
xt::xarray<std::uint8_t> mask_from_lengths(const Shape& data_shape, std::size_t channel_axis,
                                           const std::vector<std::size_t>& lengths, bool pad_left);

}  // namespace normlab
