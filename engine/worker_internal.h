/* worker_internal.h - state shared by worker.c (thread, inbox, public API) and sched.c (the
 * continuous-batching step). Private to engine/. */
#ifndef RLX_WORKER_INTERNAL_H
#define RLX_WORKER_INTERNAL_H

#include "engine/engine.h"
#include "engine/runner.h"

#include <pthread.h>

typedef struct rlx_session_store rlx_session_store;

/* A session in memory. Metadata is guarded by rlx_worker.smu; pinned blocks are touched only
 * by the worker thread. */
typedef struct wsession {
    char id[129];
    int32_t *tokens;            /* history: every token of the last turn (prompt + generated) */
    int32_t n_tokens;
    int32_t *pinned;            /* full, registered KV blocks holding a reference */
    int32_t n_pinned;
    double created, updated;    /* wall clock */
    double used;                /* monotonic, for the pin LRU */
    bool busy;                  /* a request of this session is in flight */
    bool deleted;               /* deleted from another thread; worker unpins and frees */
} wsession;

typedef struct seq {
    rlx_request *req;           /* owned */
    int32_t *tokens;            /* prompt + generated; tokens[0..n_computed) are in the KV cache */
    int32_t n_tokens, cap_tokens;
    int32_t n_prompt;           /* prompt length (after any session history) */
    int32_t n_computed;
    int32_t *blocks;            /* block table */
    int32_t n_blocks, cap_blocks;
    int32_t n_hashed;           /* leading full blocks registered in the prefix cache */
    uint64_t last_hash;         /* hash of block n_hashed - 1 (0 if none) */
    int32_t n_generated;
    int32_t max_tokens;         /* effective limit on generated tokens */
    int32_t cached_tokens;      /* prompt tokens reused from the cache */
    rlx_sampler *sampler;
    rlx_detok_stream detok;
    uint64_t admit_order;       /* larger = admitted later (preempted first) */
    bool cancelled;
    bool started;               /* has been admitted at least once */
    double t_submit, t_admit, t_first, t_last;
    int32_t out_row;            /* row of this step's logits, -1 if none */
    /* prompt logprobs (req->prompt_logprobs): the next prompt position whose logprob is due,
     * and this step's rows for positions plp_pos.. (plp_n of them, from row plp_row) */
    int32_t plp_next, plp_pos, plp_row, plp_n;
    char *text;                 /* detok output buffer */
    size_t text_cap;
    wsession *session;          /* NULL if none */
} seq;

typedef struct cancel_node { uint64_t id; struct cancel_node *next; } cancel_node;

struct rlx_worker {
    char name[128];
    rlx_runner *runner;
    rlx_tokenizer *tok;
    rlx_chat_template *tmpl;
    rlx_worker_config cfg;

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
    rlx_batch_seq *b_seqs;
    seq **b_seqptr;
    float *sample_scratch;      /* n_vocab floats: the sampler works on a copy of the logits */

    /* stats (guarded by mu) */
    rlx_worker_stats stats;

    /* sessions */
    pthread_mutex_t smu;
    wsession **sessions;
    int32_t n_sessions, cap_sessions;
    rlx_session_store *store;   /* NULL without --db */
    char *kv_dir;               /* snapshot directory (<db>.kv), NULL without --db */
    uint64_t model_hash;        /* identifies model + KV layout for snapshots */
    int32_t pin_budget;         /* max blocks pinned by idle sessions */
};

/* sched.c */
int rlx__sched_step(rlx_worker *w);                /* 1 if work was done, 0 if idle */
void rlx__seq_finish(rlx_worker *w, seq *s, rlx_finish_reason why);
void rlx__seq_fail(rlx_worker *w, seq *s, int code, const char *msg);
void rlx__seq_free(rlx_worker *w, seq *s);
int rlx__seq_prepare(rlx_worker *w, seq *s, rlx_error *err);
/* worker_session.c */
int rlx__sessions_open(rlx_worker *w, rlx_error *err);
void rlx__sessions_close(rlx_worker *w);
/* Attaches s to its session, prefixing the history unless the request replaces it. */
int rlx__session_attach(rlx_worker *w, seq *s, int32_t **ids, size_t *n, rlx_error *err);
/* Records the finished turn: history, pins, persistence. */
void rlx__session_commit(rlx_worker *w, seq *s);
void rlx__session_detach(rlx_worker *w, seq *s);
void rlx__sessions_gc(rlx_worker *w);

/* Ends a request that never became a sequence (shutdown without drain). */
void rlx__request_cancelled(rlx_worker *w, rlx_request *req);

#endif
