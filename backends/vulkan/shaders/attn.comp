/* attn.comp - causal (optionally sliding-window) attention of one (token, head) per workgroup
 * over the paged KV pool (kv.glsl), in the CPU backend's arithmetic (backends/cpu/attention.c,
 * llama.cpp without flash attention) so results are bit-identical to it:
 *   scores   q rounded to f16 for an f16 pool; per position the one-row dot product
 *            (ggml_vec_dot: 4 x 16 lanes per 64, red16, tail) for decode tokens, tinyBLAS's
 *            (16 lanes) for prompt tokens;
 *   softmax  softcap then scale, max over the valid positions, vexp(x - max), 16-position
 *            chunk sums (red16) added in double in position order, times (float)(1 / sum),
 *            then p rounded to f16 for an f16 pool;
 *   V^T . p  per channel, positions from a multiple of 64 as the reduction: 64 lanes combined
 *            (a0 + a2) + (a1 + a3) then red16 for decode tokens, 16 lanes then red16 for
 *            prompt tokens (one-row when head_dim % 4, as tinyBLAS declines it).
 * A Q8_0 pool is read as f16(d) * qs with f32 arithmetic, q and p unrounded. Masked positions
 * contribute exact zeros on the CPU, so they are skipped here. Scores are recomputed in each
 * pass (the same bits) instead of stored. head_dim <= 512.
 * P: 0 n_head, 1 group, 2 head_dim, 3 kv_cols, 4 window, 5 scale, 6 softcap, 8 q off, 9 y off,
 * 10 token kinds, 11 no cache (encoders: K and V are the step's rows, bound as the pool at word
 * offsets 12 / 13; a sequence is contiguous in the batch in position order, slot = its first
 * token + position, and each row sees the whole sequence); 33..35 the pool (kv.glsl). */
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 1) buffer Y_ { float Y[]; };
layout(std430, set = 0, binding = 2) readonly buffer Q_ { float Q[]; };
#define KV_QUAL readonly
#include "kv.glsl"
shared float qs[512];
shared float red[64];
shared float pp[64];
shared uint vchunk[64], vrow[64]; /* where the V rows of the block's positions live */
shared float inv_sh;
int g_base; /* no cache: the batch index of the sequence's first token */

uint slot_of(int seq, int j)
{
    return P[11] != 0u ? uint(g_base + j) : kv_slot(seq, j, KV_BLOCK_SIZE);
}

/* value `col` of the K (v false) or V row at byte `row` of chunk c */
float kv_val(bool v, uint c, uint row, uint col)
{
    float r = 0.0;
    if (P[11] != 0u) row += (v ? P[13] : P[12]) * 4u;
#define KV_VAL(BUF)                                                                               \
    if (KV_TYPE == KV_F32) r = KV_F32_AT(BUF, row, col);                                          \
    else if (KV_TYPE == KV_F16) r = KV_F16_AT(BUF, row, col);                                     \
    else { precise float x = KV_Q8_AT(BUF, row, col); r = x; }
    KV_SELECT(v, c, KV_VAL)
    return r;
}

/* q . K[j] of head hk: rlx__dot_f16 / rlx__dot_f32 (one-row) or rlx__dot_float_batched */
float qk(int seq, int j, uint hk, uint hd, bool batched)
{
    kv_loc l = kv_locate(slot_of(seq, j));
    uint c0 = hk * hd;
    bool f16 = KV_TYPE == KV_F16;
    if (batched && hd % 16u == 0u) {
        precise float a[16];
        for (uint i = 0u; i < 16u; i++) a[i] = 0.0;
        for (uint i = 0u; i < hd; i += 16u)
            for (uint k = 0u; k < 16u; k++) a[k] = fmaf(kv_val(false, l.chunk, l.byte_off, c0 + i + k), qs[i + k], a[k]);
        return red16(a);
    }
    uint np = hd & ~63u;
    precise float s[64];
    for (uint i = 0u; i < 64u; i++) s[i] = 0.0;
    for (uint i = 0u; i < np; i += 64u)
        for (uint k = 0u; k < 64u; k++) s[k] = fmaf(kv_val(false, l.chunk, l.byte_off, c0 + i + k), qs[i + k], s[k]);
    precise float x0[16];
    for (uint k = 0u; k < 16u; k++) x0[k] = (s[k] + s[32u + k]) + (s[16u + k] + s[48u + k]);
    if (f16) {
        precise WIDE sum = WIDE(red16(x0));
        for (uint i = np; i < hd; i++) {
            precise float p = kv_val(false, l.chunk, l.byte_off, c0 + i) * qs[i];
            sum = sum + WIDE(p);
        }
        return float(sum);
    }
    precise float sum = red16(x0);
    uint m8 = np + ((hd - np) & ~7u);
    for (uint i = np; i < m8; i++) {
        precise float p = kv_val(false, l.chunk, l.byte_off, c0 + i) * qs[i];
        sum = sum + p;
    }
    for (uint i = m8; i < hd; i++) sum = fmaf(kv_val(false, l.chunk, l.byte_off, c0 + i), qs[i], sum);
    return sum;
}

/* scale * softcap(score), the CPU's order */
float score(int seq, int j, uint hk, uint hd, bool batched)
{
    precise float d = qk(seq, j, hk, hd, batched);
    float cap = PF(6);
    if (cap > 0.0) d = cap * tanhf_libm(d * div_rn(1.0, cap));
    d = d * PF(5);
    return d;
}

void main()
{
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint n_head = P[0], hd = P[2], hk = h / P[1];
    bool f16 = KV_TYPE == KV_F16, batched = B[P[10] + t] != 1;
    int p = B[POS_OFF + t], seq = B[SEQ_OFF + t], window = int(P[4]);
    int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0, j0 = lo / 64 * 64;
    int hi = p; /* the last position this row sees */
    bool qk_batched = batched && P[11] == 0u; /* no cache: K.q one-row for every row, as the CPU */
    if (P[11] != 0u) {
        uint te = t;
        while (te + 1u < N_TOKENS && B[SEQ_OFF + te + 1u] == seq) te++;
        g_base = int(t) - p;
        hi = p + int(te - t);
    }
    for (uint i = tid; i < hd; i += 64u) {
        float q = Q[P[8] + t * n_head * hd + h * hd + i];
        qs[i] = f16 ? f16_round(q) : q;
    }
    barrier();

    /* the maximum over the valid positions */
    float m = uintBitsToFloat(0xff800000u);
    for (int j = lo + int(tid); j <= hi; j += 64) m = max(m, score(seq, j, hk, hd, qk_batched));
    red[tid] = m;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1) {
        if (tid < w) red[tid] = max(red[tid], red[tid + w]);
        barrier();
    }
    float mx = red[0];
    barrier();

    /* 16-position chunk sums, 64 chunks per round, added in order in double by invocation 0 */
    precise WIDE sum = 0.0;
    int c_end = hi / 16;
    for (int cb = j0 / 16; cb <= c_end; cb += 64) {
        int c = cb + int(tid);
        float cs = 0.0;
        if (c <= c_end) {
            float e[16];
            for (int k = 0; k < 16; k++) {
                int j = 16 * c + k;
                e[k] = j >= lo && j <= hi ? vexp(score(seq, j, hk, hd, qk_batched) - mx) : 0.0;
            }
            cs = red16(e);
        }
        red[tid] = cs;
        barrier();
        if (tid == 0u)
            for (int k = 0; k < 64 && cb + k <= c_end; k++) sum = sum + WIDE(red[k]);
        barrier();
    }
    if (tid == 0u) {
        precise WIDE iv = 1.0 / sum;
        inv_sh = float(iv);
    }
    barrier();
    float inv = inv_sh;

    /* V^T . p: channels tid, tid + 64, ... one group at a time, positions in blocks of 64 */
    bool pv_batched = batched && hd % 4u == 0u;
    for (uint g = 0u; g * 64u < hd; g++) {
        uint ch = g * 64u + tid;
        precise float s[64];
        for (uint k = 0u; k < 64u; k++) s[k] = 0.0;
        for (int jb = j0; jb <= hi; jb += 64) {
            int j = jb + int(tid);
            float pj = 0.0;
            kv_loc l = kv_loc(0u, 0u);
            if (j >= lo && j <= hi) {
                precise float pr = vexp(score(seq, j, hk, hd, qk_batched) - mx) * inv;
                pj = f16 ? f16_round(pr) : pr;
                l = kv_locate(slot_of(seq, j));
            }
            barrier();
            pp[tid] = pj;
            vchunk[tid] = l.chunk;
            vrow[tid] = l.byte_off;
            barrier();
            if (ch < hd)
                for (int k = 0; k < 64; k++) {
                    int jj = jb + k;
                    if (jj < lo || jj > hi) continue;
                    uint a = pv_batched ? uint(k) % 16u : uint(k);
                    s[a] = fmaf(kv_val(true, vchunk[k], vrow[k], hk * hd + ch), pp[k], s[a]);
                }
        }
        if (ch < hd) {
            precise float x0[16];
            if (pv_batched)
                for (uint k = 0u; k < 16u; k++) x0[k] = s[k];
            else
                for (uint k = 0u; k < 16u; k++) x0[k] = (s[k] + s[32u + k]) + (s[16u + k] + s[48u + k]);
            Y[P[9] + t * n_head * hd + h * hd + ch] = red16(x0);
        }
    }
}
