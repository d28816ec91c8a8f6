normlab_test(test_norm SOURCES test_norm.cpp DEPS normlab_norm)
