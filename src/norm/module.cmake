normlab_module(normlab_norm
  SOURCES norm/engine.cpp norm/strided.cpp norm/presets.cpp
  DEPS normlab_tensor normlab_config_reader normlab_data OpenMP::OpenMP_CXX)
