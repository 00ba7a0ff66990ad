/* test_sample_json.c - the JSON keys constraint (engine/sample_json.c): a token that would close
 * a key its object already has is refused, whatever the tokens' cuts and the key's escapes; keys
 * of other objects (nested, siblings, arrays of objects) are free; a string value equal to a key
 * is free; the mask refuses only such tokens among those still allowed, and yields when nothing
 * else is left (a schema's few keys all used). Without the stage, a grammar of
 * additionalProperties let a model write {"a": 1, "a": 2}. */
#include "tests/rlx_test.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/sample.h"

#include <cjson/cJSON.h>

#include <math.h>

typedef struct vocab { const char *t[48]; size_t l[48]; int n; } vocab;

static int tok(vocab *v, const char *text)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->t[i], text)) return i;
    if (v->n == (int)(sizeof v->t / sizeof *v->t)) abort(); /* a test's vocabulary past the arrays */
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


/* ---- with the grammar of a schema: a ',' after which only used keys could come ---- */

typedef struct gpair { vocab v; rlx_grammar_vocab *gv; uint8_t mask[48]; rlx_sampler_stage *g, *j; } gpair;

static bool no_eog(const void *ctx, int32_t t) { (void)ctx, (void)t; return false; }

/* The grammar stage of the schema and the keys stage after it, over the vocabulary `texts` (NULL
 * terminated); NULL on failure. */
static gpair *gpair_new(const char *schema, const char *const *texts)
{
    gpair *p = calloc(1, sizeof *p);
    for (int i = 0; texts[i]; i++) tok(&p->v, texts[i]);
    cJSON *js = cJSON_Parse(schema);
    rlx_error e = {0};
    char *src = js ? rlx_json_schema_to_gbnf(js, &e) : NULL;
    cJSON_Delete(js);
    rlx_grammar *g = src ? rlx_grammar_compile(src, strlen(src), NULL, &e) : NULL;
    free(src);
    p->gv = rlx_grammar_vocab_new(p->v.n, p->v.t, p->v.l);
    rlx_grammar_tokens toks = {.vocab = p->gv, .texts = p->v.t, .lens = p->v.l, .mask = p->mask, .is_eog = no_eog};
    p->g = g && p->gv ? rlx_grammar_stage_new(g, &toks, &e) : NULL;
    p->j = p->g ? rlx_json_keys_stage_new(p->v.t, p->v.l, p->v.n, p->g) : NULL;
    if (!p->j) fprintf(stderr, "  schema stage: %s\n", e.msg);
    return p;
}

static void gpair_free(gpair *p)
{
    if (p->j) p->j->ops->free(p->j);
    if (p->g) p->g->ops->free(p->g);
    rlx_grammar_vocab_free(p->gv);
    free(p);
}

/* Feeds the texts (each a token of the vocabulary, NULL terminated) to both stages, each asked
 * first as the sampler asks (the keys stage lists an object's keys when asked about its first
 * ','); false when either refuses one. */
static bool feed(gpair *p, const char *const *seq)
{
    for (int i = 0; seq[i]; i++) {
        const int t = tok(&p->v, seq[i]);
        if (!p->g->ops->allows(p->g, t) || !p->j->ops->allows(p->j, t)) return false;
        p->g->ops->accept(p->g, t, true);
        p->j->ops->accept(p->j, t, true);
    }
    return true;
}

static bool keys_allow(gpair *p, const char *text) { return p->j->ops->allows(p->j, tok(&p->v, text)); }

static const char *const kvocab[] = {"{\"", "en", "fr", "de", "\":", "1", ",", ",\"", "}", "\",", "\"}", "\":\"", "x",
                                     "de\":1,", "en\":1}", " ", "\"", "e", "n", "d", "f", "q", "\\\"", "r", "\\", "t", NULL};

TEST(comma_refused_once_every_key_is_used)
{
    const char *pat = "{\"type\":\"object\",\"patternProperties\":{\"^(en|fr|de)$\":{\"type\":\"integer\"}},"
                      "\"additionalProperties\":false}";
    gpair *p = gpair_new(pat, kvocab);
    ASSERT(p->j);
    ASSERT(feed(p, (const char *const[]){"{\"", "en", "\":", "1", ",\"", "fr", "\":", "1", NULL}));
    ASSERT(keys_allow(p, ",") && keys_allow(p, ",\"")); /* "de" is still free */
    ASSERT(feed(p, (const char *const[]){",\"", "de", "\":", "1", NULL}));
    /* every key written: no ',' in any token, the object closes */
    ASSERT(!keys_allow(p, ","));
    ASSERT(!keys_allow(p, ",\""));
    ASSERT(keys_allow(p, "}"));
    /* the mask agrees, and leaves the grammar's other choices ('}', more digits) */
    float logits[32];
    for (int i = 0; i < p->v.n; i++) logits[i] = p->g->ops->allows(p->g, i) ? 0.0f : -INFINITY;
    rlx_token_cands c = {.logits = logits, .n_vocab = p->v.n};
    ASSERT(p->j->ops->mask(p->j, &c) > 0);
    ASSERT(logits[tok(&p->v, ",")] == -INFINITY && logits[tok(&p->v, ",\"")] == -INFINITY);
    ASSERT(logits[tok(&p->v, "}")] == 0.0f && logits[tok(&p->v, "1")] == 0.0f);
    gpair_free(p);

    /* a key begun whose only completion is written: "d" (and "e") after "de" and "en", "f" free */
    p = gpair_new(pat, kvocab);
    ASSERT(feed(p, (const char *const[]){"{\"", "en", "\":", "1", ",\"", "de", "\":", "1", ",\"", NULL}));
    ASSERT(!keys_allow(p, "d") && !keys_allow(p, "e"));
    ASSERT(keys_allow(p, "f") && keys_allow(p, "fr"));
    gpair_free(p);
    p = gpair_new(pat, kvocab); /* the same with the key opened by the token */
    ASSERT(feed(p, (const char *const[]){"{\"", "en", "\":", "1", ",\"", "de", "\":", "1", ",", NULL}));
    ASSERT(keys_allow(p, "\"") && keys_allow(p, " ")); /* "fr" is free */
    gpair_free(p);

    /* the last key closed by the token that writes the ',' */
    p = gpair_new(pat, kvocab);
    ASSERT(feed(p, (const char *const[]){"{\"", "en", "\":", "1", ",\"", "fr", "\":", "1", ",\"", NULL}));
    ASSERT(!keys_allow(p, "de\":1,"));
    gpair_free(p);

    /* a listed key with an escape (q" written q\", the grammar's only spelling) is its decoded
     * text: once it and "r" are written the ',' is refused, and so is a key begun "q" again (the
     * list stopped at the escaped quote and gave up: the object took keys for ever) */
    const char *qpat = "{\"type\":\"object\",\"patternProperties\":{\"^(q\\\"|r)$\":{\"type\":\"integer\"}},"
                       "\"additionalProperties\":false}";
    p = gpair_new(qpat, kvocab);
    ASSERT(p->j);
    ASSERT(feed(p, (const char *const[]){"{\"", "q", "\\\"", "\":", "1", ",\"", NULL}));
    ASSERT(!keys_allow(p, "q") && keys_allow(p, "r"));
    ASSERT(feed(p, (const char *const[]){"r", "\":", "1", NULL}));
    ASSERT(!keys_allow(p, ",") && !keys_allow(p, ",\""));
    ASSERT(keys_allow(p, "}"));
    gpair_free(p);

    /* keys that are escapes (\n, \t): a key begun "\" once both are written is refused (the key's
     * text so far was compared only while it had no escape: "\" passed, then "n" and "t" were
     * both repeats, and the stage yielded to one) */
    const char *epat = "{\"type\":\"object\",\"patternProperties\":{\"^(\\\\n|x|\\\\t)$\":{\"type\":\"integer\"}},"
                       "\"additionalProperties\":false}";
    p = gpair_new(epat, kvocab);
    ASSERT(p->j);
    ASSERT(feed(p, (const char *const[]){"{\"", "\\", "n", "\":", "1", ",\"", NULL}));
    ASSERT(keys_allow(p, "\\") && keys_allow(p, "x"));
    ASSERT(feed(p, (const char *const[]){"\\", "t", "\":", "1", ",\"", NULL}));
    ASSERT(!keys_allow(p, "\\") && keys_allow(p, "x"));
    ASSERT(feed(p, (const char *const[]){"x", "\":", "1", NULL}));
    ASSERT(!keys_allow(p, ",") && keys_allow(p, "}"));
    gpair_free(p);

    /* string values: the ',' comes in the token that closes the value */
    const char *spat = "{\"type\":\"object\",\"patternProperties\":{\"^(en|fr|de)$\":{\"type\":\"string\"}},"
                       "\"additionalProperties\":false}";
    p = gpair_new(spat, kvocab);
    ASSERT(p->j);
    ASSERT(feed(p, (const char *const[]){"{\"", "en", "\":\"", "x", "\",", "\"", "fr", "\":\"", "x", NULL}));
    ASSERT(keys_allow(p, "\","));
    ASSERT(feed(p, (const char *const[]){"\",", "\"", "de", "\":\"", "x", NULL}));
    ASSERT(!keys_allow(p, "\","));
    ASSERT(keys_allow(p, "\"}"));
    gpair_free(p);
}

/* ---- random walks over random short key lists ---- */

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* Whether any object in the value repeats a key (cJSON keeps repeated keys, decoded). */
static bool has_repeat(const cJSON *v)
{
    for (const cJSON *a = v ? v->child : NULL; a; a = a->next) {
        if (cJSON_IsObject(v))
            for (const cJSON *b = a->next; b; b = b->next)
                if (!strcmp(a->string, b->string)) return true;
        if (has_repeat(a)) return true;
    }
    return false;
}

/* Pieces of keys and the tokens that write them: a quote, a backslash, a newline, a control
 * character (written \u0001), an accented letter (two bytes, or one token), so that the keys'
 * written forms hold every kind of escape. */
static const char *const kpiece[] = {"a", "b", "\"", "\\", "\n", "\x01", "\xc3\xa9"};
static const char *const wvocab[] = {"{", "}", "{\"", "\"", "\":", ":", ",", ",\"", "1", "2", "1,\"", "a", "b", "\\", "n",
                                     "u", "0", "\xc3", "\xa9", "\xc3\xa9", "a\"", "\\\"", "\\\\", "\\n", "\\u0001", " ",
                                     "[", "]", "a\":", ",\"a", "\"b", "b\":", "\\u", "00", "01", NULL};

/* Random patternProperties lists of 1-5 keys of those pieces (as an object, an array of them,
 * or beside a declared property; and objects of any keys), walked token by token at random through both stages the way
 * the sampler asks them (the keys stage's mask after the grammar's), favouring a ',' where one
 * is allowed: every walk that ends (the grammar complete) must parse with no object repeating
 * a key, and no position may be left without a token. */
TEST(random_walks_never_repeat_a_listed_key)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int ended = 0, closed_full = 0;
    const int n_schemas = getenv("RLX_MEMCHECK") ? 60 : 300; /* under valgrind fewer: the same paths */
    for (int sch = 0; sch < n_schemas; sch++) {
        char keys[5][16], re[160] = "^(";
        const int n_keys = 1 + (int)(rng_next(&x) % 5);
        int nk = 0;
        while (nk < n_keys) {
            keys[nk][0] = 0;
            const int len = 1 + (int)(rng_next(&x) % 3);
            for (int i = 0; i < len; i++) strcat(keys[nk], kpiece[rng_next(&x) % 7]);
            bool dup = false;
            for (int k = 0; k < nk; k++) dup |= !strcmp(keys[k], keys[nk]);
            if (dup) continue;
            if (nk) strcat(re, "|");
            for (const char *c = keys[nk]; *c; c++) strcat(re, *c == '\\' ? "\\\\" : *c == '\n' ? "\\n" : (char[]){*c, 0});
            nk++;
        }
        strcat(re, ")$");
        cJSON *obj = cJSON_CreateObject(), *pp = cJSON_AddObjectToObject(obj, "patternProperties");
        cJSON *val = cJSON_AddObjectToObject(pp, re);
        cJSON_AddStringToObject(val, "type", "integer");
        cJSON_AddNumberToObject(val, "minimum", 1);
        cJSON_AddNumberToObject(val, "maximum", 2);
        cJSON_AddStringToObject(obj, "type", "object");
        cJSON_AddFalseToObject(obj, "additionalProperties");
        const int shape = (int)(rng_next(&x) % 4);
        if (shape == 3) { /* any key (no list): a used one is refused as it closes */
            cJSON_DeleteItemFromObject(obj, "patternProperties");
            cJSON_DeleteItemFromObject(obj, "additionalProperties");
            cJSON *ap = cJSON_AddObjectToObject(obj, "additionalProperties");
            cJSON_AddStringToObject(ap, "type", "integer");
            cJSON_AddNumberToObject(ap, "minimum", 1);
            cJSON_AddNumberToObject(ap, "maximum", 2);
        }
        if (shape == 2) { /* a declared property beside the pattern's keys ("n" is none of theirs) */
            cJSON *props = cJSON_AddObjectToObject(obj, "properties"), *np = cJSON_AddObjectToObject(props, "nn");
            cJSON_AddStringToObject(np, "type", "integer");
            cJSON_AddNumberToObject(np, "minimum", 1);
            cJSON_AddNumberToObject(np, "maximum", 2);
        }
        cJSON *root = obj;
        if (shape == 1) {
            root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "type", "array");
            cJSON_AddNumberToObject(root, "maxItems", 3);
            cJSON_AddItemToObject(root, "items", obj);
        }
        char *schema = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        for (int walk = 0; walk < 4; walk++) {
            gpair *p = gpair_new(schema, wvocab);
            ASSERT_MSG(p->j, "schema %s", schema);
            char text[4096];
            size_t n_text = 0;
            bool end = false;
            for (int step = 0; step < 400 && !end; step++) {
                if (rlx_grammar_can_end(rlx_grammar_stage_state(p->g))) {
                    end = true;
                    break;
                }
                float logits[48];
                int64_t left = 0;
                for (int t = 0; t < p->v.n; t++) {
                    logits[t] = p->g->ops->allows(p->g, t) ? 0.0f : -INFINITY;
                    left += logits[t] == 0.0f;
                }
                ASSERT_MSG(left > 0, "schema %s: the grammar allows nothing after '%.*s'", schema, (int)n_text, text);
                rlx_token_cands c = {.logits = logits, .n_vocab = p->v.n};
                const int64_t kept = p->j->ops->mask(p->j, &c);
                ASSERT(kept > 0);
                int cand[48], n_cand = 0, commas[48], n_commas = 0;
                for (int t = 0; t < p->v.n; t++) {
                    if (logits[t] == -INFINITY) continue;
                    ASSERT(p->j->ops->allows(p->j, t)); /* the mask and allows agree */
                    cand[n_cand++] = t;
                    if (strchr(p->v.t[t], ',')) commas[n_commas++] = t;
                }
                const int t = n_commas && rng_next(&x) % 10 < 7 ? commas[rng_next(&x) % (uint64_t)n_commas]
                                                                 : cand[rng_next(&x) % (uint64_t)n_cand];
                p->g->ops->accept(p->g, t, true);
                p->j->ops->accept(p->j, t, true);
                ASSERT(n_text + p->v.l[t] < sizeof text);
                memcpy(text + n_text, p->v.t[t], p->v.l[t]);
                n_text += p->v.l[t];
            }
            if (end) {
                /* cJSON's keys end at a NUL: \u0000 is read as U+E000 (which no token writes) */
                bool in_str = false;
                for (size_t i = 0; i < n_text; i++) {
                    if (text[i] == '"') in_str = !in_str;
                    else if (in_str && text[i] == '\\' && i + 1 < n_text) {
                        if (i + 6 <= n_text && !memcmp(text + i + 1, "u0000", 5)) memcpy(text + i + 2, "E000", 4);
                        i++;
                    }
                }
                cJSON *v = cJSON_ParseWithLength(text, n_text);
                ASSERT_MSG(v, "schema %s: not JSON: '%.*s'", schema, (int)n_text, text);
                ASSERT_MSG(!has_repeat(v), "schema %s: a repeated key in '%.*s'", schema, (int)n_text, text);
                ended++;
                const cJSON *o = cJSON_IsArray(v) ? v->child : v; /* an object with every key the pattern has */
                closed_full += shape != 3 && o && cJSON_GetArraySize(o) >= n_keys;
                cJSON_Delete(v);
            }
            gpair_free(p);
        }
        free(schema);
    }
    fprintf(stderr, "  %d of %d walks ended, %d with every listed key\n", ended, 4 * n_schemas, closed_full);
    ASSERT(ended > 2 * n_schemas && closed_full > n_schemas);
}

TEST(comma_free_while_keys_are_many)
{
    /* a pattern of many keys (an open list): the ',' stays free; keys already written still are
     * refused by their text */
    const char *pat = "{\"type\":\"object\",\"patternProperties\":{\"^[a-z]+$\":{\"type\":\"integer\"}},"
                      "\"additionalProperties\":false}";
    gpair *p = gpair_new(pat, kvocab);
    ASSERT(p->j);
    ASSERT(feed(p, (const char *const[]){"{\"", "en", "\":", "1", ",\"", "fr", "\":", "1", ",\"", "de", "\":", "1", NULL}));
    ASSERT(keys_allow(p, ",") && keys_allow(p, ",\""));
    gpair_free(p);
    /* declared properties and a few extras: the extras' list counts once the properties are used */
    const char *mixed = "{\"type\":\"object\",\"properties\":{\"en\":{\"type\":\"integer\"}},"
                        "\"patternProperties\":{\"^(fr|de)$\":{\"type\":\"integer\"}},\"additionalProperties\":false}";
    p = gpair_new(mixed, kvocab);
    ASSERT(p->j);
    ASSERT(feed(p, (const char *const[]){"{\"", "en", "\":", "1", ",\"", "de", "\":", "1", NULL}));
    ASSERT(keys_allow(p, ","));
    ASSERT(feed(p, (const char *const[]){",\"", "fr", "\":", "1", NULL}));
    ASSERT(!keys_allow(p, ","));
    gpair_free(p);
    /* nested objects keep their own lists: the inner object's keys do not close the outer one */
    const char *nest = "{\"type\":\"object\",\"patternProperties\":{\"^(en|fr)$\":{\"anyOf\":[{\"type\":\"integer\"},"
                       "{\"type\":\"object\",\"patternProperties\":{\"^(en|fr)$\":{\"type\":\"integer\"}},"
                       "\"additionalProperties\":false}]}},\"additionalProperties\":false}";
    p = gpair_new(nest, kvocab);
    ASSERT(p->j);
    ASSERT(feed(p, (const char *const[]){"{\"", "en", "\":", "{\"", "en", "\":", "1", ",\"", "fr", "\":", "1", NULL}));
    ASSERT(!keys_allow(p, ",")); /* the inner object's keys are used */
    ASSERT(feed(p, (const char *const[]){"}", NULL}));
    ASSERT(keys_allow(p, ",")); /* the outer one still has "fr" */
    gpair_free(p);
}

TEST_MAIN(TEST_ENTRY(repeated_keys_refused), TEST_ENTRY(comma_refused_once_every_key_is_used),
          TEST_ENTRY(comma_free_while_keys_are_many), TEST_ENTRY(random_walks_never_repeat_a_listed_key), TEST_ENTRY(other_objects_and_values_are_free),
          TEST_ENTRY(mask_refuses_only_repeats_and_yields))
