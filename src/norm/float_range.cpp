// Where the float path leaves float32's range (float_range.hpp).
#include "norm/float_range.hpp"

#include <algorithm>
#include <cmath>

#include "norm/parallel.hpp"

namespace normlab {

namespace {

// The margins keep every float constant of normalize.hpp's scheme a normal float with room
// for its products: a spread of 2^-100 leaves the mean's 2^-149 floor 49 bits below it;
// x - hi cannot overflow while |hi| <= 2^100 (FLT_MAX + 2^100 rounds to FLT_MAX) or while a
// batch statistic's spread bounds |x - mean| by 2^126 (|x - mean| <= sqrt(count * var)).
constexpr double kTiny = 0x1p-100, kHuge = 0x1p100, kSpreadMax = 0x1p126;
constexpr double kFoldMin = 0x1p-125, kFoldMax = 0x1p127;

}  // namespace

std::vector<std::uint8_t> float_path_unsafe(const ForwardResult& out, bool center, bool given,
                                            const std::vector<double>& scale) {
    double smin = INFINITY, smax = 0;
    for (double s : scale)
        if (s != 0) smin = std::min(smin, std::abs(s)), smax = std::max(smax, std::abs(s));
    const std::size_t n = out.rstd.size();
    // Batch moments where every path filled them; else judged as given statistics are.
    const bool batch = !given && out.batch.var.size() == n && out.batch.count.size() == n;
    std::vector<std::uint8_t> unsafe;  // allocated at the first flag: ordinary data has none
    auto flag = [&](std::size_t i) {
        if (unsafe.empty()) unsafe.assign(n, 0);
        unsafe[i] = 1;
    };
    for (std::size_t i = 0; i < n; ++i) {
        const double rstd = out.rstd.data()[i], mean = out.mean.data()[i];
        if (std::isnan(rstd) || std::isnan(mean)) continue;  // NaN on both paths
        if (std::isinf(rstd)) {
            if (!batch) flag(i);
            continue;
        }
        bool bad = false;
        if (smax > 0 && rstd != 0) bad = rstd * smax > kFoldMax || rstd * smin < kFoldMin;
        if (center) {
            const double m = std::abs(mean);
            if (!batch) bad = bad || m > kHuge || (m != 0 && m < kTiny);
            else {
                const double var = out.batch.var.data()[i], count = out.batch.count.data()[i];
                bad = bad || (var != 0 && var < kTiny * kTiny) || (m > kHuge && count * var > kSpreadMax * kSpreadMax);
            }
        }
        if (bad) flag(i);
    }
    return unsafe;
}

void renormalize_in_double(const float* x, float* y, const Shape& xs, const Strides& sa, const Strides& sb,
                           const ForwardResult& out, const std::vector<std::uint8_t>& unsafe, const double* scale,
                           const double* shift) {
    const double *mean = out.mean.data(), *lo = out.mean_lo.data(), *rstd = out.rstd.data();
    const Walk w(xs, sa, sb, kChunk);
    parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) {
        w.chunk(c, [&](const Run& r) {
            for (std::size_t k = 0; k < r.n; ++k) {
                const std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
                if (!unsafe[s]) continue;
                y[r.x + k] = static_cast<float>(((static_cast<double>(x[r.x + k]) - mean[s]) - lo[s]) * (rstd[s] * scale[p]) +
                                                shift[p]);
            }
        });
    });
}

}  // namespace normlab
