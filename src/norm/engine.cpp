#include "norm/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include <xtensor/xbroadcast.hpp>

#include "norm/parallel.hpp"
#include "norm/strided.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

// The engine's thread count (parallel_chunks reads it through engine_threads()).
unsigned g_threads = std::max(1u, std::thread::hardware_concurrency());

// Sums over a contiguous run with eight independent accumulators: a single accumulator
// is a chain of dependent additions (one add latency per element, the bottleneck of a
// row reduction); eight break the chain and let the compiler use vector registers. The
// order is fixed, so the result does not depend on anything but the data.
template <class T, class F>
NORMLAB_INLINE inline double sum8(const T* x, std::size_t n, F&& f) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::size_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (std::size_t j = 0; j < 8; ++j) acc[j] += f(static_cast<double>(x[k + j]));
    double tail = 0;
    for (; k < n; ++k) tail += f(static_cast<double>(x[k]));
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

// Partial moments of one statistic over one chunk.
struct Partial {
    std::size_t stat;
    double count, mean, m2;
};

// Per-thread scratch, indexed by statistic; `touched` lists the statistics a chunk used.
// Every entry is back to zero after a chunk, so one scratch serves all calls of a thread.
struct Scratch {
    std::vector<double> sum, count, m2;
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
        s.sum.resize(stats);
        s.count.resize(stats);
        s.m2.resize(stats);
        s.seen.resize(stats);
    }
    return s;
}

// Statistics from a merged sum of squared deviations (shared by the fused and the
// two-phase paths, so both give the same bits): biased variance m2/n; count 0 (fully
// masked) gives NaN.
double biased_var(double m2, double count) {
    return count > 0 ? m2 / count : std::numeric_limits<double>::quiet_NaN();
}
// The variance the spec normalises with: Bessel's correction n/(n-1) when unbiased; n = 1
// gives 0/0 = NaN, as torch.var does.
double spec_var(const NormSpec& spec, double var, double count) {
    return spec.variance == VarianceEstimator::unbiased ? var * count / (count - 1) : var;
}
double spec_rstd(const NormSpec& spec, double var) {
    return spec.eps_placement == EpsPlacement::inside_sqrt ? 1.0 / std::sqrt(var + spec.eps)
                                                           : 1.0 / (std::sqrt(var) + spec.eps);
}

// Elements per chunk for statistics over `reduced` of shape xs. When each statistic is one
// contiguous block of 1 < R <= kChunk elements (reduction over trailing axes: LayerNorm,
// RMSNorm, InstanceNorm, GroupNorm in (N, C, ...)), chunks hold whole statistics, so a
// chunk's moments are final and the output can be written while the chunk is in cache
// (one memory pass instead of two). Returns 0 otherwise.
std::size_t whole_stat_chunk(const Shape& xs, const Axes& reduced) {
    std::size_t block = 1;
    bool in_suffix = true;
    for (std::size_t d = xs.size(); d-- > 0;) {
        if (xs[d] == 1) continue;
        const bool r = std::find(reduced.begin(), reduced.end(), d) != reduced.end();
        if (r && !in_suffix) return 0;
        if (r) block *= xs[d];
        else in_suffix = false;
    }
    // block 1 (nothing of size > 1 reduced): the moments walk would fold the kept axes into
    // one long run cut into pieces, the normalize walk would not, and their chunks differ.
    return block > 1 && block <= kChunk ? (kChunk / block) * block : 0;
}

// One chunk's statistics: exact two-pass (mean, then squared deviations) in double while
// the chunk is in cache. Without centring, m2 is the plain sum of squares.
template <class T>
NORMLAB_VECTOR_CLONES void chunk_moments(const T* x, const std::uint8_t* m, const Walk& w, std::size_t c, bool center,
                   Scratch& s, std::vector<Partial>& out) {
    w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
        const T* xp = x + r.x;
        if (r.da == 0) {
            s.touch(r.a);
            double sum = 0, cnt = 0;
            if (!m) {
                sum = center ? sum8(xp, r.n, [](double v) NORMLAB_INLINE { return v; })
                             : sum8(xp, r.n, [](double v) NORMLAB_INLINE { return v * v; });
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
        for (std::size_t a : s.touched) s.sum[a] = s.count[a] > 0 ? s.sum[a] / s.count[a] : 0.0;
        w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
            const T* xp = x + r.x;
            if (r.da == 0 && !m) {
                const double mu = s.sum[r.a];
                s.m2[r.a] += sum8(xp, r.n, [mu](double v) NORMLAB_INLINE { return (v - mu) * (v - mu); });
            } else if (r.da == 1 && !m) {
                const double* mu = s.sum.data() + r.a;
                double* m2 = s.m2.data() + r.a;
                for (std::size_t k = 0; k < r.n; ++k) {
                    double d = static_cast<double>(xp[k]) - mu[k];
                    m2[k] += d * d;
                }
            } else {
                for (std::size_t k = 0; k < r.n; ++k) {
                    if (m && !m[r.b + k * r.db]) continue;
                    std::size_t a = r.a + k * r.da;
                    double d = static_cast<double>(xp[k]) - s.sum[a];
                    s.m2[a] += d * d;
                }
            }
        });
    }
    for (std::size_t a : s.touched) {
        out.push_back({a, s.count[a], center ? s.sum[a] : 0.0, center ? s.m2[a] : s.sum[a]});
        s.sum[a] = s.count[a] = s.m2[a] = 0;
        s.seen[a] = 0;
    }
    s.touched.clear();
    s.range_n = 0;
}

// Merges partial moments (count pc, mean pmean, sum of squared deviations pm2) into
// statistic j of the running arrays (Chan, Golub, LeVeque 1979):
//   n = na + nb, delta = mean_b - mean_a, mean = mean_a + delta * nb / n,
//   M2 = M2a + M2b + delta^2 * na * nb / n.
// The first part of a statistic is taken as it is (the update would round it).
inline void merge_partial(double* count, double* mean, double* m2, std::size_t j, double pc, double pmean,
                          double pm2, bool center) {
    const double na = count[j], n = na + pc;
    if (pc == 0) return;
    if (na == 0) {
        mean[j] = pmean;
        m2[j] = pm2;
    } else if (center) {
        const double delta = pmean - mean[j];
        mean[j] += delta * pc / n;
        m2[j] += pm2 + delta * delta * na * pc / n;
    } else {
        m2[j] += pm2;
    }
    count[j] = n;
}

// Runs shorter than this many elements make the walk's per-run work dominate.
constexpr std::size_t kShortRun = 32;

// The trailing reduced axes to keep as finer statistics first: when the trailing non-size-1
// axes are reduced but hold fewer than kShortRun elements, and other reduced axes lie
// outside them (GroupNorm with channels last: (N, H, W, G, C/G) over H, W and C/G), the
// walk would step through runs of a few elements. Statistics per (N, G, C/G) - one per
// channel, the vectorised channels-last loop - are then merged over those axes. Empty when
// the walk is fine as it is.
Axes short_suffix(const Shape& xs, const Axes& reduced) {
    auto is_reduced = [&](std::size_t d) { return std::find(reduced.begin(), reduced.end(), d) != reduced.end(); };
    Axes suffix;
    std::size_t block = 1, d = xs.size();
    for (; d-- > 0;) {
        if (xs[d] == 1) continue;
        if (!is_reduced(d)) break;
        suffix.push_back(d);
        block *= xs[d];
    }
    if (suffix.empty() || block >= kShortRun || d > xs.size()) return {};
    for (std::size_t e = 0; e < d; ++e)
        if (xs[e] > 1 && is_reduced(e)) {
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

// Merged moments per statistic before they are finished: count, mean and the sum of
// squared deviations (in `var`), all in the keep-dims statistics shape.
template <class T>
Moments raw_moments(const T* x, const Shape& xs, const Axes& reduced, bool center,
                    const xt::xarray<std::uint8_t>* mask) {
    Shape ss = keepdims_shape(xs, reduced);
    Moments out;
    out.mean = xt::zeros<double>(ss);
    out.var = xt::zeros<double>(ss);
    out.count = xt::zeros<double>(ss);
    double* mean = out.mean.data();
    double* m2 = out.var.data();
    double* count = out.count.data();

    const Axes suffix = short_suffix(xs, reduced);
    if (!suffix.empty()) {
        // Finer statistics, then merged over the suffix axes in row-major order.
        Moments fine = raw_moments(x, xs, without(reduced, suffix), center, mask);
        Shape fs(fine.count.shape().begin(), fine.count.shape().end());
        Walk w(fs, broadcast_strides(fs, ss), Strides(fs.size(), 0), std::max<std::size_t>(1, fine.count.size()));
        if (w.num_chunks() > 0)
            w.chunk(0, [&](const Run& r) {
                for (std::size_t k = 0; k < r.n; ++k)
                    merge_partial(count, mean, m2, r.a + k * r.da, fine.count.data()[r.x + k],
                                  fine.mean.data()[r.x + k], fine.var.data()[r.x + k], center);
            });
        return out;
    }

    Strides mt = mask ? mask_strides(xs, *mask) : Strides(xs.size(), 0);
    const std::size_t whole = whole_stat_chunk(xs, reduced);
    Walk w(xs, broadcast_strides(xs, ss), mt, whole ? whole : kChunk);
    const std::uint8_t* m = mask ? mask->data() : nullptr;
    const std::size_t stats = num_elements(ss);

    std::vector<std::vector<Partial>> parts(w.num_chunks());
    parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) {
        chunk_moments(x, m, w, c, center, thread_scratch(stats), parts[c]);
    });
    for (const auto& chunk : parts)  // in chunk order, whatever the thread count
        for (const Partial& p : chunk) merge_partial(count, mean, m2, p.stat, p.count, p.mean, p.m2, center);
    return out;
}

template <class T>
Moments moments_impl(const T* x, const Shape& xs, const Axes& reduced, bool center,
                     const xt::xarray<std::uint8_t>* mask) {
    Moments out = raw_moments(x, xs, reduced, center, mask);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::size_t i = 0; i < out.count.size(); ++i) {
        out.var.data()[i] = biased_var(out.var.data()[i], out.count.data()[i]);
        if (out.count.data()[i] == 0) out.mean.data()[i] = nan;
    }
    return out;
}

// y = (x - mean) * (rstd * scale) + shift over one chunk. The common layouts get loops
// with unit or zero strides that the compiler vectorises; everything else takes the
// general loop.
template <class T>
NORMLAB_VECTOR_CLONES void normalize_chunk(const T* x, T* y, const Walk& w, std::size_t c, const double* mean,
                                           const double* rstd, const double* scale, const double* shift,
                                           DType dtype) {
    // Half formats live in float storage; their outputs are rounded once, from double.
    const bool half = dtype == DType::float16 || dtype == DType::bfloat16;
    w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
        const T* xp = x + r.x;
        T* yp = y + r.x;
        if (half) {
            for (std::size_t k = 0; k < r.n; ++k) {
                std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
                double v = (static_cast<double>(xp[k]) - mean[s]) * (rstd[s] * scale[p]) + shift[p];
                yp[k] = static_cast<T>(round_to(dtype, v));
            }
        } else if (r.da == 0 && r.db == 0) {  // BatchNorm/InstanceNorm/GroupNorm planes
            const double mu = mean[r.a], a = rstd[r.a] * scale[r.b], b = shift[r.b];
            for (std::size_t k = 0; k < r.n; ++k) yp[k] = static_cast<T>((static_cast<double>(xp[k]) - mu) * a + b);
        } else if (r.da == 0 && r.db == 1) {  // LayerNorm/RMSNorm rows
            const double mu = mean[r.a], rs = rstd[r.a];
            const double* sc = scale + r.b;
            const double* sh = shift + r.b;
            for (std::size_t k = 0; k < r.n; ++k)
                yp[k] = static_cast<T>((static_cast<double>(xp[k]) - mu) * (rs * sc[k]) + sh[k]);
        } else if (r.da == 1 && r.db == 1) {  // BatchNorm with channels last
            const double* mu = mean + r.a;
            const double* rs = rstd + r.a;
            const double* sc = scale + r.b;
            const double* sh = shift + r.b;
            for (std::size_t k = 0; k < r.n; ++k)
                yp[k] = static_cast<T>((static_cast<double>(xp[k]) - mu[k]) * (rs[k] * sc[k]) + sh[k]);
        } else {
            for (std::size_t k = 0; k < r.n; ++k) {
                std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
                yp[k] = static_cast<T>((static_cast<double>(xp[k]) - mean[s]) * (rstd[s] * scale[p]) + shift[p]);
            }
        }
    });
}

template <class T>
void normalize_impl(const T* x, T* y, const Walk& w, const double* mean, const double* rstd,
                    const double* scale, const double* shift, DType dtype) {
    parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) {
        normalize_chunk(x, y, w, c, mean, rstd, scale, shift, dtype);
    });
}

// Statistics and output in one pass over memory, for walks whose chunks hold whole
// statistics (whole_stat_chunk): each chunk's moments are final, so they are finished and
// the chunk normalised while it is still in cache. Same arithmetic, so the same bits, as
// compute_moments followed by normalize_impl.
// `wm` is compute_moments' walk and `wn` the normalize walk; both are cut into the same
// whole-statistic chunks, so chunk c is the same range of elements in each.
template <class T>
void fused_impl(const T* x, T* y, const Walk& wm, const Walk& wn, const NormSpec& spec, const double* scale,
                const double* shift, DType dtype, ForwardResult& out) {
    const std::size_t stats = out.rstd.size();
    double* bmean = out.batch.mean.data();
    double* bvar = out.batch.var.data();
    double* bcount = out.batch.count.data();
    double* mean = out.mean.data();
    double* var = out.var.data();
    double* rstd = out.rstd.data();
    parallel_chunks(wn.num_chunks(), [&](std::size_t c, std::size_t) {
        thread_local std::vector<Partial> parts;
        parts.clear();
        chunk_moments(x, static_cast<const std::uint8_t*>(nullptr), wm, c, spec.center, thread_scratch(stats), parts);
        for (const Partial& p : parts) {
            const double v = biased_var(p.m2, p.count);
            bmean[p.stat] = mean[p.stat] = p.mean;
            bvar[p.stat] = v;
            bcount[p.stat] = p.count;
            var[p.stat] = spec_var(spec, v, p.count);
            rstd[p.stat] = spec_rstd(spec, var[p.stat]);
        }
        normalize_chunk(x, y, wn, c, mean, rstd, scale, shift, dtype);
    });
}

// y = round(y * scale + shift) in place, y holding x_hat already rounded to its half dtype:
// the second rounding of AffineRounding::twice. The product of two half values is exact in
// double (and in float32), so without a bias this is a framework's half multiply; with a
// bias it is one fused multiply-add (torch.addcmul), not a multiply and an add rounded apart.
void affine_rounded_twice(float* y, const Shape& xs, const Strides& sb, const double* scale, const double* shift,
                          DType dtype) {
    Walk w(xs, Strides(xs.size(), 0), sb, kChunk);
    parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) {
        w.chunk(c, [&](const Run& r) {
            for (std::size_t k = 0; k < r.n; ++k) {
                const std::size_t p = r.b + k * r.db;
                float& v = y[r.x + k];
                v = static_cast<float>(round_to(dtype, static_cast<double>(v) * scale[p] + shift[p]));
            }
        });
    });
}

void check_size(const Tensor& x, const Shape& shape) {
    if (num_elements(shape) != x.size())
        throw InputError("cannot view input of shape " + format_shape(x.shape()) + " as " + format_shape(shape));
}

}  // namespace

void set_engine_threads(unsigned n) { g_threads = std::max(1u, n); }
unsigned engine_threads() { return g_threads; }

Moments compute_moments(const Tensor& x, const Shape& shape, const Axes& reduction_axes, bool center,
                        const xt::xarray<std::uint8_t>* mask) {
    check_size(x, shape);
    for (auto a : reduction_axes)
        if (a >= shape.size())
            throw InputError("reduction axis " + std::to_string(a) +
                             " out of range for input of shape " + format_shape(shape));
    if (x.dtype == DType::float64) return moments_impl(x.f64.data(), shape, reduction_axes, center, mask);
    return moments_impl(x.f32.data(), shape, reduction_axes, center, mask);
}

Moments compute_moments(const Tensor& x, const Axes& reduction_axes, bool center,
                        const xt::xarray<std::uint8_t>* mask) {
    return compute_moments(x, x.shape(), reduction_axes, center, mask);
}

void forward(const Tensor& x, const Shape& xs, const NormSpec& spec, const ForwardInputs& in,
             ForwardResult& out) {
    check_size(x, xs);
    Shape ss = keepdims_shape(xs, spec.reduction_axes);
    Shape ps = select_dims(xs, spec.param_axes);
    if (in.weight) check_operand_shape(*in.weight, ps, "weight");
    if (in.bias) check_operand_shape(*in.bias, ps, "bias");
    if (in.mask) mask_strides(xs, *in.mask);
    const bool given = in.given_mean || in.given_var;
    if (given) {
        if (!in.given_mean || !in.given_var) throw InputError("given statistics need both mean and var");
        check_operand_shape(*in.given_mean, ss, "mean");
        check_operand_shape(*in.given_var, ss, "var");
    }

    // Effective per-parameter scale (offset + weight, or 1) and shift (bias, or 0).
    const std::size_t np = std::max<std::size_t>(1, num_elements(ps));
    std::vector<double> scale(np, 1.0), shift(np, 0.0);
    if (in.weight)
        for (std::size_t i = 0; i < np; ++i) scale[i] = spec.weight_offset + in.weight->data()[i];
    if (in.bias)
        for (std::size_t i = 0; i < np; ++i) shift[i] = in.bias->data()[i];

    // Rounding twice: the kernels write x_hat rounded to the dtype (unit scale, no shift),
    // and the affine step follows on those values.
    const bool twice = spec.affine_rounding == AffineRounding::twice && compute_dtype(x.dtype) != x.dtype &&
                       (in.weight || in.bias);
    std::vector<double> unit_scale, no_shift;
    if (twice) unit_scale.assign(np, 1.0), no_shift.assign(np, 0.0);
    const double* kscale = twice ? unit_scale.data() : scale.data();
    const double* kshift = twice ? no_shift.data() : shift.data();

    out.y.dtype = x.dtype;
    if (x.dtype == DType::float64) ensure_shape(out.y.f64, xs);
    else ensure_shape(out.y.f32, xs);
    ensure_shape(out.rstd, ss);
    const Strides sa = broadcast_strides(xs, ss), sb = param_strides(xs, spec.param_axes);

    const std::size_t whole = given || in.mask ? 0 : whole_stat_chunk(xs, spec.reduction_axes);
    if (whole) {
        for (auto* a : {&out.batch.mean, &out.batch.var, &out.batch.count, &out.mean, &out.var}) ensure_shape(*a, ss);
        Walk wm(xs, sa, Strides(xs.size(), 0), whole), wn(xs, sa, sb, whole);
        if (x.dtype == DType::float64)
            fused_impl(x.f64.data(), out.y.f64.data(), wm, wn, spec, kscale, kshift, x.dtype, out);
        else
            fused_impl(x.f32.data(), out.y.f32.data(), wm, wn, spec, kscale, kshift, x.dtype, out);
        if (twice) affine_rounded_twice(out.y.f32.data(), xs, sb, scale.data(), shift.data(), x.dtype);
        return;
    }

    if (given) {
        out.mean = *in.given_mean;
        out.var = *in.given_var;
        out.batch = Moments{};
    } else {
        out.batch = compute_moments(x, xs, spec.reduction_axes, spec.center, in.mask);
        out.mean = out.batch.mean;
        out.var = out.batch.var;
        for (std::size_t i = 0; i < out.var.size(); ++i)
            out.var.data()[i] = spec_var(spec, out.var.data()[i], out.batch.count.data()[i]);
    }
    for (std::size_t i = 0; i < out.rstd.size(); ++i) out.rstd.data()[i] = spec_rstd(spec, out.var.data()[i]);

    // Where the statistics would make runs of a few elements (short_suffix), they are
    // repeated per element of the short axes, so the walk runs along whole channels.
    const double* mean = out.mean.data();
    const double* rstd = out.rstd.data();
    Strides sn = sa;
    xt::xarray<double> mean_e, rstd_e;
    const Axes suffix = short_suffix(xs, spec.reduction_axes);
    if (!suffix.empty()) {
        Shape fs = keepdims_shape(xs, without(spec.reduction_axes, suffix));
        mean_e = xt::broadcast(out.mean, fs);
        rstd_e = xt::broadcast(out.rstd, fs);
        mean = mean_e.data();
        rstd = rstd_e.data();
        sn = broadcast_strides(xs, fs);
    }
    Walk w(xs, sn, sb, kChunk);
    if (x.dtype == DType::float64)
        normalize_impl(x.f64.data(), out.y.f64.data(), w, mean, rstd, kscale, kshift, x.dtype);
    else
        normalize_impl(x.f32.data(), out.y.f32.data(), w, mean, rstd, kscale, kshift, x.dtype);
    if (twice) affine_rounded_twice(out.y.f32.data(), xs, sb, scale.data(), shift.data(), x.dtype);
}

ForwardResult forward(const Tensor& x, const NormSpec& spec, const ForwardInputs& in) {
    ForwardResult out;
    forward(x, x.shape(), spec, in, out);
    return out;
}

}  // namespace normlab
