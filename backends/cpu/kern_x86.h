/* kern_x86.h - the x86 SIMD kernels of rlx_matmul_rows, written once and compiled per path by
 * kern_avx2.c / kern_avx2vnni.c / kern_avx512.c / kern_avx512vnni.c, which set before including
 * this file:
 *   KPFX(name)  the exported entry's prefix (rlx__<path>_matmul_rows)
 *   KVNNI       1: vpdpbusd / vpdpwssd (AVX-512 VNNI); 2: the same in AVX-VNNI encoding;
 *               0: vpmaddubsw + vpmaddwd
 *   KAVX512     1: the 512-bit integer parts of kern_x86_512.h for the K formats, 512-bit float
 *               tiles
 *
 * The quantized types are in kern_x86_q.h, the float types in kern_x86_float.h; both compute
 * the numbers of the scalar references (quant.c, quant_k.c, quant_f.c: llama.cpp's arithmetic)
 * bit for bit on every path. Weights stream from memory once per call; each output's
 * arithmetic is the same whatever the tile size or row range, so results are batch invariant. */
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

#include "backends/cpu/kern_x86_float.h"

/* ---- entries ---- */

/* rlx__cpu_float_tile_rows: the batched F32/F16 product tile's height on this path */
const int KPFX(float_tile_rows) = PP_RM;

/* rlx_matmul_rows: llama.cpp's one-row arithmetic for every row */
void KPFX(matmul_rows)(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                       size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo)
{
    switch (type) {
    case RLX_F32: case RLX_F16: case RLX_BF16:
        float_rows(type, w, rlx_row_bytes(type, K), n0, n1, act, act_row_bytes / 4, 0, T, K, out, ldo, true);
        return;
    case RLX_Q8_0: case RLX_Q4_0: case RLX_Q4_K: case RLX_Q5_K: case RLX_Q6_K:
        matmul_rows_q(type, false, false, w, n0, n1, act, act_row_bytes, T, K, out, ldo);
        return;
    default:
        rlx__matmul_rows_scalar(type, w, n0, n1, act, act_row_bytes, T, K, out, ldo);
        return;
    }
}

/* the Q8_0 tile's height on this path: the row group of its packed layout (rlx__repack_rows) */
const int KPFX(q8_0_rows) = Q8_0_ROWS;

/* rlx_packed_fn for Q8_0 in the packed layout of repack.h: matmul_rows' arithmetic (Q8_0 has one
 * for every batch), the tiles reading a row's blocks Q8_0_ROWS blocks apart */
void KPFX(matmul_q8_0_packed)(const void *packed, int64_t n0, int64_t n1, const void *act, size_t act_row_bytes,
                              int64_t T, int64_t K, float *out, int64_t ldo, bool batched)
{
    (void)batched;
    matmul_rows_q(RLX_Q8_0, false, true, packed, n0, n1, act, act_row_bytes, T, K, out, ldo);
}

/* rlx_matmul_rows_batched: tinyBLAS for float weights, the repacked 4-row gemm for Q4_K; the
 * other types have one arithmetic */
void KPFX(matmul_rows_batched)(int type, const void *w, int64_t n0, int64_t n1, const void *act,
                               size_t act_row_bytes, int64_t T, int64_t K, float *out, int64_t ldo)
{
    switch (type) {
    case RLX_F32: case RLX_F16: case RLX_BF16:
        float_rows(type, w, rlx_row_bytes(type, K), n0, n1, act, act_row_bytes / 4, 0, T, K, out, ldo, false);
        return;
    case RLX_Q4_K: matmul_rows_q(type, true, false, w, n0, n1, act, act_row_bytes, T, K, out, ldo); return;
    default: KPFX(matmul_rows)(type, w, n0, n1, act, act_row_bytes, T, K, out, ldo); return;
    }
}
