#pragma once
// The float path's arithmetic on a run whose statistic is fixed (internal to norm/): shared
// by the chunk kernel (normalize.cpp) and its streaming variant (normalize_stream.cpp), so
// both give the same bits. The formula and its error bound: normalize.hpp.
#include <cmath>
#include <cstddef>

#include "norm/normalize.hpp"

namespace normlab {

/// The mean m + ml as two floats: hi = fl(m) and lo = fl((m - hi) + ml), what hi leaves
/// (m - hi is exact in double).
struct MeanParts {
    float hi, lo;
};
NORMLAB_INLINE inline MeanParts split_mean(double m, double ml) {
    const float hi = static_cast<float>(m);
    return {hi, static_cast<float>((m - static_cast<double>(hi)) + ml)};
}
/// Whether hi and lo are both +0 (no centring): then fma(x - hi, a, c) is fma(x, a, b) with
/// c = b, bit for bit. A -0 would turn x = -0 into +0, so it does not count.
NORMLAB_INLINE inline bool positive_zero(MeanParts m) {
    return m.hi == 0 && m.lo == 0 && !std::signbit(m.hi) && !std::signbit(m.lo);
}
/// a = rstd * scale, folded in double and rounded once.
NORMLAB_INLINE inline float fold(double rstd, double scale) { return static_cast<float>(rstd * scale); }
/// c = fma(-lo, a, b): b - lo * a rounded once; b itself when lo is 0, so that the sign of a
/// zero does not depend on the sign of a.
NORMLAB_INLINE inline float offset(float lo, float a, float b) { return lo == 0 ? b : std::fma(-lo, a, b); }

/// fma(x - hi, a, c), with a and c one value for the run or one per element: the compiler
/// vectorises each form (into FMA instructions in the versions that have them). With one a
/// and the mean +0 (uncentred: RMSNorm) the subtraction is left out, the same bits.
NORMLAB_INLINE inline void normalize_run_f32(const float* xp, float* yp, std::size_t n, MeanParts m, float a,
                                             float c) {
    if (positive_zero(m)) {
        for (std::size_t k = 0; k < n; ++k) yp[k] = std::fma(xp[k], a, c);
        return;
    }
    const float hi = m.hi;
    for (std::size_t k = 0; k < n; ++k) yp[k] = std::fma(xp[k] - hi, a, c);
}
NORMLAB_INLINE inline void normalize_run_f32(const float* xp, float* yp, std::size_t n, float hi, const float* a,
                                             const float* c) {
    for (std::size_t k = 0; k < n; ++k) yp[k] = std::fma(xp[k] - hi, a[k], c[k]);
}

/// Whether a and c are one value along run r: its parameters do not step along it (planes,
/// one parameter per row) or neither a weight nor a bias is given.
NORMLAB_INLINE inline bool fixed_params(const Run& r, const NormalizeArgs& args) {
    return r.db == 0 || (args.uniform_scale && args.uniform_shift);
}

/// y at yp for the run r of x at xp whose statistic is fixed (r.da == 0). `a_buf` and
/// `c_buf` hold r.n floats, for parameters that neither stay fixed nor step by one.
NORMLAB_INLINE inline void normalize_stat_run_f32(const float* xp, float* yp, const Run& r, const NormalizeArgs& args,
                                                  float* a_buf, float* c_buf) {
    const double* scale = args.scale;
    const float* shift = args.shift_f;
    const MeanParts m = split_mean(args.mean[r.a], args.mean_lo[r.a]);
    if (fixed_params(r, args)) {  // planes; rows without affine parameters
        const float a = fold(args.rstd[r.a], scale[r.b]);
        normalize_run_f32(xp, yp, r.n, m, a, offset(m.lo, a, shift[r.b]));
        return;
    }
    // LayerNorm/RMSNorm rows with a weight: a and c per element of the row, folded as it goes
    // (a separate folding loop into a buffer cost 15% more).
    const double rs = args.rstd[r.a];
    if (r.db == 1) {
        const double* sc = scale + r.b;
        const float* sh = shift + r.b;
        if (positive_zero(m)) {
            // Uncentred (RMSNorm): x - (+0) is x for every float, -0 and NaN included, and c
            // is b, so leaving out the subtraction gives the same bits (8% faster on rows of
            // 64).
            for (std::size_t k = 0; k < r.n; ++k) yp[k] = std::fma(xp[k], fold(rs, sc[k]), sh[k]);
            return;
        }
        const float hi = m.hi, lo = m.lo;
        for (std::size_t k = 0; k < r.n; ++k) {
            const float a = fold(rs, sc[k]);
            yp[k] = std::fma(xp[k] - hi, a, offset(lo, a, sh[k]));
        }
        return;
    }
    for (std::size_t k = 0; k < r.n; ++k) {
        const std::size_t p = r.b + k * r.db;
        a_buf[k] = fold(rs, scale[p]);
        c_buf[k] = offset(m.lo, a_buf[k], shift[p]);
    }
    normalize_run_f32(xp, yp, r.n, m.hi, a_buf, c_buf);
}

}  // namespace normlab
