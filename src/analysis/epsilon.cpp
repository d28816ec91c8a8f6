// epsilon: how much eps changes a norm's output, over a grid of eps values, input scales
// (where the group variance falls below eps, eps takes over) and dtypes.
//
// Closed form behind the std columns: a group of variance v normalised with eps has
// x_hat = (x - mean) / sqrt(v + eps), whose std is sqrt(v / (v + eps)) instead of 1
// (RMSNorm: the root mean square, with v the mean square).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "analysis/batch_ops.hpp"
#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

struct Options {
    std::optional<std::vector<double>> eps;  ///< absent: the norm's eps in effect
    std::vector<double> scales = {1.0};
    std::vector<DType> dtypes;               ///< empty: the run dtype
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    auto nonempty = [&](const char* key, std::size_t n) {
        if (n == 0) r.at(key).fail("list is empty");
    };
    if (auto e = r.numbers("eps")) {
        nonempty("eps", e->size());
        for (std::size_t i = 0; i < e->size(); ++i)
            if (!((*e)[i] >= 0) || !std::isfinite((*e)[i]))
                r.at("eps").child(i).fail("eps must be >= 0 and finite, but got " + format_number((*e)[i]));
        o.eps = *e;
    }
    if (auto s = r.numbers("scales")) {
        nonempty("scales", s->size());
        for (std::size_t i = 0; i < s->size(); ++i)
            if (!((*s)[i] > 0) || !std::isfinite((*s)[i]))
                r.at("scales").child(i).fail("a scale must be > 0 and finite, but got " + format_number((*s)[i]));
        o.scales = *s;
    }
    if (auto d = r.strings("dtypes")) {
        nonempty("dtypes", d->size());
        for (std::size_t i = 0; i < d->size(); ++i) {
            try {
                o.dtypes.push_back(parse_dtype((*d)[i]));
            } catch (const InputError& e) {
                r.at("dtypes").child(i).fail(e.what());
            }
        }
    }
    r.finish();
    return o;
}

// One eps of the grid and where it comes from.
struct EpsPoint {
    double eps;
    const char* source;  ///< "list" (the analysis' eps), "norm" (the norm's own eps), "default"
};

// The eps values for dtype dt: the analysis' list, else the norm's own eps if it sets one;
// then always the default the norm would get for dt (type, convention, compute type), so
// the effect of leaving eps unset is visible per dtype (RMSNorm under torch: float32's
// machine epsilon for float16/bfloat16/float32 inputs, float64's for float64).
std::vector<EpsPoint> eps_points(const Options& o, const NormDef& def, DType dt) {
    std::vector<EpsPoint> out;
    if (o.eps)
        for (double e : *o.eps) out.push_back({e, "list"});
    else if (def.eps)
        out.push_back({*def.eps, "norm"});
    out.push_back({default_eps(def.type, def.convention, dt), "default"});
    return out;
}

NormDef with_eps(NormDef d, double eps) {
    d.eps = eps;
    return d;
}

// The same norm without its affine step: its output is x_hat.
NormDef without_affine(NormDef d) {
    d.affine = false;
    d.weight.reset();
    d.bias.reset();
    return d;
}

// Mean and max over finite entries of |s - 1| (NaN when none is finite).
std::pair<double, double> std_error(const xt::xarray<double>& std) {
    double sum = 0, mx = 0;
    std::size_t n = 0;
    for (double s : std) {
        if (!std::isfinite(s)) continue;
        const double e = std::fabs(s - 1);
        sum += e, mx = std::max(mx, e), ++n;
    }
    if (n == 0) return {std::nan(""), std::nan("")};
    return {sum / static_cast<double>(n), mx};
}

// Mean |v| over finite values at positions where mask is set.
double mean_abs(const xt::xarray<double>& v, const xt::xarray<std::uint8_t>& mask) {
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (!mask.data()[i] || !std::isfinite(v.data()[i])) continue;
        sum += std::fabs(v.data()[i]), ++n;
    }
    return n ? sum / static_cast<double>(n) : std::nan("");
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    const std::vector<DType> dtypes = o.dtypes.empty() ? std::vector<DType>{ctx.dtype} : o.dtypes;
    Table t;
    t.columns = epsilon_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        const xt::xarray<double> x = b.x.to_double();
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            for (DType dt : dtypes)
                for (const EpsPoint& ep : eps_points(o, def, dt))
                    for (double scale : o.scales) {
                        const double eps = ep.eps;
                        const Batch bs = with_values(b, x * scale, dt);
                        const NormDef de = with_eps(def, eps);
                        const Step s = apply_norm(de, dt, bs);
                        const Step h = apply_norm(without_affine(de), dt, bs);
                        // Reference: eps = 0 in float64 on the very same (rounded) input.
                        const Step r0 =
                            apply_norm(with_eps(def, 0.0), DType::float64, with_values(bs, bs.x.to_double(), DType::float64));

                        const xt::xarray<std::uint8_t>* mask = def.mask ? &bs.mask : nullptr;
                        const GroupSummary gs = group_summary(h.fwd.y, h.res, mask, h.res.spec.center);
                        const auto err = std_error(gs.std);  // skips the NaN of empty groups
                        const xt::xarray<std::uint8_t> real = def.mask ? full_mask(bs) : xt::ones<std::uint8_t>(bs.x.shape());
                        const double mabs = mean_abs(h.fwd.y.to_double(), real);

                        // Groups whose eps = 0 variance is 0 give 0/0 there: leave them out
                        // (and fully padded groups, whose variance is NaN).
                        const std::vector<std::size_t> group = statistic_offsets(r0.res);
                        std::vector<std::uint8_t> include(group.size());
                        for (std::size_t i = 0; i < group.size(); ++i) include[i] = r0.fwd.var.data()[group[i]] > 0;
                        long long zero_var = 0;
                        for (double v : r0.fwd.var) zero_var += v == 0 ? 1 : 0;
                        const xt::xarray<double> y = s.fwd.y.to_double();
                        const Deviation dv = deviation(y, r0.fwd.y.to_double(), dt, &include);
                        const double nan = std::numeric_limits<double>::quiet_NaN();

                        std::size_t finite = 0, below = 0;
                        for (double v : s.fwd.var) {
                            if (!std::isfinite(v)) continue;
                            ++finite;
                            below += v < 10 * eps ? 1 : 0;
                        }
                        // What holding eps and the statistics in dt would do (the engine works
                        // in double and is immune): eps underflow, variance/sum-of-squares overflow.
                        const NarrowStats ns = narrow_stats(dt, eps, s.fwd.batch);
                        t.add_row({dn, nn, norm_type_name(def.type), dtype_name(dt), eps, scale, mabs, err.first,
                                   err.second, dv.compared ? dv.max_abs : nan,
                                   finite ? static_cast<double>(below) / static_cast<double>(finite) : nan,
                                   dv.compared ? dv.max_rel : nan, static_cast<long long>(s.fwd.var.size()), zero_var,
                                   static_cast<long long>(summarize_output(s.fwd.y, s.res, gs.count).nonfinite),
                                   ns.eps_in_dtype,
                                   static_cast<long long>(std::max(ns.var_overflow_groups, ns.sumsq_overflow_groups)),
                                   std::string(ep.source), static_cast<long long>(empty_groups(gs.count))});
                    }
        }
    }
    return t;
}

// Memory beyond the batch, with E the data's elements and d bytes per value of the widest
// dtype the analysis works in (value_bytes): the data's float64 copy (8 E) and, per eps and
// scale, the scaled input in the dtype, the outputs with and without the affine step and
// the float64 reference's (its input and output in float64), their float64 copies, a
// statistic index per element and two masks: 56 + 3d bytes per element; and the three
// steps' statistics with the output's group summary and the variances' copies (5
// kStepGroupBytes per group: 290 bytes measured with groups of one element). Measured with
// four norms on (64, 256, 256) float32 at 55 bytes per element (estimate 70), on (64, 128, 256)
// float64 at 66 (estimate 82).
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    std::size_t d = value_bytes(w.dtype);
    if (!o.dtypes.empty()) {
        d = 0;
        for (DType dt : o.dtypes) d = std::max(d, value_bytes(dt));
    }
    return {(Sat(w.elements) * (56 + 3 * d) + Sat(most_groups(spec.norms, w)) * (5 * kStepGroupBytes)).n, ""};
}

// A row per norm, dtype, eps (the listed ones, or the norm's own, then the dtype's default)
// and scale.
TableRows rows(const AnalysisSpec& spec, const WorkInputs&) {
    const Options o = read_options(spec);
    const std::size_t dtypes = o.dtypes.empty() ? 1 : o.dtypes.size(), eps = (o.eps ? o.eps->size() : 1) + 1;
    TableRows r{(Sat(spec.norms.size()) * dtypes * eps * o.scales.size()).n, ""};
    // The longest list the entry gives multiplies the rows most.
    std::size_t longest = 1;
    for (const auto& [key, n] : {std::pair<const char*, std::size_t>{"eps", eps - 1}, {"scales", o.scales.size()},
                                 {"dtypes", dtypes}})
        if (n > longest && !key_if_set(spec, key).empty()) longest = n, r.key = key;
    return r;
}

}  // namespace

AnalysisType epsilon_analysis() {
    AnalysisType a;
    a.name = "epsilon";
    a.summary = "eps x input scale (x dtype) sweep: x_hat size, output std vs 1, difference from eps = 0";
    a.columns = {"data", "norm", "type", "dtype", "eps", "scale", "mean_abs_xhat", "std_err_mean",
                 "std_err_max", "max_abs_diff_vs_eps0", "frac_var_below_10eps", "max_rel_diff_vs_eps0",
                 "num_groups", "zero_var_groups", "nonfinite_count", "eps_in_dtype", "stats_overflow_groups",
                 "eps_source", "empty_groups"};
    a.figure.title = "max over groups of |std(x_hat) - 1| against eps: a panel per norm, a line per input scale";
    a.figure.kind = FigureKind::lines;
    a.figure.x = "eps";
    a.figure.x_log = true;
    a.figure.series = {"scale"};
    a.figure.panels = {"data", "dtype", "norm"};
    a.figure.metrics = {{"std_err_max", "max |std(x_hat) - 1|"}};
    a.figure.log = true;
    a.keys = {{"eps", "the norm's"}, {"scales", "[1]"}, {"dtypes", "the run's"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.work_bytes = work_bytes;
    a.rows = rows;
    a.run = run;
    return a;
}

}  // namespace normlab
