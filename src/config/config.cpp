#include "config/config.hpp"

#include <algorithm>

#include <xtensor/xadapt.hpp>

#include "data/npy.hpp"
#include "data/random.hpp"
#include "data/sources.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

// "ones", "zeros", a number, a nested list, {"npy": path} or {"normal": {"mean", "std"}}.
ParamInit parse_param(const Json& j, const JsonLocation& loc, const std::filesystem::path& base_dir,
                      std::uint64_t seed) {
    ParamInit p;
    if (j.is_string()) {
        std::string s = j.get<std::string>();
        if (s == "ones") p.kind = ParamInit::Kind::ones;
        else if (s == "zeros") p.kind = ParamInit::Kind::zeros;
        else loc.fail("unknown initialiser \"" + s + "\" (expected \"ones\", \"zeros\", a number, a list, {\"npy\": path} or {\"normal\": {\"mean\": m, \"std\": s}})");
        return p;
    }
    if (j.is_number()) {
        p.kind = ParamInit::Kind::constant;
        p.constant = j.get<double>();
        return p;
    }
    if (j.is_array()) {
        p.kind = ParamInit::Kind::values;
        std::vector<double> v = read_numbers(j, loc);
        p.values = xt::adapt(v, Shape{v.size()});
        return p;
    }
    ObjectReader r(j, loc);
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
        // Drawn when the norm meets its data and the shape is known; the stream depends only
        // on the run seed and this parameter's JSON pointer, so every shape and every point
        // of a sweep with the same seed draws the same leading values.
        p.kind = ParamInit::Kind::generated;
        const double mean = nr.number("mean", 0.0), std = nr.number("std", 1.0);
        const std::uint64_t stream = derive_seed(seed, loc.pointer);
        p.generate = [mean, std, stream](const Shape& shape) {
            xt::xarray<double> a = xt::xarray<double>::from_shape(shape);
            Rng rng(stream);
            for (auto& v : a) v = rng.normal(mean, std);
            return a;
        };
        nr.finish();
    } else {
        loc.fail("expected \"ones\", \"zeros\", a number, a list, {\"npy\": path} or {\"normal\": {...}}");
    }
    r.finish();
    return p;
}

// Names become path components of the output (results/<name>, arrays/<data>/<norm>/), so
// each must be one plain file name: a name with '/', '\\', ".." or "." would write outside
// the folder the user pointed at, or somewhere unexpected inside it.
void check_path_name(const std::string& s, const JsonLocation& loc, const std::string& what) {
    std::string why;
    if (s.empty()) why = "must not be empty";
    else if (s == "." || s == "..") why = "must not be \".\" or \"..\"";
    else if (s.find_first_of("/\\") != std::string::npos) why = "must not contain '/' or '\\'";
    else
        for (char c : s)
            if (static_cast<unsigned char>(c) < 32) why = "must not contain control characters";
    if (!why.empty())
        loc.fail(what + " \"" + s + "\" " + why + ": it names a folder of the output, which must stay inside " +
                 "the folder the results go to");
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
                    json_type_name(*j) + " " + j->dump());
        }
    }
    d.sync = r.boolean("sync", false);
    if (d.sync && !d.has_replicas())
        r.at("sync").fail("\"sync\": true applies to \"replicas\", which is not given (without replicas the "
                          "whole batch is one replica)");
}

}  // namespace

NormDef parse_norm(const std::string& name, const Json& j, const JsonLocation& loc,
                   const std::filesystem::path& base_dir, std::uint64_t seed) {
    ObjectReader r(j, loc);
    NormDef d;
    d.name = name;
    const auto& types = norm_type_names();
    if (!r.has("type")) loc.fail("missing required key \"type\" (one of: batchnorm, layernorm, instancenorm, groupnorm, rmsnorm)");
    std::string type = r.choice("type", types, "");
    d.type = static_cast<NormType>(std::find(types.begin(), types.end(), type) - types.begin());
    std::string conv = r.choice("convention", convention_names(), "torch");
    d.convention = static_cast<Convention>(
        std::find(convention_names().begin(), convention_names().end(), conv) - convention_names().begin());
    d.eps = r.number("eps");
    if (d.eps && !(*d.eps >= 0)) r.at("eps").fail("eps must be >= 0, but got " + r.raw("eps")->dump());
    d.affine = r.boolean("affine");
    d.mask = r.boolean("mask", false);
    if (const Json* w = r.raw("weight")) d.weight = parse_param(*w, r.at("weight"), base_dir, seed);
    if (const Json* b = r.raw("bias")) d.bias = parse_param(*b, r.at("bias"), base_dir, seed);
    d.eps_placement = r.choice("eps_placement", {"inside_sqrt", "add_to_std"}, "inside_sqrt") == "add_to_std"
                          ? EpsPlacement::add_to_std : EpsPlacement::inside_sqrt;
    d.variance = r.choice("variance", {"biased", "unbiased"}, "biased") == "unbiased"
                     ? VarianceEstimator::unbiased : VarianceEstimator::biased;
    d.affine_rounding = r.choice("affine_rounding", {"once", "twice"}, "once") == "twice"
                            ? AffineRounding::twice : AffineRounding::once;

    const bool channel_norm = d.type == NormType::batchnorm || d.type == NormType::instancenorm ||
                              d.type == NormType::groupnorm;
    if (channel_norm) {
        d.channel_axis = r.integer("channel_axis");
    } else {
        d.normalized_shape = r.integers("normalized_shape");
        d.axes = r.integers("axes");
        if (d.normalized_shape && d.axes) loc.fail("give either normalized_shape or axes, not both");
        if (!d.normalized_shape && !d.axes) loc.fail("missing \"normalized_shape\" (trailing dims) or \"axes\" (any axes)");
        if (d.normalized_shape) {
            if (d.normalized_shape->empty()) r.at("normalized_shape").fail("normalized_shape must not be empty");
            for (std::size_t i = 0; i < d.normalized_shape->size(); ++i)
                if ((*d.normalized_shape)[i] <= 0)
                    r.at("normalized_shape").child(i).fail("dims must be positive, but got " + std::to_string((*d.normalized_shape)[i]));
        }
    }
    if (d.type == NormType::rmsnorm) {
        d.weight_offset = r.number("weight_offset", 0.0);
    }
    if (d.type == NormType::groupnorm) {
        if (!r.has("num_groups")) loc.fail("missing required key \"num_groups\"");
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
                    r.at("momentum").fail("momentum must be in [0, 1] or null, but got " + m->dump());
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
    c.name = r.string("name", "run");
    if (c.name.empty()) r.at("name").fail("name must not be empty");
    check_path_name(c.name, r.at("name"), "name (the default output folder is results/<name>)");
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

    // A required key that is missing because it is misspelled gets the did-you-mean of an
    // unknown key ("analysis" for "analyses"), not just "missing required key".
    auto required = [&](const std::string& key) -> const Json& {
        if (!j.contains(key))
            for (auto it = j.begin(); it != j.end(); ++it)
                if (did_you_mean(it.key(), {key}) == key)
                    r.at(it.key()).fail("unknown key \"" + it.key() + "\"; did you mean \"" + key + "\"?");
        return r.required(key);
    };
    const Json& data = required("data");
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
    const Json& norms = j.contains("stacks") && !j.contains("norms") ? no_norms : required("norms");
    ObjectReader nr(norms, r.at("norms"));
    if (norms.empty() && !j.contains("stacks")) r.at("norms").fail("no norms defined (expected at least one entry)");
    for (auto it = norms.begin(); it != norms.end(); ++it) {
        nr.allow({it.key()});
        check_path_name(it.key(), r.at("norms").child(it.key()), "norm name");
        c.norm_order.push_back(it.key());
        c.norms[it.key()] = parse_norm(it.key(), it.value(), r.at("norms").child(it.key()), base_dir, c.seed);
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

    const Json& analyses = required("analyses");
    if (!analyses.is_array()) r.at("analyses").fail("expected a list of analyses, but got " + json_type_name(analyses));
    if (analyses.empty()) r.at("analyses").fail("no analyses listed (expected at least one)");
    const std::vector<std::string>& type_names = catalog.names;
    for (std::size_t i = 0; i < analyses.size(); ++i) {
        JsonLocation loc = r.at("analyses").child(i);
        ObjectReader ar(analyses[i], loc);
        AnalysisSpec s;
        s.loc = loc;
        s.base_dir = base_dir;
        s.params = analyses[i];
        if (!ar.has("type")) loc.fail("missing required key \"type\"");
        s.type = ar.choice("type", type_names, "");
        auto names = [&](const char* key, const std::vector<std::string>& known, const char* section) {
            auto list = ar.strings(key);
            if (!list) loc.fail(std::string("missing required key \"") + key + "\" (a list of names under /" + section + ")");
            if (list->empty()) ar.at(key).fail("list is empty");
            for (std::size_t k = 0; k < list->size(); ++k) {
                const std::string& n = (*list)[k];
                if (std::find(known.begin(), known.end(), n) == known.end()) {
                    std::string hint = did_you_mean(n, known);
                    ar.at(key).child(k).fail("no " + std::string(section) + " entry named \"" + n + "\"" +
                                             (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"));
                }
            }
            return *list;
        };
        s.data = names("data", c.data_order, "data");
        const auto& st = catalog.stack_types;
        if (std::find(st.begin(), st.end(), s.type) != st.end()) s.stacks = names("stacks", c.stack_order, "stacks");
        else s.norms = names("norms", c.norm_order, "norms");
        catalog.validate(s);
        c.analyses.push_back(std::move(s));
    }

    if (const Json* out = r.raw("output")) {
        ObjectReader orr(*out, r.at("output"));
        c.output_dir = orr.string("dir");
        orr.finish();
    }
    r.finish();
    return c;
}

std::vector<std::string> config_notes(const Config& c) {
    std::vector<std::string> out;
    for (const auto& name : c.norm_order) {
        const NormDef& d = c.norms.at(name);
        if (d.affine_rounding != AffineRounding::twice) continue;
        const JsonLocation at = JsonLocation{c.file, "/norms"}.child(name).child("affine_rounding");
        if (compute_dtype(c.dtype) == c.dtype)
            out.push_back(at.message("\"twice\" changes only float16 and bfloat16 outputs; in this " +
                                     dtype_name(c.dtype) + " run x_hat is not rounded before the affine step"));
        else if (!d.affine.value_or(d.type != NormType::instancenorm))
            out.push_back(at.message("\"twice\" has no effect: the norm has no affine parameters (affine false)"));
    }
    return out;
}

JsonLocation norm_location(const JsonLocation& norm, const NormError& e) {
    return e.key().empty() ? norm : norm.child(e.key());
}

JsonLocation norm_location(const std::string& file, const NormError& e) {
    return norm_location(JsonLocation{file, "/norms"}.child(e.norm()), e);
}

}  // namespace normlab
