/* test_proto_tool_grammar.c - the grammar that forces a tool call (proto/tool_grammar.c):
 * rule renaming, and for each format it builds, the texts it accepts and refuses when matched
 * by the grammar engine; a format without one is a 400 naming it. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tests/rlx_test.h"
#include "engine/grammar.h"
#include "proto/proto.h"

#include <pcre2.h>

#define DS_CALLS_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9c" "tool\xe2\x96\x81" "sep\xef\xbd\x9c>"

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
    if (rlx_api_parse(&r, RLX_API_CHAT, body, strlen(body), 1000, e) == 0 && rlx_api_tool_grammar(&r, info, opened ? "<|im_start|>assistant\n<think>\n" : NULL, &g, e))
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

/* Parameters with local $refs (Pydantic's $defs; "#" for the tool's own schema) mean the tool's
 * schema, not the wrapper's: every JSON-body format resolves them there */
TEST(local_refs_in_parameters)
{
#define REFTOOLS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"," \
    "\"properties\":{\"p\":{\"$ref\":\"#/$defs/P\"}},\"required\":[\"p\"],\"additionalProperties\":false,\"$defs\":{\"P\":" \
    "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"],\"additionalProperties\":false}}}}}," \
    "{\"type\":\"function\",\"function\":{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":" \
    "{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"},\"maxItems\":2}}," \
    "\"required\":[\"v\",\"kids\"],\"additionalProperties\":false}}}]"
    static const rlx_tc_format fmts[] = {RLX_TC_GENERIC, RLX_TC_HERMES, RLX_TC_MISTRAL};
    for (size_t i = 0; i < RLX_ARRAY_LEN(fmts); i++) {
        rlx_api_error e = {0};
        char *g = grammar_of("{" MSGS "," REFTOOLS ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", fmts[i], false, &e);
        ASSERT_MSG(g, "format %d: %s", (int)fmts[i], e.message);
        const char *f = "{\"name\":\"f\",\"arguments\":{\"p\":{\"n\":3}}}";
        const char *t = "{\"name\":\"t\",\"arguments\":{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]}]}}";
        const char *wrapper = "{\"name\":\"t\",\"arguments\":{\"v\":1,\"kids\":[{\"name\":\"t\",\"arguments\":{\"v\":2,\"kids\":[]}}]}}";
        char buf[512];
        const char *const texts[] = {f, t, wrapper};
        for (int k = 0; k < 3; k++) {
            if (fmts[i] == RLX_TC_GENERIC) snprintf(buf, sizeof buf, "{\"tool_calls\":[%s]}", texts[k]);
            else if (fmts[i] == RLX_TC_HERMES) snprintf(buf, sizeof buf, "<tool_call>\n%s\n</tool_call>", texts[k]);
            else { /* Mistral: [TOOL_CALLS]NAME[ARGS]{args} (the parameters compiled alone) */
                const char *args = strstr(texts[k], "\"arguments\":") + 12;
                snprintf(buf, sizeof buf, "[TOOL_CALLS]%c[ARGS]%.*s", texts[k][9], (int)(strlen(args) - 1), args);
            }
            ASSERT_MSG(accepts(g, buf) == (k < 2), "format %d text %d: %s", (int)fmts[i], k, buf);
        }
        free(g);
    }
    /* Qwen3-Coder's XML: each parameter's value compiled alone, its refs still the tool's */
    rlx_api_error e = {0};
    char *g = grammar_of("{" MSGS "," REFTOOLS ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", RLX_TC_QWEN3_CODER, false, &e);
    ASSERT_MSG(g, "%s", e.message);
    ASSERT(accepts(g, "<tool_call>\n<function=f>\n<parameter=p>\n{\"n\":3}\n</parameter>\n</function>\n</tool_call>"));
    ASSERT(accepts(g, "<tool_call>\n<function=t>\n<parameter=v>\n1\n</parameter>\n<parameter=kids>\n[{\"v\":2,\"kids\":[]}]\n"
                      "</parameter>\n</function>\n</tool_call>"));
    ASSERT(!accepts(g, "<tool_call>\n<function=f>\n<parameter=p>\n{\"m\":3}\n</parameter>\n</function>\n</tool_call>"));
    free(g);
#undef REFTOOLS
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
        /* thinking turned off (enable_thinking false): the prompt closed an empty block, so the
           call comes first; a new reasoning block let a model think on and never call */
        rlx_api_request r;
        ASSERT_EQ(rlx_api_parse(&r, RLX_API_CHAT, "{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}",
                                strlen("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}"), 1000, &e), 0);
        ASSERT_EQ(rlx_api_tool_grammar(&r, &q3, "<|im_start|>assistant\n<think>\n\n</think>\n\n", &g, &e), 0);
        rlx_api_request_free(&r);
        ASSERT(accepts(g, one));
        ASSERT(!accepts(g, "<think>\nhm\n</think>\n\n<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>"));
        free(g);
        ASSERT(rlx_tc_prompt_closes_reasoning(&q3, "x<think>\n\n</think>\n\n"));
        ASSERT(!rlx_tc_prompt_closes_reasoning(&q3, "x<think>\n"));
        ASSERT(!rlx_tc_prompt_closes_reasoning(&q3, "</think>\nanswer"));
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
    /* a format without a forcing grammar (none of the detected ones): 400 naming it */
    rlx_tc_info odd;
    rlx_tc_info_of(RLX_TC_HERMES, &odd);
    odd.format = RLX_TC_N_FORMATS;
    odd.name = "odd";
    char *g = grammar_info("{" MSGS "," TOOLS ",\"tool_choice\":\"required\"}", &odd, false, &e);
    ASSERT(g == NULL);
    ASSERT_EQ(e.status, 400);
    ASSERT_STR_EQ(e.param, "tool_choice");
    ASSERT_MSG(strstr(e.message, "'odd'") != NULL, "%s", e.message);
    /* parameters the schema compiler cannot honour: 400 naming tools */
    memset(&e, 0, sizeof e);
    g = grammar_of("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                   "{\"type\":\"object\",\"frobnicate\":1}}}],\"tool_choice\":\"required\"}", RLX_TC_GENERIC, false, &e);
    ASSERT(g == NULL);
    ASSERT_EQ(e.status, 400);
    ASSERT_STR_EQ(e.param, "tools");
    /* ... naming the tool and the keyword as the tool wrote it (not the call wrapper's path) */
    const char *two = "{" MSGS ",\"tools\":[" "{\"type\":\"function\",\"function\":{\"name\":\"ok\"}},"
                      "{\"type\":\"function\",\"function\":{\"name\":\"mail\",\"parameters\":{\"type\":\"object\","
                      "\"properties\":{\"to\":{\"type\":\"string\",\"frobnicate\":1}}}%s}}]%s}";
    char body2[1024];
    snprintf(body2, sizeof body2, two, "", ",\"tool_choice\":\"required\"");
    memset(&e, 0, sizeof e);
    g = grammar_of(body2, RLX_TC_HERMES, false, &e);
    ASSERT(g == NULL);
    ASSERT_MSG(strstr(e.message, "tools[1] ('mail')") && strstr(e.message, "frobnicate") &&
               strstr(e.message, "/properties/to") && !strstr(e.message, "tool_calls"), "%s", e.message);
    /* tool_choice "auto": such a tool leaves the calls unconstrained (a 400 for every request with
       it before), unless the tool asks for "strict": true */
    rlx_tc_info hermes;
    rlx_tc_info_of(RLX_TC_HERMES, &hermes);
    snprintf(body2, sizeof body2, two, "", "");
    {
        rlx_api_request r;
        const char *trig = NULL;
        char *pat = NULL;
        memset(&e, 0, sizeof e);
        ASSERT_EQ(rlx_api_parse(&r, RLX_API_CHAT, body2, strlen(body2), 1000, &e), 0);
        ASSERT_EQ(rlx_api_tool_grammar_auto(&r, &hermes, NULL, &g, &trig, &pat, &e), 0);
        ASSERT(g == NULL && pat == NULL);
        rlx_api_request_free(&r);
        snprintf(body2, sizeof body2, two, ",\"strict\":true", "");
        ASSERT_EQ(rlx_api_parse(&r, RLX_API_CHAT, body2, strlen(body2), 1000, &e), 0);
        ASSERT(rlx_api_tool_grammar_auto(&r, &hermes, NULL, &g, &trig, &pat, &e) != 0);
        ASSERT_MSG(e.status == 400 && strstr(e.message, "tools[1] ('mail')"), "%s", e.message);
        rlx_api_request_free(&r);
        /* parameters whose schema converts but whose grammar does not compile (a $ref cycle that
           consumes nothing is left recursion): the same - "auto" was a 400 "cannot be forced" */
        static const char *cyc = "{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                                 "{\"type\":\"object\",\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},"
                                 "\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"}}}%s}}]}";
        snprintf(body2, sizeof body2, cyc, "");
        ASSERT_EQ(rlx_api_parse(&r, RLX_API_CHAT, body2, strlen(body2), 1000, &e), 0);
        ASSERT_MSG(rlx_api_tool_grammar_auto(&r, &hermes, NULL, &g, &trig, &pat, &e) == 0, "%s", e.message);
        ASSERT(g == NULL && pat == NULL);
        rlx_api_request_free(&r);
        snprintf(body2, sizeof body2, cyc, ",\"strict\":true");
        ASSERT_EQ(rlx_api_parse(&r, RLX_API_CHAT, body2, strlen(body2), 1000, &e), 0);
        ASSERT(rlx_api_tool_grammar_auto(&r, &hermes, NULL, &g, &trig, &pat, &e) != 0);
        ASSERT_MSG(e.status == 400 && strstr(e.message, "tools[0] ('f')") && strstr(e.message, "left-recursive"), "%s", e.message);
        rlx_api_request_free(&r);
    }
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
static char *auto_grammar_p(const char *body, const rlx_tc_info *info, const char *prompt, const char **trigger,
                            char **pattern)
{
    rlx_api_request r;
    rlx_api_error e = {0};
    char *g = NULL;
    *trigger = NULL;
    *pattern = NULL;
    if (rlx_api_parse(&r, RLX_API_CHAT, body, strlen(body), 1000, &e) == 0 &&
        rlx_api_tool_grammar_auto(&r, info, prompt, &g, trigger, pattern, &e))
        g = NULL;
    rlx_api_request_free(&r);
    return g;
}

/* the same for the formats with a literal trigger (a pattern is a failure here) */
static char *auto_grammar(const char *body, const rlx_tc_info *info, const char **trigger)
{
    char *pattern = NULL;
    char *g = auto_grammar_p(body, info, NULL, trigger, &pattern);
    if (pattern) {
        free(pattern);
        free(g);
        return NULL;
    }
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
    char *pattern;
    rlx_tc_info_of(RLX_TC_LLAMA3, &info); /* a pattern, not a trigger (auto_pattern_formats) */
    g = auto_grammar_p("{" MSGS "," TOOLS ",\"tool_choice\":\"auto\"}", &info, NULL, &trigger, &pattern);
    ASSERT(g && pattern && !trigger);
    free(g);
    free(pattern);
}

/* ---- formats with a forcing grammar beyond JSON: each accepted text is read back by the
 * format's parser (proto/toolcall.c) as the same calls ---- */

/* add(a: integer, required), now(), say(text: string required, lang: enum, n: integer, ok: boolean) */
#define TOOLS3 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\"," \
    "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"now\"}}," \
    "{\"type\":\"function\",\"function\":{\"name\":\"say\",\"parameters\":{\"type\":\"object\",\"properties\":{" \
    "\"text\":{\"type\":\"string\"},\"lang\":{\"enum\":[\"en\",\"fr\"]},\"n\":{\"type\":\"integer\",\"minimum\":0}," \
    "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"text\"]}}}]"

typedef struct parsed {
    char calls[2048];  /* name args; per call */
    char content[512];
} parsed;

static int collect(void *user, const rlx_tc_event *ev)
{
    parsed *p = user;
    size_t n = strlen(p->calls);
    if (ev->kind == RLX_TC_CALL_BEGIN) snprintf(p->calls + n, sizeof p->calls - n, "%s ", ev->name);
    else if (ev->kind == RLX_TC_CALL_ARGS) snprintf(p->calls + n, sizeof p->calls - n, "%.*s", (int)ev->len, ev->text);
    else if (ev->kind == RLX_TC_CALL_END) snprintf(p->calls + n, sizeof p->calls - n, ";");
    else if (ev->kind == RLX_TC_CONTENT) {
        n = strlen(p->content);
        snprintf(p->content + n, sizeof p->content - n, "%.*s", (int)ev->len, ev->text);
    }
    return 0;
}

/* The calls the format's parser reads from text (fed in two pieces), "" with content "ERR" when
 * it fails. */
static const char *parse_calls_info(const rlx_tc_info *info, const char *prompt, const char *text, parsed *out);

static const char *parse_calls(rlx_tc_format f, const char *prompt, const char *text, parsed *out)
{
    rlx_tc_info info;
    rlx_tc_info_of(f, &info);
    return parse_calls_info(&info, prompt, text, out);
}

static const char *parse_calls_info(const rlx_tc_info *info, const char *prompt, const char *text, parsed *out)
{
    memset(out, 0, sizeof *out);
    cJSON *body = cJSON_Parse("{" TOOLS3 "}");
    rlx_tc_opts o = {.tools = cJSON_GetObjectItemCaseSensitive(body, "tools"), .prompt = prompt, .seeded = true};
    rlx_tc_parser *p = rlx_tc_parser_new(info, &o);
    cJSON_Delete(body);
    size_t n = strlen(text), half = n / 2;
    rlx_error err = {0};
    if (rlx_tc_feed(p, text, half, collect, out) || rlx_tc_feed(p, text + half, n - half, collect, out) ||
        rlx_tc_finish(p, collect, out, &err))
        snprintf(out->content, sizeof out->content, "ERR");
    rlx_tc_parser_free(p);
    return out->calls;
}

/* text is accepted by g and read by the parser as the calls `want`, no content */
#define ACCEPTS_AS(g, f, prompt, text, want) do { parsed pr_; \
        ASSERT_MSG(accepts(g, text), "not accepted: %s", text); \
        ASSERT_STR_EQ(parse_calls(f, prompt, text, &pr_), want); \
        ASSERT_STR_EQ(pr_.content, ""); } while (0)

static char *grammar_p(const char *body, rlx_tc_format f, const char *prompt, rlx_api_error *e)
{
    rlx_tc_info info;
    rlx_tc_info_of(f, &info);
    rlx_api_request r;
    char *g = NULL;
    if (rlx_api_parse(&r, RLX_API_CHAT, body, strlen(body), 1000, e) == 0 && rlx_api_tool_grammar(&r, &info, prompt, &g, e))
        g = NULL;
    rlx_api_request_free(&r);
    return g;
}

#define REQ3 "{" MSGS "," TOOLS3 ",\"tool_choice\":\"required\"}"
#define NAMED_ADD "{" MSGS "," TOOLS3 ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"add\"}}," \
    "\"parallel_tool_calls\":false}"

/* Qwen3-Coder: a parameter whose schema is a local $ref to an object is read as JSON, as the
 * grammar writes it, not kept as a string */
TEST(qwen3_coder_ref_parameters_parse)
{
    cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                               "\"properties\":{\"p\":{\"$ref\":\"#/$defs/P\"},\"s\":{\"$ref\":\"#/$defs/S\"}},\"$defs\":{\"P\":"
                               "{\"type\":\"object\"},\"S\":{\"type\":\"string\"}}}}}]");
    rlx_tc_info info;
    rlx_tc_info_of(RLX_TC_QWEN3_CODER, &info);
    rlx_tc_opts o = {.tools = tools, .seeded = true};
    rlx_tc_parser *p = rlx_tc_parser_new(&info, &o);
    parsed out;
    memset(&out, 0, sizeof out);
    const char *text = "<tool_call>\n<function=f>\n<parameter=p>\n{\"n\": 3}\n</parameter>\n<parameter=s>\n{x}\n</parameter>\n"
                       "</function>\n</tool_call>";
    rlx_error err = {0};
    ASSERT_EQ(rlx_tc_feed(p, text, strlen(text), collect, &out), 0);
    ASSERT_EQ(rlx_tc_finish(p, collect, &out, &err), 0);
    ASSERT_STR_EQ(out.calls, "f {\"p\":{\"n\":3},\"s\":\"{x}\"};");
    rlx_tc_parser_free(p);
    cJSON_Delete(tools);
}

TEST(qwen3_coder_xml)
{
    rlx_api_error e = {0};
    const rlx_tc_format F = RLX_TC_QWEN3_CODER;
    char *g = grammar_p(REQ3, F, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, F, NULL, "<tool_call>\n<function=add>\n<parameter=a>\n-12\n</parameter>\n</function>\n</tool_call>",
               "add {\"a\":-12};");
    ACCEPTS_AS(g, F, NULL, "<tool_call>\n<function=now>\n</function>\n</tool_call>", "now {};");
    /* strings are raw text (tags, quotes, newlines included); optional parameters may be left out */
    ACCEPTS_AS(g, F, NULL, "<tool_call>\n<function=say>\n<parameter=text>\nline \"1\"\n<b>2</b> </param\n</parameter>\n"
                           "<parameter=lang>\nfr\n</parameter>\n<parameter=ok>\ntrue\n</parameter>\n</function>\n</tool_call>",
               "say {\"text\":\"line \\\"1\\\"\\n<b>2</b> </param\",\"lang\":\"fr\",\"ok\":true};");
    ACCEPTS_AS(g, F, NULL, "<tool_call>\n<function=say>\n<parameter=text>\n\n</parameter>\n<parameter=n>\n7\n</parameter>\n"
                           "</function>\n</tool_call>\n<tool_call>\n<function=now>\n</function>\n</tool_call>",
               "say {\"text\":\"\",\"n\":7};now {};");
    ASSERT(!accepts(g, "<tool_call>\n<function=sub>\n</function>\n</tool_call>"));                   /* unknown tool */
    ASSERT(!accepts(g, "<tool_call>\n<function=add>\n</function>\n</tool_call>"));                   /* a is required */
    ASSERT(!accepts(g, "<tool_call>\n<function=add>\n<parameter=a>\n1.5\n</parameter>\n</function>\n</tool_call>"));
    ASSERT(!accepts(g, "<tool_call>\n<function=add>\n<parameter=a>\n\"1\"\n</parameter>\n</function>\n</tool_call>"));
    ASSERT(!accepts(g, "<tool_call>\n<function=say>\n<parameter=text>\nx\n</parameter>\n<parameter=lang>\nde\n</parameter>\n"
                       "</function>\n</tool_call>"));                                                /* not in the enum */
    ASSERT(!accepts(g, "<tool_call>\n<function=say>\n<parameter=text>\nx\n</parameter>\n<parameter=n>\n-1\n</parameter>\n"
                       "</function>\n</tool_call>"));                                                /* minimum 0 */
    ASSERT(!accepts(g, "<tool_call>\n<function=say>\n<parameter=text>\na</parameter>b\n</parameter>\n</function>\n</tool_call>"));
    ASSERT(!accepts(g, "<tool_call>\n<function=now>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"));
    ASSERT(!accepts(g, "Sure. <tool_call>\n<function=now>\n</function>\n</tool_call>"));             /* text first */
    free(g);
    g = grammar_p(NAMED_ADD, F, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, F, NULL, "<tool_call>\n<function=add>\n<parameter=a>\n3\n</parameter>\n</function>\n</tool_call>", "add {\"a\":3};");
    ASSERT(!accepts(g, "<tool_call>\n<function=now>\n</function>\n</tool_call>"));
    ASSERT(!accepts(g, "<tool_call>\n<function=add>\n<parameter=a>\n3\n</parameter>\n</function>\n</tool_call>\n"
                       "<tool_call>\n<function=add>\n<parameter=a>\n3\n</parameter>\n</function>\n</tool_call>"));
    free(g);
    /* a string length range: no '<' in it; a string keyword raw text cannot honour: 400 */
    g = grammar_p("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                  "\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}},\"required\":[\"s\"]}}}],"
                  "\"tool_choice\":\"required\"}", F, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ASSERT(accepts(g, "<tool_call>\n<function=f>\n<parameter=s>\nab\n</parameter>\n</function>\n</tool_call>"));
    ASSERT(accepts(g, "<tool_call>\n<function=f>\n<parameter=s>\n\xc3\xa9t\xc3\xa9\n</parameter>\n</function>\n</tool_call>"));
    ASSERT(!accepts(g, "<tool_call>\n<function=f>\n<parameter=s>\na\n</parameter>\n</function>\n</tool_call>"));
    ASSERT(!accepts(g, "<tool_call>\n<function=f>\n<parameter=s>\nabcd\n</parameter>\n</function>\n</tool_call>"));
    free(g);
    memset(&e, 0, sizeof e);
    g = grammar_p("{" MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                  "\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a+$\"}}}}}],\"tool_choice\":\"required\"}", F, NULL, &e);
    ASSERT(!g);
    ASSERT_EQ(e.status, 400);
    ASSERT_STR_EQ(e.param, "tools");
    ASSERT_MSG(strstr(e.message, "pattern") && strstr(e.message, "'s'"), "%s", e.message);
}

TEST(json_array_formats)
{
    rlx_api_error e = {0};
    /* Apriel: <tool_calls>[...]</tool_calls> */
    char *g = grammar_p(REQ3, RLX_TC_APRIEL, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_APRIEL, NULL, "<tool_calls>[{\"name\":\"add\",\"arguments\":{\"a\":1}}]</tool_calls>", "add {\"a\":1};");
    ACCEPTS_AS(g, RLX_TC_APRIEL, NULL, "<tool_calls>[{\"name\":\"now\",\"arguments\":{}}, {\"name\":\"say\",\"arguments\":"
                                       "{\"text\":\"hi\"}}]</tool_calls>", "now {};say {\"text\":\"hi\"};");
    ASSERT(!accepts(g, "<tool_calls>[]</tool_calls>"));
    ASSERT(!accepts(g, "<tool_calls>[{\"name\":\"add\",\"arguments\":{\"a\":\"1\"}}]</tool_calls>"));
    ASSERT(!accepts(g, "<tool_calls>[{\"name\":\"sub\",\"arguments\":{}}]</tool_calls>"));
    ASSERT(!accepts(g, "<tool_calls>[{\"name\":\"say\",\"arguments\":{}}]</tool_calls>"));
    ASSERT(!accepts(g, "ok <tool_calls>[{\"name\":\"now\",\"arguments\":{}}]</tool_calls>"));
    free(g);
    g = grammar_p(NAMED_ADD, RLX_TC_APRIEL, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ASSERT(!accepts(g, "<tool_calls>[{\"name\":\"add\",\"arguments\":{\"a\":1}},{\"name\":\"add\",\"arguments\":{\"a\":1}}]</tool_calls>"));
    ASSERT(!accepts(g, "<tool_calls>[{\"name\":\"now\",\"arguments\":{}}]</tool_calls>"));
    free(g);
    /* Firefunction v2: " functools[...]" */
    g = grammar_p(REQ3, RLX_TC_FIREFUNCTION, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_FIREFUNCTION, NULL, " functools[{\"name\":\"add\",\"arguments\":{\"a\":5}}]", "add {\"a\":5};");
    ASSERT(!accepts(g, "functools[{\"name\":\"add\",\"arguments\":{\"a\":5}}]"));
    ASSERT(!accepts(g, " functools[{\"name\":\"add\",\"arguments\":{}}]"));
    free(g);
}

TEST(functionary)
{
    rlx_api_error e = {0};
    /* v3.1: <function=NAME>{args}</function> */
    char *g = grammar_p(REQ3, RLX_TC_FUNCTIONARY_V31, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_FUNCTIONARY_V31, NULL, "<function=add>{\"a\": 2}</function>", "add {\"a\":2};");
    ACCEPTS_AS(g, RLX_TC_FUNCTIONARY_V31, NULL, "<function=now>{}</function><function=say>{\"text\":\"x\",\"lang\":\"en\"}</function>",
               "now {};say {\"text\":\"x\",\"lang\":\"en\"};");
    ASSERT(!accepts(g, "<function=add>{}</function>"));
    ASSERT(!accepts(g, "<function=sub>{\"a\": 2}</function>"));
    ASSERT(!accepts(g, "<function=add>{\"a\": true}</function>"));
    ASSERT(!accepts(g, "Let me. <function=now>{}</function>"));
    free(g);
    /* v3.2: >>>NAME\n{args}; the template's generation prompt already ends with ">>>" */
    const char *prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>";
    g = grammar_p(REQ3, RLX_TC_FUNCTIONARY_V32, prompt, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_FUNCTIONARY_V32, prompt, "add\n{\"a\":4}", "add {\"a\":4};");
    ACCEPTS_AS(g, RLX_TC_FUNCTIONARY_V32, prompt, "now\n{}>>>add\n{\"a\":4}", "now {};add {\"a\":4};");
    ASSERT(!accepts(g, ">>>add\n{\"a\":4}"));
    ASSERT(!accepts(g, "all\nHello"));
    ASSERT(!accepts(g, "add\n{\"a\":\"4\"}"));
    free(g);
    g = grammar_p(REQ3, RLX_TC_FUNCTIONARY_V32, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_FUNCTIONARY_V32, NULL, ">>>add\n{\"a\":4}", "add {\"a\":4};");
    ASSERT(!accepts(g, "add\n{\"a\":4}"));
    free(g);
}

/* formats whose markers are special tokens: the grammar's literals are the tokens' texts (the
 * worker gives those control tokens their text, engine.h rlx_worker_set_marker_tokens) */
TEST(special_token_formats)
{
    rlx_api_error e = {0};
    /* Mistral: [TOOL_CALLS]NAME[ARGS]{...} (repeated), or [TOOL_CALLS][{...}, ...] */
    char *g = grammar_p(REQ3, RLX_TC_MISTRAL, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_MISTRAL, NULL, "[TOOL_CALLS]add[ARGS]{\"a\":1}", "add {\"a\":1};");
    ACCEPTS_AS(g, RLX_TC_MISTRAL, NULL, "[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]add[ARGS]{\"a\": 2}", "now {};add {\"a\":2};");
    ACCEPTS_AS(g, RLX_TC_MISTRAL, NULL, "[TOOL_CALLS][{\"name\":\"add\",\"arguments\":{\"a\":3}}]", "add {\"a\":3};");
    ASSERT(!accepts(g, "[TOOL_CALLS]add[ARGS]{}"));
    ASSERT(!accepts(g, "[TOOL_CALLS]sub[ARGS]{\"a\":1}"));
    ASSERT(!accepts(g, "ok [TOOL_CALLS]now[ARGS]{}"));
    free(g);
    g = grammar_p(NAMED_ADD, RLX_TC_MISTRAL, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ASSERT(accepts(g, "[TOOL_CALLS]add[ARGS]{\"a\":1}"));
    ASSERT(!accepts(g, "[TOOL_CALLS]add[ARGS]{\"a\":1}[TOOL_CALLS]add[ARGS]{\"a\":1}"));
    ASSERT(!accepts(g, "[TOOL_CALLS][{\"name\":\"add\",\"arguments\":{\"a\":3}},{\"name\":\"add\",\"arguments\":{\"a\":3}}]"));
    free(g);
    /* Granite: <|tool_call|>[{...}] */
    g = grammar_p(REQ3, RLX_TC_GRANITE, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_GRANITE, NULL, "<|tool_call|>[{\"name\":\"add\",\"arguments\":{\"a\":1}}]", "add {\"a\":1};");
    ASSERT(!accepts(g, "<|tool_call|>[{\"name\":\"add\",\"arguments\":{\"a\":true}}]"));
    free(g);
    /* DeepSeek: V3.1 NAME<sep>{...} and R1 function<sep>NAME\n```json\n{...}\n``` inside the calls block */
    g = grammar_p(REQ3, RLX_TC_DEEPSEEK, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_DEEPSEEK, NULL, DS_CALLS_BEGIN DS_CALL_BEGIN "add" DS_SEP "{\"a\":1}" DS_CALL_END DS_CALLS_END,
               "add {\"a\":1};");
    ACCEPTS_AS(g, RLX_TC_DEEPSEEK, NULL, DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "add\n```json\n{\"a\":1}\n```" DS_CALL_END
               DS_CALL_BEGIN "now" DS_SEP "{}" DS_CALL_END DS_CALLS_END, "add {\"a\":1};now {};");
    ASSERT(!accepts(g, DS_CALLS_BEGIN DS_CALL_BEGIN "add" DS_SEP "{}" DS_CALL_END DS_CALLS_END));
    ASSERT(!accepts(g, DS_CALL_BEGIN "add" DS_SEP "{\"a\":1}" DS_CALL_END));
    free(g);
    /* Kimi K2: functions.NAME:i between its section and call tokens */
    g = grammar_p(REQ3, RLX_TC_KIMI_K2, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_KIMI_K2, NULL, "<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>"
               "{\"a\":1}<|tool_call_end|><|tool_calls_section_end|>", "add {\"a\":1};");
    ASSERT(!accepts(g, "<|tool_calls_section_begin|><|tool_call_begin|>functions.sub:0<|tool_call_argument_begin|>"
                       "{}<|tool_call_end|><|tool_calls_section_end|>"));
    free(g);
    /* gpt-oss harmony: an optional analysis message, then the call's commentary header (the
     * prompt ends with <|start|>assistant; <|call|> ends the generation) */
    g = grammar_p(REQ3, RLX_TC_GPT_OSS, NULL, &e);
    ASSERT_MSG(g, "%s", e.message);
    ACCEPTS_AS(g, RLX_TC_GPT_OSS, NULL, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\":1}",
               "add {\"a\":1};");
    {
        parsed pr;
        const char *t = "<|channel|>analysis<|message|>Add <|end it.<|end|><|start|>assistant<|channel|>commentary "
                        "to=functions.now <|constrain|>json<|message|>{}";
        ASSERT(accepts(g, t));
        ASSERT_STR_EQ(parse_calls(RLX_TC_GPT_OSS, NULL, t, &pr), "now {};");
    }
    ASSERT(!accepts(g, "<|channel|>final<|message|>hi"));
    ASSERT(!accepts(g, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{}"));
    ASSERT(!accepts(g, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\":1}<|channel|>commentary "
                       "to=functions.now <|constrain|>json<|message|>{}")); /* one call per turn */
    free(g);
}

TEST(auto_lazy_formats)
{
    static const struct { rlx_tc_format f; const char *trigger, *call; } cases[] = {
        {RLX_TC_QWEN3_CODER, "<tool_call>", "<tool_call>\n<function=now>\n</function>\n</tool_call>"},
        {RLX_TC_APRIEL, "<tool_calls>", "<tool_calls>[{\"name\":\"now\",\"arguments\":{}}]</tool_calls>"},
        {RLX_TC_FIREFUNCTION, " functools", " functools[{\"name\":\"now\",\"arguments\":{}}]"},
        {RLX_TC_FUNCTIONARY_V31, "<function=", "<function=now>{}</function>"},
        {RLX_TC_FUNCTIONARY_V32, ">>>", ">>>now\n{}"},
        {RLX_TC_MISTRAL, "[TOOL_CALLS]", "[TOOL_CALLS]now[ARGS]{}"},
        {RLX_TC_GRANITE, "<|tool_call|>", "<|tool_call|>[{\"name\":\"now\",\"arguments\":{}}]"},
        {RLX_TC_DEEPSEEK, DS_CALLS_BEGIN, DS_CALLS_BEGIN DS_CALL_BEGIN "now" DS_SEP "{}" DS_CALL_END DS_CALLS_END},
        {RLX_TC_GPT_OSS, " to=functions.", " to=functions.now <|constrain|>json<|message|>{}"},
        {RLX_TC_KIMI_K2, "<|tool_calls_section_begin|>", "<|tool_calls_section_begin|><|tool_call_begin|>functions.now:0"
                         "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rlx_tc_info info;
        const char *trigger;
        rlx_tc_info_of(cases[i].f, &info);
        char *g = auto_grammar("{" MSGS "," TOOLS3 ",\"tool_choice\":\"auto\"}", &info, &trigger);
        ASSERT_MSG(g && trigger, "%s", info.name);
        ASSERT_STR_EQ(trigger, cases[i].trigger);
        ASSERT_MSG(!strncmp(cases[i].call, trigger, strlen(trigger)), "%s", info.name);
        ASSERT_MSG(accepts(g, cases[i].call), "%s", info.name);
        free(g);
    }
}

/* tool_choice "auto" for generic and Llama 3 JSON: an anchored pattern, matched as the engine's
 * lazy stage matches it (engine/sample_grammar.c), that waits on a prefix, fires once the call
 * has begun, with group 1 at the '{' from which the grammar accepts the rest; the parser reads
 * the same text as the call. Plain text, other JSON, and forms the grammar would refuse never
 * match. With reasoning first for templates that think. */

/* Where the grammar starts (group 1's offset) when the pattern matches text in full; -2 when
 * the text is a prefix of a match (the stage waits), -1 when it cannot match (it turns off). */
static long fires_at(const char *pat, const char *text)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED, &ec, &eo, NULL);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    long at = -3;
    if (md) {
        int m = pcre2_match(re, (PCRE2_SPTR)text, strlen(text), 0, PCRE2_ANCHORED | PCRE2_PARTIAL_SOFT, md, NULL);
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        at = m == PCRE2_ERROR_PARTIAL ? -2 : m == PCRE2_ERROR_NOMATCH ? -1 : m >= 2 ? (long)ov[2] : -3;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return at;
}

/* the pattern fires in text at `want_at`, the grammar accepts text from there, and the parser
 * (info, prompt) reads the whole text as the calls `want`, no content */
#define FIRES_AS(pat, g, info, prompt, text, want_at, want) do { parsed pr_; \
        long at_ = fires_at(pat, text); \
        ASSERT_MSG(at_ == (want_at), "fires at %ld, not %d: %s", at_, (int)(want_at), text); \
        ASSERT_MSG(accepts(g, (text) + at_), "not accepted: %s", (text) + at_); \
        ASSERT_STR_EQ(parse_calls_info(info, prompt, text, &pr_), want); \
        ASSERT_STR_EQ(pr_.content, ""); } while (0)

#define AUTO3 "{" MSGS "," TOOLS3 ",\"tool_choice\":\"auto\"}"

TEST(auto_pattern_formats)
{
    rlx_tc_info info;
    const char *trigger;
    char *pat;
    /* Llama 3: {"name": "...", "parameters": {...}} */
    rlx_tc_info_of(RLX_TC_LLAMA3, &info);
    char *g = auto_grammar_p(AUTO3, &info, NULL, &trigger, &pat);
    ASSERT(g && pat && !trigger);
    FIRES_AS(pat, g, &info, NULL, "{\"name\": \"add\", \"parameters\": {\"a\": 1}}", 0, "add {\"a\":1};");
    FIRES_AS(pat, g, &info, NULL, "\n {\"name\":\"now\",\"parameters\":{}}", 2, "now {};");
    FIRES_AS(pat, g, &info, NULL, "{\n  \"name\":\n\t\"say\", \"parameters\": {\"text\": \"hi\"}}", 0, "say {\"text\":\"hi\"};");
    ASSERT_EQ(fires_at(pat, "{\"name\": \"ad"), 0); /* fires at the name's opening quote... */
    ASSERT(!accepts(g, "{\"name\": \"sub\", \"parameters\": {}}"));  /* ...and the grammar holds the rest */
    ASSERT(!accepts(g, "{\"name\": \"add\", \"parameters\": {\"a\": \"1\"}}"));
    ASSERT_EQ(fires_at(pat, "  "), -2); /* waits while the output could still open a call */
    ASSERT_EQ(fires_at(pat, "{\"na"), -2);
    ASSERT_EQ(fires_at(pat, "{\n  \"name\": "), -2);
    ASSERT_EQ(fires_at(pat, "Hello"), -1); /* plain text, other JSON, what the grammar would refuse */
    ASSERT_EQ(fires_at(pat, "Sure: {\"name\": \"add\""), -1);
    ASSERT_EQ(fires_at(pat, "{\"a\": 1}"), -1);
    ASSERT_EQ(fires_at(pat, "{\"name\" : \"add\""), -1);
    ASSERT_EQ(fires_at(pat, "[{\"name\": \"add\""), -1);
    ASSERT_EQ(fires_at(pat, "{  \"name\": \"add\""), -1);
    ASSERT_EQ(fires_at(pat, "<|python_tag|>add(a=1)"), -1);
    free(g);
    free(pat);
    /* generic: {"tool_calls": [{"name": "...", "arguments": {...}}, ...]} */
    rlx_tc_info_of(RLX_TC_GENERIC, &info);
    g = auto_grammar_p(AUTO3, &info, NULL, &trigger, &pat);
    ASSERT(g && pat && !trigger);
    FIRES_AS(pat, g, &info, NULL, "{\"tool_calls\": [{\"name\": \"add\", \"arguments\": {\"a\": 1}}]}", 0, "add {\"a\":1};");
    FIRES_AS(pat, g, &info, NULL, " {\"tool_calls\":[{\"name\":\"now\",\"arguments\":{}},{\"name\":\"add\",\"arguments\":{\"a\":2}}]}",
             1, "now {};add {\"a\":2};");
    FIRES_AS(pat, g, &info, NULL, "{\n  \"tool_calls\": [\n    {\n      \"name\": \"now\",\n      \"arguments\": {}\n    }\n  ]\n}", 0,
             "now {};");
    ASSERT_EQ(fires_at(pat, "{\"tool_calls\": [{\"na"), -2);
    ASSERT_EQ(fires_at(pat, "{\"response\": \"hi\"}"), -1);
    ASSERT_EQ(fires_at(pat, "{\"tool_call\": {\"name\": \"add\""), -1);
    ASSERT_EQ(fires_at(pat, "{\"tool_calls\": []}"), -1);
    ASSERT_EQ(fires_at(pat, "hi"), -1);
    free(g);
    free(pat);
    /* templates that think: a leading reasoning block, or the output inside one the prompt opened */
    const char *tmpls[] = {"{%- if tools %}ipython{%- endif %}</think>", "{{ messages }}</think>"};
    const char *calls[] = {"{\"name\": \"add\", \"parameters\": {\"a\": 1}}",
                           "{\"tool_calls\": [{\"name\": \"add\", \"arguments\": {\"a\": 1}}]}"};
    for (int k = 0; k < 2; k++) {
        char text[256];
        rlx_tc_detect(tmpls[k], strlen(tmpls[k]), &info);
        ASSERT(info.thinks && info.format == (k ? RLX_TC_GENERIC : RLX_TC_LLAMA3));
        g = auto_grammar_p(AUTO3, &info, NULL, &trigger, &pat);
        ASSERT(g && pat);
        snprintf(text, sizeof text, "<think>\nI add {\"name\": \"x\"}.\n</think>\n\n%s", calls[k]);
        FIRES_AS(pat, g, &info, NULL, text, 39, "add {\"a\":1};");
        FIRES_AS(pat, g, &info, NULL, calls[k], 0, "add {\"a\":1};"); /* or no reasoning */
        ASSERT_EQ(fires_at(pat, "<think>still thinking"), -2);
        ASSERT_EQ(fires_at(pat, "<think>a</think>Hi"), -1);
        snprintf(text, sizeof text, "so</think>%s", calls[k]); /* no <think>: content, not reasoning */
        ASSERT_EQ(fires_at(pat, text), -1);
        free(g);
        free(pat);
        const char *prompt = "<|im_start|>assistant\n<think>\n";
        g = auto_grammar_p(AUTO3, &info, prompt, &trigger, &pat);
        ASSERT(g && pat);
        snprintf(text, sizeof text, "I add.</think>\n%s", calls[k]);
        FIRES_AS(pat, g, &info, prompt, text, 15, "add {\"a\":1};");
        ASSERT_EQ(fires_at(pat, "I add {\"name\": \"x\"}"), -2); /* still reasoning */
        snprintf(text, sizeof text, "a</think>b</think>%s", calls[k]); /* reasoning ends at the first */
        ASSERT_EQ(fires_at(pat, text), -1);
        free(g);
        free(pat);
    }
}

TEST_MAIN(TEST_ENTRY(rename_rule), TEST_ENTRY(generic), TEST_ENTRY(local_refs_in_parameters), TEST_ENTRY(qwen3_coder_ref_parameters_parse), TEST_ENTRY(hermes_and_reasoning), TEST_ENTRY(llama3),
          TEST_ENTRY(refusals), TEST_ENTRY(auto_is_lazy_for_hermes),
          TEST_ENTRY(qwen3_coder_xml), TEST_ENTRY(json_array_formats), TEST_ENTRY(functionary),
          TEST_ENTRY(special_token_formats), TEST_ENTRY(auto_lazy_formats),
          TEST_ENTRY(auto_pattern_formats))
