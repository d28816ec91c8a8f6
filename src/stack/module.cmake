# Residual stacks: norm layers around xt::linalg::dot products (OpenBLAS via xtensor-blas).
normlab_module(normlab_stack
  SOURCES stack/stack.cpp stack/kernels.cpp stack/model.cpp stack/backward.cpp
  DEPS normlab_norm xtensor-blas)
