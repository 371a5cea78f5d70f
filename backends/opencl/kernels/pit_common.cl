/*
 * pit_common.cl - storage types shared by every pit OpenCL program.
 *
 * DT selects how tensors are stored: 0 f32, 1 f16, 2 bf16. Arithmetic is
 * always f32: f16 goes through vload_half/vstore_half (core OpenCL, so no
 * cl_khr_fp16 is needed) and bf16 is a ushort holding the top half of an f32.
 * MW selects how pattern elements are read (below); u8 is only a pattern.
 */
#ifndef DT
#error "DT (storage dtype) must be defined"
#endif

/* ---- pattern elements --------------------------------------------------------
 * MW is the bytes of one element of a pattern (a mask, or the operand that
 * detection scans): 4 (f32; an i32 mask is read as the same 32-bit words),
 * 2 (f16, bf16) or 1 (u8, a bool mask). A float element is "on" when any bit
 * but the sign is set, so -0.0 is off and NaN is on; a byte has no sign, so
 * it is on when it is not 0. Detection and the operators both read patterns
 * through mask_on(), so they always agree on which blocks matter. */
#ifndef MW
#define MW 4
#endif
#if MW == 4
typedef uint mword_t;
#define MWORD_ON 0x7fffffffu
#elif MW == 2
typedef ushort mword_t;
#define MWORD_ON 0x7fffu
#elif MW == 1
typedef uchar mword_t;
#define MWORD_ON 0xffu
#else
#error "MW (bytes of a pattern element) must be 4, 2 or 1"
#endif

inline int mask_on(__global const mword_t *p, long i)
{
    return (p[i] & (mword_t)MWORD_ON) != (mword_t)0;
}

inline float bf16_to_f32(ushort h)
{
    return as_float((uint)h << 16);
}

/* Round to nearest even; NaN stays a (quiet) NaN. */
inline ushort f32_to_bf16(float f)
{
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (ushort)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}

#if DT == 0
typedef float st_t;
#define LOAD(p, i) ((p)[(i)])
#define STORE(p, i, v) ((p)[(i)] = (v))
#elif DT == 1
typedef half st_t;
#define LOAD(p, i) vload_half((size_t)(i), (p))
#define STORE(p, i, v) vstore_half_rte((v), (size_t)(i), (p))
#elif DT == 2
typedef ushort st_t;
#define LOAD(p, i) bf16_to_f32((p)[(i)])
#define STORE(p, i, v) ((p)[(i)] = f32_to_bf16(v))
#else
#error "unknown DT"
#endif
