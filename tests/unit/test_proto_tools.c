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
    /* the error names the entry */
    rlx_api_request r;
    rlx_api_error e = {0};
    ASSERT(parse(&r, "{" MSGS ",\"tools\":[" TOOL("a") ",{\"type\":\"function\"}]}", &e) < 0);
    rlx_api_request_free(&r);
    ASSERT_MSG(strstr(e.message, "tools[1]") != NULL, "%s", e.message);
}

TEST_MAIN(TEST_ENTRY(defaults), TEST_ENTRY(choices), TEST_ENTRY(bad_tool_choice), TEST_ENTRY(bad_tools))
