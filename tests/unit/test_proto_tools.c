/* test_proto_tools.c - the tool fields of a chat request (proto/tools.c): tools entries,
 * tool_choice and parallel_tool_calls, their defaults and their 400s. */
#include "tests/rlx_test.h"
#include "proto/proto.h"

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define TOOL(n) "{\"type\":\"function\",\"function\":{\"name\":\"" n "\",\"parameters\":{\"type\":\"object\"}}}"
#define TOOLS "\"tools\":[" TOOL("get_weather") "," TOOL("add") "]"

static int parse(rlx_api_request *r, const char *body, rlx_api_error *e)
{
    return rlx_api_parse(r, RLX_API_CHAT, body, strlen(body), 1000, e);
}

#define EXPECT_BAD(body, param_) do { rlx_api_request r_; rlx_api_error e_ = {0}; \
    int rc_ = parse(&r_, body, &e_); rlx_api_request_free(&r_); \
    ASSERT_MSG(rc_ < 0, "accepted bad body %s", body); ASSERT_EQ(e_.status, 400); \
    ASSERT_STR_EQ(e_.param, param_); ASSERT_STR_EQ(e_.type, "invalid_request_error"); } while (0)

TEST(defaults)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, "{" MSGS "}", &e), 0);
    ASSERT_EQ(r.tool_choice, RLX_TOOL_CHOICE_NONE);
    ASSERT(r.parallel_tool_calls);
    ASSERT(r.tools == NULL && r.tool_name == NULL);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, "{" MSGS "," TOOLS "}", &e), 0);
    ASSERT_EQ(r.tool_choice, RLX_TOOL_CHOICE_AUTO);
    ASSERT_EQ(cJSON_GetArraySize(r.tools), 2);
    ASSERT(rlx_api_find_tool(&r, "add") != NULL);
    ASSERT(rlx_api_find_tool(&r, "sub") == NULL);
    rlx_api_request_free(&r);
    /* an empty tools list is no tools */
    ASSERT_EQ(parse(&r, "{" MSGS ",\"tools\":[],\"tool_choice\":\"none\"}", &e), 0);
    ASSERT_EQ(r.tool_choice, RLX_TOOL_CHOICE_NONE);
    rlx_api_request_free(&r);
}

TEST(choices)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT_EQ(parse(&r, "{" MSGS "," TOOLS ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", &e), 0);
    ASSERT_EQ(r.tool_choice, RLX_TOOL_CHOICE_REQUIRED);
    ASSERT(!r.parallel_tool_calls);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, "{" MSGS "," TOOLS ",\"tool_choice\":\"none\"}", &e), 0);
    ASSERT_EQ(r.tool_choice, RLX_TOOL_CHOICE_NONE);
    rlx_api_request_free(&r);
    ASSERT_EQ(parse(&r, "{" MSGS "," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"add\"}}}", &e), 0);
    ASSERT_EQ(r.tool_choice, RLX_TOOL_CHOICE_NAMED);
    ASSERT_STR_EQ(r.tool_name, "add");
    rlx_api_request_free(&r);
    /* "none" without tools is fine (clients send it by default), null is absent */
    ASSERT_EQ(parse(&r, "{" MSGS ",\"tool_choice\":\"none\",\"tools\":null,\"parallel_tool_calls\":null}", &e), 0);
    ASSERT_EQ(r.tool_choice, RLX_TOOL_CHOICE_NONE);
    ASSERT(r.parallel_tool_calls);
    rlx_api_request_free(&r);
}

TEST(bad_tool_choice)
{
    EXPECT_BAD("{" MSGS "," TOOLS ",\"tool_choice\":\"always\"}", "tool_choice");
    EXPECT_BAD("{" MSGS "," TOOLS ",\"tool_choice\":3}", "tool_choice");
    EXPECT_BAD("{" MSGS "," TOOLS ",\"tool_choice\":{\"type\":\"function\"}}", "tool_choice");
    EXPECT_BAD("{" MSGS "," TOOLS ",\"tool_choice\":{\"type\":\"x\",\"function\":{\"name\":\"add\"}}}", "tool_choice");
    /* a named tool absent from tools */
    EXPECT_BAD("{" MSGS "," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"sub\"}}}", "tool_choice");
    /* tool_choice without tools, except "none" */
    EXPECT_BAD("{" MSGS ",\"tool_choice\":\"required\"}", "tool_choice");
    EXPECT_BAD("{" MSGS ",\"tool_choice\":\"auto\"}", "tool_choice");
    EXPECT_BAD("{" MSGS ",\"tools\":[],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"add\"}}}",
               "tool_choice");
    EXPECT_BAD("{" MSGS "," TOOLS ",\"parallel_tool_calls\":\"yes\"}", "parallel_tool_calls");
}

TEST(bad_tools)
{
    EXPECT_BAD("{" MSGS ",\"tools\":{}}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[1]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"code\",\"function\":{\"name\":\"f\"}}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\"}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":7}}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":1}}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\\nweather\"}}]}", "tools");
    /* delimiters of the call formats: a forced call with such a name came back unparsed */
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a<b\"}}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\" \"}}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get weather\"}}]}", "tools");
    EXPECT_BAD("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\\\"x\"}}]}", "tools");
    {
        const char *names_ok = "{" MSGS ",\"tools\":[" TOOL("mcp.github:create_issue/v2-x") "," TOOL("wetter_\u00fcber") "]}";
        rlx_api_request r;
        rlx_api_error e = {0};
        ASSERT_MSG(parse(&r, names_ok, &e) == 0, "%s", e.message);
        rlx_api_request_free(&r);
    }
    /* arguments are an object: parameters of another type were forced into a call that came back
       as plain content (200, no tool_calls) */
#define PTOOL(p) "{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":" p "}}]}"
    EXPECT_BAD(PTOOL("{\"type\":\"integer\",\"enum\":[3]}"), "tools");
    EXPECT_BAD(PTOOL("{\"type\":\"array\"}"), "tools");
    EXPECT_BAD(PTOOL("{\"type\":\"string\"}"), "tools");
    EXPECT_BAD(PTOOL("{\"type\":[\"object\",\"null\"]}"), "tools");
    EXPECT_BAD(PTOOL("{\"type\":7}"), "tools");
    const char *fine[] = {PTOOL("{}"), PTOOL("{\"type\":[\"object\"]}"), PTOOL("{\"properties\":{\"a\":{\"type\":\"integer\"}}}")};
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        rlx_api_request r;
        rlx_api_error e = {0};
        ASSERT_MSG(parse(&r, fine[i], &e) == 0, "%s: %s", fine[i], e.message);
        rlx_api_request_free(&r);
    }
    /* the error names the entry */
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT(parse(&r, "{" MSGS ",\"tools\":[" TOOL("a") ",{\"type\":\"function\"}]}", &e) < 0);
    rlx_api_request_free(&r);
    ASSERT_MSG(strstr(e.message, "tools[1]") != NULL, "%s", e.message);
}

static void ev(rlx_api_tool_out *o, rlx_tc_event_kind k, int index, const char *name, const char *text)
{
    rlx_tc_event e = {.kind = k, .index = index, .id = "call_x", .name = name, .text = text, .len = text ? strlen(text) : 0};
    if (k == RLX_TC_CALL_BEGIN) e.id = index ? "call_b" : "call_a";
    ASSERT_EQ(rlx_api_tool_out_add(o, &e), 0);
}

static cJSON *response(const rlx_api_tool_out *t, rlx_finish_reason f)
{ /* NULL when the formatter failed */
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_CHAT, "tiny", 1, 0);
    rlx_api_choice c = {.text = "raw", .text_len = 3, .finish = f, .tools = t};
    rlx_usage u = {0};
    char *s = rlx_api_response_json(&m, &c, 1, &u, NULL);
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(s);
    return o;
}

#define MSG(o) cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "message")
#define FINISH(o) cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "finish_reason")->valuestring

TEST(message_from_parsed_output)
{
    rlx_api_tool_out t = {0};
    ev(&t, RLX_TC_REASONING, 0, NULL, "let me think");
    ev(&t, RLX_TC_CALL_BEGIN, 0, "add", NULL);
    ev(&t, RLX_TC_CALL_ARGS, 0, NULL, "{\"a\":");
    ev(&t, RLX_TC_CALL_ARGS, 0, NULL, "1}");
    ev(&t, RLX_TC_CALL_END, 0, NULL, NULL);
    ev(&t, RLX_TC_CALL_BEGIN, 1, "get_weather", NULL);
    ev(&t, RLX_TC_CALL_ARGS, 1, NULL, "{}");
    ev(&t, RLX_TC_CALL_END, 1, NULL, NULL);
    cJSON *o = response(&t, RLX_FINISH_STOP);
    ASSERT(o);
    cJSON *msg = MSG(o), *calls = cJSON_GetObjectItem(msg, "tool_calls");
    ASSERT(cJSON_IsNull(cJSON_GetObjectItem(msg, "content"))); /* empty with calls: null */
    ASSERT_STR_EQ(cJSON_GetObjectItem(msg, "reasoning_content")->valuestring, "let me think");
    ASSERT_EQ(cJSON_GetArraySize(calls), 2);
    cJSON *c0 = cJSON_GetArrayItem(calls, 0), *f0 = cJSON_GetObjectItem(c0, "function");
    ASSERT_STR_EQ(cJSON_GetObjectItem(c0, "id")->valuestring, "call_a");
    ASSERT_STR_EQ(cJSON_GetObjectItem(c0, "type")->valuestring, "function");
    ASSERT_STR_EQ(cJSON_GetObjectItem(f0, "name")->valuestring, "add");
    ASSERT_STR_EQ(cJSON_GetObjectItem(f0, "arguments")->valuestring, "{\"a\":1}");
    ASSERT_STR_EQ(FINISH(o), "tool_calls");
    cJSON_Delete(o);
    /* cut off inside the output: the finish stays "length" */
    o = response(&t, RLX_FINISH_LENGTH);
    ASSERT(o);
    ASSERT_STR_EQ(FINISH(o), "length");
    cJSON_Delete(o);
    rlx_api_tool_out_free(&t);
    /* no calls: content is the parsed content (no reasoning key when there was none), finish "stop" */
    ev(&t, RLX_TC_CONTENT, 0, NULL, "hello");
    o = response(&t, RLX_FINISH_STOP);
    ASSERT(o);
    msg = MSG(o);
    ASSERT_STR_EQ(cJSON_GetObjectItem(msg, "content")->valuestring, "hello");
    ASSERT(!cJSON_GetObjectItem(msg, "tool_calls") && !cJSON_GetObjectItem(msg, "reasoning_content"));
    ASSERT_STR_EQ(FINISH(o), "stop");
    cJSON_Delete(o);
    rlx_api_tool_out_free(&t);
    o = response(&t, RLX_FINISH_STOP); /* nothing at all: content "" */
    ASSERT(o);
    ASSERT_STR_EQ(cJSON_GetObjectItem(MSG(o), "content")->valuestring, "");
    cJSON_Delete(o);
    /* only whitespace before a call (the newline a model writes before its tag): null, as OpenAI
       and llama-server give it (it was "  \n"); without calls whitespace stays the content */
    ev(&t, RLX_TC_CONTENT, 0, NULL, "  \n");
    ev(&t, RLX_TC_CALL_BEGIN, 0, "now", NULL);
    ev(&t, RLX_TC_CALL_ARGS, 0, NULL, "{}");
    ev(&t, RLX_TC_CALL_END, 0, NULL, NULL);
    o = response(&t, RLX_FINISH_STOP);
    ASSERT(o);
    ASSERT(cJSON_IsNull(cJSON_GetObjectItem(MSG(o), "content")));
    cJSON_Delete(o);
    rlx_api_tool_out_free(&t);
    ev(&t, RLX_TC_CONTENT, 0, NULL, " \n");
    o = response(&t, RLX_FINISH_STOP);
    ASSERT(o);
    ASSERT_STR_EQ(cJSON_GetObjectItem(MSG(o), "content")->valuestring, " \n");
    cJSON_Delete(o);
    rlx_api_tool_out_free(&t);
}

/* The chunk's choices[0].delta, parsed (in *root); the chunk's frame, index 2 and null
 * finish_reason checked. */
static void chunk_of(const rlx_tc_event *e, cJSON **root, cJSON **delta)
{
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_CHAT, "tiny", 1, 0);
    char *s = rlx_api_sse_tool_event(&m, 2, e, NULL, 0);
    *root = *delta = NULL;
    ASSERT(s && !strncmp(s, "data: ", 6) && strstr(s, "\n\n"));
    *root = cJSON_Parse(s + 6);
    free(s);
    ASSERT(*root);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(*root, "choices"), 0);
    ASSERT_EQ(cJSON_GetObjectItem(ch, "index")->valueint, 2);
    ASSERT(cJSON_IsNull(cJSON_GetObjectItem(ch, "finish_reason")));
    *delta = cJSON_GetObjectItem(ch, "delta");
}
#define chunk(e, root) chunk_of(e, root, &d)

TEST(stream_deltas)
{
    cJSON *root, *d, *c, *fn;
    rlx_tc_event e = {.kind = RLX_TC_CONTENT, .text = "hi", .len = 2};
    chunk(&e, &root);
    ASSERT(d);
    ASSERT_STR_EQ(cJSON_GetObjectItem(d, "content")->valuestring, "hi");
    ASSERT_EQ(cJSON_GetArraySize(d), 1);
    cJSON_Delete(root);
    e = (rlx_tc_event){.kind = RLX_TC_REASONING, .text = "hm", .len = 2};
    chunk(&e, &root);
    ASSERT(d);
    ASSERT_STR_EQ(cJSON_GetObjectItem(d, "reasoning_content")->valuestring, "hm");
    ASSERT(!cJSON_GetObjectItem(d, "content"));
    cJSON_Delete(root);
    e = (rlx_tc_event){.kind = RLX_TC_CALL_BEGIN, .index = 1, .id = "call_q", .name = "add"};
    chunk(&e, &root);
    ASSERT(d);
    c = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "tool_calls"), 0);
    fn = cJSON_GetObjectItem(c, "function");
    ASSERT_EQ(cJSON_GetObjectItem(c, "index")->valueint, 1);
    ASSERT_STR_EQ(cJSON_GetObjectItem(c, "id")->valuestring, "call_q");
    ASSERT_STR_EQ(cJSON_GetObjectItem(c, "type")->valuestring, "function");
    ASSERT_STR_EQ(cJSON_GetObjectItem(fn, "name")->valuestring, "add");
    ASSERT_STR_EQ(cJSON_GetObjectItem(fn, "arguments")->valuestring, "");
    cJSON_Delete(root);
    e = (rlx_tc_event){.kind = RLX_TC_CALL_ARGS, .index = 1, .id = "call_q", .text = "{\"a\"", .len = 4};
    chunk(&e, &root);
    ASSERT(d);
    c = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "tool_calls"), 0);
    fn = cJSON_GetObjectItem(c, "function");
    ASSERT_EQ(cJSON_GetObjectItem(c, "index")->valueint, 1);
    ASSERT(!cJSON_GetObjectItem(c, "id") && !cJSON_GetObjectItem(fn, "name"));
    ASSERT_STR_EQ(cJSON_GetObjectItem(fn, "arguments")->valuestring, "{\"a\"");
    cJSON_Delete(root);
    /* CALL_END and empty texts send nothing */
    rlx_api_meta m;
    rlx_api_meta_init(&m, RLX_API_CHAT, "tiny", 1, 0);
    e = (rlx_tc_event){.kind = RLX_TC_CALL_END, .index = 1};
    char *s = rlx_api_sse_tool_event(&m, 0, &e, NULL, 0);
    ASSERT_STR_EQ(s, "");
    free(s);
    e = (rlx_tc_event){.kind = RLX_TC_CONTENT, .text = "", .len = 0};
    s = rlx_api_sse_tool_event(&m, 0, &e, NULL, 0);
    ASSERT_STR_EQ(s, "");
    free(s);
    s = rlx_api_sse_tool_end(&m, 0, RLX_FINISH_STOP, true, NULL, 0);
    ASSERT(strstr(s, "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"tool_calls\""));
    free(s);
    s = rlx_api_sse_tool_end(&m, 0, RLX_FINISH_STOP, false, NULL, 0);
    ASSERT(strstr(s, "\"finish_reason\":\"stop\""));
    free(s);
    /* logprob entries ride with the chunk of their text, the last ones with the finish */
    rlx_api_logprob lp = {.text = "hi", .text_len = 2, .logprob = -0.25f};
    e = (rlx_tc_event){.kind = RLX_TC_REASONING, .text = "hi", .len = 2};
    for (int end = 0; end < 2; end++) {
        s = end ? rlx_api_sse_tool_end(&m, 0, RLX_FINISH_STOP, false, &lp, 1) : rlx_api_sse_tool_event(&m, 0, &e, &lp, 1);
        cJSON *o = s && !strncmp(s, "data: ", 6) ? cJSON_Parse(s + 6) : NULL;
        free(s);
        cJSON *l = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "logprobs");
        cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(l, "content"), 0);
        ASSERT(c0);
        ASSERT_STR_EQ(cJSON_GetObjectItem(c0, "token")->valuestring, "hi");
        ASSERT_NEAR(cJSON_GetObjectItem(c0, "logprob")->valuedouble, -0.25, 1e-6);
        cJSON_Delete(o);
    }
}

TEST_MAIN(TEST_ENTRY(defaults), TEST_ENTRY(choices), TEST_ENTRY(bad_tool_choice), TEST_ENTRY(bad_tools),
          TEST_ENTRY(message_from_parsed_output), TEST_ENTRY(stream_deltas))
