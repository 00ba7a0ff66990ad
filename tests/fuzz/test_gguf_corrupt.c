/* test_gguf_corrupt.c - deterministic corruption of valid GGUF files.
 *
 * Two seeds: a small file from the writer holding every value type (nested arrays included)
 * and tensors of several types, and stories260K.gguf. Each is mutated in fixed-seed ways:
 * boundary values (0, 1, all ones, 2^63, the file size ...) written over every structural
 * integer field, truncation at every structural boundary and at random points, random bit
 * flips and byte overwrites. Every mutant must either open (then every value and tensor is
 * walked, so ASan sees any pointer outside the buffer) or fail with a negative code and a
 * message that names the file. Buffers are exactly sized so reads past the end are caught. */
#include "tests/rlx_test.h"
#include "models/gguf.h"
#include "backends/dtype.h"
#include "server/cli.h"
#include "tests/gguf_walk.h"

#include <unistd.h>

typedef struct field { uint64_t off; int width; } field; /* width 0: a boundary only */

typedef struct walker {
    const uint8_t *p;
    uint64_t n, pos;
    field *f;
    size_t nf, cap;
} walker;

static void mark(walker *w, int width)
{
    if (w->nf == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 256;
        w->f = realloc(w->f, w->cap * sizeof *w->f);
    }
    w->f[w->nf++] = (field){w->pos, width};
}

static uint64_t rd(walker *w, int width)
{
    uint64_t v = 0;
    mark(w, width);
    memcpy(&v, w->p + w->pos, (size_t)width);
    w->pos += (uint64_t)width;
    return v;
}

static const int sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Records the structure of a VALID file (it trusts what it reads). Only the first elements of
 * long arrays are recorded, to keep the case count bounded. */
static void walk_value(walker *w, uint32_t type)
{
    if (type == RLX_GGUF_STRING) {
        w->pos += rd(w, 8);
    } else if (type == RLX_GGUF_ARRAY) {
        uint32_t et = (uint32_t)rd(w, 4);
        uint64_t n = rd(w, 8);
        for (uint64_t i = 0; i < n; i++) {
            if (et != RLX_GGUF_STRING && et != RLX_GGUF_ARRAY) {
                w->pos += n * (uint64_t)sizes[et];
                mark(w, 0);
                break;
            }
            if (i < 12) {
                walk_value(w, et);
            } else { /* skip the rest without recording */
                size_t keep = w->nf;
                walk_value(w, et);
                w->nf = keep;
            }
        }
    } else {
        mark(w, 0);
        w->pos += (uint64_t)sizes[type];
    }
}

static void walk_file(walker *w)
{
    rd(w, 4), rd(w, 4);
    uint64_t n_t = rd(w, 8), n_kv = rd(w, 8);
    for (uint64_t i = 0; i < n_kv; i++) {
        w->pos += rd(w, 8);
        walk_value(w, (uint32_t)rd(w, 4));
    }
    for (uint64_t i = 0; i < n_t; i++) {
        w->pos += rd(w, 8);
        uint32_t nd = (uint32_t)rd(w, 4);
        for (uint32_t d = 0; d < nd; d++) rd(w, 8);
        rd(w, 4), rd(w, 8);
    }
    mark(w, 0);
}

/* ---- the check applied to every mutant ---- */

typedef struct stats { int cases, opened, failed; } stats;
static volatile uint64_t sink;

/* Returns NULL if the outcome is acceptable, else what was wrong. */
static const char *try_open(const uint8_t *buf, size_t n, stats *st)
{
    static char why[700];
    rlx_gguf *g = NULL;
    rlx_error err = {0};
    st->cases++;
    int rc = rlx_gguf_open_memory(&g, buf, n, "mutant.gguf", &err);
    if (rc) {
        st->failed++;
        if (g) return "failed but returned a handle";
        if (rc >= 0 || err.code != rc) return "failure without a negative code in err";
        if (strncmp(err.msg, "mutant.gguf: ", 13) || strlen(err.msg) < 20) {
            snprintf(why, sizeof why, "message does not name the file or says nothing: '%s'", err.msg);
            return why;
        }
        return NULL;
    }
    st->opened++;
    uint64_t h = 0;
    const char *bad = rlx_test_gguf_walk(g, buf, n, &h);
    if (bad) {
        rlx_gguf_close(g);
        return bad;
    }
    sink += h;
    rlx_gguf_close(g);
    return NULL;
}

/* ---- mutations ---- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Opens a copy of the first n bytes in an exact-size buffer. */
static const char *try_prefix(const uint8_t *src, size_t n, stats *st)
{
    uint8_t *b = malloc(n ? n : 1);
    memcpy(b, src, n);
    const char *r = try_open(b, n, st);
    free(b);
    return r;
}

/* Runs every mutation over buf (n bytes, exactly allocated), restoring it after each. Random
 * flips and overwrites are confined to [0, head) where the structure lives. */
static const char *mutate_all(uint8_t *buf, size_t n, uint64_t head, int n_random, stats *st)
{
    walker w = {.p = buf, .n = n};
    walk_file(&w);
    const char *r = NULL;
    const uint64_t vals[] = {0, 1, 2, 0xff, 0xffff, 0x7fffffff, 0xffffffff, 0x100000000ull, 1ull << 62,
                             1ull << 63, UINT64_MAX, UINT64_MAX - 7, n, n + 1, n - 1, n / 2};
    uint8_t save[8];
    for (size_t i = 0; i < w.nf && !r; i++) {
        field f = w.f[i];
        if (f.off <= n) r = try_prefix(buf, (size_t)f.off, st); /* cut at every boundary */
        if (r || f.width == 0) continue;
        memcpy(save, buf + f.off, (size_t)f.width);
        uint64_t orig = 0;
        memcpy(&orig, save, (size_t)f.width);
        uint64_t extra[] = {orig + 1, orig - 1, orig * 2, orig + 32};
        for (size_t k = 0; k < RLX_ARRAY_LEN(vals) + RLX_ARRAY_LEN(extra) && !r; k++) {
            uint64_t v = k < RLX_ARRAY_LEN(vals) ? vals[k] : extra[k - RLX_ARRAY_LEN(vals)];
            memcpy(buf + f.off, &v, (size_t)f.width);
            r = try_open(buf, n, st);
        }
        memcpy(buf + f.off, save, (size_t)f.width);
    }
    free(w.f);
    for (int i = 0; i < n_random && !r; i++) {
        uint64_t at = rnd() % head;
        uint8_t old = buf[at];
        switch (i % 3) {
        case 0: buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: buf[at] = (uint8_t)rnd(); break;
        default: buf[at] = (uint8_t)(rnd() & 1 ? 0xff : 0); break;
        }
        /* some multi-byte damage too */
        uint64_t at2 = rnd() % head, old2 = buf[at2];
        if (i % 4 == 0) buf[at2] ^= 0x80;
        r = try_open(buf, n, st);
        buf[at2] = (uint8_t)old2;
        buf[at] = old;
        if (!r && i % 5 == 0) r = try_prefix(buf, (size_t)(rnd() % n), st);
    }
    return r;
}

static uint8_t *small_file(size_t *n)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    static const rlx_gguf_str strs[] = {{"alpha", 5}, {"", 0}, {"\xce\xb2", 2}};
    static const int32_t ints[] = {1, -2, 3};
    static const double f64s[] = {0.5, -8.0};
    rlx_gguf_array leaf[2] = {{.type = RLX_GGUF_STRING, .n = 3, .strs = strs}, {.type = RLX_GGUF_INT32, .n = 3, .data = ints}};
    rlx_gguf_array mid[2] = {{.type = RLX_GGUF_ARRAY, .n = 2, .arrs = leaf}, {.type = RLX_GGUF_FLOAT64, .n = 2, .data = f64s}};
    rlx_gguf_kv kvs[] = {
        {"general.architecture", {.type = RLX_GGUF_STRING, .str = {"llama", 5}}},
        {"x.u8", {.type = RLX_GGUF_UINT8, .u64 = 7}}, {"x.i16", {.type = RLX_GGUF_INT16, .i64 = -5}},
        {"x.u64", {.type = RLX_GGUF_UINT64, .u64 = 1ull << 50}}, {"x.f64", {.type = RLX_GGUF_FLOAT64, .f64 = 2.5}},
        {"x.bool", {.type = RLX_GGUF_BOOL, .b = true}},
        {"x.nest", {.type = RLX_GGUF_ARRAY, .arr = {.type = RLX_GGUF_ARRAY, .n = 2, .arrs = mid}}},
        {"x.strs", {.type = RLX_GGUF_ARRAY, .arr = {.type = RLX_GGUF_STRING, .n = 3, .strs = strs}}},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(kvs); i++) rlx_gguf_writer_copy_kv(w, &kvs[i]);
    rlx_gguf_writer_set_u32(w, "llama.block_count", 2);
    rlx_gguf_writer_set_f32(w, "x.f32", 0.125f);
    rlx_gguf_writer_set_arr(w, "x.i32s", RLX_GGUF_INT32, ints, 3);
    uint8_t data[2 * 34 * 2];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7);
    int64_t a[2] = {3, 2}, b[1] = {16}, c[2] = {64, 2};
    rlx_gguf_writer_add_tensor(w, "a.weight", RLX_F32, 2, a, data, 24);
    rlx_gguf_writer_add_tensor(w, "b.weight", RLX_F16, 1, b, data, 32);
    rlx_gguf_writer_add_tensor(w, "c.weight", RLX_Q8_0, 2, c, data, sizeof data);
    char path[] = "/tmp/rlx_gguf_fuzz_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    rlx_error err = {0};
    int rc = fd < 0 ? -1 : rlx_gguf_writer_write(w, path, &err);
    rlx_gguf_writer_free(w);
    char *bytes = rc ? NULL : rlx_read_file(path, n);
    unlink(path);
    return (uint8_t *)bytes;
}

TEST(mutants_of_a_written_file)
{
    size_t n;
    uint8_t *file = small_file(&n);
    ASSERT(file);
    uint8_t *buf = malloc(n);
    memcpy(buf, file, n);
    free(file);
    stats st = {0};
    ASSERT(!try_open(buf, n, &st) && st.opened == 1);
    rng_state = 0x9e3779b97f4a7c15ull;
    const char *r = mutate_all(buf, n, n, 600, &st);
    free(buf);
    ASSERT_MSG(!r, "case %d: %s", st.cases, r);
    fprintf(stderr, "  %d mutants: %d opened, %d rejected\n", st.cases, st.opened, st.failed);
    ASSERT(st.cases >= 500);
    ASSERT(st.failed > st.cases / 2 && st.opened > 10);
}

TEST(mutants_of_stories260k)
{
    const char *path = rlx_test_shared("models/stories260K.gguf");
    if (!path) SKIP("models/stories260K.gguf is absent (set RLX_SHARED)");
    size_t n;
    uint8_t *file = (uint8_t *)rlx_read_file(path, &n);
    ASSERT(file);
    uint8_t *buf = malloc(n);
    memcpy(buf, file, n);
    free(file);
    stats st = {0};
    rlx_gguf *g;
    rlx_error err = {0};
    ASSERT_MSG(rlx_gguf_open_memory(&g, buf, n, "stories", &err) == 0, "%s", err.msg);
    uint64_t head = rlx_gguf_data_offset(g);
    rlx_gguf_close(g);
    rng_state = 0x2545f4914f6cdd1dull;
    const char *r = mutate_all(buf, n, head, 400, &st);
    free(buf);
    ASSERT_MSG(!r, "case %d: %s", st.cases, r);
    fprintf(stderr, "  %d mutants: %d opened, %d rejected\n", st.cases, st.opened, st.failed);
    ASSERT(st.cases >= 500);
    ASSERT(st.failed > st.cases / 2 && st.opened > 10);
}

TEST_MAIN(TEST_ENTRY(mutants_of_a_written_file), TEST_ENTRY(mutants_of_stories260k))
