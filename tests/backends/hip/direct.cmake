# The direct tests of the HIP plug-in, included by backends/hip/CMakeLists.txt
# (so they exist only where the plug-in is built). Both use the host of the
# CUDA plug-in's direct tests (tests/backends/cuda/test_plugin.h).
set(_pit_hip_tests ${CMAKE_CURRENT_LIST_DIR})
set(_hip_dir ${_pit_root}/backends/hip)
set(_pit_plugin_host ${_pit_root}/tests/backends/cuda)

# libpit-hip.so through its pit_backend table (SKIPPED without a GPU)
add_executable(test_hip_direct ${_pit_hip_tests}/test_hip_direct.c)
target_include_directories(test_hip_direct PRIVATE ${_pit_root}/include ${_pit_root}/core ${_pit_plugin_host})
target_compile_definitions(test_hip_direct PRIVATE
  _POSIX_C_SOURCE=200809L PIT_HIP_PLUGIN="$<TARGET_FILE:pit-hip>")
target_link_libraries(test_hip_direct PRIVATE ${CMAKE_DL_LIBS} m)
add_dependencies(test_hip_direct pit-hip)

# the rocSPARSE baseline's loader against the rocSPARSE installed (no GPU);
# hip_shim.c: the HIP meaning of cuda_baseline.h's names
add_executable(test_hip_sparse ${_pit_hip_tests}/test_hip_sparse.c
  ${_hip_dir}/hip_sparse.c ${_hip_dir}/hip_api.c ${_hip_dir}/hip_shim.c)
target_include_directories(test_hip_sparse PRIVATE ${_hip_dir} ${PIT_HIP_INCLUDE} ${_pit_plugin_host})
target_compile_definitions(test_hip_sparse PRIVATE __HIP_PLATFORM_AMD__=1)
target_link_libraries(test_hip_sparse PRIVATE pit-hip-variants ${CMAKE_DL_LIBS} Threads::Threads)

if(BUILD_TESTING)
  add_test(NAME hip_direct COMMAND test_hip_direct)
  set_tests_properties(hip_direct PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  add_test(NAME hip_rocsparse_loader COMMAND test_hip_sparse)
  set_tests_properties(hip_rocsparse_loader PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
