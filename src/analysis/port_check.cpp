// port_check: compare a reference norm definition with one or more "ports" of it (the same
// layer as another framework or a hand-written re-implementation defines it) on the same
// data, so that a porting mismatch (eps, eps placement, variance estimator, momentum
// meaning, weight offset) shows as numbers before anyone trains.
//
// Without "steps"/"train_data", each norm makes one forward pass on each listed data as
// the config defines it (training or not), and the outputs (and running statistics after
// that step) are compared. With "steps": K (or "train_data"), both norms first take K
// training steps on the same batches, then normalise each listed data in eval mode (with
// their running statistics, where they keep any): what a ported model would do at
// inference after the same training.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "data/random.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"
#include "tensor/numbers.hpp"

namespace normlab {

namespace {

struct Pair {
    std::string reference, port;
};

struct Options {
    std::vector<Pair> pairs;
    long long steps = 0;                   ///< resampled training steps (0: none)
    std::vector<std::string> train_data;   ///< explicit training batches, in order
    long long worst_groups = 1;            ///< rows per comparison
};

constexpr std::size_t kMaxValues = 16;  ///< values of a group written to the CSV

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    auto check_norm = [&](const std::string& n, const JsonLocation& at) {
        if (std::find(spec.norms.begin(), spec.norms.end(), n) == spec.norms.end()) {
            std::string hint = did_you_mean(n, spec.norms);
            at.fail(quoted_text(n) + " is not among this analysis' norms (list it under \"norms\")" +
                    (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?"));
        }
    };
    if (const Json* pj = r.raw("pairs")) {
        if (r.has("reference") || r.has("ports"))
            r.at("pairs").fail("give either pairs or reference/ports, not both",
                               {r.at("reference").pointer, r.at("ports").pointer});
        JsonLocation at = r.at("pairs");
        if (!pj->is_array() || pj->empty()) at.fail("expected a non-empty list of [reference, port] pairs");
        for (std::size_t i = 0; i < pj->size(); ++i) {
            const Json& e = (*pj)[i];
            if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string())
                at.child(i).fail("expected a pair of norm names [reference, port], but got " + e.dump());
            Pair p{e[0].get<std::string>(), e[1].get<std::string>()};
            check_norm(p.reference, at.child(i).child(std::size_t{0}));
            check_norm(p.port, at.child(i).child(std::size_t{1}));
            o.pairs.push_back(p);
        }
    } else {
        std::string ref = spec.norms.empty() ? std::string() : spec.norms.front();
        if (auto rr = r.string("reference")) {
            ref = *rr;
            check_norm(ref, r.at("reference"));
        }
        std::vector<std::string> ports;
        if (auto ps = r.strings("ports")) {
            if (ps->empty()) r.at("ports").fail("list is empty");
            for (std::size_t i = 0; i < ps->size(); ++i) {
                check_norm((*ps)[i], r.at("ports").child(i));
                if ((*ps)[i] == ref) r.at("ports").child(i).fail(quoted_text(ref) + " is the reference itself");
            }
            ports = *ps;
        } else {
            for (const auto& n : spec.norms)
                if (n != ref) ports.push_back(n);
        }
        if (ports.empty())
            spec.loc.child("norms").fail("port_check needs a reference and at least one port: list two or more norms");
        for (const auto& p : ports) o.pairs.push_back({ref, p});
    }
    if (r.has("steps") && r.has("train_data"))
        r.at("steps").fail("give either steps or train_data, not both", {r.at("train_data").pointer});
    o.steps = r.has("steps") ? training_steps(r, "steps", 0, 1) : 0;  // 0: train_data or no training
    if (auto td = r.strings("train_data")) {
        if (td->empty()) r.at("train_data").fail("list is empty");
        o.train_data = *td;
    }
    o.worst_groups = r.integer("worst_groups", 1);
    if (o.worst_groups < 1)
        r.at("worst_groups").fail("worst_groups must be >= 1, but got " + std::to_string(o.worst_groups));
    r.finish();
    return o;
}

/// A batch of the same shape whose rows (axis 0) are drawn with replacement from b's
/// (bootstrap resampling); the padding mask and lengths follow their rows.
Batch resample_rows(const Batch& b, Rng& rng) {
    Batch out = b;
    const Shape xs = b.x.shape();
    if (xs.empty() || xs[0] == 0) return out;
    const std::size_t n = xs[0];
    std::vector<std::size_t> pick(n);
    for (auto& j : pick) j = static_cast<std::size_t>(rng.below(n));
    auto take = [&](const auto& src, auto& dst) {
        const std::size_t row = src.size() / n;
        for (std::size_t i = 0; i < n; ++i)
            std::copy_n(src.data() + pick[i] * row, row, dst.data() + i * row);
    };
    const xt::xarray<double> x = b.x.to_double();
    xt::xarray<double> y = xt::xarray<double>::from_shape(x.shape());
    take(x, y);
    out.x = Tensor::from_double(y, b.x.dtype);  // exact: the values are already in dtype
    if (b.has_mask() && b.mask.shape()[0] == n) take(b.mask, out.mask);
    if (b.lengths.size() == n)
        for (std::size_t i = 0; i < n; ++i) out.lengths[i] = b.lengths[pick[i]];
    return out;
}

/// One norm's side of a comparison: its eval output on a batch and running statistics.
struct Side {
    Step step;
    xt::xarray<double> y;
    bool has_running = false;
    bool updated = false;  ///< its running statistics took at least one update (training)
    xt::xarray<double> running_mean, running_var;
};

/// Trains a copy of `def` on `train` (in order), then normalises `b` in eval mode with the
/// running statistics reached; without training batches, one forward as `def` says.
Side run_side(const NormDef& def, DType dtype, const std::vector<const Batch*>& train, const Batch& b) {
    Side s;
    if (train.empty()) {
        NormLayer layer(def, dtype);
        s.step = forward_batch(layer, b);
        s.has_running = layer.has_running_stats();
        s.updated = s.step.res.update_running;
        s.running_mean = layer.running_mean();
        s.running_var = layer.running_var();
    } else {
        NormLayer trainer(with_training(def, true), dtype);
        for (const Batch* tb : train) forward_batch(trainer, *tb);
        NormDef ed = with_training(def, false);
        s.has_running = trainer.has_running_stats();
        s.updated = s.has_running;
        if (s.has_running) {
            ParamInit m, v;
            m.kind = v.kind = ParamInit::Kind::values;
            m.values = trainer.running_mean();
            v.values = trainer.running_var();
            ed.running_mean = m;
            ed.running_var = v;
            s.running_mean = trainer.running_mean();
            s.running_var = trainer.running_var();
        }
        // check() made sure the training batches have the data's channels.
        NormLayer evaluator(ed, dtype);
        s.step = forward_batch(evaluator, b);
    }
    s.y = s.step.fwd.y.to_double();
    return s;
}

/// The settings in effect in which port `b` differs from reference `a`, in words, "; "
/// between them ("eps 1e-05 vs 0.001; running_var from the unbiased vs the biased batch
/// variance"; "weight values differ by up to 0.5": the parameters and given running
/// statistics count by value), "none" when they agree on all: what a porter changes to
/// close the gap. The running statistics' rules count only where both norms keep running
/// statistics and at least one of them updated them (not two norms in eval mode without
/// training). Momentum
/// is compared as the weight of the new batch (new_batch_weight), the one quantity the
/// conventions' momenta (PyTorch 0.1, Keras 0.99) both describe.
std::string settings_differ(const NormDef& a, const Side& sa, const NormDef& b, const Side& sb, DType dtype) {
    std::vector<std::string> d;
    auto differ = [&](bool same, const std::string& what, const std::string& va, const std::string& vb) {
        if (!same) d.push_back(what + (what.empty() ? "" : " ") + va + " vs " + vb);
    };
    const Resolution &ra = sa.step.res, &rb = sb.step.res;
    differ(a.type == b.type, "type", norm_type_name(a.type), norm_type_name(b.type));
    differ(ra.eps == rb.eps, "eps", format_number(ra.eps), format_number(rb.eps));
    auto placement = [](EpsPlacement p) { return p == EpsPlacement::inside_sqrt ? "inside the sqrt" : "added to the std"; };
    differ(a.eps_placement == b.eps_placement, "eps", placement(a.eps_placement), placement(b.eps_placement));
    // PyTorch's batch_norm takes rstd = 0 where var and eps are both 0; the others divide by 0.
    auto zero_rstd = [](const Resolution& r) { return r.spec.zero_rstd_at_zero_var ? "0" : "1/0"; };
    differ(ra.spec.zero_rstd_at_zero_var == rb.spec.zero_rstd_at_zero_var || (ra.eps != 0 && rb.eps != 0),
           "rstd where var = eps = 0:", zero_rstd(ra), zero_rstd(rb));
    auto variance = [](VarianceEstimator v) { return v == VarianceEstimator::biased ? "the biased" : "the unbiased"; };
    differ(a.variance == b.variance, "normalised with", variance(a.variance), std::string(variance(b.variance)) + " variance");
    auto params = [](const Resolution& r) {
        return std::string(r.has_weight ? (r.has_bias ? "weight and bias" : "weight only") : (r.has_bias ? "bias only" : "none"));
    };
    differ(params(ra) == params(rb), "affine parameters", params(ra), params(rb));
    // The form of the affine step only where both have it, and its rounding only where the
    // output is a half format: elsewhere they change nothing.
    const bool weights = ra.has_weight && rb.has_weight;
    auto scale = [](double off) { return off == 0 ? std::string("w") : format_number(off) + " + w"; };
    if (weights) differ(a.weight_offset == b.weight_offset, "scale", scale(a.weight_offset), scale(b.weight_offset));
    // Parameters over fewer normalized axes (Flax's feature_axes, an ONNX Scale broadcast
    // along the normalized shape) hold other values than PyTorch's over all of them.
    const bool trailing_a = a.type == NormType::layernorm || a.type == NormType::rmsnorm;
    const bool trailing_b = b.type == NormType::layernorm || b.type == NormType::rmsnorm;
    auto axes = [](const Resolution& r) {
        return "over axes " + compact_shape(Shape(r.spec.param_axes.begin(), r.spec.param_axes.end())) + " of shape " +
               compact_shape(r.param_shape);
    };
    if ((ra.has_weight || ra.has_bias) && (rb.has_weight || rb.has_bias) && trailing_a && trailing_b)
        differ(ra.spec.param_axes == rb.spec.param_axes, "affine parameters", axes(ra), axes(rb));
    // The values the parameters hold, where both norms have them in one shape: a port loaded
    // with other weights differs by them, not by a setting. A weight is compared as the scale
    // it gives (weight_offset + w), so that a Gemma port (1 + w against a stored w + 1) is
    // named by its form above and not again by its values. Running statistics count only as
    // given to two norms in inference, untrained (training sets them, and the running_*
    // columns compare the result).
    auto values = [&](bool both, const xt::xarray<double>& va, const xt::xarray<double>& vb, const std::string& name,
                      const std::optional<ParamInit>& ia, const std::optional<ParamInit>& ib) {
        if (!both || va.shape() != vb.shape()) return;
        const double worst = deviation(vb, va, DType::float64).max_abs;
        if (worst == 0) return;
        const bool da = ia && ia->kind == ParamInit::Kind::generated, db = ib && ib->kind == ParamInit::Kind::generated;
        d.push_back(name + " values differ by up to " + format_significant(worst, 3) +
                    (da && db   ? " (each norm draws its own: the seed comes from the parameter's place in the config)"
                     : da || db ? " (one is drawn, from a seed that comes from its place in the config)"
                                : ""));
    };
    if (weights)
        values(true, sa.step.in.weight + a.weight_offset, sb.step.in.weight + b.weight_offset, "weight", a.weight, b.weight);
    values(ra.has_bias && rb.has_bias, sa.step.in.bias, sb.step.in.bias, "bias", a.bias, b.bias);
    const bool given = sa.step.in.given && sb.step.in.given && !sa.updated && !sb.updated;
    values(given, sa.step.in.given_mean, sb.step.in.given_mean, "running_mean", a.running_mean, b.running_mean);
    values(given, sa.step.in.given_var, sb.step.in.given_var, "running_var", a.running_var, b.running_var);
    auto per = [](AffinePer p) { return p == AffinePer::channel ? "per channel" : "per group"; };
    if (weights && a.type == NormType::groupnorm && b.type == NormType::groupnorm)
        differ(a.affine_per == b.affine_per, "affine parameters", per(a.affine_per), per(b.affine_per));
    auto rounding = [](AffineRounding r) { return r == AffineRounding::once ? "once" : "twice"; };
    if (compute_dtype(dtype) != dtype && (ra.has_weight || ra.has_bias || rb.has_weight || rb.has_bias))
        differ(a.affine_rounding == b.affine_rounding, "half-precision output rounded", rounding(a.affine_rounding),
               rounding(b.affine_rounding));
    differ(a.mask == b.mask, "statistics over", a.mask ? "real positions" : "all positions",
           b.mask ? "real positions" : "all positions");
    differ(ra.use_batch_stats == rb.use_batch_stats, "statistics of", ra.use_batch_stats ? "the batch" : "the running values",
           rb.use_batch_stats ? "the batch" : "the running values");
    if (sa.has_running && sb.has_running && (sa.updated || sb.updated)) {
        // 12 digits: 1 - 0.99 is 0.010000000000000009 in double, and a Keras port's 0.99 must
        // read as PyTorch's 0.01.
        auto weight = [](const NormDef& n) {
            const auto m = new_batch_weight(n);
            return m ? format_significant(*m, 12) : std::string("1/steps (cumulative average)");
        };
        auto momentum = [](const NormDef& n) {
            return momentum_text(n) + (n.momentum_null ? "" : " " + convention_name(n.convention));
        };
        differ(weight(a) == weight(b), "running statistics' new-batch weight", weight(a),
               weight(b) + " (momentum " + momentum(a) + " vs " + momentum(b) + ")");
        auto estimator = [](const NormDef& n) { return unbiased_running_var(n) ? "the unbiased" : "the biased"; };
        differ(unbiased_running_var(a) == unbiased_running_var(b), "running_var from", estimator(a),
               std::string(estimator(b)) + " batch variance");
    }
    if (d.empty()) return "none";
    std::string out = d[0];
    for (std::size_t i = 1; i < d.size(); ++i) out += "; " + d[i];
    return out;
}

/// max |a - b| of two running statistics; an empty cell (not applicable) when either norm
/// keeps none, inf when their channel counts differ.
Cell running_diff(const Side& a, const Side& b, bool mean) {
    if (!a.has_running || !b.has_running) return not_applicable();
    const auto& x = mean ? a.running_mean : a.running_var;
    const auto& y = mean ? b.running_mean : b.running_var;
    if (x.size() != y.size()) return std::numeric_limits<double>::infinity();
    return deviation(y, x, DType::float64).max_abs;
}

std::string values_cell(const xt::xarray<double>& y, const std::vector<std::size_t>& idx) {
    std::string s = "[";
    for (std::size_t k = 0; k < idx.size() && k < kMaxValues; ++k) s += (k ? "," : "") + format_number(y.data()[idx[k]]);
    if (idx.size() > kMaxValues) s += ",...";
    return s + "]";
}

std::string multi_index(std::size_t flat, const Shape& shape) {
    Shape idx(shape.size(), 0);
    for (std::size_t d = shape.size(); d-- > 0;) {
        idx[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
    return compact_shape(idx);
}

// The positions (multi-indices into the data) where the port's output differs from the
// reference's, among the compared ones: how many, and the first kMaxValues as
// "[[0,7],[1,3],...]". Bit-exact ports (half-precision rounding order) need the count, a
// reader the places.
std::pair<long long, std::string> differing_positions(const xt::xarray<double>& port, const xt::xarray<double>& ref,
                                                      const std::vector<std::uint8_t>& real, const Shape& shape) {
    long long count = 0;
    std::string s = "[";
    for (std::size_t i = 0; i < ref.size(); ++i) {
        if (!real[i] || elementwise_diff(port.data()[i], ref.data()[i]) == 0) continue;
        if (count < static_cast<long long>(kMaxValues)) s += (count ? "," : "") + multi_index(i, shape);
        else if (count == static_cast<long long>(kMaxValues)) s += ",...";
        ++count;
    }
    return {count, s + "]"};
}

// train_data names data entries; each norm binds as run_side() uses it: as defined without
// training steps; else in training mode on every training batch (train_data, or the data's
// own rows resampled) and then in inference mode on the data, with running statistics whose
// channels the training batches set.
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    for (std::size_t i = 0; i < o.train_data.size(); ++i)
        if (!ctx.batches->count(o.train_data[i])) {
            std::vector<std::string> names;
            for (const auto& kv : *ctx.batches) names.push_back(kv.first);
            std::string hint = did_you_mean(o.train_data[i], names);
            spec.loc.child("train_data").child(i).fail("no data entry named " + quoted_text(o.train_data[i]) +
                                                      (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?") +
                                                      " (/data has: " + join_words(names) + ")");
        }
    const bool trained = o.steps > 0 || !o.train_data.empty();
    for (const auto& dn : spec.data) {
        const DataShape d = shape_of(ctx.batch(dn));
        for (const auto& pr : o.pairs)
            for (const std::string& nn : {pr.reference, pr.port}) {
                const NormDef& def = ctx.norm(nn);
                if (!trained) {
                    check_pair(def, ctx.dtype, d, dn);
                    continue;
                }
                const NormDef td = with_training(def, true);
                const std::size_t channels = check_pair(td, ctx.dtype, d, dn).channels;
                const bool running = NormLayer(def, ctx.dtype).has_running_stats();
                for (std::size_t i = 0; i < o.train_data.size(); ++i) {
                    const std::string& tn = o.train_data[i];
                    const Resolution r = check_pair(td, ctx.dtype, shape_of(ctx.batch(tn)), tn);
                    if (running && r.channels != channels)
                        spec.loc.child("train_data").child(i).fail(
                            norm_on_data(def.type, nn, dn) + ": running statistics have " +
                            count_noun(r.channels, "channel") + " from training on " + quoted_text(tn) + ", but this input has " +
                            std::to_string(channels));
                }
                check_pair(with_training(def, false), ctx.dtype, d, dn);
            }
    }
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    Options o = read_options(spec);
    Table t;
    t.columns = port_check_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        // The training batches: the named data entries themselves (a name may be listed many
        // times: no copies), or the data's rows resampled.
        std::vector<Batch> resampled;
        if (o.steps > 0) {
            Rng rng(derive_seed(ctx.seed, "port_check" + spec.loc.pointer + "/" + dn));
            for (long long k = 0; k < o.steps; ++k) resampled.push_back(resample_rows(b, rng));
        }
        std::vector<const Batch*> train;
        for (const auto& tn : o.train_data) train.push_back(&ctx.batch(tn));
        for (const Batch& rb : resampled) train.push_back(&rb);
        const long long steps = static_cast<long long>(train.size());
        for (const auto& pr : o.pairs) {
            const NormDef& rd = ctx.norm(pr.reference);
            const NormDef& pd = ctx.norm(pr.port);
            Side ref = run_side(rd, ctx.dtype, train, b);
            Side port = run_side(pd, ctx.dtype, train, b);
            // Groups as the reference defines them; padding excluded when either norm masks.
            const bool masked = b.has_mask() && (rd.mask || pd.mask);
            GroupLayout lay = group_layout(ref.step.res, masked ? &b.mask : nullptr);
            Deviation dv = deviation(port.y, ref.y, ctx.dtype, &lay.real);
            std::vector<double> gdiff(lay.num_groups, 0);
            for (std::size_t g = 0; g < lay.num_groups; ++g)
                for (auto i : lay.members[g])
                    gdiff[g] = std::max(gdiff[g], elementwise_diff(port.y.data()[i], ref.y.data()[i]));
            std::vector<std::size_t> order(lay.num_groups);
            std::iota(order.begin(), order.end(), std::size_t{0});
            std::stable_sort(order.begin(), order.end(),
                             [&](std::size_t a, std::size_t c) { return gdiff[a] > gdiff[c]; });
            const Cell rm = running_diff(ref, port, true), rv = running_diff(ref, port, false);
            const auto [ndiff, where] = differing_positions(port.y, ref.y, lay.real, b.x.shape());
            // Non-finite outputs at the compared positions: the NaN a fully padded group gets
            // under a mask is not an output anyone reads.
            auto nonfinite = [&](const xt::xarray<double>& y) {
                long long n = 0;
                for (std::size_t i = 0; i < y.size(); ++i) n += lay.real[i] && !std::isfinite(y.data()[i]);
                return n;
            };
            const std::size_t rows = std::min<std::size_t>(static_cast<std::size_t>(o.worst_groups), order.size());
            for (std::size_t k = 0; k < rows; ++k) {
                const std::size_t g = order[k];
                t.add_row({dn, pr.reference, pr.port, norm_type_name(rd.type), norm_type_name(pd.type),
                           steps, ref.step.res.eps, port.step.res.eps, settings_differ(rd, ref, pd, port, ctx.dtype),
                           dv.max_abs, dv.max_rel,
                           nonfinite(ref.y), nonfinite(port.y), rm, rv,
                           static_cast<long long>(k + 1), multi_index(g, ref.step.res.stats_shape),
                           gdiff[g], values_cell(ref.y, lay.members[g]), values_cell(port.y, lay.members[g]),
                           ndiff, where});
            }
        }
    }
    return t;
}

// Memory beyond the batch, with E the data's elements, G the most statistics groups of its
// norms on it (E when not known yet) and d bytes per value (value_bytes). With steps, the
// resampled batches are drawn first and kept until the last pair: (d + 1) bytes (values, a
// copy of the mask) per element of each, steps x E in all. Each pair holds both norms' outputs
// and their float64 copies (2 (d + 8) E) with their statistics, the reference's group layout
// (33 bytes per element, and two lists per group) and the per-group differences (294 bytes
// per group measured with groups of one element; estimate 352). Measured without steps
// on (64, 256, 256) float32 at 57 bytes per element (estimate 74).
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    const std::size_t E = w.elements, d = value_bytes(w.dtype);
    const Sat held = Sat(static_cast<std::size_t>(o.steps)) * E * (d + 1);
    const Sat pair = Sat(E) * (64 + 2 * d) + Sat(most_groups(spec.norms, w)) * (96 + 4 * kStepGroupBytes);
    WorkBytes wb;
    wb.bytes = (held + pair).n;
    if (held > pair) wb.key = key_if_set(spec, "steps");
    return wb;
}

// worst_groups rows per pair, or one per group of the reference when it has fewer.
TableRows rows(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    TableRows r;
    for (const auto& p : o.pairs) {
        const std::size_t groups = groups_on(p.reference, w).value_or(std::max<std::size_t>(w.elements, 1));
        r.rows = (Sat(r.rows) + std::min(groups, static_cast<std::size_t>(o.worst_groups))).n;
    }
    if (o.worst_groups > 1) r.key = key_if_set(spec, "worst_groups");
    return r;
}

}  // namespace

AnalysisType port_check_analysis() {
    AnalysisType a;
    a.name = "port_check";
    a.summary = "compare a reference norm with ports of it on the same data (optionally after "
                "K training steps): max output differences, running statistics, worst groups";
    a.columns = {"data", "reference", "port", "ref_type", "port_type", "steps", "ref_eps", "port_eps",
                 "settings_differ", "max_abs_diff", "max_rel_diff", "ref_nonfinite", "port_nonfinite",
                 "running_mean_max_abs_diff", "running_var_max_abs_diff", "rank", "group",
                 "group_max_abs_diff", "ref_values", "port_values", "differing_count", "differing_positions"};
    a.figure.title = "output difference between a reference norm and each port of it";
    // steps too: analyses of one type share the table, and the same pair with and without
    // training steps are two results (the label leaves steps out when it has one value).
    a.figure.category = {"data", "reference", "port", "steps"};
    a.figure.metrics = {{"max_abs_diff", "max |reference - port|"}};
    a.figure.log = true;
    a.keys = {{"reference", "the first norm"}, {"ports", "the other norms"}, {"pairs", ""}, {"steps", "0"},
              {"train_data", ""}, {"worst_groups", "1"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.check = check;
    a.work_bytes = work_bytes;
    a.rows = rows;
    a.run = run;
    return a;
}

}  // namespace normlab
