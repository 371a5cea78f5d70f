/*
 * core/runtime/logging.c - the log: which levels PIT_LOG asks for, and where
 * lines go (stderr, or the callback of pit_set_log_callback).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define LEVEL_OFF 3     /* above every level: nothing is produced */
#define LEVEL_UNSET (-1) /* PIT_LOG absent or empty */

static pthread_once_t pit_log_once = PTHREAD_ONCE_INIT;
static int pit_env_level = LEVEL_UNSET;
/* Read-held while a line is delivered, so that pit_set_log_callback returns
 * only once no call of the previous callback is running. */
static pthread_rwlock_t pit_sink_lock = PTHREAD_RWLOCK_INITIALIZER;
static pit_log_fn pit_sink_fn; /* NULL: stderr */
static void *pit_sink_user;
static atomic_int pit_have_callback; /* read without the lock by pit_log_wants */
static _Thread_local int pit_in_callback;

static void read_log_level(void)
{
    const char *v = getenv("PIT_LOG");
    if (!v || !*v)
        pit_env_level = LEVEL_UNSET;
    else if (strcmp(v, "debug") == 0 || strcmp(v, "1") == 0)
        pit_env_level = PIT_LOG_DEBUG;
    else if (strcmp(v, "info") == 0)
        pit_env_level = PIT_LOG_INFO;
    else if (strcmp(v, "warn") == 0)
        pit_env_level = PIT_LOG_WARN;
    else /* "off", "0" and anything unknown */
        pit_env_level = LEVEL_OFF;
}

/* The lowest level produced; with PIT_LOG unset, a callback gets warnings. */
static int lowest_level(int have_callback)
{
    pthread_once(&pit_log_once, read_log_level);
    if (pit_env_level != LEVEL_UNSET)
        return pit_env_level;
    return have_callback ? PIT_LOG_WARN : LEVEL_OFF;
}

int pit_log_wants(pit_log_level level)
{
    return (int)level >= lowest_level(atomic_load(&pit_have_callback));
}

static void write_stderr(pit_log_level level, const char *line)
{
    flockfile(stderr);
    fputs(level == PIT_LOG_WARN ? "pit: warning: " : "pit: ", stderr);
    fputs(line, stderr);
    fputc('\n', stderr);
    funlockfile(stderr);
}

void pit_vlog(pit_log_level level, const char *fmt, va_list ap)
{
    if (pit_in_callback || !pit_log_wants(level))
        return;
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    pthread_rwlock_rdlock(&pit_sink_lock);
    /* decided again under the lock: the sink may have changed meanwhile */
    if ((int)level >= lowest_level(pit_sink_fn != NULL)) {
        if (pit_sink_fn) {
            pit_in_callback = 1;
            pit_sink_fn(pit_sink_user, level, line);
            pit_in_callback = 0;
        } else {
            /* The one place the library writes to a stream, and only when asked. */
            write_stderr(level, line);
        }
    }
    pthread_rwlock_unlock(&pit_sink_lock);
}

void pit_log(pit_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pit_vlog(level, fmt, ap);
    va_end(ap);
}

PIT_API pit_status pit_set_log_callback(pit_log_fn fn, void *user)
{
    pit_clear_error();
    if (pit_in_callback) /* the write lock would wait for this very call */
        return pit_error(PIT_ERR_INVALID_ARGUMENT,
                         "pit_set_log_callback: called from inside the log callback");
    pthread_rwlock_wrlock(&pit_sink_lock);
    pit_sink_fn = fn;
    pit_sink_user = fn ? user : NULL;
    atomic_store(&pit_have_callback, fn != NULL);
    pthread_rwlock_unlock(&pit_sink_lock);
    return PIT_SUCCESS;
}
