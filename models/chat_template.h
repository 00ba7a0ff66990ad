/* chat_template.h - a Jinja-subset interpreter for the chat templates models ship in
 * tokenizer.chat_template, rendering exactly as Python Jinja2 does when configured like
 * Hugging Face transformers' apply_chat_template (trim_blocks, lstrip_blocks, loopcontrols,
 * tojson, raise_exception, strftime_now).
 *
 * Ownership: a parsed template owns its AST and copies the source. Rendering borrows the
 * context (a cJSON object: messages, tools, add_generation_prompt, bos_token, eos_token, ...)
 * and returns a malloc'ed NUL-terminated string owned by the caller. Parsed templates are
 * immutable and may be rendered from several threads at once.
 *
 * Limits: evaluation nests at most 600 levels (runaway recursion fails with RLX_ERANGE; the
 * worst case needs about 0.5 MiB of stack in a release build, more under ASan) and one render
 * may use 256 MiB (RLX_ENOMEM beyond). Give the context as rlx_json_parse (models/json.h)
 * reads it: then 1.0 stays a float, big ints stay exact and strings may hold NULs, as in
 * Python; numbers made by cJSON itself carry no literal, and integral ones become ints. Not
 * supported: include, import, extends, block, star-args in calls, dotted filter names; a
 * filter, test or method the interpreter lacks fails at parse time. */
#ifndef RLX_CHAT_TEMPLATE_H
#define RLX_CHAT_TEMPLATE_H

#include "backends/rlx.h"
#include <cjson/cJSON.h>

typedef struct rlx_chat_template rlx_chat_template;

/* Fails with RLX_EUNSUPPORTED naming the construct (and line) it cannot handle, or
 * RLX_EFORMAT for a syntax error. */
int rlx_chat_template_parse(rlx_chat_template **out, const char *src, size_t len, rlx_error *err);
void rlx_chat_template_free(rlx_chat_template *t);

/* now_iso: fixed time for strftime_now ("2024-07-01T12:00:00"), NULL for the current time.
 * raise_exception() in the template fails with RLX_EINVAL and its message. */
int rlx_chat_template_render(const rlx_chat_template *t, const cJSON *context, const char *now_iso,
                             char **out, rlx_error *err);
/* The same, with the rendering's length in *out_len (a context string may hold NULs, which the
 * rendering then holds too). */
int rlx_chat_template_render_len(const rlx_chat_template *t, const cJSON *context, const char *now_iso,
                                 char **out, size_t *out_len, rlx_error *err);

/* v as the templates' |tojson writes it, i.e. Python's json.dumps(v, ensure_ascii=False,
 * indent=indent) (indent < 0: one line with ", " and ": "). *out malloc'ed. */
int rlx_chat_template_tojson(const cJSON *v, int indent, char **out, rlx_error *err);

/* Whether an assistant's tool-call arguments, which the OpenAI wire form carries as a JSON
 * string, should reach the template as an object (as transformers' examples and vLLM give them)
 * or as the client's string. Decided by probe renderings, as llama.cpp does for each template
 * (minja's requires_object_arguments), but preferring the object: the string is kept only when
 * a history with object arguments does not show them (the render fails, as Functionary v3.2's
 * string concatenation does, or leaves them out) while the string form shows them as JSON.
 * (minja keeps the string whenever it shows, which makes Gemma 4's template print the JSON text
 * inside its own argument syntax.) Renders the template up to twice; call once per template. */
bool rlx_chat_template_object_arguments(const rlx_chat_template *t);

/* ChatML, for models that carry no template. Assistant tool calls render after the content as
 * {"tool_calls": [{"name", "arguments", "id"}]} (the generic format of proto/toolcall.h); content
 * null or absent renders as "". */
extern const char rlx_chatml_template[];

#endif
