#include "analysis/common.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "config/config.hpp"
#include "json/text.hpp"

namespace normlab {

std::size_t value_bytes(DType d) { return d == DType::float64 ? 8 : 4; }

std::optional<std::size_t> groups_on(const std::string& name, const WorkInputs& w) {
    const auto it = w.norms.find(name);
    if (w.shape.empty() || !w.channel_axis || it == w.norms.end()) return std::nullopt;
    try {
        return NormLayer(it->second, w.dtype).resolve(w.shape, *w.channel_axis, name).num_stats;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::size_t most_groups(const std::vector<std::string>& norms, const WorkInputs& w) {
    std::size_t g = 0;
    for (const auto& n : norms) g = std::max(g, groups_on(n, w).value_or(w.elements));
    return g;
}

std::size_t step_stats_per_element(const std::vector<std::string>& norms, const WorkInputs& w) {
    const std::size_t E = w.elements;
    if (E == 0) return kStepGroupBytes;
    const std::size_t g = std::min(most_groups(norms, w), E);  // at most one group per element
    const std::size_t bytes = saturating_mul(g, kStepGroupBytes);
    return std::min(kStepGroupBytes, bytes / E + (bytes % E != 0));
}

long long training_steps(ObjectReader& r, const std::string& key, long long fallback, long long lo) {
    const long long v = r.integer(key, fallback);
    if (v < lo || v > kMaxTrainingSteps)
        r.at(key).fail(key + " must be in [" + std::to_string(lo) + ", " + std::to_string(kMaxTrainingSteps) +
                       "], but got " + std::to_string(v));
    return v;
}

std::string norm_on_data(NormType type, const std::string& norm, const std::string& data) {
    return norm_type_name(type) + " " + quoted_text(norm) + " on data " + quoted_text(data);
}

std::string key_if_set(const AnalysisSpec& spec, const std::string& key) {
    return spec.params.is_object() && spec.params.contains(key) ? key : std::string();
}

std::string larger_key(const AnalysisSpec& spec, const std::string& a, double by_a, const std::string& b,
                       double by_b) {
    const std::string ka = key_if_set(spec, a), kb = key_if_set(spec, b);
    return ka.empty() || (!kb.empty() && by_b > by_a) ? kb : ka;
}

void require_mask_to_save(const JsonLocation& at, const std::string& analysis, const std::string& data,
                          const Batch& b) {
    if (!b.has_mask())
        at.fail(analysis + " on data " + quoted_text(data) +
                    ": cannot save its padding mask, it has none (lengths or mask on its source)",
                data_related(data));
}

double max_abs_diff(const xt::xarray<double>& a, const xt::xarray<double>& b) {
    if (a.shape() != b.shape()) throw std::logic_error("max_abs_diff: shapes differ");
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        double d = std::fabs(a.data()[i] - b.data()[i]);
        if (std::isnan(d)) return d;
        m = std::max(m, d);
    }
    return m;
}

GroupSummary group_summary(const Tensor& y, const Resolution& res,
                           const xt::xarray<std::uint8_t>* mask, bool center) {
    // Reuse the engine's moments on the output viewed (not copied) as the engine saw the input.
    xt::xarray<std::uint8_t> mv;
    const bool masked = mask && mask->size() > 0;
    if (masked) mv = view_mask(*mask, res);
    Moments m = compute_moments(y, res.view_shape, res.spec.reduction_axes, center, masked ? &mv : nullptr);
    GroupSummary s;
    s.mean = m.mean;
    s.std = xt::sqrt(m.var);
    s.count = m.count;
    return s;
}

double l2_norm(const double* p, std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += p[i] * p[i];
    return std::sqrt(s);
}

std::pair<double, double> range_over_groups(const xt::xarray<double>& values, const xt::xarray<double>& count) {
    if (values.size() != count.size()) throw std::logic_error("range_over_groups: sizes differ");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    bool any = false;
    for (std::size_t g = 0; g < values.size(); ++g) {
        if (!(count.data()[g] > 0)) continue;
        const double v = values.data()[g];
        if (std::isnan(v)) return {nan, nan};
        lo = std::min(lo, v), hi = std::max(hi, v), any = true;
    }
    return any ? std::make_pair(lo, hi) : std::make_pair(nan, nan);
}

std::size_t empty_groups(const xt::xarray<double>& count) {
    std::size_t n = 0;
    for (double c : count) n += c > 0 ? 0 : 1;
    return n;
}

OutputSummary summarize_output(const Tensor& y, const Resolution& res, const xt::xarray<double>& count) {
    OutputSummary o;
    if (empty_groups(count) == 0) {  // read in place: no copy of a large output
        std::tie(o.min, o.max) = value_range(y);
        o.nonfinite = count_nonfinite(y);
        return o;
    }
    const xt::xarray<double> v = y.to_double();
    const std::vector<std::size_t> group = broadcast_offsets(res.view_shape, res.stats_shape);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    bool any = false, has_nan = false;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (!(count.data()[group[i]] > 0)) continue;
        const double a = v.data()[i];
        any = true;
        o.nonfinite += std::isfinite(a) ? 0 : 1;
        has_nan = has_nan || std::isnan(a);
        lo = std::min(lo, a), hi = std::max(hi, a);
    }
    o.min = any && !has_nan ? lo : nan;
    o.max = any && !has_nan ? hi : nan;
    return o;
}

namespace {
// Both loops run over the contiguous storage with branch-free bodies: a sweep calls them
// on every batch and output at every point, and an element-by-element walk through
// xtensor's iterators cost more than the normalization. The range is written in GCC's
// generic vectors (16 bytes: SSE2 and up), which the auto-vectoriser does not find for a
// min, a max and a NaN flag together; a lane-wise select is exactly the scalar `v < lo`.
template <class A>
std::pair<double, double> range_of(const A& a) {
    using T = std::remove_const_t<std::remove_reference_t<decltype(*a.data())>>;
    typedef T V __attribute__((vector_size(16)));
    constexpr std::size_t L = 16 / sizeof(T);
    const T* p = a.data();
    const std::size_t n = a.size();
    if (n == 0) return {std::nan(""), std::nan("")};
    V lo, hi, nan = {};
    for (std::size_t j = 0; j < L; ++j) lo[j] = hi[j] = p[0];
    std::size_t k = 0;
    for (; k + L <= n; k += L) {
        V v;
        std::memcpy(&v, p + k, sizeof v);
        nan = v != v ? v : nan;  // keeps a NaN once seen
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    T l = lo[0], h = hi[0];
    bool any = false;
    for (std::size_t j = 0; j < L; ++j) {
        any |= nan[j] != nan[j];
        l = lo[j] < l ? lo[j] : l;
        h = hi[j] > h ? hi[j] : h;
    }
    for (; k < n; ++k) {
        any |= p[k] != p[k];
        l = p[k] < l ? p[k] : l;
        h = p[k] > h ? p[k] : h;
    }
    if (any) return {std::nan(""), std::nan("")};
    return {static_cast<double>(l), static_cast<double>(h)};
}
template <class A>
std::size_t nonfinite_of(const A& a) {
    const auto* p = a.data();
    std::size_t n = 0;
    for (std::size_t k = 0; k < a.size(); ++k) n += (p[k] - p[k]) != 0;  // NaN for NaN and +-inf, else 0
    return n;
}
}  // namespace

std::size_t count_nonfinite(const xt::xarray<double>& a) { return nonfinite_of(a); }

std::pair<double, double> value_range(const xt::xarray<double>& a) { return range_of(a); }

std::pair<double, double> value_range(const Tensor& t) {
    return t.dtype == DType::float64 ? range_of(t.f64) : range_of(t.f32);
}

std::size_t count_nonfinite(const Tensor& t) {
    return t.dtype == DType::float64 ? nonfinite_of(t.f64) : nonfinite_of(t.f32);
}

double ulp(DType d, double v) {
    if (!std::isfinite(v)) return std::numeric_limits<double>::quiet_NaN();
    int mant = 52, emin = -1022;
    switch (d) {
        case DType::float16: mant = 10, emin = -14; break;
        case DType::bfloat16: mant = 7, emin = -126; break;
        case DType::float32: mant = 23, emin = -126; break;
        case DType::float64: break;
    }
    int e = emin;
    if (v != 0) {
        std::frexp(v, &e);  // |v| = m * 2^e with 0.5 <= m < 1: leading bit at 2^(e-1)
        e = std::max(e - 1, emin);
    }
    return std::ldexp(1.0, e - mant);
}

double elementwise_diff(double a, double b) {
    if (a == b) return 0;  // equal finite values and equal infinities
    const bool fa = std::isfinite(a), fb = std::isfinite(b);
    if (fa && fb) return std::fabs(a - b);
    if (std::isnan(a) && std::isnan(b)) return 0;
    return std::numeric_limits<double>::infinity();
}

Deviation deviation(const xt::xarray<double>& y, const xt::xarray<double>& ref, DType ulp_dtype,
                    const std::vector<std::uint8_t>* include, const xt::xarray<double>* ulp_basis) {
    if (y.size() != ref.size() || (include && include->size() != y.size()) ||
        (ulp_basis && ulp_basis->size() != y.size()))
        throw std::logic_error("deviation: sizes differ");
    Deviation dv;
    double worst = -1;
    for (std::size_t i = 0; i < y.size(); ++i) {
        if (include && !(*include)[i]) continue;
        ++dv.compared;
        const double a = y.data()[i], r = ref.data()[i];
        if (!std::isfinite(a)) ++dv.nonfinite;
        const double d = elementwise_diff(a, r);
        if (d > worst) worst = d, dv.worst = i;
        dv.max_abs = std::max(dv.max_abs, d);
        if (d > 0)  // relative to a reference of 0 (or non-finite) any difference is infinite
            dv.max_rel = std::max(dv.max_rel, std::isfinite(r) && r != 0 ? d / std::fabs(r)
                                                                         : std::numeric_limits<double>::infinity());
        if (d > 0) {
            const double u = ulp(ulp_dtype, ulp_basis ? ulp_basis->data()[i] : r);
            dv.max_ulp = std::max(dv.max_ulp, std::isnan(u) ? std::numeric_limits<double>::infinity() : d / u);
        }
    }
    return dv;
}

std::vector<std::size_t> broadcast_offsets(const Shape& xs, const Shape& os) {
    if (os.size() != xs.size()) throw std::logic_error("broadcast_offsets: ranks differ");
    std::vector<std::size_t> stride(xs.size(), 0);
    std::size_t s = 1;
    for (std::size_t d = xs.size(); d-- > 0;) {
        if (os[d] != xs[d] && os[d] != 1) throw std::logic_error("broadcast_offsets: shapes do not broadcast");
        stride[d] = os[d] == 1 ? 0 : s;
        s *= os[d];
    }
    const std::size_t n = num_elements(xs);
    std::vector<std::size_t> out(n);
    std::vector<std::size_t> idx(xs.size(), 0);
    std::size_t off = 0;
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = off;
        for (std::size_t d = xs.size(); d-- > 0;) {  // odometer, innermost axis first
            off += stride[d];
            if (++idx[d] < xs[d]) break;
            off -= stride[d] * xs[d];
            idx[d] = 0;
        }
    }
    return out;
}

std::vector<std::size_t> statistic_offsets(const Resolution& res) {
    std::vector<std::size_t> out = broadcast_offsets(res.view_shape, res.stats_shape);
    if (res.replicas.empty() || res.view_shape.empty() || res.view_shape[0] == 0) return out;
    const std::size_t per_sample = out.size() / res.view_shape[0];
    std::size_t i = 0;
    for (std::size_t r = 0; r < res.replicas.size(); ++r)
        for (std::size_t k = 0; k < res.replicas[r] * per_sample; ++k) out[i++] += r * res.num_stats;
    return out;
}

Step forward_batch(NormLayer& layer, const Batch& b) {
    Step s;
    if (OutputPool* pool = current_output_pool()) static_cast<StepResult&>(s) = pool->take(b.x);
    layer.forward(b.x, b.channel_axis, b.name, b.has_mask() ? &b.mask : nullptr, s);
    return s;
}

Step apply_norm(const NormDef& def, DType dtype, const Batch& b) {
    NormLayer layer(def, dtype);
    return forward_batch(layer, b);
}

NormDef with_training(NormDef def, bool training) {
    def.training = training;
    return def;
}

GroupLayout group_layout(const Resolution& res, const xt::xarray<std::uint8_t>* mask) {
    const Shape& vs = res.view_shape;
    GroupLayout g;
    g.num_groups = num_elements(res.stats_shape);
    g.group = broadcast_offsets(vs, res.stats_shape);
    Shape ps(vs.size(), 1);
    for (auto a : res.spec.param_axes) ps[a] = vs[a];
    g.param = broadcast_offsets(vs, ps);
    const std::size_t n = num_elements(vs);
    g.real.assign(n, 1);
    if (mask && mask->size() > 0) {
        xt::xarray<std::uint8_t> mv = view_mask(*mask, res);
        Shape ms(mv.shape().begin(), mv.shape().end());
        std::vector<std::size_t> mo = broadcast_offsets(vs, ms);
        for (std::size_t i = 0; i < n; ++i) g.real[i] = mv.data()[mo[i]] ? 1 : 0;
    }
    g.members.resize(g.num_groups);
    g.all.resize(g.num_groups);
    for (std::size_t i = 0; i < n; ++i) {
        g.all[g.group[i]].push_back(i);
        if (g.real[i]) g.members[g.group[i]].push_back(i);
    }
    return g;
}

double max_finite(DType d) {
    switch (d) {
        case DType::float16: return 65504.0;
        case DType::bfloat16: return std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
        case DType::float32: return std::numeric_limits<float>::max();
        case DType::float64: return std::numeric_limits<double>::max();
    }
    return std::numeric_limits<double>::max();
}

NarrowStats narrow_stats(DType d, double eps, const Moments& batch) {
    NarrowStats s;
    s.eps_in_dtype = round_to(d, eps);
    // ForwardResult::batch is default-constructed (0-d) when running statistics were used.
    if (batch.var.dimension() == 0 || batch.count.size() != batch.var.size()) return s;
    const double big = max_finite(d);
    for (std::size_t g = 0; g < batch.var.size(); ++g) {
        const double v = batch.var.data()[g];
        const double m = batch.mean.size() == batch.var.size() ? batch.mean.data()[g] : 0.0;
        const double n = batch.count.data()[g];
        if (n > 0 && v > big) ++s.var_overflow_groups;
        if (n > 0 && n * (v + m * m) > big) ++s.sumsq_overflow_groups;
    }
    return s;
}

double rounding_tolerance(DType d, const xt::xarray<double>& y, const std::vector<std::uint8_t>* include) {
    double peak = 1;
    for (std::size_t i = 0; i < y.size(); ++i) {
        const double v = y.data()[i];
        if ((!include || (*include)[i]) && std::isfinite(v)) peak = std::max(peak, std::fabs(v));
    }
    return 8 * machine_eps(d) * peak;
}

KeyInfo save_key(const std::vector<std::string>& arrays) {
    return {"save", "a list of arrays to write: " + join_words(arrays, " or ")};
}

}  // namespace normlab
