/*
 * core/tiledb/tiledb_format.h - the line format shared by the tile database's
 * reader (tiledb.c) and writer (tiledb_format.c).
 */
#ifndef PIT_CORE_TILEDB_FORMAT_H
#define PIT_CORE_TILEDB_FORMAT_H

#include <locale.h>
#include <stddef.h>

#include "select.h"

/* 1 when every field of e is in range; otherwise 0 and why says which. */
int pit_tiledb_entry_valid(const pit_tiledb_entry *e, char *why, size_t n);
/* Parses one line (comment already stripped; split in place) into e; 0 with
 * why on a malformed or invalid line. */
int pit_tiledb_parse_line(char *line, pit_tiledb_entry *e, char *why, size_t n);

/* The calling thread reads and writes numbers in the "C" locale between
 * enter (0 when out of memory) and leave, whatever locale the program set. */
typedef struct pit_tiledb_c_locale {
    locale_t c, saved;
} pit_tiledb_c_locale;
int pit_tiledb_c_locale_enter(pit_tiledb_c_locale *l);
void pit_tiledb_c_locale_leave(pit_tiledb_c_locale *l);

#endif /* PIT_CORE_TILEDB_FORMAT_H */
