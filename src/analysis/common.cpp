#include "analysis/common.hpp"

#include <cmath>
#include <stdexcept>

namespace normlab {

double max_abs_diff(const xt::xarray<double>& a, const xt::xarray<double>& b) {
    if (a.shape() != b.shape()) throw std::logic_error("max_abs_diff: shapes differ");
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        double d = std::fabs(a.data()[i] - b.data()[i]);
        if (std::isnan(d)) return d;
        m = std::max(m, d);
    }
    return m;
}

GroupSummary group_summary(const Tensor& y, const Resolution& res,
                           const xt::xarray<std::uint8_t>* mask) {
    // Reuse the engine's moments on the output viewed as the engine saw the input.
    Tensor yv = reshaped(y, res.view_shape);
    xt::xarray<std::uint8_t> mv;
    const bool masked = mask && mask->size() > 0;
    if (masked) mv = view_mask(*mask, res);
    Moments m = compute_moments(yv, res.spec.reduction_axes, true, masked ? &mv : nullptr);
    GroupSummary s;
    s.mean = m.mean;
    s.std = xt::sqrt(m.var);
    return s;
}

std::size_t count_nonfinite(const xt::xarray<double>& a) {
    std::size_t n = 0;
    for (double v : a) n += std::isfinite(v) ? 0 : 1;
    return n;
}

}  // namespace normlab
