/*
 * pit_common.cl - storage types shared by every pit OpenCL program.
 *
 * DT selects how tensors are stored: 0 f32, 1 f16, 2 bf16. Arithmetic is
 * always f32: f16 goes through vload_half/vstore_half (core OpenCL, so no
 * cl_khr_fp16 is needed) and bf16 is a ushort holding the top half of an f32.
 * MDT selects how pattern elements are read (below); u8 is only a pattern.
 */
#ifndef DT
#error "DT (storage dtype) must be defined"
#endif

/* ---- pattern elements --------------------------------------------------------
 * MDT is the pit_dtype code of the elements of a pattern (a mask, or the
 * operand that detection scans): 0 f32, 1 f16 (bf16 too: the same test), 3
 * i32 or 4 u8 (a bool mask). A float element is "on" when any bit but the
 * sign is set, so -0.0 is off and NaN is on; an integer has no -0, so it is
 * on when any bit is set (INT_MIN, whose bits are those of -0.0f, is on).
 * Detection and the operators both read patterns through mask_on(), so they
 * always agree on which blocks matter. */
#ifndef MDT
#define MDT 0
#endif
#if MDT == 0
typedef uint mword_t;
#define MWORD_ON 0x7fffffffu
#elif MDT == 1
typedef ushort mword_t;
#define MWORD_ON 0x7fffu
#elif MDT == 3
typedef uint mword_t;
#define MWORD_ON 0xffffffffu
#elif MDT == 4
typedef uchar mword_t;
#define MWORD_ON 0xffu
#else
#error "MDT (dtype code of a pattern element) must be 0 (f32), 1 (f16, bf16), 3 (i32) or 4 (u8)"
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
