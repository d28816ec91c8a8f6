#pragma once
// The double arithmetic's output of one run (internal to norm/): shared by the chunk kernel
// (normalize.cpp) and its streaming variant (normalize_stream.cpp), so both give the same
// bits. The formula and its error: normalize.hpp.
#include <cstddef>

#include "norm/normalize.hpp"

namespace normlab {

/// y at yp for the run r of x at xp, in double, rounded once to T (and, for float16 and
/// bfloat16 data in float storage, once to that format). The common layouts get loops with
/// unit or zero strides that the compiler vectorises; everything else takes the general
/// loop.
template <class T>
NORMLAB_INLINE inline void normalize_run_double(const T* xp, T* yp, const Run& r, const NormalizeArgs& args) {
    const double* mean = args.mean;
    const double* lo = args.mean_lo;
    const double* rstd = args.rstd;
    const double* scale = args.scale;
    const double* shift = args.shift;
    const DType dtype = args.dtype;
    // Half formats live in float storage; their outputs are rounded once, from double.
    if (dtype == DType::float16 || dtype == DType::bfloat16) {
        for (std::size_t k = 0; k < r.n; ++k) {
            std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
            double v = ((static_cast<double>(xp[k]) - mean[s]) - lo[s]) * (rstd[s] * scale[p]) + shift[p];
            yp[k] = static_cast<T>(round_to(dtype, v));
        }
    } else if (r.da == 0 && r.db == 0) {  // BatchNorm/InstanceNorm/GroupNorm planes
        const double mu = mean[r.a], ml = lo[r.a], a = rstd[r.a] * scale[r.b], b = shift[r.b];
        for (std::size_t k = 0; k < r.n; ++k)
            yp[k] = static_cast<T>(((static_cast<double>(xp[k]) - mu) - ml) * a + b);
    } else if (r.da == 0 && r.db == 1) {  // LayerNorm/RMSNorm rows
        const double mu = mean[r.a], ml = lo[r.a], rs = rstd[r.a];
        const double* sc = scale + r.b;
        const double* sh = shift + r.b;
        for (std::size_t k = 0; k < r.n; ++k)
            yp[k] = static_cast<T>(((static_cast<double>(xp[k]) - mu) - ml) * (rs * sc[k]) + sh[k]);
    } else if (r.da == 1 && r.db == 1) {  // BatchNorm with channels last
        const double* mu = mean + r.a;
        const double* ml = lo + r.a;
        const double* rs = rstd + r.a;
        const double* sc = scale + r.b;
        const double* sh = shift + r.b;
        for (std::size_t k = 0; k < r.n; ++k)
            yp[k] = static_cast<T>(((static_cast<double>(xp[k]) - mu[k]) - ml[k]) * (rs[k] * sc[k]) + sh[k]);
    } else {
        for (std::size_t k = 0; k < r.n; ++k) {
            std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
            yp[k] = static_cast<T>(((static_cast<double>(xp[k]) - mean[s]) - lo[s]) * (rstd[s] * scale[p]) + shift[p]);
        }
    }
}

}  // namespace normlab
