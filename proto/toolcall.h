/* toolcall.h - the model's output as OpenAI wants it: tool calls, reasoning and content, parsed
 * incrementally from the generated text in the format the model's chat template asks for.
 *
 * Detection (rlx_tc_detect) reads the chat template's source, as llama.cpp's common/chat.cpp
 * does, and picks one of the formats below; a template with no known format gets the generic
 * JSON format ({"tool_calls":[{"name","arguments"}]} or {"response": "..."}, the whole output
 * one JSON value). The parser (rlx_tc_parser) is fed the generated text in pieces split
 * anywhere (inside tags, inside UTF-8 sequences) and reports events to a callback:
 *
 *   CONTENT / REASONING  text deltas (never split inside a UTF-8 sequence, never tag text)
 *   CALL_BEGIN           index (0, 1, ... per response), id ("call_" + 24 characters, unique per
 *                        parser; deterministic when a seed is given) and the function name
 *   CALL_ARGS            fragments of the arguments: they concatenate to one compact JSON text
 *                        (whitespace outside strings dropped, raw control characters inside them
 *                        escaped; the format's closing tag before they close breaks the call
 *                        there; formats that are not JSON, e.g. the
 *                        Qwen3-Coder XML, give an object re-serialised from the typed values)
 *   CALL_END             the call is complete
 *
 * Only text that may still turn out to be a tag is held back (and, as llama.cpp trims them,
 * reasoning's trailing whitespace until more text follows; whitespace that opens reasoning, or
 * content after reasoning or a call, is dropped). A function name (gpt-oss: a header) longer
 * than 300 (512) bytes means the text was not a call. Where the name is known before
 * the arguments (name-then-arguments formats: Functionary, Mistral [ARGS], DeepSeek, Kimi,
 * gpt-oss, Qwen3-Coder XML) the arguments stream as they are generated; so do those of a call
 * object (after a start marker: Hermes <tool_call>, <|python_tag|>; an element of a list after
 * one: Mistral's JSON array, Granite, Apriel, Firefunction; Llama 3's whole-output call) that
 * opens {"name": "N", "arguments"|"parameters": { - the order a forcing grammar writes - with
 * the object's later members read past and a closing brace or bracket the model forgot before
 * the closing tag (or the end) supplied. A call object whose keys come in another order is
 * reported whole once it closes, as are the generic format's wrapper objects. A list is text
 * while none of its calls was reported (a first element that is not a call), and broken
 * (RLX_EFORMAT, below) by a later one.
 *
 * Bad output, as llama.cpp treats it: a call whose body turns out not to be a call (no JSON, no
 * name, invalid JSON) before its CALL_BEGIN was reported is returned as content, tag included,
 * and parsing goes on after the start tag; so is one the output ends inside (llama.cpp returns
 * unterminated calls as content). A call cut off or broken after its CALL_BEGIN is ended
 * (CALL_END) and rlx_tc_finish then fails with RLX_EFORMAT, naming it (its arguments may be
 * incomplete JSON): the caller reports an error or finish_reason "length".
 *
 * Ownership and threads: a parser belongs to one response and is used by one thread at a time;
 * rlx_tc_info and the format table are static and immutable. Event texts are valid only during
 * the callback. */
#ifndef RLX_TOOLCALL_H
#define RLX_TOOLCALL_H

#include "backends/rlx.h"
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum rlx_tc_format {
    RLX_TC_GENERIC,        /* {"tool_calls":[{"name","arguments"}]} | {"response": "..."} */
    RLX_TC_HERMES,         /* Hermes 2/3, Qwen2.5, Qwen3: <tool_call>{"name","arguments"}</tool_call> */
    RLX_TC_QWEN3_CODER,    /* <tool_call><function=N><parameter=P>v</parameter></function></tool_call> */
    RLX_TC_LLAMA3,         /* {"name","parameters"} (whole output), <|python_tag|>, <|eom_id|> */
    RLX_TC_MISTRAL,        /* [TOOL_CALLS][{...}] and [TOOL_CALLS]name[ARGS]{...} */
    RLX_TC_DEEPSEEK,       /* R1: <｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{}\n```; V3.1: N<｜tool▁sep｜>{} */
    RLX_TC_FUNCTIONARY_V31, /* <function=N>{...}</function>, <|python_tag|>code */
    RLX_TC_FUNCTIONARY_V32, /* >>>N\n{...}; >>>all\ntext is content */
    RLX_TC_GRANITE,        /* <|tool_call|>[{"name","arguments"}] */
    RLX_TC_FIREFUNCTION,   /*  functools[{"name","arguments"}] */
    RLX_TC_KIMI_K2,        /* <|tool_call_begin|>functions.N:0<|tool_call_argument_begin|>{}<|tool_call_end|> */
    RLX_TC_GPT_OSS,        /* harmony channels: analysis, commentary to=functions.N, final */
    RLX_TC_APRIEL,         /* Apriel 1.5/1.6: <tool_calls>[{"name","arguments"}]</tool_calls> */
    RLX_TC_N_FORMATS
} rlx_tc_format;

#define RLX_TC_MAX_TRIGGERS 4

typedef struct rlx_tc_info {
    rlx_tc_format format;
    const char *name;          /* "hermes", "qwen3-coder", ... */
    bool thinks;               /* the model reasons first: <think>...</think> (or gpt-oss analysis) */
    const char *reasoning_open, *reasoning_close; /* "<think>", "</think>"; NULL when !thinks */
    /* strings whose appearance in the output starts a tool call (for a lazy grammar) */
    const char *triggers[RLX_TC_MAX_TRIGGERS];
    int n_triggers;
    bool call_at_start;        /* a call may also be the whole output, opening with '{' (Llama 3
                                  JSON, generic): a lazy grammar must then watch the first byte */
} rlx_tc_info;

/* The format a chat template's source asks for (src NULL: the ChatML fallback -> generic). */
void rlx_tc_detect(const char *src, size_t len, rlx_tc_info *out);
/* The info of a format (for tests and overrides). */
void rlx_tc_info_of(rlx_tc_format f, rlx_tc_info *out);
const char *rlx_tc_format_name(rlx_tc_format f);

typedef enum rlx_tc_event_kind {
    RLX_TC_CONTENT,
    RLX_TC_REASONING,
    RLX_TC_CALL_BEGIN,
    RLX_TC_CALL_ARGS,
    RLX_TC_CALL_END,
} rlx_tc_event_kind;

typedef struct rlx_tc_event {
    rlx_tc_event_kind kind;
    int index;                 /* calls: the call's index in the response */
    const char *id, *name;     /* CALL_BEGIN (id also on ARGS/END) */
    const char *text;          /* CONTENT, REASONING, CALL_ARGS */
    size_t len;
} rlx_tc_event;

/* Returns 0 to go on; a nonzero value stops the parser, which returns it. */
typedef int (*rlx_tc_sink)(void *user, const rlx_tc_event *ev);

typedef struct rlx_tc_opts {
    const cJSON *tools;        /* borrowed during rlx_tc_parser_new (copied): types XML values */
    const char *prompt;        /* the rendered prompt or its tail (NULL: none): a prompt that ends
                                  opening <think> starts the output in reasoning, Functionary
                                  v3.2's ">>>" in a function name */
    bool seeded;               /* ids from seed and prompt (deterministic), else from a per-process source */
    uint64_t seed;
    uint64_t prompt_hash;      /* seeded: rlx_tc_prompt_hash of the whole rendered prompt (0: of `prompt`) */
    bool reasoning_only;       /* no tools (or tool_choice "none"): only the reasoning is split from
                                  the content; call markers stay text */
    bool in_reasoning;         /* the output continues an open reasoning block (continue_final_message
                                  of "<think>\nI think"), whatever the prompt's end says */
    bool reasoning_raw;        /* reasoning_format "none": a reasoning block is content, as text
                                  (calls are still parsed; gpt-oss's channels are not text) */
} rlx_tc_opts;

typedef struct rlx_tc_parser rlx_tc_parser;

/* NULL when out of memory. */
rlx_tc_parser *rlx_tc_parser_new(const rlx_tc_info *info, const rlx_tc_opts *opts);
/* FNV-1a of a prompt's bytes (NULL: ""), never 0: what seeded call ids mix with the seed, so an
 * agent that sends one seed on every turn gets new ids as its whole history grows. */
uint64_t rlx_tc_prompt_hash(const char *prompt);
void rlx_tc_parser_free(rlx_tc_parser *p);
/* Feeds the next piece of generated text. Returns 0, RLX_ENOMEM, or the sink's nonzero value. */
int rlx_tc_feed(rlx_tc_parser *p, const char *text, size_t len, rlx_tc_sink sink, void *user);
/* End of output: reports what was held back. RLX_EFORMAT (err names the call) when a call was
 * cut off or broken after its CALL_BEGIN; the parser takes no more text after it. */
int rlx_tc_finish(rlx_tc_parser *p, rlx_tc_sink sink, void *user, rlx_error *err);
/* The message naming the first call the model broke in the text fed so far (rlx_tc_feed:
 * arguments that are not JSON, text where a parameter belongs, ...), or NULL. Such a call makes
 * rlx_tc_finish fail whatever comes after, so a caller may end the output there; a call the
 * end of the output cuts is rlx_tc_finish's alone to report (NULL here during it). */
const char *rlx_tc_broken(const rlx_tc_parser *p);
/* Where the text fed so far has left the parser (for a grammar that starts when reasoning ends
 * or a call opens): inside reasoning, inside a tool call (after its start marker), or else. */
typedef enum rlx_tc_where { RLX_TC_IN_CONTENT, RLX_TC_IN_REASONING, RLX_TC_IN_CALL } rlx_tc_where;
rlx_tc_where rlx_tc_position(const rlx_tc_parser *p);
/* The texts the format reads as markers (start markers, what ends a name, dropped and closing
 * markers, triggers, and gpt-oss's harmony tokens): up to max of them into out (static
 * strings); returns how many. The server gives the ones that are control tokens of the model's
 * vocabulary their text in output and grammars (rlx_worker_set_marker_tokens). */
int rlx_tc_marker_texts(const rlx_tc_info *info, const char **out, int max);
/* Whether the output, given the prompt, starts inside reasoning (the prompt ends opening it). */
bool rlx_tc_prompt_opens_reasoning(const rlx_tc_info *info, const char *prompt);
/* Whether the prompt ends with a closed reasoning block (a thinking template with thinking
 * turned off writes an empty one, "<think>\n\n</think>"): the output is the answer, with no
 * reasoning of its own. */
bool rlx_tc_prompt_closes_reasoning(const rlx_tc_info *info, const char *prompt);

#endif
