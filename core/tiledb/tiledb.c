/*
 * core/tiledb/tiledb.c - the tile database: which dense computation tiles exist on a
 * device and what one tile-step of each costs.
 *
 * File format (plain text, diffable, one tile a line, '#' starts a comment):
 *   device backend op dtype bm bn bk threads stages tensor_core us_per_tile gflops
 * device is an fnmatch glob tried (case-insensitively) on the device name, its
 * arch and its vendor; backend is "cuda", "hip", "opencl" or "*". The cost
 * unit is defined in select.h (pit_tiledb_entry): us_per_tile is one
 * bm x bn x bk tile-step amortised over the full device.
 *
 * Sources, in order, each one a layer: $PIT_TILEDB, the tuned file of this
 * exact device (<cache>/tiledb/<device name>.tiledb), the shipped family file
 * ($PIT_TILEDB_DIR, <libdir>/../share/pit/tiledb, the source tree), then the
 * built-in table. For every (op, dtype) the first layer that has entries for
 * the device wins, so a tuned file holding only f32 tiles still gets f16 from
 * the family file, and nothing is ever missing. A file with any malformed
 * line is skipped whole (a half-read file would silently mix sources) with a
 * "file:line: what" warning, and loading goes on with the next source; so
 * is anything but a regular file of at most 16 MiB (a FIFO, a device, a
 * directory). Numbers are read in the "C" locale, whatever the program's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, FNM_CASEFOLD */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "tiledb_format.h"

#define TILEDB_LINE_MAX 512
#define TILEDB_WARN_MAX 8192
#define TILEDB_MAX_LAYERS 4

typedef struct entry_list {
    pit_tiledb_entry *v;
    int n, cap;
} entry_list;

typedef struct layer {
    char name[256];
    entry_list list;
} layer;

struct pit_tiledb {
    entry_list list;
    char source[256];
    char warnings[TILEDB_WARN_MAX];
    size_t warn_len;
};

/* ---- entry lists ---------------------------------------------------------- */

static pit_status list_push(entry_list *l, const pit_tiledb_entry *e)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        pit_tiledb_entry *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return pit_error(PIT_ERR_OUT_OF_MEMORY, "tile database: out of host memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *e;
    return PIT_SUCCESS;
}

static void list_free(entry_list *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- warnings --------------------------------------------------------------- */

static void warn(pit_tiledb *db, const char *fmt, ...) PIT_PRINTF(2, 3);
static void warn(pit_tiledb *db, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pit_log_warn("tile database: %s", msg);
    size_t room = sizeof db->warnings - db->warn_len;
    if (room <= 1)
        return;
    int w = snprintf(db->warnings + db->warn_len, room, "%s\n", msg);
    db->warn_len = w < 0 ? db->warn_len : (size_t)w >= room ? sizeof db->warnings - 1
                                                             : db->warn_len + (size_t)w;
}

/* ---- device matching ---------------------------------------------------- */

static int glob_match(const char *pattern, const char *s)
{
    return s && s[0] && fnmatch(pattern, s, FNM_CASEFOLD) == 0;
}

static int entry_matches(const pit_tiledb_entry *e, const pit_device_info *dev)
{
    if (!dev)
        return 1;
    if (strcmp(e->backend, "*") != 0 && dev->backend[0] && strcmp(e->backend, dev->backend) != 0)
        return 0;
    return glob_match(e->device, dev->name) || glob_match(e->device, dev->arch) ||
           glob_match(e->device, dev->vendor);
}

/* ---- reading a file ----------------------------------------------------- */

typedef enum read_result { READ_OK, READ_MISSING, READ_MALFORMED, READ_NO_MEMORY } read_result;

/* A tile database is a few hundred lines; the bound keeps a wrong path (a
 * disk image, a log) from being read into memory whole. */
#define TILEDB_FILE_MAX (16u << 20)

static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a plain file";
}

/* Reads up to size bytes; returns how many (fewer at end of file), or -1. */
static ssize_t read_fully(int fd, char *buf, size_t size)
{
    size_t n = 0;
    while (n < size) {
        ssize_t got = read(fd, buf + n, size - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        n += (size_t)got;
    }
    return (ssize_t)n;
}

/* Reads the whole regular file at path into *text (NUL-terminated, *len
 * bytes). O_NONBLOCK keeps open() from waiting on a FIFO's writer; anything
 * but a regular file of at most TILEDB_FILE_MAX bytes is refused with a
 * warning. errno stays that of open() on READ_MISSING. */
static read_result read_whole(pit_tiledb *db, const char *path, char **text, size_t *len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return READ_MISSING;
    struct stat st;
    read_result r = READ_MALFORMED;
    ssize_t got = -1;
    if (fstat(fd, &st) != 0)
        warn(db, "%s: cannot stat (%s)", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        warn(db, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
    else if ((uint64_t)st.st_size > TILEDB_FILE_MAX)
        warn(db, "%s: %lld bytes, more than a tile database may hold (%u MiB)", path,
             (long long)st.st_size, TILEDB_FILE_MAX >> 20);
    else if (!(*text = malloc((size_t)st.st_size + 1)))
        r = READ_NO_MEMORY;
    else if ((got = read_fully(fd, *text, (size_t)st.st_size)) < 0)
        warn(db, "%s: read error (%s)", path, strerror(errno));
    else
        r = READ_OK;
    close(fd);
    if (r != READ_OK) {
        free(*text);
        *text = NULL;
        return r;
    }
    (*text)[got] = '\0'; /* a file that shrank while read is read up to its end */
    *len = (size_t)got;
    return READ_OK;
}

/* Copies the line starting at text[*pos] into buf and moves *pos past its
 * newline; returns the line's length, -2 when longer than size - 1, -3 when
 * it holds bytes no text file has (NUL, control codes). */
static int next_line(const char *text, size_t len, size_t *pos, char *buf, int size)
{
    int n = 0, bad = 0, too_long = 0;
    size_t i = *pos;
    for (; i < len && text[i] != '\n'; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
            bad = 1;
        if (n < size - 1)
            buf[n++] = (char)c;
        else
            too_long = 1;
    }
    buf[n] = '\0';
    *pos = i + 1;
    return bad ? -3 : too_long ? -2 : n;
}

static void strip_comment(char *line)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
}

static int blank(const char *s)
{
    return s[strspn(s, " \t\r")] == '\0';
}

/* Parses the text of path (in the "C" locale); keeps the entries matching
 * dev in out. */
static read_result parse_text(pit_tiledb *db, const char *path, const char *text, size_t len,
                              const pit_device_info *dev, entry_list *out)
{
    char line[TILEDB_LINE_MAX], why[256];
    read_result r = READ_OK;
    size_t pos = 0;
    for (int lineno = 1; r != READ_NO_MEMORY && pos < len; lineno++) {
        pit_tiledb_entry e;
        int n = next_line(text, len, &pos, line, sizeof line);
        if (n == -3 || n == -2) {
            warn(db, "%s:%d: %s", path, lineno,
                 n == -3 ? "binary data (not a text tile database)"
                         : "line longer than 511 characters");
            r = READ_MALFORMED;
            continue;
        }
        strip_comment(line);
        if (blank(line))
            continue;
        if (!pit_tiledb_parse_line(line, &e, why, sizeof why)) {
            warn(db, "%s:%d: %s", path, lineno, why);
            r = READ_MALFORMED;
        } else if (entry_matches(&e, dev) && list_push(out, &e) != PIT_SUCCESS) {
            r = READ_NO_MEMORY;
        }
    }
    return r;
}

/* Reads and parses path; keeps the entries matching dev in out. On a
 * malformed line records the warning and returns READ_MALFORMED with out
 * emptied. */
static read_result read_file(pit_tiledb *db, const char *path, const pit_device_info *dev,
                             entry_list *out)
{
    char *text = NULL;
    size_t len = 0;
    read_result r = read_whole(db, path, &text, &len);
    if (r != READ_OK)
        return r;
    pit_tiledb_c_locale c;
    if (!pit_tiledb_c_locale_enter(&c)) {
        free(text);
        return READ_NO_MEMORY;
    }
    r = parse_text(db, path, text, len, dev, out);
    pit_tiledb_c_locale_leave(&c);
    free(text);
    if (r != READ_OK)
        list_free(out);
    return r;
}

/* ---- the built-in table ------------------------------------------------- */

/* The last resort, for any device: a generic GPU-like throughput of 1 TFLOP/s
 * at the best tile, 100 GB/s for fill and detection and half that for accum,
 * 20 us of read-back and launches per sparse call. Only the ratios between entries
 * steer the selection; every micro-tile pit_matmul_candidates proposes finds
 * its tile here (matmul_k bm 16/32/64, matmul_m and matmul_n bk 32/64). The
 * gathered GEMMs (moe, rows) have none: their kernels' tiles differ by
 * backend, and without a row of the device each runs its own
 * (pit_select_gathered). */
typedef struct builtin_shape {
    pit_tile_op op;
    int32_t bm, bn, bk, threads;
} builtin_shape;

static const builtin_shape builtin_shapes[] = {
    {PIT_TILE_DENSE, 128, 128, 32, 256},  {PIT_TILE_DENSE, 64, 64, 32, 256},
    {PIT_TILE_MATMUL_K, 16, 64, 32, 128}, {PIT_TILE_MATMUL_K, 32, 64, 32, 128},
    {PIT_TILE_MATMUL_K, 32, 128, 32, 256}, {PIT_TILE_MATMUL_K, 64, 64, 32, 256},
    {PIT_TILE_MATMUL_K, 64, 128, 32, 256}, {PIT_TILE_MATMUL_M, 64, 64, 32, 256},
    {PIT_TILE_MATMUL_M, 64, 64, 64, 256}, {PIT_TILE_MATMUL_N, 64, 64, 32, 256},
    {PIT_TILE_MATMUL_N, 64, 64, 64, 256}, {PIT_TILE_FILL, 64, 64, 1, 256},
    {PIT_TILE_ACCUM, 64, 64, 1, 256},      {PIT_TILE_DETECT, 1024, 1024, 1, 256},
    {PIT_TILE_CALL, 1, 1, 1, 1},
};

#define BUILTIN_GFLOPS 1000.0
#define BUILTIN_FILL_GBS 100.0
#define BUILTIN_ACCUM_GBS 50.0 /* an atomic add reads and writes */
#define BUILTIN_DETECT_GBS 100.0
#define BUILTIN_CALL_US 20.0    /* a read-back and a few launches */

/* Share of the best throughput a bm x bn tile reaches: its arithmetic
 * intensity bm*bn/(bm+bn) against a saturation constant, 1 at 128 x 128. */
static double tile_efficiency(int32_t bm, int32_t bn)
{
    const double half = 16.0, best = 64.0 / (64.0 + half);
    double ai = (double)bm * bn / (bm + bn);
    return ai / (ai + half) / best;
}

static void builtin_entry(const builtin_shape *s, pit_dtype dt, pit_tiledb_entry *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->device, sizeof e->device, "*");
    snprintf(e->backend, sizeof e->backend, "*");
    e->op = s->op;
    e->dtype = dt;
    e->tile = (pit_tile){s->bm, s->bn, s->bk, s->threads, 1, 0};
    if (s->op == PIT_TILE_CALL) {
        e->us_per_tile = BUILTIN_CALL_US;
        return;
    }
    if (s->op == PIT_TILE_FILL || s->op == PIT_TILE_ACCUM || s->op == PIT_TILE_DETECT) {
        double bytes = (double)s->bm * s->bn * (double)pit_dtype_size(dt);
        double gbs = s->op == PIT_TILE_FILL     ? BUILTIN_FILL_GBS
                     : s->op == PIT_TILE_DETECT ? BUILTIN_DETECT_GBS
                                                : BUILTIN_ACCUM_GBS;
        e->us_per_tile = bytes / (gbs * 1e3);
        return;
    }
    /* The fused SRead/SWrite kernels pay ~10% over the plain dense tile. */
    double gflops = BUILTIN_GFLOPS * tile_efficiency(s->bm, s->bn) *
                    (s->op == PIT_TILE_DENSE ? 1.0 : 0.9);
    e->us_per_tile = 2.0 * s->bm * s->bn * s->bk / (gflops * 1e3);
    e->gflops = gflops;
}

static pit_status load_builtin(entry_list *out)
{
    static const pit_dtype dtypes[] = {PIT_F32, PIT_F16, PIT_BF16};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (size_t i = 0; i < sizeof builtin_shapes / sizeof builtin_shapes[0]; i++) {
            pit_tiledb_entry e;
            builtin_entry(&builtin_shapes[i], dtypes[d], &e);
            PIT_TRY(list_push(out, &e));
        }
    return PIT_SUCCESS;
}

/* ---- where the files are ------------------------------------------------ */

const char *pit_tiledb_family(const pit_device_info *dev)
{
    return dev && dev->tiledb_family[0] ? dev->tiledb_family : NULL;
}

static void sanitise(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; in && in[n] && n + 1 < size; n++) {
        char c = in[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == '_';
        out[n] = ok ? c : '_';
    }
    out[n] = '\0';
    if (n == 0)
        snprintf(out, size, "unknown-device");
}

pit_status pit_tiledb_tuned_path(const pit_device_info *dev, char *buf, size_t size)
{
    if (!dev || !buf || size == 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_tiledb_tuned_path: null argument");
    const char *cache = pit_cache_dir();
    if (!cache)
        return pit_error(PIT_ERR_IO, "no cache folder (set PIT_CACHE_DIR or HOME)");
    char name[160];
    sanitise(dev->name, name, sizeof name);
    int w = snprintf(buf, size, "%s/tiledb/%s.tiledb", cache, name);
    if (w < 0 || (size_t)w >= size)
        return pit_error(PIT_ERR_IO, "tuned tile database path too long under %s", cache);
    return PIT_SUCCESS;
}

/* <folder of the library holding this code>/../share/pit/tiledb */
static int installed_dir(char *buf, size_t size)
{
    Dl_info info;
    if (!dladdr((void *)&pit_tiledb_open, &info) || !info.dli_fname)
        return 0;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return 0;
    int w = snprintf(buf, size, "%.*s/../share/pit/tiledb", (int)(slash - info.dli_fname),
                     info.dli_fname);
    return w > 0 && (size_t)w < size;
}

/* The shipped folders, in search order; returns how many. */
static int shipped_dirs(char dirs[][512], int max)
{
    int n = 0;
    const char *env = getenv("PIT_TILEDB_DIR");
    if (env && *env && n < max)
        snprintf(dirs[n++], 512, "%s", env);
    if (n < max && installed_dir(dirs[n], 512))
        n++;
#ifdef PIT_INSTALL_TILEDB_DIR
    /* The configured data folder: right for multiarch libdirs (lib/x86_64-linux-gnu). */
    if (n < max)
        snprintf(dirs[n++], 512, "%s", PIT_INSTALL_TILEDB_DIR);
#endif
#ifdef PIT_SOURCE_TILEDB_DIR
    if (n < max)
        snprintf(dirs[n++], 512, "%s", PIT_SOURCE_TILEDB_DIR);
#endif
    return n;
}

/* ---- loading ------------------------------------------------------------ */

/* Reads one source into a new layer. Missing files are silent unless
 * required ($PIT_TILEDB names a file that must exist). */
static pit_status try_source(pit_tiledb *db, const char *path, int required,
                             const pit_device_info *dev, layer *layers, int *nlayers)
{
    layer *l = &layers[*nlayers];
    memset(l, 0, sizeof *l);
    read_result r = read_file(db, path, dev, &l->list);
    if (r == READ_NO_MEMORY)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "tile database: out of host memory");
    if (r == READ_MISSING) {
        if (required)
            warn(db, "%s: cannot open (%s)", path, strerror(errno));
        else
            pit_log_debug("tile database: %s: not present", path);
        return PIT_SUCCESS;
    }
    if (r == READ_MALFORMED) {
        warn(db, "%s: skipped, using the next source", path);
        return PIT_SUCCESS;
    }
    if (l->list.n == 0) {
        warn(db, "%s: no entry for device \"%s\" (%s), using the next source", path,
             dev ? dev->name : "?", dev ? dev->arch : "?");
        list_free(&l->list);
        return PIT_SUCCESS;
    }
    snprintf(l->name, sizeof l->name, "%s", path);
    (*nlayers)++;
    return PIT_SUCCESS;
}

static pit_status load_family(pit_tiledb *db, const pit_device_info *dev, layer *layers,
                              int *nlayers)
{
    const char *family = pit_tiledb_family(dev);
    if (!family) {
        pit_log_debug("tile database: no shipped family for %s %s", dev ? dev->backend : "?",
                      dev ? dev->arch : "?");
        return PIT_SUCCESS;
    }
    char dirs[4][512], path[1100];
    int ndirs = shipped_dirs(dirs, 4);
    for (int i = 0; i < ndirs; i++) {
        int before = *nlayers;
        snprintf(path, sizeof path, "%.511s/%.200s.tiledb", dirs[i], family);
        PIT_TRY(try_source(db, path, 0, dev, layers, nlayers));
        if (*nlayers > before)
            return PIT_SUCCESS; /* one family file is enough */
    }
    return PIT_SUCCESS;
}

/* Keeps, for every (op, dtype), the entries of the first layer that has any. */
static pit_status merge_layers(pit_tiledb *db, layer *layers, int nlayers)
{
    int used[TILEDB_MAX_LAYERS] = {0};
    for (int op = 0; op < PIT_TILE_OP_COUNT; op++)
        for (int dt = PIT_F32; dt <= PIT_BF16; dt++) {
            int from = -1;
            for (int l = 0; l < nlayers && from < 0; l++)
                for (int i = 0; i < layers[l].list.n; i++) {
                    const pit_tiledb_entry *e = &layers[l].list.v[i];
                    if ((int)e->op != op || (int)e->dtype != dt)
                        continue;
                    PIT_TRY(list_push(&db->list, e));
                    used[l] = 1;
                    from = l;
                }
            if (from > 0)
                pit_log_debug("tile database: no %s %s tile in %s: using %s",
                              pit_tile_op_name((pit_tile_op)op), pit_dtype_name((pit_dtype)dt),
                              layers[0].name, layers[from].name);
        }
    size_t len = 0;
    for (int l = 0; l < nlayers; l++) {
        if (!used[l])
            continue;
        int w = snprintf(db->source + len, sizeof db->source - len, "%s%s", len ? " + " : "",
                         layers[l].name);
        len = w < 0 ? len : len + (size_t)w >= sizeof db->source ? sizeof db->source - 1
                                                                 : len + (size_t)w;
    }
    return PIT_SUCCESS;
}

static pit_status load_all(pit_tiledb *db, const pit_device_info *dev, layer *layers,
                           int *nlayers)
{
    const char *env = getenv("PIT_TILEDB");
    if (env && *env)
        PIT_TRY(try_source(db, env, 1, dev, layers, nlayers));
    char tuned[640];
    if (dev && pit_tiledb_tuned_path(dev, tuned, sizeof tuned) == PIT_SUCCESS)
        PIT_TRY(try_source(db, tuned, 0, dev, layers, nlayers));
    else
        pit_clear_error(); /* no cache folder: not an error for loading */
    PIT_TRY(load_family(db, dev, layers, nlayers));
    layer *b = &layers[*nlayers];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "built-in defaults");
    (*nlayers)++;
    return load_builtin(&b->list);
}

pit_status pit_tiledb_open(const pit_device_info *dev, pit_tiledb **out)
{
    if (!out)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_tiledb_open: argument 'db' is NULL");
    *out = NULL;
    pit_tiledb *db = calloc(1, sizeof *db);
    if (!db)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "tile database: out of host memory");
    layer layers[TILEDB_MAX_LAYERS];
    int nlayers = 0;
    pit_status s = load_all(db, dev, layers, &nlayers);
    if (s == PIT_SUCCESS)
        s = merge_layers(db, layers, nlayers);
    for (int l = 0; l < nlayers; l++)
        list_free(&layers[l].list);
    if (s != PIT_SUCCESS) {
        pit_tiledb_close(db);
        return s;
    }
    pit_log_debug("tile database: %d entries from %s", db->list.n, db->source);
    *out = db;
    return PIT_SUCCESS;
}

void pit_tiledb_close(pit_tiledb *db)
{
    if (!db)
        return;
    list_free(&db->list);
    free(db);
}

const char *pit_tiledb_source(const pit_tiledb *db)
{
    return db ? db->source : "";
}

const char *pit_tiledb_warnings(const pit_tiledb *db)
{
    return db ? db->warnings : "";
}

const pit_tiledb_entry *pit_tiledb_entries(const pit_tiledb *db, int *count)
{
    if (count)
        *count = db ? db->list.n : 0;
    return db ? db->list.v : NULL;
}
