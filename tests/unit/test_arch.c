/* test_arch.c - model families beyond the golden files: Gemma 3 (no llama.cpp reference
 * exists here) built from rlxd-synth models and checked node by node and against a naive
 * forward (test_arch_ref.h), that reference itself checked on the golden-verified gemma2 file,
 * Llama 3 RoPE scaling from metadata keys, and the errors bad family metadata gets. */
#include "tests/unit/test_arch_ref.h"
#include "engine/runner.h"

#include "tests/unit/test_synth_util.h"

/* Copies src to dst without key `drop` (may be NULL), then lets edit() add keys or tensors. */
static int rewrite(const char *src, const char *dst, const char *drop, void (*edit)(rlx_gguf_writer *, void *), void *ctx)
{
    rlx_gguf *g = NULL;
    rlx_error err = {0};
    if (rlx_gguf_open(&g, src, &err)) return -1;
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    int rc = w ? 0 : -1;
    for (uint64_t i = 0; !rc && i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        if (!drop || strcmp(kv->key, drop)) rc = rlx_gguf_writer_copy_kv(w, kv);
    }
    for (uint64_t i = 0; !rc && i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        rc = rlx_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size);
    }
    if (!rc && edit) edit(w, ctx);
    if (!rc) rc = rlx_gguf_writer_write(w, dst, &err);
    if (rc) fprintf(stderr, "  rewrite %s: %s %s\n", dst, err.msg, w ? rlx_gguf_writer_last_error(w) : "");
    rlx_gguf_writer_free(w);
    rlx_gguf_close(g);
    return rc;
}

static ref_model ref_of(const rlx_model *m)
{
    const rlx_model_config *c = &m->cfg;
    return (ref_model){m->gguf, c->n_layer, c->n_embd, c->n_head, c->n_head_kv, c->head_dim, c->n_ff, c->n_vocab, c->norm_eps};
}

/* Runs tokens[0..n) on the runner (F32 KV) as a prefill of n_pre tokens and then one token per
 * decode step, and compares every position's logits with ref (n x V). Returns the largest
 * difference relative to max(1, max |ref|). */
static double run_vs_ref(rlx_runner *r, const int32_t *tok, int n, int n_pre, const float *ref)
{
    int32_t *table = NULL, nb = 0, cap = 0, pos[128], seq[128] = {0};
    uint8_t outf[128];
    double maxabs = 1.0, worst = 0.0;
    const int V = r->n_vocab;
    for (size_t i = 0; i < (size_t)n * V; i++) maxabs = fmax(maxabs, fabs(ref[i]));
    if (n > 128 || rlx_runner_reserve(r, &table, &nb, &cap, n)) { free(table); return INFINITY; }
    rlx_batch_seq bs = {table, nb, -1};
    rlx_error err = {0};
    for (int i = 0; i < n; i++) { pos[i] = i; outf[i] = 1; }
    for (int start = 0; start < n;) {
        int len = start == 0 ? n_pre : 1;
        rlx_batch b = {len, tok + start, pos + start, seq, outf, len, 1, &bs, NULL};
        if (rlx_runner_forward(r, &b, &err)) { fprintf(stderr, "  forward: %s\n", err.msg); worst = INFINITY; break; }
        for (size_t i = 0; i < (size_t)len * V; i++) {
            float v = r->logits[i];
            if (!isfinite(v)) { worst = INFINITY; break; }
            worst = fmax(worst, fabs(v - ref[(size_t)start * V + i]) / maxabs);
        }
        start += len;
    }
    for (int32_t i = 0; i < nb; i++) rlx_kv_release(&r->kv, table[i]);
    free(table);
    return worst;
}

static void tokens(int32_t *t, int n, int V, uint32_t seed)
{
    for (int i = 0; i < n; i++) { seed = seed * 1664525u + 1013904223u; t[i] = (int32_t)((seed >> 8) % (uint32_t)V); }
}

static rlx_runner *open_runner(const char *path)
{
    rlx_runner_config cfg = {.model_path = path, .kv_type = RLX_F32, .kv_type_set = true, .n_ctx = 128,
                             .max_batch_tokens = 64, .max_outputs = 64, .backend = {.n_threads = 2}};
    rlx_runner *r = NULL;
    rlx_error err = {0};
    if (rlx_runner_open(&r, &cfg, &err)) fprintf(stderr, "  %s: %s\n", path, err.msg);
    return r;
}

/* Gemma 3, 7 layers: layers 0-4 and 6 slide (window 32, RoPE base 10000), layer 5 is global
 * (base 1e6); Q/K head norms; Q pre-scaled by 1/sqrt(32); no soft-capping. */
#define GEMMA3_ARGS "--arch gemma3 --layers 7 --head-dim 32 --seed 7"

TEST(gemma3_graph)
{
    char path[512];
    if (!synth(GEMMA3_ARGS, "gemma3.gguf", path, sizeof path)) SKIP("rlxd-synth is not built or failed");
    rlx_model *m = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_model_load(&m, path, &err) == 0, "%s", err.msg);
    rlx_graph g;
    rlx_graph_init(&g);
    int rc = rlx_model_build(m, &g, &err);
    int n_attn = 0, n_rope = 0, n_head_norm = 0, n_softcap = 0, n_scale = 0, bad = 0;
    for (int i = 0; rc == 0 && i < g.n_nodes; i++) {
        const rlx_node *n = &g.nodes[i];
        if (n->op == RLX_OP_ATTENTION) {
            bool global = n->p.attn.layer == 5;
            if (n->p.attn.window != (global ? 0 : 32) || n->p.attn.scale != 1.0f || n->p.attn.softcap != 0.0f ||
                n->p.attn.mask != RLX_ATTN_CAUSAL) bad++;
            n_attn++;
        } else if (n->op == RLX_OP_ROPE) {
            /* two ROPE nodes per layer, in layer order */
            bool global = n_rope / 2 == 5;
            if (n->p.rope.freq_base != (global ? 1e6f : 1e4f) || n->p.rope.mode != RLX_ROPE_NEOX || n->p.rope.freq_scale != 1.0f) bad++;
            n_rope++;
        } else if (n->op == RLX_OP_SCALE) {
            if (fabsf(n->p.scalar.value - 1.0f / sqrtf(32.0f)) > 1e-7f) bad++;
            n_scale++;
        }
        n_head_norm += n->op == RLX_OP_HEAD_NORM;
        n_softcap += n->op == RLX_OP_SOFTCAP;
    }
    rlx_graph_free(&g);
    rlx_model_free(m);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT_EQ(n_attn, 7);
    ASSERT_EQ(n_rope, 14);
    ASSERT_EQ(n_scale, 7);
    ASSERT_EQ(n_head_norm, 14);
    ASSERT_EQ(n_softcap, 0);
    ASSERT_EQ(bad, 0);
}

TEST(gemma3_forward_matches_reference)
{
    char path[512];
    if (!synth(GEMMA3_ARGS, "gemma3.gguf", path, sizeof path)) SKIP("rlxd-synth is not built or failed");
    rlx_runner *r = open_runner(path);
    ASSERT(r);
    /* 40 prompt tokens then 8 decode steps: positions beyond the window of 32 */
    enum { N = 48, PRE = 40 };
    int32_t tok[N];
    tokens(tok, N, r->n_vocab, 3);
    ref_model rm = ref_of(r->model);
    ref_family f = {.qk_norm = true, .post_norms = true, .gelu = true, .embd_scale = true, .neox = true, .scale_q = true,
                    .swa_period = 6, .window = 32, .rope_base = 1e6f, .rope_base_swa = 1e4f};
    float *ref = malloc((size_t)N * rm.V * sizeof(float));
    bool ok = ref && ref_forward(&rm, &f, tok, N, ref);
    double worst = ok ? run_vs_ref(r, tok, N, PRE, ref) : INFINITY;
    /* the same reference with every layer global must disagree, or the window is not exercised */
    f.window = 0;
    double no_swa = ok && ref_forward(&rm, &f, tok, N, ref) ? run_vs_ref(r, tok, N, PRE, ref) : 0.0;
    free(ref);
    rlx_runner_close(r);
    ASSERT_MSG(ok, "reference forward: a weight is missing or not f32");
    /* 1e-3: an input that differs in the last bit can cross an f16 step of the GELU table; the
     * wrong readings measured here (rope base, window 31/33, all layers sliding) are >= 8e-2 off */
    ASSERT_MSG(worst < 1e-3, "logits differ from the reference by %.3g of max|logit|", worst);
    ASSERT_MSG(no_swa > 1e-2, "logits do not depend on the sliding window (%.3g)", no_swa);
}

/* Two sequences in one batch (interleaved prefill, then joint decode steps past the window)
 * give each sequence the logits it gets alone: windows and positions are per sequence. */
TEST(gemma3_two_sequences_batched)
{
    char path[512];
    if (!synth(GEMMA3_ARGS, "gemma3.gguf", path, sizeof path)) SKIP("rlxd-synth is not built or failed");
    rlx_runner *r = open_runner(path);
    ASSERT(r);
    enum { NA = 42, NB = 36, PA = 34, PB = 28 };
    const int n[2] = {NA, NB}, pre[2] = {PA, PB};
    int32_t toks[2][NA];
    tokens(toks[0], NA, r->n_vocab, 21);
    tokens(toks[1], NB, r->n_vocab, 22);
    ref_model rm = ref_of(r->model);
    ref_family f = {.qk_norm = true, .post_norms = true, .gelu = true, .embd_scale = true, .neox = true, .scale_q = true,
                    .swa_period = 6, .window = 32, .rope_base = 1e6f, .rope_base_swa = 1e4f};
    float *ref[2] = {malloc((size_t)NA * rm.V * sizeof(float)), malloc((size_t)NA * rm.V * sizeof(float))};
    bool ok = ref[0] && ref[1] && ref_forward(&rm, &f, toks[0], NA, ref[0]) && ref_forward(&rm, &f, toks[1], NB, ref[1]);
    int32_t *table[2] = {NULL, NULL}, nb[2] = {0, 0}, cap[2] = {0, 0};
    ok = ok && !rlx_runner_reserve(r, &table[0], &nb[0], &cap[0], NA) && !rlx_runner_reserve(r, &table[1], &nb[1], &cap[1], NB);
    rlx_batch_seq bs[2] = {{table[0], nb[0], -1}, {table[1], nb[1], -1}};
    double maxabs = 1.0, worst = 0.0;
    for (int s = 0; ok && s < 2; s++)
        for (size_t i = 0; i < (size_t)n[s] * rm.V; i++) maxabs = fmax(maxabs, fabs(ref[s][i]));
    int done[2] = {0, 0};
    rlx_error err = {0};
    for (int step = 0; ok && (done[0] < n[0] || done[1] < n[1]); step++) {
        int32_t tk[64], pos[64], sq[64];
        uint8_t outf[64];
        int bt = 0;
        /* step 0: both prefills, interleaved token by token; then one token per sequence */
        for (int i = 0; i < (step ? 1 : PA); i++)
            for (int s = 0; s < 2; s++)
                if (done[s] < (step ? n[s] : pre[s]) && bt < 64) {
                    tk[bt] = toks[s][done[s]]; pos[bt] = done[s]++; sq[bt] = s; outf[bt++] = 1;
                }
        rlx_batch b = {bt, tk, pos, sq, outf, bt, 2, bs, NULL};
        if (rlx_runner_forward(r, &b, &err)) { fprintf(stderr, "  forward: %s\n", err.msg); ok = false; break; }
        for (int o = 0; o < bt; o++)
            for (int v = 0; v < rm.V; v++)
                worst = fmax(worst, fabs(r->logits[(size_t)o * rm.V + v] - ref[sq[o]][(size_t)pos[o] * rm.V + v]) / maxabs);
    }
    for (int s = 0; s < 2; s++) {
        for (int32_t i = 0; i < nb[s]; i++) rlx_kv_release(&r->kv, table[s][i]);
        free(table[s]);
        free(ref[s]);
    }
    rlx_runner_close(r);
    ASSERT(ok);
    ASSERT_MSG(worst < 1e-3, "batched logits differ from the per-sequence reference by %.3g of max|logit|", worst);
}

/* The reference against the engine on the gemma2 file whose logits match llama.cpp's golden:
 * if they agree, the reference's reading of the Gemma graph is llama.cpp's. */
TEST(reference_agrees_on_golden_gemma2)
{
    const char *p = rlx_test_shared("models/synth-gemma2-tiny-f32.gguf");
    if (!p) SKIP("../shared/models/synth-gemma2-tiny-f32.gguf is absent");
    char path[1024];
    snprintf(path, sizeof path, "%s", p);
    rlx_runner *r = open_runner(path);
    ASSERT(r);
    enum { N = 40, PRE = 36 };
    int32_t tok[N];
    tokens(tok, N, r->n_vocab, 5);
    ref_model rm = ref_of(r->model);
    ref_family f = {.post_norms = true, .gelu = true, .embd_scale = true, .neox = true, .scale_q = true,
                    .swa_period = 2, .window = 32, .rope_base = 1e4f, .attn_softcap = 50.0f, .final_softcap = 30.0f};
    float *ref = malloc((size_t)N * rm.V * sizeof(float));
    bool ok = ref && ref_forward(&rm, &f, tok, N, ref);
    double worst = ok ? run_vs_ref(r, tok, N, PRE, ref) : INFINITY;
    free(ref);
    rlx_runner_close(r);
    ASSERT(ok);
    ASSERT_MSG(worst < 1e-3, "logits differ from the reference by %.3g of max|logit|", worst);
}

static void set_llama3(rlx_gguf_writer *w, void *ctx)
{
    (void)ctx;
    rlx_gguf_writer_set_str(w, "llama.rope.scaling.type", "llama3", 6);
    rlx_gguf_writer_set_f32(w, "llama.rope.scaling.factor", 8.0f);
    rlx_gguf_writer_set_u32(w, "llama.rope.scaling.original_context_length", 64);
}

/* convert_hf_to_gguf.py's Llama 3 factors, written as rope_freqs.weight */
static void add_llama3_tensor(rlx_gguf_writer *w, void *ctx)
{
    int64_t ne[1] = {8};
    rlx_gguf_writer_add_tensor(w, "rope_freqs.weight", RLX_F32, 1, ne, ctx, 8 * sizeof(float));
}

static void llama3_expected(float *ff, int n_rot, double base, double factor, double lo, double hi, double orig)
{
    for (int i = 0; i < n_rot / 2; i++) {
        double wl = 2 * M_PI * pow(base, 2.0 * i / n_rot);
        if (wl < orig / hi) ff[i] = 1.0f;
        else if (wl > orig / lo) ff[i] = (float)factor;
        else {
            double s = (orig / wl - lo) / (hi - lo);
            ff[i] = (float)(1.0 / ((1 - s) / factor + s));
        }
    }
}

TEST(llama3_rope_scaling)
{
    char plain[512], keys[600], tens[600];
    if (!synth("--arch llama --seed 11", "llama.gguf", plain, sizeof plain)) SKIP("rlxd-synth is not built or failed");
    snprintf(keys, sizeof keys, "%s/llama3-keys.gguf", rlx_test_tmp_dir());
    snprintf(tens, sizeof tens, "%s/llama3-tensor.gguf", rlx_test_tmp_dir());
    /* head_dim 16, base 10000, original context 64: wavelengths 6.3 (kept), 20 and 63 (blended), >= 199 (x8) */
    float ff[8];
    llama3_expected(ff, 16, 10000.0, 8.0, 1.0, 4.0, 64.0);
    ASSERT(ff[0] == 1.0f && ff[1] > 1.0f && ff[1] < 8.0f && ff[2] > ff[1] && ff[2] < 8.0f && ff[3] == 8.0f);
    ASSERT_EQ(rewrite(plain, keys, NULL, set_llama3, NULL), 0);
    ASSERT_EQ(rewrite(plain, tens, NULL, add_llama3_tensor, ff), 0);

    rlx_model *m = NULL;
    rlx_error err = {0};
    ASSERT_MSG(rlx_model_load(&m, keys, &err) == 0, "%s", err.msg);
    int bad = m->rope_factors ? 0 : 8;
    for (int i = 0; m->rope_factors && i < 8; i++) bad += fabsf(m->rope_factors[i] - ff[i]) > 1e-6f * ff[i];
    float fs = m->cfg.rope_freq_scale;
    rlx_model_free(m);
    ASSERT_EQ(bad, 0);
    ASSERT_MSG(fs == 1.0f, "llama3 scaling must not also scale linearly (freq scale %g)", fs);

    /* computed factors and the same factors as a tensor give the same logits; no factors differ */
    enum { N = 24 };
    int32_t tok[N];
    rlx_runner *r = open_runner(tens);
    ASSERT(r);
    tokens(tok, N, r->n_vocab, 9);
    ref_model rm = ref_of(r->model);
    ref_family f = {.rope_base = 10000.0f, .rope_factors = ff};
    float *ref = malloc((size_t)N * rm.V * sizeof(float));
    bool ok = ref && ref_forward(&rm, &f, tok, N, ref);
    double w_tensor = ok ? run_vs_ref(r, tok, N, N, ref) : INFINITY;
    rlx_runner_close(r);
    r = open_runner(keys);
    double w_keys = r && ok ? run_vs_ref(r, tok, N, N, ref) : INFINITY;
    rlx_runner_close(r);
    r = open_runner(plain);
    double w_plain = r && ok ? run_vs_ref(r, tok, N, N, ref) : 0.0;
    rlx_runner_close(r);
    free(ref);
    ASSERT(ok);
    ASSERT_MSG(w_tensor < 1e-4, "rope_freqs.weight: %.3g off the reference", w_tensor);
    ASSERT_MSG(w_keys < 1e-4, "llama3 keys: %.3g off the reference", w_keys);
    ASSERT_MSG(w_plain > 1e-3, "unscaled model agrees with the scaled reference (%.3g)", w_plain);
}

static void set_yarn(rlx_gguf_writer *w, void *ctx)
{
    (void)ctx;
    rlx_gguf_writer_set_str(w, "llama.rope.scaling.type", "yarn", 4);
}

static void set_bad_llama3(rlx_gguf_writer *w, void *ctx)
{
    set_llama3(w, ctx);
    rlx_gguf_writer_set_f32(w, "llama.rope.scaling.high_freq_factor", 0.5f);
}

static int load_error(const char *path, rlx_error *err)
{
    rlx_model *m = NULL;
    int rc = rlx_model_load(&m, path, err);
    rlx_model_free(m);
    return rc;
}

/* a per-layer pattern with too few entries */
static void set_bad_pattern(rlx_gguf_writer *w, void *ctx)
{
    (void)ctx;
    const bool flags[3] = {true, false, true};
    rlx_gguf_writer_set_arr(w, "gemma3.attention.sliding_window_pattern", RLX_GGUF_BOOL, flags, 3);
}

/* Gemma metadata as llama.cpp reads it (each setting checked against llama.cpp itself with
 * these synth files): f is the reading the engine must match, and `naive` the reading that
 * ignores the keys under test, which must give other logits, or the test proves nothing. */
static void check_family(const char *args, const char *file, const ref_family *f, const ref_family *naive)
{
    char path[512];
    if (!synth(args, file, path, sizeof path)) SKIP("rlxd-synth is not built or failed");
    rlx_runner *r = open_runner(path);
    ASSERT_MSG(r, "%s does not load", file);
    enum { N = 48, PRE = 40 };
    int32_t tok[N];
    tokens(tok, N, r->n_vocab, 9);
    ref_model rm = ref_of(r->model);
    float *ref = malloc((size_t)N * rm.V * sizeof(float));
    bool ok = ref && ref_forward(&rm, f, tok, N, ref);
    double worst = ok ? run_vs_ref(r, tok, N, PRE, ref) : INFINITY;
    double other = ok && ref_forward(&rm, naive, tok, N, ref) ? run_vs_ref(r, tok, N, PRE, ref) : 0.0;
    free(ref);
    rlx_runner_close(r);
    ASSERT_MSG(ok, "reference forward: a weight is missing or not f32");
    ASSERT_MSG(worst < 1e-3, "%s: logits differ from the reference by %.3g of max|logit|", file, worst);
    ASSERT_MSG(other > 1e-2, "%s: the keys under test do not change the logits (%.3g)", file, other);
}

#define G3_FAMILY .qk_norm = true, .post_norms = true, .gelu = true, .embd_scale = true, .neox = true, .scale_q = true

/* without attention.sliding_window every layer is global (llama.cpp), and a final soft-cap */
TEST(gemma3_without_window)
{
    ref_family f = {G3_FAMILY, .window = 0, .rope_base = 1e6f, .final_softcap = 4.0f};
    ref_family naive = f;
    naive.final_softcap = 0.0f;
    check_family(GEMMA3_ARGS " --sliding-window 0 --final-softcap 4", "g3-nowindow.gguf", &f, &naive);
}

/* sliding_window_pattern as a number, and rope.freq_base_swa */
TEST(gemma3_pattern_and_swa_base)
{
    ref_family f = {G3_FAMILY, .swa_period = 2, .window = 32, .rope_base = 1e6f, .rope_base_swa = 2000.0f};
    ref_family naive = f;
    naive.swa_period = 6;
    naive.rope_base_swa = 1e4f;
    check_family(GEMMA3_ARGS " --swa-pattern 2 --rope-base-swa 2000", "g3-pattern.gguf", &f, &naive);
}

/* sliding_window_pattern as per-layer flags */
TEST(gemma3_per_layer_pattern)
{
    static const bool layers[7] = {true, false, true, true, false, true, true};
    ref_family f = {G3_FAMILY, .swa_layers = layers, .window = 32, .rope_base = 1e6f, .rope_base_swa = 1e4f};
    ref_family naive = f;
    naive.swa_layers = NULL;
    naive.swa_period = 6;
    check_family(GEMMA3_ARGS " --swa-pattern 1,0,1,1,0,1,1", "g3-layers.gguf", &f, &naive);
}

/* Gemma 2 reads the same pattern and swa base keys (default: every other layer, base = rope base) */
TEST(gemma2_pattern_and_swa_base)
{
    ref_family f = {.post_norms = true, .gelu = true, .embd_scale = true, .neox = true, .scale_q = true, .swa_period = 3,
                    .window = 12, .rope_base = 1e4f, .rope_base_swa = 700.0f, .attn_softcap = 50.0f, .final_softcap = 30.0f};
    ref_family naive = f;
    naive.swa_period = 2;
    naive.rope_base_swa = 0.0f;
    check_family("--arch gemma2 --layers 4 --seed 5 --swa-pattern 3 --rope-base-swa 700 --sliding-window 12", "g2-pattern.gguf",
                 &f, &naive);
}

static void add_output_bias(rlx_gguf_writer *w, void *ctx)
{
    const int64_t *n = ctx;
    float *b = malloc((size_t)*n * sizeof *b);
    for (int64_t i = 0; b && i < *n; i++) b[i] = (float)((i * 37) % 11) - 5.0f;
    int64_t ne[1] = {*n};
    if (b) rlx_gguf_writer_add_tensor(w, "output.bias", RLX_F32, 1, ne, b, (size_t)*n * sizeof *b);
    free(b);
}

/* llama.cpp's qwen2 adds output.bias to the logits when the file has one */
TEST(qwen2_output_bias)
{
    char q2[512], p[600];
    if (!synth("--arch qwen2 --seed 4", "qwen2-ob.gguf", q2, sizeof q2)) SKIP("rlxd-synth is not built or failed");
    rlx_runner *r = open_runner(q2);
    ASSERT(r);
    int64_t V = r->n_vocab;
    enum { N = 6 };
    int32_t tok[N];
    tokens(tok, N, (int)V, 4);
    float *plain = malloc((size_t)N * V * sizeof(float));
    ASSERT(plain);
    ref_model rm = ref_of(r->model);
    ref_family f = {.qkv_bias = true, .neox = true, .rope_base = 1e6f};
    bool ok = ref_forward(&rm, &f, tok, N, plain);
    rlx_runner_close(r);
    ASSERT(ok);
    snprintf(p, sizeof p, "%s/qwen2-with-bias.gguf", rlx_test_tmp_dir());
    ASSERT_EQ(rewrite(q2, p, NULL, add_output_bias, &V), 0);
    for (size_t i = 0; i < (size_t)N * V; i++) plain[i] += (float)(((int64_t)(i % (size_t)V) * 37) % 11) - 5.0f;
    r = open_runner(p);
    ASSERT(r);
    double worst = run_vs_ref(r, tok, N, N, plain);
    rlx_runner_close(r);
    free(plain);
    ASSERT_MSG(worst < 1e-4, "logits with output.bias differ from logits + bias by %.3g", worst);
}

TEST(bad_family_metadata)
{
    char g3[512], ll[512], p[600];
    if (!synth(GEMMA3_ARGS, "gemma3.gguf", g3, sizeof g3) || !synth("--arch llama --seed 11", "llama.gguf", ll, sizeof ll))
        SKIP("rlxd-synth is not built or failed");
    rlx_error err = {0};
    snprintf(p, sizeof p, "%s/gemma3-badpattern.gguf", rlx_test_tmp_dir());
    ASSERT_EQ(rewrite(g3, p, NULL, set_bad_pattern, NULL), 0);
    ASSERT_EQ(load_error(p, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "gemma3.attention.sliding_window_pattern"), "%s", err.msg);

    snprintf(p, sizeof p, "%s/llama-yarn.gguf", rlx_test_tmp_dir());
    ASSERT_EQ(rewrite(ll, p, NULL, set_yarn, NULL), 0);
    ASSERT_EQ(load_error(p, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "yarn"), "%s", err.msg);

    snprintf(p, sizeof p, "%s/llama3-bad.gguf", rlx_test_tmp_dir());
    ASSERT_EQ(rewrite(ll, p, NULL, set_bad_llama3, NULL), 0);
    ASSERT_EQ(load_error(p, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "high_freq_factor"), "%s", err.msg);

    /* llama.cpp's qwen2 has no head size of its own */
    char hd[512];
    ASSERT(synth("--arch qwen2 --hidden 64 --heads 4 --kv-heads 2 --head-dim 32 --seed 3", "qwen2-hd.gguf", hd, sizeof hd));
    ASSERT_EQ(load_error(hd, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "key_length"), "%s", err.msg);

    /* a qwen2 file without its q/k/v biases loads but cannot be built */
    char q2[512];
    ASSERT(synth("--arch qwen2 --seed 2", "qwen2.gguf", q2, sizeof q2));
    snprintf(p, sizeof p, "%s/qwen2-nobias.gguf", rlx_test_tmp_dir());
    {
        rlx_gguf *g = NULL;
        ASSERT_EQ(rlx_gguf_open(&g, q2, &err), 0);
        rlx_gguf_writer *w = rlx_gguf_writer_new();
        for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) rlx_gguf_writer_copy_kv(w, rlx_gguf_kv_at(g, i));
        for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
            const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
            if (!strstr(t->name, "attn_k.bias")) rlx_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size);
        }
        int rc = rlx_gguf_writer_write(w, p, &err);
        rlx_gguf_writer_free(w);
        rlx_gguf_close(g);
        ASSERT_EQ(rc, 0);
    }
    rlx_runner_config cfg = {.model_path = p, .n_ctx = 64};
    rlx_runner *r = NULL;
    ASSERT_EQ(rlx_runner_open(&r, &cfg, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "blk.0.attn_k.bias"), "%s", err.msg);
}

TEST_MAIN(TEST_ENTRY(gemma3_graph), TEST_ENTRY(gemma3_forward_matches_reference),
          TEST_ENTRY(gemma3_two_sequences_batched), TEST_ENTRY(reference_agrees_on_golden_gemma2),
          TEST_ENTRY(llama3_rope_scaling), TEST_ENTRY(gemma3_without_window), TEST_ENTRY(gemma3_pattern_and_swa_base),
          TEST_ENTRY(gemma3_per_layer_pattern), TEST_ENTRY(gemma2_pattern_and_swa_base), TEST_ENTRY(qwen2_output_bias),
          TEST_ENTRY(bad_family_metadata))
