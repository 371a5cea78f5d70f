/* core/runtime/cache_file.c - one kernel-cache entry as a file (cache_file.h). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, fdopen, futimens where a test builds it */
#endif
#include "cache_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENTRY_MAGIC "PITKERN1"
#define KIND_MAX 16
#define FNV_BASIS 0xcbf29ce484222325ull
#define FNV_BASIS2 0x84222325cbf29ce4ull /* a second basis for the name's other 64 bits */
/* Payloads above this are refused on read (and not written): no kernel binary
 * comes near it, and a hostile size field cannot ask for more memory. */
#define PAYLOAD_MAX ((uint64_t)1 << 31)

typedef struct entry_header {
    char magic[8];
    uint64_t key_bytes;
    uint64_t payload_bytes;
    uint64_t checksum;
} entry_header;

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- names ----------------------------------------------------------------------- */

static int is_kind(const char *s, size_t n)
{
    if (n == 0 || n > KIND_MAX)
        return 0;
    for (size_t i = 0; i < n; ++i)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

int pit_cache_entry_path(char *out, size_t cap, const char *dir, const char *kind, const char *key)
{
    if (!is_kind(kind, strlen(kind)))
        return -1;
    uint64_t h[2] = {FNV_BASIS, FNV_BASIS2};
    for (int j = 0; j < 2; ++j) {
        h[j] = fnv1a(h[j], kind, strlen(kind) + 1);
        h[j] = fnv1a(h[j], key, strlen(key));
    }
    int n = snprintf(out, cap, "%s/%s-%016llx%016llx.bin", dir, kind, (unsigned long long)h[0],
                     (unsigned long long)h[1]);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Characters of s from which all of set ('0'-'9' and/or 'a'-'f') are drawn. */
static size_t span_of(const char *s, int with_hex_letters)
{
    size_t n = 0;
    while ((s[n] >= '0' && s[n] <= '9') || (with_hex_letters && s[n] >= 'a' && s[n] <= 'f'))
        ++n;
    return n;
}

/* "<kind>-<32 hex>.bin" in the first n characters of name. */
static int is_entry_base(const char *name, size_t n)
{
    const char *dash = memchr(name, '-', n);
    if (!dash || !is_kind(name, (size_t)(dash - name)))
        return 0;
    const char *hex = dash + 1;
    return (size_t)(hex - name) + 36 == n && span_of(hex, 1) >= 32 && !strncmp(hex + 32, ".bin", 4);
}

/* "cuda-sm<1-4 digits>-<16 hex>.cubin": the CUDA plug-in's entries before
 * this format, still recognised so that the cap and `pit cache clear` remove them. */
static int is_old_cuda_entry(const char *name, size_t n)
{
    if (n < 8 || strncmp(name, "cuda-sm", 7) != 0)
        return 0;
    size_t digits = span_of(name + 7, 0);
    const char *hex = name + 7 + digits + 1;
    return digits >= 1 && digits <= 4 && hex[-1] == '-' && (size_t)(hex - name) + 22 == n &&
           span_of(hex, 1) >= 16 && !strncmp(hex + 16, ".cubin", 6);
}

int pit_cache_is_entry_name(const char *name)
{
    size_t n = strlen(name);
    const char *tmp = strstr(name, ".tmp.");
    if (tmp) {
        const char *tail = tmp + 5;
        size_t k = 0;
        while ((tail[k] >= '0' && tail[k] <= '9') || tail[k] == '.')
            ++k;
        if (k == 0 || tail[k] != '\0')
            return 0;
        n = (size_t)(tmp - name);
    }
    return is_entry_base(name, n) || is_old_cuda_entry(name, n);
}

/* ---- reading ----------------------------------------------------------------------- */

static int open_regular_fd(const char *path, pit_cache_read *why)
{
    /* O_NONBLOCK: open() on a FIFO would wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = errno == ENOENT ? PIT_CACHE_ABSENT : PIT_CACHE_NOT_REGULAR;
        return -1;
    }
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || flags < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        close(fd);
        *why = PIT_CACHE_NOT_REGULAR;
        return -1;
    }
    return fd;
}

FILE *pit_cache_open_regular(const char *path)
{
    pit_cache_read why;
    int fd = open_regular_fd(path, &why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    return f;
}

/* Reads exactly n bytes; 0 on success. */
static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* Reads the stored key in pieces, checksumming it and comparing it with key. */
static int read_key(int fd, const char *key, uint64_t *sum, int *same)
{
    char piece[4096];
    size_t left = strlen(key);
    *same = 1;
    while (left > 0) {
        size_t n = left < sizeof piece ? left : sizeof piece;
        if (read_all(fd, piece, n) != 0)
            return -1;
        *sum = fnv1a(*sum, piece, n);
        *same = *same && memcmp(piece, key, n) == 0;
        key += n;
        left -= n;
    }
    return 0;
}

static pit_cache_read read_entry(int fd, const char *key, void **data, size_t *size)
{
    struct stat st;
    entry_header h;
    if (fstat(fd, &st) != 0 || read_all(fd, &h, sizeof h) != 0 ||
        memcmp(h.magic, ENTRY_MAGIC, 8) != 0 || h.payload_bytes == 0 || h.payload_bytes > PAYLOAD_MAX ||
        h.key_bytes > (uint64_t)st.st_size ||
        sizeof h + h.key_bytes + h.payload_bytes != (uint64_t)st.st_size)
        return PIT_CACHE_DAMAGED;
    if (h.key_bytes != strlen(key))
        return PIT_CACHE_OTHER_KEY;
    uint64_t sum = FNV_BASIS;
    int same = 0;
    if (read_key(fd, key, &sum, &same) != 0)
        return PIT_CACHE_DAMAGED;
    void *payload = malloc((size_t)h.payload_bytes);
    if (!payload)
        return PIT_CACHE_NO_MEMORY;
    if (read_all(fd, payload, (size_t)h.payload_bytes) != 0 ||
        fnv1a(sum, payload, (size_t)h.payload_bytes) != h.checksum) {
        free(payload);
        return PIT_CACHE_DAMAGED;
    }
    if (!same) {
        free(payload);
        return PIT_CACHE_OTHER_KEY;
    }
    *data = payload;
    *size = (size_t)h.payload_bytes;
    return PIT_CACHE_HIT;
}

pit_cache_read pit_cache_entry_read(const char *path, const char *key, void **data, size_t *size)
{
    pit_cache_read result;
    int fd = open_regular_fd(path, &result);
    if (fd < 0)
        return result;
    result = read_entry(fd, key, data, size);
    if (result == PIT_CACHE_HIT)
        futimens(fd, NULL); /* best effort: a read-only folder only loses the order */
    close(fd);
    return result;
}

/* ---- writing ----------------------------------------------------------------------- */

static int write_entry(FILE *f, const char *key, const void *data, size_t size)
{
    entry_header h;
    size_t key_bytes = strlen(key);
    memcpy(h.magic, ENTRY_MAGIC, 8);
    h.key_bytes = key_bytes;
    h.payload_bytes = size;
    h.checksum = fnv1a(fnv1a(FNV_BASIS, key, key_bytes), data, size);
    return fwrite(&h, sizeof h, 1, f) == 1 && fwrite(key, 1, key_bytes, f) == key_bytes &&
           fwrite(data, 1, size, f) == size;
}

int64_t pit_cache_entry_write(const char *path, const char *key, const void *data, size_t size)
{
    static atomic_uint counter; /* threads of one process never share a temporary name */
    if (size == 0 || size > PAYLOAD_MAX)
        return -1;
    char tmp[4200];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
                     atomic_fetch_add(&counter, 1u));
    if (n < 0 || (size_t)n >= sizeof tmp)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return -1;
    }
    int ok = write_entry(f, key, data, size);
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return (int64_t)(sizeof(entry_header) + strlen(key) + size);
}
