/*
 * core/tiledb/tiledb_format.c - the text format of the tile database: the
 * names of its ops, one line parsed and checked, a file written. Loading the
 * layers and matching devices is tiledb.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* newlocale, uselocale */
#endif
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "tiledb_format.h"

#define TILEDB_COLUMNS 12
#define TILEDB_MAX_TILE_DIM 1024

/* ---- names ---------------------------------------------------------------- */

static const char *const op_names[PIT_TILE_OP_COUNT] = {
    [PIT_TILE_DENSE] = "dense",       [PIT_TILE_MATMUL_K] = "matmul_k",
    [PIT_TILE_MATMUL_M] = "matmul_m", [PIT_TILE_MATMUL_N] = "matmul_n",
    [PIT_TILE_FILL] = "fill",         [PIT_TILE_ACCUM] = "accum",
    [PIT_TILE_DETECT] = "detect",     [PIT_TILE_CALL] = "call",
    [PIT_TILE_MOE] = "moe",           [PIT_TILE_ROWS] = "rows",
    [PIT_TILE_READ] = "read",         [PIT_TILE_STREAM] = "stream",
};

const char *pit_tile_op_name(pit_tile_op op)
{
    return (int)op >= 0 && op < PIT_TILE_OP_COUNT ? op_names[op] : "?";
}

static int parse_op(const char *s, pit_tile_op *op)
{
    for (int i = 0; i < PIT_TILE_OP_COUNT; i++)
        if (strcmp(s, op_names[i]) == 0) {
            *op = (pit_tile_op)i;
            return 1;
        }
    return 0;
}

static int parse_dtype(const char *s, pit_dtype *dt)
{
    static const pit_dtype matmul_dtypes[] = {PIT_F32, PIT_F16, PIT_BF16};
    for (size_t i = 0; i < sizeof matmul_dtypes / sizeof matmul_dtypes[0]; i++)
        if (strcmp(s, pit_dtype_name(matmul_dtypes[i])) == 0) {
            *dt = matmul_dtypes[i];
            return 1;
        }
    return 0;
}

double pit_tiledb_us_per_tile(double kernel_us, int64_t tile_steps)
{
    return tile_steps > 0 ? kernel_us / (double)tile_steps : 0.0;
}

double pit_tiledb_gflops(const pit_tile *tile, double us_per_tile)
{
    if (!tile || !(us_per_tile > 0))
        return 0.0;
    return 2.0 * tile->bm * tile->bn * tile->bk / us_per_tile / 1e3;
}

/* ---- numbers in the "C" locale ----------------------------------------------- */

/* The file is the same text under every locale: "13.1072", never "13,1072".
 * uselocale changes only the calling thread, so a program that set a
 * comma-decimal locale (and other threads) are left alone. */
int pit_tiledb_c_locale_enter(pit_tiledb_c_locale *l)
{
    l->c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (l->c == (locale_t)0)
        return 0;
    l->saved = uselocale(l->c);
    return 1;
}

void pit_tiledb_c_locale_leave(pit_tiledb_c_locale *l)
{
    uselocale(l->saved);
    freelocale(l->c);
}

/* ---- validation, shared by the reader and the writer ---------------------- */

static int check_int(const char *what, int32_t v, int32_t lo, int32_t hi, char *why, size_t n)
{
    if (v >= lo && v <= hi)
        return 1;
    snprintf(why, n, "%s must be %d..%d, got %d", what, lo, hi, v);
    return 0;
}

int pit_tiledb_entry_valid(const pit_tiledb_entry *e, char *why, size_t n)
{
    if (!e->device[0] || !e->backend[0]) {
        snprintf(why, n, "empty device pattern or backend");
        return 0;
    }
    if ((int)e->op < 0 || e->op >= PIT_TILE_OP_COUNT) {
        snprintf(why, n, "invalid op %d", (int)e->op);
        return 0;
    }
    if (e->dtype != PIT_F32 && e->dtype != PIT_F16 && e->dtype != PIT_BF16) {
        snprintf(why, n, "invalid dtype %d", (int)e->dtype);
        return 0;
    }
    const pit_tile *t = &e->tile;
    if (!check_int("bm", t->bm, 1, TILEDB_MAX_TILE_DIM, why, n) ||
        !check_int("bn", t->bn, 1, TILEDB_MAX_TILE_DIM, why, n) ||
        !check_int("bk", t->bk, 1, TILEDB_MAX_TILE_DIM, why, n) ||
        !check_int("threads", t->threads, 1, 4096, why, n) ||
        !check_int("stages", t->stages, 1, 16, why, n) ||
        !check_int("tensor_core", t->tensor_core, 0, PIT_TILE_ENGINE, why, n))
        return 0;
    if (!isfinite(e->us_per_tile) || e->us_per_tile <= 0) {
        snprintf(why, n, "us_per_tile must be a positive number, got %g", e->us_per_tile);
        return 0;
    }
    if (!isfinite(e->gflops) || e->gflops < 0) {
        snprintf(why, n, "gflops must be a number >= 0, got %g", e->gflops);
        return 0;
    }
    if (!isfinite(e->us_per_out) || e->us_per_out < 0) {
        snprintf(why, n, "us_per_out must be a number >= 0, got %g", e->us_per_out);
        return 0;
    }
    return 1;
}

/* ---- parsing one line ----------------------------------------------------- */

static int parse_int_field(const char *s, const char *what, int32_t *out, char *why, size_t n)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno == ERANGE || v < INT32_MIN || v > INT32_MAX) {
        snprintf(why, n, "%s: '%s' is not an integer", what, s);
        return 0;
    }
    *out = (int32_t)v;
    return 1;
}

static int parse_real_field(const char *s, const char *what, double *out, char *why, size_t n)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v)) {
        snprintf(why, n, "%s: '%s' is not a finite number", what, s);
        return 0;
    }
    *out = v;
    return 1;
}

static int copy_field(char *dst, size_t size, const char *src, const char *what, char *why,
                      size_t n)
{
    if (strlen(src) >= size) {
        snprintf(why, n, "%s '%.40s...' is longer than %zu characters", what, src, size - 1);
        return 0;
    }
    memcpy(dst, src, strlen(src) + 1);
    return 1;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Splits line in place on blanks; returns the number of fields (up to max+1
 * so that "too many" is visible). Keeps no state between calls: threads
 * parse their files at once. */
static int split_fields(char *line, char **fields, int max)
{
    int n = 0;
    for (char *p = line; *p;) {
        while (is_blank(*p))
            p++;
        if (!*p)
            break;
        if (n <= max)
            fields[n] = p;
        n++;
        while (*p && !is_blank(*p))
            p++;
        if (*p)
            *p++ = '\0';
    }
    return n;
}

int pit_tiledb_parse_line(char *line, pit_tiledb_entry *e, char *why, size_t n)
{
    char *f[TILEDB_COLUMNS + 2];
    int nf = split_fields(line, f, TILEDB_COLUMNS + 1);
    if (nf != TILEDB_COLUMNS && nf != TILEDB_COLUMNS + 1) {
        snprintf(why, n, "expected %d or %d columns (device backend op dtype bm bn bk threads "
                 "stages tensor_core us_per_tile gflops [us_per_out]), found %d", TILEDB_COLUMNS,
                 TILEDB_COLUMNS + 1, nf);
        return 0;
    }
    memset(e, 0, sizeof *e);
    if (!copy_field(e->device, sizeof e->device, f[0], "device pattern", why, n) ||
        !copy_field(e->backend, sizeof e->backend, f[1], "backend", why, n))
        return 0;
    if (!parse_op(f[2], &e->op)) {
        snprintf(why, n, "unknown op '%s' (dense, matmul_k, matmul_m, matmul_n, fill, accum, "
                 "detect, call, moe, rows)", f[2]);
        return 0;
    }
    if (!parse_dtype(f[3], &e->dtype)) {
        snprintf(why, n, "unknown dtype '%s' (f32, f16, bf16)", f[3]);
        return 0;
    }
    pit_tile *t = &e->tile;
    return parse_int_field(f[4], "bm", &t->bm, why, n) &&
           parse_int_field(f[5], "bn", &t->bn, why, n) &&
           parse_int_field(f[6], "bk", &t->bk, why, n) &&
           parse_int_field(f[7], "threads", &t->threads, why, n) &&
           parse_int_field(f[8], "stages", &t->stages, why, n) &&
           parse_int_field(f[9], "tensor_core", &t->tensor_core, why, n) &&
           parse_real_field(f[10], "us_per_tile", &e->us_per_tile, why, n) &&
           parse_real_field(f[11], "gflops", &e->gflops, why, n) &&
           (nf == TILEDB_COLUMNS || parse_real_field(f[12], "us_per_out", &e->us_per_out, why, n)) &&
           pit_tiledb_entry_valid(e, why, n);
}

/* ---- writing -------------------------------------------------------------- */

static void write_comment(FILE *f, const char *text)
{
    while (text && *text) {
        size_t n = strcspn(text, "\n");
        fprintf(f, "# %.*s\n", (int)n, text);
        text += n + (text[n] == '\n');
    }
}

static void write_header(FILE *f, const char *header_comment)
{
    fputs("# pit tile database: one dense computation tile a line.\n", f);
    write_comment(f, header_comment);
    fputs("# us_per_tile: device time of one bm x bn x bk tile-step amortised over the\n"
          "# full device (a kernel of T tile-steps filling the device takes\n"
          "# T * us_per_tile); gflops = 2*bm*bn*bk / us_per_tile / 1e3 (0 for fill, accum).\n"
          "# device backend op dtype bm bn bk threads stages tensor_core us_per_tile gflops\n",
          f);
}

static void make_parent_dir(const char *path)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        mkdir(dir, 0755); /* best effort; fopen reports the real problem */
    }
}

static void write_entries(FILE *f, const pit_tiledb_entry *entries, int n)
{
    for (int i = 0; i < n; i++) {
        const pit_tiledb_entry *e = &entries[i];
        const pit_tile *t = &e->tile;
        fprintf(f, "%-14s %-7s %-9s %-5s %4d %4d %4d %5d %2d %d %-12.6g %-10.1f %.6g\n",
                e->device, e->backend, op_names[e->op], pit_dtype_name(e->dtype), t->bm, t->bn,
                t->bk, t->threads, t->stages, t->tensor_core, e->us_per_tile, e->gflops,
                e->us_per_out);
    }
}

pit_status pit_tiledb_write(const char *path, const pit_tiledb_entry *entries, int n,
                            const char *header_comment)
{
    if (!path || !*path || n < 0 || (n > 0 && !entries))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_tiledb_write: invalid argument");
    char why[256];
    for (int i = 0; i < n; i++) {
        if (!pit_tiledb_entry_valid(&entries[i], why, sizeof why) || strpbrk(entries[i].device, " \t#") ||
            strpbrk(entries[i].backend, " \t#"))
            return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_tiledb_write: entry %d: %s", i,
                             pit_tiledb_entry_valid(&entries[i], why, sizeof why)
                                 ? "blank or '#' in device pattern or backend" : why);
    }
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    make_parent_dir(path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return pit_error(PIT_ERR_IO, "pit_tiledb_write: cannot create %s: %s", tmp, strerror(errno));
    pit_tiledb_c_locale c;
    if (!pit_tiledb_c_locale_enter(&c)) {
        fclose(f);
        remove(tmp);
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tiledb_write: out of host memory");
    }
    write_header(f, header_comment);
    write_entries(f, entries, n);
    pit_tiledb_c_locale_leave(&c);
    int failed = ferror(f);
    failed |= fflush(f) != 0;
    failed |= fsync(fileno(f)) != 0;
    failed |= fclose(f) != 0;
    if (failed || rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        return pit_error(PIT_ERR_IO, "pit_tiledb_write: cannot write %s: %s", path, strerror(err));
    }
    return PIT_SUCCESS;
}
