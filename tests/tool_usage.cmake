# Runs the pit tool with ARGS ('|' between arguments) and checks its exit code
# (RC) and that its output matches EXPECT. With
# NO_FILE, that file must not exist afterwards: a refused command writes nothing.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" args "${ARGS}")
if(NO_FILE)
  file(REMOVE "${NO_FILE}")
endif()
execute_process(COMMAND "${TOOL}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out
  TIMEOUT 120)
message("pit ${args}: exit ${rc}\n${out}")
if(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "exit ${rc}, expected ${RC}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'")
endif()
if(NO_FILE AND EXISTS "${NO_FILE}")
  message(FATAL_ERROR "${NO_FILE} was written")
endif()
