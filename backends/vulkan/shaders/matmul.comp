/* matmul.comp - out[t, n] = dot(W[n], x[t]), then the chain. One invocation per weight row
 * and tile of 8 tokens. Each dot product is the CPU backend's scalar reference (quant.c,
 * quant_f.c, quant_k.c: llama.cpp's x86 arithmetic) operation for operation, so results are
 * bit-identical to the CPU's: the same lanes, fused multiply-adds, reduction trees and double
 * tails, and per row the one-row or batched variant that the CPU picks (row_batched). The
 * quantized types read activations quantized by actq.comp (integer values as floats, one scale
 * per block); F16/BF16 read them rounded to the weight's type.
 * P: 0 type, 1 K, 2 rows in this dispatch, 3 row bytes, 4 byte base, 5 first row (output
 * column), 6 T, 7 x off, 8 y off, 9 ldo, 10 x scale off, 11 row kinds, 12 rule, 13 Q8_K
 * block-sum off. */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer X_ { float X[]; };
layout(std430, set = 0, binding = 3) readonly buffer W_ { uint W[]; };
#include "dequant.glsl"
#define TT 8u

uint K;

float wplain(uint type, uint row, uint k)
{
    return type == 0u ? uintBitsToFloat(W[(row >> 2) + k]) : type == 1u ? wf16(row + 2u * k) : uintBitsToFloat(wh(row + 2u * k) << 16);
}

/* ggml_vec_dot_f32/f16's 64-value blocks: four 16-lane FMA accumulators, combined as
 * (a0 + a2) + (a1 + a3) and reduced by red16 */
float vec_dot_blocks(uint type, uint row, uint xb, uint np)
{
    precise float s[64];
    for (uint l = 0u; l < 64u; l++) s[l] = 0.0;
    for (uint i = 0u; i < np; i += 64u)
        for (uint l = 0u; l < 64u; l++) s[l] = fmaf(wplain(type, row, i + l), X[xb + i + l], s[l]);
    precise float x0[16];
    for (uint l = 0u; l < 16u; l++) x0[l] = (s[l] + s[32u + l]) + (s[16u + l] + s[48u + l]);
    return red16(x0);
}

/* rlx__dot_f32: blocks, then the tail eight products at a time added in order, then FMAs */
float dot_f32(uint row, uint xb)
{
    uint np = K & ~63u, m8 = np + ((K - np) & ~7u);
    precise float sum = vec_dot_blocks(0u, row, xb, np);
    for (uint i = np; i < m8; i++) {
        precise float p = wplain(0u, row, i) * X[xb + i];
        sum = sum + p;
    }
    for (uint i = m8; i < K; i++) sum = fmaf(wplain(0u, row, i), X[xb + i], sum);
    return sum;
}

/* rlx__dot_f16: blocks, then the tail's products added in double */
float dot_f16(uint row, uint xb)
{
    uint np = K & ~63u;
    precise WIDE sum = WIDE(vec_dot_blocks(1u, row, xb, np));
    for (uint i = np; i < K; i++) {
        precise float p = wplain(1u, row, i) * X[xb + i];
        sum = sum + WIDE(p);
    }
    return float(sum);
}

/* vdpbf16ps on one lane (quant_f.c dpbf16): odd pair first, denormal results flushed */
float dpbf16(float acc, float x0, float y0, float x1, float y1)
{
    precise float a = acc + x1 * y1;
    if (abs(a) < 1.17549435e-38) a = uintBitsToFloat(floatBitsToUint(a) & 0x80000000u);
    precise float b = a + x0 * y0;
    if (abs(b) < 1.17549435e-38) b = uintBitsToFloat(floatBitsToUint(b) & 0x80000000u);
    return b;
}

/* rlx__dot_bf16: two 16-lane chains over 64 values, each reduced and added in double */
float dot_bf16(uint row, uint xb)
{
    precise float c[32];
    for (uint l = 0u; l < 32u; l++) c[l] = 0.0;
    uint i = 0u;
    for (; i + 64u <= K; i += 64u)
        for (uint h = 0u; h < 2u; h++)
            for (uint l = 0u; l < 16u; l++) {
                uint e = i + 32u * h + 2u * l;
                c[16u * h + l] = dpbf16(c[16u * h + l], wplain(30u, row, e), X[xb + e], wplain(30u, row, e + 1u), X[xb + e + 1u]);
            }
    float c0[16], c1[16];
    for (uint l = 0u; l < 16u; l++) { c0[l] = c[l]; c1[l] = c[16u + l]; }
    precise WIDE sum = 0.0;
    sum = sum + WIDE(red16(c0));
    sum = sum + WIDE(red16(c1));
    for (; i < K; i++) {
        precise float p = wplain(30u, row, i) * X[xb + i];
        sum = sum + WIDE(p);
    }
    return float(sum);
}

float dot_plain(uint type, uint row, uint xb)
{
    return type == 0u ? dot_f32(row, xb) : type == 1u ? dot_f16(row, xb) : dot_bf16(row, xb);
}

/* rlx__dot_float_batched (tinyBLAS): one 16-lane accumulator; K not a multiple of 16 (BF16: 32)
 * takes the one-row arithmetic */
float dot_plain_batched(uint type, uint row, uint xb)
{
    precise float a[16];
    for (uint l = 0u; l < 16u; l++) a[l] = 0.0;
    if (type == 30u) {
        if (K % 32u != 0u) return dot_bf16(row, xb);
        for (uint i = 0u; i < K; i += 32u)
            for (uint l = 0u; l < 16u; l++) {
                uint e = i + 2u * l;
                a[l] = dpbf16(a[l], wplain(30u, row, e), X[xb + e], wplain(30u, row, e + 1u), X[xb + e + 1u]);
            }
        return red16(a);
    }
    if (K % 16u != 0u) return dot_plain(type, row, xb);
    for (uint i = 0u; i < K; i += 16u)
        for (uint l = 0u; l < 16u; l++) a[l] = fmaf(wplain(type, row, i + l), X[xb + i + l], a[l]);
    return red16(a);
}

/* dot_q8_0: eight lanes, lane j the integer sum of bytes 4j..4j+3 of each block, one FMA per
 * lane and block with d_w * d_x, then hsum8 */
float dot_q8_0(uint row, uint xb, uint sb)
{
    precise float acc[8];
    for (uint l = 0u; l < 8u; l++) acc[l] = 0.0;
    for (uint b = 0u; b < K / 32u; b++) {
        uint base = row + 34u * b;
        precise float d = wf16(base) * X[sb + b];
        for (uint j = 0u; j < 8u; j++) {
            int s = 0;
            for (uint l = 4u * j; l < 4u * j + 4u; l++) s += ws8(base + 2u + l) * int(X[xb + 32u * b + l]);
            acc[j] = fmaf(float(s), d, acc[j]);
        }
    }
    return hsum8(acc);
}

/* dot_q4_0: one integer sum per block, one FMA per block */
float dot_q4_0(uint row, uint xb, uint sb)
{
    precise float acc = 0.0;
    for (uint b = 0u; b < K / 32u; b++) {
        uint base = row + 18u * b, x = xb + 32u * b;
        int s = 0;
        for (uint j = 0u; j < 16u; j++) {
            uint v = wb(base + 2u + j);
            s += (int(v & 0xFu) - 8) * int(X[x + j]) + (int(v >> 4) - 8) * int(X[x + 16u + j]);
        }
        precise float d = wf16(base) * X[sb + b];
        acc = fmaf(float(s), d, acc);
    }
    return acc;
}

/* Q8_K block sums (actq.comp), the 16-value sums of row tt, as bsums[] of the CPU's blocks */
uint BS;
int bsum(uint i, uint k) { return int(X[BS + 16u * i + k]); }

/* dot_q4_k_folded: integer sums over `fold` sub-blocks at a time, each folded into the value and
 * min chains by an FMA; the chains subtracted at the end */
float dot_q4_k(uint row, uint xb, uint sb, uint fold)
{
    precise float acc = 0.0, accm = 0.0;
    for (uint i = 0u; i < K / 256u; i++) {
        uint base = row + 144u * i;
        float dy = X[sb + i];
        precise float dd = wf16(base) * dy, dm = wf16(base + 2u) * dy;
        for (uint j0 = 0u; j0 < 8u; j0 += fold) {
            int isum = 0, msum = 0;
            for (uint j = j0; j < j0 + fold; j++) {
                float fsc, fm;
                scale_min_k4(j, base + 4u, fsc, fm);
                uint qs = base + 16u + 32u * (j / 2u);
                int s = 0;
                for (uint l = 0u; l < 32u; l++) {
                    uint v = wb(qs + l);
                    s += int((j & 1u) == 1u ? v >> 4 : v & 0xFu) * int(X[xb + 256u * i + 32u * j + l]);
                }
                isum += int(fsc) * s;
                msum += int(fm) * (bsum(i, 2u * j) + bsum(i, 2u * j + 1u));
            }
            acc = fmaf(float(isum), dd, acc);
            accm = fmaf(float(msum), dm, accm);
        }
    }
    precise float r = acc - accm;
    return r;
}

/* rlx__dot_q5_k: eight integer lanes of scaled sums, one FMA per lane and super-block; the mins
 * in a scalar chain added after hsum8 */
float dot_q5_k(uint row, uint xb, uint sb)
{
    precise float acc[8];
    for (uint l = 0u; l < 8u; l++) acc[l] = 0.0;
    precise float summs = 0.0;
    for (uint i = 0u; i < K / 256u; i++) {
        uint base = row + 176u * i;
        float dy = X[sb + i];
        precise float d = dy * wf16(base), dmin = -dy * wf16(base + 2u);
        int lane[8];
        for (uint k = 0u; k < 8u; k++) lane[k] = 0;
        int msum = 0;
        for (uint j = 0u; j < 8u; j++) {
            float fsc, fm;
            scale_min_k4(j, base + 4u, fsc, fm);
            msum += int(fm) * (bsum(i, 2u * j) + bsum(i, 2u * j + 1u));
            for (uint k = 0u; k < 8u; k++) {
                int s = 0;
                for (uint l = 32u * j + 4u * k; l < 32u * j + 4u * k + 4u; l++) {
                    uint p = l % 32u, v = wb(base + 48u + 32u * (j / 2u) + p);
                    v = (j & 1u) == 1u ? v >> 4 : v & 0xFu;
                    v |= ((wb(base + 16u + p) >> j) & 1u) << 4;
                    s += int(v) * int(X[xb + 256u * i + l]);
                }
                lane[k] += int(fsc) * s;
            }
        }
        summs = fmaf(dmin, float(msum), summs);
        for (uint k = 0u; k < 8u; k++) acc[k] = fmaf(d, float(lane[k]), acc[k]);
    }
    precise float r = hsum8(acc) + summs;
    return r;
}

/* rlx__dot_q6_k: eight integer lanes (the level offset 32 through the 16-value block sums), one
 * FMA per lane and super-block, then hsum8 */
float dot_q6_k(uint row, uint xb, uint sb)
{
    precise float acc[8];
    for (uint l = 0u; l < 8u; l++) acc[l] = 0.0;
    for (uint i = 0u; i < K / 256u; i++) {
        uint base = row + 210u * i, xi = xb + 256u * i;
        precise float d = X[sb + i] * wf16(base + 208u);
        int lane[8];
        for (uint k = 0u; k < 8u; k++) {
            lane[k] = -32 * (bsum(i, 2u * k) * ws8(base + 192u + 2u * k) + bsum(i, 2u * k + 1u) * ws8(base + 193u + 2u * k));
        }
        for (uint v = 0u; v < 8u; v++)
            for (uint k = 0u; k < 8u; k++) {
                int s = 0;
                for (uint l = 32u * v + 4u * k; l < 32u * v + 4u * k + 4u; l++) {
                    uint half_ = l / 128u, r = l % 128u, quarter = r / 32u, p = r % 32u;
                    uint lo = wb(base + 64u * half_ + 32u * (quarter & 1u) + p);
                    lo = quarter < 2u ? lo & 0xFu : lo >> 4;
                    uint q = lo | (((wb(base + 128u + 32u * half_ + p) >> (2u * quarter)) & 3u) << 4);
                    s += int(q) * int(X[xi + l]);
                }
                lane[k] += ws8(base + 192u + 2u * v + (k >= 4u ? 1u : 0u)) * s;
            }
        for (uint k = 0u; k < 8u; k++) acc[k] = fmaf(d, float(lane[k]), acc[k]);
    }
    return hsum8(acc);
}

void main()
{
    uint n = gl_GlobalInvocationID.x, t0 = gl_WorkGroupID.y * TT, type = P[0];
    if (n >= P[2]) return;
    K = P[1];
    uint nt = min(TT, P[6] - t0), nb = K / (type >= 12u && type <= 14u ? 256u : 32u);
    uint row = P[4] + n * P[3], col = P[5] + n;
    for (uint t = 0u; t < nt; t++) {
        uint tt = t0 + t, xb = P[7] + tt * K, sb = P[10] + tt * nb;
        bool batched = row_batched(P[11], P[12], tt);
        BS = P[13] + tt * (K / 16u);
        float r;
        if (type == 0u || type == 1u || type == 30u) r = batched ? dot_plain_batched(type, row, xb) : dot_plain(type, row, xb);
        else if (type == 8u) r = dot_q8_0(row, xb, sb);
        else if (type == 2u) r = dot_q4_0(row, xb, sb);
        else if (type == 12u) r = dot_q4_k(row, xb, sb, batched ? 2u : 8u);
        else if (type == 13u) r = dot_q5_k(row, xb, sb);
        else r = dot_q6_k(row, xb, sb);
        Y[P[8] + tt * P[9] + col] = apply_chain(r, tt, col);
    }
}
