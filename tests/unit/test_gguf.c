/* test_gguf.c - GGUF reader and writer: the shared reference files, writer round trips of every
 * value type and several tensor types, a byte-exact layout check against the spec, typed
 * getters, and one test per kind of malformed file (each must name the offending field). */
#include "tests/rlx_test.h"
#include "tests/rlx_test_tmp.h"
#include "models/gguf.h"
#include "backends/dtype.h"
#include "server/cli.h"

#include <dirent.h>
#include <unistd.h>

/* ---- a little byte builder for hand-made (mostly broken) files ---- */

typedef struct bb { uint8_t *p; size_t n, cap; } bb;

static void put(bb *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u32(bb *b, uint32_t v) { put(b, &v, 4); }
static void u64(bb *b, uint64_t v) { put(b, &v, 8); }
static void str(bb *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void pad(bb *b, size_t a) { while (b->n % a) put(b, "", 1); }
static void header(bb *b, uint32_t version, uint64_t n_t, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_t);
    u64(b, n_kv);
}
/* One tensor info, no key/values; then padding and `data` bytes of data. */
static void tensor_file(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                        uint64_t offset, size_t data)
{
    header(b, 3, 1, 0);
    str(b, name);
    u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) u64(b, ne[i]);
    u32(b, type);
    u64(b, offset);
    pad(b, 32);
    for (size_t i = 0; i < data; i++) put(b, "\x01", 1);
}

/* NULL when opening b fails with `code` and a message naming the file and containing every
 * given fragment; otherwise why not (in a static buffer). */
static const char *check_fail(bb *b, int code, const char *f1, const char *f2)
{
    static char why[1024];
    rlx_gguf *g = NULL;
    rlx_error err = {0};
    /* an exact-size copy, so ASan catches any read past the end */
    uint8_t *copy = malloc(b->n ? b->n : 1);
    memcpy(copy, b->p, b->n);
    int rc = rlx_gguf_open_memory(&g, copy, b->n, "bad.gguf", &err);
    rlx_gguf_close(g);
    free(copy);
    free(b->p);
    memset(b, 0, sizeof *b);
    if (rc != code) snprintf(why, sizeof why, "rc %d, expected %d (msg: %s)", rc, code, err.msg);
    else if (err.code != code) snprintf(why, sizeof why, "err.code %d", err.code);
    else if (strncmp(err.msg, "bad.gguf: ", 10)) snprintf(why, sizeof why, "message does not name the file: %s", err.msg);
    else if (f1 && !strstr(err.msg, f1)) snprintf(why, sizeof why, "message lacks '%s': %s", f1, err.msg);
    else if (f2 && !strstr(err.msg, f2)) snprintf(why, sizeof why, "message lacks '%s': %s", f2, err.msg);
    else return NULL;
    return why;
}
#define EXPECT_FAIL(b, code, f1, f2) do { const char *w_ = check_fail(&(b), code, f1, f2); \
    ASSERT_MSG(!w_, "%s", w_); } while (0)

static bool str_is(rlx_gguf_str s, const char *c) { return s.len == strlen(c) && !memcmp(s.ptr, c, s.len); }


/* ---- the shared reference files ---- */

/* Touches every byte a caller may read, so ASan would notice a bad pointer. */
static uint64_t walk_arr(const rlx_gguf_array *a)
{
    static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    uint64_t h = a->n;
    for (uint64_t i = 0; i < a->n; i++) {
        if (a->type == RLX_GGUF_STRING) for (uint64_t j = 0; j < a->strs[i].len; j++) h += (uint8_t)a->strs[i].ptr[j];
        else if (a->type == RLX_GGUF_ARRAY) h += walk_arr(&a->arrs[i]);
        else for (int j = 0; j < sz[a->type]; j++) h += ((const uint8_t *)a->data)[i * sz[a->type] + j];
    }
    return h;
}

TEST(shared_files_open)
{
    const char *dirs[] = {"models", "vocab"};
    int opened = 0;
    for (int d = 0; d < 2; d++) {
        const char *root = rlx_test_shared(dirs[d]);
        char dpath[1024];
        const char *base = getenv("RLX_SHARED") ? getenv("RLX_SHARED") : "../shared";
        snprintf(dpath, sizeof dpath, "%s/%s", base, dirs[d]);
        (void)root;
        DIR *dir = opendir(dpath);
        if (!dir) continue;
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t l = strlen(e->d_name);
            if (l < 5 || strcmp(e->d_name + l - 5, ".gguf")) continue;
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", dpath, e->d_name);
            rlx_gguf *g = NULL;
            rlx_error err = {0};
            double t0 = rlx_now();
            int rc = rlx_gguf_open(&g, path, &err);
            double dt = rlx_now() - t0;
            if (rc) closedir(dir);
            ASSERT_MSG(rc == 0, "%s: %s", path, err.msg);
            ASSERT(rlx_gguf_version(g) == 3 || rlx_gguf_version(g) == 2);
            ASSERT(rlx_gguf_n_kv(g) > 0);
            ASSERT(rlx_gguf_find(g, "general.architecture"));
            ASSERT_EQ(rlx_gguf_data_offset(g) % rlx_gguf_alignment(g), 0);
            uint64_t h = 0;
            for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
                const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
                ASSERT(rlx_gguf_find(g, kv->key) == &kv->value);
                if (kv->value.type == RLX_GGUF_ARRAY) h += walk_arr(&kv->value.arr);
            }
            for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
                const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
                ASSERT(rlx_gguf_find_tensor(g, t->name) == t);
                ASSERT_EQ(t->size, rlx_row_bytes(t->type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]));
                ASSERT((const uint8_t *)t->data + t->size <= (const uint8_t *)t->data - t->offset -
                       rlx_gguf_data_offset(g) + rlx_gguf_file_size(g));
            }
            fprintf(stderr, "  %-40s v%u %4llu kv %4llu tensors  %.2f ms (%llx)\n", e->d_name, rlx_gguf_version(g),
                    (unsigned long long)rlx_gguf_n_kv(g), (unsigned long long)rlx_gguf_n_tensors(g), dt * 1e3,
                    (unsigned long long)(h & 0xffff));
            rlx_gguf_close(g);
            opened++;
        }
        closedir(dir);
    }
    if (!opened) SKIP("no GGUF files under RLX_SHARED/models or /vocab");
}

TEST(stories260k_facts)
{
    const char *path = rlx_test_shared("models/stories260K.gguf");
    if (!path) SKIP("models/stories260K.gguf is absent (set RLX_SHARED)");
    rlx_gguf *g;
    rlx_error err = {0};
    ASSERT_MSG(rlx_gguf_open(&g, path, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_gguf_version(g), 3);
    ASSERT_EQ(rlx_gguf_alignment(g), 32);
    rlx_gguf_str s;
    ASSERT_EQ(rlx_gguf_get_str(g, "general.architecture", &s, &err), 0);
    ASSERT(str_is(s, "llama"));
    uint32_t u;
    ASSERT_EQ(rlx_gguf_get_u32(g, "llama.block_count", &u, &err), 0);
    ASSERT_EQ(u, 5);
    ASSERT_EQ(rlx_gguf_get_u32(g, "llama.embedding_length", &u, &err), 0);
    ASSERT_EQ(u, 64);
    const rlx_gguf_tensor *t = rlx_gguf_find_tensor(g, "token_embd.weight");
    ASSERT(t);
    ASSERT_EQ(t->n_dims, 2);
    ASSERT_EQ(t->ne[0], 64);
    ASSERT_EQ(t->ne[1], 512);
    ASSERT_EQ(t->type, RLX_F32);
    ASSERT_EQ(t->size, 64 * 512 * 4);
    const rlx_gguf_array *a;
    ASSERT_EQ(rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &a, &err), 0);
    ASSERT_EQ(a->type, RLX_GGUF_STRING);
    ASSERT_EQ(a->n, 512);
    ASSERT(str_is(a->strs[0], "<unk>"));
    ASSERT(str_is(a->strs[1], "<s>"));
    ASSERT(!rlx_gguf_find(g, "no.such.key"));
    ASSERT(!rlx_gguf_find_tensor(g, "no.such.tensor"));
    ASSERT_EQ(rlx_gguf_get_u32(g, "no.such.key", &u, &err), RLX_ENOTFOUND);
    rlx_gguf_close(g);
}

/* A file's beginning says how long the whole file is (pull stops a body running past it): the
 * tensor infos' end, on every prefix from the data offset on; too short a prefix, or one that is
 * no GGUF, is RLX_EFORMAT. */
TEST(extent_from_prefix)
{
    const char *path = rlx_test_shared("models/stories260K.gguf");
    if (!path) SKIP("models/stories260K.gguf is absent (set RLX_SHARED)");
    rlx_gguf *g;
    rlx_error err = {0};
    ASSERT_MSG(rlx_gguf_open(&g, path, &err) == 0, "%s", err.msg);
    const uint8_t *bytes = rlx_gguf_bytes(g);
    uint64_t size = rlx_gguf_file_size(g), off = rlx_gguf_data_offset(g), end = off;
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        if (off + t->offset + t->size > end) end = off + t->offset + t->size;
    }
    uint64_t ext, align;
    for (uint64_t n = off; n <= size; n += n < off + 64 ? 1 : 4096) { /* from the data offset on */
        int rc = rlx_gguf_extent(bytes, (size_t)n, &ext, &align, &err);
        ASSERT_EQ(rc, 0);
        ASSERT_EQ(ext, end);
        ASSERT_EQ(align, 32);
    }
    ASSERT_EQ(rlx_gguf_extent(bytes, (size_t)size, &ext, &align, &err), 0);
    ASSERT(end <= size && size - end < 32); /* the whole file: at most its padding past the data */
    ASSERT_EQ(rlx_gguf_extent(bytes, 1000, &ext, &align, &err), RLX_EFORMAT); /* inside the metadata */
    ASSERT_EQ(rlx_gguf_extent(bytes, (size_t)off - 40, &ext, &align, &err), RLX_EFORMAT); /* inside the tensor infos */
    ASSERT_EQ(rlx_gguf_extent("<html>rate limited</html>", 25, &ext, &align, &err), RLX_EFORMAT);
    ASSERT_EQ(rlx_gguf_extent(NULL, 0, &ext, &align, &err), RLX_EFORMAT);
    rlx_gguf_close(g);
}

/* The 151k-token vocabulary opens (its strings are views into the mapping, not copies). The time
 * is printed for the record only: speed is measured by benchmarks, never asserted in a test, where
 * a loaded machine or valgrind would make it flaky. */
TEST(qwen_vocab_opens)
{
    const char *path = rlx_test_shared("vocab/ggml-vocab-qwen2-reconstructed.gguf");
    if (!path) SKIP("vocab/ggml-vocab-qwen2-reconstructed.gguf is absent");
    double best = 1e9;
    for (int i = 0; i < 3; i++) {
        rlx_gguf *g;
        rlx_error err = {0};
        double t0 = rlx_now();
        ASSERT_MSG(rlx_gguf_open(&g, path, &err) == 0, "%s", err.msg);
        best = RLX_MIN(best, rlx_now() - t0);
        const rlx_gguf_array *a;
        ASSERT_EQ(rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", &a, &err), 0);
        ASSERT(a->n > 150000);
        rlx_gguf_close(g);
    }
    fprintf(stderr, "  best open of the 151k-token vocabulary: %.2f ms\n", best * 1e3);
}


/* ---- writer round trips ---- */

static bool arr_eq(const rlx_gguf_array *a, const rlx_gguf_array *b)
{
    static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (a->type != b->type || a->n != b->n) return false;
    for (uint64_t i = 0; i < a->n; i++) {
        if (a->type == RLX_GGUF_STRING) {
            if (a->strs[i].len != b->strs[i].len || memcmp(a->strs[i].ptr, b->strs[i].ptr, a->strs[i].len)) return false;
        } else if (a->type == RLX_GGUF_ARRAY) {
            if (!arr_eq(&a->arrs[i], &b->arrs[i])) return false;
        }
    }
    if (a->type != RLX_GGUF_STRING && a->type != RLX_GGUF_ARRAY)
        return a->n == 0 || !memcmp(a->data, b->data, a->n * sz[a->type]);
    return true;
}

static bool value_eq(const rlx_gguf_value *a, const rlx_gguf_value *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case RLX_GGUF_STRING: return a->str.len == b->str.len && !memcmp(a->str.ptr, b->str.ptr, a->str.len);
    case RLX_GGUF_ARRAY: return arr_eq(&a->arr, &b->arr);
    case RLX_GGUF_FLOAT32: case RLX_GGUF_FLOAT64: return a->f64 == b->f64;
    case RLX_GGUF_BOOL: return a->b == b->b;
    case RLX_GGUF_INT8: case RLX_GGUF_INT16: case RLX_GGUF_INT32: case RLX_GGUF_INT64: return a->i64 == b->i64;
    default: return a->u64 == b->u64;
    }
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

typedef struct tspec { const char *name; int type; uint32_t n_dims; int64_t ne[4]; } tspec;
static const tspec tspecs[] = {
    {"f32", RLX_F32, 2, {3, 2, 1, 1}},        {"f16", RLX_F16, 1, {5, 1, 1, 1}},
    {"q8_0", RLX_Q8_0, 2, {64, 3, 1, 1}},     {"q4_k", RLX_Q4_K, 1, {256, 1, 1, 1}},
    {"bf16", RLX_BF16, 3, {5, 1, 3, 1}},      {"q6_k", RLX_Q6_K, 4, {256, 1, 2, 1}},
    {"i32", RLX_I32, 1, {7, 1, 1, 1}},
};

/* Every value type, scalar and array, including arrays of arrays of strings and a 3-deep nest. */
static void build_all_types(rlx_gguf_writer *w, rlx_gguf_kv *kvs, int *n_kvs)
{
    static const uint8_t u8s[] = {0, 1, 255};
    static const int8_t i8s[] = {-128, 0, 127};
    static const uint16_t u16s[] = {0, 65535};
    static const int16_t i16s[] = {-32768, 32767};
    static const uint32_t u32s[] = {0, 4000000000u, 7};
    static const int32_t i32s[] = {INT32_MIN, -1, INT32_MAX};
    static const float f32s[] = {1.5f, -0.0f, 3.25e-20f};
    static const uint8_t bools[] = {1, 0, 1, 1};
    static const uint64_t u64s[] = {UINT64_MAX, 1};
    static const int64_t i64s[] = {INT64_MIN, INT64_MAX};
    static const double f64s[] = {3.141592653589793, -1e300};
    static const rlx_gguf_str strs[] = {{"hello", 5}, {"", 0}, {"nul\0byte", 8}, {"\xe4\xbd\xa0\xe5\xa5\xbd", 6}};
    static rlx_gguf_array inner[3], mid[2], leaf[3];
    static const int32_t leafdata[] = {1, 2, 3, 4, 5, 6};
    inner[0] = (rlx_gguf_array){.type = RLX_GGUF_STRING, .n = 2, .strs = strs};
    inner[1] = (rlx_gguf_array){.type = RLX_GGUF_STRING, .n = 0};
    inner[2] = (rlx_gguf_array){.type = RLX_GGUF_STRING, .n = 4, .strs = strs};
    leaf[0] = (rlx_gguf_array){.type = RLX_GGUF_INT32, .n = 2, .data = leafdata};
    leaf[1] = (rlx_gguf_array){.type = RLX_GGUF_INT32, .n = 4, .data = leafdata + 2};
    leaf[2] = (rlx_gguf_array){.type = RLX_GGUF_FLOAT64, .n = 2, .data = f64s};
    mid[0] = (rlx_gguf_array){.type = RLX_GGUF_ARRAY, .n = 2, .arrs = leaf};
    mid[1] = (rlx_gguf_array){.type = RLX_GGUF_ARRAY, .n = 1, .arrs = leaf + 2};
    int n = 0;
    kvs[n++] = (rlx_gguf_kv){"t.u8", {.type = RLX_GGUF_UINT8, .u64 = 200}};
    kvs[n++] = (rlx_gguf_kv){"t.i8", {.type = RLX_GGUF_INT8, .i64 = -100}};
    kvs[n++] = (rlx_gguf_kv){"t.u16", {.type = RLX_GGUF_UINT16, .u64 = 60000}};
    kvs[n++] = (rlx_gguf_kv){"t.i16", {.type = RLX_GGUF_INT16, .i64 = -30000}};
    kvs[n++] = (rlx_gguf_kv){"t.i64", {.type = RLX_GGUF_INT64, .i64 = -(1ll << 60)}};
    kvs[n++] = (rlx_gguf_kv){"t.f64", {.type = RLX_GGUF_FLOAT64, .f64 = 3.141592653589793}};
    kvs[n++] = (rlx_gguf_kv){"t.arr_arr_str", {.type = RLX_GGUF_ARRAY, .arr = {.type = RLX_GGUF_ARRAY, .n = 3, .arrs = inner}}};
    kvs[n++] = (rlx_gguf_kv){"t.arr3", {.type = RLX_GGUF_ARRAY, .arr = {.type = RLX_GGUF_ARRAY, .n = 2, .arrs = mid}}};
    kvs[n++] = (rlx_gguf_kv){"t.empty_nest", {.type = RLX_GGUF_ARRAY, .arr = {.type = RLX_GGUF_ARRAY, .n = 0}}};
    for (int i = 0; i < n; i++) rlx_gguf_writer_copy_kv(w, &kvs[i]);
    rlx_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    rlx_gguf_writer_set_i32(w, "t.i32", -2000000000);
    rlx_gguf_writer_set_u64(w, "t.u64", 1ull << 60);
    rlx_gguf_writer_set_f32(w, "t.f32", 1.5f);
    rlx_gguf_writer_set_bool(w, "t.bool", true);
    rlx_gguf_writer_set_str(w, "t.str", "a\0b\xc3\xa9", 5);
    rlx_gguf_writer_set_str(w, "t.str_empty", "", 0);
    rlx_gguf_writer_set_arr(w, "a.u8", RLX_GGUF_UINT8, u8s, 3);
    rlx_gguf_writer_set_arr(w, "a.i8", RLX_GGUF_INT8, i8s, 3);
    rlx_gguf_writer_set_arr(w, "a.u16", RLX_GGUF_UINT16, u16s, 2);
    rlx_gguf_writer_set_arr(w, "a.i16", RLX_GGUF_INT16, i16s, 2);
    rlx_gguf_writer_set_arr(w, "a.u32", RLX_GGUF_UINT32, u32s, 3);
    rlx_gguf_writer_set_arr(w, "a.i32", RLX_GGUF_INT32, i32s, 3);
    rlx_gguf_writer_set_arr(w, "a.f32", RLX_GGUF_FLOAT32, f32s, 3);
    rlx_gguf_writer_set_arr(w, "a.bool", RLX_GGUF_BOOL, bools, 4);
    rlx_gguf_writer_set_arr(w, "a.u64", RLX_GGUF_UINT64, u64s, 2);
    rlx_gguf_writer_set_arr(w, "a.i64", RLX_GGUF_INT64, i64s, 2);
    rlx_gguf_writer_set_arr(w, "a.f64", RLX_GGUF_FLOAT64, f64s, 2);
    rlx_gguf_writer_set_arr(w, "a.empty", RLX_GGUF_FLOAT32, NULL, 0);
    rlx_gguf_writer_set_arr_str(w, "a.str", strs, 4);
    *n_kvs = n;
}

static void roundtrip(uint32_t align)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    rlx_gguf_kv kvs[16];
    int n_kvs;
    if (align != 32) ASSERT_EQ(rlx_gguf_writer_set_u32(w, "general.alignment", align), 0);
    build_all_types(w, kvs, &n_kvs);
    uint8_t *data[RLX_ARRAY_LEN(tspecs)];
    for (size_t i = 0; i < RLX_ARRAY_LEN(tspecs); i++) {
        const tspec *s = &tspecs[i];
        size_t sz = rlx_row_bytes(s->type, s->ne[0]) * (size_t)(s->ne[1] * s->ne[2] * s->ne[3]);
        data[i] = malloc(sz);
        fill(data[i], sz, (uint32_t)i);
        ASSERT_EQ(rlx_gguf_writer_add_tensor(w, s->name, s->type, s->n_dims, s->ne, data[i], sz), 0);
    }
    const char *path = rlx_test_tmp_path(align == 32 ? "rt32.gguf" : "rt64.gguf");
    rlx_error err = {0};
    ASSERT_MSG(rlx_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    rlx_gguf_writer_free(w);

    rlx_gguf *g;
    ASSERT_MSG(rlx_gguf_open(&g, path, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_gguf_version(g), 3);
    ASSERT_EQ(rlx_gguf_alignment(g), align);
    ASSERT_EQ(rlx_gguf_n_kv(g), 30); /* 29 set + general.alignment, written either way */
    uint32_t a;
    ASSERT_EQ(rlx_gguf_get_u32(g, "general.alignment", &a, &err), 0);
    ASSERT_EQ(a, align);
    for (int i = 0; i < n_kvs; i++) {
        const rlx_gguf_value *v = rlx_gguf_find(g, kvs[i].key);
        ASSERT_MSG(v && value_eq(v, &kvs[i].value), "key %s differs after the round trip", kvs[i].key);
    }
    rlx_gguf_str s;
    ASSERT_EQ(rlx_gguf_get_str(g, "t.str", &s, &err), 0);
    ASSERT(s.len == 5 && !memcmp(s.ptr, "a\0b\xc3\xa9", 5));
    ASSERT_EQ(rlx_gguf_find(g, "t.u32")->u64, 4000000000u);
    ASSERT_EQ(rlx_gguf_find(g, "t.i32")->i64, -2000000000);
    ASSERT_EQ(rlx_gguf_find(g, "t.u64")->u64, 1ull << 60);
    ASSERT(rlx_gguf_find(g, "t.f32")->f64 == 1.5);
    ASSERT(rlx_gguf_find(g, "t.bool")->b);
    const rlx_gguf_array *arr;
    ASSERT_EQ(rlx_gguf_get_arr(g, "a.i64", &arr, &err), 0);
    int64_t i64v;
    memcpy(&i64v, (const uint8_t *)arr->data + 8, 8);
    ASSERT(arr->type == RLX_GGUF_INT64 && arr->n == 2 && i64v == INT64_MAX);
    ASSERT_EQ(rlx_gguf_get_arr(g, "a.str", &arr, &err), 0);
    ASSERT(arr->n == 4 && str_is(arr->strs[0], "hello") && arr->strs[1].len == 0 && arr->strs[2].len == 8);
    ASSERT_EQ(rlx_gguf_get_arr(g, "a.bool", &arr, &err), 0);
    ASSERT(arr->n == 4 && ((const uint8_t *)arr->data)[2] == 1);
    ASSERT_EQ(rlx_gguf_get_arr(g, "t.arr3", &arr, &err), 0);
    ASSERT(arr->arrs[0].arrs[1].n == 4 && arr->arrs[1].arrs[0].type == RLX_GGUF_FLOAT64);

    ASSERT_EQ(rlx_gguf_n_tensors(g), RLX_ARRAY_LEN(tspecs));
    ASSERT_EQ(rlx_gguf_data_offset(g) % align, 0);
    uint64_t end = 0;
    for (size_t i = 0; i < RLX_ARRAY_LEN(tspecs); i++) {
        const tspec *sp = &tspecs[i];
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        ASSERT_STR_EQ(t->name, sp->name);
        ASSERT_EQ(t->type, sp->type);
        ASSERT_EQ(t->n_dims, sp->n_dims);
        for (int d = 0; d < 4; d++) ASSERT_EQ(t->ne[d], sp->ne[d]);
        ASSERT_EQ(t->offset % align, 0);
        ASSERT_EQ(t->offset, end); /* llama.cpp requires consecutive, padded offsets */
        ASSERT(!memcmp(t->data, data[i], t->size));
        end = t->offset + (t->size + align - 1) / align * align;
        free(data[i]);
    }
    ASSERT_EQ(rlx_gguf_file_size(g), rlx_gguf_data_offset(g) + end);
    rlx_gguf_close(g);
    unlink(path);
}

TEST(writer_roundtrip_align32) { roundtrip(32); }
TEST(writer_roundtrip_align64) { roundtrip(64); }

/* The exact bytes of a tiny file, laid out by hand from the GGUF spec. */
TEST(writer_byte_exact)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    float v[2] = {1.0f, 2.0f};
    int64_t ne[1] = {2};
    ASSERT_EQ(rlx_gguf_writer_set_u32(w, "a", 7), 0);
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "t", RLX_F32, 1, ne, v, 8), 0);
    const char *path = rlx_test_tmp_path("exact.gguf");
    rlx_error err = {0};
    ASSERT_MSG(rlx_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    rlx_gguf_writer_free(w);
    bb e = {0};
    header(&e, 3, 1, 2);
    str(&e, "a"), u32(&e, RLX_GGUF_UINT32), u32(&e, 7);
    str(&e, "general.alignment"), u32(&e, RLX_GGUF_UINT32), u32(&e, 32);
    str(&e, "t"), u32(&e, 1), u64(&e, 2), u32(&e, RLX_F32), u64(&e, 0);
    pad(&e, 32);
    put(&e, v, 8);
    pad(&e, 32);
    size_t n;
    char *got = rlx_read_file(path, &n);
    ASSERT(got);
    int same = n == e.n && !memcmp(got, e.p, n);
    free(got);
    free(e.p);
    unlink(path);
    ASSERT_MSG(same, "file is %zu bytes, expected %zu, or their contents differ", n, e.n);
}

/* copy_kv + add_tensor reproduce a real model exactly (every kv, every tensor byte). */
TEST(writer_copies_stories260k)
{
    const char *src = rlx_test_shared("models/stories260K.gguf");
    if (!src) SKIP("models/stories260K.gguf is absent (set RLX_SHARED)");
    rlx_gguf *g, *h;
    rlx_error err = {0};
    ASSERT_MSG(rlx_gguf_open(&g, src, &err) == 0, "%s", err.msg);
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) ASSERT_EQ(rlx_gguf_writer_copy_kv(w, rlx_gguf_kv_at(g, i)), 0);
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        ASSERT_EQ(rlx_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size), 0);
    }
    const char *path = rlx_test_tmp_path("copy.gguf");
    ASSERT_MSG(rlx_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    rlx_gguf_writer_free(w);
    ASSERT_MSG(rlx_gguf_open(&h, path, &err) == 0, "%s", err.msg);
    uint64_t extra = rlx_gguf_find(g, "general.alignment") ? 0 : 1;
    ASSERT_EQ(rlx_gguf_n_kv(h), rlx_gguf_n_kv(g) + extra);
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        ASSERT_STR_EQ(rlx_gguf_kv_at(h, i)->key, kv->key);
        ASSERT_MSG(value_eq(&rlx_gguf_kv_at(h, i)->value, &kv->value), "key %s differs", kv->key);
    }
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *a = rlx_gguf_tensor_at(g, i), *b = rlx_gguf_tensor_at(h, i);
        ASSERT_STR_EQ(a->name, b->name);
        ASSERT(a->size == b->size && !memcmp(a->data, b->data, a->size));
        /* stories260K was written by llama.cpp's tools: tensor placement must match theirs */
        ASSERT_EQ(a->offset, b->offset);
    }
    ASSERT_EQ(rlx_gguf_file_size(h) - rlx_gguf_data_offset(h), rlx_gguf_file_size(g) - rlx_gguf_data_offset(g));
    /* Byte for byte: the same header and key/values, our general.alignment (33 bytes) if the
     * original lacked it, then identical tensor infos and an identical data section. */
    size_t no, nn;
    uint8_t *o = (uint8_t *)rlx_read_file(src, &no), *m = (uint8_t *)rlx_read_file(path, &nn);
    uint64_t doff_o = rlx_gguf_data_offset(g), doff_n = rlx_gguf_data_offset(h);
    char t0[64];
    snprintf(t0, sizeof t0, "%s", rlx_gguf_tensor_at(g, 0)->name);
    rlx_gguf_close(h);
    rlx_gguf_close(g);
    unlink(path);
    ASSERT(o && m);
    /* where our general.alignment key/value sits (k), if we had to add one */
    static const uint8_t align_kv[33] = {17, 0, 0, 0, 0, 0, 0, 0, 'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'a', 'l',
                                         'i', 'g', 'n', 'm', 'e', 'n', 't', 4, 0, 0, 0, 32, 0, 0, 0};
    const uint8_t *hit = extra ? memmem(m, (size_t)doff_n, align_kv, sizeof align_kv) : NULL;
    size_t k = hit ? (size_t)(hit - m) : (size_t)doff_o, shift = hit ? sizeof align_kv : 0;
    uint64_t name_len = 0;
    if (k + 8 <= no) memcpy(&name_len, o + k, 8);
    int at_infos = !extra || (hit && name_len == strlen(t0) && !memcmp(o + k + 8, t0, name_len));
    int same = no - doff_o == nn - doff_n && k <= no && k + shift <= nn && !memcmp(o, m, 16) &&
               !memcmp(o + 24, m + 24, k - 24) &&                                    /* key/values */
               !memcmp(o + k, m + k + shift, (size_t)RLX_MIN(doff_o - k, doff_n - k - shift)) && /* infos */
               !memcmp(o + doff_o, m + doff_n, no - doff_o);                          /* data */
    free(o);
    free(m);
    ASSERT_MSG(at_infos, "general.alignment was not appended right before the tensor infos");
    ASSERT_MSG(same, "the copy differs from the original beyond the added general.alignment");
}

TEST(writer_replaces_and_rejects)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    ASSERT_EQ(rlx_gguf_writer_set_u32(w, "k", 1), 0);
    ASSERT_EQ(rlx_gguf_writer_set_str(w, "k", "two", 3), 0);
    ASSERT_EQ(rlx_gguf_writer_set_arr(w, "bad", RLX_GGUF_STRING, NULL, 0), RLX_EINVAL);
    ASSERT(strstr(rlx_gguf_writer_last_error(w), "scalar"));
    ASSERT_EQ(rlx_gguf_writer_set_u32(w, "", 1), RLX_EINVAL);
    ASSERT_EQ(rlx_gguf_writer_set_arr(w, "bools", RLX_GGUF_BOOL, "\1\2", 2), RLX_EINVAL);
    ASSERT(strstr(rlx_gguf_writer_last_error(w), "element 1 is 2"));
    float d[64] = {0};
    int64_t ne[2] = {4, 2}, bad0[1] = {0}, q[1] = {33};
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "x", RLX_F32, 2, ne, d, 32), 0);
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "x", RLX_F32, 2, ne, d, 32), RLX_EINVAL);
    ASSERT(strstr(rlx_gguf_writer_last_error(w), "twice"));
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "y", RLX_F32, 2, ne, d, 31), RLX_EINVAL);
    ASSERT(strstr(rlx_gguf_writer_last_error(w), "need 32"));
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "y", 99, 2, ne, d, 32), RLX_EINVAL);
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "y", RLX_F32, 1, bad0, d, 0), RLX_EINVAL);
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "y", RLX_Q8_0, 1, q, d, 34), RLX_EINVAL);
    ASSERT(strstr(rlx_gguf_writer_last_error(w), "block size"));
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "y", RLX_F32, 5, ne, d, 32), RLX_EINVAL);
    ASSERT_EQ(rlx_gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123",
                                         RLX_F32, 2, ne, d, 32), RLX_EINVAL);
    rlx_error err = {0};
    ASSERT_EQ(rlx_gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err), RLX_EIO);
    ASSERT(strstr(err.msg, "/nonexistent-dir/x.gguf"));
    const char *path = rlx_test_tmp_path("replace.gguf");
    ASSERT_MSG(rlx_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_gguf_writer_set_u32(w, "general.alignment", 48), 0);
    ASSERT_EQ(rlx_gguf_writer_write(w, rlx_test_tmp_path("never.gguf"), &err), RLX_EINVAL);
    ASSERT(strstr(err.msg, "power of two"));
    ASSERT(access(rlx_test_tmp_path("never.gguf"), F_OK) != 0);
    rlx_gguf_writer_free(w);
    rlx_gguf *g;
    ASSERT_MSG(rlx_gguf_open(&g, path, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_gguf_n_kv(g), 2);
    rlx_gguf_str s;
    ASSERT_EQ(rlx_gguf_get_str(g, "k", &s, &err), 0);
    ASSERT(str_is(s, "two"));
    ASSERT_EQ(rlx_gguf_n_tensors(g), 1);
    rlx_gguf_close(g);
    unlink(path);
}

/* ---- typed getters ---- */

TEST(getters_convert_when_they_fit)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    rlx_gguf_kv kvs[] = {
        {"u8", {.type = RLX_GGUF_UINT8, .u64 = 9}},
        {"neg", {.type = RLX_GGUF_INT8, .i64 = -3}},
        {"big", {.type = RLX_GGUF_UINT64, .u64 = 1ull << 40}},
        {"huge", {.type = RLX_GGUF_UINT64, .u64 = UINT64_MAX}},
        {"f64", {.type = RLX_GGUF_FLOAT64, .f64 = 0.25}},
        {"i64", {.type = RLX_GGUF_INT64, .i64 = 100}},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(kvs); i++) ASSERT_EQ(rlx_gguf_writer_copy_kv(w, &kvs[i]), 0);
    rlx_gguf_writer_set_str(w, "s", "x", 1);
    rlx_gguf_writer_set_bool(w, "b", true);
    const char *path = rlx_test_tmp_path("getters.gguf");
    rlx_error err = {0};
    ASSERT_MSG(rlx_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    rlx_gguf_writer_free(w);
    rlx_gguf *g;
    ASSERT_MSG(rlx_gguf_open(&g, path, &err) == 0, "%s", err.msg);
    uint32_t u;
    int64_t i;
    float f;
    bool b;
    rlx_gguf_str s;
    const rlx_gguf_array *a;
    ASSERT_EQ(rlx_gguf_get_u32(g, "u8", &u, &err), 0);
    ASSERT_EQ(u, 9);
    ASSERT_EQ(rlx_gguf_get_u32(g, "i64", &u, &err), 0);
    ASSERT_EQ(u, 100);
    ASSERT_EQ(rlx_gguf_get_u32(g, "neg", &u, &err), RLX_EFORMAT);
    ASSERT(strstr(err.msg, "'neg'") && strstr(err.msg, "-3"));
    ASSERT_EQ(rlx_gguf_get_u32(g, "big", &u, &err), RLX_EFORMAT);
    ASSERT_EQ(rlx_gguf_get_u32(g, "s", &u, &err), RLX_EFORMAT);
    ASSERT(strstr(err.msg, "string"));
    ASSERT_EQ(rlx_gguf_get_i64(g, "big", &i, &err), 0);
    ASSERT_EQ(i, 1ll << 40);
    ASSERT_EQ(rlx_gguf_get_i64(g, "neg", &i, &err), 0);
    ASSERT_EQ(i, -3);
    ASSERT_EQ(rlx_gguf_get_i64(g, "huge", &i, &err), RLX_EFORMAT);
    ASSERT_EQ(rlx_gguf_get_f32(g, "f64", &f, &err), 0);
    ASSERT(f == 0.25f);
    ASSERT_EQ(rlx_gguf_get_f32(g, "neg", &f, &err), 0);
    ASSERT(f == -3.0f);
    ASSERT_EQ(rlx_gguf_get_f32(g, "s", &f, &err), RLX_EFORMAT);
    ASSERT_EQ(rlx_gguf_get_bool(g, "b", &b, &err), 0);
    ASSERT(b);
    ASSERT_EQ(rlx_gguf_get_bool(g, "u8", &b, &err), RLX_EFORMAT);
    ASSERT_EQ(rlx_gguf_get_str(g, "s", &s, &err), 0);
    ASSERT(str_is(s, "x"));
    ASSERT_EQ(rlx_gguf_get_str(g, "b", &s, &err), RLX_EFORMAT);
    ASSERT_EQ(rlx_gguf_get_arr(g, "s", &a, &err), RLX_EFORMAT);
    rlx_error untouched = {.code = 123, .msg = "keep"};
    ASSERT_EQ(rlx_gguf_get_str(g, "absent", &s, &untouched), RLX_ENOTFOUND);
    ASSERT(untouched.code == 123 && !strcmp(untouched.msg, "keep"));
    rlx_gguf_close(g);
    unlink(path);
}

TEST(open_errors)
{
    rlx_gguf *g = (rlx_gguf *)1;
    rlx_error err = {0};
    ASSERT_EQ(rlx_gguf_open(&g, "/nonexistent/model.gguf", &err), RLX_ENOTFOUND);
    ASSERT(!g);
    ASSERT(strstr(err.msg, "/nonexistent/model.gguf"));
    ASSERT_EQ(rlx_gguf_open(&g, "/tmp", &err), RLX_EIO);
    ASSERT(strstr(err.msg, "directory"));
    const char *empty = rlx_test_tmp_path("empty.gguf");
    FILE *f = fopen(empty, "wb");
    ASSERT(f);
    fclose(f);
    ASSERT_EQ(rlx_gguf_open(&g, empty, &err), RLX_EFORMAT);
    ASSERT(strstr(err.msg, "empty.gguf") && strstr(err.msg, "too short"));
    unlink(empty);
}

/* ---- malformed files: each is rejected with the right code, naming the field ---- */

/* v2 has v3's layout (v3 only added big-endian variants): a v2 header must be accepted */
TEST(version2_accepted)
{
    bb b = {0};
    header(&b, 2, 0, 1), str(&b, "general.architecture"), u32(&b, RLX_GGUF_STRING), str(&b, "llama");
    rlx_gguf *g;
    rlx_error err = {0};
    int rc = rlx_gguf_open_memory(&g, b.p, b.n, "v2.gguf", &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT_EQ(rlx_gguf_version(g), 2);
    ASSERT_EQ(rlx_gguf_n_kv(g), 1);
    rlx_gguf_close(g);
    free(b.p);
}

TEST(bad_header)
{
    bb b = {0};
    put(&b, "GGML", 4), u32(&b, 3), u64(&b, 0), u64(&b, 0);
    EXPECT_FAIL(b, RLX_EFORMAT, "not a GGUF file", "GGML");
    header(&b, 1, 0, 0);
    EXPECT_FAIL(b, RLX_EUNSUPPORTED, "version 1", NULL);
    header(&b, 4, 0, 0);
    EXPECT_FAIL(b, RLX_EUNSUPPORTED, "version 4", NULL);
    header(&b, 0x03000000, 0, 0);
    EXPECT_FAIL(b, RLX_EUNSUPPORTED, "big-endian", NULL);
    put(&b, "GGUF", 4), u32(&b, 3), u32(&b, 0);
    EXPECT_FAIL(b, RLX_EFORMAT, "tensor count", "truncated");
    header(&b, 3, 0, 0);
    b.n -= 1;
    EXPECT_FAIL(b, RLX_EFORMAT, "metadata key count", "truncated");
    put(&b, "GG", 2);
    EXPECT_FAIL(b, RLX_EFORMAT, "too short", NULL);
    header(&b, 3, 0, UINT64_MAX);
    EXPECT_FAIL(b, RLX_EFORMAT, "metadata key count 18446744073709551615", "cannot fit");
    header(&b, 3, 1ull << 40, 0);
    EXPECT_FAIL(b, RLX_EFORMAT, "tensor count", "cannot fit");
}

TEST(bad_metadata)
{
    bb b = {0};
    header(&b, 3, 0, 2), str(&b, "general.name"), u32(&b, RLX_GGUF_STRING), str(&b, "x");
    str(&b, "tokenizer.ggml.tokens"), u32(&b, RLX_GGUF_STRING), u64(&b, 4294967295u), put(&b, "abcdefgh", 8);
    EXPECT_FAIL(b, RLX_EFORMAT, "metadata key #1 'tokenizer.ggml.tokens': string length 4294967295 runs past the end",
                "(offset 90");
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, 13), u32(&b, 0);
    EXPECT_FAIL(b, RLX_EFORMAT, "metadata key #0 'k': unknown value type 13", NULL);
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, RLX_GGUF_ARRAY), u32(&b, 77), u64(&b, 0);
    EXPECT_FAIL(b, RLX_EFORMAT, "'k'", "unknown array element type 77");
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, RLX_GGUF_ARRAY), u32(&b, RLX_GGUF_UINT32), u64(&b, 1ull << 61);
    u32(&b, 1), u32(&b, 2);
    EXPECT_FAIL(b, RLX_EFORMAT, "'k'", "array of 2305843009213693952 uint32 elements cannot fit");
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, RLX_GGUF_ARRAY), u32(&b, RLX_GGUF_STRING), u64(&b, 3);
    str(&b, "a"), str(&b, "b"), u64(&b, 1000), put(&b, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 34);
    EXPECT_FAIL(b, RLX_EFORMAT, "'k': element [2]: string length 1000", NULL);
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, RLX_GGUF_INT32);
    put(&b, "\1\2", 2);
    EXPECT_FAIL(b, RLX_EFORMAT, "'k'", "int32");
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, RLX_GGUF_BOOL), put(&b, "\2", 1);
    EXPECT_FAIL(b, RLX_EFORMAT, "'k'", "bool value 2");
    header(&b, 3, 0, 2), str(&b, "k"), u32(&b, RLX_GGUF_UINT8), put(&b, "\1", 1);
    str(&b, "k"), u32(&b, RLX_GGUF_UINT8), put(&b, "\1", 1);
    EXPECT_FAIL(b, RLX_EFORMAT, "metadata key #1 'k': duplicate key", "#0");
    header(&b, 3, 0, 1), u64(&b, 3), put(&b, "a\0b", 3), u32(&b, RLX_GGUF_UINT8), put(&b, "\1", 1);
    EXPECT_FAIL(b, RLX_EFORMAT, "metadata key #0", "NUL");
    header(&b, 3, 0, 1), u64(&b, 0), u32(&b, RLX_GGUF_UINT8), put(&b, "\1", 1), put(&b, "\0\0\0\0\0\0", 6);
    EXPECT_FAIL(b, RLX_EFORMAT, "metadata key #0", "empty");
    /* arrays nested 40 deep */
    header(&b, 3, 0, 1), str(&b, "deep"), u32(&b, RLX_GGUF_ARRAY);
    for (int i = 0; i < 40; i++) u32(&b, RLX_GGUF_ARRAY), u64(&b, 1);
    u32(&b, RLX_GGUF_UINT8), u64(&b, 0);
    EXPECT_FAIL(b, RLX_EFORMAT, "'deep'", "nested more than");
}

TEST(bad_alignment)
{
    const uint32_t bad[] = {0, 3, 48};
    bb b = {0};
    for (size_t i = 0; i < RLX_ARRAY_LEN(bad); i++) {
        header(&b, 3, 0, 1), str(&b, "general.alignment"), u32(&b, RLX_GGUF_UINT32), u32(&b, bad[i]);
        EXPECT_FAIL(b, RLX_EFORMAT, "'general.alignment'", "power of two");
    }
    header(&b, 3, 0, 1), str(&b, "general.alignment"), u32(&b, RLX_GGUF_STRING), str(&b, "32");
    EXPECT_FAIL(b, RLX_EFORMAT, "'general.alignment'", "unsigned integer");
    /* a valid 64 moves the data section: a tensor at data offset 32 is then misaligned */
    uint64_t ne[1] = {8};
    header(&b, 3, 1, 1), str(&b, "general.alignment"), u32(&b, RLX_GGUF_UINT32), u32(&b, 64);
    str(&b, "t"), u32(&b, 1), u64(&b, ne[0]), u32(&b, RLX_F32), u64(&b, 32);
    pad(&b, 64);
    put(&b, (const char[64]){0}, 64);
    EXPECT_FAIL(b, RLX_EFORMAT, "tensor #0 't'", "not a multiple of the alignment 64");
}

TEST(bad_tensors)
{
    bb b = {0};
    uint64_t ne2[2] = {4, 2}, ne5[5] = {1, 1, 1, 1, 1};
    tensor_file(&b, "w", 0, ne2, RLX_F32, 0, 32);
    EXPECT_FAIL(b, RLX_EFORMAT, "tensor #0 'w': dimension count 0", NULL);
    tensor_file(&b, "w", 5, ne5, RLX_F32, 0, 32);
    EXPECT_FAIL(b, RLX_EFORMAT, "tensor #0 'w': dimension count 5", NULL);
    tensor_file(&b, "w", 2, (uint64_t[]){4, 0}, RLX_F32, 0, 32);
    EXPECT_FAIL(b, RLX_EFORMAT, "'w': dimension 1 is 0", NULL);
    tensor_file(&b, "w", 2, (uint64_t[]){4, (uint64_t)-2}, RLX_F32, 0, 32);
    EXPECT_FAIL(b, RLX_EFORMAT, "'w': dimension 1 is 18446744073709551614", "negative");
    tensor_file(&b, "w", 3, (uint64_t[]){1ull << 40, 1ull << 20, 1ull << 10}, RLX_F32, 0, 32);
    EXPECT_FAIL(b, RLX_EFORMAT, "'w': shape", "int64");
    tensor_file(&b, "w", 2, (uint64_t[]){1ull << 62, 1}, RLX_F32, 0, 32);
    EXPECT_FAIL(b, RLX_EFORMAT, "'w': byte size", "overflows");
    tensor_file(&b, "w", 1, (uint64_t[]){33}, RLX_Q8_0, 0, 64);
    EXPECT_FAIL(b, RLX_EFORMAT, "'w': row of 33 elements", "q8_0 block size (32)");
    tensor_file(&b, "w", 1, (uint64_t[]){8}, 99, 0, 32);
    EXPECT_FAIL(b, RLX_EUNSUPPORTED, "'w': unknown tensor type id 99", NULL);
    tensor_file(&b, "w", 1, (uint64_t[]){8}, 16, 0, 32);
    EXPECT_FAIL(b, RLX_EUNSUPPORTED, "unknown tensor type id 16", NULL);
    tensor_file(&b, "w", 1, (uint64_t[]){8}, RLX_F32, 8, 64);
    EXPECT_FAIL(b, RLX_EFORMAT, "'w': data offset 8 is not a multiple of the alignment 32", NULL);
    tensor_file(&b, "w", 1, (uint64_t[]){8}, RLX_F32, 0, 31);
    EXPECT_FAIL(b, RLX_EFORMAT, "'w': data (32 bytes at data offset 0", "runs past the end");
    tensor_file(&b, "w", 1, (uint64_t[]){8}, RLX_F32, 1ull << 63, 32);
    EXPECT_FAIL(b, RLX_EFORMAT, "'w': data (32 bytes at data offset 9223372036854775808", NULL);
    tensor_file(&b, "w", 1, (uint64_t[]){8}, RLX_F32, 0, 0);
    b.n -= 4; /* the padding before the data section is cut short */
    EXPECT_FAIL(b, RLX_EFORMAT, "data section would start at offset", NULL);
    header(&b, 3, 2, 0);
    for (int i = 0; i < 2; i++) str(&b, "same"), u32(&b, 1), u64(&b, 8), u32(&b, RLX_F32), u64(&b, 32 * i);
    pad(&b, 32);
    put(&b, (const char[64]){0}, 64);
    EXPECT_FAIL(b, RLX_EFORMAT, "tensor #1 'same': duplicate tensor name", "#0");
    tensor_file(&b, "w", 1, (uint64_t[]){8}, RLX_F32, 0, 32);
    b.n = 56; /* inside the data offset field */
    EXPECT_FAIL(b, RLX_EFORMAT, "tensor #0 'w': file truncated", "data offset (8 bytes at offset 49)");
}

TEST_MAIN(TEST_ENTRY(shared_files_open), TEST_ENTRY(stories260k_facts), TEST_ENTRY(extent_from_prefix), TEST_ENTRY(qwen_vocab_opens),
          TEST_ENTRY(writer_roundtrip_align32), TEST_ENTRY(writer_roundtrip_align64), TEST_ENTRY(writer_byte_exact),
          TEST_ENTRY(writer_copies_stories260k), TEST_ENTRY(writer_replaces_and_rejects),
          TEST_ENTRY(getters_convert_when_they_fit), TEST_ENTRY(open_errors), TEST_ENTRY(version2_accepted), TEST_ENTRY(bad_header),
          TEST_ENTRY(bad_metadata), TEST_ENTRY(bad_alignment), TEST_ENTRY(bad_tensors))
