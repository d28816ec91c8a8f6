normlab_module(normlab_data
  SOURCES data/batch.cpp data/random.cpp data/half.cpp data/files.cpp data/npy.cpp data/masks.cpp
          data/csv.cpp data/text.cpp data/image_decode.cpp data/sequences.cpp
          data/sources.cpp data/source_values.cpp data/source_gaussian.cpp data/source_npy.cpp
          data/source_images.cpp data/source_tokens.cpp data/source_text.cpp data/source_csv.cpp
          data/source_image_files.cpp data/estimate.cpp data/system_memory.cpp
  DEPS normlab_tensor normlab_json)
target_link_libraries(normlab_data PRIVATE ZLIB::ZLIB)
# Generated data must be the same bytes on every platform: the portable RNG and the image
# filter rely on every + - * / being rounded separately, and a fused multiply-add (which
# GCC/Clang may form on FMA hardware, e.g. aarch64) would change the last bits.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(normlab_data PRIVATE -ffp-contract=off)
endif()
