/* A program that uses the installed pit: the version, a status name, the
 * error path of an unknown backend, and, given a backend name, a context on
 * its first device (the plug-in found where the installed libpit is). */
#include <pit.h>
#include <stdio.h>
#include <string.h>

static int open_backend(const char *backend)
{
    pit_context *ctx = NULL;
    pit_status s = pit_context_create(backend, 0, &ctx);
    if (s != PIT_SUCCESS) {
        fprintf(stderr, "consumer: pit_context_create(%s): %s: %s\n", backend, pit_status_string(s),
                pit_last_error());
        return 0;
    }
    pit_device_info info;
    int ok = pit_context_get_info(ctx, &info) == PIT_SUCCESS;
    if (ok) printf("consumer: context on %s \"%s\"\n", info.backend, info.name);
    return pit_context_destroy(ctx) == PIT_SUCCESS && ok;
}

int main(int argc, char **argv)
{
    if (pit_version() != PIT_VERSION)
        return 1;
    if (strcmp(pit_status_string(PIT_ERR_SHAPE_MISMATCH), "PIT_ERR_SHAPE_MISMATCH") != 0)
        return 1;
    pit_context *ctx = NULL;
    pit_status s = pit_context_create("no-such-backend", 0, &ctx);
    if (s != PIT_ERR_BACKEND_NOT_FOUND || ctx != NULL)
        return 1;
    printf("consumer: pit %d linked, error path ok: %s\n", pit_version(), pit_last_error());
    return argc > 1 && !open_backend(argv[1]) ? 1 : 0;
}
