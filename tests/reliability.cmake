# Reliability tests, included from tests/CMakeLists.txt. They need
# an OpenCL device (PoCL in CI) and report themselves skipped (exit 77) without.
foreach(t test_threads test_faults test_numerics)
  add_executable(${t} ${CMAKE_CURRENT_LIST_DIR}/${t}.c)
  target_link_libraries(${t} PRIVATE pit pit_reference m Threads::Threads)
  # test_faults reaches the testing hooks of core/runtime/pit_testing.h.
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/core/runtime)
  # test_threads can trip a race inside PoCL 3.1 itself: run_pocl_retry.sh
  # retries once on that one assertion only (see the script).
  add_test(NAME reliability_${t} COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/run_pocl_retry.sh $<TARGET_FILE:${t}>)
  set_tests_properties(reliability_${t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
    LABELS reliability ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/cache")
endforeach()

# The on-disk kernel cache: corrupted and truncated entries are detected and
# recompiled; two processes filling an empty cache at once do not corrupt it.
add_test(NAME reliability_kernel_cache
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_kernel_cache.sh $<TARGET_FILE:pit-tool>
          ${CMAKE_BINARY_DIR}/kernel-cache-test)
set_tests_properties(reliability_kernel_cache PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200
  LABELS reliability)

# The kernel cache from the API (tests/test_cache.c): a tampered entry is
# rebuilt, the size cap trims least recently used entries, pit_cache_clear and
# pit_cache_get_info see pit's entries only, PIT_CACHE_MAX_MB=0 stores nothing.
# cache_file.c is linked in to read and forge entries as a tamperer would.
add_executable(test_cache ${CMAKE_CURRENT_LIST_DIR}/test_cache.c
  ${PROJECT_SOURCE_DIR}/core/runtime/cache_file.c)
target_link_libraries(test_cache PRIVATE pit pit_reference m)
target_include_directories(test_cache PRIVATE ${PROJECT_SOURCE_DIR}/core/runtime)
target_compile_definitions(test_cache PRIVATE _GNU_SOURCE)
foreach(case tamper trim clear off)
  add_test(NAME reliability_cache_${case}
    COMMAND test_cache ${case} ${CMAKE_BINARY_DIR}/cache-test-${case})
  set_tests_properties(reliability_cache_${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    LABELS reliability)
endforeach()

if(PIT_FUZZ)
  add_subdirectory(${CMAKE_CURRENT_LIST_DIR}/fuzz ${CMAKE_BINARY_DIR}/tests/fuzz)
endif()
