/* tools/tool.h - what the pit tool's sub-commands share. */
#ifndef PIT_TOOL_H
#define PIT_TOOL_H

#include <stdio.h>

#include "pit.h"

/* Each sub-command: returns the process exit code (0 ok, 1 failure, 2 usage). */
int pit_cmd_info(int argc, char **argv);
int pit_cmd_conformance(int argc, char **argv);
int pit_cmd_bench(int argc, char **argv);
int pit_cmd_tune(int argc, char **argv);

/* Backends in the order the automatic choice tries them. */
extern const char *const pit_tool_backends[3];

/* Prints "what failed: STATUS: message" to stderr and returns 1. */
int pit_tool_fail(const char *what, pit_status s);

#endif
