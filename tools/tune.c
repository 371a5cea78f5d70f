/* tools/tune.c - `pit tune` (placeholder until the tuner lands). */
#include "tool.h"

int pit_cmd_tune(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "pit tune: not built yet\n");
    return 1;
}
