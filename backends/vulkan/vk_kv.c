/* vk_kv.c - the Vulkan backend's paged KV pool: per layer a K and a V array of
 * [n_blocks * block_size] rows of kv_cols values (f32, f16, or Q8_0: kv_cols / 32 blocks of an
 * f16 scale and 32 int8 per row, as the CPU keeps them), each split into up to VK_KV_CHUNKS
 * buffers of whole blocks so no binding exceeds maxStorageBufferRange (128 MiB on lavapipe:
 * one f32 layer of a Qwen3-0.6B-shaped model at 40k tokens is 160 MiB). Block copies and
 * snapshot reads/writes address a block inside its chunk. */
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
    memset(kv, 0, sizeof *kv);
}

int rlx__vk_kv_init(vk_backend *be, const rlx_kv_geometry *geo, rlx_error *err)
{
    rlx__vk_kv_free(be);
    vk_kv *kv = &be->kv;
    int rc = rlx_kv_type_check(geo->type, geo->kv_cols, err);
    if (rc) return rc;
    /* the shaders address f16 rows in 32-bit words */
    if (geo->type == RLX_F16 && geo->kv_cols % 2)
        return rlx_errorf(err, RLX_EUNSUPPORTED, "Vulkan: an f16 KV cache needs an even row width (got %lld); use f32",
                          (long long)geo->kv_cols);
    if (geo->n_layers <= 0 || geo->n_blocks <= 0 || geo->block_size <= 0 || geo->kv_cols <= 0)
        return rlx_errorf(err, RLX_EINVAL, "Vulkan: empty KV geometry");
    VkDeviceSize rb = rlx_kv_row_bytes(geo->type, geo->kv_cols), bb = rb * (VkDeviceSize)geo->block_size;
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
    if (!kv->k || !kv->v) {
        free(kv->k);
        free(kv->v);
        kv->k = kv->v = NULL;
        return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    }
    kv->geo = *geo;
    kv->n_chunks = (int)chunks;
    kv->chunk_blocks = (int32_t)per;
    kv->row_bytes = rb;
    kv->block_bytes = bb;
    rc = 0;
    for (int32_t l = 0; l < geo->n_layers && !rc; l++)
        for (int c = 0; c < kv->n_chunks && !rc; c++) {
            int64_t nb = RLX_MIN(per, geo->n_blocks - c * per);
            rc = rlx__vk_buffer(&be->d, &kv->k[l * VK_KV_CHUNKS + c], bb * (VkDeviceSize)nb, false, err);
            if (!rc) rc = rlx__vk_buffer(&be->d, &kv->v[l * VK_KV_CHUNKS + c], bb * (VkDeviceSize)nb, false, err);
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
    *off = (VkDeviceSize)(block - c * kv->chunk_blocks) * kv->block_bytes;
    return l * VK_KV_CHUNKS + c;
}

int rlx__vk_kv_copy_block(vk_backend *be, int32_t dst, int32_t src, rlx_error *err)
{
    vk_kv *kv = &be->kv;
    if (!kv->k) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (dst < 0 || src < 0 || dst >= kv->geo.n_blocks || src >= kv->geo.n_blocks)
        return rlx_errorf(err, RLX_ERANGE, "KV block id out of range");
    int rc = rlx__vk_begin(&be->d, err);
    if (rc) return rc;
    rlx__vk_barrier_all(be->d.cmd); /* after the shaders that wrote the source */
    for (int32_t l = 0; l < kv->geo.n_layers; l++) {
        VkDeviceSize so, d_o;
        int cs = locate(kv, l, src, &so), cd = locate(kv, l, dst, &d_o);
        VkBufferCopy c = {so, d_o, kv->block_bytes};
        vkCmdCopyBuffer(be->d.cmd, kv->k[cs].buf, kv->k[cd].buf, 1, &c);
        vkCmdCopyBuffer(be->d.cmd, kv->v[cs].buf, kv->v[cd].buf, 1, &c);
    }
    return rlx__vk_submit(&be->d, err);
}

int rlx__vk_kv_block_io(vk_backend *be, int32_t layer, int32_t block, void *k, void *v, bool write, rlx_error *err)
{
    vk_kv *kv = &be->kv;
    if (!kv->k) return rlx_errorf(err, RLX_EINVAL, "KV cache not initialised");
    if (layer < 0 || layer >= kv->geo.n_layers || block < 0 || block >= kv->geo.n_blocks)
        return rlx_errorf(err, RLX_ERANGE, "KV block or layer out of range");
    VkDeviceSize off;
    int c = locate(kv, layer, block, &off), rc;
    if (write) {
        rc = rlx__vk_write(&be->d, &kv->k[c], off, k, kv->block_bytes, err);
        if (!rc) rc = rlx__vk_write(&be->d, &kv->v[c], off, v, kv->block_bytes, err);
    } else {
        rc = rlx__vk_read(&be->d, &kv->k[c], off, k, kv->block_bytes, err);
        if (!rc) rc = rlx__vk_read(&be->d, &kv->v[c], off, v, kv->block_bytes, err);
    }
    return rc;
}
