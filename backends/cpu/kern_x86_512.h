/* kern_x86_512.h - 512-bit integer parts of the K-format kernels of kern_x86_q.h, included by it
 * when KAVX512 is set (AVX-512 F/BW/VL, plus VNNI when KVNNI). A super-block's integer products
 * run 64 bytes per register; folding the upper 256 bits onto the lower gives exactly the eight
 * integer lanes of the 256-bit kernels (lane j + 8 covers the same bytes of the next 32-byte
 * chunk as lane j), so the float operations that follow, and the results, are the same. */

#if KVNNI
#define DOT512_I16(acc, a, b) _mm512_dpwssd_epi32((acc), (a), (b))
#else
#define DOT512_I16(acc, a, b) _mm512_add_epi32((acc), _mm512_madd_epi16((a), (b)))
#endif

KINLINE __m256i fold512(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* word-permutation indices: scale of sub-block 2k / 2k+1 for the 32-element halves (Q4_K, Q5_K) */
static const uint16_t idx_k4[4][32] __attribute__((aligned(64))) = {
#define H16(a) a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a
    {H16(0), H16(1)}, {H16(2), H16(3)}, {H16(4), H16(5)}, {H16(6), H16(7)},
};
/* ... and of sub-blocks 4v..4v+3 for the 16-element quarters (Q6_K) */
static const uint16_t idx_k6[4][32] __attribute__((aligned(64))) = {
#define Q8(a) a, a, a, a, a, a, a, a
    {Q8(0), Q8(1), Q8(2), Q8(3)}, {Q8(4), Q8(5), Q8(6), Q8(7)}, {Q8(8), Q8(9), Q8(10), Q8(11)}, {Q8(12), Q8(13), Q8(14), Q8(15)},
#undef Q8
#undef H16
};

/* The 256 levels of a Q4_K (qh NULL) or Q5_K block in element order, 64 per register. */
KINLINE void k45_levels512(const uint8_t *qs, const uint8_t *qh, __m512i q[4])
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    #pragma GCC unroll 8
    for (int k = 0; k < 2; k++) {
        const __m512i z = _mm512_loadu_si512((const void *)(qs + 64 * k));
        const __m512i lo = _mm512_and_si512(z, m4), hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
        /* lo = [sb 4k | sb 4k+2], hi = [sb 4k+1 | sb 4k+3] -> element order */
        q[2 * k] = _mm512_shuffle_i64x2(lo, hi, 0x44);
        q[2 * k + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
    }
    if (qh) { /* bit j of qh[l] is the fifth bit of element l of sub-block j; q[m] = [sb 2m | sb 2m+1] */
        const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
        const __m512i half = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
        #pragma GCC unroll 8
        for (int m = 0; m < 4; m++) {
            const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(hb, _mm512_add_epi16(half, _mm512_set1_epi16((short)(2 * m)))),
                                                 _mm512_set1_epi8(1));
            q[m] = _mm512_or_si512(q[m], _mm512_slli_epi16(bit, 4));
        }
    }
}

/* Q4_K and Q5_K share everything but the levels: d, dmin and scales sit at the same offsets.
 * pairs: lane[t][p] for each pair p of sub-blocks (batched Q4_K), else the whole super-block in
 * lane[t][0]. */
KINLINE void k45_lanes512(const uint8_t *qs, const uint8_t *qh, const uint8_t packed[12], const rlx_block_q8_k *const *a,
                          int64_t i, __m256i lane[][4], __m256i *mins, const bool pairs, const int nt)
{
    const __m128i sm = k4_scales_v(packed);
    const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)); /* m0 m0 m1 m1 ... */
    __m512i q[4], scv[4];
    k45_levels512(qs, qh, q);
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) scv[k] = _mm512_permutexvar_epi16(_mm512_load_si512((const void *)idx_k4[k]), sc16);
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const rlx_block_q8_k *y = &a[t][i];
        __m512i acc = _mm512_setzero_si512();
        /* q[k] holds sub-blocks 2k and 2k+1: one pair per register */
        #pragma GCC unroll 8
        for (int k = 0; k < 4; k++) {
            const __m512i p = _mm512_maddubs_epi16(q[k], _mm512_loadu_si512((const void *)(y->qs + 64 * k)));
            if (pairs) lane[t][k] = fold512(DOT512_I16(_mm512_setzero_si512(), p, scv[k]));
            else acc = DOT512_I16(acc, p, scv[k]);
        }
        if (!pairs) lane[t][0] = fold512(acc);
        mins[t] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins16);
    }
}

KINLINE void q4_k_rows_lanes(const rlx_block_q4_k *b, const rlx_block_q8_k *const *a, int64_t i, __m256i lane[][4],
                             __m256i *mins, const bool pairs, const int nt)
{
    k45_lanes512(b->qs, NULL, b->scales, a, i, lane, mins, pairs, nt);
}

KINLINE void q5_k_rows_lanes(const rlx_block_q5_k *b, const rlx_block_q8_k *const *a, int64_t i, __m256i lane[][4],
                             __m256i *mins, const int nt)
{
    k45_lanes512(b->qs, b->qh, b->scales, a, i, lane, mins, false, nt);
}

KINLINE void q6_k_rows_lanes(const rlx_block_q6_k *b, const rlx_block_q8_k *const *a, int64_t i, __m256i *lane,
                             const int nt)
{
    const __m512i m4 = _mm512_set1_epi8(0xF), m2 = _mm512_set1_epi8(3);
    /* per-half shift of the high bits: quarter 0|1 use bits 0-1|2-3, quarter 2|3 bits 4-5|6-7 */
    const __m512i sh_a = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh_b = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    __m512i q[4], scv[4];
    #pragma GCC unroll 8
    for (int h = 0; h < 2; h++) {
        const __m512i l = _mm512_loadu_si512((const void *)(b->ql + 64 * h));
        const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        const __m512i ha = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, sh_a), m2), 4);
        const __m512i hc = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, sh_b), m2), 4);
        q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), ha); /* levels 0..63 */
        q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), hc);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    #pragma GCC unroll 8
    for (int v = 0; v < 4; v++)
        scv[v] = _mm512_permutexvar_epi16(_mm512_load_si512((const void *)idx_k6[v]), _mm512_castsi256_si512(sc16));
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const rlx_block_q8_k *y = &a[t][i];
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int v = 0; v < 4; v++)
            acc = DOT512_I16(acc, _mm512_maddubs_epi16(q[v], _mm512_loadu_si512((const void *)(y->qs + 64 * v))), scv[v]);
        const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), sc16);
        lane[t] = _mm256_sub_epi32(fold512(acc), _mm256_slli_epi32(corr, 5));
    }
}

/* ---- Q8_0 and Q4_0 ---- */

#if KVNNI
#define DOT512_U8S8(acc, u, s) _mm512_dpbusd_epi32((acc), (u), (s))
#else
#define DOT512_U8S8(acc, u, s) \
    _mm512_add_epi32((acc), _mm512_madd_epi16(_mm512_maddubs_epi16((u), (s)), _mm512_set1_epi16(1)))
#endif

KINLINE __m512i pair256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/* Q8_0, four weight rows, two per register (lanes 0-7 row 2p, 8-15 row 2p + 1): the
 * eight-lane arithmetic of the 256-bit kernel for all four rows, in two independent chains. */
#define Q8_0_ROWS 4

/* Each register of acc[t] holds two rows' eight lanes: ggml's hsum_float_8 of each half. */
KINLINE void q8_0_pairs_out(const __m512 acc[][2], float res[][Q8_0_ROWS], const int nt)
{
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            res[t][2 * p] = hsum_ps(_mm512_castps512_ps256(acc[t][p]));
            res[t][2 * p + 1] = hsum_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[t][p]), 1)));
        }
}

KINLINE void tile_rows_q8_0(const rlx_block_q8_0 *const *w, int64_t bstep, const rlx_block_q8_0 *const *a, int64_t nb,
                            const char *pf, float res[][Q8_0_ROWS], const int nt)
{
    __m512 acc[4][2];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        Q8_0_PREFETCH(pf, ib);
        __m512i wa[2];
        __mmask64 neg[2];
        __m512 dw[2];
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            const __m512i wq = pair256(_mm256_loadu_si256((const __m256i *)w[2 * p][ib * bstep].qs),
                                       _mm256_loadu_si256((const __m256i *)w[2 * p + 1][ib * bstep].qs));
            wa[p] = _mm512_abs_epi8(wq); /* |w| as unsigned, the sign moved onto the activation */
            neg[p] = _mm512_movepi8_mask(wq);
            dw[p] = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)w[2 * p + 1][ib * bstep].d), _mm_set1_epi16((short)w[2 * p][ib * bstep].d)));
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m512i aq = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)a[t][ib].qs));
            const __m512 da = _mm512_set1_ps(f16(a[t][ib].d));
            #pragma GCC unroll 2
            for (int p = 0; p < 2; p++) {
                const __m512i s = DOT512_U8S8(_mm512_setzero_si512(), wa[p], _mm512_mask_sub_epi8(aq, neg[p], _mm512_setzero_si512(), aq));
                acc[t][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[p], da), acc[t][p]);
            }
        }
    }
    q8_0_pairs_out(acc, res, nt);
}

#if KVNNI
/* With VNNI, vpdpbusd takes the activation as unsigned: a + 128 (its sign bit flipped) times the
 * signed weights, the accumulator starting from -128 x the lane's weight sum, which leaves
 * exactly the lane sums of a x w the sign-moving form gives (integers, no saturation in
 * vpdpbusd), in fewer instructions per activation row; and up to eight activation rows share
 * each weight block (16 accumulators). The float operations are the same, in the same order.
 * It costs one more instruction per weight block, so a single activation row keeps the form
 * above (pp128 366 -> 408-428 tok/s, x16 220 -> 243-258; one row measured no better). */
#define Q8_0_NT 8
/* The activation side of a block is the same for every weight row, so it is prepared once per
 * tile of activation rows rather than once per weight tile: a + 128 as bytes and the scale as
 * a float (no f16 conversion or xor left in the inner loop), both laid out block by block (one
 * stream for the tile). Segments of Q8_0_SEG blocks bound the buffer (37 KiB of stack). */
#define Q8_0_SEG 128
typedef struct q8_0_prep {
    uint8_t au[Q8_0_SEG][Q8_0_NT][32];
    float da[Q8_0_SEG][Q8_0_NT]; /* rows past nt: 0 */
} q8_0_prep;

KINLINE void q8_0_prepare(const rlx_block_q8_0 *const *a, int64_t ib0, int64_t nb, q8_0_prep *pa, const int nt)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t i = 0; i < nb; i++)
        for (int t = 0; t < Q8_0_NT; t++) {
            const rlx_block_q8_0 *b = &a[t < nt ? t : 0][ib0 + i];
            if (t < nt)
                _mm256_storeu_si256((__m256i *)pa->au[i][t], _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b->qs), flip));
            pa->da[i][t] = t < nt ? f16(b->d) : 0.0f;
        }
}

/* blocks [ib0, ib0 + nb) of four weight rows x nt prepared activation rows into acc */
KINLINE void tile_rows_q8_0_u8(const rlx_block_q8_0 *const *w, int64_t bstep, int64_t ib0, int64_t nb, const q8_0_prep *pa,
                               const char *pf, __m512 acc[][2], const int nt)
{
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++) {
        const int64_t ib = ib0 + i;
        Q8_0_PREFETCH(pf, ib);
        __m512i wq[2], base[2];
        __m512 dw[2];
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            wq[p] = pair256(_mm256_loadu_si256((const __m256i *)w[2 * p][ib * bstep].qs),
                            _mm256_loadu_si256((const __m256i *)w[2 * p + 1][ib * bstep].qs));
            const __m512i wsum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, wq[p]);
            base[p] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(wsum, 7));
            dw[p] = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)w[2 * p + 1][ib * bstep].d), _mm_set1_epi16((short)w[2 * p][ib * bstep].d)));
        }
        /* the scale products of pair (t, p), [dw[2p] x da[t]] x 8 | [dw[2p + 1] x da[t]] x 8:
         * one multiply per four activation rows (each 128-bit lane of dq[p][h] holds da[4h..4h+3]
         * times its half's weight scale), then one in-lane shuffle per pair, instead of a
         * multiply per pair on the pipes that also run vpdpbusd and the FMAs (RESULTS 42) */
        __m512 dq[2][2];
        const __m512 da_lo = _mm512_broadcast_f32x4(_mm_loadu_ps(&pa->da[i][0]));
        dq[0][0] = _mm512_mul_ps(dw[0], da_lo);
        dq[1][0] = _mm512_mul_ps(dw[1], da_lo);
        if (nt > 4) {
            const __m512 da_hi = _mm512_broadcast_f32x4(_mm_loadu_ps(&pa->da[i][4]));
            dq[0][1] = _mm512_mul_ps(dw[0], da_hi);
            dq[1][1] = _mm512_mul_ps(dw[1], da_hi);
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m512i au = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)pa->au[i][t]));
            #pragma GCC unroll 2
            for (int p = 0; p < 2; p++) {
                const __m512i s = _mm512_dpbusd_epi32(base[p], au, wq[p]);
                const __m512 d = _mm512_shuffle_ps(dq[p][t / 4], dq[p][t / 4], (t % 4) * 0x55);
                acc[t][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc[t][p]);
            }
        }
    }
}

/* Weight rows [c0, c1) (a chunk) x nt activation rows a[t] into out (row t at out + t * ldo).
 * pf: prefetch the rows ahead (first activation tile only). Over Q8_0_SEG blocks, the rows go
 * in groups of Q8_0_SUB whose sums wait in acc_keep between segments. */
#define Q8_0_SUB 64
KINLINE void rows_q8_0_u8(const void *w, size_t wrow, bool packed, int64_t c0, int64_t c1, const rlx_block_q8_0 *const *a,
                          int64_t nbl, bool pf_on, float *out, int64_t ldo, const int nt)
{
    q8_0_prep pa;
    const bool one_seg = nbl <= Q8_0_SEG;
    if (one_seg) q8_0_prepare(a, 0, nbl, &pa, nt);
    for (int64_t s0 = c0; s0 < c1; s0 += Q8_0_SUB) {
        const int64_t s1 = RLX_MIN(c1, s0 + Q8_0_SUB);
        __m512 acc_keep[Q8_0_SUB / Q8_0_ROWS][Q8_0_NT][2];
        for (int64_t ib0 = 0; ib0 < nbl; ib0 += Q8_0_SEG) {
            const int64_t nb = RLX_MIN((int64_t)Q8_0_SEG, nbl - ib0);
            const bool last = ib0 + nb == nbl;
            if (!one_seg) q8_0_prepare(a, ib0, nb, &pa, nt);
            for (int64_t n = s0; n < s1; n += Q8_0_ROWS) {
                const rlx_block_q8_0 *wr[Q8_0_ROWS];
                for (int u = 0; u < Q8_0_ROWS; u++) wr[u] = Q8_0_ROW(w, wrow, packed, RLX_MIN(n + u, c1 - 1));
                const char *pf = pf_on ? (const char *)Q8_0_ROW(w, wrow, packed, n + PF_TILES * Q8_0_ROWS) : NULL;
                __m512 acc[Q8_0_NT][2];
                __m512 (*keep)[2] = acc_keep[(n - s0) / Q8_0_ROWS];
                #pragma GCC unroll 8
                for (int t = 0; t < nt; t++)
                    #pragma GCC unroll 2
                    for (int p = 0; p < 2; p++) acc[t][p] = ib0 ? keep[t][p] : _mm512_setzero_ps();
                tile_rows_q8_0_u8(wr, packed ? Q8_0_ROWS : 1, ib0, nb, &pa, pf, acc, nt);
                if (!last) {
                    #pragma GCC unroll 8
                    for (int t = 0; t < nt; t++)
                        #pragma GCC unroll 2
                        for (int p = 0; p < 2; p++) keep[t][p] = acc[t][p];
                    continue;
                }
                float rr[Q8_0_NT][Q8_0_ROWS];
                q8_0_pairs_out(acc, rr, nt);
                const int nr = (int)RLX_MIN((int64_t)Q8_0_ROWS, c1 - n);
                for (int t = 0; t < nt; t++) memcpy(out + t * ldo + n, rr[t], (size_t)nr * sizeof(float));
            }
        }
    }
}
#else
#define Q8_0_NT 4
#endif

/* Lane r of the result: the sum of the sixteen int32 lanes of z[r % 4] that belong to row r;
 * z[k] holds row k in its lower and row k + 4 in its upper 256 bits. */
KINLINE __m256i reduce8_pairs(const __m512i z[4])
{
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]), _mm512_unpackhi_epi32(z[0], z[1]));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]), _mm512_unpackhi_epi32(z[2], z[3]));
    /* 128-bit lane j: rows (0..3) partial j for j < 2, rows (4..7) for j >= 2 */
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    const __m512i u = _mm512_add_epi32(t, _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_shuffle_i64x2(u, u, _MM_SHUFFLE(2, 0, 2, 0)));
}

/* Q4_0 (rows), two weight rows per register. */
KINLINE void tile8_q4_0(const rlx_block_q4_0 *const *w, const rlx_block_q8_0 *const *a, int64_t nb,
                        const char *pf, __m256 *res, const int nt)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc[4];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        PREFETCH_STEP(pf, ib, 8 * sizeof(rlx_block_q4_0));
        __m512i q[4]; /* levels 0..15 of rows k and k + 4; the -8 offset comes from nc below */
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            /* [row k | row k + 4] bytes -> [k low nibbles, k high, k + 4 low, k + 4 high] */
            const __m256i raw = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)w[k + 4][ib].qs),
                                                 _mm_loadu_si128((const __m128i *)w[k][ib].qs));
            const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            const __m512i z = pair256(lo, hi);
            q[k] = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
        }
        const __m256 dw = scales8((const void *const *)w, (size_t)ib * sizeof(rlx_block_q4_0));
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m512i aq = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)a[t][ib].qs));
            const __m512i nc = _mm512_sub_epi32(_mm512_setzero_si512(), DOT512_U8S8(_mm512_setzero_si512(), _mm512_set1_epi8(8), aq));
            __m512i z[4];
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) z[k] = DOT512_U8S8(nc, q[k], aq);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_pairs(z)), _mm256_mul_ps(dw, _mm256_set1_ps(f16(a[t][ib].d))),
                                     acc[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = acc[t];
}

/* ---- Q4_K, eight weight rows interleaved (the gemm's arithmetic, or the gemv's) ----
 * tile8_q4_k above reduces every (row, pair of sub-blocks) product to one integer with a tree
 * of horizontal adds, for each activation row: that reduction, not the multiplies, was most of
 * the batched Q4_K time. Here the eight weight rows are interleaved once per super-block (8
 * bytes of each row per register: row r in int32 lanes 2r and 2r + 1), so vpdpbusd against a
 * broadcast activation chunk sums each row in its own lanes and no horizontal reduction
 * remains; the interleave is shared by up to eight activation rows (one-row arithmetic: at
 * two or more, where it pays; a single row keeps tile8_q4_k). Each lane covers 16
 * elements of a sub-block, so |sum| <= 15 x 127 x 16 < 2^15: the lanes pack to 16 bits for the
 * scale multiply (vpdpwssd). The integer sums are exact, the float operations those of
 * tile8_q4_k in the same order, so the results are identical. */

/* word index of (row r of 0..3, word w of its 16) in the pair (G[0], G[1]) of expanded rows */
#define IL_W(r, w) (((r) / 2) * 32 + ((r) % 2) * 16 + (w))
/* scales of pair k, per 128-bit lane L (rows 2L, 2L + 1; lanes 2-3 unused):
 * [s(2L, 2k) x2, s(2L + 1, 2k) x2, s(2L, 2k + 1) x2, s(2L + 1, 2k + 1) x2] */
#define IL_SC_LANE(k, L) IL_W(2 * (L), 2 * (k)), IL_W(2 * (L), 2 * (k)), IL_W(2 * (L) + 1, 2 * (k)), IL_W(2 * (L) + 1, 2 * (k)), \
                         IL_W(2 * (L), 2 * (k) + 1), IL_W(2 * (L), 2 * (k) + 1), IL_W(2 * (L) + 1, 2 * (k) + 1), IL_W(2 * (L) + 1, 2 * (k) + 1)
#define IL_SC(k) {IL_SC_LANE(k, 0), IL_SC_LANE(k, 1), IL_SC_LANE(k, 0), IL_SC_LANE(k, 1)}
static const uint16_t idx_il_sc[4][32] __attribute__((aligned(64))) = {IL_SC(0), IL_SC(1), IL_SC(2), IL_SC(3)};
/* mins (words 8..15 of a row), 128-bit lane p: rows 0..3 as (m(r, 2p), m(r, 2p + 1)) */
#define IL_MP(p) IL_W(0, 8 + 2 * (p)), IL_W(0, 9 + 2 * (p)), IL_W(1, 8 + 2 * (p)), IL_W(1, 9 + 2 * (p)), \
                 IL_W(2, 8 + 2 * (p)), IL_W(2, 9 + 2 * (p)), IL_W(3, 8 + 2 * (p)), IL_W(3, 9 + 2 * (p))
static const uint16_t idx_il_m[32] __attribute__((aligned(64))) = {IL_MP(0), IL_MP(1), IL_MP(2), IL_MP(3)};
#undef IL_MP
#undef IL_SC
#undef IL_SC_LANE
#undef IL_W

KINLINE void tile8_q4_k_il(const rlx_block_q4_k *const *w, const rlx_block_q8_k *const *a, int64_t nb, const char *pf,
                           __m256 *res, const bool batched, const int nt)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    /* qword index tables of the 8 x 4 transpose (rows r0..r3 of two registers of two rows) */
    const __m512i tr_lo = _mm512_setr_epi64(0, 4, 8, 12, 1, 5, 9, 13), tr_hi = _mm512_setr_epi64(2, 6, 10, 14, 3, 7, 11, 15);
    /* rows 2L, 2L + 1 sit in dwords 4L, 4L + 1 of a pair's sums */
    const __m512i rows8 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    __m256 acc[8], accm[8];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        PREFETCH_STEP(pf, i, 8 * sizeof(rlx_block_q4_k));
        /* scales and mins of the eight rows as words: G[L] = [row 2L | row 2L + 1], each
         * 8 scale words then 8 min words */
        __m512i G[4];
        #pragma GCC unroll 4
        for (int L = 0; L < 4; L++)
            G[L] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_cvtepu8_epi16(k4_scales_v(w[2 * L][i].scales))),
                                      _mm256_cvtepu8_epi16(k4_scales_v(w[2 * L + 1][i].scales)), 1);
        __m512i sc[4];
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i ix = _mm512_load_si512((const void *)idx_il_sc[k]);
            sc[k] = _mm512_shuffle_i64x2(_mm512_permutex2var_epi16(G[0], ix, G[1]), _mm512_permutex2var_epi16(G[2], ix, G[3]), 0x44);
        }
        const __m512i ixm = _mm512_load_si512((const void *)idx_il_m);
        const __m512i mlo = _mm512_permutex2var_epi16(G[0], ixm, G[1]), mhi = _mm512_permutex2var_epi16(G[2], ixm, G[3]);
        /* mw[p] dword r: (m(r, 2p), m(r, 2p + 1)) */
        const __m256i mw[4] = {
            _mm256_set_m128i(_mm512_extracti32x4_epi32(mhi, 0), _mm512_extracti32x4_epi32(mlo, 0)),
            _mm256_set_m128i(_mm512_extracti32x4_epi32(mhi, 1), _mm512_extracti32x4_epi32(mlo, 1)),
            _mm256_set_m128i(_mm512_extracti32x4_epi32(mhi, 2), _mm512_extracti32x4_epi32(mlo, 2)),
            _mm256_set_m128i(_mm512_extracti32x4_epi32(mhi, 3), _mm512_extracti32x4_epi32(mlo, 3)),
        };
        __m512i ps[8][4]; /* [t][pair]: dwords 4L + 0/1 = rows 2L/2L + 1 */
        #pragma GCC unroll 1
        for (int k = 0; k < 4; k++) {
            /* the 32 bytes of pair k of each row: qword c of row r -> qword r of x[c] */
            __m512i z[4];
            #pragma GCC unroll 4
            for (int h = 0; h < 4; h++)
                z[h] = pair256(_mm256_loadu_si256((const __m256i *)(w[2 * h][i].qs + 32 * k)),
                               _mm256_loadu_si256((const __m256i *)(w[2 * h + 1][i].qs + 32 * k)));
            const __m512i p0 = _mm512_permutex2var_epi64(z[0], tr_lo, z[1]), p1 = _mm512_permutex2var_epi64(z[0], tr_hi, z[1]);
            const __m512i q0 = _mm512_permutex2var_epi64(z[2], tr_lo, z[3]), q1 = _mm512_permutex2var_epi64(z[2], tr_hi, z[3]);
            const __m512i x[4] = {_mm512_shuffle_i64x2(p0, q0, 0x44), _mm512_shuffle_i64x2(p0, q0, 0xEE),
                                  _mm512_shuffle_i64x2(p1, q1, 0x44), _mm512_shuffle_i64x2(p1, q1, 0xEE)};
            __m512i lo[4], hi[4]; /* levels of sub-blocks 2k and 2k + 1, chunk c */
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                lo[c] = _mm512_and_si512(x[c], m4);
                hi[c] = _mm512_and_si512(_mm512_srli_epi16(x[c], 4), m4);
            }
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const int8_t *y = a[t][i].qs + 64 * k;
                __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    int64_t y0, y1;
                    memcpy(&y0, y + 8 * c, 8);
                    memcpy(&y1, y + 32 + 8 * c, 8);
                    d0 = DOT512_U8S8(d0, lo[c], _mm512_set1_epi64(y0));
                    d1 = DOT512_U8S8(d1, hi[c], _mm512_set1_epi64(y1));
                }
                const __m512i s = DOT512_I16(_mm512_setzero_si512(), _mm512_packs_epi32(d0, d1), sc[k]);
                ps[t][k] = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
            }
        }
        const __m256 dw = scales8((const void *const *)w, (size_t)i * sizeof(rlx_block_q4_k));
        const __m256 dmw = scales8((const void *const *)w, (size_t)i * sizeof(rlx_block_q4_k) + 2);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const rlx_block_q8_k *y = &a[t][i];
            /* words 2j, 2j + 1 of each 128-bit lane: block sums of sub-blocks (4 per lane) */
            const __m256i bs = _mm256_hadd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_setzero_si256());
            const __m256 dy = _mm256_set1_ps(y->d), scl = _mm256_mul_ps(dw, dy), scm = _mm256_mul_ps(dmw, dy);
            __m256i isum_all = _mm256_setzero_si256(), msum_all = _mm256_setzero_si256();
            #pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                /* sub-blocks 2p, 2p + 1: dword p % 2 of 128-bit lane p / 2 */
                const __m256i b = _mm256_permutevar8x32_epi32(bs, _mm256_set1_epi32((p / 2) * 4 + p % 2));
                const __m256i mp = _mm256_madd_epi16(mw[p], b);
                const __m256i isum = _mm512_castsi512_si256(_mm512_permutexvar_epi32(rows8, ps[t][p]));
                if (batched) { /* the gemm: one update per pair of sub-blocks */
                    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scl, acc[t]);
                    accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mp), scm, accm[t]);
                } else { /* the gemv: one per super-block, with the exact integer sums */
                    isum_all = _mm256_add_epi32(isum_all, isum);
                    msum_all = _mm256_add_epi32(msum_all, mp);
                }
            }
            if (!batched) {
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum_all), scl, acc[t]);
                accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum_all), scm, accm[t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = _mm256_sub_ps(acc[t], accm[t]);
}
