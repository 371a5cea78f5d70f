/*
 * core/runtime/kernel_cache.c - the kernel disk cache as core keeps it for the
 * plug-ins (pit_host.cache_load / cache_store / cache_drop; the entry files
 * are cache_file.c's) and the public pit_cache_get_info / pit_cache_clear.
 *
 * Size cap: PIT_CACHE_MAX_MB (default 256; 0 turns the disk cache off). A
 * read makes an entry the most recently used (its modification time). A
 * process scans the folder once, at its first store, and then adds what it
 * stores; a store that takes the total over the cap removes the least
 * recently used entries down to three quarters of the cap, so a scan is paid
 * for at most once per quarter of the cap stored (and a trim rescans, which
 * counts what other processes wrote). Only files whose names are pit's
 * entries are ever counted or removed; removal failures (another process
 * removed the file first, a read-only folder) are ignored.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_file.h"
#include "internal.h"

#define DEFAULT_CAP_MB 256
#define MAX_CAP_MB 1048576 /* 1 TiB */
#define MB ((int64_t)1 << 20)

static pthread_once_t cap_once = PTHREAD_ONCE_INIT;
static int64_t cap_bytes;
static pthread_once_t tally_once = PTHREAD_ONCE_INIT;
static atomic_llong tallied_bytes; /* pit's entries in the folder: scanned once, plus stores */
static atomic_int tallied;
static atomic_int trimming;       /* a thread is trimming: the others need not */

/* strtoll with base 10 reads digits the same way in every locale */
static void read_cap(void)
{
    const char *text = getenv("PIT_CACHE_MAX_MB");
    cap_bytes = DEFAULT_CAP_MB * MB;
    if (!text || !*text)
        return;
    char *end = NULL;
    errno = 0;
    long long mb = text[0] >= '0' && text[0] <= '9' ? strtoll(text, &end, 10) : -1;
    if (!end || *end || errno || mb < 0 || mb > MAX_CAP_MB) {
        pit_log_debug("PIT_CACHE_MAX_MB=%s ignored: not a whole number of megabytes from 0 to %d; "
                      "the cap stays %d MB", text, MAX_CAP_MB, DEFAULT_CAP_MB);
        return;
    }
    cap_bytes = mb * MB;
}

static int64_t cache_cap(void)
{
    pthread_once(&cap_once, read_cap);
    return cap_bytes;
}

/* ---- pit's entries in the folder ------------------------------------------------- */

typedef struct entry_file {
    char name[256];
    int64_t bytes;
    struct timespec used; /* modification time: the last write or read */
} entry_file;

typedef struct entry_list {
    entry_file *items;
    size_t count, capacity;
    int64_t bytes;
} entry_list;

static int add_entry(entry_list *l, const char *name, const struct stat *st)
{
    if (l->count == l->capacity) {
        size_t n = l->capacity ? 2 * l->capacity : 64;
        entry_file *grown = realloc(l->items, n * sizeof *grown);
        if (!grown)
            return -1;
        l->items = grown;
        l->capacity = n;
    }
    entry_file *e = &l->items[l->count++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->bytes = (int64_t)st->st_size;
    e->used = st->st_mtim;
    l->bytes += e->bytes;
    return 0;
}

/* The regular files of dir whose names are pit's entries; 0, or an errno. */
static int list_entries(const char *dir, entry_list *l)
{
    memset(l, 0, sizeof *l);
    DIR *d = opendir(dir);
    if (!d)
        return errno ? errno : EIO;
    int err = 0;
    struct dirent *e;
    while (!err && (e = readdir(d)) != NULL) {
        struct stat st;
        /* another process may remove an entry between readdir and fstatat */
        if (pit_cache_is_entry_name(e->d_name) &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            err = add_entry(l, e->d_name, &st) == 0 ? 0 : ENOMEM;
    }
    closedir(d);
    if (err) {
        free(l->items);
        memset(l, 0, sizeof *l);
    }
    return err;
}

/* 0 when the entry is gone (also when another process removed it first), else errno. */
static int remove_entry(const char *dir, const char *name)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return unlink(path) == 0 || errno == ENOENT ? 0 : errno;
}

static int older_first(const void *pa, const void *pb)
{
    const entry_file *a = pa, *b = pb;
    if (a->used.tv_sec != b->used.tv_sec)
        return a->used.tv_sec < b->used.tv_sec ? -1 : 1;
    if (a->used.tv_nsec != b->used.tv_nsec)
        return a->used.tv_nsec < b->used.tv_nsec ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Removes the least recently used entries until the folder's entries take at
 * most target bytes. */
static void trim_to(const char *dir, int64_t target)
{
    entry_list l;
    if (list_entries(dir, &l) != 0)
        return;
    qsort(l.items, l.count, sizeof *l.items, older_first);
    int64_t left = l.bytes;
    size_t removed = 0;
    for (size_t i = 0; i < l.count && left > target; ++i) {
        remove_entry(dir, l.items[i].name); /* a failure only leaves the folder larger */
        left -= l.items[i].bytes;
        removed++;
    }
    atomic_store(&tallied_bytes, left);
    pit_log_debug("kernel cache: %zu of %zu entries removed (least recently used first): %s "
                  "holds %lld bytes of them, at most %lld wanted", removed, l.count, dir,
                  (long long)left, (long long)target);
    free(l.items);
}

static void tally_folder(void)
{
    entry_list l;
    const char *dir = pit_cache_dir();
    if (dir && list_entries(dir, &l) == 0) {
        atomic_store(&tallied_bytes, l.bytes);
        free(l.items);
    }
    atomic_store(&tallied, 1);
}

/* ---- pit_host's cache entries ------------------------------------------------------ */

/* The entry's path, or 0 when the disk cache is off or has no folder. */
static int entry_path(char *path, size_t cap, const char *kind, const char *key)
{
    const char *dir = pit_cache_dir();
    return cache_cap() > 0 && dir && kind && key &&
           pit_cache_entry_path(path, cap, dir, kind, key) == 0;
}

/* What the debug log says of a read that found no binary (NULL: nothing). */
static const char *const read_failures[] = {
    [PIT_CACHE_NOT_REGULAR] = "is not a regular file: not read",
    [PIT_CACHE_DAMAGED] = "is corrupt, recompiling",
    [PIT_CACHE_OTHER_KEY] = "was stored under another key, recompiling",
    [PIT_CACHE_NO_MEMORY] = "could not be read: no host memory",
};

void *pit_kernel_cache_load(const char *kind, const char *key, size_t *size)
{
    char path[1200];
    void *data = NULL;
    if (!size || !entry_path(path, sizeof path, kind, key))
        return NULL;
    pit_cache_read got = pit_cache_entry_read(path, key, &data, size);
    if (got == PIT_CACHE_HIT)
        return data;
    if (read_failures[got])
        pit_log_debug("kernel cache: %s %s", path, read_failures[got]);
    return NULL;
}

void pit_kernel_cache_store(const char *kind, const char *key, const void *data, size_t size)
{
    char path[1200];
    if (!data || !entry_path(path, sizeof path, kind, key))
        return;
    pthread_once(&tally_once, tally_folder); /* before the write, which it would count twice */
    int64_t bytes = pit_cache_entry_write(path, key, data, size);
    if (bytes < 0) {
        pit_log_debug("kernel cache: cannot write %s", path);
        return;
    }
    int64_t total = atomic_fetch_add(&tallied_bytes, bytes) + bytes;
    if (total > cache_cap() && !atomic_exchange(&trimming, 1)) {
        trim_to(pit_cache_dir(), cache_cap() - cache_cap() / 4);
        atomic_store(&trimming, 0);
    }
}

void pit_kernel_cache_drop(const char *kind, const char *key)
{
    char path[1200];
    if (entry_path(path, sizeof path, kind, key) && unlink(path) == 0)
        pit_log_debug("kernel cache: %s dropped: its binary did not load or lacked a kernel", path);
}

/* ---- public API ------------------------------------------------------------------------ */

PIT_API pit_status pit_cache_get_info(pit_cache_info *info)
{
    pit_clear_error();
    PIT_CHECK_ARG(info != NULL, "info");
    memset(info, 0, sizeof *info);
    info->folder = pit_cache_dir();
    info->max_bytes = cache_cap();
    if (!info->folder)
        return PIT_SUCCESS;
    entry_list l;
    int err = list_entries(info->folder, &l);
    if (err)
        return pit_error(err == ENOMEM ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_IO,
                         "pit_cache_get_info: cannot list %s: %s", info->folder, strerror(err));
    info->entries = (int64_t)l.count;
    info->bytes = l.bytes;
    free(l.items);
    return PIT_SUCCESS;
}

PIT_API pit_status pit_cache_clear(void)
{
    pit_clear_error();
    const char *dir = pit_cache_dir();
    if (!dir)
        return PIT_SUCCESS;
    entry_list l;
    int err = list_entries(dir, &l);
    if (err)
        return pit_error(err == ENOMEM ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_IO,
                         "pit_cache_clear: cannot list %s: %s", dir, strerror(err));
    pit_status st = PIT_SUCCESS;
    int64_t removed = 0;
    for (size_t i = 0; i < l.count; ++i) {
        err = remove_entry(dir, l.items[i].name);
        if (!err)
            removed += l.items[i].bytes;
        else if (st == PIT_SUCCESS)
            st = pit_error(PIT_ERR_IO, "pit_cache_clear: cannot remove %s/%s: %s", dir,
                           l.items[i].name, strerror(err));
    }
    if (atomic_load(&tallied))
        atomic_fetch_sub(&tallied_bytes, removed);
    free(l.items);
    return st;
}
