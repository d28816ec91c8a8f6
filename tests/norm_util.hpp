#pragma once
// Helpers for the tests that build norms directly (src/norm/presets.hpp), without a config.
#include <random>

#include <xtensor/xarray.hpp>

#include "norm/presets.hpp"

namespace norm_test {

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

}  // namespace norm_test
