/* format.c - engine results -> OpenAI JSON objects, SSE chunks and native JSON-lines.
 * Built with cJSON and printed unformatted; every function returns a malloc'ed string.
 *
 * Out of memory: a formatter returns NULL rather than an object with a part missing. Every
 * allocation cJSON makes goes through cJSON_malloc (hooked below), which records a failure
 * in a thread-local flag each public function clears first and print_free checks last;
 * add/push free an item cJSON could not attach. */
#include "proto/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local bool t_oom;

static void *hook_malloc(size_t n)
{
    void *p = malloc(n);
    if (!p) t_oom = true;
    return p;
}

/* Before main, so before any thread uses cJSON; the hooks still allocate with malloc/free, so
 * trees made before or elsewhere (models/json.c) free the same way. */
__attribute__((constructor)) static void format_hooks(void)
{
    cJSON_Hooks h = {.malloc_fn = hook_malloc, .free_fn = free};
    cJSON_InitHooks(&h);
}

static char *print_free(cJSON *o, const char *prefix, const char *suffix);

static void add(cJSON *o, const char *name, cJSON *v)
{
    if (!v || !cJSON_AddItemToObject(o, name, v)) {
        cJSON_Delete(v);
        t_oom = true;
    }
}

static void push(cJSON *a, cJSON *v)
{
    if (!v || !cJSON_AddItemToArray(a, v)) {
        cJSON_Delete(v);
        t_oom = true;
    }
}

const char rlx_api_sse_done[] = "data: [DONE]\n\n";

void rlx_api_logprob_clear(rlx_api_logprob *lp)
{
    free(lp->text);
    for (int i = 0; i < lp->n_top; i++) free(lp->top_text[i]);
    memset(lp, 0, sizeof *lp);
}

const char *rlx_api_finish_name(rlx_finish_reason f)
{
    switch (f) {
    case RLX_FINISH_STOP: return "stop";
    case RLX_FINISH_LENGTH: return "length";
    case RLX_FINISH_CANCELLED: return "cancelled";
    default: return NULL;
    }
}

void rlx_api_meta_init(rlx_api_meta *m, rlx_api_kind kind, const char *model, uint64_t seq,
                       long long now)
{
    memset(m, 0, sizeof *m); /* every field set: fingerprint NULL, include_usage false */
    m->kind = kind;
    m->model = model;
    m->created = now;
    snprintf(m->id, sizeof m->id, "%s-%llx%08llx", kind == RLX_API_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)now, (unsigned long long)seq);
}

/* cJSON's strings end at their first NUL, but a model may emit the byte-0 token: such a text
 * is printed segment by segment by cJSON and joined with \u0000 into a raw item, so nothing
 * after the NUL is lost. s holds n bytes and a terminating NUL. */
static cJSON *string_with_nuls(const char *s, size_t n)
{
    size_t cap = 16, len = 1;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = '"';
    for (const char *seg = s, *end;; seg = end + 1) {
        end = seg + strlen(seg); /* a NUL inside the text, or the terminating one at s + n */
        cJSON *t = cJSON_CreateString(seg);
        char *q = t ? cJSON_PrintUnformatted(t) : NULL; /* "..." */
        cJSON_Delete(t);
        size_t qn = q ? strlen(q) - 2 : 0, tail = end < s + n ? 6 : 1;
        char *grown = q && len + qn + tail + 1 > cap ? realloc(out, cap = 2 * (len + qn + tail + 1)) : out;
        if (!q || !grown) {
            free(q);
            free(grown ? grown : out);
            return NULL;
        }
        out = grown;
        memcpy(out + len, q + 1, qn);
        len += qn;
        free(q);
        if (tail == 1) break;
        memcpy(out + len, "\\u0000", 6);
        len += 6;
    }
    memcpy(out + len, "\"", 2);
    cJSON *v = cJSON_CreateRaw(out);
    free(out);
    return v;
}

cJSON *rlx_api_json_text(const char *s, size_t n)
{
    size_t len;
    char *tmp = rlx_api_utf8_sanitize(s, n, &len);
    if (!tmp) return NULL;
    cJSON *v = memchr(tmp, 0, len) ? string_with_nuls(tmp, len) : cJSON_CreateString(tmp);
    free(tmp);
    return v;
}

/* Every string written goes through here (or safe_string): made valid UTF-8, NUL bytes kept. */
static cJSON *string_n(const char *s, size_t n)
{
    cJSON *v = rlx_api_json_text(s, n);
    if (!v) t_oom = true; /* string_with_nuls allocates its buffer with plain malloc */
    return v;
}

static cJSON *safe_string(const char *s)
{
    return string_n(s ? s : "", s ? strlen(s) : 0);
}

/* {"message","type","param","code"} */
static cJSON *error_object(const rlx_api_error *e)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON *msg = safe_string(e->message); /* messages may quote what the client sent */
    if (msg) add(o, "message", msg);
    cJSON_AddStringToObject(o, "type", e->type ? e->type : RLX_API_ERR_SERVER);
    if (e->param[0]) cJSON_AddStringToObject(o, "param", e->param);
    else cJSON_AddNullToObject(o, "param");
    if (e->code) cJSON_AddStringToObject(o, "code", e->code);
    else cJSON_AddNullToObject(o, "code");
    return o;
}

char *rlx_api_error_json(const rlx_api_error *e)
{
    t_oom = false;
    cJSON *root = cJSON_CreateObject(), *o = error_object(e);
    if (!root || !o) { cJSON_Delete(root); cJSON_Delete(o); return NULL; }
    add(root, "error", o);
    return print_free(root, "", "");
}

static void add_string_n(cJSON *o, const char *name, const char *s, size_t n)
{
    cJSON *v = string_n(s ? s : "", s ? n : 0);
    if (v) add(o, name, v);
}

static cJSON *bytes_array(const char *s, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && s && i < n; i++)
        push(a, cJSON_CreateNumber((unsigned char)s[i]));
    return a;
}

/* completions style: parallel arrays */
static cJSON *logprobs_completions(const rlx_api_logprob *lps, size_t n)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(o, "tokens");
    cJSON *lp = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
    cJSON *off = cJSON_AddArrayToObject(o, "text_offset");
    if (!off) { cJSON_Delete(o); return NULL; }
    for (size_t i = 0; i < n; i++) {
        push(tokens, string_n(lps[i].text, lps[i].text_len));
        push(off, cJSON_CreateNumber((double)lps[i].text_offset));
        if (lps[i].none) {
            push(lp, cJSON_CreateNull());
            push(top, cJSON_CreateNull());
            continue;
        }
        push(lp, cJSON_CreateNumber(lps[i].logprob));
        cJSON *t = cJSON_CreateObject();
        for (int k = 0; t && k < lps[i].n_top; k++) {
            const char *tt = lps[i].top_text[k] ? lps[i].top_text[k] : "";
            char *key = rlx_api_utf8_sanitize(tt, strlen(tt), NULL);
            if (!key) t_oom = true;
            if (key && !cJSON_GetObjectItemCaseSensitive(t, key)) cJSON_AddNumberToObject(t, key, lps[i].top_logprob[k]);
            free(key);
        }
        push(top, t);
    }
    return o;
}

/* chat style: {"content":[{token, logprob, bytes, top_logprobs:[...]}], "refusal": null} */
static cJSON *logprobs_chat(const rlx_api_logprob *lps, size_t n)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(o, "content");
    cJSON_AddNullToObject(o, "refusal");
    if (!content) { cJSON_Delete(o); return NULL; }
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        add_string_n(e, "token", lps[i].text, lps[i].text_len); /* "bytes" keeps the raw bytes */
        cJSON_AddNumberToObject(e, "logprob", lps[i].logprob);
        add(e, "bytes", bytes_array(lps[i].text, lps[i].text_len));
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; top && k < lps[i].n_top; k++) {
            cJSON *t = cJSON_CreateObject();
            add_string_n(t, "token", lps[i].top_text[k], lps[i].top_len[k]);
            cJSON_AddNumberToObject(t, "logprob", lps[i].top_logprob[k]);
            add(t, "bytes", bytes_array(lps[i].top_text[k], lps[i].top_len[k]));
            push(top, t);
        }
        push(content, e);
    }
    return o;
}

static void add_logprobs(cJSON *o, rlx_api_kind kind, const rlx_api_logprob *lps, size_t n)
{
    if (!lps) { cJSON_AddNullToObject(o, "logprobs"); return; }
    cJSON *l = kind == RLX_API_CHAT ? logprobs_chat(lps, n) : logprobs_completions(lps, n);
    if (l) add(o, "logprobs", l);
    else cJSON_AddNullToObject(o, "logprobs");
}

static void add_finish_tools(cJSON *o, rlx_finish_reason f, bool tool_calls)
{
    const char *name = tool_calls && f == RLX_FINISH_STOP ? "tool_calls" : rlx_api_finish_name(f);
    if (name) cJSON_AddStringToObject(o, "finish_reason", name);
    else cJSON_AddNullToObject(o, "finish_reason");
}

static void add_finish(cJSON *o, rlx_finish_reason f)
{
    add_finish_tools(o, f, false);
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t') return false;
    return true;
}

/* The assistant message of a chat choice whose output was parsed for tool calls: content null
 * beside calls when it holds nothing but whitespace (a newline before a call's tag), as OpenAI
 * and llama-server give it. */
static void tool_message(cJSON *msg, const rlx_api_tool_out *t)
{
    if (t->n_calls && blank(t->content, t->content_len)) cJSON_AddNullToObject(msg, "content");
    else add_string_n(msg, "content", t->content ? t->content : "", t->content_len);
    if (t->reasoning_len) add_string_n(msg, "reasoning_content", t->reasoning, t->reasoning_len);
    if (!t->n_calls) return;
    cJSON *arr = cJSON_AddArrayToObject(msg, "tool_calls");
    for (size_t i = 0; arr && i < t->n_calls; i++) {
        const rlx_api_tool_call *c = &t->calls[i];
        cJSON *o = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", c->id);
        cJSON_AddStringToObject(o, "type", "function");
        add(fn, "name", safe_string(c->name));
        add_string_n(fn, "arguments", c->args ? c->args : "", c->args_len);
        add(o, "function", fn);
        push(arr, o);
    }
}

static cJSON *usage_json(const rlx_usage *u)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "prompt_tokens", u->prompt_tokens);
    cJSON_AddNumberToObject(o, "completion_tokens", u->completion_tokens);
    cJSON_AddNumberToObject(o, "total_tokens", (double)u->prompt_tokens + u->completion_tokens);
    cJSON *d = cJSON_AddObjectToObject(o, "prompt_tokens_details");
    if (d) cJSON_AddNumberToObject(d, "cached_tokens", u->cached_tokens);
    return o;
}

static cJSON *timings_json(const rlx_timings *t, const rlx_usage *u)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "queued_s", t->queued_s);
    cJSON_AddNumberToObject(o, "ttft_s", t->ttft_s);
    cJSON_AddNumberToObject(o, "prompt_s", t->prompt_s);
    cJSON_AddNumberToObject(o, "gen_s", t->gen_s);
    cJSON_AddNumberToObject(o, "total_s", t->total_s);
    cJSON_AddNumberToObject(o, "prompt_per_second", t->prompt_s > 0 ? u->prompt_tokens / t->prompt_s : 0);
    cJSON_AddNumberToObject(o, "predicted_per_second",
                            t->gen_s > 0 && u->completion_tokens > 1 ? (u->completion_tokens - 1) / t->gen_s : 0);
    return o;
}

static cJSON *header(const rlx_api_meta *m, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", m->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)m->created);
    cJSON_AddStringToObject(o, "model", m->model ? m->model : "");
    if (m->fingerprint) cJSON_AddStringToObject(o, "system_fingerprint", m->fingerprint);
    return o;
}

static char *print_free(cJSON *o, const char *prefix, const char *suffix)
{
    if (!o || t_oom) { /* a part is missing */
        cJSON_Delete(o);
        return NULL;
    }
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!body) return NULL;
    size_t pl = strlen(prefix), bl = strlen(body), sl = strlen(suffix);
    char *s = malloc(pl + bl + sl + 1);
    if (s) {
        memcpy(s, prefix, pl);
        memcpy(s + pl, body, bl);
        memcpy(s + pl + bl, suffix, sl + 1);
    }
    free(body);
    return s;
}

static cJSON *native_json(const rlx_api_meta *m, const rlx_api_choice *c, const rlx_usage *u,
                          const rlx_timings *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", m->id);
    cJSON_AddStringToObject(o, "model", m->model ? m->model : "");
    add_string_n(o, "text", c->text, c->text_len);
    cJSON *ids = cJSON_AddArrayToObject(o, "token_ids");
    for (size_t i = 0; ids && i < c->n_tokens; i++) push(ids, cJSON_CreateNumber(c->tokens[i]));
    add_finish(o, c->finish);
    if (c->logprobs) add_logprobs(o, RLX_API_CHAT, c->logprobs, c->n_logprobs);
    add(o, "usage", usage_json(u));
    if (t) add(o, "timings", timings_json(t, u));
    return o;
}

char *rlx_api_response_json(const rlx_api_meta *m, const rlx_api_choice *choices, size_t n,
                            const rlx_usage *usage, const rlx_timings *timings)
{
    t_oom = false;
    if (m->kind == RLX_API_GENERATE)
        return n ? print_free(native_json(m, &choices[0], usage, timings), "", "") : NULL;
    bool chat = m->kind == RLX_API_CHAT;
    cJSON *o = header(m, chat ? "chat.completion" : "text_completion");
    cJSON *arr = cJSON_AddArrayToObject(o, "choices");
    for (size_t i = 0; arr && i < n; i++) {
        const rlx_api_choice *c = &choices[i];
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddNumberToObject(ch, "index", c->index);
        if (chat) {
            cJSON *msg = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(msg, "role", "assistant");
            if (c->tools) tool_message(msg, c->tools);
            else add_string_n(msg, "content", c->text, c->text_len);
            cJSON_AddNullToObject(msg, "refusal"); /* always in OpenAI's message (its client's type requires it) */
        } else {
            add_string_n(ch, "text", c->text, c->text_len);
        }
        add_logprobs(ch, m->kind, c->logprobs, c->n_logprobs);
        add_finish_tools(ch, c->finish, c->tools && c->tools->n_calls && !c->calls_cut);
        push(arr, ch);
    }
    add(o, "usage", usage_json(usage));
    return print_free(o, "", "");
}

char *rlx_api_sse_chunk(const rlx_api_meta *m, int index, const char *text, size_t len,
                        bool role_first, const rlx_api_logprob *lps, size_t n_lps,
                        rlx_finish_reason finish)
{
    t_oom = false;
    bool chat = m->kind == RLX_API_CHAT;
    cJSON *o = header(m, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *arr = cJSON_AddArrayToObject(o, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", index);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(ch, "delta");
        if (role_first) cJSON_AddStringToObject(d, "role", "assistant");
        if (len || role_first || finish == RLX_FINISH_NONE) add_string_n(d, "content", text, len);
    } else {
        add_string_n(ch, "text", text, len);
    }
    add_logprobs(ch, m->kind, lps, n_lps);
    add_finish(ch, finish);
    push(arr, ch);
    if (m->include_usage) cJSON_AddNullToObject(o, "usage"); /* as OpenAI: usage comes in the last chunk */
    return print_free(o, "data: ", "\n\n");
}

/* A chat chunk of one choice with its delta object for the caller to fill. */
static cJSON *chat_chunk(const rlx_api_meta *m, int index, cJSON **delta, cJSON **choice)
{
    cJSON *o = header(m, "chat.completion.chunk");
    cJSON *arr = cJSON_AddArrayToObject(o, "choices");
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", index);
    *delta = cJSON_AddObjectToObject(ch, "delta");
    *choice = ch;
    push(arr, ch);
    return o;
}

static char *chunk_end(const rlx_api_meta *m, cJSON *o)
{
    if (m->include_usage) cJSON_AddNullToObject(o, "usage");
    return print_free(o, "data: ", "\n\n");
}

char *rlx_api_sse_tool_event(const rlx_api_meta *m, int index, const rlx_tc_event *ev, const rlx_api_logprob *lps,
                             size_t n_lps)
{
    t_oom = false;
    bool text = ev->kind == RLX_TC_CONTENT || ev->kind == RLX_TC_REASONING;
    if (ev->kind == RLX_TC_CALL_END || ((text || ev->kind == RLX_TC_CALL_ARGS) && !ev->len)) return strdup("");
    cJSON *d, *ch, *o = chat_chunk(m, index, &d, &ch);
    if (text) {
        add_string_n(d, ev->kind == RLX_TC_CONTENT ? "content" : "reasoning_content", ev->text, ev->len);
    } else {
        cJSON *calls = cJSON_AddArrayToObject(d, "tool_calls"), *c = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", ev->index);
        if (ev->kind == RLX_TC_CALL_BEGIN) {
            cJSON_AddStringToObject(c, "id", ev->id ? ev->id : "");
            cJSON_AddStringToObject(c, "type", "function");
            add(fn, "name", safe_string(ev->name));
            cJSON_AddStringToObject(fn, "arguments", "");
        } else {
            add_string_n(fn, "arguments", ev->text, ev->len);
        }
        add(c, "function", fn);
        push(calls, c);
    }
    add_logprobs(ch, m->kind, lps, n_lps);
    cJSON_AddNullToObject(ch, "finish_reason");
    return chunk_end(m, o);
}

char *rlx_api_sse_tool_end(const rlx_api_meta *m, int index, rlx_finish_reason finish, bool tool_calls,
                           const rlx_api_logprob *lps, size_t n_lps)
{
    t_oom = false;
    cJSON *d, *ch, *o = chat_chunk(m, index, &d, &ch);
    add_logprobs(ch, m->kind, lps, n_lps);
    add_finish_tools(ch, finish, tool_calls);
    return chunk_end(m, o);
}

char *rlx_api_sse_usage(const rlx_api_meta *m, const rlx_usage *usage)
{
    t_oom = false;
    cJSON *o = header(m, m->kind == RLX_API_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(o, "choices");
    add(o, "usage", usage_json(usage));
    return print_free(o, "data: ", "\n\n");
}

char *rlx_api_sse_error(const rlx_api_error *e)
{
    char *j = rlx_api_error_json(e);
    if (!j) return NULL;
    size_t n = strlen(j);
    char *s = malloc(n + 9);
    if (s) snprintf(s, n + 9, "data: %s\n\n", j);
    free(j);
    return s;
}

char *rlx_api_ndjson_token(int32_t token, const char *text, size_t len)
{
    t_oom = false;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "token", token);
    add_string_n(o, "text", text, len);
    return print_free(o, "", "\n");
}

/* ---- JSON lines ------------------------------------------------------------------------ */

static cJSON *line_start(const char *id)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *v = cJSON_CreateRaw(id ? id : "null");
    if (!o || !v || !cJSON_AddItemToObject(o, "id", v)) {
        cJSON_Delete(o);
        cJSON_Delete(v);
        return NULL;
    }
    return o;
}

char *rlx_api_line_token(const char *id, int index, int32_t token, const char *text, size_t len)
{
    t_oom = false;
    cJSON *o = line_start(id);
    if (!o) return NULL;
    if (index >= 0) cJSON_AddNumberToObject(o, "index", index);
    cJSON_AddNumberToObject(o, "token", token);
    add_string_n(o, "text", text, len);
    return print_free(o, "", "\n");
}

/* text, token_ids, finish_reason (+ logprobs) of one choice into o */
static void line_choice(cJSON *o, const rlx_api_choice *c)
{
    add_string_n(o, "text", c->text, c->text_len);
    cJSON *ids = cJSON_AddArrayToObject(o, "token_ids");
    for (size_t i = 0; ids && i < c->n_tokens; i++) push(ids, cJSON_CreateNumber(c->tokens[i]));
    add_finish(o, c->finish);
    if (c->logprobs) add_logprobs(o, RLX_API_CHAT, c->logprobs, c->n_logprobs);
}

char *rlx_api_line_result(const char *id, const rlx_api_choice *choices, size_t n, const rlx_usage *usage,
                          double elapsed_ms)
{
    t_oom = false;
    cJSON *o = line_start(id);
    if (!o || !n) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddTrueToObject(o, "ok");
    line_choice(o, &choices[0]);
    if (n > 1) {
        cJSON *arr = cJSON_AddArrayToObject(o, "choices");
        for (size_t i = 0; arr && i < n; i++) {
            cJSON *c = cJSON_CreateObject();
            if (!c) {
                t_oom = true;
                break;
            }
            cJSON_AddNumberToObject(c, "index", choices[i].index);
            line_choice(c, &choices[i]);
            push(arr, c);
        }
    }
    add(o, "usage", usage_json(usage));
    cJSON_AddNumberToObject(o, "elapsed_ms", elapsed_ms);
    return print_free(o, "", "\n");
}

char *rlx_api_line_error(const char *id, const rlx_api_error *e, double elapsed_ms)
{
    t_oom = false;
    cJSON *o = line_start(id), *eo = error_object(e);
    if (!o || !eo) {
        cJSON_Delete(o);
        cJSON_Delete(eo);
        return NULL;
    }
    cJSON_AddFalseToObject(o, "ok");
    add(o, "error", eo);
    cJSON_AddNumberToObject(o, "elapsed_ms", elapsed_ms);
    return print_free(o, "", "\n");
}
