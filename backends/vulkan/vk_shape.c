/* vk_shape.c - command buffers recorded once per batch shape and reused. Everything a dispatch
 * reads that changes from run to run (token ids, positions, sequence ids, output indices, block
 * tables, rope tables) lives in the batch buffer at offsets fixed per plan, and the parameter
 * slots depend only on the shape (tokens, outputs), so a run of a known shape writes the batch
 * buffer and submits. The last VK_MAX_SHAPES shapes are kept (least recently used goes); all
 * are dropped when a buffer they bind is replaced (prepare, KV pool, batch buffer growth). */
#include "backends/vulkan/vk_internal.h"

#include <string.h>

static void shape_free(vk_backend *be, vk_shape *sh)
{
    vk_dev *d = &be->d;
    if (sh->cmd) vkFreeCommandBuffers(d->dev, d->cpool, 1, &sh->cmd);
    if (sh->pool) vkDestroyDescriptorPool(d->dev, sh->pool, NULL);
    rlx__vk_buffer_free(d, &sh->params);
    memset(sh, 0, sizeof *sh);
}

void rlx__vk_shapes_drop(vk_backend *be)
{
    if (!be->d.dev) return;
    for (int i = 0; i < VK_MAX_SHAPES; i++)
        if (be->shapes[i].n_tokens) shape_free(be, &be->shapes[i]);
}

static int record(vk_backend *be, vk_shape *sh, rlx_error *err)
{
    vk_dev *d = &be->d;
    const rlx_plan *plan = be->plan;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = d->cpool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    int rc = rlx__vk_check(vkAllocateCommandBuffers(d->dev, &cai, &sh->cmd), "vkAllocateCommandBuffers", err);
    if (rc) return rc;
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, be->n_slots * VK_N_BINDINGS};
    VkDescriptorPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = be->n_slots,
                                      .poolSizeCount = 1, .pPoolSizes = &ps};
    if ((rc = rlx__vk_check(vkCreateDescriptorPool(d->dev, &pci, NULL, &sh->pool), "vkCreateDescriptorPool", err))) return rc;
    if ((rc = rlx__vk_buffer(d, &sh->params, be->slot_bytes * be->n_slots, true, err))) return rc;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if ((rc = rlx__vk_check(vkBeginCommandBuffer(sh->cmd, &bi), "vkBeginCommandBuffer", err))) return rc;
    /* after what earlier submissions wrote (KV fills and copies, staged uploads, the last run) */
    rlx__vk_barrier_all(sh->cmd);
    be->rec = sh;
    be->slot = 0;
    be->cur_tokens = sh->n_tokens;
    be->cur_outputs = sh->n_outputs;
    for (int i = 0; i < plan->n_steps && !rc; i++) rc = rlx__vk_record_step(be, &plan->steps[i], err);
    be->rec = NULL;
    const rlx_graph *g = plan->graph;
    const int32_t out_rows = g->output_kind == RLX_OUTPUT_HIDDEN ? sh->n_tokens : sh->n_outputs;
    if (!rc && !be->arena.map && out_rows) { /* the output to host-visible memory in the same submission */
        rlx__vk_barrier_all(sh->cmd);
        VkBufferCopy c = {(VkDeviceSize)plan->offset[g->output], 0,
                          (VkDeviceSize)out_rows * (VkDeviceSize)g->tensors[g->output].cols * 4};
        vkCmdCopyBuffer(sh->cmd, be->arena.buf, be->readback.buf, 1, &c);
    }
    rlx__vk_barrier_all(sh->cmd); /* results visible to the host */
    int rc2 = rlx__vk_check(vkEndCommandBuffer(sh->cmd), "vkEndCommandBuffer", err);
    if (!rc) rc = rc2;
    if (!rc) be->n_recordings++;
    return rc;
}

int rlx__vk_shape_get(vk_backend *be, int32_t n_tokens, int32_t n_outputs, vk_shape **out, rlx_error *err)
{
    vk_shape *sh = NULL, *lru = &be->shapes[0];
    be->use_clock++;
    for (int i = 0; i < VK_MAX_SHAPES && !sh; i++) {
        vk_shape *s = &be->shapes[i];
        if (s->n_tokens == n_tokens && s->n_outputs == n_outputs) sh = s;
        else if (!s->n_tokens || (lru->n_tokens && s->last_used < lru->last_used)) lru = s;
    }
    if (!sh) {
        if (lru->n_tokens) shape_free(be, lru);
        sh = lru;
        sh->n_tokens = n_tokens;
        sh->n_outputs = n_outputs;
        int rc = record(be, sh, err);
        if (rc) {
            shape_free(be, sh);
            return rc;
        }
    }
    sh->last_used = be->use_clock;
    *out = sh;
    return 0;
}
