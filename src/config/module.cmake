normlab_module(normlab_config
  SOURCES config/config.cpp config/stacks.cpp config/sweep.cpp config/overrides.cpp
  DEPS normlab_json normlab_norm normlab_stack normlab_data normlab_report)
