# Conformance: golden cases from reference frameworks (tests/golden, written by
# scripts/make_golden.py) and the shared public bug-report cases (tests/cases), both run
# through the built binary.
normlab_cli_test(test_golden SOURCES test_golden.cpp DEPS normlab_data)
normlab_cli_test(test_cases SOURCES test_cases.cpp test_cases_conventions.cpp DEPS normlab_data normlab_config normlab_analysis)
# Whether the build carries the float kernels' FMA versions, for the test of the default arithmetic.
target_compile_definitions(test_cases PRIVATE NORMLAB_TEST_FMA_CLONES=$<BOOL:${NORMLAB_FMA_CLONES}>)
