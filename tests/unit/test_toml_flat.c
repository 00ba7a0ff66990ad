/* test_toml_flat.c - the flat TOML reader (server/toml_flat.h): every value form it takes,
 * decoded as TOML 1.0 says, and every form it refuses, by name and line. */
#include "tests/rlx_test.h"
#include "server/toml_flat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct seen {
    char text[4096];
    size_t n;
} seen;

/* every key as "table|key|kind|value;" */
static int collect(void *user, const char *table, const char *key, rlx_toml_kind kind, const char *value,
                   const char *src, rlx_error *err)
{
    (void)src;
    (void)err;
    seen *s = user;
    s->n += (size_t)snprintf(s->text + s->n, sizeof s->text - s->n, "%s|%s|%d|%s;", table, key, (int)kind, value);
    return 0;
}

static int read_text(const char *text, seen *s, rlx_error *err)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    memset(s, 0, sizeof *s);
    *err = (rlx_error){0};
    int rc = rlx_toml_flat_read(f, "p.rlx.toml", collect, s, err);
    fclose(f);
    return rc;
}

TEST(values_as_toml_decodes_them)
{
    seen s;
    rlx_error err;
    const char *text = "\xef\xbb\xbf# a profile\r\n"
                       "ctx = 1_024   # trailing comment\r\n"
                       "hex = 0xff\n"
                       "oct = 0o17\n"
                       "bin = 0b101\n"
                       "neg = -3\n"
                       "\n"
                       "  [profile]  \n"
                       "temperature = 0.7\n"
                       "\"top-p\" = +1e-1\n"
                       "'min_p' = 5E+2\n"
                       "big = 6.626_070e-34\n"
                       "inf1 = -inf\n"
                       "yes = true\n"
                       "no=false\n"
                       "s1 = \"a \\\"quoted\\\" \\\\ path\\t#not a comment\"\n"
                       "s2 = 'C:\\dir\\file # literal'\n"
                       "s3 = \"caf\\u00e9 \\U0001F600 \xe4\xb8\xad\"\n"
                       "s4 = \"\"\n"
                       "[\"other table\"]\n"
                       "ctx = 5\n";
    ASSERT_MSG(read_text(text, &s, &err) == 0, "%s", err.msg);
    ASSERT_STR_EQ(s.text, "|ctx|1|1024;|hex|1|255;|oct|1|15;|bin|1|5;|neg|1|-3;"
                          "profile|temperature|2|0.7;profile|top-p|2|+1e-1;profile|min_p|2|5e+2;"
                          "profile|big|2|6.626070e-34;profile|inf1|2|-inf;profile|yes|3|true;profile|no|3|false;"
                          "profile|s1|0|a \"quoted\" \\ path\t#not a comment;profile|s2|0|C:\\dir\\file # literal;"
                          "profile|s3|0|caf\xc3\xa9 \xf0\x9f\x98\x80 \xe4\xb8\xad;profile|s4|0|;"
                          "other table|ctx|1|5;");
}

TEST(refused_forms_name_the_line)
{
    struct { const char *text, *needle; } bad[] = {
        {"ctx = [1, 2]\n", ":1: arrays are not supported"},
        {"x = 1\nctx = {a = 1}\n", ":2: inline tables are not supported"},
        {"s = \"\"\"multi\nline\"\"\"\n", ":1: multi-line strings are not supported"},
        {"a.b = 1\n", ":1: dotted keys"},
        {"[a.b]\n", ":1: dotted keys"},
        {"[[runs]]\n", ":1: arrays of tables"},
        {"d = 1979-05-27\n", ":1: dates and times"},
        {"t = 07:32:00\n", ":1: dates and times"},
        {"ctx = 1\nctx = 2\n", ":2: the key 'ctx' is given twice"},
        {"[profile]\nx = 1\n[profile]\n", ":3: table [profile] opened twice"},
        {"s = \"open\n", ":1: unterminated string"},
        {"s = \"bad \\q\"\n", ":1: unknown escape '\\q'"},
        {"s = \"\\u00\"\n", ":1: \\u needs 4 hex digits"},
        {"s = \"\\uD800\"\n", ":1: \\uD800 is not a character"},
        {"s = \"\\u0000\"\n", ":1: \\u0000 is not a character"},
        {"s = \"\xff\xfe\"\n", ":1: a string that is not UTF-8"},
        {"s = \"a\x01\"\n", ":1: control character 0x01"},
        {"x = 1 2\n", ":1: unexpected '2'"},
        {"x = 01\n", ":1: leading zeros"},
        {"x = 1__0\n", ":1: expected a value"},
        {"x = 1_\n", ":1: expected a value"},
        {"x = 1.\n", ":1: expected a value"},
        {"x = .5\n", ":1: expected a value"},
        {"x = fast\n", ":1: expected a value"},
        {"x = 0xffffffffffffffffff\n", ":1: integer '0xffffffffffffffffff' is out of range"},
        {"x =\n", ":1: the key 'x' has no value"},
        {"just words\n", ":1: expected '=' after the key 'just'"},
        {"= 3\n", ":1: expected a key"},
        {"[profile\n", ":1: expected ']'"},
        {"[profile] x = 1\n", ":1: unexpected 'x = 1' after a table header"},
    };
    for (size_t i = 0; i < RLX_ARRAY_LEN(bad); i++) {
        seen s;
        rlx_error err;
        ASSERT_MSG(read_text(bad[i].text, &s, &err) == RLX_EINVAL, "accepted %s", bad[i].text);
        ASSERT_MSG(strstr(err.msg, "p.rlx.toml") && strstr(err.msg, bad[i].needle), "%s -> %s (want %s)", bad[i].text,
                   err.msg, bad[i].needle);
    }
    /* a NUL byte inside a line */
    static const char nul[] = "x = 1\ny = \"a\0b\"\n";
    FILE *f = fmemopen((void *)nul, sizeof nul - 1, "r");
    seen s = {0};
    rlx_error err = {0};
    ASSERT_EQ(rlx_toml_flat_read(f, "p.rlx.toml", collect, &s, &err), RLX_EINVAL);
    fclose(f);
    ASSERT_MSG(strstr(err.msg, ":2: a NUL byte"), "%s", err.msg);
}

static int stop_at_b(void *user, const char *table, const char *key, rlx_toml_kind kind, const char *value,
                     const char *src, rlx_error *err)
{
    (void)table, (void)kind, (void)value;
    ++*(int *)user;
    if (!strcmp(key, "b")) return rlx_errorf(err, RLX_EINVAL, "%s: no b", src);
    return 0;
}

TEST(callback_errors_stop_the_read)
{
    const char *text = "a = 1\nb = 2\nc = 3\n";
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    int calls = 0;
    rlx_error err = {0};
    ASSERT_EQ(rlx_toml_flat_read(f, "q.toml", stop_at_b, &calls, &err), RLX_EINVAL);
    fclose(f);
    ASSERT_EQ(calls, 2);
    ASSERT_STR_EQ(err.msg, "q.toml:2: no b");
}

int main(void)
{
    static const rlx_test_case cases[] = {TEST_ENTRY(values_as_toml_decodes_them),
                                          TEST_ENTRY(refused_forms_name_the_line),
                                          TEST_ENTRY(callback_errors_stop_the_read)};
    return rlx_test_run(cases, RLX_ARRAY_LEN(cases));
}
