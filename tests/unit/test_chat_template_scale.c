/* test_chat_template_scale.c - the chat template interpreter at scale: a string built up in a
 * long loop, a context of 100,000 keys, and templates that scan every message once per message
 * over a long agent conversation (a loop's frame is reused, so the render's memory does not grow
 * with the loops' runs). */
#include "models/chat_template.h"
#include "tests/rlx_test.h"
#include "tests/unit/test_chat_template_util.h"

/* A prompt built up piece by piece in a namespace (Reka-Edge's ns.out): 20,000 appends of 10
 * bytes copied the whole string each time into the arena (~2 GB, past its 256 MiB: the render
 * failed, while Jinja2 renders it at once); growing in place is linear. Values that share a
 * buffer keep their own text. */
TEST(string_built_in_a_loop)
{
    int rc;
    rlx_error err = {0};
    char *out = render_src("{% set ns = namespace(s='') %}{% for i in range(20000) %}{% set ns.s = ns.s ~ 'xxxxxxxxx' ~ "
                           "(i % 10) %}{% endfor %}{{ ns.s|length }} {{ ns.s[:20] }} {{ ns.s[-10:] }}", "{}", NULL, &rc, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    if (!rc) ASSERT_STR_EQ(out, "200000 xxxxxxxxx0xxxxxxxxx1 xxxxxxxxx9");
    free(out);
    out = render_src("{% set a = 'ab' ~ 'cd' %}{% set b = a ~ 'X' %}{% set c = a ~ 'Y' %}{% set d = b ~ 'Z' %}"
                     "{% set e = b ~ 'W' %}{% set f = d + 'V' %}{{ a }}|{{ b }}|{{ c }}|{{ d }}|{{ e }}|{{ f }}|"
                     "{{ (a ~ '1')[1:] ~ '2' }}|{{ a[1:] ~ 'Q' }}|{{ a }}", "{}", NULL, &rc, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    if (!rc) ASSERT_STR_EQ(out, "abcd|abcdX|abcdY|abcdXZ|abcdXW|abcdXZV|bcd12|bcdQ|abcd");
    free(out);
}

/* A client controls the context: a huge object or array must load and sort in n log n,
 * not n^2 (this would take minutes with linear key lookups). */
TEST(large_context)
{
    cJSON *ctx = cJSON_CreateObject(), *big = cJSON_AddObjectToObject(ctx, "big"), *arr = cJSON_AddArrayToObject(ctx, "arr");
    char key[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        cJSON_AddNumberToObject(big, key, i);
        cJSON_AddItemToArray(arr, cJSON_CreateNumber((i * 7919) % 100003));
    }
    cJSON_AddNumberToObject(big, "k5", -5); /* a duplicate key: the last value wins, as in Python */
    const char *src = "{{ big|length }} {{ big['k99999'] }} {{ big.k5 }} {{ arr|sort|last }} {{ (big|dictsort|first)[0] }}"
                      " {{ 'k42' in big }} {{ big|tojson(sort_keys=true)|length > 0 }}";
    rlx_chat_template *t = NULL;
    rlx_error err = {0};
    char *out = NULL;
    ASSERT_EQ(rlx_chat_template_parse(&t, src, strlen(src), &err), 0);
    int rc = rlx_chat_template_render(t, ctx, NULL, &out, &err);
    rlx_chat_template_free(t);
    cJSON_Delete(ctx);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT_STR_EQ(out, "100000 99999 -5 100002 k0 True True");
    free(out);
}

/* Templates that scan every message once per message (Command R7B's tool-call ids, Command A,
 * DeepSeek V3.2) over a long agent conversation: a loop's item scope is reused, so the render's
 * memory does not grow with the iterations (1,100 rounds of call and result - 2,202 messages,
 * ~5M scope entries - needed more than the 256 MiB a render may take; jinja2 renders them). */
TEST(long_conversation_nested_loops)
{
    /* under valgrind (RLX_MEMCHECK) the same reuse paths over fewer messages */
    const bool small = getenv("RLX_MEMCHECK") != NULL;
    const int n_user = small ? 60 : 1200, rounds = small ? 30 : 1100;
    char want[32], last_id[64];
    snprintf(want, sizeof want, "%d", n_user * n_user);
    snprintf(last_id, sizeof last_id, "\"tool_call_id\": \"%d\"", rounds - 1);
    cJSON *ctx = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(ctx, "messages");
    for (int i = 0; i < n_user; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", "x");
        cJSON_AddItemToArray(msgs, m);
    }
    int rc;
    rlx_error err = {0};
    char *ctx_json = cJSON_PrintUnformatted(ctx);
    char *out = render_src("{% set ns = namespace(n=0) %}{% for a in messages %}{% for b in messages if b.role == a.role %}"
                           "{% set c = b.content %}{% if loop.last %}{% set ns.n = ns.n + loop.length %}{% endif %}"
                           "{% endfor %}{% endfor %}{{ ns.n }}", ctx_json, NULL, &rc, &err);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    if (!rc) ASSERT_STR_EQ(out, want);
    free(out);
    free(ctx_json);
    cJSON_Delete(ctx);

    /* the real template: 1,100 rounds of an assistant's call and its result */
    const char *path = rlx_test_shared("templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.json");
    if (!path) return;
    char *text = slurp(path);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    ASSERT(doc);
    const char *src = cJSON_GetObjectItem(doc, "template")->valuestring;
    ctx = cJSON_CreateObject();
    msgs = cJSON_AddArrayToObject(ctx, "messages");
    cJSON *u = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", "Weather, again and again?");
    cJSON_AddItemToArray(msgs, u);
    for (int i = 0; i < rounds; i++) {
        char id[32];
        snprintf(id, sizeof id, "call_%d", i);
        cJSON *a = cJSON_CreateObject(), *calls = NULL, *c = cJSON_CreateObject(), *fn = NULL, *t = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "role", "assistant");
        calls = cJSON_AddArrayToObject(a, "tool_calls");
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
        fn = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(fn, "name", "get_weather");
        cJSON_AddItemToObject(fn, "arguments", cJSON_Parse("{\"city\": \"Paris\"}"));
        cJSON_AddItemToArray(calls, c);
        cJSON_AddItemToArray(msgs, a);
        cJSON_AddStringToObject(t, "role", "tool");
        cJSON_AddStringToObject(t, "tool_call_id", id);
        cJSON_AddStringToObject(t, "content", "{\"c\": 21}");
        cJSON_AddItemToArray(msgs, t);
    }
    cJSON_AddTrueToObject(ctx, "add_generation_prompt");
    rlx_chat_template *tpl = NULL;
    ASSERT_EQ(rlx_chat_template_parse(&tpl, src, strlen(src), &err), 0);
    rc = rlx_chat_template_render(tpl, ctx, "2026-01-01T00:00:00", &out, &err);
    rlx_chat_template_free(tpl);
    cJSON_Delete(ctx);
    cJSON_Delete(doc);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT(out && strstr(out, "call_0") == NULL && strstr(out, last_id)); /* ids renumbered */
    free(out);
}

TEST_MAIN(TEST_ENTRY(long_conversation_nested_loops), TEST_ENTRY(string_built_in_a_loop), TEST_ENTRY(large_context))
