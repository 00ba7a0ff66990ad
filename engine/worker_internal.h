/* worker_internal.h - state shared by worker.c (thread, inbox, public API), sched.c (the
 * continuous-batching step), worker_session.c (sessions), session_writer.c (the thread that
 * stores them) and session_snapshot.c (KV snapshot files). Private to engine/. Per-sequence
 * memory (KV blocks, recurrent-state slots) goes through the runner's engine/memory.h only.
 *
 * Locks, always taken in this order when nested: mu (inbox, cancels, stats) -> smu (session
 * table) -> wmu (writer queue); only rlx_worker_submit holds mu with another (a session's busy
 * state and the pending cancels read at one moment). No lock is held across disk I/O except the
 * store connections' own mutexes, and the worker thread never uses the writer's connection,
 * so the step loop never waits for an fsync. */
#ifndef RLX_WORKER_INTERNAL_H
#define RLX_WORKER_INTERNAL_H

#include "engine/engine.h"
#include "engine/draft.h"
#include "engine/gaside.h"
#include "engine/grammar.h"
#include "engine/runner.h"
#include "engine/spec.h"
#include "engine/stop.h"

#include <pthread.h>

typedef struct rlx_session_store rlx_session_store;
typedef struct wjob wjob;

/* A session in memory. Metadata is guarded by rlx_worker.smu; pinned blocks are changed only
 * by the worker thread (under smu). A session is freed by the worker once it is deleted (or
 * expired), not busy, and no store write of it is queued. */
typedef struct wsession {
    char id[129];
    int32_t *tokens;            /* history: every token of the last turn (prompt + generated) */
    int32_t n_tokens;
    int32_t *pinned;            /* full, registered KV blocks holding a reference */
    int32_t n_pinned;
    uint64_t pinned_hash;       /* chained content hash of the last pinned block */
    double created, updated;    /* wall clock */
    double used;                /* monotonic, for the pin LRU */
    int32_t pending;            /* store writes of this session queued for the writer */
    bool busy;                  /* a request of this session is in flight */
    uint64_t holder;            /* busy: that request's id */
    bool deleted;               /* deleted (or expired): invisible; freed by the worker */
} wsession;

typedef struct seq {
    rlx_request *req;           /* owned */
    int32_t *tokens;            /* prompt + generated; tokens[0..n_computed) are in the KV cache */
    int32_t n_tokens, cap_tokens;
    int32_t n_prompt;           /* prompt length (after any session history) */
    int32_t n_computed;
    rlx_mem_seq mem;            /* block table, registered blocks, state slot (engine/memory.h) */
    int32_t n_generated;
    int32_t max_tokens;         /* effective limit on generated tokens */
    int32_t cached_tokens;      /* prompt tokens reused from the cache */
    rlx_sampler *sampler;
    rlx_detok_stream detok;
    uint64_t admit_order;       /* larger = admitted later (preempted first) */
    bool cancelled;
    bool started;               /* has been admitted at least once */
    bool grammar_fault;         /* a failure now is the grammar's (rlx__seq_fail says so) */
    bool stop_hit;              /* a stop string ended it (RLX_EV_DONE's stop_string) */
    double t_submit, t_admit, t_first, t_last;
    int32_t out_row;            /* row of this step's logits, -1 if none */
    /* prompt logprobs (req->prompt_logprobs): the next prompt position whose logprob is due,
     * and this step's rows for positions plp_pos.. (plp_n of them, from row plp_row) */
    int32_t plp_next, plp_pos, plp_row, plp_n;
    char *text;                 /* detok output buffer */
    size_t text_cap;
    rlx_stop_matcher stop;      /* the request's stop strings over the detokenized text */
    wsession *session;          /* NULL if none */
    int32_t n_history;          /* leading tokens that came from the session's history */
    /* speculative decoding (engine/spec.h): this step's draft tokens, computed after the
     * pending token at positions n_computed + 1.. (their rows follow out_row), and the draft
     * length control */
    int32_t draft[RLX_SPEC_MAX_DRAFT];
    int32_t n_draft;
    rlx_spec_state spec;
    rlx_draft_seq dseq;         /* the draft model's KV of this sequence (worker->draft) */
    int32_t n_proposed;         /* this step's drafts from the draft model, in draft[] */
} seq;

typedef struct cancel_node { uint64_t id; bool found; struct cancel_node *next; } cancel_node;

typedef struct ejob ejob;      /* an embedding request in the worker (worker_embed.c) */

struct rlx_worker {
    char name[128];
    rlx_runner *runner;
    rlx_draft *draft;              /* the draft model (cfg.draft_model), NULL: prompt lookup */
    rlx_draft_job *djobs;          /* max_seqs of them, for a step's batched proposals */
    struct seq **djob_seq;
    rlx_tokenizer *tok;
    rlx_chat_template *tmpl;
    const char *tmpl_src;          /* the template source: tmpl_file's text or the GGUF's (in its
                                      mapping); NULL: ChatML */
    char *tmpl_file;               /* owned: chat_template_file's text, NULL when none */
    size_t tmpl_len;
    bool tmpl_object_args;         /* rlx_chat_template_object_arguments(tmpl) */
    double t_tokenizer, t_template; /* load phases beyond the runner's (rlx_worker_load_times) */
    char tok_cache[320];           /* what the tokenizer cache did (rlx_load_times) */
    rlx_worker_config cfg;
    /* constrained sampling, built at the first request with a grammar (worker thread) */
    rlx_grammar_vocab *gvocab;  /* every token's bytes as a trie (control tokens: none) */
    char **gtext;               /* token bytes, for the check of a sampled token */
    size_t *glen;
    uint8_t *gmask;             /* n_vocab entries */
    rlx__gaside *gaside;        /* the helper beside the forward pass (gaside.h), NULL: walks in-line */
    rlx_sampler **gaside_samplers; /* a step's constrained samplers handed to it (max_seqs) */
    rlx_grammar_cache *gcache;  /* masks per grammar position, shared by the worker's sequences */
    uint8_t *marker;            /* n_vocab entries, NULL when none: control tokens written as text
                                   and given their bytes in gtext (rlx_worker_set_marker_tokens) */
    rlx_logit_bias *eog_bans;   /* ignore_eos: every end-of-generation token at -100 (banned), made
                                   at the first such request (sched.c); n_eog_bans of them */
    size_t n_eog_bans;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, drain;
    /* inbox (guarded by mu) */
    rlx_request **inbox;
    int32_t n_inbox, cap_inbox;
    cancel_node *cancels;
    int32_t queued;             /* inbox + waiting, for admission control (guarded by mu) */

    /* owned by the worker thread */
    seq **waiting;              /* FIFO */
    int32_t n_waiting, cap_waiting;
    seq **running;
    int32_t n_running;
    uint64_t admit_counter;
    /* step scratch */
    int32_t *b_tokens, *b_pos, *b_seq;
    uint8_t *b_out;
    uint8_t *b_dec;             /* per token: its RLX_TOKEN_* kind (rlx_batch.decode) */
    rlx_batch_seq *b_seqs;
    seq **b_seqptr;
    uint64_t *b_inflight;       /* content hashes of the full blocks this step computes */
    int32_t n_inflight, cap_inflight;
    float *sample_scratch;      /* n_vocab floats: the sampler works on a copy of the logits */
    int32_t ckpt_every;         /* prefill tokens between state checkpoints (a multiple of the
                                   block size; sched.c) */

    /* embeddings (worker_embed.c; worker thread): requests in arrival order, and per step sequence
     * its memory, request and input */
    ejob **ejobs;
    int32_t n_ejobs, cap_ejobs;
    rlx_mem_seq *e_mem;         /* per step sequence (max(max_batch_tokens, max_seqs) of each) */
    ejob **e_job;
    int32_t *e_input, *e_row;   /* input index, first output row */
    rlx_batch_seq *e_seqs;
    float *e_vec;               /* one pooled vector (out_cols floats) */
    int32_t e_last_inputs;      /* inputs the last step ran, and its duration (rlx__embed_coalesce) */
    double e_last_secs;

    /* stats (guarded by mu) */
    rlx_worker_stats stats;

    /* sessions */
    pthread_mutex_t smu;
    wsession **sessions;
    int32_t n_sessions, cap_sessions;
    char *kv_dir;               /* this model's snapshot directory (<db>.kv/<name>), NULL without --db */
    uint64_t model_hash;        /* identifies model + KV layout for snapshots (0 without --db) */
    int32_t pin_budget;         /* max blocks pinned by idle sessions */
    uint64_t delete_gen;        /* counts session deletes (under smu), for attach's unlocked read */
    bool gc_wanted;             /* a session was deleted: the next step frees it (under mu; the
                                   idle wait tests it, so a delete during a busy step is not lost) */
    double gc_interval, last_gc;/* periodic expiry (monotonic seconds) */
    /* Three connections to the --db store (all NULL without one): the writer's, the worker
     * thread's (attach reads), and one for rlx_worker_session(s)_* callers. */
    rlx_session_store *store, *rstore, *astore;

    /* the session writer (session_writer.c) */
    pthread_t wthread;
    bool wthread_started, wstop;
    pthread_mutex_t wmu;
    pthread_cond_t wcv;         /* work queued */
    pthread_cond_t wdone;       /* a job someone waits for has finished */
    wjob *whead, *wtail;
    size_t wbytes;              /* snapshot bytes queued (bounded: see session_writer.c) */
};

/* sched.c */
int rlx__sched_step(rlx_worker *w);                /* 1 if work was done, 0 if idle */
struct timespec rlx__deadline(double secs);        /* now + secs on the clock pthread_cond_timedwait uses */
/* Delivers an event to the request's callback (sets request_id). */
void rlx__emit(rlx_request *r, rlx_event *ev);
void rlx__seq_finish(rlx_worker *w, seq *s, rlx_finish_reason why);
void rlx__seq_fail(rlx_worker *w, seq *s, int code, const char *msg);
void rlx__seq_free(rlx_worker *w, seq *s);
/* Copies the state checkpoint cache's counters into w->stats (mu held). */
void rlx__ckpt_stats(rlx_worker *w);
int rlx__seq_prepare(rlx_worker *w, seq *s, rlx_error *err);
void rlx__grammar_vocab_free(rlx_worker *w); /* worker teardown */
/* Samples s's next token from its logits row and delivers it. Returns false when s has ended
 * (finished or failed: s is freed). */
bool rlx__emit_token(rlx_worker *w, seq *s, const float *logits, float *scratch);
/* sched_spec.c: speculative decoding in the step (worker thread) */
/* With a draft model, before the step is built: the proposals of every running sequence that
 * may draft, in one batched pass (each sequence's n_proposed, draft[]). */
void rlx__spec_draft_model_pass(rlx_worker *w, int32_t spare_rows);
/* s's drafts for this step within the token budget and spare logits rows (s->n_draft). */
void rlx__spec_draft(rlx_worker *w, seq *s, int32_t budget, int32_t *spare_rows);
/* After the step: s's drafts checked against its own sampling; false when s has ended. */
bool rlx__spec_verify(rlx_worker *w, seq *s, float *scratch);
/* worker_embed.c: an embedding worker's side of the step (worker thread) */
int rlx__embed_init(rlx_worker *w, rlx_error *err);  /* at start: step scratch */
void rlx__embed_free(rlx_worker *w);                  /* at stop, after cancel_all */
/* Takes a submitted RLX_REQ_EMBED request into the queue (or fails it with an event). */
void rlx__embed_enqueue(rlx_worker *w, rlx_request *req);
/* Marks the request cancelled if it is queued here; true if it was. */
bool rlx__embed_mark_cancel(rlx_worker *w, uint64_t id);
/* Ends cancelled requests (RLX_EV_DONE, RLX_FINISH_CANCELLED); all of them with all. */
void rlx__embed_reap(rlx_worker *w, bool all);
/* One step over queued inputs after intake: 1 if work was done, 0 if idle. */
int rlx__embed_step(rlx_worker *w);
/* Before a step's intake: when the last step ran several inputs and fewer are waiting now, waits
 * (briefly, bounded) for the clients that step answered to send their next ones. */
void rlx__embed_coalesce(rlx_worker *w);
/* Checks an embedding request at submit (inputs, ids, lengths, normalization). */
int rlx__embed_check(rlx_worker *w, const rlx_request *req, rlx_error *err);

/* worker_session.c */
int rlx__sessions_open(rlx_worker *w, rlx_error *err);
void rlx__sessions_close(rlx_worker *w);
/* Attaches s to its session, prefixing the history unless the request replaces it; with
 * drop_bos a leading BOS of *ids is dropped when it follows a history (a continuation, not a
 * new sequence). */
int rlx__session_attach(rlx_worker *w, seq *s, int32_t **ids, size_t *n, bool drop_bos, rlx_error *err);
/* Any thread: whether a turn runs on session id now (its request attached). Takes w->smu. */
bool rlx__session_busy(rlx_worker *w, const char *id, uint64_t *holder); /* holder: the busy turn's request id */
/* Records the finished turn (history, pins) and queues it for the store. Returns true when
 * the writer took the request and delivers `ev` (its final event) once the turn is stored;
 * false when the caller delivers it. */
bool rlx__session_commit(rlx_worker *w, seq *s, const rlx_event *ev);
void rlx__session_detach(rlx_worker *w, seq *s);
/* Frees deleted and expired sessions; queues the store's periodic expiry. */
void rlx__sessions_gc(rlx_worker *w);
/* Unpins the least recently used idle session (any session with busy_too); false if none
 * holds pins. The scheduler calls it before preempting or failing for want of blocks. */
bool rlx__sessions_release_pins(rlx_worker *w, bool busy_too);
/* History length of a live session, 0 if none (any thread). */
int32_t rlx__session_history(rlx_worker *w, const char *id);

/* session_snapshot.c */
/* Identity of the model file and KV layout: geometry, the tensor table and a digest of every
 * byte of the file. */
uint64_t rlx__model_hash(const rlx_runner *r);
/* Reads the blocks (worker thread) into a malloc'ed snapshot image; NULL if the backend cannot
 * read blocks or memory is short. */
uint8_t *rlx__snapshot_capture(rlx_worker *w, const int32_t *blocks, int32_t n_blocks, uint64_t last_hash,
                               size_t *bytes);
/* Writes an image next to its final path and renames it there after an fsync (any thread). */
int rlx__snapshot_write(const char *path, const uint8_t *img, size_t bytes, rlx_error *err);
/* Loads a snapshot of the history tokens[0..n) into the pool (worker thread): *blocks gets its
 * blocks, each with a reference. False when the file is absent, damaged, of another model or
 * KV layout, or of another history. */
bool rlx__snapshot_restore(rlx_worker *w, const char *path, const int32_t *tokens, int32_t n, int32_t max_blocks,
                           int32_t **blocks, int32_t *n_blocks, uint64_t *last_hash);
void rlx__snapshot_path(const rlx_worker *w, const char *id, char *buf, size_t cap);

/* session_writer.c */
int rlx__writer_start(rlx_worker *w, rlx_error *err);
/* Stores what is queued, then ends the thread. */
void rlx__writer_stop(rlx_worker *w);
/* Queues a finished turn (caller holds smu, so a delete of the session orders after it).
 * Takes tokens, snapshot image and request. */
void rlx__writer_put(rlx_worker *w, wsession *ws, int32_t *tokens, size_t n_tokens, uint8_t *snap,
                     size_t snap_bytes, rlx_request *req, const rlx_event *ev);
/* Queues a delete of the stored session (caller holds smu); returns the job to wait on. */
wjob *rlx__writer_delete(rlx_worker *w, const char *id, rlx_error *err);
/* Whether a delete of this id is queued and not yet applied. */
bool rlx__writer_deleting(rlx_worker *w, const char *id);
/* Waits for a queued delete; RLX_ENOTFOUND if the store had no such session. Frees the job. */
int rlx__writer_wait(rlx_worker *w, wjob *job, rlx_error *err);
/* Queues the store's TTL and count limits for this model. */
void rlx__writer_limits(rlx_worker *w);
/* Bytes of snapshot images the queue may hold; a turn beyond it is stored without one. */
#define RLX_WRITER_MAX_BYTES ((size_t)1 << 30)

/* Ends a request that never became a sequence (shutdown without drain). */
void rlx__request_cancelled(rlx_worker *w, rlx_request *req);

#endif
