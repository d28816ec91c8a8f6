normlab_test(test_data
  SOURCES test_data_random.cpp test_data_npy.cpp test_data_sources.cpp test_data_loaders.cpp
          test_data_generators.cpp test_data_memory.cpp
  DEPS normlab_data)
