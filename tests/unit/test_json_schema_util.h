/* test_json_schema_util.h - the JSON Schema tests' helpers: a schema's grammar read from JSON
 * text as the server reads a request body (models/json.c: numbers keep their literal text),
 * and whether the grammar accepts a text whole, fed in 3-byte pieces (splitting UTF-8 too).
 * Header-only, one copy per test file. */
#ifndef RLX_TEST_JSON_SCHEMA_UTIL_H
#define RLX_TEST_JSON_SCHEMA_UTIL_H

#include "tests/rlx_test.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "models/json.h"

static rlx_error last_err;

/* The compiled grammar of a schema given as JSON text; NULL (last_err set) when refused. */
static rlx_grammar *schema(const char *json)
{
    cJSON *s = NULL;
    rlx_error perr = {0};
    if (rlx_json_parse(json, strlen(json), &s, &perr)) {
        fprintf(stderr, "  bad test JSON: %s\n", json);
        return NULL;
    }
    last_err = (rlx_error){0};
    char *g = rlx_json_schema_to_gbnf(s, &last_err);
    cJSON_Delete(s);
    if (!g) return NULL;
    rlx_grammar *gr = rlx_grammar_compile(g, strlen(g), NULL, &last_err);
    if (!gr) fprintf(stderr, "  grammar does not compile: %s\n%s\n", last_err.msg, g);
    free(g);
    return gr;
}

/* 1 when the grammar accepts text as a whole, fed in 3-byte pieces (splits UTF-8 too). */
static int accepts(const rlx_grammar *g, const char *text)
{
    rlx_grammar_state *s = rlx_grammar_state_new(g, NULL);
    if (!s) return -1;
    size_t n = strlen(text);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i += 3)
        if (rlx_grammar_accept(s, text + i, n - i < 3 ? n - i : 3)) ok = 0;
    if (ok && !rlx_grammar_can_end(s)) ok = 0;
    rlx_grammar_state_free(s);
    return ok;
}

#define YES(g, t) ASSERT_MSG(accepts(g, t) == 1, "should accept: %s", t)
#define NO(g, t) ASSERT_MSG(accepts(g, t) == 0, "should refuse: %s", t)
#define REFUSED(json, word) do { rlx_grammar *g_ = schema(json); if (g_) rlx_grammar_free(g_); \
    ASSERT_MSG(!g_, "schema should be refused: %s", json); \
    ASSERT_MSG(strstr(last_err.msg, word), "message '%s' should name '%s'", last_err.msg, word); } while (0)

#endif
