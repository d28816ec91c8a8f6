// stats_shapes: which statistics each norm computes for each batch, without computing them.
#include "analysis/types.hpp"

namespace normlab {

namespace {

std::string axes_cell(const Axes& a) { return compact_shape(Shape(a.begin(), a.end())); }

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    Table t;
    t.columns = stats_shapes_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        for (const auto& nn : spec.norms) {
            NormLayer layer(ctx.norm(nn), ctx.dtype);
            Resolution r = layer.resolve(b.x.shape(), b.channel_axis, dn);
            // Per-replica statistics (unsynchronised BatchNorm replicas) gain a leading axis.
            Shape stats = r.stats_shape;
            if (!r.replicas.empty()) stats.insert(stats.begin(), r.replicas.size());
            t.add_row({dn, nn, norm_type_name(layer.def().type), compact_shape(r.input_shape),
                       axes_cell(r.reduction_axes), compact_shape(stats),
                       static_cast<long long>(num_elements(stats)), static_cast<long long>(r.elems_per_stat),
                       r.num_params ? compact_shape(r.param_shape) : std::string(),
                       r.num_params ? axes_cell(r.param_axes) : std::string(), static_cast<long long>(r.num_params),
                       r.eps});
        }
    }
    return t;
}

}  // namespace

AnalysisType stats_shapes_analysis() {
    AnalysisType a;
    a.name = "stats_shapes";
    a.summary = "statistics shape, count and parameter shape (and the axes it lies along) of each norm on each batch";
    a.columns = {"data", "norm", "type", "input_shape", "reduction_axes", "stats_shape",
                 "num_stats", "elems_per_stat", "param_shape", "param_axes", "num_params", "eps"};
    a.figure.title = "how many statistics each norm computes, and over how many elements each";
    a.figure.category = {"data", "norm"};
    a.figure.metrics = {{"num_stats", "statistics (count)"}, {"elems_per_stat", "elements per statistic"}};
    a.figure.log = true;
    a.keys = {};
    a.validate = [](const AnalysisSpec& s) { analysis_reader(s).finish(); };
    // It resolves shapes and normalises nothing: no statistics to count beyond the three
    // doubles per element every data entry is allowed.
    a.work_bytes = [](const AnalysisSpec&, const WorkInputs&) { return WorkBytes{}; };
    a.run = run;
    return a;
}

}  // namespace normlab
