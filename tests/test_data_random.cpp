// The seeded generator: fixed values (so a platform or compiler that computes differently is
// caught), distribution moments, and seed derivation.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "data/random.hpp"

using namespace normlab;

TEST_CASE("mt19937_64 raw bits match the value the C++ standard requires") {
    // [rand.predef]: the 10000th invocation of a default-constructed mt19937_64 gives this.
    std::mt19937_64 e;
    e.discard(9999);
    CHECK(e() == 9981545732273789042ull);
}

TEST_CASE("Rng: recorded first values for seed 42 (bit-exact on every platform)") {
    Rng rng(42);
    // Recorded from one run (GCC 12.2, x86-64); these are exact doubles written with 17
    // significant digits, so == compares the bits.
    const double expected_uniform[] = {0.75515553295453897, 0.63903139385469743, 0.7521452007480266,
                                       0.13627268363243705};
    for (double e : expected_uniform) CHECK(rng.uniform() == e);
    Rng g(42);
    const double expected_normal[] = {-1.0771745442782878, -1.2860634502166486, 1.0945198485006107,
                                      1.2616856516484893, 1.7947316657951708};
    for (double e : expected_normal) CHECK(g.normal() == e);
}

TEST_CASE("Rng: 1e5 normals have mean ~0 and std ~1 - uniforms fill 0..1") {
    Rng rng(derive_seed(7, "moments"));
    const int n = 100000;
    double sum = 0, sum2 = 0, sum3 = 0, sum4 = 0;
    for (int i = 0; i < n; ++i) {
        double z = rng.normal();
        sum += z, sum2 += z * z, sum3 += z * z * z, sum4 += z * z * z * z;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    // Standard errors: mean 1/sqrt(n) = 0.0032, variance sqrt(2/n) = 0.0045; 5 sigma bounds.
    CHECK(std::fabs(mean) < 0.016);
    CHECK(std::fabs(var - 1.0) < 0.023);
    CHECK(std::fabs(sum3 / n) < 0.04);        // skewness, se sqrt(15/n) = 0.012
    CHECK(std::fabs(sum4 / n - 3.0) < 0.16);  // kurtosis, se sqrt(96/n) = 0.031

    double umin = 1, umax = 0, usum = 0;
    for (int i = 0; i < n; ++i) {
        double u = rng.uniform();
        REQUIRE(u >= 0.0);
        REQUIRE(u < 1.0);
        umin = std::min(umin, u), umax = std::max(umax, u), usum += u;
    }
    CHECK(umin < 1e-3);
    CHECK(umax > 1 - 1e-3);
    CHECK(std::fabs(usum / n - 0.5) < 0.005);
}

TEST_CASE("Rng: normal(mean std) and the pairing of Box-Muller values") {
    Rng a(3), b(3);
    double z0 = a.normal(), z1 = a.normal();
    CHECK(b.normal(10, 2) == 10 + 2 * z0);
    CHECK(b.normal(-1, 0.5) == -1 + 0.5 * z1);
}

TEST_CASE("Rng: below and between are in range and cover it") {
    Rng rng(1);
    std::set<std::uint64_t> seen;
    for (int i = 0; i < 1000; ++i) {
        auto v = rng.below(7);
        REQUIRE(v < 7);
        seen.insert(v);
    }
    CHECK(seen.size() == 7);
    for (int i = 0; i < 1000; ++i) {
        auto v = rng.between(-3, 3);
        REQUIRE(v >= -3);
        REQUIRE(v <= 3);
    }
    CHECK(rng.between(5, 5) == 5);
}

TEST_CASE("portable_log and portable_cos_sin_2pi agree with libm to ~1e-15") {
    for (double x : {1e-300, 1e-17, 1.1102230246251565e-16, 0.001, 0.3, 0.5, 0.7071, 0.99999, 1.0}) {
        CHECK(portable_log(x) == doctest::Approx(std::log(x)).epsilon(1e-15));
    }
    CHECK(portable_log(1.0) == 0.0);
    const double two_pi = 6.283185307179586;
    for (int i = 0; i < 1000; ++i) {
        double t = i / 1000.0, c, s;
        portable_cos_sin_2pi(t, c, s);
        CHECK(std::fabs(c - std::cos(two_pi * t)) < 1e-15);
        CHECK(std::fabs(s - std::sin(two_pi * t)) < 1e-15);
    }
}

TEST_CASE("derive_seed: depends on both the base seed and the label") {
    CHECK(derive_seed(0, "x") != derive_seed(1, "x"));
    CHECK(derive_seed(0, "x") != derive_seed(0, "y"));
    CHECK(derive_seed(0, "x") == derive_seed(0, "x"));
    CHECK(fnv1a64("") == 14695981039346656037ull);
    CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);  // published FNV-1a 64 test vector
    // Recorded from one run; pins the derivation so seeds do not change silently.
    CHECK(derive_seed(0, "tokens") == 10132385470091961534ull);
}
