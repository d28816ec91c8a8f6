#include "norm/backward.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <xtensor/xbroadcast.hpp>

#include "norm/parallel.hpp"
#include "norm/strided.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

// Two sums per index (statistic or parameter element) over one chunk. Only the indices a
// chunk touches are visited when it is flushed, so one scratch per thread serves chunks of
// any layout without clearing whole arrays; every entry is back to zero after a flush.
struct SparseSums {
    std::vector<double> u, v;
    std::vector<char> seen;
    std::vector<std::size_t> touched;
    void reserve(std::size_t n) {
        if (u.size() >= n) return;
        u.resize(n);
        v.resize(n);
        seen.resize(n);
    }
    void touch(std::size_t i) {
        if (!seen[i]) seen[i] = 1, touched.push_back(i);
    }
    // The indices a, a + da, ..., of a run of n elements. Channels-last runs repeat the
    // same range [a, a + n) run after run: the last unit-stride range is remembered.
    void touch_run(std::size_t a, std::size_t n, std::size_t da) {
        if (da == 0) return touch(a);
        if (da == 1 && a == range_a && n <= range_n) return;
        for (std::size_t k = 0; k < n; ++k) touch(a + k * da);
        if (da == 1) range_a = a, range_n = n;
    }
    std::size_t range_a = 0, range_n = 0;
};

// One index's sums over one chunk.
struct Part {
    std::size_t idx;
    double u, v;
};

// Moves the touched sums of `s` into `out` (in touch order, which the chunk alone fixes).
void flush(SparseSums& s, std::vector<Part>& out) {
    for (std::size_t i : s.touched) {
        out.push_back({i, s.u[i], s.v[i]});
        s.u[i] = s.v[i] = 0;
        s.seen[i] = 0;
    }
    s.touched.clear();
    s.range_n = 0;
}

// What one chunk contributes: per statistic sum(g) and sum(g * (x - mu)); per parameter
// element sum(dy * xhat) and sum(dy).
struct ChunkParts {
    std::vector<Part> stats, params;
};

// Read-only operands of both passes, in the view shape's layout.
struct Operands {
    const double* dy;
    const double* mean;
    const double* rstd;
    const double* scale;  // weight_offset + weight per parameter element, or 1
};

// Pass 1 over chunk c: the statistics' sums (with batch statistics) and the parameter
// sums (with weight or bias), accumulated in double in memory order.
template <class T>
NORMLAB_VECTOR_CLONES void chunk_sums(const T* x, const Operands& o, const Walk& w, std::size_t c, bool stats,
                                      bool params, SparseSums& ss, SparseSums& ps, ChunkParts& out) {
    w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
        const T* xp = x + r.x;
        const double* dyp = o.dy + r.x;
        if (stats) ss.touch_run(r.a, r.n, r.da);
        if (params) ps.touch_run(r.b, r.n, r.db);
        if (r.da == 0 && r.db == 0) {  // BatchNorm/InstanceNorm/GroupNorm planes
            const double mu = o.mean[r.a], rs = o.rstd[r.a], sc = o.scale[r.b];
            double sdyd = 0, sdy = 0;  // g = dy * sc with one sc for the whole run
            for (std::size_t k = 0; k < r.n; ++k) {
                sdyd += dyp[k] * (static_cast<double>(xp[k]) - mu);
                sdy += dyp[k];
            }
            if (stats) ss.u[r.a] += sdy * sc, ss.v[r.a] += sdyd * sc;
            if (params) ps.u[r.b] += sdyd * rs, ps.v[r.b] += sdy;
        } else if (r.da == 0) {  // LayerNorm/RMSNorm rows
            const double mu = o.mean[r.a], rs = o.rstd[r.a];
            double sg = 0, sgd = 0;
            for (std::size_t k = 0; k < r.n; ++k) {
                const std::size_t p = r.b + k * r.db;
                const double d = static_cast<double>(xp[k]) - mu;
                const double g = dyp[k] * o.scale[p];
                sg += g;
                sgd += g * d;
                if (params) ps.u[p] += dyp[k] * (d * rs), ps.v[p] += dyp[k];
            }
            if (stats) ss.u[r.a] += sg, ss.v[r.a] += sgd;
        } else if (r.da == 1 && r.db == 1) {  // channels last: one statistic per element
            const double* mu = o.mean + r.a;
            const double* rs = o.rstd + r.a;
            const double* sc = o.scale + r.b;
            double* su = ss.u.data() + r.a;
            double* sv = ss.v.data() + r.a;
            double* pu = ps.u.data() + r.b;
            double* pv = ps.v.data() + r.b;
            for (std::size_t k = 0; k < r.n; ++k) {
                const double d = static_cast<double>(xp[k]) - mu[k];
                const double g = dyp[k] * sc[k];
                if (stats) su[k] += g, sv[k] += g * d;
                if (params) pu[k] += dyp[k] * (d * rs[k]), pv[k] += dyp[k];
            }
        } else {
            for (std::size_t k = 0; k < r.n; ++k) {
                const std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
                const double d = static_cast<double>(xp[k]) - o.mean[s];
                const double g = dyp[k] * o.scale[p];
                if (stats) ss.u[s] += g, ss.v[s] += g * d;
                if (params) ps.u[p] += dyp[k] * (d * o.rstd[s]), ps.v[p] += dyp[k];
            }
        }
    });
    flush(ss, out.stats);
    flush(ps, out.params);
}

// Pass 2 over chunk c: dx = rstd * g + m * (c1 + c2 * (x - mu)) (formula in backward.hpp),
// rounded once to the dtype. `m` is the mask in x's full layout (null: every position real);
// c1 and c2 are null with given statistics (no statistics terms). The common layouts get
// loops with unit or zero strides that the compiler vectorises; the same arithmetic in the
// same order as the general loop, so the same bits.
template <class T>
NORMLAB_VECTOR_CLONES void chunk_dx(const T* x, const Operands& o, const std::uint8_t* m, const double* c1,
                                    const double* c2, T* dx, const Walk& w, std::size_t c, DType dtype) {
    const bool half = dtype == DType::float16 || dtype == DType::bfloat16;
    w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
        const T* xp = x + r.x;
        const double* dyp = o.dy + r.x;
        T* out = dx + r.x;
        if (!half && !m && c1 && r.da == 0 && r.db <= 1) {  // planes and rows
            const double mu = o.mean[r.a], rs = o.rstd[r.a], k1 = c1[r.a], k2 = c2[r.a];
            const double* sc = o.scale + r.b;
            if (r.db == 0)
                for (std::size_t k = 0; k < r.n; ++k)
                    out[k] = static_cast<T>(rs * (dyp[k] * sc[0]) + (k1 + k2 * (static_cast<double>(xp[k]) - mu)));
            else
                for (std::size_t k = 0; k < r.n; ++k)
                    out[k] = static_cast<T>(rs * (dyp[k] * sc[k]) + (k1 + k2 * (static_cast<double>(xp[k]) - mu)));
        } else if (!half && !m && c1 && r.da == 1 && r.db == 1) {  // channels last
            const double* mu = o.mean + r.a;
            const double* rs = o.rstd + r.a;
            const double* k1 = c1 + r.a;
            const double* k2 = c2 + r.a;
            const double* sc = o.scale + r.b;
            for (std::size_t k = 0; k < r.n; ++k)
                out[k] = static_cast<T>(rs[k] * (dyp[k] * sc[k]) + (k1[k] + k2[k] * (static_cast<double>(xp[k]) - mu[k])));
        } else {
            for (std::size_t k = 0; k < r.n; ++k) {
                const std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
                double v = o.rstd[s] * (dyp[k] * o.scale[p]);
                if (c1 && (!m || m[r.x + k])) v += c1[s] + c2[s] * (static_cast<double>(xp[k]) - o.mean[s]);
                out[k] = half ? static_cast<T>(round_to(dtype, v)) : static_cast<T>(v);
            }
        }
    });
}

// Both passes for x's storage type T; `res` receives dx (allocated by the caller).
template <class T>
void backward_impl(const T* x, T* dx, const Shape& xs, const NormSpec& spec, const ForwardInputs& in,
                   const ForwardResult& fwd, const Operands& o, DType dtype, BackwardResult& res) {
    const Shape ss = keepdims_shape(xs, spec.reduction_axes);
    const Shape ps = select_dims(xs, spec.param_axes);
    const std::size_t nstats = num_elements(ss), nparams = std::max<std::size_t>(1, num_elements(ps));
    const bool given = in.given_mean != nullptr;
    const bool stats = !given, params = in.weight || in.bias;
    const Walk w(xs, broadcast_strides(xs, ss), param_strides(xs, spec.param_axes), kChunk);

    std::vector<double> c1, c2;
    if (stats || params) {
        std::vector<ChunkParts> parts(w.num_chunks());
        parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) {
            thread_local SparseSums tss, tps;
            tss.reserve(nstats);
            tps.reserve(nparams);
            chunk_sums(x, o, w, c, stats, params, tss, tps, parts[c]);
        });
        // Merged in chunk order, whatever the thread count.
        std::vector<double> sg(nstats, 0.0), sgd(nstats, 0.0), sdyx(nparams, 0.0), sdy(nparams, 0.0);
        for (const ChunkParts& cp : parts) {
            for (const Part& p : cp.stats) sg[p.idx] += p.u, sgd[p.idx] += p.v;
            for (const Part& p : cp.params) sdyx[p.idx] += p.u, sdy[p.idx] += p.v;
        }
        if (in.weight) {
            res.dweight = xt::xarray<double>::from_shape(ps);
            std::copy(sdyx.begin(), sdyx.begin() + static_cast<std::ptrdiff_t>(res.dweight.size()), res.dweight.begin());
        }
        if (in.bias) {
            res.dbias = xt::xarray<double>::from_shape(ps);
            std::copy(sdy.begin(), sdy.begin() + static_cast<std::ptrdiff_t>(res.dbias.size()), res.dbias.begin());
        }
        if (stats) {
            c1.resize(nstats);
            c2.resize(nstats);
            for (std::size_t s = 0; s < nstats; ++s) {
                const double n = fwd.batch.count.data()[s], r = fwd.rstd.data()[s], v = fwd.var.data()[s];
                const double dv_dvar0 = spec.variance == VarianceEstimator::unbiased ? n / (n - 1) : 1.0;
                // r = 0 is a constant (NormSpec::zero_rstd_at_zero_var), whose sqrt(v) is 0 too.
                const double dr_dv = r == 0 ? 0.0
                                     : spec.eps_placement == EpsPlacement::inside_sqrt ? -0.5 * r * r * r
                                                                                     : -0.5 * r * r / std::sqrt(v);
                c1[s] = spec.center ? -r * sg[s] / n : 0.0;
                c2[s] = 2.0 / n * dv_dvar0 * dr_dv * sgd[s];
            }
        }
    }

    // The mask laid out like x (one byte per element): pass 2 then needs no third operand.
    xt::xarray<std::uint8_t> full_mask;
    if (in.mask && stats) full_mask = xt::broadcast(*in.mask, xs);
    const std::uint8_t* m = in.mask && stats ? full_mask.data() : nullptr;
    const double* pc1 = stats ? c1.data() : nullptr;
    const double* pc2 = stats ? c2.data() : nullptr;
    parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) { chunk_dx(x, o, m, pc1, pc2, dx, w, c, dtype); });
}

// A group without a real position (count 0 under a mask) has no statistics: its mean and
// rstd are NaN, and so are its outputs. Where the upstream gradient is 0 throughout such a
// group (a masked loss), those outputs do not reach the loss, and the chain rule takes
// nothing from them: dweight's terms dy * xhat and dx = rstd * g there are 0, not 0 * NaN.
// Returns the statistics with those groups' mean and rstd set to 0 (xhat = 0), or false
// when no group is such (nothing copied). A group with some dy != 0 keeps its NaN.
bool quiet_empty_groups(const Shape& xs, const Shape& ss, const ForwardResult& fwd, const double* dy,
                        std::vector<double>& mean, std::vector<double>& rstd) {
    const double* count = fwd.batch.count.data();
    const std::size_t nstats = fwd.batch.count.size();
    std::vector<std::uint8_t> quiet(nstats, 0);
    bool any = false;
    for (std::size_t s = 0; s < nstats; ++s) {
        quiet[s] = count[s] == 0;
        any = any || quiet[s];
    }
    if (!any) return false;
    const Walk w(xs, broadcast_strides(xs, ss), broadcast_strides(xs, ss), kChunk);
    for (std::size_t c = 0; c < w.num_chunks(); ++c)
        w.chunk(c, [&](const Run& r) {
            for (std::size_t k = 0; k < r.n; ++k)
                if (dy[r.x + k] != 0) quiet[r.a + k * r.da] = 0;
        });
    if (std::find(quiet.begin(), quiet.end(), 1) == quiet.end()) return false;
    mean.assign(fwd.mean.begin(), fwd.mean.end());
    rstd.assign(fwd.rstd.begin(), fwd.rstd.end());
    for (std::size_t s = 0; s < nstats; ++s)
        if (quiet[s]) mean[s] = rstd[s] = 0;
    return true;
}

}  // namespace

void backward(const Tensor& x, const Shape& xs, const NormSpec& spec, const ForwardInputs& in,
              const ForwardResult& fwd, const xt::xarray<double>& dy, BackwardResult& out) {
    if (num_elements(xs) != x.size())
        throw InputError("cannot view input of shape " + format_shape(x.shape()) + " as " + format_shape(xs));
    const Shape dys(dy.shape().begin(), dy.shape().end());
    if (dys != x.shape() && dys != xs)
        throw InputError("upstream gradient: expected shape " + format_shape(x.shape()) + ", but got " +
                         format_shape(dys));
    const Shape ss = keepdims_shape(xs, spec.reduction_axes);
    const Shape ps = select_dims(xs, spec.param_axes);
    if (in.weight) check_operand_shape(*in.weight, ps, "weight");
    if (in.bias) check_operand_shape(*in.bias, ps, "bias");
    if (in.mask) mask_strides(xs, *in.mask);
    if ((in.given_mean == nullptr) != (in.given_var == nullptr))
        throw InputError("given statistics need both mean and var");
    check_operand_shape(fwd.mean, ss, "mean");
    check_operand_shape(fwd.rstd, ss, "rstd");
    if (!in.given_mean) {
        check_operand_shape(fwd.var, ss, "var");
        check_operand_shape(fwd.batch.count, ss, "count");
    }

    std::vector<double> scale(std::max<std::size_t>(1, num_elements(ps)), 1.0);
    if (in.weight)
        for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = spec.weight_offset + in.weight->data()[i];
    std::vector<double> quiet_mean, quiet_rstd;
    const bool quiet = in.mask && !in.given_mean && quiet_empty_groups(xs, ss, fwd, dy.data(), quiet_mean, quiet_rstd);
    const Operands o{dy.data(), quiet ? quiet_mean.data() : fwd.mean.data(), quiet ? quiet_rstd.data() : fwd.rstd.data(),
                     scale.data()};

    out.dweight = xt::xarray<double>::from_shape(Shape{0});
    out.dbias = xt::xarray<double>::from_shape(Shape{0});
    out.dx.dtype = x.dtype;
    if (x.dtype == DType::float64) {
        ensure_shape(out.dx.f64, xs);
        backward_impl(x.f64.data(), out.dx.f64.data(), xs, spec, in, fwd, o, x.dtype, out);
    } else {
        ensure_shape(out.dx.f32, xs);
        backward_impl(x.f32.data(), out.dx.f32.data(), xs, spec, in, fwd, o, x.dtype, out);
    }
}

BackwardResult backward(const Tensor& x, const NormSpec& spec, const ForwardInputs& in, const ForwardResult& fwd,
                        const xt::xarray<double>& dy) {
    BackwardResult out;
    backward(x, x.shape(), spec, in, fwd, dy, out);
    return out;
}

}  // namespace normlab
