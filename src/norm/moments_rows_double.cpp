// The corrected two-pass moments of float64 rows, each a whole statistic (moments_rows.hpp).
#include "norm/moments_rows.hpp"

#include <cmath>

#include "norm/lanes.hpp"

namespace normlab {

namespace {

// chunk_moments_impl's arithmetic (moments.cpp) for a statistic that is one run of n values
// with no mask, a row at a time and in three loops over the rows: every row's sum and shift
// first, then every row's deviation sums, so that no row's sums wait on the division and
// rounding of the row before.
template <int W>
NORMLAB_INLINE inline void rows_double_impl(const double* x, std::size_t rows, std::size_t n, bool center,
                                            const RowSums& out) {
    const double cnt = static_cast<double>(n);
    if (!center) {
        for (std::size_t i = 0; i < rows; ++i) {
            out.m2[i] = lane_sum<W, true>(x + i * n, n);
            out.mean[i] = out.mean_lo[i] = 0.0;
        }
        return;
    }
    // The shift about which the deviations are summed, kept in mean[i] until the last loop.
    for (std::size_t i = 0; i < rows; ++i) {
        const double mu = lane_sum<W, false>(x + i * n, n) / cnt;
        const double muf = static_cast<double>(static_cast<float>(mu));
        out.mean[i] = !std::isfinite(mu) ? 0.0 : std::isfinite(muf) ? muf : mu;
    }
    // s1 in mean_lo[i], s2 in m2[i].
    for (std::size_t i = 0; i < rows; ++i) {
        double s1 = 0, s2 = 0;
        lane_deviation_sums<W>(x + i * n, n, out.mean[i], s1, s2);
        out.mean_lo[i] = s1;
        out.m2[i] = s2;
    }
    for (std::size_t i = 0; i < rows; ++i) {
        const double k = out.mean[i], s1 = out.mean_lo[i];
        const double corr = s1 / cnt;
        double mean, lo;
        two_sum(k, corr, mean, lo);
        double m2 = out.m2[i] - s1 * corr;
        infinite_moments(k, s1, cnt, mean, lo, m2);
        out.mean[i] = mean;
        out.mean_lo[i] = lo;
        out.m2[i] = m2 < 0 ? 0.0 : m2;  // NaN passes through
    }
}

// One instance per register width, each compiled for its instruction set (as moments.cpp).
void rows_double_generic(const double* x, std::size_t rows, std::size_t n, bool center, const RowSums& out) {
    rows_double_impl<2>(x, rows, n, center, out);
}
#if NORMLAB_LANE_DISPATCH
NORMLAB_TARGET_AVX2 void rows_double_avx2(const double* x, std::size_t rows, std::size_t n, bool center,
                                          const RowSums& out) {
    rows_double_impl<4>(x, rows, n, center, out);
}
NORMLAB_TARGET_AVX512 void rows_double_avx512(const double* x, std::size_t rows, std::size_t n, bool center,
                                              const RowSums& out) {
    rows_double_impl<8>(x, rows, n, center, out);
}
#endif

}  // namespace

void row_moments(const double* x, std::size_t rows, std::size_t n, bool center, const RowSums& out) {
#if NORMLAB_LANE_DISPATCH
    const int width = active_lane_width();
    if (width == 8) return rows_double_avx512(x, rows, n, center, out);
    if (width == 4) return rows_double_avx2(x, rows, n, center, out);
#endif
    rows_double_generic(x, rows, n, center, out);
}

}  // namespace normlab
