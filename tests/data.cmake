normlab_test(test_data
  SOURCES test_data_random.cpp
  DEPS normlab_data)
