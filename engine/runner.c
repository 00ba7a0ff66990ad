/* runner.c - model + compiled plan + backend + memory (KV pool, state slots). */
#include "engine/runner.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rlx_runner_open(rlx_runner **out, const rlx_runner_config *cfg, rlx_error *err)
{
    rlx_runner *r = calloc(1, sizeof *r);
    rlx_backend *backend_impl = cfg->backend_impl; /* ours from here on */
    if (!r) {
        rlx_backend_destroy(backend_impl);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    rlx_graph_init(&r->graph);
    double t = rlx_now(), t1;
    int rc = rlx_model_load(&r->model, cfg->model_path, err);
    if (rc) goto fail;
    r->t_map = (t1 = rlx_now()) - t, t = t1;
    const rlx_model_config *mc = &r->model->cfg;
    r->n_vocab = mc->n_vocab;
    r->n_ctx = cfg->n_ctx > 0 ? cfg->n_ctx : mc->n_ctx_train;
    r->max_seqs = cfg->max_seqs > 0 ? cfg->max_seqs : 1;
    r->max_batch_tokens = cfg->max_batch_tokens > 0 ? cfg->max_batch_tokens : 512;
    r->max_outputs = cfg->max_outputs > 0 ? cfg->max_outputs : r->max_seqs;
    if (r->max_outputs > r->max_batch_tokens) r->max_outputs = r->max_batch_tokens;
    if ((rc = rlx_model_build(r->model, &r->graph, err))) goto fail;
    r->t_build = (t1 = rlx_now()) - t, t = t1;
    const bool hidden = r->graph.output_kind == RLX_OUTPUT_HIDDEN;
    if (hidden && r->max_batch_tokens < r->n_ctx) r->max_batch_tokens = r->n_ctx; /* an input in one step */
    r->out_cols = hidden ? r->graph.tensors[r->graph.output].cols : r->n_vocab;
    rlx_compile_opts co = {.max_tokens = r->max_batch_tokens, .max_outputs = r->max_outputs,
                           .tokens_hint = cfg->tokens_hint, .outputs_hint = cfg->outputs_hint};
    if ((rc = rlx_compile(&r->graph, &co, &r->plan, err))) goto fail;
    r->t_compile = (t1 = rlx_now()) - t, t = t1;
    if (cfg->mem_layers) {
        free(r->graph.mem);
        if (!(r->graph.mem = malloc((size_t)r->graph.n_layers * sizeof *r->graph.mem))) {
            rc = rlx_errorf(err, RLX_ENOMEM, "out of memory");
            goto fail;
        }
        memcpy(r->graph.mem, cfg->mem_layers, (size_t)r->graph.n_layers * sizeof *r->graph.mem);
    }
    if (cfg->backend_impl) r->backend = backend_impl, backend_impl = NULL;
    else if ((rc = rlx_backend_create(&r->backend, &cfg->backend, err))) goto fail;
    if ((rc = r->backend->ops->prepare(r->backend, &r->plan, err))) goto fail;
    r->t_prepare = (t1 = rlx_now()) - t, t = t1;

    int kv_type = cfg->kv_type_set ? cfg->kv_type : RLX_F16;
    int32_t bs = cfg->kv_block > 0 ? cfg->kv_block : 16;
    /* the description; the block count is settled below */
    r->kv_geo = (rlx_mem_desc){r->graph.n_layers, r->graph.kv_cols, 1, bs, kv_type, r->graph.mem, 0};
    for (int32_t l = 0; l < r->graph.n_layers; l++)
        if (rlx_graph_layer_mem(&r->graph, l).kind == RLX_MEM_STATE) r->kv_geo.n_state_slots = r->max_seqs;
    if ((rc = rlx_mem_desc_check(&r->kv_geo, true, r->backend->ops->name, err))) goto fail;
    /* a model without KV layers still counts positions in blocks: give them a nominal size */
    size_t block_bytes = RLX_MAX(rlx_mem_block_bytes(&r->kv_geo), (size_t)1);
    int64_t nb = cfg->kv_blocks;
    if (nb <= 0 && cfg->kv_mem_mib) nb = (int64_t)((cfg->kv_mem_mib << 20) / block_bytes);
    if (nb <= 0) {
        /* default: room for max_seqs full contexts, but at most a quarter of the memory
         * available now (a 40k-token model context x 16 sequences would ask for tens of GiB) */
        nb = (int64_t)r->max_seqs * ((r->n_ctx + bs - 1) / bs);
        long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psize > 0) {
            int64_t cap = (int64_t)((uint64_t)pages * (uint64_t)psize / 4 / block_bytes);
            int64_t floor_blocks = (r->n_ctx + bs - 1) / bs; /* one full context at least */
            if (nb > cap) nb = RLX_MAX(cap, RLX_MIN(floor_blocks, nb));
        }
        /* a GPU backend keeps the pool in device memory: at most 3/4 of what it has left */
        uint64_t dev = 0;
        if (r->backend->ops->mem_available && !r->backend->ops->mem_available(r->backend, &dev, NULL) && dev > 0)
            nb = RLX_MIN(nb, RLX_MAX(1, (int64_t)(dev / 4 * 3 / block_bytes)));
    }
    if (nb > INT32_MAX / bs) nb = INT32_MAX / bs;
    if (nb < 1) {
        rc = rlx_errorf(err, RLX_EINVAL, "KV memory of %zu MiB holds no block of %zu KiB", cfg->kv_mem_mib, block_bytes >> 10);
        goto fail;
    }
    r->kv_geo.n_blocks = (int32_t)nb;
    if ((rc = rlx_memory_init(&r->mem, r->backend, &r->kv_geo, &r->kv, err))) goto fail;
    r->t_memory = rlx_now() - t;
    /* the graph's output: logits of the output rows, or a hidden state per batch token (room
     * for both, so a caller reading an encoder's output as logits stays inside the buffer) */
    size_t out_floats = (size_t)r->max_outputs * (size_t)r->n_vocab;
    if (hidden) out_floats = RLX_MAX(out_floats, (size_t)r->max_batch_tokens * (size_t)r->out_cols);
    r->logits = malloc(out_floats * sizeof(float));
    if (!r->logits) { rc = rlx_errorf(err, RLX_ENOMEM, "out of memory for logits"); goto fail; }
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(r->model->gguf); i++)
        r->weight_bytes += rlx_gguf_tensor_at(r->model->gguf, i)->size;
    *out = r;
    return 0;
fail:
    rlx_backend_destroy(backend_impl);
    rlx_runner_close(r);
    return rc;
}

void rlx_runner_close(rlx_runner *r)
{
    if (!r) return;
    if (r->backend) rlx_backend_destroy(r->backend);
    rlx_plan_free(&r->plan);
    rlx_graph_free(&r->graph);
    rlx_memory_free(&r->mem);
    rlx_kv_free(&r->kv);
    rlx_model_free(r->model);
    free(r->logits);
    free(r);
}

int rlx_runner_forward(rlx_runner *r, const rlx_batch *b, rlx_error *err)
{
    int rc = r->backend->ops->run(r->backend, &r->plan, b, r->logits, err);
    /* weights are read from the file's mapping: numbers computed after it changed are not the
       model's (a file cut short reads as zeros, models/filemap.h) */
    char why[600];
    if (!rc && rlx_gguf_changed(r->model->gguf, why, sizeof why))
        rc = rlx_errorf(err, RLX_EIO, "the model's file changed on disk while it was loaded (%s); load the model "
                        "again to serve the file as it is now", why);
    return rc;
}

bool rlx_runner_file_changed(const rlx_runner *r, char *why, size_t cap)
{
    return rlx_gguf_changed(r->model->gguf, why, cap);
}

int rlx_runner_reserve(rlx_runner *r, int32_t **table, int32_t *n_blocks, int32_t *cap, int32_t n_pos)
{
    int32_t need = (n_pos + r->kv.block_size - 1) / r->kv.block_size;
    if (need > *cap) {
        int32_t nc = RLX_MAX(need, *cap * 2);
        int32_t *t = realloc(*table, (size_t)nc * sizeof *t);
        if (!t) return RLX_ENOMEM;
        *table = t;
        *cap = nc;
    }
    while (*n_blocks < need) {
        int32_t b = rlx_kv_alloc(&r->kv);
        if (b < 0) return RLX_EFULL;
        (*table)[(*n_blocks)++] = b;
    }
    return 0;
}
