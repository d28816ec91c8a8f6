// BatchNorm's one-pass forward over planes in (N, C, ...): a statistic's planes read once,
// with the bits of compute_moments followed by the output (the two-pass forward).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "norm/engine.hpp"
#include "norm/lanes.hpp"
#include "norm/moments_rows.hpp"
#include "norm_util.hpp"

using namespace normlab;

namespace {

// forward() on `threads` threads and lanes of `width` doubles (0: the CPU's).
ForwardResult forward_on(const Tensor& x, const NormSpec& spec, const ForwardInputs& in, unsigned threads,
                         int width) {
    const unsigned saved = engine_threads();
    set_engine_threads(threads);
    set_lane_width(width);
    ForwardResult out = forward(x, spec, in);
    set_lane_width(0);
    set_engine_threads(saved);
    return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    if (a.dtype != b.dtype || a.size() != b.size()) return false;
    if (a.dtype == DType::float64) return std::memcmp(a.f64.data(), b.f64.data(), a.size() * sizeof(double)) == 0;
    return std::memcmp(a.f32.data(), b.f32.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("BatchNorm's one-pass forward over planes has the two-pass forward's bits and compute_moments' statistics") {
    // Each case's statistics are few enough that some thread count takes the two-pass
    // forward (fewer than 4 statistics a thread): that is the reference. The one-pass
    // forward runs on 1 and 2 threads at every lane width. Outputs of 8 MiB and more are
    // streamed, with one fence per statistic; the rest are plain stores. Data 300 away from
    // 0 with a spread of 2 per channel, so that a mean or rstd off by an ulp shows.
    struct Case {
        Shape xs;
        DType dtype;
        bool center, affine;
        Compute compute;
        AffineRounding rounding;
    };
    const std::vector<Case> cases = {
        {{8, 8, 32, 32}, DType::float32, true, true, Compute::float32, AffineRounding::once},
        {{32, 16, 64, 64}, DType::float32, true, true, Compute::float32, AffineRounding::once},  // 8 MiB
        {{32, 16, 64, 64}, DType::float32, true, false, Compute::float64, AffineRounding::once},
        {{16, 16, 64, 64}, DType::float64, true, true, Compute::float32, AffineRounding::once},  // 8 MiB
        {{4, 8, 24, 24}, DType::float64, false, false, Compute::float32, AffineRounding::once},
        {{8, 8, 32, 32}, DType::float16, true, true, Compute::float32, AffineRounding::twice},
        {{3, 12, 1, 700}, DType::float32, false, true, Compute::float32, AffineRounding::once},
    };
    unsigned seed = 7;
    for (const Case& c : cases) {
        CAPTURE(format_shape(c.xs));
        CAPTURE(dtype_name(c.dtype));
        CAPTURE(c.center);
        CAPTURE(c.affine);
        NormSpec spec;
        spec.reduction_axes = {0, 2, 3};
        spec.param_axes = {1};
        spec.center = c.center;
        spec.compute = c.compute;
        spec.affine_rounding = c.rounding;
        const std::size_t C = c.xs[1];
        xt::xarray<double> v = norm_test::gaussian(c.xs, 300.0, 2.0, seed++);
        for (std::size_t i = 0; i < v.size(); ++i) v.data()[i] += static_cast<double>((i / (c.xs[2] * c.xs[3])) % C);
        const Tensor x = Tensor::from_double(v, c.dtype);
        const xt::xarray<double> w = norm_test::gaussian({C}, 1.0, 0.5, seed++), b = norm_test::gaussian({C}, 0.0, 3.0, seed++);
        ForwardInputs in;
        if (c.affine) in.weight = &w, in.bias = &b;

        const auto pl = planes_layout(c.xs, spec.reduction_axes);
        REQUIRE(pl.has_value());
        const unsigned two_pass = static_cast<unsigned>(C / 4 + 1);
        REQUIRE(planes_one_pass(*pl, 1));
        REQUIRE(planes_one_pass(*pl, 2));
        REQUIRE_FALSE(planes_one_pass(*pl, two_pass));
        const ForwardResult ref = forward_on(x, spec, in, two_pass, 0);
        const unsigned saved = engine_threads();
        set_engine_threads(1);
        const Moments m = compute_moments(x, spec.reduction_axes, spec.center);
        set_engine_threads(saved);
        CHECK(ref.batch.mean == m.mean);  // the two-pass forward is compute_moments' by construction
        for (int width : {8, 4, 2})
            for (unsigned threads : {1u, 2u}) {
                CAPTURE(width);
                CAPTURE(threads);
                const ForwardResult f = forward_on(x, spec, in, threads, width);
                CHECK(same_bits(f.y, ref.y));
                CHECK(f.batch.mean == m.mean);
                CHECK(f.batch.mean_lo == m.mean_lo);
                CHECK(f.batch.var == m.var);
                CHECK(f.batch.count == m.count);
                CHECK(f.rstd == ref.rstd);
                CHECK(f.var == ref.var);
            }
    }
}

TEST_CASE("BatchNorm's planes take the one-pass forward only up to 128 Ki values and 4 statistics a thread") {
    const auto pl = planes_layout({32, 64, 56, 56}, {0, 2, 3});  // 100352 values a statistic
    REQUIRE(pl.has_value());
    CHECK(planes_one_pass(*pl, 1));
    CHECK(planes_one_pass(*pl, 16));
    CHECK_FALSE(planes_one_pass(*pl, 17));
    CHECK_FALSE(planes_one_pass(*planes_layout({64, 64, 56, 56}, {0, 2, 3}), 1));  // 200704 values
    CHECK(planes_one_pass(*planes_layout({32, 4, 64, 64}, {0, 2, 3}), 1));        // 131072: the limit
    CHECK_FALSE(planes_one_pass(*planes_layout({32, 3, 64, 64}, {0, 2, 3}), 1));  // 3 statistics
}
