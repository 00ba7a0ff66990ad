/* gemma3.c - the Gemma 3 family (text): Gemma 2's block with per-head Q/K norms and no
 * attention soft-capping. As llama.cpp reads it: with gemma3.attention.sliding_window, five
 * sliding-window layers to every global one (sliding_window_pattern, a number or per-layer
 * flags, may say otherwise), the sliding layers using rope.freq_base_swa (default 10000)
 * without scaling while global layers use rope.freq_base and rope.scaling (linear x8 on 4B+);
 * without it, every layer is global. final_logit_softcapping applies when given. */
#include "models/model.h"

#include <math.h>

static int gemma3_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err)
{
    int rc;
    c->rope_mode = RLX_ROPE_NEOX;
    c->embd_scale = true;
    c->sliding_window = 0;
    c->rope_base_swa = 10000.0f;
    c->rope_freq_scale_swa = 1.0f;
    c->final_softcap = 0.0f;
    if ((rc = rlx_model_key_u32(g, c->arch, "attention.sliding_window", &c->sliding_window, false, err)) ||
        (rc = rlx_model_key_f32(g, c->arch, "final_logit_softcapping", &c->final_softcap, err)))
        return rc;
    if (c->sliding_window > 0 &&
        ((rc = rlx_model_swa_pattern(g, c, 6, err)) || (rc = rlx_model_key_f32(g, c->arch, "rope.freq_base_swa", &c->rope_base_swa, err))))
        return rc;
    if (c->final_softcap < 0.0f || !(c->rope_base_swa > 0.0f))
        return rlx_errorf(err, RLX_EFORMAT, "%s: final_logit_softcapping must not be negative, rope.freq_base_swa must be positive",
                          rlx_gguf_path(g));
    c->attn_scale = 1.0f / sqrtf((float)rlx_model_gemma_query_dim(true, c->n_layer, c->n_embd, c->n_head, c->head_dim));
    return 0;
}

static int gemma3_build(const rlx_model *m, rlx_graph *g, rlx_error *err)
{
    static const rlx_decoder_opts opts = {.qk_norm = true, .post_norms = true, .gelu = true, .scale_q = true};
    return rlx_build_decoder(m, &opts, g, err);
}

const rlx_arch rlx_arch_gemma3 = {"gemma3", gemma3_config, gemma3_build};
