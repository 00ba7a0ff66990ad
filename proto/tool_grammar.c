/* tool_grammar.c - the grammar that makes tool_choice "required" or a named tool a valid call
 * in the model's format: each tool's `parameters` compiled by engine/json_schema.h inside a
 * schema of the call ({"name": const, "arguments": parameters}), wrapped in the format's
 * markers. Formats here: generic (the ChatML fallback: {"tool_calls": [call, ...]}), Hermes /
 * Qwen (<tool_call>\n{call}\n</tool_call>, repeated), Llama 3 JSON ({"name", "parameters"}, one
 * call), Apriel (<tool_calls>[call, ...]</tool_calls>) and Firefunction ( functools[call, ...]);
 * the formats that name the function outside JSON (Functionary v3.1 / v3.2, Qwen3-Coder XML,
 * Mistral's NAME[ARGS] form, DeepSeek, Kimi K2, gpt-oss harmony) build their rules per tool in
 * tool_grammar_fmt.c. For templates that think, a reasoning block may come first (or, when the
 * prompt opened it, must be closed first); the grammar holds after it. Markers that are special
 * tokens in the model's vocabulary are literals too: the worker gives those control tokens
 * their text (engine.h rlx_worker_set_marker_tokens). Pure functions, any thread. */
#include "proto/tool_grammar_int.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rlx__tg_oom(rlx_api_error *e)
{
    return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
}

cJSON *rlx__tg_params(const cJSON *fn)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    if (params && !cJSON_IsNull(params)) {
        /* arguments are an object: parameters without a type ({}, or only "properties") say so */
        cJSON *d = cJSON_Duplicate(params, true);
        static const char *const typed[] = {"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "not"};
        bool has = false;
        for (size_t k = 0; k < sizeof typed / sizeof *typed; k++) has |= cJSON_GetObjectItemCaseSensitive(d, typed[k]) != NULL;
        if (d && cJSON_IsObject(d) && !has && !cJSON_AddStringToObject(d, "type", "object")) {
            cJSON_Delete(d);
            return NULL;
        }
        return d;
    }
    cJSON *p = cJSON_CreateObject(); /* no parameters (OpenAI): an empty list, {} */
    if (p && !(cJSON_AddStringToObject(p, "type", "object") && cJSON_AddObjectToObject(p, "properties") &&
               cJSON_AddFalseToObject(p, "additionalProperties"))) {
        cJSON_Delete(p);
        return NULL;
    }
    return p;
}

/* A tool's parameters inside a wrapper schema (the call object, the formats' arrays and
 * objects): their local $refs ("#", "#/$defs/X", as Pydantic writes them) mean the tool's own
 * schema, not the wrapper's root. Such parameters sit at the wrapper root's
 * $defs/rlx-tool-<i> (with_tool_defs), their refs rewritten to point there, and the call
 * refers to them. */
bool rlx__tg_has_local_ref(const cJSON *v)
{
    for (const cJSON *c = v ? v->child : NULL; c; c = c->next) {
        if (c->string && !strcmp(c->string, "$ref") && cJSON_IsString(c) && c->valuestring[0] == '#') return true;
        if (rlx__tg_has_local_ref(c)) return true;
    }
    return false;
}

bool rlx__tg_rebase_refs(cJSON *v, const char *base)
{
    for (cJSON *c = v ? v->child : NULL; c; c = c->next) {
        if (c->string && !strcmp(c->string, "$ref") && cJSON_IsString(c) && c->valuestring[0] == '#') {
            size_t n = strlen(base) + strlen(c->valuestring);
            char *t = malloc(n);
            if (!t) return false;
            snprintf(t, n, "%s%s", base, c->valuestring + 1);
            const bool ok = cJSON_SetValuestring(c, t) != NULL;
            free(t);
            if (!ok) return false;
        } else if (!rlx__tg_rebase_refs(c, base)) {
            return false;
        }
    }
    return true;
}

bool rlx__tg_defs_put(cJSON *schema, const char *key, const cJSON *params)
{
    char base[96];
    snprintf(base, sizeof base, "#/$defs/%s", key);
    cJSON *p = cJSON_Duplicate(params, true), *defs = cJSON_GetObjectItemCaseSensitive(schema, "$defs");
    if (!p || !rlx__tg_rebase_refs(p, base) || (!defs && !(defs = cJSON_AddObjectToObject(schema, "$defs"))) ||
        !cJSON_AddItemToObject(defs, key, p)) {
        cJSON_Delete(p);
        return false;
    }
    return true;
}

/* fn's position among the request's tools */
static int tool_index(const rlx_api_request *r, const cJSON *fn)
{
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, r->tools) {
        if (cJSON_GetObjectItemCaseSensitive(t, "function") == fn) return i;
        i++;
    }
    return -1;
}

/* Adds to schema's root the $defs of the tools whose parameters have local refs; false when out
 * of memory. */
static bool with_tool_defs(const rlx_api_request *r, cJSON *schema)
{
    const cJSON *t;
    int i = 0;
    cJSON_ArrayForEach(t, r->tools) {
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "parameters");
        char key[48];
        snprintf(key, sizeof key, "rlx-tool-%d", i++);
        if (rlx__tg_has_local_ref(params) && !rlx__tg_defs_put(schema, key, params)) return false;
    }
    return true;
}

/* {"type":"object","properties":{"name":{"const":N}, <args_key>: parameters},"required":[...]} */
static cJSON *call_schema(const rlx_api_request *r, const cJSON *fn, const char *args_key)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    cJSON *s = cJSON_CreateObject(), *props = cJSON_CreateObject(), *n = cJSON_CreateObject();
    cJSON *req = cJSON_CreateArray();
    cJSON *p = NULL;
    if (rlx__tg_has_local_ref(cJSON_GetObjectItemCaseSensitive(fn, "parameters"))) { /* at the root's $defs */
        char ref[64];
        snprintf(ref, sizeof ref, "#/$defs/rlx-tool-%d", tool_index(r, fn));
        if ((p = cJSON_CreateObject()) && !cJSON_AddStringToObject(p, "$ref", ref)) {
            cJSON_Delete(p);
            p = NULL;
        }
    } else {
        p = rlx__tg_params(fn);
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
    if (r->tool_choice == RLX_TOOL_CHOICE_NAMED) return call_schema(r, rlx_api_find_tool(r, r->tool_name), args_key);
    cJSON *any = cJSON_CreateObject(), *alts = cJSON_AddArrayToObject(any, "anyOf");
    if (!alts) {
        cJSON_Delete(any);
        return NULL;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, r->tools) {
        cJSON *c = call_schema(r, cJSON_GetObjectItemCaseSensitive(t, "function"), args_key);
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


/* ---- GBNF text helpers (proto/tool_grammar_int.h) ------------------------------------- */

void rlx__tg_printf(rlx__tg *g, const char *fmt, ...)
{
    if (g->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || rlx__tc_buf_add(&g->b, NULL, (size_t)n)) { /* reserve, then format in place */
        g->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(g->b.p + g->b.len - (size_t)n, (size_t)n + 1, fmt, ap);
    va_end(ap);
}

void rlx__tg_lit(rlx__tg *g, const char *s)
{
    rlx__tg_printf(g, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\' || c < 0x20 || c == '[' || c == ']') rlx__tg_printf(g, "\\x%02X", c);
        else rlx__tg_printf(g, "%c", c);
    }
    rlx__tg_printf(g, "\"");
}

/* text without close: a byte other than its first, or a run of its first byte then a prefix of
 * the rest that breaks off (c0+ c1..ci [^c(i+1) c0]) */
void rlx__tg_not_containing(rlx__tg *g, const char *rule, const char *close)
{
    const unsigned char *cl = (const unsigned char *)close;
    size_t n = strlen(close);
    rlx__tg_printf(g, "%s ::= ( [^\\x%02X] | \"\\x%02X\"+ (", rule, cl[0], cl[0]);
    for (size_t i = 1; i < n; i++) {
        rlx__tg_printf(g, "%s ", i > 1 ? " |" : "");
        for (size_t k = 1; k < i; k++) rlx__tg_printf(g, "\"\\x%02X\" ", cl[k]);
        rlx__tg_printf(g, "[^\\x%02X\\x%02X]", cl[i], cl[0]);
    }
    /* and it may end with a run of c0 then a proper prefix of the rest: c0+ (c1 (c2 ...)?)? */
    rlx__tg_printf(g, " ) )* ( \"\\x%02X\"+", cl[0]);
    for (size_t i = 1; i + 1 < n; i++) rlx__tg_printf(g, " ( \"\\x%02X\"", cl[i]);
    for (size_t i = 1; i + 1 < n; i++) rlx__tg_printf(g, " )?");
    rlx__tg_printf(g, " )?\n");
}

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Appends gbnf with every rule name (each identifier outside literals, classes, repetition
 * counts and comments) written prefix-NAME. */
static void prefixed(rlx__tg *g, const char *s, const char *prefix)
{
    size_t n = strlen(s), i = 0;
    while (i < n && !g->oom) {
        char c = s[i];
        size_t j = i + 1;
        if (c == '"' || c == '[' || c == '{') {
            char close = c == '"' ? '"' : c == '[' ? ']' : '}';
            while (j < n && s[j] != close) j += s[j] == '\\' && j + 1 < n ? 2 : 1;
            j = j < n ? j + 1 : n;
        } else if (c == '#') {
            while (j < n && s[j] != '\n') j++;
        } else if (ident_char(c)) {
            while (j < n && ident_char(s[j])) j++;
            rlx__tg_printf(g, "%s-", prefix);
        }
        if (rlx__tc_buf_add(&g->b, s + i, j - i)) g->oom = true;
        i = j;
    }
    if (n && s[n - 1] != '\n') rlx__tg_printf(g, "\n");
}

int rlx__tg_schema(rlx__tg *g, const cJSON *schema, const char *prefix, rlx_api_error *e)
{
    rlx_error err = {0};
    char *gb = rlx_json_schema_to_gbnf(schema, &err);
    if (!gb) {
        if (err.code == RLX_ENOMEM) return rlx__tg_oom(e);
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools",
                              "A tool's 'parameters' cannot be forced (tool_choice): %s", err.msg);
    }
    prefixed(g, gb, prefix);
    free(gb);
    return g->oom ? rlx__tg_oom(e) : 0;
}

/* ---- the grammar ------------------------------------------------------------------------ */

/* An array of 1..k call objects {"name", "arguments"} (Apriel, Firefunction). */
static cJSON *call_array_schema(const rlx_api_request *r, int k)
{
    cJSON *call = any_call_schema(r, "arguments"), *arr = cJSON_CreateObject();
    if (!call || !arr || !cJSON_AddStringToObject(arr, "type", "array") || !cJSON_AddItemToObject(arr, "items", call)) {
        cJSON_Delete(call);
        cJSON_Delete(arr);
        return NULL;
    }
    if (!cJSON_AddNumberToObject(arr, "minItems", 1) || !cJSON_AddNumberToObject(arr, "maxItems", k)) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

/* The rules of rlx-tc-call for the JSON-body formats: schema compiled (prefix rlx-tc-json) and
 * wrapped in the format's markers (open, close). */
static int json_call(const rlx_api_request *r, rlx__tg *g, cJSON *schema, const char *open, const char *close,
                     rlx_api_error *e)
{
    if (!schema || !with_tool_defs(r, schema)) {
        cJSON_Delete(schema);
        return rlx__tg_oom(e);
    }
    int rc = rlx__tg_schema(g, schema, "rlx-tc-json", e);
    cJSON_Delete(schema);
    if (rc) return rc;
    rlx__tg_printf(g, "rlx-tc-call ::= ");
    if (*open) rlx__tg_lit(g, open);
    rlx__tg_printf(g, " rlx-tc-json-root ");
    if (*close) rlx__tg_lit(g, close);
    rlx__tg_printf(g, "\n");
    return g->oom ? rlx__tg_oom(e) : 0;
}

static bool has_grammar(rlx_tc_format f)
{
    switch (f) {
    case RLX_TC_GENERIC:
    case RLX_TC_HERMES:
    case RLX_TC_LLAMA3:
    case RLX_TC_QWEN3_CODER:
    case RLX_TC_APRIEL:
    case RLX_TC_FIREFUNCTION:
    case RLX_TC_FUNCTIONARY_V31:
    case RLX_TC_FUNCTIONARY_V32:
    case RLX_TC_MISTRAL:
    case RLX_TC_GRANITE:
    case RLX_TC_DEEPSEEK:
    case RLX_TC_KIMI_K2:
    case RLX_TC_GPT_OSS: return true;
    default: return false;
    }
}

#define DS_CALLS_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"

/* The text the format's grammar starts with: the lazy grammar's trigger. */
static const char *opener(rlx_tc_format f)
{
    switch (f) {
    case RLX_TC_HERMES:
    case RLX_TC_QWEN3_CODER: return "<tool_call>";
    case RLX_TC_APRIEL: return "<tool_calls>";
    case RLX_TC_FIREFUNCTION: return " functools";
    case RLX_TC_FUNCTIONARY_V31: return "<function=";
    case RLX_TC_FUNCTIONARY_V32: return ">>>";
    case RLX_TC_MISTRAL: return "[TOOL_CALLS]";
    case RLX_TC_GRANITE: return "<|tool_call|>";
    case RLX_TC_DEEPSEEK: return DS_CALLS_BEGIN;
    case RLX_TC_KIMI_K2: return "<|tool_calls_section_begin|>";
    case RLX_TC_GPT_OSS: return " to=functions.";
    default: return NULL;
    }
}

/* lazy: the grammar of tool_choice "auto", which starts at the format's trigger (no reasoning
 * block before it: the stage waits for the trigger wherever it comes). prompt: the rendered
 * prompt or its tail (NULL: none). */
/* Each tool's parameters compiled alone, once the call's grammar was refused, so that one the
 * grammar cannot honour is named with its tool rather than by a path inside the call's wrapper
 * schema (the happy path compiles the schemas once). 0 when all compile; else the 400 (or the
 * 500 of out of memory), *strict telling whether the tool at fault asked for strict schema
 * adherence ("strict": true). */
static int params_check(const rlx_api_request *r, const char *how, bool *strict, rlx_api_error *e)
{
    int i = 0;
    const cJSON *t;
    *strict = false;
    cJSON_ArrayForEach(t, r->tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        cJSON *p = rlx__tg_params(fn);
        if (!p) return rlx__tg_oom(e);
        rlx_error err = {0};
        char *gb = rlx_json_schema_to_gbnf(p, &err);
        cJSON_Delete(p);
        /* the schema's grammar must also compile (a $ref cycle that consumes nothing is left
           recursion only the grammar compiler sees) */
        rlx_grammar *gr = gb ? rlx_grammar_compile(gb, strlen(gb), NULL, &err) : NULL;
        rlx_grammar_free(gr);
        if (gb && !gr) {
            free(gb);
            gb = NULL;
        }
        if (!gb) {
            if (err.code == RLX_ENOMEM) return rlx__tg_oom(e);
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
            *strict = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fn, "strict"));
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools", "tools[%d] ('%.64s'): its 'parameters' cannot be %s: %s",
                                  i, cJSON_IsString(name) ? name->valuestring : "?", how, err.msg);
        }
        free(gb);
        i++;
    }
    return 0;
}

static int tool_grammar(const rlx_api_request *r, const rlx_tc_info *info, const char *prompt, bool lazy, char **gbnf,
                        rlx_api_error *e)
{
    int k = r->parallel_tool_calls ? RLX_API_MAX_FORCED_CALLS : 1, rc = 0;
    const char *sep = "", *head = "", *tail = ""; /* between repeated calls, around them all */
    const char *alt = NULL; /* another form of the whole output (a rule) */
    bool v32_open = false; /* start at rlx-tc-call0: Functionary v3.2 after a prompt's ">>>",
                              gpt-oss's lazy grammar at " to=functions." */
    rlx__tg g = {0};
    switch (info->format) {
    case RLX_TC_GENERIC: {
        cJSON *arr = call_array_schema(r, k), *schema = cJSON_CreateObject(), *req = NULL;
        cJSON *props = cJSON_AddObjectToObject(schema, "properties");
        if (!arr || !props || !cJSON_AddItemToObject(props, "tool_calls", arr) ||
            !cJSON_AddStringToObject(schema, "type", "object") || !(req = cJSON_AddArrayToObject(schema, "required")) ||
            !cJSON_AddItemToArray(req, cJSON_CreateString("tool_calls"))) {
            if (!cJSON_GetObjectItemCaseSensitive(props, "tool_calls")) cJSON_Delete(arr);
            cJSON_Delete(schema);
            return rlx__tg_oom(e);
        }
        rc = json_call(r, &g, schema, "", "", e), k = 1;
        break;
    }
    case RLX_TC_HERMES:
        rc = json_call(r, &g, any_call_schema(r, "arguments"), "<tool_call>\n", "\n</tool_call>", e), sep = "\n";
        break;
    case RLX_TC_LLAMA3: rc = json_call(r, &g, any_call_schema(r, "parameters"), "", "", e), k = 1; break;
    case RLX_TC_APRIEL: rc = json_call(r, &g, call_array_schema(r, k), "<tool_calls>", "</tool_calls>", e), k = 1; break;
    case RLX_TC_FIREFUNCTION: rc = json_call(r, &g, call_array_schema(r, k), " functools", "", e), k = 1; break;
    case RLX_TC_QWEN3_CODER: rc = rlx__tg_named_calls(r, info, &g, e), sep = "\n"; break;
    case RLX_TC_FUNCTIONARY_V31:
    case RLX_TC_FUNCTIONARY_V32: {
        size_t n = prompt ? strlen(prompt) : 0;
        v32_open = !lazy && info->format == RLX_TC_FUNCTIONARY_V32 && n >= 3 && !memcmp(prompt + n - 3, ">>>", 3);
        rc = rlx__tg_named_calls(r, info, &g, e);
        break;
    }
    case RLX_TC_GRANITE: rc = json_call(r, &g, call_array_schema(r, k), "<|tool_call|>", "", e), k = 1; break;
    case RLX_TC_MISTRAL: { /* [TOOL_CALLS]NAME[ARGS]{...} repeated, or [TOOL_CALLS][{...}, ...] */
        cJSON *arr = call_array_schema(r, k);
        rc = rlx__tg_named_calls(r, info, &g, e);
        if (!rc && (!arr || !with_tool_defs(r, arr))) rc = rlx__tg_oom(e);
        if (!rc) rc = rlx__tg_schema(&g, arr, "rlx-tc-json", e);
        cJSON_Delete(arr);
        alt = "\"[TOOL_CALLS]\" rlx-tc-json-root";
        break;
    }
    case RLX_TC_DEEPSEEK:
        rc = rlx__tg_named_calls(r, info, &g, e), head = DS_CALLS_BEGIN, tail = DS_CALLS_END;
        break;
    case RLX_TC_KIMI_K2:
        rc = rlx__tg_named_calls(r, info, &g, e), head = "<|tool_calls_section_begin|>", tail = "<|tool_calls_section_end|>";
        break;
    case RLX_TC_GPT_OSS: /* one call ends the turn (<|call|>, end of generation) */
        rc = rlx__tg_named_calls(r, info, &g, e), k = 1, v32_open = lazy;
        break;
    default:
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tool_choice",
                              "'tool_choice' \"%s\" is not supported for this model: its tool-call format '%s' has no "
                              "forcing grammar (supported: generic, hermes, llama3, qwen3-coder, apriel, "
                              "firefunction-v2, functionary-v3.1, functionary-v3.2, mistral, granite, deepseek, "
                              "kimi-k2, gpt-oss); use \"auto\".",
                              r->tool_choice == RLX_TOOL_CHOICE_NAMED ? "function" : "required", info->name);
    }
    if (rc) {
        free(g.b.p);
        return rc;
    }
    char think[2048], root[512], sepl[32] = "", headl[96] = "", taill[96] = "", reps[96] = "";
    /* no reasoning block when the prompt closed one already (thinking turned off) */
    const char *pre = lazy || rlx_tc_prompt_closes_reasoning(info, prompt)
                          ? (think[0] = 0, "")
                          : think_rules(info, rlx_tc_prompt_opens_reasoning(info, prompt), think, sizeof think);
    if (*sep) literal(sepl, sizeof sepl, sep);
    if (*head) literal(headl, sizeof headl, head);
    if (*tail) literal(taill, sizeof taill, tail);
    if (k > 1) snprintf(reps, sizeof reps, " ( %s rlx-tc-call ){0,%d}", sepl, k - 1);
    snprintf(root, sizeof root, "root ::= %s( %s%s %s %s%s %s )\n", pre, alt ? alt : "", alt ? " |" : "", headl,
             v32_open ? "rlx-tc-call0" : "rlx-tc-call", reps, taill);
    size_t n = strlen(root) + strlen(think) + g.b.len + 1;
    char *out = malloc(n);
    if (!out || g.oom) {
        free(out);
        free(g.b.p);
        return rlx__tg_oom(e);
    }
    snprintf(out, n, "%s%s%s", root, think, g.b.p);
    free(g.b.p);
    rlx_error err = {0};
    rlx_grammar *gr = rlx_grammar_compile(out, strlen(out), NULL, &err);
    if (!gr) {
        free(out);
        if (err.code == RLX_ENOMEM) return rlx__tg_oom(e);
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools", "The tools cannot be forced (tool_choice): %s", err.msg);
    }
    rlx_grammar_free(gr);
    *gbnf = out;
    return 0;
}

int rlx_api_tool_grammar(const rlx_api_request *r, const rlx_tc_info *info, const char *prompt, char **gbnf,
                         rlx_api_error *e)
{
    *gbnf = NULL;
    if (r->tool_choice != RLX_TOOL_CHOICE_REQUIRED && r->tool_choice != RLX_TOOL_CHOICE_NAMED) return 0;
    int rc = tool_grammar(r, info, prompt, false, gbnf, e);
    if (rc && e->status == 400 && has_grammar(info->format)) { /* name the tool at fault, if one is */
        bool strict;
        rlx_api_error pe;
        int prc = params_check(r, "forced (tool_choice)", &strict, &pe);
        if (prc) *e = pe, rc = prc;
    }
    return rc;
}

/* ---- "auto" for the formats whose call is plain JSON at the start of the output ---------- */

/* Whitespace as the JSON-schema grammars allow it between tokens (engine/json_schema_prim.c,
 * rule ws: nothing, one space, or a newline and up to 20 spaces or tabs), so that whatever the
 * pattern matches from its group on, the grammar accepts. */
#define RE_WS "(?: |\\n[ \\t]{0,20})?"

/* Appends s as a regex literal: PCRE2's metacharacters escaped with a backslash, control bytes
 * as \x{HH}, other bytes as they are (the pattern is matched over bytes, not UTF-8). */
static void re_lit(rlx__tg *g, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7F) rlx__tg_printf(g, "\\x{%02X}", c);
        else if (strchr("\\^$.|?*+()[]{}#", c)) rlx__tg_printf(g, "\\%c", c);
        else rlx__tg_printf(g, "%c", c);
    }
}

/* Reasoning up to and with the first `close` (the parser ends it there): as an atomic group,
 * so a later close cannot end it, and unrolled (runs of bytes other than close's first, then
 * that byte when the rest of close does not follow) rather than [\s\S]*?, which the stage,
 * matching the whole text again after each token while it waits, would pay for per byte. */
static void reasoning_body(rlx__tg *g, const char *close)
{
    unsigned char c0 = (unsigned char)close[0];
    rlx__tg_printf(g, "(?>[^\\x{%02X}]*(?:\\x{%02X}", c0, c0);
    if (close[1]) {
        rlx__tg_printf(g, "(?!");
        re_lit(g, close + 1);
        rlx__tg_printf(g, ")");
    } else rlx__tg_printf(g, "(*FAIL)");
    rlx__tg_printf(g, "[^\\x{%02X}]*)*)", c0);
    re_lit(g, close);
}

/* The anchored pattern (engine/grammar.h, lazy on a pattern) that finds where a call opens in
 * an output of the generic or Llama 3 format, as the parser (proto/toolcall.c) reads one: the
 * output's first non-space text (after a reasoning block, for templates that think: from the
 * output's start when the prompt opened it, else a leading one) is a JSON object whose first
 * key is "name" (Llama 3) or "tool_calls" holding an array whose first object's is (generic).
 * It fires only when the call has clearly begun, at the opening quote of the name's value, and
 * its group 1 starts at the '{' the grammar starts with. Anything else (plain text, an object
 * of another shape, "response") does not match, and the answer stays free. */
static char *auto_pattern(const rlx_tc_info *info, const char *prompt)
{
    rlx__tg g = {0};
    bool think = info->thinks && info->reasoning_open && info->reasoning_close && info->reasoning_close[0] &&
                 !rlx_tc_prompt_closes_reasoning(info, prompt);
    rlx__tg_printf(&g, "[ \\t\\n\\r]*");
    bool opened = think && rlx_tc_prompt_opens_reasoning(info, prompt); /* the output starts inside reasoning */
    if (think) {
        rlx__tg_printf(&g, opened ? "" : "(?:");
        if (!opened) re_lit(&g, info->reasoning_open);
        reasoning_body(&g, info->reasoning_close);
        rlx__tg_printf(&g, opened ? "[ \\t\\n\\r]*" : "[ \\t\\n\\r]*)?");
    }
    if (info->format == RLX_TC_GENERIC)
        rlx__tg_printf(&g, "(\\{" RE_WS "\"tool_calls\":" RE_WS "\\[" RE_WS "\\{" RE_WS "\"name\":" RE_WS "\")");
    else rlx__tg_printf(&g, "(\\{" RE_WS "\"name\":" RE_WS "\")");
    rlx__tg_printf(&g, "[\\s\\S]*");
    if (g.oom) {
        free(g.b.p);
        return NULL;
    }
    return g.b.p;
}

int rlx_api_tool_grammar_auto(const rlx_api_request *r, const rlx_tc_info *info, const char *prompt, char **gbnf,
                              const char **trigger, char **pattern, rlx_api_error *e)
{
    *gbnf = NULL;
    *trigger = NULL;
    *pattern = NULL;
    if (r->tool_choice != RLX_TOOL_CHOICE_AUTO || r->base->grammar || !has_grammar(info->format)) return 0;
    /* generic and Llama 3 JSON have no text marker: an anchored pattern over the output */
    bool json_start = info->format == RLX_TC_GENERIC || info->format == RLX_TC_LLAMA3;
    if (!json_start && !opener(info->format)) return 0;
    /* a tool whose parameters the grammar cannot honour leaves "auto"'s calls unconstrained (as
       OpenAI's calls are without "strict"); with "strict": true it is the 400 */
    int rc = tool_grammar(r, info, NULL, true, gbnf, e);
    if (rc && e->status == 400) { /* the tool at fault, and whether it asked for strict adherence */
        bool strict;
        rlx_api_error pe;
        int prc = params_check(r, "followed strictly", &strict, &pe);
        if (prc && pe.status == 400 && !strict) return 0;
        if (prc) *e = pe, rc = prc;
    }
    if (rc) return rc;
    if (!json_start) {
        *trigger = opener(info->format);
        return 0;
    }
    if (!(*pattern = auto_pattern(info, prompt))) {
        free(*gbnf);
        *gbnf = NULL;
        return rlx__tg_oom(e);
    }
    return 0;
}
