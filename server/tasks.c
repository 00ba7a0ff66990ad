/* tasks.c - routes whose answer is computed on the libuv threadpool: tokenizing,
 * detokenizing, rendering templates, and the sessions store (sqlite3 behind a mutex the
 * worker may hold during an fsync). Each task is a call (work.c) whose client is the connection:
 * the connection waits suspended; the task hands back a finished JSON answer, or drops it when
 * the client has gone. */
#include "server/serve.h"
#include "engine/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { TASK_TOKENIZE, TASK_DETOKENIZE, TASK_TEMPLATE, TASK_SESSIONS, TASK_SESSION } task_kind;

typedef struct route_task {
    rlx_call call;                 /* first: the call is the task; its client is the connection */
    rlx_model_slot *m;             /* tokenizer tasks (held: rlx_srv_model_hold) */
    task_kind kind;
    char *text;                    /* tokenize input; session id */
    bool add_special, parse_special, with_pieces;
    int32_t *ids;                  /* detokenize input */
    size_t n_ids;
    rlx_api_request req;           /* template input */
    rlx_model_slot **held;         /* session tasks: the loaded models (held) */
    size_t n_held;
    char **stored;                 /* session tasks with --db: the names of the models not loaded,
                                      whose sessions only the database holds */
    size_t n_stored;
    char *db;                      /* --db (copied), NULL without */
    double ttl;                    /* --session-ttl */
    size_t offset, limit;
    bool del;
    int status;
    char *body;                    /* the answer (JSON) */
} route_task;

static char *print_free(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void set_error(route_task *t, const rlx_api_error *e)
{
    t->status = e->status;
    t->body = rlx_api_error_json(e);
}

static cJSON *session_json(const rlx_session_info *i)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", i->id);
    cJSON_AddStringToObject(o, "object", "session");
    rlx__json_add_fs_text(o, "model", i->model);
    cJSON_AddNumberToObject(o, "n_tokens", i->n_tokens);
    cJSON_AddNumberToObject(o, "created", (double)(long long)i->created);
    cJSON_AddNumberToObject(o, "updated", (double)(long long)i->updated);
    cJSON_AddBoolToObject(o, "kv_snapshot", i->has_kv_snapshot);
    if (i->damaged) {
        cJSON_AddBoolToObject(o, "damaged", true);
        cJSON_AddStringToObject(o, "error", "its stored tokens cannot be read; delete the session");
    }
    return o;
}

/* A stored row of a model that is not loaded, as the API shows a session. */
static cJSON *stored_json(const rlx_session *row, const char *model)
{
    rlx_session_info info = {0};
    snprintf(info.id, sizeof info.id, "%s", row->id);
    snprintf(info.model, sizeof info.model, "%s", model);
    info.n_tokens = (int32_t)row->n_tokens;
    info.created = row->created;
    info.updated = row->updated;
    info.has_kv_snapshot = row->kv_path != NULL;
    info.damaged = row->damaged;
    return session_json(&info);
}

/* A session store's failure as the answer (400 for a bad id, else 500). */
static void session_error(route_task *t, int rc, const rlx_error *err)
{
    rlx_api_error e;
    rlx_api_errorf(&e, rc == RLX_EINVAL ? 400 : 500, rc == RLX_EINVAL ? RLX_API_ERR_INVALID : RLX_API_ERR_SERVER,
                   rc == RLX_EINVAL ? "session_id" : NULL, "%s", err->msg);
    set_error(t, &e);
}

static void sessions_list(route_task *t)
{
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    double total = 0;
    /* offset and limit page the models' lists one after another, as one list (each model got
       them: ?limit=1 gave one session per model) */
    size_t skip = t->offset, want = t->limit;
    for (size_t m = 0; m < t->n_held; m++) {
        rlx_session_info *list = NULL;
        size_t n = 0, tot = 0;
        rlx_error err = {0};
        int rc = rlx_worker_sessions_list(t->held[m]->w, skip, want, &list, &n, &tot, &err);
        if (rc) { /* an empty list would say the sessions are gone */
            cJSON_Delete(o);
            session_error(t, rc, &err);
            return;
        }
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(data, session_json(&list[i]));
        total += (double)tot;
        skip = skip > tot ? skip - tot : 0;
        want -= RLX_MIN(n, want);
        free(list);
    }
    /* with --db, the models not loaded: their sessions are rows only (they were left out, while
       GET and DELETE of one reached it) */
    rlx_session_store *st = NULL;
    rlx_error err = {0};
    int rc = t->db && t->n_stored ? rlx_session_store_open(&st, t->db, &err) : 0;
    for (size_t m = 0; !rc && st && m < t->n_stored; m++) {
        rlx_session *rows = NULL;
        size_t n = 0, tot = 0;
        if ((rc = rlx_session_list(st, t->stored[m], t->ttl, skip, want, &rows, &n, &tot, &err))) break;
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(data, stored_json(&rows[i], t->stored[m]));
        total += (double)tot;
        skip = skip > tot ? skip - tot : 0;
        want -= RLX_MIN(n, want);
        rlx_session_list_free(rows, n);
    }
    rlx_session_store_close(st);
    if (rc) {
        cJSON_Delete(o);
        session_error(t, rc, &err);
        return;
    }
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddNumberToObject(o, "total", total);
    t->body = print_free(o);
}

/* A model that is not loaded keeps its sessions in the database only: with --db, DELETE removes
 * its row of the id (before, the row stayed, and the model's next load continued the "deleted"
 * conversation) and GET shows it. 0 (with *found), or the store's error. */
static int stored_session(route_task *t, const char *id, bool del, cJSON **shown, int *found, rlx_error *err)
{
    *found = 0;
    if (!t->db || !t->n_stored) return 0;
    rlx_session_store *st = NULL;
    int rc = rlx_session_store_open(&st, t->db, err);
    for (size_t m = 0; !rc && m < t->n_stored && !(shown && *shown); m++) {
        rlx_session row = {0};
        int r = del ? rlx_session_delete(st, t->stored[m], id, err)
                    : rlx_session_get(st, t->stored[m], id, t->ttl, &row, err);
        if (r) rlx_session_clear(&row); /* whatever a failed read left */
        if (r == RLX_ENOTFOUND) continue;
        if (r) {
            rc = r;
            break;
        }
        (*found)++;
        if (!del) {
            *shown = stored_json(&row, t->stored[m]);
            cJSON *arr = cJSON_AddArrayToObject(*shown, "tokens");
            for (size_t i = 0; i < row.n_tokens; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(row.tokens[i]));
            rlx_session_clear(&row);
        }
    }
    rlx_session_store_close(st);
    return rc;
}

static void session_one(route_task *t)
{
    const char *id = t->text;
    rlx_api_error e;
    rlx_error err = {0};
    if (t->del) { /* every model's session of that id (one id may have been used with several) */
        int deleted = 0;
        for (size_t m = 0; m < t->n_held; m++) {
            int rc = rlx_worker_session_delete(t->held[m]->w, id, &err);
            if (rc == RLX_ENOTFOUND) continue;
            if (rc) {
                session_error(t, rc, &err);
                return;
            }
            deleted++;
        }
        int found = 0, rc = rlx_session_id_check(id, &err);
        if (!rc) rc = stored_session(t, id, true, NULL, &found, &err);
        if (rc) {
            session_error(t, rc, &err);
            return;
        }
        deleted += found;
        if (deleted) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", id);
            cJSON_AddStringToObject(o, "object", "session.deleted");
            cJSON_AddBoolToObject(o, "deleted", true);
            t->body = print_free(o);
            return;
        }
    }
    for (size_t m = 0; !t->del && m < t->n_held; m++) {
        rlx_session_info info;
        int32_t *tokens = NULL;
        size_t n = 0;
        rlx_worker *w = t->held[m]->w;
        int rc = rlx_worker_session_get(w, id, &info, &tokens, &n, &err);
        if (rc == RLX_ENOTFOUND) continue;
        if (rc) {
            session_error(t, rc, &err);
            return;
        }
        cJSON *o = session_json(&info);
        cJSON *arr = cJSON_AddArrayToObject(o, "tokens");
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(tokens[i]));
        free(tokens);
        t->body = print_free(o);
        return;
    }
    if (!t->del) {
        cJSON *shown = NULL;
        int found = 0, rc = rlx_session_id_check(id, &err);
        if (!rc) rc = stored_session(t, id, false, &shown, &found, &err);
        if (rc) {
            session_error(t, rc, &err);
            return;
        }
        if (shown) {
            t->body = print_free(shown);
            return;
        }
    }
    rlx_api_errorf(&e, 404, RLX_API_ERR_INVALID, "session_id", "The session '%s' does not exist.", id);
    e.code = "session_not_found";
    set_error(t, &e);
}

static void task_work(rlx_call *call)
{
    route_task *t = (route_task *)call;
    rlx_api_error e;
    rlx_error err = {0};
    t->status = 200;
    if (t->kind == TASK_TOKENIZE) {
        int32_t *ids = NULL;
        size_t n = 0;
        int rc = rlx_tokenize(t->m->tok, t->text, strlen(t->text), t->add_special, t->parse_special, &ids, &n, &err);
        if (rc) {
            rlx_api_error_from_rlx(&e, rc, err.msg);
            set_error(t, &e);
            return;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(o, "tokens");
        for (size_t i = 0; i < n; i++) {
            if (!t->with_pieces) {
                cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
                continue;
            }
            /* llama-server's {id, piece}: the piece's text, or its bytes when they are not UTF-8 */
            char buf[257];
            size_t len = rlx_token_to_bytes(t->m->tok, ids[i], true, buf, sizeof buf - 1);
            len = len < sizeof buf - 1 ? len : sizeof buf - 1;
            cJSON *it = cJSON_CreateObject();
            cJSON_AddNumberToObject(it, "id", ids[i]);
            if (rlx_api_utf8_valid(buf, len) && !memchr(buf, 0, len)) {
                buf[len] = 0;
                cJSON_AddStringToObject(it, "piece", buf);
            } else {
                cJSON *b = cJSON_AddArrayToObject(it, "piece");
                for (size_t k = 0; b && k < len; k++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)buf[k]));
            }
            cJSON_AddItemToArray(arr, it);
        }
        free(ids);
        t->body = print_free(o);
    } else if (t->kind == TASK_DETOKENIZE) {
        size_t n = 0;
        /* special tokens as text and the pieces joined as they are (a first piece's space kept:
           texts detokenized token by token concatenate to the whole), as llama-server */
        char *raw = rlx_detokenize_n(t->m->tok, t->ids, t->n_ids, true, false, &n);
        /* arbitrary ids may end inside a character, hold lone bytes or the byte 0 (kept, as \u0000) */
        cJSON *text = raw ? rlx_api_json_text(raw, n) : NULL;
        free(raw);
        cJSON *o = cJSON_CreateObject();
        if (!text || !o) {
            cJSON_Delete(text);
            cJSON_Delete(o);
            rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
            set_error(t, &e);
            return;
        }
        cJSON_AddItemToObject(o, "content", text);
        t->body = print_free(o);
    } else if (t->kind == TASK_TEMPLATE) {
        char *prompt = NULL;
        if (rlx_render_chat(t->m, &t->req, &prompt, &e)) {
            set_error(t, &e);
            return;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "prompt", prompt);
        free(prompt);
        t->body = print_free(o);
    } else if (t->kind == TASK_SESSIONS) {
        sessions_list(t);
    } else {
        session_one(t);
    }
}

static void task_free(route_task *t)
{
    if (t->m) rlx_srv_model_release(t->m);
    for (size_t i = 0; i < t->n_held; i++) rlx_srv_model_release(t->held[i]);
    free(t->held);
    for (size_t i = 0; i < t->n_stored; i++) free(t->stored[i]);
    free(t->stored);
    free(t->db);
    free(t->body);
    free(t->text);
    free(t->ids);
    rlx_api_request_free(&t->req);
    free(t);
}

static void task_done(rlx_call *call, void *client, int status)
{
    route_task *t = (route_task *)call;
    rlx_conn *c = client;
    if (c) {
        if (status) {
            rlx_api_error e;
            rlx_api_error_shutdown(&e);
            rlx_conn_error(c, &e);
        } else {
            rlx_conn_respond(c, t->status, "application/json", t->body);
            t->body = NULL;
        }
        rlx_conn_wake(c);
    }
    task_free(t);
}

static route_task *task_new(rlx_conn *c, rlx_model_slot *m, task_kind kind)
{
    route_task *t = calloc(1, sizeof *t);
    if (!t) {
        rlx_api_error e;
        rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        rlx_conn_error(c, &e);
        return NULL;
    }
    t->m = m;
    if (m) rlx_srv_model_hold(m, NULL); /* until task_free */
    t->kind = kind;
    return t;
}

static void task_queue(rlx_conn *c, route_task *t)
{
    rlx_srv *s = c->srv;
    if (rlx_call_start(s, &t->call, t->text && strlen(t->text) > RLX_BIG_WORK_BYTES, c, &c->call, task_work,
                       task_done)) {
        rlx_api_error e;
        rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Cannot queue the work for this request.");
        rlx_conn_error(c, &e);
        task_free(t);
    }
}

void rlx_task_tokenize(rlx_conn *c, rlx_model_slot *m, char *text, bool add_special, bool parse_special, bool with_pieces)
{
    route_task *t = task_new(c, m, TASK_TOKENIZE);
    if (!t) { free(text); return; }
    t->text = text;
    t->add_special = add_special;
    t->parse_special = parse_special;
    t->with_pieces = with_pieces;
    task_queue(c, t);
}

void rlx_task_detokenize(rlx_conn *c, rlx_model_slot *m, int32_t *ids, size_t n)
{
    route_task *t = task_new(c, m, TASK_DETOKENIZE);
    if (!t) { free(ids); return; }
    t->ids = ids;
    t->n_ids = n;
    task_queue(c, t);
}

void rlx_task_template(rlx_conn *c, rlx_model_slot *m, rlx_api_request *r)
{
    route_task *t = task_new(c, m, TASK_TEMPLATE);
    if (!t) { rlx_api_request_free(r); return; }
    t->req = *r;
    memset(r, 0, sizeof *r);
    task_queue(c, t);
}

void rlx_task_sessions(rlx_conn *c, const char *id, bool del, size_t offset, size_t limit)
{
    route_task *t = task_new(c, NULL, id ? TASK_SESSION : TASK_SESSIONS);
    if (!t) return;
    if (id && !(t->text = strdup(id))) {
        task_free(t);
        rlx_api_error e;
        rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        rlx_conn_error(c, &e);
        return;
    }
    rlx_srv *s = c->srv;
    if (!(t->held = calloc(s->n_models ? s->n_models : 1, sizeof *t->held))) {
        task_free(t);
        rlx_api_error e;
        rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        rlx_conn_error(c, &e);
        return;
    }
    /* sessions live in the loaded models (an unloaded model's are in --db, or gone) */
    bool oom = !(t->stored = calloc(s->n_models ? s->n_models : 1, sizeof *t->stored));
    for (size_t m = 0; m < s->n_models && !oom; m++)
        if (s->models[m]->state == RLX_MODEL_READY) {
            rlx_srv_model_hold(s->models[m], NULL);
            t->held[t->n_held++] = s->models[m];
        } else if (s->cfg->db) {
            oom = !(t->stored[t->n_stored] = strdup(s->models[m]->cfg->name));
            t->n_stored += !oom;
        }
    if (s->cfg->db && !oom) oom = !(t->db = strdup(s->cfg->db));
    if (oom) {
        task_free(t);
        rlx_api_error e;
        rlx_api_errorf(&e, 500, RLX_API_ERR_SERVER, NULL, "Out of memory.");
        rlx_conn_error(c, &e);
        return;
    }
    t->ttl = s->cfg->session_ttl;
    t->del = del;
    t->offset = offset;
    t->limit = limit;
    task_queue(c, t);
}
