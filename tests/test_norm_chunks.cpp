// The one-pass forward's chunks of whole statistics (engine.cpp, whole_stat_chunk): batches
// that span many chunks, float32 and float64, whose chunk sizes differ (256 KiB of either),
// statistics that do not divide a chunk evenly. A value depends only on its own statistic,
// so each statistic's slice normalised alone (one chunk) must give the batch's bits: a
// chunk that cut a statistic in two would finish it from part of its values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <xtensor/xrandom.hpp>

#include "norm/engine.hpp"

#include "norm_util.hpp"

using namespace normlab;

namespace {

/// Elements [first, first + count) of y, float32 or float64, as bytes.
std::vector<unsigned char> y_bytes(const Tensor& y, std::size_t first, std::size_t count) {
    const std::size_t sz = y.dtype == DType::float64 ? 8 : 4;
    const auto* p = y.dtype == DType::float64 ? reinterpret_cast<const unsigned char*>(y.f64.data())
                                              : reinterpret_cast<const unsigned char*>(y.f32.data());
    return std::vector<unsigned char>(p + first * sz, p + (first + count) * sz);
}

}  // namespace

TEST_CASE("batches over many one-pass chunks give each statistic the bits it has alone, float32 and float64") {
    xt::random::seed(71);
    struct Case {
        Shape xs;  // (outer, ...): the statistics are the trailing axes from `from` on
        std::size_t from;
    };
    // 76800 and 80000 values: three chunks of whole statistics in float64 (32 Ki values
    // each), two or three in float32 (64 Ki); rows of 768 and 1000 leave part of a chunk
    // unused; (6, 8, 2, 1000) is a GroupNorm-like statistic of 2000 values over two axes.
    const std::vector<Case> cases = {{{100, 768}, 1}, {{80, 1000}, 1}, {{6, 8, 2, 1000}, 2}};
    const norm_test::EngineSetting restore;  // failed REQUIREs included
    for (const Case& c : cases) {
        // The statistics: every index of the kept axes, in row-major order, `block` values
        // each; a statistic alone has the shape `one`.
        Axes reduced;
        std::size_t block = 1;
        for (std::size_t a = c.from; a < c.xs.size(); ++a) reduced.push_back(a), block *= c.xs[a];
        Shape one = c.xs;
        std::fill(one.begin(), one.begin() + static_cast<std::ptrdiff_t>(c.from), std::size_t{1});
        for (DType dt : {DType::float64, DType::float32})
            for (unsigned threads : {1u, 2u})
                for (bool center : {true, false}) {
                    CAPTURE(format_shape(c.xs));
                    CAPTURE(dtype_name(dt));
                    CAPTURE(threads);
                    CAPTURE(center);
                    xt::xarray<double> v = xt::random::randn<double>(c.xs) * 3.0 + 5.0;
                    const Tensor x = Tensor::from_double(v, dt);
                    NormSpec spec;
                    spec.reduction_axes = reduced;
                    spec.center = center;
                    set_engine_threads(threads);
                    const ForwardResult all = forward(x, spec);
                    const std::size_t stats = v.size() / block;
                    REQUIRE(all.rstd.size() == stats);
                    std::size_t mismatched = 0;
                    for (std::size_t s = 0; s < stats; ++s) {
                        xt::xarray<double> part = xt::xarray<double>::from_shape(one);
                        std::copy(v.data() + s * block, v.data() + (s + 1) * block, part.data());
                        const ForwardResult alone = forward(Tensor::from_double(part, dt), spec);
                        const bool same = y_bytes(alone.y, 0, block) == y_bytes(all.y, s * block, block) &&
                                          alone.mean.data()[0] == all.mean.data()[s] &&
                                          alone.rstd.data()[0] == all.rstd.data()[s];
                        mismatched += same ? 0 : 1;
                    }
                    CHECK(mismatched == 0);
                }
    }
}

TEST_CASE("streamed float32 walks and long rows: the walk's bits with and without the next chunk read ahead") {
    // Both over 8 MiB of output, so they stream, and the one-pass forward prefetches the next
    // chunk where read_ahead() says so. (8, 64, 64, 66): InstanceNorm's statistics over the
    // last two axes, 4224 values each, which leave part of each chunk unused; (520, 4100):
    // LayerNorm rows longer than the rows' pipeline takes, no multiple of the 16-float store.
    struct Case {
        Shape xs;
        std::size_t from;  // the statistics are the trailing axes from `from` on
    };
    xt::random::seed(72);
    const norm_test::EngineSetting restore;  // threads and the read-ahead's mode, failed REQUIREs included
    const std::vector<Case> cases = {{{8, 64, 64, 66}, 2}, {{520, 4100}, 1}};
    for (const Case& c : cases) {
        CAPTURE(format_shape(c.xs));
        xt::xarray<double> v = xt::random::randn<double>(c.xs) * 2.0 + 40.0;
        for (std::size_t i = 0; i < v.size(); i += 4231) v.data()[i] = -3e4;  // outliers
        const Tensor x = Tensor::from_double(v, DType::float32);
        const std::size_t params = c.xs[1];
        const xt::xarray<double> w = xt::random::randn<double>({params}) + 1.0, b = xt::random::randn<double>({params});
        const xt::xarray<std::uint8_t> ones = xt::ones<std::uint8_t>(c.xs);
        NormSpec spec;
        for (std::size_t a = c.from; a < c.xs.size(); ++a) spec.reduction_axes.push_back(a);
        spec.param_axes = {1};
        ForwardInputs plain, masked;
        plain.weight = masked.weight = &w;
        plain.bias = masked.bias = &b;
        masked.mask = &ones;  // a mask of ones: the two-pass walk's moments and output, the same bits
        set_engine_threads(1);
        const ForwardResult ref = forward(x, spec, masked);
        for (int ahead : {1, 0})  // with and without, whichever this CPU takes
            for (unsigned threads : {1u, 2u, 3u}) {
                CAPTURE(ahead);
                CAPTURE(threads);
                set_read_ahead(ahead);
                set_engine_threads(threads);
                norm_test::check_same_forward(forward(x, spec, plain), ref);
            }
    }
}
