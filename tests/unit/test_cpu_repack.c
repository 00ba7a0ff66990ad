/* test_cpu_repack.c - load-time repacking (backends/cpu/repack.h): the packed Q4_K and Q8_0
 * layouts hold exactly the GGUF rows (unpacked back byte for byte), their kernels give the
 * GGUF-layout kernels' bits on every path that has them (one-row and batched arithmetic, any T, row range
 * and extreme values), and the CPU backend packs the weights only matmuls read, with the same
 * outputs as without packing. No shared files needed. */
#include "tests/rlx_test.h"
#include "backends/backend.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/repack.h"
#include "backends/dtype.h"
#include "backends/quant.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float rndf(void) { return (float)((int)(rnd() % 2001) - 1000) / 1000.0f; }

/* N x K Q4_K rows of random bytes (every scale / min bit pattern) with finite small d, dmin */
static void random_blocks(rlx_block_q4_k *w, int64_t n_blocks)
{
    for (int64_t i = 0; i < n_blocks; i++) {
        uint8_t *b = (uint8_t *)&w[i];
        for (size_t k = 0; k < sizeof w[i]; k++) b[k] = (uint8_t)rnd();
        w[i].d = rlx_f32_to_f16(0.001f + 0.01f * (float)(rnd() % 100) / 100.0f);
        w[i].dmin = rlx_f32_to_f16(0.0005f * (float)(rnd() % 100) / 100.0f);
    }
}

static const char *const simd_paths[] = {"avx2", "avx2-novnni", "avx512", "avx512-novnni"};

TEST(layout_round_trip)
{
    const int64_t N = 24, K = 768, nb = K / RLX_QK_K;
    rlx_block_q4_k *w = malloc((size_t)(N * nb) * sizeof *w), row[3];
    random_blocks(w, N * nb);
    const size_t bytes = rlx__repack_bytes(RLX_Q4_K, N, K);
    ASSERT_EQ(bytes, (size_t)(N * nb) * sizeof(rlx_block_q4_k)); /* same size as the GGUF rows */
    void *p = malloc(bytes);
    rlx__repack(RLX_Q4_K, w, N, K, p);
    for (int64_t n = 0; n < N; n++) {
        rlx__unpack_row(RLX_Q4_K, p, n, K, row);
        ASSERT_MSG(memcmp(row, &w[n * nb], sizeof row) == 0, "row %lld does not survive the round trip", (long long)n);
    }
    /* what has no packed layout */
    ASSERT_EQ(rlx__repack_bytes(RLX_Q4_K, 12, K), 0);
    ASSERT_EQ(rlx__repack_bytes(RLX_Q4_K, 0, K), 0);
    ASSERT_EQ(rlx__repack_bytes(RLX_Q4_K, N, 300), 0);
    ASSERT_EQ(rlx__repack_bytes(RLX_Q6_K, N, K), 0);
    free(p);
    free(w);
}

/* Q8_0's row group is the path's tile height: each path's layout round-trips, and the scalar
 * path (no tile) has none */
TEST(q8_0_layout_round_trip)
{
    const int64_t N = 20, K = 320, nb = K / RLX_QK;
    rlx_block_q8_0 *w = malloc((size_t)(N * nb) * sizeof *w), row[10];
    for (int64_t i = 0; i < N * nb; i++) {
        uint8_t *b = (uint8_t *)&w[i];
        for (size_t k = 0; k < sizeof w[i]; k++) b[k] = (uint8_t)rnd();
    }
    int ran = 0;
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(simd_paths); pi++) {
        if (!rlx_cpu_has_path(simd_paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(simd_paths[pi]), 0);
        const int R = rlx__repack_rows(RLX_Q8_0);
        ASSERT_MSG(R == (strncmp(simd_paths[pi], "avx512", 6) ? 2 : 4), "%s: Q8_0 groups of %d rows", simd_paths[pi], R);
        const size_t bytes = rlx__repack_bytes(RLX_Q8_0, N, K);
        ASSERT_EQ(bytes, (size_t)(N * nb) * sizeof(rlx_block_q8_0));
        void *p = malloc(bytes);
        rlx__repack(RLX_Q8_0, w, N, K, p);
        ASSERT(memcmp(p, w, bytes) != 0); /* it is another layout */
        for (int64_t n = 0; n < N; n++) {
            rlx__unpack_row(RLX_Q8_0, p, n, K, row);
            ASSERT_MSG(memcmp(row, &w[n * nb], sizeof row) == 0, "%s: row %lld does not survive the round trip",
                       simd_paths[pi], (long long)n);
        }
        free(p);
        ASSERT_EQ(rlx__repack_bytes(RLX_Q8_0, N + 1, K), 0); /* not whole groups */
        ASSERT_EQ(rlx__repack_bytes(RLX_Q8_0, N, K + 16), 0);
        ran++;
    }
    ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
    ASSERT_EQ(rlx__repack_rows(RLX_Q8_0), 0);
    ASSERT_EQ(rlx__repack_bytes(RLX_Q8_0, N, K), 0);
    free(w);
    if (!ran) SKIP("this CPU has no SIMD path");
}

/* packed kernel vs the same path's GGUF-layout kernel (and the scalar reference) on rows
 * [n0, n1) of an N x K weight, T activation rows */
static int compare_type(int type, rlx_packed_fn fn, const void *w, const void *packed, const void *a, int64_t N,
                        int64_t K, int64_t T, int64_t n0, int64_t n1, bool batched, const char *what)
{
    const size_t arow = rlx_row_bytes(rlx_vec_dot_type(type), K);
    float *ref = malloc((size_t)(T * N) * 4), *sc = malloc((size_t)(T * N) * 4), *got = malloc((size_t)(T * N) * 4);
    for (int64_t i = 0; i < T * N; i++) got[i] = ref[i] = sc[i] = -7.0f;
    (batched ? rlx_matmul_rows_batched : rlx_matmul_rows)(type, w, n0, n1, a, arow, T, K, ref, N);
    const char *path = rlx_cpu_path();
    rlx_cpu_force_path("scalar");
    (batched ? rlx_matmul_rows_batched : rlx_matmul_rows)(type, w, n0, n1, a, arow, T, K, sc, N);
    rlx_cpu_force_path(path);
    fn(packed, n0, n1, a, arow, T, K, got, N, batched);
    int bad = 0;
    for (int64_t i = 0; i < T * N && !bad; i++)
        if (memcmp(&got[i], &ref[i], 4) || memcmp(&got[i], &sc[i], 4)) {
            fprintf(stderr, "%s (%s, batched %d, T %lld, rows [%lld, %lld)): t=%lld n=%lld: %.9g, GGUF layout %.9g, scalar %.9g\n",
                    what, path, batched, (long long)T, (long long)n0, (long long)n1, (long long)(i / N), (long long)(i % N),
                    got[i], ref[i], sc[i]);
            bad = 1;
        }
    free(ref);
    free(sc);
    free(got);
    return bad;
}

static int compare(rlx_packed_fn fn, const rlx_block_q4_k *w, const void *packed, const rlx_block_q8_k *a, int64_t N,
                   int64_t K, int64_t T, int64_t n0, int64_t n1, bool batched, const char *what)
{
    return compare_type(RLX_Q4_K, fn, w, packed, a, N, K, T, n0, n1, batched, what);
}

/* Q8_0: the packed tiles against the GGUF-layout ones and the scalar reference, every T up to
 * past the widest activation tile (8), whole and inner row ranges, realistic and random scales */
TEST(q8_0_packed_kernels_match_gguf_layout)
{
    static const int64_t shapes[][2] = {{8, 32}, {48, 1024}, {64, 160 * 32}};
    int ran = 0;
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(simd_paths); pi++) {
        if (!rlx_cpu_has_path(simd_paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(simd_paths[pi]), 0);
        rlx_packed_fn fn = rlx__cpu_packed_fn(RLX_Q8_0);
        ASSERT(fn != NULL);
        for (size_t si = 0; si < RLX_ARRAY_LEN(shapes); si++) {
            const int64_t N = shapes[si][0], K = shapes[si][1], nb = K / RLX_QK;
            rlx_block_q8_0 *w = malloc((size_t)(N * nb) * sizeof *w);
            float *x = malloc((size_t)K * 4);
            for (int64_t n = 0; n < N; n++) {
                for (int64_t k = 0; k < K; k++) x[k] = (n % 3 ? 0.05f : 40.0f) * rndf();
                ASSERT_EQ(rlx_quantize_row(RLX_Q8_0, x, &w[n * nb], K), 0);
                if (n % 4 == 1) /* every byte pattern, -128 included */
                    for (int64_t i = 0; i < nb; i++)
                        for (int j = 0; j < RLX_QK; j++) w[n * nb + i].qs[j] = (int8_t)rnd();
            }
            void *p = malloc(rlx__repack_bytes(RLX_Q8_0, N, K));
            rlx__repack(RLX_Q8_0, w, N, K, p);
            rlx_block_q8_0 *a = malloc((size_t)(11 * nb) * sizeof *a);
            for (int64_t t = 0; t < 11; t++) {
                for (int64_t k = 0; k < K; k++) x[k] = (t % 2 ? 3.0f : 0.01f) * rndf();
                ASSERT_EQ(rlx_quantize_act(RLX_Q8_0, x, &a[t * nb], K), 0);
            }
            for (int64_t T = 1; T <= 11; T++) {
                ASSERT_EQ(compare_type(RLX_Q8_0, fn, w, p, a, N, K, T, 0, N, T % 2, "Q8_0"), 0);
                if (N > 16) ASSERT_EQ(compare_type(RLX_Q8_0, fn, w, p, a, N, K, T, 8, N - 16, false, "Q8_0, inner rows"), 0);
            }
            free(a);
            free(p);
            free(x);
            free(w);
            ran++;
        }
    }
    ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
    ASSERT(rlx__cpu_packed_fn(RLX_Q8_0) == NULL);
    if (!ran) SKIP("this CPU has no SIMD path");
}

TEST(packed_kernels_match_gguf_layout)
{
    static const int64_t shapes[][2] = {{8, 256}, {40, 1024}, {64, 512}};
    static const int64_t Ts[] = {1, 2, 3, 4, 5, 9};
    int ran = 0;
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(simd_paths); pi++) {
        if (!rlx_cpu_has_path(simd_paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(simd_paths[pi]), 0);
        rlx_packed_fn fn = rlx__cpu_packed_fn(RLX_Q4_K);
        ASSERT(fn != NULL);
        for (size_t si = 0; si < RLX_ARRAY_LEN(shapes); si++) {
            const int64_t N = shapes[si][0], K = shapes[si][1], nb = K / RLX_QK_K;
            rlx_block_q4_k *w = malloc((size_t)(N * nb) * sizeof *w);
            float *x = malloc((size_t)K * 4);
            /* half the rows quantized from floats (realistic scales), half random bytes */
            for (int64_t n = 0; n < N; n++) {
                if (n % 2) { random_blocks(&w[n * nb], nb); continue; }
                for (int64_t k = 0; k < K; k++) x[k] = rndf();
                ASSERT_EQ(rlx_quantize_row(RLX_Q4_K, x, &w[n * nb], K), 0);
            }
            void *p = malloc(rlx__repack_bytes(RLX_Q4_K, N, K));
            rlx__repack(RLX_Q4_K, w, N, K, p);
            rlx_block_q8_k *a = malloc((size_t)(9 * nb) * sizeof *a);
            for (int batched = 0; batched < 2; batched++) {
                for (int64_t t = 0; t < 9; t++) {
                    for (int64_t k = 0; k < K; k++) x[k] = 3.0f * rndf();
                    ASSERT_EQ((batched ? rlx_quantize_act_batched : rlx_quantize_act)(RLX_Q8_K, x, &a[t * nb], K), 0);
                }
                for (size_t ti = 0; ti < RLX_ARRAY_LEN(Ts); ti++) {
                    ASSERT_EQ(compare(fn, w, p, a, N, K, Ts[ti], 0, N, batched, "random"), 0);
                    if (N > 16) ASSERT_EQ(compare(fn, w, p, a, N, K, Ts[ti], 8, N - 8, batched, "random, inner rows"), 0);
                }
            }
            free(a);
            free(p);
            free(x);
            free(w);
            ran++;
        }
    }
    /* the scalar path reads Q4_K in the GGUF layout; no other type is packed */
    ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
    ASSERT(rlx__cpu_packed_fn(RLX_Q4_K) == NULL);
    if (rlx_cpu_has_path("avx2")) {
        ASSERT_EQ(rlx_cpu_force_path("avx2"), 0);
        ASSERT(rlx__cpu_packed_fn(RLX_Q6_K) == NULL);
    }
    rlx_cpu_force_path("scalar");
    if (!ran) SKIP("this CPU has no SIMD path");
}

/* The 16-bit sums at their bounds: levels 15 and activations -128 (a sub-block's 16 products
 * per lane make -30720) or 127, scales and mins 63: no saturation, the scalar reference's bits */
TEST(packed_kernels_extremes)
{
    const int64_t N = 16, K = 512, nb = K / RLX_QK_K, T = 5;
    rlx_block_q4_k *w = calloc((size_t)(N * nb), sizeof *w);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < nb; i++) {
            rlx_block_q4_k *b = &w[n * nb + i];
            b->d = rlx_f32_to_f16(0.03125f * (float)(n + 1));
            b->dmin = rlx_f32_to_f16(0.0078125f * (float)(i + 1));
            memset(b->scales, 0xFF, sizeof b->scales);
            if (n == 5) for (int j = 0; j < 12; j++) b->scales[j] = (uint8_t)(0x5A + 37 * j);
            memset(b->qs, n % 3 ? 0xFF : 0xF0, sizeof b->qs);
        }
    rlx_block_q8_k *a = calloc((size_t)(T * nb), sizeof *a);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < nb; i++) {
            rlx_block_q8_k *y = &a[t * nb + i];
            y->d = 0.5f + (float)t;
            for (int j = 0; j < RLX_QK_K; j++) y->qs[j] = (int8_t)(t % 2 ? -128 : (j % 5 ? 127 : -128));
            for (int g = 0; g < RLX_QK_K / 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++) s += y->qs[16 * g + j];
                y->bsums[g] = (int16_t)s;
            }
        }
    void *p = malloc(rlx__repack_bytes(RLX_Q4_K, N, K));
    rlx__repack(RLX_Q4_K, w, N, K, p);
    int ran = 0;
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(simd_paths); pi++) {
        if (!rlx_cpu_has_path(simd_paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(simd_paths[pi]), 0);
        for (int batched = 0; batched < 2; batched++)
            for (int64_t t = 1; t <= T; t++) ASSERT_EQ(compare(rlx__cpu_packed_fn(RLX_Q4_K), w, p, a, N, K, t, 0, N, batched, "extremes"), 0);
        ran++;
    }
    rlx_cpu_force_path("scalar");
    free(p);
    free(a);
    free(w);
    if (!ran) SKIP("this CPU has no SIMD path");
}

/* ---- the backend: what it packs, and that nothing shows in the outputs ---- */

#define D 256
#define V 64

/* x = emb[tok] (`type`, also the tied output projection); h = rms(x); y = h @ W1 (`type`,
 * matmul only) + x; logits = gather(rms(y)) @ emb */
static void build(rlx_graph *g, int type, const void *emb, const void *w1)
{
    rlx_graph_init(g);
    int e = rlx_g_weight(g, "emb", type, D, V, emb);
    int m = rlx_g_weight(g, "w1", type, D, D, w1);
    int x = rlx_g_get_rows(g, e, 1.0f);
    int y = rlx_g_add(g, rlx_g_matmul(g, rlx_g_rms_norm(g, x, 1e-6f), m), x);
    int o = rlx_g_node(g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, D, rlx_g_rms_norm(g, y, 1e-6f), -1, -1);
    g->output = rlx_g_matmul(g, o, e);
    g->n_layers = 1;
    g->kv_cols = 8;
}

static int run(const rlx_plan *p, const int32_t *tok, int n, float *out, size_t *packed)
{
    rlx_backend *be = NULL;
    rlx_error err = {0};
    int rc = rlx_backend_cpu_create(&be, 2, &err);
    if (!rc) rc = be->ops->prepare(be, p, &err);
    rlx_mem_desc geo = {1, 8, 1, 16, RLX_F32, NULL, 0};
    if (!rc) rc = be->ops->mem_init(be, &geo, &err);
    int32_t pos[16], seq[16] = {0}, blocks[1] = {0};
    uint8_t outm[16];
    for (int i = 0; i < n; i++) { pos[i] = i; outm[i] = 1; }
    rlx_batch_seq bs = {blocks, 1, -1};
    rlx_batch b = {n, tok, pos, seq, outm, n, 1, &bs, NULL};
    if (!rc) rc = be->ops->run(be, p, &b, out, &err);
    if (rc) fprintf(stderr, "run: %s\n", err.msg);
    *packed = rlx_backend_cpu_packed_bytes(be);
    rlx_backend_destroy(be);
    return rc;
}

static void packs_matmul_only_weights(int type)
{
    const size_t rb = rlx_row_bytes(type, D);
    uint8_t *emb = malloc(V * rb), *w1 = malloc(D * rb);
    float x[D];
    for (int r = 0; r < V; r++) { for (int k = 0; k < D; k++) x[k] = rndf(); rlx_quantize_row(type, x, &emb[r * rb], D); }
    for (int r = 0; r < D; r++) { for (int k = 0; k < D; k++) x[k] = 0.2f * rndf(); rlx_quantize_row(type, x, &w1[r * rb], D); }
    rlx_graph g;
    build(&g, type, emb, w1);
    rlx_plan p;
    rlx_error err = {0};
    rlx_compile_opts o = {.max_tokens = 8, .max_outputs = 8};
    ASSERT_MSG(rlx_compile(&g, &o, &p, &err) == 0, "%s", err.msg);
    const int32_t tok[7] = {3, 17, 63, 0, 9, 41, 22};
    static float packed_out[7 * V], plain_out[7 * V], one[V];
    int ran = 0;
    static const char *const paths[] = {"avx2", "avx2-novnni", "avx512", "avx512-novnni", "scalar"};
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(paths); pi++) {
        if (!rlx_cpu_has_path(paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[pi]), 0);
        setenv("RLX_CPU_REPACK", "1", 1); /* Q8_0 too where no huge pages can be had */
        const bool packs = rlx__repack_wanted(type);
        ASSERT_EQ(packs, rlx__cpu_packed_fn(type) != NULL);
        size_t bytes = 0;
        ASSERT_EQ(run(&p, tok, 7, packed_out, &bytes), 0);
        /* w1 only: emb is also read by GET_ROWS */
        ASSERT_EQ(bytes, packs ? rlx__repack_bytes(type, D, D) : 0);
        setenv("RLX_CPU_REPACK", "0", 1);
        ASSERT_EQ(run(&p, tok, 7, plain_out, &bytes), 0);
        unsetenv("RLX_CPU_REPACK");
        ASSERT_EQ(bytes, 0);
        ASSERT_MSG(memcmp(packed_out, plain_out, sizeof packed_out) == 0, "%s: packing changes the logits", paths[pi]);
        setenv("RLX_CPU_REPACK", "1", 1);
        ASSERT_EQ(run(&p, &tok[4], 1, one, &bytes), 0); /* one token: one-row arithmetic */
        setenv("RLX_CPU_REPACK", "0", 1);
        ASSERT_EQ(run(&p, &tok[4], 1, plain_out, &bytes), 0);
        unsetenv("RLX_CPU_REPACK");
        ASSERT_MSG(memcmp(one, plain_out, sizeof one) == 0, "%s: packing changes a decode row", paths[pi]);
        ran += packs;
    }
    rlx_cpu_force_path("scalar");
    rlx_plan_free(&p);
    rlx_graph_free(&g);
    free(emb);
    free(w1);
    if (!ran) SKIP("this CPU has no SIMD path: nothing is packed");
}

/* what is packed where: RLX_CPU_REPACK=0 nothing, the scalar path nothing, Q4_K on every SIMD
 * path, Q8_0 there when asked (=1) or where huge pages can be had */
TEST(repack_wanted)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    const bool thp = strstr(line, "[always]") || strstr(line, "[madvise]");
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(simd_paths); pi++) {
        if (!rlx_cpu_has_path(simd_paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(simd_paths[pi]), 0);
        ASSERT(rlx__repack_wanted(RLX_Q4_K));
        ASSERT_EQ(rlx__repack_wanted(RLX_Q8_0), thp);
        ASSERT(!rlx__repack_wanted(RLX_Q6_K));
        setenv("RLX_CPU_REPACK", "1", 1);
        ASSERT(rlx__repack_wanted(RLX_Q8_0));
        setenv("RLX_CPU_REPACK", "0", 1);
        ASSERT(!rlx__repack_wanted(RLX_Q8_0) && !rlx__repack_wanted(RLX_Q4_K));
        unsetenv("RLX_CPU_REPACK");
    }
    ASSERT_EQ(rlx_cpu_force_path("scalar"), 0);
    ASSERT(!rlx__repack_wanted(RLX_Q8_0) && !rlx__repack_wanted(RLX_Q4_K));
}

TEST(backend_packs_matmul_only_weights) { packs_matmul_only_weights(RLX_Q4_K); }
TEST(backend_packs_matmul_only_weights_q8_0) { packs_matmul_only_weights(RLX_Q8_0); }

TEST_MAIN(TEST_ENTRY(layout_round_trip), TEST_ENTRY(q8_0_layout_round_trip), TEST_ENTRY(packed_kernels_match_gguf_layout),
          TEST_ENTRY(q8_0_packed_kernels_match_gguf_layout), TEST_ENTRY(packed_kernels_extremes),
          TEST_ENTRY(repack_wanted), TEST_ENTRY(backend_packs_matmul_only_weights),
          TEST_ENTRY(backend_packs_matmul_only_weights_q8_0))
