/* backend.c - backend selection by name: the configured name, else the RLXD_BACKEND
 * environment variable (with RLXD_DEVICE for the GPU index; so every command and the daemon
 * can be pointed at a GPU without a flag), else "cpu". GPU backends exist only when compiled in (RLX_HAVE_VULKAN/RLX_HAVE_CUDA). */
#include "backends/backend.h"
#include "backends/quant.h"
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#ifdef RLX_HAVE_CUDA
#include "backends/cuda/cuda.h"
#endif

#include <stdlib.h>
#include <string.h>

#define AVAILABLE "cpu" VK_NAME CUDA_NAME
#ifdef RLX_HAVE_VULKAN
#define VK_NAME ", vulkan"
#else
#define VK_NAME ""
#endif
#ifdef RLX_HAVE_CUDA
#define CUDA_NAME ", cuda"
#else
#define CUDA_NAME ""
#endif

int rlx_backend_create(rlx_backend **out, const rlx_backend_config *cfg, rlx_error *err)
{
    const char *name = cfg && cfg->name && *cfg->name ? cfg->name : getenv("RLXD_BACKEND");
    int device = cfg ? cfg->device : 0;
    /* a backend named by the environment takes its device index from there too */
    if (name && (!cfg || !cfg->name || !*cfg->name) && getenv("RLXD_DEVICE")) device = atoi(getenv("RLXD_DEVICE"));
    if (!name || !*name) name = "cpu";
    if (!strcmp(name, "cpu")) return rlx_backend_cpu_create(out, cfg ? cfg->n_threads : 0, err);
#ifdef RLX_HAVE_VULKAN
    if (!strcmp(name, "vulkan")) return rlx_backend_vulkan_create(out, device, cfg ? cfg->cache_dir : NULL, err);
#endif
#ifdef RLX_HAVE_CUDA
    if (!strcmp(name, "cuda")) return rlx_backend_cuda_create(out, device, err);
#endif
    (void)device;
    if (!strcmp(name, "vulkan") || !strcmp(name, "cuda"))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "backend '%s' is not compiled into this build (available: %s); "
                          "rebuild with -DRLX_%s=ON", name, AVAILABLE, !strcmp(name, "cuda") ? "CUDA" : "VULKAN");
    return rlx_errorf(err, RLX_EUNSUPPORTED, "unknown backend '%s' (available: %s)", name, AVAILABLE);
}

const char *rlx_backend_builtin_causal(const rlx_backend *be, const rlx_graph *g, const rlx_node *n)
{
    (void)be;
    if (n->op >= RLX_OP_COUNT || n->op == RLX_OP_NONE) return "this backend has kernels for the built-in ops only";
    if (n->op == RLX_OP_ATTENTION && rlx_graph_layer_mem(g, n->p.attn.layer).kind != RLX_MEM_KV)
        return "attention without a KV cache (encoders) has no kernel here";
    if (n->op >= RLX_OP_SIGMOID) return "recurrent-model ops have CPU kernels only (use --backend cpu)";
    if (n->op == RLX_OP_ATTENTION && n->p.attn.mask != RLX_ATTN_CAUSAL) return "bidirectional attention has no kernel here";
    if (n->op == RLX_OP_NORM) return "layer norm has no kernel here";
    if (n->op == RLX_OP_GET_ROWS_POS) return "learned position embeddings have no kernel here";
    return NULL;
}

const char *rlx_backend_builtin_encoders(const rlx_backend *be, const rlx_graph *g, const rlx_node *n)
{
    if (n->op == RLX_OP_NORM || n->op == RLX_OP_GET_ROWS_POS) return NULL;
    if (n->op == RLX_OP_ATTENTION && rlx_graph_layer_mem(g, n->p.attn.layer).kind == RLX_MEM_NONE) return NULL;
    return rlx_backend_builtin_causal(be, g, n);
}

int rlx_backend_check_plan(const rlx_backend *be, const rlx_plan *plan, rlx_error *err)
{
    const rlx_graph *g = plan->graph;
    const char *name = be->ops->name;
    if (g->output_kind == RLX_OUTPUT_HIDDEN && !be->ops->hidden_output)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "the %s backend cannot return hidden states (the model's graph output); "
                          "use the cpu backend", name);
    /* every node, also those fused into a step's chain */
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node *n = &g->nodes[i];
        const char *why = be->ops->unsupported ? be->ops->unsupported(be, g, n) : NULL;
        if (why)
            return rlx_errorf(err, RLX_EUNSUPPORTED, "the %s backend does not support op '%s'%s%s (node %d of the model's graph)",
                              name, rlx_op_name(n->op), *why ? ": " : "", why, i);
    }
    return 0;
}

/* c rows of one sequence, the i-th of them: llama.cpp's kind for it (see rlx_batch.decode) */
static uint8_t derived_kind(int32_t i, int32_t c)
{
    return c == 1 ? RLX_TOKEN_DECODE : i < c - c % 4 ? RLX_TOKEN_PROMPT : RLX_TOKEN_PROMPT_TAIL;
}

void rlx_batch_kinds(const rlx_batch *b, int32_t *counts, uint8_t *tok, uint8_t *out)
{
    const size_t ns = (size_t)b->n_seqs;
    int32_t *ntok = counts, *nout = counts + ns, *ti = counts + 2 * ns, *oi = counts + 3 * ns;
    memset(counts, 0, 4 * ns * sizeof *counts);
    for (int32_t i = 0; i < b->n_tokens; i++) {
        ntok[b->seq[i]]++;
        nout[b->seq[i]] += b->output[i] != 0;
    }
    for (int32_t i = 0, o = 0; i < b->n_tokens; i++) {
        const int32_t q = b->seq[i];
        tok[i] = b->decode ? b->decode[i] : derived_kind(ti[q], ntok[q]);
        ti[q]++;
        /* a generated token's row is a one-token step's in llama.cpp, also when a sequence
         * has several (speculative drafts, engine/spec.h) */
        if (b->output[i]) {
            const uint8_t k = derived_kind(oi[q]++, nout[q]);
            out[o++] = b->decode && b->decode[i] == RLX_TOKEN_DECODE ? RLX_TOKEN_DECODE : k;
        }
    }
}

int rlx_batch_validate(const rlx_batch *b, const rlx_plan *plan, const rlx_mem_desc *kv, int64_t n_vocab,
                       rlx_error *err)
{
    if (b->n_tokens <= 0 || b->n_tokens > plan->max_tokens || b->n_outputs > plan->max_outputs || b->n_outputs < 0)
        return rlx_errorf(err, RLX_EINVAL, "batch of %d tokens / %d outputs exceeds the plan (%d / %d)",
                          b->n_tokens, b->n_outputs, plan->max_tokens, plan->max_outputs);
    int32_t o = 0;
    bool any_kv = false; /* without KV layers (encoders) positions need no blocks */
    for (int32_t l = 0; l < kv->n_layers && !any_kv; l++) any_kv = rlx_mem_desc_layer(kv, l).kind == RLX_MEM_KV;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->seq[i] < 0 || b->seq[i] >= b->n_seqs)
            return rlx_errorf(err, RLX_EINVAL, "batch token %d names sequence %d of %d", i, b->seq[i], b->n_seqs);
        if (b->output[i] && ++o > b->n_outputs) return rlx_errorf(err, RLX_EINVAL, "batch marks more outputs than n_outputs");
        const rlx_batch_seq *s = &b->seqs[b->seq[i]];
        if (kv->n_state_slots > 0 && (s->state_slot < 0 || s->state_slot >= kv->n_state_slots))
            return rlx_errorf(err, RLX_ERANGE, "batch sequence %d names state slot %d of %d", b->seq[i], s->state_slot,
                              kv->n_state_slots);
        if (b->pos[i] < 0 || (any_kv && b->pos[i] / kv->block_size >= s->n_blocks) || b->tokens[i] < 0 || b->tokens[i] >= n_vocab)
            return rlx_errorf(err, RLX_ERANGE, "batch holds a token id or position outside the model or its KV blocks");
    }
    if (o != b->n_outputs) return rlx_errorf(err, RLX_EINVAL, "batch marks %d outputs, n_outputs is %d", o, b->n_outputs);
    for (int32_t s = 0; s < b->n_seqs; s++)
        for (int32_t k = 0; k < b->seqs[s].n_blocks; k++)
            if (b->seqs[s].blocks[k] < 0 || b->seqs[s].blocks[k] >= kv->n_blocks)
                return rlx_errorf(err, RLX_ERANGE, "sequence %d names KV block %d of %d", s, b->seqs[s].blocks[k], kv->n_blocks);
    /* learned position rows (encoders) inside their table */
    const rlx_graph *g = plan->graph;
    for (int i = 0; i < plan->n_steps; i++) {
        const rlx_node *n = &plan->steps[i].node;
        if (n->op != RLX_OP_GET_ROWS_POS) continue;
        for (int32_t t = 0; t < b->n_tokens; t++)
            if (b->pos[t] >= g->tensors[n->in[0]].ne[1])
                return rlx_errorf(err, RLX_ERANGE, "batch position %d is past the model's %lld learned positions", b->pos[t],
                                  (long long)g->tensors[n->in[0]].ne[1]);
    }
    return 0;
}

int rlx_batch_whole_seqs(const rlx_batch *b, const rlx_plan *plan, const rlx_mem_desc *kv, rlx_error *err)
{
    bool nocache = false;
    for (int i = 0; i < plan->n_steps && !nocache; i++) {
        const rlx_node *n = &plan->steps[i].node;
        nocache = n->op == RLX_OP_ATTENTION && n->p.attn.layer >= 0 && n->p.attn.layer < kv->n_layers &&
                  rlx_mem_desc_layer(kv, n->p.attn.layer).kind == RLX_MEM_NONE;
    }
    for (int32_t t = 0; nocache && t < b->n_tokens; t++) {
        const bool cont = t > 0 && b->seq[t] == b->seq[t - 1];
        if (b->pos[t] != (cont ? b->pos[t - 1] + 1 : 0))
            return rlx_errorf(err, RLX_EINVAL, "attention without a KV cache needs each sequence whole and in position order "
                              "(batch token %d of sequence %d is at position %d)", t, b->seq[t], b->pos[t]);
        for (int32_t u = 0; !cont && u < t; u++) /* a sequence's tokens in one run */
            if (b->seq[u] == b->seq[t])
                return rlx_errorf(err, RLX_EINVAL, "attention without a KV cache needs each sequence's tokens contiguous "
                                  "(sequence %d is split in the batch)", b->seq[t]);
    }
    return 0;
}

size_t rlx_kv_row_bytes(int type, int64_t kv_cols)
{
    if (kv_cols <= 0) return 0;
    switch (type) {
    case RLX_F32: return (size_t)kv_cols * 4;
    case RLX_F16: return (size_t)kv_cols * 2;
    case RLX_Q8_0: return kv_cols % RLX_QK ? 0 : (size_t)(kv_cols / RLX_QK) * sizeof(rlx_block_q8_0);
    default: return 0;
    }
}

int rlx_kv_type_check(int type, int64_t kv_cols, rlx_error *err)
{
    if (type != RLX_F32 && type != RLX_F16 && type != RLX_Q8_0) {
        const rlx_dtype_info *t = rlx_dtype_get(type);
        return rlx_errorf(err, RLX_EUNSUPPORTED, "the KV cache cannot hold %s; use f16, f32 or q8_0", t ? t->name : "this type");
    }
    if (!rlx_kv_row_bytes(type, kv_cols))
        return rlx_errorf(err, RLX_EUNSUPPORTED, "a q8_0 KV cache needs the KV row width (KV heads x head_dim = %lld) "
                          "to be a multiple of 32; use --kv-type f16 for this model", (long long)kv_cols);
    return 0;
}

int rlx_mem_desc_check(const rlx_mem_desc *d, bool can_state, const char *backend, rlx_error *err)
{
    if (d->n_layers <= 0 || d->n_blocks <= 0 || d->block_size <= 0 || d->n_state_slots < 0)
        return rlx_errorf(err, RLX_EINVAL, "%s: empty memory description", backend);
    for (int32_t l = 0; l < d->n_layers; l++) {
        rlx_mem_layer m = rlx_mem_desc_layer(d, l);
        if (m.kind == RLX_MEM_KV) {
            int rc = rlx_kv_type_check(d->type, m.kv_cols, err);
            if (rc) return rc;
        } else if (m.kind == RLX_MEM_STATE) {
            if (!can_state)
                return rlx_errorf(err, RLX_EUNSUPPORTED, "%s: layer %d keeps a recurrent state, which this backend cannot "
                                  "hold; use --backend cpu", backend, l);
            if (m.state_bytes <= 0 || d->n_state_slots <= 0)
                return rlx_errorf(err, RLX_EINVAL, "%s: recurrent layer %d needs a state size and state slots", backend, l);
        } else if (m.kind != RLX_MEM_NONE) {
            return rlx_errorf(err, RLX_EINVAL, "%s: layer %d has an unknown memory kind %d", backend, l, (int)m.kind);
        }
    }
    return 0;
}

size_t rlx_mem_block_bytes(const rlx_mem_desc *d)
{
    size_t n = 0;
    for (int32_t l = 0; l < d->n_layers; l++) {
        rlx_mem_layer m = rlx_mem_desc_layer(d, l);
        if (m.kind == RLX_MEM_KV) n += 2 * (size_t)d->block_size * rlx_kv_row_bytes(d->type, m.kv_cols);
    }
    return n;
}

size_t rlx_mem_slot_bytes(const rlx_mem_desc *d)
{
    size_t n = 0;
    for (int32_t l = 0; l < d->n_layers; l++) {
        rlx_mem_layer m = rlx_mem_desc_layer(d, l);
        if (m.kind == RLX_MEM_STATE) n += (size_t)m.state_bytes;
    }
    return n;
}
