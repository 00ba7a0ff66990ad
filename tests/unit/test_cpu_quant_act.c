/* test_cpu_quant_act.c - activation rows quantized by the CPU backend (vectorised on AVX-512)
 * are byte-identical on every path to rlx_quantize_act / rlx_quantize_act_batched computed by
 * the scalar code: random rows, exact halves (rounding direction), zeros, blocks whose largest
 * magnitude appears with both signs (the Q8_K scale's sign: the first one for one-row
 * products, + for batched ones) and tiny values. */
#include "tests/rlx_test.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/quant.h"

#include <math.h>

#define N 1024

static void rows(float x[][N], int n_rows)
{
    uint32_t s = 7;
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < N; i++) {
            s = s * 1664525u + 1013904223u;
            x[r][i] = (float)((int)(s >> 8) % 200001 - 100000) / (r == 1 ? 1e9f : 3000.0f);
        }
    /* row 2: amax 127 in every block, so x * id lands on exact halves */
    for (int i = 0; i < N; i++) x[2][i] = i % 32 == 0 ? 127.0f : (float)(i % 64) - 31.5f;
    /* row 3: zeros, and blocks whose extreme magnitude occurs as -m then +m, or +m then -m */
    for (int i = 0; i < N; i++) x[3][i] = 0.0f;
    for (int i = 256; i < 512; i++) x[3][i] = (float)(i % 13) - 6.0f;
    x[3][300] = -9.0f; x[3][400] = 9.0f;
    for (int i = 512; i < 768; i++) x[3][i] = (float)(i % 5) * 0.5f - 1.0f;
    x[3][600] = 4.0f; x[3][700] = -4.0f;
    /* row 4: halves around the Q8_K scale (max 127 -> iscale -1) */
    for (int i = 0; i < N; i++) x[4][i] = i % 256 == 0 ? 127.0f : (float)(i % 50) - 24.5f;
}

TEST(bytes_match_reference_on_every_path)
{
    static float x[5][N];
    static uint8_t want[2][2][5][N * 2], got[N * 2];
    rows(x, 5);
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512", "avx512-novnni"};
    const int types[] = {RLX_Q8_0, RLX_Q8_K};
    ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
    for (size_t t = 0; t < RLX_ARRAY_LEN(types); t++)
        for (int r = 0; r < 5; r++) {
            ASSERT_EQ(rlx_quantize_act(types[t], x[r], want[t][0][r], N), 0);
            ASSERT_EQ(rlx_quantize_act_batched(types[t], x[r], want[t][1][r], N), 0);
        }
    /* row 3's third super-block has -9 before +9: only the batched Q8_K scale is positive */
    const rlx_block_q8_k *single = (const rlx_block_q8_k *)want[1][0][3], *batched = (const rlx_block_q8_k *)want[1][1][3];
    ASSERT(single[1].d > 0 && batched[1].d < 0);
    ASSERT(single[2].d < 0 && batched[2].d < 0); /* +4 first: both take it */
    int tested = 0;
    for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
        if (!rlx_cpu_has_path(paths[p])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[p]), 0);
        for (size_t t = 0; t < RLX_ARRAY_LEN(types); t++)
            for (int r = 0; r < 5; r++)
                for (int b = 0; b < 2; b++) {
                    const size_t nb = rlx_row_bytes(types[t], N);
                    memset(got, 0x55, sizeof got);
                    rlx_cpu_quantize_act(types[t], b, x[r], got, N);
                    ASSERT_MSG(memcmp(want[t][b][r], got, nb) == 0, "path %s type %d row %d batched %d differs", paths[p],
                               types[t], r, b);
                    memset(got, 0x55, sizeof got);
                    ASSERT_EQ((b ? rlx_quantize_act_batched : rlx_quantize_act)(types[t], x[r], got, N), 0);
                    ASSERT_MSG(memcmp(want[t][b][r], got, nb) == 0, "rlx_quantize_act, path %s type %d row %d batched %d",
                               paths[p], types[t], r, b);
                    tested++;
                }
    }
    ASSERT(tested >= 20);
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

/* rounding to f16/bf16 (the activations of F16/BF16 weights): same bits as the scalar
 * conversions for random values, exact halfway cases of both formats, f16 subnormals and
 * overflow, infinities; NaN stays NaN */
TEST(rounding_matches_scalar_on_every_path)
{
    enum { M = 1000 };
    static float x[M], want[M], got[M];
    uint32_t s = 99;
    for (int i = 0; i < M; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((int)(s >> 8) % 2000001 - 1000000) / 777.0f;
    }
    for (int i = 0; i < 64; i++) x[i] = 1.0f + (float)(2 * i + 1) * 0x1p-11f; /* f16 halfway */
    for (int i = 64; i < 128; i++) x[i] = 1.0f + (float)(2 * i + 1) * 0x1p-8f;  /* bf16 halfway */
    for (int i = 128; i < 160; i++) x[i] = (float)(i - 140) * 0x1p-20f;         /* f16 subnormals */
    x[160] = 70000.0f; x[161] = -65520.0f; x[162] = INFINITY; x[163] = -INFINITY; x[164] = NAN;
    x[165] = -0.0f; x[166] = 3.0e38f;
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512", "avx512-novnni"};
    const int types[] = {RLX_F16, RLX_BF16};
    int tested = 0;
    for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
        if (!rlx_cpu_has_path(paths[p])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[p]), 0);
        for (size_t t = 0; t < RLX_ARRAY_LEN(types); t++) {
            for (int i = 0; i < M; i++)
                want[i] = types[t] == RLX_F16 ? rlx_f16_to_f32(rlx_f32_to_f16(x[i])) : rlx_bf16_to_f32(rlx_f32_to_bf16(x[i]));
            rlx_cpu_round_act(types[t], x, got, M - 3); /* a vector tail too */
            for (int i = 0; i < M - 3; i++) {
                if (isnan(want[i])) { ASSERT_MSG(isnan(got[i]), "path %s: NaN lost at %d", paths[p], i); continue; }
                ASSERT_MSG(memcmp(&want[i], &got[i], 4) == 0, "path %s type %d: x=%.9g gives %.9g, scalar %.9g", paths[p], types[t],
                           x[i], got[i], want[i]);
            }
            tested++;
        }
    }
    ASSERT(tested >= 2);
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

/* Activations holding inf or NaN (a model whose weights overflow) quantize on every path without
 * undefined behaviour (the AVX-512 Q8_K sums overflowed int: UBSan stopped the daemon), and a
 * Q8_K block's sums of 16 stay the sums of its quants. */
TEST(non_finite_rows_defined_on_every_path)
{
    static float x[N];
    static uint8_t got[N * 2];
    for (int i = 0; i < N; i++) x[i] = (float)(i % 17) - 8.0f;
    x[5] = INFINITY;
    x[300] = NAN;
    for (int i = 512; i < 768; i++) x[i] = NAN; /* a whole super-block */
    x[800] = -INFINITY;
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512", "avx512-novnni"};
    int tested = 0;
    for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
        if (!rlx_cpu_has_path(paths[p])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[p]), 0);
        for (int b = 0; b < 2; b++) {
            rlx_cpu_quantize_act(RLX_Q8_0, b, x, got, N);
            rlx_cpu_quantize_act(RLX_Q8_K, b, x, got, N);
            const rlx_block_q8_k *k = (const rlx_block_q8_k *)got;
            for (int i = 0; i < N / RLX_QK_K; i++)
                for (int j = 0; j < RLX_QK_K / 16; j++) {
                    int s = 0;
                    for (int l = 0; l < 16; l++) s += k[i].qs[16 * j + l];
                    ASSERT_MSG(k[i].bsums[j] == s, "path %s batched %d block %d sum %d: %d != %d", paths[p], b, i, j,
                               k[i].bsums[j], s);
                }
            tested++;
        }
    }
    ASSERT(tested >= 2);
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

TEST_MAIN(TEST_ENTRY(bytes_match_reference_on_every_path), TEST_ENTRY(rounding_matches_scalar_on_every_path),
          TEST_ENTRY(non_finite_rows_defined_on_every_path))
