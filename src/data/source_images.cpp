// The "images" source: synthetic image batches (N, C, H, W) with per-channel mean and std,
// optionally spatially correlated so that spatial statistics behave like photographs'
// (neighbouring pixels similar) instead of i.i.d. noise.
#include <algorithm>
#include <cmath>

#include "data/random.hpp"
#include "data/source_impl.hpp"
#include "tensor/numbers.hpp"

namespace normlab {

namespace {

// torchvision's ImageNet normalisation constants (RGB scaled to [0, 1]); other channel
// counts get their average for every channel.
const double kRgbMean[3] = {0.485, 0.456, 0.406};
const double kRgbStd[3] = {0.229, 0.224, 0.225};
constexpr double kGreyMean = 0.449, kGreyStd = 0.226;

std::vector<double> channel_values(ObjectReader& r, const std::string& key, std::size_t channels,
                                   const double* rgb, double grey, bool non_negative) {
    std::vector<double> v;
    if (auto given = r.numbers(key)) {
        if (given->size() != channels)
            r.at(key).fail("expected " + count_noun(channels, "value") + " (one per channel, C = " +
                           std::to_string(channels) + "), but got " + std::to_string(given->size()));
        v = *given;
    } else {
        for (std::size_t c = 0; c < channels; ++c) v.push_back(channels == 3 ? rgb[c] : grey);
    }
    // A mean or std of inf or NaN would draw every pixel of its channel non-finite.
    for (std::size_t c = 0; c < v.size(); ++c) {
        if (non_negative && !(v[c] >= 0 && std::isfinite(v[c])))
            r.at(key).child(c).fail(key + " must be >= 0 and finite, but got " + format_number(v[c]));
        if (!std::isfinite(v[c])) r.at(key).child(c).fail(key + " must be finite, but got " + format_number(v[c]));
    }
    return v;
}

// Circular Gaussian kernel of standard deviation `sigma` pixels on a ring of n pixels,
// scaled so that the sum of squared weights is 1: filtering unit-variance white noise with
// it gives a stationary field of unit variance (periodic boundaries: no edge effects).
std::vector<double> ring_kernel(double sigma, std::size_t n) {
    std::vector<double> w(n, 0.0);
    const long long radius = static_cast<long long>(std::ceil(4 * sigma));
    for (long long k = -radius; k <= radius; ++k) {
        const auto idx = static_cast<std::size_t>(((k % static_cast<long long>(n)) + static_cast<long long>(n)) %
                                                  static_cast<long long>(n));
        w[idx] += portable_exp(-0.5 * static_cast<double>(k * k) / (sigma * sigma));
    }
    double ss = 0;
    for (double x : w) ss += x * x;
    const double norm = std::sqrt(ss);
    for (double& x : w) x /= norm;
    return w;
}

struct Tap {
    std::size_t offset;
    double weight;
};

// The nonzero weights of a ring kernel, so filtering costs O(n * taps), not O(n^2).
std::vector<Tap> taps_of(const std::vector<double>& w) {
    std::vector<Tap> taps;
    for (std::size_t k = 0; k < w.size(); ++k)
        if (w[k] != 0.0) taps.push_back({k, w[k]});
    return taps;
}

// out[i] = sum_k w[k] * in[(i + k) mod n] along one axis; `stride` is the distance between
// neighbours along that axis.
void filter_ring(double* data, std::size_t n, std::size_t stride, const std::vector<Tap>& taps,
                 std::vector<double>& scratch) {
    scratch.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
        double acc = 0;
        for (const Tap& t : taps) {
            std::size_t j = i + t.offset;
            if (j >= n) j -= n;
            acc += t.weight * data[j * stride];
        }
        scratch[i] = acc;
    }
    for (std::size_t i = 0; i < n; ++i) data[i * stride] = scratch[i];
}

}  // namespace

SourceData build_images(const std::string& name, ObjectReader& r, const DataContext& ctx) {
    const Shape shape = read_positive_shape(r, "shape");
    if (shape.size() != 4)
        r.at("shape").fail("images need a shape [N, C, H, W], but got " + format_shape(shape));
    const std::size_t n_img = shape[0], channels = shape[1], height = shape[2], width = shape[3];
    const auto mean = channel_values(r, "channel_mean", channels, kRgbMean, kGreyMean, false);
    const auto stdev = channel_values(r, "channel_std", channels, kRgbStd, kGreyStd, true);
    const double smooth = r.number("smooth", 0.0);
    if (!(smooth >= 0) || smooth > 1e6)
        r.at("smooth").fail("smooth (the correlation length in pixels) must be in [0, 1e6], but got " +
                            format_number(smooth));
    const bool clip = r.boolean("clip", false);

    Rng rng(derive_seed(ctx.seed, name));
    SourceData d;
    d.values = xt::xarray<double>::from_shape(shape);
    for (double& v : d.values) v = rng.normal();
    if (smooth > 0) {
        // The kernel is cut at 4 sigma, so a plane costs O(H W sigma) until sigma reaches
        // the image size, where the folded ring kernel becomes dense: O(H W (H + W)).
        const auto wh = taps_of(ring_kernel(smooth, height)), ww = taps_of(ring_kernel(smooth, width));
        std::vector<double> scratch;
        for (std::size_t p = 0; p < n_img * channels; ++p) {
            double* plane = d.values.data() + p * height * width;
            for (std::size_t y = 0; y < height; ++y) filter_ring(plane + y * width, width, 1, ww, scratch);
            for (std::size_t x = 0; x < width; ++x) filter_ring(plane + x, height, width, wh, scratch);
        }
    }
    for (std::size_t i = 0; i < n_img; ++i)
        for (std::size_t c = 0; c < channels; ++c) {
            double* plane = d.values.data() + (i * channels + c) * height * width;
            for (std::size_t k = 0; k < height * width; ++k) {
                double v = mean[c] + stdev[c] * plane[k];
                plane[k] = clip ? std::clamp(v, 0.0, 1.0) : v;
            }
        }
    return d;
}

}  // namespace normlab
