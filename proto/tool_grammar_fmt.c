/* tool_grammar_fmt.c - forcing grammars for the formats that write the function's name outside
 * JSON (proto/tool_grammar_int.h), each exactly as its parser in proto/toolcall*.c reads it:
 *   Functionary v3.1  <function=NAME>{args}</function>
 *   Functionary v3.2  >>>NAME\n{args}            (the prompt may already end with ">>>")
 *   Qwen3-Coder XML   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...
 *                     </function>\n</tool_call>
 * Each tool gets its own rules (its parameters compiled apart, rule names prefixed per tool).
 * XML values are typed as the parser types them (toolcall_modes.c): a parameter whose schema
 * says string (or gives no type) is raw text, anything else a JSON value of its schema. Pure
 * functions, any thread. */
#include "proto/tool_grammar_int.h"
#include "engine/grammar.h"

#include <stdio.h>
#include <string.h>

#define DS_CALL_BEGIN "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9c" "tool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9c" "tool\xe2\x96\x81" "sep\xef\xbd\x9c>"

static int bad(rlx_api_error *e, const char *tool, const char *param, const char *why)
{
    return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools",
                          "Tool '%s' parameter '%s' cannot be forced (tool_choice) in the qwen3-coder format: %s",
                          tool, param, why);
}

/* As toolcall_modes.c reads it: a value is raw text when the schema says string or has no type. */
static bool annotation(const char *k)
{
    static const char *const ok[] = {"type", "description", "title", "default", "examples", "$comment",
                                     "deprecated", "readOnly", "writeOnly", "$schema", "$id"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (!strcmp(k, ok[i])) return true;
    return false;
}

/* The raw-text value of an XML parameter: its enum / const as literals, a length range, or any
 * text without "</parameter>". Other keywords cannot be honoured on raw text: a 400. */
static int raw_value(rlx__tg *g, const cJSON *schema, const char *tool, const char *pname, bool *need_raw,
                     rlx_api_error *e)
{
    const cJSON *k, *en = NULL;
    double minl = 0, maxl = -1;
    char why[160];
    cJSON_ArrayForEach(k, schema) {
        if (annotation(k->string)) continue;
        if (!strcmp(k->string, "enum") && cJSON_IsArray(k) && cJSON_GetArraySize(k) > 0) en = k;
        else if (!strcmp(k->string, "const")) en = k;
        else if (!strcmp(k->string, "minLength") && cJSON_IsNumber(k) && k->valuedouble >= 0) minl = k->valuedouble;
        else if (!strcmp(k->string, "maxLength") && cJSON_IsNumber(k) && k->valuedouble >= 0) maxl = k->valuedouble;
        else {
            snprintf(why, sizeof why, "its value is raw text and keyword '%s' cannot be honoured on it", k->string);
            return bad(e, tool, pname, why);
        }
    }
    if (en) {
        const cJSON *v;
        int n = 0;
        rlx__tg_printf(g, "(");
        if (cJSON_IsArray(en)) {
            cJSON_ArrayForEach(v, en) {
                if (!cJSON_IsString(v)) return bad(e, tool, pname, "its value is raw text and its enum has a value that is not a string");
                rlx__tg_printf(g, "%s ", n++ ? " |" : "");
                rlx__tg_lit(g, v->valuestring);
            }
        } else {
            if (!cJSON_IsString(en)) return bad(e, tool, pname, "its value is raw text and its const is not a string");
            rlx__tg_lit(g, en->valuestring);
        }
        rlx__tg_printf(g, ")");
        return 0;
    }
    if (minl > 0 || maxl >= 0) {
        if (maxl > RLX_GRAMMAR_MAX_REPEAT || minl > RLX_GRAMMAR_MAX_REPEAT || (maxl >= 0 && maxl < minl))
            return bad(e, tool, pname, "its minLength / maxLength are out of range");
        /* no '<' at all: a subset that cannot close the parameter early */
        if (maxl >= 0) rlx__tg_printf(g, "[^<]{%d,%d}", (int)minl, (int)maxl);
        else rlx__tg_printf(g, "[^<]{%d,}", (int)minl);
        return 0;
    }
    *need_raw = true;
    rlx__tg_printf(g, "rlx-tc-raw");
    return 0;
}

/* Qwen3-Coder: rule rlx-tc-c<i> for tool fn, its parameters in the schema's order (required
 * ones always, others optional), no others. */
static int xml_call(rlx__tg *g, const cJSON *fn, int i, bool *need_raw, rlx_api_error *e)
{
    const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters"), *k;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    char why[160];
    cJSON_ArrayForEach(k, params) {
        if (annotation(k->string) || !strcmp(k->string, "properties") || !strcmp(k->string, "required") ||
            !strcmp(k->string, "additionalProperties") || !strcmp(k->string, "$defs") || !strcmp(k->string, "definitions"))
            continue;
        snprintf(why, sizeof why, "keyword '%s' of its parameters cannot be honoured", k->string);
        return bad(e, name, "", why);
    }
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(params, "type");
    if (ty && !(cJSON_IsString(ty) && !strcmp(ty->valuestring, "object")))
        return bad(e, name, "", "its parameters are not of type object");
    if (props && !cJSON_IsObject(props)) return bad(e, name, "", "'properties' is not an object");
    /* values first (their own rules), then the call */
    int j = 0;
    cJSON_ArrayForEach(k, props) {
        if (!rlx__tc_param_is_text(k, params)) {
            char prefix[48];
            snprintf(prefix, sizeof prefix, "rlx-tc-a%d-p%d", i, j);
            /* a value with local $refs means the parameters' root: the parameters go along at
             * $defs/rlx-params, the refs rebased there */
            cJSON *own = NULL;
            if (rlx__tg_has_local_ref(params)) {
                own = cJSON_Duplicate(k, true);
                if (!own || !rlx__tg_rebase_refs(own, "#/$defs/rlx-params") || !rlx__tg_defs_put(own, "rlx-params", params)) {
                    cJSON_Delete(own);
                    return rlx__tg_oom(e);
                }
            }
            int rc = rlx__tg_schema(g, own ? own : k, prefix, e);
            cJSON_Delete(own);
            if (rc) return rc;
        }
        j++;
    }
    rlx__tg_printf(g, "rlx-tc-c%d ::= \"<tool_call>\\n<function=\" ", i);
    rlx__tg_lit(g, name);
    rlx__tg_printf(g, " \">\\n\"");
    j = 0;
    cJSON_ArrayForEach(k, props) {
        bool required = false;
        const cJSON *r;
        cJSON_ArrayForEach(r, req) if (cJSON_IsString(r) && !strcmp(r->valuestring, k->string)) required = true;
        rlx__tg_printf(g, " ( \"<parameter=\" ");
        rlx__tg_lit(g, k->string);
        rlx__tg_printf(g, " \">\\n\" ");
        if (rlx__tc_param_is_text(k, params)) {
            int rc = raw_value(g, k, name, k->string, need_raw, e);
            if (rc) return rc;
        } else {
            rlx__tg_printf(g, "rlx-tc-a%d-p%d-root", i, j);
        }
        rlx__tg_printf(g, " \"\\n</parameter>\\n\" )%s", required ? "" : "?");
        j++;
    }
    rlx__tg_printf(g, " \"</function>\\n</tool_call>\"\n");
    return 0;
}

int rlx__tg_named_calls(const rlx_api_request *r, const rlx_tc_info *info, rlx__tg *g, rlx_api_error *e)
{
    const cJSON *one = r->tool_choice == RLX_TOOL_CHOICE_NAMED ? rlx_api_find_tool(r, r->tool_name) : NULL;
    int n = 0;
    bool need_raw = false;
    for (const cJSON *it = one ? NULL : (r->tools ? r->tools->child : NULL);; it = it->next) {
        const cJSON *fn = one ? one : it ? cJSON_GetObjectItemCaseSensitive(it, "function") : NULL;
        if (!fn) break;
        const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        int rc = 0;
        if (info->format == RLX_TC_QWEN3_CODER) {
            rc = xml_call(g, fn, n, &need_raw, e);
        } else {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "rlx-tc-a%d", n);
            cJSON *params = rlx__tg_params(fn);
            if (!params) return rlx__tg_oom(e);
            rc = rlx__tg_schema(g, params, prefix, e);
            cJSON_Delete(params);
            if (rc) {
            } else if (info->format == RLX_TC_MISTRAL) { /* [TOOL_CALLS]NAME[ARGS]{args} */
                rlx__tg_printf(g, "rlx-tc-c%d ::= \"[TOOL_CALLS]\" ", n);
                rlx__tg_lit(g, name);
                rlx__tg_printf(g, " \"[ARGS]\" rlx-tc-a%d-root\n", n);
            } else if (info->format == RLX_TC_DEEPSEEK) { /* V3.1: NAME<sep>{}, R1: function<sep>NAME\n```json\n{}\n``` */
                rlx__tg_printf(g, "rlx-tc-c%d ::= ", n);
                rlx__tg_lit(g, DS_CALL_BEGIN);
                rlx__tg_printf(g, " ( ");
                rlx__tg_lit(g, name);
                rlx__tg_printf(g, " ");
                rlx__tg_lit(g, DS_SEP);
                rlx__tg_printf(g, " rlx-tc-a%d-root | \"function\" ", n);
                rlx__tg_lit(g, DS_SEP);
                rlx__tg_printf(g, " ");
                rlx__tg_lit(g, name);
                rlx__tg_printf(g, " \"\\n```json\\n\" rlx-tc-a%d-root \"\\n```\" ) ", n);
                rlx__tg_lit(g, DS_CALL_END);
                rlx__tg_printf(g, "\n");
            } else if (info->format == RLX_TC_KIMI_K2) { /* <|tool_call_begin|>functions.NAME:i<|tool_call_argument_begin|>{} */
                rlx__tg_printf(g, "rlx-tc-c%d ::= \"<|tool_call_begin|>functions.\" ", n);
                rlx__tg_lit(g, name);
                rlx__tg_printf(g, " \":\" [0-9] \"<|tool_call_argument_begin|>\" rlx-tc-a%d-root \"<|tool_call_end|>\"\n", n);
            } else if (info->format == RLX_TC_GPT_OSS) { /* harmony: the commentary channel's header */
                rlx__tg_printf(g, "rlx-tc-b%d ::= \" to=functions.\" ", n);
                rlx__tg_lit(g, name);
                rlx__tg_printf(g, " \" <|constrain|>json<|message|>\" rlx-tc-a%d-root\n"
                                  "rlx-tc-c%d ::= \"<|start|>assistant\"? \"<|channel|>commentary\" rlx-tc-b%d\n", n, n, n);
            } else if (info->format == RLX_TC_FUNCTIONARY_V31) {
                rlx__tg_printf(g, "rlx-tc-c%d ::= \"<function=\" ", n);
                rlx__tg_lit(g, name);
                rlx__tg_printf(g, " \">\" rlx-tc-a%d-root \"</function>\"\n", n);
            } else { /* v3.2 */
                rlx__tg_printf(g, "rlx-tc-b%d ::= ", n);
                rlx__tg_lit(g, name);
                rlx__tg_printf(g, " \"\\n\" rlx-tc-a%d-root\nrlx-tc-c%d ::= \">>>\" rlx-tc-b%d\n", n, n, n);
            }
        }
        if (rc) return rc;
        n++;
        if (one) break;
    }
    if (!n) return rlx_api_errorf(e, 400, RLX_API_ERR_INVALID, "tools", "There is no tool to call.");
    rlx__tg_printf(g, "rlx-tc-call ::=");
    for (int i = 0; i < n; i++) rlx__tg_printf(g, "%s rlx-tc-c%d", i ? " |" : "", i);
    rlx__tg_printf(g, "\n");
    if (info->format == RLX_TC_FUNCTIONARY_V32 || info->format == RLX_TC_GPT_OSS) {
        rlx__tg_printf(g, "rlx-tc-call0 ::=");
        for (int i = 0; i < n; i++) rlx__tg_printf(g, "%s rlx-tc-b%d", i ? " |" : "", i);
        rlx__tg_printf(g, "\n");
    }
    if (need_raw) rlx__tg_not_containing(g, "rlx-tc-raw", "</parameter>");
    return g->oom ? rlx__tg_oom(e) : 0;
}
