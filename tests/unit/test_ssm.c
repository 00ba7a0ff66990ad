/* test_ssm.c - the recurrent ops of hybrid models on the CPU backend (backends/cpu/ssm.c):
 * the causal depthwise conv1d over a carried conv state (SSM_CONV + SiLU) and the gated delta
 * rule over a carried state (DELTA_NET), in a toy one-layer graph whose inputs come from an
 * embedding table. Checked:
 *   - against a float64 reference of the maths written here from the model notes;
 *   - N tokens in one batch give bit for bit what N one-token steps give, and what chunks give
 *     whose boundaries fall inside a 16-position block and on block boundaries;
 *   - two sequences interleaved in one batch (their own slots) give their solo outputs, on one
 *     thread and on three;
 *   - a batch that does not continue a sequence where its state stands is refused. */
#include "tests/rlx_test.h"
#include "backends/backend.h"
#include "models/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NK 2
#define NV 4
#define DK 8
#define DV 40 /* more than one block of the delta rule's value columns (ssm.c DELTA_VB 32), and a partial one */
#define CH (2 * NK * DK + NV * DV) /* conv channels: q | k | v */
#define KC 4                       /* conv kernel */
#define WIDTH (CH + 2 * NV)        /* embedding row: qkv | alpha | beta */
#define VOCAB 64
#define MAXT 64
#define EPS 1e-6f
#define STATE_FLOATS (RLX_SSM_HEADER + (KC - 1) * CH + NV * DK * DV)

static float emb[VOCAB * WIDTH];
static float convw[CH * KC];

static uint32_t rng = 12345;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 65536.0f * 2.0f - 1.0f;
}

static void init_weights(void)
{
    static bool done;
    if (done) return;
    done = true;
    for (int i = 0; i < VOCAB * WIDTH; i++) emb[i] = frand();
    /* alpha around +-1 so the decay exp(-softplus) spreads over (0.2, 0.7); beta in (0.3, 0.7) */
    for (int i = 0; i < CH * KC; i++) convw[i] = 0.7f * frand();
}

typedef struct toy {
    rlx_graph g;
    rlx_plan p;
    rlx_backend *be;
    rlx_mem_layer layer;
} toy;

/* delta: the graph outputs the delta rule's output, else the conv's (after SiLU) */
static int toy_open(toy *t, bool delta, int nth, rlx_error *err)
{
    init_weights();
    memset(t, 0, sizeof *t);
    rlx_graph *g = &t->g;
    rlx_graph_init(g);
    g->n_layers = 1;
    g->mem = malloc(sizeof *g->mem);
    if (!g->mem) return RLX_ENOMEM;
    t->layer = (rlx_mem_layer){RLX_MEM_STATE, 0, 4 * STATE_FLOATS};
    g->mem[0] = t->layer;
    int e = rlx_g_weight(g, "emb", RLX_F32, WIDTH, VOCAB, emb);
    int w = rlx_g_weight(g, "conv", RLX_F32, KC, CH, convw);
    int x = rlx_g_get_rows(g, e, 1.0f);
    int qkv = rlx_g_cols(g, x, 1, CH, 0, 0);
    int ga = rlx_g_unary(g, RLX_OP_SCALE, rlx_g_unary(g, RLX_OP_SOFTPLUS, rlx_g_cols(g, x, 1, NV, 0, CH), 0.0f), -1.0f);
    int be = rlx_g_unary(g, RLX_OP_SIGMOID, rlx_g_cols(g, x, 1, NV, 0, CH + NV), 0.0f);
    const rlx_ssm_conv_params cp = {.layer = 0, .kernel = KC, .channels = CH, .conv_off = RLX_SSM_HEADER};
    int c = rlx_g_unary(g, RLX_OP_SILU, rlx_g_ssm_conv(g, qkv, w, &cp), 0.0f);
    /* the delta rule runs in both (it advances the state's position), the output is one of them */
    const rlx_delta_params dp = {.layer = 0, .n_k_heads = NK, .n_v_heads = NV, .head_k = DK, .head_v = DV,
                                 .state_off = RLX_SSM_HEADER + (KC - 1) * CH, .eps = EPS, .scale = 1.0f / sqrtf((float)DK)};
    int dn = rlx_g_delta_net(g, c, ga, be, &dp);
    rlx_g_set_output(g, rlx_g_gather(g, delta ? dn : c), RLX_OUTPUT_LOGITS);
    rlx_compile_opts o = {.max_tokens = MAXT, .max_outputs = MAXT};
    int rc = rlx_compile(g, &o, &t->p, err);
    setenv("RLX_CPU_FIXED_THREADS", "1", 1); /* nth threads in every pass (nth_ctl.h) */
    if (!rc) rc = rlx_backend_cpu_create(&t->be, nth, err);
    if (!rc) rc = t->be->ops->prepare(t->be, &t->p, err);
    rlx_mem_desc d = {.n_layers = 1, .n_blocks = 4, .block_size = 16, .type = RLX_F32, .layers = &t->layer, .n_state_slots = 4};
    if (!rc) rc = t->be->ops->mem_init(t->be, &d, err);
    return rc;
}

static void toy_close(toy *t)
{
    rlx_backend_destroy(t->be);
    rlx_plan_free(&t->p);
    rlx_graph_free(&t->g);
}

static int toy_clear(toy *t, int32_t slot)
{
    static float zeros[STATE_FLOATS];
    return t->be->ops->state_write(t->be, 0, slot, zeros, NULL);
}

/* Runs tokens [0, n) of the batch: tok, pos, seq (index into slots), every token an output. */
static int toy_run(toy *t, int n, const int32_t *tok, const int32_t *pos, const int32_t *seq, const int32_t *slots, int n_seqs,
                   float *out, rlx_error *err)
{
    uint8_t outm[MAXT];
    rlx_batch_seq bs[4];
    int32_t block = 0;
    for (int i = 0; i < n; i++) outm[i] = 1;
    for (int s = 0; s < n_seqs; s++) bs[s] = (rlx_batch_seq){&block, 1, slots[s]};
    rlx_batch b = {n, tok, pos, seq, outm, n, n_seqs, bs, NULL};
    return t->be->ops->run(t->be, &t->p, &b, out, err);
}

/* One sequence of n tokens in chunks (sizes chunk[0..], repeated last) on slot `slot`. */
static int toy_chunks(toy *t, const int32_t *tok, int n, const int *chunk, int n_chunk, int32_t slot, float *out, int cols,
                      rlx_error *err)
{
    int rc = toy_clear(t, slot);
    int32_t pos[MAXT], seq[MAXT] = {0};
    for (int i = 0; i < n; i++) pos[i] = i;
    for (int at = 0, k = 0; !rc && at < n; k++) {
        int len = chunk[k < n_chunk ? k : n_chunk - 1];
        if (len > n - at) len = n - at;
        rc = toy_run(t, len, tok + at, pos + at, seq, &slot, 1, out + (size_t)at * cols, err);
        at += len;
    }
    return rc;
}

static void tokens(int32_t *tok, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((seed * 2654435761u + (uint32_t)i * 40503u) >> 7) % VOCAB;
}

/* ---- float64 reference ------------------------------------------------------------------ */

static double silu(double x) { return x / (1.0 + exp(-x)); }

/* conv (after SiLU) of every token: conv[t * CH + c] */
static void ref_conv(const int32_t *tok, int n, double *conv)
{
    for (int t = 0; t < n; t++)
        for (int c = 0; c < CH; c++) {
            double s = 0.0;
            for (int j = 0; j < KC; j++) {
                int src = t - (KC - 1) + j;
                if (src >= 0) s += (double)convw[c * KC + j] * emb[tok[src] * WIDTH + c];
            }
            conv[t * CH + c] = silu(s);
        }
}

static void ref_delta(const int32_t *tok, int n, double *out)
{
    static double conv[MAXT * CH];
    double S[NV][DK][DV];
    memset(S, 0, sizeof S);
    ref_conv(tok, n, conv);
    for (int t = 0; t < n; t++) {
        const double *x = conv + t * CH;
        for (int j = 0; j < NV; j++) {
            const int kh = j % NK;
            double q[DK], k[DK], nq = 0, nk = 0;
            for (int i = 0; i < DK; i++) { q[i] = x[kh * DK + i]; k[i] = x[(NK + kh) * DK + i]; nq += q[i] * q[i]; nk += k[i] * k[i]; }
            nq = fmax(sqrt(nq), EPS);
            nk = fmax(sqrt(nk), EPS);
            for (int i = 0; i < DK; i++) { q[i] /= nq * sqrt((double)DK); k[i] /= nk; }
            const double a = emb[tok[t] * WIDTH + CH + j], bb = emb[tok[t] * WIDTH + CH + NV + j];
            const double g = -log1p(exp(a)), beta = 1.0 / (1.0 + exp(-bb));
            for (int i = 0; i < DK; i++)
                for (int v = 0; v < DV; v++) S[j][i][v] *= exp(g);
            for (int v = 0; v < DV; v++) {
                double sk = 0;
                for (int i = 0; i < DK; i++) sk += S[j][i][v] * k[i];
                const double d = beta * (x[2 * NK * DK + j * DV + v] - sk);
                for (int i = 0; i < DK; i++) S[j][i][v] += k[i] * d;
            }
            for (int v = 0; v < DV; v++) {
                double o = 0;
                for (int i = 0; i < DK; i++) o += S[j][i][v] * q[i];
                out[t * NV * DV + j * DV + v] = o;
            }
        }
    }
}

/* ---- tests ------------------------------------------------------------------------------ */

static void check_reference(bool delta)
{
    toy t;
    rlx_error err = {0};
    ASSERT_MSG(toy_open(&t, delta, 2, &err) == 0, "%s", err.msg);
    const int n = 37, cols = delta ? NV * DV : CH;
    int32_t tok[MAXT];
    tokens(tok, n, 7);
    static float out[MAXT * CH];
    static double ref[MAXT * CH];
    const int whole[] = {n};
    ASSERT_MSG(toy_chunks(&t, tok, n, whole, 1, 1, out, cols, &err) == 0, "%s", err.msg);
    if (delta) ref_delta(tok, n, ref);
    else ref_conv(tok, n, ref);
    double worst = 0, big = 0;
    for (int i = 0; i < n * cols; i++) { worst = fmax(worst, fabs(out[i] - ref[i])); big = fmax(big, fabs(ref[i])); }
    toy_close(&t);
    ASSERT_MSG(big > 0.05, "the toy's outputs are degenerate (max %g)", big);
    ASSERT_MSG(worst <= 1e-5 * fmax(1.0, big), "max |out - float64 reference| = %g (max |ref| %g)", worst, big);
}

TEST(conv_matches_reference) { check_reference(false); }
TEST(delta_rule_matches_reference) { check_reference(true); }

/* the whole prompt at once = one token per step = chunks split inside and on 16-position blocks */
static void check_chunking(bool delta)
{
    toy t;
    rlx_error err = {0};
    ASSERT_MSG(toy_open(&t, delta, 2, &err) == 0, "%s", err.msg);
    const int n = 53, cols = delta ? NV * DV : CH;
    int32_t tok[MAXT];
    tokens(tok, n, 3);
    static float whole_out[MAXT * CH], steps_out[MAXT * CH], chunk_out[MAXT * CH], block_out[MAXT * CH];
    const int whole[] = {n}, one[] = {1}, inside[] = {5, 11, 16, 3, 13, 1}, blocks[] = {16, 16, 16, 5};
    ASSERT_MSG(toy_chunks(&t, tok, n, whole, 1, 0, whole_out, cols, &err) == 0, "%s", err.msg);
    ASSERT_MSG(toy_chunks(&t, tok, n, one, 1, 2, steps_out, cols, &err) == 0, "%s", err.msg);
    ASSERT_MSG(toy_chunks(&t, tok, n, inside, 6, 3, chunk_out, cols, &err) == 0, "%s", err.msg);
    ASSERT_MSG(toy_chunks(&t, tok, n, blocks, 4, 1, block_out, cols, &err) == 0, "%s", err.msg);
    toy_close(&t);
    const size_t bytes = (size_t)n * cols * sizeof(float);
    ASSERT_MSG(!memcmp(whole_out, steps_out, bytes), "%d tokens at once differ from %d single steps", n, n);
    ASSERT_MSG(!memcmp(whole_out, chunk_out, bytes), "chunks 5/11/16/3/13/1 (boundaries inside blocks) differ");
    ASSERT_MSG(!memcmp(whole_out, block_out, bytes), "chunks of 16 (block boundaries) differ");
}

TEST(conv_chunks_equal_steps) { check_chunking(false); }
TEST(delta_rule_chunks_equal_steps) { check_chunking(true); }

/* two sequences in one batch, their tokens interleaved, each in its slot, over three steps */
static void check_interleaved(int nth)
{
    toy t;
    rlx_error err = {0};
    ASSERT_MSG(toy_open(&t, true, nth, &err) == 0, "%s", err.msg);
    const int na = 21, nb = 30, cols = NV * DV;
    int32_t ta[MAXT], tb[MAXT];
    tokens(ta, na, 11);
    tokens(tb, nb, 12);
    static float solo_a[MAXT * CH], solo_b[MAXT * CH], mixed_a[MAXT * CH], mixed_b[MAXT * CH], out[MAXT * CH];
    const int whole_a[] = {na}, whole_b[] = {nb};
    ASSERT_MSG(toy_chunks(&t, ta, na, whole_a, 1, 0, solo_a, cols, &err) == 0, "%s", err.msg);
    ASSERT_MSG(toy_chunks(&t, tb, nb, whole_b, 1, 0, solo_b, cols, &err) == 0, "%s", err.msg);
    ASSERT_EQ(toy_clear(&t, 3), 0);
    ASSERT_EQ(toy_clear(&t, 1), 0);
    const int32_t slots[2] = {3, 1};
    /* steps of up to 7 tokens of each sequence, alternating token by token */
    for (int a = 0, b = 0; a < na || b < nb;) {
        int32_t tok[MAXT], pos[MAXT], seq[MAXT], ia[MAXT], ib[MAXT];
        int n = 0, ka = 0, kb = 0;
        for (int k = 0; k < 7; k++) {
            if (a + k < na) { tok[n] = ta[a + k]; pos[n] = a + k; seq[n] = 0; ia[ka++] = n++; }
            if (b + k < nb) { tok[n] = tb[b + k]; pos[n] = b + k; seq[n] = 1; ib[kb++] = n++; }
        }
        ASSERT_MSG(toy_run(&t, n, tok, pos, seq, slots, 2, out, &err) == 0, "%s", err.msg);
        for (int k = 0; k < ka; k++) memcpy(mixed_a + (size_t)(a + k) * cols, out + (size_t)ia[k] * cols, (size_t)cols * 4);
        for (int k = 0; k < kb; k++) memcpy(mixed_b + (size_t)(b + k) * cols, out + (size_t)ib[k] * cols, (size_t)cols * 4);
        a += ka;
        b += kb;
    }
    toy_close(&t);
    ASSERT_MSG(!memcmp(solo_a, mixed_a, (size_t)na * cols * 4), "sequence A differs from its solo run (%d threads)", nth);
    ASSERT_MSG(!memcmp(solo_b, mixed_b, (size_t)nb * cols * 4), "sequence B differs from its solo run (%d threads)", nth);
}

TEST(interleaved_sequences_equal_solo) { check_interleaved(1); check_interleaved(3); }

TEST(refuses_batches_that_skip_positions)
{
    toy t;
    rlx_error err = {0};
    ASSERT_MSG(toy_open(&t, true, 1, &err) == 0, "%s", err.msg);
    int32_t tok[4] = {1, 2, 3, 4}, pos[4] = {0, 1, 3, 4}, seq[4] = {0}, slot = 0;
    static float out[MAXT * CH];
    ASSERT_EQ(toy_clear(&t, 0), 0);
    ASSERT_EQ(toy_run(&t, 4, tok, pos, seq, &slot, 1, out, &err), RLX_ERANGE); /* a gap inside the batch */
    ASSERT(strstr(err.msg, "recurrent state") != NULL);
    ASSERT_EQ(toy_clear(&t, 0), 0);
    int32_t p2[2] = {0, 1};
    ASSERT_EQ(toy_run(&t, 2, tok, p2, seq, &slot, 1, out, &err), 0);
    int32_t p3[1] = {5};
    ASSERT_EQ(toy_run(&t, 1, tok, p3, seq, &slot, 1, out, &err), RLX_ERANGE); /* the state stands at 2 */
    int32_t p4[1] = {2};
    ASSERT_EQ(toy_run(&t, 1, tok, p4, seq, &slot, 1, out, &err), 0);
    int32_t bad = 9; /* no such slot */
    ASSERT_EQ(toy_run(&t, 1, tok, p2, seq, &bad, 1, out, &err), RLX_ERANGE);
    toy_close(&t);
}

TEST(ops_validate_their_layer)
{
    init_weights();
    rlx_graph g;
    rlx_graph_init(&g);
    g.n_layers = 1;
    g.kv_cols = 8; /* mem NULL: the layer is KV, so a recurrent op there is refused */
    int e = rlx_g_weight(&g, "emb", RLX_F32, WIDTH, VOCAB, emb);
    int w = rlx_g_weight(&g, "conv", RLX_F32, KC, CH, convw);
    const rlx_ssm_conv_params cp = {.layer = 0, .kernel = KC, .channels = CH, .conv_off = RLX_SSM_HEADER};
    int c = rlx_g_ssm_conv(&g, rlx_g_cols(&g, rlx_g_get_rows(&g, e, 1.0f), 1, CH, 0, 0), w, &cp);
    rlx_g_set_output(&g, rlx_g_gather(&g, c), RLX_OUTPUT_LOGITS);
    rlx_plan p;
    rlx_error err = {0};
    rlx_compile_opts o = {.max_tokens = 4, .max_outputs = 4};
    ASSERT_EQ(rlx_compile(&g, &o, &p, &err), RLX_EINVAL); /* no delta_net after it */
    ASSERT_MSG(strstr(err.msg, "ssm_conv") && strstr(err.msg, "delta_net"), "%s", err.msg);
    rlx_graph_free(&g);
    /* with its delta_net, on a KV layer */
    toy t;
    ASSERT_MSG(toy_open(&t, true, 1, &err) == 0, "%s", err.msg);
    t.g.mem[0] = (rlx_mem_layer){RLX_MEM_KV, 8, 0};
    rlx_plan p2;
    ASSERT_EQ(rlx_compile(&t.g, &o, &p2, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "ssm_conv") && strstr(err.msg, "recurrent-state"), "%s", err.msg);
    /* a state slot too small for what the ops keep */
    t.g.mem[0] = (rlx_mem_layer){RLX_MEM_STATE, 0, 4 * (STATE_FLOATS - 1)};
    ASSERT_EQ(rlx_compile(&t.g, &o, &p2, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "delta_net"), "%s", err.msg);
    toy_close(&t);
}

/* GPU backends (rlx_backend_builtin_causal) refuse the recurrent ops by name, also an op fused
 * into a built-in op's chain (sigmoid after a matmul) */
TEST(gpu_backends_refuse_by_name)
{
    static const rlx_backend_ops gpu = {.name = "vulkan", .unsupported = rlx_backend_builtin_causal};
    rlx_backend be = {&gpu};
    toy t;
    rlx_error err = {0};
    ASSERT_MSG(toy_open(&t, true, 1, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_backend_check_plan(&be, &t.p, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "vulkan") && (strstr(err.msg, "'softplus'") || strstr(err.msg, "'ssm_conv'") ||
               strstr(err.msg, "'cols'")), "%s", err.msg);
    toy_close(&t);

    rlx_graph g;
    rlx_graph_init(&g);
    g.n_layers = 1;
    g.kv_cols = 8;
    int e = rlx_g_weight(&g, "emb", RLX_F32, WIDTH, VOCAB, emb);
    int w = rlx_g_weight(&g, "w", RLX_F32, WIDTH, 8, emb);
    int y = rlx_g_unary(&g, RLX_OP_SIGMOID, rlx_g_matmul(&g, rlx_g_get_rows(&g, e, 1.0f), w), 0.0f);
    rlx_g_set_output(&g, rlx_g_gather(&g, y), RLX_OUTPUT_LOGITS);
    rlx_plan p;
    rlx_compile_opts o = {.max_tokens = 4, .max_outputs = 4};
    ASSERT_EQ(rlx_compile(&g, &o, &p, &err), 0);
    ASSERT(p.n_fused >= 1); /* sigmoid rides in the matmul's chain */
    ASSERT_EQ(rlx_backend_check_plan(&be, &p, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "'sigmoid'") != NULL, "%s", err.msg);
    rlx_plan_free(&p);
    rlx_graph_free(&g);

    /* the real model: refused at prepare, naming the first hybrid op of its graph */
    const char *mp = rlx_test_shared("models/synth-qwen35-tiny-f32.gguf");
    if (!mp) return;
    rlx_model *m = NULL;
    ASSERT_MSG(rlx_model_load(&m, mp, &err) == 0, "%s", err.msg);
    rlx_graph mg;
    rlx_graph_init(&mg);
    ASSERT_EQ(rlx_model_build(m, &mg, &err), 0);
    ASSERT_EQ(rlx_compile(&mg, &o, &p, &err), 0);
    static const rlx_backend_ops cuda = {.name = "cuda", .unsupported = rlx_backend_builtin_causal};
    rlx_backend cb = {&cuda};
    ASSERT_EQ(rlx_backend_check_plan(&cb, &p, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "the cuda backend does not support op 'sigmoid'") || strstr(err.msg, "op 'softplus'") ||
               strstr(err.msg, "op 'ssm_conv'"), "%s", err.msg);
    fprintf(stderr, "  %s\n", err.msg);
    rlx_plan_free(&p);
    rlx_graph_free(&mg);
    rlx_model_free(m);
}

TEST_MAIN(TEST_ENTRY(conv_matches_reference), TEST_ENTRY(delta_rule_matches_reference), TEST_ENTRY(conv_chunks_equal_steps),
          TEST_ENTRY(delta_rule_chunks_equal_steps), TEST_ENTRY(interleaved_sequences_equal_solo),
          TEST_ENTRY(refuses_batches_that_skip_positions), TEST_ENTRY(ops_validate_their_layer),
          TEST_ENTRY(gpu_backends_refuse_by_name))
