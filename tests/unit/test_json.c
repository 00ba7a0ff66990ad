/* test_json.c - models/json.h: JSON read as Python's json module reads it, into cJSON trees that
 * keep number literals and NULs inside strings. */
#include "models/json.h"
#include "tests/rlx_test.h"

#include <math.h>

static cJSON *parse(const char *s, int *rc, rlx_error *err)
{
    cJSON *j = NULL;
    *rc = rlx_json_parse(s, strlen(s), &j, err);
    return j;
}

TEST(numbers_keep_their_literal)
{
    int rc;
    rlx_error err = {0};
    cJSON *j = parse("{\"a\": 1.0, \"b\": -0.0, \"c\": 12345678901234567890, \"d\": 1e-07, \"e\": 7, \"f\": -3E+2}", &rc, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    static const char *const want[][2] = {{"a", "1.0"}, {"b", "-0.0"}, {"c", "12345678901234567890"},
                                          {"d", "1e-07"}, {"e", "7"}, {"f", "-3E+2"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, want[i][0]);
        ASSERT(cJSON_IsNumber(n));
        ASSERT_STR_EQ(n->valuestring, want[i][1]);
    }
    /* what cJSON's own parser would give, for code that ignores the literal */
    ASSERT_EQ(cJSON_GetObjectItem(j, "e")->valueint, 7);
    ASSERT_NEAR(cJSON_GetObjectItem(j, "f")->valuedouble, -300.0, 0);
    ASSERT_EQ(cJSON_GetObjectItem(j, "c")->valueint, INT32_MAX);
    /* duplicating keeps the literal */
    cJSON *d = cJSON_Duplicate(j, true);
    ASSERT_STR_EQ(cJSON_GetObjectItem(d, "a")->valuestring, "1.0");
    cJSON_Delete(d);
    cJSON_Delete(j);
}

TEST(python_specials)
{
    int rc;
    rlx_error err = {0};
    cJSON *j = parse("[NaN, Infinity, -Infinity]", &rc, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT(isnan(cJSON_GetArrayItem(j, 0)->valuedouble));
    ASSERT(isinf(cJSON_GetArrayItem(j, 1)->valuedouble) && cJSON_GetArrayItem(j, 1)->valuedouble > 0);
    ASSERT_STR_EQ(cJSON_GetArrayItem(j, 2)->valuestring, "-Infinity");
    cJSON_Delete(j);
}

TEST(strings_keep_nul)
{
    int rc;
    rlx_error err = {0};
    cJSON *j = parse("{\"s\": \"before\\u0000after\", \"t\": \"plain \\u00e9\\ud83d\\ude00\", \"u\": \"\\ud800x\"}", &rc, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    const cJSON *s = cJSON_GetObjectItem(j, "s"), *t = cJSON_GetObjectItem(j, "t"), *u = cJSON_GetObjectItem(j, "u");
    ASSERT(cJSON_IsString(s));
    ASSERT_EQ(s->valueint, RLX_JSON_STR_NUL);
    ASSERT_STR_EQ(s->valuestring, "before\xc0\x80" "after");
    ASSERT_EQ(t->valueint, 0);
    ASSERT_STR_EQ(t->valuestring, "plain \xc3\xa9\xf0\x9f\x98\x80");
    ASSERT_STR_EQ(u->valuestring, "\xed\xa0\x80x"); /* a lone surrogate, kept as Python keeps it */
    cJSON_Delete(j);
}

TEST(duplicate_keys_as_python)
{
    int rc;
    rlx_error err = {0};
    /* the last value, where the first stood: {"k": 3, "j": 2} */
    cJSON *j = parse("{\"k\": 1, \"j\": 2, \"k\": 3}", &rc, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT_EQ(cJSON_GetArraySize(j), 2);
    ASSERT_STR_EQ(j->child->string, "k");
    ASSERT_STR_EQ(j->child->valuestring, "3");
    ASSERT_STR_EQ(j->child->next->string, "j");
    ASSERT(j->child->next->next == NULL && j->child->prev == j->child->next); /* cJSON's last link */
    cJSON_Delete(j);
    /* a large object (the table): 3000 keys, each written twice, the second time with its
     * value + 1; order of first appearance kept */
    char *big = malloc(3000 * 2 * 24 + 8);
    size_t n = 0;
    big[n++] = '{';
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 3000; i++) n += (size_t)sprintf(big + n, "%s\"k%d\":%d", n > 1 ? "," : "", (i * 7) % 3000, i + pass);
    big[n++] = '}';
    big[n] = 0;
    j = parse(big, &rc, &err);
    free(big);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT_EQ(cJSON_GetArraySize(j), 3000);
    int i = 0;
    for (cJSON *m = j->child; m; m = m->next, i++) {
        char want[16];
        snprintf(want, sizeof want, "k%d", (i * 7) % 3000);
        ASSERT_STR_EQ(m->string, want);
        ASSERT_EQ((int)m->valuedouble, i + 1);
    }
    cJSON_Delete(j);
}

static const struct { const char *text; int code; const char *what; } bad[] = {
    {"", RLX_EINVAL, "line 1 column 1: expected a value"},
    {"{\"a\": 1,}", RLX_EINVAL, "expected a string key"},
    {"[1 2]", RLX_EINVAL, "expected ',' or ']'"},
    {"{\"a\" 1}", RLX_EINVAL, "expected ':'"},
    {"[01]", RLX_EINVAL, "expected ',' or ']'"},
    {"[1.]", RLX_EINVAL, "digits must follow"},
    {"[-]", RLX_EINVAL, "invalid number"},
    {"\"abc", RLX_EINVAL, "unterminated string"},
    {"\"\\x\"", RLX_EINVAL, "invalid escape"},
    {"\"\\u12g4\"", RLX_EINVAL, "invalid \\u escape"},
    {"{}\n  x", RLX_EINVAL, "line 2 column 3: extra data"},
    {"[true, nul]", RLX_EINVAL, "expected a value"},
    {"-NaN", RLX_EINVAL, "invalid number"},
};

TEST(errors_name_place)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc;
        rlx_error err = {0};
        cJSON *j = parse(bad[i].text, &rc, &err);
        ASSERT_MSG(j == NULL, "case %zu parsed", i);
        ASSERT_MSG(rc == bad[i].code, "case %zu: rc %d (%s)", i, rc, err.msg);
        ASSERT_MSG(strstr(err.msg, bad[i].what), "case %zu: \"%s\" lacks \"%s\"", i, err.msg, bad[i].what);
    }
}

TEST(depth_limit)
{
    char deep[2100];
    for (int i = 0; i < 1001; i++) deep[i] = '[';
    for (int i = 0; i < 1001; i++) deep[1001 + i] = ']';
    deep[2002] = 0;
    int rc;
    rlx_error err = {0};
    cJSON *j = parse(deep, &rc, &err);
    ASSERT(j == NULL);
    ASSERT_EQ(rc, RLX_ERANGE);
    deep[0] = ' '; /* 1000 levels are fine */
    deep[2001] = 0;
    j = parse(deep, &rc, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    cJSON_Delete(j);
}

TEST_MAIN(TEST_ENTRY(numbers_keep_their_literal), TEST_ENTRY(python_specials), TEST_ENTRY(strings_keep_nul),
          TEST_ENTRY(duplicate_keys_as_python), TEST_ENTRY(errors_name_place), TEST_ENTRY(depth_limit))
