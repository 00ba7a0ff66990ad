/* test_tokenizer_pre.c - llama.cpp's tokenization where it departs from the tokenizer.json
 * originals: its pre-tokenizer regexes (gpt-4o and tekken see letters case-blind outside ASCII,
 * so combining marks split words; qwen35 keeps marks; kimi-k2's hand-written splitter), the
 * pre-tokenizers added to it later, gemma4's SentencePiece-style BPE, and WordPiece's per-code-
 * point normalisation. Expected ids are llama.cpp's (node-llama-cpp 3.22.1, vocabOnly) on the
 * Qwen2 vocabulary of ../shared/vocab relabelled with each tokenizer.ggml.pre, and on bert-bge. */
#include "tests/unit/test_tokenizer_vocab.h"

#include <unistd.h>

static const char *const pre_texts[] = {"ไม่ใช่ I'LL be 1234567 中文English混合カタカナ", "Hello  world\n\n  xé́ don't 12 345", "a-b 'S 'Re 9999 一二三abcあ"};
static const struct { const char *pre; int32_t ids[3][32]; size_t n[3]; } pre_cases[] = {
    {"gpt-4o", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"tekken", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"glm4", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"qwen35", {{130799, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {21, 17, 16}},
    {"kimi-k2", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 220, 104811, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"seed-coder", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"superbpe", {{130799, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 256, 14615, 271, 256, 87, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {21, 17, 16}},
    {"grok-2", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"bailingmoe", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"minimax-m2", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"afmoe", {{49756, 26283, 18625, 69867, 48120, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 220, 104811, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {26, 17, 16}},
    {"tiny_aya", {{130799, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {21, 17, 16}},
    {"youtu", {{130799, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 220, 104811, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {21, 17, 16}},
    {"jais-2", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"minicpm5", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 17, 16}},
    {"chameleon", {{86032, 18625, 124207, 18625, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 256, 14615, 198, 198, 256, 87, 963, 53839, 1513, 6, 83, 220, 16, 17, 220, 18, 19, 20}, {64, 12, 65, 220, 6, 50, 220, 6, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {24, 19, 19}},
    {"exaone-moe", {{130799, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 72858, 16744, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 271, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {21, 17, 16}},
    {"spark2_5", {{130799, 358, 6, 4086, 387, 220, 16, 17, 18, 19, 20, 21, 22, 220, 104811, 22574, 105063, 70393, 46207, 70393, 95352}, {9707, 220, 1879, 198, 198, 220, 856, 963, 53839, 1513, 944, 220, 16, 17, 220, 18, 19, 20}, {64, 1455, 364, 50, 364, 693, 220, 24, 24, 24, 24, 220, 112190, 44991, 13683, 29491}}, {21, 18, 16}},
    {"gemma4", {{40, 6, 4086, 1371, 16, 17, 18, 19, 20, 21, 22, 22574}, {9707, 14615, 87, 165, 15007, 944, 16, 17, 18, 19, 20}, {64, 1455, 13272, 49427, 24, 24, 24, 24, 13683}}, {12, 11, 9}},
};
static const struct { const char *text; int32_t ids[8]; size_t n; } bert_cases[] = {
    {"강", {1455}, 1},
    {"कि", {1315}, 1},
    {"a⃝", {1037}, 1},
    {"a๮b", {100}, 1},
    {"a\x0b""b c\xc2\x85""d", {1037, 1038, 1039, 1040}, 4},
    {"한국어 텍스트", {1469, 29991, 29999, 1467, 29997, 30003}, 6},
};

/* The Qwen2 vocabulary with another tokenizer.ggml.pre (and tokenizer.ggml.model, if given),
 * written to a temporary file and loaded. 0 ok, 77 vocabulary absent, 1 error. */
static int open_relabelled(const char *pre, const char *model, tv_vocab *out)
{
    tv_vocab base;
    int rc = tv_open(&base, "qwen2-reconstructed");
    if (rc) return rc;
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    rlx_error err = {0};
    for (uint64_t i = 0; w && i < rlx_gguf_n_kv(base.g) && !rc; i++) rc = rlx_gguf_writer_copy_kv(w, rlx_gguf_kv_at(base.g, i));
    if (!rc && w) rc = rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre, strlen(pre));
    if (!rc && w && model) rc = rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", model, strlen(model));
    char path[] = "/tmp/rlx-test-pre-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    if (!w || fd < 0 || rc || rlx_gguf_writer_write(w, path, &err)) {
        fprintf(stderr, "  cannot write the relabelled vocabulary: %s\n", err.msg);
        rc = 1;
    }
    rlx_gguf_writer_free(w);
    tv_close(&base);
    out->g = NULL;
    out->t = NULL;
    if (!rc && (rlx_gguf_open(&out->g, path, &err) || rlx_tokenizer_from_gguf(&out->t, out->g, &err))) {
        fprintf(stderr, "  %s: %s\n", pre, err.msg);
        rc = 1;
    }
    unlink(path);
    return rc;
}

static int check_ids(const rlx_tokenizer *t, const char *what, const char *text, const int32_t *want, size_t n_want)
{
    int32_t *ids = NULL;
    size_t n = 0;
    rlx_error err = {0};
    int rc = rlx_tokenize(t, text, strlen(text), false, false, &ids, &n, &err);
    int bad = rc || n != n_want || (n && memcmp(ids, want, n * sizeof *ids));
    if (bad) {
        fprintf(stderr, "  %s \"%.40s\": got", what, text);
        for (size_t i = 0; i < n && i < 32; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, " (%s)\n", rc ? err.msg : "ids differ");
    }
    free(ids);
    return bad;
}

TEST(pre_tokenizers)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof pre_cases / sizeof pre_cases[0]; i++) {
        /* under valgrind (RLX_MEMCHECK), where loading the 151k-token vocabulary takes seconds,
         * only the pre-tokenizers whose expected ids differ from every earlier one's */
        bool seen = false;
        for (size_t j = 0; j < i && getenv("RLX_MEMCHECK"); j++)
            seen |= !memcmp(pre_cases[j].ids, pre_cases[i].ids, sizeof pre_cases[i].ids) &&
                    !memcmp(pre_cases[j].n, pre_cases[i].n, sizeof pre_cases[i].n);
        if (seen) continue;
        tv_vocab v;
        int rc = open_relabelled(pre_cases[i].pre, NULL, &v);
        if (rc == 77) SKIP("../shared/vocab/ggml-vocab-qwen2-reconstructed.gguf absent");
        ASSERT_MSG(rc == 0, "pre-tokenizer %s does not load", pre_cases[i].pre);
        for (size_t k = 0; k < 3; k++) bad += check_ids(v.t, pre_cases[i].pre, pre_texts[k], pre_cases[i].ids[k], pre_cases[i].n[k]);
        tv_close(&v);
    }
    ASSERT_EQ(bad, 0);
}

/* afmoe's CJK class starts at U+8C48 in llama.cpp, so Yi syllables fall in it and split off the
 * space before them; qwen2 keeps " ꏕ" together */
TEST(afmoe_cjk_class)
{
    static const int32_t afmoe[] = {220, 166, 237, 243}, qwen2[] = {8620, 237, 243};
    tv_vocab v;
    int rc = open_relabelled("afmoe", NULL, &v);
    if (rc == 77) SKIP("../shared/vocab/ggml-vocab-qwen2-reconstructed.gguf absent");
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(check_ids(v.t, "afmoe", " \xea\x8f\x95", afmoe, 4), 0);
    tv_close(&v);
    ASSERT_EQ(open_relabelled("qwen2", NULL, &v), 0);
    ASSERT_EQ(check_ids(v.t, "qwen2", " \xea\x8f\x95", qwen2, 3), 0);
    tv_close(&v);
}

/* tokenizer.ggml.model "gemma4": the same BPE as pre "gemma4", with BOS forced on and decoding
 * that turns U+2581 back into spaces */
TEST(gemma4_model)
{
    tv_vocab v;
    int rc = open_relabelled("qwen2", "gemma4", &v);
    if (rc == 77) SKIP("../shared/vocab/ggml-vocab-qwen2-reconstructed.gguf absent");
    ASSERT_EQ(rc, 0);
    const size_t g = sizeof pre_cases / sizeof pre_cases[0] - 1;
    ASSERT_STR_EQ(pre_cases[g].pre, "gemma4");
    for (size_t k = 0; k < 3; k++) ASSERT_EQ(check_ids(v.t, "gemma4 model", pre_texts[k], pre_cases[g].ids[k], pre_cases[g].n[k]), 0);
    ASSERT(rlx_tokenizer_add_bos(v.t) || rlx_tokenizer_bos(v.t) < 0);
    /* pieces are raw UTF-8 here: "Ġworld" stays as it is (llama.cpp's token_to_piece) */
    const int32_t ids[] = {9707, 1879, 220};
    char *text = rlx_detokenize(v.t, ids, 3, false);
    ASSERT_STR_EQ(text, "Hello\xc4\xa0world\xc4\xa0");
    free(text);
    tv_close(&v);
}

/* pre-tokenizers not supported (llama.cpp's "whitespace", which needs its own session) or
 * unknown fail at load, naming the key */
TEST(unknown_pre_rejected)
{
    tv_vocab v;
    int rc = open_relabelled("whitespace", NULL, &v);
    if (rc == 77) SKIP("../shared/vocab/ggml-vocab-qwen2-reconstructed.gguf absent");
    ASSERT_EQ(rc, 1);
    tv_close(&v);
}

TEST(wordpiece_normalisation)
{
    tv_vocab v;
    int rc = tv_open(&v, "bert-bge");
    if (rc == 77) SKIP("../shared/vocab/ggml-vocab-bert-bge.gguf absent");
    ASSERT_EQ(rc, 0);
    int bad = 0;
    for (size_t i = 0; i < sizeof bert_cases / sizeof bert_cases[0]; i++)
        bad += check_ids(v.t, "bert-bge", bert_cases[i].text, bert_cases[i].ids, bert_cases[i].n);
    tv_close(&v);
    ASSERT_EQ(bad, 0);
}

/* A word of any length is cut into pieces: llama.cpp has no cap (HF's BertTokenizer makes a word
 * over 100 characters [UNK]; this tokenizer once did too). The pieces spell the word again, and a
 * long word that cannot be matched is still one [UNK]. */
TEST(wordpiece_long_words)
{
    tv_vocab v;
    int rc = tv_open(&v, "bert-bge");
    if (rc == 77) SKIP("../shared/vocab/ggml-vocab-bert-bge.gguf absent");
    ASSERT_EQ(rc, 0);
    static const char *words[] = {"internationalization", "abc", "x", "0123456789"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        char text[1200] = "";
        while (strlen(text) + strlen(words[w]) < 1000) strcat(text, words[w]);
        int32_t *ids = NULL;
        size_t n = 0;
        rlx_error err = {0};
        ASSERT_EQ(rlx_tokenize(v.t, text, strlen(text), false, false, &ids, &n, &err), 0);
        ASSERT_MSG(n > 1, "a %zu-char word of \"%s\" gave %zu token(s)", strlen(text), words[w], n);
        char spelled[1400] = "";
        for (size_t i = 0; i < n; i++) {
            const char *piece = rlx_tokenizer_piece(v.t, ids[i]);
            ASSERT(piece);
            if (i == 0 && !strncmp(piece, "\xe2\x96\x81", 3)) piece += 3; /* the word-initial marker */
            ASSERT(strlen(spelled) + strlen(piece) < sizeof spelled);
            strcat(spelled, piece);
        }
        ASSERT_STR_EQ(spelled, text);
        free(ids);
    }
    /* 150 characters with one that no piece covers: the whole word is [UNK] */
    char text[200] = "";
    for (int i = 0; i < 150; i++) strcat(text, i == 75 ? "\xe0\xb9\xae" : "a");
    bool bad = check_ids(v.t, "bert-bge", text, (const int32_t[]){100}, 1);
    tv_close(&v);
    ASSERT(!bad);
}

/* The same words as llama.cpp c9ced49's llama-tokenize gives them (bert-bge, with [CLS] and
 * [SEP]): 120 chars of "internationalization", 150 of "abc", and 150 with an unmatched
 * character in the middle. */
static const int32_t long_words_ids[] = {101, 2248, 3989, 18447, 11795, 3370, 11475, 9276, 18447, 11795, 3370, 11475, 9276, 18447, 11795, 3370, 11475, 9276, 18447, 11795, 3370, 11475, 9276, 18447, 11795, 3370, 11475, 9276, 5925, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 3540, 9818, 7875, 2278, 100, 102};

TEST(wordpiece_long_words_as_llama_cpp)
{
    tv_vocab v;
    int rc = tv_open(&v, "bert-bge");
    if (rc == 77) SKIP("../shared/vocab/ggml-vocab-bert-bge.gguf absent");
    ASSERT_EQ(rc, 0);
    char text[600] = "";
    for (int i = 0; i < 6; i++) strcat(text, "internationalization");
    strcat(text, " ");
    for (int i = 0; i < 50; i++) strcat(text, "abc");
    strcat(text, " x");
    for (int i = 0; i < 150; i++) strcat(text, i == 75 ? "\xe0\xb8\xae" : "a");
    int32_t *ids = NULL;
    size_t n = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_tokenize(v.t, text, strlen(text), true, false, &ids, &n, &err), 0);
    ASSERT_EQ(n, sizeof long_words_ids / sizeof long_words_ids[0]);
    ASSERT(!memcmp(ids, long_words_ids, sizeof long_words_ids));
    free(ids);
    tv_close(&v);
}

/* The regexes see characters as llama.cpp's Unicode 15.1 tables do (tok_ucd.c): CJK extension H
 * (15.0) and I (15.1) are letters, so "'s" after them stays a contraction (PCRE2's Unicode 14
 * read them as unassigned and its [^\s\p{L}\p{N}]+ took the "'"); Kawi (15.0) too; U+180E is no
 * whitespace (PCRE2's \s held it). Expected ids: llama-server (llama.cpp b10470) on
 * ../shared/models/synth-qwen2-tiny-f32.gguf, whose vocabulary this is. */
TEST(unicode_15_classes)
{
    static const struct { const char *text; int32_t ids[16]; size_t n; } cases[] = {
        {"\xf0\xb1\x8d\x90\xf0\xb1\x8d\x90's", {172, 109, 235, 238, 172, 109, 235, 238, 594}, 9},     /* U+31350 x2 */
        {"\xf0\xae\xaf\xb0's", {172, 106, 107, 108, 594}, 5},                                             /* U+2EBF0 */
        {"\xf0\x91\xbc\x80x'd", {128240, 120, 222, 87, 4172}, 5},                                         /* U+11F00 */
        {"a \xe1\xa0\x8e!", {64, 86089, 254, 236, 0}, 5},                                                   /* U+180E */
        {"\xe1\xa0\xa8\xe1\xa0\xa2\xe1\xa0\xad\xe1\xa0\xa1\xe1\xa0\x8e\xe1\xa0\xa8 \t\xe1\xa0\x8ex",
         {149275, 148585, 149276, 150554, 123970, 236, 149275, 220, 197, 123970, 236, 87}, 12},
    };
    tv_vocab v;
    int rc = open_relabelled("qwen2", NULL, &v);
    if (rc == 77) SKIP("../shared/vocab/ggml-vocab-qwen2-reconstructed.gguf absent");
    ASSERT_EQ(rc, 0);
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) bad += check_ids(v.t, "qwen2", cases[i].text, cases[i].ids, cases[i].n);
    tv_close(&v);
    ASSERT_EQ(bad, 0);
}

TEST_MAIN(TEST_ENTRY(unicode_15_classes), TEST_ENTRY(pre_tokenizers), TEST_ENTRY(afmoe_cjk_class), TEST_ENTRY(gemma4_model), TEST_ENTRY(unknown_pre_rejected), TEST_ENTRY(wordpiece_normalisation),
          TEST_ENTRY(wordpiece_long_words), TEST_ENTRY(wordpiece_long_words_as_llama_cpp))
