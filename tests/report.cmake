# report.html, its figures and terminal tables (unit level; the browser check is below).
normlab_test(test_report SOURCES test_report.cpp DEPS normlab_analysis normlab_report)
# Rules every figure of report.html keeps, checked on every analysis' declared figure.
normlab_test(test_report_figures SOURCES test_report_figures.cpp DEPS normlab_analysis normlab_report)
# Every shipped config's report.html, a sweep's and a merged sweep's, in headless Chromium.
add_test(NAME browser_reports
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/browser/run.sh $<TARGET_FILE:normlab> ${PROJECT_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/browser)
set_tests_properties(browser_reports PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
