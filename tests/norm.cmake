normlab_test(test_norm SOURCES test_norm.cpp test_norm_conventions.cpp test_norm_rows.cpp test_norm_planes.cpp test_norm_merge.cpp
             test_norm_param_axes.cpp test_norm_chunks.cpp test_norm_rows_double.cpp
             test_norm_rows_pipeline.cpp DEPS normlab_norm)
# The backward pass: PyTorch autograd goldens (tests/golden/grad_*, read at the engine
# level), finite differences, thread-count identity, and the Jacobian's singular values
# through xt::linalg::svd.
normlab_test(test_backward SOURCES test_backward.cpp DEPS normlab_norm normlab_data xtensor-blas nlohmann_json::nlohmann_json)
target_compile_definitions(test_backward PRIVATE NORMLAB_GOLDEN_DIR="${PROJECT_SOURCE_DIR}/tests/golden")
# One BLAS thread: reproducible timings and no oversubscription next to the engine's threads.
set_tests_properties(test_backward PROPERTIES ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
normlab_test(test_norm_precision SOURCES test_norm_precision.cpp DEPS normlab_norm normlab_analysis)
