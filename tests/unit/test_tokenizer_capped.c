/* test_tokenizer_capped.c - rlx_tokenize_capped: a text that fits the cap gets exactly
 * rlx_tokenize's ids (SentencePiece merges capped texts in chunks, so texts much longer than a
 * chunk are used), a text past the cap gets RLX_ETOOLONG, and every text makes at least
 * len / rlx_tokenizer_max_bytes_per_token ids. */
#include "tests/unit/test_tokenizer_vocab.h"

static const char *const k_vocabs[] = {"llama-spm", "phi-3", "baichuan", "qwen2-reconstructed", "gpt-2",
                                       "deepseek-llm", "deepseek-coder", "falcon", "mpt", "gpt-neox",
                                       "starcoder", "refact", "bert-bge"};

typedef struct text { char *p; size_t len, cap; } text;

static void put(text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->p = realloc(t->p, t->cap);
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = 0;
}

/* Capped at, above and below the full count: same ids, same ids, RLX_ETOOLONG. */
static void check_text(const rlx_tokenizer *tok, const char *name, const char *s, size_t len, bool add, bool parse)
{
    int32_t *full, *ids;
    size_t n_full, n;
    rlx_error err = {0};
    ASSERT_EQ(rlx_tokenize(tok, s, len, add, parse, &full, &n_full, &err), 0);
    size_t caps[] = {n_full, n_full + 1, n_full + 1000};
    for (size_t k = 0; k < RLX_ARRAY_LEN(caps); k++) {
        if (!caps[k]) continue;
        ASSERT_EQ(rlx_tokenize_capped(tok, s, len, add, parse, caps[k], &ids, &n, &err), 0);
        ASSERT_EQ(n, n_full);
        ASSERT_MSG(!memcmp(ids, full, n * sizeof *ids), "%s: capped ids differ (%zu bytes, add %d parse %d)", name,
                   len, add, parse);
        free(ids);
    }
    size_t below[] = {n_full - 1, n_full / 2, 1};
    for (size_t k = 0; k < RLX_ARRAY_LEN(below) && n_full > 1; k++) {
        if (!below[k]) continue;
        ids = (int32_t *)1;
        ASSERT_EQ(rlx_tokenize_capped(tok, s, len, add, parse, below[k], &ids, &n, &err), RLX_ETOOLONG);
        ASSERT(ids == NULL);
        ASSERT_EQ(n, below[k] + 1);
    }
    size_t bpt = rlx_tokenizer_max_bytes_per_token(tok);
    if (bpt) ASSERT_MSG(n_full * bpt >= len, "%s: %zu bytes made %zu ids, under the bound of %zu bytes/id", name, len,
                        n_full, bpt);
    free(full);
}

/* The reference vectors joined into texts of ~60 KB (many SentencePiece chunks), the vectors
 * alone, and random bytes with the characters of special tokens. */
TEST(capped_equals_uncapped)
{
    int seen = 0;
    uint32_t rng = 4242;
    static const char alphabet[] = "<|>/sim_tarednoft[]#\n \t'.,!?0123456789 \n\n    ";
    for (size_t v = 0; v < RLX_ARRAY_LEN(k_vocabs); v++) {
        tv_vocab voc;
        if (tv_open(&voc, k_vocabs[v]) != 0) continue;
        seen++;
        tv_set set;
        text big = {0};
        if (tv_read(&set, k_vocabs[v]) == 0) {
            for (size_t i = 0; i < set.n; i++)
                {
                    check_text(voc.t, k_vocabs[v], set.c[i].text, set.c[i].len, i & 1, i & 2);
                    if (rlx_test_failed_) return;
                }
            for (int rep = 0; big.len < 60000 && set.n; rep++)
                for (size_t i = 0; i < set.n; i++) {
                    put(&big, set.c[i].text, set.c[i].len);
                    put(&big, rep & 1 ? "\n" : " ", 1);
                }
            tv_set_free(&set);
        } else {
            for (int i = 0; big.len < 60000; i++) put(&big, "Once upon a time, there was a little girl. ", 43);
        }
        for (int mode = 0; mode < 4; mode++)
            {
                check_text(voc.t, k_vocabs[v], big.p, big.len, mode & 1, mode & 2);
                if (rlx_test_failed_) return;
            }
        /* random text, also long */
        big.len = 0;
        while (big.len < 30000) {
            rng = rng * 1664525u + 1013904223u;
            uint32_t r = rng >> 24;
            char c = r < 200 ? alphabet[r % (sizeof alphabet - 1)] : (char)r;
            put(&big, &c, 1);
        }
        for (int mode = 0; mode < 4; mode++)
            {
                check_text(voc.t, k_vocabs[v], big.p, big.len, mode & 1, mode & 2);
                if (rlx_test_failed_) return;
            }
        free(big.p);
        tv_close(&voc);
    }
    if (!seen) SKIP("no reference vocabularies");
}

/* The bound exists where input cannot vanish: SentencePiece and byte-level BPE, not WordPiece. */
TEST(bytes_per_token_bound)
{
    tv_vocab v;
    if (tv_open(&v, "llama-spm") != 0) SKIP("llama-spm vocabulary absent");
    size_t bpt = rlx_tokenizer_max_bytes_per_token(v.t);
    ASSERT(bpt > 0 && bpt < 1024);
    /* the longest entry itself: one id for bpt bytes at best */
    int32_t *ids;
    size_t n;
    rlx_error err = {0};
    text ws = {0};
    for (int i = 0; i < 4096; i++) put(&ws, " ", 1);
    ASSERT_EQ(rlx_tokenize(v.t, ws.p, ws.len, false, false, &ids, &n, &err), 0);
    ASSERT(n * bpt >= ws.len);
    free(ids);
    free(ws.p);
    tv_close(&v);
    if (tv_open(&v, "bert-bge") == 0) {
        ASSERT_EQ(rlx_tokenizer_max_bytes_per_token(v.t), 0);
        tv_close(&v);
    }
    if (tv_open(&v, "gpt-2") == 0) {
        ASSERT(rlx_tokenizer_max_bytes_per_token(v.t) > 0);
        tv_close(&v);
    }
}

TEST_MAIN(TEST_ENTRY(capped_equals_uncapped), TEST_ENTRY(bytes_per_token_bound))
