# End-to-end tests: they run the built binary the way users do.
function(normlab_cli_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS" ${ARGN})
  normlab_test(${name} SOURCES ${T_SOURCES} DEPS ${T_DEPS})
  add_dependencies(${name} normlab)
  target_compile_definitions(${name} PRIVATE
    NORMLAB_BINARY="$<TARGET_FILE:normlab>"
    NORMLAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endfunction()

normlab_cli_test(test_cli SOURCES test_cli.cpp DEPS normlab_data normlab_report normlab_norm)
include(cli_more.cmake OPTIONAL)
normlab_cli_test(test_messages SOURCES test_messages.cpp DEPS normlab_data)
normlab_cli_test(test_scripting SOURCES test_scripting.cpp DEPS normlab_config)
normlab_cli_test(test_real_data SOURCES test_real_data.cpp DEPS normlab_data)
normlab_cli_test(test_report_cli SOURCES test_report_cli.cpp DEPS nlohmann_json::nlohmann_json)
# run, validate and --dry-run agree on a table of bad configs; every sharding merges into
# the unsharded result; what run, merge and bench print and leave on disk.
normlab_cli_test(test_run_checks SOURCES test_run_checks.cpp)
normlab_cli_test(test_shards SOURCES test_shards.cpp)
normlab_cli_test(test_run_output SOURCES test_run_output.cpp DEPS normlab_report)
# scripts/normlab builds quietly (a stand-in cmake plays the build).
add_test(NAME setup_quiet COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/setup_quiet.sh)
