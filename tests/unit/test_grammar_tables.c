/* test_grammar_tables.c - masks from per-position tables (engine/grammar_tables.c through
 * rlx_grammar_cache_fast_mask) equal the reference trie walk (rlx_grammar_mask) bit for bit: at
 * every step of random walks over random GBNF grammars, JSON Schemas and json.gbnf, on a
 * vocabulary of tricky pieces (partial UTF-8 across tokens, `":` and `},` straddling tokens,
 * escapes, whitespace runs) plus random byte strings, and on the real 151,643-token Qwen2
 * vocabulary; up to the end of generation (a complete value, where only what may follow the end
 * is allowed); through a store so small that tables are evicted and rebuilt; with tables counted
 * by code points (grammar_tclass.c) where a repetition allows it, and with that off. */
#include "tests/rlx_test.h"
#include <pthread.h>
#include <time.h>
#include "engine/grammar.h"
#include "engine/grammar_internal.h"
#include "engine/json_schema.h"
#include "models/gguf.h"
#include "models/tokenizer.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((rng >> 33) % n);
}

/* ---- a vocabulary of tricky pieces and random byte strings ---- */

static const char *const fixed[] = {
    "{", "}", "{\"", "\":", "\": ", "\":\"", "\"", "\",", "\", \"", "\"}", "\"},", "\"]", "\"]}", "},", "}}", "]}",
    "a", "ab", "abc", "b", "c", "x", "z", ",", ", ", ",\"", "1", "12", "123", "0", "-", "-1", ".", ".5", "e", "E+",
    "e-1", "true", "tru", "e}", "false", "null", "nul", "l", "[", "]", "[]", "{}", "[\"", " ", "  ", "\n", "\n ",
    "\t", " \"", "\xc3", "\xa9", "\xc3\xa9", "\"\xc3", "\xe6", "\xe6\x97", "\x97\xa5", "\xa5", "\xe6\x97\xa5",
    "\xa5\"", "\xf0\x9f", "\x98\x80", "\xf0\x9f\x98\x80", "\x9f\x98", "\x80\"}", "\\", "\\\"", "\\\\", "\\u",
    "\\u00", "e9", "00e9", "\\n", "\\t", "\\/", "a\"", "ab\":", "x\",\"", "abc\"}", "1,", "1}", "12]", "0.", "1e",
    "admin", "user", "guest", "\"admin\"", "@", ".com", "com\"", "-0", "2024", "-01-", "T12", ":00", "Z\"", "name",
    "\"name\"", "\"age\":", "age", "ab\\", "\x7f", "\x01", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90", "\xff",
    "\xc3\xa9\xc3", "\xc3\xa9\xc3\xa9\xc3", "ab\xc3", "a\x80", /* characters, then a half one or a broken one */
};
enum { N_FIXED = RLX_ARRAY_LEN(fixed), N_RAND = 1500, NV = N_FIXED + N_RAND + 2 };

static const char alphabet[] = "\"\\:,{}[] \nabcxyz019.-+eEu@\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80";

typedef struct vocab { char *texts[NV]; size_t lens[NV]; rlx_grammar_vocab *v; } vocab;

static bool vocab_make(vocab *vb)
{
    int n = 0;
    for (int i = 0; i < N_FIXED; i++) {
        vb->lens[n] = strlen(fixed[i]);
        vb->texts[n] = malloc(vb->lens[n] + 1);
        memcpy(vb->texts[n], fixed[i], vb->lens[n] + 1);
        n++;
    }
    vb->texts[n] = calloc(1, 1); /* a special token: no bytes */
    vb->lens[n++] = 0;
    vb->texts[n] = malloc(2); /* a duplicate of a piece */
    memcpy(vb->texts[n], "ab", 2);
    vb->lens[n++] = 2;
    for (int i = 0; i < N_RAND; i++) {
        size_t len = 1 + rnd(6);
        vb->texts[n] = malloc(len);
        for (size_t k = 0; k < len; k++) vb->texts[n][k] = alphabet[rnd(sizeof alphabet - 1)];
        vb->lens[n++] = len;
    }
    vb->v = rlx_grammar_vocab_new(NV, (const char *const *)vb->texts, vb->lens);
    return vb->v != NULL;
}

static void vocab_free(vocab *vb)
{
    for (int i = 0; i < NV; i++) free(vb->texts[i]);
    rlx_grammar_vocab_free(vb->v);
}

/* ---- the check ---- */

/* Random walks over g: at each step the fast mask (and the cached one) must equal the reference
 * walk's. Returns the steps checked, -1 on a mismatch (printed). *ends counts walks that reached
 * a state where the grammar may end. */
static int walk_check(rlx_grammar_cache *c, const rlx_grammar *g, const rlx_grammar_vocab *v, int32_t n_vocab,
                      char *const *texts, const size_t *lens, int walks, int max_steps, int *ends)
{
    uint8_t *mask = malloc((size_t)n_vocab);
    uint64_t *bits = malloc(((size_t)n_vocab + 63) / 64 * 8);
    int steps = 0;
    for (int w = 0; w < walks && steps >= 0; w++) {
        rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
        if (!s) {
            steps = -1;
            break;
        }
        bool ended = false;
        for (int step = 0; step < max_steps; step++) {
            int64_t n = rlx_grammar_mask(s, v, mask);
            int64_t fn = rlx_grammar_cache_fast_mask(c, s, v, bits);
            int64_t cn = -1;
            int rc = 0;
            const uint64_t *cb = rlx_grammar_cache_mask(c, s, v, &cn, &rc);
            if (n < 0 || fn != n || !cb || cn != n) {
                fprintf(stderr, "  walk %d step %d: reference %lld, fast %lld, cached %lld (rc %d)\n", w, step,
                        (long long)n, (long long)fn, (long long)cn, rc);
                steps = -1;
                break;
            }
            for (int32_t t = 0; t < n_vocab && steps >= 0; t++) {
                int f = (int)((bits[t / 64] >> (t % 64)) & 1), k = (int)((cb[t / 64] >> (t % 64)) & 1);
                if (mask[t] != f || mask[t] != k) {
                    fprintf(stderr, "  walk %d step %d token %d '%.*s': reference %d, fast %d, cached %d\n", w, step, t,
                            (int)lens[t], texts[t], mask[t], f, k);
                    steps = -1;
                }
            }
            if (steps < 0) break;
            steps++;
            if (rlx_grammar_can_end(s)) ended = true;
            if (!n || (rlx_grammar_can_end(s) && !rnd(4))) break;
            int64_t pick = rnd((uint32_t)n);
            for (int32_t t = 0; t < n_vocab; t++)
                if (mask[t] && pick-- == 0) {
                    if (rlx_grammar_accept(s, texts[t], lens[t])) steps = -1;
                    break;
                }
            if (steps < 0) break;
        }
        if (ended) (*ends)++;
        rlx_grammar_state_free(s);
    }
    free(mask);
    free(bits);
    return steps;
}

static rlx_grammar *compile(const char *src)
{
    rlx_error e = {0};
    rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, &e);
    if (!g) fprintf(stderr, "  compile failed: %s\n%s\n", e.msg, src);
    return g;
}

static rlx_grammar *from_schema(const char *json)
{
    cJSON *s = cJSON_Parse(json);
    rlx_error e = {0};
    char *gb = s ? rlx_json_schema_to_gbnf(s, &e) : NULL;
    cJSON_Delete(s);
    if (!gb) {
        fprintf(stderr, "  schema refused: %s\n", e.msg);
        return NULL;
    }
    rlx_grammar *g = compile(gb);
    free(gb);
    return g;
}

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":8},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"email\":{\"type\":\"string\",\"pattern\":"
    "\"^[a-z0-9.]+@[a-z0-9]+\\\\.[a-z]{2,4}$\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
    "\"maxLength\":4},\"maxItems\":3},\"role\":{\"enum\":[\"admin\",\"user\",\"guest\"]},\"active\":{\"type\":"
    "\"boolean\"},\"score\":{\"type\":\"number\"}},\"required\":[\"name\",\"age\",\"role\"]}",
    "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"number\"},{\"type\":\"null\"}]}}",
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#\"},\"b\":{\"const\":\"\xc3\xa9\xe6\x97\xa5\\\"x\"}}}",
    "{\"type\":\"string\",\"format\":\"date-time\"}",
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"format\":\"uuid\"},\"x\":{\"type\":"
    "\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}},\"required\":[\"id\"]}",
};

/* The table depths the checks run with: the default, and shallow ones where most stacks reach
 * below their top part (so the undecided tokens' suffix checks decide much of the mask); at
 * depth 2 a table holds at most 40 undecided pairs, so many positions look deeper. */
static const uint32_t depths[] = {RLX__GTABLE_DEPTH, 1, 2, 3};
static int count_mode = RLX__GCOUNT_AUTO; /* check_grammar's caches: when tables are counted (grammar_tclass.c) */

/* g checked with a fresh cache per depth, keeping at most `tables` tables (4 exact positions); the steps, -1 on a mismatch. */
static int check_grammar(size_t tables, size_t max_bytes, const rlx_grammar *g, const vocab *vb, int walks, int *ends,
                         rlx_grammar_cache_stats *st)
{
    int total = 0;
    for (size_t d = 0; d < RLX_ARRAY_LEN(depths); d++) {
        rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 4);
        if (!c || rlx__grammar_cache_configure_tables(c, depths[d], tables, max_bytes, depths[d] == 2 ? 40 : RLX__GTABLE_UNDECIDED)) {
            rlx_grammar_cache_free(c);
            return -1;
        }
        rlx__grammar_cache_count_tables(c, count_mode);
        uint64_t save = rng;
        int n = walk_check(c, g, vb->v, NV, vb->texts, vb->lens, walks, 40, ends);
        rng = save + 1;
        if (st) {
            rlx_grammar_cache_stats s;
            rlx_grammar_cache_get_stats(c, &s);
            st->tables_built += s.tables_built;
            st->table_hits += s.table_hits;
            st->table_evictions += s.table_evictions;
            st->tables_derived += s.tables_derived;
            st->tables_counted += s.tables_counted;
            st->table_classes += s.table_classes;
        }
        rlx_grammar_cache_free(c);
        if (n < 0) {
            fprintf(stderr, "  (table depth %u)\n", depths[d]);
            return -1;
        }
        total += n;
    }
    return total;
}

TEST(json_schemas_and_json_gbnf)
{
    vocab vb = {0};
    ASSERT(vocab_make(&vb));
    rlx_grammar_cache_stats st = {0};
    int total = 0, ends = 0;
    const int walks = getenv("RLX_MEMCHECK") ? 10 : 25; /* under valgrind fewer walks */
    for (size_t i = 0; i < RLX_ARRAY_LEN(schemas); i++) {
        rlx_grammar *g = from_schema(schemas[i]);
        ASSERT_MSG(g, "schema %zu", i);
        int n = check_grammar(RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES, g, &vb, walks, &ends, &st);
        rlx_grammar_free(g);
        ASSERT_MSG(n > 0, "schema %zu", i);
        total += n;
    }
    rlx_grammar *g = compile(rlx_grammar_json_object);
    ASSERT(g);
    int n = check_grammar(RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES, g, &vb, walks, &ends, &st);
    rlx_grammar_free(g);
    ASSERT(n > 0);
    total += n;
    fprintf(stderr, "  %d positions checked, %d walks reached an end; %llu tables built, %llu table hits\n", total,
            ends, (unsigned long long)st.tables_built, (unsigned long long)st.table_hits);
    ASSERT(total > 40 * walks);
    ASSERT(ends > 20);
    ASSERT(st.table_hits > st.tables_built); /* tables are shared between positions */
    vocab_free(&vb);
}

/* ---- random GBNF ---- */

static void put(char **p, const char *s)
{
    size_t n = strlen(s);
    memcpy(*p, s, n);
    *p += n;
}

static const char *const lits[] = {"\"a\"", "\"ab\"", "\"\\\"\"", "\"\\\\\"", "\":\"", "\"},\"", "\"\xc3\xa9\"",
                                   "\"\xe6\x97\xa5x\"", "\"\xf0\x9f\x98\x80\"", "\" \"", "\"1\"", "\"e9\"", "\"{\""};
static const char *const classes[] = {"[a-c]", "[^\"\\\\]", "[^\"\\\\\\x00-\\x1F]", "[0-9]", "[\xc3\xa0-\xc3\xbf]",
                                      "[^a]", ".", "[ \\n]", "[\xe6\x97\xa5\xf0\x9f\x98\x80x]", "[\"]"};
static const char *const posts[] = {"", "", "", "*", "+", "?", "{2}", "{0,3}", "{1,}"};

/* A term that cannot match the empty text: a literal or class, once or more. */
static void solid(char **p)
{
    static const char *const sposts[] = {"", "", "+", "{2}", "{1,3}"};
    put(p, rnd(2) ? lits[rnd(RLX_ARRAY_LEN(lits))] : classes[rnd(RLX_ARRAY_LEN(classes))]);
    put(p, sposts[rnd(RLX_ARRAY_LEN(sposts))]);
}

/* A term: a literal, a class, a reference to a later rule (no left recursion possible), or a
 * group; every rule and group alternative starts with a solid term, so none matches the empty
 * text and any repetition of them is fine. */
static void term(char **p, int rule, int n_rules, int depth)
{
    uint32_t k = rnd(depth < 2 ? 5 : 3);
    if (k == 0) put(p, lits[rnd(RLX_ARRAY_LEN(lits))]);
    else if (k == 1) put(p, classes[rnd(RLX_ARRAY_LEN(classes))]);
    else if (k == 2 && rule + 1 < n_rules) *p += sprintf(*p, "r%u", rule + 1 + rnd((uint32_t)(n_rules - rule - 1)));
    else if (k == 2) put(p, lits[rnd(RLX_ARRAY_LEN(lits))]);
    else {
        put(p, "(");
        int alts = 1 + (int)rnd(2);
        for (int a = 0; a < alts; a++) {
            if (a) put(p, " | ");
            int n = 1 + (int)rnd(3);
            solid(p);
            put(p, " ");
            for (int i = 1; i < n; i++) {
                term(p, rule, n_rules, depth + 1);
                put(p, " ");
            }
        }
        put(p, ")");
    }
    put(p, posts[rnd(RLX_ARRAY_LEN(posts))]);
}

static char *random_gbnf(void)
{
    char *src = malloc(1 << 16), *p = src;
    int n_rules = 2 + (int)rnd(4);
    for (int r = 0; r < n_rules; r++) {
        if (r) p += sprintf(p, "r%d ::= ", r);
        else put(&p, "root ::= ");
        int alts = 1 + (int)rnd(3);
        for (int a = 0; a < alts; a++) {
            if (a) put(&p, " | ");
            int n = 1 + (int)rnd(4);
            solid(&p);
            put(&p, " ");
            for (int i = 1; i < n; i++) {
                term(&p, r, n_rules, 0);
                put(&p, " ");
            }
            if (r && !rnd(3)) p += sprintf(p, "\"z\" r%d", r); /* right recursion after a byte */
        }
        put(&p, "\n");
    }
    *p = 0;
    return src;
}

TEST(random_grammars)
{
    vocab vb = {0};
    ASSERT(vocab_make(&vb));
    int total = 0, grammars = 0, ends = 0;
    rlx_grammar_cache_stats st = {0};
    bool mc = getenv("RLX_MEMCHECK") != NULL; /* under valgrind fewer */
    count_mode = RLX__GCOUNT_ALWAYS; /* the small classes too */
    for (int i = 0; i < (mc ? 40 : 150); i++) {
        char *src = random_gbnf();
        rlx_error e = {0};
        rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, &e);
        if (g) {
            int n = check_grammar(RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES, g, &vb, 5, &ends, &st);
            if (n < 0) fprintf(stderr, "  grammar:\n%s\n", src);
            rlx_grammar_free(g);
            free(src);
            ASSERT(n >= 0);
            total += n;
            grammars++;
        } else {
            if (getenv("RLX_TEST_VERBOSE")) fprintf(stderr, "  refused: %s\n%s\n", e.msg, src);
            free(src);
        }
    }
    fprintf(stderr, "  %d random grammars, %d positions, %d walks reached an end; %llu of %llu tables counted\n",
            grammars, total, ends, (unsigned long long)st.tables_counted, (unsigned long long)st.tables_built);
    count_mode = RLX__GCOUNT_AUTO;
    ASSERT(grammars > (mc ? 25 : 100));
    ASSERT(st.tables_counted > 0);
    ASSERT(total > (mc ? 300 : 1000));
    vocab_free(&vb);
}

static int prepared_walks(rlx_grammar_cache *c, const rlx_grammar *g, const vocab *vb, int walks, int *late);

/* Counted repetitions: a position's table derived from an earlier position's (a token of at
 * most `left` bytes taken from it, the longer ones walked) gives the reference masks, over terms
 * of one element, of a rule with escapes (mid-term positions), of several elements, with a
 * minimum, nested in another repetition, at every table depth; the toy vocabulary's tokens
 * (1 to 6 bytes) fall on both sides of `left`. A term that can match nothing is no chain (a
 * term would not take a byte): nothing derived there. */
TEST(counted_repetitions_derive_tables)
{
    static const char *const grammars[] = {
        "root ::= \"\\\"\" char{1,12} \"\\\"\"\nchar ::= [^\"\\\\] | \"\\\\\" ([\"\\\\nt] | \"u\" [0-9a-f]{4})\n",
        "root ::= \"[\" ( s ( \",\" s ){0,3} )? \"]\"\ns ::= \"\\\"\" [a-z0-9]{0,7} \"\\\"\"\n",
        "root ::= ( \"ab\" [0-9] ){2,7} \"}\"\n",
        "root ::= [a-z]{3,10} ( \":\" [0-9]{0,4} )?\n",
        "root ::= [a-z0-9 ]{0,300} \".\"\n", /* over 126 to go: copy_short's bound */
    };
    vocab vb = {0};
    ASSERT(vocab_make(&vb));
    const int walks = getenv("RLX_MEMCHECK") ? 6 : 20;
    for (size_t i = 0; i < RLX_ARRAY_LEN(grammars); i++) {
        rlx_grammar *g = compile(grammars[i]);
        ASSERT_MSG(g, "grammar %zu", i);
        rlx_grammar_cache_stats st = {0};
        count_mode = RLX__GCOUNT_OFF; /* (a count would take the positions derived here) */
        int ends = 0, n = check_grammar(RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES, g, &vb, walks, &ends, &st);
        count_mode = RLX__GCOUNT_AUTO;
        rlx_grammar_free(g);
        ASSERT_MSG(n > 0, "grammar %zu:\n%s", i, grammars[i]);
        fprintf(stderr, "  grammar %zu: %d positions, %llu tables built, %llu of them derived\n", i, n,
                (unsigned long long)st.tables_built, (unsigned long long)st.tables_derived);
        ASSERT_MSG(st.tables_derived > 0, "grammar %zu derived no table", i);
        /* the walk ahead derives too (it steps a copy of the grammar the cache keeps) */
        rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 4);
        g = compile(grammars[i]);
        rlx_grammar_state *s = g && c ? rlx_grammar_state_new(g, NULL) : NULL;
        ASSERT(s);
        rlx__grammar_cache_count_tables(c, RLX__GCOUNT_OFF);
        ASSERT(rlx_grammar_cache_prepare(c, s, vb.v, RLX_GRAMMAR_PREPARE_TABLES, 0, 0) > 0);
        rlx_grammar_cache_get_stats(c, &st);
        ASSERT_MSG(st.tables_derived > 0, "grammar %zu: the walk ahead derived none of its %llu tables", i,
                   (unsigned long long)st.tables_built);
        int late = 0;
        ASSERT(prepared_walks(c, g, &vb, walks, &late) > 0);
        rlx_grammar_state_free(s);
        rlx_grammar_free(g);
        rlx_grammar_cache_free(c);
    }
    rlx_grammar *g = compile("root ::= ( \"a\"? ){0,6} \"b\"\n");
    ASSERT(g);
    rlx_grammar_cache_stats st = {0};
    int ends = 0;
    ASSERT(check_grammar(RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES, g, &vb, walks, &ends, &st) > 0);
    ASSERT_EQ(st.tables_derived, 0);
    rlx_grammar_free(g);
    vocab_free(&vb);
}

/* ---- tables by counting (grammar_tclass.c; where a table is counted: test_grammar_tclass.c) ---- */

/* The masks of grammars with counted positions against the reference walk, counting on (every
 * class, small ones too): counts, a star, a minimum's copies, a rule of alternatives less
 * another's first set, a continuation that takes the class too, half characters at a count's
 * end against a positive and a negated set, a negated class and a multi-byte one. */
TEST(tables_by_counting)
{
    vocab vb = {0};
    ASSERT(vocab_make(&vb));
    const int A = RLX__GCOUNT_ALWAYS;
    static const char *const grammars[] = {
        "root ::= \"\\\"\" char{0,8} \"\\\"\" \",\"?\nchar ::= [^\"\\\\] | \"\\\\\" [nt\"\\\\]\n",
        "root ::= \"\\\"\" char* \"\\\"\" \"}\"\nchar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([nt\"\\\\] | \"u\" [0-9a-f]{4})\n",
        "root ::= [a-z]{2,9} \":\" [0-9]+ \"}\"\n",
        "root ::= \"{\" [a-c]{0,5} [a-z]* \".\"\n",
        "root ::= \"{\" c{0,4} \"}\"\nc ::= [a-z] | \"ab\" \"1\"\n",
        "root ::= \"{\" c c [a-z]{2} c{0,3} [a-z] \"}\"\nc ::= [a-z] | \"ab\" \"1\"\n",
        /* a half-read last character at the count's end, against a negated set whose two ranges
         * together exclude what it may become (its check is loose: the walk's verdict stands) */
        "root ::= \"{\" [\xc3\x80-\xc3\xbf]{0,2} [^\xc3\x80-\xc3\x9f\xc3\xa0-\xc3\xbf] \"}\"\n",
        "root ::= \"{\" [\xc3\x80-\xc3\xbf]{0,2} [\"\\\\] \"}\"\n",
        "root ::= \"\\\"\" [^\"]{0,3} \"\\\"\" | [\xc3\xa0-\xc3\xbf\xe6\x97\xa5]{1,4} \"x\"\n",
    };
    const int walks = getenv("RLX_MEMCHECK") ? 6 : 20;
    for (size_t i = 0; i < RLX_ARRAY_LEN(grammars); i++) {
        rlx_grammar *g = compile(grammars[i]);
        ASSERT_MSG(g, "grammar %zu", i);
        rlx_grammar_cache_stats st = {0};
        count_mode = A;
        int ends = 0, n = check_grammar(RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES, g, &vb, walks, &ends, &st);
        count_mode = RLX__GCOUNT_AUTO;
        rlx_grammar_free(g);
        fprintf(stderr, "  grammar %zu: %d positions, %llu tables built, %llu of them counted\n", i, n,
                (unsigned long long)st.tables_built, (unsigned long long)st.tables_counted);
        ASSERT_MSG(n > 0, "grammar %zu:\n%s", i, grammars[i]);
        ASSERT_MSG(st.tables_counted > 0, "grammar %zu counted no table", i);
    }
    vocab_free(&vb);
}

/* The walk ahead orders a repetition's later counts after the other positions, and inside them
 * the begun terms (a string's next character) before those further on (an escape half-written):
 * with a bound of tables too small for every position, a plain string of the longest length
 * finds every table it meets built. */
TEST(walk_ahead_prefers_begun_counts)
{
    vocab vb = {0};
    ASSERT(vocab_make(&vb));
    rlx_grammar *g = compile("root ::= \"{\" \"\\\"\" char{1,12} \"\\\"\" \"}\"\n"
                             "char ::= [^\"\\\\] | \"\\\\\" ([\"\\\\nt] | \"u\" [0-9a-f]{4})\n");
    ASSERT(g);
    int32_t tok_a = -1;
    for (int32_t t = 0; t < NV; t++)
        if (vb.lens[t] == 1 && vb.texts[t][0] == 'a') tok_a = t;
    ASSERT(tok_a >= 0);
    size_t bound = 0, all = 0;
    for (int pass = 0; pass < 2; pass++) {
        rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 4);
        rlx_grammar_state *s = c ? rlx_grammar_state_new(g, NULL) : NULL;
        ASSERT(s);
        int64_t built = rlx_grammar_cache_prepare(c, s, vb.v, pass ? bound : RLX_GRAMMAR_PREPARE_TABLES, 0, 0);
        ASSERT(built > 0);
        if (!pass) all = (size_t)built;
        uint64_t bits[(NV + 63) / 64];
        rlx_grammar_cache_stats a, b;
        rlx_grammar_cache_get_stats(c, &a);
        size_t pos = 0;
        for (const char *text = "{\""; *text; text++, pos++) {
            ASSERT(rlx_grammar_cache_fast_mask(c, s, vb.v, bits) > 0);
            ASSERT_EQ(rlx_grammar_accept(s, text, 1), 0);
        }
        for (int k = 0; k < 12; k++, pos++) {
            ASSERT(rlx_grammar_cache_fast_mask(c, s, vb.v, bits) > 0);
            ASSERT_EQ(rlx_grammar_accept(s, vb.texts[tok_a], 1), 0);
        }
        ASSERT(rlx_grammar_cache_fast_mask(c, s, vb.v, bits) > 0);
        rlx_grammar_cache_get_stats(c, &b);
        fprintf(stderr, "  walk of %lld tables (of %zu): %llu built on the way through %zu positions\n", (long long)built,
                all, (unsigned long long)(b.tables_built - a.tables_built), pos + 1);
        if (!pass) bound = all * 3 / 5; /* the second pass: three fifths of them (without the order: 6 built late) */
        else ASSERT_EQ(b.tables_built, a.tables_built);
        rlx_grammar_state_free(s);
        rlx_grammar_cache_free(c);
    }
    rlx_grammar_free(g);
    vocab_free(&vb);
}

/* Deep stacks (nesting beyond a table's top entries), a store of two tables, and a byte bound
 * that keeps one table at a time. */
TEST(deep_nesting_and_eviction)
{
    vocab vb = {0};
    ASSERT(vocab_make(&vb));
    rlx_grammar *g = compile("root ::= v\n"
                             "v ::= \"[\" ( v ( \",\" v )* )? \"]\" | \"{\\\"\" [a-c]* \"\\\":\" v \"}\" | s\n"
                             "s ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [\"n] )* \"\\\"\"\n");
    ASSERT(g);
    rlx_grammar_cache_stats st = {0};
    const int k = getenv("RLX_MEMCHECK") ? 2 : 5; /* walks in eighths: under valgrind fewer */
    int ends = 0, n = check_grammar(2, RLX__GTABLE_BYTES, g, &vb, 8 * k, &ends, &st);
    fprintf(stderr, "  %d positions, %llu evictions in a store of two tables\n", n, (unsigned long long)st.table_evictions);
    ASSERT(n > 40 * k);
    ASSERT(st.table_evictions > 20 * (unsigned)k);
    /* a byte bound below one table: every table built puts all others out */
    rlx_grammar_cache_stats st2 = {0};
    n = check_grammar(64, 1, g, &vb, 4 * k, &ends, &st2);
    rlx_grammar_free(g);
    ASSERT(n > 20 * k);
    ASSERT(st2.table_evictions + 4 >= st2.tables_built);
    vocab_free(&vb);
}

/* Tables built ahead (rlx_grammar_cache_prepare): for a grammar whose positions are finite,
 * random walks then build no table at any position outside a multi-byte character, at every
 * table depth, and the masks stay exact; a second call does nothing; the bounds (tables, half the
 * store, time) hold; a recursive grammar's walk ends at its bounds. */
static int prepared_walks(rlx_grammar_cache *c, const rlx_grammar *g, const vocab *vb, int walks, int *late)
{
    uint8_t mask[NV];
    uint64_t bits[(NV + 63) / 64];
    int steps = 0;
    for (int w = 0; w < walks; w++) {
        rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
        if (!s) return -1;
        for (int step = 0; step < 40; step++) {
            rlx_grammar_cache_stats a, b;
            rlx_grammar_cache_get_stats(c, &a);
            int64_t n = rlx_grammar_mask(s, vb->v, mask), fn = rlx_grammar_cache_fast_mask(c, s, vb->v, bits);
            rlx_grammar_cache_get_stats(c, &b);
            if (n < 0 || fn != n) {
                rlx_grammar_state_free(s);
                return -1;
            }
            for (int t = 0; t < NV; t++)
                if (mask[t] != ((bits[t / 64] >> (t % 64)) & 1)) {
                    rlx_grammar_state_free(s);
                    return -1;
                }
            if (!s->remain && b.tables_built != a.tables_built) (*late)++;
            steps++;
            if (!n || (rlx_grammar_can_end(s) && !rnd(4))) break;
            int64_t pick = rnd((uint32_t)n);
            for (int t = 0; t < NV; t++)
                if (mask[t] && pick-- == 0) {
                    rlx_grammar_accept(s, vb->texts[t], vb->lens[t]);
                    break;
                }
        }
        rlx_grammar_state_free(s);
    }
    return steps;
}


/* rlx_grammar_cache_prepare_until on a thread of its own, as engine/gaside.c runs it */
typedef struct until_arg {
    rlx_grammar_cache *c;
    const rlx_grammar_vocab *v;
    const atomic_bool *stop;
    int64_t built;
} until_arg;

static void *until_main(void *p)
{
    until_arg *a = p;
    a->built = rlx_grammar_cache_prepare_until(a->c, a->v, a->stop);
    return NULL;
}

TEST(tables_built_ahead)
{
    vocab vb = {0};
    ASSERT(vocab_make(&vb));
    const int walks = getenv("RLX_MEMCHECK") ? 4 : 12;
    static const size_t finite[] = {0, 1, 2, 4, 5}; /* schema 3 refers to itself */
    for (size_t k = 0; k < RLX_ARRAY_LEN(finite); k++) {
        rlx_grammar *g = from_schema(schemas[finite[k]]);
        ASSERT(g);
        for (size_t d = 0; d < RLX_ARRAY_LEN(depths); d++) {
            rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 4);
            ASSERT(c);
            ASSERT_EQ(rlx__grammar_cache_configure_tables(c, depths[d], RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES,
                                                          depths[d] == 2 ? 40 : RLX__GTABLE_UNDECIDED), 0);
            rlx_grammar_state *s0 = rlx_grammar_state_new(g, NULL);
            int64_t built = rlx_grammar_cache_prepare(c, s0, vb.v, 100000, 0, 0);
            ASSERT_MSG(built > 0, "schema %zu depth %u: %lld", finite[k], depths[d], (long long)built);
            ASSERT_EQ(rlx_grammar_cache_prepare(c, s0, vb.v, 100000, 0, 0), 0); /* once per grammar */
            rlx_grammar_state_free(s0);
            ASSERT(!rlx_grammar_cache_preparing(c));
            int late = 0, n = prepared_walks(c, g, &vb, walks, &late);
            ASSERT_MSG(n > 0, "schema %zu depth %u: a mask differs from the reference", finite[k], depths[d]);
            ASSERT_MSG(late == 0, "schema %zu depth %u: %d positions built a table after %lld were built ahead", finite[k],
                       depths[d], late, (long long)built);
            rlx_grammar_cache_free(c);
            /* the same walk in slices of a few microseconds (the worker's way): it goes on over
             * many calls and leaves the same coverage */
            c = rlx_grammar_cache_new(NV, 4);
            ASSERT(c);
            ASSERT_EQ(rlx__grammar_cache_configure_tables(c, depths[d], RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES,
                                                          depths[d] == 2 ? 40 : RLX__GTABLE_UNDECIDED), 0);
            s0 = rlx_grammar_state_new(g, NULL);
            int64_t sliced = rlx_grammar_cache_prepare(c, s0, vb.v, 100000, 0, 0.002);
            rlx_grammar_state_free(s0);
            int calls = 1;
            for (; rlx_grammar_cache_preparing(c) && calls < 100000; calls++) {
                int64_t more = rlx_grammar_cache_prepare_more(c, vb.v, 0.002);
                ASSERT(more >= 0);
                sliced += more;
            }
            ASSERT(!rlx_grammar_cache_preparing(c));
            ASSERT_MSG(sliced == built && calls > 1, "schema %zu depth %u: %lld tables in %d slices, %lld at once", finite[k],
                       depths[d], (long long)sliced, calls, (long long)built);
            late = 0;
            ASSERT(prepared_walks(c, g, &vb, walks, &late) > 0);
            ASSERT_EQ(late, 0);
            rlx_grammar_cache_free(c);
            /* the helper's way (engine/gaside.h): the walk only started (slice < 0), then
             * continued until a stop flag - set at once: nothing; called off from another thread
             * mid-walk, then resumed: the same tables as at once */
            c = rlx_grammar_cache_new(NV, 4);
            ASSERT(c);
            ASSERT_EQ(rlx__grammar_cache_configure_tables(c, depths[d], RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES,
                                                          depths[d] == 2 ? 40 : RLX__GTABLE_UNDECIDED), 0);
            s0 = rlx_grammar_state_new(g, NULL);
            ASSERT_EQ(rlx_grammar_cache_prepare(c, s0, vb.v, 100000, 0, -1), 0);
            rlx_grammar_state_free(s0);
            ASSERT(rlx_grammar_cache_preparing(c));
            atomic_bool stop;
            atomic_init(&stop, true);
            ASSERT_EQ(rlx_grammar_cache_prepare_until(c, vb.v, &stop), 0);
            ASSERT(rlx_grammar_cache_preparing(c));
            until_arg ua = {.c = c, .v = vb.v, .stop = &stop};
            atomic_store(&stop, false);
            pthread_t th;
            ASSERT_EQ(pthread_create(&th, NULL, until_main, &ua), 0);
            struct timespec nap = {0, 200000}; /* 0.2 ms, then called off */
            nanosleep(&nap, NULL);
            atomic_store(&stop, true);
            pthread_join(th, NULL);
            ASSERT(ua.built >= 0);
            atomic_store(&stop, false);
            int64_t rest = rlx_grammar_cache_prepare_until(c, vb.v, &stop);
            ASSERT(!rlx_grammar_cache_preparing(c));
            ASSERT_MSG(ua.built + rest == built, "schema %zu depth %u: %lld + %lld tables beside, %lld at once", finite[k],
                       depths[d], (long long)ua.built, (long long)rest, (long long)built);
            late = 0;
            ASSERT(prepared_walks(c, g, &vb, walks, &late) > 0);
            ASSERT_EQ(late, 0);
            rlx_grammar_cache_free(c);
        }
        rlx_grammar_free(g);
    }
    /* bounds: max_new; half a store of 8 tables; a recursive grammar stops at its bounds and is still exact */
    rlx_grammar *g = compile(rlx_grammar_json_object);
    ASSERT(g);
    rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 4);
    rlx_grammar_state *s0 = rlx_grammar_state_new(g, NULL);
    ASSERT(c && s0);
    ASSERT_EQ(rlx_grammar_cache_prepare(c, s0, vb.v, 3, 0, 0), 3);
    ASSERT_EQ(rlx__grammar_cache_configure_tables(c, RLX__GTABLE_DEPTH, 8, RLX__GTABLE_BYTES, RLX__GTABLE_UNDECIDED), 0);
    ASSERT_EQ(rlx_grammar_cache_prepare(c, s0, vb.v, 100000, 0, 0), 4);
    ASSERT_EQ(rlx__grammar_cache_configure_tables(c, RLX__GTABLE_DEPTH, RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES,
                                                  RLX__GTABLE_UNDECIDED), 0);
    int64_t built = rlx_grammar_cache_prepare(c, s0, vb.v, 100000, 0, 0);
    ASSERT(built > 8 && built <= RLX_GRAMMAR_CACHE_TABLES / 2);
    int late = 0;
    ASSERT(prepared_walks(c, g, &vb, walks, &late) > 0);
    fprintf(stderr, "  json.gbnf: %lld tables ahead, %d positions built more\n", (long long)built, late);
    /* a time bound of a microsecond: one table at most, then the clock stops it */
    ASSERT_EQ(rlx__grammar_cache_configure_tables(c, RLX__GTABLE_DEPTH, RLX_GRAMMAR_CACHE_TABLES, RLX__GTABLE_BYTES,
                                                  RLX__GTABLE_UNDECIDED), 0);
    built = rlx_grammar_cache_prepare(c, s0, vb.v, 100000, 0.001, 0);
    ASSERT(built >= 0 && built <= 2);
    rlx_grammar_state_free(s0);
    rlx_grammar_cache_free(c);
    rlx_grammar_free(g);
    vocab_free(&vb);
}

/* The real Qwen2 vocabulary (151,643 tokens): a JSON Schema's masks along random outputs. */
/* The walk's set of positions is its own, larger than a state's RLX_GRAMMAR_MAX_STACKS live
 * stacks: a 3000-character literal has 3000 positions, and the walk (no time bound here) builds
 * each one's table, the last included (before: it stopped at 2048 positions). */
TEST(walk_ahead_past_a_states_stacks)
{
    vocab vb = {0};
    ASSERT(vocab_make(&vb));
    enum { N = 3000 };
    static char text[N + 16];
    memcpy(text, "root ::= \"", 10);
    for (int i = 0; i < N; i++) text[10 + i] = "abcxyz"[i % 6];
    memcpy(text + 10 + N, "\"\n", 3);
    rlx_grammar *g = compile(text);
    rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 4);
    rlx_grammar_state *s = g && c ? rlx_grammar_state_new(g, NULL) : NULL;
    ASSERT(s);
    const int64_t built = rlx_grammar_cache_prepare(c, s, vb.v, RLX_GRAMMAR_PREPARE_TABLES, 0, 0);
    ASSERT_MSG(built >= N && built > RLX_GRAMMAR_MAX_STACKS, "%lld tables built ahead", (long long)built);
    for (int i = 0; i < N - 1; i++) ASSERT_EQ(rlx_grammar_accept(s, &text[10 + i], 1), 0);
    rlx_grammar_cache_stats a, b;
    rlx_grammar_cache_get_stats(c, &a);
    uint64_t bits[(NV + 63) / 64];
    const int64_t n = rlx_grammar_cache_fast_mask(c, s, vb.v, bits); /* the last character's position */
    rlx_grammar_cache_get_stats(c, &b);
    uint8_t ref[NV];
    ASSERT_EQ(n, rlx_grammar_mask(s, vb.v, ref));
    ASSERT(n > 0);
    ASSERT_EQ(b.tables_built, a.tables_built);
    rlx_grammar_state_free(s);
    rlx_grammar_cache_free(c);
    rlx_grammar_free(g);
    vocab_free(&vb);
}

TEST(qwen2_vocabulary)
{
    const char *path = rlx_test_shared("vocab/ggml-vocab-qwen2-reconstructed.gguf");
    if (!path) SKIP("vocab/ggml-vocab-qwen2-reconstructed.gguf is absent (set RLX_SHARED)");
    rlx_error err = {0};
    rlx_gguf *gg = NULL;
    rlx_tokenizer *tok = NULL;
    ASSERT_EQ(rlx_gguf_open(&gg, path, &err), 0);
    ASSERT_EQ(rlx_tokenizer_from_gguf(&tok, gg, &err), 0);
    int32_t nv = rlx_tokenizer_n_vocab(tok);
    char **texts = NULL;
    size_t *lens = NULL;
    ASSERT_EQ(rlx_grammar_token_bytes(tok, nv, &texts, &lens, &err), 0);
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(nv, (const char *const *)texts, lens);
    rlx_grammar_cache *c = rlx_grammar_cache_new(nv, 8);
    ASSERT(v && c);
    rlx_grammar *g = from_schema(schemas[0]);
    ASSERT(g);
    /* under valgrind (RLX_MEMCHECK) fewer positions: each reference walk of 151k tokens is slow there */
    bool mc = getenv("RLX_MEMCHECK") != NULL;
    int ends = 0, n = walk_check(c, g, v, nv, texts, lens, mc ? 1 : 2, mc ? 6 : 30, &ends);
    rlx_grammar_free(g);
    rlx_grammar_cache_stats st;
    rlx_grammar_cache_get_stats(c, &st);
    fprintf(stderr, "  %d positions of the schema; %llu of %llu tables counted, by %llu classes\n", n,
            (unsigned long long)st.tables_counted, (unsigned long long)st.tables_built,
            (unsigned long long)st.table_classes);
    if (!mc) ASSERT(st.tables_counted > 0); /* its strings (under valgrind the 6 positions may hold none) */
    ASSERT(n > (mc ? 2 : 10));
    g = compile(rlx_grammar_json_object);
    ASSERT(g);
    ASSERT_EQ(rlx__grammar_cache_configure_tables(c, 2, 64, RLX__GTABLE_BYTES, 1000), 0); /* most tokens past a string's end undecided */
    int n2 = walk_check(c, g, v, nv, texts, lens, 1, mc ? 4 : 20, &ends);
    ASSERT(n2 > 0);
    rlx_grammar_free(g);
    rlx_grammar_cache_free(c);
    rlx_grammar_vocab_free(v);
    rlx_grammar_token_bytes_free(texts, lens, nv);
    rlx_tokenizer_free(tok);
    rlx_gguf_close(gg);
}

int main(void)
{
    static const rlx_test_case tests[] = {
        TEST_ENTRY(json_schemas_and_json_gbnf),
        TEST_ENTRY(random_grammars),
        TEST_ENTRY(deep_nesting_and_eviction), TEST_ENTRY(counted_repetitions_derive_tables),
        TEST_ENTRY(walk_ahead_prefers_begun_counts), TEST_ENTRY(tables_by_counting),
        TEST_ENTRY(tables_built_ahead), TEST_ENTRY(walk_ahead_past_a_states_stacks),
        TEST_ENTRY(qwen2_vocabulary),
    };
    return rlx_test_run(tests, RLX_ARRAY_LEN(tests));
}
