/* gguf.c - GGUF v2/v3 reader over mmap (or a borrowed buffer).
 *
 * Owns: the mapping, an arena holding every parsed structure (kv and tensor tables, copied
 * NUL-terminated keys and names, string/array element tables), two hash indexes, and for a
 * split model the other parts' handles (rlx__gguf_adopt_parts, called by gguf_split.c). String
 * and scalar array payloads are not copied: they point into the mapping, so opening a file
 * with a 150k-token vocabulary costs one table allocation, not 150k.
 *
 * Validation happens entirely at open time and is written so that no read leaves [0, size):
 * every count is checked against the bytes that remain BEFORE anything is allocated for it. */
#include "models/gguf.h"
#include "backends/dtype.h"
#include "models/filemap.h"
#include "models/gguf_handle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

#define GGUF_MAGIC 0x46554747u     /* "GGUF" read as a little-endian u32 */
#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_DEPTH 16          /* nested arrays deeper than this are surely corrupt */
#define GGUF_MAX_KEY 65535         /* the spec caps keys at 2^16-1 bytes */
#define GGUF_MAX_NAME 65535
#define ARENA_BLOCK (64 * 1024)

/* ---- arena: many small allocations, one free at close ---- */


static void *arena_alloc(arena_block **head, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_block *b = *head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK / 4 ? n : ARENA_BLOCK;
        arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        if (b && cap != ARENA_BLOCK) { /* a big one-off: keep the current block for small ones */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            *head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void arena_free(arena_block *b)
{
    while (b) {
        arena_block *n = b->next;
        free(b);
        b = n;
    }
}

/* ---- the parser and its error context ---- */

enum { CTX_HEADER, CTX_KV, CTX_TENSOR };

typedef struct parser {
    rlx_gguf *g;
    const uint8_t *p;
    uint64_t size, pos;
    rlx_error *err;
    int ctx;                    /* which part is being read, for messages */
    uint64_t index;             /* kv or tensor number */
    const char *ident;          /* its key or name once known (NUL-terminated) */
    int depth;                  /* array nesting depth; elem[0..depth) is the element path */
    uint64_t elem[GGUF_MAX_DEPTH + 1];
    bool prefix;                /* the bytes are the file's beginning only: tensors' data unchecked */
    uint64_t extent;            /* prefix: the size the whole file needs (data end) */
} parser;

static const char *const type_names[] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
    "string", "array", "uint64", "int64", "float64",
};
static const uint8_t type_sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static bool type_valid(uint32_t t) { return t <= RLX_GGUF_FLOAT64; }

/* Writes a printable, truncated rendering of s into out (for keys and names in messages). */
static void printable(char *out, size_t cap, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= 80) { memcpy(out + o, "...", 3); o += 3; break; }
        if (c >= 0x20 && c < 0x7f && c != '\'') out[o++] = (char)c;
        else o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
    out[o] = 0;
}

__attribute__((format(printf, 3, 4)))
static int perr(parser *ps, int code, const char *fmt, ...)
{
    if (!ps->err) return code;
    char where[400] = "", id[400] = "";
    size_t w = 0;
    if (ps->ident) printable(id, sizeof id, ps->ident, strlen(ps->ident));
    if (ps->ctx == CTX_KV)
        w = (size_t)snprintf(where, sizeof where, "metadata key #%llu%s%s%s: ",
                             (unsigned long long)ps->index, ps->ident ? " '" : "", id, ps->ident ? "'" : "");
    else if (ps->ctx == CTX_TENSOR)
        w = (size_t)snprintf(where, sizeof where, "tensor #%llu%s%s%s: ",
                             (unsigned long long)ps->index, ps->ident ? " '" : "", id, ps->ident ? "'" : "");
    if (ps->depth > 0 && w < sizeof where) {
        w += (size_t)snprintf(where + w, sizeof where - w, "element ");
        for (int d = 0; d < ps->depth && w < sizeof where; d++)
            w += (size_t)snprintf(where + w, sizeof where - w, "[%llu]", (unsigned long long)ps->elem[d]);
        if (w < sizeof where) snprintf(where + w, sizeof where - w, ": ");
    }
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rlx_errorf(ps->err, code, "%s: %s%s", ps->g->name, where, what);
}

static uint64_t left(const parser *ps) { return ps->size - ps->pos; }

static int need(parser *ps, uint64_t n, const char *what)
{
    if (n <= left(ps)) return 0;
    return perr(ps, RLX_EFORMAT, "file truncated: %s (%llu bytes at offset %llu) runs past the end of the file (%llu bytes)",
                what, (unsigned long long)n, (unsigned long long)ps->pos, (unsigned long long)ps->size);
}

static int rd_u32(parser *ps, uint32_t *v, const char *what)
{
    int rc = need(ps, 4, what);
    if (rc) return rc;
    memcpy(v, ps->p + ps->pos, 4);
    ps->pos += 4;
    return 0;
}

static int rd_u64(parser *ps, uint64_t *v, const char *what)
{
    int rc = need(ps, 8, what);
    if (rc) return rc;
    memcpy(v, ps->p + ps->pos, 8);
    ps->pos += 8;
    return 0;
}

static int rd_str(parser *ps, rlx_gguf_str *s, const char *what)
{
    uint64_t at = ps->pos, len;
    char lw[64];
    snprintf(lw, sizeof lw, "%s length", what);
    int rc = rd_u64(ps, &len, lw);
    if (rc) return rc;
    if (len > left(ps))
        return perr(ps, RLX_EFORMAT, "%s length %llu runs past the end of the file (offset %llu, %llu bytes left)",
                    what, (unsigned long long)len, (unsigned long long)at, (unsigned long long)left(ps));
    s->ptr = (const char *)ps->p + ps->pos;
    s->len = len;
    ps->pos += len;
    return 0;
}

static void *palloc(parser *ps, size_t n, int *rc)
{
    void *p = arena_alloc(&ps->g->arena, n ? n : 1);
    if (!p) *rc = perr(ps, RLX_ENOMEM, "out of memory (%zu bytes)", n);
    return p;
}

/* Copies a key or tensor name as a NUL-terminated string, refusing embedded NULs. */
static int rd_ident(parser *ps, const char **out, uint64_t max, const char *what)
{
    rlx_gguf_str s;
    int rc = rd_str(ps, &s, what);
    if (rc) return rc;
    if (s.len == 0) return perr(ps, RLX_EFORMAT, "%s is empty (offset %llu)", what, (unsigned long long)(ps->pos - 8));
    if (s.len > max)
        return perr(ps, RLX_EFORMAT, "%s is %llu bytes long, more than the limit of %llu (offset %llu)", what,
                    (unsigned long long)s.len, (unsigned long long)max, (unsigned long long)(ps->pos - s.len - 8));
    if (memchr(s.ptr, 0, s.len))
        return perr(ps, RLX_EFORMAT, "%s contains a NUL byte (offset %llu)", what, (unsigned long long)(ps->pos - s.len));
    char *c = palloc(ps, s.len + 1, &rc);
    if (!c) return rc;
    memcpy(c, s.ptr, s.len);
    c[s.len] = 0;
    *out = c;
    return 0;
}

static int parse_array(parser *ps, rlx_gguf_array *a);

static int check_bools(parser *ps, const uint8_t *b, uint64_t n, uint64_t at)
{
    for (uint64_t i = 0; i < n; i++)
        if (b[i] > 1)
            return perr(ps, RLX_EFORMAT, "bool value %u is neither 0 nor 1 (offset %llu)", b[i],
                        (unsigned long long)(at + i));
    return 0;
}

/* Reads one value of type t (already validated) into v. */
static int parse_value(parser *ps, uint32_t t, rlx_gguf_value *v)
{
    v->type = (rlx_gguf_type)t;
    if (t == RLX_GGUF_STRING) return rd_str(ps, &v->str, "string");
    if (t == RLX_GGUF_ARRAY) return parse_array(ps, &v->arr);
    uint64_t at = ps->pos;
    int rc = need(ps, type_sizes[t], type_names[t]);
    if (rc) return rc;
    const uint8_t *b = ps->p + ps->pos;
    ps->pos += type_sizes[t];
    switch (t) {
    case RLX_GGUF_UINT8: v->u64 = b[0]; break;
    case RLX_GGUF_INT8: v->i64 = (int8_t)b[0]; break;
    case RLX_GGUF_UINT16: { uint16_t x; memcpy(&x, b, 2); v->u64 = x; break; }
    case RLX_GGUF_INT16: { int16_t x; memcpy(&x, b, 2); v->i64 = x; break; }
    case RLX_GGUF_UINT32: { uint32_t x; memcpy(&x, b, 4); v->u64 = x; break; }
    case RLX_GGUF_INT32: { int32_t x; memcpy(&x, b, 4); v->i64 = x; break; }
    case RLX_GGUF_UINT64: memcpy(&v->u64, b, 8); break;
    case RLX_GGUF_INT64: memcpy(&v->i64, b, 8); break;
    case RLX_GGUF_FLOAT32: { float x; memcpy(&x, b, 4); v->f64 = x; break; }
    case RLX_GGUF_FLOAT64: memcpy(&v->f64, b, 8); break;
    case RLX_GGUF_BOOL:
        if ((rc = check_bools(ps, b, 1, at))) return rc;
        v->b = b[0] != 0;
        break;
    }
    return 0;
}

static int parse_array(parser *ps, rlx_gguf_array *a)
{
    uint32_t et;
    uint64_t n, at = ps->pos;
    int rc;
    memset(a, 0, sizeof *a);
    if ((rc = rd_u32(ps, &et, "array element type"))) return rc;
    if (!type_valid(et))
        return perr(ps, RLX_EFORMAT, "unknown array element type %u (offset %llu)", et, (unsigned long long)at);
    if ((rc = rd_u64(ps, &n, "array length"))) return rc;
    if (et == RLX_GGUF_ARRAY && ps->depth >= GGUF_MAX_DEPTH)
        return perr(ps, RLX_EFORMAT, "arrays nested more than %d deep (offset %llu)", GGUF_MAX_DEPTH,
                    (unsigned long long)at);
    /* smallest encoding of one element: strings need their length, arrays type + length */
    uint64_t min = et == RLX_GGUF_STRING ? 8 : et == RLX_GGUF_ARRAY ? 12 : type_sizes[et];
    if (n > left(ps) / min)
        return perr(ps, RLX_EFORMAT, "array of %llu %s elements cannot fit in the %llu bytes left in the file (offset %llu)",
                    (unsigned long long)n, type_names[et], (unsigned long long)left(ps), (unsigned long long)at);
    a->type = (rlx_gguf_type)et;
    a->n = n;
    a->data = ps->p + ps->pos;
    if (et != RLX_GGUF_STRING && et != RLX_GGUF_ARRAY) {
        if (et == RLX_GGUF_BOOL && (rc = check_bools(ps, ps->p + ps->pos, n, ps->pos))) return rc;
        ps->pos += n * min;
        return 0;
    }
    int d = ps->depth++;
    if (et == RLX_GGUF_STRING) {
        rlx_gguf_str *s = palloc(ps, (size_t)n * sizeof *s, &rc);
        if (!s) return rc;
        a->strs = s;
        for (uint64_t i = 0; i < n; i++) {
            ps->elem[d] = i;
            if ((rc = rd_str(ps, &s[i], "string"))) return rc;
        }
    } else {
        rlx_gguf_array *sub = palloc(ps, (size_t)n * sizeof *sub, &rc);
        if (!sub) return rc;
        a->arrs = sub;
        for (uint64_t i = 0; i < n; i++) {
            ps->elem[d] = i;
            if ((rc = parse_array(ps, &sub[i]))) return rc;
        }
    }
    ps->depth--;
    return 0;
}

/* ---- hash indexes over keys and tensor names ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* Builds the index; returns the index of an earlier duplicate of entry i via *dup, or 0. */
static int build_index(parser *ps, uint64_t n, const char *(*name_of)(const rlx_gguf *, uint64_t),
                       uint32_t **out, uint64_t *mask, uint64_t *dup_i, uint64_t *dup_j)
{
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    int rc = 0;
    uint32_t *t = palloc(ps, (size_t)cap * sizeof *t, &rc);
    if (!t) return rc;
    memset(t, 0, (size_t)cap * sizeof *t);
    *out = t;
    *mask = cap - 1;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = name_of(ps->g, i);
        for (uint64_t h = hash_str(s) & (cap - 1);; h = (h + 1) & (cap - 1)) {
            if (!t[h]) { t[h] = (uint32_t)(i + 1); break; }
            if (!strcmp(name_of(ps->g, t[h] - 1), s)) {
                *dup_i = i;
                *dup_j = t[h] - 1;
                return 1;
            }
        }
    }
    return 0;
}

static const char *kv_name(const rlx_gguf *g, uint64_t i) { return g->kvs[i].key; }
static const char *tensor_name(const rlx_gguf *g, uint64_t i) { return g->tensors[i].name; }

static uint64_t lookup(const uint32_t *t, uint64_t mask, const rlx_gguf *g,
                       const char *(*name_of)(const rlx_gguf *, uint64_t), const char *s)
{
    if (!t || !s) return UINT64_MAX;
    for (uint64_t h = hash_str(s) & mask; t[h]; h = (h + 1) & mask)
        if (!strcmp(name_of(g, t[h] - 1), s)) return t[h] - 1;
    return UINT64_MAX;
}

/* ---- the sections ---- */

static int parse_header(parser *ps)
{
    rlx_gguf *g = ps->g;
    uint32_t magic, version;
    int rc;
    if (ps->size < 4)
        return perr(ps, RLX_EFORMAT, "file is %llu bytes, too short to be a GGUF file", (unsigned long long)ps->size);
    memcpy(&magic, ps->p, 4);
    if (magic != GGUF_MAGIC) {
        char m[64];
        printable(m, sizeof m, (const char *)ps->p, 4);
        return perr(ps, RLX_EFORMAT, "not a GGUF file: magic is '%s', expected 'GGUF'", m);
    }
    ps->pos = 4;
    if ((rc = rd_u32(ps, &version, "version"))) return rc;
    if (version == 1)
        return perr(ps, RLX_EUNSUPPORTED, "GGUF version 1 is not supported (only versions 2 and 3); "
                    "convert the file with a current llama.cpp");
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0 && (version >> 24) >= 1 && (version >> 24) <= 3)
            return perr(ps, RLX_EUNSUPPORTED, "version field 0x%08x looks like a big-endian GGUF file; "
                        "only little-endian files are supported", version);
        return perr(ps, version == 0 ? RLX_EFORMAT : RLX_EUNSUPPORTED,
                    "unsupported GGUF version %u (only versions 2 and 3 are supported)", version);
    }
    g->version = version;
    if ((rc = rd_u64(ps, &g->n_tensors, "tensor count"))) return rc;
    if ((rc = rd_u64(ps, &g->n_kv, "metadata key count"))) return rc;
    /* each kv needs a key length, a type and a 1-byte value; each tensor info at least 32 bytes */
    if (g->n_kv > left(ps) / 13)
        return perr(ps, RLX_EFORMAT, "metadata key count %llu cannot fit in the %llu bytes left in the file",
                    (unsigned long long)g->n_kv, (unsigned long long)left(ps));
    if (g->n_tensors > left(ps) / 32)
        return perr(ps, RLX_EFORMAT, "tensor count %llu cannot fit in the %llu bytes left in the file",
                    (unsigned long long)g->n_tensors, (unsigned long long)left(ps));
    if (g->n_kv >= UINT32_MAX || g->n_tensors >= UINT32_MAX)
        return perr(ps, RLX_EFORMAT, "too many keys or tensors");
    return 0;
}

static int parse_kvs(parser *ps)
{
    rlx_gguf *g = ps->g;
    int rc = 0;
    g->kvs = palloc(ps, (size_t)g->n_kv * sizeof *g->kvs, &rc);
    if (!g->kvs) return rc;
    ps->ctx = CTX_KV;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        rlx_gguf_kv *kv = &g->kvs[i];
        uint32_t t;
        ps->index = i;
        ps->ident = NULL;
        if ((rc = rd_ident(ps, &kv->key, GGUF_MAX_KEY, "key"))) return rc;
        ps->ident = kv->key;
        uint64_t at = ps->pos;
        if ((rc = rd_u32(ps, &t, "value type"))) return rc;
        if (!type_valid(t))
            return perr(ps, RLX_EFORMAT, "unknown value type %u (offset %llu)", t, (unsigned long long)at);
        if ((rc = parse_value(ps, t, &kv->value))) return rc;
    }
    uint64_t di, dj;
    if ((rc = build_index(ps, g->n_kv, kv_name, &g->kv_index, &g->kv_mask, &di, &dj)) < 0) return rc;
    if (rc) {
        ps->index = di;
        ps->ident = g->kvs[di].key;
        return perr(ps, RLX_EFORMAT, "duplicate key (also metadata key #%llu)", (unsigned long long)dj);
    }
    return 0;
}

static int parse_alignment(parser *ps)
{
    rlx_gguf *g = ps->g;
    g->alignment = GGUF_DEFAULT_ALIGN;
    uint64_t i = lookup(g->kv_index, g->kv_mask, g, kv_name, "general.alignment");
    if (i == UINT64_MAX) return 0;
    const rlx_gguf_value *v = &g->kvs[i].value;
    ps->ctx = CTX_KV;
    ps->index = i;
    ps->ident = g->kvs[i].key;
    uint64_t a;
    switch (v->type) {
    case RLX_GGUF_UINT8: case RLX_GGUF_UINT16: case RLX_GGUF_UINT32: case RLX_GGUF_UINT64: a = v->u64; break;
    case RLX_GGUF_INT8: case RLX_GGUF_INT16: case RLX_GGUF_INT32: case RLX_GGUF_INT64:
        a = v->i64 < 0 ? 0 : (uint64_t)v->i64;
        break;
    default:
        return perr(ps, RLX_EFORMAT, "alignment must be an unsigned integer, not a %s", type_names[v->type]);
    }
    if (a == 0 || (a & (a - 1)) || a > (1u << 30))
        return perr(ps, RLX_EFORMAT, "alignment %llu is not a nonzero power of two (at most 2^30)",
                    (unsigned long long)a);
    g->alignment = a;
    return 0;
}

static int parse_tensor_info(parser *ps, rlx_gguf_tensor *t)
{
    int rc;
    uint32_t type;
    if ((rc = rd_ident(ps, &t->name, GGUF_MAX_NAME, "name"))) return rc;
    ps->ident = t->name;
    uint64_t at = ps->pos;
    if ((rc = rd_u32(ps, &t->n_dims, "dimension count"))) return rc;
    if (t->n_dims == 0 || t->n_dims > RLX_GGUF_MAX_DIMS)
        return perr(ps, RLX_EFORMAT, "dimension count %u is not between 1 and %d (offset %llu)", t->n_dims,
                    RLX_GGUF_MAX_DIMS, (unsigned long long)at);
    for (int d = 0; d < RLX_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t v;
        at = ps->pos;
        if ((rc = rd_u64(ps, &v, "dimension"))) return rc;
        if (v == 0)
            return perr(ps, RLX_EFORMAT, "dimension %u is 0; dimensions must be positive (offset %llu)", d,
                        (unsigned long long)at);
        if (v > (uint64_t)INT64_MAX)
            return perr(ps, RLX_EFORMAT, "dimension %u is %llu, negative as a signed 64-bit size (offset %llu)", d,
                        (unsigned long long)v, (unsigned long long)at);
        t->ne[d] = (int64_t)v;
    }
    at = ps->pos;
    if ((rc = rd_u32(ps, &type, "tensor type"))) return rc;
    const rlx_dtype_info *di = rlx_dtype_get((int)type);
    if (!di || type > INT32_MAX)
        return perr(ps, RLX_EUNSUPPORTED, "unknown tensor type id %u (offset %llu)", type, (unsigned long long)at);
    t->type = (int)type;
    if ((rc = rd_u64(ps, &t->offset, "data offset"))) return rc;
    int64_t nel = 1;
    for (int d = 0; d < RLX_GGUF_MAX_DIMS; d++)
        if (__builtin_mul_overflow(nel, t->ne[d], &nel))
            return perr(ps, RLX_EFORMAT, "shape [%lld, %lld, %lld, %lld] has more elements than fit in int64",
                        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    if (t->ne[0] % di->block_elems)
        return perr(ps, RLX_EFORMAT, "row of %lld elements is not a multiple of the %s block size (%d)",
                    (long long)t->ne[0], di->name, di->block_elems);
    uint64_t size = (uint64_t)(t->ne[0] / di->block_elems);
    for (int d = 0; d < RLX_GGUF_MAX_DIMS; d++)
        if (__builtin_mul_overflow(size, d ? (uint64_t)t->ne[d] : (uint64_t)di->block_bytes, &size))
            return perr(ps, RLX_EFORMAT, "byte size of shape [%lld, %lld, %lld, %lld] (%s) overflows 64 bits",
                        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], di->name);
    t->size = size;
    return 0;
}

static int parse_tensors(parser *ps)
{
    rlx_gguf *g = ps->g;
    int rc = 0;
    g->tensors = palloc(ps, (size_t)g->n_tensors * sizeof *g->tensors, &rc);
    if (!g->tensors) return rc;
    ps->ctx = CTX_TENSOR;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ps->index = i;
        ps->ident = NULL;
        memset(&g->tensors[i], 0, sizeof g->tensors[i]);
        if ((rc = parse_tensor_info(ps, &g->tensors[i]))) return rc;
    }
    uint64_t di, dj;
    if ((rc = build_index(ps, g->n_tensors, tensor_name, &g->tensor_index, &g->tensor_mask, &di, &dj)) < 0) return rc;
    if (rc) {
        ps->index = di;
        ps->ident = g->tensors[di].name;
        return perr(ps, RLX_EFORMAT, "duplicate tensor name (also tensor #%llu)", (unsigned long long)dj);
    }
    /* the data section starts at the next multiple of the alignment after the tensor infos */
    uint64_t a = g->alignment, start = ps->pos + (a - ps->pos % a) % a;
    g->data_offset = start;
    if (ps->prefix) { /* where the data ends; its bytes have not come yet (no tensors: the infos) */
        ps->extent = g->n_tensors ? start : ps->pos;
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const rlx_gguf_tensor *t = &g->tensors[i];
            if (t->offset > UINT64_MAX - start || t->size > UINT64_MAX - start - t->offset)
                return perr(ps, RLX_EFORMAT, "data offset past 2^64");
            ps->extent = RLX_MAX(ps->extent, start + t->offset + t->size);
        }
        return 0;
    }
    if (g->n_tensors && start > ps->size) {
        ps->ctx = CTX_HEADER;
        return perr(ps, RLX_EFORMAT, "file truncated: the tensor data section would start at offset %llu "
                    "(tensor infos end at %llu, alignment %llu) but the file is %llu bytes",
                    (unsigned long long)start, (unsigned long long)ps->pos, (unsigned long long)a,
                    (unsigned long long)ps->size);
    }
    uint64_t room = start <= ps->size ? ps->size - start : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        rlx_gguf_tensor *t = &g->tensors[i];
        ps->index = i;
        ps->ident = t->name;
        if (t->offset % a)
            return perr(ps, RLX_EFORMAT, "data offset %llu is not a multiple of the alignment %llu",
                        (unsigned long long)t->offset, (unsigned long long)a);
        if (t->offset > room || t->size > room - t->offset)
            return perr(ps, RLX_EFORMAT, "data (%llu bytes at data offset %llu, file offset %llu) runs past the end "
                        "of the file (%llu bytes)", (unsigned long long)t->size, (unsigned long long)t->offset,
                        (unsigned long long)(start + t->offset), (unsigned long long)ps->size);
        t->data = ps->p + start + t->offset;
    }
    return 0;
}

static int parse_ps(parser *ps)
{
    int rc;
    if ((rc = parse_header(ps))) return rc;
    if ((rc = parse_kvs(ps))) return rc;
    if ((rc = parse_alignment(ps))) return rc;
    return parse_tensors(ps);
}

static int parse(rlx_gguf *g, rlx_error *err)
{
    parser ps = {.g = g, .p = g->base, .size = g->size, .err = err, .ctx = CTX_HEADER};
    return parse_ps(&ps);
}

static rlx_gguf *handle_new(const char *name, rlx_error *err)
{
    rlx_gguf *g = calloc(1, sizeof *g);
    if (g) g->name = strdup(name ? name : "(memory)");
    if (g) g->map = (rlx_filemap){.fd = -1, .slot = -1};
    if (!g || !g->name) {
        free(g);
        rlx_errorf(err, RLX_ENOMEM, "%s: out of memory opening the GGUF file", name ? name : "(memory)");
        return NULL;
    }
    return g;
}

int rlx_gguf_open_memory(rlx_gguf **out, const void *data, size_t size, const char *name, rlx_error *err)
{
    *out = NULL;
    if (!data && size) return rlx_errorf(err, RLX_EINVAL, "%s: no data given", name ? name : "(memory)");
    rlx_gguf *g = handle_new(name, err);
    if (!g) return RLX_ENOMEM;
    static const uint8_t empty[1];
    g->base = data ? data : empty;
    g->size = size;
    int rc = parse(g, err);
    if (rc) {
        rlx_gguf_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

int rlx_gguf_extent(const void *data, size_t size, uint64_t *extent, uint64_t *alignment, rlx_error *err)
{
    *extent = *alignment = 0;
    rlx_gguf *g = handle_new("(prefix)", err);
    if (!g) return RLX_ENOMEM;
    parser ps = {.g = g, .p = data, .size = data ? size : 0, .err = err, .ctx = CTX_HEADER, .prefix = true};
    int rc = parse_ps(&ps);
    if (!rc) {
        *extent = ps.extent;
        *alignment = g->alignment;
    }
    rlx_gguf_close(g);
    return rc;
}

int rlx_gguf_open(rlx_gguf **out, const char *path, rlx_error *err)
{
    *out = NULL;
    if (!path) return rlx_errorf(err, RLX_EINVAL, "rlx_gguf_open: no path given");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rlx_errorf(err, errno == ENOENT ? RLX_ENOTFOUND : RLX_EIO, "%s: cannot open: %s", path, strerror(errno));
    rlx_gguf *g = handle_new(path, err);
    if (!g) {
        close(fd);
        return RLX_ENOMEM;
    }
    int rc = rlx__filemap_open(&g->map, fd, path, err);
    if (rc) {
        rlx_gguf_close(g);
        return rc;
    }
    static const uint8_t empty[1];
    g->base = g->map.base ? g->map.base : empty;
    g->size = (uint64_t)g->map.size;
    if ((rc = parse(g, err))) {
        rlx_gguf_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

void rlx_gguf_close(rlx_gguf *g)
{
    if (!g) return;
    if (g->release) g->release(g->release_ctx);
    rlx__filemap_close(&g->map);
    for (uint32_t i = 0; i < g->n_parts; i++) rlx_gguf_close(g->parts[i]);
    free(g->parts);
    arena_free(g->arena);
    free(g->name);
    free(g);
}

/* Appends the tensors of parts[0..n) to g's table and takes ownership of the parts (and of the
 * parts array, malloc'ed by the caller) on success; on failure nothing changes and the caller
 * still owns them. A tensor name found in two parts is an error naming both files. */
int rlx__gguf_adopt_parts(rlx_gguf *g, rlx_gguf **parts, uint32_t n, rlx_error *err)
{
    if (g->n_parts) return rlx_errorf(err, RLX_EINVAL, "%s: already holds split parts", g->name);
    uint64_t total = g->n_tensors;
    for (uint32_t i = 0; i < n; i++) total += parts[i]->n_tensors;
    if (total > UINT32_MAX - 1) return rlx_errorf(err, RLX_EFORMAT, "%s: too many tensors across the split parts", g->name);
    parser ps = {.g = g, .err = err};
    int rc = 0;
    rlx_gguf_tensor *ts = palloc(&ps, (size_t)total * sizeof *ts, &rc);
    if (!ts) return rc;
    rlx_gguf_tensor *old = g->tensors;
    uint32_t *old_index = g->tensor_index;
    uint64_t old_n = g->n_tensors, old_mask = g->tensor_mask, k = 0;
    if (old_n) memcpy(ts, old, (size_t)old_n * sizeof *ts);
    k = old_n;
    for (uint32_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < parts[i]->n_tensors; j++) ts[k++] = parts[i]->tensors[j];
    g->tensors = ts;
    g->n_tensors = total;
    uint64_t di, dj;
    rc = build_index(&ps, total, tensor_name, &g->tensor_index, &g->tensor_mask, &di, &dj);
    if (rc) {
        if (rc > 0) {
            const char *fi = g->name, *fj = g->name;
            uint64_t at = old_n;
            for (uint32_t i = 0; i < n; i++) {
                if (di >= at && di < at + parts[i]->n_tensors) fi = parts[i]->name;
                if (dj >= at && dj < at + parts[i]->n_tensors) fj = parts[i]->name;
                at += parts[i]->n_tensors;
            }
            rc = rlx_errorf(err, RLX_EFORMAT, "tensor '%s' is in two split parts: %s and %s", ts[di].name, fj, fi);
        }
        g->tensors = old;
        g->n_tensors = old_n;
        g->tensor_index = old_index;
        g->tensor_mask = old_mask;
        return rc;
    }
    g->parts = parts;
    g->n_parts = n;
    return 0;
}

/* For handles assembled from other files (models/safetensors.c): appends tensors whose data
 * lies outside the image (names copied, data and shapes as given; ne[] of unused dims must be 1),
 * rebuilding the name index; a name already present is an error. On failure nothing changes. */
int rlx__gguf_add_tensors(rlx_gguf *g, const rlx_gguf_tensor *add, uint64_t n, rlx_error *err)
{
    uint64_t total = g->n_tensors + n;
    if (total > UINT32_MAX - 1) return rlx_errorf(err, RLX_EFORMAT, "%s: too many tensors", g->name);
    parser ps = {.g = g, .err = err};
    int rc = 0;
    rlx_gguf_tensor *ts = palloc(&ps, (size_t)(total ? total : 1) * sizeof *ts, &rc);
    if (!ts) return rc;
    if (g->n_tensors) memcpy(ts, g->tensors, (size_t)g->n_tensors * sizeof *ts);
    for (uint64_t i = 0; i < n; i++) {
        rlx_gguf_tensor *t = &ts[g->n_tensors + i];
        *t = add[i];
        size_t len = strlen(add[i].name);
        char *name = palloc(&ps, len + 1, &rc);
        if (!name) return rc;
        memcpy(name, add[i].name, len + 1);
        t->name = name;
    }
    rlx_gguf_tensor *old = g->tensors;
    uint32_t *old_index = g->tensor_index;
    uint64_t old_n = g->n_tensors, old_mask = g->tensor_mask, di, dj;
    g->tensors = ts;
    g->n_tensors = total;
    rc = build_index(&ps, total, tensor_name, &g->tensor_index, &g->tensor_mask, &di, &dj);
    if (rc) {
        if (rc > 0) rc = rlx_errorf(err, RLX_EFORMAT, "%s: tensor '%s' appears twice", g->name, ts[di].name);
        g->tensors = old;
        g->n_tensors = old_n;
        g->tensor_index = old_index;
        g->tensor_mask = old_mask;
    }
    return rc;
}

/* ---- accessors ---- */

const char *rlx_gguf_type_name(rlx_gguf_type t)
{
    return (unsigned)t < RLX_ARRAY_LEN(type_names) ? type_names[t] : "unknown";
}

const rlx_gguf_value *rlx_gguf_find(const rlx_gguf *g, const char *key)
{
    uint64_t i = lookup(g->kv_index, g->kv_mask, g, kv_name, key);
    return i == UINT64_MAX ? NULL : &g->kvs[i].value;
}

const rlx_gguf_tensor *rlx_gguf_find_tensor(const rlx_gguf *g, const char *name)
{
    uint64_t i = lookup(g->tensor_index, g->tensor_mask, g, tensor_name, name);
    return i == UINT64_MAX ? NULL : &g->tensors[i];
}
