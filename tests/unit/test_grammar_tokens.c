/* test_grammar_tokens.c - GBNF token references (engine/grammar_tokens.c, grammar.c): <[id]>,
 * <text>, !<..> parsed and refused with a message, matched by id at a character boundary only,
 * never by text running into them; and every mask (the trie walk, the per-position tables, the
 * cache) equal to a token-by-token check at each step of random walks over grammars that mix
 * token references with text, half-read characters and control tokens. */
#include "tests/rlx_test.h"
#include "engine/grammar_internal.h"

/* A small vocabulary: three control tokens with no bytes (<think>, </think>, and <eos> that
 * ends generation), text pieces including the control tokens' spellings and half characters. */
static const char *const names[] = {"<think>", "</think>", "<eos>"};
static const char *const pieces[] = {
    "", "", "", "a", "b", "ab", "\xc3", "\xa9", "\xc3\xa9", " ", "<", "think", ">", "<think>", "a<", "ba", "x",
    "\n", "\xe6\x97\xa5", "\xe6", "\x97\xa5", "aa", "b ",
};
enum { NV = RLX_ARRAY_LEN(pieces), T_THINK = 0, T_END = 1, T_EOS = 2 };

static int32_t lookup(const void *ctx, const char *text, size_t len)
{
    (void)ctx;
    for (int i = 0; i < 3; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], text, len)) return i;
    return -1;
}

static bool is_eog(const void *ctx, int32_t t)
{
    (void)ctx;
    return t == T_EOS;
}

static const rlx_grammar_token_ids ids = {.n_vocab = NV, .lookup = lookup, .is_eog = is_eog};

static rlx_grammar *compile(const char *src)
{
    rlx_error e = {0};
    rlx_grammar *g = rlx_grammar_compile_ids(src, strlen(src), NULL, &ids, &e);
    if (!g) fprintf(stderr, "  compile failed: %s\n", e.msg);
    return g;
}

static void expect_error(const rlx_grammar_token_ids *with, const char *src, const char *needle)
{
    rlx_error e = {0};
    rlx_grammar *g = rlx_grammar_compile_ids(src, strlen(src), NULL, with, &e);
    if (g) {
        rlx_grammar_free(g);
        fprintf(stderr, "  compiled but should not: %s\n", src);
        rlx_test_failed_ = 1;
        return;
    }
    if (e.code != RLX_EINVAL || !strstr(e.msg, needle)) {
        fprintf(stderr, "  error %d \"%s\" lacks \"%s\"\n", e.code, e.msg, needle);
        rlx_test_failed_ = 1;
    }
}

static size_t plen(int t) { return strlen(pieces[t]); }

TEST(references_parse_or_are_refused_by_name)
{
    rlx_grammar *g = compile("root ::= <think> !<[1]>* </think> [ab]+\n");
    ASSERT(g != NULL);
    rlx_grammar_free(g);
    /* without a vocabulary: ids are taken as they are, a text is refused */
    rlx_error e = {0};
    g = rlx_grammar_compile("root ::= <[7]> !<[2147483647]>\n", 30, NULL, &e);
    ASSERT_MSG(g != NULL, "%s", e.msg);
    rlx_grammar_free(g);
    expect_error(NULL, "root ::= <think>\n", "needs the model's vocabulary");
    expect_error(&ids, "root ::= <[2147483648]>\n", "at most 2147483647");
    expect_error(&ids, "root ::= <[]>\n", "<[digits]>");
    expect_error(&ids, "root ::= <[12x]>\n", "<[digits]>");
    expect_error(&ids, "root ::= <[12]\n", "<[digits]>");
    expect_error(&ids, "root ::= <[23]>\n", "token 23 is not in the vocabulary (23 tokens)");
    expect_error(&ids, "root ::= \"a\" <nope>\n", "line 1 column 14: <nope> is not one token");
    expect_error(&ids, "root ::= <think\n", "no '>' on its line");
    expect_error(&ids, "root ::= ! <think>\n", "'!' must be followed by a token reference");
    expect_error(&ids, "root ::= <eos>\n", "ends generation");
    expect_error(&ids, "root ::= <[2]>\n", "ends generation");
    g = compile("root ::= !<eos> \"a\"\n"); /* anything but the end: the end is never a token anyway */
    ASSERT(g != NULL);
    rlx_grammar_free(g);
}

TEST(matched_by_id_at_a_character_boundary)
{
    rlx_grammar *g = compile("root ::= \"a\" <think> \"b\" | \"ab\" \"\xc3\xa9\"\n");
    ASSERT(g != NULL);
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    ASSERT(s != NULL);
    ASSERT(!rlx_grammar_allows_token(s, T_THINK, "", 0)); /* "a" first */
    ASSERT(rlx_grammar_allows_token(s, 14, "a<", 2) == false); /* text runs into the reference: never */
    ASSERT(rlx_grammar_allows_token(s, 3, "a", 1));
    ASSERT_EQ(rlx_grammar_accept_token(s, 3, "a", 1), 0);
    /* after "a": <think> by id (whatever its bytes, none here), or "b" of the other branch */
    ASSERT(rlx_grammar_allows_token(s, T_THINK, "", 0));
    ASSERT(!rlx_grammar_allows_token(s, T_END, "", 0));
    ASSERT(!rlx_grammar_allows_token(s, 13, "<think>", 7)); /* its spelling is not the token */
    ASSERT(!rlx_grammar_allows(s, "<", 1));
    rlx_grammar_state *c = rlx_grammar_state_clone(s);
    ASSERT_EQ(rlx_grammar_accept_token(c, T_THINK, "", 0), 0);
    ASSERT(!rlx_grammar_can_end(c));
    ASSERT_EQ(rlx_grammar_accept_token(c, 4, "b", 1), 0);
    ASSERT(rlx_grammar_can_end(c) && rlx_grammar_must_end(c));
    rlx_grammar_state_free(c);
    /* the other branch, into a half-read character: no reference can match inside it */
    ASSERT_EQ(rlx_grammar_accept_token(s, 4, "b", 1), 0);
    ASSERT_EQ(rlx_grammar_accept_token(s, 6, "\xc3", 1), 0);
    ASSERT(!rlx_grammar_can_end(s));
    ASSERT_EQ(rlx_grammar_accept_token(s, 7, "\xa9", 1), 0);
    ASSERT(rlx_grammar_can_end(s));
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);

    /* !<..>: any token but that one, text or control, whatever its bytes (a half character too) */
    g = compile("root ::= !<[1]>* <[1]> \"\xc3\xa9\"\n");
    s = rlx_grammar_state_new(g, NULL);
    ASSERT(s != NULL);
    ASSERT_EQ(rlx_grammar_accept_token(s, 6, "\xc3", 1), 0); /* matched by id: no half-read character left */
    ASSERT_EQ(rlx_grammar_accept_token(s, T_THINK, "", 0), 0);
    ASSERT_EQ(rlx_grammar_accept_token(s, 5, "ab", 2), 0);
    ASSERT(!rlx_grammar_can_end(s));
    ASSERT_EQ(rlx_grammar_accept_token(s, T_END, "", 0), 0);
    ASSERT(!rlx_grammar_allows_token(s, T_END, "", 0));
    ASSERT(!rlx_grammar_allows_token(s, 7, "\xa9", 1));
    ASSERT_EQ(rlx_grammar_accept_token(s, 6, "\xc3", 1), 0); /* now by its bytes: half a character */
    ASSERT(!rlx_grammar_allows_token(s, T_THINK, "", 0));
    ASSERT_EQ(rlx_grammar_accept_token(s, 7, "\xa9", 1), 0);
    ASSERT(rlx_grammar_must_end(s));
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);

    /* a grammar without references: a token with no bytes is refused, as before */
    g = compile("root ::= \"a\"*\n");
    s = rlx_grammar_state_new(g, NULL);
    ASSERT(!rlx_grammar_allows_token(s, T_THINK, "", 0));
    ASSERT_EQ(rlx_grammar_accept_token(s, T_THINK, "", 0), RLX_EINVAL);
    ASSERT_EQ(rlx_grammar_accept_token(s, 21, "aa", 2), 0);
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
}

static const char *const walk_grammars[] = {
    /* a thinking block, then an answer */
    "root ::= <think> !</think>* </think> \" \"? [ab]+\n",
    /* references between text, alternatives sharing a prefix, half characters on both sides */
    "root ::= (\"a\" <think> | \"ab\" | \"\xc3\xa9\" !<[5]> | <[18]> \"\xe6\x97\xa5\")+ </think>?\n",
    /* a reference inside a counted repetition (its chain), text that may run up to it */
    "root ::= (\"b\" | \"a\" !<think>){2,5} (\"x\" | <think>)\n",
    /* a reference right after a half character's alternative, and at the start of a repetition */
    "root ::= (<think> | \"\xc3\xa9\" | [a-b] \" \")* \"\\n\"\n",
};

/* Each step: the reference mask (trie walk) equals allows_token token by token (the end
 * aside: the stage's), the cache's mask and the tables' mask equal it bit for bit; then a token
 * drawn among the allowed ones is accepted. */
TEST(masks_equal_token_checks)
{
    size_t lens[NV];
    for (int i = 0; i < NV; i++) lens[i] = plen(i);
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(NV, pieces, lens);
    ASSERT(v != NULL);
    ASSERT_EQ(rlx_grammar_vocab_set_eog(v, is_eog, NULL), 0);
    rlx_grammar_cache *cache = rlx_grammar_cache_new(NV, 4);
    ASSERT(cache != NULL);
    uint64_t rng = 7, fast[1];
    int reached_ref = 0;
    for (size_t gi = 0; gi < RLX_ARRAY_LEN(walk_grammars); gi++) {
        rlx_grammar *g = compile(walk_grammars[gi]);
        ASSERT(g != NULL);
        for (int walk = 0; walk < 30; walk++) {
            rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
            ASSERT(s != NULL);
            for (int step = 0; step < 14; step++) {
                uint8_t mask[NV];
                int64_t n = rlx_grammar_mask(s, v, mask), count = 0;
                ASSERT(n >= 0);
                for (int t = 0; t < NV; t++) {
                    int want = t != T_EOS && rlx_grammar_allows_token(s, t, pieces[t], lens[t]);
                    ASSERT_MSG(mask[t] == want, "grammar %zu walk %d step %d token %d: mask %d, check %d", gi, walk,
                               step, t, mask[t], want);
                    count += want;
                    reached_ref += want && !lens[t];
                }
                ASSERT_EQ(n, count);
                int64_t cn = -1;
                int rc = 0;
                const uint64_t *cb = rlx_grammar_cache_mask(cache, s, v, &cn, &rc);
                ASSERT_MSG(cb != NULL, "rc %d", rc);
                ASSERT_EQ(rlx_grammar_cache_fast_mask(cache, s, v, fast), n);
                ASSERT_EQ(cn, n);
                for (int t = 0; t < NV; t++) {
                    ASSERT_MSG((int)((cb[0] >> t) & 1) == mask[t], "grammar %zu step %d token %d: cache", gi, step, t);
                    ASSERT_MSG((int)((fast[0] >> t) & 1) == mask[t], "grammar %zu step %d token %d: tables", gi, step, t);
                }
                if (!n) break;
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                int64_t pick = (int64_t)((rng >> 33) % (uint64_t)n);
                for (int t = 0; t < NV; t++)
                    if (mask[t] && pick-- == 0) {
                        ASSERT_EQ(rlx_grammar_accept_token(s, t, pieces[t], lens[t]), 0);
                        break;
                    }
            }
            rlx_grammar_state_free(s);
        }
        rlx_grammar_free(g);
    }
    ASSERT(reached_ref > 50); /* the walks did pass references with control tokens */
    rlx_grammar_cache_free(cache);
    rlx_grammar_vocab_free(v);
}

/* !<..> over a vocabulary of many words: every token but the named one and the end, the words'
 * tail bits untouched. */
TEST(negated_reference_mask_spans_words)
{
    enum { BIG = 200 };
    const char *texts[BIG];
    size_t lens[BIG];
    for (int i = 0; i < BIG; i++) texts[i] = "q", lens[i] = 1; /* text no reference reads */
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(BIG, texts, lens);
    ASSERT(v != NULL);
    ASSERT_EQ(rlx_grammar_vocab_set_eog(v, is_eog, NULL), 0); /* token 2 ends generation */
    rlx_grammar *g = rlx_grammar_compile("root ::= !<[130]>\n", 18, NULL, NULL);
    rlx_grammar_state *s = g ? rlx_grammar_state_new(g, NULL) : NULL;
    ASSERT(s != NULL);
    uint8_t mask[BIG];
    ASSERT_EQ(rlx_grammar_mask(s, v, mask), BIG - 2);
    ASSERT(!mask[130] && !mask[2] && mask[0] && mask[129] && mask[131] && mask[199]);
    rlx_grammar_cache *c = rlx_grammar_cache_new(BIG, 2);
    int64_t n = 0;
    int rc = 0;
    const uint64_t *bits = rlx_grammar_cache_mask(c, s, v, &n, &rc);
    ASSERT(bits != NULL);
    ASSERT_EQ(n, BIG - 2);
    ASSERT_EQ(bits[3] >> (BIG - 192), 0ull); /* nothing past the vocabulary */
    rlx_grammar_cache_free(c);
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
    rlx_grammar_vocab_free(v);
}

TEST_MAIN(TEST_ENTRY(references_parse_or_are_refused_by_name), TEST_ENTRY(matched_by_id_at_a_character_boundary),
          TEST_ENTRY(masks_equal_token_checks), TEST_ENTRY(negated_reference_mask_spans_words))
