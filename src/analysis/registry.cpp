#include <algorithm>

#include "analysis/types.hpp"

namespace normlab {

const std::vector<AnalysisType>& analysis_types() {
    static const std::vector<AnalysisType> types = {
        stats_shapes_analysis(),
        apply_analysis(),
        precision_analysis(),
        port_check_analysis(),
        epsilon_analysis(), padding_analysis(), equivalence_analysis(), invariance_analysis(),
        batch_dependence_analysis(), train_eval_analysis(),
        gradients_analysis(), jacobian_analysis(),
        depth_analysis(),
    };
    return types;
}

const AnalysisType* find_analysis(const std::string& name) {
    for (const auto& t : analysis_types())
        if (t.name == name) return &t;
    return nullptr;
}

namespace {
// The analyses that take "stacks" (names under /stacks) instead of norms.
const std::vector<std::string> kStackTypes = {"depth"};
}  // namespace

AnalysisCatalog analysis_catalog() {
    AnalysisCatalog c;
    for (const auto& t : analysis_types()) c.names.push_back(t.name);
    c.keys = [](const std::string& type) { return key_names(find_analysis(type)->keys); };
    c.validate = [](const AnalysisSpec& s) { find_analysis(s.type)->validate(s); };
    c.stack_types = kStackTypes;
    c.repeats_data = [](const AnalysisSpec& s) {
        const AnalysisType& t = *find_analysis(s.type);
        return t.repeats_data && t.repeats_data(s);
    };
    c.repeats_data_how = [](const std::string& type) { return find_analysis(type)->repeats_data_how; };
    return c;
}

ObjectReader analysis_reader(const AnalysisSpec& spec) {
    ObjectReader r(spec.params, spec.loc);
    std::vector<std::string> keys = key_names(find_analysis(spec.type)->keys);
    keys.insert(keys.begin(), {"type", "data", "norms"});
    if (std::find(kStackTypes.begin(), kStackTypes.end(), spec.type) != kStackTypes.end()) keys.push_back("stacks");
    r.declare(keys);
    return r;
}

DataShape shape_of(const Batch& b) { return {b.x.shape(), b.channel_axis, b.has_mask()}; }

Resolution check_pair(const NormDef& def, DType dtype, const DataShape& d, const std::string& data_name) {
    const NormLayer layer(def, dtype);
    Resolution r = layer.resolve(d.shape, d.channel_axis, data_name);
    layer.require_mask(d.has_mask, data_name);
    return r;
}

void check_pairs(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    for (const auto& dn : spec.data)
        for (const auto& nn : spec.norms) check_pair(ctx.norm(nn), ctx.dtype, shape_of(ctx.batch(dn)), dn);
}

void check_analysis(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const AnalysisType& t = *find_analysis(spec.type);  // parse_config accepted only known types
    if (t.check) t.check(spec, ctx);
    else check_pairs(spec, ctx);
}

std::vector<ConfigNote> analysis_notes(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const AnalysisType& t = *find_analysis(spec.type);
    return t.notes ? t.notes(spec, ctx) : std::vector<ConfigNote>{};
}

}  // namespace normlab
