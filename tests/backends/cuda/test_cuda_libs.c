/*
 * test_cuda_libs.c - the CUDA plug-in's run-time loading of NVRTC, cuBLAS
 * and cuSPARSE (backends/cuda/cuda_libs.h), without a driver or a GPU. One
 * mode a process: a library is loaded once per process.
 *
 *   test_cuda_libs load           the default search finds all three, every
 *                                 call pit makes resolves, and calls reach the
 *                                 library (version, status names)
 *   test_cuda_libs missing DIR    PIT_CUDA_LIB_DIRS=DIR (an empty folder):
 *                                 each load fails, naming every soname and DIR,
 *                                 and a second load answers the same
 *   test_cuda_libs dirs DIR       PIT_CUDA_LIB_DIRS=EMPTY:DIR: NVRTC comes
 *                                 from DIR
 *   test_cuda_libs driver         a driver of CUDA 11 rules out every cuBLAS
 *                                 pit knows, and says so
 */
#include <cublas_v2.h>
#include <cusparse.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_libs.h"
#include "test_check.h"

static const char *const sonames[PIT_CUDA_LIB_COUNT][2] = {
    {"libnvrtc.so.13", "libnvrtc.so.12"}, {"libcublas.so.13", "libcublas.so.12"}, {"libcusparse.so.12", NULL}};

static void check_loads(void)
{
    for (int lib = 0; lib < PIT_CUDA_LIB_COUNT; ++lib) {
        const char *why = NULL;
        int r = pit_cuda_lib_load((pit_cuda_lib)lib, 0, &why);
        const char *path = pit_cuda_lib_path((pit_cuda_lib)lib);
        CHECK(r == 0, "%s: %s", pit_cuda_lib_name((pit_cuda_lib)lib), why);
        CHECK(path && path[0] == '/' && access(path, R_OK) == 0, "%s from '%s'", pit_cuda_lib_name((pit_cuda_lib)lib),
              path ? path : "(null)");
        printf("%s: %s\n", pit_cuda_lib_name((pit_cuda_lib)lib), path ? path : "(not loaded)");
    }
    if (failures) return;
    int major = 0, minor = 0;
    CHECK(nvrtcVersion(&major, &minor) == NVRTC_SUCCESS && major >= 12, "nvrtcVersion: %d.%d", major, minor);
    CHECK(!strcmp(nvrtcGetErrorString(NVRTC_ERROR_COMPILATION), "NVRTC_ERROR_COMPILATION"), "%s",
          nvrtcGetErrorString(NVRTC_ERROR_COMPILATION));
    CHECK(!strcmp(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED"), "%s",
          cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED));
    CHECK(!strcmp(cusparseGetErrorName(CUSPARSE_STATUS_INVALID_VALUE), "CUSPARSE_STATUS_INVALID_VALUE"), "%s",
          cusparseGetErrorName(CUSPARSE_STATUS_INVALID_VALUE));
    /* a call with arguments of every kind the table passes: a program, its log */
    nvrtcProgram prog = NULL;
    const char *src = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] = 1.0f; }";
    CHECK(nvrtcCreateProgram(&prog, src, "k.cu", 0, NULL, NULL) == NVRTC_SUCCESS && prog, "nvrtcCreateProgram");
    size_t log_size = 0;
    CHECK(prog && nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS, "nvrtcGetProgramLogSize");
    CHECK(prog && nvrtcDestroyProgram(&prog) == NVRTC_SUCCESS && !prog, "nvrtcDestroyProgram");
}

/* Each library fails, its message naming every soname and the folder. */
static void check_missing(const char *dir)
{
    for (int lib = 0; lib < PIT_CUDA_LIB_COUNT; ++lib) {
        const char *why = NULL, *again = NULL;
        int r = pit_cuda_lib_load((pit_cuda_lib)lib, 0, &why);
        CHECK(r != 0, "%s loaded from an empty PIT_CUDA_LIB_DIRS", pit_cuda_lib_name((pit_cuda_lib)lib));
        CHECK(why && strstr(why, "not found (searched PIT_CUDA_LIB_DIRS: ") && strstr(why, dir), "%s",
              why ? why : "(null)");
        for (int i = 0; i < 2 && sonames[lib][i]; ++i)
            CHECK(why && strstr(why, sonames[lib][i]), "'%s' does not name %s", why ? why : "(null)",
                  sonames[lib][i]);
        CHECK(pit_cuda_lib_path((pit_cuda_lib)lib) == NULL, "a path for a library not loaded");
        CHECK(pit_cuda_lib_load((pit_cuda_lib)lib, 0, &again) != 0 && again && why && !strcmp(again, why),
              "a second load answers '%s'", again ? again : "(null)");
        printf("%s: %s\n", pit_cuda_lib_name((pit_cuda_lib)lib), why ? why : "(null)");
    }
}

static void check_dirs(const char *dir)
{
    const char *why = NULL;
    CHECK(pit_cuda_lib_load(PIT_CUDA_NVRTC, 0, &why) == 0, "%s", why);
    const char *path = pit_cuda_lib_path(PIT_CUDA_NVRTC);
    size_t n = strlen(dir);
    CHECK(path && !strncmp(path, dir, n) && path[n] == '/', "NVRTC from '%s', not from %s", path ? path : "(null)",
          dir);
    printf("NVRTC: %s\n", path ? path : "(not loaded)");
}

static void check_driver_limit(void)
{
    const char *why = NULL;
    CHECK(pit_cuda_lib_load(PIT_CUDA_CUBLAS, 11, &why) != 0, "a cuBLAS loaded for a CUDA 11 driver");
    CHECK(why && strstr(why, "libcublas.so.13, libcublas.so.12: none is for CUDA 11 or older"), "%s",
          why ? why : "(null)");
    printf("cuBLAS: %s\n", why ? why : "(null)");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "load") && argc == 2) check_loads();
    else if (!strcmp(mode, "missing") && argc == 3) check_missing(argv[2]);
    else if (!strcmp(mode, "dirs") && argc == 3) check_dirs(argv[2]);
    else if (!strcmp(mode, "driver") && argc == 2) check_driver_limit();
    else {
        fprintf(stderr, "usage: %s load | missing DIR | dirs DIR | driver\n", argv[0]);
        return 2;
    }
    printf("%s: %s\n", mode, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
