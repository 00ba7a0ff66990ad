/* test_json_schema.c - JSON Schema -> GBNF (engine/json_schema.h): for every keyword, the
 * compiled grammar (run by the recogniser of engine/grammar.h) accepts valid instances and
 * refuses invalid ones; Unicode and escapes; depth, size and refusal limits with messages that
 * name the keyword. */
#include "tests/unit/test_json_schema_util.h"

TEST(types)
{
    rlx_grammar *g = schema("{\"type\":\"integer\"}");
    ASSERT(g);
    YES(g, "0"); YES(g, "-12"); YES(g, "1234567890123456");
    NO(g, "01"); NO(g, "1.5"); NO(g, "\"1\""); NO(g, "1 ");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"number\"}");
    ASSERT(g);
    YES(g, "0"); YES(g, "-1.25"); YES(g, "3e10"); YES(g, "2.5E-3");
    NO(g, "1."); NO(g, ".5"); NO(g, "1e999"); NO(g, "NaN");
    rlx_grammar_free(g);
    g = schema("{\"type\":[\"boolean\",\"null\"]}");
    ASSERT(g);
    YES(g, "true"); YES(g, "false"); YES(g, "null"); NO(g, "0"); NO(g, "\"true\"");
    rlx_grammar_free(g);
    g = schema("{}"); /* any value */
    ASSERT(g);
    YES(g, "{\"a\": [1, \"x\", null, {\"b\": false}]}"); YES(g, "\"s\""); YES(g, "-0.5");
    NO(g, "{\"a\" 1}"); NO(g, "[1,]");
    rlx_grammar_free(g);
    g = schema("true");
    ASSERT(g);
    YES(g, "[]");
    rlx_grammar_free(g);
    REFUSED("false", "false");
    REFUSED("{\"type\":\"float\"}", "type");
}

TEST(strings_unicode)
{
    rlx_grammar *g = schema("{\"type\":\"string\"}");
    ASSERT(g);
    YES(g, "\"\""); YES(g, "\"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\"");
    YES(g, "\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\""); YES(g, "\"\\u00e9\\uD83D\\uDE00\"");
    NO(g, "\"a\nb\""); NO(g, "\"\\x41\""); NO(g, "\"\\ud83d\""); NO(g, "\"\\uDE00\\uD83D\""); NO(g, "\"a");
    NO(g, "\"a\"\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
    ASSERT(g);
    YES(g, "\"ab\""); YES(g, "\"\xe4\xb8\xad\xe6\x96\x87\xf0\x9f\x98\x80\""); YES(g, "\"\\uD83D\\uDE00x\"");
    NO(g, "\"a\""); NO(g, "\"abcd\""); NO(g, "\"\\uD83D\\uDE00\""); /* one code point */
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"string\",\"maxLength\":5000}", "maxLength");
    REFUSED("{\"type\":\"string\",\"minLength\":-1}", "minLength");
}

TEST(formats)
{
    rlx_grammar *g = schema("{\"type\":\"string\",\"format\":\"date\"}");
    ASSERT(g);
    YES(g, "\"2024-02-29\""); YES(g, "\"2000-02-29\""); YES(g, "\"2023-12-31\""); YES(g, "\"2023-04-30\"");
    NO(g, "\"2023-02-29\""); NO(g, "\"1900-02-29\""); NO(g, "\"2023-04-31\""); NO(g, "\"2023-13-01\"");
    NO(g, "\"2023-00-10\""); NO(g, "\"2023-1-10\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"time\"}");
    ASSERT(g);
    YES(g, "\"23:59:59Z\""); YES(g, "\"08:30:00.123+05:30\"");
    NO(g, "\"24:00:00Z\""); NO(g, "\"12:60:00Z\""); NO(g, "\"12:00:00\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"date-time\"}");
    ASSERT(g);
    YES(g, "\"2024-01-15T10:20:30-08:00\""); NO(g, "\"2024-01-15 10:20:30Z\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"uuid\"}");
    ASSERT(g);
    YES(g, "\"123e4567-e89b-12d3-a456-426614174000\""); NO(g, "\"123e4567e89b12d3a456426614174000\"");
    rlx_grammar_free(g);
    /* simple forms of email, hostname, ipv4 (subsets of what the RFCs and Ajv accept) */
    g = schema("{\"type\":\"string\",\"format\":\"email\"}");
    ASSERT(g);
    YES(g, "\"a.b+c@example.com\""); YES(g, "\"x_1@mail-1.example.co\""); YES(g, "\"Q@a.b.c.de\"");
    NO(g, "\"a@b\""); NO(g, "\"a..b@c.de\""); NO(g, "\".a@c.de\""); NO(g, "\"a@-c.de\""); NO(g, "\"a@c-.de\"");
    NO(g, "\"a b@c.de\""); NO(g, "\"@c.de\""); NO(g, "\"a@c..de\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"hostname\"}");
    ASSERT(g);
    YES(g, "\"localhost\""); YES(g, "\"a-b.example.org\""); YES(g, "\"x1.y2.z3.w4\"");
    NO(g, "\"-a.org\""); NO(g, "\"a_b.org\""); NO(g, "\"a..org\""); NO(g, "\"a.b.c.d.e\""); NO(g, "\"\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"ipv4\"}");
    ASSERT(g);
    YES(g, "\"0.0.0.0\""); YES(g, "\"255.255.255.255\""); YES(g, "\"192.168.1.20\""); YES(g, "\"10.9.249.199\"");
    NO(g, "\"256.1.1.1\""); NO(g, "\"01.1.1.1\""); NO(g, "\"1.1.1\""); NO(g, "\"1.1.1.1.1\""); NO(g, "\"1.1.1.260\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"ipv6\"}"); /* the uncompressed form */
    ASSERT(g);
    YES(g, "\"2001:db8:0:0:0:ff00:42:8329\""); YES(g, "\"FFFF:a:b:c:d:e:f:0\"");
    NO(g, "\"2001:db8::1\""); NO(g, "\"1:2:3:4:5:6:7\""); NO(g, "\"1:2:3:4:5:6:7:8:9\""); NO(g, "\"12345:2:3:4:5:6:7:8\"");
    NO(g, "\"g:2:3:4:5:6:7:8\"");
    rlx_grammar_free(g);
    /* uri: scheme "://" host [port] path, or scheme ":" rootless path; query, fragment */
    g = schema("{\"type\":\"string\",\"format\":\"uri\"}");
    ASSERT(g);
    YES(g, "\"https://example.com\""); YES(g, "\"http://a-b.example.org:8080/x/y%20z?q=1&r=a/b#frag\"");
    YES(g, "\"mailto:someone@example.com\""); YES(g, "\"urn:isbn:0451450523\""); YES(g, "\"ftp://h/\"");
    YES(g, "\"HTTP://X.Y/(a)!$'*+,;=:@~\"");
    NO(g, "\"example.com\""); NO(g, "\"1http://a.b\""); NO(g, "\"http://a b\""); NO(g, "\"http:\"");
    NO(g, "\"a:b#c#d\""); NO(g, "\"http://a.b/%zz\""); NO(g, "\"http://a.b:port\""); NO(g, "\"a://@:x\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"uri-reference\"}"); /* a uri, or relative */
    ASSERT(g);
    YES(g, "\"https://example.com/a\""); YES(g, "\"/a/b?c=d#e\""); YES(g, "\"../x/y\""); YES(g, "\"#frag\"");
    YES(g, "\"?q=1\""); YES(g, "\"\"");
    NO(g, "\"a b\""); NO(g, "\"//\""); NO(g, "\"a#b#c\""); NO(g, "\"%zz\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"duration\"}"); /* RFC 3339 appendix A */
    ASSERT(g);
    YES(g, "\"P3Y6M4DT12H30M5S\""); YES(g, "\"P1D\""); YES(g, "\"PT36H\""); YES(g, "\"P2W\""); YES(g, "\"P1MT2M\"");
    NO(g, "\"P\""); NO(g, "\"PT\""); NO(g, "\"P1DT\""); NO(g, "\"1D\""); NO(g, "\"P1W2D\""); NO(g, "\"P1.5D\"");
    NO(g, "\"PT1S2M\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"byte\"}"); /* base64, padded */
    ASSERT(g);
    YES(g, "\"\""); YES(g, "\"aGVsbG8=\""); YES(g, "\"aGk=\""); YES(g, "\"YQ==\""); YES(g, "\"ab+/\"");
    NO(g, "\"abc\""); NO(g, "\"a===\""); NO(g, "\"ab-_\""); NO(g, "\"YQ\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"json-pointer\"}");
    ASSERT(g);
    YES(g, "\"\""); YES(g, "\"/a/0/b~1c~0\""); YES(g, "\"/\""); YES(g, "\"/caf\u00e9\"");
    NO(g, "\"a/b\""); NO(g, "\"/a~2\""); NO(g, "\"/~\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"relative-json-pointer\"}");
    ASSERT(g);
    YES(g, "\"0\""); YES(g, "\"1#\""); YES(g, "\"2/a/b\""); NO(g, "\"01/a\""); NO(g, "\"/a\""); NO(g, "\"1##\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"iso-date-time\"}"); /* RFC 3339's form of it */
    ASSERT(g);
    YES(g, "\"2024-01-15T10:20:30Z\""); NO(g, "\"2024-01-15T25:20:30Z\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"format\":\"int32\"}"); /* a number's format says nothing of strings */
    ASSERT(g);
    YES(g, "\"x\"");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"string\",\"format\":\"uri-template\"}", "uri-template");
    REFUSED("{\"type\":\"string\",\"format\":\"date\",\"maxLength\":3}", "format");
}

/* OpenAPI's number formats, which ajv-formats checks: int32 bounds the value; float keeps it
 * within a float's range; int64 / double hold every number the grammar writes. */
TEST(number_formats)
{
    rlx_grammar *g = schema("{\"type\":\"integer\",\"format\":\"int32\"}");
    ASSERT(g);
    YES(g, "2147483647"); YES(g, "-2147483648"); YES(g, "0");
    NO(g, "2147483648"); NO(g, "-2147483649"); NO(g, "99999999999");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"integer\",\"format\":\"int32\",\"minimum\":-1.5,\"maximum\":1e12}");
    ASSERT(g);
    YES(g, "-1"); YES(g, "2147483647"); NO(g, "-2"); NO(g, "2147483648");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"number\",\"format\":\"int32\"}"); /* whole numbers only */
    ASSERT(g);
    YES(g, "-7"); NO(g, "1.5"); NO(g, "1e3"); NO(g, "3000000000");
    rlx_grammar_free(g);
    g = schema("{\"format\":\"int64\"}"); /* no type: the format says integer */
    ASSERT(g);
    YES(g, "1234567890123456"); NO(g, "\"1\""); NO(g, "0.5");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"number\",\"format\":\"float\"}");
    ASSERT(g);
    YES(g, "1.5e22"); YES(g, "-3e-40"); YES(g, "2.25"); NO(g, "1e23"); NO(g, "1e99");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"number\",\"format\":\"double\"}");
    ASSERT(g);
    YES(g, "1e99"); YES(g, "0.1");
    rlx_grammar_free(g);
    g = schema("{\"type\":[\"integer\",\"string\"],\"format\":\"date\"}"); /* a string format: strings only */
    ASSERT(g);
    YES(g, "12"); YES(g, "\"2020-01-01\""); NO(g, "\"x\"");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"integer\",\"format\":\"uint8\"}", "uint8");
}

/* multipleOf: listed between two bounds (256 multiples at most), or by the last digits for a
 * divisor of 1000 */
TEST(multiple_of)
{
    rlx_grammar *g = schema("{\"type\":\"integer\",\"multipleOf\":5}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "0"); YES(g, "5"); YES(g, "-15"); YES(g, "1234567890"); YES(g, "100");
    NO(g, "7"); NO(g, "12"); NO(g, "05"); NO(g, "5.0"); YES(g, "999999999999995"); NO(g, "9999999999999995");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"number\",\"multipleOf\":8}"); /* a multiple of a whole number is whole */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "8"); YES(g, "1000"); YES(g, "-96"); YES(g, "1024"); NO(g, "100"); NO(g, "1028"); NO(g, "4"); NO(g, "8.5");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"integer\",\"multipleOf\":7,\"minimum\":-10,\"exclusiveMaximum\":21}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "-7"); YES(g, "0"); YES(g, "14"); NO(g, "-14"); NO(g, "21"); NO(g, "8");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"integer\",\"multipleOf\":1,\"maximum\":3}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "3"); YES(g, "-40"); NO(g, "4");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"integer\",\"multipleOf\":3}", "multipleOf");
    REFUSED("{\"type\":\"integer\",\"multipleOf\":5,\"minimum\":0}", "multipleOf");
    REFUSED("{\"type\":\"integer\",\"multipleOf\":7,\"minimum\":0,\"maximum\":10000}", "multipleOf");
    REFUSED("{\"type\":\"number\",\"multipleOf\":0.01}", "multipleOf");
    REFUSED("{\"type\":\"integer\",\"multipleOf\":0}", "multipleOf");
    REFUSED("{\"type\":\"integer\",\"multipleOf\":10,\"minimum\":1,\"maximum\":9}", "multipleOf");
    REFUSED("{\"type\":\"number\",\"format\":7}", "format");
}

TEST(pattern)
{
    rlx_grammar *g = schema("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3,4}(x|yz)?$\"}");
    ASSERT(g);
    YES(g, "\"AB-123\""); YES(g, "\"ZZ-0000yz\""); YES(g, "\"QQ-999x\"");
    NO(g, "\"ab-123\""); NO(g, "\"AB-12\""); NO(g, "\"AB-12345\""); NO(g, "\"AB-123xyz\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^(?:[^a-c\\\"]+|\\\\.)*$\"}");
    ASSERT(g);
    YES(g, "\"xyz\""); YES(g, "\"d.e\""); YES(g, "\"\xc3\xa9\\\\\""); NO(g, "\"abc\""); NO(g, "\"x\\\"\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"ab+\"}"); /* unanchored: anywhere */
    ASSERT(g);
    YES(g, "\"xxabbby\""); YES(g, "\"ab\""); NO(g, "\"a b\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^a$|^b\"}");
    ASSERT(g);
    YES(g, "\"a\""); YES(g, "\"bcd\""); NO(g, "\"ac\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^\\\\s\\\\S\\\\w\\\\W.$\"}");
    ASSERT(g);
    YES(g, "\" x_-\xe4\xb8\xad\""); YES(g, "\"\\tx_-\\\"\""); NO(g, "\"  _-a\""); NO(g, "\" x_-\\n\"");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"string\",\"pattern\":\"^(?=a)a$\"}", "lookaround");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}", "backreference");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^a\\\\bb$\"}", "word boundary");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^a{2000}$\"}", "1000");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^(a$\"}", "pattern");
    REFUSED("{\"type\":\"string\",\"pattern\":\"a^b\"}", "^ inside");
    /* with minLength/maxLength: a pattern of one repeated character takes the lengths' counts */
    g = schema("{\"type\":\"string\",\"pattern\":\"^[a-z0-9_]+$\",\"minLength\":3,\"maxLength\":5}");
    ASSERT(g);
    YES(g, "\"abc\""); YES(g, "\"ab_9z\""); NO(g, "\"ab\""); NO(g, "\"abcdef\""); NO(g, "\"aBc\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^\\\\d{2,8}?$\",\"maxLength\":4}");
    ASSERT(g);
    YES(g, "\"12\""); YES(g, "\"1234\""); NO(g, "\"1\""); NO(g, "\"12345\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^[\\\"\u00e9a]*$\",\"maxLength\":2}"); /* JSON escapes count one */
    ASSERT(g);
    YES(g, "\"\\\"\u00e9\""); YES(g, "\"\""); NO(g, "\"a\\\"a\""); NO(g, "\"ab\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^.$\",\"minLength\":1}");
    ASSERT(g);
    YES(g, "\"x\""); NO(g, "\"xy\""); NO(g, "\"\"");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"string\",\"pattern\":\"^ab+$\",\"minLength\":2}", "one repeated character");
    REFUSED("{\"type\":\"string\",\"pattern\":\"[a-z]+\",\"maxLength\":2}", "one repeated character");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^[a-z]{1,3}$\",\"minLength\":5}", "nothing matches");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^(?=a)+$\",\"minLength\":1}", "one repeated character");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^[a-$\",\"minLength\":1}", "pattern");
    /* general-category property escapes (utf8proc's tables), also in classes and negated */
    g = schema("{\"type\":\"string\",\"pattern\":\"^[\\\\p{L} '-]+$\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"Jos\u00e9 O'Neil-\u674e\""); YES(g, "\"\u0416\u03a9\""); NO(g, "\"R2D2\""); NO(g, "\"a_b\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^\\\\p{Lu}\\\\p{gc=Ll}+\\\\P{Letter}$\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"Abc1\""); YES(g, "\"\u00c9t\u00e9!\""); NO(g, "\"abc1\""); NO(g, "\"AbcD\""); NO(g, "\"ABc1\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^\\\\p{Nd}{2}\\\\p{Sc}$\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"12$\""); YES(g, "\"\u0663\u0664\u20ac\""); NO(g, "\"1a$\""); NO(g, "\"12a\"");
    rlx_grammar_free(g);
    /* code points unassigned in utf8proc's Unicode version are in no property's set, \P{..} or a
     * negated class holding \p{..}: the validator's newer Unicode may make them letters (a run
     * once produced U+A7DC for \P{L}: unassigned in 15.0, a letter in 16.0). U+0378 is still
     * unassigned; the noncharacters (U+FDD0, U+FFFE) are Cn in every version; plain classes and
     * '.' do not name a category and keep every code point. */
    g = schema("{\"type\":\"string\",\"pattern\":\"^\\\\P{L}$\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"1\""); YES(g, "\"\ue000\""); YES(g, "\"\ufdd0\""); YES(g, "\"\u0301\"");
    NO(g, "\"\u0378\""); NO(g, "\"\ua7dc\""); NO(g, "\"a\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^[^\\\\p{L}\\\\d]$\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"!\""); YES(g, "\"\u0301\""); NO(g, "\"\u0378\""); NO(g, "\"\ua7dc\""); NO(g, "\"7\""); NO(g, "\"b\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^[^\\\\P{L}]$\"}"); /* letters only */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"\u00e9\""); NO(g, "\"\u0378\""); NO(g, "\"1\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^\\\\p{Cn}$\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"\ufdd0\""); NO(g, "\"\u0378\""); NO(g, "\"a\"");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"pattern\":\"^[^a][\\\\p{L}.]$\"}"); /* no category named negatively */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"\u0378\u00e9\""); YES(g, "\"\u0378.\""); NO(g, "\"a\u00e9\"");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"string\",\"pattern\":\"^\\\\p{Script=Latin}$\"}", "general category");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^\\\\p{Foo}$\"}", "general category");
    REFUSED("{\"type\":\"string\",\"pattern\":\"^\\\\p{L$\"}", "\\p");
}

TEST(integer_ranges)
{
    static const struct { const char *schema; long long lo, hi; } cases[] = {
        {"{\"type\":\"integer\",\"minimum\":0,\"maximum\":100}", 0, 100},
        {"{\"type\":\"integer\",\"minimum\":-37,\"maximum\":1234}", -37, 1234},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":9,\"exclusiveMaximum\":1000}", 10, 999},
        {"{\"type\":\"integer\",\"minimum\":-250,\"maximum\":-17}", -250, -17},
        {"{\"type\":\"integer\",\"minimum\":1.5,\"maximum\":99.5}", 2, 99},
        {"{\"type\":\"integer\",\"minimum\":387}", 387, 100000},
        {"{\"type\":\"integer\",\"maximum\":-42}", -100000, -42},
        {"{\"type\":\"integer\",\"maximum\":5,\"exclusiveMaximum\":true}", -100000, 4},
        {"{\"type\":\"integer\",\"minimum\":7,\"maximum\":7}", 7, 7},
    };
    for (size_t c = 0; c < RLX_ARRAY_LEN(cases); c++) {
        rlx_grammar *g = schema(cases[c].schema);
        ASSERT_MSG(g, "%s: %s", cases[c].schema, last_err.msg);
        long long lo = cases[c].lo, hi = cases[c].hi;
        for (long long v = lo - 1200; v <= hi + 1200; v++) {
            if (v < -100000 || v > 100000) continue;
            char t[32];
            snprintf(t, sizeof t, "%lld", v);
            bool in = v >= lo && v <= hi;
            if (accepts(g, t) != in) {
                rlx_grammar_free(g);
                FAIL_("%s: %lld %s", cases[c].schema, v, in ? "refused" : "accepted");
            }
        }
        rlx_grammar_free(g);
    }
    rlx_grammar *g = schema("{\"type\":\"integer\",\"minimum\":12}");
    ASSERT(g);
    YES(g, "9999999999999999"); NO(g, "11"); NO(g, "-5");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "minimum");
    REFUSED("{\"type\":\"integer\",\"minimum\":1e300}", "minimum");
    REFUSED("{\"type\":\"number\",\"minimum\":0.5}", "minimum");
}

/* Numbers between integer bounds (inclusive, exclusive, draft-4 booleans, one side open): for
 * every combination over [-3, 3], each candidate text is accepted exactly when its value lies
 * within the bounds (texts outside the grammar's form - "-0", exponents - never are). */
TEST(number_ranges)
{
    static const char *const texts[] = {
        "-5", "-4.5", "-3.25", "-3", "-3.0", "-2.5", "-2", "-1.75", "-1", "-0.5", "-0.25", "0", "0.0", "0.5", "0.25",
        "1", "1.5", "1.0", "2", "2.25", "2.5", "3", "3.0", "3.5", "4", "5.25", "100", "-100.5",
    };
    static const char *const never[] = {"-0", "-0.0", "1e2", "0.5e1", "1.", ".5", "01", "1.1234567"};
    char json[200];
    int checked = 0;
    for (int lo = -4; lo <= 3; lo++)          /* -4: no lower bound */
        for (int hi = -3; hi <= 4; hi++)      /* 4: no upper bound */
            for (int ex = 0; ex < 4; ex++) {
                bool has_lo = lo > -4, has_hi = hi < 4, lo_ex = ex & 1, hi_ex = ex & 2;
                if (has_lo && has_hi && (lo > hi || (lo == hi && (lo_ex || hi_ex)))) continue;
                int n = snprintf(json, sizeof json, "{\"type\":\"number\"");
                if (has_lo) n += snprintf(json + n, sizeof json - (size_t)n, ",\"%s\":%d", lo_ex ? "exclusiveMinimum" : "minimum", lo);
                if (has_hi) n += snprintf(json + n, sizeof json - (size_t)n, ",\"%s\":%d", hi_ex ? "exclusiveMaximum" : "maximum", hi);
                snprintf(json + n, sizeof json - (size_t)n, "}");
                rlx_grammar *g = schema(json);
                ASSERT_MSG(g, "%s: %s", json, last_err.msg);
                for (size_t t = 0; t < RLX_ARRAY_LEN(texts); t++) {
                    double v = strtod(texts[t], NULL);
                    bool in = (!has_lo || (lo_ex ? v > lo : v >= lo)) && (!has_hi || (hi_ex ? v < hi : v <= hi));
                    ASSERT_MSG(accepts(g, texts[t]) == in, "%s: '%s' should be %s", json, texts[t], in ? "accepted" : "refused");
                    checked++;
                }
                for (size_t t = 0; (has_lo || has_hi) && t < RLX_ARRAY_LEN(never); t++) NO(g, never[t]); /* bounded form only */
                rlx_grammar_free(g);
            }
    ASSERT(checked > 3000);
    /* draft 4: exclusiveMinimum true makes minimum exclusive; the tighter of two bounds wins */
    rlx_grammar *g = schema("{\"type\":\"number\",\"minimum\":0,\"exclusiveMinimum\":true,\"maximum\":1}");
    ASSERT_MSG(g, "%s", last_err.msg);
    NO(g, "0"); YES(g, "0.00001"); YES(g, "1"); NO(g, "1.00001"); YES(g, "0.99999");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"number\",\"minimum\":2,\"exclusiveMinimum\":2,\"maximum\":1000000000}");
    ASSERT_MSG(g, "%s", last_err.msg);
    NO(g, "2"); YES(g, "2.5"); YES(g, "999999999.99999"); YES(g, "1000000000"); NO(g, "1000000000.1");
    rlx_grammar_free(g);
    g = schema("{\"type\":[\"number\",\"null\"],\"exclusiveMaximum\":0}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "null"); YES(g, "-0.5"); YES(g, "-123456"); NO(g, "0"); NO(g, "0.5");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"number\",\"minimum\":3,\"exclusiveMaximum\":3}", "no number");
    REFUSED("{\"type\":\"number\",\"maximum\":2000000000}", "maximum");
    REFUSED("{\"type\":\"number\",\"exclusiveMinimum\":0.1}", "exclusiveMinimum");
}

TEST(objects)
{
    rlx_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},"
                            "\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}");
    ASSERT(g);
    YES(g, "{\"b\":\"x\"}"); YES(g, "{\"a\":1,\"b\":\"x\"}"); YES(g, "{\"a\": 1, \"b\": \"x\", \"c\": true}");
    YES(g, "{\"b\":\"x\",\"c\":false}"); YES(g, "{\n  \"b\": \"x\"\n}");
    NO(g, "{}"); NO(g, "{\"a\":1}"); NO(g, "{\"b\":\"x\",\"a\":1}"); NO(g, "{\"b\":\"x\",\"d\":1}");
    NO(g, "{\"b\":\"x\",}"); NO(g, "{\"b\":\"x\"} ");
    rlx_grammar_free(g);
    g = schema("{\"properties\":{\"x\":{\"type\":\"null\"},\"y\":{\"type\":\"null\"}}}"); /* all optional */
    ASSERT(g);
    YES(g, "{}"); YES(g, "{\"y\":null}"); YES(g, "{\"x\":null,\"y\":null}"); NO(g, "{,\"y\":null}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],"
               "\"additionalProperties\":{\"type\":\"string\"}}");
    ASSERT(g);
    YES(g, "{\"id\":1}"); YES(g, "{\"id\":1,\"name\":\"a\",\"i\":\"b\",\"idx\":\"c\"}");
    NO(g, "{\"id\":1,\"id\":\"a\"}"); NO(g, "{\"id\":1,\"n\":2}"); NO(g, "{\"id\":1,\"i\\u0064\":\"a\"}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"additionalProperties\":false}");
    ASSERT(g);
    YES(g, "{}"); YES(g, "{ }"); NO(g, "{\"a\":1}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"caf\xc3\xa9\":{\"const\":1},\"\xe4\xb8\xad\":{\"const\":2}},"
               "\"additionalProperties\":true}");
    ASSERT(g);
    YES(g, "{\"caf\xc3\xa9\":1,\"\xe4\xb8\xad\":2,\"caf\xc3\xa8\":[]}"); NO(g, "{\"caf\xc3\xa9\":1,\"\xe4\xb8\xad\":3}");
    NO(g, "{\"\xe4\xb8\xad\":2,\"\xe4\xb8\xad\":2}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"required\":[\"k\"]}"); /* undeclared but required */
    ASSERT(g);
    YES(g, "{\"k\":[1]}"); NO(g, "{}");
    rlx_grammar_free(g);
    g = schema("{\"type\":[\"object\",\"string\"],\"maxLength\":2,\"properties\":{\"a\":{\"const\":1}},"
               "\"additionalProperties\":false}"); /* each type takes its own keywords */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"a\":1}"); YES(g, "\"ab\""); NO(g, "\"abc\""); NO(g, "{\"b\":1}");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"object\",\"minProperties\":3}", "minProperties"); /* more than the shape decides */
    /* patternProperties: one pattern, keys unlike the declared names, no other extras */
    g = schema("{\"type\":\"object\",\"patternProperties\":{}}"); /* says nothing */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"a\":1}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],"
               "\"patternProperties\":{\"^x-[a-z]{1,5}$\":{\"type\":\"boolean\"}},\"additionalProperties\":false}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"id\":1}"); YES(g, "{\"id\":1,\"x-a\":true,\"x-abc\":false}");
    NO(g, "{\"id\":1,\"x-a\":1}"); NO(g, "{\"id\":1,\"y-a\":true}"); NO(g, "{\"id\":1,\"x-abcdef\":true}");
    NO(g, "{\"x-a\":true}"); NO(g, "{\"id\":1,\"x-A\":true}");
    rlx_grammar_free(g);
    g = schema("{\"patternProperties\":{\"^[0-9]+$\":{\"type\":\"string\",\"maxLength\":2}}}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{}"); YES(g, "{\"1\":\"ab\",\"22\":\"\"}"); NO(g, "{\"a\":\"x\"}"); NO(g, "{\"1\":\"abc\"}");
    rlx_grammar_free(g);
    REFUSED("{\"properties\":{\"x-a\":{\"type\":\"null\"}},\"patternProperties\":{\"^x-\":{\"type\":\"null\"}}}", "also matches");
    REFUSED("{\"patternProperties\":{\"^a\":{},\"^b\":{}}}", "more than one pattern");
    REFUSED("{\"patternProperties\":{\"^a\":{}},\"additionalProperties\":{\"type\":\"null\"}}", "additionalProperties");
    REFUSED("{\"allOf\":[{\"properties\":{\"a\":{}}},{\"patternProperties\":{\"^b$\":{}}}]}", "patternProperties");
    REFUSED("{\"patternProperties\":{\"^(?=a)\":{}}}", "patternProperties");
    REFUSED("{\"type\":\"object\",\"required\":[\"k\"],\"additionalProperties\":false}", "'k'");
}

TEST(all_of)
{
    rlx_grammar *g = schema("{\"$defs\":{\"named\":{\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4}},"
                            "\"required\":[\"name\"]}},\"allOf\":[{\"$ref\":\"#/$defs/named\"},"
                            "{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"integer\",\"minimum\":0}},"
                            "\"required\":[\"age\"]}]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"name\":\"bo\",\"age\":3}"); NO(g, "{\"name\":\"bo\"}"); NO(g, "{\"name\":\"bo\",\"age\":-1}");
    rlx_grammar_free(g);
    REFUSED("{\"allOf\":[{\"type\":\"string\"},{\"type\":\"string\",\"maxLength\":2}]}", "allOf");
    REFUSED("{\"allOf\":[{\"properties\":{\"a\":{}}},{\"enum\":[{\"a\":1}]}]}", "enum");
    REFUSED("{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false},{\"properties\":{\"b\":{}}}]}", "'b'");
    /* the outer schema's own additionalProperties is named as such, not as a member's */
    REFUSED("{\"allOf\":[{\"properties\":{\"a\":{}},\"required\":[\"a\"]}],\"properties\":{},\"additionalProperties\":false}",
            "beside 'allOf' excludes property 'a'");
}

TEST(arrays)
{
    rlx_grammar *g = schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}");
    ASSERT(g);
    YES(g, "[1,2]"); YES(g, "[ 1, 2, 3 ]"); NO(g, "[1]"); NO(g, "[1,2,3,4]"); NO(g, "[1,\"a\"]"); NO(g, "[1,2,]");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"array\",\"items\":{\"type\":\"string\"}}");
    ASSERT(g);
    YES(g, "[]"); YES(g, "[\"a\"]"); YES(g, "[\"a\",\"b\",\"c\"]"); NO(g, "[,]");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}");
    ASSERT(g);
    YES(g, "[1,\"a\"]"); NO(g, "[1]"); NO(g, "[1,\"a\",2]"); NO(g, "[\"a\",1]");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"array\",\"prefixItems\":[{\"const\":\"x\"}],\"items\":{\"type\":\"boolean\"},\"maxItems\":3}");
    ASSERT(g);
    YES(g, "[\"x\"]"); YES(g, "[\"x\",true,false]"); NO(g, "[\"x\",true,false,true]"); NO(g, "[true]");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"array\",\"maxItems\":0}");
    ASSERT(g);
    YES(g, "[]"); NO(g, "[1]");
    rlx_grammar_free(g);
    /* draft-07's tuple: items as an array, additionalItems for what follows */
    g = schema("{\"type\":\"array\",\"items\":[{\"type\":\"integer\"},{\"type\":\"string\"}],"
               "\"additionalItems\":{\"type\":\"null\"},\"maxItems\":3}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "[1,\"a\"]"); YES(g, "[1,\"a\",null]"); NO(g, "[1,\"a\",2]"); NO(g, "[1,\"a\",null,null]"); NO(g, "[\"a\"]");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"array\",\"items\":[{\"type\":\"integer\"}],\"additionalItems\":false}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "[1]"); NO(g, "[1,2]");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"additionalItems\":false}"); /* applies to nothing */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "[1,2,3]");
    rlx_grammar_free(g);
    /* uniqueItems: false is the default; true where at most one item can be written */
    g = schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"uniqueItems\":false}");
    ASSERT(g);
    YES(g, "[1,1]");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"array\",\"uniqueItems\":true,\"maxItems\":1}");
    ASSERT(g);
    YES(g, "[]"); YES(g, "[{}]"); NO(g, "[1,1]");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"array\",\"maxItems\":100000}", "maxItems");
    REFUSED("{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems");
    REFUSED("{\"type\":\"array\",\"uniqueItems\":\"yes\"}", "uniqueItems");
    REFUSED("{\"type\":\"array\",\"items\":false,\"minItems\":1}", "minItems");
    REFUSED("{\"type\":\"array\",\"items\":[{}],\"additionalItems\":false,\"minItems\":2}", "additionalItems");
    REFUSED("{\"type\":\"array\",\"prefixItems\":[{}],\"additionalItems\":false}", "additionalItems");
}

/* minProperties / maxProperties where the object's shape decides them */
TEST(property_counts)
{
    rlx_grammar *g = schema("{\"type\":\"object\",\"minProperties\":1}"); /* a non-empty object */
    ASSERT(g);
    YES(g, "{\"a\":1}"); YES(g, "{\"a\":1,\"b\":[]}"); NO(g, "{}"); NO(g, "{ }");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"null\"}},"
               "\"minProperties\":1,\"maxProperties\":2,\"additionalProperties\":false}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"a\":null}"); YES(g, "{\"b\":null}"); YES(g, "{\"a\":null,\"b\":null}"); NO(g, "{}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"a\"],\"minProperties\":1,"
               "\"additionalProperties\":{\"type\":\"integer\"}}"); /* met by the required property */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"a\":1,\"x\":2}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"maxProperties\":0}");
    ASSERT(g);
    YES(g, "{}"); NO(g, "{\"a\":1}");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"object\",\"minProperties\":2}", "minProperties");
    REFUSED("{\"type\":\"object\",\"maxProperties\":3}", "maxProperties");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"a\",\"b\"],\"maxProperties\":1}",
            "maxProperties");
    REFUSED("{\"type\":\"object\",\"additionalProperties\":false,\"minProperties\":1}", "minProperties");
    REFUSED("{\"type\":\"object\",\"minProperties\":-1}", "minProperties");
}

TEST(enum_const)
{
    rlx_grammar *g = schema("{\"enum\":[\"red\",1.5,null,true,{\"a\":[1,2]},[\"x\"],\"caf\xc3\xa9\",\"q\\\"uote\"]}");
    ASSERT(g);
    YES(g, "\"red\""); YES(g, "1.5"); YES(g, "null"); YES(g, "true"); YES(g, "{\"a\":[1,2]}"); YES(g, "[\"x\"]");
    YES(g, "\"caf\xc3\xa9\""); YES(g, "\"q\\\"uote\""); NO(g, "\"blue\""); NO(g, "false"); NO(g, "{\"a\":[1]}");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"string\",\"enum\":[\"a\",1,\"b\"]}"); /* only the strings */
    ASSERT(g);
    YES(g, "\"a\""); YES(g, "\"b\""); NO(g, "1");
    rlx_grammar_free(g);
    g = schema("{\"const\":{\"k\":\"v\"}}");
    ASSERT(g);
    YES(g, "{\"k\":\"v\"}"); NO(g, "{\"k\":\"w\"}");
    rlx_grammar_free(g);
    /* 1000 values */
    char *big = malloc(20000);
    ASSERT(big);
    size_t n = (size_t)sprintf(big, "{\"enum\":[");
    for (int i = 0; i < 1000; i++) n += (size_t)sprintf(big + n, "%s\"v%d\"", i ? "," : "", i * 7);
    sprintf(big + n, "]}");
    g = schema(big);
    free(big);
    ASSERT(g);
    YES(g, "\"v0\""); YES(g, "\"v6993\""); YES(g, "\"v3500\""); NO(g, "\"v1\""); NO(g, "\"v6994\"");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"integer\",\"enum\":[\"a\"]}", "enum");
    REFUSED("{\"enum\":[\"a\"],\"maxLength\":3}", "maxLength");
}

TEST(any_one_of)
{
    rlx_grammar *g = schema("{\"anyOf\":[{\"type\":\"integer\",\"maximum\":3},{\"type\":\"string\",\"maxLength\":1},"
                            "{\"type\":\"integer\",\"minimum\":100}]}");
    ASSERT(g);
    YES(g, "2"); YES(g, "\"a\""); YES(g, "150"); NO(g, "50"); NO(g, "\"ab\"");
    rlx_grammar_free(g);
    g = schema("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},"
               "\"required\":[\"kind\",\"x\"]},{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"b\"}},"
               "\"required\":[\"kind\"]},{\"type\":\"null\"}]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"kind\":\"a\",\"x\":1}"); YES(g, "{\"kind\":\"b\"}"); YES(g, "null"); NO(g, "{\"kind\":\"c\"}");
    rlx_grammar_free(g);
    /* Pydantic's tagged union: branches behind $ref, told apart by a const, and OpenAPI's
     * discriminator beside them (an annotation) */
    g = schema("{\"oneOf\":[{\"$ref\":\"#/$defs/Cat\"},{\"$ref\":\"#/$defs/Dog\"}],\"discriminator\":{\"propertyName\":"
               "\"t\",\"mapping\":{\"cat\":\"#/$defs/Cat\",\"dog\":\"#/$defs/Dog\"}},\"$defs\":{\"Cat\":{\"type\":"
               "\"object\",\"properties\":{\"t\":{\"const\":\"cat\"},\"m\":{\"type\":\"integer\"}},\"required\":[\"t\","
               "\"m\"]},\"Dog\":{\"type\":\"object\",\"properties\":{\"t\":{\"const\":\"dog\"}},\"required\":[\"t\"]}}}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"t\":\"cat\",\"m\":3}"); YES(g, "{\"t\":\"dog\"}"); NO(g, "{\"t\":\"cat\"}"); NO(g, "{\"t\":\"cow\"}");
    rlx_grammar_free(g);
    REFUSED("{\"oneOf\":[{\"$ref\":\"#/$defs/a\"},{\"$ref\":\"#/$defs/a\"}],\"$defs\":{\"a\":{\"type\":\"object\"}}}", "oneOf");
    REFUSED("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "oneOf");
    REFUSED("{\"type\":\"object\",\"anyOf\":[{\"required\":[\"a\"]}]}", "type");
}

TEST(refs)
{
    /* a recursive tree */
    rlx_grammar *g = schema("{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
                            "\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},"
                            "\"maxItems\":3}},\"required\":[\"v\"],\"additionalProperties\":false}}}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"v\":1}"); YES(g, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4,\"kids\":[]}]}]}");
    NO(g, "{\"v\":1,\"kids\":[{}]}"); NO(g, "{\"v\":1,\"kids\":[{\"v\":1},{\"v\":1},{\"v\":1},{\"v\":1}]}");
    rlx_grammar_free(g);
    g = schema("{\"definitions\":{\"a~b\":{\"type\":\"boolean\"}},\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/a~0b\"}}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "[true,false]"); NO(g, "[1]");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"}}}"); /* the root itself */
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "{\"next\":{\"next\":{}}}"); NO(g, "{\"next\":1}");
    rlx_grammar_free(g);
    REFUSED("{\"$ref\":\"https://example.com/s.json\"}", "not local");
    REFUSED("{\"$ref\":\"#/$defs/missing\"}", "points at nothing");
    REFUSED("{\"$ref\":\"#/$defs/a\",\"type\":\"string\",\"$defs\":{\"a\":{}}}", "type");
}

TEST(unknown_keywords_and_annotations)
{
    rlx_grammar *g = schema("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"x\",\"title\":\"t\","
                            "\"description\":\"d\",\"default\":1,\"examples\":[1],\"$comment\":\"c\",\"deprecated\":false,"
                            "\"readOnly\":true,\"writeOnly\":false,\"type\":\"integer\"}");
    ASSERT(g);
    YES(g, "5");
    rlx_grammar_free(g);
    /* OpenAPI's: x- extensions and example are annotations; nullable adds null to the type */
    g = schema("{\"type\":\"string\",\"nullable\":true,\"maxLength\":2,\"x-vendor\":{\"a\":1},\"example\":\"ab\","
               "\"contentMediaType\":\"text/plain\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "null"); YES(g, "\"ab\""); NO(g, "\"abc\""); NO(g, "1");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"integer\",\"nullable\":false}");
    ASSERT(g);
    YES(g, "1"); NO(g, "null");
    rlx_grammar_free(g);
    g = schema("{\"type\":\"object\",\"nullable\":true,\"properties\":{\"a\":{\"type\":\"null\"}},\"required\":[\"a\"]}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "null"); YES(g, "{\"a\":null}"); NO(g, "{}");
    rlx_grammar_free(g);
    REFUSED("{\"nullable\":true}", "nullable");
    REFUSED("{\"type\":\"string\",\"nullable\":1}", "nullable");
    REFUSED("{\"$ref\":\"#/$defs/a\",\"nullable\":true,\"$defs\":{\"a\":{}}}", "nullable");
    /* contentEncoding base64: the format byte's strings */
    g = schema("{\"type\":\"string\",\"contentEncoding\":\"base64\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"aGk=\""); NO(g, "\"a\"");
    rlx_grammar_free(g);
    REFUSED("{\"type\":\"string\",\"contentEncoding\":\"quoted-printable\"}", "contentEncoding");
    REFUSED("{\"type\":\"string\",\"contentEncoding\":\"base64\",\"maxLength\":8}", "contentEncoding");
    /* an allOf of one member with annotations beside it is that member (Pydantic's wrapper of a $ref) */
    g = schema("{\"$defs\":{\"C\":{\"enum\":[\"red\",\"green\"]}},\"allOf\":[{\"$ref\":\"#/$defs/C\"}],\"description\":\"c\"}");
    ASSERT_MSG(g, "%s", last_err.msg);
    YES(g, "\"red\""); NO(g, "\"blue\"");
    rlx_grammar_free(g);
    REFUSED("{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", "allOf");
    REFUSED("{\"type\":\"integer\",\"multipleOf\":3}", "multipleOf");
    REFUSED("{\"not\":{}}", "'not'");
    REFUSED("{\"if\":{},\"then\":{}}", "keyword");
    /* the message says where */
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"foo\":1}}}", "/properties/a");
}

/* schema nested `depth` levels of arrays (items) around an integer, built without the parser */
static cJSON *nested_items(int depth)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "integer");
    for (int i = 0; i < depth; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "array");
        cJSON_AddItemToObject(o, "items", s);
        s = o;
    }
    return s;
}

TEST(depth)
{
    /* 32 levels of objects: fine */
    char buf[4096];
    size_t n = 0;
    for (int i = 0; i < 32; i++) n += (size_t)sprintf(buf + n, "{\"type\":\"object\",\"properties\":{\"k\":");
    n += (size_t)sprintf(buf + n, "{\"type\":\"integer\"}");
    for (int i = 0; i < 32; i++) n += (size_t)sprintf(buf + n, "},\"required\":[\"k\"]}");
    rlx_grammar *g = schema(buf);
    ASSERT_MSG(g, "%s", last_err.msg);
    n = 0;
    for (int i = 0; i < 32; i++) n += (size_t)sprintf(buf + n, "{\"k\":");
    n += (size_t)sprintf(buf + n, "7");
    for (int i = 0; i < 32; i++) buf[n++] = '}';
    buf[n] = 0;
    YES(g, buf);
    buf[n - 1] = 0;
    NO(g, buf);
    rlx_grammar_free(g);
    /* 10000 levels: a clean error */
    cJSON *deep = nested_items(10000);
    rlx_error e = {0};
    char *out = rlx_json_schema_to_gbnf(deep, &e);
    cJSON_Delete(deep);
    ASSERT(!out);
    ASSERT_EQ(e.code, RLX_ERANGE);
    ASSERT(strstr(e.msg, "deeper"));
    /* recursion through $ref that is left-recursive does not hang: the grammar refuses it */
    g = schema("{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}");
    ASSERT(!g);
}

TEST(limits)
{
    /* many distinct properties: over the rule budget, a clean error */
    size_t cap = 400000, n = 0;
    char *buf = malloc(cap);
    ASSERT(buf);
    n += (size_t)sprintf(buf + n, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 3000; i++) n += (size_t)sprintf(buf + n, "%s\"p%d\":{\"type\":\"string\",\"maxLength\":%d}", i ? "," : "", i, i % 900 + 1);
    sprintf(buf + n, "}}");
    cJSON *s = cJSON_Parse(buf);
    free(buf);
    ASSERT(s);
    rlx_error e = {0};
    char *out = rlx_json_schema_to_gbnf(s, &e);
    cJSON_Delete(s);
    ASSERT(!out);
    ASSERT_EQ(e.code, RLX_ERANGE);
}

int main(void)
{
    static const rlx_test_case tests[] = {
        TEST_ENTRY(types), TEST_ENTRY(strings_unicode), TEST_ENTRY(formats), TEST_ENTRY(pattern),
        TEST_ENTRY(number_formats), TEST_ENTRY(multiple_of), TEST_ENTRY(integer_ranges), TEST_ENTRY(number_ranges), TEST_ENTRY(objects),
        TEST_ENTRY(property_counts), TEST_ENTRY(all_of), TEST_ENTRY(arrays),
        TEST_ENTRY(enum_const), TEST_ENTRY(any_one_of), TEST_ENTRY(refs), TEST_ENTRY(unknown_keywords_and_annotations),
        TEST_ENTRY(depth), TEST_ENTRY(limits),
    };
    return rlx_test_run(tests, RLX_ARRAY_LEN(tests));
}
