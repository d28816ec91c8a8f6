normlab_module(normlab_json
  SOURCES json/reader.cpp json/text.cpp json/foreign.cpp
  DEPS normlab_tensor nlohmann_json::nlohmann_json)
