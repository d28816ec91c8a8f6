#pragma once
// The one loop every kernel of the engine runs on: a walk over a row-major tensor in
// memory order, carrying the offsets of two broadcast operands (statistics, mask or
// parameters) along, in contiguous runs of the innermost (coalesced) axis. Kernels see
// plain offsets and increments, never multi-indices (PyTorch's TensorIterator idea).
#include <cstddef>
#include <vector>

#include "tensor/tensor.hpp"

namespace normlab {

/// Element strides of an operand over x's axes; 0 along axes the operand broadcasts over.
using Strides = std::vector<std::size_t>;

/// Row-major strides of an array of shape `s` (same rank as xs, each dim equal to xs's or
/// 1), with 0 along its dims of 1.
inline Strides broadcast_strides(const Shape& xs, const Shape& s) {
    Strides out(xs.size(), 0);
    std::size_t stride = 1;
    for (std::size_t d = s.size(); d-- > 0;) {
        out[d] = s[d] == 1 ? 0 : stride;
        stride *= s[d];
    }
    return out;
}

/// Strides of a parameter array whose shape is xs at `axes` (ascending), laid out row-major.
inline Strides param_strides(const Shape& xs, const Axes& axes) {
    Strides out(xs.size(), 0);
    std::size_t stride = 1;
    for (std::size_t i = axes.size(); i-- > 0;) {
        out[axes[i]] = stride;
        stride *= xs[axes[i]];
    }
    return out;
}

/// One contiguous run of x: elements x+k for k < n, operand A at a + k*da, B at b + k*db.
struct Run {
    std::size_t x, a, b, n, da, db;
};

/// Calls f(Run) for every run of x (shape xs, contiguous row-major) in memory order.
/// Adjacent axes are merged where both operands stay linear across them, so a LayerNorm
/// over trailing axes walks whole rows and a per-channel operand walks whole planes.
template <class F>
void walk(const Shape& xs, const Strides& sa, const Strides& sb, F&& f) {
    // Coalesce from the innermost axis outwards; size-1 axes vanish.
    std::vector<std::size_t> n, da, db;
    for (std::size_t d = xs.size(); d-- > 0;) {
        if (xs[d] == 1) continue;
        if (!n.empty() && da.back() * n.back() == sa[d] && db.back() * n.back() == sb[d]) {
            n.back() *= xs[d];
            continue;
        }
        n.push_back(xs[d]);
        da.push_back(sa[d]);
        db.push_back(sb[d]);
    }
    for (auto e : xs)
        if (e == 0) return;
    if (n.empty()) {  // a single element
        f(Run{0, 0, 0, 1, 0, 0});
        return;
    }
    // n[0] is the innermost run; odometer over the outer axes n[1..].
    const std::size_t outer = n.size() - 1;
    std::vector<std::size_t> idx(outer, 0);
    std::size_t x = 0, a = 0, b = 0;
    for (;;) {
        f(Run{x, a, b, n[0], da[0], db[0]});
        x += n[0];
        std::size_t k = 1;
        for (; k <= outer; ++k) {
            a += da[k];
            b += db[k];
            if (++idx[k - 1] < n[k]) break;
            a -= da[k] * n[k];
            b -= db[k] * n[k];
            idx[k - 1] = 0;
        }
        if (k > outer) return;
    }
}

}  // namespace normlab
