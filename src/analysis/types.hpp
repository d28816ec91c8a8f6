#pragma once
// One factory per analysis file; registry.cpp lists them.
#include "analysis/analysis.hpp"

namespace normlab {

/// stats_shapes (stats_shapes.cpp): the shape and count of each norm's statistics on each
/// data entry, the elements behind each, and the parameters' shape.
AnalysisType stats_shapes_analysis();
/// apply (apply.cpp): each norm on each data entry: per-group output mean, std and rms
/// ranges, min and max; saves the tensors and gradients named in `save` as .npy files.
AnalysisType apply_analysis();
/// precision (precision.cpp): output error of naive/two-pass/Welford variance in working
/// precision and of the engine, against a high-precision reference, per dtype.
AnalysisType precision_analysis();
/// port_check (port_check.cpp): a reference norm against ports of it on the same data.
AnalysisType port_check_analysis();
/// epsilon, padding, equivalence, invariance, batch_dependence, train_eval (one .cpp each,
/// same names): the analyses of a norm's effects on a batch; results/README.md "Analyses" documents their columns.
AnalysisType epsilon_analysis();
AnalysisType padding_analysis();
AnalysisType equivalence_analysis();
AnalysisType invariance_analysis();
AnalysisType batch_dependence_analysis();
AnalysisType train_eval_analysis();
/// gradients, jacobian (one .cpp each, same names): the backward pass of a norm.
AnalysisType gradients_analysis();
AnalysisType jacobian_analysis();
/// depth (depth.cpp): residual stacks layer by layer at initialisation (results/README.md).
AnalysisType depth_analysis();

}  // namespace normlab
