/* test_tokenizer_golden.c - agreement with llama.cpp's own token pieces and prompts recorded
 * in ../shared/golden: every prompt and greedy token's piece (special = true) byte for byte,
 * greedy_is_eog against rlx_tokenizer_is_eog, and the text prompts re-tokenized to the same
 * ids (add_special = true). The synthetic models use the reference vocabularies of
 * ../shared/vocab, so those stand in for the model files. */
#include "tests/unit/test_tokenizer_vocab.h"

#include <cjson/cJSON.h>

typedef struct golden_case {
    const char *golden; /* under golden/ */
    const char *vocab;  /* path under ../shared holding the vocabulary */
    bool retokenize;    /* P1, P2, P4 are cut from tokenized text */
} golden_case;

static int hexbyte(const char *h)
{
    int v = 0;
    for (int i = 0; i < 2; i++) {
        char c = h[i];
        v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10);
    }
    return v;
}

/* Compares the bytes of each id with the hex strings; returns mismatches. */
static int check_pieces(const rlx_tokenizer *t, const cJSON *ids, const cJSON *hex, const char *what)
{
    int bad = 0, i = 0;
    const cJSON *id, *hx;
    if (cJSON_GetArraySize(ids) != cJSON_GetArraySize(hex)) return 1;
    for (id = ids->child, hx = hex->child; id && hx; id = id->next, hx = hx->next, i++) {
        char want[256], got[256];
        size_t wn = strlen(hx->valuestring) / 2;
        for (size_t k = 0; k < wn && k < sizeof want; k++) want[k] = (char)hexbyte(hx->valuestring + 2 * k);
        size_t gn = rlx_token_to_bytes(t, (int32_t)id->valuedouble, true, got, sizeof got);
        if (gn != wn || memcmp(got, want, wn) != 0) {
            if (bad++ < 5)
                fprintf(stderr, "  %s token %d (id %d): got %zu bytes \"%.*s\", want \"%s\"\n", what, i,
                        (int)id->valuedouble, gn, (int)RLX_MIN(gn, sizeof got), got, hx->valuestring);
        }
    }
    return bad;
}

static int check_golden(const golden_case *gc)
{
    char rel[256];
    snprintf(rel, sizeof rel, "golden/%s", gc->golden);
    const char *gpath = rlx_test_shared(rel);
    const char *vpath = rlx_test_shared(gc->vocab);
    if (!gpath || !vpath) return 77;
    size_t len;
    char *json = rlx_read_file(gpath, &len);
    cJSON *root = json ? cJSON_ParseWithLength(json, len) : NULL;
    free(json);
    if (!root) { fprintf(stderr, "  %s: unreadable JSON\n", gpath); return 1; }
    rlx_gguf *g = NULL;
    rlx_tokenizer *t = NULL;
    rlx_error err = {0};
    int bad = 0, n_tok = 0, n_prompts = 0;
    if (rlx_gguf_open(&g, vpath, &err) || rlx_tokenizer_from_gguf(&t, g, &err)) {
        fprintf(stderr, "  %s: %s\n", vpath, err.msg);
        bad = 1;
    }
    const cJSON *prompts = cJSON_GetObjectItem(root, "prompts"), *p;
    int pi = 0;
    for (p = prompts ? prompts->child : NULL; p && !bad; p = p->next, pi++) {
        const cJSON *toks = cJSON_GetObjectItem(p, "tokens"), *greedy = cJSON_GetObjectItem(p, "greedy");
        const cJSON *eog = cJSON_GetObjectItem(p, "greedy_is_eog");
        bad += check_pieces(t, toks, cJSON_GetObjectItem(p, "pieces_hex"), "prompt");
        bad += check_pieces(t, greedy, cJSON_GetObjectItem(p, "greedy_pieces_hex"), "greedy");
        n_tok += cJSON_GetArraySize(toks) + cJSON_GetArraySize(greedy);
        const cJSON *id, *e;
        for (id = greedy->child, e = eog ? eog->child : NULL; id && e; id = id->next, e = e->next)
            if (rlx_tokenizer_is_eog(t, (int32_t)id->valuedouble) != cJSON_IsTrue(e)) {
                fprintf(stderr, "  greedy id %d: is_eog disagrees\n", (int)id->valuedouble);
                bad++;
            }
        if (!gc->retokenize || pi == 2) continue; /* P3 is random ids, not text */
        /* Text of the prompt = its pieces without a leading BOS (and SentencePiece's prefix space). */
        char text[4096];
        size_t tl = 0;
        bool first = true;
        for (id = toks->child; id; id = id->next) {
            int32_t v = (int32_t)id->valuedouble;
            if (v == rlx_tokenizer_bos(t) && first && rlx_tokenizer_add_bos(t)) continue;
            size_t k = rlx_token_to_bytes(t, v, false, text + tl, sizeof text - tl - 1);
            if (first && k && text[tl] == ' ' && rlx_tokenizer_add_bos(t)) { memmove(text + tl, text + tl + 1, --k); }
            first = false;
            tl += k;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        if (rlx_tokenize(t, text, tl, true, false, &ids, &n, &err)) { bad++; continue; }
        bool same = (int)n == cJSON_GetArraySize(toks);
        size_t k = 0;
        for (id = toks->child; same && id; id = id->next, k++) same = ids[k] == (int32_t)id->valuedouble;
        if (!same) {
            fprintf(stderr, "  prompt %d \"%.40s\" re-tokenizes differently (%zu ids)\n", pi + 1, text, n);
            bad++;
        }
        n_prompts++;
        free(ids);
    }
    fprintf(stderr, "  %-36s %d token pieces, %d text prompts: %s\n", gc->golden, n_tok, n_prompts, bad ? "MISMATCH" : "exact");
    rlx_tokenizer_free(t);
    if (g) rlx_gguf_close(g);
    cJSON_Delete(root);
    return bad ? 1 : 0;
}

#define GOLDEN_TEST(name, golden, vocab, retok)                                   \
    TEST(name)                                                                    \
    {                                                                             \
        static const golden_case gc = {golden, vocab, retok};                     \
        int rc = check_golden(&gc);                                               \
        if (rc == 77) SKIP("../shared/golden/%s or %s absent", golden, vocab);   \
        ASSERT_MSG(rc == 0, "%s: pieces or prompts differ from llama.cpp", golden); \
    }

GOLDEN_TEST(stories260k, "golden-stories260K.json", "models/stories260K.gguf", true)
GOLDEN_TEST(synth_llama, "golden-synth-llama-tiny-f32.json", "vocab/ggml-vocab-llama-spm.gguf", true)
GOLDEN_TEST(synth_gemma2, "golden-synth-gemma2-tiny-f32.json", "vocab/ggml-vocab-llama-spm.gguf", true)
GOLDEN_TEST(synth_qwen2, "golden-synth-qwen2-tiny-f32.json", "vocab/ggml-vocab-qwen2-reconstructed.gguf", true)
GOLDEN_TEST(synth_qwen3, "golden-synth-qwen3-tiny-f32.json", "vocab/ggml-vocab-qwen2-reconstructed.gguf", true)

TEST_MAIN(TEST_ENTRY(stories260k), TEST_ENTRY(synth_llama), TEST_ENTRY(synth_gemma2), TEST_ENTRY(synth_qwen2),
          TEST_ENTRY(synth_qwen3))
