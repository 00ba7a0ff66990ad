/* cmd_inspect.c - `rlxd inspect FILE [--json]` (a folder: cmd_inspect_dir.c): a GGUF file's format, metadata, tensors,
 * parameter count and an estimate of the memory it needs to serve (weights + an F16 KV cache
 * at the model's context length; an encoder (bert, nomic-bert) is described instead: pooling,
 * bidirectional attention, no KV cache). Long arrays are summarized; strings are shown as valid
 * UTF-8 (invalid bytes and NULs become U+FFFD) so the JSON output always parses. */
#include "server/cli.h"
#include "models/gguf.h"
#include "models/model.h"
#include "models/safetensors.h"
#include "backends/dtype.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHOW_ELEMS 8       /* arrays up to this long are shown whole */
#define SUMMARY_ELEMS 4    /* longer ones show this many, then "..." */
#define SHOW_STR 64        /* strings longer than this are cut in text output */

/* ---- a growable string ---- */

typedef struct sbuf { char *p; size_t n, cap; } sbuf;

__attribute__((format(printf, 2, 3)))
static void sb_printf(sbuf *s, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = s->cap - s->n;
        va_start(ap, fmt);
        int k = vsnprintf(s->p ? s->p + s->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if ((size_t)k < room) { s->n += (size_t)k; return; }
        size_t cap = (s->cap + (size_t)k + 64) * 2;
        char *np = realloc(s->p, cap);
        if (!np) return;
        s->p = np;
        s->cap = cap;
    }
}

static void sb_putc(sbuf *s, char c) { sb_printf(s, "%c", c); }

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80) return c ? 1 : 0;
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
        (c == 0xf4 && p[1] > 0x8f))
        return 0;
    return len;
}

/* Appends s as valid UTF-8; in text mode quoted with C-style escapes and cut at `limit`. */
static void sb_str(sbuf *out, const char *s, uint64_t len, bool text, size_t limit)
{
    const unsigned char *p = (const unsigned char *)s;
    if (text) sb_putc(out, '"');
    size_t shown = 0;
    for (uint64_t i = 0; i < len;) {
        if (text && shown >= limit) {
            sb_printf(out, "...\" (%" PRIu64 " bytes)", len);
            return;
        }
        size_t k = utf8_len(p + i, (size_t)(len - i));
        if (text && p[i] < 0x20) {
            const char *e = p[i] == '\n' ? "\\n" : p[i] == '\t' ? "\\t" : p[i] == '\r' ? "\\r" : NULL;
            if (e) sb_printf(out, "%s", e);
            else sb_printf(out, "\\x%02x", p[i]);
            i++;
        } else if (text && (p[i] == '"' || p[i] == '\\')) {
            sb_printf(out, "\\%c", p[i]);
            i++;
        } else if (k) {
            sb_printf(out, "%.*s", (int)k, s + i);
            i += k;
        } else {
            sb_printf(out, "\xef\xbf\xbd"); /* U+FFFD */
            i++;
        }
        shown++;
    }
    if (text) sb_putc(out, '"');
}

static char *clean_str(const char *s, uint64_t len)
{
    sbuf b = {0};
    sb_printf(&b, "%s", "");
    sb_str(&b, s, len, false, 0);
    return b.p;
}

/* ---- values ---- */

static const int elem_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Element i of a scalar array, as a value. */
static rlx_gguf_value elem(const rlx_gguf_array *a, uint64_t i)
{
    rlx_gguf_value v = {.type = a->type};
    const uint8_t *p = (const uint8_t *)a->data + i * (uint64_t)elem_size[a->type];
    switch (a->type) {
    case RLX_GGUF_UINT8: v.u64 = p[0]; break;
    case RLX_GGUF_INT8: v.i64 = (int8_t)p[0]; break;
    case RLX_GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); v.u64 = x; break; }
    case RLX_GGUF_INT16: { int16_t x; memcpy(&x, p, 2); v.i64 = x; break; }
    case RLX_GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); v.u64 = x; break; }
    case RLX_GGUF_INT32: { int32_t x; memcpy(&x, p, 4); v.i64 = x; break; }
    case RLX_GGUF_UINT64: memcpy(&v.u64, p, 8); break;
    case RLX_GGUF_INT64: memcpy(&v.i64, p, 8); break;
    case RLX_GGUF_FLOAT32: { float x; memcpy(&x, p, 4); v.f64 = x; break; }
    case RLX_GGUF_FLOAT64: memcpy(&v.f64, p, 8); break;
    case RLX_GGUF_BOOL: v.b = p[0] != 0; break;
    default: break;
    }
    return v;
}

static rlx_gguf_value arr_elem(const rlx_gguf_array *a, uint64_t i)
{
    if (a->type == RLX_GGUF_STRING) return (rlx_gguf_value){.type = RLX_GGUF_STRING, .str = a->strs[i]};
    if (a->type == RLX_GGUF_ARRAY) return (rlx_gguf_value){.type = RLX_GGUF_ARRAY, .arr = a->arrs[i]};
    return elem(a, i);
}

static bool is_signed(rlx_gguf_type t)
{
    return t == RLX_GGUF_INT8 || t == RLX_GGUF_INT16 || t == RLX_GGUF_INT32 || t == RLX_GGUF_INT64;
}

/* The shortest decimal form that reads back as the same float32/float64. */
static const char *shortest(char *num, size_t cap, const rlx_gguf_value *v)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(num, cap, "%.*g", prec, v->f64);
        double back = strtod(num, NULL);
        if (v->type == RLX_GGUF_FLOAT32 ? (float)back == (float)v->f64 : back == v->f64) break;
    }
    return num;
}

static void text_value(sbuf *out, const rlx_gguf_value *v)
{
    switch (v->type) {
    case RLX_GGUF_STRING: sb_str(out, v->str.ptr, v->str.len, true, SHOW_STR); break;
    case RLX_GGUF_BOOL: sb_printf(out, "%s", v->b ? "true" : "false"); break;
    case RLX_GGUF_FLOAT32: case RLX_GGUF_FLOAT64: {
        char num[40];
        sb_printf(out, "%s", shortest(num, sizeof num, v));
        break;
    }
    case RLX_GGUF_ARRAY: {
        const rlx_gguf_array *a = &v->arr;
        uint64_t show = a->n <= SHOW_ELEMS ? a->n : SUMMARY_ELEMS;
        sb_putc(out, '[');
        if (a->n > SHOW_ELEMS) sb_printf(out, "%s x %" PRIu64 ": ", rlx_gguf_type_name(a->type), a->n);
        for (uint64_t i = 0; i < show; i++) {
            rlx_gguf_value e = arr_elem(a, i);
            if (i) sb_printf(out, ", ");
            text_value(out, &e);
        }
        if (show < a->n) sb_printf(out, ", ...");
        sb_putc(out, ']');
        break;
    }
    default:
        if (is_signed(v->type)) sb_printf(out, "%" PRId64, v->i64);
        else sb_printf(out, "%" PRIu64, v->u64);
    }
}

static cJSON *json_value(const rlx_gguf_value *v)
{
    char num[40];
    switch (v->type) {
    case RLX_GGUF_STRING: {
        char *s = clean_str(v->str.ptr, v->str.len);
        cJSON *j = cJSON_CreateString(s ? s : "");
        free(s);
        return j;
    }
    case RLX_GGUF_BOOL: return cJSON_CreateBool(v->b);
    case RLX_GGUF_FLOAT32: case RLX_GGUF_FLOAT64: /* JSON has no NaN or infinity */
        return isfinite(v->f64) ? cJSON_CreateRaw(shortest(num, sizeof num, v)) : cJSON_CreateNull();
    case RLX_GGUF_ARRAY: {
        const rlx_gguf_array *a = &v->arr;
        uint64_t show = a->n <= SHOW_ELEMS ? a->n : SHOW_ELEMS;
        cJSON *items = cJSON_CreateArray();
        for (uint64_t i = 0; i < show; i++) {
            rlx_gguf_value e = arr_elem(a, i);
            cJSON_AddItemToArray(items, json_value(&e));
        }
        if (a->n <= SHOW_ELEMS) return items;
        cJSON *o = cJSON_CreateObject(); /* long arrays: type, count and the first few */
        cJSON_AddStringToObject(o, "type", rlx_gguf_type_name(a->type));
        snprintf(num, sizeof num, "%" PRIu64, a->n);
        cJSON_AddRawToObject(o, "count", num);
        cJSON_AddItemToObject(o, "head", items);
        return o;
    }
    default: /* integers as exact digits: doubles would round 64-bit values */
        if (is_signed(v->type)) snprintf(num, sizeof num, "%" PRId64, v->i64);
        else snprintf(num, sizeof num, "%" PRIu64, v->u64);
        return cJSON_CreateRaw(num);
    }
}

/* ---- totals and the memory estimate ---- */

typedef struct summary {
    uint64_t params, weight_bytes;
    bool have_kv;
    uint64_t kv_bytes, n_ctx, n_layer, n_head_kv, k_dim, v_dim;
    char why_no_kv[256];
    /* encoders: what rlx_model_load made of the file, or why it refused it */
    bool encoder;
    char arch_name[128];
    char pooling[16];
    int32_t n_token_types;
    bool rank_head;
    bool embedding;            /* a decoder family declaring a pooling type: served for embeddings */
    bool causal;
    char model_error[512];
} summary;

/* Loads the model when its family is an encoder (or the file names a pooling type) to describe
 * it as rlxd serves it. */
static void describe_encoder(const rlx_gguf *g, const char *arch, summary *s)
{
    char key[160];
    snprintf(key, sizeof key, "%s.pooling_type", arch);
    const rlx_arch *a = rlx_arch_find(arch);
    if (!rlx_gguf_find(g, key) && !(a && (!strcmp(arch, "bert") || !strcmp(arch, "nomic-bert")))) return;
    rlx_model *m = NULL;
    rlx_error err = {0};
    if (rlx_model_load(&m, rlx_gguf_path(g), &err)) {
        snprintf(s->model_error, sizeof s->model_error, "%s", err.msg);
        return;
    }
    if (m->cfg.encoder) {
        s->encoder = true;
        snprintf(s->pooling, sizeof s->pooling, "%s", rlx_model_pooling_name(m->cfg.pooling_type));
        s->n_token_types = m->cfg.n_token_types;
        s->rank_head = m->cfg.rank_head;
        s->have_kv = false;
        s->kv_bytes = 0;
        snprintf(s->why_no_kv, sizeof s->why_no_kv, "an encoder keeps no KV cache");
    } else if (m->cfg.pooling_type >= 0) {
        s->embedding = true;
        s->causal = m->cfg.causal;
        snprintf(s->pooling, sizeof s->pooling, "%s", rlx_model_pooling_name(m->cfg.pooling_type));
    }
    rlx_model_free(m);
}

static int get_u64(const rlx_gguf *g, const char *arch, const char *suffix, uint64_t *out)
{
    char key[256];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (rlx_gguf_get_i64(g, key, &v, NULL) || v <= 0) return -1;
    *out = (uint64_t)v;
    return 0;
}

static void summarize(const rlx_gguf *g, summary *s)
{
    memset(s, 0, sizeof *s);
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        s->params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        s->weight_bytes += t->size;
    }
    rlx_gguf_str a;
    char arch[128];
    if (rlx_gguf_get_str(g, "general.architecture", &a, NULL) || a.len == 0 || a.len >= sizeof arch ||
        memchr(a.ptr, 0, a.len)) {
        snprintf(s->why_no_kv, sizeof s->why_no_kv, "no general.architecture");
        return;
    }
    memcpy(arch, a.ptr, a.len);
    arch[a.len] = 0;
    snprintf(s->arch_name, sizeof s->arch_name, "%s", arch);
    uint64_t n_embd, n_head;
    if (get_u64(g, arch, "block_count", &s->n_layer) || get_u64(g, arch, "context_length", &s->n_ctx) ||
        get_u64(g, arch, "embedding_length", &n_embd) || get_u64(g, arch, "attention.head_count", &n_head)) {
        snprintf(s->why_no_kv, sizeof s->why_no_kv, "%s.block_count, context_length, embedding_length or "
                 "attention.head_count missing or not a positive integer", arch);
        return;
    }
    if (get_u64(g, arch, "attention.head_count_kv", &s->n_head_kv)) s->n_head_kv = n_head;
    if (get_u64(g, arch, "attention.key_length", &s->k_dim)) s->k_dim = n_embd / n_head;
    if (get_u64(g, arch, "attention.value_length", &s->v_dim)) s->v_dim = s->k_dim;
    /* K and V, F16 (2 bytes), every layer, every position */
    long double kv = (long double)s->n_layer * s->n_ctx * s->n_head_kv * (s->k_dim + s->v_dim) * 2;
    if (kv > 1e19L) {
        snprintf(s->why_no_kv, sizeof s->why_no_kv, "the KV cache size overflows");
        return;
    }
    s->kv_bytes = (uint64_t)kv;
    s->have_kv = true;
    describe_encoder(g, arch, s);
}

static const char *human(char *buf, size_t cap, double v, bool bytes)
{
    static const char *const bu[] = {"B", "KiB", "MiB", "GiB", "TiB"}, *const cu[] = {"", "K", "M", "B", "T"};
    int u = 0;
    double div = bytes ? 1024 : 1000;
    while (v >= div && u < 4) v /= div, u++;
    if (u == 0) snprintf(buf, cap, bytes ? "%.0f B" : "%.0f", v);
    else snprintf(buf, cap, "%.2f %s", v, bytes ? bu[u] : cu[u]);
    return buf;
}

static void shape_str(char *buf, size_t cap, const rlx_gguf_tensor *t)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static const char *dtype_name(int type)
{
    const rlx_dtype_info *d = rlx_dtype_get(type);
    return d ? d->name : "?";
}

static void print_text(const rlx_gguf *g, const summary *s)
{
    char h1[32], h2[32], h3[32];
    printf("file: %s\n", rlx_gguf_path(g));
    if (rlx_st_is_folder(rlx_gguf_path(g))) {
        printf("format: Hugging Face folder (config.json, tokenizer.json, safetensors), shown as the GGUF keys and "
               "tensor names rlxd reads it as\n");
    } else {
        printf("format: GGUF v%u, alignment %" PRIu64 ", %" PRIu64 " bytes (%s)", rlx_gguf_version(g),
               rlx_gguf_alignment(g), rlx_gguf_file_size(g), human(h1, sizeof h1, (double)rlx_gguf_file_size(g), true));
        if (rlx_gguf_n_tensors(g)) printf(", tensor data at offset %" PRIu64, rlx_gguf_data_offset(g));
        printf("\n");
    }
    printf("\nmetadata (%" PRIu64 " keys):\n", rlx_gguf_n_kv(g));
    sbuf line = {0};
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        line.n = 0;
        sb_printf(&line, "  ");
        sb_str(&line, kv->key, strlen(kv->key), false, 0);
        sb_printf(&line, "%*s %-8s = ", (int)(strlen(kv->key) < 40 ? 40 - strlen(kv->key) : 0), "",
                  rlx_gguf_type_name(kv->value.type));
        text_value(&line, &kv->value);
        if (line.p) printf("%s\n", line.p);
    }
    free(line.p);
    int w = 4;
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++)
        w = RLX_MAX(w, (int)RLX_MIN(strlen(rlx_gguf_tensor_at(g, i)->name), 60));
    printf("\ntensors (%" PRIu64 "):\n", rlx_gguf_n_tensors(g));
    if (rlx_gguf_n_tensors(g)) printf("  %-*s  %-5s  %-24s %12s\n", w, "name", "type", "shape", "bytes");
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        char shape[128];
        shape_str(shape, sizeof shape, t);
        printf("  %-*s  %-5s  %-24s %12" PRIu64 "\n", w, t->name, dtype_name(t->type), shape, t->size);
    }
    printf("\nparameters: %" PRIu64 " (%s)\n", s->params, human(h1, sizeof h1, (double)s->params, false));
    printf("weight bytes: %" PRIu64 " (%s)\n", s->weight_bytes, human(h1, sizeof h1, (double)s->weight_bytes, true));
    if (s->encoder)
        printf("model: encoder (%s), bidirectional attention, no KV cache, pooling %s, %d token types%s\n",
               s->arch_name, s->pooling, s->n_token_types, s->rank_head ? ", cls rank head" : "");
    else if (s->embedding)
        printf("model: embedding model (a %s decoder declaring a pooling type), %s attention, pooling %s; each input's "
               "KV lives for its step only\n", s->arch_name, s->causal ? "causal" : "bidirectional", s->pooling);
    else if (s->model_error[0])
        printf("model: rlxd cannot load it: %s\n", s->model_error);
    if (s->encoder)
        printf("memory estimate: %s weights (an encoder keeps no KV cache)\n", human(h1, sizeof h1, (double)s->weight_bytes, true));
    else if (s->have_kv)
        printf("memory estimate: %s weights + %s F16 KV cache (%" PRIu64 " layers x %" PRIu64 " tokens x %" PRIu64
               " KV heads x (%" PRIu64 " + %" PRIu64 ") dims) = %s\n",
               human(h1, sizeof h1, (double)s->weight_bytes, true), human(h2, sizeof h2, (double)s->kv_bytes, true),
               s->n_layer, s->n_ctx, s->n_head_kv, s->k_dim, s->v_dim,
               human(h3, sizeof h3, (double)(s->weight_bytes + s->kv_bytes), true));
    else
        printf("memory estimate: %s weights (no KV cache estimate: %s)\n",
               human(h1, sizeof h1, (double)s->weight_bytes, true), s->why_no_kv);
}

static void add_u64(cJSON *o, const char *name, uint64_t v)
{
    char num[32];
    snprintf(num, sizeof num, "%" PRIu64, v);
    cJSON_AddRawToObject(o, name, num);
}

static int print_json(const rlx_gguf *g, const summary *s)
{
    cJSON *root = cJSON_CreateObject();
    char *path = clean_str(rlx_gguf_path(g), strlen(rlx_gguf_path(g)));
    cJSON_AddStringToObject(root, "file", path ? path : "");
    free(path);
    add_u64(root, "version", rlx_gguf_version(g));
    add_u64(root, "alignment", rlx_gguf_alignment(g));
    add_u64(root, "file_size", rlx_gguf_file_size(g));
    add_u64(root, "data_offset", rlx_gguf_data_offset(g));
    cJSON *md = cJSON_AddObjectToObject(root, "metadata");
    cJSON *types = cJSON_AddObjectToObject(root, "metadata_types");
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        char *key = clean_str(kv->key, strlen(kv->key));
        cJSON_AddItemToObject(md, key ? key : "", json_value(&kv->value));
        cJSON_AddStringToObject(types, key ? key : "", rlx_gguf_type_name(kv->value.type));
        free(key);
    }
    cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        cJSON *o = cJSON_CreateObject();
        char *name = clean_str(t->name, strlen(t->name));
        cJSON_AddStringToObject(o, "name", name ? name : "");
        free(name);
        cJSON_AddStringToObject(o, "type", dtype_name(t->type));
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (uint32_t d = 0; d < t->n_dims; d++) {
            char num[32];
            snprintf(num, sizeof num, "%" PRId64, t->ne[d]);
            cJSON_AddItemToArray(shape, cJSON_CreateRaw(num));
        }
        add_u64(o, "offset", t->offset);
        add_u64(o, "bytes", t->size);
        cJSON_AddItemToArray(ts, o);
    }
    add_u64(root, "parameters", s->params);
    add_u64(root, "weight_bytes", s->weight_bytes);
    cJSON *mem = cJSON_AddObjectToObject(root, "memory");
    add_u64(mem, "weights", s->weight_bytes);
    if (s->have_kv) {
        add_u64(mem, "kv_cache", s->kv_bytes);
        add_u64(mem, "context_length", s->n_ctx);
        add_u64(mem, "n_layer", s->n_layer);
        add_u64(mem, "n_head_kv", s->n_head_kv);
        add_u64(mem, "key_length", s->k_dim);
        add_u64(mem, "value_length", s->v_dim);
    } else {
        cJSON_AddNullToObject(mem, "kv_cache");
        cJSON_AddStringToObject(mem, "kv_cache_unknown_because", s->why_no_kv);
    }
    add_u64(mem, "total", s->weight_bytes + s->kv_bytes);
    if (s->encoder) {
        cJSON *mo = cJSON_AddObjectToObject(root, "model");
        cJSON_AddStringToObject(mo, "kind", "encoder");
        cJSON_AddStringToObject(mo, "attention", "bidirectional");
        cJSON_AddBoolToObject(mo, "kv_cache", false);
        cJSON_AddStringToObject(mo, "pooling", s->pooling);
        cJSON_AddNumberToObject(mo, "token_types", s->n_token_types);
        cJSON_AddBoolToObject(mo, "rank_head", s->rank_head);
    } else if (s->embedding) {
        cJSON *mo = cJSON_AddObjectToObject(root, "model");
        cJSON_AddStringToObject(mo, "kind", "embedding");
        cJSON_AddStringToObject(mo, "attention", s->causal ? "causal" : "bidirectional");
        cJSON_AddStringToObject(mo, "pooling", s->pooling);
    } else if (s->model_error[0]) {
        char *e = clean_str(s->model_error, strlen(s->model_error));
        cJSON_AddStringToObject(root, "model_error", e ? e : "");
        free(e);
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) {
        fprintf(stderr, "rlxd inspect: out of memory rendering JSON\n");
        return 1;
    }
    printf("%s\n", txt);
    free(txt);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rlxd inspect FILE|HF_FOLDER [--json]\n"
               "       rlxd inspect DIR [--prefer QUANT] [--json]\n\n"
               "Shows a GGUF file's format version, alignment, metadata (long arrays summarized), tensors\n"
               "(name, type, shape, bytes), parameter count, weight bytes and an estimate of the memory\n"
               "needed to serve it (weights + an F16 KV cache at the model's context length). A Hugging Face\n"
               "folder (config.json, tokenizer.json, safetensors) is shown as the GGUF keys and tensors rlxd\n"
               "reads it as.\n"
               "  --json   print one JSON object with the same information\n\n"
               "With a folder: its models (its .gguf files and those of its direct subfolders, split parts as\n"
               "one, files differing only in a -QUANT name tag as one model), each file's quantization, size\n"
               "and `rlxd check` verdict, and the file rlxd would pick per model (marked *): the --prefer\n"
               "quantization (e.g. Q4_K_M) when present and supported, else the first supported of\n"
               "Q4_K_M > Q5_K_M > Q8_0 > Q6_K > Q4_K_S > Q5_K_S > Q4_0 > F16 > BF16 > F32, else any supported.\n");
}

int rlx_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL, *prefer = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--prefer")) {
            if (!(prefer = rlx_arg_value("inspect", argc, argv, &i))) return 2;
            if (!rlx__quant_known(prefer, &prefer)) {
                fprintf(stderr, "rlxd inspect: --prefer '%s' is not a llama.cpp quantization name (e.g. Q4_K_M, Q8_0, F16)\n", prefer);
                return 2;
            }
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "rlxd inspect: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "rlxd inspect: one file at a time ('%s' and '%s' given)\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    struct stat st;
    if (!rlx__cli_model_path_ok("inspect", path)) return 1;
    bool hf = rlx_st_is_folder(path);
    if (!hf && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return rlx__cmd_inspect_dir(path, prefer, json);
    if (prefer) {
        fprintf(stderr, "rlxd inspect: --prefer applies to a folder, and %s is a file\n", path);
        return 2;
    }
    rlx_gguf *g;
    rlx_error err = {0};
    if (hf ? rlx_st_open(&g, path, &err) : rlx_gguf_open(&g, path, &err)) {
        fprintf(stderr, "rlxd inspect: %s\n", err.msg);
        if (json) { /* a script reading stdout gets the reason too, as from `rlxd check --json` */
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "path", path);
            cJSON_AddStringToObject(o, "error", err.msg);
            char *t = cJSON_PrintUnformatted(o);
            if (t) puts(t);
            free(t);
            cJSON_Delete(o);
        }
        return 1;
    }
    summary s;
    summarize(g, &s);
    int rc = 0;
    if (json) rc = print_json(g, &s);
    else print_text(g, &s);
    rlx_gguf_close(g);
    if (fflush(stdout)) {
        fprintf(stderr, "rlxd inspect: cannot write the output\n");
        rc = 1;
    }
    return rc;
}
