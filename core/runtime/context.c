/* core/runtime/context.c - backend choice and contexts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *pit_backend_name_at(int i);

/* Splits "name" or "name:N" from PIT_BACKEND; index stays as given when no ":N". */
static pit_status parse_backend_spec(const char *spec, char *name, size_t name_len, int *index)
{
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= name_len)
        return pit_error(PIT_ERR_BACKEND_NOT_FOUND,
                         "PIT_BACKEND='%s' is not of the form name or name:N", spec);
    memcpy(name, spec, len);
    name[len] = '\0';
    if (colon) {
        char *end = NULL;
        long v = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || v < 0 || v > 1000000)
            return pit_error(PIT_ERR_DEVICE_INDEX,
                             "PIT_BACKEND='%s': device index '%s' is not a number >= 0", spec,
                             colon + 1);
        *index = (int)v;
    }
    return PIT_SUCCESS;
}

/* The first backend in the order cuda, hip, opencl that has a device. */
static pit_status pick_first_backend(char *name, size_t name_len)
{
    char why[1024] = "";
    size_t used = 0;
    for (int i = 0; pit_backend_name_at(i); i++) {
        const char *candidate = pit_backend_name_at(i);
        const pit_backend *be;
        int n = 0;
        pit_status s = pit_backend_get(candidate, &be);
        if (s == PIT_SUCCESS)
            s = pit_backend_device_count(be, &n);
        if (s == PIT_SUCCESS && n > 0) {
            snprintf(name, name_len, "%s", candidate);
            pit_log_info("PIT_BACKEND unset: chose %s (first backend with a device)", candidate);
            pit_clear_error(); /* the candidates skipped before are not this call's error */
            return PIT_SUCCESS;
        }
        int w = snprintf(why + used, sizeof why - used, "%s%s: %s", used ? "; " : "", candidate,
                         s == PIT_SUCCESS ? "no device" : pit_last_error());
        if (w > 0 && (size_t)w < sizeof why - used)
            used += (size_t)w;
        pit_log_debug("skipping backend %s: %s", candidate,
                      s == PIT_SUCCESS ? "no device" : pit_last_error());
    }
    return pit_error(PIT_ERR_NO_DEVICE, "no backend has a device: %s", why);
}

static pit_status resolve_backend(const char *backend, int *index, char *name, size_t name_len)
{
    if (backend) {
        snprintf(name, name_len, "%s", backend);
        return PIT_SUCCESS;
    }
    const char *env = getenv("PIT_BACKEND");
    if (env && *env) {
        pit_log_debug("PIT_BACKEND=%s", env);
        return parse_backend_spec(env, name, name_len, index);
    }
    return pick_first_backend(name, name_len);
}

static pit_status open_device(pit_context *ctx, const char *name, int index)
{
    PIT_TRY(pit_backend_get(name, &ctx->be));
    int n = 0;
    PIT_TRY(pit_backend_device_count(ctx->be, &n));
    if (n == 0)
        return pit_error(PIT_ERR_NO_DEVICE, "backend %s is loaded but has no device", name);
    if (index < 0 || index >= n)
        return pit_error(PIT_ERR_DEVICE_INDEX, "backend %s has %d device(s); index %d is out of range",
                         name, n, index);
    PIT_TRY(pit_backend_device_info(ctx->be, index, &ctx->info));
    ctx->info.device_index = index;
    pit_switches_read(&ctx->switches);
    PIT_TRY(ctx->be->context_create(index, &ctx->switches, &ctx->bctx));
    pit_status s = ctx->be->stream_create(ctx->bctx, &ctx->default_stream.bs);
    if (s != PIT_SUCCESS)
        return s;
    ctx->default_stream.ctx = ctx;
    ctx->default_stream.owned = 1;
    PIT_TRY(pit_tiledb_open(&ctx->info, &ctx->db));
    snprintf(ctx->info.tiledb_source, sizeof ctx->info.tiledb_source, "%s",
             pit_tiledb_source(ctx->db));
    pit_log_info("context on %s:%d \"%s\" (%s), tile database %s", name, index, ctx->info.name,
                  ctx->info.arch, ctx->info.tiledb_source);
    return PIT_SUCCESS;
}

static void release_context(pit_context *ctx)
{
    if (ctx->bctx) {
        pit_plans_release(ctx);
        pit_workspaces_release(ctx);
        if (ctx->default_stream.bs)
            ctx->be->stream_destroy(ctx->bctx, ctx->default_stream.bs);
        ctx->be->context_destroy(ctx->bctx);
    }
    if (ctx->db)
        pit_tiledb_close(ctx->db);
    pit_mem_sources_release(ctx);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

PIT_API pit_status pit_context_create(const char *backend, int device_index, pit_context **out)
{
    pit_clear_error();
    PIT_CHECK_ARG(out != NULL, "ctx");
    *out = NULL;
    int index = device_index < 0 ? 0 : device_index;
    char name[32];
    PIT_TRY(resolve_backend(backend, &index, name, sizeof name));

    pit_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_context_create: out of host memory");
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->device_index = index;
    pit_status s = open_device(ctx, name, index);
    if (s != PIT_SUCCESS) {
        char saved[2048];
        snprintf(saved, sizeof saved, "%s", pit_last_error());
        release_context(ctx);
        return pit_error(s, "%s", saved);
    }
    *out = ctx;
    return PIT_SUCCESS;
}

/* "2 tensors, 1 stream and 1 event" for what is still alive; returns how
 * many objects that is (0: nothing). */
static int describe_live(pit_context *ctx, char *buf, size_t size)
{
    static const char *const names[PIT_LIVE_KINDS] = {"tensor", "stream", "event"};
    int n[PIT_LIVE_KINDS], kinds = 0, shown = 0, total = 0;
    for (int k = 0; k < PIT_LIVE_KINDS; k++) {
        n[k] = atomic_load(&ctx->live[k]);
        kinds += n[k] > 0;
        total += n[k] > 0 ? n[k] : 0;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < PIT_LIVE_KINDS; k++) {
        if (n[k] <= 0)
            continue;
        shown++;
        const char *sep = shown == 1 ? "" : shown == kinds ? " and " : ", ";
        int w = snprintf(buf + used, size - used, "%s%d %s%s", sep, n[k], names[k],
                         n[k] == 1 ? "" : "s");
        if (w > 0 && (size_t)w < size - used)
            used += (size_t)w;
    }
    return total;
}

PIT_API pit_status pit_context_destroy(pit_context *ctx)
{
    pit_clear_error();
    if (!ctx)
        return PIT_SUCCESS;
    char live[128];
    int alive = describe_live(ctx, live, sizeof live);
    if (alive)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_context_destroy: %s of this context %s "
                         "still alive: destroy them first (the context is kept, still usable)",
                         live, alive == 1 ? "is" : "are");
    release_context(ctx);
    return PIT_SUCCESS;
}

PIT_API pit_status pit_context_get_info(const pit_context *ctx, pit_device_info *info)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(info != NULL, "info");
    *info = ctx->info;
    return PIT_SUCCESS;
}
