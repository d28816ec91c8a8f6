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

AnalysisCatalog analysis_catalog() {
    AnalysisCatalog c;
    for (const auto& t : analysis_types()) c.names.push_back(t.name);
    c.validate = [](const AnalysisSpec& s) { find_analysis(s.type)->validate(s); };
    c.stack_types = {"depth"};
    return c;
}

ObjectReader analysis_reader(const AnalysisSpec& spec) {
    ObjectReader r(spec.params, spec.loc);
    r.allow({"type", "data", "norms"});
    return r;
}

}  // namespace normlab
