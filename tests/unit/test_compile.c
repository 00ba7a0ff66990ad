/* test_compile.c - graph compilation: fusion of elementwise chains, arena placement by
 * liveness (no two live tensors overlap), validation errors, and that a compiled plan
 * computes the same values with and without fusion on the CPU backend. */
#include "tests/rlx_test.h"
#include "backends/backend.h"

static float w_norm[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static float w_mat[8 * 8];
static float w_emb[8 * 16];

/* emb -> x; h = rms(x) * w; y = silu(h @ W) * (h @ W); out = y @ W + x; logits = gather(out) @ W */
static void build(rlx_graph *g)
{
    rlx_graph_init(g);
    for (int i = 0; i < 64; i++) w_mat[i] = (float)((i * 37) % 17 - 8) / 8.0f;
    for (int i = 0; i < 128; i++) w_emb[i] = (float)((i * 11) % 13 - 6) / 6.0f;
    int emb = rlx_g_weight(g, "emb", RLX_F32, 8, 16, w_emb);
    int wn = rlx_g_weight(g, "norm", RLX_F32, 8, 1, w_norm);
    int wm = rlx_g_weight(g, "mat", RLX_F32, 8, 8, w_mat);
    int x = rlx_g_get_rows(g, emb, 1.0f);
    int h = rlx_g_mul(g, rlx_g_rms_norm(g, x, 1e-5f), wn);
    int up = rlx_g_matmul(g, h, wm);
    int gate = rlx_g_unary(g, RLX_OP_SILU, rlx_g_matmul(g, h, wm), 0);
    int y = rlx_g_mul(g, gate, up);
    int out = rlx_g_add(g, rlx_g_matmul(g, y, wm), x);
    int o = rlx_g_node(g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 8, out, -1, -1);
    g->output = rlx_g_matmul(g, o, wm);
    g->n_layers = 1;
    g->kv_cols = 8;
}

static bool overlap(const rlx_plan *p, const rlx_graph *g, int a, int b)
{
    int64_t sa = p->offset[a], sb = p->offset[b];
    int64_t la = (int64_t)g->tensors[a].cols * 4 * (g->tensors[a].rows == RLX_ROWS_OUTPUTS ? p->max_outputs : p->max_tokens);
    int64_t lb = (int64_t)g->tensors[b].cols * 4 * (g->tensors[b].rows == RLX_ROWS_OUTPUTS ? p->max_outputs : p->max_tokens);
    return sa < sb + lb && sb < sa + la;
}

TEST(fusion_and_liveness)
{
    rlx_graph g;
    build(&g);
    rlx_plan p;
    rlx_error err = {0};
    rlx_compile_opts o = {.max_tokens = 4, .max_outputs = 2};
    ASSERT_EQ(rlx_compile(&g, &o, &p, &err), 0);
    /* rms*w, silu*up and matmul+residual each fold into their producer */
    ASSERT_EQ(p.n_fused, 4);
    ASSERT_EQ(p.n_steps, g.n_nodes - 4);
    /* tensors live at the same time never share bytes */
    for (int s = 0; s < p.n_steps; s++) {
        const rlx_step *st = &p.steps[s];
        for (int k = 0; k < RLX_NODE_MAX_IN; k++) {
            int in = st->node.in[k];
            if (in < 0 || g.tensors[in].is_weight || in == st->node.in[0]) continue;
            ASSERT(!overlap(&p, &g, in, st->out));
        }
        for (int k = 0; k < st->n_chain; k++) {
            int in = st->chain[k].operand;
            if (in >= 0 && !g.tensors[in].is_weight) ASSERT(!overlap(&p, &g, in, st->out));
        }
    }
    rlx_plan_free(&p);
    rlx_graph_free(&g);
}

TEST(fused_equals_unfused)
{
    rlx_graph g;
    build(&g);
    rlx_plan pf, pu;
    rlx_error err = {0};
    rlx_compile_opts of = {.max_tokens = 4, .max_outputs = 2}, ou = {.max_tokens = 4, .max_outputs = 2, .no_fusion = true};
    ASSERT_EQ(rlx_compile(&g, &of, &pf, &err), 0);
    ASSERT_EQ(rlx_compile(&g, &ou, &pu, &err), 0);
    ASSERT_EQ(pu.n_fused, 0);
    float lf[16], lu[16];
    for (int variant = 0; variant < 2; variant++) {
        rlx_backend *be = NULL;
        ASSERT_EQ(rlx_backend_cpu_create(&be, 2, &err), 0);
        rlx_plan *p = variant ? &pu : &pf;
        ASSERT_EQ(be->ops->prepare(be, p, &err), 0);
        rlx_mem_desc geo = {1, 8, 1, 16, RLX_F32, NULL, 0};
        ASSERT_EQ(be->ops->mem_init(be, &geo, &err), 0);
        int32_t tok[4] = {3, 1, 15, 7}, pos[4] = {0, 1, 2, 3}, seqi[4] = {0};
        uint8_t out[4] = {0, 1, 0, 1};
        int32_t blocks[1] = {0};
        rlx_batch_seq bs = {blocks, 1, -1};
        rlx_batch b = {4, tok, pos, seqi, out, 2, 1, &bs, NULL};
        ASSERT_EQ(be->ops->run(be, p, &b, variant ? lu : lf, &err), 0);
        /* an out-of-range token is an error, not a crash */
        tok[2] = 16;
        ASSERT_EQ(be->ops->run(be, p, &b, variant ? lu : lf, &err), RLX_ERANGE);
        tok[2] = 15;
        ASSERT_EQ(be->ops->run(be, p, &b, variant ? lu : lf, &err), 0);
        rlx_backend_destroy(be);
    }
    for (int i = 0; i < 16; i++) ASSERT_NEAR(lf[i], lu[i], 1e-6);
    rlx_plan_free(&pf);
    rlx_plan_free(&pu);
    rlx_graph_free(&g);
}

TEST(validation)
{
    rlx_graph g;
    rlx_graph_init(&g);
    int w = rlx_g_weight(&g, "w", RLX_F32, 8, 4, w_mat);
    int emb = rlx_g_weight(&g, "emb", RLX_F32, 6, 16, w_emb);
    int x = rlx_g_get_rows(&g, emb, 1);
    g.output = rlx_g_matmul(&g, x, w); /* 6 columns into an 8-wide weight */
    rlx_plan p;
    rlx_error err = {0};
    rlx_compile_opts o = {.max_tokens = 4, .max_outputs = 1};
    ASSERT_EQ(rlx_compile(&g, &o, &p, &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "columns") != NULL);
    o.max_tokens = 0;
    ASSERT_EQ(rlx_compile(&g, &o, &p, &err), RLX_EINVAL);
    rlx_graph_free(&g);
}

TEST_MAIN(TEST_ENTRY(fusion_and_liveness), TEST_ENTRY(fused_equals_unfused), TEST_ENTRY(validation))
