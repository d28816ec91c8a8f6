# Residual stacks: PyTorch autograd goldens (tests/golden/stack, scripts/make_stack_golden.py).
normlab_test(test_stack SOURCES test_stack.cpp DEPS normlab_analysis normlab_stack nlohmann_json::nlohmann_json)
target_compile_definitions(test_stack PRIVATE NORMLAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# The stacks section and the depth analysis, through the built binary.
normlab_cli_test(test_depth SOURCES test_depth.cpp DEPS nlohmann_json::nlohmann_json normlab_norm normlab_data)
# The stack's products through xt::linalg::dot: values and the allocations they make.
normlab_test(test_stack_kernels SOURCES test_stack_kernels.cpp DEPS normlab_stack)
