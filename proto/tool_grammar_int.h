/* tool_grammar_int.h - internals of the tool-call forcing grammars (proto/tool_grammar.c, the
 * JSON-body formats and the root; proto/tool_grammar_fmt.c, the formats that name the function
 * outside JSON: Functionary v3.1 / v3.2 and the Qwen3-Coder XML). A growable GBNF text with a
 * sticky out-of-memory flag. Pure functions, any thread. */
#ifndef RLX_TOOL_GRAMMAR_INT_H
#define RLX_TOOL_GRAMMAR_INT_H

#include "proto/proto.h"
#include "proto/toolcall_int.h"

typedef struct rlx__tg {
    rlx__tc_buf b;
    bool oom;
} rlx__tg;

void rlx__tg_printf(rlx__tg *g, const char *fmt, ...);
/* Appends s as a GBNF string literal (bytes outside printable ASCII and " \ [ ] escaped). */
void rlx__tg_lit(rlx__tg *g, const char *s);
/* Appends `rule ::= ...` matching exactly the texts that do not contain `close` (at least 2
 * bytes, its first byte not repeated in it). */
void rlx__tg_not_containing(rlx__tg *g, const char *rule, const char *close);
/* Compiles schema (engine/json_schema.h) and appends its rules, every rule name prefixed with
 * "prefix-" (its start rule is "prefix-root"). 400 naming "tools" when it cannot be compiled. */
int rlx__tg_schema(rlx__tg *g, const cJSON *schema, const char *prefix, rlx_api_error *e);
/* {"type":"object", ...} of a function's parameters, an empty object when it has none (OpenAI):
 * a new tree, NULL when out of memory. */
cJSON *rlx__tg_params(const cJSON *fn);
/* Whether a schema holds a local "$ref" ("#...") anywhere; rebasing them: "#X" -> base + "X"
 * (false when out of memory). A tool's parameters placed inside another schema keep meaning
 * their own root this way. */
bool rlx__tg_has_local_ref(const cJSON *v);
bool rlx__tg_rebase_refs(cJSON *v, const char *base);
/* A copy of params at schema's $defs/<key>, its local refs rebased there; false when out of
 * memory (schema unchanged but for an empty $defs). */
bool rlx__tg_defs_put(cJSON *schema, const char *key, const cJSON *params);
/* The formats that name the function outside JSON (Functionary v3.1 / v3.2, Qwen3-Coder,
 * Mistral's [ARGS] form, DeepSeek, Kimi K2, gpt-oss): appends rule rlx-tc-call (one call of any
 * allowed tool, the named one for a named tool_choice, with its start marker) and, for v3.2,
 * rlx-tc-call0 (the same without ">>>", for a prompt that ends with it), for gpt-oss the same
 * from " to=functions." on (the lazy grammar's start). */
int rlx__tg_named_calls(const rlx_api_request *r, const rlx_tc_info *info, rlx__tg *g, rlx_api_error *e);
int rlx__tg_oom(rlx_api_error *e);

#endif
