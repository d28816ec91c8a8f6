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

// A width the CPU lacks runs its widest (active_lane_width).
using norm_test::EngineSetting;

template <class A>
bool same_bits(const A& a, const A& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(*a.data())) == 0;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    if (a.dtype != b.dtype) return false;
    return a.dtype == DType::float64 ? same_bits(a.f64, b.f64) : same_bits(a.f32, b.f32);
}

}  // namespace

TEST_CASE("BatchNorm's one-pass forward over planes has the two-pass forward's bits and compute_moments' statistics") {
    // Each case's statistics are few enough that some thread count takes the two-pass
    // forward (fewer than 4 statistics a thread): that is the reference. The one-pass
    // forward runs on 1 and 2 threads at every lane width. Outputs of 8 MiB and more are
    // streamed, with one fence per statistic (no test sees a missing fence: it rests on
    // review); the rest are plain stores. Float32 batches that large take the two passes
    // (planes_one_pass), so float32 runs up to just under 8 MiB. Data 300 away from 0 with a spread of 2 per
    // channel, so that a mean or rstd off by an ulp shows, and every fifth plane starts
    // with an outlier, the shift of that plane's sums. Layouts: (N, C, H, W); a plane
    // larger than the moments' usual chunk of 16 Ki values; two kept axes; two leading
    // reduced axes; parameters along a reduced axis (W, so the runs are rows of a plane).
    struct Case {
        Shape xs;
        Axes reduced, params;
        DType dtype;
        bool center, affine;
        Compute compute;
        AffineRounding rounding;
    };
    const Axes bn{0, 2, 3}, ch{1};
    const std::vector<Case> cases = {
        {{8, 8, 32, 32}, bn, ch, DType::float32, true, true, Compute::float32, AffineRounding::once},
        {{31, 16, 64, 64}, bn, ch, DType::float32, true, true, Compute::float32, AffineRounding::once},  // 7.75 MiB
        {{31, 16, 64, 64}, bn, ch, DType::float32, true, true, Compute::float64, AffineRounding::once},
        {{16, 16, 64, 64}, bn, ch, DType::float64, true, true, Compute::float32, AffineRounding::once},  // 8 MiB
        {{4, 8, 24, 24}, bn, ch, DType::float64, true, false, Compute::float32, AffineRounding::once},
        {{4, 8, 24, 24}, bn, ch, DType::float64, false, false, Compute::float32, AffineRounding::once},
        {{2, 8, 130, 130}, bn, ch, DType::float64, true, true, Compute::float32, AffineRounding::once},
        {{8, 8, 32, 32}, bn, ch, DType::float16, true, true, Compute::float32, AffineRounding::twice},
        {{8, 8, 32, 32}, bn, ch, DType::bfloat16, true, true, Compute::float32, AffineRounding::once},
        {{3, 12, 1, 700}, bn, ch, DType::float32, false, true, Compute::float32, AffineRounding::once},
        {{4, 4, 3, 32, 32}, {0, 3, 4}, {1, 2}, DType::float32, true, true, Compute::float32, AffineRounding::once},
        {{2, 3, 8, 32, 32}, {0, 1, 3, 4}, {2}, DType::float64, true, true, Compute::float32, AffineRounding::once},
        {{4, 8, 32, 32}, bn, {3}, DType::float32, true, true, Compute::float32, AffineRounding::once},
    };
    unsigned seed = 7;
    for (const Case& c : cases) {
        CAPTURE(format_shape(c.xs));
        CAPTURE(dtype_name(c.dtype));
        CAPTURE(c.center);
        CAPTURE(c.affine);
        NormSpec spec;
        spec.reduction_axes = c.reduced;
        spec.param_axes = c.params;
        spec.center = c.center;
        spec.compute = c.compute;
        spec.affine_rounding = c.rounding;
        const auto pl = planes_layout(c.xs, c.reduced);
        REQUIRE(pl.has_value());
        xt::xarray<double> v = norm_test::gaussian(c.xs, 300.0, 2.0, seed++);
        for (std::size_t i = 0; i < v.size(); ++i) {
            const std::size_t plane = i / pl->plane;
            v.data()[i] += static_cast<double>(plane % pl->stats);
            if (i % pl->plane == 0 && plane % 5 == 0) v.data()[i] = 1e4;
        }
        const Tensor x = Tensor::from_double(v, c.dtype);
        Shape ps;
        for (auto a : c.params) ps.push_back(c.xs[a]);
        const xt::xarray<double> w = norm_test::gaussian(ps, 1.0, 0.5, seed++);
        const xt::xarray<double> b = norm_test::gaussian(ps, 0.0, 3.0, seed++);
        ForwardInputs in;
        if (c.affine) in.weight = &w, in.bias = &b;

        const unsigned two_pass = static_cast<unsigned>(pl->stats / 4 + 1);
        const bool f64 = c.dtype == DType::float64;
        REQUIRE(planes_one_pass(*pl, 1, f64));
        REQUIRE(planes_one_pass(*pl, 2, f64));
        REQUIRE_FALSE(planes_one_pass(*pl, two_pass, f64));
        ForwardResult ref;
        Moments m;
        {
            EngineSetting two(two_pass, 0);
            ref = forward(x, spec, in);
        }
        {
            EngineSetting one(1, 0);
            m = compute_moments(x, c.reduced, c.center);
        }
        CHECK(same_bits(ref.batch.mean, m.mean));  // the two-pass forward's are compute_moments' by construction
        for (int width : {8, 4, 2})
            for (unsigned threads : {1u, 2u}) {
                CAPTURE(width);
                CAPTURE(threads);
                ForwardResult f;
                {
                    EngineSetting s(threads, width);
                    f = forward(x, spec, in);
                }
                CHECK(same_bits(f.y, ref.y));
                CHECK(same_bits(f.batch.mean, m.mean));
                CHECK(same_bits(f.batch.mean_lo, m.mean_lo));
                CHECK(same_bits(f.batch.var, m.var));
                CHECK(same_bits(f.batch.count, m.count));
                CHECK(same_bits(f.mean, ref.mean));
                CHECK(same_bits(f.mean_lo, ref.mean_lo));
                CHECK(same_bits(f.var, ref.var));
                CHECK(same_bits(f.rstd, ref.rstd));
            }
    }
}

TEST_CASE("BatchNorm's planes take the one-pass forward only up to 128 Ki values and 4 statistics a thread") {
    // Float64 at any size up to those limits; float32 only under 8 MiB (kStreamBytes).
    const auto pl = planes_layout({32, 64, 56, 56}, {0, 2, 3});  // 100352 values a statistic
    REQUIRE(pl.has_value());
    CHECK(planes_fit(*pl));
    CHECK(planes_one_pass(*pl, 1, true));
    CHECK(planes_one_pass(*pl, 16, true));
    CHECK_FALSE(planes_one_pass(*pl, 17, true));
    CHECK_FALSE(planes_one_pass(*pl, 1, false));  // 24.5 MiB of float32
    CHECK_FALSE(planes_fit(*planes_layout({64, 64, 56, 56}, {0, 2, 3})));  // 200704 values
    CHECK_FALSE(planes_one_pass(*planes_layout({64, 64, 56, 56}, {0, 2, 3}), 1, true));
    CHECK(planes_one_pass(*planes_layout({32, 4, 64, 64}, {0, 2, 3}), 1, true));        // 131072: the limit
    CHECK_FALSE(planes_one_pass(*planes_layout({32, 3, 64, 64}, {0, 2, 3}), 1, true));  // 3 statistics
    CHECK(planes_one_pass(*planes_layout({8, 64, 56, 56}, {0, 2, 3}), 1, false));       // 6.1 MiB
    CHECK_FALSE(planes_one_pass(*planes_layout({11, 64, 56, 56}, {0, 2, 3}), 1, false));  // 8.4 MiB
}

TEST_CASE("float64 BatchNorm planes too large for the one pass: compute_moments and the two-pass forward agree") {
    // (3, 2, 300, 300): 270000 values a statistic, planes of 90000 cut into the walk's
    // chunks of 16 Ki values, the same for any thread count.
    const Shape xs{3, 2, 300, 300};
    REQUIRE_FALSE(planes_fit(*planes_layout(xs, {0, 2, 3})));
    const Tensor x = Tensor::from_double(norm_test::gaussian(xs, -50.0, 3.0, 99), DType::float64);
    Moments first;
    {
        EngineSetting one(1, 0);
        first = compute_moments(x, {0, 2, 3}, true);
    }
    for (unsigned threads : {2u, 3u}) {
        EngineSetting s(threads, 0);
        const Moments m = compute_moments(x, {0, 2, 3}, true);
        CHECK(same_bits(m.mean, first.mean));
        CHECK(same_bits(m.mean_lo, first.mean_lo));
        CHECK(same_bits(m.var, first.var));
    }
    NormSpec spec;
    spec.reduction_axes = {0, 2, 3};
    const ForwardResult f = forward(x, spec, ForwardInputs{});
    CHECK(same_bits(f.batch.mean, first.mean));
    CHECK(same_bits(f.batch.var, first.var));
}
