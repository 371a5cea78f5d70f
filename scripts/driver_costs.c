/*
 * scripts/driver_costs.c - a lab program for the GPU machine (not shipped):
 * the host time of each CUDA driver call a settled pit call makes, alone,
 * so that a call's host time (scripts/decode_host.c) splits into the
 * driver's share and pit's own. Each call is timed over 2000 repetitions
 * (a synchronisation every 100, so the queue never fills), median of 5
 * such runs, microseconds a call:
 *   push+pop    cuCtxPushCurrent + cuCtxPopCurrent
 *   alloc+free  cuMemAllocAsync (64 KB) + cuMemFreeAsync on the stream
 *   memset      cuMemsetD32Async of 256 words
 *   launch      cuLaunchKernel of an empty kernel taking a 256-byte struct
 *   event       cuEventRecord
 *
 *   cc -O2 -I/usr/local/cuda/include scripts/driver_costs.c -L/usr/local/cuda/lib64/stubs -lcuda -o driver_costs
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 2000
#define RUNS 5

static const char ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                          ".visible .entry empty(.param .align 8 .b8 args[256]) { ret; }\n";

static CUstream stream;
static CUfunction empty;
static CUdeviceptr buf;
static CUevent event;
static CUcontext ctx;

static int check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return 1;
    const char *name = NULL;
    cuGetErrorName(r, &name);
    fprintf(stderr, "%s: %s\n", what, name ? name : "?");
    return 0;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int push_pop(void)
{
    CUcontext old;
    return check(cuCtxPushCurrent(ctx), "push") && check(cuCtxPopCurrent(&old), "pop");
}

static int alloc_free(void)
{
    CUdeviceptr p;
    return check(cuMemAllocAsync(&p, 65536, stream), "alloc") && check(cuMemFreeAsync(p, stream), "free");
}

static int memset_words(void) { return check(cuMemsetD32Async(buf, 0, 256, stream), "memset"); }

static int launch(void)
{
    unsigned char args[256];
    memset(args, 0, sizeof args);
    void *params[] = {args};
    return check(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL), "launch");
}

static int record(void) { return check(cuEventRecord(event, stream), "event"); }

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* microseconds a call of fn: the median of RUNS runs of REPS calls */
static double per_call(int (*fn)(void))
{
    double t[RUNS];
    for (int r = 0; r < RUNS; ++r) {
        double busy = 0;
        for (int i = 0; i < REPS; i += 100) {
            double t0 = now_us();
            for (int j = 0; j < 100; ++j)
                if (!fn()) return -1;
            busy += now_us() - t0;
            if (!check(cuStreamSynchronize(stream), "sync")) return -1;
        }
        t[r] = busy / REPS;
    }
    qsort(t, RUNS, sizeof t[0], by_value);
    return t[RUNS / 2];
}

int main(void)
{
    CUdevice dev;
    CUmodule mod;
    if (!check(cuInit(0), "init") || !check(cuDeviceGet(&dev, 0), "device") ||
        !check(cuDevicePrimaryCtxRetain(&ctx, dev), "context") || !check(cuCtxSetCurrent(ctx), "current") ||
        !check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "stream") ||
        !check(cuModuleLoadData(&mod, ptx), "module") ||
        !check(cuModuleGetFunction(&empty, mod, "empty"), "function") ||
        !check(cuMemAlloc(&buf, 1024), "buffer") || !check(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "event"))
        return 1;
    const struct {
        const char *name;
        int (*fn)(void);
    } calls[] = {{"push+pop", push_pop}, {"alloc+free", alloc_free}, {"memset", memset_words},
                 {"launch", launch},     {"event", record}};
    printf("%-12s %8s\n", "driver call", "us");
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i) {
        double us = per_call(calls[i].fn);
        if (us < 0) return 1;
        printf("%-12s %8.2f\n", calls[i].name, us);
    }
    return 0;
}
