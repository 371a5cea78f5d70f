/*
 * kernel_tools.h - what the build-time tools that compile kernel variants
 * ahead of time share (pit-cuda-precompile: cubins with nvcc;
 * pit-hip-genco: AMD code objects with clang): the kernel sources written
 * to disk exactly as the plug-ins embed them, compiler processes run a few
 * at a time, and a C file that embeds the binaries with .incbin. Build
 * machines only (POSIX processes); never part of a plug-in.
 */
#ifndef PIT_KERNEL_TOOLS_H
#define PIT_KERNEL_TOOLS_H

#include <stdio.h>
#include <sys/types.h>

/* Writes into dir (which exists) every header under the name the sources
 * include it by (common/port.cuh), and every kernel's source as
 * "<entry>.cu" (pit_matmul.cu): the text NVRTC and hiprtc get. 0, or -1
 * with a message on stderr naming tool. */
int pit_tool_write_sources(const char *tool, const char *dir);

/* Starts argv (argv[0] searched in PATH) with its output into the file
 * log; the child's pid, or -1. */
pid_t pit_tool_spawn(const char *const *argv, const char *log);

/* Runs count jobs, at most jobs at a time: start(i, user) starts job i and
 * returns its pid (-1: it did not start, a failure); done(i, ok, user) is
 * told how each ended. Returns how many failed. */
typedef pid_t (*pit_tool_start_fn)(int i, void *user);
typedef void (*pit_tool_done_fn)(int i, int ok, void *user);
int pit_tool_run_jobs(int count, int jobs, pit_tool_start_fn start, pit_tool_done_fn done, void *user);

/* The whole text of the file path (malloc'd), NULL when it cannot be read. */
char *pit_tool_read_text(const char *path);

/* Copies the first max_lines lines of the file path to stderr. */
void pit_tool_print_log(const char *path, int max_lines);

/* Writes to f the file path embedded as the bytes <prefix><index>[] up to
 * <prefix><index>_end[] (read-only data, 64-byte aligned) and their
 * declarations. -1 (nothing written) when path holds a quote, a backslash
 * or a newline, which the assembler's string cannot carry. */
int pit_tool_embed_file(FILE *f, const char *prefix, int index, const char *path);

/* Writes s as a C string literal. */
void pit_tool_c_string(FILE *f, const char *s);

#endif /* PIT_KERNEL_TOOLS_H */
