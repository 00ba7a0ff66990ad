/* vk_backend.c - the Vulkan backend's lifetime and memory: weights uploaded once at prepare()
 * into a few large buffers ("slabs"), the activation arena, the matmul scratch, the paged KV
 * pool (one K and one V buffer per layer), and run(): validate the batch, write the batch
 * buffer (ids, positions, block tables, rope tables), record every step (vk_record.c) into
 * one command buffer, submit, wait and read the logits back. Command buffers are recorded per
 * run: recording is cheap next to the kernels and keeps the batch shape free. */
#include "backends/vulkan/vk_internal.h"
#include "backends/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SLAB_MAX ((VkDeviceSize)1 << 30)

static const char *const pipeline_names[PL_COUNT] = {
    [PL_EW] = "ew", [PL_RMS] = "rms_norm", [PL_GET_ROWS] = "get_rows", [PL_ACTQ] = "actq", [PL_MATMUL] = "matmul",
    [PL_ROPE] = "rope", [PL_GATHER] = "gather", [PL_KV_STORE] = "kv_store", [PL_ATTN] = "attn"};

static void free_plan_state(vk_backend *be)
{
    vk_dev *d = &be->d;
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
    rlx__vk_buffer_free(d, &be->arena);
    rlx__vk_buffer_free(d, &be->scratch);
    rlx__vk_buffer_free(d, &be->params);
    if (be->dpool) vkDestroyDescriptorPool(d->dev, be->dpool, NULL);
    be->dpool = VK_NULL_HANDLE;
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
    if (plan->max_tokens > 65535)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: batches of more than 65535 tokens are not supported");
    be->min_vocab = INT64_MAX;
    be->ropes = calloc((size_t)plan->n_steps + 1, sizeof *be->ropes);
    if (!be->ropes) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    for (int i = 0; i < plan->n_steps; i++) {
        const rlx_node *n = &plan->steps[i].node;
        if (n->op == RLX_OP_GET_ROWS && g->tensors[n->in[0]].ne[1] < be->min_vocab) be->min_vocab = g->tensors[n->in[0]].ne[1];
        if (n->op == RLX_OP_ATTENTION && (n->ip[3] > 512 || n->ip[3] <= 0))
            return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: attention head size %d is above 512", n->ip[3]);
        if (n->op == RLX_OP_ROPE) {
            if (n->ip[2] > 1024 || n->ip[2] % 2 || n->ip[1] % 2 || n->ip[2] > n->ip[1])
                return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: rope with %d rotated of %d dims is not supported", n->ip[2], n->ip[1]);
            if (n->in[1] >= 0 && (!g->tensors[n->in[1]].is_weight || g->tensors[n->in[1]].wtype != RLX_F32))
                return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: rope frequency factors must be an f32 weight");
            bool seen = false;
            for (int r = 0; r < be->n_ropes; r++) {
                const vk_rope_tab *t = &be->ropes[r];
                seen |= t->n_rot == n->ip[2] && t->base == n->fp[0] && t->scale == n->fp[1] && t->ff == n->in[1];
            }
            if (!seen) be->ropes[be->n_ropes++] = (vk_rope_tab){n->ip[2], n->fp[0], n->fp[1], n->in[1], 0};
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
        VkDeviceSize need = rows * (VkDeviceSize)x->cols * 4 + rows * (VkDeviceSize)(x->cols / 32) * 4;
        if (need > scratch) scratch = need;
    }
    if ((rc = rlx__vk_buffer(&be->d, &be->scratch, scratch, false, err))) goto fail;
    /* count the dispatches of a run to size the parameter slots and descriptor pool */
    be->counting = true;
    be->slot = 0;
    be->b = NULL;
    for (int i = 0; i < plan->n_steps && !rc; i++) rc = rlx__vk_record_step(be, &plan->steps[i], err);
    be->counting = false;
    if (rc) goto fail;
    be->n_slots = be->slot + 1;
    be->slot_bytes = align_up(VK_PARAM_WORDS * 4, be->d.align);
    if ((rc = rlx__vk_buffer(&be->d, &be->params, be->slot_bytes * be->n_slots, true, err))) goto fail;
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, be->n_slots * VK_N_BINDINGS};
    VkDescriptorPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = be->n_slots,
                                      .poolSizeCount = 1, .pPoolSizes = &ps};
    if ((rc = rlx__vk_check(vkCreateDescriptorPool(be->d.dev, &pci, NULL, &be->dpool), "vkCreateDescriptorPool", err))) goto fail;
    return 0;
fail:
    free_plan_state(be);
    return rc;
}

static void free_kv(vk_backend *be)
{
    for (int32_t l = 0; be->kv_k && l < be->kv.n_layers; l++) {
        rlx__vk_buffer_free(&be->d, &be->kv_k[l]);
        rlx__vk_buffer_free(&be->d, &be->kv_v[l]);
    }
    free(be->kv_k);
    free(be->kv_v);
    be->kv_k = be->kv_v = NULL;
    memset(&be->kv, 0, sizeof be->kv);
}

static int vk_kv_init(rlx_backend *be_, const rlx_kv_geometry *geo, rlx_error *err)
{
    vk_backend *be = (vk_backend *)be_;
    free_kv(be);
    if (geo->type != RLX_F16 && geo->type != RLX_F32)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "the Vulkan backend keeps the KV cache in f16 or f32");
    if (geo->type == RLX_F16 && geo->kv_cols % 2)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: an f16 KV cache needs an even row width (got %lld); use f32",
                          (long long)geo->kv_cols);
    VkDeviceSize lb = (VkDeviceSize)geo->n_blocks * (VkDeviceSize)geo->block_size * (VkDeviceSize)geo->kv_cols *
                      (geo->type == RLX_F16 ? 2 : 4);
    if (lb > be->d.max_range)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: a KV layer of %llu MiB exceeds the device's storage-buffer range "
                          "(%llu MiB); use fewer KV blocks", (unsigned long long)(lb >> 20), (unsigned long long)(be->d.max_range >> 20));
    be->kv_k = calloc((size_t)geo->n_layers, sizeof *be->kv_k);
    be->kv_v = calloc((size_t)geo->n_layers, sizeof *be->kv_v);
    if (!be->kv_k || !be->kv_v) { free(be->kv_k); free(be->kv_v); be->kv_k = be->kv_v = NULL; return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
    be->kv = *geo;
    be->kv_layer_bytes = lb;
    int rc = 0;
    for (int32_t l = 0; l < geo->n_layers && !rc; l++) {
        rc = rlx__vk_buffer(&be->d, &be->kv_k[l], lb, false, err);
        if (!rc) rc = rlx__vk_buffer(&be->d, &be->kv_v[l], lb, false, err);
    }
    if (!rc && !(rc = rlx__vk_begin(&be->d, err))) {
        for (int32_t l = 0; l < geo->n_layers; l++) {
            vkCmdFillBuffer(be->d.cmd, be->kv_k[l].buf, 0, VK_WHOLE_SIZE, 0);
            vkCmdFillBuffer(be->d.cmd, be->kv_v[l].buf, 0, VK_WHOLE_SIZE, 0);
        }
        rc = rlx__vk_submit(&be->d, err);
    }
    if (rc) free_kv(be);
    return rc;
}

static VkDeviceSize block_bytes(const vk_backend *be) { return be->kv_layer_bytes / (VkDeviceSize)be->kv.n_blocks; }

static int vk_kv_copy_block(rlx_backend *be_, int32_t dst, int32_t src, rlx_error *err)
{
    vk_backend *be = (vk_backend *)be_;
    if (!be->kv_k) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (dst < 0 || src < 0 || dst >= be->kv.n_blocks || src >= be->kv.n_blocks)
        return rlx_errorf(err, RLX_ERANGE, "KV block id out of range");
    int rc = rlx__vk_begin(&be->d, err);
    if (rc) return rc;
    VkDeviceSize bb = block_bytes(be);
    VkBufferCopy c = {(VkDeviceSize)src * bb, (VkDeviceSize)dst * bb, bb};
    for (int32_t l = 0; l < be->kv.n_layers; l++) {
        vkCmdCopyBuffer(be->d.cmd, be->kv_k[l].buf, be->kv_k[l].buf, 1, &c);
        vkCmdCopyBuffer(be->d.cmd, be->kv_v[l].buf, be->kv_v[l].buf, 1, &c);
    }
    return rlx__vk_submit(&be->d, err);
}

static int kv_check(vk_backend *be, int32_t layer, int32_t block, rlx_error *err)
{
    if (!be->kv_k) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (layer < 0 || layer >= be->kv.n_layers || block < 0 || block >= be->kv.n_blocks)
        return rlx_errorf(err, RLX_ERANGE, "KV block or layer out of range");
    return 0;
}

static int vk_kv_read_block(rlx_backend *be_, int32_t layer, int32_t block, void *k, void *v, rlx_error *err)
{
    vk_backend *be = (vk_backend *)be_;
    int rc = kv_check(be, layer, block, err);
    VkDeviceSize bb = rc ? 0 : block_bytes(be);
    if (!rc) rc = rlx__vk_read(&be->d, &be->kv_k[layer], (VkDeviceSize)block * bb, k, bb, err);
    if (!rc) rc = rlx__vk_read(&be->d, &be->kv_v[layer], (VkDeviceSize)block * bb, v, bb, err);
    return rc;
}

static int vk_kv_write_block(rlx_backend *be_, int32_t layer, int32_t block, const void *k, const void *v, rlx_error *err)
{
    vk_backend *be = (vk_backend *)be_;
    int rc = kv_check(be, layer, block, err);
    VkDeviceSize bb = rc ? 0 : block_bytes(be);
    if (!rc) rc = rlx__vk_write(&be->d, &be->kv_k[layer], (VkDeviceSize)block * bb, k, bb, err);
    if (!rc) rc = rlx__vk_write(&be->d, &be->kv_v[layer], (VkDeviceSize)block * bb, v, bb, err);
    return rc;
}

static int validate_batch(const vk_backend *be, const rlx_plan *plan, const rlx_batch *b, rlx_error *err)
{
    if (!be->kv_k) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (plan != be->plan) return rlx_errorf(err, RLX_EINVAL, "plan was not prepared on this backend");
    return rlx_batch_validate(b, plan, &be->kv, be->min_vocab, err);
}

/* Batch words: tokens[T] pos[T] seq[T] out_index[O] table_start[S] table_len[S] tables...
 * then one rope table per configuration: [T][n_rot/2] cos then [n_rot/2] sin, as floats. */
static int write_batch(vk_backend *be, const rlx_batch *b, rlx_error *err)
{
    const rlx_graph *g = be->plan->graph;
    size_t T = (size_t)b->n_tokens, O = (size_t)b->n_outputs, S = (size_t)b->n_seqs, words = 3 * T + O + 2 * S;
    for (size_t s = 0; s < S; s++) words += (size_t)b->seqs[s].n_blocks;
    size_t rope0 = words;
    for (int r = 0; r < be->n_ropes; r++) words += T * (size_t)be->ropes[r].n_rot;
    if (words > be->host_batch_cap) {
        free(be->host_batch);
        be->host_batch_cap = words * 2;
        be->host_batch = malloc(be->host_batch_cap * 4);
        if (!be->host_batch) { be->host_batch_cap = 0; return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
    }
    if (be->batch.size < words * 4) {
        rlx__vk_buffer_free(&be->d, &be->batch);
        int rc = rlx__vk_buffer(&be->d, &be->batch, be->host_batch_cap * 4, true, err);
        if (rc) return rc;
    }
    int32_t *w = be->host_batch;
    uint32_t *L = be->batch_words;
    L[0] = (uint32_t)T; L[1] = (uint32_t)O; L[2] = 0; L[3] = (uint32_t)T; L[4] = (uint32_t)(2 * T);
    L[5] = (uint32_t)(3 * T); L[6] = (uint32_t)(3 * T + O); L[7] = (uint32_t)(3 * T + O + S);
    memcpy(w, b->tokens, T * 4);
    memcpy(w + T, b->pos, T * 4);
    memcpy(w + 2 * T, b->seq, T * 4);
    size_t o = 0, at = 3 * T + O + 2 * S;
    for (size_t i = 0; i < T; i++) if (b->output[i]) w[3 * T + o++] = (int32_t)i;
    for (size_t s = 0; s < S; s++) {
        w[L[6] + s] = (int32_t)at;
        w[L[7] + s] = b->seqs[s].n_blocks;
        memcpy(w + at, b->seqs[s].blocks, (size_t)b->seqs[s].n_blocks * 4);
        at += (size_t)b->seqs[s].n_blocks;
    }
    at = rope0;
    for (int r = 0; r < be->n_ropes; r++) {
        vk_rope_tab *rt = &be->ropes[r];
        rt->off = (uint32_t)at;
        const float *ff = rt->ff >= 0 ? (const float *)g->tensors[rt->ff].data : NULL;
        for (size_t t = 0; t < T; t++, at += (size_t)rt->n_rot) {
            float *cs = (float *)(w + at);
            rlx_rope_angles(rt->base, rt->scale, ff, rt->n_rot, b->pos[t], cs, cs + rt->n_rot / 2);
        }
    }
    return rlx__vk_write(&be->d, &be->batch, 0, w, words * 4, err);
}

static int vk_run(rlx_backend *be_, const rlx_plan *plan, const rlx_batch *b, float *logits, rlx_error *err)
{
    vk_backend *be = (vk_backend *)be_;
    int rc = validate_batch(be, plan, b, err);
    if (rc) return rc;
    if ((rc = write_batch(be, b, err))) return rc;
    if ((rc = rlx__vk_begin(&be->d, err))) return rc;
    if ((rc = rlx__vk_check(vkResetDescriptorPool(be->d.dev, be->dpool, 0), "vkResetDescriptorPool", err))) return rc;
    be->slot = 0;
    be->b = b;
    for (int i = 0; i < plan->n_steps && !rc; i++) rc = rlx__vk_record_step(be, &plan->steps[i], err);
    be->b = NULL;
    if (rc) {
        vkEndCommandBuffer(be->d.cmd);
        return rc;
    }
    if ((rc = rlx__vk_submit(&be->d, err))) return rc;
    const rlx_graph *g = plan->graph;
    if (logits && b->n_outputs)
        rc = rlx__vk_read(&be->d, &be->arena, (VkDeviceSize)plan->offset[g->output], logits,
                          (size_t)b->n_outputs * (size_t)g->tensors[g->output].cols * 4, err);
    return rc;
}

static void vk_destroy(rlx_backend *be_)
{
    vk_backend *be = (vk_backend *)be_;
    if (be->d.dev) vkDeviceWaitIdle(be->d.dev);
    free_plan_state(be);
    free_kv(be);
    rlx__vk_buffer_free(&be->d, &be->batch);
    rlx__vk_buffer_free(&be->d, &be->dummy);
    for (int i = 0; i < PL_COUNT; i++)
        if (be->pl[i]) vkDestroyPipeline(be->d.dev, be->pl[i], NULL);
    rlx__vk_close(&be->d);
    free(be->host_batch);
    free(be);
}

static const rlx_backend_ops vk_ops = {
    .name = "vulkan",
    .prepare = vk_prepare,
    .kv_init = vk_kv_init,
    .kv_copy_block = vk_kv_copy_block,
    .run = vk_run,
    .kv_read_block = vk_kv_read_block,
    .kv_write_block = vk_kv_write_block,
    .destroy = vk_destroy,
};

int rlx_backend_vulkan_create(rlx_backend **out, int device, rlx_error *err)
{
    vk_backend *be = calloc(1, sizeof *be);
    if (!be) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    be->base.ops = &vk_ops;
    int rc = rlx__vk_open(&be->d, device, err);
    for (int i = 0; i < PL_COUNT && !rc; i++) rc = rlx__vk_pipeline(&be->d, pipeline_names[i], &be->pl[i], err);
    if (!rc) rc = rlx__vk_buffer(&be->d, &be->dummy, 256, false, err);
    if (rc) { vk_destroy(&be->base); return rc; }
    *out = &be->base;
    return 0;
}
