/* vk_kv.c - the Vulkan backend's paged KV pool: per KV layer a K and a V array of
 * [n_blocks * block_size] rows of that layer's kv_cols values (f32, f16, or Q8_0: kv_cols / 32 blocks of an
 * f16 scale and 32 int8 per row, as the CPU keeps them), each split into up to VK_KV_CHUNKS
 * buffers of whole blocks so no binding exceeds maxStorageBufferRange (128 MiB on lavapipe:
 * one f32 layer of a Qwen3-0.6B-shaped model at 40k tokens is 160 MiB). Snapshot reads/writes
 * address a block inside its chunk. Every layer is split at the same block boundaries (those
 * the widest layer needs). Recurrent-state layers are refused (RLX_EUNSUPPORTED). A model without
 * KV layers (an encoder) gets no pool, only its description. */
#include "backends/vulkan/vk_internal.h"
#include "backends/quant.h"

#include <stdlib.h>
#include <string.h>

void rlx__vk_kv_free(vk_backend *be)
{
    vk_kv *kv = &be->kv;
    rlx__vk_shapes_drop(be); /* recorded commands bind the pool */
    for (int32_t i = 0; kv->k && i < kv->geo.n_layers * VK_KV_CHUNKS; i++) {
        rlx__vk_buffer_free(&be->d, &kv->k[i]);
        rlx__vk_buffer_free(&be->d, &kv->v[i]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->row_bytes);
    free(kv->block_bytes);
    memset(kv, 0, sizeof *kv);
}

int rlx__vk_kv_init(vk_backend *be, const rlx_mem_desc *geo, rlx_error *err)
{
    rlx__vk_kv_free(be);
    vk_kv *kv = &be->kv;
    int rc = rlx_mem_desc_check(geo, false, "Vulkan", err);
    if (rc) return rc;
    VkDeviceSize bb = 0; /* the widest layer's block */
    for (int32_t l = 0; l < geo->n_layers; l++) {
        rlx_mem_layer m = rlx_mem_desc_layer(geo, l);
        if (m.kind != RLX_MEM_KV) continue;
        /* the shaders address f16 rows in 32-bit words */
        if (geo->type == RLX_F16 && m.kv_cols % 2)
            return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: an f16 KV cache needs an even row width (got %lld); use f32",
                              (long long)m.kv_cols);
        VkDeviceSize lb = rlx_kv_row_bytes(geo->type, m.kv_cols) * (VkDeviceSize)geo->block_size;
        if (lb > bb) bb = lb;
    }
    if (bb == 0) { /* an encoder: no layer keeps a cache (its attention reads the step's rows) */
        kv->row_bytes = calloc((size_t)geo->n_layers, sizeof *kv->row_bytes);
        kv->block_bytes = calloc((size_t)geo->n_layers, sizeof *kv->block_bytes);
        if (!kv->row_bytes || !kv->block_bytes) {
            rlx__vk_kv_free(be);
            return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        }
        kv->geo = *geo;
        return 0;
    }
    /* a chunk must fit one binding (the shaders address it in 32-bit words) and one allocation */
    VkDeviceSize room = be->d.max_range < be->d.max_alloc ? be->d.max_range : be->d.max_alloc;
    const char *hook = getenv("RLX_VK_KV_CHUNK"); /* test hook: small pools exercise the split */
    if (hook && strtoull(hook, NULL, 10) >= bb && strtoull(hook, NULL, 10) < room) room = strtoull(hook, NULL, 10);
    if (bb > room)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: one KV block of %llu KiB exceeds the device's storage-buffer range; "
                          "use a smaller --kv-block", (unsigned long long)(bb >> 10));
    int64_t per = (int64_t)(room / bb);
    if (per > geo->n_blocks) per = geo->n_blocks;
    int64_t chunks = (geo->n_blocks + per - 1) / per;
    if (chunks > VK_KV_CHUNKS)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: a KV layer of %llu MiB exceeds %d times the device's storage-buffer "
                          "range (%llu MiB); use fewer KV blocks (--kv-mem) or an f16/q8_0 KV cache",
                          (unsigned long long)((bb * (VkDeviceSize)geo->n_blocks) >> 20), VK_KV_CHUNKS,
                          (unsigned long long)(room >> 20));
    kv->k = calloc((size_t)geo->n_layers * VK_KV_CHUNKS, sizeof *kv->k);
    kv->v = calloc((size_t)geo->n_layers * VK_KV_CHUNKS, sizeof *kv->v);
    kv->row_bytes = calloc((size_t)geo->n_layers, sizeof *kv->row_bytes);
    kv->block_bytes = calloc((size_t)geo->n_layers, sizeof *kv->block_bytes);
    if (!kv->k || !kv->v || !kv->row_bytes || !kv->block_bytes) {
        rlx__vk_kv_free(be);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    kv->geo = *geo;
    kv->n_chunks = (int)chunks;
    kv->chunk_blocks = (int32_t)per;
    rc = 0;
    for (int32_t l = 0; l < geo->n_layers && !rc; l++) {
        rlx_mem_layer m = rlx_mem_desc_layer(geo, l);
        if (m.kind != RLX_MEM_KV) continue;
        kv->row_bytes[l] = rlx_kv_row_bytes(geo->type, m.kv_cols);
        kv->block_bytes[l] = kv->row_bytes[l] * (VkDeviceSize)geo->block_size;
        for (int c = 0; c < kv->n_chunks && !rc; c++) {
            int64_t nb = RLX_MIN(per, geo->n_blocks - c * per);
            rc = rlx__vk_buffer(&be->d, &kv->k[l * VK_KV_CHUNKS + c], kv->block_bytes[l] * (VkDeviceSize)nb, false, err);
            if (!rc) rc = rlx__vk_buffer(&be->d, &kv->v[l * VK_KV_CHUNKS + c], kv->block_bytes[l] * (VkDeviceSize)nb, false, err);
        }
    }
    if (!rc && !(rc = rlx__vk_begin(&be->d, err))) {
        for (int32_t i = 0; i < geo->n_layers * VK_KV_CHUNKS; i++)
            if (kv->k[i].buf) {
                vkCmdFillBuffer(be->d.cmd, kv->k[i].buf, 0, VK_WHOLE_SIZE, 0);
                vkCmdFillBuffer(be->d.cmd, kv->v[i].buf, 0, VK_WHOLE_SIZE, 0);
            }
        rc = rlx__vk_submit(&be->d, err);
    }
    if (rc) rlx__vk_kv_free(be);
    return rc;
}

/* The chunk of `block` in layer l and the block's byte offset there. */
static int locate(const vk_kv *kv, int32_t l, int32_t block, VkDeviceSize *off)
{
    int c = block / kv->chunk_blocks;
    *off = (VkDeviceSize)(block - c * kv->chunk_blocks) * kv->block_bytes[l];
    return l * VK_KV_CHUNKS + c;
}

int rlx__vk_kv_block_io(vk_backend *be, int32_t layer, int32_t block, void *k, void *v, bool write, rlx_error *err)
{
    vk_kv *kv = &be->kv;
    if (!kv->k) return rlx_errorf(err, RLX_EINVAL, "no KV cache (not initialised, or the model keeps none)");
    if (layer < 0 || layer >= kv->geo.n_layers || block < 0 || block >= kv->geo.n_blocks || !kv->block_bytes[layer])
        return rlx_errorf(err, RLX_ERANGE, "KV block or layer out of range");
    VkDeviceSize off;
    int c = locate(kv, layer, block, &off), rc;
    if (write) {
        rc = rlx__vk_write(&be->d, &kv->k[c], off, k, kv->block_bytes[layer], err);
        if (!rc) rc = rlx__vk_write(&be->d, &kv->v[c], off, v, kv->block_bytes[layer], err);
    } else {
        rc = rlx__vk_read(&be->d, &kv->k[c], off, k, kv->block_bytes[layer], err);
        if (!rc) rc = rlx__vk_read(&be->d, &kv->v[c], off, v, kv->block_bytes[layer], err);
    }
    return rc;
}
