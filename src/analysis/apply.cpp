// apply: normalise each batch with each norm and summarise the output per group; optionally
// save tensors (the gradients too, back-propagating the "upstream" gradient); with
// "sequential", the listed batches are successive training steps.
#include <algorithm>
#include <cmath>
#include <set>

#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "analysis/upstream.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

const std::vector<std::string> kSaveable = {"output",      "mean",       "var",         "rstd",      "running_mean",
                                            "running_var", "grad_input", "grad_weight", "grad_bias", "input",
                                            "weight",      "bias",       "upstream",    "mask"};

struct Options {
    bool sequential = false;
    std::vector<std::string> save;
    Upstream upstream;  ///< dy for grad_*
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    o.sequential = r.boolean("sequential", false);
    if (auto s = r.strings("save")) {
        for (std::size_t i = 0; i < s->size(); ++i)
            if (std::find(kSaveable.begin(), kSaveable.end(), (*s)[i]) == kSaveable.end()) {
                const std::string hint = did_you_mean((*s)[i], kSaveable);
                r.at("save").child(i).fail("cannot save " + quoted_text((*s)[i]) + " (expected " + join_words(kSaveable, " or ") + ")" +
                                           (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?"));
            }
        o.save = *s;
    }
    o.upstream = read_upstream(r, spec);
    r.finish();
    return o;
}

bool saves_gradients(const Options& o) {
    return std::any_of(o.save.begin(), o.save.end(), [](const std::string& w) { return w.rfind("grad_", 0) == 0; });
}

// Why norm `layer` cannot give `what` on data of resolution r, or "" when it can: a mean of
// RMSNorm, running statistics of a norm that keeps none, a parameter's gradient or the
// parameter it does not have. Each depends on the norm's kind only (type, affine,
// track_running_stats): an override of the data's shape, or of eps, is not to blame.
std::string save_problem(const std::string& what, const NormLayer& layer, const Resolution& r) {
    const NormDef& d = layer.def();
    if (what == "mean" && d.type == NormType::rmsnorm)
        return "rmsnorm " + quoted_text(d.name) + " does not centre and has no mean (save var: the mean square, or rstd)";
    if ((what == "running_mean" || what == "running_var") && !layer.has_running_stats())
        return norm_type_name(d.type) + " " + quoted_text(d.name) + " keeps no running statistics" +
               (d.type == NormType::instancenorm ? " (set track_running_stats: true)" : "");
    const bool weight = what == "grad_weight" || what == "weight", bias = what == "grad_bias" || what == "bias";
    if ((weight && !r.has_weight) || (bias && !r.has_bias))
        return norm_type_name(d.type) + " " + quoted_text(d.name) + " has no " + (weight ? "weight" : "bias") +
               (d.type == NormType::rmsnorm && bias ? " (rmsnorm: weight only)" : " (affine is false)");
    return "";
}

// For each entry of save, the norms of the analysis that cannot give it, with why: an entry
// no norm can give is an input error (check), one that some cannot is saved for the others
// and noted (notes). Per norm, not per pair: the reason depends on the norm's kind alone.
using SaveGaps = std::vector<std::vector<std::pair<std::string, std::string>>>;  // (norm, why) per save entry

SaveGaps save_gaps(const AnalysisSpec& spec, const Options& o, const AnalysisContext& ctx) {
    SaveGaps g(o.save.size());
    if (spec.data.empty()) return g;
    const std::string& dn = spec.data.front();
    for (const auto& nn : spec.norms) {
        const NormLayer layer(ctx.norm(nn), ctx.dtype);
        const Resolution r = check_pair(layer.def(), ctx.dtype, shape_of(ctx.batch(dn)), dn);
        for (std::size_t i = 0; i < o.save.size(); ++i) {
            std::string why = save_problem(o.save[i], layer, r);
            if (!why.empty()) g[i].push_back({nn, std::move(why)});
        }
    }
    return g;
}

// Entries of save that none of the analysis' norms can give: an input error at the entry,
// naming the first norm's reason.
void check_saves(const AnalysisSpec& spec, const Options& o, const AnalysisContext& ctx) {
    const SaveGaps g = save_gaps(spec, o, ctx);
    for (std::size_t i = 0; i < o.save.size(); ++i)
        if (!spec.norms.empty() && g[i].size() == spec.norms.size())
            spec.loc.child("save").child(i).fail(g[i].front().second, norm_kind_related(g[i].front().first));
}

// Entries of save that some norms cannot give: saved for the others, and noted once per norm
// and reason with every entry it holds back ("running_mean" and "running_var" of a LayerNorm
// in one line), naming the norms that do give them.
std::vector<ConfigNote> notes(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    const SaveGaps g = save_gaps(spec, o, ctx);
    struct Group {
        std::string norm, why, givers;
        std::vector<std::size_t> entries;  ///< indices into save
    };
    std::vector<Group> groups;
    for (std::size_t i = 0; i < o.save.size(); ++i) {
        if (g[i].size() == spec.norms.size()) continue;  // an error (check_saves)
        std::vector<std::string> givers;
        for (const auto& nn : spec.norms)
            if (std::none_of(g[i].begin(), g[i].end(), [&](const auto& gap) { return gap.first == nn; }))
                givers.push_back(quoted_text(nn));
        const std::string given_by = join_words(givers, " and ");
        for (const auto& [nn, why] : g[i]) {
            auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
                return x.norm == nn && x.why == why && x.givers == given_by;
            });
            if (it == groups.end()) groups.push_back({nn, why, given_by, {i}});
            else it->entries.push_back(i);
        }
    }
    std::vector<ConfigNote> out;
    for (const Group& x : groups) {
        std::vector<std::string> names;
        for (std::size_t i : x.entries) {  // an entry listed twice is named once
            const std::string name = quoted_text(o.save[i]);
            if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
        }
        const bool one = names.size() == 1;
        const JsonLocation at = one ? spec.loc.child("save").child(x.entries.front()) : spec.loc.child("save");
        const std::string verb = one ? " is" : " are";
        out.push_back({at, x.why + ": " + join_words(names, " and ") + verb + " saved for " + x.givers + " only",
                       norm_kind_related(x.norm)});
    }
    return out;
}

// Saves what the analysis asks for after one step, under arrays/<data>/<folder>/ (the norm's
// name, or "<norm>/step<k>"), those the norm can give (save_problem).
void save_step(const AnalysisContext& ctx, const Options& o, const std::string& dn, NormLayer& layer,
               const StepResult& s, const std::string& folder) {
    // Statistics of half-precision runs are saved in float32, as frameworks keep them
    // (PyTorch returns float32 mean/rstd for half inputs): a variance of 2.5e5 is not a
    // float16 number (case B10), and the saved file should show the value, not inf. The
    // parameter gradients, sums over the batch, likewise.
    const bool half = ctx.dtype == DType::float16 || ctx.dtype == DType::bfloat16;
    const DType stats_dtype = half ? DType::float32 : ctx.dtype;
    StepGradients g;
    const Batch& b = ctx.batch(dn);
    xt::xarray<double> dy;
    const bool grads = saves_gradients(o);
    if (grads || std::count(o.save.begin(), o.save.end(), "upstream"))
        dy = make_upstream(o.upstream, b, ctx.dtype, ctx.seed, "apply");
    if (grads) g = step_backward(b.x, s, dy);
    // The parameters as the engine used them, in the user's shape ((C) for GroupNorm), in
    // float64: a config's 0.1 is used as the double 0.1, whatever the run's dtype.
    auto param = [&](const xt::xarray<double>& v) {
        xt::xarray<double> p = v;
        p.reshape(s.res.param_shape);
        return p;
    };
    for (const std::string& what : o.save) {
        if (!save_problem(what, layer, s.res).empty()) continue;  // noted at validation (notes)
        if (what == "output") ctx.save(dn, folder, what, s.fwd.y.to_double(), ctx.dtype);
        else if (what == "input") ctx.save(dn, folder, what, b.x.to_double(), ctx.dtype);
        else if (what == "upstream") ctx.save(dn, folder, what, dy, ctx.dtype);
        else if (what == "mask") ctx.save_mask(dn, folder, what, b.mask);
        else if (what == "weight") ctx.save(dn, folder, what, param(s.in.weight), DType::float64);
        else if (what == "bias") ctx.save(dn, folder, what, param(s.in.bias), DType::float64);
        else if (what == "mean") ctx.save(dn, folder, what, s.fwd.mean, stats_dtype);
        else if (what == "var") ctx.save(dn, folder, what, s.fwd.var, stats_dtype);
        else if (what == "rstd") ctx.save(dn, folder, what, s.fwd.rstd, stats_dtype);
        else if (what == "running_mean") ctx.save(dn, folder, what, layer.running_mean(), stats_dtype);
        else if (what == "running_var") ctx.save(dn, folder, what, layer.running_var(), stats_dtype);
        else if (what == "grad_input") ctx.save(dn, folder, what, g.dx.to_double(), ctx.dtype);
        else if (what == "grad_weight") ctx.save(dn, folder, what, g.dweight, stats_dtype);
        else ctx.save(dn, folder, what, g.dbias, stats_dtype);
    }
}

// Every pair, the upstream's shape and what each norm can save; with "sequential", the
// running statistics carried from one data to the next need the same channels in all.
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        check_upstream(o.upstream, b, "apply");
        for (std::size_t i = 0; i < o.save.size(); ++i)
            if (o.save[i] == "mask") require_mask_to_save(spec.loc.child("save").child(i), "apply", dn, b);
        for (const auto& nn : spec.norms) check_pair(ctx.norm(nn), ctx.dtype, shape_of(b), dn);
    }
    check_saves(spec, o, ctx);
    if (!o.sequential || spec.data.empty()) return;
    for (const auto& nn : spec.norms) {
        const NormDef& d = ctx.norm(nn);
        if (!NormLayer(d, ctx.dtype).has_running_stats()) continue;
        const std::string& first = spec.data.front();
        const std::size_t channels = check_pair(d, ctx.dtype, shape_of(ctx.batch(first)), first).channels;
        for (std::size_t i = 1; i < spec.data.size(); ++i) {
            const std::string& dn = spec.data[i];
            const Resolution r = check_pair(d, ctx.dtype, shape_of(ctx.batch(dn)), dn);
            if (r.channels != channels)
                spec.loc.child("data").child(i).fail(
                    norm_on_data(d.type, nn, dn) + ": running statistics have " +
                    count_noun(channels, "channel") + " from an earlier step (data " + quoted_text(first) +
                    "), but this input has " + std::to_string(r.channels) + " (sequential steps carry them over)");
        }
    }
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = apply_analysis().columns;
    // With "sequential", a data entry listed twice is two steps: each saves under its own
    // step folder, where the later would overwrite the earlier's arrays.
    std::set<std::string> listed_twice;
    if (o.sequential)
        for (const auto& dn : spec.data)
            if (std::count(spec.data.begin(), spec.data.end(), dn) > 1) listed_twice.insert(dn);
    auto add = [&](const std::string& dn, NormLayer& layer, const StepResult& s, long long step) {
        const Batch& b = ctx.batch(dn);
        const bool masked = layer.def().mask;
        GroupSummary g = group_summary(s.fwd.y, s.res, masked ? &b.mask : nullptr);
        // Fully padded groups have no output statistics (NaN): skipped, and counted.
        auto mean_mm = range_over_groups(g.mean, g.count), std_mm = range_over_groups(g.std, g.count);
        // The root mean square about 0 of each group: the spread RMSNorm sets (near 1 without
        // a weight), which its std and mean do not show when the output is not centred.
        // rms^2 = var + mean^2 (biased var), so no second pass over the output.
        const xt::xarray<double> rms = xt::sqrt(g.std * g.std + g.mean * g.mean);
        auto rms_mm = range_over_groups(rms, g.count);
        // Read in place: a float64 copy of a large batch would double the peak memory.
        auto in_mm = value_range(b.x);
        const OutputSummary out = summarize_output(s.fwd.y, s.res, g.count);
        // Statistics (groups with real positions) made non-finite, by NaN/inf inputs or by overflow.
        long long bad_stats = 0;
        for (std::size_t i = 0; i < s.fwd.var.size(); ++i)
            bad_stats += (i >= g.count.size() || g.count.data()[i] > 0) &&
                         (!std::isfinite(s.fwd.var.data()[i]) ||
                          (i < s.fwd.mean.size() && !std::isfinite(s.fwd.mean.data()[i])));
        t.add_row({dn, layer.def().name, norm_type_name(layer.def().type), step, s.res.eps,
                   mean_mm.first, mean_mm.second, std_mm.first, std_mm.second, rms_mm.first, rms_mm.second, in_mm.first,
                   in_mm.second, out.min, out.max, static_cast<long long>(out.nonfinite), static_cast<long long>(count_nonfinite(b.x)),
                   bad_stats, static_cast<long long>(empty_groups(g.count))});
        const std::string& name = layer.def().name;
        save_step(ctx, o, dn, layer, s, listed_twice.count(dn) ? name + "/step" + std::to_string(step) : name);
    };
    if (o.sequential) {
        for (const auto& nn : spec.norms) {
            NormLayer layer(ctx.norm(nn), ctx.dtype);
            long long step = 0;
            for (const auto& dn : spec.data) add(dn, layer, forward_batch(layer, ctx.batch(dn)), ++step);
        }
        // Rows in (step, norm) order: the non-sequential mode's (data, norm) order, and step
        // order where a data entry is listed twice.
        const std::size_t step = static_cast<std::size_t>(
            std::find(t.columns.begin(), t.columns.end(), "step") - t.columns.begin());
        std::stable_sort(t.rows.begin(), t.rows.end(), [step](const auto& a, const auto& b) {
            return std::get<long long>(a[step]) < std::get<long long>(b[step]);
        });
    } else {
        for (const auto& dn : spec.data)
            for (const auto& nn : spec.norms) {
                NormLayer layer(ctx.norm(nn), ctx.dtype);
                add(dn, layer, forward_batch(layer, ctx.batch(dn)), 1);
            }
    }
    return t;
}

}  // namespace

AnalysisType apply_analysis() {
    AnalysisType a;
    a.name = "apply";
    a.summary = "normalise each batch with each norm: per-group output mean/std/rms range, min/max; save tensors and gradients";
    a.columns = {"data", "norm", "type", "step", "eps", "out_mean_min", "out_mean_max",
                 "out_std_min", "out_std_max", "out_rms_min", "out_rms_max", "in_min", "in_max", "out_min", "out_max",
                 "nonfinite_count", "nonfinite_in", "nonfinite_stats", "empty_groups"};
    a.figure.title = "range over groups of the output mean, std and rms, per norm";
    a.figure.kind = FigureKind::ranges;
    a.figure.category = {"data", "norm"};
    a.figure.series = {"step"};
    a.figure.metrics = {{"out_mean_min", "output mean (min..max over groups)", "out_mean_max"},
                        {"out_std_min", "output std (min..max over groups)", "out_std_max"},
                        {"out_rms_min", "output rms (min..max over groups)", "out_rms_max"}};
    a.keys = {save_key(kSaveable), {"sequential", "false"}, {"upstream", "normal"}, {"masked_loss", "false"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    // Sequential steps: a data entry listed again is one more training step (its running
    // statistics carried over), saved under its own step folder.
    a.repeats_data = [](const AnalysisSpec& s) { return read_options(s).sequential; };
    a.repeats_data_how = "with \"sequential\": true, each listing is one more step";
    // Memory beyond the batch: the estimate's default allowance (three doubles per element
    // and 4 kStepGroupBytes per statistics group, run/points.cpp), or with saved gradients
    // the upstream gradient and the backward pass's dx in float64, dx in the dtype and its
    // file's bytes: 32 + 2d bytes per element (d bytes per value). Measured with grad_input on (64, 256, 256) float32 at 28
    // bytes per element (estimate 40), on (64, 128, 256) float64 at 40 (estimate 48).
    a.work_bytes = [](const AnalysisSpec& spec, const WorkInputs& w) {
        const std::size_t per = saves_gradients(read_options(spec)) ? 32 + 2 * value_bytes(w.dtype) : 24;
        return WorkBytes{(Sat(w.elements) * per + Sat(most_groups(spec.norms, w)) * (4 * kStepGroupBytes)).n, ""};
    };
    a.run = run;
    a.check = check;
    a.notes = notes;
    return a;
}

}  // namespace normlab
