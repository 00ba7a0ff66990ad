/* toolcall_modes.c - the parser modes that are not JSON bodies (proto/toolcall_p.h): the
 * Qwen3-Coder XML call, python code after <|python_tag|>, and gpt-oss harmony headers. */
#include "proto/toolcall_p.h"

#include <string.h>

/* The target of a local "$ref" into the parameters' $defs / definitions, or NULL. */
static const cJSON *local_target(const cJSON *params, const cJSON *ref)
{
    if (!cJSON_IsString(ref)) return NULL;
    const char *r = ref->valuestring;
    const char *key = !strncmp(r, "#/$defs/", 8) ? "$defs" : !strncmp(r, "#/definitions/", 14) ? "definitions" : NULL;
    if (!key) return NULL;
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(params, key), strchr(r + 2, '/') + 1);
}

static bool is_text_at(const cJSON *schema, const cJSON *params, int depth)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(schema, "type"), *it;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(schema, "$ref");
    if (ref) { /* what it points at decides; one that cannot be followed is JSON */
        const cJSON *to = depth < 8 ? local_target(params, ref) : NULL;
        return to && is_text_at(to, params, depth + 1);
    }
    if (!ty) return true; /* no type: kept as the text it is */
    if (cJSON_IsString(ty)) return !strcmp(ty->valuestring, "string");
    cJSON_ArrayForEach(it, ty) if (cJSON_IsString(it) && !strcmp(it->valuestring, "string")) return true;
    return false;
}

bool rlx__tc_param_is_text(const cJSON *schema, const cJSON *params) { return is_text_at(schema, params, 0); }

/* The schema the tool gives parameter pname of the current function (and the tool's
 * parameters, into *params), or NULL. */
static const cJSON *param_schema(const rlx_tc_parser *p, const char *pname, const cJSON **params_out)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, p->tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn ? fn : t, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, p->name.p ? p->name.p : "")) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn ? fn : t, "parameters");
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
        *params_out = params;
        return cJSON_GetObjectItemCaseSensitive(props, pname);
    }
    return NULL;
}

/* Appends "pname":value to p->out: the value as a JSON string when the schema says string (or
 * gives no type), else parsed as JSON (compacted), falling back to a string. */
static int add_param(rlx_tc_parser *p, const char *v, size_t n)
{
    if (n && v[0] == '\n') v++, n--;
    if (n && v[n - 1] == '\n') n--;
    if (rlx__tc_buf_str(&p->out, p->n_params ? "," : "{")
        || rlx__tc_buf_json_str(&p->out, p->pname.p, p->pname.len) || rlx__tc_buf_str(&p->out, ":"))
        return RLX_ENOMEM;
    const cJSON *params = NULL, *schema = param_schema(p, p->pname.p, &params);
    if (schema && !rlx__tc_param_is_text(schema, params)) {
        size_t a = 0, b = n;
        while (a < b && rlx__tc_space(v[a])) a++;
        while (b > a && rlx__tc_space(v[b - 1])) b--;
        /* strict JSON, as a client will parse it (01 or 1. stay text) */
        if (b > a && rlx__tc_json_strict(v + a, b - a)) return rlx__tc_buf_minify(&p->out, v + a, b - a);
    }
    return rlx__tc_buf_json_str(&p->out, v, n);
}

static bool step_xml_fn(rlx_tc_parser *p)
{
    size_t i = rlx__tc_skip_ws(p, p->pos);
    int r = i < p->in.len ? rlx__tc_starts(p, i, "<function=") : -1;
    if (r == 0) { rlx__tc_fallback(p, p->raw + p->mlen); return true; }
    const char *gt = r == 1 ? memchr(p->in.p + i + 10, '>', p->in.len - i - 10) : NULL;
    /* the name is at most 300 bytes whatever the split points */
    if (gt ? gt - (p->in.p + i + 10) > 300 : p->final || p->in.len - i > 311) {
        rlx__tc_fallback(p, p->raw + p->mlen);
        return true;
    }
    if (!gt) return false;
    if (rlx__tc_set_name(p, p->in.p + i + 10, (size_t)(gt - (p->in.p + i + 10)))) {
        rlx__tc_fallback(p, p->raw + p->mlen);
        return true;
    }
    rlx__tc_begin(p);
    p->n_params = 0;
    p->pos = p->scan = (size_t)(gt - p->in.p) + 1;
    p->mode = M_XML_PARAMS;
    return true;
}

static bool step_xml_params(rlx_tc_parser *p)
{
    size_t i = rlx__tc_skip_ws(p, p->pos);
    int fp = i < p->in.len ? rlx__tc_starts(p, i, "<parameter=") : -1;
    int fe = i < p->in.len ? rlx__tc_starts(p, i, "</function>") : -1;
    if (fe == 1) {
        p->out.len = 0;
        if (rlx__tc_buf_str(&p->out, p->n_params ? "}" : "{}")) p->oom = true;
        rlx__tc_text(p, 2, p->out.p, p->out.len, true);
        rlx__tc_end(p);
        p->pos = i + 11;
        p->mode = M_TAIL;
        p->tail_i = 0;
        return true;
    }
    if (fp == 0 && fe == 0) {
        p->pos = i;
        rlx__tc_broken(p, "holds text that is not a <parameter=...>");
        return true;
    }
    const char *gt = fp == 1 ? memchr(p->in.p + i + 11, '>', p->in.len - i - 11) : NULL;
    /* a long value arrives in many pieces: search only what is new (scan), with an overlap */
    const char *from = gt ? gt + 1 : NULL;
    if (gt && p->scan > (size_t)(from - p->in.p) + 11) from = p->in.p + p->scan - 11;
    const char *close = NULL;
    while (gt && (close = rlx__tc_find(from, (size_t)(p->in.p + p->in.len - from), "</parameter>"))) {
        /* it ends the value only before the next <parameter= or </function> (as llama.cpp reads
           it): code a model writes may hold the text "</parameter>" itself */
        size_t j = rlx__tc_skip_ws(p, (size_t)(close - p->in.p) + 12);
        int np = j < p->in.len ? rlx__tc_starts(p, j, "<parameter=") : -1;
        int nf = j < p->in.len ? rlx__tc_starts(p, j, "</function>") : -1;
        if (np == 1 || nf == 1 || (p->final && (np == -1 || nf == -1))) break;
        if (np == -1 || nf == -1) { /* what follows has not arrived yet: look again from here */
            p->scan = (size_t)(close - p->in.p) + 11;
            return false;
        }
        from = close + 1;
    }
    if (!close) {
        if (gt) p->scan = p->in.len;
        if (p->final) {
            p->pos = p->in.len; /* the call's text is not content */
            rlx__tc_broken(p, "was cut off");
        }
        return p->final;
    }
    p->pname.len = 0;
    if (rlx__tc_buf_add(&p->pname, p->in.p + i + 11, (size_t)(gt - (p->in.p + i + 11)))) { p->oom = true; return false; }
    p->out.len = 0;
    if (add_param(p, gt + 1, (size_t)(close - gt - 1))) { p->oom = true; return false; }
    p->n_params++;
    rlx__tc_text(p, 2, p->out.p, p->out.len, false);
    p->pos = p->scan = (size_t)(close - p->in.p) + 12;
    return true;
}

/* <|python_tag|>code: the call "python" with {"code": code}, ended by the format's code_end. */
static bool step_py(rlx_tc_parser *p)
{
    const char *s = p->in.p + p->pos, *end = NULL;
    size_t n = p->in.len - p->pos, hold = 0;
    size_t from = p->scan > p->pos + 16 ? p->scan - 16 - p->pos : 0; /* only what is new, with an overlap */
    p->scan = p->in.len;
    for (int k = 0; k < 3 && p->sp->code_end[k]; k++) {
        const char *at = rlx__tc_find(s + from, n - from, p->sp->code_end[k]);
        if (at && (!end || at < end)) end = at;
        size_t h = rlx__tc_partial(s, n, p->sp->code_end[k]);
        if (h > hold) hold = h;
    }
    if (!end && !p->final) return false;
    size_t len = end ? (size_t)(end - s) : n - hold;
    while (len && rlx__tc_space(s[len - 1])) len--;
    p->out.len = 0;
    if (rlx__tc_buf_str(&p->out, "{\"code\":") || rlx__tc_buf_json_str(&p->out, s, len)
        || rlx__tc_buf_str(&p->out, "}") || rlx__tc_set_name(p, "python", 6)) {
        p->oom = true;
        return false;
    }
    rlx__tc_begin(p);
    rlx__tc_text(p, 2, p->out.p, p->out.len, true);
    rlx__tc_end(p);
    p->pos = end ? (size_t)(end - p->in.p) : p->in.len;
    p->mode = M_TEXT;
    return true;
}

/* gpt-oss: [<|start|>]assistant<|channel|>CHANNEL [to=functions.NAME] [<|constrain|>json]<|message|> */
static bool step_hhead(rlx_tc_parser *p)
{
    const char *s = p->in.p + p->pos;
    size_t n = p->in.len - p->pos;
    const char *at = rlx__tc_find(s, n, "<|message|>");
    /* a header is at most 512 bytes whatever the split points */
    if (at ? at - s > 512 : p->final || n > 512 + 11) {
        rlx__tc_fallback(p, p->raw + p->mlen);
        return true;
    }
    if (!at) return false;
    size_t h = (size_t)(at - s);
    const char *to = rlx__tc_find(s, h, "to=functions.");
    p->pos += h + 11;
    if (to) {
        const char *nm = to + 13, *e = nm;
        while (e < at && *e != ' ' && *e != '<' && !rlx__tc_space(*e)) e++;
        if (rlx__tc_set_name(p, nm, (size_t)(e - nm))) {
            rlx__tc_fallback(p, p->raw + p->mlen);
            return true;
        }
        p->mode = M_ARGS_PRE;
    } else if (rlx__tc_find(s, h, "analysis")) {
        p->mode = M_REASON;
        p->reason_ws = true;
        /* a built-in tool's call (to=python, to=browser.search) in the analysis channel ends at
           <|call|>, which must not show in the reasoning */
        p->rclose = rlx__tc_find(s, h, "to=") ? "<|call|>" : "<|end|>";
    } else {
        p->mode = M_TEXT;
    }
    return true;
}

bool rlx__tc_step_mode(rlx_tc_parser *p)
{
    switch (p->mode) {
    case M_XML_FN: return step_xml_fn(p);
    case M_XML_PARAMS: return step_xml_params(p);
    case M_PY: return step_py(p);
    case M_HHEAD: return step_hhead(p);
    default: return false;
    }
}
