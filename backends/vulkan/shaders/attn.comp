/* attn.comp - causal (optionally sliding-window) attention of one (token, head) per
 * workgroup over the paged KV pool (kv.glsl), in two passes like the CPU backend: first the
 * maximum and the sum of exp(score - max) (merged online across invocations), then the
 * weighted sum of V with p = exp(score - max) / sum (q and p rounded to f16 when the pool is
 * f16, as the CPU does; a Q8_0 pool is read as its dequantized values, q and p unrounded).
 * Scores: softcap first, then scale (the CPU order). head_dim <= 512.
 * P: 0 n_head, 1 group, 2 head_dim, 3 kv_cols, 4 window, 5 scale, 6 softcap, 8 q off, 9 y off;
 * 33..35 the pool (kv.glsl). */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer Q_ { float Q[]; };
#define KV_QUAL readonly
#include "kv.glsl"
shared float qs[512];
shared float pm[64];
shared float pl[64];
shared float pp[64];

float score(int seq, int j, uint hk, uint hd)
{
    kv_loc l = kv_locate(kv_slot(seq, j, KV_BLOCK_SIZE));
    uint row = l.byte_off, c0 = hk * hd;
    precise float d = 0.0; /* no fused multiply-add: the CPU's loop has none */
#define QK(BUF)                                                                                   \
    if (KV_TYPE == KV_F32) { for (uint i = 0u; i < hd; i++) d += qs[i] * KV_F32_AT(BUF, row, c0 + i); }   \
    else if (KV_TYPE == KV_F16) { for (uint i = 0u; i < hd; i++) d += qs[i] * KV_F16_AT(BUF, row, c0 + i); } \
    else { for (uint i = 0u; i < hd; i++) d += qs[i] * KV_Q8_AT(BUF, row, c0 + i); }
    KV_SELECT(false, l.chunk, QK)
    float cap = PF(6);
    if (cap > 0.0) d = cap * tanh_safe(d * (1.0 / cap)); /* the CPU scales by the reciprocal */
    return d * PF(5);
}

void main()
{
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint n_head = P[0], hd = P[2], hk = h / P[1];
    bool f16 = KV_TYPE == KV_F16;
    int p = B[POS_OFF + t], seq = B[SEQ_OFF + t], window = int(P[4]);
    int j0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    for (uint i = tid; i < hd; i += 64u) {
        float q = Q[P[8] + t * n_head * hd + h * hd + i];
        qs[i] = f16 ? f16_round(q) : q;
    }
    barrier();
    /* pass 1: running max and sum per invocation, then merged */
    float m = -1.0 / 0.0, l = 0.0;
    for (int j = j0 + int(tid); j <= p; j += 64) {
        float s = score(seq, j, hk, hd);
        if (s > m) { l = l * exp(m - s) + 1.0; m = s; }
        else l += exp(s - m);
    }
    pm[tid] = m;
    pl[tid] = l;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1) {
        if (tid < w) {
            float m1 = pm[tid], m2 = pm[tid + w], l1 = pl[tid], l2 = pl[tid + w];
            float mm = max(m1, m2);
            pm[tid] = mm;
            pl[tid] = (l1 > 0.0 ? l1 * exp(m1 - mm) : 0.0) + (l2 > 0.0 ? l2 * exp(m2 - mm) : 0.0);
        }
        barrier();
    }
    float M = pm[0], inv = 1.0 / pl[0];
    /* pass 2: tiles of 64 positions; invocation tid owns dims tid, tid + 64, ... */
    precise float acc[8];
    for (uint k = 0u; k < 8u; k++) acc[k] = 0.0;
    for (int jb = j0; jb <= p; jb += 64) {
        int j = jb + int(tid);
        float pj = 0.0;
        if (j <= p) {
            pj = exp(score(seq, j, hk, hd) - M) * inv;
            if (f16) pj = f16_round(pj);
        }
        barrier();
        pp[tid] = pj;
        barrier();
        int nj = min(64, p - jb + 1);
        for (int jj = 0; jj < nj; jj++) {
            kv_loc l = kv_locate(kv_slot(seq, jb + jj, KV_BLOCK_SIZE));
            uint row = l.byte_off;
            float w = pp[jj];
#define PV_LOOP(BUF, AT)                                                                          \
            for (uint k = 0u; k < 8u; k++) {                                                      \
                uint i = tid + 64u * k;                                                           \
                if (i < hd) acc[k] += w * AT(BUF, row, hk * hd + i);                             \
            }
#define PV(BUF)                                                                                   \
            if (KV_TYPE == KV_F32) { PV_LOOP(BUF, KV_F32_AT) } else if (KV_TYPE == KV_F16) { PV_LOOP(BUF, KV_F16_AT) } \
            else { PV_LOOP(BUF, KV_Q8_AT) }
            KV_SELECT(true, l.chunk, PV)
        }
    }
    for (uint k = 0u; k < 8u; k++) {
        uint i = tid + 64u * k;
        if (i < hd) Y[P[9] + t * n_head * hd + h * hd + i] = acc[k];
    }
}
