normlab_module(normlab_config
  SOURCES config/config.cpp config/sweep.cpp
  DEPS normlab_json normlab_norm normlab_data)
