/* test_json_schema_enum.c - enum and const as alternatives that share their prefixes
 * (rlx__gbnf_alternatives, engine/json_schema_prim.c): the text for a few values, and enums of
 * thousands of values - a long common prefix, multi-byte characters whose first bytes agree,
 * numbers that are prefixes of one another, mixed types, a chain of prefixes - whose grammars
 * start, accept every value and nothing else (a flat alternation of over 2048 values needed a
 * parse stack per value and was refused). */
#include "tests/rlx_test.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/json_schema_internal.h"

static int accepts(const rlx_grammar *g, const char *text)
{
    rlx_error err = {0};
    rlx_grammar_state *s = rlx_grammar_state_new(g, &err);
    if (!s) return -1;
    int ok = !rlx_grammar_accept(s, text, strlen(text)) && rlx_grammar_can_end(s);
    rlx_grammar_state_free(s);
    return ok;
}

/* Compiles {"enum": values}; checks every value is accepted and each of `no` refused. */
static int check_enum(cJSON *values, const char *const *no, size_t n_no)
{
    cJSON *schema = cJSON_CreateObject();
    cJSON_AddItemToObject(schema, "enum", values);
    rlx_error err = {0};
    char *gbnf = rlx_json_schema_to_gbnf(schema, &err);
    rlx_grammar *g = gbnf ? rlx_grammar_compile(gbnf, strlen(gbnf), NULL, &err) : NULL;
    int bad = 0;
    if (!g) {
        fprintf(stderr, "  refused: %s\n", err.msg);
        bad = 1;
    }
    for (const cJSON *v = values->child; g && v && bad < 5; v = v->next) {
        char *t = cJSON_PrintUnformatted(v);
        int a = accepts(g, t);
        if (a != 1) fprintf(stderr, "  value %s: %s\n", t, a < 0 ? "the grammar's start failed" : "refused");
        bad += a != 1;
        free(t);
    }
    for (size_t i = 0; g && i < n_no; i++)
        if (accepts(g, no[i]) != 0) {
            fprintf(stderr, "  non-value %s accepted\n", no[i]);
            bad++;
        }
    rlx_grammar_free(g);
    free(gbnf);
    cJSON_Delete(schema);
    return bad;
}

TEST(few_values_flat_sorted_distinct)
{
    char *t[3] = {strdup("\"b\""), strdup("\"a\""), strdup("\"b\"")};
    rlx__sb b = {0};
    ASSERT(rlx__gbnf_alternatives(&b, t, 3));
    char *s = rlx__sb_take(&b);
    ASSERT_STR_EQ(s, "( \"\\\"a\\\"\" | \"\\\"b\\\"\" )");
    free(s);
    for (int i = 0; i < 3; i++) free(t[i]);
}

TEST(thousands_of_values)
{
    char buf[64];
    uint32_t x = 99;
    /* 3000 strings behind one long prefix */
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < 3000; i++) {
        snprintf(buf, sizeof buf, "warehouse-item-%d", i * 7);
        cJSON_AddItemToArray(a, cJSON_CreateString(buf));
    }
    static const char *const no_a[] = {"\"warehouse-item-\"", "\"warehouse-item-7x\"", "\"warehouse-item-20994\"", "\"x\"", "\"warehouse-item-14\" "};
    ASSERT_EQ(check_enum(a, no_a, RLX_ARRAY_LEN(no_a)), 0);
    /* 2500 strings of two-, three- and four-byte characters: é/è, 日/旦 and 😀/😁 share first bytes */
    static const char *const cps[] = {"é", "è", "ê", "日", "旦", "本", "😀", "😁", "a"};
    cJSON *u = cJSON_CreateArray();
    for (int i = 0; i < 2500; i++) {
        size_t n = 0;
        int len = 1 + i % 5;
        for (int k = 0; k < len + 3; k++) {
            x = x * 1664525u + 1013904223u;
            const char *c = cps[(x >> 16) % RLX_ARRAY_LEN(cps)];
            memcpy(buf + n, c, strlen(c));
            n += strlen(c);
        }
        snprintf(buf + n, sizeof buf - n, "%d", i);
        cJSON_AddItemToArray(u, cJSON_CreateString(buf));
    }
    static const char *const no_u[] = {"\"é\"", "\"\"", "\"日本\""};
    ASSERT_EQ(check_enum(u, no_u, RLX_ARRAY_LEN(no_u)), 0);
    /* the first and the last value agree on a first byte only (è C3 A8, é C3 A9): the shared
     * prefix ends before that character, never inside it */
    cJSON *e = cJSON_CreateArray();
    for (int i = 0; i < 80; i++) {
        snprintf(buf, sizeof buf, "%s%d", i % 2 ? "é" : "è", i);
        cJSON_AddItemToArray(e, cJSON_CreateString(buf));
    }
    static const char *const no_e[] = {"\"ê1\"", "\"é0\""};
    ASSERT_EQ(check_enum(e, no_e, RLX_ARRAY_LEN(no_e)), 0);
    /* numbers that are prefixes of one another, beside other types */
    cJSON *m = cJSON_CreateArray();
    for (int i = 0; i < 2200; i++) cJSON_AddItemToArray(m, cJSON_CreateNumber(i));
    cJSON_AddItemToArray(m, cJSON_CreateNull());
    cJSON_AddItemToArray(m, cJSON_CreateTrue());
    cJSON_AddItemToArray(m, cJSON_Parse("{\"k\":[1,2]}"));
    cJSON_AddItemToArray(m, cJSON_CreateString("3"));
    static const char *const no_m[] = {"2200", "-1", "01", "false", "{\"k\":[1]}", "\"4\"", "1.5"};
    ASSERT_EQ(check_enum(m, no_m, RLX_ARRAY_LEN(no_m)), 0);
    /* a chain: "a", "aa", "aaa", ... (every value a prefix of the next): 700 nested groups, about
     * the deepest the grammar's 256 KiB allows */
    cJSON *c = cJSON_CreateArray();
    char chain[701] = {0};
    for (int i = 0; i < 700; i++) {
        chain[i] = 'a';
        cJSON_AddItemToArray(c, cJSON_CreateString(chain));
    }
    static const char *const no_c[] = {"\"\"", "\"ab\""};
    ASSERT_EQ(check_enum(c, no_c, RLX_ARRAY_LEN(no_c)), 0);
}

TEST_MAIN(TEST_ENTRY(few_values_flat_sorted_distinct), TEST_ENTRY(thousands_of_values))
