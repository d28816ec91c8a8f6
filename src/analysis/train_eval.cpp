// train_eval: K training steps on seeded batches, then inference on the given (held-out)
// batch after each step. Norms with running statistics (BatchNorm, InstanceNorm with
// track_running_stats) normalise differently in the two modes until the running
// statistics match the held-out batch; every other norm gives identical outputs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "analysis/batch_ops.hpp"
#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

struct Options {
    long long steps = 5;
    std::optional<long long> batch_size;  ///< absent: the data's batch size
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    o.steps = training_steps(r, "steps", 5, 1);
    o.batch_size = r.integer("batch_size");
    if (o.batch_size && *o.batch_size < 1)
        r.at("batch_size").fail("batch_size must be >= 1, but got " + std::to_string(*o.batch_size));
    r.finish();
    return o;
}

// The norm in inference mode with the given running statistics (empty: the norm's own
// initial values).
NormDef eval_def(const NormDef& def, const xt::xarray<double>& mean, const xt::xarray<double>& var) {
    NormDef d = with_training(def, false);
    if (mean.size() > 0) {
        ParamInit m;
        m.kind = ParamInit::Kind::values;
        m.values = mean;
        ParamInit v = m;
        v.values = var;
        d.running_mean = m;
        d.running_var = v;
    }
    return d;
}

double average(const xt::xarray<double>& a) {
    if (a.size() == 0) return std::numeric_limits<double>::quiet_NaN();
    double s = 0;
    for (double v : a) s += v;
    return s / static_cast<double>(a.size());
}

// A batch axis; each norm in training mode on the data and on training batches of
// batch_size samples, and in inference mode on the data.
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    for (const auto& dn : spec.data) {
        const DataShape d = shape_of(ctx.batch(dn));
        require_sample_axis(spec.loc, "train_eval", dn, d.shape, d.channel_axis);
        DataShape train = d;
        if (o.batch_size) train.shape[0] = static_cast<std::size_t>(*o.batch_size);
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            check_pair(with_training(def, true), ctx.dtype, d, dn);
            try {
                check_pair(with_training(def, true), ctx.dtype, train, dn);
            } catch (const NormError& e) {
                // Only batch_size makes the training batches differ from the data.
                spec.loc.child("batch_size").fail(e.what());
            }
            check_pair(with_training(def, false), ctx.dtype, d, dn);
        }
    }
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = train_eval_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        const std::size_t bs = o.batch_size ? static_cast<std::size_t>(*o.batch_size) : b.x.shape()[0];
        // Training batches drawn like the held-out one; the same for every norm.
        std::vector<Batch> train;
        for (long long k = 1; k <= o.steps; ++k) {
            Rng rng(derive_seed(ctx.seed, "train_eval/" + dn + "/" + std::to_string(k)));
            train.push_back(gaussian_like(b, bs, rng, b.x.dtype));
        }
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            NormLayer layer(with_training(def, true), ctx.dtype);
            const xt::xarray<double> y_train = apply_norm(with_training(def, true), ctx.dtype, b).fwd.y.to_double();
            for (long long k = 0; k <= o.steps; ++k) {
                if (k > 0) forward_batch(layer, train[static_cast<std::size_t>(k - 1)]);
                NormLayer ev(eval_def(def, layer.running_mean(), layer.running_var()), ctx.dtype);
                const xt::xarray<double> y_eval = forward_batch(ev, b).fwd.y.to_double();
                // A norm without running statistics has no average to report: empty cells.
                const bool running = layer.has_running_stats();
                t.add_row({dn, nn, norm_type_name(def.type), k,
                           running ? Cell(average(ev.running_mean())) : not_applicable(),
                           running ? Cell(average(ev.running_var())) : not_applicable(),
                           deviation(y_eval, y_train, ctx.dtype).max_abs, running, static_cast<long long>(bs)});
            }
        }
    }
    return t;
}

// Memory beyond the batch, with E the data's elements, B a training batch's (batch_size
// samples, the data's by default) and d bytes per value (value_bytes). All training batches
// are drawn before the first norm runs and kept until the last: (d + 1) bytes (values, mask)
// per element of each, steps x B in all. Drawing one holds its float64 values (8 B) beside
// its copy in the run dtype; running a norm holds the float64 outputs of training and
// inference on the data (16 E), the inference output (d E) and a training step's output (d B),
// with their statistics (step_stats_per_element; twice on the data, for the running
// statistics' arrays).
// Measured with the defaults on (64, 256, 256) float32 at 40 bytes per element beyond the
// batch (estimate 52); with batch_size 4000000 on (4, 6, 8) at a 5869 MiB peak (estimate 6.6 GiB).
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    const std::size_t E = w.elements, N = w.shape.empty() ? 1 : w.shape[0], P = N ? E / N : 0;
    const std::size_t d = value_bytes(w.dtype), bs = o.batch_size ? static_cast<std::size_t>(*o.batch_size) : N;
    const Sat B = Sat(bs) * P;
    const std::size_t steps = static_cast<std::size_t>(o.steps), stats = step_stats_per_element(spec.norms, w);
    const Sat draw = B * (8 + d), run = Sat(E) * (16 + d + 2 * stats) + B * (d + stats);
    WorkBytes wb;
    wb.bytes = (B * steps * (d + 1) + std::max(draw, run)).n;
    // The key that makes the training batches outweigh the data most: more steps than the
    // default 5, or batches larger than the data's.
    const double by_steps = static_cast<double>(steps) / 5, by_size = static_cast<double>(bs) / static_cast<double>(N);
    if (B * steps > Sat(E) * 5) wb.key = larger_key(spec, "steps", by_steps, "batch_size", by_size);
    return wb;
}

// A row per norm and step, step 0 (before training) included.
TableRows rows(const AnalysisSpec& spec, const WorkInputs&) {
    const Options o = read_options(spec);
    return {(Sat(spec.norms.size()) * (static_cast<std::size_t>(o.steps) + 1)).n, key_if_set(spec, "steps")};
}

}  // namespace

AnalysisType train_eval_analysis() {
    AnalysisType a;
    a.name = "train_eval";
    a.summary = "running statistics over K seeded training steps; inference vs training output on the held-out batch";
    a.columns = {"data", "norm", "type", "step", "running_mean_avg", "running_var_avg", "eval_train_max_abs_diff",
                 "has_running_stats", "batch_size"};
    a.figure.title = "inference minus training output on a held-out batch, against training step";
    a.figure.kind = FigureKind::lines;
    a.figure.x = "step";
    a.figure.series = {"data", "norm", "batch_size"};
    a.figure.metrics = {{"eval_train_max_abs_diff", "max |eval - train output|"}};
    a.keys = {{"steps", "5"}, {"batch_size", "the data's"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.check = check;
    a.work_bytes = work_bytes;
    a.rows = rows;
    a.run = run;
    return a;
}

}  // namespace normlab
