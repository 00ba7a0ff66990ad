/* bert.c - the BERT-family encoders, as llama.cpp's llm_build_bert builds them:
 *   bert        token + token-type-0 + learned position embeddings, LayerNorm; per layer
 *               Q/K/V with biases, bidirectional attention, output projection (+ bias),
 *               residual, LayerNorm, FFN up (+ bias) -> GELU -> down (+ bias), residual,
 *               LayerNorm (post-norm blocks, no final norm);
 *   nomic-bert  the same without position embeddings, with a fused QKV projection, NeoX RoPE
 *               on Q and K, and a SwiGLU FFN (silu(gate x) * up x, no biases).
 * Attention keeps no KV cache (every layer RLX_MEM_NONE) and the graph's output is the last
 * hidden state of every batch token; pooling (and the `cls` rank head) is the engine's
 * (engine/embed.h). GELU is the op table's GELU, which is ggml's FP16-table GELU on the CPU. */
#include "models/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pooling_names[] = {"none", "mean", "cls", "last", "rank"};

const char *rlx_model_pooling_name(int32_t p)
{
    return p >= 0 && p < (int32_t)RLX_ARRAY_LEN(pooling_names) ? pooling_names[p] : "unknown";
}

static int encoder_config(const rlx_gguf *g, rlx_model_config *c, bool nomic, rlx_error *err)
{
    const char *path = rlx_gguf_path(g);
    char key[160];
    int rc;
    c->encoder = true;
    c->causal = false;
    c->rope_mode = RLX_ROPE_NEOX; /* nomic-bert; bert has no RoPE */
    snprintf(key, sizeof key, "%s.attention.layer_norm_epsilon", c->arch);
    if ((rc = rlx_gguf_get_f32(g, key, &c->norm_eps, err))) {
        if (rc == RLX_ENOTFOUND) rc = rlx_errorf(err, RLX_EFORMAT, "%s: required metadata key '%s' is missing", path, key);
        return rc;
    }
    bool causal = false;
    snprintf(key, sizeof key, "%s.attention.causal", c->arch);
    rc = rlx_gguf_get_bool(g, key, &causal, err);
    if (rc && rc != RLX_ENOTFOUND) return rc;
    if (causal)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: '%s' is true; rlxd runs %s models as bidirectional encoders only",
                          path, key, c->arch);
    c->pooling_type = 0;
    if ((rc = rlx_model_key_u32(g, c->arch, "pooling_type", &c->pooling_type, false, err))) return rc;
    if (c->pooling_type < 0 || c->pooling_type >= (int32_t)RLX_ARRAY_LEN(pooling_names))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: %s.pooling_type %d is unknown (0 none, 1 mean, 2 cls, 3 last, 4 rank)",
                          path, c->arch, c->pooling_type);
    c->n_token_types = 0;
    uint32_t ntt = 0;
    rc = rlx_gguf_get_u32(g, "tokenizer.ggml.token_type_count", &ntt, err);
    if (rc && rc != RLX_ENOTFOUND) return rc;
    if (!rc) c->n_token_types = (int32_t)RLX_MIN(ntt, (uint32_t)INT32_MAX);
    c->rank_head = rlx_gguf_find_tensor(g, "cls.weight") || rlx_gguf_find_tensor(g, "cls.output.weight");
    if (c->pooling_type == 4 && !c->rank_head)
        return rlx_errorf(err, RLX_EFORMAT, "%s: pooling 'rank' needs a classifier head (cls.weight or cls.output.weight), "
                          "which the file lacks", path);
    if (c->n_head_kv != c->n_head || c->head_dim * c->n_head != c->n_embd)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: %s needs head_count_kv == head_count and head_dim x heads == "
                          "embedding_length (have %d / %d heads of %d for %d)", path, c->arch, c->n_head_kv, c->n_head,
                          c->head_dim, c->n_embd);
    if (nomic && c->n_rot != c->head_dim)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: nomic-bert with partial RoPE (%d of %d dims) is not supported", path,
                          c->n_rot, c->head_dim);
    return 0;
}

static int bert_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err) { return encoder_config(g, c, false, err); }
static int nomic_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err) { return encoder_config(g, c, true, err); }

#define W(name, ne0, ne1, req) rlx_model_weight(m, g, name, ne0, ne1, req, err)
#define CHECK(id) do { if ((id) < -1) return (id); } while (0)

/* rows [r0, r0 + n) of weight matrix `t` (a borrowed view: QKV split) */
static int weight_rows(rlx_graph *g, int t, int64_t r0, int64_t n, const char *name)
{
    const rlx_gtensor *w = &g->tensors[t];
    const size_t rb = w->ne[1] > 1 ? rlx_row_bytes(w->wtype, w->ne[0]) : 4;
    if (w->ne[1] == 1) /* a bias vector: columns */
        return rlx_g_weight(g, name, RLX_F32, n, 1, (const float *)w->data + r0);
    return rlx_g_weight(g, name, w->wtype, w->ne[0], n, (const uint8_t *)w->data + (size_t)r0 * rb);
}

/* x -> LayerNorm(x) * w + b, the weights "<prefix>.weight" / "<prefix>.bias" */
static int layer_norm(const rlx_model *m, rlx_graph *g, int x, const char *prefix, rlx_error *err)
{
    char name[96];
    const int64_t d = m->cfg.n_embd;
    snprintf(name, sizeof name, "%s.weight", prefix);
    int w = W(name, d, 0, true);
    CHECK(w);
    snprintf(name, sizeof name, "%s.bias", prefix);
    int b = W(name, d, 0, true);
    CHECK(b);
    return rlx_g_add(g, rlx_g_mul(g, rlx_g_norm(g, x, m->cfg.norm_eps), w), b);
}

static int build_encoder(const rlx_model *m, rlx_graph *g, bool nomic, rlx_error *err)
{
    const rlx_model_config *c = &m->cfg;
    const int64_t d = c->n_embd, hd = c->head_dim, nkv = (int64_t)c->n_head_kv * hd;
    char name[96];
    g->n_layers = c->n_layer;
    g->kv_cols = nkv;
    if (!(g->mem = malloc((size_t)c->n_layer * sizeof *g->mem))) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (int l = 0; l < c->n_layer; l++) g->mem[l] = (rlx_mem_layer){RLX_MEM_NONE, 0, 0};

    /* embeddings: positions first, so the token rows' epilogue can add them */
    int pos = -1;
    if (!nomic) {
        int wpos = W("position_embd.weight", d, c->n_ctx_train, true);
        CHECK(wpos);
        pos = rlx_g_get_rows_pos(g, wpos);
    }
    int emb = W("token_embd.weight", d, c->n_vocab, true);
    CHECK(emb);
    int x = rlx_g_get_rows(g, emb, 1.0f);
    const rlx_gguf_tensor *tt = rlx_gguf_find_tensor(m->gguf, "token_types.weight");
    if (tt) {
        /* llama.cpp adds row 0 of the token types (token types are always 0) */
        int types = W("token_types.weight", d, tt->ne[1], true);
        CHECK(types);
        if (tt->type != RLX_F32)
            return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: token_types.weight must be f32", rlx_gguf_path(m->gguf));
        x = rlx_g_add(g, x, rlx_g_weight(g, "token_types.weight[0]", RLX_F32, d, 1, g->tensors[types].data));
    }
    if (pos >= 0) x = rlx_g_add(g, x, pos);
    x = layer_norm(m, g, x, "token_embd_norm", err);
    CHECK(x);

    for (int l = 0; l < c->n_layer; l++) {
#define LW(var, suffix, ne0, ne1, req) \
        snprintf(name, sizeof name, "blk.%d." suffix, l); \
        int var = W(name, ne0, ne1, req); CHECK(var)
        int q, k, v;
        if (nomic) {
            LW(wqkv, "attn_qkv.weight", d, d + 2 * nkv, true);
            LW(bqkv, "attn_qkv.bias", d + 2 * nkv, 0, false);
            const char *wn = g->tensors[wqkv].name;
            q = rlx_g_matmul(g, x, weight_rows(g, wqkv, 0, d, wn));
            k = rlx_g_matmul(g, x, weight_rows(g, wqkv, d, nkv, wn));
            v = rlx_g_matmul(g, x, weight_rows(g, wqkv, d + nkv, nkv, wn));
            if (bqkv >= 0) {
                const char *bn = g->tensors[bqkv].name;
                q = rlx_g_add(g, q, weight_rows(g, bqkv, 0, d, bn));
                k = rlx_g_add(g, k, weight_rows(g, bqkv, d, nkv, bn));
                v = rlx_g_add(g, v, weight_rows(g, bqkv, d + nkv, nkv, bn));
            }
            rlx_rope_params rp = {.n_heads = c->n_head, .head_dim = (int32_t)hd, .n_rot = c->n_rot, .mode = RLX_ROPE_NEOX,
                                  .freq_base = c->rope_base, .freq_scale = c->rope_freq_scale};
            q = rlx_g_rope(g, q, -1, &rp);
            rp.n_heads = c->n_head_kv;
            k = rlx_g_rope(g, k, -1, &rp);
        } else {
            LW(wq, "attn_q.weight", d, d, true);
            LW(bq, "attn_q.bias", d, 0, true);
            LW(wk, "attn_k.weight", d, nkv, true);
            LW(bk, "attn_k.bias", nkv, 0, true);
            LW(wv, "attn_v.weight", d, nkv, true);
            LW(bv, "attn_v.bias", nkv, 0, true);
            q = rlx_g_add(g, rlx_g_matmul(g, x, wq), bq);
            k = rlx_g_add(g, rlx_g_matmul(g, x, wk), bk);
            v = rlx_g_add(g, rlx_g_matmul(g, x, wv), bv);
        }
        const rlx_attn_params ap = {.layer = l, .n_head = c->n_head, .n_head_kv = c->n_head_kv, .head_dim = (int32_t)hd,
                                    .scale = c->attn_scale, .mask = RLX_ATTN_BIDIRECTIONAL};
        int a = rlx_g_attention(g, q, k, v, &ap);
        LW(wo, "attn_output.weight", d, d, true);
        LW(bo, "attn_output.bias", d, 0, false);
        a = rlx_g_matmul(g, a, wo);
        if (bo >= 0) a = rlx_g_add(g, a, bo);
        x = rlx_g_add(g, a, x);
        snprintf(name, sizeof name, "blk.%d.attn_output_norm", l);
        x = layer_norm(m, g, x, name, err);
        CHECK(x);

        int ff;
        LW(wup, "ffn_up.weight", d, c->n_ff, true);
        LW(wdown, "ffn_down.weight", c->n_ff, d, true);
        if (nomic) {
            LW(wgate, "ffn_gate.weight", d, c->n_ff, true);
            int up = rlx_g_matmul(g, x, wup);
            int gate = rlx_g_unary(g, RLX_OP_SILU, rlx_g_matmul(g, x, wgate), 0.0f);
            ff = rlx_g_matmul(g, rlx_g_mul(g, gate, up), wdown);
        } else {
            LW(bup, "ffn_up.bias", c->n_ff, 0, false);
            LW(bdown, "ffn_down.bias", d, 0, false);
            int up = rlx_g_matmul(g, x, wup);
            if (bup >= 0) up = rlx_g_add(g, up, bup);
            ff = rlx_g_matmul(g, rlx_g_unary(g, RLX_OP_GELU, up, 0.0f), wdown);
            if (bdown >= 0) ff = rlx_g_add(g, ff, bdown);
        }
        x = rlx_g_add(g, ff, x);
        snprintf(name, sizeof name, "blk.%d.layer_output_norm", l);
        x = layer_norm(m, g, x, name, err);
        CHECK(x);
#undef LW
    }
    rlx_g_set_output(g, x, RLX_OUTPUT_HIDDEN);
    return g->oom ? rlx_errorf(err, RLX_ENOMEM, "out of memory while building the graph") : 0;
}

static int bert_build(const rlx_model *m, rlx_graph *g, rlx_error *err) { return build_encoder(m, g, false, err); }
static int nomic_build(const rlx_model *m, rlx_graph *g, rlx_error *err) { return build_encoder(m, g, true, err); }

const rlx_arch rlx_arch_bert = {"bert", bert_config, bert_build};
const rlx_arch rlx_arch_nomic_bert = {"nomic-bert", nomic_config, nomic_build};
