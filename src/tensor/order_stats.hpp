#pragma once
// Order statistics of a list of doubles: the bench commands' timings, the Jacobian
// analysis' singular values.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

namespace normlab {

/// The p-quantile (0 <= p <= 1) of `sorted` (ascending), interpolated between the two
/// nearest values (numpy's default method, "linear"); NaN when empty.
inline double quantile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
    const double at = p * static_cast<double>(sorted.size() - 1);
    const std::size_t lo = static_cast<std::size_t>(at);
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (at - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

/// The median of `v` (any order); NaN when empty.
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return quantile(v, 0.5);
}

}  // namespace normlab
