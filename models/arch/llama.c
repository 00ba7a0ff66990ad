/* llama.c - the Llama family (Llama 1-3, TinyStories, Mistral-style GQA): the shared decoder
 * with NORM-mode RoPE; Llama 3 frequency factors come from rope_freqs.weight when present. */
#include "models/model.h"

static int llama_config(const rlx_gguf *g, rlx_model_config *c, rlx_error *err)
{
    (void)g;
    (void)err;
    c->rope_mode = RLX_ROPE_NORM;
    return 0;
}

static int llama_build(const rlx_model *m, rlx_graph *g, rlx_error *err)
{
    static const rlx_decoder_opts opts = {0};
    return rlx_build_decoder(m, &opts, g, err);
}

const rlx_arch rlx_arch_llama = {"llama", llama_config, llama_build};
