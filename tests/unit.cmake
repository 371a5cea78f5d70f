# Unit tests of the backend-independent brain: PIT rules, the tile database
# and the selection (core/pit/rules.c, core/tiledb/tiledb.c, core/pit/select.c). Included
# from tests/CMakeLists.txt; they need no device.
foreach(t test_rules test_tiledb test_select)
  add_executable(${t} ${CMAKE_CURRENT_LIST_DIR}/${t}.c)
  target_link_libraries(${t} PRIVATE pit_core_static m pthread)
  # The shipped databases, checked line by line by test_tiledb and used by test_select.
  target_compile_definitions(${t} PRIVATE PIT_TEST_TILEDB_DIR="${PROJECT_SOURCE_DIR}/tiledb")
  add_test(NAME unit_${t} COMMAND ${t})
  set_tests_properties(unit_${t} PROPERTIES LABELS unit TIMEOUT 120)
endforeach()

# The tile database read and written under a comma-decimal locale; skipped
# (exit 77) where none is installed and localedef cannot make one.
add_test(NAME unit_test_tiledb_locale COMMAND test_tiledb locale)
set_tests_properties(unit_test_tiledb_locale PROPERTIES LABELS unit TIMEOUT 120
  SKIP_RETURN_CODE 77)

# The float dtypes core lets a device's operators take (has_f16_storage,
# has_bf16), with a one-entry table standing in for a plug-in.
add_executable(test_device_dtypes ${CMAKE_CURRENT_LIST_DIR}/test_device_dtypes.c)
target_link_libraries(test_device_dtypes PRIVATE pit_core_static m pthread)
add_test(NAME unit_test_device_dtypes COMMAND test_device_dtypes)
set_tests_properties(unit_test_device_dtypes PROPERTIES LABELS unit TIMEOUT 60)

# How core hands a DLPack import of host memory (kDLCPU) to a plug-in, or
# refuses it naming the backend, with stand-in tables.
add_executable(test_host_memory ${CMAKE_CURRENT_LIST_DIR}/test_host_memory.c)
target_link_libraries(test_host_memory PRIVATE pit_core_static m pthread)
target_include_directories(test_host_memory PRIVATE ${PIT_DLPACK_INCLUDE})
add_test(NAME unit_test_host_memory COMMAND test_host_memory)
set_tests_properties(unit_test_host_memory PROPERTIES LABELS unit TIMEOUT 60)
