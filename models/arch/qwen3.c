/* qwen3.c - the Qwen3 family (dense): the shared decoder with per-head RMS norms of Q and K
 * (attn_q_norm / attn_k_norm, before RoPE), NEOX-mode RoPE and no projection biases. */
#include "models/model.h"

static int qwen3_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err)
{
    (void)g;
    (void)err;
    c->rope_mode = RLX_ROPE_NEOX;
    return 0;
}

static int qwen3_build(const rlx_model *m, rlx_graph *g, rlx_error *err)
{
    static const rlx_decoder_opts opts = {.qk_norm = true};
    return rlx_build_decoder(m, &opts, g, err);
}

const rlx_arch rlx_arch_qwen3 = {"qwen3", qwen3_config, qwen3_build};
