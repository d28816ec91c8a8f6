add_executable(normlab cli/main.cpp)
target_link_libraries(normlab PRIVATE normlab_run CLI11::CLI11 normlab_warnings)
set_target_properties(normlab PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
