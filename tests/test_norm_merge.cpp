// merge_partial (src/norm/moments.hpp), the merge of partial moments every layout's
// statistics go through: its mean against the exact mean of the values, past double's
// precision, where the parts' means lie up to 2000 apart.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "norm/moments.hpp"

using namespace normlab;

TEST_CASE("merge_partial keeps the mean to about 100 bits through many merges") {
    // Values on a grid of 2^-12 below 2^20 in magnitude, so every sum below is exact: each
    // part's moments by shifted_moments about its first value (s1 exact), the exact mean of
    // all values from integer sums. A merge that rounded delta * nb / n and dropped the low
    // parts was off by about 2^-44 of the means' size here; the bound is 2^-62.
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> parts_of(2, 31), size_of(1, 300);
    std::uniform_real_distribution<double> centre_of(-1000.0, 1000.0), spread_of(1e-3, 30.0);
    std::normal_distribution<double> gauss;
    double worst = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        const int parts = parts_of(rng);
        double count = 0, mean = 0, lo = 0, m2 = 0, scale = 0;
        std::int64_t total = 0;  // sum of all values times 4096
        std::int64_t n_all = 0;
        for (int b = 0; b < parts; ++b) {
            const int n = size_of(rng);
            const double centre = centre_of(rng), spread = spread_of(rng);
            std::vector<double> x(static_cast<std::size_t>(n));
            for (double& v : x) {
                v = std::round((centre + spread * gauss(rng)) * 4096) / 4096;
                total += static_cast<std::int64_t>(v * 4096);
            }
            n_all += n;
            double s1 = 0, s2 = 0;
            for (double v : x) s1 += v - x[0], s2 += (v - x[0]) * (v - x[0]);
            double pm, plo, pm2;
            shifted_moments(x[0], s1, s2, n, pm, plo, pm2);
            scale = std::max(scale, std::fabs(pm));
            merge_partial(&count, &mean, &lo, &m2, 0, n, pm, plo, pm2, true);
        }
        REQUIRE(count == static_cast<double>(n_all));
        const long double exact = static_cast<long double>(total) / 4096.0L / static_cast<long double>(n_all);
        const long double err = std::fabs((static_cast<long double>(mean) - exact) + lo);
        worst = std::max(worst, static_cast<double>(err / scale));
        CHECK(err <= std::ldexp(1.0L, -62) * scale);
    }
    MESSAGE("worst error of the merged mean: " << worst << " of the largest part's mean");
}

TEST_CASE("merge_partial: the first part is taken as it is, an empty part changes nothing, NaN passes") {
    double count = 0, mean = 0, lo = 0, m2 = 0;
    merge_partial(&count, &mean, &lo, &m2, 0, 0, 5.0, 0.0, 1.0, true);  // nothing merged
    CHECK(count == 0);
    CHECK(mean == 0);
    merge_partial(&count, &mean, &lo, &m2, 0, 3, 2.5, 1e-17, 4.0, true);
    CHECK(count == 3);
    CHECK(mean == 2.5);
    CHECK(lo == 1e-17);
    CHECK(m2 == 4.0);
    merge_partial(&count, &mean, &lo, &m2, 0, 1, 2.5, 0.0, 0.0, true);  // same mean: m2 unchanged
    CHECK(count == 4);
    CHECK(mean + lo == doctest::Approx(2.5));
    CHECK(m2 == 4.0);
    merge_partial(&count, &mean, &lo, &m2, 0, 2, std::numeric_limits<double>::quiet_NaN(), 0.0, 1.0, true);
    CHECK(std::isnan(mean + lo));
}
