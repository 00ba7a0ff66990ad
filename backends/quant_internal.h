/* quant_internal.h - private seams between quant.c (legacy formats, dispatch), quant_k.c
 * (K formats) and the SIMD kernels in backends/cpu/. Not part of the public API. */
#ifndef RLX_QUANT_INTERNAL_H
#define RLX_QUANT_INTERNAL_H

#include "backends/quant.h"

/* Round to nearest, ties to even (ggml's nearest_int), for |v| < 2^22. */
static inline int rlx__nearest_int(float v)
{
    float f = v + 12582912.f; /* 1.5 * 2^23: the mantissa then holds the rounded integer */
    int32_t i;
    __builtin_memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* ggml's hsum_float_8 (x86): the eight lanes of a product summed in its order. The dot products
 * below reproduce llama.cpp's x86 arithmetic operation for operation, so that logits (and
 * greedy choices) are bit-identical to its reference outputs. */
static inline float rlx__hsum8(const float a[8])
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* GCC's _mm512_reduce_add_ps order over sixteen values, which ggml's 16-lane reductions use. */
static inline float rlx__red16(const float a[16])
{
    float t3[8], t6[4];
    for (int k = 0; k < 8; k++) t3[k] = a[k + 8] + a[k];
    for (int k = 0; k < 4; k++) t6[k] = t3[k + 4] + t3[k];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

/* Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void rlx__scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void rlx__dequant_q4_k(const rlx_block_q4_k *x, float *y, int64_t nb);
void rlx__dequant_q5_k(const rlx_block_q5_k *x, float *y, int64_t nb);
void rlx__dequant_q6_k(const rlx_block_q6_k *x, float *y, int64_t nb);
void rlx__quant_q4_k(const float *x, rlx_block_q4_k *y, int64_t nb);
void rlx__quant_q5_k(const float *x, rlx_block_q5_k *y, int64_t nb);
void rlx__quant_q6_k(const float *x, rlx_block_q6_k *y, int64_t nb);
void rlx__quant_q8_k(const float *x, rlx_block_q8_k *y, int64_t nb, bool batched);
/* K-quant dots: the float operations of llama.cpp's x86 kernels (see quant_k.c). */
float rlx__dot_q4_k(const rlx_block_q4_k *x, const rlx_block_q8_k *y, int64_t nb);
float rlx__dot_q4_k_batched(const rlx_block_q4_k *x, const rlx_block_q8_k *y, int64_t nb);
float rlx__dot_q5_k(const rlx_block_q5_k *x, const rlx_block_q8_k *y, int64_t nb);
float rlx__dot_q6_k(const rlx_block_q6_k *x, const rlx_block_q8_k *y, int64_t nb);

/* Float weights (quant_f.c): llama.cpp's one-row and batched (tinyBLAS) dot products; the
 * activations y are already rounded to F16/BF16 for those weight types. */
float rlx__dot_f32(const float *x, const float *y, int64_t n);
float rlx__dot_f16(const uint16_t *x, const float *y, int64_t n);
float rlx__dot_bf16(const uint16_t *x, const float *y, int64_t n);
float rlx__dot_float_batched(int type, const void *w, const float *y, int64_t n);

/* Scalar references of rlx_matmul_rows and rlx_matmul_rows_batched (also the fallback of the
 * SIMD paths). */
void rlx__matmul_rows_scalar(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                             size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);
void rlx__matmul_rows_scalar_batched(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                                     size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo);

#endif
