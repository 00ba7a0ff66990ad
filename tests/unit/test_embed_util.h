/* test_embed_util.h - test models derived from ../shared's encoders: a copy with another pooling
 * type, a causal flag or a classifier head (for rank pooling). Header-only, for test_embed.c and
 * test_worker_embed.c. */
#ifndef RLX_TEST_EMBED_UTIL_H
#define RLX_TEST_EMBED_UTIL_H

#include "models/gguf.h"

#include <string.h>

/* A copy of src with <arch>.pooling_type set to `pooling` (-1: kept), <arch>.attention.causal
 * set when `causal`, and a cls head (hidden 64 -> 64 -> 1) when cls_w is given. */
static inline int derive(const char *src, const char *dst, int pooling, bool causal, const float *cls_w, const float *cls_b,
                  const float *out_w, const float *out_b, rlx_error *err)
{
    rlx_gguf *g = NULL;
    int rc = rlx_gguf_open(&g, src, err);
    if (rc) return rc;
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    for (uint64_t i = 0; !rc && i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        if (strcmp(kv->key, "general.alignment")) rc = rlx_gguf_writer_copy_kv(w, kv);
    }
    if (!rc && pooling >= 0) rc = rlx_gguf_writer_set_u32(w, "bert.pooling_type", (uint32_t)pooling);
    if (!rc && causal) rc = rlx_gguf_writer_set_bool(w, "bert.attention.causal", true);
    for (uint64_t i = 0; !rc && i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        rc = rlx_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size);
    }
    if (!rc && cls_w) {
        const int64_t ne_w[2] = {64, 64}, ne_b[1] = {64}, ne_o[2] = {64, 1}, ne_ob[1] = {1};
        if (!rc) rc = rlx_gguf_writer_add_tensor(w, "cls.weight", RLX_F32, 2, ne_w, cls_w, 64 * 64 * 4);
        if (!rc) rc = rlx_gguf_writer_add_tensor(w, "cls.bias", RLX_F32, 1, ne_b, cls_b, 64 * 4);
        if (!rc) rc = rlx_gguf_writer_add_tensor(w, "cls.output.weight", RLX_F32, 2, ne_o, out_w, 64 * 4);
        if (!rc) rc = rlx_gguf_writer_add_tensor(w, "cls.output.bias", RLX_F32, 1, ne_ob, out_b, 4);
    }
    if (rc) rc = rlx_errorf(err, rc, "writer: %s", rlx_gguf_writer_last_error(w));
    else rc = rlx_gguf_writer_write(w, dst, err);
    rlx_gguf_writer_free(w);
    rlx_gguf_close(g);
    return rc;
}

#endif
