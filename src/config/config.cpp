#include "config/config.hpp"

#include <algorithm>
#include <cmath>

#include <xtensor/xadapt.hpp>

#include "data/npy.hpp"
#include "json/text.hpp"
#include "data/random.hpp"
#include "data/sources.hpp"
#include "report/output_paths.hpp"
#include "tensor/errors.hpp"
#include "tensor/numbers.hpp"

namespace normlab {

namespace {

// "ones", "zeros", a number, a nested list, {"npy": path} or {"normal": {"mean", "std"}}.
ParamInit parse_param(const Json& j, const JsonLocation& loc, const std::filesystem::path& base_dir,
                      std::uint64_t seed) {
    ParamInit p;
    if (j.is_string() && !json_number(j)) {
        std::string s = j.get<std::string>();
        if (s == "ones") p.kind = ParamInit::Kind::ones;
        else if (s == "zeros") p.kind = ParamInit::Kind::zeros;
        else loc.fail("unknown initialiser " + quoted_text(s) + " (expected \"ones\", \"zeros\", a number, a list, {\"npy\": path} or {\"normal\": {\"mean\": m, \"std\": s}})" +
                      nonfinite_note(s));
        return p;
    }
    if (const auto v = json_number(j)) {  // a number, or "nan", "inf", "-inf"
        p.kind = ParamInit::Kind::constant;
        p.constant = *v;
        return p;
    }
    if (j.is_array()) {
        p.kind = ParamInit::Kind::values;
        if (!j.empty() && j[0].is_array()) {  // (D1, D2, ...): the weight of LayerNorm over several axes
            p.values = nested_numbers(j, loc);
            return p;
        }
        std::vector<double> v = read_numbers(j, loc);
        p.values = xt::adapt(v, Shape{v.size()});
        return p;
    }
    ObjectReader r(j, loc);
    r.declare({"npy", "normal"});
    r.finish();
    if (auto path = r.string("npy")) {
        std::filesystem::path full = std::filesystem::path(*path).is_absolute() ? std::filesystem::path(*path) : base_dir / *path;
        p.kind = ParamInit::Kind::values;
        try {
            p.values = read_npy(full).values;
        } catch (const InputError& e) {
            r.at("npy").fail(e.what());
        }
    } else if (const Json* n = r.raw("normal")) {
        ObjectReader nr(*n, r.at("normal"));
        nr.declare({"mean", "std"});
        nr.finish();
        // Drawn when the norm meets its data and the shape is known; the stream depends only
        // on the run seed and this parameter's JSON pointer, so every shape and every point
        // of a sweep with the same seed draws the same leading values.
        p.kind = ParamInit::Kind::generated;
        const double mean = nr.finite("mean", 0.0), std = nr.nonnegative("std", 1.0);
        const std::uint64_t stream = derive_seed(seed, loc.pointer);
        p.generate = [mean, std, stream](const Shape& shape) {
            xt::xarray<double> a = xt::xarray<double>::from_shape(shape);
            Rng rng(stream);
            for (auto& v : a) v = rng.normal(mean, std);
            return a;
        };
        nr.finish();
    } else {
        r.missing_one_of({"npy", "normal"}, "expected \"ones\", \"zeros\", a number, a list, {\"npy\": path} or {\"normal\": {...}}");
    }
    r.finish();
    return p;
}

// Names become path components of the output (results/<name>, arrays/<data>/<norm>/), so
// each must be one plain file name: a name with '/', '\\', ".." or "." would write outside
// the folder the user pointed at, or somewhere unexpected inside it, and one longer than
// `max_bytes` cannot be created at all (found here, not at the first write after the
// computing).
void check_path_name(const std::string& s, const JsonLocation& loc, const std::string& what,
                     std::size_t max_bytes = kMaxNameBytes) {
    std::string why;
    if (s.empty()) why = "must not be empty";
    else if (s == "." || s == "..") why = "must not be \".\" or \"..\"";
    else if (s.find_first_of("/\\") != std::string::npos) why = "must not contain '/' or '\\'";
    else
        for (char c : s)
            if (static_cast<unsigned char>(c) < 32) why = "must not contain control characters";
    if (!why.empty())
        loc.fail(what + " " + quoted_text(s) + " " + why + ": it names a folder of the output, which must stay inside " +
                 "the folder the results go to");
    const std::string too_long = name_length_problem(s, max_bytes);
    if (!too_long.empty()) loc.fail(what + " " + too_long + ": it names a folder of the output");
}

// BatchNorm's "replicas" (a number of equal slices or a list of per-replica sample
// counts) and "sync". Whether they split the batch is checked when the norm meets its data.
void parse_replicas(ObjectReader& r, NormDef& d) {
    if (const Json* j = r.raw("replicas")) {
        const JsonLocation at = r.at("replicas");
        if (j->is_number_integer() || j->is_number_unsigned()) {
            d.replica_count = *r.integer("replicas");
            if (d.replica_count < 1) at.fail("replicas must be >= 1, but got " + std::to_string(d.replica_count));
        } else if (j->is_array()) {
            d.replica_sizes = read_integers(*j, at);
            if (d.replica_sizes.empty()) at.fail("list is empty (expected one sample count per replica)");
            for (std::size_t i = 0; i < d.replica_sizes.size(); ++i)
                if (d.replica_sizes[i] < 1)
                    at.child(i).fail("a replica holds at least 1 sample, but got " + std::to_string(d.replica_sizes[i]));
        } else {
            at.fail("expected a number of equal replicas or a list of per-replica sample counts, but got " +
                    json_got(*j));
        }
    }
    d.sync = r.boolean("sync", false);
    if (d.sync && !d.has_replicas())
        r.at("sync").fail("\"sync\": true applies to \"replicas\", which is not given (without replicas the "
                          "whole batch is one replica)");
}

// layernorm's and rmsnorm's "param_axes": what can be told without the data (an empty
// list, the same number twice, no parameters to place); range, an axis named twice through
// its negative form, and membership in the normalized axes are checked when the norm meets
// its data (presets.cpp).
void parse_param_axes(ObjectReader& r, NormDef& d) {
    d.param_axes = r.integers("param_axes");
    if (!d.param_axes) return;
    const JsonLocation at = r.at("param_axes");
    if (d.param_axes->empty())
        at.fail("param_axes must not be empty (leave it out for parameters over every normalized axis)");
    if (!d.affine.value_or(true))
        at.fail("param_axes given but affine is false (there is no weight or bias to place)", {r.at("affine").pointer});
    for (std::size_t i = 1; i < d.param_axes->size(); ++i) {
        const auto& v = *d.param_axes;
        const auto first = std::find(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v[i]);
        if (first != v.begin() + static_cast<std::ptrdiff_t>(i))
            at.child(i).fail("param_axes: axis " + std::to_string(v[i]) + " repeated (first at " +
                             at.child(static_cast<std::size_t>(first - v.begin())).pointer + ")");
    }
}

}  // namespace

const std::vector<KeyInfo>& norm_keys(NormType type) {
    static const std::vector<std::vector<KeyInfo>> keys = [] {
        const std::vector<KeyInfo> common = {
            {"type", "required"}, {"eps", "the convention's"}, {"weight", "ones"}, {"bias", "zeros"},
            {"mask", "false"}, {"convention", "torch"}, {"eps_placement", "inside_sqrt"}, {"variance", "biased"},
            {"affine_rounding", "once"}, {"compute", "float where the CPU has FMA, else double"}};
        auto with = [&](std::vector<KeyInfo> own) {
            own.insert(own.begin(), common.begin(), common.end());
            return own;
        };
        const KeyInfo momentum{"momentum", "the convention's, 0.1 under torch; null = cumulative average"};
        std::vector<std::vector<KeyInfo>> k(norm_type_names().size());
        auto at = [&](NormType t) -> std::vector<KeyInfo>& { return k[static_cast<std::size_t>(t)]; };
        at(NormType::batchnorm) = with({{"channel_axis", "the data's"}, {"affine", "true"}, {"training", "true"}, momentum,
                                        {"track_running_stats", "true"}, {"running_mean", "zeros"},
                                        {"running_var", "ones"}, {"replicas", "none: R or [n1, n2, ...]"},
                                        {"sync", "false"}});
        const KeyInfo param_axes{"param_axes", "every normalized axis"};
        at(NormType::layernorm) = with({{"normalized_shape", "required unless axes: the trailing dims"},
                                        {"axes", "or normalized_shape"}, param_axes,
                                        {"affine", "true"}});
        at(NormType::instancenorm) = with({{"channel_axis", "the data's"}, {"affine", "false"}, {"training", "true"},
                                           momentum, {"track_running_stats", "false"}, {"running_mean", "zeros"},
                                           {"running_var", "ones"}});
        at(NormType::groupnorm) = with({{"num_groups", "required"}, {"channel_axis", "the data's"}, {"affine", "true"},
                                        {"affine_per", "channel"}});
        at(NormType::rmsnorm) = with({{"normalized_shape", "required unless axes: the trailing dims"},
                                      {"axes", "or normalized_shape"}, param_axes,
                                      {"affine", "true: weight only"}, {"weight_offset", "0"}});
        return k;
    }();
    return keys.at(static_cast<std::size_t>(type));
}

NormDef parse_norm(const std::string& name, const Json& j, const JsonLocation& loc,
                   const std::filesystem::path& base_dir, std::uint64_t seed) {
    NormDef d;
    d.name = name;
    const auto& types = norm_type_names();
    // The type decides which keys the object may hold, so it is read first, by a reader
    // that knows the keys of every type: a misspelled "typ" is found, a valid key is not
    // taken for one.
    ObjectReader probe(j, loc);
    for (std::size_t t = 0; t < types.size(); ++t) probe.allow(key_names(norm_keys(static_cast<NormType>(t))));
    if (!probe.has("type")) probe.missing("type", " (one of: batchnorm, layernorm, instancenorm, groupnorm, rmsnorm)");
    std::string type = probe.choice("type", types, "");
    d.type = static_cast<NormType>(std::find(types.begin(), types.end(), type) - types.begin());
    // Before the unknown-key check, which would call it only unknown: the key is valid, on
    // another type.
    if (probe.has("param_axes") && d.type != NormType::layernorm && d.type != NormType::rmsnorm)
        probe.at("param_axes").fail("param_axes applies to layernorm and rmsnorm only; " + type +
                                        "'s weight and bias lie on its channel axis, one value per channel",
                                    {probe.at("type").pointer});
    ObjectReader r(j, loc);
    r.declare(key_names(norm_keys(d.type)));
    r.finish();  // unknown keys first: a misspelled required key is reported as itself
    std::string conv = r.choice("convention", convention_names(), "torch");
    d.convention = static_cast<Convention>(
        std::find(convention_names().begin(), convention_names().end(), conv) - convention_names().begin());
    d.eps = r.nonnegative("eps");
    d.affine = r.boolean("affine");
    d.mask = r.boolean("mask", false);
    // Parameters that no data can make valid: refused here too, so that validate finds them in
    // a norm no analysis uses (NormLayer::resolve says the same when the norm meets its data),
    // and before a file they name is read.
    if (!is_affine(d))
        for (const char* key : {"weight", "bias"})
            if (r.has(key))
                r.at(key).fail(std::string(key) + " given but affine is false" +
                                   (d.affine ? "" : " (" + type + "'s default)"),
                               {r.at(d.affine ? "affine" : "type").pointer});
    if (d.type == NormType::rmsnorm && r.has("bias")) r.at("bias").fail("rmsnorm has no bias (weight only)");
    if (const Json* w = r.raw("weight")) d.weight = parse_param(*w, r.at("weight"), base_dir, seed);
    if (const Json* b = r.raw("bias")) d.bias = parse_param(*b, r.at("bias"), base_dir, seed);
    d.eps_placement = r.choice("eps_placement", {"inside_sqrt", "add_to_std"}, "inside_sqrt") == "add_to_std"
                          ? EpsPlacement::add_to_std : EpsPlacement::inside_sqrt;
    d.variance = r.choice("variance", {"biased", "unbiased"}, "biased") == "unbiased"
                     ? VarianceEstimator::unbiased : VarianceEstimator::biased;
    d.affine_rounding = r.choice("affine_rounding", {"once", "twice"}, "once") == "twice"
                            ? AffineRounding::twice : AffineRounding::once;
    if (r.has("compute"))
        d.compute = compute_from_name(r.choice("compute", {"float", "double"}, "float"));

    const bool channel_norm = d.type == NormType::batchnorm || d.type == NormType::instancenorm ||
                              d.type == NormType::groupnorm;
    if (channel_norm) {
        d.channel_axis = r.integer("channel_axis");
    } else {
        d.normalized_shape = r.integers("normalized_shape");
        d.axes = r.integers("axes");
        if (d.normalized_shape && d.axes)
            loc.fail("give either normalized_shape or axes, not both",
                     {r.at("normalized_shape").pointer, r.at("axes").pointer});
        if (!d.normalized_shape && !d.axes)
            r.missing_one_of({"normalized_shape", "axes"}, "missing \"normalized_shape\" (trailing dims) or \"axes\" (any axes)");
        if (d.normalized_shape) {
            if (d.normalized_shape->empty()) r.at("normalized_shape").fail("normalized_shape must not be empty");
            for (std::size_t i = 0; i < d.normalized_shape->size(); ++i)
                if ((*d.normalized_shape)[i] <= 0)
                    r.at("normalized_shape").child(i).fail("dims must be positive, but got " + std::to_string((*d.normalized_shape)[i]));
        }
        parse_param_axes(r, d);
    }
    if (d.type == NormType::rmsnorm) {
        d.weight_offset = r.finite("weight_offset", 0.0);
    }
    if (d.type == NormType::groupnorm) {
        if (!r.has("num_groups")) r.missing("num_groups");
        d.num_groups = *r.integer("num_groups");
        if (d.num_groups <= 0) r.at("num_groups").fail("num_groups must be positive, but got " + std::to_string(d.num_groups));
        d.affine_per = r.choice("affine_per", {"channel", "group"}, "channel") == "group" ? AffinePer::group
                                                                                          : AffinePer::channel;
    }
    if (d.type == NormType::batchnorm) parse_replicas(r, d);
    if (d.type == NormType::batchnorm || d.type == NormType::instancenorm) {
        d.training = r.boolean("training");
        d.track_running_stats = r.boolean("track_running_stats");
        if (const Json* m = r.raw("momentum")) {
            if (m->is_null()) d.momentum_null = true;
            else {
                d.momentum = r.number("momentum");
                if (!(*d.momentum >= 0 && *d.momentum <= 1))
                    r.at("momentum").fail("momentum must be in [0, 1] or null, but got " + format_number(*d.momentum));
            }
        }
        if (const Json* v = r.raw("running_mean")) d.running_mean = parse_param(*v, r.at("running_mean"), base_dir, seed);
        if (const Json* v = r.raw("running_var")) d.running_var = parse_param(*v, r.at("running_var"), base_dir, seed);
    }
    r.finish();
    return d;
}

Config parse_config(const Json& j, const std::string& file, const std::filesystem::path& base_dir,
                    const AnalysisCatalog& catalog) {
    Config c;
    c.file = file;
    c.base_dir = base_dir;
    c.json = j;
    JsonLocation root{file, ""};
    ObjectReader r(j, root);
    r.declare({"name", "seed", "dtype", "data", "norms", "stacks", "analyses", "output"});
    r.finish();  // unknown keys first: "analysis" is reported as a misspelling of "analyses"
    c.name = r.string("name", "run");
    if (c.name.empty()) r.at("name").fail("name must not be empty");
    check_path_name(c.name, r.at("name"), "name (the default output folder is results/<name>)",
                    max_output_folder_name_bytes());
    long long seed = r.integer("seed", 0);
    if (seed < 0) r.at("seed").fail("seed must be >= 0, but got " + std::to_string(seed));
    c.seed = static_cast<std::uint64_t>(seed);
    if (auto dt = r.string("dtype")) {
        try {
            c.dtype = parse_dtype(*dt);
        } catch (const InputError& e) {
            r.at("dtype").fail(e.what());
        }
    }

    const Json& data = r.required("data");
    ObjectReader dr(data, r.at("data"));
    if (data.empty()) r.at("data").fail("no data defined (expected at least one entry)");
    for (auto it = data.begin(); it != data.end(); ++it) {
        dr.allow({it.key()});
        check_path_name(it.key(), r.at("data").child(it.key()), "data name");
        c.data_order.push_back(it.key());
        c.data[it.key()] = it.value();
        if (!it.value().is_object()) r.at("data").child(it.key()).fail("expected an object, but got " + json_type_name(it.value()));
    }

    // A config of stacks alone may have no norms (stacks of placement none).
    static const Json no_norms = Json::object();
    const Json& norms = j.contains("stacks") && !j.contains("norms") ? no_norms : r.required("norms");
    ObjectReader nr(norms, r.at("norms"));
    if (norms.empty() && !j.contains("stacks")) r.at("norms").fail("no norms defined (expected at least one entry)");
    for (auto it = norms.begin(); it != norms.end(); ++it) {
        nr.allow({it.key()});
        check_path_name(it.key(), r.at("norms").child(it.key()), "norm name");
        c.norm_order.push_back(it.key());
        const JsonLocation at = r.at("norms").child(it.key());
        c.norms[it.key()] = depends_on(at.child("type").pointer,
                                       [&] { return parse_norm(it.key(), it.value(), at, base_dir, c.seed); });
    }

    if (const Json* stacks = r.raw("stacks")) {
        ObjectReader sr(*stacks, r.at("stacks"));
        for (auto it = stacks->begin(); it != stacks->end(); ++it) {
            sr.allow({it.key()});
            check_path_name(it.key(), r.at("stacks").child(it.key()), "stack name");
            c.stack_order.push_back(it.key());
            c.stacks[it.key()] = parse_stack(it.key(), it.value(), r.at("stacks").child(it.key()), base_dir, c.norms,
                                             c.norm_order);
        }
    }

    const Json& analyses = r.required("analyses");
    if (!analyses.is_array()) r.at("analyses").fail("expected a list of analyses, but got " + json_type_name(analyses));
    if (analyses.empty()) r.at("analyses").fail("no analyses listed (expected at least one)");
    const std::vector<std::string>& type_names = catalog.names;
    for (std::size_t i = 0; i < analyses.size(); ++i) {
        JsonLocation loc = r.at("analyses").child(i);
        AnalysisSpec s;
        s.loc = loc;
        s.base_dir = base_dir;
        s.params = analyses[i];
        // As for norms: the type first, by a reader that knows every analysis' keys.
        ObjectReader probe(analyses[i], loc);
        probe.allow({"type", "data", "norms", "stacks"});
        for (const auto& t : type_names) probe.allow(catalog.keys(t));
        if (!probe.has("type")) probe.missing("type");
        s.type = probe.choice("type", type_names, "");
        // Every other key is read as the type says: an override of the type is named for what it breaks.
        depends_on(loc.child("type").pointer, [&] {
            ObjectReader ar(analyses[i], loc);
            const auto& st = catalog.stack_types;
            const bool of_stacks = std::find(st.begin(), st.end(), s.type) != st.end();
            std::vector<std::string> keys = catalog.keys(s.type);
            keys.insert(keys.begin(), {"type", "data", "norms"});  // norms: the analysis itself refuses it for stacks
            if (of_stacks) keys.push_back("stacks");
            ar.declare(keys);
            ar.finish();  // unknown keys first: "norm" is reported as a misspelling of "norms"
            auto names = [&](const char* key, const std::vector<std::string>& known, const char* section) {
                auto list = ar.strings(key);
                if (!list) ar.missing(key, std::string(" (a list of names under /") + section + ")");
                if (list->empty()) ar.at(key).fail("list is empty");
                for (std::size_t k = 0; k < list->size(); ++k) {
                    const std::string& n = (*list)[k];
                    if (std::find(known.begin(), known.end(), n) == known.end()) {
                        std::string hint = did_you_mean(n, known);
                        ar.at(key).child(k).fail("no " + std::string(section) + " entry named " + quoted_text(n) +
                                                 (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?") +
                                                 (known.empty() ? std::string(" (/") + section + " is empty)"
                                                                : std::string(" (/") + section + " has: " + join_words(known) + ")"));
                    }
                }
                return *list;
            };
            s.data = names("data", c.data_order, "data");
            if (of_stacks) s.stacks = names("stacks", c.stack_order, "stacks");
            else s.norms = names("norms", c.norm_order, "norms");
            catalog.validate(s);
            // A name listed twice would only repeat its rows (and write its saved arrays twice to
            // one place): refused at the second listing. Data that an analysis takes in order as
            // steps (apply's "sequential") may repeat: each listing is one more step.
            auto listed_once = [&](const char* key, const std::vector<std::string>& list, const std::string& what,
                                   const std::string& how) {
                for (std::size_t k = 1; k < list.size(); ++k) {
                    const auto first = std::find(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(k), list[k]);
                    if (first == list.begin() + static_cast<std::ptrdiff_t>(k)) continue;
                    const auto at = static_cast<std::size_t>(first - list.begin());
                    ar.at(key).child(k).fail(what + " " + quoted_text(list[k]) + " is listed twice (first at " +
                                             ar.at(key).child(at).pointer + "); a second listing would only repeat its rows" +
                                             (how.empty() ? "" : " (" + how + ")"));
                }
            };
            if (!catalog.repeats_data || !catalog.repeats_data(s))
                listed_once("data", s.data, "data entry", catalog.repeats_data_how ? catalog.repeats_data_how(s.type) : "");
            listed_once("norms", s.norms, "norm", "");
            listed_once("stacks", s.stacks, "stack", "");
        });
        c.analyses.push_back(std::move(s));
    }

    if (const Json* out = r.raw("output")) {
        ObjectReader orr(*out, r.at("output"));
        orr.declare({"dir"});
        c.output_dir = orr.string("dir");
        if (c.output_dir) {
            const std::string why = output_folder_problem(*c.output_dir);
            if (!why.empty()) orr.at("dir").fail("output folder " + quoted_text(*c.output_dir) + " " + why);
        }
        orr.finish();
    }
    r.finish();
    return c;
}

std::vector<ConfigNote> channel_axis_notes(const Config& c, const std::map<std::string, Batch>& batches) {
    // One note per norm and input shape, naming every data entry it meets in that shape: a
    // norm trained on several batches would otherwise repeat one note per batch.
    struct Met {
        std::string norm, shape;
        std::vector<std::string> data;
    };
    std::vector<Met> met;
    for (const auto& a : c.analyses)
        for (const auto& nn : a.norms)
            for (const auto& dn : a.data) {
                const auto nd = c.norms.find(nn);
                const auto b = batches.find(dn);
                const auto spec = c.data.find(dn);
                if (nd == c.norms.end() || b == batches.end() || spec == c.data.end()) continue;
                const NormDef& d = nd->second;
                const bool channels = d.type == NormType::batchnorm || d.type == NormType::instancenorm ||
                                      d.type == NormType::groupnorm;
                const bool last_by_default = d.convention == Convention::keras || d.convention == Convention::flax;
                const std::size_t rank = b->second.x.shape().size();
                if (!channels || !last_by_default || d.channel_axis || spec->second.contains("channel_axis") ||
                    rank < 3 || b->second.channel_axis != 1)
                    continue;
                const std::string shape = format_shape(b->second.x.shape());
                auto it = std::find_if(met.begin(), met.end(), [&](const Met& m) { return m.norm == nn && m.shape == shape; });
                if (it == met.end()) it = met.insert(met.end(), Met{nn, shape, {}});
                if (std::find(it->data.begin(), it->data.end(), dn) == it->data.end()) it->data.push_back(dn);
            }
    std::vector<ConfigNote> out;
    for (const auto& m : met) {
        const NormDef& d = c.norms.at(m.norm);
        std::vector<std::string> names, related;
        for (const auto& dn : m.data) {
            names.push_back(quoted_text(dn));
            related.push_back(JsonLocation{"", "/data"}.child(dn).pointer);
        }
        const JsonLocation norm = JsonLocation{c.file, "/norms"}.child(m.norm);
        out.push_back({norm.child("convention"),
                       norm_type_name(d.type) + " " + quoted_text(m.norm) + " on data " + join_words(names, " and ") +
                           ": channel axis 1 of input shape " + m.shape + ", normlab's default (channels first, " +
                           "as in PyTorch); Keras's and Flax's layers take the last axis by default. Give " +
                           "\"channel_axis\" to the norm or the data (-1 for channels last, 1 to keep this) to " +
                           "say which",
                       related});
    }
    return out;
}

std::vector<ConfigNote> config_notes(const Config& c, Compute default_arithmetic) {
    std::vector<ConfigNote> out;
    for (const auto& name : c.norm_order) {
        const NormDef& d = c.norms.at(name);
        const JsonLocation norm = JsonLocation{c.file, "/norms"}.child(name);
        if (d.compute && c.dtype != DType::float32)
            out.push_back({norm.child("compute"),
                           "\"compute\" chooses the arithmetic for float32 data only; this " + dtype_name(c.dtype) +
                               " run always takes double arithmetic",
                           {"/dtype"}});
        // A momentum pasted from the other family of conventions: PyTorch's counts the new
        // batch, Keras's, Flax's and ONNX's the old value, so 0.99 in one is 0.01 in the other.
        // Only where running statistics are kept and updated (training), where it acts.
        if (d.momentum && !d.momentum_null && keeps_running_stats(d) && d.training.value_or(true)) {
            const double mom = *d.momentum, m = *new_batch_weight(d);
            const bool torch = d.convention == Convention::torch;
            // 12 digits: 1 - 0.99 is 0.010000000000000009 in double.
            auto g12 = [](double v) { return format_significant(v, 12); };
            if (m == 1)  // a choice, not a value from the other family: said as what it does
                out.push_back({norm.child("momentum"),
                               "momentum " + g12(mom) + " under the " + convention_name(d.convention) +
                                   " convention replaces the running statistics with each new batch's (no average)",
                               {norm.child("convention").pointer}});
            else if (m > 0.5)
                out.push_back({norm.child("momentum"),
                               "momentum " + g12(mom) + " under the " + convention_name(d.convention) +
                                   " convention is the " + (torch ? "new batch's" : "old value's") +
                                   " weight: the running statistics take " + g12(m) + " of each new batch. " +
                                   (torch ? "Keras's, Flax's and ONNX's momentum " + g12(mom) + " is PyTorch's " + g12(1 - mom)
                                          : "PyTorch's momentum " + g12(mom) + " is " + g12(1 - mom) + " under \"" +
                                                convention_name(d.convention) + "\""),
                               {norm.child("convention").pointer}});
        }
        // A negative running variance given for inference: 1/sqrt(var + eps) is NaN there, as
        // in PyTorch, which accepts it too.
        if (d.running_var && keeps_running_stats(d) && !d.training.value_or(true)) {
            const ParamInit& v = *d.running_var;
            double lowest = 0;
            if (v.kind == ParamInit::Kind::constant) lowest = v.constant;
            if (v.kind == ParamInit::Kind::values && v.values.size() > 0) lowest = *std::min_element(v.values.begin(), v.values.end());
            if (lowest < 0)
                out.push_back({norm.child("running_var"),
                               "running_var holds a negative value (" + format_significant(lowest, 12) +
                                   "), which no variance is: in inference a channel whose running_var + eps is "
                                   "negative outputs NaN, as in PyTorch",
                               {}});
        }
        // NaN or inf given in a parameter or running statistic (a weight file with a NaN):
        // used as given, as PyTorch does. The data's get a warning; these a note, since a
        // config may give them on purpose.
        for (const auto& [key, p] : {std::pair<const char*, const std::optional<ParamInit>*>{"weight", &d.weight},
                                     {"bias", &d.bias}, {"running_mean", &d.running_mean},
                                     {"running_var", &d.running_var}}) {
            if (!*p) continue;
            const ParamInit& v = **p;
            std::size_t bad = 0, n = 0;
            if (v.kind == ParamInit::Kind::constant) n = 1, bad = !std::isfinite(v.constant);
            if (v.kind == ParamInit::Kind::values) {
                n = v.values.size();
                bad = static_cast<std::size_t>(
                    std::count_if(v.values.begin(), v.values.end(), [](double e) { return !std::isfinite(e); }));
            }
            if (bad)
                out.push_back({norm.child(key), std::string(key) + " holds " +
                                                    (n == 1 ? std::string("a NaN or infinite value")
                                                            : std::to_string(bad) + " NaN or infinite of its " +
                                                                  std::to_string(n) + " values") +
                                                    ", used as given, as PyTorch does: " +
                                                    (std::string(key) == "running_var"
                                                         ? "NaN makes the output NaN where it enters, and inf makes "
                                                           "x_hat 0 (rstd 0)"
                                                         : "the outputs it enters are NaN or infinite"),
                               {}});
        }
        if (d.affine_rounding != AffineRounding::twice) continue;
        const JsonLocation at = norm.child("affine_rounding");
        if (compute_dtype(c.dtype) == c.dtype)
            out.push_back({at,
                           "\"twice\" changes only float16 and bfloat16 outputs; in this " + dtype_name(c.dtype) +
                               " run x_hat is not rounded before the affine step",
                           {"/dtype"}});
        else if (!is_affine(d))
            out.push_back({at, "\"twice\" has no effect: the norm has no affine parameters (affine false)",
                           {norm.child("affine").pointer, norm.child("type").pointer}});
    }
    if (c.dtype == DType::float32 && default_arithmetic == Compute::float64 &&
        std::any_of(c.norms.begin(), c.norms.end(), [](const auto& n) { return !n.second.compute; }))
        out.push_back({JsonLocation{c.file, "/norms"},
            "norms without \"compute\" take the double path here (within 0.5 ulp of the float64 result, where "
            "the float path is within 3): this build on this CPU would run the float path's FMAs in software "
            "(libm's fmaf: a CPU below x86-64-v3, or a build without FMA instructions), many times slower; "
            "\"compute\": \"float\" gives the float path's results",
            {}});
    return out;
}

JsonLocation norm_key_location(const JsonLocation& norm, const std::string& key) {
    JsonLocation loc = norm;
    if (key.empty()) return loc;
    std::string k = key;
    for (std::size_t p; (p = k.find('/')) != std::string::npos; k = k.substr(p + 1)) loc = loc.child(k.substr(0, p));
    return loc.child(k);
}

JsonLocation norm_location(const JsonLocation& norm, const NormError& e) { return norm_key_location(norm, e.key()); }

NormType norm_type_option(const std::string& option, const std::string& name) {
    const auto& types = norm_type_names();
    const auto it = std::find(types.begin(), types.end(), name);
    if (it == types.end()) {
        const std::string hint = did_you_mean_note(name, types);
        throw InputError(option + ": unknown norm type " + quoted_text(name) +
                         (hint.empty() ? " (expected batchnorm, layernorm, instancenorm, groupnorm or rmsnorm)" : hint));
    }
    return static_cast<NormType>(it - types.begin());
}

void check_option_taken(const std::string& option, const std::string& key, const std::vector<NormType>& types,
                        const std::string& norms) {
    auto takes = [&](NormType t) {
        const auto names = key_names(norm_keys(t));
        return std::find(names.begin(), names.end(), key) != names.end();
    };
    if (std::any_of(types.begin(), types.end(), takes)) return;
    std::vector<std::string> takers;
    for (std::size_t t = 0; t < norm_type_names().size(); ++t)
        if (takes(static_cast<NormType>(t))) takers.push_back(norm_type_names()[t]);
    std::string list;
    for (std::size_t k = 0; k < takers.size(); ++k)
        list += (k == 0 ? "" : k + 1 == takers.size() ? " and " : ", ") + takers[k];
    throw InputError(option + ": only " + list + (takers.size() == 1 ? " takes" : " take") + " it, and --norm is " +
                     norms);
}

std::string option_list(const std::vector<long long>& v) {
    std::string s;
    for (long long d : v) s += (s.empty() ? "" : ",") + std::to_string(d);
    return s;
}

JsonLocation norm_location(const std::string& file, const NormError& e) {
    return norm_location(JsonLocation{file, "/norms"}.child(e.norm()), e);
}

std::vector<std::string> norm_kind_related(const std::string& name) {
    const JsonLocation entry = JsonLocation{"", "/norms"}.child(name);
    return {entry.child("type").pointer, entry.child("affine").pointer, entry.child("track_running_stats").pointer};
}

std::vector<std::string> data_related(const std::string& name) {
    if (name.empty()) return {};
    // The keys that decide the data's shape, channel axis and mask, not the entry: an override
    // of its mean or std does not make a norm's shape error its fault. One that replaces the
    // whole entry still counts (an ancestor of each key).
    return data_shape_pointers(JsonLocation{"", "/data"}.child(name));
}

}  // namespace normlab
