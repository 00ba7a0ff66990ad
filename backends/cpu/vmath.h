/* vmath.h - exp and SiLU as llama.cpp's x86 CPU backend computes them, so softmax and SwiGLU
 * give its bits: ggml evaluates 16 values at a time with ggml_v_expf (AVX-512: a degree-5
 * polynomial after a range reduction by ln 2, then _mm512_scalef_ps) and the tail of a row
 * that is not a multiple of 16 with libm's expf. rlx__vexp() is that computation in scalar
 * code; the AVX2 and AVX-512 versions below return the same bits. Private to backends/cpu/. */
#ifndef RLX_CPU_VMATH_H
#define RLX_CPU_VMATH_H

#include <math.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ggml_v_expf (the AVX-512 variant), one value. */
static inline float rlx__vexp(float x)
{
    const float r = 0x1.8p23f, z = fmaf(x, 0x1.715476p+0f, r), n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x)), u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192) return n <= 0 ? 0.0f : INFINITY;
    return ldexpf(j, (int)n); /* = scalef(j, n), correctly rounded where the result is subnormal */
}

/* ggml_v_silu, one value; ggml_silu_f32 (libm) is used for the tail of a row. */
static inline float rlx__vsilu(float x) { return x / (1.0f + rlx__vexp(0.0f - x)); }
static inline float rlx__silu_libm(float x) { return x / (1.0f + expf(-x)); }

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static inline __m512 rlx__vexp512(__m512 x)
{
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r), n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!d) return res;
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(d, res, alt);
}

__attribute__((target("avx512f"))) static inline __m512 rlx__vsilu512(__m512 x)
{
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), rlx__vexp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

/* The same polynomial in AVX2; the power-of-two scaling is a multiplication where it is exact
 * (|n| <= 125), otherwise the lanes go through the scalar code. */
__attribute__((target("avx2,fma"))) static inline __m256 rlx__vexp256(__m256 x)
{
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r), n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    if (!_mm256_movemask_ps(_mm256_cmp_ps(an, _mm256_set1_ps(125), _CMP_GT_OQ))) {
        const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
        return _mm256_mul_ps(j, _mm256_castsi256_ps(e));
    }
    float jv[8], nv[8];
    _mm256_storeu_ps(jv, j);
    _mm256_storeu_ps(nv, n);
    for (int l = 0; l < 8; l++) jv[l] = fabsf(nv[l]) > 192 ? (nv[l] <= 0 ? 0.0f : INFINITY) : ldexpf(jv[l], (int)nv[l]);
    return _mm256_loadu_ps(jv);
}

__attribute__((target("avx2,fma"))) static inline __m256 rlx__vsilu256(__m256 x)
{
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), rlx__vexp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}
#endif

#endif
