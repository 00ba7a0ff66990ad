/* toolcall_obj.c - the JSON call bodies of the tool-call parser (proto/toolcall.h): a call
 * object after a start marker or as the whole output (streamed from its name on, or read whole
 * when its keys come in another order), the members after its streamed arguments, and lists of
 * call objects element by element. The text modes, emission and the name-then-arguments bodies
 * are in toolcall.c. */
#include "proto/toolcall_p.h"

#include <stdlib.h>
#include <string.h>

/* One {"name", "arguments"|"parameters"} object (text s[0..n)) as a call; false when it is not one.
 * emit false: only checks. */
static bool call_object(rlx_tc_parser *p, const char *s, size_t n, bool need_args, bool emit)
{
    size_t a, b;
    cJSON *name = NULL;
    if (!rlx__tc_obj_field(s, n, "name", &a, &b) || !(name = cJSON_ParseWithLength(s + a, b - a))
        || !cJSON_IsString(name) || rlx__tc_set_name(p, name->valuestring, strlen(name->valuestring))) {
        cJSON_Delete(name);
        return false;
    }
    cJSON_Delete(name);
    bool args = rlx__tc_obj_field(s, n, "arguments", &a, &b) || rlx__tc_obj_field(s, n, "parameters", &a, &b);
    if (!args && need_args) return false;
    p->out.len = 0;
    int rc = 0;
    if (!args) rc = rlx__tc_buf_str(&p->out, "{}");
    else if (s[a] == '"') { /* arguments sent as a JSON string: its text is the arguments */
        cJSON *str = cJSON_ParseWithLength(s + a, b - a);
        rc = cJSON_IsString(str) ? rlx__tc_buf_minify(&p->out, str->valuestring, strlen(str->valuestring)) : -1;
        cJSON_Delete(str);
    } else if (b - a == 4 && !memcmp(s + a, "null", 4)) { /* no arguments, as llama.cpp reads it */
        rc = rlx__tc_buf_str(&p->out, "{}");
    } else rc = rlx__tc_buf_minify(&p->out, s + a, b - a);
    /* arguments are one JSON object (RFC 8259: no 01, 1., tru, NaN): else not a call */
    if (rc || !p->out.len || p->out.p[0] != '{' || !rlx__tc_json_strict(p->out.p, p->out.len)) return false;
    if (!emit) {
        p->name.len = 0;
        return true;
    }
    rlx__tc_begin(p);
    rlx__tc_text(p, 2, p->out.p, p->out.len, true);
    rlx__tc_end(p);
    return true;
}

/* Checks every element of a JSON array text is a call object (all or nothing), then reports them. */
static bool call_array(rlx_tc_parser *p, const char *s, size_t n)
{
    for (int pass = 0; pass < 2; pass++) {
        size_t i = 1;
        for (;;) {
            while (i < n && (rlx__tc_space(s[i]) || s[i] == ',')) i++;
            if (i >= n || s[i] == ']') break;
            size_t e = rlx__tc_value_end(s, n, i);
            if (!e || s[i] != '{') return false;
            if (!call_object(p, s + i, e - i, false, pass == 1) && pass == 0) return false;
            i = e;
        }
    }
    return true;
}

/* M_OBJ: a call object that opens {"name": "N", "arguments": { streams its arguments from
 * there (the name is known); true when it did. A head that is not a name is not a call. */
static bool obj_stream(rlx_tc_parser *p)
{
    size_t na, nb, args;
    int r = rlx__tc_obj_head(p->in.p + p->vstart, p->in.len - p->vstart, 6 * RLX__TC_NAME_MAX, &na, &nb, &args);
    if (r == -1) p->obj_whole = true;
    if (r != 1) return false;
    cJSON *name = cJSON_ParseWithLength(p->in.p + p->vstart + na, nb - na);
    if (!cJSON_IsString(name) || rlx__tc_set_name(p, name->valuestring, strlen(name->valuestring))) {
        cJSON_Delete(name); /* not a call: the whole value says how it falls back */
        p->obj_whole = true;
        return false;
    }
    cJSON_Delete(name);
    rlx__tc_begin(p);
    p->arr_calls += p->in_arr;
    memset(&p->js, 0, sizeof p->js);
    p->args.len = 0;
    p->pos = p->vstart + args;
    p->in_obj = true;
    p->mode = M_ARGS;
    return true;
}

/* M_OBJ_REST: the call object's members after its arguments (ignored, as a whole object's
 * are) up to its closing brace. The call was complete with its arguments: a brace the model
 * forgot before the format's closing tag, a byte no JSON has there (left as text) or an
 * output that ends first end the object where they are. */
bool rlx__tc_step_obj_rest(rlx_tc_parser *p)
{
    const char *tail = p->sp->tails[0];
    size_t i = p->pos;
    for (; i < p->in.len; i++) {
        const char b = p->in.p[i];
        if (p->js.depth == 1 && !p->js.in_str) {
            int t = tail ? rlx__tc_starts(p, i, tail) : 0;
            if (t == 1) break;
            /* a member follows a ',' and the arguments are followed by ',' or '}': anything
               else (text, the list's next call after a brace the model forgot) is no member */
            size_t j = i + 1;
            while (b == ',' && j < p->in.len && rlx__tc_space(p->in.p[j])) j++;
            if ((t == -1 || (b == ',' && j == p->in.len)) && !p->final) { /* decided by what comes: wait */
                bool progressed = i != p->pos;
                p->pos = i;
                return progressed;
            }
            if (p->rest_fresh && !rlx__tc_space(b) && b != ',' && b != '}') break;
            if (b == ',' && (j == p->in.len || p->in.p[j] != '"')) break;
            if (!rlx__tc_space(b)) p->rest_fresh = false;
        }
        rlx__jscan_feed(&p->js, (unsigned char)b);
        if (p->js.bad) break;
        if (p->js.done) { i++; break; }
    }
    bool ended = i < p->in.len || p->js.done || p->final;
    bool progressed = i != p->pos;
    p->pos = i;
    if (!ended) return progressed;
    p->mode = p->in_arr ? M_ARR : M_TAIL;
    p->arr_expect = false;
    p->tail_i = 0;
    return true;
}

/* The current array of calls is not one: its text is content when it reported no call yet (as
 * a whole array was), else the calls after the last one are broken. */
static bool arr_fail(rlx_tc_parser *p, const char *why)
{
    if (!p->arr_calls) {
        rlx__tc_fallback(p, p->raw + p->mlen);
        return true;
    }
    if (!p->n_broken++) snprintf(p->broken, sizeof p->broken, "tool call list after call %d %s", p->n_calls - 1, why);
    if (p->final && !strcmp(why, "was cut off")) p->pos = p->in.len; /* a call cut short is no content */
    p->in_arr = false;
    p->mode = M_TEXT;
    return true;
}

/* M_ARR: between the elements of an array of calls (Mistral, Granite, Apriel, Firefunction):
 * each element is a call object, streamed as one after a marker is. A closing bracket the
 * model forgot (before the format's closing tag, or at the end) ends the list where it stops. */
bool rlx__tc_step_arr(rlx_tc_parser *p)
{
    size_t i = rlx__tc_skip_ws(p, p->pos);
    if (i == p->in.len) {
        bool moved = i != p->pos;
        p->pos = i;
        if (!p->final) return moved;
        if (p->arr_expect && !p->arr_calls) return arr_fail(p, "was cut off");
    } else if (p->arr_expect) {
        if (p->in.p[i] != '{') {
            p->pos = i; /* the whitespace before it read, as a stream that waited here has read it */
            return arr_fail(p, "holds a value that is not a call");
        }
        p->pos = p->vstart = p->scan = i;
        memset(&p->js, 0, sizeof p->js);
        p->obj_whole = false;
        p->mode = M_OBJ;
        return true;
    } else if (p->in.p[i] == ',') {
        p->pos = i + 1;
        p->arr_expect = true;
        return true;
    } else {
        p->pos = i + (p->in.p[i] == ']');
    }
    p->in_arr = false;
    p->mode = M_TAIL;
    p->tail_i = 0;
    return true;
}

/* M_OBJ / M_TENT: scan the JSON value, then read it as calls. */
bool rlx__tc_step_obj(rlx_tc_parser *p)
{
    /* a call object after a marker, or Llama 3's whole-output call (not the generic format's
       wrapper objects) */
    const bool streams = p->mode == M_OBJ || p->sp->format == RLX_TC_LLAMA3;
    if (streams && !p->obj_whole && p->in.p[p->vstart] == '{' && obj_stream(p)) return true;
    size_t i = p->scan;
    for (; i < p->in.len && !p->js.done && !p->js.bad; i++)
        if (rlx__jscan_feed(&p->js, (unsigned char)p->in.p[i]) == RLX__JS_END_BEFORE) break;
    bool progressed = i != p->scan;
    p->scan = i;
    bool tent = p->mode == M_TENT;
    if (p->in_arr && (p->js.bad || (!p->js.done && p->final)))
        return arr_fail(p, p->js.bad ? "holds a value that is not a call" : "was cut off");
    if (p->js.bad) {
        rlx__tc_fallback(p, tent ? i : p->raw + p->mlen);
        return true;
    }
    if (!p->js.done) {
        if (!p->final) return progressed;
        rlx__tc_fallback(p, tent ? p->in.len : p->raw + p->mlen);
        return true;
    }
    const char *s = p->in.p + p->vstart;
    size_t n = i - p->vstart;
    cJSON *v = cJSON_ParseWithLength(s, n);
    bool ok = v != NULL;
    if (p->in_arr) { /* an element whose keys come in another order: whole */
        ok = ok && call_object(p, s, n, false, true);
        cJSON_Delete(v);
        if (!ok) return arr_fail(p, "holds a value that is not a call");
        p->arr_calls++;
        p->pos = i;
        p->mode = M_ARR;
        p->arr_expect = false;
        return true;
    }
    if (ok && tent && p->sp->format == RLX_TC_GENERIC) {
        size_t a, b;
        const cJSON *resp = cJSON_GetObjectItemCaseSensitive(v, "response");
        if (rlx__tc_obj_field(s, n, "tool_calls", &a, &b) && s[a] == '[') ok = call_array(p, s + a, b - a);
        else if (rlx__tc_obj_field(s, n, "tool_call", &a, &b) && s[a] == '{') ok = call_object(p, s + a, b - a, false, true);
        else if (cJSON_IsString(resp)) rlx__tc_text(p, 0, resp->valuestring, strlen(resp->valuestring), false);
        else ok = false;
    } else if (ok && cJSON_IsArray(v)) {
        ok = cJSON_GetArraySize(v) > 0 && call_array(p, s, n);
    } else if (ok) {
        ok = call_object(p, s, n, tent, true);
    }
    cJSON_Delete(v);
    if (!ok) {
        rlx__tc_fallback(p, tent ? i : p->raw + p->mlen);
        return true;
    }
    p->pos = i;
    p->mode = M_TAIL;
    p->tail_i = 0;
    return true;
}

/* M_BODY: after a HYBRID or PYTAG start marker, what follows decides. */
bool rlx__tc_step_body(rlx_tc_parser *p)
{
    size_t i = rlx__tc_skip_ws(p, p->pos);
    if (i == p->in.len) {
        if (p->final) rlx__tc_fallback(p, p->raw + p->mlen);
        return p->final;
    }
    char c = p->in.p[i];
    if (c == '[') {
        p->pos = i + 1;
        p->in_arr = p->arr_expect = true;
        p->arr_calls = 0;
        p->mode = M_ARR;
    } else if (c == '{') {
        p->vstart = p->scan = i;
        memset(&p->js, 0, sizeof p->js);
        p->obj_whole = false;
        p->mode = M_OBJ;
    } else if (p->st->body == RLX__TC_PYTAG) {
        p->pos = p->scan = i;
        p->mode = M_PY;
    } else if (p->name_end) {
        p->pos = i;
        p->mode = M_NAME;
    } else {
        rlx__tc_fallback(p, p->raw + p->mlen);
    }
    return true;
}
