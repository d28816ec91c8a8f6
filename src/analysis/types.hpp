#pragma once
// One factory per analysis file; registry.cpp lists them.
#include "analysis/analysis.hpp"

namespace normlab {

AnalysisType stats_shapes_analysis();
AnalysisType apply_analysis();

}  // namespace normlab
