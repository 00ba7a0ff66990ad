/* matmul.comp - out[t, n] = dot(W[n], x[t]), then the chain. One invocation per weight row
 * and tile of 8 tokens, walking the row in the CPU's order: for the quantized types the
 * activations arrive quantized (actq.comp) and each block's integer sums are combined with
 * the scales exactly as quant.c / quant_k.c do, so results match the CPU's scalar reference
 * up to float rounding of the running sum. F32/F16/BF16 use f32 products (F16/BF16 inputs
 * already rounded to the weight's type).
 * P: 0 type, 1 K, 2 rows in this dispatch, 3 row bytes, 4 byte base, 5 first row (output
 * column), 6 T, 7 x off, 8 y off, 9 ldo, 10 x scale off. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };
layout(std430, set = 0, binding = 3) readonly buffer W_ { uint W[]; };
#include "dequant.glsl"
#define TT 8u

float acc[TT];
uint nt, xo, K, so;

float wplain(uint type, uint row, uint k)
{
    return type == 0u ? uintBitsToFloat(W[(row >> 2) + k]) : type == 1u ? wf16(row + 2u * k) : uintBitsToFloat(wh(row + 2u * k) << 16);
}

/* the x86 CPU kernels' horizontal sum of 8 lanes: (v0+v4 + v2+v6) + (v1+v5 + v3+v7) */
float hsum8(float v[8])
{
    precise float s0 = v[0] + v[4], s1 = v[1] + v[5], s2 = v[2] + v[6], s3 = v[3] + v[7];
    precise float r = (s0 + s2) + (s1 + s3);
    return r;
}

/* F32/F16/BF16 in the CPU SIMD kernels' order: lane k % 32 of four 8-lane FMA accumulators,
 * lanes combined (a0 + a1) + (a2 + a3), horizontal sum, then the K % 32 tail without FMA. */
void plain(uint type, uint row)
{
    uint K32 = K / 32u * 32u;
    for (uint t = 0u; t < nt; t++) {
        precise float a[32];
        for (uint l = 0u; l < 32u; l++) a[l] = 0.0;
        uint xb = xo + t * K;
        for (uint i = 0u; i < K32; i += 32u)
            for (uint l = 0u; l < 32u; l++) a[l] = fma(wplain(type, row, i + l), X[xb + i + l], a[l]);
        float v[8];
        for (uint l = 0u; l < 8u; l++) {
            precise float s = (a[l] + a[8u + l]) + (a[16u + l] + a[24u + l]);
            v[l] = s;
        }
        precise float r = hsum8(v);
        for (uint k = K32; k < K; k++) {
            precise float p = wplain(type, row, k) * X[xb + k];
            r = r + p;
        }
        acc[t] = r;
    }
}

/* Q8_0 / Q4_0 against Q8_0 activations, in the CPU SIMD kernels' order: per block, lane l holds
 * the exact integer sum of elements 4l..4l+3; lanes are scaled by d_w * d_x and accumulated
 * with FMA, even blocks and odd blocks apart, then added and summed horizontally. */
void legacy(uint type, uint row)
{
    uint nb = K / 32u;
    int q[32];
    for (uint t = 0u; t < nt; t++) {
        precise float a0[8], a1[8];
        for (uint l = 0u; l < 8u; l++) { a0[l] = 0.0; a1[l] = 0.0; }
        for (uint b = 0u; b < nb; b++) {
            uint base = row + (type == 8u ? 34u : 18u) * b;
            float d = wf16(base);
            if (type == 8u) {
                for (uint j = 0u; j < 32u; j++) q[j] = ws8(base + 2u + j);
            } else {
                for (uint j = 0u; j < 16u; j++) {
                    uint v = wb(base + 2u + j);
                    q[j] = int(v & 0xFu) - 8;
                    q[j + 16u] = int(v >> 4) - 8;
                }
            }
            uint xb = xo + t * K + b * 32u;
            precise float sc = d * X[so + t * nb + b];
            for (uint l = 0u; l < 8u; l++) {
                int si = 0;
                for (uint j = 4u * l; j < 4u * l + 4u; j++) si += q[j] * int(X[xb + j]);
                if ((b & 1u) == 0u) a0[l] = fma(float(si), sc, a0[l]);
                else a1[l] = fma(float(si), sc, a1[l]);
            }
        }
        float v[8];
        for (uint l = 0u; l < 8u; l++) {
            precise float s = a0[l] + a1[l];
            v[l] = s;
        }
        acc[t] = hsum8(v);
    }
}

/* Q4_K / Q5_K / Q6_K against Q8_K activations */
void kquant(uint type, uint row)
{
    uint nb = K / 256u, bsz = type == 12u ? 144u : type == 13u ? 176u : 210u;
    int q[32];
    for (uint i = 0u; i < nb; i++) {
        uint base = row + bsz * i;
        int isum[TT], msum[TT];
        for (uint t = 0u; t < TT; t++) { isum[t] = 0; msum[t] = 0; }
        for (uint j = 0u; j < 8u; j++) {
            int sc0 = 0, sc1 = 0, m = 0;
            if (type == 14u) {
                uint h = j / 4u, qq = j % 4u;
                uint ql = base + 64u * h + ((qq & 1u) == 1u ? 32u : 0u), qh = base + 128u + 32u * h;
                for (uint l = 0u; l < 32u; l++) {
                    uint lo = wb(ql + l);
                    lo = qq < 2u ? lo & 0xFu : lo >> 4;
                    q[l] = int(lo | (((wb(qh + l) >> (2u * qq)) & 3u) << 4)) - 32;
                }
                sc0 = ws8(base + 192u + 2u * j);
                sc1 = ws8(base + 193u + 2u * j);
            } else {
                float fsc, fm;
                scale_min_k4(j, base + 4u, fsc, fm);
                sc0 = int(fsc);
                m = int(fm);
                uint qs = base + (type == 13u ? 48u : 16u) + 32u * (j / 2u);
                for (uint l = 0u; l < 32u; l++) {
                    uint v = wb(qs + l);
                    v = (j & 1u) == 1u ? v >> 4 : v & 0xFu;
                    if (type == 13u && ((wb(base + 16u + l) >> j) & 1u) != 0u) v += 16u;
                    q[l] = int(v);
                }
            }
            for (uint t = 0u; t < nt; t++) {
                uint xb = xo + t * K + i * 256u + j * 32u;
                int s0 = 0, s1 = 0, bs = 0;
                for (uint l = 0u; l < 16u; l++) {
                    int a = int(X[xb + l]), b = int(X[xb + 16u + l]);
                    s0 += q[l] * a;
                    s1 += q[16u + l] * b;
                    bs += a + b;
                }
                if (type == 14u) isum[t] += sc0 * s0 + sc1 * s1;
                else { isum[t] += sc0 * (s0 + s1); msum[t] += m * bs; }
            }
        }
        float d = wf16(base + (type == 14u ? 208u : 0u)), dmin = type == 14u ? 0.0 : wf16(base + 2u);
        for (uint t = 0u; t < nt; t++) {
            float dy = X[so + t * nb + i];
            precise float u = d * dy * float(isum[t]);
            acc[t] = acc[t] + u;
            if (type != 14u) {
                precise float m = dmin * dy * float(msum[t]);
                acc[t] = acc[t] - m;
            }
        }
    }
}

void main()
{
    uint n = gl_GlobalInvocationID.x, t0 = gl_WorkGroupID.y * TT, type = P[0];
    if (n >= P[2]) return;
    K = P[1];
    nt = min(TT, P[6] - t0);
    xo = P[7] + t0 * K;
    so = P[10] + t0 * (K / (type >= 12u && type <= 14u ? 256u : 32u));
    for (uint t = 0u; t < TT; t++) acc[t] = 0.0;
    uint row = P[4] + n * P[3];
    if (type == 0u || type == 1u || type == 30u) plain(type, row);
    else if (type == 8u || type == 2u) legacy(type, row);
    else kquant(type, row);
    uint col = P[5] + n;
    for (uint t = 0u; t < nt; t++) Y[P[8] + (t0 + t) * P[9] + col] = apply_chain(acc[t], t0 + t, col);
}
