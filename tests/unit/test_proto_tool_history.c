/* test_proto_tool_history.c - a tool-call history as OpenAI clients send it (assistant content
 * null, function.arguments a JSON string, role "tool" results) goes through the request parser
 * (proto/parse.c normalises it) and renders in every template of ../shared/templates exactly as
 * Python Jinja2 renders the transformers-shaped case (arguments objects, content ""). */
#include "models/chat_template.h"
#include "models/json.h"
#include "proto/proto.h"
#include "tests/rlx_test.h"
#include "server/cli.h"

#include <dirent.h>

/* the project's file reader (server/cli.h) */
static char *slurp(const char *path)
{
    size_t n;
    return rlx_read_file(path, &n);
}

static bool has_tool_calls(const cJSON *msgs)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) if (cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) return true;
    return false;
}

/* The messages as an OpenAI client sends them: arguments as JSON text, and when null_content the
 * content of assistant messages with calls null. */
static cJSON *openai_shape(const cJSON *msgs, bool null_content)
{
    cJSON *out = cJSON_Duplicate(msgs, true), *m;
    cJSON_ArrayForEach(m, out) {
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), *c;
        if (!calls) continue;
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (null_content && cJSON_IsString(content) && !content->valuestring[0])
            cJSON_ReplaceItemInObjectCaseSensitive(m, "content", cJSON_CreateNull());
        cJSON_ArrayForEach(c, calls) {
            cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
            cJSON *args = fn ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
            if (!cJSON_IsObject(args)) continue;
            char *s = cJSON_PrintUnformatted(args);
            cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", cJSON_CreateString(s));
            free(s);
        }
    }
    return out;
}

/* Renders the case's context with its messages replaced by what the parser made of the OpenAI
 * shape; returns 0 when equal to the expected rendering. */
static int run_case(const char *name, const rlx_chat_template *t, const cJSON *ctx, const char *now,
                    const char *want, bool null_content)
{
    cJSON *body = cJSON_CreateObject();
    cJSON_AddItemToObject(body, "messages", openai_shape(cJSON_GetObjectItem(ctx, "messages"), null_content));
    const cJSON *tools = cJSON_GetObjectItem(ctx, "tools");
    if (tools) cJSON_AddItemToObject(body, "tools", cJSON_Duplicate(tools, true));
    char *text = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    rlx_api_request r;
    rlx_api_error e;
    int rc = rlx_api_parse(&r, RLX_API_CHAT, text, strlen(text), 0, &e);
    free(text);
    if (rc) {
        fprintf(stderr, "  %s: parse failed: %s\n", name, e.message);
        return 1;
    }
    cJSON *c = cJSON_Duplicate(ctx, true);
    cJSON_ReplaceItemInObjectCaseSensitive(c, "messages", cJSON_Duplicate(r.messages, true));
    rlx_api_request_free(&r);
    char *out = NULL;
    rlx_error err = {0};
    rc = rlx_chat_template_render(t, c, now, &out, &err);
    cJSON_Delete(c);
    int bad = rc || strcmp(out, want);
    if (rc) fprintf(stderr, "  %s (null content %d): render failed: %s\n", name, null_content, err.msg);
    else if (bad) {
        size_t i = 0;
        while (out[i] && out[i] == want[i]) i++;
        size_t from = i > 60 ? i - 60 : 0;
        fprintf(stderr, "  %s (null content %d): differs at %zu\n    got:  \"%.160s\"\n    want: \"%.160s\"\n",
                name, null_content, i, out + from, want + from);
    }
    free(out);
    return bad;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

TEST(tool_history_every_template)
{
    const char *readme = rlx_test_shared("templates/README.md");
    if (!readme) SKIP("../shared/templates is absent (set RLX_SHARED)");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", readme);
    *strrchr(dir, '/') = 0;
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    char *names[512];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 512) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".json")) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_str);
    int cases = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *text = slurp(path);
        cJSON *doc = NULL;
        rlx_error err = {0};
        ASSERT(text && rlx_json_parse(text, strlen(text), &doc, &err) == 0);
        free(text);
        const cJSON *src = cJSON_GetObjectItem(doc, "template"), *now = cJSON_GetObjectItem(doc, "now");
        rlx_chat_template *t = NULL;
        ASSERT_MSG(rlx_chat_template_parse(&t, src->valuestring, strlen(src->valuestring), &err) == 0, "%s", err.msg);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
            const cJSON *ctx = cJSON_GetObjectItem(c, "context"), *want = cJSON_GetObjectItem(c, "expected");
            if (!cJSON_IsString(want) || !has_tool_calls(cJSON_GetObjectItem(ctx, "messages"))) continue;
            for (int null_content = 0; null_content < 2; null_content++) {
                cases++;
                failed += run_case(names[i], t, ctx, cJSON_IsString(now) ? now->valuestring : NULL,
                                   want->valuestring, null_content);
            }
        }
        rlx_chat_template_free(t);
        cJSON_Delete(doc);
        free(names[i]);
    }
    fprintf(stderr, "  tool-call histories: %d rendered, %d differ\n", cases, failed);
    ASSERT(cases >= 2);
    ASSERT_EQ(failed, 0);
}

/* Bad shapes get a 400 naming messages; a non-object argument string is kept as sent. */
TEST(tool_calls_shapes)
{
    rlx_api_request r;
    rlx_api_error e;
    const char *bad = "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":{}}]}";
    ASSERT(rlx_api_parse(&r, RLX_API_CHAT, bad, strlen(bad), 0, &e) < 0);
    ASSERT_STR_EQ(e.param, "messages");
    rlx_api_request_free(&r);
    bad = "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[1]}]}";
    ASSERT(rlx_api_parse(&r, RLX_API_CHAT, bad, strlen(bad), 0, &e) < 0);
    rlx_api_request_free(&r);
    const char *ok = "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"[1\"}},"
                     "{\"function\":{\"name\":\"g\",\"arguments\":\"{\\\"x\\\":1.0}\"}}]}]}";
    ASSERT_EQ(rlx_api_parse(&r, RLX_API_CHAT, ok, strlen(ok), 0, &e), 0);
    const cJSON *m = cJSON_GetArrayItem(r.messages, 0);
    ASSERT_STR_EQ(cJSON_GetObjectItem(m, "content")->valuestring, "");
    const cJSON *calls = cJSON_GetObjectItem(m, "tool_calls");
    ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "function"), "arguments")->valuestring, "[1");
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 1), "function"), "arguments");
    ASSERT(cJSON_IsObject(a));
    ASSERT_STR_EQ(cJSON_GetObjectItem(a, "x")->valuestring, "1.0"); /* read as Python reads it */
    rlx_api_request_free(&r);
}

TEST_MAIN(TEST_ENTRY(tool_history_every_template), TEST_ENTRY(tool_calls_shapes))
