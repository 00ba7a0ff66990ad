/* test_json_schema_prims.c - the primitive rules a schema's grammar carries
 * (rlx__json_schema_prims_for, engine/json_schema_prim.c): only those it refers to, directly or
 * through one another, never for a name inside a literal or a class; every rule can be reached
 * (the split table holds them all); and the grammars still compile and match. */
#include "tests/rlx_test.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/json_schema_internal.h"

/* The GBNF of a schema given as JSON text (NULL when refused). */
static char *gbnf_of(const char *json)
{
    cJSON *s = cJSON_Parse(json);
    rlx_error err = {0};
    char *g = s ? rlx_json_schema_to_gbnf(s, &err) : NULL;
    if (!g) fprintf(stderr, "  refused: %s\n", err.msg);
    cJSON_Delete(s);
    return g;
}

static bool defines(const char *gbnf, const char *rule)
{
    char head[64];
    snprintf(head, sizeof head, "\n%s ::=", rule);
    return strstr(gbnf, head) != NULL;
}

static bool compiles_and_accepts(const char *gbnf, const char *text)
{
    rlx_error err = {0};
    rlx_grammar *g = rlx_grammar_compile(gbnf, strlen(gbnf), NULL, &err);
    rlx_grammar_state *s = g ? rlx_grammar_state_new(g, &err) : NULL;
    bool ok = s && !rlx_grammar_accept(s, text, strlen(text)) && rlx_grammar_can_end(s);
    if (!g) fprintf(stderr, "  %s\n%s\n", err.msg, gbnf);
    rlx_grammar_state_free(s);
    rlx_grammar_free(g);
    return ok;
}

TEST(only_what_the_schema_uses)
{
    char *g = gbnf_of("{\"type\":\"integer\"}");
    ASSERT(g != NULL);
    ASSERT(defines(g, "integer") && !defines(g, "uri") && !defines(g, "string") && !defines(g, "date"));
    ASSERT(compiles_and_accepts(g, "-42"));
    free(g);
    /* a format pulls its helpers in, transitively: uri -> hostname -> host-label, uri-pchar -> hex */
    g = gbnf_of("{\"type\":\"object\",\"properties\":{\"u\":{\"type\":\"string\",\"format\":\"uri\"}},\"required\":[\"u\"]}");
    ASSERT(g != NULL);
    ASSERT(defines(g, "uri") && defines(g, "hostname") && defines(g, "host-label") && defines(g, "hex") &&
           defines(g, "uri-scheme") && defines(g, "ws"));
    ASSERT(!defines(g, "uri-reference") && !defines(g, "date-time") && !defines(g, "email"));
    ASSERT(compiles_and_accepts(g, "{\"u\": \"https://example.com/a/b?x=1#top\"}"));
    free(g);
    /* names inside literals and classes are text, not references */
    g = gbnf_of("{\"enum\":[\"uri\",\"date-time\",\"value [x]\",\"a\\\"b uuid\"]}");
    ASSERT(g != NULL);
    ASSERT(!defines(g, "uri") && !defines(g, "date-time") && !defines(g, "value") && !defines(g, "uuid"));
    ASSERT(compiles_and_accepts(g, "\"a\\\"b uuid\""));
    free(g);
    /* any value: the recursive core and nothing of the formats */
    g = gbnf_of("{}");
    ASSERT(g != NULL);
    ASSERT(defines(g, "value") && defines(g, "object") && defines(g, "array") && defines(g, "char") &&
           !defines(g, "duration"));
    ASSERT(compiles_and_accepts(g, "{\"a\": [1, \"x\", null, {\"b\": true}]}"));
    free(g);
}

/* Text naming every rule gets every rule, in their order: the whole text back. */
TEST(every_rule_can_be_reached)
{
    rlx__sb names = {0}, out = {0};
    for (const char *p = rlx__json_schema_prims; *p;) {
        const char *sp = strchr(p, ' '), *nl = strchr(p, '\n');
        rlx__sb_put(&names, p, (size_t)(sp - p));
        rlx__sb_puts(&names, " ");
        p = nl + 1;
    }
    ASSERT(!names.oom);
    rlx__json_schema_prims_for(&out, names.p, names.n);
    ASSERT(!out.oom);
    ASSERT_EQ(out.n, strlen(rlx__json_schema_prims));
    ASSERT(!memcmp(out.p, rlx__json_schema_prims, out.n));
    free(rlx__sb_take(&names));
    free(rlx__sb_take(&out));
}

TEST_MAIN(TEST_ENTRY(only_what_the_schema_uses), TEST_ENTRY(every_rule_can_be_reached))
