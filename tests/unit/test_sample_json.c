/* test_sample_json.c - the JSON keys constraint (engine/sample_json.c): a token that would close
 * a key its object already has is refused, whatever the tokens' cuts and the key's escapes; keys
 * of other objects (nested, siblings, arrays of objects) are free; a string value equal to a key
 * is free; the mask refuses only such tokens among those still allowed, and yields when nothing
 * else is left (a schema's few keys all used). Without the stage, a grammar of
 * additionalProperties let a model write {"a": 1, "a": 2}. */
#include "tests/rlx_test.h"
#include "engine/sample.h"

#include <math.h>

typedef struct vocab { const char *t[32]; size_t l[32]; int n; } vocab;

static int tok(vocab *v, const char *text)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->t[i], text)) return i;
    v->t[v->n] = text;
    v->l[v->n] = strlen(text);
    return v->n++;
}

/* Feeds the tokens of `seq` (a NULL-terminated list of texts) and asks about `next`. */
static bool allows_after(const char *const *seq, const char *next)
{
    vocab v = {0};
    int ids[32], n = 0;
    for (; seq[n]; n++) ids[n] = tok(&v, seq[n]);
    int nx = tok(&v, next);
    rlx_sampler_stage *st = rlx_json_keys_stage_new(v.t, v.l, v.n, NULL);
    for (int i = 0; i < n; i++) st->ops->accept(st, ids[i], true);
    bool ok = st->ops->allows(st, nx);
    st->ops->free(st);
    return ok;
}

TEST(repeated_keys_refused)
{
    /* the key closes in the token after its text, or in one token with it */
    ASSERT(!allows_after((const char *const[]){"{\"", "b", "\":", "7", ",\"", "b", NULL}, "\":"));
    ASSERT(!allows_after((const char *const[]){"{\"b\":", "7", NULL}, ",\"b\":"));
    ASSERT(!allows_after((const char *const[]){"{\"ab", "\": 1, \"a", NULL}, "b\""));
    /* escapes decode: "a" and "\u0061" are one key, a surrogate pair one code point */
    ASSERT(!allows_after((const char *const[]){"{\"a\":1,", NULL}, "\"\\u0061\""));
    ASSERT(!allows_after((const char *const[]){"{\"\xf0\x9f\x98\x80\":1,", NULL}, "\"\\ud83d\\ude00\":"));
    ASSERT(!allows_after((const char *const[]){"{\"a\\nb\":1,", NULL}, "\"a\\u000ab\""));
    /* a different key, a prefix of one, a longer one */
    ASSERT(allows_after((const char *const[]){"{\"ab\":1,\"", NULL}, "a\""));
    ASSERT(allows_after((const char *const[]){"{\"a\":1,\"", NULL}, "ab\""));
}

TEST(other_objects_and_values_are_free)
{
    /* a nested object's keys are its own, and so are a sibling's */
    ASSERT(allows_after((const char *const[]){"{\"a\":", "{\"", NULL}, "a\":1}"));
    ASSERT(allows_after((const char *const[]){"[{\"a\":1},", "{\"", NULL}, "a\""));
    ASSERT(allows_after((const char *const[]){"{\"a\":{\"b\":1},", NULL}, "\"b\":2"));
    /* back in the outer object after the inner one: its keys count again */
    ASSERT(!allows_after((const char *const[]){"{\"a\":{\"b\":1},", NULL}, "\"a\":2"));
    ASSERT(!allows_after((const char *const[]){"{\"a\":{\"b\":1", NULL}, "},\"a\""));
    /* a string value that equals a key, and keys inside an array value's objects */
    ASSERT(allows_after((const char *const[]){"{\"a\":", NULL}, "\"a\""));
    ASSERT(allows_after((const char *const[]){"{\"a\":[", NULL}, "{\"a\":1}]"));
    /* a key closed inside one token that opens a new object, then repeated there */
    ASSERT(!allows_after((const char *const[]){"{\"x\":", NULL}, "{\"k\":1,\"k\""));
}

TEST(mask_refuses_only_repeats_and_yields)
{
    vocab v = {0};
    const int open = tok(&v, "{\""), a = tok(&v, "a"), close = tok(&v, "\":"), one = tok(&v, "1"), comma = tok(&v, ",\"");
    const int ab = tok(&v, "ab\":"), end = tok(&v, "}");
    rlx_sampler_stage *st = rlx_json_keys_stage_new(v.t, v.l, v.n, NULL);
    const int seq[] = {open, a, close, one, comma, a};
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) st->ops->accept(st, seq[i], true);
    float logits[32];
    for (int i = 0; i < v.n; i++) logits[i] = 0.0f;
    rlx_token_cands c = {.logits = logits, .n_vocab = v.n};
    ASSERT_EQ(st->ops->mask(st, &c), v.n - 1); /* '":' would repeat "a"; "ab": does not */
    ASSERT(logits[close] == -INFINITY && logits[ab] == 0.0f && logits[end] == 0.0f);
    /* only the repeat left (the grammar refused the rest): the stage yields */
    for (int i = 0; i < v.n; i++) logits[i] = i == close ? 0.0f : -INFINITY;
    ASSERT_EQ(st->ops->mask(st, &c), 1);
    ASSERT(logits[close] == 0.0f && st->ops->allows(st, close));
    /* the yield is the position's: the next repeat is refused again */
    const int more[] = {close, one, comma, a};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) st->ops->accept(st, more[i], true);
    ASSERT(!st->ops->allows(st, close));
    st->ops->free(st);
}

TEST_MAIN(TEST_ENTRY(repeated_keys_refused), TEST_ENTRY(other_objects_and_values_are_free),
          TEST_ENTRY(mask_refuses_only_repeats_and_yields))
