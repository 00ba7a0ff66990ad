/* chat_template.c - the public face of the Jinja-subset interpreter (see chat_template.h).
 * Parsing builds a tree in the template's own arena; each render gets a fresh arena that is
 * dropped when it returns, so a parsed template is read-only and shareable across threads.
 * Errors inside the interpreter longjmp back here (see jinja_value.h). */
#include "models/chat_template.h"
#include "models/jinja_ast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PARSE_LIMIT = 64 << 20, RENDER_LIMIT = 256 << 20 };

struct rlx_chat_template {
    rj_rt *arena;   /* owns every token and node */
    rj_nodes root;
};

const char rlx_chatml_template[] =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') }}"
    "{% if message['tool_calls'] %}"
    "{{ '\\n' if message['content'] else '' }}{{ '{\"tool_calls\": [' }}"
    "{% for tc in message['tool_calls'] %}{% set f = tc['function'] if tc['function'] is defined else tc %}"
    "{{ ', ' if not loop.first else '' }}{{ '{\"name\": ' + (f['name'] | tojson) + ', \"arguments\": ' + (f['arguments'] | tojson) }}"
    "{{ (', \"id\": ' + (tc['id'] | tojson)) if tc['id'] is defined else '' }}{{ '}' }}"
    "{% endfor %}{{ ']}' }}"
    "{% endif %}"
    "{{ '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

int rlx_chat_template_parse(rlx_chat_template **out, const char *src, size_t len, rlx_error *err)
{
    if (!out || (!src && len)) return rlx_errorf(err, RLX_EINVAL, "rlx_chat_template_parse: no output pointer or source");
    *out = NULL;
    rlx_chat_template *t = calloc(1, sizeof *t);
    rj_rt *rt = calloc(1, sizeof *rt);
    if (!t || !rt) {
        free(t);
        free(rt);
        return rlx_errorf(err, RLX_ENOMEM, "out of memory parsing the chat template");
    }
    rt->limit = PARSE_LIMIT;
    rt->err = err;
    t->arena = rt;
    if (setjmp(rt->jb) != 0) { /* setjmp may only be tested, not stored (C17 7.13.1.1) */
        int code = rt->code;
        rlx__j_arena_free(rt);
        free(rt);
        free(t);
        return code;
    }
    rj_tokens toks = {0};
    rlx__j_lex(rt, src ? src : "", len, &toks);
    t->root = rlx__j_parse(rt, &toks);
    rt->err = NULL;
    *out = t;
    return 0;
}

void rlx_chat_template_free(rlx_chat_template *t)
{
    if (!t) return;
    rlx__j_arena_free(t->arena);
    free(t->arena);
    free(t);
}

int rlx_chat_template_render(const rlx_chat_template *t, const cJSON *context, const char *now_iso, char **out,
                             rlx_error *err)
{
    return rlx_chat_template_render_len(t, context, now_iso, out, NULL, err);
}

/* Runs body in a fresh render arena (errors inside longjmp back here) and returns what it wrote
 * to its buffer, malloc'ed. */
typedef struct arena_job {
    const rlx_chat_template *t; /* render: the template and its context */
    const cJSON *context;
    const cJSON *value;         /* tojson: the value and its indent */
    int indent;
} arena_job;

static int in_arena(void (*body)(rj_rt *, rj_buf *, const arena_job *), const arena_job *job, const char *now_iso,
                    char **out, size_t *out_len, rlx_error *err)
{
    rj_rt *rt = calloc(1, sizeof *rt);
    if (!rt) return rlx_errorf(err, RLX_ENOMEM, "out of memory rendering the chat template");
    rt->limit = RENDER_LIMIT;
    rt->deadline = rlx_now() + RJ_RENDER_SECONDS;
    rt->err = err;
    rt->now_iso = now_iso;
    if (setjmp(rt->jb) != 0) {
        int code = rt->code;
        rlx__j_arena_free(rt);
        free(rt);
        return code;
    }
    rj_buf b = {0};
    rlx__j_buf_put(rt, &b, "", 0);
    body(rt, &b, job);
    char *s = malloc(b.n + 1);
    if (!s) rlx__j_fail(rt, RLX_ENOMEM, "out of memory copying the rendered chat template");
    memcpy(s, b.p, b.n + 1);
    if (out_len) *out_len = b.n;
    rlx__j_arena_free(rt);
    free(rt);
    *out = s;
    return 0;
}

static void render_body(rj_rt *rt, rj_buf *b, const arena_job *job)
{
    rj_value ctx = job->context ? rlx__j_from_json(rt, job->context) : rlx__j_new_dict(rt, 0);
    rt->depth = 0;
    rlx__j_render(rt, &job->t->root, ctx, b);
}

int rlx_chat_template_render_len(const rlx_chat_template *t, const cJSON *context, const char *now_iso, char **out,
                                 size_t *out_len, rlx_error *err)
{
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !out) return rlx_errorf(err, RLX_EINVAL, "rlx_chat_template_render: no template or output pointer");
    if (context && !cJSON_IsObject(context))
        return rlx_errorf(err, RLX_EINVAL, "the chat template context must be a JSON object");
    arena_job job = {.t = t, .context = context};
    return in_arena(render_body, &job, now_iso, out, out_len, err);
}

static void tojson_body(rj_rt *rt, rj_buf *b, const arena_job *job)
{
    char spaces[65];
    int k = job->indent < 0 ? 0 : job->indent > 64 ? 64 : job->indent;
    memset(spaces, ' ', (size_t)k);
    spaces[k] = 0;
    rj_json_opts o = {.indent = job->indent >= 0 ? spaces : NULL, .item_sep = job->indent >= 0 ? "," : ", ", .key_sep = ": "};
    rlx__j_tojson(rt, b, rlx__j_from_json(rt, job->value), &o, 0);
}

int rlx_chat_template_tojson(const cJSON *v, int indent, char **out, rlx_error *err)
{
    *out = NULL;
    arena_job job = {.value = v, .indent = indent};
    return in_arena(tojson_body, &job, NULL, out, NULL, err);
}

/* A probe rendering: a history whose assistant tool call carries the arguments
 * {"argument_needle": "print('Hello, World!')"} as a JSON string or as an object. Returns the
 * rendering (malloc'ed) or NULL when it fails. The call's content is "" as rlx_api_parse makes
 * it. */
static char *probe(const rlx_chat_template *t, bool as_object, size_t *n)
{
    static const char head[] =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"<User Needle>\"},"
        " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call_1___\", \"type\": \"function\","
        " \"function\": {\"name\": \"ipython\", \"arguments\": ";
    static const char tail[] = "}}]}], \"add_generation_prompt\": false, \"bos_token\": \"\", \"eos_token\": \"\"}";
    char text[sizeof head + sizeof tail + 64];
    snprintf(text, sizeof text, "%s%s%s", head,
             as_object ? "{\"argument_needle\": \"print('Hello, World!')\"}"
                       : "\"{\\\"argument_needle\\\":\\\"print('Hello, World!')\\\"}\"",
             tail);
    cJSON *ctx = cJSON_Parse(text);
    char *out = NULL;
    rlx_error err = {0};
    if (!ctx || rlx_chat_template_render_len(t, ctx, "2024-07-01T12:00:00", &out, n, &err)) {
        free(out);
        out = NULL;
    }
    cJSON_Delete(ctx);
    return out;
}

bool rlx_chat_template_object_arguments(const rlx_chat_template *t)
{
    if (!t) return true;
    size_t n = 0;
    char *out = probe(t, true, &n);
    bool objects_shown = out && memmem(out, n, "argument_needle", 15);
    free(out);
    if (objects_shown) return true;
    out = probe(t, false, &n);
    bool string_shown = out && (memmem(out, n, "\"argument_needle\":", 18) || memmem(out, n, "'argument_needle':", 18));
    free(out);
    return !string_shown;
}
