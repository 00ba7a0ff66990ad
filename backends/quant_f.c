/* quant_f.c - scalar reference of the float-weight dot products (F32, F16, BF16) with
 * llama.cpp's arithmetic on an AVX-512 CPU, where its golden outputs were made:
 *  - one-row products (decode) go through ggml_vec_dot_f32/f16/bf16: F32/F16 in four 16-lane
 *    accumulators per 64 values, combined as (a0 + a2) + (a1 + a3) and reduced in
 *    _mm512_reduce_add_ps's order, then the tail past the last 64 (F16: added in double; F32: as
 *    the compiled loop does it, eight products at a time added in order, then fused
 *    multiply-adds); BF16 in two 16-lane vdpbf16ps chains over 64 values, each reduced and added
 *    in double, then the tail in double;
 *  - the rows of a multi-row product go through llamafile's tinyBLAS: one 16-lane accumulator
 *    updated by a fused multiply-add per 16 values (vdpbf16ps per 32 for BF16), then reduced.
 * F16 and BF16 activations arrive already rounded to the weight's type (the CPU backend does
 * it, as ggml converts them), so every product of two values is exact in float. */
#include "backends/quant_internal.h"

#include <math.h>

/* The 64-value blocks of ggml_vec_dot_f32/f16: four accumulators of 16 lanes. */
#define VEC_DOT_BLOCKS(LOADX)                                                            \
    float s[4][16] = {{0}};                                                              \
    for (int64_t i = 0; i < np; i += 64)                                                 \
        for (int j = 0; j < 4; j++)                                                      \
            for (int l = 0; l < 16; l++)                                                 \
                s[j][l] = fmaf(LOADX(i + 16 * j + l), y[i + 16 * j + l], s[j][l]);       \
    float x0[16];                                                                        \
    for (int l = 0; l < 16; l++) x0[l] = (s[0][l] + s[2][l]) + (s[1][l] + s[3][l]);

static float ld_f32(const float *x, int64_t i) { return x[i]; }
static float ld_f16(const uint16_t *x, int64_t i) { return rlx_f16_to_f32(x[i]); }
static float ld_bf16(const uint16_t *x, int64_t i) { return rlx_bf16_to_f32(x[i]); }

float rlx__dot_f32(const float *x, const float *y, int64_t n)
{
    const int64_t np = n & ~(int64_t)63;
#define LX(i) ld_f32(x, (i))
    VEC_DOT_BLOCKS(LX)
#undef LX
    float sum = rlx__red16(x0);
    const int64_t m8 = np + ((n - np) & ~(int64_t)7);
    for (int64_t i = np; i < m8; i++) sum = sum + x[i] * y[i];
    for (int64_t i = m8; i < n; i++) sum = fmaf(x[i], y[i], sum);
    return sum;
}

float rlx__dot_f16(const uint16_t *x, const float *y, int64_t n)
{
    const int64_t np = n & ~(int64_t)63;
#define LX(i) ld_f16(x, (i))
    VEC_DOT_BLOCKS(LX)
#undef LX
    double sum = rlx__red16(x0);
    for (int64_t i = np; i < n; i++) sum += (double)(ld_f16(x, i) * y[i]);
    return (float)sum;
}

/* vdpbf16ps on one lane: the odd pair's product, then the even one's, each added with one
 * rounding (the products of two bf16 values are exact); denormal results flush to zero. */
static float dpbf16(float acc, float x0, float y0, float x1, float y1)
{
    acc = acc + x1 * y1;
    if (fabsf(acc) < 0x1p-126f) acc = copysignf(0.0f, acc);
    acc = acc + x0 * y0;
    if (fabsf(acc) < 0x1p-126f) acc = copysignf(0.0f, acc);
    return acc;
}

float rlx__dot_bf16(const uint16_t *x, const float *y, int64_t n)
{
    float c[2][16] = {{0}};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 16; l++) {
                const int64_t e = i + 32 * h + 2 * l;
                c[h][l] = dpbf16(c[h][l], ld_bf16(x, e), y[e], ld_bf16(x, e + 1), y[e + 1]);
            }
    double sum = 0;
    sum += (double)rlx__red16(c[0]);
    sum += (double)rlx__red16(c[1]);
    for (; i < n; i++) sum += (double)(ld_bf16(x, i) * y[i]);
    return (float)sum;
}

/* tinyBLAS (multi-row products), for K a multiple of 16 (F32, F16) or 32 (BF16); other K take
 * the one-row arithmetic, as llamafile_sgemm declines them. */
float rlx__dot_float_batched(int type, const void *w, const float *y, int64_t n)
{
    float a[16] = {0};
    if (type == RLX_BF16) {
        if (n % 32) return rlx__dot_bf16(w, y, n);
        for (int64_t i = 0; i < n; i += 32)
            for (int l = 0; l < 16; l++)
                a[l] = dpbf16(a[l], ld_bf16(w, i + 2 * l), y[i + 2 * l], ld_bf16(w, i + 2 * l + 1), y[i + 2 * l + 1]);
        return rlx__red16(a);
    }
    if (n % 16) return type == RLX_F16 ? rlx__dot_f16(w, y, n) : rlx__dot_f32(w, y, n);
    for (int64_t i = 0; i < n; i += 16)
        for (int l = 0; l < 16; l++)
            a[l] = fmaf(type == RLX_F16 ? ld_f16(w, i + l) : ld_f32(w, i + l), y[i + l], a[l]);
    return rlx__red16(a);
}
