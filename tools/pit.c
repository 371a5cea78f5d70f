/* tools/pit.c - the pit command: dispatches to the sub-commands. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

const char *const pit_tool_backends[3] = {"cuda", "hip", "opencl"};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pit <command> [options]\n"
            "commands:\n"
            "  info          backends, devices, and which one the environment selects\n"
            "  conformance   every operator on every device against the CPU reference\n"
            "  bench         the paper's micro-benchmarks against vendor baselines\n"
            "  tune          measure the dense tiles of this device into its tile database\n"
            "  cache         show or clear the kernel disk cache\n"
            "  version       the library's version (also --version)\n"
            "  help          this text; 'pit <command> --help' for a command's options\n"
            "environment: PIT_BACKEND=cuda|hip|opencl[:N], PIT_LOG=debug|info|warn, PIT_TILEDB,\n"
            "             PIT_CACHE_DIR, PIT_CACHE_MAX_MB, PIT_PLUGIN_DIR\n");
}

void pit_tool_print_version(void)
{
    int v = pit_version(); /* the library loaded, which may be newer than this tool's header */
    printf("pit %d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
}

int pit_tool_fail(const char *what, pit_status s)
{
    fprintf(stderr, "pit: %s: %s: %s\n", what, pit_status_string(s), pit_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        pit_tool_print_version();
        return 0;
    }
    if (!strcmp(cmd, "info"))
        return pit_cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "conformance"))
        return pit_cmd_conformance(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench"))
        return pit_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "tune"))
        return pit_cmd_tune(argc - 1, argv + 1);
    if (!strcmp(cmd, "cache"))
        return pit_cmd_cache(argc - 1, argv + 1);
    fprintf(stderr, "pit: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
