# Hostile inputs end to end, and the libFuzzer targets (-DNORMLAB_FUZZ=ON, clang).
normlab_cli_test(test_hostile SOURCES test_hostile.cpp DEPS normlab_report ZLIB::ZLIB)
if(NORMLAB_FUZZ)
  add_subdirectory(fuzz)
endif()
