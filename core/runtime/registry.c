/*
 * core/runtime/registry.c - finds, loads and checks backend plug-ins.
 *
 * Plug-ins are shared libraries next to libpit (build tree: the same folder;
 * installed: <libdir>/pit). They are loaded on first use and kept until the
 * process ends, so a backend's tables stay valid for every context.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_file.h"
#include "internal.h"
#include "pit_testing.h"

static const char *const pit_backend_names[] = {"cuda", "hip", "opencl"};
#define PIT_NBACKENDS 3

typedef struct plugin_slot {
    int tried;
    pit_status status;       /* result of the first load */
    char message[1536];      /* its error, replayed on later calls */
    const pit_backend *be;
} plugin_slot;

static plugin_slot pit_plugins[PIT_NBACKENDS];
static pthread_mutex_t pit_registry_lock = PTHREAD_MUTEX_INITIALIZER;

static pit_status host_error(pit_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pit_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

static void host_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pit_vlog(PIT_LOG_DEBUG, fmt, ap);
    va_end(ap);
}

const pit_host pit_host_api = {
    .abi_version = PIT_BACKEND_ABI_VERSION,
    .error = host_error,
    .log_debug = host_log,
    .cache_dir = pit_cache_dir,
    .inject_alloc_failure = pit_fault_alloc_now,
    .open_cache_entry = pit_cache_open_regular,
    .cache_load = pit_kernel_cache_load,
    .cache_store = pit_kernel_cache_store,
    .cache_drop = pit_kernel_cache_drop,
};

const char *pit_plugin_dir(void)
{
    static char dir[1024];
    const char *env = getenv("PIT_PLUGIN_DIR");
    if (env && *env)
        return env;
    Dl_info info;
    if (!dir[0] && dladdr((void *)pit_plugin_dir, &info) && info.dli_fname) {
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof dir, ".");
    }
    return dir;
}

static int backend_slot(const char *name)
{
    for (int i = 0; i < PIT_NBACKENDS; i++)
        if (strcmp(name, pit_backend_names[i]) == 0)
            return i;
    return -1;
}

/* Tries <dir>/pit/libpit-NAME.so then <dir>/libpit-NAME.so. A file that is
 * absent is only named; a file that exists but does not load gets dlerror's
 * reason, so a failure says every place looked and why. */
static void *open_plugin(const char *name, char *tried, size_t tried_len, char *path,
                         size_t path_len)
{
    const char *dir = pit_plugin_dir();
    const char *layouts[] = {"%s/pit/libpit-%s.so", "%s/libpit-%s.so"};
    size_t used = 0;
    tried[0] = '\0';
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        snprintf(path, path_len, layouts[i], dir, name);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        const char *why = dlerror();
        int absent = access(path, F_OK) != 0;
        int n = snprintf(tried + used, tried_len - used, "%s%s (%s)", used ? "; " : "", path,
                         absent ? "absent" : why ? why : "unknown error");
        if (n > 0 && (size_t)n < tried_len - used)
            used += (size_t)n;
    }
    return NULL;
}

/* The entries core calls without looking for NULL first (a NULL one would be
 * a jump to address 0). Every other entry is optional: core checks it and
 * reports PIT_ERR_UNSUPPORTED, or never calls it (shutdown). */
#define PIT_REQUIRED_ENTRIES(X)                                                                  \
    X(init) X(device_count) X(device_info) X(context_create) X(context_destroy)               \
    X(stream_create) X(stream_destroy) X(stream_synchronize) X(mem_alloc) X(mem_free)          \
    X(mem_write) X(mem_read) X(mem_fill32) X(event_record) X(event_elapsed_ms)                 \
    X(event_destroy) X(detect) X(matmul_sparse) X(matmul_dense)

static void list_missing(char *out, size_t out_len, size_t *used, const char *entry)
{
    int n = snprintf(out + *used, out_len - *used, "%s%s", *used ? ", " : "", entry);
    if (n > 0 && (size_t)n < out_len - *used)
        *used += (size_t)n;
}

/* Names the required entries the table leaves NULL, comma-separated, in out;
 * returns how many. */
static int missing_entries(const pit_backend *be, char *out, size_t out_len)
{
    size_t used = 0;
    int missing = 0;
    out[0] = '\0';
#define PIT_CHECK_ENTRY(entry)                                                                  \
    if (!be->entry) {                                                                            \
        list_missing(out, out_len, &used, #entry);                                               \
        missing++;                                                                               \
    }
    PIT_REQUIRED_ENTRIES(PIT_CHECK_ENTRY)
#undef PIT_CHECK_ENTRY
    return missing;
}

/* Runs the plug-in's init; a failure it leaves without a message gets one,
 * so pit_last_error() never replays an older call's text as its reason. */
static pit_status init_backend(const pit_backend *be, const char *name)
{
    pit_clear_error();
    pit_status s = be->init(&pit_host_api);
    if (s != PIT_SUCCESS && !pit_last_error()[0])
        pit_error(s, "backend %s: init failed (status %s) without a message", name,
                  pit_status_string(s));
    return s;
}

/* Checks a table before anything in it is called: the ABI, the name, and
 * the entries core calls without looking. where names the plug-in's file. */
static pit_status check_table(const pit_backend *be, const char *name, const char *where)
{
    if (!be || be->abi_version != PIT_BACKEND_ABI_VERSION || !be->name ||
        strcmp(be->name, name) != 0)
        return pit_error(PIT_ERR_BACKEND_INVALID,
                         "%s is not a compatible pit plug-in: ABI version %u, name '%s' "
                         "(this libpit needs ABI %d, name '%s')",
                         where, be ? be->abi_version : 0u, be && be->name ? be->name : "?",
                         PIT_BACKEND_ABI_VERSION, name);
    char missing[512];
    if (missing_entries(be, missing, sizeof missing) > 0)
        return pit_error(PIT_ERR_BACKEND_INVALID,
                         "%s is not a usable pit plug-in: backend '%s' leaves entries "
                         "every backend must have NULL: %s",
                         where, name, missing);
    return PIT_SUCCESS;
}

static void load_plugin(const char *name, plugin_slot *slot)
{
    char tried[1024], path[1100];
    void *h = open_plugin(name, tried, sizeof tried, path, sizeof path);
    if (!h) {
        slot->status = pit_error(PIT_ERR_BACKEND_NOT_FOUND,
                                 "backend '%s' could not be loaded; looked for: %s", name, tried);
        return;
    }
    pit_log_debug("loaded plug-in %s", path);
    pit_backend_register_fn reg =
        (pit_backend_register_fn)(uintptr_t)dlsym(h, PIT_BACKEND_REGISTER_SYMBOL);
    if (!reg) {
        slot->status = pit_error(PIT_ERR_BACKEND_INVALID,
                                 "%s is not a pit plug-in: it has no symbol %s", path,
                                 PIT_BACKEND_REGISTER_SYMBOL);
        dlclose(h);
        return;
    }
    const pit_backend *be = reg(&pit_host_api);
    slot->status = check_table(be, name, path);
    if (slot->status != PIT_SUCCESS) {
        dlclose(h);
        return;
    }
    slot->status = init_backend(be, name);
    if (slot->status != PIT_SUCCESS) {
        pit_log_debug("backend %s: init failed: %s", name, pit_last_error());
        return; /* keep the library loaded: its message strings stay valid */
    }
    slot->be = be;
    pit_log_info("backend %s ready (%s)", name, path);
}

/* Records a load's outcome in its slot, so later calls replay its message. */
static void settle_slot(plugin_slot *slot)
{
    slot->tried = 1;
    if (slot->status != PIT_SUCCESS)
        snprintf(slot->message, sizeof slot->message, "%s", pit_last_error());
}

PIT_API pit_status pit_debug_install_backend(const char *name, const pit_backend *be)
{
    pit_clear_error();
    PIT_CHECK_ARG(name != NULL, "name");
    int i = backend_slot(name);
    if (i < 0)
        return pit_error(PIT_ERR_BACKEND_NOT_FOUND, "unknown backend '%s'", name);
    pthread_mutex_lock(&pit_registry_lock);
    plugin_slot *slot = &pit_plugins[i];
    memset(slot, 0, sizeof *slot);
    slot->status = check_table(be, name, "an installed table");
    if (slot->status == PIT_SUCCESS)
        slot->status = init_backend(be, name);
    if (slot->status == PIT_SUCCESS)
        slot->be = be;
    settle_slot(slot);
    pit_status s = slot->status;
    pthread_mutex_unlock(&pit_registry_lock);
    return s;
}

pit_status pit_backend_get(const char *name, const pit_backend **out)
{
    *out = NULL;
    int i = backend_slot(name);
    if (i < 0)
        return pit_error(PIT_ERR_BACKEND_NOT_FOUND,
                         "unknown backend '%s' (known: cuda, hip, opencl)", name);
    pthread_mutex_lock(&pit_registry_lock);
    plugin_slot *slot = &pit_plugins[i];
    if (!slot->tried) {
        load_plugin(name, slot);
        settle_slot(slot);
    }
    pit_status s = slot->status;
    *out = slot->be;
    pthread_mutex_unlock(&pit_registry_lock);
    if (s != PIT_SUCCESS)
        return pit_error(s, "%s", slot->message);
    return PIT_SUCCESS;
}

/* What a plug-in reports is checked where core would otherwise trust it
 * blindly: a negative count, a failure without a message. */
pit_status pit_backend_device_count(const pit_backend *be, int *count)
{
    *count = 0;
    int n = 0;
    pit_clear_error();
    pit_status s = be->device_count(&n);
    if (s != PIT_SUCCESS)
        return pit_last_error()[0] ? s
                                   : pit_error(s, "backend %s: device_count failed without a "
                                                  "message", be->name);
    if (n < 0)
        return pit_error(PIT_ERR_BACKEND_INVALID, "backend %s reports %d devices", be->name, n);
    *count = n;
    return PIT_SUCCESS;
}

/* A tile-database family names a file: letters, digits, '-' and '_' only. */
static int family_name_ok(const char *family)
{
    for (const char *c = family; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_'))
            return 0;
    return 1;
}

#define PIT_TERMINATE(field) ((field)[sizeof(field) - 1] = '\0')

/* The device's description with every string terminated, the backend named
 * by core, a family that cannot leave the tile-database folder, f16
 * storage wherever f16 arithmetic is, and host memory taken only by a
 * backend that can wrap it. */
pit_status pit_backend_device_info(const pit_backend *be, int index, pit_device_info *info)
{
    memset(info, 0, sizeof *info);
    pit_clear_error();
    pit_status s = be->device_info(index, info);
    PIT_TERMINATE(info->vendor);
    PIT_TERMINATE(info->name);
    PIT_TERMINATE(info->arch);
    PIT_TERMINATE(info->driver_version);
    PIT_TERMINATE(info->tiledb_family);
    snprintf(info->backend, sizeof info->backend, "%s", be->name);
    info->tiledb_source[0] = '\0';
    info->has_f16_storage = info->has_f16_storage || info->has_f16;
    info->takes_host_memory = info->takes_host_memory && be->mem_wrap_host && be->mem_unwrap_host;
    if (!family_name_ok(info->tiledb_family)) {
        pit_log_debug("backend %s: tile-database family '%s' ignored (not a plain name)",
                      be->name, info->tiledb_family);
        info->tiledb_family[0] = '\0';
    }
    if (s != PIT_SUCCESS && !pit_last_error()[0])
        return pit_error(s, "backend %s: device_info failed without a message", be->name);
    return s;
}

int pit_device_stores(const pit_device_info *info, pit_dtype dt)
{
    return dt == PIT_F16 ? info->has_f16_storage != 0 : dt == PIT_BF16 ? info->has_bf16 != 0 : 1;
}

PIT_API pit_status pit_device_count(const char *backend, int *count)
{
    pit_clear_error();
    PIT_CHECK_ARG(backend != NULL, "backend");
    PIT_CHECK_ARG(count != NULL, "count");
    *count = 0;
    const pit_backend *be;
    PIT_TRY(pit_backend_get(backend, &be));
    return pit_backend_device_count(be, count);
}

PIT_API pit_status pit_device_get_info(const char *backend, int device_index,
                                       pit_device_info *info)
{
    pit_clear_error();
    PIT_CHECK_ARG(backend != NULL, "backend");
    PIT_CHECK_ARG(info != NULL, "info");
    const pit_backend *be;
    PIT_TRY(pit_backend_get(backend, &be));
    int n = 0;
    PIT_TRY(pit_backend_device_count(be, &n));
    if (device_index < 0 || device_index >= n)
        return pit_error(PIT_ERR_DEVICE_INDEX, "backend %s has %d device(s); index %d is out of range",
                         backend, n, device_index);
    PIT_TRY(pit_backend_device_info(be, device_index, info));
    info->device_index = device_index;
    return PIT_SUCCESS;
}

/* Used by context.c for the automatic choice. */
const char *pit_backend_name_at(int i)
{
    return i >= 0 && i < PIT_NBACKENDS ? pit_backend_names[i] : NULL;
}
