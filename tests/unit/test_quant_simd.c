/* test_quant_simd.c - quantizers, dot products and every kernel path of rlx_matmul_rows on
 * random data (no shared files needed).
 *
 * Every type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) repeats llama.cpp's x86 float
 * operations in its order on every path, so every path must give the scalar references' bits
 * (quant.c, quant_k.c, quant_f.c), for rlx_matmul_rows and rlx_matmul_rows_batched alike, with
 * float activations rounded to F16/BF16 weights' type as the CPU backend rounds them. Within
 * one path, results are bitwise batch invariant: the same for any T, tile position and row
 * range. */
#include "tests/rlx_test.h"
#include "backends/quant.h"
#include "backends/cpu/kernels.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rng_normal(void)
{
    double u1 = (rng_u32() + 1.0) / 4294967297.0, u2 = rng_u32() / 4294967296.0;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

static void fill_normal(float *x, int64_t n, float sigma)
{
    for (int64_t i = 0; i < n; i++) x[i] = sigma * rng_normal();
}

/* Q8_K has no public dequantizer (it is an activation format): qs * d. */
static void dequant_q8_k(const rlx_block_q8_k *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = b[i / RLX_QK_K].qs[i % RLX_QK_K] * b[i / RLX_QK_K].d;
}

static void dequant_any(int type, const void *src, float *dst, int64_t n)
{
    if (type == RLX_Q8_K) dequant_q8_k(src, dst, n);
    else rlx_dequantize_row(type, src, dst, n);
}

static double rel_rms(const float *a, const float *b, int64_t n)
{
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        e += (double)(a[i] - b[i]) * (a[i] - b[i]);
        r += (double)a[i] * a[i];
    }
    return sqrt(e / r);
}

/* Runs first: the environment is read at the first use of the dispatcher in a process. */
TEST(env_selects_path)
{
    setenv("RLX_CPU_PATH", "avx2", 1);
    const char *p = rlx_cpu_path();
    if (rlx_cpu_has_path("avx2")) ASSERT_STR_EQ(p, "avx2");
    else ASSERT(strcmp(p, "avx2") != 0); /* a path the CPU lacks is ignored */
    unsetenv("RLX_CPU_PATH");
}

TEST(roundtrip_error_bounds)
{
    static const struct { int type; double max_rel_rms; } cases[] = {
        {RLX_F32, 0}, {RLX_F16, 4e-4}, {RLX_BF16, 3e-3}, {RLX_Q8_0, 7e-3}, {RLX_Q4_0, 0.10},
        {RLX_Q4_K, 0.10}, {RLX_Q5_K, 0.05}, {RLX_Q6_K, 0.025}, {RLX_Q8_K, 8e-3},
    };
    enum { N = 256 * 64 };
    static float x[N], y[N];
    static char q[N * 4];
    fill_normal(x, N, 0.05f);
    for (size_t c = 0; c < RLX_ARRAY_LEN(cases); c++) {
        const int type = cases[c].type;
        ASSERT_EQ(rlx_quantize_row(type, x, q, N), 0);
        dequant_any(type, q, y, N);
        const double e = rel_rms(x, y, N);
        ASSERT_MSG(e <= cases[c].max_rel_rms, "%s: relative RMS error %.5f > %.5f",
                   rlx_dtype_get(type)->name, e, cases[c].max_rel_rms);
        ASSERT_MSG(type == RLX_F32 || e > 0, "%s: lossless on random data? suspicious", rlx_dtype_get(type)->name);
    }
}

TEST(known_blocks)
{
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) / 16.0f; /* -1 .. 0.9375 */
    rlx_block_q8_0 b8;
    ASSERT_EQ(rlx_quantize_row(RLX_Q8_0, x, &b8, 32), 0);
    ASSERT_EQ(b8.d, rlx_f32_to_f16(1.0f / 127));
    ASSERT_EQ(b8.qs[0], -127);
    ASSERT_EQ(b8.qs[16], 0);
    ASSERT_EQ(b8.qs[24], 64); /* 0.5 * 127 = 63.5 rounds away from zero */
    rlx_block_q4_0 b4;
    ASSERT_EQ(rlx_quantize_row(RLX_Q4_0, x, &b4, 32), 0);
    ASSERT_EQ(b4.d, rlx_f32_to_f16(1.0f / 8)); /* max is -1 -> d = -1/-8 */
    ASSERT_EQ(b4.qs[0] & 0xF, 0);               /* -1 -> level 0 (value -8) */
    ASSERT_EQ(b4.qs[0] >> 4, 8);                /* x[16] = 0 -> level 8 */
    ASSERT_EQ(rlx_dequantize_row(RLX_Q4_0, &b4, y, 32), 0);
    ASSERT_NEAR(y[0], -1.0, 0);
    ASSERT_NEAR(y[31], 0.875, 0); /* 0.9375 * 8 + 8.5 = 16 -> clamped to 15 */
    /* all-zero input gives zero blocks of every type */
    float z[256] = {0}, out[256];
    char q[512];
    static const int types[] = {RLX_Q8_0, RLX_Q4_0, RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};
    for (size_t i = 0; i < RLX_ARRAY_LEN(types); i++) {
        ASSERT_EQ(rlx_quantize_row(types[i], z, q, 256), 0);
        ASSERT_EQ(rlx_dequantize_row(types[i], q, out, 256), 0);
        for (int j = 0; j < 256; j++) ASSERT_NEAR(out[j], 0, 0);
    }
}

/* Q8_0 weights round half away from zero like llama-quantize's quantize_row_q8_0_ref (roundf);
 * ties and near-ties included. */
TEST(q8_0_weight_rounding_matches_roundf)
{
    float x[32];
    rlx_block_q8_0 b;
    for (int rep = 0; rep < 4000; rep++) {
        /* amax 127 makes the scale 1, so x itself is rounded: exact halves, their neighbours, randoms */
        x[0] = (rep & 1) ? 127.0f : -127.0f;
        for (int j = 1; j < 32; j++) {
            const float h = (float)((int)(rng_u32() % 253) - 126) + 0.5f;
            switch ((rep + j) % 4) {
            case 0: x[j] = h; break;
            case 1: x[j] = nextafterf(h, 0.0f); break;
            case 2: x[j] = nextafterf(h, 1000.0f); break;
            default: x[j] = 126.0f * (2.0f * (float)(rng_u32() / 4294967296.0) - 1.0f); break;
            }
        }
        ASSERT_EQ(rlx_quantize_row(RLX_Q8_0, x, &b, 32), 0);
        const float id = 1.0f / (127.0f / 127);
        for (int j = 0; j < 32; j++) ASSERT_MSG(b.qs[j] == (int8_t)roundf(x[j] * id), "x=%.9g -> %d, roundf %g", x[j], b.qs[j], roundf(x[j]));
    }
}

/* Q8_0 activations as llama.cpp's x86 quantize_row_q8_0: values times 127/amax (not 1/(amax/127)),
 * rounded to nearest even; the weight quantizer differs on exact halves and where the two
 * reciprocals differ. */
TEST(q8_0_activation_rounding_matches_llama_cpp_x86)
{
    float x[32];
    rlx_block_q8_0 a, wq;
    int halves_differ = 0, scale_differ = 0;
    for (int rep = 0; rep < 4000; rep++) {
        const float amax = rep % 2 ? 127.0f : 0.01f + (float)(rng_u32() % 100000) / 1000.0f;
        x[0] = (rep & 2) ? amax : -amax;
        for (int j = 1; j < 32; j++) {
            const float h = (float)((int)(rng_u32() % 253) - 126) + 0.5f;
            x[j] = rep % 2 ? ((j % 3) ? h : nextafterf(h, 0.0f)) : amax * (2.0f * (float)(rng_u32() / 4294967296.0) - 1.0f);
        }
        ASSERT_EQ(rlx_quantize_act(RLX_Q8_0, x, &a, 32), 0);
        ASSERT_EQ(rlx_quantize_row(RLX_Q8_0, x, &wq, 32), 0);
        ASSERT_EQ(a.d, rlx_f32_to_f16(amax / 127.0f));
        const float id = 127.0f / amax;
        for (int j = 0; j < 32; j++) {
            ASSERT_MSG(a.qs[j] == (int8_t)nearbyintf(x[j] * id), "x=%.9g amax %.9g -> %d, want %g", x[j], amax, a.qs[j],
                       nearbyintf(x[j] * id));
            if (a.qs[j] != wq.qs[j]) { if (rep % 2) halves_differ++; else scale_differ++; }
        }
    }
    ASSERT(halves_differ > 100 && scale_differ > 0);
}

/* The SIMD activation quantizers (used when a SIMD path is active) give the scalar bytes. */
TEST(activation_quantizers_match_scalar)
{
    if (!rlx_cpu_has_path("avx2")) SKIP("this CPU has no AVX2; only the scalar quantizers exist");
    enum { N = 256 * 8 };
    static float x[N];
    static char a[N * 2], b[N * 2];
    for (int rep = 0; rep < 40; rep++) {
        fill_normal(x, N, rep % 2 ? 1e-3f : 3.0f);
        switch (rep % 5) {
        case 1: /* exact halves after scaling by 1 (amax 127) */
            for (int i = 0; i < N; i++) x[i] = (i % 32 == 0) ? 127.0f : (float)((int)(rng_u32() % 253) - 126) + 0.5f;
            break;
        case 2: /* a zero block and a block with one value */
            memset(x, 0, 256 * sizeof(float));
            memset(x + 256, 0, 256 * sizeof(float));
            x[300] = -2.5f;
            break;
        case 3: /* largest magnitude twice, opposite signs: the first one sets the sign */
            x[17] = 9.0f; x[200] = -9.0f; x[256 + 5] = -9.0f; x[256 + 100] = 9.0f;
            break;
        default: break;
        }
        static const int types[] = {RLX_Q8_0, RLX_Q8_K};
        for (size_t t = 0; t < RLX_ARRAY_LEN(types); t++)
            for (int batched = 0; batched < 2; batched++) {
                int (*q)(int, const float *, void *, int64_t) = batched ? rlx_quantize_act_batched : rlx_quantize_act;
                ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
                ASSERT_EQ(q(types[t], x, a, N), 0);
                ASSERT_EQ(rlx_cpu_force_path("avx2"), 0);
                ASSERT_EQ(q(types[t], x, b, N), 0);
                const size_t bytes = rlx_row_bytes(types[t], N);
                size_t first = 0;
                while (first < bytes && a[first] == b[first]) first++;
                ASSERT_MSG(first == bytes, "%s batched %d rep %d: SIMD bytes differ from scalar at byte %zu",
                           rlx_dtype_get(types[t])->name, batched, rep, first);
            }
    }
    rlx_cpu_force_path("scalar");
}

TEST(bad_arguments)
{
    float x[64] = {0};
    char q[512];
    ASSERT_EQ(rlx_quantize_row(RLX_Q8_0, x, q, 33), RLX_EINVAL);
    ASSERT_EQ(rlx_quantize_row(RLX_Q4_K, x, q, 64), RLX_EINVAL);
    ASSERT_EQ(rlx_quantize_row(RLX_Q2_K, x, q, 256), RLX_EUNSUPPORTED);
    ASSERT_EQ(rlx_quantize_row(4, x, q, 32), RLX_EINVAL);
    ASSERT_EQ(rlx_dequantize_row(RLX_Q8_K, q, x, 256), RLX_EUNSUPPORTED);
    ASSERT_EQ(rlx_dequantize_row(RLX_Q6_K, q, x, 100), RLX_EINVAL);
    ASSERT_EQ(rlx_vec_dot_type(RLX_Q4_0), RLX_Q8_0);
    ASSERT_EQ(rlx_vec_dot_type(RLX_Q8_0), RLX_Q8_0);
    ASSERT_EQ(rlx_vec_dot_type(RLX_Q4_K), RLX_Q8_K);
    ASSERT_EQ(rlx_vec_dot_type(RLX_Q5_K), RLX_Q8_K);
    ASSERT_EQ(rlx_vec_dot_type(RLX_Q6_K), RLX_Q8_K);
    ASSERT_EQ(rlx_vec_dot_type(RLX_F16), RLX_F32);
    ASSERT_EQ(rlx_vec_dot_type(RLX_BF16), RLX_F32);
    ASSERT_EQ(rlx_vec_dot_type(RLX_F32), RLX_F32);
    ASSERT_EQ(rlx_vec_dot_type(RLX_Q2_K), -1);
}

static const int dot_types[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_Q8_0, RLX_Q4_0, RLX_Q4_K, RLX_Q5_K, RLX_Q6_K};

TEST(vec_dot_matches_dequantized_dot)
{
    enum { K = 1024 };
    static float w[K], a[K], wd[K], ad[K];
    static char wq[K * 4], aq[K * 4];
    for (size_t c = 0; c < RLX_ARRAY_LEN(dot_types); c++) {
        const int type = dot_types[c], at = rlx_vec_dot_type(type);
        for (int rep = 0; rep < 4; rep++) {
            fill_normal(w, K, 0.03f);
            fill_normal(a, K, 1.0f);
            ASSERT_EQ(rlx_quantize_row(type, w, wq, K), 0);
            ASSERT_EQ(rlx_quantize_row(at, a, aq, K), 0);
            dequant_any(type, wq, wd, K);
            dequant_any(at, aq, ad, K);
            double ref = 0, mag = 0;
            for (int i = 0; i < K; i++) {
                ref += (double)wd[i] * ad[i];
                mag += fabs((double)wd[i] * ad[i]);
            }
            const float got = rlx_vec_dot(type, wq, aq, K);
            ASSERT_MSG(fabs(got - ref) <= 2e-6 * mag, "%s: vec_dot %.9g vs dequantized %.9g (mag %.3g)",
                       rlx_dtype_get(type)->name, got, ref, mag);
            /* and the quantized product is close to the exact f32 one */
            double exact = 0;
            for (int i = 0; i < K; i++) exact += (double)w[i] * a[i];
            ASSERT_MSG(fabs(got - exact) <= 0.1 * mag, "%s: %.6g vs exact %.6g", rlx_dtype_get(type)->name, got, exact);
        }
    }
}

/* Weights of N rows and T activation rows of one type, ready for rlx_matmul_rows. */
typedef struct mm_case { int type; int64_t N, K, T; char *w, *act; size_t arow; } mm_case;

static void mm_make(mm_case *c, int type, int64_t N, int64_t K, int64_t T)
{
    c->type = type; c->N = N; c->K = K; c->T = T;
    const int at = rlx_vec_dot_type(type);
    float *tmp = malloc((size_t)K * sizeof(float));
    c->w = malloc(rlx_row_bytes(type, K) * (size_t)N);
    c->arow = rlx_row_bytes(at, K) + 64; /* rows deliberately not packed */
    c->act = calloc((size_t)T, c->arow);
    for (int64_t n = 0; n < N; n++) {
        fill_normal(tmp, K, 0.05f);
        rlx_quantize_row(type, tmp, c->w + (size_t)n * rlx_row_bytes(type, K), K);
    }
    for (int64_t t = 0; t < T; t++) {
        fill_normal(tmp, K, 1.0f);
        /* the CPU backend rounds activations to F16/BF16 weights' type (as ggml converts them) */
        for (int64_t k = 0; k < K; k++)
            if (type == RLX_F16) tmp[k] = rlx_f16_to_f32(rlx_f32_to_f16(tmp[k]));
            else if (type == RLX_BF16) tmp[k] = rlx_bf16_to_f32(rlx_f32_to_bf16(tmp[k]));
        if (at == RLX_F32) rlx_quantize_row(at, tmp, c->act + (size_t)t * c->arow, K);
        else rlx_quantize_act(at, tmp, c->act + (size_t)t * c->arow, K);
    }
    free(tmp);
}

static void mm_free(mm_case *c) { free(c->w); free(c->act); }

TEST(matmul_paths_match_scalar)
{
    static const char *paths[] = {"avx2", "avx2-novnni", "avx512", "avx512-novnni"};
    /* K 8192 is the largest the avx512 path repacks activations for; 8224 takes its other kernel.
     * Q8_0 on avx512 prepares activations in segments of 128 blocks for groups of 64 weight rows:
     * 130 x 64 spans three groups of one segment, 150 x 4128 two segments over three chunks. */
    static const struct { int64_t N, K; } shapes_legacy[] = {{19, 32}, {37, 96}, {11, 1056}, {5, 8192}, {6, 8224}, {130, 64}, {150, 4128}};
    static const struct { int64_t N, K; } shapes_k[] = {{19, 256}, {13, 768}};
    /* float weights: K multiples of 16/32/64 get tinyBLAS's arithmetic from the batched entry,
     * others the one-row one from both; tails of every length past 64; 1040 and 6160 (24 KiB
     * per F32 row: a 3 x 2 tile's rows do not fit L1) are long chains; N % 3 and T (17) % 2
     * leave every partial tile shape of AVX2's 3 x 2 batched tile (ptile_pairs) */
    static const struct { int64_t N, K; } shapes_f[] = {{9, 1}, {21, 31}, {17, 33}, {13, 100}, {7, 1024}, {11, 96}, {10, 160}, {5, 1040}, {11, 6160}};
    int ran = 0;
    for (size_t c = 0; c < RLX_ARRAY_LEN(dot_types); c++) {
        const int type = dot_types[c];
        const bool is_f = type == RLX_F32 || type == RLX_F16 || type == RLX_BF16;
        const bool is_k = type == RLX_Q4_K || type == RLX_Q5_K || type == RLX_Q6_K;
        const size_t nshape = is_f ? RLX_ARRAY_LEN(shapes_f) : is_k ? RLX_ARRAY_LEN(shapes_k) : RLX_ARRAY_LEN(shapes_legacy);
        for (size_t s = 0; s < nshape; s++) {
            const int64_t N = is_f ? shapes_f[s].N : is_k ? shapes_k[s].N : shapes_legacy[s].N;
            const int64_t K = is_f ? shapes_f[s].K : is_k ? shapes_k[s].K : shapes_legacy[s].K;
            /* 17 rows: the one-row float kernels take another tiling from 8 rows on; Q8_0 on
             * avx512 runs tiles of 8 (8 + 8 + 1) */
            const int64_t T = 17, ldo = N + 5;
            mm_case mc;
            mm_make(&mc, type, N, K, T);
            float *ref = malloc((size_t)(T * ldo) * 4), *got = malloc((size_t)(T * ldo) * 4);
            for (int batched = 0; batched < 2; batched++) {
                void (*mm)(int, const void *, int64_t, int64_t, const void *, size_t, int64_t, int64_t, float *, int64_t) =
                    batched ? rlx_matmul_rows_batched : rlx_matmul_rows;
                ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
                ASSERT_STR_EQ(rlx_cpu_path(), "scalar");
                mm(type, mc.w, 0, N, mc.act, mc.arow, T, K, ref, ldo);
                if (!batched)
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t n = 0; n < N; n++) {
                            const float v = rlx_vec_dot(type, mc.w + (size_t)n * rlx_row_bytes(type, K), mc.act + (size_t)t * mc.arow, K);
                            ASSERT_MSG(memcmp(&v, &ref[t * ldo + n], 4) == 0, "scalar matmul != vec_dot");
                        }
                for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
                    if (!rlx_cpu_has_path(paths[p])) {
                        fprintf(stderr, "  note: this CPU lacks the %s path; not tested here\n", paths[p]);
                        continue;
                    }
                    ASSERT_EQ(rlx_cpu_force_path(paths[p]), 0);
                    ASSERT_STR_EQ(rlx_cpu_path(), paths[p]);
                    /* full batch, then every T in 1..17 over an odd row range: batch invariance */
                    for (int64_t i = 0; i < T * ldo; i++) got[i] = -777.0f;
                    mm(type, mc.w, 0, N, mc.act, mc.arow, T, K, got, ldo);
                    for (int64_t t = 0; t < T; t++) {
                        for (int64_t n = 0; n < N; n++) {
                            const float a = got[t * ldo + n], b = ref[t * ldo + n];
                            ASSERT_MSG(memcmp(&a, &b, 4) == 0, "%s %s batched %d K=%lld t=%lld n=%lld: %.9g vs scalar %.9g",
                                       paths[p], rlx_dtype_get(type)->name, batched, (long long)K, (long long)t,
                                       (long long)n, a, b);
                        }
                        for (int64_t n = N; n < ldo; n++) ASSERT_NEAR(got[t * ldo + n], -777.0, 0);
                    }
                    for (int64_t Tt = 1; Tt <= T; Tt++) {
                        const int64_t n0 = N > 3 ? 3 : 0, n1 = N > 5 ? N - 2 : N;
                        float *sub = malloc((size_t)(Tt * ldo) * 4);
                        const int64_t t0 = T - Tt; /* the last Tt rows, so rows move between tiles */
                        mm(type, mc.w, n0, n1, mc.act + (size_t)t0 * mc.arow, mc.arow, Tt, K, sub, ldo);
                        for (int64_t t = 0; t < Tt; t++)
                            for (int64_t n = n0; n < n1; n++)
                                ASSERT_MSG(memcmp(&sub[t * ldo + n], &got[(t0 + t) * ldo + n], 4) == 0,
                                           "%s %s: batch of %lld changes row %lld", paths[p], rlx_dtype_get(type)->name,
                                           (long long)Tt, (long long)(t0 + t));
                        free(sub);
                    }
                    ran++;
                }
            }
            free(ref);
            free(got);
            mm_free(&mc);
        }
    }
    rlx_cpu_force_path("scalar");
    if (!ran) SKIP("this CPU has no SIMD path; only the scalar path exists");
}

/* The Q4_K kernels of the avx512 paths (batched, and one-row at T > 1) pack each row's partial sums (16 elements of a
 * sub-block) to 16 bits before the scale multiply: the largest such sums (every level 15, every
 * activation +-127, scales and mins 63) must still give the scalar reference's bits, on every
 * row of a tile and every activation row of one. */
TEST(q4_k_extremes_match_scalar)
{
    static const char *paths[] = {"avx2", "avx2-novnni", "avx512", "avx512-novnni"};
    const int64_t N = 11, K = 512, T = 9, nb = K / RLX_QK_K;
    rlx_block_q4_k *w = calloc((size_t)(N * nb), sizeof *w);
    rlx_block_q8_k *a = calloc((size_t)(T * nb), sizeof *a);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < nb; i++) {
            rlx_block_q4_k *b = &w[n * nb + i];
            b->d = rlx_f32_to_f16(0.03125f * (float)(n + 1));
            b->dmin = rlx_f32_to_f16(0.0078125f * (float)(i + 1));
            /* all scales and mins 63 but row 3's (a mixture, so the lanes differ) */
            memset(b->scales, 0xFF, sizeof b->scales);
            if (n == 3) for (int j = 0; j < 12; j++) b->scales[j] = (uint8_t)(0x5A + 37 * j);
            memset(b->qs, n % 2 ? 0xFF : 0xF0, sizeof b->qs); /* levels 15 (odd rows), 0/15 (even) */
        }
    /* activations of one magnitude quantize to +-127 everywhere (a row of one sign to -127, a
     * row whose first value is negative to +127 where positive) */
    float x[512];
    for (int64_t t = 0; t < T; t++) {
        const float m = 0.5f + 0.25f * (float)t;
        for (int j = 0; j < K; j++) x[j] = t % 3 == 1 ? m : (j % (t % 3 ? 7 : 256) ? m : -m);
        ASSERT_EQ(rlx_quantize_row(RLX_Q8_K, x, &a[t * nb], K), 0);
        for (int64_t i = 0; i < nb; i++)
            for (int j = 0; j < RLX_QK_K; j++) ASSERT_EQ(abs(a[t * nb + i].qs[j]), 127);
    }
    const size_t arow = (size_t)nb * sizeof *a;
    float ref[9 * 11], got[9 * 11];
    int ran = 0;
    for (int batched = 0; batched < 2; batched++) {
        void (*mm)(int, const void *, int64_t, int64_t, const void *, size_t, int64_t, int64_t, float *, int64_t) =
            batched ? rlx_matmul_rows_batched : rlx_matmul_rows;
        ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
        mm(RLX_Q4_K, w, 0, N, a, arow, T, K, ref, N);
        for (size_t p = 0; p < RLX_ARRAY_LEN(paths); p++) {
            if (!rlx_cpu_has_path(paths[p])) continue;
            ASSERT_EQ(rlx_cpu_force_path(paths[p]), 0);
            mm(RLX_Q4_K, w, 0, N, a, arow, T, K, got, N);
            for (int64_t i = 0; i < T * N; i++)
                ASSERT_MSG(memcmp(&got[i], &ref[i], 4) == 0, "%s batched %d: t=%lld n=%lld: %.9g vs scalar %.9g", paths[p],
                           batched, (long long)(i / N), (long long)(i % N), got[i], ref[i]);
            ran++;
        }
    }
    rlx_cpu_force_path("scalar");
    free(w);
    free(a);
    if (!ran) SKIP("this CPU has no SIMD path; only the scalar path exists");
}

/* Each path reports its own float tile's height (k_matmul claims whole tiles), forced or not. */
TEST(float_tile_rows_follow_the_path)
{
    static const struct { const char *path; int rows; } want[] = {
        {"scalar", 1}, {"avx2", 3}, {"avx2-novnni", 3}, {"avx512", 6}, {"avx512-novnni", 6}};
    int ran = 0;
    for (size_t i = 0; i < RLX_ARRAY_LEN(want); i++) {
        if (rlx_cpu_force_path(want[i].path)) continue; /* this CPU lacks it */
        ASSERT_MSG(rlx__cpu_float_tile_rows() == want[i].rows, "%s: %d rows", want[i].path, rlx__cpu_float_tile_rows());
        ran++;
    }
    ASSERT(ran >= 1 + 2 * rlx_cpu_has_path("avx2") + 2 * rlx_cpu_has_path("avx512"));
    rlx_cpu_force_path("scalar");
}

TEST(force_path_errors)
{
    ASSERT_EQ(rlx_cpu_force_path("nope"), RLX_EINVAL);
    ASSERT_EQ(rlx_cpu_force_path(NULL), RLX_EINVAL);
    ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
    ASSERT_STR_EQ(rlx_cpu_path(), "scalar");
}

TEST_MAIN(TEST_ENTRY(env_selects_path), TEST_ENTRY(roundtrip_error_bounds), TEST_ENTRY(known_blocks), TEST_ENTRY(q8_0_weight_rounding_matches_roundf), TEST_ENTRY(q8_0_activation_rounding_matches_llama_cpp_x86),
          TEST_ENTRY(activation_quantizers_match_scalar), TEST_ENTRY(bad_arguments),
          TEST_ENTRY(vec_dot_matches_dequantized_dot), TEST_ENTRY(matmul_paths_match_scalar),
          TEST_ENTRY(q4_k_extremes_match_scalar), TEST_ENTRY(float_tile_rows_follow_the_path),
          TEST_ENTRY(force_path_errors))
