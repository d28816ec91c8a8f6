# Sanitizer and fuzzing builds. Both instrument every target, so each needs its
# own build folder: scripts/sanitize.sh and scripts/fuzz.sh set them up.
option(NORMLAB_SANITIZE "Build everything with AddressSanitizer + UndefinedBehaviorSanitizer" OFF)
option(NORMLAB_FUZZ "Also build the libFuzzer targets of tests/fuzz (clang only; implies NORMLAB_SANITIZE)" OFF)
if(NORMLAB_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "NORMLAB_FUZZ needs clang's libFuzzer: configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # Coverage instrumentation for libFuzzer everywhere; only the fuzz targets link its main.
  add_compile_options(-fsanitize=fuzzer-no-link)
  set(NORMLAB_SANITIZE ON)
endif()
if(NORMLAB_SANITIZE)
  # float-cast-overflow (a double out of an integer type's range converted to it) is not in
  # GCC's "undefined" group; clang's has it.
  add_compile_options(-fsanitize=address,undefined,float-cast-overflow
                      -fno-sanitize-recover=undefined,float-cast-overflow -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # Without UBSan's null and alignment checks under GCC 12: they took 45% of this build's
    # compile time (a check at every reference and member call xtensor's templates make;
    # tests/test_norm.cpp at -O1 in 55 s with them, 30 s without), which CI's 30 minutes
    # cannot afford. A null pointer read is still caught (ASan reports the SEGV); x86 loads
    # tolerate misalignment, the SIMD kernels load unaligned, and their streaming stores,
    # which do need alignment, fault on a bad address in any build.
    add_compile_options(-fno-sanitize=null,alignment)
  endif()
  add_link_options(-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow)
endif()
