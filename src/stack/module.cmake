# Residual stacks: norm layers around xt::blas products (OpenBLAS via xtensor-blas).
find_package(xtensor-blas REQUIRED)
normlab_module(normlab_stack
  SOURCES stack/stack.cpp stack/kernels.cpp stack/model.cpp
  DEPS normlab_norm xtensor-blas)
