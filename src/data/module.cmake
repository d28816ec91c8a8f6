normlab_module(normlab_data
  SOURCES data/batch.cpp
  DEPS normlab_tensor normlab_config_reader)
