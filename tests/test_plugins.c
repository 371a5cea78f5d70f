/*
 * tests/test_plugins.c - plug-ins that load but cannot be used, and the
 * message of a backend choice that skipped some (core/runtime/registry.c,
 * core/runtime/context.c). Each case runs in its own process because a
 * plug-in is loaded once per process:
 *   test_plugins table NULL_STUB SILENT_STUB OPENCL_PLUGIN
 *       a table of NULL entries under the name cuda is refused with
 *       PIT_ERR_BACKEND_INVALID naming the entries (no jump to address 0); an
 *       init that fails without a message under hip gets one from core.
 *   test_plugins auto NULL_STUB SILENT_STUB OPENCL_PLUGIN
 *       no cuda plug-in, the silent hip stub, the real OpenCL plug-in:
 *       pit_context_create(NULL, ...) picks OpenCL and pit_last_error() is
 *       empty, not the message of a backend it skipped.
 * OPENCL_PLUGIN may be "none" (not built). The plug-ins are copied into a
 * fresh folder named by PIT_PLUGIN_DIR, as tests/test_api.c does with junk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pit.h"

static int passed, failed, skipped;

static void expect(const char *what, int cond)
{
    if (cond) {
        passed++;
        return;
    }
    failed++;
    printf("FAIL %s (status message: \"%s\")\n", what, pit_last_error());
}

static int message_has(const char *text)
{
    return strstr(pit_last_error(), text) != NULL;
}

/* Copies src into dir under the plug-in name of backend; "none" copies nothing. */
static int install_plugin(const char *dir, const char *src, const char *backend)
{
    if (!strcmp(src, "none"))
        return 0;
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/libpit-%s.so'", src, dir, backend);
    return system(cmd);
}

static void test_unusable_tables(void)
{
    pit_context *ctx = (pit_context *)0x1;
    pit_status s = pit_context_create("cuda", 0, &ctx);
    expect("NULL entries: BACKEND_INVALID", s == PIT_ERR_BACKEND_INVALID);
    expect("NULL entries: no context", ctx == NULL);
    expect("NULL entries: names init", message_has("init"));
    expect("NULL entries: names device_count", message_has("device_count"));
    expect("NULL entries: names matmul_dense", message_has("matmul_dense"));
    expect("NULL entries: names the file", message_has("libpit-cuda.so"));
    int n = -1;
    s = pit_device_count("cuda", &n);
    expect("NULL entries: refused again, same reason",
           s == PIT_ERR_BACKEND_INVALID && message_has("device_count"));

    s = pit_context_create("hip", 0, &ctx);
    expect("silent init: its status", s == PIT_ERR_BACKEND);
    expect("silent init: a message", pit_last_error()[0] != '\0');
    expect("silent init: the message names the backend and init",
           message_has("hip") && message_has("init failed"));
    s = pit_device_count("hip", &n);
    expect("silent init: message replayed", s == PIT_ERR_BACKEND && message_has("init failed"));
}

static void test_auto_choice(int have_opencl)
{
    unsetenv("PIT_BACKEND");
    int opencl_devices = 0;
    int expect_opencl = have_opencl && pit_device_count("opencl", &opencl_devices) == PIT_SUCCESS &&
                        opencl_devices > 0;
    pit_context *ctx = NULL;
    pit_status s = pit_context_create(NULL, -1, &ctx);
    if (expect_opencl) {
        expect("auto: OpenCL chosen after skipping cuda and hip", s == PIT_SUCCESS && ctx);
        expect("auto: no message after success", pit_last_error()[0] == '\0');
        pit_device_info info;
        expect("auto: the context is on OpenCL",
               ctx && pit_context_get_info(ctx, &info) == PIT_SUCCESS &&
                   !strcmp(info.backend, "opencl"));
        pit_context_destroy(ctx);
        return;
    }
    expect("auto without a device: NO_DEVICE", s == PIT_ERR_NO_DEVICE);
    expect("auto without a device: every backend's reason",
           message_has("cuda: ") && message_has("hip: ") && message_has("init failed"));
    printf("skipped: no OpenCL device, so no successful choice to check\n");
    skipped++;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "table") && strcmp(argv[1], "auto"))) {
        fprintf(stderr, "usage: test_plugins table|auto NULL_STUB SILENT_STUB OPENCL_PLUGIN|none\n");
        return 2;
    }
    int table = !strcmp(argv[1], "table");
    char dir[] = "/tmp/pit-plugins-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    if ((table && install_plugin(dir, argv[2], "cuda")) || install_plugin(dir, argv[3], "hip") ||
        install_plugin(dir, argv[4], "opencl")) {
        fprintf(stderr, "could not copy the plug-ins into %s\n", dir);
        return 1;
    }
    setenv("PIT_PLUGIN_DIR", dir, 1);
    if (table)
        test_unusable_tables();
    else
        test_auto_choice(strcmp(argv[4], "none") != 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
