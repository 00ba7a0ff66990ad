/* gguf_write.c - GGUF v3 writer (rlxd-synth, tests).
 *
 * Owns: deep copies of every key, value and tensor it is given (freed by rlx_gguf_writer_free).
 * Layout follows the GGUF spec as llama.cpp reads it: header, key/values in insertion order
 * (general.alignment always present, as a uint32), tensor infos whose offsets are the running
 * sum of sizes each padded to the alignment, zero padding up to the aligned data section, then
 * every tensor followed by zero padding to the alignment. The file is written to a temporary
 * name beside the target and renamed, so readers never see a half-written model. */
#include "models/gguf.h"
#include "backends/dtype.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_DEPTH 16
#define GGML_MAX_NAME 64   /* llama.cpp rejects tensor names of 64 bytes or more */

typedef struct wkv {
    char *key;
    rlx_gguf_value v;      /* strings and arrays point to memory owned by the writer */
} wkv;

typedef struct wtensor {
    char *name;
    int type;
    uint32_t n_dims;
    int64_t ne[RLX_GGUF_MAX_DIMS];
    void *data;
    uint64_t size;
} wtensor;

struct rlx_gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *ts;
    size_t n_t, cap_t;
    char err[256];         /* why the last failing call failed */
};

static const uint8_t elem_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

__attribute__((format(printf, 3, 4)))
static int werr(rlx_gguf_writer *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    return code;
}

rlx_gguf_writer *rlx_gguf_writer_new(void)
{
    return calloc(1, sizeof(rlx_gguf_writer));
}

const char *rlx_gguf_writer_last_error(const rlx_gguf_writer *w)
{
    return w->err;
}

/* ---- deep copies of values ---- */

static void free_arr(rlx_gguf_array *a)
{
    if (a->type == RLX_GGUF_ARRAY && a->arrs) {
        for (uint64_t i = 0; i < a->n; i++) free_arr((rlx_gguf_array *)&a->arrs[i]);
        free((void *)a->arrs);
    } else if (a->type == RLX_GGUF_STRING) {
        free((void *)a->strs); /* one block: the table, then the bytes */
    } else {
        free((void *)a->data);
    }
    memset(a, 0, sizeof *a);
}

static void free_value(rlx_gguf_value *v)
{
    if (v->type == RLX_GGUF_STRING) free((void *)v->str.ptr);
    else if (v->type == RLX_GGUF_ARRAY) free_arr(&v->arr);
    memset(v, 0, sizeof *v);
}

static int clone_str(rlx_gguf_str *dst, const char *s, uint64_t len)
{
    char *c = malloc(len ? len : 1);
    if (!c) return RLX_ENOMEM;
    if (len) memcpy(c, s, len);
    dst->ptr = c;
    dst->len = len;
    return 0;
}

static int clone_arr(rlx_gguf_writer *w, rlx_gguf_array *dst, const rlx_gguf_array *src, int depth)
{
    memset(dst, 0, sizeof *dst);
    if ((unsigned)src->type > RLX_GGUF_FLOAT64)
        return werr(w, RLX_EINVAL, "array element type %d is not a GGUF type", (int)src->type);
    if (depth > GGUF_MAX_DEPTH) return werr(w, RLX_EINVAL, "arrays nested more than %d deep", GGUF_MAX_DEPTH);
    if (src->n && src->n > SIZE_MAX / 64) return werr(w, RLX_ENOMEM, "array of %llu elements is too large",
                                                      (unsigned long long)src->n);
    size_t n = (size_t)src->n;
    dst->type = src->type;
    dst->n = src->n;
    if (src->type == RLX_GGUF_STRING) {
        if (n && !src->strs) return werr(w, RLX_EINVAL, "string array without its strings");
        size_t total = n * sizeof(rlx_gguf_str);
        for (size_t i = 0; i < n; i++) total += (size_t)src->strs[i].len;
        rlx_gguf_str *t = malloc(total ? total : 1);
        if (!t) return werr(w, RLX_ENOMEM, "out of memory copying a string array");
        char *bytes = (char *)(t + n);
        for (size_t i = 0; i < n; i++) {
            if (src->strs[i].len) memcpy(bytes, src->strs[i].ptr, (size_t)src->strs[i].len);
            t[i].ptr = bytes;
            t[i].len = src->strs[i].len;
            bytes += src->strs[i].len;
        }
        dst->strs = t;
    } else if (src->type == RLX_GGUF_ARRAY) {
        if (n && !src->arrs) return werr(w, RLX_EINVAL, "nested array without its elements");
        rlx_gguf_array *t = calloc(n ? n : 1, sizeof *t);
        if (!t) return werr(w, RLX_ENOMEM, "out of memory copying a nested array");
        dst->arrs = t;
        for (size_t i = 0; i < n; i++) {
            int rc = clone_arr(w, &t[i], &src->arrs[i], depth + 1);
            if (rc) {
                dst->n = i + 1; /* free what was copied, including the failed element's parts */
                free_arr(dst);
                return rc;
            }
        }
    } else {
        size_t bytes = n * elem_size[src->type];
        if (n && !src->data) return werr(w, RLX_EINVAL, "array without its data");
        if (src->type == RLX_GGUF_BOOL) /* readers reject anything but 0 and 1 */
            for (size_t i = 0; i < n; i++)
                if (((const uint8_t *)src->data)[i] > 1)
                    return werr(w, RLX_EINVAL, "bool array element %zu is %u, not 0 or 1", i,
                                ((const uint8_t *)src->data)[i]);
        void *d = malloc(bytes ? bytes : 1);
        if (!d) return werr(w, RLX_ENOMEM, "out of memory copying an array");
        if (bytes) memcpy(d, src->data, bytes);
        dst->data = d;
    }
    return 0;
}

static int clone_value(rlx_gguf_writer *w, rlx_gguf_value *dst, const rlx_gguf_value *src)
{
    if ((unsigned)src->type > RLX_GGUF_FLOAT64)
        return werr(w, RLX_EINVAL, "value type %d is not a GGUF type", (int)src->type);
    if (src->type == RLX_GGUF_STRING) {
        if (src->str.len && !src->str.ptr) return werr(w, RLX_EINVAL, "string value without its bytes");
        dst->type = RLX_GGUF_STRING;
        return clone_str(&dst->str, src->str.ptr, src->str.len) ? werr(w, RLX_ENOMEM, "out of memory") : 0;
    }
    if (src->type == RLX_GGUF_ARRAY) {
        dst->type = RLX_GGUF_ARRAY;
        return clone_arr(w, &dst->arr, &src->arr, 1);
    }
    *dst = *src;
    return 0;
}

/* Takes ownership of *v (already a private copy): replaces an existing key or appends. */
static int put(rlx_gguf_writer *w, const char *key, rlx_gguf_value *v)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, key)) {
            free_value(&w->kvs[i].v);
            w->kvs[i].v = *v;
            return 0;
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wkv *n = realloc(w->kvs, cap * sizeof *n);
        if (!n) goto oom;
        w->kvs = n;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) goto oom;
    w->kvs[w->n_kv].key = k;
    w->kvs[w->n_kv].v = *v;
    w->n_kv++;
    return 0;
oom:
    free_value(v);
    return werr(w, RLX_ENOMEM, "out of memory adding key '%s'", key);
}

static int check_key(rlx_gguf_writer *w, const char *key)
{
    if (!w) return RLX_EINVAL;
    w->err[0] = 0;
    if (!key || !*key) return werr(w, RLX_EINVAL, "metadata keys must be non-empty");
    if (strlen(key) > 65535) return werr(w, RLX_EINVAL, "metadata key longer than 65535 bytes");
    return 0;
}

static int set_scalar(rlx_gguf_writer *w, const char *key, rlx_gguf_value v)
{
    int rc = check_key(w, key);
    return rc ? rc : put(w, key, &v);
}

int rlx_gguf_writer_set_u32(rlx_gguf_writer *w, const char *key, uint32_t v)
{
    return set_scalar(w, key, (rlx_gguf_value){.type = RLX_GGUF_UINT32, .u64 = v});
}

int rlx_gguf_writer_set_i32(rlx_gguf_writer *w, const char *key, int32_t v)
{
    return set_scalar(w, key, (rlx_gguf_value){.type = RLX_GGUF_INT32, .i64 = v});
}

int rlx_gguf_writer_set_u64(rlx_gguf_writer *w, const char *key, uint64_t v)
{
    return set_scalar(w, key, (rlx_gguf_value){.type = RLX_GGUF_UINT64, .u64 = v});
}

int rlx_gguf_writer_set_f32(rlx_gguf_writer *w, const char *key, float v)
{
    return set_scalar(w, key, (rlx_gguf_value){.type = RLX_GGUF_FLOAT32, .f64 = v});
}

int rlx_gguf_writer_set_bool(rlx_gguf_writer *w, const char *key, bool v)
{
    return set_scalar(w, key, (rlx_gguf_value){.type = RLX_GGUF_BOOL, .b = v});
}

int rlx_gguf_writer_set_str(rlx_gguf_writer *w, const char *key, const char *s, size_t len)
{
    rlx_gguf_value v = {.type = RLX_GGUF_STRING, .str = {s, len}};
    int rc = check_key(w, key);
    if (rc) return rc;
    rlx_gguf_value c;
    if ((rc = clone_value(w, &c, &v))) return rc;
    return put(w, key, &c);
}

int rlx_gguf_writer_set_arr(rlx_gguf_writer *w, const char *key, rlx_gguf_type elem_type, const void *data, uint64_t n)
{
    int rc = check_key(w, key);
    if (rc) return rc;
    if ((unsigned)elem_type > RLX_GGUF_FLOAT64 || elem_type == RLX_GGUF_STRING || elem_type == RLX_GGUF_ARRAY)
        return werr(w, RLX_EINVAL, "'%s': rlx_gguf_writer_set_arr takes scalar element types only", key);
    rlx_gguf_value v = {.type = RLX_GGUF_ARRAY, .arr = {.type = elem_type, .n = n, .data = data}}, c;
    if ((rc = clone_value(w, &c, &v))) return rc;
    return put(w, key, &c);
}

int rlx_gguf_writer_set_arr_str(rlx_gguf_writer *w, const char *key, const rlx_gguf_str *strs, uint64_t n)
{
    int rc = check_key(w, key);
    if (rc) return rc;
    rlx_gguf_value v = {.type = RLX_GGUF_ARRAY, .arr = {.type = RLX_GGUF_STRING, .n = n, .strs = strs}}, c;
    if ((rc = clone_value(w, &c, &v))) return rc;
    return put(w, key, &c);
}

int rlx_gguf_writer_copy_kv(rlx_gguf_writer *w, const rlx_gguf_kv *kv)
{
    if (!kv) return RLX_EINVAL;
    int rc = check_key(w, kv->key);
    if (rc) return rc;
    rlx_gguf_value c;
    if ((rc = clone_value(w, &c, &kv->value))) return rc;
    return put(w, kv->key, &c);
}

int rlx_gguf_writer_add_tensor(rlx_gguf_writer *w, const char *name, int type, uint32_t n_dims,
                               const int64_t *ne, const void *data, uint64_t size)
{
    if (!w) return RLX_EINVAL;
    w->err[0] = 0;
    if (!name || !*name || strlen(name) >= GGML_MAX_NAME)
        return werr(w, RLX_EINVAL, "tensor names must be 1 to %d bytes long", GGML_MAX_NAME - 1);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->ts[i].name, name)) return werr(w, RLX_EINVAL, "tensor '%s' added twice", name);
    const rlx_dtype_info *di = rlx_dtype_get(type);
    if (!di) return werr(w, RLX_EINVAL, "tensor '%s': unknown tensor type id %d", name, type);
    if (n_dims == 0 || n_dims > RLX_GGUF_MAX_DIMS || !ne)
        return werr(w, RLX_EINVAL, "tensor '%s': %u dimensions (1 to %d allowed)", name, n_dims, RLX_GGUF_MAX_DIMS);
    uint64_t want = 0;
    int64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] <= 0 || __builtin_mul_overflow(nel, ne[d], &nel))
            return werr(w, RLX_EINVAL, "tensor '%s': dimension %u (%lld) is not positive or overflows", name, d,
                        (long long)ne[d]);
    if (ne[0] % di->block_elems)
        return werr(w, RLX_EINVAL, "tensor '%s': row of %lld elements is not a multiple of the %s block size (%d)",
                    name, (long long)ne[0], di->name, di->block_elems);
    want = (uint64_t)(nel / di->block_elems) * (uint64_t)di->block_bytes;
    if (size != want)
        return werr(w, RLX_EINVAL, "tensor '%s': %llu bytes given, its shape and type %s need %llu", name,
                    (unsigned long long)size, di->name, (unsigned long long)want);
    if (size && !data) return werr(w, RLX_EINVAL, "tensor '%s': no data", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *n = realloc(w->ts, cap * sizeof *n);
        if (!n) return werr(w, RLX_ENOMEM, "out of memory adding tensor '%s'", name);
        w->ts = n;
        w->cap_t = cap;
    }
    wtensor *t = &w->ts[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->data = malloc(size ? size : 1);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        return werr(w, RLX_ENOMEM, "out of memory copying tensor '%s' (%llu bytes)", name, (unsigned long long)size);
    }
    if (size) memcpy(t->data, data, size);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < RLX_GGUF_MAX_DIMS; d++) t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    t->size = size;
    w->n_t++;
    return 0;
}

void rlx_gguf_writer_free(rlx_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free_value(&w->kvs[i].v);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->ts[i].name);
        free(w->ts[i].data);
    }
    free(w->kvs);
    free(w->ts);
    free(w);
}

/* ---- serialization ---- */

static void put_u32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void put_u64(FILE *f, uint64_t v) { fwrite(&v, 8, 1, f); }

static void put_str(FILE *f, const char *s, uint64_t len)
{
    put_u64(f, len);
    if (len) fwrite(s, 1, (size_t)len, f);
}

static void put_pad(FILE *f, uint64_t pos, uint64_t align)
{
    static const char zeros[256];
    for (uint64_t n = (align - pos % align) % align; n; ) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        fwrite(zeros, 1, k, f);
        n -= k;
    }
}

static void put_array(FILE *f, const rlx_gguf_array *a)
{
    put_u32(f, (uint32_t)a->type);
    put_u64(f, a->n);
    if (a->type == RLX_GGUF_STRING)
        for (uint64_t i = 0; i < a->n; i++) put_str(f, a->strs[i].ptr, a->strs[i].len);
    else if (a->type == RLX_GGUF_ARRAY)
        for (uint64_t i = 0; i < a->n; i++) put_array(f, &a->arrs[i]);
    else if (a->n)
        fwrite(a->data, elem_size[a->type], (size_t)a->n, f);
}

static void put_value(FILE *f, const rlx_gguf_value *v)
{
    put_u32(f, (uint32_t)v->type);
    switch (v->type) {
    case RLX_GGUF_STRING: put_str(f, v->str.ptr, v->str.len); break;
    case RLX_GGUF_ARRAY: put_array(f, &v->arr); break;
    case RLX_GGUF_FLOAT32: { float x = (float)v->f64; fwrite(&x, 4, 1, f); break; }
    case RLX_GGUF_FLOAT64: fwrite(&v->f64, 8, 1, f); break;
    case RLX_GGUF_BOOL: { uint8_t b = v->b ? 1 : 0; fwrite(&b, 1, 1, f); break; }
    case RLX_GGUF_INT8: case RLX_GGUF_INT16: case RLX_GGUF_INT32: case RLX_GGUF_INT64:
        fwrite(&v->i64, elem_size[v->type], 1, f); /* little-endian: the low bytes come first */
        break;
    default: fwrite(&v->u64, elem_size[v->type], 1, f); break;
    }
}

/* The alignment to use, from general.alignment when set (validated) or the default. */
static int writer_alignment(rlx_gguf_writer *w, const char *path, uint64_t *align, bool *present, rlx_error *err)
{
    *align = GGUF_DEFAULT_ALIGN;
    *present = false;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, "general.alignment")) continue;
        const rlx_gguf_value *v = &w->kvs[i].v;
        uint64_t a;
        switch (v->type) {
        case RLX_GGUF_UINT8: case RLX_GGUF_UINT16: case RLX_GGUF_UINT32: case RLX_GGUF_UINT64: a = v->u64; break;
        case RLX_GGUF_INT8: case RLX_GGUF_INT16: case RLX_GGUF_INT32: case RLX_GGUF_INT64:
            a = v->i64 < 0 ? 0 : (uint64_t)v->i64;
            break;
        default:
            return rlx_errorf(err, RLX_EINVAL, "%s: general.alignment must be an unsigned integer", path);
        }
        if (a == 0 || (a & (a - 1)) || a > (1u << 30))
            return rlx_errorf(err, RLX_EINVAL, "%s: general.alignment %llu is not a power of two up to 2^30", path,
                              (unsigned long long)a);
        *align = a;
        *present = true;
        /* llama.cpp reads it as a uint32, whatever type it was given as */
        w->kvs[i].v = (rlx_gguf_value){.type = RLX_GGUF_UINT32, .u64 = a};
    }
    return 0;
}

/* The GGUF image of w's keys (all of them when all_kvs, else only general.alignment), extra[0..n_extra)
 * and tensors [t0, t1) onto f; returns the header's length (the tensor data's offset) or -1. */
static long emit(const rlx_gguf_writer *w, FILE *f, uint64_t align, bool have_align, bool all_kvs, const wkv *extra,
                 size_t n_extra, size_t t0, size_t t1)
{
    size_t n_kv = all_kvs ? w->n_kv : 0;
    fwrite(GGUF_MAGIC, 1, 4, f);
    put_u32(f, 3);
    put_u64(f, t1 - t0);
    put_u64(f, n_kv + n_extra + (have_align && all_kvs ? 0 : 1));
    for (size_t i = 0; i < n_kv; i++) {
        put_str(f, w->kvs[i].key, strlen(w->kvs[i].key));
        put_value(f, &w->kvs[i].v);
    }
    for (size_t i = 0; i < n_extra; i++) {
        put_str(f, extra[i].key, strlen(extra[i].key));
        put_value(f, &extra[i].v);
    }
    if (!have_align || !all_kvs) {
        rlx_gguf_value v = {.type = RLX_GGUF_UINT32, .u64 = align};
        put_str(f, "general.alignment", strlen("general.alignment"));
        put_value(f, &v);
    }
    uint64_t off = 0;
    for (size_t i = t0; i < t1; i++) {
        const wtensor *t = &w->ts[i];
        put_str(f, t->name, strlen(t->name));
        put_u32(f, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(f, (uint64_t)t->ne[d]);
        put_u32(f, (uint32_t)t->type);
        put_u64(f, off);
        off += t->size + (align - t->size % align) % align;
    }
    long pos = ftell(f);
    if (pos >= 0) put_pad(f, (uint64_t)pos, align);
    for (size_t i = t0; i < t1; i++) {
        if (w->ts[i].size) fwrite(w->ts[i].data, 1, (size_t)w->ts[i].size, f);
        put_pad(f, w->ts[i].size, align);
    }
    return pos;
}

/* One file: w's keys when all_kvs (else only general.alignment), then extra[0..n_extra), then
 * tensors [t0, t1). */
static int write_file(rlx_gguf_writer *w, const char *path, bool all_kvs, const wkv *extra, size_t n_extra,
                      size_t t0, size_t t1, rlx_error *err)
{
    uint64_t align;
    bool have_align;
    int rc = writer_alignment(w, path, &align, &have_align, err);
    if (rc) return rc;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return rlx_errorf(err, RLX_ENOMEM, "%s: out of memory", path);
    FILE *f = rlx_tmpfile_beside(path, 0644, tmp, plen + 16);
    if (!f) {
        rc = rlx_errorf(err, RLX_EIO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        free(tmp);
        return rc;
    }

    long pos = emit(w, f, align, have_align, all_kvs, extra, n_extra, t0, t1);
    int bad = pos < 0 || ferror(f) || fflush(f) || fsync(fileno(f));
    int e = errno;
    if (fclose(f)) bad = 1, e = errno;
    if (!bad && rename(tmp, path)) bad = 1, e = errno;
    if (bad) {
        unlink(tmp);
        rc = rlx_errorf(err, RLX_EIO, "%s: writing the GGUF file failed: %s", path, strerror(e));
    }
    free(tmp);
    return rc;
}

int rlx_gguf_writer_write(rlx_gguf_writer *w, const char *path, rlx_error *err)
{
    if (!w || !path) return rlx_errorf(err, RLX_EINVAL, "rlx_gguf_writer_write: no writer or path");
    return write_file(w, path, true, NULL, 0, 0, w->n_t, err);
}

int rlx_gguf_writer_write_split(rlx_gguf_writer *w, const char *path, uint32_t n_split, rlx_error *err)
{
    if (!w || !path) return rlx_errorf(err, RLX_EINVAL, "rlx_gguf_writer_write_split: no writer or path");
    if (n_split <= 1) return rlx_gguf_writer_write(w, path, err);
    if (n_split > 99999 || n_split > w->n_t || w->n_t > INT32_MAX)
        return rlx_errorf(err, RLX_EINVAL, "%s: cannot split %zu tensors into %u parts (each part needs a tensor)", path,
                          w->n_t, n_split);
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strncmp(w->kvs[i].key, "split.", 6))
            return rlx_errorf(err, RLX_EINVAL, "%s: the writer already has the key '%s'", path, w->kvs[i].key);
    size_t plen = strlen(path);
    if (plen > 5 && !strcmp(path + plen - 5, ".gguf")) plen -= 5;
    char *prefix = strndup(path, plen), *name = malloc(plen + 32);
    int rc = 0;
    if (!prefix || !name) rc = rlx_errorf(err, RLX_ENOMEM, "%s: out of memory", path);
    /* as gguf-split --split-max-tensors: the same number of tensors in every part but the last */
    size_t per = (w->n_t + n_split - 1) / n_split;
    if (!rc && (w->n_t + per - 1) / per != n_split)
        rc = rlx_errorf(err, RLX_EINVAL, "%s: %zu tensors do not make %u parts of %zu (try %zu parts)", path, w->n_t,
                        n_split, per, (w->n_t + per - 1) / per);
    for (uint32_t p = 0; !rc && p < n_split; p++) {
        wkv extra[3] = {
            {"split.no", {.type = RLX_GGUF_UINT16, .u64 = p}},
            {"split.count", {.type = RLX_GGUF_UINT16, .u64 = n_split}},
            {"split.tensors.count", {.type = RLX_GGUF_INT32, .i64 = (int64_t)w->n_t}},
        };
        snprintf(name, plen + 32, "%s-%05u-of-%05u.gguf", prefix, p + 1, n_split);
        size_t t0 = (size_t)p * per, t1 = RLX_MIN(t0 + per, w->n_t);
        rc = write_file(w, name, p == 0, extra, 3, t0, t1, err);
        for (uint32_t q = 0; rc && q < p; q++) { /* no half-written model stays behind */
            snprintf(name, plen + 32, "%s-%05u-of-%05u.gguf", prefix, q + 1, n_split);
            unlink(name);
        }
    }
    free(prefix);
    free(name);
    return rc;
}

int rlx_gguf_writer_write_memory(rlx_gguf_writer *w, void **data, size_t *size, rlx_error *err)
{
    *data = NULL;
    *size = 0;
    uint64_t align;
    bool have_align;
    int rc = writer_alignment(w, "(memory)", &align, &have_align, err);
    if (rc) return rc;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return rlx_errorf(err, RLX_ENOMEM, "out of memory writing a GGUF image");
    long pos = emit(w, f, align, have_align, true, NULL, 0, 0, w->n_t);
    int bad = pos < 0 || ferror(f);
    if (fclose(f) || bad) {
        free(buf);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory writing a GGUF image");
    }
    *data = buf;
    *size = len;
    return 0;
}
