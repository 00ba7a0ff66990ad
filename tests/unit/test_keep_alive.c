/* test_keep_alive.c - Ollama's keep_alive values (proto/keep_alive.c): Go durations, numbers of
 * seconds, negative = forever, bad values refused with a message; the request field and
 * --keep-alive. */
#include "tests/rlx_test.h"
#include "proto/proto.h"
#include "server/config.h"

static double ka(const char *s)
{
    double v = 12345;
    rlx_error err = {0};
    if (rlx_keep_alive_parse(s, &v, &err)) return -999;
    return v;
}

TEST(durations)
{
    ASSERT_NEAR(ka("5m"), 300, 1e-9);
    ASSERT_NEAR(ka("30s"), 30, 1e-9);
    ASSERT_NEAR(ka("1h30m"), 5400, 1e-9);
    ASSERT_NEAR(ka("1.5h"), 5400, 1e-9);
    ASSERT_NEAR(ka("2h45m30.5s"), 9930.5, 1e-9);
    ASSERT_NEAR(ka("500ms"), 0.5, 1e-12);
    ASSERT_NEAR(ka("10us"), 1e-5, 1e-15);
    ASSERT_NEAR(ka("10\xc2\xb5s"), 1e-5, 1e-15); /* µs */
    ASSERT_NEAR(ka("100ns"), 1e-7, 1e-16);
    ASSERT_NEAR(ka("+2m"), 120, 1e-9);
    ASSERT_NEAR(ka(".5m"), 30, 1e-9);
    ASSERT_NEAR(ka("0"), 0, 0);
    ASSERT_NEAR(ka("0s"), 0, 0);
    /* negative durations and numbers: forever */
    ASSERT_NEAR(ka("-1m"), -1, 0);
    ASSERT_NEAR(ka("-5s"), -1, 0);
}

TEST(numbers_are_seconds)
{
    ASSERT_NEAR(ka("300"), 300, 0);
    ASSERT_NEAR(ka("0"), 0, 0);
    ASSERT_NEAR(ka("-1"), -1, 0);
    ASSERT_NEAR(ka("-42"), -1, 0);
    ASSERT_NEAR(ka("2.5"), 2.5, 0);
}

TEST(bad_values)
{
    const char *bad[] = {"", "m", "5", "5x", "5 m", "forever", "1h-5m", "--1m", "5mm", "s5", "nan", "inf", "1e999", " "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = 7;
        rlx_error err = {0};
        int rc = rlx_keep_alive_parse(bad[i], &v, &err);
        if (!strcmp(bad[i], "5")) { /* a bare number is seconds, not a bad duration */
            ASSERT_EQ(rc, 0);
            ASSERT_NEAR(v, 5, 0);
            continue;
        }
        ASSERT_MSG(rc == RLX_EINVAL, "'%s' accepted as %g", bad[i], v);
        ASSERT_MSG(strstr(err.msg, "keep_alive"), "'%s': message '%s' does not name keep_alive", bad[i], err.msg);
        ASSERT_NEAR(v, 7, 0); /* untouched */
    }
}

TEST(json_values)
{
    const struct { const char *json; int rc; double want; } t[] = {
        {"{\"k\":\"5m\"}", 0, 300}, {"{\"k\":0}", 0, 0}, {"{\"k\":-1}", 0, -1}, {"{\"k\":-0.5}", 0, -1},
        {"{\"k\":90}", 0, 90}, {"{\"k\":\"-1\"}", 0, -1}, {"{\"k\":true}", RLX_EINVAL, 0}, {"{\"k\":[1]}", RLX_EINVAL, 0},
        {"{\"k\":\"later\"}", RLX_EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        cJSON *o = cJSON_Parse(t[i].json);
        double v = 0;
        rlx_error err = {0};
        int rc = rlx_keep_alive_json(cJSON_GetObjectItem(o, "k"), &v, &err);
        cJSON_Delete(o);
        ASSERT_MSG(rc == t[i].rc, "%s: rc %d, want %d", t[i].json, rc, t[i].rc);
        if (!rc) ASSERT_NEAR(v, t[i].want, 0);
    }
}

/* The request field: absent, given, and a bad one is a 400 naming keep_alive. */
TEST(request_field)
{
    rlx_api_request r;
    rlx_api_error e;
    const char *b1 = "{\"prompt\":\"x\"}";
    ASSERT_EQ(rlx_api_parse(&r, RLX_API_COMPLETIONS, b1, strlen(b1), 0, &e), 0);
    ASSERT(!r.has_keep_alive);
    rlx_api_request_free(&r);
    const char *b2 = "{\"prompt\":\"x\",\"keep_alive\":\"10m\"}";
    ASSERT_EQ(rlx_api_parse(&r, RLX_API_COMPLETIONS, b2, strlen(b2), 0, &e), 0);
    ASSERT(r.has_keep_alive);
    ASSERT_NEAR(r.keep_alive_s, 600, 0);
    rlx_api_request_free(&r);
    const char *b3 = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"keep_alive\":0}";
    ASSERT_EQ(rlx_api_parse(&r, RLX_API_CHAT, b3, strlen(b3), 0, &e), 0);
    ASSERT(r.has_keep_alive);
    ASSERT_NEAR(r.keep_alive_s, 0, 0);
    rlx_api_request_free(&r);
    const char *b4 = "{\"prompt\":\"x\",\"keep_alive\":\"soon\"}";
    ASSERT(rlx_api_parse(&r, RLX_API_GENERATE, b4, strlen(b4), 0, &e) != 0);
    ASSERT_EQ(e.status, 400);
    ASSERT_STR_EQ(e.param, "keep_alive");
    rlx_api_request_free(&r);
}

/* --keep-alive takes the same values; the default keeps models forever. */
TEST(flag)
{
    unsetenv("RLXD_KEEP_ALIVE");
    unsetenv("RLXD_CONFIG");
    rlx_serve_config c;
    rlx_error err = {0};
    char *a0[] = {"serve", "-m", "a.gguf"};
    ASSERT_EQ(rlx_serve_config_load(&c, 3, a0, &err), 0);
    ASSERT_NEAR(c.keep_alive, -1, 0);
    rlx_serve_config_free(&c);
    char *a1[] = {"serve", "-m", "a.gguf", "--keep-alive", "1h30m"};
    ASSERT_EQ(rlx_serve_config_load(&c, 5, a1, &err), 0);
    ASSERT_NEAR(c.keep_alive, 5400, 0);
    rlx_serve_config_free(&c);
    char *a2[] = {"serve", "-m", "a.gguf", "--keep-alive=later"};
    ASSERT_EQ(rlx_serve_config_load(&c, 4, a2, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "--keep-alive") && strstr(err.msg, "later"), "message: %s", err.msg);
    rlx_serve_config_free(&c);
    /* --models-dir alone is something to serve; --max-loaded below the -m count is refused */
    char *a3[] = {"serve", "--models-dir", "/nowhere"};
    ASSERT_EQ(rlx_serve_config_load(&c, 3, a3, &err), 0);
    rlx_serve_config_free(&c);
    char *a4[] = {"serve", "-m", "a.gguf", "-m", "b.gguf", "--max-loaded", "1"};
    ASSERT_EQ(rlx_serve_config_load(&c, 7, a4, &err), RLX_EINVAL);
    ASSERT_MSG(strstr(err.msg, "--max-loaded 1"), "message: %s", err.msg);
    rlx_serve_config_free(&c);
}

TEST_MAIN(TEST_ENTRY(durations), TEST_ENTRY(numbers_are_seconds), TEST_ENTRY(bad_values), TEST_ENTRY(json_values),
          TEST_ENTRY(request_field), TEST_ENTRY(flag))
