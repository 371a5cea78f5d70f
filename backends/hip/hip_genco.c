/*
 * hip_genco.c - pit-hip-genco, a build-time tool: compiles kernel variants
 * of the one variant table (backends/cuda/cuda_kernels.c) into AMD code
 * objects, and writes the C file that embeds them into libpit-hip.so.
 *
 *   pit-hip-genco compile --cc CLANG --arch gfx90a --out DIR [--all] [-j N]
 *                 [--cov 4]
 *       Writes the embedded kernel sources (exactly what hiprtc would get)
 *       to DIR/ARCH/, compiles each variant with
 *       CLANG -x hip --offload-arch=ARCH --cuda-device-only
 *             --no-gpu-bundle-output -nogpulib -nogpuinc -DPIT_HIP_BARE=1
 *       and lists "file<TAB>key" in DIR/ARCH.manifest. Without --all only
 *       the built-in subset (see builtin_variant) is compiled.
 *   pit-hip-genco embed OUT.c MANIFEST...
 *       Writes OUT.c: every code object by .incbin, and the lookup table.
 *
 * A failed compile prints the compiler's messages and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cuda_kernels.h"
#include "kernel_tools.h"

#define MAX_ARGS 64

typedef struct job {
    pit_cuda_variant v;
    char key[PIT_CUDA_LABEL_MAX];
} job;

typedef struct job_list {
    job *jobs;
    int count;
} job_list;

typedef struct options {
    const char *cc, *arch, *out, *cov;
    int all, jobs;
} options;

/* The subset built into the plug-in: every detection, helper and model
 * kernel with its mask in the data's dtype or u8 (bool), and the matmul variants of the
 * 2-stage, bk = 32, bn = 64 tiles (this includes the dense tile of
 * hip_dense.c). Other variants go through hiprtc at run time. */
static int builtin_variant(const pit_cuda_variant *v)
{
    switch (v->kind) {
    case PIT_CUDA_MATMUL: return v->tile.bk == 32 && v->tile.stages == 2 && v->tile.bn == 64;
    case PIT_CUDA_OP_ATTENTION: /* detection inside the kernel is CUDA's (ops/attention.c) */
        return (v->op_param[3] == (int)v->dtype || v->op_param[3] == PIT_U8) && v->op_param[4] == 0;
    case PIT_CUDA_OP_SDDMM:
    case PIT_CUDA_OP_SOFTMAX:
    case PIT_CUDA_OP_SOFTMAX_BWD:
    case PIT_CUDA_OP_ATTN_EX:
    case PIT_CUDA_OP_ATTN_EX_DQ:
    case PIT_CUDA_OP_ATTN_EX_DKV: /* mask dtype codes = pit_dtype */
        return v->op_param[3] == (int)v->dtype || v->op_param[3] == PIT_U8;
    default: return 1;
    }
}

/* One job a variant it builds (all, or the built-in subset) of the
 * matrix-core table (80: the tensor-core variants too); 0 when out of memory. */
static int fill_jobs(job_list *l, int all)
{
    int n = 0;
    pit_cuda_variant *v = pit_cuda_variant_list(80, &n);
    l->jobs = v && n ? calloc((size_t)n, sizeof *l->jobs) : NULL;
    l->count = 0;
    for (int i = 0; l->jobs && i < n; ++i) {
        if (!all && !builtin_variant(&v[i])) continue;
        job *j = &l->jobs[l->count++];
        j->v = v[i];
        pit_cuda_variant_label(&v[i], j->key, sizeof j->key);
    }
    free(v);
    return l->jobs != NULL;
}

typedef struct run {
    const options *o;
    const char *dir;
    const job_list *l;
} run;

static pid_t start_job(int index, void *user)
{
    const run *r = user;
    const options *o = r->o;
    const job *j = &r->l->jobs[index];
    char arch[64], src[1024], out[1024], log[1024], cov[64], defines[512];
    snprintf(arch, sizeof arch, "--offload-arch=%s", o->arch);
    /* a folder name too long for the paths: no job (a failure, not a truncated path) */
    if ((size_t)snprintf(src, sizeof src, "%.900s/%.60s.cu", r->dir, pit_cuda_kernel_name(j->v.kind)) >= sizeof src ||
        (size_t)snprintf(out, sizeof out, "%s/%d.co", r->dir, index) >= sizeof out ||
        (size_t)snprintf(log, sizeof log, "%s/%d.log", r->dir, index) >= sizeof log) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(cov, sizeof cov, "-mcode-object-version=%s", o->cov);
    pit_cuda_variant_defines(&j->v, defines, sizeof defines);
    const char *argv[MAX_ARGS];
    int n = 0;
    const char *fixed[] = {o->cc, "-x", "hip", arch, "--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib",
                           "-nogpuinc", "-O3", "-std=c++17", cov, "-DPIT_HIP_BARE=1"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; ++i) argv[n++] = fixed[i];
    n += pit_cuda_split_options(defines, argv + n, MAX_ARGS - 4 - n);
    argv[n++] = src;
    argv[n++] = "-o";
    argv[n++] = out;
    argv[n] = NULL;
    return pit_tool_spawn(argv, log);
}

static void job_done(int index, int ok, void *user)
{
    const run *r = user;
    if (ok) return;
    char path[1024];
    fprintf(stderr, "pit-hip-genco: FAILED %s\n", r->l->jobs[index].key);
    snprintf(path, sizeof path, "%.900s/%d.log", r->dir, index);
    pit_tool_print_log(path, 40);
}

static int write_manifest(const options *o, const char *dir, const job_list *l)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.manifest", o->out, o->arch);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int i = 0; i < l->count; ++i) fprintf(f, "%s/%d.co\t%s\n", dir, i, l->jobs[i].key);
    return fclose(f);
}

static int compile_main(const options *o)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", o->out, o->arch);
    mkdir(o->out, 0777);
    mkdir(dir, 0777);
    job_list l;
    if (!fill_jobs(&l, o->all)) {
        fprintf(stderr, "pit-hip-genco: out of memory\n");
        return 1;
    }
    if (pit_tool_write_sources("pit-hip-genco", dir)) {
        free(l.jobs);
        return 1;
    }
    run r = {o, dir, &l};
    int failed = pit_tool_run_jobs(l.count, o->jobs, start_job, job_done, &r);
    printf("pit-hip-genco: %s: %d code objects with %s, %d failed\n", o->arch, l.count - failed, o->cc, failed);
    if (!failed && write_manifest(o, dir, &l)) {
        fprintf(stderr, "pit-hip-genco: cannot write the manifest of %s\n", o->arch);
        failed = 1;
    }
    free(l.jobs);
    return failed ? 1 : 0;
}

/* ---- embed ---------------------------------------------------------------- */
/* "DIR/gfx90a.manifest" -> "gfx90a" */
static void manifest_arch(const char *path, char *arch, size_t size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strcspn(base, ".");
    snprintf(arch, size, "%.*s", (int)n, base);
}

static int embed_main(const char *out, int nman, char **manifests)
{
    FILE *f = fopen(out, "w");
    if (!f) return 1;
    fprintf(f, "/* generated by pit-hip-genco embed: do not edit */\n#include \"hip_code_objects.h\"\n\n");
    int count = 0;
    char *table = NULL;
    size_t table_len = 0;
    FILE *t = open_memstream(&table, &table_len);
    for (int m = 0; m < nman; ++m) {
        char arch[64], line[2048];
        manifest_arch(manifests[m], arch, sizeof arch);
        FILE *in = fopen(manifests[m], "r");
        if (!in) {
            fprintf(stderr, "pit-hip-genco: cannot read %s\n", manifests[m]);
            return 1;
        }
        while (fgets(line, sizeof line, in)) {
            line[strcspn(line, "\n")] = 0;
            char *tab = strchr(line, '\t');
            if (!tab) continue;
            *tab = 0;
            if (pit_tool_embed_file(f, "pit_hip_co_", count, line)) {
                fprintf(stderr, "pit-hip-genco: cannot embed %s (a quote or backslash in its path)\n", line);
                return 1;
            }
            fprintf(t, "    {\"%s\", ", arch);
            pit_tool_c_string(t, tab + 1);
            fprintf(t, ", pit_hip_co_%d, pit_hip_co_%d_end},\n", count, count);
            ++count;
        }
        fclose(in);
    }
    fclose(t);
    fprintf(f, "\nconst pit_hip_code_object pit_hip_code_objects[] = {\n%s    {0, 0, 0, 0}};\n", table ? table : "");
    fprintf(f, "const int pit_hip_code_object_count = %d;\n", count);
    free(table);
    return fclose(f) != 0;
}

/* The variants compile would build, one key a line. */
static int list_main(int all)
{
    job_list l;
    if (!fill_jobs(&l, all)) {
        fprintf(stderr, "pit-hip-genco: out of memory\n");
        return 1;
    }
    for (int i = 0; i < l.count; ++i) printf("%s\n", l.jobs[i].key);
    free(l.jobs);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: pit-hip-genco compile --cc CLANG --arch GFX --out DIR [--all] [-j N] [--cov V]\n"
                    "       pit-hip-genco list [--all]\n"
                    "       pit-hip-genco embed OUT.c MANIFEST...\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "embed")) return embed_main(argv[2], argc - 3, argv + 3);
    if (argc >= 2 && !strcmp(argv[1], "list")) return list_main(argc >= 3 && !strcmp(argv[2], "--all"));
    if (argc < 2 || strcmp(argv[1], "compile")) return usage();
    options o = {NULL, NULL, NULL, "4", 0, 2};
    for (int i = 2; i < argc; ++i) {
        if (!strcmp(argv[i], "--cc") && i + 1 < argc) o.cc = argv[++i];
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc) o.arch = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) o.out = argv[++i];
        else if (!strcmp(argv[i], "--cov") && i + 1 < argc) o.cov = argv[++i];
        else if (!strcmp(argv[i], "-j") && i + 1 < argc) o.jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--all")) o.all = 1;
        else return usage();
    }
    if (!o.cc || !o.arch || !o.out || o.jobs < 1) return usage();
    return compile_main(&o);
}
