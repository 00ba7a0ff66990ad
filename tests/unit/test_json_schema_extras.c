/* test_json_schema_extras.c - schema corners found by a held-out probe (engine/json_schema.c,
 * json_schema_obj.c): a required property that is not declared takes additionalProperties'
 * schema; allOf members' additionalProperties hold for the merged object; const and enum
 * numbers keep the request's digits (the schema read by models/json.c, as the server reads
 * it); $ref JSON pointers are percent-decoded before they are split, and their parts have no
 * length limit; a patternProperties pattern that cannot compile says so; oneOf reads nullable. */
#include "tests/unit/test_json_schema_util.h"

TEST(required_but_undeclared_takes_additional_properties)
{
    rlx_grammar *g = schema("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"required\":[\"x\"]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"x\":1}");
    YES(g, "{\"x\":-7,\"y\":2}");
    NO(g, "{\"x\":\"\"}");
    NO(g, "{\"x\":null}");
    NO(g, "{\"x\":2.77}");
    NO(g, "{}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"required\":[\"x\"]}"); /* no additionalProperties: any value */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"x\":\"s\"}");
    YES(g, "{\"x\":null}");
    rlx_grammar_free(g);
}

TEST(all_of_members_additional_properties)
{
    rlx_grammar *g = schema("{\"allOf\":[{\"type\":\"object\",\"additionalProperties\":false},{\"type\":\"object\"}]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{}");
    NO(g, "{\"*\":true}");
    rlx_grammar_free(g);
    g = schema("{\"allOf\":[{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}},{\"type\":\"object\"}]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{}");
    YES(g, "{\"a\":1,\"b\":2}");
    NO(g, "{\"a\":\"s\"}");
    NO(g, "{\"a\":null}");
    rlx_grammar_free(g);
    g = schema("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}},"
               "{\"properties\":{\"a\":{\"type\":\"integer\"}}}]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"a\":1,\"b\":\"s\"}");
    NO(g, "{\"a\":1,\"b\":2}");
    rlx_grammar_free(g);
    g = schema("{\"allOf\":[{\"additionalProperties\":{\"type\":\"string\"}},{\"additionalProperties\":{\"type\":\"integer\"}}]}");
    ASSERT(g == NULL);
    ASSERT_MSG(strstr(last_err.msg, "additionalProperties"), "%s", last_err.msg);
}

TEST(const_and_enum_numbers_keep_their_digits)
{
    rlx_grammar *g = schema("{\"const\":0.30000000000000004}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "0.30000000000000004");
    NO(g, "0.3");
    rlx_grammar_free(g);
    g = schema("{\"enum\":[1.7976931348623157e308,12345678901234567,{\"v\":[1.10,-0.0]}]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "1.7976931348623157e308");
    YES(g, "12345678901234567");
    YES(g, "{\"v\":[1.10,-0.0]}");
    NO(g, "12345678901234568");
    NO(g, "1.79769313486232e+308");
    rlx_grammar_free(g);
}

TEST(ref_pointers_decode_then_split)
{
    /* %2F is a separator (the pointer is percent-decoded first); ~1 is a '/' in a name */
    rlx_grammar *g = schema("{\"$defs\":{\"a\":{\"b\":{\"type\":\"integer\"}},\"a/b\":{\"type\":\"string\"}},"
                            "\"$ref\":\"#/$defs/a%2Fb\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "5");
    NO(g, "\"s\"");
    rlx_grammar_free(g);
    g = schema("{\"$defs\":{\"a\":{\"b\":{\"type\":\"integer\"}},\"a/b\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/a~1b\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"s\"");
    NO(g, "5");
    rlx_grammar_free(g);
    /* names past 255 bytes: the whole name counts */
    char a255[256], a300[301], json[1200];
    memset(a255, 'a', 255), a255[255] = 0;
    memset(a300, 'a', 300), a300[300] = 0;
    snprintf(json, sizeof json, "{\"$defs\":{\"%s\":{\"type\":\"integer\"},\"%s\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/%s\"}",
             a255, a300, a300);
    g = schema(json);
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"s\"");
    NO(g, "5");
    rlx_grammar_free(g);
    g = schema("{\"$defs\":{\"x\":{}},\"$ref\":\"#/$defs/y\"}");
    ASSERT(g == NULL);
    ASSERT_MSG(strstr(last_err.msg, "points at nothing"), "%s", last_err.msg);
}

/* a patternProperties pattern too big to compile, beside declared properties: its own error,
 * not "out of memory"; and its grammar is compiled once, not once per declared name */
TEST(pattern_properties_pattern_errors)
{
    size_t cap = 16 * 900 + 4000, at = 0;
    char *json = malloc(cap);
    at += (size_t)snprintf(json + at, cap - at, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 200; i++) at += (size_t)snprintf(json + at, cap - at, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    at += (size_t)snprintf(json + at, cap - at, "},\"patternProperties\":{\"^(");
    for (int i = 0; i < 800; i++) at += (size_t)snprintf(json + at, cap - at, "%sx%05d", i ? "|" : "", i);
    snprintf(json + at, cap - at, ")$\":{\"type\":\"integer\"}},\"additionalProperties\":false}");
    rlx_grammar *g = schema(json);
    free(json);
    ASSERT(g == NULL);
    ASSERT_MSG(last_err.code == RLX_EINVAL || last_err.code == RLX_ERANGE, "code %d: %s", last_err.code, last_err.msg);
    ASSERT_MSG(strstr(last_err.msg, "patternProperties") && !strstr(last_err.msg, "out of memory"), "%s", last_err.msg);
    /* a small pattern still works beside declared names, and refuses a name it matches */
    g = schema("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},"
               "\"patternProperties\":{\"^x[0-9]$\":{\"type\":\"string\"}},\"additionalProperties\":false}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"id\":1,\"x1\":\"s\"}");
    NO(g, "{\"id\":1,\"x1\":2}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"x1\":{\"type\":\"integer\"}},"
               "\"patternProperties\":{\"^x[0-9]$\":{\"type\":\"string\"}},\"additionalProperties\":false}");
    ASSERT(g == NULL);
    ASSERT_MSG(strstr(last_err.msg, "also matches"), "%s", last_err.msg);
}

/* oneOf's check that its alternatives cannot both match reads nullable as the compiler does */
TEST(one_of_reads_nullable)
{
    rlx_grammar *g = schema("{\"oneOf\":[{\"type\":\"string\",\"nullable\":true},{\"type\":\"null\"}]}");
    if (g) rlx_grammar_free(g);
    ASSERT_MSG(g == NULL, "null matches both alternatives: oneOf cannot hold for it");
    ASSERT_MSG(strstr(last_err.msg, "oneOf"), "%s", last_err.msg);
    g = schema("{\"oneOf\":[{\"type\":\"string\",\"nullable\":true},{\"type\":\"integer\"}]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "null");
    YES(g, "3");
    rlx_grammar_free(g);
}

/* an extra key never holds '"', '\\' or a control unescaped: declared names with them made the
 * key grammar write them raw ({""x":null} ended 200/stop as JSON that does not parse) */
TEST(extra_keys_beside_names_with_escapes)
{
    rlx_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"\\\"\":{\"type\":\"null\"},\"a\\\\b\":{\"type\":\"null\"},"
                            "\"t\\tz\":{\"type\":\"null\"}},\"additionalProperties\":{\"type\":\"null\"}}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"\\\"\":null}");
    YES(g, "{\"a\\\\b\":null,\"x\":null}");
    YES(g, "{\"t\\tz\":null}");
    YES(g, "{\"ab\":null,\"t\":null,\"tz\":null}");
    NO(g, "{\"\"x\":null}");
    NO(g, "{\"\\x\":null}");
    NO(g, "{\"a\\q\":null}");
    NO(g, "{\"t\tz\":null}");
    rlx_grammar_free(g);
}

/* an optional property whose schema is false is never written (and no extra key takes its name);
 * required, no object matches */
TEST(false_property_schemas)
{
    rlx_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"legacy\":false},"
                            "\"required\":[\"id\"]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"id\":1}");
    NO(g, "{\"id\":1,\"legacy\":1}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"legacy\":false},\"additionalProperties\":{\"type\":\"integer\"}}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{}");
    YES(g, "{\"leg\":1,\"legacyx\":2}");
    NO(g, "{\"legacy\":1}");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"object\",\"properties\":{\"legacy\":false},\"required\":[\"legacy\"]}", "schema is false");
}

/* minimum / maximum must be numbers (only draft 4's exclusive* are booleans): true was skipped */
TEST(boolean_bounds)
{
    REFUSED("{\"type\":\"integer\",\"maximum\":true}", "maximum");
    REFUSED("{\"type\":\"integer\",\"minimum\":false}", "minimum");
    REFUSED("{\"type\":\"number\",\"maximum\":true}", "maximum");
    rlx_grammar *g = schema("{\"type\":\"integer\",\"maximum\":5,\"exclusiveMaximum\":true}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "4");
    NO(g, "5");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"integer\",\"exclusiveMinimum\":3,\"exclusiveMaximum\":4}", "least allowed is 4, the greatest 3");
}

/* patternProperties' key rule is freed when a later check refuses the object (ASan: a leak) */
TEST(pattern_properties_refused_later)
{
    REFUSED("{\"type\":\"object\",\"patternProperties\":{\"^[a-z]{1,3}_\\\\d$\":{\"type\":\"integer\"}},"
            "\"additionalProperties\":false,\"maxProperties\":3}", "maxProperties");
}

/* format beside minLength / maxLength that every string of the format meets (an e-mail's
 * maxLength 254, as real schemas write it) is the format; one that cuts into its lengths, a 400.
 * The examples are the longest and shortest strings of each format's rule. */
TEST(format_with_lengths)
{
    char label[63], elabel[42], local[65], email[300], host[300];
    snprintf(label, sizeof label, "%s-%s-%s", "aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccc");
    snprintf(elabel, sizeof elabel, "%s-%s", "aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb");
    snprintf(local, sizeof local, "%s.%s.%s.%s", "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbb", "ccccccccccccccc", "ddddddddddddddd");
    snprintf(email, sizeof email, "\"%s@%s.%s.%s.%s\"", local, elabel, elabel, elabel, elabel);
    snprintf(host, sizeof host, "\"%s.%s.%s.%s\"", label, label, label, label);
    ASSERT_EQ((int)strlen(email), 232 + 2);
    ASSERT_EQ((int)strlen(host), 251 + 2);
    struct { const char *fmt; int lo, hi; const char *shortest, *longest; } f[] = {
        {"date", 10, 10, "\"2024-02-29\"", "\"1999-12-31\""},
        {"time", 9, 24, "\"00:00:00Z\"", "\"23:59:59.123456789+01:00\""},
        {"date-time", 20, 35, "\"2024-01-01T00:00:00Z\"", "\"2024-01-01T23:59:59.123456789-12:30\""},
        {"uuid", 36, 36, "\"123e4567-e89b-12d3-a456-426614174000\"", "\"123e4567-e89b-12d3-a456-426614174000\""},
        {"email", 5, 232, "\"a@b.c\"", email},
        {"hostname", 1, 251, "\"a\"", host},
        {"ipv4", 7, 15, "\"0.0.0.0\"", "\"255.255.255.255\""},
        {"ipv6", 15, 39, "\"0:0:0:0:0:0:0:0\"", "\"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff\""},
    };
    for (size_t k = 0; k < sizeof f / sizeof *f; k++) {
        char json[256];
        ASSERT_EQ((int)strlen(f[k].shortest) - 2, f[k].lo);
        ASSERT_EQ((int)strlen(f[k].longest) - 2, f[k].hi);
        snprintf(json, sizeof json, "{\"type\":\"string\",\"format\":\"%s\",\"minLength\":%d,\"maxLength\":%d}", f[k].fmt,
                 f[k].lo, f[k].hi);
        rlx_grammar *g = schema(json);
        ASSERT_MSG(g, "%s: %s", json, last_err.msg);
        YES(g, f[k].shortest);
        YES(g, f[k].longest);
        rlx_grammar_free(g);
        snprintf(json, sizeof json, "{\"type\":\"string\",\"format\":\"%s\",\"maxLength\":%d}", f[k].fmt, f[k].hi - 1);
        REFUSED(json, "maxLength");
        snprintf(json, sizeof json, "{\"type\":\"string\",\"format\":\"%s\",\"minLength\":%d}", f[k].fmt, f[k].lo + 1);
        REFUSED(json, "minLength");
    }
    rlx_grammar *g = schema("{\"type\":\"string\",\"format\":\"email\",\"maxLength\":254}");
    ASSERT_MSG(g, "%s", last_err.msg);
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"string\",\"format\":\"uri\",\"maxLength\":900}", "unbounded");
    REFUSED("{\"type\":\"string\",\"format\":\"email\",\"pattern\":\"^a\"}", "pattern");
}

TEST_MAIN(TEST_ENTRY(required_but_undeclared_takes_additional_properties), TEST_ENTRY(all_of_members_additional_properties),
          TEST_ENTRY(const_and_enum_numbers_keep_their_digits), TEST_ENTRY(ref_pointers_decode_then_split),
          TEST_ENTRY(pattern_properties_pattern_errors), TEST_ENTRY(one_of_reads_nullable),
          TEST_ENTRY(extra_keys_beside_names_with_escapes), TEST_ENTRY(false_property_schemas), TEST_ENTRY(boolean_bounds),
          TEST_ENTRY(pattern_properties_refused_later), TEST_ENTRY(format_with_lengths))
