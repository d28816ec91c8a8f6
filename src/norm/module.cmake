normlab_module(normlab_norm
  SOURCES norm/engine.cpp
  DEPS normlab_tensor)
