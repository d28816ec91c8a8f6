#include "run/shapes_command.hpp"

#include <algorithm>
#include <map>

#include "config/config.hpp"
#include "norm/presets.hpp"
#include "tensor/errors.hpp"

namespace normlab {

std::string shapes_answer(const ShapesOptions& o) {
    if (o.shape.empty()) throw InputError("shapes --shape: expected a list of positive dims, e.g. 32,3,64,64");
    Shape shape;
    for (long long d : o.shape) {
        if (d <= 0) throw InputError("shapes --shape: dims must be positive, but got " + std::to_string(d));
        shape.push_back(static_cast<std::size_t>(d));
    }
    // The counts below are products of these dims: a wrapped product would print as 0.
    if (!checked_num_elements(shape))
        throw InputError("shapes --shape " + option_list(o.shape) +
                         ": the shape has more elements than a 64-bit count holds (2^64 - 1)");
    NormDef d;
    d.name = o.norm;
    d.type = norm_type_option("shapes --norm", o.norm);
    d.normalized_shape = o.normalized_shape;
    d.axes = o.axes;
    d.param_axes = o.param_axes;
    d.num_groups = o.num_groups.value_or(0);
    d.channel_axis = o.channel_axis;
    const bool trailing = d.type == NormType::layernorm || d.type == NormType::rmsnorm;
    // An option that the norm does not take is an error, not ignored.
    const struct { bool set; const char *option, *key; } given[] = {
        {o.normalized_shape.has_value(), "shapes --normalized-shape", "normalized_shape"},
        {o.axes.has_value(), "shapes --axes", "axes"},
        {o.param_axes.has_value(), "shapes --param-axes", "param_axes"},
        {o.num_groups.has_value(), "shapes --num-groups", "num_groups"},
        {o.channel_axis.has_value(), "shapes --channel-axis", "channel_axis"}};
    for (const auto& g : given)
        if (g.set) check_option_taken(g.option, g.key, {d.type}, o.norm);
    if (o.normalized_shape && o.axes) throw InputError("shapes: give either --normalized-shape or --axes, not both");
    if (o.normalized_shape)
        for (long long n : *o.normalized_shape)
            if (n <= 0)
                throw InputError("shapes --normalized-shape " + option_list(*o.normalized_shape) +
                                 ": dims must be positive, but got " + std::to_string(n));
    if (trailing && !d.normalized_shape && !d.axes)
        throw InputError("shapes --norm " + o.norm + ": needs --normalized-shape or --axes");
    if (d.type == NormType::groupnorm && !o.num_groups)
        throw InputError("shapes --norm groupnorm: needs --num-groups");
    std::size_t ca = shape.size() > 1 ? 1 : 0;
    // Errors name the option that set the key at fault, as typed.
    std::map<std::string, std::string> options;
    if (o.normalized_shape) options["normalized_shape"] = "shapes --normalized-shape " + option_list(*o.normalized_shape);
    if (o.axes) options["axes"] = "shapes --axes " + option_list(*o.axes);
    if (o.param_axes) options["param_axes"] = "shapes --param-axes " + option_list(*o.param_axes);
    if (o.num_groups) options["num_groups"] = "shapes --num-groups " + std::to_string(*o.num_groups);
    if (o.channel_axis) options["channel_axis"] = "shapes --channel-axis " + std::to_string(*o.channel_axis);
    Resolution r = locate_option_errors("shapes --norm " + o.norm + " --shape " + option_list(o.shape), options, [&] {
        return NormLayer(d, DType::float32).resolve(shape, ca, "--shape " + compact_shape(shape));
    });

    std::vector<std::pair<std::string, std::string>> kv = {
        {"norm", o.norm},
        {"input_shape", compact_shape(r.input_shape)},
        // Which axis the channels were taken from: (B, T, D) input reads as 16 channels of 512
        // by default, which someone thinking of D as the channels does not expect. LayerNorm
        // and RMSNorm have none.
        {"channel_axis", trailing ? "" : std::to_string(r.channel_axis)},
        {"reduction_axes", compact_shape(Shape(r.reduction_axes.begin(), r.reduction_axes.end()))},
        {"stats_shape", compact_shape(r.stats_shape)},
        {"num_stats", std::to_string(r.num_stats)},
        {"elems_per_stat", std::to_string(r.elems_per_stat)},
        {"param_shape", r.num_params ? compact_shape(r.param_shape) : ""},
        {"param_axes", r.num_params ? compact_shape(Shape(r.param_axes.begin(), r.param_axes.end())) : ""},
        {"num_params", std::to_string(r.num_params)},
    };
    // An empty value is one the norm does not have (a channel axis, parameters): null in
    // JSON, "none" in text. Lists and counts are JSON as written; the norm's name is a string.
    std::string out;
    if (o.json) {
        out = "{";
        for (std::size_t i = 0; i < kv.size(); ++i) {
            const std::string& v = kv[i].second;
            const bool literal = !v.empty() && (v[0] == '[' || v.find_first_not_of("0123456789") == std::string::npos);
            out += (i ? ", \"" : "\"") + kv[i].first + "\": " + (v.empty() ? "null" : literal ? v : "\"" + v + "\"");
        }
        return out + "}\n";
    }
    for (const auto& [k, v] : kv) out += k + ": " + (v.empty() ? "none" : v) + "\n";
    return out;
}

}  // namespace normlab
