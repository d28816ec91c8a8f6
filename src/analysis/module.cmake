normlab_module(normlab_analysis
  SOURCES analysis/registry.cpp analysis/common.cpp analysis/output_pool.cpp analysis/stats_shapes.cpp analysis/apply.cpp analysis/upstream.cpp
  analysis/precision.cpp analysis/port_check.cpp
  analysis/batch_ops.cpp analysis/epsilon.cpp analysis/padding.cpp analysis/equivalence.cpp
  analysis/invariance.cpp analysis/batch_dependence.cpp analysis/train_eval.cpp
  analysis/gradients.cpp analysis/jacobian.cpp analysis/stack_weights.cpp analysis/depth.cpp
  DEPS normlab_config normlab_norm normlab_stack normlab_data normlab_report xtensor-blas)
