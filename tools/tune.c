/* tools/tune.c - `pit tune`: measures this device's tiles into its tile database. */
#include "bench.h"
#include "tool.h"

static void show_progress(void *user, int done, int total, const char *what)
{
    (void)user;
    bench_progress(what, done, total);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: pit tune [--quick] [--repeats R] [--output FILE]\n"
               "  measures every tile of the tile database on the selected device and writes\n"
               "  the device's file ($PIT_CACHE_DIR/tiledb/<device>.tiledb unless --output)\n");
}

static int on_option(const tool_command *c, void *user, int id, const char *value)
{
    pit_tune_options *o = user;
    switch (id) {
    case 'q':
        o->quick = 1;
        return 0;
    case 'o':
        o->output_path = value;
        return 0;
    default: /* 'r' */
        return tool_int_option(c, "--repeats", value, 1, 100000, &o->repeats);
    }
}

int pit_cmd_tune(int argc, char **argv)
{
    static const struct option options[] = {
        {"quick", no_argument, NULL, 'q'},       {"repeats", required_argument, NULL, 'r'},
        {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const tool_command cmd = {"tune", ":h", options, usage, on_option};
    pit_tune_options o = {.progress = show_progress};
    int rc = tool_parse_options(&cmd, argc, argv, &o);
    if (rc >= 0)
        return rc;
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
    rc = s != PIT_SUCCESS ? pit_tool_fail("tune", s) : 0;
    pit_context_destroy(ctx);
    if (rc)
        return rc;
    printf("tile database written: %s\n", path);
    return 0;
}
