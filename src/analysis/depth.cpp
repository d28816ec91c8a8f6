// depth: residual stacks at initialisation, layer by layer. Each listed stack runs forward
// on each listed data and back from a loss; one row per layer reports the residual
// stream's scale, the branch's and the norm input's, and the gradients reaching x_l, W_l and
// the norm's weight. Reproduces Xiong et al. 2020 (Theorem 1: post-LN's last-layer weight
// gradient does not shrink with depth, pre-LN's shrinks like 1/sqrt(L)) and Wang et al.
// 2022 (DeepNorm keeps the residual stream at unit scale). With train_steps, the running
// statistics the training passes leave behind are compared with the batch statistics,
// layer by layer (the eval/train drift of BatchNorm chains). With draws K > 1 every number
// is the mean over K independent draws of the weights and the projection: Theorem 1 is a
// statement about the expectation at initialisation, and one draw of a layer's weights
// moves its gradient by several percent.
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include "analysis/common.hpp"
#include "analysis/stack_weights.hpp"
#include "analysis/types.hpp"
#include "data/npy.hpp"
#include "data/random.hpp"
#include "json/text.hpp"

namespace normlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// What `save` can write.
const std::vector<std::string> kSaveable = {"activations", "gradients", "weights", "projection", "mask"};

struct Options {
    enum class Loss { projection, mean_square, npy } loss = Loss::projection;
    std::string loss_path;       ///< npy: as written in the config
    long long train_steps = 0;
    long long draws = 1;         ///< independent draws of weights and r the rows average
    bool save_activations = false, save_gradients = false, save_weights = false, save_projection = false;
    bool save_mask = false;
    std::size_t save_mask_index = 0;  ///< where "mask" stands in save, for the message when there is none
};

Options read_options(const AnalysisSpec& spec) {
    if (spec.params.contains("norms"))
        spec.loc.child("norms").fail("depth takes \"stacks\" (names under /stacks), not \"norms\"");
    ObjectReader r = analysis_reader(spec);
    Options o;
    if (const Json* l = r.raw("loss")) {
        const JsonLocation at = r.at("loss");
        if (l->is_string() && *l == "projection") o.loss = Options::Loss::projection;
        else if (l->is_string() && *l == "mean_square") o.loss = Options::Loss::mean_square;
        else if (l->is_object()) {
            ObjectReader lr(*l, at);
            lr.declare({"npy"});
            lr.finish();  // unknown keys first: "nmp" is reported as a misspelling of "npy"
            const auto p = lr.string("npy");
            if (!p) lr.missing("npy", " (expected \"projection\", \"mean_square\" or {\"npy\": \"path\"})");
            o.loss = Options::Loss::npy;
            o.loss_path = *p;
        } else {
            at.fail("expected \"projection\", \"mean_square\" or {\"npy\": \"path\"}, but got " + l->dump());
        }
    }
    o.train_steps = training_steps(r, "train_steps", 0, 0);
    o.draws = r.integer("draws", 1);
    if (o.draws < 1 || o.draws > 10000)
        r.at("draws").fail("draws must be in [1, 10000], but got " + std::to_string(o.draws));
    if (auto save = r.strings("save")) {
        for (std::size_t i = 0; i < save->size(); ++i) {
            const std::string& w = (*save)[i];
            if (w == "activations") o.save_activations = true;
            else if (w == "gradients") o.save_gradients = true;
            else if (w == "weights") o.save_weights = true;
            else if (w == "projection") o.save_projection = true;
            else if (w == "mask") o.save_mask = true, o.save_mask_index = i;
            else {
                r.at("save").child(i).fail("unknown array " + quoted_text(w) + " (expected " + join_words(kSaveable, " or ") +
                                           ")" + did_you_mean_note(w, kSaveable, 3));
            }
        }
    }
    if (o.save_projection && o.loss != Options::Loss::projection)
        r.at("save").fail("save \"projection\" writes the loss's r, which only loss \"projection\" draws");
    if (o.draws > 1 && (o.save_activations || o.save_gradients || o.save_weights || o.save_projection || o.save_mask))
        r.at("save").fail("save writes the arrays of one draw, but draws is " + std::to_string(o.draws) +
                          " and the rows are means over the draws: save with draws 1");
    r.finish();
    return o;
}

// The seed of draw k: the run seed for the first (draws 1 gives the single-draw numbers),
// an independent stream for each further one.
std::uint64_t draw_seed(std::uint64_t run_seed, long long k) {
    return k == 0 ? run_seed : derive_seed(run_seed, "depth/draw/" + std::to_string(k));
}

// The loss's r for data `dn` (projection: seeded standard normal of the data's shape, the
// same for every stack; npy: the given array, which must have the data's shape).
xt::xarray<double> projection(const AnalysisSpec& spec, std::uint64_t seed, const Options& o,
                              const std::string& dn, const Shape& shape) {
    if (o.loss == Options::Loss::npy) {
        std::filesystem::path p(o.loss_path);
        if (!p.is_absolute()) p = spec.base_dir / p;
        const JsonLocation at = spec.loc.child("loss").child("npy");
        xt::xarray<double> r;
        try {
            r = read_npy(p).values;
        } catch (const InputError& e) {
            at.fail(e.what());
        }
        const Shape got(r.shape().begin(), r.shape().end());
        if (got != shape)
            at.fail("r must have the stack output's shape " + format_shape(shape) + " (data " + quoted_text(dn) + "), but " +
                    o.loss_path + " has shape " + format_shape(got));
        return r;
    }
    xt::xarray<double> r = xt::xarray<double>::from_shape(shape);
    Rng rng(derive_seed(seed, "depth/r/" + dn));
    for (auto& v : r) v = rng.normal();
    return r;
}

// d loss / d y over real rows: projection sum(y * r) / N gives r / N (N real rows); the mean
// square mean(y^2) gives 2 y / n (n real elements). Padded rows get 0: they are not part of
// the loss.
Tensor loss_gradient(const Options& o, const xt::xarray<double>& r, const Tensor& y,
                     const std::vector<unsigned char>& row_mask) {
    std::size_t real = 0;
    for (unsigned char m : row_mask) real += m;
    xt::xarray<double> g = o.loss == Options::Loss::mean_square ? y.to_double() : r;
    const std::size_t D = g.size() / row_mask.size();
    const double scale = o.loss == Options::Loss::mean_square ? 2.0 / static_cast<double>(real * D)
                                                              : 1.0 / static_cast<double>(real);
    for (std::size_t i = 0; i < g.size(); ++i) g.data()[i] = row_mask[i / D] ? g.data()[i] * scale : 0.0;
    return Tensor::from_double(g, y.dtype);
}

double rms(const Tensor& t, const std::vector<unsigned char>& row_mask) {
    const xt::xarray<double> v = t.to_double();
    const std::size_t D = v.size() / row_mask.size();
    double s = 0;
    std::size_t n = 0;
    for (std::size_t i = 0; i < v.size(); ++i)
        if (row_mask[i / D]) s += v.data()[i] * v.data()[i], ++n;
    return n ? std::sqrt(s / static_cast<double>(n)) : kNaN;
}

// (n, *shape) from n tensors of one shape, in double.
xt::xarray<double> stacked(const std::vector<Tensor>& ts) {
    Shape s{ts.size()};
    const Shape one = ts.front().shape();
    s.insert(s.end(), one.begin(), one.end());
    xt::xarray<double> out = xt::xarray<double>::from_shape(s);
    const std::size_t n = num_elements(one);
    for (std::size_t i = 0; i < ts.size(); ++i) {
        const xt::xarray<double> v = ts[i].to_double();
        std::copy(v.begin(), v.end(), out.data() + i * n);
    }
    return out;
}

void check_pair(const AnalysisContext& ctx, const Batch& b, const StackDef& def, const std::string& dn) {
    Stack::check(def, b.x.shape(), b.channel_axis, ctx.dtype, dn);
}

void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        for (const auto& sn : spec.stacks) check_pair(ctx, b, ctx.stack(sn), dn);
        if (o.loss == Options::Loss::npy) projection(spec, ctx.seed, o, dn, b.x.shape());
        if (o.save_mask) require_mask_to_save(spec.loc.child("save").child(o.save_mask_index), "depth", dn, b);
    }
}

// The number columns of one stack's rows (resid_rms ... eval_train_ratio), per layer; absent
// where the value does not apply (row 0 has no block; a block without that part; no
// train_steps), which the table writes as an empty cell.
using LayerValues = std::array<std::optional<double>, 10>;

// One draw of stack `def` on batch b: its weights and the projection from `seed`.
std::vector<LayerValues> one_draw(const AnalysisSpec& spec, const AnalysisContext& ctx, const Options& o,
                                  const StackDef& def, const std::string& dn, const std::string& sn,
                                  const Batch& b, std::uint64_t seed) {
    const Shape shape = b.x.shape();
    const xt::xarray<double> r = projection(spec, seed, o, dn, shape);
    Stack s(def, make_stack_weights(def, shape.back(), ctx.dtype, seed), shape, ctx.dtype, dn);
    StackTrace tr;
    // K training passes update the running statistics; the last one (or the only one,
    // K = 0) is the train-mode pass the gradients go back through.
    const long long passes = std::max<long long>(1, o.train_steps);
    for (long long k = 0; k < passes; ++k) s.forward(b.x, b.mask, tr);
    const auto& rm = s.row_mask();
    StackGrads g;
    s.backward(tr, loss_gradient(o, r, tr.y(), rm), g, {o.save_gradients, o.save_gradients});
    std::vector<std::optional<double>> ratio(def.layers + 1);
    if (o.train_steps > 0) {
        Stack ev = s.eval_copy();
        StackTrace etr;
        ev.forward(b.x, b.mask, etr);
        for (std::size_t l = 0; l <= def.layers; ++l) ratio[l] = rms(etr.x[l], rm) / rms(tr.x[l], rm);
    }
    const double rms0 = rms(tr.x[0], rm);
    // Which parts a block has: from the definition, not from a NaN in its values, so that a
    // computed NaN stays one.
    const bool branch = def.placement != Placement::norm_only, norm = def.has_norm();
    const bool has_w = branch && def.block != BlockKind::identity, has_w1 = branch && def.block == BlockKind::ffn;
    const bool gamma = norm && !tr.blocks.empty() && tr.blocks.front().norm.res.has_weight;
    const bool sandwich = def.placement == Placement::sandwich;
    auto part = [](bool has, double v) { return has ? std::optional<double>(v) : std::nullopt; };
    std::vector<LayerValues> out(def.layers + 1);
    for (std::size_t l = 0; l <= def.layers; ++l) {
        const double x_rms = rms(tr.x[l], rm);
        const BlockTrace* bt = l > 0 ? &tr.blocks[l - 1] : nullptr;
        out[l] = {x_rms, x_rms / rms0, part(bt && branch, bt ? bt->branch_rms : kNaN),
                  part(bt && norm, bt ? bt->norm_in_rms : kNaN), g.grad_x_rms[l],
                  part(bt && has_w, bt ? g.grad_w_norm[l - 1] : kNaN), part(bt && has_w1, bt ? g.grad_w1_norm[l - 1] : kNaN),
                  part(bt && gamma, bt ? g.grad_gamma_norm[l - 1] : kNaN),
                  part(bt && gamma && sandwich, bt ? g.grad_gamma2_norm[l - 1] : kNaN), ratio[l]};
    }
    if (o.save_activations) ctx.save(dn, sn, "activations", stacked(tr.x), ctx.dtype);
    if (o.save_weights)
        for (const auto& [name, w] : {std::pair<const char*, const Tensor*>{"w", &s.weights().w},
                                      {"w1", &s.weights().w1}, {"w2", &s.weights().w2}})
            if (w->size() > 0 && !w->shape().empty()) ctx.save(dn, sn, name, w->to_double(), ctx.dtype);
    if (o.save_projection) ctx.save(dn, sn, "projection", r, DType::float64);  // as drawn, before any rounding
    if (o.save_mask) ctx.save_mask(dn, sn, "mask", b.mask);
    if (o.save_gradients) {
        ctx.save(dn, sn, "gradients", stacked(g.dx), ctx.dtype);
        for (const auto& [name, w] : {std::pair<const char*, const Tensor*>{"grad_w", &g.dw},
                                      {"grad_w1", &g.dw1}, {"grad_w2", &g.dw2}})
            if (w->size() > 0 && !w->shape().empty()) ctx.save(dn, sn, name, w->to_double(), ctx.dtype);
    }
    return out;
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = depth_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        for (const auto& sn : spec.stacks) check_pair(ctx, b, ctx.stack(sn), dn);
        for (const auto& sn : spec.stacks) {
            const StackDef& def = ctx.stack(sn);
            // Every draw has the same parts: the first one's say which values the mean has.
            std::vector<LayerValues> mean;
            for (long long k = 0; k < o.draws; ++k) {
                const auto v = one_draw(spec, ctx, o, def, dn, sn, b, draw_seed(ctx.seed, k));
                if (k == 0)
                    for (const auto& layer : v) {
                        LayerValues zero;
                        for (std::size_t c = 0; c < layer.size(); ++c)
                            if (layer[c]) zero[c] = 0.0;
                        mean.push_back(zero);
                    }
                for (std::size_t l = 0; l <= def.layers; ++l)
                    for (std::size_t c = 0; c < mean[l].size(); ++c)
                        if (mean[l][c]) *mean[l][c] += *v[l][c] / static_cast<double>(o.draws);
            }
            const std::string norm = def.has_norm() ? def.norm.name : "";
            const Cell eps = def.has_norm()
                                 ? Cell(def.norm.eps.value_or(default_eps(def.norm.type, def.norm.convention, ctx.dtype)))
                                 : not_applicable();
            for (std::size_t l = 0; l <= def.layers; ++l) {
                std::vector<Cell> row = {dn, sn, placement_name(def.placement), norm, eps,
                                         static_cast<long long>(def.layers), def.residual_scale(), def.init_scale(),
                                         o.draws, static_cast<long long>(l)};
                for (const auto& m : mean[l]) row.push_back(m ? Cell(*m) : not_applicable());
                t.add_row(std::move(row));
            }
        }
    }
    return t;
}

}  // namespace

AnalysisType depth_analysis() {
    AnalysisType a;
    a.name = "depth";
    a.summary = "residual stacks layer by layer: residual scale, branch and norm-input rms, gradients of x_l, W_l "
                "and the norm weight; eval/train drift after training passes";
    a.columns = {"data",       "stack",          "placement",        "norm",       "eps",
                 "layers",     "alpha",          "beta",             "draws",      "layer",
                 "resid_rms",  "resid_growth",   "branch_rms",       "norm_in_rms", "grad_x_rms",
                 "grad_w_norm", "grad_w1_norm",  "grad_gamma_norm",  "grad_gamma2_norm", "eval_train_ratio"};
    a.figure.title = "per layer: gradient of the block's weights, and the residual stream's rms over the input's";
    a.figure.kind = FigureKind::lines;
    a.figure.x = "layer";
    // draws too: two analyses of one type that average different draws share the table.
    a.figure.series = {"data", "stack", "layers", "draws"};
    a.figure.metrics = {{"grad_w_norm", "||d loss / d W_l|| (ffn: W2)"}, {"resid_growth", "rms(x_l) / rms(x_0)"}};
    a.figure.log = true;
    // Against a swept depth, the last layer's values: the max over layers hides what depth
    // does (configs/depth_sweep.json: pre-LN's last-layer gradient falls from 2.13 to 0.85
    // over 6 to 48 layers, while its largest over the layers stays at 3.24 to 3.27).
    a.figure.sweep_summary = SweepSummary::last;
    a.keys = {{"loss", "projection"}, {"train_steps", "0"}, {"draws", "1"}, save_key(kSaveable)};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.check = check;
    a.work_bytes = [](const AnalysisSpec& spec, const WorkInputs& w) {
        const Options o = read_options(spec);
        std::size_t most = 0;
        for (const auto& sn : spec.stacks) {
            const std::size_t one = stack_memory_bytes(w.stacks.at(sn), w.shape, w.dtype, o.save_gradients);
            // train_steps: an inference-mode copy of the stack runs forward beside it
            const std::size_t big = static_cast<std::size_t>(-1);
            most = std::max(most, o.train_steps == 0 ? one : one > big / 2 ? big : 2 * one);
        }
        return WorkBytes{most, ""};
    };
    // A row per stack and layer, the input (layer 0) included.
    a.rows = [](const AnalysisSpec& spec, const WorkInputs& w) {
        TableRows r;
        for (const auto& sn : spec.stacks) r.rows = (Sat(r.rows) + w.stacks.at(sn).layers + 1).n;
        return r;
    };
    a.run = run;
    return a;
}

}  // namespace normlab
