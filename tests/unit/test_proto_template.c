/* test_proto_template.c - the chat template options of a chat request (vLLM's
 * add_generation_prompt, continue_final_message, chat_template_kwargs): parsing, the template
 * context they give, and continue_final_message's cut as transformers makes it. */
#include "models/chat_template.h"
#include "proto/proto.h"
#include "models/json.h"
#include "server/cli.h"
#include "tests/rlx_test.h"

static int parse(rlx_api_request *r, const char *body, rlx_api_error *e)
{
    return rlx_api_parse(r, RLX_API_CHAT, body, strlen(body), 0, e);
}

TEST(defaults_and_context)
{
    rlx_api_request r;
    rlx_api_error e;
    ASSERT_EQ(parse(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &e), 0);
    ASSERT(r.add_generation_prompt && !r.continue_final_message && !r.template_kwargs);
    cJSON *ctx = rlx_api_chat_context(&r, "<s>", "</s>", true);
    ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(ctx, "add_generation_prompt")));
    cJSON_Delete(ctx);
    rlx_api_request_free(&r);

    ASSERT_EQ(parse(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"add_generation_prompt\":false,"
                        "\"chat_template_kwargs\":{\"enable_thinking\":false,\"bos_token\":\"B\",\"t\":1.0}}", &e), 0);
    ctx = rlx_api_chat_context(&r, "<s>", "</s>", true);
    ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(ctx, "add_generation_prompt")));
    ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(ctx, "enable_thinking")));
    ASSERT_STR_EQ(cJSON_GetObjectItem(ctx, "bos_token")->valuestring, "B"); /* kwargs go over, as in vLLM */
    ASSERT_STR_EQ(cJSON_GetObjectItem(ctx, "t")->valuestring, "1.0");     /* the literal survives */
    ASSERT_STR_EQ(cJSON_GetObjectItem(ctx, "eos_token")->valuestring, "</s>");
    cJSON_Delete(ctx);
    rlx_api_request_free(&r);
}

TEST(bad_options)
{
    static const struct { const char *body, *param; } bad[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"continue_final_message\":true}", "continue_final_message"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"add_generation_prompt\":1}", "add_generation_prompt"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":\"x\"}", "chat_template_kwargs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":{\"messages\":1}}", "chat_template_kwargs"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlx_api_request r;
        rlx_api_error e;
        ASSERT_MSG(parse(&r, bad[i].body, &e) != 0, "case %zu parsed", i);
        ASSERT_EQ(e.status, 400);
        ASSERT_STR_EQ(e.param, bad[i].param);
        rlx_api_request_free(&r);
    }
}

/* transformers: cut after the final message's text; its trailing spaces stay when the template
 * kept them, go when it trimmed them */
TEST(continue_final_message)
{
    static const struct { const char *content, *rendered, *want; int rc; } cases[] = {
        {"The answer is", "<u>Hi</u><a>The answer is</a>\n", "<u>Hi</u><a>The answer is", 0},
        {"The answer is ", "<a>The answer is </a>", "<a>The answer is ", 0},
        {"The answer is ", "<a>The answer is</a>", "<a>The answer is", 0},
        {"  The answer", "<a>The answer</a>", "<a>The answer", 0},
        {"x", "<a>x</a><b>x</b>", "<a>x</a><b>x", 0},
        {"gone", "<a>changed</a>", NULL, RLX_EINVAL},
        /* Python's strip() is Unicode's: a template that trims (gemma, Llama 3) drops U+3000,
           U+00A0, U+2003 too, where the ASCII-only strip found no message (a 400) */
        {"Answer\\u3000", "<a>Answer</a>", "<a>Answer", 0},
        {"Answer\\u00a0\\u00a0", "<a>Answer</a>", "<a>Answer", 0},
        {"\\u2003Answer", "<a>Answer</a>", "<a>Answer", 0},
        {"Caf\\u00e9", "<a>Caf\xc3\xa9</a>", "<a>Caf\xc3\xa9", 0}, /* an \u00e9 is no space */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"%s\"}],"
                 "\"add_generation_prompt\":false,\"continue_final_message\":true}", cases[i].content);
        rlx_api_request r;
        rlx_api_error e;
        ASSERT_EQ(parse(&r, body, &e), 0);
        char buf[256];
        snprintf(buf, sizeof buf, "%s", cases[i].rendered);
        int rc = rlx_api_continue_final(&r, buf, &e);
        ASSERT_MSG(rc == cases[i].rc, "case %zu: rc %d", i, rc);
        if (!rc) ASSERT_STR_EQ(buf, cases[i].want);
        else ASSERT_STR_EQ(e.param, "continue_final_message");
        rlx_api_request_free(&r);
    }
}

/* what the template sees of a request: numbers with their types, NULs inside strings, also
 * when content comes as parts */
TEST(template_sees_request_values)
{
    rlx_api_request r;
    rlx_api_error e;
    /* (a NUL in a request is refused at the boundary - prompts travel as C strings - so parts
     * with NULs are covered by render-template's context files instead) */
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\\u00e9\"},"
                       "{\"type\":\"text\",\"text\":\"b\"}]}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                       "{\"minimum\":0.0,\"big\":12345678901234567890}}}]}";
    ASSERT_EQ(parse(&r, body, &e), 0);
    cJSON *ctx = rlx_api_chat_context(&r, "", "", true);
    const char *src = "{{ messages[0].content|length }} {{ messages[0].content|tojson }} {{ tools[0].function.parameters|tojson }}";
    rlx_chat_template *t = NULL;
    rlx_error err = {0};
    char *out = NULL;
    ASSERT_EQ(rlx_chat_template_parse(&t, src, strlen(src), &err), 0);
    int rc = rlx_chat_template_render(t, ctx, NULL, &out, &err);
    rlx_chat_template_free(t);
    cJSON_Delete(ctx);
    rlx_api_request_free(&r);
    ASSERT_MSG(rc == 0, "%s", err.msg);
    ASSERT_STR_EQ(out, "4 \"a\xc3\xa9\\nb\" {\"minimum\": 0.0, \"big\": 12345678901234567890}");
    free(out);
}

/* Firefunction v2's real template reads `functions` and `datetime`, which llama.cpp passes and
 * transformers does not: without them it fails (its cases in ../shared/templates are all
 * UndefinedError); with them it renders the tools as json.dumps(indent=2) text. */
TEST(firefunction_vars)
{
    const char *path = rlx_test_shared("templates/fireworks-ai-llama-3-firefunction-v2.json");
    if (!path) SKIP("../shared/templates is absent (set RLX_SHARED)");
    size_t n = 0;
    char *text = rlx_read_file(path, &n);
    cJSON *doc = NULL;
    rlx_error err = {0};
    ASSERT(text && rlx_json_parse(text, n, &doc, &err) == 0);
    free(text);
    const char *src = cJSON_GetObjectItem(doc, "template")->valuestring;
    rlx_tc_info tc;
    rlx_tc_detect(src, strlen(src), &tc);
    ASSERT_EQ(tc.format, RLX_TC_FIREFUNCTION);
    rlx_chat_template *t = NULL;
    ASSERT_EQ(rlx_chat_template_parse(&t, src, strlen(src), &err), 0);
    rlx_api_request r;
    rlx_api_error e;
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in K\\u00f8benhavn?\"}],\"tools\":[{\"type\":"
                       "\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":"
                       "{\"city\":{\"type\":\"string\",\"description\":\"Byn\\u00e4me\"},\"days\":{\"minimum\":1.0}},\"required\":[]}}}]}";
    ASSERT_EQ(parse(&r, body, &e), 0);
    /* 1700000000 = 2023-11-14 22:13:20 UTC */
    for (int kw = 0; kw < 3; kw++) {
        cJSON *ctx = rlx_api_chat_context(&r, "<|begin_of_text|>", "<|eot_id|>", true);
        if (kw == 1) cJSON_AddStringToObject(ctx, "datetime", "Jan 01 2000"); /* as chat_template_kwargs would set it */
        char *out = NULL;
        int rc;
        if (kw < 2) {
            ASSERT_EQ(rlx_api_chat_format_vars(ctx, &r, tc.format, (time_t)1700000000), 0);
            rc = rlx_chat_template_render(t, ctx, NULL, &out, &err);
            ASSERT_MSG(rc == 0, "%s", err.msg);
            ASSERT_MSG(strstr(out, "Available functions as JSON spec:\n[\n  {\n    \"type\": \"function\",\n    \"function\": {\n"
                                   "      \"name\": \"get_weather\",\n      \"parameters\": {\n        \"type\": \"object\",\n"
                                   "        \"properties\": {\n          \"city\": {\n            \"type\": \"string\",\n"
                                   "            \"description\": \"Byn\xc3\xa4me\"\n          },\n          \"days\": {\n"
                                   "            \"minimum\": 1.0\n          }\n        },\n        \"required\": []\n      }\n    }\n  }\n]\n"
                                   "Today is "), "%s", out);
            ASSERT(strstr(out, kw == 1 ? "Today is Jan 01 2000.<|eot_id|>" : "Today is Nov 14 2023 22:13:20 GMT.<|eot_id|>"));
            ASSERT(strstr(out, "<|start_header_id|>user<|end_header_id|>\n\nWeather in K\xc3\xb8" "benhavn?<|eot_id|>"));
        } else {
            rc = rlx_chat_template_render(t, ctx, NULL, &out, &err); /* what transformers' context gives */
            ASSERT(rc != 0 && strstr(err.msg, "functions"));
        }
        free(out);
        cJSON_Delete(ctx);
    }
    rlx_api_request_free(&r);
    /* no tools: functions is "" */
    ASSERT_EQ(parse(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &e), 0);
    cJSON *ctx = rlx_api_chat_context(&r, "", "", true);
    ASSERT_EQ(rlx_api_chat_format_vars(ctx, &r, RLX_TC_FIREFUNCTION, 0), 0);
    ASSERT_STR_EQ(cJSON_GetObjectItem(ctx, "functions")->valuestring, "");
    ASSERT_STR_EQ(cJSON_GetObjectItem(ctx, "datetime")->valuestring, "Jan 01 1970 00:00:00 GMT");
    cJSON_Delete(ctx);
    /* other formats get nothing */
    ctx = rlx_api_chat_context(&r, "", "", true);
    ASSERT_EQ(rlx_api_chat_format_vars(ctx, &r, RLX_TC_HERMES, 0), 0);
    ASSERT(!cJSON_GetObjectItem(ctx, "functions") && !cJSON_GetObjectItem(ctx, "datetime"));
    cJSON_Delete(ctx);
    rlx_api_request_free(&r);
    rlx_chat_template_free(t);
    cJSON_Delete(doc);
}

/* "developer" becomes "system" unless the template names the role as a string */
TEST(developer_role)
{
    rlx_api_request r;
    rlx_api_error e;
    ASSERT_EQ(parse(&r, "{\"messages\":[{\"role\":\"developer\",\"content\":\"d\"},{\"role\":\"user\",\"content\":\"x\"},"
                        "{\"role\":\"wizard\",\"content\":\"w\"}]}", &e), 0);
    static const char *const srcs[] = {NULL, "{% if m.role == 'system' %}", "{% set developer_token = '<|d|>' %}",
                                       "{% if m.role in ['system', 'developer'] %}", "{% if m.role == \"developer\" %}"};
    static const char *const want[] = {"system", "system", "system", "developer", "developer"};
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        cJSON *ctx = rlx_api_chat_context(&r, "", "", true);
        ASSERT_EQ(rlx_api_chat_roles(ctx, srcs[i], srcs[i] ? strlen(srcs[i]) : 0), 0);
        cJSON *msgs = cJSON_GetObjectItem(ctx, "messages");
        ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "role")->valuestring, want[i]);
        ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 1), "role")->valuestring, "user");
        ASSERT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 2), "role")->valuestring, "wizard");
        cJSON_Delete(ctx);
    }
    rlx_api_request_free(&r);
}

TEST_MAIN(TEST_ENTRY(defaults_and_context), TEST_ENTRY(developer_role), TEST_ENTRY(bad_options), TEST_ENTRY(continue_final_message),
          TEST_ENTRY(template_sees_request_values), TEST_ENTRY(firefunction_vars))
