// invariance: is a norm's output unchanged when the input is scaled by a > 0 or shifted
// by a constant, with one constant for the whole batch, one per sample, or one per channel?
// The verdict is the exact mathematics (eps = 0, float64); the run's eps and dtype make it
// approximate, and max_abs_diff says by how much.
#include <cmath>

#include "analysis/batch_ops.hpp"
#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

struct Options {
    double scale_lo = 0.5, scale_hi = 2.0;
    double shift_lo = -3.0, shift_hi = 3.0;
    double tolerance = 1e-9;
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    auto range = [&](const char* key, double& lo, double& hi) {
        if (auto v = r.numbers(key)) {
            if (v->size() != 2 || !((*v)[0] <= (*v)[1]) || !std::isfinite((*v)[0]) || !std::isfinite((*v)[1]))
                r.at(key).fail("expected [low, high] with low <= high, both finite");
            lo = (*v)[0], hi = (*v)[1];
        }
    };
    range("scale_range", o.scale_lo, o.scale_hi);
    if (!(o.scale_lo > 0)) r.at("scale_range").fail("scales must be > 0, but the range starts at " + format_number(o.scale_lo));
    range("shift_range", o.shift_lo, o.shift_hi);
    o.tolerance = r.nonnegative("tolerance", 1e-9);
    r.finish();
    return o;
}

NormDef with_eps(NormDef d, double eps) {
    d.eps = eps;
    return d;
}

enum class Granularity { batch, sample, channel };
const char* granularity_name(Granularity g) {
    return g == Granularity::batch ? "batch" : g == Granularity::sample ? "sample" : "channel";
}

// x scaled (or shifted) with one constant per index along `axis` (one in all for batch).
// The constants are drawn uniformly in [lo, hi).
xt::xarray<double> transform(const xt::xarray<double>& x, bool scale, Granularity g, std::size_t channel_axis,
                             double lo, double hi, Rng& rng) {
    const Shape s(x.shape().begin(), x.shape().end());
    const std::size_t axis = g == Granularity::sample ? 0 : channel_axis;
    const std::size_t n = g == Granularity::batch ? 1 : s[axis];
    std::size_t inner = 1;
    for (std::size_t a = axis + 1; a < s.size(); ++a) inner *= s[a];
    std::vector<double> k(n);
    for (auto& v : k) v = lo + (hi - lo) * rng.uniform();
    xt::xarray<double> out = x;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const double c = k[g == Granularity::batch ? 0 : (i / inner) % n];
        out.data()[i] = scale ? out.data()[i] * c : out.data()[i] + c;
    }
    return out;
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = invariance_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        const xt::xarray<double> x = b.x.to_double();
        const Batch b64 = with_values(b, x, DType::float64);
        Rng rng(derive_seed(ctx.seed, "invariance/" + dn));
        // The transformed inputs, drawn once per data so that every norm sees the same ones.
        struct Case {
            bool scale;
            Granularity g;
            xt::xarray<double> x;
        };
        std::vector<Case> cases;
        for (bool scale : {true, false})
            for (Granularity g : {Granularity::batch, Granularity::sample, Granularity::channel})
                cases.push_back({scale, g,
                                 transform(x, scale, g, b.channel_axis, scale ? o.scale_lo : o.shift_lo,
                                           scale ? o.scale_hi : o.shift_hi, rng)});
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            const Step base = apply_norm(def, ctx.dtype, b);
            const xt::xarray<double> y = base.fwd.y.to_double();
            const NormDef d0 = with_eps(def, 0.0);
            const xt::xarray<double> y0 = apply_norm(d0, DType::float64, b64).fwd.y.to_double();
            const xt::xarray<double> y64 = apply_norm(def, DType::float64, b64).fwd.y.to_double();
            double peak = 1;
            for (double v : y0)
                if (std::isfinite(v)) peak = std::max(peak, std::fabs(v));
            for (const auto& c : cases) {
                const xt::xarray<double> yt = apply_norm(def, ctx.dtype, with_values(b, c.x, ctx.dtype)).fwd.y.to_double();
                const Batch bt64 = with_values(b, c.x, DType::float64);
                const xt::xarray<double> yt0 = apply_norm(d0, DType::float64, bt64).fwd.y.to_double();
                const xt::xarray<double> yt64 = apply_norm(def, DType::float64, bt64).fwd.y.to_double();
                const double diff = deviation(yt, y, ctx.dtype).max_abs;
                const double diff0 = deviation(yt0, y0, DType::float64).max_abs;
                const double diff64 = deviation(yt64, y64, DType::float64).max_abs;
                t.add_row({dn, nn, norm_type_name(def.type), std::string(c.scale ? "scale" : "shift"),
                           std::string(granularity_name(c.g)), diff, diff0 <= o.tolerance * peak, diff0, diff64,
                           base.res.eps});
            }
        }
    }
    return t;
}

// Memory beyond the batch, with E the data's elements and d bytes per value (value_bytes):
// the data in float64 twice and its six transformed copies (64 E), then per norm its
// outputs in the dtype and the float64 references (8 E each) and per transform the
// transformed input in the dtype and in float64 with three outputs and their float64
// copies: 144 + 2d bytes per element; and the steps' statistics, up to two at a time with
// what they were computed from (5 kStepGroupBytes per group: 275 bytes measured with groups
// of one element). Measured with four norms on (64, 256, 256) float32
// at 136 bytes per element (estimate 154).
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    return {(Sat(w.elements) * (144 + 2 * value_bytes(w.dtype)) + Sat(most_groups(spec.norms, w)) * (5 * kStepGroupBytes)).n,
            ""};
}

// Six rows per norm: scale and shift, per batch, sample and channel.
TableRows rows(const AnalysisSpec& spec, const WorkInputs&) { return {spec.norms.size() * 6, ""}; }

}  // namespace

AnalysisType invariance_analysis() {
    AnalysisType a;
    a.name = "invariance";
    a.summary = "is the output invariant to scaling/shifting the input per batch, sample or channel; by how much eps breaks it";
    a.columns = {"data", "norm", "type", "transform", "granularity", "max_abs_diff", "invariant",
                 "max_abs_diff_eps0", "max_abs_diff_f64", "eps"};
    a.figure.title = "output change when the input is scaled or shifted, per norm and granularity\n"
                     "(the legend gives the verdict: invariant where the change without eps, in float64, is within the tolerance)";
    a.figure.category = {"data", "norm"};
    // The verdict in the colour too: a change of 0.6 may pass (eps's share of a small
    // variance) while one of 1.9 fails, and bar lengths alone do not say which.
    a.figure.series = {"granularity", "invariant"};
    a.figure.series_kept = {"invariant"};
    a.figure.value_names = {{"invariant=true", "invariant"}, {"invariant=false", "not invariant"}};
    // Cool colours hold, warm ones fail (Vega's tableau10 hues).
    a.figure.series_colors = {{"batch · invariant", "#4c78a8"},     {"sample · invariant", "#72b7b2"},
                              {"channel · invariant", "#54a24b"},   {"batch · not invariant", "#e45756"},
                              {"sample · not invariant", "#f58518"}, {"channel · not invariant", "#eeca3b"}};
    a.figure.panels = {"transform"};
    a.figure.metrics = {{"max_abs_diff", "max |output change|"}};
    a.keys = {{"scale_range", "[0.5, 2]"}, {"shift_range", "[-3, 3]"}, {"tolerance", "1e-9"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.work_bytes = work_bytes;
    a.rows = rows;
    a.run = run;
    return a;
}

}  // namespace normlab
