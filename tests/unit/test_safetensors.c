/* test_safetensors.c - Hugging Face folders (models/safetensors.c, models/hf_tokenizer.c) against
 * the GGUFs they are written from (tools/hf_export.c):
 *   - tokenizer.json of every reference vocabulary tokenizes its vectors (../shared/vocab) to the
 *     expected ids and to the GGUF tokenizer's, specials and BOS/EOS flags included;
 *   - the synthetic llama, qwen3, qwen2 and gemma2 models come back with every tensor byte-identical under its
 *     llama.cpp name (Llama's q/k permutation undone and redone), the same hyper-parameters, from
 *     one file or shards; the q/k permutation and F16/BF16 vectors on hand-written data;
 *   - errors: unsupported architecture, dtype, tokenizer kind, pre-tokenizer; a missing shard;
 *     a truncated header. (Logits: tests/integration/test_safetensors.sh.) */
#include "tests/unit/test_tokenizer_vocab.h"
#include "tests/unit/test_synth_util.h"
#include "tests/unit/test_safetensors_util.h"
#include "tools/hf_export.h"
#include "models/safetensors.h"
#include "models/model.h"
#include "backends/dtype.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* the tokenizer a folder's tokenizer.json makes, through the same keys rlx_st_open writes (the
 * tokenizer copies what it needs, so the metadata image goes at once) */
static int json_tokenizer(const char *dir, int64_t n_min, rlx_tokenizer **t, rlx_error *err)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    void *img = NULL;
    size_t len = 0;
    rlx_gguf *g = NULL;
    *t = NULL;
    int rc = rlx_hf_tokenizer_keys(w, dir, n_min, err);
    if (!rc) rc = rlx_gguf_writer_write_memory(w, &img, &len, err);
    rlx_gguf_writer_free(w);
    if (!rc) rc = rlx_gguf_open_memory(&g, img, len, dir, err);
    if (!rc) rc = rlx_tokenizer_from_gguf(t, g, err);
    if (g) rlx_gguf_close(g);
    free(img);
    return rc;
}

static bool same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* Older tokenizer.json files hold merges as "a b" strings, and Qwen2's an NFC normalizer: rewrites
 * the exported file that way (the tokens of these vocabularies hold no spaces). */
static int older_format(const char *dir, bool nfc)
{
    cJSON *j = json_file(dir, "tokenizer.json");
    cJSON *m = j ? cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "merges") : NULL, *e;
    if (!m) { cJSON_Delete(j); return 1; }
    cJSON *strs = cJSON_CreateArray();
    cJSON_ArrayForEach(e, m) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s %s", e->child->valuestring, e->child->next->valuestring);
        cJSON_AddItemToArray(strs, cJSON_CreateString(buf));
    }
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "model"), "merges", strs);
    if (nfc) {
        cJSON *norm = cJSON_CreateObject();
        cJSON_AddStringToObject(norm, "type", "NFC");
        cJSON_ReplaceItemInObject(j, "normalizer", norm);
    }
    json_file_put(dir, "tokenizer.json", j);
    return 0;
}

/* Gemma's tokenizer.json (transformers' GemmaConverter): pre-tokenizer Split(" ",
 * merged_with_previous) after the normalizer's Replace(" ", "▁"), so the Split never matches */
static int gemma_format(const char *dir)
{
    cJSON *j = json_file(dir, "tokenizer.json");
    if (!j) return 1;
    cJSON *sp = cJSON_Parse("{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"MergedWithPrevious\",\"invert\":false}");
    cJSON_ReplaceItemInObject(j, "pre_tokenizer", sp);
    json_file_put(dir, "tokenizer.json", j);
    return 0;
}

/* vocabulary name, vector set (NULL: none; compare on a fixed text only); older: merges as
 * strings (and NFC for byte-level ones) */
enum { FORM_PLAIN, FORM_OLDER, FORM_GEMMA };
static int check_vocab_as(const char *vocab, const char *vectors, int form)
{
    bool older = form == FORM_OLDER;
    tv_vocab v;
    int rc = tv_open(&v, vocab);
    if (rc) return rc;
    const char *dir = rlx_test_tmp_path(vocab);
    mkdir(dir, 0755);
    rlx_error err = {0};
    rlx_tokenizer *jt;
    rlx_gguf_str model = {"", 0};
    rlx_gguf_get_str(v.g, "tokenizer.ggml.model", &model, NULL);
    if (rlx_hf_export_tokenizer(v.g, dir, &err) || (older && older_format(dir, model.len == 4)) ||
        (form == FORM_GEMMA && gemma_format(dir)) ||
        json_tokenizer(dir, rlx_tokenizer_n_vocab(v.t), &jt, &err)) {
        fprintf(stderr, "  %s: %s\n", vocab, err.msg);
        tv_close(&v);
        return 1;
    }
    int bad = 0;
    if (rlx_tokenizer_n_vocab(jt) != rlx_tokenizer_n_vocab(v.t) || rlx_tokenizer_bos(jt) != rlx_tokenizer_bos(v.t) ||
        rlx_tokenizer_eos(jt) != rlx_tokenizer_eos(v.t) || rlx_tokenizer_add_bos(jt) != rlx_tokenizer_add_bos(v.t) ||
        rlx_tokenizer_add_eos(jt) != rlx_tokenizer_add_eos(v.t)) {
        fprintf(stderr, "  %s: vocabulary size / BOS / EOS / flags differ: %d %d %d %d %d vs %d %d %d %d %d\n", vocab,
                rlx_tokenizer_n_vocab(jt), rlx_tokenizer_bos(jt), rlx_tokenizer_eos(jt), rlx_tokenizer_add_bos(jt),
                rlx_tokenizer_add_eos(jt), rlx_tokenizer_n_vocab(v.t), rlx_tokenizer_bos(v.t), rlx_tokenizer_eos(v.t),
                rlx_tokenizer_add_bos(v.t), rlx_tokenizer_add_eos(v.t));
        bad++;
    }
    tv_set s = {0};
    if (vectors && (rc = tv_read(&s, vectors))) bad++;
    static const char extra[] = "Hello world, this is a test: 1234 \xf0\x9f\xa6\x99 ok? <s></s><|im_start|>user\n"
                                "<|endoftext|>  tabs\tand\r\nnew lines   ";
    size_t n_cases = s.n + 1;
    for (size_t i = 0; i < n_cases; i++) {
        const char *text = i < s.n ? s.c[i].text : extra;
        size_t len = i < s.n ? s.c[i].len : strlen(extra);
        for (int mode = 0; mode < 3; mode++) { /* (special, parse): (0,0) as the vectors, (1,0), (1,1) */
            bool add = mode > 0, parse = mode == 2;
            int32_t *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            int ra = rlx_tokenize(jt, text, len, add, parse, &a, &na, &err);
            int rb = rlx_tokenize(v.t, text, len, add, parse, &b, &nb, &err);
            bool ok = ra == 0 && rb == 0 && same_ids(a, na, b, nb);
            if (ok && mode == 0 && i < s.n) ok = same_ids(a, na, s.c[i].ids, s.c[i].n_ids);
            if (!ok && bad++ < 5) {
                fprintf(stderr, "  %s entry %zu mode %d \"%.50s\":\n    json", vocab, i, mode, text);
                for (size_t k = 0; k < na && k < 40; k++) fprintf(stderr, " %d", a[k]);
                fprintf(stderr, "\n    gguf");
                for (size_t k = 0; k < nb && k < 40; k++) fprintf(stderr, " %d", b[k]);
                fprintf(stderr, "\n");
            }
            free(a);
            free(b);
        }
    }
    fprintf(stderr, "  %-20s %zu vectors x 3 modes through tokenizer.json%s: %s\n", vocab, s.n,
            older ? " (string merges)" : form == FORM_GEMMA ? " (Gemma's Split pre-tokenizer)" : "", bad ? "MISMATCH" : "identical");
    tv_set_free(&s);
    rlx_tokenizer_free(jt);
    tv_close(&v);
    return bad ? 1 : 0;
}

static int check_vocab(const char *vocab, const char *vectors)
{
    /* under valgrind (RLX_MEMCHECK) gpt-2's byte-level BPE stands for mpt's, starcoder's and
     * refact's (the same tokenizer.json reader, other merges; 4-5 s each there) */
    if (getenv("RLX_MEMCHECK") && (!strcmp(vocab, "mpt") || !strcmp(vocab, "starcoder") || !strcmp(vocab, "refact"))) {
        fprintf(stderr, "  %-20s under memcheck: gpt-2's case stands for it\n", vocab);
        return 0;
    }
    int rc = check_vocab_as(vocab, vectors, FORM_PLAIN);
    /* the older format once more (under valgrind, RLX_MEMCHECK, only for the small SPM
     * vocabulary: the same parser code, 25 s less than the 151k-token one there) */
    bool big_ok = !getenv("RLX_MEMCHECK");
    if (rc == 0 && (!strcmp(vocab, "llama-spm") || (big_ok && !strcmp(vocab, "qwen2-reconstructed"))))
        rc = check_vocab_as(vocab, vectors, FORM_OLDER);
    if (rc == 0 && !strcmp(vocab, "llama-spm")) rc = check_vocab_as(vocab, vectors, FORM_GEMMA);
    return rc;
}

#define VOCAB_TEST(name, vocab, vectors)                                                           \
    TEST(name)                                                                                     \
    {                                                                                              \
        int rc = check_vocab(vocab, vectors);                                                      \
        if (rc == 77) SKIP("../shared/vocab/ggml-vocab-%s.gguf or its vectors absent", vocab);    \
        ASSERT_MSG(rc == 0, "%s: tokenizer.json differs from the GGUF tokenizer", vocab);         \
    }

VOCAB_TEST(tok_llama_spm, "llama-spm", "llama-spm")
VOCAB_TEST(tok_phi_3, "phi-3", "phi-3")
VOCAB_TEST(tok_baichuan, "baichuan", NULL)
VOCAB_TEST(tok_qwen2, "qwen2-reconstructed", "qwen2")
VOCAB_TEST(tok_gpt_2, "gpt-2", "gpt-2")
VOCAB_TEST(tok_mpt, "mpt", "mpt")
VOCAB_TEST(tok_starcoder, "starcoder", "starcoder")
VOCAB_TEST(tok_refact, "refact", "refact")


TEST(tok_unsupported)
{
    const char *dir = rlx_test_tmp_path("tok_bad");
    mkdir(dir, 0755);
    rlx_error err = {0};
    rlx_tokenizer *t;
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}");
    ASSERT_EQ(json_tokenizer(dir, 0, &t, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "WordPiece"), "%s", err.msg);
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                    "\"pre_tokenizer\":{\"type\":\"Whitespace\"}}");
    ASSERT_EQ(json_tokenizer(dir, 0, &t, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "pre-tokenizer Whitespace"), "%s", err.msg);
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                    "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x+\"},\"behavior\":\"Isolated\"}}");
    ASSERT_EQ(json_tokenizer(dir, 0, &t, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "not one rlxd recognises") && strstr(err.msg, "S:x+"), "%s", err.msg);
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true}}");
    write_json_file(dir, "tokenizer_config.json", "{\"bos_token\":\"<nope>\"}");
    ASSERT_EQ(json_tokenizer(dir, 0, &t, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "bos_token '<nope>' is not a token"), "%s", err.msg);
    /* a byte_fallback BPE's Split is a no-op only after a Replace that takes its string away for good */
    static const struct { const char *norm; bool ok; } splits[] = {
        {"{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}", true},
        {"{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},{\"type\":\"Replace\","
         "\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]}", true},
        {"null", false},
        {"{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
         "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},\"content\":\" \"}]}", false},
        {"{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
         "{\"type\":\"Prepend\",\"prepend\":\" \"}]}", false},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(splits); i++) {
        char tj[1024];
        snprintf(tj, sizeof tj, "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"<unk>\":0,\"a\":1,\"\xe2\x96\x81\":2,"
                 "\"\xe2\x96\x81" "a\":3},\"merges\":[[\"\xe2\x96\x81\",\"a\"]]},\"normalizer\":%s,\"pre_tokenizer\":{\"type\":\"Split\","
                 "\"pattern\":{\"String\":\" \"},\"behavior\":\"MergedWithPrevious\",\"invert\":false}}", splits[i].norm);
        write_json_file(dir, "tokenizer.json", tj);
        write_json_file(dir, "tokenizer_config.json", "{\"add_bos_token\":false}");
        int rc = json_tokenizer(dir, 0, &t, &err);
        ASSERT_MSG(rc == (splits[i].ok ? 0 : RLX_EUNSUPPORTED), "case %zu: rc %d %s", i, rc, err.msg);
        if (!splits[i].ok) {
            ASSERT_MSG(strstr(err.msg, "pre-tokenizer Split"), "%s", err.msg);
            continue;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        ASSERT_EQ(rlx_tokenize(t, "a a", 3, false, false, &ids, &n, &err), 0);
        ASSERT_EQ(n, 2); /* "a", "▁a" (with the Prepend: "▁a", "▁a") */
        ASSERT_EQ(ids[1], 3);
        ASSERT_EQ(ids[0], i == 0 ? 1 : 3);
        free(ids);
        rlx_tokenizer_free(t);
    }
    unlink(rlx_test_tmp_path("tok_bad/tokenizer_config.json"));
    unlink(rlx_test_tmp_path("tok_bad/tokenizer.json"));
    ASSERT_EQ(json_tokenizer(dir, 0, &t, &err), RLX_ENOTFOUND);
    ASSERT_MSG(strstr(err.msg, "no tokenizer.json"), "%s", err.msg);
    /* holes up to the embedding's rows become [PAD<id>], unused */
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[[\"a\",\"b\"]]},"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true}}");
    write_json_file(dir, "tokenizer_config.json", "{}");
    ASSERT_MSG(json_tokenizer(dir, 5, &t, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_tokenizer_n_vocab(t), 5);
    ASSERT_STR_EQ(rlx_tokenizer_piece(t, 4), "[PAD4]");
    ASSERT(!rlx_tokenizer_add_bos(t)); /* byte-level BPE without a word on it */
    rlx_tokenizer_free(t);
    /* no add_bos_token: a post-processor starting with a special token adds BOS (Llama 3's Sequence form) */
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]},"
                    "\"added_tokens\":[{\"id\":2,\"content\":\"<|begin|>\",\"special\":true}],"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true},\"post_processor\":{\"type\":\"Sequence\","
                    "\"processors\":[{\"type\":\"ByteLevel\"},{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
                    "{\"id\":\"<|begin|>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]}]}}");
    write_json_file(dir, "tokenizer_config.json", "{\"bos_token\":\"<|begin|>\"}");
    ASSERT_MSG(json_tokenizer(dir, 0, &t, &err) == 0, "%s", err.msg);
    ASSERT(rlx_tokenizer_add_bos(t));
    ASSERT_EQ(rlx_tokenizer_bos(t), 2);
    int32_t *ids = NULL;
    size_t n = 0;
    ASSERT_EQ(rlx_tokenize(t, "ab<|begin|>", 11, true, true, &ids, &n, &err), 0);
    ASSERT_EQ(n, 4);
    ASSERT_EQ(ids[0], 2);
    ASSERT_EQ(ids[3], 2); /* a control token, parsed as special */
    free(ids);
    rlx_tokenizer_free(t);
    /* generation_config.json: more ids ending generation; one outside the vocabulary is an error */
    write_json_file(dir, "generation_config.json", "{\"eos_token_id\":[2,1]}");
    write_json_file(dir, "tokenizer_config.json", "{}");
    ASSERT_MSG(json_tokenizer(dir, 0, &t, &err) == 0, "%s", err.msg);
    ASSERT_EQ(rlx_tokenizer_eos(t), 2);
    ASSERT(rlx_tokenizer_is_eog(t, 2) && rlx_tokenizer_is_eog(t, 1) && !rlx_tokenizer_is_eog(t, 0));
    rlx_tokenizer_free(t);
    write_json_file(dir, "generation_config.json", "{\"eos_token_id\":9}");
    ASSERT_EQ(json_tokenizer(dir, 0, &t, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "outside the vocabulary"), "%s", err.msg);
    unlink(rlx_test_tmp_path("tok_bad/generation_config.json"));
    /* ids that are not whole numbers in range */
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]},"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}");
    ASSERT_EQ(json_tokenizer(dir, 0, &t, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "'a' has no valid id"), "%s", err.msg);
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":NaN},\"merges\":[]},"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}");
    ASSERT_EQ(json_tokenizer(dir, 0, &t, &err), RLX_EFORMAT);
}

/* ---- weights ----------------------------------------------------------------------------- */

/* every tensor of the GGUF in the folder's handle: same name, shape, type and bytes */
static int same_tensors(const rlx_gguf *a, const rlx_gguf *b)
{
    if (rlx_gguf_n_tensors(a) != rlx_gguf_n_tensors(b)) {
        fprintf(stderr, "  %llu tensors vs %llu\n", (unsigned long long)rlx_gguf_n_tensors(a),
                (unsigned long long)rlx_gguf_n_tensors(b));
        return 1;
    }
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(a); i++) {
        const rlx_gguf_tensor *x = rlx_gguf_tensor_at(a, i), *y = rlx_gguf_find_tensor(b, x->name);
        if (!y) { fprintf(stderr, "  %s missing\n", x->name); return 1; }
        if (x->type != y->type || x->size != y->size || memcmp(x->ne, y->ne, sizeof x->ne) || x->n_dims != y->n_dims) {
            fprintf(stderr, "  %s: type/shape differ\n", x->name);
            return 1;
        }
        if (memcmp(x->data, y->data, (size_t)x->size)) { fprintf(stderr, "  %s: data differ\n", x->name); return 1; }
    }
    return 0;
}

static void roundtrip_path(const char *path, const char *dirname, int shards, unsigned flags)
{
    rlx_error err = {0};
    rlx_gguf *g, *h;
    ASSERT_MSG(rlx_gguf_open(&g, path, &err) == 0, "%s", err.msg);
    const char *dir = rlx_test_tmp_path(dirname);
    ASSERT_MSG(rlx_hf_export(g, dir, shards, flags, &err) == 0, "%s", err.msg);
    ASSERT(rlx_st_is_folder(dir));
    ASSERT_MSG(rlx_model_open(&h, dir, &err) == 0, "%s", err.msg);
    ASSERT_STR_EQ(rlx_gguf_path(h), dir);
    ASSERT_EQ(same_tensors(g, h), 0);
    rlx_gguf_close(h);
    rlx_gguf_close(g);
    /* the model as the engine sees it: the same hyper-parameters */
    rlx_model *ma, *mb;
    ASSERT_MSG(rlx_model_load(&ma, path, &err) == 0, "%s", err.msg);
    ASSERT_MSG(rlx_model_load(&mb, dir, &err) == 0, "%s", err.msg);
    const rlx_model_config *a = &ma->cfg, *b = &mb->cfg;
    ASSERT_STR_EQ(a->arch, b->arch);
    ASSERT_EQ(a->n_layer, b->n_layer);
    ASSERT_EQ(a->n_embd, b->n_embd);
    ASSERT_EQ(a->n_ff, b->n_ff);
    ASSERT_EQ(a->n_head, b->n_head);
    ASSERT_EQ(a->n_head_kv, b->n_head_kv);
    ASSERT_EQ(a->head_dim, b->head_dim);
    ASSERT_EQ(a->n_rot, b->n_rot);
    ASSERT_EQ(a->n_ctx_train, b->n_ctx_train);
    ASSERT_EQ(a->n_vocab, b->n_vocab);
    ASSERT(a->norm_eps == b->norm_eps);
    ASSERT(a->rope_base == b->rope_base);
    ASSERT(a->attn_scale == b->attn_scale);
    ASSERT_EQ(a->rope_mode, b->rope_mode);
    ASSERT_EQ(a->tied, b->tied);
    /* which layers slide, and by how much (a window no layer uses may be left out) */
    bool any = false;
    for (int l = 0; l < a->n_layer; l++) {
        bool sa = a->sliding_window > 0 && rlx_model_layer_swa(a, l), sb = b->sliding_window > 0 && rlx_model_layer_swa(b, l);
        ASSERT_MSG(sa == sb, "layer %d slides in one model only", l);
        any |= sa;
    }
    if (any) ASSERT_EQ(a->sliding_window, b->sliding_window);
    ASSERT(a->rope_base_swa == b->rope_base_swa && a->rope_freq_scale == b->rope_freq_scale &&
           a->rope_freq_scale_swa == b->rope_freq_scale_swa);
    ASSERT(a->attn_softcap == b->attn_softcap && a->final_softcap == b->final_softcap);
    ASSERT_EQ(a->embd_scale, b->embd_scale);
    rlx_model_free(ma);
    rlx_model_free(mb);
}

static void roundtrip(const char *model, const char *dirname, int shards)
{
    const char *path = rlx_test_shared(model);
    if (!path) SKIP("../shared/%s absent", model);
    roundtrip_path(path, dirname, shards, 0);
}

TEST(llama_roundtrip) { roundtrip("models/synth-llama-tiny-f32.gguf", "llama", 1); }
/* under valgrind (RLX_MEMCHECK) qwen2's round trip stands for it: the same 151k-token
 * tokenizer.json writer and reader (20 s there), qwen3's q/k norms only more rows of one table */
TEST(qwen3_roundtrip)
{
    if (getenv("RLX_MEMCHECK")) SKIP("under memcheck: qwen2_roundtrip runs the same paths");
    roundtrip("models/synth-qwen3-tiny-f32.gguf", "qwen3", 1);
}
TEST(qwen2_roundtrip) { roundtrip("models/synth-qwen2-tiny-f32.gguf", "qwen2", 2); } /* q/k/v biases */
TEST(gemma2_roundtrip) { roundtrip("models/synth-gemma2-tiny-f32.gguf", "gemma2", 1); } /* norms + 1, 4 norms a block */
/* Gemma 3 (rlxd-synth, the SentencePiece vocabulary of the gemma2 model): q/k norms + 1, the
 * sliding layers as a number (sliding_window_pattern), as per-layer flags (layer_types) and none
 * (pattern 1); and as a multimodal checkpoint (Gemma3ForConditionalGeneration: text_config,
 * language_model.* tensors, a vision tower that is skipped), in shards */
TEST(gemma3_roundtrip)
{
    const char *vocab = rlx_test_shared("models/synth-gemma2-tiny-f32.gguf");
    if (!vocab) SKIP("../shared/models/synth-gemma2-tiny-f32.gguf absent");
    static const struct { const char *args, *name; unsigned flags; int shards; } cases[] = {
        {"--sliding-window 8", "gemma3", 0, 1},
        {"--sliding-window 8 --swa-pattern 2", "gemma3-p2", 0, 1},
        {"--sliding-window 8 --swa-pattern 0,1", "gemma3-flags", 0, 1},
        {"--sliding-window 8 --swa-pattern 1", "gemma3-global", 0, 1},
        {"--sliding-window 0", "gemma3-nowindow", 0, 1},
        {"--sliding-window 8 --swa-pattern 0,1", "gemma3-mm", RLX_HF_EXPORT_MULTIMODAL, 2},
    };
    /* valgrind (RLX_MEMCHECK): cases 2-6 on stories260K's 512-token vocabulary (the same tokenizer.json code), 10 s less each */
    const char *small = getenv("RLX_MEMCHECK") ? rlx_test_shared("models/stories260K.gguf") : NULL;
    for (size_t i = 0; i < RLX_ARRAY_LEN(cases); i++) {
        char args[512], path[512], out[64];
        snprintf(args, sizeof args, "--arch gemma3 --preset tiny --type f32 --seed %zu --vocab-from '%s' %s", 5 + i,
                 small && i > 0 ? small : vocab, cases[i].args);
        snprintf(out, sizeof out, "%s.gguf", cases[i].name);
        if (!synth(args, out, path, sizeof path)) SKIP("rlxd-synth not built (RLX_BIN)");
        roundtrip_path(path, cases[i].name, cases[i].shards, cases[i].flags);
    }
    /* the multimodal folder: vision tensors present in the files, absent from the model */
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", rlx_test_tmp_path("gemma3-mm"));
    size_t n;
    char *text = rlx_read_file(p, &n);
    ASSERT(text && strstr(text, "Gemma3ForConditionalGeneration") && strstr(text, "\"text_config\""));
    free(text);
    rlx_error err = {0};
    rlx_gguf *h;
    ASSERT_MSG(rlx_model_open(&h, rlx_test_tmp_path("gemma3-mm"), &err) == 0, "%s", err.msg);
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(h); i++) ASSERT(!strstr(rlx_gguf_tensor_at(h, i)->name, "vision"));
    ASSERT(rlx_gguf_find_tensor(h, "blk.1.attn_q_norm.weight") != NULL);
    rlx_gguf_close(h);
}

/* Gemma 3 config.json forms and errors, on the exported folder: transformers v5's rope_parameters
 * per layer type; attention soft-capping, a query scale llama.cpp's graph does not use,
 * malformed layer_types and sliding_window_pattern 0 are refused, naming the key */
TEST(gemma3_config)
{
    const char *dir = rlx_test_tmp_path("gemma3-mm");
    if (!rlx_st_is_folder(dir)) test_gemma3_roundtrip(); /* run alone (RLX_TEST_ONLY) */
    if (!rlx_st_is_folder(dir)) SKIP("gemma3_roundtrip did not run");
    rlx_error err = {0};
    rlx_model *m;
    /* rope_parameters: the global layers' base and scaling, the sliding layers' own base */
    edit_config(dir, "rope_theta", NULL);
    edit_config(dir, "rope_local_base_freq", NULL);
    edit_config(dir, "rope_parameters", "{\"full_attention\":{\"rope_type\":\"linear\",\"factor\":8.0,\"rope_theta\":500000},"
                "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":12345}}");
    ASSERT_MSG(rlx_model_load(&m, dir, &err) == 0, "%s", err.msg);
    ASSERT(m->cfg.rope_base == 500000.0f && m->cfg.rope_freq_scale == 0.125f && m->cfg.rope_base_swa == 12345.0f);
    ASSERT(m->cfg.rope_freq_scale_swa == 1.0f);
    rlx_model_free(m);
    edit_config(dir, "rope_parameters", "{\"full_attention\":{\"rope_theta\":1e6},\"sliding_attention\":{\"rope_type\":\"linear\","
                "\"factor\":2,\"rope_theta\":1e4}}");
    ASSERT_EQ(rlx_model_load(&m, dir, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "sliding layers' RoPE"), "%s", err.msg);
    edit_config(dir, "rope_parameters", NULL);
    edit_config(dir, "rope_theta", "1000000");
    static const struct { const char *key, *json, *want; int rc; } bad[] = {
        {"attn_logit_softcapping", "50.0", "no attention soft-capping", RLX_EUNSUPPORTED},
        {"query_pre_attn_scalar", "256", "query_pre_attn_scalar 256", RLX_EUNSUPPORTED},
        {"layer_types", "[\"full_attention\"]", "one type per layer (2)", RLX_EFORMAT},
        {"layer_types", "[\"full_attention\",\"chunked_attention\"]", "layer_types[1] 'chunked_attention'", RLX_EUNSUPPORTED},
        {"sliding_window_pattern", "0", "'sliding_window_pattern' must be positive", RLX_EFORMAT},
        {"final_logit_softcapping", "\"30\"", "'final_logit_softcapping' must be", RLX_EFORMAT},
    };
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir);
    size_t n;
    char *orig = rlx_read_file(p, &n);
    ASSERT(orig);
    for (size_t i = 0; i < RLX_ARRAY_LEN(bad); i++) {
        edit_config(dir, bad[i].key, bad[i].json);
        int rc = rlx_model_load(&m, dir, &err);
        if (!rc) rlx_model_free(m);
        ASSERT_MSG(rc == bad[i].rc && strstr(err.msg, bad[i].want), "%s: rc %d, %s", bad[i].key, rc, err.msg);
        put_file(p, orig, n);
    }
    free(orig);
    ASSERT_MSG(rlx_model_load(&m, dir, &err) == 0, "%s", err.msg);
    rlx_model_free(m);
}

TEST(llama_bf16_sharded) { roundtrip("models/synth-llama-mid-bf16.gguf", "llama-bf16", 3); }
TEST(llama_f16) { roundtrip("models/synth-llama-mid-f16.gguf", "llama-f16", 1); }

/* The folder's image (what rlx_gguf_bytes covers, and session snapshots' model hash digests)
 * changes when the weights are rewritten, though config and tokenizer stay the same. */
TEST(identity)
{
    const char *dir = rlx_test_tmp_path("llama"); /* written by llama_roundtrip */
    if (!rlx_st_is_folder(dir)) SKIP("llama_roundtrip did not run");
    rlx_error err = {0};
    rlx_gguf *a, *b;
    ASSERT_MSG(rlx_st_open(&a, dir, &err) == 0, "%s", err.msg);
    rlx_gguf_str s;
    ASSERT_EQ(rlx_gguf_get_str(a, "rlxd.safetensors.files", &s, &err), 0);
    ASSERT(s.len > 18 && !memcmp(s.ptr, "model.safetensors ", 18));
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    ASSERT_EQ(utimensat(AT_FDCWD, p, ts, 0), 0);
    ASSERT_MSG(rlx_st_open(&b, dir, &err) == 0, "%s", err.msg);
    ASSERT(rlx_gguf_file_size(a) == rlx_gguf_file_size(b));
    ASSERT(memcmp(rlx_gguf_bytes(a), rlx_gguf_bytes(b), (size_t)rlx_gguf_file_size(a)) != 0);
    /* every tensor at its own place (offsets feed the hash too) */
    for (uint64_t i = 1; i < rlx_gguf_n_tensors(b); i++)
        ASSERT(rlx_gguf_tensor_at(b, i)->offset != rlx_gguf_tensor_at(b, i - 1)->offset);
    rlx_gguf_close(a);
    rlx_gguf_close(b);
}

TEST(errors)
{
    const char *path = rlx_test_shared("models/synth-llama-tiny-f32.gguf");
    if (!path) SKIP("../shared/models/synth-llama-tiny-f32.gguf absent");
    rlx_error err = {0};
    rlx_gguf *g, *h;
    ASSERT_MSG(rlx_gguf_open(&g, path, &err) == 0, "%s", err.msg);
    const char *dir = rlx_test_tmp_path("err");
    ASSERT_MSG(rlx_hf_export(g, dir, 3, 0, &err) == 0, "%s", err.msg);
    rlx_gguf_close(g);
    /* a missing shard: named, with the count */
    char p[512], q[512];
    snprintf(p, sizeof p, "%s/model-00002-of-00003.safetensors", dir);
    snprintf(q, sizeof q, "%s/away", dir);
    ASSERT_EQ(rename(p, q), 0);
    ASSERT_EQ(rlx_model_open(&h, dir, &err), RLX_ENOTFOUND);
    ASSERT_MSG(strstr(err.msg, "1 of the 3 shards") && strstr(err.msg, "model-00002-of-00003.safetensors"), "%s", err.msg);
    /* a truncated shard: its header runs past the end */
    put_file(p, "\xff\xff\x00\x00\x00\x00\x00\x00{", 9);
    ASSERT_EQ(rlx_model_open(&h, dir, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "runs past the end"), "%s", err.msg);
    /* a tensor of a dtype rlxd does not read */
    static const char i64[] = "{\"model.norm.weight\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
    char buf[256];
    uint64_t hl = sizeof i64 - 1;
    memcpy(buf, &hl, 8);
    memcpy(buf + 8, i64, hl);
    memset(buf + 8 + hl, 0, 8);
    put_file(p, buf, 8 + hl + 8);
    ASSERT_EQ(rlx_model_open(&h, dir, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "dtype I64"), "%s", err.msg);
    /* a shape whose element count wraps 2^64 back to the data's real size (16777344 x
       1099503239232 elements = 8192 mod 2^64, 32768 bytes of F32): refused before the product
       wraps (it passed the offsets check, and later products overflowed: UBSan) */
    static const char wrap[] = "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[16777344,1099503239232],"
                               "\"data_offsets\":[0,32768]}}";
    static char wbuf[8 + 256 + 32768];
    hl = sizeof wrap - 1;
    memcpy(wbuf, &hl, 8);
    memcpy(wbuf + 8, wrap, hl);
    put_file(p, wbuf, 8 + hl + 32768);
    ASSERT_EQ(rlx_model_open(&h, dir, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "too large"), "%s", err.msg);
    ASSERT_EQ(rename(q, p), 0);
    ASSERT_MSG(rlx_model_open(&h, dir, &err) == 0, "%s", err.msg);
    rlx_gguf_close(h);
    /* values no model has: named as config.json names them (before: 'llama.context_length' is
       missing, and a size past 2^31 'must be a non-negative integer') */
    edit_config(dir, "max_position_embeddings", "0");
    ASSERT_EQ(rlx_model_open(&h, dir, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "config.json: 'max_position_embeddings' is 0"), "%s", err.msg);
    edit_config(dir, "max_position_embeddings", "2048");
    edit_config(dir, "hidden_size", "1099511627776");
    ASSERT_EQ(rlx_model_open(&h, dir, &err), RLX_EFORMAT);
    ASSERT_MSG(strstr(err.msg, "'hidden_size' is 1099511627776, past the largest"), "%s", err.msg);
    edit_config(dir, "hidden_size", "64");
    /* an architecture without a mapping: named */
    edit_config(dir, "architectures", "[\"MambaForCausalLM\"]");
    ASSERT_EQ(rlx_model_open(&h, dir, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "'MambaForCausalLM'") && strstr(err.msg, "Qwen3ForCausalLM"), "%s", err.msg);
    /* a folder without config.json is not a model folder */
    const char *empty = rlx_test_tmp_path("empty");
    mkdir(empty, 0755);
    ASSERT(!rlx_st_is_folder(empty));
    ASSERT_NE(rlx_model_open(&h, empty, &err), 0);
    ASSERT_MSG(strstr(err.msg, "without config.json"), "%s", err.msg);
    /* a path too long to join with a file name is refused, never cut short to another name */
    static char longdir[4200];
    memset(longdir, 'd', sizeof longdir - 1);
    for (size_t k = 4090; k < sizeof longdir - 1; k++) {
        longdir[k] = 0;
        ASSERT_EQ(rlx_st_open(&h, longdir, &err), RLX_EINVAL);
        ASSERT_MSG(strstr(err.msg, "path longer than 4095 bytes"), "%zu: %s", k, err.msg);
        longdir[k] = 'd';
    }
}

/* Hand-written weights: Llama's q rows interleaved per head as llama.cpp's converter does, k with
 * the KV heads, and F16/BF16 vectors widened to F32. */
TEST(permute_and_vectors)
{
    const char *dir = rlx_test_tmp_path("hand");
    mkdir(dir, 0755);
    write_json_file(dir, "config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":8,"
                    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"rms_norm_eps\":1e-6}");
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]},"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}");
    /* q: 8 rows (2 heads x 4) of 8 F32 values, row r all r; k: 4 rows F16; norm: 8 BF16; embd 2 x 8 */
    float q[64], e[16];
    uint16_t k[32], nb[8], nh[8];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++) q[r * 8 + c] = (float)r;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 8; c++) k[r * 8 + c] = rlx_f32_to_f16((float)(10 + r));
    for (int i = 0; i < 8; i++) nb[i] = rlx_f32_to_bf16(0.5f + (float)i), nh[i] = rlx_f32_to_f16(-1.0f - (float)i);
    for (int i = 0; i < 16; i++) e[i] = (float)i;
    const char *hdr = "{\"model.layers.0.self_attn.q_proj.weight\":{\"dtype\":\"F32\",\"shape\":[8,8],\"data_offsets\":[0,256]},"
                      "\"model.layers.0.self_attn.k_proj.weight\":{\"dtype\":\"F16\",\"shape\":[4,8],\"data_offsets\":[256,320]},"
                      "\"model.norm.weight\":{\"dtype\":\"BF16\",\"shape\":[8],\"data_offsets\":[320,336]},"
                      "\"model.layers.0.input_layernorm.weight\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[336,352]},"
                      "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[2,8],\"data_offsets\":[352,416]},"
                      "\"model.layers.0.self_attn.rotary_emb.inv_freq\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[416,424]},"
                      "\"__metadata__\":{\"format\":\"pt\"}} "; /* odd length: the data is unaligned */
    uint64_t hl = strlen(hdr);
    size_t n = 8 + hl + 424;
    uint8_t *b = calloc(1, n);
    memcpy(b, &hl, 8);
    memcpy(b + 8, hdr, hl);
    uint8_t *d = b + 8 + hl;
    memcpy(d, q, 256);
    memcpy(d + 256, k, 64);
    memcpy(d + 320, nb, 16);
    memcpy(d + 336, nh, 16);
    memcpy(d + 352, e, 64);
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    put_file(p, b, n);
    free(b);
    rlx_error err = {0};
    rlx_gguf *g;
    ASSERT_MSG(rlx_st_open(&g, dir, &err) == 0, "%s", err.msg);
    ASSERT(!rlx_gguf_find_tensor(g, "blk.0.rotary_emb.inv_freq")); /* skipped, as llama.cpp skips it */
    ASSERT_EQ(rlx_gguf_n_tensors(g), 5);
    const rlx_gguf_tensor *tq = rlx_gguf_find_tensor(g, "blk.0.attn_q.weight");
    ASSERT(tq && tq->type == RLX_F32 && tq->ne[0] == 8 && tq->ne[1] == 8);
    /* head of 4 rows [0 1 | 2 3] -> [0 2 1 3]; second head [4 5 | 6 7] -> [4 6 5 7] */
    static const int want_q[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (int r = 0; r < 8; r++) ASSERT_EQ(((const float *)tq->data)[r * 8 + 3], want_q[r]);
    const rlx_gguf_tensor *tk = rlx_gguf_find_tensor(g, "blk.0.attn_k.weight");
    ASSERT(tk && tk->type == RLX_F16 && tk->ne[1] == 4);
    static const int want_k[4] = {10, 12, 11, 13};
    for (int r = 0; r < 4; r++) ASSERT_EQ(rlx_f16_to_f32(((const uint16_t *)tk->data)[r * 8]), want_k[r]);
    const rlx_gguf_tensor *tn = rlx_gguf_find_tensor(g, "output_norm.weight");
    ASSERT(tn && tn->type == RLX_F32 && tn->size == 32);
    for (int i = 0; i < 8; i++) ASSERT(((const float *)tn->data)[i] == 0.5f + (float)i);
    const rlx_gguf_tensor *ta = rlx_gguf_find_tensor(g, "blk.0.attn_norm.weight");
    ASSERT(ta && ta->type == RLX_F32);
    for (int i = 0; i < 8; i++) ASSERT(((const float *)ta->data)[i] == -1.0f - (float)i);
    /* the embedding starts 352 bytes after a header of odd length: copied to an aligned place */
    ASSERT(hl % 4 != 0);
    const rlx_gguf_tensor *te = rlx_gguf_find_tensor(g, "token_embd.weight");
    ASSERT(te && te->type == RLX_F32 && te->ne[0] == 8 && te->ne[1] == 2 && (uintptr_t)te->data % 4 == 0);
    for (int i = 0; i < 16; i++) ASSERT(((const float *)te->data)[i] == (float)i);
    float eps;
    ASSERT_EQ(rlx_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps, &err), 0);
    ASSERT(eps == 1e-6f);
    uint32_t u;
    ASSERT_EQ(rlx_gguf_get_u32(g, "llama.attention.head_count_kv", &u, &err), 0);
    ASSERT_EQ(u, 1);
    rlx_gguf_close(g);
    /* an unmapped tensor name is an error naming it */
    const char *bad = "{\"model.layers.0.mystery.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    hl = strlen(bad);
    uint8_t b2[256] = {0};
    memcpy(b2, &hl, 8);
    memcpy(b2 + 8, bad, hl);
    put_file(p, b2, 8 + hl + 8);
    ASSERT_EQ(rlx_st_open(&g, dir, &err), RLX_EUNSUPPORTED);
    ASSERT_MSG(strstr(err.msg, "model.layers.0.mystery.weight"), "%s", err.msg);
}

/* Gemma's + 1 happens in the checkpoint's type, as torch adds it in the converter: a BF16 norm of
 * 2^-8 gives 1 + 2^-8, a tie between two BF16 values, rounded to even (1.0); F32 keeps it. */
TEST(gemma_norm_type)
{
    const char *dir = rlx_test_tmp_path("gemma_hand");
    mkdir(dir, 0755);
    write_json_file(dir, "config.json", "{\"architectures\":[\"Gemma2ForCausalLM\"],\"hidden_size\":2,\"intermediate_size\":2,"
                    "\"num_hidden_layers\":1,\"num_attention_heads\":1,\"head_dim\":2,\"sliding_window\":8,"
                    "\"attn_logit_softcapping\":null,\"final_logit_softcapping\":30.0}");
    write_json_file(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]},"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}");
    const char *hdr = "{\"model.norm.weight\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                      "\"model.layers.0.post_feedforward_layernorm.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
                      "\"lm_head.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[12,28]}}";
    uint64_t hl = strlen(hdr);
    uint8_t b[512] = {0};
    memcpy(b, &hl, 8);
    memcpy(b + 8, hdr, hl);
    uint16_t bf[2] = {rlx_f32_to_bf16(0x1p-8f), rlx_f32_to_bf16(0.5f)};
    float f[2] = {0x1p-8f, -0.25f};
    memcpy(b + 8 + hl, bf, 4);
    memcpy(b + 8 + hl + 4, f, 8);
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    put_file(p, b, 8 + hl + 28);
    rlx_error err = {0};
    rlx_gguf *g;
    ASSERT_MSG(rlx_st_open(&g, dir, &err) == 0, "%s", err.msg);
    const rlx_gguf_tensor *on = rlx_gguf_find_tensor(g, "output_norm.weight"), *pf = rlx_gguf_find_tensor(g, "blk.0.post_ffw_norm.weight");
    ASSERT(on && on->type == RLX_F32 && pf && pf->type == RLX_F32);
    ASSERT(((const float *)on->data)[0] == 1.0f && ((const float *)on->data)[1] == 1.5f);
    ASSERT(((const float *)pf->data)[0] == 1.0f + 0x1p-8f && ((const float *)pf->data)[1] == 0.75f);
    ASSERT(!rlx_gguf_find_tensor(g, "output.weight")); /* Gemma ties, as llama.cpp ignores lm_head */
    uint32_t sw;
    float cap;
    ASSERT_EQ(rlx_gguf_get_u32(g, "gemma2.attention.sliding_window", &sw, &err), 0);
    ASSERT_EQ(sw, 8);
    ASSERT_EQ(rlx_gguf_get_f32(g, "gemma2.attn_logit_softcapping", &cap, &err), RLX_ENOTFOUND);
    ASSERT_EQ(rlx_gguf_get_f32(g, "gemma2.final_logit_softcapping", &cap, &err), 0);
    ASSERT(cap == 30.0f);
    rlx_gguf_close(g);
}

/* Corrupt headers of a valid single-file folder (every truncation, and each header byte replaced
 * by a few troublemakers) never crash the loader; what opens holds tensors inside the file. */
TEST(corrupt_headers)
{
    char src[512], dir[512]; /* copies: tmp_path's buffers are a ring */
    snprintf(src, sizeof src, "%s", rlx_test_tmp_path("gemma_hand/model.safetensors")); /* written by gemma_norm_type */
    snprintf(dir, sizeof dir, "%s", rlx_test_tmp_path("gemma_hand"));
    if (!rlx_st_is_folder(dir)) test_gemma_norm_type(); /* run alone (RLX_TEST_ONLY) */
    size_t n;
    char *orig = rlx_read_file(src, &n);
    if (!orig) SKIP("gemma_norm_type did not run");
    uint64_t hl;
    memcpy(&hl, orig, 8);
    ASSERT(hl + 8 <= n);
    rlx_error err = {0};
    rlx_gguf *g;
    char *buf = malloc(n);
    int opened = 0, refused = 0;
    static const char subs[] = {'9', '"', '}', '-', 'e', 0};
    for (size_t cut = 0; cut < n; cut++) { /* truncations */
        put_file(src, orig, cut);
        if (rlx_st_open(&g, dir, &err) == 0) { opened++; rlx_gguf_close(g); }
        else refused++;
    }
    for (size_t i = 0; i < 8 + hl; i++)
        for (size_t k = 0; k < sizeof subs; k++) {
            memcpy(buf, orig, n);
            if (buf[i] == subs[k]) continue;
            buf[i] = subs[k];
            put_file(src, buf, n);
            if (rlx_st_open(&g, dir, &err) != 0) { refused++; continue; }
            opened++;
            for (uint64_t t = 0; t < rlx_gguf_n_tensors(g); t++) {
                const rlx_gguf_tensor *x = rlx_gguf_tensor_at(g, t);
                volatile uint8_t sink = 0;
                for (uint64_t j = 0; j < x->size; j++) sink ^= ((const uint8_t *)x->data)[j]; /* readable */
                (void)sink;
            }
            rlx_gguf_close(g);
        }
    put_file(src, orig, n);
    ASSERT_MSG(rlx_st_open(&g, dir, &err) == 0, "%s", err.msg);
    rlx_gguf_close(g);
    fprintf(stderr, "  %d corrupt variants refused, %d still valid\n", refused, opened);
    ASSERT(refused > (int)n);
    free(buf);
    free(orig);
}

TEST_MAIN(TEST_ENTRY(tok_llama_spm), TEST_ENTRY(tok_phi_3), TEST_ENTRY(tok_baichuan), TEST_ENTRY(tok_qwen2),
          TEST_ENTRY(tok_gpt_2), TEST_ENTRY(tok_mpt), TEST_ENTRY(tok_starcoder), TEST_ENTRY(tok_refact),
          TEST_ENTRY(tok_unsupported), TEST_ENTRY(llama_roundtrip), TEST_ENTRY(qwen3_roundtrip), TEST_ENTRY(qwen2_roundtrip), TEST_ENTRY(gemma2_roundtrip),
          TEST_ENTRY(gemma3_roundtrip), TEST_ENTRY(gemma3_config),
          TEST_ENTRY(identity), TEST_ENTRY(llama_bf16_sharded), TEST_ENTRY(llama_f16), TEST_ENTRY(errors), TEST_ENTRY(permute_and_vectors),
          TEST_ENTRY(gemma_norm_type), TEST_ENTRY(corrupt_headers))
