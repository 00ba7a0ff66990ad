/* worker_session.c - sessions: a client-named conversation whose token history and KV blocks
 * the worker keeps between requests, so the next turn prefills only its new tokens.
 *
 * Between turns a session pins its full KV blocks through engine/memory.h (they stay
 * registered in the prefix cache, so the next turn's prompt finds them; a model with recurrent
 * state pins those up to its latest state checkpoint, which the next turn restores, and with
 * no checkpoint cache pins nothing and recomputes), under an LRU budget across idle sessions; when the
 * pool runs short the scheduler takes idle sessions' pins back before preempting anything.
 * With a database (--db) every finished turn is queued for the session writer
 * (session_writer.c): its row, keyed by (model name, id), and a snapshot of the pinned blocks
 * in this model's snapshot directory. A restarted daemon restores the blocks when the snapshot
 * matches the model file and the history (session_snapshot.c), and otherwise recomputes.
 *
 * Sessions not updated for session_ttl_s are invisible to every lookup (attach, get, list,
 * delete) from the moment they expire, and removed by the worker's periodic collection. */
#include "engine/session.h"
#include "engine/worker_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* <db>.kv/<model name>, the name with bytes outside [A-Za-z0-9._-] written as %XX */
static char *model_dir(const char *db, const char *name)
{
    size_t n = strlen(db) + 4 + 3 * strlen(name) + 2;
    char *p = malloc(n);
    if (!p) return NULL;
    size_t k = (size_t)snprintf(p, n, "%s.kv/", db);
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                     *c == '.' || *c == '_' || *c == '-';
        if (plain && !(c == (const unsigned char *)name && *c == '.')) p[k++] = (char)*c;
        else k += (size_t)snprintf(p + k, n - k, "%%%02X", *c);
    }
    p[k] = 0;
    return p;
}

int rlx__sessions_open(rlx_worker *w, rlx_error *err)
{
    pthread_mutex_init(&w->smu, NULL);
    w->pin_budget = RLX_MAX(1, w->runner->kv_geo.n_blocks / 4);
    if (w->cfg.max_sessions <= 0) w->cfg.max_sessions = 1024;
    double ttl = w->cfg.session_ttl_s;
    w->gc_interval = ttl > 0 ? RLX_MIN(RLX_MAX(ttl / 4, 0.05), 60.0) : 60.0;
    w->last_gc = rlx_now();
    if (!w->cfg.db_path) return 0;
    w->model_hash = rlx__model_hash(w->runner);
    int rc;
    if ((rc = rlx_session_store_open(&w->store, w->cfg.db_path, err)) ||
        (rc = rlx_session_store_open(&w->rstore, w->cfg.db_path, err)) ||
        (rc = rlx_session_store_open(&w->astore, w->cfg.db_path, err)))
        return rc;
    char top[1100];
    snprintf(top, sizeof top, "%s.kv", w->cfg.db_path);
    if (mkdir(top, 0700) && errno != EEXIST)
        return rlx_errorf(err, RLX_EIO, "cannot create the session snapshot directory %s: %s", top, strerror(errno));
    if (!(w->kv_dir = model_dir(w->cfg.db_path, w->name))) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    if (mkdir(w->kv_dir, 0700) && errno != EEXIST)
        return rlx_errorf(err, RLX_EIO, "cannot create the session snapshot directory %s: %s", w->kv_dir, strerror(errno));
    if ((rc = rlx__writer_start(w, err))) return rc;
    /* the limits at once, not a period later: a restart with a lower --max-sessions or
       --session-ttl trims the database now (and sqlite's caches fill at start, not in the
       middle of serving) */
    rlx__writer_limits(w);
    return 0;
}

static void unpin(rlx_worker *w, wsession *ws)
{
    rlx_memory_unpin(&w->runner->mem, ws->pinned, ws->n_pinned);
    free(ws->pinned);
    ws->pinned = NULL;
    ws->n_pinned = 0;
    ws->pinned_hash = 0;
}

static void free_session(rlx_worker *w, wsession *ws)
{
    unpin(w, ws);
    free(ws->tokens);
    free(ws);
}

void rlx__sessions_close(rlx_worker *w)
{
    rlx__writer_stop(w); /* stores what is queued (and delivers those turns' events) */
    for (int32_t i = 0; i < w->n_sessions; i++) free_session(w, w->sessions[i]);
    free(w->sessions);
    w->sessions = NULL;
    w->n_sessions = 0;
    rlx_session_store_close(w->store);
    rlx_session_store_close(w->rstore);
    rlx_session_store_close(w->astore);
    w->store = w->rstore = w->astore = NULL;
    free(w->kv_dir);
    w->kv_dir = NULL;
    pthread_mutex_destroy(&w->smu);
}

static bool expired(const rlx_worker *w, const wsession *ws, double now)
{
    return w->cfg.session_ttl_s > 0 && !ws->busy && ws->pending == 0 && now - ws->updated > w->cfg.session_ttl_s;
}

/* The live session named id (smu held); an expired one is marked deleted on the way. */
static wsession *find(rlx_worker *w, const char *id)
{
    double now = wall_now();
    for (int32_t i = 0; i < w->n_sessions; i++) {
        wsession *x = w->sessions[i];
        if (x->deleted || strcmp(x->id, id)) continue;
        if (expired(w, x, now)) { x->deleted = true; continue; }
        return x;
    }
    return NULL;
}

static void remove_session(rlx_worker *w, int32_t i)
{
    free_session(w, w->sessions[i]);
    memmove(&w->sessions[i], &w->sessions[i + 1], (size_t)(w->n_sessions - i - 1) * sizeof *w->sessions);
    w->n_sessions--;
}

void rlx__sessions_gc(rlx_worker *w)
{
    double now = wall_now();
    pthread_mutex_lock(&w->smu);
    for (int32_t i = w->n_sessions - 1; i >= 0; i--) {
        wsession *x = w->sessions[i];
        if (expired(w, x, now)) x->deleted = true;
        if (x->deleted && !x->busy && x->pending == 0) remove_session(w, i);
    }
    pthread_mutex_unlock(&w->smu);
    double t = rlx_now();
    if (w->store && t - w->last_gc >= w->gc_interval) {
        w->last_gc = t;
        rlx__writer_limits(w);
    }
}

int32_t rlx__session_history(rlx_worker *w, const char *id)
{
    pthread_mutex_lock(&w->smu);
    wsession *ws = find(w, id);
    int32_t n = ws ? ws->n_tokens : 0;
    pthread_mutex_unlock(&w->smu);
    return n;
}

/* Fills a new session from its stored row (worker thread, the worker's own connection; no
 * lock held: the read and the snapshot restore may touch the disk). */
static int load_stored(rlx_worker *w, wsession *ws, rlx_error *err)
{
    rlx_session stored = {0};
    if (!w->rstore) return 0;
    rlx_error gerr = {0};
    int grc = rlx_session_get(w->rstore, w->name, ws->id, w->cfg.session_ttl_s, &stored, &gerr);
    if (grc) rlx_session_clear(&stored); /* whatever a failed read left */
    if (grc == RLX_ENOTFOUND) return 0;
    if (grc) /* a row that cannot be read (a damaged blob, a malformed page) is not an absent one:
                a turn on it started empty and its write replaced the history */
        return rlx_errorf(err, grc == RLX_ENOMEM ? RLX_ENOMEM : RLX_EIO, "session '%s' cannot be read from the database (%s); "
                          "delete the session", ws->id, gerr.msg);
    for (size_t i = 0; i < stored.n_tokens; i++)
        if (stored.tokens[i] < 0 || stored.tokens[i] >= w->runner->n_vocab) {
            int rc = rlx_errorf(err, RLX_EINVAL, "session '%s' holds token %d, outside this model's vocabulary of %d; "
                                "delete the session", ws->id, stored.tokens[i], w->runner->n_vocab);
            rlx_session_clear(&stored);
            return rc;
        }
    ws->created = stored.created;
    ws->updated = stored.updated;
    ws->tokens = stored.tokens;
    ws->n_tokens = (int32_t)stored.n_tokens;
    stored.tokens = NULL;
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)w->model_hash);
    if (stored.kv_path && stored.kv_model_hash && !strcmp(stored.kv_model_hash, hash) &&
        rlx_session_path_within(w->kv_dir, stored.kv_path)) /* never a file outside this model's folder */
        rlx__snapshot_restore(w, stored.kv_path, ws->tokens, ws->n_tokens, w->pin_budget, &ws->pinned, &ws->n_pinned,
                              &ws->pinned_hash);
    rlx_session_clear(&stored);
    return 0;
}

bool rlx__session_busy(rlx_worker *w, const char *id, uint64_t *holder)
{
    pthread_mutex_lock(&w->smu);
    wsession *ws = find(w, id);
    bool busy = ws && ws->busy;
    if (busy && holder) *holder = ws->holder;
    pthread_mutex_unlock(&w->smu);
    return busy;
}

int rlx__session_attach(rlx_worker *w, seq *s, int32_t **ids, size_t *n, bool drop_bos, rlx_error *err)
{
    const char *id = s->req->session_id;
    int rc = rlx_session_id_check(id, err);
    if (rc) return rc;
    pthread_mutex_lock(&w->smu);
    wsession *ws = find(w, id);
    if (ws && ws->busy) {
        pthread_mutex_unlock(&w->smu);
        return rlx_errorf(err, RLX_EFULL, "session '%s' is busy with another request; retry when it finishes", id);
    }
    /* Not in memory: read the store without the lock. A delete of this id queued meanwhile (or
     * before, and not yet applied) means the stored row is as good as gone: start empty. */
    while (!ws) {
        uint64_t gen = w->delete_gen;
        bool doomed = rlx__writer_deleting(w, id);
        pthread_mutex_unlock(&w->smu);
        wsession *fresh = calloc(1, sizeof *fresh);
        if (!fresh) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        snprintf(fresh->id, sizeof fresh->id, "%s", id);
        fresh->created = fresh->updated = wall_now();
        if (!doomed && (rc = load_stored(w, fresh, err))) {
            free_session(w, fresh);
            return rc;
        }
        pthread_mutex_lock(&w->smu);
        if (gen != w->delete_gen) { /* a delete came in while we read: read again */
            free_session(w, fresh);
            continue;
        }
        if (w->n_sessions == w->cap_sessions) {
            int32_t nc = w->cap_sessions ? w->cap_sessions * 2 : 16;
            wsession **a = realloc(w->sessions, (size_t)nc * sizeof *a);
            if (!a) {
                pthread_mutex_unlock(&w->smu);
                free_session(w, fresh);
                return rlx_errorf(err, RLX_ENOMEM, "out of memory");
            }
            w->sessions = a;
            w->cap_sessions = nc;
        }
        ws = fresh;
        w->sessions[w->n_sessions++] = ws;
    }
    ws->busy = true;
    ws->holder = s->req->id;
    ws->used = rlx_now();
    pthread_mutex_unlock(&w->smu);
    s->session = ws;
    if (!s->req->session_replace && ws->n_tokens > 0) {
        /* the turn continues the history: a BOS the tokenizer put first would restart it */
        int32_t bos = rlx_tokenizer_bos(w->tok);
        size_t skip = drop_bos && *n > 0 && bos >= 0 && (*ids)[0] == bos ? 1 : 0;
        size_t n_new = *n - skip;
        int32_t *joined = malloc(((size_t)ws->n_tokens + n_new) * sizeof *joined);
        if (!joined) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        memcpy(joined, ws->tokens, (size_t)ws->n_tokens * sizeof *joined);
        if (n_new) memcpy(joined + ws->n_tokens, *ids + skip, n_new * sizeof *joined);
        if (*ids != s->req->prompt_ids) free(*ids);
        *ids = joined;
        *n = n_new + (size_t)ws->n_tokens;
        s->n_history = ws->n_tokens;
    }
    return 0;
}

/* A turn that ends without committing (cancelled, failed) leaves its session as it was; a new
 * session whose first turn that was never existed (with --db no row was written either). */
void rlx__session_detach(rlx_worker *w, seq *s)
{
    if (!s->session) return;
    pthread_mutex_lock(&w->smu);
    s->session->busy = false;
    if (s->session->n_tokens == 0 && s->session->pending == 0)
        for (int32_t i = 0; i < w->n_sessions; i++)
            if (w->sessions[i] == s->session) { remove_session(w, i); break; }
    pthread_mutex_unlock(&w->smu);
    s->session = NULL;
}

/* Drops pins of the least recently used idle sessions until the budget holds (smu held). */
static void enforce_pin_budget(rlx_worker *w)
{
    for (;;) {
        int32_t total = 0;
        wsession *lru = NULL;
        for (int32_t i = 0; i < w->n_sessions; i++) {
            wsession *x = w->sessions[i];
            total += x->n_pinned;
            if (x->n_pinned && !x->busy && (!lru || x->used < lru->used)) lru = x;
        }
        if (total <= w->pin_budget || !lru) return;
        unpin(w, lru);
    }
}

bool rlx__sessions_release_pins(rlx_worker *w, bool busy_too)
{
    pthread_mutex_lock(&w->smu);
    wsession *lru = NULL;
    for (int32_t i = 0; i < w->n_sessions; i++) {
        wsession *x = w->sessions[i];
        if (x->n_pinned && (busy_too || !x->busy) && (!lru || x->used < lru->used)) lru = x;
    }
    if (lru) unpin(w, lru);
    pthread_mutex_unlock(&w->smu);
    return lru != NULL;
}

bool rlx__session_commit(rlx_worker *w, seq *s, const rlx_event *ev)
{
    wsession *ws = s->session;
    if (!ws) return false;
    int32_t *tokens = malloc((size_t)RLX_MAX(s->n_tokens, 1) * sizeof *tokens);
    int32_t *pins = malloc((size_t)RLX_MAX(s->mem.n_hashed, 1) * sizeof *pins);
    int32_t *stored = w->store ? malloc((size_t)RLX_MAX(s->n_tokens, 1) * sizeof *stored) : NULL;
    if (!tokens || !pins || (w->store && !stored)) {
        free(tokens); free(pins); free(stored);
        rlx__session_detach(w, s);
        return false;
    }
    memcpy(tokens, s->tokens, (size_t)s->n_tokens * sizeof *tokens);
    if (stored) memcpy(stored, s->tokens, (size_t)s->n_tokens * sizeof *stored);
    /* a model with recurrent state pins the blocks up to its latest checkpoint (none without
     * a checkpoint cache: its history is recomputed) */
    uint64_t pins_hash = 0;
    int32_t n_pins = rlx_memory_pin(&w->runner->mem, &s->mem, pins, &pins_hash);
    /* the snapshot is read from the pool here (worker thread); the writer only writes bytes */
    size_t snap_bytes = 0;
    uint8_t *snap = stored && w->kv_dir ? rlx__snapshot_capture(w, pins, n_pins, pins_hash, &snap_bytes) : NULL;
    bool handed = false;
    pthread_mutex_lock(&w->smu);
    unpin(w, ws);
    free(ws->tokens);
    ws->tokens = tokens;
    ws->n_tokens = s->n_tokens;
    ws->pinned = pins;
    ws->n_pinned = n_pins;
    ws->pinned_hash = pins_hash;
    ws->updated = wall_now();
    ws->used = rlx_now();
    ws->busy = false;
    s->session = NULL;
    if (stored && !ws->deleted) {
        /* under smu: a delete of this session queues after this turn, never before it */
        rlx__writer_put(w, ws, stored, (size_t)s->n_tokens, snap, snap_bytes, s->req, ev);
        s->req = NULL;
        handed = true;
    } else {
        free(stored); /* deleted while the turn ran: nothing to store */
        free(snap);
    }
    /* in-memory limits: expired sessions, then the oldest idle ones beyond the cap */
    double now = wall_now();
    for (int32_t i = w->n_sessions - 1; i >= 0; i--) {
        wsession *x = w->sessions[i];
        if (expired(w, x, now)) x->deleted = true;
        if (x->deleted && !x->busy && x->pending == 0) remove_session(w, i);
    }
    for (;;) {
        int32_t live = 0, oldest = -1;
        for (int32_t i = 0; i < w->n_sessions; i++) {
            wsession *x = w->sessions[i];
            if (x->deleted) continue;
            live++;
            if (!x->busy && x->pending == 0 && (oldest < 0 || x->updated < w->sessions[oldest]->updated)) oldest = i;
        }
        if (live <= w->cfg.max_sessions || oldest < 0) break;
        remove_session(w, oldest);
    }
    enforce_pin_budget(w);
    pthread_mutex_unlock(&w->smu);
    return handed;
}

/* ---- the public session API (any thread) ---- */

static void info_of(const rlx_worker *w, const wsession *ws, rlx_session_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s", ws->id);
    snprintf(out->model, sizeof out->model, "%s", w->name);
    out->n_tokens = ws->n_tokens;
    out->created = ws->created;
    out->updated = ws->updated;
    out->has_kv_snapshot = false;
}

static void info_of_stored(const rlx_session *s, rlx_session_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s", s->id);
    snprintf(out->model, sizeof out->model, "%s", s->model ? s->model : "");
    out->n_tokens = (int32_t)s->n_tokens;
    out->created = s->created;
    out->updated = s->updated;
    out->has_kv_snapshot = s->kv_path != NULL;
    out->damaged = s->damaged;
}

int rlx_worker_sessions_list(rlx_worker *w, size_t offset, size_t limit, rlx_session_info **out, size_t *n,
                             size_t *total, rlx_error *err)
{
    *out = NULL;
    *n = 0;
    if (w->astore) {
        rlx_session *list = NULL;
        size_t cnt = 0;
        int rc = rlx_session_list(w->astore, w->name, w->cfg.session_ttl_s, offset, limit, &list, &cnt, total, err);
        if (rc) return rc;
        *out = calloc(cnt ? cnt : 1, sizeof **out);
        if (!*out) { rlx_session_list_free(list, cnt); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
        for (size_t i = 0; i < cnt; i++) info_of_stored(&list[i], &(*out)[i]);
        *n = cnt;
        rlx_session_list_free(list, cnt);
        return 0;
    }
    pthread_mutex_lock(&w->smu);
    size_t live = 0;
    wsession **order = malloc((size_t)RLX_MAX(w->n_sessions, 1) * sizeof *order);
    if (!order) { pthread_mutex_unlock(&w->smu); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
    double now = wall_now();
    for (int32_t i = 0; i < w->n_sessions; i++)
        if (!w->sessions[i]->deleted && !expired(w, w->sessions[i], now)) order[live++] = w->sessions[i];
    /* most recently updated first */
    for (size_t i = 1; i < live; i++)
        for (size_t j = i; j > 0 && order[j]->updated > order[j - 1]->updated; j--) {
            wsession *t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    size_t first = RLX_MIN(offset, live), cnt = RLX_MIN(limit, live - first);
    *out = calloc(cnt ? cnt : 1, sizeof **out);
    if (*out)
        for (size_t i = 0; i < cnt; i++) info_of(w, order[first + i], &(*out)[i]);
    pthread_mutex_unlock(&w->smu);
    free(order);
    if (!*out) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    *n = cnt;
    if (total) *total = live;
    return 0;
}

int rlx_worker_session_get(rlx_worker *w, const char *id, rlx_session_info *info, int32_t **tokens,
                           size_t *n_tokens, rlx_error *err)
{
    int rc = rlx_session_id_check(id, err);
    if (rc) return rc;
    if (tokens) *tokens = NULL;
    if (w->astore) {
        rlx_session s = {0};
        if ((rc = rlx_session_get(w->astore, w->name, id, w->cfg.session_ttl_s, &s, err))) return rc;
        info_of_stored(&s, info);
        if (tokens) { *tokens = s.tokens; s.tokens = NULL; }
        if (n_tokens) *n_tokens = s.n_tokens;
        rlx_session_clear(&s);
        return 0;
    }
    pthread_mutex_lock(&w->smu);
    wsession *ws = find(w, id);
    if (ws) {
        info_of(w, ws, info);
        if (n_tokens) *n_tokens = (size_t)ws->n_tokens;
        if (tokens && (*tokens = malloc((size_t)RLX_MAX(ws->n_tokens, 1) * sizeof **tokens)) && ws->n_tokens)
            memcpy(*tokens, ws->tokens, (size_t)ws->n_tokens * sizeof **tokens);
    }
    pthread_mutex_unlock(&w->smu);
    if (!ws) return rlx_errorf(err, RLX_ENOTFOUND, "session '%s' does not exist", id);
    return 0;
}

int rlx_worker_session_delete(rlx_worker *w, const char *id, rlx_error *err)
{
    int rc = rlx_session_id_check(id, err);
    if (rc) return rc;
    bool found = false;
    wjob *job = NULL;
    pthread_mutex_lock(&w->smu);
    wsession *ws = find(w, id);
    if (ws) { ws->deleted = true; found = true; }
    w->delete_gen++;
    /* queued under smu: after every turn of this session already queued, and a turn still
     * running sees `deleted` and stores nothing */
    if (w->store && !(job = rlx__writer_delete(w, id, err))) {
        pthread_mutex_unlock(&w->smu);
        return RLX_ENOMEM;
    }
    pthread_mutex_unlock(&w->smu);
    if (job) {
        rlx_error werr = {0};
        rc = rlx__writer_wait(w, job, &werr);
        if (rc == 0) found = true;
        else if (rc != RLX_ENOTFOUND) { if (err) *err = werr; return rc; }
    }
    if (!found) return rlx_errorf(err, RLX_ENOTFOUND, "session '%s' does not exist", id);
    /* the worker unpins and frees it at its next step */
    pthread_mutex_lock(&w->mu);
    w->gc_wanted = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}
