/* vk_backend.c - the Vulkan backend's lifetime and memory: weights uploaded once at prepare()
 * into a few large buffers ("slabs"), the activation arena, the matmul scratch, the batch
 * buffer, and run(): validate the batch, write its words (ids, positions, block tables, rope
 * tables), submit the commands recorded for its shape (vk_shape.c; recorded on first use) and
 * read the logits back. The paged KV pool is in vk_kv.c. */
#include "backends/vulkan/vk_internal.h"
#include "backends/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SLAB_MAX ((VkDeviceSize)1 << 30)

static const char *const pipeline_names[PL_COUNT] = {
    [PL_EW] = "ew", [PL_RMS] = "rms_norm", [PL_GET_ROWS] = "get_rows", [PL_ACTQ] = "actq", [PL_MATMUL] = "matmul",
    [PL_ROPE] = "rope", [PL_GATHER] = "gather"};

static void free_plan_state(vk_backend *be)
{
    vk_dev *d = &be->d;
    if (!d->dev) return;
    for (int i = 0; i < be->n_slabs; i++) rlx__vk_buffer_free(d, &be->slabs[i]);
    free(be->slabs);
    free(be->w_slab);
    free(be->w_off);
    free(be->ropes);
    be->slabs = NULL;
    be->w_slab = NULL;
    be->w_off = NULL;
    be->ropes = NULL;
    be->n_slabs = be->n_ropes = 0;
    rlx__vk_shapes_drop(be);
    rlx__vk_buffer_free(d, &be->arena);
    rlx__vk_buffer_free(d, &be->scratch);
    rlx__vk_buffer_free(d, &be->readback);
    rlx__vk_buffer_free(d, &be->batch);
    be->plan = NULL;
}

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

/* Packs every weight of the graph into slabs (tensors sharing data share the copy). */
static int upload_weights(vk_backend *be, const rlx_graph *g, rlx_error *err)
{
    int nt = g->n_tensors;
    be->w_slab = malloc((size_t)nt * sizeof *be->w_slab);
    be->w_off = calloc((size_t)nt, sizeof *be->w_off);
    VkDeviceSize *slab_size = calloc((size_t)nt + 1, sizeof *slab_size);
    if (!be->w_slab || !be->w_off || !slab_size) { free(slab_size); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
    VkDeviceSize limit = be->d.max_alloc < SLAB_MAX ? be->d.max_alloc : SLAB_MAX;
    int n_slabs = 0;
    for (int t = 0; t < nt; t++) {
        const rlx_gtensor *x = &g->tensors[t];
        be->w_slab[t] = -1;
        if (!x->is_weight) continue;
        int same = -1;
        for (int u = 0; u < t && same < 0; u++)
            if (g->tensors[u].is_weight && g->tensors[u].data == x->data && g->tensors[u].wtype == x->wtype &&
                g->tensors[u].ne[0] == x->ne[0] && g->tensors[u].ne[1] == x->ne[1]) same = u;
        if (same >= 0) { be->w_slab[t] = be->w_slab[same]; be->w_off[t] = be->w_off[same]; continue; }
        VkDeviceSize bytes = rlx_row_bytes(x->wtype, x->ne[0]) * (VkDeviceSize)x->ne[1];
        if (bytes == 0)
            { free(slab_size); return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: tensor '%s' has no usable layout", x->name ? x->name : "?"); }
        if (n_slabs == 0 || align_up(slab_size[n_slabs - 1], 256) + bytes > limit) n_slabs++;
        VkDeviceSize off = align_up(slab_size[n_slabs - 1], 256);
        be->w_slab[t] = n_slabs - 1;
        be->w_off[t] = off;
        slab_size[n_slabs - 1] = off + bytes;
    }
    be->slabs = calloc((size_t)(n_slabs ? n_slabs : 1), sizeof *be->slabs);
    if (!be->slabs) { free(slab_size); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
    int rc = 0;
    for (int i = 0; i < n_slabs && !rc; i++)
        if (!(rc = rlx__vk_buffer(&be->d, &be->slabs[i], slab_size[i], false, err))) be->n_slabs = i + 1;
    free(slab_size);
    for (int t = 0; t < nt && !rc; t++) {
        const rlx_gtensor *x = &g->tensors[t];
        if (be->w_slab[t] < 0 || !x->data) continue;
        size_t bytes = rlx_row_bytes(x->wtype, x->ne[0]) * (size_t)x->ne[1];
        rc = rlx__vk_write(&be->d, &be->slabs[be->w_slab[t]], be->w_off[t], x->data, bytes, err);
    }
    return rc;
}

static int check_plan(vk_backend *be, const rlx_plan *plan, rlx_error *err)
{
    const rlx_graph *g = plan->graph;
    int rc = rlx_backend_check_plan(&be->base, plan, err);
    if (rc) return rc;
    if (plan->max_tokens > 65535)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: batches of more than 65535 tokens are not supported");
    be->min_vocab = INT64_MAX;
    be->ropes = calloc((size_t)plan->n_steps + 1, sizeof *be->ropes);
    if (!be->ropes) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (int i = 0; i < plan->n_steps; i++) {
        const rlx_node *n = &plan->steps[i].node;
        if (n->op == RLX_OP_GET_ROWS && g->tensors[n->in[0]].ne[1] < be->min_vocab) be->min_vocab = g->tensors[n->in[0]].ne[1];
        if (n->op == RLX_OP_ATTENTION && (n->p.attn.head_dim > 512 || n->p.attn.head_dim <= 0))
            return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: attention head size %d is above 512", n->p.attn.head_dim);
        if (n->op == RLX_OP_ROPE) {
            const rlx_rope_params *rp = &n->p.rope;
            if (rp->n_rot > 1024 || rp->n_rot % 2 || rp->head_dim % 2 || rp->n_rot > rp->head_dim)
                return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: rope with %d rotated of %d dims is not supported", rp->n_rot, rp->head_dim);
            if (n->in[1] >= 0 && (!g->tensors[n->in[1]].is_weight || g->tensors[n->in[1]].wtype != RLX_F32))
                return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: rope frequency factors must be an f32 weight");
            bool seen = false;
            for (int r = 0; r < be->n_ropes; r++) {
                const vk_rope_tab *t = &be->ropes[r];
                seen |= t->n_rot == rp->n_rot && t->base == rp->freq_base && t->scale == rp->freq_scale && t->ff == n->in[1];
            }
            if (!seen) be->ropes[be->n_ropes++] = (vk_rope_tab){rp->n_rot, rp->freq_base, rp->freq_scale, n->in[1], 0};
        }
    }
    return 0;
}

static int vk_prepare(rlx_backend *be_, const rlx_plan *plan, rlx_error *err)
{
    vk_backend *be = (vk_backend *)be_;
    free_plan_state(be);
    const rlx_graph *g = plan->graph;
    int rc = check_plan(be, plan, err);
    if (rc) goto fail;
    be->plan = plan;
    if ((rc = upload_weights(be, g, err))) goto fail;
    if ((rc = rlx__vk_buffer(&be->d, &be->arena, plan->arena_bytes, false, err))) goto fail;
    VkDeviceSize scratch = 16;
    for (int i = 0; i < plan->n_steps; i++) {
        const rlx_node *n = &plan->steps[i].node;
        if (n->op != RLX_OP_MATMUL) continue;
        const rlx_gtensor *x = &g->tensors[n->in[0]];
        VkDeviceSize rows = x->rows == RLX_ROWS_OUTPUTS ? (VkDeviceSize)plan->max_outputs : (VkDeviceSize)plan->max_tokens;
        /* rec_matmul's layout: values, block scales (K/32 at most), Q8_K's 16-value sums */
        VkDeviceSize need = rows * (VkDeviceSize)x->cols * 4 + rows * (VkDeviceSize)(x->cols / 32 + x->cols / 16) * 4;
        if (need > scratch) scratch = need;
    }
    if ((rc = rlx__vk_buffer(&be->d, &be->scratch, scratch, false, err))) goto fail;
    /* the batch buffer's layout, fixed for every batch this plan runs (vk_internal.h) */
    size_t T = (size_t)plan->max_tokens, at = 3 * T + (size_t)plan->max_outputs;
    be->kind_off = (uint32_t)at;
    at += T + (size_t)plan->max_outputs;
    for (int r = 0; r < be->n_ropes; r++) {
        be->ropes[r].off = (uint32_t)at;
        at += T * (size_t)be->ropes[r].n_rot;
    }
    be->batch_fixed = at;
    uint32_t *L = be->batch_words;
    L[VK_BW_TOK] = 0;
    L[VK_BW_POS] = (uint32_t)T;
    L[VK_BW_SEQ] = (uint32_t)(2 * T);
    L[VK_BW_OIDX] = (uint32_t)(3 * T);
    L[VK_BW_SBASE] = (uint32_t)at;
    if ((rc = rlx__vk_buffer(&be->d, &be->batch, (at + 4096) * 4, true, err))) goto fail;
    if (!be->arena.map) {
        size_t rows = g->output_kind == RLX_OUTPUT_HIDDEN ? (size_t)plan->max_tokens : (size_t)plan->max_outputs;
        size_t lb = rows * (size_t)g->tensors[g->output].cols * 4;
        if ((rc = rlx__vk_buffer(&be->d, &be->readback, lb, true, err))) goto fail;
    }
    /* count the dispatches of a run (parameter slots, descriptor sets) and check every
     * binding at the plan's largest batch */
    be->counting = true;
    be->slot = 0;
    be->cur_tokens = plan->max_tokens;
    be->cur_outputs = plan->max_outputs;
    for (int i = 0; i < plan->n_steps && !rc; i++) rc = rlx__vk_record_step(be, &plan->steps[i], err);
    be->counting = false;
    if (rc) goto fail;
    be->n_slots = be->slot + 1;
    be->slot_bytes = align_up(VK_PARAM_WORDS * 4, be->d.align);
    return 0;
fail:
    free_plan_state(be);
    return rc;
}

static int vk_kv_init(rlx_backend *be, const rlx_mem_desc *geo, rlx_error *err)
{
    return rlx__vk_kv_init((vk_backend *)be, geo, err);
}

static int vk_kv_read_block(rlx_backend *be, int32_t layer, int32_t block, void *k, void *v, rlx_error *err)
{
    return rlx__vk_kv_block_io((vk_backend *)be, layer, block, k, v, false, err);
}

static int vk_kv_write_block(rlx_backend *be, int32_t layer, int32_t block, const void *k, const void *v, rlx_error *err)
{
    return rlx__vk_kv_block_io((vk_backend *)be, layer, block, (void *)(uintptr_t)k, (void *)(uintptr_t)v, true, err);
}

static int validate_batch(const vk_backend *be, const rlx_plan *plan, const rlx_batch *b, rlx_error *err)
{
    if (be->kv.geo.n_layers <= 0) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (plan != be->plan) return rlx_errorf(err, RLX_EINVAL, "plan was not prepared on this backend");
    int rc = rlx_batch_validate(b, plan, &be->kv.geo, be->min_vocab, err);
    return rc ? rc : rlx_batch_whole_seqs(b, plan, &be->kv.geo, err);
}

/* Writes the batch words at the plan's fixed offsets (vk_internal.h); the block tables go
 * after table_start. A batch whose tables outgrow the buffer replaces it, which drops the
 * recorded commands (they bind it). */
static int write_batch(vk_backend *be, const rlx_batch *b, rlx_error *err)
{
    const rlx_graph *g = be->plan->graph;
    const uint32_t *L = be->batch_words;
    size_t T = (size_t)b->n_tokens, S = (size_t)b->n_seqs, words = be->batch_fixed + S;
    for (size_t s = 0; s < S; s++) words += (size_t)b->seqs[s].n_blocks;
    if (words * 4 > be->batch.size) {
        rlx__vk_shapes_drop(be);
        rlx__vk_buffer_free(&be->d, &be->batch);
        int rc = rlx__vk_buffer(&be->d, &be->batch, words * 8, true, err);
        if (rc) return rc;
    }
    int32_t *w = be->batch.map;
    memcpy(w + L[VK_BW_TOK], b->tokens, T * 4);
    memcpy(w + L[VK_BW_POS], b->pos, T * 4);
    memcpy(w + L[VK_BW_SEQ], b->seq, T * 4);
    size_t o = 0, at = be->batch_fixed + S;
    for (size_t i = 0; i < T; i++) if (b->output[i]) w[L[VK_BW_OIDX] + o++] = (int32_t)i;
    size_t need = 4 * S + (T + (size_t)b->n_outputs + 3) / 4;
    if (need > be->kind_scratch_words) {
        int32_t *k = realloc(be->kind_scratch, need * 4);
        if (!k) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        be->kind_scratch = k;
        be->kind_scratch_words = need;
    }
    uint8_t *kt = (uint8_t *)(be->kind_scratch + 4 * S), *ko = kt + T;
    rlx_batch_kinds(b, be->kind_scratch, kt, ko);
    for (size_t i = 0; i < T; i++) w[be->kind_off + i] = kt[i];
    for (size_t i = 0; i < (size_t)b->n_outputs; i++) w[be->kind_off + (size_t)be->plan->max_tokens + i] = ko[i];
    for (size_t s = 0; s < S; s++) {
        w[L[VK_BW_SBASE] + s] = (int32_t)at;
        if (b->seqs[s].n_blocks) /* an encoder's sequences have no block table (NULL) */
            memcpy(w + at, b->seqs[s].blocks, (size_t)b->seqs[s].n_blocks * 4);
        at += (size_t)b->seqs[s].n_blocks;
    }
    for (int r = 0; r < be->n_ropes; r++) {
        const vk_rope_tab *rt = &be->ropes[r];
        const float *ff = rt->ff >= 0 ? (const float *)g->tensors[rt->ff].data : NULL;
        for (size_t t = 0; t < T; t++) {
            float *cs = (float *)(w + rt->off + t * (size_t)rt->n_rot);
            rlx_rope_angles(rt->base, rt->scale, ff, rt->n_rot, b->pos[t], cs, cs + rt->n_rot / 2);
        }
    }
    return 0;
}

static int vk_run(rlx_backend *be_, const rlx_plan *plan, const rlx_batch *b, float *logits, rlx_error *err)
{
    vk_backend *be = (vk_backend *)be_;
    int rc = validate_batch(be, plan, b, err);
    if (rc) return rc;
    vk_shape *sh;
    if ((rc = write_batch(be, b, err))) return rc;
    if ((rc = rlx__vk_shape_get(be, b->n_tokens, b->n_outputs, &sh, err))) return rc;
    if ((rc = rlx__vk_submit_cmd(&be->d, sh->cmd, err))) return rc;
    const rlx_graph *g = plan->graph;
    const int32_t rows = g->output_kind == RLX_OUTPUT_HIDDEN ? b->n_tokens : b->n_outputs;
    if (logits && rows) {
        size_t n = (size_t)rows * (size_t)g->tensors[g->output].cols * 4;
        memcpy(logits, be->arena.map ? (const uint8_t *)be->arena.map + plan->offset[g->output] : be->readback.map, n);
    }
    return 0;
}

/* Device memory left for the KV pool: the device-local heap less what this backend holds. */
static int vk_mem_available(rlx_backend *be_, uint64_t *bytes, rlx_error *err)
{
    (void)err;
    vk_backend *be = (vk_backend *)be_;
    *bytes = be->d.heap_bytes > be->d.device_bytes ? be->d.heap_bytes - be->d.device_bytes : 0;
    return 0;
}

int rlx_vk_get_stats(const rlx_backend *be_, rlx_vk_stats *out)
{
    if (!be_ || strcmp(be_->ops->name, "vulkan")) return RLX_EINVAL;
    const vk_backend *be = (const vk_backend *)be_;
    *out = (rlx_vk_stats){be->n_recordings, be->d.device_bytes, be->d.bar_bytes, be->kv.n_chunks, be->d.pc_state,
                          be->d.pc_created, be->d.pc_loaded, be->d.pc_bytes};
    return 0;
}

static void vk_destroy(rlx_backend *be_)
{
    vk_backend *be = (vk_backend *)be_;
    if (be->d.dev) vkDeviceWaitIdle(be->d.dev);
    free_plan_state(be);
    free(be->kind_scratch);
    rlx__vk_kv_free(be);
    rlx__vk_buffer_free(&be->d, &be->dummy);
    for (int i = 0; i < PL_COUNT; i++)
        if (be->pl[i]) vkDestroyPipeline(be->d.dev, be->pl[i], NULL);
    for (int i = 0; i < PL_KV_COUNT * 3 * 2; i++)
        if ((&be->pl_kv[0][0][0])[i]) vkDestroyPipeline(be->d.dev, (&be->pl_kv[0][0][0])[i], NULL);
    if (be->d.dev) rlx__vk_pcache_save(&be->d, NULL); /* the pipelines made since creation (best effort) */
    rlx__vk_close(&be->d);
    free(be);
}

static const rlx_backend_ops vk_ops = {
    .name = "vulkan",
    .unsupported = rlx_backend_builtin_encoders, /* attn.comp masks by position and reads an encoder's K and V rows */
    .hidden_output = true,
    .prepare = vk_prepare,
    .mem_init = vk_kv_init,
    .run = vk_run,
    .kv_read_block = vk_kv_read_block,
    .kv_write_block = vk_kv_write_block,
    .mem_available = vk_mem_available,
    .destroy = vk_destroy,
};

const char *rlx_vk_pcache_state_name(rlx_vk_pcache_state s)
{
    static const char *const names[] = {"off", "new", "loaded", "corrupt (ignored, replaced)",
                                        "stale (another device or driver; ignored, replaced)"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

int rlx_backend_vulkan_create(rlx_backend **out, int device, const char *cache_dir, rlx_error *err)
{
    vk_backend *be = calloc(1, sizeof *be);
    if (!be) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    be->base.ops = &vk_ops;
    int rc = rlx__vk_open(&be->d, device, err);
    if (!rc) rlx__vk_pcache_open(&be->d, cache_dir);
    for (int i = 0; i < PL_COUNT && !rc; i++) rc = rlx__vk_pipeline(&be->d, pipeline_names[i], NULL, 0, &be->pl[i], err);
    if (!rc) rlx__vk_pcache_save(&be->d, NULL); /* now, not only at the end: a daemon that is killed keeps them too */
    if (!rc) rc = rlx__vk_buffer(&be->d, &be->dummy, 256, false, err);
    if (rc) { vk_destroy(&be->base); return rc; }
    *out = &be->base;
    return 0;
}
