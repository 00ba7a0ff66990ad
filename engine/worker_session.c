/* worker_session.c - sessions: a client-named conversation whose token history and KV blocks
 * the worker keeps between requests, so the next turn prefills only its new tokens.
 *
 * Between turns a session pins its full KV blocks (they stay registered in the prefix cache,
 * so the next turn's prompt finds them), under an LRU budget across idle sessions. With a
 * database (--db) every finished turn is written to the sqlite3 store, and the pinned blocks
 * to a snapshot file next to it; a restarted daemon restores the blocks when the snapshot's
 * model hash matches, and otherwise recomputes the history. */
#include "engine/session.h"
#include "engine/worker_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char kv_magic[8] = {'R', 'L', 'X', 'K', 'V', '1', 0, 0};

typedef struct kv_header {
    char magic[8];
    uint64_t model_hash;
    uint32_t kv_type, block_size, n_layers, n_blocks;
    uint64_t kv_cols, n_tokens;   /* tokens covered by the blocks */
} kv_header;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t compute_model_hash(const rlx_worker *w)
{
    const rlx_runner *r = w->runner;
    const rlx_gguf *g = r->model->gguf;
    int32_t geo[6] = {r->kv_geo.n_layers, (int32_t)r->kv_geo.kv_cols, r->kv_geo.block_size, r->kv_geo.type,
                      (int32_t)rlx_gguf_n_tensors(g), (int32_t)(rlx_gguf_file_size(g) & 0x7fffffff)};
    uint64_t h = rlx_kv_hash(rlx_gguf_file_size(g), geo, 6);
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        int32_t d[6] = {t->type, (int32_t)t->ne[0], (int32_t)t->ne[1], (int32_t)t->offset, (int32_t)(t->offset >> 32),
                        (int32_t)t->size};
        h = rlx_kv_hash(h, d, 6);
    }
    return h;
}

int rlx__sessions_open(rlx_worker *w, rlx_error *err)
{
    pthread_mutex_init(&w->smu, NULL);
    w->model_hash = compute_model_hash(w);
    w->pin_budget = RLX_MAX(1, w->runner->kv.n_blocks / 4);
    if (w->cfg.max_sessions <= 0) w->cfg.max_sessions = 1024;
    if (!w->cfg.db_path) return 0;
    int rc = rlx_session_store_open(&w->store, w->cfg.db_path, err);
    if (rc) return rc;
    size_t n = strlen(w->cfg.db_path) + 8;
    w->kv_dir = malloc(n);
    if (!w->kv_dir) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
    snprintf(w->kv_dir, n, "%s.kv", w->cfg.db_path);
    if (mkdir(w->kv_dir, 0700) && errno != EEXIST)
        return rlx_errorf(err, RLX_EIO, "cannot create the session snapshot directory %s: %s", w->kv_dir, strerror(errno));
    return 0;
}

static void unpin(rlx_worker *w, wsession *ws)
{
    for (int32_t i = 0; i < ws->n_pinned; i++) rlx_kv_release(&w->runner->kv, ws->pinned[i]);
    free(ws->pinned);
    ws->pinned = NULL;
    ws->n_pinned = 0;
}

static void free_session(rlx_worker *w, wsession *ws)
{
    unpin(w, ws);
    free(ws->tokens);
    free(ws);
}

void rlx__sessions_close(rlx_worker *w)
{
    for (int32_t i = 0; i < w->n_sessions; i++) free_session(w, w->sessions[i]);
    free(w->sessions);
    w->sessions = NULL;
    w->n_sessions = 0;
    if (w->store) rlx_session_store_close(w->store);
    free(w->kv_dir);
    pthread_mutex_destroy(&w->smu);
}

static wsession *find(rlx_worker *w, const char *id)
{
    for (int32_t i = 0; i < w->n_sessions; i++)
        if (!w->sessions[i]->deleted && !strcmp(w->sessions[i]->id, id)) return w->sessions[i];
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
    pthread_mutex_lock(&w->smu);
    for (int32_t i = w->n_sessions - 1; i >= 0; i--)
        if (w->sessions[i]->deleted && !w->sessions[i]->busy) remove_session(w, i);
    pthread_mutex_unlock(&w->smu);
}

static void snapshot_path(const rlx_worker *w, const char *id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s.kv", w->kv_dir, id);
}

/* Loads the blocks of a snapshot into the pool and pins them; false if it does not match. */
static bool restore_snapshot(rlx_worker *w, wsession *ws, const char *path)
{
    rlx_runner *r = w->runner;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    kv_header h;
    bool ok = fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, kv_magic, 8) && h.model_hash == w->model_hash &&
              h.kv_type == (uint32_t)r->kv_geo.type && h.block_size == (uint32_t)r->kv_geo.block_size &&
              h.n_layers == (uint32_t)r->kv_geo.n_layers && h.kv_cols == (uint64_t)r->kv_geo.kv_cols &&
              h.n_tokens == (uint64_t)h.n_blocks * h.block_size && h.n_tokens <= (uint64_t)ws->n_tokens &&
              (int32_t)h.n_blocks <= w->pin_budget;
    size_t bb = (size_t)r->kv_geo.block_size * rlx_kv_row_bytes(r->kv_geo.type, r->kv_geo.kv_cols);
    uint8_t *kb = ok ? malloc(bb) : NULL, *vb = ok ? malloc(bb) : NULL;
    int32_t *blocks = ok ? calloc(h.n_blocks ? h.n_blocks : 1, sizeof *blocks) : NULL;
    int32_t got = 0;
    uint64_t hash = 0;
    ok = ok && kb && vb && blocks;
    for (uint32_t b = 0; ok && b < h.n_blocks; b++) {
        uint64_t ch = rlx_kv_hash(hash, ws->tokens + (size_t)b * h.block_size, (int32_t)h.block_size);
        int32_t blk = rlx_kv_lookup(&r->kv, ch); /* already cached: keep it */
        bool fresh = blk < 0;
        if (fresh && (blk = rlx_kv_alloc(&r->kv)) < 0) { ok = false; break; }
        blocks[got++] = blk;
        for (uint32_t l = 0; l < h.n_layers; l++) {
            if (fread(kb, bb, 1, f) != 1 || fread(vb, bb, 1, f) != 1) { ok = false; break; }
            if (fresh && r->backend->ops->kv_write_block(r->backend, (int32_t)l, blk, kb, vb, NULL)) { ok = false; break; }
        }
        if (ok && fresh) rlx_kv_register(&r->kv, blk, ch);
        hash = ch;
    }
    fclose(f);
    free(kb);
    free(vb);
    if (!ok) {
        for (int32_t i = 0; i < got; i++) rlx_kv_release(&r->kv, blocks[i]);
        free(blocks);
        return false;
    }
    ws->pinned = blocks;
    ws->n_pinned = got;
    return true;
}

static void write_snapshot(rlx_worker *w, wsession *ws, char *path_out, size_t cap)
{
    rlx_runner *r = w->runner;
    path_out[0] = 0;
    if (!w->kv_dir || !r->backend->ops->kv_read_block || ws->n_pinned == 0) return;
    char path[1024], tmp[1040];
    snapshot_path(w, ws->id, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    size_t bb = (size_t)r->kv_geo.block_size * rlx_kv_row_bytes(r->kv_geo.type, r->kv_geo.kv_cols);
    kv_header h = {.model_hash = w->model_hash, .kv_type = (uint32_t)r->kv_geo.type, .block_size = (uint32_t)r->kv_geo.block_size,
                   .n_layers = (uint32_t)r->kv_geo.n_layers, .n_blocks = (uint32_t)ws->n_pinned,
                   .kv_cols = (uint64_t)r->kv_geo.kv_cols, .n_tokens = (uint64_t)ws->n_pinned * (uint64_t)r->kv_geo.block_size};
    memcpy(h.magic, kv_magic, 8);
    FILE *f = fopen(tmp, "wb");
    uint8_t *kb = malloc(bb), *vb = malloc(bb);
    bool ok = f && kb && vb && fwrite(&h, sizeof h, 1, f) == 1;
    for (int32_t b = 0; ok && b < ws->n_pinned; b++)
        for (int32_t l = 0; ok && l < r->kv_geo.n_layers; l++)
            ok = !r->backend->ops->kv_read_block(r->backend, l, ws->pinned[b], kb, vb, NULL) &&
                 fwrite(kb, bb, 1, f) == 1 && fwrite(vb, bb, 1, f) == 1;
    free(kb);
    free(vb);
    if (f && fclose(f)) ok = false;
    if (ok && rename(tmp, path) == 0) snprintf(path_out, cap, "%s", path);
    else remove(tmp);
}

int rlx__session_attach(rlx_worker *w, seq *s, int32_t **ids, size_t *n, rlx_error *err)
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
    if (!ws) {
        if (w->n_sessions == w->cap_sessions) {
            int32_t nc = w->cap_sessions ? w->cap_sessions * 2 : 16;
            wsession **a = realloc(w->sessions, (size_t)nc * sizeof *a);
            if (!a) { pthread_mutex_unlock(&w->smu); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
            w->sessions = a;
            w->cap_sessions = nc;
        }
        ws = calloc(1, sizeof *ws);
        if (!ws) { pthread_mutex_unlock(&w->smu); return rlx_errorf(err, RLX_ENOMEM, "out of memory"); }
        snprintf(ws->id, sizeof ws->id, "%s", id);
        ws->created = ws->updated = wall_now();
        rlx_session stored = {0};
        if (w->store && rlx_session_get(w->store, id, &stored, NULL) == 0) {
            ws->created = stored.created;
            ws->updated = stored.updated;
            ws->tokens = stored.tokens;
            ws->n_tokens = (int32_t)stored.n_tokens;
            stored.tokens = NULL;
            if (stored.kv_path && stored.kv_model_hash) restore_snapshot(w, ws, stored.kv_path);
            rlx_session_clear(&stored);
        }
        w->sessions[w->n_sessions++] = ws;
    }
    ws->busy = true;
    ws->used = rlx_now();
    pthread_mutex_unlock(&w->smu);
    s->session = ws;
    if (!s->req->session_replace && ws->n_tokens > 0) {
        int32_t *joined = malloc(((size_t)ws->n_tokens + *n) * sizeof *joined);
        if (!joined) return rlx_errorf(err, RLX_ENOMEM, "out of memory");
        memcpy(joined, ws->tokens, (size_t)ws->n_tokens * sizeof *joined);
        memcpy(joined + ws->n_tokens, *ids, *n * sizeof *joined);
        if (*ids != s->req->prompt_ids) free(*ids);
        *ids = joined;
        *n += (size_t)ws->n_tokens;
    }
    return 0;
}

void rlx__session_detach(rlx_worker *w, seq *s)
{
    if (!s->session) return;
    pthread_mutex_lock(&w->smu);
    s->session->busy = false;
    pthread_mutex_unlock(&w->smu);
    s->session = NULL;
}

/* Drops pins of the least recently used idle sessions until the budget holds. */
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

void rlx__session_commit(rlx_worker *w, seq *s)
{
    wsession *ws = s->session;
    if (!ws) return;
    int32_t *tokens = malloc((size_t)RLX_MAX(s->n_tokens, 1) * sizeof *tokens);
    int32_t *pins = malloc((size_t)RLX_MAX(s->n_hashed, 1) * sizeof *pins);
    if (!tokens || !pins) { free(tokens); free(pins); rlx__session_detach(w, s); return; }
    memcpy(tokens, s->tokens, (size_t)s->n_tokens * sizeof *tokens);
    for (int32_t i = 0; i < s->n_hashed; i++) {
        pins[i] = s->blocks[i];
        rlx_kv_retain(&w->runner->kv, pins[i]);
    }
    pthread_mutex_lock(&w->smu);
    unpin(w, ws);
    free(ws->tokens);
    ws->tokens = tokens;
    ws->n_tokens = s->n_tokens;
    ws->pinned = pins;
    ws->n_pinned = s->n_hashed;
    ws->updated = wall_now();
    ws->used = rlx_now();
    pthread_mutex_unlock(&w->smu);
    if (w->store) {
        char kv_path[1100], hash_hex[17];
        write_snapshot(w, ws, kv_path, sizeof kv_path);
        snprintf(hash_hex, sizeof hash_hex, "%016llx", (unsigned long long)w->model_hash);
        rlx_error err = {0};
        if (rlx_session_put(w->store, ws->id, w->name, ws->tokens, (size_t)ws->n_tokens, kv_path[0] ? kv_path : NULL,
                            kv_path[0] ? hash_hex : NULL, &err))
            fprintf(stderr, "rlxd: session '%s' not saved: %s\n", ws->id, err.msg);
        rlx_session_enforce_limits(w->store, w->cfg.session_ttl_s, w->cfg.max_sessions, NULL, NULL);
    }
    rlx__session_detach(w, s);
    pthread_mutex_lock(&w->smu);
    /* in-memory limits: oldest idle sessions beyond the cap, and expired ones */
    double now = wall_now();
    for (int32_t i = w->n_sessions - 1; i >= 0; i--) {
        wsession *x = w->sessions[i];
        if (!x->busy && w->cfg.session_ttl_s > 0 && now - x->updated > w->cfg.session_ttl_s) remove_session(w, i);
    }
    while (w->n_sessions > w->cfg.max_sessions) {
        int32_t oldest = -1;
        for (int32_t i = 0; i < w->n_sessions; i++)
            if (!w->sessions[i]->busy && (oldest < 0 || w->sessions[i]->updated < w->sessions[oldest]->updated)) oldest = i;
        if (oldest < 0) break;
        remove_session(w, oldest);
    }
    enforce_pin_budget(w);
    pthread_mutex_unlock(&w->smu);
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
}

int rlx_worker_sessions_list(rlx_worker *w, size_t offset, size_t limit, rlx_session_info **out, size_t *n,
                             size_t *total, rlx_error *err)
{
    *out = NULL;
    *n = 0;
    if (w->store) {
        rlx_session *list = NULL;
        size_t cnt = 0;
        int rc = rlx_session_list(w->store, offset, limit, &list, &cnt, total, err);
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
    for (int32_t i = 0; i < w->n_sessions; i++)
        if (!w->sessions[i]->deleted) order[live++] = w->sessions[i];
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
    if (w->store) {
        rlx_session s = {0};
        if ((rc = rlx_session_get(w->store, id, &s, err))) return rc;
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
        if (tokens && (*tokens = malloc((size_t)RLX_MAX(ws->n_tokens, 1) * sizeof **tokens)))
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
    pthread_mutex_lock(&w->smu);
    wsession *ws = find(w, id);
    if (ws) { ws->deleted = true; found = true; }
    pthread_mutex_unlock(&w->smu);
    if (w->store) {
        rc = rlx_session_delete(w->store, id, err);
        if (rc == 0) found = true;
        else if (rc != RLX_ENOTFOUND) return rc;
    }
    if (!found) return rlx_errorf(err, RLX_ENOTFOUND, "session '%s' does not exist", id);
    /* the worker unpins at its next step */
    pthread_mutex_lock(&w->mu);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}
