/* test_grammar_cache.c - masks remembered per grammar position (engine/grammar_cache.c): every
 * mask the cache gives equals the full trie walk's at each step of random walks; the same grammar
 * compiled twice shares entries; another grammar (also one compiled where a freed one lived) never
 * gets them; a tiny cache evicts and stays right. */
#include "tests/rlx_test.h"
#include "engine/grammar.h"

static const char *const pieces[] = {
    "{", "}", "{\"", "\":", "\"", "a", "ab", "abc", "b", ",", ", \"", "1", "12", "-", ".5", "e", "true", "tru",
    "null", "[", "]", "[]", "{}", " ", "\n", "\xc3", "\xa9", "\xc3\xa9", "\xe6\x97", "\xa5", "\\", "\\u00", "e9",
    "x", "\"}", "\"]", "a\"", "", "1.", "0", "a", ": ", "\"a\"", "false",
};
enum { NV = RLX_ARRAY_LEN(pieces) };

static rlx_grammar *compile(const char *src)
{
    rlx_error e = {0};
    rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, &e);
    if (!g) fprintf(stderr, "  compile failed: %s\n", e.msg);
    return g;
}

/* Random walks of `walks` x up to 25 steps over g; at each step the cached mask must equal the
 * full one. Returns the number of steps checked, -1 on a mismatch. */
static int walk_check(rlx_grammar_cache *c, const rlx_grammar *g, const rlx_grammar_vocab *v, const size_t *lens,
                      uint64_t seed, int walks)
{
    int steps = 0;
    for (int w = 0; w < walks; w++) {
        rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
        if (!s) return -1;
        for (int step = 0; step < 25; step++) {
            uint8_t mask[NV];
            int64_t n = rlx_grammar_mask(s, v, mask), cn = -1;
            int rc = 0;
            const uint64_t *bits = rlx_grammar_cache_mask(c, s, v, &cn, &rc);
            if (n < 0 || !bits || cn != n) {
                fprintf(stderr, "  walk %d step %d: full %lld, cached %lld (rc %d)\n", w, step, (long long)n, (long long)cn, rc);
                rlx_grammar_state_free(s);
                return -1;
            }
            for (int t = 0; t < NV; t++)
                if (mask[t] != ((bits[t / 64] >> (t % 64)) & 1)) {
                    fprintf(stderr, "  walk %d step %d token %d '%s': full %d, cached %d\n", w, step, t, pieces[t], mask[t],
                            !mask[t]);
                    rlx_grammar_state_free(s);
                    return -1;
                }
            steps++;
            if (!n) break;
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int64_t pick = (int64_t)((seed >> 33) % (uint64_t)n);
            for (int t = 0; t < NV; t++)
                if (mask[t] && pick-- == 0) {
                    if (rlx_grammar_accept(s, pieces[t], lens[t])) {
                        rlx_grammar_state_free(s);
                        return -1;
                    }
                    break;
                }
        }
        rlx_grammar_state_free(s);
    }
    return steps;
}

TEST(cached_masks_equal_full_masks_and_are_shared)
{
    size_t lens[NV];
    for (int i = 0; i < NV; i++) lens[i] = strlen(pieces[i]);
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(NV, pieces, lens);
    rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 512);
    ASSERT(v && c);
    rlx_grammar *g1 = compile(rlx_grammar_json_object);
    ASSERT(g1 != NULL);
    ASSERT(walk_check(c, g1, v, lens, 1, 30) > 30);
    rlx_grammar_cache_stats a, b;
    rlx_grammar_cache_get_stats(c, &a);
    ASSERT(a.misses > 0);
    /* the same grammar compiled again (another request with the same schema): the same walks
     * are all hits, none builds a mask */
    rlx_grammar *g2 = compile(rlx_grammar_json_object);
    ASSERT(g2 != NULL);
    int steps = walk_check(c, g2, v, lens, 1, 30);
    ASSERT(steps > 30);
    rlx_grammar_cache_get_stats(c, &b);
    ASSERT_EQ(b.misses, a.misses);
    ASSERT_EQ(b.hits - a.hits, (uint64_t)steps);
    rlx_grammar_free(g1);
    rlx_grammar_free(g2);
    /* different grammars, compiled after the first ones were freed (perhaps at their
     * addresses): their own masks, never the json ones */
    static const char *const others[] = {
        "root ::= \"{\" \"\\\"\" [ab]* \"\\\"\" \"}\"",
        "root ::= \"[\" (\"1\" | \"true\" | \"null\")? \"]\"",
        "root ::= \"{\\\"a\\\": \" [0-9]+ \"}\" | \"[]\"",
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(others); i++) {
        rlx_grammar *g = compile(others[i]);
        ASSERT(g != NULL);
        ASSERT_MSG(walk_check(c, g, v, lens, 7 + i, 20) > 0, "grammar %zu", i);
        rlx_grammar_free(g);
    }
    rlx_grammar_cache_free(c);
    rlx_grammar_vocab_free(v);
}

TEST(a_tiny_cache_evicts_and_stays_right)
{
    size_t lens[NV];
    for (int i = 0; i < NV; i++) lens[i] = strlen(pieces[i]);
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(NV, pieces, lens);
    rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 2);
    ASSERT(v && c);
    rlx_grammar *g = compile(rlx_grammar_json_object), *h = compile("root ::= \"[\" [0-9a]* \"]\"");
    ASSERT(g && h);
    for (int k = 0; k < 4; k++) {
        ASSERT(walk_check(c, g, v, lens, 3 + (uint64_t)k, 5) > 0);
        ASSERT(walk_check(c, h, v, lens, 5 + (uint64_t)k, 5) > 0);
    }
    rlx_grammar_cache_stats st;
    rlx_grammar_cache_get_stats(c, &st);
    ASSERT(st.evictions > 0);
    ASSERT(rlx_grammar_cache_new(0, 4) == NULL);
    ASSERT(rlx_grammar_cache_new(NV, 0) == NULL);
    rlx_grammar_free(g);
    rlx_grammar_free(h);
    rlx_grammar_cache_free(c);
    rlx_grammar_vocab_free(v);
}

/* More grammars alive at once than the cache keeps, stepped in lockstep as the worker steps its
 * sequences (64 concurrent requests with 64 schemas and more): each keeps getting its own masks
 * while the others' grammars are evicted around it. */
static int lockstep(rlx_grammar_cache *c, const rlx_grammar_vocab *v, const size_t *lens, int ng)
{
    rlx_grammar **g = calloc((size_t)ng, sizeof *g);
    rlx_grammar_state **st = calloc((size_t)ng, sizeof *st);
    int rc = 0;
    uint64_t rng = 99;
    for (int i = 0; i < ng && !rc; i++) {
        char src[200];
        snprintf(src, sizeof src, "root ::= \"[\" (%s) \"]\" | \"x%d\"",
                 i % 3 == 0 ? "\"1\" [0-9]*" : i % 3 == 1 ? "\"a\" [ab]*" : "\"true\"", i);
        if (!(g[i] = compile(src)) || !(st[i] = rlx_grammar_state_new(g[i], NULL))) rc = -1;
    }
    for (int step = 0; step < 6 && !rc; step++)
        for (int i = 0; i < ng && !rc; i++) {
            uint8_t mask[NV];
            int64_t n = rlx_grammar_mask(st[i], v, mask), cn = -1;
            int e = 0;
            const uint64_t *bits = rlx_grammar_cache_mask(c, st[i], v, &cn, &e);
            if (n < 0 || !bits || cn != n) {
                fprintf(stderr, "  %d grammars, step %d, grammar %d: full %lld, cached %lld\n", ng, step, i, (long long)n, (long long)cn);
                rc = -1;
                break;
            }
            for (int t = 0; t < NV; t++)
                if (mask[t] != ((bits[t / 64] >> (t % 64)) & 1)) rc = -1;
            if (!n) { /* complete: start over */
                rlx_grammar_state_free(st[i]);
                if (!(st[i] = rlx_grammar_state_new(g[i], NULL))) rc = -1;
                continue;
            }
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int64_t pick = (int64_t)((rng >> 33) % (uint64_t)n);
            for (int t = 0; t < NV; t++)
                if (mask[t] && pick-- == 0) {
                    if (rlx_grammar_accept(st[i], pieces[t], lens[t])) rc = -1;
                    break;
                }
        }
    for (int i = 0; i < ng; i++) {
        rlx_grammar_state_free(st[i]);
        rlx_grammar_free(g[i]);
    }
    free(st);
    free(g);
    return rc;
}

TEST(more_grammars_than_slots)
{
    size_t lens[NV];
    for (int i = 0; i < NV; i++) lens[i] = strlen(pieces[i]);
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(NV, pieces, lens);
    ASSERT(v != NULL);
    static const int counts[] = {40, 64, 100, 160, 300};
    for (size_t k = 0; k < RLX_ARRAY_LEN(counts); k++) {
        rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 64);
        ASSERT(c != NULL);
        ASSERT_MSG(lockstep(c, v, lens, counts[k]) == 0, "%d grammars in lockstep", counts[k]);
        rlx_grammar_cache_free(c);
    }
    rlx_grammar_vocab_free(v);
}

/* A walk ahead in slices shorter than reading the clock takes (a slow host, valgrind, a
 * preempted worker) still moves on each call - a slice does one position before it looks at the
 * time - so it ends, with the tables of a walk made at once. Before, such a call could stop
 * before its first position and the walk never ended (CI stop 49, memcheck/test_grammar_tables). */
TEST(tiny_slices_still_advance)
{
    size_t lens[NV];
    for (int i = 0; i < NV; i++) lens[i] = strlen(pieces[i]);
    rlx_grammar_vocab *v = rlx_grammar_vocab_new(NV, pieces, lens);
    ASSERT(v != NULL);
    rlx_grammar *g = compile("root ::= \"{\" ws (kv (\",\" ws kv)*)? \"}\"\n"
                             "kv ::= \"\\\"\" [a-c]+ \"\\\":\" ws (num | \"true\" | \"null\" | \"[\" num? \"]\")\n"
                             "num ::= \"-\"? [0-9]+ (\".\" [0-9]+)?\nws ::= [ \\n]?\n");
    ASSERT(g != NULL);
    int64_t at_once = -1;
    for (int sliced = 0; sliced < 2; sliced++) {
        rlx_grammar_cache *c = rlx_grammar_cache_new(NV, 8);
        ASSERT(c != NULL);
        rlx_grammar_state *s0 = rlx_grammar_state_new(g, NULL);
        ASSERT(s0 != NULL);
        const double slice = sliced ? 1e-9 : 0; /* a picosecond: over before any clock can tell */
        int64_t built = rlx_grammar_cache_prepare(c, s0, v, 100000, 0, slice);
        rlx_grammar_state_free(s0);
        ASSERT(built >= 0);
        int calls = 1;
        for (; rlx_grammar_cache_preparing(c) && calls < 20000; calls++) {
            int64_t more = rlx_grammar_cache_prepare_more(c, v, slice);
            ASSERT(more >= 0);
            built += more;
        }
        ASSERT_MSG(!rlx_grammar_cache_preparing(c), "still walking after %d calls, %lld tables", calls, (long long)built);
        if (!sliced) {
            ASSERT(built > 10);
            at_once = built;
        } else {
            ASSERT_MSG(built == at_once && calls > 10, "%lld tables in %d calls, %lld at once", (long long)built, calls,
                       (long long)at_once);
            fprintf(stderr, "  %lld tables, in %d calls of a picosecond\n", (long long)built, calls);
        }
        ASSERT(walk_check(c, g, v, lens, 7, 4) > 0);
        rlx_grammar_cache_free(c);
    }
    rlx_grammar_free(g);
    rlx_grammar_vocab_free(v);
}

TEST_MAIN(TEST_ENTRY(cached_masks_equal_full_masks_and_are_shared), TEST_ENTRY(a_tiny_cache_evicts_and_stays_right),
          TEST_ENTRY(more_grammars_than_slots),
          TEST_ENTRY(tiny_slices_still_advance))
