/*
 * cuda_lib_search.c - where a CUDA library is looked for (cuda_libs.h says
 * in which order) and the message that names what was tried when none loads.
 */
#define _GNU_SOURCE /* dlinfo, RTLD_NOLOAD, dl_iterate_phdr */
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_libs.h"

#define ENV_FOLDERS "PIT_CUDA_LIB_DIRS"

/* The folders of one search, each followed by a '\0', without repeats. */
typedef struct folders {
    char text[8192];
    size_t used;
} folders;

static const char *next_folder(const folders *f, const char *d)
{
    d = d ? d + strlen(d) + 1 : f->text;
    return d < f->text + f->used ? d : NULL;
}

static void add_folder(folders *f, const char *dir, size_t len)
{
    if (len == 0 || f->used + len + 1 > sizeof f->text) return;
    for (const char *d = next_folder(f, NULL); d; d = next_folder(f, d))
        if (strlen(d) == len && !memcmp(d, dir, len)) return;
    memcpy(f->text + f->used, dir, len);
    f->text[f->used + len] = 0;
    f->used += len + 1;
}

/* PIT_CUDA_LIB_DIRS's folders; 0 when it is unset or empty. */
static int env_folders(folders *f)
{
    const char *list = getenv(ENV_FOLDERS);
    if (!list || !*list) return 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ":");
        add_folder(f, p, len);
        p += len + (p[len] == ':');
    }
    return 1;
}

static void add_toolkit(folders *f, const char *variable)
{
    const char *root = getenv(variable);
    char dir[4096];
    int w = root && *root ? snprintf(dir, sizeof dir, "%s/lib64", root) : -1;
    if (w > 0 && (size_t)w < sizeof dir) add_folder(f, dir, (size_t)w);
}

static int is_folder(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* pip's layout: CUDA 13's wheels share one folder, CUDA 12's have one each. */
static const char *const wheel_folders[] = {"nvidia/cu13/lib", "nvidia/cublas/lib", "nvidia/cusparse/lib",
                                            "nvidia/cuda_nvrtc/lib"};

typedef struct wheel_scan {
    folders *f;
    char last_root[4096]; /* the site-packages folder seen last: most libraries repeat it */
} wheel_scan;

/* dl_iterate_phdr's callback: the wheel folders of the site-packages folder
 * a loaded library lives in (torch/lib/libtorch.so, numpy's, ...). */
static int add_wheel_folders(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    wheel_scan *scan = data;
    const char *name = info->dlpi_name, *end = NULL;
    static const char *const markers[] = {"/site-packages/", "/dist-packages/"};
    for (size_t i = 0; i < sizeof markers / sizeof markers[0] && name && !end; ++i) {
        const char *at = strstr(name, markers[i]);
        if (at) end = at + strlen(markers[i]);
    }
    if (!end || (size_t)(end - name) >= sizeof scan->last_root) return 0;
    size_t root_len = (size_t)(end - name);
    if (strlen(scan->last_root) == root_len && !memcmp(scan->last_root, name, root_len)) return 0;
    memcpy(scan->last_root, name, root_len);
    scan->last_root[root_len] = 0;
    for (size_t i = 0; i < sizeof wheel_folders / sizeof wheel_folders[0]; ++i) {
        char dir[4096];
        int w = snprintf(dir, sizeof dir, "%s%s", scan->last_root, wheel_folders[i]);
        if (w > 0 && (size_t)w < sizeof dir && is_folder(dir)) add_folder(scan->f, dir, (size_t)w);
    }
    return 0;
}

static void default_folders(folders *f)
{
    add_toolkit(f, "CUDA_HOME");
    add_toolkit(f, "CUDA_PATH");
    static const char usual[] = "/usr/local/cuda/lib64";
    add_folder(f, usual, sizeof usual - 1);
    wheel_scan scan = {f, {0}};
    dl_iterate_phdr(add_wheel_folders, &scan);
}

/* printf at out + *used, advancing *used (never past size - 1) */
static void append(char *out, size_t size, size_t *used, const char *fmt, ...)
{
    if (*used + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out + *used, size - *used, fmt, ap);
    va_end(ap);
    if (w > 0) *used = *used + (size_t)w < size ? *used + (size_t)w : size - 1;
}

/* One search: where it has looked, and the first file that exists but did
 * not load, with the loader's reason. */
typedef struct search {
    folders where;
    int from_env;
    char failure[1024];
} search;

/* dlopen; a failure other than "no such file" is kept (the first one). A
 * bare soname is absent when the loader's message starts with it (when a
 * dependency is missing, the message names the dependency). */
static void *open_file(search *s, const char *file)
{
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char *why = dlerror();
    size_t len = strlen(file);
    int absent = strchr(file, '/') ? access(file, F_OK) != 0
                                   : why && !strncmp(why, file, len) && why[len] == ':';
    if (!absent && !s->failure[0]) { /* the loader's message names the file, unless a dependency failed */
        if (why && strstr(why, file)) snprintf(s->failure, sizeof s->failure, "%s", why);
        else snprintf(s->failure, sizeof s->failure, "%s: %s", file, why ? why : "not loaded");
    }
    return NULL;
}

static int allowed(const pit_cuda_soname *name, int max_cuda)
{
    return max_cuda <= 0 || name->cuda <= max_cuda;
}

/* A soname already in the process (no search, nothing loaded), then the
 * loader's own search. */
static void *open_by_soname(search *s, const pit_cuda_soname *names, int n, int max_cuda)
{
    for (int i = 0; i < n; ++i) {
        void *h = allowed(&names[i], max_cuda) ? dlopen(names[i].file, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD) : NULL;
        if (h) return h;
    }
    for (int i = 0; i < n; ++i) {
        void *h = allowed(&names[i], max_cuda) ? open_file(s, names[i].file) : NULL;
        if (h) return h;
    }
    return NULL;
}

static void *open_in_folders(search *s, const pit_cuda_soname *names, int n, int max_cuda)
{
    for (const char *d = next_folder(&s->where, NULL); d; d = next_folder(&s->where, d))
        for (int i = 0; i < n; ++i) {
            char file[4200];
            int w = snprintf(file, sizeof file, "%s/%s", d, names[i].file);
            void *h = allowed(&names[i], max_cuda) && w > 0 && (size_t)w < sizeof file ? open_file(s, file) : NULL;
            if (h) return h;
        }
    return NULL;
}

/* "libnvrtc.so.13, libnvrtc.so.12 not found (searched ...)", with the file
 * that exists but did not load, and the sonames the driver rules out. */
static void describe(const search *s, const pit_cuda_soname *names, int n, int max_cuda, char *why, size_t size)
{
    size_t used = 0;
    int tried = 0, skipped = 0;
    why[0] = 0;
    for (int i = 0; i < n; ++i)
        if (allowed(&names[i], max_cuda)) append(why, size, &used, "%s%s", tried++ ? ", " : "", names[i].file);
    if (!tried) {
        for (int i = 0; i < n; ++i) append(why, size, &used, "%s%s", i ? ", " : "", names[i].file);
        append(why, size, &used, ": none is for CUDA %d or older, the driver's", max_cuda);
        return;
    }
    if (s->failure[0]) append(why, size, &used, " could not be loaded (%s; searched ", s->failure);
    else append(why, size, &used, " not found (searched ");
    const char *sep = "";
    if (s->from_env) {
        append(why, size, &used, ENV_FOLDERS ": ");
    } else {
        append(why, size, &used, "the process's libraries, the loader's path");
        sep = ", ";
    }
    for (const char *d = next_folder(&s->where, NULL); d; d = next_folder(&s->where, d), sep = ", ")
        append(why, size, &used, "%s%s", sep, d);
    append(why, size, &used, ")");
    for (int i = 0; i < n; ++i)
        if (!allowed(&names[i], max_cuda))
            append(why, size, &used, "%s%s", skipped++ ? ", " : "; not tried, newer than the driver's CUDA: ",
                   names[i].file);
    if (!s->from_env) append(why, size, &used, "; " ENV_FOLDERS " names the folders to search instead");
}

static void file_of(void *h, char *path, size_t size)
{
    struct link_map *map = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) map = NULL;
    snprintf(path, size, "%s", map ? map->l_name : "?");
}

void *pit_cuda_lib_find(const pit_cuda_soname *names, int n, int max_cuda, char *path, size_t path_size,
                        char *why, size_t why_size)
{
    search *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, why_size, "out of host memory");
        return NULL;
    }
    s->from_env = env_folders(&s->where);
    void *h = s->from_env ? NULL : open_by_soname(s, names, n, max_cuda);
    if (!h && !s->from_env) default_folders(&s->where);
    if (!h) h = open_in_folders(s, names, n, max_cuda);
    if (h) file_of(h, path, path_size);
    else describe(s, names, n, max_cuda, why, why_size);
    free(s);
    return h;
}
