/* qwen2.c - the Qwen2 family (Qwen1.5, Qwen2, Qwen2.5): the shared decoder with biases on the
 * q/k/v projections and NEOX-mode RoPE. */
#include "models/model.h"

static int qwen2_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err)
{
    (void)g;
    (void)err;
    c->rope_mode = RLX_ROPE_NEOX;
    return 0;
}

static int qwen2_build(const rlx_model *m, rlx_graph *g, rlx_error *err)
{
    static const rlx_decoder_opts opts = {.qkv_bias = true};
    return rlx_build_decoder(m, &opts, g, err);
}

const rlx_arch rlx_arch_qwen2 = {"qwen2", qwen2_config, qwen2_build};
