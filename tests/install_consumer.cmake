# Installs the build into a prefix and checks what a user gets:
#  - no installed ELF file has an RPATH/RUNPATH entry other than $ORIGIN-relative
#    ones (nothing of the build or source tree, nothing absolute);
#  - libpit's soname and the package's version compatibility make the same
#    promise (CMakeLists.txt: libpit.so.0.MINOR with SameMinorVersion while
#    the major version is 0, libpit.so.MAJOR with SameMajorVersion from 1.0);
#  - pit.pc adds no rpath;
#  - the installed `pit` runs with no LD_LIBRARY_PATH;
#  - a tiny consumer builds with find_package(pit) and with pkg-config and
#    runs (with BACKEND set, it also opens a context there, the plug-in
#    found in the installed <libdir>/pit).
# Variables: SRC, BUILD, WORK, VERSION (the project's), BACKEND (or "none").
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed")
endif()
if(BACKEND STREQUAL "none")
  set(BACKEND "")
endif()

# ---- run paths -------------------------------------------------------------
file(GLOB_RECURSE installed LIST_DIRECTORIES false ${prefix}/*)
set(elf_count 0)
foreach(f IN LISTS installed)
  execute_process(COMMAND readelf -d ${f} OUTPUT_VARIABLE dyn ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT dyn MATCHES "Dynamic section")
    continue()
  endif()
  math(EXPR elf_count "${elf_count} + 1")
  string(REGEX MATCHALL "\\((RPATH|RUNPATH)\\)[^\n]*\\[[^]\n]*\\]" paths "${dyn}")
  foreach(entry IN LISTS paths)
    string(REGEX REPLACE ".*\\[(.*)\\]" "\\1" list "${entry}")
    string(REPLACE ":" ";" list "${list}")
    foreach(dir IN LISTS list)
      if(NOT dir MATCHES "^\\$ORIGIN" AND NOT dir STREQUAL "")
        message(FATAL_ERROR "${f} carries the run path '${dir}' (${entry}): "
                            "an installed file may only name folders relative to $ORIGIN")
      endif()
    endforeach()
  endforeach()
endforeach()
if(elf_count LESS 2)
  message(FATAL_ERROR "found ${elf_count} ELF files under ${prefix}: expected libpit and the tool at least")
endif()
message(STATUS "run paths of ${elf_count} installed ELF files: only $ORIGIN-relative")

# ---- soname and version compatibility --------------------------------------
file(GLOB libs ${prefix}/lib*/libpit.so ${prefix}/lib/*/libpit.so)
list(LENGTH libs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one installed libpit.so, found: ${libs}")
endif()
get_filename_component(libdir ${libs} DIRECTORY)
execute_process(COMMAND readelf -d ${libs} OUTPUT_VARIABLE dyn)
string(REGEX MATCH "Library soname: \\[([^]]*)\\]" _ "${dyn}")
set(soname ${CMAKE_MATCH_1})

# the soname the policy gives a version: libpit.so.0.MINOR for 0.x, libpit.so.MAJOR after
function(policy_soname version out)
  string(REPLACE "." ";" parts ${version})
  list(GET parts 0 major)
  list(GET parts 1 minor)
  if(major EQUAL 0)
    set(${out} libpit.so.0.${minor} PARENT_SCOPE)
  else()
    set(${out} libpit.so.${major} PARENT_SCOPE)
  endif()
endfunction()
policy_soname(${VERSION} want)
if(NOT soname STREQUAL want)
  message(FATAL_ERROR "libpit's soname is '${soname}'; version ${VERSION} must be '${want}'")
endif()

# find_package(pit V) must accept the installed version exactly when V is not
# newer and has the same soname: otherwise the package promises what the
# soname denies (or the reverse).
function(package_accepts version out)
  set(PACKAGE_FIND_VERSION ${version})
  string(REPLACE "." ";" parts ${version})
  list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
  list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)
  list(GET parts 2 PACKAGE_FIND_VERSION_PATCH)
  set(PACKAGE_FIND_VERSION_COUNT 3)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
  include(${libdir}/cmake/pit/pitConfigVersion.cmake)
  set(${out} ${PACKAGE_VERSION_COMPATIBLE} PARENT_SCOPE)
endfunction()
string(REPLACE "." ";" parts ${VERSION})
list(GET parts 0 major)
list(GET parts 1 minor)
set(probes ${major}.${minor}.0 ${major}.0.0)
if(minor GREATER 0)
  math(EXPR below "${minor} - 1")
  list(APPEND probes ${major}.${below}.0)
endif()
if(major GREATER 0)
  math(EXPR below "${major} - 1")
  list(APPEND probes ${below}.0.0)
endif()
math(EXPR above "${minor} + 1")
list(APPEND probes ${major}.${above}.0)
list(REMOVE_DUPLICATES probes)
foreach(probe IN LISTS probes)
  policy_soname(${probe} probe_soname)
  set(expect FALSE)
  if(probe_soname STREQUAL soname AND NOT probe VERSION_GREATER VERSION)
    set(expect TRUE)
  endif()
  package_accepts(${probe} got)
  if(NOT "${got}" STREQUAL "${expect}")
    message(FATAL_ERROR "find_package(pit ${probe}) against the installed ${VERSION} (${soname}): "
                        "compatible=${got}, but the soname says ${expect} (${probe} would be ${probe_soname})")
  endif()
endforeach()
message(STATUS "soname ${soname}; package compatibility agrees for ${probes}")

# ---- the installed tool runs on its own ---------------------------------------
file(GLOB tool ${prefix}/bin/pit)
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${tool} --version
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^pit ${VERSION}")
  message(FATAL_ERROR "the installed tool does not run without LD_LIBRARY_PATH (${rc}): ${out}${err}")
endif()

# ---- consumers ---------------------------------------------------------------
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC}/tests/consumer -B ${WORK}/consumer
                -DCMAKE_PREFIX_PATH=${prefix} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer configure (find_package(pit)) failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/consumer RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build failed")
endif()
execute_process(COMMAND ${WORK}/consumer/consumer ${BACKEND} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer run failed (${rc})")
endif()
# pkg-config: no rpath in the flags, so the run finds libpit through LD_LIBRARY_PATH
file(GLOB pcdirs ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "${pcdirs}")
execute_process(COMMAND pkg-config --cflags --libs pit OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --libs pit failed (PKG_CONFIG_PATH=${pcdirs})")
endif()
if(flags MATCHES "rpath")
  message(FATAL_ERROR "pit.pc adds a run path, which is the user's choice: ${flags}")
endif()
separate_arguments(flag_list UNIX_COMMAND "${flags}")
execute_process(COMMAND cc ${SRC}/tests/consumer/consumer.c ${flag_list} -o ${WORK}/consumer_pc
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cc with pkg-config flags (${flags}) failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${WORK}/consumer_pc ${BACKEND}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config consumer run failed (${rc})")
endif()
