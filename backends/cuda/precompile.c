/*
 * precompile.c - pit-cuda-precompile, a build-time tool (the CMake option
 * PIT_CUDA_PRECOMPILE): compiles the default kernel variants of one
 * architecture into cubins with nvcc, and writes the C file that embeds them
 * into libpit-cuda.so (cuda_prebuilt.h).
 *
 *   pit-cuda-precompile list --arch 90 --tiledb-dir DIR
 *       The default variants of sm_90, one "<kernel> <defines>" a line.
 *   pit-cuda-precompile compile --nvcc NVCC --arch 90 --tiledb-dir DIR --out DIR
 *                       [-j N] [--batch N]
 *       Writes the kernel sources (the text NVRTC gets) to DIR/sm_90/,
 *       compiles there the default variants that have no cubin yet,
 *       --batch of them an nvcc (32), -j nvcc at a time (1), and lists each
 *       cubin as "90<TAB>cubin<TAB>digest<TAB>variant" in
 *       DIR/sm_90.manifest.
 *   pit-cuda-precompile embed OUT.c MANIFEST...
 *       Writes OUT.c: every cubin by .incbin, and the table.
 *
 * The default variants: pit_cuda_default_variants (prebuilt_defaults.h).
 *
 * nvcc gets NVRTC's options (pit_cuda_compile_options): those that are no
 * define on its command line, the defines as the #define lines of a wrapper
 * file that includes the kernel's source; so one nvcc compiles a batch of
 * variants, and the defines reach the kernel before anything of nvcc's own
 * headers sees them, as under NVRTC, which includes none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_compile.h"
#include "cuda_prebuilt.h"
#include "kernel_tools.h"
#include "prebuilt_defaults.h"

#define TOOL "pit-cuda-precompile"
#define MAX_ARGS (PIT_CUDA_MAX_OPTIONS + 256)
#define MAX_BATCH 200

/* ---- compile ---------------------------------------------------------------- */
typedef struct options {
    const char *nvcc, *tiledb_dir, *out;
    int arch, jobs, batch;
} options;

/* A default variant and the hex digest of its inputs, which names its files
 * (DIR/<digest>.cu, .cubin): a cubin already there is the one its inputs
 * make, so a build compiles only what changed. */
typedef struct item {
    pit_cuda_variant v;
    char digest[33];
} item;

typedef struct batch {
    int first, count; /* of the items to compile */
} batch;

typedef struct run {
    const options *o;
    const char *dir;
    item *items;
    int count;
    int *todo, ntodo; /* items without a cubin */
    batch *batches;
    int nbatches;
    int failed; /* batches whose cubins are not to be used */
} run;

/* "-DNAME=VALUE" as "#define NAME VALUE", "-DNAME" as "#define NAME 1"
 * (NVRTC's meaning); 0 for an option that is no define. */
static int write_define(FILE *f, const char *opt)
{
    if (strncmp(opt, "-D", 2) != 0 || !opt[2]) return 0;
    const char *eq = strchr(opt, '=');
    if (eq) fprintf(f, "#define %.*s %s\n", (int)(eq - opt - 2), opt + 2, eq + 1);
    else fprintf(f, "#define %s 1\n", opt + 2);
    return 1;
}

/* NVRTC's options of v that are no define, as one string
 * ("--gpu-architecture=sm_90a --std=c++17") */
static void command_line_options(const pit_cuda_variant *v, int arch, char *buf, size_t size)
{
    char archopt[64], defines[512];
    const char *opts[PIT_CUDA_MAX_OPTIONS];
    int n = pit_cuda_compile_options(v, arch, archopt, sizeof archopt, defines, sizeof defines, opts,
                                     PIT_CUDA_MAX_OPTIONS);
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n; ++i)
        if (strncmp(opts[i], "-D", 2) != 0 && at < size)
            at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? " " : "", opts[i]);
}

static int digest_items(run *r, const pit_cuda_variant *v)
{
    r->items = calloc(r->count > 0 ? (size_t)r->count : 1, sizeof *r->items);
    for (int i = 0; r->items && i < r->count; ++i) {
        uint64_t d[2];
        char *inputs = pit_cuda_variant_inputs(&v[i], r->o->arch);
        if (!inputs) return -1;
        pit_cuda_inputs_digest(inputs, d);
        free(inputs);
        r->items[i].v = v[i];
        snprintf(r->items[i].digest, sizeof r->items[i].digest, "%016llx%016llx", (unsigned long long)d[0],
                 (unsigned long long)d[1]);
    }
    return r->items ? 0 : -1;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR/<digest>.cu: the defines of the item, then its kernel's source */
static int write_wrapper(const run *r, const item *it)
{
    char path[1100], archopt[64], defines[512], label[PIT_CUDA_LABEL_MAX];
    const char *opts[PIT_CUDA_MAX_OPTIONS];
    int n = pit_cuda_compile_options(&it->v, r->o->arch, archopt, sizeof archopt, defines, sizeof defines, opts,
                                     PIT_CUDA_MAX_OPTIONS);
    snprintf(path, sizeof path, "%.1000s/%s.cu", r->dir, it->digest);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "/* %s for sm_%d: NVRTC's defines, then the source */\n",
            pit_cuda_variant_label(&it->v, label, sizeof label), r->o->arch);
    for (int k = 0; k < n; ++k) write_define(f, opts[k]);
    fprintf(f, "#include \"%s.cu\"\n", pit_cuda_kernel_name(it->v.kind));
    return fclose(f);
}

/* The items without a cubin, their wrappers written, in batches of at most
 * o->batch that share their command line. */
static int plan_batches(run *r)
{
    r->todo = calloc(r->count > 0 ? (size_t)r->count : 1, sizeof *r->todo);
    r->batches = calloc(r->count > 0 ? (size_t)r->count : 1, sizeof *r->batches);
    if (!r->todo || !r->batches) return -1;
    char first[256] = "", opts[256], cubin[1100];
    for (int i = 0; i < r->count; ++i) {
        snprintf(cubin, sizeof cubin, "%.1000s/%s.cubin", r->dir, r->items[i].digest);
        if (file_exists(cubin)) continue;
        if (write_wrapper(r, &r->items[i]) != 0) return -1;
        command_line_options(&r->items[i].v, r->o->arch, opts, sizeof opts);
        batch *b = r->nbatches ? &r->batches[r->nbatches - 1] : NULL;
        if (!b || b->count == r->o->batch || strcmp(opts, first) != 0) {
            b = &r->batches[r->nbatches++];
            b->first = r->ntodo;
            memcpy(first, opts, sizeof first);
        }
        r->todo[r->ntodo++] = i;
        ++b->count;
    }
    return 0;
}

static const item *batch_item(const run *r, const batch *b, int k)
{
    return &r->items[r->todo[b->first + k]];
}

/* nvcc writes a batch's cubins into DIR/batch<index>/, moved to DIR once
 * all are made: a cubin in DIR is always whole */
static pid_t start_batch(int index, void *user)
{
    const run *r = user;
    const batch *b = &r->batches[index];
    char opts[256], out[1100], log[1100];
    char inputs[MAX_BATCH][1100];
    snprintf(out, sizeof out, "%.1000s/batch%d", r->dir, index);
    snprintf(log, sizeof log, "%.1000s/batch%d.log", r->dir, index);
    mkdir(out, 0777);
    command_line_options(&batch_item(r, b, 0)->v, r->o->arch, opts, sizeof opts);
    const char *argv[MAX_ARGS];
    int n = 0;
    argv[n++] = r->o->nvcc;
    argv[n++] = "-cubin";
    argv[n++] = "--output-directory";
    argv[n++] = out;
    n += pit_cuda_split_options(opts, argv + n, PIT_CUDA_MAX_OPTIONS);
    for (int k = 0; k < b->count; ++k) {
        snprintf(inputs[k], sizeof inputs[k], "%.1000s/%s.cu", r->dir, batch_item(r, b, k)->digest);
        argv[n++] = inputs[k];
    }
    argv[n] = NULL;
    return pit_tool_spawn(argv, log);
}

static int move_cubins(const run *r, const batch *b, int index)
{
    char from[1200], to[1200];
    for (int k = 0; k < b->count; ++k) {
        const char *d = batch_item(r, b, k)->digest;
        snprintf(from, sizeof from, "%.1000s/batch%d/%s.cubin", r->dir, index, d);
        snprintf(to, sizeof to, "%.1000s/%s.cubin", r->dir, d);
        if (rename(from, to) != 0) return -1;
    }
    snprintf(from, sizeof from, "%.1000s/batch%d", r->dir, index);
    rmdir(from);
    return 0;
}

/* A batch fails where nvcc did, and where ptxas serialised a kernel's
 * wgmma's (correct but slow: pit-nvrtc-check fails on it too). */
static void batch_done(int index, int ok, void *user)
{
    run *r = user;
    const batch *b = &r->batches[index];
    char log[1100];
    snprintf(log, sizeof log, "%.1000s/batch%d.log", r->dir, index);
    char *text = pit_tool_read_text(log);
    int serialised = pit_cuda_wgmma_serialised(text) != NULL;
    free(text);
    if (ok && !serialised && move_cubins(r, b, index) == 0) return;
    ++r->failed;
    fprintf(stderr, TOOL ": FAILED: nvcc on %d variants of sm_%d%s:\n", b->count, r->o->arch,
            serialised ? " (ptxas serialised wgmma's)" : "");
    pit_tool_print_log(log, 60);
}

/* "90<TAB>DIR/<digest>.cubin<TAB>digest<TAB>variant" an item */
static int write_manifest(const run *r)
{
    char path[1100], label[PIT_CUDA_LABEL_MAX];
    snprintf(path, sizeof path, "%.1000s/sm_%d.manifest", r->o->out, r->o->arch);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < r->count; ++i)
        fprintf(f, "%d\t%s/%s.cubin\t%s\t%s\n", r->o->arch, r->dir, r->items[i].digest, r->items[i].digest,
                pit_cuda_variant_label(&r->items[i].v, label, sizeof label));
    return fclose(f);
}

static int compile_main(const options *o)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%.1000s/sm_%d", o->out, o->arch);
    mkdir(o->out, 0777);
    mkdir(dir, 0777);
    run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.dir = dir;
    pit_cuda_variant *v = pit_cuda_default_variants(o->arch, o->tiledb_dir, &r.count);
    if (!v) return 1;
    int failed = digest_items(&r, v) != 0 || pit_tool_write_sources(TOOL, dir) != 0 || plan_batches(&r) != 0;
    if (failed) fprintf(stderr, TOOL ": cannot write the sources to %s\n", dir);
    if (!failed) failed = pit_tool_run_jobs(r.nbatches, o->jobs, start_batch, batch_done, &r) != 0 || r.failed;
    if (!failed && write_manifest(&r) != 0) {
        fprintf(stderr, TOOL ": cannot write the manifest of sm_%d\n", o->arch);
        failed = 1;
    }
    if (!failed)
        printf(TOOL ": sm_%d: %d cubins, %d compiled now in %d nvcc runs\n", o->arch, r.count, r.ntodo, r.nbatches);
    free(r.items);
    free(r.todo);
    free(r.batches);
    free(v);
    return failed;
}

/* ---- embed ------------------------------------------------------------------ */
/* One manifest line's table row into t, its cubin into f; 0, or -1. */
static int embed_line(FILE *f, FILE *t, char *line, int index)
{
    char *field[4];
    field[0] = line;
    for (int i = 1; i < 4; ++i) {
        field[i] = field[i - 1] ? strchr(field[i - 1], '\t') : NULL;
        if (field[i]) *field[i]++ = 0;
    }
    unsigned long long d0 = 0, d1 = 0;
    if (!field[3] || strlen(field[2]) != 32 || sscanf(field[2], "%16llx%16llx", &d0, &d1) != 2) return -1;
    if (pit_tool_embed_file(f, "pit_cuda_bin_", index, field[1]) != 0) return -1;
    fprintf(t, "    {%d, ", atoi(field[0]));
    pit_tool_c_string(t, field[3]);
    fprintf(t, ", {0x%016llxull, 0x%016llxull}, pit_cuda_bin_%d, pit_cuda_bin_%d_end},\n", d0, d1, index, index);
    return 0;
}

/* Writes OUT.c.tmp, renamed to OUT.c when whole: a failed embed leaves no
 * table that a later build would take for done. */
static int embed_main(const char *out, int nman, char **manifests)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%.1000s.tmp", out);
    FILE *f = fopen(tmp, "w");
    char *table = NULL;
    size_t table_len = 0;
    FILE *t = f ? open_memstream(&table, &table_len) : NULL;
    if (!t) {
        fprintf(stderr, TOOL ": cannot write %s\n", tmp);
        if (f) fclose(f);
        return 1;
    }
    fprintf(f, "/* generated by " TOOL " embed: do not edit */\n#include \"cuda_prebuilt.h\"\n\n");
    int count = 0, bad = 0;
    for (int m = 0; m < nman && !bad; ++m) {
        char line[2048];
        FILE *in = fopen(manifests[m], "r");
        if (!in) {
            fprintf(stderr, TOOL ": cannot read %s\n", manifests[m]);
            bad = 1;
            break;
        }
        while (!bad && fgets(line, sizeof line, in)) {
            line[strcspn(line, "\n")] = 0;
            bad = embed_line(f, t, line, count++) != 0;
            if (bad) fprintf(stderr, TOOL ": %s: bad line: %s\n", manifests[m], line);
        }
        fclose(in);
    }
    fclose(t);
    /* one row more than the count: a C array is never empty */
    fprintf(f, "\nstatic const pit_cuda_prebuilt table[] = {\n%s    {0, \"\", {0, 0}, 0, 0}};\n\n", table ? table : "");
    fprintf(f, "const pit_cuda_prebuilt *pit_cuda_prebuilt_table(int *count)\n{\n    *count = %d;\n    return table;\n}\n",
            count);
    free(table);
    bad = fclose(f) != 0 || bad;
    if (!bad && rename(tmp, out) != 0) {
        fprintf(stderr, TOOL ": cannot write %s\n", out);
        bad = 1;
    }
    if (bad) remove(tmp);
    return bad;
}

/* ---- main -------------------------------------------------------------------- */
static int list_main(int arch, const char *tiledb_dir)
{
    int n = 0;
    pit_cuda_variant *v = pit_cuda_default_variants(arch, tiledb_dir, &n);
    if (!v) return 1;
    for (int i = 0; i < n; ++i) {
        char label[PIT_CUDA_LABEL_MAX];
        printf("%s\n", pit_cuda_variant_label(&v[i], label, sizeof label));
    }
    free(v);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: " TOOL " list --arch N --tiledb-dir DIR\n"
                    "       " TOOL " compile --nvcc NVCC --arch N --tiledb-dir DIR --out DIR [-j N] [--batch N]\n"
                    "       " TOOL " embed OUT.c MANIFEST...\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "embed")) return embed_main(argv[2], argc - 3, argv + 3);
    if (argc < 2 || (strcmp(argv[1], "list") && strcmp(argv[1], "compile"))) return usage();
    options o = {NULL, NULL, NULL, 0, 1, 32};
    for (int i = 2; i < argc; ++i) {
        if (!strcmp(argv[i], "--nvcc") && i + 1 < argc) o.nvcc = argv[++i];
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc) o.arch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tiledb-dir") && i + 1 < argc) o.tiledb_dir = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) o.out = argv[++i];
        else if (!strcmp(argv[i], "-j") && i + 1 < argc) o.jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) o.batch = atoi(argv[++i]);
        else return usage();
    }
    if (o.arch <= 0 || !o.tiledb_dir) return usage();
    if (!strcmp(argv[1], "list")) return list_main(o.arch, o.tiledb_dir);
    if (!o.nvcc || !o.out || o.jobs < 1 || o.batch < 1 || o.batch > MAX_BATCH) return usage();
    return compile_main(&o);
}
