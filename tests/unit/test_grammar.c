/* test_grammar.c - GBNF compiler and recogniser (engine/grammar.c): what a grammar accepts and
 * refuses, UTF-8 split across tokens, completion, compile errors with positions, limits, and the
 * trie mask against a token-by-token check. */
#include "tests/rlx_test.h"
#include "engine/grammar.h"

static rlx_grammar *compile(const char *src)
{
    rlx_error e = {0};
    rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, &e);
    if (!g) fprintf(stderr, "  compile failed: %s\n", e.msg);
    return g;
}

/* Does the grammar accept the whole text (fed in pieces of `step` bytes) as a complete sentence? */
static int full_match(const rlx_grammar *g, const char *text, size_t step)
{
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    if (!s) return -1;
    size_t n = strlen(text);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i += step) {
        size_t k = n - i < step ? n - i : step;
        if (rlx_grammar_accept(s, text + i, k)) ok = 0;
    }
    if (ok && !rlx_grammar_can_end(s)) ok = 0;
    rlx_grammar_state_free(s);
    return ok;
}

/* Is text a prefix the grammar can continue (not necessarily complete)? */
static int prefix_ok(const rlx_grammar *g, const char *text)
{
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    int ok = rlx_grammar_allows(s, text, strlen(text));
    rlx_grammar_state_free(s);
    return ok;
}

static const char json_gbnf[] =
    "# JSON, as llama.cpp's grammars/json.gbnf has it\n"
    "root   ::= value\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? \"]\" ws\n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

TEST(literals_and_alternatives)
{
    rlx_grammar *g = compile("root ::= \"yes\" | \"no\"\n");
    ASSERT(g != NULL);
    ASSERT_EQ(full_match(g, "yes", 1), 1);
    ASSERT_EQ(full_match(g, "no", 2), 1);
    ASSERT_EQ(full_match(g, "ye", 1), 0);   /* incomplete */
    ASSERT_EQ(full_match(g, "yess", 1), 0);
    ASSERT_EQ(prefix_ok(g, "ye"), 1);
    ASSERT_EQ(prefix_ok(g, "x"), 0);
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    ASSERT(!rlx_grammar_can_end(s));
    ASSERT_EQ(rlx_grammar_accept(s, "n", 1), 0);
    ASSERT_EQ(rlx_grammar_accept(s, "x", 1), RLX_EINVAL); /* refused, state unchanged */
    ASSERT_EQ(rlx_grammar_accept(s, "o", 1), 0);
    ASSERT(rlx_grammar_can_end(s) && rlx_grammar_must_end(s));
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
}

TEST(classes_ranges_and_repetition)
{
    rlx_grammar *g = compile("root ::= [a-c]{2,3} [^x-z0]? \".\"* [0-9]{2,}\n");
    ASSERT(g != NULL);
    ASSERT_EQ(full_match(g, "ab12", 1), 1);
    ASSERT_EQ(full_match(g, "abc12", 1), 1);
    ASSERT_EQ(full_match(g, "abcq...123", 3), 1);
    ASSERT_EQ(full_match(g, "a12", 1), 0);     /* {2,3}: one is too few */
    ASSERT_EQ(full_match(g, "abcab12", 1), 0);  /* four letters: the 4th is not [^x-z0] followed by digits */
    ASSERT_EQ(full_match(g, "abx12", 1), 0);    /* x is excluded */
    ASSERT_EQ(full_match(g, "ab1", 1), 0);      /* {2,}: one digit is too few */
    ASSERT_EQ(full_match(g, "ab1234567", 4), 1);
    rlx_grammar_free(g);
    g = compile("root ::= (\"ab\" | \"c\")+ \"!\"? [\\x41-\\x43\\u00e9]\n");
    ASSERT(g != NULL);
    ASSERT_EQ(full_match(g, "abcabB", 1), 1);
    ASSERT_EQ(full_match(g, "c!\xc3\xa9", 1), 1);
    ASSERT_EQ(full_match(g, "B", 1), 0);
    ASSERT_EQ(full_match(g, "aB", 1), 0);
    rlx_grammar_free(g);
}

/* x* and x+ where x can match nothing ((a|)*, (a? b?)*): the repetition of x's non-empty
 * matches, the same language, instead of a left-recursive rule */
TEST(repeating_what_can_match_nothing)
{
    static const struct { const char *src, *yes[4], *no[3]; } cases[] = {
        {"root ::= (\"a\" | \"\")*\n", {"", "a", "aaa"}, {"b", "ab"}},
        {"root ::= (\"a\"? \"b\"?)* \"c\"\n", {"c", "abc", "bac", "aabbbac"}, {"", "abca", "cc"}},
        {"root ::= x+ \"!\"\nx ::= y? z?\ny ::= \"q\"\nz ::= [0-9]{0,2}\n", {"!", "q!", "q12q9!", "123!"}, {"a!", "q"}},
        {"root ::= (\"\")* \"z\"\n", {"z"}, {"", "zz"}},
        {"root ::= ((\"a\" | \"\")* \"-\"?)*\n", {"", "a-a", "--aa-", "aaa"}, {"b", "a-b"}},
        {"root ::= (e | \"x\")*\ne ::= \"\" | \"y\" e\n", {"", "xyx", "yy"}, {"z"}},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(cases); i++) {
        rlx_grammar *g = compile(cases[i].src);
        ASSERT_MSG(g != NULL, "%s", cases[i].src);
        for (int k = 0; k < 4 && cases[i].yes[k]; k++)
            ASSERT_MSG(full_match(g, cases[i].yes[k], 1) == 1, "%s should accept '%s'", cases[i].src, cases[i].yes[k]);
        for (int k = 0; k < 3 && cases[i].no[k]; k++)
            ASSERT_MSG(full_match(g, cases[i].no[k], 1) == 0, "%s should refuse '%s'", cases[i].src, cases[i].no[k]);
        rlx_grammar_free(g);
    }
}

/* Nested repetitions of what may be empty reach the same stacks by exponentially many paths
 * (((a{0,10}){0,10}){0,10}: 11^3 ways to read nothing), and popping through them recursed with
 * no bound: such a grammar froze the worker for good (and the 999 form overflowed the thread's
 * stack, killing the daemon). An expansion now skips stacks it has expanded already, so these
 * are quick and exact; past its step and nesting budgets it is RLX_ERANGE, never a crash. */
TEST(nested_repetitions_of_the_empty)
{
    static const struct { const char *src, *yes[3], *no[2]; } cases[] = {
        {"root ::= ((\"a\"{0,10}){0,10}){0,10} \"b\"\n", {"b", "aaab", "aaaaaaaaaaaaaaaaaaaaaaaaab"}, {"", "ba"}},
        {"root ::= ((\"a\"?){0,8}){0,8}\n", {"", "a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
         {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "b"}},
        {"root ::= (\"a\"?)* \"b\"\n", {"b", "aab"}, {"a"}},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(cases); i++) {
        rlx_grammar *g = compile(cases[i].src);
        ASSERT_MSG(g != NULL, "%s", cases[i].src);
        for (int k = 0; k < 3 && cases[i].yes[k]; k++)
            ASSERT_MSG(full_match(g, cases[i].yes[k], 1) == 1, "%s should accept '%s'", cases[i].src, cases[i].yes[k]);
        for (int k = 0; k < 2 && cases[i].no[k]; k++)
            ASSERT_MSG(full_match(g, cases[i].no[k], 1) == 0, "%s should refuse '%s'", cases[i].src, cases[i].no[k]);
        rlx_grammar_free(g);
    }
    /* too many distinct stacks to expand: a clear error at the start, not a blown stack */
    rlx_grammar *g = compile("root ::= ((\"a\"{0,999}){0,999}){0,999}\n");
    ASSERT(g != NULL);
    rlx_error e = {0};
    rlx_grammar_state *s = rlx_grammar_state_new(g, &e);
    if (s) { /* or at the first character */
        int rc = 0;
        for (int k = 0; k < 100 && !rc; k++) rc = rlx_grammar_accept(s, "a", 1);
        ASSERT_EQ(rc, RLX_ERANGE);
        rlx_grammar_state_free(s);
    } else {
        ASSERT_EQ(e.code, RLX_ERANGE);
        ASSERT_MSG(strstr(e.msg, "too ambiguous"), "%s", e.msg);
    }
    rlx_grammar_free(g);
}

/* A set of many atoms (unsorted, overlapping, singles and ranges, multi-byte code points) is
 * matched by binary search over its merged runs: the same answers as the atoms say, for whole
 * characters and for a lead byte alone (the half-read check); mask_equals_token_checks and
 * test_grammar_tables compare whole masks. */
TEST(big_character_sets)
{
    static const uint32_t atoms[][2] = {{'z', 'z'}, {'a', 'c'}, {'x', 'x'}, {'b', 'f'}, {'0', '4'}, {'3', '9'}, {0xe9, 0xe9},
                                        {0x400, 0x44f}, {0x4e00, 0x4e10}, {0x1f600, 0x1f60f}, {'_', '_'}, {'-', '-'},
                                        {0x4e05, 0x4e20}, {'A', 'A'}};
    char src[512];
    for (int neg = 0; neg < 2; neg++) {
        size_t at = (size_t)snprintf(src, sizeof src, "root ::= [%s", neg ? "^" : "");
        for (size_t i = 0; i < RLX_ARRAY_LEN(atoms); i++) {
            at += (size_t)snprintf(src + at, sizeof src - at, "\\U%08X", atoms[i][0]);
            if (atoms[i][1] != atoms[i][0]) at += (size_t)snprintf(src + at, sizeof src - at, "-\\U%08X", atoms[i][1]);
        }
        snprintf(src + at, sizeof src - at, "]+\n");
        rlx_grammar *g = compile(src);
        ASSERT_MSG(g != NULL, "%s", src);
        static const uint32_t probe[] = {'a', 'c', 'd', 'f', 'g', 'w', 'x', 'y', 'z', '{', '0', '9', ':', '/', '_', '-', 'A', 'B',
                                         0xe8, 0xe9, 0xea, 0x3ff, 0x400, 0x44f, 0x450, 0x4dff, 0x4e00, 0x4e15, 0x4e20, 0x4e21,
                                         0x1f5ff, 0x1f600, 0x1f60f, 0x1f610};
        for (size_t i = 0; i < RLX_ARRAY_LEN(probe); i++) {
            uint32_t c = probe[i];
            bool in = false;
            for (size_t k = 0; k < RLX_ARRAY_LEN(atoms); k++) in |= atoms[k][0] <= c && c <= atoms[k][1];
            char u[5] = {0};
            if (c < 0x80) u[0] = (char)c;
            else if (c < 0x800) u[0] = (char)(0xc0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3f));
            else if (c < 0x10000) u[0] = (char)(0xe0 | c >> 12), u[1] = (char)(0x80 | (c >> 6 & 0x3f)), u[2] = (char)(0x80 | (c & 0x3f));
            else u[0] = (char)(0xf0 | c >> 18), u[1] = (char)(0x80 | (c >> 12 & 0x3f)), u[2] = (char)(0x80 | (c >> 6 & 0x3f)),
                 u[3] = (char)(0x80 | (c & 0x3f));
            ASSERT_MSG(full_match(g, u, 1) == (in != neg), "U+%04X in [%s...]: %d", c, neg ? "^" : "", full_match(g, u, 1));
            if (strlen(u) > 1 && in != neg) /* the lead byte alone: a character of the set can start so */
                ASSERT_MSG(prefix_ok(g, (char[2]){u[0], 0}) == 1, "lead byte of U+%04X", c);
        }
        rlx_grammar_free(g);
    }
}

TEST(utf8_split_across_pieces)
{
    /* U+00E9 (2 bytes), U+65E5 (3 bytes), U+1F600 (4 bytes) */
    rlx_grammar *g = compile("root ::= \"\xc3\xa9\" [\xe6\x97\xa5-\xe6\x9c\xac]* \"\\U0001F600\"\n");
    ASSERT(g != NULL);
    const char *text = "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80";
    for (size_t step = 1; step <= 5; step++) ASSERT_EQ(full_match(g, text, step), 1);
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    ASSERT_EQ(rlx_grammar_accept(s, "\xc3", 1), 0); /* half a character: may go on, not end */
    ASSERT(!rlx_grammar_can_end(s));
    ASSERT(!rlx_grammar_allows(s, "\xa8", 1));      /* would be U+00E8 */
    ASSERT(!rlx_grammar_allows(s, "a", 1));         /* not a continuation byte */
    ASSERT_EQ(rlx_grammar_accept(s, "\xa9\xe6", 2), 0);
    ASSERT(rlx_grammar_allows(s, "\x97", 1));       /* U+65C0..U+65FF may hold U+65E5 */
    ASSERT(!rlx_grammar_allows(s, "\x80\x80", 2));  /* U+6000 is below the range */
    rlx_grammar_state_free(s);
    /* invalid UTF-8 is never accepted, even by '.' */
    rlx_grammar_free(g);
    g = compile("root ::= .*\n");
    ASSERT(g != NULL);
    ASSERT_EQ(prefix_ok(g, "\xff"), 0);
    ASSERT_EQ(prefix_ok(g, "\x80"), 0);
    /* only the shortest form of a code point: the overlong "{" (C1 BB) a byte-fallback vocabulary
     * can spell is refused, as are surrogates and code points past U+10FFFF */
    const char *invalid[] = {"\xc1\xbb", "\xc0\x80", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xf0\x8f\xbf\xbf",
                             "\xf4\x90\x80\x80", "\xf5\x80\x80\x80"};
    for (size_t i = 0; i < RLX_ARRAY_LEN(invalid); i++) ASSERT_MSG(!prefix_ok(g, invalid[i]), "invalid[%zu]", i);
    ASSERT_EQ(full_match(g, "\xed\x9f\xbf\xf4\x8f\xbf\xbf\xe0\xa0\x80\xc2\x80", 1), 1); /* the edges */
    ASSERT_EQ(full_match(g, "any \xe2\x82\xac text", 1), 1);
    rlx_grammar_free(g);
    /* a lead byte is refused at once when no code point of its length fits ("{" is ASCII) */
    g = compile("root ::= \"{\" [\\u0800-\\u0FFF]\n");
    ASSERT(g != NULL);
    ASSERT_EQ(prefix_ok(g, "\xe0"), 0);
    ASSERT_EQ(prefix_ok(g, "\xc1"), 0);
    ASSERT_EQ(prefix_ok(g, "{\xe0"), 1);
    ASSERT_EQ(prefix_ok(g, "{\xe0\x9f"), 0); /* overlong */
    ASSERT_EQ(prefix_ok(g, "{\xe1"), 0);      /* U+1000 and up */
    ASSERT_EQ(full_match(g, "{\xe0\xbf\xbf", 1), 1);
    rlx_grammar_free(g);
}

TEST(json_grammar)
{
    rlx_grammar *g = compile(json_gbnf);
    ASSERT(g != NULL);
    const char *good[] = {"{}", "[]", "{\"a\": [1, 2.5, -3e7, true, null, \"x\\n\\u00e9\"]}", "\"plain\"", "0",
                          "{\"nested\": {\"k\": [[], {}]}}", "-12.5E+3"};
    const char *bad[] = {"{", "[1,]", "{\"a\" 1}", "01", "\"unterminated", "{\"a\":1}}", "tru", "\"ctrl\x01\""};
    for (size_t i = 0; i < RLX_ARRAY_LEN(good); i++) ASSERT_MSG(full_match(g, good[i], 3) == 1, "good[%zu] %s", i, good[i]);
    for (size_t i = 0; i < RLX_ARRAY_LEN(bad); i++) ASSERT_MSG(full_match(g, bad[i], 2) == 0, "bad[%zu] %s", i, bad[i]);
    rlx_grammar_free(g);
}

static void expect_error(const char *src, const char *needle)
{
    rlx_error e = {0};
    rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, &e);
    if (g) {
        rlx_grammar_free(g);
        fprintf(stderr, "  compiled but should not: %s\n", src);
        rlx_test_failed_ = 1;
        return;
    }
    if (!strstr(e.msg, needle)) {
        fprintf(stderr, "  error \"%s\" lacks \"%s\"\n", e.msg, needle);
        rlx_test_failed_ = 1;
    }
}

TEST(compile_errors_name_the_place)
{
    expect_error("root ::= foo\n", "'foo' is used but not defined");
    expect_error("start ::= \"a\"\n", "no rule named 'root'");
    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice");
    expect_error("root ::= \"abc\n", "line 1 column 10: unterminated string");
    expect_error("root ::= \"a\"\nx ::= [abc\n", "line 2 column 7: unterminated character class");
    expect_error("root ::= \"\\q\"\n", "unknown escape");
    expect_error("root ::= \"\\x4\"\n", "hex digits");
    expect_error("root ::= [z-a]\n", "below its start");
    expect_error("root ::= * \"a\"\n", "follows nothing");
    expect_error("root ::= \"a\"{3,2}\n", "below the minimum");
    expect_error("root ::= \"a\"{1001}\n", "over 1000");
    expect_error("root = \"a\"\n", "expected '::='");
    expect_error("root ::= (\"a\"\n", "unclosed");
    expect_error("root ::= root \"a\" | \"b\"\n", "'root' is left-recursive");
    expect_error("root ::= x \"a\"\nx ::= y? root\ny ::= \"b\"\n", "left-recursive"); /* through a nullable prefix */
    expect_error("root ::= \"a\" ]\n", "unexpected ']'");
    expect_error("root ::= \"a\" \xc3\xa9\n", "unexpected '\xc3\xa9'"); /* the whole character, not its first byte */
    expect_error("root ::= \"a\" \x01\n", "unexpected '\\x01'");
    /* no finite text: every way through recurses (a JSON schema whose required property is the
     * schema itself gives such a grammar); one way out is enough */
    expect_error("root ::= \"(\" root \")\"\n", "'root' matches no finite text");
    expect_error("root ::= a\na ::= \"x\" b | \"y\" a\nb ::= a \"z\"\n", "no finite text");
    rlx_grammar *out = compile("root ::= a\na ::= \"x\" b | \"y\" a\nb ::= a \"z\" | \"w\"\n");
    ASSERT(out != NULL);
    rlx_grammar_free(out);
    expect_error("", "no rule named 'root'");
    /* invalid UTF-8 in the source */
    expect_error("root ::= \"\xff\"\n", "invalid UTF-8");
    /* a surrogate escape can never match (UTF-8 text has none): named, not "allows no token" */
    expect_error("root ::= \"\\uD800\"\n", "line 1 column 11: U+D800 is a UTF-16 surrogate");
    expect_error("root ::= [\\uD800-\\uDFFF]\n", "holds only UTF-16 surrogates");
    rlx_grammar *ok = compile("root ::= [^\\uD800-\\uDFFF] [\\u0020-\\uFFFF]\n"); /* meaningful (if pointless) */
    ASSERT(ok != NULL);
    rlx_grammar_free(ok);
}

TEST(limits_are_errors_not_aborts)
{
    size_t n = RLX_GRAMMAR_MAX_SOURCE + 1;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    big[n] = 0;
    rlx_error e = {0};
    ASSERT(rlx_grammar_compile(big, n, NULL, &e) == NULL);
    ASSERT_EQ(e.code, RLX_ERANGE);
    free(big);
    /* a repeated term of 60000 optional symbols would expand to ~1.8e9 elements without its limit */
    size_t cap = 40 + 2 * 60000 + 40, at = 0;
    big = malloc(cap);
    at += (size_t)snprintf(big, cap, "root ::= x*\nx ::=");
    for (int i = 0; i < 60000; i++) big[at++] = ' ', big[at++] = 'o';
    at += (size_t)snprintf(big + at, cap - at, "\no ::= \"q\" | \"\"\n");
    e = (rlx_error){0};
    ASSERT(rlx_grammar_compile(big, at, NULL, &e) == NULL);
    ASSERT_EQ(e.code, RLX_ERANGE);
    ASSERT_MSG(strstr(e.msg, "optional terms"), "%s", e.msg);
    free(big);
    /* nesting deeper than a stack may hold: refused with RLX_ERANGE, state kept */
    rlx_grammar *g = compile("root ::= \"(\" root \")\" | \"x\"\n");
    ASSERT(g != NULL);
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    int rc = 0, depth = 0;
    while (depth < 5000 && !(rc = rlx_grammar_accept(s, "(", 1))) depth++;
    ASSERT_EQ(rc, RLX_ERANGE);
    ASSERT(depth > 100);
    ASSERT_EQ(rlx_grammar_accept(s, "x", 1), 0); /* the state is still usable */
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
    /* ambiguity: each "a" may start or continue one of several runs; duplicates merge */
    g = compile("root ::= (\"a\" | \"aa\" | \"aaa\")* \"b\"\n");
    ASSERT(g != NULL);
    char text[402];
    memset(text, 'a', 400);
    text[400] = 'b';
    text[401] = 0;
    ASSERT_EQ(full_match(g, text, 7), 1);
    rlx_grammar_free(g);
    /* ambiguity past the stack bound: each "a" may end the x* run or not, and x has 53
     * alternatives, so the 37th "a" needs over 2048 stacks; the checks say so before it */
    char amb[1024];
    size_t k = (size_t)snprintf(amb, sizeof amb, "root ::= x* x{900}\nx ::= \" \"");
    for (char c = 'a'; c <= 'z'; c++) k += (size_t)snprintf(amb + k, sizeof amb - k, " | \"%c\" | \"%c\"", c, c - 32);
    snprintf(amb + k, sizeof amb - k, "\n");
    ASSERT((g = compile(amb)) != NULL);
    s = rlx_grammar_state_new(g, NULL);
    int reads = 0;
    while (reads < 100 && rlx_grammar_token_check(s, 7, "a", 1) == 0) {
        ASSERT_EQ(rlx_grammar_accept(s, "a", 1), 0);
        reads++;
    }
    ASSERT_EQ(reads, 36);
    ASSERT_EQ(rlx_grammar_token_check(s, 7, "a", 1), RLX_ERANGE);
    ASSERT_EQ(rlx_grammar_token_check(s, 7, "1", 1), RLX_EINVAL);
    ASSERT_EQ(rlx_grammar_accept(s, "a", 1), RLX_ERANGE);
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
}

/* A small vocabulary with multi-byte pieces, partial UTF-8, duplicates and empty (special)
 * tokens; the trie mask must equal rlx_grammar_allows token by token at every step of a walk. */
TEST(mask_equals_token_checks)
{
    static const char *const pieces[] = {
        "{", "}", "{\"", "\":", "\"", "a", "ab", "abc", "b", ",", ", \"", "1", "12", "-", ".5", "e", "true", "tru",
        "null", "[", "]", "[]", "{}", " ", "\n", "\xc3", "\xa9", "\xc3\xa9", "\xe6\x97", "\xa5", "\\", "\\u00", "e9",
        "x", "\"}", "\"]", "a\"", "", "1.", "0", "a",
    };
    enum { NV = RLX_ARRAY_LEN(pieces) };
    size_t lens[NV];
    for (int i = 0; i < NV; i++) lens[i] = strlen(pieces[i]);
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(NV, pieces, lens);
    ASSERT(v != NULL);
    rlx_grammar *g = compile(json_gbnf);
    ASSERT(g != NULL);
    uint64_t rng = 42;
    for (int walk = 0; walk < 40; walk++) {
        rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
        for (int step = 0; step < 30; step++) {
            uint8_t mask[NV];
            int64_t n = rlx_grammar_mask(s, v, mask);
            ASSERT(n >= 0);
            int64_t count = 0;
            for (int t = 0; t < NV; t++) {
                int want = lens[t] > 0 && rlx_grammar_allows(s, pieces[t], lens[t]);
                ASSERT_MSG(mask[t] == want, "walk %d step %d token %d '%s': mask %d, check %d", walk, step, t, pieces[t],
                           mask[t], want);
                count += want;
            }
            ASSERT_EQ(n, count);
            if (!n) break;
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int64_t pick = (int64_t)((rng >> 33) % (uint64_t)n);
            for (int t = 0; t < NV; t++)
                if (mask[t] && pick-- == 0) {
                    ASSERT_EQ(rlx_grammar_accept(s, pieces[t], lens[t]), 0);
                    break;
                }
        }
        rlx_grammar_state *c = rlx_grammar_state_clone(s);
        ASSERT(c != NULL);
        ASSERT_EQ(rlx_grammar_can_end(c), rlx_grammar_can_end(s));
        rlx_grammar_state_free(c);
        rlx_grammar_state_free(s);
    }
    rlx_grammar_free(g);
    rlx_grammar_vocab_free(v);
}

/* response_format json_object: one JSON object, over as soon as its brace closes */
TEST(builtin_json_object)
{
    rlx_grammar *g = compile(rlx_grammar_json_object);
    ASSERT(g != NULL);
    ASSERT_EQ(full_match(g, "{\"a\": [1, -2.5e3, {\"b\": null}], \"c\": \"x\\u00e9\\n\"}", 3), 1);
    ASSERT_EQ(full_match(g, "{}", 1), 1);
    ASSERT_EQ(full_match(g, "[1]", 1), 0);
    ASSERT_EQ(full_match(g, "\"s\"", 1), 0);
    ASSERT_EQ(prefix_ok(g, "{} "), 0);
    ASSERT_EQ(prefix_ok(g, "{\"a\":01"), 0);
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    ASSERT_EQ(rlx_grammar_accept(s, "{\"k\": true", 10), 0);
    ASSERT(!rlx_grammar_can_end(s));
    ASSERT_EQ(rlx_grammar_accept(s, "}", 1), 0);
    ASSERT(rlx_grammar_can_end(s) && rlx_grammar_must_end(s));
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
}


/* ---- the few strings before a character (rlx_grammar_strings_before) ---- */

typedef struct listed { char s[8][16]; int n; } listed;

static int list_one(void *ctx, const uint32_t *cps, size_t n)
{
    listed *l = ctx;
    if (l->n == 8 || n >= 16) return 99;
    for (size_t i = 0; i < n; i++) l->s[l->n][i] = (char)cps[i];
    l->s[l->n++][n] = 0;
    return 0;
}

/* The strings of `src` after `prefix`, before '"'; returns the call's code, *l what it listed. */
static int strings_after(const char *src, const char *prefix, size_t max_strings, size_t max_steps, listed *l)
{
    rlx_grammar *g = compile(src);
    rlx_grammar_state *s = g ? rlx_grammar_state_new(g, NULL) : NULL;
    memset(l, 0, sizeof *l);
    size_t count = 0;
    int rc = !s || rlx_grammar_accept(s, prefix, strlen(prefix)) ? -100
             : rlx_grammar_strings_before(s, '"', '\\', max_strings, 16, max_steps, list_one, l, &count);
    if (!rc && count != (size_t)l->n) rc = -101;
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
    return rc;
}

TEST(strings_before_a_character)
{
    listed l;
    /* a few keys, in code point order whatever the grammar's; one that is a prefix of another */
    ASSERT_EQ(strings_after("root ::= \"{\\\"\" (\"fr\" | \"en\" | \"de\" | \"d\") \"\\\":1}\"", "{\"", 8, 1000, &l), 0);
    ASSERT_EQ(l.n, 4);
    ASSERT_STR_EQ(l.s[0], "d");
    ASSERT_STR_EQ(l.s[1], "de");
    ASSERT_STR_EQ(l.s[2], "en");
    ASSERT_STR_EQ(l.s[3], "fr");
    /* classes and counted repetitions: x0..x2, and the empty string where the grammar allows it */
    ASSERT_EQ(strings_after("root ::= \"\\\"\" ([x] [0-2])? \"\\\"\"", "\"", 8, 1000, &l), 0);
    ASSERT_EQ(l.n, 4);
    ASSERT_STR_EQ(l.s[0], "");
    ASSERT_STR_EQ(l.s[3], "x2");
    /* paths that never reach the character do not count */
    ASSERT_EQ(strings_after("root ::= \"\\\"\" (\"ab\" \"\\\"\" | \"zz\")", "\"", 8, 1000, &l), 0);
    ASSERT_EQ(l.n, 1);
    ASSERT_STR_EQ(l.s[0], "ab");
    /* an escaped stop is part of the string (a JSON key q" written q\"), an escaped escape is not
     * an escape (s\\ ends before the quote) */
    const char *esc = "root ::= \"\\\"\" ( \"q\\\\\\\"\" | \"r\" | \"s\\\\\\\\\" \"\\\"\" \"t\" ) \"\\\"\"";
    ASSERT_EQ(strings_after(esc, "\"", 8, 1000, &l), 0);
    ASSERT_EQ(l.n, 3);
    ASSERT_STR_EQ(l.s[0], "q\\\"");
    ASSERT_STR_EQ(l.s[1], "r");
    ASSERT_STR_EQ(l.s[2], "s\\\\");
    {
        rlx_grammar *g = compile(esc);
        rlx_grammar_state *s = g ? rlx_grammar_state_new(g, NULL) : NULL;
        ASSERT(s && !rlx_grammar_accept(s, "\"", 1));
        size_t count = 0; /* no escape: the quote after q\ ends a string */
        memset(&l, 0, sizeof l);
        ASSERT_EQ(rlx_grammar_strings_before(s, '"', UINT32_MAX, 8, 16, 100, list_one, &l, &count), 0);
        ASSERT_EQ(l.n, 3);
        ASSERT_STR_EQ(l.s[0], "q\\");
        rlx_grammar_state_free(s);
        rlx_grammar_free(g);
    }
    /* no string: the character cannot come */
    ASSERT_EQ(strings_after("root ::= \"\\\"\" \"a\"", "\"", 8, 1000, &l), 0);
    ASSERT_EQ(l.n, 0);
    /* not a short list: an open repetition, a negated set, any character, a wide set, too many
     * strings, too many steps, a token reference */
    ASSERT_EQ(strings_after("root ::= \"\\\"\" [a-c]+ \"\\\"\"", "\"", 8, 1000, &l), RLX_ERANGE);
    ASSERT_EQ(strings_after("root ::= \"\\\"\" [^\"]* \"\\\"\"", "\"", 8, 1000, &l), RLX_ERANGE);
    ASSERT_EQ(strings_after("root ::= \"\\\"\" . \"\\\"\"", "\"", 8, 1000, &l), RLX_ERANGE);
    ASSERT_EQ(strings_after("root ::= \"\\\"\" [ -~] \"\\\"\"", "\"", 64, 1000, &l), RLX_ERANGE);
    ASSERT_EQ(strings_after("root ::= \"\\\"\" [a-i] \"\\\"\"", "\"", 8, 1000, &l), RLX_ERANGE);
    ASSERT_EQ(strings_after("root ::= \"\\\"\" [a-f] [a-f] \"\\\"\"", "\"", 64, 5, &l), RLX_ERANGE);
    ASSERT_EQ(strings_after("root ::= \"\\\"\" <[42]> \"\\\"\"", "\"", 8, 1000, &l), RLX_ERANGE);
    /* the callback's own code stops the walk */
    ASSERT_EQ(strings_after("root ::= \"\\\"\" [a-i] [a-i] \"\\\"\"", "\"", 100, 1000, &l), 99);
    /* inside a character: not a place to start */
    rlx_grammar *g = compile("root ::= [\\u00e9] \"\\\"\"");
    rlx_grammar_state *s = g ? rlx_grammar_state_new(g, NULL) : NULL;
    ASSERT(s);
    ASSERT_EQ(rlx_grammar_accept(s, "\xc3", 1), 0);
    size_t count = 7;
    ASSERT_EQ(rlx_grammar_strings_before(s, '"', '\\', 8, 16, 100, list_one, &l, &count), RLX_ERANGE);
    ASSERT_EQ(count, 7u);
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
}

TEST_MAIN(TEST_ENTRY(builtin_json_object), TEST_ENTRY(strings_before_a_character), TEST_ENTRY(literals_and_alternatives), TEST_ENTRY(classes_ranges_and_repetition),
          TEST_ENTRY(repeating_what_can_match_nothing), TEST_ENTRY(nested_repetitions_of_the_empty), TEST_ENTRY(big_character_sets),
          TEST_ENTRY(utf8_split_across_pieces), TEST_ENTRY(json_grammar), TEST_ENTRY(compile_errors_name_the_place),
          TEST_ENTRY(limits_are_errors_not_aborts), TEST_ENTRY(mask_equals_token_checks))
