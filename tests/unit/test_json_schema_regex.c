/* test_json_schema_regex.c - patterns without ^ (engine/json_schema_regex.c parse_seq): a short
 * one matches anywhere as `char* P`; a long one (.{100}, \d{40}) starts its match at the first
 * character that can begin it, so that reading a long string never needs more parse stacks
 * than the grammar allows (before, an unanchored .{100} failed part way with RLX_ERANGE); one
 * that can match the empty string takes every string. */
#include "tests/rlx_test.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"

static rlx_grammar *pattern(const char *re)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "string");
    cJSON_AddStringToObject(s, "pattern", re);
    rlx_error err = {0};
    char *gbnf = rlx_json_schema_to_gbnf(s, &err);
    rlx_grammar *g = gbnf ? rlx_grammar_compile(gbnf, strlen(gbnf), NULL, &err) : NULL;
    if (!g) fprintf(stderr, "  %s: %s\n", re, err.msg);
    free(gbnf);
    cJSON_Delete(s);
    return g;
}

/* The JSON string text of `body` (already JSON-escaped) is accepted whole (1), refused (0), or
 * a limit was hit (-1, reported). Fed one byte at a time, as a model's tokens would. */
static int takes(const rlx_grammar *g, const char *body)
{
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    if (!s) return -1;
    int rc = rlx_grammar_accept(s, "\"", 1);
    for (const char *p = body; !rc && *p; p++) rc = rlx_grammar_accept(s, p, 1);
    if (!rc) rc = rlx_grammar_accept(s, "\"", 1);
    const int r = rc == RLX_ERANGE || rc == RLX_ENOMEM ? -1 : !rc && rlx_grammar_can_end(s);
    if (r < 0) fprintf(stderr, "  a limit (%d) reading %.40s...\n", rc, body);
    rlx_grammar_state_free(s);
    return r;
}

static char *repeat(const char *pre, char c, int n, const char *post)
{
    char *s = malloc(strlen(pre) + (size_t)n + strlen(post) + 1);
    strcpy(s, pre);
    memset(s + strlen(pre), c, (size_t)n);
    strcpy(s + strlen(pre) + (size_t)n, post);
    return s;
}

TEST(short_unanchored_matches_anywhere)
{
    rlx_grammar *g = pattern("ab+");
    ASSERT(g);
    ASSERT_EQ(takes(g, "aab"), 1); /* an "a" that does not begin the match */
    ASSERT_EQ(takes(g, "xxabbby"), 1);
    ASSERT_EQ(takes(g, "a b"), 0);
    rlx_grammar_free(g);
    g = pattern("\\d{3}$");
    ASSERT(g);
    ASSERT_EQ(takes(g, "a1b123"), 1);
    ASSERT_EQ(takes(g, "123a"), 0);
    rlx_grammar_free(g);
}

TEST(long_unanchored_stays_within_the_stacks)
{
    static const char *const res[] = {".{100}", ".{1000}", "(.{1000})", "x?.{500}"};
    for (size_t i = 0; i < RLX_ARRAY_LEN(res); i++) {
        rlx_grammar *g = pattern(res[i]);
        ASSERT(g);
        char *ok = repeat("", 'x', 1200, ""), *esc = repeat("\\n\\t", 'y', 1100, "\\\"z"), *shortx = repeat("", 'x', 99, "");
        ASSERT_MSG(takes(g, ok) == 1, "%s", res[i]);
        ASSERT_MSG(takes(g, esc) == 1, "%s", res[i]);
        ASSERT_MSG(takes(g, shortx) == 0, "%s", res[i]);
        free(ok), free(esc), free(shortx);
        rlx_grammar_free(g);
    }
    /* with $: exactly the count after what cannot begin it (line terminators for .) */
    rlx_grammar *g = pattern(".{100}$");
    ASSERT(g);
    char *x100 = repeat("\\n", 'x', 100, ""), *x101 = repeat("", 'x', 101, "");
    ASSERT_EQ(takes(g, x100), 1);
    ASSERT_EQ(takes(g, x101), 0); /* valid, not generated: the match begins at the first x */
    free(x100), free(x101);
    rlx_grammar_free(g);
    /* digits: anything but a digit, then the 40 digits, then anything */
    g = pattern("\\d{40}");
    ASSERT(g);
    char *d = repeat("abc ", '7', 40, "xyz 1"), *d2 = repeat("a1b", '7', 40, "");
    ASSERT_EQ(takes(g, d), 1);
    ASSERT_EQ(takes(g, d2), 0);
    free(d), free(d2);
    rlx_grammar_free(g);
    /* one branch anchored, one long: each keeps its own start */
    g = pattern("^x|\\d{50}");
    ASSERT(g);
    char *e = repeat("ab", '5', 50, "");
    ASSERT_EQ(takes(g, "xyz"), 1);
    ASSERT_EQ(takes(g, e), 1);
    ASSERT_EQ(takes(g, "ab"), 0);
    free(e);
    rlx_grammar_free(g);
}

TEST(empty_match_takes_every_string)
{
    rlx_grammar *g = pattern("a{0,100}");
    ASSERT(g);
    ASSERT_EQ(takes(g, "zzz"), 1);
    ASSERT_EQ(takes(g, ""), 1);
    char *a = repeat("", 'a', 300, "b");
    ASSERT_EQ(takes(g, a), 1);
    free(a);
    rlx_grammar_free(g);
}

TEST_MAIN(TEST_ENTRY(short_unanchored_matches_anywhere), TEST_ENTRY(long_unanchored_stays_within_the_stacks),
          TEST_ENTRY(empty_match_takes_every_string))
