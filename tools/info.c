/* tools/info.c - `pit info`: backends found, devices, the environment's choice. */
#include <stdlib.h>

#include "tool.h"

static void print_device(const pit_device_info *d)
{
    printf("    [%d] %s\n", d->device_index, d->name);
    printf("        vendor %s, arch %s, driver %s\n", d->vendor, d->arch, d->driver_version);
    printf("        memory %.1f GiB, %d compute units, f16 %s, bf16 %s\n",
           (double)d->global_mem_bytes / (1024.0 * 1024.0 * 1024.0), d->compute_units,
           d->has_f16 ? "yes" : d->has_f16_storage ? "yes (computed in f32)" : "no",
           d->has_bf16 ? "yes" : "no");
}

static void print_backend(const char *name)
{
    int n = 0;
    pit_status s = pit_device_count(name, &n);
    if (s != PIT_SUCCESS) {
        printf("  %-7s unavailable: %s\n", name, pit_last_error());
        return;
    }
    printf("  %-7s %d device(s)\n", name, n);
    for (int i = 0; i < n; i++) {
        pit_device_info d;
        if (pit_device_get_info(name, i, &d) == PIT_SUCCESS) {
            d.device_index = i;
            print_device(&d);
        }
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: pit info\n");
}

int pit_cmd_info(int argc, char **argv)
{
    static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const tool_command cmd = {"info", ":h", options, usage, tool_no_option};
    int rc = tool_parse_options(&cmd, argc, argv, NULL);
    if (rc >= 0)
        return rc;
    pit_tool_print_version();
    printf("backends:\n");
    for (int i = 0; i < 3; i++)
        print_backend(pit_tool_backends[i]);

    const char *env = getenv("PIT_BACKEND");
    printf("selection: %s\n", env && *env ? "PIT_BACKEND is set" :
                              "PIT_BACKEND unset: first backend with a device (cuda, hip, opencl)");
    fflush(stdout);
    if (env && *env)
        printf("  PIT_BACKEND=%s\n", env);
    pit_context *ctx = NULL;
    pit_status s = pit_context_create(NULL, -1, &ctx);
    if (s != PIT_SUCCESS)
        return pit_tool_fail("no context for the selected backend", s);
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    printf("selected: %s:%d  %s\n", d.backend, d.device_index, d.name);
    printf("tile database: %s\n", d.tiledb_source);
    pit_context_destroy(ctx);
    return 0;
}
