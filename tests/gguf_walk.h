/* gguf_walk.h - touches everything an opened GGUF exposes, for the corruption test and the
 * fuzz target: every key (lookup, string bytes, nested arrays, the typed getters) and every
 * tensor (lookup by name, dims, type, each data page and the last byte), so ASan sees any
 * pointer outside the buffer the file was opened from. Header-only, tests only. */
#ifndef RLX_TEST_GGUF_WALK_H
#define RLX_TEST_GGUF_WALK_H

#include "backends/dtype.h"
#include "models/gguf.h"

#include <string.h>

static uint64_t rlx_test_gguf_walk_arr(const rlx_gguf_array *a)
{
    static const int sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    uint64_t h = a->n;
    for (uint64_t i = 0; i < a->n; i++) {
        if (a->type == RLX_GGUF_STRING) {
            for (uint64_t j = 0; j < a->strs[i].len; j++) h += (uint8_t)a->strs[i].ptr[j];
        } else if (a->type == RLX_GGUF_ARRAY) {
            h += rlx_test_gguf_walk_arr(&a->arrs[i]);
        } else {
            for (int j = 0; j < sizes[a->type]; j++) h += ((const uint8_t *)a->data)[i * (uint64_t)sizes[a->type] + j];
        }
    }
    return h;
}

/* NULL when every check holds (a digest of what was read is added to *h), else what was wrong.
 * buf/n: the memory the file was opened from. */
static const char *rlx_test_gguf_walk(const rlx_gguf *g, const uint8_t *buf, size_t n, uint64_t *h)
{
    rlx_error err = {0};
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        *h += strlen(kv->key);
        if (rlx_gguf_find(g, kv->key) != &kv->value) return "find() does not return the key's own value";
        const rlx_gguf_value *v = &kv->value;
        if (v->type == RLX_GGUF_STRING)
            for (uint64_t j = 0; j < v->str.len; j++) *h += (uint8_t)v->str.ptr[j];
        if (v->type == RLX_GGUF_ARRAY) *h += rlx_test_gguf_walk_arr(&v->arr);
        uint32_t u;
        float f;
        rlx_gguf_get_u32(g, kv->key, &u, &err);
        rlx_gguf_get_f32(g, kv->key, &f, &err);
    }
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        if (rlx_gguf_find_tensor(g, t->name) != t) return "find_tensor() does not return the tensor";
        if (t->n_dims < 1 || t->n_dims > RLX_GGUF_MAX_DIMS || !rlx_dtype_get(t->type)) return "bad tensor accepted";
        const uint8_t *d = t->data;
        if (d < buf || t->size > n || d + t->size > buf + n) return "tensor data outside the buffer";
        for (uint64_t j = 0; j < t->size; j += 512) *h += d[j];
        if (t->size) *h += d[t->size - 1];
    }
    return NULL;
}

#endif
