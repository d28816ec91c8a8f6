// Batch moments: the chunk kernel, the merge of chunks, compute_moments.
#include "norm/moments.hpp"

#include "norm/channels_last.hpp"
#include "norm/lanes.hpp"
#include "norm/moments_rows.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tensor/errors.hpp"

namespace normlab {

namespace {

// Per-thread scratch, indexed by statistic; `touched` lists the statistics a chunk used.
// Every entry is back to zero after a chunk, so one scratch serves all calls of a thread.
struct Scratch {
    std::vector<double> sum, count, dev, m2;
    std::vector<std::size_t> touched;
    std::vector<char> seen;
    // The statistics [range_a, range_a + range_n) are all touched already: channels-last
    // runs repeat the same range, and checking each of its entries per run cost as much
    // as summing them.
    std::size_t range_a = 0, range_n = 0;
    void touch(std::size_t s) {
        if (!seen[s]) seen[s] = 1, touched.push_back(s);
    }
    void touch_range(std::size_t a, std::size_t n) {
        if (a == range_a && n <= range_n) return;
        for (std::size_t k = 0; k < n; ++k) touch(a + k);
        range_a = a, range_n = n;
    }
};

// The calling thread's scratch with room for `stats` statistics (kept between calls, so
// a steady-state forward allocates nothing here).
Scratch& thread_scratch(std::size_t stats) {
    thread_local Scratch s;
    if (s.sum.size() < stats) {
        for (auto* v : {&s.sum, &s.count, &s.dev, &s.m2}) v->resize(stats);
        s.seen.resize(stats);
    }
    return s;
}

template <int W, class T>
NORMLAB_INLINE inline void chunk_moments_impl(const T* x, const std::uint8_t* m, const Walk& w, std::size_t c,
                                              bool center, Scratch& s, std::vector<Partial>& out) {
    // Pass 1: sums (sums of squares when not centring) and counts.
    w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
        const T* xp = x + r.x;
        if (r.da == 0) {
            s.touch(r.a);
            double sum = 0, cnt = 0;
            if (!m) {
                sum = center ? lane_sum<W, false>(xp, r.n) : lane_sum<W, true>(xp, r.n);
                cnt = static_cast<double>(r.n);
            } else {
                for (std::size_t k = 0; k < r.n; ++k) {
                    double v = m[r.b + k * r.db] ? static_cast<double>(xp[k]) : 0.0;
                    sum += center ? v : v * v;
                    cnt += m[r.b + k * r.db] ? 1.0 : 0.0;
                }
            }
            s.sum[r.a] += sum;
            s.count[r.a] += cnt;
        } else if (r.da == 1 && !m) {  // channels last: one statistic per element of the run
            s.touch_range(r.a, r.n);
            double* sum = s.sum.data() + r.a;
            double* cnt = s.count.data() + r.a;
            if (center) for (std::size_t k = 0; k < r.n; ++k) sum[k] += static_cast<double>(xp[k]);
            else for (std::size_t k = 0; k < r.n; ++k) sum[k] += static_cast<double>(xp[k]) * static_cast<double>(xp[k]);
            for (std::size_t k = 0; k < r.n; ++k) cnt[k] += 1.0;
        } else {
            for (std::size_t k = 0; k < r.n; ++k) {
                std::size_t a = r.a + k * r.da;
                s.touch(a);
                if (m && !m[r.b + k * r.db]) continue;
                double v = static_cast<double>(xp[k]);
                s.sum[a] += center ? v : v * v;
                s.count[a] += 1.0;
            }
        }
    });
    if (center) {
        // Pass 2 about mu = sum/n rounded to float: for float data x - mu is then a
        // difference of two floats, exact in double unless their exponents differ by more
        // than 29, so the correction s1/n restores the mean's digits even for rows whose
        // mean is near 0 next to their spread, and whatever error the sum had. float64 data
        // take the same steps, with the double mu where it lies beyond float's range, and
        // about 0 where mu is not finite (x - inf would make the mean NaN, not numpy's inf).
        for (std::size_t a : s.touched) {
            const double mu = s.count[a] > 0 ? s.sum[a] / s.count[a] : 0.0;
            const double muf = static_cast<double>(static_cast<float>(mu));
            s.sum[a] = !std::isfinite(mu) ? 0.0 : std::isfinite(muf) ? muf : mu;
        }
        w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
            const T* xp = x + r.x;
            if (r.da == 0 && !m) {
                lane_deviation_sums<W>(xp, r.n, s.sum[r.a], s.dev[r.a], s.m2[r.a]);
            } else if (r.da == 1 && !m) {
                const double* mu = s.sum.data() + r.a;
                double* dev = s.dev.data() + r.a;
                double* m2 = s.m2.data() + r.a;
                for (std::size_t k = 0; k < r.n; ++k) {
                    double d = static_cast<double>(xp[k]) - mu[k];
                    dev[k] += d;
                    m2[k] += d * d;
                }
            } else {
                for (std::size_t k = 0; k < r.n; ++k) {
                    if (m && !m[r.b + k * r.db]) continue;
                    std::size_t a = r.a + k * r.da;
                    double d = static_cast<double>(xp[k]) - s.sum[a];
                    s.dev[a] += d;
                    s.m2[a] += d * d;
                }
            }
        });
    }
    for (std::size_t a : s.touched) {
        if (center && s.count[a] > 0) {
            // The correction s1/n is tiny next to mu; TwoSum keeps what rounding drops.
            const double corr = s.dev[a] / s.count[a];
            double mean, lo;
            two_sum(s.sum[a], corr, mean, lo);
            // s2 >= s1^2/n exactly; rounding may undercut it by an ulp (NaN passes through).
            double m2 = s.m2[a] - s.dev[a] * corr;
            infinite_moments(s.sum[a], s.dev[a], s.count[a], mean, lo, m2);
            out.push_back({a, s.count[a], mean, lo, m2 < 0 ? 0.0 : m2});
        } else {
            out.push_back({a, s.count[a], 0.0, 0.0, center ? 0.0 : s.sum[a]});
        }
        s.sum[a] = s.count[a] = s.dev[a] = s.m2[a] = 0;
        s.seen[a] = 0;
    }
    s.touched.clear();
    s.range_n = 0;
}

// Merged moments per statistic before they are finished: count, mean (+ mean_lo) and the
// sum of squared deviations (in `var`), all in the keep-dims statistics shape.
// `out`'s arrays are reused where they have the statistics' size already.
template <class T>
Moments& raw_moments(const T* x, const Shape& xs, const Axes& reduced, bool center,
                     const xt::xarray<std::uint8_t>* mask, Moments& out) {
    Shape ss = keepdims_shape(xs, reduced);
    for (auto* a : {&out.mean, &out.mean_lo, &out.var, &out.count}) {
        ensure_shape(*a, ss);
        std::fill(a->begin(), a->end(), 0.0);
    }
    double* mean = out.mean.data();
    double* lo = out.mean_lo.data();
    double* m2 = out.var.data();
    double* count = out.count.data();
    if (num_elements(xs) == 0) return out;  // an axis of size 0: every count 0, no kernel runs

    if (!mask)
        if (const auto cl = channels_last_layout(xs, reduced, {})) {
            channels_last_moments(x, *cl, center, RawMoments{count, mean, lo, m2});
            return out;
        }
    // BatchNorm's planes in (N, C, ...) of float data: the row kernels over the planes, which
    // are contiguous rows, then a merge per statistic.
    if constexpr (std::is_same_v<T, float>)
        if (!mask)
            if (const auto pl = planes_layout(xs, reduced)) {
                planes_moments(x, *pl, center, count, mean, lo, m2);
                return out;
            }
    // Every statistic a contiguous row of n values (reductions over trailing axes): the row
    // kernels, which the forward uses too, without the walk's per-run work. The same bits as
    // the walk below (a statistic's single partial merges unchanged).
    const std::size_t rows = out.count.size();
    if (!mask && rows && whole_stat_chunk(xs, reduced)) {
        const std::size_t n = num_elements(xs) / rows;
        parallel_rows(rows, n, [&](std::size_t f, std::size_t m) {
            row_moments(x + f * n, m, n, center, RowSums{mean + f, lo + f, m2 + f});
        });
        std::fill(count, count + rows, static_cast<double>(n));
        return out;
    }
    const Axes suffix = short_suffix(xs, reduced);
    if (!suffix.empty()) {
        // Finer statistics, then merged over the suffix axes in row-major order.
        Moments fine;
        raw_moments(x, xs, without(reduced, suffix), center, mask, fine);
        Shape fs(fine.count.shape().begin(), fine.count.shape().end());
        Walk w(fs, broadcast_strides(fs, ss), Strides(fs.size(), 0), std::max<std::size_t>(1, fine.count.size()));
        if (w.num_chunks() > 0)
            w.chunk(0, [&](const Run& r) {
                for (std::size_t k = 0; k < r.n; ++k)
                    merge_partial(count, mean, lo, m2, r.a + k * r.da, fine.count.data()[r.x + k],
                                  fine.mean.data()[r.x + k], fine.mean_lo.data()[r.x + k], fine.var.data()[r.x + k],
                                  center);
            });
        return out;
    }

    Strides mt = mask ? mask_strides(xs, *mask) : Strides(xs.size(), 0);
    // Float64 planes (BatchNorm in (N, C, ...)) whose statistics fit L2: a chunk per plane,
    // whose partials plane_stat_moments merges a statistic at a time in the one-pass forward.
    std::size_t per = whole_stat_chunk(xs, reduced);
    if (!per && !mask && std::is_same_v<T, double>)
        if (const auto pl = planes_layout(xs, reduced); pl && planes_fit(*pl)) per = pl->plane;
    Walk w(xs, broadcast_strides(xs, ss), mt, per ? per : kChunk);
    const std::uint8_t* m = mask ? mask->data() : nullptr;
    const std::size_t stats = num_elements(ss);

    std::vector<std::vector<Partial>> parts(w.num_chunks());
    parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) { chunk_moments(x, m, w, c, center, stats, parts[c]); });
    for (const auto& chunk : parts)  // in chunk order, whatever the thread count
        for (const Partial& p : chunk)
            merge_partial(count, mean, lo, m2, p.stat, p.count, p.mean, p.mean_lo, p.m2, center);
    return out;
}

template <class T>
void moments_impl(const T* x, const Shape& xs, const Axes& reduced, bool center, const xt::xarray<std::uint8_t>* mask,
                  Moments& out) {
    raw_moments(x, xs, reduced, center, mask, out);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::size_t i = 0; i < out.count.size(); ++i) {
        out.var.data()[i] = biased_var(out.var.data()[i], out.count.data()[i]);
        if (out.count.data()[i] == 0) out.mean.data()[i] = nan;
    }
}

// One instance of the kernel per register width, each compiled for its instruction set.
template <class T>
void chunk_moments_generic(const T* x, const std::uint8_t* mask, const Walk& w, std::size_t c, bool center,
                           std::size_t stats, std::vector<Partial>& out) {
    chunk_moments_impl<2>(x, mask, w, c, center, thread_scratch(stats), out);
}
#if NORMLAB_LANE_DISPATCH
template <class T>
NORMLAB_TARGET_AVX2 void chunk_moments_avx2(const T* x, const std::uint8_t* mask, const Walk& w, std::size_t c,
                                            bool center, std::size_t stats, std::vector<Partial>& out) {
    chunk_moments_impl<4>(x, mask, w, c, center, thread_scratch(stats), out);
}
template <class T>
NORMLAB_TARGET_AVX512 void chunk_moments_avx512(const T* x, const std::uint8_t* mask, const Walk& w, std::size_t c,
                                                bool center, std::size_t stats, std::vector<Partial>& out) {
    chunk_moments_impl<8>(x, mask, w, c, center, thread_scratch(stats), out);
}
#endif

template <class T>
void chunk_moments_any(const T* x, const std::uint8_t* mask, const Walk& w, std::size_t c, bool center,
                       std::size_t stats, std::vector<Partial>& out) {
#if NORMLAB_LANE_DISPATCH
    const int width = active_lane_width();
    if (width == 8) return chunk_moments_avx512(x, mask, w, c, center, stats, out);
    if (width == 4) return chunk_moments_avx2(x, mask, w, c, center, stats, out);
#endif
    chunk_moments_generic(x, mask, w, c, center, stats, out);
}

}  // namespace

int lane_width() {
#if NORMLAB_LANE_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return 8;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 4;
#endif
    return 2;
}

namespace {
std::atomic<int> g_lane_override{0};  // 0: the CPU's
}  // namespace

int active_lane_width() {
    static const int cpu = lane_width();
    const int w = g_lane_override.load(std::memory_order_relaxed);
    return w > 0 && w < cpu ? w : cpu;
}

void set_lane_width(int w) { g_lane_override.store(w, std::memory_order_relaxed); }

void chunk_moments(const float* x, const std::uint8_t* mask, const Walk& w, std::size_t c, bool center,
                   std::size_t stats, std::vector<Partial>& out) {
    if (w.run_stride_a() == 0) return chunk_moments_rows(x, mask, w, c, center, stats, out);
    chunk_moments_any(x, mask, w, c, center, stats, out);
}

void chunk_moments(const double* x, const std::uint8_t* mask, const Walk& w, std::size_t c, bool center,
                   std::size_t stats, std::vector<Partial>& out) {
    chunk_moments_any(x, mask, w, c, center, stats, out);
}

std::size_t whole_stat_chunk(const Shape& xs, const Axes& reduced, std::size_t max_values) {
    std::size_t block = 1;
    bool in_suffix = true;
    for (std::size_t d = xs.size(); d-- > 0;) {
        if (xs[d] == 1) continue;
        const bool r = has_axis(reduced, d);
        if (r && !in_suffix) return 0;
        if (r) block *= xs[d];
        else in_suffix = false;
    }
    // block 1 (nothing of size > 1 reduced): the moments walk would fold the kept axes into
    // one long run cut into pieces, the normalize walk would not, and their chunks differ.
    return block > 1 && block <= kChunk ? std::max<std::size_t>(1, max_values / block) * block : 0;
}

Axes short_suffix(const Shape& xs, const Axes& reduced) {
    Axes suffix;
    std::size_t block = 1, d = xs.size();
    for (; d-- > 0;) {
        if (xs[d] == 1) continue;
        if (!has_axis(reduced, d)) break;
        suffix.push_back(d);
        block *= xs[d];
    }
    if (suffix.empty() || block >= kShortRun || d > xs.size()) return {};
    for (std::size_t e = 0; e < d; ++e)
        if (xs[e] > 1 && has_axis(reduced, e)) {
            std::sort(suffix.begin(), suffix.end());
            return suffix;
        }
    return {};
}

Axes without(const Axes& axes, const Axes& drop) {
    Axes out;
    for (auto a : axes)
        if (std::find(drop.begin(), drop.end(), a) == drop.end()) out.push_back(a);
    return out;
}

double biased_var(double m2, double count) {
    return count > 0 ? m2 / count : std::numeric_limits<double>::quiet_NaN();
}

Moments compute_moments(const Tensor& x, const Shape& shape, const Axes& reduction_axes, bool center,
                        const xt::xarray<std::uint8_t>* mask) {
    Moments out;
    compute_moments(x, shape, reduction_axes, center, out, mask);
    return out;
}

void compute_moments(const Tensor& x, const Shape& shape, const Axes& reduction_axes, bool center, Moments& out,
                     const xt::xarray<std::uint8_t>* mask) {
    if (num_elements(shape) != x.size())
        throw InputError("cannot view input of shape " + format_shape(x.shape()) + " as " + format_shape(shape));
    for (auto a : reduction_axes)
        if (a >= shape.size())
            throw InputError("reduction axis " + std::to_string(a) +
                             " out of range for input of shape " + format_shape(shape));
    if (x.dtype == DType::float64) moments_impl(x.f64.data(), shape, reduction_axes, center, mask, out);
    else moments_impl(x.f32.data(), shape, reduction_axes, center, mask, out);
}

Moments compute_moments(const Tensor& x, const Axes& reduction_axes, bool center,
                        const xt::xarray<std::uint8_t>* mask) {
    return compute_moments(x, x.shape(), reduction_axes, center, mask);
}

}  // namespace normlab
