/* gemma2.c - the Gemma 2 family: the shared decoder with GeGLU, embeddings scaled by
 * sqrt(n_embd), post-attention / post-FFN norms, attention-logit and final-logit soft-capping,
 * and a sliding window on every other layer (layers 0, 2, 4, ... slide; 1, 3, ... are global)
 * unless attention.sliding_window_pattern says otherwise, the sliding layers using
 * rope.freq_base_swa when given, as llama.cpp's gemma2 graph does. GGUF norm weights already
 * include Gemma's "+ 1". */
#include "models/model.h"

#include <math.h>

static int gemma2_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err)
{
    int rc;
    c->rope_mode = RLX_ROPE_NEOX;
    c->embd_scale = true;
    /* llama.cpp's defaults when the keys are absent */
    c->sliding_window = 4096;
    c->attn_softcap = 50.0f;
    c->final_softcap = 30.0f;
    if ((rc = rlx_model_key_u32(g, c->arch, "attention.sliding_window", &c->sliding_window, false, err)) ||
        (rc = rlx_model_key_f32(g, c->arch, "attn_logit_softcapping", &c->attn_softcap, err)) ||
        (rc = rlx_model_key_f32(g, c->arch, "final_logit_softcapping", &c->final_softcap, err)) ||
        (rc = rlx_model_swa_pattern(g, c, 2, err)) ||
        (rc = rlx_model_key_f32(g, c->arch, "rope.freq_base_swa", &c->rope_base_swa, err)))
        return rc;
    if (c->attn_softcap < 0.0f || c->final_softcap < 0.0f || c->rope_base_swa < 0.0f)
        return rlx_errorf(err, RLX_EFORMAT, "%s: soft-capping values must not be negative", rlx_gguf_path(g));
    c->attn_scale = 1.0f / sqrtf((float)rlx_model_gemma_query_dim(false, c->n_layer, c->n_embd, c->n_head, c->head_dim));
    return 0;
}

static int gemma2_build(const rlx_model *m, rlx_graph *g, rlx_error *err)
{
    static const rlx_decoder_opts opts = {.post_norms = true, .gelu = true, .scale_q = true};
    return rlx_build_decoder(m, &opts, g, err);
}

const rlx_arch rlx_arch_gemma2 = {"gemma2", gemma2_config, gemma2_build};
