# tests/sanitize.cmake - sanitizer and fuzzing instrumentation for every target.
#
# Included right after project() through CMAKE_PROJECT_INCLUDE, so the
# top-level CMakeLists.txt needs no change:
#   cmake -S . -B build-asan -DCMAKE_PROJECT_INCLUDE=$PWD/tests/sanitize.cmake -DPIT_SANITIZE=ON
#   CC=clang cmake -S . -B build-fuzz -DCMAKE_PROJECT_INCLUDE=$PWD/tests/sanitize.cmake -DPIT_FUZZ=ON
# tests/sanitize.sh and tests/fuzz/run.sh do exactly that.
option(PIT_SANITIZE "Build libpit, the plug-ins, the tool and the tests with ASan + UBSan" OFF)
option(PIT_FUZZ "PIT_SANITIZE plus libFuzzer coverage; builds tests/fuzz (needs clang)" OFF)

if(PIT_SANITIZE OR PIT_FUZZ)
  # UBSan findings abort (non-zero exit) instead of printing and going on.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
  message(STATUS "pit: ASan + UBSan on every target")
endif()
if(PIT_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PIT_FUZZ needs clang (libFuzzer): CC=clang cmake ...")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
