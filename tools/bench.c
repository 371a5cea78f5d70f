/* tools/bench.c - `pit bench` (placeholder until the bench suites land). */
#include "tool.h"

int pit_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "pit bench: not built yet\n");
    return 1;
}
