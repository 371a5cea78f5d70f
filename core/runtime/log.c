/* core/runtime/log.c - the cache folder, fault injection, the wall clock (the log
 * itself: logging.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "pit_testing.h"

static pthread_once_t pit_env_once = PTHREAD_ONCE_INIT;
static char pit_cache_path[1024];
static atomic_long pit_alloc_countdown; /* <= 0: no injection armed */
static atomic_long pit_alloc_attempts;  /* every device allocation, for tests */

/* Creates every folder of path; best effort: callers check the final one. */
static int make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static void read_environment(void)
{
    const char *fault = getenv("PIT_FAULT_ALLOC");
    atomic_store(&pit_alloc_countdown, fault ? strtol(fault, NULL, 10) : 0);

    const char *dir = getenv("PIT_CACHE_DIR");
    const char *home = getenv("HOME");
    if (dir && *dir)
        snprintf(pit_cache_path, sizeof pit_cache_path, "%s", dir);
    else if (home && *home)
        snprintf(pit_cache_path, sizeof pit_cache_path, "%s/.cache/pit", home);
    if (pit_cache_path[0] && make_dirs(pit_cache_path) != 0)
        pit_cache_path[0] = '\0';
}

const char *pit_cache_dir(void)
{
    pthread_once(&pit_env_once, read_environment);
    return pit_cache_path[0] ? pit_cache_path : NULL;
}

int pit_fault_alloc_now(void)
{
    pthread_once(&pit_env_once, read_environment);
    atomic_fetch_add(&pit_alloc_attempts, 1);
    if (atomic_load(&pit_alloc_countdown) <= 0)
        return 0;
    return atomic_fetch_sub(&pit_alloc_countdown, 1) == 1;
}

PIT_API void pit_debug_fail_alloc_after(long n)
{
    /* Read the environment first so that it cannot overwrite this later. */
    pthread_once(&pit_env_once, read_environment);
    atomic_store(&pit_alloc_countdown, n > 0 ? n : 0);
}

PIT_API long pit_debug_alloc_count(void)
{
    return atomic_load(&pit_alloc_attempts);
}

double pit_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}
