/* test_tokenizer_api.c - the tokenizer's behaviour around the vectors: add_special, special
 * token parsing, EOG, single-token bytes, streaming detokenization across split code points,
 * byte-exact round trips of arbitrary bytes, load time, and clear errors for bad vocabularies. */
#include "tests/unit/test_tokenizer_vocab.h"

#include <pthread.h>
#include <unistd.h>

static int32_t find_piece(const rlx_tokenizer *t, const char *s)
{
    for (int32_t i = 0; i < rlx_tokenizer_n_vocab(t); i++)
        if (!strcmp(rlx_tokenizer_piece(t, i), s)) return i;
    return -1;
}

static int tokenize(const rlx_tokenizer *t, const char *s, bool add, bool parse, int32_t **ids, size_t *n)
{
    rlx_error err = {0};
    int rc = rlx_tokenize(t, s, strlen(s), add, parse, ids, n, &err);
    if (rc) fprintf(stderr, "  tokenize: %s\n", err.msg);
    return rc;
}

#define OPEN_OR_SKIP(v, name)                                      \
    do {                                                           \
        int rc_ = tv_open(&(v), name);                             \
        if (rc_ == 77)                                             \
            SKIP("../shared/vocab/ggml-vocab-%s.gguf absent", name); \
        ASSERT_EQ(rc_, 0);                                         \
    } while (0)

TEST(add_special_per_family)
{
    tv_vocab v;
    int32_t *ids;
    size_t n;
    OPEN_OR_SKIP(v, "llama-spm");
    ASSERT(rlx_tokenizer_add_bos(v.t));
    ASSERT_EQ(tokenize(v.t, "Hello world", true, false, &ids, &n), 0);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(ids[0], 1);
    ASSERT_EQ(ids[1], 15043);
    free(ids);
    ASSERT_EQ(tokenize(v.t, "", true, false, &ids, &n), 0); /* empty text: just BOS */
    ASSERT_EQ(n, 1);
    free(ids);
    ASSERT_EQ(tokenize(v.t, "", false, false, &ids, &n), 0);
    ASSERT_EQ(n, 0);
    free(ids);
    tv_close(&v);

    if (tv_open(&v, "qwen2-reconstructed") == 0) { /* add_bos_token = false */
        ASSERT(!rlx_tokenizer_add_bos(v.t));
        ASSERT_EQ(tokenize(v.t, "Hello", true, false, &ids, &n), 0);
        ASSERT_EQ(n, 1);
        ASSERT_STR_EQ(rlx_tokenizer_piece(v.t, ids[0]), "Hello");
        free(ids);
        tv_close(&v);
    }
    if (tv_open(&v, "bert-bge") == 0) { /* [CLS] ... [SEP] */
        ASSERT_EQ(tokenize(v.t, "Hello world", true, false, &ids, &n), 0);
        ASSERT_EQ(n, 4);
        ASSERT_EQ(ids[0], 101);
        ASSERT_EQ(ids[3], 102);
        free(ids);
        tv_close(&v);
    }
}

TEST(special_tokens_and_eog)
{
    tv_vocab v;
    int32_t *ids;
    size_t n;
    OPEN_OR_SKIP(v, "qwen2-reconstructed");
    int32_t im_start = find_piece(v.t, "<|im_start|>"), im_end = find_piece(v.t, "<|im_end|>");
    int32_t eot = find_piece(v.t, "<|endoftext|>");
    ASSERT(im_start >= 0 && im_end >= 0 && eot >= 0);
    ASSERT(rlx_tokenizer_is_eog(v.t, im_end));
    ASSERT(rlx_tokenizer_is_eog(v.t, eot));
    ASSERT(rlx_tokenizer_is_eog(v.t, rlx_tokenizer_eos(v.t)));
    ASSERT(!rlx_tokenizer_is_eog(v.t, im_start));
    ASSERT(!rlx_tokenizer_is_eog(v.t, find_piece(v.t, "Hello")));
    ASSERT(!rlx_tokenizer_is_eog(v.t, -1));
    ASSERT(!rlx_tokenizer_is_eog(v.t, rlx_tokenizer_n_vocab(v.t)));

    const char *chat = "<|im_start|>user\nHi<|im_end|>";
    ASSERT_EQ(tokenize(v.t, chat, false, true, &ids, &n), 0);
    ASSERT(n >= 4);
    ASSERT_EQ(ids[0], im_start);
    ASSERT_EQ(ids[n - 1], im_end);
    char *back = rlx_detokenize(v.t, ids, n, true);
    ASSERT_STR_EQ(back, chat);
    free(back);
    back = rlx_detokenize(v.t, ids, n, false); /* control tokens vanish without `special` */
    ASSERT_STR_EQ(back, "user\nHi");
    free(back);
    free(ids);
    ASSERT_EQ(tokenize(v.t, chat, false, false, &ids, &n), 0);
    for (size_t i = 0; i < n; i++) ASSERT(ids[i] != im_start && ids[i] != im_end);
    back = rlx_detokenize(v.t, ids, n, false);
    ASSERT_STR_EQ(back, chat); /* typed as text, it stays text */
    free(back);
    free(ids);
    tv_close(&v);

    OPEN_OR_SKIP(v, "llama-spm");
    ASSERT(rlx_tokenizer_is_eog(v.t, 2));
    ASSERT(!rlx_tokenizer_is_eog(v.t, 1));
    ASSERT_EQ(rlx_tokenizer_bos(v.t), 1);
    ASSERT_EQ(rlx_tokenizer_eos(v.t), 2);
    ASSERT(rlx_tokenizer_piece(v.t, -1) == NULL);
    ASSERT(rlx_tokenizer_piece(v.t, 32000) == NULL);
    tv_close(&v);
}

/* Phi-3: special tokens eat the whitespace after them (llama.cpp sets rstrip by model name).
 * "</s>" is user-defined in the file, but llama.cpp makes it an end-of-generation control token,
 * so without parse_special it is plain text (ids from llama.cpp's tokenizer). */
TEST(phi3_rstrip_and_user_defined)
{
    tv_vocab v;
    int32_t *ids;
    size_t n;
    OPEN_OR_SKIP(v, "phi-3");
    ASSERT_EQ(tokenize(v.t, "<|user|>\nHello<|end|>\n<|assistant|>", false, true, &ids, &n), 0);
    ASSERT_EQ(n, 4);
    ASSERT_EQ(ids[0], 32010);
    ASSERT_EQ(ids[1], 15043);
    ASSERT_EQ(ids[2], 32007);
    ASSERT_EQ(ids[3], 32001);
    free(ids);
    ASSERT_EQ(tokenize(v.t, "</s>", false, false, &ids, &n), 0);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(ids[0], 1533);
    ASSERT_EQ(ids[1], 29879);
    ASSERT_EQ(ids[2], 29958);
    free(ids);
    ASSERT_EQ(tokenize(v.t, "Hi</s>", false, true, &ids, &n), 0);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(ids[0], 6324);
    ASSERT_EQ(ids[1], 2);
    free(ids);
    ASSERT(rlx_tokenizer_is_eog(v.t, 2));
    ASSERT(rlx_tokenizer_is_eog(v.t, 32007)); /* <|end|> */
    ASSERT(!rlx_tokenizer_is_eog(v.t, 32001)); /* <|assistant|> */
    ASSERT_EQ(tokenize(v.t, "<s> x", false, true, &ids, &n), 0); /* <s> keeps its space */
    ASSERT_EQ(ids[0], 1);
    ASSERT(n >= 2 && ids[1] != find_piece(v.t, "\xe2\x96\x81x"));
    free(ids);
    tv_close(&v);
}

/* SentencePiece splits text into symbols by the lead byte's length, as llama.cpp does, valid
 * UTF-8 or not: "\xe2ab" is one 3-byte symbol (no token) spelled as three bytes, not E2 then
 * "ab". Expected ids are llama.cpp's on this vocabulary. */
TEST(spm_invalid_utf8_splits_by_lead_byte)
{
    tv_vocab v;
    int32_t *ids;
    size_t n;
    OPEN_OR_SKIP(v, "llama-spm");
    static const struct { const char *text; int32_t want[6]; size_t n; } cases[] = {
        {"\xe2" "ab c", {29871, 229, 100, 101, 274}, 5}, /* <0xE2> <0x61> <0x62> \u2581c */
        {"\xc3( hi", {29871, 198, 43, 7251}, 4},
        {"ab\xf0", {633, 243}, 2},                       /* cut at the end of the text */
        {"x\xf0\x9f", {921, 243, 162}, 3},
    };
    for (size_t c = 0; c < RLX_ARRAY_LEN(cases); c++) {
        ASSERT_EQ(tokenize(v.t, cases[c].text, false, false, &ids, &n), 0);
        ASSERT_MSG(n == cases[c].n, "case %zu: %zu ids", c, n);
        for (size_t i = 0; i < n; i++) ASSERT_MSG(ids[i] == cases[c].want[i], "case %zu id %zu: %d, want %d", c, i, ids[i], cases[c].want[i]);
        free(ids);
    }
    tv_close(&v);
}

TEST(token_to_bytes)
{
    tv_vocab v;
    char buf[64];
    OPEN_OR_SKIP(v, "llama-spm");
    int32_t nl = find_piece(v.t, "<0x0A>"), the = find_piece(v.t, "\xe2\x96\x81the");
    ASSERT(nl >= 0 && the >= 0);
    ASSERT_EQ(rlx_token_to_bytes(v.t, nl, false, buf, sizeof buf), 1);
    ASSERT_EQ(buf[0], '\n');
    size_t k = rlx_token_to_bytes(v.t, the, false, buf, sizeof buf);
    ASSERT_EQ(k, 4);
    ASSERT(memcmp(buf, " the", 4) == 0);
    ASSERT_EQ(rlx_token_to_bytes(v.t, the, false, buf, 2), 4); /* full length even when truncated */
    ASSERT_EQ(rlx_token_to_bytes(v.t, 1, false, buf, sizeof buf), 0);
    ASSERT_EQ(rlx_token_to_bytes(v.t, 1, true, buf, sizeof buf), 3);
    ASSERT(memcmp(buf, "<s>", 3) == 0);
    ASSERT_EQ(rlx_token_to_bytes(v.t, -5, true, buf, sizeof buf), 0);
    tv_close(&v);

    if (tv_open(&v, "gpt-2") == 0) {
        int32_t gthe = find_piece(v.t, "\xc4\xa0the"); /* "Ġthe" */
        ASSERT(gthe >= 0);
        ASSERT_EQ(rlx_token_to_bytes(v.t, gthe, false, buf, sizeof buf), 4);
        ASSERT(memcmp(buf, " the", 4) == 0);
        tv_close(&v);
    }
}

/* Streams ids one at a time and checks the concatenation. */
static char *stream_all(const rlx_tokenizer *t, const int32_t *ids, size_t n, size_t *max_piece_out)
{
    static char acc[8192];
    size_t len = 0;
    rlx_detok_stream s = {0};
    *max_piece_out = 0;
    for (size_t i = 0; i < n; i++) {
        char out[512];
        size_t w = rlx_detok_push(t, &s, ids[i], false, out, sizeof out);
        if (w > *max_piece_out) *max_piece_out = w;
        memcpy(acc + len, out, w);
        len += w;
    }
    len += rlx_detok_flush(&s, acc + len, sizeof acc - len);
    acc[len] = 0;
    return acc;
}

TEST(stream_holds_split_code_points)
{
    tv_vocab v;
    int32_t *ids;
    size_t n, maxw;
    OPEN_OR_SKIP(v, "llama-spm");
    /* The llama emoji has no token: it becomes four <0xXX> byte tokens. */
    ASSERT_EQ(tokenize(v.t, "a \xf0\x9f\xa6\x99 b", false, false, &ids, &n), 0);
    int bytes = 0;
    rlx_detok_stream s = {0};
    char out[128], acc[128];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = rlx_tokenizer_piece(v.t, ids[i]);
        bool is_byte = !strncmp(p, "<0x", 3);
        bytes += is_byte;
        size_t w = rlx_detok_push(v.t, &s, ids[i], false, out, sizeof out);
        if (is_byte && !strcmp(p, "<0x99>")) {
            ASSERT_EQ(w, 4); /* the whole emoji at once */
            ASSERT(memcmp(out, "\xf0\x9f\xa6\x99", 4) == 0);
        } else if (is_byte) {
            ASSERT_EQ(w, 0); /* held back */
        }
        memcpy(acc + len, out, w);
        len += w;
    }
    ASSERT_EQ(bytes, 4);
    ASSERT_EQ(rlx_detok_flush(&s, out, sizeof out), 0);
    acc[len] = 0;
    ASSERT_STR_EQ(acc, " a \xf0\x9f\xa6\x99 b"); /* streams keep the prefix space */
    free(ids);

    /* An unfinished sequence at the end flushes as U+FFFD; a broken one is replaced at once. */
    int32_t f0 = find_piece(v.t, "<0xF0>"), x80 = find_piece(v.t, "<0x80>"), a = find_piece(v.t, "\xe2\x96\x81" "a");
    ASSERT(f0 >= 0 && x80 >= 0 && a >= 0);
    rlx_detok_stream s2 = {0};
    ASSERT_EQ(rlx_detok_push(v.t, &s2, f0, false, out, sizeof out), 0);
    ASSERT_EQ(rlx_detok_flush(&s2, out, sizeof out), 3);
    ASSERT(memcmp(out, "\xef\xbf\xbd", 3) == 0);
    ASSERT_EQ(rlx_detok_flush(&s2, out, sizeof out), 0);
    ASSERT_EQ(rlx_detok_push(v.t, &s2, f0, false, out, sizeof out), 0);
    size_t w = rlx_detok_push(v.t, &s2, a, false, out, sizeof out);
    ASSERT_EQ(w, 5);
    ASSERT(memcmp(out, "\xef\xbf\xbd a", 5) == 0);
    w = rlx_detok_push(v.t, &s2, x80, false, out, sizeof out); /* stray continuation byte */
    ASSERT_EQ(w, 3);

    /* Stream of the reference text equals whole-sequence detokenization (plus prefix space). */
    const char *text = "Hello, y'all! How are you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple";
    ASSERT_EQ(tokenize(v.t, text, false, false, &ids, &n), 0);
    char *whole = rlx_detokenize(v.t, ids, n, false);
    const char *st = stream_all(v.t, ids, n, &maxw);
    ASSERT(st[0] == ' ');
    ASSERT_STR_EQ(st + 1, whole);
    ASSERT_STR_EQ(whole, text);
    free(whole);
    free(ids);
    tv_close(&v);
}

/* SentencePiece's escaped space (U+2581) taken into a malformed symbol comes back as its three
 * bytes (llama.cpp splits by lead byte: "\xe8 " is one symbol "\xe8\xe2\x96"): compare with every
 * U+2581 read as a space. */
static size_t unescape_spaces(const char *s, size_t n, char *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n && !memcmp(s + i, "\xe2\x96\x81", 3)) { out[m++] = ' '; i += 2; }
        else out[m++] = s[i];
    }
    return m;
}

/* Byte-level BPE and SentencePiece with byte fallback reproduce any bytes, valid UTF-8 or not. */
TEST(random_bytes_round_trip)
{
    static const char *const names[] = {"gpt-2", "qwen2-reconstructed", "llama-spm"};
    int seen = 0;
    uint32_t rng = 12345;
    for (size_t k = 0; k < RLX_ARRAY_LEN(names); k++) {
        tv_vocab v;
        if (tv_open(&v, names[k]) != 0) continue;
        seen++;
        for (int iter = 0; iter < 200; iter++) {
            char text[96];
            size_t len = 1 + iter % 90;
            for (size_t i = 0; i < len; i++) {
                rng = rng * 1664525u + 1013904223u;
                uint32_t r = rng >> 24;
                /* mostly ASCII words and spaces, some high bytes */
                if (r < 160) text[i] = (char)('a' + r % 26);
                else if (r < 200) text[i] = ' ';
                else if (r < 210) text[i] = '\n';
                else text[i] = (char)(0x80 + r % 128);
                if (text[i] == 0) text[i] = 'x';
            }
            text[len] = 0;
            int32_t *ids;
            size_t n;
            rlx_error err = {0};
            ASSERT_EQ(rlx_tokenize(v.t, text, len, false, false, &ids, &n, &err), 0);
            char *back = rlx_detokenize(v.t, ids, n, false);
            if (back && !strcmp(names[k], "llama-spm")) {
                char a[4 * 96], b[4 * 96];
                const size_t na = unescape_spaces(text, len, a), nb = unescape_spaces(back, strlen(back), b);
                ASSERT_MSG(na == nb && !memcmp(a, b, na), "llama-spm: round trip of %zu random bytes differs", len);
                free(back);
                free(ids);
                continue;
            }
            if (!back || strlen(back) != len || memcmp(back, text, len) != 0) {
                fprintf(stderr, "  input: ");
                for (size_t i = 0; i < len; i++) fprintf(stderr, "%02x", (uint8_t)text[i]);
                fprintf(stderr, "\n  back:  ");
                for (size_t i = 0; back && back[i]; i++) fprintf(stderr, "%02x", (uint8_t)back[i]);
                fprintf(stderr, "\n");
            }
            ASSERT_MSG(back && strlen(back) == len && memcmp(back, text, len) == 0,
                       "%s: round trip of %zu random bytes differs", names[k], len);
            free(back);
            free(ids);
        }
        tv_close(&v);
    }
    if (!seen) SKIP("no reference vocabularies");
}

static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t L = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!L || i + L > n) return false;
        for (size_t k = 1; k < L; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
        i += L;
    }
    return true;
}

/* Arbitrary bytes (specials' characters included) through every vocabulary and mode: no error,
 * ids in range, and the stream always emits valid UTF-8. */
TEST(random_input_every_vocab)
{
    static const char *const names[] = {"llama-spm", "phi-3", "baichuan", "qwen2-reconstructed", "gpt-2",
                                        "deepseek-llm", "deepseek-coder", "falcon", "mpt", "gpt-neox",
                                        "starcoder", "refact", "bert-bge"};
    static const char alphabet[] = "<|>/sim_tarednoft[]#\n \t'.,!?0123456789";
    int seen = 0;
    uint32_t rng = 777;
    for (size_t k = 0; k < RLX_ARRAY_LEN(names); k++) {
        tv_vocab v;
        if (tv_open(&v, names[k]) != 0) continue;
        seen++;
        for (int iter = 0; iter < 60; iter++) {
            char text[128];
            size_t len = (size_t)iter * 2;
            for (size_t i = 0; i < len; i++) {
                rng = rng * 1664525u + 1013904223u;
                uint32_t r = rng >> 24;
                text[i] = r < 128 ? alphabet[r % (sizeof alphabet - 1)] : (char)r;
            }
            int32_t *ids;
            size_t n;
            rlx_error err = {0};
            bool add = iter & 1, parse = iter & 2;
            ASSERT_EQ(rlx_tokenize(v.t, text, len, add, parse, &ids, &n, &err), 0);
            rlx_detok_stream st = {0};
            char out[1024];
            for (size_t i = 0; i < n; i++) {
                ASSERT(ids[i] >= 0 && ids[i] < rlx_tokenizer_n_vocab(v.t));
                size_t w = rlx_detok_push(v.t, &st, ids[i], parse, out, sizeof out);
                ASSERT_MSG(valid_utf8(out, w), "%s: stream emitted invalid UTF-8", names[k]);
            }
            size_t w = rlx_detok_flush(&st, out, sizeof out);
            ASSERT(valid_utf8(out, w));
            free(ids);
        }
        tv_close(&v);
    }
    if (!seen) SKIP("no reference vocabularies");
}

/* A tokenizer is shared by worker threads: concurrent calls must agree with a serial run. */
typedef struct thread_job {
    const rlx_tokenizer *t;
    const tv_set *s;
    int mismatches;
} thread_job;

static void *tokenize_all(void *arg)
{
    thread_job *j = arg;
    for (int rep = 0; rep < 5; rep++)
        for (size_t i = 0; i < j->s->n; i++) {
            int32_t *ids;
            size_t n;
            rlx_error err = {0};
            const tv_case *c = &j->s->c[i];
            if (rlx_tokenize(j->t, c->text, c->len, false, false, &ids, &n, &err) || n != c->n_ids ||
                (n && memcmp(ids, c->ids, n * sizeof *ids)))
                j->mismatches++;
            free(ids);
        }
    return NULL;
}

TEST(concurrent_tokenize)
{
    tv_vocab v;
    tv_set s;
    OPEN_OR_SKIP(v, "qwen2-reconstructed");
    ASSERT_EQ(tv_read(&s, "qwen2"), 0);
    pthread_t th[4];
    thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){v.t, &s, 0};
        ASSERT_EQ(pthread_create(&th[i], NULL, tokenize_all, &jobs[i]), 0);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += jobs[i].mismatches;
    }
    tv_set_free(&s);
    tv_close(&v);
    ASSERT_EQ(bad, 0);
}

/* The biggest vocabulary loads; its time is printed for the eye, not asserted (a timed assertion
 * fails on a loaded or slow host and under valgrind: speed belongs to the benchmarks). */
TEST(load_time)
{
    tv_vocab v;
    double t0 = rlx_now();
    OPEN_OR_SKIP(v, "qwen2-reconstructed");
    double ms = (rlx_now() - t0) * 1e3;
    fprintf(stderr, "  qwen2 vocabulary (151936 tokens, 151387 merges) loads in %.1f ms\n", ms);
    ASSERT(v.t != NULL);
    tv_close(&v);
}

static int write_vocab(const char *path, const char *model, const char *pre)
{
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    static const rlx_gguf_str toks[] = {{"<unk>", 5}, {"a", 1}, {"b", 1}, {"ab", 2}, {"c", 1}, {"d", 1}, {"e", 1},
                                        {"f", 1}, {"g", 1}, {"h", 1}, {"i", 1}, {",", 1}, {"j", 1}};
    static const rlx_gguf_str merges[] = {{"a b", 3}};
    if (model) rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", model, strlen(model));
    if (pre) rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre, strlen(pre));
    rlx_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, RLX_ARRAY_LEN(toks));
    rlx_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    rlx_error err = {0};
    int rc = rlx_gguf_writer_write(w, path, &err);
    rlx_gguf_writer_free(w);
    return rc;
}

static int load_vocab(const char *path, rlx_tokenizer **t, rlx_error *err)
{
    rlx_gguf *g = NULL;
    *t = NULL;
    int rc = rlx_gguf_open(&g, path, err);
    if (!rc) rc = rlx_tokenizer_from_gguf(t, g, err);
    if (g) rlx_gguf_close(g);
    return rc;
}

/* A vocabulary of the texts llama.cpp's loader treats specially, typed as the file says
 * (1 normal, 2 unknown, 3 control, 4 user-defined); the expected end-of-generation set and
 * control types are llama.cpp's for this file (checked with its loader). */
TEST(eog_and_control_by_text)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/rlx_tok_eog_%d.gguf", (int)getpid());
    static const struct { const char *text; int32_t type; bool eog, control; } toks[] = {
        {"<unk>", 2, false, false},      {"<s>", 3, false, true},        {"</s>", 4, true, true},
        {"a", 1, false, false},          {"[EOS]", 1, true, true},       {"[EOT]", 1, true, true},
        {"<|flush|>", 4, true, true},    {"<|calls|>", 4, true, true},   {"<|end|>", 3, false, false},
        {"<eos>", 1, true, true},        {"<|channel|>", 3, false, false}, {"<|fim_pad|>", 1, true, true},
        {"<PRE>", 1, false, true},       {"<unused0>", 3, false, true},  {"\xe2\x96\x81", 1, false, false},
        {"b", 1, false, false},
    };
    rlx_gguf_str strs[RLX_ARRAY_LEN(toks)];
    int32_t types[RLX_ARRAY_LEN(toks)];
    float scores[RLX_ARRAY_LEN(toks)] = {0};
    for (size_t i = 0; i < RLX_ARRAY_LEN(toks); i++) {
        strs[i] = (rlx_gguf_str){toks[i].text, strlen(toks[i].text)};
        types[i] = toks[i].type;
    }
    rlx_gguf_writer *w = rlx_gguf_writer_new();
    rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5);
    rlx_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, RLX_ARRAY_LEN(toks));
    rlx_gguf_writer_set_arr(w, "tokenizer.ggml.scores", RLX_GGUF_FLOAT32, scores, RLX_ARRAY_LEN(toks));
    rlx_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", RLX_GGUF_INT32, types, RLX_ARRAY_LEN(toks));
    rlx_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1000); /* out of range: no EOS */
    rlx_error err = {0};
    ASSERT_EQ(rlx_gguf_writer_write(w, path, &err), 0);
    rlx_gguf_writer_free(w);
    rlx_tokenizer *t;
    ASSERT_EQ(load_vocab(path, &t, &err), 0);
    for (size_t i = 0; i < RLX_ARRAY_LEN(toks); i++) {
        ASSERT_MSG(rlx_tokenizer_is_eog(t, (int32_t)i) == toks[i].eog, "%s: end of generation %d", toks[i].text,
                   rlx_tokenizer_is_eog(t, (int32_t)i));
        /* a control token is never matched in text unless special tokens are parsed */
        int32_t *ids;
        size_t n;
        ASSERT_EQ(rlx_tokenize(t, toks[i].text, strlen(toks[i].text), false, false, &ids, &n, &err), 0);
        const bool matched = n == 1 && ids[0] == (int32_t)i;
        free(ids);
        if (i >= 4 && toks[i].type != 1)
            ASSERT_MSG(matched == !toks[i].control, "%s: matched as a token without parse_special: %d", toks[i].text, matched);
    }
    rlx_tokenizer_free(t);
    unlink(path);
}

TEST(bad_vocabularies)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/rlx_tok_test_%d.gguf", (int)getpid());
    rlx_tokenizer *t;
    rlx_error err = {0};

    ASSERT_EQ(write_vocab(path, NULL, NULL), 0);
    ASSERT_EQ(load_vocab(path, &t, &err), RLX_ENOTFOUND);
    ASSERT(strstr(err.msg, "tokenizer.ggml.model"));

    ASSERT_EQ(write_vocab(path, "t5", NULL), 0);
    ASSERT_EQ(load_vocab(path, &t, &err), RLX_EUNSUPPORTED);
    ASSERT(strstr(err.msg, "'t5'"));

    ASSERT_EQ(write_vocab(path, "gpt2", "no-such-pre"), 0);
    ASSERT_EQ(load_vocab(path, &t, &err), RLX_EUNSUPPORTED);
    ASSERT(strstr(err.msg, "no-such-pre"));

    /* The smallest working BPE: "ab" merges, the file outlives nothing. */
    ASSERT_EQ(write_vocab(path, "gpt2", "gpt-2"), 0);
    ASSERT_EQ(load_vocab(path, &t, &err), 0);
    int32_t *ids;
    size_t n;
    ASSERT_EQ(rlx_tokenizer_eos(t), -1); /* no keys: no BOS/EOS, and "," (id 11) does not end generation */
    ASSERT_EQ(rlx_tokenizer_bos(t), -1);
    ASSERT(!rlx_tokenizer_is_eog(t, 11));
    ASSERT_EQ(rlx_tokenize(t, "abab", 4, true, false, &ids, &n, &err), 0);
    ASSERT_EQ(n, 2); /* one pre-token; "a b" merges twice and "abab" is no token */
    ASSERT_EQ(ids[0], 3);
    ASSERT_EQ(ids[1], 3);
    free(ids);
    ASSERT_EQ(rlx_tokenize(t, "ba", 2, true, false, &ids, &n, &err), 0);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(ids[0], 2);
    ASSERT_EQ(ids[1], 1);
    free(ids);
    rlx_tokenizer_free(t);
    unlink(path);
}

TEST_MAIN(TEST_ENTRY(add_special_per_family), TEST_ENTRY(special_tokens_and_eog), TEST_ENTRY(phi3_rstrip_and_user_defined),
          TEST_ENTRY(spm_invalid_utf8_splits_by_lead_byte), TEST_ENTRY(token_to_bytes),
          TEST_ENTRY(stream_holds_split_code_points), TEST_ENTRY(random_bytes_round_trip),
          TEST_ENTRY(random_input_every_vocab), TEST_ENTRY(concurrent_tokenize), TEST_ENTRY(load_time),
          TEST_ENTRY(eog_and_control_by_text), TEST_ENTRY(bad_vocabularies))
