/*
 * test_cuda_prebuilt.c - the CUDA plug-in's built-in cubins (the table
 * PIT_CUDA_PRECOMPILE builds into libpit-cuda.so, cuda_prebuilt.h), without
 * a driver or a GPU: the plug-in's own generated table is linked here.
 *
 *   test_cuda_prebuilt TILEDB_DIR ARCH...   the table is exactly the default
 *       variants of each ARCH (prebuilt_defaults.h): each has one entry,
 *       found by the run-time lookup with the inputs the run-time path
 *       computes (pit_cuda_key_inputs of the disk cache's key, where NVRTC
 *       loads), holding a CUDA ELF that names the kernel's entry; every
 *       entry is such a variant. Lists
 *       the entries and their sizes. Variants not built in (unaligned
 *       operands, another architecture, other inputs) find nothing, so
 *       they go to the disk cache and NVRTC.
 *   test_cuda_prebuilt --none               the table is empty (the option
 *       is off).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_compile.h"
#include "cuda_libs.h"
#include "cuda_prebuilt.h"
#include "prebuilt_defaults.h"
#include "test_check.h"

#define EM_CUDA 190

/* name and its NUL among the bytes d[size] (a string table's entry) */
static int holds_name(const unsigned char *d, size_t size, const char *name)
{
    size_t n = strlen(name) + 1;
    for (size_t i = 0; i + n <= size; ++i)
        if (!memcmp(d + i, name, n)) return 1;
    return 0;
}

/* a 64-bit little-endian ELF for EM_CUDA that names the kernel's entry */
static int is_cubin(const pit_cuda_prebuilt *e, const pit_cuda_variant *v)
{
    const unsigned char *d = e->data;
    size_t size = (size_t)(e->end - e->data);
    return size > 64 && !memcmp(d, "\x7f" "ELF", 4) && d[4] == 2 && d[5] == 1 && (d[18] | d[19] << 8) == EM_CUDA &&
           holds_name(d, size, pit_cuda_kernel_name(v->kind));
}

/* The inputs as the run-time path has them: the disk cache's key past its
 * NVRTC line (NVRTC loaded), else as the build had them. */
static char *runtime_inputs(const pit_cuda_variant *v, int arch, int have_nvrtc)
{
    if (!have_nvrtc) return pit_cuda_variant_inputs(v, arch);
    char *key = pit_cuda_variant_key(v, arch);
    char *inputs = key ? strdup(pit_cuda_key_inputs(key)) : NULL;
    free(key);
    return inputs;
}

/* What must find nothing: v with unaligned operands, v on sm_86, v with
 * inputs of another text. */
static void check_misses(const pit_cuda_prebuilt *table, int count, const pit_cuda_variant *v, int arch,
                         const char *inputs)
{
    char label[PIT_CUDA_LABEL_MAX];
    pit_cuda_variant_label(v, label, sizeof label);
    CHECK(!pit_cuda_prebuilt_find(table, count, 86, label, inputs), "sm_86 took sm_%d's %s", arch, label);
    size_t n = strlen(inputs);
    char *other = malloc(n + 2);
    if (other) {
        memcpy(other, inputs, n);
        memcpy(other + n, " ", 2);
        CHECK(!pit_cuda_prebuilt_find(table, count, arch, label, other), "other inputs took %s", label);
        free(other);
    }
    if (v->kind != PIT_CUDA_MATMUL) return;
    pit_cuda_variant u = *v;
    u.b_vec = 0;
    u.c_vec = 0;
    char *uin = pit_cuda_variant_inputs(&u, arch);
    pit_cuda_variant_label(&u, label, sizeof label);
    CHECK(uin && !pit_cuda_prebuilt_find(table, count, arch, label, uin), "unaligned %s is built in", label);
    free(uin);
}

/* Each default variant of arch has its entry; returns how many. */
static int check_arch(const pit_cuda_prebuilt *table, int count, int arch, const char *tiledb_dir, int have_nvrtc)
{
    int n = 0, found = 0, misses_checked = 0;
    size_t bytes = 0;
    pit_cuda_variant *v = pit_cuda_default_variants(arch, tiledb_dir, &n);
    CHECK(v && n > 0, "no default variants for sm_%d", arch);
    for (int i = 0; v && i < n; ++i) {
        char label[PIT_CUDA_LABEL_MAX];
        pit_cuda_variant_label(&v[i], label, sizeof label);
        char *built = pit_cuda_variant_inputs(&v[i], arch);
        char *inputs = runtime_inputs(&v[i], arch, have_nvrtc);
        CHECK(built && inputs && !strcmp(built, inputs), "the build's and the run time's inputs of %s differ", label);
        const pit_cuda_prebuilt *e = inputs ? pit_cuda_prebuilt_find(table, count, arch, label, inputs) : NULL;
        CHECK(e != NULL, "sm_%d: %s is not built in", arch, label);
        if (e) {
            uint64_t d[2];
            pit_cuda_inputs_digest(inputs, d);
            CHECK(e->digest[0] == d[0] && e->digest[1] == d[1] && !strcmp(e->variant, label),
                  "entry of %s keyed otherwise", label);
            CHECK(is_cubin(e, &v[i]), "sm_%d: %s: no CUDA ELF of its entry (%ld bytes)", arch, label,
                  (long)(e->end - e->data));
            printf("sm_%d %7ld %s\n", arch, (long)(e->end - e->data), label);
            bytes += (size_t)(e->end - e->data);
            ++found;
        }
        if (inputs && (i == 0 || (v[i].kind == PIT_CUDA_MATMUL && !misses_checked++)))
            check_misses(table, count, &v[i], arch, inputs);
        free(built);
        free(inputs);
    }
    printf("sm_%d: %d default variants, %d built in, %zu bytes\n", arch, n, found, bytes);
    free(v);
    return found;
}

int main(int argc, char **argv)
{
    int count = -1;
    const pit_cuda_prebuilt *table = pit_cuda_prebuilt_table(&count);
    if (argc == 2 && !strcmp(argv[1], "--none")) {
        CHECK(count == 0, "%d entries with PIT_CUDA_PRECOMPILE off", count);
        printf("%d checks, %d failed\n", checks, failures);
        return failures ? 1 : 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s TILEDB_DIR ARCH... | --none\n", argv[0]);
        return 2;
    }
    const char *why = NULL;
    int have_nvrtc = pit_cuda_lib_load(PIT_CUDA_NVRTC, 0, &why) == 0;
    if (!have_nvrtc) printf("no NVRTC (%s): the inputs are compared as the build has them\n", why);
    int found = 0;
    for (int a = 2; a < argc; ++a) found += check_arch(table, count, atoi(argv[a]), argv[1], have_nvrtc);
    /* every entry is a default variant of a listed architecture */
    CHECK(found == count, "%d entries, %d of them default variants", count, found);
    printf("%d entries; %d checks, %d failed\n", count, checks, failures);
    return failures ? 1 : 0;
}
