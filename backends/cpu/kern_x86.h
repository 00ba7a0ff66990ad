/* kern_x86.h - the x86 SIMD kernels of rlx_matmul_rows, written once and compiled per path by
 * kern_avx2.c / kern_avx2vnni.c / kern_avx512.c / kern_avx512vnni.c, which set before including
 * this file:
 *   KPFX(name)  the exported entry's prefix (rlx__<path>_matmul_rows)
 *   KVNNI       1: vpdpbusd / vpdpwssd (AVX-512 VNNI); 2: the same in AVX-VNNI encoding;
 *               0: vpmaddubsw + vpmaddwd
 *   KMAXT_F     activation rows per tile for float weights (register budget: 16 or 32 ymm)
 *   KAVX512     1: the 512-bit integer parts of kern_x86_512.h for the K formats
 *
 * The quantized types are in kern_x86_q.h (bit-identical to the scalar reference). Float
 * weights: chunks of weight rows that fit L2, activation rows in tiles of up to KMAXT_F visit
 * every row of a chunk, so weights stream from memory once per call and each weight row is
 * loaded once per tile of activations; four 8-lane FMA accumulators, then a scalar tail for
 * K % 32. The per-(t, n) arithmetic is the same whatever the tile size or row range: results
 * are batch invariant. */
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

#include "backends/cpu/kern_x86_q.h"

/* ---- F32 / F16 / BF16 weights (activations F32) ---- */

KINLINE __m256 load_w_f32(const void *w, int64_t i) { return _mm256_loadu_ps((const float *)w + i); }
KINLINE __m256 load_w_f16(const void *w, int64_t i)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
}
KINLINE __m256 load_w_bf16(const void *w, int64_t i)
{
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
KINLINE float scal_f32(const void *w, int64_t i) { return ((const float *)w)[i]; }
KINLINE float scal_f16(const void *w, int64_t i) { return f16(((const uint16_t *)w)[i]); }
KINLINE float scal_bf16(const void *w, int64_t i) { return rlx_bf16_to_f32(((const uint16_t *)w)[i]); }

#define FLOAT_TILE(NAME, LOADW, SCALW)                                                            \
    KINLINE void NAME(const void *w, const float *const *a, int64_t K, float *res, const int nt) \
    {                                                                                            \
        __m256 acc[4][4];                                                                        \
        _Pragma("GCC unroll 8")                                                                  \
        for (int t = 0; t < nt; t++)                                                             \
            _Pragma("GCC unroll 8")                                                              \
            for (int u = 0; u < 4; u++) acc[t][u] = _mm256_setzero_ps();                         \
        int64_t i = 0;                                                                           \
        for (; i + 32 <= K; i += 32) {                                                           \
            __m256 wv[4];                                                                        \
            _Pragma("GCC unroll 8")                                                              \
            for (int u = 0; u < 4; u++) wv[u] = LOADW(w, i + 8 * u);                             \
            _Pragma("GCC unroll 8")                                                              \
            for (int t = 0; t < nt; t++)                                                         \
                _Pragma("GCC unroll 8")                                                          \
                for (int u = 0; u < 4; u++)                                                      \
                    acc[t][u] = _mm256_fmadd_ps(wv[u], _mm256_loadu_ps(a[t] + i + 8 * u), acc[t][u]); \
        }                                                                                        \
        _Pragma("GCC unroll 8")                                                                  \
        for (int t = 0; t < nt; t++) {                                                           \
            float r = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]),                 \
                                            _mm256_add_ps(acc[t][2], acc[t][3])));               \
            for (int64_t j = i; j < K; j++) r += SCALW(w, j) * a[t][j];                          \
            res[t] = r;                                                                          \
        }                                                                                        \
    }
FLOAT_TILE(tile_f32, load_w_f32, scal_f32)
FLOAT_TILE(tile_f16, load_w_f16, scal_f16)
FLOAT_TILE(tile_bf16, load_w_bf16, scal_bf16)

/* ---- driver ---- */

#define BY_NT(call, ...)                                          \
    switch (nt) {                                                 \
    case 1: call(__VA_ARGS__, 1); break;                          \
    case 2: call(__VA_ARGS__, 2); break;                          \
    case 3: call(__VA_ARGS__, 3); break;                          \
    default: call(__VA_ARGS__, 4); break;                         \
    }

void KPFX(matmul_rows)(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                       size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo)
{
    int maxt;
    switch (type) {
    case RLX_F32: case RLX_F16: case RLX_BF16: maxt = KMAXT_F; break;
    case RLX_Q8_0: case RLX_Q4_0: case RLX_Q4_K: case RLX_Q5_K: case RLX_Q6_K:
        matmul_rows_q(type, false, w, n0, n1, act, act_row_bytes, T, K, out, ldo);
        return;
    default:
        rlx__matmul_rows_scalar(type, w, n0, n1, act, act_row_bytes, T, K, out, ldo);
        return;
    }
    const size_t wrow = rlx_row_bytes(type, K);
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
            for (int64_t n = c0; n < c1; n++) {
                const void *wr = (const char *)w + (size_t)n * wrow;
                float r[4] = {0, 0, 0, 0};
                switch (type) {
                case RLX_F32: BY_NT(tile_f32, wr, (const float *const *)ap, K, r) break;
                case RLX_F16: BY_NT(tile_f16, wr, (const float *const *)ap, K, r) break;
                default: BY_NT(tile_bf16, wr, (const float *const *)ap, K, r) break;
                }
                #pragma GCC unroll 8
                for (int t = 0; t < nt; t++) out[(t0 + t) * ldo + n] = r[t];
            }
        }
    }
}
