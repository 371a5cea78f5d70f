# The direct test of the OpenCL plug-in, included by backends/opencl/CMakeLists.txt
# (so it exists only where the plug-in is built): the plug-in's table without
# core (see test_opencl_direct.c), linked with its objects rather than
# loaded: one file of cases per operator family and the helpers they share.
set(_pit_ocl_tests ${CMAKE_CURRENT_LIST_DIR})
add_executable(test_opencl_direct
  ${_pit_ocl_tests}/test_opencl_direct.c
  ${_pit_ocl_tests}/direct_support.c
  ${_pit_ocl_tests}/direct_matmul.c
  ${_pit_ocl_tests}/direct_masks.c
  ${CMAKE_SOURCE_DIR}/core/runtime/cache_file.c)
target_link_libraries(test_opencl_direct PRIVATE pit_opencl_objs pit_reference m)
if(BUILD_TESTING)
  add_test(NAME opencl_direct COMMAND test_opencl_direct)
  set_tests_properties(opencl_direct PROPERTIES
    ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache"
    TIMEOUT 900)
endif()

# Sparse attention whose dense L x L scores would pass the device's largest
# allocation, through the library (core composes, the plug-in runs it): PoCL's
# limit is lowered so L stays near 8,200 and the test short.
add_executable(test_opencl_attention_long ${_pit_ocl_tests}/test_opencl_attention_long.c)
target_include_directories(test_opencl_attention_long PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(test_opencl_attention_long PRIVATE pit pit_reference OpenCL::OpenCL m)
if(BUILD_TESTING)
  add_test(NAME opencl_attention_long COMMAND test_opencl_attention_long)
  set_tests_properties(opencl_attention_long PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/cache;POCL_MEMORY_LIMIT=1")
endif()

# pit_attention on a backend without attention_ex (the CUDA plug-in's state):
# the OpenCL table with that entry removed, installed in the "cuda" slot. The
# calls that reduce to attention_sparse run; every other option is refused,
# by name.
add_executable(test_opencl_no_attention_ex ${_pit_ocl_tests}/test_opencl_no_attention_ex.c)
target_include_directories(test_opencl_no_attention_ex PRIVATE ${CMAKE_SOURCE_DIR}/tests
  ${CMAKE_SOURCE_DIR}/core ${CMAKE_SOURCE_DIR}/core/runtime)
target_link_libraries(test_opencl_no_attention_ex PRIVATE pit pit_opencl_objs pit_reference m)
if(BUILD_TESTING)
  add_test(NAME opencl_no_attention_ex COMMAND test_opencl_no_attention_ex)
  set_tests_properties(opencl_no_attention_ex PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
