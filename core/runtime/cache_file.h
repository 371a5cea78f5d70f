/*
 * core/runtime/cache_file.h - one entry of the kernel disk cache as a file:
 * its name, its format, reading it safely and writing it whole. Plain C and
 * libc only, no other part of core: the plug-ins' direct tests link
 * cache_file.c to give their own hosts the same cache.
 *
 * An entry is "<kind>-<32 hex digits>.bin" (kind: the plug-in, [a-z0-9]{1,16};
 * the digits: a 128-bit hash of kind and key) holding
 *     "PITKERN1", key bytes (u64), payload bytes (u64),
 *     checksum (u64, FNV-1a 64 of the key text then the payload),
 *     the key text, the payload.
 * The key is the whole text that determines the binary (sources, build
 * options, device and compiler identity): a reader compares it byte for
 * byte, so two keys that share a hash never share a binary.
 */
#ifndef PIT_CORE_CACHE_FILE_H
#define PIT_CORE_CACHE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum pit_cache_read {
    PIT_CACHE_HIT,         /* *data holds the payload stored under the key */
    PIT_CACHE_ABSENT,      /* no file */
    PIT_CACHE_NOT_REGULAR, /* a FIFO, a folder, a device: not read */
    PIT_CACHE_DAMAGED,     /* bad magic, sizes or checksum */
    PIT_CACHE_OTHER_KEY,   /* whole, but stored under another key */
    PIT_CACHE_NO_MEMORY
} pit_cache_read;

/* "dir/<kind>-<hash>.bin" into out: 0, or -1 when kind is not [a-z0-9]{1,16}
 * or the path does not fit. */
int pit_cache_entry_path(char *out, size_t cap, const char *dir, const char *kind, const char *key);

/* Reads the entry at path. On PIT_CACHE_HIT *data is the payload (malloc'd)
 * and *size its bytes, and the file's modification time becomes now: the
 * size cap removes the least recently used entries first. */
pit_cache_read pit_cache_entry_read(const char *path, const char *key, void **data, size_t *size);

/* Writes an entry to a temporary file beside path and renames it into place,
 * so a reader never sees half an entry. Returns the bytes of the file, or -1. */
int64_t pit_cache_entry_write(const char *path, const char *key, const void *data, size_t size);

/* A regular file opened "rb", else NULL (missing, or a FIFO, folder or device,
 * which would block or never end): pit_host.open_cache_entry. */
FILE *pit_cache_open_regular(const char *path);

/* Nonzero when a file name in the cache folder is one of pit's kernel entries:
 * an entry as above, one of an earlier format ("cuda-sm<N>-<16 hex>.cubin"),
 * or the temporary file of a writer ("<entry>.tmp.<digits and dots>").
 * Nothing else in the folder is ever counted or removed. */
int pit_cache_is_entry_name(const char *name);

#endif
