/* engine.h - the serving runtime's public face: one rlx_worker per loaded model, fed
 * rlx_requests, answering with rlx_events. Transport-independent: server/ and the CLI use it.
 *
 * Threads: each worker owns one thread that runs the scheduler step loop, and with a sessions
 * database a second one that stores session turns. rlx_worker_submit() and rlx_worker_cancel()
 * may be called from any thread. Events are delivered by calling req->on_event on the worker
 * thread, except the final event of a stored session turn, which the session writer thread
 * delivers once the turn is durable (after all of the request's token events); the callback
 * must be thread-safe and must not block (the server copies the event into a queue and wakes
 * its loop with uv_async_send).
 *
 * Ownership: rlx_worker_submit() takes ownership of the request on success AND on failure
 * (it is freed with rlx_request_free). The event and everything it points to are borrowed for
 * the duration of the callback only. After the final event (RLX_EV_DONE or RLX_EV_ERROR) no
 * further callback happens for that request. */
#ifndef RLX_ENGINE_H
#define RLX_ENGINE_H

#include "backends/dtype.h"
#include "engine/sample.h"
#include "models/tokenizer.h"
#include "models/chat_template.h"

typedef enum rlx_finish_reason {
    RLX_FINISH_NONE = 0,
    RLX_FINISH_STOP,      /* end-of-generation token or a stop string */
    RLX_FINISH_LENGTH,    /* max_tokens or context end */
    RLX_FINISH_CANCELLED, /* rlx_worker_cancel */
} rlx_finish_reason;

/* RLX_EV_PROMPT_TOKEN comes only to requests that set prompt_logprobs, before their first
 * RLX_EV_TOKEN: it is not a final event. */
typedef enum rlx_event_type { RLX_EV_TOKEN, RLX_EV_DONE, RLX_EV_ERROR, RLX_EV_PROMPT_TOKEN } rlx_event_type;

#define RLX_MAX_TOP_LOGPROBS 20

typedef struct rlx_usage {
    int32_t prompt_tokens;
    int32_t completion_tokens;
    int32_t cached_tokens;     /* prompt tokens served from the prefix/session cache */
} rlx_usage;

typedef struct rlx_timings {
    double queued_s;           /* submit -> admitted */
    double ttft_s;             /* submit -> first token */
    double prompt_s;           /* prefill time */
    double gen_s;              /* first token -> last token */
    double total_s;
} rlx_timings;

typedef struct rlx_event {
    rlx_event_type type;
    uint64_t request_id;
    /* RLX_EV_TOKEN: one generated token and the text it completes. `text` may be empty (held
     * back for UTF-8 completion or a possible stop string) and may hold text of earlier tokens.
     * RLX_EV_PROMPT_TOKEN: prompt token `token` (at prompt position 1, 2, ... in order) with its
     * logprob given the tokens before it, and top alternatives when top_logprobs > 0; no text. */
    int32_t token;
    const char *text;
    size_t text_len;
    size_t piece_len;          /* RLX_EV_TOKEN: the bytes `token` adds to the output's text, released
                                  now or later (0 for a control token the output leaves out) */
    float logprob;             /* valid when the request asked for logprobs */
    int32_t n_top;
    int32_t top_ids[RLX_MAX_TOP_LOGPROBS];
    float top_logprobs[RLX_MAX_TOP_LOGPROBS];
    /* RLX_EV_DONE: the final text not yet delivered is in text/text_len. */
    rlx_finish_reason finish;
    bool stop_string;          /* RLX_FINISH_STOP by one of the request's stop strings (the text cut there) */
    rlx_usage usage;
    rlx_timings timings;
    /* RLX_EV_ERROR */
    int error_code;            /* RLX_E* */
    const char *error_msg;
    bool error_in_grammar;     /* the request's grammar is at fault (its token references, a state
                                  past the stack bound, no token it allows): the server names the
                                  field the grammar came from */
    /* RLX_EV_DONE of an RLX_REQ_EMBED request (its only event besides an error): embd_n floats,
     * input after input, embd_dim per vector: one vector per input when pooled, one per token
     * of the input (embd_tokens[i] of them) with per-token output; embd_tokens: the tokens of
     * each input as computed (after truncation), n_inputs entries. usage.prompt_tokens is their
     * sum. A rank model's vector is its score(s) (embd_dim = the classifier's outputs). */
    const float *embd;
    size_t embd_n;
    int32_t embd_dim;
    const int32_t *embd_tokens;
    size_t n_inputs;
} rlx_event;

typedef void (*rlx_event_fn)(void *user, const rlx_event *ev);

/* What a request asks of its model: text (a generative model) or vectors (a model whose graph
 * outputs hidden states, rlx_worker_embeds). A worker takes only the kind its model serves. */
typedef enum rlx_request_kind { RLX_REQ_GENERATE = 0, RLX_REQ_EMBED } rlx_request_kind;

typedef struct rlx_request {
    uint64_t id;               /* assigned by the caller, unique per worker */
    /* The prompt's token ids (at least one): the engine takes tokens only; text is tokenized
     * before submission (server/prepare.c on the threadpool, the CLI commands themselves). */
    int32_t *prompt_ids;       /* owned (malloc) */
    size_t n_prompt;
    bool add_special;          /* the API's add_special option, for whoever tokenizes the text
                                  (the server's request template); the engine does not read it */
    rlx_sampling_params sampling; /* sampling.logit_bias owned (malloc) */
    int32_t max_tokens;        /* <= 0: up to the context end */
    bool no_generation;        /* the prompt only (its logprobs with prompt_logprobs): the request
                                  ends with RLX_FINISH_LENGTH where its first token would be sampled
                                  (OpenAI's max_tokens 0); max_tokens then 1, for admission */
    bool ignore_eos;
    char **stop;               /* owned: n_stop malloc'ed strings */
    size_t n_stop;
    int32_t top_logprobs;      /* -1: no logprobs; 0..RLX_MAX_TOP_LOGPROBS otherwise */
    /* Also deliver an RLX_EV_PROMPT_TOKEN per prompt token after the first (OpenAI's echo with
     * logprobs). The prompt is then computed in full (no prefix-cache reuse), at most
     * max_outputs of its tokens per step. */
    bool prompt_logprobs;
    char *session_id;          /* owned, NULL if none */
    /* GBNF rules (engine/grammar.h) the generated text must follow, owned, NULL: none. The
     * worker compiles them at admission; end-of-generation is sampled only where the grammar is
     * complete, and the sequence stops with RLX_FINISH_STOP once nothing else could follow. */
    char *grammar;
    /* With a grammar that writes one JSON value (json_schema, response_format): no object of it
     * repeats a key (engine/sample_json.c; a grammar of additionalProperties cannot say so). */
    bool json_keys_unique;
    /* With a grammar: when set (owned, n_grammar_triggers strings, at most 4), the grammar is
     * lazy (tool_choice "auto"): nothing is constrained until one of these strings appears in
     * the generated text, and the grammar holds from its first byte on (engine/grammar.h
     * rlx_grammar_stage_new_lazy). */
    char **grammar_triggers;
    size_t n_grammar_triggers;
    /* With a grammar, instead of grammar_triggers: lazy on a PCRE2 pattern (owned, NULL: none)
     * matched anchored against the whole generated text (tool_choice "auto" for formats whose
     * call is plain JSON at the start of the output: Llama 3, generic); the grammar holds from
     * the start of its capture group 1 once it matches in full, and never if the text stops
     * matching (engine/grammar.h rlx_grammar_stage_new_lazy). A bad pattern fails the request
     * at admission (RLX_EINVAL). */
    char *grammar_trigger_pattern;
    /* With a session: false (default) appends the prompt to the session's history (native
     * API, one turn per request); true treats the prompt as the whole conversation (OpenAI
     * routes resend every message) and only reuses the session's cached KV. */
    bool session_replace;
    /* prompt_ids[0], when it is the vocabulary's BOS, was added by the tokenizer (add_special)
     * or the chat template, not written by the client: a turn appended to a session that
     * already holds tokens continues the sequence, so that BOS is then dropped (as it is for
     * a tokenizer's BOS). */
    bool bos_added;
    /* ---- embeddings (kind RLX_REQ_EMBED, engine/worker_embed.c) ----
     * prompt_ids holds n_inputs inputs back to back; input i ends before input_ends[i] (owned,
     * increasing, the last = n_prompt; NULL with n_inputs 0: one input, the whole prompt). Each
     * input is one sequence computed whole in one step (bidirectional attention sees all of it),
     * batched with other requests' inputs; its memory is released after the step and nothing is
     * cached. Sampling, stop, max_tokens, grammar and session fields are ignored. */
    rlx_request_kind kind;
    int32_t *input_ends;
    size_t n_inputs;
    int embd_normalize;        /* llama-server's embd_normalize: -1 none, 0 max-abs (int16 range),
                                  1 taxicab, 2 Euclidean (default), > 2 p-norm (engine/pool.h) */
    bool embd_per_token;       /* a vector per token (pooling none) whatever the model pools;
                                  per-token vectors are not normalized (as llama-server) */
    bool truncate;             /* an input over the limit (rlx_worker_embd_limit) keeps its first
                                  tokens, instead of RLX_ETOOLONG */
    /* Speculative decoding by prompt lookup (engine/spec.h): the most draft tokens per step for
     * this request; -1 (rlx_request_new's default): the worker's draft_max; 0: none. Outputs are
     * the same either way; only speed differs. */
    int32_t draft_max;
    /* With a draft model (engine/draft.h): the draft stops where its top probability falls under
     * this; 0 (the default): the worker's draft_p_min. llama-server's speculative.p_min. */
    float draft_p_min;         /* < 0: 0 (draft however unsure) */
    rlx_event_fn on_event;
    void *user;
    double submitted_at;       /* set by rlx_worker_submit (rlx_now() clock) */
} rlx_request;

rlx_request *rlx_request_new(void);  /* zeroed, default sampling, top_logprobs -1 */
void rlx_request_free(rlx_request *r);

typedef struct rlx_worker_config {
    const char *model_path;
    const char *name;          /* served model name (default: file name without .gguf) */
    int n_threads;             /* <= 0: the CPUs this process may use (affinity, cgroup quota) */
    int32_t n_ctx;             /* <= 0: the model's context length */
    int kv_type;               /* RLX_F16, RLX_F32 or RLX_Q8_0, used when kv_type_set */
    bool kv_type_set;          /* false: F16 (RLX_F32 is 0, so a zeroed config cannot say F32) */
    size_t kv_mem_mib;         /* 0: enough for max_seqs full contexts */
    int32_t kv_blocks;         /* exact pool size in blocks (overrides kv_mem_mib; tests) */
    int32_t kv_block;          /* tokens per KV block, default 16 */
    int32_t max_batch_tokens;  /* default 512 */
    int32_t max_seqs;          /* default 16 */
    int32_t max_queue;         /* waiting requests beyond which submit returns RLX_EFULL; default 256 */
    const char *backend;       /* "cpu" (default), "vulkan", "cuda" */
    int device;
    const char *db_path;       /* sessions database (sqlite3), NULL: sessions live in memory only */
    double session_ttl_s;      /* <= 0: sessions never expire */
    int32_t max_sessions;      /* <= 0: 1024 */
    const char *chat_template_file; /* a Jinja chat template used instead of the GGUF's (read at
                                       start; NULL: the GGUF's, else ChatML) */
    /* Speculative decoding by prompt lookup (engine/spec.h): draft tokens per step at most;
     * 0: the default (8); < 0: off. Never for models with recurrent-state layers. */
    int32_t draft_max;
    /* A draft model (engine/draft.h) sharing the vocabulary: drafts come from it instead of the
     * prompt lookup; NULL: prompt lookup. draft_p_min: the draft stops where its top
     * probability falls under this (0: 0.75, llama.cpp's default; < 0: never stops early). */
    const char *draft_model;
    float draft_p_min;
    /* Recurrent-state checkpoints of a model with state layers (engine/memory.h): their memory
     * budget in MiB (0: the default, 256; < 0: none, such a model then shares no prefix) and
     * the prefill tokens between two (0: max_batch_tokens rounded down to a KV block). */
    int64_t state_cache_mib;
    int32_t state_ckpt_every;
    /* A folder for the tokenizer cache (models/tokenizer.h): the built tokenizer is read from
     * there when its file matches the model, else built and written there; a GPU backend keeps
     * its compiled pipelines there too (rlx_backend_config.cache_dir). NULL: no cache. */
    const char *cache_dir;
    /* Constrained sampling's helper beside the forward pass (engine/gaside.h): > 0 on, < 0 off,
     * 0 where the backend allows it (a GPU backend, or CPU threads that leave a core free). */
    int grammar_aside;
    /* Seams for tests and embedders (engine/runner.h): a backend to run on instead of creating
     * `backend` (the worker takes it, also when starting fails), and the model's memory
     * description (one entry per layer) instead of the builder's. NULL: the usual. */
    struct rlx_backend *backend_impl;
    const struct rlx_mem_layer *mem_layers;
} rlx_worker_config;

typedef struct rlx_worker rlx_worker;

typedef struct rlx_worker_stats {
    int32_t running, waiting;
    double kv_usage;           /* fraction of KV blocks in use (state slots for a model with no KV) */
    int32_t state_slots_used, state_slots_total; /* recurrent-state slots (hybrid models; else 0) */
    int32_t state_ckpt_entries;                  /* recurrent-state checkpoints held, and their bytes */
    uint64_t state_ckpt_bytes;
    uint64_t state_ckpt_hits, state_ckpt_evictions; /* requests started at one; dropped for the budget */
    uint64_t prompt_tokens, generated_tokens;
    uint64_t prefix_queries, prefix_hits;  /* in tokens */
    uint64_t preemptions;
    uint64_t embd_inputs, embd_tokens;     /* embedding inputs computed, and their tokens */
    uint64_t embd_steps;                   /* embedding steps run (inputs / steps: the mean batch) */
    uint64_t draft_tokens, draft_accepted; /* speculative decoding: drafted and kept tokens */
    uint64_t draft_positions;  /* positions a draft model computed (catching up and drafting) */
    uint64_t cpu_passes_one, cpu_passes_more; /* the model's CPU forward passes on one thread / more */
    /* constrained sampling beside the forward pass (engine/gaside.h): steps it ran beside, masks
     * it prefetched, tables its walks built, seconds it worked */
    uint64_t grammar_aside_runs, grammar_aside_prefetches;
    int64_t grammar_aside_tables;
    double grammar_aside_s;
} rlx_worker_stats;

int rlx_worker_start(rlx_worker **out, const rlx_worker_config *cfg, rlx_error *err);
/* Finishes in-flight requests if drain, else cancels them; joins the thread and frees. */
void rlx_worker_stop(rlx_worker *w, bool drain);

/* RLX_EFULL when the waiting queue is full (answer 503 + Retry-After), RLX_ETOOLONG when the
 * request can never fit (prompt ids plus max_tokens, after the session's history when the
 * worker holds it, over the context or the whole KV pool; a history read from the store is
 * checked once attached, with an RLX_EV_ERROR), RLX_EINVAL for bad parameters
 * (empty stop strings, invalid session ids included). On error no event is delivered.
 * Stop strings are matched on the detokenized text: text that may begin one is held back, a
 * match ends the request with RLX_FINISH_STOP at the token completing it (counted in usage,
 * kept in a session's history), and no part of the stop string is ever sent. */
int rlx_worker_submit(rlx_worker *w, rlx_request *req, rlx_error *err);
/* Cancels at the next step; the request then gets RLX_EV_DONE with RLX_FINISH_CANCELLED. */
void rlx_worker_cancel(rlx_worker *w, uint64_t request_id);

/* ---- sessions (callable from any thread; a worker sees only its own model's sessions, also
 * when several models share one database; sessions idle longer than session_ttl_s are gone
 * for all of these at once) ---- */
typedef struct rlx_session_info {
    char id[129];
    char model[128];
    int32_t n_tokens;
    double created, updated;   /* seconds since the Unix epoch */
    bool has_kv_snapshot;
    bool damaged;              /* stored, but its tokens cannot be read: it can only be deleted */
} rlx_session_info;

/* Most recently updated first. *out is malloc'ed (n entries); *total counts all sessions. */
int rlx_worker_sessions_list(rlx_worker *w, size_t offset, size_t limit, rlx_session_info **out, size_t *n,
                             size_t *total, rlx_error *err);
/* RLX_ENOTFOUND if absent. *tokens (optional) is malloc'ed. */
int rlx_worker_session_get(rlx_worker *w, const char *id, rlx_session_info *info, int32_t **tokens,
                           size_t *n_tokens, rlx_error *err);
/* Forgets the session, its pinned KV blocks and its snapshot. RLX_ENOTFOUND if absent. */
int rlx_worker_session_delete(rlx_worker *w, const char *id, rlx_error *err);

const char *rlx_worker_name(const rlx_worker *w);
const rlx_tokenizer *rlx_worker_tokenizer(const rlx_worker *w);
const rlx_chat_template *rlx_worker_chat_template(const rlx_worker *w); /* ChatML if none */
/* rlx_chat_template_object_arguments of that template, probed once at load */
bool rlx_worker_chat_object_arguments(const rlx_worker *w);
/* The template source in use (borrowed, lives as long as w; not NUL-terminated): the
 * chat_template_file's or the GGUF's; NULL when ChatML is used. What tool-call format
 * detection reads. */
const char *rlx_worker_chat_template_src(const rlx_worker *w, size_t *len);
/* Control tokens the output format uses as markers (e.g. Mistral's [TOOL_CALLS]): each control
 * token (not end-of-generation) whose text is one of texts[0..n) is from then on written as
 * its text in generated output (RLX_EV_TOKEN text) and seen by grammars as those bytes, so a
 * grammar literal "[TOOL_CALLS]" can be produced by the real token, as llama.cpp's grammars see
 * special tokens' pieces and its server renders its chat format's preserved tokens. Other
 * control tokens stay textless. Call once, before the first rlx_worker_submit and never
 * concurrently with one (the server does when the model is ready). Returns how many tokens were
 * marked, or RLX_ENOMEM. */
int rlx_worker_set_marker_tokens(rlx_worker *w, const char *const *texts, int n);
int32_t rlx_worker_n_ctx(const rlx_worker *w);
/* Whether the model's (or the draft model's) files changed on disk since the load (cut short,
 * written to: models/filemap.h); its forward passes fail from then on. Any thread. */
bool rlx_worker_file_changed(const rlx_worker *w, char *why, size_t cap);
/* Whether the model embeds (its graph outputs hidden states; it takes RLX_REQ_EMBED requests
 * only, a generative model RLX_REQ_GENERATE only). */
bool rlx_worker_embeds(const rlx_worker *w);
/* An embedding model's pooling (engine/pool.h rlx_pooling: the GGUF's pooling_type, none when
 * absent); -1 for a generative model. */
int rlx_worker_pooling(const rlx_worker *w);
/* Floats per output row (an embedding model's vector size; the vocabulary for a generative one). */
int32_t rlx_worker_n_embd(const rlx_worker *w);
/* The most tokens one embedding input may have: the context, the step's token budget (raised to
 * the context for embedding models) and the memory pool's capacity, whichever is smallest. */
int32_t rlx_worker_embd_limit(const rlx_worker *w);
/* The KV pool as built: element type (RLX_F16, RLX_F32, RLX_Q8_0), tokens per block, blocks. */
void rlx_worker_kv_layout(const rlx_worker *w, int *type, int32_t *block_size, int32_t *n_blocks);
void rlx_worker_get_stats(rlx_worker *w, rlx_worker_stats *st);
/* Memory the model holds: its weights' bytes and its KV pool's (and state slots', and the state
 * checkpoints' budget's) bytes. */
void rlx_worker_memory(const rlx_worker *w, size_t *weights, size_t *kv); /* the draft model's included */
/* Bytes of the weights the CPU backend keeps repacked for its kernels (in place of the file's
 * pages; 0 on other backends). */
size_t rlx_worker_packed_bytes(const rlx_worker *w);
/* The draft model's path (engine/draft.h), NULL when it drafts by prompt lookup or not at all. */
const char *rlx_worker_draft_model(const rlx_worker *w);
/* Seconds the worker's start spent in each phase of the load: mapping the GGUF (header and
 * tensor table), building the graph, compiling the plan, creating the backend and preparing the
 * plan on it (weights uploaded or repacked), the KV memory, the tokenizer, the chat template. */
typedef struct rlx_load_times {
    double map, build, compile, prepare, memory, tokenizer, chat_template;
    char tokenizer_cache[320]; /* what the tokenizer cache did: "off", "hit", "miss, written",
                                  "stale (why), rebuilt and written", "corrupt (why), rebuilt ..." */
    char pipeline_cache[128];  /* a Vulkan backend's pipeline cache (vulkan.h): its state and the
                                  driver data read and written; "" for other backends */
} rlx_load_times;
void rlx_worker_load_times(const rlx_worker *w, rlx_load_times *t);

/* ---- admission (admit.c) --------------------------------------------------------------------
 * One rule for what a request may ask of a model, applied wherever a part of it becomes known:
 * the server before tokenizing (max_tokens, logit_bias), after tokenizing (the prompt), and the
 * worker at submit and again once a session's history is attached. Pure functions of their
 * arguments, any thread. The rule, in the order checked:
 *   prompt empty            a known prompt of no token, and no session history before it;
 *   token id                a prompt id outside 0..n_vocab-1 (the first one);
 *   max_tokens              max_tokens >= n_ctx: no room is left for even one prompt token;
 *   logit_bias key          a key outside 0..n_vocab-1 (the first one);
 *   prompt too long         history + prompt >= the limit: no room for one generated token;
 *   context                 history + prompt + max(max_tokens, 1) > the limit,
 * (an embedding input, query.embed: prompt too long when prompt > the limit, no context check)
 * where the limit is n_ctx, or the KV pool's tokens when that is smaller. A limit <= 0 is not
 * checked. Callers turn a refusal into their own words: proto's rlx_api_error_from_admit for the
 * HTTP/stdio API, rlx_admit_error for the engine's rlx_error. */
typedef enum rlx_admit_reason {
    RLX_ADMIT_OK = 0,
    RLX_ADMIT_PROMPT_EMPTY,
    RLX_ADMIT_TOKEN_ID,        /* value: the id, index: its position in the prompt */
    RLX_ADMIT_MAX_TOKENS,      /* value: max_tokens, limit: n_ctx */
    RLX_ADMIT_BIAS_ID,         /* value: the key, index: its entry */
    RLX_ADMIT_PROMPT_LONG,     /* value: prompt tokens (see bound), limit: as below */
    RLX_ADMIT_CONTEXT,         /* value: max_tokens, limit: as below */
} rlx_admit_reason;

/* How well the prompt's length is known. */
typedef enum rlx_admit_bound {
    RLX_ADMIT_UNKNOWN = 0,     /* not yet (text not tokenized): taken as one token */
    RLX_ADMIT_EXACT,           /* n_prompt tokens */
    RLX_ADMIT_AT_LEAST,        /* at least n_prompt (from prompt_bytes and the tokenizer's bound) */
    RLX_ADMIT_MORE_THAN,       /* more than n_prompt (tokenizing stopped at that cap) */
} rlx_admit_bound;

typedef struct rlx_admit_limits {
    int32_t n_ctx;             /* the model's context; <= 0: unchecked */
    int32_t n_vocab;           /* <= 0: ids unchecked */
    int64_t kv_tokens;         /* tokens the KV pool holds in all; <= 0: as n_ctx */
} rlx_admit_limits;

typedef struct rlx_admit_query {
    const int32_t *ids;        /* the prompt's ids to range-check (borrowed), NULL: none */
    size_t n_prompt;           /* prompt tokens (history excluded), see bound */
    rlx_admit_bound bound;
    size_t prompt_bytes;       /* RLX_ADMIT_AT_LEAST: the text's bytes it was estimated from */
    int64_t n_history;         /* a session's tokens before the prompt */
    int32_t max_tokens;        /* <= 0: up to the end of the context */
    const rlx_logit_bias *bias; /* borrowed, NULL: none */
    size_t n_bias;
    bool embed;                /* an embedding input: nothing is generated, so the prompt may fill
                                  the limit (refused only past it: RLX_ADMIT_PROMPT_LONG) */
    bool scored;               /* a prompt scored, nothing generated (no_generation): as embed */
} rlx_admit_query;

typedef struct rlx_admit {
    rlx_admit_reason reason;
    int64_t value;             /* the offending number (see the reasons) */
    size_t index;
    int64_t limit;             /* the bound broken: n_vocab, n_ctx, or the context/KV limit */
    bool kv_pool;              /* the limit is the KV pool's, smaller than the context */
    int32_t n_ctx;             /* the model's context, for messages */
    /* the query's prompt as checked, for messages */
    size_t n_prompt;
    rlx_admit_bound bound;
    size_t prompt_bytes;
    int64_t n_history;
    int32_t max_tokens;
    bool embed;
} rlx_admit;

/* Fills *a (reason RLX_ADMIT_OK when admitted) and returns 0, RLX_EINVAL (empty prompt, token
 * id, logit_bias key) or RLX_ETOOLONG (max_tokens, prompt too long, context). */
int rlx_admit_check(const rlx_admit_limits *lim, const rlx_admit_query *q, rlx_admit *a);
/* Only the id range of a token list (may be empty), e.g. /detokenize: RLX_ADMIT_TOKEN_ID. */
int rlx_admit_tokens(int32_t n_vocab, const int32_t *ids, size_t n, rlx_admit *a);
/* The engine's sentence for a refusal (rlx_errorf into err); returns the same code as the check. */
int rlx_admit_error(const rlx_admit *a, rlx_error *err);
/* The limits of a loaded model: its context, vocabulary and KV pool. */
void rlx_worker_admit_limits(const rlx_worker *w, rlx_admit_limits *lim);

#endif
