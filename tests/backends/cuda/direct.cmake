# The direct tests of the CUDA plug-in, included by backends/cuda/CMakeLists.txt
# (so they exist only where the plug-in is built): they load libpit-cuda.so
# with dlopen and drive its pit_backend table without core. SKIPPED (77)
# without a driver. test_plugin.h, the host they share, serves HIP's too.
set(_pit_cuda_tests ${CMAKE_CURRENT_LIST_DIR})

# A test that loads the plug-in: its sources and the host's kernel cache.
function(_pit_cuda_plugin_test name)
  add_executable(${name} ${ARGN} ${_pit_root}/core/runtime/cache_file.c)
  target_include_directories(${name} PRIVATE ${_pit_root}/include ${_pit_root}/core)
  target_compile_definitions(${name} PRIVATE _POSIX_C_SOURCE=200809L PIT_CUDA_PLUGIN="$<TARGET_FILE:pit-cuda>")
  target_link_libraries(${name} PRIVATE ${CMAKE_DL_LIBS} m)
  add_dependencies(${name} pit-cuda)
endfunction()

# ---- the plug-in's table: matmul, detection, dtypes ------------------------
_pit_cuda_plugin_test(test_cuda_direct ${_pit_cuda_tests}/test_cuda_direct.c)

# ---- detection: both kernels against the host, and its bench ----------------
_pit_cuda_plugin_test(test_cuda_detect ${_pit_cuda_tests}/test_cuda_detect.c)

# ---- kernels on the CPU (CI, no GPU) ---------------------------------------------
# test_cuda_detect's cases on emu/emu_backend.c, which runs
# kernels/pit_detect_strip.cu on the host (emu/emu_warps.cpp: each thread a
# coroutine, warp steps and barriers as the GPU orders them). Needs a C++
# compiler (the kernel is CUDA C++); without one the test is not built.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  set(_emu ${_pit_cuda_tests}/emu)
  set(_emu_kernels)
  foreach(_v f32:0:4 f16:1:8 bf16:2:8 i32:3:4 u8:4:16) # name:PIT_DTYPE:VEC
    string(REPLACE ":" ";" _v ${_v})
    list(GET _v 0 _name)
    list(GET _v 1 _dt)
    list(GET _v 2 _vec)
    add_library(emu_strip_${_name} OBJECT ${_emu}/emu_strip.cpp)
    target_compile_definitions(emu_strip_${_name} PRIVATE PIT_DTYPE=${_dt} VEC=${_vec} EMU_ENTRY=emu_strip_${_name})
    target_include_directories(emu_strip_${_name} PRIVATE ${_emu} ${_pit_root}/backends/cuda)
    target_compile_options(emu_strip_${_name} PRIVATE -Wno-unknown-pragmas) # the kernel's #pragma unroll
    set_target_properties(emu_strip_${_name} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
    list(APPEND _emu_kernels $<TARGET_OBJECTS:emu_strip_${_name}>)
  endforeach()
  add_executable(test_detect_strip_emulated ${_pit_cuda_tests}/test_cuda_detect.c ${_emu}/emu_backend.c
    ${_emu}/emu_warps.cpp ${_emu_kernels} ${_pit_root}/core/runtime/cache_file.c)
  target_include_directories(test_detect_strip_emulated PRIVATE ${_emu} ${_pit_root}/include ${_pit_root}/core
    ${_pit_root}/backends/cuda)
  target_compile_definitions(test_detect_strip_emulated PRIVATE _POSIX_C_SOURCE=200809L PIT_DETECT_EMULATED)
  set_target_properties(test_detect_strip_emulated PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  target_link_libraries(test_detect_strip_emulated PRIVATE pit-cuda-kernels m)
  if(BUILD_TESTING)
    add_test(NAME cuda_detect_strip_emulated COMMAND test_detect_strip_emulated)
    set_tests_properties(cuda_detect_strip_emulated PROPERTIES TIMEOUT 600)
  endif()
  # the key-column tiles of attention (kernels/pit_attention_cols.cu: the
  # scan a mask dtype, the tiles) on the same emulator, against a host model
  set(_emu_cols)
  foreach(_v f32:0:SCAN f16:1:SCAN bf16:2:SCAN i32:3:SCAN u8:4:SCAN tiles:4:TILES) # name:MASK_DT:kernel
    string(REPLACE ":" ";" _v ${_v})
    list(GET _v 0 _name)
    list(GET _v 1 _dt)
    list(GET _v 2 _kernel)
    set(_entry emu_cols_scan_${_name})
    if(_kernel STREQUAL "TILES")
      set(_entry emu_cols_tiles)
    endif()
    add_library(${_entry} OBJECT ${_emu}/emu_attn_cols.cpp)
    target_compile_definitions(${_entry} PRIVATE PIT_DTYPE=0 MASK_DT=${_dt} PIT_KERNEL_OP_ATTN_COLS_${_kernel}
      EMU_ENTRY=${_entry})
    target_include_directories(${_entry} PRIVATE ${_emu} ${_pit_root}/backends/cuda)
    target_compile_options(${_entry} PRIVATE -Wno-unknown-pragmas)
    set_target_properties(${_entry} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
    list(APPEND _emu_cols $<TARGET_OBJECTS:${_entry}>)
  endforeach()
  add_executable(test_attn_cols_emulated ${_pit_cuda_tests}/test_attn_cols_emulated.c ${_emu}/emu_warps.cpp
    ${_emu_kernels} ${_emu_cols})
  target_include_directories(test_attn_cols_emulated PRIVATE ${_emu} ${_pit_root}/backends/cuda)
  set_target_properties(test_attn_cols_emulated PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  if(BUILD_TESTING)
    add_test(NAME cuda_attn_cols_emulated COMMAND test_attn_cols_emulated)
    set_tests_properties(cuda_attn_cols_emulated PROPERTIES TIMEOUT 600)
  endif()
else()
  message(STATUS "pit: no C++ compiler: test_detect_strip_emulated (the strip detection kernel on the CPU) not built")
endif()

# ---- the model operators ------------------------------------------------
_pit_cuda_plugin_test(test_cuda_ops ${_pit_cuda_tests}/test_cuda_ops.c
  ${_pit_cuda_tests}/test_cuda_ops_util.c ${_pit_cuda_tests}/test_cuda_ops_bench.c)
target_link_libraries(test_cuda_ops PRIVATE pit_reference)

if(BUILD_TESTING)
  add_test(NAME cuda_direct COMMAND test_cuda_direct)
  set_tests_properties(cuda_direct PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/pit-cache")
  add_test(NAME cuda_detect_direct COMMAND test_cuda_detect)
  set_tests_properties(cuda_detect_direct PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/pit-cache")
  add_test(NAME cuda_ops_direct COMMAND test_cuda_ops)
  set_tests_properties(cuda_ops_direct PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "PIT_CACHE_DIR=${CMAKE_BINARY_DIR}/pit-cache")
endif()

# ---- the CUDA libraries found at run time (no driver, no GPU: CI) ----------
# The plug-in links no CUDA library (readelf -d), and the loader finds NVRTC,
# cuBLAS and cuSPARSE, resolves every call, and names what is missing.
add_executable(test_cuda_libs ${_pit_cuda_tests}/test_cuda_libs.c)
target_link_libraries(test_cuda_libs PRIVATE pit-cuda-kernels)
set(_pit_no_cuda_libs ${CMAKE_CURRENT_BINARY_DIR}/no-cuda-libs)
file(MAKE_DIRECTORY ${_pit_no_cuda_libs})

if(BUILD_TESTING)
  add_test(NAME cuda_plugin_links_no_cuda_library
    COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:pit-cuda>
            -DBAD=libcuda,libcudart,libnvrtc,libcublas,libcublasLt,libcusparse
            -P ${_pit_root}/tests/check_needed.cmake)
  add_test(NAME cuda_libs_load COMMAND test_cuda_libs load)
  add_test(NAME cuda_libs_missing COMMAND test_cuda_libs missing ${_pit_no_cuda_libs})
  set_tests_properties(cuda_libs_missing PROPERTIES ENVIRONMENT "PIT_CUDA_LIB_DIRS=${_pit_no_cuda_libs}")
  add_test(NAME cuda_libs_dirs COMMAND test_cuda_libs dirs ${CUDAToolkit_LIBRARY_DIR})
  set_tests_properties(cuda_libs_dirs PROPERTIES
    ENVIRONMENT "PIT_CUDA_LIB_DIRS=${_pit_no_cuda_libs}:${CUDAToolkit_LIBRARY_DIR}")
  add_test(NAME cuda_libs_driver_limit COMMAND test_cuda_libs driver)
endif()

# ---- the built-in cubins (PIT_CUDA_PRECOMPILE; no driver, no GPU: CI) --------
# The plug-in's generated table is exactly the default variants, keyed as the
# run-time path keys them (or empty with the option off; which variants are
# the defaults needs core: not in a build of the plug-in alone); and the
# order of the sources of a kernel's binary, against a stub driver and host.
set(_pit_cuda_dir ${_pit_root}/backends/cuda)
add_executable(test_cuda_image_order ${_pit_cuda_tests}/test_cuda_image_order.c ${_pit_cuda_dir}/cuda_driver.c
  ${_pit_cuda_dir}/cuda_jit.c ${_pit_cuda_dir}/common/gpu_modules.c)
target_include_directories(test_cuda_image_order PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(test_cuda_image_order PRIVATE pit-cuda-kernels ${CMAKE_DL_LIBS} Threads::Threads)
if(TARGET pit-cuda-defaults)
  add_executable(test_cuda_prebuilt ${_pit_cuda_tests}/test_cuda_prebuilt.c)
  target_link_libraries(test_cuda_prebuilt PRIVATE pit-cuda-prebuilt pit-cuda-defaults)
endif()

if(BUILD_TESTING)
  if(PIT_CUDA_PRECOMPILE)
    add_test(NAME cuda_prebuilt_kernels COMMAND test_cuda_prebuilt ${_pit_root}/tiledb ${PIT_CUDA_PRECOMPILE_ARCHS})
  elseif(TARGET test_cuda_prebuilt)
    add_test(NAME cuda_prebuilt_kernels COMMAND test_cuda_prebuilt --none)
  endif()
  add_test(NAME cuda_kernel_image_order COMMAND test_cuda_image_order)
  set_tests_properties(cuda_kernel_image_order PROPERTIES SKIP_RETURN_CODE 77
    ENVIRONMENT "PIT_CUDA_LIB_DIRS=${CUDAToolkit_LIBRARY_DIR}")
  if(TARGET test_cuda_prebuilt)
    set_tests_properties(cuda_prebuilt_kernels PROPERTIES ENVIRONMENT "PIT_CUDA_LIB_DIRS=${CUDAToolkit_LIBRARY_DIR}")
  endif()
endif()
