/* tools.c - the tool fields of a chat request: "tools" (each {type:"function", function:{name,
 * description?, parameters?}}), "tool_choice" ("none" | "auto" | "required" |
 * {"type":"function","function":{"name":N}}) and "parallel_tool_calls" (bool, default true).
 * Bad input is a 400 naming the field; nothing is kept from a refused body. And the other way:
 * a choice's parsed output (rlx_api_tool_out) collected from the tool-call parser's events. */
#include "proto/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#define MAX_NAME 256 /* bytes of a function name (OpenAI allows 64; be lenient, not unbounded) */

static const cJSON *field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNull(v) ? NULL : v;
}

/* One entry of tools: 400 naming "tools" and the entry at fault. */
static int check_tool(const cJSON *t, int i, rlx_api_error *e)
{
    const cJSON *type = field(t, "type"), *fn = field(t, "function");
    if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools",
                              "tools[%d] must be an object with \"type\": \"function\".", i);
    if (!cJSON_IsObject(fn))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools", "tools[%d].function must be an object.", i);
    const cJSON *name = field(fn, "name"), *desc = field(fn, "description"), *params = field(fn, "parameters");
    if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > MAX_NAME)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools",
                              "tools[%d].function.name must be a non-empty string of at most %d bytes.", i, MAX_NAME);
    /* the formats write the name between their own delimiters (quotes, '<', '>', '=', spaces):
       a name holding one was forced into a call the parser could not read back */
    for (const unsigned char *c = (const unsigned char *)name->valuestring; *c; c++)
        if (*c < 0x80 && !isalnum(*c) && !strchr("_-.:/", *c)) {
            char what[24];
            if (*c < 0x20 || *c == 0x7f) snprintf(what, sizeof what, "control characters");
            else if (*c == ' ') snprintf(what, sizeof what, "spaces");
            else snprintf(what, sizeof what, "'%c'", *c);
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools",
                                  "tools[%d].function.name may hold letters, digits, '_', '-', '.', ':' and '/' (OpenAI's "
                                  "are letters, digits, '_' and '-'), not %s.", i, what);
        }
    const cJSON *strict = field(fn, "strict");
    if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools", "tools[%d].function.strict must be a boolean.", i);
    if (desc && !cJSON_IsString(desc))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools", "tools[%d].function.description must be a string.", i);
    if (params && !cJSON_IsObject(params))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools",
                              "tools[%d].function.parameters must be a JSON Schema object.", i);
    /* a call's arguments are a JSON object: a schema of another type could never be one (OpenAI
       refuses it the same way); a schema without "type" is taken as an object's (rlx__tg_params) */
    const cJSON *ty = field(params, "type");
    bool object = !ty || (cJSON_IsString(ty) && !strcmp(ty->valuestring, "object")) ||
                  (cJSON_IsArray(ty) && cJSON_GetArraySize(ty) == 1 && cJSON_IsString(ty->child) &&
                   !strcmp(ty->child->valuestring, "object"));
    if (!object) {
        char *got = cJSON_PrintUnformatted(ty);
        int rc = rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools",
                                "tools[%d].function.parameters must be a JSON Schema of \"type\": \"object\" (a call's "
                                "arguments are an object), got \"type\": %.64s.", i, got ? got : "?");
        free(got);
        return rc;
    }
    return 0;
}

const cJSON *rlx_api_find_tool(const rlx_api_request *r, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, r->tools) {
        const cJSON *fn = field(t, "function"), *n = field(fn, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return fn;
    }
    return NULL;
}

static int parse_choice(const cJSON *tc, rlx_api_request *r, rlx_api_error *e)
{
    bool have_tools = cJSON_GetArraySize(r->tools) > 0;
    r->tool_choice = have_tools ? RLX_TOOL_CHOICE_AUTO : RLX_TOOL_CHOICE_NONE;
    if (!tc) return 0;
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        if (!strcmp(s, "none")) r->tool_choice = RLX_TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto")) r->tool_choice = RLX_TOOL_CHOICE_AUTO;
        else if (!strcmp(s, "required")) r->tool_choice = RLX_TOOL_CHOICE_REQUIRED;
        else
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tool_choice",
                                  "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                  "{\"type\": \"function\", \"function\": {\"name\": ...}}, not '%.64s'.", s);
    } else {
        const cJSON *type = field(tc, "type"), *fn = field(tc, "function"), *name = field(fn, "name");
        if (!cJSON_IsObject(tc) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsString(name))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tool_choice",
                                  "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                  "{\"type\": \"function\", \"function\": {\"name\": ...}}.");
        if (have_tools && !rlx_api_find_tool(r, name->valuestring))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tool_choice",
                                  "'tool_choice' names the function '%.256s', which is not in 'tools'.", name->valuestring);
        r->tool_choice = RLX_TOOL_CHOICE_NAMED;
        if (!(r->tool_name = strdup(name->valuestring)))
            return rlx_api_errorf(e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
    }
    if (!have_tools && r->tool_choice != RLX_TOOL_CHOICE_NONE)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tool_choice",
                              "'tool_choice' other than \"none\" needs a non-empty 'tools'.");
    if ((r->tool_choice == RLX_TOOL_CHOICE_REQUIRED || r->tool_choice == RLX_TOOL_CHOICE_NAMED) && r->base->grammar)
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tool_choice",
                              "'tool_choice' forcing a call cannot be combined with 'grammar', 'json_schema' or "
                              "'response_format'.");
    return 0;
}

int rlx_api_parse_tools(cJSON *root, rlx_api_request *r, rlx_api_error *e)
{
    const cJSON *tools = field(root, "tools"), *t;
    if (tools) {
        if (!cJSON_IsArray(tools)) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools", "'tools' must be an array.");
        int i = 0, rc;
        cJSON_ArrayForEach(t, tools) if ((rc = check_tool(t, i++, e))) return rc;
        r->tools = cJSON_DetachItemFromObjectCaseSensitive(root, "tools");
    }
    r->parallel_tool_calls = true;
    const cJSON *p = field(root, "parallel_tool_calls");
    if (p && !cJSON_IsBool(p))
        return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean.");
    if (p) r->parallel_tool_calls = cJSON_IsTrue(p);
    /* llama-server's reasoning_format: "none" leaves the reasoning in the content */
    const cJSON *rf = field(root, "reasoning_format");
    if (rf && !cJSON_IsNull(rf)) {
        if (!cJSON_IsString(rf) || (strcmp(rf->valuestring, "none") && strcmp(rf->valuestring, "auto") &&
                                    strcmp(rf->valuestring, "deepseek")))
            return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "reasoning_format",
                                  "'reasoning_format' must be \"auto\", \"deepseek\" or \"none\".");
        r->reasoning_raw = !strcmp(rf->valuestring, "none");
    }
    return parse_choice(field(root, "tool_choice"), r, e);
}

/* ---- a choice's parsed output --------------------------------------------------------------- */

static int append(char **b, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 64;
        while (nc < *len + n + 1) nc *= 2;
        char *nb = realloc(*b, nc);
        if (!nb) return RLX_ENOMEM;
        *b = nb;
        *cap = nc;
    }
    if (n) memcpy(*b + *len, s, n);
    *len += n;
    (*b)[*len] = 0;
    return 0;
}

int rlx_api_tool_out_add(rlx_api_tool_out *o, const rlx_tc_event *ev)
{
    switch (ev->kind) {
    case RLX_TC_CONTENT: return append(&o->content, &o->content_len, &o->content_cap, ev->text, ev->len);
    case RLX_TC_REASONING: return append(&o->reasoning, &o->reasoning_len, &o->reasoning_cap, ev->text, ev->len);
    case RLX_TC_CALL_BEGIN: {
        if (o->n_calls == o->cap_calls) {
            size_t nc = o->cap_calls ? o->cap_calls * 2 : 4;
            rlx_api_tool_call *np = realloc(o->calls, nc * sizeof *np);
            if (!np) return RLX_ENOMEM;
            o->calls = np;
            o->cap_calls = nc;
        }
        rlx_api_tool_call *c = &o->calls[o->n_calls];
        memset(c, 0, sizeof *c);
        snprintf(c->id, sizeof c->id, "%s", ev->id ? ev->id : "");
        if (!(c->name = strdup(ev->name ? ev->name : ""))) return RLX_ENOMEM;
        o->n_calls++;
        return append(&c->args, &c->args_len, &c->args_cap, "", 0);
    }
    case RLX_TC_CALL_ARGS: {
        if (!o->n_calls) return 0;
        rlx_api_tool_call *c = &o->calls[o->n_calls - 1];
        return append(&c->args, &c->args_len, &c->args_cap, ev->text, ev->len);
    }
    case RLX_TC_CALL_END: return 0;
    }
    return 0;
}

void rlx_api_tool_out_free(rlx_api_tool_out *o)
{
    free(o->content);
    free(o->reasoning);
    for (size_t i = 0; i < o->n_calls; i++) {
        free(o->calls[i].name);
        free(o->calls[i].args);
    }
    free(o->calls);
    memset(o, 0, sizeof *o);
}
