normlab_module(normlab_data
  SOURCES data/batch.cpp data/random.cpp data/half.cpp data/npy.cpp data/masks.cpp
          data/sources.cpp data/source_values.cpp data/source_gaussian.cpp data/source_npy.cpp
  DEPS normlab_tensor normlab_config_reader)
# The portable normal generator relies on every + - * / being rounded separately: a fused
# multiply-add (which GCC/Clang may form on FMA hardware, e.g. aarch64) would change the
# last bits and break "same seed, same bytes on every platform".
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/data/random.cpp
    PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
endif()
