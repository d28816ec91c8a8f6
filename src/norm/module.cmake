normlab_module(normlab_norm
  SOURCES norm/engine.cpp norm/backward.cpp norm/strided.cpp norm/presets.cpp norm/replicas.cpp
  DEPS normlab_tensor OpenMP::OpenMP_CXX)
# a*b+c must round twice in every clone of the kernels (engine.cpp, backward.cpp), FMA or not.
target_compile_options(normlab_norm PRIVATE -ffp-contract=off)
