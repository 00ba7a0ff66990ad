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
    rlx_mem_desc geo;
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

static inline void vt_init(vt_case *c, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    rlx_graph_init(&c->g);
    c->rng = 0x9E3779B97F4A7C15ull * (seed + 1);
    c->max_tokens = 32;
    c->kv_type = RLX_F32;
}

static inline void vt_free(vt_case *c)
{
    if (c->compiled) rlx_plan_free(&c->plan);
    rlx_graph_free(&c->g);
    for (int i = 0; i < c->n_wdata; i++) free(c->wdata[i]);
    rlx_backend_destroy(c->cpu);
    memset(c, 0, sizeof *c);
}

/* A random weight of ne1 rows of ne0 values in [-scale, scale], stored as `type`. */
static inline int vt_weight(vt_case *c, int type, int64_t ne0, int64_t ne1, float scale)
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
static inline void vt_batch_linear(vt_case *c, int32_t T, int32_t vocab)
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

static inline int vt_prepare(vt_case *c, rlx_backend *be, rlx_error *err)
{
    if (!c->compiled) {
        rlx_compile_opts o = {.max_tokens = c->max_tokens, .max_outputs = c->max_tokens, .no_fusion = c->no_fusion};
        int rc = rlx_compile(&c->g, &o, &c->plan, err);
        if (rc) return rc;
        c->compiled = true;
    }
    if (!c->geo.n_layers) {
        c->geo = (rlx_mem_desc){c->g.n_layers > 0 ? c->g.n_layers : 1, c->g.kv_cols > 0 ? c->g.kv_cols : 8,
                                   (c->blocks_needed + 15) / 16 + 1, 16, c->kv_type, NULL, 0};
    }
    c->geo.type = c->kv_type;
    int rc = be->ops->prepare(be, &c->plan, err);
    return rc ? rc : be->ops->mem_init(be, &c->geo, err);
}

/* Runs the single-sequence batch of c on be (prepared here); logits to out if non-NULL. */
static inline int vt_run_one(vt_case *c, rlx_backend *be, float *out, rlx_error *err)
{
    int rc = vt_prepare(c, be, err);
    if (rc) return rc;
    int32_t table[128];
    for (int32_t i = 0; i < c->geo.n_blocks && i < 128; i++) table[i] = i;
    rlx_batch_seq bs = {table, c->geo.n_blocks, -1};
    rlx_batch b = {c->n_tokens, c->tokens, c->pos, c->seq, c->out, c->n_tokens, 1, &bs, NULL};
    static float sink[VT_MAX_T * 4096];
    return be->ops->run(be, &c->plan, &b, out ? out : sink, err);
}

static inline double vt_diff(const float *a, const float *ref, size_t n)
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
static inline double vt_compare(vt_case *c, rlx_backend *gpu, double tol)
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
 * as given, layer l with nkv[l] KV heads (a graph memory description when they differ).
 * Output: the second attention's rows. */
static inline void vt_attention_graph_kv(vt_case *c, int nh, const int nkv_l[2], int hd, int window, float softcap)
{
    int64_t d = 64;
    int E = vt_weight(c, RLX_F32, d, 40, 1.0f);
    int x = rlx_g_get_rows(&c->g, E, 0.0f), a = -1;
    c->g.n_layers = 2;
    c->g.kv_cols = (int64_t)nkv_l[1] * hd;
    if (nkv_l[0] != nkv_l[1] && (c->g.mem = calloc(2, sizeof *c->g.mem)))
        for (int l = 0; l < 2; l++) c->g.mem[l] = (rlx_mem_layer){RLX_MEM_KV, (int64_t)nkv_l[l] * hd, 0};
    for (int l = 0; l < 2; l++) {
        int nkv = nkv_l[l];
        int q = rlx_g_matmul(&c->g, x, vt_weight(c, RLX_F32, d, (int64_t)nh * hd, 0.3f));
        int k = rlx_g_matmul(&c->g, x, vt_weight(c, RLX_F32, d, (int64_t)nkv * hd, 0.3f));
        int v = rlx_g_matmul(&c->g, x, vt_weight(c, RLX_F32, d, (int64_t)nkv * hd, 1.0f));
        for (int which = 0; which < 2; which++) {
            int *t = which ? &k : &q;
            const rlx_rope_params rp = {.n_heads = which ? nkv : nh, .head_dim = hd, .n_rot = hd, .mode = RLX_ROPE_NEOX,
                                        .freq_base = 10000.0f};
            *t = rlx_g_rope(&c->g, *t, -1, &rp);
        }
        const rlx_attn_params ap = {.layer = l, .n_head = nh, .n_head_kv = nkv, .head_dim = hd, .window = window,
                                    .scale = 1.0f / sqrtf((float)hd), .softcap = softcap};
        a = rlx_g_attention(&c->g, q, k, v, &ap);
        x = rlx_g_add(&c->g, rlx_g_matmul(&c->g, a, vt_weight(c, RLX_F32, (int64_t)nh * hd, d, 0.3f)), x);
    }
    c->g.output = rlx_g_node(&c->g, RLX_OP_GATHER, RLX_ROWS_OUTPUTS, (int64_t)nh * hd, a, -1, -1);
}

static inline void vt_attention_graph(vt_case *c, int nh, int nkv, int hd, int window, float softcap)
{
    const int nkv_l[2] = {nkv, nkv};
    vt_attention_graph_kv(c, nh, nkv_l, hd, window, softcap);
}

/* Three steps over two sequences with block size 4 and scattered blocks: a prefill of 7 + 5
 * tokens, one decode each, then a 6-token chunk of sequence 0 with a decode of sequence 1.
 * Returns the worst relative difference over all steps. */
static inline double vt_compare_attention(vt_case *c, rlx_backend *gpu)
{
    static const int32_t t0[] = {5, 1, 8, 3}, t1[] = {0, 7, 2, 9};
    rlx_batch_seq seqs[2] = {{t0, 4, -1}, {t1, 4, -1}};
    rlx_error err = {0};
    if (!c->cpu && rlx_backend_cpu_create(&c->cpu, 2, &err)) return 1e9;
    c->blocks_needed = 16;
    c->geo = (rlx_mem_desc){2, c->g.kv_cols, 12, 4, c->kv_type, c->g.mem, 0};
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
        rlx_batch b = {n, ids, pos, seq, out, n, 2, seqs, NULL};
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
    if (worst > 0) fprintf(stderr, "  attention: relative difference %g\n", worst);
    return worst;
}

#endif
