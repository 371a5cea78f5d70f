/*
 * test_opencl_direct.c - tests the OpenCL plug-in's table directly, without
 * core: a tiny pit_host of its own, pit_backend_register linked in.
 *
 * For every shape x sparsity pattern x dtype it runs detect with several
 * micro-tile candidates at once and checks that each index names exactly the
 * non-zero micro-tiles, once each; then matmul_sparse (axis K and M, grid from
 * max_entries and worst-case grid) and matmul_dense, each into a C poisoned
 * with NaN, compared with a double CPU reference by relative norm error
 * (f32 1e-4, f16/bf16 1e-2). Padding between rows of C must stay poisoned.
 * u8 (bool) masks go through detection, sddmm, softmax and its backward the
 * same way.
 *
 * The cases of each operator family live in direct_<family>.c; this file
 * holds the plumbing checks (events, program build errors, wrapped queues)
 * and runs them all. The disk cache (core's, through the host) is tested
 * through the API: tests/test_cache.c, tests/test_kernel_cache.sh.
 *
 * Usage: test_opencl_direct [-v]
 */
#include <string.h>

#include "direct.h"

static void test_compile_error(void)
{
    cl_program prog = NULL;
    pit_status st = ocl_program_get(ctx, "pit_matmul", "-DDT=7", &prog);
    EXPECT(st == PIT_ERR_COMPILE && strstr(g_error, "clBuildProgram") &&
               strstr(g_error, "unknown DT"),
           "bad defines -> %d (%s)", (int)st, g_error);
}

/* A queue the caller owns can be wrapped, used and released again. */
static void test_stream_wrap(void)
{
    ocl_ctx *c = ctx;
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(c->context, c->device, 0, &err);
    EXPECT(err == CL_SUCCESS, "clCreateCommandQueue -> %d", err);
    void *ws = NULL;
    OK(be->stream_wrap(ctx, q, &ws));
    void *mem = NULL;
    uint32_t back[4] = {0};
    OK(be->mem_alloc(ctx, 16, &mem));
    OK(be->mem_fill32(ctx, ws, mem, 0, 0x12345678u, 16));
    OK(be->mem_read(ctx, ws, mem, 0, back, 16));
    EXPECT(back[0] == 0x12345678u && back[3] == 0x12345678u, "fill through wrapped queue");
    OK(be->stream_synchronize(ctx, ws));
    be->stream_destroy(ctx, ws);
    be->mem_free(ctx, mem);
    /* Still ours: pit released only its own reference. */
    EXPECT(clFinish(q) == CL_SUCCESS, "wrapped queue released too often");
    clReleaseCommandQueue(q);
}

static void test_events(void)
{
    pit_event *e0 = NULL, *e1 = NULL;
    OK(be->event_record(ctx, stream, &e0));
    OK(be->event_record(ctx, stream, &e1));
    double ms = -1;
    OK(be->event_elapsed_ms(ctx, e0, e1, &ms));
    EXPECT(ms >= 0, "elapsed %g ms", ms);
    be->event_destroy(ctx, e0);
    be->event_destroy(ctx, e1);
}

int main(int argc, char **argv)
{
    g_verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    if (argc > 1 && strcmp(argv[1], "-vv") == 0)
        g_verbose = 2;
    be = pit_backend_register(&g_host);
    if (!be || be->abi_version != PIT_BACKEND_ABI_VERSION) {
        fprintf(stderr, "pit_backend_register failed\n");
        return 1;
    }
    pit_status st = be->init(&g_host);
    if (st == PIT_ERR_NO_DEVICE) {
        printf("SKIP: %s\n", g_error);
        return 77;
    }
    OK(st);
    int count = 0;
    OK(be->device_count(&count));
    pit_device_info info;
    OK(be->device_info(0, &info));
    printf("device 0 of %d: %s | %s | %s | driver %s | %llu MiB | %d CUs | f16 %d (storage %d) "
           "bf16 %d\n",
           count, info.backend, info.vendor, info.name, info.driver_version,
           (unsigned long long)(info.global_mem_bytes >> 20), info.compute_units, info.has_f16,
           info.has_f16_storage, info.has_bf16);
    EXPECT(strcmp(info.backend, "opencl") == 0 && info.name[0] && info.arch[0],
           "device_info incomplete");
    EXPECT(info.has_f16_storage && info.has_bf16,
           "every OpenCL device stores f16 and bf16 (vload_half, ushort words)");
    OK(be->context_create(0, &(pit_switches){{0}}, &ctx));
    OK(be->stream_create(ctx, &stream));
    printf("dense GEMM: %s\n", be->dense_name(ctx));

    test_events();
    test_errors();
    test_compile_error();
    test_stream_wrap();

    static const shape shapes[] = {
        {1, 64, 128, 48, 0, 0},  {1, 33, 100, 7, 3, 5},  {1, 1, 1, 1, 0, 0},
        {1, 100, 200, 33, 2, 1}, {2, 40, 96, 24, 1, 3},  {1, 128, 256, 64, 0, 0},
    };
    const pit_dtype dts[] = {PIT_F32, PIT_F16, PIT_BF16};
    for (size_t d = 0; d < 3; ++d) {
        int before = g_failures;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
            for (int p = 0; p < PAT_COUNT; ++p)
                run_case(&shapes[s], p, dts[d]);
        printf("%s: %s\n", dts[d] == PIT_F32 ? "f32" : dts[d] == PIT_F16 ? "f16" : "bf16",
               g_failures == before ? "ok" : "FAILED");
        fflush(stdout);
    }
    test_mask_errors();
    int before_mask = g_failures;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (int p = 0; p < PAT_COUNT; ++p)
            for (int shared = 0; shared <= (shapes[s].batch > 1); ++shared)
                run_mask_case(&shapes[s], p, shared);
    printf("u8 masks: %s\n", g_failures == before_mask ? "ok" : "FAILED");
    fflush(stdout);

    be->stream_destroy(ctx, stream);
    be->context_destroy(ctx);
    be->shutdown();
    printf("%d checks, %d failures\n", g_checks, g_failures);
    return g_failures ? 1 : 0;
}
