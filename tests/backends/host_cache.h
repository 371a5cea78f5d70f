/*
 * tests/backends/host_cache.h - the kernel disk cache of the direct tests'
 * own hosts (pit_host.cache_load / cache_store / cache_drop): core's entry
 * files (core/runtime/cache_file.c, linked into the test) in the folder the
 * includer's host_cache_dir() names (declared before this is included),
 * without core's size cap. Test code only.
 */
#ifndef PIT_TESTS_HOST_CACHE_H
#define PIT_TESTS_HOST_CACHE_H

#include <unistd.h>

#include "runtime/cache_file.h"

static inline int host_cache_path(char *path, size_t cap, const char *kind, const char *key)
{
    const char *dir = host_cache_dir();
    return dir && pit_cache_entry_path(path, cap, dir, kind, key) == 0;
}

static inline void *host_cache_load(const char *kind, const char *key, size_t *size)
{
    char path[1200];
    void *data = NULL;
    if (host_cache_path(path, sizeof path, kind, key) &&
        pit_cache_entry_read(path, key, &data, size) == PIT_CACHE_HIT)
        return data;
    return NULL;
}

static inline void host_cache_store(const char *kind, const char *key, const void *data, size_t size)
{
    char path[1200];
    if (host_cache_path(path, sizeof path, kind, key))
        pit_cache_entry_write(path, key, data, size);
}

static inline void host_cache_drop(const char *kind, const char *key)
{
    char path[1200];
    if (host_cache_path(path, sizeof path, kind, key))
        unlink(path);
}

#endif
