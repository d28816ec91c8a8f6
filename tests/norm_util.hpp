#pragma once
// Helpers for the tests that build norms directly (src/norm/presets.hpp), without a config.
#include <cstring>
#include <random>

#include <doctest/doctest.h>
#include <xtensor/xarray.hpp>

#include "norm/engine.hpp"
#include "norm/lanes.hpp"
#include "norm/presets.hpp"

namespace norm_test {

/// The engine's settings for one scope: the thread count (and lane width, 0 for the CPU's
/// widest) given, or those in force kept; on the way out, a failed REQUIRE's exception
/// included, the thread count in force before, the widest lanes and the CPU's own choice of
/// the rows' pipeline and of the read-ahead (set_rows_pipeline(-1), set_read_ahead(-1)),
/// so that no later test runs with a setting a failed one left behind.
struct EngineSetting {
    unsigned saved = normlab::engine_threads();
    EngineSetting() = default;
    EngineSetting(unsigned threads, int width) {
        normlab::set_engine_threads(threads);
        normlab::set_lane_width(width);
    }
    EngineSetting(const EngineSetting&) = delete;
    EngineSetting& operator=(const EngineSetting&) = delete;
    ~EngineSetting() {
        normlab::set_rows_pipeline(-1);
        normlab::set_read_ahead(-1);
        normlab::set_lane_width(0);
        normlab::set_engine_threads(saved);
    }
};

/// Parameters or running statistics given as the values `v` (ParamInit::Kind::values).
inline normlab::ParamInit values(const xt::xarray<double>& v) {
    normlab::ParamInit p;
    p.kind = normlab::ParamInit::Kind::values;
    p.values = v;
    return p;
}

/// Normal draws N(mean, std^2) of shape `s` from std::mt19937_64 seeded with `seed`: the
/// same values on every platform for one seed.
inline xt::xarray<double> gaussian(const normlab::Shape& s, double mean, double std, unsigned seed) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> n(mean, std);
    xt::xarray<double> a = xt::xarray<double>::from_shape(s);
    for (auto& v : a) v = n(gen);
    return a;
}

/// Checks (doctest CHECKs, each difference reported) that two forwards agree bit for bit:
/// y's bytes in its dtype (NaN payloads and the sign of zeros included), then the mean, its
/// low part, the variance, rstd and the batch's counts. For the engine's promise that every
/// path, thread count and register width gives the same bits.
inline void check_same_forward(const normlab::ForwardResult& got, const normlab::ForwardResult& want) {
    REQUIRE(got.y.dtype == want.y.dtype);
    REQUIRE(got.y.f32.size() == want.y.f32.size());
    REQUIRE(got.y.f64.size() == want.y.f64.size());
    CHECK(std::memcmp(got.y.f32.data(), want.y.f32.data(), want.y.f32.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(got.y.f64.data(), want.y.f64.data(), want.y.f64.size() * sizeof(double)) == 0);
    CHECK(got.mean == want.mean);
    CHECK(got.mean_lo == want.mean_lo);
    CHECK(got.var == want.var);
    CHECK(got.rstd == want.rstd);
    CHECK(got.batch.count == want.batch.count);
}

}  // namespace norm_test
