/* tool_grammar.c - the grammar that makes tool_choice "required" or a named tool a valid call
 * in the model's format: each tool's `parameters` compiled by engine/json_schema.h inside a
 * schema of the call ({"name": const, "arguments": parameters}), wrapped in the format's
 * markers. Formats: generic (the ChatML fallback: {"tool_calls": [call, ...]}), Hermes / Qwen
 * (<tool_call>\n{call}\n</tool_call>, repeated) and Llama 3 JSON ({"name", "parameters"}, one
 * call). For templates that think, a reasoning block may come first (or, when the prompt opened
 * it, must be closed first); the grammar holds after it. Pure functions, any thread. */
#include "proto/proto.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int oom(rlx_api_error *e)
{
    return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
}

/* {"type":"object","properties":{"name":{"const":N}, <args_key>: parameters},"required":[...]} */
static cJSON *call_schema(const cJSON *fn, const char *args_key)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    cJSON *s = cJSON_CreateObject(), *props = cJSON_CreateObject(), *n = cJSON_CreateObject();
    cJSON *req = cJSON_CreateArray();
    cJSON *p = params && !cJSON_IsNull(params) ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    if (p && (!params || cJSON_IsNull(params))) { /* no parameters (OpenAI): an empty list, {} */
        cJSON_AddStringToObject(p, "type", "object");
        cJSON_AddObjectToObject(p, "properties");
        cJSON_AddFalseToObject(p, "additionalProperties");
    }
    bool ok = s && props && n && req && p && cJSON_AddStringToObject(s, "type", "object") &&
              cJSON_AddStringToObject(n, "const", name->valuestring) &&
              cJSON_AddItemToObject(props, "name", n) && (n = NULL, cJSON_AddItemToObject(props, args_key, p)) &&
              (p = NULL, cJSON_AddItemToObject(s, "properties", props)) && (props = NULL, true) &&
              cJSON_AddItemToArray(req, cJSON_CreateString("name")) &&
              cJSON_AddItemToArray(req, cJSON_CreateString(args_key)) && cJSON_AddItemToObject(s, "required", req);
    if (ok) return s;
    cJSON_Delete(n);
    cJSON_Delete(p);
    cJSON_Delete(props);
    if (!cJSON_GetObjectItemCaseSensitive(s, "required")) cJSON_Delete(req);
    cJSON_Delete(s);
    return NULL;
}

/* One call of any allowed tool (the named one only, for a named tool_choice). */
static cJSON *any_call_schema(const rlx_api_request *r, const char *args_key)
{
    if (r->tool_choice == RLX_TOOL_CHOICE_NAMED) return call_schema(rlx_api_find_tool(r, r->tool_name), args_key);
    cJSON *any = cJSON_CreateObject(), *alts = cJSON_AddArrayToObject(any, "anyOf");
    if (!alts) {
        cJSON_Delete(any);
        return NULL;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, r->tools) {
        cJSON *c = call_schema(cJSON_GetObjectItemCaseSensitive(t, "function"), args_key);
        if (!c || !cJSON_AddItemToArray(alts, c)) {
            cJSON_Delete(c);
            cJSON_Delete(any);
            return NULL;
        }
    }
    if (cJSON_GetArraySize(alts) == 1) { /* one tool: no anyOf */
        cJSON *one = cJSON_DetachItemFromArray(alts, 0);
        cJSON_Delete(any);
        return one;
    }
    return any;
}

char *rlx__gbnf_rename(const char *g, const char *from, const char *to)
{
    size_t n = strlen(g), fl = strlen(from), tl = strlen(to), cap = n + 1, len = 0;
    for (const char *p = strstr(g, from); p; p = strstr(p + 1, from)) cap += tl; /* a bound */
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t i = 0;
    while (i < n) {
        char c = g[i];
        if (c == '"' || c == '[') { /* a literal or a class, with its escapes, copied whole */
            char close = c == '"' ? '"' : ']';
            size_t j = i + 1;
            while (j < n && g[j] != close) j += g[j] == '\\' && j + 1 < n ? 2 : 1;
            j = j < n ? j + 1 : n;
            memcpy(out + len, g + i, j - i);
            len += j - i;
            i = j;
        } else if (c == '#') { /* a comment, to the end of its line */
            size_t j = i;
            while (j < n && g[j] != '\n') j++;
            memcpy(out + len, g + i, j - i);
            len += j - i;
            i = j;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-') {
            size_t j = i;
            while (j < n && ((g[j] >= 'a' && g[j] <= 'z') || (g[j] >= 'A' && g[j] <= 'Z') ||
                             (g[j] >= '0' && g[j] <= '9') || g[j] == '_' || g[j] == '-'))
                j++;
            if (j - i == fl && !memcmp(g + i, from, fl)) {
                memcpy(out + len, to, tl);
                len += tl;
            } else {
                memcpy(out + len, g + i, j - i);
                len += j - i;
            }
            i = j;
        } else {
            out[len++] = c;
            i++;
        }
    }
    out[len] = 0;
    return out;
}

/* A GBNF string literal of s (bytes escaped as \xHH where needed). */
static void literal(char *out, size_t cap, const char *s)
{
    size_t len = 0;
    out[len++] = '"';
    for (; *s && len + 6 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\' || c < 0x20 || c == '[' || c == ']') len += (size_t)snprintf(out + len, cap - len, "\\x%02X", c);
        else out[len++] = (char)c;
    }
    out[len++] = '"';
    out[len] = 0;
}

/* Reasoning first, for templates that think: rules rlx-tc-think (the block, or its end when the
 * prompt opened it) appended to buf; returns the element the root starts with ("" if none). */
static const char *think_rules(const rlx_tc_info *info, bool opened, char *buf, size_t cap)
{
    buf[0] = 0;
    if (!info->thinks || !info->reasoning_open || !info->reasoning_close || strlen(info->reasoning_close) < 2)
        return "";
    const unsigned char *cl = (const unsigned char *)info->reasoning_close;
    size_t n = strlen(info->reasoning_close);
    char open[96], close[96];
    literal(open, sizeof open, info->reasoning_open);
    literal(close, sizeof close, info->reasoning_close);
    /* text that does not contain the close: a byte other than its first, or a run of its first
     * byte then a prefix of the rest that breaks off (c0+ c1..ci [^c(i+1) c0]) */
    size_t len = (size_t)snprintf(buf, cap, "rlx-tc-think-body ::= ( [^\\x%02X] | \"\\x%02X\"+ (", cl[0], cl[0]);
    for (size_t i = 1; i < n && len < cap; i++) {
        len += (size_t)snprintf(buf + len, cap - len, "%s ", i > 1 ? " |" : "");
        for (size_t k = 1; k < i && len < cap; k++) len += (size_t)snprintf(buf + len, cap - len, "\"\\x%02X\" ", cl[k]);
        if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "[^\\x%02X\\x%02X]", cl[i], cl[0]);
    }
    if (len < cap)
        snprintf(buf + len, cap - len, " ) )*\nrlx-tc-think ::= %s rlx-tc-think-body %s [ \\n]{0,4}\n",
                 opened ? "" : open, close);
    return opened ? "rlx-tc-think " : "rlx-tc-think? ";
}

/* lazy: the grammar of tool_choice "auto", which starts at the format's trigger (no reasoning
 * block before it: the stage waits for the trigger wherever it comes) */
static int tool_grammar(const rlx_api_request *r, const rlx_tc_info *info, bool opens_reasoning, bool lazy, char **gbnf,
                        rlx_api_error *e)
{
    int k = r->parallel_tool_calls ? RLX_API_MAX_FORCED_CALLS : 1;
    cJSON *schema = NULL;
    bool wrap = false; /* Hermes: the call's grammar inside <tool_call> markers */
    switch (info->format) {
    case RLX_TC_GENERIC: {
        cJSON *call = any_call_schema(r, "arguments");
        schema = cJSON_CreateObject();
        cJSON *props = cJSON_AddObjectToObject(schema, "properties"), *arr = cJSON_CreateObject();
        cJSON_AddStringToObject(schema, "type", "object");
        if (!call || !props || !arr || !cJSON_AddItemToObject(props, "tool_calls", arr)) {
            cJSON_Delete(call);
            cJSON_Delete(arr);
            cJSON_Delete(schema);
            return oom(e);
        }
        cJSON_AddStringToObject(arr, "type", "array");
        cJSON_AddItemToObject(arr, "items", call);
        cJSON_AddNumberToObject(arr, "minItems", 1);
        cJSON_AddNumberToObject(arr, "maxItems", k);
        cJSON *req = cJSON_AddArrayToObject(schema, "required");
        if (req) cJSON_AddItemToArray(req, cJSON_CreateString("tool_calls"));
        break;
    }
    case RLX_TC_HERMES: schema = any_call_schema(r, "arguments"), wrap = true; break;
    case RLX_TC_LLAMA3: schema = any_call_schema(r, "parameters"), k = 1; break;
    default:
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tool_choice",
                              "'tool_choice' \"%s\" is not supported for this model: its tool-call format '%s' has no "
                              "forcing grammar (supported: generic, hermes, llama3); use \"auto\".",
                              r->tool_choice == RLX_TOOL_CHOICE_NAMED ? "function" : "required", info->name);
    }
    if (!schema) return oom(e);
    rlx_error err = {0};
    char *call = rlx_json_schema_to_gbnf(schema, &err);
    cJSON_Delete(schema);
    if (!call) {
        if (err.code == RLX_ENOMEM) return oom(e);
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools",
                              "A tool's 'parameters' cannot be forced (tool_choice): %s", err.msg);
    }
    char *body = rlx__gbnf_rename(call, "root", "rlx-tc-call");
    free(call);
    if (!body) return oom(e);
    char think[2048], root[512];
    const char *pre = lazy ? (think[0] = 0, "") : think_rules(info, opens_reasoning, think, sizeof think);
    if (wrap)
        snprintf(root, sizeof root,
                 "root ::= %s\"<tool_call>\\n\" rlx-tc-call \"\\n</tool_call>\" "
                 "( \"\\n<tool_call>\\n\" rlx-tc-call \"\\n</tool_call>\" ){0,%d}\n",
                 pre, k - 1);
    else
        snprintf(root, sizeof root, "root ::= %srlx-tc-call\n", pre);
    size_t n = strlen(root) + strlen(think) + strlen(body) + 1;
    char *g = malloc(n);
    if (!g) {
        free(body);
        return oom(e);
    }
    snprintf(g, n, "%s%s%s", root, think, body);
    free(body);
    rlx_grammar *gr = rlx_grammar_compile(g, strlen(g), NULL, &err);
    if (!gr) {
        free(g);
        if (err.code == RLX_ENOMEM) return oom(e);
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools", "The tools cannot be forced (tool_choice): %s", err.msg);
    }
    rlx_grammar_free(gr);
    *gbnf = g;
    return 0;
}

int rlx_api_tool_grammar(const rlx_api_request *r, const rlx_tc_info *info, bool opens_reasoning, char **gbnf,
                         rlx_api_error *e)
{
    *gbnf = NULL;
    if (r->tool_choice != RLX_TOOL_CHOICE_REQUIRED && r->tool_choice != RLX_TOOL_CHOICE_NAMED) return 0;
    return tool_grammar(r, info, opens_reasoning, false, gbnf, e);
}

int rlx_api_tool_grammar_auto(const rlx_api_request *r, const rlx_tc_info *info, char **gbnf, const char **trigger,
                              rlx_api_error *e)
{
    *gbnf = NULL;
    *trigger = NULL;
    if (r->tool_choice != RLX_TOOL_CHOICE_AUTO || info->format != RLX_TC_HERMES || r->base->grammar) return 0;
    int rc = tool_grammar(r, info, false, true, gbnf, e);
    if (!rc) *trigger = "<tool_call>";
    return rc;
}
