/* test_grammar_tclass.c - where a table is counted (engine/grammar_tclass.c, rlx__gclass_plan):
 * at which stacks of a grammar's state the plan counts, with what class and how many terms left,
 * and where it must not (a count there would be wrong); when a class is worth a build. The masks
 * such counting gives are checked against the reference walk in test_grammar_tables.c. */
#include "tests/rlx_test.h"
#include "engine/grammar.h"
#include "engine/grammar_internal.h"

static rlx_grammar *compile(const char *src)
{
    rlx_error e = {0};
    rlx_grammar *g = rlx_grammar_compile(src, strlen(src), NULL, &e);
    if (!g) fprintf(stderr, "  compile failed: %s\n%s\n", e.msg, src);
    return g;
}

/* A small vocabulary; every 16th token (what `worth` samples) is a plain word. */
static rlx_grammar_vocab *small_vocab(void)
{
    static const char *const words[] = {
        "hello", "\"", "\",", "1", "12", "0", "a", "ab", "ab!", " ", " x", "\\", "\\n", "\xc3\xa9", "\xc3", "}",
        "world", "<", ">", "\n", "9", "abc", "e", "\xe6\x97\xa5", "\xe6\x97", "x\"", "\":", "-", ".", "@", "z", "zz",
        "xyz",
    };
    size_t lens[RLX_ARRAY_LEN(words)];
    for (size_t i = 0; i < RLX_ARRAY_LEN(words); i++) lens[i] = strlen(words[i]);
    return rlx_grammar_vocab_new((int32_t)RLX_ARRAY_LEN(words), words, lens);
}

typedef struct plan_out { int counted; uint32_t left; uint32_t rng[8]; size_t n_rng; } plan_out;

/* rlx__gclass_plan at each stack of src's state after `text`, keyed as the tables key it (its
 * top RLX__GTABLE_DEPTH entries): how many it counts, and the last one's left and class. */
static plan_out plan_after(const char *src, const char *text, const rlx_grammar_vocab *v, int mode)
{
    plan_out o = {0};
    rlx_grammar *g = compile(src);
    rlx_grammar_state *s = g ? rlx_grammar_state_new(g, NULL) : NULL;
    rlx__gclasses *cs = rlx__gclasses_new();
    if (cs) rlx__gclasses_set_mode(cs, mode);
    uint32_t *buf = malloc((RLX_GRAMMAR_MAX_DEPTH + 1) * sizeof *buf), key[2 + RLX__GTABLE_DEPTH];
    if (!s || !cs || !buf || rlx_grammar_accept(s, text, strlen(text))) {
        o.counted = -1;
        goto done;
    }
    for (size_t i = 0; i < s->stacks.n; i++) {
        const uint32_t len = s->stacks.len[i], tn = len < RLX__GTABLE_DEPTH ? len : RLX__GTABLE_DEPTH;
        if (!len) continue;
        key[0] = s->remain ? s->partial : 0;
        key[1] = (uint32_t)s->remain;
        memcpy(key + 2, s->stacks.data + s->stacks.off[i] + len - tn, tn * sizeof *key);
        int rc = 0;
        uint32_t left = 0;
        const rlx__gclass *c = rlx__gclass_plan(cs, g, v, key, 2 + tn, &left, buf, &rc);
        if (rc) {
            o.counted = -1;
            goto done;
        }
        if (!c) continue;
        o.counted++;
        o.left = left;
        o.n_rng = c->n_rng;
        memcpy(o.rng, c->rng, (c->n_rng < 4 ? c->n_rng : 4) * 2 * sizeof *o.rng);
    }
done:
    free(buf);
    rlx__gclasses_free(cs);
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
    return o;
}

/* Where a table is counted and with what: a repetition's term (one set, or a rule of one-set
 * alternatives less the first sets of its others), the terms left (a count's, a minimum's
 * copies, a star's none, a single set's none); refused where a count would be wrong (the
 * continuation takes a code point of the class, the stack runs out of its key, a first set
 * through a rule, a half-read character); in the default mode only for classes worth a build. */
TEST(where_a_table_is_counted)
{
    rlx_grammar_vocab *v = small_vocab();
    ASSERT(v);
    const int A = RLX__GCOUNT_ALWAYS;
    const char *g1 = "root ::= \"\\\"\" [a-z]{0,5} \"\\\"\"\n";
    plan_out o = plan_after(g1, "\"", v, A);
    ASSERT_EQ(o.counted, 1); /* the set's stack; the closing quote's has no set to count */
    ASSERT_EQ(o.left, 4);
    ASSERT_EQ(o.n_rng, 1);
    ASSERT_EQ(o.rng[0], 'a');
    ASSERT_EQ(o.rng[1], 'z');
    o = plan_after(g1, "\"ab", v, A);
    ASSERT_EQ(o.counted, 1);
    ASSERT_EQ(o.left, 2);
    ASSERT_EQ(plan_after(g1, "\"", v, RLX__GCOUNT_OFF).counted, 0);
    /* few of this vocabulary's tokens are digits only: not worth a class but when told */
    const char *g0 = "root ::= \"\\\"\" [0-9]{0,5} \"\\\"\"\n";
    ASSERT_EQ(plan_after(g0, "\"", v, RLX__GCOUNT_AUTO).counted, 0);
    ASSERT_EQ(plan_after(g0, "\"", v, A).counted, 1);
    /* a minimum's copies, then the chain; one set and no repetition (nothing to follow) */
    o = plan_after("root ::= \"<\" [a-z]{3,6} \">\"\n", "<", v, A);
    ASSERT_EQ(o.counted, 1);
    ASSERT_EQ(o.left, 5);
    o = plan_after("root ::= \"<\" [a-z]{3,6} \">\"\n", "<ab", v, A);
    ASSERT_EQ(o.left, 3);
    o = plan_after("root ::= \"<\" [a-z] \">\"\n", "<", v, A);
    ASSERT_EQ(o.counted, 1);
    ASSERT_EQ(o.left, 0);
    /* a star: no bound */
    o = plan_after("root ::= \"<\" [a-z]* \">\"\n", "<", v, A);
    ASSERT_EQ(o.counted, 1);
    ASSERT_EQ(o.left, UINT32_MAX);
    /* the continuation takes [a-z] too: only the star's stack (followed by ">") counts */
    o = plan_after("root ::= \"<\" [a-c]{0,5} [a-z]* \">\"\n", "<", v, A);
    ASSERT_EQ(o.counted, 1);
    ASSERT_EQ(o.left, UINT32_MAX);
    /* a set of another class follows */
    ASSERT_EQ(plan_after("root ::= \"<\" [a-z]{1,3} [a-c] \">\"\n", "<", v, A).counted, 0);
    /* nothing follows in the grammar: the stack runs out of its key */
    ASSERT_EQ(plan_after("root ::= [a-z]{0,5}\n", "", v, A).counted, 0);
    /* a rule of alternatives: one set less the first sets of the others (the other's stack, "a"
     * then "b", is a class of one code point: not worth one) */
    o = plan_after("root ::= \"<\" c{0,4} \">\"\nc ::= [^<>] | \"ab\" \"!\"\n", "<", v, RLX__GCOUNT_AUTO);
    ASSERT_EQ(o.counted, 1);
    ASSERT_EQ(o.left, 3);
    ASSERT_EQ(o.n_rng, 4);
    ASSERT_EQ(o.rng[4], '>' + 1);
    ASSERT_EQ(o.rng[5], 'a' - 1);
    ASSERT_EQ(o.rng[6], 'a' + 1);
    o = plan_after("root ::= \"<\" c c c{0,4} \">\"\nc ::= [^<>] | \"ab\" \"!\"\n", "<", v, RLX__GCOUNT_AUTO);
    ASSERT_EQ(o.counted, 1);
    ASSERT_EQ(o.left, 5);
    ASSERT_EQ(plan_after("root ::= \"<\" c{0,4} \">\"\nc ::= [a-z] | d\nd ::= \"0\"\n", "<", v, A).counted, 0);
    /* a negated set (worth a class); a half-read character is no count's position */
    const char *g2 = "root ::= \"\\\"\" [^\"]{0,3} \"\\\"\"\n";
    o = plan_after(g2, "\"", v, RLX__GCOUNT_AUTO);
    ASSERT_EQ(o.counted, 1);
    ASSERT_EQ(o.n_rng, 2);
    ASSERT_EQ(o.rng[1], '"' - 1);
    ASSERT_EQ(o.rng[2], '"' + 1);
    ASSERT_EQ(o.rng[3], 0x10ffff);
    ASSERT_EQ(plan_after(g2, "\"\xc3", v, A).counted, 0);
    rlx_grammar_vocab_free(v);
}

int main(void)
{
    static const rlx_test_case tests[] = {
        TEST_ENTRY(where_a_table_is_counted),
    };
    return rlx_test_run(tests, RLX_ARRAY_LEN(tests));
}
