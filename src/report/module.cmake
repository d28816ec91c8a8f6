normlab_module(normlab_report
  SOURCES report/table.cpp report/output.cpp report/output_paths.cpp report/figure.cpp report/figure_data.cpp report/html.cpp
          report/terminal.cpp report/result.cpp
  DEPS normlab_tensor normlab_json normlab_report_assets nlohmann_json::nlohmann_json)

# The Vega builds, from src/report/vega/node_modules (scripts/setup.sh runs `npm ci` there;
# NORMLAB_VEGA_DIR points elsewhere), become bytes in the binary. Nothing is downloaded here.
set(NORMLAB_VEGA_DIR "${CMAKE_CURRENT_SOURCE_DIR}/report/vega/node_modules" CACHE PATH
    "node_modules folder holding vega, vega-lite and vega-embed (npm ci in src/report/vega)")
set(normlab_vega_files
  "${NORMLAB_VEGA_DIR}/vega/build/vega.min.js"
  "${NORMLAB_VEGA_DIR}/vega-lite/build/vega-lite.min.js"
  "${NORMLAB_VEGA_DIR}/vega-embed/build/vega-embed.min.js")
foreach(f ${normlab_vega_files})
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "${f} is missing: report.html embeds the Vega builds pinned in "
      "src/report/vega/package-lock.json. Run scripts/setup.sh, or: npm ci --prefix ${CMAKE_CURRENT_SOURCE_DIR}/report/vega")
  endif()
endforeach()
set(normlab_assets_cpp "${CMAKE_CURRENT_BINARY_DIR}/generated/vega_assets.cpp")
add_custom_command(
  OUTPUT "${normlab_assets_cpp}"
  COMMAND "${CMAKE_COMMAND}" "-DVEGA_DIR=${NORMLAB_VEGA_DIR}" "-DOUT=${normlab_assets_cpp}"
          -P "${CMAKE_CURRENT_SOURCE_DIR}/report/embed_assets.cmake"
  DEPENDS ${normlab_vega_files} "${CMAKE_CURRENT_SOURCE_DIR}/report/embed_assets.cmake"
          "${CMAKE_CURRENT_SOURCE_DIR}/report/vega/package-lock.json"
  COMMENT "Embedding the Vega builds for report.html"
  VERBATIM)
add_library(normlab_report_assets STATIC "${normlab_assets_cpp}")
target_include_directories(normlab_report_assets PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
