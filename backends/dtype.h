/* dtype.h - tensor element types. Ids are GGML's, so GGUF files map 1:1. */
#ifndef RLX_DTYPE_H
#define RLX_DTYPE_H

#include "backends/rlx.h"

typedef enum rlx_dtype {
    RLX_F32 = 0,
    RLX_F16 = 1,
    RLX_Q4_0 = 2,
    RLX_Q4_1 = 3,
    RLX_Q5_0 = 6,
    RLX_Q5_1 = 7,
    RLX_Q8_0 = 8,
    RLX_Q8_1 = 9,
    RLX_Q2_K = 10,
    RLX_Q3_K = 11,
    RLX_Q4_K = 12,
    RLX_Q5_K = 13,
    RLX_Q6_K = 14,
    RLX_Q8_K = 15,
    RLX_I8 = 24,
    RLX_I16 = 25,
    RLX_I32 = 26,
    RLX_I64 = 27,
    RLX_F64 = 28,
    RLX_BF16 = 30,
    RLX_DTYPE_COUNT = 40,
} rlx_dtype;

typedef struct rlx_dtype_info {
    const char *name;     /* "f32", "q4_k", ... */
    int32_t block_elems;  /* elements per block (1 for plain types) */
    int32_t block_bytes;  /* bytes per block */
    bool computable;      /* rlxd has dequantization + dot products for it */
} rlx_dtype_info;

/* NULL for ids GGUF may carry that rlxd does not know at all. */
const rlx_dtype_info *rlx_dtype_get(int type);
/* Parses "f32", "q8_0", ... (case-insensitive); returns -1 if unknown. */
int rlx_dtype_from_name(const char *name);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
size_t rlx_row_bytes(int type, int64_t n);

/* IEEE half and bfloat16 conversions (round-to-nearest-even), inline and branch-light: they sit
 * in attention and dequantization loops, where libgcc's soft _Float16 routines cost ~20x more.
 * The half conversions use the exponent-rebias technique (float arithmetic does the rounding
 * and handles subnormals), so they must not be compiled with -ffast-math. */
static inline float rlx__u32_as_f32(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline uint32_t rlx__f32_as_u32(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }

static inline float rlx_f16_to_f32(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w;
    /* normal: shift exponent+mantissa into place and rebias by 2^-112 */
    const float normalized = rlx__u32_as_f32((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    /* subnormal: mantissa as a float in [0.5, 1) minus 0.5 */
    const float denormalized = rlx__u32_as_f32((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t bits = two_w < (1u << 27) ? rlx__f32_as_u32(denormalized) : rlx__f32_as_u32(normalized);
    return rlx__u32_as_f32(sign | bits);
}

static inline uint16_t rlx_f32_to_f16(float f)
{
    float base = (__builtin_fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = rlx__f32_as_u32(f), shl1_w = w + w, sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = rlx__u32_as_f32((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = rlx__f32_as_u32(base);
    const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline float rlx_bf16_to_f32(uint16_t h) { return rlx__u32_as_f32((uint32_t)h << 16); }

static inline uint16_t rlx_f32_to_bf16(float f)
{
    uint32_t u = rlx__f32_as_u32(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64); /* quiet NaN */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

#endif
