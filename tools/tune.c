/* tools/tune.c - `pit tune`: measures this device's tiles into its tile database. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tool.h"

static void show_progress(void *user, int done, int total, const char *what)
{
    (void)user;
    bench_progress(what, done, total);
}

int pit_cmd_tune(int argc, char **argv)
{
    pit_tune_options o = {.progress = show_progress};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            o.quick = 1;
        else if (!strcmp(argv[i], "--output") && i + 1 < argc)
            o.output_path = argv[++i];
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            o.repeats = atoi(argv[++i]);
        else {
            int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            fprintf(help ? stdout : stderr,
                    "usage: pit tune [--quick] [--repeats R] [--output FILE]\n"
                    "  measures every tile of the tile database on the selected device and writes\n"
                    "  the device's file ($PIT_CACHE_DIR/tiledb/<device>.tiledb unless --output)\n");
            return help ? 0 : 2;
        }
    }
    pit_context *ctx = NULL;
    pit_status s = pit_context_create(NULL, -1, &ctx);
    if (s != PIT_SUCCESS)
        return pit_tool_fail("no device to tune", s);
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    fprintf(stderr, "pit tune: %s:%d %s, starting from %s\n", d.backend, d.device_index, d.name,
            d.tiledb_source);
    char path[1024] = "";
    s = pit_tune(ctx, &o, path, sizeof path);
    /* Reported before pit_context_destroy, which clears pit_last_error(). */
    int rc = s != PIT_SUCCESS ? pit_tool_fail("tune", s) : 0;
    pit_context_destroy(ctx);
    if (rc)
        return rc;
    printf("tile database written: %s\n", path);
    return 0;
}
