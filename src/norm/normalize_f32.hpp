#pragma once
// The float path's arithmetic on a run whose statistic is fixed (internal to norm/): shared
// by the chunk kernel (normalize.cpp) and its streaming variant (normalize_stream.cpp), so
// both give the same bits. The formula and its error bound: normalize.hpp.
#include <cmath>
#include <cstddef>

#include "norm/normalize.hpp"

namespace normlab {

/// The mean m + ml split into three floats, each the rounding of what the previous ones
/// leave: m - hi is exact in double, and so is r - lo.
struct MeanParts {
    float hi, lo, lo2;
};
NORMLAB_INLINE inline MeanParts split_mean(double m, double ml) {
    const float hi = static_cast<float>(m);
    const double r = (m - static_cast<double>(hi)) + ml;
    const float lo = static_cast<float>(r);
    return {hi, lo, static_cast<float>(r - static_cast<double>(lo))};
}
/// Whether all three parts are +0 (no centring): then (((x - hi) - lo) - lo2) is x, bit for
/// bit. A -0 part would turn x = -0 into +0, so it does not count.
NORMLAB_INLINE inline bool positive_zero(MeanParts m) {
    return m.hi == 0 && m.lo == 0 && m.lo2 == 0 && !std::signbit(m.hi) && !std::signbit(m.lo) && !std::signbit(m.lo2);
}
/// a = rstd * scale, folded in double and rounded once.
NORMLAB_INLINE inline float fold(double rstd, double scale) { return static_cast<float>(rstd * scale); }

/// (((x - hi) - lo) - lo2) * a + b, with a and b one value for the run or one per element:
/// the compiler vectorises each form. With one a and b and the mean's parts all +0
/// (uncentred: RMSNorm) the subtractions are left out, the same bits.
NORMLAB_INLINE inline void normalize_run_f32(const float* xp, float* yp, std::size_t n, MeanParts m, float a,
                                             float b) {
    if (positive_zero(m)) {
        for (std::size_t k = 0; k < n; ++k) yp[k] = xp[k] * a + b;
        return;
    }
    for (std::size_t k = 0; k < n; ++k) yp[k] = (((xp[k] - m.hi) - m.lo) - m.lo2) * a + b;
}
NORMLAB_INLINE inline void normalize_run_f32(const float* xp, float* yp, std::size_t n, MeanParts m,
                                             const float* a, const float* b) {
    for (std::size_t k = 0; k < n; ++k) yp[k] = (((xp[k] - m.hi) - m.lo) - m.lo2) * a[k] + b[k];
}

/// y at yp for the run r of x at xp whose statistic is fixed (r.da == 0). `a_buf` and
/// `b_buf` hold r.n floats, for parameters that neither stay fixed nor step by one.
NORMLAB_INLINE inline void normalize_stat_run_f32(const float* xp, float* yp, const Run& r, const NormalizeArgs& args,
                                                  float* a_buf, float* b_buf) {
    const double* scale = args.scale;
    const float* shift = args.shift_f;
    const MeanParts m = split_mean(args.mean[r.a], args.mean_lo[r.a]);
    const bool one_a = r.db == 0 || args.uniform_scale;
    const bool one_b = r.db == 0 || args.uniform_shift;
    if (one_a && one_b) {  // planes; rows without affine parameters
        normalize_run_f32(xp, yp, r.n, m, fold(args.rstd[r.a], scale[r.b]), shift[r.b]);
        return;
    }
    // LayerNorm/RMSNorm rows with a weight: a per element of the row, folded as it goes (a
    // separate folding loop into a buffer cost 15% more).
    const double rs = args.rstd[r.a];
    if (r.db == 1) {
        const double* sc = scale + r.b;
        const float* sh = shift + r.b;
        if (positive_zero(m)) {
            // Uncentred (RMSNorm): x - (+0) is x for every float, -0 and NaN included, so
            // leaving out the three subtractions gives the same bits (8% faster on rows of 64).
            for (std::size_t k = 0; k < r.n; ++k) yp[k] = xp[k] * fold(rs, sc[k]) + sh[k];
            return;
        }
        for (std::size_t k = 0; k < r.n; ++k) yp[k] = (((xp[k] - m.hi) - m.lo) - m.lo2) * fold(rs, sc[k]) + sh[k];
        return;
    }
    for (std::size_t k = 0; k < r.n; ++k) a_buf[k] = fold(rs, scale[r.b + k * r.db]);
    for (std::size_t k = 0; k < r.n; ++k) b_buf[k] = shift[r.b + k * r.db];
    normalize_run_f32(xp, yp, r.n, m, a_buf, b_buf);
}

}  // namespace normlab
