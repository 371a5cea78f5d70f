/*
 * test_hip_sparse.c - ctest hip_rocsparse_loader: the rocSPARSE baseline's
 * loader (hip_sparse.c) against the rocSPARSE installed where it runs, no
 * GPU needed. Passes when a librocsparse is found, every symbol pit uses
 * resolves, and the host-only descriptor calls accept pit's enum values and
 * give back what they were given, and the baseline entries refuse what they
 * must before touching a device; fails naming the symbol a library lacks (a
 * misspelt name fails here); exits 77 (SKIPPED), saying why, when no
 * rocSPARSE is installed (Debian: apt-get install librocsparse0).
 *
 * The kernels of the baseline (dense -> CSR, SpMM) need an AMD GPU: they are
 * covered by test_hip_direct on one.
 */
#include <stdio.h>
#include <string.h>

#include "hip_internal.h"
#include "test_plugin.h" /* tests/backends/cuda: the host services (no plug-in is loaded) */

/* hip_sparse.c makes a context's device current through hip_backend.c,
 * which this test does not link: no context is made here. */
pit_status pit_hip_push(pit_hip_ctx *c)
{
    (void)c;
    return PIT_ERR_INTERNAL;
}

void pit_hip_pop(void)
{
}

/* HIP keeps no disk cache: the cache entries stay NULL */
static const pit_host host = {PIT_BACKEND_ABI_VERSION, host_error, host_log, host_cache_dir, host_no_fault,
                                host_open_cache_entry, NULL, NULL, NULL};

static pit_tdesc matrix(pit_dtype dt, int64_t rows, int64_t cols)
{
    static float fake[4]; /* never read: these calls stop before any device work */
    pit_tdesc t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.strides[0] = cols;
    t.strides[1] = 1;
    t.mem = fake;
    return t;
}

/* The plug-in entries' own checks, made before any device work. */
static int entries(void)
{
    static const struct {
        const char *what;
        pit_status want;
        const char *says;
    } cases[] = {
        {"matmul, K of A and B differ", PIT_ERR_SHAPE_MISMATCH, "do not match"},
        {"matmul of i32", PIT_ERR_UNSUPPORTED_DTYPE, "dtype"},
        {"dense -> BSR 16x16", PIT_ERR_UNSUPPORTED, "BSR"},
        {"dense -> block 0", PIT_ERR_INVALID_ARGUMENT, "block"},
    };
    pit_tdesc A = matrix(PIT_F32, 4, 8), B = matrix(PIT_F32, 9, 3), C = matrix(PIT_F32, 4, 3);
    pit_tdesc I = matrix(PIT_I32, 4, 8);
    double conv = -1, comp = -1, ms = -1;
    int bad = 0;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); ++i) {
        last_error[0] = 0;
        pit_status got = i == 0   ? pit_hip_vendor_sparse_matmul(NULL, NULL, &A, &B, &C, &conv, &comp)
                         : i == 1 ? pit_hip_vendor_sparse_matmul(NULL, NULL, &I, &B, &C, &conv, &comp)
                         : i == 2 ? pit_hip_vendor_convert(NULL, NULL, &A, 16, &ms)
                                  : pit_hip_vendor_convert(NULL, NULL, &A, 0, &ms);
        int ok = got == cases[i].want && strstr(last_error, cases[i].says) != NULL;
        printf("%s %s: %d \"%s\"\n", ok ? "ok" : "FAIL", cases[i].what, (int)got, last_error);
        bad |= !ok;
    }
    const char *name = pit_hip_vendor_sparse_name(NULL);
    int ok = !strncmp(name, "rocSPARSE", 9);
    printf("%s name without a context: \"%s\"\n", ok ? "ok" : "FAIL", name);
    return bad || !ok;
}

int main(void)
{
    pit_hip_host = &host; /* also the shared baseline code's (cuda_baseline.h) host, through hip_shim.h */
    pit_status st = pit_hip_sparse_load();
    const char *lib = pit_hip_sparse_library();
    if (st != PIT_SUCCESS && !lib) {
        /* the reason must name the libraries looked for */
        if (st != PIT_ERR_UNSUPPORTED || !strstr(last_error, "librocsparse.so.0") ||
            !strstr(last_error, "librocsparse.so.1")) {
            printf("FAIL without rocSPARSE: status %d, \"%s\"; PIT_ERR_UNSUPPORTED naming the libraries expected\n",
                   (int)st, last_error);
            return 1;
        }
        printf("SKIPPED: %s\n", last_error);
        return SKIP;
    }
    if (st != PIT_SUCCESS) {
        printf("FAIL %s\n", last_error);
        return 1;
    }
    char report[2048];
    st = pit_hip_sparse_selfcheck(report, sizeof report);
    fputs(report, stdout);
    if (st != PIT_SUCCESS) {
        printf("FAIL %s\n", last_error);
        return 1;
    }
    if (entries()) return 1;
    printf("test_hip_sparse: OK\n");
    return 0;
}
