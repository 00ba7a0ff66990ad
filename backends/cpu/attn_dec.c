/* attn_dec.c - attention's decode-row products with K and V read through row pointers, without
 * transposing (attn_dec.h). */
#include "backends/cpu/attn_dec.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- decode rows without transposing V -----------------------------------------------------
 * For a row of a one-token step llama.cpp's V^T . p is ggml_vec_dot per output channel d: four
 * accumulators of 16 lanes over positions (position k goes to accumulator (k mod 64) / 16, lane
 * k mod 16), ggml's pairwise reduction, then the lanes' sum. Kept "vertically" (a vector over 16
 * channels per lane), the same sums come from row-major V: one pass per accumulator and half of
 * its lanes (eight lane vectors per row, two rows of a head group sharing each V load, all in
 * registers), then the same reduction tree across the lanes. Positions past the last valid one
 * (p = 0, no V row) are skipped, as their terms never existed. Bit for bit the numbers of the
 * transposed product (tests/unit/test_cpu_attention.c checks both routes agree). The scalar
 * path takes the transposed product. */
#define KQV_LANES 16
#if defined(__x86_64__)
#define T512A __attribute__((target("avx512f")))

T512A static inline __m512 kqv_load(const uint8_t *v, int dc, const bool f16)
{
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)v + dc)))
               : _mm512_loadu_ps((const float *)v + dc);
}

/* _mm512_reduce_add_ps's tree across 16 lane vectors: halves of 8, of 4, then pairs */
T512A static inline __m512 red16_vert(const __m512 *x)
{
    __m512 h[8], q[4];
    for (int i = 0; i < 8; i++) h[i] = _mm512_add_ps(x[i + 8], x[i]);
    for (int i = 0; i < 4; i++) q[i] = _mm512_add_ps(h[i + 4], h[i]);
    return _mm512_add_ps(_mm512_add_ps(q[0], q[2]), _mm512_add_ps(q[1], q[3]));
}

/* nr (1 or 2) rows p[r] of probabilities over positions [0, nvalid) into y[r][0, hd) */
T512A __attribute__((always_inline)) static inline void kqv_dec512_rows(const float *const *p, const int nr, int64_t nvalid,
                                                                         const uint8_t *const *vrow, const bool f16, int hd,
                                                                         float *const *y)
{
    for (int dc = 0; dc < hd; dc += KQV_LANES) {
        __m512 part[2][4][KQV_LANES];
        for (int s = 0; s < 4; s++)
            for (int h = 0; h < 2; h++) {
                __m512 A[2][8];
                #pragma GCC unroll 8
                for (int l = 0; l < 8; l++) A[0][l] = A[1][l] = _mm512_setzero_ps();
                for (int64_t k0 = (int64_t)s * KQV_LANES + 8 * h; k0 < nvalid; k0 += 4 * KQV_LANES) {
                    const bool full = k0 + 8 <= nvalid;
                    #pragma GCC unroll 8
                    for (int l = 0; l < 8; l++) {
                        if (!full && k0 + l >= nvalid) break;
                        const __m512 v = kqv_load(vrow[k0 + l], dc, f16);
                        #pragma GCC unroll 2
                        for (int r = 0; r < nr; r++) A[r][l] = _mm512_fmadd_ps(v, _mm512_set1_ps(p[r][k0 + l]), A[r][l]);
                    }
                }
                #pragma GCC unroll 2
                for (int r = 0; r < nr; r++)
                    #pragma GCC unroll 8
                    for (int l = 0; l < 8; l++) part[r][s][8 * h + l] = A[r][l];
            }
        #pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            __m512 x[KQV_LANES];
            for (int l = 0; l < KQV_LANES; l++)
                x[l] = _mm512_add_ps(_mm512_add_ps(part[r][0][l], part[r][2][l]), _mm512_add_ps(part[r][1][l], part[r][3][l]));
            _mm512_storeu_ps(y[r] + dc, red16_vert(x));
        }
    }
}

T512A void rlx__kqv_dec512(const float *const *p, int nr, int64_t nvalid, const uint8_t *const *vrow, bool f16, int hd,
                             float *const *y)
{
    for (int r = 0; r < nr; r += 2) {
        const bool two = r + 1 < nr;
        if (f16 && two) kqv_dec512_rows(p + r, 2, nvalid, vrow, true, hd, y + r);
        else if (f16) kqv_dec512_rows(p + r, 1, nvalid, vrow, true, hd, y + r);
        else if (two) kqv_dec512_rows(p + r, 2, nvalid, vrow, false, hd, y + r);
        else kqv_dec512_rows(p + r, 1, nvalid, vrow, false, hd, y + r);
    }
}

/* The same sums on the avx2 paths: eight channels per vector, the sixteen lanes of each
 * accumulator taken four at a time (two rows' lane vectors then fit in the sixteen registers).
 * Transposing V instead cost a scalar copy of every value for each decode row group (AVX2
 * decode at 128 positions of context ran 25% slower than at 0). */
#define T256A __attribute__((target("avx2,fma,f16c")))

T256A static inline __m256 kqv_load256(const uint8_t *v, int dc, const bool f16)
{
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)v + dc)))
               : _mm256_loadu_ps((const float *)v + dc);
}

T256A static inline __m256 red16_vert256(const __m256 *x)
{
    __m256 h[8], q[4];
    for (int i = 0; i < 8; i++) h[i] = _mm256_add_ps(x[i + 8], x[i]);
    for (int i = 0; i < 4; i++) q[i] = _mm256_add_ps(h[i + 4], h[i]);
    return _mm256_add_ps(_mm256_add_ps(q[0], q[2]), _mm256_add_ps(q[1], q[3]));
}

T256A __attribute__((always_inline)) static inline void kqv_dec256_rows(const float *const *p, const int nr, int64_t nvalid,
                                                                         const uint8_t *const *vrow, const bool f16, int hd,
                                                                         float *const *y)
{
    for (int dc = 0; dc < hd; dc += 8) {
        __m256 part[2][4][KQV_LANES];
        for (int s = 0; s < 4; s++)
            for (int h = 0; h < 4; h++) {
                __m256 A[2][4];
                #pragma GCC unroll 4
                for (int l = 0; l < 4; l++) A[0][l] = A[1][l] = _mm256_setzero_ps();
                for (int64_t k0 = (int64_t)s * KQV_LANES + 4 * h; k0 < nvalid; k0 += 4 * KQV_LANES) {
                    const bool full = k0 + 4 <= nvalid;
                    #pragma GCC unroll 4
                    for (int l = 0; l < 4; l++) {
                        if (!full && k0 + l >= nvalid) break;
                        const __m256 v = kqv_load256(vrow[k0 + l], dc, f16);
                        #pragma GCC unroll 2
                        for (int r = 0; r < nr; r++) A[r][l] = _mm256_fmadd_ps(v, _mm256_set1_ps(p[r][k0 + l]), A[r][l]);
                    }
                }
                #pragma GCC unroll 2
                for (int r = 0; r < nr; r++)
                    #pragma GCC unroll 4
                    for (int l = 0; l < 4; l++) part[r][s][4 * h + l] = A[r][l];
            }
        #pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            __m256 x[KQV_LANES];
            for (int l = 0; l < KQV_LANES; l++)
                x[l] = _mm256_add_ps(_mm256_add_ps(part[r][0][l], part[r][2][l]), _mm256_add_ps(part[r][1][l], part[r][3][l]));
            _mm256_storeu_ps(y[r] + dc, red16_vert256(x));
        }
    }
}

T256A void rlx__kqv_dec256(const float *const *p, int nr, int64_t nvalid, const uint8_t *const *vrow, bool f16, int hd,
                             float *const *y)
{
    for (int r = 0; r < nr; r += 2) {
        const bool two = r + 1 < nr;
        if (f16 && two) kqv_dec256_rows(p + r, 2, nvalid, vrow, true, hd, y + r);
        else if (f16) kqv_dec256_rows(p + r, 1, nvalid, vrow, true, hd, y + r);
        else if (two) kqv_dec256_rows(p + r, 2, nvalid, vrow, false, hd, y + r);
        else kqv_dec256_rows(p + r, 1, nvalid, vrow, false, hd, y + r);
    }
}
#endif


/* ---- K.q of decode rows, avx2 paths ---------------------------------------------------------
 * One score is ggml_vec_dot (dtile / dtile_out in kern_x86_float.h): four 16-lane chains over
 * every 64 values (chain s: values 16s .. 16s + 15 of each 64), (c0 + c2) + (c1 + c3), the
 * 16-lane tree (lanes i + 8 and i, then hsum_ps: i + 4, then (0 + 2) + (1 + 3)), in double
 * (exact: no tail when hd % 64 == 0). Here each K row is converted once for two query rows
 * (dtile took one score at a time, converting the row per query head), the chains are summed
 * as they finish (s in the order 0, 2, 1, 3), and the last three levels of the tree run for
 * eight positions at once on transposed vectors: the same operations per score in the same
 * order, bit for bit. */
#if defined(__x86_64__)
#define T256K __attribute__((target("avx2,fma,f16c")))

T256K static inline __m256 kq_w8(const uint8_t *row, int k, bool f16)
{
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + k))) : _mm256_loadu_ps((const float *)row + k);
}

/* h[r] = hi + lo of (c0 + c2) + (c1 + c3) for query rows q, q + hd (nr2 of them) and one K row */
T256K __attribute__((always_inline)) static inline void kq_pos(const float *q, const int nr2, int hd, const uint8_t *row,
                                                              const bool f16, __m256 *h)
{
    static const int order[4] = {0, 2, 1, 3};
    __m256 t02[2][2], a1[2][2];
    #pragma GCC unroll 4
    for (int oi = 0; oi < 4; oi++) {
        const int s = order[oi];
        __m256 c[2][2];
        #pragma GCC unroll 2
        for (int r = 0; r < nr2; r++) c[r][0] = c[r][1] = _mm256_setzero_ps();
        for (int m = 0; m < hd; m += 64) {
            const __m256 wl = kq_w8(row, m + 16 * s, f16), wh = kq_w8(row, m + 16 * s + 8, f16);
            #pragma GCC unroll 2
            for (int r = 0; r < nr2; r++) {
                const float *qr = q + (size_t)r * hd + m + 16 * s;
                c[r][0] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(qr), c[r][0]);
                c[r][1] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(qr + 8), c[r][1]);
            }
        }
        #pragma GCC unroll 2
        for (int r = 0; r < nr2; r++)
            #pragma GCC unroll 2
            for (int x = 0; x < 2; x++) {
                if (s == 0) t02[r][x] = c[r][x];
                else if (s == 2) t02[r][x] = _mm256_add_ps(t02[r][x], c[r][x]);
                else if (s == 1) a1[r][x] = c[r][x];
                else t02[r][x] = _mm256_add_ps(t02[r][x], _mm256_add_ps(a1[r][x], c[r][x]));
            }
    }
    #pragma GCC unroll 2
    for (int r = 0; r < nr2; r++) h[r] = _mm256_add_ps(t02[r][1], t02[r][0]);
}

/* K rows RLX_KQ_PREFETCH positions ahead of [k0, k0 + nk) toward L1 (attention.c touches only
 * the first ones at the item's start) */
static inline void kq_prefetch(const uint8_t *const *krow, int64_t k0, int nk, int64_t n, int bytes)
{
    for (int j = 0; j < nk && k0 + j + RLX_KQ_PREFETCH < n; j++)
        for (int o = 0; o < bytes; o += 64) _mm_prefetch((const char *)krow[k0 + j + RLX_KQ_PREFETCH] + o, _MM_HINT_T0);
}

/* out[o] = hsum_ps(h[o]) for eight vectors: ((h0 + h4) + (h2 + h6)) + ((h1 + h5) + (h3 + h7)) */
T256K static inline __m256 kq_hsum8(const __m256 *h)
{
    __m128 s[8];
    for (int o = 0; o < 8; o++) s[o] = _mm_add_ps(_mm256_castps256_ps128(h[o]), _mm256_extractf128_ps(h[o], 1));
    __m256 z[4];
    for (int o = 0; o < 4; o++) z[o] = _mm256_insertf128_ps(_mm256_castps128_ps256(s[o]), s[o + 4], 1);
    const __m256 t0 = _mm256_unpacklo_ps(z[0], z[1]), t1 = _mm256_unpackhi_ps(z[0], z[1]);
    const __m256 t2 = _mm256_unpacklo_ps(z[2], z[3]), t3 = _mm256_unpackhi_ps(z[2], z[3]);
    const __m256 c0 = _mm256_shuffle_ps(t0, t2, 0x44), c1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 c2 = _mm256_shuffle_ps(t1, t3, 0x44), c3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    return _mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c1, c3));
}

/* The scores of nk (<= 8) positions of one query row from their h vectors (each score a float
 * sum through double and back: itself) */
T256K static inline void kq_store8(__m256 *hb, int nk, float *o)
{
    for (int j = nk; j < 8; j++) hb[j] = _mm256_setzero_ps();
    const __m256 v = kq_hsum8(hb);
    if (nk == 8) {
        _mm256_storeu_ps(o, v);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    for (int j = 0; j < nk; j++) o[j] = tmp[j];
}

T256K void rlx__kq_dec256(const float *q, int nr, int hd, const uint8_t *const *krow, int64_t n, bool f16, float *S, size_t sstride)
{
    for (int r0 = 0; r0 < nr; r0 += 2) {
        const int nr2 = nr - r0 >= 2 ? 2 : 1;
        const float *qr = q + (size_t)r0 * hd;
        __m256 hb[2][8];
        for (int64_t k0 = 0; k0 < n; k0 += 8) {
            const int nk = n - k0 >= 8 ? 8 : (int)(n - k0);
            kq_prefetch(krow, k0, nk, n, hd * (f16 ? 2 : 4));
            for (int j = 0; j < nk; j++) {
                __m256 h[2];
                switch (nr2 * 2 + f16) { /* constant row counts and types for the inlined body */
                case 4: kq_pos(qr, 2, hd, krow[k0 + j], false, h); break;
                case 5: kq_pos(qr, 2, hd, krow[k0 + j], true, h); break;
                case 2: kq_pos(qr, 1, hd, krow[k0 + j], false, h); break;
                default: kq_pos(qr, 1, hd, krow[k0 + j], true, h); break;
                }
                for (int r = 0; r < nr2; r++) hb[r][j] = h[r];
            }
            for (int r = 0; r < nr2; r++) kq_store8(hb[r], nk, S + (size_t)(r0 + r) * sstride + k0);
        }
    }
}
/* The same on the avx512 paths: 16-lane chains in one register each (up to four query rows per
 * K row), the first level of the 16-lane tree (lanes i + 8 and i) per score, the rest as above. */
#define T512K __attribute__((target("avx512f,avx2,fma,f16c")))

T512K static inline __m512 kq_w16(const uint8_t *row, int k, bool f16)
{
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + k))) : _mm512_loadu_ps((const float *)row + k);
}

T512K __attribute__((always_inline)) static inline void kq_pos512(const float *q, const int nr4, int hd, const uint8_t *row,
                                                                 const bool f16, __m256 *h)
{
    static const int order[4] = {0, 2, 1, 3};
    __m512 t02[4], a1[4];
    #pragma GCC unroll 4
    for (int oi = 0; oi < 4; oi++) {
        const int s = order[oi];
        __m512 c[4];
        #pragma GCC unroll 4
        for (int r = 0; r < nr4; r++) c[r] = _mm512_setzero_ps();
        for (int m = 0; m < hd; m += 64) {
            const __m512 w = kq_w16(row, m + 16 * s, f16);
            #pragma GCC unroll 4
            for (int r = 0; r < nr4; r++) c[r] = _mm512_fmadd_ps(w, _mm512_loadu_ps(q + (size_t)r * hd + m + 16 * s), c[r]);
        }
        #pragma GCC unroll 4
        for (int r = 0; r < nr4; r++) {
            if (s == 0) t02[r] = c[r];
            else if (s == 2) t02[r] = _mm512_add_ps(t02[r], c[r]);
            else if (s == 1) a1[r] = c[r];
            else t02[r] = _mm512_add_ps(t02[r], _mm512_add_ps(a1[r], c[r]));
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < nr4; r++)
        h[r] = _mm256_add_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t02[r]), 1)), _mm512_castps512_ps256(t02[r]));
}

T512K void rlx__kq_dec512(const float *q, int nr, int hd, const uint8_t *const *krow, int64_t n, bool f16, float *S, size_t sstride)
{
    for (int r0 = 0; r0 < nr; r0 += 4) {
        const int nr4 = nr - r0 >= 4 ? 4 : nr - r0;
        const float *qr = q + (size_t)r0 * hd;
        __m256 hb[4][8];
        for (int64_t k0 = 0; k0 < n; k0 += 8) {
            const int nk = n - k0 >= 8 ? 8 : (int)(n - k0);
            kq_prefetch(krow, k0, nk, n, hd * (f16 ? 2 : 4));
            for (int j = 0; j < nk; j++) {
                __m256 h[4];
                switch (nr4 * 2 + f16) {
                case 8: kq_pos512(qr, 4, hd, krow[k0 + j], false, h); break;
                case 9: kq_pos512(qr, 4, hd, krow[k0 + j], true, h); break;
                case 6: kq_pos512(qr, 3, hd, krow[k0 + j], false, h); break;
                case 7: kq_pos512(qr, 3, hd, krow[k0 + j], true, h); break;
                case 4: kq_pos512(qr, 2, hd, krow[k0 + j], false, h); break;
                case 5: kq_pos512(qr, 2, hd, krow[k0 + j], true, h); break;
                case 2: kq_pos512(qr, 1, hd, krow[k0 + j], false, h); break;
                default: kq_pos512(qr, 1, hd, krow[k0 + j], true, h); break;
                }
                for (int r = 0; r < nr4; r++) hb[r][j] = h[r];
            }
            for (int r = 0; r < nr4; r++) kq_store8(hb[r], nk, S + (size_t)(r0 + r) * sstride + k0);
        }
    }
}
#endif
