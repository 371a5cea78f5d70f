/*
 * pit_common.cl - storage types shared by every pit OpenCL program.
 *
 * DT selects how tensors are stored: 0 f32, 1 f16, 2 bf16. Arithmetic is
 * always f32: f16 goes through vload_half/vstore_half (core OpenCL, so no
 * cl_khr_fp16 is needed) and bf16 is a ushort holding the top half of an f32.
 */
#ifndef DT
#error "DT (storage dtype) must be defined"
#endif

/* Raw bits of one element, used by detection: a value is zero when every bit
 * but the sign is clear, so -0.0 is zero and NaN is non-zero. */
#if DT == 0
typedef uint bits_t;
#define NZ_MASK 0x7fffffffu
#else
typedef ushort bits_t;
#define NZ_MASK 0x7fffu
#endif

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
