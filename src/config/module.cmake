normlab_module(normlab_config
  SOURCES config/config.cpp config/sweep.cpp
  DEPS normlab_config_reader normlab_norm normlab_data normlab_analysis)
