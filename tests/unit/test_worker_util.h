/* test_worker_util.h - what the scheduler tests (test_worker.c, test_worker_hybrid.c,
 * test_spec.c) collect from a worker: each request's generated tokens with their logprobs and
 * top-2 ids, its text, finish reason, usage and error, gathered by
 * its on_event callback (called on the worker thread) under one mutex, with a count of
 * requests still running that the test thread waits on. Header-only. */
#ifndef RLX_TEST_WORKER_UTIL_H
#define RLX_TEST_WORKER_UTIL_H

#include "engine/engine.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define TW_MAX_GEN 96 /* tokens kept per request */

typedef struct tw_result {
    int32_t tokens[TW_MAX_GEN];
    float logprob[TW_MAX_GEN];
    int32_t top[TW_MAX_GEN][2]; /* the first two top_logprobs ids, when asked for */
    char text[2048];
    size_t text_len;
    int n;
    bool done;
    rlx_finish_reason finish;
    rlx_usage usage;
    int error;
} tw_result;

/* the test thread owns it; the worker thread writes res[] through tw_on_event */
typedef struct tw_collector {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending; /* requests submitted and not finished */
    tw_result *res;
} tw_collector;

#define TW_COLLECTOR(pending, res) {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, (pending), (res)}

/* a request's rlx_request.user: which result it fills */
typedef struct tw_slot { tw_collector *c; int idx; } tw_slot;

static inline void tw_on_event(void *user, const rlx_event *ev)
{
    tw_slot *s = user;
    tw_collector *c = s->c;
    pthread_mutex_lock(&c->mu);
    tw_result *r = &c->res[s->idx];
    if (ev->type == RLX_EV_PROMPT_TOKEN) goto out;
    if (ev->text_len && r->text_len + ev->text_len < sizeof r->text) {
        memcpy(r->text + r->text_len, ev->text, ev->text_len);
        r->text_len += ev->text_len;
    }
    if (ev->type == RLX_EV_TOKEN && r->n < TW_MAX_GEN) {
        r->logprob[r->n] = ev->logprob;
        for (int k = 0; k < ev->n_top && k < 2; k++) r->top[r->n][k] = ev->top_ids[k];
        r->tokens[r->n++] = ev->token;
    }
    if (ev->type == RLX_EV_DONE || ev->type == RLX_EV_ERROR) {
        r->done = true;
        r->finish = ev->finish;
        r->usage = ev->usage;
        r->error = ev->type == RLX_EV_ERROR ? ev->error_code : 0;
        c->pending--;
        pthread_cond_broadcast(&c->cv);
    }
out:
    pthread_mutex_unlock(&c->mu);
}

static inline void tw_wait_all(tw_collector *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->pending > 0) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

#endif
