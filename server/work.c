/* work.c - the daemon's threadpool work (a request's body parse, its preparation, a route's
 * task, a stdio line's parse), listed so that shutdown can cancel what has not started, and
 * kept from crowding out small requests: libuv's pool has UV_THREADPOOL_SIZE threads (default
 * 4) served in FIFO order, so two dozen big prompts (seconds of parsing and tokenizing) queued
 * there would hold every small request behind them. Work marked big runs on at most half the
 * threads; further big work waits here, in order, and small work always finds a thread.
 * Calls (rlx_call_start) are such work answering a client that may leave meanwhile.
 * Loop thread only (a call's run on the threadpool). */
#include "server/serve.h"

#include <stdlib.h>

static int big_slots(void)
{
    static int slots;
    if (!slots) {
        const char *e = getenv("UV_THREADPOOL_SIZE"); /* as libuv reads it: at most 1024 */
        long n = e && *e ? strtol(e, NULL, 10) : 4;
        n = RLX_MIN(RLX_MAX(n, 1), 1024);
        slots = (int)RLX_MAX(n / 2, 1);
    }
    return slots;
}

static void link_front(rlx_work **head, rlx_work *w)
{
    w->prev = NULL;
    w->next = *head;
    if (*head) (*head)->prev = w;
    *head = w;
}

static int start(rlx_srv *s, rlx_work *w)
{
    if (uv_queue_work(s->loop, &w->req, w->work, w->done)) return RLX_EIO;
    w->waiting = false;
    link_front(&s->works, w);
    if (w->big) s->n_big_running++;
    return 0;
}

int rlx_srv_queue_work(rlx_srv *s, rlx_work *w, bool big, uv_work_cb work, uv_after_work_cb done)
{
    w->work = work;
    w->done = done;
    w->big = big;
    if (big && (s->big_head || s->n_big_running >= big_slots())) {
        w->waiting = true;
        w->next = NULL;
        w->prev = s->big_tail;
        if (s->big_tail) s->big_tail->next = w;
        else s->big_head = w;
        s->big_tail = w;
    } else if (start(s, w)) {
        return RLX_EIO;
    }
    s->n_tasks++;
    return 0;
}

static rlx_work *pop_waiting(rlx_srv *s)
{
    rlx_work *w = s->big_head;
    if (!w) return NULL;
    s->big_head = w->next;
    if (s->big_head) s->big_head->prev = NULL;
    else s->big_tail = NULL;
    w->prev = w->next = NULL;
    return w;
}

void rlx_srv_work_done(rlx_srv *s, rlx_work *w)
{
    if (w->prev) w->prev->next = w->next;
    else if (s->works == w) s->works = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
    s->n_tasks--;
    if (w->big) s->n_big_running--;
    while (s->big_head && s->n_big_running < big_slots() && !s->grace_over) {
        rlx_work *n = pop_waiting(s);
        if (start(s, n)) {
            n->big = false;
            link_front(&s->works, n); /* as if queued, so that its done can unlist it */
            n->done(&n->req, UV_EIO);
        }
    }
}

void rlx_srv_cancel_work(rlx_srv *s)
{
    for (rlx_work *w = s->works; w; w = w->next) uv_cancel((uv_req_t *)&w->req); /* done gets UV_ECANCELED */
    for (rlx_work *w; (w = pop_waiting(s));) {
        w->big = false;
        link_front(&s->works, w);
        w->done(&w->req, UV_ECANCELED);
    }
}

/* ---- calls -------------------------------------------------------------------------------- */

static void call_run(uv_work_t *w)
{
    rlx_call *c = w->data;
    c->run(c);
}

static void call_done(uv_work_t *w, int status)
{
    rlx_call *c = w->data;
    rlx_srv *s = c->srv;
    rlx_srv_work_done(s, &c->work);
    if (c->slot) *c->slot = NULL; /* before done: it may start the client's next call */
    c->slot = NULL;
    c->done(c, c->client, status); /* may free c */
    rlx_srv_maybe_exit(s);
}

int rlx_call_start(rlx_srv *s, rlx_call *call, bool big, void *client, rlx_call **slot, rlx_call_run_fn run,
                   rlx_call_done_fn done)
{
    call->srv = s;
    call->client = client;
    call->slot = slot;
    call->run = run;
    call->done = done;
    call->work.req.data = call;
    if (rlx_srv_queue_work(s, &call->work, big, call_run, call_done)) return RLX_EIO;
    if (slot) *slot = call;
    return 0;
}

void rlx_call_drop(rlx_call **slot)
{
    rlx_call *c = *slot;
    if (!c) return;
    c->client = NULL;
    c->slot = NULL;
    *slot = NULL;
}
