/*
 * nvrtc_check.c - pit-nvrtc-check: compiles every CUDA kernel variant of the
 * one variant table (cuda_kernels.c) with NVRTC for sm_70, sm_80 and sm_90,
 * on threads, and fails on any error and on any kernel whose wgmma's ptxas
 * serialised (correct but slow, so only a compile log shows it). Needs no
 * driver and no GPU (CI). NVRTC is found as the plug-in finds it
 * (cuda_libs.h): PIT_CUDA_LIB_DIRS picks the folder.
 *
 *   pit-nvrtc-check [-j N] [-a ARCH]... [-k NAME] [-v]
 * -k keeps the variants of the kernels whose entry point contains NAME
 * ("pit_op_moe_act": one kernel's variants, while it is being written).
 * sm_70 is dropped by NVRTC 13; then the oldest architecture it has below
 * sm_80 stands in, so the CUDA-core (pre-tensor-core) paths stay checked.
 */
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_compile.h"
#include "cuda_libs.h"

#define MAX_JOBS 64
#define MAX_ARCHS 8

typedef struct job {
    pit_cuda_variant v;
    int arch;
    int failed;
    char *log;
} job;

typedef struct job_list {
    job *jobs;
    int count;
    int arch;
    int next; /* next job to take, under lock */
    pthread_mutex_t lock;
} job_list;

/* One job a variant of arch whose entry point contains `only` (NULL: every
 * variant); 0 when out of memory. */
static int fill_jobs(job_list *l, int arch, const char *only)
{
    int n = 0, kept = 0;
    pit_cuda_variant *v = pit_cuda_variant_list(arch, &n);
    l->jobs = v && n ? calloc((size_t)n, sizeof *l->jobs) : NULL;
    for (int i = 0; l->jobs && i < n; ++i) {
        if (only && !strstr(pit_cuda_kernel_name(v[i].kind), only)) continue;
        l->jobs[kept].v = v[i];
        l->jobs[kept++].arch = arch;
    }
    l->count = l->jobs ? kept : 0;
    free(v);
    return l->jobs != NULL;
}

static void *worker(void *arg)
{
    job_list *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->lock);
        int i = l->next++;
        pthread_mutex_unlock(&l->lock);
        if (i >= l->count) return NULL;
        job *j = &l->jobs[i];
        char *cubin = NULL;
        size_t size = 0;
        j->failed = pit_cuda_compile(&j->v, j->arch, &cubin, &size, &j->log) != 0 ||
                    pit_cuda_wgmma_serialised(j->log) != NULL;
        free(cubin);
    }
}

static int nvrtc_has_arch(int arch)
{
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return 0;
    int *archs = calloc((size_t)n, sizeof *archs);
    int found = 0;
    if (archs && nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS)
        for (int i = 0; i < n; ++i) found |= archs[i] == arch;
    free(archs);
    return found;
}

/* sm_70 when NVRTC has it, else its oldest architecture below sm_80. */
static int pre_tensor_core_arch(void)
{
    if (nvrtc_has_arch(70)) return 70;
    for (int a = 72; a < 80; ++a)
        if (nvrtc_has_arch(a)) return a;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > MAX_JOBS ? MAX_JOBS : (int)n;
}

int main(int argc, char **argv)
{
    int njobs = default_jobs(), verbose = 0, narchs = 0;
    int archs[MAX_ARCHS];
    const char *only = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-j") && i + 1 < argc) njobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-a") && i + 1 < argc && narchs < MAX_ARCHS) archs[narchs++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-k") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else {
            fprintf(stderr, "usage: %s [-j N] [-a ARCH]... [-k NAME] [-v]\n", argv[0]);
            return 2;
        }
    }
    if (njobs < 1) njobs = 1;
    if (njobs > MAX_JOBS) njobs = MAX_JOBS;
    const char *why = NULL;
    if (pit_cuda_lib_load(PIT_CUDA_NVRTC, 0, &why) != 0) {
        fprintf(stderr, "pit-nvrtc-check: no NVRTC: %s\n", why);
        return 1;
    }
    printf("NVRTC: %s\n", pit_cuda_lib_path(PIT_CUDA_NVRTC));
    if (narchs == 0) {
        int old = pre_tensor_core_arch();
        if (old != 70) printf("sm_70: not supported by this NVRTC; sm_%d stands in for it\n", old);
        if (old) archs[narchs++] = old;
        archs[narchs++] = 80;
        archs[narchs++] = 90;
    }
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);

    int failures = 0, total = 0;
    double t0 = now_s();
    for (int a = 0; a < narchs; ++a) {
        job_list l;
        memset(&l, 0, sizeof l);
        l.arch = archs[a];
        pthread_mutex_init(&l.lock, NULL);
        if (!fill_jobs(&l, archs[a], only)) {
            fprintf(stderr, "pit-nvrtc-check: no variants for sm_%d (out of memory?)\n", archs[a]);
            return 1;
        }
        pthread_t threads[MAX_JOBS];
        double ta = now_s();
        for (int t = 0; t < njobs; ++t) pthread_create(&threads[t], NULL, worker, &l);
        for (int t = 0; t < njobs; ++t) pthread_join(threads[t], NULL);
        int failed = 0;
        for (int i = 0; i < l.count; ++i) {
            job *j = &l.jobs[i];
            char defines[512];
            pit_cuda_variant_defines(&j->v, defines, sizeof defines);
            if (j->failed) {
                ++failed;
                printf("FAIL sm_%d %s %s\n%s\n", j->arch, pit_cuda_kernel_name(j->v.kind), defines,
                       j->log ? j->log : "(no log)");
            } else if (verbose) {
                printf("ok   sm_%d %s %s\n", j->arch, pit_cuda_kernel_name(j->v.kind), defines);
            }
            free(j->log);
        }
        printf("sm_%d: %d variants, %d failed, %.1f s\n", archs[a], l.count, failed, now_s() - ta);
        failures += failed;
        total += l.count;
        free(l.jobs);
        pthread_mutex_destroy(&l.lock);
    }
    printf("NVRTC %d.%d: %d variants compiled, %d failed, %.1f s on %d threads\n", major, minor, total,
           failures, now_s() - t0, njobs);
    return failures ? 1 : 0;
}
