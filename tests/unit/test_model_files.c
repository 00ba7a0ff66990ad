/* test_model_files.c - models/model_files.h: quantization names, folder scans (split parts
 * grouped, one level of subfolders) and rlx_model_check's verdicts, including that every key
 * rlx_model_required_keys names is one rlx_model_load fails without. */
#include "models/model_files.h"
#include "models/model.h"
#include "backends/dtype.h"
#include "tests/rlx_test.h"
#include "tests/rlx_test_tmp.h"
#include "tests/unit/test_synth_util.h"

#include <math.h>
#include <sys/stat.h>


static void touch(const char *rel)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp_path(rel));
    for (char *p = dir + strlen(rlx_test_tmp_dir()) + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(dir, 0755); *p = '/'; }
    FILE *f = fopen(dir, "wb");
    if (f) fclose(f);
}

TEST(ftype_names)
{
    ASSERT_STR_EQ(rlx_ftype_name(15), "Q4_K_M");
    ASSERT_STR_EQ(rlx_ftype_name(7), "Q8_0");
    ASSERT_STR_EQ(rlx_ftype_name(0), "F32");
    ASSERT_STR_EQ(rlx_ftype_name(32), "BF16");
    ASSERT(!rlx_ftype_name(4)); /* removed from llama.cpp */
    ASSERT(!rlx_ftype_name(1000));
}

/* a file of a q8_0 matrix (1024 bytes), an f32 matrix (512 bytes) and a large f32 vector */
static const char *quant_file(const char *name, int64_t file_type)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    if (file_type >= 0) rlx_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type);
    static uint8_t zero[4096];
    int64_t q[2] = {32 * 6, 5}, f[2] = {32, 4}, v[1] = {1000};
    rlx_gguf_writer_add_tensor(w, "q", RLX_Q8_0, 2, q, zero, 34 * 6 * 5);
    rlx_gguf_writer_add_tensor(w, "f", RLX_F32, 2, f, zero, 4 * 32 * 4);
    rlx_gguf_writer_add_tensor(w, "v", RLX_F32, 1, v, zero, 4000);
    rlx_error err = {0};
    const char *p = rlx_test_tmp_path(name);
    int rc = rlx_gguf_writer_write(w, p, &err);
    rlx_gguf_writer_free(w);
    return rc ? NULL : p;
}

TEST(quant)
{
    const char *cases[][2] = {{"ft15.gguf", "Q4_K_M"}, {"noft.gguf", "Q8_0"}, {"ft99.gguf", "Q8_0"}};
    const int64_t ft[] = {15, -1, 99};
    for (int i = 0; i < 3; i++) {
        const char *p = quant_file(cases[i][0], ft[i]);
        ASSERT(p);
        rlx_gguf *g;
        rlx_error err = {0};
        ASSERT_MSG(rlx_gguf_open(&g, p, &err) == 0, "%s", err.msg);
        char q[32];
        rlx_model_quant(g, q, sizeof q);
        ASSERT_STR_EQ(q, cases[i][1]);
        rlx_gguf_close(g);
    }
}

TEST(scan)
{
    touch("scan/a.gguf");
    touch("scan/sub/b-00002-of-00002.gguf");
    touch("scan/sub/b-00001-of-00002.gguf");
    touch("scan/c-00002-of-00003.gguf");         /* parts 1 and 3 absent */
    touch("scan/c.gguf");                        /* a plain c beside the split c */
    touch("scan/sub/deeper/x.gguf");             /* two levels down: not listed */
    touch("scan/.hidden/y.gguf");
    touch("scan/.z.gguf");
    touch("scan/notes.txt");
    rlx_model_entry *e;
    size_t n;
    rlx_error err = {0};
    ASSERT_MSG(rlx_model_scan(rlx_test_tmp_path("scan"), &e, &n, &err) == 0, "%s", err.msg);
    ASSERT_EQ(n, 4);
    ASSERT_STR_EQ(e[0].name, "a");
    ASSERT_EQ(e[0].n_parts, 1);
    ASSERT_STR_EQ(e[1].name, "c");
    ASSERT_EQ(e[1].n_parts, 1);
    ASSERT_STR_EQ(e[1].path, rlx_test_tmp_path("scan/c.gguf"));
    ASSERT_STR_EQ(e[2].name, "c-00002-of-00003.gguf"); /* not a second "c": the plain one keeps the name */
    ASSERT_EQ(e[2].n_parts, 3);
    ASSERT_EQ(e[2].n_present, 1);
    ASSERT_STR_EQ(e[2].path, rlx_test_tmp_path("scan/c-00002-of-00003.gguf"));
    ASSERT_STR_EQ(e[3].name, "sub/b");
    ASSERT_EQ(e[3].n_parts, 2);
    ASSERT_EQ(e[3].n_present, 2);
    ASSERT_STR_EQ(e[3].path, rlx_test_tmp_path("scan/sub/b-00001-of-00002.gguf"));
    rlx_model_scan_free(e, n);
    /* the extension in any case, as `rlxd pull` saves a repository's Model-Q8_0.GGUF (it was
       downloaded, then never served) */
    touch("upper/Model-Q8_0.GGUF");
    ASSERT_MSG(rlx_model_scan(rlx_test_tmp_path("upper"), &e, &n, &err) == 0, "%s", err.msg);
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(e[0].name, "Model-Q8_0");
    rlx_model_scan_free(e, n);

    /* a complete set beside an incomplete one of the same name (which sorts first, having fewer
       parts): the complete one is served as "m", the other listed by its file */
    touch("shadow/m-00001-of-00003.gguf");
    touch("shadow/m-00002-of-00003.gguf");
    touch("shadow/m-00003-of-00003.gguf");
    touch("shadow/m-00001-of-00002.gguf");
    ASSERT_MSG(rlx_model_scan(rlx_test_tmp_path("shadow"), &e, &n, &err) == 0, "%s", err.msg);
    ASSERT_EQ(n, 2);
    ASSERT_STR_EQ(e[0].name, "m");
    ASSERT_EQ(e[0].n_parts, 3);
    ASSERT_EQ(e[0].n_present, 3);
    ASSERT_STR_EQ(e[1].name, "m-00001-of-00002.gguf");
    ASSERT_EQ(e[1].n_present, 1);
    rlx_model_scan_free(e, n);
    ASSERT_NE(rlx_model_scan(rlx_test_tmp_path("absent"), &e, &n, &err), 0);
    ASSERT(strstr(err.msg, "cannot read the folder"));
    mkdir(rlx_test_tmp_path("empty"), 0755);
    ASSERT_EQ(rlx_model_scan(rlx_test_tmp_path("empty"), &e, &n, &err), 0);
    ASSERT_EQ(n, 0);
    rlx_model_scan_free(e, n);
}

/* src without the key `drop` (every tensor kept) */
static int copy_without(const char *src, const char *dst, const char *drop, rlx_error *err)
{
    rlx_gguf *g;
    int rc = rlx_gguf_open(&g, src, err);
    if (rc) return rc;
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++)
        if (strcmp(rlx_gguf_kv_at(g, i)->key, drop)) rlx_gguf_writer_copy_kv(w, rlx_gguf_kv_at(g, i));
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        rlx_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->size);
    }
    rc = rlx_gguf_writer_write(w, dst, err);
    rlx_gguf_writer_free(w);
    rlx_gguf_close(g);
    return rc;
}

TEST(check_verdicts)
{
    char good[512], split[512];
    if (!synth("--arch llama --preset tiny --type q8_0 --seed 4", "good.gguf", good, sizeof good))
        SKIP("rlxd-synth is not built (RLX_BIN)");
    rlx_check_result r;
    rlx_model_check(good, &r);
    ASSERT_MSG(r.status == RLX_CHECK_SUPPORTED, "%s", r.reason);
    ASSERT_STR_EQ(r.arch, "llama");
    ASSERT_EQ(r.n_parts, 1);
    ASSERT_STR_EQ(r.reason, "");
    ASSERT(synth("--arch llama --preset tiny --type q8_0 --seed 4 --split 2", "sp.gguf", split, sizeof split));
    char part2[600];
    snprintf(part2, sizeof part2, "%.*s-00002-of-00002.gguf", (int)(strlen(split) - 5), split);
    rlx_model_check(part2, &r);
    ASSERT_MSG(r.status == RLX_CHECK_SUPPORTED, "%s", r.reason);
    ASSERT_EQ(r.n_parts, 2);
    /* every key the loader requires: the loader fails without it, and check names it */
    rlx_error err = {0};
    for (size_t i = 0; rlx_model_required_keys[i]; i++) {
        char key[128];
        snprintf(key, sizeof key, "llama.%s", rlx_model_required_keys[i]);
        const char *p = rlx_test_tmp_path("nokey.gguf");
        ASSERT_MSG(copy_without(good, p, key, &err) == 0, "%s", err.msg);
        rlx_model *m = NULL;
        ASSERT_NE(rlx_model_load(&m, p, &err), 0);
        ASSERT_MSG(strstr(err.msg, key), "%s", err.msg);
        rlx_model_check(p, &r);
        ASSERT_EQ(r.status, RLX_CHECK_MISSING_METADATA);
        ASSERT_STR_EQ(r.detail, key);
    }
    const char *drops[] = {"llama.context_length", "tokenizer.ggml.model", "tokenizer.ggml.tokens", "general.architecture"};
    for (size_t i = 0; i < RLX_ARRAY_LEN(drops); i++) {
        const char *p = rlx_test_tmp_path("nokey.gguf");
        ASSERT_MSG(copy_without(good, p, drops[i], &err) == 0, "%s", err.msg);
        rlx_model_check(p, &r);
        ASSERT_EQ(r.status, RLX_CHECK_MISSING_METADATA);
        ASSERT_STR_EQ(r.detail, drops[i]);
    }
    /* a file that is not GGUF, and one with keys but no tensors */
    touch("empty.gguf");
    rlx_model_check(rlx_test_tmp_path("empty.gguf"), &r);
    ASSERT_EQ(r.status, RLX_CHECK_UNKNOWN);
    ASSERT_EQ(r.n_parts, 0);
    ASSERT_STR_EQ(rlx_check_status_name(r.status), "Unknown");
    ASSERT_STR_EQ(rlx_check_status_name(RLX_CHECK_KNOWN_UNIMPLEMENTED), "KnownUnimplemented");
}


/* src with key set to a number (kind 'u': u32, 'f': f32; NULL key: none) and, when rows > 0,
 * token_embd.weight and output.weight cut to their first rows rows */
static int copy_edited(const char *src, const char *dst, const char *key, char kind, double v, int64_t rows,
                       rlx_error *err)
{
    rlx_gguf *g;
    int rc = rlx_gguf_open(&g, src, err);
    if (rc) return rc;
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) rlx_gguf_writer_copy_kv(w, rlx_gguf_kv_at(g, i));
    if (key && kind == 'u') rlx_gguf_writer_set_u32(w, key, (uint32_t)v);
    if (key && kind == 'f') rlx_gguf_writer_set_f32(w, key, (float)v);
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        size_t size = t->size;
        if (rows > 0 && (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "output.weight"))) {
            size = t->size / t->ne[1] * (size_t)rows;
            ne[1] = rows;
        }
        rlx_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data, size);
    }
    rc = rlx_gguf_writer_write(w, dst, err);
    rlx_gguf_writer_free(w);
    rlx_gguf_close(g);
    return rc;
}

/* hyper-parameters no model has are refused at load, naming the key, rather than serving nothing
 * or NaN; a tokenizer with more tokens than embedding rows, and tensors of layers past
 * block_count, too (each loaded before, and check said SUPPORTED) */
TEST(impossible_values_refused)
{
    const char *good = rlx_test_shared("models/stories260K.gguf");
    if (!good) SKIP("models/stories260K.gguf not found");
    struct { const char *key; char kind; double v; int64_t rows; const char *says; } cases[] = {
        {"llama.context_length", 'u', 0, 0, "llama.context_length is 0"},
        {"llama.attention.layer_norm_rms_epsilon", 'f', NAN, 0, "layer_norm_rms_epsilon is nan"},
        {"llama.attention.layer_norm_rms_epsilon", 'f', -1, 0, "layer_norm_rms_epsilon is -1"},
        {"llama.rope.freq_base", 'f', 0, 0, "rope.freq_base is 0"},
        {"llama.rope.freq_base", 'f', INFINITY, 0, "rope.freq_base is inf"},
        {"llama.block_count", 'u', 4, 0, "is of layer 4 but llama.block_count is 4"},
        {NULL, 0, 0, 400, "the tokenizer has 512 tokens but 'token_embd.weight' has 400 rows"},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(cases); i++) {
        rlx_error err = {0};
        const char *p = rlx_test_tmp_path("edited.gguf");
        ASSERT_MSG(copy_edited(good, p, cases[i].key, cases[i].kind, cases[i].v, cases[i].rows, &err) == 0, "%s", err.msg);
        rlx_model *m = NULL;
        ASSERT_MSG(rlx_model_load(&m, p, &err) != 0, "case %zu loaded", i);
        ASSERT_MSG(strstr(err.msg, cases[i].says), "case %zu: %s", i, err.msg);
        rlx_check_result r;
        rlx_model_check(p, &r);
        ASSERT_MSG(r.status != RLX_CHECK_SUPPORTED, "case %zu: check says SUPPORTED", i);
    }
}


int main(void)
{
    static const rlx_test_case cases[] = {
        TEST_ENTRY(ftype_names), TEST_ENTRY(quant), TEST_ENTRY(scan), TEST_ENTRY(check_verdicts),
        TEST_ENTRY(impossible_values_refused),
    };
    return rlx_test_run(cases, sizeof cases / sizeof cases[0]);
}
