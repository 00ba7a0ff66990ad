/* test_cpu_backend.c - the CPU backend's scheduling never shows in the results: matmul tiles
 * claimed dynamically, single rows converted per thread, and barriers skipped between
 * independent steps (q/k/v-like projections of one input) give bit-identical outputs on one
 * thread and on two (and on more threads than cores), repeated, and a token's row is the same alone (T = 1) or in a batch; so
 * do F32/F16 products claimed by parts of their activation rows. The
 * weights are large enough (Q8_0, four 1024 x 1024: above the backend's 4 MiB single-thread
 * limit even for one token) for every run to use both threads. */
#include "tests/rlx_test.h"
#include "backends/backend.h"
#include "backends/quant.h"

#define D 1024
#define V 64

static float emb[V * D], norm_w[D];
static uint8_t wq[D * D / 32 * 34], wk[D * D / 32 * 34], wv[D * D / 32 * 34], wo[D * D / 32 * 34];

static void fill(float *w, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        w[i] = (float)((int)(seed >> 9) % 2001 - 1000) / 1000.0f;
    }
}

static void quant(uint8_t *dst, uint32_t seed)
{
    static float row[D];
    for (int r = 0; r < D; r++) {
        fill(row, D, seed + (uint32_t)r * 7919u);
        rlx_quantize_row(RLX_Q8_0, row, dst + (size_t)r * rlx_row_bytes(RLX_Q8_0, D), D);
    }
}

/* x = emb[tok]; h = rms(x) * w; q, k, v = h @ Wq, Wk, Wv; y = (q + k) * silu(v); out = gather(y) @ Wo */
static void build_ex(rlx_graph *g, bool encoder_ops)
{
    rlx_graph_init(g);
    int e = rlx_g_weight(g, "emb", RLX_F32, D, V, emb);
    int nw = rlx_g_weight(g, "norm", RLX_F32, D, 1, norm_w);
    int q8[4];
    uint8_t *ws[4] = {wq, wk, wv, wo};
    for (int i = 0; i < 4; i++) q8[i] = rlx_g_weight(g, "w", RLX_Q8_0, D, D, ws[i]);
    int x = rlx_g_get_rows(g, e, 1.0f);
    int h = rlx_g_mul(g, rlx_g_rms_norm(g, x, 1e-6f), nw);
    int q = rlx_g_matmul(g, h, q8[0]), k = rlx_g_matmul(g, h, q8[1]), v = rlx_g_matmul(g, h, q8[2]);
    int y = rlx_g_mul(g, rlx_g_add(g, q, k), rlx_g_unary(g, RLX_OP_SILU, v, 0));
    if (encoder_ops) { /* the row kernels main added after the work units: NORM, COLS, SIGMOID, SOFTPLUS, GELU */
        int n = rlx_g_norm(g, y, 1e-5f);
        int c = rlx_g_cols(g, n, 2, D / 2, D / 2, 0);
        y = rlx_g_add(g, rlx_g_unary(g, RLX_OP_SIGMOID, c, 0), rlx_g_unary(g, RLX_OP_GELU, rlx_g_unary(g, RLX_OP_SOFTPLUS, c, 0), 0));
    }
    int o = rlx_g_node(g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, D, y, -1, -1);
    g->output = rlx_g_matmul(g, o, q8[3]);
    g->n_layers = 1;
    g->kv_cols = 8;
}

static void build(rlx_graph *g) { build_ex(g, false); }

static uint64_t last_more; /* whether run()'s pass ran on more than one thread (its count) */

/* runs n tokens (all outputs) on a backend of nth threads; out gets n rows of D; the backend
 * counts that one pass, on one thread when nth is 1 */
static int run(const rlx_plan *p, int nth, const int32_t *tok, int n, float *out)
{
    rlx_backend *be = NULL;
    rlx_error err = {0};
    setenv("RLX_CPU_FIXED_THREADS", "1", 1); /* nth threads in every pass, not the faster choice (nth_ctl.h) */
    int rc = rlx_backend_cpu_create(&be, nth, &err);
    if (!rc) rc = be->ops->prepare(be, p, &err);
    rlx_mem_desc geo = {1, 8, 1, 16, RLX_F32, NULL, 0};
    if (!rc) rc = be->ops->mem_init(be, &geo, &err);
    int32_t pos[64], seq[64] = {0}, blocks[1] = {0};
    uint8_t outm[64];
    for (int i = 0; i < n; i++) { pos[i] = i; outm[i] = 1; }
    rlx_batch_seq bs = {blocks, 1, -1};
    rlx_batch b = {n, tok, pos, seq, outm, n, 1, &bs, NULL};
    if (!rc) rc = be->ops->run(be, p, &b, out, &err);
    if (rc) fprintf(stderr, "run: %s\n", err.msg);
    uint64_t one = 0;
    last_more = 0;
    if (!rc) rlx_backend_cpu_passes(be, &one, &last_more);
    if (!rc && (one + last_more != 1 || (nth == 1 && last_more))) {
        fprintf(stderr, "run: the backend counted %llu passes on one thread, %llu on more\n", (unsigned long long)one,
                (unsigned long long)last_more);
        rc = -1;
    }
    rlx_backend_destroy(be);
    return rc;
}

TEST(threads_and_batching_are_invisible)
{
    fill(emb, V * D, 1);
    fill(norm_w, D, 2);
    quant(wq, 3); quant(wk, 4); quant(wv, 5); quant(wo, 6);
    rlx_graph g;
    build(&g);
    rlx_plan pf, pu;
    rlx_error err = {0};
    rlx_compile_opts of = {.max_tokens = 8, .max_outputs = 8}, ou = {.max_tokens = 8, .max_outputs = 8, .no_fusion = true};
    ASSERT_EQ(rlx_compile(&g, &of, &pf, &err), 0);
    ASSERT_EQ(rlx_compile(&g, &ou, &pu, &err), 0);
    int32_t tok[8] = {3, 17, 63, 0, 9, 9, 41, 22};
    static float one[8 * D], two[8 * D], alone[D], unfused[8 * D];
    ASSERT_EQ(run(&pf, 1, tok, 8, one), 0);
    /* repeats vary which thread takes which unit; valgrind (RLX_MEMCHECK) runs one thread at a
     * time, where they vary nothing: two there */
    const int reps = getenv("RLX_MEMCHECK") ? 2 : 20, reps_many = getenv("RLX_MEMCHECK") ? 2 : 5;
    for (int rep = 0; rep < reps; rep++) {
        ASSERT_EQ(run(&pf, 2, tok, 8, two), 0);
        ASSERT(memcmp(one, two, sizeof one) == 0);
    }
    /* more threads than this host's cores: some are descheduled mid-run and the others take
     * their units; which thread computes what changes from run to run, the results do not */
    for (int nth = 3; nth <= 5; nth += 2)
        for (int rep = 0; rep < reps_many; rep++) {
            ASSERT_EQ(run(&pf, nth, tok, 8, two), 0);
            ASSERT_MSG(memcmp(one, two, sizeof one) == 0, "%d threads differ from one", nth);
            ASSERT_EQ(run(&pf, nth, &tok[rep], 1, alone), 0);
            ASSERT_MSG(memcmp(alone, one + (size_t)rep * D, sizeof alone) == 0, "%d threads: token %d alone differs", nth, rep);
        }
    ASSERT_EQ(run(&pu, 2, tok, 8, unfused), 0);
    for (int i = 0; i < 8 * D; i++) ASSERT_NEAR(unfused[i], one[i], 1e-4 * (1 + fabs(one[i])));
    /* a single token (T = 1: private activation rows, overlapped projections) equals its batch row */
    for (int t = 0; t < 8; t++) {
        ASSERT_EQ(run(&pf, 2, &tok[t], 1, alone), 0);
        ASSERT_MSG(memcmp(alone, one + (size_t)t * D, sizeof alone) == 0, "token %d alone differs from its batch row", t);
    }
    rlx_plan_free(&pf);
    rlx_plan_free(&pu);
    rlx_graph_free(&g);
}

/* the kernels added after the work units (layer norm, column slices, sigmoid, softplus, GELU)
 * between the same large products, so every run is on several threads: bit for bit the same
 * on 1, 2, 3 and 5 threads */
TEST(later_row_kernels_thread_invisible)
{
    fill(emb, V * D, 1);
    fill(norm_w, D, 2);
    quant(wq, 3); quant(wk, 4); quant(wv, 5); quant(wo, 6);
    rlx_graph g;
    build_ex(&g, true);
    rlx_plan p;
    rlx_error err = {0};
    rlx_compile_opts o = {.max_tokens = 8, .max_outputs = 8};
    ASSERT_MSG(rlx_compile(&g, &o, &p, &err) == 0, "%s", err.msg);
    int32_t tok[8] = {5, 11, 60, 2, 2, 33, 48, 19};
    static float one[8 * D], many[8 * D];
    ASSERT_EQ(run(&p, 1, tok, 8, one), 0);
    bool finite = true;
    for (int i = 0; i < 8 * D; i++) finite &= isfinite(one[i]) != 0;
    ASSERT(finite);
    for (int nth = 2; nth <= 5; nth++)
        for (int rep = 0; rep < (getenv("RLX_MEMCHECK") ? 1 : 3); rep++) {
            ASSERT_EQ(run(&p, nth, tok, 8, many), 0);
            ASSERT_EQ(last_more, 1); /* counted as a pass on several threads */
            ASSERT_MSG(memcmp(one, many, sizeof one) == 0, "%d threads differ from one", nth);
        }
    rlx_plan_free(&p);
    rlx_graph_free(&g);
}

/* F32 and F16 weights times 64 rows: products claimed by parts of the activation rows, one part
 * per thread (rlx_cpu_claim_part), up to more threads than parts. Bit for bit the same on 1 to
 * 12 threads, and each token's row the same in a batch of 64 as in one of 8. */
static float wf32a[D * D], wf32b[D * D];
static uint16_t wf16[D * D];

TEST(float_products_by_row_parts_thread_invisible)
{
    fill(emb, V * D, 7);
    fill(norm_w, D, 8);
    fill(wf32a, D * D, 9);
    fill(wf32b, D * D, 10);
    static float row[D];
    for (int r = 0; r < D; r++) {
        fill(row, D, 11 + (uint32_t)r * 31u);
        rlx_quantize_row(RLX_F16, row, (uint8_t *)(wf16 + (size_t)r * D), D);
    }
    rlx_graph g;
    rlx_graph_init(&g);
    int e = rlx_g_weight(&g, "emb", RLX_F32, D, V, emb);
    int nw = rlx_g_weight(&g, "norm", RLX_F32, D, 1, norm_w);
    int a = rlx_g_weight(&g, "a", RLX_F32, D, D, wf32a), b = rlx_g_weight(&g, "b", RLX_F32, D, D, wf32b);
    int h16 = rlx_g_weight(&g, "h", RLX_F16, D, D, wf16);
    int x = rlx_g_get_rows(&g, e, 1.0f);
    int h = rlx_g_mul(&g, rlx_g_norm(&g, x, 1e-5f), nw);
    int y = rlx_g_add(&g, rlx_g_matmul(&g, h, a), rlx_g_unary(&g, RLX_OP_GELU, rlx_g_matmul(&g, h, h16), 0));
    int z = rlx_g_add(&g, rlx_g_matmul(&g, rlx_g_norm(&g, y, 1e-5f), b), y);
    g.output = rlx_g_node(&g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, D, z, -1, -1);
    g.n_layers = 1;
    g.kv_cols = 8;
    rlx_plan p;
    rlx_error err = {0};
    rlx_compile_opts o = {.max_tokens = 64, .max_outputs = 64};
    ASSERT_MSG(rlx_compile(&g, &o, &p, &err) == 0, "%s", err.msg);
    int32_t tok[64], other[64];
    for (int t = 0; t < 64; t++) tok[t] = (t * 37 + 5) % V, other[t] = (t * 11 + 3) % V;
    static float one[64 * D], many[64 * D], part[8 * D];
    ASSERT_EQ(run(&p, 1, tok, 64, one), 0);
    bool finite = true;
    for (int i = 0; i < 64 * D; i++) finite &= isfinite(one[i]) != 0;
    ASSERT(finite);
    const int nths[] = {2, 3, 5, 9, 12};
    for (size_t i = 0; i < sizeof nths / sizeof *nths; i++)
        for (int rep = 0; rep < (getenv("RLX_MEMCHECK") ? 1 : 3); rep++) {
            /* other tokens first, every row on one thread: a row the run left out would keep
             * their values (the allocator hands the next backend the same activations' memory) */
            ASSERT_EQ(run(&p, 1, other, 64, many), 0);
            ASSERT_EQ(run(&p, nths[i], tok, 64, many), 0);
            ASSERT_EQ(last_more, 1);
            ASSERT_MSG(memcmp(one, many, sizeof one) == 0, "%d threads differ from one", nths[i]);
        }
    for (int t0 = 0; t0 < 64; t0 += 8) { /* 8 rows: under a part's 16 per thread, weight-row claims */
        ASSERT_EQ(run(&p, 1, other + t0, 8, part), 0);
        ASSERT_EQ(run(&p, 2, tok + t0, 8, part), 0);
        ASSERT_MSG(memcmp(part, one + (size_t)t0 * D, sizeof part) == 0, "tokens %d.. in 8 differ from the batch of 64", t0);
    }
    rlx_plan_free(&p);
    rlx_graph_free(&g);
}

TEST_MAIN(TEST_ENTRY(threads_and_batching_are_invisible), TEST_ENTRY(later_row_kernels_thread_invisible),
          TEST_ENTRY(float_products_by_row_parts_thread_invisible))
