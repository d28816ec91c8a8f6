#include "norm/presets.hpp"

#include <algorithm>
#include <cmath>

#include "norm/backward.hpp"
#include "norm/replicas.hpp"
#include "tensor/errors.hpp"
#include "tensor/numbers.hpp"

namespace normlab {

std::string norm_type_name(NormType t) { return norm_type_names()[static_cast<int>(t)]; }
std::string convention_name(Convention c) { return convention_names()[static_cast<int>(c)]; }

const std::vector<std::string>& norm_type_names() {
    static const std::vector<std::string> names = {"batchnorm", "layernorm", "instancenorm",
                                                   "groupnorm", "rmsnorm"};
    return names;
}

const std::vector<std::string>& convention_names() {
    static const std::vector<std::string> names = {"torch", "onnx", "keras", "flax"};
    return names;
}

double default_eps(NormType t, Convention c, DType dtype) {
    switch (c) {
        case Convention::torch: return t == NormType::rmsnorm ? machine_eps(compute_dtype(dtype)) : 1e-5;
        case Convention::onnx: return 1e-5;
        case Convention::keras: return t == NormType::rmsnorm ? 1e-6 : 1e-3;
        case Convention::flax: return t == NormType::batchnorm ? 1e-5 : 1e-6;
    }
    return 1e-5;
}

double default_momentum(Convention c) {
    switch (c) {
        case Convention::torch: return 0.1;
        case Convention::onnx: return 0.9;
        case Convention::keras:
        case Convention::flax: return 0.99;
    }
    return 0.1;
}

std::optional<double> new_batch_weight(const NormDef& d) {
    if (d.momentum_null) return std::nullopt;
    const double mom = d.momentum.value_or(default_momentum(d.convention));
    return d.convention == Convention::torch ? mom : 1.0 - mom;
}

bool unbiased_running_var(const NormDef& d) { return d.convention == Convention::torch; }

xt::xarray<double> materialize(const ParamInit& init, const Shape& shape, const std::string& what,
                               const std::string& norm) {
    switch (init.kind) {
        case ParamInit::Kind::ones: return xt::ones<double>(shape);
        case ParamInit::Kind::zeros: return xt::zeros<double>(shape);
        case ParamInit::Kind::constant: {
            xt::xarray<double> a = xt::xarray<double>::from_shape(shape);
            a.fill(init.constant);
            return a;
        }
        case ParamInit::Kind::values: {
            Shape got(init.values.shape().begin(), init.values.shape().end());
            if (got != shape)
                throw NormError(norm, what, what + ": expected shape " + format_shape(shape) + " (" +
                              count_noun(num_elements(shape), "element") + "), but got " +
                              format_shape(got));
            return init.values;
        }
        case ParamInit::Kind::generated: return init.generate(shape);
    }
    return {};
}

namespace {

bool is_channel_norm(NormType t) {
    return t == NormType::batchnorm || t == NormType::instancenorm || t == NormType::groupnorm;
}

// Prefix of every bind-time error: names the norm and the data (DESIGN.md: a pair that does
// not fit is an error that names both).
std::string pair_msg(const NormDef& d, const std::string& data, const std::string& what) {
    return norm_type_name(d.type) + " \"" + d.name + "\" on data \"" + data + "\": " + what;
}

using Fail = std::function<void(const std::string&, const std::string&)>;
// fail(key, what) with the other keys of the norm the message depends on (NormError::related_keys).
using FailRelated = std::function<void(const std::string&, const std::string&, std::vector<std::string>)>;

// A GroupNorm weight or bias given as values must have the shape affine_per asks for; the
// message names both readings, since a port between ONNX opsets 18 (G) and 21 (C) is the
// usual way to get it wrong.
void check_group_param(const NormDef& d, const std::optional<ParamInit>& p, const std::string& key,
                       const Resolution& r, const FailRelated& fail) {
    if (!p || p->kind != ParamInit::Kind::values) return;
    const Shape got(p->values.shape().begin(), p->values.shape().end());
    if (got == r.param_shape) return;
    const std::size_t C = r.channels, G = static_cast<std::size_t>(d.num_groups);
    const bool per_group = d.affine_per == AffinePer::group;
    fail(key, key + ": expected shape " + format_shape(r.param_shape) + " (one value per " +
                  (per_group ? "group" : "channel") + ", affine_per \"" + (per_group ? "group" : "channel") +
                  "\"), but got " + format_shape(got) + "; groupnorm takes " + format_shape({C}) +
                  " with affine_per \"channel\" (one value per channel) or " + format_shape({G}) +
                  " with affine_per \"group\" (one value per group of C/G = " + count_noun(C / G, "channel") +
                  ")",
         {"channel_axis", "num_groups", "affine_per"});
}

std::string list_text(const std::vector<long long>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

// "1", "1 and 3", "1, 2 and 3": axes as messages list them.
std::string axes_words(const Axes& axes) {
    std::vector<std::string> words;
    for (std::size_t a : axes) words.push_back(std::to_string(a));
    return join_words(words, " and ");
}

// The axes of `all` that are not in `some`, in order.
Axes without_axes(const Axes& all, const Axes& some) {
    Axes out;
    for (std::size_t a : all)
        if (std::find(some.begin(), some.end(), a) == some.end()) out.push_back(a);
    return out;
}

// The canonical axes a layernorm's or rmsnorm's param_axes name (sorted: the weight holds
// the data's dims in axis order), each one of the normalized axes r.reduction_axes. An
// entry at fault is named by its index ("param_axes/1"), so that the config can point at it.
Axes resolve_param_axes(const NormDef& d, const Resolution& r, bool affine, const FailRelated& fail_related) {
    auto fail = [&](const std::string& key, const std::string& what) { fail_related(key, what, {}); };
    const std::vector<long long>& given = *d.param_axes;
    if (!affine) fail("param_axes", "param_axes given but affine is false (there is no weight or bias to place)");
    if (given.empty())
        fail("param_axes", "param_axes must not be empty (leave it out for parameters over every normalized axis)");
    const Shape& xs = r.input_shape;
    Axes out;
    for (std::size_t i = 0; i < given.size(); ++i) {
        const std::string key = "param_axes/" + std::to_string(i);
        std::size_t a = 0;
        try {
            a = canonicalize_axis(given[i], xs.size(), "param_axes");
        } catch (const InputError& e) {
            fail(key, e.what());
        }
        const auto seen = std::find(out.begin(), out.end(), a);
        if (seen != out.end())
            fail(key, "param_axes: axis " + std::to_string(given[i]) + " repeated (it is axis " + std::to_string(a) +
                          " of input shape " + format_shape(xs) + ", which entry " +
                          std::to_string(seen - out.begin()) + " names already)");
        if (std::find(r.reduction_axes.begin(), r.reduction_axes.end(), a) == r.reduction_axes.end()) {
            const std::string from = d.normalized_shape ? "normalized_shape " + list_text(*d.normalized_shape)
                                                        : "axes " + list_text(d.axes.value_or(std::vector<long long>{}));
            const std::string of = " of input shape " + format_shape(xs);
            fail_related(key,
                         "param_axes: axis " + std::to_string(given[i]) +
                             (given[i] < 0 ? " (axis " + std::to_string(a) + of + ")" : of) + " is not normalized: the normalized " +
                             (r.reduction_axes.size() == 1 ? "axis is " : "axes are ") + axes_words(r.reduction_axes) +
                             " (" + from + "), and the weight and bias span some of them (parameters on an axis the "
                             "statistics are not taken over, one per channel: instancenorm or batchnorm)",
                         {d.normalized_shape ? "normalized_shape" : "axes"});
        }
        out.push_back(a);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Why a weight, bias or running statistic has the shape it must have on this input, for the
// message that refuses another shape: where its size comes from (the data's channel count
// at its channel axis, or the normalized dims), since the list the user wrote was usually
// sized for another data entry or another layout.
std::string param_shape_reason(const NormDef& d, const Resolution& r) {
    const std::string of = " of input shape " + format_shape(r.input_shape);
    if (is_channel_norm(d.type))
        return "one value per channel: C = " + std::to_string(r.channels) + " at channel axis " +
               std::to_string(r.channel_axis) + of;
    if (r.spec.param_axes == r.reduction_axes)
        return std::string(r.reduction_axes.size() == 1 ? "the dim at normalized axis " : "the dims at normalized axes ") +
               axes_words(r.reduction_axes) + of;
    const Axes along = without_axes(r.reduction_axes, r.spec.param_axes);
    return std::string(r.spec.param_axes.size() == 1 ? "the dim at param axis " : "the dims at param axes ") +
           axes_words(r.spec.param_axes) + of + " (param_axes " + list_text(*d.param_axes) + "), broadcast along " +
           (along.size() == 1 ? "normalized axis " : "normalized axes ") + axes_words(along);
}

// The norm's own keys that decide the shape its parameters and running statistics must
// have, so that an override or sweep point that changed one is named for a shape error:
// the channel axis (and GroupNorm's affine_per), or the normalized and parameter axes.
std::vector<std::string> param_shape_keys(const NormDef& d) {
    if (is_channel_norm(d.type))
        return d.type == NormType::groupnorm ? std::vector<std::string>{"channel_axis", "affine_per"}
                                             : std::vector<std::string>{"channel_axis"};
    return {"normalized_shape", "axes", "param_axes"};
}

// A parameter given as values (a list or an npy file) must have `expected` shape; the
// message names the data (through `fail`), says why that shape, and relates the norm's keys
// that decide it (param_shape_keys).
void check_param_values(const NormDef& d, const std::optional<ParamInit>& p, const std::string& key,
                        const Shape& expected, const Resolution& r, const FailRelated& fail) {
    if (!p || p->kind != ParamInit::Kind::values) return;
    const Shape got(p->values.shape().begin(), p->values.shape().end());
    if (got == expected) return;
    // The right count of values, flat, for a parameter of several dims: say how to shape it
    // (a list nests one level per dim; an npy file takes the shape itself).
    std::string nesting;
    if (got.size() == 1 && expected.size() > 1 && got[0] == num_elements(expected)) {
        nesting = " (the right count, flat: as a list, nest it: a list of " + std::to_string(expected[0]);
        for (std::size_t i = 1; i < expected.size(); ++i) nesting += " lists of " + std::to_string(expected[i]);
        nesting += " values)";
    }
    fail(key, key + ": expected shape " + format_shape(expected) + " (" + param_shape_reason(d, r) + "), but got " +
                  format_shape(got) + nesting,
         param_shape_keys(d));
}

// BatchNorm's replicas: slices of axis 0 that must cover the batch. Unsynchronised in
// training, each replica is a batch of its own, so PyTorch's one-value-per-channel error
// applies to each (DataParallel runs F.batch_norm per replica); synchronised, the global
// count is what matters (SyncBatchNorm), checked like an ordinary batch.
void resolve_replicas(const NormDef& d, Resolution& r, const Fail& fail) {
    const Shape& xs = r.input_shape;
    if (r.channel_axis == 0)
        fail("replicas", "replicas split the batch along axis 0, which is the channel axis of input shape " +
                             format_shape(xs));
    const std::size_t n = xs[0];
    std::vector<std::size_t> sizes;
    if (d.replica_count > 0) {
        const std::size_t R = static_cast<std::size_t>(d.replica_count);
        if (n % R != 0)
            fail("replicas", "replicas " + std::to_string(R) + " does not divide the batch of N = " +
                                 count_noun(n, "sample") + " (input shape " + format_shape(xs) +
                                 ") into equal slices; give the per-replica sample counts as a list");
        sizes.assign(R, n / R);
    } else {
        // Summed in unsigned arithmetic, stopping past N: counts near 2^63 cannot overflow.
        unsigned long long sum = 0;
        bool over = false;
        for (long long v : d.replica_sizes) {
            const auto u = static_cast<unsigned long long>(std::max(v, 0LL));
            over = over || u > n || sum > n - u;
            if (!over) sum += u;
        }
        if (over || sum != n)
            fail("replicas", "per-replica sample counts " + list_text(d.replica_sizes) + " sum to " +
                                 (over ? "more than " + std::to_string(n) : std::to_string(sum)) +
                                 ", but the batch has N = " + count_noun(n, "sample") + " (input shape " +
                                 format_shape(xs) + ")");
        for (long long v : d.replica_sizes) sizes.push_back(static_cast<std::size_t>(v));
    }
    if (!r.use_batch_stats || d.sync) return;  // one set of statistics for the whole batch
    const std::size_t per_sample = n ? r.elems_per_stat / n : 0;  // values per channel per sample
    std::size_t smallest = r.elems_per_stat;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] * per_sample == 1)
            fail("replicas", "in training mode: replica " + std::to_string(i) + " (" + std::to_string(sizes[i]) +
                                 " of the " + count_noun(n, "sample") + " of input shape " + format_shape(xs) +
                                 ") has one value per channel (need more than 1); with sync false each "
                                 "replica normalises with its own statistics");
        smallest = std::min(smallest, sizes[i] * per_sample);
    }
    r.replicas = sizes;
    r.elems_per_stat = smallest;
}

}  // namespace

NormLayer::NormLayer(NormDef def, DType dtype) : m_def(std::move(def)), m_dtype(dtype) {}

bool keeps_running_stats(const NormDef& d) {
    if (d.type == NormType::batchnorm) return d.track_running_stats.value_or(true);
    if (d.type == NormType::instancenorm) return d.track_running_stats.value_or(false);
    return false;
}

std::string momentum_text(const NormDef& d) {
    return d.momentum_null ? std::string("null") : format_number(d.momentum.value_or(default_momentum(d.convention)));
}

bool is_affine(const NormDef& d) { return d.affine.value_or(d.type != NormType::instancenorm); }

bool NormLayer::has_running_stats() const { return keeps_running_stats(m_def); }

Resolution NormLayer::resolve(const Shape& xs, std::size_t data_channel_axis,
                              const std::string& data_name) const {
    const NormDef& d = m_def;
    auto fail_related = [&](const std::string& key, const std::string& what, std::vector<std::string> related) {
        throw NormError(d.name, key, pair_msg(d, data_name, what), data_name, what, std::move(related));
    };
    auto fail = [&](const std::string& key, const std::string& what) { fail_related(key, what, {}); };
    Resolution r;
    r.input_shape = xs;
    r.view_shape = xs;
    r.eps = d.eps.value_or(default_eps(d.type, d.convention, m_dtype));
    const std::size_t rank = xs.size();
    const bool affine = is_affine(d);
    NormSpec& spec = r.spec;
    spec.eps = r.eps;
    spec.eps_placement = d.eps_placement;
    spec.variance = d.variance;
    spec.weight_offset = d.weight_offset;
    spec.affine_rounding = d.affine_rounding;
    spec.compute = d.compute.value_or(default_compute());

    if (is_channel_norm(d.type)) {
        if (d.param_axes)
            fail("param_axes", "param_axes applies to layernorm and rmsnorm only; " + norm_type_name(d.type) +
                                   "'s weight and bias lie on its channel axis");
        std::size_t ca = data_channel_axis;
        if (d.channel_axis) {
            try {
                ca = canonicalize_axis(*d.channel_axis, rank, "channel_axis");
            } catch (const InputError& e) {
                fail("channel_axis", e.what());
            }
        }
        if (ca >= rank) fail("", "channel axis out of range for input of shape " + format_shape(xs));
        r.channel_axis = ca;
        r.channels = xs[ca];
        if (d.type != NormType::batchnorm && (rank < 2 || ca == 0))
            fail("", "expected an input with a batch axis 0 and a channel axis after it, but got "
                        "input of shape " + format_shape(xs) + " with channel axis " +
                        std::to_string(ca));
        r.param_shape = {xs[ca]};
        r.param_axes = {ca};
        if (d.type == NormType::batchnorm) {
            r.reduction_axes = complement_axes({ca}, rank);
            spec.reduction_axes = r.reduction_axes;
            spec.param_axes = {ca};
        } else if (d.type == NormType::instancenorm) {
            r.reduction_axes = complement_axes({0, ca}, rank);
            spec.reduction_axes = r.reduction_axes;
            spec.param_axes = {ca};
        } else {  // groupnorm: split C into (G, C/G) in place and reduce all but (N, G)
            long long g = d.num_groups;
            if (g <= 0) fail("num_groups", "num_groups must be positive, but got " + std::to_string(g));
            std::size_t G = static_cast<std::size_t>(g);
            if (xs[ca] % G != 0)
                fail("num_groups",
                     "expected channels (C=" + std::to_string(xs[ca]) +
                         ") to be divisible by num_groups (" + std::to_string(G) +
                         "), but got input of shape " + format_shape(xs));
            r.view_shape.clear();
            for (std::size_t a = 0; a < rank; ++a) {
                if (a == ca) {
                    r.view_shape.push_back(G);
                    r.view_shape.push_back(xs[ca] / G);
                } else {
                    r.view_shape.push_back(xs[a]);
                }
            }
            r.reduction_axes = complement_axes({0}, rank);
            spec.reduction_axes = complement_axes({0, ca}, rank + 1);
            // Per group: the weight spans the G axis of the view and broadcasts over C/G.
            if (d.affine_per == AffinePer::group) {
                r.param_shape = {G};
                spec.param_axes = {ca};
            } else {
                spec.param_axes = {ca, ca + 1};
            }
        }
    } else {  // layernorm, rmsnorm: trailing normalized_shape or any axes
        if (d.normalized_shape && d.axes)
            fail("", "give either normalized_shape or axes, not both");
        if (d.normalized_shape) {
            const auto& ns = *d.normalized_shape;
            bool ok = !ns.empty() && ns.size() <= rank;
            for (std::size_t i = 0; ok && i < ns.size(); ++i)
                ok = ns[i] > 0 && static_cast<std::size_t>(ns[i]) == xs[rank - ns.size() + i];
            if (!ok) {
                std::string nss = "[";
                for (std::size_t i = 0; i < ns.size(); ++i) nss += (i ? ", " : "") + std::to_string(ns[i]);
                nss += "]";
                fail("normalized_shape",
                     "given normalized_shape=" + nss + ", expected input with shape [*, " +
                         nss.substr(1) + ", but got input of shape " + format_shape(xs));
            }
            for (std::size_t a = rank - ns.size(); a < rank; ++a) r.reduction_axes.push_back(a);
        } else if (d.axes) {
            try {
                r.reduction_axes = canonicalize_axes(*d.axes, rank, "axes");
            } catch (const InputError& e) {
                fail("axes", e.what());
            }
            if (r.reduction_axes.empty()) fail("axes", "axes must not be empty");
        } else {
            fail("", "needs normalized_shape or axes");
        }
        spec.reduction_axes = r.reduction_axes;
        spec.param_axes = d.param_axes ? resolve_param_axes(d, r, affine, fail_related) : r.reduction_axes;
        r.param_shape = select_dims(xs, spec.param_axes);
        r.param_axes = spec.param_axes;
        spec.center = d.type == NormType::layernorm;
    }

    r.has_weight = affine;
    r.has_bias = affine && d.type != NormType::rmsnorm;
    if (!affine) {
        if (d.weight) fail("weight", "weight given but affine is false");
        if (d.bias) fail("bias", "bias given but affine is false");
    }
    if (d.type == NormType::rmsnorm && d.bias) fail("bias", "rmsnorm has no bias (weight only)");
    std::size_t pn = num_elements(r.param_shape);
    r.num_params = (r.has_weight ? pn : 0) + (r.has_bias ? pn : 0);
    r.stats_shape = keepdims_shape(r.view_shape, spec.reduction_axes);
    r.num_stats = num_elements(r.stats_shape);
    r.elems_per_stat = r.num_stats ? num_elements(xs) / r.num_stats : 0;

    bool training = d.training.value_or(true);
    bool tracking = has_running_stats();
    r.use_batch_stats = !tracking || training;
    r.update_running = tracking && training;
    spec.zero_rstd_at_zero_var = d.convention == Convention::torch && r.use_batch_stats &&
                                 (d.type == NormType::batchnorm || d.type == NormType::instancenorm);
    if (d.type == NormType::batchnorm && r.use_batch_stats && r.elems_per_stat == 1)
        fail("", "in training mode: one value per channel (need more than 1), input shape " +
                        format_shape(xs));
    if (d.type == NormType::instancenorm && r.use_batch_stats && r.elems_per_stat == 1)
        fail("", "one value per instance and channel (need more than 1 spatial element), "
                    "input shape " + format_shape(xs));
    // PyTorch's check (F.group_norm -> _verify_batch_size on (N*C/G, G, *spatial)): refused
    // only when the whole batch has one value per group, N * C/G * spatial == 1. With N > 1
    // a one-element group is allowed (and normalises to 0).
    if (d.type == NormType::groupnorm && r.elems_per_stat * xs[0] == 1)
        fail("", "one value per group (need more than 1), input shape " + format_shape(xs) +
                        " with num_groups " + std::to_string(d.num_groups));
    if (tracking) {
        Shape cs{r.channels};
        if (m_running_mean.size() > 0 && m_running_mean.size() != r.channels)
            fail("", "running statistics have " + std::to_string(m_running_mean.size()) +
                            " channels from an earlier step, but this input has " +
                            std::to_string(r.channels) + ": input shape " + format_shape(xs));
        check_param_values(d, d.running_mean, "running_mean", cs, r, fail_related);
        check_param_values(d, d.running_var, "running_var", cs, r, fail_related);
        if (d.running_mean) materialize(*d.running_mean, cs, "running_mean", d.name);
        if (d.running_var) materialize(*d.running_var, cs, "running_var", d.name);
    }
    if (d.type == NormType::groupnorm) {
        if (r.has_weight) check_group_param(d, d.weight, "weight", r, fail_related);
        if (r.has_bias) check_group_param(d, d.bias, "bias", r, fail_related);
    }
    if (r.has_weight) check_param_values(d, d.weight, "weight", r.param_shape, r, fail_related);
    if (r.has_bias) check_param_values(d, d.bias, "bias", r.param_shape, r, fail_related);
    if (r.has_weight && d.weight) materialize(*d.weight, r.param_shape, "weight", d.name);
    if (r.has_bias && d.bias) materialize(*d.bias, r.param_shape, "bias", d.name);
    if (d.type == NormType::batchnorm && d.has_replicas()) resolve_replicas(d, r, fail);
    return r;
}

void NormLayer::require_mask(bool data_has_mask, const std::string& data_name) const {
    if (m_def.mask && !data_has_mask)
        throw NormError(m_def.name, "mask", pair_msg(m_def, data_name, "mask is true but the data has no padding mask"),
                        data_name);
}

namespace {

// Reshape a (C)-shaped or param-shaped array to the engine's param shape (GroupNorm's
// (G, C/G) view of C is the same row-major data).
xt::xarray<double> to_view(xt::xarray<double> a, const Shape& s) {
    a.reshape(s);
    return a;
}

}  // namespace

xt::xarray<std::uint8_t> view_mask(const xt::xarray<std::uint8_t>& m, const Resolution& r) {
    if (r.view_shape.size() == r.input_shape.size()) return m;
    Shape ms(m.shape().begin(), m.shape().end());
    Shape vs;
    for (std::size_t a = 0; a < ms.size(); ++a) {
        if (a == r.channel_axis) {
            vs.push_back(ms[a] == 1 ? 1 : r.view_shape[a]);
            vs.push_back(ms[a] == 1 ? 1 : r.view_shape[a + 1]);
        } else {
            vs.push_back(ms[a]);
        }
    }
    xt::xarray<std::uint8_t> out = m;
    out.reshape(vs);
    return out;
}

Tensor reshaped(Tensor t, const Shape& shape) {
    if (t.dtype == DType::float64) t.f64.reshape(shape);
    else t.f32.reshape(shape);
    return t;
}

StepResult NormLayer::forward(const Tensor& x, std::size_t channel_axis, const std::string& data_name,
                              const xt::xarray<std::uint8_t>* mask) {
    StepResult out;
    forward(x, channel_axis, data_name, mask, out);
    return out;
}

void NormLayer::forward(const Tensor& x, std::size_t channel_axis, const std::string& data_name,
                        const xt::xarray<std::uint8_t>* mask, StepResult& out) {
    Resolution& r = out.res;
    r = resolve(x.shape(), channel_axis, data_name);
    const NormDef& d = m_def;
    require_mask(mask != nullptr, data_name);

    Shape vps = select_dims(r.view_shape, r.spec.param_axes);
    StepInputs& in = out.in;
    in.has_weight = r.has_weight;
    in.has_bias = r.has_bias;
    if (r.has_weight) in.weight = to_view(d.weight ? materialize(*d.weight, r.param_shape, "weight", d.name) : xt::ones<double>(r.param_shape), vps);
    if (r.has_bias) in.bias = to_view(d.bias ? materialize(*d.bias, r.param_shape, "bias", d.name) : xt::zeros<double>(r.param_shape), vps);

    const bool tracking = has_running_stats();
    if (tracking && m_running_mean.size() == 0) {
        Shape cs{r.channels};
        m_running_mean = d.running_mean ? materialize(*d.running_mean, cs, "running_mean", d.name) : xt::zeros<double>(cs);
        m_running_var = d.running_var ? materialize(*d.running_var, cs, "running_var", d.name) : xt::ones<double>(cs);
    }

    in.has_mask = d.mask;
    if (d.mask) in.mask = view_mask(*mask, r);
    in.given = !r.use_batch_stats;
    if (in.given) {  // inference: running statistics broadcast over the stats shape
        xt::xarray<double>& gm = in.given_mean;
        xt::xarray<double>& gv = in.given_var;
        gm = xt::xarray<double>::from_shape(r.stats_shape);
        gv = xt::xarray<double>::from_shape(r.stats_shape);
        // Stats are per channel (BatchNorm) or per (sample, channel) (InstanceNorm); walk the
        // stats array and pick the channel's running value.
        std::size_t inner = 1;
        for (std::size_t a = r.channel_axis + 1; a < r.stats_shape.size(); ++a) inner *= r.stats_shape[a];
        for (std::size_t i = 0; i < gm.size(); ++i) {
            std::size_t c = (i / inner) % r.channels;
            gm.data()[i] = m_running_mean(c);
            gv.data()[i] = m_running_var(c);
        }
    }
    // The engine reads x through the view shape (no copy) and writes into out's buffers,
    // which a caller that repeats steps (bench, sweeps) thereby reuses.
    if (!r.replicas.empty()) {
        forward_replicas(x, r.view_shape, r.spec, in.pointers(), r.replicas, out.fwd);
    } else {
        if (out.fwd.y.size() == x.size() && out.fwd.y.dtype == x.dtype)
            out.fwd.y = reshaped(std::move(out.fwd.y), r.view_shape);
        normlab::forward(x, r.view_shape, r.spec, in.pointers(), out.fwd);
    }
    out.fwd.y = reshaped(std::move(out.fwd.y), r.input_shape);

    if (r.update_running) {
        // Per-channel batch mean and variance: BatchNorm's stats are per channel already;
        // InstanceNorm's are per (sample, channel) and PyTorch averages them over the batch.
        // With per-replica statistics only replica 0's (the first num_stats entries) count:
        // DataParallel keeps replica 0's buffers, DDP broadcasts rank 0's.
        const auto& bm = out.fwd.batch;
        const std::size_t used = r.replicas.empty() ? bm.mean.size() : r.num_stats;
        std::size_t inner = 1;
        for (std::size_t a = r.channel_axis + 1; a < r.stats_shape.size(); ++a) inner *= r.stats_shape[a];
        xt::xarray<double> cm = xt::zeros<double>({r.channels}), cv = xt::zeros<double>({r.channels});
        xt::xarray<double> per = xt::zeros<double>({r.channels});
        const bool unbiased_running = unbiased_running_var(d);
        for (std::size_t i = 0; i < used; ++i) {
            std::size_t c = (i / inner) % r.channels;
            double n = bm.count.data()[i];
            double v = bm.var.data()[i];
            if (unbiased_running) v = v * n / (n - 1);
            cm(c) += bm.mean.data()[i];
            cv(c) += v;
            per(c) += 1;
        }
        ++m_steps;
        const double m = new_batch_weight(d).value_or(1.0 / static_cast<double>(m_steps));
        for (std::size_t c = 0; c < r.channels; ++c) {
            m_running_mean(c) = (1 - m) * m_running_mean(c) + m * cm(c) / per(c);
            m_running_var(c) = (1 - m) * m_running_var(c) + m * cv(c) / per(c);
        }
    }
}

ForwardInputs StepInputs::pointers() const {
    ForwardInputs in;
    if (has_weight) in.weight = &weight;
    if (has_bias) in.bias = &bias;
    if (has_mask) in.mask = &mask;
    if (given) in.given_mean = &given_mean, in.given_var = &given_var;
    return in;
}

StepGradients step_backward(const Tensor& x, const StepResult& s, const xt::xarray<double>& dy) {
    const Resolution& r = s.res;
    const Shape dys(dy.shape().begin(), dy.shape().end());
    if (dys != r.input_shape)
        throw InputError("upstream gradient: expected the input's shape " + format_shape(r.input_shape) +
                         ", but got " + format_shape(dys));
    BackwardResult b;
    if (!r.replicas.empty()) backward_replicas(x, r.view_shape, r.spec, s.in.pointers(), r.replicas, s.fwd, dy, b);
    else backward(x, r.view_shape, r.spec, s.in.pointers(), s.fwd, dy, b);
    StepGradients g;
    g.dx = reshaped(std::move(b.dx), r.input_shape);
    if (s.in.has_weight) g.dweight = to_view(std::move(b.dweight), r.param_shape);
    if (s.in.has_bias) g.dbias = to_view(std::move(b.dbias), r.param_shape);
    return g;
}

}  // namespace normlab
