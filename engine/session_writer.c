/* session_writer.c - the worker's session writer: one thread per worker that stores finished
 * turns (KV snapshot file, then the row in an fsync'd sqlite3 transaction), deletes and
 * expiries, in the order they were queued, on its own store connection. The step loop only
 * queues (copying the history and the snapshot bytes), so no running sequence waits for a
 * disk.
 *
 * Durability as before the queue: a turn's final event is delivered by the writer after the
 * turn's transaction committed, so a client that got its response has a session that survives
 * kill -9 (and power loss: synchronous=FULL, snapshot fsync'd before its row). A delete queued
 * after a turn of the same session is applied after it, so a delete is never undone.
 *
 * Bounded memory: snapshot images queued beyond RLX_WRITER_MAX_BYTES are dropped (the turn is
 * stored without one and resumes by recomputing). */
#include "engine/session.h"
#include "engine/worker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { WJOB_PUT, WJOB_DELETE, WJOB_LIMITS } wjob_kind;

struct wjob {
    wjob *next;
    wjob_kind kind;
    char id[RLX_SESSION_ID_MAX + 1];
    /* PUT */
    wsession *ws;                 /* holds one count of ws->pending until done */
    int32_t *tokens;              /* owned */
    size_t n_tokens;
    uint8_t *snap;                /* owned; NULL: stored without a snapshot */
    size_t snap_bytes;
    rlx_request *req;             /* owned; NULL: no event to deliver */
    rlx_event ev;                 /* the request's final event; ev.text is `text` */
    char *text;                   /* owned */
    /* DELETE: the caller waits for done */
    bool done;
    int rc;
    rlx_error err;
};

static void enqueue(rlx_worker *w, wjob *j)
{
    pthread_mutex_lock(&w->wmu);
    if (w->wtail) w->wtail->next = j;
    else w->whead = j;
    w->wtail = j;
    w->wbytes += j->snap_bytes;
    pthread_cond_signal(&w->wcv);
    pthread_mutex_unlock(&w->wmu);
}

/* The database's TTL and --max-sessions, keeping the rows of sessions whose turn runs (memory
 * keeps them too; a crash mid-turn lost the whole session when the row had gone). */
static void enforce_limits(rlx_worker *w)
{
    if (w->cfg.session_ttl_s <= 0 && w->cfg.max_sessions <= 0) return;
    pthread_mutex_lock(&w->smu);
    size_t n = 0;
    char (*ids)[129] = malloc((size_t)RLX_MAX(w->n_sessions, 1) * sizeof *ids);
    const char **keep = malloc((size_t)RLX_MAX(w->n_sessions, 1) * sizeof *keep);
    for (int32_t i = 0; ids && keep && i < w->n_sessions; i++)
        if (w->sessions[i]->busy && !w->sessions[i]->deleted) {
            memcpy(ids[n], w->sessions[i]->id, sizeof ids[n]);
            keep[n] = ids[n];
            n++;
        }
    pthread_mutex_unlock(&w->smu);
    if (ids && keep) /* out of memory: no eviction this time (the next turn's put tries again) */
        rlx_session_enforce_limits(w->store, w->name, w->cfg.session_ttl_s, w->cfg.max_sessions, keep, n, NULL, NULL);
    free(ids);
    free(keep);
}

static void run_put(rlx_worker *w, wjob *j)
{
    char path[1100], hash[17];
    const char *kv = NULL;
    rlx_error err = {0};
    char id[300]; /* the client's text: escaped for the log */
    rlx_log_escape(j->id, true, id, sizeof id);
    if (j->snap) {
        rlx__snapshot_path(w, j->id, path, sizeof path);
        if (rlx__snapshot_write(path, j->snap, j->snap_bytes, &err) == 0) kv = path;
        else fprintf(stderr, "rlxd: session '%s' stored without its KV snapshot: %s\n", id, err.msg);
    }
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)w->model_hash);
    const bool stored = !rlx_session_put(w->store, w->name, j->id, j->tokens, j->n_tokens, kv, kv ? hash : NULL, &err);
    if (!stored) fprintf(stderr, "rlxd: session '%s' not saved: %s\n", id, err.msg);
    else enforce_limits(w);
    if (!stored) {
        /* memory follows the database: the next turn, GET and the list read the stored row
           again - marked before the client hears of the failure, whose next turn may come at
           once (the count in pending keeps the session's memory until this job is done) */
        pthread_mutex_lock(&w->smu);
        j->ws->deleted = true;
        pthread_mutex_unlock(&w->smu);
    }
    if (j->req) {
        /* a turn the database did not take is an error to its client (it was a 200 while the
           database kept the turn before, which a restart or a failed delete then brought back) */
        char msg[1024];
        snprintf(msg, sizeof msg, "the turn was generated but session '%s' could not be stored (%.400s); the session "
                 "stays as before this turn", id, err.msg);
        rlx_event fail = {.type = RLX_EV_ERROR, .request_id = j->ev.request_id, .error_code = RLX_EIO, .error_msg = msg};
        rlx__emit(j->req, stored ? &j->ev : &fail);
        rlx_request_free(j->req);
    }
    pthread_mutex_lock(&w->smu);
    j->ws->pending--;
    pthread_mutex_unlock(&w->smu);
}

static void free_job(wjob *j)
{
    free(j->tokens);
    free(j->snap);
    free(j->text);
    free(j);
}

static void *writer_main(void *arg)
{
    rlx_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->wmu);
        while (!w->whead && !w->wstop) pthread_cond_wait(&w->wcv, &w->wmu);
        wjob *j = w->whead;
        pthread_mutex_unlock(&w->wmu);
        if (!j) return NULL; /* stopping, and everything queued is stored */
        /* the job stays at the head while it runs, so rlx__writer_deleting sees a delete until
         * its transaction is done */
        int rc = 0;
        if (j->kind == WJOB_PUT) run_put(w, j);
        else if (j->kind == WJOB_LIMITS)
            enforce_limits(w);
        else rc = rlx_session_delete(w->store, w->name, j->id, &j->err);
        pthread_mutex_lock(&w->wmu);
        w->whead = j->next; /* still the head: only this thread unlinks */
        if (!w->whead) w->wtail = NULL;
        w->wbytes -= j->snap_bytes;
        if (j->kind == WJOB_DELETE) {
            j->rc = rc;
            j->done = true;
            pthread_cond_broadcast(&w->wdone);
            j = NULL; /* the waiter frees it */
        }
        pthread_mutex_unlock(&w->wmu);
        if (j) free_job(j);
    }
}

int rlx__writer_start(rlx_worker *w, rlx_error *err)
{
    pthread_mutex_init(&w->wmu, NULL);
    pthread_cond_init(&w->wcv, NULL);
    pthread_cond_init(&w->wdone, NULL);
    if (pthread_create(&w->wthread, NULL, writer_main, w))
        return rlx_errorf(err, RLX_ENOMEM, "cannot start the session writer thread");
    w->wthread_started = true;
    return 0;
}

void rlx__writer_stop(rlx_worker *w)
{
    if (!w->wthread_started) return;
    pthread_mutex_lock(&w->wmu);
    w->wstop = true;
    pthread_cond_signal(&w->wcv);
    pthread_mutex_unlock(&w->wmu);
    pthread_join(w->wthread, NULL);
    w->wthread_started = false;
    pthread_mutex_destroy(&w->wmu);
    pthread_cond_destroy(&w->wcv);
    pthread_cond_destroy(&w->wdone);
}

void rlx__writer_put(rlx_worker *w, wsession *ws, int32_t *tokens, size_t n_tokens, uint8_t *snap,
                     size_t snap_bytes, rlx_request *req, const rlx_event *ev)
{
    wjob *j = calloc(1, sizeof *j);
    char *text = ev && ev->text_len ? malloc(ev->text_len) : NULL;
    if (!j || (ev && ev->text_len && !text)) {
        /* cannot queue: the turn stays in memory only, and its event goes out now */
        char id[300];
        fprintf(stderr, "rlxd: session '%s' not saved: out of memory\n", rlx_log_escape(ws->id, true, id, sizeof id));
        free(j);
        free(text);
        free(tokens);
        free(snap);
        if (req) {
            rlx_event e = *ev;
            rlx__emit(req, &e);
            rlx_request_free(req);
        }
        return;
    }
    j->kind = WJOB_PUT;
    snprintf(j->id, sizeof j->id, "%s", ws->id);
    j->ws = ws;
    ws->pending++;
    j->tokens = tokens;
    j->n_tokens = n_tokens;
    pthread_mutex_lock(&w->wmu);
    bool room = w->wbytes == 0 || w->wbytes + snap_bytes <= RLX_WRITER_MAX_BYTES;
    pthread_mutex_unlock(&w->wmu);
    if (room) {
        j->snap = snap;
        j->snap_bytes = snap_bytes;
    } else {
        free(snap);
    }
    j->req = req;
    if (ev) {
        j->ev = *ev;
        if (text) memcpy(text, ev->text, ev->text_len);
        j->text = text;
        j->ev.text = text ? text : "";
    }
    enqueue(w, j);
}

wjob *rlx__writer_delete(rlx_worker *w, const char *id, rlx_error *err)
{
    wjob *j = calloc(1, sizeof *j);
    if (!j) {
        rlx_errorf(err, RLX_ENOMEM, "out of memory");
        return NULL;
    }
    j->kind = WJOB_DELETE;
    snprintf(j->id, sizeof j->id, "%s", id);
    enqueue(w, j);
    return j;
}

bool rlx__writer_deleting(rlx_worker *w, const char *id)
{
    if (!w->wthread_started) return false;
    bool found = false;
    pthread_mutex_lock(&w->wmu);
    for (wjob *j = w->whead; j && !found; j = j->next) found = j->kind == WJOB_DELETE && !strcmp(j->id, id);
    pthread_mutex_unlock(&w->wmu);
    return found;
}

int rlx__writer_wait(rlx_worker *w, wjob *j, rlx_error *err)
{
    pthread_mutex_lock(&w->wmu);
    while (!j->done) pthread_cond_wait(&w->wdone, &w->wmu);
    pthread_mutex_unlock(&w->wmu);
    int rc = j->rc;
    if (rc && err) *err = j->err;
    free(j);
    return rc;
}

void rlx__writer_limits(rlx_worker *w)
{
    wjob *j = calloc(1, sizeof *j);
    if (!j) return; /* the next period tries again */
    j->kind = WJOB_LIMITS;
    enqueue(w, j);
}
