# What frameworks embedding pit rely on (tests/test_frameworks.c), included
# from tests/CMakeLists.txt: the log callback and PIT_LOG's levels (one
# process per PIT_LOG value: it is read once per process), the allocator hook
# and pit_context_destroy with live objects. They need an OpenCL device (PoCL
# in CI) and report themselves skipped (exit 77) without.
if(NOT TARGET OpenCL::OpenCL)
  return()
endif()
add_executable(test_frameworks ${CMAKE_CURRENT_LIST_DIR}/test_frameworks.c)
target_link_libraries(test_frameworks PRIVATE pit pit_reference OpenCL::OpenCL ${CMAKE_DL_LIBS}
  Threads::Threads m)
target_compile_definitions(test_frameworks PRIVATE _GNU_SOURCE)
# Exported, the test's clCreateBuffer comes before the ICD loader's for the
# plug-in, which is how the test sees buffers made behind the allocator's back.
set_target_properties(test_frameworks PROPERTIES ENABLE_EXPORTS ON)
set(_pit_frameworks_dir ${CMAKE_BINARY_DIR}/frameworks-test)
file(MAKE_DIRECTORY ${_pit_frameworks_dir})
add_test(NAME api_frameworks_objects COMMAND test_frameworks objects)
set_tests_properties(api_frameworks_objects PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/cache;PIT_LOG=")
# The allocator on a CUDA device (a GPU machine; skipped without one).
add_test(NAME api_frameworks_allocator_cuda COMMAND test_frameworks allocator cuda)
set_tests_properties(api_frameworks_allocator_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/cache")
# "" stands for PIT_LOG unset (an empty value reads the same)
foreach(level unset off 1 debug info warn)
  set(_value ${level})
  if(level STREQUAL "unset")
    set(_value "")
  endif()
  add_test(NAME api_frameworks_log_${level} COMMAND test_frameworks log ${level} ${_pit_frameworks_dir})
  set_tests_properties(api_frameworks_log_${level} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/cache;PIT_LOG=${_value}")
endforeach()

# pit_report says what ran: the choice forms of core/pit/choice.h, the table
# of docs/api.md, every operator's path (tests/test_reports.c).
add_executable(test_reports ${CMAKE_CURRENT_LIST_DIR}/test_reports.c)
target_link_libraries(test_reports PRIVATE pit pit_reference m)
target_include_directories(test_reports PRIVATE ${PROJECT_SOURCE_DIR}/core/pit)
target_compile_definitions(test_reports PRIVATE _GNU_SOURCE)
add_test(NAME api_reports COMMAND test_reports ${PROJECT_SOURCE_DIR}/docs/api.md ${_pit_frameworks_dir})
set_tests_properties(api_reports PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/cache")
