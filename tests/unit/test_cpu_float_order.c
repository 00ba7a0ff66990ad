/* test_cpu_float_order.c - the F32/F16/BF16 kernels of every SIMD path compute exactly the
 * arithmetic of llama.cpp's CPU backend (see backends/cpu/kern_x86_float.h): prompt rows as
 * llamafile's tinyBLAS (one accumulator per output, lanes k mod KN, one horizontal sum), decode
 * rows as ggml_vec_dot_* (four accumulators, ggml's pairwise reduction, leftovers in float or
 * double). The expected values are computed here by a scalar model of those orders, lane by
 * lane with fmaf, and compared bit for bit: a kernel that reassociates anything fails. */
#include "backends/cpu/kernels.h"
#include "backends/dtype.h"
#include "backends/quant.h"
#include "tests/rlx_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng_state = 12345;
static float rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return ((float)(rng_state >> 8) / 16777216.0f - 0.5f) * 2.0f;
}

/* _mm512_reduce_add_ps as GCC (and LLVM) expand it: halves of 256, of 128, then {2,3,0,1} */
static float red16(const float *v)
{
    float h[8], q[4];
    for (int i = 0; i < 8; i++) h[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; i++) q[i] = h[i + 4] + h[i];
    return (q[0] + q[2]) + (q[1] + q[3]);
}
/* tinyBLAS's hsum(__m256): low + high 128, movehl, movehdup */
static float red8(const float *v)
{
    float h[4];
    for (int i = 0; i < 4; i++) h[i] = v[i] + v[i + 4];
    return (h[0] + h[2]) + (h[1] + h[3]);
}
/* GGML_F32x8_REDUCE's last step: low + high 128, then two hadds */
static float red8_hadd(const float *v)
{
    float h[4];
    for (int i = 0; i < 4; i++) h[i] = v[i] + v[i + 4];
    return (h[0] + h[1]) + (h[2] + h[3]);
}

typedef struct model { int lanes; bool bf16dp; } model;

/* vdpbf16ps per lane: the odd pair's product, then the even one's (exact products, rounded
 * sums: the same as two FMAs) */
static void dp_pairs(float *acc, const float *w, const float *a, int64_t k0)
{
    for (int j = 0; j < 16; j++) {
        acc[j] = fmaf(w[k0 + 2 * j + 1], a[k0 + 2 * j + 1], acc[j]);
        acc[j] = fmaf(w[k0 + 2 * j], a[k0 + 2 * j], acc[j]);
    }
}

static float expect(const model *m, int type, const float *w, const float *a, int64_t K, bool decode)
{
    const int L = m->lanes;
    float acc[4][16] = {{0}};
    const int64_t kn = type == RLX_BF16 && m->bf16dp ? 32 : L;
    if (!decode && K % kn == 0) { /* tinyBLAS */
        if (type == RLX_BF16 && m->bf16dp)
            for (int64_t k = 0; k < K; k += 32) dp_pairs(acc[0], w, a, k);
        else
            for (int64_t k = 0; k < K; k++) acc[0][k % L] = fmaf(w[k], a[k], acc[0][k % L]);
        return L == 16 ? red16(acc[0]) : red8(acc[0]);
    }
    if (type == RLX_BF16) {
        double sum;
        int64_t k = 0;
        if (m->bf16dp) { /* c1, c2 over 64 */
            for (; k + 64 <= K; k += 64) { dp_pairs(acc[0], w, a, k); dp_pairs(acc[1], w, a, k + 32); }
            sum = (double)red16(acc[0]);
            sum += (double)red16(acc[1]);
        } else if (L == 16) { /* c1, c2 over 32 */
            for (; k + 32 <= K; k += 32)
                for (int l = 0; l < 32; l++) acc[l / 16][l % 16] = fmaf(w[k + l], a[k + l], acc[l / 16][l % 16]);
            sum = (double)red16(acc[0]);
            sum += (double)red16(acc[1]);
        } else { /* c1..c4 over 32, (c1 + c3) + (c2 + c4) */
            for (; k + 32 <= K; k += 32)
                for (int l = 0; l < 32; l++) acc[l / 8][l % 8] = fmaf(w[k + l], a[k + l], acc[l / 8][l % 8]);
            float x[8];
            for (int l = 0; l < 8; l++) x[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
            sum = (double)red8(x);
        }
        for (; k < K; k++) sum += (double)(w[k] * a[k]);
        return (float)sum;
    }
    /* ggml_vec_dot_f32 / _f16: four accumulators over 4 x L */
    const int64_t np = K - K % (4 * L);
    for (int64_t k = 0; k < np; k++) {
        const int s = (int)(k % (4 * L)) / L, l = (int)(k % L);
        acc[s][l] = fmaf(w[k], a[k], acc[s][l]);
    }
    float x[16];
    for (int l = 0; l < L; l++) x[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    const float r = L == 16 ? red16(x) : red8_hadd(x);
    if (type == RLX_F32) {
        float sum = r;
        for (int64_t k = np; k < K; k++) sum = fmaf(w[k], a[k], sum);
        return sum;
    }
    double sum = (double)r;
    for (int64_t k = np; k < K; k++) sum += (double)(w[k] * a[k]);
    return (float)sum;
}

TEST(float_kernels_follow_llama_cpp_order)
{
    static const char *paths[] = {"avx512", "avx512-novnni", "avx2", "avx2-novnni"};
    static const int types[] = {RLX_F32, RLX_F16, RLX_BF16};
    static const int64_t Ks[] = {1, 31, 32, 48, 64, 96, 100, 128, 160, 192, 1024, 1056};
    enum { N = 13, T = 9 };
    static const uint8_t decode[T] = {1, 0, 0, 1, 1, 0, 0, 0, 1};
    int ran = 0;
    for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
        if (!rlx_cpu_has_path(paths[p])) {
            fprintf(stderr, "  note: this CPU lacks the %s path; not tested here\n", paths[p]);
            continue;
        }
        ASSERT_EQ(rlx_cpu_force_path(paths[p]), 0);
        const model m = {strncmp(paths[p], "avx512", 6) ? 8 : 16, rlx__cpu_bf16dp()};
        if (!strcmp(paths[p], "avx512")) fprintf(stderr, "  avx512: BF16 through vdpbf16ps: %s\n", m.bf16dp ? "yes" : "no (CPU lacks it)");
        for (size_t ti = 0; ti < RLX_ARRAY_LEN(types); ti++)
            for (size_t ki = 0; ki < RLX_ARRAY_LEN(Ks); ki++) {
                const int type = types[ti];
                const int64_t K = Ks[ki];
                const size_t wrow = rlx_row_bytes(type, K);
                float *wf = malloc((size_t)(N * K) * sizeof *wf), *a = malloc((size_t)(T * K) * sizeof *a);
                uint8_t *w = malloc(wrow * N);
                float out[T * N];
                for (int64_t i = 0; i < N * K; i++) wf[i] = rnd() * 0.1f;
                for (int n = 0; n < N; n++) rlx_quantize_row(type, wf + (size_t)n * K, w + (size_t)n * wrow, K);
                for (int n = 0; n < N; n++) rlx_dequantize_row(type, w + (size_t)n * wrow, wf + (size_t)n * K, K);
                for (int64_t i = 0; i < T * K; i++) {
                    float v = rnd();
                    a[i] = type == RLX_F16 ? rlx_f16_to_f32(rlx_f32_to_f16(v)) : type == RLX_BF16 ? rlx_bf16_to_f32(rlx_f32_to_bf16(v)) : v;
                }
                rlx_matmul_rows(type, w, 0, N, a, (size_t)K * sizeof *a, T, K, out, N, decode);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < N; n++) {
                        const float want = expect(&m, type, wf + (size_t)n * K, a + (size_t)t * K, K, decode[t]);
                        ASSERT_MSG(memcmp(&want, &out[t * N + n], 4) == 0, "%s %s K=%lld %s row: %.9g, llama.cpp's order gives %.9g",
                                   paths[p], rlx_dtype_get(type)->name, (long long)K, decode[t] ? "decode" : "prompt",
                                   out[t * N + n], want);
                    }
                free(wf);
                free(a);
                free(w);
            }
        ran++;
    }
    rlx_cpu_force_path("scalar");
    if (!ran) SKIP("this CPU has no SIMD path");
}

TEST_MAIN(TEST_ENTRY(float_kernels_follow_llama_cpp_order))
