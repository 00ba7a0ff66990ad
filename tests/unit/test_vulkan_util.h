/* test_vulkan_util.h - helpers of the GPU backend tests (Vulkan, CUDA): small random graphs
 * run on the CPU backend and on a GPU backend, with the largest difference reported relative
 * to the largest CPU value. A GPU test file defines GPU_BACKEND ("vulkan" or "cuda") before
 * including this. Header-only; every function is static. */
#ifndef RLX_TEST_VULKAN_UTIL_H
#define RLX_TEST_VULKAN_UTIL_H

#include "backends/backend.h"
#include "backends/quant.h"
#include "tests/rlx_test.h"

#ifndef GPU_BACKEND
#define GPU_BACKEND "vulkan"
#endif

#define VT_MAX_T 64
#define VT_UNUSED __attribute__((unused)) /* helpers not every test file calls */

typedef struct vt_case {
    rlx_graph g;
    rlx_plan plan;
    bool compiled, no_fusion;
    int32_t max_tokens;
    void *wdata[96];
    int n_wdata;
    uint64_t rng;
    int32_t n_tokens, tokens[VT_MAX_T], pos[VT_MAX_T], seq[VT_MAX_T];
    uint8_t out[VT_MAX_T];
    int32_t blocks_needed;      /* positions the single sequence's block table must cover */
    int kv_type;
    rlx_kv_geometry geo;
    rlx_backend *cpu;
} vt_case;

/* Opens the GPU backend `vk` or skips the test when the build or machine has none. */
#define VK_OPEN_OR_SKIP() \
    rlx_backend *vk = NULL; \
    do { rlx_error e_ = {0}; rlx_backend_config c_ = {.name = GPU_BACKEND}; \
         int rc_ = rlx_backend_create(&vk, &c_, &e_); \
         if (rc_ == RLX_EUNSUPPORTED) SKIP("no " GPU_BACKEND " device: %s", e_.msg); \
         ASSERT_MSG(rc_ == 0, "%s", e_.msg); } while (0)
#define VK_CLOSE() rlx_backend_destroy(vk)

static inline float vt_rand(vt_case *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return (float)((c->rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void vt_init(vt_case *c, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    rlx_graph_init(&c->g);
    c->rng = 0x9E3779B97F4A7C15ull * (seed + 1);
    c->max_tokens = 32;
    c->kv_type = RLX_F32;
}

static void vt_free(vt_case *c)
{
    if (c->compiled) rlx_plan_free(&c->plan);
    rlx_graph_free(&c->g);
    for (int i = 0; i < c->n_wdata; i++) free(c->wdata[i]);
    rlx_backend_destroy(c->cpu);
    memset(c, 0, sizeof *c);
}

/* A random weight of ne1 rows of ne0 values in [-scale, scale], stored as `type`. */
static int vt_weight(vt_case *c, int type, int64_t ne0, int64_t ne1, float scale)
{
    size_t rb = rlx_row_bytes(type, ne0);
    uint8_t *data = malloc(rb * (size_t)ne1);
    float *row = malloc((size_t)ne0 * sizeof *row);
    for (int64_t r = 0; r < ne1; r++) {
        for (int64_t i = 0; i < ne0; i++) row[i] = vt_rand(c) * scale;
        rlx_quantize_row(type, row, data + (size_t)r * rb, ne0);
    }
    free(row);
    c->wdata[c->n_wdata++] = data;
    return rlx_g_weight(&c->g, "w", type, ne0, ne1, data);
}

/* An f32 vector of n values in [lo, hi] (rope frequency factors). */
VT_UNUSED static int vt_weight_pos(vt_case *c, int64_t n, float lo, float hi)
{
    float *data = malloc((size_t)n * sizeof *data);
    for (int64_t i = 0; i < n; i++) data[i] = lo + (hi - lo) * (vt_rand(c) * 0.5f + 0.5f);
    c->wdata[c->n_wdata++] = data;
    return rlx_g_weight(&c->g, "ff", RLX_F32, n, 1, data);
}

/* T tokens of one sequence at positions 0..T-1, every one an output. */
static void vt_batch_linear(vt_case *c, int32_t T, int32_t vocab)
{
    c->n_tokens = T;
    for (int32_t i = 0; i < T; i++) {
        c->tokens[i] = (int32_t)((vt_rand(c) * 0.5f + 0.5f) * (float)vocab) % vocab;
        c->pos[i] = i;
        c->seq[i] = 0;
        c->out[i] = 1;
    }
    c->blocks_needed = T;
}

static int vt_prepare(vt_case *c, rlx_backend *be, rlx_error *err)
{
    if (!c->compiled) {
        rlx_compile_opts o = {.max_tokens = c->max_tokens, .max_outputs = c->max_tokens, .no_fusion = c->no_fusion};
        int rc = rlx_compile(&c->g, &o, &c->plan, err);
        if (rc) return rc;
        c->compiled = true;
    }
    if (!c->geo.n_layers) {
        c->geo = (rlx_kv_geometry){c->g.n_layers > 0 ? c->g.n_layers : 1, c->g.kv_cols > 0 ? c->g.kv_cols : 8,
                                   (c->blocks_needed + 15) / 16 + 1, 16, c->kv_type};
    }
    c->geo.type = c->kv_type;
    int rc = be->ops->prepare(be, &c->plan, err);
    return rc ? rc : be->ops->kv_init(be, &c->geo, err);
}

/* Runs the single-sequence batch of c on be (prepared here); logits to out if non-NULL. */
static int vt_run_one(vt_case *c, rlx_backend *be, float *out, rlx_error *err)
{
    int rc = vt_prepare(c, be, err);
    if (rc) return rc;
    int32_t table[128];
    for (int32_t i = 0; i < c->geo.n_blocks && i < 128; i++) table[i] = i;
    rlx_batch_seq bs = {table, c->geo.n_blocks};
    rlx_batch b = {c->n_tokens, c->tokens, c->pos, c->seq, c->out, c->n_tokens, 1, &bs};
    static float sink[VT_MAX_T * 4096];
    return be->ops->run(be, &c->plan, &b, out ? out : sink, err);
}

static double vt_diff(const float *a, const float *ref, size_t n)
{
    double worst = 0, maxabs = 1e-30;
    for (size_t i = 0; i < n; i++) {
        maxabs = fmax(maxabs, fabs(ref[i]));
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= worst)) worst = d; /* NaN counts as worst */
    }
    return worst / maxabs;
}

/* Largest difference GPU vs CPU relative to max |CPU value|; a failure to run is 1e9. */
static double vt_compare(vt_case *c, rlx_backend *gpu, double tol)
{
    rlx_error err = {0};
    if (!c->cpu && rlx_backend_cpu_create(&c->cpu, 2, &err)) return 1e9;
    int64_t cols = c->g.tensors[c->g.output].cols;
    size_t n = (size_t)c->n_tokens * (size_t)cols;
    float *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
    double d = 1e9;
    if (vt_run_one(c, c->cpu, b, &err)) fprintf(stderr, "  cpu: %s\n", err.msg);
    else if (vt_run_one(c, gpu, a, &err)) fprintf(stderr, "  " GPU_BACKEND ": %s\n", err.msg);
    else d = vt_diff(a, b, n);
    if (d > tol) fprintf(stderr, "  relative difference %g (tol %g)\n", d, tol);
    free(a);
    free(b);
    return d;
}

/* Two layers of q/k/v projections + NEOX rope + attention; head counts, window and softcap
 * as given. Output: the second attention's rows. */
static void vt_attention_graph(vt_case *c, int nh, int nkv, int hd, int window, float softcap)
{
    int64_t d = 64;
    int E = vt_weight(c, RLX_F32, d, 40, 1.0f);
    int x = rlx_g_get_rows(&c->g, E, 0.0f), a = -1;
    c->g.n_layers = 2;
    c->g.kv_cols = (int64_t)nkv * hd;
    for (int l = 0; l < 2; l++) {
        int q = rlx_g_matmul(&c->g, x, vt_weight(c, RLX_F32, d, (int64_t)nh * hd, 0.3f));
        int k = rlx_g_matmul(&c->g, x, vt_weight(c, RLX_F32, d, (int64_t)nkv * hd, 0.3f));
        int v = rlx_g_matmul(&c->g, x, vt_weight(c, RLX_F32, d, (int64_t)nkv * hd, 1.0f));
        for (int which = 0; which < 2; which++) {
            int *t = which ? &k : &q;
            *t = rlx_g_node(&c->g, RLX_OP_ROPE, RLX_ROWS_TOKENS, (which ? nkv : nh) * hd, *t, -1, -1);
            rlx_node *n = rlx_g_last(&c->g);
            n->ip[0] = which ? nkv : nh; n->ip[1] = hd; n->ip[2] = hd; n->ip[3] = RLX_ROPE_NEOX;
            n->fp[0] = 10000.0f;
        }
        a = rlx_g_node(&c->g, RLX_OP_ATTENTION, RLX_ROWS_TOKENS, (int64_t)nh * hd, q, k, v);
        rlx_node *n = rlx_g_last(&c->g);
        n->ip[0] = l; n->ip[1] = nh; n->ip[2] = nkv; n->ip[3] = hd; n->ip[4] = window;
        n->fp[0] = 1.0f / sqrtf((float)hd);
        n->fp[1] = softcap;
        x = rlx_g_add(&c->g, rlx_g_matmul(&c->g, a, vt_weight(c, RLX_F32, (int64_t)nh * hd, d, 0.3f)), x);
    }
    c->g.output = rlx_g_node(&c->g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, (int64_t)nh * hd, a, -1, -1);
}

/* Three steps over two sequences with block size 4 and scattered blocks: a prefill of 7 + 5
 * tokens, one decode each, then a 6-token chunk of sequence 0 with a decode of sequence 1.
 * Returns the worst relative difference over all steps. */
static double vt_compare_attention(vt_case *c, rlx_backend *gpu)
{
    static const int32_t t0[] = {5, 1, 8, 3}, t1[] = {0, 7, 2, 9};
    rlx_batch_seq seqs[2] = {{t0, 4}, {t1, 4}};
    rlx_error err = {0};
    if (!c->cpu && rlx_backend_cpu_create(&c->cpu, 2, &err)) return 1e9;
    c->blocks_needed = 16;
    c->geo = (rlx_kv_geometry){2, c->g.kv_cols, 12, 4, c->kv_type};
    double worst = 0;
    rlx_backend *bes[2] = {c->cpu, gpu};
    for (int i = 0; i < 2; i++)
        if (vt_prepare(c, bes[i], &err)) { fprintf(stderr, "  prepare: %s\n", err.msg); return 1e9; }
    int32_t ids[16], pos[16], seq[16];
    uint8_t out[16];
    int64_t cols = c->g.tensors[c->g.output].cols;
    float *lg[2] = {malloc(16 * (size_t)cols * 4), malloc(16 * (size_t)cols * 4)};
    for (int step = 0; step < 3; step++) {
        int n = 0;
        int n0 = step == 0 ? 7 : step == 1 ? 1 : 6, p0 = step == 0 ? 0 : step == 1 ? 7 : 8;
        int n1 = step == 0 ? 5 : 1, p1 = step == 0 ? 0 : step == 1 ? 5 : 6;
        for (int i = 0; i < n0; i++, n++) { ids[n] = (7 * n + step) % 40; pos[n] = p0 + i; seq[n] = 0; out[n] = 1; }
        for (int i = 0; i < n1; i++, n++) { ids[n] = (11 * n + 3 * step) % 40; pos[n] = p1 + i; seq[n] = 1; out[n] = 1; }
        rlx_batch b = {n, ids, pos, seq, out, n, 2, seqs};
        for (int i = 0; i < 2; i++)
            if (bes[i]->ops->run(bes[i], &c->plan, &b, lg[i], &err)) {
                fprintf(stderr, "  %s run: %s\n", bes[i]->ops->name, err.msg);
                worst = 1e9;
            }
        double d = vt_diff(lg[1], lg[0], (size_t)n * (size_t)cols);
        if (d > worst) worst = d;
    }
    free(lg[0]);
    free(lg[1]);
    if (worst > 1e-4) fprintf(stderr, "  attention: relative difference %g\n", worst);
    return worst;
}

/* ---- GELU against the CPU, value by value ---------------------------------------------------
 * GELU rounds its input and output through f16 as ggml's table does (cpu_ops.c), so a GPU gives
 * the same f16 values except where its exp/tanh error straddles an f16 rounding boundary: counts
 * the values that differ (*differ of *n) and the largest difference in f16 steps. Inputs span
 * [-12, 12]; fused: GELU after an f32 matmul (beyond +-10 GELU passes the float product through,
 * which may differ in its last bits). */
VT_UNUSED static int vt_gelu_against_cpu(rlx_backend *gpu, int fused, size_t *differ, size_t *n, double *worst_steps)
{
    vt_case c;
    vt_init(&c, 5);
    int E = vt_weight(&c, RLX_F32, 256, 40, 12.0f), W = vt_weight(&c, RLX_F32, 256, 256, 0.2f);
    int x = rlx_g_get_rows(&c.g, E, 0.0f);
    if (fused) x = rlx_g_matmul(&c.g, x, W);
    x = rlx_g_unary(&c.g, RLX_OP_GELU, x, 0.0f);
    c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, 256, x, -1, -1);
    vt_batch_linear(&c, 20, 40);
    *n = (size_t)c.n_tokens * 256;
    float *a = calloc(*n, 4), *b = calloc(*n, 4);
    rlx_error err = {0};
    int rc = rlx_backend_cpu_create(&c.cpu, 2, &err);
    if (!rc) rc = vt_run_one(&c, c.cpu, b, &err);
    if (!rc) rc = vt_run_one(&c, gpu, a, &err);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    *differ = 0;
    *worst_steps = 0;
    for (size_t i = 0; !rc && i < *n; i++) {
        if (a[i] == b[i]) continue;
        if (fabs(b[i]) >= 10.0 && fabs(a[i] - b[i]) <= 1e-5 * fabs(b[i])) continue;
        (*differ)++;
        double step = ldexp(1.0, (fabs(b[i]) < 6.1e-5 ? -14 : ilogb(b[i])) - 10); /* at b's magnitude */
        *worst_steps = fmax(*worst_steps, fabs((double)a[i] - b[i]) / step);
    }
    free(a);
    free(b);
    vt_free(&c);
    return rc;
}

/* ---- Q8_0 KV cache, against a scalar reference of its layout -------------------------------
 * Each token's K and V row (kv_cols values) is kv_cols / 32 rlx_block_q8_0 (f16 scale, 32 int8)
 * quantized as quant.c's Q8_0 quantizer, in the same block/slot arrangement as F16; attention
 * reads the dequantized values (q and p unrounded, as for an f32 pool). q, k and v come
 * straight from get_rows here, so the reference knows them exactly. */

typedef struct q8_ref {
    int nh, nkv, hd, window;
    float softcap;
    int64_t kvc;
    size_t rb;            /* row bytes */
    uint8_t *K, *V;       /* pool: [12 blocks * 4 slots][rb] */
    const float *Eq, *Ek, *Ev;
} q8_ref;

VT_UNUSED static void q8_ref_step(q8_ref *r, const rlx_batch *b, float *y)
{
    const int32_t bs = 4;
    for (int32_t t = 0; t < b->n_tokens; t++) { /* the batch's K/V first, as the backends do */
        const rlx_batch_seq *s = &b->seqs[b->seq[t]];
        size_t slot = (size_t)s->blocks[b->pos[t] / bs] * bs + (size_t)(b->pos[t] % bs);
        rlx_quantize_row(RLX_Q8_0, r->Ek + (size_t)b->tokens[t] * r->kvc, r->K + slot * r->rb, r->kvc);
        rlx_quantize_row(RLX_Q8_0, r->Ev + (size_t)b->tokens[t] * r->kvc, r->V + slot * r->rb, r->kvc);
    }
    float *kr = malloc((size_t)r->kvc * 4), *vr = malloc((size_t)r->kvc * 4), *sc = malloc(64 * 4);
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const rlx_batch_seq *s = &b->seqs[b->seq[t]];
        int32_t p = b->pos[t], j0 = r->window > 0 && p - r->window + 1 > 0 ? p - r->window + 1 : 0;
        for (int h = 0; h < r->nh; h++) {
            const float *q = r->Eq + (size_t)b->tokens[t] * (size_t)(r->nh * r->hd) + (size_t)h * r->hd;
            int hk = h / (r->nh / r->nkv);
            float mx = -INFINITY, acc[64] = {0};
            for (int32_t j = j0; j <= p; j++) {
                size_t slot = (size_t)s->blocks[j / bs] * bs + (size_t)(j % bs);
                rlx_dequantize_row(RLX_Q8_0, r->K + slot * r->rb, kr, r->kvc);
                float d = 0.0f;
                for (int i = 0; i < r->hd; i++) d += q[i] * kr[hk * r->hd + i];
                if (r->softcap > 0.0f) d = r->softcap * tanhf(d * (1.0f / r->softcap));
                d *= 1.0f / sqrtf((float)r->hd);
                sc[j - j0] = d;
                mx = fmaxf(mx, d);
            }
            double sum = 0.0;
            for (int32_t j = j0; j <= p; j++) sum += (double)(sc[j - j0] = expf(sc[j - j0] - mx));
            float inv = (float)(1.0 / sum);
            for (int32_t j = j0; j <= p; j++) {
                size_t slot = (size_t)s->blocks[j / bs] * bs + (size_t)(j % bs);
                rlx_dequantize_row(RLX_Q8_0, r->V + slot * r->rb, vr, r->kvc);
                float pj = sc[j - j0] * inv;
                for (int i = 0; i < r->hd; i++) acc[i] += pj * vr[hk * r->hd + i];
            }
            memcpy(y + ((size_t)t * r->nh + (size_t)h) * r->hd, acc, (size_t)r->hd * 4);
        }
    }
    free(kr);
    free(vr);
    free(sc);
}

#define VT_Q8_CASES 4

/* Case ci (heads, KV heads, head size, window, softcap) over four steps of two sequences with
 * scattered blocks: *worst relative difference from the reference, *same whether every block of
 * the GPU's pool holds the reference's bytes. Non-zero when it could not run. */
VT_UNUSED static int vt_q8_kv_case(rlx_backend *gpu, int ci, double *worst, bool *same)
{
    static const struct { int nh, nkv, hd, window; float cap; } cases[VT_Q8_CASES] = {
        {4, 2, 32, 0, 0.0f}, {2, 1, 64, 5, 30.0f}, {6, 3, 32, 0, 0.0f}, {2, 1, 32, 3, 0.0f}};
    vt_case c;
    vt_init(&c, 11 + (uint64_t)ci);
    q8_ref r = {cases[ci].nh, cases[ci].nkv, cases[ci].hd, cases[ci].window, cases[ci].cap, 0, 0, NULL, NULL, NULL, NULL, NULL};
    r.kvc = (int64_t)r.nkv * r.hd;
    r.rb = (size_t)(r.kvc / 32) * 34;
    int Eq = vt_weight(&c, RLX_F32, r.nh * r.hd, 40, 1.0f), Ek = vt_weight(&c, RLX_F32, r.kvc, 40, 1.0f);
    int Ev = vt_weight(&c, RLX_F32, r.kvc, 40, 2.0f);
    r.Eq = c.g.tensors[Eq].data;
    r.Ek = c.g.tensors[Ek].data;
    r.Ev = c.g.tensors[Ev].data;
    c.g.n_layers = 1;
    c.g.kv_cols = r.kvc;
    int a = rlx_g_node(&c.g, RLX_OP_ATTENTION, RLX_ROWS_TOKENS, (int64_t)r.nh * r.hd, rlx_g_get_rows(&c.g, Eq, 0.0f),
                       rlx_g_get_rows(&c.g, Ek, 0.0f), rlx_g_get_rows(&c.g, Ev, 0.0f));
    rlx_node *n = rlx_g_last(&c.g);
    n->ip[0] = 0; n->ip[1] = r.nh; n->ip[2] = r.nkv; n->ip[3] = r.hd; n->ip[4] = r.window;
    n->fp[0] = 1.0f / sqrtf((float)r.hd);
    n->fp[1] = r.softcap;
    c.g.output = rlx_g_node(&c.g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, (int64_t)r.nh * r.hd, a, -1, -1);
    c.kv_type = RLX_Q8_0;
    c.geo = (rlx_kv_geometry){1, r.kvc, 12, 4, RLX_Q8_0};
    rlx_error err = {0};
    int rc = vt_prepare(&c, gpu, &err);
    r.K = calloc(48, r.rb);
    r.V = calloc(48, r.rb);
    static const int32_t t0[] = {5, 1, 8, 3}, t1[] = {0, 7, 2, 9};
    rlx_batch_seq seqs[2] = {{t0, 4}, {t1, 4}};
    size_t cols = (size_t)r.nh * r.hd;
    float *got = malloc(16 * cols * 4), *want = malloc(16 * cols * 4);
    *worst = 0;
    for (int step = 0; step < 4 && !rc; step++) { /* prefill 7 + 5, decodes, a chunk with a decode, decodes */
        int32_t ids[16], pos[16], seq[16];
        uint8_t out[16];
        static const int n0s[] = {7, 1, 6, 1}, p0s[] = {0, 7, 8, 14}, n1s[] = {5, 1, 1, 1}, p1s[] = {0, 5, 6, 7};
        int nt = 0;
        for (int i = 0; i < n0s[step]; i++, nt++) { ids[nt] = (7 * nt + step) % 40; pos[nt] = p0s[step] + i; seq[nt] = 0; out[nt] = 1; }
        for (int i = 0; i < n1s[step]; i++, nt++) { ids[nt] = (11 * nt + 3 * step) % 40; pos[nt] = p1s[step] + i; seq[nt] = 1; out[nt] = 1; }
        rlx_batch b = {nt, ids, pos, seq, out, nt, 2, seqs};
        if ((rc = gpu->ops->run(gpu, &c.plan, &b, got, &err))) break;
        q8_ref_step(&r, &b, want);
        *worst = fmax(*worst, vt_diff(got, want, (size_t)nt * cols));
    }
    uint8_t *kb = malloc(4 * r.rb), *vb = malloc(4 * r.rb);
    *same = !rc;
    for (int32_t blk = 0; blk < 12 && !rc; blk++) {
        if ((rc = gpu->ops->kv_read_block(gpu, 0, blk, kb, vb, &err))) break;
        *same &= !memcmp(kb, r.K + (size_t)blk * 4 * r.rb, 4 * r.rb) && !memcmp(vb, r.V + (size_t)blk * 4 * r.rb, 4 * r.rb);
    }
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    free(kb); free(vb); free(got); free(want); free(r.K); free(r.V);
    vt_free(&c);
    return rc;
}

#endif
