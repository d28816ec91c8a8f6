#pragma once
// Small measurements several analyses share.
#include <cstddef>

#include "data/batch.hpp"
#include "norm/presets.hpp"

namespace normlab {

/// max |a - b| over all elements (NaN if either holds a NaN at the same place). Shapes must
/// match (std::logic_error otherwise: a programming error, not an input error).
double max_abs_diff(const xt::xarray<double>& a, const xt::xarray<double>& b);

/// Per-group mean and std (biased) of `y`, grouped as the norm's statistics are (the
/// resolution's reduction axes, GroupNorm's groups included), over real positions when a
/// mask is given. Returns arrays in the statistics shape.
struct GroupSummary {
    xt::xarray<double> mean, std;
};
GroupSummary group_summary(const Tensor& y, const Resolution& res,
                           const xt::xarray<std::uint8_t>* mask);

/// Number of non-finite (NaN or +-inf) values.
std::size_t count_nonfinite(const xt::xarray<double>& a);

}  // namespace normlab
