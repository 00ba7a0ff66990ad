/* kern_x86_512.h - 512-bit variants of the integer kernels of kern_x86.h, included by it when
 * KAVX512 is set (AVX-512 F/BW/VL, plus VNNI when KVNNI). Same contracts: exact integer lane
 * sums, float accumulation in lanes in an order fixed per (t, n). K formats: one super-block per
 * set of registers, 16 float lanes across super-blocks; Q8_0/Q4_0: two blocks per register,
 * lanes 0-7 for the even block and 8-15 for the odd one, alternating between two accumulators. */

#if KVNNI
#define DOT512_U8S8(acc, u, s) _mm512_dpbusd_epi32((acc), (u), (s))
#define DOT512_I16(acc, a, b) _mm512_dpwssd_epi32((acc), (a), (b))
#else
#define DOT512_U8S8(acc, u, s) \
    _mm512_add_epi32((acc), _mm512_madd_epi16(_mm512_maddubs_epi16((u), (s)), _mm512_set1_epi16(1)))
#define DOT512_I16(acc, a, b) _mm512_add_epi32((acc), _mm512_madd_epi16((a), (b)))
#endif

/* Two 32-byte rows of int8 in one register; the second may be absent (odd block count). */
KINLINE __m512i load2(const void *p0, const void *p1)
{
    const __m256i lo = _mm256_loadu_si256((const __m256i *)p0);
    return p1 ? _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *)p1), 1)
              : _mm512_zextsi256_si512(lo);
}

/* [f16(d0) x 8, f16(d1) x 8]; the second is 0 when absent. */
KINLINE __m512 scale2(uint16_t d0, uint16_t d1)
{
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)d1), _mm_set1_epi16((short)d0)));
}

KINLINE void legacy_pair(__m512i wq, __m512 dw, const rlx_block_q8_0 *const *a, int64_t ib, bool two,
                         __m512 *acc, const int nt)
{
    const __m512i wa = _mm512_abs_epi8(wq);
    const __mmask64 neg = _mm512_movepi8_mask(wq);
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) {
        const rlx_block_q8_0 *b = &a[t][ib];
        const __m512i aq = load2(b[0].qs, two ? b[1].qs : NULL);
        const __m512i as = _mm512_mask_sub_epi8(aq, neg, _mm512_setzero_si512(), aq);
        const __m512i s = DOT512_U8S8(_mm512_setzero_si512(), wa, as);
        const __m512 sc = _mm512_mul_ps(dw, scale2(b[0].d, two ? b[1].d : 0));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[t]);
    }
}

KINLINE __m512i q8_0_pair(const rlx_block_q8_0 *b, bool two) { return load2(b[0].qs, two ? b[1].qs : NULL); }

KINLINE __m512i q4_0_pair(const rlx_block_q4_0 *b, bool two)
{
    const __m128i r0 = _mm_loadu_si128((const __m128i *)b[0].qs);
    const __m128i r1 = two ? _mm_loadu_si128((const __m128i *)b[1].qs) : _mm_setzero_si128();
    const __m256i raw = _mm256_inserti128_si256(_mm256_castsi128_si256(r0), r1, 1), m4 = _mm256_set1_epi8(0xF);
    const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    /* 128-bit lanes [b0 lo, b1 lo, b0 hi, b1 hi] -> [b0 lo, b0 hi, b1 lo, b1 hi]: element order */
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm512_sub_epi8(z, _mm512_set1_epi8(8));
}

#define LEGACY_TILE512(NAME, BLOCK, PAIR)                                                          \
    KINLINE void NAME(const BLOCK *w, const rlx_block_q8_0 *const *a, int64_t nb, float *res,    \
                      const int nt)                                                               \
    {                                                                                             \
        __m512 acc0[4], acc1[4];                                                                  \
        _Pragma("GCC unroll 8")                                                                   \
        for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = _mm512_setzero_ps();                     \
        int64_t ib = 0;                                                                           \
        for (; ib + 4 <= nb; ib += 4) {                                                           \
            legacy_pair(PAIR(&w[ib], true), scale2(w[ib].d, w[ib + 1].d), a, ib, true, acc0, nt); \
            legacy_pair(PAIR(&w[ib + 2], true), scale2(w[ib + 2].d, w[ib + 3].d), a, ib + 2, true, acc1, nt); \
        }                                                                                         \
        if (ib + 2 <= nb) {                                                                       \
            legacy_pair(PAIR(&w[ib], true), scale2(w[ib].d, w[ib + 1].d), a, ib, true, acc0, nt); \
            ib += 2;                                                                              \
        }                                                                                         \
        if (ib < nb) legacy_pair(PAIR(&w[ib], false), scale2(w[ib].d, 0), a, ib, false, acc1, nt); \
        _Pragma("GCC unroll 8")                                                                   \
        for (int t = 0; t < nt; t++) res[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t])); \
    }
LEGACY_TILE512(tile512_q8_0, rlx_block_q8_0, q8_0_pair)
LEGACY_TILE512(tile512_q4_0, rlx_block_q4_0, q4_0_pair)

/* An activation tile (up to 4 rows of Q8_0 blocks) repacked once per tile and weight chunk:
 * per pair of blocks the 64 int8 values and the expanded scales [d x 8 | d' x 8], exactly the
 * vectors legacy_pair builds from the blocks, so both kernels give the same bits; the repacked
 * one saves five instructions per row and pair. Rows up to LEG_MAXP pairs (K <= 8192). */
enum { LEG_MAXP = 128 };
typedef struct leg_tile {
    __m512i qs[4][LEG_MAXP];
    __m512 da[4][LEG_MAXP];
    __m512i nc8[4][LEG_MAXP]; /* Q4_0 only: -8 * (sum of each 4 values), for unsigned weight levels */
} leg_tile;

KINLINE void leg_repack(leg_tile *L, const void *const *ap, int nt, int64_t nb, bool q4)
{
    for (int t = 0; t < nt; t++) {
        const rlx_block_q8_0 *b = ap[t];
        for (int64_t p = 0; 2 * p < nb; p++) {
            const bool two = 2 * p + 1 < nb;
            L->qs[t][p] = load2(b[2 * p].qs, two ? b[2 * p + 1].qs : NULL);
            L->da[t][p] = scale2(b[2 * p].d, two ? b[2 * p + 1].d : 0);
            if (q4)
                L->nc8[t][p] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                                DOT512_U8S8(_mm512_setzero_si512(), _mm512_set1_epi8(8), L->qs[t][p]));
        }
    }
}

/* Q4_0 against a repacked tile: levels 0..15 stay unsigned (no sign juggling per pair); the
 * -8 offset comes from nc8, so the integer sums equal legacy_pair's exactly. */
KINLINE void q4_0_pair_rp(const rlx_block_q4_0 *wb, bool two, const leg_tile *L, int64_t p, __m512 *acc, const int nt)
{
    const __m128i r0 = _mm_loadu_si128((const __m128i *)wb[0].qs);
    const __m128i r1 = two ? _mm_loadu_si128((const __m128i *)wb[1].qs) : _mm_setzero_si128();
    const __m256i raw = _mm256_inserti128_si256(_mm256_castsi128_si256(r0), r1, 1), m4 = _mm256_set1_epi8(0xF);
    const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    q = _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(3, 1, 2, 0));
    const __m512 dw = scale2(wb[0].d, two ? wb[1].d : 0);
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) {
        const __m512i s = DOT512_U8S8(L->nc8[t][p], q, L->qs[t][p]);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, L->da[t][p]), acc[t]);
    }
}

KINLINE void tile512rp_q4_0(const rlx_block_q4_0 *w, const leg_tile *L, int64_t nb, float *res, const int nt)
{
    __m512 acc0[4], acc1[4];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = _mm512_setzero_ps();
    int64_t ib = 0; /* same pair order and accumulators as LEGACY_TILE512 */
    for (; ib + 4 <= nb; ib += 4) {
        q4_0_pair_rp(&w[ib], true, L, ib / 2, acc0, nt);
        q4_0_pair_rp(&w[ib + 2], true, L, ib / 2 + 1, acc1, nt);
    }
    if (ib + 2 <= nb) {
        q4_0_pair_rp(&w[ib], true, L, ib / 2, acc0, nt);
        ib += 2;
    }
    if (ib < nb) q4_0_pair_rp(&w[ib], false, L, ib / 2, acc1, nt);
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) res[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t]));
}

KINLINE void legacy_pair_rp(__m512i wq, __m512 dw, const leg_tile *L, int64_t p, __m512 *acc, const int nt)
{
    const __m512i wa = _mm512_abs_epi8(wq);
    const __mmask64 neg = _mm512_movepi8_mask(wq);
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) {
        const __m512i aq = L->qs[t][p];
        const __m512i as = _mm512_mask_sub_epi8(aq, neg, _mm512_setzero_si512(), aq);
        const __m512i s = DOT512_U8S8(_mm512_setzero_si512(), wa, as);
        const __m512 sc = _mm512_mul_ps(dw, L->da[t][p]);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[t]);
    }
}

/* Same pair order and accumulators as LEGACY_TILE512. */
#define LEGACY_TILE512_RP(NAME, BLOCK, PAIR)                                                       \
    KINLINE void NAME(const BLOCK *w, const leg_tile *L, int64_t nb, float *res, const int nt)    \
    {                                                                                             \
        __m512 acc0[4], acc1[4];                                                                  \
        _Pragma("GCC unroll 8")                                                                   \
        for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = _mm512_setzero_ps();                     \
        int64_t ib = 0;                                                                           \
        for (; ib + 4 <= nb; ib += 4) {                                                           \
            legacy_pair_rp(PAIR(&w[ib], true), scale2(w[ib].d, w[ib + 1].d), L, ib / 2, acc0, nt); \
            legacy_pair_rp(PAIR(&w[ib + 2], true), scale2(w[ib + 2].d, w[ib + 3].d), L, ib / 2 + 1, acc1, nt); \
        }                                                                                         \
        if (ib + 2 <= nb) {                                                                       \
            legacy_pair_rp(PAIR(&w[ib], true), scale2(w[ib].d, w[ib + 1].d), L, ib / 2, acc0, nt); \
            ib += 2;                                                                              \
        }                                                                                         \
        if (ib < nb) legacy_pair_rp(PAIR(&w[ib], false), scale2(w[ib].d, 0), L, ib / 2, acc1, nt); \
        _Pragma("GCC unroll 8")                                                                   \
        for (int t = 0; t < nt; t++) res[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t])); \
    }
LEGACY_TILE512_RP(tile512rp_q8_0, rlx_block_q8_0, q8_0_pair)

/* word-permutation indices: scale of sub-block 2k / 2k+1 for the 32-element halves (Q4_K) */
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
    _Pragma("GCC unroll 8")
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
        _Pragma("GCC unroll 8")
        for (int m = 0; m < 4; m++) {
            const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(hb, _mm512_add_epi16(half, _mm512_set1_epi16((short)(2 * m)))),
                                                 _mm512_set1_epi8(1));
            q[m] = _mm512_or_si512(q[m], _mm512_slli_epi16(bit, 4));
        }
    }
}

/* Q4_K and Q5_K share everything but the levels: d, dmin and scales sit at the same offsets. */
#define K45_TILE512(NAME, BLOCK, QH)                                                                 \
    KINLINE void NAME(const BLOCK *w, const rlx_block_q8_k *const *a, int64_t nb, float *res, const int nt) \
    {                                                                                               \
        __m512 facc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()}; \
        for (int64_t i = 0; i < nb; i++) {                                                          \
            const __m128i sm = k4_scales_v(w[i].scales);                                            \
            const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));                  \
            const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)); /* m0 m0 m1 m1 ... */ \
            __m512i q[4], scv[4];                                                                   \
            k45_levels512(w[i].qs, QH, q);                                                          \
            _Pragma("GCC unroll 8")                                                                 \
            for (int k = 0; k < 4; k++)                                                             \
                scv[k] = _mm512_permutexvar_epi16(_mm512_load_si512((const void *)idx_k4[k]), sc16); \
            const float d = f16(w[i].d), dmin = f16(w[i].dmin);                                     \
            _Pragma("GCC unroll 8")                                                                 \
            for (int t = 0; t < nt; t++) {                                                          \
                const rlx_block_q8_k *y = &a[t][i];                                                 \
                __m512i acc = _mm512_setzero_si512();                                               \
                _Pragma("GCC unroll 8")                                                             \
                for (int k = 0; k < 4; k++) {                                                       \
                    const __m512i p = _mm512_maddubs_epi16(q[k], _mm512_loadu_si512((const void *)(y->qs + 64 * k))); \
                    acc = DOT512_I16(acc, p, scv[k]);                                               \
                }                                                                                   \
                /* exact integer lanes; the float sum over super-blocks stays in lanes */           \
                const __m256i mv = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins16); \
                facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(d * y->d), facc[t]); \
                facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(mv)),          \
                                          _mm512_set1_ps(-(dmin * y->d)), facc[t]);                 \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 8")                                                                     \
        for (int t = 0; t < nt; t++) res[t] = _mm512_reduce_add_ps(facc[t]);                        \
    }
K45_TILE512(tile512_q4_k, rlx_block_q4_k, NULL)
K45_TILE512(tile512_q5_k, rlx_block_q5_k, w[i].qh)

KINLINE void tile512_q6_k(const rlx_block_q6_k *w, const rlx_block_q8_k *const *a, int64_t nb, float *res,
                          const int nt)
{
    __m512 facc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const __m512i m4 = _mm512_set1_epi8(0xF), m2 = _mm512_set1_epi8(3);
    /* per-half shift of the high bits: quarter 0|1 use bits 0-1|2-3, quarter 2|3 bits 4-5|6-7 */
    const __m512i sh_a = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh_b = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    for (int64_t i = 0; i < nb; i++) {
        __m512i q[4], scv[4];
        _Pragma("GCC unroll 8")
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512((const void *)(w[i].ql + 64 * h));
            const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h)));
            const __m512i ha = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, sh_a), m2), 4);
            const __m512i hc = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, sh_b), m2), 4);
            q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), ha);                                  /* levels 0..63 */
            q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), hc);
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        _Pragma("GCC unroll 8")
        for (int v = 0; v < 4; v++)
            scv[v] = _mm512_permutexvar_epi16(_mm512_load_si512((const void *)idx_k6[v]), _mm512_castsi256_si512(sc16));
        const float d = f16(w[i].d);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) {
            const rlx_block_q8_k *y = &a[t][i];
            __m512i acc = _mm512_setzero_si512();
            _Pragma("GCC unroll 8")
            for (int v = 0; v < 4; v++) {
                const __m512i p = _mm512_maddubs_epi16(q[v], _mm512_loadu_si512((const void *)(y->qs + 64 * v)));
                acc = DOT512_I16(acc, p, scv[v]);
            }
            const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), sc16);
            facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(d * y->d), facc[t]);
            facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(corr)), _mm512_set1_ps(-32 * (d * y->d)), facc[t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) res[t] = _mm512_reduce_add_ps(facc[t]);
}
