/* qwen2.c - the Qwen2 family (Qwen1.5, Qwen2, Qwen2.5): the shared decoder with biases on the
 * q/k/v projections (and on the output, if the file has one) and NEOX-mode RoPE. */
#include "models/model.h"

static int qwen2_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err)
{
    c->rope_mode = RLX_ROPE_NEOX;
    /* llama.cpp's qwen2 has no separate head size: its projections are n_embd wide */
    if (c->head_dim * c->n_head != c->n_embd)
        return rlx_errorf(err, RLX_EUNSUPPORTED,
                          "%s: a qwen2 model needs attention.key_length x head_count = embedding_length (%d x %d != %d), "
                          "as llama.cpp requires; a model with its own head size is a qwen3-style one",
                          rlx_gguf_path(g), c->head_dim, c->n_head, c->n_embd);
    return 0;
}

static int qwen2_build(const rlx_model *m, rlx_graph *g, rlx_error *err)
{
    static const rlx_decoder_opts opts = {.qkv_bias = true, .out_bias = true};
    return rlx_build_decoder(m, &opts, g, err);
}

const rlx_arch rlx_arch_qwen2 = {"qwen2", qwen2_config, qwen2_build};
