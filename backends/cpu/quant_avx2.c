/* quant_avx2.c - AVX2 activation quantizers (Q8_0, Q8_K): the same bytes as rlx_quantize_act's
 * scalar code in quant.c / quant_k.c, computed 8 lanes at a time. Activations are quantized
 * before every product, single-threaded in decode, so this is on the critical path. */
#include "backends/cpu/kernels.h"
#include "backends/quant_internal.h"

#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <string.h>

static inline float hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Four vectors of 8 int32 in [-128, 127] -> 32 int8 in order. */
static inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd); /* lanes interleaved by the packs */
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void rlx__avx2_quant_q8_0(const float *x, rlx_block_q8_0 *y, int64_t nb)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < nb; i++, x += RLX_QK) {
        __m256 v[4];
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
        const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                                       _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
        const float amax = hmax_ps(m);
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = _cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4]; /* the conversion rounds to nearest even, as rlx__nearest_int */
        for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
        _mm256_storeu_si256((__m256i *)y[i].qs, pack32(q[0], q[1], q[2], q[3]));
    }
}

void rlx__avx2_quant_q8_k(const float *x, rlx_block_q8_k *y, int64_t nb, bool batched)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < nb; i++, x += RLX_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < RLX_QK_K / 8; k++) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs_mask));
        const float amax = hmax_ps(m);
        memset(&y[i], 0, sizeof y[i]);
        if (!amax) continue;
        /* the scalar code keeps the first element of largest magnitude, sign included (batched:
         * positive if any element is +amax) */
        float max = 0;
        const __m256 va = _mm256_set1_ps(amax);
        for (int k = 0; k < RLX_QK_K / 8; k++) {
            const __m256 v = _mm256_loadu_ps(x + 8 * k);
            if (batched) {
                if (_mm256_movemask_ps(_mm256_cmp_ps(v, va, _CMP_EQ_OQ))) { max = amax; break; }
                max = -amax;
                continue;
            }
            const int bits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(v, abs_mask), va, _CMP_EQ_OQ));
            if (bits) { max = x[8 * k + __builtin_ctz((unsigned)bits)]; break; }
        }
        const float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int k = 0; k < RLX_QK_K / 32; k++) {
            __m256i q[4];
            for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * k + 8 * j)));
            const __m256i b = pack32(q[0], q[1], q[2], q[3]); /* saturation = the scalar MIN(127, .) */
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * k), b);
            /* sums of 16: bias to unsigned, sum bytes per 8, remove the bias */
            const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(b, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
            y[i].bsums[2 * k] = (int16_t)(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) - 16 * 128);
            y[i].bsums[2 * k + 1] = (int16_t)(_mm256_extract_epi64(s, 2) + _mm256_extract_epi64(s, 3) - 16 * 128);
        }
        y[i].d = 1 / iscale;
    }
}
#endif
