normlab_module(normlab_report
  SOURCES report/table.cpp report/output.cpp
  DEPS normlab_tensor nlohmann_json::nlohmann_json)
