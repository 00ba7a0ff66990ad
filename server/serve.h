/* serve.h - internals of `rlxd serve` shared by the daemon's files (not a public API).
 *
 * Threads: everything here lives on the one libuv loop thread, except rlx_srv.queue, which
 * worker threads fill (under qlock) from their event callbacks before waking the loop with
 * uv_async_send.
 *
 * Ownership: rlx_srv owns the model slots, the MHD daemon and the event queue. A job is
 * owned by the server; its sink (an HTTP connection or a stdio line) only borrows it, and a
 * job is freed once every engine request of it has delivered its final event and the sink
 * has let go (rlx_job_detach). */
#ifndef RLX_SERVE_H
#define RLX_SERVE_H

#include "engine/engine.h"
#include "proto/proto.h"
#include "server/config.h"
#include "server/metrics.h"
#include "server/model_policy.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <uv.h>

typedef struct rlx_srv rlx_srv;
typedef struct rlx_job rlx_job;
typedef struct rlx_conn rlx_conn;
typedef struct rlx_call rlx_call;

/* Threadpool work of a request (work.c): the server lists it so that shutdown can uv_cancel what
 * has not started, and holds big work back while half the pool runs big work already. */
typedef struct rlx_work {
    uv_work_t req;                 /* req.data: the owner's task */
    uv_work_cb work;
    uv_after_work_cb done;
    bool big, waiting;             /* waiting: in srv->big_head, not yet queued in libuv */
    struct rlx_work *prev, *next;  /* srv->works, or srv->big_head while waiting */
} rlx_work;

/* A served model (models.c): a -m entry or one found in --models-dir, loaded at start (-m) or
 * when a request names it, unloaded when idle past its keep-alive or to make room
 * (model_policy.h). Loop thread, except load_work/unload_work, which touch only w_new/w_old. */
#define RLX_MODEL_SIG 4
typedef struct rlx_model_slot {
    rlx_srv *srv;
    const rlx_serve_model *cfg;    /* the -m entry in the config, or own */
    rlx_serve_model own;           /* a --models-dir model's name and path (owned) */
    bool removed;                  /* its file left --models-dir while it was in use: it serves on
                                      and its slot goes once it is unloaded */
    uint32_t n_present;            /* a --models-dir split set's parts on disk at its scan: a rescan that
                                      finds more (the set completed, a part restored) reads it again */
    int64_t sig[RLX_MODEL_SIG];    /* the file's size and mtime and its profile files' (.rlx.ini,
                                      .rlx.toml) mtimes when found */
    rlx_worker_config wc;          /* the server-wide settings with the profile's over them */
    rlx_profile prof;              /* owned: its compile profile (<model>.rlx.toml or .ini, then the INI's
                                      [model.NAME] over it), profile.h; wc borrows its strings */
    rlx_worker *w;                 /* owned while READY, else NULL */
    rlx_worker *w_new;             /* the threadpool's load result, taken by the loop */
    rlx_worker *w_old;             /* being stopped on the threadpool (UNLOADING) */
    rlx_model_state state;
    char lname[192], lpath[512];   /* cfg's name and path escaped for the log (rlx_log_escape) */
    rlx_error err;                 /* why loading failed (FAILED) */
    int64_t fail_sig[RLX_MODEL_SIG]; /* FAILED: the files' signature then (rlx_model_signature) */
    bool boot;                     /* a -m model: loaded at start; a failure there stops the daemon */
    bool booting;                  /* its start-up load runs: requests get 503, /health too */
    uv_work_t load;                /* the load or the unload on the libuv threadpool */
    uv_timer_t idle_timer;         /* keep-alive: unloads once idle that long */
    int users;                     /* jobs and threadpool tasks using w (rlx_srv_model_hold) */
    struct rlx_call *wait_head, *wait_tail; /* requests waiting for the load (rlx_srv_model_wait) */
    size_t n_waiting;
    double last_used;              /* rlx_now() when its last user let go (LRU) */
    double keep_alive;             /* seconds it stays loaded once idle, 0: unload then, < 0: forever */
    bool unload_asked;             /* POST /models/unload, or room another model waits for: unload
                                      once idle (new requests wait meanwhile) */
    bool drain_after_load;         /* QUEUED/LOADING, and room another model waits for: once loaded,
                                      the requests that waited for it run, then it drains */
    bool wake_waiters;             /* its unload was cancelled: its waiting requests run (wake_timer) */
    uint64_t blocked;              /* > 0: requests wait for room that models draining will leave
                                      (the order in which models began to wait) */
    uint64_t bytes;                /* memory estimate: the weights, then weights + KV once loaded */
    double load_t0, load_s;        /* the last load's start and duration */
    double prefetch_s;             /* of which reading the files (load_work writes it) */
    _Atomic int load_permille;     /* LOADING: the files read so far (the threadpool writes it) */
    uint64_t n_loads, n_load_failures, n_unloads, n_evictions;
    const rlx_tokenizer *tok;      /* borrowed from w */
    int32_t n_vocab;
    char bos[128], eos[128];       /* texts of the special tokens, for chat templates */
    rlx_tc_info tc;                /* the tool-call format its chat template asks for */
    long long created;             /* load time, unix seconds */
} rlx_model_slot;

/* One engine request (one choice) of a job. */
typedef struct rlx_choice {
    rlx_job *job;
    int index;
    uint64_t req_id;
    bool submitted, final;         /* final: RLX_EV_DONE or RLX_EV_ERROR seen */
    char *text; size_t len, cap;   /* released text (with the echo prefix) */
    int32_t *tokens; size_t n_tokens, cap_tokens;
    rlx_api_logprob *lps; size_t n_lps, cap_lps;
    size_t lp_offset;              /* byte offset in text of the next logprob entry */
    size_t lp_chars;               /* the same in characters (code points): its text_offset */
    size_t echo_len;               /* echo: bytes of text that are the prompt */
    size_t n_prompt_lps;           /* echo + logprobs: lps[0..n) are the prompt's tokens */
    size_t lp_sent;                /* stream: generated entries before this index were sent */
    size_t lp_held;                /* stream with a parser (tc): entries from here up to lp_sent
                                      are released and wait for the next chunk with text */
    size_t prompt_lp_offset;       /* byte offset of the next prompt token's entry */
    size_t prompt_counted, prompt_chars; /* the echoed text's characters before byte prompt_counted */
    bool prompt_text_begun;        /* a prompt token with text was seen (its prefix space dropped) */
    bool echo_pending;             /* stream: the echo chunk waits for the prompt's logprobs */
    rlx_finish_reason finish;
    bool stop_string;              /* finish STOP by a client's stop string, not the model's end */
    bool calls_cut;                /* its last call was cut by max_tokens or a stop string */
    rlx_usage usage;
    rlx_timings timings;
    /* Event hand-over (jobs.c): the final event's queue entry is allocated at submit, so the
     * final event always reaches the loop; ev_lost (touched only by the threads that deliver
     * this choice's events, one after the other) records an event that could not be queued,
     * and the final event then fails the job. */
    struct rlx_qevent *final_ev;
    bool ev_lost;
    /* chat with tools (tool_choice not "none", a sink with tool_event): the output parsed into
     * content, reasoning and calls (owned; loop thread) */
    rlx_tc_parser *tc;
    rlx_api_tool_out tout;
} rlx_choice;

/* A front end's sink: how a job's response reaches its client. The job keeps the engine's
 * bookkeeping (choices, events, usage, finish) and calls these on the loop thread; they format
 * with proto's formatters into the job's output queue (rlx_job_out_take / _put), which the front
 * end drains (j->out[off..len)). A new front end is one file that implements them. */
typedef struct rlx_sink_ops {
    /* a stream's every choice was submitted: its opening bytes (optional) */
    void (*begin)(rlx_job *j);
    /* a stream's released piece of a choice: token (its id), its text, its logprob entry (NULL
     * when not asked) */
    void (*piece)(rlx_job *j, rlx_choice *ch, int32_t token, const char *text, size_t n, const rlx_api_logprob *lps,
                  size_t n_lps);
    /* a stream's choice with a tool-call parser (ch->tc): one parser event, in place of pieces'
     * text, with the logprob entries released since the last chunk when the event makes one
     * (NULL: the front end takes no tool calls and chat output stays text) */
    void (*tool_event)(rlx_job *j, rlx_choice *ch, const rlx_tc_event *ev, const rlx_api_logprob *lps, size_t n_lps);
    /* a stream's choice ended well (ch->finish set): its last text (optional; with ch->tc the
     * text went to the parser and n is 0) */
    void (*choice_end)(rlx_job *j, rlx_choice *ch, const char *text, size_t n, const rlx_api_logprob *lps,
                       size_t n_lps);
    /* the end of the response: every choice is final (the total in j->total) ... */
    void (*finish)(rlx_job *j);
    /* ... or the job failed (j->err); before a stream began (!j->started) nothing was sent */
    void (*fail)(rlx_job *j);
    /* whether the whole response is one piece, which an error replaces when part of it was
     * lost (a stream's sent bytes cannot be taken back) */
    bool (*whole)(const rlx_job *j);
    /* bytes were queued, or the job finished: wake the front end (it may detach, freeing j) */
    void (*notify)(rlx_job *j);
} rlx_sink_ops;

struct rlx_job {
    rlx_srv *srv;
    rlx_job *prev, *next;          /* srv->jobs list */
    rlx_model_slot *model;
    rlx_api_request req;           /* owned */
    rlx_api_meta meta;
    rlx_choice *choices;
    size_t n_choices, n_submitted, n_final;
    /* output for the sink: bytes out[off..len) not yet taken */
    char *out; size_t off, len, cap;
    bool finished;                 /* the whole response is in out */
    bool out_lost;                 /* bytes could not be added to out (out of memory): a stream
                                      must end with an error */
    int status;                    /* HTTP status of the response */
    bool failed;                   /* err holds the first error */
    rlx_api_error err;
    bool client_gone;
    bool preparing;                /* prepare.c's work runs on the threadpool: the job stays */
    rlx_call *prep;                /* that call while the sink holds the job (dropped on detach) */
    int32_t *chat_ids;             /* chat: the rendered prompt's tokens (owned) */
    uint64_t prompt_hash;          /* rlx_tc_prompt_hash of the whole prompt (seeded call ids) */
    char *prompt_tail;             /* chat with tools: the rendered prompt's last bytes (owned),
                                      which say whether the output starts in reasoning */
    bool continues_reasoning;      /* continue_final_message of an assistant message whose
                                      reasoning block is open: the output goes on inside it */
    size_t n_chat_ids;
    char **echo;                   /* echo: each prompt's text (owned, n_prompts) */
    int32_t prompt_tokens;         /* prompt tokens submitted, once per prompt (not per choice) */
    bool started;                  /* every choice was submitted: a stream may begin */
    bool defer_start;              /* a constrained stream begins at its first token (or end), so
                                      that a grammar failing before any output is a plain 400 */
    bool aborted;                  /* ended by the server (grace period over), not by the engine */
    const char *line_id;           /* stdio's sink: the client's id as JSON (borrowed from it) */
    const rlx_sink_ops *ops;       /* the front end's formats (static) */
    void *sink;                    /* the front end's state (a connection, a line); NULL once detached */
    double t_start;
    rlx_usage total;
    /* embedding kinds (rlx_api_kind_embeds): one engine request holds every input; its result
     * (owned) once the final event came */
    float *embd;
    size_t embd_n;
    int32_t embd_dim;
    int32_t *embd_tokens;
    size_t embd_inputs;
};

typedef struct rlx_qevent {
    struct rlx_qevent *next;
    rlx_choice *choice;
    rlx_event ev;                  /* ev.text / ev.error_msg / ev.embd / ev.embd_tokens point to the
                                      owned copies below */
    char *text, *msg;
    float *embd;
    int32_t *embd_tokens;
    bool lost;                     /* final event: an earlier event (or this one's text) was lost */
} rlx_qevent;

/* A front end: how clients reach the daemon (HTTP, --stdio). cmd_serve.c drives the one the
 * configuration picks through this table and knows no front end by name; with rlx_sink_ops (how
 * a job's response reaches a client) a new front end is one file. Loop thread. */
typedef struct rlx_front_ops {
    int (*start)(rlx_srv *s, rlx_error *err);  /* before the models load */
    void (*models_ready)(rlx_srv *s);          /* optional: every model loaded */
    void (*quiesce)(rlx_srv *s);               /* SIGTERM/SIGINT or a failed load: accept no more */
    void (*end_tasks)(rlx_srv *s);             /* optional: grace period over, answer what waits on
                                                  threadpool calls now (503 "shutting down") */
    void (*kick)(rlx_srv *s);                  /* optional: events were handled, run the front end */
    bool (*idle)(rlx_srv *s);                  /* nothing in flight that holds the exit */
    void (*stop)(rlx_srv *s);                  /* optional: shutdown, before the workers stop */
    void (*close)(rlx_srv *s);                 /* optional: after the workers stopped (run the loop after) */
    void (*free)(rlx_srv *s);                  /* optional: once its handles are closed */
} rlx_front_ops;
extern const rlx_front_ops rlx_http_front;  /* http.c */
extern const rlx_front_ops rlx_stdio_front; /* stdio.c */

struct rlx_srv {
    rlx_serve_config *cfg;
    const rlx_front_ops *front;    /* the front end serving (static) */
    uv_loop_t *loop;
    rlx_model_slot **models;       /* n_models slots (models_scan.c; each allocated on its own, so
                                      a slot never moves): the -m ones, then --models-dir's */
    size_t n_models, cap_models;
    size_t n_booting;              /* -m models still loading at start */
    uint64_t block_seq;            /* the last rlx_model_slot.blocked given */
    size_t n_dir_models;           /* of which found in --models-dir */
    double last_scan;              /* rlx_now() of the last --models-dir scan */
    uv_async_t async;
    uv_mutex_t qlock;
    rlx_qevent *qhead, *qtail;
    uv_signal_t sigterm, sigint, sighup; /* SIGHUP stops as SIGTERM (a closed terminal) */
    uv_timer_t drain_timer;
    uv_timer_t wake_timer;         /* runs rlx_models_wake on the loop, outside any request's handler */
    struct MHD_Daemon *mhd;
    uv_poll_t mhd_poll;
    uv_timer_t mhd_timer;
    int port;                      /* bound port */
    rlx_metrics metrics;
    uint64_t next_id;
    int n_conns;                   /* sockets MHD holds open */
    unsigned n_closed;             /* sockets MHD has closed, ever (http.c's kick compares) */
    int n_requests;                /* requests being answered, against --max-connections */
    struct rlx_sock *wait_head, *wait_tail; /* http.c: sockets with no request being answered
                                      (still sending one, or idle), oldest first */
    uv_timer_t wait_timer;         /* http.c: the oldest waiting socket's --request-timeout */
    rlx_conn *conns;
    rlx_job *jobs;
    size_t n_jobs;
    size_t n_tasks;                /* threadpool work in flight that uses a model */
    rlx_work *works;               /* that work, for uv_cancel at shutdown */
    rlx_work *big_head, *big_tail; /* big work waiting for a thread (FIFO) ... */
    int n_big_running;             /* ... while this much runs (at most half the threadpool) */
    bool grace_over;               /* stopping and the grace period has passed: end everything */
    bool stopping;                 /* SIGTERM/SIGINT or stdin EOF: drain then exit */
    double stop_t0;
    int exit_code;
    void *stdio;                   /* stdio.c state in --stdio mode */
    char fingerprint[64];          /* system_fingerprint: version and backend */
    char cache_dir[4096];          /* the tokenizer cache's folder ("" : off), the workers borrow it */
};

/* jobs.c */
int rlx_srv_queue_init(rlx_srv *s);
/* Starts a job from a parsed request (moved into the job; *req is zeroed). For chat, the
 * prompt is rendered here with the model's template. On error nothing was started for the
 * caller (a partly submitted job cleans itself up) and e says why. */
int rlx_job_start(rlx_srv *s, rlx_model_slot *m, rlx_api_request *req, const rlx_sink_ops *ops, void *sink,
                  rlx_job **out, rlx_api_error *e);
/* A sink's output: appended whole or not at all (once bytes were lost nothing more is added and
 * the job fails, see rlx_sink_ops.whole); _take frees s, NULL meaning a formatter ran out of
 * memory (the piece is lost). */
void rlx_job_out_put(rlx_job *j, const char *s, size_t n);
void rlx_job_out_take(rlx_job *j, char *s);
/* The job's choices as proto's rlx_api_choice (borrowing their texts), malloc'ed; NULL when out
 * of memory. */
/* The engine requests a job of r submits: n choices of each prompt (a chat: one prompt), or one
 * carrying every input of an embedding kind. */
size_t rlx_job_n_requests(const rlx_api_request *r);
/* For the access logs: a job's prompt and completion tokens; one cut short (the client gone,
 * ended at shutdown) counts what it got so far. */
void rlx_job_log_tokens(const rlx_job *j, int32_t *prompt, int32_t *completion);
rlx_api_choice *rlx_job_api_choices(const rlx_job *j);
/* The sink lets go: an unfinished job is cancelled; the job is freed when it can be. */
void rlx_job_detach(rlx_job *job);
void rlx_srv_cancel_all(rlx_srv *s);
/* Grace period over: cancels queued threadpool work (its done callbacks answer 503), and ends
 * every job still running with a final error event (503 "shutting down") for its sink. */
void rlx_srv_end_all(rlx_srv *s);
/* Shutdown, after the workers stopped: handle what they queued, then free what is left. */
void rlx_srv_drain_queue(rlx_srv *s);
void rlx_srv_free_jobs(rlx_srv *s);
/* prepare.c, on the threadpool: renders and tokenizes the job's prompts (into req.prompts[].ids
 * or chat_ids), checks them against vocabulary and context, and detokenizes echoed prompts. */
int rlx_job_prepare(rlx_job *j, rlx_api_error *e);
/* A prompt of len bytes that the context cannot hold whatever its tokens (the tokenizer's bound on
 * bytes per token): 400 context_length_exceeded, decided without tokenizing. */
int rlx_job_check_prompt_bytes(const rlx_job *j, size_t prompt, size_t len, rlx_api_error *e);
/* The parameter a prompt problem names: "messages", "input_ids" or "prompt". */
const char *rlx_job_prompt_param(const rlx_job *j, size_t prompt);
/* The admission rule (engine.h) for one prompt of the job against the model's context and
 * vocabulary: 0, or the API's 400 in e naming the prompt's parameter or max_tokens. */
int rlx_job_admit(const rlx_job *j, size_t prompt, const rlx_admit_query *q, rlx_api_error *e);

/* Between jobs.c (the job) and choice.c (a choice as it grows); loop thread only. */
void rlx__job_oom(rlx_job *j);           /* part of the answer is lost: the job fails (500), stops */
void rlx__job_cancel_open(rlx_job *j);   /* cancels the engine requests still running */
int rlx__job_tc_start(rlx_job *j, rlx_api_error *e); /* chat with a sink taking them: the parsers */
int rlx__grow(void **p, size_t *cap, size_t need, size_t elem);
bool rlx__choice_text_append(rlx_choice *ch, const char *s, size_t n);
/* A logprob entry (ev NULL: without logprob, a prompt's first token) at *offset of the text
 * (prompt_lp_offset: the echoed prompt's, else the generated text's). */
rlx_api_logprob *rlx__choice_add_logprob(rlx_job *j, rlx_choice *ch, int32_t token, const rlx_event *ev, size_t *offset);
void rlx__choice_token(rlx_job *j, rlx_choice *ch, const rlx_event *ev); /* a generated token's event */
void rlx__choice_tc_feed(rlx_choice *ch, const char *s, size_t n);
void rlx__choice_tc_finish(rlx_job *j, rlx_choice *ch); /* the output ended */
/* The entries released since the last call: lps[*from, *from + return); final drops the rest. */
size_t rlx__choice_lps_released(rlx_choice *ch, bool final, size_t *from);
/* A name or path from the file system added to o as JSON text, bytes that are not UTF-8 (a file
 * named in another encoding) as U+FFFD: one such file cannot make a whole listing invalid JSON
 * (routes.c; any thread). */
void rlx__json_add_fs_text(cJSON *o, const char *key, const char *s);
/* Names that parameter in e (for the engine's own RLX_ETOOLONG, e.g. the KV pool's limit). */
void rlx_job_context_param(const rlx_job *j, size_t prompt, size_t n_prompt, rlx_api_error *e);
/* Renders a chat request's messages with the model's template (malloc'ed). */
int rlx_render_chat(rlx_model_slot *m, const rlx_api_request *r, char **out, rlx_api_error *e);

/* embed_job.c: the embedding kinds' part of a job (one engine request for all inputs) */
/* Whether model m serves a request of kind k; else the 400 naming the routes it serves. */
int rlx_embed_check_model(const rlx_model_slot *m, const rlx_api_request *r, rlx_api_error *e);
/* At most this many values (tokens x dimension) in one answer of vectors per token. */
#define RLX_EMBED_MAX_TOKEN_VALUES (8 << 20)
/* prepare.c's work for an embedding job (threadpool): inputs tokenized (rerank: query and
 * document pairs as llama-server formats them), ids and lengths checked, and an answer of one
 * vector per token bounded by RLX_EMBED_MAX_TOKEN_VALUES. */
int rlx_embed_prepare(rlx_job *j, rlx_api_error *e);
/* The engine request of an embedding job (every input), NULL when out of memory. */
rlx_request *rlx_embed_make_request(const rlx_job *j, uint64_t id);
/* The job's result for proto's formatters. */
void rlx_embed_result(const rlx_job *j, rlx_api_embd_result *res);
/* The parameter an input problem names: "input", "content" or "documents". */
const char *rlx_embed_param(const rlx_job *j);

/* work.c: queues threadpool work (counted in n_tasks; big: a big prompt's parse, preparation or
 * tokenizing, held back while half the pool runs such work). done must call rlx_srv_work_done
 * first; it may also be called with UV_ECANCELED (shutdown) or UV_EIO without work having run. */
#define RLX_BIG_WORK_BYTES (64 * 1024) /* text (body, prompt) that makes threadpool work big */
int rlx_srv_queue_work(rlx_srv *s, rlx_work *w, bool big, uv_work_cb work, uv_after_work_cb done);
void rlx_srv_work_done(rlx_srv *s, rlx_work *w);
/* Shutdown: cancels the work that has not started (done gets UV_ECANCELED). */
void rlx_srv_cancel_work(rlx_srv *s);

/* work.c: a call - threadpool work that answers a client (an HTTP connection, a job's sink)
 * which may leave while it runs. The one protocol for "run this on the threadpool and come back
 * to the loop if the client is still there": the client keeps a handle (*slot) on the call while
 * it is in flight; a client that leaves calls rlx_call_drop(slot) and is then never called back.
 * done runs on the loop exactly once: status 0 (run ran), UV_ECANCELED (shutdown, run did not
 * run) or UV_EIO (could not be queued after waiting); client is the one given at start, or NULL
 * once dropped. *slot is cleared before done runs, so done may start the client's next call; done
 * owns the call's memory (it may free it), and the loop may exit after it (rlx_srv_maybe_exit). */
typedef void (*rlx_call_run_fn)(rlx_call *call);                           /* threadpool */
typedef void (*rlx_call_done_fn)(rlx_call *call, void *client, int status); /* loop */
struct rlx_call {
    rlx_work work;
    rlx_srv *srv;
    void *client;                  /* NULL once the client let go */
    rlx_call **slot;               /* the client's handle on this call; NULL once let go or done */
    rlx_call_run_fn run;
    rlx_call_done_fn done;
    struct rlx_call *wait_next;    /* models.c: the next request waiting for the same model's load */
};
/* Queues call (counted in n_tasks; big as for rlx_srv_queue_work) and sets *slot. On failure
 * (RLX_EIO) nothing was queued, *slot is untouched and done will not run. */
int rlx_call_start(rlx_srv *s, rlx_call *call, bool big, void *client, rlx_call **slot, rlx_call_run_fn run,
                   rlx_call_done_fn done);
/* The client leaves: its call (if any) will come back with client NULL; *slot becomes NULL. */
void rlx_call_drop(rlx_call **slot);

/* http.c */
int rlx_http_start(rlx_srv *s, rlx_error *err);
void rlx_http_quiesce(rlx_srv *s);    /* stop accepting */
void rlx_http_kick(rlx_srv *s);       /* MHD_run + re-arm the timer */
void rlx_http_stop(rlx_srv *s);
void rlx_http_resume_all(rlx_srv *s);
/* Grace period over: requests waiting on threadpool tasks get the 503 "shutting down" now. */
void rlx_http_end_tasks(rlx_srv *s);
/* No request is being answered: the connections left (if any) are still sending their bodies. */
bool rlx_http_idle(rlx_srv *s);
/* The clients of running requests that have hung up but whose hang-up the loop has not handled
 * yet: handled now (their requests cancelled), so that a session's next turn, sent just after
 * its client closed the previous one, finds the session being freed, not busy (a 503). */
void rlx_http_reap_hangups(rlx_srv *s);

/* One HTTP request on the loop thread (http.c owns it; routes.c fills the answer). */
struct rlx_conn {
    rlx_srv *srv;
    struct rlx_conn *prev, *next;  /* srv->conns */
    struct MHD_Connection *mc;
    struct rlx_sock *sock;         /* http.c: the socket's state (MHD's socket context) */
    bool accessed;                 /* the headers are in: on_access has run, c is in srv->conns */
    bool counted;                  /* counted in srv->n_requests */
    bool unread;                   /* the stream was cancelled: over --max-pending-bytes unread */
    char method[16], path[256];
    char *body; size_t body_len, body_cap;
    bool too_large, routed;
    bool suspended;                /* MHD_suspend_connection called and not yet resumed */
    bool gone;                     /* the client hung up while we waited */
    uv_poll_t poll;                /* watches the socket for hang-up while suspended */
    bool poll_init;
    /* an answer to queue: either a whole body ... */
    bool has_resp;
    int status;
    char *resp; size_t resp_len;
    const char *ctype;
    bool retry_after, www_auth;
    bool close;                    /* the answer ends the connection (Connection: close): a body
                                      whose framing cannot be trusted is not read on */
    char allow[40];                /* a 405's Allow: every method of the path */
    /* ... or a job whose output is streamed (stream) or sent whole when it finishes */
    rlx_job *job;
    bool stream, queued;
    rlx_call *call;                /* threadpool work answering us (work.c), NULL when none */
    const char *stream_ctype;
    /* access log */
    const char *endpoint;          /* metrics label (static) */
    char model[64];
    int log_status;
    double t0, ttft;
    int32_t prompt_tokens, completion_tokens;
    const char *finish;
    /* cors.c: the Origin's answer (--cors-origins), set before routing */
    struct {
        char allow_origin[256];    /* Access-Control-Allow-Origin ("*" or the Origin); "" none */
        bool vary;                 /* "Vary: Origin" (the answer depends on the Origin) */
        bool preflight;            /* an OPTIONS preflight: the Allow-Methods/-Headers below */
        char methods[48], headers[256];
    } cors;
};

/* cors.c (--cors-origins, for browser clients): rlx_cors_request reads the request's Origin
 * before it is routed; rlx_cors_preflight answers an OPTIONS request for a known path (204 with
 * the path's methods, or 403 for an Origin not allowed); rlx_cors_headers adds the headers to
 * any response of c. All on the loop thread. (rlx_cors_check_config: config.h.) */
void rlx_cors_request(rlx_srv *s, rlx_conn *c);
void rlx_cors_preflight(rlx_srv *s, rlx_conn *c, const char *methods);
void rlx_cors_headers(const rlx_conn *c, struct MHD_Response *r);

/* routes.c: handles one complete HTTP request. */
void rlx_route(rlx_srv *s, rlx_conn *c);
const char *rlx_route_endpoint(const char *path); /* metrics label */
/* Whether c's route needs the API key and the headers lack it: answered 401 once the headers
 * are in, before a body is invited (Expect: 100-continue) or read. */
bool rlx_route_refused_early(rlx_srv *s, rlx_conn *c);
/* Sets c's answer; body (malloc'ed, may be NULL when out of memory) is taken. */
void rlx_conn_respond(rlx_conn *c, int status, const char *ctype, char *body);
/* http_framing.c: a body whose length two readers could take differently (two Content-Lengths,
 * Content-Length with Transfer-Encoding, a header name HTTP does not allow, HTTP/1.1 without
 * exactly one Host), and with libmicrohttpd before 1.0 any chunked body (its 0.9 parser spins
 * forever on a chunk-size line past its buffer), or a compressed body (Content-Encoding): the
 * status to answer (400, 411, 415) with e set, the connection to be closed; 0 when the framing
 * is sound. */
int rlx__http_framing_check(struct MHD_Connection *mc, const char *version, rlx_api_error *e);
/* http_wait.c: sockets with no request being answered, for http.c. */
/* MHD's socket context: one per accepted socket, from MHD_CONNECTION_NOTIFY_STARTED to _CLOSED. */
typedef struct rlx_sock {
    struct rlx_sock *prev, *next;  /* srv->wait_head list while waiting */
    bool waiting;                  /* no request of it is being answered */
    bool dropped;                  /* we shut it down: it only waits for MHD to close it */
    bool served;                   /* a request was answered on it (an idle keep-alive socket) */
    double since;                  /* when the wait began (accept or the last answer), rlx_now() */
    int fd;
    rlx_conn *conn;                /* the request whose line has arrived, NULL before */
} rlx_sock;
void rlx__http_wait_begin(rlx_srv *s, rlx_sock *k);  /* its wait (for a request) begins now */
void rlx__http_wait_end(rlx_conn *c);                /* c's request is being answered */
unsigned rlx__http_mhd_limit(const rlx_srv *s);      /* MHD's connection limit */
void rlx__http_on_connection(void *cls, struct MHD_Connection *mc, void **socket_ctx,
                             enum MHD_ConnectionNotificationCode t); /* MHD_OPTION_NOTIFY_CONNECTION */
void rlx_conn_error(rlx_conn *c, const rlx_api_error *e);
/* tasks.c: answers computed on the threadpool while the connection waits; each takes its
 * inputs (freed also on failure). id NULL: list sessions, else get or delete one. */
void rlx_task_tokenize(rlx_conn *c, rlx_model_slot *m, char *text, bool add_special, bool parse_special, bool with_pieces);
void rlx_task_detokenize(rlx_conn *c, rlx_model_slot *m, int32_t *ids, size_t n);
void rlx_task_template(rlx_conn *c, rlx_model_slot *m, rlx_api_request *r);
void rlx_task_sessions(rlx_conn *c, const char *id, bool del, size_t offset, size_t limit);
/* http.c: the job-side wake-up of the connection waiting on it. */
void rlx_conn_job_notify(rlx_job *job);
/* sink_http.c: a job's response as HTTP bodies (JSON, SSE, NDJSON). */
extern const rlx_sink_ops rlx_http_sink;
/* http.c: a call has answered (c->call is NULL again, unless it started another): resume the
 * connection. */
void rlx_conn_wake(rlx_conn *c);

/* stdio.c */
int rlx_stdio_start(rlx_srv *s, rlx_error *err);
void rlx_stdio_models_ready(rlx_srv *s);
void rlx_stdio_close(rlx_srv *s);   /* closes the handles (run the loop after) */
void rlx_stdio_free(rlx_srv *s);    /* once the handles are closed */
void rlx_stdio_quiesce(rlx_srv *s); /* SIGTERM: stop reading, refuse lines not started */
bool rlx_stdio_idle(rlx_srv *s);    /* nothing in flight and every line written */

/* models.c: the served models, loaded on demand. Loop thread. */
/* Builds the slots: the -m models, then every model of --models-dir (scanned, each file's header
 * read: a corrupt or incomplete one is FAILED with its reason). */
int rlx_models_init(rlx_srv *s, rlx_error *err);
/* The model of that name, whatever its state; NULL when none. */
rlx_model_slot *rlx_models_find(rlx_srv *s, const char *name);
/* --models-dir read again (at most every RLX_MODELS_RESCAN_S seconds unless force): new models
 * get a slot (UNLOADED, or FAILED with the reason); a model whose file went away loses its slot
 * when nothing uses it, else it is marked removed, serves on, and goes once unloaded
 * (rlx_models_drop_removed); an unused model whose file or profile changed is read again.
 * Called by GET /v1/models and by a request naming an unknown model. */
#define RLX_MODELS_RESCAN_S 2.0
void rlx_models_rescan(rlx_srv *s, bool force);
/* What a rescan compares (any thread): the model file's size and mtime, its profiles' mtimes. */
void rlx_model_signature(const char *path, int64_t sig[RLX_MODEL_SIG]);
/* POST /models/load of a FAILED model: whether loading it again can give another result (its
 * files changed since, or it failed for want of memory or by a cancel); a retry evicts. */
bool rlx_model_retry_worth(const rlx_model_slot *m);
/* m was unloaded (or failed): when its file went away, its slot goes now (freed once its timer
 * has closed; m must not be used after). */
void rlx_models_drop_removed(rlx_model_slot *m);
/* Queues the start-up loads of the -m models. */
void rlx_models_boot(rlx_srv *s);
/* The model named (NULL or "": the default, the first). Returns it when loaded (READY).
 * Otherwise NULL, and either *wait (when wait is given) is set to the model, which must load
 * first (rlx_srv_model_wait), or e says why: 404 model_not_found, 503 while the start-up loads run
 * (or, wait NULL, a load was started: retry), 500 model_load_failed with the load's error. */
rlx_model_slot *rlx_srv_model(rlx_srv *s, const char *name, rlx_model_slot **wait, rlx_api_error *e);
/* Queues call as a waiter of m's load, starting the load (evicting idle models as the limits
 * require) unless it runs. done comes back on the loop once with status 0 (m is READY),
 * RLX_ECANCELED (shutting down), RLX_EFULL (the load could not start: busy at --max-loaded) or
 * RLX_MODEL_LOAD_FAILED (m->err says why); rlx_model_wait_error turns it into the API error.
 * client and slot as for rlx_call_start (rlx_call_drop works). Returns 0, or the API error
 * (503 + Retry-After when the load cannot start) with nothing queued. */
int rlx_srv_model_wait(rlx_model_slot *m, rlx_call *call, void *client, rlx_call **slot, rlx_call_done_fn done,
                       rlx_api_error *e);
#define RLX_MODEL_LOAD_FAILED 1  /* a waiter's status: the load failed (m->err) */
void rlx_srv_model_wait_error(const rlx_model_slot *m, int status, rlx_api_error *e);
/* A load with nobody waiting (stdio, POST /models/load of a FAILED model retries it): 0, or the
 * API error when it cannot start. */
int rlx_srv_model_load(rlx_model_slot *m, rlx_api_error *e);
/* Sets m's keep-alive (seconds, 0: unload once idle, < 0: forever) and applies it when idle. */
void rlx_srv_model_keep_alive(rlx_model_slot *m, double seconds);
/* POST /models/load of a model whose unload was asked while in use: it stays, and the requests
 * that waited for the unload (and the load after it) run now (loop thread). */
void rlx_srv_model_unload_cancel(rlx_model_slot *m);
/* wake_timer's callback: runs the waiting requests of the models whose unload was cancelled
 * (answering them inside the handler that cancelled it re-entered libmicrohttpd, which then
 * completed that handler's own connection under it: a double free). */
void rlx_models_wake(uv_timer_t *t);
/* Operators: unloads m once idle (now when it is). 0, or the API error (409 while it loads). */
int rlx_srv_model_unload(rlx_model_slot *m, rlx_api_error *e);
/* A job or a threadpool task uses m->w (m READY) until it calls rlx_srv_model_release. r (may be
 * NULL) sets the model's keep-alive: its keep_alive, else --keep-alive. Once the last user
 * lets go the keep-alive applies: 0 unloads, > 0 arms the timer, < 0 keeps the model. */
void rlx_srv_model_hold(rlx_model_slot *m, const rlx_api_request *r);
void rlx_srv_model_release(rlx_model_slot *m);
/* Stopping: requests waiting for loads get 503 "shutting down", and no load starts. */
void rlx_models_quiesce(rlx_srv *s);
/* Shutdown: closes the timers (run the loop after); then _free stops what is loaded. */
void rlx_models_close(rlx_srv *s);
void rlx_models_free(rlx_srv *s);
/* Prometheus series of the models' lifecycle (appended to /metrics), malloc'ed. */
char *rlx_models_metrics(rlx_srv *s);

/* cmd_serve.c */
void rlx_srv_maybe_exit(rlx_srv *s);  /* while stopping: ends the loop once idle */
void rlx_srv_begin_stop(rlx_srv *s);  /* stop accepting, let what runs finish (SIGTERM, a failed start) */

#endif
