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

// Statistics per block of the screen below: the exact rules run on a block only where the
// screen finds something.
constexpr std::size_t kScreenBlock = 4096;

// Whether any statistic in [b, e) may break a rule of float_path_unsafe: a branch-free
// superset of its rules. It repeats their operations (the same roundings; contraction is
// off in this module) against bounds a factor 2 tighter, and NaN fails every test, so it
// flags whatever they flag, and more (NaN statistics, constant rows with eps 0: their
// blocks take the rules, which pass them). The rules alone, with their branches, took 3
// to 7 ns a statistic (LayerNorm and RMSNorm over rows of 64, 65536 statistics: 0.20 to
// 0.46 ms, beside forwards of 0.6 to 1.5 ms); the screen, in vector instructions on the
// engine's threads, 0.2 to 0.6 ns. smax = 0 (no non-zero scale; the rules then flag no
// parameters) screens as scale 1: a block with rstd or lo * rstd near float's limits then
// takes the rules in vain.
template <bool Center>
NORMLAB_VECTOR_CLONES bool screen_block(const double* rstd, const double* mean, const double* mean_lo, std::size_t b,
                                        std::size_t e, double smin, double smax, double bmax) {
    unsigned any = 0;
    for (std::size_t i = b; i < e; ++i) {
        const double r = std::abs(rstd[i]);
        const double lo = Center ? std::abs(low_part(mean[i], mean_lo[i])) : 0.0;
        const double amax = r * smax, amin = r * smin;
        // An infinite or NaN rstd fails the first test too.
        unsigned bad = (!(amax <= kFoldMax / 2)) | ((r != 0) & (amin < 2 * kFoldMin));
        bad |= !(lo * amax + bmax <= kFoldMax / 2);
        if (Center) {
            bad |= !(std::abs(mean[i]) <= kHuge / 2);
            bad |= (lo < 2 * kFloatNormal) & (lo != 0);
        }
        any |= bad;
    }
    return any != 0;
}

}  // namespace

std::vector<std::uint8_t> float_path_unsafe(const ForwardResult& out, bool center, bool given, bool masked,
                                            const LineVector<double>& scale, const LineVector<double>& shift) {
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
    const double *rs = out.rstd.data(), *mean_v = out.mean.data(), *lo_v = out.mean_lo.data();
    // The rules themselves, on the statistics [b, e) of a block the screen found something in.
    auto exact_rules = [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) {
            const double rstd = rs[i], mean = mean_v[i];
            if (std::isnan(rstd) || std::isnan(mean)) continue;  // NaN on both paths
            if (std::isinf(rstd)) {
                if (!batch) flag(i, kWholeStatistic);
                continue;
            }
            const double lo = center ? low_part(mean, lo_v[i]) : 0.0;
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
    };
    const double s_lo = smax > 0 ? smin : 1.0, s_hi = smax > 0 ? smax : 1.0;
    const std::size_t blocks = (n + kScreenBlock - 1) / kScreenBlock;
    std::vector<char> suspect(blocks);
    parallel_chunks(blocks, [&](std::size_t c, std::size_t) {
        const std::size_t b = c * kScreenBlock, e = std::min(n, b + kScreenBlock);
        suspect[c] = center ? screen_block<true>(rs, mean_v, lo_v, b, e, s_lo, s_hi, bmax)
                            : screen_block<false>(rs, mean_v, lo_v, b, e, s_lo, s_hi, bmax);
    });
    for (std::size_t c = 0; c < blocks; ++c)
        if (suspect[c]) exact_rules(c * kScreenBlock, std::min(n, (c + 1) * kScreenBlock));
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
