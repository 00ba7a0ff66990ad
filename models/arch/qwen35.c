/* qwen35.c - the Qwen3.5 family (GGUF architecture `qwen35`, dense): a hybrid of gated DeltaNet
 * (linear attention) layers and, every full_attention_interval-th layer, gated full attention,
 * each followed by a SwiGLU FFN. Tensors and maths as llama.cpp's converter writes them
 * (../shared/models/NOTES-bert-qwen35.md):
 *
 *   full attention: attn_q gives per head [q, gate] (head_dim each); per-head RMS norms of q and
 *     k, NeoX RoPE on the first n_rot dims (multi-section RoPE, every section at the token's
 *     position for text), causal GQA over the paged KV cache, output * sigmoid(gate), attn_output;
 *   linear: attn_qkv -> causal depthwise conv1d (ssm_conv1d, state carried) -> SiLU -> q | k | v;
 *     beta = sigmoid(ssm_beta x), g = softplus(ssm_alpha x + ssm_dt.bias) * ssm_a (ssm_a stores
 *     -exp(A_log), no .weight suffix); the gated delta rule (state carried, value head j uses key
 *     head j % group_count); RMSNorm per head * ssm_norm * silu(attn_gate x); ssm_out.
 *
 * Memory: attention layers are paged KV, linear layers a recurrent-state slot holding the conv
 * state and the delta-rule states (graph.h RLX_SSM_HEADER layout). The output is tied to
 * token_embd when output.weight is absent. */
#include "models/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int qwen35_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err)
{
    const char *a = c->arch;
    int rc;
    c->rope_mode = RLX_ROPE_NEOX;
    c->full_attn_interval = 4;
    c->head_dim_v = c->head_dim;
    if ((rc = rlx_model_key_u32(g, a, "full_attention_interval", &c->full_attn_interval, false, err)) ||
        (rc = rlx_model_key_u32(g, a, "attention.value_length", &c->head_dim_v, false, err)) ||
        (rc = rlx_model_key_u32(g, a, "ssm.conv_kernel", &c->ssm_conv_kernel, true, err)) ||
        (rc = rlx_model_key_u32(g, a, "ssm.state_size", &c->ssm_state_size, true, err)) ||
        (rc = rlx_model_key_u32(g, a, "ssm.group_count", &c->ssm_group_count, true, err)) ||
        (rc = rlx_model_key_u32(g, a, "ssm.time_step_rank", &c->ssm_time_step_rank, true, err)) ||
        (rc = rlx_model_key_u32(g, a, "ssm.inner_size", &c->ssm_inner_size, true, err)))
        return rc;
    /* rope.dimension_sections is required, as llama.cpp's loader requires it */
    char key[160];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    const rlx_gguf_value *v = rlx_gguf_find(g, key);
    if (!v) return rlx_errorf(err, RLX_EFORMAT, "%s: key '%s' is missing", rlx_gguf_path(g), key);
    if (v->type != RLX_GGUF_ARRAY || (v->arr.type != RLX_GGUF_INT32 && v->arr.type != RLX_GGUF_UINT32) || v->arr.n < 3 ||
        v->arr.n > 4)
        return rlx_errorf(err, RLX_EFORMAT, "%s: '%s' must be an array of 3 or 4 integers", rlx_gguf_path(g), key);
    /* packed in the mapping, possibly unaligned */
    for (uint64_t i = 0; i < v->arr.n; i++) memcpy(&c->rope_sections[i], (const char *)v->arr.data + 4 * i, 4);
    const int32_t nv = c->ssm_time_step_rank, nk = c->ssm_group_count, dk = c->ssm_state_size;
    if (c->full_attn_interval <= 0 || c->ssm_conv_kernel < 1 || c->ssm_conv_kernel > 64 || nv <= 0 || nk <= 0 || nv % nk ||
        dk <= 0 || dk > 512 || c->ssm_inner_size <= 0 || c->ssm_inner_size % nv)
        return rlx_errorf(err, RLX_EFORMAT, "%s: inconsistent linear-attention hyper-parameters (interval %d, conv kernel %d, "
                          "%d key heads of %d, %d value heads, inner size %d)", rlx_gguf_path(g), c->full_attn_interval,
                          c->ssm_conv_kernel, nk, dk, nv, c->ssm_inner_size);
    /* as llama.cpp: the state is reshaped as [head_v_dim, head_v_dim, n_v_heads] */
    if (c->ssm_inner_size / nv != dk)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: ssm.state_size %d must equal the value head size %d (inner_size / time_step_rank)",
                          rlx_gguf_path(g), dk, c->ssm_inner_size / nv);
    if (c->head_dim_v != c->head_dim)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: attention.value_length %d differs from key_length %d", rlx_gguf_path(g),
                          c->head_dim_v, c->head_dim);
    return 0;
}

static bool full_attention(const rlx_model_config *c, int l) { return (l + 1) % c->full_attn_interval == 0; }

#define W(name, ne0, ne1, req) rlx_model_weight(m, g, name, ne0, ne1, req, err)
#define CHECK(id) do { if ((id) < -1) return (id); } while (0)
#define LW(var, suffix, ne0, ne1) \
    snprintf(name, sizeof name, "blk.%d." suffix, l); \
    int var = W(name, ne0, ne1, true); CHECK(var)

/* gated full attention of layer l over h; returns the output before attn_output */
static int attention_layer(const rlx_model *m, rlx_graph *g, int l, int h, rlx_error *err)
{
    const rlx_model_config *c = &m->cfg;
    const int64_t d = c->n_embd, hd = c->head_dim, nq = (int64_t)c->n_head * hd, nkv = (int64_t)c->n_head_kv * hd;
    char name[96];
    LW(wq, "attn_q.weight", d, 2 * nq);
    LW(wk, "attn_k.weight", d, nkv);
    LW(wv, "attn_v.weight", d, nkv);
    LW(qn, "attn_q_norm.weight", hd, 0);
    LW(kn, "attn_k_norm.weight", hd, 0);
    int qg = rlx_g_matmul(g, h, wq);
    /* per head: head_dim query values, then head_dim gate values */
    int q = rlx_g_cols(g, qg, c->n_head, (int32_t)hd, (int32_t)(2 * hd), 0);
    int gate = rlx_g_unary(g, RLX_OP_SIGMOID, rlx_g_cols(g, qg, c->n_head, (int32_t)hd, (int32_t)(2 * hd), (int32_t)hd), 0.0f);
    int k = rlx_g_matmul(g, h, wk), v = rlx_g_matmul(g, h, wv);
    q = rlx_g_head_norm(g, q, qn, (int32_t)hd, c->norm_eps);
    k = rlx_g_head_norm(g, k, kn, (int32_t)hd, c->norm_eps);
    rlx_rope_params rp = {.n_heads = c->n_head, .head_dim = (int32_t)hd, .n_rot = c->n_rot, .mode = RLX_ROPE_NEOX,
                          .freq_base = c->rope_base, .freq_scale = c->rope_freq_scale};
    q = rlx_g_rope(g, q, -1, &rp);
    rp.n_heads = c->n_head_kv;
    k = rlx_g_rope(g, k, -1, &rp);
    const rlx_attn_params ap = {.layer = l, .n_head = c->n_head, .n_head_kv = c->n_head_kv, .head_dim = (int32_t)hd,
                                .scale = c->attn_scale, .mask = RLX_ATTN_CAUSAL};
    int a = rlx_g_attention(g, q, k, v, &ap);
    return rlx_g_mul(g, a, gate);
}

/* the gated DeltaNet mixer of layer l over h; returns the output before ssm_out */
static int linear_layer(const rlx_model *m, rlx_graph *g, int l, int h, rlx_error *err)
{
    const rlx_model_config *c = &m->cfg;
    const int64_t d = c->n_embd, nk = c->ssm_group_count, nv = c->ssm_time_step_rank, dk = c->ssm_state_size;
    const int64_t dv = c->ssm_inner_size / nv, C = 2 * nk * dk + nv * dv, K = c->ssm_conv_kernel;
    char name[96];
    LW(wqkv, "attn_qkv.weight", d, C);
    LW(wz, "attn_gate.weight", d, nv * dv);
    LW(conv, "ssm_conv1d.weight", K, C);
    LW(dt, "ssm_dt.bias", nv, 0);
    LW(A, "ssm_a", nv, 0);
    LW(wbeta, "ssm_beta.weight", d, nv);
    LW(walpha, "ssm_alpha.weight", d, nv);
    LW(norm, "ssm_norm.weight", dv, 0);
    int qkv = rlx_g_matmul(g, h, wqkv);
    int z = rlx_g_unary(g, RLX_OP_SILU, rlx_g_matmul(g, h, wz), 0.0f);
    int beta = rlx_g_unary(g, RLX_OP_SIGMOID, rlx_g_matmul(g, h, wbeta), 0.0f);
    int gl = rlx_g_mul(g, rlx_g_unary(g, RLX_OP_SOFTPLUS, rlx_g_add(g, rlx_g_matmul(g, h, walpha), dt), 0.0f), A);
    const rlx_ssm_conv_params cp = {.layer = l, .kernel = (int32_t)K, .channels = (int32_t)C, .conv_off = RLX_SSM_HEADER};
    int x = rlx_g_unary(g, RLX_OP_SILU, rlx_g_ssm_conv(g, qkv, conv, &cp), 0.0f);
    const rlx_delta_params dp = {.layer = l, .n_k_heads = (int32_t)nk, .n_v_heads = (int32_t)nv, .head_k = (int32_t)dk,
                                 .head_v = (int32_t)dv, .state_off = (int32_t)(RLX_SSM_HEADER + (K - 1) * C),
                                 .eps = c->norm_eps, .scale = 1.0f / sqrtf((float)dk)};
    int o = rlx_g_delta_net(g, x, gl, beta, &dp);
    return rlx_g_mul(g, rlx_g_head_norm(g, o, norm, (int32_t)dv, c->norm_eps), z);
}

static int qwen35_build(const rlx_model *m, rlx_graph *g, rlx_error *err)
{
    const rlx_model_config *c = &m->cfg;
    const int64_t d = c->n_embd, hd = c->head_dim, nkv = (int64_t)c->n_head_kv * hd;
    const int64_t nv = c->ssm_time_step_rank, dk = c->ssm_state_size, dv = c->ssm_inner_size / nv;
    const int64_t C = 2 * (int64_t)c->ssm_group_count * dk + nv * dv;
    char name[96];
    g->n_layers = c->n_layer;
    g->kv_cols = nkv;
    free(g->mem);
    if (!(g->mem = malloc((size_t)c->n_layer * sizeof *g->mem))) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (int l = 0; l < c->n_layer; l++)
        g->mem[l] = full_attention(c, l)
                        ? (rlx_mem_layer){RLX_MEM_KV, nkv, 0}
                        : (rlx_mem_layer){RLX_MEM_STATE, 0, 4 * (RLX_SSM_HEADER + (c->ssm_conv_kernel - 1) * C + nv * dk * dv)};

    int emb = W("token_embd.weight", d, c->n_vocab, true);
    CHECK(emb);
    int x = rlx_g_get_rows(g, emb, 1.0f);
    for (int l = 0; l < c->n_layer; l++) {
        LW(attn_norm, "attn_norm.weight", d, 0);
        LW(post_norm, "post_attention_norm.weight", d, 0);
        LW(wgate, "ffn_gate.weight", d, c->n_ff);
        LW(wup, "ffn_up.weight", d, c->n_ff);
        LW(wdown, "ffn_down.weight", c->n_ff, d);
        const bool full = full_attention(c, l);
        snprintf(name, sizeof name, full ? "blk.%d.attn_output.weight" : "blk.%d.ssm_out.weight", l);
        int wo = W(name, full ? (int64_t)c->n_head * hd : nv * dv, d, true);
        CHECK(wo);
        int h = rlx_g_mul(g, rlx_g_rms_norm(g, x, c->norm_eps), attn_norm);
        int mix = full ? attention_layer(m, g, l, h, err) : linear_layer(m, g, l, h, err);
        CHECK(mix);
        int out = rlx_g_matmul(g, mix, wo);
        if (l == c->n_layer - 1) {
            /* only the rows that produce logits go on (as llama.cpp, after the mixer) */
            out = rlx_g_gather(g, out);
            x = rlx_g_gather(g, x);
        }
        x = rlx_g_add(g, out, x);
        h = rlx_g_mul(g, rlx_g_rms_norm(g, x, c->norm_eps), post_norm);
        int up = rlx_g_matmul(g, h, wup);
        int gate = rlx_g_unary(g, RLX_OP_SILU, rlx_g_matmul(g, h, wgate), 0.0f);
        x = rlx_g_add(g, rlx_g_matmul(g, rlx_g_mul(g, gate, up), wdown), x);
    }
    int out_norm = W("output_norm.weight", d, 0, true);
    CHECK(out_norm);
    int wout = c->tied ? emb : W("output.weight", d, c->n_vocab, true);
    CHECK(wout);
    x = rlx_g_mul(g, rlx_g_rms_norm(g, x, c->norm_eps), out_norm);
    rlx_g_set_output(g, rlx_g_matmul(g, x, wout), RLX_OUTPUT_LOGITS);
    return g->oom ? rlx_errorf(err, RLX_ENOMEM, "out of memory while building the graph") : 0;
}

const rlx_arch rlx_arch_qwen35 = {"qwen35", qwen35_config, qwen35_build};
