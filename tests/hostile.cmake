# Hostile inputs end to end, and the libFuzzer targets (-DNORMLAB_FUZZ=ON, clang).
normlab_cli_test(test_hostile SOURCES test_hostile.cpp DEPS normlab_report ZLIB::ZLIB)
# The output folder: inputs it may not replace, names it cannot hold, stale staging folders.
normlab_cli_test(test_output_folder SOURCES test_output_folder.cpp DEPS normlab_report)
if(NORMLAB_FUZZ)
  add_subdirectory(fuzz)
endif()
