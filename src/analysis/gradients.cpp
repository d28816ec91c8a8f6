// gradients: what a norm does to the gradient flowing back through it. Each data x norm
// pair back-propagates an upstream gradient dy (the "upstream" key) through one forward
// step and reports the size of dx against dy, the two directions a norm with batch
// statistics removes from dx (a constant shift of a group, and, with eps = 0, a scaling of
// the group about its mean), how much of one sample's dx comes from the other samples, the
// parameter gradients, and a central finite-difference check of dx in float64.
//
// Why the two directions: a centring norm's output does not change when a whole group is
// shifted by a constant, so the sum of dx over a group is 0; with eps = 0 it does not
// change when a group is scaled about its mean either, so dx is orthogonal to x_hat (eps
// keeps a component rstd * eps / (var + eps) along x_hat). With upstream "ones" and the
// weight constant over a group (no affine, or the default weight of ones), dy * weight is a
// constant shift, so dx is 0: a gradient check with that upstream passes whatever the
// backward computes.
#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "analysis/upstream.hpp"
#include "data/estimate.hpp"
#include "data/random.hpp"

namespace normlab {

namespace {

// At most this many input elements get a finite-difference check per pair.
constexpr std::size_t kFdElements = 64;

struct Options {
    Upstream upstream;
    bool fd_check = true;
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    o.upstream = read_upstream(r, spec);
    o.fd_check = r.boolean("fd_check", true);
    r.finish();
    return o;
}

// Every pair, and the upstream's shape.
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    check_pairs(spec, ctx);
    for (const auto& dn : spec.data) check_upstream(o.upstream, ctx.batch(dn), "gradients");
}

// Padded data through norms without "mask": true that take batch statistics, and no
// masked_loss: the padding enters their statistics and gets upstream gradients, so dx there
// is part of every figure. A group that is all padding (a padded token's row for LayerNorm
// or RMSNorm) has variance 0 and rstd 1/sqrt(eps), and its dx can dominate grad_input_rms
// (about 4e7 for RMSNorm on float64 token padding). A note, not an error: comparing with and
// without the mask may be the point. One per data entry, naming its norms.
std::vector<ConfigNote> notes(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    std::vector<ConfigNote> out;
    if (read_options(spec).upstream.masked_loss) return out;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        if (!b.has_mask()) continue;
        std::vector<std::string> unmasked;
        for (const auto& nn : spec.norms) {
            const NormDef& d = ctx.norm(nn);
            // Running statistics (inference) take nothing from the batch.
            if (!d.mask && NormLayer(d, ctx.dtype).resolve(b.x.shape(), b.channel_axis, dn).use_batch_stats)
                unmasked.push_back(quoted_text(nn));
        }
        if (unmasked.empty()) continue;
        out.push_back({spec.loc,
                       "gradients on data " + quoted_text(dn) + ": its padded positions enter the statistics of " +
                           join_words(unmasked, " and ") + " (no \"mask\": true) and get upstream gradients (no \"masked_loss\": true); a "
                           "group of padding alone has variance 0 and rstd 1/sqrt(eps), which can dominate "
                           "grad_input_rms",
                       data_related(dn)});
    }
    return out;
}

const double kNan = std::numeric_limits<double>::quiet_NaN();

// Root mean square; NaN for an empty array.
double rms(const xt::xarray<double>& a) {
    return a.size() ? l2_norm(a.data(), a.size()) / std::sqrt(static_cast<double>(a.size())) : kNan;
}

// Per element of the input: 1 when its statistics group holds a real position. A fully
// padded group (a padded token under a masked LayerNorm over D) has NaN statistics, so its
// outputs are NaN, and its dx too unless the upstream is 0 there (then 0): no summary reads
// them, and `empty` counts such groups. Without
// batch moments (running statistics) no group is empty.
std::vector<std::uint8_t> in_real_groups(const StepResult& s, std::size_t& empty) {
    const std::vector<std::size_t> group = statistic_offsets(s.res);  // per replica where each has its own
    const xt::xarray<double>& count = s.fwd.batch.count;
    const bool counted = count.dimension() > 0 && count.size() == s.fwd.rstd.size();
    empty = counted ? empty_groups(count) : 0;
    std::vector<std::uint8_t> keep(group.size(), 1);
    if (empty)
        for (std::size_t i = 0; i < group.size(); ++i) keep[i] = count.data()[group[i]] > 0;
    return keep;
}

// Root mean square over the elements `keep` marks.
double rms_kept(const xt::xarray<double>& a, const std::vector<std::uint8_t>& keep) {
    double sq = 0;
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (keep[i]) sq += a.data()[i] * a.data()[i], ++n;
    return n ? std::sqrt(sq / static_cast<double>(n)) : kNan;
}

// Per statistics group: max |sum dx| / (rms_group(dx) * n) and max |cos(dx, x_hat)|, over
// every position of the group (padded ones too: they are normalised with the group's
// statistics). A group whose dx is 0 to rounding (its norm below 1e-12 of the direct term
// rstd * dy * scale's) has no direction and is skipped, as is a group whose x_hat is 0;
// NaN when every group is.
std::pair<double, double> group_directions(const xt::xarray<double>& x, const xt::xarray<double>& dx,
                                           const xt::xarray<double>& dy, const StepResult& s) {
    const Resolution& r = s.res;
    const std::vector<std::size_t> group = statistic_offsets(r);  // per replica where each has its own
    Shape ps(r.view_shape.size(), 1);
    for (auto a : r.spec.param_axes) ps[a] = r.view_shape[a];
    const std::vector<std::size_t> param = broadcast_offsets(r.view_shape, ps);
    const std::size_t G = s.fwd.rstd.size();
    std::vector<double> sum(G, 0.0), sq(G, 0.0), dot(G, 0.0), xh2(G, 0.0), direct(G, 0.0), n(G, 0.0);
    for (std::size_t i = 0; i < group.size(); ++i) {
        const std::size_t g = group[i];
        const double rs = s.fwd.rstd.data()[g];
        const double d = dx.data()[i], xh = (x.data()[i] - s.fwd.mean.data()[g]) * rs;
        const double scale = s.in.has_weight ? r.spec.weight_offset + s.in.weight.data()[param[i]] : 1.0;
        const double t = rs * dy.data()[i] * scale;
        sum[g] += d, sq[g] += d * d, dot[g] += d * xh, xh2[g] += xh * xh, direct[g] += t * t, n[g] += 1;
    }
    double sum_max = kNan, cos_max = kNan;
    for (std::size_t g = 0; g < G; ++g) {
        if (!(sq[g] > 1e-24 * direct[g])) continue;
        const double shift = std::abs(sum[g]) / (std::sqrt(sq[g] / n[g]) * n[g]);
        sum_max = std::isnan(sum_max) ? shift : std::max(sum_max, shift);
        if (!(xh2[g] > 0)) continue;
        const double c = std::abs(dot[g]) / std::sqrt(sq[g] * xh2[g]);
        cos_max = std::isnan(cos_max) ? c : std::max(cos_max, c);
    }
    return {sum_max, cos_max};
}

// The share of sample 0's dx that comes from the other samples' dy: with dx_own from dy
// kept on sample 0 only and dx_other from dy kept on the other samples only (dx is linear
// in dy, so dx = dx_own + dx_other), |dx_other| / (|dx_own| + |dx_other|) on sample 0.
// Exactly 0 when no statistic spans samples; NaN when dy is 0 on every sample.
// Elements in fully padded groups (keep = 0) are left out.
double cross_sample_fraction(const Batch& b, const StepResult& s, const xt::xarray<double>& dy,
                             const std::vector<std::uint8_t>& keep) {
    const std::size_t per = b.x.shape().empty() || b.x.shape()[0] == 0 ? 0 : b.x.size() / b.x.shape()[0];
    xt::xarray<double> own = xt::zeros<double>(dy.shape()), other = dy;
    std::copy(dy.data(), dy.data() + per, own.data());
    std::fill(other.data(), other.data() + per, 0.0);
    auto sample0 = [&](const xt::xarray<double>& dx) {
        double sq = 0;
        for (std::size_t i = 0; i < per; ++i)
            if (keep[i]) sq += dx.data()[i] * dx.data()[i];
        return std::sqrt(sq);
    };
    const double a = sample0(step_backward(b.x, s, own).dx.to_double());
    const double c = sample0(step_backward(b.x, s, other).dx.to_double());
    return a + c > 0 ? c / (a + c) : kNan;
}

// Central differences in float64 of L = sum(dy * y) over the statistics group of each of up
// to kFdElements seeded input elements, against the analytic dx in float64; the largest
// |fd - dx| relative to the larger of max |dx| and rms(dy) * the largest rstd of the checked
// groups (the size of the direct term rstd * dy, so that a dx that is 0 to rounding is
// judged on the scale it would otherwise have). The step is 1e-4 / rstd of the element's
// group (1e-4 of its spread). Elements of fully padded groups are not picked: their outputs
// are NaN. Nor are those of groups whose rstd is 0 or infinite (no spread and eps = 0: PyTorch's
// batch_norm and instance_norm make rstd 0 there, a layer_norm or Keras' formula infinite):
// the norm is not differentiable there, since any step gives the group a spread and its
// output jumps (a constant channel gave 6.4e6 against its dx of 0). Not applicable when no
// element is left to check.
Cell fd_check(const AnalysisContext& ctx, const Batch& b, const NormDef& def, const xt::xarray<double>& dy) {
    Batch b64 = b;
    b64.x = Tensor::from_double(b.x.to_double(), DType::float64);
    // The run's dtype for the defaults it sets (RMSNorm's eps); the arithmetic is float64.
    NormLayer layer(def, ctx.dtype);
    const Step s = forward_batch(layer, b64);
    const xt::xarray<double> dx = step_backward(b64.x, s, dy).dx.f64;
    const std::vector<std::size_t> group = statistic_offsets(s.res);

    std::size_t empty = 0;
    std::vector<std::uint8_t> keep = in_real_groups(s, empty);
    for (std::size_t i = 0; i < keep.size(); ++i) {
        const double r = s.fwd.rstd.data()[group[i]];
        if (!(std::isfinite(r) && r > 0)) keep[i] = 0;
    }
    std::vector<std::size_t> picks;
    const std::size_t N = dx.size();
    const std::size_t kept = static_cast<std::size_t>(std::count(keep.begin(), keep.end(), std::uint8_t{1}));
    if (kept <= kFdElements) {
        for (std::size_t i = 0; i < N; ++i)
            if (keep[i]) picks.push_back(i);
    } else {
        Rng rng(derive_seed(ctx.seed, "gradients/fd/" + b.name + "/" + def.name));
        while (picks.size() < kFdElements) {
            const std::size_t i = static_cast<std::size_t>(rng.below(N));
            if (keep[i] && std::find(picks.begin(), picks.end(), i) == picks.end()) picks.push_back(i);
        }
    }
    auto group_loss = [&](std::size_t g) {
        NormLayer fresh(def, ctx.dtype);  // no running statistics carried between evaluations
        const xt::xarray<double> y = forward_batch(fresh, b64).fwd.y.to_double();
        double l = 0;
        for (std::size_t j = 0; j < N; ++j)
            if (group[j] == g) l += dy.data()[j] * y.data()[j];
        return l;
    };
    if (picks.empty()) return not_applicable();
    double scale = 0, rmax = 0, err = 0;
    for (std::size_t i = 0; i < N; ++i)
        if (keep[i]) {
            scale = std::max(scale, std::abs(dx.data()[i]));
            rmax = std::max(rmax, s.fwd.rstd.data()[group[i]]);
        }
    scale = std::max(scale, rms(dy) * rmax);
    for (std::size_t i : picks) {
        const std::size_t g = group[i];
        const double v = b64.x.f64.data()[i];
        const double h = 1e-4 / s.fwd.rstd.data()[g];
        b64.x.f64.data()[i] = v + h;
        const double up = group_loss(g);
        b64.x.f64.data()[i] = v - h;
        const double down = group_loss(g);
        b64.x.f64.data()[i] = v;
        const double d = std::abs((up - down) / (2 * h) - dx.data()[i]);
        err = std::isnan(d) || std::isnan(err) ? kNan : std::max(err, d);
    }
    return scale > 0 ? err / scale : err;
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = gradients_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        const xt::xarray<double> dy = make_upstream(o.upstream, b, ctx.dtype, ctx.seed, "gradients");
        const xt::xarray<double> x = b.x.to_double();
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            NormLayer layer(def, ctx.dtype);
            const Step s = forward_batch(layer, b);
            const StepGradients g = step_backward(b.x, s, dy);
            const xt::xarray<double> dx = g.dx.to_double();
            std::size_t empty = 0;
            const std::vector<std::uint8_t> keep = in_real_groups(s, empty);
            const double in_rms = rms_kept(dx, keep), up_rms = rms_kept(dy, keep);
            const auto [sum_max, cos_max] = group_directions(x, dx, dy, s);
            t.add_row({dn, nn, norm_type_name(def.type), o.upstream.label, in_rms, up_rms,
                       up_rms > 0 ? in_rms / up_rms : kNan, sum_max, cos_max, cross_sample_fraction(b, s, dy, keep),
                       s.in.has_weight ? Cell(rms(g.dweight)) : not_applicable(),
                       s.in.has_bias ? Cell(rms(g.dbias)) : not_applicable(),
                       o.fd_check ? fd_check(ctx, b, def, dy) : not_applicable(), static_cast<long long>(empty)});
        }
    }
    return t;
}

}  // namespace

AnalysisType gradients_analysis() {
    AnalysisType a;
    a.name = "gradients";
    a.summary = "back-propagate an upstream gradient: dx against dy, the directions a norm removes, "
                "cross-sample share, parameter gradients, finite-difference check";
    a.columns = {"data", "norm", "type", "upstream", "grad_input_rms", "grad_upstream_rms", "grad_ratio",
                 "grad_sum_abs_max", "grad_xhat_cos_max", "cross_sample_fraction", "grad_weight_rms",
                 "grad_bias_rms", "fd_max_rel_err", "empty_groups"};
    a.figure.title = "gradient through each norm: rms(dx) / rms(dy), and the share of sample 0's dx from the other samples";
    a.figure.category = {"data", "norm"};
    a.figure.series = {"upstream"};
    a.figure.metrics = {{"grad_ratio", "rms(dx) / rms(dy)"}, {"cross_sample_fraction", "cross-sample share"}};
    a.keys = {{"upstream", "normal"}, {"masked_loss", "false"}, {"fd_check", "true"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    // float64 copies of x, dy and dx, the two halves of dy for the cross-sample share and
    // their dx, and the finite-difference check's float64 batch and forward outputs: peak
    // resident memory measured at 60 bytes per element beyond the batch without the check
    // and 84 (float32) to 92 (float64) with it (a (64, 512, 512) batch, LayerNorm and
    // BatchNorm). The figures below hold those with some room, plus the statistics of the
    // steps and the backward pass per group (342 bytes measured with groups of one element;
    // estimate 384).
    a.work_bytes = [](const AnalysisSpec& spec, const WorkInputs& w) {
        const std::size_t per = read_options(spec).fd_check ? 100 : 72;
        return WorkBytes{(Sat(w.elements) * per + Sat(most_groups(spec.norms, w)) * (6 * kStepGroupBytes)).n, ""};
    };
    a.run = run;
    a.check = check;
    a.notes = notes;
    return a;
}

}  // namespace normlab
