/* kern_x86_q.h - the x86 kernels of rlx_matmul_rows for the quantized types, included by
 * kern_x86.h (same KPFX / KVNNI / KAVX512 settings).
 *
 * Every kernel repeats the float operations of the scalar reference in quant.c / quant_k.c,
 * which are those of llama.cpp's x86 kernels, in their order: the results are bit-identical on
 * every path and to llama.cpp. Two shapes of arithmetic exist:
 *  - lanes (Q8_0, Q5_K, Q6_K): eight float lanes per output, lane j holding the exact integer
 *    sum of bytes 4j..4j+3 of each 32-byte chunk of a block, updated by one fused multiply-add
 *    per block, reduced at the end in ggml's hsum_float_8 order;
 *  - rows (Q4_0, Q4_K): one float chain per output, updated by one fused multiply-add per block
 *    with the block's whole integer sum. These run on eight weight rows at a time so that the
 *    eight chains fill the lanes of one vector (a transposing reduction of eight integer
 *    vectors per block replaces eight horizontal sums). On the avx512 paths Q4_K at two or
 *    more activation rows interleaves the eight weight rows instead, so that no reduction is
 *    left (kern_x86_512.h, tile8_q4_k_il).
 * Integer sums are exact, so any order of integer additions gives the same lane values; only
 * the float operations are pinned. Per output the arithmetic never depends on the tile, the row
 * range or T: results are batch invariant. */

/* ---- shared helpers ---- */

/* Lane r of the result: the sum of the eight int32 lanes of v[r]. */
KINLINE __m256i reduce8_epi32(const __m256i v[8])
{
    const __m256i a = _mm256_hadd_epi32(v[0], v[1]), b = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i c = _mm256_hadd_epi32(v[4], v[5]), d = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    /* ab = [v0..v3 low halves | v0..v3 high halves], cd the same for v4..v7 */
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

/* The eight f16 scales at byte offset `off` of eight blocks, as floats. */
KINLINE __m256 scales8(const void *const *b, size_t off)
{
    uint16_t h[8];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) memcpy(&h[r], (const char *)b[r] + off, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* The eight 6-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K/Q5_K block, unpacked
 * in-register (same result as rlx__scale_min_k4). */
KINLINE __m128i k4_scales_v(const uint8_t packed[12])
{
    /* 16-byte load: the 4 bytes past the scales are the block's next field, ignored below (a
     * 12-byte copy would stall store forwarding) */
    const __m128i x = _mm_loadu_si128((const __m128i *)packed);
    /* A = [x0-3, x8-11, x4-7, x8-11], B = [0, x0-3, 0, x4-7] */
    const __m128i A = _mm_shuffle_epi8(x, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i B = _mm_shuffle_epi8(x, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i lo = _mm_or_si128(
        _mm_and_si128(A, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
        _mm_and_si128(_mm_srli_epi16(A, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    const __m128i hi = _mm_srli_epi16(_mm_and_si128(B, _mm_set1_epi8((char)0xC0)), 2); /* top 2 bits -> bits 4-5 */
    return _mm_or_si128(lo, hi);
}

/* Sum of the eight int32 lanes (exact). */
KINLINE int32_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* A tile reads its weight rows side by side: several short (0.5-3 KiB) streams that the
 * hardware prefetchers barely train on before they end, so the loads stall on memory (Q8_0
 * decode ran at a third of the bandwidth F16 reaches). The rows of the tile PF_TILES ahead are
 * contiguous in memory; each block step prefetches its share of them (`step` bytes: one block
 * of each row) with a touch every 48 bytes, so no 64-byte line falls between two touches (one
 * per 64 bytes ran slower: Q4_K 87 vs 93 tok/s). pf NULL: no prefetch (the tile is in cache).
 * Prefetches never fault, so running past the weights is harmless. */
#define PF_TILES 2
#define PREFETCH_STEP(pf, i, step)                                                              \
    do {                                                                                        \
        const char *pf_ = (pf) + (size_t)(i) * (step);                                          \
        if (pf) _Pragma("GCC unroll 32") for (size_t o_ = 0; o_ < (step); o_ += 48) _mm_prefetch(pf_ + o_, _MM_HINT_T0); \
    } while (0)
#define Q8_0_PREFETCH(pf, ib) PREFETCH_STEP(pf, ib, Q8_0_ROWS * sizeof(rlx_block_q8_0))

/* Row n's first block in a Q8_0 weight of wrow-byte rows: the GGUF layout (row after row), or
 * the packed one of repack.h (groups of Q8_0_ROWS rows, block by block), where a row's blocks
 * are Q8_0_ROWS blocks apart (the tiles' `bstep`). A tile of the packed layout reads one stream,
 * and the rows PF_TILES tiles ahead are still contiguous, so the prefetch is the same. */
#define Q8_0_ROW(w, wrow, packed, n)                                                                         \
    ((packed) ? (const rlx_block_q8_0 *)((const char *)(w) + (size_t)((n) / Q8_0_ROWS) * Q8_0_ROWS * (wrow)) + \
                    (n) % Q8_0_ROWS                                                                         \
              : (const rlx_block_q8_0 *)((const char *)(w) + (size_t)(n) * (wrow)))

#if KAVX512
#include "backends/cpu/kern_x86_512.h"
#endif

/* ---- Q8_0 (lanes): Q8_0_ROWS weight rows x nt activation rows; res[t][u] = output (row u, t) ---- */

#if !KAVX512
#define Q8_0_ROWS 2
#define Q8_0_NT 4
/* vec (three or four activation rows, prefill): the eight scale products of a block come from
 * one f16 conversion per side and one vector multiply (lane 4u + t), each pair (u, t) then
 * taking its product with one in-lane shuffle; a scalar conversion and multiply per pair (the
 * other form, kept for one or two rows, decode, where the vector costs more than it saves) put
 * a third of the tile's work on the two pipes that also run the integer products and the
 * fused multiply-adds (prefill +13-19%, RESULTS 42). Both forms multiply the same two floats.
 * The f16 scales are gathered in general registers: built in memory, the 16-byte load waited
 * on a failed store forward every block. With vec, rows t >= nt read the driver's placeholder
 * blocks (its first row), never past them. */
KINLINE void tile_rows_q8_0(const rlx_block_q8_0 *const *w, int64_t bstep, const rlx_block_q8_0 *const *a, int64_t nb,
                            const char *pf, float res[][Q8_0_ROWS], const bool vec, const int nt)
{
    __m256 acc[4][2];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        Q8_0_PREFETCH(pf, ib);
        __m256i wq[2], wa[2];
        float dw[2];
        #pragma GCC unroll 2
        for (int u = 0; u < 2; u++) {
            wq[u] = _mm256_loadu_si256((const __m256i *)w[u][ib * bstep].qs);
            wa[u] = _mm256_abs_epi8(wq[u]); /* |w| as unsigned, the sign moved onto the activation */
            if (!vec) dw[u] = f16(w[u][ib * bstep].d);
        }
        __m256 ph[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}; /* vec: products p(u, t), lane t of each 128 bits */
        if (vec) {
            uint16_t hd[4];
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) memcpy(&hd[t], &a[t][ib].d, 2);
            const __m128 da4 = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)(hd[0] | (uint64_t)hd[1] << 16 |
                                                                            (uint64_t)hd[2] << 32 | (uint64_t)hd[3] << 48)));
            const __m256 p8 = _mm256_mul_ps(_mm256_set_m128(da4, da4),
                                            _mm256_set_m128(_mm_set1_ps(f16(w[1][ib * bstep].d)), _mm_set1_ps(f16(w[0][ib * bstep].d))));
            ph[0] = _mm256_permute2f128_ps(p8, p8, 0x00);
            ph[1] = _mm256_permute2f128_ps(p8, p8, 0x11);
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m256i aq = _mm256_loadu_si256((const __m256i *)a[t][ib].qs);
            const float da = vec ? 0.0f : f16(a[t][ib].d);
            #pragma GCC unroll 2
            for (int u = 0; u < 2; u++) {
                const __m256i s = DOT_U8S8(_mm256_setzero_si256(), wa[u], _mm256_sign_epi8(aq, wq[u]));
                const __m256 d = vec ? _mm256_shuffle_ps(ph[u], ph[u], t * 0x55) : _mm256_set1_ps(dw[u] * da);
                acc[t][u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc[t][u]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) { res[t][0] = hsum_ps(acc[t][0]); res[t][1] = hsum_ps(acc[t][1]); }
}
#endif

/* ---- Q4_0 (rows): eight weight rows x nt activation rows; res[t] lane r = output (r, t) ---- */

#if !KAVX512
KINLINE void tile8_q4_0(const rlx_block_q4_0 *const *w, const rlx_block_q8_0 *const *a, int64_t nb,
                        const char *pf, __m256 *res, const int nt)
{
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m256 acc[4];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        PREFETCH_STEP(pf, ib, 8 * sizeof(rlx_block_q4_0));
        __m256i q[8]; /* levels 0..15; the -8 offset comes from nc below */
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            const __m128i raw = _mm_loadu_si128((const __m128i *)w[r][ib].qs);
            q[r] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
        }
        const __m256 dw = scales8((const void *const *)w, (size_t)ib * sizeof(rlx_block_q4_0));
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m256i aq = _mm256_loadu_si256((const __m256i *)a[t][ib].qs);
            const __m256i nc = _mm256_sub_epi32(_mm256_setzero_si256(),
                                                DOT_U8S8(_mm256_setzero_si256(), _mm256_set1_epi8(8), aq));
            __m256i v[8];
            #pragma GCC unroll 8
            for (int r = 0; r < 8; r++) v[r] = DOT_U8S8(nc, q[r], aq);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(v)), _mm256_mul_ps(dw, _mm256_set1_ps(f16(a[t][ib].d))),
                                     acc[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = acc[t];
}
#endif

/* ---- K formats (activations Q8_K) ---- */

#if !KAVX512
/* The integer lanes of one Q4_K/Q5_K super-block against nt activation rows: lane[t][p] holds
 * lanes 0..7 (bytes 4j..4j+3 of each 32-value sub-block times its scale) of sub-blocks 2p and
 * 2p+1, mins[t] the mins times the block sums (lane k: sub-block k). q[8]: the levels. */
KINLINE void k45_lanes(const __m256i q[8], const uint8_t packed[12], const rlx_block_q8_k *const *a, int64_t i,
                       __m256i lane[][4], __m256i *mins, const bool pairs, const int nt)
{
    const __m128i sm = k4_scales_v(packed);
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)); /* m0 m0 m1 m1 ... */
    const __m256i sc16 = _mm256_cvtepu8_epi16(sm);
    /* broadcast word j of sc16: a 64-bit lane broadcast, then an in-lane word shuffle */
    const __m256i sc_lo = _mm256_permute4x64_epi64(sc16, 0x00), sc_hi = _mm256_permute4x64_epi64(sc16, 0x55);
    __m256i scv[8];
    #pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        scv[j] = _mm256_shuffle_epi8(j < 4 ? sc_lo : sc_hi, _mm256_set1_epi16((short)(((2 * (j & 3) + 1) << 8) | (2 * (j & 3)))));
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const rlx_block_q8_k *y = &a[t][i];
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            if (pairs && j % 2 == 0) acc = _mm256_setzero_si256();
            acc = DOT_I16(acc, _mm256_maddubs_epi16(q[j], _mm256_loadu_si256((const __m256i *)(y->qs + 32 * j))), scv[j]);
            if (pairs && j % 2) lane[t][j / 2] = acc;
        }
        if (!pairs) lane[t][0] = acc;
        mins[t] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins16);
    }
}

KINLINE void q4_k_levels(const rlx_block_q4_k *b, __m256i q[8])
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * k));
        q[2 * k] = _mm256_and_si256(v, m4);
        q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
}

KINLINE void q5_k_levels(const rlx_block_q5_k *b, __m256i q[8])
{
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)b->qh);
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * k));
        /* bit j of qh[l] is the fifth bit of sub-block j */
        const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), one);
        const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k + 1), one);
        q[2 * k] = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_slli_epi16(h0, 4));
        q[2 * k + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_slli_epi16(h1, 4));
    }
}

KINLINE void q4_k_rows_lanes(const rlx_block_q4_k *b, const rlx_block_q8_k *const *a, int64_t i, __m256i lane[][4],
                             __m256i *mins, const bool pairs, const int nt)
{
    __m256i q[8];
    q4_k_levels(b, q);
    k45_lanes(q, b->scales, a, i, lane, mins, pairs, nt);
}

KINLINE void q5_k_rows_lanes(const rlx_block_q5_k *b, const rlx_block_q8_k *const *a, int64_t i, __m256i lane[][4],
                             __m256i *mins, const int nt)
{
    __m256i q[8];
    q5_k_levels(b, q);
    k45_lanes(q, b->scales, a, i, lane, mins, false, nt);
}

/* Lane k: bytes 4k..4k+3 of every 32-value chunk times its scale, less 32 x (block sums 2k and
 * 2k+1 times their scales), as ggml's q6_K kernel. */
KINLINE void q6_k_rows_lanes(const rlx_block_q6_k *b, const rlx_block_q8_k *const *a, int64_t i, __m256i *lane,
                             const int nt)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    __m256i acc[4];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_si256();
    /* a half super-block at a time (four chunks, their four scale vectors): the whole block's
     * eight chunks and eight scale vectors took all sixteen registers and spilled; the lanes are
     * integer sums, so the order of the halves changes no bit */
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        __m256i q[4], scv[4];
        /* levels 0..63 (the -32 offset is applied through the block sums) */
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
        q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
        /* scv[v] = [scale 2v' x 8 | scale 2v'+1 x 8] for chunk v' = 4h + v: both words sit in
         * 64-bit lane v'/2 */
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const __m256i sq = _mm256_permute4x64_epi64(sc16, (2 * h + v / 2) * 0x55);
            const short lo = (short)(((4 * (v & 1) + 1) << 8) | (4 * (v & 1))), hi = (short)(lo + 0x0202);
            scv[v] = _mm256_shuffle_epi8(sq, _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi)));
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const rlx_block_q8_k *y = &a[t][i];
            #pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                acc[t] = DOT_I16(acc[t], _mm256_maddubs_epi16(q[v], _mm256_loadu_si256((const __m256i *)(y->qs + 32 * (4 * h + v)))), scv[v]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[t][i].bsums), sc16);
        lane[t] = _mm256_sub_epi32(acc[t], _mm256_slli_epi32(corr, 5));
    }
}
#endif

/* Q5_K (lanes): one fused multiply-add per lane and super-block; the mins in a scalar chain. */
KINLINE void tile_q5_k(const rlx_block_q5_k *w, const rlx_block_q8_k *const *a, int64_t nb, const char *pf, float *res,
                       const int nt)
{
    __m256 acc[4];
    float summs[4] = {0, 0, 0, 0};
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m256i lane[4][4], mins[4];
        PREFETCH_STEP(pf, i, sizeof(rlx_block_q5_k));
        q5_k_rows_lanes(&w[i], a, i, lane, mins, nt);
        const float dw = f16(w[i].d), dmw = f16(w[i].dmin);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const float dy = a[t][i].d;
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dy * dw), _mm256_cvtepi32_ps(lane[t][0]), acc[t]);
            summs[t] = fmaf(-dy * dmw, (float)hsum_epi32(mins[t]), summs[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = hsum_ps(acc[t]) + summs[t];
}

/* Q6_K (lanes). */
KINLINE void tile_q6_k(const rlx_block_q6_k *w, const rlx_block_q8_k *const *a, int64_t nb, const char *pf, float *res,
                       const int nt)
{
    __m256 acc[4];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m256i lane[4];
        PREFETCH_STEP(pf, i, sizeof(rlx_block_q6_k));
        q6_k_rows_lanes(&w[i], a, i, lane, nt);
        const float dw = f16(w[i].d);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(a[t][i].d * dw), _mm256_cvtepi32_ps(lane[t]), acc[t]);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = hsum_ps(acc[t]);
}

/* m[r] lane j: row r's mins of sub-block j times its block sums; out[p] lane r: the sum of
 * lanes 2p and 2p+1 of m[r] (the mins of pair p), for the batched Q4_K chains. */
KINLINE void mins_pairs8(const __m256i m[8], __m256i out[4])
{
    __m256 e[2], o[2];
    for (int h = 0; h < 2; h++) {
        /* H = [r p0, r p1, r' p0, r' p1 | r p2, r p3, r' p2, r' p3] for rows r, r' = r + 1 */
        const __m256i h0 = _mm256_hadd_epi32(m[4 * h], m[4 * h + 1]), h1 = _mm256_hadd_epi32(m[4 * h + 2], m[4 * h + 3]);
        const __m256 x = _mm256_castsi256_ps(_mm256_unpacklo_epi64(h0, h1)), y = _mm256_castsi256_ps(_mm256_unpackhi_epi64(h0, h1));
        e[h] = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0)); /* rows 0 2 1 3 (+4h): p0 | p2 */
        o[h] = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)); /* p1 | p3 */
    }
    const __m256i order = _mm256_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7);
    out[0] = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_permute2f128_ps(e[0], e[1], 0x20)), order);
    out[1] = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_permute2f128_ps(o[0], o[1], 0x20)), order);
    out[2] = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_permute2f128_ps(e[0], e[1], 0x31)), order);
    out[3] = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_permute2f128_ps(o[0], o[1], 0x31)), order);
}

/* Q4_K (rows): per super-block the whole integer sum and the mins sum of each of eight weight
 * rows, each into its own float chain; res[t] lane r = output (r, t). batched: one update of
 * each chain per pair of sub-blocks, as llama.cpp's gemm. */
KINLINE void tile8_q4_k(const rlx_block_q4_k *const *w, const rlx_block_q8_k *const *a, int64_t nb,
                        const char *pf, __m256 *res, const bool batched, const int nt)
{
    __m256 acc[4], accm[4];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        PREFETCH_STEP(pf, i, 8 * sizeof(rlx_block_q4_k));
        __m256i lane[4][4][8], mins[4][8]; /* [t][pair][row], [t][row] */
        for (int r = 0; r < 8; r++) {
            __m256i l[4][4], m[4];
            q4_k_rows_lanes(&w[r][i], a, i, l, m, batched, nt);
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                mins[t][r] = m[t];
                for (int p = 0; p < (batched ? 4 : 1); p++) lane[t][p][r] = l[t][p];
            }
        }
        const __m256 dw = scales8((const void *const *)w, (size_t)i * sizeof(rlx_block_q4_k));
        const __m256 dmw = scales8((const void *const *)w, (size_t)i * sizeof(rlx_block_q4_k) + 2);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m256 dy = _mm256_set1_ps(a[t][i].d), sc = _mm256_mul_ps(dw, dy), scm = _mm256_mul_ps(dmw, dy);
            if (!batched) {
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(lane[t][0])), sc, acc[t]);
                accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(mins[t])), scm, accm[t]);
                continue;
            }
            __m256i mp[4];
            mins_pairs8(mins[t], mp);
            for (int p = 0; p < 4; p++) {
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(lane[t][p])), sc, acc[t]);
                accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mp[p]), scm, accm[t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = _mm256_sub_ps(acc[t], accm[t]);
}

/* ---- driver of the quantized types ---- */

#define BY_NT_Q(call, ...)                                        \
    switch (nt) {                                                 \
    case 1: call(__VA_ARGS__, 1); break;                          \
    case 2: call(__VA_ARGS__, 2); break;                          \
    case 3: call(__VA_ARGS__, 3); break;                          \
    default: call(__VA_ARGS__, 4); break;                         \
    }
/* up to eight activation rows */
#define BY_NT_8(call, ...)                                        \
    switch (nt) {                                                 \
    case 1: call(__VA_ARGS__, 1); break;                          \
    case 2: call(__VA_ARGS__, 2); break;                          \
    case 3: call(__VA_ARGS__, 3); break;                          \
    case 4: call(__VA_ARGS__, 4); break;                          \
    case 5: call(__VA_ARGS__, 5); break;                          \
    case 6: call(__VA_ARGS__, 6); break;                          \
    case 7: call(__VA_ARGS__, 7); break;                          \
    default: call(__VA_ARGS__, 8); break;                         \
    }
/* up to Q8_0_NT activation rows */
#ifndef Q8_0_NT
#error "Q8_0_NT must be defined by the Q8_0 tile above"
#endif
#if Q8_0_NT > 4
#define BY_NT_Q8 BY_NT_8
#else
#define BY_NT_Q8 BY_NT_Q
#endif

/* packed: a Q8_0 weight in the packed layout of repack.h (Q8_0_ROW) */
static void matmul_rows_q(int type, bool batched, bool packed, const void *w, int64_t n0, int64_t n1, const void *act,
                          size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo)
{
    const size_t wrow = rlx_row_bytes(type, K);
    const int64_t nbl = K / RLX_QK, nbk = K / RLX_QK_K;
    const bool rows8 = type == RLX_Q4_0 || type == RLX_Q4_K;
    /* Chunks of weight rows small enough for L2 are visited by every activation tile in turn:
     * weights come from memory once, activations from memory once per chunk. */
    const int64_t chunk = RLX_MAX((int64_t)8, (int64_t)((256 << 10) / wrow) / 8 * 8);
    for (int64_t c0 = n0; c0 < n1; c0 += chunk) {
        const int64_t c1 = RLX_MIN(n1, c0 + chunk);
#if KAVX512
        /* the interleaved Q4_K tile shares its interleave by up to eight activation rows (one
         * activation row alone keeps the other tile: nothing to share the interleave with) */
        const bool il = type == RLX_Q4_K && (batched || T > 1);
#else
        const bool il = false;
#endif
        const int64_t tstep = type == RLX_Q8_0 ? Q8_0_NT : il ? 8 : 4;
        for (int64_t t0 = 0; t0 < T; t0 += tstep) {
            const int nt = (int)RLX_MIN(tstep, T - t0);
            const void *ap[8] = {act, act, act, act, act, act, act, act};
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) ap[t] = (const char *)act + (size_t)(t0 + t) * act_row_bytes;
            if (rows8) {
                for (int64_t n = c0; n < c1; n += 8) {
                    const void *wr[8];
                    /* past the range's end, repeat its last row (lanes are independent) */
                    #pragma GCC unroll 8
                    for (int r = 0; r < 8; r++) wr[r] = (const char *)w + (size_t)RLX_MIN(n + r, c1 - 1) * wrow;
                    __m256 res[8];
                    const char *pf = t0 ? NULL : (const char *)w + (size_t)(n + PF_TILES * 8) * wrow; /* later passes hit L2 */
#if KAVX512
                    if (il && batched) BY_NT_8(tile8_q4_k_il, (const rlx_block_q4_k *const *)wr, (const rlx_block_q8_k *const *)ap, nbk, pf, res, true)
                    else if (il) BY_NT_8(tile8_q4_k_il, (const rlx_block_q4_k *const *)wr, (const rlx_block_q8_k *const *)ap, nbk, pf, res, false)
                    else
#endif
                    if (type == RLX_Q4_0) BY_NT_Q(tile8_q4_0, (const rlx_block_q4_0 *const *)wr, (const rlx_block_q8_0 *const *)ap, nbl, pf, res)
                    else if (batched) BY_NT_Q(tile8_q4_k, (const rlx_block_q4_k *const *)wr, (const rlx_block_q8_k *const *)ap, nbk, pf, res, true)
                    else BY_NT_Q(tile8_q4_k, (const rlx_block_q4_k *const *)wr, (const rlx_block_q8_k *const *)ap, nbk, pf, res, false)
                    const int nr = (int)RLX_MIN((int64_t)8, c1 - n);
                    for (int t = 0; t < nt; t++) {
                        float v[8];
                        _mm256_storeu_ps(v, res[t]);
                        memcpy(out + (t0 + t) * ldo + n, v, (size_t)nr * sizeof(float));
                    }
                }
                continue;
            }
#if KAVX512 && KVNNI
            if (type == RLX_Q8_0 && nt > 1) {
                BY_NT_Q8(rows_q8_0_u8, w, wrow, packed, c0, c1, (const rlx_block_q8_0 *const *)ap, nbl, t0 == 0, out + t0 * ldo, ldo)
                continue;
            }
#endif
            if (type == RLX_Q8_0) {
                for (int64_t n = c0; n < c1; n += Q8_0_ROWS) {
                    const rlx_block_q8_0 *wr[Q8_0_ROWS];
                    for (int u = 0; u < Q8_0_ROWS; u++) wr[u] = Q8_0_ROW(w, wrow, packed, RLX_MIN(n + u, c1 - 1));
                    float rr[8][Q8_0_ROWS];
                    const char *pf = t0 ? NULL : (const char *)Q8_0_ROW(w, wrow, packed, n + PF_TILES * Q8_0_ROWS);
                    const int64_t bstep = packed ? Q8_0_ROWS : 1;
#if KAVX512
                    BY_NT_Q(tile_rows_q8_0, wr, bstep, (const rlx_block_q8_0 *const *)ap, nbl, pf, rr)
#else
                    if (nt <= 2) BY_NT_Q(tile_rows_q8_0, wr, bstep, (const rlx_block_q8_0 *const *)ap, nbl, pf, rr, false)
                    else BY_NT_Q(tile_rows_q8_0, wr, bstep, (const rlx_block_q8_0 *const *)ap, nbl, pf, rr, true)
#endif
                    const int nr = (int)RLX_MIN((int64_t)Q8_0_ROWS, c1 - n);
                    for (int t = 0; t < nt; t++) memcpy(out + (t0 + t) * ldo + n, rr[t], (size_t)nr * sizeof(float));
                }
                continue;
            }
            /* one row at a time: the row about 4 KiB ahead is prefetched as this one is read
             * (Q6_K from memory, one thread: avx2 21.5-22.0 -> 22.6-23.8 GMAC/s, avx512
             * 22.6-23.6 -> 23.5-26.9; 2 and 8 KiB ahead no better; RESULTS 43) */
            const int64_t pfr = RLX_MAX((int64_t)1, (int64_t)(4096 / wrow));
            for (int64_t n = c0; n < c1; n++) {
                const void *wr = (const char *)w + (size_t)n * wrow;
                const char *pf = t0 ? NULL : (const char *)w + (size_t)(n + pfr) * wrow;
                float r[4] = {0, 0, 0, 0};
                if (type == RLX_Q5_K) BY_NT_Q(tile_q5_k, wr, (const rlx_block_q8_k *const *)ap, nbk, pf, r)
                else BY_NT_Q(tile_q6_k, wr, (const rlx_block_q8_k *const *)ap, nbk, pf, r)
                #pragma GCC unroll 8
                for (int t = 0; t < nt; t++) out[(t0 + t) * ldo + n] = r[t];
            }
        }
    }
}

#include "backends/cpu/kern_x86_q4kx8.h"
