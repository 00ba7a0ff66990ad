/* test_cpu_attention.c - the CPU attention over the paged KV cache, on every kernel path (forced
 * like RLX_CPU_PATH does): for F16 and F32 caches, grouped heads, head_dim not a multiple of the
 * vector width, softcap and sliding window, the output agrees with a double-precision
 * computation, and a sequence's rows do not depend on the other sequences of the batch, bit for
 * bit. Paths differ from each other in float order by design (each follows llama.cpp's build
 * for that ISA: tests/unit/test_cpu_float_order.c checks the products). Q8_0 caches (head
 * slices that start inside a 32-column block included) are held to the same, against double
 * precision over the quantized K/V values. */
#include "tests/rlx_test.h"
#include "backends/backend.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/quant.h"

#include <math.h>

#define VOCAB 32
#define BS 16

typedef struct cfg { int nh, nkv, hd, window; float cap; int kv_type; } cfg;

static float wq[VOCAB * 12 * 80], wk[VOCAB * 12 * 80], wv[VOCAB * 12 * 80];

static void fill(float *w, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        w[i] = (float)((int)(seed >> 9) % 2001 - 1000) / 400.0f;
    }
}

static void build(rlx_graph *g, const cfg *c)
{
    rlx_graph_init(g);
    int q = rlx_g_get_rows(g, rlx_g_weight(g, "q", RLX_F32, c->nh * c->hd, VOCAB, wq), 1.0f);
    int k = rlx_g_get_rows(g, rlx_g_weight(g, "k", RLX_F32, c->nkv * c->hd, VOCAB, wk), 1.0f);
    int v = rlx_g_get_rows(g, rlx_g_weight(g, "v", RLX_F32, c->nkv * c->hd, VOCAB, wv), 1.0f);
    const rlx_attn_params ap = {.layer = 0, .n_head = c->nh, .n_head_kv = c->nkv, .head_dim = c->hd, .window = c->window,
                                .scale = 1.0f / sqrtf((float)c->hd), .softcap = c->cap};
    int a = rlx_g_attention(g, q, k, v, &ap);
    g->output = rlx_g_node(g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, c->nh * c->hd, a, -1, -1);
    g->n_layers = 1;
    g->kv_cols = c->nkv * c->hd;
}

/* The graph of c compiled for 32 tokens on a 2-thread CPU backend with a KV pool of n_blocks
 * blocks; nonzero (reported) on failure, with everything released. */
static int open_cpu(const cfg *c, int n_blocks, rlx_graph *g, rlx_plan *p, rlx_backend **be, rlx_error *err)
{
    build(g, c);
    rlx_compile_opts o = {.max_tokens = 32, .max_outputs = 32};
    if (rlx_compile(g, &o, p, err)) {
        fprintf(stderr, "%s\n", err->msg);
        rlx_graph_free(g);
        return -1;
    }
    int rc = rlx_backend_cpu_create(be, 2, err);
    if (!rc) rc = (*be)->ops->prepare(*be, p, err);
    rlx_mem_desc geo = {1, c->nkv * c->hd, n_blocks, BS, c->kv_type, NULL, 0};
    if (!rc) rc = (*be)->ops->mem_init(*be, &geo, err);
    if (rc) {
        fprintf(stderr, "setup: %s\n", err->msg);
        rlx_backend_destroy(*be);
        rlx_plan_free(p);
        rlx_graph_free(g);
    }
    return rc;
}

/* Releases what open_cpu made; returns rc, reported when nonzero. */
static int close_cpu(int rc, const rlx_error *err, rlx_graph *g, rlx_plan *p, rlx_backend *be)
{
    if (rc) fprintf(stderr, "run: %s\n", err->msg);
    rlx_backend_destroy(be);
    rlx_plan_free(p);
    rlx_graph_free(g);
    return rc;
}

/* Two sequences (21 and 9 tokens) in one prefill batch, or only `only` (0/1) in its own batch,
 * then one decode token of sequence 0 when both are present. out gets every output row. */
/* pair: the decode step also carries a prompt token of sequence 0 at position 22 (explicit
 * rlx_batch.decode), so the decode row takes the transposed-V product instead of the row-major
 * one; causality means its output must not change. */
static int run_ex(const cfg *c, int only, float *out, int *n_rows, bool pair)
{
    rlx_graph g;
    rlx_plan p;
    rlx_backend *be = NULL;
    rlx_error err = {0};
    if (open_cpu(c, 4, &g, &p, &be, &err)) return -1;
    int rc = 0;
    int32_t blocks0[2] = {3, 0}, blocks1[1] = {1};
    rlx_batch_seq seqs[2] = {{blocks0, 2, -1}, {blocks1, 1, -1}};
    int32_t tok[32], pos[32], seq[32];
    uint8_t outm[32];
    int n = 0;
    for (int s = 0; s < 2; s++) {
        if (only >= 0 && s != only) continue;
        int len = s ? 9 : 21;
        for (int i = 0; i < len; i++, n++) {
            tok[n] = (i * 7 + s * 5 + 3) % VOCAB;
            pos[n] = i;
            seq[n] = only >= 0 ? 0 : s;
            outm[n] = 1;
        }
    }
    rlx_batch b = {n, tok, pos, seq, outm, n, only >= 0 ? 1 : 2, only >= 0 ? &seqs[only] : seqs, NULL};
    if (!rc) rc = be->ops->run(be, &p, &b, out, &err);
    *n_rows = n;
    if (!rc && only < 0) {
        /* decode step: sequence 0 at position 21 sees its 21 cached positions */
        int32_t t1[2] = {11, 5}, p1[2] = {21, 22}, s1[2] = {0, 0};
        uint8_t o1[2] = {1, 1}, dec[2] = {1, 0};
        const int nd = pair ? 2 : 1;
        rlx_batch d = {nd, t1, p1, s1, o1, nd, 2, seqs, pair ? dec : NULL};
        rc = be->ops->run(be, &p, &d, out + (size_t)n * (size_t)(c->nh * c->hd), &err);
        *n_rows = n + nd;
    }
    return close_cpu(rc, &err, &g, &p, be);
}

static int run(const cfg *c, int only, float *out, int *n_rows) { return run_ex(c, only, out, n_rows, false); }

static double rnd(double x, int kv_type) { return kv_type == RLX_F16 ? rlx_f16_to_f32(rlx_f32_to_f16((float)x)) : x; }

/* a K or V row of kvc values as the cache holds it */
static void stored(const float *src, int kvc, int kv_type, float *out)
{
    if (kv_type == RLX_Q8_0) {
        rlx_block_q8_0 q[12 * 80 / 32];
        rlx_quantize_row(RLX_Q8_0, src, q, kvc);
        rlx_dequantize_row(RLX_Q8_0, q, out, kvc);
        return;
    }
    for (int i = 0; i < kvc; i++) out[i] = (float)rnd(src[i], kv_type);
}

/* attention of token (tok at pos) of a sequence whose tokens are toks[0..pos], in double */
static void reference(const cfg *c, const int32_t *toks, int pos, int tok, float *y)
{
    int kvc = c->nkv * c->hd, group = c->nh / c->nkv;
    int j0 = c->window > 0 && pos - c->window + 1 > 0 ? pos - c->window + 1 : 0;
    for (int h = 0; h < c->nh; h++) {
        const float *q = wq + (size_t)tok * (size_t)(c->nh * c->hd) + h * c->hd;
        double sc[64], mx = -INFINITY, sum = 0;
        for (int j = j0; j <= pos; j++) {
            float krow[12 * 80];
            stored(wk + (size_t)toks[j] * (size_t)kvc, kvc, c->kv_type, krow);
            const float *k = krow + (h / group) * c->hd;
            double d = 0;
            for (int i = 0; i < c->hd; i++) d += rnd(q[i], c->kv_type) * k[i];
            if (c->cap > 0) d = c->cap * tanh(d / c->cap);
            sc[j] = d / sqrt((double)c->hd);
            mx = fmax(mx, sc[j]);
        }
        for (int j = j0; j <= pos; j++) sum += (sc[j] = exp(sc[j] - mx));
        for (int i = 0; i < c->hd; i++) {
            double acc = 0;
            for (int j = j0; j <= pos; j++) {
                float vrow[12 * 80];
                stored(wv + (size_t)toks[j] * (size_t)kvc, kvc, c->kv_type, vrow);
                acc += sc[j] / sum * vrow[(h / group) * c->hd + i];
            }
            y[h * c->hd + i] = (float)acc;
        }
    }
}

static const cfg cfgs[] = {
    {12, 2, 80, 0, 0.0f, RLX_F16},  /* 6 heads per KV head: two passes of 4 + 2; tails of 80 */
    {12, 2, 80, 0, 0.0f, RLX_F32},
    {8, 8, 64, 5, 30.0f, RLX_F16},  /* MHA, sliding window, softcap */
    {4, 1, 128, 0, 0.0f, RLX_F16},
    {6, 2, 128, 0, 0.0f, RLX_F16},  /* 3 heads per KV head: decode K.q in a pair and a single row */
    {4, 2, 64, 3, 0.0f, RLX_F32},   /* decode K.q over an F32 cache, two rows, sliding window */
    {12, 2, 80, 0, 0.0f, RLX_Q8_0}, /* kv_cols 160: the second head starts mid-block */
    {8, 8, 64, 5, 30.0f, RLX_Q8_0},
    {4, 1, 128, 0, 0.0f, RLX_Q8_0},
};

#define MAXOUT (33 * 12 * 80)

TEST(paths_close_to_double)
{
    static float got[MAXOUT];
    fill(wq, RLX_ARRAY_LEN(wq), 1);
    fill(wk, RLX_ARRAY_LEN(wk), 2);
    fill(wv, RLX_ARRAY_LEN(wv), 3);
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512", "avx512-novnni"};
    int ran = 0;
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(paths); pi++) {
        if (!rlx_cpu_has_path(paths[pi])) { fprintf(stderr, "  (path %s not on this CPU)\n", paths[pi]); continue; }
        ASSERT_EQ(rlx_cpu_force_path(paths[pi]), 0);
        for (size_t ci = 0; ci < RLX_ARRAY_LEN(cfgs); ci++) {
            const cfg *c = &cfgs[ci];
            int cols = c->nh * c->hd, nr = 0;
            ASSERT_EQ(run(c, -1, got, &nr), 0);
            ASSERT_EQ(nr, 31);
            /* rows of sequence 0 (incl. the decode row), then sequence 1 */
            int32_t toks0[22], toks1[9];
            for (int i = 0; i < 21; i++) toks0[i] = (i * 7 + 3) % VOCAB;
            toks0[21] = 11;
            for (int i = 0; i < 9; i++) toks1[i] = (i * 7 + 8) % VOCAB;
            float y[12 * 80];
            for (int r = 0; r < nr; r++) {
                bool s1 = r >= 21 && r < 30;
                int pos = r < 21 ? r : s1 ? r - 21 : 21;
                reference(c, s1 ? toks1 : toks0, pos, s1 ? toks1[pos] : toks0[pos], y);
                for (int i = 0; i < cols; i++)
                    ASSERT_MSG(fabs(got[(size_t)r * cols + i] - y[i]) < 2e-3 * (1 + fabs(y[i])),
                               "path %s cfg %zu row %d col %d: %g vs %g", paths[pi], ci, r, i, got[(size_t)r * cols + i], y[i]);
            }
        }
        ran++;
    }
    ASSERT(ran >= 1);
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

TEST(batch_invariance)
{
    static float both[MAXOUT], alone[MAXOUT];
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512", "avx512-novnni"};
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(paths); pi++) {
        if (!rlx_cpu_has_path(paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[pi]), 0);
        for (size_t ci = 0; ci < RLX_ARRAY_LEN(cfgs); ci++) {
            const cfg *c = &cfgs[ci];
            int cols = c->nh * c->hd, nb = 0, na = 0;
            ASSERT_EQ(run(c, -1, both, &nb), 0);
            ASSERT_EQ(run(c, 1, alone, &na), 0);
            ASSERT_EQ(na, 9);
            ASSERT_MSG(memcmp(alone, both + (size_t)21 * cols, (size_t)(9 * cols) * 4) == 0, "path %s cfg %zu: sequence 1", paths[pi], ci);
            ASSERT_EQ(run(c, 0, alone, &na), 0);
            ASSERT_EQ(na, 21);
            ASSERT_MSG(memcmp(alone, both, (size_t)(21 * cols) * 4) == 0, "path %s cfg %zu: sequence 0", paths[pi], ci);
        }
    }
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

/* a one-token decode row gives the same bits whether V is read in place (the row alone in its
 * sequence) or transposed (beside a prompt row of the same sequence, as when a preempted
 * sequence is recomputed) */
TEST(decode_routes_agree)
{
    static float alone[MAXOUT], paired[MAXOUT];
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512", "avx512-novnni"};
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(paths); pi++) {
        if (!rlx_cpu_has_path(paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[pi]), 0);
        for (size_t ci = 0; ci < RLX_ARRAY_LEN(cfgs); ci++) {
            const cfg *c = &cfgs[ci];
            int cols = c->nh * c->hd, na = 0, nb = 0;
            ASSERT_EQ(run_ex(c, -1, alone, &na, false), 0);
            ASSERT_EQ(run_ex(c, -1, paired, &nb, true), 0);
            ASSERT_EQ(na, 31);
            ASSERT_EQ(nb, 32);
            ASSERT_MSG(memcmp(alone + (size_t)30 * cols, paired + (size_t)30 * cols, (size_t)cols * 4) == 0,
                       "path %s cfg %zu: the decode row depends on the route", paths[pi], ci);
        }
    }
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

/* Sequence 0 of len tokens prefilled in chunks of 32, then its decode token at position len,
 * alone or (pair) beside a prompt token at len + 1; y gets the decode row. */
static int run_long(const cfg *c, int len, bool pair, float *y)
{
    rlx_graph g;
    rlx_plan p;
    rlx_backend *be = NULL;
    rlx_error err = {0};
    if (open_cpu(c, 16, &g, &p, &be, &err)) return -1;
    int rc = 0;
    int32_t blocks[16];
    for (int i = 0; i < 16; i++) blocks[i] = (i * 5 + 3) % 16; /* scattered blocks */
    rlx_batch_seq seq = {blocks, (len + 2 + BS - 1) / BS, -1};
    static float out[32 * 12 * 80];
    int32_t tok[32], pos[32], sq[32] = {0};
    uint8_t outm[32], dec[32];
    for (int p0 = 0; !rc && p0 < len; p0 += 32) {
        const int n = len - p0 < 32 ? len - p0 : 32;
        for (int i = 0; i < n; i++) { tok[i] = ((p0 + i) * 7 + 3) % VOCAB; pos[i] = p0 + i; outm[i] = 1; }
        rlx_batch b = {n, tok, pos, sq, outm, n, 1, &seq, NULL};
        rc = be->ops->run(be, &p, &b, out, &err);
    }
    if (!rc) {
        const int nd = pair ? 2 : 1;
        tok[0] = 11; tok[1] = 5; pos[0] = len; pos[1] = len + 1; outm[0] = outm[1] = 1; dec[0] = 1; dec[1] = 0;
        rlx_batch d = {nd, tok, pos, sq, outm, nd, 1, &seq, pair ? dec : NULL};
        rc = be->ops->run(be, &p, &d, out, &err);
        memcpy(y, out, (size_t)(c->nh * c->hd) * sizeof *y);
    }
    return close_cpu(rc, &err, &g, &p, be);
}

/* kv_read_block gives backend.h's row layout whatever the pool's own (cpu_ops.h
 * rlx__cpu_kv_at: head by head inside a block): after a prefill, block 3's rows are the stored
 * K and V rows of tokens 0..15 in the cache's type; blocks written back through kv_write_block
 * elsewhere serve a decode step with the same output bit for bit (a snapshot's restore). On
 * every kernel path the host has (the decode reads the blocks through that path's products). */
static void kv_blocks_case(const cfg *c, size_t ci);

TEST(kv_blocks_in_row_layout)
{
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx2-novnni", "avx512", "avx512-novnni"};
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(paths); pi++) {
        if (!rlx_cpu_has_path(paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[pi]), 0);
        for (size_t ci = 0; ci < RLX_ARRAY_LEN(cfgs); ci++) kv_blocks_case(&cfgs[ci], ci);
    }
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

static void kv_blocks_case(const cfg *c, size_t ci)
{
    rlx_graph g;
    rlx_plan p;
    rlx_backend *be = NULL;
    rlx_error err = {0};
    ASSERT_EQ(open_cpu(c, 4, &g, &p, &be, &err), 0);
    const int kvc = c->nkv * c->hd;
    const size_t rb = rlx_kv_row_bytes(c->kv_type, kvc), bb = (size_t)BS * rb;
    int32_t blocks[2] = {3, 0}, moved[2] = {1, 2}, tok[21], pos[21], sq[21] = {0};
    uint8_t outm[21];
    for (int i = 0; i < 21; i++) { tok[i] = (i * 7 + 3) % VOCAB; pos[i] = i; outm[i] = 0; }
    outm[20] = 1;
    rlx_batch_seq seq = {blocks, 2, -1};
    rlx_batch b = {21, tok, pos, sq, outm, 1, 1, &seq, NULL};
    static float out[12 * 80], out2[12 * 80];
    ASSERT_EQ(be->ops->run(be, &p, &b, out, &err), 0);
    static uint8_t k[BS * 12 * 80 * 4], v[BS * 12 * 80 * 4], want[12 * 80 * 4];
    ASSERT_EQ(be->ops->kv_read_block(be, 0, 3, k, v, &err), 0);
    for (int i = 0; i < BS; i++)
        for (int w = 0; w < 2; w++) {
            const float *src = (w ? wv : wk) + (size_t)tok[i] * (size_t)kvc;
            if (c->kv_type == RLX_Q8_0) rlx_quantize_row(RLX_Q8_0, src, want, kvc);
            else if (c->kv_type == RLX_F16)
                for (int j = 0; j < kvc; j++) ((uint16_t *)want)[j] = rlx_f32_to_f16(src[j]);
            else memcpy(want, src, (size_t)kvc * 4);
            ASSERT_MSG(memcmp((w ? v : k) + (size_t)i * rb, want, rb) == 0, "cfg %zu: %s row %d of block 3 is not the stored row", ci,
                       w ? "V" : "K", i);
        }
    /* blocks 3, 0 -> 1, 2 through the row layout; the decode step reads the copies */
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(be->ops->kv_read_block(be, 0, blocks[i], k, v, &err), 0);
        ASSERT_EQ(be->ops->kv_write_block(be, 0, moved[i], k, v, &err), 0);
        static uint8_t k2[BS * 12 * 80 * 4], v2[BS * 12 * 80 * 4];
        ASSERT_EQ(be->ops->kv_read_block(be, 0, moved[i], k2, v2, &err), 0);
        ASSERT(memcmp(k, k2, bb) == 0 && memcmp(v, v2, bb) == 0);
    }
    int32_t t1 = 11, p1 = 21, s1 = 0;
    uint8_t o1 = 1;
    rlx_batch d = {1, &t1, &p1, &s1, &o1, 1, 1, &seq, NULL};
    ASSERT_EQ(be->ops->run(be, &p, &d, out, &err), 0);
    rlx_batch_seq seq2 = {moved, 2, -1};
    d.seqs = &seq2;
    ASSERT_EQ(be->ops->run(be, &p, &d, out2, &err), 0);
    ASSERT_MSG(memcmp(out, out2, (size_t)(c->nh * c->hd) * 4) == 0, "cfg %zu: the written blocks decode differently", ci);
    ASSERT_EQ(close_cpu(0, &err, &g, &p, be), 0);
}

/* the same at contexts over one 64-position stride (several passes per accumulator, a last
 * partial group of lanes), in scattered cache blocks */
TEST(decode_routes_agree_long_contexts)
{
    static float alone[12 * 80], paired[12 * 80];
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512", "avx512-novnni"};
    const int lens[] = {63, 64, 65, 100, 137, 200};
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(paths); pi++) {
        if (!rlx_cpu_has_path(paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[pi]), 0);
        for (size_t ci = 0; ci < RLX_ARRAY_LEN(cfgs); ci++)
            for (size_t li = 0; li < RLX_ARRAY_LEN(lens); li++) {
                const cfg *c = &cfgs[ci];
                ASSERT_EQ(run_long(c, lens[li], false, alone), 0);
                ASSERT_EQ(run_long(c, lens[li], true, paired), 0);
                ASSERT_MSG(memcmp(alone, paired, (size_t)(c->nh * c->hd) * 4) == 0,
                           "path %s cfg %zu len %d: the decode row depends on the route", paths[pi], ci, lens[li]);
            }
    }
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

/* An encoder's attention (no cache, bidirectional): two sequences of 45 and 7 tokens in one
 * batch, plus one of a single token (a decode-kind row), through c's heads; out gets every row. */
static int run_encoder(const cfg *c, float *out)
{
    rlx_graph g;
    rlx_plan p;
    rlx_backend *be = NULL;
    rlx_error err = {0};
    build(&g, c);
    if (!(g.mem = malloc(sizeof *g.mem))) return -1;
    g.mem[0] = (rlx_mem_layer){RLX_MEM_NONE, 0, 0};
    for (int i = 0; i < g.n_nodes; i++)
        if (g.nodes[i].op == RLX_OP_ATTENTION) g.nodes[i].p.attn.mask = RLX_ATTN_BIDIRECTIONAL;
    rlx_compile_opts o = {.max_tokens = 64, .max_outputs = 64};
    int rc = rlx_compile(&g, &o, &p, &err);
    if (rc) { fprintf(stderr, "%s\n", err.msg); rlx_graph_free(&g); return rc; }
    rc = rlx_backend_cpu_create(&be, 2, &err);
    rlx_mem_desc geo = {1, c->nkv * c->hd, 1, BS, RLX_F32, g.mem, 0};
    if (!rc) rc = be->ops->prepare(be, &p, &err);
    if (!rc) rc = be->ops->mem_init(be, &geo, &err);
    int32_t tok[53], pos[53], sq[53];
    uint8_t outm[53], dec[53];
    const int lens[3] = {45, 7, 1};
    for (int s = 0, n = 0; s < 3; s++)
        for (int i = 0; i < lens[s]; i++, n++) {
            tok[n] = (i * 11 + s * 5 + 1) % VOCAB;
            pos[n] = i;
            sq[n] = s;
            outm[n] = 1;
            dec[n] = lens[s] == 1;
        }
    rlx_batch_seq seqs[3] = {{NULL, 0, -1}, {NULL, 0, -1}, {NULL, 0, -1}};
    rlx_batch b = {53, tok, pos, sq, outm, 53, 3, seqs, dec};
    if (!rc) rc = be->ops->run(be, &p, &b, out, &err);
    return close_cpu(rc, &err, &g, &p, be);
}

/* K.q of an encoder's heads under 64 values runs with positions in vector lanes; its numbers are
 * the float products' (ggml_vec_dot_f32's tail), bit for bit, for heads of 8, 16, 32 and 36
 * values (36: the fused multiply-adds after the first 32) and 64 (no tail: the products), grouped
 * heads too, on every path */
TEST(encoder_kq_lanes_exact)
{
    static float lanes[53 * 12 * 80], products[53 * 12 * 80];
    fill(wq, RLX_ARRAY_LEN(wq), 4);
    fill(wk, RLX_ARRAY_LEN(wk), 5);
    fill(wv, RLX_ARRAY_LEN(wv), 6);
    const cfg enc[] = {{4, 4, 8, 0, 0.0f, RLX_F32}, {4, 4, 16, 0, 0.0f, RLX_F32}, {12, 12, 32, 0, 0.0f, RLX_F32},
                       {4, 2, 36, 0, 0.0f, RLX_F32}, {2, 2, 64, 0, 0.0f, RLX_F32}};
    const char *orig = rlx_cpu_path();
    const char *paths[] = {"scalar", "avx2", "avx512", "avx512-novnni"};
    for (size_t pi = 0; pi < RLX_ARRAY_LEN(paths); pi++) {
        if (!rlx_cpu_has_path(paths[pi])) continue;
        ASSERT_EQ(rlx_cpu_force_path(paths[pi]), 0);
        for (size_t ci = 0; ci < RLX_ARRAY_LEN(enc); ci++) {
            const size_t bytes = (size_t)53 * (size_t)(enc[ci].nh * enc[ci].hd) * sizeof(float);
            memset(lanes, 0xff, bytes);
            memset(products, 0, bytes);
            rlx__cpu_attn_kq_lanes(false);
            ASSERT_EQ(run_encoder(&enc[ci], products), 0);
            rlx__cpu_attn_kq_lanes(true);
            ASSERT_EQ(run_encoder(&enc[ci], lanes), 0);
            ASSERT_MSG(memcmp(lanes, products, bytes) == 0, "path %s head size %d: lanes and products differ", paths[pi], enc[ci].hd);
        }
    }
    ASSERT_EQ(rlx_cpu_force_path(orig), 0);
}

TEST_MAIN(TEST_ENTRY(paths_close_to_double), TEST_ENTRY(batch_invariance), TEST_ENTRY(decode_routes_agree),
          TEST_ENTRY(decode_routes_agree_long_contexts), TEST_ENTRY(kv_blocks_in_row_layout), TEST_ENTRY(encoder_kq_lanes_exact))
