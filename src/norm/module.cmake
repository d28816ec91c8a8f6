normlab_module(normlab_norm
  SOURCES norm/engine.cpp norm/moments.cpp norm/moments_rows.cpp norm/moments_rows_double.cpp norm/normalize.cpp norm/normalize_stream.cpp norm/backward.cpp norm/strided.cpp norm/presets.cpp
          norm/replicas.cpp norm/channels_last.cpp norm/float_range.cpp
  DEPS normlab_tensor OpenMP::OpenMP_CXX)
# a*b+c must round twice in every kernel and every instruction-set version of it
# (moments.cpp, moments_rows.cpp, normalize.cpp, normalize_stream.cpp, backward.cpp,
# channels_last.cpp), FMA or not: GCC's _mm512_mul_pd and _mm512_add_pd are vector
# operators it would otherwise fuse;
# the float path's output asks for its FMAs by name (std::fma, normalize.hpp).
target_compile_options(normlab_norm PRIVATE -ffp-contract=off)
# sqrt may then be a vector instruction (errno is the only difference: sqrt of a negative
# would set it; the results are the same IEEE square roots).
target_compile_options(normlab_norm PRIVATE -fno-math-errno)
if(NOT NORMLAB_FMA_CLONES)
  target_compile_definitions(normlab_norm PRIVATE NORMLAB_NO_FMA_CLONES)
endif()
