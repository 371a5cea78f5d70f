/* tools/tool.h - what the pit tool's sub-commands share. */
#ifndef PIT_TOOL_H
#define PIT_TOOL_H

#include <getopt.h>
#include <stdio.h>

#include "pit.h"

/* Each sub-command: returns the process exit code (0 ok, 1 failure, 2 usage). */
int pit_cmd_info(int argc, char **argv);
int pit_cmd_conformance(int argc, char **argv);
int pit_cmd_bench(int argc, char **argv);
int pit_cmd_tune(int argc, char **argv);
int pit_cmd_cache(int argc, char **argv);

/* Backends in the order the automatic choice tries them. */
extern const char *const pit_tool_backends[3];

/* Prints "pit MAJOR.MINOR.PATCH" of the library loaded. */
void pit_tool_print_version(void);

/* Prints "what failed: STATUS: message" to stderr and returns 1. */
int pit_tool_fail(const char *what, pit_status s);

/* A sub-command's options. `options` (getopt_long's table) maps --help to 'h';
 * `on_option` takes every other option and returns 0, or 2 after printing why
 * its value is refused (tool_usage_error). */
typedef struct tool_command {
    const char *name;
    const char *short_options; /* starts with ':' so a missing value is told apart */
    const struct option *options;
    void (*usage)(FILE *f);
    int (*on_option)(const struct tool_command *c, void *user, int id, const char *value);
} tool_command;

/* Parses argv[1..]: -1 when the command goes on, else its exit code (0 after
 * --help, 2 after a usage error, whose message names the option or value). */
int tool_parse_options(const tool_command *c, int argc, char **argv, void *user);
/* Prints "pit <command>: " fmt (one %s: what) and the usage to stderr; returns 2. */
int tool_usage_error(const tool_command *c, const char *fmt, const char *what);
/* Reads a whole decimal number in [min, max], nothing before or after it;
 * otherwise prints "pit <command>: <what> '<text>' is not ..." and returns -1. */
int tool_parse_number(const char *command, const char *what, const char *text,
                      unsigned long long min, unsigned long long max, unsigned long long *out);
/* tool_parse_number for an int option with 0 <= min <= max: 0, or 2 when refused. */
int tool_int_option(const tool_command *c, const char *option, const char *value, int min, int max,
                    int *out);
/* on_option of a command whose only option is --help. */
int tool_no_option(const tool_command *c, void *user, int id, const char *value);
/* The index of `name` in names[0..n), or -1. */
int tool_find_name(const char *name, const char *const *names, int n);

#endif
