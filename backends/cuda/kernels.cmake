# What the two GPU plug-ins (backends/cuda, backends/hip) build from the same
# files, found by globbing so that an operator's new files need no CMake edit.
#
# pit_embed_kernel_sources(<out_var> <comment>): embeds the kernel sources of
# backends/cuda/kernels/ as C arrays (embed.cmake) into the calling directory's
# build folder and sets <out_var> to the generated .c file. Both GPU plug-ins
# compile these same sources (CUDA with NVRTC, HIP with hiprtc), so both call
# this. Every file under kernels/ is embedded but the registry (kernels.def,
# host only).
set(_pit_kernels_cmake_dir ${CMAKE_CURRENT_LIST_DIR})

# PIT_GPU_HOST_SOURCES: the host C written once for both plug-ins: one file per
# operator family (ops/) and the backend table and kernel loading (common/).
file(GLOB PIT_GPU_HOST_SOURCES CONFIGURE_DEPENDS
  ${_pit_kernels_cmake_dir}/ops/*.c ${_pit_kernels_cmake_dir}/common/*.c)

function(pit_embed_kernel_sources out_var comment)
  set(_dir ${_pit_kernels_cmake_dir})
  file(GLOB _kernels CONFIGURE_DEPENDS
    ${_dir}/kernels/*.cu ${_dir}/kernels/*.cuh ${_dir}/kernels/*.h ${_dir}/kernels/common/*.cuh)
  set(_gen_c ${CMAKE_CURRENT_BINARY_DIR}/pit_cuda_sources.c)
  set(_gen_h ${CMAKE_CURRENT_BINARY_DIR}/pit_cuda_sources.h)
  string(REPLACE ";" "|" _kernels_arg "${_kernels}")
  add_custom_command(
    OUTPUT ${_gen_c} ${_gen_h}
    COMMAND ${CMAKE_COMMAND} -DOUT_C=${_gen_c} -DOUT_H=${_gen_h} "-DSOURCES=${_kernels_arg}"
            -P ${_dir}/embed.cmake
    DEPENDS ${_kernels} ${_dir}/embed.cmake
    VERBATIM
    COMMENT "${comment}")
  set(${out_var} ${_gen_c} PARENT_SCOPE)
endfunction()
