/* kern_x86_q4kx8.h - Q4_K products over the packed layout of repack.h (rlx_block_q4_k_x8),
 * included by kern_x86_q.h on every x86 path (256-bit vectors throughout; the avx512 builds
 * gain the sixteen extra registers, and VNNI's vpdpbusd for the 8-bit products).
 *
 * One vector holds four bytes of each of eight weight rows, so every instruction works for the
 * eight rows and each activation load (four bytes broadcast) serves them all; the GGUF-layout
 * tile (kern_x86_q.h, tile8_q4_k) unpacks each row's scales and reduces eight vectors per
 * block instead. vpmaddubsw products of 4-bit levels and int8 activations are summed in 16 bits
 * over a sub-block (16 products of at most 15 x 128: 30720, no saturation), then times the
 * sub-block scale into 32 bits (with VNNI: vpdpbusd sums in 32 bits, times the scale with
 * vpmulld). The integer sums are those of tile8_q4_k, and the float
 * operations are the same in the same order: one fused multiply-add per super-block (batched:
 * per pair of sub-blocks) into a chain for the sums and one for the mins, so the results are
 * bit-identical to rlx_matmul_rows / rlx_matmul_rows_batched on the GGUF layout. */

#include "backends/cpu/repack.h"

/* pshufb masks: sub-block (j % 4)'s scale of each row lane as a pair of 16-bit words */
KINLINE __m256i x8_scale_mask(int q)
{
    const char b0 = (char)(4 * q), b1 = (char)(4 * q + 1), b2 = (char)(4 * q + 2), b3 = (char)(4 * q + 3);
    const __m128i m = _mm_setr_epi8(b0, -1, b0, -1, b1, -1, b1, -1, b2, -1, b2, -1, b3, -1, b3, -1);
    return _mm256_setr_m128i(m, m);
}

/* Eight weight rows (one packed row group) x nt activation rows; res[t] lane r = output (r, t). */
KINLINE void tile_q4_k_x8(const rlx_block_q4_k_x8 *w, const rlx_block_q8_k *const *a, int64_t nb, __m256 *res,
                          const bool batched, const int nt)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[4], accm[4];
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const rlx_block_q4_k_x8 *b = &w[i];
        const __m256i L0 = _mm256_loadu_si256((const __m256i *)b->lo), L1 = _mm256_loadu_si256((const __m256i *)(b->lo + 32));
        const __m256i H = _mm256_loadu_si256((const __m256i *)b->hi);
        const __m256i S[2] = {
            _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30)),
            _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30))};
        const __m256i M0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), _mm256_and_si256(H, m30));
        const __m256i M1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
        /* the mins of pair p (sub-blocks 2p, 2p+1) per row lane, as 16-bit pairs */
        const __m256i mp[4] = {_mm256_cvtepu8_epi16(_mm256_castsi256_si128(M0)), _mm256_cvtepu8_epi16(_mm256_extracti128_si256(M0, 1)),
                               _mm256_cvtepu8_epi16(_mm256_castsi256_si128(M1)), _mm256_cvtepu8_epi16(_mm256_extracti128_si256(M1, 1))};
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d));
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->dmin));
        __m256i isum[4], imin[4];
        int32_t bs[4][4]; /* per activation row: the eight sub-block sums (16 bits), by pairs */
        __m256 sc[4], scm[4];
        #pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const int16_t *y = a[t][i].bsums;
            _mm_storeu_si128((__m128i *)bs[t], _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y), _mm_loadu_si128((const __m128i *)(y + 8))));
            const __m256 dy = _mm256_set1_ps(a[t][i].d);
            sc[t] = _mm256_mul_ps(dw, dy);
            scm[t] = _mm256_mul_ps(dmw, dy);
            isum[t] = imin[t] = _mm256_setzero_si256();
        }
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i lo16[4], hi16[4];
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++) lo16[t] = hi16[t] = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 256 * k + 32 * g));
                const __m256i ql = _mm256_and_si256(v, m4), qh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                #pragma GCC unroll 4
                for (int t = 0; t < nt; t++) {
                    int32_t xl, xh;
                    memcpy(&xl, a[t][i].qs + 64 * k + 4 * g, 4);
                    memcpy(&xh, a[t][i].qs + 64 * k + 32 + 4 * g, 4);
#if KVNNI
                    lo16[t] = DOT_U8S8(lo16[t], ql, _mm256_set1_epi32(xl));
                    hi16[t] = DOT_U8S8(hi16[t], qh, _mm256_set1_epi32(xh));
#else
                    lo16[t] = _mm256_add_epi16(lo16[t], _mm256_maddubs_epi16(ql, _mm256_set1_epi32(xl)));
                    hi16[t] = _mm256_add_epi16(hi16[t], _mm256_maddubs_epi16(qh, _mm256_set1_epi32(xh)));
#endif
                }
            }
            const __m256i scl = _mm256_shuffle_epi8(S[k / 2], x8_scale_mask((2 * k) % 4));
            const __m256i sch = _mm256_shuffle_epi8(S[k / 2], x8_scale_mask((2 * k + 1) % 4));
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
#if KVNNI /* 32-bit sums (lo16/hi16 hold them), times the scale as 32-bit lanes (the pairs' high words) */
                const __m256i s = _mm256_add_epi32(_mm256_mullo_epi32(lo16[t], _mm256_srli_epi32(scl, 16)),
                                                   _mm256_mullo_epi32(hi16[t], _mm256_srli_epi32(sch, 16)));
#else
                const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(lo16[t], scl), _mm256_madd_epi16(hi16[t], sch));
#endif
                const __m256i m = _mm256_madd_epi16(mp[k], _mm256_set1_epi32(bs[t][k]));
                if (batched) {
                    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc[t], acc[t]);
                    accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), scm[t], accm[t]);
                } else {
                    isum[t] = _mm256_add_epi32(isum[t], s);
                    imin[t] = _mm256_add_epi32(imin[t], m);
                }
            }
        }
        if (!batched) {
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), sc[t], acc[t]);
                accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin[t]), scm[t], accm[t]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++) res[t] = _mm256_sub_ps(acc[t], accm[t]);
}

void KPFX(matmul_q4_k_x8)(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                          int64_t T, int64_t K, float *out, int64_t ldo, bool batched)
{
    const int64_t nb = K / RLX_QK_K;
    const rlx_block_q4_k_x8 *wp = packed;
    /* chunks of rows small enough for L2 are visited by every activation tile in turn */
    const int64_t chunk = RLX_MAX((int64_t)8, (int64_t)((256 << 10) / ((size_t)nb * sizeof(rlx_block_q4_k))) / 8 * 8);
    for (int64_t c0 = n0; c0 < n1; c0 += chunk) {
        const int64_t c1 = RLX_MIN(n1, c0 + chunk);
        for (int64_t t0 = 0; t0 < T; t0 += 4) {
            const int nt = (int)RLX_MIN((int64_t)4, T - t0);
            const rlx_block_q8_k *ap[4];
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) ap[t] = (const rlx_block_q8_k *)((const char *)act + (size_t)(t0 + RLX_MIN(t, nt - 1)) * act_row_bytes);
            for (int64_t n = c0; n < c1; n += 8) {
                const rlx_block_q4_k_x8 *w = wp + (n / 8) * nb;
                __m256 res[4];
                if (batched) BY_NT_Q(tile_q4_k_x8, w, ap, nb, res, true)
                else BY_NT_Q(tile_q4_k_x8, w, ap, nb, res, false)
                const int nr = (int)RLX_MIN((int64_t)8, c1 - n);
                for (int t = 0; t < nt; t++) {
                    float v[8];
                    _mm256_storeu_ps(v, res[t]);
                    memcpy(out + (t0 + t) * ldo + n, v, (size_t)nr * sizeof(float));
                }
            }
        }
    }
}
