// Where the float path leaves float32's range (float_range.hpp).
#include "norm/float_range.hpp"

#include <algorithm>
#include <cmath>

#include "norm/parallel.hpp"

namespace normlab {

namespace {

// x - hi cannot overflow while |hi| <= 2^100 (FLT_MAX + 2^100 rounds to FLT_MAX) or while
// |x - mean| <= 2^126. a and c stay normal, finite floats inside [2^-125, 2^127].
constexpr double kHuge = 0x1p100, kSpreadMax = 0x1p126, kFloatNormal = 0x1p-126;
constexpr double kFoldMin = 0x1p-125, kFoldMax = 0x1p127;

// The double the float path's lo stands for: what fl(mean) leaves of the mean.
double low_part(double mean, double mean_lo) { return (mean - static_cast<double>(static_cast<float>(mean))) + mean_lo; }

// Whether element (statistic s, parameter p) puts a or c outside [2^-125, 2^127].
bool parameter_out_of_range(double rstd, double lo, double scale, double shift) {
    const double a = std::abs(rstd * scale);
    if (rstd != 0 && scale != 0 && (a < kFoldMin || a > kFoldMax)) return true;
    return std::abs(lo) * a + std::abs(shift) > kFoldMax;
}

}  // namespace

std::vector<std::uint8_t> float_path_unsafe(const ForwardResult& out, bool center, bool given, bool masked,
                                            const std::vector<double>& scale, const std::vector<double>& shift) {
    double smin = INFINITY, smax = 0, bmax = 0;
    for (double s : scale)
        if (s != 0) smin = std::min(smin, std::abs(s)), smax = std::max(smax, std::abs(s));
    for (double b : shift) bmax = std::max(bmax, std::abs(b));
    const std::size_t n = out.rstd.size();
    // Batch moments where every path filled them; else judged as given statistics are.
    const bool batch = !given && out.batch.var.size() == n && out.batch.count.size() == n;
    std::vector<std::uint8_t> unsafe;  // allocated at the first flag: ordinary data has none
    auto flag = [&](std::size_t i, std::uint8_t f) {
        if (unsafe.empty()) unsafe.assign(n, kFloatSafe);
        unsafe[i] = f;
    };
    for (std::size_t i = 0; i < n; ++i) {
        const double rstd = out.rstd.data()[i], mean = out.mean.data()[i];
        if (std::isnan(rstd) || std::isnan(mean)) continue;  // NaN on both paths
        if (std::isinf(rstd)) {
            if (!batch) flag(i, kWholeStatistic);
            continue;
        }
        const double lo = center ? low_part(mean, out.mean_lo.data()[i]) : 0.0;
        if (center) {
            const bool lost = std::abs(lo) < kFloatNormal && static_cast<double>(static_cast<float>(lo)) != lo;
            const bool spread = !batch || masked ||
                                out.batch.count.data()[i] * out.batch.var.data()[i] > kSpreadMax * kSpreadMax;
            if (lost || (std::abs(mean) > kHuge && spread)) {
                flag(i, kWholeStatistic);
                continue;
            }
        }
        // The extremes of the parameters bound every element's a and c.
        if (smax > 0 && (parameter_out_of_range(rstd, lo, smax, bmax) || parameter_out_of_range(rstd, 0.0, smin, 0.0)))
            flag(i, kSomeParameters);
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
                if (unsafe[s] == kFloatSafe ||
                    (unsafe[s] == kSomeParameters &&
                     !parameter_out_of_range(rstd[s], low_part(mean[s], lo[s]), scale[p], shift[p])))
                    continue;
                y[r.x + k] = static_cast<float>(((static_cast<double>(x[r.x + k]) - mean[s]) - lo[s]) * (rstd[s] * scale[p]) +
                                                shift[p]);
            }
        });
    });
}

}  // namespace normlab
