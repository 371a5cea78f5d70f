/*
 * cuda_prebuilt.c - finding a variant's built-in binary (cuda_prebuilt.h).
 */
#include "cuda_prebuilt.h"

#include <string.h>

#define FNV_PRIME 0x100000001b3ull

void pit_cuda_inputs_digest(const char *inputs, uint64_t digest[2])
{
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
    for (const unsigned char *p = (const unsigned char *)inputs; *p; ++p) {
        a = (a ^ *p) * FNV_PRIME;
        b = (b ^ *p) * FNV_PRIME;
    }
    digest[0] = a;
    digest[1] = b;
}

const pit_cuda_prebuilt *pit_cuda_prebuilt_find(const pit_cuda_prebuilt *table, int count, int arch,
                                                const char *variant, const char *inputs)
{
    uint64_t d[2];
    int digested = 0;
    for (int i = 0; i < count; ++i) {
        const pit_cuda_prebuilt *e = &table[i];
        if (e->arch != arch || strcmp(e->variant, variant) != 0) continue;
        if (!digested) pit_cuda_inputs_digest(inputs, d);
        digested = 1;
        if (e->digest[0] == d[0] && e->digest[1] == d[1]) return e;
    }
    return NULL;
}
