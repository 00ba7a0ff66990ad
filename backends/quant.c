/* quant.c - scalar reference for the plain and legacy formats (F32, F16, BF16, Q8_0, Q4_0),
 * the per-type dispatch of quant.h, and the scalar rlx_matmul_rows. The K formats are in
 * quant_k.c; SIMD paths are in backends/cpu/. */
#include "backends/quant_internal.h"
#include "backends/cpu/kernels.h"

#include <math.h>
#include <string.h>

_Static_assert(sizeof(rlx_block_q4_0) == 18, "q4_0 block is 18 bytes");
_Static_assert(sizeof(rlx_block_q8_0) == 34, "q8_0 block is 34 bytes");
_Static_assert(sizeof(rlx_block_q4_k) == 144, "q4_K block is 144 bytes");
_Static_assert(sizeof(rlx_block_q5_k) == 176, "q5_K block is 176 bytes");
_Static_assert(sizeof(rlx_block_q6_k) == 210, "q6_K block is 210 bytes");
_Static_assert(sizeof(rlx_block_q8_k) == 292, "q8_K block is 292 bytes");

static void dequant_q8_0(const rlx_block_q8_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = rlx_f16_to_f32(x[i].d);
        for (int j = 0; j < RLX_QK; j++) *y++ = x[i].qs[j] * d;
    }
}

static void dequant_q4_0(const rlx_block_q4_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += RLX_QK) {
        const float d = rlx_f16_to_f32(x[i].d);
        for (int j = 0; j < RLX_QK / 2; j++) {
            y[j] = ((x[i].qs[j] & 0xF) - 8) * d;
            y[j + RLX_QK / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* roundf() for |v| < 2^31 without the libm call: truncate, then step away from zero when the
 * dropped fraction is at least one half. Exact: v - t is the fractional part, representable
 * without rounding. */
static inline float round_away(float v)
{
    const float t = (float)(int32_t)v, f = v - t;
    return fabsf(f) >= 0.5f ? t + copysignf(1.0f, v) : t;
}

/* ggml's quantize_row_q8_0_ref, the weight quantizer of llama-quantize: scale amax/127, values
 * times 1/scale, rounded half away from zero. */
static void quant_q8_0(const float *x, rlx_block_q8_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += RLX_QK) {
        float amax = 0;
        for (int j = 0; j < RLX_QK; j++) {
            const float ax = fabsf(x[j]);
            amax = amax > ax ? amax : ax; /* ggml's MAX(); fmaxf() would be a libm call */
        }
        const float d = amax / 127, id = d ? 1.0f / d : 0.0f;
        y[i].d = rlx_f32_to_f16(d);
        for (int j = 0; j < RLX_QK; j++) y[i].qs[j] = (int8_t)round_away(x[j] * id);
    }
}

/* The activation quantizer of llama.cpp's x86 CPU path (quantize_row_q8_0 with AVX2): the
 * same scale, but values times 127/amax rounded to nearest even. Differs from the weight
 * quantizer above in the last bit of some values, which moves logits by ~1e-2. */
static void quant_act_q8_0(const float *x, rlx_block_q8_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += RLX_QK) {
        float amax = 0;
        for (int j = 0; j < RLX_QK; j++) {
            const float ax = fabsf(x[j]);
            amax = amax > ax ? amax : ax;
        }
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = rlx_f32_to_f16(amax / 127.f);
        for (int j = 0; j < RLX_QK; j++) y[i].qs[j] = (int8_t)rlx__nearest_int(x[j] * id);
    }
}

/* ggml's quantize_row_q4_0_ref: the value of largest magnitude maps to -8 exactly. */
static void quant_q4_0(const float *x, rlx_block_q4_0 *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += RLX_QK) {
        float amax = 0, max = 0;
        for (int j = 0; j < RLX_QK; j++) {
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        }
        const float d = max / -8, id = d ? 1.0f / d : 0.0f;
        y[i].d = rlx_f32_to_f16(d);
        for (int j = 0; j < RLX_QK / 2; j++) {
            const int8_t q0 = (int8_t)(x[j] * id + 8.5f), q1 = (int8_t)(x[j + RLX_QK / 2] * id + 8.5f);
            y[i].qs[j] = (uint8_t)(RLX_MIN(15, q0) | (RLX_MIN(15, q1) << 4));
        }
    }
}

int rlx_dequantize_row(int type, const void *src, float *dst, int64_t n)
{
    const rlx_dtype_info *t = rlx_dtype_get(type);
    if (!t || n < 0 || n % t->block_elems) return RLX_EINVAL;
    const int64_t nb = n / t->block_elems;
    switch (type) {
    case RLX_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case RLX_F16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = rlx_f16_to_f32(s[i]);
        return 0;
    }
    case RLX_BF16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = rlx_bf16_to_f32(s[i]);
        return 0;
    }
    case RLX_Q8_0: dequant_q8_0(src, dst, nb); return 0;
    case RLX_Q4_0: dequant_q4_0(src, dst, nb); return 0;
    case RLX_Q4_K: rlx__dequant_q4_k(src, dst, nb); return 0;
    case RLX_Q5_K: rlx__dequant_q5_k(src, dst, nb); return 0;
    case RLX_Q6_K: rlx__dequant_q6_k(src, dst, nb); return 0;
    default: return RLX_EUNSUPPORTED;
    }
}

int rlx_quantize_row(int type, const float *src, void *dst, int64_t n)
{
    const rlx_dtype_info *t = rlx_dtype_get(type);
    if (!t || n < 0 || n % t->block_elems) return RLX_EINVAL;
    const int64_t nb = n / t->block_elems;
    switch (type) {
    case RLX_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case RLX_F16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = rlx_f32_to_f16(src[i]);
        return 0;
    }
    case RLX_BF16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = rlx_f32_to_bf16(src[i]);
        return 0;
    }
    case RLX_Q8_0: quant_q8_0(src, dst, nb); return 0;
    case RLX_Q8_K: return rlx_quantize_act(RLX_Q8_K, src, dst, n); /* an activation format only */
    case RLX_Q4_0: quant_q4_0(src, dst, nb); return 0;
    case RLX_Q4_K: rlx__quant_q4_k(src, dst, nb); return 0;
    case RLX_Q5_K: rlx__quant_q5_k(src, dst, nb); return 0;
    case RLX_Q6_K: rlx__quant_q6_k(src, dst, nb); return 0;
    default: return RLX_EUNSUPPORTED;
    }
}

static int quantize_act(int type, const float *src, void *dst, int64_t n, bool batched)
{
    const rlx_dtype_info *t = rlx_dtype_get(type);
    if ((type != RLX_Q8_0 && type != RLX_Q8_K) || !t || n < 0 || n % t->block_elems) return RLX_EINVAL;
    const int64_t nb = n / t->block_elems;
#if defined(__x86_64__)
    /* same bytes, 8 lanes at a time */
    if (rlx__cpu_simd()) {
        if (type == RLX_Q8_0) rlx__avx2_quant_q8_0(src, dst, nb);
        else rlx__avx2_quant_q8_k(src, dst, nb, batched);
        return 0;
    }
#endif
    if (type == RLX_Q8_0) quant_act_q8_0(src, dst, nb);
    else rlx__quant_q8_k(src, dst, nb, batched);
    return 0;
}

int rlx_quantize_act(int type, const float *src, void *dst, int64_t n) { return quantize_act(type, src, dst, n, false); }

int rlx_quantize_act_batched(int type, const float *src, void *dst, int64_t n)
{
    return quantize_act(type, src, dst, n, true);
}

int rlx_batched_rows(int type, int64_t N, int64_t K)
{
    switch (type) {
    /* llamafile's tinyBLAS takes F32/F16 (16 | K) and BF16 (32 | K) weights of 4 | N rows */
    case RLX_F32: case RLX_F16: return K % 16 == 0 && N % 4 == 0;
    case RLX_BF16: return K % 32 == 0 && N % 4 == 0;
    /* the Q4_K repack needs 8 | N; otherwise llama.cpp's gemv-free vec_dot_q4_K (not ours) */
    case RLX_Q4_K: return N % 8 == 0 ? 4 : 0;
    default: return 0;
    }
}

int rlx_vec_dot_type(int type)
{
    switch (type) {
    case RLX_F32: case RLX_F16: case RLX_BF16: return RLX_F32;
    case RLX_Q8_0: case RLX_Q4_0: return RLX_Q8_0;
    case RLX_Q4_K: case RLX_Q5_K: case RLX_Q6_K: return RLX_Q8_K;
    default: return -1;
    }
}

/* Q8_0 as llama.cpp's x86 kernels (ggml_vec_dot_q8_0_q8_0 and llamafile's tinyBLAS_Q0_AVX,
 * which agree): eight lanes, lane j holding the integer sum of bytes 4j..4j+3 of each block,
 * each lane updated once per block with a fused multiply-add, then ggml's hsum_float_8. */
static float dot_q8_0(const rlx_block_q8_0 *x, const rlx_block_q8_0 *y, int64_t nb)
{
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        const float d = rlx_f16_to_f32(x[i].d) * rlx_f16_to_f32(y[i].d);
        for (int j = 0; j < 8; j++) {
            int32_t s = 0;
            for (int l = 4 * j; l < 4 * j + 4; l++) s += x[i].qs[l] * y[i].qs[l];
            acc[j] = fmaf((float)s, d, acc[j]);
        }
    }
    return rlx__hsum8(acc);
}

/* Q4_0 as llama.cpp's repacked x86 kernels (q4_0_8x8 gemv/gemm, used for every tensor whose
 * row count is a multiple of 8): one integer sum per block, one fused multiply-add per block. */
static float dot_q4_0(const rlx_block_q4_0 *x, const rlx_block_q8_0 *y, int64_t nb)
{
    float acc = 0;
    for (int64_t i = 0; i < nb; i++) {
        int32_t s = 0;
        for (int j = 0; j < RLX_QK / 2; j++)
            s += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + RLX_QK / 2];
        acc = fmaf((float)s, rlx_f16_to_f32(x[i].d) * rlx_f16_to_f32(y[i].d), acc);
    }
    return acc;
}

float rlx_vec_dot(int type, const void *w, const void *act, int64_t n)
{
    switch (type) {
    case RLX_F32: return rlx__dot_f32(w, act, n);
    case RLX_F16: return rlx__dot_f16(w, act, n);
    case RLX_BF16: return rlx__dot_bf16(w, act, n);
    case RLX_Q8_0: return dot_q8_0(w, act, n / RLX_QK);
    case RLX_Q4_0: return dot_q4_0(w, act, n / RLX_QK);
    case RLX_Q4_K: return rlx__dot_q4_k(w, act, n / RLX_QK_K);
    case RLX_Q5_K: return rlx__dot_q5_k(w, act, n / RLX_QK_K);
    case RLX_Q6_K: return rlx__dot_q6_k(w, act, n / RLX_QK_K);
    default: return NAN; /* not computable: callers check rlx_vec_dot_type() first */
    }
}

void rlx__matmul_rows_scalar_batched(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                                     size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo)
{
    const bool fl = type == RLX_F32 || type == RLX_F16 || type == RLX_BF16;
    if (type != RLX_Q4_K && !fl) {
        rlx__matmul_rows_scalar(type, w, n0, n1, act, act_row_bytes, T, K, out, ldo);
        return;
    }
    const size_t wrow = rlx_row_bytes(type, K);
    for (int64_t n = n0; n < n1; n++)
        for (int64_t t = 0; t < T; t++) {
            const void *wr = (const char *)w + (size_t)n * wrow, *ar = (const char *)act + (size_t)t * act_row_bytes;
            out[t * ldo + n] = fl ? rlx__dot_float_batched(type, wr, ar, K) : rlx__dot_q4_k_batched(wr, ar, K / RLX_QK_K);
        }
}

void rlx__matmul_rows_scalar(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                             size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo)
{
    const size_t wrow = rlx_row_bytes(type, K);
    /* weight row outermost: it stays in L1 while every activation row visits it */
    for (int64_t n = n0; n < n1; n++) {
        const char *wr = (const char *)w + (size_t)n * wrow;
        for (int64_t t = 0; t < T; t++)
            out[t * ldo + n] = rlx_vec_dot(type, wr, (const char *)act + (size_t)t * act_row_bytes, K);
    }
}
