/* kern_x86.h - the x86 SIMD kernels of rlx_matmul_rows, written once and compiled per path by
 * kern_avx2.c / kern_avx2vnni.c / kern_avx512.c / kern_avx512vnni.c, which set before including
 * this file:
 *   KPFX(name)  the exported entry's prefix (rlx__<path>_matmul_rows)
 *   KVNNI       1: vpdpbusd / vpdpwssd (AVX-512 VNNI); 2: the same in AVX-VNNI encoding;
 *               0: vpmaddubsw + vpmaddwd
 *   KAVX512     1: the integer kernels of kern_x86_512.h (two blocks / a super-block per zmm)
 *
 * Layout of the work: weight rows in chunks that fit L2; activation rows in tiles of up to 4
 * visit every row of a chunk, so weights stream from memory once per
 * call and each weight row is loaded once per tile of activations. The
 * per-(t, n) arithmetic is the same whatever the tile size or row range: results are batch
 * invariant. Integer parts are exact everywhere; only the float accumulation differs from the
 * scalar code: K formats keep exact per-lane integer sums of each super-block, scale them and
 * accumulate across super-blocks in float lanes (a horizontal reduction per super-block would
 * cost a third of the throughput); Q8_0/Q4_0 accumulate scaled block sums in two 8-lane vectors
 * (even/odd blocks). F32/F16/BF16 weights: register-blocked tiles of kern_x86_float.h. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backends/quant_internal.h"

#if KVNNI == 2 /* AVX-VNNI: the VEX encoding, on CPUs without AVX-512 */
#define DOT_U8S8(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#define DOT_I16(acc, a, b) _mm256_dpwssd_avx_epi32((acc), (a), (b))
#elif KVNNI
#define DOT_U8S8(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define DOT_I16(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#else
#define DOT_U8S8(acc, u, s) \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#define DOT_I16(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#endif

#define KINLINE static inline __attribute__((always_inline))

KINLINE float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

KINLINE float f16(uint16_t h) { return _cvtsh_ss(h); }

/* ---- Q8_0 and Q4_0 (activations Q8_0) ---- */

/* wq: the block's 32 signed weights; multiplies them with every activation row's block ib. */
KINLINE void legacy_block(__m256i wq, float dw, const rlx_block_q8_0 *const *a, int64_t ib,
                          __m256 *acc, const int nt)
{
    const __m256i wa = _mm256_abs_epi8(wq); /* |w| as unsigned, sign moved onto the activation */
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i aq = _mm256_loadu_si256((const __m256i *)a[t][ib].qs);
        const __m256i s = DOT_U8S8(_mm256_setzero_si256(), wa, _mm256_sign_epi8(aq, wq));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * f16(a[t][ib].d)), acc[t]);
    }
}

KINLINE __m256i q8_0_weights(const rlx_block_q8_0 *b) { return _mm256_loadu_si256((const __m256i *)b->qs); }

KINLINE __m256i q4_0_weights(const rlx_block_q4_0 *b)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)b->qs), m4 = _mm_set1_epi8(0xF);
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
}

#define LEGACY_TILE(NAME, BLOCK, WEIGHTS)                                                         \
    KINLINE void NAME(const BLOCK *w, const rlx_block_q8_0 *const *a, int64_t nb, float *res,   \
                      const int nt)                                                              \
    {                                                                                            \
        __m256 acc0[4], acc1[4];                                                                 \
        _Pragma("GCC unroll 8")                                                                  \
        for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();                    \
        int64_t ib = 0;                                                                          \
        for (; ib + 1 < nb; ib += 2) {                                                           \
            legacy_block(WEIGHTS(&w[ib]), f16(w[ib].d), a, ib, acc0, nt);                        \
            legacy_block(WEIGHTS(&w[ib + 1]), f16(w[ib + 1].d), a, ib + 1, acc1, nt);            \
        }                                                                                        \
        if (ib < nb) legacy_block(WEIGHTS(&w[ib]), f16(w[ib].d), a, ib, acc0, nt);               \
        _Pragma("GCC unroll 8")                                                                  \
        for (int t = 0; t < nt; t++) res[t] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));          \
    }
LEGACY_TILE(tile_q8_0, rlx_block_q8_0, q8_0_weights)
LEGACY_TILE(tile_q4_0, rlx_block_q4_0, q4_0_weights)

#if !KAVX512
/* An activation tile prepared once per tile and weight chunk (rows up to LEG2_MAXB blocks,
 * K <= 8192): block scales as f32 and, for Q4_0, -8 * (sum of each 4 values), so Q4_0 weight
 * levels stay unsigned. Same integer sums and float operations as legacy_block: same bits. */
enum { LEG2_MAXB = 256 };
typedef struct leg2_tile {
    const rlx_block_q8_0 *a[4];
    float da[4][LEG2_MAXB];
    __m256i nc8[4][LEG2_MAXB];
} leg2_tile;

KINLINE void leg2_prepare(leg2_tile *L, const void *const *ap, int nt, int64_t nb, bool q4)
{
    for (int t = 0; t < nt; t++) {
        const rlx_block_q8_0 *b = L->a[t] = ap[t];
        for (int64_t i = 0; i < nb; i++) {
            L->da[t][i] = f16(b[i].d);
            if (q4)
                L->nc8[t][i] = _mm256_sub_epi32(_mm256_setzero_si256(),
                    DOT_U8S8(_mm256_setzero_si256(), _mm256_set1_epi8(8), _mm256_loadu_si256((const __m256i *)b[i].qs)));
        }
    }
}

KINLINE void q8_0_block_rp(const rlx_block_q8_0 *wb, const leg2_tile *L, int64_t ib, __m256 *acc, const int nt)
{
    const __m256i wq = _mm256_loadu_si256((const __m256i *)wb->qs), wa = _mm256_abs_epi8(wq);
    const float dw = f16(wb->d);
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i aq = _mm256_loadu_si256((const __m256i *)L->a[t][ib].qs);
        const __m256i s = DOT_U8S8(_mm256_setzero_si256(), wa, _mm256_sign_epi8(aq, wq));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * L->da[t][ib]), acc[t]);
    }
}

KINLINE void q4_0_block_rp(const rlx_block_q4_0 *wb, const leg2_tile *L, int64_t ib, __m256 *acc, const int nt)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)wb->qs), m4 = _mm_set1_epi8(0xF);
    const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
    const float dw = f16(wb->d);
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i s = DOT_U8S8(L->nc8[t][ib], q, _mm256_loadu_si256((const __m256i *)L->a[t][ib].qs));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * L->da[t][ib]), acc[t]);
    }
}

#define LEGACY_TILE_RP(NAME, BLOCK, BLOCKFN)                                                      \
    KINLINE void NAME(const BLOCK *w, const leg2_tile *L, int64_t nb, float *res, const int nt) \
    {                                                                                            \
        __m256 acc0[4], acc1[4];                                                                 \
        _Pragma("GCC unroll 8")                                                                  \
        for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();                    \
        int64_t ib = 0; /* same block order and accumulators as LEGACY_TILE */                   \
        for (; ib + 1 < nb; ib += 2) {                                                           \
            BLOCKFN(&w[ib], L, ib, acc0, nt);                                                    \
            BLOCKFN(&w[ib + 1], L, ib + 1, acc1, nt);                                            \
        }                                                                                        \
        if (ib < nb) BLOCKFN(&w[ib], L, ib, acc0, nt);                                           \
        _Pragma("GCC unroll 8")                                                                  \
        for (int t = 0; t < nt; t++) res[t] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));          \
    }
LEGACY_TILE_RP(tile_rp_q8_0, rlx_block_q8_0, q8_0_block_rp)
LEGACY_TILE_RP(tile_rp_q4_0, rlx_block_q4_0, q4_0_block_rp)
#endif

/* ---- K formats (activations Q8_K) ---- */

/* The eight 6-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K/Q5_K block, unpacked
 * in-register (same result as rlx__scale_min_k4). */
KINLINE __m128i k4_scales_v(const uint8_t packed[12])
{
    /* 16-byte load: the 4 bytes past the scales are the block's qs, ignored below (a 12-byte
     * copy would stall store forwarding) */
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

/* q[8]: the block's 8 sub-blocks of 32 unsigned levels; sc: their scales. */
KINLINE void k45_finish(const __m256i q[8], const uint8_t packed[12], float d, float dmin,
                        const rlx_block_q8_k *const *a, int64_t i, __m256 *facc, const int nt)
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
            const __m256i p = _mm256_maddubs_epi16(q[j], _mm256_loadu_si256((const __m256i *)(y->qs + 32 * j)));
            acc = DOT_I16(acc, p, scv[j]);
        }
        /* exact integer lanes; the float sum over super-blocks stays in lanes (no reduction) */
        const __m256i mv = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins16);
        facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(d * y->d), facc[t]);
        facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mv), _mm256_set1_ps(-(dmin * y->d)), facc[t]);
    }
}

KINLINE void tile_q4_k(const rlx_block_q4_k *w, const rlx_block_q8_k *const *a, int64_t nb, float *res,
                       const int nt)
{
    __m256 facc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int64_t i = 0; i < nb; i++) {
        __m256i q[8];
        #pragma GCC unroll 8
        for (int k = 0; k < 4; k++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * k));
            q[2 * k] = _mm256_and_si256(b, m4);
            q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
        }
        k45_finish(q, w[i].scales, f16(w[i].d), f16(w[i].dmin), a, i, facc, nt);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = hsum_ps(facc[t]);
}

KINLINE void tile_q5_k(const rlx_block_q5_k *w, const rlx_block_q8_k *const *a, int64_t nb, float *res,
                       const int nt)
{
    __m256 facc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++) {
        const __m256i qh = _mm256_loadu_si256((const __m256i *)w[i].qh);
        __m256i q[8];
        #pragma GCC unroll 8
        for (int k = 0; k < 4; k++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * k));
            /* bit j of qh[l] is the fifth bit of sub-block j */
            const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), one);
            const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k + 1), one);
            q[2 * k] = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_slli_epi16(h0, 4));
            q[2 * k + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), _mm256_slli_epi16(h1, 4));
        }
        k45_finish(q, w[i].scales, f16(w[i].d), f16(w[i].dmin), a, i, facc, nt);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = hsum_ps(facc[t]);
}

KINLINE void tile_q6_k(const rlx_block_q6_k *w, const rlx_block_q8_k *const *a, int64_t nb, float *res,
                       const int nt)
{
    __m256 facc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < nb; i++) {
        __m256i q[8], scv[8];
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));
            /* levels 0..63 (the -32 offset is applied through bsums below) */
            q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
            q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
            q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        /* scv[v] = [scale 2v x 8 | scale 2v+1 x 8]: both words sit in 64-bit lane v/2 */
        const __m256i sq[4] = {_mm256_permute4x64_epi64(sc16, 0x00), _mm256_permute4x64_epi64(sc16, 0x55),
                               _mm256_permute4x64_epi64(sc16, 0xAA), _mm256_permute4x64_epi64(sc16, 0xFF)};
        #pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            const short lo = (short)(((4 * (v & 1) + 1) << 8) | (4 * (v & 1))), hi = (short)(lo + 0x0202);
            scv[v] = _mm256_shuffle_epi8(sq[v / 2], _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi)));
        }
        const float d = f16(w[i].d);
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const rlx_block_q8_k *y = &a[t][i];
            __m256i acc = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int v = 0; v < 8; v++) {
                const __m256i p = _mm256_maddubs_epi16(q[v], _mm256_loadu_si256((const __m256i *)(y->qs + 32 * v)));
                acc = DOT_I16(acc, p, scv[v]);
            }
            const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), sc16);
            facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(d * y->d), facc[t]);
            facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_set1_ps(-32 * (d * y->d)), facc[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) res[t] = hsum_ps(facc[t]);
}

/* ---- F32 / F16 / BF16 weights (activations F32) ---- */

#include "backends/cpu/kern_x86_float.h"

#if KAVX512
#include "backends/cpu/kern_x86_512.h"
#define TILE_Q8_0 tile512_q8_0
#define TILE_Q4_0 tile512_q4_0
#define TILE_Q4_K tile512_q4_k
#define TILE_Q5_K tile512_q5_k
#define TILE_Q6_K tile512_q6_k
#else
#define TILE_Q8_0 tile_q8_0
#define TILE_Q4_0 tile_q4_0
#define TILE_Q4_K tile_q4_k
#define TILE_Q5_K tile_q5_k
#define TILE_Q6_K tile_q6_k
#endif

/* ---- driver ---- */

#define BY_NT(call, ...)                                          \
    switch (nt) {                                                 \
    case 1: call(__VA_ARGS__, 1); break;                          \
    case 2: call(__VA_ARGS__, 2); break;                          \
    case 3: call(__VA_ARGS__, 3); break;                          \
    default: call(__VA_ARGS__, 4); break;                         \
    }

void KPFX(matmul_rows)(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                       size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo,
                       const uint8_t *decode)
{
    const int maxt = 4;
    switch (type) {
    case RLX_F32: case RLX_F16: case RLX_BF16:
        KPFX(float_gemm)(type, w, rlx_row_bytes(type, K), n0, n1, act, act_row_bytes / 4, T, K, out, ldo, decode);
        return;
    case RLX_Q8_0: case RLX_Q4_0: case RLX_Q4_K: case RLX_Q5_K: case RLX_Q6_K: break;
    default:
        rlx__matmul_rows_scalar(type, w, n0, n1, act, act_row_bytes, T, K, out, ldo, decode);
        return;
    }
    const size_t wrow = rlx_row_bytes(type, K);
    const int64_t nbl = K / RLX_QK, nbk = K / RLX_QK_K;
#if KAVX512
    leg_tile L; /* 96 KiB of stack */
#else
    leg2_tile L; /* 36 KiB of stack */
#endif
    /* Chunks of weight rows small enough for L2 are visited by every activation tile in turn:
     * weights come from memory once, activations from memory once per chunk. */
    const int64_t chunk = RLX_MAX((int64_t)1, (int64_t)((256 << 10) / (wrow ? wrow : 1)));
    for (int64_t c0 = n0; c0 < n1; c0 += chunk) {
        const int64_t c1 = RLX_MIN(n1, c0 + chunk);
        for (int64_t t0 = 0; t0 < T; t0 += maxt) {
            const int nt = (int)RLX_MIN((int64_t)maxt, T - t0);
            const void *ap[4] = {act, act, act, act};
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) ap[t] = (const char *)act + (size_t)(t0 + t) * act_row_bytes;
#if KAVX512
            const bool rp = (type == RLX_Q8_0 || type == RLX_Q4_0) && (nbl + 1) / 2 <= LEG_MAXP;
            if (rp) leg_repack(&L, ap, nt, nbl, type == RLX_Q4_0);
#else
            const bool rp = (type == RLX_Q8_0 || type == RLX_Q4_0) && nbl <= LEG2_MAXB;
            if (rp) leg2_prepare(&L, ap, nt, nbl, type == RLX_Q4_0);
#endif
            for (int64_t n = c0; n < c1; n++) {
                const void *wr = (const char *)w + (size_t)n * wrow;
                float r[4] = {0, 0, 0, 0};
                switch (type) {
#if KAVX512
                case RLX_Q8_0:
                    if (rp) BY_NT(tile512rp_q8_0, wr, &L, nbl, r) else BY_NT(TILE_Q8_0, wr, (const rlx_block_q8_0 *const *)ap, nbl, r)
                    break;
                case RLX_Q4_0:
                    if (rp) BY_NT(tile512rp_q4_0, wr, &L, nbl, r) else BY_NT(TILE_Q4_0, wr, (const rlx_block_q8_0 *const *)ap, nbl, r)
                    break;
#else
                case RLX_Q8_0:
                    if (rp) BY_NT(tile_rp_q8_0, wr, &L, nbl, r) else BY_NT(TILE_Q8_0, wr, (const rlx_block_q8_0 *const *)ap, nbl, r)
                    break;
                case RLX_Q4_0:
                    if (rp) BY_NT(tile_rp_q4_0, wr, &L, nbl, r) else BY_NT(TILE_Q4_0, wr, (const rlx_block_q8_0 *const *)ap, nbl, r)
                    break;
#endif
                case RLX_Q4_K: BY_NT(TILE_Q4_K, wr, (const rlx_block_q8_k *const *)ap, nbk, r) break;
                case RLX_Q5_K: BY_NT(TILE_Q5_K, wr, (const rlx_block_q8_k *const *)ap, nbk, r) break;
                default: BY_NT(TILE_Q6_K, wr, (const rlx_block_q8_k *const *)ap, nbk, r) break;
                }
                #pragma GCC unroll 8
                for (int t = 0; t < nt; t++) out[(t0 + t) * ldo + n] = r[t];
            }
        }
    }
}
