/* decoder.c - the shared Llama-style decoder: embeddings, N pre-norm blocks of grouped-query
 * attention (paged KV) and a gated MLP, final norm, output projection. Families switch the
 * parts that differ with rlx_decoder_opts and their config (rope mode, soft-capping, sliding
 * windows, embedding scale). */
#include "models/model.h"

#include <math.h>
#include <stdio.h>

#define W(name, ne0, ne1, req) rlx_model_weight(m, g, name, ne0, ne1, req, err)
#define CHECK(id) do { if ((id) < -1) return (id); } while (0)

int rlx_build_decoder(const rlx_model *m, const rlx_decoder_opts *o, rlx_graph *g, rlx_error *err)
{
    const rlx_model_config *c = &m->cfg;
    /* an embedding model (pooling_type given) returns every token's final-normed hidden state */
    const bool embed = c->pooling_type >= 0;
    const int64_t d = c->n_embd, hd = c->head_dim, nq = (int64_t)c->n_head * hd, nkv = (int64_t)c->n_head_kv * hd;
    char name[96];
    g->n_layers = c->n_layer;
    g->kv_cols = nkv;

    int emb = W("token_embd.weight", d, c->n_vocab, true);
    CHECK(emb);
    int x = rlx_g_get_rows(g, emb, c->embd_scale ? sqrtf((float)d) : 1.0f);
    int rope_ff = W("rope_freqs.weight", c->n_rot / 2, 0, false);
    CHECK(rope_ff);
    if (rope_ff < 0 && m->rope_factors)
        rope_ff = rlx_g_weight(g, "rope_freqs (llama3, computed)", RLX_F32, c->n_rot / 2, 1, m->rope_factors);

    for (int l = 0; l < c->n_layer; l++) {
#define LW(var, suffix, ne0, ne1, req) \
        snprintf(name, sizeof name, "blk.%d." suffix, l); \
        int var = W(name, ne0, ne1, req); CHECK(var)
        LW(attn_norm, "attn_norm.weight", d, 0, true);
        LW(wq, "attn_q.weight", d, nq, true);
        LW(wk, "attn_k.weight", d, nkv, true);
        LW(wv, "attn_v.weight", d, nkv, true);
        LW(wo, "attn_output.weight", nq, d, true);
        LW(ffn_norm, "ffn_norm.weight", d, 0, true);
        LW(wgate, "ffn_gate.weight", d, c->n_ff, true);
        LW(wup, "ffn_up.weight", d, c->n_ff, true);
        LW(wdown, "ffn_down.weight", c->n_ff, d, true);

        int h = rlx_g_mul(g, rlx_g_rms_norm(g, x, c->norm_eps), attn_norm);
        int q = rlx_g_matmul(g, h, wq), k = rlx_g_matmul(g, h, wk), v = rlx_g_matmul(g, h, wv);
        if (o->qkv_bias) {
            LW(bq, "attn_q.bias", nq, 0, true);
            LW(bk, "attn_k.bias", nkv, 0, true);
            LW(bv, "attn_v.bias", nkv, 0, true);
            q = rlx_g_add(g, q, bq);
            k = rlx_g_add(g, k, bk);
            v = rlx_g_add(g, v, bv);
        }
        if (o->qk_norm) {
            LW(qn, "attn_q_norm.weight", hd, 0, true);
            LW(kn, "attn_k_norm.weight", hd, 0, true);
            q = rlx_g_head_norm(g, q, qn, (int32_t)hd, c->norm_eps);
            k = rlx_g_head_norm(g, k, kn, (int32_t)hd, c->norm_eps);
        }
        bool swa = rlx_model_layer_swa(c, l);
        float base = swa && c->rope_base_swa > 0.0f ? c->rope_base_swa : c->rope_base;
        float fscale = swa && c->rope_freq_scale_swa > 0.0f ? c->rope_freq_scale_swa : c->rope_freq_scale;
        rlx_rope_params rp = {.n_heads = c->n_head, .head_dim = (int32_t)hd, .n_rot = c->n_rot,
                              .mode = (rlx_rope_mode)c->rope_mode, .freq_base = base, .freq_scale = fscale};
        q = rlx_g_rope(g, q, rope_ff, &rp);
        rp.n_heads = c->n_head_kv;
        k = rlx_g_rope(g, k, rope_ff, &rp);
        if (o->scale_q) q = rlx_g_unary(g, RLX_OP_SCALE, q, c->attn_scale);
        const rlx_attn_params ap = {.layer = l, .n_head = c->n_head, .n_head_kv = c->n_head_kv, .head_dim = (int32_t)hd,
                                    .window = swa ? (int32_t)c->sliding_window : 0, .scale = o->scale_q ? 1.0f : c->attn_scale,
                                    .softcap = c->attn_softcap,
                                    .mask = c->causal ? RLX_ATTN_CAUSAL : RLX_ATTN_BIDIRECTIONAL};
        int a = rlx_g_attention(g, q, k, v, &ap);
        int attn_out = rlx_g_matmul(g, a, wo);
        if (l == c->n_layer - 1 && !embed) {
            /* only the rows that produce logits continue past the last attention's output
             * projection; gathering after it, as llama.cpp does, keeps its row counts, which
             * decide its arithmetic (rlx_matmul_rows_batched) */
            attn_out = rlx_g_gather(g, attn_out);
            x = rlx_g_gather(g, x);
        }
        if (o->post_norms) {
            LW(pn, "post_attention_norm.weight", d, 0, true);
            attn_out = rlx_g_mul(g, rlx_g_rms_norm(g, attn_out, c->norm_eps), pn);
        }
        x = rlx_g_add(g, attn_out, x);

        h = rlx_g_mul(g, rlx_g_rms_norm(g, x, c->norm_eps), ffn_norm);
        int up = rlx_g_matmul(g, h, wup);
        int gate = rlx_g_matmul(g, h, wgate);
        gate = rlx_g_unary(g, o->gelu ? RLX_OP_GELU : RLX_OP_SILU, gate, 0.0f);
        int ff = rlx_g_matmul(g, rlx_g_mul(g, gate, up), wdown);
        if (o->post_norms) {
            LW(pn, "post_ffw_norm.weight", d, 0, true);
            ff = rlx_g_mul(g, rlx_g_rms_norm(g, ff, c->norm_eps), pn);
        }
        x = rlx_g_add(g, ff, x);
#undef LW
    }
    int out_norm = W("output_norm.weight", d, 0, true);
    CHECK(out_norm);
    int wout = c->tied ? emb : W("output.weight", d, c->n_vocab, true);
    CHECK(wout);
    x = rlx_g_mul(g, rlx_g_rms_norm(g, x, c->norm_eps), out_norm);
    if (embed) {
        rlx_g_set_output(g, x, RLX_OUTPUT_HIDDEN);
        return g->oom ? rlx_errorf(err, RLX_ENOMEM, "out of memory while building the graph") : 0;
    }
    int logits = rlx_g_matmul(g, x, wout);
    if (o->out_bias) {
        int ob = W("output.bias", c->n_vocab, 0, false);
        CHECK(ob);
        if (ob >= 0) logits = rlx_g_add(g, logits, ob);
    }
    if (c->final_softcap > 0.0f) logits = rlx_g_unary(g, RLX_OP_SOFTCAP, logits, c->final_softcap);
    rlx_g_set_output(g, logits, RLX_OUTPUT_LOGITS);
    return g->oom ? rlx_errorf(err, RLX_ENOMEM, "out of memory while building the graph") : 0;
}
