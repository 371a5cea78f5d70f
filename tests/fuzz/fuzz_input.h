/*
 * tests/fuzz/fuzz_input.h - reading typed values from a libFuzzer input.
 * Past the end every read gives 0, so every input is a complete test.
 */
#ifndef PIT_FUZZ_INPUT_H
#define PIT_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz;

static inline uint8_t fz_u8(fz *f)
{
    if (!f->n)
        return 0;
    f->n--;
    return *f->p++;
}

static inline uint64_t fz_u64(fz *f)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | fz_u8(f);
    return v;
}

/* A dimension or stride: mostly small, sometimes an edge of int64. */
static inline int64_t fz_extent(fz *f)
{
    uint8_t sel = fz_u8(f);
    static const int64_t edges[] = {0, 1, -1, 2, INT32_MAX, (int64_t)INT32_MAX + 1, -INT32_MAX,
                                    (int64_t)1 << 40, (int64_t)1 << 62, INT64_MAX, INT64_MIN,
                                    INT64_MIN + 1, 3, 7, 64, 65};
    if (sel < 160)
        return sel % 12;
    if (sel < 224)
        return (int64_t)(sel - 160) * 5 + (int64_t)fz_u8(f) % 7;
    if (sel < 248)
        return edges[sel % 16];
    return (int64_t)fz_u64(f);
}

#endif /* PIT_FUZZ_INPUT_H */
