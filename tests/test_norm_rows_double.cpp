// The row kernel for float64 statistics that are contiguous rows (src/norm/moments_rows.hpp,
// row_moments for double): the bits of the walk's corrected two-pass (chunk_moments), which
// compute_moments took for those rows before, on every register width; rows far from 0,
// beyond float's range, with infinities, NaN, signed zeros and subnormals, lengths that do
// not fill a block of 16 lanes. And the forward's statistics over batches of many one-pass
// chunks, on one and two threads: the walk's bits too, so the chunks' rows are the ones the
// kernel was given.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <xtensor/xrandom.hpp>

#include "norm/engine.hpp"
#include "norm/lanes.hpp"
#include "norm/moments_rows.hpp"
#include "norm/strided.hpp"

using namespace normlab;

namespace {

/// Whether a and b are the same double, bit for bit (NaN payloads and signed zeros too).
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// The walk's moments of the contiguous rows of x (shape xs, statistics the trailing axes
/// from `from` on): chunk_moments over one chunk holding the whole batch, a Partial per row.
std::vector<Partial> walk_moments(const double* x, const Shape& xs, std::size_t from, bool center) {
    Shape ss = xs;
    std::size_t count = 1;
    for (std::size_t a = 0; a < xs.size(); ++a) {
        if (a >= from) ss[a] = 1;
        count *= xs[a];
    }
    const Walk w(xs, broadcast_strides(xs, ss), Strides(xs.size(), 0), count);
    std::vector<Partial> parts;
    chunk_moments(x, nullptr, w, 0, center, num_elements(ss), parts);
    return parts;
}

/// Rows of n values, one per kind: plain, far from 0, beyond float's range, constant, signed
/// zeros, subnormal, with an infinity, with both infinities, with NaN, huge (squares overflow).
xt::xarray<double> kinds(std::size_t n) {
    const double inf = std::numeric_limits<double>::infinity();
    const std::size_t k = 10;
    xt::xarray<double> v = xt::random::randn<double>({k, n});
    for (std::size_t j = 0; j < n; ++j) {
        v(1, j) = 1e4 + v(1, j);
        v(2, j) = 1e39 + 1e30 * v(2, j);
        v(3, j) = 7.25;
        v(4, j) = -0.0;
        v(5, j) = 1e-310 * v(5, j);
        v(9, j) = 1e300 * v(9, j);
    }
    v(6, n / 2) = inf;
    v(7, 0) = -inf, v(7, n - 1) = inf;
    v(8, n / 3) = std::numeric_limits<double>::quiet_NaN();
    return v;
}

}  // namespace

TEST_CASE("float64 row moments: the walk's corrected two-pass, bit for bit, on every register width") {
    xt::random::seed(81);
    for (std::size_t n : {std::size_t{2}, std::size_t{5}, std::size_t{16}, std::size_t{17}, std::size_t{64},
                          std::size_t{100}, std::size_t{768}, std::size_t{3136}}) {
        const xt::xarray<double> v = kinds(n);
        const std::size_t rows = v.shape()[0];
        for (bool center : {true, false})
            for (int width : {2, 4, 8}) {
                CAPTURE(n);
                CAPTURE(center);
                CAPTURE(width);
                set_lane_width(width);
                const std::vector<Partial> want = walk_moments(v.data(), {rows, n}, 1, center);
                std::vector<double> mean(rows), lo(rows), m2(rows);
                row_moments(v.data(), rows, n, center, RowSums{mean.data(), lo.data(), m2.data()});
                set_lane_width(0);
                REQUIRE(want.size() == rows);
                for (std::size_t r = 0; r < rows; ++r) {
                    CAPTURE(r);
                    CHECK(want[r].stat == r);
                    CHECK(same_bits(mean[r], want[r].mean));
                    CHECK(same_bits(lo[r], want[r].mean_lo));
                    CHECK(same_bits(m2[r], want[r].m2));
                }
            }
    }
}

TEST_CASE("float64 forward over many one-pass chunks: each row's statistics are the walk's") {
    xt::random::seed(82);
    struct Case {
        Shape xs;
        std::size_t from;  // the statistics: the trailing axes from here on
    };
    // Chunks of 32 Ki float64 values: (600, 64) is two, the second part full; (1000, 100) four,
    // 327 rows each; (6, 8, 2, 1000), GroupNorm-like statistics of 2000 values, three.
    const std::vector<Case> cases = {{{600, 64}, 1}, {{1000, 100}, 1}, {{6, 8, 2, 1000}, 2}};
    const unsigned saved = engine_threads();
    for (const Case& c : cases) {
        Axes reduced;
        for (std::size_t a = c.from; a < c.xs.size(); ++a) reduced.push_back(a);
        const xt::xarray<double> v = xt::random::randn<double>(c.xs) * 3.0 + 1e3;
        const Tensor x = Tensor::from_double(v, DType::float64);
        for (bool center : {true, false}) {
            const std::vector<Partial> want = walk_moments(v.data(), c.xs, c.from, center);
            for (unsigned threads : {1u, 2u}) {
                CAPTURE(format_shape(c.xs));
                CAPTURE(center);
                CAPTURE(threads);
                NormSpec spec;
                spec.reduction_axes = reduced;
                spec.center = center;
                set_engine_threads(threads);
                const ForwardResult f = forward(x, spec);
                const Moments m = compute_moments(x, reduced, center);
                set_engine_threads(saved);
                REQUIRE(f.batch.mean.size() == want.size());
                std::size_t mismatched = 0;
                for (std::size_t r = 0; r < want.size(); ++r) {
                    const double var = want[r].m2 / want[r].count;
                    const bool same = same_bits(f.batch.mean.data()[r], want[r].mean) &&
                                      same_bits(f.batch.mean_lo.data()[r], want[r].mean_lo) &&
                                      same_bits(f.batch.var.data()[r], var) &&
                                      same_bits(m.mean.data()[r], want[r].mean) &&
                                      same_bits(m.mean_lo.data()[r], want[r].mean_lo) && same_bits(m.var.data()[r], var);
                    mismatched += same ? 0 : 1;
                }
                CHECK(mismatched == 0);
            }
        }
    }
}
