#pragma once
// One factory per analysis file; registry.cpp lists them.
#include "analysis/analysis.hpp"

namespace normlab {

AnalysisType stats_shapes_analysis();
AnalysisType apply_analysis();
/// precision (precision.cpp): output error of naive/two-pass/Welford variance in working
/// precision and of the engine, against a high-precision reference, per dtype.
AnalysisType precision_analysis();
/// port_check (port_check.cpp): a reference norm against ports of it on the same data.
AnalysisType port_check_analysis();

}  // namespace normlab
