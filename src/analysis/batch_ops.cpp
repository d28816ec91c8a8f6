#include "analysis/batch_ops.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <xtensor/xbroadcast.hpp>

#include "json/text.hpp"
#include "norm/engine.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

// Row-major data: sample i of a batch is the contiguous block [i * per, (i + 1) * per).
std::size_t per_sample(const Shape& s) { return s.empty() || s[0] == 0 ? 0 : num_elements(s) / s[0]; }

Shape with_batch(Shape s, std::size_t n) {
    s[0] = n;
    return s;
}

}  // namespace

Batch with_values(const Batch& b, const xt::xarray<double>& x, DType dtype) {
    Batch out;
    out.name = b.name;
    out.source = b.source;
    out.channel_axis = b.channel_axis;
    out.x = Tensor::from_double(x, dtype);
    if (out.x.shape() == b.x.shape()) {
        out.mask = b.mask;
        out.lengths = b.lengths;
    }
    return out;
}

xt::xarray<std::uint8_t> full_mask(const Batch& b) {
    const Shape s = b.x.shape();
    if (!b.has_mask()) return xt::ones<std::uint8_t>(s);
    xt::xarray<std::uint8_t> m = xt::broadcast(b.mask, s);
    return m;
}

Batch take_samples(const Batch& b, std::size_t first, std::size_t count) {
    const Shape s = b.x.shape();
    if (first + count > s.at(0)) throw std::logic_error("take_samples: range past the batch");
    const std::size_t per = per_sample(s);
    const Shape ns = with_batch(s, count);
    const xt::xarray<double> x = b.x.to_double();
    xt::xarray<double> v = xt::xarray<double>::from_shape(ns);
    std::copy(x.data() + first * per, x.data() + (first + count) * per, v.data());
    Batch out = with_values(b, v, b.x.dtype);
    if (b.has_mask()) {
        const xt::xarray<std::uint8_t> m = full_mask(b);
        out.mask = xt::xarray<std::uint8_t>::from_shape(ns);
        std::copy(m.data() + first * per, m.data() + (first + count) * per, out.mask.data());
    }
    if (!b.lengths.empty())
        out.lengths.assign(b.lengths.begin() + static_cast<std::ptrdiff_t>(first),
                           b.lengths.begin() + static_cast<std::ptrdiff_t>(first + count));
    return out;
}

Batch concat_samples(const Batch& a, const Batch& b) {
    const Shape sa = a.x.shape(), sb = b.x.shape();
    if (sa.size() != sb.size() || !std::equal(sa.begin() + 1, sa.end(), sb.begin() + 1) ||
        a.x.dtype != b.x.dtype)
        throw std::logic_error("concat_samples: batches do not stack");
    const Shape ns = with_batch(sa, sa[0] + sb[0]);
    const xt::xarray<double> xa = a.x.to_double(), xb = b.x.to_double();
    xt::xarray<double> v = xt::xarray<double>::from_shape(ns);
    std::copy(xb.begin(), xb.end(), std::copy(xa.begin(), xa.end(), v.begin()));
    Batch out = with_values(a, v, a.x.dtype);
    if (a.has_mask() || b.has_mask()) {
        const xt::xarray<std::uint8_t> ma = full_mask(a), mb = full_mask(b);
        out.mask = xt::xarray<std::uint8_t>::from_shape(ns);
        std::copy(mb.begin(), mb.end(), std::copy(ma.begin(), ma.end(), out.mask.begin()));
    }
    if (!a.lengths.empty() && !b.lengths.empty()) {
        out.lengths = a.lengths;
        out.lengths.insert(out.lengths.end(), b.lengths.begin(), b.lengths.end());
    }
    return out;
}

ChannelMoments channel_moments(const Batch& b) {
    const Shape s = b.x.shape();
    const std::size_t ca = b.channel_axis, C = s.at(ca);
    xt::xarray<std::uint8_t> m;
    if (b.has_mask()) m = b.mask;
    Moments mo = compute_moments(b.x, complement_axes({ca}, s.size()), true, b.has_mask() ? &m : nullptr);
    ChannelMoments out;
    out.mean = xt::zeros<double>({C});
    out.std = xt::ones<double>({C});
    for (std::size_t c = 0; c < C; ++c) {
        // Keep-dims statistics are laid out in channel order (only the channel axis is > 1).
        const double mu = mo.mean.data()[c], var = mo.var.data()[c];
        if (std::isfinite(mu) && std::isfinite(var)) {
            out.mean(c) = mu;
            out.std(c) = std::sqrt(var);
        }
    }
    return out;
}

Batch gaussian_like(const Batch& b, std::size_t n, Rng& rng, DType dtype) {
    const Shape s = b.x.shape();
    const std::size_t ca = b.channel_axis, C = s.at(ca);
    const std::size_t per = per_sample(s);
    std::size_t inner = 1;
    for (std::size_t a = ca + 1; a < s.size(); ++a) inner *= s[a];
    const ChannelMoments cm = channel_moments(b);
    const Shape ns = with_batch(s, n);
    xt::xarray<double> v = xt::xarray<double>::from_shape(ns);
    xt::xarray<std::uint8_t> mask;
    const xt::xarray<std::uint8_t> src_mask = b.has_mask() ? full_mask(b) : xt::xarray<std::uint8_t>();
    if (b.has_mask()) mask = xt::xarray<std::uint8_t>::from_shape(ns);
    std::vector<std::size_t> lengths;
    for (std::size_t j = 0; j < n; ++j) {
        if (b.has_mask()) {
            const std::size_t src = static_cast<std::size_t>(rng.below(s[0]));
            std::copy(src_mask.data() + src * per, src_mask.data() + (src + 1) * per, mask.data() + j * per);
            if (!b.lengths.empty()) lengths.push_back(b.lengths[src]);
        }
        for (std::size_t k = 0; k < per; ++k) {
            const std::size_t i = j * per + k, c = (i / inner) % C;
            v.data()[i] = rng.normal(cm.mean(c), cm.std(c));
        }
    }
    Batch out = with_values(b, v, dtype);
    out.mask = b.has_mask() ? mask : xt::xarray<std::uint8_t>::from_shape(Shape{0});
    out.lengths = lengths;
    return out;
}

void require_sample_axis(const JsonLocation& loc, const std::string& analysis, const std::string& data,
                         const Shape& shape, std::size_t channel_axis) {
    if (shape.size() < 2 || channel_axis == 0)
        loc.fail(analysis + " on data " + quoted_text(data) + ": needs a batch axis 0 apart from the channel axis, "
                 "but got data of shape " + format_shape(shape) + " with channel axis " +
                 std::to_string(channel_axis));
}

}  // namespace normlab
