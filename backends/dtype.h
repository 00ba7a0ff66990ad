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

/* IEEE half and bfloat16 conversions (round-to-nearest-even). */
float rlx_f16_to_f32(uint16_t h);
uint16_t rlx_f32_to_f16(float f);
float rlx_bf16_to_f32(uint16_t h);
uint16_t rlx_f32_to_bf16(float f);

#endif
