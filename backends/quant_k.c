/* quant_k.c - the K formats (Q4_K, Q5_K, Q6_K, Q8_K): reference dequantization, quantization
 * (ggml's algorithms: make_qkx2_quants for Q4_K/Q5_K, make_qx_quants for Q6_K) and scalar dot
 * products against Q8_K activations. */
#include "backends/quant_internal.h"

#include <math.h>
#include <string.h>

#define GROUP_MAX_EPS 1e-15f

void rlx__dequant_q4_k(const rlx_block_q4_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *q = x[i].qs;
        const float d = rlx_f16_to_f32(x[i].d), dmin = rlx_f16_to_f32(x[i].dmin);
        for (int j = 0; j < 8; j += 2) {
            uint8_t sc, m;
            rlx__scale_min_k4(j, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            rlx__scale_min_k4(j + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
        }
    }
}

void rlx__dequant_q5_k(const rlx_block_q5_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = rlx_f16_to_f32(x[i].d), dmin = rlx_f16_to_f32(x[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2) {
            uint8_t sc, m;
            rlx__scale_min_k4(j, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            rlx__scale_min_k4(j + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

/* The 6-bit value l (0..255 of the block) of a Q6_K block, still offset by 32. */
static inline int q6_at(const rlx_block_q6_k *b, int l)
{
    const int half = l / 128, r = l % 128, quarter = r / 32, p = r % 32;
    const uint8_t *ql = b->ql + 64 * half + 32 * (quarter & 1);
    const uint8_t qh = b->qh[32 * half + p];
    const int lo = quarter < 2 ? (ql[p] & 0xF) : (ql[p] >> 4);
    return lo | (((qh >> (2 * quarter)) & 3) << 4);
}

void rlx__dequant_q6_k(const rlx_block_q6_k *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++) {
        const float d = rlx_f16_to_f32(x[i].d);
        for (int l = 0; l < RLX_QK_K; l++) *y++ = d * x[i].scales[l / 16] * (q6_at(&x[i], l) - 32);
    }
}

/* ggml's make_qkx2_quants: a weighted least-squares search of scale and min (min <= 0) for
 * n values quantized to [0, nmax]. Returns the scale, stores -min in *the_min. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *w, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = rlx__nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)RLX_MAX(0, RLX_MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = rlx__nearest_int(iscale * (x[i] - min));
            l = RLX_MAX(0, RLX_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += w[i] * (diff * diff);
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Shared by Q4_K and Q5_K: per-sub-block scales/mins packed as 6 bits, then levels in
 * [0, nmax] for every element. */
static void quant_k_scales(const float *x, int nmax, float rmin, int nstep, uint8_t packed[12],
                           uint16_t *d_out, uint16_t *dmin_out, uint8_t L[RLX_QK_K])
{
    float mins[8], scales[8], weights[32], max_scale = 0, max_min = 0;
    uint8_t Laux[32];
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(packed, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)RLX_MIN(63, rlx__nearest_int(inv_scale * scales[j]));
        uint8_t lm = (uint8_t)RLX_MIN(63, rlx__nearest_int(inv_min * mins[j]));
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = rlx_f32_to_f16(max_scale / 63.f);
    *dmin_out = rlx_f32_to_f16(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        rlx__scale_min_k4(j, packed, &sc, &m);
        const float d = rlx_f16_to_f32(*d_out) * sc;
        if (!d) continue;
        const float dm = rlx_f16_to_f32(*dmin_out) * m;
        for (int l = 0; l < 32; l++) {
            int q = rlx__nearest_int((x[32 * j + l] + dm) / d);
            L[32 * j + l] = (uint8_t)RLX_MAX(0, RLX_MIN(nmax, q));
        }
    }
}

void rlx__quant_q4_k(const float *x, rlx_block_q4_k *y, int64_t nb)
{
    uint8_t L[RLX_QK_K];
    for (int64_t i = 0; i < nb; i++, x += RLX_QK_K) {
        quant_k_scales(x, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < RLX_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void rlx__quant_q5_k(const float *x, rlx_block_q5_k *y, int64_t nb)
{
    uint8_t L[RLX_QK_K];
    for (int64_t i = 0; i < nb; i++, x += RLX_QK_K) {
        quant_k_scales(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *ql = y[i].qs, *qh = y[i].qh, m1 = 1, m2 = 2;
        memset(qh, 0, sizeof y[i].qh);
        for (int n = 0; n < RLX_QK_K; n += 64, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
                if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

/* ggml's make_qx_quants with rmse_type 1 (weights x^2): symmetric levels in [-nmax, nmax-1],
 * scale refined over 18 trial inverse scales. Returns the scale. */
static float make_qx_quants(int n, int nmax, const float *x, uint8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = RLX_MAX(-nmax, RLX_MIN(nmax - 1, rlx__nearest_int(iscale * x[i])));
        L[i] = (uint8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = RLX_MAX(-nmax, RLX_MIN(nmax - 1, rlx__nearest_int(iscale * x[i])));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (uint8_t)(nmax + RLX_MAX(-nmax, RLX_MIN(nmax - 1, rlx__nearest_int(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void rlx__quant_q6_k(const float *x, rlx_block_q6_k *y, int64_t nb)
{
    uint8_t L[RLX_QK_K];
    float scales[RLX_QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += RLX_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < RLX_QK_K / 16; ib++) {
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_abs_scale < GROUP_MAX_EPS) continue;
        const float iscale = -128.f / max_scale;
        y[i].d = rlx_f32_to_f16(1 / iscale);
        for (int ib = 0; ib < RLX_QK_K / 16; ib++)
            y[i].scales[ib] = (int8_t)RLX_MIN(127, rlx__nearest_int(iscale * scales[ib]));
        /* sub-blocks whose scale rounds to 0 keep make_qx_quants' levels, as ggml does */
        for (int j = 0; j < RLX_QK_K / 16; j++) {
            const float d = rlx_f16_to_f32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++) {
                int q = RLX_MAX(-32, RLX_MIN(31, rlx__nearest_int(x[16 * j + l] / d)));
                L[16 * j + l] = (uint8_t)(q + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < RLX_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t *p = L + j + l;
                ql[l] = (uint8_t)((p[0] & 0xF) | ((p[64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((p[32] & 0xF) | ((p[96] & 0xF) << 4));
                qh[l] = (uint8_t)((p[0] >> 4) | ((p[32] >> 4) << 2) | ((p[64] >> 4) << 4) | ((p[96] >> 4) << 6));
            }
        }
    }
}

/* ggml's quantize_row_q8_K_ref: the scale follows the first value of largest magnitude, sign
 * included. batched: the sign as ggml_quantize_mat_q8_K_4x8 (the 4-row quantizer of its batched
 * Q4_K kernels) takes it, positive when that magnitude occurs with a + anywhere in the block. */
void rlx__quant_q8_k(const float *x, rlx_block_q8_k *y, int64_t nb, bool batched)
{
    for (int64_t i = 0; i < nb; i++, x += RLX_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < RLX_QK_K; j++) {
            const float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (!amax) continue;
        if (batched)
            for (int j = 0; j < RLX_QK_K; j++)
                if (x[j] == amax) max = amax;
        const float iscale = -127.f / max; /* ggml uses 127 (not 128) so the SIMD dots never see -128 */
        for (int j = 0; j < RLX_QK_K; j++) y[i].qs[j] = (int8_t)RLX_MIN(127, rlx__nearest_int(iscale * x[j]));
        for (int j = 0; j < RLX_QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

/* Q4_K as llama.cpp's repacked x86 kernels (q4_K_8x8 gemv/gemm, used for every tensor whose row
 * count is a multiple of 8): integer sums of scaled products and of mins times block sums over
 * `fold` sub-blocks at a time, each folded into its own float chain by a fused multiply-add;
 * the chains are subtracted at the end. */
static float dot_q4_k_folded(const rlx_block_q4_k *x, const rlx_block_q8_k *y, int64_t nb, int fold)
{
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < nb; i++) {
        for (int j0 = 0; j0 < 8; j0 += fold) {
            int32_t isum = 0, msum = 0;
            for (int j = j0; j < j0 + fold; j++) {
                uint8_t sc, m;
                rlx__scale_min_k4(j, x[i].scales, &sc, &m);
                const uint8_t *q4 = x[i].qs + 32 * (j / 2);
                const int8_t *q8 = y[i].qs + 32 * j;
                int32_t s = 0;
                for (int l = 0; l < 32; l++) s += ((j & 1) ? q4[l] >> 4 : q4[l] & 0xF) * q8[l];
                isum += sc * s;
                msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            }
            acc = fmaf((float)isum, rlx_f16_to_f32(x[i].d) * y[i].d, acc);
            accm = fmaf((float)msum, rlx_f16_to_f32(x[i].dmin) * y[i].d, accm);
        }
    }
    return acc - accm;
}

/* The gemv (one row): one fold per super-block. */
float rlx__dot_q4_k(const rlx_block_q4_k *x, const rlx_block_q8_k *y, int64_t nb) { return dot_q4_k_folded(x, y, nb, 8); }

/* The gemm (batched rows): each pair of sub-blocks (64 values) is folded on its own. */
float rlx__dot_q4_k_batched(const rlx_block_q4_k *x, const rlx_block_q8_k *y, int64_t nb)
{
    return dot_q4_k_folded(x, y, nb, 2);
}

/* The 5-bit value l (0..255) of a Q5_K block. */
static inline int q5_at(const rlx_block_q5_k *b, int l)
{
    const int j = l / 32, p = l % 32;
    const uint8_t q = b->qs[32 * (j / 2) + p];
    return ((j & 1) ? q >> 4 : q & 0xF) | (((b->qh[p] >> j) & 1) << 4);
}

/* Q5_K as ggml_vec_dot_q5_K_q8_K (x86 AVX2): eight integer lanes, lane k summing bytes
 * 4k..4k+3 of every 32-value sub-block times its scale; one fused multiply-add per lane and
 * super-block; the mins go to a separate scalar chain added after ggml's hsum_float_8. */
float rlx__dot_q5_k(const rlx_block_q5_k *x, const rlx_block_q8_k *y, int64_t nb)
{
    float acc[8] = {0}, summs = 0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = y[i].d * rlx_f16_to_f32(x[i].d), dmin = -y[i].d * rlx_f16_to_f32(x[i].dmin);
        int32_t lane[8] = {0}, msum = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            rlx__scale_min_k4(j, x[i].scales, &sc, &m);
            msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            for (int k = 0; k < 8; k++) {
                int32_t s = 0;
                for (int l = 32 * j + 4 * k; l < 32 * j + 4 * k + 4; l++) s += q5_at(&x[i], l) * y[i].qs[l];
                lane[k] += sc * s;
            }
        }
        summs = fmaf(dmin, (float)msum, summs);
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lane[k], acc[k]);
    }
    return rlx__hsum8(acc) + summs;
}

/* Q6_K as ggml_vec_dot_q6_K_q8_K (x86 AVX2): eight integer lanes, lane k summing bytes 4k..4k+3
 * of every 32-value chunk times its 16-value scale, less 32 x (block sums 2k and 2k+1 times
 * their scales) for the level offset; one fused multiply-add per lane and super-block, then
 * ggml's hsum_float_8. */
float rlx__dot_q6_k(const rlx_block_q6_k *x, const rlx_block_q8_k *y, int64_t nb)
{
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; i++) {
        const float d = y[i].d * rlx_f16_to_f32(x[i].d);
        int32_t lane[8];
        for (int k = 0; k < 8; k++)
            lane[k] = -32 * (y[i].bsums[2 * k] * x[i].scales[2 * k] + y[i].bsums[2 * k + 1] * x[i].scales[2 * k + 1]);
        for (int v = 0; v < 8; v++)
            for (int k = 0; k < 8; k++) {
                int32_t s = 0;
                for (int l = 32 * v + 4 * k; l < 32 * v + 4 * k + 4; l++) s += q6_at(&x[i], l) * y[i].qs[l];
                lane[k] += x[i].scales[2 * v + (k >= 4)] * s;
            }
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lane[k], acc[k]);
    }
    return rlx__hsum8(acc);
}
