normlab_module(normlab_analysis
  SOURCES analysis/registry.cpp analysis/common.cpp analysis/stats_shapes.cpp analysis/apply.cpp
  analysis/precision.cpp analysis/port_check.cpp
  DEPS normlab_norm normlab_report)
