/* proto.h - wire formats of the daemon: JSON request bodies -> validated rlx_requests, engine
 * results -> OpenAI-compatible JSON, SSE chunks and native JSON-lines. No I/O, no engine calls
 * (only the engine's request/event types and rlx_request_new/free).
 *
 * Ownership: parse functions fill a caller-provided rlx_api_request that owns everything it
 * points to (free with rlx_api_request_free). Format functions return malloc'ed NUL-terminated
 * strings owned by the caller (NULL only when out of memory). */
#ifndef RLX_PROTO_H
#define RLX_PROTO_H

#include "engine/engine.h"
#include "proto/toolcall.h"
#include <cjson/cJSON.h>
#include <time.h>

#define RLX_MAX_STOP 4
#define RLX_MAX_N 16

/* The OpenAI error types ("type" of an error object), written here once. */
#define RLX_API_ERR_INVALID "invalid_request_error"   /* 4xx: the request is at fault */
#define RLX_API_ERR_SERVER "server_error"              /* 5xx: the server is at fault */
#define RLX_API_ERR_UNAVAILABLE "unavailable_error"    /* 503: loading or shutting down */
#define RLX_API_ERR_AUTH "authentication_error"        /* 401 */

/* An error as an OpenAI error object plus the HTTP status it goes with. */
typedef struct rlx_api_error {
    int status;            /* HTTP status, e.g. 400 */
    const char *type;      /* static: "invalid_request_error", "authentication_error", ... */
    const char *code;      /* static or NULL (JSON null) */
    char param[64];        /* offending parameter, "" for none (JSON null) */
    char message[512];
} rlx_api_error;

/* Fills e and returns RLX_EINVAL (or `code` given) so parsers can `return api_errorf(...)`. */
int rlx_api_errorf(rlx_api_error *e, int status, const char *type, const char *param,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The 503 of work refused or cancelled because the server is stopping; returns RLX_EFULL. */
int rlx_api_error_shutdown(rlx_api_error *e);
/* {"error":{"message","type","param","code"}} */
char *rlx_api_error_json(const rlx_api_error *e);
/* Maps an engine/library error code to status + type (EFULL 503, ETOOLONG 400, ...). */
void rlx_api_error_from_rlx(rlx_api_error *e, int code, const char *msg);
/* An admission refusal (engine.h, rlx_admit_check) as the API's 400, naming the parameter at
 * fault: prompt_param ("prompt", "messages", "input_ids", "tokens") for the prompt's length, ids
 * and emptiness, max_tokens_param for max_tokens and the context ("context_length_exceeded" for
 * those over the context). max_tokens_param NULL: the ids are a plain list (/detokenize), worded
 * as such. Returns the check's code (RLX_EINVAL or RLX_ETOOLONG), 0 when admitted. */
int rlx_api_error_from_admit(rlx_api_error *e, const rlx_admit *a, const char *prompt_param,
                             const char *max_tokens_param);

typedef enum rlx_api_kind {
    RLX_API_COMPLETIONS,   /* POST /v1/completions */
    RLX_API_CHAT,          /* POST /v1/chat/completions */
    RLX_API_GENERATE,      /* POST /v1/generate (native) */
    RLX_API_EMBEDDINGS,    /* POST /v1/embeddings (OpenAI) */
    RLX_API_EMBEDDING,     /* POST /embedding (llama-server's native) */
    RLX_API_RERANK,        /* POST /v1/rerank */
} rlx_api_kind;

/* The kinds an embedding model answers (proto/embed.c); the others need a generative one. */
static inline bool rlx_api_kind_embeds(rlx_api_kind k) { return k >= RLX_API_EMBEDDINGS; }

/* embeddings and rerank: the request's fields beyond its inputs (which are its prompts: the
 * texts or id lists of "input" / "content", or rerank's documents) */
typedef struct rlx_api_embed {
    bool base64;           /* encoding_format "base64": little-endian float32 bytes */
    int32_t dimensions;    /* "dimensions" (0: not given); only a Matryoshka model could take it */
    char *query;           /* rerank: owned */
    int32_t top_n;         /* rerank: results kept (0: all) */
    bool return_documents; /* rerank: each result carries its document's text */
} rlx_api_embed;

typedef struct rlx_api_prompt {
    char *text;            /* owned, or NULL when ids are given */
    int32_t *ids;          /* owned: the ids given, or the text's tokens once the server has them */
    size_t n_ids;
} rlx_api_prompt;

/* chat: tool_choice (OpenAI): whether and which tool calls the model must make. */
typedef enum rlx_api_tool_choice {
    RLX_TOOL_CHOICE_NONE,      /* no calls (the default without tools) */
    RLX_TOOL_CHOICE_AUTO,      /* the model decides (the default with tools) */
    RLX_TOOL_CHOICE_REQUIRED,  /* at least one call */
    RLX_TOOL_CHOICE_NAMED,     /* a call of tool_name */
} rlx_api_tool_choice;

/* rlx_api_request.given: which of these the body set */
enum {
    RLX_API_GIVEN_TEMPERATURE = 1u << 0,
    RLX_API_GIVEN_TOP_P = 1u << 1,
    RLX_API_GIVEN_TOP_K = 1u << 2,
    RLX_API_GIVEN_MIN_P = 1u << 3,
    RLX_API_GIVEN_REPEAT_PENALTY = 1u << 4,
    RLX_API_GIVEN_PRESENCE_PENALTY = 1u << 5,
    RLX_API_GIVEN_FREQUENCY_PENALTY = 1u << 6,
    RLX_API_GIVEN_REPEAT_LAST_N = 1u << 7,
    RLX_API_GIVEN_MAX_TOKENS = 1u << 8,
};

typedef struct rlx_api_request {
    rlx_api_kind kind;
    char *model;           /* owned; NULL: the default model */
    bool stream;
    bool include_usage;    /* stream_options.include_usage */
    bool echo;             /* completions: prepend the prompt */
    int n;                 /* choices per prompt, 1..RLX_MAX_N */
    int logprobs;          /* -1: none; else number of top alternatives (0..20) */
    rlx_api_prompt *prompts; /* completions/generate: n_prompts >= 1; chat: 0 (see messages) */
    size_t n_prompts;
    cJSON *messages;       /* chat: owned detached array, content normalised to strings; a request
                              with messages is rendered by the chat template whatever its kind
                              (the stdio mode answers chat in the native shape) */
    cJSON *tools;          /* chat: owned or NULL, passed to the template; each entry checked
                              {type:"function", function:{name, description?, parameters?}} */
    rlx_api_tool_choice tool_choice; /* chat: NONE without tools, else AUTO unless asked */
    char *tool_name;       /* owned: the function tool_choice names (NAMED), else NULL */
    bool parallel_tool_calls;    /* chat: more than one call allowed (default true) */
    bool reasoning_raw;          /* chat: reasoning_format "none": a thinking template's reasoning
                                    stays in the content, tags and all (default: split out into
                                    reasoning_content, with or without tools, as llama-server) */
    bool add_generation_prompt;  /* chat: the template ends with the assistant's turn opening (default true) */
    bool continue_final_message; /* chat: the final message stays open for the model to continue */
    cJSON *template_kwargs;      /* chat: owned or NULL, chat_template_kwargs: extra template variables */
    rlx_request *base;     /* owned: sampling, max_tokens, stop, logprobs, session; no prompt
                              (embeddings: embd_normalize, truncate, embd_per_token) */
    const char *max_tokens_param; /* static: the name the client used, for error messages */
    const char *grammar_param;    /* static: the field the request's grammar came from (grammar,
                                     json_schema, response_format.json_schema), NULL without one:
                                     the param of the worker's refusals of it (token references) */
    uint32_t given;        /* RLX_API_GIVEN_* bits: the sampling fields the body set, which a
                              model's profile defaults (server/profile.h) do not replace */
    bool has_keep_alive;   /* keep_alive was given (Ollama's): ... */
    double keep_alive_s;   /* ... seconds the model stays loaded once idle; 0: unload after the
                              request; -1: forever (proto/keep_alive.c) */
    size_t cap_prompts;    /* entries allocated in prompts */
    rlx_api_embed embed;   /* embedding kinds */
} rlx_api_request;

/* Parses a request body. n_vocab bounds token ids and logit_bias keys (<= 0: unchecked).
 * On error fills e (status 400, param named) and returns a negative code. */
int rlx_api_parse(rlx_api_request *r, rlx_api_kind kind, const char *body, size_t len,
                  int32_t n_vocab, rlx_api_error *e);
/* chat: "tools", "tool_choice" and "parallel_tool_calls" of a body (proto/tools.c; "tools" is
 * detached from root into r->tools). A tool_choice that names a function absent from tools, or
 * any tool_choice but "none" without tools, is a 400 naming "tool_choice". */
int rlx_api_parse_tools(cJSON *root, rlx_api_request *r, rlx_api_error *e);
/* The function object {name, description?, parameters?} of the tool called `name` in r->tools
 * (borrowed), NULL when there is none. */
const cJSON *rlx_api_find_tool(const rlx_api_request *r, const char *name);

/* tool_choice "required" or a named tool: at most this many calls when parallel_tool_calls */
#define RLX_API_MAX_FORCED_CALLS 4
/* The GBNF (malloc'ed, into *gbnf) that forces a valid call of the request's tools (the named
 * one) in the model's tool-call format (proto/tool_grammar*.c): parallel_tool_calls false
 * exactly one call, else 1..RLX_API_MAX_FORCED_CALLS. prompt: the rendered prompt or its tail
 * (NULL: none); when it opened the template's reasoning block the output must close it first
 * (else it may open one), and a Functionary v3.2 prompt that ends with ">>>" starts the output
 * at the function's name. *gbnf NULL when tool_choice forces nothing. Formats: generic, hermes,
 * llama3, qwen3-coder (XML values typed as the parser types them), apriel, firefunction-v2,
 * functionary-v3.1 / v3.2; the others (markers that are special tokens) are a 400 naming the
 * format ("tool_choice"); a tool whose parameters cannot be compiled a 400 naming "tools". */
int rlx_api_tool_grammar(const rlx_api_request *r, const rlx_tc_info *info, const char *prompt, char **gbnf,
                         rlx_api_error *e);
/* tool_choice "auto": the same grammar for a lazy constraint and what starts it: *trigger (a
 * static string, engine.h grammar_triggers) for the formats whose call opens with a text marker
 * the grammar starts with (<tool_call>, <tool_calls>, <function=, >>>, " functools", ...), or
 * *pattern (malloc'ed, engine.h grammar_trigger_pattern) for generic and Llama 3 JSON, whose
 * call is the output's JSON: an anchored PCRE2 pattern over the whole output (leading
 * whitespace; a reasoning block first for templates that think, the output starting inside
 * it when `prompt`, the rendered prompt or its tail, opened it) that matches in full once the
 * call has clearly begun ({"name": " for Llama 3, {"tool_calls": [{"name": " for generic, with
 * the whitespace the grammar allows), its group 1 starting at the '{' the grammar starts with;
 * plain text or other JSON never matches. Then: free text until the model opens a call, then a
 * valid call of the tools (up to RLX_API_MAX_FORCED_CALLS, one without parallel_tool_calls),
 * then nothing else. *gbnf NULL (unconstrained, as before) for formats without a grammar,
 * other tool_choices, or a request that has its own grammar (response_format). */
int rlx_api_tool_grammar_auto(const rlx_api_request *r, const rlx_tc_info *info, const char *prompt, char **gbnf,
                              const char **trigger, char **pattern, rlx_api_error *e);
/* Internal (for tests): GBNF text with every reference to and definition of rule `from` named
 * `to` (literals, classes and comments untouched); malloc'ed, NULL when out of memory. */
char *rlx__gbnf_rename(const char *gbnf, const char *from, const char *to);

/* The same from a parsed body (borrowed; "messages" and "tools" are detached from it). A caller
 * that parses the text itself first rejects bodies with NUL in a string (rlx_api_check_nul):
 * cJSON decodes \u0000 into a NUL that silently cuts every string after it. */
bool rlx_api_has_escaped_nul(const char *body, size_t len);
/* A request's session (session_id, or the X-Session-Id header the server copies in): a valid id,
 * one conversation (n = 1, a single prompt); else a 400 naming session_id. */
int rlx_api_session_check(const rlx_api_request *r, rlx_api_error *e);
int rlx_api_parse_json(rlx_api_request *r, rlx_api_kind kind, cJSON *root, int32_t n_vocab,
                       rlx_api_error *e);
void rlx_api_request_free(rlx_api_request *r);

/* A copy of r->base with the given prompt ids (copied) and request id. */
rlx_request *rlx_api_make_request(const rlx_api_request *r, const int32_t *ids, size_t n_ids, uint64_t id);

/* The template context for chat, as vLLM builds it: {messages, tools?, add_generation_prompt,
 * bos_token, eos_token} and then the request's chat_template_kwargs over them (e.g.
 * enable_thinking). object_arguments (rlx_chat_template_object_arguments of the template it is
 * for): an assistant tool call's function.arguments sent as a JSON string holding an object
 * becomes that object, as llama.cpp does for such templates; otherwise the string stays as sent.
 * Returned object owned by the caller (cJSON_Delete); NULL when out of memory. */
cJSON *rlx_api_chat_context(const rlx_api_request *r, const char *bos, const char *eos, bool object_arguments);
/* OpenAI's "developer" role (the instructions newer OpenAI models take in place of "system")
 * becomes "system" in ctx's messages for a template whose source (tmpl_src, NULL for the
 * built-in ChatML) never names 'developer' as a string: such templates drop a role they do not
 * know (Qwen3, Hermes) or print it as is (ChatML). Templates that name it (Gemma 4, DeepSeek
 * V3.2) get the messages as sent. 0, or -1 out of memory. */
int rlx_api_chat_roles(cJSON *ctx, const char *tmpl_src, size_t tmpl_len);
/* The variables a detected tool-call format's template reads beyond transformers' context, as
 * llama.cpp passes them, added to ctx where chat_template_kwargs did not set them: Firefunction
 * v2 (RLX_TC_FIREFUNCTION) reads `functions` (the request's tools as JSON text, json.dumps
 * indent 2, "" without tools) and `datetime` (now, "%b %d %Y %H:%M:%S GMT") and fails without
 * them. Other formats: nothing. 0, or -1 when out of memory. */
int rlx_api_chat_format_vars(cJSON *ctx, const rlx_api_request *r, rlx_tc_format format, time_t now);

/* continue_final_message: cuts a rendering (len bytes, NUL-terminated, modified in place) right
 * after the final message's content, as transformers' apply_chat_template does, so the model
 * continues that message. Does nothing without the option. Fails with 400 when the template
 * does not reproduce the final message. */
int rlx_api_continue_final(const rlx_api_request *r, char *rendered, rlx_api_error *e);

/* Small bodies: POST /tokenize {"content"|"prompt", "add_special", "parse_special"},
 * POST /detokenize {"tokens"}. */
/* keep_alive.c: Ollama's keep_alive, a Go duration ("5m", "1h30m", "30s", "0") or a number of
 * seconds (a JSON number or a numeric string); negative means forever and gives -1. RLX_EINVAL
 * with a message naming the value otherwise. */
int rlx_keep_alive_parse(const char *s, double *seconds, rlx_error *err);
int rlx_keep_alive_json(const cJSON *v, double *seconds, rlx_error *err);
/* /tokenize's body: content (or prompt), add_special, parse_special, with_pieces (llama-server's:
 * each token as {id, piece}), model. */
int rlx_api_parse_tokenize(const char *body, size_t len, char **text, bool *add_special,
                           bool *parse_special, bool *with_pieces, char **model, rlx_api_error *e);
int rlx_api_parse_detokenize(const char *body, size_t len, int32_t n_vocab, int32_t **ids,
                             size_t *n, char **model, rlx_api_error *e);

/* ---- UTF-8 -------------------------------------------------------------------------- */

bool rlx_api_utf8_valid(const char *s, size_t n);
/* Characters (code points) in n bytes of UTF-8: the bytes that begin one (a sequence cut at the
 * end counts as begun), as OpenAI counts text offsets. */
size_t rlx_api_utf8_chars(const char *s, size_t n);
/* A malloc'ed NUL-terminated copy with each maximal subpart of an ill-formed sequence replaced by
 * one U+FFFD (F0 9F: one; a lone continuation byte: one each; as WHATWG and Python) (NULL when out
 * of memory); *out_len (optional) receives its length. */
char *rlx_api_utf8_sanitize(const char *s, size_t n, size_t *out_len);
/* n bytes of text as a JSON string item: made valid UTF-8 (as rlx_api_utf8_sanitize), a NUL
 * byte written \u0000 and the text after it kept (cJSON's own strings end at a NUL). NULL when
 * out of memory. */
cJSON *rlx_api_json_text(const char *s, size_t n);
/* Every key and string value in a parsed body must be valid UTF-8: 400 naming the top-level
 * field that holds a bad one. */
int rlx_api_check_utf8(const cJSON *root, rlx_api_error *e);
/* A body (root parsed from body with rlx_json_parse) whose strings hold NUL (\u0000, or the raw
 * byte): a 400 naming the top-level field that holds it (C strings end at NUL: "a\u0000b" would
 * silently name session "a", or cut a prompt). 0 when there is none. */
int rlx_api_check_nul(const cJSON *root, const char *body, size_t len, rlx_api_error *e);

/* ---- responses ---------------------------------------------------------------------- */

/* Log-probability data of one generated token, texts owned by the entry. */
typedef struct rlx_api_logprob {
    char *text;                        /* the token's text: text_len bytes (a NUL among them
                                          is the byte-0 token's) and a terminating NUL */
    size_t text_len;
    float logprob;
    int n_top;
    char *top_text[RLX_MAX_TOP_LOGPROBS];
    size_t top_len[RLX_MAX_TOP_LOGPROBS];
    float top_logprob[RLX_MAX_TOP_LOGPROBS];
    size_t text_offset;                /* completions: character (code point) offset in the choice's text */
    size_t byte_offset;                /* the same in bytes (the server holds back, or drops, the
                                          entries of text not released: a stop string's) */
    bool none;                         /* no logprob (a prompt's first token): JSON null */
} rlx_api_logprob;
void rlx_api_logprob_clear(rlx_api_logprob *lp);

/* A chat choice's output parsed into content, reasoning and tool calls (proto/toolcall.h events
 * collected by rlx_api_tool_out_add; proto/tools.c). Owns its buffers. */
typedef struct rlx_api_tool_call {
    char id[40];
    char *name;
    char *args; size_t args_len, args_cap;  /* the arguments' JSON text */
} rlx_api_tool_call;

typedef struct rlx_api_tool_out {
    char *content; size_t content_len, content_cap;
    char *reasoning; size_t reasoning_len, reasoning_cap;
    rlx_api_tool_call *calls; size_t n_calls, cap_calls;
} rlx_api_tool_out;

/* Adds one parser event (RLX_ENOMEM when out of memory, the output then incomplete). */
int rlx_api_tool_out_add(rlx_api_tool_out *o, const rlx_tc_event *ev);
void rlx_api_tool_out_free(rlx_api_tool_out *o);

/* One finished choice. */
typedef struct rlx_api_choice {
    int index;
    const char *text;
    size_t text_len;
    const int32_t *tokens;             /* generated ids (native generate) */
    size_t n_tokens;
    const rlx_api_logprob *logprobs;   /* NULL when not asked */
    size_t n_logprobs;
    rlx_finish_reason finish;
    /* chat with tools: the parsed output, which makes the message (content null when empty and
     * there are calls, tool_calls, reasoning_content) and finish_reason "tool_calls" when calls
     * were made and generation stopped normally; NULL: text is the content */
    const rlx_api_tool_out *tools;
    bool calls_cut;                    /* a call was cut (max_tokens, a stop string): finish_reason
                                          stays "length" / "stop" */
} rlx_api_choice;

/* Identity of one response, constant over all its chunks. */
typedef struct rlx_api_meta {
    rlx_api_kind kind;
    char id[48];                       /* "cmpl-..." / "chatcmpl-..." */
    long long created;                 /* unix seconds */
    const char *model;
    const char *fingerprint;           /* system_fingerprint (static/borrowed), NULL: none */
    bool include_usage;                /* stream chunks carry "usage": null until the last */
} rlx_api_meta;

void rlx_api_meta_init(rlx_api_meta *m, rlx_api_kind kind, const char *model, uint64_t seq,
                       long long now);
const char *rlx_api_finish_name(rlx_finish_reason f); /* "stop", "length", ... or NULL */

/* Whole non-streamed response: completion / chat.completion / native generate object. */
char *rlx_api_response_json(const rlx_api_meta *m, const rlx_api_choice *choices, size_t n,
                            const rlx_usage *usage, const rlx_timings *timings);

/* One SSE event "data: {...}\n\n" for a streamed delta. role_first: the chat chunk that opens
 * a choice (carries "role":"assistant"). finish: RLX_FINISH_NONE on intermediate chunks. */
char *rlx_api_sse_chunk(const rlx_api_meta *m, int index, const char *text, size_t len,
                        bool role_first, const rlx_api_logprob *lps, size_t n_lps,
                        rlx_finish_reason finish);
/* Chat with tools: the chunk of one parser event of a choice's output: delta.content,
 * delta.reasoning_content, for CALL_BEGIN delta.tool_calls [{index, id, type:"function",
 * function:{name, arguments:""}}], for CALL_ARGS [{index, function:{arguments: fragment}}];
 * CALL_END and empty texts need none: "" (NULL only when out of memory). */
char *rlx_api_sse_tool_event(const rlx_api_meta *m, int index, const rlx_tc_event *ev, const rlx_api_logprob *lps,
                             size_t n_lps);
/* ... and the choice's last chunk: an empty delta and its finish_reason ("tool_calls" when
 * tool_calls and finish is RLX_FINISH_STOP). Both carry logprob entries (lps, n_lps: the
 * tokens of the chunk's text and of tags before it) as rlx_api_sse_chunk does. */
char *rlx_api_sse_tool_end(const rlx_api_meta *m, int index, rlx_finish_reason finish, bool tool_calls,
                           const rlx_api_logprob *lps, size_t n_lps);
/* The final include_usage chunk: choices [] and usage. */
char *rlx_api_sse_usage(const rlx_api_meta *m, const rlx_usage *usage);
/* "data: {\"error\":...}\n\n" */
char *rlx_api_sse_error(const rlx_api_error *e);
extern const char rlx_api_sse_done[]; /* "data: [DONE]\n\n" */

/* Native stream: {"token":id,"text":"..."}\n per token; the final line is the response
 * object of rlx_api_response_json followed by "\n". */
char *rlx_api_ndjson_token(int32_t token, const char *text, size_t len);

/* JSON lines of `rlxd serve --stdio`, each ending in "\n"; id is the request's id as JSON text
 * ("null" when it could not be read). A token event {"id","token","text"}, with "index" (the
 * choice) when index >= 0; the result {"id","ok":true,"text","token_ids","finish_reason",
 * "usage","elapsed_ms"} (+ "logprobs" when asked) of choices[0], and when n > 1 also
 * "choices":[{"index","text","token_ids","finish_reason"},...] holding every choice; a failure
 * {"id","ok":false,"error":{...},"elapsed_ms"}. */
char *rlx_api_line_token(const char *id, int index, int32_t token, const char *text, size_t len);
char *rlx_api_line_result(const char *id, const rlx_api_choice *choices, size_t n, const rlx_usage *usage,
                          double elapsed_ms);
char *rlx_api_line_error(const char *id, const rlx_api_error *e, double elapsed_ms);

/* ---- embeddings and rerank (proto/embed.c) -------------------------------------------------
 * Bodies: /v1/embeddings {"input" (a string, an array of strings, an array of token ids, or an
 * array of those arrays; at most RLX_API_MAX_INPUTS, none empty), "model", "encoding_format"
 * ("float" | "base64"), "dimensions", "user", and the extensions "truncate" (bool) and
 * "embd_normalize" (int >= -1, llama-server's)}; /embedding the same with "content" (or
 * "input"); /v1/rerank {"query", "documents" (strings), "top_n", "return_documents", "model",
 * "truncate"}. Parsed by rlx_api_parse / rlx_api_parse_json with the kind. */
#define RLX_API_MAX_INPUTS 2048
int rlx__api_parse_embed(cJSON *root, rlx_api_request *r, rlx_api_error *e);

/* An embedding request's result (the engine's final event): n floats, dim per vector, one
 * vector per input, or with per_token one per token of each input (tokens[i] of them). */
typedef struct rlx_api_embd_result {
    const float *v;
    size_t n;
    int32_t dim;
    const int32_t *tokens;
    size_t n_inputs;
    bool per_token;
} rlx_api_embd_result;

/* The response body: /v1/embeddings {"object":"list","data":[{"object":"embedding","index",
 * "embedding": floats or base64}],"model","usage":{"prompt_tokens","total_tokens"}};
 * /embedding [{"index","embedding":[[...], ...]}] (a vector per token with per_token, else the
 * pooled one); /v1/rerank {"object":"list","model","results":[{"index","relevance_score"
 * (,"document":{"text"})}] by score, best first, top_n of them,"usage"}. */
char *rlx_api_embed_response(const rlx_api_request *r, const char *model, const rlx_api_embd_result *res,
                             const rlx_usage *u);
/* The stdio result line: {"id","ok":true, the response's fields ("data" for /embedding's array),
 * "elapsed_ms"}. */
char *rlx_api_line_embed(const char *id, const rlx_api_request *r, const char *model, const rlx_api_embd_result *res,
                         const rlx_usage *u, double elapsed_ms);
/* Base64 (RFC 4648, padded) of n bytes, malloc'ed NUL-terminated; NULL when out of memory. */
char *rlx_api_base64(const void *data, size_t n);
/* f as printf's "%.17g" prints (double)f (a text that reads back as exactly that double), into
 * out (at least 32 bytes), NUL-terminated; returns its length (proto/f32text.c). */
size_t rlx_api_f32_text(float f, char *out);

#endif
