/* gguf_get.c - typed metadata getters over an open GGUF file, and the handle's plain accessors
 * (its fields: gguf_handle.h).
 *
 * Integers convert between widths and signedness when the value fits; float getters accept
 * any integer; anything else is RLX_EFORMAT with a message naming the file and key. An absent
 * key is RLX_ENOTFOUND and leaves err untouched, so callers can fall back to defaults. */
#include "models/gguf.h"
#include "models/gguf_handle.h"

#include <stdio.h>

static bool is_unsigned(rlx_gguf_type t)
{
    return t == RLX_GGUF_UINT8 || t == RLX_GGUF_UINT16 || t == RLX_GGUF_UINT32 || t == RLX_GGUF_UINT64;
}

static bool is_signed(rlx_gguf_type t)
{
    return t == RLX_GGUF_INT8 || t == RLX_GGUF_INT16 || t == RLX_GGUF_INT32 || t == RLX_GGUF_INT64;
}

static int wrong_type(const rlx_gguf *g, const char *key, const rlx_gguf_value *v, const char *want, rlx_error *err)
{
    return rlx_errorf(err, RLX_EFORMAT, "%s: metadata key '%s' holds a %s, expected %s", rlx_gguf_path(g), key,
                      rlx_gguf_type_name(v->type), want);
}

static int out_of_range(const rlx_gguf *g, const char *key, const rlx_gguf_value *v, const char *want, rlx_error *err)
{
    if (is_signed(v->type))
        return rlx_errorf(err, RLX_EFORMAT, "%s: metadata key '%s' is %lld, which does not fit %s",
                          rlx_gguf_path(g), key, (long long)v->i64, want);
    return rlx_errorf(err, RLX_EFORMAT, "%s: metadata key '%s' is %llu, which does not fit %s",
                      rlx_gguf_path(g), key, (unsigned long long)v->u64, want);
}

#define FIND_OR_RETURN(v)                              \
    const rlx_gguf_value *v = rlx_gguf_find(g, key);   \
    if (!v) return RLX_ENOTFOUND

int rlx_gguf_get_u32(const rlx_gguf *g, const char *key, uint32_t *out, rlx_error *err)
{
    FIND_OR_RETURN(v);
    const char *want = "an unsigned 32-bit integer";
    if (is_unsigned(v->type)) {
        if (v->u64 > UINT32_MAX) return out_of_range(g, key, v, want, err);
        *out = (uint32_t)v->u64;
    } else if (is_signed(v->type)) {
        if (v->i64 < 0 || v->i64 > (int64_t)UINT32_MAX) return out_of_range(g, key, v, want, err);
        *out = (uint32_t)v->i64;
    } else {
        return wrong_type(g, key, v, want, err);
    }
    return 0;
}

int rlx_gguf_get_i64(const rlx_gguf *g, const char *key, int64_t *out, rlx_error *err)
{
    FIND_OR_RETURN(v);
    const char *want = "a signed 64-bit integer";
    if (is_unsigned(v->type)) {
        if (v->u64 > (uint64_t)INT64_MAX) return out_of_range(g, key, v, want, err);
        *out = (int64_t)v->u64;
    } else if (is_signed(v->type)) {
        *out = v->i64;
    } else {
        return wrong_type(g, key, v, want, err);
    }
    return 0;
}

int rlx_gguf_get_f32(const rlx_gguf *g, const char *key, float *out, rlx_error *err)
{
    FIND_OR_RETURN(v);
    if (v->type == RLX_GGUF_FLOAT32 || v->type == RLX_GGUF_FLOAT64) *out = (float)v->f64;
    else if (is_unsigned(v->type)) *out = (float)v->u64;
    else if (is_signed(v->type)) *out = (float)v->i64;
    else return wrong_type(g, key, v, "a number", err);
    return 0;
}

int rlx_gguf_get_bool(const rlx_gguf *g, const char *key, bool *out, rlx_error *err)
{
    FIND_OR_RETURN(v);
    if (v->type != RLX_GGUF_BOOL) return wrong_type(g, key, v, "a bool", err);
    *out = v->b;
    return 0;
}

int rlx_gguf_get_str(const rlx_gguf *g, const char *key, rlx_gguf_str *out, rlx_error *err)
{
    FIND_OR_RETURN(v);
    if (v->type != RLX_GGUF_STRING) return wrong_type(g, key, v, "a string", err);
    *out = v->str;
    return 0;
}

int rlx_gguf_get_arr(const rlx_gguf *g, const char *key, const rlx_gguf_array **out, rlx_error *err)
{
    FIND_OR_RETURN(v);
    if (v->type != RLX_GGUF_ARRAY) return wrong_type(g, key, v, "an array", err);
    *out = &v->arr;
    return 0;
}

/* ---- the handle's fields (gguf_handle.h) ---- */

/* fn(ctx) runs first in rlx_gguf_close (one hook per handle; a later call replaces it). */
void rlx__gguf_on_close(rlx_gguf *g, void (*fn)(void *), void *ctx)
{
    g->release = fn;
    g->release_ctx = ctx;
}

/* fn(release_ctx, ...) tells rlx_gguf_changed whether files the on-close context maps changed. */
void rlx__gguf_on_check(rlx_gguf *g, bool (*fn)(void *ctx, char *why, size_t cap)) { g->changed = fn; }

bool rlx_gguf_changed(const rlx_gguf *g, char *why, size_t cap)
{
    char w[96];
    if (rlx__filemap_changed(&g->map, w, sizeof w)) {
        if (why && cap) snprintf(why, cap, "%s: %s", g->name, w);
        return true;
    }
    if (g->changed && g->changed(g->release_ctx, why, cap)) return true;
    for (uint32_t i = 0; i < g->n_parts; i++)
        if (rlx_gguf_changed(g->parts[i], why, cap)) return true;
    return false;
}

uint32_t rlx_gguf_n_parts(const rlx_gguf *g) { return g->n_parts + 1; }

const char *rlx_gguf_part_path(const rlx_gguf *g, uint32_t i)
{
    return i == 0 ? g->name : i <= g->n_parts ? g->parts[i - 1]->name : NULL;
}

const char *rlx_gguf_path(const rlx_gguf *g) { return g->name; }
uint32_t rlx_gguf_version(const rlx_gguf *g) { return g->version; }
uint64_t rlx_gguf_alignment(const rlx_gguf *g) { return g->alignment; }
uint64_t rlx_gguf_file_size(const rlx_gguf *g) { return g->size; }
const void *rlx_gguf_bytes(const rlx_gguf *g) { return g->base; }
uint64_t rlx_gguf_data_offset(const rlx_gguf *g) { return g->data_offset; }
uint64_t rlx_gguf_n_kv(const rlx_gguf *g) { return g->n_kv; }
uint64_t rlx_gguf_n_tensors(const rlx_gguf *g) { return g->n_tensors; }

const rlx_gguf_kv *rlx_gguf_kv_at(const rlx_gguf *g, uint64_t i)
{
    return i < g->n_kv ? &g->kvs[i] : NULL;
}

const rlx_gguf_tensor *rlx_gguf_tensor_at(const rlx_gguf *g, uint64_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}
