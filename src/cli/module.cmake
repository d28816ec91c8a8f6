normlab_module(normlab_run
  SOURCES cli/run_command.cpp cli/safety.cpp cli/merge.cpp cli/shapes_command.cpp cli/templates.cpp cli/bench.cpp
  DEPS normlab_config normlab_analysis normlab_data normlab_report OpenMP::OpenMP_CXX)
add_executable(normlab cli/main.cpp)
target_link_libraries(normlab PRIVATE normlab_run CLI11::CLI11 normlab_warnings)
set_target_properties(normlab PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
