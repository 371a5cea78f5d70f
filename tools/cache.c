/* tools/cache.c - `pit cache show|clear`: the kernel disk cache (pit_cache_get_info, pit_cache_clear). */
#include <stdlib.h>

#include "tool.h"

static const char *const actions[] = {"show", "clear"};

static void usage(FILE *f)
{
    fprintf(f, "usage: pit cache show|clear\n"
               "  show    the kernel cache's folder, its entries and their bytes, and the cap\n"
               "  clear   removes every kernel entry of the folder (other files stay)\n"
               "  the folder is $PIT_CACHE_DIR (default ~/.cache/pit); PIT_CACHE_MAX_MB caps\n"
               "  its kernels (default 256, 0: no disk cache)\n");
}

static double megabytes(int64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

static int show(void)
{
    pit_cache_info info;
    pit_status s = pit_cache_get_info(&info);
    if (s != PIT_SUCCESS)
        return pit_tool_fail("cache show", s);
    if (info.folder)
        printf("folder:  %s\n", info.folder);
    else
        printf("folder:  none (PIT_CACHE_DIR and HOME are unset, or the folder cannot be made)\n");
    printf("entries: %lld\n", (long long)info.entries);
    printf("bytes:   %lld (%.1f MB)\n", (long long)info.bytes, megabytes(info.bytes));
    const char *env = getenv("PIT_CACHE_MAX_MB");
    if (info.max_bytes > 0 && env && *env) /* as set: a value pit ignored shows beside the default */
        printf("cap:     %.0f MB (PIT_CACHE_MAX_MB=%s)\n", megabytes(info.max_bytes), env);
    else if (info.max_bytes > 0)
        printf("cap:     %.0f MB (PIT_CACHE_MAX_MB unset: the default)\n", megabytes(info.max_bytes));
    else
        printf("cap:     0: off (PIT_CACHE_MAX_MB=0: every process compiles its kernels)\n");
    return 0;
}

static int clear(void)
{
    pit_cache_info before, after;
    pit_status s = pit_cache_get_info(&before);
    if (s == PIT_SUCCESS)
        s = pit_cache_clear();
    if (s == PIT_SUCCESS)
        s = pit_cache_get_info(&after);
    if (s != PIT_SUCCESS)
        return pit_tool_fail("cache clear", s);
    if (!before.folder) {
        printf("no kernel cache folder: nothing to clear\n");
        return 0;
    }
    /* another process may write meanwhile: what is gone, not what is left */
    printf("removed %lld entries (%lld bytes) from %s\n", (long long)(before.entries - after.entries),
           (long long)(before.bytes - after.bytes), before.folder);
    return 0;
}

int pit_cmd_cache(int argc, char **argv)
{
    static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const tool_command cmd = {"cache", ":h", options, usage, tool_no_option};
    /* The action comes first; getopt_long reads what follows it. */
    const char *action = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;
    int rc = action ? tool_parse_options(&cmd, argc - 1, argv + 1, NULL)
                    : tool_parse_options(&cmd, argc, argv, NULL);
    if (rc >= 0)
        return rc;
    if (!action)
        return tool_usage_error(&cmd, "needs an action: %s", "show or clear");
    switch (tool_find_name(action, actions, 2)) {
    case 0:
        return show();
    case 1:
        return clear();
    default:
        return tool_usage_error(&cmd, "unknown action '%s'", action);
    }
}
