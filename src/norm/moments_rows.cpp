// One-pass shifted moments of float runs, each in one statistic (moments_rows.hpp).
#include "norm/moments_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "norm/lanes.hpp"
#include "norm/normalize_stream.hpp"

namespace normlab {

namespace {

// Per-thread sums, indexed by statistic; back to zero after every chunk, so one scratch
// serves all calls of a thread. `state`: 0 untouched in this chunk, 1 touched with no real
// element yet (fully masked so far), 2 shift known.
struct RowScratch {
    std::vector<double> s1, s2, count;
    std::vector<float> shift;
    std::vector<char> state;
    std::vector<std::size_t> touched;
};

RowScratch& row_scratch(std::size_t stats) {
    thread_local RowScratch s;
    if (s.s1.size() < stats) {
        for (auto* v : {&s.s1, &s.s2, &s.count}) v->resize(stats);
        s.shift.resize(stats);
        s.state.resize(stats);
    }
    return s;
}

// What a run's sums take: sum((x - k)^2) alone (no centring), sum(x) and sum(x^2) (shift 0),
// or sum(x - k) and sum((x - k)^2).
enum class Sums { squares, plain, shifted };

// One block of kDoubleLanes elements at p into the lane accumulators. With shift 0, x - 0 is
// x and s2 + x * x rounds once either way (square_step): the shifted step's bits with k = 0,
// in four operations per register instead of six.
template <int W, Sums S>
NORMLAB_INLINE inline void shifted_block(const float* p, double k, typename Lanes<W>::D* a1,
                                         typename Lanes<W>::D* a2) {
    constexpr int R = kDoubleLanes / W;
    for (int r = 0; r < R; ++r) {
        typename Lanes<W>::D d;
        load_lanes<W>(p, r, d);
        if constexpr (S == Sums::shifted) {
            plain_deviation_step(d, k, a1[r], a2[r]);
        } else {
            if constexpr (S == Sums::plain) a1[r] += d;
            square_step<W>(d, a2[r]);
        }
    }
}

// s1 += sum(x - k), s2 += sum((x - k)^2) over a contiguous run (k = 0 unless S is shifted; s1
// untouched for squares).
template <int W, Sums S>
NORMLAB_INLINE inline void shifted_sums(const float* x, std::size_t n, float k, double& s1, double& s2) {
    constexpr int R = kDoubleLanes / W;
    typename Lanes<W>::D a1[R], a2[R];
    zero_registers(a1, R);
    zero_registers(a2, R);
    const double kd = static_cast<double>(k);
    std::size_t i = 0;
    for (; i + kDoubleLanes <= n; i += kDoubleLanes) shifted_block<W, S>(x + i, kd, a1, a2);
    if (i < n) {  // the short last block, padded with k: its lanes add exact zeros
        float tail[kDoubleLanes];
        std::fill(tail, tail + kDoubleLanes, k);
        std::memcpy(tail, x + i, (n - i) * sizeof(float));
        shifted_block<W, S>(tail, kd, a1, a2);
    }
    if constexpr (S != Sums::squares) s1 += fold_registers<W>(a1);
    s2 += fold_registers<W>(a2);
}

// shifted_sums about k, taking the shift-0 sums where k is 0.
template <int W>
NORMLAB_INLINE inline void centred_sums(const float* x, std::size_t n, float k, double& s1, double& s2) {
    if (k == 0.0f) shifted_sums<W, Sums::plain>(x, n, 0.0f, s1, s2);
    else shifted_sums<W, Sums::shifted>(x, n, k, s1, s2);
}

// The same sums over the real elements of a masked run (mask m, stride dm), element k of the
// run in logical lane k % kDoubleLanes as in shifted_sums: all ones give the same bits.
NORMLAB_INLINE inline void shifted_sums_masked(const float* x, std::size_t n, const std::uint8_t* m, std::size_t dm,
                                               bool center, float k, double& s1, double& s2, double& count) {
    double l1[kDoubleLanes] = {}, l2[kDoubleLanes] = {};
    double cnt = 0;
    const double kd = center ? static_cast<double>(k) : 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        if (!m[i * dm]) continue;
        const double d = static_cast<double>(x[i]) - kd;
        l1[i % kDoubleLanes] += d;
        l2[i % kDoubleLanes] += d * d;
        cnt += 1;
    }
    if (center) s1 += fold_lanes(l1, kDoubleLanes);
    s2 += fold_lanes(l2, kDoubleLanes);
    count += cnt;
}

// Values a statistic's shift looks at: the first real values of its first run with one.
constexpr std::size_t kPilotValues = 4;
// Runs shorter than this take their first real value as the shift: on rows of 64 the pilot
// cost more than the shift 0 saved (LayerNorm (4096,16,64), one thread: 2.49 -> 2.73 ms).
constexpr std::size_t kPilotRun = 128;

// The shift of a statistic's sums from its pilot values v[0, p): 0, whose sums take four
// operations per register instead of six (shifted_block), unless the values look far from 0
// (one sign, and all more than twice their range from 0: for four normal values, a mean
// about 4 or more standard deviations from 0), where the first value is the shift, close
// to the mean; a single value is the shift. A wrong guess costs time, not bits of the
// result: a shift more than 4 standard deviations from the mean, or infinite, is summed
// again (far_shift).
NORMLAB_INLINE inline float pilot_shift(const float* v, std::size_t p) {
    if (p == 1) return v[0];
    float lo = v[0], hi = v[0];
    for (std::size_t i = 1; i < p; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
    // & not &&: one branch, which centred data mispredicts less often.
    const bool one_sign = (lo > 0) | (hi < 0);
    return one_sign & (2 * (hi - lo) < std::min(std::abs(lo), std::abs(hi))) ? v[0] : 0.0f;
}

// pilot_shift over the first kPilotValues real values of a run of n values from x (mask m of
// stride dm, all real without one), over its first real value for runs under kPilotRun; p = 0
// when it has none.
NORMLAB_INLINE inline float run_shift(const float* x, std::size_t n, const std::uint8_t* m, std::size_t dm,
                                      std::size_t& p) {
    float v[kPilotValues];
    p = 0;
    const std::size_t want = n < kPilotRun ? 1 : kPilotValues;
    for (std::size_t i = 0; i < n && p < want; ++i)
        if (!m || m[i * dm]) v[p++] = x[i];
    return p ? pilot_shift(v, p) : 0.0f;
}

// The moments of statistic a from its shifted sums (moments_rows.hpp).
// `checked`: with an infinite mean as numpy's (infinite_moments), which rows_impl's vectorised
// loop leaves out where every sum is finite.
Partial finish(std::size_t a, double n, float k, double s1, double s2, bool center, bool checked = true) {
    if (!center || n == 0) return {a, n, 0.0, 0.0, center ? 0.0 : s2};
    Partial p{a, n, 0.0, 0.0, 0.0};
    shifted_moments(static_cast<double>(k), s1, s2, n, p.mean, p.mean_lo, p.m2);
    if (checked) infinite_moments(static_cast<double>(k), s1, n, p.mean, p.mean_lo, p.m2);
    return p;
}

// Where far_shift: the shift to sum about again, the mean K + s1/n rounded to float; k itself
// where that is not finite, and 0 where neither is.
float better_shift(float k, double s1, double n) {
    const float m = static_cast<float>(static_cast<double>(k) + s1 / n);
    return std::isfinite(m) ? m : std::isfinite(k) ? k : 0.0f;
}

template <int W>
NORMLAB_INLINE inline void chunk_rows_impl(const float* x, const std::uint8_t* m, const Walk& w, std::size_t c,
                                           bool center, RowScratch& s, std::vector<Partial>& out) {
    // state 3: the statistic is summed again, about the shift set after the first walk.
    auto walk = [&](bool again) NORMLAB_INLINE {
        w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
            const float* xp = x + r.x;
            const std::size_t a = r.a;
            if (again) {
                if (s.state[a] != 3) return;
            } else if (!s.state[a]) {
                s.state[a] = 1, s.touched.push_back(a);
            }
            if (m && r.db == 0 && !m[r.b]) return;  // the whole run is padding
            const bool masked = m && r.db != 0;
            if (s.state[a] == 1) {  // the statistic's first run with a real element: the shift
                std::size_t p = 0;
                const float k = run_shift(xp, r.n, masked ? m + r.b : nullptr, r.db, p);
                if (!p) return;
                s.shift[a] = center ? k : 0.0f;
                s.state[a] = 2;
            }
            if (masked) {
                shifted_sums_masked(xp, r.n, m + r.b, r.db, center, s.shift[a], s.s1[a], s.s2[a], s.count[a]);
                return;
            }
            if (center) centred_sums<W>(xp, r.n, s.shift[a], s.s1[a], s.s2[a]);
            else shifted_sums<W, Sums::squares>(xp, r.n, 0.0f, s.s1[a], s.s2[a]);
            s.count[a] += static_cast<double>(r.n);
        });
    };
    walk(false);
    if (center) {
        // A shift more than 4 standard deviations from the mean (0 for data far from 0, an
        // outlier first) makes the sums lose more than log2(17) of double's 53 bits to
        // cancellation: those statistics are summed once more about their mean rounded to
        // float, as the corrected two-pass does (moments.cpp). A deterministic choice, so
        // every thread count and instruction set takes it alike.
        bool again = false;
        for (std::size_t a : s.touched) {
            if (s.state[a] != 2 || !far_shift(s.s1[a], s.s2[a], s.count[a])) continue;
            const float k = better_shift(s.shift[a], s.s1[a], s.count[a]);
            if (k == s.shift[a]) continue;
            s.shift[a] = k;
            s.s1[a] = s.s2[a] = s.count[a] = 0;
            s.state[a] = 3;
            again = true;
        }
        if (again) walk(true);
    }
    for (std::size_t a : s.touched) {
        out.push_back(finish(a, s.count[a], s.shift[a], s.s1[a], s.s2[a], center));
        s.s1[a] = s.s2[a] = s.count[a] = 0;
        s.state[a] = 0;
    }
    s.touched.clear();
}

// The moments of unmasked rows that are whole statistics: the steps chunk_rows_impl takes
// for each (run_shift, a second sum about the mean where far_shift, finish),
// with the per-row arithmetic after the sums run over arrays, where the compiler vectorises
// its divisions (finish's two per row, far_shift's one cost a tenth of a LayerNorm on rows
// of 64). The out arrays hold the shift, s1 and s2 until the last loop.
template <int W>
NORMLAB_INLINE inline void rows_impl(const float* x, std::size_t rows, std::size_t n, bool center, const RowSums& out) {
    const double cnt = static_cast<double>(n);
    double* __restrict k = out.mean;
    double* __restrict s1 = out.mean_lo;
    double* __restrict s2 = out.m2;
    if (!center) {
        for (std::size_t i = 0; i < rows; ++i) {
            double a = 0, b = 0;
            shifted_sums<W, Sums::squares>(x + i * n, n, 0.0f, a, b);
            k[i] = s1[i] = 0.0;
            s2[i] = b;
        }
        return;
    }
    // Rows of kPilotRun values or more take every row's shift first, then the sums. The shift
    // of a row taken just before its sums reads the row's first values ahead of the stream,
    // and the sums' branch on it waits for them: rows of 768 from memory (24 MiB, one thread
    // of a 2-core AMD EPYC, Zen 5) took 0.14-0.18 ns per element that way, 0.098 with the
    // shifts first, as fast as with no shift at all. Rows of 64 lost with it (0.17 -> 0.26):
    // their shift is their first value.
    const bool shifts_first = n >= kPilotRun;
    if (shifts_first) {
        for (std::size_t i = 0; i < rows; ++i) {
            std::size_t p = 0;
            k[i] = static_cast<double>(run_shift(x + i * n, n, nullptr, 0, p));
        }
    }
    for (std::size_t i = 0; i < rows; ++i) {
        double a = 0, b = 0;
        if (shifts_first) {
            centred_sums<W>(x + i * n, n, static_cast<float>(k[i]), a, b);
        } else {
            std::size_t p = 0;
            const float k0 = run_shift(x + i * n, n, nullptr, 0, p);
            centred_sums<W>(x + i * n, n, k0, a, b);
            k[i] = static_cast<double>(k0);
        }
        s1[i] = a;
        s2[i] = b;
    }
    thread_local std::vector<char> far;
    far.resize(rows);
    char* __restrict f = far.data();
    for (std::size_t i = 0; i < rows; ++i) f[i] = far_shift(s1[i], s2[i], cnt);
    // A row holding inf or NaN has sums that are not finite before any second sum, and still
    // after it (about 0, where its shift was infinite).
    bool nonfinite = false;
    for (std::size_t i = 0; i < rows; ++i) {
        if (!f[i]) continue;
        nonfinite = nonfinite || !std::isfinite(s1[i]);
        const float k2 = better_shift(static_cast<float>(k[i]), s1[i], cnt);
        if (static_cast<double>(k2) == k[i]) continue;
        double a = 0, b = 0;
        centred_sums<W>(x + i * n, n, k2, a, b);
        k[i] = static_cast<double>(k2);
        s1[i] = a;
        s2[i] = b;
    }
    // Two instances of one loop, so that the one without the check stays vectorised.
    auto finish_rows = [&](bool checked) NORMLAB_INLINE {
        for (std::size_t i = 0; i < rows; ++i) {
            const Partial p = finish(i, cnt, static_cast<float>(k[i]), s1[i], s2[i], true, checked);
            k[i] = p.mean;
            s1[i] = p.mean_lo;
            s2[i] = p.m2;
        }
    };
    if (nonfinite) finish_rows(true);
    else finish_rows(false);
}

// One instance per register width, each compiled for its instruction set (as moments.cpp).
void chunk_rows_generic(const float* x, const std::uint8_t* m, const Walk& w, std::size_t c, bool center,
                        std::size_t stats, std::vector<Partial>& out) {
    chunk_rows_impl<2>(x, m, w, c, center, row_scratch(stats), out);
}
#if NORMLAB_LANE_DISPATCH
NORMLAB_TARGET_AVX2 void chunk_rows_avx2(const float* x, const std::uint8_t* m, const Walk& w, std::size_t c,
                                         bool center, std::size_t stats, std::vector<Partial>& out) {
    chunk_rows_impl<4>(x, m, w, c, center, row_scratch(stats), out);
}
NORMLAB_TARGET_AVX512 void chunk_rows_avx512(const float* x, const std::uint8_t* m, const Walk& w, std::size_t c,
                                             bool center, std::size_t stats, std::vector<Partial>& out) {
    chunk_rows_impl<8>(x, m, w, c, center, row_scratch(stats), out);
}
#endif

void rows_generic(const float* x, std::size_t rows, std::size_t n, bool center, const RowSums& out) {
    rows_impl<2>(x, rows, n, center, out);
}
#if NORMLAB_LANE_DISPATCH
NORMLAB_TARGET_AVX2 void rows_avx2(const float* x, std::size_t rows, std::size_t n, bool center, const RowSums& out) {
    rows_impl<4>(x, rows, n, center, out);
}
NORMLAB_TARGET_AVX512 void rows_avx512(const float* x, std::size_t rows, std::size_t n, bool center,
                                       const RowSums& out) {
    rows_impl<8>(x, rows, n, center, out);
}
#endif

}  // namespace

void row_moments(const float* x, std::size_t rows, std::size_t n, bool center, const RowSums& out) {
#if NORMLAB_LANE_DISPATCH
    const int width = active_lane_width();
    if (width == 8) return rows_avx512(x, rows, n, center, out);
    if (width == 4) return rows_avx2(x, rows, n, center, out);
#endif
    rows_generic(x, rows, n, center, out);
}

void chunk_moments_rows(const float* x, const std::uint8_t* mask, const Walk& w, std::size_t c, bool center,
                        std::size_t stats, std::vector<Partial>& out) {
#if NORMLAB_LANE_DISPATCH
    const int width = active_lane_width();
    if (width == 8) return chunk_rows_avx512(x, mask, w, c, center, stats, out);
    if (width == 4) return chunk_rows_avx2(x, mask, w, c, center, stats, out);
#endif
    chunk_rows_generic(x, mask, w, c, center, stats, out);
}

std::optional<Planes> planes_layout(const Shape& xs, const Axes& reduced) {
    const auto sized = sized_axes(xs);
    if (!sized) return std::nullopt;
    const std::vector<std::size_t>& dims = *sized;
    std::size_t i = 0;  // dims[0, i) reduced, [i, j) kept, [j, end) reduced
    while (i < dims.size() && has_axis(reduced, dims[i])) ++i;
    std::size_t j = i;
    while (j < dims.size() && !has_axis(reduced, dims[j])) ++j;
    if (i == 0 || j == i || j == dims.size()) return std::nullopt;
    Planes l;
    for (std::size_t k = 0; k < dims.size(); ++k) {
        const bool r = has_axis(reduced, dims[k]);
        if (k >= j && !r) return std::nullopt;
        (k < i ? l.outer : k < j ? l.stats : l.plane) *= xs[dims[k]];
    }
    if (l.plane < kPlaneMin) return std::nullopt;
    return l;
}

void planes_moments(const float* x, const Planes& l, bool center, double* count, double* mean, double* mean_lo,
                    double* m2) {
    const std::size_t rows = l.outer * l.stats, n = l.plane;
    std::vector<double> fine(3 * rows);  // each plane's mean, mean_lo and m2
    double *pm = fine.data(), *plo = pm + rows, *pm2 = plo + rows;
    parallel_rows(rows, n, [&](std::size_t f, std::size_t m) {
        row_moments(x + f * n, m, n, center, RowSums{pm + f, plo + f, pm2 + f});
    });
    const double pc = static_cast<double>(n);
    parallel_chunks(l.stats, [&](std::size_t k, std::size_t) {
        for (std::size_t o = 0; o < l.outer; ++o) {
            const std::size_t p = o * l.stats + k;
            merge_partial(count, mean, mean_lo, m2, k, pc, pm[p], plo[p], pm2[p], center);
        }
    });
}

Partial plane_stat_moments(const float* x, const Planes& l, const Walk&, std::size_t k, bool center) {
    double count = 0, mean = 0, lo = 0, m2 = 0, pm, plo, pm2;
    const double pc = static_cast<double>(l.plane);
    for (std::size_t o = 0; o < l.outer; ++o) {
        row_moments(x + (o * l.stats + k) * l.plane, 1, l.plane, center, RowSums{&pm, &plo, &pm2});
        merge_partial(&count, &mean, &lo, &m2, 0, pc, pm, plo, pm2, center);
    }
    return {k, count, mean, lo, m2};
}

Partial plane_stat_moments(const double* x, const Planes& l, const Walk& w, std::size_t k, bool center) {
    thread_local std::vector<Partial> parts;
    double count = 0, mean = 0, lo = 0, m2 = 0;
    for (std::size_t o = 0; o < l.outer; ++o) {
        parts.clear();
        chunk_moments(x, nullptr, w, o * l.stats + k, center, l.stats, parts);
        for (const Partial& p : parts)
            merge_partial(&count, &mean, &lo, &m2, 0, p.count, p.mean, p.mean_lo, p.m2, center);
    }
    return {k, count, mean, lo, m2};
}

bool planes_fit(const Planes& l) { return l.outer * l.plane <= kPlaneStatValues; }

bool planes_one_pass(const Planes& l, std::size_t threads, bool float64) {
    const bool fits = l.outer * l.stats * l.plane * sizeof(float) < kStreamBytes;
    return planes_fit(l) && l.stats >= 4 * threads && (float64 || fits);
}

}  // namespace normlab
