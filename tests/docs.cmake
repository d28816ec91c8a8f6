# The user docs: every relative link resolves and README.md stays under 300 lines
# (scripts/check_docs.sh, offline). The second test shows the check can fail: it must find
# exactly the two broken links of a fixture page.
add_test(NAME docs_links COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_docs.sh)
add_test(NAME docs_links_catch_broken
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_docs.sh ${CMAKE_CURRENT_SOURCE_DIR}/data/docs/broken_links.md)
set_tests_properties(docs_links_catch_broken PROPERTIES
  PASS_REGULAR_EXPRESSION "no_such_file.md: .* does not exist.*no heading with anchor #no-such-heading.*check_docs: 2 problems in 1 file")
# The docs against the program: README's synopsis vs --help, normlab list vs the readers,
# and every figure the docs quote vs a run of the shipped config it comes from.
normlab_cli_test(test_docs SOURCES test_docs.cpp DEPS normlab_data)
