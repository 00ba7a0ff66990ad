/* test_proto_tool_grammar.c - the grammar that forces a tool call (proto/tool_grammar.c):
 * rule renaming, and for each format it builds, the texts it accepts and refuses when matched
 * by the grammar engine; a format without one is a 400 naming it. */
#include "tests/rlx_test.h"
#include "engine/grammar.h"
#include "proto/proto.h"

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define TOOLS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\"," \
    "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]"

/* Whether g accepts text whole (every byte accepted and the grammar may end there). */
static bool accepts(const char *g, const char *text)
{
    rlx_error err = {0};
    rlx_grammar *gr = rlx_grammar_compile(g, strlen(g), NULL, &err);
    if (!gr) return false;
    rlx_grammar_state *s = rlx_grammar_state_new(gr, &err);
    bool ok = s && rlx_grammar_accept(s, text, strlen(text)) == 0 && rlx_grammar_can_end(s);
    rlx_grammar_state_free(s);
    rlx_grammar_free(gr);
    return ok;
}

/* The forcing grammar of a body for a model of info (NULL with *e on error). */
static char *grammar_info(const char *body, const rlx_tc_info *info, bool opened, rlx_api_error *e)
{
    rlx_api_request r;
    char *g = NULL;
    if (rlx_api_parse(&r, RLX_API_CHAT, body, strlen(body), 1000, e) == 0 && rlx_api_tool_grammar(&r, info, opened, &g, e))
        g = NULL;
    rlx_api_request_free(&r);
    return g;
}

static char *grammar_of(const char *body, rlx_tc_format f, bool opened, rlx_api_error *e)
{
    rlx_tc_info info;
    rlx_tc_info_of(f, &info);
    return grammar_info(body, &info, opened, e);
}

TEST(rename_rule)
{
    char *g = rlx__gbnf_rename("root ::= \"root\" [root] x-root root-x # root\nx ::= root | root2 (root)\n", "root", "T");
    ASSERT_STR_EQ(g, "T ::= \"root\" [root] x-root root-x # root\nx ::= T | root2 (T)\n");
    free(g);
    g = rlx__gbnf_rename("a ::= \"\\\"root\" root\n", "root", "T"); /* an escaped quote stays in the literal */
    ASSERT_STR_EQ(g, "a ::= \"\\\"root\" T\n");
    free(g);
}

TEST(generic)
{
    rlx_api_error e = {0};
    char *g = grammar_of("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", RLX_TC_GENERIC, false, &e);
    ASSERT_MSG(g, "%s", e.message);
    ASSERT(accepts(g, "{\"tool_calls\":[{\"name\":\"add\",\"arguments\":{\"a\":1}}]}"));
    ASSERT(accepts(g, "{\"tool_calls\":[{\"name\":\"now\",\"arguments\":{}},{\"name\":\"add\",\"arguments\":{\"a\":-2}}]}"));
    ASSERT(!accepts(g, "{\"tool_calls\":[]}"));
    ASSERT(!accepts(g, "{\"tool_calls\":[{\"name\":\"sub\",\"arguments\":{\"a\":1}}]}"));
    ASSERT(!accepts(g, "{\"tool_calls\":[{\"name\":\"add\",\"arguments\":{\"a\":\"x\"}}]}"));
    ASSERT(!accepts(g, "{\"tool_calls\":[{\"name\":\"now\",\"arguments\":{\"x\":1}}]}")); /* no parameters: {} */
    ASSERT(!accepts(g, "{\"response\":\"hi\"}"));
    /* at most RLX_API_MAX_FORCED_CALLS */
    char big[1024] = "{\"tool_calls\":[";
    for (int i = 0; i <= RLX_API_MAX_FORCED_CALLS; i++)
        strcat(big, i ? ",{\"name\":\"now\",\"arguments\":{}}" : "{\"name\":\"now\",\"arguments\":{}}");
    strcat(big, "]}");
    ASSERT(!accepts(g, big));
    free(g);
    /* parallel_tool_calls false: exactly one; a named tool: only it */
    g = grammar_of("{" MSGS "," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"add\"}},"
                   "\"parallel_tool_calls\":false}", RLX_TC_GENERIC, false, &e);
    ASSERT_MSG(g, "%s", e.message);
    ASSERT(accepts(g, "{\"tool_calls\":[{\"name\":\"add\",\"arguments\":{\"a\":1}}]}"));
    ASSERT(!accepts(g, "{\"tool_calls\":[{\"name\":\"now\",\"arguments\":{}}]}"));
    ASSERT(!accepts(g, "{\"tool_calls\":[{\"name\":\"add\",\"arguments\":{\"a\":1}},{\"name\":\"add\",\"arguments\":{\"a\":1}}]}"));
    free(g);
    /* auto and none force nothing */
    g = grammar_of("{" MSGS "," TOOLS "}", RLX_TC_GENERIC, false, &e);
    ASSERT(g == NULL && e.status == 0);
}

TEST(hermes_and_reasoning)
{
    rlx_api_error e = {0};
    char *g = grammar_of("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", RLX_TC_HERMES, false, &e);
    ASSERT_MSG(g, "%s", e.message);
    const char *one = "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>";
    ASSERT(accepts(g, one));
    ASSERT(accepts(g, "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>\n"
                      "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>"));
    ASSERT(!accepts(g, "hello"));
    ASSERT(!accepts(g, "{\"name\":\"add\",\"arguments\":{\"a\":1}}"));
    ASSERT(!accepts(g, "<think>x</think>\n<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>"));
    free(g);
    /* Qwen3 thinks: an optional reasoning block first, or its end when the prompt opened it */
    rlx_tc_info q3;
    const char *src = "{%- if tools %}<tool_call>{%- endif %}<think></think>";
    rlx_tc_detect(src, strlen(src), &q3);
    ASSERT(q3.thinks && q3.format == RLX_TC_HERMES);
    {
        /* the reasoning may hold tags, and even a prefix of its close */
        g = grammar_info("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", &q3, false, &e);
        ASSERT_MSG(g, "%s", e.message);
        ASSERT(accepts(g, one));
        ASSERT(accepts(g, "<think>\nI <b>add</b> <</thin.\n</think>\n\n<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>"));
        free(g);
        g = grammar_info("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", &q3, true, &e);
        ASSERT_MSG(g, "%s", e.message);
        ASSERT(accepts(g, "so.</think>\n<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>"));
        ASSERT(!accepts(g, one));
        free(g);
    }
}

TEST(llama3)
{
    rlx_api_error e = {0};
    char *g = grammar_of("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", RLX_TC_LLAMA3, false, &e);
    ASSERT_MSG(g, "%s", e.message);
    ASSERT(accepts(g, "{\"name\":\"add\",\"parameters\":{\"a\":1}}"));
    ASSERT(!accepts(g, "{\"name\":\"add\",\"arguments\":{\"a\":1}}"));
    free(g);
}

TEST(refusals)
{
    rlx_api_error e = {0};
    char *g = grammar_of("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", RLX_TC_GPT_OSS, false, &e);
    ASSERT(g == NULL);
    ASSERT_EQ(e.status, 400);
    ASSERT_STR_EQ(e.param, "tool_choice");
    ASSERT_MSG(strstr(e.message, rlx_tc_format_name(RLX_TC_GPT_OSS)) != NULL, "%s", e.message);
    /* parameters the schema compiler cannot honour: 400 naming tools */
    memset(&e, 0, sizeof e);
    g = grammar_of("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                   "{\"type\":\"object\",\"frobnicate\":1}}}],\"tool_choice\":\"required\"}", RLX_TC_GENERIC, false, &e);
    ASSERT(g == NULL);
    ASSERT_EQ(e.status, 400);
    ASSERT_STR_EQ(e.param, "tools");
    /* forcing a call and another constraint: 400 at parse time */
    rlx_api_request r;
    const char *body = "{" MSGS "," TOOLS ",\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}";
    ASSERT(rlx_api_parse(&r, RLX_API_CHAT, body, strlen(body), 1000, &e) < 0);
    rlx_api_request_free(&r);
    ASSERT_STR_EQ(e.param, "tool_choice");
}

/* tool_choice "auto": a lazy grammar from <tool_call> on for the Hermes format (also when the
 * template thinks: the stage waits for the marker wherever it comes), none for the others or
 * for a request with its own grammar */
static char *auto_grammar(const char *body, const rlx_tc_info *info, const char **trigger)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    char *g = NULL;
    *trigger = NULL;
    if (rlx_api_parse(&r, RLX_API_CHAT, body, strlen(body), 1000, &e) == 0 && rlx_api_tool_grammar_auto(&r, info, &g, trigger, &e))
        g = NULL;
    rlx_api_request_free(&r);
    return g;
}

TEST(auto_is_lazy_for_hermes)
{
    rlx_tc_info info;
    const char *trigger;
    rlx_tc_info_of(RLX_TC_HERMES, &info);
    char *g = auto_grammar("{" MSGS "," TOOLS ",\"tool_choice\":\"auto\",\"parallel_tool_calls\":false}", &info, &trigger);
    ASSERT(g);
    ASSERT_STR_EQ(trigger, "<tool_call>");
    ASSERT(accepts(g, "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>"));
    ASSERT(!accepts(g, "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>\n"
                       "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>")); /* one call only */
    free(g);
    rlx_tc_info q3;
    const char *src = "{%- if tools %}<tool_call>{%- endif %}<think></think>";
    rlx_tc_detect(src, strlen(src), &q3);
    g = auto_grammar("{" MSGS "," TOOLS "}", &q3, &trigger); /* tools without tool_choice: auto */
    ASSERT(g && trigger);
    ASSERT(accepts(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>"));
    ASSERT(!accepts(g, "<think>x</think>\n<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>"));
    free(g);
    ASSERT(!auto_grammar("{" MSGS "," TOOLS ",\"tool_choice\":\"auto\",\"grammar\":\"root ::= \\\"x\\\"\"}", &info, &trigger));
    ASSERT(!trigger);
    ASSERT(!auto_grammar("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", &info, &trigger));
    ASSERT(!auto_grammar("{" MSGS "," TOOLS ",\"tool_choice\":\"none\"}", &info, &trigger));
    rlx_tc_info_of(RLX_TC_LLAMA3, &info);
    ASSERT(!auto_grammar("{" MSGS "," TOOLS ",\"tool_choice\":\"auto\"}", &info, &trigger));
}

TEST_MAIN(TEST_ENTRY(rename_rule), TEST_ENTRY(generic), TEST_ENTRY(hermes_and_reasoning), TEST_ENTRY(llama3),
          TEST_ENTRY(refusals), TEST_ENTRY(auto_is_lazy_for_hermes))
