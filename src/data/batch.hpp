#pragma once
// A named input batch with its channel axis and, for padded sequences, its padding mask.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace normlab {

/// One batch as the analyses see it (DESIGN.md "Data sources").
struct Batch {
    std::string name;           ///< key under "data" in the config
    std::string source;         ///< "gaussian", "values", "npy", ...
    Tensor x;                   ///< the values, in the run's dtype
    std::size_t channel_axis = 1;  ///< canonical axis holding channels/features
    /// Padding mask, 1 = real position: empty (shape {0}; a default xarray would be a 0-d
    /// array of size 1) when the batch has none; otherwise
    /// the rank of x with each dim equal to x's or 1 (1 at the channel axis when the mask
    /// was given without it, e.g. (B,T) for (B,T,D) is stored as (B,T,1)).
    xt::xarray<std::uint8_t> mask = xt::xarray<std::uint8_t>::from_shape(Shape{0});
    std::vector<std::size_t> lengths;  ///< sequence lengths, when the source knows them

    bool has_mask() const { return mask.size() > 0; }
    /// Fraction of mask positions that are padding (0 without a mask).
    double pad_fraction() const;
};

}  // namespace normlab
